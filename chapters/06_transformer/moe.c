/* moe.c - chapter 06: the mixture-of-experts sublayer (see moe.h).
 *
 * Forward, R rows, S = R k pairs (position r, its j-th choice):
 *   1. P = softmax(U W_r)                         [R, E]
 *   2. choice, g: each row's top k, and weights   [R, k]
 *   3. f_e, P_e, aux = E sum_e f_e P_e
 *   4. slots: capacity, gathered rows per expert  offset [E + 1]
 *   5. Ug = the gathered U rows                   [S, D]
 *   6. Yg = MLP_e(Ug) per expert's block          [S, D]
 *   7. out[r] = sum_j g[r, j] Yg[slot[r, j]]      [R, D]
 * Backward, the same steps last to first. */
#include "06_transformer/moe.h"
#include "06_transformer/mlp.h"

#include <math.h>
#include <string.h>

#include "nn/layers.h"
#include "nn/params.h"
#include "util/error.h"
#include "util/util.h"

int moe_spec_check(const BlockSpec *s) {
    const BlockMoe *m = &s->moe;
    if (m->E == 0) {   /* a dense MLP: the expert settings must say so (k 0 or 1, the rest 0), or they were meant */
        if (m->k > 1 || m->aux != 0.0f || m->capacity != 0.0f || m->renorm != 0)
            return fail("experts 0 (a dense MLP) with top-k %d, aux %g, capacity %g, renorm %d: expected top-k 1 "
                        "and the others 0 (or experts 1 .. %d)", m->k, (double)m->aux, (double)m->capacity,
                        m->renorm, BLOCK_MAX_EXPERTS);
        return 0;
    }
    if (m->E < 1 || m->E > BLOCK_MAX_EXPERTS)
        return fail("experts %d: expected 1 .. %d", m->E, BLOCK_MAX_EXPERTS);
    if (m->k < 1 || m->k > m->E) return fail("top-k %d: expected 1 .. experts (%d)", m->k, m->E);
    if (s->mlp == BLOCK_NO_MLP) return fail("experts need an MLP to copy: expected mlp gelu, relu or swiglu");
    if (!(m->aux >= 0.0f && m->aux < 1e3f)) return fail("aux coefficient %g: expected >= 0", (double)m->aux);
    if (!(m->capacity >= 0.0f && m->capacity < 1e6f))
        return fail("capacity factor %g: expected 0 (no limit) or > 0", (double)m->capacity);
    if (m->renorm != 0 && m->renorm != 1) return fail("renorm %d: expected 0 or 1", m->renorm);
    return 0;
}

size_t moe_param_count(const BlockSpec *s) {
    return (size_t)s->D * s->moe.E + (size_t)s->moe.E * mlp_param_count(s);
}

BlockWeights moe_expert(const BlockSpec *s, float *experts, int e) {
    if (experts == NULL) {   /* no gradients wanted: every view NULL */
        BlockWeights none;
        memset(&none, 0, sizeof none);
        return none;
    }
    return mlp_view(s, experts + (size_t)e * mlp_param_count(s));
}

void moe_init(const BlockSpec *s, const BlockWeights *w, Rng *rng) {
    init_xavier(w->W_r, s->D, s->moe.E, rng);
    for (int e = 0; e < s->moe.E; e++) {
        BlockWeights x = moe_expert(s, w->experts, e);
        if (x.W_1) init_xavier(x.W_1, s->D, s->F, rng);
        if (x.b_1) init_constant(x.b_1, (size_t)s->F, 0.0f);
        if (x.W_3) init_xavier(x.W_3, s->D, s->F, rng);
        init_xavier(x.W_2, s->F, s->D, rng);
        if (x.b_2) init_constant(x.b_2, (size_t)s->D, 0.0f);
    }
}

size_t moe_cache_layout(const BlockSpec *s, int R, float *base, BlockMoeCache *c) {
    const size_t E = (size_t)s->moe.E, k = (size_t)s->moe.k, S = (size_t)R * k;
    const size_t SF = S * s->F, SD = S * s->D;
    size_t used = 0;
    memset(c, 0, sizeof *c);
    c->P = floats_take(base, &used, (size_t)R * E);
    c->choice = (int *)floats_take(base, &used, S);   /* ints in float memory: see block.h */
    c->g = floats_take(base, &used, S);
    c->slot = (int *)floats_take(base, &used, S);
    c->slot_pair = (int *)floats_take(base, &used, S);
    c->offset = (int *)floats_take(base, &used, E + 1);
    c->Ug = floats_take(base, &used, SD);
    c->pre_act = floats_take(base, &used, SF);
    c->gate = floats_take(base, &used, s->mlp == BLOCK_MLP_SWIGLU ? SF : 0);
    c->hidden = floats_take(base, &used, SF);
    c->Yg = floats_take(base, &used, SD);
    c->f = floats_take(base, &used, E);
    c->stats = floats_take(base, &used, 2);
    return used;
}

/* Backward's scratch. */
typedef struct {
    float *dYg, *dUg;                  /* [S, D] */
    float *dhidden, *dpre_act, *dgate; /* [S, F] */
    float *dg;                         /* [R, k] */
    float *dP;                         /* [R, E] */
    float *dlogits;                    /* [R, E] */
} MoeScratch;

static size_t scratch_layout(const BlockSpec *s, int R, float *base, MoeScratch *k) {
    const size_t E = (size_t)s->moe.E, S = (size_t)R * s->moe.k;
    const size_t SF = S * s->F, SD = S * s->D;
    size_t used = 0;
    k->dYg = floats_take(base, &used, SD);
    k->dUg = floats_take(base, &used, SD);
    k->dhidden = floats_take(base, &used, SF);
    k->dpre_act = floats_take(base, &used, SF);
    k->dgate = floats_take(base, &used, s->mlp == BLOCK_MLP_SWIGLU ? SF : 0);
    k->dg = floats_take(base, &used, S);
    k->dP = floats_take(base, &used, (size_t)R * E);
    k->dlogits = floats_take(base, &used, (size_t)R * E);
    return used;
}

size_t moe_scratch_floats(const BlockSpec *s, int R) {
    MoeScratch k;
    return scratch_layout(s, R, NULL, &k);
}

/* 2. p [E] -> choice [k]: the k largest, best first (ties: the lower
 * index), and their weights g [k] (renormalised or not) */
static void top_k(int *choice, float *g, const float *p, int E, int k, int renorm) {
    float sum = 0.0f;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= choice[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        choice[j] = best;
        g[j] = p[best];
        sum += p[best];
    }
    if (renorm)
        for (int j = 0; j < k; j++) g[j] /= sum;
}

void moe_forward(float *out, const BlockMoeCache *c, const float *U, const BlockSpec *s, const BlockWeights *w,
                 int R, int train) {
    const int D = s->D, F = s->F, E = s->moe.E, k = s->moe.k;
    /* 1. P [R, E] = softmax(U W_r) */
    linear_forward(c->P, U, w->W_r, NULL, R, D, E);
    softmax_forward(c->P, c->P, R, E);
    /* 2. each row's k experts and weights */
    for (int r = 0; r < R; r++)
        top_k(c->choice + (size_t)r * k, c->g + (size_t)r * k, c->P + (size_t)r * E, E, k, s->moe.renorm);
    /* 3. f_e (share of the choices), P_e (mean probability), aux = E sum f_e P_e */
    int wanted[BLOCK_MAX_EXPERTS] = {0};
    for (int i = 0; i < R * k; i++) wanted[c->choice[i]]++;
    double aux = 0.0;
    for (int e = 0; e < E; e++) {
        double P_e = 0.0;
        for (int r = 0; r < R; r++) P_e += c->P[(size_t)r * E + e];
        c->f[e] = R > 0 ? (float)wanted[e] / (float)(R * k) : 0.0f;
        aux += (double)c->f[e] * (R > 0 ? P_e / R : 0.0);
    }
    c->stats[0] = (float)(E * aux);
    /* 4. slots: up to cap pairs per expert, first choices first, rows in order */
    const int cap = (train && s->moe.capacity > 0.0f)
                        ? (int)ceilf(s->moe.capacity * (float)R * (float)k / (float)E) : R;
    int kept[BLOCK_MAX_EXPERTS] = {0};
    int dropped = 0;
    for (int j = 0; j < k; j++)
        for (int r = 0; r < R; r++) {
            const int e = c->choice[r * k + j];
            if (kept[e] < cap) c->slot[r * k + j] = kept[e]++;   /* the place within e's block, for now */
            else { c->slot[r * k + j] = -1; dropped++; }
        }
    c->stats[1] = (float)dropped;
    c->offset[0] = 0;
    for (int e = 0; e < E; e++) c->offset[e + 1] = c->offset[e] + kept[e];
    /* 5. Ug [S, D]: each kept pair's row, in its expert's block */
    for (int i = 0; i < R * k; i++) {
        if (c->slot[i] < 0) continue;
        c->slot[i] += c->offset[c->choice[i]];
        c->slot_pair[c->slot[i]] = i;
        memcpy(c->Ug + (size_t)c->slot[i] * D, U + (size_t)(i / k) * D, sizeof(float) * (size_t)D);
    }
    /* 6. Yg = MLP_e(Ug), expert by expert (an expert without rows does nothing) */
    for (int e = 0; e < E; e++) {
        const int o = c->offset[e], n = c->offset[e + 1] - o;
        if (n == 0) continue;
        const BlockWeights x = moe_expert(s, w->experts, e);
        mlp_forward(c->Yg + (size_t)o * D, c->pre_act + (size_t)o * F,
                          c->gate ? c->gate + (size_t)o * F : NULL, c->hidden + (size_t)o * F,
                          c->Ug + (size_t)o * D, s, &x, n);
    }
    /* 7. out[r] = sum_j g[r, j] Yg[slot[r, j]] (0 when every choice was dropped) */
    memset(out, 0, sizeof(float) * (size_t)R * D);
    for (int i = 0; i < R * k; i++) {
        if (c->slot[i] < 0) continue;
        const float *y = c->Yg + (size_t)c->slot[i] * D;
        float *o = out + (size_t)(i / k) * D;
        for (int d = 0; d < D; d++) o[d] += c->g[i] * y[d];
    }
}

void moe_backward(float *dU, BlockWeights *dw, float *scratch, const float *dout, const BlockMoeCache *c,
                  const float *U, const BlockSpec *s, const BlockWeights *w, int R) {
    const int D = s->D, F = s->F, E = s->moe.E, k = s->moe.k;
    MoeScratch t;
    scratch_layout(s, R, scratch, &t);
    /* 7. dYg[slot] = g dout[r]; dg[r, j] = dout[r] . Yg[slot] (dropped: 0) */
    for (int i = 0; i < R * k; i++) {
        t.dg[i] = 0.0f;
        if (c->slot[i] < 0) continue;
        const float *d = dout + (size_t)(i / k) * D, *y = c->Yg + (size_t)c->slot[i] * D;
        float *dy = t.dYg + (size_t)c->slot[i] * D;
        float dot = 0.0f;
        for (int j = 0; j < D; j++) {
            dy[j] = c->g[i] * d[j];
            dot += d[j] * y[j];
        }
        t.dg[i] = dot;
    }
    /* 6. through each expert: dUg, and the expert's gradients */
    const int S = c->offset[E];
    memset(t.dUg, 0, sizeof(float) * (size_t)S * D);
    for (int e = 0; e < E; e++) {
        const int o = c->offset[e], n = c->offset[e + 1] - o;
        if (n == 0) continue;
        const BlockWeights x = moe_expert(s, w->experts, e);
        BlockWeights dx = moe_expert(s, dw->experts, e);
        mlp_backward(t.dUg + (size_t)o * D, &dx, t.dhidden + (size_t)o * F, t.dpre_act + (size_t)o * F,
                           t.dgate ? t.dgate + (size_t)o * F : NULL, t.dYg + (size_t)o * D,
                           c->pre_act + (size_t)o * F, c->gate ? c->gate + (size_t)o * F : NULL,
                           c->hidden + (size_t)o * F, c->Ug + (size_t)o * D, s, &x, n);
    }
    /* 5. scatter: dU[r] += dUg[slot] */
    if (dU)
        for (int i = 0; i < R * k; i++) {
            if (c->slot[i] < 0) continue;
            const float *du = t.dUg + (size_t)c->slot[i] * D;
            float *to = dU + (size_t)(i / k) * D;
            for (int d = 0; d < D; d++) to[d] += du[d];
        }
    /* 2. the weights' gradient onto P: g = p (renorm 0), or g_j = p_j / sum_C p
     * (renorm 1): dp_i = (dg_i - sum_j dg_j g_j) / sum_C p */
    memset(t.dP, 0, sizeof(float) * (size_t)R * E);
    for (int r = 0; r < R; r++) {
        const int *ch = c->choice + (size_t)r * k;
        const float *g = c->g + (size_t)r * k, *dg = t.dg + (size_t)r * k, *p = c->P + (size_t)r * E;
        float *dp = t.dP + (size_t)r * E;
        if (!s->moe.renorm) {
            for (int j = 0; j < k; j++) dp[ch[j]] += dg[j];
            continue;
        }
        float sum = 0.0f, dot = 0.0f;
        for (int j = 0; j < k; j++) {
            sum += p[ch[j]];
            dot += dg[j] * g[j];
        }
        for (int j = 0; j < k; j++) dp[ch[j]] += (dg[j] - dot) / sum;
    }
    /* 3. alpha aux = alpha E sum_e f_e (1/R) sum_r p_e(r): dp_e(r) += alpha E f_e / R */
    if (s->moe.aux > 0.0f)
        for (int r = 0; r < R; r++)
            for (int e = 0; e < E; e++) t.dP[(size_t)r * E + e] += s->moe.aux * (float)E * c->f[e] / (float)R;
    /* 1. through the softmax and the router */
    memset(t.dlogits, 0, sizeof(float) * (size_t)R * E);
    softmax_backward(t.dlogits, t.dP, c->P, R, E);
    linear_backward(dU, dw->W_r, NULL, t.dlogits, U, w->W_r, R, D, E);
}
