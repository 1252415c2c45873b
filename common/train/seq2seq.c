/* seq2seq.c - the training loop, decoding, evaluation and experiment driver
 * shared by every sequence-to-sequence chapter (see seq2seq.h). */
#include "train/seq2seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/layers.h"
#include "kernels/matmul.h"
#include "train/metrics.h"
#include "nn/optim.h"
#include "io/plot.h"
#include "train/loop.h"
#include "io/results.h"
#include "util/util.h"

/* --------------------------------------------------------------- evaluation */

#define N_BUCKETS 6

typedef struct {
    Scores all;
    Scores by_len[N_BUCKETS];
    int bucket_lo[N_BUCKETS], bucket_hi[N_BUCKETS];
    int n_buckets;
    double seconds;
} Evaluation;

static int bucket_of(const Evaluation *ev, int len) {
    for (int k = 0; k < ev->n_buckets; k++)
        if (len >= ev->bucket_lo[k] && len <= ev->bucket_hi[k]) return k;
    return ev->n_buckets - 1;
}

/* Equal-width source-length buckets over the lengths present in the split. */
static void make_buckets(Evaluation *ev, const Split *s) {
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->ex[i].src_len < lo) lo = s->ex[i].src_len;
        if (s->ex[i].src_len > hi) hi = s->ex[i].src_len;
    }
    int span = hi - lo + 1;
    int n = span < N_BUCKETS ? span : N_BUCKETS;
    if (n < 1) n = 1;
    ev->n_buckets = n;
    for (int k = 0; k < n; k++) {
        ev->bucket_lo[k] = lo + (int)((long)span * k / n);
        ev->bucket_hi[k] = lo + (int)((long)span * (k + 1) / n) - 1;
        scores_init(&ev->by_len[k]);
    }
}

/* Decode examples [first, first + n) of a split into preds [n, max_out] /
 * pred_lens [n]: greedy a batch at a time, or beam search one at a time. */
static void decode_examples(Seq2Seq *m, const Split *s, const int *idx, int n, int max_out,
                            int beam_width, Batch *b, int *preds, int *pred_lens) {
    if (beam_width > 1) {
        for (int i = 0; i < n; i++) {
            const Example *e = &s->ex[idx[i]];
            pred_lens[i] = decode_beam_example(m, e, b->value_size, max_out, beam_width, preds + (size_t)i * max_out);
        }
        return;
    }
    batch_fill(b, s, idx, n);
    decode_greedy(m, b, max_out, preds, pred_lens, NULL);
}

static void evaluate(Seq2Seq *m, const Dataset *d, const Split *s, int max_examples,
                     int beam_width, int batch_size, Evaluation *ev) {
    int max_out = d->max_tgt_len + 10;
    int *preds = xmalloc(sizeof(int) * (size_t)batch_size * max_out);
    int *pred_lens = xmalloc(sizeof(int) * (size_t)batch_size);
    int *idx = xmalloc(sizeof(int) * (size_t)batch_size);
    Batch b;
    batch_alloc(&b, batch_size, d->max_src_len, d->max_tgt_len);
    if (d->value_size) batch_alloc_values(&b, batch_size, d->value_size);
    scores_init(&ev->all);
    make_buckets(ev, s);
    double t0 = now_seconds();
    int n = s->n < max_examples ? s->n : max_examples;
    for (int start = 0; start < n; start += batch_size) {
        int count = n - start < batch_size ? n - start : batch_size;
        for (int i = 0; i < count; i++) idx[i] = start + i;
        decode_examples(m, s, idx, count, max_out, beam_width, &b, preds, pred_lens);
        for (int i = 0; i < count; i++) {
            const Example *e = &s->ex[start + i];
            const int *pred = preds + (size_t)i * max_out;
            scores_add(&ev->all, pred, pred_lens[i], (const int *const *)e->refs, e->ref_lens, e->n_refs);
            scores_add(&ev->by_len[bucket_of(ev, e->src_len)], pred, pred_lens[i],
                       (const int *const *)e->refs, e->ref_lens, e->n_refs);
        }
    }
    ev->seconds = now_seconds() - t0;
    batch_free(&b);
    free(preds);
    free(pred_lens);
    free(idx);
}

/* Teacher-forced mean loss on up to max_examples of a split (no gradients). */
static double split_loss(Seq2Seq *m, const Split *s, Batch *b, int batch_size, int max_examples) {
    int n = s->n < max_examples ? s->n : max_examples;
    int *idx = xmalloc(sizeof(int) * (size_t)batch_size);
    double total = 0;
    long tokens = 0;
    for (int start = 0; start < n; start += batch_size) {
        int count = n - start < batch_size ? n - start : batch_size;
        for (int i = 0; i < count; i++) idx[i] = start + i;
        batch_fill(b, s, idx, count);
        long batch_tokens = 0;
        for (int i = 0; i < count; i++) batch_tokens += b->tgt_lens[i];
        total += m->train_step(m->self, b, 0) * (double)batch_tokens;
        tokens += batch_tokens;
    }
    free(idx);
    return tokens ? total / (double)tokens : 0.0;
}

/* ------------------------------------------------------------- training */

/* What the training loop's Trainer works on: the model, the training
 * examples in a shuffled order (reshuffled when a batch would run past the
 * end), and one batch buffer. */
typedef struct {
    Seq2Seq *model;
    const Dataset *data;
    int batch_size;
    Batch batch;
    int *order;     /* [data->train.n] the training examples' order */
    int cursor;     /* the next batch starts at order[cursor] */
    Rng rng;
} Seq2SeqTraining;

/* Trainer.gradient: the next batch, forward and backward (loop.h). */
static double seq2seq_gradient(void *self, int step, long *count) {
    Seq2SeqTraining *tr = self;
    const Split *train = &tr->data->train;
    (void)step;
    if (tr->cursor + tr->batch_size > train->n) {
        rng_shuffle(&tr->rng, tr->order, train->n);
        tr->cursor = 0;
    }
    const int n = tr->batch_size < train->n ? tr->batch_size : train->n;
    batch_fill(&tr->batch, train, tr->order + tr->cursor, n);
    tr->cursor += n;
    *count = n;
    return tr->model->train_step(tr->model->self, &tr->batch, 1);
}

/* Trainer.validate: the loss on up to 1000 validation examples. */
static double seq2seq_validate(void *self) {
    Seq2SeqTraining *tr = self;
    return split_loss(tr->model, &tr->data->valid, &tr->batch, tr->batch_size, 1000);
}

/* ------------------------------------------------------------ the program */

typedef struct {
    const char *task;
    int steps, batch, seed, n_train, min_len, max_len;
    float lr, clip, weight_decay;
    int warmup, eval_every, beam, threads, samples, plot, quiet, max_eval;
    const char *out, *load, *translate, *backend, *preset;
    const char *matmul_precision; /* "float" (NULL: the same) or "bf16" (kernels/matmul.h) */
} CommonFlags;

/* The task's config lines; string lengths only for reverse, the one task
 * that has them (results.json repeats these lines). */
static int task_lines(char *config, int cap, const TaskConfig *tc, const Dataset *d) {
    char lengths[64] = "";
    if (strcmp(tc->task, "reverse") == 0)
        snprintf(lengths, sizeof lengths, "min_len=%d\nmax_len=%d\n", tc->min_len, tc->max_len);
    int n = snprintf(config, (size_t)cap,
                     "task=%s\ndata_seed=%llu\nn_train=%d\nn_valid=%d\nn_test=%d\n%s"
                     "src_vocab_size=%d\ntgt_vocab_size=%d\n",
                     tc->task, (unsigned long long)tc->seed, tc->n_train, tc->n_valid, tc->n_test, lengths,
                     d->src_vocab.size, d->tgt_vocab.size);
    return n < cap ? 0 : fail("configuration text too long");
}


static int check_vocab_sizes(const char *config, const Dataset *d, const char *path) {
    int src_size, tgt_size;
    if (config_get_int(config, "src_vocab_size", &src_size) < 0 ||
        config_get_int(config, "tgt_vocab_size", &tgt_size) < 0)
        return -1;
    if (src_size != d->src_vocab.size || tgt_size != d->tgt_vocab.size)
        return fail("%s: vocabulary sizes %d/%d in the checkpoint do not match the data's %d/%d "
                    "(was the checkpoint made with another version of the data?)",
                    path, src_size, tgt_size, d->src_vocab.size, d->tgt_vocab.size);
    return 0;
}

static void print_results_table(const char *chapter, const Dataset *d, const Evaluation *ev,
                                int beam, double train_seconds) {
    int g2p = strcmp(d->task, "g2p") == 0;
    printf("\nResults on the %s test split (%ld examples, %s decoding):\n", d->task, ev->all.n,
           beam > 1 ? "beam" : "greedy");
    printf("  %-22s %s\n", "chapter", chapter);
    printf("  %-22s %6.2f%%\n", "exact match", 100.0 * scores_exact(&ev->all));
    printf("  %-22s %6.2f%%\n", "token accuracy", 100.0 * scores_token_acc(&ev->all));
    if (g2p) {
        printf("  %-22s %6.2f%%\n", "word error rate (WER)", 100.0 * scores_wer(&ev->all));
        printf("  %-22s %6.2f%%\n", "phoneme error rate", 100.0 * scores_per(&ev->all));
    }
    if (train_seconds > 0) printf("  %-22s %6.1f s\n", "training time", train_seconds);
    printf("  %-22s %6.1f s\n", "evaluation time", ev->seconds);
    const char *len_name = d->src_len_name ? d->src_len_name : "input length";
    printf("\nExact match by %s:\n", len_name);
    printf("  %-12s %8s %10s\n", d->src_len_name ? "count" : "length", "examples", "exact");
    for (int k = 0; k < ev->n_buckets; k++) {
        if (ev->by_len[k].n == 0) continue;
        printf("  %4d - %-5d %8ld %9.2f%%\n", ev->bucket_lo[k], ev->bucket_hi[k], ev->by_len[k].n,
               100.0 * scores_exact(&ev->by_len[k]));
    }
}

/* The model holds activations for batch_size rows: the samples are decoded that many at a time. */
static void print_samples(Seq2Seq *m, const Dataset *d, const Split *s, int n_samples, int beam, int batch_size) {
    if (n_samples <= 0 || s->n == 0) return;
    if (n_samples > s->n) n_samples = s->n;
    int max_out = d->max_tgt_len + 10;
    int *preds = xmalloc(sizeof(int) * (size_t)n_samples * max_out);
    int *pred_lens = xmalloc(sizeof(int) * (size_t)n_samples);
    int *idx = xmalloc(sizeof(int) * (size_t)n_samples);
    for (int i = 0; i < n_samples; i++) idx[i] = (int)((long)i * s->n / n_samples);
    Batch b;
    batch_alloc(&b, n_samples, d->max_src_len, d->max_tgt_len);
    if (d->value_size) batch_alloc_values(&b, n_samples, d->value_size);
    for (int start = 0; start < n_samples; start += batch_size) {
        int count = n_samples - start < batch_size ? n_samples - start : batch_size;
        decode_examples(m, s, idx + start, count, max_out, beam, &b, preds + (size_t)start * max_out,
                        pred_lens + start);
    }
    char got[512], want[512];
    printf("\nSample predictions (test split):\n");
    for (int i = 0; i < n_samples; i++) {
        const Example *e = &s->ex[idx[i]];
        const int *pred = preds + (size_t)i * max_out;
        vocab_decode(&d->tgt_vocab, pred, pred_lens[i], d->tgt_sep, got, sizeof got);
        vocab_decode(&d->tgt_vocab, e->tgt, e->tgt_len, d->tgt_sep, want, sizeof want);
        Scores one;
        scores_init(&one);
        scores_add(&one, pred, pred_lens[i], (const int *const *)e->refs, e->ref_lens, e->n_refs);
        printf("  %-32s -> %-28s %s %s\n", e->src_text, got, one.exact ? "ok   " : "WRONG",
               one.exact ? "" : want);
    }
    batch_free(&b);
    free(preds);
    free(pred_lens);
    free(idx);
}

/* Draw the attention map of one decoded input as a labelled heatmap. */
static int plot_attention(Seq2Seq *m, const Dataset *d, const int *src, int src_len,
                          const char *stem, const char *title) {
    int max_out = d->max_tgt_len + 10;
    int *pred = xmalloc(sizeof(int) * (size_t)max_out);
    float *attn = xcalloc((size_t)max_out * src_len, sizeof(float));
    int src_lens[1] = {src_len}, zero[1] = {0}, n = 0;
    Batch one = {.batch = 1, .src_len = src_len, .tgt_len = 1, .src = (int *)src, .src_lens = src_lens,
                 .tgt_in = zero, .tgt_out = zero, .tgt_lens = zero};
    decode_greedy(m, &one, max_out, pred, &n, attn);
    int rows = n < max_out ? n + 1 : n; /* the <eos> step too */
    char (*xl)[TOKEN_MAX] = xcalloc((size_t)src_len, TOKEN_MAX);
    char (*yl)[TOKEN_MAX] = xcalloc((size_t)rows, TOKEN_MAX);
    const char **x_labels = xcalloc((size_t)src_len, sizeof(char *));
    const char **y_labels = xcalloc((size_t)rows, sizeof(char *));
    for (int i = 0; i < src_len; i++) {
        snprintf(xl[i], TOKEN_MAX, "%s", vocab_token(&d->src_vocab, src[i]));
        x_labels[i] = xl[i];
    }
    for (int t = 0; t < rows; t++) {
        snprintf(yl[t], TOKEN_MAX, "%s", t < n ? vocab_token(&d->tgt_vocab, pred[t]) : "<eos>");
        y_labels[t] = yl[t];
    }
    int rc = plot_heatmap(stem, title, attn, rows, src_len, x_labels, y_labels,
                          "source", "output", "attention weight a_{t,i}", 0.0f, 1.0f);
    if (rc == 0 && m->plot_layers) rc = m->plot_layers(m->self, d, src, src_len, pred, n, stem);
    free(pred); free(attn); free(xl); free(yl); free(x_labels); free(y_labels);
    return rc;
}

int seq2seq_main(int argc, char **argv, const ChapterSpec *spec) {
    setvbuf(stdout, NULL, _IOLBF, 0);   /* progress lines appear as they happen, even in a log */
    CommonFlags f = {
        .task = "dates", .steps = spec->default_steps ? spec->default_steps : 3000,
        .batch = spec->default_batch ? spec->default_batch : 64, .seed = 42,
        .n_train = 0, .min_len = 0, .max_len = 0,
        .lr = spec->default_lr > 0 ? spec->default_lr : 3e-3f, .clip = 1.0f, .weight_decay = 0.0f,
        .warmup = 100, .eval_every = 250, .beam = 1, .threads = 0, .samples = 8, .plot = 0,
        .quiet = 0, .max_eval = 0,
        .out = NULL, .load = NULL, .translate = NULL, .backend = NULL, .preset = "none",
    };
    const ArgSpec common[] = {
        {"task", ARG_STRING, &f.task, "the task to learn (see the chapter's README)", 0,
         0, "dates,reverse,g2p", ARG_DATA},
        {"n-train", ARG_INT, &f.n_train, "training examples of a generated task (0 = its default)", 0, 10000000, NULL,
         ARG_DATA},
        {"min-len", ARG_INT, &f.min_len, "reverse: shortest string (0 = task default)", 0, 100, NULL, ARG_DATA},
        {"max-len", ARG_INT, &f.max_len, "reverse: longest string (0 = task default)", 0, 100, NULL, ARG_DATA},
        {"steps", ARG_INT, &f.steps, "training steps (batches)", 0, 10000000, NULL, ARG_TRAINING},
        {"batch", ARG_INT, &f.batch, "examples per batch", 1, 4096, NULL, ARG_TRAINING},
        {"lr", ARG_FLOAT, &f.lr, "peak learning rate (Adam)", 1e-6, 1, NULL, ARG_TRAINING},
        {"warmup", ARG_INT, &f.warmup, "learning-rate warm-up steps", 0, 1000000, NULL, ARG_TRAINING},
        {"clip", ARG_FLOAT, &f.clip, "clip the global gradient norm to this (0 = off)", 0, 1e6, NULL, ARG_TRAINING},
        {"weight-decay", ARG_FLOAT, &f.weight_decay, "AdamW decoupled weight decay", 0, 1, NULL, ARG_TRAINING},
        {"seed", ARG_INT, &f.seed, "random seed for the model and batches", 0, 2147483647, NULL, ARG_TRAINING},
        {"eval-every", ARG_INT, &f.eval_every, "steps between validation-loss checks", 1, 1000000, NULL, ARG_TRAINING},
        {"preset", ARG_STRING, &f.preset, "long: the README's longer run on g2p", 0, 0, "none,long", ARG_TRAINING},
        {"max-eval", ARG_INT, &f.max_eval, "evaluate on at most this many test examples (0 = all)", 0, 2147483647, NULL,
         ARG_OUTPUT},
        {"beam", ARG_INT, &f.beam, "beam width for decoding (1 = greedy)", 1, 64, NULL, ARG_OUTPUT},
        {"samples", ARG_INT, &f.samples, "sample predictions to print", 0, 1000, NULL, ARG_OUTPUT},
        {"out", ARG_STRING, &f.out, "output directory (default out/<chapter>; --load: eval_* in it)", 0, 0, NULL, ARG_OUTPUT},
        {"load", ARG_STRING, &f.load, "load this checkpoint instead of training", 0, 0, NULL, ARG_OUTPUT},
        {"translate", ARG_STRING, &f.translate, "with --load: decode this text and print the output", 0, 0, NULL,
         ARG_OUTPUT},
        {"plot", ARG_BOOL, &f.plot, "with --translate: draw the attention heatmap for the input", 0, 0, NULL,
         ARG_OUTPUT},
        {"backend", ARG_STRING, &f.backend, "matmul backend (default: $ATTN_BACKEND, else auto)", 0, 0,
         "auto,naive,avx2,avx512", ARG_SHARED},
        {"matmul-precision", ARG_STRING, &f.matmul_precision, MATMUL_PRECISION_HELP, 0, 0, "float,bf16", ARG_SHARED},
        {"threads", ARG_INT, &f.threads, "threads (0 = OMP_NUM_THREADS or all cores)", 0, 256, NULL, ARG_SHARED},
        {"quiet", ARG_BOOL, &f.quiet, "no progress line", 0, 0, NULL, ARG_SHARED},
    };
    const int n_common = (int)(sizeof common / sizeof common[0]);
    /* The chapter's own flags first, then the common ones; a common flag
     * this chapter has no use for is not listed and is refused with why. */
    int n_specs = spec->n_model_args + n_common;
    ArgSpec *specs = xcalloc((size_t)n_specs, sizeof(ArgSpec));
    if (spec->n_model_args) memcpy(specs, spec->model_args, sizeof(ArgSpec) * (size_t)spec->n_model_args);
    for (int i = 0; i < n_common; i++) {
        ArgSpec *s = &specs[spec->n_model_args + i];
        *s = common[i];
        /* an image chapter's own flags choose its data, and it has no text to translate */
        static const char *const token_only[] = {"task", "n-train", "min-len", "max-len", "translate", "plot"};
        for (size_t k = 0; spec->load_data && k < sizeof token_only / sizeof token_only[0]; k++)
            if (strcmp(s->name, token_only[k]) == 0)
                *s = args_refused(s->name, "this chapter's inputs are images, chosen by its own flags (see --help)");
        if (strcmp(s->name, "plot") == 0 && spec->no_attention)
            *s = args_refused(s->name, "this chapter's model has no attention weights to draw");
        if (strcmp(s->name, "preset") == 0 && !spec->preset_long)
            *s = args_refused(s->name, "this chapter has no long preset");
    }

    int exit_code = 1;
    Dataset data;
    memset(&data, 0, sizeof data);
    Seq2Seq model;
    memset(&model, 0, sizeof model);
    char *config = NULL;
    TrainLog train_log = {0};               /* the loss curve; freed at done:, */
    int *ids = NULL, *out_ids = NULL;       /* as --translate's buffers */
    char default_out[256];

    int rc = args_parse(argc, argv, specs, n_specs);
    char **preset_argv = NULL;
    if (rc == 0 && strcmp(f.preset, "long") == 0) {
        rc = args_parse_with_preset(argc, argv, spec->preset_long, specs, n_specs, &preset_argv);
        if (rc == 0) printf("--preset long = %s\n", spec->preset_long);
    }
    if (rc == 1) {
        args_print_help(argv[0], spec->summary, specs, n_specs, spec->examples);
        free(specs);
        return 0;
    }
    if (rc < 0) goto error;
    char keep[512];
    snprintf(keep, sizeof keep, "out,load,translate,plot,backend,matmul-precision,threads,quiet,beam,max-eval,samples,batch%s%s",
             spec->load_flags ? "," : "", spec->load_flags ? spec->load_flags : "");
    if (f.load && args_refuse_with_load(argc, argv, specs, n_specs, keep) < 0) goto error;
    if (f.translate && !f.load) { fail("--translate needs --load CHECKPOINT (a model to translate with)"); goto error; }
    if (f.plot && !f.translate) { fail("--plot goes with --load CKPT --translate TEXT"); goto error; }
    if (backend_select(f.backend) < 0 || matmul_precision_select(f.matmul_precision) < 0) goto error;
    threads_set(f.threads);
    snprintf(default_out, sizeof default_out, "out/%s", spec->chapter);
    /* training writes to --out (default out/<chapter>); evaluating a saved
     * model never over a training run's files (results.h) */
    char eval_out[OUT_DIR_MAX + 1];
    if (f.load && results_eval_dir(eval_out, sizeof eval_out, f.out, default_out, f.load) < 0) goto error;
    const char *out_dir = f.load ? eval_out : f.out ? f.out : default_out;
    /* a path too long or a directory that cannot be written: said now, not
     * after the training whose model would be lost (util.h) */
    if (!f.load && out_dir_prepare("--out", out_dir) < 0) goto error;

    TaskConfig tc;
    char task_buf[32];
    int max_batch = f.batch > f.beam ? f.batch : f.beam;   /* beam search steps W rows at once */
    config = xcalloc(CKPT_CONFIG_MAX, 1);
    if (f.load) {
        char *saved = NULL;
        if (checkpoint_read_config(f.load, &saved) < 0) goto error;
        snprintf(config, CKPT_CONFIG_MAX, "%s", saved);
        free(saved);
        if (checkpoint_check_model(f.load, config, spec->model_name, spec->chapter) < 0) goto error;
        if (spec->load_data) {
            if (spec->load_data(&data, config) < 0) {
                fail("%s: %s", f.load, last_error());
                goto error;
            }
        } else {
            if (task_from_config(&tc, config, task_buf, sizeof task_buf) < 0) {
                fail("%s: %s", f.load, last_error());
                goto error;
            }
            if (dataset_load(&data, &tc) < 0) goto error;
        }
        if (check_vocab_sizes(config, &data, f.load) < 0) goto error;
        if (spec->build(&model, &data, config, max_batch, (uint64_t)f.seed) < 0) {
            fail("%s: %s", f.load, last_error());
            goto error;
        }
        if (checkpoint_load(f.load, model.params) < 0) goto error;
    } else if (spec->load_data) {
        /* an image chapter: its config names the data; the vocabulary sizes follow */
        if (spec->write_config(config, CKPT_CONFIG_MAX) < 0) goto error;
        if (spec->load_data(&data, config) < 0) goto error;
        size_t used = strlen(config);
        int n = snprintf(config + used, CKPT_CONFIG_MAX - used, "src_vocab_size=%d\ntgt_vocab_size=%d\n",
                         data.src_vocab.size, data.tgt_vocab.size);
        if (n < 0 || (size_t)n >= CKPT_CONFIG_MAX - used) { fail("configuration text too long"); goto error; }
        if (spec->build(&model, &data, config, max_batch, (uint64_t)f.seed) < 0) goto error;
    } else {
        if (task_defaults(&tc, f.task) < 0) goto error;
        if (f.n_train) tc.n_train = f.n_train;
        if (f.min_len) tc.min_len = f.min_len;
        if (f.max_len) tc.max_len = f.max_len;
        if (tc.min_len > tc.max_len) {
            fail("--min-len %d is larger than --max-len %d", tc.min_len, tc.max_len);
            goto error;
        }
        if (dataset_load(&data, &tc) < 0) goto error;
        if (task_lines(config, CKPT_CONFIG_MAX, &tc, &data) < 0) goto error;
        if (spec->write_config(config, CKPT_CONFIG_MAX) < 0) goto error;
        if (spec->build(&model, &data, config, max_batch, (uint64_t)f.seed) < 0) goto error;
    }

    /* --translate: decode what the user typed, and stop. */
    if (f.translate) {
        /* sized by the data: the longest source the model reads, the longest
         * output the decoder may write (a dictionary entry can be long) */
        int len = 0, max_out = data.max_tgt_len + 10;
        ids = xmalloc(sizeof(int) * (size_t)(data.max_src_len > 0 ? data.max_src_len : 1));
        out_ids = xmalloc(sizeof(int) * (size_t)max_out);
        if (dataset_encode_source(&data, f.translate, ids, data.max_src_len, &len) < 0) goto error;
        int n = decode_beam(&model, ids, len, max_out, f.beam, out_ids);
        char text[1024];
        vocab_decode(&data.tgt_vocab, out_ids, n, data.tgt_sep, text, sizeof text);
        printf("%s -> %s\n", f.translate, text);
        if (f.plot) {
            if (!model.has_attention) {
                fail("--plot: this chapter's model has no attention weights to draw");
                goto error;
            }
            char stem[1024];
            if (path_format(stem, sizeof stem, "%s/translate_attention", out_dir) < 0 || make_dirs(out_dir) < 0 ||
                plot_attention(&model, &data, ids, len, stem, f.translate) < 0)
                goto error;
            printf("attention map: %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
        }
        exit_code = 0;
        goto done;
    }
    /* the chapter's own use of a saved model (chapter 07: --image) */
    if (f.load && spec->use_loaded) {
        int used = spec->use_loaded(&model, &data, out_dir);
        if (used < 0) goto error;
        if (used > 0) {
            exit_code = 0;
            goto done;
        }
    }

    if (make_dirs(out_dir) < 0) goto error;
    if (!f.load) results_note_other_run(out_dir, config);   /* another model's files there? say so once */
    printf("%s: task %s, %d train / %d valid / %d test examples, %zu parameters, backend %s%s, %d thread%s\n",
           spec->chapter, data.task, data.train.n, data.valid.n, data.test.n, model.params->size,
           backend_name(backend_current()), matmul_precision_current() == PRECISION_BF16 ? ", bf16 products" : "",
           threads_current(), threads_current() == 1 ? "" : "s");

    double train_seconds = 0;
    double final_loss = NAN;
    if (!f.load && f.steps > 0) {
        /* ------------------------------------------------------- training */
        Seq2SeqTraining tr = {.model = &model, .data = &data, .batch_size = f.batch};
        batch_alloc(&tr.batch, f.batch, data.max_src_len, data.max_tgt_len);
        if (data.value_size) batch_alloc_values(&tr.batch, f.batch, data.value_size);
        tr.order = xmalloc(sizeof(int) * (size_t)data.train.n);
        for (int i = 0; i < data.train.n; i++) tr.order[i] = i;
        rng_seed(&tr.rng, (uint64_t)f.seed, 7);
        rng_shuffle(&tr.rng, tr.order, data.train.n);
        const Trainer trainer = {.self = &tr, .params = model.params, .gradient = seq2seq_gradient,
                                 .validate = seq2seq_validate};
        TrainOptions opts = TRAIN_DEFAULTS;
        opts.steps = f.steps;
        opts.lr = f.lr;
        opts.warmup = f.warmup;
        opts.clip = f.clip;
        opts.weight_decay = f.weight_decay;
        opts.eval_every = f.eval_every;
        opts.quiet = f.quiet;
        const int trained = train_loop(&trainer, &opts, &train_log);
        batch_free(&tr.batch);
        free(tr.order);
        if (trained < 0) goto error;
        train_seconds = train_log.seconds;
        final_loss = train_log.last_loss;
        printf("trained %d steps in %.1f s (%.0f examples/s)\n", f.steps, train_seconds,
               (double)train_log.count / (train_seconds > 0 ? train_seconds : 1));
    }

    /* ---------------------------------------------------------- evaluation */
    Evaluation ev;
    evaluate(&model, &data, &data.test, f.max_eval > 0 ? f.max_eval : data.test.n, f.beam, f.batch, &ev);
    print_results_table(spec->chapter, &data, &ev, f.beam, train_seconds);
    print_samples(&model, &data, &data.test, f.samples, f.beam, f.batch);

    /* ------------------------------------------------------------- outputs */
    printf("\nWrote:\n");
    char path[1024];
    if (!f.load) {
        if (path_format(path, sizeof path, "%s/model.ckpt", out_dir) < 0) goto error;
        if (checkpoint_save(path, config, model.params) < 0) goto error;
        if (data.value_size) printf("  %s   (try: --load %s --image FILE.pgm)\n", path, path);
        else printf("  %s   (try: --load %s --translate \"...\")\n", path, path);
    }
    if (train_log.n > 0) {
        const float *ys[2] = {train_log.train, train_log.valid};
        const char *names[2] = {"train loss", "validation loss"};
        if (path_format(path, sizeof path, "%s/loss", out_dir) < 0) goto error;
        if (plot_lines(path, "Cross-entropy per token", "step", "loss", train_log.step, ys, names, 2,
                       train_log.n, 1) < 0)
            goto error;
        printf("  %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    }
    {
        float xs[N_BUCKETS], acc[N_BUCKETS];
        int k_used = 0;
        for (int k = 0; k < ev.n_buckets; k++) {
            if (ev.by_len[k].n == 0) continue;
            xs[k_used] = 0.5f * (float)(ev.bucket_lo[k] + ev.bucket_hi[k]);
            acc[k_used] = (float)(100.0 * scores_exact(&ev.by_len[k]));
            k_used++;
        }
        const float *ys[1] = {acc};
        const char *names[1] = {"exact match (%)"};
        if (path_format(path, sizeof path, "%s/acc_by_len", out_dir) < 0) goto error;
        /* accuracy axes run 0-100%: auto-scaling makes one miss in 288 look like a cliff */
        const char *len_name = data.src_len_name ? data.src_len_name : "input length";
        char title[128];
        snprintf(title, sizeof title, "Test exact match by %s", len_name);
        if (plot_lines_range(path, title, len_name, "exact match (%)",
                             xs, ys, names, 1, k_used, 0, 0.0f, 100.0f) < 0)
            goto error;
        printf("  %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    }
    if (model.has_attention && !data.value_size) {   /* image tasks draw their own (after_eval) */
        for (int i = 0; i < 3 && i < data.test.n; i++) {
            const Example *e = &data.test.ex[i * (data.test.n / 3)];
            if (path_format(path, sizeof path, "%s/attention_%d", out_dir, i) < 0) goto error;
            if (plot_attention(&model, &data, e->src, e->src_len, path, e->src_text) < 0) goto error;
            printf("  %s.%s\n", path, gnuplot_available() ? "png" : "gp");
        }
    }
    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", spec->chapter);
    results_set_config(&res, config);
    results_set_num(&res, "steps", f.load ? 0 : f.steps);
    results_set_num(&res, "batch", f.batch);
    results_set_num(&res, "lr", f.lr);
    results_set_num(&res, "seed", f.seed);
    results_set_num(&res, "parameters", (double)model.params->size);
    results_set_str(&res, "backend", backend_name(backend_current()));
    results_set_str(&res, "matmul_precision", matmul_precision_name(matmul_precision_current()));
    results_set_num(&res, "threads", threads_current());
    results_set_num(&res, "beam", f.beam);
    results_set_num(&res, "test_n", (double)ev.all.n);
    results_set_num(&res, "test_exact_match", scores_exact(&ev.all));
    results_set_num(&res, "test_token_acc", scores_token_acc(&ev.all));
    if (strcmp(data.task, "g2p") == 0) {
        results_set_num(&res, "test_wer", scores_wer(&ev.all));
        results_set_num(&res, "test_per", scores_per(&ev.all));
    }
    results_set_num(&res, "train_seconds", train_seconds);
    results_set_num(&res, "eval_seconds", ev.seconds);
    results_set_num(&res, "final_train_loss", final_loss);
    for (int k = 0; k < ev.n_buckets; k++) {
        if (ev.by_len[k].n == 0) continue;
        char key[48];
        snprintf(key, sizeof key, "test_exact_len_%d_%d", ev.bucket_lo[k], ev.bucket_hi[k]);
        results_set_num(&res, key, scores_exact(&ev.by_len[k]));
    }
    if (spec->after_eval && spec->after_eval(&model, &data, out_dir, &res) < 0) goto error;
    if (path_format(path, sizeof path, "%s/results.json", out_dir) < 0) goto error;
    if (results_write(&res, path) < 0) goto error;
    printf("  %s\n", path);
    exit_code = 0;
    goto done;

error:
    fprintf(stderr, "%s: error: %s\n", spec->chapter, last_error());
    exit_code = 1;
done:
    free(ids);
    free(out_ids);
    train_log_free(&train_log);
    if (model.destroy) model.destroy(model.self);
    dataset_free(&data);
    free(config);
    free(specs);
    free(preset_argv);
    return exit_code;
}
