/* test_vecmath.c - the AVX2 exp, tanh, sigmoid, GELU and softmax rows against the naive loops.
 *
 * For each kernel:
 *   - the error bound stated in vecmath_avx2.c, in ulps of the naive result,
 *     over a dense sweep of floats (every 257th bit pattern from 0 to 110 and
 *     the same negated) and the extremes: +-0, subnormals, FLT_MIN, FLT_MAX,
 *     the overflow and underflow edges, +-inf;
 *   - NaN in gives NaN out;
 *   - odd lengths (0, 1, 7, 8, 9, 33, 257) on pointers one float past an
 *     aligned address, nothing written past y[n-1], and in place (y == x);
 *   - the dispatching functions give the naive bits on the naive backend;
 *   - ReLU forward and backward: the same bits as the naive loops (NaN, -0,
 *     odd lengths, unaligned pointers);
 *   - GELU's gradients (both forms): the ABSOLUTE bound stated in
 *     vecmath_avx2.c over the same sweep, the limits at +-inf, NaN, odd
 *     lengths, unaligned pointers, accumulation into dx, in place, dispatch;
 *   - softmax along rows, forward and backward: within 4 ulp of the naive
 *     rows (exp's 2 ulp and the sums' order) at every row length 1..70,
 *     with -inf (masked) entries, fully masked rows (zeros), NaN rows, in
 *     place, nothing written past the last row; dispatch.
 * The AVX2 tests skip on a CPU without AVX2/FMA.
 *
 * ATTN_VECMATH_EXHAUSTIVE=1 ./build/tests/test_vecmath checks the bounds over
 * ALL 2^32 floats instead of the sweep (minutes; not part of make test). */
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

typedef struct {
    const char *name;
    VecFunction naive, avx2, dispatched;
    double max_ulps;   /* the bound stated in vecmath_avx2.c */
} Kernel;

static const Kernel KERNELS[] = {
    {"exp", vec_exp_naive, vec_exp_avx2, vec_exp, 2.0},
    {"tanh", vec_tanh_naive, vec_tanh_avx2, vec_tanh, 3.0},
    {"sigmoid", vec_sigmoid_naive, vec_sigmoid_avx2, vec_sigmoid, 3.0},
    {"gelu", vec_gelu_naive, vec_gelu_avx2, vec_gelu, 6.0},
    {"gelu_tanh", vec_gelu_tanh_naive, vec_gelu_tanh_avx2, vec_gelu_tanh, 4.0},
};
enum { N_KERNELS = sizeof KERNELS / sizeof KERNELS[0] };

static const float SENTINEL = -12345.0f;

static int skip_without_avx2(void) {
    if (cpu_has_avx2_fma()) return 0;
    printf("  (no AVX2/FMA on this CPU: skipped)\n");
    return 1;
}

/* The sweep: n_sweep floats spread over [-110, 110] by bit pattern (so as
 * dense near 0 as near 100), then the extremes. */
static float *make_inputs(int *count) {
    const uint32_t top = 0x42DC0000u; /* 110.0f */
    const uint32_t stride = 257;
    static const float extremes[] = {
        0.0f, -0.0f, 1.4e-45f, -1.4e-45f, 1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, 1e-30f, -1e-30f,
        FLT_EPSILON, 0.625f, -0.625f, 0.62499994f, -0.62499994f, 9.0f, -9.0f, 9.02f, -9.02f,
        88.37626f, 88.72283f, 88.72284f, 89.0f, -87.33654f, -87.34f, -88.72f, -100.0f, -103.9f,
        -103.98f, -104.0f, -105.0f, 200.0f, -200.0f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY,
        /* GELU: the center/tail switch, the subnormal and zero edges, the clamp */
        0.75f, -0.75f, 0.74999994f, -0.74999994f, -0.7517916f, -9.9f, -10.4f, -10.6f, -13.0f, -14.3f,
        -14.42f, 16.0f, -16.0f, 16.000002f, -16.000002f,
    };
    int n_sweep = (int)(top / stride) + 1;
    int n_extremes = (int)(sizeof extremes / sizeof extremes[0]);
    float *x = malloc(sizeof(float) * (size_t)(2 * n_sweep + n_extremes));
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

/* ATTN_VECMATH_EXHAUSTIVE set (and not "0"): check every float. */
static int exhaustive(void) {
    const char *e = getenv("ATTN_VECMATH_EXHAUSTIVE");
    return e != NULL && *e != '\0' && strcmp(e, "0") != 0;
}

/* Calls check(x, n, ...) on every float bit pattern, 2^20 at a time. */
enum { CHUNK = 1 << 20 };
static float *all_floats_chunk(float *x, uint64_t first) {
    for (uint32_t i = 0; i < CHUNK; i++) {
        uint32_t bits = (uint32_t)(first + i);
        memcpy(&x[i], &bits, sizeof x[i]);
    }
    return x;
}

/* The largest ulp error of k on x[n], and where. */
static double worst_ulps(const Kernel *k, const float *x, int n, float *want, float *got, float *worst_x) {
    k->naive(want, x, n);
    k->avx2(got, x, n);
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double e = ulp_error(got[i], want[i]);
        if (e > worst) {
            worst = e;
            *worst_x = x[i];
        }
    }
    return worst;
}

static void check_bound(const Kernel *k) {
    double worst = 0.0;
    float worst_x = 0.0f;
    long long n_inputs;
    if (exhaustive()) {
        float *x = malloc(sizeof(float) * CHUNK), *want = malloc(sizeof(float) * CHUNK);
        float *got = malloc(sizeof(float) * CHUNK);
        for (uint64_t first = 0; first < (1ull << 32); first += CHUNK) {
            float at = 0.0f;
            double e = worst_ulps(k, all_floats_chunk(x, first), CHUNK, want, got, &at);
            if (e > worst) {
                worst = e;
                worst_x = at;
            }
        }
        n_inputs = 1ll << 32;
        free(x); free(want); free(got);
    } else {
        int n;
        float *x = make_inputs(&n);
        float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
        worst = worst_ulps(k, x, n, want, got, &worst_x);
        n_inputs = n;
        free(x); free(want); free(got);
    }
    printf("  %-9s max error %.2f ulp (bound %.0f) at x = %.9g over %lld inputs\n", k->name, worst,
           k->max_ulps, worst_x, n_inputs);
    assert_true(worst <= k->max_ulps);
}

static void test_error_bounds(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    for (int k = 0; k < N_KERNELS; k++) check_bound(&KERNELS[k]);
}

/* The values other code relies on exactly: e^-inf = 0 (masked softmax
 * entries), e^0 = 1, sigmoid(-inf) = 0, sigmoid(inf) = 1, tanh(+-inf) = +-1;
 * and GELU's limits: gelu(-inf) = -0, gelu(0) = 0, gelu(inf) = inf, both forms. */
static void test_exact_values(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    float x[4] = {-INFINITY, 0.0f, INFINITY, -200.0f}, y[4];
    vec_exp_avx2(y, x, 4);
    assert_true(y[0] == 0.0f && y[1] == 1.0f && isinf(y[2]) && y[3] == 0.0f);
    vec_sigmoid_avx2(y, x, 4);
    assert_true(y[0] == 0.0f && y[1] == 0.5f && y[2] == 1.0f && y[3] == 0.0f);
    vec_tanh_avx2(y, x, 4);
    assert_true(y[0] == -1.0f && y[1] == 0.0f && y[2] == 1.0f && y[3] == -1.0f);
    const VecFunction gelus[4] = {vec_gelu_naive, vec_gelu_avx2, vec_gelu_tanh_naive, vec_gelu_tanh_avx2};
    for (int k = 0; k < 4; k++) {
        gelus[k](y, x, 4);
        assert_true(y[0] == 0.0f && signbit(y[0]) && y[1] == 0.0f && isinf(y[2]) && y[2] > 0);
        assert_true(y[3] == 0.0f);
    }
}

static void test_nan(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    float x[9], y[9];
    for (int i = 0; i < 9; i++) x[i] = i % 2 ? NAN : -NAN;
    for (int k = 0; k < N_KERNELS; k++) {
        KERNELS[k].avx2(y, x, 9);   /* 8 in a full vector, 1 in the tail */
        for (int i = 0; i < 9; i++) assert_true(isnan(y[i]));
    }
}

/* Odd lengths on unaligned pointers: values within bound, nothing written past
 * the end, and in place (y == x) the same values. */
static void test_lengths_and_alignment(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    static const int lengths[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 33, 257};
    enum { MAX_N = 257, PAD = 23 };   /* 280 floats: aligned_alloc wants a multiple of 32 bytes */
    float *x_buf = aligned_alloc(32, sizeof(float) * (MAX_N + PAD));
    float *y_buf = aligned_alloc(32, sizeof(float) * (MAX_N + PAD));
    float *want = malloc(sizeof(float) * MAX_N), *inplace = malloc(sizeof(float) * (MAX_N + PAD));
    float *x = x_buf + 1, *y = y_buf + 1;   /* 4 bytes past a 32-byte boundary */
    for (int k = 0; k < N_KERNELS; k++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            int n = lengths[l];
            for (int i = 0; i < MAX_N + PAD - 1; i++) {
                x[i] = i < n ? 12.0f * sinf(0.37f * (float)i + (float)k) : SENTINEL;
                y[i] = SENTINEL;
            }
            KERNELS[k].naive(want, x, n);
            KERNELS[k].avx2(y, x, n);
            for (int i = 0; i < n; i++) assert_true(ulp_error(y[i], want[i]) <= KERNELS[k].max_ulps);
            for (int i = n; i < MAX_N + PAD - 1; i++) assert_true(y[i] == SENTINEL);
            /* in place, on a copy of x with the same misalignment */
            memcpy(inplace + 1, x, sizeof(float) * (MAX_N + PAD - 1));
            KERNELS[k].avx2(inplace + 1, inplace + 1, n);
            for (int i = 0; i < n; i++) assert_true(inplace[1 + i] == y[i]);
            for (int i = n; i < MAX_N + PAD - 1; i++) assert_true(inplace[1 + i] == SENTINEL);
        }
    free(x_buf);
    free(y_buf);
    free(want);
    free(inplace);
}

/* vec_exp, vec_tanh, ... follow the backend; naive means the naive loop's bits. */
static void test_dispatch(void **state) {
    (void)state;
    enum { N = 301 };
    float x[N], y[N], want[N];
    for (int i = 0; i < N; i++) x[i] = 0.1f * (float)(i - N / 2);
    assert_int_equal(backend_select("naive"), 0);
    for (int k = 0; k < N_KERNELS; k++) {
        KERNELS[k].dispatched(y, x, N);
        KERNELS[k].naive(want, x, N);
        assert_memory_equal(y, want, sizeof y);
    }
    /* avx512 has no element-wise kernels of its own: it uses the AVX2 ones. */
    const char *simd_backends[2] = {"avx2", "avx512"};
    int n_simd = cpu_has_avx512f() ? 2 : cpu_has_avx2_fma() ? 1 : 0;
    for (int b = 0; b < n_simd; b++) {
        assert_int_equal(backend_select(simd_backends[b]), 0);
        for (int k = 0; k < N_KERNELS; k++) {
            KERNELS[k].dispatched(y, x, N);
            KERNELS[k].avx2(want, x, N);
            assert_memory_equal(y, want, sizeof y);
        }
    }
    assert_int_equal(backend_select(NULL), 0);
}

/* ReLU: bit-identical to the naive loops, at every length 0..40, unaligned. */
static void test_relu_exact(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    enum { MAX_N = 40 };
    float x_buf[MAX_N + 2], dy_buf[MAX_N + 2], want_buf[MAX_N + 2], got_buf[MAX_N + 2];
    float *x = x_buf + 1, *dy = dy_buf + 1, *want = want_buf + 1, *got = got_buf + 1;
    for (int n = 0; n <= MAX_N; n++) {
        for (int i = 0; i <= MAX_N; i++) {
            x[i] = (float)((i * 7) % 11) - 5.0f;   /* negatives, zeros, positives */
            dy[i] = 0.25f * (float)i - 3.0f;
        }
        if (n > 3) { x[1] = -0.0f; x[2] = NAN; x[3] = INFINITY; }
        for (int i = -1; i <= MAX_N; i++) want[i] = got[i] = SENTINEL;
        vec_relu_naive(want, x, n);
        vec_relu_avx2(got, x, n);
        assert_memory_equal(got - 1, want - 1, sizeof(float) * (MAX_N + 2));
        for (int i = 0; i <= MAX_N; i++) want[i] = got[i] = 0.5f * (float)i - 1.0f;
        want[-1] = got[-1] = SENTINEL;
        vec_relu_backward_naive(want, dy, x, n);
        vec_relu_backward_avx2(got, dy, x, n);
        assert_memory_equal(got - 1, want - 1, sizeof(float) * (MAX_N + 2));
    }
}

/* ------------------------------------------------------------------------ */
/* GELU gradients: dx += dy * gelu'(x), an ABSOLUTE bound on gelu'           */
/* ------------------------------------------------------------------------ */

typedef void (*GradFunction)(float *dx, const float *dy, const float *x, int n);

typedef struct {
    const char *name;
    GradFunction naive, avx2, dispatched;
    double max_abs;   /* the absolute bound on gelu' stated in vecmath_avx2.c */
} GradKernel;

static const GradKernel GRAD_KERNELS[] = {
    {"gelu'", vec_gelu_backward_naive, vec_gelu_backward_avx2, vec_gelu_backward, 0x1p-22},
    {"gelu_tanh'", vec_gelu_tanh_backward_naive, vec_gelu_tanh_backward_avx2, vec_gelu_tanh_backward, 0x1p-22},
};
enum { N_GRAD_KERNELS = sizeof GRAD_KERNELS / sizeof GRAD_KERNELS[0] };

/* The largest |avx2 gelu'(x) - naive gelu'(x)| over x[n] (dx = 0, dy = 1,
 * so dx comes out as gelu'(x) itself), and where; NaN must match NaN. */
static double worst_abs(const GradKernel *k, const float *x, int n, const float *ones, float *want, float *got,
                        float *worst_x) {
    memset(want, 0, sizeof(float) * (size_t)n);
    memset(got, 0, sizeof(float) * (size_t)n);
    k->naive(want, ones, x, n);
    k->avx2(got, ones, x, n);
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double e = isnan(want[i]) || isnan(got[i]) ? (isnan(want[i]) && isnan(got[i]) ? 0.0 : INFINITY)
                                                   : fabs((double)got[i] - (double)want[i]);
        if (e > worst) {
            worst = e;
            *worst_x = x[i];
        }
    }
    return worst;
}

static void test_gelu_gradient_bounds(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    for (int k = 0; k < N_GRAD_KERNELS; k++) {
        const GradKernel *g = &GRAD_KERNELS[k];
        double worst = 0.0;
        float worst_x = 0.0f;
        long long n_inputs;
        if (exhaustive()) {
            float *x = malloc(sizeof(float) * CHUNK), *ones = malloc(sizeof(float) * CHUNK);
            float *want = malloc(sizeof(float) * CHUNK), *got = malloc(sizeof(float) * CHUNK);
            for (int i = 0; i < CHUNK; i++) ones[i] = 1.0f;
            for (uint64_t first = 0; first < (1ull << 32); first += CHUNK) {
                float at = 0.0f;
                double e = worst_abs(g, all_floats_chunk(x, first), CHUNK, ones, want, got, &at);
                if (e > worst) {
                    worst = e;
                    worst_x = at;
                }
            }
            n_inputs = 1ll << 32;
            free(x); free(ones); free(want); free(got);
        } else {
            int n;
            float *x = make_inputs(&n);
            float *ones = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
            float *got = malloc(sizeof(float) * (size_t)n);
            for (int i = 0; i < n; i++) ones[i] = 1.0f;
            worst = worst_abs(g, x, n, ones, want, got, &worst_x);
            n_inputs = n;
            free(x); free(ones); free(want); free(got);
        }
        printf("  %-10s max error %.3g = %.2f x 2^-24 absolute (bound %.2f x 2^-24) at x = %.9g over %lld inputs\n",
               g->name, worst, ldexp(worst, 24), ldexp(g->max_abs, 24), worst_x, n_inputs);
        assert_true(worst <= g->max_abs);
    }
}

/* The limits at +-inf (0 and 1), NaN -> NaN, and exact values at 0 and far out. */
static void test_gelu_gradient_limits(void **state) {
    (void)state;
    const float x[9] = {-INFINITY, INFINITY, NAN, -NAN, -200.0f, 200.0f, 0.0f, FLT_MAX, -FLT_MAX};
    const float want[9] = {0.0f, 1.0f, NAN, NAN, 0.0f, 1.0f, 0.5f, 1.0f, 0.0f};
    const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int k = 0; k < N_GRAD_KERNELS; k++)
        for (int impl = 0; impl < 1 + cpu_has_avx2_fma(); impl++) {
            float dx[9] = {0};
            (impl ? GRAD_KERNELS[k].avx2 : GRAD_KERNELS[k].naive)(dx, ones, x, 9);   /* 8 + a tail of 1 */
            for (int i = 0; i < 9; i++) {
                if (isnan(want[i])) assert_true(isnan(dx[i]));
                else if (dx[i] != want[i])
                    fail_msg("%s %s: x = %g gives %.9g, want %g", GRAD_KERNELS[k].name, impl ? "avx2" : "naive",
                             (double)x[i], (double)dx[i], (double)want[i]);
            }
        }
}

/* Odd lengths on unaligned pointers, dx starting non-zero (+=), nothing
 * written past dx[n-1], and in place (dx == x) the same bits. */
static void test_gelu_gradient_lengths_and_alignment(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    static const int lengths[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 33, 257};
    enum { MAX_N = 257, PAD = 23 };
    float *x_buf = aligned_alloc(32, sizeof(float) * (MAX_N + PAD));
    float *dy_buf = aligned_alloc(32, sizeof(float) * (MAX_N + PAD));
    float *dx_buf = aligned_alloc(32, sizeof(float) * (MAX_N + PAD));
    float *want = malloc(sizeof(float) * (MAX_N + PAD)), *inplace = malloc(sizeof(float) * (MAX_N + PAD));
    float *x = x_buf + 1, *dy = dy_buf + 1, *dx = dx_buf + 1;
    const double u = 0x1p-24;
    for (int k = 0; k < N_GRAD_KERNELS; k++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            int n = lengths[l];
            for (int i = 0; i < MAX_N + PAD - 1; i++) {
                x[i] = i < n ? 12.0f * sinf(0.37f * (float)i + (float)k) : SENTINEL;
                dy[i] = i < n ? 2.0f * cosf(0.11f * (float)i) : SENTINEL;
                dx[i] = want[i] = i < n ? 0.5f * sinf(0.05f * (float)i) : SENTINEL;
            }
            GRAD_KERNELS[k].naive(want, dy, x, n);
            GRAD_KERNELS[k].avx2(dx, dy, x, n);
            for (int i = 0; i < n; i++) {
                double start = 0.5 * sin(0.05 * i);
                double tolerance = GRAD_KERNELS[k].max_abs * fabs(dy[i]) + 4.0 * u * (fabs(dy[i]) + fabs(want[i]) + fabs(start));
                assert_true(fabs((double)dx[i] - want[i]) <= tolerance);
            }
            for (int i = n; i < MAX_N + PAD - 1; i++) assert_true(dx[i] == SENTINEL);
            /* in place: dx and x the same array, holding x (dx starts as x) */
            memcpy(inplace + 1, x, sizeof(float) * (MAX_N + PAD - 1));
            GRAD_KERNELS[k].avx2(inplace + 1, dy, inplace + 1, n);
            memcpy(dx, x, sizeof(float) * (MAX_N + PAD - 1));
            GRAD_KERNELS[k].avx2(dx, dy, x, n);
            assert_memory_equal(inplace + 1, dx, sizeof(float) * (MAX_N + PAD - 1));
        }
    free(x_buf); free(dy_buf); free(dx_buf); free(want); free(inplace);
}

/* vec_gelu_backward and vec_gelu_tanh_backward follow the backend. */
static void test_gelu_gradient_dispatch(void **state) {
    (void)state;
    enum { N = 301 };
    float x[N], dy[N], got[N], want[N];
    for (int i = 0; i < N; i++) {
        x[i] = 0.05f * (float)(i - N / 2);
        dy[i] = 1.0f + 0.01f * (float)i;
    }
    const char *backends[2] = {"naive", "avx2"};
    for (int impl = 0; impl < 1 + cpu_has_avx2_fma(); impl++) {
        assert_int_equal(backend_select(backends[impl]), 0);
        for (int k = 0; k < N_GRAD_KERNELS; k++) {
            for (int i = 0; i < N; i++) got[i] = want[i] = 0.25f;
            GRAD_KERNELS[k].dispatched(got, dy, x, N);
            (impl ? GRAD_KERNELS[k].avx2 : GRAD_KERNELS[k].naive)(want, dy, x, N);
            assert_memory_equal(got, want, sizeof got);
        }
    }
    assert_int_equal(backend_select(NULL), 0);
}

/* Softmax rows: row lengths 1..70 (every tail length, and 50, a ViT's rows),
 * scores up to +-30 with some entries -inf, one row fully masked and one
 * with a NaN, three rows per call so a row's start is rarely aligned.
 * Forward within 4 ulp of the naive row (exp is within 2 ulp and the sum's
 * order differs); backward compared by absolute error against the size of
 * its terms, y_j (|dy_j| + |dot|): the subtraction dy_j - dot may cancel. */
static void fill_scores(float *x, int rows, int C, int seed) {
    for (int n = 0; n < rows; n++)
        for (int c = 0; c < C; c++) {
            int k = n * C + c + seed;
            x[n * C + c] = 30.0f * sinf(0.71f * (float)k + 0.3f * (float)seed);
            if (k % 7 == 3 && C > 1) x[n * C + c] = -INFINITY;   /* masked */
        }
}

static void test_softmax_rows(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    enum { ROWS = 3, MAX_C = 70, MAX = ROWS * MAX_C + 1 };
    float x[MAX], y[MAX], want[MAX], inplace[MAX];
    for (int C = 1; C <= MAX_C; C++) {
        const int n = ROWS * C;
        fill_scores(x, ROWS, C, C);
        if (C == 50) for (int c = 0; c < C; c++) x[C + c] = -INFINITY;    /* row 1 fully masked */
        if (C == 9) x[2 * C + 8] = NAN;                                    /* row 2, in the tail */
        y[n] = SENTINEL;
        vec_softmax_rows_naive(want, x, ROWS, C);
        vec_softmax_rows_avx2(y, x, ROWS, C);
        for (int i = 0; i < n; i++) assert_true(ulp_error(y[i], want[i]) <= 4.0);
        assert_true(y[n] == SENTINEL);
        for (int i = 0; i < n; i++)   /* masked: exactly 0 (but for the NaN row, all NaN) */
            if (x[i] == -INFINITY && !(C == 9 && i >= 2 * C)) assert_true(y[i] == 0.0f);
        if (C == 50) for (int c = 0; c < C; c++) assert_true(y[C + c] == 0.0f);
        if (C == 9) for (int c = 0; c < C; c++) assert_true(isnan(y[2 * C + c]));
        memcpy(inplace, x, sizeof(float) * n);
        vec_softmax_rows_avx2(inplace, inplace, ROWS, C);
        assert_memory_equal(inplace, y, sizeof(float) * n);
    }
}

static void test_softmax_backward_rows(void **state) {
    (void)state;
    if (skip_without_avx2()) return;
    enum { ROWS = 3, MAX_C = 70, MAX = ROWS * MAX_C + 1 };
    float x[MAX], y[MAX], dy[MAX], dx[MAX], want[MAX];
    for (int C = 1; C <= MAX_C; C++) {
        const int n = ROWS * C;
        fill_scores(x, ROWS, C, C);
        vec_softmax_rows_naive(y, x, ROWS, C);
        for (int i = 0; i < n; i++) {
            dy[i] = 2.0f * cosf(1.3f * (float)i + (float)C);
            dx[i] = want[i] = 0.5f * sinf((float)i);        /* accumulated into */
        }
        dx[n] = SENTINEL;
        vec_softmax_backward_rows_naive(want, dy, y, ROWS, C);
        vec_softmax_backward_rows_avx2(dx, dy, y, ROWS, C);
        for (int r = 0; r < ROWS; r++) {
            double dot = 0.0;
            for (int c = 0; c < C; c++) dot += (double)dy[r * C + c] * y[r * C + c];
            for (int c = 0; c < C; c++) {
                int i = r * C + c;
                double size = fabs(dx[i]) + (double)y[i] * (fabs(dy[i]) + fabs(dot));
                assert_true(fabs((double)dx[i] - (double)want[i]) <= 4.0 * FLT_EPSILON * size);
                if (y[i] == 0.0f) assert_true(dx[i] == want[i]);   /* masked: dx unchanged */
            }
        }
        assert_true(dx[n] == SENTINEL);
    }
}

/* vec_softmax_rows and its backward follow the backend like the others. */
static void test_softmax_dispatch(void **state) {
    (void)state;
    enum { ROWS = 4, C = 50, N = ROWS * C };
    float x[N], y[N], want[N], dy[N], dx[N], dx_want[N];
    fill_scores(x, ROWS, C, 1);
    for (int i = 0; i < N; i++) dy[i] = sinf((float)i);
    const char *backends[3] = {"naive", "avx2", "avx512"};
    int n_backends = cpu_has_avx512f() ? 3 : cpu_has_avx2_fma() ? 2 : 1;
    for (int b = 0; b < n_backends; b++) {
        assert_int_equal(backend_select(backends[b]), 0);
        vec_softmax_rows(y, x, ROWS, C);
        (b == 0 ? vec_softmax_rows_naive : vec_softmax_rows_avx2)(want, x, ROWS, C);
        assert_memory_equal(y, want, sizeof y);
        memset(dx, 0, sizeof dx);
        memset(dx_want, 0, sizeof dx_want);
        vec_softmax_backward_rows(dx, dy, y, ROWS, C);
        (b == 0 ? vec_softmax_backward_rows_naive : vec_softmax_backward_rows_avx2)(dx_want, dy, y, ROWS, C);
        assert_memory_equal(dx, dx_want, sizeof dx);
    }
    assert_int_equal(backend_select(NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_bounds),
        cmocka_unit_test(test_exact_values),
        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_lengths_and_alignment),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_relu_exact),
        cmocka_unit_test(test_gelu_gradient_bounds),
        cmocka_unit_test(test_gelu_gradient_limits),
        cmocka_unit_test(test_gelu_gradient_lengths_and_alignment),
        cmocka_unit_test(test_gelu_gradient_dispatch),
        cmocka_unit_test(test_softmax_rows),
        cmocka_unit_test(test_softmax_backward_rows),
        cmocka_unit_test(test_softmax_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
