/* vit.c - chapter 07: the Vision Transformer (see vit.h): patch embedding,
 * class token and positions, chapter 06's stack, pooling and a linear head,
 * forward and backward by hand. */
#include "07_vision_transformer/vit.h"
#include "07_vision_transformer/locality_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "04_self_attention/self_attention.h"
#include "nn/layers.h"
#include "util/error.h"
#include "util/util.h"
#include "train/memory.h"

const char *vit_pool_name(VitPool p) {
    return p == VIT_POOL_MEAN ? "mean" : p == VIT_POOL_ATTENTION ? "attention" : "cls";
}
const char *vit_pos_name(VitPos p) { return p == VIT_POS_SINUSOIDAL_2D ? "sinusoidal2d" : "learned"; }

int vit_pool_from_name(const char *name, VitPool *p) {
    if (strcmp(name, "cls") == 0) *p = VIT_POOL_CLS;
    else if (strcmp(name, "mean") == 0) *p = VIT_POOL_MEAN;
    else if (strcmp(name, "attention") == 0) *p = VIT_POOL_ATTENTION;
    else return fail("pool: expected cls, mean or attention, got '%s'", name);
    return 0;
}

int vit_pos_from_name(const char *name, VitPos *p) {
    if (strcmp(name, "learned") == 0) *p = VIT_POS_LEARNED;
    else if (strcmp(name, "sinusoidal2d") == 0) *p = VIT_POS_SINUSOIDAL_2D;
    else return fail("pos: expected learned or sinusoidal2d, got '%s'", name);
    return 0;
}

/* P [T, D]: row r's sinusoids in the first D/2 numbers, column c's in the last D/2 */
void vit_positions_2d(float *P, int grid_rows, int grid_cols, int D, int has_cls) {
    const int half = D / 2, off = has_cls ? 1 : 0;
    float *Pr = xcalloc((size_t)grid_rows * half, sizeof(float));
    float *Pc = xcalloc((size_t)grid_cols * half, sizeof(float));
    positional_encoding_sinusoidal(Pr, grid_rows, half);     /* chapter 04's 1-D sinusoids */
    positional_encoding_sinusoidal(Pc, grid_cols, half);
    if (has_cls) memset(P, 0, sizeof(float) * (size_t)D);
    /* Exercise 07.positions_2d (2 points): patch (r, c) gets [row r's sinusoids ; column c's sinusoids]. */
    for (int r = 0; r < grid_rows; r++)
        for (int c = 0; c < grid_cols; c++) {
            float *row = P + (size_t)(off + r * grid_cols + c) * D;
            memcpy(row, Pr + (size_t)r * half, sizeof(float) * (size_t)half);
            memcpy(row + half, Pc + (size_t)c * half, sizeof(float) * (size_t)half);
        }
    /* End of exercise 07.positions_2d. */
    free(Pr);
    free(Pc);
}

/* Z [B, T, D] -> pooled [B, D] */
void vit_pool_forward(float *pooled, const float *Z, VitPool pool, int B, int T, int D) {
    /* Exercise 07.pooling (3 points): what the head reads, the class token's output or the mean over T. */
    for (int b = 0; b < B; b++) {
        const float *z = Z + (size_t)b * T * D;
        float *u = pooled + (size_t)b * D;
        if (pool == VIT_POOL_CLS) {
            memcpy(u, z, sizeof(float) * (size_t)D);
            continue;
        }
        for (int d = 0; d < D; d++) {
            double s = 0.0;
            for (int t = 0; t < T; t++) s += z[(size_t)t * D + d];
            u[d] = (float)(s / T);
        }
    }
    /* End of exercise 07.pooling. */
}

/* dpooled [B, D] -> dZ [B, T, D] += */
void vit_pool_backward(float *dZ, const float *dpooled, VitPool pool, int B, int T, int D) {
    const float scale = 1.0f / (float)T;
    /* Exercise 07.pooling, continued: its backward, dpooled back to the outputs it read. */
    for (int b = 0; b < B; b++) {
        float *dz = dZ + (size_t)b * T * D;
        const float *du = dpooled + (size_t)b * D;
        if (pool == VIT_POOL_CLS) {
            for (int d = 0; d < D; d++) dz[d] += du[d];
            continue;
        }
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) dz[(size_t)t * D + d] += du[d] * scale;
    }
    /* End of exercise 07.pooling. */
}

/* Z [B, T, D], w [D] -> pooled [B, D], a [B, T]: for each image, chapter
 * 03's steps with the one query w, keys and values Z[b] (alpha 1: the plain
 * dot score e_t = w . Z[t]; the scale is w's to learn). */
void vit_attention_pool_forward(float *pooled, float *a, const float *Z, const float *w, int B, int T, int D) {
    for (int b = 0; b < B; b++) {
        const float *z = Z + (size_t)b * T * D;
        const DotHead head = {w, D, z, D, z, D, 1, T, D, D, 1.0f};   /* one query w; keys and values Z[b] */
        dot_attention_forward(pooled + (size_t)b * D, D, a + (size_t)b * T, a + (size_t)b * T, &head, NULL, NULL);
    }
}

/* dpooled [B, D] -> dZ [B, T, D] += (as keys and as values), dw [D] += */
void vit_attention_pool_backward(float *dZ, float *dw, float *scratch, const float *dpooled, const float *a,
                                 const float *Z, const float *w, int B, int T, int D) {
    for (int b = 0; b < B; b++) {
        const float *z = Z + (size_t)b * T * D;
        float *dz = dZ + (size_t)b * T * D;
        const DotHead head = {w, D, z, D, z, D, 1, T, D, D, 1.0f};
        const DotHeadGrads grads = {dw, D, dz, D, dz, D};   /* Z[b] gets both its keys' and its values' part */
        dot_attention_backward(&grads, scratch, dpooled + (size_t)b * D, D, a + (size_t)b * T, NULL, &head);
    }
}

/* The encoder's blocks; v's Linformer attention when c asks for it (vit_create made it). */
static BlockSpec encoder_spec(const Vit *v, const VitConfig *c) {
    const BlockSelfAttention *own = c->locality ? &locality_attention : c->linformer ? &v->linformer_attention : NULL;
    return (BlockSpec){.D = c->patch.D, .H = c->heads, .D_H = c->patch.D / c->heads, .F = c->ff,
                       .norm_place = BLOCK_PRE_NORM, .norm = c->norm, .mlp = BLOCK_MLP_GELU,
                       .dropout = c->dropout, .attention = MULTI_HEAD_PLAIN, .causal = 0, .cross = 0,
                       .self_attention = own, .drop_path = c->drop_path};
}

int vit_create(Vit *v, const VitConfig *cfg, int max_B, uint64_t seed) {
    memset(v, 0, sizeof *v);
    params_init(&v->params);
    if (patch_embed_check(&cfg->patch) < 0) return -1;
    const int D = cfg->patch.D;
    if (cfg->heads < 1 || D % cfg->heads != 0)
        return fail("heads=%d: expected a divisor of the width D = %d", cfg->heads, D);
    if (cfg->pos == VIT_POS_SINUSOIDAL_2D && D % 4 != 0)
        return fail("dim=%d: the 2-D sinusoids need a width divisible by 4", D);
    if (cfg->ff < 1) return fail("ff=%d: expected an MLP width >= 1", cfg->ff);
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f)) return fail("dropout=%g: expected 0 <= p < 1", cfg->dropout);
    if (!(cfg->drop_path >= 0.0f && cfg->drop_path < 1.0f))
        return fail("drop_path=%g: expected 0 <= p < 1", cfg->drop_path);
    if (!(cfg->keep >= 0.0f && cfg->keep <= 1.0f))
        return fail("keep=%g: expected a fraction of the patches in (0, 1] (0: all)", cfg->keep);
    if (!(cfg->keep_until >= 0.0f && cfg->keep_until <= 1.0f))
        return fail("keep_until=%g: expected a fraction of the training steps in (0, 1] (0: to the last step)",
                    cfg->keep_until);
    if (cfg->classes < 2) return fail("classes=%d: expected at least 2", cfg->classes);
    if (!(cfg->label_smoothing >= 0.0f && cfg->label_smoothing < 1.0f))
        return fail("label_smoothing=%g: expected 0 <= eps < 1", cfg->label_smoothing);
    if (max_B < 1) return fail("batch %d: expected at least 1 image", max_B);
    v->embed = cfg->patch;
    if (cfg->stem < 0) return fail("stem=%d: expected 0 (no stem) or a number of channels >= 1", cfg->stem);
    if (cfg->stem > 0) {
        /* the stem halves the image: the patches then read P / 2 cells of its map through K / 2 kernels */
        const PatchEmbedSpec *s = &cfg->patch;
        if (s->rows % 2 || s->cols % 2)
            return fail("stem=%d: the stem halves the image, so its rows and cols must be even (got %d x %d)",
                        cfg->stem, s->rows, s->cols);
        if (s->P % 2)
            return fail("stem=%d: the stem halves the patch too, so the patch side must be even (got %d)", cfg->stem,
                        s->P);
        if (s->K && (s->K - s->P) % 4)
            return fail("stem=%d: the stem halves the kernel too, so kernel - patch must be a multiple of 4 (got "
                        "%d - %d)", cfg->stem, s->K, s->P);
        v->stem_spec = (PatchEmbedSpec){.channels = s->channels, .rows = s->rows, .cols = s->cols, .P = 2,
                                        .D = cfg->stem, .K = 4};
        v->embed = (PatchEmbedSpec){.channels = cfg->stem, .rows = s->rows / 2, .cols = s->cols / 2, .P = s->P / 2,
                                    .D = D, .K = s->K / 2};
    }
    v->cfg = *cfg;
    v->N = patch_embed_count(&cfg->patch);
    v->T = v->N + (cfg->pool == VIT_POOL_CLS);
    v->D = D;
    v->C = cfg->classes;
    v->max_B = max_B;

    Params *p = &v->params;
    const int D_in = patch_embed_dim(&v->embed);
    v->patch_W = params_add(p, "patch.W", 2, (int[]){D_in, D});
    v->patch_b = params_add(p, "patch.b", 1, (int[]){D});
    if (cfg->stem) {
        v->stem_W = params_add(p, "stem.W", 2, (int[]){patch_embed_dim(&v->stem_spec), cfg->stem});
        v->stem_b = params_add(p, "stem.b", 1, (int[]){cfg->stem});
    }
    if (cfg->pool == VIT_POOL_CLS) v->cls = params_add(p, "cls", 1, (int[]){D});
    if (cfg->pos == VIT_POS_LEARNED) v->pos = params_add(p, "pos", 2, (int[]){v->T, D});
    if (cfg->pool == VIT_POOL_ATTENTION) v->pool_w = params_add(p, "pool.w", 1, (int[]){D});
    if (cfg->linformer) {
        if (cfg->locality) return fail("linformer and locality: expected one of the two attentions, not both");
        v->linformer = (Linformer){cfg->linformer, v->T};
        if (linformer_check(&v->linformer) != 0) return -1;
        v->linformer_attention = linformer_hook(&v->linformer);
    }
    const BlockSpec spec = encoder_spec(v, cfg);
    if (stack_declare(&v->st, &spec, cfg->layers, p, "enc") < 0) return -1;
    if (stack_has_final_norm(&spec)) {
        v->st.norm_g = params_add(p, "enc_norm.gamma", 1, (int[]){D});
        if (block_norm_has_beta(&spec)) v->st.norm_b = params_add(p, "enc_norm.beta", 1, (int[]){D});
    }
    v->n_running = stack_running_items(&v->st, v->running);
    v->head_W = params_add(p, "head.W", 2, (int[]){D, v->C});
    v->head_b = params_add(p, "head.b", 1, (int[]){v->C});
    if (params_alloc(p) < 0) return -1;

    Rng rng;
    rng_seed(&rng, seed, 1);
    patch_embed_init(&v->embed, params_data(p, v->patch_W), params_data(p, v->patch_b), &rng);
    if (v->cls) init_normal(params_data(p, v->cls), (size_t)D, 0.02f, &rng);
    if (v->pos) {
        init_normal(params_data(p, v->pos), (size_t)v->T * D, 0.02f, &rng);
    } else {
        v->P_fixed = xcalloc((size_t)v->T * D, sizeof(float));
        vit_positions_2d(v->P_fixed, cfg->patch.rows / cfg->patch.P, cfg->patch.cols / cfg->patch.P, D,
                         cfg->pool == VIT_POOL_CLS);
    }
    stack_init_weights(&v->st, &rng);
    if (v->pool_w) init_constant(params_data(p, v->pool_w), (size_t)D, 0.0f);   /* a uniform: mean pooling */
    init_xavier(params_data(p, v->head_W), D, v->C, &rng);
    init_constant(params_data(p, v->head_b), (size_t)v->C, 0.0f);
    if (cfg->stem) patch_embed_init(&v->stem_spec, params_data(p, v->stem_W), params_data(p, v->stem_b), &rng);
    rng_seed(&v->dropout_rng, seed, 7);
    v->rng_at_forward = v->dropout_rng;

    stack_alloc(&v->st, max_B, v->T, 0);
    const size_t BND = (size_t)max_B * v->N * D;
    v->patches = xcalloc(BND, sizeof(float));
    v->patch_cache = xcalloc(patch_embed_cache_floats(&v->embed, max_B), sizeof(float));
    if (cfg->stem) {
        const size_t BRS = (size_t)max_B * patch_embed_count(&v->stem_spec) * cfg->stem;
        v->stem_pre = xcalloc(BRS, sizeof(float));
        v->stem_act = xcalloc(BRS, sizeof(float));
        v->stem_map = xcalloc(BRS, sizeof(float));
        v->dstem_pre = xcalloc(BRS, sizeof(float));
        v->dstem_act = xcalloc(BRS, sizeof(float));
        v->dstem_map = xcalloc(BRS, sizeof(float));
        v->stem_cache = xcalloc(patch_embed_cache_floats(&v->stem_spec, max_B), sizeof(float));
        v->embed_scratch = xcalloc(patch_embed_scratch_floats(&v->embed, max_B), sizeof(float));
    }
    v->pooled = xcalloc((size_t)max_B * D, sizeof(float));
    if (v->pool_w) {
        v->pool_a = xcalloc((size_t)max_B * v->T, sizeof(float));
        v->pool_scratch = xcalloc((size_t)2 * v->T, sizeof(float));
    }
    v->logits = xcalloc((size_t)max_B * v->C, sizeof(float));
    v->probs = xcalloc((size_t)max_B * v->C, sizeof(float));
    v->dlogits = xcalloc((size_t)max_B * v->C, sizeof(float));
    v->dpooled = xcalloc((size_t)max_B * D, sizeof(float));
    v->dout = xcalloc((size_t)max_B * v->T * D, sizeof(float));
    v->dpatches = xcalloc(BND, sizeof(float));
    if (vit_kept_patches(v) < v->N) v->kept = xcalloc((size_t)max_B * vit_kept_patches(v), sizeof(int));
    v->T_run = v->T;
    return 0;
}

void vit_free(Vit *v) {
    stack_free(&v->st);
    params_free(&v->params);
    free(v->P_fixed); free(v->patches); free(v->patch_cache); free(v->pooled); free(v->logits);
    free(v->probs); free(v->dlogits); free(v->dpooled); free(v->dout); free(v->dpatches);
    free(v->stem_pre); free(v->stem_act); free(v->stem_map); free(v->dstem_pre); free(v->dstem_act);
    free(v->dstem_map); free(v->stem_cache); free(v->embed_scratch); free(v->kept);
    free(v->pool_a); free(v->pool_scratch);
    memset(v, 0, sizeof *v);
}

static const float *positions(const Vit *v) {
    return v->pos ? params_data((Params *)&v->params, v->pos) : v->P_fixed;
}

/* x [B, rows, cols] -> y [B, cols, rows], each image's matrix transposed. The stem's
 * convolution writes one row of S channels per place ([R, S]); the patch embedding reads
 * S planes of R places ([S, R]); the backward turns the gradient the other way. */
static void transpose_each(float *y, const float *x, int B, int rows, int cols) {
    for (int b = 0; b < B; b++) {
        const float *xb = x + (size_t)b * rows * cols;
        float *yb = y + (size_t)b * rows * cols;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) yb[(size_t)c * rows + r] = xb[(size_t)r * cols + c];
    }
}

/* images [B, channels, rows, cols] -> (the stem's map [B, S, rows / 2, cols / 2]) -> patches [B, N, D] */
static void embed_forward(Vit *v, const float *images, int B) {
    Params *p = &v->params;
    if (v->cfg.stem) {
        const int R = patch_embed_count(&v->stem_spec), S = v->cfg.stem;
        patch_embed_forward(v->stem_pre, v->stem_cache, images, params_data(p, v->stem_W),
                            params_data(p, v->stem_b), &v->stem_spec, B);
        gelu_forward(v->stem_act, v->stem_pre, B * R * S);
        transpose_each(v->stem_map, v->stem_act, B, R, S);
        images = v->stem_map;
    }
    patch_embed_forward(v->patches, v->patch_cache, images, params_data(p, v->patch_W), params_data(p, v->patch_b),
                        &v->embed, B);
}

/* dpatches [B, N, D] -> the embedding's gradients (and the stem's) += */
static void embed_backward(Vit *v, const float *dpatches, int B) {
    Params *p = &v->params;
    if (!v->cfg.stem) {
        patch_embed_backward(NULL, params_grad(p, v->patch_W), params_grad(p, v->patch_b), NULL, dpatches,
                             v->patch_cache, params_data(p, v->patch_W), &v->embed, B);
        return;
    }
    const int R = patch_embed_count(&v->stem_spec), S = v->cfg.stem;
    const size_t BRS = (size_t)B * R * S;
    memset(v->dstem_map, 0, sizeof(float) * BRS);
    patch_embed_backward(v->dstem_map, params_grad(p, v->patch_W), params_grad(p, v->patch_b), v->embed_scratch,
                         dpatches, v->patch_cache, params_data(p, v->patch_W), &v->embed, B);
    transpose_each(v->dstem_act, v->dstem_map, B, S, R);
    memset(v->dstem_pre, 0, sizeof(float) * BRS);
    gelu_backward(v->dstem_pre, v->dstem_act, v->stem_pre, (int)BRS);
    patch_embed_backward(NULL, params_grad(p, v->stem_W), params_grad(p, v->stem_b), NULL, v->dstem_pre,
                         v->stem_cache, params_data(p, v->stem_W), &v->stem_spec, B);
}

void vit_set_progress(Vit *v, int step, int steps) {
    const float u = v->cfg.keep_until;
    v->unmasked = u > 0.0f && u < 1.0f && (double)step >= (double)u * steps;
}

/* (batch norm: the second pass normalises with its own statistics but leaves
 * the running ones as the first pass left them, as PyTorch's SAM recipes do) */
void vit_replay(Vit *v) {
    v->dropout_rng = v->rng_at_forward;
    v->st.hold_running = 1;
}

int vit_kept_patches(const Vit *v) {
    const float k = v->cfg.keep;
    if (k <= 0.0f || k >= 1.0f) return v->N;
    const int K = (int)lroundf(k * (float)v->N);
    return K < 1 ? 1 : K;
}

/* kept [K]: K of the N patches drawn without replacement, in increasing order */
static void draw_kept(int *kept, int K, int N, Rng *rng) {
    int chosen = 0;
    /* selection sampling (Knuth's algorithm S): patch n is taken with probability
     * (still to take) / (still to look at), which keeps every K-subset equally likely */
    for (int n = 0; n < N && chosen < K; n++)
        if (rng_below(rng, (uint32_t)(N - n)) < (uint32_t)(K - chosen)) kept[chosen++] = n;
}

/* images [B, channels, rows, cols] -> X_0 [B, T', D] -> Z -> u [B, D] -> logits [B, C]
 * (T' = T, or off + K while training with patch dropout) */
double vit_forward(Vit *v, const float *images, const int *targets, int B) {
    Params *p = &v->params;
    const int N = v->N, D = v->D, off = v->T - N;
    const int K = v->training && v->kept && !v->unmasked ? vit_kept_patches(v) : N, T = off + K;
    v->B = B;
    v->T_run = T;
    v->rng_at_forward = v->dropout_rng;
    embed_forward(v, images, B);
    const float *P = positions(v), *cls = v->cls ? params_data(p, v->cls) : NULL;
    float *X0 = v->st.x[0];
    for (int b = 0; b < B; b++) {
        float *x = X0 + (size_t)b * T * D;
        if (cls)
            for (int d = 0; d < D; d++) x[d] = cls[d] + P[d];
        const float *e = v->patches + (size_t)b * N * D;
        if (K == N) {
            for (size_t i = 0; i < (size_t)N * D; i++) x[(size_t)off * D + i] = e[i] + P[(size_t)off * D + i];
            continue;
        }
        /* token off + j is patch kept[j] with patch kept[j]'s position: a lookup
         * of rows by index, as an embedding looks up tokens (layers.h) */
        int *kept = v->kept + (size_t)b * K;
        draw_kept(kept, K, N, &v->dropout_rng);
        float *xp = x + (size_t)off * D;
        embedding_forward(xp, kept, e, K, D);
        for (int j = 0; j < K; j++) {
            const float *Pj = P + (size_t)(off + kept[j]) * D;
            for (int d = 0; d < D; d++) xp[(size_t)j * D + d] += Pj[d];
        }
    }
    stack_forward(&v->st, NULL, NULL, B, T, v->training, &v->dropout_rng);
    if (v->pool_w)
        vit_attention_pool_forward(v->pooled, v->pool_a, v->st.out, params_data(p, v->pool_w), B, T, D);
    else
        vit_pool_forward(v->pooled, v->st.out, v->cfg.pool, B, T, D);
    linear_forward(v->logits, v->pooled, params_data(p, v->head_W), params_data(p, v->head_b), B, D, v->C);
    if (!targets) return 0.0;
    int counted = 0;
    double sum = cross_entropy_forward(v->probs, v->logits, targets, B, v->C, -1, &counted);
    return counted ? sum / counted : 0.0;
}

void vit_backward(Vit *v, const int *targets) {
    Params *p = &v->params;
    const int B = v->B, N = v->N, T = v->T_run, D = v->D, C = v->C, off = v->T - N, K = T - off;
    memset(v->dlogits, 0, sizeof(float) * (size_t)B * C);
    cross_entropy_smoothed_backward(v->dlogits, v->probs, targets, B, C, -1, v->cfg.label_smoothing,
                                    1.0f / (float)B);
    memset(v->dpooled, 0, sizeof(float) * (size_t)B * D);
    linear_backward(v->dpooled, params_grad(p, v->head_W), params_grad(p, v->head_b), v->dlogits, v->pooled,
                    params_data(p, v->head_W), B, D, C);
    memset(v->dout, 0, sizeof(float) * (size_t)B * T * D);
    if (v->pool_w)
        vit_attention_pool_backward(v->dout, params_grad(p, v->pool_w), v->pool_scratch, v->dpooled, v->pool_a,
                                    v->st.out, params_data(p, v->pool_w), B, T, D);
    else
        vit_pool_backward(v->dout, v->dpooled, v->cfg.pool, B, T, D);
    const float *dX0 = stack_backward(&v->st, v->dout, NULL, NULL, NULL, B, T);
    /* X_0 = [cls; patches] + P: each gets the gradient of its rows */
    if (v->cls) {
        float *dcls = params_grad(p, v->cls);
        for (int b = 0; b < B; b++)
            for (int d = 0; d < D; d++) dcls[d] += dX0[(size_t)b * T * D + d];
    }
    if (K < N) {   /* patch dropout: each kept row's gradient goes back to its patch and its position,
                    * the embedding's backward (a scatter-add by index); dropped patches get zeros */
        float *dP = v->pos ? params_grad(p, v->pos) : NULL;
        memset(v->dpatches, 0, sizeof(float) * (size_t)B * N * D);
        for (int b = 0; b < B; b++) {
            const int *kept = v->kept + (size_t)b * K;
            const float *g = dX0 + (size_t)b * T * D;
            embedding_backward(v->dpatches + (size_t)b * N * D, g + (size_t)off * D, kept, K, D);
            if (!dP) continue;
            for (int i = 0; i < off * D; i++) dP[i] += g[i];   /* the class token's position */
            embedding_backward(dP + (size_t)off * D, g + (size_t)off * D, kept, K, D);
        }
        embed_backward(v, v->dpatches, B);
        return;
    }
    if (v->pos) add_positional_encoding_backward(params_grad(p, v->pos), dX0, B, T, D);
    const float *dpatches = dX0;
    if (off) {
        for (int b = 0; b < B; b++)
            memcpy(v->dpatches + (size_t)b * N * D, dX0 + ((size_t)b * T + off) * D, sizeof(float) * (size_t)N * D);
        dpatches = v->dpatches;
    }
    embed_backward(v, dpatches, B);
}

void vit_predict(const Vit *v, int *pred) {
    for (int b = 0; b < v->B; b++) {
        const float *z = v->logits + (size_t)b * v->C;
        int best = 0;
        for (int c = 1; c < v->C; c++) if (z[c] > z[best]) best = c;
        pred[b] = best;
    }
}

const float *vit_attention(const Vit *v, int l) { return stack_attention(&v->st, l, v->B, v->T_run, 0); }

/* ------------------------------------------------------------ config */

/* The checkpoint's lines (vit.h). The keys added after checkpoints were
 * saved have a fallback: what those checkpoints were trained with (kernel
 * 0: the kernel is the patch; no locality, stem, label smoothing, stochastic
 * depth or patch dropout). Ranges here are what a line may say; vit_create
 * checks the rest (a dropout below 1, heads that divide dim, ...). */
const ConfigField VIT_CONFIG_FIELDS[] = {
    {"channels", CONFIG_INT, offsetof(VitConfig, patch.channels), .lo = 1, .hi = 16},
    {"rows", CONFIG_INT, offsetof(VitConfig, patch.rows), .lo = 1, .hi = 4096},
    {"cols", CONFIG_INT, offsetof(VitConfig, patch.cols), .lo = 1, .hi = 4096},
    {"patch", CONFIG_INT, offsetof(VitConfig, patch.P), .lo = 1, .hi = 4096},
    {"kernel", CONFIG_INT, offsetof(VitConfig, patch.K), .lo = 0, .hi = 4096, .fallback = "0"},
    {"dim", CONFIG_INT, offsetof(VitConfig, patch.D), .lo = 1, .hi = 4096},
    {"layers", CONFIG_INT, offsetof(VitConfig, layers), .lo = 1, .hi = STACK_MAX_LAYERS},
    {"heads", CONFIG_INT, offsetof(VitConfig, heads), .lo = 1, .hi = 4096},
    {"ff", CONFIG_INT, offsetof(VitConfig, ff), .lo = 1, .hi = 65536},
    {"dropout", CONFIG_FLOAT, offsetof(VitConfig, dropout), .lo = 0, .hi = 1},
    {"pool", CONFIG_CHOICE, offsetof(VitConfig, pool), .choices = "cls,mean,attention"},
    {"pos", CONFIG_CHOICE, offsetof(VitConfig, pos), .choices = "learned,sinusoidal2d"},
    {"classes", CONFIG_INT, offsetof(VitConfig, classes), .lo = 2, .hi = 100000},
    {"label_smoothing", CONFIG_FLOAT, offsetof(VitConfig, label_smoothing), .lo = 0, .hi = 1, .fallback = "0"},
    {"locality", CONFIG_INT, offsetof(VitConfig, locality), .lo = 0, .hi = 1, .fallback = "0"},
    {"stem", CONFIG_INT, offsetof(VitConfig, stem), .lo = 0, .hi = 256, .fallback = "0"},
    {"drop_path", CONFIG_FLOAT, offsetof(VitConfig, drop_path), .lo = 0, .hi = 1, .fallback = "0"},
    {"keep", CONFIG_FLOAT, offsetof(VitConfig, keep), .lo = 0, .hi = 1, .fallback = "0"},
    {"keep_until", CONFIG_FLOAT, offsetof(VitConfig, keep_until), .lo = 0, .hi = 1, .fallback = "1"},
    {"norm_type", CONFIG_CHOICE, offsetof(VitConfig, norm), .choices = "layernorm,rmsnorm,none,batchnorm",
     .fallback = "layernorm", .omit_fallback = 1},
    {"linformer", CONFIG_INT, offsetof(VitConfig, linformer), .lo = 0, .hi = 65536, .fallback = "0",
     .omit_fallback = 1},
};
const int VIT_CONFIG_N = (int)(sizeof VIT_CONFIG_FIELDS / sizeof VIT_CONFIG_FIELDS[0]);

void vit_config_label(const VitConfig *c, char *out, int cap) {
    const int P = c->patch.P, N = patch_embed_count(&c->patch);
    char through[48] = "", stem[32] = "", keep[96] = "", attention[48] = "";
    if (c->patch.K && c->patch.K != P)
        snprintf(through, sizeof through, " read through %d x %d kernels", c->patch.K, c->patch.K);
    if (c->stem) snprintf(stem, sizeof stem, " with a %d-channel stem", c->stem);
    if (c->keep > 0.0f && c->keep < 1.0f && c->keep_until < 1.0f)
        snprintf(keep, sizeof keep, ", patch dropout (keep %g for %g%% of the steps)", (double)c->keep,
                 100.0 * c->keep_until);
    else if (c->keep > 0.0f && c->keep < 1.0f)
        snprintf(keep, sizeof keep, ", patch dropout (keep %g)", (double)c->keep);
    const char *norm = c->norm == BLOCK_RMSNORM ? ", RMSNorm" : c->norm == BLOCK_BATCHNORM ? ", batch norm"
                     : c->norm == BLOCK_NO_NORM ? ", no norm" : "";
    if (c->locality) snprintf(attention, sizeof attention, ", locality attention");
    if (c->linformer) snprintf(attention, sizeof attention, ", Linformer attention (k = %d)", c->linformer);
    snprintf(out, (size_t)cap, "ViT%s, patch %d (%d patches)%s, %s pooling%s%s%s", stem, P, N, through,
             vit_pool_name(c->pool), attention, keep, norm);
}

/* ---------------------------------------------------- the Classifier face */

static double face_forward(void *self, const Examples *e) { return vit_forward(self, e->values, e->targets, e->B); }
static void face_backward(void *self, const Examples *e) { vit_backward(self, e->targets); }
static void face_predict(void *self, int *pred) { vit_predict(self, pred); }
static const float *face_logits(void *self) { return ((Vit *)self)->logits; }
static void face_set_training(void *self, int on) { ((Vit *)self)->training = on; }
static void face_set_progress(void *self, int step, int steps) { vit_set_progress(self, step, steps); }
static void face_replay(void *self) { vit_replay(self); }
static void face_destroy(void *self) {
    vit_free(self);
    free(self);
}

int vit_build(Classifier *c, const VitConfig *cfg, int max_B, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("07_vision_transformer", "a smaller --batch, --dim, --ff or --layers, or larger patches");
    Vit *v = xmalloc(sizeof *v);
    if (vit_create(v, cfg, max_B, seed) < 0) {
        memory_budget_end();
        vit_free(v);
        free(v);
        return -1;
    }
    memory_budget_end();
    memset(c, 0, sizeof *c);
    c->self = v;
    c->params = &v->params;
    c->max_B = max_B;
    c->n_out = 1;
    c->classes = v->C;
    c->layers = cfg->layers;
    c->heads = cfg->heads;
    c->forward = face_forward;
    c->backward = face_backward;
    c->predict = face_predict;
    c->logits = face_logits;
    c->attention = NULL;
    c->destroy = face_destroy;
    c->set_training = face_set_training;
    c->set_progress = face_set_progress;
    c->replay = face_replay;
    c->rng = &v->dropout_rng;
    c->buffers = v->running;
    c->n_buffers = v->n_running;
    return 0;
}

Vit *vit_of(const Classifier *c) { return c->self; }
