/* test_batchnorm.c - batch normalisation (common/nn/batchnorm.h) and the
 * models that can use it (chapter 06's block.h says where it sits).
 *
 *  - the kernel's backward against central finite differences (dx, dgamma,
 *    dbeta), training (through the batch statistics) and evaluation (the
 *    running ones, constants), with padding, at odd shapes and at a width
 *    above the kernel's block of 64 features; its numbers against PyTorch
 *    are test_golden's (tests/golden/batchnorm.bin);
 *  - padding: what the padded rows hold moves neither the real rows'
 *    outputs nor the statistics nor the running averages;
 *  - the encoder-decoder (06_transformer) with batch norm: a few training
 *    passes move its running statistics, a validation pass (evaluation)
 *    leaves them; its checkpoint keeps them (enc./dec.running_mean, _var),
 *    and a model loaded from it gives the same validation loss, bit for bit;
 *    without them (a layernorm model) the checkpoint is the plain one;
 *  - the ViT (07_vision_transformer) likewise through its Classifier face;
 *    its config text has no norm_type line for LayerNorm (the text, and the
 *    checkpoint, of before the key) and reads a text without one as
 *    LayerNorm;
 *  - the GPT refuses batch norm, with a message that says why. (The leak it
 *    would have, a causal block's position 0 moved by a change at its last
 *    position, is test_block's test_batchnorm_leaks_the_future_in_a_causal_block.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"   /* before cmocka.h, whose fail() macro would clash with error.h's fail() */
#include "06_transformer/gpt.h"
#include "06_transformer/transformer.h"
#include "07_vision_transformer/vit.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "nn/batchnorm.h"
#include "nn/gradcheck.h"
#include "layer_checks.h"
#include "temp_dir.h"
#include "toy_split.h"

/* ------------------------------------------------------------- the kernel */

typedef struct {
    int B, N, D, train;
    const int *lens;
    float *x, *gamma, *beta, *out, *mean, *rstd, *running_mean, *running_var, *w;
} Kernel;

static void kernel_make(Kernel *k, int B, int N, int D, const int *lens, int train, Rng *r) {
    memset(k, 0, sizeof *k);
    *k = (Kernel){.B = B, .N = N, .D = D, .lens = lens, .train = train};
    const size_t n = (size_t)B * N * D;
    k->x = zeroed_floats(n);
    k->out = zeroed_floats(n);
    k->w = zeroed_floats(n);
    k->gamma = zeroed_floats((size_t)D);
    k->beta = zeroed_floats((size_t)D);
    k->mean = zeroed_floats((size_t)D);
    k->rstd = zeroed_floats((size_t)D);
    k->running_mean = zeroed_floats((size_t)D);
    k->running_var = zeroed_floats((size_t)D);
    fill_uniform(k->x, n, 1.0f, r);
    fill_uniform(k->w, n, 1.0f, r);
    fill_uniform(k->gamma, (size_t)D, 0.5f, r);
    fill_uniform(k->beta, (size_t)D, 0.5f, r);
    fill_uniform(k->running_mean, (size_t)D, 0.3f, r);
    for (int d = 0; d < D; d++) {
        k->gamma[d] += 1.0f;
        k->running_var[d] = 1.0f + 0.5f * (2.0f * rng_uniform(r) - 1.0f);
    }
}

static void kernel_free(Kernel *k) {
    free(k->x); free(k->out); free(k->w); free(k->gamma); free(k->beta); free(k->mean); free(k->rstd);
    free(k->running_mean); free(k->running_var);
}

static void kernel_forward(Kernel *k) {
    if (k->train)   /* (the running averages are not updated here: the loss is a function of x alone) */
        batchnorm_forward(k->out, k->mean, k->rstd, NULL, NULL, k->x, k->gamma, k->beta, k->lens, k->B, k->N, k->D,
                          1e-5f, BATCHNORM_MOMENTUM);
    else
        batchnorm_forward_running(k->out, k->mean, k->rstd, k->x, k->gamma, k->beta, k->running_mean,
                                  k->running_var, k->B * k->N, k->D, 1e-5f);
}

/* L = sum w * out over every row (padded rows too: their outputs depend on the statistics) */
static double kernel_loss(void *p) {
    Kernel *k = p;
    kernel_forward(k);
    double sum = 0.0;
    for (size_t i = 0; i < (size_t)k->B * k->N * k->D; i++) sum += (double)k->w[i] * k->out[i];
    return sum;
}

static void check_kernel(int B, int N, int D, const int *lens, int train, Rng *r) {
    Kernel k;
    kernel_make(&k, B, N, D, lens, train, r);
    const size_t n = (size_t)B * N * D;
    float *dx = zeroed_floats(n), *dgamma = zeroed_floats((size_t)D), *dbeta = zeroed_floats((size_t)D);
    kernel_forward(&k);
    batchnorm_backward(dx, dgamma, dbeta, k.w, k.mean, k.rstd, k.x, k.gamma, lens, B, N, D, train);
    char what[96];
    snprintf(what, sizeof what, "batchnorm B %d N %d D %d%s, %s: dx", B, N, D, lens ? " padded" : "",
             train ? "training" : "evaluation");
    expect_gradient(gradcheck(kernel_loss, &k, k.x, dx, n, 1e-3f, 200), 1e-2, what);
    expect_gradient(gradcheck(kernel_loss, &k, k.gamma, dgamma, (size_t)D, 1e-3f, 200), 1e-2, "batchnorm dgamma");
    expect_gradient(gradcheck(kernel_loss, &k, k.beta, dbeta, (size_t)D, 1e-3f, 200), 1e-2, "batchnorm dbeta");
    free(dx); free(dgamma); free(dbeta);
    kernel_free(&k);
}

static void test_batchnorm_kernel_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 5, 0);
    int lens3[3] = {2, 0, 1}, lens2[2] = {3, 5};
    for (int train = 0; train < 2; train++) {
        check_kernel(1, 2, 1, NULL, train, &r);      /* two rows, one feature */
        check_kernel(2, 3, 5, NULL, train, &r);
        check_kernel(3, 4, 7, lens3, train, &r);     /* padding; sequence 1 all real */
        check_kernel(2, 5, 70, lens2, train, &r);    /* 70 features: past the block of 64 */
    }
}

/* The padded rows' contents move nothing of the real rows (bit for bit):
 * not their outputs, not the statistics, not the running averages. */
static void test_batchnorm_padding_left_out(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 6, 0);
    const int B = 3, N = 4, D = 9;
    int lens[3] = {2, 0, 3};
    Kernel a, b;
    kernel_make(&a, B, N, D, lens, 1, &r);
    rng_seed(&r, 6, 0);
    kernel_make(&b, B, N, D, lens, 1, &r);
    for (int bb = 0; bb < B; bb++)
        for (int n = 0; n < N; n++)
            if (lens[bb] && n >= lens[bb])
                for (int d = 0; d < D; d++) b.x[((size_t)bb * N + n) * D + d] = 100.0f + (float)d;   /* padding */
    assert_int_equal(batchnorm_counted_rows(lens, B, N), 2 + 4 + 3);
    batchnorm_forward(a.out, a.mean, a.rstd, a.running_mean, a.running_var, a.x, a.gamma, a.beta, lens, B, N, D,
                      1e-5f, BATCHNORM_MOMENTUM);
    batchnorm_forward(b.out, b.mean, b.rstd, b.running_mean, b.running_var, b.x, b.gamma, b.beta, lens, B, N, D,
                      1e-5f, BATCHNORM_MOMENTUM);
    assert_memory_equal(a.mean, b.mean, sizeof(float) * D);
    assert_memory_equal(a.rstd, b.rstd, sizeof(float) * D);
    assert_memory_equal(a.running_mean, b.running_mean, sizeof(float) * D);
    assert_memory_equal(a.running_var, b.running_var, sizeof(float) * D);
    for (int bb = 0; bb < B; bb++)
        for (int n = 0; n < N; n++)
            if (!lens[bb] || n < lens[bb])
                assert_memory_equal(a.out + ((size_t)bb * N + n) * D, b.out + ((size_t)bb * N + n) * D,
                                    sizeof(float) * D);
    kernel_free(&a);
    kernel_free(&b);
}

/* --------------------------------------------------------- the encoder-decoder */

enum { V_SRC = 9, V_TGT = 9, MAX_LEN = 6 };

static TransformerConfig tiny_config(BlockNormPlace place, BlockNorm norm) {
    TransformerConfig c;
    memset(&c, 0, sizeof c);
    c.layers = 2;
    c.block = (BlockSpec){8, 2, 4, 12, place, norm, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN, 0, 0, 0.0f, 0, 0.0f, 0,
                          {0}};
    c.pos = POSITIONS_SINUSOIDAL;
    c.kv_cache = 1;
    return c;
}

static float *copy_floats(const float *x, size_t n) {
    float *y = zeroed_floats(n);
    memcpy(y, x, sizeof(float) * n);
    return y;
}

static void test_transformer_batchnorm_checkpoint(void **state) {
    (void)state;
    char dir[256], path[300];
    assert_int_equal(temp_dir_make(dir, sizeof dir, "test_batchnorm"), 0);
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    ToySplit ts;
    toy_split(&ts, 4, 5, 2, MAX_LEN, 1, 21);
    Batch batch;
    batch_alloc(&batch, 4, MAX_LEN, MAX_LEN);
    int idx[4] = {0, 1, 2, 3};
    batch_fill(&batch, &ts.split, idx, 4);
    for (int place = 0; place < 2; place++) {
        TransformerConfig c = tiny_config((BlockNormPlace)place, BLOCK_BATCHNORM);
        Transformer t, back;
        assert_int_equal(transformer_create(&t, &c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 5), 0);
        Seq2Seq m;
        transformer_interface(&t, &m);
        assert_int_equal(m.n_buffers, 4);
        assert_string_equal(m.buffers[0].name, "enc.running_mean");
        assert_string_equal(m.buffers[3].name, "dec.running_var");
        /* per stack: L blocks of 2 (encoder) or 3 (decoder) norms, and a pre-norm stack's final one */
        assert_int_equal(m.buffers[0].count, (size_t)(2 * 2 + place) * 8);
        assert_int_equal(m.buffers[2].count, (size_t)(2 * 3 + place) * 8);
        float *start = copy_floats(t.enc.running_var, m.buffers[1].count);
        for (int step = 0; step < 3; step++) transformer_train_step(&t, &batch, 1);   /* training passes */
        assert_true(memcmp(start, t.enc.running_var, sizeof(float) * m.buffers[1].count) != 0);
        float *trained = copy_floats(t.dec.running_mean, m.buffers[2].count);
        const double valid = transformer_train_step(&t, &batch, 0);   /* evaluation: the running statistics */
        assert_memory_equal(trained, t.dec.running_mean, sizeof(float) * m.buffers[2].count);   /* not moved */
        assert_int_equal(checkpoint_save_with_state(path, "model=test\n", &t.params, m.buffers, m.n_buffers), 0);
        /* another model (another seed), loaded from the file: the same running statistics and loss */
        assert_int_equal(transformer_create(&back, &c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 77), 0);
        Seq2Seq mb;
        transformer_interface(&back, &mb);
        assert_int_equal(checkpoint_load_with_state(path, &back.params, mb.buffers, mb.n_buffers), 0);
        for (int k = 0; k < 4; k++)
            assert_memory_equal(mb.buffers[k].data, m.buffers[k].data, sizeof(float) * m.buffers[k].count);
        const double valid_back = transformer_train_step(&back, &batch, 0);
        assert_memory_equal(&valid_back, &valid, sizeof valid);
        /* its weights alone, without the running statistics, would evaluate otherwise */
        Transformer fresh;
        assert_int_equal(transformer_create(&fresh, &c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 77), 0);
        assert_int_equal(checkpoint_load(path, &fresh.params), 0);
        assert_true(transformer_train_step(&fresh, &batch, 0) != valid);
        transformer_free(&fresh);
        transformer_free(&back);
        transformer_free(&t);
        free(start);
        free(trained);
    }
    /* a layernorm model has no buffers: its checkpoint is the plain one, and loads as before */
    TransformerConfig ln = tiny_config(BLOCK_PRE_NORM, BLOCK_LAYERNORM);
    Transformer t;
    assert_int_equal(transformer_create(&t, &ln, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 5), 0);
    Seq2Seq m;
    transformer_interface(&t, &m);
    assert_int_equal(m.n_buffers, 0);
    assert_null(t.enc.running_mean);
    char plain[320];
    snprintf(plain, sizeof plain, "%s/plain.ckpt", dir);
    assert_int_equal(checkpoint_save(plain, "model=test\n", &t.params), 0);
    assert_int_equal(checkpoint_save_with_state(path, "model=test\n", &t.params, m.buffers, m.n_buffers), 0);
    FILE *a = fopen(plain, "rb"), *b = fopen(path, "rb");
    assert_non_null(a);
    assert_non_null(b);
    int ca, cb;
    do {
        ca = fgetc(a);
        cb = fgetc(b);
        assert_int_equal(ca, cb);
    } while (ca != EOF);
    fclose(a);
    fclose(b);
    assert_int_equal(checkpoint_load_with_state(plain, &t.params, m.buffers, m.n_buffers), 0);
    transformer_free(&t);
    /* the config keeps the norm's name */
    TransformerConfig bn = tiny_config(BLOCK_PRE_NORM, BLOCK_BATCHNORM), read;
    char text[1024] = "";
    assert_int_equal(config_write(text, sizeof text, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &bn), 0);
    assert_non_null(strstr(text, "norm_type=batchnorm\n"));
    memset(&read, 0, sizeof read);
    assert_int_equal(config_read(text, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &read), 0);
    assert_int_equal(read.block.norm, BLOCK_BATCHNORM);
    batch_free(&batch);
    temp_dir_remove(dir);
}

/* ------------------------------------------------------------------ the ViT */

static VitConfig small_vit(BlockNorm norm) {
    return (VitConfig){.patch = {.channels = 1, .rows = 8, .cols = 8, .P = 4, .D = 8}, .layers = 2, .heads = 2,
                       .ff = 12, .pool = VIT_POOL_CLS, .pos = VIT_POS_LEARNED, .classes = 3, .norm = norm};
}

static void test_vit_batchnorm_checkpoint(void **state) {
    (void)state;
    char dir[256], path[300];
    assert_int_equal(temp_dir_make(dir, sizeof dir, "test_batchnorm_vit"), 0);
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    Rng r;
    rng_seed(&r, 8, 0);
    enum { B = 5 };
    float images[B * 64];
    int targets[B] = {0, 1, 2, 1, 0};
    fill_uniform(images, sizeof images / sizeof images[0], 1.0f, &r);
    const VitConfig cfg = small_vit(BLOCK_BATCHNORM);
    Classifier c, back;
    assert_int_equal(vit_build(&c, &cfg, B, 3), 0);
    assert_int_equal(c.n_buffers, 2);
    assert_string_equal(c.buffers[0].name, "enc.running_mean");
    assert_string_equal(c.buffers[1].name, "enc.running_var");
    assert_int_equal(c.buffers[0].count, (size_t)(2 * 2 + 1) * 8);   /* two norms per block, the final one */
    const Examples e = {B, 64, 1, NULL, images, targets};
    c.set_training(c.self, 1);
    for (int step = 0; step < 3; step++) {
        params_zero_grad(c.params);
        c.forward(c.self, &e);
        c.backward(c.self, &e);
    }
    /* the second pass of a sharpness-aware step (replay) leaves the running statistics as they were */
    float *held = copy_floats(vit_of(&c)->st.running_mean, c.buffers[0].count);
    c.replay(c.self);
    c.forward(c.self, &e);
    assert_memory_equal(held, vit_of(&c)->st.running_mean, sizeof(float) * c.buffers[0].count);
    c.forward(c.self, &e);   /* ... and the next training pass moves them again */
    assert_true(memcmp(held, vit_of(&c)->st.running_mean, sizeof(float) * c.buffers[0].count) != 0);
    c.set_training(c.self, 0);
    c.forward(c.self, &e);
    float *logits = copy_floats(c.logits(c.self), (size_t)B * 3);
    assert_int_equal(checkpoint_save_with_state(path, "model=test\n", c.params, c.buffers, c.n_buffers), 0);
    assert_int_equal(vit_build(&back, &cfg, B, 44), 0);
    assert_int_equal(checkpoint_load_with_state(path, back.params, back.buffers, back.n_buffers), 0);
    back.forward(back.self, &e);
    assert_memory_equal(back.logits(back.self), logits, sizeof(float) * B * 3);
    back.destroy(back.self);
    c.destroy(c.self);
    free(held);
    free(logits);
    /* LayerNorm: no buffers, and the tensors of before (enc_norm.gamma and beta) */
    const VitConfig ln = small_vit(BLOCK_LAYERNORM);
    assert_int_equal(vit_build(&c, &ln, B, 3), 0);
    assert_int_equal(c.n_buffers, 0);
    assert_non_null(params_find(c.params, "enc_norm.beta"));
    c.destroy(c.self);
    const VitConfig rms = small_vit(BLOCK_RMSNORM);   /* RMSNorm has no beta */
    assert_int_equal(vit_build(&c, &rms, B, 3), 0);
    assert_non_null(params_find(c.params, "enc_norm.gamma"));
    assert_null(params_find(c.params, "enc_norm.beta"));
    c.destroy(c.self);
    temp_dir_remove(dir);
}

/* norm_type= is written only when it is not layernorm, and a text without
 * it (every checkpoint from before the key) reads as LayerNorm. */
static void test_vit_norm_type_line(void **state) {
    (void)state;
    const BlockNorm norms[3] = {BLOCK_LAYERNORM, BLOCK_RMSNORM, BLOCK_BATCHNORM};
    const char *lines[3] = {NULL, "norm_type=rmsnorm\n", "norm_type=batchnorm\n"};
    for (int k = 0; k < 3; k++) {
        VitConfig cfg = small_vit(norms[k]), back;
        char text[1024] = "";
        assert_int_equal(config_write(text, sizeof text, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &cfg), 0);
        if (lines[k]) assert_non_null(strstr(text, lines[k]));
        else assert_null(strstr(text, "norm_type"));
        memset(&back, 0xff, sizeof back);
        assert_int_equal(config_read(text, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &back), 0);
        assert_int_equal(back.norm, norms[k]);
    }
}

/* ------------------------------------------------------------------ the GPT */

static void test_gpt_refuses_batchnorm(void **state) {
    (void)state;
    GptConfig c;
    memset(&c, 0, sizeof c);
    c.layers = 1;
    c.block = (BlockSpec){8, 2, 4, 12, BLOCK_PRE_NORM, BLOCK_BATCHNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN, 1, 0,
                          0.0f, 0, 0.0f, 0, {0}};
    c.pos = POSITIONS_LEARNED;
    c.context = 8;
    c.V = 11;
    Gpt g;
    assert_int_equal(gpt_create(&g, &c, 2, 1), -1);
    assert_non_null(strstr(last_error(), "batch norm"));
    assert_non_null(strstr(last_error(), "j > i"));
    gpt_free(&g);
    c.block.norm = BLOCK_LAYERNORM;
    assert_int_equal(gpt_create(&g, &c, 2, 1), 0);
    gpt_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batchnorm_kernel_gradients),
        cmocka_unit_test(test_batchnorm_padding_left_out),
        cmocka_unit_test(test_transformer_batchnorm_checkpoint),
        cmocka_unit_test(test_vit_batchnorm_checkpoint),
        cmocka_unit_test(test_vit_norm_type_line),
        cmocka_unit_test(test_gpt_refuses_batchnorm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
