/* main_gpt.c - chapter 06, part 2: a GPT trained on the Brown corpus, beside
 * the counting baselines of Bengio et al. 2003, with sampling and a KV cache.
 *
 *   ./build/06_gpt                                  characters, the quick default (make run-06)
 *   ./build/06_gpt --preset long                    words: the long run of the README
 *   ./build/06_gpt --load out/06_gpt/model.ckpt --prompt "The jury said" --temperature 0.8 --top-k 40
 *   ./build/06_gpt --load out/06_gpt/model.ckpt --prompt "The jury said" --plot
 *   ./build/06_gpt --load out/06_gpt/model.ckpt     test perplexity of a saved model
 *
 * The model is gpt.c (chapter 06's blocks in one causal stack), trained with
 * the shared driver's step (classifier_train_step); the data and the split
 * are common/data/brown.c, the baselines common/data/ngram.c. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_transformer/gpt.h"
#include "06_transformer/transformer.h"
#include "data/brown.h"
#include "data/ngram.h"
#include "io/args.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "io/plot.h"
#include "io/results.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "train/classifier.h"
#include "train/progress.h"
#include "util/error.h"
#include "util/util.h"
#include "util/output.h"

#define PRESET_LONG "--tokens word --layers 4 --dim 192 --heads 4 --ff 768 --context 64 --batch 32 " \
                    "--steps 3000 --lr 1.5e-3 --warmup 200 --dropout 0.2 --attn-dropout 0.1 --weight-decay 0.1"
#define MAX_CURVE 200

typedef struct {
    const char *tokens, *data, *out, *load, *prompt, *norm, *norm_type, *mlp, *pos, *backend, *preset;
    const char *matmul_precision; /* "float" (NULL: the same) or "bf16" (kernels/matmul.h) */
    int layers, dim, heads, ff, context, steps, batch, warmup, seed, threads, eval_every, eval_tokens,
        eval_max_tokens, top_k, max_new, no_kv_cache, plot, quiet, eval_stride, final_valid_tokens;
    float lr, dropout, attn_dropout, weight_decay, temperature;
} Flags;

static int name_to_index(const char *value, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0) return i;
    return 0;   /* (args_parse has checked the choices) */
}

static int config_from_flags(const Flags *f, int V, GptConfig *c) {
    static const char *const places[] = {"post", "pre"}, *const norms[] = {"layernorm", "rmsnorm", "none"},
                             *const mlps[] = {"gelu", "relu", "swiglu", "none"};
    if (f->dim % f->heads != 0)
        return fail("--dim %d is not a multiple of --heads %d: each head gets dim / heads numbers", f->dim,
                    f->heads);
    memset(c, 0, sizeof *c);
    c->layers = f->layers;
    c->block = (BlockSpec){.D = f->dim, .H = f->heads, .D_H = f->dim / f->heads, .F = f->ff,
                           .norm_place = (BlockNormPlace)name_to_index(f->norm, places, 2),
                           .norm = (BlockNorm)name_to_index(f->norm_type, norms, 3),
                           .mlp = (BlockMlp)name_to_index(f->mlp, mlps, 4), .dropout = f->dropout,
                           .attn_dropout = f->attn_dropout,
                           .attention = MULTI_HEAD_PLAIN, .causal = 1, .cross = 0};
    if (pos_type_from_name(f->pos, &c->pos) < 0) return -1;
    c->kv_cache = 1;   /* part 1's key, in the text as always (generation takes --no-kv-cache) */
    c->context = f->context;
    c->V = V;
    return 0;
}

/* Perplexity (words) or bits per character, from a mean -ln p. */
static double metric(BrownTokens kind, double mean_nll) {
    return kind == BROWN_WORDS ? exp(mean_nll) : mean_nll / log(2.0);
}
static const char *metric_name(BrownTokens kind) {
    return kind == BROWN_WORDS ? "perplexity" : "bits per character";
}

/* The mean -ln p of part[first .. n) with context before first (stride N/2). */
static double part_nll(Gpt *g, const int *stream, int first, int n, int stride) {
    long counted = 0;
    double sum = gpt_stream_nll(g, stream, first, n, stride, &counted);
    return counted ? sum / counted : 0.0;
}

/* valid followed by test, one array: the test tokens are predicted with the
 * end of the validation part as their context, as in one stream */
static int *joined_stream(const BrownCorpus *c) {
    int *s = xmalloc(sizeof(int) * ((size_t)c->valid.n + c->test.n));
    memcpy(s, c->valid.ids, sizeof(int) * (size_t)c->valid.n);
    memcpy(s + c->valid.n, c->test.ids, sizeof(int) * (size_t)c->test.n);
    return s;
}

/* The counting baselines on the same split: unigram and Kneser-Ney trigram. */
static int baselines(const BrownCorpus *c, Results *res, double *kn_test) {
    Unigram u;
    KneserNey kn;
    if (unigram_train(&u, c->train.ids, c->train.n, c->V) < 0) return -1;
    if (kn_train(&kn, c->train.ids, c->train.n, c->V, 0.0) < 0) {
        unigram_free(&u);
        return -1;
    }
    const double u_test = unigram_perplexity(&u, c->test.ids, c->test.n);
    const double k_valid = kn_perplexity(&kn, c->valid.ids, c->valid.n);
    const double k_test = kn_perplexity(&kn, c->test.ids, c->test.n);
    const BrownTokens kind = c->kind;
    printf("baselines on the same split (%s on the test part):\n", metric_name(kind));
    printf("  unigram, add-one           %8.3f\n", metric(kind, log(u_test)));
    printf("  Kneser-Ney trigram         %8.3f   (validation %.3f)\n", metric(kind, log(k_test)),
           metric(kind, log(k_valid)));
    results_set_num(res, "unigram_test", metric(kind, log(u_test)));
    results_set_num(res, "kn_trigram_test", metric(kind, log(k_test)));
    results_set_num(res, "kn_trigram_valid", metric(kind, log(k_valid)));
    *kn_test = metric(kind, log(k_test));
    unigram_free(&u);
    kn_free(&kn);
    return 0;
}

/* B random windows of the training part: tokens [B, N] and the next tokens. */
static void train_batch(const BrownPart *p, int N, Examples *e, int B, Rng *rng) {
    e->B = B;
    for (int b = 0; b < B; b++) {
        const int a = (int)rng_below(rng, (uint32_t)(p->n - N - 1) + 1);
        memcpy(e->tokens + (size_t)b * N, p->ids + a, sizeof(int) * (size_t)N);
        memcpy(e->targets + (size_t)b * N, p->ids + a + 1, sizeof(int) * (size_t)N);
    }
}

static void print_samples(Gpt *g, const BrownCorpus *c, const Flags *f, int kv_cache, const char *const *prompts,
                          int n_prompts) {
    const int cap = 4096;
    int *ids = xmalloc(sizeof(int) * cap), *out = xmalloc(sizeof(int) * (size_t)(f->max_new > 0 ? f->max_new : 1));
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 11);   /* sampling has its own stream: the same seed, the same text */
    const GptSampling s = {f->temperature, f->top_k, kv_cache};
    for (int i = 0; i < n_prompts; i++) {
        int n = brown_encode(c, prompts[i], ids, cap);
        if (n <= 0) continue;
        if (gpt_generate(g, ids, n, f->max_new, &s, &rng, out, NULL) < 0) break;
        size_t len = 1;   /* the text's bytes: every token and a separator */
        for (int j = 0; j < f->max_new; j++) len += strlen(brown_token(c, out[j])) + 1;
        char *text = xmalloc(len);
        brown_decode(c, out, f->max_new, text, (int)len);
        printf("  [%s]%s%s\n", prompts[i], c->kind == BROWN_WORDS ? " " : "", text);
        free(text);
    }
    free(ids);
    free(out);
}

/* Causal self-attention of every layer and head over a prompt. */
static int plot_prompt(Gpt *g, const BrownCorpus *c, const int *ids, int n, const char *stem) {
    if (n > g->N) {
        printf("  (the prompt has %d tokens; the maps show its first %d, the model's window)\n", n, g->N);
        n = g->N;
    }
    int *tokens = xcalloc((size_t)g->N, sizeof(int));
    memcpy(tokens, ids, sizeof(int) * (size_t)n);
    /* one window of n positions: the first n rows of the maps of a full window are the same (causal) */
    gpt_forward(g, tokens, NULL, 1, 0);
    const int L = g->L, H = g->st.spec.H, N = g->N;
    float *maps = xcalloc((size_t)L * H * n * n, sizeof(float));
    for (int l = 0; l < L; l++) {
        const float *A = stack_attention(&g->st, l, 1, N, 0);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++)
                memcpy(maps + (((size_t)l * H + h) * n + i) * n, A + ((size_t)h * N + i) * N, sizeof(float) * (size_t)n);
    }
    char (*tok)[32] = xcalloc((size_t)n, 32);
    const char **labels = xcalloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) {
        const char *t = brown_token(c, ids[i]);
        snprintf(tok[i], 32, "%s", strcmp(t, " ") == 0 ? "_" : strcmp(t, "\n") == 0 ? "\\n" : t);
        labels[i] = tok[i];
    }
    int rc = transformer_plot_grid(stem, "Causal self-attention: each token (row) over the tokens up to it", maps, L,
                                   H, n, n, labels, labels, "key", "query");
    if (rc == 0) printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    free(tokens); free(maps); free(tok); free(labels);
    return rc;
}

static const char *const SAMPLE_PROMPTS[] = {"The jury said", "In the morning", "He was"};

/* ------------------------------------------------------------- training */

static int train(const Flags *f) {
    /* a path too long or a directory that cannot be written: said now, not
     * after the training whose model would be lost (util.h) */
    if (out_dir_prepare("--out", f->out) < 0) return -1;
    const BrownTokens kind = strcmp(f->tokens, "word") == 0 ? BROWN_WORDS : BROWN_CHARS;
    BrownCorpus c;
    if (brown_load(&c, f->data, kind) < 0) return -1;
    printf("Brown corpus (%s): %d files, %d words; split %d / %d / %d %s; |V| = %d (%d <unk> in the test part)\n",
           f->data ? f->data : BROWN_DEFAULT_PATH, c.n_files, c.n_words, c.train.n, c.valid.n, c.test.n,
           kind == BROWN_WORDS ? "words" : "characters", c.V, c.test.n_unk);
    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", "06_gpt");
    results_set_str(&res, "task", kind == BROWN_WORDS ? "brown_words" : "brown_chars");
    double kn_test = 0.0;
    if (baselines(&c, &res, &kn_test) < 0) goto fail_corpus;

    GptConfig cfg;
    if (config_from_flags(f, c.V, &cfg) < 0) goto fail_corpus;
    if (c.train.n < f->context + 2) {
        fail("the training part has %d tokens: too few for --context %d", c.train.n, f->context);
        goto fail_corpus;
    }
    Gpt *g = xmalloc(sizeof *g);
    if (gpt_create(g, &cfg, f->batch, (uint64_t)f->seed) < 0) {
        gpt_free(g);
        free(g);
        goto fail_corpus;
    }
    Classifier m;
    gpt_classifier(g, &m);
    char config[2048] = "";
    if (config_append(config, sizeof config, "model=gpt\n") < 0 ||
        config_write(config, sizeof config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg) < 0 ||
        config_append(config, sizeof config, "tokens=%s\n", f->tokens) < 0)
        goto fail_model;
    results_note_other_run(f->out, config);   /* another model's files there? say so once */
    const size_t n_params = g->params.size;
    printf("GPT: %d blocks, D = %d, %d heads, F = %d, context %d, %s-%s, %s, %s positions, dropout %g/%g: "
           "%zu parameters (%zu in the tied embedding)\n",
           f->layers, f->dim, f->heads, f->ff, f->context, f->norm, f->norm_type, f->mlp, f->pos,
           (double)f->dropout, (double)f->attn_dropout, n_params, (size_t)c.V * f->dim);

    /* training: the shared driver's step, a validation check every eval_every steps */
    Adam opt;
    if (adam_init(&opt, &g->params, f->lr, f->weight_decay) < 0) goto fail_model;
    Examples e;
    examples_alloc(&e, f->batch, f->context, f->context, 0);
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 1);
    int *stream = joined_stream(&c);
    const int eval_n = f->eval_tokens < c.valid.n ? f->eval_tokens : c.valid.n;
    float curve_x[MAX_CURVE], curve_train[MAX_CURVE], curve_val[MAX_CURVE];
    int n_curve = 0;
    const int every = f->eval_every > 0 ? f->eval_every : f->steps;
    Progress pr;
    progress_start(&pr, f->steps, every, "tokens", f->quiet);
    double t0 = now_seconds(), window = 0.0, last_loss = 0.0;
    int window_n = 0;
    for (int step = 0; step < f->steps; step++) {
        train_batch(&c.train, f->context, &e, f->batch, &rng);
        last_loss = classifier_train_step(&m, &opt, &e, 1.0f,
                                          lr_schedule(step, f->steps, f->warmup, f->lr, 0.1f));
        if (isnan(last_loss)) {   /* a non-finite loss or gradient: no update was made (train/finite.h) */
            progress_end(&pr);
            fail("training diverged at step %d: %s; no checkpoint written: try a lower --lr", step + 1,
                 last_error());
            goto fail_train;
        }
        window += last_loss;
        window_n++;
        char extra[64] = "";
        if ((step + 1) % every == 0 || step + 1 == f->steps) {
            /* the first eval_n validation tokens, windows moved by N (cheap; the final figures use N/2) */
            double val = part_nll(g, c.valid.ids, 1, eval_n, f->context);
            snprintf(extra, sizeof extra, "valid loss %.3f (%s %.3f)", val,
                     kind == BROWN_WORDS ? "perplexity" : "bits/char", metric(kind, val));
            if (n_curve < MAX_CURVE) {
                curve_x[n_curve] = (float)(step + 1);
                curve_train[n_curve] = (float)(window / window_n);
                curve_val[n_curve++] = (float)val;
            }
            window = 0.0;
            window_n = 0;
        }
        progress_update(&pr, step + 1, (float)last_loss, (long)(step + 1) * f->batch * f->context,
                        extra[0] ? extra : NULL);
        if (extra[0] && f->quiet) printf("step %d: %s\n", step + 1, extra);
    }
    progress_end(&pr);
    const double train_seconds = now_seconds() - t0;

    /* the final figures: the test part and the validation part (all of
     * them; or the first final_valid_tokens of the validation part; or the
     * first eval_max_tokens of both, for quick checks), windows moved by stride */
    const int stride = f->eval_stride;
    int valid_n = f->final_valid_tokens > 0 && f->final_valid_tokens < c.valid.n ? f->final_valid_tokens : c.valid.n;
    int test_n = c.test.n;
    if (f->eval_max_tokens > 0) {
        if (valid_n > f->eval_max_tokens) valid_n = f->eval_max_tokens;
        if (test_n > f->eval_max_tokens) test_n = f->eval_max_tokens;
    }
    double t1 = now_seconds();
    const double val_nll = part_nll(g, stream, 1, valid_n, stride);
    const double test_nll = part_nll(g, stream, c.valid.n, c.valid.n + test_n, stride);
    const double eval_seconds = now_seconds() - t1;
    printf("\n(windows of %d moved by %d: each token predicted from at least %d tokens before it)\n", f->context,
           stride, f->context - stride + 1);
    if (valid_n < c.valid.n || test_n < c.test.n)
        printf("(the figures below are over the first %d validation and %d test tokens, of %d and %d)\n", valid_n,
               test_n, c.valid.n, c.test.n);
    printf("%-28s %-10s %-10s\n", metric_name(kind), "validation", "test");
    printf("%-28s %-10.3f %-10.3f\n", "GPT (this run)", metric(kind, val_nll), metric(kind, test_nll));
    printf("%-28s %-10s %-10.3f\n", "Kneser-Ney trigram", "", kn_test);
    printf("trained %d steps in %.1f s (%.0f tokens/s); evaluated in %.1f s\n", f->steps, train_seconds,
           (double)f->steps * f->batch * f->context / train_seconds, eval_seconds);

    /* outputs: checkpoint, results.json, the loss curves, samples */
    char path[1200];
    if (make_dirs(f->out) < 0) goto fail_train;
    if (path_format(path, sizeof path, "%s/model.ckpt", f->out) < 0) goto fail_train;
    if (checkpoint_save(path, config, &g->params) < 0) goto fail_train;
    printf("checkpoint: %s\n", path);
    results_set_config(&res, config);
    results_set_num(&res, "steps", f->steps);
    results_set_num(&res, "tokens_seen", (double)f->steps * f->batch * f->context);
    results_set_num(&res, "batch", f->batch);
    results_set_num(&res, "lr", f->lr);
    results_set_num(&res, "parameters", (double)n_params);
    results_set_num(&res, "vocab_size", c.V);
    results_set_num(&res, kind == BROWN_WORDS ? "test_perplexity" : "test_bpc", metric(kind, test_nll));
    results_set_num(&res, kind == BROWN_WORDS ? "valid_perplexity" : "valid_bpc", metric(kind, val_nll));
    results_set_num(&res, "test_loss", test_nll);
    results_set_num(&res, "eval_stride", stride);
    results_set_num(&res, "valid_tokens", valid_n);
    results_set_num(&res, "valid_loss", val_nll);
    results_set_num(&res, "train_seconds", train_seconds);
    results_set_str(&res, "backend", backend_name(backend_current()));
    results_set_str(&res, "matmul_precision", matmul_precision_name(matmul_precision_current()));
    results_set_num(&res, "threads", threads_current());
    if (f->eval_max_tokens > 0) results_set_num(&res, "eval_max_tokens", f->eval_max_tokens);
    results_set_str(&res, "checkpoint", path);
    if (n_curve > 0) {
        const float *ys[2] = {curve_train, curve_val};
        const char *names[2] = {"training loss (mean since the last point)", "validation loss"};
        if (path_format(path, sizeof path, "%s/loss", f->out) < 0) goto fail_train;
        if (plot_lines(path, "GPT on the Brown corpus: cross-entropy per token (nats)", "step", "loss", curve_x, ys,
                       names, 2, n_curve, 0) < 0)
            goto fail_train;
        printf("loss curves: %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    }
    if (path_format(path, sizeof path, "%s/results.json", f->out) < 0) goto fail_train;
    if (results_write(&res, path) < 0) goto fail_train;
    printf("results: %s\n\nsamples (temperature %g, top-k %d, seed %d):\n", path, (double)f->temperature, f->top_k,
           f->seed);
    print_samples(g, &c, f, !f->no_kv_cache, SAMPLE_PROMPTS, 3);
    free(stream);
    examples_free(&e);
    adam_free(&opt);
    m.destroy(m.self);
    brown_free(&c);
    return 0;

fail_train:
    free(stream);
    examples_free(&e);
    adam_free(&opt);
fail_model:
    m.destroy(m.self);
fail_corpus:
    brown_free(&c);
    return -1;
}

/* ------------------------------------------------------- a saved model */

static int run_loaded(const Flags *f) {
    char *config = NULL;
    if (checkpoint_read_config(f->load, &config) < 0) return -1;
    if (checkpoint_check_model(f->load, config, "gpt", "06_gpt") < 0) {
        free(config);
        return -1;
    }
    char tokens[16];
    GptConfig cfg = {0};
    if (config_get(config, "tokens", tokens, sizeof tokens) < 0 ||
        config_read(config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg) < 0) {
        free(config);
        return -1;
    }
    if (strcmp(tokens, "word") != 0 && strcmp(tokens, "char") != 0) {
        char quoted[96];
        fail("%s: tokens=%s in its config: expected char or word", f->load,
             error_excerpt(tokens, quoted, sizeof quoted));
        free(config);
        return -1;
    }
    const BrownTokens kind = strcmp(tokens, "word") == 0 ? BROWN_WORDS : BROWN_CHARS;
    if (f->eval_stride > cfg.context) {
        fail("--eval-stride %d is longer than the model's context %d: windows would skip tokens", f->eval_stride,
             cfg.context);
        free(config);
        return -1;
    }
    BrownCorpus c;
    if (brown_load(&c, f->data, kind) < 0) {
        free(config);
        return -1;
    }
    int rc = -1;
    Gpt *g = xmalloc(sizeof *g);
    if (c.V != cfg.V) {
        fail("%s: the model has a vocabulary of %d tokens, but %s gives %d: not the corpus it was trained on",
             f->load, cfg.V, f->data ? f->data : BROWN_DEFAULT_PATH, c.V);
        memset(g, 0, sizeof *g);
        goto done;
    }
    if (gpt_create(g, &cfg, f->batch, 1) < 0 || checkpoint_load(f->load, &g->params) < 0) goto done;
    if (f->prompt) {
        int blank = 1;
        for (const char *ch = f->prompt; *ch; ch++) blank &= isspace((unsigned char)*ch) != 0;
        if (blank) {
            fail("--prompt is blank: give some text to continue");
            goto done;
        }
        int *ids = xmalloc(sizeof(int) * 4096);
        int n = brown_encode(&c, f->prompt, ids, 4096);
        if (n <= 0) {
            free(ids);
            goto done;
        }
        int n_unk = 0;
        for (int i = 0; i < n; i++) n_unk += ids[i] == BROWN_UNK;
        printf("prompt: %d tokens (%d of them <unk>: not in the vocabulary)\n", n, n_unk);
        const char *prompts[1] = {f->prompt};
        print_samples(g, &c, f, !f->no_kv_cache, prompts, 1);
        if (f->plot) {
            char dir[1100], stem[1200];
            if (results_eval_dir(dir, sizeof dir, f->out, "out/06_gpt", f->load) < 0 || make_dirs(dir) < 0) {
                free(ids);
                goto done;
            }
            if (path_format(stem, sizeof stem, "%s/prompt_attention", dir) < 0 ||
                plot_prompt(g, &c, ids, n, stem) < 0) {
                free(ids);
                goto done;
            }
        }
        free(ids);
        rc = 0;
        goto done;
    }
    /* no prompt: the test figures of the saved model, written apart from the training run's */
    {
        char dir[1100], path[1200];
        if (results_eval_dir(dir, sizeof dir, f->out, "out/06_gpt", f->load) < 0 || make_dirs(dir) < 0) goto done;
        int *stream = joined_stream(&c);
        /* as training measured it: windows moved by N/2 (words) or N (characters) */
        const int half = cfg.context / 2 > 0 ? cfg.context / 2 : 1;
        const int stride = f->eval_stride > 0 ? f->eval_stride : kind == BROWN_WORDS ? half : cfg.context;
        const double test_nll = part_nll(g, stream, c.valid.n, c.valid.n + c.test.n, stride);
        free(stream);
        printf("%s: test %s %.3f\n", f->load, metric_name(kind), metric(kind, test_nll));
        Results res;
        results_init(&res);
        results_set_str(&res, "chapter", "06_gpt");
        results_set_config(&res, config);
        results_set_str(&res, "checkpoint", f->load);
        results_set_num(&res, kind == BROWN_WORDS ? "test_perplexity" : "test_bpc", metric(kind, test_nll));
        if (path_format(path, sizeof path, "%s/results.json", dir) < 0 || results_write(&res, path) < 0) goto done;
        printf("results: %s\n", path);
        rc = 0;
    }
done:
    gpt_free(g);
    free(g);
    brown_free(&c);
    free(config);
    return rc;
}

/* The program; main() below adds the check that its output was written. */
static int run(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    Flags f = {.tokens = "char", .data = NULL, .out = NULL, .load = NULL, .prompt = NULL, .norm = "pre",
               .norm_type = "layernorm", .mlp = "gelu", .pos = "learned", .backend = NULL, .preset = "none",
               .layers = 4, .dim = 128, .heads = 4, .ff = 512, .context = 128, .steps = 600, .batch = 16,
               .warmup = 60, .seed = 42, .threads = 0, .eval_every = 100, .eval_tokens = 20000, .eval_max_tokens = 0,
               .top_k = 40,
               .max_new = 0, .no_kv_cache = 0, .plot = 0, .quiet = 0, .lr = 2e-3f, .dropout = 0.0f,
               .weight_decay = 0.1f, .temperature = 0.8f};
    const ArgSpec specs[] = {
        {"tokens", ARG_STRING, &f.tokens, "what a token is: a character or a word", 0, 0, "char,word", ARG_DATA},
        {"data", ARG_STRING, &f.data, "the Brown corpus file (default data/brown.txt.gz)", 0, 0, NULL, ARG_DATA},
        {"layers", ARG_INT, &f.layers, "blocks L", 1, STACK_MAX_LAYERS, NULL, ARG_MODEL},
        {"dim", ARG_INT, &f.dim, "model width D (a multiple of --heads)", 1, 4096, NULL, ARG_MODEL},
        {"heads", ARG_INT, &f.heads, "attention heads H", 1, 256, NULL, ARG_MODEL},
        {"ff", ARG_INT, &f.ff, "hidden width F of the MLP", 1, 65536, NULL, ARG_MODEL},
        {"context", ARG_INT, &f.context, "positions per window N", 2, 4096, NULL, ARG_MODEL},
        {"norm", ARG_STRING, &f.norm, "where the norms sit", 0, 0, "post,pre", ARG_MODEL},
        {"norm-type", ARG_STRING, &f.norm_type, "which norm", 0, 0, "layernorm,rmsnorm,none", ARG_MODEL},
        {"mlp", ARG_STRING, &f.mlp, "the position-wise MLP", 0, 0, "gelu,relu,swiglu,none", ARG_MODEL},
        {"pos", ARG_STRING, &f.pos, "positions (chapter 04)", 0, 0, "learned,sinusoidal", ARG_MODEL},
        {"dropout", ARG_FLOAT, &f.dropout, "dropout on embeddings and sublayer outputs (training only)", 0, 0.95, NULL, ARG_TRAINING},
        {"attn-dropout", ARG_FLOAT, &f.attn_dropout, "dropout on the attention weights (training only)", 0, 0.95, NULL, ARG_TRAINING},
        {"steps", ARG_INT, &f.steps, "training steps (batches)", 0, 10000000, NULL, ARG_TRAINING},
        {"batch", ARG_INT, &f.batch, "windows per batch", 1, 4096, NULL, ARG_TRAINING},
        {"lr", ARG_FLOAT, &f.lr, "peak learning rate (AdamW)", 1e-6, 1, NULL, ARG_TRAINING},
        {"warmup", ARG_INT, &f.warmup, "learning-rate warm-up steps (then cosine decay to lr/10)", 0, 1000000, NULL, ARG_TRAINING},
        {"weight-decay", ARG_FLOAT, &f.weight_decay, "AdamW decoupled weight decay", 0, 1, NULL, ARG_TRAINING},
        {"seed", ARG_INT, &f.seed, "random seed (model, batches, sampling)", 0, 2147483647, NULL, ARG_TRAINING},
        {"threads", ARG_INT, &f.threads, "threads (0 = OMP_NUM_THREADS or all cores)", 0, 256, NULL, ARG_SHARED},
        {"backend", ARG_STRING, &f.backend, "matmul backend (default: $ATTN_BACKEND, else auto)", 0, 0, "auto,naive,avx2,avx512", ARG_SHARED},
        {"matmul-precision", ARG_STRING, &f.matmul_precision, MATMUL_PRECISION_HELP, 0, 0, "float,bf16", ARG_SHARED},
        {"eval-every", ARG_INT, &f.eval_every, "steps between validation checks", 0, 1000000, NULL, ARG_TRAINING},
        {"eval-tokens", ARG_INT, &f.eval_tokens, "validation tokens of each check", 2, 100000000, NULL, ARG_TRAINING},
        {"eval-stride", ARG_INT, &f.eval_stride, "final figures: step between windows (0: N/2 words, N chars)", 0, 4096, NULL, ARG_OUTPUT},
        {"final-valid-tokens", ARG_INT, &f.final_valid_tokens, "final validation tokens (0: all words, 100000 chars)", 0, 100000000, NULL, ARG_OUTPUT},
        {"eval-max-tokens", ARG_INT, &f.eval_max_tokens, "final figures on the first N valid/test tokens (0: all)", 0, 100000000, NULL, ARG_OUTPUT},
        {"out", ARG_STRING, &f.out, "output directory (default out/06_gpt; --load: eval_* in it)", 0, 0, NULL, ARG_OUTPUT},
        {"load", ARG_STRING, &f.load, "a saved model: generate from --prompt, or (without) its test figures", 0, 0, NULL, ARG_OUTPUT},
        {"prompt", ARG_STRING, &f.prompt, "text to continue (words: punctuation apart: \"The jury said .\")", 0, 0, NULL, ARG_OUTPUT},
        {"temperature", ARG_FLOAT, &f.temperature, "sampling temperature (0 = always the most likely)", 0, 100, NULL, ARG_OUTPUT},
        {"top-k", ARG_INT, &f.top_k, "sample among the k most likely tokens (0 = all)", 0, 1000000, NULL, ARG_OUTPUT},
        {"max-new", ARG_INT, &f.max_new, "tokens to generate (0 = 40 words or 300 characters)", 0, 100000, NULL, ARG_OUTPUT},
        {"no-kv-cache", ARG_BOOL, &f.no_kv_cache, "generate by running the whole window for every token (slower; same tokens)", 0, 0, NULL, ARG_OUTPUT},
        {"plot", ARG_BOOL, &f.plot, "with --prompt: draw each layer's and head's attention", 0, 0, NULL, ARG_OUTPUT},
        {"quiet", ARG_BOOL, &f.quiet, "no progress line", 0, 0, NULL, ARG_SHARED},
        {"preset", ARG_STRING, &f.preset, "long: the README's word-level run (flags still override)", 0, 0, "none,long", ARG_TRAINING},
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    int rc = args_parse(argc, argv, specs, n_specs);
    char **preset_argv = NULL;
    if (rc == 0 && strcmp(f.preset, "long") == 0)
        rc = args_parse_with_preset(argc, argv, PRESET_LONG, specs, n_specs, &preset_argv);
    if (rc == 1) {
        args_print_help(argv[0],
                        "Chapter 06, part 2: a decoder-only transformer (GPT) on the Brown corpus, beside a\n"
                        "unigram and a Kneser-Ney trigram model on the same split; sampling with a KV cache.",
                        specs, n_specs,
                        "./build/06_gpt\n"
                        "./build/06_gpt --tokens word --preset long\n"
                        "./build/06_gpt --load out/06_gpt/model.ckpt --prompt \"The jury said\" --temperature 0.8\n"
                        "./build/06_gpt --load out/06_gpt/model.ckpt --prompt \"The jury said\" --plot");
        free(preset_argv);
        return 0;
    }
    if (rc == 0 && f.load)
        rc = args_refuse_with_load(argc, argv, specs, n_specs,
                                   "load,data,prompt,temperature,top-k,max-new,no-kv-cache,plot,out,seed,threads,"
                                   "backend,matmul-precision,batch,eval-stride");
    if (rc == 0 && (f.prompt || f.plot) && !f.load)
        rc = fail("--prompt and --plot act on a saved model: add --load out/06_gpt/model.ckpt");
    if (rc == 0 && f.plot && !f.prompt)
        rc = fail("--plot draws the attention over the text of --prompt: add --prompt TEXT (without it, --load "
                  "measures the model's test figures and draws nothing)");
    /* no --backend: $ATTN_BACKEND, else auto; a bad value is an error here, as in every program */
    if (rc == 0 && backend_select(f.backend) < 0) rc = -1;
    if (rc == 0 && matmul_precision_select(f.matmul_precision) < 0) rc = -1;
    if (rc == 0 && (f.final_valid_tokens == 1 || f.eval_max_tokens == 1))
        rc = fail("--%s 1: expected 0 (all) or at least 2 tokens (the first one only gives context)",
                  f.final_valid_tokens == 1 ? "final-valid-tokens" : "eval-max-tokens");
    if (rc == 0 && !f.load && f.eval_stride > f.context)
        rc = fail("--eval-stride %d is longer than --context %d: windows would skip tokens", f.eval_stride, f.context);
    if (rc == 0) {
        /* only a training run has a default --out; --load without --out picks its own (results_eval_dir) */
        if (!f.load && !f.out) f.out = "out/06_gpt";
        if (f.threads > 0) threads_set(f.threads);
        const int words = strcmp(f.tokens, "word") == 0;
        if (f.eval_stride == 0 && !f.load) f.eval_stride = words ? (f.context / 2 > 0 ? f.context / 2 : 1) : f.context;
        if (f.final_valid_tokens == 0 && !words) f.final_valid_tokens = 100000;
        if (f.max_new == 0) {
            /* the default length depends on what a token is (known after --load reads the config) */
            f.max_new = strcmp(f.tokens, "word") == 0 ? 40 : 300;
            if (f.load) {
                char *config = NULL, tokens[16] = "";
                if (checkpoint_read_config(f.load, &config) == 0 && config_get(config, "tokens", tokens, 16) == 0)
                    f.max_new = strcmp(tokens, "word") == 0 ? 40 : 300;
                free(config);
            }
        }
        rc = f.load ? run_loaded(&f) : train(&f);
    }
    free(preset_argv);
    if (rc < 0) {
        fprintf(stderr, "06_gpt: error: %s\n", last_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    output_guard();
    return output_exit_status("06_gpt", run(argc, argv));
}
