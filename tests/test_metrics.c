/* test_metrics.c - edit distance and the scores of metrics.c.
 *
 * Edit distance: textbook cases, then random sequences against a plain
 * full-table implementation written here. Scores: one and several
 * references (the closest one is used), empty predictions and the averages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "train/metrics.h"

/* Characters of a string as token ids. */
static int to_ids(const char *s, int *ids) {
    int n = (int)strlen(s);
    for (int i = 0; i < n; i++) ids[i] = (unsigned char)s[i];
    return n;
}

static int distance_of(const char *a, const char *b) {
    int ia[64], ib[64];
    int na = to_ids(a, ia), nb = to_ids(b, ib);
    return edit_distance(ia, na, ib, nb);
}

static void test_edit_distance_known_cases(void **state) {
    (void)state;
    assert_int_equal(distance_of("kitten", "sitting"), 3);
    assert_int_equal(distance_of("sitting", "kitten"), 3);
    assert_int_equal(distance_of("flaw", "lawn"), 2);
    assert_int_equal(distance_of("", ""), 0);
    assert_int_equal(distance_of("", "abc"), 3);
    assert_int_equal(distance_of("abc", ""), 3);
    assert_int_equal(distance_of("abc", "abc"), 0);
    assert_int_equal(distance_of("abc", "abd"), 1);  /* substitution */
    assert_int_equal(distance_of("abc", "abxc"), 1); /* insertion */
    assert_int_equal(distance_of("abc", "ac"), 1);   /* deletion */
    assert_int_equal(distance_of("abcdef", "fedcba"), 6);
    assert_int_equal(distance_of("2026-11-21", "2026-12-21"), 1);
}

/* The full (na+1) x (nb+1) table, as in a textbook. */
static int reference_distance(const int *a, int na, const int *b, int nb) {
    int *t = malloc(sizeof(int) * (size_t)((na + 1) * (nb + 1)));
    int w = nb + 1;
    for (int i = 0; i <= na; i++) t[i * w] = i;
    for (int j = 0; j <= nb; j++) t[j] = j;
    for (int i = 1; i <= na; i++) {
        for (int j = 1; j <= nb; j++) {
            int best = t[(i - 1) * w + (j - 1)] + (a[i - 1] != b[j - 1]);
            if (t[(i - 1) * w + j] + 1 < best) best = t[(i - 1) * w + j] + 1;
            if (t[i * w + (j - 1)] + 1 < best) best = t[i * w + (j - 1)] + 1;
            t[i * w + j] = best;
        }
    }
    int d = t[na * w + nb];
    free(t);
    return d;
}

static void test_edit_distance_random(void **state) {
    (void)state;
    unsigned seed = 12345;
    int a[40], b[40];
    for (int trial = 0; trial < 500; trial++) {
        seed = seed * 1103515245u + 12345u;
        int na = (int)((seed >> 16) % 40);
        seed = seed * 1103515245u + 12345u;
        int nb = (int)((seed >> 16) % 40);
        for (int i = 0; i < na; i++) { seed = seed * 1103515245u + 12345u; a[i] = (int)((seed >> 16) % 4); }
        for (int i = 0; i < nb; i++) { seed = seed * 1103515245u + 12345u; b[i] = (int)((seed >> 16) % 4); }
        int d = edit_distance(a, na, b, nb);
        assert_int_equal(d, reference_distance(a, na, b, nb));
        assert_int_equal(d, edit_distance(b, nb, a, na));
        assert_true(d >= abs(na - nb));
        assert_true(d <= (na > nb ? na : nb));
    }
}

static void test_scores_single_reference(void **state) {
    (void)state;
    Scores s;
    scores_init(&s);
    /* Nothing scored yet: zeros, not NaN. */
    assert_true(scores_exact(&s) == 0.0);
    assert_true(scores_token_acc(&s) == 0.0);
    assert_true(scores_per(&s) == 0.0);
    assert_true(scores_wer(&s) == 0.0);

    int ref[4] = {5, 6, 7, 8};
    const int *refs[1] = {ref};
    int lens[1] = {4};
    int right[4] = {5, 6, 7, 8};
    int one_off[4] = {5, 9, 7, 8};
    int shifted[4] = {6, 7, 8, 9}; /* every position wrong, but only 2 edits */
    scores_add(&s, right, 4, refs, lens, 1);
    scores_add(&s, one_off, 4, refs, lens, 1);
    scores_add(&s, shifted, 4, refs, lens, 1);
    scores_add(&s, NULL, 0, refs, lens, 1); /* empty prediction */
    assert_int_equal(s.n, 4);
    assert_int_equal(s.exact, 1);
    assert_int_equal(s.tok_correct, 4 + 3 + 0 + 0);
    assert_int_equal(s.tok_total, 16);
    assert_int_equal(s.edits, 0 + 1 + 2 + 4);
    assert_int_equal(s.ref_tokens, 16);
    assert_float_equal(scores_exact(&s), 0.25, 1e-12);
    assert_float_equal(scores_wer(&s), 0.75, 1e-12);
    assert_float_equal(scores_token_acc(&s), 7.0 / 16.0, 1e-12);
    assert_float_equal(scores_per(&s), 7.0 / 16.0, 1e-12);

    /* A prediction longer than the reference: extra tokens are edits. */
    Scores t;
    scores_init(&t);
    int longer[6] = {5, 6, 7, 8, 1, 1};
    scores_add(&t, longer, 6, refs, lens, 1);
    assert_int_equal(t.exact, 0);
    assert_int_equal(t.tok_correct, 4);
    assert_int_equal(t.edits, 2);
    assert_float_equal(scores_per(&t), 0.5, 1e-12);
}

static void test_scores_multiple_references(void **state) {
    (void)state;
    /* TOMATO: "T AH M EY T OW" or "T AH M AA T OW" (ids stand for phonemes). */
    int ref_a[6] = {1, 2, 3, 4, 1, 5};
    int ref_b[6] = {1, 2, 3, 6, 1, 5};
    int ref_c[3] = {7, 7, 7};
    const int *refs[3] = {ref_a, ref_b, ref_c};
    int lens[3] = {6, 6, 3};
    Scores s;

    /* Equal to the second reference: exact. */
    scores_init(&s);
    scores_add(&s, ref_b, 6, refs, lens, 3);
    assert_int_equal(s.exact, 1);
    assert_int_equal(s.edits, 0);
    assert_int_equal(s.tok_correct, 6);
    assert_int_equal(s.ref_tokens, 6);

    /* Closest to the third (short) reference: it is the one scored. */
    scores_init(&s);
    int pred[2] = {7, 7};
    scores_add(&s, pred, 2, refs, lens, 3);
    assert_int_equal(s.exact, 0);
    assert_int_equal(s.edits, 1);
    assert_int_equal(s.ref_tokens, 3);
    assert_int_equal(s.tok_correct, 2);
    assert_int_equal(s.tok_total, 3);

    /* One edit from b, two from a: scored against b. */
    scores_init(&s);
    int near_b[6] = {1, 2, 3, 6, 1, 9};
    scores_add(&s, near_b, 6, refs, lens, 3);
    assert_int_equal(s.edits, 1);
    assert_int_equal(s.tok_correct, 5);

    /* A tie goes to the first reference. */
    scores_init(&s);
    int between[6] = {1, 2, 3, 8, 1, 5}; /* one edit from a and from b */
    const int *two[2] = {ref_a, ref_c};
    int two_lens[2] = {6, 3};
    scores_add(&s, between, 6, refs, lens, 3);
    assert_int_equal(s.edits, 1);
    assert_int_equal(s.ref_tokens, 6);
    scores_add(&s, ref_c, 3, two, two_lens, 2);
    assert_int_equal(s.exact, 1);
    assert_int_equal(s.n, 2);
    assert_float_equal(scores_wer(&s), 0.5, 1e-12);
    assert_float_equal(scores_per(&s), 1.0 / 9.0, 1e-12);

    /* A tie where the choice shows: one edit from both, but of length 3 and 1. */
    int long_ref[3] = {1, 2, 3}, short_ref[1] = {1};
    const int *tied[2] = {long_ref, short_ref};
    int tied_lens[2] = {3, 1};
    int pred12[2] = {1, 2};
    scores_init(&s);
    scores_add(&s, pred12, 2, tied, tied_lens, 2);
    assert_int_equal(s.edits, 1);
    assert_int_equal(s.ref_tokens, 3); /* the first reference was used */
    assert_int_equal(s.tok_correct, 2);
}

static void test_scores_no_reference(void **state) {
    (void)state;
    Scores s;
    scores_init(&s);
    int pred[3] = {1, 2, 3};
    scores_add(&s, pred, 3, NULL, NULL, 0); /* scored against the empty sequence */
    assert_int_equal(s.n, 1);
    assert_int_equal(s.exact, 0);
    assert_int_equal(s.edits, 3);
    assert_int_equal(s.ref_tokens, 0);
    scores_add(&s, pred, 0, NULL, NULL, 0);
    assert_int_equal(s.exact, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edit_distance_known_cases),
        cmocka_unit_test(test_edit_distance_random),
        cmocka_unit_test(test_scores_single_reference),
        cmocka_unit_test(test_scores_multiple_references),
        cmocka_unit_test(test_scores_no_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
