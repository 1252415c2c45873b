/* test_sparse_attention.c - chapter 06, part 5: window, global and random
 * attention on the fused kernel (sparse_attention.h).
 *
 *  - the layout: the window and global rules exactly, r random blocks per
 *    query block from the others (all of them when fewer), none after the
 *    query's block when causal, the same draw for the same seed;
 *  - the heads against dense attention with the same mask, written out here
 *    in double (softmax over the allowed keys, and its backward), causal and
 *    not, with padding (a padding query that sees no key gives 0);
 *  - a window wider than the sequence is chapter 05's fused kernel, bit for bit;
 *  - in chapter 06's block: no parameters of its own, and the block's
 *    gradients by finite differences, with and without rotary positions;
 *  - with rope and a window of every block: chapter 06's rope attention;
 *  - its refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "05_multi_head_attention/flash_attention.h"
#include "06_transformer/block.h"
#include "06_transformer/rope_attention.h"
#include "06_transformer/sparse_attention.h"
#include "nn/gradcheck.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "block_checks.h"

#define EPS 5e-3f      /* see test_attention.c */
#define TOL 1e-2
#define MAX_CHECKS 120

static const SparsePattern PATTERNS[] = {   /* P, window, global, random, seed */
    {4, 1, 0, 0, 1}, {4, 0, 1, 0, 1}, {4, 1, 1, 2, 7}, {3, 0, 0, 3, 5}, {5, 2, 2, 1, 9}};
#define N_PATTERNS (int)(sizeof PATTERNS / sizeof PATTERNS[0])

static void test_sparse_layout(void **state) {
    (void)state;
    for (int k = 0; k < N_PATTERNS; k++)
        for (int causal = 0; causal < 2; causal++) {
            const SparsePattern *p = &PATTERNS[k];
            SparseLayout L, again;
            assert_int_equal(sparse_layout_create(&L, p, 41, causal), 0);
            assert_int_equal(sparse_layout_create(&again, p, 41, causal), 0);
            const int nb = L.n_blocks;
            assert_int_equal(nb, (41 + p->P - 1) / p->P);
            for (int bi = 0; bi < nb; bi++) {
                int fixed = 0, others = 0, seen = 0;
                for (int bj = 0; bj < nb; bj++) {
                    const int d = bi - bj, allowed_side = !causal || bj <= bi;
                    const int window = causal ? d >= 0 && d <= p->window : abs(d) <= p->window;
                    const int rule = allowed_side && (window || bi < p->global || bj < p->global);
                    const int is_seen = sparse_allows(&L, bi * p->P + p->P - 1, bj * p->P);
                    if (rule) assert_true(is_seen);
                    if (!allowed_side) assert_false(is_seen);
                    fixed += rule;
                    others += allowed_side && !rule;
                    seen += is_seen;
                }
                const int random = p->random < others ? p->random : others;
                assert_int_equal(seen, fixed + random);
                assert_int_equal(L.first[bi + 1] - L.first[bi], seen);
                for (int e = L.first[bi]; e < L.first[bi + 1]; e++) {
                    assert_int_equal(L.keys[e], again.keys[e]);                 /* the seed decides the draw */
                    if (e > L.first[bi]) assert_true(L.keys[e] > L.keys[e - 1]);   /* ascending */
                }
            }
            if (causal)
                for (int i = 0; i < 41; i++) assert_false(sparse_allows(&L, i, i + 1 < 41 ? i + 1 : 40) && i < 40);
            sparse_layout_free(&L);
            sparse_layout_free(&again);
        }
}

/* Dense attention with the layout's mask, in double, forward and backward:
 * one head, Q, K, V [N, D_H] at row stride ld; rows i >= key_len are
 * queries too, keys j >= key_len are padding. */
static void dense_head(float *O, int ldo, float *dQ, float *dK, float *dV, const float *dO, int lddo, const float *Q,
                       const float *K, const float *V, int ld, int N, int D_H, int key_len, const SparseLayout *L) {
    const double scale = 1.0 / sqrt((double)D_H);
    double *a = malloc(sizeof(double) * (size_t)N), *da = malloc(sizeof(double) * (size_t)N);
    for (int i = 0; i < N; i++) {
        double m = -INFINITY, sum = 0.0, dot = 0.0;
        for (int j = 0; j < N; j++) {
            a[j] = -INFINITY;
            if (j >= key_len || !sparse_allows(L, i, j)) continue;
            double s = 0.0;
            for (int d = 0; d < D_H; d++) s += (double)Q[(size_t)i * ld + d] * K[(size_t)j * ld + d];
            a[j] = s * scale;
            if (a[j] > m) m = a[j];
        }
        for (int j = 0; j < N; j++) sum += a[j] == -INFINITY ? 0.0 : exp(a[j] - m);
        for (int j = 0; j < N; j++) a[j] = a[j] == -INFINITY ? 0.0 : exp(a[j] - m) / sum;
        for (int d = 0; d < D_H; d++) {
            double o = 0.0;
            for (int j = 0; j < N; j++) o += a[j] * V[(size_t)j * ld + d];
            O[(size_t)i * ldo + d] = (float)o;
        }
        if (!dO) continue;
        for (int j = 0; j < N; j++) {   /* da_j = dO_i . v_j; dV_j += a_j dO_i */
            da[j] = 0.0;
            for (int d = 0; d < D_H; d++) {
                da[j] += (double)dO[(size_t)i * lddo + d] * V[(size_t)j * ld + d];
                dV[(size_t)j * ld + d] += (float)(a[j] * dO[(size_t)i * lddo + d]);
            }
            dot += a[j] * da[j];
        }
        for (int j = 0; j < N; j++) {   /* ds_j = a_j (da_j - sum_k a_k da_k) */
            const double ds = a[j] * (da[j] - dot) * scale;
            if (ds == 0.0) continue;
            for (int d = 0; d < D_H; d++) {
                dQ[(size_t)i * ld + d] += (float)(ds * K[(size_t)j * ld + d]);
                dK[(size_t)j * ld + d] += (float)(ds * Q[(size_t)i * ld + d]);
            }
        }
    }
    free(a);
    free(da);
}

static void test_sparse_equals_dense(void **state) {
    (void)state;
    enum { B = 2, N = 37, H = 2, D_H = 5, HD = H * D_H, LD = 3 * HD };
    const int lens[B] = {37, 15};
    Rng r;
    rng_seed(&r, 3, 0);
    float *QKV = zeroed_floats(B * N * LD), *dY = zeroed_floats(B * N * HD);
    fill_uniform(QKV, B * N * LD, 1.5f, &r);
    fill_uniform(dY, B * N * HD, 1.0f, &r);
    for (int k = 0; k < N_PATTERNS; k++)
        for (int causal = 0; causal < 2; causal++) {
            SparseLayout L;
            assert_int_equal(sparse_layout_create(&L, &PATTERNS[k], N, causal), 0);
            float *Y = zeroed_floats(B * N * HD), *lse = zeroed_floats(B * H * N);
            float *dQKV = zeroed_floats(B * N * LD), *scratch = zeroed_floats(sparse_attention_block_floats(&L));
            float *Y_ref = zeroed_floats(B * N * HD), *dQKV_ref = zeroed_floats(B * N * LD);
            sparse_attention_forward_heads(Y, lse, QKV, B, N, H, D_H, lens, &L, scratch);
            sparse_attention_backward_heads(dQKV, dY, QKV, Y, lse, B, N, H, D_H, lens, &L, scratch);
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++) {
                    const size_t q = (size_t)b * N * LD + h * D_H, y = (size_t)b * N * HD + h * D_H;
                    dense_head(Y_ref + y, HD, dQKV_ref + q, dQKV_ref + q + HD, dQKV_ref + q + 2 * HD, dY + y, HD,
                               QKV + q, QKV + q + HD, QKV + q + 2 * HD, LD, N, D_H, lens[b], &L);
                }
            char what[96];
            snprintf(what, sizeof what, "pattern %d causal %d: Y", k, causal);
            expect_close(Y, Y_ref, B * N * HD, 1e-5f, what);
            snprintf(what, sizeof what, "pattern %d causal %d: d[Q|K|V]", k, causal);
            expect_close(dQKV, dQKV_ref, B * N * LD, 1e-4f, what);
            free(Y); free(lse); free(dQKV); free(scratch); free(Y_ref); free(dQKV_ref);
            sparse_layout_free(&L);
        }
    free(QKV);
    free(dY);
}

/* A window of every block: the same calls as chapter 05's kernel, the same bits. */
static void test_sparse_full_is_chapter05(void **state) {
    (void)state;
    enum { B = 2, N = 45, H = 3, D_H = 4, HD = H * D_H, LD = 3 * HD, P = 8 };
    const int lens[B] = {45, 30};
    Rng r;
    rng_seed(&r, 5, 0);
    float *QKV = zeroed_floats(B * N * LD), *dY = zeroed_floats(B * N * HD);
    fill_uniform(QKV, B * N * LD, 1.5f, &r);
    fill_uniform(dY, B * N * HD, 1.0f, &r);
    for (int causal = 0; causal < 2; causal++) {
        SparseLayout L;
        assert_int_equal(sparse_layout_create(&L, &(SparsePattern){P, N, 0, 0, 1}, N, causal), 0);
        assert_float_equal(sparse_density(&L, N), 1.0, 0.0);
        float *Y = zeroed_floats(B * N * HD), *lse = zeroed_floats(B * H * N), *dQKV = zeroed_floats(B * N * LD);
        float *Y5 = zeroed_floats(B * N * HD), *lse5 = zeroed_floats(B * H * N), *dQKV5 = zeroed_floats(B * N * LD);
        float *scratch = zeroed_floats(flash_attention_scratch_floats(P, P));
        sparse_attention_forward_heads(Y, lse, QKV, B, N, H, D_H, lens, &L, scratch);
        sparse_attention_backward_heads(dQKV, dY, QKV, Y, lse, B, N, H, D_H, lens, &L, scratch);
        flash_attention_forward_heads(Y5, lse5, QKV, B, N, H, D_H, causal, lens, P, P, scratch);
        flash_attention_backward_heads(dQKV5, dY, QKV, Y5, lse5, B, N, H, D_H, causal, lens, P, P, scratch);
        assert_memory_equal(Y, Y5, sizeof(float) * B * N * HD);
        assert_memory_equal(lse, lse5, sizeof(float) * B * H * N);
        assert_memory_equal(dQKV, dQKV5, sizeof(float) * B * N * LD);
        free(Y); free(lse); free(dQKV); free(Y5); free(lse5); free(dQKV5); free(scratch);
        sparse_layout_free(&L);
    }
    free(QKV);
    free(dY);
}

/* In chapter 06's block: no parameters of its own, and the block's
 * gradients by finite differences (block_checks.h). */
static void test_sparse_in_the_block(void **state) {
    (void)state;
    enum { B = 2, N = 11, D = 8, H = 2, D_H = 4, F = 8 };
    for (int causal = 0; causal < 2; causal++)
        for (int rope = 0; rope < 2; rope++) {
            Rng r;
            rng_seed(&r, 23 + causal + 2 * rope, 0);
            SparseLayout L;
            assert_int_equal(sparse_layout_create(&L, &(SparsePattern){2, 1, 1, 1, 3}, N, causal), 0);
            const SparseAttention options = {&L, rope};
            const BlockSelfAttention sparse = sparse_attention_hook(&options);
            const BlockSpec s = {.D = D, .H = H, .D_H = D_H, .F = F, .norm_place = BLOCK_PRE_NORM,
                                 .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_FUSED,
                                 .causal = causal, .self_attention = &sparse};
            BlockSpec dense = s;
            dense.self_attention = NULL;
            assert_int_equal(block_param_count(&s), block_param_count(&dense));
            const int lens[B] = {N, 6};
            expect_block_gradients(&s, B, N, causal ? NULL : lens, 0, &r, EPS, TOL, MAX_CHECKS, "sparse block");
            sparse_layout_free(&L);
        }
}

/* With a window of every block and rope, the hook is chapter 06's rope
 * attention on the fused kernel: the same numbers (blocks of 4 against 64). */
static void test_sparse_rope_is_rope_attention(void **state) {
    (void)state;
    enum { B = 2, N = 13, D = 8, H = 2, D_H = 4 };
    Rng r;
    rng_seed(&r, 31, 0);
    const MultiHeadSpec s = {D, H, D_H, D, MULTI_HEAD_FUSED, 0};
    const size_t nP = multi_head_param_count(&s), nX = (size_t)B * N * D;
    float *params = zeroed_floats(nP), *X = zeroed_floats(nX), *dO = zeroed_floats(nX);
    fill_uniform(params, nP, 0.5f, &r);
    fill_uniform(X, nX, 1.0f, &r);
    fill_uniform(dO, nX, 1.0f, &r);
    const MultiHeadWeights w = multi_head_weights_view(&s, params);
    SparseLayout L;
    assert_int_equal(sparse_layout_create(&L, &(SparsePattern){4, N, 0, 0, 1}, N, 1), 0);
    const SparseAttention options = {&L, 1};
    const BlockSelfAttention a = sparse_attention_hook(&options);
    float *O = zeroed_floats(nX), *O_ref = zeroed_floats(nX), *dX = zeroed_floats(nX), *dX_ref = zeroed_floats(nX);
    float *cache = zeroed_floats(a.cache_floats(a.options, &s, B, N));
    float *scratch = zeroed_floats(a.scratch_floats(a.options, &s, B, N));
    float *cache_ref = zeroed_floats(multi_head_cache_floats(&s, B, N));
    float *scratch_ref = zeroed_floats(multi_head_scratch_floats(&s, B, N));
    a.forward(a.options, O, NULL, NULL, cache, X, &s, &w, NULL, 1, NULL, B, N);
    a.backward(a.options, dX, NULL, NULL, scratch, dO, NULL, NULL, cache, X, &s, &w, NULL, 1, NULL, B, N);
    rope_attention_forward(O_ref, NULL, NULL, cache_ref, X, &s, &w, 1, NULL, B, N);
    rope_attention_backward(dX_ref, NULL, scratch_ref, dO, NULL, NULL, cache_ref, X, &s, &w, 1, NULL, B, N);
    expect_close(O, O_ref, nX, 1e-5f, "sparse rope: O");
    expect_close(dX, dX_ref, nX, 1e-4f, "sparse rope: dX");
    free(params); free(X); free(dO); free(O); free(O_ref); free(dX); free(dX_ref);
    free(cache); free(scratch); free(cache_ref); free(scratch_ref);
    sparse_layout_free(&L);
}

static void test_sparse_refusals(void **state) {
    (void)state;
    SparseLayout L;
    assert_int_equal(sparse_layout_create(&L, &(SparsePattern){0, 1, 0, 0, 1}, 16, 1), -1);
    assert_int_equal(sparse_layout_create(&L, &(SparsePattern){4, -1, 0, 0, 1}, 16, 1), -1);
    assert_int_equal(sparse_layout_create(&L, &(SparsePattern){4, 1, 0, -2, 1}, 16, 1), -1);
    assert_int_equal(sparse_layout_create(&L, &(SparsePattern){4, 1, 0, 0, 1}, 0, 1), -1);
    assert_int_equal(sparse_layout_create(&L, &(SparsePattern){4, 1, 0, 0, 1}, 16, 1), 0);
    const SparseAttention options = {&L, 0};
    const BlockSelfAttention sparse = sparse_attention_hook(&options);
    BlockSpec s = {.D = 8, .H = 2, .D_H = 4, .F = 12, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                   .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_FUSED, .causal = 1, .self_attention = &sparse};
    assert_int_equal(block_spec_check(&s), 0);
    s.causal = 0;   /* the layout is causal */
    assert_int_equal(block_spec_check(&s), -1);
    s.causal = 1;
    s.cross = 1;
    assert_int_equal(block_spec_check(&s), -1);
    s.cross = 0;
    s.rope = 1;
    assert_int_equal(block_spec_check(&s), -1);
    sparse_layout_free(&L);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sparse_layout),
        cmocka_unit_test(test_sparse_equals_dense),
        cmocka_unit_test(test_sparse_full_is_chapter05),
        cmocka_unit_test(test_sparse_in_the_block),
        cmocka_unit_test(test_sparse_rope_is_rope_attention),
        cmocka_unit_test(test_sparse_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
