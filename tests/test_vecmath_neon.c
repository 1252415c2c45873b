/* test_vecmath_neon.c - the NEON element-wise kernels (vecmath_neon.c) against
 * the naive loops, and the SIMD forms of every CPU against the same bits.
 *
 * On AArch64, each NEON form:
 *   - within the bound vecmath_avx2.c states for its AVX2 form (ulps of the
 *     naive result; 2^-22 absolute for the GELU gradients) over a sweep of
 *     floats (every 4099th bit pattern up to 110, both signs, and extremes);
 *   - NaN in gives NaN out; ReLU and its gradient exactly the naive bits;
 *   - odd lengths on pointers one float past an aligned address: the same
 *     values as one call over the whole sweep, nothing written past y[n-1];
 *   - softmax rows (1..70 entries, masked -inf entries) within 4 ulp of the
 *     naive rows, their gradient within the budget of test_vecmath.c.
 * On every CPU, the SIMD forms' outputs over the sweep and the softmax rows
 * are hashed (NaN counted as one pattern): the hashes below were taken from
 * the AVX2 forms on x86, so the NEON forms giving them means the same bits as
 * AVX2, and the AVX2 forms giving them means their bits did not change. The
 * inputs come from integer arithmetic only (no libm), the same on both. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_bits.h"
#include "kernels/matmul.h"
#include "kernels/vecmath.h"

typedef void (*VecFunction)(float *y, const float *x, int n);
typedef void (*VecGradient)(float *dx, const float *dy, const float *x, int n);

typedef struct {
    const char *name;
    VecFunction naive, simd;       /* or, for a gradient: */
    VecGradient naive_grad, simd_grad;
    double bound;                  /* ulps, or absolute for a gradient */
} Form;

/* The SIMD forms of this CPU: NEON on AArch64, AVX2 on x86 (n = 0 without). */
static int simd_forms(Form out[9]) {
#if defined(__aarch64__)
    const Form forms[] = {
        {"exp", vec_exp_naive, vec_exp_neon, NULL, NULL, 2.0},
        {"tanh", vec_tanh_naive, vec_tanh_neon, NULL, NULL, 3.0},
        {"sigmoid", vec_sigmoid_naive, vec_sigmoid_neon, NULL, NULL, 3.0},
        {"gelu", vec_gelu_naive, vec_gelu_neon, NULL, NULL, 6.0},
        {"gelu_tanh", vec_gelu_tanh_naive, vec_gelu_tanh_neon, NULL, NULL, 4.0},
        {"relu", vec_relu_naive, vec_relu_neon, NULL, NULL, 0.0},
        {"gelu'", NULL, NULL, vec_gelu_backward_naive, vec_gelu_backward_neon, 0x1p-22},
        {"gelu_tanh'", NULL, NULL, vec_gelu_tanh_backward_naive, vec_gelu_tanh_backward_neon, 0x1p-22},
        {"relu'", NULL, NULL, vec_relu_backward_naive, vec_relu_backward_neon, 0.0},
    };
#else
    if (!cpu_has_avx2_fma()) return 0;
    const Form forms[] = {
        {"exp", vec_exp_naive, vec_exp_avx2, NULL, NULL, 2.0},
        {"tanh", vec_tanh_naive, vec_tanh_avx2, NULL, NULL, 3.0},
        {"sigmoid", vec_sigmoid_naive, vec_sigmoid_avx2, NULL, NULL, 3.0},
        {"gelu", vec_gelu_naive, vec_gelu_avx2, NULL, NULL, 6.0},
        {"gelu_tanh", vec_gelu_tanh_naive, vec_gelu_tanh_avx2, NULL, NULL, 4.0},
        {"relu", vec_relu_naive, vec_relu_avx2, NULL, NULL, 0.0},
        {"gelu'", NULL, NULL, vec_gelu_backward_naive, vec_gelu_backward_avx2, 0x1p-22},
        {"gelu_tanh'", NULL, NULL, vec_gelu_tanh_backward_naive, vec_gelu_tanh_backward_avx2, 0x1p-22},
        {"relu'", NULL, NULL, vec_relu_backward_naive, vec_relu_backward_avx2, 0.0},
    };
#endif
    memcpy(out, forms, sizeof forms);
    return (int)(sizeof forms / sizeof forms[0]);
}

static const float SENTINEL = -12345.0f;


/* The sweep: every 4099th bit pattern in [0, 110], both signs, then extremes. */
static float *make_inputs(int *count) {
    const uint32_t top = 0x42DC0000u, stride = 4099;
    static const float extremes[] = {
        0.0f, -0.0f, 1.4e-45f, -1.4e-45f, 1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, 0.625f, -0.625f, 0.75f, -0.75f,
        0.74999994f, -0.74999994f, 88.72283f, 88.72284f, 89.0f, -87.34f, -103.98f, -104.0f, -10.4f, -10.6f,
        -14.42f, 16.0f, -16.0f, 200.0f, -200.0f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN,
    };
    int n_sweep = (int)(top / stride) + 1, n_extremes = (int)(sizeof extremes / sizeof extremes[0]);
    float *x = malloc(sizeof(float) * (size_t)(2 * n_sweep + n_extremes));
    assert_non_null(x);
    int n = 0;
    for (uint32_t bits = 0; bits <= top; bits += stride) {
        float v;
        memcpy(&v, &bits, sizeof v);
        x[n++] = v;
        x[n++] = -v;
    }
    for (int i = 0; i < n_extremes; i++) x[n++] = extremes[i];
    *count = n;
    return x;
}

/* One form over x[n]: want (naive) and got (SIMD); a gradient is taken
 * with dy = 1 into dx = 0, which leaves the gradient itself. */
static void run_form(const Form *f, const float *x, int n, float *want, float *got) {
    if (f->naive) {
        f->naive(want, x, n);
        f->simd(got, x, n);
        return;
    }
    float *ones = malloc(sizeof(float) * (size_t)n);
    assert_non_null(ones);
    for (int i = 0; i < n; i++) ones[i] = 1.0f, want[i] = got[i] = 0.0f;
    f->naive_grad(want, ones, x, n);
    f->simd_grad(got, ones, x, n);
    free(ones);
}

/* The AVX2 forms' hashes over the sweep, in simd_forms' order, and of the
 * softmax rows below (forward, backward): printed by this test on x86. */
static const uint64_t EXPECTED_HASHES[9] = {
    0xaba85ae9c84c9f16ull, 0x9dba6b3b877d9f99ull, 0xd6aa853016f55729ull, 0x0963075444b079daull,
    0xf9c06066b3e3039bull, 0xa85389179dca2cabull, 0xa9bac38500a05036ull, 0x6d4ddedce0e01ec2ull,
    0x31600efeb7627395ull,
};
static const uint64_t EXPECTED_SOFTMAX[2] = {0x7dd764ab471011b9ull, 0x59b3df90f4e1f362ull};

static void test_bounds_and_bits(void **state) {
    (void)state;
    Form forms[9];
    int n_forms = simd_forms(forms);
    if (n_forms == 0) skip();
    int n;
    float *x = make_inputs(&n);
    float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    assert_true(want && got);
    int mismatched = 0;
    for (int k = 0; k < n_forms; k++) {
        run_form(&forms[k], x, n, want, got);
        double worst = 0.0;
        for (int i = 0; i < n; i++) {
            double e = forms[k].naive ? ulp_error(got[i], want[i])
                                      : (isnan(want[i]) ? (isnan(got[i]) ? 0.0 : INFINITY)
                                                        : fabs((double)got[i] - (double)want[i]));
            if (e > worst) worst = e;
        }
        uint64_t h = hash_floats(FNV_START, got, n);
        printf("  %-10s max error %.3g (bound %.3g), hash 0x%016llxull\n", forms[k].name, worst, forms[k].bound,
               (unsigned long long)h);
        assert_true(worst <= forms[k].bound);
        if (EXPECTED_HASHES[k] != 0 && h != EXPECTED_HASHES[k]) {
            printf("  %s: not the AVX2 bits\n", forms[k].name);
            mismatched++;
        }
    }
    assert_int_equal(mismatched, 0);
    free(x);
    free(want);
    free(got);
}

/* Odd lengths on unaligned pointers give the whole sweep's values, and
 * nothing past the end is written. */
static void test_odd_lengths(void **state) {
    (void)state;
    Form forms[9];
    int n_forms = simd_forms(forms);
    if (n_forms == 0) skip();
    static const int lengths[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 33};
    enum { MAX = 40 };
    float x_buf[MAX + 2], y_buf[MAX + 2], dy_buf[MAX + 2], whole[MAX], scratch[MAX];
    for (int i = 0; i < MAX; i++) x_buf[i + 1] = (float)((i * 37) % 29 - 14) * 0.43f;
    const float *x = x_buf + 1;
    for (int k = 0; k < n_forms; k++) {
        run_form(&forms[k], x, MAX, scratch, whole);
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            int n = lengths[l];
            float *y = y_buf + 1, *dy = dy_buf + 1;
            for (int i = 0; i <= n; i++) y[i] = forms[k].naive ? SENTINEL : 0.0f, dy[i] = 1.0f;
            y[n] = SENTINEL;
            if (forms[k].naive) forms[k].simd(y, x, n);
            else forms[k].simd_grad(y, dy, x, n);
            assert_memory_equal(y, whole, sizeof(float) * (size_t)n);
            assert_true(y[n] == SENTINEL);
        }
    }
}

/* Softmax rows and their gradient: rows of 1..70 scores (integer-made),
 * some -inf (masked), one row fully masked. */
static void fill_scores(float *x, int rows, int C, int seed) {
    for (int i = 0; i < rows * C; i++) {
        int k = i + seed;
        x[i] = (float)((k * 7919) % 601 - 300) / 10.0f;
        if (k % 7 == 3 && C > 1) x[i] = -INFINITY;
    }
}

static void test_softmax_rows(void **state) {
    (void)state;
#if defined(__aarch64__)
    void (*forward)(float *, const float *, int, int) = vec_softmax_rows_neon;
    void (*backward)(float *, const float *, const float *, int, int) = vec_softmax_backward_rows_neon;
#else
    if (!cpu_has_avx2_fma()) skip();
    void (*forward)(float *, const float *, int, int) = vec_softmax_rows_avx2;
    void (*backward)(float *, const float *, const float *, int, int) = vec_softmax_backward_rows_avx2;
#endif
    enum { ROWS = 3, MAX_C = 70, MAX = ROWS * MAX_C + 2 };
    float x[MAX], y[MAX], want[MAX], dy[MAX], dx[MAX], dx_want[MAX];
    uint64_t h_forward = FNV_START, h_backward = FNV_START;
    for (int C = 1; C <= MAX_C; C++) {
        const int n = ROWS * C;
        fill_scores(x, ROWS, C, C);
        if (C == 50) for (int c = 0; c < C; c++) x[C + c] = -INFINITY;
        y[n] = SENTINEL;
        vec_softmax_rows_naive(want, x, ROWS, C);
        forward(y, x, ROWS, C);
        for (int i = 0; i < n; i++) assert_true(ulp_error(y[i], want[i]) <= 4.0);
        for (int i = 0; i < n; i++) if (x[i] == -INFINITY) assert_true(y[i] == 0.0f);
        assert_true(y[n] == SENTINEL);
        h_forward = hash_floats(h_forward, y, n);
        for (int i = 0; i < n; i++) {
            dy[i] = (float)((i * 104729) % 401 - 200) / 100.0f;
            dx[i] = dx_want[i] = (float)(i % 13) / 8.0f;
        }
        dx[n] = SENTINEL;
        vec_softmax_backward_rows_naive(dx_want, dy, want, ROWS, C);
        backward(dx, dy, want, ROWS, C);
        for (int r = 0; r < ROWS; r++) {
            double dot = 0.0;
            for (int c = 0; c < C; c++) dot += (double)dy[r * C + c] * want[r * C + c];
            for (int c = 0; c < C; c++) {
                int i = r * C + c;
                double size = fabs(dx[i]) + (double)want[i] * (fabs(dy[i]) + fabs(dot));
                assert_true(fabs((double)dx[i] - (double)dx_want[i]) <= 4.0 * FLT_EPSILON * size);
            }
        }
        assert_true(dx[n] == SENTINEL);
        h_backward = hash_floats(h_backward, dx, n);
    }
    printf("  softmax rows hash 0x%016llxull, backward 0x%016llxull\n", (unsigned long long)h_forward,
           (unsigned long long)h_backward);
    if (EXPECTED_SOFTMAX[0] != 0) assert_true(h_forward == EXPECTED_SOFTMAX[0]);
    if (EXPECTED_SOFTMAX[1] != 0) assert_true(h_backward == EXPECTED_SOFTMAX[1]);
}

/* The dispatching functions follow --backend neon. */
static void test_dispatch(void **state) {
    (void)state;
    if (!cpu_has_neon()) skip();
    enum { N = 37 };
    float x[N], y[N], want[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i - 18) / 4.0f;
    assert_int_equal(backend_select("neon"), 0);
#if defined(__aarch64__)
    vec_gelu(y, x, N);
    vec_gelu_neon(want, x, N);
    assert_memory_equal(y, want, sizeof y);
    vec_tanh(y, x, N);
    vec_tanh_neon(want, x, N);
    assert_memory_equal(y, want, sizeof y);
#endif
    assert_int_equal(backend_select("naive"), 0);
    vec_tanh(y, x, N);
    vec_tanh_naive(want, x, N);
    assert_memory_equal(y, want, sizeof y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_and_bits),
        cmocka_unit_test(test_odd_lengths),
        cmocka_unit_test(test_softmax_rows),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests_name("vecmath_neon", tests, NULL, NULL);
}
