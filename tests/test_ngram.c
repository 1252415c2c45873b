/* test_ngram.c - the counting baselines (common/data/ngram.c).
 *
 * What is checked: the add-one unigram on a sequence small enough to work
 * out by hand; the interpolated Kneser-Ney trigram's counts, discounts and
 * every probability of a six-token corpus worked out by hand (below), and
 * the perplexity of four tokens from them; that p(. | u v) sums to 1 over
 * the vocabulary for every context of a random corpus and for a few
 * contexts of Brown's; bad ids and discounts are refused; and the test
 * perplexities data/README.md reports for the shipped Brown corpus (run
 * from the repository root, as make test does). */
/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "data/brown.h"
#include "data/ngram.h"
#include "util/error.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* |a - b| <= tol in double precision (cmocka's assert_float_equal rounds
 * to float, too coarse for the sums checked here). */
static void assert_close(double a, double b, double tol) {
    if (!(fabs(a - b) <= tol)) fail_msg("%.17g != %.17g (tolerance %g)", a, b, tol);
}

/* Sum of p(w | u v) over the whole vocabulary. */
static double sum_over_vocabulary(const KneserNey *m, int u, int v) {
    double sum = 0.0;
    for (int w = 0; w < m->V; w++) sum += kn_prob(m, u, v, w);
    return sum;
}

/* ---- unigram -------------------------------------------------------------- */

static void test_unigram_by_hand(void **state) {
    (void)state;
    /* Counts 1, 2, 1, 0 over n = 4, V = 4: p = (c + 1) / 8. */
    const int train[4] = {0, 1, 1, 2};
    Unigram m;
    assert_int_equal(unigram_train(&m, train, 4, 4), 0);
    assert_close(unigram_prob(&m, 0), 2.0 / 8, 1e-15);
    assert_close(unigram_prob(&m, 1), 3.0 / 8, 1e-15);
    assert_close(unigram_prob(&m, 3), 1.0 / 8, 1e-15);   /* never seen, not 0 */
    assert_close(unigram_prob(&m, 0) + unigram_prob(&m, 1) + unigram_prob(&m, 2) +
                       unigram_prob(&m, 3), 1.0, 1e-15);
    /* Perplexity of [1, 3]: (3/8 * 1/8)^(-1/2) = 8 / sqrt(3). */
    const int test[2] = {1, 3};
    assert_close(unigram_perplexity(&m, test, 2), 8.0 / sqrt(3.0), 1e-12);
    unigram_free(&m);

    const int bad[2] = {0, 4};
    assert_int_equal(unigram_train(&m, bad, 2, 4), -1);
    if (strstr(last_error(), "token 1 has id 4") == NULL) fail_msg("%s", last_error());
}

/* ---- Kneser-Ney by hand --------------------------------------------------- */

/* The training stream a b a b a c (a = 0, b = 1, c = 2, V = 3) has the
 * windows (a b a) twice, (b a b) and (b a c):
 *
 *   order 3: c(aba) = 2, c(bab) = 1, c(bac) = 1;  history ab: c = 2, N = 1;
 *            history ba: c = 2, N = 2
 *   order 2: N(.ba) = 1, N(.ab) = 1, N(.ac) = 1;  v = a: N(.a.) = 2, T = 2;
 *            v = b: N(.b.) = 1, T = 1
 *   order 1: N(.a) = N(.b) = N(.c) = 1;  N(..) = 3, T = 3
 *
 * With D = 1/2 at every order:
 *   p1(w)      = (1 - 1/2 + 1/2 * 3/3) / 3           = 1/3 for each w
 *   p2(b | a)  = (1 - 1/2 + 1/2 * 2 * 1/3) / 2       = 5/12, p2(c | a) = 5/12, p2(a | a) = 1/6
 *   p2(a | b)  = (1 - 1/2 + 1/2 * 1 * 1/3) / 1       = 2/3,  p2(b | b) = p2(c | b) = 1/6
 *   p3(a | ab) = (2 - 1/2 + 1/2 * 1 * 2/3) / 2       = 11/12, p3(b | ab) = p3(c | ab) = 1/24
 *   p3(c | ba) = (1 - 1/2 + 1/2 * 2 * 5/12) / 2      = 11/24, p3(b | ba) = 11/24, p3(a | ba) = 1/12
 *
 * The test stream a b a c is scored p1(a) p2(b | a) p3(a | ab) p3(c | ba)
 * = 1/3 * 5/12 * 11/12 * 11/24 = 605/10368: perplexity (10368/605)^(1/4). */
static const int HAND[6] = {0, 1, 0, 1, 0, 2};

static void test_kneser_ney_by_hand(void **state) {
    (void)state;
    KneserNey m;
    assert_int_equal(kn_train(&m, HAND, 6, 3, 0.5), 0);
    const double tol = 1e-15;
    for (int w = 0; w < 3; w++) assert_close(kn_prob(&m, -1, -1, w), 1.0 / 3, tol);
    assert_close(kn_prob(&m, -1, 0, 1), 5.0 / 12, tol);
    assert_close(kn_prob(&m, -1, 0, 0), 1.0 / 6, tol);
    assert_close(kn_prob(&m, -1, 1, 0), 2.0 / 3, tol);
    assert_close(kn_prob(&m, -1, 1, 2), 1.0 / 6, tol);
    assert_close(kn_prob(&m, 0, 1, 0), 11.0 / 12, tol);
    assert_close(kn_prob(&m, 0, 1, 2), 1.0 / 24, tol);
    assert_close(kn_prob(&m, 1, 0, 2), 11.0 / 24, tol);
    assert_close(kn_prob(&m, 1, 0, 0), 1.0 / 12, tol);
    /* History c a was never seen: straight to p2(. | a). */
    assert_close(kn_prob(&m, 2, 0, 1), 5.0 / 12, tol);

    const int test[4] = {0, 1, 0, 2};
    assert_close(kn_perplexity(&m, test, 4), pow(10368.0 / 605.0, 0.25), 1e-12);
    kn_free(&m);
}

static void test_discounts(void **state) {
    (void)state;
    /* Raw trigram counts 2, 1, 1: n1 = 2, n2 = 1, D3 = 2 / (2 + 2) = 1/2.
     * The continuation counts are all 1 (n2 = 0): D2 = D1 = 0.75. */
    KneserNey m;
    assert_int_equal(kn_train(&m, HAND, 6, 3, 0.0), 0);
    assert_close(m.D[3], 0.5, 1e-15);
    assert_close(m.D[2], 0.75, 1e-15);
    assert_close(m.D[1], 0.75, 1e-15);
    kn_free(&m);

    assert_int_equal(kn_train(&m, HAND, 6, 3, 1.0), -1);
    if (strstr(last_error(), "discount") == NULL) fail_msg("%s", last_error());
    assert_int_equal(kn_train(&m, HAND, 6, 2, 0.0), -1);     /* id 2 outside V = 2 */
    if (strstr(last_error(), "token 5 has id 2") == NULL) fail_msg("%s", last_error());
}

/* Every context of a random corpus, estimated and fixed discounts. */
static void test_kneser_ney_sums_to_one(void **state) {
    (void)state;
    enum { N = 3000, V = 9 };
    int ids[N];
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        /* Skewed: small ids far more often, id V-1 never (it must still get mass). */
        ids[i] = (int)((x >> 33) % 5) * (int)((x >> 40) % 3) % (V - 1);
    }
    const double discounts[2] = {0.0, 0.3};
    for (int d = 0; d < 2; d++) {
        KneserNey m;
        assert_int_equal(kn_train(&m, ids, N, V, discounts[d]), 0);
        for (int u = -1; u < V; u++)
            for (int v = -1; v < V; v++) assert_close(sum_over_vocabulary(&m, u, v), 1.0, 1e-12);
        assert_true(kn_prob(&m, 0, 0, V - 1) > 0.0);
        kn_free(&m);
    }
    /* Too short for a single window: the uniform distribution. */
    KneserNey m;
    assert_int_equal(kn_train(&m, ids, 2, V, 0.0), 0);
    assert_close(kn_prob(&m, ids[0], ids[1], 3), 1.0 / V, 1e-15);
    kn_free(&m);
}

/* ---- the shipped Brown corpus --------------------------------------------- */

static void test_brown_words(void **state) {
    (void)state;
    BrownCorpus c;
    if (brown_load(&c, NULL, BROWN_WORDS) != 0) fail_msg("%s", last_error());
    KneserNey m;
    assert_int_equal(kn_train(&m, c.train.ids, c.train.n, c.V, 0.0), 0);
    /* A frequent context, one seen once, an unseen pair, <unk> <unk>. */
    int of = brown_id(&c, "of"), the = brown_id(&c, "the"), fulton = brown_id(&c, "Fulton");
    int contexts[4][2] = {{of, the}, {the, fulton}, {fulton, of}, {BROWN_UNK, BROWN_UNK}};
    for (int k = 0; k < 4; k++)
        assert_close(sum_over_vocabulary(&m, contexts[k][0], contexts[k][1]), 1.0, 1e-9);

    /* The figures of data/README.md (tools/brown_stats). */
    Unigram uni;
    assert_int_equal(unigram_train(&uni, c.train.ids, c.train.n, c.V), 0);
    assert_close(unigram_perplexity(&uni, c.test.ids, c.test.n), 525.26, 0.005);
    assert_close(kn_perplexity(&m, c.test.ids, c.test.n), 206.46, 0.005);
    assert_close(kn_perplexity(&m, c.valid.ids, c.valid.n), 215.23, 0.005);
    unigram_free(&uni);
    kn_free(&m);
    brown_free(&c);
}

static void test_brown_chars(void **state) {
    (void)state;
    BrownCorpus c;
    if (brown_load(&c, NULL, BROWN_CHARS) != 0) fail_msg("%s", last_error());
    KneserNey m;
    assert_int_equal(kn_train(&m, c.train.ids, c.train.n, c.V, 0.0), 0);
    int t = brown_id(&c, "t"), h = brown_id(&c, "h");
    assert_close(sum_over_vocabulary(&m, t, h), 1.0, 1e-12);
    /* Bits per character on the test part. */
    assert_close(log2(kn_perplexity(&m, c.test.ids, c.test.n)), 2.877, 0.0005);
    kn_free(&m);
    brown_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unigram_by_hand),
        cmocka_unit_test(test_kneser_ney_by_hand),
        cmocka_unit_test(test_discounts),
        cmocka_unit_test(test_kneser_ney_sums_to_one),
        cmocka_unit_test(test_brown_words),
        cmocka_unit_test(test_brown_chars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
