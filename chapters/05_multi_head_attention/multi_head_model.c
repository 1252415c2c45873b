/* multi_head_model.c - chapter 05: multi-head attention as the attention of
 * chapter 04's digit model (see multi_head_model.h). */
#include "05_multi_head_attention/multi_head_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/util.h"
#include "train/memory.h"

static const MultiHeadSpec *spec_of(const DigitModel *m) { return m->attention_spec; }

static void multi_head_declare(DigitModel *m, int l) {
    const MultiHeadSpec *s = spec_of(m);
    const int HD = s->H * s->D_H;
    static const char *const names[3] = {"W_QKV", "W_O", "b_O"};
    const int dims[3][2] = {{s->D, 3 * HD}, {HD, s->D_out}, {s->D_out, 0}};
    for (int k = 0; k < 3; k++) {
        char name[PARAMS_NAME_LEN];
        snprintf(name, sizeof name, "layer%d.%s", l, names[k]);
        m->attn[l][k] = params_add(&m->params, name, dims[k][1] ? 2 : 1, dims[k]);
    }
}

/* Layer l's weights (grad = 1: their gradients). */
static MultiHeadWeights layer_weights(const DigitModel *m, int l, int grad) {
    Params *p = (Params *)&m->params;
    float *(*get)(Params *, size_t) = grad ? params_grad : params_data;
    MultiHeadWeights w = {get(p, m->attn[l][0]), get(p, m->attn[l][1]), get(p, m->attn[l][2])};
    return w;
}

static void multi_head_layer_init(DigitModel *m, int l, Rng *rng) {
    MultiHeadWeights w = layer_weights(m, l, 0);
    multi_head_init(spec_of(m), &w, rng);
}

static size_t weights_floats(const DigitModel *m, int B) { return multi_head_attention_floats(spec_of(m), B, m->N); }
static size_t cache_floats(const DigitModel *m, int B) { return multi_head_cache_floats(spec_of(m), B, m->N); }
static size_t scratch_floats(const DigitModel *m, int B) { return multi_head_scratch_floats(spec_of(m), B, m->N); }

static void multi_head_layer_forward(const DigitModel *m, int l, float *Y, float *A, float *cache,
                                     const float *X, int B) {
    MultiHeadWeights w = layer_weights(m, l, 0);
    multi_head_forward(Y, A, NULL, cache, X, spec_of(m), &w, m->causal, NULL, B, m->N);
}

static void multi_head_layer_backward(DigitModel *m, int l, float *dX, float *scratch, const float *dY,
                                      const float *A, const float *cache, const float *X, int B) {
    MultiHeadWeights w = layer_weights(m, l, 0), dw = layer_weights(m, l, 1);
    multi_head_backward(dX, &dw, scratch, dY, A, NULL, cache, X, spec_of(m), &w, m->causal, NULL, B, m->N);
}

const DigitAttention DIGIT_MULTI_HEAD_ATTENTION = {
    MH_MODEL_NAME, multi_head_declare, multi_head_layer_init, weights_floats, cache_floats, scratch_floats,
    multi_head_layer_forward, multi_head_layer_backward,
};

/* The checkpoint's lines (multi_head_model.h): chapter 04's, with heads and head_dim after dim. */
const ConfigField MH_MODEL_CONFIG_FIELDS[] = {
    {"len", CONFIG_INT, offsetof(MultiHeadModelConfig, digit.N), .lo = 2, .hi = 64},
    {"dim", CONFIG_INT, offsetof(MultiHeadModelConfig, digit.D), .lo = 2, .hi = 1024},
    {"heads", CONFIG_INT, offsetof(MultiHeadModelConfig, H), .lo = 1, .hi = 1024},
    {"head_dim", CONFIG_INT, offsetof(MultiHeadModelConfig, D_H), .lo = 1, .hi = 1024},
    {"ff", CONFIG_INT, offsetof(MultiHeadModelConfig, digit.F), .lo = 1, .hi = 4096, .old_key = "hidden"},
    {"layers", CONFIG_INT, offsetof(MultiHeadModelConfig, digit.L), .lo = 1, .hi = DIGIT_MAX_LAYERS},
    {"classes", CONFIG_INT, offsetof(MultiHeadModelConfig, digit.C), .lo = 1, .hi = 4096},
    {"pos", CONFIG_CHOICE, offsetof(MultiHeadModelConfig, digit.pos), .choices = "none,sinusoidal,learned"},
    {"causal", CONFIG_INT, offsetof(MultiHeadModelConfig, digit.causal), .lo = 0, .hi = 1},
};
const int MH_MODEL_CONFIG_N = (int)(sizeof MH_MODEL_CONFIG_FIELDS / sizeof MH_MODEL_CONFIG_FIELDS[0]);

int mh_model_create(MultiHeadModel *m, const MultiHeadModelConfig *c, MultiHeadAttention attention, int max_B,
                    uint64_t seed) {
    if (c->H < 1 || c->D_H < 1)
        return fail("heads and head size must be >= 1, got H = %d, D_H = %d", c->H, c->D_H);
    m->spec = (MultiHeadSpec){.D = c->digit.D, .H = c->H, .D_H = c->D_H, .D_out = c->digit.D, .attention = attention};
    return digit_model_create(&m->model, &DIGIT_MULTI_HEAD_ATTENTION, &m->spec, c->H, &c->digit, max_B, seed);
}

void mh_model_free(MultiHeadModel *m) { digit_model_free(&m->model); }

int mh_model_build(Classifier *c, const MultiHeadModelConfig *cfg, MultiHeadAttention attention, int max_B,
                   uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("05_multi_head_attention", "a smaller --batch, --dim, --ff or --len");
    MultiHeadModel *m = xmalloc(sizeof *m);
    if (mh_model_create(m, cfg, attention, max_B, seed) < 0) {
        memory_budget_end();
        mh_model_free(m);
        free(m);
        return -1;
    }
    memory_budget_end();
    digit_model_classifier(&m->model, m, c);      /* its destroy frees the model, then m */
    return 0;
}
