/* linformer.c - chapter 06, part 5: Linformer's attention, chapter 05's
 * steps 1 and 4 around chapter 03's heads over k projected keys (see
 * linformer.h). */
#include "06_transformer/linformer.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "util/error.h"
#include "util/openmp.h"

int linformer_check(const Linformer *l) {
    if (l->N < 1 || l->k < 1 || l->k > l->N)
        return fail("linformer: k = %d for sequences of N = %d: expected 1 <= k <= N", l->k, l->N);
    return 0;
}

int linformer_check_length(const Linformer *l, int N) {
    if (N > l->N)
        return fail("linformer: a sequence of %d positions is longer than the %d its projections E, F were made "
                    "for (a Linformer model reads one length)", N, l->N);
    return 0;
}

/* Kt [k, width] = E[:, :N_x] [k, N_x] K [N_x, width] */
void linformer_project_forward(float *Kt, int ldt, const float *E, const float *K, int ld, int width, int N_x,
                               const Linformer *l) {
    sgemm(0, 0, l->k, width, N_x, 1.0f, E, l->N, K, ld, 0.0f, Kt, ldt);
}

/* dK [N_x, width] += E[:, :N_x]^T dKt;  dE[:, :N_x] [k, N_x] += dKt K^T */
void linformer_project_backward(float *dK, int ld, float *dE, const float *dKt, int ldt, const float *K,
                                const float *E, int width, int N_x, const Linformer *l) {
    if (dK) sgemm(1, 0, N_x, width, l->k, 1.0f, E, l->N, dKt, ldt, 1.0f, dK, ld);
    if (dE) sgemm(0, 1, l->k, N_x, width, 1.0f, dKt, ldt, K, ld, 1.0f, dE, l->N);
}

/* ------------------------------------------------- the block's self-attention */

static int seq_len(const int *lens, int b, int N) { return lens && lens[b] > 0 ? lens[b] : N; }

static int hook_check(const void *options, const MultiHeadSpec *s, int causal, int cross) {
    const Linformer *l = options;
    if (cross) return fail("linformer is a self-attention: a decoder block's cross-attention is chapter 05's");
    if (causal)
        return fail("linformer: each projected key mixes every position, the later ones too, so it cannot be "
                    "causal (an encoder's attention only)");
    if (s->keep_masks) return fail("linformer: no dropout on its attention weights");
    if (linformer_check(l) != 0) return -1;
    return multi_head_spec_check(s);
}

static size_t hook_extra_params(const void *options, const MultiHeadSpec *s) {
    (void)s;
    const Linformer *l = options;
    return 2 * (size_t)l->k * l->N;   /* E | F */
}

/* E = F = mean pooling: row r averages positions floor(r N / k) .. floor((r + 1) N / k) - 1 */
static void hook_init(const void *options, float *extra, const MultiHeadSpec *s) {
    (void)s;
    const Linformer *l = options;
    const size_t kN = (size_t)l->k * l->N;
    memset(extra, 0, sizeof(float) * 2 * kN);
    for (int r = 0; r < l->k; r++) {
        const int lo = (int)((long)r * l->N / l->k), hi = (int)((long)(r + 1) * l->N / l->k);
        for (int j = lo; j < hi; j++) extra[(size_t)r * l->N + j] = extra[kN + (size_t)r * l->N + j] = 1.0f / (hi - lo);
    }
}

/* [Q|K|V] [R, 3 HD] | Y [R, HD] | [K~|V~] [B, k, 2 HD] | A [B, H, N, k] */
static size_t hook_cache_floats(const void *options, const MultiHeadSpec *s, int B, int N) {
    const Linformer *l = options;
    const size_t HD = (size_t)s->H * s->D_H;
    return (size_t)B * N * 4 * HD + (size_t)B * l->k * 2 * HD + (size_t)B * s->H * N * l->k;
}

/* d[Q|K|V] [R, 3 HD] | dY [R, HD] | d[K~|V~] [B, k, 2 HD] | dA, dE [N, k] per thread */
static size_t hook_scratch_floats(const void *options, const MultiHeadSpec *s, int B, int N) {
    const Linformer *l = options;
    const size_t HD = (size_t)s->H * s->D_H;
    return (size_t)B * N * 4 * HD + (size_t)B * l->k * 2 * HD + (size_t)threads_slots(B) * 2 * N * l->k;
}

/* Sequence b's head h: its queries against the k projected keys. */
static DotHead head_of(const float *QKV_b, const float *KVt_b, int h, int N, int k, int H, int D_H) {
    const int HD = H * D_H;
    return (DotHead){QKV_b + h * D_H, 3 * HD, KVt_b + h * D_H, 2 * HD, KVt_b + HD + h * D_H, 2 * HD,
                     N, k, D_H, D_H, 1.0f / sqrtf((float)D_H)};
}

/* X [B, N, D] -> O [B, N, D]; the block's A is not formed */
static void hook_forward(const void *options, float *O, float *A, const float *keep, float *cache, const float *X,
                         const MultiHeadSpec *s, const MultiHeadWeights *w, const float *extra, int causal,
                         const int *lens, int B, int N) {
    (void)A;
    (void)keep;
    (void)causal;
    const Linformer *l = options;
    const int R = B * N, H = s->H, D_H = s->D_H, HD = H * D_H, k = l->k;
    const float *E = extra, *F = extra + (size_t)k * l->N;
    float *QKV = cache, *Y = QKV + (size_t)R * 3 * HD, *KVt = Y + (size_t)R * HD;
    float *At = KVt + (size_t)B * k * 2 * HD;
    assert(N <= l->N);   /* linformer_check_length */
    multi_head_qkv_forward(QKV, X, s, w, R);                                       /* 1. [Q|K|V] = X W_QKV */
    for (int b = 0; b < B; b++) {                                                  /* 1e. K~ = E K, V~ = F V */
        const float *QKV_b = QKV + (size_t)b * N * 3 * HD;
        float *KVt_b = KVt + (size_t)b * k * 2 * HD;
        const int n = seq_len(lens, b, N);   /* padding positions are left out of the mixtures */
        linformer_project_forward(KVt_b, 2 * HD, E, QKV_b + HD, 3 * HD, HD, n, l);
        linformer_project_forward(KVt_b + HD, 2 * HD, F, QKV_b + 2 * HD, 3 * HD, HD, n, l);
    }
    /* 2.-3. a sequence's work: H heads of Q K~^T and A V~, 2 H N k D_H multiply-adds */
#pragma omp parallel for schedule(static) num_threads(threads_in_slots( \
    B, 2.0 * H * N * k * D_H, 4.0 * ((4.0 * N + 2.0 * k) * HD + (double)H * N * k)))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const DotHead head = head_of(QKV + (size_t)b * N * 3 * HD, KVt + (size_t)b * k * 2 * HD, h, N, k, H, D_H);
            float *A_bh = At + ((size_t)b * H + h) * N * k;
            dot_attention_forward(Y + (size_t)b * N * HD + h * D_H, HD, A_bh, A_bh, &head, NULL, NULL);
        }
    }
    multi_head_output_forward(O, Y, s, w, R);                                      /* 4. O = Y W_O + b_O */
}

/* dO [B, N, D] -> dX +=, dw +=, dE, dF += */
static void hook_backward(const void *options, float *dX, MultiHeadWeights *dw, float *dextra, float *scratch,
                          const float *dO, const float *A, const float *keep, const float *cache, const float *X,
                          const MultiHeadSpec *s, const MultiHeadWeights *w, const float *extra, int causal,
                          const int *lens, int B, int N) {
    (void)A;
    (void)keep;
    (void)causal;
    const Linformer *l = options;
    const int R = B * N, H = s->H, D_H = s->D_H, HD = H * D_H, k = l->k;
    const size_t kN = (size_t)k * l->N;
    const float *E = extra, *F = extra + kN;
    const float *QKV = cache, *Y = QKV + (size_t)R * 3 * HD, *KVt = Y + (size_t)R * HD;
    const float *At = KVt + (size_t)B * k * 2 * HD;
    float *dQKV = scratch, *dY = dQKV + (size_t)R * 3 * HD, *dKVt = dY + (size_t)R * HD;
    float *att_rooms = dKVt + (size_t)B * k * 2 * HD;
    multi_head_output_backward(dY, dw, dO, Y, s, w, R);                            /* 4'. dY, dW_O, db_O */
    memset(dQKV, 0, sizeof(float) * (size_t)R * 3 * HD);
    memset(dKVt, 0, sizeof(float) * (size_t)B * k * 2 * HD);
    /* 3'.-2'. a sequence's work: 4 H N k D_H multiply-adds */
#pragma omp parallel for schedule(static) num_threads(threads_in_slots( \
    B, 4.0 * H * N * k * D_H, 4.0 * ((5.0 * N + 4.0 * k) * HD + (double)H * N * k)))
    for (int b = 0; b < B; b++) {
        float *att_scratch = att_rooms + (size_t)omp_get_thread_num() * 2 * N * k;
        float *dQKV_b = dQKV + (size_t)b * N * 3 * HD, *dKVt_b = dKVt + (size_t)b * k * 2 * HD;
        for (int h = 0; h < H; h++) {
            const DotHead head = head_of(QKV + (size_t)b * N * 3 * HD, KVt + (size_t)b * k * 2 * HD, h, N, k, H, D_H);
            const DotHeadGrads grads = {dQKV_b + h * D_H, 3 * HD, dKVt_b + h * D_H, 2 * HD, dKVt_b + HD + h * D_H, 2 * HD};
            dot_attention_backward(&grads, att_scratch, dY + (size_t)b * N * HD + h * D_H, HD,
                                   At + ((size_t)b * H + h) * N * k, NULL, &head);
        }
    }
    for (int b = 0; b < B; b++) {                                                  /* 1e'. dK, dV, dE, dF */
        const float *QKV_b = QKV + (size_t)b * N * 3 * HD;
        float *dQKV_b = dQKV + (size_t)b * N * 3 * HD;
        const float *dKVt_b = dKVt + (size_t)b * k * 2 * HD;
        const int n = seq_len(lens, b, N);
        linformer_project_backward(dQKV_b + HD, 3 * HD, dextra, dKVt_b, 2 * HD, QKV_b + HD, E, HD, n, l);
        linformer_project_backward(dQKV_b + 2 * HD, 3 * HD, dextra ? dextra + kN : NULL, dKVt_b + HD, 2 * HD,
                                   QKV_b + 2 * HD, F, HD, n, l);
    }
    multi_head_qkv_backward(dX, dw ? dw->W_QKV : NULL, dQKV, X, s, w, R);          /* 1'. dW_QKV, dX */
}

BlockSelfAttention linformer_hook(const Linformer *l) {
    return (BlockSelfAttention){"Linformer self-attention", l, hook_check, hook_extra_params, hook_init,
                                hook_cache_floats, hook_scratch_floats, hook_forward, hook_backward};
}
