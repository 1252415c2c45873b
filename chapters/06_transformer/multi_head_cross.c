/* multi_head_cross.c - chapter 06: multi-head cross-attention (see
 * multi_head_cross.h): chapter 05's four products with the queries from the
 * decoder and the keys and values from the encoder's memory.
 *
 *   forward                                   backward (reverse order)
 *   1a. Q = X W_Q                             4'. dY = dO W_O^T, dW_O += Y^T dO, db_O
 *   1b. [K|V] = M W_KV                        3'-2'. chapter 03 per (b, h): dQ_h, dK_h, dV_h
 *   2-3. chapter 03 per (b, h)                1b'. dW_KV += M^T d[K|V], dM += d[K|V] W_KV^T
 *   4.  O = Y W_O + b_O                       1a'. dW_Q += X^T dQ,      dX += dQ W_Q^T
 * With keep masks (dropout on the weights), chapter 03 makes Y_h of A o keep
 * and scales dA by keep, as in chapter 05. As there, the threads share out
 * the sequences in 2-3 and 3'-2', each with its own [N, N_M] rooms. */
#include "06_transformer/multi_head_cross.h"

#include <assert.h>
#include <math.h>
#include "util/openmp.h"
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "kernels/matmul.h"
#include "nn/layers.h"
#include "nn/params.h"

size_t multi_head_cross_param_count(const MultiHeadSpec *s) {
    const size_t HD = (size_t)s->H * s->D_H;
    return (size_t)s->D * 3 * HD + HD * s->D_out + (size_t)s->D_out;
}

MultiHeadCrossWeights multi_head_cross_weights_view(const MultiHeadSpec *s, float *base) {
    const size_t HD = (size_t)s->H * s->D_H;
    MultiHeadCrossWeights w;
    w.W_Q = base;
    w.W_KV = w.W_Q + (size_t)s->D * HD;
    w.W_O = w.W_KV + (size_t)s->D * 2 * HD;
    w.b_O = w.W_O + HD * s->D_out;
    return w;
}

void multi_head_cross_init(const MultiHeadSpec *s, const MultiHeadCrossWeights *w, Rng *rng) {
    const int HD = s->H * s->D_H;
    const float limit = sqrtf(6.0f / (float)(s->D + HD));   /* Xavier for each of W_Q, W_K, W_V */
    init_uniform(w->W_Q, (size_t)s->D * HD, limit, rng);
    init_uniform(w->W_KV, (size_t)s->D * 2 * HD, limit, rng);
    init_xavier(w->W_O, HD, s->D_out, rng);
    init_constant(w->b_O, (size_t)s->D_out, 0.0f);
}

size_t multi_head_cross_attention_floats(const MultiHeadSpec *s, int B, int N, int N_M) {
    return (size_t)B * s->H * N * N_M;
}

/* Q, [K|V] and Y: the part of the cache that backward's d(...) mirror */
static size_t linear_floats(const MultiHeadSpec *s, int B, int N, int N_M) {
    const size_t HD = (size_t)s->H * s->D_H;
    return (size_t)B * N * HD + (size_t)B * N_M * 2 * HD + (size_t)B * N * HD;
}

size_t multi_head_cross_cache_floats(const MultiHeadSpec *s, int B, int N, int N_M) {
    /* | one head's A o keep per thread */
    return linear_floats(s, B, N, N_M) + (s->keep_masks ? (size_t)threads_slots(B) * N * N_M : 0);
}

size_t multi_head_cross_scratch_floats(const MultiHeadSpec *s, int B, int N, int N_M) {
    /* dQ, d[K|V], dY | dA, dE per thread */
    return linear_floats(s, B, N, N_M) + (size_t)threads_slots(B) * 2 * N * N_M;
}

/* Steps 2-3 for n_rows rows of N_Q queries each: row r's queries
 * Q [N_Q, H D_H] (rows r N_Q ..) attend over KV_rows[r] [N_M, 2 H D_H], its
 * first lens[r] positions real. -> Y [n_rows N_Q, H D_H], A [n_rows, H, N_Q, N_M].
 * keep [n_rows, H, N_Q, N_M] or NULL (dropout); dropped_rooms
 * [threads_slots(n_rows), N_Q, N_M]: each thread's room for one head's A o keep
 * when keep is given (else NULL). */
static void attend_rows(float *Y, float *A, const float *keep, float *dropped_rooms, const float *Q,
                        const float *const *KV_rows, const int *lens, int H, int D_H, int n_rows, int N_Q,
                        int N_M) {
    const int HD = H * D_H;
    const float scale = 1.0f / sqrtf((float)D_H);
    /* a row's work: H heads of Q K^T and A V, 2 H N_Q N_M D_H multiply-adds,
     * on its Q, [K|V], Y and A (floats) */
#pragma omp parallel for schedule(static) num_threads(threads_in_slots( \
    n_rows, 2.0 * H * N_Q * N_M * D_H, 4.0 * ((2.0 * N_Q + 2.0 * N_M) * HD + (double)H * N_Q * N_M)))
    for (int r = 0; r < n_rows; r++) {
        float *dropped = dropped_rooms ? dropped_rooms + (size_t)omp_get_thread_num() * N_Q * N_M : NULL;
        const AttentionMask mask = {NULL, 0, lens ? lens[r] : 0, 0};
        const float *Q_r = Q + (size_t)r * N_Q * HD;
        float *Y_r = Y + (size_t)r * N_Q * HD;
        for (int h = 0; h < H; h++) {
            const float *K_h = KV_rows[r] + h * D_H;          /* [N_M, D_H], row stride 2 H D_H */
            const float *V_h = KV_rows[r] + HD + h * D_H;     /* [N_M, D_H], row stride 2 H D_H */
            float *A_rh = A + ((size_t)r * H + h) * N_Q * N_M;   /* [N_Q, N_M] */
            const float *keep_rh = keep ? keep + ((size_t)r * H + h) * N_Q * N_M : NULL;
            const DotHead head = {Q_r + h * D_H, HD, K_h, 2 * HD, V_h, 2 * HD, N_Q, N_M, D_H, D_H, scale};
            /* scores in A's place (with dropout: in their own room, ending as A o keep) */
            dot_attention_forward(Y_r + h * D_H, HD, A_rh, keep ? dropped : A_rh, &head, &mask, keep_rh);
        }
    }
}

void multi_head_cross_forward(float *O, float *A, const float *keep, float *cache, const float *X,
                              const float *M, const MultiHeadSpec *s, const MultiHeadCrossWeights *w,
                              const int *mem_lens, int B, int N, int N_M) {
    const int HD = s->H * s->D_H, R = B * N, R_M = B * N_M;
    float *Q = cache, *KV = Q + (size_t)R * HD, *Y = KV + (size_t)R_M * 2 * HD;
    float *dropped = Y + (size_t)R * HD;   /* [N, N_M], with s->keep_masks */
    assert(keep == NULL || s->keep_masks);
    /* 1a. Q [R, H D_H] = X [R, D] W_Q;  1b. [K|V] [R_M, 2 H D_H] = M [R_M, D] W_KV */
    sgemm(0, 0, R, HD, s->D, 1.0f, X, s->D, w->W_Q, HD, 0.0f, Q, HD);
    multi_head_cross_memory(KV, M, s, w, R_M);
    /* 2.-3. chapter 03 per (sequence, head): sequence b's memory is rows b N_M .. of [K|V] */
    const float *KV_rows[B > 0 ? B : 1];
    for (int b = 0; b < B; b++) KV_rows[b] = KV + (size_t)b * N_M * 2 * HD;
    attend_rows(Y, A, keep, dropped, Q, KV_rows, mem_lens, s->H, s->D_H, B, N, N_M);
    /* 4. O [R, D_out] = Y [R, H D_H] W_O + b_O */
    linear_forward(O, Y, w->W_O, w->b_O, R, HD, s->D_out);
}

void multi_head_cross_backward(float *dX, float *dM, MultiHeadCrossWeights *dw, float *scratch,
                               const float *dO, const float *A, const float *keep, const float *cache,
                               const float *X,
                               const float *M, const MultiHeadSpec *s, const MultiHeadCrossWeights *w,
                               const int *mem_lens, int B, int N, int N_M) {
    (void)mem_lens;   /* a masked pair has A = 0: no gradient flows through it */
    const int H = s->H, D_H = s->D_H, HD = H * D_H, R = B * N, R_M = B * N_M;
    const float scale = 1.0f / sqrtf((float)D_H);
    const float *Q = cache, *KV = Q + (size_t)R * HD, *Y = KV + (size_t)R_M * 2 * HD;
    float *dQ = scratch, *dKV = dQ + (size_t)R * HD, *dY = dKV + (size_t)R_M * 2 * HD;
    float *att_rooms = dY + (size_t)R * HD;   /* dA, dE [N, N_M] per thread */
    MultiHeadCrossWeights none = {NULL, NULL, NULL, NULL};
    if (dw == NULL) dw = &none;
    /* 4'. dY = dO W_O^T;  dW_O += Y^T dO;  db_O += column sums of dO */
    memset(dY, 0, sizeof(float) * (size_t)R * HD);
    linear_backward(dY, dw->W_O, dw->b_O, dO, Y, w->W_O, R, HD, s->D_out);
    /* 3'.-2'. chapter 03 per (sequence, head) */
    memset(dQ, 0, sizeof(float) * (size_t)R * HD);
    memset(dKV, 0, sizeof(float) * (size_t)R_M * 2 * HD);
    /* a sequence's work: H heads of dA, dV, dQ, dK, 4 H N N_M D_H multiply-adds,
     * on its Q, dQ, dY, [K|V], d[K|V] and A (floats) */
#pragma omp parallel for schedule(static) num_threads(threads_in_slots( \
    B, 4.0 * H * N * N_M * D_H, 4.0 * ((3.0 * N + 4.0 * N_M) * HD + (double)H * N * N_M)))
    for (int b = 0; b < B; b++) {
        float *att_scratch = att_rooms + (size_t)omp_get_thread_num() * 2 * N * N_M;
        const float *Q_b = Q + (size_t)b * N * HD, *KV_b = KV + (size_t)b * N_M * 2 * HD;
        float *dQ_b = dQ + (size_t)b * N * HD, *dKV_b = dKV + (size_t)b * N_M * 2 * HD;
        const float *dY_b = dY + (size_t)b * N * HD;
        for (int h = 0; h < H; h++) {
            const float *A_bh = A + ((size_t)b * H + h) * N * N_M;
            const float *keep_bh = keep ? keep + ((size_t)b * H + h) * N * N_M : NULL;
            const DotHead head = {Q_b + h * D_H, HD, KV_b + h * D_H, 2 * HD, KV_b + HD + h * D_H, 2 * HD,
                                  N, N_M, D_H, D_H, scale};
            const DotHeadGrads grads = {dQ_b + h * D_H, HD, dKV_b + h * D_H, 2 * HD, dKV_b + HD + h * D_H, 2 * HD};
            dot_attention_backward(&grads, att_scratch, dY_b + h * D_H, HD, A_bh, keep_bh, &head);
        }
    }
    /* 1b'. dW_KV += M^T d[K|V];  dM += d[K|V] W_KV^T */
    linear_backward(dM, dw->W_KV, NULL, dKV, M, w->W_KV, R_M, s->D, 2 * HD);
    /* 1a'. dW_Q += X^T dQ;  dX += dQ W_Q^T */
    linear_backward(dX, dw->W_Q, NULL, dQ, X, w->W_Q, R, s->D, HD);
}

void multi_head_cross_memory(float *KV, const float *M, const MultiHeadSpec *s,
                             const MultiHeadCrossWeights *w, int R_M) {
    const int HD = s->H * s->D_H;
    sgemm(0, 0, R_M, 2 * HD, s->D, 1.0f, M, s->D, w->W_KV, 2 * HD, 0.0f, KV, 2 * HD);
}

void multi_head_cross_attend(float *O, float *A, float *work, const float *X, const float *const *KV_rows,
                             const int *mem_lens, const MultiHeadSpec *s, const MultiHeadCrossWeights *w,
                             int n, int N_M) {
    const int HD = s->H * s->D_H;
    float *Q = work, *Y = Q + (size_t)n * HD;
    if (A == NULL) A = Y + (size_t)n * HD;   /* the weights still need a place */
    /* 1a. Q [n, H D_H] = X [n, D] W_Q;  2.-3. one query per row;  4. O = Y W_O + b_O */
    sgemm(0, 0, n, HD, s->D, 1.0f, X, s->D, w->W_Q, HD, 0.0f, Q, HD);
    attend_rows(Y, A, NULL, NULL, Q, KV_rows, mem_lens, s->H, s->D_H, n, 1, N_M);   /* no dropout */
    linear_forward(O, Y, w->W_O, w->b_O, n, HD, s->D_out);
}
