/* test_rng.c - PCG32: the reference stream, determinism, rng_below's range
 * and uniformity, rng_uniform's range, rng_normal's moments, and that
 * rng_shuffle returns a permutation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

/* pcg32-demo from the reference C implementation (pcg-random.org), seeded
 * with pcg32_srandom_r(&rng, 42u, 54u), prints these first six outputs. */
static void test_reference_stream(void **state) {
    (void)state;
    const uint32_t expected[6] = {0xa15c02b7u, 0x7b47f409u, 0xba1d3330u,
                                  0x83d2f293u, 0xbfa4784bu, 0xcbed606eu};
    Rng r;
    rng_seed(&r, 42, 54);
    for (int i = 0; i < 6; i++) assert_int_equal(rng_u32(&r), expected[i]);
}

static void test_determinism_and_streams(void **state) {
    (void)state;
    Rng a, b, c, d;
    rng_seed(&a, 7, 1);
    rng_seed(&b, 7, 1);
    rng_seed(&c, 8, 1);   /* other seed */
    rng_seed(&d, 7, 2);   /* same seed, other stream */
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t x = rng_u32(&a);
        assert_int_equal(x, rng_u32(&b));
        same_c += x == rng_u32(&c);
        same_d += x == rng_u32(&d);
    }
    assert_true(same_c < 3);
    assert_true(same_d < 3);
}

static void test_below_range_and_uniformity(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 3, 3);
    for (int i = 0; i < 1000; i++) assert_int_equal(rng_below(&r, 1), 0);
    /* n = 7: every value in range; counts near 70000/7 = 10000 each. The
     * standard deviation of a count is sqrt(70000 * 1/7 * 6/7) ~ 93, so a
     * +-500 band (over 5 sigma) fails only for a real bias. */
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) {
        uint32_t v = rng_below(&r, 7);
        assert_true(v < 7);
        counts[v]++;
    }
    for (int k = 0; k < 7; k++) assert_in_range(counts[k], 9500, 10500);
    /* a huge n (just above 2^31) still stays in range */
    uint32_t big = 0x80000001u;
    for (int i = 0; i < 1000; i++) assert_true(rng_below(&r, big) < big);
}

static void test_uniform_and_normal(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 11, 0);
    double sum = 0.0;
    enum { N = 100000 };
    for (int i = 0; i < N; i++) {
        float u = rng_uniform(&r);
        assert_true(u >= 0.0f && u < 1.0f);
        sum += u;
    }
    /* mean 0.5, standard error sqrt(1/12 / N) ~ 0.0009 */
    assert_true(fabs(sum / N - 0.5) < 0.005);

    double s1 = 0.0, s2 = 0.0;
    for (int i = 0; i < N; i++) {
        double z = rng_normal(&r);
        assert_true(isfinite(z));
        s1 += z;
        s2 += z * z;
    }
    double mean = s1 / N, var = s2 / N - mean * mean;
    /* standard errors: mean ~0.003, variance ~0.0045 */
    assert_true(fabs(mean) < 0.02);
    assert_true(fabs(var - 1.0) < 0.03);
}

static void test_shuffle_is_permutation(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 5, 5);
    enum { N = 101 };
    int a[N], seen[N];
    for (int i = 0; i < N; i++) a[i] = i;
    rng_shuffle(&r, a, N);
    memset(seen, 0, sizeof seen);
    int moved = 0;
    for (int i = 0; i < N; i++) {
        assert_in_range(a[i], 0, N - 1);
        seen[a[i]]++;
        moved += a[i] != i;
    }
    for (int i = 0; i < N; i++) assert_int_equal(seen[i], 1);
    assert_true(moved > N / 2);   /* it actually shuffled */

    /* same seed, same permutation */
    int b[N];
    for (int i = 0; i < N; i++) b[i] = i;
    rng_seed(&r, 5, 5);
    rng_shuffle(&r, b, N);
    assert_memory_equal(a, b, sizeof a);

    /* every one of the 6 orders of 3 elements shows up about equally often */
    int order_counts[6] = {0};
    for (int t = 0; t < 6000; t++) {
        int c[3] = {0, 1, 2};
        rng_shuffle(&r, c, 3);
        order_counts[c[0] * 2 + (c[1] > c[2])]++;
    }
    for (int k = 0; k < 6; k++) assert_in_range(order_counts[k], 850, 1150);

    rng_shuffle(&r, a, 0);   /* empty and single arrays are fine */
    rng_shuffle(&r, a, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_stream),
        cmocka_unit_test(test_determinism_and_streams),
        cmocka_unit_test(test_below_range_and_uniformity),
        cmocka_unit_test(test_uniform_and_normal),
        cmocka_unit_test(test_shuffle_is_permutation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
