/* test_caption.c - chapter 07's captioning: the three captioners' hand-written
 * backward passes against finite differences (the new wiring: the ViT
 * encoder's grid into chapter 01's decoder, into chapter 02's additive
 * attention, and as chapter 06's cross-attention memory); decoding step by
 * step through the Seq2Seq interface against the teacher-forced pass; the
 * checkpoint's lines (an old checkpoint's hidden= read as the state S); the
 * CNN encoder's backward under each decoder, and its pretrained convolutions
 * loaded and frozen;
 * the scene generator (determinism, train/test disjointness, reading-order
 * captions) and the driver's image batches. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"   /* before cmocka.h, whose fail() macro it would meet */
#include <cmocka.h>

#include "seq2seq_checks.h"

#include "07_vision_transformer/caption.h"
#include "07_vision_transformer/scene.h"
#include "io/checkpoint.h"
#include "kernels/matmul.h"
#include "nn/gradcheck.h"
#include "util/rng.h"
#include "util/util.h"

#include "temp_dir.h"

#define SIDE 8
#define B_TEST 3

/* 8 x 8 images in 2 x 2 patches of 4 x 4 (N = 4), D = 8, words 4..8 (V = 9), captions of 1..3 words. */
static CaptionConfig small_config(CaptionKind kind) {
    return (CaptionConfig){.kind = kind, .side = SIDE, .P = 4, .D = 8, .layers = 1, .heads = 2, .ff = 12,
                           .dec_layers = 2, .D_E = 5, .S = 6, .D_A = 5, .V = 9, .max_words = 3};
}

/* A batch of B_TEST random images with captions of lengths 3, 1, 2 (so rows are padded). */
static void make_batch(Batch *b, Rng *r) {
    batch_alloc(b, B_TEST, 4, 3);
    batch_alloc_values(b, B_TEST, SIDE * SIDE);
    const int lens[B_TEST] = {3, 1, 2}, Tt = 4, N = 4;
    b->batch = B_TEST;
    b->src_len = N;   /* decode_greedy's attention rows: the N grid positions */
    b->tgt_len = Tt;
    for (int i = 0; i < B_TEST; i++) {
        b->src_lens[i] = N;
        for (int t = 0; t < N; t++) b->src[i * N + t] = PAD_ID;
        int words[4] = {0};   /* lens[i] <= 3 used; one more so no index reads past it */
        for (int w = 0; w < lens[i]; w++) words[w] = 4 + (int)rng_below(r, 5);
        for (int t = 0; t < Tt; t++) {
            b->tgt_in[i * Tt + t] = t == 0 ? BOS_ID : t <= lens[i] ? words[t - 1] : PAD_ID;
            b->tgt_out[i * Tt + t] = t < lens[i] ? words[t] : t == lens[i] ? EOS_ID : PAD_ID;
        }
        b->tgt_lens[i] = lens[i] + 1;
    }
    for (int i = 0; i < B_TEST * SIDE * SIDE; i++) b->values[i] = rng_uniform(r) * 2.0f - 1.0f;
}

typedef struct {
    Caption *c;
    Batch *b;
} LossCtx;

static double model_loss(void *ctx) {
    LossCtx *l = ctx;
    return caption_train_step(l->c, l->b, 0);
}

/* The CNN encoder's convolutions, every entry: ReLU and max-pool have kinks
 * (an input crossing 0, two pixels of a window swapping), so central
 * differences at eps and eps / 2 are taken and an entry where the two
 * disagree by more than the loss's float rounding (a kink within eps) is
 * skipped, at most 1 in 10 (as test_cnn.c does); elsewhere the estimate must
 * match the analytic gradient. */
static void check_conv_gradient(LossCtx *ctx, Params *p, const ParamTensor *pt) {
    const float eps = 1e-3f;
    size_t skipped = 0;
    double grad_norm = 0.0;
    for (size_t i = 0; i < pt->count; i++) {
        float *w = p->data + pt->offset + i;
        const float w0 = *w, steps[4] = {eps, -eps, eps / 2, -eps / 2};
        double f[4];
        for (int k = 0; k < 4; k++) {
            *w = w0 + steps[k];
            f[k] = model_loss(ctx);
        }
        *w = w0;
        const double wide = (f[0] - f[1]) / (2.0 * eps), narrow = (f[2] - f[3]) / (double)eps;
        const double analytic = p->grad[pt->offset + i];
        grad_norm += fabs(analytic);
        if (fabs(wide - narrow) > 0.05 * fmax(fabs(wide), fabs(narrow)) + 5e-4) {
            skipped++;
            continue;
        }
        if (fabs(analytic - narrow) > 3e-2 * fmax(fabs(analytic), fabs(narrow)) + 1e-3)
            fail_msg("%s %s[%zu]: numeric %.6g, analytic %.6g", caption_kind_name(ctx->c->cfg.kind), pt->name, i,
                     narrow, analytic);
    }
    if (skipped * 10 > pt->count || !(grad_norm > 0.0))
        fail_msg("%s %s: %zu of %zu entries near a kink, sum |grad| %.3g", caption_kind_name(ctx->c->cfg.kind),
                 pt->name, skipped, pt->count, grad_norm);
}

/* Every parameter tensor of one captioner against central differences. */
static void check_gradients_of(CaptionConfig cfg) {
    CaptionKind kind = cfg.kind;
    Caption c;
    assert_int_equal(caption_create(&c, &cfg, B_TEST, 17), 0);
    Rng r;
    rng_seed(&r, 5, 0);
    /* move the zero-initialised tensors (biases, norms' beta) away from 0, so their paths carry gradient */
    for (size_t i = 0; i < c.params.size; i++) c.params.data[i] += 0.1f * (rng_uniform(&r) - 0.5f);
    Batch b;
    make_batch(&b, &r);
    params_zero_grad(&c.params);
    double loss = caption_train_step(&c, &b, 1);
    assert_true(isfinite(loss) && loss > 0);
    LossCtx ctx = {&c, &b};
    for (int k = 0; k < c.params.n_tensors; k++) {
        const ParamTensor *pt = &c.params.tensors[k];
        if (strncmp(pt->name, "conv", 4) == 0) {
            check_conv_gradient(&ctx, &c.params, pt);
            continue;
        }
        GradCheckResult res = gradcheck(model_loss, &ctx, c.params.data + pt->offset, c.params.grad + pt->offset,
                                        pt->count, 3e-3f, 40);
        double grad_norm = 0.0;
        for (size_t i = 0; i < pt->count; i++) grad_norm += fabs(c.params.grad[pt->offset + i]);
        /* float32 rounding in the loss limits the agreement (a correct backward
         * measures at most 2.4e-3 here); a missing or mis-scaled path (the
         * context fed to every step, s_0, sqrt(D) on the word embedding) is
         * off by far more than 1e-2 */
        if (!(res.max_rel_err < 1e-2) || !(grad_norm > 0.0))
            fail_msg("%s %s: worst entry %zu numeric %.6g analytic %.6g (rel %.3g), sum |grad| %.3g",
                     caption_kind_name(kind), pt->name, res.worst_index, res.worst_numeric, res.worst_analytic,
                     res.max_rel_err, grad_norm);
    }
    batch_free(&b);
    caption_free(&c);
}

static void check_gradients(CaptionKind kind) { check_gradients_of(small_config(kind)); }

/* The CNN encoder (chapter 07's CNN without its head, F = 2: G [4, 4], then
 * proj to D = 8) under each decoder: the same 8 x 8 images, N = 4 positions. */
static CaptionConfig cnn_config(CaptionKind kind) {
    CaptionConfig cfg = small_config(kind);
    cfg.encoder = CAPTION_ENCODER_CNN;
    cfg.filters = 2;
    return cfg;
}

static void test_gradients_cnn(void **state) {
    (void)state;
    check_gradients_of(cnn_config(CAPTION_POOL));
    check_gradients_of(cnn_config(CAPTION_ATTEND));
    check_gradients_of(cnn_config(CAPTION_TRANSFORMER));
}

static void test_gradients_pool(void **state) { (void)state; check_gradients(CAPTION_POOL); }
static void test_gradients_attend(void **state) { (void)state; check_gradients(CAPTION_ATTEND); }
static void test_gradients_transformer(void **state) { (void)state; check_gradients(CAPTION_TRANSFORMER); }

/* encode + step with the true previous words reproduce the teacher-forced
 * pass: every probability, and model 2's attention weights. */
static void check_decoding(CaptionKind kind, int S) {
    CaptionConfig cfg = small_config(kind);
    cfg.S = S;
    Caption c;
    assert_int_equal(caption_create(&c, &cfg, B_TEST, 3), 0);
    Rng r;
    rng_seed(&r, 9, 0);
    Batch b;
    make_batch(&b, &r);
    Seq2Seq m;
    caption_interface(&c, &m);
    caption_train_step(&c, &b, 0);
    const int Tt = b.tgt_len, V = cfg.V;
    float *probs = xmalloc(sizeof(float) * (size_t)Tt * B_TEST * V);
    if (kind == CAPTION_TRANSFORMER) {   /* its rows are b Tt + t: to the check's t B + b */
        for (int i = 0; i < B_TEST; i++)
            for (int t = 0; t < Tt; t++)
                memcpy(probs + ((size_t)t * B_TEST + i) * V, c.probs + ((size_t)i * Tt + t) * V, sizeof(float) * V);
    } else {
        memcpy(probs, c.probs, sizeof(float) * (size_t)Tt * B_TEST * V);
    }
    check_decoding_matches_training(&m, &b, probs, c.attn, kind == CAPTION_ATTEND ? ATTN_TIME_MAJOR : ATTN_NONE);
    free(probs);
    batch_free(&b);
    caption_free(&c);
}

/* (a GRU state wider than the grid's vectors too: S = 12 > D = 8) */
static void test_decoding_pool(void **state) { (void)state; check_decoding(CAPTION_POOL, 6); check_decoding(CAPTION_POOL, 12); }
static void test_decoding_attend(void **state) { (void)state; check_decoding(CAPTION_ATTEND, 6); check_decoding(CAPTION_ATTEND, 12); }
static void test_decoding_transformer(void **state) { (void)state; check_decoding(CAPTION_TRANSFORMER, 6); }

/* The heads picture's maps (caption_cross_maps, one teacher-forced pass over
 * the greedy caption) are the ones greedy decoding used: the last layer's, its
 * heads averaged, are each step's attn row; every row of every layer and head
 * sums to 1 over the grid. Another model is refused. */
static void test_cross_maps_are_the_decoding_maps(void **state) {
    (void)state;
    CaptionConfig cfg = small_config(CAPTION_TRANSFORMER);
    Caption c;
    assert_int_equal(caption_create(&c, &cfg, B_TEST, 5), 0);
    Rng r;
    rng_seed(&r, 11, 0);
    Batch b;
    make_batch(&b, &r);
    Seq2Seq m;
    caption_interface(&c, &m);
    const int N = 4, L = cfg.dec_layers, H = cfg.heads, max_out = 5;
    int src[4] = {0}, src_lens[1] = {N}, zero[1] = {0}, out[5], n = 0;
    Batch one = {.batch = 1, .src_len = N, .tgt_len = 1, .src = src, .src_lens = src_lens, .tgt_in = zero,
                 .tgt_out = zero, .tgt_lens = zero, .value_size = SIDE * SIDE, .values = b.values};
    float attn[5 * 4];
    decode_greedy(&m, &one, max_out, out, &n, attn);
    const int T = n + 1 <= max_out ? n + 1 : n;      /* the greedy steps: each word, and <eos> if it came */
    float *maps = xcalloc((size_t)L * H * (n + 1) * N, sizeof(float));
    assert_int_equal(caption_cross_maps(&c, &one, out, n, maps), 0);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++) {
            float mean = 0.0f;
            for (int h = 0; h < H; h++) mean += maps[(((size_t)(L - 1) * H + h) * (n + 1) + t) * N + j];
            assert_float_equal(mean / (float)H, attn[t * N + j], 1e-5);
        }
    for (int row = 0; row < L * H * (n + 1); row++) {
        double sum = 0.0;
        for (int j = 0; j < N; j++) sum += maps[(size_t)row * N + j];
        assert_float_equal(sum, 1.0, 1e-5);
    }
    free(maps);
    batch_free(&b);
    caption_free(&c);

    cfg = small_config(CAPTION_ATTEND);
    assert_int_equal(caption_create(&c, &cfg, B_TEST, 5), 0);
    float unused[4];
    assert_int_equal(caption_cross_maps(&c, &one, out, 0, unused), -1);
    assert_non_null(strstr(last_error(), "attend"));
    caption_free(&c);
}

/* caption_load_cnn: a 07_cnn checkpoint's convolutions copied in by name;
 * frozen, they get no gradient (the projection after them still does); a
 * CNN of other filters, a checkpoint of another chapter, or a captioner with
 * the ViT encoder: refused, naming what differs. */
static void test_pretrained_cnn(void **state) {
    (void)state;
    char dir[256], path[512], text[1024] = "model=" CNN_MODEL_NAME "\ntask=fashion\n";
    assert_int_equal(temp_dir_make(dir, sizeof dir, "attn_test_caption"), 0);
    snprintf(path, sizeof path, "%s/cnn.ckpt", dir);
    /* the pretraining's classifier: 28 x 28 single items, the same filters as the captioner's trunk */
    CnnConfig cc = {.channels = 1, .rows = 28, .cols = 28, .filters = 2, .classes = 10};
    Classifier cnn;
    assert_int_equal(cnn_build(&cnn, &cc, 1, 3), 0);
    Rng r;
    rng_seed(&r, 9, 0);
    for (size_t i = 0; i < cnn.params->size; i++) cnn.params->data[i] = rng_uniform(&r) - 0.5f;
    assert_int_equal(config_write(text, sizeof text, CNN_CONFIG_FIELDS, CNN_CONFIG_N, &cc), 0);
    assert_int_equal(checkpoint_save(path, text, cnn.params), 0);

    CaptionConfig cfg = cnn_config(CAPTION_ATTEND);
    Caption c;
    assert_int_equal(caption_create(&c, &cfg, B_TEST, 17), 0);
    assert_int_equal(caption_load_cnn(&c, path, 1), 0);
    const char *names[] = {"conv1.W", "conv1.b", "conv2.W", "conv2.b"};
    for (int k = 0; k < 4; k++) {
        const ParamTensor *from = params_find(cnn.params, names[k]), *to = params_find(&c.params, names[k]);
        assert_non_null(from);
        assert_non_null(to);
        assert_int_equal(from->count, to->count);
        assert_memory_equal(cnn.params->data + from->offset, c.params.data + to->offset, sizeof(float) * to->count);
    }
    Batch b;
    make_batch(&b, &r);
    params_zero_grad(&c.params);
    assert_true(isfinite(caption_train_step(&c, &b, 1)));
    for (int k = 0; k < 4; k++) {
        const ParamTensor *t = params_find(&c.params, names[k]);
        for (size_t i = 0; i < t->count; i++) assert_true(c.params.grad[t->offset + i] == 0.0f);
    }
    const ParamTensor *proj = params_find(&c.params, "proj.W");
    assert_non_null(proj);
    double proj_grad = 0.0;
    for (size_t i = 0; i < proj->count; i++) proj_grad += fabs(c.params.grad[proj->offset + i]);
    assert_true(proj_grad > 0.0);
    batch_free(&b);
    caption_free(&c);

    /* refused: other filters; the ViT encoder; a checkpoint that is not a 07_cnn one */
    cfg.filters = 3;
    assert_int_equal(caption_create(&c, &cfg, B_TEST, 17), 0);
    assert_int_equal(caption_load_cnn(&c, path, 0), -1);
    assert_non_null(strstr(last_error(), "--filters 2"));
    caption_free(&c);
    cfg = small_config(CAPTION_ATTEND);
    assert_int_equal(caption_create(&c, &cfg, B_TEST, 17), 0);
    assert_int_equal(caption_load_cnn(&c, path, 0), -1);
    assert_non_null(strstr(last_error(), "--encoder cnn"));
    cfg = cnn_config(CAPTION_ATTEND);
    Caption other;
    assert_int_equal(caption_create(&other, &cfg, B_TEST, 17), 0);
    assert_int_equal(checkpoint_save(path, "model=" CAPTION_MODEL_NAME "\n", &c.params), 0);
    assert_int_equal(caption_load_cnn(&other, path, 0), -1);
    assert_non_null(strstr(last_error(), "07_cnn"));
    caption_free(&other);
    caption_free(&c);
    cnn.destroy(cnn.self);
    assert_int_equal(temp_dir_remove(dir), 0);
}

/* Bad sizes are refused with a message, not a crash. */
static void test_bad_config(void **state) {
    (void)state;
    CaptionConfig cfg = small_config(CAPTION_ATTEND);
    Caption c;
    cfg.P = 3;   /* does not divide 8 */
    assert_int_equal(caption_create(&c, &cfg, 2, 1), -1);
    caption_free(&c);
    cfg = small_config(CAPTION_TRANSFORMER);
    cfg.heads = 3;   /* does not divide 8 */
    assert_int_equal(caption_create(&c, &cfg, 2, 1), -1);
    caption_free(&c);
}

/* The checkpoint's lines: a checkpoint written before the GRU state's key
 * was named state (it said hidden=) still reads; written again, every line
 * but that one is the same text. */
static void test_config_lines(void **state) {
    (void)state;
    const char *old = "model=ch07_caption\ntask=scenes2x2\ncaption_model=attend\ngrid=2\nside=56\npatch=7\ndim=64\n"
                      "layers=2\nheads=4\nff=128\ndec_layers=1\nembed=32\nhidden=64\nattn=32\ntrain_scenes=20000\n"
                      "valid_scenes=500\ntest_scenes=2000\ndata_seed=1\nsrc_vocab_size=4\ntgt_vocab_size=14\n";
    CaptionConfig c = {0};
    SceneConfig sc = {0};
    assert_int_equal(config_read(old, CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &c), 0);
    assert_int_equal(config_read(old, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, &sc), 0);
    assert_int_equal(c.kind, CAPTION_ATTEND);
    assert_int_equal(c.side, 56);
    assert_int_equal(c.P, 7);
    assert_int_equal(c.D_E, 32);
    assert_int_equal(c.S, 64);
    assert_int_equal(c.D_A, 32);
    assert_int_equal(sc.grid, 2);
    assert_int_equal(sc.n_train, 20000);
    assert_int_equal(sc.seed, 1);
    char text[512] = "";
    assert_int_equal(config_write(text, sizeof text, CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &c), 0);
    assert_int_equal(config_write(text, sizeof text, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, &sc), 0);
    assert_string_equal(text, "caption_model=attend\nside=56\npatch=7\ndim=64\nlayers=2\nheads=4\nff=128\n"
                              "dec_layers=1\nembed=32\nstate=64\nattn=32\ngrid=2\ntrain_scenes=20000\n"
                              "valid_scenes=500\ntest_scenes=2000\ndata_seed=1\n");
    /* out of range, or a model that is not one of the three: refused naming the key */
    assert_int_equal(config_read("caption_model=lstm\n", CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &c), -1);
    assert_non_null(strstr(last_error(), "caption_model"));
    assert_int_equal(config_read("grid=4\ntrain_scenes=1\nvalid_scenes=1\ntest_scenes=1\ndata_seed=1\n",
                                 SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, &sc), -1);
    assert_non_null(strstr(last_error(), "grid"));
}

/* caption_build takes V and the longest caption from the data set, and
 * refuses a side that is not its images'. */
static void test_build_from_data(void **state) {
    (void)state;
    Dataset d;
    memset(&d, 0, sizeof d);
    vocab_init(&d.tgt_vocab);
    for (int w = 0; w < 5; w++) vocab_add(&d.tgt_vocab, scene_words[w]);
    d.value_size = SIDE * SIDE;
    d.max_tgt_len = 3;
    CaptionConfig cfg = small_config(CAPTION_ATTEND);
    cfg.V = 0;
    cfg.max_words = 0;
    Seq2Seq m;
    assert_int_equal(caption_build(&m, &d, &cfg, 2, 1), 0);
    const Caption *c = m.self;
    assert_int_equal(c->cfg.V, d.tgt_vocab.size);
    assert_int_equal(c->cfg.max_words, 3);
    m.destroy(m.self);
    cfg.side = 2 * SIDE;
    assert_int_equal(caption_build(&m, &d, &cfg, 2, 1), -1);
    assert_non_null(strstr(last_error(), "side=16"));
    dataset_free(&d);
}

/* ------------------------------------------------------------------ scenes */

/* A stand-in for Fashion-MNIST: every pixel of image i of a split holds the
 * split's base + i (train 1.., valid 1001.., test 2001..), labels i % 10. */
static void fake_data(FashionMnist *fm) {
    memset(fm, 0, sizeof *fm);
    ImageSplit *splits[3] = {&fm->train, &fm->valid, &fm->test};
    const int counts[3] = {50, 20, 30}, bases[3] = {1, 1001, 2001};
    for (int s = 0; s < 3; s++) {
        ImageSplit *sp = splits[s];
        sp->n = counts[s];
        sp->images = xmalloc(sizeof(float) * (size_t)sp->n * FASHION_MNIST_PIXELS);
        sp->labels = xmalloc(sizeof(int) * (size_t)sp->n);
        for (int i = 0; i < sp->n; i++) {
            sp->labels[i] = i % FASHION_MNIST_CLASSES;
            for (int p = 0; p < FASHION_MNIST_PIXELS; p++) sp->images[(size_t)i * FASHION_MNIST_PIXELS + p] = (float)(bases[s] + i);
        }
    }
    fm->background = 0.0f;
}

static void free_fake(FashionMnist *fm) {
    free(fm->train.images); free(fm->train.labels);
    free(fm->valid.images); free(fm->valid.labels);
    free(fm->test.images); free(fm->test.labels);
}

static void test_scene_determinism(void **state) {
    (void)state;
    FashionMnist fm;
    fake_data(&fm);
    SceneSet a, b, c;
    assert_int_equal(scene_set_make(&a, &fm.train, 0.0f, 3, 40, 123), 0);
    assert_int_equal(scene_set_make(&b, &fm.train, 0.0f, 3, 40, 123), 0);
    assert_int_equal(scene_set_make(&c, &fm.train, 0.0f, 3, 40, 124), 0);
    assert_int_equal(a.side, 84);
    assert_memory_equal(a.pixels, b.pixels, sizeof(float) * 40 * 84 * 84);
    assert_memory_equal(a.items, b.items, sizeof(int) * 40 * 9);
    assert_true(memcmp(a.items, c.items, sizeof(int) * 40 * 9) != 0);
    /* every scene has an item; about a third of the cells are empty */
    int empty = 0;
    for (int i = 0; i < 40; i++) {
        int used = 0;
        for (int k = 0; k < 9; k++) {
            used += a.items[i * 9 + k] >= 0;
            empty += a.items[i * 9 + k] < 0;
        }
        assert_true(used > 0);
    }
    assert_true(empty > 60 && empty < 180);
    scene_set_free(&a); scene_set_free(&b); scene_set_free(&c);
    assert_int_equal(scene_set_make(&a, &fm.train, 0.0f, 4, 10, 1), -1);   /* grid 4: refused */
    assert_int_equal(scene_set_make(&a, &fm.train, 0.0f, 2, 0, 1), -1);    /* no scenes */
    free_fake(&fm);
}

/* Each split's scenes show only its own images, in the cells the items say,
 * and the caption names them in reading order. */
static void check_split(const Dataset *d, const Split *s, const ImageSplit *src, int base, int grid) {
    const int side = 28 * grid;
    for (int i = 0; i < s->n; i++) {
        const Example *e = &s->ex[i];
        int words = 0;
        for (int k = 0; k < grid * grid; k++) {
            const int r0 = (k / grid) * 28, c0 = (k % grid) * 28;
            const float corner = e->values[(size_t)r0 * side + c0], far = e->values[(size_t)(r0 + 27) * side + c0 + 27];
            assert_true(corner == far);   /* one image fills the cell */
            if (corner == 0.0f) continue;   /* empty */
            const int idx = (int)corner - base;
            assert_true(idx >= 0 && idx < src->n);   /* an image of this split, of no other */
            assert_true(words < e->tgt_len);
            assert_string_equal(vocab_token(&d->tgt_vocab, e->tgt[words]), scene_words[src->labels[idx]]);
            words++;
        }
        assert_int_equal(words, e->tgt_len);
        assert_int_equal(e->src_len, words);
    }
}

static void test_scene_dataset_disjoint(void **state) {
    (void)state;
    FashionMnist fm;
    fake_data(&fm);
    Dataset d;
    assert_int_equal(scene_dataset(&d, &fm, 2, 40, 10, 25, 7), 0);
    assert_int_equal(d.value_size, 56 * 56);
    assert_int_equal(d.tgt_vocab.size, 4 + FASHION_MNIST_CLASSES);
    assert_int_equal(d.train.n, 40);
    assert_int_equal(d.test.n, 25);
    check_split(&d, &d.train, &fm.train, 1, 2);
    check_split(&d, &d.valid, &fm.valid, 1001, 2);
    check_split(&d, &d.test, &fm.test, 2001, 2);
    dataset_free(&d);
    assert_int_equal(scene_dataset(&d, &fm, 2, 0, 10, 25, 7), -1);
    free_fake(&fm);
}

static void test_caption_reading_order(void **state) {
    (void)state;
    const int labels[9] = {-1, 8, -1, 7, -1, 4, 2, -1, -1};   /* _ bag _ / sneaker _ coat / pullover _ _ */
    int words[9];
    assert_int_equal(scene_caption(labels, 3, words), 4);
    assert_int_equal(words[0], 8);
    assert_int_equal(words[1], 7);
    assert_int_equal(words[2], 4);
    assert_int_equal(words[3], 2);
}

/* batch_fill copies each example's image; greedy decoding runs on it. */
static void test_driver_image_batch(void **state) {
    (void)state;
    FashionMnist fm;
    fake_data(&fm);
    Dataset d;
    assert_int_equal(scene_dataset(&d, &fm, 2, 6, 2, 4, 3), 0);
    Batch b;
    batch_alloc(&b, 4, d.max_src_len, d.max_tgt_len);
    batch_alloc_values(&b, 4, d.value_size);
    int idx[2] = {3, 1};
    batch_fill(&b, &d.test, idx, 2);
    assert_memory_equal(b.values, d.test.ex[3].values, sizeof(float) * (size_t)d.value_size);
    assert_memory_equal(b.values + d.value_size, d.test.ex[1].values, sizeof(float) * (size_t)d.value_size);
    batch_free(&b);
    dataset_free(&d);
    free_fake(&fm);
}

int main(void) {
    backend_select(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_pool),
        cmocka_unit_test(test_gradients_attend),
        cmocka_unit_test(test_gradients_transformer),
        cmocka_unit_test(test_gradients_cnn),
        cmocka_unit_test(test_pretrained_cnn),
        cmocka_unit_test(test_decoding_pool),
        cmocka_unit_test(test_decoding_attend),
        cmocka_unit_test(test_decoding_transformer),
        cmocka_unit_test(test_cross_maps_are_the_decoding_maps),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_config_lines),
        cmocka_unit_test(test_build_from_data),
        cmocka_unit_test(test_scene_determinism),
        cmocka_unit_test(test_scene_dataset_disjoint),
        cmocka_unit_test(test_caption_reading_order),
        cmocka_unit_test(test_driver_image_batch),
    };
    return cmocka_run_group_tests_name("caption", tests, NULL, NULL);
}
