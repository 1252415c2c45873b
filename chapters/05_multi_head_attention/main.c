/* main.c - chapter 05: multi-head attention.
 *
 *   ./build/05_multi_head_attention                       everything, quick defaults
 *   ./build/05_multi_head_attention --heads 1,2,4,8 --task neighbours --steps 400
 *   ./build/05_multi_head_attention --scale-max-len 4096  the N^2 table up to N = 4096
 *   ./build/05_multi_head_attention --load out/05_multi_head_attention/model_count_next_h4.ckpt
 *                                                          evaluate a saved model on its test set
 *   ./build/05_multi_head_attention --load out/05_multi_head_attention/model_count_next_h4.ckpt \
 *                                   --input "3 1 4 1 5 9 2 6" --plot   its output and heads for your digits
 *
 * It prints, in order:
 *   1. the 4 big matmuls with their shapes, and a check that the fused layer
 *      equals H separate chapter-04 heads (concatenated, then W_O), with the
 *      time of both;
 *   2. compute and memory as the sequence length N grows (the O(N^2));
 *   3. training of chapter 04's digit model with H = 1, 2, 4 heads at equal
 *      total width H*D_H, and the results table;
 * and writes out/05_multi_head_attention/: results.json, a checkpoint of
 * every trained model (model_<task>_h<H>.ckpt), one attention heatmap per
 * head of every trained model, the loss curves and the scaling plots. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "04_self_attention/digit_model.h"
#include "04_self_attention/self_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "05_multi_head_attention/multi_head_model.h"
#include "io/args.h"
#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/layers.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "io/plot.h"
#include "train/progress.h"
#include "io/results.h"
#include "util/util.h"

#define MAX_VARIANTS 8
#define MAX_SCALE_POINTS 16

typedef struct {
    const char *out, *task, *pos, *heads, *backend, *load, *input, *attention;
    int steps, seed, threads, len, dim, hidden, layers, batch, test_size, causal, quiet, plot;
    int scale_max_len, scale_dim, scale_heads, scale_repeats;
    float lr;
    MultiHeadAttention attention_kind;   /* --attention, parsed */
} Flags;

#define CURVE_POINTS 50      /* the loss curve: mean training loss over steps/50 steps */

typedef struct {
    int H;
    double exact, token_acc, seconds, final_loss;
    int solved_step;             /* first step whose curve point fell below SOLVED_LOSS, or 0 */
    int n_curve;                 /* points on the curve: CURVE_POINTS, or steps if fewer */
    float curve_step[CURVE_POINTS], curve[CURVE_POINTS];
    char checkpoint[1024];       /* where the trained model was saved */
} RunResult;

#define SOLVED_LOSS 0.5

/* "1,2,4" -> heads[] = {1, 2, 4}; every count must divide dim. */
static int parse_heads(const char *text, int dim, int *heads, int *n_heads) {
    *n_heads = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long h = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || h < 1 || h > dim || dim % h != 0 ||
            *n_heads == MAX_VARIANTS)
            return fail("--heads: expected up to %d comma-separated head counts that divide --dim %d "
                        "(e.g. 1,2,4), got '%s'", MAX_VARIANTS, dim, text);
        heads[(*n_heads)++] = (int)h;
        p = *end == ',' ? end + 1 : end;
    }
    if (*n_heads == 0) return fail("--heads: expected at least one head count, got '%s'", text);
    return 0;
}

static PosType pos_from_name(const char *name) {
    for (int p = 0; p < POS_N_TYPES; p++)
        if (strcmp(name, pos_type_name((PosType)p)) == 0) return (PosType)p;
    return POS_SINUSOIDAL;
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)             /* insertion sort: n is tiny */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* CPU seconds used by this process (all its threads). On a machine shared
 * with other jobs this is steadier than wall-clock time, which also counts
 * the time we wait for a core. */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_uniform(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

/* ----------------------------------------------- 1. the 4 big matmuls, checked */

/* One forward + backward of H separate chapter-04 heads: head h has its own
 * W_Q, W_K, W_V [D, D_H] (columns of W_QKV, copied once, before timing), the
 * outputs are concatenated into Y [R, H D_H] and projected by W_O. */
typedef struct {
    int B, N, D, H, D_H;
    float *W_heads;         /* [H, 3, D, D_H] */
    float *dW_heads;        /* [H, 3, D, D_H] */
    float *Y_h, *A_h, *cache_h, *scratch_h, *dY_h;   /* one head's buffers */
    float *Y, *dY, *O, *dX;
} SeparateHeads;

static void separate_heads_run(SeparateHeads *sh, const float *X, const float *dO,
                               const MultiHeadWeights *w, int causal) {
    const int B = sh->B, N = sh->N, D = sh->D, D_H = sh->D_H, HD = sh->H * D_H, R = B * N;
    const size_t per_matrix = (size_t)D * D_H;
    /* forward: H chapter-04 heads, concatenated, then O = Y W_O + b_O */
    for (int h = 0; h < sh->H; h++) {
        float *W = sh->W_heads + 3 * h * per_matrix;
        SelfAttentionWeights sw = {W, W + per_matrix, W + 2 * per_matrix};
        self_attention_forward(sh->Y_h, sh->A_h + (size_t)h * B * N * N,
                               sh->cache_h + h * self_attention_cache_floats(B, N, D_H), X, &sw, causal,
                               NULL, B, N, D, D_H);
        for (int r = 0; r < R; r++)
            memcpy(sh->Y + (size_t)r * HD + h * D_H, sh->Y_h + (size_t)r * D_H, sizeof(float) * D_H);
    }
    linear_forward(sh->O, sh->Y, w->W_O, w->b_O, R, HD, D);
    /* backward: dY = dO W_O^T, split by head, chapter 04's backward per head */
    matmul_nt(sh->dY, dO, w->W_O, R, HD, D, 0);
    memset(sh->dX, 0, sizeof(float) * (size_t)R * D);
    for (int h = 0; h < sh->H; h++) {
        float *W = sh->W_heads + 3 * h * per_matrix, *dW = sh->dW_heads + 3 * h * per_matrix;
        SelfAttentionWeights sw = {W, W + per_matrix, W + 2 * per_matrix};
        SelfAttentionWeights sdw = {dW, dW + per_matrix, dW + 2 * per_matrix};
        for (int r = 0; r < R; r++)
            memcpy(sh->dY_h + (size_t)r * D_H, sh->dY + (size_t)r * HD + h * D_H, sizeof(float) * D_H);
        self_attention_backward(sh->dX, &sdw, sh->scratch_h, sh->dY_h, sh->A_h + (size_t)h * B * N * N,
                                sh->cache_h + h * self_attention_cache_floats(B, N, D_H), X, &sw, B, N, D,
                                D_H);
    }
}

static void four_matmuls_demo(const Flags *f, int H) {
    const int B = f->batch, N = f->len, D = f->dim, D_H = D / H, HD = H * D_H, R = B * N;
    MultiHeadSpec s = {D, H, D_H, D, f->attention_kind};
    printf("1. Multi-head attention in 4 big matmuls (H = %d heads of D_H = %d; B = %d sequences of\n"
           "   N = %d positions, D = %d; R = B*N = %d rows)\n\n", H, D_H, B, N, D, R);
    printf("   1. [Q|K|V] = X [W_Q|W_K|W_V]  [%d, %d] x [%d, %d] -> [%d, %d]   one sgemm\n", R, D, D,
           3 * HD, R, 3 * HD);
    printf("   2. E = Q K^T / sqrt(D_H)      [%d, %d] x [%d, %d] -> [%d, %d]   per (sequence, head): "
           "lda = %d\n", N, D_H, D_H, N, N, N, 3 * HD);
    printf("   3. Y = A V                    [%d, %d] x [%d, %d] -> [%d, %d]   per (sequence, head): "
           "ldc = %d\n", N, N, N, D_H, N, D_H, HD);
    printf("   4. O = Y W_O                  [%d, %d] x [%d, %d] -> [%d, %d]   one sgemm\n\n", R, HD, HD,
           D, R, D);

    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 21);
    float *params = xcalloc(multi_head_param_count(&s), sizeof(float));
    float *dparams = xcalloc(multi_head_param_count(&s), sizeof(float));
    MultiHeadWeights w = multi_head_weights_view(&s, params), dw = multi_head_weights_view(&s, dparams);
    multi_head_init(&s, &w, &rng);
    fill_uniform(w.b_O, (size_t)D, 0.1f, &rng);
    float *X = xmalloc(sizeof(float) * (size_t)R * D), *dO = xmalloc(sizeof(float) * (size_t)R * D);
    fill_uniform(X, (size_t)R * D, 1.0f, &rng);
    fill_uniform(dO, (size_t)R * D, 1.0f, &rng);
    float *O = xcalloc((size_t)R * D, sizeof(float)), *dX = xcalloc((size_t)R * D, sizeof(float));
    float *A = xcalloc(multi_head_attention_floats(&s, B, N), sizeof(float));
    float *cache = xcalloc(multi_head_cache_floats(&s, B, N), sizeof(float));
    float *scratch = xcalloc(multi_head_scratch_floats(&s, B, N), sizeof(float));

    SeparateHeads sh = {B, N, D, H, D_H, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    sh.W_heads = xcalloc((size_t)3 * H * D * D_H, sizeof(float));
    sh.dW_heads = xcalloc((size_t)3 * H * D * D_H, sizeof(float));
    for (int h = 0; h < H; h++)
        for (int part = 0; part < 3; part++)
            for (int i = 0; i < D; i++)
                memcpy(sh.W_heads + ((size_t)(3 * h + part) * D + i) * D_H,
                       w.W_QKV + (size_t)i * 3 * HD + part * HD + h * D_H, sizeof(float) * D_H);
    sh.Y_h = xcalloc((size_t)R * D_H, sizeof(float));
    sh.dY_h = xcalloc((size_t)R * D_H, sizeof(float));
    sh.A_h = xcalloc((size_t)H * B * N * N, sizeof(float));
    sh.cache_h = xcalloc(H * self_attention_cache_floats(B, N, D_H), sizeof(float));
    sh.scratch_h = xcalloc(self_attention_scratch_floats(B, N, D_H), sizeof(float));
    sh.Y = xcalloc((size_t)R * HD, sizeof(float));
    sh.dY = xcalloc((size_t)R * HD, sizeof(float));
    sh.O = xcalloc((size_t)R * D, sizeof(float));
    sh.dX = xcalloc((size_t)R * D, sizeof(float));

    /* same numbers? */
    multi_head_forward(O, A, cache, X, &s, &w, f->causal, NULL, B, N);
    multi_head_backward(dX, &dw, scratch, dO, A, cache, X, &s, &w, f->causal, NULL, B, N);
    separate_heads_run(&sh, X, dO, &w, f->causal);
    double max_dO = 0, max_dX = 0, max_dW = 0;
    for (size_t i = 0; i < (size_t)R * D; i++) {
        max_dO = fmax(max_dO, fabs(O[i] - sh.O[i]));
        max_dX = fmax(max_dX, fabs(dX[i] - sh.dX[i]));
    }
    for (int h = 0; h < H; h++)
        for (int part = 0; part < 3; part++)
            for (int i = 0; i < D; i++)
                for (int c = 0; c < D_H; c++)
                    max_dW = fmax(max_dW, fabs(dw.W_QKV[(size_t)i * 3 * HD + part * HD + h * D_H + c] -
                                               sh.dW_heads[((size_t)(3 * h + part) * D + i) * D_H + c]));
    printf("   Fused layer against %d separate chapter-04 heads, concatenated, then W_O (random weights):\n"
           "     max |O - O_heads| = %.2g,  max |dX - dX_heads| = %.2g,  max |dW_QKV - dW_heads| = %.2g\n",
           H, max_dO, max_dX, max_dW);

    /* and how long each takes (forward + backward, median of 7) */
    double t_fused[7], t_heads[7];
    for (int k = 0; k < 7; k++) {
        double t0 = now_seconds();
        multi_head_forward(O, A, cache, X, &s, &w, f->causal, NULL, B, N);
        multi_head_backward(dX, &dw, scratch, dO, A, cache, X, &s, &w, f->causal, NULL, B, N);
        t_fused[k] = now_seconds() - t0;
        t0 = now_seconds();
        separate_heads_run(&sh, X, dO, &w, f->causal);
        t_heads[k] = now_seconds() - t0;
    }
    double fused_ms = 1e3 * median(t_fused, 7), heads_ms = 1e3 * median(t_heads, 7);
    printf("     forward + backward: fused %.2f ms, %d separate heads %.2f ms (%.1fx)\n\n", fused_ms, H,
           heads_ms, heads_ms / fused_ms);

    free(params); free(dparams); free(X); free(dO); free(O); free(dX); free(A); free(cache);
    free(scratch);
    float *sh_buffers[] = {sh.W_heads, sh.dW_heads, sh.Y_h, sh.dY_h, sh.A_h, sh.cache_h, sh.scratch_h,
                           sh.Y, sh.dY, sh.O, sh.dX};
    for (size_t i = 0; i < sizeof sh_buffers / sizeof sh_buffers[0]; i++) free(sh_buffers[i]);
}

/* ------------------------------------------------ 2. cost as N grows: O(N^2) */

typedef struct {
    int n_points;
    int N[MAX_SCALE_POINTS];
    double ms[MAX_SCALE_POINTS];           /* forward + backward, wall clock, median */
    double cpu_ms[MAX_SCALE_POINTS];       /* the same, CPU time of the process, median */
    double attn_bytes[MAX_SCALE_POINTS];   /* A [H, N, N] */
    double linear_bytes[MAX_SCALE_POINTS]; /* [Q|K|V], Y, and their gradients: O(N) */
} Scaling;

static int scaling_experiment(const Flags *f, Scaling *sc, Results *res) {
    const int D = f->scale_dim, H = f->scale_heads, D_H = D / H;
    MultiHeadSpec s = {D, H, D_H, D, f->attention_kind};
    printf("2. Cost as the sequence grows (one sequence, D = %d, H = %d heads of D_H = %d%s;\n"
           "   forward + backward, median of %d runs after a warm-up)\n\n", D, H, D_H,
           f->causal ? ", causal" : "", f->scale_repeats);
    printf("  |     N | wall ms | CPU ms | x prev | A = H x N x N | x prev | [Q|K|V], Y + grads |\n");
    printf("  |-------|---------|--------|--------|---------------|--------|--------------------|\n");
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 31);
    float *params = xcalloc(multi_head_param_count(&s), sizeof(float));
    float *dparams = xcalloc(multi_head_param_count(&s), sizeof(float));
    MultiHeadWeights w = multi_head_weights_view(&s, params), dw = multi_head_weights_view(&s, dparams);
    multi_head_init(&s, &w, &rng);
    sc->n_points = 0;
    for (int N = 64; N <= f->scale_max_len && sc->n_points < MAX_SCALE_POINTS; N *= 2) {
        /* allocate (and touch) everything before timing: see DESIGN.md on first-touch cost */
        float *X = xcalloc((size_t)N * D, sizeof(float)), *dO = xcalloc((size_t)N * D, sizeof(float));
        float *O = xcalloc((size_t)N * D, sizeof(float)), *dX = xcalloc((size_t)N * D, sizeof(float));
        float *A = xcalloc(multi_head_attention_floats(&s, 1, N), sizeof(float));
        float *cache = xcalloc(multi_head_cache_floats(&s, 1, N), sizeof(float));
        float *scratch = xcalloc(multi_head_scratch_floats(&s, 1, N), sizeof(float));
        fill_uniform(X, (size_t)N * D, 1.0f, &rng);
        fill_uniform(dO, (size_t)N * D, 1.0f, &rng);
        double times[16], cpu_times[16];
        const int repeats = f->scale_repeats;
        for (int k = -1; k < repeats; k++) {          /* k = -1: warm-up, not counted */
            double t0 = now_seconds(), c0 = cpu_seconds();
            multi_head_forward(O, A, cache, X, &s, &w, f->causal, NULL, 1, N);
            multi_head_backward(dX, &dw, scratch, dO, A, cache, X, &s, &w, f->causal, NULL, 1, N);
            if (k >= 0) {
                times[k] = now_seconds() - t0;
                cpu_times[k] = cpu_seconds() - c0;
            }
        }
        int i = sc->n_points++;
        sc->N[i] = N;
        sc->ms[i] = 1e3 * median(times, repeats);
        sc->cpu_ms[i] = 1e3 * median(cpu_times, repeats);
        sc->attn_bytes[i] = sizeof(float) * (double)multi_head_attention_floats(&s, 1, N);
        sc->linear_bytes[i] = sizeof(float) * (double)(multi_head_cache_floats(&s, 1, N) +
                                                       multi_head_scratch_floats(&s, 1, N) - 2.0 * N * N);
        char ratio_t[16] = "", ratio_m[16] = "";
        if (i > 0) {
            snprintf(ratio_t, sizeof ratio_t, "%.1f", sc->cpu_ms[i] / sc->cpu_ms[i - 1]);
            snprintf(ratio_m, sizeof ratio_m, "%.1f", sc->attn_bytes[i] / sc->attn_bytes[i - 1]);
        }
        printf("  | %5d | %7.1f | %6.1f | %6s | %9.2f MiB | %6s | %14.2f MiB |\n", N, sc->ms[i],
               sc->cpu_ms[i], ratio_t,
               sc->attn_bytes[i] / (1 << 20), ratio_m, sc->linear_bytes[i] / (1 << 20));
        fflush(stdout);
        char key[48];
        snprintf(key, sizeof key, "scale_ms_n%d", N);
        results_set_num(res, key, sc->ms[i]);
        snprintf(key, sizeof key, "scale_cpu_ms_n%d", N);
        results_set_num(res, key, sc->cpu_ms[i]);
        snprintf(key, sizeof key, "scale_attn_bytes_n%d", N);
        results_set_num(res, key, sc->attn_bytes[i]);
        free(X); free(dO); free(O); free(dX); free(A); free(cache); free(scratch);
    }
    free(params); free(dparams);
    printf("\n  Doubling N doubles the rows of every [N, .] matrix (the [Q|K|V] column) but quadruples\n"
           "  the H x N x N attention weights and the work of QK^T and AV: time and memory -> x4.\n\n");
    if (sc->n_points == 0) return 0;

    /* log-log plots, with a reference line c N^2 through the last point */
    float x[MAX_SCALE_POINTS], t[MAX_SCALE_POINTS], t_cpu[MAX_SCALE_POINTS], t_ref[MAX_SCALE_POINTS];
    float m_attn[MAX_SCALE_POINTS], m_lin[MAX_SCALE_POINTS];
    const int last = sc->n_points - 1;
    for (int i = 0; i < sc->n_points; i++) {
        double r = (double)sc->N[i] / sc->N[last];
        x[i] = (float)sc->N[i];
        t[i] = (float)sc->ms[i];
        t_cpu[i] = (float)sc->cpu_ms[i];
        t_ref[i] = (float)(sc->cpu_ms[last] * r * r);
        m_attn[i] = (float)(sc->attn_bytes[i] / (1 << 20));
        m_lin[i] = (float)(sc->linear_bytes[i] / (1 << 20));
    }
    char stem[1024], title[160];
    snprintf(stem, sizeof stem, "%s/scaling_time", f->out);
    snprintf(title, sizeof title, "Multi-head attention, forward + backward (D = %d, H = %d)", D, H);
    const float *ys_t[3] = {t_cpu, t, t_ref};
    const char *names_t[3] = {"CPU time", "wall-clock time (shared machine)", "c N^2 (through the last CPU point)"};
    if (plot_lines(stem, title, "sequence length N", "milliseconds", x, ys_t, names_t, 3, sc->n_points,
                   2) < 0)
        return -1;
    printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    snprintf(stem, sizeof stem, "%s/scaling_memory", f->out);
    snprintf(title, sizeof title, "Memory for one sequence (D = %d, H = %d, float32)", D, H);
    const float *ys_m[2] = {m_attn, m_lin};
    const char *names_m[2] = {"attention weights A [H, N, N]: slope 2", "[Q|K|V], Y and their gradients: slope 1"};
    if (plot_lines(stem, title, "sequence length N", "MiB", x, ys_m, names_m, 2, sc->n_points, 2) < 0)
        return -1;
    printf("  %s.%s\n\n", stem, gnuplot_available() ? "png" : "gp");
    return 0;
}

/* ---------------------------------------------------------------- 3. training */

static void evaluate(MultiHeadModel *m, const char *task, int n_test, uint64_t seed, int max_B,
                     double *exact, double *token_acc) {
    const int N = m->N;
    int *x = xmalloc(sizeof(int) * (size_t)max_B * N), *y = xmalloc(sizeof(int) * (size_t)max_B * N);
    int *pred = xmalloc(sizeof(int) * (size_t)max_B * N);
    Rng rng;
    rng_seed(&rng, seed, 99);                       /* test stream: independent of training batches */
    long n_exact = 0, n_tok = 0;
    for (int done = 0; done < n_test; done += max_B) {
        int B = n_test - done < max_B ? n_test - done : max_B;
        mh_task_batch(task, x, y, B, N, &rng);
        mh_model_forward(m, x, NULL, B);
        mh_model_predict(m, pred);
        for (int b = 0; b < B; b++) {
            int right = 0;
            for (int i = 0; i < N; i++) right += pred[b * N + i] == y[b * N + i];
            n_tok += right;
            n_exact += right == N;
        }
    }
    *exact = (double)n_exact / n_test;
    *token_acc = (double)n_tok / ((double)n_test * N);
    free(x); free(y); free(pred);
}

/* One heatmap per head and layer, for the first test sequence; prints the
 * sample prediction beside the truth. */
static int plot_heads(MultiHeadModel *m, const Flags *f) {
    const int N = m->N;
    if (m->attention == MULTI_HEAD_FUSED) {
        printf("  (no heatmaps: --attention fused never forms the N x N weights; use --attention plain)\n");
        return 0;
    }
    int x[64], y[64], pred[64];
    char x_text[64][8], y_text[64][8];
    const char *x_labels[64], *y_labels[64];
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 99);
    mh_task_batch(f->task, x, y, 1, N, &rng);
    mh_model_forward(m, x, NULL, 1);
    mh_model_predict(m, pred);
    printf("\n  sample (H = %d):  input", m->H);
    for (int i = 0; i < N; i++) printf(" %d", x[i]);
    printf("   target");
    for (int i = 0; i < N; i++) printf(" %d", y[i]);
    printf("   predicted");
    for (int i = 0; i < N; i++) printf(" %d", pred[i]);
    printf("\n");
    for (int i = 0; i < N; i++) {
        snprintf(x_text[i], sizeof x_text[i], "%d", x[i]);
        snprintf(y_text[i], sizeof y_text[i], "%d", y[i]);
        x_labels[i] = x_text[i];
        y_labels[i] = y_text[i];
    }
    for (int l = 0; l < m->L; l++)
        for (int h = 0; h < m->H; h++) {
            char stem[1024], title[160];
            snprintf(stem, sizeof stem, "%s/attn_%s_h%d_layer%d_head%d", f->out, f->task, m->H, l + 1, h + 1);
            snprintf(title, sizeof title, "%s, %d head%s: layer %d, head %d", f->task, m->H,
                     m->H == 1 ? "" : "s", l + 1, h + 1);
            if (plot_heatmap(stem, title, mh_model_attention(m, l, h, 0), N, N, x_labels, y_labels,
                             "input digit (key j)", "target at output i (query i)", 0.0f, 1.0f) < 0)
                return -1;
            printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
        }
    return 0;
}

static int train_one(int H, const Flags *f, RunResult *out) {
    MultiHeadModel m;
    const int C = mh_task_classes(f->task, f->len);
    if (mh_model_create(&m, f->len, f->dim, H, f->dim / H, f->hidden, f->layers, C, pos_from_name(f->pos),
                        f->causal, f->attention_kind, f->batch, (uint64_t)f->seed) < 0)
        return -1;
    Adam opt;
    if (adam_init(&opt, &m.params, f->lr, 0.0f) < 0) return -1;
    int *x = xmalloc(sizeof(int) * (size_t)f->batch * f->len);
    int *y = xmalloc(sizeof(int) * (size_t)f->batch * f->len);
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 1);           /* training stream: the same for every H */
    printf("  H = %d head%s of D_H = %d: %zu parameters\n", H, H == 1 ? "" : "s", f->dim / H, m.params.size);
    Progress pr;
    progress_start(&pr, f->steps, f->steps / 4, f->quiet);
    double t0 = now_seconds(), loss = 0.0, window_sum = 0.0;
    int window_len = 0, point = 0;
    out->solved_step = 0;
    for (int step = 0; step < f->steps; step++) {
        mh_task_batch(f->task, x, y, f->batch, f->len, &rng);
        params_zero_grad(&m.params);
        loss = mh_model_forward(&m, x, y, f->batch);
        mh_model_backward(&m, x, y);
        clip_grad_norm(&m.params, 1.0f);
        adam_step(&opt, &m.params, lr_schedule(step, f->steps, f->steps / 20, f->lr, 0.05f));
        progress_update(&pr, step + 1, (float)loss, (long)(step + 1) * f->batch, NULL);
        /* curve point k averages the steps that end at (k + 1) * steps / CURVE_POINTS */
        window_sum += loss;
        window_len++;
        if (point < CURVE_POINTS && (long)(step + 1) * CURVE_POINTS >= (long)(point + 1) * f->steps) {
            out->curve_step[point] = (float)(step + 1);
            out->curve[point++] = (float)(window_sum / window_len);
            if (out->solved_step == 0 && window_sum / window_len < SOLVED_LOSS) out->solved_step = step + 1;
            window_sum = 0.0;
            window_len = 0;
        }
    }
    progress_end(&pr);
    out->n_curve = point;
    out->H = H;
    out->seconds = now_seconds() - t0;
    out->final_loss = loss;
    evaluate(&m, f->task, f->test_size, (uint64_t)f->seed, f->batch, &out->exact, &out->token_acc);
    snprintf(out->checkpoint, sizeof out->checkpoint, "%s/model_%s_h%d.ckpt", f->out, f->task, H);
    int rc = mh_model_save(&m, f->task, f->seed, out->checkpoint);
    if (rc == 0) rc = plot_heads(&m, f);
    free(x); free(y);
    adam_free(&opt);
    mh_model_free(&m);
    return rc;
}

/* Training loss against step, one curve per head count (log y). */
static int plot_loss_curves(const Flags *f, const RunResult *results, int n_variants) {
    const float *ys[MAX_VARIANTS];
    const char *names[MAX_VARIANTS];
    char name_text[MAX_VARIANTS][32];
    for (int v = 0; v < n_variants; v++) {
        snprintf(name_text[v], sizeof name_text[v], "H = %d, D_H = %d", results[v].H, f->dim / results[v].H);
        names[v] = name_text[v];
        ys[v] = results[v].curve;
    }
    char stem[1024], title[160];
    snprintf(stem, sizeof stem, "%s/loss_%s", f->out, f->task);
    snprintf(title, sizeof title, "Training loss on '%s', equal width H*D_H = %d", f->task, f->dim);
    /* every run has the same number of steps, so the same curve_step */
    if (plot_lines(stem, title, "step", "cross-entropy (mean over the window)", results[0].curve_step, ys,
                   names, n_variants, results[0].n_curve, 1) < 0)
        return -1;
    printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    return 0;
}

/* ------------------------------------------------------ --load: a saved model */

/* One heatmap per layer and head for the one sequence x of the last forward
 * (labels: input digits on x, predictions on y). */
static int plot_input_heads(const MultiHeadModel *m, const int *x, const int *pred, const char *out) {
    if (m->attention == MULTI_HEAD_FUSED)
        return fail("--plot: --attention fused never forms the attention weights; use --attention plain");
    char x_text[64][8], y_text[64][8];
    const char *x_labels[64], *y_labels[64];
    for (int i = 0; i < m->N; i++) {
        snprintf(x_text[i], sizeof x_text[i], "%d", x[i]);
        snprintf(y_text[i], sizeof y_text[i], "%d", pred[i]);
        x_labels[i] = x_text[i];
        y_labels[i] = y_text[i];
    }
    printf("Wrote:\n");
    for (int l = 0; l < m->L; l++)
        for (int h = 0; h < m->H; h++) {
            char stem[1024], title[160];
            snprintf(stem, sizeof stem, "%s/input_attn_layer%d_head%d", out, l + 1, h + 1);
            snprintf(title, sizeof title, "your input: layer %d, head %d of %d", l + 1, h + 1, m->H);
            if (plot_heatmap(stem, title, mh_model_attention(m, l, h, 0), m->N, m->N, x_labels, y_labels,
                             "input digit (key j)", "output at i (query i)", 0.0f, 1.0f) < 0)
                return -1;
            printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
        }
    return 0;
}

/* Evaluate the checkpoint f->load on its task's test set or, with --input, run
 * it on the user's digits (and plot every head's attention with --plot). */
static int run_loaded(const Flags *f) {
    MultiHeadModel m;
    char task[32];
    int seed;
    if (mh_model_load(&m, f->load, f->batch, f->attention_kind, task, sizeof task, &seed) < 0) return -1;
    printf("Loaded %s: task %s, N = %d, D = %d, H = %d heads of D_H = %d, MLP %d, %d layer%s, "
           "%s positions%s, %zu parameters\n", f->load, task, m.N, m.D, m.H, m.D_H, m.F, m.L,
           m.L == 1 ? "" : "s", pos_type_name(m.pos), m.causal ? ", causal mask" : "", m.params.size);
    int rc = 0;
    if (!f->input) {
        double exact, token_acc;
        evaluate(&m, task, f->test_size, (uint64_t)seed, f->batch, &exact, &token_acc);
        printf("  %d test sequences of '%s': exact match %.1f%%, token accuracy %.1f%%\n", f->test_size,
               task, 100 * exact, 100 * token_acc);
    } else {
        int x[64], y[64], pred[64];
        rc = digits_parse(f->input, m.N, x);
        if (rc == 0) {
            mh_task_targets(task, x, y, m.N);
            mh_model_forward(&m, x, NULL, 1);
            mh_model_predict(&m, pred);
            digit_print_prediction(task, x, pred, y, m.N);
        }
        if (rc == 0 && f->plot) rc = plot_input_heads(&m, x, pred, f->out);
    }
    mh_model_free(&m);
    return rc;
}

/* ------------------------------------------------------------------- main */

static int fail_exit(void) {
    fprintf(stderr, "05_multi_head_attention: error: %s\n", last_error());
    return 1;
}

int main(int argc, char **argv) {
    Flags f = {.out = "out/05_multi_head_attention", .task = "count_next", .pos = "learned",
               .heads = "1,2,4", .backend = NULL, .attention = "plain", .load = NULL, .input = NULL, .plot = 0, .steps = 1000, .seed = 1, .threads = 0, .len = 8,
               .dim = 64, .hidden = 128, .layers = 1, .batch = 64, .test_size = 2000, .causal = 0,
               .quiet = 0, .scale_max_len = 2048, .scale_dim = 64, .scale_heads = 4, .scale_repeats = 5,
               .lr = 3e-3f};
    const ArgSpec specs[] = {
        {"task", ARG_STRING, &f.task, "digit task: count_next (y_i = 10 count(x_i) + x_{i+1}), neighbours "
         "(y_i = 10 x_{i-1} + x_{i+1}), or chapter 04's", 0, 0, "count_next,neighbours,reverse,sort,count"},
        {"heads", ARG_STRING, &f.heads, "head counts to compare, at equal width H*D_H = --dim", 0, 0, NULL},
        {"pos", ARG_STRING, &f.pos, "positional encoding", 0, 0, "none,sinusoidal,learned"},
        {"steps", ARG_INT, &f.steps, "training steps per model", 1, 1000000, NULL},
        {"batch", ARG_INT, &f.batch, "sequences per step", 1, 4096, NULL},
        {"lr", ARG_FLOAT, &f.lr, "Adam learning rate (warm-up, then cosine decay)", 1e-6, 1, NULL},
        {"len", ARG_INT, &f.len, "sequence length N of the digit task", 3, 64, NULL},
        {"dim", ARG_INT, &f.dim, "model width D = H*D_H", 2, 1024, NULL},
        {"hidden", ARG_INT, &f.hidden, "MLP hidden size", 1, 4096, NULL},
        {"layers", ARG_INT, &f.layers, "multi-head attention layers", 1, MH_MAX_LAYERS, NULL},
        {"causal", ARG_BOOL, &f.causal, "causal mask: output i only sees inputs 1..i", 0, 0, NULL},
        {"test-size", ARG_INT, &f.test_size, "test sequences", 1, 1000000, NULL},
        {"scale-max-len", ARG_INT, &f.scale_max_len,
         "largest N of the cost table (64, 128, ... up to it); 0 skips it", 0, 16384, NULL},
        {"scale-dim", ARG_INT, &f.scale_dim, "width D of the cost table's layer", 1, 4096, NULL},
        {"scale-heads", ARG_INT, &f.scale_heads, "heads of the cost table's layer (divides --scale-dim)",
         1, 256, NULL},
        {"scale-repeats", ARG_INT, &f.scale_repeats, "timed runs per N (the median is printed)", 1, 15,
         NULL},
        {"seed", ARG_INT, &f.seed, "random seed (model, batches, test set)", 0, 2147483647, NULL},
        {"out", ARG_STRING, &f.out, "output directory", 0, 0, NULL},
        {"backend", ARG_STRING, &f.backend, "matmul backend; without the flag: $ATTN_BACKEND, else auto", 0, 0, "auto,naive,avx2,avx512"},
        {"attention", ARG_STRING, &f.attention, "softmax(Q K^T / sqrt(D_H)) V as plain (keeps the N x N weights: "
         "heatmaps) or fused (online softmax, O(N) memory, no heatmaps)", 0, 0, "plain,fused"},
        {"threads", ARG_INT, &f.threads,
         "threads (0 = OMP_NUM_THREADS or all cores)", 0, 256, NULL},
        {"quiet", ARG_BOOL, &f.quiet, "no progress lines", 0, 0, NULL},
        {"load", ARG_STRING, &f.load, "evaluate this checkpoint (model_<task>_h<H>.ckpt) instead of training",
         0, 0, NULL},
        {"input", ARG_STRING, &f.input, "with --load: digits to run the model on, e.g. \"3 1 4 1 5 9 2 6\"", 0,
         0, NULL},
        {"plot", ARG_BOOL, &f.plot, "with --load and --input: write every head's attention heatmap", 0, 0,
         NULL},
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    int rc = args_parse(argc, argv, specs, n_specs);
    if (rc == 1) {
        args_print_help(argv[0],
                        "Chapter 05: multi-head attention. H heads of size D_H computed with 4 big\n"
                        "matmuls; the fused layer checked against H separate chapter-04 heads; its cost\n"
                        "as N grows (O(N^2)); and chapter 04's digit model trained with 1, 2 and 4 heads\n"
                        "at equal width on a task that needs two kinds of lookup per output.",
                        specs, n_specs);
        return 0;
    }
    if (rc == 0 && f.input && !f.load) rc = fail("--input needs --load CHECKPOINT (a trained model to run)");
    if (rc == 0 && f.plot && !f.input) rc = fail("--plot goes with --load CHECKPOINT --input DIGITS");
    int heads[MAX_VARIANTS], n_variants = 0;
    if (rc < 0 || parse_heads(f.heads, f.dim, heads, &n_variants) < 0) return fail_exit();
    if (f.scale_dim % f.scale_heads != 0) {
        fail("--scale-heads: expected a divisor of --scale-dim %d, got %d", f.scale_dim, f.scale_heads);
        return fail_exit();
    }
    if (backend_select(f.backend) < 0 || multi_head_attention_from_name(f.attention, &f.attention_kind) < 0 ||
        make_dirs(f.out) < 0)
        return fail_exit();
    threads_set(f.threads);
    if (f.load) return run_loaded(&f) < 0 ? fail_exit() : 0;
    const double t_program = now_seconds();

    int most_heads = 0;
    for (int v = 0; v < n_variants; v++) if (heads[v] > heads[most_heads]) most_heads = v;
    four_matmuls_demo(&f, heads[most_heads]);

    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", "05_multi_head_attention");
    results_set_str(&res, "task", f.task);
    /* the headline keys first, so they keep their place if there are many
     * variants (results.h holds RESULTS_MAX keys); filled in at the end */
    results_set_num(&res, "test_exact_match", 0.0);
    results_set_num(&res, "test_token_acc", 0.0);
    results_set_num(&res, "train_seconds", 0.0);
    Scaling sc;
    if (f.scale_max_len >= 64 && scaling_experiment(&f, &sc, &res) < 0) return fail_exit();

    printf("3. Training on '%s' (%d steps of %d sequences of %d digits; D = H*D_H = %d, MLP %d, "
           "%d layer%s, %s positions%s; backend %s, %d thread%s)\n",
           f.task, f.steps, f.batch, f.len, f.dim, f.hidden, f.layers, f.layers == 1 ? "" : "s", f.pos,
           f.causal ? ", causal mask" : "", backend_name(backend_current()), threads_current(),
           threads_current() == 1 ? "" : "s");
    RunResult results[MAX_VARIANTS];
    double total_seconds = 0.0;
    for (int v = 0; v < n_variants; v++) {
        if (train_one(heads[v], &f, &results[v]) < 0) return fail_exit();
        total_seconds += results[v].seconds;
    }

    printf("\n  Results on %d test sequences of '%s'\n\n", f.test_size, f.task);
    printf("  | heads H | D_H | exact match | token acc. | final loss | loss < %.1f at step | train s |\n",
           SOLVED_LOSS);
    printf("  |---------|-----|-------------|------------|------------|--------------------|---------|\n");
    for (int v = 0; v < n_variants; v++) {
        const RunResult *r = &results[v];
        char solved[32] = "never";
        if (r->solved_step > 0) snprintf(solved, sizeof solved, "%d", r->solved_step);
        printf("  | %7d | %3d | %10.1f%% | %9.1f%% | %10.3f | %18s | %7.1f |\n", r->H, f.dim / r->H,
               100 * r->exact, 100 * r->token_acc, r->final_loss, solved, r->seconds);
        char key[48];
        snprintf(key, sizeof key, "test_exact_match_h%d", r->H);
        results_set_num(&res, key, r->exact);
        snprintf(key, sizeof key, "test_token_acc_h%d", r->H);
        results_set_num(&res, key, r->token_acc);
        snprintf(key, sizeof key, "train_seconds_h%d", r->H);
        results_set_num(&res, key, r->seconds);
        snprintf(key, sizeof key, "final_loss_h%d", r->H);
        results_set_num(&res, key, r->final_loss);
        snprintf(key, sizeof key, "solved_step_h%d", r->H);
        results_set_num(&res, key, r->solved_step);
    }
    if (plot_loss_curves(&f, results, n_variants) < 0) return fail_exit();
    /* the headline: the model with the most heads */
    results_set_num(&res, "heads", heads[most_heads]);
    results_set_num(&res, "test_exact_match", results[most_heads].exact);
    results_set_num(&res, "test_token_acc", results[most_heads].token_acc);
    results_set_num(&res, "train_seconds", total_seconds);
    results_set_num(&res, "steps", f.steps);
    results_set_num(&res, "batch", f.batch);
    results_set_num(&res, "len", f.len);
    results_set_num(&res, "dim", f.dim);
    results_set_num(&res, "layers", f.layers);
    results_set_str(&res, "positions", f.pos);
    results_set_num(&res, "causal", f.causal);
    results_set_num(&res, "seed", f.seed);
    results_set_num(&res, "test_n", f.test_size);
    results_set_str(&res, "backend", backend_name(backend_current()));
    results_set_num(&res, "threads", threads_current());
    printf("\n  total training time %.1f s, whole program %.1f s\n\nWrote:\n", total_seconds,
           now_seconds() - t_program);
    char path[1024];
    snprintf(path, sizeof path, "%s/results.json", f.out);
    if (results_write(&res, path) < 0) return fail_exit();
    printf("  %s\n", path);
    for (int v = 0; v < n_variants; v++)
        printf("  %s   (try: --load %s --input \"3 1 4 1 ...\")\n", results[v].checkpoint, results[v].checkpoint);
    return 0;
}
