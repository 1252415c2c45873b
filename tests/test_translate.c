/* test_translate.c - the translate task (common/data/task_translate.c):
 * English -> Spanish verses as BPE tokens.
 *
 * What is checked. On a tiny verse file the test writes: the parts (the
 * training verses within the word range, valid and test without
 * near-duplicates, of any length), the vocabularies equal to the BPEs id for
 * id, each example's reference kept as printed, a character unseen in
 * training becoming <unk> while the reference text stays whole, typed text
 * encoded and output decoded. The vocabularies read back from a
 * checkpoint's text give the same ids; a text whose train_crc is not the
 * file's, or that lacks the Spanish vocabulary, is refused with one message
 * naming it. Then the shipped data/bible_en_es.tsv.gz (run from the
 * repository root, as make test does): the parts' sizes and every verse's
 * tokens decoding back to its text. */
/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "data/bible.h"
#include "data/bpe.h"
#include "data/dataset.h"
#include "util/error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <cmocka.h>

#include "temp_dir.h"

static char tmp_dir[256];

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_translate");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

static void expect_error(const char *needle) {
    if (strstr(last_error(), needle) == NULL)
        fail_msg("error \"%s\" does not mention \"%s\"", last_error(), needle);
    clear_error();
}

/* A verse file of its own: two training chapters (one verse of 12 words),
 * a valid verse, two test verses (one near-duplicate, one with a character
 * no training verse has: 'ñ' and 'z'). */
static const char *const TINY =
    BIBLE_HEADER "\n"
    "train\tGenesis\t1\t1\t0\tthe king went to the house.\ty el rey fue a la casa.\n"
    "train\tGenesis\t1\t2\t0\tthe king saw the house.\ty el rey vio la casa.\n"
    "train\tGenesis\t2\t1\t0\tthe house of the king was great and the king was glad.\t"
    "la casa del rey era grande y el rey se alegró.\n"
    "valid\tExodus\t1\t1\t0\tthe king went.\tel rey fue.\n"
    "test\tExodus\t2\t1\t1\tthe king saw the house.\ty el rey vio la casa.\n"
    "test\tExodus\t2\t2\t0\tthe king saw zion.\tel rey vio a Sión, niño.\n";

static void write_tiny(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/bible_en_es.tsv.gz", tmp_dir);
    gzFile f = gzopen(path, "wb1");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, TINY, (unsigned)strlen(TINY)), (int)strlen(TINY));
    assert_int_equal(gzclose(f), Z_OK);
}

static void tiny_config(TaskConfig *tc) {
    if (task_defaults(tc, "translate") != 0) fail_msg("%s", last_error());
    tc->data_dir = tmp_dir;
    tc->max_len = 10;      /* the 12-word training verse is left out */
    tc->bpe_merges = 20;
}

static void test_tiny_parts(void **state) {
    (void)state;
    write_tiny();
    TaskConfig tc;
    tiny_config(&tc);
    Dataset d;
    if (dataset_load(&d, &tc) != 0) fail_msg("%s", last_error());
    assert_string_equal(d.task, "translate");
    assert_int_equal(d.train.n, 2);   /* 12 words > max_len 10 */
    assert_int_equal(d.valid.n, 1);
    assert_int_equal(d.test.n, 1);    /* the near-duplicate is left out */
    assert_int_equal(d.src_vocab.size, d.src_bpe->V);
    assert_int_equal(d.tgt_vocab.size, d.tgt_bpe->V);
    char piece[64];
    for (int id = 0; id < d.tgt_bpe->V; id++)
        assert_string_equal(vocab_token(&d.tgt_vocab, id), id < BPE_END_OF_WORD
                                                               ? vocab_token(&d.tgt_vocab, id)
                                                               : bpe_piece(d.tgt_bpe, id, piece, sizeof piece));
    const Example *e = &d.test.ex[0];
    assert_string_equal(e->src_text, "the king saw zion.");
    assert_string_equal(e->tgt_text, "el rey vio a Sión, niño.");   /* the reference as printed */
    int unk = 0;
    for (int i = 0; i < e->tgt_len; i++) unk += e->tgt[i] == UNK_ID;
    assert_true(unk >= 3);   /* S, ó and ñ: no training verse has them */
    char text[256];
    dataset_decode_target(&d, d.train.ex[0].tgt, d.train.ex[0].tgt_len, text, sizeof text);
    assert_string_equal(text, "y el rey fue a la casa.");
    /* typed text: BPE pieces, an unknown character as <unk>; never an error */
    int ids[64], n = 0;
    assert_int_equal(dataset_encode_source(&d, "the king ran.", ids, 64, &n), 0);
    assert_true(n >= 3);
    assert_int_equal(dataset_encode_source(&d, "the king ran.", ids, 2, &n), -1);
    expect_error("at most 2 tokens");
    assert_int_equal(dataset_encode_source(&d, "   ", ids, 64, &n), -1);
    expect_error("blank");
    dataset_free(&d);

    tc.min_len = 0;
    assert_int_equal(dataset_load(&d, &tc), -1);
    expect_error("1 <= min_len <= max_len");
    tiny_config(&tc);
    tc.max_len = 3;   /* no training verse that short */
    assert_int_equal(dataset_load(&d, &tc), -1);
    expect_error("0 training verses");
}

/* The config text a checkpoint keeps for the task (the driver's task_lines). */
static char *saved_text(const Dataset *d, uint32_t crc, int with_target) {
    char *src = bpe_to_text(d->src_bpe, "src_"), *tgt = bpe_to_text(d->tgt_bpe, "tgt_");
    size_t n = strlen(src) + strlen(tgt) + 64;
    char *text = malloc(n);
    snprintf(text, n, "task=translate\ntrain_crc=%08x\n%s%s", crc, src, with_target ? tgt : "");
    free(src);
    free(tgt);
    return text;
}

static void test_saved_vocabularies(void **state) {
    (void)state;
    write_tiny();
    TaskConfig tc;
    tiny_config(&tc);
    Dataset learned, saved;
    if (dataset_load(&learned, &tc) != 0) fail_msg("%s", last_error());
    char *text = saved_text(&learned, learned.train_crc, 1);
    tc.saved_bpe = text;
    tc.bpe_merges = 1;   /* not used: the vocabularies are the text's */
    if (dataset_load(&saved, &tc) != 0) fail_msg("%s", last_error());
    assert_int_equal(saved.src_vocab.size, learned.src_vocab.size);
    assert_int_equal(saved.tgt_vocab.size, learned.tgt_vocab.size);
    assert_int_equal(saved.test.ex[0].src_len, learned.test.ex[0].src_len);
    assert_memory_equal(saved.test.ex[0].src, learned.test.ex[0].src, sizeof(int) * (size_t)saved.test.ex[0].src_len);
    dataset_free(&saved);
    free(text);

    text = saved_text(&learned, learned.train_crc ^ 1u, 1);   /* learned on other verses */
    tc.saved_bpe = text;
    assert_int_equal(dataset_load(&saved, &tc), -1);
    expect_error("train_crc");
    free(text);
    text = saved_text(&learned, learned.train_crc, 0);   /* the Spanish vocabulary missing */
    tc.saved_bpe = text;
    assert_int_equal(dataset_load(&saved, &tc), -1);
    expect_error("tgt_bpe_alphabet");
    free(text);
    dataset_free(&learned);
}

/* The shipped file: the parts' sizes (data/README.md's, less the training
 * verses over 40 words and the near-duplicates), every verse's tokens
 * decoding back to its text unless a character is unknown. */
static void test_shipped_corpus(void **state) {
    (void)state;
    TaskConfig tc;
    if (task_defaults(&tc, "translate") != 0) fail_msg("%s", last_error());
    Dataset d;
    if (dataset_load(&d, &tc) != 0) fail_msg("%s", last_error());
    assert_int_equal(d.train.n, 1567 + 10525 + 8945 + 4732 - 0);   /* 1-40 words */
    assert_int_equal(d.valid.n, 1576 - 58);
    assert_int_equal(d.test.n, 1483 - 58);
    int longest = 0, unknown = 0;
    char text[8192];
    for (int i = 0; i < d.test.n; i++) {
        const Example *e = &d.test.ex[i];
        int words = bible_words(e->src_text), unk = 0;
        if (words > longest) longest = words;
        for (int k = 0; k < e->tgt_len; k++) unk += e->tgt[k] == UNK_ID;
        unknown += unk > 0;
        dataset_decode_target(&d, e->tgt, e->tgt_len, text, sizeof text);
        if (unk == 0 && strcmp(text, e->tgt_text) != 0) fail_msg("test verse %d: \"%s\" decodes as \"%s\"", i,
                                                                  e->tgt_text, text);
    }
    assert_true(longest > 40);        /* the test verses keep every length */
    assert_true(unknown < d.test.n / 20);
    for (int i = 0; i < d.train.n; i++) assert_true(bible_words(d.train.ex[i].src_text) <= TRANSLATE_MAX_WORDS);
    dataset_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_parts),
        cmocka_unit_test(test_saved_vocabularies),
        cmocka_unit_test(test_shipped_corpus),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
