/* attention.c - chapter 03: the general attention layer (see attention.h).
 *
 * The matrix form, step by step, exactly as in the lecture:
 *   1. E = score(Q, K)          score_forward, or one sgemm for the dot scores
 *   2. masked E_ij = -INFINITY  apply_mask
 *   3. A = softmax(E, dim=1)    softmax_forward    (layers.h)
 *   4. Y = A V                  sgemm
 * and backward runs the same steps in reverse:
 *   dA = dY V^T,  dV += A^T dY,  dE = softmax'(dA),  dQ, dK (, dW) from dE.
 * Steps 2-4 are the same for every score function (mask_softmax_values and
 * its backward, below). For the dot and scaled dot scores the whole layer is
 * dot_attention_forward/backward, which work on strided blocks so that
 * chapter 05's heads can use them in place, and can drop attention weights
 * (dropout, chapter 06): step 4 then reads A o keep instead of A. Every
 * matrix product goes through matmul.h (sgemm and its wrappers). */
#include "03_dot_product_attention/attention.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "util/error.h"
#include "nn/layers.h"
#include "kernels/matmul.h"
#include "nn/params.h"

/* ------------------------------------------------------------ score functions */

static const char *const score_names[SCORE_N_TYPES] = {"dot", "scaled_dot", "multiplicative",
                                                       "additive"};

const char *score_name(ScoreType type) {
    return (type >= 0 && type < SCORE_N_TYPES) ? score_names[type] : "?";
}

int score_from_name(const char *name, ScoreType *type) {
    for (int t = 0; t < SCORE_N_TYPES; t++)
        if (strcmp(name, score_names[t]) == 0) {
            *type = (ScoreType)t;
            return 0;
        }
    return fail("unknown score function '%s': expected one of dot, scaled_dot, multiplicative, additive",
                name);
}

size_t score_param_count(const ScoreSpec *s) {
    switch (s->type) {
    case SCORE_MULTIPLICATIVE: return (size_t)s->D_Q * s->D_K;
    case SCORE_ADDITIVE: return (size_t)s->D_A * (s->D_K + s->D_Q + 1);
    default: return 0;
    }
}

ScoreWeights score_weights_view(const ScoreSpec *s, float *base) {
    ScoreWeights w = {NULL, NULL, NULL, NULL};
    if (s->type == SCORE_MULTIPLICATIVE) {
        w.W = base;
    } else if (s->type == SCORE_ADDITIVE) {
        w.W_1 = base;
        w.W_2 = w.W_1 + (size_t)s->D_K * s->D_A;
        w.v = w.W_2 + (size_t)s->D_Q * s->D_A;
    }
    return w;
}

void score_init(const ScoreSpec *s, ScoreWeights *w, Rng *rng) {
    if (s->type == SCORE_MULTIPLICATIVE) {
        init_xavier(w->W, s->D_Q, s->D_K, rng);
    } else if (s->type == SCORE_ADDITIVE) {
        init_xavier(w->W_1, s->D_K, s->D_A, rng);
        init_xavier(w->W_2, s->D_Q, s->D_A, rng);
        init_uniform(w->v, (size_t)s->D_A, 1.0f / sqrtf((float)s->D_A), rng);
    }
}

/* e = score(q, k) for one query q [D_Q] and one key k [D_K], as written on
 * the board. Sums in double so it can serve as the reference. */
float score_one(const ScoreSpec *s, const ScoreWeights *w, const float *q, const float *k) {
    double e = 0.0;
    /* Exercise 03.score_functions (3 points): the four scores of one query q and one key k. */
    switch (s->type) {
    case SCORE_DOT:
    case SCORE_SCALED_DOT:
        for (int d = 0; d < s->D_Q; d++) e += (double)q[d] * k[d];
        if (s->type == SCORE_SCALED_DOT) e /= sqrt((double)s->D_Q);
        break;
    case SCORE_MULTIPLICATIVE:      /* q^T W k = sum_a sum_b q_a W_ab k_b */
        for (int a = 0; a < s->D_Q; a++) {
            double Wk = 0.0;
            for (int b = 0; b < s->D_K; b++) Wk += (double)w->W[(size_t)a * s->D_K + b] * k[b];
            e += q[a] * Wk;
        }
        break;
    case SCORE_ADDITIVE:            /* v^T tanh(W_1 k + W_2 q), component by component */
        for (int h = 0; h < s->D_A; h++) {
            double pre = 0.0;
            for (int b = 0; b < s->D_K; b++) pre += (double)k[b] * w->W_1[(size_t)b * s->D_A + h];
            for (int a = 0; a < s->D_Q; a++) pre += (double)q[a] * w->W_2[(size_t)a * s->D_A + h];
            e += w->v[h] * tanh(pre);
        }
        break;
    default:
        break;
    }
    /* End of exercise 03.score_functions. */
    return (float)e;
}

/* Where forward keeps each score function's intermediate values, after E. */
typedef struct {
    float *E;        /* [N_Q, N_X] */
    float *QW;       /* multiplicative: Q W      [N_Q, D_K] */
    float *Qp, *Kp;  /* additive:       Q W_2    [N_Q, D_A],  K W_1 [N_X, D_A] */
    float *feat;     /* additive:       tanh(Kp_j + Qp_i)     [N_Q, N_X, D_A] */
} ScoreCache;

static ScoreCache score_cache_view(const ScoreSpec *s, float *cache, int N_Q, int N_X) {
    ScoreCache c = {cache, NULL, NULL, NULL, NULL};
    float *rest = cache + (size_t)N_Q * N_X;
    if (s->type == SCORE_MULTIPLICATIVE) {
        c.QW = rest;
    } else if (s->type == SCORE_ADDITIVE) {
        c.Qp = rest;
        c.Kp = c.Qp + (size_t)N_Q * s->D_A;
        c.feat = c.Kp + (size_t)N_X * s->D_A;
    }
    return c;
}

size_t attention_cache_floats(const ScoreSpec *s, int N_Q, int N_X) {
    size_t n = (size_t)N_Q * N_X;
    if (s->type == SCORE_MULTIPLICATIVE) n += (size_t)N_Q * s->D_K;
    if (s->type == SCORE_ADDITIVE) n += (size_t)s->D_A * (N_Q + N_X + (size_t)N_Q * N_X);
    return n;
}

size_t attention_scratch_floats(const ScoreSpec *s, int N_Q, int N_X) {
    size_t n = 2 * (size_t)N_Q * N_X;                    /* dA, dE */
    if (s->type == SCORE_MULTIPLICATIVE) n += (size_t)N_Q * s->D_K;                /* dQW */
    if (s->type == SCORE_ADDITIVE) n += (size_t)s->D_A * (N_Q + N_X);            /* dQp, dKp */
    return n;
}

/* The factor of the dot scores: E = alpha Q K^T. */
static float dot_alpha(const ScoreSpec *s) {
    float alpha = 1.0f;
    /* Exercise 03.scaled_dot (2 points): the scaled dot score's factor, alpha = 1 / sqrt(D_Q). */
    if (s->type == SCORE_SCALED_DOT) alpha = 1.0f / sqrtf((float)s->D_Q);
    /* End of exercise 03.scaled_dot. */
    return alpha;
}

static int is_dot_score(const ScoreSpec *s) {
    return s->type == SCORE_DOT || s->type == SCORE_SCALED_DOT;
}

/* Q [N_Q, D_Q], K [N_X, D_K] -> E [N_Q, N_X] (in c.E) and the intermediates,
 * for the scores with parameters (the dot scores: dot_attention_forward). */
static void score_forward(ScoreCache *c, const float *Q, const float *K, const ScoreSpec *s,
                          const ScoreWeights *w, int N_Q, int N_X) {
    const int D_Q = s->D_Q, D_K = s->D_K, D_A = s->D_A;
    /* Exercise 03.learned_scores (5 points): E for the multiplicative and additive scores, as matrices. */
    switch (s->type) {
    case SCORE_MULTIPLICATIVE:      /* E = (Q W) K^T */
        matmul(c->QW, Q, w->W, N_Q, D_K, D_Q, 0);
        matmul_nt(c->E, c->QW, K, N_Q, N_X, D_K, 0);
        break;
    case SCORE_ADDITIVE:            /* H_ij = tanh(K_j W_1 + Q_i W_2),  E_ij = H_ij . v */
        matmul(c->Qp, Q, w->W_2, N_Q, D_A, D_Q, 0);
        matmul(c->Kp, K, w->W_1, N_X, D_A, D_K, 0);
        for (int i = 0; i < N_Q; i++)
            for (int j = 0; j < N_X; j++) {
                float *h = c->feat + ((size_t)i * N_X + j) * D_A;
                const float *qp = c->Qp + (size_t)i * D_A, *kp = c->Kp + (size_t)j * D_A;
                for (int a = 0; a < D_A; a++) h[a] = tanhf(kp[a] + qp[a]);
            }
        /* all N_Q*N_X hidden vectors times v at once: [N_Q*N_X, D_A] @ [D_A, 1] */
        sgemm(0, 0, N_Q * N_X, 1, D_A, 1.0f, c->feat, D_A, w->v, 1, 0.0f, c->E, 1);
        break;
    default:
        break;
    }
    /* End of exercise 03.learned_scores. */
}

/* dE [N_Q, N_X] -> dQ +=, dK +=, dw +=, for the scores with parameters (the
 * dot scores: dot_attention_backward). scratch: the score's part of
 * attention_scratch_floats (after dA and dE). */
static void score_backward(float *dQ, float *dK, ScoreWeights *dw, float *scratch,
                           const float *dE, const ScoreCache *c, const float *Q, const float *K,
                           const ScoreSpec *s, const ScoreWeights *w, int N_Q, int N_X) {
    const int D_Q = s->D_Q, D_K = s->D_K, D_A = s->D_A;
    /* Exercise 03.learned_scores, continued: their backward, dE to dQ, dK and the score's weights. */
    switch (s->type) {
    case SCORE_MULTIPLICATIVE: {    /* E = QW K^T */
        float *dQW = scratch;                                      /* [N_Q, D_K] = dE K */
        matmul(dQW, dE, K, N_Q, D_K, N_X, 0);
        if (dK) matmul_tn(dK, dE, c->QW, N_X, D_K, N_Q, 1);        /* dK += dE^T (Q W) */
        if (dw && dw->W) matmul_tn(dw->W, Q, dQW, D_Q, D_K, N_Q, 1); /* dW += Q^T dQW */
        if (dQ) matmul_nt(dQ, dQW, w->W, N_Q, D_Q, D_K, 1);        /* dQ += dQW W^T */
        break;
    }
    case SCORE_ADDITIVE: {
        float *dQp = scratch, *dKp = scratch + (size_t)N_Q * D_A;
        memset(dQp, 0, sizeof(float) * (size_t)D_A * (N_Q + N_X));
        /* dv += feat^T dE:  [N_Q*N_X, D_A]^T @ [N_Q*N_X, 1] */
        if (dw && dw->v) sgemm(1, 0, D_A, 1, N_Q * N_X, 1.0f, c->feat, D_A, dE, 1, 1.0f, dw->v, 1);
        /* through tanh: d(pre_ija) = dE_ij v_a (1 - H_ija^2); pre = Kp_j + Qp_i,
         * so dQp_i sums it over j and dKp_j over i. Masked pairs have dE = 0. */
        for (int i = 0; i < N_Q; i++)
            for (int j = 0; j < N_X; j++) {
                float g = dE[(size_t)i * N_X + j];
                if (g == 0.0f) continue;
                const float *h = c->feat + ((size_t)i * N_X + j) * D_A;
                float *dqp = dQp + (size_t)i * D_A, *dkp = dKp + (size_t)j * D_A;
                for (int a = 0; a < D_A; a++) {
                    float dpre = g * w->v[a] * (1.0f - h[a] * h[a]);
                    dqp[a] += dpre;
                    dkp[a] += dpre;
                }
            }
        /* Qp = Q W_2 and Kp = K W_1 are linear layers without bias */
        linear_backward(dQ, dw ? dw->W_2 : NULL, NULL, dQp, Q, w->W_2, N_Q, D_Q, D_A);
        linear_backward(dK, dw ? dw->W_1 : NULL, NULL, dKp, K, w->W_1, N_X, D_K, D_A);
        break;
    }
    default:
        break;
    }
    /* End of exercise 03.learned_scores. */
}

/* ------------------------------------------------------------------- masking */

int mask_key_limit(const AttentionMask *m, int i, int N_X) {
    int limit = N_X;
    if (m == NULL) return limit;
    /* Exercise 04.causal_mask (2 points): query i sees keys j <= i only. */
    if (m->causal && i + 1 < limit) limit = i + 1;              /* keys j <= i */
    /* End of exercise 04.causal_mask. */
    /* Exercise 04.padding_mask (2 points): no query sees a key at j >= key_len (padding). */
    if (m->key_len > 0 && m->key_len < limit) limit = m->key_len; /* keys j < key_len */
    /* End of exercise 04.padding_mask. */
    return limit;
}

int mask_allows(const AttentionMask *m, int i, int j, int N_X) {
    if (j >= mask_key_limit(m, i, N_X)) return 0;
    if (m && m->allowed && m->allowed[(size_t)i * N_X + j] == 0) return 0;
    if (m && m->no_self && i == j) return 0;
    return 1;
}

/* E [N_Q, N_X]: blocked entries become -INFINITY, so softmax gives them 0.
 * Row by row: the keys from mask_key_limit on, then the allowed matrix, then
 * the diagonal (this is mask_allows for every pair, without a call per pair). */
static void apply_mask(float *E, const AttentionMask *mask, int N_Q, int N_X) {
    if (mask == NULL) return;
    for (int i = 0; i < N_Q; i++) {
        float *e = E + (size_t)i * N_X;
        const int limit = mask_key_limit(mask, i, N_X);
        for (int j = limit; j < N_X; j++) e[j] = -INFINITY;
        if (mask->allowed)
            for (int j = 0; j < limit; j++)
                if (mask->allowed[(size_t)i * N_X + j] == 0) e[j] = -INFINITY;
        if (mask->no_self && i < N_X) e[i] = -INFINITY;
    }
}

/* ------------------------------------------- steps 2-4, for every score */

/* E [N_Q, N_X] (the scores) -> E masked, A [N_Q, N_X], Y [N_Q, D_V] (row
 * stride ldy) from V [N_X, D_V] (row stride ldv). A may be E, unless keep
 * [N_Q, N_X] (dropout on the weights, or NULL) is given: then E ends holding
 * the dropped weights A o keep, and Y is made of them. */
static void mask_softmax_values(float *Y, int ldy, float *A, float *E, const float *V, int ldv,
                                const AttentionMask *mask, const float *keep, int N_Q, int N_X, int D_V) {
    apply_mask(E, mask, N_Q, N_X);               /* 2. blocked pairs -> -inf */
    softmax_forward(A, E, N_Q, N_X);             /* 3. A = softmax(E, dim=1) */
    const float *weights = A;                    /*    the weights Y is made of */
    if (keep) {                                  /*    dropout: E = A o keep, A unchanged */
        for (size_t n = 0; n < (size_t)N_Q * N_X; n++) E[n] = A[n] * keep[n];
        weights = E;
    }
    /* 4. Y [N_Q, D_V] = A [N_Q, N_X] @ V [N_X, D_V]   (with dropout: A o keep) */
    sgemm(0, 0, N_Q, D_V, N_X, 1.0f, weights, N_X, V, ldv, 0.0f, Y, ldy);
}

/* Steps 4'-3': dY [N_Q, D_V] (row stride lddy) -> dA [N_Q, N_X] (written),
 * dV [N_X, D_V] += (row stride lddv; may be NULL), dE [N_Q, N_X] (written).
 * keep: forward's dropout multipliers, or NULL. */
static void mask_softmax_values_backward(float *dE, float *dA, float *dV, int lddv,
                                         const float *dY, int lddy, const float *A, const float *keep,
                                         const float *V, int ldv, int N_Q, int N_X, int D_V) {
    const size_t NN = (size_t)N_Q * N_X;
    /* 4'. dA [N_Q, N_X] = dY [N_Q, D_V] @ V^T [D_V, N_X]   (with dropout: of A o keep) */
    sgemm(0, 1, N_Q, N_X, D_V, 1.0f, dY, lddy, V, ldv, 0.0f, dA, N_X);
    const float *weights = A;                    /* the weights Y was made of */
    if (keep) {                                  /* A o keep, in dE's room until 3' */
        for (size_t n = 0; n < NN; n++) dE[n] = A[n] * keep[n];
        weights = dE;
    }
    /*     dV [N_X, D_V] += A^T [N_X, N_Q] @ dY [N_Q, D_V]   (with dropout: (A o keep)^T) */
    if (dV) sgemm(1, 0, N_X, D_V, N_Q, 1.0f, weights, N_X, dY, lddy, 1.0f, dV, lddv);
    /*     dropout: the gradient of A is that of A o keep, times keep */
    if (keep)
        for (size_t n = 0; n < NN; n++) dA[n] *= keep[n];
    /* 3'. dE = softmax'(dA); masked pairs have A = 0, so dE = 0 there */
    memset(dE, 0, sizeof(float) * NN);
    softmax_backward(dE, dA, A, N_Q, N_X);
}

/* ------------------------------- the dot-product core, on blocks in place */

/* Q [N_Q, D_K] (ldq), K [N_X, D_K] (ldk), V [N_X, D_V] (ldv), keep [N_Q, N_X] or NULL
 *   -> Y [N_Q, D_V] (ldy), E and A [N_Q, N_X] */
void dot_attention_forward(float *Y, int ldy, float *A, float *E, const DotHead *h, const AttentionMask *mask,
                           const float *keep) {
    const int N_Q = h->N_Q, N_X = h->N_X, D_K = h->D_K, D_V = h->D_V;
    assert(keep == NULL || E != A);   /* the dropped weights need E's room */
    /* 1. E [N_Q, N_X] = alpha Q [N_Q, D_K] @ K^T [D_K, N_X] */
    sgemm(0, 1, N_Q, N_X, D_K, h->alpha, h->Q, h->ldq, h->K, h->ldk, 0.0f, E, N_X);
    mask_softmax_values(Y, ldy, A, E, h->V, h->ldv, mask, keep, N_Q, N_X, D_V);   /* 2.-4. */
}

/* dY [N_Q, D_V] (lddy) -> dQ [N_Q, D_K] (lddq) +=, dK [N_X, D_K] (lddk) +=,
 * dV [N_X, D_V] (lddv) +=.  scratch: dA | dE, [N_Q, N_X] each. */
void dot_attention_backward(const DotHeadGrads *g, float *scratch, const float *dY, int lddy, const float *A,
                            const float *keep, const DotHead *h) {
    const int N_Q = h->N_Q, N_X = h->N_X, D_K = h->D_K, D_V = h->D_V;
    float *dA = scratch, *dE = scratch + (size_t)N_Q * N_X;
    /* 4'.-3'. */
    mask_softmax_values_backward(dE, dA, g->dV, g->lddv, dY, lddy, A, keep, h->V, h->ldv, N_Q, N_X, D_V);
    /* 1'. dQ [N_Q, D_K] += alpha dE [N_Q, N_X] @ K [N_X, D_K] */
    if (g->dQ) sgemm(0, 0, N_Q, D_K, N_X, h->alpha, dE, N_X, h->K, h->ldk, 1.0f, g->dQ, g->lddq);
    /*     dK [N_X, D_K] += alpha dE^T [N_X, N_Q] @ Q [N_Q, D_K] */
    if (g->dK) sgemm(1, 0, N_X, D_K, N_Q, h->alpha, dE, N_X, h->Q, h->ldq, 1.0f, g->dK, g->lddk);
}

/* a [N_X] -> its entropy (returned) and its largest weight */
double attention_row_entropy(const float *a, int N_X, double *max_weight) {
    double entropy = 0.0, top = 0.0;
    for (int j = 0; j < N_X; j++) {
        if (a[j] > 0) entropy -= a[j] * log(a[j]);
        if (a[j] > top) top = a[j];
    }
    *max_weight = top;
    return entropy;
}

/* ------------------------------------------- the attention layer, matrix form */

/* Q [N_Q, D_Q], K [N_X, D_K], V [N_X, D_V] -> Y [N_Q, D_V], A [N_Q, N_X], cache */
void attention_forward(float *Y, float *A, float *cache,
                       const float *Q, const float *K, const float *V,
                       const ScoreSpec *s, const ScoreWeights *w,
                       const AttentionMask *mask, int N_Q, int N_X, int D_V) {
    ScoreCache c = score_cache_view(s, cache, N_Q, N_X);
    if (is_dot_score(s)) {                       /* 1.-4., the blocks being whole matrices */
        const DotHead h = {Q, s->D_Q, K, s->D_K, V, D_V, N_Q, N_X, s->D_Q, D_V, dot_alpha(s)};
        dot_attention_forward(Y, D_V, A, c.E, &h, mask, NULL);
        return;
    }
    score_forward(&c, Q, K, s, w, N_Q, N_X);     /* 1. E = score(Q, K) */
    mask_softmax_values(Y, D_V, A, c.E, V, D_V, mask, NULL, N_Q, N_X, D_V);   /* 2.-4. */
}

/* dY [N_Q, D_V] -> dQ [N_Q, D_Q] +=, dK [N_X, D_K] +=, dV [N_X, D_V] +=, dw += */
void attention_backward(float *dQ, float *dK, float *dV, ScoreWeights *dw, float *scratch,
                        const float *dY, const float *A, const float *cache,
                        const float *Q, const float *K, const float *V,
                        const ScoreSpec *s, const ScoreWeights *w,
                        int N_Q, int N_X, int D_V) {
    size_t NN = (size_t)N_Q * N_X;
    float *dA = scratch, *dE = scratch + NN;
    ScoreCache c = score_cache_view(s, (float *)cache, N_Q, N_X);
    if (is_dot_score(s)) {                       /* 4'.-1'. */
        const DotHead h = {Q, s->D_Q, K, s->D_K, V, D_V, N_Q, N_X, s->D_Q, D_V, dot_alpha(s)};
        const DotHeadGrads g = {dQ, s->D_Q, dK, s->D_K, dV, D_V};
        dot_attention_backward(&g, scratch, dY, D_V, A, NULL, &h);
        return;
    }
    mask_softmax_values_backward(dE, dA, dV, D_V, dY, D_V, A, NULL, V, D_V, N_Q, N_X, D_V);   /* 4'.-3'. */
    score_backward(dQ, dK, dw, scratch + 2 * NN, dE, &c, Q, K, s, w, N_Q, N_X);  /* 1'. */
}

/* ------------------------------------------- one query, written as loops */

/* q [D_Q], K [N_X, D_K], V [N_X, D_V] -> e [N_X], a [N_X], y [D_V] */
void attention_single_query(float *y, float *a, float *e, const float *q,
                            const float *K, const float *V,
                            const ScoreSpec *s, const ScoreWeights *w,
                            const AttentionMask *mask, int query_index, int N_X, int D_V) {
    /* similarities of q with every key */
    for (int j = 0; j < N_X; j++)
        e[j] = mask_allows(mask, query_index, j, N_X) ? score_one(s, w, q, K + (size_t)j * s->D_K)
                                                      : -INFINITY;
    /* a = softmax(e), written out */
    float max = -INFINITY;
    for (int j = 0; j < N_X; j++) if (e[j] > max) max = e[j];
    double sum = 0.0;
    for (int j = 0; j < N_X; j++) {
        a[j] = (max == -INFINITY) ? 0.0f : expf(e[j] - max);
        sum += a[j];
    }
    for (int j = 0; j < N_X; j++) a[j] = sum > 0.0 ? (float)(a[j] / sum) : 0.0f;
    /* y = sum_j a_j v_j */
    for (int d = 0; d < D_V; d++) {
        double acc = 0.0;
        for (int j = 0; j < N_X; j++) acc += (double)a[j] * V[(size_t)j * D_V + d];
        y[d] = (float)acc;
    }
}

/* --------------------------------------------------------- cross-attention */

size_t cross_attention_param_count(const CrossAttentionSpec *c) {
    size_t n = (size_t)c->D_X * (c->score.D_K + c->D_V) + score_param_count(&c->score);
    if (c->project_q) n += (size_t)c->D_in_Q * c->score.D_Q;
    return n;
}

CrossAttentionWeights cross_attention_weights_view(const CrossAttentionSpec *c, float *base) {
    CrossAttentionWeights w;
    w.W_Q = c->project_q ? base : NULL;
    float *next = base + (c->project_q ? (size_t)c->D_in_Q * c->score.D_Q : 0);
    w.W_K = next;
    w.W_V = w.W_K + (size_t)c->D_X * c->score.D_K;
    w.score = score_weights_view(&c->score, w.W_V + (size_t)c->D_X * c->D_V);
    return w;
}

void cross_attention_init(const CrossAttentionSpec *c, float *base, Rng *rng) {
    CrossAttentionWeights w = cross_attention_weights_view(c, base);
    if (c->project_q) init_xavier(w.W_Q, c->D_in_Q, c->score.D_Q, rng);
    init_xavier(w.W_K, c->D_X, c->score.D_K, rng);
    init_xavier(w.W_V, c->D_X, c->D_V, rng);
    score_init(&c->score, &w.score, rng);
}

size_t cross_attention_cache_floats(const CrossAttentionSpec *c, int N_Q, int N_X) {
    return (size_t)N_Q * c->score.D_Q + (size_t)N_X * (c->score.D_K + c->D_V) +
           attention_cache_floats(&c->score, N_Q, N_X);
}

size_t cross_attention_scratch_floats(const CrossAttentionSpec *c, int N_Q, int N_X) {
    return cross_attention_cache_floats(c, N_Q, N_X) - attention_cache_floats(&c->score, N_Q, N_X) +
           attention_scratch_floats(&c->score, N_Q, N_X);
}

/* Q_in [N_Q, D_in_Q], X [N_X, D_X] -> Y [N_Q, D_V], A [N_Q, N_X] */
void cross_attention_forward(float *Y, float *A, float *cache,
                             const float *Q_in, const float *X,
                             const CrossAttentionSpec *c, const CrossAttentionWeights *w,
                             const AttentionMask *mask, int N_Q, int N_X) {
    const ScoreSpec *s = &c->score;
    float *Q = cache;                                      /* [N_Q, D_Q] */
    float *K = Q + (size_t)N_Q * s->D_Q;                   /* [N_X, D_K] */
    float *V = K + (size_t)N_X * s->D_K;                   /* [N_X, D_V] */
    float *attn_cache = V + (size_t)N_X * c->D_V;
    if (c->project_q)
        linear_forward(Q, Q_in, w->W_Q, NULL, N_Q, c->D_in_Q, s->D_Q);   /* Q = Q_in W_Q */
    else
        memcpy(Q, Q_in, sizeof(float) * (size_t)N_Q * s->D_Q);
    linear_forward(K, X, w->W_K, NULL, N_X, c->D_X, s->D_K);             /* K = X W_K */
    linear_forward(V, X, w->W_V, NULL, N_X, c->D_X, c->D_V);             /* V = X W_V */
    attention_forward(Y, A, attn_cache, Q, K, V, s, &w->score, mask, N_Q, N_X, c->D_V);
}

void cross_attention_backward(float *dQ_in, float *dX, CrossAttentionWeights *dw, float *scratch,
                              const float *dY, const float *A, const float *cache,
                              const float *Q_in, const float *X,
                              const CrossAttentionSpec *c, const CrossAttentionWeights *w,
                              int N_Q, int N_X) {
    const ScoreSpec *s = &c->score;
    const float *Q = cache;
    const float *K = Q + (size_t)N_Q * s->D_Q;
    const float *V = K + (size_t)N_X * s->D_K;
    const float *attn_cache = V + (size_t)N_X * c->D_V;
    float *dQ = scratch;
    float *dK = dQ + (size_t)N_Q * s->D_Q;
    float *dV = dK + (size_t)N_X * s->D_K;
    float *attn_scratch = dV + (size_t)N_X * c->D_V;
    memset(dQ, 0, sizeof(float) * (size_t)(attn_scratch - dQ));

    attention_backward(dQ, dK, dV, dw ? &dw->score : NULL, attn_scratch, dY, A, attn_cache,
                       Q, K, V, s, &w->score, N_Q, N_X, c->D_V);
    linear_backward(dX, dw ? dw->W_K : NULL, NULL, dK, X, w->W_K, N_X, c->D_X, s->D_K);
    linear_backward(dX, dw ? dw->W_V : NULL, NULL, dV, X, w->W_V, N_X, c->D_X, c->D_V);
    if (c->project_q) {
        linear_backward(dQ_in, dw ? dw->W_Q : NULL, NULL, dQ, Q_in, w->W_Q, N_Q, c->D_in_Q, s->D_Q);
    } else if (dQ_in) {
        for (size_t n = 0; n < (size_t)N_Q * s->D_Q; n++) dQ_in[n] += dQ[n];
    }
}
