/* bench_train_step.c - milliseconds per training step of each chapter's default model.
 *
 *   build/bench/bench_train_step [--out DIR] [--reps N] [--chapters 01,04] [--backends avx2,avx512]
 *                                [--threads 1,2,0] [--busy]
 *
 * One training step is what the chapter's training loop does for one batch:
 * zero the gradients, forward, backward, clip the gradient norm, Adam update.
 * Each chapter's DEFAULT model (the sizes its main.c uses without flags) runs
 * on a realistic batch (the dataset's first shuffled training batch, or the
 * digit task's batch), on the naive, the AVX2 and (when the CPU has it) the
 * AVX-512 backend, or on an ARM CPU (AArch64) the naive and the NEON
 * backend, the SIMD ones at each thread count of --threads (default 1, 2 and
 * 0; the naive one at 1 thread only). 0 is the programs' default, all cores,
 * where each parallel region takes as many threads as its work pays for
 * (common/kernels/threads.c); a fixed count N is threads_set(N), the cap of
 * --threads N. Every figure is the median of --reps timed steps after one
 * warm-up step; the configurations take turns step by step, so a slow spell
 * of this shared machine hits all of them alike.
 *
 * The check: with 0 in the list and a fixed count beside it, each chapter's
 * line ends with whether the default (0) step of the widest backend is within
 * 10% of that backend's best fixed thread count of the list, both measured in
 * this run, taking turns; the last line counts the chapters that are.
 *
 * Writes DIR/train_step.tsv (chapter impl threads ms) and
 * DIR/train_step_batches.txt: each chapter's sizes and the exact batch, so
 * tools/bench_torch.py builds the same models on the same batches (it then
 * appends its impl=torch rows to the .tsv).
 *
 * --busy measures something else: how the default backend copes with
 * another program on the machine. A child process spins on the CPU for the
 * whole run (what a browser tab or a second training run does to a student's
 * laptop), and each chapter's step is timed on 1 and on 2 threads; written to
 * DIR/train_step_busy.tsv (chapter impl threads ms, impl = the backend name
 * followed by "+busy"). Two threads beside a busy program can be far slower
 * than one, because every product waits for whichever thread was switched
 * out; common/kernels/threads.c detects that and falls back to one thread.
 *
 * A chapter joins by adding one entry to CHAPTERS below: its name, and a
 * create function that builds its model and batch. Prints figures and ratios;
 * never passes or fails. */
#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "02_bahdanau_attention/bahdanau.h"
#include "03_dot_product_attention/attn_seq2seq.h"
#include "04_self_attention/digit_model.h"
#include "data/digit_tasks.h"
#include "train/classifier.h"
#include "05_multi_head_attention/multi_head_model.h"
#include "06_transformer/gpt.h"
#include "06_transformer/transformer.h"
#include "data/brown.h"
#include "07_vision_transformer/vit.h"
#include "data/fashion_mnist.h"
#include "util/error.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "nn/optim.h"
#include "nn/params.h"
#include "train/seq2seq.h"
#include "util/util.h"

/* ---- What one chapter provides ---------------------------------------------------- */

/* A model ready to train on one fixed batch. forward_backward() runs the
 * forward pass and accumulates the gradients (the harness zeroes them first,
 * and clips and updates after), returning the loss. */
typedef struct {
    void *state;
    Params *params;
    double (*forward_backward)(void *state);
    void (*destroy)(void *state);
    double multiply_adds; /* sgemm's M * N * K per step, counted while timing */
} BenchModel;

typedef struct {
    const char *chapter;        /* "01_rnn_seq2seq" */
    const char *description;    /* the model, in a few words */
    /* Build the model and its batch; describe both on batch_log (for the
     * PyTorch twin). Returns 0, or -1 with fail(). */
    int (*create)(BenchModel *model, FILE *batch_log);
} ChapterBench;

static void log_ints(FILE *f, const char *name, const int *values, int n) {
    fprintf(f, " %s=", name);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", values[i]);
}

/* ---- Sequence-to-sequence chapters (01, 02, 03, 06): the dates task, one batch of 64 ---- */

typedef struct {
    Dataset data;
    Batch batch;
    Seq2Seq model;
} Seq2SeqBench;

static double seq2seq_forward_backward(void *state) {
    Seq2SeqBench *s = state;
    return s->model.train_step(s->model.self, &s->batch, 1);
}

static void seq2seq_destroy(void *state) {
    Seq2SeqBench *s = state;
    s->model.destroy(s->model.self);
    batch_free(&s->batch);
    dataset_free(&s->data);
    free(s);
}

enum { SEQ2SEQ_BATCH = 64, SEQ2SEQ_SEED = 42 };

/* build: the chapter's model from config text (its *_from_text below); config: its
 * default model lines.
 * The batch is the first one seq2seq_train (common/train/seq2seq.c) draws. */
static int seq2seq_bench_create(BenchModel *model, FILE *batch_log, const char *chapter,
                                int (*build)(Seq2Seq *, const Dataset *, const char *, int, uint64_t),
                                const char *config) {
    Seq2SeqBench *s = xcalloc(1, sizeof *s);
    TaskConfig tc;
    if (task_defaults(&tc, "dates") < 0 || dataset_load(&s->data, &tc) < 0) {
        free(s);
        return -1;
    }
    if (build(&s->model, &s->data, config, SEQ2SEQ_BATCH, SEQ2SEQ_SEED) < 0) {
        dataset_free(&s->data);
        free(s);
        return -1;
    }
    int *order = xmalloc(sizeof(int) * (size_t)s->data.train.n);
    for (int i = 0; i < s->data.train.n; i++) order[i] = i;
    Rng rng;
    rng_seed(&rng, SEQ2SEQ_SEED, 7);
    rng_shuffle(&rng, order, s->data.train.n);
    batch_alloc(&s->batch, SEQ2SEQ_BATCH, s->data.max_src_len, s->data.max_tgt_len);
    batch_fill(&s->batch, &s->data.train, order, SEQ2SEQ_BATCH);
    free(order);

    const Batch *b = &s->batch;
    fprintf(batch_log, "chapter=%s V_src=%d V_tgt=%d B=%d T=%d Tt=%d params=%zu", chapter,
            s->data.src_vocab.size, s->data.tgt_vocab.size, b->batch, b->src_len, b->tgt_len,
            s->model.params->size);
    /* config lines "key=value\n" -> " key=value" */
    fputc(' ', batch_log);
    for (const char *c = config; *c; c++) fputc(*c == '\n' ? ' ' : *c, batch_log);
    log_ints(batch_log, "src", b->src, b->batch * b->src_len);
    log_ints(batch_log, "src_lens", b->src_lens, b->batch);
    log_ints(batch_log, "tgt_in", b->tgt_in, b->batch * b->tgt_len);
    log_ints(batch_log, "tgt_out", b->tgt_out, b->batch * b->tgt_len);
    fputc('\n', batch_log);

    model->state = s;
    model->params = s->model.params;
    model->forward_backward = seq2seq_forward_backward;
    model->destroy = seq2seq_destroy;
    return 0;
}

/* Chapters 01-03's models from config text (each model's table of fields). */
static int rnn_seq2seq_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    RnnConfig cfg;
    if (config_read(config, RNN_CONFIG_FIELDS, RNN_CONFIG_N, &cfg) < 0) return -1;
    return rnn_seq2seq_build(m, d, &cfg, max_batch, seed);
}

static int bahdanau_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    BahdanauConfig cfg;
    if (config_read(config, BAHDANAU_CONFIG_FIELDS, BAHDANAU_CONFIG_N, &cfg) < 0) return -1;
    return bahdanau_build(m, d, &cfg, max_batch, seed);
}

static int attn_seq2seq_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    AttnSeq2SeqConfig cfg;
    if (config_read(config, ATTN_SEQ2SEQ_CONFIG_FIELDS, ATTN_SEQ2SEQ_CONFIG_N, &cfg) < 0) return -1;
    return attn_seq2seq_build(m, d, &cfg, max_batch, seed);
}

/* Chapter 01's defaults (chapters/01_rnn_seq2seq/main.c): GRU, D_E 32, S 128. */
static int create_01(BenchModel *model, FILE *batch_log) {
    return seq2seq_bench_create(model, batch_log, "01_rnn_seq2seq", rnn_seq2seq_from_text,
                                "cell=gru\nembed=32\nstate=128\n");
}

/* Chapter 02's defaults (chapters/02_bahdanau_attention/main.c): GRU, D_E 32, S 96, D_A 32. */
static int create_02(BenchModel *model, FILE *batch_log) {
    return seq2seq_bench_create(model, batch_log, "02_bahdanau_attention", bahdanau_from_text,
                                "cell=gru\nembed=32\nstate=96\nattn=32\nbidirectional=0\n");
}

/* Chapter 03's defaults (chapters/03_dot_product_attention/main.c): GRU, D_E 32,
 * S 128, scaled dot-product score, Luong placement. */
static int create_03(BenchModel *model, FILE *batch_log) {
    return seq2seq_bench_create(model, batch_log, "03_dot_product_attention", attn_seq2seq_from_text,
                                "cell=gru\nembed=32\nstate=128\nscore=scaled_dot\nplacement=luong\n"
                                "attn=64\nproject_kv=0\n");
}

/* Chapter 06's transformer from config text (its table, transformer.h). */
static int transformer_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    TransformerConfig cfg = {0};
    if (config_read(config, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &cfg) < 0) return -1;
    return transformer_build(m, d, &cfg, max_batch, seed);
}

/* Chapter 06's encoder-decoder at the program's default: D 128, 2 encoder
 * and 2 decoder blocks, 4 heads, F 512, pre-norm, LayerNorm, GELU, dropout 0,
 * sinusoidal positions, label smoothing 0.1. */
static int create_06(BenchModel *model, FILE *batch_log) {
    return seq2seq_bench_create(model, batch_log, "06_transformer", transformer_from_text,
                                "layers=2\ndim=128\nheads=4\nff=512\nnorm=pre\nnorm_type=layernorm\nmlp=gelu\n"
                                "dropout=0\npos=sinusoidal\nlabel_smoothing=0.1\nkv_cache=1\n");
}

/* ---- Per-position chapters (04, 05): 64 sequences of 8 digits --------------------- */

enum { DIGIT_BATCH = 64, DIGIT_LEN = 8, DIGIT_DIM = 64, DIGIT_HIDDEN = 128 };

/* Any model of the per-position driver (common/train/classifier.h), on one
 * batch of its task's training stream (seed 1, stream 1: the chapters' first). */
typedef struct {
    Classifier model;
    DigitTaskSpec spec;
    ExampleTask task;
    Examples batch;
} ClassifierBench;

static double classifier_forward_backward(void *state) {
    ClassifierBench *s = state;
    double loss = s->model.forward(s->model.self, &s->batch);
    s->model.backward(s->model.self, &s->batch);
    return loss;
}

static void classifier_destroy(void *state) {
    ClassifierBench *s = state;
    s->model.destroy(s->model.self);
    examples_free(&s->batch);
    free(s);
}

/* s->model: the chapter's model of configuration sz, built; task: its digit task. */
static int classifier_bench_create(BenchModel *model, FILE *batch_log, const char *chapter, ClassifierBench *s,
                                   DigitTask task, const DigitConfig *sz, int heads) {
    s->spec = (DigitTaskSpec){task, sz->N};
    digit_example_task(&s->task, &s->spec);
    examples_alloc(&s->batch, DIGIT_BATCH, s->task.n_in, s->task.n_out, 0);
    Rng rng;
    rng_seed(&rng, 1, 1);
    s->task.train_batch(s->task.self, &s->batch, DIGIT_BATCH, &rng);
    /* the sizes tools/bench_torch.py rebuilds the model from */
    fprintf(batch_log, "chapter=%s B=%d N=%d D=%d F=%d L=%d C=%d pos=%s heads=%d", chapter, DIGIT_BATCH, sz->N,
            sz->D, sz->F, sz->L, sz->C, pos_type_name(sz->pos), heads);
    log_ints(batch_log, "x", s->batch.tokens, DIGIT_BATCH * DIGIT_LEN);
    log_ints(batch_log, "y", s->batch.targets, DIGIT_BATCH * DIGIT_LEN);
    fputc('\n', batch_log);
    model->state = s;
    model->params = s->model.params;
    model->forward_backward = classifier_forward_backward;
    model->destroy = classifier_destroy;
    return 0;
}

/* Chapter 04's defaults (chapters/04_self_attention/main.c): N 8, D 64, MLP 128,
 * 2 layers, batch 64; the reverse task with sinusoidal positions. */
static int create_04(BenchModel *model, FILE *batch_log) {
    const DigitConfig c = {.N = DIGIT_LEN, .D = DIGIT_DIM, .F = DIGIT_HIDDEN, .L = 2,
                           .C = digit_task_classes(TASK_REVERSE, DIGIT_LEN), .pos = POS_SINUSOIDAL};
    ClassifierBench *s = xcalloc(1, sizeof *s);
    if (digit_model_build(&s->model, &c, DIGIT_BATCH, 1) < 0) {
        free(s);
        return -1;
    }
    return classifier_bench_create(model, batch_log, "04_self_attention", s, TASK_REVERSE, &c, 1);
}

/* Chapter 05's defaults (chapters/05_multi_head_attention/main.c): chapter 04's
 * model with 1 layer of 4 heads of size 16 (its widest of --heads 1,2,4;
 * H * D_H = D = 64), learned positions, the count_next task. */
static int create_05(BenchModel *model, FILE *batch_log) {
    const MultiHeadModelConfig c = {.digit = {.N = DIGIT_LEN, .D = DIGIT_DIM, .F = DIGIT_HIDDEN, .L = 1,
                                              .C = digit_task_classes(TASK_COUNT_NEXT, DIGIT_LEN), .pos = POS_LEARNED},
                                    .H = 4, .D_H = 16};
    ClassifierBench *s = xcalloc(1, sizeof *s);
    if (mh_model_build(&s->model, &c, MULTI_HEAD_PLAIN, DIGIT_BATCH, 1) < 0) {
        free(s);
        return -1;
    }
    return classifier_bench_create(model, batch_log, "05_multi_head_attention", s, TASK_COUNT_NEXT, &c.digit, 4);
}

/* ---- Chapter 06's GPT: windows of the Brown corpus's characters ------------------- */

typedef struct {
    Gpt g;
    int B;
    int *x, *y;   /* [B, N] tokens and the next tokens */
} GptBench;

/* What 06_gpt's training step does (gpt_run.c's gradient): the mean
 * cross-entropy per target, and its gradient. */
static double gpt_forward_backward(void *state) {
    GptBench *s = state;
    double sum = gpt_forward(&s->g, s->x, s->y, s->B, 1);
    gpt_backward(&s->g, s->x, s->y, s->B, (float)s->g.last_counted);
    return sum / s->g.last_counted;
}

static void gpt_bench_destroy(void *state) {
    GptBench *s = state;
    gpt_free(&s->g);
    free(s->x);
    free(s->y);
    free(s);
}

/* A GPT of L blocks of width D (H heads, F = 4 D, pre-norm, LayerNorm, GELU,
 * learned positions, dropout 0) on the characters of the Brown corpus; the
 * batch is the first one build/06_gpt draws with its default seed (42):
 * B windows of N characters at random places of the training part. */
static int gpt_bench_create(BenchModel *model, FILE *batch_log, const char *chapter, int L, int D, int H, int N,
                            int B) {
    BrownCorpus c;
    if (brown_load(&c, NULL, BROWN_CHARS) < 0) return -1;
    GptConfig cfg = {.layers = L,
                     .block = {.D = D, .H = H, .D_H = D / H, .F = 4 * D, .norm_place = BLOCK_PRE_NORM,
                               .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN,
                               .causal = 1},
                     .pos = POSITIONS_LEARNED, .context = N, .V = c.V};
    GptBench *s = xcalloc(1, sizeof *s);
    if (gpt_create(&s->g, &cfg, B, 42) < 0) {
        gpt_free(&s->g);
        free(s);
        brown_free(&c);
        return -1;
    }
    s->B = B;
    s->x = xmalloc(sizeof(int) * (size_t)B * N);
    s->y = xmalloc(sizeof(int) * (size_t)B * N);
    Rng rng;
    rng_seed(&rng, 42, 1);   /* gpt_run.c's gradient(): the windows' stream */
    for (int b = 0; b < B; b++) {
        const int a = (int)rng_below(&rng, (uint32_t)(c.train.n - N - 1) + 1);
        memcpy(s->x + (size_t)b * N, c.train.ids + a, sizeof(int) * (size_t)N);
        memcpy(s->y + (size_t)b * N, c.train.ids + a + 1, sizeof(int) * (size_t)N);
    }
    /* the sizes tools/bench_torch.py rebuilds the model from */
    fprintf(batch_log, "chapter=%s B=%d N=%d V=%d params=%zu layers=%d dim=%d heads=%d ff=%d norm=pre "
                       "norm_type=layernorm mlp=gelu pos=learned dropout=0",
            chapter, B, N, c.V, s->g.params.size, L, D, H, 4 * D);
    log_ints(batch_log, "x", s->x, B * N);
    log_ints(batch_log, "y", s->y, B * N);
    fputc('\n', batch_log);
    brown_free(&c);
    model->state = s;
    model->params = &s->g.params;
    model->forward_backward = gpt_forward_backward;
    model->destroy = gpt_bench_destroy;
    return 0;
}

/* build/06_gpt's model (chapters/06_transformer/gpt_run.c): characters, 4
 * blocks, D 128, 4 heads, F 512, batch 16, here with windows of 128 (the
 * quick default trains on windows of 64). */
static int create_06_gpt(BenchModel *model, FILE *batch_log) {
    return gpt_bench_create(model, batch_log, "06_gpt", 4, 128, 4, 128, 16);
}

/* nanoGPT's documented CPU run (its README, "I only have a macbook": the
 * Shakespeare characters with --n_layer=4 --n_head=4 --n_embd=128
 * --block_size=64 --batch_size=12 --dropout=0.0), here on the Brown characters,
 * with biases (nanoGPT's default has none). */
static int create_06_gpt_nanogpt(BenchModel *model, FILE *batch_log) {
    return gpt_bench_create(model, batch_log, "06_gpt_nanogpt_cpu", 4, 128, 4, 64, 12);
}

/* ---- Chapter 07: the ViT on 128 Fashion-MNIST training images ------------------------ */

/* Chapter 07's quick default (chapters/07_vision_transformer/main.c): patch 7
 * (16 patches + the class token), D 64, 2 blocks of 4 heads, F 128, learned
 * positions, batch 128; the first batch of the training stream (seed 1,
 * stream 1), not augmented. The images are not logged: the step's time does
 * not depend on their values, so tools/bench_torch.py draws its own. */
enum { VIT_BATCH = 128 };

typedef struct {
    Classifier model;
    FashionMnistTask ft;
    ExampleTask task;
    Examples batch;
} VitBench;

static FashionMnist vit_data;   /* loaded once, kept until the program ends */

static double vit_forward_backward(void *state) {
    VitBench *s = state;
    double loss = s->model.forward(s->model.self, &s->batch);
    s->model.backward(s->model.self, &s->batch);
    return loss;
}

static void vit_destroy(void *state) {
    VitBench *s = state;
    s->model.destroy(s->model.self);
    examples_free(&s->batch);
    free(s);
}

static int create_07(BenchModel *model, FILE *batch_log) {
    const VitConfig cfg = {.patch = {.channels = 1, .rows = 28, .cols = 28, .P = 7, .D = 64}, .layers = 2,
                           .heads = 4, .ff = 128, .dropout = 0.0f, .pool = VIT_POOL_CLS, .pos = VIT_POS_LEARNED,
                           .classes = FASHION_MNIST_CLASSES};
    if (vit_data.test.n == 0 && fashion_mnist_load(&vit_data, NULL, 1) < 0) return -1;
    VitBench *s = xcalloc(1, sizeof *s);
    if (vit_build(&s->model, &cfg, VIT_BATCH, 1) < 0) {
        free(s);
        return -1;
    }
    s->ft = (FashionMnistTask){.d = &vit_data};
    fashion_mnist_task(&s->ft, &s->task);
    examples_alloc(&s->batch, VIT_BATCH, s->task.n_in, s->task.n_out, 1);
    Rng rng;
    rng_seed(&rng, 1, 1);
    s->task.train_batch(s->task.self, &s->batch, VIT_BATCH, &rng);
    fprintf(batch_log, "chapter=07_vision_transformer B=%d P=%d D=%d F=%d L=%d heads=%d C=%d pool=%s pos=%s "
            "params=%zu", VIT_BATCH, cfg.patch.P, cfg.patch.D, cfg.ff, cfg.layers, cfg.heads, cfg.classes,
            vit_pool_name(cfg.pool), vit_pos_name(cfg.pos), s->model.params->size);
    log_ints(batch_log, "y", s->batch.targets, VIT_BATCH);
    fputc('\n', batch_log);
    model->state = s;
    model->params = s->model.params;
    model->forward_backward = vit_forward_backward;
    model->destroy = vit_destroy;
    return 0;
}

/* ---- The table: one line per chapter ---------------------------------------------- */

static const ChapterBench CHAPTERS[] = {
    {"01_rnn_seq2seq", "GRU encoder-decoder, D_E 32, S 128; dates, batch 64", create_01},
    {"02_bahdanau_attention", "GRU + additive attention, D_E 32, S 96, D_A 32; dates, batch 64", create_02},
    {"03_dot_product_attention", "GRU + scaled dot attention (Luong), D_E 32, S 128; dates, batch 64", create_03},
    {"04_self_attention", "2 self-attention layers, D 64, MLP 128; 64 x 8 digits", create_04},
    {"05_multi_head_attention", "1 layer of 4 heads x 16, D 64, MLP 128; count_next, 64 x 8 digits", create_05},
    {"06_transformer", "encoder-decoder transformer, 2 + 2 pre-norm blocks, D 128, 4 heads, F 512; dates, batch 64",
     create_06},
    {"06_gpt", "GPT, 4 pre-norm blocks, D 128, 4 heads, F 512; Brown characters, context 128, batch 16",
     create_06_gpt},
    {"06_gpt_nanogpt_cpu", "GPT at nanoGPT's CPU setting: 4 blocks, D 128, 4 heads, F 512; context 64, batch 12",
     create_06_gpt_nanogpt},
    {"07_vision_transformer", "ViT, patch 7 (16 patches + class token), D 64, 2 blocks of 4 heads, F 128; "
     "Fashion-MNIST, batch 128", create_07},
};
enum { N_CHAPTERS = sizeof CHAPTERS / sizeof CHAPTERS[0] };

/* ---- Timing ----------------------------------------------------------------------- */

typedef struct {
    const char *backend;   /* "naive", "avx2", "avx512" or "neon" */
    int threads;           /* 0: the default, all cores */
} Config;

static const char *const BACKENDS[] = {"naive", "avx2", "avx512", "neon"};
enum { N_BACKENDS = 4, MAX_THREAD_COUNTS = 16, N_CONFIGS = N_BACKENDS * MAX_THREAD_COUNTS, MAX_REPS = 64 };
static int chapter_selected(const char *list, const char *chapter);
/* --backends: the backends to time (NULL: all). */
static const char *only_backends = NULL;
/* --threads: the thread counts (0: the default, all cores), in the order given. */
static int thread_counts[MAX_THREAD_COUNTS], n_thread_counts;

/* A backend this CPU can run (AVX-512 only with AVX-512F, NEON only on
 * AArch64) and --backends selects. */
static int backend_runs_here(const char *backend) {
    return (strcmp(backend, "avx2") != 0 || cpu_has_avx2_fma()) &&
           (strcmp(backend, "avx512") != 0 || cpu_has_avx512f()) &&
           (strcmp(backend, "neon") != 0 || cpu_has_neon()) && chapter_selected(only_backends, backend);
}

/* "1,2,0" -> thread_counts; 0 or -1 with a message naming what was wrong. */
static int parse_thread_counts(const char *text) {
    n_thread_counts = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v < 0 || v > THREADS_MAX) {
            fprintf(stderr, "bench_train_step: --threads expects thread counts from 0 (the default, all cores) "
                            "to %d separated by commas, got '%s'\n", THREADS_MAX, text);
            return -1;
        }
        int seen = 0;
        for (int i = 0; i < n_thread_counts; i++) seen |= thread_counts[i] == (int)v;
        if (!seen) {
            if (n_thread_counts == MAX_THREAD_COUNTS) {
                fprintf(stderr, "bench_train_step: --threads lists more than %d counts\n", MAX_THREAD_COUNTS);
                return -1;
            }
            thread_counts[n_thread_counts++] = (int)v;
        }
        p = *end == ',' ? end + 1 : end;
    }
    if (n_thread_counts == 0) {
        fprintf(stderr, "bench_train_step: --threads expects at least one thread count\n");
        return -1;
    }
    return 0;
}

/* One training step as the chapters' loops do it; returns milliseconds. */
static double timed_step(BenchModel *m, Adam *opt, double *loss) {
    double t0 = bench_now_ms();
    params_zero_grad(m->params);
    *loss = m->forward_backward(m->state);
    clip_grad_norm(m->params, 1.0f);
    adam_step(opt, m->params, 1e-3f);
    return bench_now_ms() - t0;
}

static void use_config(const Config *c) {
    backend_select(c->backend);
    threads_set(c->threads);
}

/* What is timed: each backend that runs here at each thread count (the
 * naive one at 1 thread only: it is the specification, timed to show what
 * the SIMD kernels gain); with --busy the default backend at 1 and 2. */
static Config configs[N_CONFIGS];
static int n_configs;

static void build_configs(void) {
    n_configs = 0;
    for (int b = 0; b < N_BACKENDS; b++) {
        if (!backend_runs_here(BACKENDS[b])) continue;
        for (int i = 0; i < n_thread_counts; i++) {
            if (b == 0 && thread_counts[i] != 1) continue;
            configs[n_configs++] = (Config){BACKENDS[b], thread_counts[i]};
        }
    }
}

/* "1t", "2t" or "all" (the default) */
static const char *threads_label(int threads, char *buf, size_t size) {
    if (threads == 0) snprintf(buf, size, "all");
    else snprintf(buf, size, "%dt", threads);
    return buf;
}

/* ms[config] = median over reps of one step in each configuration. Returns 0,
 * or -1 when the loss is not finite (a broken model is not worth timing). */
/* tools/profile_step.sh runs this program under `perf record --control` with
 * the events off and names perf's control and acknowledgement FIFOs in
 * ATTN_PERF_CTL and ATTN_PERF_ACK: the events are switched on for the timed
 * steps only, so the profile leaves out loading the data and building the
 * model. Without the variables this does nothing. */
static void perf_control(const char *command) {
    const char *ctl_path = getenv("ATTN_PERF_CTL"), *ack_path = getenv("ATTN_PERF_ACK");
    if (!ctl_path || !ack_path) return;
    FILE *ctl = fopen(ctl_path, "w");
    if (!ctl) return;
    fprintf(ctl, "%s\n", command);
    fclose(ctl);
    FILE *ack = fopen(ack_path, "r"); /* perf answers "ack" once the events are switched */
    if (!ack) return;
    char line[16];
    if (!fgets(line, sizeof line, ack)) line[0] = '\0';
    fclose(ack);
}

static int measure_chapter(BenchModel *m, int reps, double ms[N_CONFIGS]) {
    static double samples[N_CONFIGS][MAX_REPS];
    Adam opt;
    if (adam_init(&opt, m->params, 1e-3f, 0.0f) < 0) return -1;
    double loss = 0.0;
    for (int c = 0; c < n_configs; c++) {   /* warm-up: caches, thread pool, first touch */
        use_config(&configs[c]);
        timed_step(m, &opt, &loss);
    }
    unsigned long long macs_before = sgemm_multiply_adds();
    int steps = 0;
    perf_control("enable");
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < n_configs; c++) {
            use_config(&configs[c]);
            samples[c][r] = timed_step(m, &opt, &loss);
            steps++;
        }
    perf_control("disable");
    m->multiply_adds = steps > 0 ? (double)(sgemm_multiply_adds() - macs_before) / steps : 0.0;
    adam_free(&opt);
    for (int c = 0; c < n_configs; c++) {
        qsort(samples[c], reps, sizeof samples[c][0], bench_compare_doubles);
        ms[c] = samples[c][reps / 2];
    }
    if (!isfinite(loss)) return fail("loss is %g after %d steps", loss, n_configs * (reps + 1));
    return 0;
}

/* "01,04" selects chapters whose name starts with 01 or 04; NULL selects all.
 * (The same for --backends: "avx2" selects avx2.) */
static int chapter_selected(const char *list, const char *chapter) {
    if (list == NULL) return 1;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len > 0 && strncmp(chapter, p, len) == 0) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_train_step [--out DIR] [--reps N] [--chapters LIST] [--backends LIST] [--threads LIST] [--busy]\n"
            "  --out DIR        where to write train_step.tsv and train_step_batches.txt\n"
            "                   (default bench/results)\n"
            "  --reps N         timed steps per figure, the median is reported (default 7, max %d)\n"
            "  --chapters LIST  comma-separated chapter numbers, e.g. 01,04 (default: all)\n"
            "  --backends LIST  comma-separated backends among naive, avx2, avx512, neon (default: all;\n"
            "                   the others' columns are left at -)\n"
            "  --threads LIST   comma-separated thread counts, 0 = the default (all cores, each\n"
            "                   region as many threads as its work pays for); default 1,2,0.\n"
            "                   With 0 and a fixed count: the check, default against the best\n"
            "                   fixed count (tools/profile_step.sh profiles one configuration\n"
            "                   with --backends X --threads N)\n"
            "  --busy           time the default backend on 1 and 2 threads while another\n"
            "                   process spins on the CPU (writes train_step_busy.tsv)\n",
            MAX_REPS);
}

int main(int argc, char **argv) {
    const char *out_dir = "bench/results", *only = NULL;
    int reps = 7, busy = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            if (bench_int_arg("bench_train_step", "--reps", argv[++i], 1, MAX_REPS, &reps) != 0) return 2;
        } else if (strcmp(argv[i], "--chapters") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--backends") == 0 && i + 1 < argc) {
            only_backends = argv[++i];
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            if (parse_thread_counts(argv[++i]) != 0) return 2;
        } else if (strcmp(argv[i], "--busy") == 0) {
            busy = 1;
        } else {
            fprintf(stderr, "bench_train_step: unknown or incomplete argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (!cpu_has_avx2_fma() && !cpu_has_neon()) {
        fprintf(stderr, "bench_train_step: this CPU has neither AVX2/FMA nor NEON; nothing to compare\n");
        return 1;
    }

    if (n_thread_counts == 0) parse_thread_counts("1,2,0");
    build_configs();

    /* --busy: the default backend, 1 and 2 threads, beside a spinning child. */
    pid_t spinner = 0;
    char busy_impl[32] = "";
    if (busy) {
        only_backends = NULL;   /* --busy times the default backend */
        backend_select("auto");
        const char *name = backend_name(backend_current());
        snprintf(busy_impl, sizeof busy_impl, "%s+busy", name);
        configs[0] = (Config){name, 1};
        configs[1] = (Config){name, 2};
        n_configs = 2;
    }
    if (n_configs == 0) {
        fprintf(stderr, "bench_train_step: nothing to time: --backends names none this CPU runs\n");
        return 2;
    }
    /* The check's configurations: the widest backend timed (the last), at the
     * default (0) and at its best fixed count. */
    const char *check_backend = configs[n_configs - 1].backend;
    int check_default = -1, check_fixed = 0;
    for (int c = 0; c < n_configs && !busy; c++) {
        if (strcmp(configs[c].backend, check_backend) != 0) continue;
        if (configs[c].threads == 0) check_default = c;
        else check_fixed++;
    }
    if (check_fixed == 0) check_default = -1;
    int checked = 0, within = 0;

    const char *tsv_name = busy ? "train_step_busy.tsv" : "train_step.tsv";
    AtomicFile tsv_file, log_file;
    FILE *tsv = bench_open_result(&tsv_file, "bench_train_step", out_dir, tsv_name);
    if (!tsv) return 1;
    /* --busy keeps the batch file of the main run: tools/bench_torch.py reads it. */
    FILE *batch_log = busy ? fopen("/dev/null", "w")
                           : bench_open_result(&log_file, "bench_train_step", out_dir,
                                               "train_step_batches.txt");
    if (!batch_log) {
        if (busy) fprintf(stderr, "bench_train_step: cannot open /dev/null\n");
        atomic_close(&tsv_file, 0);
        return 1;
    }
    fprintf(tsv, "chapter\timpl\tthreads\tms\n");

    double load = bench_load_average();
    int cores = omp_get_num_procs();
    printf("One training step (zero grad, forward, backward, clip, Adam), ms: median of %d steps\n"
           "after a warm-up; load average %.2f on %d cores\n", reps, load, cores);
    if (load > 0.5)
        printf("WARNING: load average %.2f: other processes share the CPU; figures are slow and noisy,\n"
               "         2-thread figures most (a descheduled thread stalls the other at the end of every product)\n",
               load);
    if (busy) {
        spinner = fork();
        if (spinner == 0) { /* the child: another program that wants a whole core */
            volatile unsigned long spin = 0;
            for (;;) spin++;
        }
        if (spinner < 0) {
            fprintf(stderr, "bench_train_step: cannot start the busy process\n");
            atomic_close(&tsv_file, 0); /* busy: the batch log is /dev/null */
            fclose(batch_log);
            return 1;
        }
        printf("--busy: process %d spins on the CPU during the whole run; backend %s\n",
               (int)spinner, configs[0].backend);
        printf("\n%-26s %9s %9s %11s\n", "chapter", "busy 1t", "busy 2t", "2t / 1t");
    } else {
        /* the configurations' columns ("all": the default), then the check */
        printf("\n%-26s", "chapter");
        for (int c = 0; c < n_configs; c++) {
            char label[32], t[16];
            snprintf(label, sizeof label, "%s %s", configs[c].backend,
                     threads_label(configs[c].threads, t, sizeof t));
            printf(" %10s", label);
        }
        if (check_default >= 0) printf("  default / best fixed (%s)", check_backend);
        printf("\n");
    }
    long backoffs_before = threads_busy_backoffs();

    for (int k = 0; k < N_CHAPTERS; k++) {
        const ChapterBench *ch = &CHAPTERS[k];
        if (!chapter_selected(only, ch->chapter)) continue;
        BenchModel model = {0};
        double ms[N_CONFIGS];
        if (ch->create(&model, batch_log) < 0) {
            printf("%-26s skipped: %s\n", ch->chapter, last_error());
            continue;
        }
        fflush(batch_log);
        int rc = measure_chapter(&model, reps, ms);
        model.destroy(model.state);
        if (rc < 0) {
            printf("%-26s skipped: %s\n", ch->chapter, last_error());
            continue;
        }
        if (busy) {
            printf("%-26s %9.2f %9.2f %10.2fx\n", ch->chapter, ms[0], ms[1], ms[1] / ms[0]);
            for (int c = 0; c < n_configs; c++)
                fprintf(tsv, "%s\t%s\t%d\t%.3f\n", ch->chapter, busy_impl, configs[c].threads, ms[c]);
            fflush(stdout);
            continue;
        }
        printf("%-26s", ch->chapter);
        for (int c = 0; c < n_configs; c++) printf(" %10.2f", ms[c]);
        if (check_default >= 0) {   /* the default against the best fixed count of the same backend */
            int best = -1;
            for (int c = 0; c < n_configs; c++)
                if (strcmp(configs[c].backend, check_backend) == 0 && configs[c].threads > 0 &&
                    (best < 0 || ms[c] < ms[best]))
                    best = c;
            double ratio = ms[check_default] / ms[best];
            char t[16];
            checked++;
            within += ratio <= 1.10;
            printf("  %.2fx of %s: %s", ratio, threads_label(configs[best].threads, t, sizeof t),
                   ratio <= 1.10 ? "within 10%" : "SLOWER than 10%");
        }
        printf("\n");
        printf("%-26s (%s)\n", "", ch->description);
        printf("%-26s (gemm: %.2f million multiply-adds per step)\n", "", model.multiply_adds * 1e-6);
        fflush(stdout);
        for (int c = 0; c < n_configs; c++)
            if (ms[c] > 0)   /* threads 0: the default */
                fprintf(tsv, "%s\t%s\t%d\t%.3f\n", ch->chapter, configs[c].backend, configs[c].threads, ms[c]);
    }
    if (spinner > 0) {
        kill(spinner, SIGKILL);
        waitpid(spinner, NULL, 0);
        printf("2t / 1t above 1x: two threads were slower than one beside the busy process.\n"
               "the parallel regions fell back to one thread %ld time(s) (a partner thread twice found switched out).\n",
               threads_busy_backoffs() - backoffs_before);
    }
    if (checked > 0)
        printf("check: the default (all %d cores, each region's threads from the cost model) is within 10%% of\n"
               "the best fixed thread count in %d of %d chapters (%s, measured in this run, taking turns)\n",
               cores, within, checked, check_backend);
    int written = bench_close_result(&tsv_file, "bench_train_step") == 0;
    if (busy)
        fclose(batch_log);
    else if (bench_close_result(&log_file, "bench_train_step") != 0)
        written = 0;
    if (!written) return 1;
    double load_end = bench_load_average();
    if (!busy && load_end > 0.5 && load <= 0.5)
        printf("WARNING: load average rose to %.2f during the run; figures are noisy\n", load_end);
    printf("wrote %s/%s%s\n", out_dir, tsv_name, busy ? "" : " and train_step_batches.txt");
    return 0;
}
