/* test_golden.c - every layer against golden vectors from PyTorch.
 *
 * tools/golden.py wrote tests/golden/<layer>.bin with PyTorch (format and
 * regeneration: tests/golden/README.md): for several cases per layer, the
 * inputs, parameters and upstream gradient, and PyTorch's outputs and
 * autograd gradients. Here each C layer runs on the same inputs and every
 * output and gradient must satisfy
 *
 *     |got - want| <= atol + rtol * |want|        (element by element)
 *
 * A failure prints the case, the tensor, the worst element with its index
 * and both values. Backward is called TWICE into the same buffers and the
 * second result must be twice the answer: backward accumulates (+=).
 *
 * Tolerances. The stored answers are float64 results rounded once to
 * float32, so the error measured is the C code's float32 rounding:
 *   outputs    rtol 1e-5  (about 80 float32 ulps),
 *   gradients  rtol 1e-4  (a few more roundings chained, and sums over a batch);
 *   atol       a floor for elements that cancel to near zero: a float32 sum of
 *              ~30 terms of size ~1 carries ~1e-7 absolute error, and
 *              sigmoid(-100) = 3.7e-44 is a denormal with only a few bits.
 *              For gradients the floor is relative to the tensor's scale,
 *              ATOL_GRAD * min(1, max |want|) (gold_atol_for_scale), so a
 *              small parameter's gradient is checked at its own size.
 * Looser values, where needed, carry their reason next to them.
 *
 * ATTN_GOLDEN_VERBOSE=1 prints, per layer, how much of its tolerance the
 * closest element used.
 *
 * The files are found in tests/golden, relative to the current directory
 * (make test runs from the repository root), or in $ATTN_GOLDEN_DIR.
 *
 * Adding a layer (a later chapter's): a generator in tools/golden.py, then
 * here a check_<layer>(Case *) function and one line in LAYERS[]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cells.h"
#include "util/error.h"   /* before cmocka.h, whose fail() macro would clash with error.h's fail() */
#include "golden.h"
#include "nn/layers.h"
#include "kernels/matmul.h"
#include "02_bahdanau_attention/bahdanau.h"
#include "03_dot_product_attention/attention.h"
#include "04_self_attention/self_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "06_transformer/block.h"
#include "06_transformer/moe.h"
#include "06_transformer/rope_attention.h"
#include "06_transformer/linformer.h"
#include "06_transformer/sparse_attention.h"
#include "07_vision_transformer/patch_embed.h"
#include "07_vision_transformer/vit.h"
#include "nn/batchnorm.h"
#include "nn/conv2d.h"
#include "nn/rope.h"
#include "nn/transformer_layers.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define RTOL_OUT 1e-5
#define ATOL_OUT 1e-6
#define RTOL_GRAD 1e-4
#define ATOL_GRAD 1e-5

/* ------------------------------------------------------------ the harness */

#define CASE_MAX_BUFFERS 64

/* One case of one layer: where its tensors are, the buffers allocated for
 * it, and how many comparisons failed. */
typedef struct {
    const GoldFile *file;
    const char *layer;
    char name[128];
    int failures;
    double worst_ratio;      /* largest |diff| / tolerance seen (<= 1 passes) */
    char worst_tensor[64];
    int n_buffers;
    void *buffers[CASE_MAX_BUFFERS];
} Case;

/* The tensor "<case>/<name>", or NULL. */
static const GoldTensor *maybe(Case *c, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "%s/%s", c->name, name);
    return gold_find(c->file, full);
}

/* The tensor "<case>/<name>", which must exist (a missing one is a broken file). */
static const GoldTensor *need(Case *c, const char *name) {
    const GoldTensor *t = maybe(c, name);
    if (t == NULL) fail_msg("golden %s: case %s has no tensor '%s'", c->layer, c->name, name);
    return t;
}

static const float *f32(Case *c, const char *name) {
    const GoldTensor *t = need(c, name);
    assert_int_equal(t->type, GOLD_F32);
    return t->data;
}

static const float *f32_or_null(Case *c, const char *name) {
    return maybe(c, name) ? f32(c, name) : NULL;
}

static const int *i32(Case *c, const char *name) {
    const GoldTensor *t = need(c, name);
    assert_int_equal(t->type, GOLD_I32);
    return t->data;
}

/* A zeroed float buffer of n floats that lives until the end of the case. */
static float *buf(Case *c, size_t n) {
    assert_true(c->n_buffers < CASE_MAX_BUFFERS);
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    c->buffers[c->n_buffers++] = p;
    return p;
}

/* Flat index -> "[i, j, ...]" with the tensor's dims. */
static void format_index(char *out, size_t outlen, size_t flat, const GoldTensor *t) {
    size_t idx[GOLD_MAX_DIMS] = {0};
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = flat % (size_t)t->dims[d];
        flat /= (size_t)t->dims[d];
    }
    int n = snprintf(out, outlen, "[");
    for (int d = 0; d < t->ndim && n < (int)outlen; d++)
        n += snprintf(out + n, outlen - (size_t)n, "%s%zu", d ? ", " : "", idx[d]);
    if (n < (int)outlen) snprintf(out + n, outlen - (size_t)n, "]");
}

/* Compare got with times * want (want = the stored tensor <case>/<name>).
 * times is 1 after the first backward call and 2 after the second. */
static void expect_times(Case *c, const char *name, const float *got, int times, double rtol, double atol,
                         int scaled_floor) {
    const GoldTensor *t = need(c, name);
    const float *want = t->data;
    float *scaled = NULL;
    if (times != 1) {
        scaled = malloc(t->count * sizeof(float) + 1);
        assert_non_null(scaled);
        for (size_t i = 0; i < t->count; i++) scaled[i] = (float)times * want[i];
        want = scaled;
    }
    if (scaled_floor) atol = gold_atol_for_scale(want, t->count, atol);
    GoldDiff d = gold_compare(got, want, t->count, rtol, atol);
    if (d.ratio > c->worst_ratio) {
        c->worst_ratio = d.ratio;
        snprintf(c->worst_tensor, sizeof c->worst_tensor, "%s", name);
    }
    if (!d.ok) {
        char idx[96];
        format_index(idx, sizeof idx, d.worst, t);
        print_error("golden %s/%s: %s%s%s: worst element %zu %s: got %.9g, want %.9g "
                    "(|diff| %.3g, tolerance %.3g = atol %.1g + rtol %.1g * |want|)\n",
                    c->layer, c->name, name, times == 1 ? "" : " after a second backward",
                    times == 1 ? "" : " (must double: backward accumulates)", d.worst, idx,
                    (double)d.got, (double)d.want, fabs((double)d.got - d.want),
                    atol + rtol * fabs((double)d.want), atol, rtol);
        c->failures++;
    }
    free(scaled);
}

static void expect_out(Case *c, const char *name, const float *got) {
    expect_times(c, name, got, 1, RTOL_OUT, ATOL_OUT, 0);
}

static void expect_grad(Case *c, const char *name, const float *got, int times) {
    expect_times(c, name, got, times, RTOL_GRAD, ATOL_GRAD, 1);
}

/* A gradient that cancels to rounding noise: a norm over D = 1 feature, where
 * x - mean is exactly 0 (LayerNorm's dgamma is 0 in exact arithmetic, PyTorch's
 * float64 gives 6e-15) or dx is the difference of two terms of size 1 (RMSNorm).
 * Its float32 error is that of the terms, not of the result: the whole floor. */
static void expect_grad_cancelling(Case *c, const char *name, const float *got, int times) {
    expect_times(c, name, got, times, RTOL_GRAD, ATOL_GRAD, 0);
}

typedef struct {
    const char *name;        /* tests/golden/<name>.bin */
    void (*check)(Case *c);  /* runs one case, calls expect_*() */
} GoldLayer;

/* The cmocka test: every case of one layer. */
static void run_golden(void **state) {
    const GoldLayer *layer = *state;
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir && *dir ? dir : "tests/golden", layer->name);
    GoldFile file;
    if (gold_read(&file, path) < 0)
        fail_msg("%s\n(run from the repository root, or set ATTN_GOLDEN_DIR; regenerate with "
                 "make golden)", last_error());
    int n_cases = 0, failures = 0;
    double worst = 0.0;
    char name[128], worst_where[256] = "";
    while (gold_case(&file, n_cases, name, sizeof name) == 0) {
        Case c = {.file = &file, .layer = layer->name};
        snprintf(c.name, sizeof c.name, "%s", name);
        layer->check(&c);
        for (int i = 0; i < c.n_buffers; i++) free(c.buffers[i]);
        failures += c.failures;
        if (c.worst_ratio >= worst && c.worst_tensor[0]) {
            worst = c.worst_ratio;
            snprintf(worst_where, sizeof worst_where, "%s/%s", c.name, c.worst_tensor);
        }
        n_cases++;
    }
    gold_free(&file);
    if (getenv("ATTN_GOLDEN_VERBOSE"))   /* how much of the tolerance the closest call used */
        print_message("golden %s: %d cases, worst element at %.3g of its tolerance (%s)\n",
                      layer->name, n_cases, worst, worst_where[0] ? worst_where : "all exact");
    assert_true(n_cases > 0);
    if (failures) fail_msg("golden %s: %d mismatching tensor(s) over %d cases", layer->name, failures, n_cases);
}

/* ------------------------------------------------------------ layers.h */

static void check_linear(Case *c) {
    const GoldTensor *x = need(c, "x"), *W = need(c, "W");
    int N = x->dims[0], I = x->dims[1], O = W->dims[1];
    const float *b = f32_or_null(c, "b");
    float *y = buf(c, (size_t)N * O);
    linear_forward(y, f32(c, "x"), f32(c, "W"), b, N, I, O);
    expect_out(c, "y", y);
    float *dx = buf(c, (size_t)N * I), *dW = buf(c, (size_t)I * O), *db = b ? buf(c, (size_t)O) : NULL;
    for (int times = 1; times <= 2; times++) {
        linear_backward(dx, dW, db, f32(c, "dy"), f32(c, "x"), f32(c, "W"), N, I, O);
        expect_grad(c, "dx", dx, times);
        expect_grad(c, "dW", dW, times);
        if (b) expect_grad(c, "db", db, times);
    }
}

static void check_embedding(Case *c) {
    const GoldTensor *table = need(c, "table"), *ids = need(c, "ids");
    int V = table->dims[0], D = table->dims[1], N = ids->dims[0];
    float *y = buf(c, (size_t)N * D), *dtable = buf(c, (size_t)V * D);
    embedding_forward(y, i32(c, "ids"), f32(c, "table"), N, D);
    expect_out(c, "y", y);
    for (int times = 1; times <= 2; times++) {
        embedding_backward(dtable, f32(c, "dy"), i32(c, "ids"), N, D);
        expect_grad(c, "dtable", dtable, times);
    }
}

/* tanh and sigmoid: backward reads the forward output y; relu and gelu: the input x. */
typedef void (*ActForward)(float *y, const float *x, int n);
typedef void (*ActBackward)(float *dx, const float *dy, const float *saved, int n);

static void check_activation(Case *c, ActForward fwd, ActBackward bwd, int backward_reads_input) {
    int n = need(c, "x")->dims[0];
    float *y = buf(c, (size_t)n), *dx = buf(c, (size_t)n);
    fwd(y, f32(c, "x"), n);
    expect_out(c, "y", y);
    for (int times = 1; times <= 2; times++) {
        bwd(dx, f32(c, "dy"), backward_reads_input ? f32(c, "x") : y, n);
        expect_grad(c, "dx", dx, times);
    }
}

/* GELU and LayerNorm have a naive and an AVX2 kernel behind one call: their
 * cases run on each backend the CPU has (the layer name in a failure says
 * which), then the default backend is restored. */
static const char *BACKENDS[2] = {"naive", "avx2"};
static int n_backends(void) { return cpu_has_avx2_fma() ? 2 : 1; }

static void on_each_backend(Case *c, void (*check)(Case *c)) {
    const char *layer = c->layer;
    char labelled[160];
    for (int b = 0; b < n_backends(); b++) {
        assert_int_equal(backend_select(BACKENDS[b]), 0);
        snprintf(labelled, sizeof labelled, "%s [%s backend]", layer, BACKENDS[b]);
        c->layer = labelled;
        check(c);
    }
    c->layer = layer;
    assert_int_equal(backend_select(NULL), 0);
}

static void check_gelu_once(Case *c) { check_activation(c, gelu_forward, gelu_backward, 1); }
static void check_gelu_tanh_once(Case *c) { check_activation(c, gelu_tanh_forward, gelu_tanh_backward, 1); }
static void check_gelu(Case *c) { on_each_backend(c, check_gelu_once); }
static void check_gelu_tanh(Case *c) { on_each_backend(c, check_gelu_tanh_once); }

/* Backward uses the mean and rstd the C forward saved (as a model would). */
static void check_layernorm_once(Case *c) {
    const GoldTensor *x = need(c, "x");
    int N = x->dims[0], D = x->dims[1];
    float eps = f32(c, "eps")[0];
    float *out = buf(c, (size_t)N * D), *mean = buf(c, (size_t)N), *rstd = buf(c, (size_t)N);
    layernorm_forward(out, mean, rstd, f32(c, "x"), f32(c, "gamma"), f32(c, "beta"), N, D, eps);
    expect_out(c, "out", out);
    expect_out(c, "mean", mean);
    expect_out(c, "rstd", rstd);
    float *dx = buf(c, (size_t)N * D), *dgamma = buf(c, (size_t)D), *dbeta = buf(c, (size_t)D);
    for (int times = 1; times <= 2; times++) {
        layernorm_backward(dx, dgamma, dbeta, f32(c, "dout"), mean, rstd, f32(c, "x"), f32(c, "gamma"), N, D);
        (D == 1 ? expect_grad_cancelling : expect_grad)(c, "dx", dx, times);
        (D == 1 ? expect_grad_cancelling : expect_grad)(c, "dgamma", dgamma, times);
        expect_grad(c, "dbeta", dbeta, times);
    }
}

static void check_layernorm(Case *c) { on_each_backend(c, check_layernorm_once); }

static void check_tanh(Case *c) { check_activation(c, tanh_forward, tanh_backward, 0); }
static void check_sigmoid(Case *c) { check_activation(c, sigmoid_forward, sigmoid_backward, 0); }
static void check_relu(Case *c) { check_activation(c, relu_forward, relu_backward, 1); }

static void check_softmax(Case *c) {
    const GoldTensor *x = need(c, "x");
    int N = x->dims[0], C = x->dims[1];
    float *y = buf(c, (size_t)N * C), *dx = buf(c, (size_t)N * C);
    softmax_forward(y, f32(c, "x"), N, C);
    expect_out(c, "y", y);
    for (int times = 1; times <= 2; times++) {
        softmax_backward(dx, f32(c, "dy"), y, N, C);
        expect_grad(c, "dx", dx, times);
    }
}

static void check_log_softmax(Case *c) {
    const GoldTensor *x = need(c, "x");
    int N = x->dims[0], C = x->dims[1];
    float *y = buf(c, (size_t)N * C);
    log_softmax_forward(y, f32(c, "x"), N, C);
    expect_out(c, "y", y);
}

static void check_cross_entropy(Case *c) {
    const GoldTensor *logits = need(c, "logits");
    int N = logits->dims[0], C = logits->dims[1];
    int ignore_id = i32(c, "ignore_id")[0];
    float *probs = buf(c, (size_t)N * C), *dlogits = buf(c, (size_t)N * C);
    int counted = -1;
    double loss = cross_entropy_forward(probs, f32(c, "logits"), i32(c, "targets"), N, C, ignore_id, &counted);
    float loss32 = (float)loss;
    expect_out(c, "probs", probs);
    expect_out(c, "loss_sum", &loss32);
    if (counted != i32(c, "n_counted")[0]) {
        print_error("golden cross_entropy/%s: n_counted: got %d, want %d\n", c->name, counted,
                    i32(c, "n_counted")[0]);
        c->failures++;
    }
    for (int times = 1; times <= 2; times++) {
        cross_entropy_backward(dlogits, probs, i32(c, "targets"), N, C, ignore_id, f32(c, "scale")[0]);
        expect_grad(c, "dlogits", dlogits, times);
    }
}

/* ------------------------------------------------------------ cells.h */

static void check_cell(Case *c, CellType type) {
    const GoldTensor *x = need(c, "x"), *h_prev = need(c, "h_prev");
    int B = x->dims[0], I = x->dims[1], H = h_prev->dims[1], G = cell_gates(type);
    int lstm = cell_has_c(type);
    const int *mask = maybe(c, "mask") ? i32(c, "mask") : NULL;
    const float *c_prev = lstm ? f32(c, "c_prev") : NULL;
    float *h = buf(c, (size_t)B * H), *cs = lstm ? buf(c, (size_t)B * H) : NULL;
    float *cache = buf(c, (size_t)B * cell_cache_size(type, H));
    float *scratch = buf(c, (size_t)B * 2 * G * H);
    cell_forward(h, cs, cache, scratch, &(CellStep){type, B, I, H, mask, f32(c, "x"), f32(c, "h_prev"), c_prev},
                 &(CellWeights){(float *)f32(c, "W_x"), (float *)f32(c, "W_h"), (float *)f32(c, "b")});
    expect_out(c, "h", h);
    if (lstm) expect_out(c, "c", cs);
    float *dx = buf(c, (size_t)B * I), *dh_prev = buf(c, (size_t)B * H);
    float *dc_prev = lstm ? buf(c, (size_t)B * H) : NULL;
    float *dW_x = buf(c, (size_t)I * G * H), *dW_h = buf(c, (size_t)H * G * H), *db = buf(c, (size_t)G * H);
    for (int times = 1; times <= 2; times++) {
        cell_backward(dx, dh_prev, dc_prev, &(CellWeights){dW_x, dW_h, db}, f32(c, "dh"), lstm ? f32(c,
                      "dc") : NULL, cache, scratch, &(CellStep){type, B, I, H, mask, f32(c, "x"), f32(c, "h_prev"),
                      c_prev}, &(CellWeights){(float *)f32(c, "W_x"), (float *)f32(c, "W_h"), NULL});
        expect_grad(c, "dx", dx, times);
        expect_grad(c, "dh_prev", dh_prev, times);
        if (lstm) expect_grad(c, "dc_prev", dc_prev, times);
        expect_grad(c, "dW_x", dW_x, times);
        expect_grad(c, "dW_h", dW_h, times);
        expect_grad(c, "db", db, times);
    }
}

static void check_rnn_cell(Case *c) { check_cell(c, CELL_RNN); }
static void check_gru_cell(Case *c) { check_cell(c, CELL_GRU); }
static void check_lstm_cell(Case *c) { check_cell(c, CELL_LSTM); }

/* ------------------------------------------------------------ chapter 03 */

/* The score function's parameters from the case (absent ones stay NULL). */
static ScoreWeights score_weights(Case *c, const char *prefix) {
    char name[16];
    ScoreWeights w = {NULL, NULL, NULL, NULL};
    float **fields[4] = {&w.W, &w.W_1, &w.W_2, &w.v};
    const char *names[4] = {"W", "W_1", "W_2", "v"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, names[i]);
        *fields[i] = (float *)f32_or_null(c, name);
    }
    return w;
}

static void check_attention(Case *c) {
    const GoldTensor *Q = need(c, "Q"), *K = need(c, "K"), *V = need(c, "V");
    int N_Q = Q->dims[0], N_X = K->dims[0], D_V = V->dims[1];
    const GoldTensor *W_1 = maybe(c, "W_1");
    ScoreSpec spec = {(ScoreType)i32(c, "score")[0], Q->dims[1], K->dims[1], W_1 ? W_1->dims[1] : 0};
    ScoreWeights w = score_weights(c, "");
    AttentionMask mask = {maybe(c, "allowed") ? i32(c, "allowed") : NULL, i32(c, "causal")[0],
                          i32(c, "key_len")[0], 0};
    float *Y = buf(c, (size_t)N_Q * D_V), *A = buf(c, (size_t)N_Q * N_X);
    float *cache = buf(c, attention_cache_floats(&spec, N_Q, N_X));
    float *scratch = buf(c, attention_scratch_floats(&spec, N_Q, N_X));
    attention_forward(Y, A, cache, Q->data, K->data, V->data, &spec, &w, &mask, N_Q, N_X, D_V);
    expect_out(c, "Y", Y);
    expect_out(c, "A", A);
    /* gradient buffers, laid out as the parameters */
    size_t n_params = score_param_count(&spec);
    float *dparams = buf(c, n_params);
    ScoreWeights dw = score_weights_view(&spec, dparams);
    float *dQ = buf(c, (size_t)N_Q * spec.D_Q), *dK = buf(c, (size_t)N_X * spec.D_K), *dV = buf(c, (size_t)N_X * D_V);
    for (int times = 1; times <= 2; times++) {
        attention_backward(dQ, dK, dV, &dw, scratch, f32(c, "dY"), A, cache, Q->data, K->data, V->data,
                           &spec, &w, N_Q, N_X, D_V);
        expect_grad(c, "dQ", dQ, times);
        expect_grad(c, "dK", dK, times);
        expect_grad(c, "dV", dV, times);
        if (dw.W) expect_grad(c, "dW", dw.W, times);
        if (dw.W_1) expect_grad(c, "dW_1", dw.W_1, times);
        if (dw.W_2) expect_grad(c, "dW_2", dw.W_2, times);
        if (dw.v) expect_grad(c, "dv", dw.v, times);
    }
}

static void check_cross_attention(Case *c) {
    const GoldTensor *Q_in = need(c, "Q_in"), *X = need(c, "X"), *W_K = need(c, "W_K"), *W_V = need(c, "W_V");
    const GoldTensor *W_1 = maybe(c, "W_1");
    int N_Q = Q_in->dims[0], N_X = X->dims[0], project_q = i32(c, "project_q")[0];
    int D_K = W_K->dims[1], D_V = W_V->dims[1];
    CrossAttentionSpec spec = {{(ScoreType)i32(c, "score")[0], D_K, D_K, W_1 ? W_1->dims[1] : 0},
                               Q_in->dims[1], X->dims[1], D_V, project_q};
    CrossAttentionWeights w = {(float *)f32_or_null(c, "W_Q"), W_K->data, W_V->data, score_weights(c, "")};
    AttentionMask mask = {NULL, 0, i32(c, "key_len")[0], 0};
    float *Y = buf(c, (size_t)N_Q * D_V), *A = buf(c, (size_t)N_Q * N_X);
    float *cache = buf(c, cross_attention_cache_floats(&spec, N_Q, N_X));
    float *scratch = buf(c, cross_attention_scratch_floats(&spec, N_Q, N_X));
    cross_attention_forward(Y, A, cache, Q_in->data, X->data, &spec, &w, &mask, N_Q, N_X);
    expect_out(c, "Y", Y);
    expect_out(c, "A", A);
    float *dparams = buf(c, cross_attention_param_count(&spec));
    CrossAttentionWeights dw = cross_attention_weights_view(&spec, dparams);
    float *dQ_in = buf(c, (size_t)N_Q * spec.D_in_Q), *dX = buf(c, (size_t)N_X * spec.D_X);
    for (int times = 1; times <= 2; times++) {
        cross_attention_backward(dQ_in, dX, &dw, scratch, f32(c, "dY"), A, cache, Q_in->data, X->data,
                                 &spec, &w, N_Q, N_X);
        expect_grad(c, "dQ_in", dQ_in, times);
        expect_grad(c, "dX", dX, times);
        if (project_q) expect_grad(c, "dW_Q", dw.W_Q, times);
        expect_grad(c, "dW_K", dw.W_K, times);
        expect_grad(c, "dW_V", dw.W_V, times);
        if (dw.score.W) expect_grad(c, "dW", dw.score.W, times);
        if (dw.score.W_1) expect_grad(c, "dW_1", dw.score.W_1, times);
        if (dw.score.W_2) expect_grad(c, "dW_2", dw.score.W_2, times);
        if (dw.score.v) expect_grad(c, "dv", dw.score.v, times);
    }
}

/* ------------------------------------------------------------ chapter 02 */

static void check_additive_attention(Case *c) {
    const GoldTensor *keys = need(c, "keys");
    int B = keys->dims[0], T = keys->dims[1], A = keys->dims[2];
    const int *lens = i32(c, "lens");
    float *weights = buf(c, (size_t)B * T), *feat = buf(c, (size_t)B * T * A);
    additive_attention_forward(weights, feat, keys->data, f32(c, "query"), f32(c, "v"), lens, B, T, A);
    expect_out(c, "weights", weights);
    expect_out(c, "feat", feat);
    float *dkeys = buf(c, (size_t)B * T * A), *dquery = buf(c, (size_t)B * A), *dv = buf(c, (size_t)A);
    float *dscores = buf(c, (size_t)B * T);
    for (int times = 1; times <= 2; times++) {
        additive_attention_backward(dkeys, dquery, dv, dscores, f32(c, "dweights"), weights, feat,
                                    f32(c, "v"), lens, B, T, A);
        expect_grad(c, "dkeys", dkeys, times);
        expect_grad(c, "dquery", dquery, times);
        expect_grad(c, "dv", dv, times);
    }
}

static void check_attention_context(Case *c) {
    const GoldTensor *values = need(c, "values");
    int B = values->dims[0], T = values->dims[1], D = values->dims[2];
    float *context = buf(c, (size_t)B * D);
    attention_context_forward(context, f32(c, "weights"), values->data, B, T, D);
    expect_out(c, "context", context);
    float *dweights = buf(c, (size_t)B * T), *dvalues = buf(c, (size_t)B * T * D);
    for (int times = 1; times <= 2; times++) {
        attention_context_backward(dweights, dvalues, f32(c, "dcontext"), f32(c, "weights"), values->data,
                                   B, T, D);
        expect_grad(c, "dweights", dweights, times);
        expect_grad(c, "dvalues", dvalues, times);
    }
}

/* ------------------------------------------------------------ chapter 04 */

static void check_self_attention(Case *c) {
    const GoldTensor *X = need(c, "X"), *W_Q = need(c, "W_Q");
    int B = X->dims[0], N = X->dims[1], D_in = X->dims[2], D = W_Q->dims[1];
    SelfAttentionWeights w = {(float *)f32(c, "W_Q"), (float *)f32(c, "W_K"), (float *)f32(c, "W_V")};
    const int *lens = maybe(c, "lens") ? i32(c, "lens") : NULL;
    float *Y = buf(c, (size_t)B * N * D), *A = buf(c, (size_t)B * N * N);
    float *cache = buf(c, self_attention_cache_floats(B, N, D));
    float *scratch = buf(c, self_attention_scratch_floats(B, N, D));
    self_attention_forward(Y, A, cache, X->data, &w, i32(c, "causal")[0], lens, B, N, D_in, D);
    expect_out(c, "Y", Y);
    expect_out(c, "A", A);
    size_t WD = (size_t)D_in * D;
    SelfAttentionWeights dw = {buf(c, WD), buf(c, WD), buf(c, WD)};
    float *dX = buf(c, (size_t)B * N * D_in);
    for (int times = 1; times <= 2; times++) {
        self_attention_backward(dX, &dw, scratch, f32(c, "dY"), A, cache, X->data, &w, B, N, D_in, D);
        expect_grad(c, "dX", dX, times);
        expect_grad(c, "dW_Q", dw.W_Q, times);
        expect_grad(c, "dW_K", dw.W_K, times);
        expect_grad(c, "dW_V", dw.W_V, times);
    }
}

static void check_positional_encoding(Case *c) {
    const GoldTensor *X = need(c, "X");
    int B = X->dims[0], N = X->dims[1], D = X->dims[2];
    size_t n = (size_t)B * N * D;
    float *P = buf(c, (size_t)N * D), *Y = buf(c, n), *dP = buf(c, (size_t)N * D);
    positional_encoding_sinusoidal(P, N, D);
    expect_out(c, "P_sin", P);
    memcpy(Y, X->data, sizeof(float) * n);
    add_positional_encoding(Y, f32(c, "P"), B, N, D);      /* in place: Y = X + P */
    expect_out(c, "Y", Y);
    for (int times = 1; times <= 2; times++) {
        add_positional_encoding_backward(dP, f32(c, "dY"), B, N, D);
        expect_grad(c, "dP", dP, times);
    }
}

/* ------------------------------------------------------------ chapter 05 */

static void check_multi_head(Case *c) {
    const GoldTensor *X = need(c, "X"), *W_QKV = need(c, "W_QKV"), *W_O = need(c, "W_O");
    int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = i32(c, "heads")[0];
    int HD = W_O->dims[0], D_out = W_O->dims[1];
    /* multi_head_rope.bin: rotary positions (rope = 1: chapter 06's rope_attention.h), some cases fused */
    const int rope = maybe(c, "rope") ? i32(c, "rope")[0] : 0;
    const int fused = maybe(c, "fused") ? i32(c, "fused")[0] : 0;
    MultiHeadSpec s = {D, H, HD / H, D_out, fused ? MULTI_HEAD_FUSED : MULTI_HEAD_PLAIN, 0};
    assert_int_equal(W_QKV->dims[1], 3 * HD);
    MultiHeadWeights w = {W_QKV->data, W_O->data, (float *)f32_or_null(c, "b_O")};
    const int *lens = maybe(c, "lens") ? i32(c, "lens") : NULL;
    float *O = buf(c, (size_t)B * N * D_out), *A = buf(c, multi_head_attention_floats(&s, B, N));
    float *cache = buf(c, multi_head_cache_floats(&s, B, N));
    float *scratch = buf(c, multi_head_scratch_floats(&s, B, N));
    if (rope) rope_attention_forward(O, A, NULL, cache, X->data, &s, &w, i32(c, "causal")[0], lens, B, N);
    else multi_head_forward(O, A, NULL, cache, X->data, &s, &w, i32(c, "causal")[0], lens, B, N);
    expect_out(c, "O", O);
    if (!fused) expect_out(c, "A", A);   /* the fused path forms no weights */
    MultiHeadWeights dw = {buf(c, (size_t)D * 3 * HD), buf(c, (size_t)HD * D_out),
                           w.b_O ? buf(c, (size_t)D_out) : NULL};
    float *dX = buf(c, (size_t)B * N * D);
    for (int times = 1; times <= 2; times++) {
        if (rope)
            rope_attention_backward(dX, &dw, scratch, f32(c, "dO"), A, NULL, cache, X->data, &s, &w,
                                    i32(c, "causal")[0], lens, B, N);
        else
            multi_head_backward(dX, &dw, scratch, f32(c, "dO"), A, NULL, cache, X->data, &s, &w,
                                i32(c, "causal")[0], lens, B, N);
        expect_grad(c, "dX", dX, times);
        expect_grad(c, "dW_QKV", dw.W_QKV, times);
        expect_grad(c, "dW_O", dw.W_O, times);
        if (w.b_O) expect_grad(c, "db_O", dw.b_O, times);
    }
}

/* ------------------------------------------------------------ chapter 06 */

/* sparse_attention.bin: the block's sparse self-attention (sparse_attention.h),
 * pattern = {P, window, global, causal}, no random blocks */
static void check_sparse_attention(Case *c) {
    const GoldTensor *X = need(c, "X"), *W_O = need(c, "W_O");
    const int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = i32(c, "heads")[0], HD = W_O->dims[0];
    const int *p = i32(c, "pattern");
    SparseLayout L;
    assert_int_equal(sparse_layout_create(&L, &(SparsePattern){p[0], p[1], p[2], 0, 1}, N, p[3]), 0);
    const SparseAttention options = {&L, 0};
    const BlockSelfAttention a = sparse_attention_hook(&options);
    MultiHeadSpec s = {D, H, HD / H, D, MULTI_HEAD_FUSED, 0};
    assert_int_equal(a.check(a.options, &s, p[3], 0), 0);
    MultiHeadWeights w = {(float *)f32(c, "W_QKV"), W_O->data, (float *)f32(c, "b_O")};
    const int *lens = maybe(c, "lens") ? i32(c, "lens") : NULL;
    float *O = buf(c, (size_t)B * N * D), *cache = buf(c, a.cache_floats(a.options, &s, B, N));
    float *scratch = buf(c, a.scratch_floats(a.options, &s, B, N));
    a.forward(a.options, O, NULL, NULL, cache, X->data, &s, &w, NULL, p[3], lens, B, N);
    expect_out(c, "O", O);
    MultiHeadWeights dw = {buf(c, (size_t)D * 3 * HD), buf(c, (size_t)HD * D), buf(c, (size_t)D)};
    float *dX = buf(c, (size_t)B * N * D);
    for (int times = 1; times <= 2; times++) {
        a.backward(a.options, dX, &dw, NULL, scratch, f32(c, "dO"), NULL, NULL, cache, X->data, &s, &w, NULL, p[3],
                   lens, B, N);
        expect_grad(c, "dX", dX, times);
        expect_grad(c, "dW_QKV", dw.W_QKV, times);
        expect_grad(c, "dW_O", dw.W_O, times);
        expect_grad(c, "db_O", dw.b_O, times);
    }
    sparse_layout_free(&L);
}

/* linformer.bin: the block's Linformer self-attention (linformer.h), E and F
 * [k, N_E] as the hook's extra parameters E | F */
static void check_linformer(Case *c) {
    const GoldTensor *X = need(c, "X"), *W_O = need(c, "W_O"), *E = need(c, "E");
    const int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = i32(c, "heads")[0], HD = W_O->dims[0];
    const Linformer l = {E->dims[0], E->dims[1]};
    const size_t kN = (size_t)l.k * l.N;
    const BlockSelfAttention a = linformer_hook(&l);
    MultiHeadSpec s = {D, H, HD / H, D, MULTI_HEAD_PLAIN, 0};
    assert_int_equal(a.check(a.options, &s, 0, 0), 0);
    assert_int_equal(a.extra_params(a.options, &s), 2 * kN);
    MultiHeadWeights w = {(float *)f32(c, "W_QKV"), W_O->data, (float *)f32(c, "b_O")};
    float *extra = buf(c, 2 * kN), *dextra = buf(c, 2 * kN);
    memcpy(extra, E->data, sizeof(float) * kN);
    memcpy(extra + kN, f32(c, "F"), sizeof(float) * kN);
    const int *lens = maybe(c, "lens") ? i32(c, "lens") : NULL;
    float *O = buf(c, (size_t)B * N * D), *cache = buf(c, a.cache_floats(a.options, &s, B, N));
    float *scratch = buf(c, a.scratch_floats(a.options, &s, B, N));
    a.forward(a.options, O, NULL, NULL, cache, X->data, &s, &w, extra, 0, lens, B, N);
    expect_out(c, "O", O);
    MultiHeadWeights dw = {buf(c, (size_t)D * 3 * HD), buf(c, (size_t)HD * D), buf(c, (size_t)D)};
    float *dX = buf(c, (size_t)B * N * D);
    for (int times = 1; times <= 2; times++) {
        a.backward(a.options, dX, &dw, dextra, scratch, f32(c, "dO"), NULL, NULL, cache, X->data, &s, &w, extra, 0,
                   lens, B, N);
        expect_grad(c, "dX", dX, times);
        expect_grad(c, "dW_QKV", dw.W_QKV, times);
        expect_grad(c, "dW_O", dw.W_O, times);
        expect_grad(c, "db_O", dw.b_O, times);
        expect_grad(c, "dE", dextra, times);
        expect_grad(c, "dF", dextra + kN, times);
    }
}

/* rope.bin: X [N, H D_H], dims = {H, D_H, pos0}; forward in place, backward
 * in place on a copy of dY (it overwrites, so "twice" is not a sum here) */
static void check_rope(Case *c) {
    const GoldTensor *X = need(c, "X");
    const int N = X->dims[0], *dims = i32(c, "dims"), H = dims[0], D_H = dims[1], pos0 = dims[2];
    const size_t n = (size_t)N * H * D_H;
    float *Y = buf(c, n), *dX = buf(c, n);
    memcpy(Y, X->data, sizeof(float) * n);
    rope_forward(Y, H * D_H, N, H, D_H, pos0);
    expect_out(c, "Y", Y);
    memcpy(dX, f32(c, "dY"), sizeof(float) * n);
    rope_backward(dX, H * D_H, N, H, D_H, pos0);
    expect_out(c, "dX", dX);
}

static void check_rmsnorm(Case *c) {
    const GoldTensor *x = need(c, "x");
    int N = x->dims[0], D = x->dims[1];
    float *out = buf(c, (size_t)N * D), *rstd = buf(c, (size_t)N);
    rmsnorm_forward(out, rstd, f32(c, "x"), f32(c, "gamma"), N, D, f32(c, "eps")[0]);
    expect_out(c, "out", out);
    expect_out(c, "rstd", rstd);
    float *dx = buf(c, (size_t)N * D), *dgamma = buf(c, (size_t)D);
    for (int times = 1; times <= 2; times++) {
        rmsnorm_backward(dx, dgamma, f32(c, "dout"), rstd, f32(c, "x"), f32(c, "gamma"), N, D);
        (D == 1 ? expect_grad_cancelling : expect_grad)(c, "dx", dx, times);
        expect_grad(c, "dgamma", dgamma, times);
    }
}

/* Three training batches (each output, then the last one's statistics and
 * the running averages they leave), the backward of the last; then the
 * evaluation forward with the running averages and its backward. */
static void check_batchnorm(Case *c) {
    const GoldTensor *x = need(c, "x0");
    const int B = x->dims[0], N = x->dims[1], D = x->dims[2];
    const size_t n = (size_t)B * N * D;
    const int *lens = maybe(c, "lens") ? i32(c, "lens") : NULL;
    const float eps = f32(c, "eps")[0], *gamma = f32(c, "gamma"), *beta = f32(c, "beta");
    float *out = buf(c, n), *mean = buf(c, (size_t)D), *rstd = buf(c, (size_t)D);
    float *running_mean = buf(c, (size_t)D), *running_var = buf(c, (size_t)D);
    for (int d = 0; d < D; d++) running_var[d] = 1.0f;   /* as torch starts them */
    for (int k = 0; k < 3; k++) {
        char xk[8], outk[8];
        snprintf(xk, sizeof xk, "x%d", k);
        snprintf(outk, sizeof outk, "out%d", k);
        batchnorm_forward(out, mean, rstd, running_mean, running_var, f32(c, xk), gamma, beta, lens, B, N, D, eps,
                          BATCHNORM_MOMENTUM);
        expect_out(c, outk, out);
    }
    expect_out(c, "mean", mean);
    expect_out(c, "rstd", rstd);
    expect_out(c, "running_mean", running_mean);
    expect_out(c, "running_var", running_var);
    float *dx = buf(c, n), *dgamma = buf(c, (size_t)D), *dbeta = buf(c, (size_t)D);
    for (int times = 1; times <= 2; times++) {
        batchnorm_backward(dx, dgamma, dbeta, f32(c, "dout"), mean, rstd, f32(c, "x2"), gamma, lens, B, N, D, 1);
        expect_grad(c, "dx", dx, times);
        expect_grad(c, "dgamma", dgamma, times);
        expect_grad(c, "dbeta", dbeta, times);
    }
    float *dx_eval = buf(c, n), *dgamma_eval = buf(c, (size_t)D), *dbeta_eval = buf(c, (size_t)D);
    batchnorm_forward_running(out, mean, rstd, f32(c, "x_eval"), gamma, beta, running_mean, running_var, B * N, D,
                              eps);
    expect_out(c, "out_eval", out);
    for (int times = 1; times <= 2; times++) {
        batchnorm_backward(dx_eval, dgamma_eval, dbeta_eval, f32(c, "dout_eval"), mean, rstd, f32(c, "x_eval"),
                           gamma, NULL, B, N, D, 0);
        expect_grad(c, "dx_eval", dx_eval, times);
        expect_grad(c, "dgamma_eval", dgamma_eval, times);
        expect_grad(c, "dbeta_eval", dbeta_eval, times);
    }
}

/* config = {channels_in, rows, cols, channels_out, K, stride, pad}; no b: no bias. The
 * product goes through sgemm, so every case runs on each backend. */
static void check_conv2d_once(Case *c) {
    if (need(c, "config")->count != 7) fail_msg("golden conv2d/%s: config should hold 7 numbers", c->name);
    const int *k = i32(c, "config");
    const Conv2dSpec s = {.channels_in = k[0], .rows = k[1], .cols = k[2], .channels_out = k[3], .K = k[4],
                          .stride = k[5], .pad = k[6]};
    if (conv2d_check(&s) < 0) fail_msg("golden conv2d/%s: %s", c->name, last_error());
    const GoldTensor *images = need(c, "images"), *W = need(c, "W");
    const int B = images->dims[0];
    assert_int_equal(need(c, "out")->count, (size_t)B * s.channels_out * conv2d_rows_out(&s) * conv2d_cols_out(&s));
    const float *bias = f32_or_null(c, "b");
    float *out = buf(c, need(c, "out")->count), *cache = buf(c, conv2d_cache_floats(&s, B));
    float *scratch = buf(c, conv2d_scratch_floats(&s)), *dimages = buf(c, images->count);
    float *dW = buf(c, W->count), *db = buf(c, (size_t)s.channels_out);
    conv2d_forward(out, cache, images->data, W->data, bias, &s, B);
    expect_out(c, "out", out);
    for (int times = 1; times <= 2; times++) {
        conv2d_backward(dimages, dW, bias ? db : NULL, scratch, f32(c, "dout"), cache, W->data, &s, B);
        expect_grad(c, "dimages", dimages, times);
        expect_grad(c, "dW", dW, times);
        if (bias) expect_grad(c, "db", db, times);
    }
}
static void check_conv2d(Case *c) { on_each_backend(c, check_conv2d_once); }

/* config = {channels, rows, cols, K, stride}. argmax must be PyTorch's indices exactly: in the
 * "ties" cases that is the rule "the first pixel of the window in row-major order". */
static void check_maxpool2d(Case *c) {
    if (need(c, "config")->count != 5) fail_msg("golden maxpool2d/%s: config should hold 5 numbers", c->name);
    const int *k = i32(c, "config");
    const MaxPool2dSpec s = {.channels = k[0], .rows = k[1], .cols = k[2], .K = k[3], .stride = k[4]};
    if (maxpool2d_check(&s) < 0) fail_msg("golden maxpool2d/%s: %s", c->name, last_error());
    const GoldTensor *images = need(c, "images"), *want_argmax = need(c, "argmax");
    const int B = images->dims[0];
    const size_t n_out = (size_t)B * s.channels * maxpool2d_rows_out(&s) * maxpool2d_cols_out(&s);
    assert_int_equal(want_argmax->count, n_out);
    const int *want = i32(c, "argmax");
    float *out = buf(c, n_out), *dimages = buf(c, images->count);
    int *argmax = (int *)buf(c, (n_out * sizeof(int) + sizeof(float) - 1) / sizeof(float));
    maxpool2d_forward(out, argmax, images->data, &s, B);
    expect_out(c, "out", out);
    for (size_t i = 0; i < n_out; i++)
        if (argmax[i] != want[i]) {
            char idx[96];
            format_index(idx, sizeof idx, i, want_argmax);
            print_error("golden %s/%s: argmax: element %zu %s: got %d, want %d\n", c->layer, c->name, i, idx,
                        argmax[i], want[i]);
            c->failures++;
            break;
        }
    for (int times = 1; times <= 2; times++) {
        maxpool2d_backward(dimages, f32(c, "dout"), argmax, &s, B);
        expect_grad(c, "dimages", dimages, times);
    }
}

static void check_swiglu(Case *c) {
    int n = need(c, "a")->dims[0];
    float *h = buf(c, (size_t)n), *da = buf(c, (size_t)n), *dg = buf(c, (size_t)n);
    swiglu_forward(h, f32(c, "a"), f32(c, "g"), n);
    expect_out(c, "h", h);
    for (int times = 1; times <= 2; times++) {
        swiglu_backward(da, dg, f32(c, "dh"), f32(c, "a"), f32(c, "g"), n);
        expect_grad(c, "da", da, times);
        expect_grad(c, "dg", dg, times);
    }
}

/* config = {E, k, renorm, mlp, train}: the mixture of experts (moe.h) from
 * the case's U, W_r and experts (C's layout), its output, routing, aux loss
 * and dropped count, and the gradient of sum(out * dout) + alpha aux. */
static void check_moe(Case *c) {
    const GoldTensor *U = need(c, "U");
    const int *config = i32(c, "config");
    const int R = U->dims[0], D = U->dims[1], E = config[0], k = config[1];
    BlockSpec s;
    memset(&s, 0, sizeof s);
    s.D = D;
    s.mlp = (BlockMlp)config[3];
    s.moe = (BlockMoe){E, k, f32(c, "alpha")[0], f32(c, "capacity")[0], config[2]};
    /* F from one expert's size: D F 3 (SwiGLU), or 2 D F + F + D */
    const size_t per = need(c, "experts")->count / (size_t)E;
    s.F = s.mlp == BLOCK_MLP_SWIGLU ? (int)(per / (3 * (size_t)D)) : (int)((per - (size_t)D) / (2 * (size_t)D + 1));
    assert_int_equal(moe_param_count(&s), (size_t)D * E + per * E);
    BlockWeights w, dw;
    memset(&w, 0, sizeof w);
    memset(&dw, 0, sizeof dw);
    w.W_r = (float *)f32(c, "W_r");
    w.experts = (float *)f32(c, "experts");
    dw.W_r = buf(c, (size_t)D * E);
    dw.experts = buf(c, per * E);
    BlockMoeCache mc;
    moe_cache_layout(&s, R, buf(c, moe_cache_layout(&s, R, NULL, &mc)), &mc);
    float *out = buf(c, (size_t)R * D), *dU = buf(c, (size_t)R * D), *scratch = buf(c, moe_scratch_floats(&s, R));
    moe_forward(out, &mc, f32(c, "U"), &s, &w, R, config[4]);
    expect_out(c, "out", out);
    expect_out(c, "P", mc.P);
    const int *choice = i32(c, "choice");
    for (int i = 0; i < R * k; i++) assert_int_equal(mc.choice[i], choice[i]);
    float aux = mc.stats[0];
    expect_out(c, "aux", &aux);
    assert_int_equal((int)mc.stats[1], i32(c, "dropped")[0]);
    for (int times = 1; times <= 2; times++) {
        moe_backward(dU, &dw, scratch, f32(c, "dout"), &mc, f32(c, "U"), &s, &w, R);
        expect_grad(c, "dU", dU, times);
        expect_grad(c, "dW_r", dw.W_r, times);
        expect_grad(c, "dexperts", dw.experts, times);
    }
}

/* The tensors of a BlockWeights by their names in the golden file (NULL
 * data: the spec has no such tensor, and neither has the case). A decoder
 * block's cross-attention tensors are cross_W_Q, cross_W_KV, cross_W_O,
 * cross_b_O and its norm normc_*. */
enum { BLOCK_TENSORS = 18 };
static void block_tensors(const BlockWeights *w, const char *names[BLOCK_TENSORS], float *data[BLOCK_TENSORS]) {
    const char *n[BLOCK_TENSORS] = {"W_QKV", "W_O", "b_O", "norm1_gamma", "norm1_beta", "cross_W_Q",
                                    "cross_W_KV", "cross_W_O", "cross_b_O", "normc_gamma", "normc_beta", "W_1",
                                    "b_1", "W_3", "W_2", "b_2", "norm2_gamma", "norm2_beta"};
    float *d[BLOCK_TENSORS] = {w->attn.W_QKV, w->attn.W_O, w->attn.b_O, w->norm1_gamma, w->norm1_beta,
                               w->cross.W_Q, w->cross.W_KV, w->cross.W_O, w->cross.b_O, w->normc_gamma,
                               w->normc_beta, w->W_1, w->b_1, w->W_3, w->W_2, w->b_2, w->norm2_gamma,
                               w->norm2_beta};
    for (int i = 0; i < BLOCK_TENSORS; i++) {
        names[i] = n[i];
        data[i] = d[i];
    }
}

/* config = {H, norm placement, norm, mlp, causal} (the enums of block.h);
 * the case's tensors fill the block's one parameter buffer; run with the
 * given attention (plain or fused: same results within rounding). A case
 * with a memory M [B, N_M, D] (and maybe mem_lens) is a decoder block
 * (spec.cross = 1): dM is checked too. */
static void check_block_with(Case *c, MultiHeadAttention attention) {
    const GoldTensor *X = need(c, "X"), *W_QKV = need(c, "W_QKV"), *W_1 = maybe(c, "W_1"), *M = maybe(c, "M");
    const int *config = i32(c, "config");
    int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = config[0], N_M = M ? M->dims[1] : 0;
    BlockSpec s = {D, H, W_QKV->dims[1] / (3 * H), W_1 ? W_1->dims[1] : 0, (BlockNormPlace)config[1],
                   (BlockNorm)config[2], (BlockMlp)config[3], 0.0f, attention, config[4], M != NULL, 0.0f, 0, 0.0f,
                    0, {0}};
    const int *lens = maybe(c, "lens") ? i32(c, "lens") : NULL;
    const BlockMemory mem = {M ? M->data : NULL, maybe(c, "mem_lens") ? i32(c, "mem_lens") : NULL, N_M};
    size_t n_params = block_param_count(&s);
    float *params = buf(c, n_params), *dparams = buf(c, n_params);
    BlockWeights w = block_weights_view(&s, params), dw = block_weights_view(&s, dparams);
    const char *names[BLOCK_TENSORS];
    float *data[BLOCK_TENSORS], *grads[BLOCK_TENSORS];
    block_tensors(&w, names, data);
    block_tensors(&dw, names, grads);
    size_t filled = 0;
    for (int i = 0; i < BLOCK_TENSORS; i++) {
        const GoldTensor *t = maybe(c, names[i]);
        if ((t != NULL) != (data[i] != NULL))
            fail_msg("golden %s/%s: tensor %s is %s the file but %s the C block", c->layer, c->name, names[i],
                     t ? "in" : "not in", data[i] ? "in" : "not in");
        if (t == NULL) continue;
        memcpy(data[i], t->data, sizeof(float) * t->count);
        filled += t->count;
    }
    assert_int_equal(filled, n_params);   /* every parameter came from the file */
    size_t nX = (size_t)B * N * D, nM = (size_t)B * N_M * D;
    float *Y = buf(c, nX);
    const BlockCache cache = block_cache_view(&s, B, N, N_M, buf(c, block_cache_floats(&s, B, N, N_M)));
    float *scratch = buf(c, block_scratch_floats(&s, B, N, N_M)), *dX = buf(c, nX);
    float *dM = M ? buf(c, nM) : NULL;
    block_forward(Y, &cache, X->data, &s, &w, lens, M ? &mem : NULL, B, N, 0, NULL);
    /* Y sums terms of size 1 to 3 (X and the two branches), which cancel to
     * near 0 in places: a few float32 roundings of those terms (1e-6) are
     * the floor there, more than ATOL_OUT allows. */
    expect_times(c, "Y", Y, 1, RTOL_OUT, 4e-6, 0);
    for (int times = 1; times <= 2; times++) {
        block_backward(dX, dM, &dw, scratch, f32(c, "dY"), &cache, X->data, &s, &w, lens, M ? &mem : NULL, B, N);
        expect_grad(c, "dX", dX, times);
        if (M) expect_grad(c, "dM", dM, times);
        for (int i = 0; i < BLOCK_TENSORS; i++) {
            if (grads[i] == NULL) continue;
            char dname[32];
            snprintf(dname, sizeof dname, "d%s", names[i]);
            expect_grad(c, dname, grads[i], times);
        }
    }
}

static void check_block_plain(Case *c) { check_block_with(c, MULTI_HEAD_PLAIN); }
static void check_block_fused(Case *c) { check_block_with(c, MULTI_HEAD_FUSED); }

/* Each case with chapter 05's plain and fused attention, on each backend
 * (a decoder block's self-attention too; its cross-attention has one path). */
static void check_block(Case *c) {
    on_each_backend(c, check_block_plain);
    const char *layer = c->layer;
    char labelled[64];
    snprintf(labelled, sizeof labelled, "%s with fused attention", layer);
    c->layer = labelled;
    on_each_backend(c, check_block_fused);
    c->layer = layer;
}

/* ------------------------------------------------------------ chapter 07 */

/* config = {channels, rows, cols, P, K}; D from W [D_in, D] */
static void check_patch_embed_once(Case *c) {
    const int *config = i32(c, "config");
    const GoldTensor *W = need(c, "W"), *images = need(c, "images");
    if (need(c, "config")->count != 5) fail_msg("golden patch_embed/%s: config should hold 5 numbers", c->name);
    const PatchEmbedSpec s = {.channels = config[0], .rows = config[1], .cols = config[2], .P = config[3],
                              .D = W->dims[1], .K = config[4]};
    const int B = images->dims[0], N = patch_embed_count(&s);
    float *out = buf(c, (size_t)B * N * s.D), *cache = buf(c, patch_embed_cache_floats(&s, B));
    float *scratch = buf(c, patch_embed_scratch_floats(&s, B)), *dimages = buf(c, images->count);
    float *dW = buf(c, W->count), *db = buf(c, (size_t)s.D);
    patch_embed_forward(out, cache, images->data, W->data, f32(c, "b"), &s, B);
    expect_out(c, "out", out);
    for (int times = 1; times <= 2; times++) {
        patch_embed_backward(dimages, dW, db, scratch, f32(c, "dout"), cache, W->data, &s, B);
        expect_grad(c, "dimages", dimages, times);
        expect_grad(c, "dW", dW, times);
        expect_grad(c, "db", db, times);
    }
}
static void check_patch_embed(Case *c) { on_each_backend(c, check_patch_embed_once); }

/* The whole ViT: every parameter of vit_create's Params comes from the file
 * by its name, and every gradient is compared with d<name>. The loss is the
 * mean cross-entropy; backward runs twice (+=). The layers' tolerances
 * hold for the whole model too (ATTN_GOLDEN_VERBOSE=1 prints how much of
 * them it uses). */
static void check_vit_once(Case *c) {
    const int *k = i32(c, "config");
    const GoldTensor *images = need(c, "images");
    const int B = images->dims[0];
    if (need(c, "config")->count != 12) fail_msg("golden vit/%s: config should hold 12 numbers", c->name);
    VitConfig cfg = {.patch = {.channels = k[0], .rows = k[1], .cols = k[2], .P = k[3], .D = k[4], .K = k[11]},
                     .layers = k[5],
                     .heads = k[6], .ff = k[7], .dropout = 0.0f, .pool = (VitPool)k[8], .pos = (VitPos)k[9],
                     .classes = k[10]};
    Vit v;
    if (vit_create(&v, &cfg, B, 1) < 0) fail_msg("golden vit/%s: %s", c->name, last_error());
    size_t filled = 0;
    for (int i = 0; i < v.params.n_tensors; i++) {
        const ParamTensor *pt = &v.params.tensors[i];
        const GoldTensor *t = need(c, pt->name);
        if (t->count != pt->count)
            fail_msg("golden vit/%s: %s has %zu numbers in the file, %zu in the C model", c->name, pt->name, t->count,
                     pt->count);
        memcpy(v.params.data + pt->offset, t->data, sizeof(float) * pt->count);
        filled += pt->count;
    }
    assert_int_equal(filled, v.params.size);
    const int *targets = i32(c, "targets");
    double loss = vit_forward(&v, images->data, targets, B);
    expect_out(c, "logits", v.logits);
    float loss_f = (float)loss;
    expect_out(c, "loss", &loss_f);
    params_zero_grad(&v.params);
    for (int times = 1; times <= 2; times++) {
        vit_backward(&v, targets);
        for (int i = 0; i < v.params.n_tensors; i++) {
            const ParamTensor *pt = &v.params.tensors[i];
            char dname[64];
            snprintf(dname, sizeof dname, "d%s", pt->name);
            expect_grad(c, dname, v.params.grad + pt->offset, times);
        }
    }
    vit_free(&v);
}
static void check_vit(Case *c) { on_each_backend(c, check_vit_once); }

/* ------------------------------------------------------------ the table */

static const GoldLayer LAYERS[] = {
    {"linear", check_linear},
    {"embedding", check_embedding},
    {"tanh", check_tanh},
    {"sigmoid", check_sigmoid},
    {"relu", check_relu},
    {"gelu", check_gelu},                                 /* chapter 06's MLP */
    {"gelu_tanh", check_gelu_tanh},
    {"layernorm", check_layernorm},                       /* chapter 06 */
    {"softmax", check_softmax},
    {"log_softmax", check_log_softmax},
    {"cross_entropy", check_cross_entropy},
    {"rnn_cell", check_rnn_cell},
    {"gru_cell", check_gru_cell},
    {"lstm_cell", check_lstm_cell},
    {"additive_attention", check_additive_attention},     /* chapter 02 */
    {"attention_context", check_attention_context},       /* chapter 02 */
    {"attention", check_attention},                       /* chapter 03 */
    {"cross_attention", check_cross_attention},           /* chapter 03 */
    {"self_attention", check_self_attention},             /* chapter 04 */
    {"positional_encoding", check_positional_encoding},   /* chapter 04 */
    {"multi_head", check_multi_head},                     /* chapter 05 */
    {"rope", check_rope},                                 /* chapter 06: rotary positions */
    {"multi_head_rope", check_multi_head},                /* chapter 06: rope_attention.h, chapter 05's with RoPE */
    {"rmsnorm", check_rmsnorm},                           /* chapter 06 */
    {"batchnorm", check_batchnorm},                       /* chapter 06: nn/batchnorm.h */
    {"conv2d", check_conv2d},                             /* nn/conv2d.h: a CNN's convolution */
    {"maxpool2d", check_maxpool2d},                       /* nn/conv2d.h: max-pooling, ties */
    {"swiglu", check_swiglu},                             /* chapter 06 */
    {"block", check_block},                               /* chapter 06 */
    {"decoder_block", check_block},                       /* chapter 06: spec.cross = 1 */
    {"moe", check_moe},                                   /* chapter 06: a mixture of experts */
    {"sparse_attention", check_sparse_attention},         /* chapter 06, part 5: window and global blocks */
    {"linformer", check_linformer},                       /* chapter 06, part 5: keys and values projected to k */
    {"patch_embed", check_patch_embed},                   /* chapter 07: conv2d, stride = kernel */
    {"vit", check_vit},                                   /* chapter 07: the whole model */
};

/* A small parameter's gradient (entries about 1e-4) off by 5% in every entry:
 * the fixed floor ATOL_GRAD = 1e-5 let it pass; the floor scaled to the tensor
 * (gold_atol_for_scale) catches it, and still passes the float32 rounding of
 * the right answer (1 ulp of each entry). */
static void test_small_error_in_a_small_gradient_caught(void **state) {
    (void)state;
    enum { N = 64 };
    float want[N], wrong[N], rounded[N];
    for (int i = 0; i < N; i++) {
        want[i] = 1e-4f * (float)((i * 37) % 19 - 9) / 9.0f;
        wrong[i] = want[i] * 1.05f;
        rounded[i] = nextafterf(want[i], 1.0f);
    }
    assert_true(gold_compare(wrong, want, N, RTOL_GRAD, ATOL_GRAD).ok);   /* the old rule passed it */
    const double atol = gold_atol_for_scale(want, N, ATOL_GRAD);
    assert_true(atol < 1e-8);
    GoldDiff d = gold_compare(wrong, want, N, RTOL_GRAD, atol);
    assert_false(d.ok);
    assert_true(gold_compare(rounded, want, N, RTOL_GRAD, atol).ok);
    /* a tensor of scale 1 or more keeps the whole floor */
    const float big[2] = {3.0f, -0.5f};
    assert_true(gold_atol_for_scale(big, 2, ATOL_GRAD) == ATOL_GRAD);
}

int main(void) {
    enum { N_LAYERS = sizeof LAYERS / sizeof LAYERS[0] };
    struct CMUnitTest tests[N_LAYERS + 1];
    for (int i = 0; i < N_LAYERS; i++)
        tests[i] = (struct CMUnitTest){LAYERS[i].name, run_golden, NULL, NULL, (void *)&LAYERS[i]};
    tests[N_LAYERS] = (struct CMUnitTest){"small_error_in_a_small_gradient_caught",
                                          test_small_error_in_a_small_gradient_caught, NULL, NULL, NULL};
    return _cmocka_run_group_tests("golden", tests, N_LAYERS + 1, NULL, NULL);
}
