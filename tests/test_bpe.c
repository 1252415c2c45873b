/* test_bpe.c - byte-pair encoding (common/data/bpe.c).
 *
 * What is checked: the textbook example of Sennrich et al. 2016 (the words
 * low, lower, newest, widest seen 5, 2, 6 and 3 times) gives the paper's
 * first five merges (e s, es t, est </w>, l o, lo w) and then the rest by the
 * stated tie rule (byte order), until every word is one symbol; the unseen
 * word "lowest" falls back to the pieces low + est</w>; an unknown character
 * becomes <unk>; encoding then decoding gives the text back; the text form
 * for a checkpoint reads back to the same merges, ids and fingerprint; no
 * two ids are the same piece; and bad words, bad counts,
 * bad saved forms and a too small output are refused with one message. */
/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "data/bpe.h"
#include "util/error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void expect_error(const char *needle) {
    if (strstr(last_error(), needle) == NULL)
        fail_msg("error \"%s\" does not mention \"%s\"", last_error(), needle);
    clear_error();
}

static const char *const TEXTBOOK_WORDS[] = {"low", "lower", "newest", "widest"};
static const long TEXTBOOK_COUNTS[] = {5, 2, 6, 3};

static void learn_textbook(Bpe *b, int merges) {
    if (bpe_learn(b, TEXTBOOK_WORDS, TEXTBOOK_COUNTS, 4, merges) != 0) fail_msg("%s", last_error());
}

/* "left right" of merge m, as the text form writes it. */
static const char *merge_text(const Bpe *b, int m, char *out, int cap) {
    char l[64], r[64];
    snprintf(out, (size_t)cap, "%s %s", bpe_piece(b, b->merge_left[m], l, sizeof l),
             bpe_piece(b, b->merge_right[m], r, sizeof r));
    return out;
}

static void test_textbook_merges(void **state) {
    (void)state;
    Bpe b;
    learn_textbook(&b, 100);
    /* The paper's first five, then ties by byte order: (e,w) before (n,e)
     * and (w,est</w>) at count 6, then (ew,est</w>) before (n,ew);
     * (d,est</w>) before (i,d) and (w,i) at 3; (e,r) before (low,e) and
     * (r,</w>) at 2. tools/bpe_check.py's Python gives the same 15. */
    static const char *const expected[] = {"e s",         "es t",        "est </w>",   "l o",
                                           "lo w",        "e w",         "ew est</w>", "n ewest</w>",
                                           "low </w>",    "d est</w>",   "i dest</w>", "w idest</w>",
                                           "e r",         "er </w>",     "low er</w>"};
    static const long counts[] = {9, 9, 9, 7, 7, 6, 6, 6, 5, 3, 3, 3, 2, 2, 2};
    assert_int_equal(b.n_merges, 15);                 /* then every word is one symbol */
    char got[128];
    for (int m = 0; m < 15; m++) {
        assert_string_equal(merge_text(&b, m, got, sizeof got), expected[m]);
        assert_int_equal(b.merge_count[m], counts[m]);
    }
    /* ids: 4 </w>, 5.. the alphabet d e i l n o r s t w, then the new symbols. */
    assert_int_equal(b.n_chars, 10);
    char piece[64];
    assert_string_equal(bpe_piece(&b, BPE_END_OF_WORD, piece, sizeof piece), "</w>");
    assert_string_equal(bpe_piece(&b, BPE_FIRST_CHAR, piece, sizeof piece), "d");
    assert_string_equal(bpe_piece(&b, BPE_FIRST_CHAR + 9, piece, sizeof piece), "w");
    assert_string_equal(bpe_piece(&b, BPE_FIRST_CHAR + 10, piece, sizeof piece), "es");
    assert_int_equal(b.V, 5 + 10 + 15);
    assert_string_equal(bpe_piece(&b, b.V - 1, piece, sizeof piece), "lower</w>");
    assert_string_equal(bpe_piece(&b, BPE_UNK, piece, sizeof piece), "<unk>");
    assert_string_equal(bpe_piece(&b, b.V, piece, sizeof piece), "?");
    bpe_free(&b);
}

static void test_encode_unseen_word_and_character(void **state) {
    (void)state;
    Bpe b;
    learn_textbook(&b, 5);                            /* e s, es t, est </w>, l o, lo w */
    int ids[16], unk = -1;
    char piece[64], text[64];
    int n = bpe_encode(&b, "lowest", ids, 16, &unk);
    assert_int_equal(n, 2);
    assert_string_equal(bpe_piece(&b, ids[0], piece, sizeof piece), "low");
    assert_string_equal(bpe_piece(&b, ids[1], piece, sizeof piece), "est</w>");
    assert_int_equal(unk, 0);
    n = bpe_encode(&b, "  lowz  wet ", ids, 16, &unk);   /* z was never seen */
    assert_int_equal(n, 7);                            /* low <unk> </w>  w e t </w> */
    assert_int_equal(ids[1], BPE_UNK);
    assert_int_equal(ids[2], BPE_END_OF_WORD);
    assert_int_equal(unk, 1);
    assert_int_equal(bpe_decode(&b, ids, n, text, sizeof text), 0);
    assert_string_equal(text, "low<unk> wet");
    /* A byte that is not UTF-8 is one unknown character. */
    n = bpe_encode(&b, "l\xff", ids, 16, &unk);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], BPE_UNK);
    assert_int_equal(bpe_encode(&b, "   ", ids, 16, &unk), 0);
    bpe_free(&b);
}

static void test_round_trip(void **state) {
    (void)state;
    const char *texts[] = {"En el principio crió Dios los cielos y la tierra.",
                           "Y la tierra estaba desordenada y vacía, y las tinieblas estaban sobre la haz del abismo.",
                           "¿Conque Dios os ha dicho: No comáis de todo árbol del huerto?"};
    Bpe b;
    if (bpe_learn_texts(&b, texts, 3, 20) != 0) fail_msg("%s", last_error());
    assert_int_equal(b.n_merges, 20);
    int ids[256];
    char out[512];
    for (int t = 0; t < 3; t++) {
        int unk = -1;
        int n = bpe_encode(&b, texts[t], ids, 256, &unk);
        assert_true(n > 0);
        assert_int_equal(unk, 0);
        for (int i = 0; i < n; i++) assert_true(ids[i] >= BPE_END_OF_WORD && ids[i] < b.V);
        assert_int_equal(bpe_decode(&b, ids, n, out, sizeof out), 0);
        assert_string_equal(out, texts[t]);
    }
    /* Unseen words built from seen characters come back too. */
    int n = bpe_encode(&b, "la tierra  vacía\tdel cielo", ids, 256, NULL);
    assert_int_equal(bpe_decode(&b, ids, n, out, sizeof out), 0);
    assert_string_equal(out, "la tierra vacía del cielo");
    /* Specials other than <unk> are skipped; a too small buffer is an error. */
    int with_bos[3] = {BPE_BOS, ids[0], BPE_EOS};
    assert_int_equal(bpe_decode(&b, with_bos, 3, out, sizeof out), 0);
    assert_int_equal(bpe_decode(&b, ids, n, out, 5), -1);
    expect_error("longer than the 5 bytes");
    assert_int_equal(bpe_encode(&b, texts[0], ids, 3, NULL), -1);
    expect_error("more than the 3 there is room for");
    bpe_free(&b);
}

static void test_text_form_round_trip(void **state) {
    (void)state;
    Bpe b, c;
    learn_textbook(&b, 100);
    char *text = bpe_to_text(&b, "");
    assert_non_null(strstr(text, "bpe_alphabet=deilnorstw\nbpe_merges=15\nbpe_merge_1=e s\n"));
    assert_non_null(strstr(text, "bpe_merge_3=est </w>\n"));
    /* Other checkpoint keys around it are ignored. */
    size_t n = strlen(text) + 64;
    char *config = malloc(n);
    snprintf(config, n, "model=rnn\n%stask=translate\n", text);
    if (bpe_from_text(&c, config, "") != 0) fail_msg("%s", last_error());
    assert_int_equal(c.n_merges, b.n_merges);
    assert_int_equal(c.V, b.V);
    for (int m = 0; m < b.n_merges; m++) {
        assert_int_equal(c.merge_left[m], b.merge_left[m]);
        assert_int_equal(c.merge_right[m], b.merge_right[m]);
        assert_int_equal(c.merge_result[m], b.merge_result[m]);
    }
    assert_int_equal(bpe_crc(&c), bpe_crc(&b));
    /* Two vocabularies in one text, each behind its prefix (a translation checkpoint's). */
    char *src = bpe_to_text(&b, "src_");
    assert_non_null(strstr(src, "src_bpe_alphabet=deilnorstw\nsrc_bpe_merges=15\nsrc_bpe_merge_1=e s\n"));
    Bpe prefixed;
    assert_int_equal(bpe_from_text(&prefixed, src, "tgt_"), -1);   /* no tgt_ keys there */
    assert_non_null(strstr(last_error(), "tgt_bpe_alphabet"));
    if (bpe_from_text(&prefixed, src, "src_") != 0) fail_msg("%s", last_error());
    assert_int_equal(bpe_crc(&prefixed), bpe_crc(&b));
    bpe_free(&prefixed);
    free(src);
    int x[16], y[16];
    int nx = bpe_encode(&b, "lowest newer wider", x, 16, NULL), ny = bpe_encode(&c, "lowest newer wider", y, 16, NULL);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, sizeof(int) * (size_t)nx);
    Bpe d;
    learn_textbook(&d, 14);
    assert_true(bpe_crc(&d) != bpe_crc(&b));
    bpe_free(&d);
    free(config);
    free(text);
    bpe_free(&b);
    bpe_free(&c);
}

/* Every id is a different piece: two pairs that spell the same text would
 * make one symbol (checked on a text learned until no pair repeats). */
static void test_pieces_unique(void **state) {
    (void)state;
    const char *texts[] = {"aaa aaaa baaa aab abab abc xabc abcabc bcbc cab", "ab bc abc aabbcc"};
    Bpe b;
    if (bpe_learn_texts(&b, texts, 2, 1000) != 0) fail_msg("%s", last_error());
    assert_true(b.n_merges > 5);
    char x[64], y[64];
    for (int i = 4; i < b.V; i++)
        for (int j = i + 1; j < b.V; j++)
            if (strcmp(bpe_piece(&b, i, x, sizeof x), bpe_piece(&b, j, y, sizeof y)) == 0)
                fail_msg("ids %d and %d are both '%s'", i, j, x);
    bpe_free(&b);
}

static void test_bad_input(void **state) {
    (void)state;
    Bpe b;
    const long one[] = {1, 1};
    const char *blank[] = {"a b"}, *empty[] = {""}, *marker[] = {"x</w>"}, *bad_utf8[] = {"caf\xc3"};
    assert_int_equal(bpe_learn(&b, blank, one, 1, 5), -1);
    expect_error("holds a blank");
    assert_int_equal(bpe_learn(&b, empty, one, 1, 5), -1);
    expect_error("is empty");
    assert_int_equal(bpe_learn(&b, marker, one, 1, 5), -1);
    expect_error("end-of-word marker");
    assert_int_equal(bpe_learn(&b, bad_utf8, one, 1, 5), -1);
    expect_error("not UTF-8 at byte 4");
    const long zero[] = {0};
    assert_int_equal(bpe_learn(&b, TEXTBOOK_WORDS, zero, 1, 5), -1);
    expect_error("count 0");
    assert_int_equal(bpe_learn(&b, TEXTBOOK_WORDS, TEXTBOOK_COUNTS, 4, -1), -1);
    expect_error("-1 merges");
    char long_word[BPE_MAX_WORD + 2];
    memset(long_word, 'a', sizeof long_word - 1);
    long_word[sizeof long_word - 1] = '\0';
    const char *too_long[] = {long_word};
    assert_int_equal(bpe_learn(&b, too_long, one, 1, 5), -1);
    expect_error("longer than the 1024");
    bpe_free(&b);

    assert_int_equal(bpe_from_text(&b, "model=x\n", ""), -1);
    expect_error("bpe_alphabet");
    assert_int_equal(bpe_from_text(&b, "bpe_alphabet=ba\nbpe_merges=0\n", ""), -1);
    expect_error("byte order");
    assert_int_equal(bpe_from_text(&b, "bpe_alphabet=ab\n", ""), -1);
    expect_error("bpe_merges=N");
    assert_int_equal(bpe_from_text(&b, "bpe_alphabet=ab\nbpe_merges=2\nbpe_merge_1=a b\n", ""), -1);
    expect_error("no line bpe_merge_2=");
    assert_int_equal(bpe_from_text(&b, "bpe_alphabet=ab\nbpe_merges=1\nbpe_merge_1=a c\n", ""), -1);
    expect_error("bpe_merge_1=a c: expected two symbols");
    assert_int_equal(bpe_from_text(&b, "bpe_alphabet=ab\nbpe_merges=1\nbpe_merge_1=ab\n", ""), -1);
    expect_error("separated by one space");
    assert_int_equal(bpe_from_text(&b, "bpe_alphabet=ab\nbpe_merges=1\nbpe_merge_1=</w> a\n", ""), -1);
    expect_error("expected two symbols");
    assert_int_equal(bpe_from_text(&b, "bpe_alphabet=a\xff\nbpe_merges=0\n", ""), -1);
    expect_error("not UTF-8");
    if (bpe_from_text(&b, "bpe_alphabet=ab\nbpe_merges=2\nbpe_merge_1=a b\nbpe_merge_2=ab </w>\n", "") != 0)
        fail_msg("%s", last_error());
    int ids[4];
    assert_int_equal(bpe_encode(&b, "ab", ids, 4, NULL), 1);
    bpe_free(&b);
}

static void test_utf8(void **state) {
    (void)state;
    assert_int_equal(bpe_utf8_len("a", 1), 1);
    assert_int_equal(bpe_utf8_len("\xc3\xa1", 2), 2);           /* á */
    assert_int_equal(bpe_utf8_len("\xe2\x80\x9c", 3), 3);       /* “ */
    assert_int_equal(bpe_utf8_len("\xf0\x9f\x98\x80", 4), 4);   /* U+1F600 */
    assert_int_equal(bpe_utf8_len("\xc3", 1), 0);               /* cut short */
    assert_int_equal(bpe_utf8_len("\xa1", 1), 0);               /* a continuation byte */
    assert_int_equal(bpe_utf8_len("\xc0\xaf", 2), 0);           /* overlong */
    assert_int_equal(bpe_utf8_len("\xe0\x80\xaf", 3), 0);       /* overlong */
    assert_int_equal(bpe_utf8_len("\xed\xa0\x80", 3), 0);       /* a surrogate */
    assert_int_equal(bpe_utf8_len("\xf4\x90\x80\x80", 4), 0);   /* past U+10FFFF */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_textbook_merges),
        cmocka_unit_test(test_encode_unseen_word_and_character),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_text_form_round_trip),
        cmocka_unit_test(test_pieces_unique),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
