/* transformer.c - chapter 06: the encoder-decoder transformer, forward, hand-
 * written backward and decoding with a KV cache (see transformer.h).
 *
 * Reading order: embed_forward()/embed_backward() (tokens to vectors),
 * encoder_forward() and decoder_forward() (embeddings, then a stack of
 * blocks: stack.c),
 * transformer_train_step() (the two stacks, the output layer, the loss, then
 * everything backwards), transformer_encode()/transformer_step() (decoding),
 * transformer_plot_layers() (the maps of every layer and head). */
#include "06_transformer/transformer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/self_attention.h"
#include "io/plot.h"
#include "nn/layers.h"
#include "nn/transformer_layers.h"
#include "util/error.h"
#include "util/util.h"
#include "train/memory.h"

/* ================================================================= model */

int transformer_create(Transformer *t, const TransformerConfig *cfg, int V_src, int V_tgt, int T_src,
                       int T_tgt, int max_B, uint64_t seed) {
    memset(t, 0, sizeof *t);
    if (cfg->layers < 1 || cfg->layers > TRANSFORMER_MAX_LAYERS)
        return fail("layers=%d: expected 1 to %d", cfg->layers, TRANSFORMER_MAX_LAYERS);
    if (cfg->pos != POSITIONS_SINUSOIDAL && cfg->pos != POSITIONS_LEARNED && cfg->pos != POSITIONS_ROPE)
        return fail("pos=%s: the transformer needs positions (sinusoidal, learned or rope)",
                    positions_name(cfg->pos));
    t->cfg = *cfg;
    if (t->cfg.block.D_H == 0) {   /* from dim and heads, as the checkpoint text gives them */
        if (cfg->block.H < 1 || cfg->block.D % cfg->block.H != 0)
            return fail("dim=%d is not a multiple of heads=%d: each head gets dim / heads", cfg->block.D,
                        cfg->block.H);
        t->cfg.block.D_H = cfg->block.D / cfg->block.H;
    }
    /* rope: both stacks' self-attention rotates its queries and keys; the
     * cross-attention stays without positions, and nothing is added to X_0, Y_0 */
    t->cfg.block.rope = cfg->pos == POSITIONS_ROPE;
    if (block_spec_check(&t->cfg.block) < 0) return -1;
    cfg = &t->cfg;
    BlockSpec enc = cfg->block, dec = cfg->block;
    enc.causal = 0;
    enc.cross = 0;
    dec.causal = 1;
    dec.cross = 1;
    dec.attention = MULTI_HEAD_PLAIN;   /* the cross-attention maps and the step use chapter 03's path */
    const int L = cfg->layers, D = cfg->block.D;
    t->L = L;
    t->D = D;
    t->V_src = V_src;
    t->V_tgt = V_tgt;
    t->T_src = T_src;
    t->T_tgt = T_tgt;
    t->T_cap = T_tgt + TRANSFORMER_DECODE_EXTRA;   /* the driver decodes up to max_tgt_len + 10 tokens */
    t->max_B = max_B;

    Params *p = &t->params;
    params_init(p);
    t->src_emb = params_add(p, "src_emb", 2, (int[]){V_src, D});
    t->tgt_emb = params_add(p, "tgt_emb", 2, (int[]){V_tgt, D});
    if (cfg->pos == POSITIONS_LEARNED) {   /* rows as trained (fewer when testing on longer inputs) */
        if (!t->cfg.src_pos_rows) t->cfg.src_pos_rows = T_src;
        if (!t->cfg.tgt_pos_rows) t->cfg.tgt_pos_rows = t->T_cap;
        t->src_pos = params_add(p, "src_pos", 2, (int[]){t->cfg.src_pos_rows, D});
        t->tgt_pos = params_add(p, "tgt_pos", 2, (int[]){t->cfg.tgt_pos_rows, D});
    }
    if (stack_declare(&t->enc, &enc, L, p, "enc") < 0 || stack_declare(&t->dec, &dec, L, p, "dec") < 0) return -1;
    if (stack_has_final_norm(&cfg->block)) {
        t->enc.norm_g = params_add(p, "enc_norm.gamma", 1, (int[]){D});
        t->dec.norm_g = params_add(p, "dec_norm.gamma", 1, (int[]){D});
        if (block_norm_has_beta(&cfg->block)) {
            t->enc.norm_b = params_add(p, "enc_norm.beta", 1, (int[]){D});
            t->dec.norm_b = params_add(p, "dec_norm.beta", 1, (int[]){D});
        }
    }
    t->out_W = params_add(p, "out.W", 2, (int[]){D, V_tgt});
    t->out_b = params_add(p, "out.b", 1, (int[]){V_tgt});
    if (params_alloc(p) < 0) return -1;

    /* initial values: embeddings N(0, 1/D) (times sqrt(D) in the forward
     * pass: unit scale, like the sinusoids they are added to) */
    Rng rng;
    rng_seed(&rng, seed, 1);
    init_normal(params_data(p, t->src_emb), (size_t)V_src * D, 1.0f / sqrtf((float)D), &rng);
    init_normal(params_data(p, t->tgt_emb), (size_t)V_tgt * D, 1.0f / sqrtf((float)D), &rng);
    if (cfg->pos == POSITIONS_LEARNED) {
        init_normal(params_data(p, t->src_pos), (size_t)cfg->src_pos_rows * D, 0.1f, &rng);
        init_normal(params_data(p, t->tgt_pos), (size_t)cfg->tgt_pos_rows * D, 0.1f, &rng);
        if (cfg->src_pos_rows < T_src) t->P_src = xcalloc((size_t)T_src * D, sizeof(float));
        if (cfg->tgt_pos_rows < t->T_cap) t->P_tgt = xcalloc((size_t)t->T_cap * D, sizeof(float));
    } else if (cfg->pos == POSITIONS_SINUSOIDAL) {
        t->P_src = xcalloc((size_t)T_src * D, sizeof(float));
        t->P_tgt = xcalloc((size_t)t->T_cap * D, sizeof(float));
        positional_encoding_sinusoidal(t->P_src, T_src, D);      /* chapter 04's */
        positional_encoding_sinusoidal(t->P_tgt, t->T_cap, D);
    }
    stack_init_weights(&t->enc, &rng);
    stack_init_weights(&t->dec, &rng);
    init_xavier(params_data(p, t->out_W), D, V_tgt, &rng);
    init_constant(params_data(p, t->out_b), (size_t)V_tgt, 0.0f);
    rng_seed(&t->dropout_rng, seed, 7);
    /* batch norm's running statistics, which the checkpoints keep beside the weights */
    t->n_running = stack_running_items(&t->enc, t->running);
    t->n_running += stack_running_items(&t->dec, t->running + t->n_running);

    /* activations, allocated once for the largest batch; the decoder's also
     * hold one row of T_cap positions (decoding without the cache recomputes
     * a whole prefix) */
    stack_alloc(&t->enc, max_B, T_src, 0);
    stack_alloc(&t->dec, max_B, t->T_cap, T_src);
    const size_t BS = (size_t)max_B * T_src * D, BT = (size_t)max_B * t->T_cap * D;
    t->enc_mask = xcalloc(BS, sizeof(float));
    t->dec_mask = xcalloc(BT, sizeof(float));
    t->logits = xcalloc((size_t)max_B * T_tgt * V_tgt, sizeof(float));
    t->probs = xcalloc((size_t)max_B * T_tgt * V_tgt, sizeof(float));
    t->dlogits = xcalloc((size_t)max_B * T_tgt * V_tgt, sizeof(float));
    t->src_lens = xcalloc((size_t)max_B, sizeof(int));
    t->dtop = xcalloc(BT, sizeof(float));
    t->dM = xcalloc(BS, sizeof(float));
    const int HD = cfg->block.H * cfg->block.D_H;
    for (int l = 0; l < L; l++) t->mem_KV[l] = xcalloc((size_t)max_B * T_src * 2 * HD, sizeof(float));
    t->step_x = xcalloc((size_t)max_B * D, sizeof(float));
    t->step_y = xcalloc((size_t)max_B * D, sizeof(float));
    t->step_top = xcalloc((size_t)max_B * D, sizeof(float));
    const size_t stats = (size_t)(max_B > D ? max_B : D);   /* the final norm's statistics: [n], batch norm [D] */
    t->step_mean = xcalloc(stats, sizeof(float));
    t->step_rstd = xcalloc(stats, sizeof(float));
    t->step_logits = xcalloc((size_t)max_B * V_tgt, sizeof(float));
    t->step_work = xcalloc(block_step_work_floats(&t->dec.spec, max_B, t->T_cap, T_src), sizeof(float));
    t->step_cross = xcalloc((size_t)max_B * cfg->block.H * T_src, sizeof(float));
    return 0;
}

void transformer_free(Transformer *t) {
    stack_free(&t->enc);
    stack_free(&t->dec);
    for (int l = 0; l < t->L; l++) free(t->mem_KV[l]);
    free(t->P_src); free(t->P_tgt); free(t->enc_mask); free(t->dec_mask);
    free(t->logits); free(t->probs); free(t->dlogits); free(t->src_lens); free(t->dtop); free(t->dM);
    free(t->step_x); free(t->step_y); free(t->step_top); free(t->step_mean); free(t->step_rstd);
    free(t->step_logits); free(t->step_work); free(t->step_cross);
    params_free(&t->params);
}

static void transformer_destroy(void *self) {
    transformer_free(self);
    free(self);
}

/* ========================================================== the two stacks */

/* Learned tables [rows, D] shorter than the inputs (a model trained on
 * shorter strings): P [T, D] = the table, then its last row at every later
 * position. The trained rows say nothing about positions never seen. */
static void spread_learned_positions(Transformer *t) {
    if (t->cfg.pos != POSITIONS_LEARNED) return;
    const size_t D = (size_t)t->D;
    const struct { float *P; size_t table; int rows, T; } tables[2] = {
        {t->P_src, t->src_pos, t->cfg.src_pos_rows, t->T_src}, {t->P_tgt, t->tgt_pos, t->cfg.tgt_pos_rows, t->T_cap}};
    for (int k = 0; k < 2; k++) {
        if (!tables[k].P) continue;
        const float *W = params_data(&t->params, tables[k].table);
        for (int i = 0; i < tables[k].T; i++) {
            const int row = i < tables[k].rows ? i : tables[k].rows - 1;
            memcpy(tables[k].P + (size_t)i * D, W + (size_t)row * D, sizeof(float) * D);
        }
    }
}

/* ids [B, N] -> X [B, N, D] = sqrt(D) E[ids] + P[0..N), then dropout (mask kept).
 * P is the sinusoidal table, or the learned one (pos_offset in params); with
 * rope there is none (the blocks rotate Q and K). */
static void embed_forward(Transformer *t, float *X, float *mask, const int *ids, size_t emb, size_t pos,
                          const float *P_fixed, int B, int N, int train) {
    const int D = t->D;
    const size_t n = (size_t)B * N * D;
    const float scale = sqrtf((float)D);
    embedding_forward(X, ids, params_data(&t->params, emb), B * N, D);
    for (size_t i = 0; i < n; i++) X[i] *= scale;
    if (t->cfg.pos != POSITIONS_ROPE)
        add_positional_encoding(X, P_fixed ? P_fixed : params_data(&t->params, pos), B, N, D);   /* chapter 04's */
    dropout_forward(X, mask, X, (int)n, t->cfg.block.dropout, train, &t->dropout_rng);
}

/* dX [B, N, D] (gradient of X after dropout; overwritten) -> the embedding
 * table's and the learned positions' gradients */
static void embed_backward(Transformer *t, float *dX, const float *mask, const int *ids, size_t emb, size_t pos,
                           int B, int N) {
    const int D = t->D;
    const size_t n = (size_t)B * N * D;
    const float scale = sqrtf((float)D);
    for (size_t i = 0; i < n; i++) dX[i] *= mask[i];   /* dropout (mask = 1 without it) */
    if (t->cfg.pos == POSITIONS_LEARNED) add_positional_encoding_backward(params_grad(&t->params, pos), dX, B, N, D);
    for (size_t i = 0; i < n; i++) dX[i] *= scale;
    embedding_backward(params_grad(&t->params, emb), dX, ids, B * N, D);
}

/* src [B, T] -> the memory M = t->enc.out [B, T, D] */
static void encoder_forward(Transformer *t, const int *src, const int *lens, int B, int T, int train) {
    spread_learned_positions(t);
    embed_forward(t, t->enc.x[0], t->enc_mask, src, t->src_emb, t->src_pos, t->P_src, B, T, train);
    stack_forward(&t->enc, lens, NULL, B, T, train, &t->dropout_rng);
    memcpy(t->src_lens, lens, sizeof(int) * (size_t)B);
}

/* tgt_in [B, Tt] and the memory -> top = t->dec.out [B, Tt, D] (the causal
 * mask does what target lengths would: no real position sees the padding
 * after it) */
static void decoder_forward(Transformer *t, const int *tgt_in, const int *tgt_lens, const BlockMemory *mem, int B,
                            int Tt, int train) {
    embed_forward(t, t->dec.x[0], t->dec_mask, tgt_in, t->tgt_emb, t->tgt_pos, t->P_tgt, B, Tt, train);
    stack_forward(&t->dec, tgt_lens, mem, B, Tt, train, &t->dropout_rng);
}

/* The target lengths the decoder's blocks are given: only batch norm needs
 * them (its statistics leave the padding out); the causal mask alone keeps
 * the other norms' numbers what they always were. */
static const int *decoder_lens(const Transformer *t, const Batch *b) {
    return t->cfg.block.norm == BLOCK_BATCHNORM ? b->tgt_lens : NULL;
}

/* One pass over a batch: encoder, decoder, logits [B Tt, V] (row b Tt + t),
 * cross-entropy; with backward, every gradient (dropout on: training). */
double transformer_train_step(void *self, const Batch *b, int backward) {
    Transformer *t = self;
    const int B = b->batch, T = b->src_len, Tt = b->tgt_len, V = t->V_tgt, R = B * Tt;
    encoder_forward(t, b->src, b->src_lens, B, T, backward);
    const BlockMemory mem = {t->enc.out, b->src_lens, T};
    decoder_forward(t, b->tgt_in, decoder_lens(t, b), &mem, B, Tt, backward);
    linear_forward(t->logits, t->dec.out, params_data(&t->params, t->out_W), params_data(&t->params, t->out_b), R,
                   t->D, V);
    int counted = 0;
    double loss = cross_entropy_forward(t->probs, t->logits, b->tgt_out, R, V, PAD_ID, &counted);
    if (counted == 0) return 0.0;
    loss /= counted;
    if (!backward) return loss;

    memset(t->dlogits, 0, sizeof(float) * (size_t)R * V);
    cross_entropy_smoothed_backward(t->dlogits, t->probs, b->tgt_out, R, V, PAD_ID, t->cfg.label_smoothing,
                                    1.0f / (float)counted);
    memset(t->dtop, 0, sizeof(float) * (size_t)R * t->D);
    linear_backward(t->dtop, params_grad(&t->params, t->out_W), params_grad(&t->params, t->out_b), t->dlogits,
                    t->dec.out, params_data(&t->params, t->out_W), R, t->D, V);
    memset(t->dM, 0, sizeof(float) * (size_t)B * T * t->D);
    float *dY0 = stack_backward(&t->dec, t->dtop, decoder_lens(t, b), &mem, t->dM, B, Tt);
    embed_backward(t, dY0, t->dec_mask, b->tgt_in, t->tgt_emb, t->tgt_pos, B, Tt);
    float *dX0 = stack_backward(&t->enc, t->dM, b->src_lens, NULL, NULL, B, T);
    embed_backward(t, dX0, t->enc_mask, b->src, t->src_emb, t->src_pos, B, T);
    return loss;
}

/* ============================================================== decoding */
/* A decoding row's state (state_size floats):
 *   [0]                     pos: how many tokens the row has fed so far
 *   [1 .. 1 + T_cap)        those tokens (<bos> first), for recomputing
 *   then per decoder block l: K [T_cap, H D_H] and V [T_cap, H D_H]  (the KV cache) */
static size_t state_size(const Transformer *t) {
    const size_t HD = (size_t)t->cfg.block.H * t->cfg.block.D_H;
    return 1 + (size_t)t->T_cap + (size_t)t->L * 2 * t->T_cap * HD;
}
static float *state_K(const Transformer *t, float *state, int l) {
    const size_t HD = (size_t)t->cfg.block.H * t->cfg.block.D_H;
    return state + 1 + t->T_cap + (size_t)l * 2 * t->T_cap * HD;
}
static float *state_V(const Transformer *t, float *state, int l) {
    const size_t HD = (size_t)t->cfg.block.H * t->cfg.block.D_H;
    return state_K(t, state, l) + (size_t)t->T_cap * HD;
}

void transformer_encode(void *self, const Batch *b, float *states) {
    Transformer *t = self;
    const int B = b->batch, T = b->src_len;
    encoder_forward(t, b->src, b->src_lens, B, T, 0);
    /* each decoder block's keys and values of the memory: once per source */
    for (int l = 0; l < t->L; l++) {
        BlockWeights w = stack_block_weights(&t->dec, l, 0);
        MultiHeadSpec as = block_attention_spec(&t->dec.spec);
        multi_head_cross_memory(t->mem_KV[l], t->enc.out, &as, &w.cross, B * T);
    }
    t->enc_T = T;
    const size_t S = state_size(t);
    for (int r = 0; r < B; r++) memset(states + (size_t)r * S, 0, sizeof(float) * (size_t)(1 + t->T_cap));
}

/* The logits of position pos of one row, by running the decoder over its
 * whole prefix tokens[0..pos] (no cache): the reference for the KV cache. */
static void recompute_row(Transformer *t, float *logits, const int *tokens, int pos, int src) {
    const int T = t->enc_T, D = t->D;
    /* the row's memory: M row src, through the same cross-attention as training */
    const float *M_src = t->enc.out + (size_t)src * T * D;
    const BlockMemory mem = {M_src, &t->src_lens[src], T};
    decoder_forward(t, tokens, NULL, &mem, 1, pos + 1, 0);
    linear_forward(logits, t->dec.out + (size_t)pos * D, params_data(&t->params, t->out_W),
                   params_data(&t->params, t->out_b), 1, D, t->V_tgt);
}

void transformer_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                      float *next, float *logprobs, float *attn) {
    Transformer *t = self;
    const int D = t->D, T = t->enc_T, H = t->cfg.block.H, V = t->V_tgt;
    const size_t S = state_size(t), HD = (size_t)H * t->cfg.block.D_H;
    int full = 0;   /* rows whose state has no room for another position */
    /* next = states, with the new token appended (only the filled part of the caches is copied) */
    for (int r = 0; r < n; r++) {
        const float *in = states + (size_t)r * S;
        float *out = next + (size_t)r * S;
        const int pos = (int)in[0];
        memcpy(out, in, sizeof(float) * (size_t)(1 + t->T_cap));
        for (int l = 0; l < t->L; l++) {
            memcpy(state_K(t, out, l), state_K(t, (float *)in, l), sizeof(float) * (size_t)pos * HD);
            memcpy(state_V(t, out, l), state_V(t, (float *)in, l), sizeof(float) * (size_t)pos * HD);
        }
        if (pos >= t->T_cap) { full = 1; continue; }
        out[1 + pos] = (float)prev[r];
    }
    if (t->cfg.kv_cache && !full) {
        /* the new token's vector: sqrt(D) E[y] + P[pos] (rope: sqrt(D) E[y]; block_step rotates at pos) */
        for (int r = 0; r < n; r++) {
            const int pos = (int)next[(size_t)r * S];
            const float *e = params_data(&t->params, t->tgt_emb) + (size_t)prev[r] * D;
            const float *P = t->cfg.pos == POSITIONS_ROPE ? NULL : t->P_tgt ? t->P_tgt : params_data(&t->params, t->tgt_pos);
            float *x = t->step_x + (size_t)r * D;
            for (int j = 0; j < D; j++) x[j] = sqrtf((float)D) * e[j] + (P ? P[(size_t)pos * D + j] : 0.0f);
        }
        BlockStepRow rows[n > 0 ? n : 1];
        for (int l = 0; l < t->L; l++) {
            for (int r = 0; r < n; r++) {
                float *st = next + (size_t)r * S;
                rows[r] = (BlockStepRow){state_K(t, st, l), state_V(t, st, l), (int)st[0],
                                         t->mem_KV[l] + (size_t)src_row[r] * T * 2 * HD, t->src_lens[src_row[r]]};
            }
            BlockWeights w = stack_block_weights(&t->dec, l, 0);
            block_step(t->step_y, l == t->L - 1 ? t->step_cross : NULL, t->step_x, &t->dec.spec, &w, rows, n, t->T_cap,
                       T, t->step_work);
            float *swap = t->step_x; t->step_x = t->step_y; t->step_y = swap;
        }
        const float *top = t->step_x;
        if (stack_has_final_norm(&t->dec.spec)) {
            block_norm_forward_batch(t->step_top, t->step_mean, t->step_rstd, NULL, t->step_x, &t->dec.spec,
                                     params_data(&t->params, t->dec.norm_g),
                                     t->dec.norm_b ? params_data(&t->params, t->dec.norm_b) : NULL,
                                     stack_final_running_mean(&t->dec), stack_final_running_var(&t->dec), NULL, 1, n,
                                     0);
            top = t->step_top;
        }
        linear_forward(t->step_logits, top, params_data(&t->params, t->out_W), params_data(&t->params, t->out_b), n,
                       D, V);
    } else {
        /* no cache (or a row out of room): the whole prefix again, row by row */
        int tokens[t->T_cap];
        for (int r = 0; r < n; r++) {
            const float *st = next + (size_t)r * S;
            const int pos = (int)st[0];
            if (pos >= t->T_cap) continue;
            for (int i = 0; i <= pos; i++) tokens[i] = (int)st[1 + i];
            recompute_row(t, t->step_logits + (size_t)r * V, tokens, pos, src_row[r]);
            if (attn) {   /* the last block's cross-attention at position pos */
                const float *A = stack_cross_attention(&t->dec, t->L - 1, 1, pos + 1, T);
                for (int h = 0; h < H; h++)
                    memcpy(t->step_cross + ((size_t)r * H + h) * T, A + ((size_t)h * (pos + 1) + pos) * T,
                           sizeof(float) * (size_t)T);
            }
        }
    }
    log_softmax_forward(logprobs, t->step_logits, n, V);
    for (int r = 0; r < n; r++) {
        float *st = next + (size_t)r * S;
        if ((int)st[0] >= t->T_cap) {   /* out of room: the only way on is <eos> */
            for (int v = 0; v < V; v++) logprobs[(size_t)r * V + v] = v == EOS_ID ? 0.0f : -INFINITY;
            continue;
        }
        st[0] += 1.0f;
    }
    if (attn) {   /* the driver's one map per step: the last block's heads, averaged */
        for (int r = 0; r < n; r++)
            for (int j = 0; j < T; j++) {
                float sum = 0.0f;
                for (int h = 0; h < H; h++) sum += t->step_cross[((size_t)r * H + h) * T + j];
                attn[(size_t)r * T + j] = sum / (float)H;
            }
    }
}

/* ================================================ every layer's and head's map */

/* Maps [L, H, rows, cols] -> one picture of L x H panels (see transformer.h). */
int transformer_plot_grid(const char *stem, const char *what, const float *maps, int L, int H, int rows, int cols,
                     const char *const *x_labels, const char *const *y_labels, const char *x_title,
                     const char *y_title) {
    char (*titles)[48] = xcalloc((size_t)L * H, 48);
    const char **title_ptrs = xcalloc((size_t)L * H, sizeof(char *));
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            snprintf(titles[l * H + h], 48, "layer %d, head %d", l + 1, h + 1);
            title_ptrs[l * H + h] = titles[l * H + h];
        }
    int rc = plot_heatmap_grid(stem, what, maps, L * H, H, title_ptrs, rows, cols, x_labels, y_labels, x_title,
                               y_title, "attention weight", 0.0f, 1.0f);
    free(titles);
    free(title_ptrs);
    return rc;
}

int transformer_plot_layers(void *self, const Dataset *d, const int *src, int src_len, const int *out,
                               int out_len, const char *stem) {
    Transformer *t = self;
    const int L = t->L, H = t->cfg.block.H, T = src_len, Tt = out_len + 1;
    if (Tt > t->T_cap) return 0;   /* (decoding never makes one this long) */
    /* one teacher-forced pass over <bos> + the output: the caches then hold every map */
    int *tgt_in = xcalloc((size_t)Tt, sizeof(int));
    tgt_in[0] = BOS_ID;
    memcpy(tgt_in + 1, out, sizeof(int) * (size_t)out_len);
    int lens[1] = {src_len};
    encoder_forward(t, src, lens, 1, T, 0);
    const BlockMemory mem = {t->enc.out, lens, T};
    decoder_forward(t, tgt_in, NULL, &mem, 1, Tt, 0);

    char (*src_tok)[TOKEN_MAX] = xcalloc((size_t)T, TOKEN_MAX);
    char (*out_tok)[TOKEN_MAX] = xcalloc((size_t)Tt, TOKEN_MAX);
    const char **x_labels = xcalloc((size_t)T, sizeof(char *)), **y_labels = xcalloc((size_t)Tt, sizeof(char *));
    for (int i = 0; i < T; i++) {
        snprintf(src_tok[i], TOKEN_MAX, "%s", vocab_token(&d->src_vocab, src[i]));
        x_labels[i] = src_tok[i];
    }
    for (int i = 0; i < Tt; i++) {   /* row i predicts out[i] (the last row: <eos>) */
        snprintf(out_tok[i], TOKEN_MAX, "%s", i < out_len ? vocab_token(&d->tgt_vocab, out[i]) : "<eos>");
        y_labels[i] = out_tok[i];
    }
    float *cross = xcalloc((size_t)L * H * Tt * T, sizeof(float));
    float *self_maps = xcalloc((size_t)L * H * T * T, sizeof(float));
    for (int l = 0; l < L; l++) {
        memcpy(cross + (size_t)l * H * Tt * T, stack_cross_attention(&t->dec, l, 1, Tt, T),
               sizeof(float) * (size_t)H * Tt * T);
        const float *A = stack_attention(&t->enc, l, 1, T, 0);
        if (A) memcpy(self_maps + (size_t)l * H * T * T, A, sizeof(float) * (size_t)H * T * T);
    }
    char path[1100];
    int rc = path_format(path, sizeof path, "%s_cross", stem);
    if (rc == 0)
        rc = transformer_plot_grid(path,
                                   "Cross-attention: each output token (row) over the source, every layer and head",
                                   cross, L, H, Tt, T, x_labels, y_labels, "source", "output");
    if (rc == 0) {
        printf("  %s.%s\n", path, gnuplot_available() ? "png" : "gp");
        rc = path_format(path, sizeof path, "%s_encoder", stem);
        if (rc == 0)
            rc = transformer_plot_grid(path, "Encoder self-attention: each source position (row) over the source",
                                       self_maps, L, H, T, T, x_labels, x_labels, "key", "query");
        if (rc == 0) printf("  %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    }
    free(tgt_in); free(src_tok); free(out_tok); free(x_labels); free(y_labels); free(cross); free(self_maps);
    return rc;
}

/* ================================================================ build */

void transformer_interface(Transformer *t, Seq2Seq *m) {
    *m = (Seq2Seq){.self = t, .params = &t->params, .train_step = transformer_train_step,
                   .encode = transformer_encode, .step = transformer_step, .destroy = transformer_destroy,
                   .plot_layers = transformer_plot_layers, .state_size = (int)state_size(t),
                   .vocab_size = t->V_tgt, .has_attention = 1, .rng = &t->dropout_rng,
                   .buffers = t->running, .n_buffers = t->n_running};
    snprintf(m->attention_name, sizeof m->attention_name,
             "the last decoder block's cross-attention, the mean over its %d heads", t->cfg.block.H);
}

/* The checkpoint's keys (transformer.h); the GPT's table (gpt.c) starts with the same ones. */
const ConfigField TRANSFORMER_CONFIG_FIELDS[] = {
    {"layers", CONFIG_INT, offsetof(TransformerConfig, layers), .lo = 1, .hi = TRANSFORMER_MAX_LAYERS},
    {"dim", CONFIG_INT, offsetof(TransformerConfig, block.D), .lo = 1, .hi = 4096},
    {"heads", CONFIG_INT, offsetof(TransformerConfig, block.H), .lo = 1, .hi = 256},
    {"ff", CONFIG_INT, offsetof(TransformerConfig, block.F), .lo = 1, .hi = 65536},
    {"norm", CONFIG_CHOICE, offsetof(TransformerConfig, block.norm_place), .choices = "post,pre"},
    {"norm_type", CONFIG_CHOICE, offsetof(TransformerConfig, block.norm), .choices = "layernorm,rmsnorm,none,batchnorm"},
    {"mlp", CONFIG_CHOICE, offsetof(TransformerConfig, block.mlp), .choices = "gelu,relu,swiglu,none"},
    {"dropout", CONFIG_FLOAT, offsetof(TransformerConfig, block.dropout), .lo = 0, .hi = 1},
    {"attn_dropout", CONFIG_FLOAT, offsetof(TransformerConfig, block.attn_dropout), .lo = 0, .hi = 1,
     .fallback = "0"},   /* came later: a checkpoint without the line means 0 */
    {"pos", CONFIG_CHOICE, offsetof(TransformerConfig, pos), .choices = "none,sinusoidal,learned,rope"},
    {"label_smoothing", CONFIG_FLOAT, offsetof(TransformerConfig, label_smoothing), .lo = 0, .hi = 1},
    {"kv_cache", CONFIG_INT, offsetof(TransformerConfig, kv_cache), .lo = 0, .hi = 1},
    {"src_pos_rows", CONFIG_INT, offsetof(TransformerConfig, src_pos_rows), .lo = 0, .hi = 100000, .fallback = "0"},
    {"tgt_pos_rows", CONFIG_INT, offsetof(TransformerConfig, tgt_pos_rows), .lo = 0, .hi = 100000, .fallback = "0"},
};
const int TRANSFORMER_CONFIG_N = (int)(sizeof TRANSFORMER_CONFIG_FIELDS / sizeof TRANSFORMER_CONFIG_FIELDS[0]);

void transformer_pos_rows(TransformerConfig *c, const Dataset *d) {
    if (c->pos != POSITIONS_LEARNED) return;
    if (!c->src_pos_rows) c->src_pos_rows = d->max_src_len;
    if (!c->tgt_pos_rows) c->tgt_pos_rows = d->max_tgt_len + 1 + TRANSFORMER_DECODE_EXTRA;
}

int transformer_build(Seq2Seq *m, const Dataset *d, const TransformerConfig *c, int max_batch, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("06_transformer", "a smaller --batch, --dim, --ff or --layers, or shorter examples");
    Transformer *t = xmalloc(sizeof *t);
    if (transformer_create(t, c, d->src_vocab.size, d->tgt_vocab.size, d->max_src_len, d->max_tgt_len + 1,
                           max_batch, seed) < 0) {
        memory_budget_end();
        transformer_free(t);
        free(t);
        return -1;
    }
    memory_budget_end();
    transformer_interface(t, m);
    return 0;
}
