/* locality_attention.c - chapter 07: locality self-attention, chapter 05's
 * four steps with each head's learned scale and the diagonal blocked (see
 * locality_attention.h). */
#include "07_vision_transformer/locality_attention.h"

#include <math.h>
#include <string.h>

#include "nn/params.h"
#include "util/error.h"

int locality_attention_check(const void *options, const MultiHeadSpec *s, int causal, int cross) {
    (void)options;
    if (s->attention != MULTI_HEAD_PLAIN)
        return fail("locality self-attention needs the plain attention: the fused kernel has neither its "
                    "diagonal mask nor its learned scales (use attention=plain)");
    if (causal || cross)
        return fail("locality self-attention is an encoder's: with a causal mask the first position would "
                    "have no key left (use it with causal = 0 and no cross-attention)");
    return multi_head_spec_check(s);
}

size_t locality_attention_extra_params(const void *options, const MultiHeadSpec *s) {
    (void)options;
    return (size_t)s->H;
}

void locality_attention_init(const void *options, float *t, const MultiHeadSpec *s) {
    (void)options;
    init_constant(t, (size_t)s->H, -0.5f * logf((float)s->D_H));
}

size_t locality_attention_cache_floats(const void *options, const MultiHeadSpec *s, int B, int N) {
    (void)options;
    return multi_head_cache_floats(s, B, N) + (size_t)s->H;   /* chapter 05's | alpha [H] */
}

size_t locality_attention_scratch_floats(const void *options, const MultiHeadSpec *s, int B, int N) {
    (void)options;
    return multi_head_scratch_floats(s, B, N);
}

/* The cache's alpha [H], after chapter 05's part */
static float *cache_alpha(const float *cache, const MultiHeadSpec *s, int B, int N) {
    return (float *)cache + multi_head_cache_floats(s, B, N);
}

/* X [B, N, D] -> O [B, N, D_out]; cache [Q|K|V] | Y | dropped room | alpha */
void locality_attention_forward(const void *options, float *O, float *A, const float *keep, float *cache,
                                const float *X, const MultiHeadSpec *s, const MultiHeadWeights *w, const float *t,
                                int causal, const int *lens, int B, int N) {
    (void)options;
    const int R = B * N, HD = s->H * s->D_H;
    float *QKV = cache, *Y = cache + (size_t)R * 3 * HD, *alpha = cache_alpha(cache, s, B, N);
    for (int h = 0; h < s->H; h++) alpha[h] = expf(t[h]);
    const HeadsScoring sc = {alpha, causal, 1, lens};                  /* each head's scale; no diagonal */
    multi_head_qkv_forward(QKV, X, s, w, R);                           /* 1. [Q|K|V] = X W_QKV */
    multi_head_heads_forward(Y, A, keep, Y + (size_t)R * HD, QKV, &sc, s->H, s->D_H, B, N);   /* 2.-3. Y */
    multi_head_output_forward(O, Y, s, w, R);                          /* 4. O = Y W_O + b_O */
}

/* dt [H] += sum(Q_h o dQ_h) over every row, from QKV and the finished
 * dQKV [R, 3 H D_H]. In double, in one fixed order: the same bits at any
 * thread count. */
static void scale_backward(float *dt, const float *QKV, const float *dQKV, int H, int D_H, int R) {
    const int ld_qkv = 3 * H * D_H;
    for (int h = 0; h < H; h++) {
        double sum = 0.0;
        for (int r = 0; r < R; r++) {
            const float *q = QKV + (size_t)r * ld_qkv + h * D_H, *dq = dQKV + (size_t)r * ld_qkv + h * D_H;
            for (int d = 0; d < D_H; d++) sum += (double)q[d] * dq[d];
        }
        dt[h] += (float)sum;
    }
}

/* dO [B, N, D_out] -> dX [B, N, D] +=, dw +=, dt += */
void locality_attention_backward(const void *options, float *dX, MultiHeadWeights *dw, float *dt, float *scratch,
                                 const float *dO, const float *A, const float *keep, const float *cache,
                                 const float *X, const MultiHeadSpec *s, const MultiHeadWeights *w, const float *t,
                                 int causal, const int *lens, int B, int N) {
    (void)options;
    (void)t;   /* forward left exp(t) in the cache */
    const int R = B * N, HD = s->H * s->D_H, ld_qkv = 3 * HD;
    const float *QKV = cache, *Y = cache + (size_t)R * ld_qkv;
    float *dQKV = scratch, *dY = scratch + (size_t)R * ld_qkv;
    const HeadsScoring sc = {cache_alpha(cache, s, B, N), causal, 1, lens};
    multi_head_output_backward(dY, dw, dO, Y, s, w, R);                /* 4'. dY, dW_O, db_O */
    memset(dQKV, 0, sizeof(float) * (size_t)R * ld_qkv);
    multi_head_heads_backward(dQKV, dY + (size_t)R * HD, dY, A, keep, QKV, &sc, s->H, s->D_H, B, N);  /* 3'.-2'. */
    if (dt) scale_backward(dt, QKV, dQKV, s->H, s->D_H, R);            /*    dt_h = sum(Q_h o dQ_h) */
    multi_head_qkv_backward(dX, dw ? dw->W_QKV : NULL, dQKV, X, s, w, R);   /* 1'. dW_QKV, dX */
}

const BlockSelfAttention locality_attention = {
    "locality self-attention",
    NULL,   /* no options */
    locality_attention_check,
    locality_attention_extra_params,
    locality_attention_init,
    locality_attention_cache_floats,
    locality_attention_scratch_floats,
    locality_attention_forward,
    locality_attention_backward,
};
