/* multi_head_model.c - chapter 05: multi-head attention as the attention of
 * chapter 04's digit model (see multi_head_model.h). */
#include "05_multi_head_attention/multi_head_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "util/util.h"

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
    MultiHeadWeights w = {get(p, m->attn[l][0]), get(p, m->attn[l][1]), get(p, m->attn[l][2]), NULL};
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

int mh_model_create(MultiHeadModel *m, const DigitModelSizes *s, int H, int D_H,
                    MultiHeadAttention attention, int max_B, uint64_t seed) {
    if (H < 1 || D_H < 1) return fail("heads and head size must be >= 1, got H = %d, D_H = %d", H, D_H);
    m->spec = (MultiHeadSpec){s->D, H, D_H, s->D, attention, 0, 0};
    return digit_model_create(&m->model, &DIGIT_MULTI_HEAD_ATTENTION, &m->spec, H, s, max_B, seed);
}

void mh_model_free(MultiHeadModel *m) { digit_model_free(&m->model); }

void mh_model_config_text(char *out, int cap, const char *task, const DigitModelSizes *s, int H, int D_H,
                          int seed) {
    char extra[64];
    snprintf(extra, sizeof extra, "heads=%d\nhead_dim=%d\n", H, D_H);
    digit_model_config_text(out, cap, MH_MODEL_NAME, task, s, extra, seed);
}

int mh_model_build(Classifier *c, const char *config, MultiHeadAttention attention, int max_B,
                   uint64_t seed) {
    DigitModelSizes s;
    int H, D_H;
    if (digit_model_sizes(config, MH_MODEL_NAME, "chapter 05's digit model", &s) < 0 ||
        config_get_int_in(config, "heads", 1, 1024, &H) < 0 ||
        config_get_int_in(config, "head_dim", 1, 1024, &D_H) < 0)
        return -1;
    MultiHeadModel *m = xmalloc(sizeof *m);
    if (mh_model_create(m, &s, H, D_H, attention, max_B, seed) < 0) {
        mh_model_free(m);
        free(m);
        return -1;
    }
    digit_model_classifier(&m->model, m, c);      /* its destroy frees the model, then m */
    return 0;
}
