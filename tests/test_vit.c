/* test_vit.c - chapter 07: the Vision Transformer (vit.h).
 *
 *  - pooling (class token and mean) against central finite differences;
 *    attention pooling's gradients (the outputs and the query w) too, its
 *    weights and output against loops written from the definition, and
 *    w = 0 giving mean pooling;
 *  - the whole model's gradient (every parameter) against central finite
 *    differences, for cls, mean and attention pooling, learned and 2-D sinusoidal
 *    positions, on 8 x 8 images in 4 patches (and a 3-channel image), with
 *    overlapping patches (8 x 8 kernels around the 4 x 4 patches), with
 *    label smoothing (the loss then written from its definition), and with
 *    the convolutional stem (each of its weights checked, not a sample);
 *  - the 2-D sinusoids: the class token's row is 0, patches in one grid row
 *    share their first D/2 numbers (chapter 04's sinusoids of the row), in
 *    one grid column their last D/2;
 *  - evaluation ignores dropout and drop path (the same logits as p = 0),
 *    training does not; the gradient with drop path (the masks fixed);
 *  - patch dropout: evaluation reads every patch, training the kept ones
 *    (each K-subset about equally often), and with keep_until it stops at
 *    that fraction of the driver's steps (then the logits of evaluation);
 *    replay (the second pass of a sharpness-aware step) drops the same
 *    patches and dropout masks again, a plain second forward new ones;
 *  - the config's checkpoint lines (VIT_CONFIG_FIELDS) round trip, older
 *    checkpoints' missing lines read as what they were trained with, and bad
 *    sizes
 *    (the stem's among them) refused with one clear message;
 *  - a few AdamW steps fit a fixed batch (the loss falls);
 *  - chapter 07 against chapter 06: the encoder output Z is, bit for bit,
 *    chapter 06's blocks and final norm (block_forward, block_norm_forward)
 *    run on X_0 = [x_cls; patch_embed(images)] + E_pos built by hand.
 * The loss of the model checks is the mean cross-entropy the model returns
 * (with eps = 0; model_loss checks that it equals the definition),
 * computed from float activations: eps = 3e-3 and max_rel_err < 3e-2, as the
 * chapter 06 model checks (test_transformer.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/self_attention.h"
#include "06_transformer/block.h"
#include "07_vision_transformer/vit.h"
#include "nn/gradcheck.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static VitConfig small_config(VitPool pool, VitPos pos, int channels) {
    return (VitConfig){.patch = {.channels = channels, .rows = 8, .cols = 8, .P = 4, .D = 8}, .layers = 2,
                       .heads = 2, .ff = 12, .dropout = 0.0f, .pool = pool, .pos = pos, .classes = 3};
}

/* ------------------------------------------------------------- pooling */

typedef struct {
    float *Z, *pooled;
    const float *w;
    VitPool pool;
    int B, T, D;
} PoolCtx;

static double pool_loss(void *p) {
    PoolCtx *c = p;
    vit_pool_forward(c->pooled, c->Z, c->pool, c->B, c->T, c->D);
    double s = 0.0;
    for (int i = 0; i < c->B * c->D; i++) s += (double)c->w[i] * c->pooled[i];
    return s;
}

static void test_pool_gradients(void **state) {
    (void)state;
    const int B = 3, T = 5, D = 7;
    Rng r;
    rng_seed(&r, 3, 0);
    for (int pool = 0; pool < 2; pool++) {
        float Z[3 * 5 * 7], pooled[3 * 7], w[3 * 7], dZ[3 * 5 * 7];
        fill(Z, sizeof Z / sizeof Z[0], 1.0f, &r);
        fill(w, sizeof w / sizeof w[0], 1.0f, &r);
        for (size_t i = 0; i < sizeof dZ / sizeof dZ[0]; i++) dZ[i] = 0.5f;   /* backward must add to it */
        vit_pool_backward(dZ, w, (VitPool)pool, B, T, D);
        for (size_t i = 0; i < sizeof dZ / sizeof dZ[0]; i++) dZ[i] -= 0.5f;
        PoolCtx ctx = {Z, pooled, w, (VitPool)pool, B, T, D};
        GradCheckResult res = gradcheck(pool_loss, &ctx, Z, dZ, sizeof Z / sizeof Z[0], 1e-2f, 1000);
        if (!(res.max_rel_err < 1e-3)) fail_msg("pool %d: max_rel_err %.3g", pool, res.max_rel_err);
        /* cls reads row 0 only; mean reads every row equally */
        vit_pool_forward(pooled, Z, (VitPool)pool, B, T, D);
        for (int b = 0; b < B; b++)
            for (int d = 0; d < D; d++) {
                double want = 0.0;
                if (pool == VIT_POOL_CLS) want = Z[(size_t)b * T * D + d];
                else for (int t = 0; t < T; t++) want += Z[((size_t)b * T + t) * D + d] / (double)T;
                assert_true(fabs(pooled[b * D + d] - want) < 1e-6);
            }
    }
}

typedef struct {
    float *Z, *q, *pooled, *a;
    const float *g;   /* the loss is sum g . pooled */
    int B, T, D;
} AttentionPoolCtx;

static double attention_pool_loss(void *p) {
    AttentionPoolCtx *c = p;
    vit_attention_pool_forward(c->pooled, c->a, c->Z, c->q, c->B, c->T, c->D);
    double s = 0.0;
    for (int i = 0; i < c->B * c->D; i++) s += (double)c->g[i] * c->pooled[i];
    return s;
}

static void test_attention_pool(void **state) {
    (void)state;
    enum { B = 3, T = 5, D = 7 };
    Rng r;
    rng_seed(&r, 4, 0);
    float Z[B * T * D], q[D], pooled[B * D], a[B * T], g[B * D], dZ[B * T * D], dq[D], scratch[2 * T];
    fill(Z, B * T * D, 1.0f, &r);
    fill(q, D, 1.0f, &r);
    fill(g, B * D, 1.0f, &r);
    /* the definition, as loops: e_t = q . Z[t], a = softmax(e), u = sum_t a_t Z[t] */
    vit_attention_pool_forward(pooled, a, Z, q, B, T, D);
    for (int b = 0; b < B; b++) {
        double e[T], top = -1e300, sum = 0.0;
        for (int t = 0; t < T; t++) {
            e[t] = 0.0;
            for (int d = 0; d < D; d++) e[t] += (double)q[d] * Z[((size_t)b * T + t) * D + d];
            if (e[t] > top) top = e[t];
        }
        for (int t = 0; t < T; t++) sum += exp(e[t] - top);
        for (int t = 0; t < T; t++) assert_true(fabs(a[b * T + t] - exp(e[t] - top) / sum) < 1e-6);
        for (int d = 0; d < D; d++) {
            double u = 0.0;
            for (int t = 0; t < T; t++) u += exp(e[t] - top) / sum * Z[((size_t)b * T + t) * D + d];
            assert_true(fabs(pooled[b * D + d] - u) < 1e-5);
        }
    }
    /* gradients: dZ (Z as keys and as values) and dq, each added to what was there */
    for (int i = 0; i < B * T * D; i++) dZ[i] = 0.5f;
    for (int i = 0; i < D; i++) dq[i] = 0.25f;
    vit_attention_pool_backward(dZ, dq, scratch, g, a, Z, q, B, T, D);
    for (int i = 0; i < B * T * D; i++) dZ[i] -= 0.5f;
    for (int i = 0; i < D; i++) dq[i] -= 0.25f;
    AttentionPoolCtx ctx = {Z, q, pooled, a, g, B, T, D};
    GradCheckResult res = gradcheck(attention_pool_loss, &ctx, Z, dZ, B * T * D, 1e-2f, 1000);
    if (!(res.max_rel_err < 1e-3)) fail_msg("attention pool, dZ: max_rel_err %.3g", res.max_rel_err);
    res = gradcheck(attention_pool_loss, &ctx, q, dq, D, 1e-2f, 1000);
    if (!(res.max_rel_err < 1e-3)) fail_msg("attention pool, dw: max_rel_err %.3g", res.max_rel_err);
    assert_int_equal(res.n_checked, D);
    /* w = 0 (its initial value): every weight 1/T, the output mean pooling's */
    float mean[B * D];
    for (int d = 0; d < D; d++) q[d] = 0.0f;
    vit_attention_pool_forward(pooled, a, Z, q, B, T, D);
    vit_pool_forward(mean, Z, VIT_POOL_MEAN, B, T, D);
    for (int i = 0; i < B * T; i++) assert_true(fabs(a[i] - 1.0 / T) < 1e-7);
    for (int i = 0; i < B * D; i++) assert_true(fabs(pooled[i] - mean[i]) < 1e-6);
}

/* ------------------------------------------------------- the whole model */

typedef struct {
    Vit *v;
    const float *images;
    const int *targets;
    int B;
    int reseed;   /* 1: the dropout Rng reseeded before each forward (training: the same masks each time) */
} ModelCtx;

/* The loss backward differentiates, written from its definition: per image,
 * (1 - eps) (-log p_t) + eps * mean over c of (-log p_c), averaged over the
 * batch (eps = 0: vit_forward's plain cross-entropy). */
static double model_loss(void *p) {
    ModelCtx *c = p;
    if (c->reseed) rng_seed(&c->v->dropout_rng, 31, 7);
    const double plain = vit_forward(c->v, c->images, c->targets, c->B);
    const float eps = c->v->cfg.label_smoothing;
    const int C = c->v->C;
    float logp[3 * 3];                       /* check_model's B = 3 images, small_config's C = 3 classes */
    assert_true(c->B * C <= 3 * 3);
    log_softmax_forward(logp, c->v->logits, c->B, C);
    double loss = 0.0;
    for (int b = 0; b < c->B; b++) {
        double uniform = 0.0;
        for (int k = 0; k < C; k++) uniform -= logp[b * C + k];
        loss += (1.0 - eps) * -logp[b * C + c->targets[b]] + eps * uniform / C;
    }
    if (eps == 0.0f && fabs(loss / c->B - plain) > 1e-5 * (1.0 + fabs(plain)))
        fail_msg("the loss by definition %.9g differs from vit_forward's %.9g", loss / c->B, plain);
    return loss / c->B;
}

/* drop_path > 0 or 0 < keep < 1: in training, the dropout Rng reseeded
 * before each forward (the same images' branches dropped and the same
 * patches kept each time), so backward must give the gradient of that
 * function. */
static void check_model(VitPool pool, VitPos pos, int channels, float label_smoothing, int kernel, int locality,
                        int stem, float drop_path, float keep, int linformer) {
    const int B = 3;
    VitConfig cfg = small_config(pool, pos, channels);
    cfg.label_smoothing = label_smoothing;
    cfg.patch.K = kernel;
    cfg.locality = locality;
    cfg.stem = stem;
    cfg.drop_path = drop_path;
    cfg.keep = keep;
    cfg.linformer = linformer;
    Vit v;
    assert_int_equal(vit_create(&v, &cfg, B, 5), 0);
    const int random = drop_path > 0.0f || (keep > 0.0f && keep < 1.0f);
    v.training = random;
    Rng r;
    rng_seed(&r, 11, 0);
    /* make every parameter matter: positions, class token and head away from their small initial values */
    fill(v.params.data, v.params.size, 0.5f, &r);
    float images[3 * 3 * 64];
    fill(images, (size_t)B * channels * 64, 1.0f, &r);
    int targets[3] = {0, 2, 1};
    ModelCtx ctx = {&v, images, targets, B, random};
    params_zero_grad(&v.params);
    model_loss(&ctx);
    vit_backward(&v, targets);
    GradCheckResult res = gradcheck(model_loss, &ctx, v.params.data, v.params.grad, v.params.size, 3e-3f, 600);
    if (!(res.max_rel_err < 3e-2))
        fail_msg("ViT pool %s, pos %s, %d channels, label smoothing %g, kernel %d, locality %d, stem %d, "
                 "drop path %g, keep %g, linformer %d: max_rel_err %.3g at %zu (numeric %.6g, analytic %.6g)",
                 vit_pool_name(pool), vit_pos_name(pos), channels, (double)label_smoothing, kernel, locality, stem,
                 (double)drop_path, (double)keep, linformer, res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic);
    assert_true(res.n_checked >= 500);
    if (stem) {   /* every one of the stem's weights and biases, the tensors furthest from the loss */
        float *W = params_data(&v.params, v.stem_W), *dW = params_grad(&v.params, v.stem_W);
        const size_t count = (size_t)(channels * 16 + 1) * stem;   /* stem.W then stem.b, one after the other */
        assert_ptr_equal(params_data(&v.params, v.stem_b), W + (size_t)channels * 16 * stem);
        res = gradcheck(model_loss, &ctx, W, dW, count, 3e-3f, 1000);
        if (!(res.max_rel_err < 3e-2))
            fail_msg("ViT stem %d: max_rel_err %.3g at %zu (numeric %.6g, analytic %.6g)", stem, res.max_rel_err,
                     res.worst_index, res.worst_numeric, res.worst_analytic);
        assert_true(res.n_checked == count);
    }
    vit_free(&v);
}

static void test_model_gradients(void **state) {
    (void)state;
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.0f, 0, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_MEAN, VIT_POS_LEARNED, 1, 0.0f, 0, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_CLS, VIT_POS_SINUSOIDAL_2D, 1, 0.0f, 0, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_MEAN, VIT_POS_SINUSOIDAL_2D, 3, 0.0f, 0, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.1f, 0, 0, 0, 0.0f, 0.0f, 0);     /* label smoothing's gradient */
    check_model(VIT_POOL_MEAN, VIT_POS_SINUSOIDAL_2D, 1, 0.3f, 0, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.0f, 8, 0, 0, 0.0f, 0.0f, 0);     /* overlapping patches */
    check_model(VIT_POOL_MEAN, VIT_POS_SINUSOIDAL_2D, 3, 0.0f, 6, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.0f, 8, 1, 0, 0.0f, 0.0f, 0);  /* locality self-attention */
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.0f, 8, 0, 0, 0.0f, 0.0f, 3);  /* Linformer, k 3 of 5 tokens */
    check_model(VIT_POOL_MEAN, VIT_POS_LEARNED, 1, 0.0f, 0, 0, 0, 0.0f, 0.5f, 2);  /* ... reading 2 kept patches */
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.0f, 8, 0, 3, 0.0f, 0.0f, 0);  /* the convolutional stem */
    check_model(VIT_POOL_MEAN, VIT_POS_SINUSOIDAL_2D, 3, 0.0f, 0, 0, 2, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.0f, 0, 0, 0, 0.6f, 0.0f, 0);  /* drop path (blocks at 0.3, 0.6), training */
    /* patch dropout, training: 2 of the 4 patches kept, then 3, the same ones each time (the Rng reseeded) */
    check_model(VIT_POOL_CLS, VIT_POS_LEARNED, 1, 0.0f, 0, 0, 0, 0.0f, 0.5f, 0);
    check_model(VIT_POOL_MEAN, VIT_POS_LEARNED, 1, 0.0f, 8, 0, 0, 0.0f, 0.75f, 0);
    check_model(VIT_POOL_CLS, VIT_POS_SINUSOIDAL_2D, 1, 0.0f, 0, 0, 2, 0.0f, 0.5f, 0);
    /* attention pooling: its query w among the parameters; with overlap, and with patch dropout */
    check_model(VIT_POOL_ATTENTION, VIT_POS_LEARNED, 1, 0.0f, 0, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_ATTENTION, VIT_POS_SINUSOIDAL_2D, 3, 0.0f, 6, 0, 0, 0.0f, 0.0f, 0);
    check_model(VIT_POOL_ATTENTION, VIT_POS_LEARNED, 1, 0.0f, 8, 0, 0, 0.0f, 0.5f, 0);
}

static void test_positions_2d(void **state) {
    (void)state;
    const int gr = 3, gc = 4, D = 8, h = D / 2;
    float P[(1 + 12) * 8], row[3 * 4], col[4 * 4];
    vit_positions_2d(P, gr, gc, D, 1);
    positional_encoding_sinusoidal(row, gr, h);
    positional_encoding_sinusoidal(col, gc, h);
    for (int d = 0; d < D; d++) assert_true(P[d] == 0.0f);
    for (int r = 0; r < gr; r++)
        for (int c = 0; c < gc; c++) {
            const float *p = P + (size_t)(1 + r * gc + c) * D;
            assert_memory_equal(p, row + r * h, sizeof(float) * h);
            assert_memory_equal(p + h, col + c * h, sizeof(float) * h);
        }
}

static void test_dropout_only_in_training(void **state) {
    (void)state;
    const int B = 2;
    VitConfig cfg = small_config(VIT_POOL_CLS, VIT_POS_LEARNED, 1), plain = cfg;
    cfg.dropout = 0.3f;
    Vit v, w;
    assert_int_equal(vit_create(&v, &cfg, B, 9), 0);
    assert_int_equal(vit_create(&w, &plain, B, 9), 0);
    float images[2 * 64];
    Rng r;
    rng_seed(&r, 2, 0);
    fill(images, sizeof images / sizeof images[0], 1.0f, &r);
    vit_forward(&v, images, NULL, B);
    vit_forward(&w, images, NULL, B);
    assert_memory_equal(v.logits, w.logits, sizeof(float) * B * 3);      /* evaluation: no dropout */
    v.training = 1;
    vit_forward(&v, images, NULL, B);
    assert_true(memcmp(v.logits, w.logits, sizeof(float) * B * 3) != 0);
    vit_free(&v);
    /* drop path the same way: off in evaluation, on in training */
    cfg = plain;
    cfg.drop_path = 0.5f;
    assert_int_equal(vit_create(&v, &cfg, B, 9), 0);
    vit_forward(&v, images, NULL, B);
    assert_memory_equal(v.logits, w.logits, sizeof(float) * B * 3);
    v.training = 1;
    vit_forward(&v, images, NULL, B);
    assert_true(memcmp(v.logits, w.logits, sizeof(float) * B * 3) != 0);
    vit_free(&v);
    /* patch dropout: evaluation reads all 4 patches (the same logits); training runs 1 + 2 tokens, each
     * image's 2 patches distinct and in order, and over many draws all 6 pairs come up about equally */
    cfg = plain;
    cfg.keep = 0.5f;
    assert_int_equal(vit_create(&v, &cfg, B, 9), 0);
    vit_forward(&v, images, NULL, B);
    assert_int_equal(v.T_run, v.T);
    assert_memory_equal(v.logits, w.logits, sizeof(float) * B * 3);
    v.training = 1;
    assert_int_equal(vit_kept_patches(&v), 2);
    int pairs[4][4] = {{0}};
    for (int i = 0; i < 600; i++) {
        vit_forward(&v, images, NULL, B);
        assert_int_equal(v.T_run, 3);
        for (int b = 0; b < B; b++) {
            const int *k = v.kept + 2 * b;
            assert_true(0 <= k[0] && k[0] < k[1] && k[1] < 4);
            pairs[k[0]][k[1]]++;
        }
    }
    for (int a = 0; a < 4; a++)
        for (int c = a + 1; c < 4; c++) assert_in_range(pairs[a][c], 150, 250);   /* 200 expected, sd 13 */
    v.training = 0;
    vit_forward(&v, images, NULL, B);
    assert_int_equal(v.T_run, v.T);
    vit_free(&v);
    vit_free(&w);
}

/* c: the ViT of cfg as the driver's Classifier (vit_build, seed 9), for
 * batches of up to max_B; returns its Vit */
static Vit *build_classifier(Classifier *c, const VitConfig *cfg, int max_B) {
    assert_int_equal(vit_build(c, cfg, max_B, 9), 0);
    return vit_of(c);
}

/* --keep-until: patch dropout for the first keep_until of the training steps
 * (the driver tells the model each step, classifier.h), then every patch: the
 * same logits as evaluation (no other randomness in this model) */
static void test_patch_dropout_stops(void **state) {
    (void)state;
    enum { B = 2, STEPS = 8 };
    VitConfig cfg = small_config(VIT_POOL_CLS, VIT_POS_LEARNED, 1);
    cfg.keep = 0.5f;
    cfg.keep_until = 0.75f;                            /* steps 0..5 drop patches, 6 and 7 read all */
    Classifier c;
    Vit *v = build_classifier(&c, &cfg, B);
    float images[B * 64], eval_logits[B * 3];
    Rng r;
    rng_seed(&r, 2, 0);
    fill(images, sizeof images / sizeof images[0], 1.0f, &r);
    vit_forward(v, images, NULL, B);
    memcpy(eval_logits, v->logits, sizeof eval_logits);
    c.set_training(c.self, 1);
    for (int step = 0; step < STEPS; step++) {
        c.set_progress(c.self, step, STEPS);
        vit_forward(v, images, NULL, B);
        if (step < 6) {
            assert_int_equal(v->T_run, 1 + 2);
        } else {
            assert_int_equal(v->T_run, v->T);
            assert_memory_equal(v->logits, eval_logits, sizeof eval_logits);
        }
    }
    /* keep_until 1 (or 0, a config from before the key): patch dropout to the last step */
    const float to_the_end[2] = {0.0f, 1.0f};
    for (int i = 0; i < 2; i++) {
        v->cfg.keep_until = to_the_end[i];
        c.set_progress(c.self, STEPS - 1, STEPS);
        vit_forward(v, images, NULL, B);
        assert_int_equal(v->T_run, 1 + 2);
    }
    c.destroy(c.self);
}

/* replay: the next training forward draws what the last one drew (the kept
 * patches, the dropout and drop path masks), so at the same weights it gives
 * the same logits; without it the next forward draws anew */
static void test_replay_draws_the_same(void **state) {
    (void)state;
    enum { B = 3 };
    VitConfig cfg = small_config(VIT_POOL_CLS, VIT_POS_LEARNED, 1);
    cfg.keep = 0.5f;
    cfg.dropout = 0.2f;
    cfg.drop_path = 0.2f;
    Classifier c;
    Vit *v = build_classifier(&c, &cfg, B);
    float images[B * 64], first[B * 3];
    int kept[B * 2];
    Rng r;
    rng_seed(&r, 3, 0);
    fill(images, sizeof images / sizeof images[0], 1.0f, &r);
    c.set_training(c.self, 1);
    for (int trial = 0; trial < 3; trial++) {
        vit_forward(v, images, NULL, B);
        memcpy(first, v->logits, sizeof first);
        memcpy(kept, v->kept, sizeof kept);
        c.replay(c.self);
        vit_forward(v, images, NULL, B);
        assert_memory_equal(v->logits, first, sizeof first);
        assert_memory_equal(v->kept, kept, sizeof kept);
        vit_forward(v, images, NULL, B);                 /* no replay: new draws */
        assert_true(memcmp(v->logits, first, sizeof first) != 0);
    }
    c.destroy(c.self);
}

/* out = text with the line "key=..." left out (value NULL) or set to "key=value" */
static void edit_line(char *out, size_t cap, const char *text, const char *key, const char *value) {
    char head[64];
    snprintf(head, sizeof head, "%s=", key);
    const char *line = strstr(text, head);
    assert_non_null(line);
    assert_true(line == text || line[-1] == '\n');   /* the key itself, not the end of a longer one */
    const char *next = strchr(line, '\n') + 1;
    if (value) snprintf(out, cap, "%.*s%s%s\n%s", (int)(line - text), text, head, value, next);
    else snprintf(out, cap, "%.*s%s", (int)(line - text), text, next);
}

/* A config text with that line left out is read (a checkpoint from before the key existed) */
static VitConfig parse_without(const char *text, const char *key) {
    char older[1100];
    VitConfig back;
    edit_line(older, sizeof older, text, key, NULL);
    assert_int_equal(config_read(older, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &back), 0);
    return back;
}

/* ... and with the line set to value it is refused with this error */
static void refused_with(const char *text, const char *key, const char *value, const char *error) {
    char wrong[1100];
    VitConfig back;
    edit_line(wrong, sizeof wrong, text, key, value);
    assert_int_equal(config_read(wrong, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &back), -1);
    assert_string_equal(last_error(), error);
}

static void test_config_and_errors(void **state) {
    (void)state;
    VitConfig cfg = small_config(VIT_POOL_MEAN, VIT_POS_SINUSOIDAL_2D, 1), back;
    cfg.dropout = 0.125f;
    cfg.label_smoothing = 0.25f;
    cfg.locality = 1;
    cfg.stem = 5;
    cfg.patch.K = 8;                                   /* with the stem: K - P a multiple of 4 */
    cfg.drop_path = 0.375f;
    cfg.keep = 0.625f;
    cfg.keep_until = 0.875f;
    cfg.linformer = 6;                                 /* (the text only: vit_create refuses it beside locality) */
    char text[1024] = "";
    assert_int_equal(config_write(text, sizeof text, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &cfg), 0);
    memset(&back, 0, sizeof back);
    assert_int_equal(config_read(text, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &back), 0);
    assert_memory_equal(&cfg, &back, sizeof cfg);
    /* checkpoints from before each later option have no line for it, and were trained without it */
    assert_true(parse_without(text, "label_smoothing").label_smoothing == 0.0f);
    assert_int_equal(parse_without(text, "kernel").patch.K, 0);     /* kernel = patch */
    assert_int_equal(parse_without(text, "locality").locality, 0);  /* the plain attention */
    assert_int_equal(parse_without(text, "stem").stem, 0);
    assert_true(parse_without(text, "drop_path").drop_path == 0.0f);
    assert_true(parse_without(text, "keep").keep == 0.0f);          /* every patch */
    assert_true(parse_without(text, "keep_until").keep_until == 1.0f);   /* to the end */
    assert_int_equal(parse_without(text, "linformer").linformer, 0);     /* full attention */
    VitConfig full = cfg;
    full.linformer = 0;
    char full_text[1024] = "";
    assert_int_equal(config_write(full_text, sizeof full_text, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &full), 0);
    assert_null(strstr(full_text, "linformer"));       /* no line: the text of the models from before the key */
    assert_non_null(strstr(text, "linformer=6\n"));
    /* a value out of its range is refused, naming the key */
    refused_with(text, "drop_path", "1.5", "config key 'drop_path': expected a number in [0, 1], got '1.5'");
    refused_with(text, "keep", "1.5", "config key 'keep': expected a number in [0, 1], got '1.5'");
    refused_with(text, "keep_until", "-0.5", "config key 'keep_until': expected a number in [0, 1], got '-0.5'");
    refused_with(text, "keep_until", "most", "config key 'keep_until': expected a number in [0, 1], got 'most'");
    refused_with(text, "locality", "2", "config key 'locality': expected an integer in 0..1, got '2'");
    refused_with(text, "kernel", "six", "config key 'kernel': expected an integer in 0..4096, got 'six'");
    refused_with(text, "kernel", "-2", "config key 'kernel': expected an integer in 0..4096, got '-2'");
    refused_with(text, "label_smoothing", "1.5",
                 "config key 'label_smoothing': expected a number in [0, 1], got '1.5'");
    refused_with(text, "pool", "max", "config key 'pool': expected one of cls,mean,attention, got 'max'");
    refused_with(text, "linformer", "-1", "config key 'linformer': expected an integer in 0..65536, got '-1'");
    Vit v;
    VitConfig bad = cfg;                               /* Linformer beside locality, then k above the 4 tokens */
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_string_equal(last_error(), "linformer and locality: expected one of the two attentions, not both");
    vit_free(&v);
    bad.locality = 0;
    bad.linformer = 5;
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_string_equal(last_error(), "linformer: k = 5 for sequences of N = 4: expected 1 <= k <= N");
    vit_free(&v);
    cfg.linformer = 0;
    bad = cfg;
    bad.patch.P = 3;                                   /* does not divide 8 */
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_non_null(strstr(last_error(), "3"));
    vit_free(&v);
    bad = cfg;
    bad.patch.K = 5;                                   /* cannot be centred on a 4 x 4 patch */
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_non_null(strstr(last_error(), "kernel 5 with patch 4"));
    vit_free(&v);
    bad = cfg;
    bad.patch.K = 6;                                   /* halved by the stem: 3 x 3 around 2 x 2 cells */
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_string_equal(last_error(),
                        "stem=5: the stem halves the kernel too, so kernel - patch must be a multiple of 4 (got 6 - 4)");
    vit_free(&v);
    bad = cfg;
    bad.patch.rows = bad.patch.cols = 6;               /* patch 2 of a 6 x 6 image: halved, 1 of 3 x 3 */
    bad.patch.P = 2;
    bad.patch.K = 6;
    assert_int_equal(vit_create(&v, &bad, 2, 1), 0);  /* (allowed: each size halves) */
    vit_free(&v);
    bad.patch.rows = bad.patch.cols = 7;
    bad.patch.P = 7;
    bad.patch.K = 0;
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_string_equal(last_error(), "stem=5: the stem halves the image, so its rows and cols must be even (got 7 x 7)");
    vit_free(&v);
    bad.patch.rows = bad.patch.cols = 14;
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_string_equal(last_error(), "stem=5: the stem halves the patch too, so the patch side must be even (got 7)");
    vit_free(&v);
    bad = cfg;
    bad.stem = -1;
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_non_null(strstr(last_error(), "stem=-1"));
    vit_free(&v);
    bad = cfg;
    bad.heads = 3;                                     /* does not divide D = 8 */
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_non_null(strstr(last_error(), "heads=3"));
    vit_free(&v);
    bad = cfg;
    bad.patch.D = 6;                                   /* the 2-D sinusoids need D % 4 == 0 */
    bad.heads = 2;
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_non_null(strstr(last_error(), "divisible by 4"));
    vit_free(&v);
    bad = cfg;
    bad.drop_path = 1.0f;                              /* the last block always skipped */
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_string_equal(last_error(), "drop_path=1: expected 0 <= p < 1");
    vit_free(&v);
    bad = cfg;
    bad.label_smoothing = 1.0f;                        /* the target would be uniform */
    assert_int_equal(vit_create(&v, &bad, 2, 1), -1);
    assert_non_null(strstr(last_error(), "label_smoothing"));
    vit_free(&v);
    assert_int_equal(config_read("model=other\n", VIT_CONFIG_FIELDS, VIT_CONFIG_N, &back), -1);
    assert_string_equal(last_error(), "config: missing key 'channels'");
}

static void test_fits_a_batch(void **state) {
    (void)state;
    const int B = 8;
    VitConfig cfg = small_config(VIT_POOL_CLS, VIT_POS_LEARNED, 1);
    Vit v;
    assert_int_equal(vit_create(&v, &cfg, B, 3), 0);
    Adam opt;
    assert_int_equal(adam_init(&opt, &v.params, 1e-2f, 0.01f), 0);
    float images[8 * 64];
    int targets[8];
    Rng r;
    rng_seed(&r, 8, 0);
    fill(images, sizeof images / sizeof images[0], 1.0f, &r);
    for (int b = 0; b < B; b++) targets[b] = b % 3;
    double first = 0.0, last = 0.0;
    for (int step = 0; step < 60; step++) {
        params_zero_grad(&v.params);
        last = vit_forward(&v, images, targets, B);
        if (step == 0) first = last;
        vit_backward(&v, targets);
        adam_step(&opt, &v.params, 1e-2f);
    }
    assert_true(last < 0.2 * first);
    adam_free(&opt);
    vit_free(&v);
}

static void test_encoder_is_chapter_06(void **state) {
    (void)state;
    const int B = 2;
    VitConfig cfg = small_config(VIT_POOL_CLS, VIT_POS_LEARNED, 1);
    Vit v;
    assert_int_equal(vit_create(&v, &cfg, B, 4), 0);
    Rng r;
    rng_seed(&r, 6, 0);
    fill(params_data(&v.params, v.pos), (size_t)v.T * v.D, 0.5f, &r);
    fill(params_data(&v.params, v.cls), (size_t)v.D, 0.5f, &r);
    float images[2 * 64];
    fill(images, sizeof images / sizeof images[0], 1.0f, &r);
    vit_forward(&v, images, NULL, B);
    /* X_0 by hand: patches (chapter 07's one new layer), class token, positions */
    const int N = v.N, T = v.T, D = v.D;
    float *patches = calloc((size_t)B * N * D, sizeof(float)), *cache = calloc(patch_embed_cache_floats(&cfg.patch, B), sizeof(float));
    float *X = calloc((size_t)B * T * D, sizeof(float)), *Y = calloc((size_t)B * T * D, sizeof(float));
    float *mean = calloc((size_t)B * T, sizeof(float)), *rstd = calloc((size_t)B * T, sizeof(float));
    patch_embed_forward(patches, cache, images, params_data(&v.params, v.patch_W), params_data(&v.params, v.patch_b),
                        &cfg.patch, B);
    const float *pos = params_data(&v.params, v.pos), *cls = params_data(&v.params, v.cls);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++)
                X[((size_t)b * T + t) * D + d] = (t == 0 ? cls[d] : patches[((size_t)b * N + t - 1) * D + d]) + pos[t * D + d];
    /* chapter 06, called block by block */
    const BlockSpec *spec = &v.st.spec;
    BlockCache block_cache;
    block_cache_alloc(&block_cache, spec, B, T, 0);
    for (int l = 0; l < cfg.layers; l++) {
        BlockWeights w = stack_block_weights(&v.st, l, 0);
        block_forward(Y, &block_cache, X, spec, &w, NULL, NULL, B, T, 0, NULL);
        memcpy(X, Y, sizeof(float) * (size_t)B * T * D);
    }
    block_norm_forward(Y, mean, rstd, X, spec, params_data(&v.params, v.st.norm_g), params_data(&v.params, v.st.norm_b),
                       B * T);
    assert_memory_equal(Y, v.st.out, sizeof(float) * (size_t)B * T * D);
    free(patches); free(cache); free(X); free(Y); free(mean); free(rstd);
    block_cache_free(&block_cache);
    vit_free(&v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_gradients),
        cmocka_unit_test(test_attention_pool),
        cmocka_unit_test(test_model_gradients),
        cmocka_unit_test(test_positions_2d),
        cmocka_unit_test(test_dropout_only_in_training),
        cmocka_unit_test(test_patch_dropout_stops),
        cmocka_unit_test(test_replay_draws_the_same),
        cmocka_unit_test(test_config_and_errors),
        cmocka_unit_test(test_fits_a_batch),
        cmocka_unit_test(test_encoder_is_chapter_06),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
