/* test_rope.c - rotary position embeddings (common/nn/rope.h) and chapter
 * 05's multi-head layer with them (chapter 06's rope_attention.h, --pos rope).
 *
 *  - rope_backward against finite differences of rope_forward, on rows with a
 *    stride wider than the heads and at a position offset;
 *  - the rotation keeps each pair's length, and the score of a rotated query
 *    and key depends on their positions only through the difference t - s;
 *  - rotating N rows at once from position p0 equals rotating each row alone
 *    at p0 + n, bit for bit (what the KV cache relies on);
 *  - the multi-head layer with rope: dX, dW_QKV, dW_O, db_O against finite
 *    differences, plain and fused, causal and padded; plain and fused agree;
 *    the rotation changes the outputs, but not position 0's (angle 0);
 *  - an odd head width is refused with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "05_multi_head_attention/multi_head.h"
#include "06_transformer/rope_attention.h"
#include "nn/gradcheck.h"
#include "nn/rope.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

static void fill(float *x, size_t n, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(r) - 1.0f;
}

static void expect_grad_ok(GradCheckResult res, const char *what) {
    if (res.max_rel_err > 1e-2)
        print_error("%s: max rel err %g at %zu (numeric %g, analytic %g)\n", what, res.max_rel_err,
                    res.worst_index, res.worst_numeric, res.worst_analytic);
    assert_true(res.max_rel_err < 1e-2);
}

/* ------------------------------------------------------------ the kernel */

typedef struct {
    float *X, *Y, *w;      /* input, its rotated copy, the loss's weights */
    int ld, N, H, D_H, pos0;
} RopeCtx;

/* L = sum over the heads' columns of w * rope(X) */
static double rope_loss(void *ctx) {
    RopeCtx *c = ctx;
    memcpy(c->Y, c->X, sizeof(float) * (size_t)c->N * c->ld);
    rope_forward(c->Y, c->ld, c->N, c->H, c->D_H, c->pos0);
    double L = 0.0;
    for (int n = 0; n < c->N; n++)
        for (int j = 0; j < c->H * c->D_H; j++) L += (double)c->w[(size_t)n * c->ld + j] * c->Y[(size_t)n * c->ld + j];
    return L;
}

static void test_rope_gradient(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 3, 0);
    const int shapes[3][4] = {{1, 1, 2, 0}, {5, 2, 4, 7}, {4, 3, 6, 300}};   /* N, H, D_H, pos0 */
    for (int k = 0; k < 3; k++) {
        RopeCtx c = {NULL, NULL, NULL, 0, shapes[k][0], shapes[k][1], shapes[k][2], shapes[k][3]};
        c.ld = c.H * c.D_H + 3;   /* a wider row, as inside [Q|K|V] */
        const size_t n = (size_t)c.N * c.ld;
        c.X = xmalloc(sizeof(float) * n);
        c.Y = xmalloc(sizeof(float) * n);
        c.w = xmalloc(sizeof(float) * n);
        float *dX = xmalloc(sizeof(float) * n);
        fill(c.X, n, &r);
        fill(c.w, n, &r);
        memcpy(dX, c.w, sizeof(float) * n);   /* dY = w, rotated back in place */
        rope_backward(dX, c.ld, c.N, c.H, c.D_H, c.pos0);
        for (int i = 0; i < c.N; i++)          /* the columns past the heads are not RoPE's: zero */
            for (int j = c.H * c.D_H; j < c.ld; j++) dX[(size_t)i * c.ld + j] = 0.0f;
        expect_grad_ok(gradcheck(rope_loss, &c, c.X, dX, n, 1e-3f, 1000), "rope dX");
        free(c.X); free(c.Y); free(c.w); free(dX);
    }
}

static double dot(const float *a, const float *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* |q'| = |q| pair by pair, and q'_t . k'_s = q'_{t+m} . k'_{s+m} */
static void test_rope_sees_relative_positions(void **state) {
    (void)state;
    enum { D_H = 8 };
    Rng r;
    rng_seed(&r, 4, 0);
    float q[D_H], k[D_H], qt[D_H], ks[D_H];
    fill(q, D_H, &r);
    fill(k, D_H, &r);
    memcpy(qt, q, sizeof q);
    rope_forward(qt, D_H, 1, 1, D_H, 37);
    for (int i = 0; i < D_H; i += 2)
        assert_float_equal(qt[i] * qt[i] + qt[i + 1] * qt[i + 1], q[i] * q[i] + q[i + 1] * q[i + 1], 1e-5);
    const int pairs[4][2] = {{5, 2}, {9, 6}, {103, 100}, {1003, 1000}};   /* t - s = 3 each */
    double first = 0.0;
    for (int p = 0; p < 4; p++) {
        memcpy(qt, q, sizeof q);
        memcpy(ks, k, sizeof k);
        rope_forward(qt, D_H, 1, 1, D_H, pairs[p][0]);
        rope_forward(ks, D_H, 1, 1, D_H, pairs[p][1]);
        const double score = dot(qt, ks, D_H);
        if (p == 0) first = score;
        assert_float_equal(score, first, 1e-5);
    }
    /* and another difference gives another score */
    memcpy(qt, q, sizeof q);
    memcpy(ks, k, sizeof k);
    rope_forward(qt, D_H, 1, 1, D_H, 5);
    rope_forward(ks, D_H, 1, 1, D_H, 4);
    assert_true(fabs(dot(qt, ks, D_H) - first) > 1e-3);
}

/* N rows from p0 at once == each row alone at p0 + n, the same bits */
static void test_rope_rows_one_at_a_time(void **state) {
    (void)state;
    enum { N = 9, H = 2, D_H = 6, LD = 3 * H * D_H };
    Rng r;
    rng_seed(&r, 5, 0);
    float all[N * LD], one[N * LD];
    fill(all, N * LD, &r);
    memcpy(one, all, sizeof all);
    rope_forward(all, LD, N, H, D_H, 4);
    for (int n = 0; n < N; n++) rope_forward(one + n * LD, LD, 1, H, D_H, 4 + n);
    assert_memory_equal(all, one, sizeof all);
}

/* ------------------------------------------------- the multi-head layer */

typedef struct {
    MultiHeadSpec s;
    int rope;   /* 1: rope_attention_forward, 0: chapter 05's multi_head_forward */
    MultiHeadWeights w, dw;
    float *params, *grads;
    float *X, *dX, *O, *dO, *A, *cache, *scratch;
    int B, N, causal;
    const int *lens;
} Layer;

static void layer_make(Layer *L, MultiHeadSpec s, int rope, int B, int N, int causal, const int *lens, Rng *r) {
    memset(L, 0, sizeof *L);
    L->s = s;
    L->rope = rope;
    L->B = B; L->N = N; L->causal = causal; L->lens = lens;
    const size_t np = multi_head_param_count(&s);
    L->params = xmalloc(sizeof(float) * np);
    L->grads = xcalloc(np, sizeof(float));
    fill(L->params, np, r);
    L->w = multi_head_weights_view(&s, L->params);
    L->dw = multi_head_weights_view(&s, L->grads);
    const size_t nX = (size_t)B * N * s.D, nO = (size_t)B * N * s.D_out;
    L->X = xmalloc(sizeof(float) * nX);
    L->dX = xcalloc(nX, sizeof(float));
    L->O = xmalloc(sizeof(float) * nO);
    L->dO = xmalloc(sizeof(float) * nO);
    fill(L->X, nX, r);
    fill(L->dO, nO, r);
    L->A = xcalloc(multi_head_attention_floats(&s, B, N) + 1, sizeof(float));
    L->cache = xcalloc(multi_head_cache_floats(&s, B, N), sizeof(float));
    L->scratch = xcalloc(multi_head_scratch_floats(&s, B, N), sizeof(float));
}

static void layer_free(Layer *L) {
    free(L->params); free(L->grads); free(L->X); free(L->dX); free(L->O); free(L->dO);
    free(L->A); free(L->cache); free(L->scratch);
}

static void layer_forward(Layer *L) {
    if (L->rope)
        rope_attention_forward(L->O, L->A, NULL, L->cache, L->X, &L->s, &L->w, L->causal, L->lens, L->B, L->N);
    else
        multi_head_forward(L->O, L->A, NULL, L->cache, L->X, &L->s, &L->w, L->causal, L->lens, L->B, L->N);
}

/* L = sum of dO * O over the real rows (padding rows are the caller's to ignore) */
static double layer_loss(void *ctx) {
    Layer *L = ctx;
    layer_forward(L);
    double sum = 0.0;
    for (int b = 0; b < L->B; b++) {
        const int len = L->lens && L->lens[b] ? L->lens[b] : L->N;
        for (size_t i = 0; i < (size_t)len * L->s.D_out; i++) {
            const size_t at = (size_t)b * L->N * L->s.D_out + i;
            sum += (double)L->dO[at] * L->O[at];
        }
    }
    return sum;
}

static void check_layer(MultiHeadSpec s, int B, int N, int causal, const int *lens, const char *what) {
    Rng r;
    rng_seed(&r, 11, 0);
    Layer L;
    layer_make(&L, s, 1, B, N, causal, lens, &r);
    for (int b = 0; b < B; b++) {   /* no gradient from padding rows */
        const int len = lens && lens[b] ? lens[b] : N;
        memset(L.dO + ((size_t)b * N + len) * s.D_out, 0, sizeof(float) * (size_t)(N - len) * s.D_out);
    }
    layer_forward(&L);
    rope_attention_backward(L.dX, &L.dw, L.scratch, L.dO, L.A, NULL, L.cache, L.X, &L.s, &L.w, causal, lens, B, N);
    char name[96];
    snprintf(name, sizeof name, "%s dX", what);
    expect_grad_ok(gradcheck(layer_loss, &L, L.X, L.dX, (size_t)B * N * s.D, 1e-3f, 300), name);
    snprintf(name, sizeof name, "%s dW_QKV", what);
    expect_grad_ok(gradcheck(layer_loss, &L, L.params, L.grads, (size_t)s.D * 3 * s.H * s.D_H, 1e-3f, 300), name);
    const size_t rest = multi_head_param_count(&s) - (size_t)s.D * 3 * s.H * s.D_H;
    snprintf(name, sizeof name, "%s dW_O, db_O", what);
    const size_t off = (size_t)s.D * 3 * s.H * s.D_H;
    expect_grad_ok(gradcheck(layer_loss, &L, L.params + off, L.grads + off, rest, 1e-3f, 300), name);
    layer_free(&L);
}

static void test_multi_head_rope_gradients(void **state) {
    (void)state;
    const int lens[3] = {4, 0, 1};
    for (int fused = 0; fused < 2; fused++) {
        const MultiHeadAttention at = fused ? MULTI_HEAD_FUSED : MULTI_HEAD_PLAIN;
        check_layer((MultiHeadSpec){6, 2, 4, 6, at, 0}, 2, 5, 0, NULL, fused ? "fused" : "plain");
        check_layer((MultiHeadSpec){5, 3, 2, 7, at, 0}, 3, 6, 1, lens,
                    fused ? "fused, causal, padded" : "plain, causal, padded");
    }
}

/* plain and fused agree with rope; rope changes the outputs, but not at position 0 */
static void test_multi_head_rope_paths_agree(void **state) {
    (void)state;
    enum { B = 2, N = 70, D = 8 };   /* N past one block of the fused kernel */
    Rng r;
    const int lens[B] = {33, 0};
    Layer plain, fused, none;
    rng_seed(&r, 12, 0);
    layer_make(&plain, (MultiHeadSpec){D, 2, 4, D, MULTI_HEAD_PLAIN, 0}, 1, B, N, 1, lens, &r);
    rng_seed(&r, 12, 0);
    layer_make(&fused, (MultiHeadSpec){D, 2, 4, D, MULTI_HEAD_FUSED, 0}, 1, B, N, 1, lens, &r);
    rng_seed(&r, 12, 0);
    layer_make(&none, (MultiHeadSpec){D, 2, 4, D, MULTI_HEAD_PLAIN, 0}, 0, B, N, 1, lens, &r);
    layer_forward(&plain);
    layer_forward(&fused);
    layer_forward(&none);
    double differs = 0.0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < (lens[b] ? lens[b] : N) * D; i++) {
            const size_t at = (size_t)b * N * D + i;
            assert_float_equal(plain.O[at], fused.O[at], 1e-5);
            differs = fmax(differs, fabs(plain.O[at] - none.O[at]));
        }
    assert_true(differs > 1e-3);
    for (int i = 0; i < D; i++) assert_true(plain.O[i] == none.O[i]);   /* position 0 turns by angle 0 */
    layer_free(&plain);
    layer_free(&fused);
    layer_free(&none);
}

static void test_rope_refuses_odd_head_width(void **state) {
    (void)state;
    const MultiHeadSpec s = {6, 2, 3, 6, MULTI_HEAD_PLAIN, 0};
    assert_int_equal(rope_attention_check(&s), -1);
    assert_non_null(strstr(last_error(), "even"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_gradient),
        cmocka_unit_test(test_rope_sees_relative_positions),
        cmocka_unit_test(test_rope_rows_one_at_a_time),
        cmocka_unit_test(test_multi_head_rope_gradients),
        cmocka_unit_test(test_multi_head_rope_paths_agree),
        cmocka_unit_test(test_rope_refuses_odd_head_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
