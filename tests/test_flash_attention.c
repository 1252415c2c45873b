/* test_flash_attention.c - chapter 05: fused (FlashAttention-style) attention.
 *
 *  - forward and backward of one head against a direct double-precision
 *    reference (scores, masked softmax, A V; and its gradients) on odd shapes:
 *    N = 1, 7, 33, 100; D_H = 1, 5, 16; block sizes that do not divide N
 *    (1x1 up to N = 33, 7x5, 16x32, 64x64); no mask, causal, padding, both; Q, K, V read
 *    through a row stride, on the naive and on the AVX2 backend;
 *  - the fused backward against central finite differences (small case);
 *  - the multi-head layer with MULTI_HEAD_FUSED gives the plain layer's O,
 *    dX, dW_QKV, dW_O (causal, padded batch).
 *
 * Tolerances. The reference is exact to ~1e-15; float32 carries ~6e-8
 * relative per operation. An output is a weighted average (weights sum to 1)
 * of N <= 100 values: each weight has a few ulp of error from exp and the
 * subtraction of the max, and the sums over <= 100 terms add up to
 * ~sqrt(N) ulp typically (N ulp worst case), so |O - O_ref| <= 2e-5 (1 + |O|)
 * is a bound with room to spare but still 1000x below any real bug (a wrong
 * rescale or a mask off by one changes O by 1e-2 .. 1). Gradients go through
 * one more product and a difference dP - Dvec that cancels (Dvec is a
 * weighted mean of dP), so they get 1e-4 (1 + |g|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "05_multi_head_attention/flash_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "nn/gradcheck.h"
#include "kernels/matmul.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define FWD_TOL 2e-5
#define GRAD_TOL 1e-4

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static int n_backends(void) { return cpu_has_avx2_fma() ? 2 : 1; }
static const char *backend_at(int k) { return k == 0 ? "naive" : "avx2"; }

/* The direct reference, in double, one head. Q, K, V, dO [N, D] with row stride ld.
 * O [N, D] (dense) and, when dO != NULL, dQ, dK, dV [N, D] (dense). */
static void reference(double *O, double *dQ, double *dK, double *dV, const float *Q, const float *K,
                      const float *V, const float *dO, int ld, int N, int D, int causal, int key_len) {
    const double scale = 1.0 / sqrt((double)D);
    double *a = malloc(sizeof(double) * (size_t)N), *da = malloc(sizeof(double) * (size_t)N);
    if (dQ) {
        memset(dQ, 0, sizeof(double) * (size_t)N * D);
        memset(dK, 0, sizeof(double) * (size_t)N * D);
        memset(dV, 0, sizeof(double) * (size_t)N * D);
    }
    for (int i = 0; i < N; i++) {
        int limit = causal ? i + 1 : N;
        if (key_len < limit) limit = key_len;
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < limit; j++) {
            double s = 0.0;
            for (int d = 0; d < D; d++) s += (double)Q[(size_t)i * ld + d] * K[(size_t)j * ld + d];
            a[j] = s * scale;
            if (a[j] > mx) mx = a[j];
        }
        for (int j = 0; j < limit; j++) sum += (a[j] = exp(a[j] - mx));
        for (int j = 0; j < limit; j++) a[j] /= sum;
        for (int d = 0; d < D; d++) {
            double o = 0.0;
            for (int j = 0; j < limit; j++) o += a[j] * V[(size_t)j * ld + d];
            O[(size_t)i * D + d] = o;
        }
        if (!dQ) continue;
        /* da_j = dO_i . v_j;  ds_j = a_j (da_j - sum_k a_k da_k) */
        double dot = 0.0;
        for (int j = 0; j < limit; j++) {
            da[j] = 0.0;
            for (int d = 0; d < D; d++) da[j] += (double)dO[(size_t)i * ld + d] * V[(size_t)j * ld + d];
            dot += a[j] * da[j];
        }
        for (int j = 0; j < limit; j++) {
            const double ds = a[j] * (da[j] - dot) * scale;
            for (int d = 0; d < D; d++) {
                dV[(size_t)j * D + d] += a[j] * dO[(size_t)i * ld + d];
                dQ[(size_t)i * D + d] += ds * K[(size_t)j * ld + d];
                dK[(size_t)j * D + d] += ds * Q[(size_t)i * ld + d];
            }
        }
    }
    free(a); free(da);
}

static double worst_err(const float *got, int ldg, const double *want, int N, int D) {
    double worst = 0.0;
    for (int i = 0; i < N; i++)
        for (int d = 0; d < D; d++) {
            const double w = want[(size_t)i * D + d], g = got[(size_t)i * ldg + d];
            const double e = fabs(g - w) / (1.0 + fabs(w));
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    return worst;
}

/* One head: Q, K, V, dO are column blocks of one [N, 4 D + 3] buffer (row
 * stride ld, deliberately not a multiple of anything); the gradients are
 * column blocks of another, and start from 0.25 to check that backward
 * accumulates. */
static void check_one(int N, int D, int Bq, int Bk, int causal, int key_len, Rng *rng,
                      double *worst_fwd, double *worst_grad) {
    const int ld = 4 * D + 3;
    float *in = alloc_floats((size_t)N * ld), *grad = alloc_floats((size_t)N * ld);
    float *O = alloc_floats((size_t)N * ld), *lse = alloc_floats((size_t)N);
    float *scratch = alloc_floats(flash_attention_scratch_floats(Bq, Bk));
    double *O_ref = malloc(sizeof(double) * (size_t)N * D * 4);
    double *dQ_ref = O_ref + (size_t)N * D, *dK_ref = dQ_ref + (size_t)N * D, *dV_ref = dK_ref + (size_t)N * D;
    fill(in, (size_t)N * ld, 1.5f, rng);
    for (size_t i = 0; i < (size_t)N * ld; i++) grad[i] = 0.25f;
    const float *Q = in, *K = in + D, *V = in + 2 * D, *dO = in + 3 * D;
    float *dQ = grad, *dK = grad + D, *dV = grad + 2 * D;

    flash_attention_forward(O + 1, ld, lse, &(FlashHead){Q, ld, K, ld, V, ld, N, D, causal, key_len, Bq, Bk}, scratch);
    flash_attention_backward(dQ, dK, dV, ld, dO, ld, O + 1, ld, lse, &(FlashHead){Q, ld, K, ld, V, ld, N, D,
                             causal, key_len, Bq, Bk}, scratch);
    reference(O_ref, dQ_ref, dK_ref, dV_ref, Q, K, V, dO, ld, N, D, causal, key_len < N ? key_len : N);
    for (size_t i = 0; i < (size_t)N * D; i++) {     /* backward added to 0.25 */
        dQ_ref[i] += 0.25; dK_ref[i] += 0.25; dV_ref[i] += 0.25;
    }
    const double ef = worst_err(O + 1, ld, O_ref, N, D);
    double eg = worst_err(dQ, ld, dQ_ref, N, D);
    const double ek = worst_err(dK, ld, dK_ref, N, D), ev = worst_err(dV, ld, dV_ref, N, D);
    if (!(ek <= eg)) eg = ek;
    if (!(ev <= eg)) eg = ev;
    if (!(ef <= FWD_TOL) || !(eg <= GRAD_TOL))
        fail_msg("N %d D_H %d blocks %dx%d causal %d key_len %d (%s): forward err %.3g, gradient err %.3g",
                 N, D, Bq, Bk, causal, key_len, backend_name(backend_current()), ef, eg);
    if (ef > *worst_fwd) *worst_fwd = ef;
    if (eg > *worst_grad) *worst_grad = eg;
    free(in); free(grad); free(O); free(lse); free(scratch); free(O_ref);
}

static void test_against_reference(void **state) {
    (void)state;
    const int Ns[] = {1, 7, 33, 100}, Ds[] = {1, 5, 16};
    const int blocks[][2] = {{1, 1}, {7, 5}, {16, 32}, {64, 64}};
    Rng rng;
    rng_seed(&rng, 11, 0);
    for (int k = 0; k < n_backends(); k++) {
        assert_int_equal(backend_select(backend_at(k)), 0);
        double worst_fwd = 0.0, worst_grad = 0.0;
        for (size_t n = 0; n < sizeof Ns / sizeof Ns[0]; n++)
            for (size_t d = 0; d < sizeof Ds / sizeof Ds[0]; d++)
                for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
                    for (int mask = 0; mask < 4; mask++) {
                        const int N = Ns[n];
                        if (blocks[b][0] == 1 && N > 33) continue;   /* 10^4 blocks: slow, adds nothing */
                        const int causal = mask & 1;
                        const int key_len = (mask & 2) ? N * 2 / 3 + 1 : N;   /* N = 1: 1 */
                        check_one(N, Ds[d], blocks[b][0], blocks[b][1], causal, key_len, &rng,
                                  &worst_fwd, &worst_grad);
                    }
        printf("    %s: worst forward err %.2g, worst gradient err %.2g (relative to 1 + |x|)\n",
               backend_at(k), worst_fwd, worst_grad);
    }
    assert_int_equal(backend_select(NULL), 0);
}

/* Finite differences: L = sum O * G over the fused forward, in double;
 * x is the whole [Q|K|V] buffer of one head. */
typedef struct {
    float *qkv, *O, *lse, *scratch, *G;
    int N, D, causal, key_len, Bq, Bk;
} FdCtx;

static double fd_loss(void *p) {
    FdCtx *c = p;
    const int ld = 3 * c->D;
    flash_attention_forward(c->O, c->D, c->lse, &(FlashHead){c->qkv, ld, c->qkv + c->D, ld, c->qkv + 2 * c->D, ld,
                            c->N, c->D, c->causal, c->key_len, c->Bq, c->Bk}, c->scratch);
    double L = 0.0;
    for (int i = 0; i < c->N * c->D; i++) L += (double)c->O[i] * c->G[i];
    return L;
}

static void test_gradcheck(void **state) {
    (void)state;
    const int N = 7, D = 3;
    Rng rng;
    rng_seed(&rng, 5, 0);
    assert_int_equal(backend_select("naive"), 0);
    for (int mask = 0; mask < 4; mask++) {
        FdCtx c = {0};
        c.N = N; c.D = D; c.Bq = 3; c.Bk = 2;
        c.causal = mask & 1;
        c.key_len = (mask & 2) ? 5 : N;
        c.qkv = alloc_floats((size_t)N * 3 * D);
        c.O = alloc_floats((size_t)N * D);
        c.lse = alloc_floats((size_t)N);
        c.G = alloc_floats((size_t)N * D);
        c.scratch = alloc_floats(flash_attention_scratch_floats(c.Bq, c.Bk));
        float *dqkv = alloc_floats((size_t)N * 3 * D);
        fill(c.qkv, (size_t)N * 3 * D, 1.0f, &rng);
        fill(c.G, (size_t)N * D, 1.0f, &rng);
        fd_loss(&c);
        const int ld = 3 * D;
        flash_attention_backward(dqkv, dqkv + D, dqkv + 2 * D, ld, c.G, D, c.O, D, c.lse, &(FlashHead){c.qkv, ld,
                                 c.qkv + D, ld, c.qkv + 2 * D, ld, N, D, c.causal, c.key_len, c.Bq, c.Bk}, c.scratch);
        GradCheckResult res = gradcheck(fd_loss, &c, c.qkv, dqkv, (size_t)N * 3 * D, 1e-3f, 1000);
        if (!(res.max_rel_err < 1e-2))
            fail_msg("mask %d: max_rel_err %.3g at %zu (numeric %.6g, analytic %.6g)", mask,
                     res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic);
        free(c.qkv); free(c.O); free(c.lse); free(c.G); free(c.scratch); free(dqkv);
    }
    assert_int_equal(backend_select(NULL), 0);
}

/* One run of the multi-head layer (plain or fused, as s says); returns the
 * buffers O | dX | dparams in one array. */
static float *run_layer(const MultiHeadSpec *s, const float *params, const float *X, const float *dO,
                        int causal, const int *lens, int B, int N) {
    const size_t n_out = (size_t)B * N * s->D_out, n_x = (size_t)B * N * s->D;
    const size_t n_p = multi_head_param_count(s);
    float *res = alloc_floats(n_out + n_x + n_p);
    float *A = alloc_floats(multi_head_attention_floats(s, B, N));
    float *cache = alloc_floats(multi_head_cache_floats(s, B, N));
    float *scratch = alloc_floats(multi_head_scratch_floats(s, B, N));
    MultiHeadWeights w = multi_head_weights_view(s, (float *)params);
    MultiHeadWeights dw = multi_head_weights_view(s, res + n_out + n_x);
    multi_head_forward(res, multi_head_attention_floats(s, B, N) ? A : NULL, NULL, cache, X, s, &w, causal,
                       lens, B, N);
    multi_head_backward(res + n_out, &dw, scratch, dO, multi_head_attention_floats(s, B, N) ? A : NULL,
                        NULL, cache, X, s, &w, causal, lens, B, N);
    free(A); free(cache); free(scratch);
    return res;
}

static void test_multi_head_fused_equals_plain(void **state) {
    (void)state;
    const MultiHeadSpec s = {6, 2, 5, 4, MULTI_HEAD_PLAIN, 0};
    const MultiHeadSpec s_fused = {6, 2, 5, 4, MULTI_HEAD_FUSED, 0};
    const int B = 3, N = 70;                 /* 70: one full block of 64 and a partial one */
    const int lens[3] = {0, 33, 1};
    Rng rng;
    rng_seed(&rng, 3, 0);
    float *params = alloc_floats(multi_head_param_count(&s));
    MultiHeadWeights w = multi_head_weights_view(&s, params);
    multi_head_init(&s, &w, &rng);
    fill(w.b_O, (size_t)s.D_out, 0.1f, &rng);
    float *X = alloc_floats((size_t)B * N * s.D), *dO = alloc_floats((size_t)B * N * s.D_out);
    fill(X, (size_t)B * N * s.D, 1.0f, &rng);
    fill(dO, (size_t)B * N * s.D_out, 1.0f, &rng);
    const size_t n = (size_t)B * N * (s.D_out + s.D) + multi_head_param_count(&s);
    for (int k = 0; k < n_backends(); k++) {
        assert_int_equal(backend_select(backend_at(k)), 0);
        for (int causal = 0; causal < 2; causal++) {
            float *plain = run_layer(&s, params, X, dO, causal, lens, B, N);
            assert_int_equal(multi_head_attention_floats(&s_fused, B, N), 0);
            float *fused = run_layer(&s_fused, params, X, dO, causal, lens, B, N);
            for (size_t i = 0; i < n; i++)
                if (!(fabsf(fused[i] - plain[i]) <= 1e-4f * (1.0f + fabsf(plain[i]))))
                    fail_msg("%s causal %d: entry %zu of O|dX|dW is %.8g fused, %.8g plain", backend_at(k),
                             causal, i, fused[i], plain[i]);
            free(plain); free(fused);
        }
    }
    MultiHeadAttention a = MULTI_HEAD_FUSED;
    assert_int_equal(multi_head_attention_from_name("plain", &a), 0);
    assert_int_equal(a, MULTI_HEAD_PLAIN);
    assert_int_equal(multi_head_attention_from_name("fused", &a), 0);
    assert_int_equal(a, MULTI_HEAD_FUSED);
    assert_int_equal(multi_head_attention_from_name("flash", &a), -1);
    assert_non_null(strstr(last_error(), "'flash'"));
    assert_int_equal(a, MULTI_HEAD_FUSED);      /* untouched on error */
    assert_int_equal(backend_select(NULL), 0);
    free(params); free(X); free(dO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_multi_head_fused_equals_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
