/* multi_head_model.c - chapter 05: the "neighbours" task and chapter 04's
 * digit model with multi-head attention, with its hand-written backward pass
 * (see multi_head_model.h). */
#include "05_multi_head_attention/multi_head_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/self_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"

/* x [N] -> y [N] */
static void neighbour_targets(const int *x, int *y, int N) {
    for (int i = 0; i < N; i++) {
        int left = x[(i + N - 1) % N], right = x[(i + 1) % N];
        y[i] = DIGIT_VOCAB * left + right;      /* the two-digit number "left right" */
    }
}

/* x [N] -> y [N] */
static void count_next_targets(const int *x, int *y, int N) {
    int histogram[DIGIT_VOCAB] = {0};
    for (int i = 0; i < N; i++) histogram[x[i]]++;
    for (int i = 0; i < N; i++)       /* the two-digit number "count next" */
        y[i] = DIGIT_VOCAB * histogram[x[i]] + x[(i + 1) % N];
}

/* x [B, N] -> y [B, N] */
void neighbour_task_batch(int *x, int *y, int B, int N, Rng *rng) {
    for (int b = 0; b < B; b++) {
        int *xs = x + (size_t)b * N;
        for (int i = 0; i < N; i++) xs[i] = (int)rng_below(rng, DIGIT_VOCAB);
        neighbour_targets(xs, y + (size_t)b * N, N);
    }
}

/* x [B, N] -> y [B, N] */
void count_next_task_batch(int *x, int *y, int B, int N, Rng *rng) {
    for (int b = 0; b < B; b++) {
        int *xs = x + (size_t)b * N;
        for (int i = 0; i < N; i++) xs[i] = (int)rng_below(rng, DIGIT_VOCAB);
        count_next_targets(xs, y + (size_t)b * N, N);
    }
}

int count_next_classes(int N) { return DIGIT_VOCAB * (N + 1); }

/* ---------------------------------------------- every task, by name */

void mh_task_batch(const char *task, int *x, int *y, int B, int N, Rng *rng) {
    DigitTask t = TASK_REVERSE;
    if (strcmp(task, "neighbours") == 0) neighbour_task_batch(x, y, B, N, rng);
    else if (strcmp(task, "count_next") == 0) count_next_task_batch(x, y, B, N, rng);
    else if (digit_task_from_name(task, &t) == 0) digit_task_batch(t, x, y, B, N, rng);
}

void mh_task_targets(const char *task, const int *x, int *y, int N) {
    DigitTask t = TASK_REVERSE;
    if (strcmp(task, "neighbours") == 0) neighbour_targets(x, y, N);
    else if (strcmp(task, "count_next") == 0) count_next_targets(x, y, N);
    else if (digit_task_from_name(task, &t) == 0) digit_task_targets(t, x, y, N);
}

int mh_task_classes(const char *task, int N) {
    DigitTask t = TASK_REVERSE;
    if (strcmp(task, "neighbours") == 0) return NEIGHBOUR_CLASSES;
    if (strcmp(task, "count_next") == 0) return count_next_classes(N);
    if (digit_task_from_name(task, &t) == 0) return digit_task_classes(t, N);
    return fail("task: expected one of count_next, neighbours, reverse, sort, count, got '%s'", task);
}

/* "layer<l>.<name>", a matrix [rows, cols] or (cols == 0) a vector [rows]. */
static size_t declare_layer_tensor(Params *p, int l, const char *name, int rows, int cols) {
    char full[PARAMS_NAME_LEN];
    snprintf(full, sizeof full, "layer%d.%s", l, name);
    int dims[2] = {rows, cols};
    return params_add(p, full, cols ? 2 : 1, dims);
}

static MultiHeadSpec layer_spec(const MultiHeadModel *m) {
    MultiHeadSpec s = {m->D, m->H, m->D_H, m->D, m->attention};
    return s;
}

int mh_model_create(MultiHeadModel *m, int N, int D, int H, int D_H, int F, int L, int C,
                    PosType pos, int causal, MultiHeadAttention attention, int max_B, uint64_t seed) {
    if (L < 1 || L > MH_MAX_LAYERS) return fail("layers: expected 1..%d, got %d", MH_MAX_LAYERS, L);
    if (H < 1 || D_H < 1) return fail("heads and head size must be >= 1, got H = %d, D_H = %d", H, D_H);
    memset(m, 0, sizeof *m);
    m->N = N; m->D = D; m->H = H; m->D_H = D_H; m->F = F; m->L = L; m->C = C;
    m->pos = pos; m->causal = causal; m->attention = attention; m->max_B = max_B;
    const int HD = H * D_H;

    Params *p = &m->params;
    params_init(p);
    m->emb = params_add(p, "emb", 2, (int[]){DIGIT_VOCAB, D});
    if (pos == POS_LEARNED) m->pos_table = params_add(p, "pos", 2, (int[]){N, D});
    for (int l = 0; l < L; l++) {
        m->W_QKV[l] = declare_layer_tensor(p, l, "W_QKV", D, 3 * HD);
        m->W_O[l] = declare_layer_tensor(p, l, "W_O", HD, D);
        m->b_O[l] = declare_layer_tensor(p, l, "b_O", D, 0);
        m->W_1[l] = declare_layer_tensor(p, l, "W_1", D, F);
        m->b_1[l] = declare_layer_tensor(p, l, "b_1", F, 0);
        m->W_2[l] = declare_layer_tensor(p, l, "W_2", F, D);
        m->b_2[l] = declare_layer_tensor(p, l, "b_2", D, 0);
    }
    m->W_out = params_add(p, "W_out", 2, (int[]){D, C});
    m->b_out = params_add(p, "b_out", 1, (int[]){C});
    if (params_alloc(p) != 0) return -1;

    /* the same initial values as chapter 04's model */
    Rng rng;
    rng_seed(&rng, seed, 4);
    init_normal(params_data(p, m->emb), (size_t)DIGIT_VOCAB * D, 0.7f, &rng);
    if (pos == POS_LEARNED) init_normal(params_data(p, m->pos_table), (size_t)N * D, 0.7f, &rng);
    const MultiHeadSpec s = layer_spec(m);
    for (int l = 0; l < L; l++) {
        MultiHeadWeights w = {params_data(p, m->W_QKV[l]), params_data(p, m->W_O[l]),
                              params_data(p, m->b_O[l])};
        multi_head_init(&s, &w, &rng);
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
    m->attn_out = xcalloc(L * R * D, sizeof(float));
    m->A = xcalloc(L * multi_head_attention_floats(&s, max_B, N), sizeof(float));
    m->mh_cache = xcalloc(L * multi_head_cache_floats(&s, max_B, N), sizeof(float));
    m->pre = xcalloc(L * R * F, sizeof(float));
    m->act = xcalloc(L * R * F, sizeof(float));
    m->logits = xcalloc(R * C, sizeof(float));
    m->probs = xcalloc(R * C, sizeof(float));
    m->dlogits = xcalloc(R * C, sizeof(float));
    m->dX = xcalloc(R * D, sizeof(float));
    m->dZ = xcalloc(R * D, sizeof(float));
    m->dpre = xcalloc(R * F, sizeof(float));
    m->dact = xcalloc(R * F, sizeof(float));
    m->mh_scratch = xcalloc(multi_head_scratch_floats(&s, max_B, N), sizeof(float));
    return 0;
}

void mh_model_free(MultiHeadModel *m) {
    params_free(&m->params);
    float *buffers[] = {m->P_sin, m->X, m->Z, m->attn_out, m->A, m->mh_cache, m->pre, m->act,
                        m->logits, m->probs, m->dlogits, m->dX, m->dZ, m->dpre, m->dact,
                        m->mh_scratch};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    memset(m, 0, sizeof *m);
}

/* One layer's multi-head weights (grad = 1: their gradients). */
static MultiHeadWeights layer_weights(Params *p, const MultiHeadModel *m, int l, int grad) {
    MultiHeadWeights w;
    w.W_QKV = grad ? params_grad(p, m->W_QKV[l]) : params_data(p, m->W_QKV[l]);
    w.W_O = grad ? params_grad(p, m->W_O[l]) : params_data(p, m->W_O[l]);
    w.b_O = grad ? params_grad(p, m->b_O[l]) : params_data(p, m->b_O[l]);
    return w;
}

/* x [B, N] (, y [B, N]) -> logits [B*N, C], mean loss */
double mh_model_forward(MultiHeadModel *m, const int *x, const int *y, int B) {
    Params *p = &m->params;
    const int N = m->N, D = m->D, F = m->F, C = m->C, R = B * N;
    const size_t RD = (size_t)R * D, RF = (size_t)R * F;
    const MultiHeadSpec s = layer_spec(m);
    const size_t cache_stride = multi_head_cache_floats(&s, m->max_B, N);
    const size_t A_stride = multi_head_attention_floats(&s, m->max_B, N);
    m->B = B;

    /* X_0 = embed(x) + P */
    digit_input_forward(m->X, x, params_data(p, m->emb), m->pos,
                        m->pos == POS_LEARNED ? params_data(p, m->pos_table) : m->P_sin, B, N, D);

    for (int l = 0; l < m->L; l++) {
        const float *X_in = m->X + l * RD;
        float *X_out = m->X + (l + 1) * RD, *Z = m->Z + l * RD, *att = m->attn_out + l * RD;
        float *pre = m->pre + l * RF, *act = m->act + l * RF;
        MultiHeadWeights w = layer_weights(p, m, l, 0);
        /* Z = X + MultiHead(X) */
        multi_head_forward(att, m->A + l * A_stride, m->mh_cache + l * cache_stride, X_in, &s, &w,
                           m->causal, NULL, B, N);
        for (size_t i = 0; i < RD; i++) Z[i] = X_in[i] + att[i];
        /* X_out = Z + relu(Z W_1 + b_1) W_2 + b_2: chapter 04's residual MLP */
        residual_mlp_forward(X_out, pre, act, Z, params_data(p, m->W_1[l]), params_data(p, m->b_1[l]),
                             params_data(p, m->W_2[l]), params_data(p, m->b_2[l]), R, D, F);
    }
    return digit_head_forward(m->logits, m->probs, m->X + m->L * RD, params_data(p, m->W_out),
                              params_data(p, m->b_out), y, R, D, C);
}

void mh_model_backward(MultiHeadModel *m, const int *x, const int *y) {
    Params *p = &m->params;
    const int B = m->B, N = m->N, D = m->D, F = m->F, C = m->C, R = B * N;
    const size_t RD = (size_t)R * D, RF = (size_t)R * F;
    const MultiHeadSpec s = layer_spec(m);
    const size_t cache_stride = multi_head_cache_floats(&s, m->max_B, N);
    const size_t A_stride = multi_head_attention_floats(&s, m->max_B, N);

    /* dX = dL/dX_L */
    digit_head_backward(m->dX, params_grad(p, m->W_out), params_grad(p, m->b_out), m->dlogits, m->probs,
                        y, m->X + m->L * RD, params_data(p, m->W_out), R, D, C);

    for (int l = m->L - 1; l >= 0; l--) {
        const float *X_in = m->X + l * RD, *Z = m->Z + l * RD;
        const float *pre = m->pre + l * RF, *act = m->act + l * RF;
        /* X_out = Z + MLP(Z): dZ = dX_out + MLP'(dX_out) */
        residual_mlp_backward(m->dZ, m->dpre, m->dact, params_grad(p, m->W_1[l]), params_grad(p, m->b_1[l]),
                              params_grad(p, m->W_2[l]), params_grad(p, m->b_2[l]), m->dX, Z, pre, act,
                              params_data(p, m->W_1[l]), params_data(p, m->W_2[l]), R, D, F);
        /* Z = X_in + MultiHead(X_in): dX_in = dZ + MultiHead'(dZ) */
        memcpy(m->dX, m->dZ, sizeof(float) * RD);
        MultiHeadWeights w = layer_weights(p, m, l, 0), dw = layer_weights(p, m, l, 1);
        multi_head_backward(m->dX, &dw, m->mh_scratch, m->dZ, m->A + l * A_stride,
                            m->mh_cache + l * cache_stride, X_in, &s, &w, m->causal, NULL, B, N);
    }
    /* X_0 = embed(x) + P */
    digit_input_backward(params_grad(p, m->emb), m->pos == POS_LEARNED ? params_grad(p, m->pos_table) : NULL,
                         m->dX, x, m->pos, B, N, D);
}

void mh_model_predict(const MultiHeadModel *m, int *pred) {
    digit_argmax(m->logits, m->B * m->N, m->C, pred);
}

/* A of layer l is [max_B, H, N, N]; the last forward filled its first B sequences */
const float *mh_model_attention(const MultiHeadModel *m, int l, int h, int b) {
    const MultiHeadSpec s = layer_spec(m);
    return m->A + l * multi_head_attention_floats(&s, m->max_B, m->N) +
           ((size_t)b * m->H + h) * m->N * m->N;
}

/* ------------------------------------------------------------- checkpoints */

int mh_model_save(const MultiHeadModel *m, const char *task, int seed, const char *path) {
    char config[512];
    snprintf(config, sizeof config,
             "model=%s\ntask=%s\nlen=%d\ndim=%d\nheads=%d\nhead_dim=%d\nhidden=%d\nlayers=%d\n"
             "classes=%d\npos=%s\ncausal=%d\nseed=%d\n",
             MH_MODEL_NAME, task, m->N, m->D, m->H, m->D_H, m->F, m->L, m->C, pos_type_name(m->pos),
             m->causal, seed);
    return checkpoint_save(path, config, &m->params);
}

/* Config key -> int in [lo, hi]. */
static int config_int_in(const char *config, const char *key, int lo, int hi, int *out) {
    if (config_get_int(config, key, out) < 0) return -1;
    if (*out < lo || *out > hi) return fail("config key '%s': expected %d..%d, got %d", key, lo, hi, *out);
    return 0;
}

/* Everything of mh_model_load but the "<path>: " prefix on errors. */
static int load_from_config(MultiHeadModel *m, const char *config, int max_B,
                            MultiHeadAttention attention, char *task, int task_cap, int *seed) {
    char model[64], pos_name[32];
    if (config_get(config, "model", model, sizeof model) < 0) return -1;
    if (strcmp(model, MH_MODEL_NAME) != 0)
        return fail("a checkpoint of model '%s', but this program loads '%s' (chapter 05's digit model)",
                    model, MH_MODEL_NAME);
    int N, D, H, D_H, F, L, C, causal;
    PosType pos = POS_NONE;
    if (config_get(config, "task", task, task_cap) < 0 ||
        config_get(config, "pos", pos_name, sizeof pos_name) < 0 || pos_type_from_name(pos_name, &pos) < 0 ||
        config_int_in(config, "len", 3, 64, &N) < 0 || config_int_in(config, "dim", 2, 1024, &D) < 0 ||
        config_int_in(config, "heads", 1, 1024, &H) < 0 || config_int_in(config, "head_dim", 1, 1024, &D_H) < 0 ||
        config_int_in(config, "hidden", 1, 4096, &F) < 0 ||
        config_int_in(config, "layers", 1, MH_MAX_LAYERS, &L) < 0 ||
        config_int_in(config, "classes", 1, 4096, &C) < 0 || config_int_in(config, "causal", 0, 1, &causal) < 0 ||
        config_int_in(config, "seed", 0, 2147483647, seed) < 0)
        return -1;
    int classes = mh_task_classes(task, N);
    if (classes < 0) return -1;
    if (C != classes) return fail("config: %d classes, but task '%s' with length %d has %d", C, task, N, classes);
    return mh_model_create(m, N, D, H, D_H, F, L, C, pos, causal, attention, max_B, 0);
}

int mh_model_load(MultiHeadModel *m, const char *path, int max_B, MultiHeadAttention attention,
                  char *task, int task_cap, int *seed) {
    char *config = NULL;
    if (checkpoint_read_config(path, &config) < 0) return -1;     /* the message names the path */
    memset(m, 0, sizeof *m);
    int rc = load_from_config(m, config, max_B, attention, task, task_cap, seed);
    free(config);
    if (rc < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", last_error());
        mh_model_free(m);
        return fail("%s: %s", path, why);
    }
    if (checkpoint_load(path, &m->params) < 0) {
        mh_model_free(m);
        return -1;
    }
    return 0;
}
