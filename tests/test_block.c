/* test_block.c - chapter 06: the transformer block.
 *
 *  - backward against central finite differences (dX and every parameter,
 *    through the one parameter buffer) for every combination of norm
 *    placement (post, pre) x norm (LayerNorm, RMSNorm, none) x MLP (GELU,
 *    ReLU, SwiGLU, none), without and with the causal mask, with padding;
 *    with fused attention; and with dropout and drop path on (the same
 *    masks each time);
 *  - the decoder block (cross-attention to a memory M with padding): dX,
 *    dM and every parameter, for every placement x norm x MLP;
 *  - the KV cache: block_step, one position at a time, gives the rows of
 *    block_forward over the whole sequence (within 1e-5);
 *  - against the previous chapter ("the idea off"): with norm NONE and mlp
 *    NONE the block is chapter 05's multi_head_forward output plus X, bit for
 *    bit on the naive backend and within 1e-6 on the others, and its
 *    backward gives chapter 05's gradients plus dY for dX;
 *  - dropout and drop path: evaluation mode with p > 0 gives the same bits
 *    as p = 0; training changes the output; the sizes: absent tensors take
 *    no room; drop path skips whole examples (a pre-norm block whose two
 *    branches were dropped for an example returns that example's X);
 *  - dropout on the attention weights (attn_dropout): backward against
 *    finite differences with the masks fixed (encoder and decoder blocks);
 *    evaluation gives the bits of attn_dropout 0 and the kept A is the
 *    undropped softmax; in training the block is X + chapter 05 with keep
 *    masks drawn by dropout_mask from the same seed (bit for bit), about p
 *    of them zero; block_spec_check refuses it with fused attention;
 *  - the cache laid out once for a larger batch (block_cache_alloc) gives
 *    the bits of a cache of exactly the pass's size, forward and backward.
 *
 * Step and tolerance. A block chains a dozen float operations, so its finite
 * differences carry more rounding noise than one layer's (growing as 1/eps),
 * and LayerNorm into GELU bends the loss more sharply (truncation, growing as
 * eps^2). Many of the block's gradients are small (1e-3 to 1e-2, under
 * gradcheck's floor of 1e-2), so what is measured is an absolute error of
 * about 1e-4. The largest max_rel_err over every case here, for six seeds of
 * the weights: 0.028 at eps = 3e-3 (noise), 0.017 at 5e-3, 0.015 at 6e-3,
 * 0.032 at 1e-2 (truncation), on the naive and the avx512 backend alike.
 * So eps = 6e-3 and max_rel_err < 3e-2, twice the largest seen; a wrong
 * formula gives 0.1 to 1 (RMSNorm's backward with one term 10% off: 1; a
 * ReLU kink crossed by the step: 0.2 to 1, see keep_relu_off_its_kink). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_transformer/block.h"
#include "06_transformer/prenorm_block.h"
#include "05_multi_head_attention/multi_head.h"
#include "nn/batchnorm.h"
#include "nn/gradcheck.h"
#include "nn/transformer_layers.h"
#include "kernels/matmul.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define EPS 6e-3f
#define TOL 3e-2
#define MAX_CHECKS 120

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static const char *PLACE_NAMES[] = {"post", "pre"};
static const char *NORM_NAMES[] = {"layernorm", "rmsnorm", "no norm", "batchnorm"};
static const char *MLP_NAMES[] = {"gelu", "relu", "swiglu", "no mlp"};

/* A block, its parameters and buffers, for B sequences of N positions. */
typedef struct {
    BlockSpec s;
    int B, N, N_M, train;
    uint64_t dropout_seed;   /* reseeded before each forward: the same mask every time */
    const int *lens;
    float *X, *params, *Y, *wY;
    BlockCache cache;
    float *M;                /* decoder blocks: the memory [B, N_M, D] */
    BlockMemory mem;
    BlockWeights w;
    float *run_mean, *run_var;   /* batch norm's running statistics, when attach_running gave some */
} Block;

/* N_M: memory positions of a decoder block (s.cross), with memory lengths mem_lens. */
static void block_make_with_memory(Block *b, BlockSpec s, int B, int N, int N_M, const int *mem_lens, Rng *r) {
    memset(b, 0, sizeof *b);
    b->s = s;
    b->B = B;
    b->N = N;
    b->N_M = s.cross ? N_M : 0;
    size_t nX = (size_t)B * N * s.D, nP = block_param_count(&s);
    b->X = alloc_floats(nX);
    b->params = alloc_floats(nP);
    b->Y = alloc_floats(nX);
    b->wY = alloc_floats(nX);
    block_cache_alloc(&b->cache, &s, B, N, b->N_M);
    b->w = block_weights_view(&s, b->params);
    fill(b->X, nX, 1.0f, r);
    fill(b->params, nP, 0.6f, r);
    if (s.cross) {
        b->M = alloc_floats((size_t)B * N_M * s.D);
        fill(b->M, (size_t)B * N_M * s.D, 1.0f, r);
        b->mem = (BlockMemory){b->M, mem_lens, N_M};
    }
    /* gammas near 1, as after block_init, so the norms' outputs are not tiny */
    float *gammas[3] = {b->w.norm1_gamma, b->w.normc_gamma, b->w.norm2_gamma};
    for (int g = 0; g < 3; g++)
        if (gammas[g])
            for (int d = 0; d < s.D; d++) gammas[g][d] += 1.0f;
    fill(b->wY, nX, 1.0f, r);
}

static void block_make(Block *b, BlockSpec s, int B, int N, Rng *r) {
    block_make_with_memory(b, s, B, N, 0, NULL, r);
}

static void block_free(Block *b) {
    free(b->X); free(b->params); free(b->Y); free(b->wY); free(b->M); free(b->run_mean); free(b->run_var);
    block_cache_free(&b->cache);
}

static void run_forward(Block *b) {
    Rng rng;
    rng_seed(&rng, b->dropout_seed, 0);
    block_forward(b->Y, &b->cache, b->X, &b->s, &b->w, b->lens, b->s.cross ? &b->mem : NULL, b->B, b->N, b->train,
                  &rng);
}

/* L = sum of wY * Y over every position (padding rows too: they are
 * computed, from the real positions, and backward gives their gradient) */
static double block_loss(void *p) {
    Block *b = p;
    run_forward(b);
    double sum = 0.0;
    size_t n = (size_t)b->B * b->N * b->s.D;
    for (size_t i = 0; i < n; i++) sum += (double)b->wY[i] * b->Y[i];
    return sum;
}

static void expect_grad_ok(GradCheckResult res, const char *what, const BlockSpec *s) {
    if (!(res.max_rel_err < TOL) || res.n_checked == 0)
        fail_msg("%s (%s-norm, %s, %s, causal %d, %s attention, dropout %g, attention dropout %g): max_rel_err "
                 "%.3g at index %zu (numeric %.6g, analytic %.6g), %zu checked",
                 what, PLACE_NAMES[s->norm_place], NORM_NAMES[s->norm], MLP_NAMES[s->mlp], s->causal,
                 s->attention == MULTI_HEAD_FUSED ? "fused" : "plain", (double)s->dropout,
                 (double)s->attn_dropout, res.max_rel_err, res.worst_index, res.worst_numeric,
                 res.worst_analytic, res.n_checked);
}

/* ReLU has a kink at 0, where finite differences are wrong. Biases of size
 * 1 to 1.6 (of either sign) and W_1 entries below 0.03 keep every
 * pre-activation U W_1 + b_1 at least 0.15 away from 0 (|U W_1| <= D 3.5
 * 0.03 for D = 6 and normalised U; 3 without a norm), far more than a
 * step of eps moves it: the units with b_1 < 0 are off, the others on, and
 * relu_backward's mask is still checked. */
static void keep_relu_off_its_kink(Block *b, Rng *r) {
    fill(b->w.W_1, (size_t)b->s.D * b->s.F, 0.03f, r);
    for (int f = 0; f < b->s.F; f++) {
        float size = 1.0f + 0.6f * rng_uniform(r);
        b->w.b_1[f] = (f % 2 == 0) ? size : -size;
    }
}

/* Gradient check of dX, of dM (decoder blocks: a memory of N_M positions,
 * mem_lens) and of the whole parameter buffer for one spec. */
static void check_gradients_with_memory(BlockSpec s, int B, int N, const int *lens, int N_M, const int *mem_lens,
                                        int train, Rng *r) {
    Block b;
    block_make_with_memory(&b, s, B, N, N_M, mem_lens, r);
    if (s.mlp == BLOCK_MLP_RELU) keep_relu_off_its_kink(&b, r);
    b.lens = lens;
    b.train = train;
    b.dropout_seed = 77;
    size_t nX = (size_t)B * N * s.D, nP = block_param_count(&s), nM = (size_t)B * b.N_M * s.D;
    float *dX = alloc_floats(nX), *dP = alloc_floats(nP), *dM = alloc_floats(nM);
    float *scratch = alloc_floats(block_scratch_floats(&s, B, N, b.N_M));
    BlockWeights dw = block_weights_view(&s, dP);
    run_forward(&b);
    block_backward(dX, s.cross ? dM : NULL, &dw, scratch, b.wY, &b.cache, b.X, &s, &b.w, lens,
                   s.cross ? &b.mem : NULL, B, N);
    expect_grad_ok(gradcheck(block_loss, &b, b.X, dX, nX, EPS, MAX_CHECKS), "block dX", &s);
    expect_grad_ok(gradcheck(block_loss, &b, b.params, dP, nP, EPS, MAX_CHECKS), "block dparams", &s);
    if (s.cross) expect_grad_ok(gradcheck(block_loss, &b, b.M, dM, nM, EPS, MAX_CHECKS), "decoder block dM", &s);
    free(dX); free(dP); free(dM); free(scratch);
    block_free(&b);
}

static void check_block_gradients(BlockSpec s, int B, int N, const int *lens, int train, Rng *r) {
    check_gradients_with_memory(s, B, N, lens, 0, NULL, train, r);
}

static void test_block_gradients_every_combination(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 1, 0);
    int lens[2] = {3, 0};   /* sequence 0 has 3 real positions, sequence 1 all 5 */
    for (int place = 0; place < 2; place++)
        for (int norm = 0; norm < 3; norm++)
            for (int mlp = 0; mlp < 4; mlp++)
                for (int causal = 0; causal < 2; causal++) {
                    BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, (BlockNorm)norm, (BlockMlp)mlp,
                                   0.0f, MULTI_HEAD_PLAIN, causal, 0, 0.0f, 0, 0.0f, 0, {0}};
                    check_block_gradients(s, 2, 5, causal ? lens : NULL, 1, &r);
                }
}

/* The MLP sublayer as a mixture of experts (moe.h; alpha 0: the loss here
 * is only sum wY * Y), post- and pre-norm, k = 1 and 2, in training with a
 * capacity that drops pairs and at evaluation. The routing is piecewise:
 * a step of EPS that changes a position's experts makes the finite
 * difference a jump (other seeds here do); with this seed none does. */
static void test_block_gradients_with_experts(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 23, 0);
    for (int place = 0; place < 2; place++)
        for (int k = 1; k <= 2; k++)
            for (int train = 0; train < 2; train++) {
                BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_SWIGLU, 0.0f,
                               MULTI_HEAD_PLAIN, 1, 0, 0.0f, 0, 0.0f, 0, {3, k, 0.0f, train ? 1.0f : 0.0f, k - 1}};
                check_block_gradients(s, 2, 5, NULL, train, &r);
            }
}

static void test_block_gradients_odd_shapes(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 2, 0);
    /* one position, one head of width 1; H D_H != D; fused attention */
    BlockSpec tiny = {1, 1, 1, 1, BLOCK_PRE_NORM, BLOCK_RMSNORM, BLOCK_MLP_SWIGLU, 0.0f, MULTI_HEAD_PLAIN, 0, 0,
                      0.0f, 0, 0.0f, 0, {0}};
    check_block_gradients(tiny, 1, 1, NULL, 1, &r);
    BlockSpec wide = {5, 3, 3, 9, BLOCK_POST_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN, 1, 0,
                      0.0f, 0, 0.0f, 0, {0}};
    check_block_gradients(wide, 1, 7, NULL, 1, &r);
    int lens[2] = {4, 6};
    BlockSpec fused = {6, 2, 3, 8, BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_FUSED, 1, 0,
                       0.0f, 0, 0.0f, 0, {0}};
    check_block_gradients(fused, 2, 6, lens, 1, &r);
    fused.norm_place = BLOCK_POST_NORM;
    fused.norm = BLOCK_RMSNORM;
    fused.mlp = BLOCK_MLP_SWIGLU;
    check_block_gradients(fused, 2, 6, NULL, 1, &r);
}

/* With dropout on, the forward is reseeded each time: the same mask, so the
 * block is a fixed differentiable function and backward must match it. */
static void test_block_gradients_with_dropout(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 3, 0);
    for (int place = 0; place < 2; place++) {
        BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.3f,
                       MULTI_HEAD_PLAIN, 1, 0, 0.0f, 0, 0.0f, 0, {0}};
        check_block_gradients(s, 2, 4, NULL, 1, &r);
        /* drop path, alone and after dropout: 4 examples, about half their branches dropped */
        s.drop_path = 0.5f;
        check_block_gradients(s, 4, 4, NULL, 1, &r);
        s.dropout = 0.0f;
        check_block_gradients(s, 4, 4, NULL, 1, &r);
    }
}

/* Drop path drops whole examples' branches: with p = 0.9 and no dropout,
 * an example whose two branches were both dropped comes out as it went in,
 * bit for bit (Y_b = X_b + 0 + 0), and one with a branch kept does not. */
static void test_block_drop_path_skips_whole_examples(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 8, 0);
    const int B = 16, N = 5;
    for (int place = 0; place < 2; place++) {
        BlockSpec s = {8, 2, 4, 12, (BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN,
                       1, 0, 0.0f, 0, 0.9f, 0, {0}};
        Block b;
        block_make(&b, s, B, N, &r);
        b.train = 1;
        b.dropout_seed = 21;
        run_forward(&b);
        const size_t per = (size_t)N * s.D;
        int same = 0;
        for (int e = 0; e < B; e++) same += memcmp(b.Y + e * per, b.X + e * per, sizeof(float) * per) == 0;
        if (place == BLOCK_PRE_NORM) {
            /* pre-norm: Y = X + branches, so both dropped is the identity;
             * 0.81 of the examples expected, at least one of each */
            assert_in_range(same, 1, B - 1);
        } else {
            /* post-norm renormalises after each sum: never the identity */
            assert_int_equal(same, 0);
        }
        block_free(&b);
    }
}

/* The decoder block: causal self-attention, cross-attention to a padded
 * memory, MLP; every placement x norm x MLP, and with dropout. */
static void test_decoder_block_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 8, 0);
    int lens[2] = {4, 0}, mem_lens[2] = {3, 0};   /* memory 0 has 3 real positions of 6 */
    for (int place = 0; place < 2; place++)
        for (int norm = 0; norm < 3; norm++)
            for (int mlp = 0; mlp < 4; mlp++) {
                BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, (BlockNorm)norm, (BlockMlp)mlp, 0.0f,
                               MULTI_HEAD_PLAIN, 1, 1, 0.0f, 0, 0.0f, 0, {0}};
                check_gradients_with_memory(s, 2, 5, lens, 6, mem_lens, 1, &r);
            }
    for (int place = 0; place < 2; place++) {
        BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.3f, MULTI_HEAD_PLAIN,
                       1, 1, 0.0f, 0, 0.0f, 0, {0}};
        check_gradients_with_memory(s, 2, 4, NULL, 5, mem_lens, 1, &r);
    }
}

/* Dropout on the attention weights, in training: the forward is reseeded
 * each time, so the keep masks are the same and the block is a fixed
 * function. Encoder blocks (with and without the causal mask, with padding)
 * and decoder blocks (self and cross weights dropped), both placements, with
 * and without the sublayer outputs' dropout too. */
static void test_block_gradients_with_attention_dropout(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 10, 0);
    int lens[2] = {4, 0}, mem_lens[2] = {3, 0};
    for (int place = 0; place < 2; place++)
        for (int out_drop = 0; out_drop < 2; out_drop++) {
            const float p_out = out_drop ? 0.3f : 0.0f;
            for (int causal = 0; causal < 2; causal++) {
                BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, p_out,
                               MULTI_HEAD_PLAIN, causal, 0, 0.3f, 0, 0.0f, 0, {0}};
                check_block_gradients(s, 2, 5, lens, 1, &r);
            }
            BlockSpec dec = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, p_out,
                             MULTI_HEAD_PLAIN, 1, 1, 0.3f, 0, 0.0f, 0, {0}};
            check_gradients_with_memory(dec, 2, 5, lens, 6, mem_lens, 1, &r);
        }
}

/* Decoding with the KV cache: feeding positions 0, 1, ... one at a time
 * through block_step gives row t of block_forward over the whole sequence
 * (causal: row t never depends on later rows), for encoder-style and
 * decoder blocks, both placements. */
static void test_block_step_matches_forward(void **state) {
    (void)state;
    for (int experts = 0; experts < 2; experts++)   /* 1: a mixture of 3 experts, k = 2 */
    for (int cross = 0; cross < 2; cross++)
        for (int place = 0; place < 2; place++)
            for (int mlp = 0; mlp < 3; mlp++) {
                Rng r;
                rng_seed(&r, 9, 0);
                const int B = 2, N = 7, N_M = 5, D = 8, H = 2, D_H = 4, HD = H * D_H, T_cap = 9;
                int mem_lens[2] = {2, 5};
                BlockSpec s = {D, H, D_H, 12, (BlockNormPlace)place, BLOCK_LAYERNORM, (BlockMlp)mlp, 0.0f,
                               MULTI_HEAD_PLAIN, 1, cross, 0.0f, 0, 0.0f, 0, {0}};
                if (experts) s.moe = (BlockMoe){3, 2, 0.01f, 1.0f, 0};   /* capacity: training only */
                Block b;
                block_make_with_memory(&b, s, B, N, N_M, mem_lens, &r);
                run_forward(&b);
                MultiHeadSpec as = block_attention_spec(&s);
                float *KV = alloc_floats((size_t)B * N_M * 2 * HD);
                if (cross) multi_head_cross_memory(KV, b.M, &as, &b.w.cross, B * N_M);
                float *K = alloc_floats((size_t)B * T_cap * HD), *V = alloc_floats((size_t)B * T_cap * HD);
                float *x = alloc_floats((size_t)B * D), *y = alloc_floats((size_t)B * D);
                float *work = alloc_floats(block_step_work_floats(&s, B, T_cap, N_M));
                float *cross_A = alloc_floats((size_t)B * H * N_M);
                BlockStepRow rows[2];
                for (int t = 0; t < N; t++) {
                    for (int i = 0; i < B; i++) {
                        memcpy(x + (size_t)i * D, b.X + ((size_t)i * N + t) * D, sizeof(float) * D);
                        rows[i] = (BlockStepRow){K + (size_t)i * T_cap * HD, V + (size_t)i * T_cap * HD, t,
                                                 KV + (size_t)i * N_M * 2 * HD, mem_lens[i]};
                    }
                    block_step(y, cross ? cross_A : NULL, x, &s, &b.w, rows, B, T_cap, N_M, work);
                    for (int i = 0; i < B; i++)
                        for (int d = 0; d < D; d++) {
                            float want = b.Y[((size_t)i * N + t) * D + d], got = y[(size_t)i * D + d];
                            if (fabsf(got - want) > 1e-5f * (1.0f + fabsf(want)))
                                fail_msg("experts %d cross %d place %d mlp %d: row %d position %d [%d]: step %.8g, "
                                         "forward %.8g", experts, cross, place, mlp, i, t, d, got, want);
                        }
                    if (cross) {   /* the step's cross-attention weights are forward's row t */
                        const float *A = b.cache.cross_A;
                        for (int i = 0; i < B; i++)
                            for (int h = 0; h < H; h++)
                                for (int j = 0; j < N_M; j++)
                                    assert_true(fabsf(cross_A[((size_t)i * H + h) * N_M + j] -
                                                      A[(((size_t)i * H + h) * N + t) * N_M + j]) < 1e-5f);
                    }
                }
                free(KV); free(K); free(V); free(x); free(y); free(work); free(cross_A);
                block_free(&b);
            }
}

/* ------------------------------------------------------------ batch norm */

/* Running statistics for b's batch norms (block_running_floats each): means
 * in [-0.3, 0.3], variances in [0.5, 1.5], as after some training. */
static void attach_running(Block *b, Rng *r) {
    const size_t n = block_running_floats(&b->s);
    b->run_mean = alloc_floats(n);
    b->run_var = alloc_floats(n);
    fill(b->run_mean, n, 0.3f, r);
    for (size_t i = 0; i < n; i++) b->run_var[i] = 1.0f + 0.5f * (2.0f * rng_uniform(r) - 1.0f);
    b->w.running_mean = b->run_mean;
    b->w.running_var = b->run_var;
}

/* Batch norm (BLOCK_BATCHNORM) in the block. Training: its statistics run
 * over every real row, so one position's gradient reaches all the others
 * through them (and the padded rows, left out of the statistics, still get
 * theirs): dX, every parameter, and dM for the decoder, against finite
 * differences, both placements, with and without the causal mask, padding
 * (lens) on, with GELU, SwiGLU and no MLP. Evaluation, with running
 * statistics attached: the statistics are constants, the same checks. */
static void test_block_gradients_with_batchnorm(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 31, 0);
    int lens[2] = {3, 0}, mem_lens[2] = {4, 0};
    const BlockMlp mlps[3] = {BLOCK_MLP_GELU, BLOCK_MLP_SWIGLU, BLOCK_NO_MLP};
    for (int place = 0; place < 2; place++) {
        for (int causal = 0; causal < 2; causal++)
            for (int m = 0; m < 3; m++) {
                BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_BATCHNORM, mlps[m], 0.0f, MULTI_HEAD_PLAIN,
                               causal, 0, 0.0f, 0, 0.0f, 0, {0}};
                check_block_gradients(s, 2, 5, lens, 1, &r);
            }
        BlockSpec dec = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_BATCHNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN,
                         1, 1, 0.0f, 0, 0.0f, 0, {0}};
        check_gradients_with_memory(dec, 2, 5, lens, 6, mem_lens, 1, &r);
    }
    /* evaluation: the running statistics, constants to the gradient */
    for (int place = 0; place < 2; place++) {
        BlockSpec s = {6, 2, 3, 7, (BlockNormPlace)place, BLOCK_BATCHNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN, 0,
                       0, 0.0f, 0, 0.0f, 0, {0}};
        Block b;
        block_make(&b, s, 2, 5, &r);
        attach_running(&b, &r);
        size_t nX = (size_t)2 * 5 * s.D, nP = block_param_count(&s);
        float *dX = alloc_floats(nX), *dP = alloc_floats(nP), *scratch = alloc_floats(block_scratch_floats(&s, 2, 5, 0));
        BlockWeights dw = block_weights_view(&s, dP);
        run_forward(&b);   /* train 0 */
        block_backward(dX, NULL, &dw, scratch, b.wY, &b.cache, b.X, &s, &b.w, NULL, NULL, 2, 5);
        expect_grad_ok(gradcheck(block_loss, &b, b.X, dX, nX, EPS, MAX_CHECKS), "batchnorm block dX (evaluation)", &s);
        expect_grad_ok(gradcheck(block_loss, &b, b.params, dP, nP, EPS, MAX_CHECKS),
                       "batchnorm block dparams (evaluation)", &s);
        free(dX); free(dP); free(scratch);
        block_free(&b);
    }
}

/* Why a causal model refuses batch norm (gpt.c): in a causal block, change
 * the input at the last position of a sequence only. With LayerNorm the
 * output at position 0 keeps its bits (it never looks past itself); with
 * batch norm in training it changes, through the statistics that row N - 1
 * is part of: position 0 sees the future. In evaluation (the running
 * statistics) the leak is gone again. */
static void test_batchnorm_leaks_the_future_in_a_causal_block(void **state) {
    (void)state;
    const int B = 2, N = 5, D = 8;
    for (int place = 0; place < 2; place++)
        for (int k = 0; k < 3; k++) {   /* LayerNorm; batch norm in training; batch norm in evaluation */
            Rng r;
            rng_seed(&r, 41, 0);
            BlockSpec s = {D, 2, 4, 12, (BlockNormPlace)place, k == 0 ? BLOCK_LAYERNORM : BLOCK_BATCHNORM,
                           BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN, 1, 0, 0.0f, 0, 0.0f, 0, {0}};
            Block b;
            block_make(&b, s, B, N, &r);
            if (k == 2) attach_running(&b, &r);
            b.train = k != 2;
            run_forward(&b);
            float *before = alloc_floats((size_t)D);
            memcpy(before, b.Y, sizeof(float) * D);   /* sequence 0, position 0 */
            for (int d = 0; d < D; d++) b.X[(size_t)(N - 1) * D + d] += 0.5f;   /* sequence 0, position N - 1 */
            run_forward(&b);
            double moved = 0.0;
            for (int d = 0; d < D; d++) moved = fmax(moved, fabs((double)b.Y[d] - before[d]));
            if (k == 1 && !(moved > 1e-4))
                fail_msg("%s-norm causal block, batch norm in training: position 0 moved by %.3g when only position "
                         "%d changed; expected it to see the change through the batch statistics",
                         PLACE_NAMES[place], moved, N - 1);
            if (k != 1 && memcmp(before, b.Y, sizeof(float) * D) != 0)
                fail_msg("%s-norm causal block, %s: position 0 moved by %.3g when only position %d changed",
                         PLACE_NAMES[place], k == 0 ? "LayerNorm" : "batch norm in evaluation", moved, N - 1);
            free(before);
            block_free(&b);
        }
}

/* Training updates the running statistics: the block's, after one pass, are
 * those the kernel (nn/batchnorm.h, PyTorch's in test_golden) leaves from
 * 0 and 1 given the same rows (a post-norm block without MLP: Norm_1 reads
 * S = X + MHA(X), which the cache keeps). Evaluation then normalises with
 * them: Y = gamma (S - mean) / sqrt(var + eps) + beta for every row, whatever
 * the batch (a row's output no longer depends on the other rows). */
static void test_batchnorm_running_statistics_in_the_block(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 43, 0);
    const int B = 2, N = 4, D = 8;
    int lens[2] = {3, 0};
    BlockSpec s = {D, 2, 4, 12, BLOCK_POST_NORM, BLOCK_BATCHNORM, BLOCK_NO_MLP, 0.0f, MULTI_HEAD_PLAIN, 0, 0, 0.0f,
                   0, 0.0f, 0, {0}};
    assert_int_equal(block_running_floats(&s), (size_t)D);
    Block b;
    block_make(&b, s, B, N, &r);
    b.lens = lens;
    b.run_mean = alloc_floats((size_t)D);
    b.run_var = alloc_floats((size_t)D);
    for (int d = 0; d < D; d++) b.run_var[d] = 1.0f;
    b.w.running_mean = b.run_mean;
    b.w.running_var = b.run_var;
    b.train = 1;
    run_forward(&b);
    float want_mean[8], want_var[8], mean[8], rstd[8], *scratch = alloc_floats((size_t)B * N * D);
    for (int d = 0; d < D; d++) want_mean[d] = 0.0f, want_var[d] = 1.0f;
    batchnorm_forward(scratch, mean, rstd, want_mean, want_var, b.cache.sub[0].n, b.w.norm1_gamma, b.w.norm1_beta,
                      lens, B, N, D, BLOCK_NORM_EPS, BATCHNORM_MOMENTUM);
    assert_memory_equal(b.run_mean, want_mean, sizeof want_mean);
    assert_memory_equal(b.run_var, want_var, sizeof want_var);
    assert_memory_equal(b.Y, scratch, sizeof(float) * (size_t)B * N * D);   /* training: the batch's statistics */
    /* evaluation, on a batch whose second sequence is new: the running statistics, row by row */
    b.train = 0;
    b.lens = NULL;
    fill(b.X + (size_t)N * D, (size_t)N * D, 3.0f, &r);
    run_forward(&b);
    const float *S = b.cache.sub[0].n;
    for (int i = 0; i < B * N; i++)
        for (int d = 0; d < D; d++) {
            const double want = ((double)S[(size_t)i * D + d] - b.run_mean[d]) /
                                    sqrt((double)b.run_var[d] + BLOCK_NORM_EPS) * b.w.norm1_gamma[d] +
                                b.w.norm1_beta[d];
            if (fabs(b.Y[(size_t)i * D + d] - want) > 1e-5 * (1.0 + fabs(want)))
                fail_msg("evaluation row %d [%d]: %.8g, expected %.8g with the running statistics", i, d,
                         b.Y[(size_t)i * D + d], want);
        }
    free(scratch);
    block_free(&b);
}

/* Decoding with batch norm: block_step (evaluation, the running statistics)
 * gives row t of block_forward with train 0 over the whole sequence. */
static void test_batchnorm_block_step_matches_forward(void **state) {
    (void)state;
    for (int cross = 0; cross < 2; cross++)
        for (int place = 0; place < 2; place++) {
            Rng r;
            rng_seed(&r, 47, 0);
            const int B = 2, N = 6, N_M = 5, D = 8, H = 2, D_H = 4, HD = H * D_H, T_cap = 8;
            int mem_lens[2] = {2, 5};
            BlockSpec s = {D, H, D_H, 12, (BlockNormPlace)place, BLOCK_BATCHNORM, BLOCK_MLP_GELU, 0.0f,
                           MULTI_HEAD_PLAIN, 1, cross, 0.0f, 0, 0.0f, 0, {0}};
            Block b;
            block_make_with_memory(&b, s, B, N, N_M, mem_lens, &r);
            attach_running(&b, &r);
            run_forward(&b);
            MultiHeadSpec as = block_attention_spec(&s);
            float *KV = alloc_floats((size_t)B * N_M * 2 * HD);
            if (cross) multi_head_cross_memory(KV, b.M, &as, &b.w.cross, B * N_M);
            float *K = alloc_floats((size_t)B * T_cap * HD), *V = alloc_floats((size_t)B * T_cap * HD);
            float *x = alloc_floats((size_t)B * D), *y = alloc_floats((size_t)B * D);
            float *work = alloc_floats(block_step_work_floats(&s, B, T_cap, N_M));
            BlockStepRow rows[2];
            for (int t = 0; t < N; t++) {
                for (int i = 0; i < B; i++) {
                    memcpy(x + (size_t)i * D, b.X + ((size_t)i * N + t) * D, sizeof(float) * D);
                    rows[i] = (BlockStepRow){K + (size_t)i * T_cap * HD, V + (size_t)i * T_cap * HD, t,
                                             KV + (size_t)i * N_M * 2 * HD, mem_lens[i]};
                }
                block_step(y, NULL, x, &s, &b.w, rows, B, T_cap, N_M, work);
                for (int i = 0; i < B; i++)
                    for (int d = 0; d < D; d++) {
                        float want = b.Y[((size_t)i * N + t) * D + d], got = y[(size_t)i * D + d];
                        if (fabsf(got - want) > 1e-5f * (1.0f + fabsf(want)))
                            fail_msg("batch norm, cross %d place %d: row %d position %d [%d]: step %.8g, forward %.8g",
                                     cross, place, i, t, d, got, want);
                    }
            }
            free(KV); free(K); free(V); free(x); free(y); free(work);
            block_free(&b);
        }
}

/* ------------------------------------------------------------------------ */

/* norm NONE and mlp NONE: Y = X + multi_head_forward(X), on each backend. */
static void test_block_idea_off_is_chapter_05(void **state) {
    (void)state;
    const char *backends[] = {"naive", "avx2", "avx512"};
    const int can_run[] = {1, cpu_has_avx2_fma(), cpu_has_avx512f()};
    for (int k = 0; k < 3; k++) {
        if (!can_run[k]) continue;
        assert_int_equal(backend_select(backends[k]), 0);
        for (int place = 0; place < 2; place++)
            for (int causal = 0; causal < 2; causal++) {
                Rng r;
                rng_seed(&r, 4, 0);
                const int B = 2, N = 9, D = 8;
                int lens[2] = {5, 0};
                BlockSpec s = {D, 2, 4, 16, (BlockNormPlace)place, BLOCK_NO_NORM, BLOCK_NO_MLP, 0.0f,
                               MULTI_HEAD_PLAIN, causal, 0, 0.0f, 0, 0.0f, 0, {0}};
                Block b;
                block_make(&b, s, B, N, &r);
                b.lens = lens;
                /* a block with no norm and no MLP has only the attention's parameters */
                MultiHeadSpec as = block_attention_spec(&s);
                assert_int_equal(block_param_count(&s), multi_head_param_count(&as));
                run_forward(&b);

                size_t nX = (size_t)B * N * D;
                float *O = alloc_floats(nX), *A = alloc_floats(multi_head_attention_floats(&as, B, N));
                float *mh_cache = alloc_floats(multi_head_cache_floats(&as, B, N));
                multi_head_forward(O, A, NULL, mh_cache, b.X, &as, &b.w.attn, causal, lens, B, N);
                for (size_t i = 0; i < nX; i++) {
                    float want = b.X[i] + O[i];
                    if (k == 0 ? b.Y[i] != want : fabsf(b.Y[i] - want) > 1e-6f * (1.0f + fabsf(want)))
                        fail_msg("[%s] entry %zu: block %.9g, X + chapter 05 %.9g", backends[k], i, b.Y[i], want);
                }

                /* backward: dX = dY + chapter 05's dX, the same weight gradients */
                size_t nP = block_param_count(&s);
                float *dX = alloc_floats(nX), *dP = alloc_floats(nP);
                float *dX05 = alloc_floats(nX), *dP05 = alloc_floats(nP);
                float *scratch = alloc_floats(block_scratch_floats(&s, B, N, 0));
                float *scratch05 = alloc_floats(multi_head_scratch_floats(&as, B, N));
                BlockWeights dw = block_weights_view(&s, dP);
                MultiHeadWeights dw05 = multi_head_weights_view(&as, dP05);
                block_backward(dX, NULL, &dw, scratch, b.wY, &b.cache, b.X, &s, &b.w, lens, NULL, B, N);
                memcpy(dX05, b.wY, sizeof(float) * nX);   /* the residual's dY, first */
                multi_head_backward(dX05, &dw05, scratch05, b.wY, A, NULL, mh_cache, b.X, &as, &b.w.attn, causal,
                                    lens, B, N);
                for (size_t i = 0; i < nX; i++)
                    if (k == 0 ? dX[i] != dX05[i] : fabsf(dX[i] - dX05[i]) > 1e-6f * (1.0f + fabsf(dX05[i])))
                        fail_msg("[%s] dX %zu: block %.9g, chapter 05 %.9g", backends[k], i, dX[i], dX05[i]);
                for (size_t i = 0; i < nP; i++)
                    if (k == 0 ? dP[i] != dP05[i] : fabsf(dP[i] - dP05[i]) > 1e-6f * (1.0f + fabsf(dP05[i])))
                        fail_msg("[%s] dparams %zu: block %.9g, chapter 05 %.9g", backends[k], i, dP[i], dP05[i]);
                free(O); free(A); free(mh_cache); free(dX); free(dP); free(dX05); free(dP05);
                free(scratch); free(scratch05);
                block_free(&b);
            }
    }
    assert_int_equal(backend_select(NULL), 0);
}

/* Evaluation mode with p > 0 is the block with p = 0, bit for bit; training
 * with p > 0 is not. The parameters do not depend on p. */
static void test_block_dropout_off_at_evaluation(void **state) {
    (void)state;
    for (int place = 0; place < 2; place++)
        for (int mlp = 0; mlp < 4; mlp++) {
            Rng r;
            rng_seed(&r, 5, 0);
            const int B = 2, N = 6;
            BlockSpec s = {8, 2, 4, 12, (BlockNormPlace)place, BLOCK_LAYERNORM, (BlockMlp)mlp, 0.0f,
                           MULTI_HEAD_PLAIN, 1, 0, 0.0f, 0, 0.0f, 0, {0}};
            Block b;
            block_make(&b, s, B, N, &r);
            run_forward(&b);
            size_t nX = (size_t)B * N * s.D;
            float *Y0 = alloc_floats(nX);
            memcpy(Y0, b.Y, sizeof(float) * nX);

            BlockSpec s_drop = s;
            s_drop.dropout = 0.5f;
            s_drop.drop_path = 0.5f;
            assert_int_equal(block_param_count(&s_drop), block_param_count(&s));
            BlockCache cache;
            block_cache_alloc(&cache, &s_drop, B, N, 0);
            float *Y = alloc_floats(nX);
            Rng rng;
            rng_seed(&rng, 6, 0);
            block_forward(Y, &cache, b.X, &s_drop, &b.w, NULL, NULL, B, N, 0, &rng);
            assert_memory_equal(Y, Y0, sizeof(float) * nX);
            block_forward(Y, &cache, b.X, &s_drop, &b.w, NULL, NULL, B, N, 1, &rng);
            assert_memory_not_equal(Y, Y0, sizeof(float) * nX);
            free(Y0); free(Y);
            block_cache_free(&cache);
            block_free(&b);
        }
}

/* The straight-line block of prenorm_block.c (what a student reads first) is
 * the configurable block in its setting (pre-norm, LayerNorm, GELU, no
 * dropout), bit for bit: the output, dX and every weight gradient, causal or
 * not, with padded sequences; and it refuses any other spec. */
static void test_prenorm_block_is_the_block(void **state) {
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        Rng r;
        rng_seed(&r, 17, 0);
        const int B = 3, N = 7, lens[3] = {7, 4, 0};
        BlockSpec s = {.D = 16, .H = 2, .D_H = 8, .F = 40, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                       .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN, .causal = causal};
        assert_int_equal(prenorm_block_check(&s), 0);
        Block b;
        block_make(&b, s, B, N, &r);
        b.lens = lens;
        run_forward(&b);
        const size_t nX = (size_t)B * N * s.D, nP = block_param_count(&s);
        /* forward: the same Y */
        PrenormBlockActs a;
        prenorm_block_acts_alloc(&a, &s, B, N);
        float *Y = alloc_floats(nX);
        prenorm_block_forward(Y, &a, b.X, &s, &b.w, lens, B, N);
        assert_memory_equal(Y, b.Y, sizeof(float) * nX);
        /* backward: the same dX and weight gradients (both accumulate onto the same start) */
        float *dX0 = alloc_floats(nX), *dX1 = alloc_floats(nX), *g0 = alloc_floats(nP), *g1 = alloc_floats(nP);
        fill(dX0, nX, 0.1f, &r);
        memcpy(dX1, dX0, sizeof(float) * nX);
        BlockWeights dw0 = block_weights_view(&s, g0), dw1 = block_weights_view(&s, g1);
        float *scratch = alloc_floats(block_scratch_floats(&s, B, N, 0));
        block_backward(dX0, NULL, &dw0, scratch, b.wY, &b.cache, b.X, &s, &b.w, lens, NULL, B, N);
        prenorm_block_backward(dX1, &dw1, &a, b.wY, b.X, &s, &b.w, lens, B, N);
        assert_memory_equal(dX1, dX0, sizeof(float) * nX);
        assert_memory_equal(g1, g0, sizeof(float) * nP);
        free(Y); free(dX0); free(dX1); free(g0); free(g1); free(scratch);
        prenorm_block_acts_free(&a);
        block_free(&b);
    }
    const BlockSpec other[] = {
        {.D = 16, .H = 2, .D_H = 8, .F = 40, .norm_place = BLOCK_POST_NORM, .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU},
        {.D = 16, .H = 2, .D_H = 8, .F = 40, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_RMSNORM, .mlp = BLOCK_MLP_GELU},
        {.D = 16, .H = 2, .D_H = 8, .F = 40, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_SWIGLU},
        {.D = 16, .H = 2, .D_H = 8, .F = 40, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU,
         .dropout = 0.1f},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) assert_int_equal(prenorm_block_check(&other[i]), -1);
}

/* Attention dropout at evaluation is the block with attn_dropout 0, bit for
 * bit (output and the kept weights), for encoder and decoder blocks, and
 * draws nothing; in training the output changes but the kept weights A
 * (what the heatmaps show) are still the undropped softmax. */
static void test_block_attention_dropout_off_at_evaluation(void **state) {
    (void)state;
    for (int cross = 0; cross < 2; cross++)
        for (int place = 0; place < 2; place++) {
            Rng r;
            rng_seed(&r, 11, 0);
            const int B = 2, N = 6, N_M = 5;
            int mem_lens[2] = {3, 0};
            BlockSpec s = {8, 2, 4, 12, (BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f,
                           MULTI_HEAD_PLAIN, 1, cross, 0.0f, 0, 0.0f, 0, {0}};
            Block b;
            block_make_with_memory(&b, s, B, N, N_M, mem_lens, &r);
            run_forward(&b);
            const int n_M = cross ? N_M : 0;
            const size_t nX = (size_t)B * N * s.D, nA = (size_t)B * s.H * N * N, nC = (size_t)B * s.H * N * N_M;
            const float *A0 = b.cache.A, *C0 = b.cache.cross_A;

            BlockSpec s_drop = s;
            s_drop.attn_dropout = 0.5f;
            assert_int_equal(block_param_count(&s_drop), block_param_count(&s));
            BlockCache cache;
            block_cache_alloc(&cache, &s_drop, B, N, n_M);
            float *Y = alloc_floats(nX);
            const BlockMemory *mem = cross ? &b.mem : NULL;
            Rng rng;
            rng_seed(&rng, 6, 0);
            Rng before = rng;
            block_forward(Y, &cache, b.X, &s_drop, &b.w, NULL, mem, B, N, 0, &rng);
            assert_memory_equal(Y, b.Y, sizeof(float) * nX);
            assert_memory_equal(&rng, &before, sizeof rng);   /* nothing drawn */
            assert_memory_equal(cache.A, A0, sizeof(float) * nA);
            if (cross)
                assert_memory_equal(cache.cross_A, C0, sizeof(float) * nC);

            /* training: the self-attention reads X as before, so its weights
             * are the same; dropping some of them changes everything after */
            block_forward(Y, &cache, b.X, &s_drop, &b.w, NULL, mem, B, N, 1, &rng);
            assert_memory_not_equal(Y, b.Y, sizeof(float) * nX);
            assert_memory_equal(cache.A, A0, sizeof(float) * nA);
            free(Y);
            block_cache_free(&cache);
            block_free(&b);
        }
}

/* In training, the block with norm NONE and mlp NONE is X + chapter 05's
 * layer given keep masks that dropout_mask draws from the same seed, bit for
 * bit on the naive backend: the block drops exactly those weights. Over the
 * draws, the fraction of zero multipliers is close to p. */
static void test_block_attention_dropout_is_chapter_05_with_keep(void **state) {
    (void)state;
    assert_int_equal(backend_select("naive"), 0);
    const float p = 0.3f;
    const int B = 2, N = 9, D = 8, DRAWS = 20;
    int lens[2] = {5, 0};
    Rng r;
    rng_seed(&r, 12, 0);
    BlockSpec s = {D, 2, 4, 16, BLOCK_PRE_NORM, BLOCK_NO_NORM, BLOCK_NO_MLP, 0.0f, MULTI_HEAD_PLAIN, 1, 0, p, 0, 0.0f, 0, {0}};
    Block b;
    block_make(&b, s, B, N, &r);
    b.lens = lens;
    b.train = 1;
    const MultiHeadSpec as = block_attention_spec(&s);
    assert_int_equal(as.keep_masks, 1);
    const size_t nX = (size_t)B * N * D, nA = multi_head_attention_floats(&as, B, N);
    float *O = alloc_floats(nX), *A = alloc_floats(nA), *keep = alloc_floats(nA);
    float *mh_cache = alloc_floats(multi_head_cache_floats(&as, B, N));
    long zeros = 0;
    for (int draw = 0; draw < DRAWS; draw++) {
        b.dropout_seed = 100 + (uint64_t)draw;
        run_forward(&b);
        Rng same;
        rng_seed(&same, b.dropout_seed, 0);
        dropout_mask(keep, (int)nA, p, &same);
        multi_head_forward(O, A, keep, mh_cache, b.X, &as, &b.w.attn, s.causal, lens, B, N);
        for (size_t i = 0; i < nX; i++)
            if (b.Y[i] != b.X[i] + O[i])
                fail_msg("draw %d entry %zu: block %.9g, X + chapter 05 with keep %.9g", draw, i, b.Y[i],
                         b.X[i] + O[i]);
        for (size_t i = 0; i < nA; i++) {
            if (keep[i] == 0.0f) zeros++;
            else assert_true(keep[i] == 1.0f / (1.0f - p));
        }
    }
    /* binomial(20 * 324 = 6480, 0.3): mean 1944, standard deviation 37; 5 of them */
    assert_int_equal(nA * DRAWS, 6480);
    assert_in_range(zeros, 1944 - 185, 1944 + 185);
    free(O); free(A); free(keep); free(mh_cache);
    block_free(&b);
    assert_int_equal(backend_select(NULL), 0);
}

/* Absent tensors take no room; the view and the count agree. */
static void test_block_sizes(void **state) {
    (void)state;
    const int D = 6, H = 2, D_H = 3, F = 10;
    const size_t attn = (size_t)D * 3 * H * D_H + (size_t)H * D_H * D + D;
    BlockSpec s = {D, H, D_H, F, BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN, 0, 0, 0.0f, 0, 0.0f, 0, {0}};
    assert_int_equal(block_param_count(&s), attn + 2 * D + (size_t)D * F + F + (size_t)F * D + D + 2 * D);
    s.norm = BLOCK_RMSNORM;
    s.mlp = BLOCK_MLP_SWIGLU;
    assert_int_equal(block_param_count(&s), attn + D + 3 * (size_t)D * F + D);
    float *base = alloc_floats(block_param_count(&s));
    BlockWeights w = block_weights_view(&s, base);
    assert_null(w.norm1_beta);
    assert_null(w.b_1);
    assert_null(w.b_2);
    assert_true(w.attn.W_QKV == base);
    assert_true(w.norm2_gamma + D == base + block_param_count(&s));   /* the last tensor ends the block */
    Rng r;
    rng_seed(&r, 7, 0);
    block_init(&s, &w, &r);
    for (int d = 0; d < D; d++) assert_true(w.norm1_gamma[d] == 1.0f && w.norm2_gamma[d] == 1.0f);
    free(base);
    /* attention dropout: the keep masks and one head's dropped weights per thread, self and cross */
    const int B = 2, N = 3, N_M = 4;
    s.cross = 1;
    BlockSpec s_drop = s;
    s_drop.attn_dropout = 0.1f;
    assert_int_equal(block_cache_floats(&s_drop, B, N, N_M) - block_cache_floats(&s, B, N, N_M),
                     (size_t)B * H * N * N + (size_t)threads_slots(B) * N * N + (size_t)B * H * N * N_M +
                         (size_t)threads_slots(B) * N * N_M);
    assert_int_equal(block_scratch_floats(&s_drop, B, N, N_M), block_scratch_floats(&s, B, N, N_M));
    assert_int_equal(block_spec_check(&s_drop), 0);
    s.cross = 0;
    s.attention = MULTI_HEAD_FUSED;   /* no A to keep */
    BlockCache cache;
    block_cache_alloc(&cache, &s, 2, 3, 0);
    assert_null(cache.A);
    block_cache_free(&cache);
    /* ... and none to drop: the spec is refused, with a reason */
    assert_int_equal(block_spec_check(&s), 0);
    s.attn_dropout = 0.1f;
    clear_error();
    assert_int_equal(block_spec_check(&s), -1);
    assert_non_null(strstr(last_error(), "fused"));
    s.attention = MULTI_HEAD_PLAIN;
    s.attn_dropout = 1.0f;
    assert_int_equal(block_spec_check(&s), -1);
    s.attn_dropout = 0.0f;
    s.dropout = -0.1f;
    assert_int_equal(block_spec_check(&s), -1);
    s.dropout = 0.0f;
    s.drop_path = 1.0f;
    assert_int_equal(block_spec_check(&s), -1);
    assert_non_null(strstr(last_error(), "drop path"));
    s.drop_path = -0.5f;
    assert_int_equal(block_spec_check(&s), -1);
    s.drop_path = 0.0f;
}

/* The cache is laid out once, for the largest batch it will hold
 * (block_cache_alloc): a pass over fewer, shorter sequences (and a shorter
 * memory) uses the first rows of each buffer and gives the same bits as a
 * cache of exactly its size: Y, dX, dM and every weight gradient, with
 * dropout, attention dropout and drop path drawing the same masks. */
static void test_block_cache_for_a_larger_batch(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 31, 0);
    const int B = 2, N = 5, N_M = 4;
    int lens[2] = {4, 0}, mem_lens[2] = {3, 0};
    for (int cross = 0; cross <= 1; cross++)
        for (int place = 0; place < 2; place++) {
            const BlockSpec s = {.D = 8, .H = 2, .D_H = 4, .F = 12, .norm_place = (BlockNormPlace)place,
                                 .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_SWIGLU, .dropout = 0.1f,
                                 .attention = MULTI_HEAD_PLAIN, .causal = 1, .cross = cross, .attn_dropout = 0.1f,
                                 .drop_path = 0.1f};
            Block b;
            block_make_with_memory(&b, s, B, N, N_M, mem_lens, &r);
            b.lens = lens;
            b.train = 1;
            b.dropout_seed = 9;
            const BlockMemory *mem = cross ? &b.mem : NULL;
            const size_t nX = (size_t)B * N * s.D, nP = block_param_count(&s), nM = (size_t)B * b.N_M * s.D;
            BlockCache big;
            block_cache_alloc(&big, &s, B + 3, N + 2, cross ? N_M + 1 : 0);
            const BlockCache *caches[2] = {&b.cache, &big};
            float *Y[2], *dX[2], *dM[2], *dP[2];
            float *scratch = alloc_floats(block_scratch_floats(&s, B, N, b.N_M));
            for (int c = 0; c < 2; c++) {
                Y[c] = alloc_floats(nX), dX[c] = alloc_floats(nX), dM[c] = alloc_floats(nM), dP[c] = alloc_floats(nP);
                Rng rng;
                rng_seed(&rng, b.dropout_seed, 0);
                block_forward(Y[c], caches[c], b.X, &s, &b.w, lens, mem, B, N, 1, &rng);
                BlockWeights dw = block_weights_view(&s, dP[c]);
                block_backward(dX[c], cross ? dM[c] : NULL, &dw, scratch, b.wY, caches[c], b.X, &s, &b.w, lens, mem, B,
                               N);
            }
            assert_memory_equal(Y[0], Y[1], sizeof(float) * nX);
            assert_memory_equal(dX[0], dX[1], sizeof(float) * nX);
            assert_memory_equal(dM[0], dM[1], sizeof(float) * (nM ? nM : 1));
            assert_memory_equal(dP[0], dP[1], sizeof(float) * nP);
            for (int c = 0; c < 2; c++) {
                free(Y[c]); free(dX[c]); free(dM[c]); free(dP[c]);
            }
            free(scratch);
            block_cache_free(&big);
            block_free(&b);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_sizes),
        cmocka_unit_test(test_prenorm_block_is_the_block),
        cmocka_unit_test(test_block_gradients_every_combination),
        cmocka_unit_test(test_block_gradients_odd_shapes),
        cmocka_unit_test(test_block_gradients_with_experts),
        cmocka_unit_test(test_block_gradients_with_dropout),
        cmocka_unit_test(test_block_drop_path_skips_whole_examples),
        cmocka_unit_test(test_block_idea_off_is_chapter_05),
        cmocka_unit_test(test_block_dropout_off_at_evaluation),
        cmocka_unit_test(test_decoder_block_gradients),
        cmocka_unit_test(test_block_gradients_with_attention_dropout),
        cmocka_unit_test(test_block_attention_dropout_off_at_evaluation),
        cmocka_unit_test(test_block_attention_dropout_is_chapter_05_with_keep),
        cmocka_unit_test(test_block_step_matches_forward),
        cmocka_unit_test(test_block_gradients_with_batchnorm),
        cmocka_unit_test(test_batchnorm_leaks_the_future_in_a_causal_block),
        cmocka_unit_test(test_batchnorm_running_statistics_in_the_block),
        cmocka_unit_test(test_batchnorm_block_step_matches_forward),
        cmocka_unit_test(test_block_cache_for_a_larger_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
