/* bench_transformer.c - chapter 06's training step against the machine's FMA peak.
 *
 *   build/bench/bench_transformer [--out DIR] [--reps N] [--layers L] [--dim D] [--heads H]
 *                                 [--ff F] [--batch B] [--len T] [--vocab V] [--detail]
 *
 * The model: chapter 06's encoder-decoder transformer (chapters/06_transformer/
 * transformer.h) with its default switches (pre-norm, LayerNorm, GELU MLP,
 * sinusoidal positions, label smoothing 0.1, dropout 0, plain attention) at a
 * size where the matrix products dominate: by default D = 256, L = 4 encoder
 * and 4 decoder blocks, H = 4 heads of 64, F = 1024, on a synthetic batch of
 * B = 64 sequences, source and target both T = 32 tokens, vocabularies of
 * V = 64 (no padding). One training step is what bench_train_step.c times:
 * zero the gradients, forward, backward, clip the gradient norm to 1, Adam.
 *
 * The FLOPs of one step are counted from the list of matrix products the step
 * issues (step_gemms() below: every sgemm call of transformer.c, block.c,
 * multi_head.c, multi_head_cross.c and attention.c for these sizes, with its
 * shape, transposes, strides and how many times it runs), 2 M N K FLOPs each.
 * With R_e = B T source rows, R_d = B T_d target rows (T_d = T here), HD = H D_H:
 *
 *   forward = 2 L [ R_e (3 D HD + HD D + 2 D F)                    encoder projections, MLP
 *                   + 2 B H T^2 D_H ]                              encoder Q K^T and A V
 *           + 2 L [ R_d (3 D HD + HD D + D HD + HD D + 2 D F)      decoder self, cross Q, cross W_O, MLP
 *                   + R_e D 2 HD                                   cross K, V of the memory
 *                   + 2 B H T_d^2 D_H + 2 B H T_d T D_H ]          causal self-attention, cross-attention
 *           + 2 R_d D V                                            output layer
 *   backward = 2 x forward (each product's two gradient products; the first
 *              block's input gradient is computed too, for the embeddings)
 *   step     = 3 x forward.
 * The causal self-attention's products are counted whole (T_d x T_d): the
 * plain path computes them whole and masks afterwards. Not counted: softmax,
 * norms, GELU, residual sums, biases, embeddings, loss, clipping and Adam
 * (O(rows x D) or O(parameters) each, under 1% of the FLOPs at these sizes;
 * their TIME is in the breakdown below). The program checks that the list
 * and the formula agree.
 *
 * Timed, on avx512 (when the CPU has it) and avx2, with 1 and 2 threads, the
 * configurations taking turns step by step (median of --reps after a
 * warm-up). Each step is split into its forward + backward pass and the
 * optimizer (zero grad + clip + Adam), and the forward + backward pass is
 * compared with a REPLAY of its matrix products: the same list of sgemm
 * calls, the same shapes and strides, run back to back on buffers of their
 * own (so their operands are warmer in cache than inside the step: the replay
 * is a lower bound of the time the step spends in sgemm). Two groups:
 *   proj: the projections, the MLP and the output layer (big products that
 *         the sgemm driver splits over the threads);
 *   attn: Q K^T, A V and their gradients, one small product per (sequence,
 *         head) (T x T x D_H: below the driver's 2^19 multiply-adds, so one
 *         thread each);
 * and "other" = forward + backward - proj - attn: softmax, norms, GELU,
 * residuals, memsets, embeddings and the loss (the element-wise kernels run
 * on one thread).
 *
 * The peak: a loop of independent FMAs on registers (bench_sgemm.c's), with
 * zmm registers for avx512 and ymm for avx2, on the same number of threads:
 * what the FMA units deliver at the clock this machine really runs. Printed
 * beside it: the nominal peak of one FMA unit, clock x lanes x 2 FLOPs, with
 * the clock from /proc/cpuinfo ("cpu MHz"; under a hypervisor often the base
 * clock), and how many FMA instructions per cycle the loop ran at that clock
 * (CPUID does not tell how many FMA units a core has; 2.0 means two busy
 * units). The fraction of peak reported is GFLOP/s of the step / the FMA
 * loop's. Everything but sgemm (softmax, norms, GELU, Adam, ...) runs on one
 * thread in this code base (only matmul.c and matmul_blocked.c use OpenMP).
 *
 * Writes DIR/transformer_peak.tsv (one row per backend and thread count: the
 * sizes, GFLOP per step, ms, GFLOP/s, the peak and the fraction, the split).
 * Prints figures and ratios; never passes or fails. */
#include <immintrin.h>
#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_fma.h"
#include "06_transformer/transformer.h"
#include "data/vocab.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "nn/optim.h"
#include "nn/params.h"
#include "train/seq2seq.h"
#include "util/rng.h"

/* ---- The sizes ---------------------------------------------------------------------- */

typedef struct {
    int L, D, H, F;     /* blocks per stack, width, heads, MLP width */
    int B, T, V;        /* batch, source = target length, vocabulary (source and target) */
} Sizes;

/* ---- The matrix products of one training step --------------------------------------- */

enum { GEMM_PROJ = 0, GEMM_ATTN = 1, N_GROUPS = 2 };

/* One sgemm call (matmul.h's arguments, alpha aside), issued `count` times per step. */
typedef struct {
    char what[48];      /* where it comes from: "dec self: [Q|K|V] = X W_QKV" */
    int group;          /* GEMM_PROJ or GEMM_ATTN */
    int backward;       /* 0: forward pass, 1: backward pass */
    long count;
    int ta, tb, M, N, K, lda, ldb, ldc;
    float beta;
} GemmCall;

enum { MAX_GEMMS = 64 };

typedef struct {
    GemmCall call[MAX_GEMMS];
    int n;
} GemmList;

static void add(GemmList *g, const char *prefix, const char *what, int group, int backward, long count, int ta,
                int tb, int M, int N, int K, int lda, int ldb, int ldc, float beta) {
    if (g->n == MAX_GEMMS) {
        fprintf(stderr, "bench_transformer: MAX_GEMMS too small\n");
        exit(1);
    }
    GemmCall *c = &g->call[g->n++];
    *c = (GemmCall){"", group, backward, count, ta, tb, M, N, K, lda, ldb, ldc, beta};
    snprintf(c->what, sizeof c->what, "%s%s", prefix, what);
}

/* linear_forward / linear_backward (common/nn/layers.c) of in [R, I] W [I, O]:
 * out = in W;  din += dout W^T;  dW += in^T dout. */
static void add_linear(GemmList *g, const char *name, long count, int R, int I, int O) {
    add(g, name, "out = in W", GEMM_PROJ, 0, count, 0, 0, R, O, I, I, O, O, 0.0f);
    add(g, name, "din += dout W^T", GEMM_PROJ, 1, count, 0, 1, R, I, O, O, O, I, 1.0f);
    add(g, name, "dW += in^T dout", GEMM_PROJ, 1, count, 1, 0, I, O, R, I, O, O, 1.0f);
}

/* Chapter 05's multi_head_forward/backward (plain path) for R = B N rows:
 * [Q|K|V] = X W_QKV, per (sequence, head) chapter 03's dot attention on
 * column blocks of stride 3 HD, O = Y W_O + b_O; `count` layers. */
static void add_self_attention(GemmList *g, const char *prefix, long count, int B, int N, int D, int H, int D_H) {
    const int HD = H * D_H, R = B * N;
    const long heads = count * B * H;
    add(g, prefix, "[Q|K|V] = X W_QKV", GEMM_PROJ, 0, count, 0, 0, R, 3 * HD, D, D, 3 * HD, 3 * HD, 0.0f);
    add(g, prefix, "E = Q_h K_h^T", GEMM_ATTN, 0, heads, 0, 1, N, N, D_H, 3 * HD, 3 * HD, N, 0.0f);
    add(g, prefix, "Y_h = A V_h", GEMM_ATTN, 0, heads, 0, 0, N, D_H, N, N, 3 * HD, HD, 0.0f);
    add(g, prefix, "O = Y W_O", GEMM_PROJ, 0, count, 0, 0, R, D, HD, HD, D, D, 0.0f);
    add(g, prefix, "dY = dO W_O^T", GEMM_PROJ, 1, count, 0, 1, R, HD, D, D, D, HD, 0.0f);
    add(g, prefix, "dW_O += Y^T dO", GEMM_PROJ, 1, count, 1, 0, HD, D, R, HD, D, D, 1.0f);
    add(g, prefix, "dA = dY_h V_h^T", GEMM_ATTN, 1, heads, 0, 1, N, N, D_H, HD, 3 * HD, N, 0.0f);
    add(g, prefix, "dV_h += A^T dY_h", GEMM_ATTN, 1, heads, 1, 0, N, D_H, N, N, HD, 3 * HD, 1.0f);
    add(g, prefix, "dQ_h += dE K_h", GEMM_ATTN, 1, heads, 0, 0, N, D_H, N, N, 3 * HD, 3 * HD, 1.0f);
    add(g, prefix, "dK_h += dE^T Q_h", GEMM_ATTN, 1, heads, 1, 0, N, D_H, N, N, 3 * HD, 3 * HD, 1.0f);
    add(g, prefix, "dW_QKV += X^T d[QKV]", GEMM_PROJ, 1, count, 1, 0, D, 3 * HD, R, D, 3 * HD, 3 * HD, 1.0f);
    add(g, prefix, "dX += d[QKV] W_QKV^T", GEMM_PROJ, 1, count, 0, 1, R, D, 3 * HD, 3 * HD, 3 * HD, D, 1.0f);
}

/* multi_head_cross.c: queries from R = B N decoder rows, keys and values from
 * R_M = B N_M memory rows; `count` layers. */
static void add_cross_attention(GemmList *g, const char *prefix, long count, int B, int N, int N_M, int D, int H,
                                int D_H) {
    const int HD = H * D_H, R = B * N, R_M = B * N_M;
    const long heads = count * B * H;
    add(g, prefix, "Q = X W_Q", GEMM_PROJ, 0, count, 0, 0, R, HD, D, D, HD, HD, 0.0f);
    add(g, prefix, "[K|V] = M W_KV", GEMM_PROJ, 0, count, 0, 0, R_M, 2 * HD, D, D, 2 * HD, 2 * HD, 0.0f);
    add(g, prefix, "E = Q_h K_h^T", GEMM_ATTN, 0, heads, 0, 1, N, N_M, D_H, HD, 2 * HD, N_M, 0.0f);
    add(g, prefix, "Y_h = A V_h", GEMM_ATTN, 0, heads, 0, 0, N, D_H, N_M, N_M, 2 * HD, HD, 0.0f);
    add(g, prefix, "O = Y W_O", GEMM_PROJ, 0, count, 0, 0, R, D, HD, HD, D, D, 0.0f);
    add(g, prefix, "dY += dO W_O^T", GEMM_PROJ, 1, count, 0, 1, R, HD, D, D, D, HD, 1.0f);
    add(g, prefix, "dW_O += Y^T dO", GEMM_PROJ, 1, count, 1, 0, HD, D, R, HD, D, D, 1.0f);
    add(g, prefix, "dA = dY_h V_h^T", GEMM_ATTN, 1, heads, 0, 1, N, N_M, D_H, HD, 2 * HD, N_M, 0.0f);
    add(g, prefix, "dV_h += A^T dY_h", GEMM_ATTN, 1, heads, 1, 0, N_M, D_H, N, N_M, HD, 2 * HD, 1.0f);
    add(g, prefix, "dQ_h += dE K_h", GEMM_ATTN, 1, heads, 0, 0, N, D_H, N_M, N_M, 2 * HD, HD, 1.0f);
    add(g, prefix, "dK_h += dE^T Q_h", GEMM_ATTN, 1, heads, 1, 0, N_M, D_H, N, N_M, HD, 2 * HD, 1.0f);
    add(g, prefix, "dM += d[K|V] W_KV^T", GEMM_PROJ, 1, count, 0, 1, R_M, D, 2 * HD, 2 * HD, 2 * HD, D, 1.0f);
    add(g, prefix, "dW_KV += M^T d[K|V]", GEMM_PROJ, 1, count, 1, 0, D, 2 * HD, R_M, D, 2 * HD, 2 * HD, 1.0f);
    add(g, prefix, "dX += dQ W_Q^T", GEMM_PROJ, 1, count, 0, 1, R, D, HD, HD, HD, D, 1.0f);
    add(g, prefix, "dW_Q += X^T dQ", GEMM_PROJ, 1, count, 1, 0, D, HD, R, D, HD, HD, 1.0f);
}

/* Every sgemm call of one training step of transformer_train_step(). */
static GemmList step_gemms(const Sizes *z) {
    GemmList g = {.n = 0};
    const int D_H = z->D / z->H, R = z->B * z->T;
    /* encoder blocks: self-attention, MLP D -> F -> D */
    add_self_attention(&g, "enc self: ", z->L, z->B, z->T, z->D, z->H, D_H);
    add_linear(&g, "enc W_1: ", z->L, R, z->D, z->F);
    add_linear(&g, "enc W_2: ", z->L, R, z->F, z->D);
    /* decoder blocks: causal self-attention, cross-attention, MLP */
    add_self_attention(&g, "dec self: ", z->L, z->B, z->T, z->D, z->H, D_H);
    add_cross_attention(&g, "dec cross: ", z->L, z->B, z->T, z->T, z->D, z->H, D_H);
    add_linear(&g, "dec W_1: ", z->L, R, z->D, z->F);
    add_linear(&g, "dec W_2: ", z->L, R, z->F, z->D);
    /* output layer */
    add_linear(&g, "output: ", 1, R, z->D, z->V);
    return g;
}

static double call_flops(const GemmCall *c) { return 2.0 * c->count * (double)c->M * c->N * c->K; }

/* The header's formula, forward pass (T_d = T). */
static double formula_forward_flops(const Sizes *z) {
    const double L = z->L, D = z->D, H = z->H, D_H = (double)z->D / z->H, HD = H * D_H, F = z->F, V = z->V;
    const double B = z->B, T = z->T, Td = z->T, Re = B * T, Rd = B * Td;
    const double enc = Re * (3 * D * HD + HD * D + 2 * D * F) + 2 * B * H * T * T * D_H;
    const double dec = Rd * (3 * D * HD + HD * D + D * HD + HD * D + 2 * D * F) + Re * D * 2 * HD +
                       2 * B * H * Td * Td * D_H + 2 * B * H * Td * T * D_H;
    return 2 * L * enc + 2 * L * dec + 2 * Rd * D * V;
}

/* ---- Replaying the products --------------------------------------------------------- */

/* Floats a stored operand spans: `rows` rows of stride ld, the last one `cols` long. */
static size_t span(int rows, int cols, int ld) { return (size_t)(rows - 1) * ld + cols; }

typedef struct {
    float *A, *B, *C;
} ReplayBuffers;

static ReplayBuffers replay_alloc(const GemmList *g, Rng *rng) {
    size_t na = 1, nb = 1, nc = 1;
    for (int i = 0; i < g->n; i++) {
        const GemmCall *c = &g->call[i];
        size_t a = c->ta ? span(c->K, c->M, c->lda) : span(c->M, c->K, c->lda);
        size_t b = c->tb ? span(c->N, c->K, c->ldb) : span(c->K, c->N, c->ldb);
        size_t cc = span(c->M, c->N, c->ldc);
        if (a > na) na = a;
        if (b > nb) nb = b;
        if (cc > nc) nc = cc;
    }
    ReplayBuffers r = {xmalloc(sizeof(float) * na), xmalloc(sizeof(float) * nb), xmalloc(sizeof(float) * nc)};
    for (size_t i = 0; i < na; i++) r.A[i] = 0.02f * (rng_uniform(rng) - 0.5f);
    for (size_t i = 0; i < nb; i++) r.B[i] = 0.02f * (rng_uniform(rng) - 0.5f);
    for (size_t i = 0; i < nc; i++) r.C[i] = 0.0f;
    return r;
}

static void replay_free(ReplayBuffers *r) {
    free(r->A);
    free(r->B);
    free(r->C);
}

/* Run one call `count` times. */
static void replay_call(const GemmCall *c, const ReplayBuffers *r) {
    for (long k = 0; k < c->count; k++)
        sgemm(c->ta, c->tb, c->M, c->N, c->K, 1.0f, r->A, c->lda, r->B, c->ldb, c->beta, r->C, c->ldc);
}

/* Milliseconds to run every call of one group, each `count` times. */
static double replay_ms(const GemmList *g, int group, const ReplayBuffers *r) {
    double t0 = bench_now_ms();
    for (int i = 0; i < g->n; i++)
        if (g->call[i].group == group) replay_call(&g->call[i], r);
    return bench_now_ms() - t0;
}

/* ---- The machine's FMA peak: bench_fma.h ---- */

/* The "cpu MHz" of /proc/cpuinfo's first processor, or 0. */
static double cpu_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0.0;
    char line[256];
    double mhz = 0.0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "cpu MHz", 7) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) mhz = atof(colon + 1);
            break;
        }
    fclose(f);
    return mhz;
}

/* ---- The configurations --------------------------------------------------------------- */

typedef struct {
    const char *backend;
    int threads;
    int lanes;          /* FMA width of the backend's instruction set: 16 (zmm) or 8 (ymm) */
} Config;

static const Config CONFIGS[] = {{"avx512", 1, 16}, {"avx512", 2, 16}, {"avx2", 1, 8}, {"avx2", 2, 8}};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0], MAX_REPS = 64 };

static int config_runs_here(const Config *c) { return strcmp(c->backend, "avx512") != 0 || cpu_has_avx512f(); }

/* What one rep measures in one configuration, milliseconds. */
enum { M_STEP, M_FWD_BWD, M_OPTIM, M_PROJ, M_ATTN, N_MEASURES };

typedef struct {
    Transformer t;
    Batch batch;
    Adam opt;
} Model;

/* One training step as the chapters' loops do it: ms[M_STEP], ms[M_FWD_BWD], ms[M_OPTIM]. */
static double timed_step(Model *m, double *ms) {
    double t0 = bench_now_ms();
    params_zero_grad(&m->t.params);
    double t1 = bench_now_ms();
    double loss = transformer_train_step(&m->t, &m->batch, 1);
    double t2 = bench_now_ms();
    clip_grad_norm(&m->t.params, 1.0f);
    adam_step(&m->opt, &m->t.params, 1e-4f);
    double t3 = bench_now_ms();
    ms[M_STEP] = t3 - t0;
    ms[M_FWD_BWD] = t2 - t1;
    ms[M_OPTIM] = (t1 - t0) + (t3 - t2);
    return loss;
}

/* The model with chapter 06's default switches at sizes z, and a synthetic
 * batch: B rows of T random tokens (no padding), target <bos> y_1 .. y_{T-1}
 * in, y_1 .. y_{T-1} <eos> out. Returns 0 or -1 with fail(). */
static int model_create(Model *m, const Sizes *z) {
    memset(m, 0, sizeof *m);
    TransformerConfig cfg = {
        .layers = z->L,
        .block = {z->D, z->H, z->D / z->H, z->F, BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f,
                  MULTI_HEAD_PLAIN, 0, 0},
        .pos = POSITIONS_SINUSOIDAL,
        .label_smoothing = 0.1f,
        .kv_cache = 1,
    };
    if (transformer_create(&m->t, &cfg, z->V, z->V, z->T, z->T, z->B, 1) < 0) {
        transformer_free(&m->t);
        return -1;
    }
    Batch *b = &m->batch;
    batch_alloc(b, z->B, z->T, z->T - 1);
    b->batch = z->B;
    b->src_len = z->T;
    b->tgt_len = z->T;
    Rng rng;
    rng_seed(&rng, 3, 1);
    const int first = EOS_ID + 1;   /* ordinary tokens: after <pad>, <bos>, <eos> */
    for (int r = 0; r < z->B; r++) {
        b->src_lens[r] = z->T;
        b->tgt_lens[r] = z->T;
        int *src = b->src + (size_t)r * z->T, *tin = b->tgt_in + (size_t)r * z->T, *tout = b->tgt_out + (size_t)r * z->T;
        for (int i = 0; i < z->T; i++) src[i] = first + (int)rng_below(&rng, (uint32_t)(z->V - first));
        tin[0] = BOS_ID;
        for (int i = 0; i + 1 < z->T; i++) {
            tout[i] = first + (int)rng_below(&rng, (uint32_t)(z->V - first));
            tin[i + 1] = tout[i];
        }
        tout[z->T - 1] = EOS_ID;
    }
    if (adam_init(&m->opt, &m->t.params, 1e-4f, 0.0f) < 0) {
        batch_free(b);
        transformer_free(&m->t);
        return -1;
    }
    return 0;
}

static void model_free(Model *m) {
    adam_free(&m->opt);
    batch_free(&m->batch);
    transformer_free(&m->t);
}

/* --detail: GFLOP/s of each product of the step alone (its `count` calls
 * back to back), median of reps, in every configuration. */
static void print_detail(const GemmList *g, const ReplayBuffers *r, int reps, double step_flops) {
    static double samples[MAX_GEMMS][N_CONFIGS][MAX_REPS];
    for (int rep = 0; rep < reps; rep++)
        for (int c = 0; c < N_CONFIGS; c++) {
            if (!config_runs_here(&CONFIGS[c])) continue;
            backend_select(CONFIGS[c].backend);
            threads_set(CONFIGS[c].threads);
            for (int i = 0; i < g->n; i++) {
                double t0 = bench_now_ms();
                replay_call(&g->call[i], r);
                samples[i][c][rep] = bench_now_ms() - t0;
            }
        }
    printf("\nEach product of the step alone, GFLOP/s (median of %d; 'x' = calls per step):\n", reps);
    printf("%-34s %2s %16s %6s %6s", "product", "op", "M x N x K", "x", "FLOPs");
    for (int c = 0; c < N_CONFIGS; c++)
        if (config_runs_here(&CONFIGS[c])) printf(" %6s %dt", CONFIGS[c].backend, CONFIGS[c].threads);
    printf("\n");
    for (int i = 0; i < g->n; i++) {
        const GemmCall *call = &g->call[i];
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%dx%d", call->M, call->N, call->K);
        printf("%-34s %c%c %16s %6ld %5.1f%%", call->what, call->ta ? 't' : 'n', call->tb ? 't' : 'n', shape,
               call->count, 100.0 * call_flops(call) / step_flops);
        for (int c = 0; c < N_CONFIGS; c++) {
            if (!config_runs_here(&CONFIGS[c])) continue;
            qsort(samples[i][c], reps, sizeof(double), bench_compare_doubles);
            printf(" %9.1f", call_flops(call) / samples[i][c][reps / 2] * 1e-6);
        }
        printf("\n");
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_transformer [--out DIR] [--reps N] [--layers L] [--dim D] [--heads H] [--ff F]\n"
            "                         [--batch B] [--len T] [--vocab V] [--detail]\n"
            "  chapter 06's training step (pre-norm, LayerNorm, GELU, label smoothing 0.1) against the FMA peak\n"
            "  --out DIR   where to write transformer_peak.tsv (default bench/results)\n"
            "  --reps N    timed steps per figure, the median is reported (default 5, max %d)\n"
            "  --layers L  blocks in the encoder and in the decoder (default 4)\n"
            "  --dim D     model width (default 256)      --heads H  (default 4; D %% H == 0)\n"
            "  --ff F      MLP width (default 1024)       --batch B  sequences (default 64)\n"
            "  --len T     source and target tokens (default 32)\n"
            "  --vocab V   source and target vocabulary (default 64)\n"
            "  --detail    also time each matrix product of the step alone (GFLOP/s per shape)\n",
            MAX_REPS);
}

int main(int argc, char **argv) {
    const char *out_dir = "bench/results", *prog = "bench_transformer";
    int reps = 5, detail = 0;
    Sizes z = {4, 256, 4, 1024, 64, 32, 64};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--detail") == 0) {
            detail = 1;
        } else if (strcmp(a, "--out") == 0 && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (strcmp(a, "--reps") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], 1, MAX_REPS, &reps);
        } else if (strcmp(a, "--layers") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], 1, TRANSFORMER_MAX_LAYERS, &z.L);
        } else if (strcmp(a, "--dim") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], 1, 4096, &z.D);
        } else if (strcmp(a, "--heads") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], 1, 256, &z.H);
        } else if (strcmp(a, "--ff") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], 1, 65536, &z.F);
        } else if (strcmp(a, "--batch") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], 1, 4096, &z.B);
        } else if (strcmp(a, "--len") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], 2, 4096, &z.T);
        } else if (strcmp(a, "--vocab") == 0 && i + 1 < argc) {
            rc = bench_int_arg(prog, a, argv[++i], EOS_ID + 2, 1 << 20, &z.V);
        } else {
            fprintf(stderr, "%s: unknown or incomplete argument '%s' (try --help)\n", prog, a);
            return 2;
        }
        if (rc != 0) return 2;
    }
    if (z.D % z.H != 0) {
        fprintf(stderr, "%s: --dim %d is not a multiple of --heads %d\n", prog, z.D, z.H);
        return 2;
    }
    if (!cpu_has_avx2_fma()) {
        fprintf(stderr, "%s: this CPU has no AVX2/FMA; nothing to measure\n", prog);
        return 1;
    }

    /* The FLOPs of one step, from the list of products, checked against the formula. */
    const GemmList gemms = step_gemms(&z);
    double flops_fwd = 0.0, flops_bwd = 0.0, flops_group[N_GROUPS] = {0, 0};
    for (int i = 0; i < gemms.n; i++) {
        const GemmCall *c = &gemms.call[i];
        *(c->backward ? &flops_bwd : &flops_fwd) += call_flops(c);
        flops_group[c->group] += call_flops(c);
    }
    const double flops = flops_fwd + flops_bwd, formula = formula_forward_flops(&z);
    if (fabs(flops_fwd - formula) > 1e-9 * formula || fabs(flops_bwd - 2.0 * formula) > 1e-9 * formula) {
        fprintf(stderr, "%s: the product list (%.6g forward, %.6g backward FLOPs) disagrees with the formula (%.6g)\n",
                prog, flops_fwd, flops_bwd, formula);
        return 1;
    }

    Model m;
    if (model_create(&m, &z) < 0) {
        fprintf(stderr, "%s: %s\n", prog, last_error());
        return 1;
    }
    Rng rng;
    rng_seed(&rng, 5, 1);
    ReplayBuffers rb = replay_alloc(&gemms, &rng);

    const double load = bench_load_average();
    const int cores = omp_get_num_procs();
    printf("Chapter 06's training step against the FMA peak: L %d + %d blocks, D %d, H %d (D_H %d), F %d,\n"
           "pre-norm LayerNorm, GELU, label smoothing 0.1; synthetic batch B %d, source and target %d tokens,\n"
           "V %d; %zu parameters. Median of %d steps after a warm-up; load average %.2f on %d cores\n",
           z.L, z.L, z.D, z.H, z.D / z.H, z.F, z.B, z.T, z.V, m.t.params.size, reps, load, cores);
    if (load > 0.5)
        printf("WARNING: load average %.2f: other processes share the CPU; figures are slow and noisy\n", load);
    printf("FLOPs per step (matrix products, 2 M N K each): forward %.2f G, backward %.2f G, total %.2f G\n"
           "  of which projections + MLP + output %.2f G, attention products (Q K^T, A V) %.2f G\n",
           flops_fwd * 1e-9, flops_bwd * 1e-9, flops * 1e-9, flops_group[GEMM_PROJ] * 1e-9,
           flops_group[GEMM_ATTN] * 1e-9);

    /* The FMA peak of each configuration, before and after the steps (best kept:
     * this virtual machine's clock drifts). */
    fprintf(stderr, "measuring the FMA peak...\n");
    double peak[N_CONFIGS] = {0};
    for (int c = 0; c < N_CONFIGS; c++)
        if (config_runs_here(&CONFIGS[c])) peak[c] = fma_peak(CONFIGS[c].threads, CONFIGS[c].lanes);

    const long backoffs_before = threads_busy_backoffs();
    /* Warm-up, then reps rounds in which the configurations take turns. */
    static double samples[N_CONFIGS][N_MEASURES][MAX_REPS];
    double loss = 0.0, ms[N_MEASURES];
    for (int c = 0; c < N_CONFIGS; c++) {
        if (!config_runs_here(&CONFIGS[c])) continue;
        backend_select(CONFIGS[c].backend);
        threads_set(CONFIGS[c].threads);
        timed_step(&m, ms);
        replay_ms(&gemms, GEMM_PROJ, &rb);
        replay_ms(&gemms, GEMM_ATTN, &rb);
    }
    for (int r = 0; r < reps; r++) {
        fprintf(stderr, "\rrep %d of %d", r + 1, reps);
        for (int c = 0; c < N_CONFIGS; c++) {
            if (!config_runs_here(&CONFIGS[c])) continue;
            backend_select(CONFIGS[c].backend);
            threads_set(CONFIGS[c].threads);
            loss = timed_step(&m, ms);
            ms[M_PROJ] = replay_ms(&gemms, GEMM_PROJ, &rb);
            ms[M_ATTN] = replay_ms(&gemms, GEMM_ATTN, &rb);
            for (int k = 0; k < N_MEASURES; k++) samples[c][k][r] = ms[k];
        }
    }
    fprintf(stderr, "\n");
    for (int c = 0; c < N_CONFIGS; c++)
        if (config_runs_here(&CONFIGS[c])) {
            double p = fma_peak(CONFIGS[c].threads, CONFIGS[c].lanes);
            if (p > peak[c]) peak[c] = p;
        }
    model_free(&m);
    if (!isfinite(loss)) {
        fprintf(stderr, "%s: the loss is %g: a broken model is not worth timing\n", prog, loss);
        return 1;
    }

    double med[N_CONFIGS][N_MEASURES] = {{0}};
    for (int c = 0; c < N_CONFIGS; c++) {
        if (!config_runs_here(&CONFIGS[c])) continue;
        for (int k = 0; k < N_MEASURES; k++) {
            qsort(samples[c][k], reps, sizeof(double), bench_compare_doubles);
            med[c][k] = samples[c][k][reps / 2];
        }
    }

    /* The nominal peak per FMA unit: clock x lanes x 2 FLOPs. CPUID does not
     * tell how many FMA units a core has (1 or 2 for AVX-512 on Intel server
     * parts): the loop's figure over the per-unit one says how many it kept busy. */
    const double ghz = cpu_mhz() * 1e-3;
    printf("\nFMA peak (register-only FMA loop, this run):");
    for (int c = 0; c < N_CONFIGS; c++)
        if (peak[c] > 0) printf(" %s %dt %.1f;", CONFIGS[c].backend, CONFIGS[c].threads, peak[c]);
    printf(" GFLOP/s\n");
    if (ghz > 0) {
        const int c1 = peak[0] > 0 ? 0 : 2;   /* the widest instruction set, 1 thread */
        const double per_unit = ghz * CONFIGS[c1].lanes * 2.0;
        printf("nominal: %.2f GHz ('cpu MHz' of /proc/cpuinfo) x %d lanes x 2 FLOPs = %.1f GFLOP/s per FMA unit\n"
               "and core; the %s loop on 1 thread ran %.2f FMA instructions per cycle (a core with 2 FMA\n"
               "units: 2.00 at that clock; more: a turbo clock above it)\n",
               ghz, CONFIGS[c1].lanes, per_unit, CONFIGS[c1].backend, peak[c1] / per_unit);
    }

    printf("\n%-8s %3s %10s %9s %8s | %10s %8s %10s %10s %9s | %8s %8s\n", "backend", "thr", "step ms", "GFLOP/s",
           "of peak", "fwd+bwd ms", "optim ms", "proj ms", "attn ms", "other ms", "proj GF/s", "attn GF/s");
    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, prog, out_dir, "transformer_peak.tsv");
    if (!tsv) return 1;
    fprintf(tsv, "config\tbackend\tthreads\tgflop_per_step\tms\tgflops\tpeak_gflops\tpeak_fraction\tfwd_bwd_ms"
                 "\toptim_ms\tproj_ms\tattn_ms\tother_ms\tproj_gflops\tattn_gflops\treps\n");
    char config[96];
    snprintf(config, sizeof config, "L%d D%d H%d F%d B%d T%d V%d", z.L, z.D, z.H, z.F, z.B, z.T, z.V);
    for (int c = 0; c < N_CONFIGS; c++) {
        if (!config_runs_here(&CONFIGS[c])) continue;
        const double *x = med[c];
        const double gflops = flops / x[M_STEP] * 1e-6;
        const double other = x[M_FWD_BWD] - x[M_PROJ] - x[M_ATTN];
        const double proj_gf = flops_group[GEMM_PROJ] / x[M_PROJ] * 1e-6;
        const double attn_gf = flops_group[GEMM_ATTN] / x[M_ATTN] * 1e-6;
        printf("%-8s %3d %10.1f %9.1f %7.0f%% | %10.1f %8.1f %10.1f %10.1f %9.1f | %8.1f %8.1f\n",
               CONFIGS[c].backend, CONFIGS[c].threads, x[M_STEP], gflops, 100.0 * gflops / peak[c], x[M_FWD_BWD],
               x[M_OPTIM], x[M_PROJ], x[M_ATTN], other, proj_gf, attn_gf);
        fprintf(tsv, "%s\t%s\t%d\t%.4f\t%.3f\t%.2f\t%.2f\t%.4f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\t%d\n", config,
                CONFIGS[c].backend, CONFIGS[c].threads, flops * 1e-9, x[M_STEP], gflops, peak[c],
                gflops / peak[c], x[M_FWD_BWD], x[M_OPTIM], x[M_PROJ], x[M_ATTN], other, proj_gf, attn_gf, reps);
    }
    printf("step = fwd+bwd + optim (zero grad, clip, Adam). proj, attn: the step's products replayed alone\n"
           "(projections + MLP + output; per-(sequence, head) attention products), operands warm in cache;\n"
           "other = fwd+bwd - proj - attn: softmax, norms, GELU, residuals, memsets, embeddings, loss.\n"
           "of peak = GFLOP/s / the FMA loop's on the same instruction set and threads.\n");
    const long backoffs = threads_busy_backoffs() - backoffs_before;
    if (backoffs > 0)
        printf("NOTE: the parallel regions fell back to one thread %ld time(s) during the steps (a partner thread found\n"
               "switched out by another program): the 2-thread figures are partly 1-thread ones.\n", backoffs);
    if (detail) print_detail(&gemms, &rb, reps, flops);
    replay_free(&rb);
    if (bench_close_result(&tsv_file, prog) != 0) return 1;
    printf("wrote %s/transformer_peak.tsv\n", out_dir);
    return 0;
}
