/* digit_model.c - chapter 04's digit tasks and the small self-attention
 * model with its hand-written backward pass (see digit_model.h). */
#include "04_self_attention/digit_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/self_attention.h"
#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"

/* ------------------------------------------------------------------- tasks */

const char *digit_task_name(DigitTask t) {
    static const char *const names[DIGIT_N_TASKS] = {"reverse", "sort", "count"};
    return (t >= 0 && t < DIGIT_N_TASKS) ? names[t] : "?";
}

const char *pos_type_name(PosType p) {
    static const char *const names[POS_N_TYPES] = {"none", "sinusoidal", "learned"};
    return (p >= 0 && p < POS_N_TYPES) ? names[p] : "?";
}

int digit_task_from_name(const char *name, DigitTask *t) {
    for (int i = 0; i < DIGIT_N_TASKS; i++)
        if (strcmp(name, digit_task_name((DigitTask)i)) == 0) {
            *t = (DigitTask)i;
            return 0;
        }
    return fail("task: expected one of reverse, sort, count, got '%s'", name);
}

int pos_type_from_name(const char *name, PosType *p) {
    for (int i = 0; i < POS_N_TYPES; i++)
        if (strcmp(name, pos_type_name((PosType)i)) == 0) {
            *p = (PosType)i;
            return 0;
        }
    return fail("pos: expected one of none, sinusoidal, learned, got '%s'", name);
}

int digits_parse(const char *text, int N, int *x) {
    int n = 0;
    for (int i = 0; text[i] != '\0'; i++) {
        char c = text[i];
        if (c == ' ' || c == ',' || c == '\t') continue;
        if (c < '0' || c > '9')
            return fail("--input: expected %d digits 0-9 (e.g. \"3 1 4 1 ...\"), got '%c' at character %d "
                        "of '%s'", N, c, i + 1, text);
        if (n < N) x[n] = c - '0';
        n++;
    }
    if (n != N)
        return fail("--input: expected %d digits (the model's sequence length), got %d in '%s'", N, n,
                    text);
    return 0;
}

int digit_task_classes(DigitTask t, int N) { return t == TASK_COUNT ? N + 1 : DIGIT_VOCAB; }

/* x [B, N] -> y [B, N] */
void digit_task_batch(DigitTask t, int *x, int *y, int B, int N, Rng *rng) {
    for (int b = 0; b < B; b++) {
        int *xs = x + (size_t)b * N, *ys = y + (size_t)b * N;
        for (int i = 0; i < N; i++) xs[i] = (int)rng_below(rng, DIGIT_VOCAB);
        digit_task_targets(t, xs, ys, N);
    }
}

/* x [N] -> y [N] */
void digit_task_targets(DigitTask t, const int *x, int *y, int N) {
    int histogram[DIGIT_VOCAB] = {0};
    for (int i = 0; i < N; i++) histogram[x[i]]++;
    if (t == TASK_REVERSE) {
        for (int i = 0; i < N; i++) y[i] = x[N - 1 - i];
    } else if (t == TASK_SORT) {        /* counting sort */
        int i = 0;
        for (int digit = 0; digit < DIGIT_VOCAB; digit++)
            for (int k = 0; k < histogram[digit]; k++) y[i++] = digit;
    } else {
        for (int i = 0; i < N; i++) y[i] = histogram[x[i]];
    }
}

/* ------------------------------------------------------------------- model */

/* "layer<l>.<name>", a matrix [rows, cols] or (cols == 0) a vector [rows]. */
static size_t declare_layer_tensor(Params *p, int l, const char *name, int rows, int cols) {
    char full[PARAMS_NAME_LEN];
    snprintf(full, sizeof full, "layer%d.%s", l, name);
    int dims[2] = {rows, cols};
    return params_add(p, full, cols ? 2 : 1, dims);
}

int digit_model_create(DigitModel *m, int N, int D, int F, int L, int C, PosType pos, int causal,
                       int max_B, uint64_t seed) {
    if (L < 1 || L > DIGIT_MAX_LAYERS)
        return fail("layers: expected 1..%d, got %d", DIGIT_MAX_LAYERS, L);
    memset(m, 0, sizeof *m);
    m->N = N; m->D = D; m->F = F; m->L = L; m->C = C;
    m->pos = pos; m->causal = causal; m->max_B = max_B;

    Params *p = &m->params;
    params_init(p);
    m->emb = params_add(p, "emb", 2, (int[]){DIGIT_VOCAB, D});
    if (pos == POS_LEARNED) m->pos_table = params_add(p, "pos", 2, (int[]){N, D});
    for (int l = 0; l < L; l++) {
        m->W_Q[l] = declare_layer_tensor(p, l, "W_Q", D, D);
        m->W_K[l] = declare_layer_tensor(p, l, "W_K", D, D);
        m->W_V[l] = declare_layer_tensor(p, l, "W_V", D, D);
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
    if (pos == POS_LEARNED) init_normal(params_data(p, m->pos_table), (size_t)N * D, 0.7f, &rng);
    for (int l = 0; l < L; l++) {
        init_xavier(params_data(p, m->W_Q[l]), D, D, &rng);
        init_xavier(params_data(p, m->W_K[l]), D, D, &rng);
        init_xavier(params_data(p, m->W_V[l]), D, D, &rng);
        init_xavier(params_data(p, m->W_1[l]), D, F, &rng);
        init_xavier(params_data(p, m->W_2[l]), F, D, &rng);
    }
    init_xavier(params_data(p, m->W_out), D, C, &rng);

    /* activations, allocated once for batches of up to max_B */
    const size_t R = (size_t)max_B * N;     /* rows: one per position */
    m->P_sin = xcalloc((size_t)N * D, sizeof(float));
    positional_encoding_sinusoidal(m->P_sin, N, D);
    m->X = xcalloc((L + 1) * R * D, sizeof(float));
    m->H = xcalloc(L * R * D, sizeof(float));
    m->Y_attn = xcalloc(L * R * D, sizeof(float));
    m->A = xcalloc(L * R * N, sizeof(float));
    m->sa_cache = xcalloc(L * self_attention_cache_floats(max_B, N, D), sizeof(float));
    m->pre = xcalloc(L * R * F, sizeof(float));
    m->act = xcalloc(L * R * F, sizeof(float));
    m->logits = xcalloc(R * C, sizeof(float));
    m->probs = xcalloc(R * C, sizeof(float));
    m->dlogits = xcalloc(R * C, sizeof(float));
    m->dX = xcalloc(R * D, sizeof(float));
    m->dH = xcalloc(R * D, sizeof(float));
    m->dpre = xcalloc(R * F, sizeof(float));
    m->dact = xcalloc(R * F, sizeof(float));
    m->sa_scratch = xcalloc(self_attention_scratch_floats(max_B, N, D), sizeof(float));
    return 0;
}

void digit_model_free(DigitModel *m) {
    params_free(&m->params);
    float *buffers[] = {m->P_sin, m->X, m->H, m->Y_attn, m->A, m->sa_cache, m->pre, m->act,
                        m->logits, m->probs, m->dlogits, m->dX, m->dH, m->dpre, m->dact,
                        m->sa_scratch};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------- the pieces around attention */

void digit_input_forward(float *X, const int *x, const float *emb, PosType pos, const float *P,
                         int B, int N, int D) {
    embedding_forward(X, x, emb, B * N, D);
    if (pos != POS_NONE) add_positional_encoding(X, P, B, N, D);
}

void digit_input_backward(float *demb, float *dP, const float *dX, const int *x, PosType pos,
                          int B, int N, int D) {
    if (pos == POS_LEARNED) add_positional_encoding_backward(dP, dX, B, N, D);
    embedding_backward(demb, dX, x, B * N, D);
}

void residual_mlp_forward(float *X_out, float *pre, float *act, const float *H, const float *W_1,
                          const float *b_1, const float *W_2, const float *b_2, int R, int D, int F) {
    linear_forward(pre, H, W_1, b_1, R, D, F);
    relu_forward(act, pre, R * F);
    linear_forward(X_out, act, W_2, b_2, R, F, D);
    for (size_t i = 0; i < (size_t)R * D; i++) X_out[i] += H[i];
}

void residual_mlp_backward(float *dH, float *dpre, float *dact, float *dW_1, float *db_1, float *dW_2,
                           float *db_2, const float *dX_out, const float *H, const float *pre,
                           const float *act, const float *W_1, const float *W_2, int R, int D, int F) {
    memcpy(dH, dX_out, sizeof(float) * (size_t)R * D);      /* the residual path */
    memset(dact, 0, sizeof(float) * (size_t)R * F);
    memset(dpre, 0, sizeof(float) * (size_t)R * F);
    linear_backward(dact, dW_2, db_2, dX_out, act, W_2, R, F, D);
    relu_backward(dpre, dact, pre, R * F);
    linear_backward(dH, dW_1, db_1, dpre, H, W_1, R, D, F);
}

double digit_head_forward(float *logits, float *probs, const float *X, const float *W_out,
                          const float *b_out, const int *y, int R, int D, int C) {
    linear_forward(logits, X, W_out, b_out, R, D, C);
    if (y == NULL) return 0.0;
    int counted = 0;
    double loss = cross_entropy_forward(probs, logits, y, R, C, -1, &counted);
    return loss / counted;
}

void digit_head_backward(float *dX, float *dW_out, float *db_out, float *dlogits, const float *probs,
                         const int *y, const float *X, const float *W_out, int R, int D, int C) {
    memset(dlogits, 0, sizeof(float) * (size_t)R * C);
    cross_entropy_backward(dlogits, probs, y, R, C, -1, 1.0f / (float)R);
    memset(dX, 0, sizeof(float) * (size_t)R * D);
    linear_backward(dX, dW_out, db_out, dlogits, X, W_out, R, D, C);
}

void digit_argmax(const float *logits, int R, int C, int *pred) {
    for (int r = 0; r < R; r++) {
        const float *z = logits + (size_t)r * C;
        int best = 0;
        for (int c = 1; c < C; c++) if (z[c] > z[best]) best = c;
        pred[r] = best;
    }
}

static void print_row(const char *label, const int *v, int N) {
    printf("  %-11s", label);
    for (int i = 0; i < N; i++) printf(" %2d", v[i]);
}

void digit_print_prediction(const char *task, const int *x, const int *pred, const int *y, int N) {
    print_row("input", x, N);
    printf("\n");
    print_row("output", pred, N);
    printf("\n");
    print_row(task, y, N);
    printf("   (the right answer: %s)\n",
           memcmp(pred, y, sizeof(int) * (size_t)N) == 0 ? "all correct" : "some outputs are wrong");
}

/* One layer's weights as self-attention wants them. */
static SelfAttentionWeights layer_weights(Params *p, const DigitModel *m, int l, int grad) {
    SelfAttentionWeights w;
    w.W_Q = grad ? params_grad(p, m->W_Q[l]) : params_data(p, m->W_Q[l]);
    w.W_K = grad ? params_grad(p, m->W_K[l]) : params_data(p, m->W_K[l]);
    w.W_V = grad ? params_grad(p, m->W_V[l]) : params_data(p, m->W_V[l]);
    return w;
}

/* x [B, N] (, y [B, N]) -> logits [B*N, C], mean loss */
double digit_model_forward(DigitModel *m, const int *x, const int *y, int B) {
    Params *p = &m->params;
    const int N = m->N, D = m->D, F = m->F, C = m->C, R = B * N;
    const size_t RD = (size_t)R * D, RF = (size_t)R * F;
    const size_t cache_stride = self_attention_cache_floats(m->max_B, N, D);
    m->B = B;

    /* X_0 = embed(x) + P */
    digit_input_forward(m->X, x, params_data(p, m->emb), m->pos,
                        m->pos == POS_LEARNED ? params_data(p, m->pos_table) : m->P_sin, B, N, D);

    for (int l = 0; l < m->L; l++) {
        const float *X_in = m->X + l * RD;
        float *X_out = m->X + (l + 1) * RD, *H = m->H + l * RD, *Y = m->Y_attn + l * RD;
        float *pre = m->pre + l * RF, *act = m->act + l * RF;
        SelfAttentionWeights w = layer_weights(p, m, l, 0);
        /* H = X + SelfAttention(X) */
        self_attention_forward(Y, m->A + (size_t)l * R * N, m->sa_cache + l * cache_stride, X_in, &w,
                               m->causal, NULL, B, N, D, D);
        for (size_t i = 0; i < RD; i++) H[i] = X_in[i] + Y[i];
        /* X_out = H + relu(H W_1 + b_1) W_2 + b_2 */
        residual_mlp_forward(X_out, pre, act, H, params_data(p, m->W_1[l]), params_data(p, m->b_1[l]),
                             params_data(p, m->W_2[l]), params_data(p, m->b_2[l]), R, D, F);
    }
    return digit_head_forward(m->logits, m->probs, m->X + m->L * RD, params_data(p, m->W_out),
                              params_data(p, m->b_out), y, R, D, C);
}

void digit_model_backward(DigitModel *m, const int *x, const int *y) {
    Params *p = &m->params;
    const int B = m->B, N = m->N, D = m->D, F = m->F, C = m->C, R = B * N;
    const size_t RD = (size_t)R * D, RF = (size_t)R * F;
    const size_t cache_stride = self_attention_cache_floats(m->max_B, N, D);

    /* dX = dL/dX_L */
    digit_head_backward(m->dX, params_grad(p, m->W_out), params_grad(p, m->b_out), m->dlogits, m->probs,
                        y, m->X + m->L * RD, params_data(p, m->W_out), R, D, C);

    for (int l = m->L - 1; l >= 0; l--) {
        const float *X_in = m->X + l * RD, *H = m->H + l * RD;
        const float *pre = m->pre + l * RF, *act = m->act + l * RF;
        /* X_out = H + MLP(H): dH = dX_out + MLP'(dX_out) */
        residual_mlp_backward(m->dH, m->dpre, m->dact, params_grad(p, m->W_1[l]), params_grad(p, m->b_1[l]),
                              params_grad(p, m->W_2[l]), params_grad(p, m->b_2[l]), m->dX, H, pre, act,
                              params_data(p, m->W_1[l]), params_data(p, m->W_2[l]), R, D, F);
        /* H = X_in + SelfAttention(X_in): dX_in = dH + SelfAttention'(dH) */
        memcpy(m->dX, m->dH, sizeof(float) * RD);
        SelfAttentionWeights w = layer_weights(p, m, l, 0), dw = layer_weights(p, m, l, 1);
        self_attention_backward(m->dX, &dw, m->sa_scratch, m->dH, m->A + (size_t)l * R * N,
                                m->sa_cache + l * cache_stride, X_in, &w, B, N, D, D);
    }
    /* X_0 = embed(x) + P */
    digit_input_backward(params_grad(p, m->emb), m->pos == POS_LEARNED ? params_grad(p, m->pos_table) : NULL,
                         m->dX, x, m->pos, B, N, D);
}

void digit_model_predict(const DigitModel *m, int *pred) {
    digit_argmax(m->logits, m->B * m->N, m->C, pred);
}

const float *digit_model_attention(const DigitModel *m, int l, int b) {
    return m->A + ((size_t)l * m->B * m->N + (size_t)b * m->N) * m->N;
}

/* ------------------------------------------------------------- checkpoints */

int digit_model_save(const DigitModel *m, const char *task, int seed, const char *path) {
    char config[512];
    snprintf(config, sizeof config,
             "model=%s\ntask=%s\nlen=%d\ndim=%d\nhidden=%d\nlayers=%d\nclasses=%d\npos=%s\n"
             "causal=%d\nseed=%d\n",
             DIGIT_MODEL_NAME, task, m->N, m->D, m->F, m->L, m->C, pos_type_name(m->pos), m->causal, seed);
    return checkpoint_save(path, config, &m->params);
}

/* Config key -> int in [lo, hi]. */
static int config_int_in(const char *config, const char *key, int lo, int hi, int *out) {
    if (config_get_int(config, key, out) < 0) return -1;
    if (*out < lo || *out > hi) return fail("config key '%s': expected %d..%d, got %d", key, lo, hi, *out);
    return 0;
}

/* Everything of digit_model_load but the "<path>: " prefix on errors. */
static int load_from_config(DigitModel *m, const char *config, int max_B, char *task, int task_cap,
                            int *seed) {
    char model[64], pos_name[32];
    if (config_get(config, "model", model, sizeof model) < 0) return -1;
    if (strcmp(model, DIGIT_MODEL_NAME) != 0)
        return fail("a checkpoint of model '%s', but this program loads '%s' (chapter 04's digit model)",
                    model, DIGIT_MODEL_NAME);
    int N, D, F, L, C, causal;
    PosType pos = POS_NONE;
    DigitTask t = TASK_REVERSE;
    if (config_get(config, "task", task, task_cap) < 0 || digit_task_from_name(task, &t) < 0 ||
        config_get(config, "pos", pos_name, sizeof pos_name) < 0 || pos_type_from_name(pos_name, &pos) < 0 ||
        config_int_in(config, "len", 2, 64, &N) < 0 || config_int_in(config, "dim", 2, 1024, &D) < 0 ||
        config_int_in(config, "hidden", 1, 4096, &F) < 0 ||
        config_int_in(config, "layers", 1, DIGIT_MAX_LAYERS, &L) < 0 ||
        config_int_in(config, "classes", 1, 4096, &C) < 0 || config_int_in(config, "causal", 0, 1, &causal) < 0 ||
        config_int_in(config, "seed", 0, 2147483647, seed) < 0)
        return -1;
    if (C != digit_task_classes(t, N))
        return fail("config: %d classes, but task '%s' with length %d has %d", C, task, N,
                    digit_task_classes(t, N));
    return digit_model_create(m, N, D, F, L, C, pos, causal, max_B, 0);
}

int digit_model_load(DigitModel *m, const char *path, int max_B, char *task, int task_cap, int *seed) {
    char *config = NULL;
    if (checkpoint_read_config(path, &config) < 0) return -1;     /* the message names the path */
    memset(m, 0, sizeof *m);
    int rc = load_from_config(m, config, max_B, task, task_cap, seed);
    free(config);
    if (rc < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", last_error());
        digit_model_free(m);
        return fail("%s: %s", path, why);
    }
    if (checkpoint_load(path, &m->params) < 0) {
        digit_model_free(m);
        return -1;
    }
    return 0;
}
