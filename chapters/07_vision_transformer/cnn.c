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

/* ------------------------------------------------------------- the trunk */

static float *floats(size_t n) { return xcalloc(n > 0 ? n : 1, sizeof(float)); }

/* W [out, in, 3, 3]: Glorot uniform with fan-in in 9 and fan-out out 9 (PyTorch's xavier_uniform_ for a conv) */
static void init_filters(float *W, int in, int out, Rng *rng) {
    init_uniform(W, (size_t)out * in * 9, sqrtf(6.0f / (9.0f * (float)(in + out))), rng);
}

int cnn_trunk_declare(CnnTrunk *t, Params *p, int channels, int rows, int cols, int F) {
    memset(t, 0, sizeof *t);
    if (rows % 4 != 0 || cols % 4 != 0)
        return fail("rows=%d cols=%d: expected sides divisible by 4 (two 2 x 2 max-pools)", rows, cols);
    if (F < 1) return fail("filters=%d: expected at least 1", F);
    t->F = F;
    t->conv1 = (Conv2dSpec){channels, rows, cols, F, 3, 1, 1};
    t->pool1 = (MaxPool2dSpec){F, rows, cols, 2, 2};
    t->conv2 = (Conv2dSpec){F, rows / 2, cols / 2, 2 * F, 3, 1, 1};
    t->pool2 = (MaxPool2dSpec){2 * F, rows / 2, cols / 2, 2, 2};
    if (conv2d_check(&t->conv1) < 0 || maxpool2d_check(&t->pool1) < 0 || conv2d_check(&t->conv2) < 0 ||
        maxpool2d_check(&t->pool2) < 0)
        return -1;
    t->n1 = F * rows * cols;
    t->n2 = t->n1 / 4;
    t->n3 = 2 * t->n2;
    t->n4 = t->n3 / 4;
    t->W1 = params_add(p, "conv1.W", 4, (int[]){F, channels, 3, 3});
    t->b1 = params_add(p, "conv1.b", 1, (int[]){F});
    t->W2 = params_add(p, "conv2.W", 4, (int[]){2 * F, F, 3, 3});
    t->b2 = params_add(p, "conv2.b", 1, (int[]){2 * F});
    return 0;
}

void cnn_trunk_init(const CnnTrunk *t, Params *p, Rng *rng) {
    init_filters(params_data(p, t->W1), t->conv1.channels_in, t->F, rng);
    init_filters(params_data(p, t->W2), t->F, 2 * t->F, rng);
}

void cnn_trunk_alloc(CnnTrunk *t, int max_B) {
    const size_t B = (size_t)max_B;
    t->max_B = max_B;
    t->pre1 = floats(B * t->n1);
    t->h1 = floats(B * t->n1);
    t->p1 = floats(B * t->n2);
    t->pre2 = floats(B * t->n3);
    t->h2 = floats(B * t->n3);
    t->p2 = floats(B * t->n4);
    t->arg1 = xcalloc(B * t->n2, sizeof(int));
    t->arg2 = xcalloc(B * t->n4, sizeof(int));
    t->cache1 = floats(conv2d_cache_floats(&t->conv1, max_B));
    t->cache2 = floats(conv2d_cache_floats(&t->conv2, max_B));
    t->scratch2 = floats(conv2d_scratch_floats(&t->conv2));
    t->dh2 = floats(B * t->n3);
    t->dpre2 = floats(B * t->n3);
    t->dp1 = floats(B * t->n2);
    t->dh1 = floats(B * t->n1);
    t->dpre1 = floats(B * t->n1);
}

void cnn_trunk_free(CnnTrunk *t) {
    float *fs[] = {t->pre1, t->h1, t->p1, t->pre2, t->h2, t->p2, t->cache1, t->cache2, t->scratch2,
                   t->dh2, t->dpre2, t->dp1, t->dh1, t->dpre1};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) free(fs[i]);
    free(t->arg1);
    free(t->arg2);
    memset(t, 0, sizeof *t);
}

void cnn_trunk_forward(CnnTrunk *t, Params *p, const float *x, int B) {
    t->B = B;
    conv2d_forward(t->pre1, t->cache1, x, params_data(p, t->W1), params_data(p, t->b1), &t->conv1, B);
    relu_forward(t->h1, t->pre1, B * t->n1);
    maxpool2d_forward(t->p1, t->arg1, t->h1, &t->pool1, B);
    conv2d_forward(t->pre2, t->cache2, t->p1, params_data(p, t->W2), params_data(p, t->b2), &t->conv2, B);
    relu_forward(t->h2, t->pre2, B * t->n3);
    maxpool2d_forward(t->p2, t->arg2, t->h2, &t->pool2, B);
}

void cnn_trunk_backward(CnnTrunk *t, Params *p, const float *dp2) {
    const int B = t->B;
    const size_t n1 = (size_t)B * t->n1, n2 = (size_t)B * t->n2, n3 = (size_t)B * t->n3;
    memset(t->dh2, 0, sizeof(float) * n3);
    maxpool2d_backward(t->dh2, dp2, t->arg2, &t->pool2, B);
    memset(t->dpre2, 0, sizeof(float) * n3);
    relu_backward(t->dpre2, t->dh2, t->pre2, (int)n3);
    memset(t->dp1, 0, sizeof(float) * n2);
    conv2d_backward(t->dp1, params_grad(p, t->W2), params_grad(p, t->b2), t->scratch2, t->dpre2, t->cache2,
                    params_data(p, t->W2), &t->conv2, B);
    memset(t->dh1, 0, sizeof(float) * n1);
    maxpool2d_backward(t->dh1, t->dp1, t->arg1, &t->pool1, B);
    memset(t->dpre1, 0, sizeof(float) * n1);
    relu_backward(t->dpre1, t->dh1, t->pre1, (int)n1);
    conv2d_backward(NULL, params_grad(p, t->W1), params_grad(p, t->b1), NULL, t->dpre1, t->cache1,
                    params_data(p, t->W1), &t->conv1, B);   /* the pixels need no gradient */
}

/* ------------------------------------------------------- the classifier */

typedef struct {
    CnnConfig cfg;
    Params params;
    CnnTrunk trunk;          /* conv1.*, conv2.*: p_2 = trunk.p2 */
    size_t W_out, b_out;
    int B, max_B;
    float *logits, *probs, *dlogits;   /* [max_B, C] */
    float *dp2;              /* [max_B, n4] the gradient of p_2 */
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
    cnn_trunk_free(&m->trunk);
    free(m->logits);
    free(m->probs);
    free(m->dlogits);
    free(m->dp2);
}

static int cnn_create(Cnn *m, const CnnConfig *c, int max_B, uint64_t seed) {
    memset(m, 0, sizeof *m);
    params_init(&m->params);
    if (c->classes < 2) return fail("classes=%d: expected at least 2", c->classes);
    if (max_B < 1) return fail("batch %d: expected at least 1 image", max_B);
    m->cfg = *c;
    m->max_B = max_B;
    Params *p = &m->params;
    if (cnn_trunk_declare(&m->trunk, p, c->channels, c->rows, c->cols, c->filters) < 0) return -1;
    const int n4 = m->trunk.n4;
    m->W_out = params_add(p, "out.W", 2, (int[]){n4, c->classes});
    m->b_out = params_add(p, "out.b", 1, (int[]){c->classes});
    if (params_alloc(p) < 0) return -1;
    Rng rng;
    rng_seed(&rng, seed, 1);
    cnn_trunk_init(&m->trunk, p, &rng);
    init_xavier(params_data(p, m->W_out), n4, c->classes, &rng);
    cnn_trunk_alloc(&m->trunk, max_B);
    const size_t B = (size_t)max_B;
    m->logits = floats(B * c->classes);
    m->probs = floats(B * c->classes);
    m->dlogits = floats(B * c->classes);
    m->dp2 = floats(B * n4);
    return 0;
}

/* x [B, channels, rows, cols] -> logits [B, C]; with targets, the mean cross-entropy. */
static double cnn_forward(Cnn *m, const float *x, const int *targets, int B) {
    Params *p = &m->params;
    const int C = m->cfg.classes;
    m->B = B;
    cnn_trunk_forward(&m->trunk, p, x, B);
    linear_forward(m->logits, m->trunk.p2, params_data(p, m->W_out), params_data(p, m->b_out), B, m->trunk.n4, C);
    if (!targets) return 0.0;
    int counted = 0;
    double sum = cross_entropy_forward(m->probs, m->logits, targets, B, C, -1, &counted);
    return counted ? sum / counted : 0.0;
}

/* After forward: d(mean loss)/d params, added into params.grad; the steps of forward backwards. */
static void cnn_backward(Cnn *m, const int *targets) {
    Params *p = &m->params;
    const int B = m->B, C = m->cfg.classes, n4 = m->trunk.n4;
    memset(m->dlogits, 0, sizeof(float) * (size_t)B * C);
    cross_entropy_backward(m->dlogits, m->probs, targets, B, C, -1, 1.0f / (float)B);
    memset(m->dp2, 0, sizeof(float) * (size_t)B * n4);
    linear_backward(m->dp2, params_grad(p, m->W_out), params_grad(p, m->b_out), m->dlogits, m->trunk.p2,
                    params_data(p, m->W_out), B, n4, C);
    cnn_trunk_backward(&m->trunk, p, m->dp2);
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
