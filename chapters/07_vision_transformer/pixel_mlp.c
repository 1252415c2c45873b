/* pixel_mlp.c - chapter 07's baseline without attention: an MLP on the
 * pixels (pixel_mlp.h), built from the layers every chapter uses
 * (nn/layers.h: linear, GELU, cross-entropy). */
#include "07_vision_transformer/pixel_mlp.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "util/error.h"
#include "util/util.h"
#include "train/memory.h"

typedef struct {
    PixelMlpConfig cfg;
    Params params;
    size_t W[PIXEL_MLP_MAX_LAYERS + 1], b[PIXEL_MLP_MAX_LAYERS + 1];   /* layer l; the last is the output */
    int B, max_B;
    const float *x;                     /* the last forward's input [B, inputs] */
    float *pre[PIXEL_MLP_MAX_LAYERS];   /* h_{l-1} W_l + b_l [max_B, F], kept for GELU's backward */
    float *h[PIXEL_MLP_MAX_LAYERS];     /* h_l [max_B, F] */
    float *logits, *probs, *dlogits;    /* [max_B, C] */
    float *dh, *dpre;                   /* [max_B, F] */
} PixelMlp;

const ConfigField PIXEL_MLP_CONFIG_FIELDS[] = {
    {"inputs", CONFIG_INT, offsetof(PixelMlpConfig, inputs), .lo = 1, .hi = 1 << 20},
    {"hidden", CONFIG_INT, offsetof(PixelMlpConfig, hidden), .lo = 1, .hi = 65536},
    {"layers", CONFIG_INT, offsetof(PixelMlpConfig, layers), .lo = 1, .hi = PIXEL_MLP_MAX_LAYERS},
    {"classes", CONFIG_INT, offsetof(PixelMlpConfig, classes), .lo = 2, .hi = 100000},
};
const int PIXEL_MLP_CONFIG_N = (int)(sizeof PIXEL_MLP_CONFIG_FIELDS / sizeof PIXEL_MLP_CONFIG_FIELDS[0]);

static void mlp_free(PixelMlp *m) {
    params_free(&m->params);
    for (int l = 0; l < PIXEL_MLP_MAX_LAYERS; l++) {
        free(m->pre[l]);
        free(m->h[l]);
    }
    free(m->logits);
    free(m->probs);
    free(m->dlogits);
    free(m->dh);
    free(m->dpre);
}

static int mlp_create(PixelMlp *m, const PixelMlpConfig *c, int max_B, uint64_t seed) {
    memset(m, 0, sizeof *m);
    params_init(&m->params);
    if (c->inputs < 1) return fail("inputs=%d: expected at least one pixel", c->inputs);
    if (c->hidden < 1) return fail("hidden=%d: expected a width F >= 1", c->hidden);
    if (c->layers < 1 || c->layers > PIXEL_MLP_MAX_LAYERS)
        return fail("layers=%d: expected 1 to %d hidden layers", c->layers, PIXEL_MLP_MAX_LAYERS);
    if (c->classes < 2) return fail("classes=%d: expected at least 2", c->classes);
    if (max_B < 1) return fail("batch %d: expected at least 1 image", max_B);
    m->cfg = *c;
    m->max_B = max_B;
    const int F = c->hidden, L = c->layers;
    for (int l = 0; l <= L; l++) {
        const int in = l == 0 ? c->inputs : F, out = l == L ? c->classes : F;
        char layer[16], name[32];
        if (l == L) snprintf(layer, sizeof layer, "out");
        else snprintf(layer, sizeof layer, "hidden%d", l + 1);
        snprintf(name, sizeof name, "%s.W", layer);
        m->W[l] = params_add(&m->params, name, 2, (int[]){in, out});
        snprintf(name, sizeof name, "%s.b", layer);
        m->b[l] = params_add(&m->params, name, 1, (int[]){out});
    }
    if (params_alloc(&m->params) < 0) return -1;
    Rng rng;
    rng_seed(&rng, seed, 1);
    for (int l = 0; l <= L; l++) {
        const int in = l == 0 ? c->inputs : F, out = l == L ? c->classes : F;
        init_xavier(params_data(&m->params, m->W[l]), in, out, &rng);
    }
    const size_t BF = (size_t)max_B * F, BC = (size_t)max_B * c->classes;
    for (int l = 0; l < L; l++) {
        m->pre[l] = xmalloc(sizeof(float) * BF);
        m->h[l] = xmalloc(sizeof(float) * BF);
    }
    m->logits = xmalloc(sizeof(float) * BC);
    m->probs = xmalloc(sizeof(float) * BC);
    m->dlogits = xmalloc(sizeof(float) * BC);
    m->dh = xmalloc(sizeof(float) * BF);
    m->dpre = xmalloc(sizeof(float) * BF);
    return 0;
}

/* x [B, inputs] -> logits [B, C]; with targets, the mean cross-entropy. */
static double pixel_mlp_forward(PixelMlp *m, const float *x, const int *targets, int B) {
    Params *p = &m->params;
    const int F = m->cfg.hidden, L = m->cfg.layers, C = m->cfg.classes;
    m->B = B;
    m->x = x;
    const float *in = x;
    int D_in = m->cfg.inputs;
    for (int l = 0; l < L; l++) {
        linear_forward(m->pre[l], in, params_data(p, m->W[l]), params_data(p, m->b[l]), B, D_in, F);
        gelu_forward(m->h[l], m->pre[l], B * F);
        in = m->h[l];
        D_in = F;
    }
    linear_forward(m->logits, in, params_data(p, m->W[L]), params_data(p, m->b[L]), B, F, C);
    if (!targets) return 0.0;
    int counted = 0;
    double sum = cross_entropy_forward(m->probs, m->logits, targets, B, C, -1, &counted);
    return counted ? sum / counted : 0.0;
}

/* After forward: d(mean loss)/d params, added into params.grad. */
static void pixel_mlp_backward(PixelMlp *m, const int *targets) {
    Params *p = &m->params;
    const int B = m->B, F = m->cfg.hidden, L = m->cfg.layers, C = m->cfg.classes;
    memset(m->dlogits, 0, sizeof(float) * (size_t)B * C);
    cross_entropy_backward(m->dlogits, m->probs, targets, B, C, -1, 1.0f / (float)B);
    memset(m->dh, 0, sizeof(float) * (size_t)B * F);
    linear_backward(m->dh, params_grad(p, m->W[L]), params_grad(p, m->b[L]), m->dlogits, m->h[L - 1],
                    params_data(p, m->W[L]), B, F, C);
    for (int l = L - 1; l >= 0; l--) {
        memset(m->dpre, 0, sizeof(float) * (size_t)B * F);
        gelu_backward(m->dpre, m->dh, m->pre[l], B * F);
        const float *in = l == 0 ? m->x : m->h[l - 1];
        const int D_in = l == 0 ? m->cfg.inputs : F;
        float *din = NULL;   /* the pixels need no gradient */
        if (l > 0) {
            memset(m->dh, 0, sizeof(float) * (size_t)B * F);
            din = m->dh;
        }
        linear_backward(din, params_grad(p, m->W[l]), params_grad(p, m->b[l]), m->dpre, in,
                        params_data(p, m->W[l]), B, D_in, F);
    }
}

/* ---------------------------------------------------- the Classifier face */

static double face_forward(void *self, const Examples *e) {
    return pixel_mlp_forward(self, e->values, e->targets, e->B);
}
static void face_backward(void *self, const Examples *e) { pixel_mlp_backward(self, e->targets); }
static void face_predict(void *self, int *pred) {
    const PixelMlp *m = self;
    const int C = m->cfg.classes;
    for (int b = 0; b < m->B; b++) {
        const float *z = m->logits + (size_t)b * C;
        int best = 0;
        for (int c = 1; c < C; c++) if (z[c] > z[best]) best = c;
        pred[b] = best;
    }
}
static const float *face_logits(void *self) { return ((PixelMlp *)self)->logits; }
static void face_destroy(void *self) {
    mlp_free(self);
    free(self);
}

int pixel_mlp_build(Classifier *c, const PixelMlpConfig *cfg, int max_B, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("07_mlp", "a smaller --batch or --hidden");
    PixelMlp *m = xmalloc(sizeof *m);
    if (mlp_create(m, cfg, max_B, seed) < 0) {
        memory_budget_end();
        mlp_free(m);
        free(m);
        return -1;
    }
    memory_budget_end();
    memset(c, 0, sizeof *c);
    c->self = m;
    c->params = &m->params;
    c->max_B = max_B;
    c->n_out = 1;
    c->classes = cfg->classes;
    c->forward = face_forward;
    c->backward = face_backward;
    c->predict = face_predict;
    c->logits = face_logits;
    c->destroy = face_destroy;
    return 0;
}
