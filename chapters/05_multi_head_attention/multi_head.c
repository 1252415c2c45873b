/* multi_head.c - chapter 05: multi-head self-attention as 4 big matmuls
 * (see multi_head.h).
 *
 * Forward, for B sequences of N positions (R = B*N rows):
 *   1. [Q|K|V] = X W_QKV              one sgemm   [R, D] x [D, 3 H D_H]
 *   per sequence b, per head h, chapter 03's dot_attention_forward:
 *   2. E = Q_h K_h^T / sqrt(D_H)      one sgemm   [N, D_H] x [D_H, N], written into A
 *      blocked pairs -> -inf, A = softmax(E) in place
 *   3. Y_h = A V_h                    one sgemm   [N, N] x [N, D_H], into head h's columns of Y
 *   4. O = Y W_O + b_O                one sgemm   [R, H D_H] x [H D_H, D_out]
 * Backward runs the same products in reverse, again big ones:
 *   4'. dY = dO W_O^T,  dW_O += Y^T dO,  db_O += column sums of dO
 *   per sequence b, per head h, chapter 03's dot_attention_backward:
 *   3'. dA = dY_h V_h^T,  dV_h += A^T dY_h
 *   2'. dE = softmax'(dA),  dQ_h += dE K_h / sqrt(D_H),  dK_h += dE^T Q_h / sqrt(D_H)
 *   1'. dW_QKV += X^T d[Q|K|V],  dX += d[Q|K|V] W_QKV^T
 * Q_h, K_h, V_h, dQ_h, ... are never copied: they are column blocks of the
 * [R, 3 H D_H] matrices, reached through their row stride 3 H D_H.
 * With s->attention == MULTI_HEAD_FUSED, steps 2-3 and 3'-2' are done by
 * flash_attention.c instead, block by block, without A (same results within
 * float rounding, O(N) memory instead of N x N per head).
 * With keep masks (dropout on the weights, plain path only), step 3 is
 * Y_h = (A o keep) V_h and 3' scales dA by keep: chapter 03 does both.
 * The sequences are independent, so the threads share them out in steps
 * 2-3 and 3'-2' (each thread with its own [N, N] scratch); one (sequence,
 * head) is computed by one thread exactly as on one thread, so the bits do
 * not depend on the thread count. */
#include "05_multi_head_attention/multi_head.h"

#include <assert.h>
#include <math.h>
#include "util/openmp.h"
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "05_multi_head_attention/flash_attention.h"
#include "util/error.h"
#include "kernels/matmul.h"
#include "nn/params.h"

int multi_head_attention_from_name(const char *name, MultiHeadAttention *out) {
    if (name && strcmp(name, "plain") == 0) *out = MULTI_HEAD_PLAIN;
    else if (name && strcmp(name, "fused") == 0) *out = MULTI_HEAD_FUSED;
    else return fail("attention '%s': expected 'plain' or 'fused'", name ? name : "(null)");
    return 0;
}

int multi_head_spec_check(const MultiHeadSpec *s) {
    if (s->D < 1 || s->H < 1 || s->D_H < 1 || s->D_out < 1)
        return fail("multi-head attention D=%d H=%d D_H=%d D_out=%d: expected every size at least 1", s->D, s->H,
                    s->D_H, s->D_out);
    return 0;
}

size_t multi_head_param_count(const MultiHeadSpec *s) {
    const size_t HD = (size_t)s->H * s->D_H;
    return (size_t)s->D * 3 * HD + HD * s->D_out + (size_t)s->D_out;
}

MultiHeadWeights multi_head_weights_view(const MultiHeadSpec *s, float *base) {
    const size_t HD = (size_t)s->H * s->D_H;
    MultiHeadWeights w;
    w.W_QKV = base;
    w.W_O = w.W_QKV + (size_t)s->D * 3 * HD;
    w.b_O = w.W_O + HD * s->D_out;
    return w;
}

void multi_head_init(const MultiHeadSpec *s, const MultiHeadWeights *w, Rng *rng) {
    const int HD = s->H * s->D_H;
    /* Xavier for each of W_Q, W_K, W_V [D, H*D_H]: they share one limit */
    init_uniform(w->W_QKV, (size_t)s->D * 3 * HD, sqrtf(6.0f / (float)(s->D + HD)), rng);
    init_xavier(w->W_O, HD, s->D_out, rng);
    if (w->b_O) init_constant(w->b_O, (size_t)s->D_out, 0.0f);
}

/* Head h's scale on Q_h K_h^T: the fixed 1/sqrt(D_H), or the one sc gives it. */
static float head_scale(const HeadsScoring *sc, int h, int D_H) {
    return sc->alpha ? sc->alpha[h] : 1.0f / sqrtf((float)D_H);
}

size_t multi_head_attention_floats(const MultiHeadSpec *s, int B, int N) {
    if (s->attention == MULTI_HEAD_FUSED) return 0;
    return (size_t)B * s->H * N * N;
}

size_t multi_head_cache_floats(const MultiHeadSpec *s, int B, int N) {
    const size_t linear = (size_t)B * N * 4 * s->H * s->D_H;      /* [Q|K|V] and Y */
    if (s->attention == MULTI_HEAD_FUSED)
        return linear + (size_t)B * s->H * N                      /* lse */
               + flash_attention_scratch_floats(FLASH_BLOCK_Q, FLASH_BLOCK_K);   /* one block */
    if (s->keep_masks) return linear + (size_t)threads_slots(B) * N * N;   /* A o keep, a head per thread */
    return linear;
}

size_t multi_head_scratch_floats(const MultiHeadSpec *s, int B, int N) {
    const size_t linear = (size_t)B * N * 4 * s->H * s->D_H;      /* d[Q|K|V], dY */
    if (s->attention == MULTI_HEAD_FUSED)
        return linear + flash_attention_scratch_floats(FLASH_BLOCK_Q, FLASH_BLOCK_K);
    return linear + (size_t)threads_slots(B) * 2 * N * N;        /* dA, dE per thread: chapter 03's */
}

/* Step 1: X [R, D] -> [Q|K|V] [R, 3 H D_H], every head and position in one product. */
void multi_head_qkv_forward(float *QKV, const float *X, const MultiHeadSpec *s, const MultiHeadWeights *w, int R) {
    const int ld_qkv = 3 * s->H * s->D_H;
    /* Exercise 05.qkv_projection (3 points): [Q|K|V] = X [W_Q|W_K|W_V], one product forward, two backward. */
    /* [Q|K|V] [R, 3 H D_H] = X [R, D] @ W_QKV [D, 3 H D_H] */
    sgemm(0, 0, R, ld_qkv, s->D, 1.0f, X, s->D, w->W_QKV, ld_qkv, 0.0f, QKV, ld_qkv);
    /* End of exercise 05.qkv_projection. */
}

/* Step 1': d[Q|K|V] [R, 3 H D_H] -> dW_QKV [D, 3 H D_H] +=, dX [R, D] +=. */
void multi_head_qkv_backward(float *dX, float *dW_QKV, const float *dQKV, const float *X, const MultiHeadSpec *s,
                             const MultiHeadWeights *w, int R) {
    const int ld_qkv = 3 * s->H * s->D_H;
    /* Exercise 05.qkv_projection, continued: dW_QKV += X^T d[Q|K|V], dX += d[Q|K|V] W_QKV^T. */
    /* dW_QKV [D, 3 H D_H] += X^T [D, R] @ d[Q|K|V] [R, 3 H D_H] */
    if (dW_QKV) sgemm(1, 0, s->D, ld_qkv, R, 1.0f, X, s->D, dQKV, ld_qkv, 1.0f, dW_QKV, ld_qkv);
    /* dX [R, D] += d[Q|K|V] [R, 3 H D_H] @ W_QKV^T [3 H D_H, D] */
    if (dX) sgemm(0, 1, R, s->D, ld_qkv, 1.0f, dQKV, ld_qkv, w->W_QKV, ld_qkv, 1.0f, dX, s->D);
    /* End of exercise 05.qkv_projection. */
}

/* Step 4: Y [R, H D_H] -> O [R, D_out], the heads mixed by W_O. */
void multi_head_output_forward(float *O, const float *Y, const MultiHeadSpec *s, const MultiHeadWeights *w, int R) {
    const int HD = s->H * s->D_H;
    /* Exercise 05.output_projection (3 points): O = Y W_O + b_O forward; dY, dW_O, db_O backward. */
    /* O [R, D_out] = Y [R, H D_H] @ W_O [H D_H, D_out] + b_O */
    sgemm(0, 0, R, s->D_out, HD, 1.0f, Y, HD, w->W_O, s->D_out, 0.0f, O, s->D_out);
    if (w->b_O)
        for (int r = 0; r < R; r++)
            for (int o = 0; o < s->D_out; o++) O[(size_t)r * s->D_out + o] += w->b_O[o];
    /* End of exercise 05.output_projection. */
}

/* Step 4': dO [R, D_out] -> dY [R, H D_H] (written), dW_O [H D_H, D_out] +=, db_O [D_out] +=. */
void multi_head_output_backward(float *dY, MultiHeadWeights *dw, const float *dO, const float *Y,
                                const MultiHeadSpec *s, const MultiHeadWeights *w, int R) {
    const int HD = s->H * s->D_H;
    /* Exercise 05.output_projection, continued: dY = dO W_O^T, dW_O += Y^T dO, db_O += column sums of dO. */
    /* dY [R, H D_H] = dO [R, D_out] @ W_O^T [D_out, H D_H] */
    sgemm(0, 1, R, HD, s->D_out, 1.0f, dO, s->D_out, w->W_O, s->D_out, 0.0f, dY, HD);
    /* dW_O [H D_H, D_out] += Y^T [H D_H, R] @ dO [R, D_out];  db_O += sum over rows of dO */
    if (dw && dw->W_O) sgemm(1, 0, HD, s->D_out, R, 1.0f, Y, HD, dO, s->D_out, 1.0f, dw->W_O, s->D_out);
    if (dw && dw->b_O)
        for (int r = 0; r < R; r++)
            for (int o = 0; o < s->D_out; o++) dw->b_O[o] += dO[(size_t)r * s->D_out + o];
    /* End of exercise 05.output_projection. */
}

/* Steps 2-3 of the plain path, every sequence and head, by chapter 03:
 * QKV [B, N, 3 H D_H], keep [B, H, N, N] or NULL -> A [B, H, N, N], Y [B, N, H D_H].
 * dropped_rooms [threads_slots(B), N, N]: each thread's room for one head's A o keep
 * (when keep is given; may be NULL without). */
void multi_head_heads_forward(float *Y, float *A, const float *keep, float *dropped_rooms, const float *QKV,
                              const HeadsScoring *sc, int H, int D_H, int B, int N) {
    const int HD = H * D_H, ld_qkv = 3 * HD;
    /* a sequence's work: H heads of Q K^T and A V, 2 H N N D_H multiply-adds,
     * on its rows of [Q|K|V] and Y and its weights A (floats) */
#pragma omp parallel for schedule(static) \
    num_threads(threads_in_slots(B, 2.0 * H * N * N * D_H, 4.0 * (4.0 * N * HD + (double)H * N * N)))
    for (int b = 0; b < B; b++) {
        float *dropped = keep ? dropped_rooms + (size_t)omp_get_thread_num() * N * N : NULL;
        const float *QKV_b = QKV + (size_t)b * N * ld_qkv;
        float *Y_b = Y + (size_t)b * N * HD;
        /* as in chapter 04 (and the diagonal when sc says no_self) */
        const AttentionMask mask = {NULL, sc->causal, sc->lens ? sc->lens[b] : 0, sc->no_self};
        /* Exercise 05.heads (4 points): head h's Q_h, K_h, V_h are column blocks of [Q|K|V]; Y_h goes into Y's. */
        for (int h = 0; h < H; h++) {
            const float *Q_h = QKV_b + h * D_H;               /* [N, D_H], row stride 3 H D_H */
            const float *K_h = QKV_b + HD + h * D_H;          /* [N, D_H], row stride 3 H D_H */
            const float *V_h = QKV_b + 2 * HD + h * D_H;      /* [N, D_H], row stride 3 H D_H */
            float *A_bh = A + ((size_t)b * H + h) * N * N;    /* [N, N] */
            const float *keep_bh = keep ? keep + ((size_t)b * H + h) * N * N : NULL;
            const DotHead head = {Q_h, ld_qkv, K_h, ld_qkv, V_h, ld_qkv, N, N, D_H, D_H, head_scale(sc, h, D_H)};
            /* 2. E = Q_h K_h^T / sqrt(D_H) in A's place, masked, A = softmax(E);
             * 3. Y_h [N, D_H] = A V_h, into columns h*D_H.. of Y [N, H D_H]
             *    (dropout: E in its own room, ending as A o keep; Y_h = (A o keep) V_h) */
            dot_attention_forward(Y_b + h * D_H, HD, A_bh, keep ? dropped : A_bh, &head, &mask, keep_bh);
        }
        /* End of exercise 05.heads. */
    }
}

/* Steps 3'-2' of the plain path, every sequence and head, by chapter 03:
 * dY [B, N, H D_H], A, keep (or NULL), QKV -> dQKV [B, N, 3 H D_H] +=.
 * scratch [threads_slots(B), 2, N, N]: each thread's dA, dE */
void multi_head_heads_backward(float *dQKV, float *scratch_rooms, const float *dY, const float *A, const float *keep,
                               const float *QKV, const HeadsScoring *sc, int H, int D_H, int B, int N) {
    const int HD = H * D_H, ld_qkv = 3 * HD;
    /* a sequence's work: H heads of dA, dV, dQ, dK, 4 H N N D_H multiply-adds,
     * on its rows of [Q|K|V], d[Q|K|V] and dY and its weights A (floats) */
#pragma omp parallel for schedule(static) \
    num_threads(threads_in_slots(B, 4.0 * H * N * N * D_H, 4.0 * (7.0 * N * HD + (double)H * N * N)))
    for (int b = 0; b < B; b++) {
        float *scratch = scratch_rooms + (size_t)omp_get_thread_num() * 2 * N * N;
        const float *QKV_b = QKV + (size_t)b * N * ld_qkv;
        float *dQKV_b = dQKV + (size_t)b * N * ld_qkv;
        const float *dY_b = dY + (size_t)b * N * HD;
        /* Exercise 05.heads, continued: the same blocks backward, dY_h to dQ_h, dK_h, dV_h inside d[Q|K|V]. */
        for (int h = 0; h < H; h++) {
            const float *Q_h = QKV_b + h * D_H, *K_h = QKV_b + HD + h * D_H;
            const float *V_h = QKV_b + 2 * HD + h * D_H;
            float *dQ_h = dQKV_b + h * D_H, *dK_h = dQKV_b + HD + h * D_H;
            float *dV_h = dQKV_b + 2 * HD + h * D_H;
            const float *dY_h = dY_b + h * D_H;               /* [N, D_H], row stride H D_H */
            const float *A_bh = A + ((size_t)b * H + h) * N * N;
            const float *keep_bh = keep ? keep + ((size_t)b * H + h) * N * N : NULL;
            const DotHead head = {Q_h, ld_qkv, K_h, ld_qkv, V_h, ld_qkv, N, N, D_H, D_H, head_scale(sc, h, D_H)};
            const DotHeadGrads grads = {dQ_h, ld_qkv, dK_h, ld_qkv, dV_h, ld_qkv};
            /* 3'. dA = dY_h V_h^T, dV_h += A^T dY_h;  2'. dE = softmax'(dA),
             *     dQ_h += dE K_h / sqrt(D_H), dK_h += dE^T Q_h / sqrt(D_H)
             *     (dropout: A o keep in place of A, and dA times keep) */
            dot_attention_backward(&grads, scratch, dY_h, HD, A_bh, keep_bh, &head);
        }
        /* End of exercise 05.heads. */
    }
}

/* Steps 2-3 on the cache: its [Q|K|V] -> its Y (and the path's own part
 * after Y), A (plain path) */
void multi_head_attend_forward(float *A, const float *keep, float *cache, const MultiHeadSpec *s, int causal,
                               const int *lens, int B, int N) {
    const int H = s->H, D_H = s->D_H, HD = H * D_H, R = B * N;
    const float *QKV = cache;
    float *Y = cache + (size_t)R * 3 * HD;
    assert(keep == NULL || (s->attention == MULTI_HEAD_PLAIN && s->keep_masks));
    if (s->attention == MULTI_HEAD_FUSED) {
        /* 2.-3. fused: Y = softmax(Q K^T / sqrt(D_H)) V block by block, no A.
         * The log-sum-exp per row goes to the cache (backward recomputes the
         * blocks from it); the scratch block lives behind it. */
        float *lse = Y + (size_t)R * HD, *block = lse + (size_t)B * H * N;
        flash_attention_forward_heads(Y, lse, QKV, B, N, H, D_H, causal, lens,
                                      FLASH_BLOCK_Q, FLASH_BLOCK_K, block);
    } else {
        /* 2.-3. plain: chapter 03 per (sequence, head), keeping A for backward;
         * with dropout, each head's A o keep is made in the room after Y */
        const HeadsScoring sc = {NULL, causal, 0, lens};
        multi_head_heads_forward(Y, A, keep, Y + (size_t)R * HD, QKV, &sc, H, D_H, B, N);
    }
}

/* Steps 3'-2': the scratch's dY -> its d[Q|K|V] (written) */
void multi_head_attend_backward(float *scratch, const float *A, const float *keep, const float *cache,
                                const MultiHeadSpec *s, int causal, const int *lens, int B, int N) {
    const int H = s->H, D_H = s->D_H, HD = H * D_H, ld_qkv = 3 * HD, R = B * N;
    assert(keep == NULL || (s->attention == MULTI_HEAD_PLAIN && s->keep_masks));
    const float *QKV = cache, *Y = cache + (size_t)R * ld_qkv;
    float *dQKV = scratch;                            /* [R, 3 H D_H] */
    float *dY = dQKV + (size_t)R * ld_qkv;            /* [R, H D_H] */
    /* both paths accumulate into d[Q|K|V], which starts at 0 */
    memset(dQKV, 0, sizeof(float) * (size_t)R * ld_qkv);
    if (s->attention == MULTI_HEAD_FUSED) {
        /* fused: recompute each block of weights from Q, K and the saved
         * log-sum-exp, skipping the blocks the masks block */
        const float *lse = Y + (size_t)R * HD;
        float *block = dY + (size_t)R * HD;
        flash_attention_backward_heads(dQKV, dY, QKV, Y, lse, B, N, H, D_H, causal, lens,
                                       FLASH_BLOCK_Q, FLASH_BLOCK_K, block);
    } else {
        /* plain: chapter 03 on the saved N x N weights A */
        const HeadsScoring sc = {NULL, causal, 0, lens};
        multi_head_heads_backward(dQKV, dY + (size_t)R * HD, dY, A, keep, QKV, &sc, H, D_H, B, N);
    }
}

/* X [B, N, D], keep [B, H, N, N] or NULL -> O [B, N, D_out], A [B, H, N, N],
 * cache: [Q|K|V] [B, N, 3 H D_H] | Y [B, N, H D_H] (| plain with keep_masks: [N, N]) */
void multi_head_forward(float *O, float *A, const float *keep, float *cache, const float *X,
                        const MultiHeadSpec *s, const MultiHeadWeights *w,
                        int causal, const int *lens, int B, int N) {
    const int R = B * N;
    float *QKV = cache, *Y = cache + (size_t)R * 3 * s->H * s->D_H;
    /* 1. [Q|K|V] [R, 3 H D_H] = X [R, D] @ W_QKV [D, 3 H D_H]: every head, every position */
    multi_head_qkv_forward(QKV, X, s, w, R);
    /* 2.-3. Y = softmax(Q K^T / sqrt(D_H)) V, per sequence and head */
    multi_head_attend_forward(A, keep, cache, s, causal, lens, B, N);
    /* 4. O [R, D_out] = Y [R, H D_H] @ W_O [H D_H, D_out] + b_O */
    multi_head_output_forward(O, Y, s, w, R);
}

/* dO [B, N, D_out] -> dX [B, N, D] +=, dW_QKV [D, 3 H D_H] +=, dW_O [H D_H, D_out] +=, db_O += */
void multi_head_backward(float *dX, MultiHeadWeights *dw, float *scratch, const float *dO,
                         const float *A, const float *keep, const float *cache, const float *X,
                         const MultiHeadSpec *s, const MultiHeadWeights *w,
                         int causal, const int *lens, int B, int N) {
    const int R = B * N, ld_qkv = 3 * s->H * s->D_H;
    const float *Y = cache + (size_t)R * ld_qkv;
    float *dQKV = scratch;                            /* [R, 3 H D_H] */
    float *dY = dQKV + (size_t)R * ld_qkv;            /* [R, H D_H] */
    /* 4'. dY [R, H D_H] = dO [R, D_out] @ W_O^T [D_out, H D_H],
     *     dW_O [H D_H, D_out] += Y^T [H D_H, R] @ dO [R, D_out],  db_O += sum over rows of dO */
    multi_head_output_backward(dY, dw, dO, Y, s, w, R);
    /* 3'.-2'. d[Q|K|V] from dY, through the weights */
    multi_head_attend_backward(scratch, A, keep, cache, s, causal, lens, B, N);
    /* 1'. dW_QKV [D, 3 H D_H] += X^T [D, R] @ d[Q|K|V] [R, 3 H D_H],
     *     dX [R, D] += d[Q|K|V] [R, 3 H D_H] @ W_QKV^T [3 H D_H, D] */
    multi_head_qkv_backward(dX, dw ? dw->W_QKV : NULL, dQKV, X, s, w, R);
}
