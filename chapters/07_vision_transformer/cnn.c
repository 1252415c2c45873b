/* cnn.c - chapter 07's convolutional baseline (cnn.h), built from the
 * layers in common/nn: conv2d.h's convolution and max-pool, layers.h's
 * ReLU, linear and cross-entropy. */
#include "07_vision_transformer/cnn.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nn/conv2d.h"
#include "nn/layers.h"
#include "train/memory.h"
#include "util/error.h"
#include "util/util.h"

typedef struct {
    CnnConfig cfg;
    Params params;
    size_t W1, b1, W2, b2, W_out, b_out;
    Conv2dSpec conv1, conv2;
    MaxPool2dSpec pool1, pool2;
    int n1, n2, n3, n4;      /* floats per image of h_1, p_1, h_2, p_2 */
    int B, max_B;
    float *pre1, *h1, *p1, *pre2, *h2, *p2;   /* [max_B, n1], [max_B, n1], [max_B, n2], ... */
    int *arg1, *arg2;        /* the pools' argmax, [max_B, n2], [max_B, n4] */
    float *cache1, *cache2;  /* the convolutions' column matrices */
    float *scratch2;         /* conv2's backward scratch (conv1 needs none: the pixels get no gradient) */
    float *logits, *probs, *dlogits;            /* [max_B, C] */
    float *dp2, *dh2, *dpre2, *dp1, *dh1, *dpre1;   /* the gradients of p_2, h_2, its pre-activation, ... */
} Cnn;

const ConfigField CNN_CONFIG_FIELDS[] = {
    {"channels", CONFIG_INT, offsetof(CnnConfig, channels), .lo = 1, .hi = 16},
    {"rows", CONFIG_INT, offsetof(CnnConfig, rows), .lo = 4, .hi = 4096},
    {"cols", CONFIG_INT, offsetof(CnnConfig, cols), .lo = 4, .hi = 4096},
    {"filters", CONFIG_INT, offsetof(CnnConfig, filters), .lo = 1, .hi = 1024},
    {"classes", CONFIG_INT, offsetof(CnnConfig, classes), .lo = 2, .hi = 100000},
};
const int CNN_CONFIG_N = (int)(sizeof CNN_CONFIG_FIELDS / sizeof CNN_CONFIG_FIELDS[0]);

static void cnn_free(Cnn *m) {
    params_free(&m->params);
    float *floats[] = {m->pre1, m->h1, m->p1, m->pre2, m->h2, m->p2, m->cache1, m->cache2, m->scratch2,
                       m->logits, m->probs, m->dlogits, m->dp2, m->dh2, m->dpre2, m->dp1, m->dh1, m->dpre1};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) free(floats[i]);
    free(m->arg1);
    free(m->arg2);
}

static float *floats(size_t n) { return xcalloc(n > 0 ? n : 1, sizeof(float)); }

/* W [out, in, 3, 3]: Glorot uniform with fan-in in 9 and fan-out out 9 (PyTorch's xavier_uniform_ for a conv) */
static void init_filters(float *W, int in, int out, Rng *rng) {
    init_uniform(W, (size_t)out * in * 9, sqrtf(6.0f / (9.0f * (float)(in + out))), rng);
}

static int cnn_create(Cnn *m, const CnnConfig *c, int max_B, uint64_t seed) {
    memset(m, 0, sizeof *m);
    params_init(&m->params);
    if (c->rows % 4 != 0 || c->cols % 4 != 0)
        return fail("rows=%d cols=%d: expected sides divisible by 4 (two 2 x 2 max-pools)", c->rows, c->cols);
    if (c->filters < 1) return fail("filters=%d: expected at least 1", c->filters);
    if (c->classes < 2) return fail("classes=%d: expected at least 2", c->classes);
    if (max_B < 1) return fail("batch %d: expected at least 1 image", max_B);
    const int F = c->filters, R = c->rows, S = c->cols;
    m->cfg = *c;
    m->max_B = max_B;
    m->conv1 = (Conv2dSpec){c->channels, R, S, F, 3, 1, 1};
    m->pool1 = (MaxPool2dSpec){F, R, S, 2, 2};
    m->conv2 = (Conv2dSpec){F, R / 2, S / 2, 2 * F, 3, 1, 1};
    m->pool2 = (MaxPool2dSpec){2 * F, R / 2, S / 2, 2, 2};
    if (conv2d_check(&m->conv1) < 0 || maxpool2d_check(&m->pool1) < 0 || conv2d_check(&m->conv2) < 0 ||
        maxpool2d_check(&m->pool2) < 0)
        return -1;
    m->n1 = F * R * S;
    m->n2 = m->n1 / 4;
    m->n3 = 2 * m->n2;
    m->n4 = m->n3 / 4;
    Params *p = &m->params;
    m->W1 = params_add(p, "conv1.W", 4, (int[]){F, c->channels, 3, 3});
    m->b1 = params_add(p, "conv1.b", 1, (int[]){F});
    m->W2 = params_add(p, "conv2.W", 4, (int[]){2 * F, F, 3, 3});
    m->b2 = params_add(p, "conv2.b", 1, (int[]){2 * F});
    m->W_out = params_add(p, "out.W", 2, (int[]){m->n4, c->classes});
    m->b_out = params_add(p, "out.b", 1, (int[]){c->classes});
    if (params_alloc(p) < 0) return -1;
    Rng rng;
    rng_seed(&rng, seed, 1);
    init_filters(params_data(p, m->W1), c->channels, F, &rng);
    init_filters(params_data(p, m->W2), F, 2 * F, &rng);
    init_xavier(params_data(p, m->W_out), m->n4, c->classes, &rng);
    const size_t B = (size_t)max_B;
    m->pre1 = floats(B * m->n1);
    m->h1 = floats(B * m->n1);
    m->p1 = floats(B * m->n2);
    m->pre2 = floats(B * m->n3);
    m->h2 = floats(B * m->n3);
    m->p2 = floats(B * m->n4);
    m->arg1 = xcalloc(B * m->n2, sizeof(int));
    m->arg2 = xcalloc(B * m->n4, sizeof(int));
    m->cache1 = floats(conv2d_cache_floats(&m->conv1, max_B));
    m->cache2 = floats(conv2d_cache_floats(&m->conv2, max_B));
    m->scratch2 = floats(conv2d_scratch_floats(&m->conv2));
    m->logits = floats(B * c->classes);
    m->probs = floats(B * c->classes);
    m->dlogits = floats(B * c->classes);
    m->dp2 = floats(B * m->n4);
    m->dh2 = floats(B * m->n3);
    m->dpre2 = floats(B * m->n3);
    m->dp1 = floats(B * m->n2);
    m->dh1 = floats(B * m->n1);
    m->dpre1 = floats(B * m->n1);
    return 0;
}

/* x [B, channels, rows, cols] -> logits [B, C]; with targets, the mean cross-entropy. */
static double cnn_forward(Cnn *m, const float *x, const int *targets, int B) {
    Params *p = &m->params;
    const int C = m->cfg.classes;
    m->B = B;
    conv2d_forward(m->pre1, m->cache1, x, params_data(p, m->W1), params_data(p, m->b1), &m->conv1, B);
    relu_forward(m->h1, m->pre1, B * m->n1);
    maxpool2d_forward(m->p1, m->arg1, m->h1, &m->pool1, B);
    conv2d_forward(m->pre2, m->cache2, m->p1, params_data(p, m->W2), params_data(p, m->b2), &m->conv2, B);
    relu_forward(m->h2, m->pre2, B * m->n3);
    maxpool2d_forward(m->p2, m->arg2, m->h2, &m->pool2, B);
    linear_forward(m->logits, m->p2, params_data(p, m->W_out), params_data(p, m->b_out), B, m->n4, C);
    if (!targets) return 0.0;
    int counted = 0;
    double sum = cross_entropy_forward(m->probs, m->logits, targets, B, C, -1, &counted);
    return counted ? sum / counted : 0.0;
}

/* After forward: d(mean loss)/d params, added into params.grad; the steps of forward backwards. */
static void cnn_backward(Cnn *m, const int *targets) {
    Params *p = &m->params;
    const int B = m->B, C = m->cfg.classes;
    memset(m->dlogits, 0, sizeof(float) * (size_t)B * C);
    cross_entropy_backward(m->dlogits, m->probs, targets, B, C, -1, 1.0f / (float)B);
    const size_t n1 = (size_t)B * m->n1, n2 = (size_t)B * m->n2, n3 = (size_t)B * m->n3, n4 = (size_t)B * m->n4;
    memset(m->dp2, 0, sizeof(float) * n4);
    linear_backward(m->dp2, params_grad(p, m->W_out), params_grad(p, m->b_out), m->dlogits, m->p2,
                    params_data(p, m->W_out), B, m->n4, C);
    memset(m->dh2, 0, sizeof(float) * n3);
    maxpool2d_backward(m->dh2, m->dp2, m->arg2, &m->pool2, B);
    memset(m->dpre2, 0, sizeof(float) * n3);
    relu_backward(m->dpre2, m->dh2, m->pre2, (int)n3);
    memset(m->dp1, 0, sizeof(float) * n2);
    conv2d_backward(m->dp1, params_grad(p, m->W2), params_grad(p, m->b2), m->scratch2, m->dpre2, m->cache2,
                    params_data(p, m->W2), &m->conv2, B);
    memset(m->dh1, 0, sizeof(float) * n1);
    maxpool2d_backward(m->dh1, m->dp1, m->arg1, &m->pool1, B);
    memset(m->dpre1, 0, sizeof(float) * n1);
    relu_backward(m->dpre1, m->dh1, m->pre1, (int)n1);
    conv2d_backward(NULL, params_grad(p, m->W1), params_grad(p, m->b1), NULL, m->dpre1, m->cache1,
                    params_data(p, m->W1), &m->conv1, B);   /* the pixels need no gradient */
}

/* ---------------------------------------------------- the Classifier face */

static double face_forward(void *self, const Examples *e) { return cnn_forward(self, e->values, e->targets, e->B); }
static void face_backward(void *self, const Examples *e) { cnn_backward(self, e->targets); }
static void face_predict(void *self, int *pred) {
    const Cnn *m = self;
    const int C = m->cfg.classes;
    for (int b = 0; b < m->B; b++) {
        const float *z = m->logits + (size_t)b * C;
        int best = 0;
        for (int c = 1; c < C; c++) if (z[c] > z[best]) best = c;
        pred[b] = best;
    }
}
static const float *face_logits(void *self) { return ((Cnn *)self)->logits; }
static void face_destroy(void *self) {
    cnn_free(self);
    free(self);
}

int cnn_build(Classifier *c, const CnnConfig *cfg, int max_B, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("07_cnn", "a smaller --batch or --filters");
    Cnn *m = xmalloc(sizeof *m);
    if (cnn_create(m, cfg, max_B, seed) < 0) {
        memory_budget_end();
        cnn_free(m);
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
