/* gpt_run.c - chapter 06's GPT driver (gpt_run.h): the calls of
 * build/06_gpt's main, after this file's helpers in the order main needs
 * them: the figures, the corpus and baselines, the model's config, the
 * training loop's calls, the final figures, the samples, the outputs, a
 * saved model, the flags. */
#include "06_transformer/gpt_run.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_transformer/transformer.h"
#include "data/ngram.h"
#include "data/word_set.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "io/plot.h"
#include "kernels/matmul.h"
#include "util/error.h"
#include "util/output.h"
#include "util/util.h"

static const char *const SAMPLE_PROMPTS[] = {"The jury said", "In the morning", "He was"};

/* ------------------------------------------------------ the figures */

/* What --tokens names: a word, a character, or a BPE piece (brown.h). */
static BrownTokens token_kind(const char *tokens) {
    return strcmp(tokens, "word") == 0 ? BROWN_WORDS : strcmp(tokens, "bpe") == 0 ? BROWN_BPE : BROWN_CHARS;
}

/* Perplexity (words) or bits per character, from a mean -ln p per token
 * (nats). tokens_per_char: the predicted tokens over the characters they
 * spell. A character token is one character (1); the BPE pieces spell
 * brown_chars of them: each piece's letters and one for the space or
 * newline after each word's last piece, counted as the chars view counts
 * its characters, so that bits per character = the nats summed over the
 * pieces / those characters / ln 2 compares with a character model's. */
static double metric(BrownTokens kind, double mean_nll, double tokens_per_char) {
    return kind == BROWN_WORDS ? exp(mean_nll) : mean_nll * tokens_per_char / log(2.0);
}
static const char *metric_name(BrownTokens kind) {
    return kind == BROWN_WORDS ? "perplexity" : "bits per character";
}

/* ids[0 .. n) per character they spell (1 for characters; unused for words). */
static double tokens_per_char(const BrownCorpus *c, const int *ids, int n) {
    if (c->kind != BROWN_BPE) return 1.0;
    const long chars = brown_chars(c, ids, n);
    return chars > 0 ? (double)n / (double)chars : 1.0;
}

/* The mean -ln p of stream[first .. n), with the tokens before first as context. */
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

/* --max-new 0: 40 words, 300 characters, or 60 pieces (about 40 words) */
static int default_max_new(BrownTokens kind) {
    return kind == BROWN_WORDS ? 40 : kind == BROWN_BPE ? 60 : 300;
}

/* ------------------------------------------- the corpus and the baselines */

static int load_corpus(const GptFlags *f, BrownCorpus *c) {
    const BrownTokens kind = token_kind(f->tokens);
    if (brown_load(c, f->data, kind) < 0) return -1;
    printf("Brown corpus (%s): %d files, %d words; split %d / %d / %d %s; |V| = %d (%d <unk> in the test part)\n",
           f->data ? f->data : BROWN_DEFAULT_PATH, c->n_files, c->n_words, c->train.n, c->valid.n, c->test.n,
           kind == BROWN_WORDS ? "words" : kind == BROWN_BPE ? "BPE pieces" : "characters", c->V, c->test.n_unk);
    if (kind == BROWN_BPE) {
        const long chars = brown_chars(c, c->test.ids, c->test.n);
        printf("BPE: %d merges learned on the training part's words, %d characters; the test part's %d pieces "
               "spell %ld characters (%.2f a piece)\n", c->bpe.n_merges, c->bpe.n_chars, c->test.n, chars,
               (double)chars / c->test.n);
    }
    return 0;
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
    /* every token of a part scored: its mean -ln p is the log of the perplexity */
    const double u_test = log(unigram_perplexity(&u, c->test.ids, c->test.n));
    const double k_valid = log(kn_perplexity(&kn, c->valid.ids, c->valid.n));
    const double k_test = log(kn_perplexity(&kn, c->test.ids, c->test.n));
    const BrownTokens kind = c->kind;
    const double tpc_test = tokens_per_char(c, c->test.ids, c->test.n),
                 tpc_valid = tokens_per_char(c, c->valid.ids, c->valid.n);
    printf("baselines on the same split (%s on the test part):\n", metric_name(kind));
    if (kind == BROWN_BPE) {   /* the same models over pieces; their nats per piece, converted */
        printf("  unigram, add-one           %8.3f   (%.3f nats per piece)\n", metric(kind, u_test, tpc_test), u_test);
        printf("  Kneser-Ney trigram         %8.3f   (%.3f nats per piece; validation %.3f bpc)\n",
               metric(kind, k_test, tpc_test), k_test, metric(kind, k_valid, tpc_valid));
    } else {
        printf("  unigram, add-one           %8.3f\n", metric(kind, u_test, 1.0));
        printf("  Kneser-Ney trigram         %8.3f   (validation %.3f)\n", metric(kind, k_test, 1.0),
               metric(kind, k_valid, 1.0));
    }
    results_set_num(res, "unigram_test", metric(kind, u_test, tpc_test));
    results_set_num(res, "kn_trigram_test", metric(kind, k_test, tpc_test));
    results_set_num(res, "kn_trigram_valid", metric(kind, k_valid, tpc_valid));
    *kn_test = metric(kind, k_test, tpc_test);
    unigram_free(&u);
    kn_free(&kn);
    return 0;
}

/* ------------------------------------------------ the model's config */

static int name_to_index(const char *value, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0) return i;
    return 0;   /* (args_parse has checked the choices) */
}

/* The model's configuration from the flags, and its checkpoint text:
 * model=gpt, GPT_CONFIG_FIELDS (gpt.h), tokens=, and vocab_crc= (the
 * corpus's brown_vocab_crc: --load refuses a corpus whose ids mean other
 * tokens; checkpoints saved before it have no such line); for BPE pieces
 * the merges too, as gpt_bpe_alphabet=, gpt_bpe_merges= and gpt_bpe_merge_<i>=
 * lines (bpe_to_text). Returns the malloc'd text, or NULL with fail(). */
static char *config_from_flags(const GptModelFlags *f, const char *tokens, const BrownCorpus *corpus, GptConfig *c) {
    const int V = corpus->V;
    static const char *const places[] = {"post", "pre"}, *const norms[] = {"layernorm", "rmsnorm", "none", "batchnorm"},
                             *const mlps[] = {"gelu", "relu", "swiglu", "none"};
    const int moe = strcmp(f->mlp, "moe") == 0;   /* a mixture of GELU experts (moe.h) */
    *c = (GptConfig){.layers = f->layers,
                     .block = {.D = f->dim, .H = f->heads, .D_H = f->dim / f->heads, .F = f->ff,
                               .norm_place = (BlockNormPlace)name_to_index(f->norm, places, 2),
                               .norm = (BlockNorm)name_to_index(f->norm_type, norms, 4),
                               .mlp = moe ? BLOCK_MLP_GELU : (BlockMlp)name_to_index(f->mlp, mlps, 4),
                               .moe = {moe ? f->experts : 0, moe ? f->moe_top_k : 1, moe ? f->moe_aux : 0.0f,
                                       moe ? f->capacity : 0.0f, moe && f->moe_top_k > 1},
                               .dropout = f->dropout,
                               .attn_dropout = f->attn_dropout, .attention = MULTI_HEAD_PLAIN, .causal = 1},
                     .kv_cache = 1,   /* part 1's key, in the text as always (generation takes --no-kv-cache) */
                     .context = f->context,
                     .V = V};
    if (positions_from_name(f->pos, &c->pos) < 0) return NULL;
    if (strcmp(f->sparse, "none") != 0) {   /* blocks of P, w each side, g global, r random */
        SparsePattern *p = &c->sparse;
        int used = 0;
        if (sscanf(f->sparse, "%d,%d,%d,%d%n", &p->P, &p->window, &p->global, &p->random, &used) != 4 ||
            f->sparse[used] != '\0' || p->P < 1) {
            fail("--sparse '%s': expected none or P,w,g,r (whole numbers: blocks of P >= 1 positions, w blocks "
                 "each side, g global, r random; BigBird's: 64,1,1,2)", f->sparse);
            return NULL;
        }
        if (sparse_pattern_check(p) < 0) return NULL;
    }
    char *merges = corpus->kind == BROWN_BPE ? bpe_to_text(&corpus->bpe, "gpt_") : NULL;
    const size_t cap = 4096 + (merges ? strlen(merges) : 0);
    char *text = xmalloc(cap);
    text[0] = '\0';
    if (config_append(text, cap, "model=gpt\n") < 0 || config_write(text, cap, GPT_CONFIG_FIELDS, GPT_CONFIG_N, c) < 0 ||
        config_append(text, cap, "tokens=%s\nvocab_crc=%08x\n%s", tokens, (unsigned)brown_vocab_crc(corpus),
                      merges ? merges : "") < 0) {
        free(text);
        text = NULL;
    }
    free(merges);
    return text;
}

/* Before gpt_create: the memory the model of cfg with room for --batch
 * windows asks for (training: with AdamW's moments), against what this
 * process may use (train/memory.h). Returns 0, or -1 with fail() naming the
 * total and its largest part. */
static int check_memory(const GptConfig *cfg, const GptFlags *f, int training, const char *subject) {
    MemoryPart parts[GPT_MEMORY_PARTS];
    const int n = gpt_memory_parts(cfg, f->shared.batch, training, parts);
    if (n < 0) return -1;
    return memory_check(subject, parts, n, f->max_memory,
                        training ? "lower --batch, --context, --dim, --ff or --layers"
                                 : "lower --batch (its windows have the model's context)");
}

/* ------------------------------------------- the training loop's calls */

/* One step's gradient: B random windows of the training part, forward and
 * backward. Returns the mean cross-entropy per predicted token. */
static double gradient(void *self, int step, long *count) {
    GptBatches *b = self;
    const int N = b->g->N;
    (void)step;
    for (int w = 0; w < b->B; w++) {
        const int a = (int)rng_below(&b->rng, (uint32_t)(b->train->n - N - 1) + 1);
        memcpy(b->tokens + (size_t)w * N, b->train->ids + a, sizeof(int) * (size_t)N);
        memcpy(b->targets + (size_t)w * N, b->train->ids + a + 1, sizeof(int) * (size_t)N);
    }
    const double sum = gpt_forward(b->g, b->tokens, b->targets, b->B, 1);
    const int counted = b->g->last_counted;
    b->moe.dropped += b->g->moe_dropped;
    b->moe.pairs += (long)b->B * N * b->g->cfg.block.moe.k * b->g->L;
    b->moe.aux = b->g->moe_aux;
    if (counted) gpt_backward(b->g, b->tokens, b->targets, b->B, (float)counted);
    *count = (long)b->B * N;
    return counted ? sum / counted : 0.0;
}

/* Each check's validation loss: windows moved by N (cheap; the final figures use --eval-stride). */
static double validate(void *self) {
    GptBatches *b = self;
    return part_nll(b->g, b->valid, 1, b->valid_n, b->g->N);
}

/* ------------------------------------------------- the final figures */

static GptFigures evaluate(Gpt *g, const BrownCorpus *c, const GptFlags *f) {
    GptFigures e = {.valid_n = f->final_valid_tokens > 0 && f->final_valid_tokens < c->valid.n
                                   ? f->final_valid_tokens
                                   : c->valid.n,
                    .test_n = c->test.n};
    if (f->eval_max_tokens > 0) {
        if (e.valid_n > f->eval_max_tokens) e.valid_n = f->eval_max_tokens;
        if (e.test_n > f->eval_max_tokens) e.test_n = f->eval_max_tokens;
    }
    int *stream = joined_stream(c);
    const double t0 = now_seconds();
    e.valid_nll = part_nll(g, stream, 1, e.valid_n, f->eval_stride);
    e.test_nll = part_nll(g, stream, c->valid.n, c->valid.n + e.test_n, f->eval_stride);
    e.seconds = now_seconds() - t0;
    /* the predicted tokens: valid[1 .. valid_n) (the first is context only) and test[0 .. test_n) */
    e.valid_chars = brown_chars(c, stream + 1, e.valid_n - 1);
    e.test_chars = brown_chars(c, c->test.ids, e.test_n);
    e.valid_tpc = tokens_per_char(c, stream + 1, e.valid_n - 1);
    e.test_tpc = tokens_per_char(c, c->test.ids, e.test_n);
    free(stream);
    return e;
}

static void print_figures(const GptFlags *f, int context, const BrownCorpus *c, const GptFigures *e, double kn_test,
                          const TrainLog *log) {
    const BrownTokens kind = c->kind;
    printf("\n(windows of %d moved by %d: each token predicted from at least %d tokens before it)\n", context,
           f->eval_stride, context - f->eval_stride + 1);
    if (e->valid_n < c->valid.n || e->test_n < c->test.n)
        printf("(the figures below are over the first %d validation and %d test tokens, of %d and %d)\n",
               e->valid_n, e->test_n, c->valid.n, c->test.n);
    printf("%-28s %-10s %-10s\n", metric_name(kind), "validation", "test");
    printf("%-28s %-10.3f %-10.3f\n", "GPT (this run)", metric(kind, e->valid_nll, e->valid_tpc),
           metric(kind, e->test_nll, e->test_tpc));
    printf("%-28s %-10s %-10.3f\n", "Kneser-Ney trigram", "", kn_test);
    if (kind == BROWN_BPE)
        printf("(BPE: bits per character = nats summed over the predicted pieces / the characters they spell / ln 2;\n"
               " the characters: the pieces' letters and the space or newline after each word, as --tokens char counts\n"
               " them: %d validation pieces spell %ld, %d test pieces %ld; nats per piece: validation %.3f, test %.3f)\n",
               e->valid_n - 1, e->valid_chars, e->test_n, e->test_chars, e->valid_nll, e->test_nll);
    printf("trained %d steps in %.1f s (%.0f tokens/s); evaluated in %.1f s\n", log->steps_done, log->seconds,
           (double)log->count / log->seconds, e->seconds);
}

/* ------------------------------------------------------------ samples */

/* Count the sampled words of prompt + text: the words that end inside text
 * and before a separator (the last one, cut off by --max-new, is not a word
 * yet) and hold a letter (punctuation marks would pass too easily); known
 * counts those that occur in the training text. */
static void count_sampled_words(const WordSet *s, const char *prompt, const char *text, int *known, int *total) {
    const size_t p0 = strlen(prompt);
    char *all = xmalloc(p0 + strlen(text) + 1);
    strcpy(all, prompt);
    strcpy(all + p0, text);
    for (size_t i = 0; all[i];) {
        if (isspace((unsigned char)all[i])) { i++; continue; }
        size_t end = i;
        int letter = 0;
        while (all[end] && !isspace((unsigned char)all[end])) letter |= isalpha((unsigned char)all[end++]) != 0;
        if (!all[end]) break;   /* no separator after it: cut off */
        if (end > p0 && letter) {
            all[end] = '\0';
            (*total)++;
            *known += word_set_contains(s, all + i);
        }
        i = end + 1;
    }
    free(all);
}

/* Samples from each prompt. With a word set (character models), also count
 * the sampled words and those of them that occur in the training text. */
static void print_samples(Gpt *g, const BrownCorpus *c, const GptFlags *f, const char *const *prompts,
                          int n_prompts, const WordSet *words, int *known, int *total) {
    const int cap = 4096;
    int *ids = xmalloc(sizeof(int) * cap), *out = xmalloc(sizeof(int) * (size_t)(f->max_new > 0 ? f->max_new : 1));
    Rng rng;
    rng_seed(&rng, (uint64_t)f->shared.seed, 11);   /* sampling has its own stream: the same seed, the same text */
    const GptSampling s = {f->temperature, f->top_k, !f->no_kv_cache};
    for (int i = 0; i < n_prompts; i++) {
        int n = brown_encode(c, prompts[i], ids, cap);
        if (n <= 0) continue;
        if (gpt_generate(g, ids, n, f->max_new, &s, &rng, out, NULL) < 0) break;
        size_t len = 1;   /* the text's bytes: every token and a separator */
        for (int j = 0; j < f->max_new; j++) len += strlen(brown_token(c, out[j])) + 1;
        char *text = xmalloc(len);
        brown_decode(c, out, f->max_new, text, (int)len);
        printf("  [%s]%s%s\n", prompts[i], c->kind != BROWN_CHARS ? " " : "", text);   /* (a prompt's pieces end a word) */
        if (words) count_sampled_words(words, prompts[i], text, known, total);
        free(text);
    }
    free(ids);
    free(out);
}

/* ------------------------------------------------------- a saved model */

/* The corpus gives the ids the same tokens as the one the model was trained
 * on: the same V (checked before) and, when the checkpoint keeps one, the
 * same vocab_crc. Returns 0, or -1 with fail() naming both files. */
static int check_vocabulary(const char *ckpt, const char *config, const BrownCorpus *c, const char *corpus_path) {
    char want[64], have[16];
    if (config_get_or(config, "vocab_crc", "", want, sizeof want) < 0) return -1;
    if (want[0] == '\0') return 0;   /* saved before the fingerprint: V is all there is to compare */
    snprintf(have, sizeof have, "%08x", (unsigned)brown_vocab_crc(c));
    if (strcmp(want, have) == 0) return 0;
    char quoted[96];
    return fail("%s: the model's vocabulary has vocab_crc=%s, but the %d tokens of %s give vocab_crc=%s: the same "
                "size, other tokens for the ids (expected the corpus it was trained on)", ckpt,
                error_excerpt(want, quoted, sizeof quoted), c->V, corpus_path, have);
}

/* --tokens bpe: the merges a checkpoint keeps (its gpt_bpe_ lines) into
 * *saved. Returns 0, or -1 with fail() naming the checkpoint. */
static int read_saved_bpe(const char *ckpt, const char *config, Bpe *saved) {
    if (bpe_from_text(saved, config, "gpt_") == 0) return 0;
    return fail("%s: tokens=bpe, but its BPE merges cannot be read: %s", ckpt, last_error());
}

/* --tokens bpe: the corpus's training part gives the merges the model was
 * trained with. The same number of merges learned again here: the same
 * alphabet and merges in the same order (bpe_crc), or one error naming both
 * files. */
static int check_bpe(const char *ckpt, const Bpe *saved, const BrownCorpus *c, const char *corpus_path) {
    const uint32_t want = bpe_crc(saved), have = bpe_crc(&c->bpe);
    if (want == have) return 0;
    return fail("%s: the model's %d BPE merges (CRC %08x) are not the ones the training part of %s gives (CRC %08x): "
                "its pieces would be other tokens (expected the corpus it was trained on)", ckpt, saved->n_merges,
                (unsigned)want, corpus_path, (unsigned)have);
}

/* --load: the checkpoint's config (its model=, tokens= and GptConfig), and
 * the corpus it was trained on, checked against it. */
static int load_saved_corpus(GptRun *run) {
    GptFlags *f = &run->flags;
    char tokens[16];
    if (checkpoint_read_config(f->shared.load, &run->config) < 0) return -1;
    if (checkpoint_check_model(f->shared.load, run->config, "gpt", "06_gpt") < 0 ||
        config_get(run->config, "tokens", tokens, sizeof tokens) < 0 ||
        config_read(run->config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &run->cfg) < 0)
        return -1;
    if (strcmp(tokens, "word") != 0 && strcmp(tokens, "char") != 0 && strcmp(tokens, "bpe") != 0) {
        char quoted[96];
        return fail("%s: tokens=%s in its config: expected char or word, or bpe", f->shared.load,
                    error_excerpt(tokens, quoted, sizeof quoted));
    }
    const BrownTokens kind = token_kind(tokens);
    if (f->max_new == 0) f->max_new = default_max_new(kind);   /* what a token is: known now */
    if (f->eval_stride > run->cfg.context)
        return fail("--eval-stride %d is longer than the model's context %d: windows would skip tokens",
                    f->eval_stride, run->cfg.context);
    /* BPE pieces: the checkpoint's merges, and as many learned again on the corpus to compare */
    BrownConfig corpus_cfg;
    brown_defaults(&corpus_cfg, kind);
    if (f->data && f->data[0]) corpus_cfg.path = f->data;
    if (kind == BROWN_BPE) {
        if (read_saved_bpe(f->shared.load, run->config, &run->saved_bpe) < 0) return -1;
        corpus_cfg.bpe_merges = run->saved_bpe.n_merges;
    }
    if (brown_load_config(&run->corpus, &corpus_cfg) < 0) return -1;
    const char *corpus_path = f->data ? f->data : BROWN_DEFAULT_PATH;
    if (kind == BROWN_BPE && check_bpe(f->shared.load, &run->saved_bpe, &run->corpus, corpus_path) < 0) return -1;
    if (run->corpus.V != run->cfg.V)
        return fail("%s: the model has a vocabulary of %d tokens, but %s gives %d: not the corpus it was trained on",
                    f->shared.load, run->cfg.V, corpus_path, run->corpus.V);
    return check_vocabulary(f->shared.load, run->config, &run->corpus, corpus_path);
}

/* The model a checkpoint's config describes; a config the model refuses
 * (top-k above the experts, ...) or one too large for this machine is named
 * with the file. */
static int create_saved(Gpt *g, const GptConfig *cfg, const GptFlags *f) {
    char subject[1200];
    snprintf(subject, sizeof subject, "%s: its model (context=%d, dim=%d, layers=%d) with --batch %d", f->shared.load,
             cfg->context, cfg->block.D, cfg->layers, f->shared.batch);
    if (check_memory(cfg, f, 0, subject) < 0) return -1;
    if (gpt_create(g, cfg, f->shared.batch, 1) == 0) return 0;
    return fail("%s: %s", f->shared.load, last_error());
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

/* Continue --prompt (and with --plot, draw its attention maps). */
static int generate(Gpt *g, const BrownCorpus *c, const GptFlags *f) {
    int blank = 1;
    for (const char *ch = f->prompt; *ch; ch++) blank &= isspace((unsigned char)*ch) != 0;
    if (blank) return fail("--prompt is blank: give some text to continue");
    int *ids = xmalloc(sizeof(int) * 4096);
    int n = brown_encode(c, f->prompt, ids, 4096), rc = n > 0 ? 0 : -1;
    if (rc == 0) {
        int n_unk = 0;
        for (int i = 0; i < n; i++) n_unk += ids[i] == c->unk;
        printf("prompt: %d tokens (%d of them <unk>: not in the vocabulary)\n", n, n_unk);
        if (c->kind == BROWN_BPE) {   /* what BPE made of the words */
            printf("BPE pieces:");
            for (int i = 0; i < n && i < 64; i++) printf(" %s", brown_token(c, ids[i]));
            printf("%s\n", n > 64 ? " ..." : "");
        }
        const char *prompts[1] = {f->prompt};
        const double t0 = now_seconds();
        print_samples(g, c, f, prompts, 1, NULL, NULL, NULL);
        /* the cost of generation, with the cache or without (--no-kv-cache): the same tokens */
        const double seconds = now_seconds() - t0;
        const int n_new = f->max_new > 0 ? f->max_new : 1;
        printf("generated %d tokens in %.2f s (%.1f ms a token, %s)\n", n_new, seconds, 1000.0 * seconds / n_new,
               f->no_kv_cache || g->cfg.sparse.P > 0 ? "no KV cache: the whole window for every token"
                                                     : "with the KV cache");
    }
    if (rc == 0 && f->plot && g->cfg.sparse.P > 0)
        rc = fail("--plot draws the attention maps A, which a sparse model never forms (its fused kernel scores "
                  "block by block): leave out --plot");
    if (rc == 0 && f->plot) {
        char dir[1100], stem[1200];
        if (results_eval_dir(dir, sizeof dir, f->shared.out, "out/06_gpt", f->shared.load) < 0 || make_dirs(dir) < 0 ||
            path_format(stem, sizeof stem, "%s/prompt_attention", dir) < 0 || plot_prompt(g, c, ids, n, stem) < 0)
            rc = -1;
    }
    free(ids);
    return rc;
}

/* The saved model's test figures, written apart from the training run's. */
static int measure_saved(Gpt *g, const BrownCorpus *c, const GptFlags *f, const char *config) {
    char dir[1100], path[1200];
    if (results_eval_dir(dir, sizeof dir, f->shared.out, "out/06_gpt",
                         f->shared.load) < 0 || make_dirs(dir) < 0) return -1;
    const BrownTokens kind = c->kind;
    int *stream = joined_stream(c);
    /* as training measured it: windows moved by N/2 (words, BPE pieces) or N (characters) */
    const int half = g->N / 2 > 0 ? g->N / 2 : 1;
    const int stride = f->eval_stride > 0 ? f->eval_stride : kind != BROWN_CHARS ? half : g->N;
    const double test_nll = part_nll(g, stream, c->valid.n, c->valid.n + c->test.n, stride);
    free(stream);
    const double tpc = tokens_per_char(c, c->test.ids, c->test.n);
    printf("%s: test %s %.3f", f->shared.load, metric_name(kind), metric(kind, test_nll, tpc));
    if (kind == BROWN_BPE)
        printf(" (%.3f nats per piece; %d pieces spelling %ld characters, the spaces and newlines after words "
               "included)", test_nll, c->test.n, brown_chars(c, c->test.ids, c->test.n));
    printf("\n");
    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", "06_gpt");
    results_set_config(&res, config);
    results_set_str(&res, "checkpoint", f->shared.load);
    results_set_num(&res, kind == BROWN_WORDS ? "test_perplexity" : "test_bpc", metric(kind, test_nll, tpc));
    if (kind == BROWN_BPE) {
        results_set_num(&res, "test_nats_per_token", test_nll);
        results_set_num(&res, "test_tokens", c->test.n);
        results_set_num(&res, "test_chars", (double)brown_chars(c, c->test.ids, c->test.n));
    }
    if (path_format(path, sizeof path, "%s/results.json", dir) < 0 || results_write(&res, path) < 0) return -1;
    printf("results: %s\n", path);
    return 0;
}

/* --------------------------------------------------------------- flags */

/* The flags --help lists before the model's: what a token is, and the corpus. */
enum { N_DATA_FLAGS = 2, MAX_FLAGS = 128 };

/* Parse argv into run->flags and run->model (which hold the defaults).
 * Returns 0 to run, 1 when --help was printed, -1 with fail(). */
static int parse_flags(GptRun *run, int argc, char **argv, const ArgSpec *own, int n_own) {
    GptFlags *f = &run->flags;
    const GptModelFlags *m = &run->model;
    const ArgSpec data_flags[N_DATA_FLAGS] = {
        {"tokens", ARG_STRING, &f->tokens, "what a token is (bpe: a piece of a word)", 0, 0, "char,word,bpe",
         ARG_DATA, ARG_TRAINING_ONLY},
        {"data", ARG_STRING, &f->data, "the Brown corpus file (default data/brown.txt.gz)", 0, 0, NULL, ARG_DATA,
         ARG_ACTS_WITH_LOAD},
    };
    const ArgSpec gpt_flags[] = {
        {"max-memory", ARG_FLOAT, &f->max_memory, "MiB the model may take, checked first (0: the machine's)", 0, 1e9,
         NULL, ARG_SHARED, ARG_ACTS_WITH_LOAD},
        {"eval-tokens", ARG_INT, &f->eval_tokens, "validation tokens of each check", 2, 100000000, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"eval-stride", ARG_INT, &f->eval_stride, "final figures: step between windows (0: N chars, else N/2)", 0,
         4096, NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"final-valid-tokens", ARG_INT, &f->final_valid_tokens, "final validation tokens (0: all words, else 100000)",
         0, 100000000, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"eval-max-tokens", ARG_INT, &f->eval_max_tokens, "final figures on the first N valid/test tokens (0: all)", 0,
         100000000, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"prompt", ARG_STRING, &f->prompt, "text to continue (words, bpe: punctuation apart: \"The jury said .\")", 0,
         0, NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"temperature", ARG_FLOAT, &f->temperature, "sampling temperature (0 = always the most likely)", 0, 100, NULL,
         ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"top-k", ARG_INT, &f->top_k, "sample among the k most likely tokens (0 = all)", 0, 1000000, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},
        {"max-new", ARG_INT, &f->max_new, "tokens to generate (0 = 40 words, 300 characters, 60 pieces)", 0, 100000,
         NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"no-kv-cache", ARG_BOOL, &f->no_kv_cache, "generate by running the whole window for every token (slower; "
         "same tokens)", 0, 0, NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"plot", ARG_BOOL, &f->plot, "with --prompt: draw each layer's and head's attention", 0, 0, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},
    };
    const int n_gpt = (int)(sizeof gpt_flags / sizeof gpt_flags[0]);
    if (n_own < 0 || n_own > MAX_FLAGS - N_DATA_FLAGS - n_gpt - TRAIN_FLAG_SPECS)
        return fail("%d model flags given to gpt_run_parse_flags: expected at most %d", n_own,
                    MAX_FLAGS - N_DATA_FLAGS - n_gpt - TRAIN_FLAG_SPECS);
    /* one table in --help's order: the data, the model's, the GPT's, then those of every program */
    ArgSpec specs[MAX_FLAGS];
    memcpy(specs, data_flags, sizeof data_flags);
    memcpy(specs + N_DATA_FLAGS, own, sizeof(ArgSpec) * (size_t)n_own);
    memcpy(specs + N_DATA_FLAGS + n_own, gpt_flags, sizeof gpt_flags);
    const int n_specs = N_DATA_FLAGS + n_own + n_gpt + train_flag_specs(&f->shared, "none,long",
                                                                          specs + N_DATA_FLAGS + n_own + n_gpt);
    /* a saved model samples: --seed seeds its sampling too */
    args_find(specs, n_specs, "seed")->with_load = ARG_ACTS_WITH_LOAD;
    int rc = args_parse(argc, argv, specs, n_specs);
    if (rc == 0 && strcmp(f->shared.preset, "long") == 0)
        rc = args_parse_with_preset(argc, argv, run->program->preset_long, specs, n_specs, &run->preset_argv);
    if (rc == 1) {
        args_print_help(argv[0], run->program->summary, specs, n_specs, run->program->examples);
        return 1;
    }
    if (rc == 0 && f->shared.load) rc = args_refuse_with_load(argc, argv, specs, n_specs);
    if (rc < 0) return -1;
    const char *const moe_flags[] = {"experts", "moe-top-k", "moe-aux", "capacity"};
    for (int i = 0; i < 4 && strcmp(m->mlp, "moe") != 0; i++)   /* the MLP is dense: they would do nothing */
        if (args_given(argc, argv, moe_flags[i]))
            return fail("--%s sets the mixture of experts, but the MLP is --mlp %s: add --mlp moe, or leave "
                        "--%s out", moe_flags[i], m->mlp, moe_flags[i]);
    if (strcmp(m->mlp, "moe") == 0 && m->moe_top_k > m->experts)
        return fail("--moe-top-k %d: expected at most --experts (%d): each token picks k of the E experts",
                    m->moe_top_k, m->experts);
    if ((f->prompt || f->plot) && !f->shared.load)
        return fail("--prompt and --plot act on a saved model: add --load out/06_gpt/model.ckpt");
    if (f->plot && !f->prompt)
        return fail("--plot draws the attention over the text of --prompt: add --prompt TEXT (without it, --load "
                    "measures the model's test figures and draws nothing)");
    /* no --backend: $ATTN_BACKEND, else auto; a bad value is an error here, as in every program */
    if (train_flags_apply(&f->shared) < 0) return -1;
    if (f->final_valid_tokens == 1 || f->eval_max_tokens == 1)
        return fail("--%s 1: expected 0 (all) or at least 2 tokens (the first one only gives context)",
                    f->final_valid_tokens == 1 ? "final-valid-tokens" : "eval-max-tokens");
    if (f->shared.load) return 0;   /* the rest is the training run's (a saved model's window is in its checkpoint) */
    if (f->eval_stride > m->context)
        return fail("--eval-stride %d is longer than --context %d: windows would skip tokens", f->eval_stride,
                    m->context);
    if (strcmp(m->norm_type, "batchnorm") == 0 && gpt_norm_check(BLOCK_BATCHNORM) < 0) return -1;
    if (m->dim % m->heads != 0)
        return fail("--dim %d is not a multiple of --heads %d: each head gets dim / heads numbers", m->dim,
                    m->heads);
    if (!f->shared.out) f->shared.out = "out/06_gpt";   /* (--load without --out picks its own: results_eval_dir) */
    if (checkpoint_check_stopped_run(f->shared.out, f->shared.force,
                                     f->shared.resume) < 0) return -1;   /* a stopped run's weights */
    const BrownTokens kind = token_kind(f->tokens);
    if (f->eval_stride == 0)
        f->eval_stride = kind != BROWN_CHARS ? (m->context / 2 > 0 ? m->context / 2 : 1) : m->context;
    if (f->final_valid_tokens == 0 && kind != BROWN_WORDS) f->final_valid_tokens = 100000;
    if (f->max_new == 0) f->max_new = default_max_new(kind);
    return 0;
}

/* ------------------------------------------------------------ the calls */

void gpt_run_init(GptRun *run, const GptProgram *program) {
    *run = (GptRun){.program = program};
    run->flags = (GptFlags){.shared = {.train = TRAIN_DEFAULTS, .batch = 16, .seed = 42, .preset = "none"},
                            .tokens = "char", .eval_tokens = 20000, .top_k = 40, .temperature = 0.8f};
    results_init(&run->results);
}

int gpt_run_parse_flags(GptRun *run, int argc, char **argv, const ArgSpec *own, int n_own) {
    const int rc = parse_flags(run, argc, argv, own, n_own);
    if (rc != 0) return rc;
    /* a --out that cannot be written is said now, not after the training (util.h) */
    if (!run->flags.shared.load && out_dir_prepare("--out", run->flags.shared.out) < 0) return -1;
    return 0;
}

int gpt_run_load_corpus(GptRun *run) {
    if (run->flags.shared.load) return load_saved_corpus(run);
    const BrownTokens kind = token_kind(run->flags.tokens);
    results_set_str(&run->results, "chapter", "06_gpt");
    results_set_str(&run->results, "task",
                    kind == BROWN_WORDS ? "brown_words" : kind == BROWN_BPE ? "brown_bpe" : "brown_chars");
    if (load_corpus(&run->flags, &run->corpus) < 0) return -1;
    return baselines(&run->corpus, &run->results, &run->kn_test);
}

int gpt_run_build(GptRun *run) {
    const GptFlags *f = &run->flags;
    const GptModelFlags *m = &run->model;
    run->g = xcalloc(1, sizeof *run->g);
    if (f->shared.load) return create_saved(run->g, &run->cfg, f);
    if (run->corpus.train.n < m->context + 2)
        return fail("the training part has %d tokens: too few for --context %d", run->corpus.train.n, m->context);
    char subject[160];
    snprintf(subject, sizeof subject, "the GPT of --layers %d --dim %d --ff %d --context %d --batch %d", m->layers,
             m->dim, m->ff, m->context, f->shared.batch);
    if ((run->config = config_from_flags(m, f->tokens, &run->corpus, &run->cfg)) == NULL ||
        check_memory(&run->cfg, f, 1, subject) < 0 || gpt_create(run->g, &run->cfg, f->shared.batch,
                                                                 (uint64_t)f->shared.seed) < 0)
        return -1;
    results_note_other_run(f->shared.out, run->config);   /* another model's files there? say so once */
    printf("GPT: %d blocks, D = %d, %d heads, F = %d, context %d, %s-%s, %s, %s positions, dropout %g/%g: "
           "%zu parameters (%zu in the tied embedding)\n",
           m->layers, m->dim, m->heads, m->ff, m->context, m->norm, m->norm_type, m->mlp, m->pos, (double)m->dropout,
           (double)m->attn_dropout, run->g->params.size, (size_t)run->corpus.V * m->dim);
    return 0;
}

int gpt_run_use_saved(GptRun *run) {
    const GptFlags *f = &run->flags;
    if (checkpoint_load(f->shared.load, &run->g->params) < 0) return -1;
    const int rc = f->prompt ? generate(run->g, &run->corpus, f) : measure_saved(run->g, &run->corpus, f, run->config);
    return rc < 0 ? -1 : 1;
}

int gpt_run_train(GptRun *run) {
    const GptFlags *f = &run->flags;
    const BrownCorpus *c = &run->corpus;
    const int N = run->model.context;
    GptBatches *b = &run->batches;
    *b = (GptBatches){.g = run->g, .train = &c->train, .B = f->shared.batch,
                      .tokens = xmalloc(sizeof(int) * (size_t)f->shared.batch * N),
                      .targets = xmalloc(sizeof(int) * (size_t)f->shared.batch * N),
                      .valid = c->valid.ids,
                      .valid_n = f->eval_tokens < c->valid.n ? f->eval_tokens : c->valid.n};
    rng_seed(&b->rng, (uint64_t)f->shared.seed, 1);
    if (path_format(b->checkpoint, sizeof b->checkpoint, "%s/model.ckpt", f->shared.out) < 0 ||
        checkpoint_so_far_path(b->so_far, sizeof b->so_far, b->checkpoint) < 0)
        return -1;
    /* what a resume puts back besides the weights: the windows' stream, dropout's, the experts' tallies */
    const Trainer trainer = {.self = b, .params = &run->g->params, .gradient = gradient, .validate = validate,
                             .checkpoint = b->checkpoint, .config = run->config, .batch = f->shared.batch,
                             .resume = f->shared.resume ? b->so_far : NULL,
                             .state = {{"batches.rng", STATE_U64, &b->rng, 2},
                                       {"model.rng", STATE_U64, &run->g->dropout_rng, 2},
                                       {"moe.dropped", STATE_LONG, &b->moe.dropped, 1},
                                       {"moe.pairs", STATE_LONG, &b->moe.pairs, 1},
                                       {"moe.aux", STATE_DOUBLE, &b->moe.aux, 1}},
                             .n_state = 5};
    return train_loop(&trainer, &f->shared.train, &run->log) < 0 ? -1 : 0;
}

int gpt_run_evaluate(GptRun *run) {
    run->figures = evaluate(run->g, &run->corpus, &run->flags);
    print_figures(&run->flags, run->model.context, &run->corpus, &run->figures, run->kn_test, &run->log);
    report_experts(run->g, &run->batches.moe, &run->results);
    return expert_usage(run->g, &run->corpus, run->flags.shared.out, &run->results) < 0 ? -1 : 0;
}

int gpt_run_samples(GptRun *run) {
    const GptFlags *f = &run->flags;
    const BrownCorpus *c = &run->corpus;
    printf("\nsamples (temperature %g, top-k %d, seed %d):\n", (double)f->temperature, f->top_k, f->shared.seed);
    /* from a character model, the share of its sampled words that occur in
     * the training text (a word model samples only words) */
    WordSet words = {0};
    if (c->kind == BROWN_CHARS) word_set_build(&words, c);
    int known = 0, total = 0;
    print_samples(run->g, c, f, SAMPLE_PROMPTS, 3, c->kind == BROWN_CHARS ? &words : NULL, &known, &total);
    if (c->kind == BROWN_CHARS) {   /* (no words at all: a share of 0) */
        const double share = total > 0 ? (double)known / total : 0.0;
        printf("%d of the %d sampled words (with a letter, not cut off) occur in the training text: %.0f%%\n", known,
               total, 100.0 * share);
        results_set_num(&run->results, "sampled_word_share", share);
        results_set_num(&run->results, "sampled_words", total);
    }
    word_set_free(&words);
    return 0;
}

int gpt_run_write_outputs(GptRun *run) {
    const GptFlags *f = &run->flags;
    const BrownCorpus *c = &run->corpus;
    const GptFigures *e = &run->figures;
    const TrainLog *log = &run->log;
    Results *res = &run->results;
    const BrownTokens kind = c->kind;
    char path[1200];
    if (make_dirs(f->shared.out) < 0 || path_format(path, sizeof path, "%s/model.ckpt", f->shared.out) < 0 ||
        checkpoint_save(path, run->config, &run->g->params) < 0)
        return -1;
    checkpoint_remove_so_far(path);   /* training's weights so far: replaced by these */
    printf("checkpoint: %s\n", path);
    results_set_config(res, run->config);
    results_set_num(res, "steps", log->steps_done);
    results_set_num(res, "tokens_seen", (double)log->count);
    results_set_num(res, "batch", f->shared.batch);
    results_set_num(res, "lr", f->shared.train.lr);
    results_set_num(res, "parameters", (double)run->g->params.size);
    results_set_num(res, "vocab_size", c->V);
    results_set_num(res, kind == BROWN_WORDS ? "test_perplexity" : "test_bpc", metric(kind, e->test_nll, e->test_tpc));
    results_set_num(res, kind == BROWN_WORDS ? "valid_perplexity" : "valid_bpc",
                    metric(kind, e->valid_nll, e->valid_tpc));
    results_set_num(res, "test_loss", e->test_nll);
    if (kind == BROWN_BPE) {   /* test_bpc = test_nats_per_token * test_tokens / test_chars / ln 2 */
        results_set_num(res, "test_nats_per_token", e->test_nll);
        results_set_num(res, "valid_nats_per_token", e->valid_nll);
        results_set_num(res, "test_tokens", e->test_n);
        results_set_num(res, "test_chars", (double)e->test_chars);
    }
    results_set_num(res, "eval_stride", f->eval_stride);
    results_set_num(res, "valid_tokens", e->valid_n);
    results_set_num(res, "valid_loss", e->valid_nll);
    results_set_num(res, "train_seconds", log->seconds);
    results_set_str(res, "backend", backend_name(backend_current()));
    results_set_str(res, "matmul_precision", matmul_precision_name(matmul_precision_current()));
    results_set_num(res, "threads", threads_current());
    if (f->eval_max_tokens > 0) results_set_num(res, "eval_max_tokens", f->eval_max_tokens);
    results_set_str(res, "checkpoint", path);
    if (log->n > 0) {
        const float *ys[2] = {log->train, log->valid};
        const char *names[2] = {"training loss (mean since the last point)", "validation loss"};
        if (path_format(path, sizeof path, "%s/loss", f->shared.out) < 0 ||
            plot_lines(path, "GPT on the Brown corpus: cross-entropy per token (nats)", "step", "loss", log->step,
                       ys, names, 2, log->n, 0) < 0)
            return -1;
        printf("loss curves: %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    }
    if (path_format(path, sizeof path, "%s/results.json", f->shared.out) < 0 || results_write(res, path) < 0) return -1;
    printf("results: %s\n", path);
    return 0;
}

int gpt_run_finish(GptRun *run, int rc) {
    if (rc < 0) fprintf(stderr, "06_gpt: error: %s\n", last_error());
    free(run->batches.tokens);
    free(run->batches.targets);
    train_log_free(&run->log);
    if (run->g) gpt_free(run->g);
    free(run->g);
    brown_free(&run->corpus);
    bpe_free(&run->saved_bpe);
    free(run->config);
    free(run->preset_argv);
    return output_exit_status("06_gpt", rc < 0 ? 1 : 0);
}
