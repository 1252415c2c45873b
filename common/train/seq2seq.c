/* seq2seq.c - the seq2seq driver: flags, data, training through train_loop,
 * decoding, evaluation and outputs, as calls a program's main makes in
 * order (see seq2seq.h). */
#include "train/seq2seq.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bible.h"
#include "io/checkpoint.h"
#include "io/plot.h"
#include "kernels/matmul.h"
#include "util/error.h"
#include "util/output.h"

/* --------------------------------------------------------------- evaluation */

static int bucket_of(const Seq2SeqScores *ev, int len) {
    for (int k = 0; k < ev->n_buckets; k++)
        if (len >= ev->bucket_lo[k] && len <= ev->bucket_hi[k]) return k;
    return ev->n_buckets - 1;
}

/* Equal-width source-length buckets over the lengths present in the split. */
static void make_buckets(Seq2SeqScores *ev, const Split *s) {
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->ex[i].src_len < lo) lo = s->ex[i].src_len;
        if (s->ex[i].src_len > hi) hi = s->ex[i].src_len;
    }
    int span = hi - lo + 1;
    int n = span < SEQ2SEQ_LEN_BUCKETS ? span : SEQ2SEQ_LEN_BUCKETS;
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
                     int beam_width, int batch_size, Seq2SeqScores *ev) {
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
    char *text = xmalloc(SEQ2SEQ_TEXT_MAX);
    ev->has_bleu = d->tgt_bpe != NULL;
    if (ev->has_bleu) {   /* translate: BLEU on the text, each output kept for translations.tsv */
        bleu_by_length_init(&ev->bleu);
        ev->outputs = xcalloc((size_t)n, sizeof(char *));
        ev->n_outputs = n;
    }
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
            if (ev->has_bleu) {
                dataset_decode_target(d, pred, pred_lens[i], text, SEQ2SEQ_TEXT_MAX);
                bleu_by_length_add(&ev->bleu, bible_words(e->src_text), text, e->tgt_text);
                ev->outputs[start + i] = xmalloc(strlen(text) + 1);
                strcpy(ev->outputs[start + i], text);
            }
        }
    }
    free(text);
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

/* ------------------------------------------------------- printing, plots */

/* The task's config lines; string lengths only for reverse, the one task
 * that has them (results.json repeats these lines). */
static int task_lines(char *config, int cap, const TaskConfig *tc, const Dataset *d) {
    char lengths[64] = "";
    if (strcmp(tc->task, "reverse") == 0 || strcmp(tc->task, "translate") == 0)
        snprintf(lengths, sizeof lengths, "min_len=%d\nmax_len=%d\n", tc->min_len, tc->max_len);
    int n = snprintf(config, (size_t)cap,
                     "task=%s\ndata_seed=%llu\nn_train=%d\nn_valid=%d\nn_test=%d\n%s"
                     "src_vocab_size=%d\ntgt_vocab_size=%d\n",
                     tc->task, (unsigned long long)tc->seed, tc->n_train, tc->n_valid, tc->n_test, lengths,
                     d->src_vocab.size, d->tgt_vocab.size);
    if (n >= cap) return fail("configuration text too long");
    if (d->src_bpe == NULL) return 0;
    /* translate: the two BPE vocabularies, and what they were learned from (task_translate.c) */
    char *src = bpe_to_text(d->src_bpe, "src_"), *tgt = bpe_to_text(d->tgt_bpe, "tgt_");
    n = config_append(config, cap, "train_crc=%08x\n%s%s", d->train_crc, src, tgt);
    free(src);
    free(tgt);
    return n < 0 ? -1 : 0;
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

static void print_results_table(const char *chapter, const Dataset *d, const Seq2SeqScores *ev,
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
    if (ev->has_bleu) printf("  %-22s %6.2f\n", "BLEU", bleu_score(&ev->bleu.all));
    if (train_seconds > 0) printf("  %-22s %6.1f s\n", "training time", train_seconds);
    printf("  %-22s %6.1f s\n", "evaluation time", ev->seconds);
    if (ev->has_bleu) {   /* translate: the score that shows the bottleneck, by the source's length */
        printf("\nBLEU by English words in the source:\n  %-8s %8s %8s\n", "words", "verses", "BLEU");
        for (int k = 0; k < BLEU_BUCKETS; k++)
            if (ev->bleu.bucket[k].n > 0)
                printf("  %-8s %8ld %8.2f\n", bleu_bucket_name(k), ev->bleu.bucket[k].n,
                       bleu_score(&ev->bleu.bucket[k]));
        return;
    }
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
    char got[SEQ2SEQ_TEXT_MAX], want[SEQ2SEQ_TEXT_MAX];
    printf("\nSample predictions (test split):\n");
    for (int i = 0; i < n_samples; i++) {
        const Example *e = &s->ex[idx[i]];
        const int *pred = preds + (size_t)i * max_out;
        dataset_decode_target(d, pred, pred_lens[i], got, sizeof got);
        if (e->tgt_text) {   /* translate: a sentence each, scored with sentence BLEU */
            printf("  %s\n    model:     %s\n    reference: %s   (sentence BLEU %.1f)\n", e->src_text, got,
                   e->tgt_text, bleu_sentence(got, e->tgt_text));
            continue;
        }
        dataset_decode_target(d, e->tgt, e->tgt_len, want, sizeof want);
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

#define LABEL_MAX 48

/* translate: which word each BPE piece of ids[0..n) belongs to (group[i]),
 * and each word's text in labels[] (room for n). A word ends at a piece
 * that ends one (bpe.h's </w>), or at the end. Returns the number of words. */
static int word_groups(const Bpe *b, const int *ids, int n, int *group, char (*labels)[LABEL_MAX]) {
    int w = 0;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const int known = ids[i] >= 0 && ids[i] < b->V;
        const char *piece = ids[i] == BPE_UNK ? "<unk>" : (known ? b->text[ids[i]] : "?");
        if (used == 0) labels[w][0] = '\0';
        snprintf(labels[w] + used, LABEL_MAX - used, "%s", piece);
        used = strlen(labels[w]);
        group[i] = w;
        if (i == n - 1 || (known && b->ends[ids[i]])) used = 0, w++;
    }
    return w;
}

/* Draw the attention map of one decoded input as a labelled heatmap, titled
 * with the input (and, for a model of several heads, what the one map is).
 * translate: words on both axes, the BPE pieces merged (a source word's
 * pieces' weights summed, an output word's rows averaged), so the map reads
 * as an alignment of words. */
static int plot_attention(Seq2Seq *m, const Dataset *d, const int *src, int src_len,
                          const char *stem, const char *input) {
    int max_out = d->max_tgt_len + 10;
    int *pred = xmalloc(sizeof(int) * (size_t)max_out);
    float *attn = xcalloc((size_t)max_out * src_len, sizeof(float));
    int src_lens[1] = {src_len}, zero[1] = {0}, n = 0;
    Batch one = {.batch = 1, .src_len = src_len, .tgt_len = 1, .src = (int *)src, .src_lens = src_lens,
                 .tgt_in = zero, .tgt_out = zero, .tgt_lens = zero};
    decode_greedy(m, &one, max_out, pred, &n, attn);
    int rows = n < max_out ? n + 1 : n; /* the <eos> step too */
    char (*xl)[LABEL_MAX] = xcalloc((size_t)src_len, LABEL_MAX);
    char (*yl)[LABEL_MAX] = xcalloc((size_t)rows, LABEL_MAX);
    int *row_group = xmalloc(sizeof(int) * (size_t)rows), *col_group = xmalloc(sizeof(int) * (size_t)src_len);
    int n_rows = rows, n_cols = src_len;
    if (d->src_bpe) {
        n_cols = word_groups(d->src_bpe, src, src_len, col_group, xl);
        n_rows = word_groups(d->tgt_bpe, pred, n, row_group, yl);
        if (rows > n) {   /* the <eos> step: a row of its own */
            row_group[n] = n_rows;
            snprintf(yl[n_rows++], LABEL_MAX, "<eos>");
        }
    } else {
        for (int i = 0; i < src_len; i++) {
            snprintf(xl[i], LABEL_MAX, "%s", vocab_token(&d->src_vocab, src[i]));
            col_group[i] = i;
        }
        for (int t = 0; t < rows; t++) {
            snprintf(yl[t], LABEL_MAX, "%s", t < n ? vocab_token(&d->tgt_vocab, pred[t]) : "<eos>");
            row_group[t] = t;
        }
    }
    /* the map over the groups: columns summed, rows averaged (for tokens, the map itself) */
    float *map = xcalloc((size_t)n_rows * n_cols, sizeof(float));
    int *row_count = xcalloc((size_t)n_rows, sizeof(int));
    for (int t = 0; t < rows; t++) row_count[row_group[t]]++;
    for (int t = 0; t < rows; t++)
        for (int i = 0; i < src_len; i++)
            map[(size_t)row_group[t] * n_cols + col_group[i]] += attn[(size_t)t * src_len + i] / (float)row_count[row_group[t]];
    const char **x_labels = xcalloc((size_t)n_cols, sizeof(char *));
    const char **y_labels = xcalloc((size_t)n_rows, sizeof(char *));
    for (int i = 0; i < n_cols; i++) x_labels[i] = xl[i];
    for (int t = 0; t < n_rows; t++) y_labels[t] = yl[t];
    char title[1400];
    const char *base = strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem;
    if (m->attention_name[0] != '\0')
        snprintf(title, sizeof title, "%.1000s -- %.96s%s%.200s%s", input, m->attention_name,
                 m->plot_layers ? " (each layer and head: " : "", m->plot_layers ? base : "",
                 m->plot_layers ? "_cross.png)" : "");
    else
        snprintf(title, sizeof title, "%.1000s", input);
    const char *x_title = d->src_bpe ? "source (English words)" : "source";
    const char *y_title = d->src_bpe ? "output (Spanish words)" : "output";
    int rc = plot_heatmap(stem, title, map, n_rows, n_cols, x_labels, y_labels,
                          x_title, y_title, "attention weight a_{t,i}", 0.0f, 1.0f);
    if (rc == 0 && m->plot_layers) rc = m->plot_layers(m->self, d, src, src_len, pred, n, stem);
    free(pred); free(attn); free(xl); free(yl); free(x_labels); free(y_labels);
    free(row_group); free(col_group); free(map); free(row_count);
    return rc;
}


/* ------------------------------------------------------------ the calls */

void seq2seq_init(Seq2SeqRun *run, const Seq2SeqProgram *program) {
    setvbuf(stdout, NULL, _IOLBF, 0);   /* progress lines appear as they happen, even in a log */
    memset(run, 0, sizeof *run);
    run->program = program;
    run->flags = (Seq2SeqFlags){.shared = {.train = TRAIN_DEFAULTS, .batch = 64, .seed = 42, .preset = "none"},
                                .task = "dates", .beam = 1, .samples = 8};
    run->config = xcalloc(CKPT_CONFIG_MAX, 1);
    run->log.last_loss = NAN;   /* no training: no final training loss */
    results_init(&run->results);
}

int seq2seq_parse_flags(Seq2SeqRun *run, int argc, char **argv, const ArgSpec *own, int n_own) {
    const Seq2SeqProgram *pg = run->program;
    Seq2SeqFlags *f = &run->flags;
    ArgSpec seq2seq[] = {
        {"task", ARG_STRING, &f->task, "the task to learn (see the chapter's README)", 0, 0, "dates,reverse,g2p,translate",
         ARG_DATA, ARG_TRAINING_ONLY},
        {"n-train", ARG_INT, &f->n_train, "training examples of a generated task (0 = its default)", 0, 10000000, NULL,
         ARG_DATA, ARG_TRAINING_ONLY},
        {"min-len", ARG_INT, &f->min_len, "reverse: shortest string; translate: fewest words (0 = task's)", 0, 100,
         NULL, ARG_DATA, ARG_ACTS_WITH_LOAD},
        {"max-len", ARG_INT, &f->max_len, "reverse: longest string; translate: most words (0 = task's)", 0, 100, NULL,
         ARG_DATA, ARG_ACTS_WITH_LOAD},
        {"max-eval", ARG_INT, &f->max_eval, "evaluate on at most this many test examples (0 = all)", 0, 2147483647,
         NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"beam", ARG_INT, &f->beam, "beam width for decoding (1 = greedy)", 1, 64, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},
        {"samples", ARG_INT, &f->samples, "sample predictions to print", 0, 1000, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},
        {"translate", ARG_STRING, &f->translate, "with --load: decode this text and print the output", 0, 0, NULL,
         ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"plot", ARG_BOOL, &f->plot, "with --translate: draw the attention heatmap for the input", 0, 0, NULL,
         ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
    };
    const int n_seq2seq = (int)(sizeof seq2seq / sizeof seq2seq[0]);
    /* a flag this program has no use for is not listed and is refused with why */
    for (int i = 0; i < n_seq2seq; i++) {
        ArgSpec *s = &seq2seq[i];
        /* an image chapter's own flags choose its data, and it has no text to translate */
        static const char *const token_only[] = {"task", "n-train", "min-len", "max-len", "translate", "plot"};
        for (size_t k = 0; pg->image_sources && k < sizeof token_only / sizeof token_only[0]; k++)
            if (strcmp(s->name, token_only[k]) == 0)
                *s = args_refused(s->name, "this chapter's inputs are images, chosen by its own flags (see --help)");
        if (strcmp(s->name, "plot") == 0 && pg->no_attention)
            *s = args_refused(s->name, "this chapter's model has no attention weights to draw");
    }
    /* The chapter's own flags first, then the seq2seq ones, then those of every program. */
    const int n_specs = n_own + n_seq2seq + TRAIN_FLAG_SPECS;
    ArgSpec *specs = xcalloc((size_t)n_specs, sizeof(ArgSpec));
    if (n_own) memcpy(specs, own, sizeof(ArgSpec) * (size_t)n_own);
    memcpy(specs + n_own, seq2seq, sizeof seq2seq);
    const char *presets = NULL;   /* --preset's choices (NULL: it is refused) */
    if (pg->preset_long) presets = pg->preset_translate ? "none,long,long-translate" : "none,long";
    train_flag_specs(&f->shared, presets, specs + n_own + n_seq2seq);

    int rc = args_parse(argc, argv, specs, n_specs);
    const char *preset = NULL;   /* the flags the chosen preset stands for */
    if (rc == 0 && strcmp(f->shared.preset, "long") == 0) preset = pg->preset_long;
    if (rc == 0 && strcmp(f->shared.preset, "long-translate") == 0) preset = pg->preset_translate;
    if (rc == 0 && preset) {
        const char *name = f->shared.preset;   /* (the preset's own flags may not name another) */
        rc = args_parse_with_preset(argc, argv, preset, specs, n_specs, &run->preset_argv);
        if (rc == 0) printf("--preset %s = %s\n", name, preset);
    }
    if (rc == 1) args_print_help(argv[0], pg->summary, specs, n_specs, pg->examples);
    /* with --load, only the flags marked to act with it (the checkpoint decides the rest) */
    if (rc == 0 && f->shared.load) rc = args_refuse_with_load(argc, argv, specs, n_specs);
    free(specs);
    if (rc != 0) return rc;
    if (f->translate && !f->shared.load) return fail("--translate needs --load CHECKPOINT (a model to translate with)");
    if (f->plot && !f->translate) return fail("--plot goes with --load CKPT --translate TEXT");
    if (train_flags_apply(&f->shared) < 0) return -1;

    /* training writes to --out (default out/<chapter>); evaluating a saved
     * model never over a training run's files (results.h) */
    char default_out[256];
    snprintf(default_out, sizeof default_out, "out/%s", pg->chapter);
    if (f->shared.load) return results_eval_dir(run->out_dir, (int)sizeof run->out_dir, f->shared.out, default_out,
                                                f->shared.load);
    /* a path too long or a directory that cannot be written: said now, not
     * after the training whose model would be lost (util.h) */
    const char *out = f->shared.out ? f->shared.out : default_out;
    if (out_dir_prepare("--out", out) < 0) return -1;
    return path_format(run->out_dir, sizeof run->out_dir, "%s", out);
}

int seq2seq_saved_config(Seq2SeqRun *run) {
    const char *path = run->flags.shared.load;
    char *saved = NULL;
    if (checkpoint_read_config(path, &saved) < 0) return -1;
    snprintf(run->config, CKPT_CONFIG_MAX, "%s", saved);
    free(saved);
    return checkpoint_check_model(path, run->config, run->program->model_name, run->program->chapter);
}

int seq2seq_check_vocab_sizes(const Seq2SeqRun *run) {
    return check_vocab_sizes(run->config, &run->data,
                             run->flags.shared.load ? run->flags.shared.load : "the configuration");
}

int seq2seq_load_data(Seq2SeqRun *run) {
    const Seq2SeqFlags *f = &run->flags;
    TaskConfig tc;
    char task_name[32];
    if (f->shared.load) {
        if (seq2seq_saved_config(run) < 0) return -1;
        if (task_from_config(&tc, run->config, task_name, sizeof task_name) < 0)
            return fail("%s: %s", f->shared.load, last_error());
        /* --min-len/--max-len with --load: the same task on other lengths
         * (length generalisation: train on 5-40, test on 41-80) */
        if ((f->min_len || f->max_len) && strcmp(task_name, "reverse") != 0)
            return fail("--min-len/--max-len with --load: only the reverse task has lengths to change, and %s "
                        "holds a model of the %s task", f->shared.load, task_name);
        if (f->min_len || f->max_len) {
            const int trained_min = tc.min_len, trained_max = tc.max_len;
            if (f->min_len) tc.min_len = f->min_len;
            if (f->max_len) tc.max_len = f->max_len;
            if (tc.min_len > tc.max_len)
                return fail("--min-len %d is larger than --max-len %d", tc.min_len, tc.max_len);
            printf("strings of %d-%d letters (the model trained on %d-%d)\n", tc.min_len, tc.max_len, trained_min,
                   trained_max);
        }
        if (dataset_load(&run->data, &tc) < 0) return -1;
        return seq2seq_check_vocab_sizes(run);
    }
    if (task_defaults(&tc, f->task) < 0) return -1;
    if (f->n_train) tc.n_train = f->n_train;
    if (f->min_len) tc.min_len = f->min_len;
    if (f->max_len) tc.max_len = f->max_len;
    if (tc.min_len > tc.max_len) return fail("--min-len %d is larger than --max-len %d", tc.min_len, tc.max_len);
    if (dataset_load(&run->data, &tc) < 0) return -1;
    return task_lines(run->config, CKPT_CONFIG_MAX, &tc, &run->data);
}

int seq2seq_model_config(Seq2SeqRun *run, const ConfigField *fields, int n_fields, void *cfg) {
    if (!run->flags.shared.load)
        return config_append(run->config, CKPT_CONFIG_MAX, "model=%s\n", run->program->model_name) < 0
                   ? -1 : config_write(run->config, CKPT_CONFIG_MAX, fields, n_fields, cfg);
    if (config_read(run->config, fields, n_fields, cfg) < 0) return fail("%s: %s", run->flags.shared.load,
                                                                         last_error());
    return 0;
}

int seq2seq_max_batch(const Seq2SeqRun *run) {
    const int B = run->flags.shared.batch, W = run->flags.beam;   /* beam search steps W rows */
    return B > W ? B : W;
}

/* translate: the pieces BPE cut the typed text into, and what it did with
 * words and characters the training verses never had. */
static void print_pieces(const Dataset *d, const char *text, const int *ids, int len) {
    char piece[BPE_MAX_WORD + 8];
    int n_unk = 0, n_words = bible_words(text), n_pieces_word = 0;
    printf("BPE pieces (%d for %d words):", len, n_words);
    for (int i = 0; i < len; i++) {
        printf(" %s", bpe_piece(d->src_bpe, ids[i], piece, sizeof piece));
        n_unk += ids[i] == BPE_UNK;
    }
    for (int i = 0, start = 1; i < len; i++) {   /* words that are not one piece */
        const int ends = ids[i] != BPE_UNK && d->src_bpe->ends[ids[i]];
        if (start && !ends) n_pieces_word++;
        start = ends;
    }
    printf("\n");
    if (n_pieces_word)
        printf("  %d word%s not in the vocabulary as a whole: BPE spells %s with smaller pieces\n", n_pieces_word,
               n_pieces_word == 1 ? " is" : "s are", n_pieces_word == 1 ? "it" : "them");
    if (n_unk)
        printf("  %d character%s the training verses never had became <unk>\n", n_unk, n_unk == 1 ? "" : "s");
}

/* --translate: decode what the user typed (and with --plot draw where it looked). */
static int translate(Seq2SeqRun *run) {
    const Seq2SeqFlags *f = &run->flags;
    Seq2Seq *m = &run->model;
    const Dataset *d = &run->data;
    /* sized by the data: the longest source the model reads, the longest
     * output the decoder may write (a dictionary entry can be long) */
    int len = 0, max_out = d->max_tgt_len + 10;
    int *ids = xmalloc(sizeof(int) * (size_t)(d->max_src_len > 0 ? d->max_src_len : 1));
    int *out_ids = xmalloc(sizeof(int) * (size_t)max_out);
    int rc = dataset_encode_source(d, f->translate, ids, d->max_src_len, &len);
    if (rc == 0 && d->src_bpe) print_pieces(d, f->translate, ids, len);
    if (rc == 0) {
        int n = decode_beam(m, ids, len, max_out, f->beam, out_ids);
        char *text = xmalloc(SEQ2SEQ_TEXT_MAX);
        dataset_decode_target(d, out_ids, n, text, SEQ2SEQ_TEXT_MAX);
        printf("%s -> %s\n", f->translate, text);
        free(text);
    }
    if (rc == 0 && f->plot) {
        char stem[1024];
        if (!m->has_attention) rc = fail("--plot: this chapter's model has no attention weights to draw");
        if (rc == 0) rc = path_format(stem, sizeof stem, "%s/translate_attention", run->out_dir);
        if (rc == 0) rc = make_dirs(run->out_dir);
        if (rc == 0) rc = plot_attention(m, d, ids, len, stem, f->translate);
        if (rc == 0) printf("attention map: %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    }
    free(ids);
    free(out_ids);
    return rc;
}

int seq2seq_use_saved(Seq2SeqRun *run) {
    if (!run->flags.shared.load) return 0;
    if (checkpoint_load_with_state(run->flags.shared.load, run->model.params, run->model.buffers,
                                   run->model.n_buffers) < 0)
        return -1;
    if (!run->flags.translate) return 0;
    return translate(run) < 0 ? -1 : 1;
}

/* Before training or evaluating: the output directory, and one line naming the run. */
static int start_run(const Seq2SeqRun *run) {
    const Seq2Seq *m = &run->model;
    const Dataset *d = &run->data;
    if (make_dirs(run->out_dir) < 0) return -1;
    if (!run->flags.shared.load) results_note_other_run(run->out_dir, run->config);   /* another model's files there? */
    printf("%s: task %s, %d train / %d valid / %d test examples, %zu parameters, backend %s%s, %d thread%s\n",
           run->program->chapter, d->task, d->train.n, d->valid.n, d->test.n, m->params->size,
           backend_name(backend_current()), matmul_precision_current() == PRECISION_BF16 ? ", bf16 products" : "",
           threads_current(), threads_current() == 1 ? "" : "s");
    return 0;
}

int seq2seq_train(Seq2SeqRun *run) {
    const Seq2SeqFlags *f = &run->flags;
    const Dataset *d = &run->data;
    if (start_run(run) < 0) return -1;
    if (f->shared.load) return 0;
    /* a stopped run's weights so far are not replaced without --force (io/checkpoint.h) */
    if (checkpoint_check_stopped_run(run->out_dir, f->shared.force, f->shared.resume) < 0) return -1;
    char checkpoint[1024], so_far[1100];   /* --out/model.ckpt, and --resume's model_so_far.ckpt beside it */
    if (path_format(checkpoint, sizeof checkpoint, "%s/model.ckpt", run->out_dir) < 0 ||
        checkpoint_so_far_path(so_far, sizeof so_far, checkpoint) < 0)
        return -1;
    Seq2SeqTraining tr = {.model = &run->model, .data = d, .batch_size = f->shared.batch};
    batch_alloc(&tr.batch, f->shared.batch, d->max_src_len, d->max_tgt_len);
    if (d->value_size) batch_alloc_values(&tr.batch, f->shared.batch, d->value_size);
    tr.order = xmalloc(sizeof(int) * (size_t)d->train.n);
    for (int i = 0; i < d->train.n; i++) tr.order[i] = i;
    rng_seed(&tr.rng, (uint64_t)f->shared.seed, 7);
    rng_shuffle(&tr.rng, tr.order, d->train.n);
    /* what a resume puts back besides the weights: the examples' order, where the next batch starts, the
     * shuffling stream, and the model's own stream (dropout) */
    Trainer trainer = {.self = &tr, .params = run->model.params, .gradient = seq2seq_gradient,
                       .validate = seq2seq_validate, .checkpoint = checkpoint, .config = run->config,
                       .batch = f->shared.batch, .resume = f->shared.resume ? so_far : NULL,
                       .state = {{"batches.order", STATE_INT, tr.order, (size_t)d->train.n},
                                 {"batches.cursor", STATE_INT, &tr.cursor, 1},
                                 {"batches.rng", STATE_U64, &tr.rng, 2}},
                       .n_state = 3};
    if (run->model.rng) trainer.state[trainer.n_state++] = (StateItem){"model.rng", STATE_U64, run->model.rng, 2};
    for (int k = 0; k < run->model.n_buffers && trainer.n_state < TRAIN_STATE_MAX; k++)
        trainer.state[trainer.n_state++] = run->model.buffers[k];   /* batch norm's running statistics */
    const int rc = train_loop(&trainer, &f->shared.train, &run->log);
    batch_free(&tr.batch);
    free(tr.order);
    if (rc < 0) return -1;
    const double seconds = run->log.seconds;
    printf("trained %d steps in %.1f s (%.0f examples/s)\n", f->shared.train.steps, seconds,
           (double)run->log.count / (seconds > 0 ? seconds : 1));
    return 0;
}

int seq2seq_evaluate(Seq2SeqRun *run) {
    const Seq2SeqFlags *f = &run->flags;
    const Dataset *d = &run->data;
    Seq2SeqScores *ev = &run->scores;
    if (f->shared.load && start_run(run) < 0) return -1;   /* (training printed it) */
    evaluate(&run->model, d, &d->test, f->max_eval > 0 ? f->max_eval : d->test.n, f->beam, f->shared.batch, ev);
    print_results_table(run->program->chapter, d, ev, f->beam, run->log.seconds);
    print_samples(&run->model, d, &d->test, f->samples, f->beam, f->shared.batch);

    Results *res = &run->results;
    results_set_str(res, "chapter", run->program->chapter);
    results_set_config(res, run->config);
    results_set_num(res, "steps", f->shared.load ? 0 : f->shared.train.steps);
    results_set_num(res, "batch", f->shared.batch);
    results_set_num(res, "lr", f->shared.train.lr);
    results_set_num(res, "seed", f->shared.seed);
    results_set_num(res, "parameters", (double)run->model.params->size);
    results_set_str(res, "backend", backend_name(backend_current()));
    results_set_str(res, "matmul_precision", matmul_precision_name(matmul_precision_current()));
    results_set_num(res, "threads", threads_current());
    results_set_num(res, "beam", f->beam);
    results_set_num(res, "test_n", (double)ev->all.n);
    results_set_num(res, "test_exact_match", scores_exact(&ev->all));
    results_set_num(res, "test_token_acc", scores_token_acc(&ev->all));
    if (strcmp(d->task, "g2p") == 0) {
        results_set_num(res, "test_wer", scores_wer(&ev->all));
        results_set_num(res, "test_per", scores_per(&ev->all));
    }
    if (ev->has_bleu) {   /* translate: "test_bleu", and "test_bleu_1_10" ... "test_bleu_41_up" with their counts */
        results_set_num(res, "test_bleu", bleu_score(&ev->bleu.all));
        for (int k = 0; k < BLEU_BUCKETS; k++) {
            char key[48], name[16];
            snprintf(name, sizeof name, "%s", bleu_bucket_name(k));
            for (char *c = name; *c; c++) *c = *c == '-' ? '_' : *c;
            if (name[strlen(name) - 1] == '+') strcpy(name + strlen(name) - 1, "_up");
            snprintf(key, sizeof key, "test_bleu_%s", name);
            results_set_num(res, key, bleu_score(&ev->bleu.bucket[k]));
            snprintf(key, sizeof key, "test_n_%s", name);
            results_set_num(res, key, (double)ev->bleu.bucket[k].n);
        }
    }
    results_set_num(res, "train_seconds", run->log.seconds);
    results_set_num(res, "eval_seconds", ev->seconds);
    results_set_num(res, "final_train_loss", run->log.last_loss);
    for (int k = 0; k < ev->n_buckets; k++) {
        if (ev->by_len[k].n == 0) continue;
        char key[48];
        snprintf(key, sizeof key, "test_exact_len_%d_%d", ev->bucket_lo[k], ev->bucket_hi[k]);
        results_set_num(res, key, scores_exact(&ev->by_len[k]));
    }
    return 0;
}

/* acc_by_len.png: test exact match by source length. */
static int plot_exact_by_length(const Seq2SeqRun *run, char *path, size_t cap) {
    const Dataset *d = &run->data;
    const Seq2SeqScores *ev = &run->scores;
    float xs[SEQ2SEQ_LEN_BUCKETS], acc[SEQ2SEQ_LEN_BUCKETS];
    int k_used = 0;
    for (int k = 0; k < ev->n_buckets; k++) {
        if (ev->by_len[k].n == 0) continue;
        xs[k_used] = 0.5f * (float)(ev->bucket_lo[k] + ev->bucket_hi[k]);
        acc[k_used] = (float)(100.0 * scores_exact(&ev->by_len[k]));
        k_used++;
    }
    const float *ys[1] = {acc};
    const char *names[1] = {"exact match (%)"};
    if (path_format(path, cap, "%s/acc_by_len", run->out_dir) < 0) return -1;
    /* accuracy axes run 0-100%: auto-scaling makes one miss in 288 look like a cliff */
    const char *len_name = d->src_len_name ? d->src_len_name : "input length";
    char title[128];
    snprintf(title, sizeof title, "Test exact match by %s", len_name);
    if (plot_lines_range(path, title, len_name, "exact match (%)", xs, ys, names, 1, k_used, 0, 0.0f, 100.0f) < 0)
        return -1;
    printf("  %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    return 0;
}

/* translate: bleu_by_len.png, corpus BLEU in each bucket of English words
 * (drawn at the bucket's middle; 41+ at 46). */
static int plot_bleu_by_length(const Seq2SeqRun *run, char *path, size_t cap) {
    const Seq2SeqScores *ev = &run->scores;
    float xs[BLEU_BUCKETS], ys0[BLEU_BUCKETS];
    int k_used = 0;
    for (int k = 0; k < BLEU_BUCKETS; k++) {
        if (ev->bleu.bucket[k].n == 0) continue;
        xs[k_used] = 5.5f + 10.0f * (float)k;
        ys0[k_used++] = (float)bleu_score(&ev->bleu.bucket[k]);
    }
    const float *ys[1] = {ys0};
    const char *names[1] = {"BLEU"};
    if (path_format(path, cap, "%s/bleu_by_len", run->out_dir) < 0) return -1;
    if (plot_lines(path, "Test BLEU by source length", "English words in the source (1-10, 11-20, ..., 41+)",
                   "BLEU", xs, ys, names, 1, k_used, 0) < 0)
        return -1;
    printf("  %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    return 0;
}

/* translate: translations.tsv, every decoded test verse: the reference,
 * the source, the model's output and its sentence BLEU (bleu.h), so the
 * mistakes can be read and the run re-scored. */
static int write_translations(const Seq2SeqRun *run, char *path, size_t cap) {
    const Split *s = &run->data.test;
    const Seq2SeqScores *ev = &run->scores;
    if (path_format(path, cap, "%s/translations.tsv", run->out_dir) < 0) return -1;
    FILE *f = fopen(path, "w");
    if (f == NULL) return fail("cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "reference\tsource\toutput\tsentence_bleu\n");
    for (int i = 0; i < ev->n_outputs; i++)
        fprintf(f, "%s\t%s\t%s\t%.2f\n", s->ex[i].tgt_text, s->ex[i].src_text, ev->outputs[i],
                bleu_sentence(ev->outputs[i], s->ex[i].tgt_text));
    if (fclose(f) != 0) return fail("cannot write '%s': %s", path, strerror(errno));
    printf("  %s\n", path);
    return 0;
}

int seq2seq_write_outputs(Seq2SeqRun *run) {
    const Dataset *d = &run->data;
    const Seq2SeqScores *ev = &run->scores;
    const TrainLog *log = &run->log;
    const char *out_dir = run->out_dir;
    const char *ext = gnuplot_available() ? "png" : "gp";
    char path[1024];
    printf("\nWrote:\n");
    if (!run->flags.shared.load) {
        if (path_format(path, sizeof path, "%s/model.ckpt", out_dir) < 0) return -1;
        if (checkpoint_save_with_state(path, run->config, run->model.params, run->model.buffers,
                                       run->model.n_buffers) < 0)
            return -1;
        checkpoint_remove_so_far(path);   /* training's weights so far: replaced by these */
        if (d->value_size) printf("  %s   (try: --load %s --image FILE.pgm)\n", path, path);
        else printf("  %s   (try: --load %s --translate \"...\")\n", path, path);
    }
    if (log->n > 0) {
        const float *ys[2] = {log->train, log->valid};
        const char *names[2] = {"train loss", "validation loss"};
        if (path_format(path, sizeof path, "%s/loss", out_dir) < 0) return -1;
        if (plot_lines(path, "Cross-entropy per token", "step", "loss", log->step, ys, names, 2, log->n, 1) < 0)
            return -1;
        printf("  %s.%s\n", path, ext);
    }
    if (ev->has_bleu) {
        if (write_translations(run, path, sizeof path) < 0 || plot_bleu_by_length(run, path, sizeof path) < 0)
            return -1;
    } else if (plot_exact_by_length(run, path, sizeof path) < 0) {
        return -1;
    }
    if (run->model.has_attention && !d->value_size) {   /* image tasks draw their own */
        for (int i = 0; i < 3 && i < d->test.n; i++) {
            const Example *e = &d->test.ex[i * (d->test.n / 3)];
            if (path_format(path, sizeof path, "%s/attention_%d", out_dir, i) < 0) return -1;
            if (plot_attention(&run->model, d, e->src, e->src_len, path, e->src_text) < 0) return -1;
            printf("  %s.%s\n", path, ext);
        }
    }
    if (path_format(path, sizeof path, "%s/results.json", out_dir) < 0) return -1;
    if (results_write(&run->results, path) < 0) return -1;
    printf("  %s\n", path);
    return 0;
}

int seq2seq_finish(Seq2SeqRun *run, int rc) {
    if (rc < 0) fprintf(stderr, "%s: error: %s\n", run->program->chapter, last_error());
    if (run->model.destroy) run->model.destroy(run->model.self);
    dataset_free(&run->data);
    free(run->config);
    for (int i = 0; i < run->scores.n_outputs; i++) free(run->scores.outputs[i]);
    free(run->scores.outputs);
    train_log_free(&run->log);
    free(run->preset_argv);
    return output_exit_status(run->program->chapter, rc < 0 ? 1 : 0);
}
