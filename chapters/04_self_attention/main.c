/* main.c - chapter 04: self-attention, and why it needs positions.
 *
 *   ./build/04_self_attention                     every task x every positional encoding
 *   ./build/04_self_attention --task reverse --pos sinusoidal --steps 3000
 *   ./build/04_self_attention --task reverse --causal      (output i sees inputs 1..i only)
 *   ./build/04_self_attention --load out/04_self_attention/model_reverse_sinusoidal.ckpt
 *                                                   evaluate a saved model on its task's test set
 *   ./build/04_self_attention --load out/04_self_attention/model_reverse_sinusoidal.ckpt \
 *                             --input "3 1 4 1 5 9 2 6" --plot     its output (and attention) for your digits
 *
 * It prints, in order:
 *   1. permutation equivariance in numbers: one self-attention layer on X and
 *      on a permutation of X, without and with positional encodings;
 *   2. training of the small model of digit_model.h on each task (reverse,
 *      sort, count) with each positional encoding (none, sinusoidal, learned);
 *   3. the results table (exact sequence match, per-token accuracy);
 * and writes out/04_self_attention/: results.json, a checkpoint of every
 * trained model (model_<task>_<pos>.ckpt), attention heatmaps of the trained
 * models, and the heatmaps of the sinusoidal encodings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/digit_model.h"
#include "04_self_attention/self_attention.h"
#include "io/args.h"
#include "io/checkpoint.h"
#include "util/error.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "io/plot.h"
#include "train/progress.h"
#include "io/results.h"
#include "util/util.h"

typedef struct {
    const char *out, *task, *pos, *backend, *load, *input;
    int steps, seed, threads, len, dim, hidden, layers, batch, test_size, causal, quiet, plot;
    float lr;
} Flags;

typedef struct {
    double exact, token_acc, seconds, final_loss;
    char checkpoint[1024];       /* where the trained model was saved */
} RunResult;

/* ------------------------------------------------- 1. permutation equivariance */

static void print_rows(const char *name, const float *M, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        printf("  %-10s", r == 0 ? name : "");
        for (int c = 0; c < cols; c++) printf(" %7.3f", M[r * cols + c]);
        printf("\n");
    }
}

/* Y(sigma X) against sigma Y(X) for one random self-attention layer. */
static void equivariance_demo(uint64_t seed) {
    enum { N = 5, D_IN = 4, D = 3 };
    const int sigma[N] = {2, 0, 4, 1, 3};        /* row i of sigma(X) is row sigma[i] of X */
    float W_Q[D_IN * D], W_K[D_IN * D], W_V[D_IN * D], X[N * D_IN], X_perm[N * D_IN], P[N * D_IN];
    float Y[N * D], Y_perm[N * D], A[N * N];
    float cache[3 * N * D + N * N];
    Rng rng;
    rng_seed(&rng, seed, 11);
    for (int i = 0; i < D_IN * D; i++) {
        W_Q[i] = rng_normal(&rng); W_K[i] = rng_normal(&rng); W_V[i] = rng_normal(&rng);
    }
    for (int i = 0; i < N * D_IN; i++) X[i] = rng_normal(&rng);
    SelfAttentionWeights w = {W_Q, W_K, W_V};
    positional_encoding_sinusoidal(P, N, D_IN);

    printf("1. Permutation equivariance: F(sigma(X)) = sigma(F(X))\n");
    printf("   one self-attention layer, N = %d inputs of size %d, outputs of size %d;\n", N, D_IN, D);
    printf("   sigma puts input rows in the order 2 0 4 1 3.\n\n");
    for (int with_pos = 0; with_pos <= 1; with_pos++) {
        float Xa[N * D_IN];
        memcpy(Xa, X, sizeof X);
        if (with_pos) add_positional_encoding(Xa, P, 1, N, D_IN);
        for (int i = 0; i < N; i++) memcpy(X_perm + i * D_IN, X + sigma[i] * D_IN, sizeof(float) * D_IN);
        if (with_pos) add_positional_encoding(X_perm, P, 1, N, D_IN);   /* positions stay 0..N-1 */
        self_attention_forward(Y, A, cache, Xa, &w, 0, NULL, 1, N, D_IN, D);
        self_attention_forward(Y_perm, A, cache, X_perm, &w, 0, NULL, 1, N, D_IN, D);
        float sigma_Y[N * D];
        double max_diff = 0.0;
        for (int i = 0; i < N; i++)
            for (int d = 0; d < D; d++) {
                sigma_Y[i * D + d] = Y[sigma[i] * D + d];
                max_diff = fmax(max_diff, fabs(Y_perm[i * D + d] - sigma_Y[i * D + d]));
            }
        printf("   %s positional encoding:\n", with_pos ? "WITH sinusoidal" : "without");
        print_rows("F(sX)", Y_perm, N, D);
        print_rows("s(F(X))", sigma_Y, N, D);
        printf("  max |F(sigma X) - sigma F(X)| = %.2g%s\n\n", max_diff,
               with_pos ? "   (positions break the symmetry)" : "   (equal: the layer ignores order)");
    }
}

/* --------------------------------------------------------------- 2. training */

/* Heatmaps of every layer's attention for the one sequence x of the last
 * forward (labels: input digits on x, predictions on y). */
static int plot_input_attention(const DigitModel *m, const int *x, const int *pred, const char *out) {
    char x_text[64][8], y_text[64][8];
    const char *x_labels[64], *y_labels[64];
    for (int i = 0; i < m->N; i++) {
        snprintf(x_text[i], sizeof x_text[i], "%d", x[i]);
        snprintf(y_text[i], sizeof y_text[i], "%d", pred[i]);
        x_labels[i] = x_text[i];
        y_labels[i] = y_text[i];
    }
    printf("Wrote:\n");
    for (int l = 0; l < m->L; l++) {
        char stem[1024], title[160];
        snprintf(stem, sizeof stem, "%s/input_attn_layer%d", out, l + 1);
        snprintf(title, sizeof title, "your input: layer %d attention A", l + 1);
        if (plot_heatmap(stem, title, digit_model_attention(m, l, 0), m->N, m->N, x_labels, y_labels,
                         "input digit (key j)", "output at i (query i)", 0.0f, 1.0f) < 0)
            return -1;
        printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    }
    return 0;
}

/* Score the model on n_test sequences drawn from the test stream. */
static void evaluate(DigitModel *m, DigitTask task, int n_test, uint64_t seed, int max_B,
                     double *exact, double *token_acc) {
    const int N = m->N;
    int *x = xmalloc(sizeof(int) * (size_t)max_B * N), *y = xmalloc(sizeof(int) * (size_t)max_B * N);
    int *pred = xmalloc(sizeof(int) * (size_t)max_B * N);
    Rng rng;
    rng_seed(&rng, seed, 99);                       /* test stream: independent of training batches */
    long n_exact = 0, n_tok = 0;
    for (int done = 0; done < n_test; done += max_B) {
        int B = n_test - done < max_B ? n_test - done : max_B;
        digit_task_batch(task, x, y, B, N, &rng);
        digit_model_forward(m, x, NULL, B);
        digit_model_predict(m, pred);
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

/* Attention heatmaps of every layer for the first test sequence. */
static int plot_model_attention(DigitModel *m, DigitTask task, PosType pos, const Flags *f) {
    const int N = m->N;
    int x[64], y[64];
    char x_text[64][8], y_text[64][8];
    const char *x_labels[64], *y_labels[64];
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 99);
    digit_task_batch(task, x, y, 1, N, &rng);
    digit_model_forward(m, x, NULL, 1);
    for (int i = 0; i < N; i++) {
        snprintf(x_text[i], sizeof x_text[i], "%d", x[i]);
        snprintf(y_text[i], sizeof y_text[i], "%d", y[i]);
        x_labels[i] = x_text[i];
        y_labels[i] = y_text[i];
    }
    for (int l = 0; l < m->L; l++) {
        char stem[1024], title[160];
        snprintf(stem, sizeof stem, "%s/attn_%s_%s_layer%d", f->out, digit_task_name(task),
                 pos_type_name(pos), l + 1);
        snprintf(title, sizeof title, "%s, %s positions: layer %d attention A", digit_task_name(task),
                 pos_type_name(pos), l + 1);
        if (plot_heatmap(stem, title, digit_model_attention(m, l, 0), N, N, x_labels, y_labels,
                         "input digit (key j)", "target at output i (query i)", 0.0f, 1.0f) < 0)
            return -1;
        printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    }
    return 0;
}

static int train_one(DigitTask task, PosType pos, const Flags *f, RunResult *out) {
    DigitModel m;
    int C = digit_task_classes(task, f->len);
    if (digit_model_create(&m, f->len, f->dim, f->hidden, f->layers, C, pos, f->causal, f->batch,
                           (uint64_t)f->seed) < 0)
        return -1;
    Adam opt;
    if (adam_init(&opt, &m.params, f->lr, 0.0f) < 0) return -1;
    int *x = xmalloc(sizeof(int) * (size_t)f->batch * f->len);
    int *y = xmalloc(sizeof(int) * (size_t)f->batch * f->len);
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 1);           /* training stream */
    printf("  %-8s %-11s %zu parameters\n", digit_task_name(task), pos_type_name(pos), m.params.size);
    Progress pr;
    progress_start(&pr, f->steps, f->steps / 4, f->quiet);
    double t0 = now_seconds(), loss = 0.0;
    for (int step = 0; step < f->steps; step++) {
        digit_task_batch(task, x, y, f->batch, f->len, &rng);
        params_zero_grad(&m.params);
        loss = digit_model_forward(&m, x, y, f->batch);
        digit_model_backward(&m, x, y);
        clip_grad_norm(&m.params, 1.0f);
        adam_step(&opt, &m.params, lr_schedule(step, f->steps, f->steps / 20, f->lr, 0.05f));
        progress_update(&pr, step + 1, (float)loss, (long)(step + 1) * f->batch, NULL);
    }
    progress_end(&pr);
    out->seconds = now_seconds() - t0;
    out->final_loss = loss;
    evaluate(&m, task, f->test_size, (uint64_t)f->seed, f->batch, &out->exact, &out->token_acc);
    snprintf(out->checkpoint, sizeof out->checkpoint, "%s/model_%s_%s.ckpt", f->out, digit_task_name(task),
             pos_type_name(pos));
    int rc = digit_model_save(&m, digit_task_name(task), f->seed, out->checkpoint);
    if (rc == 0) rc = plot_model_attention(&m, task, pos, f);
    free(x); free(y);
    adam_free(&opt);
    digit_model_free(&m);
    return rc;
}

/* ------------------------------------------------ sinusoidal encoding plots */

static int plot_sinusoids(const Flags *f) {
    enum { N_POS = 64 };
    const int D = f->dim;
    float *P = xmalloc(sizeof(float) * N_POS * D), *PP = xmalloc(sizeof(float) * N_POS * N_POS);
    positional_encoding_sinusoidal(P, N_POS, D);
    matmul_nt(PP, P, P, N_POS, N_POS, D, 0);         /* PP[s, t] = P_s . P_t */
    char stem[1024];
    int rc = 0;
    snprintf(stem, sizeof stem, "%s/pos_encoding", f->out);
    rc |= plot_heatmap(stem, "Sinusoidal positional encoding P[t, :]", P, N_POS, D, NULL, NULL,
                       "dimension (sin, cos pairs; frequency falls to the right)", "position t",
                       -1.0f, 1.0f);
    printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    snprintf(stem, sizeof stem, "%s/pos_dot_products", f->out);
    rc |= plot_heatmap(stem, "Dot products P_s . P_t of sinusoidal encodings", PP, N_POS, N_POS, NULL,
                       NULL, "position t", "position s", 0.0f, 0.0f);
    printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    free(P); free(PP);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------ --load: a saved model */

/* Evaluate the checkpoint f->load on its task's test set or, with --input, run
 * it on the user's digits (and plot its attention with --plot). */
static int run_loaded(const Flags *f) {
    DigitModel m;
    char task_name[32];
    int seed;
    DigitTask task = TASK_REVERSE;
    if (digit_model_load(&m, f->load, f->batch, task_name, sizeof task_name, &seed) < 0) return -1;
    digit_task_from_name(task_name, &task);          /* checked by digit_model_load */
    printf("Loaded %s: task %s, N = %d, D = %d, MLP %d, %d layer%s, %s positions%s, %zu parameters\n",
           f->load, task_name, m.N, m.D, m.F, m.L, m.L == 1 ? "" : "s", pos_type_name(m.pos),
           m.causal ? ", causal mask" : "", m.params.size);
    int rc = 0;
    if (!f->input) {
        double exact, token_acc;
        evaluate(&m, task, f->test_size, (uint64_t)seed, f->batch, &exact, &token_acc);
        printf("  %d test sequences of '%s': exact match %.1f%%, token accuracy %.1f%%\n", f->test_size,
               task_name, 100 * exact, 100 * token_acc);
    } else {
        int x[64], y[64], pred[64];
        rc = digits_parse(f->input, m.N, x);
        if (rc == 0) {
            digit_task_targets(task, x, y, m.N);
            digit_model_forward(&m, x, NULL, 1);
            digit_model_predict(&m, pred);
            digit_print_prediction(task_name, x, pred, y, m.N);
        }
        if (rc == 0 && f->plot) rc = plot_input_attention(&m, x, pred, f->out);
    }
    digit_model_free(&m);
    return rc;
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv) {
    Flags f = {.out = "out/04_self_attention", .task = "all", .pos = "all", .backend = NULL,
               .load = NULL, .input = NULL, .plot = 0,
               .steps = 600, .seed = 1, .threads = 0, .len = 8, .dim = 64, .hidden = 128,
               .layers = 2, .batch = 64, .test_size = 2000, .causal = 0, .quiet = 0, .lr = 3e-3f};
    const ArgSpec specs[] = {
        {"task", ARG_STRING, &f.task, "which task(s) to train", 0, 0, "all,reverse,sort,count"},
        {"pos", ARG_STRING, &f.pos, "positional encoding(s)", 0, 0, "all,none,sinusoidal,learned"},
        {"steps", ARG_INT, &f.steps, "training steps per model", 1, 1000000, NULL},
        {"batch", ARG_INT, &f.batch, "sequences per step", 1, 4096, NULL},
        {"lr", ARG_FLOAT, &f.lr, "Adam learning rate (warm-up, then cosine decay)", 1e-6, 1, NULL},
        {"len", ARG_INT, &f.len, "sequence length N", 2, 64, NULL},
        {"dim", ARG_INT, &f.dim, "model width D (= D_in = D_out of every layer)", 2, 1024, NULL},
        {"hidden", ARG_INT, &f.hidden, "MLP hidden size", 1, 4096, NULL},
        {"layers", ARG_INT, &f.layers, "self-attention layers", 1, DIGIT_MAX_LAYERS, NULL},
        {"causal", ARG_BOOL, &f.causal, "causal mask: output i only sees inputs 1..i", 0, 0, NULL},
        {"test-size", ARG_INT, &f.test_size, "test sequences", 1, 1000000, NULL},
        {"seed", ARG_INT, &f.seed, "random seed (model, batches, test set)", 0, 2147483647, NULL},
        {"out", ARG_STRING, &f.out, "output directory", 0, 0, NULL},
        {"backend", ARG_STRING, &f.backend, "matmul backend; without the flag: $ATTN_BACKEND, else auto", 0, 0, "auto,naive,avx2,avx512"},
        {"threads", ARG_INT, &f.threads,
         "threads (0 = OMP_NUM_THREADS or all cores)", 0, 256, NULL},
        {"quiet", ARG_BOOL, &f.quiet, "no progress lines", 0, 0, NULL},
        {"load", ARG_STRING, &f.load, "evaluate this checkpoint (model_<task>_<pos>.ckpt) instead of training",
         0, 0, NULL},
        {"input", ARG_STRING, &f.input, "with --load: digits to run the model on, e.g. \"3 1 4 1 5 9 2 6\"", 0,
         0, NULL},
        {"plot", ARG_BOOL, &f.plot, "with --load and --input: write the attention heatmaps of that input", 0,
         0, NULL},
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    int rc = args_parse(argc, argv, specs, n_specs);
    if (rc == 1) {
        args_print_help(argv[0],
                        "Chapter 04: self-attention. Q, K, V all come from one input X; the layer is\n"
                        "permutation equivariant, so positional encodings are what tell it the order.\n"
                        "Trains a small self-attention model on reverse, sort and count of digit\n"
                        "sequences, without and with positional encodings.",
                        specs, n_specs);
        return 0;
    }
    if (rc == 0 && f.input && !f.load) rc = fail("--input needs --load CHECKPOINT (a trained model to run)");
    if (rc == 0 && f.plot && !f.input) rc = fail("--plot goes with --load CHECKPOINT --input DIGITS");
    if (rc < 0 || backend_select(f.backend) < 0 || make_dirs(f.out) < 0) {
        fprintf(stderr, "04_self_attention: error: %s\n", last_error());
        return 1;
    }
    threads_set(f.threads);
    if (f.load) {
        if (run_loaded(&f) < 0) {
            fprintf(stderr, "04_self_attention: error: %s\n", last_error());
            return 1;
        }
        return 0;
    }

    equivariance_demo((uint64_t)f.seed);

    printf("2. Training (%d steps of %d sequences of %d digits; D = %d, MLP %d, %d layer%s%s; "
           "backend %s, %d thread%s)\n",
           f.steps, f.batch, f.len, f.dim, f.hidden, f.layers, f.layers == 1 ? "" : "s",
           f.causal ? ", causal mask" : "", backend_name(backend_current()), threads_current(),
           threads_current() == 1 ? "" : "s");
    RunResult results[DIGIT_N_TASKS][POS_N_TYPES];
    int ran[DIGIT_N_TASKS][POS_N_TYPES] = {{0}};
    double total_seconds = 0.0;
    for (int t = 0; t < DIGIT_N_TASKS; t++) {
        if (strcmp(f.task, "all") != 0 && strcmp(f.task, digit_task_name((DigitTask)t)) != 0) continue;
        for (int p = 0; p < POS_N_TYPES; p++) {
            if (strcmp(f.pos, "all") != 0 && strcmp(f.pos, pos_type_name((PosType)p)) != 0) continue;
            if (train_one((DigitTask)t, (PosType)p, &f, &results[t][p]) < 0) {
                fprintf(stderr, "04_self_attention: error: %s\n", last_error());
                return 1;
            }
            ran[t][p] = 1;
            total_seconds += results[t][p].seconds;
        }
    }

    printf("\n3. Results on %d test sequences (chance per token: 10%% for reverse and sort)\n\n",
           f.test_size);
    printf("  | task    | positions  | exact match | token acc. | final loss | train s |\n");
    printf("  |---------|------------|-------------|------------|------------|---------|\n");
    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", "04_self_attention");
    for (int t = 0; t < DIGIT_N_TASKS; t++)
        for (int p = 0; p < POS_N_TYPES; p++) {
            if (!ran[t][p]) continue;
            const RunResult *r = &results[t][p];
            printf("  | %-7s | %-10s | %10.1f%% | %9.1f%% | %10.3f | %7.1f |\n",
                   digit_task_name((DigitTask)t), pos_type_name((PosType)p), 100 * r->exact,
                   100 * r->token_acc, r->final_loss, r->seconds);
            char key[48];
            snprintf(key, sizeof key, "%s_%s_exact_match", digit_task_name((DigitTask)t),
                     pos_type_name((PosType)p));
            results_set_num(&res, key, r->exact);
            snprintf(key, sizeof key, "%s_%s_token_acc", digit_task_name((DigitTask)t),
                     pos_type_name((PosType)p));
            results_set_num(&res, key, r->token_acc);
        }
    /* the headline: the first task run, with sinusoidal positions if it ran */
    for (int t = 0; t < DIGIT_N_TASKS; t++) {
        int p = ran[t][POS_SINUSOIDAL] ? POS_SINUSOIDAL : -1;
        for (int q = 0; p < 0 && q < POS_N_TYPES; q++) if (ran[t][q]) p = q;
        if (p < 0) continue;
        results_set_str(&res, "task", digit_task_name((DigitTask)t));
        results_set_str(&res, "positions", pos_type_name((PosType)p));
        results_set_num(&res, "test_exact_match", results[t][p].exact);
        results_set_num(&res, "test_token_acc", results[t][p].token_acc);
        break;
    }
    results_set_num(&res, "train_seconds", total_seconds);
    results_set_num(&res, "steps", f.steps);
    results_set_num(&res, "batch", f.batch);
    results_set_num(&res, "len", f.len);
    results_set_num(&res, "dim", f.dim);
    results_set_num(&res, "layers", f.layers);
    results_set_num(&res, "causal", f.causal);
    results_set_num(&res, "seed", f.seed);
    results_set_num(&res, "test_n", f.test_size);
    results_set_str(&res, "backend", backend_name(backend_current()));
    results_set_num(&res, "threads", threads_current());
    printf("\n  total training time %.1f s\n\nWrote:\n", total_seconds);
    char path[1024];
    snprintf(path, sizeof path, "%s/results.json", f.out);
    if (plot_sinusoids(&f) < 0 || results_write(&res, path) < 0) {
        fprintf(stderr, "04_self_attention: error: %s\n", last_error());
        return 1;
    }
    printf("  %s\n", path);
    for (int t = 0; t < DIGIT_N_TASKS; t++)
        for (int p = 0; p < POS_N_TYPES; p++)
            if (ran[t][p]) printf("  %s   (try: --load %s --input \"3 1 4 1 ...\")\n", results[t][p].checkpoint,
                                  results[t][p].checkpoint);
    return 0;
}
