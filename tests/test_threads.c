/* test_threads.c - the decisions of the threads' cost model
 * (common/kernels/threads.c), never its times: small products run on one
 * thread and large ones (and long dear passes: GELU, Adam) on every thread;
 * the cap (threads_set, --threads N) and the number of pieces are respected; a batch loop of 2 items of tiny
 * work stays on one thread; a region inside a parallel region takes one;
 * with the model off (for the tests that compare bits) even tiny work is
 * split; the constant-time choice is the brute-force minimum of the model; and the
 * grid of a product's blocks (gemm_choose_grid) is the one the search over
 * every thread count below the cap finds. */
#include <math.h>
#include <stdlib.h>

#include "kernels/matmul_blocked.h"
#include "kernels/threads.h"
#include "util/openmp.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

/* the count a region gets with OpenMP, or 1 in a build without it */
static int with_openmp(int t) { return openmp_enabled() ? t : 1; }

static void test_small_product_one_thread(void **state) {
    (void)state;
    threads_set(8);
    assert_int_equal(threads_for_product(8, 8, 16, 1), 1);      /* one head's Q K^T */
    assert_int_equal(threads_for_product(32, 32, 32, 16), 1);
    assert_int_equal(threads_for_naive_product(2, 2, 2, 2), 1);
    assert_int_equal(threads_for_elements(100, THREAD_COSTS.gelu_ns), 1);
    assert_int_equal(threads_for_elements(100000, THREAD_COSTS.layernorm_ns * 1e-3), 1);   /* a cheap pass */
}

static void test_large_product_all_threads(void **state) {
    (void)state;
    threads_set(8);
    assert_int_equal(threads_for_product(2048, 2048, 2048, 64 * 128), with_openmp(8));
    assert_int_equal(threads_for_naive_product(512, 512, 512, 512), with_openmp(8));
    /* a dear pass over a million values: GELU, Adam's update of a million parameters */
    threads_set(2);
    assert_int_equal(threads_for_elements(1 << 20, THREAD_COSTS.gelu_ns), with_openmp(2));
    assert_int_equal(threads_for_elements(1 << 20, THREAD_COSTS.adam_ns), with_openmp(2));
    threads_set(0);
}

static void test_cap_respected(void **state) {
    (void)state;
    threads_set(3);
    assert_int_equal(threads_current(), with_openmp(3));
    assert_int_equal(threads_for_product(2048, 2048, 2048, 64 * 128), with_openmp(3));
    threads_set(1);
    assert_int_equal(threads_for_product(2048, 2048, 2048, 64 * 128), 1);
    threads_set(0);
    /* the model alone: the cap, then the pieces */
    assert_int_equal(threads_for_work(1e12, 0.0, 1e9, 5), 5);
    assert_int_equal(threads_for_work(1e12, 0.0, 2.0, 64), 2);
    assert_int_equal(threads_for_work(1e12, 0.0, 0.0, 64), 1);
    assert_int_equal(threads_for_work(0.0, 0.0, 100.0, 64), 1);
}

/* A batch loop of 2 sequences of one head of 8 x 16 each: stays on one thread. */
static void test_tiny_batch_one_thread(void **state) {
    (void)state;
    threads_set(8);
    const int N = 8, D_H = 16;
    assert_int_equal(threads_in_slots(2, 2.0 * N * N * D_H, 4.0 * (4.0 * N * D_H + N * N)), 1);
    assert_int_equal(threads_for_items(2, 100.0, 400.0), 1);
    /* and a huge one takes as many threads as it has items, up to the cores */
    int slots = threads_slots(2);
    assert_int_equal(threads_in_slots(2, 1e10, 1e3), with_openmp(slots));
    threads_set(0);
}

/* Inside a parallel region every region runs on its caller's thread. */
static void test_nested_region_one_thread(void **state) {
    (void)state;
    threads_set(2);
    int inside[2] = {0, 0};
#pragma omp parallel num_threads(2)
    inside[omp_get_thread_num()] = threads_for_product(2048, 2048, 2048, 64 * 128);
    assert_int_equal(inside[0], openmp_enabled() ? 1 : threads_for_product(2048, 2048, 2048, 64 * 128));
    threads_set(0);
}

/* With the model off (the tests that compare bits) even tiny work is split,
 * as far as the cap and its pieces allow. */
static void test_model_off_splits(void **state) {
    (void)state;
    threads_set(4);
    threads_model_set(0);
    assert_int_equal(threads_for_product(8, 8, 16, 2), with_openmp(2));
    assert_int_equal(threads_for_elements(1000, THREAD_COSTS.gelu_ns), with_openmp(4));
    assert_int_equal(threads_for_elements(10, THREAD_COSTS.gelu_ns), 1);   /* one block of 64 values: one piece */
    threads_model_set(1);
    assert_int_equal(threads_for_product(8, 8, 16, 2), 1);
    threads_set(0);
}

/* time(t) of threads.h, written out again */
static double model_ns(double work, double bytes, int t) {
    if (t == 1) return work;
    return (work + THREAD_COSTS.moved_byte_ns * bytes) / t + THREAD_COSTS.fork_join_ns * (t - 1);
}

/* The constant-time choice is the brute-force minimum over every count, and
 * more work never takes fewer threads. */
static void test_choice_is_the_minimum(void **state) {
    (void)state;
    for (int cap = 1; cap <= 64; cap += 7) {
        int previous = 1;
        for (double work = 10.0; work < 1e10; work *= 1.7) {
            double bytes = work * 0.5;
            int got = threads_for_work(work, bytes, 1e9, cap);
            int best = 1;
            for (int t = 2; t <= cap; t++)
                if (model_ns(work, bytes, t) < model_ns(work, bytes, best)) best = t;
            assert_true(got >= 1 && got <= cap);
            assert_true(model_ns(work, bytes, got) <= model_ns(work, bytes, best) * (1.0 + 1e-12));
            assert_true(got >= previous);
            previous = got;
        }
    }
}

/* The grid search as it was, over every thread count from the cap down: the
 * linear search must find the same grid. */
static void reference_grid(int threads, int M, int N, int row_units, int col_units, int *rows_out, int *cols_out) {
    for (int t = threads; t > 1; t--) {
        int best_rows = 0, best_cols = 0;
        double best_floats = 0.0;
        for (int rows = t; rows >= 1; rows--) {
            int cols = t / rows;
            if (rows * cols != t || rows > row_units || cols > col_units) continue;
            double floats = (double)M / rows + (double)N / cols;
            if (best_rows == 0 || floats < best_floats) {
                best_rows = rows;
                best_cols = cols;
                best_floats = floats;
            }
        }
        if (best_rows > 0) {
            *rows_out = best_rows;
            *cols_out = best_cols;
            return;
        }
    }
    *rows_out = *cols_out = 1;
}

static void test_grid(void **state) {
    (void)state;
    const int mr = 8, nr = 32;
    int rows, cols;
    gemm_choose_grid(2, 128, 128, mr, nr, &rows, &cols);   /* a tie: the rows are cut */
    assert_int_equal(rows, 2);
    assert_int_equal(cols, 1);
    gemm_choose_grid(256, 8, 100000, mr, nr, &rows, &cols); /* one row of tiles: columns only */
    assert_int_equal(rows, 1);
    assert_int_equal(cols, 256);
    gemm_choose_grid(THREADS_MAX, 1, 1, mr, nr, &rows, &cols);
    assert_int_equal(rows * cols, 1);
    const int sizes[] = {1, 7, 8, 31, 64, 100, 257, 1000, 4096};
    for (int threads = 1; threads <= 40; threads++)
        for (int a = 0; a < 9; a++)
            for (int b = 0; b < 9; b++) {
                int M = sizes[a], N = sizes[b], want_rows, want_cols;
                reference_grid(threads, M, N, (M + mr - 1) / mr, (N + nr - 1) / nr, &want_rows, &want_cols);
                gemm_choose_grid(threads, M, N, mr, nr, &rows, &cols);
                if (rows != want_rows || cols != want_cols)
                    fail_msg("%d threads, C %d x %d: grid %d x %d, the search over every count gives %d x %d",
                             threads, M, N, rows, cols, want_rows, want_cols);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_product_one_thread),
        cmocka_unit_test(test_large_product_all_threads),
        cmocka_unit_test(test_cap_respected),
        cmocka_unit_test(test_tiny_batch_one_thread),
        cmocka_unit_test(test_nested_region_one_thread),
        cmocka_unit_test(test_model_off_splits),
        cmocka_unit_test(test_choice_is_the_minimum),
        cmocka_unit_test(test_grid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
