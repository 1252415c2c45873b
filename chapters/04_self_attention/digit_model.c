/* digit_model.c - chapter 04's small self-attention model for the digit
 * tasks, with its hand-written backward pass, and its face for the driver
 * (see digit_model.h). */
#include "04_self_attention/digit_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/self_attention.h"
#include "data/digit_tasks.h"
#include "nn/layers.h"
#include "util/error.h"
#include "util/util.h"
#include "train/memory.h"

const char *pos_type_name(PosType p) {
    static const char *const names[POS_N_TYPES] = {"none", "sinusoidal", "learned"};
    return (p >= 0 && p < POS_N_TYPES) ? names[p] : "?";
}

/* The checkpoint's lines (digit_model.h); pos's choices in PosType's order. */
const ConfigField DIGIT_CONFIG_FIELDS[] = {
    {"len", CONFIG_INT, offsetof(DigitConfig, N), .lo = 2, .hi = 64},
    {"dim", CONFIG_INT, offsetof(DigitConfig, D), .lo = 2, .hi = 1024},
    {"ff", CONFIG_INT, offsetof(DigitConfig, F), .lo = 1, .hi = 4096, .old_key = "hidden"},
    {"layers", CONFIG_INT, offsetof(DigitConfig, L), .lo = 1, .hi = DIGIT_MAX_LAYERS},
    {"classes", CONFIG_INT, offsetof(DigitConfig, C), .lo = 1, .hi = 4096},
    {"pos", CONFIG_CHOICE, offsetof(DigitConfig, pos), .choices = "none,sinusoidal,learned"},
    {"causal", CONFIG_INT, offsetof(DigitConfig, causal), .lo = 0, .hi = 1},
};
const int DIGIT_CONFIG_N = (int)(sizeof DIGIT_CONFIG_FIELDS / sizeof DIGIT_CONFIG_FIELDS[0]);

int pos_type_from_name(const char *name, PosType *p) {
    for (int i = 0; i < POS_N_TYPES; i++)
        if (strcmp(name, pos_type_name((PosType)i)) == 0) {
            *p = (PosType)i;
            return 0;
        }
    return fail("pos: expected one of none, sinusoidal, learned, got '%s'", name);
}

/* --------------------------------------- chapter 04's attention: one head */

static void self_attention_declare(DigitModel *m, int l) {
    static const char *const names[3] = {"W_Q", "W_K", "W_V"};
    for (int k = 0; k < 3; k++) {
        char name[PARAMS_NAME_LEN];
        snprintf(name, sizeof name, "layer%d.%s", l, names[k]);
        m->attn[l][k] = params_add(&m->params, name, 2, (int[]){m->D, m->D});
    }
}

static void self_attention_init(DigitModel *m, int l, Rng *rng) {
    for (int k = 0; k < 3; k++) init_xavier(params_data(&m->params, m->attn[l][k]), m->D, m->D, rng);
}

static size_t self_attention_weights_floats(const DigitModel *m, int B) { return (size_t)B * m->N * m->N; }
static size_t sa_cache_floats(const DigitModel *m, int B) { return self_attention_cache_floats(B, m->N, m->D); }
static size_t sa_scratch_floats(const DigitModel *m, int B) {
    return self_attention_scratch_floats(B, m->N, m->D);
}

/* Layer l's W_Q, W_K, W_V (grad = 1: their gradients). */
static SelfAttentionWeights self_attention_weights(const DigitModel *m, int l, int grad) {
    Params *p = (Params *)&m->params;
    float *(*get)(Params *, size_t) = grad ? params_grad : params_data;
    SelfAttentionWeights w = {get(p, m->attn[l][0]), get(p, m->attn[l][1]), get(p, m->attn[l][2])};
    return w;
}

static void self_attention_layer_forward(const DigitModel *m, int l, float *Y, float *A, float *cache,
                                         const float *X, int B) {
    SelfAttentionWeights w = self_attention_weights(m, l, 0);
    self_attention_forward(Y, A, cache, X, &w, m->causal, NULL, B, m->N, m->D, m->D);
}

static void self_attention_layer_backward(DigitModel *m, int l, float *dX, float *scratch, const float *dY,
                                          const float *A, const float *cache, const float *X, int B) {
    SelfAttentionWeights w = self_attention_weights(m, l, 0), dw = self_attention_weights(m, l, 1);
    self_attention_backward(dX, &dw, scratch, dY, A, cache, X, &w, B, m->N, m->D, m->D);
}

const DigitAttention DIGIT_SELF_ATTENTION = {
    DIGIT_MODEL_NAME, self_attention_declare, self_attention_init, self_attention_weights_floats,
    sa_cache_floats, sa_scratch_floats, self_attention_layer_forward, self_attention_layer_backward,
};

/* ------------------------------------------------------------------- model */

/* "layer<l>.<name>", a matrix [rows, cols] or (cols == 0) a vector [rows]. */
static size_t declare_layer_tensor(Params *p, int l, const char *name, int rows, int cols) {
    char full[PARAMS_NAME_LEN];
    snprintf(full, sizeof full, "layer%d.%s", l, name);
    int dims[2] = {rows, cols};
    return params_add(p, full, cols ? 2 : 1, dims);
}

int digit_model_create(DigitModel *m, const DigitAttention *attention, const void *spec, int heads,
                       const DigitConfig *c, int max_B, uint64_t seed) {
    const int N = c->N, D = c->D, F = c->F, L = c->L, C = c->C;
    if (L < 1 || L > DIGIT_MAX_LAYERS) return fail("layers: expected 1..%d, got %d", DIGIT_MAX_LAYERS, L);
    if (c->pos < 0 || c->pos >= POS_N_TYPES)
        return fail("pos %d: expected none, sinusoidal or learned positions", (int)c->pos);
    memset(m, 0, sizeof *m);
    m->N = N; m->D = D; m->F = F; m->L = L; m->C = C;
    m->pos = c->pos; m->causal = c->causal; m->max_B = max_B;
    m->heads = heads; m->attention = attention; m->attention_spec = spec;

    Params *p = &m->params;
    params_init(p);
    m->emb = params_add(p, "emb", 2, (int[]){DIGIT_VOCAB, D});
    if (m->pos == POS_LEARNED) m->pos_table = params_add(p, "pos", 2, (int[]){N, D});
    for (int l = 0; l < L; l++) {
        attention->declare(m, l);
        m->W_1[l] = declare_layer_tensor(p, l, "W_1", D, F);
        m->b_1[l] = declare_layer_tensor(p, l, "b_1", F, 0);
        m->W_2[l] = declare_layer_tensor(p, l, "W_2", F, D);
        m->b_2[l] = declare_layer_tensor(p, l, "b_2", D, 0);
    }
    m->W_out = params_add(p, "W_out", 2, (int[]){D, C});
    m->b_out = params_add(p, "b_out", 1, (int[]){C});
    if (params_alloc(p) != 0) return -1;

    /* Embeddings ~ N(0, 1/2): the same per-entry size as a sinusoid. */
    Rng rng;
    rng_seed(&rng, seed, 4);
    init_normal(params_data(p, m->emb), (size_t)DIGIT_VOCAB * D, 0.7f, &rng);
    if (m->pos == POS_LEARNED) init_normal(params_data(p, m->pos_table), (size_t)N * D, 0.7f, &rng);
    for (int l = 0; l < L; l++) {
        attention->init(m, l, &rng);
        init_xavier(params_data(p, m->W_1[l]), D, F, &rng);
        init_xavier(params_data(p, m->W_2[l]), F, D, &rng);
    }
    init_xavier(params_data(p, m->W_out), D, C, &rng);

    /* activations, allocated once for batches of up to max_B */
    const size_t R = (size_t)max_B * N;     /* rows: one per position */
    m->P_sin = xcalloc((size_t)N * D, sizeof(float));
    positional_encoding_sinusoidal(m->P_sin, N, D);
    m->X = xcalloc((L + 1) * R * D, sizeof(float));
    m->Z = xcalloc(L * R * D, sizeof(float));
    m->Y_attn = xcalloc(L * R * D, sizeof(float));
    m->A = xcalloc(L * attention->weights_floats(m, max_B), sizeof(float));   /* 0 floats with fused attention */
    m->attn_cache = xcalloc(L * attention->cache_floats(m, max_B), sizeof(float));
    m->pre = xcalloc(L * R * F, sizeof(float));
    m->act = xcalloc(L * R * F, sizeof(float));
    m->logits = xcalloc(R * C, sizeof(float));
    m->probs = xcalloc(R * C, sizeof(float));
    m->dlogits = xcalloc(R * C, sizeof(float));
    m->dX = xcalloc(R * D, sizeof(float));
    m->dZ = xcalloc(R * D, sizeof(float));
    m->dpre = xcalloc(R * F, sizeof(float));
    m->dact = xcalloc(R * F, sizeof(float));
    m->attn_scratch = xcalloc(attention->scratch_floats(m, max_B), sizeof(float));
    return 0;
}

void digit_model_free(DigitModel *m) {
    params_free(&m->params);
    float *buffers[] = {m->P_sin, m->X, m->Z, m->Y_attn, m->A, m->attn_cache, m->pre, m->act,
                        m->logits, m->probs, m->dlogits, m->dX, m->dZ, m->dpre, m->dact, m->attn_scratch};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------- forward and backward */

/* x [B, N] (, y [B, N]) -> logits [B*N, C], mean loss */
double digit_model_forward(DigitModel *m, const int *x, const int *y, int B) {
    Params *p = &m->params;
    const int N = m->N, D = m->D, F = m->F, C = m->C, R = B * N;
    const size_t RD = (size_t)R * D, RF = (size_t)R * F;
    const size_t A_stride = m->attention->weights_floats(m, m->max_B);
    const size_t cache_stride = m->attention->cache_floats(m, m->max_B);
    m->B = B;

    /* X_0 = embed(x) + P */
    embedding_forward(m->X, x, params_data(p, m->emb), R, D);
    if (m->pos != POS_NONE)
        add_positional_encoding(m->X, m->pos == POS_LEARNED ? params_data(p, m->pos_table) : m->P_sin, B, N, D);

    for (int l = 0; l < m->L; l++) {
        const float *X_in = m->X + l * RD;
        float *X_out = m->X + (l + 1) * RD, *Z = m->Z + l * RD, *Y = m->Y_attn + l * RD;
        float *pre = m->pre + l * RF, *act = m->act + l * RF;
        /* Z = X + Attention(X) */
        m->attention->forward(m, l, Y, m->A + l * A_stride, m->attn_cache + l * cache_stride, X_in, B);
        for (size_t i = 0; i < RD; i++) Z[i] = X_in[i] + Y[i];
        /* X_out = Z + relu(Z W_1 + b_1) W_2 + b_2 */
        linear_forward(pre, Z, params_data(p, m->W_1[l]), params_data(p, m->b_1[l]), R, D, F);
        relu_forward(act, pre, R * F);
        linear_forward(X_out, act, params_data(p, m->W_2[l]), params_data(p, m->b_2[l]), R, F, D);
        for (size_t i = 0; i < RD; i++) X_out[i] += Z[i];
    }
    /* logits = X_L W_out + b_out, and the mean cross-entropy */
    linear_forward(m->logits, m->X + m->L * RD, params_data(p, m->W_out), params_data(p, m->b_out), R, D, C);
    if (y == NULL) return 0.0;
    int counted = 0;
    double loss = cross_entropy_forward(m->probs, m->logits, y, R, C, -1, &counted);
    return loss / counted;
}

void digit_model_backward(DigitModel *m, const int *x, const int *y) {
    Params *p = &m->params;
    const int B = m->B, N = m->N, D = m->D, F = m->F, C = m->C, R = B * N;
    const size_t RD = (size_t)R * D, RF = (size_t)R * F;
    const size_t A_stride = m->attention->weights_floats(m, m->max_B);
    const size_t cache_stride = m->attention->cache_floats(m, m->max_B);

    /* dX = dL/dX_L, through the cross-entropy and W_out */
    memset(m->dlogits, 0, sizeof(float) * (size_t)R * C);
    cross_entropy_backward(m->dlogits, m->probs, y, R, C, -1, 1.0f / (float)R);
    memset(m->dX, 0, sizeof(float) * RD);
    linear_backward(m->dX, params_grad(p, m->W_out), params_grad(p, m->b_out), m->dlogits, m->X + m->L * RD,
                    params_data(p, m->W_out), R, D, C);

    for (int l = m->L - 1; l >= 0; l--) {
        const float *X_in = m->X + l * RD, *Z = m->Z + l * RD;
        const float *pre = m->pre + l * RF, *act = m->act + l * RF;
        /* X_out = Z + MLP(Z): dZ = dX_out + MLP'(dX_out) */
        memcpy(m->dZ, m->dX, sizeof(float) * RD);                 /* the residual path */
        memset(m->dact, 0, sizeof(float) * RF);
        memset(m->dpre, 0, sizeof(float) * RF);
        linear_backward(m->dact, params_grad(p, m->W_2[l]), params_grad(p, m->b_2[l]), m->dX, act,
                        params_data(p, m->W_2[l]), R, F, D);
        relu_backward(m->dpre, m->dact, pre, R * F);
        linear_backward(m->dZ, params_grad(p, m->W_1[l]), params_grad(p, m->b_1[l]), m->dpre, Z,
                        params_data(p, m->W_1[l]), R, D, F);
        /* Z = X_in + Attention(X_in): dX_in = dZ + Attention'(dZ) */
        memcpy(m->dX, m->dZ, sizeof(float) * RD);
        m->attention->backward(m, l, m->dX, m->attn_scratch, m->dZ, m->A + l * A_stride,
                               m->attn_cache + l * cache_stride, X_in, B);
    }
    /* X_0 = embed(x) + P */
    if (m->pos == POS_LEARNED) add_positional_encoding_backward(params_grad(p, m->pos_table), m->dX, B, N, D);
    embedding_backward(params_grad(p, m->emb), m->dX, x, R, D);
}

void digit_model_predict(const DigitModel *m, int *pred) {
    for (int r = 0; r < m->B * m->N; r++) {
        const float *z = m->logits + (size_t)r * m->C;
        int best = 0;
        for (int c = 1; c < m->C; c++) if (z[c] > z[best]) best = c;
        pred[r] = best;
    }
}

/* A of layer l holds [max_B, heads, N, N]; the last forward filled its first B sequences */
const float *digit_model_attention(const DigitModel *m, int l, int h, int b) {
    const size_t stride = m->attention->weights_floats(m, m->max_B);
    if (stride == 0) return NULL;
    return m->A + l * stride + ((size_t)b * m->heads + h) * m->N * m->N;
}

/* ------------------------------------------------ the Classifier face */

/* The Classifier face: a DigitModel, and the allocation it lives in. */
typedef struct {
    DigitModel *m;
    void *allocation;
} DigitFace;

static double face_forward(void *self, const Examples *e) {
    return digit_model_forward(((DigitFace *)self)->m, e->tokens, e->targets, e->B);
}
static void face_backward(void *self, const Examples *e) {
    digit_model_backward(((DigitFace *)self)->m, e->tokens, e->targets);
}
static void face_predict(void *self, int *pred) { digit_model_predict(((DigitFace *)self)->m, pred); }
static const float *face_logits(void *self) { return ((DigitFace *)self)->m->logits; }
static const float *face_attention(void *self, int l, int h, int b) {
    return digit_model_attention(((DigitFace *)self)->m, l, h, b);
}
static void face_destroy(void *self) {
    DigitFace *f = self;
    digit_model_free(f->m);
    free(f->allocation);
    free(f);
}

void digit_model_classifier(DigitModel *m, void *allocation, Classifier *c) {
    DigitFace *f = xmalloc(sizeof *f);
    f->m = m;
    f->allocation = allocation;
    memset(c, 0, sizeof *c);
    c->self = f;
    c->params = &m->params;
    c->max_B = m->max_B;
    c->n_out = m->N;
    c->classes = m->C;
    c->layers = m->L;
    c->heads = m->heads;
    c->forward = face_forward;
    c->backward = face_backward;
    c->predict = face_predict;
    c->logits = face_logits;
    c->attention = face_attention;
    c->destroy = face_destroy;
}

int digit_model_build(Classifier *c, const DigitConfig *cfg, int max_B, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("04_self_attention", "a smaller --batch, --dim, --ff or --len");
    DigitModel *m = xmalloc(sizeof *m);
    if (digit_model_create(m, &DIGIT_SELF_ATTENTION, NULL, 1, cfg, max_B, seed) < 0) {
        memory_budget_end();
        digit_model_free(m);
        free(m);
        return -1;
    }
    memory_budget_end();
    digit_model_classifier(m, m, c);
    return 0;
}
