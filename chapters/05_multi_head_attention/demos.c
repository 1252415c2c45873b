/* demos.c - chapter 05's demonstrations besides training: the 4 big
 * matmuls checked against H separate chapter-04 heads, and the cost of
 * attention as the sequence grows (see demos.h). */
#include "05_multi_head_attention/demos.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "04_self_attention/self_attention.h"
#include "io/plot.h"
#include "kernels/matmul.h"
#include "nn/layers.h"
#include "util/util.h"
#include "util/rng.h"
#include "util/util.h"

#define MAX_SCALE_POINTS 16

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

void four_matmuls_demo(const MultiHeadDemoSetup *f, int H) {
    const int B = f->batch, N = f->len, D = f->dim, D_H = D / H, HD = H * D_H, R = B * N;
    MultiHeadSpec s = {D, H, D_H, D, f->attention, 0};
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
    multi_head_forward(O, A, NULL, cache, X, &s, &w, f->causal, NULL, B, N);
    multi_head_backward(dX, &dw, scratch, dO, A, NULL, cache, X, &s, &w, f->causal, NULL, B, N);
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
        multi_head_forward(O, A, NULL, cache, X, &s, &w, f->causal, NULL, B, N);
        multi_head_backward(dX, &dw, scratch, dO, A, NULL, cache, X, &s, &w, f->causal, NULL, B, N);
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

int length_scaling_experiment(const MultiHeadDemoSetup *f, Results *res) {
    Scaling scaling;
    Scaling *sc = &scaling;
    const int D = f->scale_dim, H = f->scale_heads, D_H = D / H;
    MultiHeadSpec s = {D, H, D_H, D, f->attention, 0};
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
            multi_head_forward(O, A, NULL, cache, X, &s, &w, f->causal, NULL, 1, N);
            multi_head_backward(dX, &dw, scratch, dO, A, NULL, cache, X, &s, &w, f->causal, NULL, 1, N);
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
                                                       multi_head_scratch_floats(&s, 1, N) -
                                                       2.0 * threads_slots(1) * N * N);
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
    if (path_format(stem, sizeof stem, "%s/scaling_time", f->out) < 0) return -1;
    snprintf(title, sizeof title, "Multi-head attention, forward + backward (D = %d, H = %d)", D, H);
    const float *ys_t[3] = {t_cpu, t, t_ref};
    const char *names_t[3] = {"CPU time", "wall-clock time (shared machine)", "c N^2 (through the last CPU point)"};
    if (plot_lines(stem, title, "sequence length N", "milliseconds", x, ys_t, names_t, 3, sc->n_points,
                   2) < 0)
        return -1;
    printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    if (path_format(stem, sizeof stem, "%s/scaling_memory", f->out) < 0) return -1;
    snprintf(title, sizeof title, "Memory for one sequence (D = %d, H = %d, float32)", D, H);
    const float *ys_m[2] = {m_attn, m_lin};
    const char *names_m[2] = {"attention weights A [H, N, N]: slope 2", "[Q|K|V], Y and their gradients: slope 1"};
    if (plot_lines(stem, title, "sequence length N", "MiB", x, ys_m, names_m, 2, sc->n_points, 2) < 0)
        return -1;
    printf("  %s.%s\n\n", stem, gnuplot_available() ? "png" : "gp");
    return 0;
}
