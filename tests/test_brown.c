/* test_brown.c - the Brown corpus loader (common/data/brown.c).
 *
 * What is checked, on tiny gzip files the tests write into a temporary
 * directory: tags are cut at the last '/' ("1/2/cd" is the word "1/2");
 * the parts are consecutive runs of the word stream with the sizes asked
 * for; the <unk> rule counts words in the training part only (or in the
 * whole corpus when asked); ids follow falling frequency; the chars view is
 * the text with a space between words and a newline after a sentence, its
 * alphabet taken from the training text; the bpe view is the same text cut
 * into words, its merges learned on the training words only, the parts
 * decoding to their words with single spaces and spelling as many
 * characters as the chars view's, its fingerprint changing with the merges;
 * prompts encode and decode; and
 * every broken file (missing, empty, not gzip, truncated, corrupt, no
 * words, bad lines, too few words) is refused with one clear message.
 *
 * Then the shipped data/brown.txt.gz: the counts data/README.md reports,
 * and those of the bpe view (run from the repository root, as make test
 * does). */
/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "data/brown.h"
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

/* ---- helpers ------------------------------------------------------------- */

static char tmp_dir[256];

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_brown");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

static void path_in_tmp(char *out, size_t outlen, const char *name) {
    snprintf(out, outlen, "%s/%s", tmp_dir, name);
}

/* Write text gzip-compressed to tmp_dir/name; path receives the full name. */
static void write_gz(char *path, size_t pathlen, const char *name, const char *text) {
    path_in_tmp(path, pathlen, name);
    gzFile gz = gzopen(path, "wb9");
    assert_non_null(gz);
    if (text[0] != '\0') assert_int_equal(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
    assert_int_equal(gzclose(gz), Z_OK);
}

/* Write bytes as they are. */
static void write_raw(char *path, size_t pathlen, const char *name, const void *bytes, size_t n) {
    path_in_tmp(path, pathlen, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The whole of a file's bytes (malloc'd). */
static unsigned char *read_raw(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *buf = malloc(1 << 20);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

static void assert_error_mentions(const char *needle) {
    if (strstr(last_error(), needle) == NULL)
        fail_msg("error \"%s\" does not mention \"%s\"", last_error(), needle);
}

/* Load path with a split of n_train / n_valid words. */
static int load(BrownCorpus *c, const char *path, BrownTokens kind, int n_train, int n_valid,
                int max_rare) {
    BrownConfig cfg;
    brown_defaults(&cfg, kind);
    cfg.path = path;
    cfg.n_train = n_train;
    cfg.n_valid = n_valid;
    cfg.max_rare = max_rare;
    return brown_load_config(c, &cfg);
}

/* Load path, which must fail, and check the message names it and says why. */
static void assert_refused(const char *path, const char *why) {
    BrownCorpus c;
    clear_error();
    assert_int_equal(load(&c, path, BROWN_WORDS, 2, 1, 0), -1);
    assert_error_mentions(path);
    assert_error_mentions(why);
    assert_null(c.tokens);         /* left empty */
    brown_free(&c);
}

/* Two files, three sentences, 15 words; "1/2/cd" is the word "1/2". */
static const char TINY[] =
    "# ca01\n"
    "\n"
    "\tThe/at cat/nn sat/vbd ./.\n"
    "\tThe/at dog/nn sat/vbd on/in 1/2/cd mats/nns ./. \n"
    "\n"
    "# ca02\n"
    "\tA/at cat/nn ran/vbd ./.\n";
static const char *TINY_WORDS[15] = {"The", "cat", "sat", ".", "The", "dog", "sat", "on",
                                      "1/2", "mats", ".", "A", "cat", "ran", "."};

/* ---- the tiny corpus ------------------------------------------------------ */

static void test_tags_cut_at_the_last_slash(void **state) {
    (void)state;
    char path[512];
    write_gz(path, sizeof path, "tiny.gz", TINY);
    BrownCorpus c;
    /* Everything but the last 2 words in train, max_rare 0: every training word kept. */
    if (load(&c, path, BROWN_WORDS, 13, 0, 0) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.n_files, 2);
    assert_int_equal(c.n_sentences, 3);
    assert_int_equal(c.n_words, 15);
    assert_int_equal(c.n_types, 10);
    assert_int_equal(c.n_train_types, 9);    /* "ran" is only in the test part */
    for (int i = 0; i < 13; i++) assert_string_equal(brown_token(&c, c.train.ids[i]), TINY_WORDS[i]);
    assert_int_equal(c.test.ids[0], BROWN_UNK);                      /* "ran" */
    assert_string_equal(brown_token(&c, c.test.ids[1]), ".");
    assert_int_not_equal(brown_id(&c, "1/2"), BROWN_UNK);
    assert_int_equal(brown_id(&c, "1/2/cd"), BROWN_UNK);
    brown_free(&c);
}

static void test_split_is_three_runs_of_the_stream(void **state) {
    (void)state;
    char path[512];
    write_gz(path, sizeof path, "tiny.gz", TINY);
    BrownCorpus c;
    if (load(&c, path, BROWN_WORDS, 8, 4, 0) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.train.n, 8);
    assert_int_equal(c.valid.n, 4);
    assert_int_equal(c.test.n, 3);
    assert_int_equal(c.train.n_words + c.valid.n_words + c.test.n_words, c.n_words);
    const BrownPart *parts[3] = {&c.train, &c.valid, &c.test};
    int k = 0;
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < parts[p]->n; i++, k++) {
            int id = parts[p]->ids[i];
            /* Words of valid/test not among the training words are <unk>. */
            const char *want = brown_id(&c, TINY_WORDS[k]) == BROWN_UNK ? "<unk>" : TINY_WORDS[k];
            assert_string_equal(brown_token(&c, id), want);
        }
    assert_int_equal(c.valid.n_unk, 3);      /* "1/2", "mats", "A" */
    assert_int_equal(c.test.n_unk, 1);       /* "ran" */
    brown_free(&c);
}

/* a a a b b c | c c | b c c c: in training a 3 times, b 2, c 1. */
static const char COUNTS[] =
    "# ca01\n"
    "\ta/x a/x a/x b/x b/x c/x\n"
    "\tc/x c/x\n"
    "\tb/x c/x c/x c/x\n";

static void test_unk_rule_counts_the_training_part_only(void **state) {
    (void)state;
    char path[512];
    write_gz(path, sizeof path, "counts.gz", COUNTS);
    BrownCorpus c;
    /* At most 2 times in training -> <unk>: only a stays, though c is the
     * most frequent word of the whole corpus. */
    if (load(&c, path, BROWN_WORDS, 6, 2, 2) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.V, 2);
    assert_string_equal(brown_token(&c, 0), "<unk>");
    assert_string_equal(brown_token(&c, 1), "a");
    assert_int_equal(c.train.n_unk, 3);
    assert_int_equal(c.valid.n_unk, 2);
    assert_int_equal(c.test.n_unk, 4);
    brown_free(&c);

    /* At most 1 time: a and b stay, a first (3 > 2). */
    if (load(&c, path, BROWN_WORDS, 6, 2, 1) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.V, 3);
    assert_string_equal(brown_token(&c, 1), "a");
    assert_string_equal(brown_token(&c, 2), "b");
    brown_free(&c);

    /* Counted on the whole corpus: c 6, then a and b 3 each in byte order. */
    BrownConfig cfg;
    brown_defaults(&cfg, BROWN_WORDS);
    cfg.path = path;
    cfg.n_train = 6;
    cfg.n_valid = 2;
    cfg.max_rare = 2;
    cfg.vocab_from_all = 1;
    if (brown_load_config(&c, &cfg) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.V, 4);
    assert_string_equal(brown_token(&c, 1), "c");
    assert_string_equal(brown_token(&c, 2), "a");
    assert_string_equal(brown_token(&c, 3), "b");
    assert_int_equal(c.train.n_unk + c.valid.n_unk + c.test.n_unk, 0);
    brown_free(&c);
}

static void test_chars_view(void **state) {
    (void)state;
    char path[512];
    write_gz(path, sizeof path, "tiny.gz", TINY);
    BrownCorpus c;
    if (load(&c, path, BROWN_CHARS, 4, 7, 0) != 0) fail_msg("%s", last_error());
    /* Train "The cat sat .\n": ' ' '\n' '.' T a c e h s t, + <unk>. */
    assert_int_equal(c.V, 11);
    assert_int_equal(c.train.n, 14);
    assert_int_equal(c.train.n_words, 4);
    char text[256];
    assert_int_equal(brown_decode(&c, c.train.ids, c.train.n, text, sizeof text), 0);
    assert_string_equal(text, "The cat sat .\n");
    assert_string_equal(brown_token(&c, 1), "\n");     /* byte order: '\n' < ' ' < '.' */
    assert_string_equal(brown_token(&c, 2), " ");
    assert_int_equal(c.train.n_unk, 0);

    /* Valid "The dog sat on 1/2 mats .\n": d o g n 1 / 2 m are not in training. */
    assert_int_equal(c.valid.n, (int)strlen("The dog sat on 1/2 mats .\n"));
    assert_int_equal(c.valid.n_unk, 9);                 /* d o g o n 1 / 2 m */
    /* Test "A cat ran .\n": A, r and n are not in training. */
    assert_int_equal(c.test.n, 12);
    assert_int_equal(c.test.n_words, 4);
    assert_int_equal(brown_decode(&c, c.test.ids, c.test.n, text, sizeof text), 0);
    assert_string_equal(text, "<unk> cat <unk>a<unk> .\n");
    brown_free(&c);
}

static void test_encode_and_decode(void **state) {
    (void)state;
    char path[512];
    write_gz(path, sizeof path, "tiny.gz", TINY);
    BrownCorpus c;
    if (load(&c, path, BROWN_WORDS, 13, 0, 0) != 0) fail_msg("%s", last_error());
    int ids[8];
    assert_int_equal(brown_encode(&c, "  The cat\tzebra\n.", ids, 8), 4);
    assert_int_equal(ids[0], brown_id(&c, "The"));
    assert_int_equal(ids[2], BROWN_UNK);
    char text[64];
    assert_int_equal(brown_decode(&c, ids, 4, text, sizeof text), 0);
    assert_string_equal(text, "The cat <unk> .");
    assert_int_equal(brown_decode(&c, ids, 4, text, 6), -1);   /* does not fit */
    assert_string_equal(text, "The c");
    assert_int_equal(brown_encode(&c, "   ", ids, 8), 0);
    assert_int_equal(brown_encode(&c, "a b c", ids, 2), -1);
    assert_error_mentions("more than 2 tokens");
    brown_free(&c);

    if (load(&c, path, BROWN_CHARS, 13, 0, 0) != 0) fail_msg("%s", last_error());
    assert_int_equal(brown_encode(&c, "cat!", ids, 8), 4);
    assert_int_equal(ids[3], BROWN_UNK);
    assert_int_equal(brown_decode(&c, ids, 3, text, sizeof text), 0);
    assert_string_equal(text, "cat");
    brown_free(&c);
}

/* Load path in the bpe view with a split of n_train / n_valid words and merges merges. */
static int load_bpe(BrownCorpus *c, const char *path, int n_train, int n_valid, int merges) {
    BrownConfig cfg;
    brown_defaults(&cfg, BROWN_BPE);
    cfg.path = path;
    cfg.n_train = n_train;
    cfg.n_valid = n_valid;
    cfg.bpe_merges = merges;
    return brown_load_config(c, &cfg);
}

static void test_bpe_view(void **state) {
    (void)state;
    char path[512], text[256];
    write_gz(path, sizeof path, "tiny.gz", TINY);
    BrownCorpus c, ch;
    BrownConfig dflt;
    brown_defaults(&dflt, BROWN_BPE);
    assert_int_equal(dflt.bpe_merges, BROWN_BPE_MERGES);
    /* Train "The cat sat .": only "a t" (cat, sat) then "at </w>" occur twice,
     * so learning stops after 2 merges of the 2000 asked for. */
    if (load_bpe(&c, path, 4, 7, BROWN_BPE_MERGES) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.kind, BROWN_BPE);
    assert_int_equal(c.unk, BPE_UNK);
    assert_int_equal(c.bpe.n_merges, 2);
    assert_int_equal(c.V, BPE_FIRST_CHAR + 8 + 2);           /* . T a c e h s t, "at", "at</w>" */
    assert_string_equal(brown_token(&c, BPE_UNK), "<unk>");
    assert_string_equal(brown_token(&c, BPE_END_OF_WORD), "</w>");
    assert_string_equal(brown_token(&c, c.V - 1), "at</w>");
    assert_int_equal(brown_id(&c, "at</w>"), c.V - 1);
    assert_int_equal(brown_id(&c, "zebra"), BPE_UNK);
    /* T h e </w> | c at</w> | s at</w> | . </w> */
    assert_int_equal(c.train.n, 10);
    assert_int_equal(c.train.n_words, 4);
    assert_int_equal(c.train.n_unk, 0);
    assert_int_equal(brown_decode(&c, c.train.ids, c.train.n, text, sizeof text), 0);
    assert_string_equal(text, "The cat sat .");               /* the newline is a word end like the spaces */

    /* Each part spells the characters of the chars view's part (the parts
     * hold one-byte characters only, so <unk> counts right too). */
    if (load(&ch, path, BROWN_CHARS, 4, 7, 0) != 0) fail_msg("%s", last_error());
    const BrownPart *parts[3] = {&c.train, &c.valid, &c.test}, *char_parts[3] = {&ch.train, &ch.valid, &ch.test};
    for (int p = 0; p < 3; p++) {
        assert_int_equal(parts[p]->n_chars, char_parts[p]->n);
        assert_int_equal(brown_chars(&c, parts[p]->ids, parts[p]->n), char_parts[p]->n);
        assert_int_equal(parts[p]->n_unk, char_parts[p]->n_unk);   /* d o g o n 1 / 2 m; A r n */
        assert_int_equal(parts[p]->n_words, char_parts[p]->n_words);
    }
    assert_int_equal(brown_chars(&ch, ch.test.ids, ch.test.n), ch.test.n);
    assert_int_equal(brown_decode(&c, c.valid.ids, c.valid.n, text, sizeof text), 0);
    assert_string_equal(text, "The <unk><unk><unk> sat <unk><unk> <unk><unk><unk> <unk>ats .");
    assert_int_equal(brown_decode(&c, c.test.ids, c.test.n, text, sizeof text), 0);
    assert_string_equal(text, "<unk> cat <unk>a<unk> .");
    brown_free(&ch);

    /* Text round trip: the decoded training part encodes to its ids again;
     * an unknown character is <unk>, a word longer than BPE allows an error. */
    int ids[32];
    assert_int_equal(brown_decode(&c, c.train.ids, c.train.n, text, sizeof text), 0);
    assert_int_equal(brown_encode(&c, text, ids, 32), c.train.n);
    assert_memory_equal(ids, c.train.ids, sizeof(int) * (size_t)c.train.n);
    assert_int_equal(brown_encode(&c, " cat!\n", ids, 32), 4);     /* c at ! </w> */
    assert_int_equal(ids[2], BPE_UNK);
    assert_string_equal(brown_token(&c, ids[1]), "at");
    assert_int_equal(brown_chars(&c, ids, 4), 5);                   /* c a t ! and its space */
    assert_int_equal(brown_encode(&c, "a b c", ids, 2), -1);
    assert_int_equal(brown_encode(&c, "   ", ids, 2), 0);
    assert_int_equal(brown_decode(&c, c.train.ids, c.train.n, text, 6), -1);   /* does not fit */
    assert_string_equal(text, "The c");
    brown_free(&c);

    /* The fingerprint is the merges': the same settings give the same value,
     * fewer merges another (and no merges the characters alone). */
    BrownCorpus one, none;
    if (load_bpe(&c, path, 4, 7, 2) != 0 || load_bpe(&one, path, 4, 7, 1) != 0 || load_bpe(&none, path, 4, 7, 0) != 0)
        fail_msg("%s", last_error());
    assert_int_equal(one.bpe.n_merges, 1);
    assert_int_equal(none.V, BPE_FIRST_CHAR + 8);
    assert_int_equal(brown_vocab_crc(&c), bpe_crc(&c.bpe));
    assert_int_not_equal(brown_vocab_crc(&c), brown_vocab_crc(&one));
    assert_int_not_equal(brown_vocab_crc(&one), brown_vocab_crc(&none));
    BrownCorpus again;
    if (load_bpe(&again, path, 4, 7, 2) != 0) fail_msg("%s", last_error());
    assert_int_equal(brown_vocab_crc(&again), brown_vocab_crc(&c));
    /* the merges are the training part's: more training words, other merges ("The" twice: "T h", ...) */
    brown_free(&again);
    if (load_bpe(&again, path, 13, 0, 2) != 0) fail_msg("%s", last_error());
    assert_int_not_equal(brown_vocab_crc(&again), brown_vocab_crc(&c));
    assert_int_equal(brown_decode(&again, again.train.ids, again.train.n, text, sizeof text), 0);
    assert_string_equal(text, "The cat sat . The dog sat on 1/2 mats . A cat");
    brown_free(&again);
    brown_free(&c);
    brown_free(&one);
    brown_free(&none);

    /* A training word BPE refuses, and a negative number of merges. */
    write_gz(path, sizeof path, "latin1.gz", "# ca01\n\tcaf\xe9/nn sat/vbd ./. a/at\n");
    assert_int_equal(load_bpe(&c, path, 2, 1, 10), -1);
    assert_error_mentions(path);
    assert_error_mentions("not UTF-8");
    assert_null(c.tokens);
    brown_free(&c);
    assert_int_equal(load_bpe(&c, path, 2, 1, -1), -1);
    assert_error_mentions("-1 BPE merges");
}

/* ---- broken files --------------------------------------------------------- */

static void test_missing_empty_and_plain_files(void **state) {
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "no_such_file.gz");
    assert_refused(path, "No such file");
    write_raw(path, sizeof path, "empty.gz", "", 0);
    assert_refused(path, "is empty");
    write_raw(path, sizeof path, "plain.gz", TINY, strlen(TINY));
    assert_refused(path, "not a gzip file");
}

static void test_truncated_and_corrupt_gzip(void **state) {
    (void)state;
    char path[512], cut[512];
    write_gz(path, sizeof path, "whole.gz", TINY);
    size_t n;
    unsigned char *bytes = read_raw(path, &n);
    /* Cut inside the header, inside the data, inside the 8-byte trailer. */
    size_t cuts[4] = {5, 12, n / 2, n - 3};
    for (int k = 0; k < 4; k++) {
        write_raw(cut, sizeof cut, "cut.gz", bytes, cuts[k]);
        assert_refused(cut, "truncated");
    }
    /* A changed byte of the stored CRC: the data decompresses but is wrong. */
    bytes[n - 6] ^= 0x55;
    write_raw(cut, sizeof cut, "crc.gz", bytes, n);
    assert_refused(cut, "corrupt");
    free(bytes);
}

static void test_files_without_words_or_with_bad_lines(void **state) {
    (void)state;
    char path[512];
    write_gz(path, sizeof path, "nothing.gz", "");
    assert_refused(path, "holds no words");
    write_gz(path, sizeof path, "headers.gz", "# ca01\n\n# ca02\n\t\n");
    assert_refused(path, "holds no words");
    write_gz(path, sizeof path, "noslash.gz", "# ca01\n\tThe/at cat sat/vbd\n");
    assert_refused(path, "line 2: the token 'cat' has no '/'");
    write_gz(path, sizeof path, "noword.gz", "# ca01\n\n\n\tThe/at /nn\n");
    assert_refused(path, "line 4: the token '/nn' has an empty word");
    write_gz(path, sizeof path, "notag.gz", "# ca01\n\tThe/at cat/\n");
    assert_refused(path, "has an empty tag");
    write_gz(path, sizeof path, "noheader.gz", "\tThe/at cat/nn sat/vbd\n");
    assert_refused(path, "before the first file header");
    write_gz(path, sizeof path, "badheader.gz", "#ca01\n\tThe/at cat/nn sat/vbd\n");
    assert_refused(path, "line 1: expected a file header");
    write_gz(path, sizeof path, "order.gz", "# ca02\n\tThe/at cat/nn\n# ca01\n\tsat/vbd ./.\n");
    assert_refused(path, "line 3: file 'ca01' comes after 'ca02'");
    write_gz(path, sizeof path, "few.gz", "# ca01\n\tThe/at cat/nn sat/vbd\n");
    assert_refused(path, "has 3 words, too few for 2 training + 1 validation words");
}

static void test_bad_settings(void **state) {
    (void)state;
    BrownCorpus c;
    assert_int_equal(load(&c, NULL, BROWN_WORDS, 0, 1, 3), -1);
    assert_error_mentions("bad split");
    assert_int_equal(load(&c, NULL, BROWN_WORDS, 10, -1, 3), -1);
    assert_int_equal(load(&c, NULL, (BrownTokens)7, 10, 1, 3), -1);
    assert_error_mentions("unknown token kind");
}

/* ---- the shipped corpus --------------------------------------------------- */

static void test_shipped_corpus_words(void **state) {
    (void)state;
    BrownCorpus c;
    if (brown_load(&c, NULL, BROWN_WORDS) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.n_files, 500);
    assert_int_equal(c.n_sentences, 57340);
    assert_int_equal(c.n_words, 1161192);
    assert_int_equal(c.n_types, 56057);
    assert_int_equal(c.n_train_types, 46187);
    assert_int_equal(c.train.n, 800000);
    assert_int_equal(c.valid.n, 200000);
    assert_int_equal(c.test.n, 161192);
    assert_int_equal(c.V, 14114);
    assert_int_equal(c.train.n_unk, 46098);
    assert_int_equal(c.valid.n_unk, 18563);
    assert_int_equal(c.test.n_unk, 14799);
    assert_string_equal(brown_token(&c, 1), "the");
    assert_string_equal(brown_token(&c, 2), ",");
    char text[128];
    assert_int_equal(brown_decode(&c, c.train.ids, 6, text, sizeof text), 0);
    /* "Jury" (capital J) is in the training part 3 times: <unk>. */
    assert_string_equal(text, "The Fulton County Grand <unk> said");
    brown_free(&c);

    /* The published replication's rule (frequencies over all 1,161,192 words). */
    BrownConfig cfg;
    brown_defaults(&cfg, BROWN_WORDS);
    cfg.vocab_from_all = 1;
    if (brown_load_config(&c, &cfg) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.V, 17905);
    brown_free(&c);
}

static void test_shipped_corpus_chars(void **state) {
    (void)state;
    BrownCorpus c;
    if (brown_load(&c, "data/brown.txt.gz", BROWN_CHARS) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.train.n_words, 800000);
    assert_int_equal(c.valid.n_words, 200000);
    assert_int_equal(c.test.n_words, 161192);
    assert_int_equal(c.train.n, 4333993);
    assert_int_equal(c.valid.n, 1012550);
    assert_int_equal(c.test.n, 780531);
    assert_int_equal(c.V, 86);
    assert_int_equal(c.valid.n_unk + c.test.n_unk, 0);
    char text[128];
    assert_int_equal(brown_decode(&c, c.train.ids, 33, text, sizeof text), 0);
    assert_string_equal(text, "The Fulton County Grand Jury said");
    brown_free(&c);
}

static void test_shipped_corpus_bpe(void **state) {
    (void)state;
    BrownCorpus c;
    if (brown_load(&c, NULL, BROWN_BPE) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.bpe.n_merges, 2000);
    assert_int_equal(c.bpe.n_chars, 83);        /* the chars view's 86 but <unk>, space and newline */
    assert_int_equal(c.V, 2088);
    assert_int_equal(c.train.n, 1323556);
    assert_int_equal(c.valid.n, 321371);
    assert_int_equal(c.test.n, 252390);
    assert_int_equal(c.train.n_unk + c.valid.n_unk + c.test.n_unk, 0);
    /* the characters the pieces spell: the chars view's parts exactly */
    assert_int_equal(brown_chars(&c, c.train.ids, c.train.n), 4333993);
    assert_int_equal(brown_chars(&c, c.valid.ids, c.valid.n), 1012550);
    assert_int_equal(brown_chars(&c, c.test.ids, c.test.n), 780531);
    char text[128];
    assert_int_equal(brown_decode(&c, c.train.ids, 12, text, sizeof text), 0);
    assert_string_equal(text, "The Fulton County Grand Jury");
    brown_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tags_cut_at_the_last_slash),
        cmocka_unit_test(test_split_is_three_runs_of_the_stream),
        cmocka_unit_test(test_unk_rule_counts_the_training_part_only),
        cmocka_unit_test(test_chars_view),
        cmocka_unit_test(test_encode_and_decode),
        cmocka_unit_test(test_bpe_view),
        cmocka_unit_test(test_missing_empty_and_plain_files),
        cmocka_unit_test(test_truncated_and_corrupt_gzip),
        cmocka_unit_test(test_files_without_words_or_with_bad_lines),
        cmocka_unit_test(test_bad_settings),
        cmocka_unit_test(test_shipped_corpus_words),
        cmocka_unit_test(test_shipped_corpus_chars),
        cmocka_unit_test(test_shipped_corpus_bpe),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
