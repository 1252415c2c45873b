/* main_gpt.c - chapter 06, part 2: a GPT trained on the Brown corpus, beside
 * the counting baselines of Bengio et al. 2003, with sampling and a KV cache.
 *
 *   ./build/06_gpt                                  characters, the quick default (make run-06)
 *   ./build/06_gpt --preset long                    words: the long run of the README
 *   ./build/06_gpt --tokens bpe                     byte-pair-encoded pieces of words, scored in bits per character
 *   ./build/06_gpt --load out/06_gpt/model.ckpt --prompt "The jury said" --temperature 0.8 --top-k 40
 *   ./build/06_gpt --load out/06_gpt/model.ckpt --prompt "The jury said" --plot
 *   ./build/06_gpt --load out/06_gpt/model.ckpt     test perplexity of a saved model
 *
 * The program is main() at the end, top to bottom: parse the flags; with
 * --load, use the saved model and stop; load the corpus and measure the
 * counting baselines; build the GPT; train it with the one training loop
 * (train/loop.h), a batch of random windows per step; measure the final
 * figures; print samples, and how many of their words occur in the
 * training text; write the checkpoint, results.json and the loss curves.
 * The model is gpt.c (chapter 06's blocks in one causal stack);
 * the data and the split are common/data/brown.c, the baselines
 * common/data/ngram.c. */
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
#include "train/loop.h"
#include "util/error.h"
#include "util/util.h"
#include "util/output.h"

#define PRESET_LONG "--tokens word --layers 4 --dim 192 --heads 4 --ff 768 --context 64 --batch 32 " \
                    "--steps 3000 --lr 1.5e-3 --warmup 200 --dropout 0.2 --attn-dropout 0.1 --weight-decay 0.1"

typedef struct {
    const char *tokens, *data, *out, *load, *prompt, *norm, *norm_type, *mlp, *pos, *backend, *preset;
    const char *matmul_precision; /* "float" (NULL: the same) or "bf16" (kernels/matmul.h) */
    int layers, dim, heads, ff, context, batch, seed, threads, eval_tokens, eval_max_tokens, top_k, max_new,
        no_kv_cache, plot, eval_stride, final_valid_tokens, force;
    int experts, moe_top_k;       /* --mlp moe: E experts, k per position */
    float dropout, attn_dropout, temperature, moe_aux, capacity;
    float max_memory;             /* MiB this run may use (0: what the machine and ulimit -v allow) */
    TrainOptions train;           /* --steps --lr --warmup --clip --weight-decay --eval-every --quiet */
} Flags;

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

/* ------------------------------------------------------ the steps of main */

static int load_corpus(const Flags *f, BrownCorpus *c) {
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

/* --max-new 0: 40 words, 300 characters, or 60 pieces (about 40 words) */
static int default_max_new(BrownTokens kind) {
    return kind == BROWN_WORDS ? 40 : kind == BROWN_BPE ? 60 : 300;
}

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
static char *config_from_flags(const Flags *f, const BrownCorpus *corpus, GptConfig *c) {
    const int V = corpus->V;
    static const char *const places[] = {"post", "pre"}, *const norms[] = {"layernorm", "rmsnorm", "none"},
                             *const mlps[] = {"gelu", "relu", "swiglu", "none"};
    const int moe = strcmp(f->mlp, "moe") == 0;   /* a mixture of GELU experts (moe.h) */
    *c = (GptConfig){.layers = f->layers,
                     .block = {.D = f->dim, .H = f->heads, .D_H = f->dim / f->heads, .F = f->ff,
                               .norm_place = (BlockNormPlace)name_to_index(f->norm, places, 2),
                               .norm = (BlockNorm)name_to_index(f->norm_type, norms, 3),
                               .mlp = moe ? BLOCK_MLP_GELU : (BlockMlp)name_to_index(f->mlp, mlps, 4),
                               .moe = {moe ? f->experts : 0, moe ? f->moe_top_k : 1, moe ? f->moe_aux : 0.0f,
                                       moe ? f->capacity : 0.0f, moe && f->moe_top_k > 1},
                               .dropout = f->dropout,
                               .attn_dropout = f->attn_dropout, .attention = MULTI_HEAD_PLAIN, .causal = 1},
                     .kv_cache = 1,   /* part 1's key, in the text as always (generation takes --no-kv-cache) */
                     .context = f->context,
                     .V = V};
    if (pos_type_from_name(f->pos, &c->pos) < 0) return NULL;
    char *merges = corpus->kind == BROWN_BPE ? bpe_to_text(&corpus->bpe, "gpt_") : NULL;
    const size_t cap = 4096 + (merges ? strlen(merges) : 0);
    char *text = xmalloc(cap);
    text[0] = '\0';
    if (config_append(text, cap, "model=gpt\n") < 0 || config_write(text, cap, GPT_CONFIG_FIELDS, GPT_CONFIG_N, c) < 0 ||
        config_append(text, cap, "tokens=%s\nvocab_crc=%08x\n%s", f->tokens, (unsigned)brown_vocab_crc(corpus),
                      merges ? merges : "") < 0) {
        free(text);
        text = NULL;
    }
    free(merges);
    return text;
}

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

/* What the training loop's two calls work on (train/loop.h's Trainer). */
typedef struct {
    Gpt *g;
    const BrownPart *train;   /* the windows are drawn from it */
    int *tokens, *targets;    /* [B, N] the batch: windows and the tokens that follow each position */
    int B;
    Rng rng;                  /* which windows */
    long moe_dropped, moe_pairs;   /* --mlp moe: (position, expert) pairs dropped, and chosen, over training */
    double moe_aux;           /* ... and the last step's aux loss, summed over the blocks */
    const int *valid;         /* the validation part: its first valid_n tokens are each check's */
    int valid_n;
    char checkpoint[1200];    /* --out/model.ckpt, and the config text it keeps */
    const char *config;
} GptBatches;

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
    b->moe_dropped += b->g->moe_dropped;
    b->moe_pairs += (long)b->B * N * b->g->cfg.block.moe.k * b->g->L;
    b->moe_aux = b->g->moe_aux;
    if (counted) gpt_backward(b->g, b->tokens, b->targets, b->B, (float)counted);
    *count = (long)b->B * N;
    return counted ? sum / counted : 0.0;
}

/* Each check's validation loss: windows moved by N (cheap; the final figures use --eval-stride). */
static double validate(void *self) {
    GptBatches *b = self;
    return part_nll(b->g, b->valid, 1, b->valid_n, b->g->N);
}

/* The weights so far, beside --out/model.ckpt, at each validation check. */
static int save(void *self) {
    const GptBatches *b = self;
    return checkpoint_save_so_far(b->checkpoint, b->config, &b->g->params);
}

/* The final figures: the validation and test parts (all of them; or the
 * first final_valid_tokens of the validation part; or the first
 * eval_max_tokens of both, for quick checks), windows moved by --eval-stride. */
typedef struct {
    int valid_n, test_n;
    double valid_nll, test_nll, seconds;   /* mean -ln p per predicted token (nats) */
    long valid_chars, test_chars;          /* the characters the predicted tokens spell (brown_chars) */
    double valid_tpc, test_tpc;            /* predicted tokens per such character (metric) */
} Figures;

static Figures evaluate(Gpt *g, const BrownCorpus *c, const Flags *f) {
    Figures e = {.valid_n = f->final_valid_tokens > 0 && f->final_valid_tokens < c->valid.n ? f->final_valid_tokens
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

/* --mlp moe: the parameters all experts hold beside the ones a token uses,
 * the balance and the drops of training; printed and into results.json. */
static void report_experts(const Gpt *g, const GptBatches *b, Results *res) {
    const BlockSpec *s = &g->cfg.block;
    if (s->moe.E == 0) return;
    const size_t per_expert = block_mlp_param_count(s);
    const size_t active = g->params.size - (size_t)g->L * (s->moe.E - s->moe.k) * per_expert;
    const double dropped = b->moe_pairs ? (double)b->moe_dropped / (double)b->moe_pairs : 0.0;
    /* the aux loss of the last training step's batch (as results.json's moe_aux_per_block), not of the
     * model's last forward pass, which was an evaluation batch */
    printf("mixture of experts: %d experts, %d per token: %zu parameters, %zu active per token; aux loss %.3f "
           "(1 is balanced) per block on the last training batch; %ld of %ld (position, expert) pairs dropped in "
           "training (%.2f%%)\n", s->moe.E, s->moe.k, g->params.size, active, b->moe_aux / g->L, b->moe_dropped,
           b->moe_pairs, 100.0 * dropped);
    results_set_num(res, "moe_experts", s->moe.E);
    results_set_num(res, "moe_top_k", s->moe.k);
    results_set_num(res, "active_parameters", (double)active);
    results_set_num(res, "moe_aux_per_block", b->moe_aux / g->L);
    results_set_num(res, "moe_dropped_share", dropped);
}

/* --mlp moe: which expert each token goes to. Over the first windows of
 * the validation part (up to 20,000 tokens), each block's share of the
 * (token, expert) pairs per expert -> OUT/moe_share.png (blocks x experts)
 * and results.json (moe_share_l<l>), and for each expert of each block the
 * 5 tokens (seen 50 times or more) it takes the largest part of
 * (moe_tokens_l<l>_e<e>), printed as a table. */
static int expert_usage(Gpt *g, const BrownCorpus *c, const Flags *f, Results *res) {
    const BlockSpec *s = &g->cfg.block;
    if (s->moe.E == 0) return 0;
    enum { TOP = 5, MIN_SEEN = 50 };
    const int L = g->L, E = s->moe.E, k = s->moe.k, N = g->N, V = c->V;
    const int n = c->valid.n < 20000 ? c->valid.n : 20000;
    float *share = xcalloc((size_t)L * E, sizeof(float));
    long *count = xcalloc((size_t)L * E * V, sizeof(long)), *seen = xcalloc((size_t)V, sizeof(long));
    for (int start = 0; start + N <= n; start += N) {
        const int *ids = c->valid.ids + start;
        gpt_forward(g, ids, NULL, 1, 0);
        for (int r = 0; r < N; r++) seen[ids[r]]++;
        for (int l = 0; l < L; l++)
            for (int i = 0; i < N * k; i++) {
                const int e = g->st.cache[l].moe.choice[i];
                share[l * E + e] += 1.0f;
                count[((size_t)l * E + e) * V + ids[i / k]]++;
            }
    }
    printf("\nthe tokens each expert takes the largest part of (of those seen %d times or more):\n", MIN_SEEN);
    for (int l = 0; l < L; l++) {
        float total = 0.0f;
        for (int e = 0; e < E; e++) total += share[l * E + e];
        char key[64], line[256];
        int at = 0;
        for (int e = 0; e < E; e++) {
            share[l * E + e] /= total > 0.0f ? total : 1.0f;
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%.3f", e ? " " : "", (double)share[l * E + e]);
            if (at >= (int)sizeof line) at = (int)sizeof line - 1;
        }
        snprintf(key, sizeof key, "moe_share_l%d", l);
        results_set_str(res, key, line);
        for (int e = 0; e < E; e++) {
            const long *ce = count + ((size_t)l * E + e) * V;
            int top[TOP], n_top = 0;
            for (int t = 0; t < V; t++) {   /* insertion into the best TOP by ce[t] / seen[t] */
                if (seen[t] < MIN_SEEN || ce[t] == 0) continue;
                int j = n_top < TOP ? n_top++ : TOP;
                while (j > 0 && (double)ce[t] * seen[top[j - 1]] > (double)ce[top[j - 1]] * seen[t]) {
                    if (j < TOP) top[j] = top[j - 1];
                    j--;
                }
                if (j < TOP) top[j] = t;
            }
            at = 0;
            for (int j = 0; j < n_top; j++) {
                const char *tok = brown_token(c, top[j]);
                at += snprintf(line + at, sizeof line - (size_t)at, "%s%s %.0f%%", j ? ", " : "",
                               strcmp(tok, " ") == 0 ? "(space)" : strcmp(tok, "\n") == 0 ? "(newline)" : tok,
                               100.0 * ce[top[j]] / seen[top[j]]);
                if (at >= (int)sizeof line) at = (int)sizeof line - 1;
            }
            printf("  block %d expert %d (%4.1f%% of the pairs): %s\n", l, e, 100.0 * share[l * E + e], line);
            snprintf(key, sizeof key, "moe_tokens_l%d_e%d", l, e);
            results_set_str(res, key, line);
        }
    }
    char stem[1100], x_text[BLOCK_MAX_EXPERTS][16], y_text[STACK_MAX_LAYERS][24];
    const char *xl[BLOCK_MAX_EXPERTS], *yl[STACK_MAX_LAYERS];
    for (int e = 0; e < E; e++) {
        snprintf(x_text[e], sizeof x_text[e], "%d", e);
        xl[e] = x_text[e];
    }
    for (int l = 0; l < L; l++) {
        snprintf(y_text[l], sizeof y_text[l], "%d", l);
        yl[l] = y_text[l];
    }
    /* A diverging colour scale from 0, white at the even share 1/E, so a
     * near-even split looks near-even (an automatic range would spread
     * 0.21-0.29 over the whole palette); up to 2/E, or the largest share. */
    float top = 2.0f / E;
    for (int i = 0; i < L * E; i++) top = share[i] > top ? share[i] : top;
    char cb_title[96];
    snprintf(cb_title, sizeof cb_title, "share (white: 1/E = %.3g, an even split)", 1.0 / E);
    int rc = path_format(stem, sizeof stem, "%s/moe_share", f->out);
    if (rc == 0)
        rc = plot_heatmap_diverging(stem, "share of the (token, expert) pairs each expert takes", share, L, E, xl,
                                    yl, "expert", "block", cb_title, 0.0f, 1.0f / E, top);
    if (rc == 0) printf("expert shares: %s.png\n", stem);
    free(share); free(count); free(seen);
    return rc;
}

static void print_figures(const Flags *f, const BrownCorpus *c, const Figures *e, double kn_test,
                          const TrainLog *log) {
    const BrownTokens kind = c->kind;
    printf("\n(windows of %d moved by %d: each token predicted from at least %d tokens before it)\n", f->context,
           f->eval_stride, f->context - f->eval_stride + 1);
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

/* The checkpoint, results.json and the loss curves, into --out. */
static int write_outputs(Gpt *g, const BrownCorpus *c, const Flags *f, const char *config, Results *res,
                         const Figures *e, const TrainLog *log) {
    const BrownTokens kind = c->kind;
    char path[1200];
    if (make_dirs(f->out) < 0 || path_format(path, sizeof path, "%s/model.ckpt", f->out) < 0 ||
        checkpoint_save(path, config, &g->params) < 0)
        return -1;
    checkpoint_remove_so_far(path);   /* training's weights so far: replaced by these */
    printf("checkpoint: %s\n", path);
    results_set_config(res, config);
    results_set_num(res, "steps", log->steps_done);
    results_set_num(res, "tokens_seen", (double)log->count);
    results_set_num(res, "batch", f->batch);
    results_set_num(res, "lr", f->train.lr);
    results_set_num(res, "parameters", (double)g->params.size);
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
        if (path_format(path, sizeof path, "%s/loss", f->out) < 0 ||
            plot_lines(path, "GPT on the Brown corpus: cross-entropy per token (nats)", "step", "loss", log->step,
                       ys, names, 2, log->n, 0) < 0)
            return -1;
        printf("loss curves: %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    }
    if (path_format(path, sizeof path, "%s/results.json", f->out) < 0 || results_write(res, path) < 0) return -1;
    printf("results: %s\n", path);
    return 0;
}

/* ------------------------------------------- are the sampled words words? */

/* The distinct words of the training text (character view): its characters
 * as one string, cut at the separators, and an open-addressing table of
 * pointers to the words (FNV-1a hash, at most half full). */
typedef struct {
    char *text;           /* the training characters, each separator made a NUL */
    const char **slots;   /* [mask + 1] a word, or NULL */
    size_t mask;
    int n;                /* distinct words */
} WordSet;

static uint64_t word_hash(const char *w) {
    uint64_t h = 1469598103934665603ull;
    for (; *w; w++) h = (h ^ (unsigned char)*w) * 1099511628211ull;
    return h;
}

/* The slot of w: where it is, or the empty slot where it would go. */
static size_t word_slot(const WordSet *s, const char *w) {
    size_t i = (size_t)word_hash(w) & s->mask;
    while (s->slots[i] && strcmp(s->slots[i], w) != 0) i = (i + 1) & s->mask;
    return i;
}

static void word_set_build(WordSet *s, const BrownCorpus *c) {
    const BrownPart *p = &c->train;
    s->text = xmalloc((size_t)p->n + 1);
    for (int i = 0; i < p->n; i++) {
        const char ch = brown_token(c, p->ids[i])[0];   /* one character per id (<unk>: '<', never a separator) */
        s->text[i] = isspace((unsigned char)ch) ? '\0' : ch;
    }
    s->text[p->n] = '\0';
    size_t cap = 1024;
    while (cap < 2 * (size_t)p->n_words + 2) cap *= 2;   /* distinct words <= words: at most half full */
    s->slots = xcalloc(cap, sizeof *s->slots);
    s->mask = cap - 1;
    s->n = 0;
    for (int i = 0; i < p->n;) {
        if (s->text[i] == '\0') { i++; continue; }
        const char *w = s->text + i;
        const size_t at = word_slot(s, w);
        if (!s->slots[at]) { s->slots[at] = w; s->n++; }
        i += (int)strlen(w);
    }
}

static void word_set_free(WordSet *s) {
    free(s->text);
    free(s->slots);
}

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
            *known += s->slots[word_slot(s, all + i)] != NULL;
        }
        i = end + 1;
    }
    free(all);
}

/* Samples from each prompt. With a word set (character models), also count
 * the sampled words and those of them that occur in the training text. */
static void print_samples(Gpt *g, const BrownCorpus *c, const Flags *f, const char *const *prompts,
                          int n_prompts, const WordSet *words, int *known, int *total) {
    const int cap = 4096;
    int *ids = xmalloc(sizeof(int) * cap), *out = xmalloc(sizeof(int) * (size_t)(f->max_new > 0 ? f->max_new : 1));
    Rng rng;
    rng_seed(&rng, (uint64_t)f->seed, 11);   /* sampling has its own stream: the same seed, the same text */
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
static int generate(Gpt *g, const BrownCorpus *c, const Flags *f) {
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
               f->no_kv_cache ? "no KV cache: the whole window for every token" : "with the KV cache");
    }
    if (rc == 0 && f->plot) {
        char dir[1100], stem[1200];
        if (results_eval_dir(dir, sizeof dir, f->out, "out/06_gpt", f->load) < 0 || make_dirs(dir) < 0 ||
            path_format(stem, sizeof stem, "%s/prompt_attention", dir) < 0 || plot_prompt(g, c, ids, n, stem) < 0)
            rc = -1;
    }
    free(ids);
    return rc;
}

/* The saved model's test figures, written apart from the training run's. */
static int measure_saved(Gpt *g, const BrownCorpus *c, const Flags *f, const char *config) {
    char dir[1100], path[1200];
    if (results_eval_dir(dir, sizeof dir, f->out, "out/06_gpt", f->load) < 0 || make_dirs(dir) < 0) return -1;
    const BrownTokens kind = c->kind;
    int *stream = joined_stream(c);
    /* as training measured it: windows moved by N/2 (words, BPE pieces) or N (characters) */
    const int half = g->N / 2 > 0 ? g->N / 2 : 1;
    const int stride = f->eval_stride > 0 ? f->eval_stride : kind != BROWN_CHARS ? half : g->N;
    const double test_nll = part_nll(g, stream, c->valid.n, c->valid.n + c->test.n, stride);
    free(stream);
    const double tpc = tokens_per_char(c, c->test.ids, c->test.n);
    printf("%s: test %s %.3f", f->load, metric_name(kind), metric(kind, test_nll, tpc));
    if (kind == BROWN_BPE)
        printf(" (%.3f nats per piece; %d pieces spelling %ld characters, the spaces and newlines after words "
               "included)", test_nll, c->test.n, brown_chars(c, c->test.ids, c->test.n));
    printf("\n");
    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", "06_gpt");
    results_set_config(&res, config);
    results_set_str(&res, "checkpoint", f->load);
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

/* Before gpt_create: the memory the model of cfg with room for --batch
 * windows asks for (training: with AdamW's moments), against what this
 * process may use (train/memory.h). Returns 0, or -1 with fail() naming the
 * total and its largest part. */
static int check_memory(const GptConfig *cfg, const Flags *f, int training, const char *subject) {
    MemoryPart parts[GPT_MEMORY_PARTS];
    const int n = gpt_memory_parts(cfg, f->batch, training, parts);
    if (n < 0) return -1;
    return memory_check(subject, parts, n, f->max_memory,
                        training ? "lower --batch, --context, --dim, --ff or --layers"
                                 : "lower --batch (its windows have the model's context)");
}

/* The model a checkpoint's config describes; a config the model refuses
 * (top-k above the experts, ...) or one too large for this machine is named
 * with the file. */
static int create_saved(Gpt *g, const GptConfig *cfg, const Flags *f) {
    char subject[1200];
    snprintf(subject, sizeof subject, "%s: its model (context=%d, dim=%d, layers=%d) with --batch %d", f->load,
             cfg->context, cfg->block.D, cfg->layers, f->batch);
    if (check_memory(cfg, f, 0, subject) < 0) return -1;
    if (gpt_create(g, cfg, f->batch, 1) == 0) return 0;
    return fail("%s: %s", f->load, last_error());
}

/* --load: the model its checkpoint describes, on the corpus it was trained
 * on; generate from --prompt, or (without) measure its test figures. */
static int use_saved_model(Flags *f) {
    char *config = NULL, tokens[16];
    GptConfig cfg = {0};
    if (checkpoint_read_config(f->load, &config) < 0) return -1;
    if (checkpoint_check_model(f->load, config, "gpt", "06_gpt") < 0 ||
        config_get(config, "tokens", tokens, sizeof tokens) < 0 ||
        config_read(config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg) < 0) {
        free(config);
        return -1;
    }
    if (strcmp(tokens, "word") != 0 && strcmp(tokens, "char") != 0 && strcmp(tokens, "bpe") != 0) {
        char quoted[96];
        fail("%s: tokens=%s in its config: expected char or word, or bpe", f->load,
             error_excerpt(tokens, quoted, sizeof quoted));
        free(config);
        return -1;
    }
    const BrownTokens kind = token_kind(tokens);
    if (f->max_new == 0) f->max_new = default_max_new(kind);   /* what a token is: known now */
    if (f->eval_stride > cfg.context) {
        fail("--eval-stride %d is longer than the model's context %d: windows would skip tokens", f->eval_stride,
             cfg.context);
        free(config);
        return -1;
    }
    /* BPE pieces: the checkpoint's merges, and as many learned again on the corpus to compare */
    Bpe saved = {0};
    BrownConfig corpus_cfg;
    brown_defaults(&corpus_cfg, kind);
    if (f->data && f->data[0]) corpus_cfg.path = f->data;
    if (kind == BROWN_BPE) {
        if (read_saved_bpe(f->load, config, &saved) < 0) {
            free(config);
            return -1;
        }
        corpus_cfg.bpe_merges = saved.n_merges;
    }
    BrownCorpus c;
    if (brown_load_config(&c, &corpus_cfg) < 0) {
        bpe_free(&saved);
        free(config);
        return -1;
    }
    const char *corpus_path = f->data ? f->data : BROWN_DEFAULT_PATH;
    int rc = -1;
    Gpt *g = xcalloc(1, sizeof *g);
    if (kind == BROWN_BPE && check_bpe(f->load, &saved, &c, corpus_path) < 0) {
        /* (said: other merges) */
    } else if (c.V != cfg.V)
        fail("%s: the model has a vocabulary of %d tokens, but %s gives %d: not the corpus it was trained on",
             f->load, cfg.V, corpus_path, c.V);
    else if (check_vocabulary(f->load, config, &c, corpus_path) == 0 &&
             create_saved(g, &cfg, f) == 0 && checkpoint_load(f->load, &g->params) == 0)
        rc = f->prompt ? generate(g, &c, f) : measure_saved(g, &c, f, config);
    gpt_free(g);
    free(g);
    brown_free(&c);
    bpe_free(&saved);
    free(config);
    return rc;
}

/* --------------------------------------------------------------- flags */

/* Parse argv into f (which holds the defaults). Returns 0 to run, 1 when
 * --help was printed, -1 with fail(). */
static int parse_flags(int argc, char **argv, Flags *f) {
    const ArgSpec specs[] = {
        {"tokens", ARG_STRING, &f->tokens, "what a token is (bpe: a piece of a word)", 0, 0, "char,word,bpe", ARG_DATA},
        {"data", ARG_STRING, &f->data, "the Brown corpus file (default data/brown.txt.gz)", 0, 0, NULL, ARG_DATA},
        {"layers", ARG_INT, &f->layers, "blocks L", 1, STACK_MAX_LAYERS, NULL, ARG_MODEL},
        {"dim", ARG_INT, &f->dim, "model width D (a multiple of --heads)", 1, 4096, NULL, ARG_MODEL},
        {"heads", ARG_INT, &f->heads, "attention heads H", 1, 256, NULL, ARG_MODEL},
        {"ff", ARG_INT, &f->ff, "hidden width F of the MLP", 1, 65536, NULL, ARG_MODEL},
        {"context", ARG_INT, &f->context, "positions per window N", 2, 4096, NULL, ARG_MODEL},
        {"norm", ARG_STRING, &f->norm, "where the norms sit", 0, 0, "post,pre", ARG_MODEL},
        {"norm-type", ARG_STRING, &f->norm_type, "which norm", 0, 0, "layernorm,rmsnorm,none", ARG_MODEL},
        {"mlp", ARG_STRING, &f->mlp, "the MLP (moe: GELU experts)", 0, 0, "gelu,relu,swiglu,none,moe", ARG_MODEL},
        {"experts", ARG_INT, &f->experts, "--mlp moe: experts E, each an MLP of width F", 1, BLOCK_MAX_EXPERTS, NULL, ARG_MODEL},
        {"moe-top-k", ARG_INT, &f->moe_top_k, "--mlp moe: experts per token k (k > 1: weights renormalised)", 1, BLOCK_MAX_EXPERTS, NULL, ARG_MODEL},
        {"moe-aux", ARG_FLOAT, &f->moe_aux, "--mlp moe: coefficient of the load-balancing loss", 0, 100, NULL, ARG_TRAINING},
        {"capacity", ARG_FLOAT, &f->capacity, "--mlp moe: capacity factor in training (0: no limit)", 0, 1000, NULL, ARG_TRAINING},
        {"pos", ARG_STRING, &f->pos, "positions", 0, 0, "learned,sinusoidal,rope", ARG_MODEL},
        {"dropout", ARG_FLOAT, &f->dropout, "dropout on embeddings and sublayer outputs (training only)", 0, 0.95, NULL, ARG_TRAINING},
        {"attn-dropout", ARG_FLOAT, &f->attn_dropout, "dropout on the attention weights (training only)", 0, 0.95, NULL, ARG_TRAINING},
        {"steps", ARG_INT, &f->train.steps, "training steps (batches)", 0, 10000000, NULL, ARG_TRAINING},
        {"batch", ARG_INT, &f->batch, "windows per batch", 1, 4096, NULL, ARG_TRAINING},
        {"lr", ARG_FLOAT, &f->train.lr, "peak learning rate (AdamW)", 1e-6, 1, NULL, ARG_TRAINING},
        {"warmup", ARG_INT, &f->train.warmup, "learning-rate warm-up steps (then cosine decay to lr/10)", 0, 1000000, NULL, ARG_TRAINING},
        {"clip", ARG_FLOAT, &f->train.clip, "clip the global gradient norm to this (0: off)", 0, 1e6, NULL, ARG_TRAINING},
        {"weight-decay", ARG_FLOAT, &f->train.weight_decay, "AdamW decoupled weight decay", 0, 1, NULL, ARG_TRAINING},
        {"seed", ARG_INT, &f->seed, "random seed (model, batches, sampling)", 0, 2147483647, NULL, ARG_TRAINING},
        {"threads", ARG_INT, &f->threads, "threads (0 = OMP_NUM_THREADS or all cores)", 0, 256, NULL, ARG_SHARED},
        {"max-memory", ARG_FLOAT, &f->max_memory, "MiB the model may take, checked first (0: the machine's)", 0, 1e9, NULL, ARG_SHARED},
        {"backend", ARG_STRING, &f->backend, "matmul backend ($ATTN_BACKEND, else auto)", 0, 0, BACKEND_CHOICES, ARG_SHARED},
        {"matmul-precision", ARG_STRING, &f->matmul_precision, MATMUL_PRECISION_HELP, 0, 0, "float,bf16", ARG_SHARED},
        {"eval-every", ARG_INT, &f->train.eval_every, "steps between validation checks", 0, 1000000, NULL, ARG_TRAINING},
        {"eval-tokens", ARG_INT, &f->eval_tokens, "validation tokens of each check", 2, 100000000, NULL, ARG_TRAINING},
        {"eval-stride", ARG_INT, &f->eval_stride, "final figures: step between windows (0: N chars, else N/2)", 0, 4096, NULL, ARG_OUTPUT},
        {"final-valid-tokens", ARG_INT, &f->final_valid_tokens, "final validation tokens (0: all words, else 100000)", 0, 100000000, NULL, ARG_OUTPUT},
        {"eval-max-tokens", ARG_INT, &f->eval_max_tokens, "final figures on the first N valid/test tokens (0: all)", 0, 100000000, NULL, ARG_OUTPUT},
        {"out", ARG_STRING, &f->out, "output directory (default out/06_gpt; --load: eval_* in it)", 0, 0, NULL, ARG_OUTPUT},
        {"force", ARG_BOOL, &f->force, "train over the weights of a stopped run in --out (its *_so_far.ckpt)", 0, 0, NULL, ARG_OUTPUT},
        {"load", ARG_STRING, &f->load, "a saved model: generate from --prompt, or (without) its test figures", 0, 0, NULL, ARG_OUTPUT},
        {"prompt", ARG_STRING, &f->prompt, "text to continue (words, bpe: punctuation apart: \"The jury said .\")", 0, 0, NULL, ARG_OUTPUT},
        {"temperature", ARG_FLOAT, &f->temperature, "sampling temperature (0 = always the most likely)", 0, 100, NULL, ARG_OUTPUT},
        {"top-k", ARG_INT, &f->top_k, "sample among the k most likely tokens (0 = all)", 0, 1000000, NULL, ARG_OUTPUT},
        {"max-new", ARG_INT, &f->max_new, "tokens to generate (0 = 40 words, 300 characters, 60 pieces)", 0, 100000, NULL, ARG_OUTPUT},
        {"no-kv-cache", ARG_BOOL, &f->no_kv_cache, "generate by running the whole window for every token (slower; same tokens)", 0, 0, NULL, ARG_OUTPUT},
        {"plot", ARG_BOOL, &f->plot, "with --prompt: draw each layer's and head's attention", 0, 0, NULL, ARG_OUTPUT},
        {"quiet", ARG_BOOL, &f->train.quiet, "no progress line", 0, 0, NULL, ARG_SHARED},
        {"preset", ARG_STRING, &f->preset, "long: the README's word-level run", 0, 0, "none,long", ARG_TRAINING},
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    int rc = args_parse(argc, argv, specs, n_specs);
    static char **preset_argv = NULL;   /* (the strings f points into; kept to the end of the program) */
    if (rc == 0 && strcmp(f->preset, "long") == 0)
        rc = args_parse_with_preset(argc, argv, PRESET_LONG, specs, n_specs, &preset_argv);
    if (rc == 1) {
        args_print_help(argv[0],
                        "Chapter 06, part 2: a GPT on the Brown corpus beside unigram and Kneser-Ney trigram models; "
                        "sampling with a KV cache.",
                        specs, n_specs,
                        "./build/06_gpt --tokens bpe\n"
                        "./build/06_gpt --tokens word --preset long\n"
                        "./build/06_gpt --load out/06_gpt/model.ckpt --prompt \"The jury said\" --temperature 0.8\n"
                        "./build/06_gpt --load out/06_gpt/model.ckpt --prompt \"The jury said\" --plot");
        return 1;
    }
    if (rc == 0 && f->load)
        rc = args_refuse_with_load(argc, argv, specs, n_specs,
                                   "load,data,prompt,temperature,top-k,max-new,no-kv-cache,plot,out,seed,threads,max-memory,"
                                   "backend,matmul-precision,batch,eval-stride");
    if (rc < 0) return -1;
    const char *const moe_flags[] = {"experts", "moe-top-k", "moe-aux", "capacity"};
    for (int i = 0; i < 4 && strcmp(f->mlp, "moe") != 0; i++)   /* the MLP is dense: they would do nothing */
        if (args_given(argc, argv, moe_flags[i]))
            return fail("--%s sets the mixture of experts, but the MLP is --mlp %s: add --mlp moe, or leave "
                        "--%s out", moe_flags[i], f->mlp, moe_flags[i]);
    if (strcmp(f->mlp, "moe") == 0 && f->moe_top_k > f->experts)
        return fail("--moe-top-k %d: expected at most --experts (%d): each token picks k of the E experts",
                    f->moe_top_k, f->experts);
    if ((f->prompt || f->plot) && !f->load)
        return fail("--prompt and --plot act on a saved model: add --load out/06_gpt/model.ckpt");
    if (f->plot && !f->prompt)
        return fail("--plot draws the attention over the text of --prompt: add --prompt TEXT (without it, --load "
                    "measures the model's test figures and draws nothing)");
    /* no --backend: $ATTN_BACKEND, else auto; a bad value is an error here, as in every program */
    if (backend_select(f->backend) < 0 || matmul_precision_select(f->matmul_precision) < 0 ||
        gnuplot_timeout_check() < 0)
        return -1;
    if (f->final_valid_tokens == 1 || f->eval_max_tokens == 1)
        return fail("--%s 1: expected 0 (all) or at least 2 tokens (the first one only gives context)",
                    f->final_valid_tokens == 1 ? "final-valid-tokens" : "eval-max-tokens");
    if (f->load) return 0;   /* the rest is the training run's (a saved model's window is in its checkpoint) */
    if (f->eval_stride > f->context)
        return fail("--eval-stride %d is longer than --context %d: windows would skip tokens", f->eval_stride,
                    f->context);
    if (f->dim % f->heads != 0)
        return fail("--dim %d is not a multiple of --heads %d: each head gets dim / heads numbers", f->dim,
                    f->heads);
    if (!f->out) f->out = "out/06_gpt";   /* (--load without --out picks its own: results_eval_dir) */
    if (checkpoint_check_stopped_run(f->out, f->force) < 0) return -1;   /* a stopped run's weights so far */
    const BrownTokens kind = token_kind(f->tokens);
    if (f->eval_stride == 0)
        f->eval_stride = kind != BROWN_CHARS ? (f->context / 2 > 0 ? f->context / 2 : 1) : f->context;
    if (f->final_valid_tokens == 0 && kind != BROWN_WORDS) f->final_valid_tokens = 100000;
    if (f->max_new == 0) f->max_new = default_max_new(kind);
    return 0;
}

static int finish(int rc) {
    if (rc < 0) fprintf(stderr, "06_gpt: error: %s\n", last_error());
    return output_exit_status("06_gpt", rc < 0 ? 1 : 0);
}

/* ------------------------------------------------------------- the program */

int main(int argc, char **argv) {
    output_guard();
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* 1. the flags: the model's and the run's defaults, then the loop's
     * (train/loop.h) where the GPT's differ */
    Flags f = {.tokens = "char", .norm = "pre", .norm_type = "layernorm", .mlp = "gelu", .pos = "learned",
               .preset = "none", .layers = 4, .dim = 128, .heads = 4, .ff = 512, .context = 64, .batch = 16,
               .seed = 42, .eval_tokens = 20000, .top_k = 40, .temperature = 0.8f, .experts = 4, .moe_top_k = 1,
               .moe_aux = 0.01f, .train = TRAIN_DEFAULTS};
    /* 2,000 steps of 16 windows of 64: about two minutes on two cores. Steps
     * matter more than window length here: 600 steps of windows of 128 (the
     * same time) left the model behind the trigram, barely using its context */
    f.train.steps = 2000;
    f.train.lr = 2e-3f;
    f.train.warmup = 100;
    f.train.lr_floor = 0.1f;   /* the cosine decay ends at lr / 10 (the loop's default: lr / 20) */
    f.train.clip = 1.0f;
    f.train.weight_decay = 0.1f;
    f.train.eval_every = 200;
    f.train.unit = "tokens";
    int rc = parse_flags(argc, argv, &f);
    if (rc != 0) return finish(rc > 0 ? 0 : -1);
    if (f.threads > 0) threads_set(f.threads);

    /* 2. a saved model: generate from --prompt, or measure its test figures */
    if (f.load) return finish(use_saved_model(&f));

    /* 3. the corpus and the counting baselines on its split; a --out that
     * cannot be written is said now, not after the training (util.h) */
    BrownCorpus c = {0};
    Gpt *g = xcalloc(1, sizeof *g);
    GptBatches batches = {0};
    TrainLog log = {0};
    WordSet words = {0};
    Results res;
    GptConfig cfg;
    char *config = NULL;
    double kn_test = 0.0;
    rc = -1;
    results_init(&res);
    results_set_str(&res, "chapter", "06_gpt");
    results_set_str(&res, "task", token_kind(f.tokens) == BROWN_WORDS ? "brown_words"
                                  : token_kind(f.tokens) == BROWN_BPE ? "brown_bpe" : "brown_chars");
    if (out_dir_prepare("--out", f.out) < 0 || load_corpus(&f, &c) < 0 || baselines(&c, &res, &kn_test) < 0)
        goto done;

    /* 4. the model */
    if (c.train.n < f.context + 2) {
        fail("the training part has %d tokens: too few for --context %d", c.train.n, f.context);
        goto done;
    }
    char subject[160];
    snprintf(subject, sizeof subject, "the GPT of --layers %d --dim %d --ff %d --context %d --batch %d", f.layers,
             f.dim, f.ff, f.context, f.batch);
    if ((config = config_from_flags(&f, &c, &cfg)) == NULL || check_memory(&cfg, &f, 1, subject) < 0 ||
        gpt_create(g, &cfg, f.batch, (uint64_t)f.seed) < 0)
        goto done;
    results_note_other_run(f.out, config);   /* another model's files there? say so once */
    printf("GPT: %d blocks, D = %d, %d heads, F = %d, context %d, %s-%s, %s, %s positions, dropout %g/%g: "
           "%zu parameters (%zu in the tied embedding)\n",
           f.layers, f.dim, f.heads, f.ff, f.context, f.norm, f.norm_type, f.mlp, f.pos, (double)f.dropout,
           (double)f.attn_dropout, g->params.size, (size_t)c.V * f.dim);

    /* 5. training: the one loop, a batch of B random windows per step and a
     * validation check every --eval-every steps */
    batches = (GptBatches){.g = g, .train = &c.train, .B = f.batch,
                           .tokens = xmalloc(sizeof(int) * (size_t)f.batch * f.context),
                           .targets = xmalloc(sizeof(int) * (size_t)f.batch * f.context),
                           .valid = c.valid.ids, .config = config,
                           .valid_n = f.eval_tokens < c.valid.n ? f.eval_tokens : c.valid.n};
    rng_seed(&batches.rng, (uint64_t)f.seed, 1);
    if (path_format(batches.checkpoint, sizeof batches.checkpoint, "%s/model.ckpt", f.out) < 0) goto done;
    const Trainer trainer = {.self = &batches, .params = &g->params, .gradient = gradient, .validate = validate,
                             .save = save};
    if (train_loop(&trainer, &f.train, &log) < 0) goto done;

    /* 6. the final figures, beside the baselines */
    const Figures figures = evaluate(g, &c, &f);
    print_figures(&f, &c, &figures, kn_test, &log);
    report_experts(g, &batches, &res);
    if (expert_usage(g, &c, &f, &res) < 0) goto done;

    /* 7. samples; from a character model, the share of its sampled words
     * that occur in the training text (a word model samples only words) */
    printf("\nsamples (temperature %g, top-k %d, seed %d):\n", (double)f.temperature, f.top_k, f.seed);
    if (c.kind == BROWN_CHARS) word_set_build(&words, &c);
    int known = 0, total = 0;
    print_samples(g, &c, &f, SAMPLE_PROMPTS, 3, c.kind == BROWN_CHARS ? &words : NULL, &known, &total);
    if (c.kind == BROWN_CHARS) {   /* (no words at all: a share of 0) */
        const double share = total > 0 ? (double)known / total : 0.0;
        printf("%d of the %d sampled words (with a letter, not cut off) occur in the training text: %.0f%%\n", known,
               total, 100.0 * share);
        results_set_num(&res, "sampled_word_share", share);
        results_set_num(&res, "sampled_words", total);
    }

    /* 8. the checkpoint, results.json, the loss curves */
    if (write_outputs(g, &c, &f, config, &res, &figures, &log) < 0) goto done;
    rc = 0;
done:
    free(batches.tokens);
    free(batches.targets);
    train_log_free(&log);
    word_set_free(&words);
    gpt_free(g);
    free(g);
    brown_free(&c);
    free(config);
    return finish(rc);
}
