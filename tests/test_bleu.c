/* test_bleu.c - BLEU (common/train/bleu.c).
 *
 * What is checked: sacreBLEU's 13a tokens on cases worked out from its rules
 * (marks apart, periods and commas apart unless between digits, a dash after
 * a digit, entities, non-ASCII characters untouched); Papineni et al.'s
 * clipping example ("the the the the the the the" against "the cat is on
 * the mat": unigram precision 2/7); a perfect output scores 100 and one with
 * no 4-gram match 0; the brevity penalty exp(1 - r/c); the length buckets;
 * then tests/data/bleu_pairs.tsv (13 pairs, Spanish references with altered
 * outputs) against tests/data/bleu_pairs.nltk, the figures NLTK 3.8 gave
 * (tools/bleu_check.py --write-golden): corpus BLEU, BLEU in each length
 * bucket and each sentence BLEU, to 0.01. Run from the repository root, as
 * make test does. */
/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "train/bleu.h"
#include "util/error.h"
#include "util/util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void expect_tokens(const char *text, const char *expected) {
    char *got = bleu_tokenize_13a(text);
    if (strcmp(got, expected) != 0) fail_msg("13a of \"%s\": \"%s\", expected \"%s\"", text, got, expected);
    free(got);
}

static void test_tokenize_13a(void **state) {
    (void)state;
    expect_tokens("Y lloró Jesús.", "Y lloró Jesús .");
    expect_tokens("Y dijo Dios: Sea la luz: y fué la luz.", "Y dijo Dios : Sea la luz : y fué la luz .");
    expect_tokens("Pagó 3.5 siclos, 1,000 en total.", "Pagó 3.5 siclos , 1,000 en total .");
    expect_tokens("En 2026-11-21 (todos)", "En 2026 - 11 - 21 ( todos )");
    expect_tokens("sons-in-law, don't", "sons-in-law , don't");
    expect_tokens("¿Conque Dios os ha dicho?", "¿Conque Dios os ha dicho ?");
    expect_tokens("“Leave your country,” he said.", "“Leave your country , ” he said .");
    expect_tokens("a &amp; b &lt;c&gt; &quot;d&quot;", "a & b < c > \" d \"");
    expect_tokens("end.\nnext-\nline", "end . nextline");   /* a dash before a newline joins a word cut at a line end */
    expect_tokens("a..b 1.,2", "a . . b 1 . , 2");
    expect_tokens("   ", "");
    expect_tokens("", "");
}

static void test_clipping_and_extremes(void **state) {
    (void)state;
    BleuStats s;
    bleu_init(&s);
    bleu_add(&s, "the the the the the the the", "the cat is on the mat");
    assert_int_equal(s.match[0], 2);                 /* "the" clipped to its 2 in the reference */
    assert_int_equal(s.total[0], 7);
    assert_int_equal(s.match[1], 0);
    assert_true(bleu_score(&s) == 0.0);              /* no bigram match: 0, no smoothing */
    assert_true(bleu_sentence("the the the the the the the", "the cat is on the mat") > 0.0);
    assert_true(fabs(bleu_sentence("Y lloró Jesús.", "Y lloró Jesús.") - 100.0) < 1e-9);
    assert_true(bleu_sentence("nada", "Y lloró Jesús.") == 0.0);   /* no unigram match */

    /* Brevity: the output is the reference's first 6 of 10 tokens: every
     * precision 1, BLEU = 100 exp(1 - 10/6). */
    bleu_init(&s);
    bleu_add(&s, "a b c d e f", "a b c d e f g h i j");
    assert_true(fabs(bleu_score(&s) - 100.0 * exp(1.0 - 10.0 / 6.0)) < 1e-9);
    /* An output longer than its reference has no penalty; with one wrong
     * token of 5 the precisions are 4/5, 3/4, 2/3, 1/2. */
    bleu_init(&s);
    bleu_add(&s, "a b c d x", "a b c d");
    assert_true(fabs(bleu_score(&s) - 100.0 * pow(0.8 * 0.75 * (2.0 / 3.0) * 0.5, 0.25)) < 1e-9);
    /* An output shorter than 4 tokens adds no 4-gram to the total. */
    bleu_add(&s, "a b", "a b");
    assert_int_equal(s.total[3], 2);
    bleu_init(&s);
    assert_true(bleu_score(&s) == 0.0);              /* nothing added */
}

static void test_buckets(void **state) {
    (void)state;
    assert_int_equal(bleu_bucket(1), 0);
    assert_int_equal(bleu_bucket(10), 0);
    assert_int_equal(bleu_bucket(11), 1);
    assert_int_equal(bleu_bucket(40), 3);
    assert_int_equal(bleu_bucket(41), 4);
    assert_int_equal(bleu_bucket(102), 4);
    assert_string_equal(bleu_bucket_name(0), "1-10");
    assert_string_equal(bleu_bucket_name(4), "41+");
    assert_string_equal(bleu_bucket_name(5), "?");
    BleuByLength b;
    bleu_by_length_init(&b);
    bleu_by_length_add(&b, 3, "a b c d", "a b c d");
    bleu_by_length_add(&b, 45, "a b c d e", "x y z w v");
    assert_int_equal(b.all.n, 2);
    assert_int_equal(b.bucket[0].n, 1);
    assert_int_equal(b.bucket[4].n, 1);
    assert_true(fabs(bleu_score(&b.bucket[0]) - 100.0) < 1e-9);
    assert_true(bleu_score(&b.bucket[4]) == 0.0);
}

/* The value of key in the golden text ("key=value" lines). */
static double golden(const char *text, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\n%s=", key);
    const char *p = strstr(text, pattern);
    if (p == NULL) fail_msg("tests/data/bleu_pairs.nltk has no %s=", key);
    return atof(p + strlen(pattern));
}

static int count_words(const char *s) {
    int n = 0;
    for (; *s; s++)
        if (*s != ' ' && (s[1] == ' ' || s[1] == '\0')) n++;
    return n;
}

static void test_against_nltk(void **state) {
    (void)state;
    size_t len;
    char *gold = read_whole_file("tests/data/bleu_pairs.nltk", &len);
    char *pairs = read_whole_file("tests/data/bleu_pairs.tsv", &len);
    if (gold == NULL || pairs == NULL) fail_msg("%s (run from the repository root)", last_error());
    BleuByLength by;
    bleu_by_length_init(&by);
    char *line = strchr(pairs, '\n') + 1;             /* after the header: source, reference, output */
    int n = 0;
    while (*line) {
        char *eol = strchr(line, '\n');
        *eol = '\0';
        char *t1 = strchr(line, '\t'), *t2 = strchr(t1 + 1, '\t');
        *t1 = *t2 = '\0';
        const char *source = line, *reference = t1 + 1, *output = t2 + 1;
        bleu_by_length_add(&by, count_words(source), output, reference);
        char key[32];
        snprintf(key, sizeof key, "sentence_%d", ++n);
        double c = bleu_sentence(output, reference), nltk = golden(gold, key);
        if (fabs(c - nltk) > 0.01) fail_msg("pair %d: sentence BLEU %.4f, NLTK %.4f", n, c, nltk);
        line = eol + 1;
    }
    assert_int_equal(n, (int)golden(gold, "pairs"));
    double c = bleu_score(&by.all), nltk = golden(gold, "corpus_bleu");
    if (fabs(c - nltk) > 0.01) fail_msg("corpus BLEU %.4f, NLTK %.4f", c, nltk);
    for (int b = 0; b < BLEU_BUCKETS; b++) {
        char key[32];
        snprintf(key, sizeof key, "bucket_%s", bleu_bucket_name(b));
        double cb = bleu_score(&by.bucket[b]), nb = golden(gold, key);
        if (fabs(cb - nb) > 0.01) fail_msg("bucket %s: BLEU %.4f, NLTK %.4f", bleu_bucket_name(b), cb, nb);
        snprintf(key, sizeof key, "bucket_%s_pairs", bleu_bucket_name(b));
        assert_int_equal(by.bucket[b].n, (long)golden(gold, key));
    }
    free(gold);
    free(pairs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize_13a),
        cmocka_unit_test(test_clipping_and_extremes),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_against_nltk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
