/* caption.c - chapter 07, captioning: the ViT's encoder and three decoders
 * (chapter 01's, chapter 02's attention on it, chapter 06's), forward,
 * backward and decoding (see caption.h).
 *
 * Reading order: caption_create() (the parameters of the encoder and of one
 * decoder), encoder_forward()/encoder_backward() (images to the grid Z),
 * then per model its teacher-forced pass with backward (pool_pass,
 * attend_pass, transformer_pass, all behind caption_train_step), then
 * decoding (caption_encode, caption_step). Every layer is an earlier
 * chapter's: what is new here is only the wiring. */
#include "07_vision_transformer/caption.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "02_bahdanau_attention/bahdanau.h"
#include "04_self_attention/self_attention.h"
#include "07_vision_transformer/vit.h"
#include "io/checkpoint.h"
#include "nn/layers.h"
#include "util/error.h"
#include "util/util.h"
#include "train/memory.h"

static const char *const KIND_NAMES[] = {"pool", "attend", "transformer"};

const char *caption_kind_name(CaptionKind k) { return KIND_NAMES[k]; }

int caption_kind_from_name(const char *name, CaptionKind *k) {
    for (int i = 0; i < 3; i++)
        if (strcmp(name, KIND_NAMES[i]) == 0) {
            *k = (CaptionKind)i;
            return 0;
        }
    return fail("caption model '%s': expected pool, attend or transformer", name);
}

/* the ViT's encoder blocks (vit.c), and model 3's decoder blocks */
static BlockSpec block_spec(const CaptionConfig *c, int decoder) {
    return (BlockSpec){.D = c->D, .H = c->heads, .D_H = c->D / c->heads, .F = c->ff, .norm_place = BLOCK_PRE_NORM,
                       .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .dropout = 0.0f,
                       .attention = MULTI_HEAD_PLAIN, .causal = decoder, .cross = decoder};
}

/* ==================================================================== model */

int caption_create(Caption *c, const CaptionConfig *cfg, int max_B, uint64_t seed) {
    memset(c, 0, sizeof *c);
    params_init(&c->params);
    c->cfg = *cfg;
    const int cnn = cfg->encoder == CAPTION_ENCODER_CNN;
    if (cnn && cfg->P != 4)
        return fail("patch=%d with the CNN encoder: expected 4 (its grid has one position per 4 x 4 pixels)", cfg->P);
    c->patch = (PatchEmbedSpec){.channels = 1, .rows = cfg->side, .cols = cfg->side, .P = cfg->P, .D = cfg->D};
    if (patch_embed_check(&c->patch) < 0) return -1;
    const int D = cfg->D, kind = cfg->kind;
    if (cfg->heads < 1 || D % cfg->heads != 0) return fail("heads=%d: expected a divisor of the width D = %d", cfg->heads, D);
    if (D % 4 != 0) return fail("dim=%d: the 2-D sinusoids need a width divisible by 4", D);
    if (cfg->V < 5 || cfg->max_words < 1 || max_B < 1)
        return fail("vocabulary %d, longest caption %d, batch %d: expected at least 5, 1, 1", cfg->V, cfg->max_words, max_B);
    c->N = patch_embed_count(&c->patch);
    c->D = D;
    c->T_tgt = cfg->max_words + 1;
    c->T_cap = c->T_tgt + 10;   /* the driver decodes up to max_tgt_len + 10 words, then <eos> */
    c->max_B = max_B;
    const int N = c->N, S = cfg->S, D_A = cfg->D_A, V = cfg->V, Tt = c->T_tgt;

    /* ---- declare: the encoder, then one decoder */
    Params *p = &c->params;
    const BlockSpec enc_spec = block_spec(cfg, 0), dec_spec = block_spec(cfg, 1);
    if (cnn) {
        if (cnn_trunk_declare(&c->trunk, p, 1, cfg->side, cfg->side, cfg->filters) < 0) return -1;
        c->proj_W = params_add(p, "proj.W", 2, (int[]){2 * cfg->filters, D});
        c->proj_b = params_add(p, "proj.b", 1, (int[]){D});
    } else {
        c->patch_W = params_add(p, "patch.W", 2, (int[]){patch_embed_dim(&c->patch), D});
        c->patch_b = params_add(p, "patch.b", 1, (int[]){D});
        if (stack_declare(&c->enc, &enc_spec, cfg->layers, p, "enc") < 0) return -1;
        c->enc.norm_g = params_add(p, "enc_norm.gamma", 1, (int[]){D});
        c->enc.norm_b = params_add(p, "enc_norm.beta", 1, (int[]){D});
    }
    if (kind == CAPTION_TRANSFORMER) {
        c->tgt_emb = params_add(p, "tgt_emb", 2, (int[]){V, D});
        if (stack_declare(&c->tdec, &dec_spec, cfg->dec_layers, p, "dec") < 0) return -1;
        c->tdec.norm_g = params_add(p, "dec_norm.gamma", 1, (int[]){D});
        c->tdec.norm_b = params_add(p, "dec_norm.beta", 1, (int[]){D});
        c->out_W = params_add(p, "out.W", 2, (int[]){D, V});
        c->out_b = params_add(p, "out.b", 1, (int[]){V});
    } else {
        c->init_W = params_add(p, "init.W", 2, (int[]){D, S});
        c->init_b = params_add(p, "init.b", 1, (int[]){S});
        /* the cell's input: [E y ; c] with c the pooled context [S] or c_t [D] */
        rnn_decoder_declare(&c->dec, p, CELL_GRU, V, cfg->D_E, cfg->D_E + (kind == CAPTION_POOL ? S : D), S);
        if (kind == CAPTION_ATTEND) {
            c->att_W1 = params_add(p, "att.W_1", 2, (int[]){D, D_A});
            c->att_W2 = params_add(p, "att.W_2", 2, (int[]){S, D_A});
            c->att_v = params_add(p, "att.v", 1, (int[]){D_A});
        }
    }
    if (params_alloc(p) < 0) return -1;

    /* ---- initial values, in declaration order (as the earlier chapters) */
    Rng rng;
    rng_seed(&rng, seed, 1);
    if (cnn) {
        cnn_trunk_init(&c->trunk, p, &rng);
        init_xavier(params_data(p, c->proj_W), 2 * cfg->filters, D, &rng);
    } else {
        patch_embed_init(&c->patch, params_data(p, c->patch_W), params_data(p, c->patch_b), &rng);
        stack_init_weights(&c->enc, &rng);
    }
    if (kind == CAPTION_TRANSFORMER) {
        init_normal(params_data(p, c->tgt_emb), (size_t)V * D, 1.0f / sqrtf((float)D), &rng);
        stack_init_weights(&c->tdec, &rng);
        init_xavier(params_data(p, c->out_W), D, V, &rng);
        init_constant(params_data(p, c->out_b), (size_t)V, 0.0f);
    } else {
        init_xavier(params_data(p, c->init_W), D, S, &rng);
        init_constant(params_data(p, c->init_b), (size_t)S, 0.0f);
        rnn_decoder_init(&c->dec, p, &rng);
        if (kind == CAPTION_ATTEND) {
            init_xavier(params_data(p, c->att_W1), D, D_A, &rng);
            init_xavier(params_data(p, c->att_W2), S, D_A, &rng);
            init_uniform(params_data(p, c->att_v), (size_t)D_A, 1.0f / sqrtf((float)D_A), &rng);
        }
    }
    rng_seed(&c->rng, seed, 7);

    /* ---- activations, once, for max_B images */
    const size_t BND = (size_t)max_B * N * D, BN = (size_t)max_B * N;
    const int g = cfg->side / cfg->P;
    c->E_pos = xcalloc((size_t)N * D, sizeof(float));
    vit_positions_2d(c->E_pos, g, g, D, 0);
    if (cnn) {
        const size_t BNF = BN * 2 * cfg->filters;
        cnn_trunk_alloc(&c->trunk, max_B);
        c->G = xcalloc(BNF, sizeof(float));
        c->dG = xcalloc(BNF, sizeof(float));
        c->dp2 = xcalloc(BNF, sizeof(float));
        c->cnn_Z = xcalloc(BND, sizeof(float));
        c->Z = c->cnn_Z;
    } else {
        stack_alloc(&c->enc, max_B, N, 0);
        c->patches = xcalloc(BND, sizeof(float));
        c->patch_cache = xcalloc(patch_embed_cache_floats(&c->patch, max_B), sizeof(float));
        c->Z = c->enc.out;
    }
    c->dZ = xcalloc(BND, sizeof(float));
    c->lens = xcalloc((size_t)max_B, sizeof(int));
    for (int b = 0; b < max_B; b++) c->lens[b] = N;
    c->u = xcalloc((size_t)max_B * D, sizeof(float));
    c->du = xcalloc((size_t)max_B * D, sizeof(float));
    c->grid = xcalloc(BND, sizeof(float));
    c->step_grid = xcalloc(BND, sizeof(float));
    c->step_logits = xcalloc((size_t)max_B * V, sizeof(float));
    c->logits = xcalloc((size_t)max_B * Tt * V, sizeof(float));
    c->probs = xcalloc((size_t)max_B * Tt * V, sizeof(float));
    c->dlogits = xcalloc((size_t)max_B * Tt * V, sizeof(float));
    if (kind == CAPTION_TRANSFORMER) {
        stack_alloc(&c->tdec, max_B, c->T_cap, N);
        c->P_tgt = xcalloc((size_t)c->T_cap * D, sizeof(float));
        positional_encoding_sinusoidal(c->P_tgt, c->T_cap, D);   /* chapter 04's */
        c->dtop = xcalloc((size_t)max_B * c->T_cap * D, sizeof(float));
        c->step_tokens = xcalloc((size_t)max_B * c->T_cap, sizeof(int));
    } else {
        rnn_decoder_alloc(&c->dec, max_B, Tt);
        const int C = kind == CAPTION_POOL ? S : D;   /* the context's width */
        c->ctx = xcalloc((size_t)max_B * C, sizeof(float));
        c->dctx = xcalloc((size_t)max_B * C, sizeof(float));
        c->step_ctx = xcalloc((size_t)max_B * C, sizeof(float));
        c->s0 = xcalloc((size_t)max_B * S, sizeof(float));
        if (kind == CAPTION_ATTEND) {
            c->keys = xcalloc(BN * D_A, sizeof(float));
            c->dkeys = xcalloc(BN * D_A, sizeof(float));
            c->query = xcalloc((size_t)max_B * D_A, sizeof(float));
            c->dquery = xcalloc((size_t)max_B * D_A, sizeof(float));
            c->feat = xcalloc((size_t)Tt * BN * D_A, sizeof(float));
            c->attn = xcalloc((size_t)Tt * BN, sizeof(float));
            c->dattn = xcalloc(BN, sizeof(float));
            c->dscores = xcalloc(BN, sizeof(float));
            c->grid_keys = xcalloc(BN * D_A, sizeof(float));
            c->step_keys = xcalloc(BN * D_A, sizeof(float));
            c->step_feat = xcalloc(BN * D_A, sizeof(float));
            c->step_attn = xcalloc(BN, sizeof(float));
            c->step_query = xcalloc((size_t)max_B * D_A, sizeof(float));
        }
    }
    return 0;
}

void caption_free(Caption *c) {
    if (c->cfg.encoder == CAPTION_ENCODER_CNN) cnn_trunk_free(&c->trunk);
    else stack_free(&c->enc);
    free(c->G); free(c->dG); free(c->dp2); free(c->cnn_Z);
    if (c->cfg.kind == CAPTION_TRANSFORMER) stack_free(&c->tdec);
    else if (c->dec.max_B) rnn_decoder_free(&c->dec);
    params_free(&c->params);
    free(c->E_pos); free(c->patches); free(c->patch_cache); free(c->dZ); free(c->lens); free(c->u); free(c->du);
    free(c->grid); free(c->step_grid); free(c->step_logits); free(c->logits); free(c->probs); free(c->dlogits);
    free(c->P_tgt); free(c->dtop); free(c->step_tokens);
    free(c->ctx); free(c->dctx); free(c->step_ctx); free(c->keys); free(c->dkeys); free(c->query); free(c->dquery);
    free(c->feat); free(c->attn); free(c->dattn); free(c->dscores); free(c->grid_keys); free(c->step_keys);
    free(c->step_feat); free(c->step_attn); free(c->step_query); free(c->s0);
    memset(c, 0, sizeof *c);
}

static void caption_destroy(void *self) {
    caption_free(self);
    free(self);
}

/* ================================================================ encoder */

/* The CNN encoder: images [B, side, side] -> p_2 [B, 2F, N] -> G [B, N, 2F] ->
 * Z = G W_proj + b_proj + E_pos [B, N, D] */
static void cnn_encoder_forward(Caption *c, const float *images, int B) {
    Params *p = &c->params;
    const int N = c->N, D = c->D, K = 2 * c->cfg.filters;
    cnn_trunk_forward(&c->trunk, p, images, B);
    for (int b = 0; b < B; b++)   /* channel-major to position-major: G[b, n, k] = p_2[b, k, n] */
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                c->G[((size_t)b * N + n) * K + k] = c->trunk.p2[((size_t)b * K + k) * N + n];
    linear_forward(c->cnn_Z, c->G, params_data(p, c->proj_W), params_data(p, c->proj_b), B * N, K, D);
    add_positional_encoding(c->cnn_Z, c->E_pos, B, N, D);
}

/* c->dZ [B, N, D] -> proj.* and, unless frozen, conv1.*, conv2.* */
static void cnn_encoder_backward(Caption *c, int B) {
    Params *p = &c->params;
    const int N = c->N, D = c->D, K = 2 * c->cfg.filters;
    memset(c->dG, 0, sizeof(float) * (size_t)B * N * K);
    linear_backward(c->dG, params_grad(p, c->proj_W), params_grad(p, c->proj_b), c->dZ, c->G,
                    params_data(p, c->proj_W), B * N, K, D);
    if (c->frozen) return;   /* the pretrained convolutions stay as loaded */
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                c->dp2[((size_t)b * K + k) * N + n] = c->dG[((size_t)b * N + n) * K + k];
    cnn_trunk_backward(&c->trunk, p, c->dp2);
}

/* images [B, side, side] -> Z = c->Z [B, N, D] (the ViT's: enc.out) and u [B, D] = mean_n Z */
static void encoder_forward(Caption *c, const float *images, int B) {
    Params *p = &c->params;
    const int N = c->N, D = c->D;
    if (c->cfg.encoder == CAPTION_ENCODER_CNN) {
        cnn_encoder_forward(c, images, B);
        vit_pool_forward(c->u, c->Z, VIT_POOL_MEAN, B, N, D);
        return;
    }
    patch_embed_forward(c->patches, c->patch_cache, images, params_data(p, c->patch_W), params_data(p, c->patch_b),
                        &c->patch, B);
    float *X0 = c->enc.x[0];
    memcpy(X0, c->patches, sizeof(float) * (size_t)B * N * D);
    add_positional_encoding(X0, c->E_pos, B, N, D);   /* chapter 04's sum, the ViT's 2-D table */
    stack_forward(&c->enc, NULL, NULL, B, N, 0, &c->rng);
    vit_pool_forward(c->u, c->enc.out, VIT_POOL_MEAN, B, N, D);
}

/* c->du [B, D] (the gradient of u) and c->dZ [B, N, D] -> every encoder gradient */
static void encoder_backward(Caption *c, int B) {
    Params *p = &c->params;
    vit_pool_backward(c->dZ, c->du, VIT_POOL_MEAN, B, c->N, c->D);
    if (c->cfg.encoder == CAPTION_ENCODER_CNN) {
        cnn_encoder_backward(c, B);
        return;
    }
    const float *dX0 = stack_backward(&c->enc, c->dZ, NULL, NULL, NULL, B, c->N);
    /* the positions are fixed: X_0's gradient goes on to the patch embedding */
    patch_embed_backward(NULL, params_grad(p, c->patch_W), params_grad(p, c->patch_b), NULL, dX0, c->patch_cache,
                         params_data(p, c->patch_W), &c->patch, B);
}

/* s_0 or c = tanh(u W_init + b_init) [B, S] into out */
static void init_state(Caption *c, float *out, int B) {
    Params *p = &c->params;
    linear_forward(out, c->u, params_data(p, c->init_W), params_data(p, c->init_b), B, c->D, c->cfg.S);
    tanh_forward(out, out, B * c->cfg.S);
}

/* ds [B, S], the gradient of y = tanh(u W_init + b_init), with y: into du (overwritten) and init.* */
static void init_state_backward(Caption *c, const float *ds, const float *y, int B) {
    Params *p = &c->params;
    const int S = c->cfg.S;
    float *dpre = c->dec.g.dh_prev;   /* [B, S] free at this point */
    memset(dpre, 0, sizeof(float) * (size_t)B * S);
    tanh_backward(dpre, ds, y, B * S);
    memset(c->du, 0, sizeof(float) * (size_t)B * c->D);
    linear_backward(c->du, params_grad(p, c->init_W), params_grad(p, c->init_b), dpre, c->u,
                    params_data(p, c->init_W), B, c->D, S);
}

/* ======================================================== model 1: pooled */

/* Chapter 01's decoder on the context c = tanh(u W_init + b_init): s_0 = c and
 * every step's input is [E y_{t-1} ; c]. Shapes: c [B, S], in[t] [B, D_E + S]. */
static double pool_pass(Caption *c, const Batch *b, int backward) {
    Params *p = &c->params;
    RnnDecoder *dec = &c->dec;
    const int B = b->batch, Tt = b->tgt_len, D_E = dec->D_E, S = dec->S, I = dec->I;
    const size_t hs = (size_t)B * S;
    init_state(c, c->ctx, B);
    memcpy(dec->s, c->ctx, sizeof(float) * hs);
    rnn_decoder_targets(dec, b);
    for (int t = 0; t < Tt; t++) {
        rnn_decoder_embed(dec, p, t, B);
        put_columns(dec->in + (size_t)t * B * I, I, D_E, c->ctx, B, S);
        rnn_decoder_cell_forward(dec, p, t, B);
    }
    double loss;
    if (!rnn_decoder_loss(dec, p, b, dec->s + hs, dec->dS, c->logits, c->probs, c->dlogits, backward, &loss))
        return loss;
    memset(c->dctx, 0, sizeof(float) * hs);
    for (int t = Tt - 1; t >= 0; t--) {
        rnn_decoder_cell_backward(dec, p, t, B);
        for (int r = 0; r < B; r++)   /* d[in] = [d embed ; d c] */
            for (int j = 0; j < S; j++) c->dctx[(size_t)r * S + j] += dec->din[(size_t)r * I + D_E + j];
        rnn_decoder_embed_backward(dec, p, t, B);
        state_grads_swap(&dec->g);
    }
    /* c is s_0 and every step's input: both paths */
    for (size_t i = 0; i < hs; i++) c->dctx[i] += dec->g.dh[i];
    init_state_backward(c, c->dctx, c->ctx, B);
    memset(c->dZ, 0, sizeof(float) * (size_t)B * c->N * c->D);
    encoder_backward(c, B);
    return loss;
}

/* ================================================ model 2: Show-Attend-Tell */

/* Chapter 02's decoder step over the grid Z instead of encoder states h_i.
 * Shapes: keys [B, N, D_A] = Z W_1; per step query [B, D_A] = s_{t-1} W_2,
 * a_t [B, N], c_t [B, D] = sum_n a_{t,n} Z[n], in[t] = [E y ; c_t] [B, D_E + D]. */
static double attend_pass(Caption *c, const Batch *b, int backward) {
    Params *p = &c->params;
    RnnDecoder *dec = &c->dec;
    const int B = b->batch, Tt = b->tgt_len, N = c->N, D = c->D, D_E = dec->D_E, S = dec->S, I = dec->I;
    const int D_A = c->cfg.D_A;
    const size_t hs = (size_t)B * S;
    const float *Z = c->Z, *v = params_data(p, c->att_v);
    init_state(c, dec->s, B);   /* s_0 = tanh(u W_init + b_init), as Xu et al. */
    linear_forward(c->keys, Z, params_data(p, c->att_W1), NULL, B * N, D, D_A);
    rnn_decoder_targets(dec, b);
    for (int t = 0; t < Tt; t++) {
        float *a_t = c->attn + (size_t)t * B * N;
        linear_forward(c->query, dec->s + t * hs, params_data(p, c->att_W2), NULL, B, S, D_A);
        additive_attention_forward(a_t, c->feat + (size_t)t * B * N * D_A, c->keys, c->query, v, c->lens, B, N, D_A);
        attention_context_forward(c->ctx, a_t, Z, B, N, D);
        rnn_decoder_embed(dec, p, t, B);
        put_columns(dec->in + (size_t)t * B * I, I, D_E, c->ctx, B, D);
        rnn_decoder_cell_forward(dec, p, t, B);
    }
    double loss;
    if (!rnn_decoder_loss(dec, p, b, dec->s + hs, dec->dS, c->logits, c->probs, c->dlogits, backward, &loss))
        return loss;
    memset(c->dZ, 0, sizeof(float) * (size_t)B * N * D);
    memset(c->dkeys, 0, sizeof(float) * (size_t)B * N * D_A);
    for (int t = Tt - 1; t >= 0; t--) {
        const float *a_t = c->attn + (size_t)t * B * N;
        rnn_decoder_cell_backward(dec, p, t, B);
        for (int r = 0; r < B; r++)   /* d[in] = [d embed ; d c_t] */
            memcpy(c->dctx + (size_t)r * D, dec->din + (size_t)r * I + D_E, sizeof(float) * (size_t)D);
        rnn_decoder_embed_backward(dec, p, t, B);
        memset(c->dattn, 0, sizeof(float) * (size_t)B * N);
        attention_context_backward(c->dattn, c->dZ, c->dctx, a_t, Z, B, N, D);
        memset(c->dquery, 0, sizeof(float) * (size_t)B * D_A);
        additive_attention_backward(c->dkeys, c->dquery, params_grad(p, c->att_v), c->dscores, c->dattn, a_t,
                                    c->feat + (size_t)t * B * N * D_A, v, c->lens, B, N, D_A);
        linear_backward(dec->g.dh_prev, params_grad(p, c->att_W2), NULL, c->dquery, dec->s + t * hs,
                        params_data(p, c->att_W2), B, S, D_A);
        state_grads_swap(&dec->g);
    }
    /* g.dh = d loss / d s_0 (init_state_backward uses g.dh_prev as scratch) */
    init_state_backward(c, dec->g.dh, dec->s, B);
    linear_backward(c->dZ, params_grad(p, c->att_W1), NULL, c->dkeys, Z, params_data(p, c->att_W1), B * N, D, D_A);
    encoder_backward(c, B);
    return loss;
}

/* ==================================================== model 3: transformer */

/* ids [B, T] -> tdec.x[0] [B, T, D] = sqrt(D) E[ids] + P[0..T) (chapter 06's embedding) */
static void target_embed(Caption *c, const int *ids, int B, int T) {
    const int D = c->D;
    float *X = c->tdec.x[0];
    embedding_forward(X, ids, params_data(&c->params, c->tgt_emb), B * T, D);
    const float scale = sqrtf((float)D);
    for (size_t i = 0; i < (size_t)B * T * D; i++) X[i] *= scale;
    add_positional_encoding(X, c->P_tgt, B, T, D);
}

/* Chapter 06's decoder with the grid Z as its memory. Shapes: tgt_in [B, T'],
 * top = tdec.out [B, T', D], logits [B T', V] (row b T' + t). */
static double transformer_pass(Caption *c, const Batch *b, int backward) {
    Params *p = &c->params;
    const int B = b->batch, Tt = b->tgt_len, D = c->D, V = c->cfg.V, R = B * Tt, N = c->N;
    const BlockMemory mem = {c->Z, c->lens, N};
    target_embed(c, b->tgt_in, B, Tt);
    stack_forward(&c->tdec, NULL, &mem, B, Tt, 0, &c->rng);
    linear_forward(c->logits, c->tdec.out, params_data(p, c->out_W), params_data(p, c->out_b), R, D, V);
    int counted = 0;
    double loss = cross_entropy_forward(c->probs, c->logits, b->tgt_out, R, V, PAD_ID, &counted);
    if (counted == 0) return 0.0;
    loss /= counted;
    if (!backward) return loss;
    memset(c->dlogits, 0, sizeof(float) * (size_t)R * V);
    cross_entropy_backward(c->dlogits, c->probs, b->tgt_out, R, V, PAD_ID, 1.0f / (float)counted);
    memset(c->dtop, 0, sizeof(float) * (size_t)R * D);
    linear_backward(c->dtop, params_grad(p, c->out_W), params_grad(p, c->out_b), c->dlogits, c->tdec.out,
                    params_data(p, c->out_W), R, D, V);
    memset(c->dZ, 0, sizeof(float) * (size_t)B * N * D);
    float *dY0 = stack_backward(&c->tdec, c->dtop, NULL, &mem, c->dZ, B, Tt);
    const float scale = sqrtf((float)D);
    for (size_t i = 0; i < (size_t)R * D; i++) dY0[i] *= scale;
    embedding_backward(params_grad(p, c->tgt_emb), dY0, b->tgt_in, R, D);
    memset(c->du, 0, sizeof(float) * (size_t)B * D);   /* u is not read by this decoder */
    encoder_backward(c, B);
    return loss;
}

/* One pass over a batch of images and captions; with backward, every gradient += */
double caption_train_step(void *self, const Batch *b, int backward) {
    Caption *c = self;
    encoder_forward(c, b->values, b->batch);
    switch (c->cfg.kind) {
    case CAPTION_POOL: return pool_pass(c, b, backward);
    case CAPTION_ATTEND: return attend_pass(c, b, backward);
    default: return transformer_pass(c, b, backward);
    }
}

/* =============================================================== decoding */
/* A row's state: models 1-2, the GRU's s [S]; model 3, [pos, tokens fed so
 * far (<bos> first), T_cap of them] (the prefix is run again at every step:
 * captions are a few words long). */

static int state_size(const Caption *c) { return c->cfg.kind == CAPTION_TRANSFORMER ? 1 + c->T_cap : c->cfg.S; }

void caption_encode(void *self, const Batch *b, float *states) {
    Caption *c = self;
    const int B = b->batch, N = c->N, D = c->D;
    encoder_forward(c, b->values, B);
    memcpy(c->grid, c->Z, sizeof(float) * (size_t)B * N * D);
    if (c->cfg.kind == CAPTION_TRANSFORMER) {
        memset(states, 0, sizeof(float) * (size_t)B * state_size(c));
        return;
    }
    init_state(c, c->s0, B);   /* model 1: c = s_0; model 2: s_0 */
    if (c->cfg.kind == CAPTION_ATTEND)   /* model 1 keeps only c = s_0 */
        linear_forward(c->grid_keys, c->grid, params_data(&c->params, c->att_W1), NULL, B * N, D, c->cfg.D_A);
    memcpy(states, c->s0, sizeof(float) * (size_t)B * c->cfg.S);
}

/* Models 1-2: one GRU step for n rows (the same computation as one time step
 * of pool_pass / attend_pass). attn [n, N] gets model 2's a_t. */
static void rnn_step(Caption *c, int n, const int *src_row, const float *states, const int *prev, float *next,
                     float *logprobs, float *attn) {
    Params *p = &c->params;
    RnnDecoder *dec = &c->dec;
    const int N = c->N, D = c->D, S = dec->S, D_A = c->cfg.D_A;
    rnn_decoder_step_begin(dec, states, n);
    if (c->cfg.kind == CAPTION_POOL) {
        for (int r = 0; r < n; r++)
            memcpy(c->step_ctx + (size_t)r * S, c->s0 + (size_t)src_row[r] * S, sizeof(float) * (size_t)S);
        rnn_decoder_step_embed(dec, p, prev, n);
        put_columns(dec->step_in, dec->I, dec->D_E, c->step_ctx, n, S);
        if (attn) memset(attn, 0, sizeof(float) * (size_t)n * N);   /* no attention: nothing to show */
    } else {
        for (int r = 0; r < n; r++) {
            memcpy(c->step_grid + (size_t)r * N * D, c->grid + (size_t)src_row[r] * N * D, sizeof(float) * (size_t)N * D);
            memcpy(c->step_keys + (size_t)r * N * D_A, c->grid_keys + (size_t)src_row[r] * N * D_A,
                   sizeof(float) * (size_t)N * D_A);
        }
        linear_forward(c->step_query, dec->step_h, params_data(p, c->att_W2), NULL, n, S, D_A);
        additive_attention_forward(c->step_attn, c->step_feat, c->step_keys, c->step_query, params_data(p, c->att_v),
                                   c->lens, n, N, D_A);
        if (attn) memcpy(attn, c->step_attn, sizeof(float) * (size_t)n * N);
        attention_context_forward(c->step_ctx, c->step_attn, c->step_grid, n, N, D);
        rnn_decoder_step_embed(dec, p, prev, n);
        put_columns(dec->step_in, dec->I, dec->D_E, c->step_ctx, n, D);
    }
    rnn_decoder_step_cell(dec, p, n);
    rnn_decoder_step_end(dec, p, dec->step_h_next, n, next, logprobs);
}

/* Model 3: rows that have fed the same number of tokens run together through
 * the decoder over their whole prefix; the logits of the last position are
 * the step's. attn [n, N]: the last block's cross-attention of that position,
 * the mean of its heads. */
static void transformer_step(Caption *c, int n, const int *src_row, const float *states, const int *prev,
                             float *next, float *logprobs, float *attn) {
    Params *p = &c->params;
    const int S = state_size(c), N = c->N, D = c->D, V = c->cfg.V, H = c->cfg.heads, L = c->cfg.dec_layers;
    int *done = xcalloc((size_t)n, sizeof(int)), *rows = xmalloc(sizeof(int) * (size_t)n);
    memcpy(next, states, sizeof(float) * (size_t)n * S);
    for (int r = 0; r < n; r++) {
        float *st = next + (size_t)r * S;
        const int pos = (int)st[0];
        if (pos >= c->T_cap) {   /* out of room: the only way on is <eos> */
            for (int v = 0; v < V; v++) logprobs[(size_t)r * V + v] = v == EOS_ID ? 0.0f : -INFINITY;
            if (attn) memset(attn + (size_t)r * N, 0, sizeof(float) * (size_t)N);
            done[r] = 1;
            continue;
        }
        st[1 + pos] = (float)prev[r];
    }
    for (int r0 = 0; r0 < n; r0++) {
        if (done[r0]) continue;
        const int pos = (int)next[(size_t)r0 * S], T = pos + 1;
        int k = 0;
        for (int r = r0; r < n; r++)
            if (!done[r] && (int)next[(size_t)r * S] == pos) rows[k++] = r;
        for (int i = 0; i < k; i++) {
            const float *st = next + (size_t)rows[i] * S;
            for (int t = 0; t < T; t++) c->step_tokens[(size_t)i * T + t] = (int)st[1 + t];
            memcpy(c->step_grid + (size_t)i * N * D, c->grid + (size_t)src_row[rows[i]] * N * D,
                   sizeof(float) * (size_t)N * D);
        }
        const BlockMemory mem = {c->step_grid, c->lens, N};
        target_embed(c, c->step_tokens, k, T);
        stack_forward(&c->tdec, NULL, &mem, k, T, 0, &c->rng);
        const float *A = attn ? stack_cross_attention(&c->tdec, L - 1, k, T, N) : NULL;   /* [k, H, T, N] */
        for (int i = 0; i < k; i++) {
            const int r = rows[i];
            linear_forward(c->step_logits, c->tdec.out + ((size_t)i * T + pos) * D, params_data(p, c->out_W),
                           params_data(p, c->out_b), 1, D, V);
            log_softmax_forward(logprobs + (size_t)r * V, c->step_logits, 1, V);
            if (A)
                for (int j = 0; j < N; j++) {
                    float sum = 0.0f;
                    for (int h = 0; h < H; h++) sum += A[(((size_t)i * H + h) * T + pos) * N + j];
                    attn[(size_t)r * N + j] = sum / (float)H;
                }
            next[(size_t)r * S] = (float)(pos + 1);
            done[r] = 1;
        }
    }
    free(done);
    free(rows);
}

int caption_cross_maps(Caption *c, const Batch *one, const int *out, int n, float *maps) {
    const int N = c->N, H = c->cfg.heads, L = c->cfg.dec_layers, T = n + 1;
    if (c->cfg.kind != CAPTION_TRANSFORMER) return fail("cross-attention maps: model %s has no decoder blocks",
                                                        caption_kind_name(c->cfg.kind));
    if (T > c->T_cap) return fail("cross-attention maps: a caption of %d words, more than the %d positions", n,
                                  c->T_cap - 1);
    float *states = xcalloc((size_t)state_size(c), sizeof(float));
    caption_encode(c, one, states);                       /* c->grid [1, N, D]: the image's patches */
    c->step_tokens[0] = BOS_ID;                           /* <bos> out[0] .. out[n - 1] */
    memcpy(c->step_tokens + 1, out, sizeof(int) * (size_t)n);
    const BlockMemory mem = {c->grid, c->lens, N};
    target_embed(c, c->step_tokens, 1, T);
    stack_forward(&c->tdec, NULL, &mem, 1, T, 0, &c->rng);
    for (int l = 0; l < L; l++)                           /* each layer's cache: [1, H, T, N] */
        memcpy(maps + (size_t)l * H * T * N, stack_cross_attention(&c->tdec, l, 1, T, N),
               sizeof(float) * (size_t)H * T * N);
    free(states);
    return 0;
}

void caption_step(void *self, int n, const int *src_row, const float *states, const int *prev, float *next,
                  float *logprobs, float *attn) {
    Caption *c = self;
    if (c->cfg.kind == CAPTION_TRANSFORMER) transformer_step(c, n, src_row, states, prev, next, logprobs, attn);
    else rnn_step(c, n, src_row, states, prev, next, logprobs, attn);
}

void caption_interface(Caption *c, Seq2Seq *m) {
    *m = (Seq2Seq){.self = c, .params = &c->params, .train_step = caption_train_step, .encode = caption_encode,
                   .step = caption_step, .destroy = caption_destroy, .state_size = state_size(c),
                   .vocab_size = c->cfg.V, .has_attention = c->cfg.kind != CAPTION_POOL};
}

/* ======================================================= the config's fields */

const ConfigField CAPTION_CONFIG_FIELDS[] = {
    {"caption_model", CONFIG_CHOICE, offsetof(CaptionConfig, kind), .choices = "pool,attend,transformer"},
    {"encoder", CONFIG_CHOICE, offsetof(CaptionConfig, encoder), .choices = "vit,cnn", .fallback = "vit",
     .omit_fallback = 1},
    {"filters", CONFIG_INT, offsetof(CaptionConfig, filters), .lo = 0, .hi = 1024, .fallback = "0",
     .omit_fallback = 1},
    {"side", CONFIG_INT, offsetof(CaptionConfig, side), .lo = 1, .hi = 4096},
    {"patch", CONFIG_INT, offsetof(CaptionConfig, P), .lo = 1, .hi = 4096},
    {"dim", CONFIG_INT, offsetof(CaptionConfig, D), .lo = 4, .hi = 4096},
    {"layers", CONFIG_INT, offsetof(CaptionConfig, layers), .lo = 1, .hi = STACK_MAX_LAYERS},
    {"heads", CONFIG_INT, offsetof(CaptionConfig, heads), .lo = 1, .hi = 256},
    {"ff", CONFIG_INT, offsetof(CaptionConfig, ff), .lo = 1, .hi = 65536},
    {"dec_layers", CONFIG_INT, offsetof(CaptionConfig, dec_layers), .lo = 1, .hi = STACK_MAX_LAYERS},
    {"embed", CONFIG_INT, offsetof(CaptionConfig, D_E), .lo = 1, .hi = 4096},
    {"state", CONFIG_INT, offsetof(CaptionConfig, S), .lo = 1, .hi = 4096, .old_key = "hidden"},
    {"attn", CONFIG_INT, offsetof(CaptionConfig, D_A), .lo = 1, .hi = 4096},
};
const int CAPTION_CONFIG_N = (int)(sizeof CAPTION_CONFIG_FIELDS / sizeof CAPTION_CONFIG_FIELDS[0]);

int caption_load_cnn(Caption *c, const char *path, int frozen) {
    if (c->cfg.encoder != CAPTION_ENCODER_CNN)
        return fail("%s: a pretrained CNN goes with the CNN encoder (--encoder cnn)", path);
    char *text = NULL;
    if (checkpoint_read_config(path, &text) < 0) return -1;
    CnnConfig cc;
    int rc = checkpoint_check_model(path, text, CNN_MODEL_NAME, "07_cnn");
    if (rc == 0 && config_read(text, CNN_CONFIG_FIELDS, CNN_CONFIG_N, &cc) < 0) rc = fail("%s: %s", path, last_error());
    free(text);
    if (rc < 0) return -1;
    if (cc.channels != 1)
        return fail("%s: a CNN of %d input channels: expected 1 (grey scenes)", path, cc.channels);
    if (cc.filters != c->cfg.filters)
        return fail("%s: a CNN of %d filters, but this captioner's encoder has %d: give --filters %d", path,
                    cc.filters, c->cfg.filters, cc.filters);
    Classifier pretrained;   /* the whole classifier read, its convolutions kept */
    if (cnn_build(&pretrained, &cc, 1, 0) < 0) return -1;
    rc = checkpoint_load(path, pretrained.params);
    const char *names[] = {"conv1.W", "conv1.b", "conv2.W", "conv2.b"};
    for (int i = 0; rc == 0 && i < 4; i++) {
        const ParamTensor *from = params_find(pretrained.params, names[i]), *to = params_find(&c->params, names[i]);
        if (!from || !to || from->count != to->count) {
            rc = fail("%s: tensor %s is not the shape of this captioner's", path, names[i]);
            break;
        }
        memcpy(c->params.data + to->offset, pretrained.params->data + from->offset, sizeof(float) * to->count);
    }
    pretrained.destroy(pretrained.self);
    if (rc == 0) c->frozen = frozen;
    return rc;
}

int caption_build(Seq2Seq *m, const Dataset *d, const CaptionConfig *config, int max_batch, uint64_t seed) {
    CaptionConfig cfg = *config;
    if (!d->value_size || cfg.side * cfg.side != d->value_size)
        return fail("side=%d: the data's images have %d pixels, not %d x %d", cfg.side, d->value_size, cfg.side,
                    cfg.side);
    cfg.V = d->tgt_vocab.size;
    cfg.max_words = d->max_tgt_len;
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("07_caption", "a smaller --batch or --dim");
    Caption *c = xmalloc(sizeof *c);
    if (caption_create(c, &cfg, max_batch, seed) < 0) {
        memory_budget_end();
        caption_free(c);
        free(c);
        return -1;
    }
    memory_budget_end();
    caption_interface(c, m);
    return 0;
}
