/* gpt.c - chapter 06, part 2: the decoder-only transformer: forward, hand-
 * written backward, perplexity over a stream, and generation with a KV
 * cache (see gpt.h).
 *
 * Reading order: gpt_create(), forward_n() (embeddings, the stack, the tied
 * output layer, the loss), gpt_backward() (the same in reverse),
 * gpt_stream_nll() (perplexity), gpt_generate() (sampling). */
#include "06_transformer/gpt.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/self_attention.h"
#include "kernels/matmul.h"
#include "nn/layers.h"
#include "nn/transformer_layers.h"
#include "util/error.h"
#include "util/util.h"

/* ================================================================= model */

/* A sparse pattern runs on the fused kernel, which never forms the weights
 * attention dropout would drop: 0, or -1 with fail() naming the flags. */
static int sparse_dropout_check(const GptConfig *cfg) {
    if (cfg->sparse.P > 0 && cfg->block.attn_dropout > 0.0f)
        return fail("attn_dropout=%g with a sparse pattern: its fused kernel never forms the weights dropout "
                    "would drop (--attn-dropout 0 with --sparse)", (double)cfg->block.attn_dropout);
    return 0;
}

int gpt_norm_check(BlockNorm norm) {
    if (norm == BLOCK_BATCHNORM)
        return fail("--norm-type batchnorm: the GPT cannot use batch norm: its statistics are taken over every "
                    "position of the batch, so in training position i's output would depend on the later "
                    "positions j > i that a causal model must not see (use layernorm or rmsnorm)");
    return 0;
}

int gpt_declare(Gpt *g, const GptConfig *cfg) {
    memset(g, 0, sizeof *g);
    if (gpt_norm_check(cfg->block.norm) < 0) return -1;
    if (cfg->context < 2) return fail("context=%d: expected at least 2 positions", cfg->context);
    if (cfg->V < 2) return fail("vocab=%d: expected at least 2 tokens", cfg->V);
    if (cfg->pos != POSITIONS_LEARNED && cfg->pos != POSITIONS_SINUSOIDAL && cfg->pos != POSITIONS_ROPE)
        return fail("pos=%s: the GPT needs positions (sinusoidal, learned or rope)", positions_name(cfg->pos));
    BlockSpec s = cfg->block;
    if (s.D_H == 0) {   /* from dim and heads, as the checkpoint text gives them */
        if (s.H < 1 || s.D % s.H != 0)
            return fail("dim=%d is not a multiple of heads=%d: each head gets dim / heads", s.D, s.H);
        s.D_H = s.D / s.H;
    }
    g->cfg = *cfg;
    g->cfg.block.D_H = s.D_H;
    s.causal = 1;   /* each position sees itself and the ones before it */
    s.cross = 0;    /* no encoder, so no cross-attention */
    s.rope = cfg->pos == POSITIONS_ROPE;   /* rotary positions: inside every block's attention, nothing added to X_0 */
    if (sparse_dropout_check(cfg) < 0) return -1;
    if (cfg->sparse.P > 0) {   /* part 5: each block attends on the pattern, with the fused kernel (no maps A) */
        const SparsePattern p = {cfg->sparse.P, cfg->sparse.window, cfg->sparse.global, cfg->sparse.random, 1};
        if (sparse_layout_create(&g->sparse_layout, &p, cfg->context, 1) < 0) return -1;
        g->sparse_options = (SparseAttention){&g->sparse_layout, s.rope};   /* it rotates, not the block */
        g->sparse_attention = sparse_attention_hook(&g->sparse_options);
        s.self_attention = &g->sparse_attention;
        s.attention = MULTI_HEAD_FUSED;
        s.rope = 0;
    }
    if (block_spec_check(&s) < 0) {
        if (cfg->sparse.P > 0) sparse_layout_free(&g->sparse_layout);
        return -1;
    }
    const int D = s.D, N = cfg->context, V = cfg->V;
    g->L = cfg->layers;
    g->D = D;
    g->N = N;
    g->V = V;

    Params *p = &g->params;
    params_init(p);
    g->tok_emb = params_add(p, "tok_emb", 2, (int[]){V, D});
    if (cfg->pos == POSITIONS_LEARNED) g->pos_emb = params_add(p, "pos_emb", 2, (int[]){N, D});
    if (stack_declare(&g->st, &s, cfg->layers, p, "blk") < 0) return -1;
    if (stack_has_final_norm(&s)) {
        g->st.norm_g = params_add(p, "norm.gamma", 1, (int[]){D});
        if (block_norm_has_beta(&s)) g->st.norm_b = params_add(p, "norm.beta", 1, (int[]){D});
    }
    return 0;
}

int gpt_alloc(Gpt *g, int max_B, uint64_t seed) {
    const GptConfig *cfg = &g->cfg;
    const BlockSpec s = g->st.spec;
    const int D = g->D, N = g->N, V = g->V;
    Params *p = &g->params;
    g->max_B = max_B;
    if (params_alloc(p) < 0) return -1;

    /* initial values: embeddings and learned positions N(0, 0.02^2) as in
     * GPT-2 (small logits at the start: every token about equally likely),
     * the blocks as chapter 06 part 1 */
    Rng rng;
    rng_seed(&rng, seed, 1);
    init_normal(params_data(p, g->tok_emb), (size_t)V * D, 0.02f, &rng);
    if (cfg->pos == POSITIONS_LEARNED) {
        init_normal(params_data(p, g->pos_emb), (size_t)N * D, 0.02f, &rng);
    } else if (cfg->pos == POSITIONS_SINUSOIDAL) {
        g->P = xcalloc((size_t)N * D, sizeof(float));
        positional_encoding_sinusoidal(g->P, N, D);   /* chapter 04's */
    }
    stack_init_weights(&g->st, &rng);
    rng_seed(&g->dropout_rng, seed, 7);

    stack_alloc(&g->st, max_B, N, 0);
    const size_t R = (size_t)max_B * N;
    g->emb_mask = xcalloc(R * D, sizeof(float));
    g->logits = xcalloc(R * V, sizeof(float));
    g->probs = xcalloc(R * V, sizeof(float));
    g->dtop = xcalloc(R * D, sizeof(float));
    const size_t HD = (size_t)s.H * s.D_H;
    for (int l = 0; l < g->L; l++) {
        g->kv_K[l] = xcalloc((size_t)N * HD, sizeof(float));
        g->kv_V[l] = xcalloc((size_t)N * HD, sizeof(float));
    }
    g->step_x = xcalloc((size_t)D, sizeof(float));
    g->step_y = xcalloc((size_t)D, sizeof(float));
    g->step_top = xcalloc((size_t)D, sizeof(float));
    g->step_mean = xcalloc(1, sizeof(float));
    g->step_rstd = xcalloc(1, sizeof(float));
    g->step_work = xcalloc(block_step_work_floats(&s, 1, N, 0), sizeof(float));
    g->step_logits = xcalloc((size_t)V, sizeof(float));
    return 0;
}

int gpt_create(Gpt *g, const GptConfig *cfg, int max_B, uint64_t seed) {
    if (gpt_declare(g, cfg) < 0) return -1;
    return gpt_alloc(g, max_B, seed);
}

int gpt_memory_parts(const GptConfig *cfg, int max_B, int training, MemoryPart *parts) {
    BlockSpec s = cfg->block;   /* the spec as gpt_create makes it */
    if (s.D_H == 0) {
        if (s.H < 1 || s.D % s.H != 0)
            return fail("dim=%d is not a multiple of heads=%d: each head gets dim / heads", s.D, s.H);
        s.D_H = s.D / s.H;
    }
    s.causal = 1;
    s.cross = 0;
    s.rope = cfg->pos == POSITIONS_ROPE;
    if (sparse_dropout_check(cfg) < 0) return -1;
    SparseLayout layout;   /* a sparse pattern's, for its sizes */
    SparseAttention options;
    BlockSelfAttention sparse;
    if (cfg->sparse.P > 0) {
        const SparsePattern p = {cfg->sparse.P, cfg->sparse.window, cfg->sparse.global, cfg->sparse.random, 1};
        if (sparse_layout_create(&layout, &p, cfg->context, 1) < 0) return -1;
        options = (SparseAttention){&layout, s.rope};
        sparse = sparse_attention_hook(&options);
        s.self_attention = &sparse;
        s.attention = MULTI_HEAD_FUSED;
        s.rope = 0;
    }
    if (block_spec_check(&s) < 0) {
        if (cfg->sparse.P > 0) sparse_layout_free(&layout);
        return -1;
    }
    const double D = s.D, N = cfg->context, V = cfg->V, L = cfg->layers, B = max_B, R = B * N, RD = R * D;
    const double P = V * D + (cfg->pos == POSITIONS_LEARNED ? N * D : 0.0) + L * (double)block_param_count(&s) +
                     (stack_has_final_norm(&s) ? (s.norm == BLOCK_LAYERNORM ? 2.0 : 1.0) * D : 0.0);
    const MultiHeadSpec as = block_attention_spec(&s);
    const double maps = L * (double)multi_head_attention_floats(&as, max_B, cfg->context) *
                        (s.attn_dropout > 0.0f ? 2.0 : 1.0);   /* A, and its dropout mask */
    const double caches = L * (double)block_cache_floats(&s, max_B, cfg->context, 0);
    const double activations = caches - maps + (L + 6.0) * RD + 2.0 * R +   /* X_0..X_L, out, grads, masks */
                               (double)block_scratch_floats(&s, max_B, cfg->context, 0);
    parts[0] = (MemoryPart){training ? "the parameters with their gradients and AdamW's two moments, 4 x P floats"
                                     : "the parameters and their gradients, 2 x P floats",
                            4.0 * (training ? 4.0 : 2.0) * P};
    parts[1] = (MemoryPart){"the attention maps, L x B x H x N x N floats", 4.0 * maps};
    parts[2] = (MemoryPart){"the other activations and their gradients, about (L + 6) x B x N x D floats", 4.0 * activations};
    parts[3] = (MemoryPart){"the logits and probabilities, 2 x B x N x V floats", 4.0 * 2.0 * R * V};
    parts[4] = (MemoryPart){"the KV cache, 2 x L x N x D floats", 4.0 * 2.0 * L * N * s.H * s.D_H};
    if (cfg->sparse.P > 0) sparse_layout_free(&layout);
    return GPT_MEMORY_PARTS;
}

void gpt_free(Gpt *g) {
    stack_free(&g->st);
    for (int l = 0; l < g->L; l++) {
        free(g->kv_K[l]);
        free(g->kv_V[l]);
    }
    free(g->P); free(g->emb_mask); free(g->logits); free(g->probs); free(g->dtop);
    free(g->step_x); free(g->step_y); free(g->step_top); free(g->step_mean); free(g->step_rstd);
    free(g->step_work); free(g->step_logits);
    if (g->cfg.sparse.P > 0) sparse_layout_free(&g->sparse_layout);
    params_free(&g->params);
}

/* P [N, D], the table added to X_0: sinusoidal, learned, or NULL (rope) */
static const float *positions(Gpt *g) {
    if (g->cfg.pos == POSITIONS_ROPE) return NULL;
    return g->P ? g->P : params_data(&g->params, g->pos_emb);
}

/* ======================================================= forward, backward */

/* tokens [B, n] (n <= N) -> Z [B n, D] (g->st.out) */
static const float *features_n(Gpt *g, const int *tokens, int B, int n, int train) {
    const int D = g->D, R = B * n;
    const float *E = params_data(&g->params, g->tok_emb);
    g->B = B;
    /* X_0 = E[x_t] + P[t] (rope: E[x_t]), then dropout */
    float *X0 = g->st.x[0];
    embedding_forward(X0, tokens, E, R, D);
    if (positions(g)) add_positional_encoding(X0, positions(g), B, n, D);   /* chapter 04's */
    dropout_forward(X0, g->emb_mask, X0, R * D, g->st.spec.dropout, train, &g->dropout_rng);
    /* the causal stack: Z = Norm(X_L) */
    stack_forward(&g->st, NULL, NULL, B, n, train, &g->dropout_rng);
    g->moe_aux = 0.0;   /* a mixture of experts: its balance and its drops, over the blocks */
    g->moe_dropped = 0;
    if (g->st.spec.moe.E > 0)
        for (int l = 0; l < g->L; l++) {
            g->moe_aux += g->st.cache[l].moe.stats[0];
            g->moe_dropped += (long)g->st.cache[l].moe.stats[1];
        }
    return g->st.out;
}

const float *gpt_features(Gpt *g, const int *tokens, int B, int train) {
    return features_n(g, tokens, B, g->N, train);
}

/* tokens [B, n] (n <= N) -> logits [B n, V]; with targets, the summed loss */
static double forward_n(Gpt *g, const int *tokens, const int *targets, int B, int n, int train) {
    const int D = g->D, V = g->V, R = B * n;
    const float *E = params_data(&g->params, g->tok_emb);
    features_n(g, tokens, B, n, train);
    /* logits [R, V] = Z [R, D] @ E^T [D, V]: the tied output layer */
    sgemm(0, 1, R, V, D, 1.0f, g->st.out, D, E, D, 0.0f, g->logits, V);
    g->last_counted = 0;
    if (!targets) return 0.0;
    return cross_entropy_forward(g->probs, g->logits, targets, R, V, -1, &g->last_counted);
}

double gpt_forward(Gpt *g, const int *tokens, const int *targets, int B, int train) {
    return forward_n(g, tokens, targets, B, g->N, train);
}

void gpt_backward(Gpt *g, const int *tokens, const int *targets, int B, float scale_by) {
    const int D = g->D, V = g->V, N = g->N, R = B * N;
    const float *E = params_data(&g->params, g->tok_emb);
    float *dE = params_grad(&g->params, g->tok_emb);
    /* d logits = (probs - onehot) / scale_by, into the logits' buffer */
    float *dlogits = g->logits;
    memset(dlogits, 0, sizeof(float) * (size_t)R * V);
    cross_entropy_backward(dlogits, g->probs, targets, R, V, -1, 1.0f / scale_by);
    /* logits = Z E^T:  dZ = dlogits E,  dE += dlogits^T Z */
    sgemm(0, 0, R, D, V, 1.0f, dlogits, V, E, D, 0.0f, g->dtop, D);
    sgemm(1, 0, V, D, R, 1.0f, dlogits, V, g->st.out, D, 1.0f, dE, D);
    gpt_features_backward(g, tokens, B, g->dtop);
}

void gpt_features_backward(Gpt *g, const int *tokens, int B, const float *dZ) {
    const int D = g->D, N = g->N, R = B * N;
    float *dE = params_grad(&g->params, g->tok_emb);
    /* the stack, then X_0 = dropout(E[x] + P) */
    float *dX0 = stack_backward(&g->st, dZ, NULL, NULL, NULL, B, N);
    for (size_t i = 0; i < (size_t)R * D; i++) dX0[i] *= g->emb_mask[i];
    if (g->pos_emb) add_positional_encoding_backward(params_grad(&g->params, g->pos_emb), dX0, B, N, D);
    embedding_backward(dE, dX0, tokens, R, D);
}

/* ============================================================ perplexity */

double gpt_stream_nll(Gpt *g, const int *ids, int first, int n, int stride, long *counted) {
    const int N = g->N, B_max = g->max_B;
    int *tokens = xmalloc(sizeof(int) * (size_t)B_max * N);
    int *targets = xmalloc(sizeof(int) * (size_t)B_max * N);
    double sum = 0.0;
    long scored = 0;
    int next = first;   /* the next position to score */
    while (next < n) {
        int B = 0;
        /* fill up to B_max windows; window b reads ids[a .. a+N) and predicts ids[a+1 .. a+N] */
        while (B < B_max && next < n) {
            int a = next - 1 - (N - stride);          /* next is predicted with N - stride + 1 tokens before it... */
            if (a < 0) a = 0;                         /* ... or all there are */
            if (a + N > n - 1) a = n - 1 - N;         /* the last window ends at the stream's end */
            if (a < 0) a = 0;
            int end = a + N < n - 1 ? a + N : n - 1;  /* the last position this window predicts */
            for (int i = 0; i < N; i++) {
                const int t = a + 1 + i;              /* the position predicted at window slot i */
                tokens[(size_t)B * N + i] = a + i < n ? ids[a + i] : 0;
                targets[(size_t)B * N + i] = (t >= next && t <= end) ? ids[t] : -1;
            }
            next = end + 1;
            B++;
        }
        sum += forward_n(g, tokens, targets, B, N, 0);
        scored += g->last_counted;
    }
    free(tokens);
    free(targets);
    *counted = scored;
    return sum;
}

/* ============================================================ generation */

/* The logits of the token that follows window[0 .. len), where window[len-1]
 * was just appended: with the cache, one block_step per block for that
 * token at position len-1 (the earlier positions' keys and values are in the
 * cache); without, the whole window again. -> g->step_logits [V] */
static void next_logits(Gpt *g, const int *window, int len, int kv_cache) {
    const int D = g->D, V = g->V, pos = len - 1;
    const float *E = params_data(&g->params, g->tok_emb);
    if (!kv_cache) {
        forward_n(g, window, NULL, 1, len, 0);
        memcpy(g->step_logits, g->logits + (size_t)pos * V, sizeof(float) * (size_t)V);
        return;
    }
    /* x = E[token] + P[pos] (rope: E[token]; block_step rotates at pos) */
    const float *e = E + (size_t)window[pos] * D, *P = positions(g) ? positions(g) + (size_t)pos * D : NULL;
    for (int j = 0; j < D; j++) g->step_x[j] = P ? e[j] + P[j] : e[j];
    for (int l = 0; l < g->L; l++) {
        BlockStepRow row = {g->kv_K[l], g->kv_V[l], pos, NULL, 0};
        BlockWeights w = stack_block_weights(&g->st, l, 0);
        block_step(g->step_y, NULL, g->step_x, &g->st.spec, &w, &row, 1, g->N, 0, g->step_work);
        float *swap = g->step_x; g->step_x = g->step_y; g->step_y = swap;
    }
    const float *top = g->step_x;
    if (stack_has_final_norm(&g->st.spec)) {
        block_norm_forward(g->step_top, g->step_mean, g->step_rstd, g->step_x, &g->st.spec,
                           params_data(&g->params, g->st.norm_g),
                           g->st.norm_b ? params_data(&g->params, g->st.norm_b) : NULL, 1);
        top = g->step_top;
    }
    sgemm(0, 1, 1, V, D, 1.0f, top, D, E, D, 0.0f, g->step_logits, V);
}

static int compare_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* One token from logits [V]: the most likely (temperature 0), or a draw from
 * softmax(logits / temperature) over the top_k most likely. work [2 V]. */
static int sample_token(const float *logits, int V, const GptSampling *s, Rng *rng, float *work) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (s->temperature <= 0.0f) return best;
    /* Exercise 06.sampling (2 points): draw from softmax(logits / temperature) over the top_k most likely. */
    float threshold = -INFINITY;   /* keep logits >= the k-th largest */
    if (s->top_k > 0 && s->top_k < V) {
        memcpy(work, logits, sizeof(float) * (size_t)V);
        qsort(work, (size_t)V, sizeof(float), compare_desc);
        threshold = work[s->top_k - 1];
    }
    double sum = 0.0;
    for (int v = 0; v < V; v++) {
        work[V + v] = logits[v] >= threshold ? (float)exp((double)(logits[v] - logits[best]) / s->temperature) : 0.0f;
        sum += work[V + v];
    }
    double u = rng_uniform(rng) * sum, acc = 0.0;
    for (int v = 0; v < V; v++) {
        acc += work[V + v];
        if (work[V + v] > 0.0f && u < acc) return v;
    }
    /* End of exercise 06.sampling. */
    return best;   /* (rounding at the very end of the sum) */
}

int gpt_generate(Gpt *g, const int *prompt, int n_prompt, int max_new, const GptSampling *s, Rng *rng, int *out,
                 float *logits_out) {
    if (n_prompt < 1) return fail("generation needs a prompt of at least one token");
    if (max_new < 0) return fail("max_new=%d: expected >= 0", max_new);
    const int N = g->N, V = g->V;
    /* the KV cache's step (block_step) is chapter 05's attention: a sparse model runs the whole window */
    const int kv_cache = s->kv_cache && g->cfg.sparse.P == 0;
    int *window = xmalloc(sizeof(int) * (size_t)N);
    float *work = xmalloc(sizeof(float) * 2 * (size_t)V);
    int len = 0;
    /* feed one token at a time: the prompt, then each drawn token */
    int fed = 0, made = 0;
    while (made < max_new) {
        const int token = fed < n_prompt ? prompt[fed] : out[fed - n_prompt];
        if (len == N) {
            /* the window is full: keep its last N/2 tokens, positions from 0 again */
            const int keep = N / 2;
            memmove(window, window + (N - keep), sizeof(int) * (size_t)keep);
            len = 0;
            for (int j = 0; j < keep; j++) {   /* refill the cache (one step per kept token) */
                len++;
                if (kv_cache) next_logits(g, window, len, 1);
            }
        }
        window[len++] = token;
        fed++;
        if (fed < n_prompt) {   /* inside the prompt: only the cache needs the step */
            if (kv_cache) next_logits(g, window, len, 1);
            continue;
        }
        next_logits(g, window, len, kv_cache);
        if (logits_out) memcpy(logits_out + (size_t)made * V, g->step_logits, sizeof(float) * (size_t)V);
        out[made++] = sample_token(g->step_logits, V, s, rng, work);
    }
    free(window);
    free(work);
    return 0;
}

/* ================================================================ config */

/* The checkpoint's keys (gpt.h): part 1's, as transformer.c lists them, then the window and the vocabulary. */
const ConfigField GPT_CONFIG_FIELDS[] = {
    {"layers", CONFIG_INT, offsetof(GptConfig, layers), .lo = 1, .hi = STACK_MAX_LAYERS},
    {"dim", CONFIG_INT, offsetof(GptConfig, block.D), .lo = 1, .hi = 4096},
    {"heads", CONFIG_INT, offsetof(GptConfig, block.H), .lo = 1, .hi = 256},
    {"ff", CONFIG_INT, offsetof(GptConfig, block.F), .lo = 1, .hi = 65536},
    {"norm", CONFIG_CHOICE, offsetof(GptConfig, block.norm_place), .choices = "post,pre"},
    {"norm_type", CONFIG_CHOICE, offsetof(GptConfig, block.norm), .choices = "layernorm,rmsnorm,none,batchnorm"},
    {"mlp", CONFIG_CHOICE, offsetof(GptConfig, block.mlp), .choices = "gelu,relu,swiglu,none"},
    {"experts", CONFIG_INT, offsetof(GptConfig, block.moe.E), .lo = 0, .hi = BLOCK_MAX_EXPERTS,
     .fallback = "0"},   /* a mixture of experts came later: without the lines, the dense MLP */
    {"moe_top_k", CONFIG_INT, offsetof(GptConfig, block.moe.k), .lo = 0, .hi = BLOCK_MAX_EXPERTS, .fallback = "1"},
    {"moe_aux", CONFIG_FLOAT, offsetof(GptConfig, block.moe.aux), .lo = 0, .hi = 100, .fallback = "0"},
    {"capacity", CONFIG_FLOAT, offsetof(GptConfig, block.moe.capacity), .lo = 0, .hi = 1000, .fallback = "0"},
    {"moe_renorm", CONFIG_INT, offsetof(GptConfig, block.moe.renorm), .lo = 0, .hi = 1, .fallback = "0"},
    {"dropout", CONFIG_FLOAT, offsetof(GptConfig, block.dropout), .lo = 0, .hi = 1},
    {"attn_dropout", CONFIG_FLOAT, offsetof(GptConfig, block.attn_dropout), .lo = 0, .hi = 1,
     .fallback = "0"},   /* came later: a checkpoint without the line means 0 */
    {"pos", CONFIG_CHOICE, offsetof(GptConfig, pos), .choices = "none,sinusoidal,learned,rope"},
    {"label_smoothing", CONFIG_FLOAT, offsetof(GptConfig, label_smoothing), .lo = 0, .hi = 1},
    {"kv_cache", CONFIG_INT, offsetof(GptConfig, kv_cache), .lo = 0, .hi = 1},
    {"context", CONFIG_INT, offsetof(GptConfig, context), .lo = 2, .hi = 4096},   /* --context's range */
    {"vocab", CONFIG_INT, offsetof(GptConfig, V), .lo = 2, .hi = 1 << 24},
    /* part 5's sparse attention came later: without the lines, full attention */
    {"sparse_block", CONFIG_INT, offsetof(GptConfig, sparse.P), .lo = 0, .hi = 4096, .fallback = "0"},
    {"sparse_window", CONFIG_INT, offsetof(GptConfig, sparse.window), .lo = 0, .hi = 4096, .fallback = "0"},
    {"sparse_global", CONFIG_INT, offsetof(GptConfig, sparse.global), .lo = 0, .hi = 4096, .fallback = "0"},
    {"sparse_random", CONFIG_INT, offsetof(GptConfig, sparse.random), .lo = 0, .hi = 4096, .fallback = "0"},
};
const int GPT_CONFIG_N = (int)(sizeof GPT_CONFIG_FIELDS / sizeof GPT_CONFIG_FIELDS[0]);
