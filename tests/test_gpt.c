/* test_gpt.c - chapter 06, part 2: the decoder-only transformer (gpt.c).
 *
 *  - the whole GPT's backward against finite differences (every parameter:
 *    the tied embedding, learned positions, every block, the final norm),
 *    pre- and post-norm, LayerNorm and RMSNorm, GELU and SwiGLU, learned,
 *    sinusoidal and rotary (rope) positions, with some targets not scored (-1);
 *  - the causal mask: changing a later token changes no earlier logit;
 *  - generation with the KV cache gives the same tokens and logits (within
 *    1e-5) as running the whole window again for every token, greedy and
 *    sampled, also past the end of the window (where it keeps the last N/2),
 *    with learned, sinusoidal and rotary positions (rope: each cached key
 *    stays rotated at its own position);
 *  - perplexity over a stream: every position from `first` on is scored
 *    exactly once, and with stride N it equals one forward per window. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_transformer/gpt.h"
#include "nn/gradcheck.h"
#include "util/error.h"
#include "util/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

enum { V = 11, N = 6, B = 3 };

static GptConfig tiny(BlockNormPlace place, BlockNorm norm, BlockMlp mlp, Positions pos, int context) {
    GptConfig c;
    memset(&c, 0, sizeof c);
    c.layers = 2;
    c.block = (BlockSpec){.D = 8, .H = 2, .D_H = 4, .F = 12, .norm_place = place, .norm = norm, .mlp = mlp,
                          .attention = MULTI_HEAD_PLAIN};
    c.pos = pos;
    c.context = context;
    c.V = V;
    return c;
}

typedef struct {
    Gpt *g;
    const int *tokens, *targets;
} LossCtx;

static double model_loss(void *ctx) {
    LossCtx *c = ctx;
    const double nll = gpt_forward(c->g, c->tokens, c->targets, B, 0) / c->g->last_counted;
    return nll + (double)c->g->cfg.block.moe.aux * c->g->moe_aux;   /* a mixture of experts' balance (else 0) */
}

static void test_gpt_gradients(void **state) {
    (void)state;
    const BlockNormPlace places[2] = {BLOCK_PRE_NORM, BLOCK_POST_NORM};
    const BlockNorm norms[2] = {BLOCK_LAYERNORM, BLOCK_RMSNORM};
    const BlockMlp mlps[2] = {BLOCK_MLP_GELU, BLOCK_MLP_SWIGLU};
    const Positions poss[2] = {POSITIONS_LEARNED, POSITIONS_SINUSOIDAL};
    Rng r;
    rng_seed(&r, 5, 0);
    int tokens[B * N], targets[B * N];
    for (int i = 0; i < B * N; i++) {
        tokens[i] = (int)rng_below(&r, V);
        targets[i] = i % 5 == 3 ? -1 : (int)rng_below(&r, V);   /* some positions not scored */
    }
    for (int k = 0; k < 6; k++) {   /* k = 4: rotary positions; k = 5: the MLPs a mixture of 3 experts, 2 per token */
        GptConfig c = tiny(places[k & 1], norms[(k >> 1) & 1], mlps[(k >> 1) & 1], k == 4 ? POSITIONS_ROPE : poss[k & 1], N);
        if (k == 5) c.block.moe = (BlockMoe){3, 2, 0.05f, 0.0f, 1};
        Gpt g;
        assert_int_equal(gpt_create(&g, &c, B, 7 + k), 0);
        /* move the norms' gammas and betas off 1 and 0, so their gradients are
         * exercised fully; scale the embeddings up from GPT-2's N(0, 0.02^2):
         * at that scale the norms magnify a step of eps 50 times, and the
         * finite differences stop being a good approximation */
        for (int t = 0; t < g.params.n_tensors; t++) {
            if (strstr(g.params.tensors[t].name, "_emb")) {
                float *p = g.params.data + g.params.tensors[t].offset;
                for (size_t i = 0; i < g.params.tensors[t].count; i++) p[i] *= 25.0f;
            }
            if (strstr(g.params.tensors[t].name, "norm")) {
                float *p = g.params.data + g.params.tensors[t].offset;
                for (size_t i = 0; i < g.params.tensors[t].count; i++) p[i] += 0.3f * (rng_uniform(&r) - 0.5f);
            }
        }
        params_zero_grad(&g.params);
        double sum = gpt_forward(&g, tokens, targets, B, 0);
        assert_true(sum > 0);
        gpt_backward(&g, tokens, targets, B, (float)g.last_counted);
        float *analytic = xmalloc(sizeof(float) * g.params.size);
        memcpy(analytic, g.params.grad, sizeof(float) * g.params.size);
        LossCtx ctx = {&g, tokens, targets};
        for (int t = 0; t < g.params.n_tensors; t++) {   /* tensor by tensor, to name a wrong one */
            const ParamTensor *pt = &g.params.tensors[t];
            GradCheckResult res = gradcheck(model_loss, &ctx, g.params.data + pt->offset, analytic + pt->offset,
                                            pt->count, 1e-3f, 400);
            if (res.max_rel_err > 2e-2)
                print_error("config %d, %s: max rel err %g at %zu (numeric %g, analytic %g)\n", k, pt->name,
                            res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic);
            assert_true(res.max_rel_err < 2e-2);
        }
        free(analytic);
        gpt_free(&g);
    }
}

/* Changing token j changes no logit at a position before j. */
static void test_gpt_is_causal(void **state) {
    (void)state;
    GptConfig c = tiny(BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, POSITIONS_LEARNED, N);
    Gpt g;
    assert_int_equal(gpt_create(&g, &c, 1, 3), 0);
    int tokens[N] = {1, 2, 3, 4, 5, 6};
    gpt_forward(&g, tokens, NULL, 1, 0);
    float *before = xmalloc(sizeof(float) * N * V);
    memcpy(before, g.logits, sizeof(float) * N * V);
    tokens[4] = 9;
    gpt_forward(&g, tokens, NULL, 1, 0);
    assert_memory_equal(before, g.logits, sizeof(float) * 4 * V);   /* positions 0..3: the same bits */
    int changed = 0;
    for (int i = 4 * V; i < N * V; i++) changed += before[i] != g.logits[i];
    assert_true(changed > 0);
    free(before);
    gpt_free(&g);
}

/* KV cache vs the whole window again: tokens equal, logits within 1e-5,
 * greedy and sampled, running past the end of the window. */
static void test_gpt_kv_cache_matches_recompute(void **state) {
    (void)state;
    enum { CTX = 8, NEW = 21 };
    const Positions poss[3] = {POSITIONS_LEARNED, POSITIONS_SINUSOIDAL, POSITIONS_ROPE};
    for (int k = 0; k < 5; k++) {   /* k = 2: rotary positions; k = 3, 4: a mixture of experts (capacity: training only) */
        GptConfig c = tiny(k == 1 ? BLOCK_POST_NORM : BLOCK_PRE_NORM, k == 1 ? BLOCK_RMSNORM : BLOCK_LAYERNORM,
                           k == 1 ? BLOCK_MLP_SWIGLU : BLOCK_MLP_GELU, poss[k < 3 ? k : k - 3], CTX);
        if (k >= 3) c.block.moe = (BlockMoe){4, k - 2, 0.01f, 1.0f, k - 3};
        Gpt g;
        assert_int_equal(gpt_create(&g, &c, 1, 11 + k), 0);
        const int prompt[3] = {4, 1, 7};
        for (int sampled = 0; sampled < 2; sampled++) {
            int out_c[NEW], out_r[NEW];
            float *lc = xmalloc(sizeof(float) * NEW * V), *lr = xmalloc(sizeof(float) * NEW * V);
            GptSampling sc = {sampled ? 1.0f : 0.0f, sampled ? 5 : 0, 1}, sr = sc;
            sr.kv_cache = 0;
            Rng r1, r2;
            rng_seed(&r1, 99, 0);
            rng_seed(&r2, 99, 0);
            assert_int_equal(gpt_generate(&g, prompt, 3, NEW, &sc, &r1, out_c, lc), 0);
            assert_int_equal(gpt_generate(&g, prompt, 3, NEW, &sr, &r2, out_r, lr), 0);
            assert_memory_equal(out_c, out_r, sizeof out_c);
            for (int i = 0; i < NEW * V; i++) assert_float_equal(lc[i], lr[i], 1e-5);
            free(lc);
            free(lr);
        }
        gpt_free(&g);
    }
}

/* Perplexity over a stream: stride N gives the same sum as scoring each
 * window by hand, every position from first on counted once. */
static void test_gpt_stream_nll(void **state) {
    (void)state;
    GptConfig c = tiny(BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, POSITIONS_LEARNED, N);
    Gpt g;
    assert_int_equal(gpt_create(&g, &c, 2, 5), 0);
    enum { S = 40 };
    int ids[S];
    Rng r;
    rng_seed(&r, 1, 0);
    for (int i = 0; i < S; i++) ids[i] = (int)rng_below(&r, V);
    for (int first = 1; first <= 9; first += 8)
        for (int stride = 1; stride <= N; stride++) {
            long counted = 0;
            double sum = gpt_stream_nll(&g, ids, first, S, stride, &counted);
            assert_int_equal(counted, S - first);
            assert_true(sum > 0 && isfinite(sum));
            if (stride == N && first == 1) {
                /* windows ids[a .. a+N) for a = 0, N, 2N, ... and the last one ending at S-1 */
                double ref = 0.0;
                int next = 1;
                while (next < S) {
                    int a = next - 1;
                    if (a + N > S - 1) a = S - 1 - N;
                    int tgt[N];
                    for (int i = 0; i < N; i++) tgt[i] = (a + 1 + i >= next) ? ids[a + 1 + i] : -1;
                    ref += gpt_forward(&g, ids + a, tgt, 1, 0);
                    next = a + N + 1;
                }
                assert_true(fabs(sum - ref) < 1e-4 * fabs(ref));
            }
        }
    gpt_free(&g);
}

/* The table writes today's checkpoint text byte for byte (06_gpt adds
 * model= before and tokens= after), reads it back, and refuses a short one. */
static void test_gpt_config_roundtrip(void **state) {
    (void)state;
    GptConfig c = tiny(BLOCK_POST_NORM, BLOCK_RMSNORM, BLOCK_MLP_SWIGLU, POSITIONS_SINUSOIDAL, 17), d;
    c.block.dropout = 0.25f;
    c.block.attn_dropout = 0.125f;
    c.kv_cache = 1;
    c.block.moe = (BlockMoe){3, 2, 0.5f, 1.25f, 1};
    c.sparse = (SparsePattern){4, 1, 2, 3, 0};
    char text[1024] = "model=gpt\n";
    assert_int_equal(config_write(text, sizeof text, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &c), 0);
    assert_string_equal(text, "model=gpt\nlayers=2\ndim=8\nheads=2\nff=12\nnorm=post\nnorm_type=rmsnorm\nmlp=swiglu\n"
                              "experts=3\nmoe_top_k=2\nmoe_aux=0.5\ncapacity=1.25\nmoe_renorm=1\n"
                              "dropout=0.25\nattn_dropout=0.125\npos=sinusoidal\nlabel_smoothing=0\nkv_cache=1\n"
                              "context=17\nvocab=11\nsparse_block=4\nsparse_window=1\nsparse_global=2\n"
                              "sparse_random=3\n");
    memset(&d, 0, sizeof d);
    assert_int_equal(config_read(text, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &d), 0);
    assert_int_equal(d.layers, c.layers);
    assert_int_equal(d.context, 17);
    assert_int_equal(d.V, V);
    assert_int_equal(d.pos, POSITIONS_SINUSOIDAL);
    assert_int_equal(d.block.D, 8);
    assert_int_equal(d.block.D_H, 0);   /* not in the text: gpt_create takes dim / heads */
    assert_int_equal(d.block.norm_place, BLOCK_POST_NORM);
    assert_int_equal(d.block.norm, BLOCK_RMSNORM);
    assert_int_equal(d.block.mlp, BLOCK_MLP_SWIGLU);
    assert_float_equal(d.block.dropout, 0.25f, 0);
    assert_float_equal(d.block.attn_dropout, 0.125f, 0);
    assert_memory_equal(&d.block.moe, &c.block.moe, sizeof c.block.moe);
    assert_memory_equal(&d.sparse, &c.sparse, sizeof c.sparse);   /* part 5's pattern (seed: not in the text) */
    Gpt g;
    assert_int_equal(gpt_create(&g, &d, 1, 1), -1);   /* the sparse kernel forms no weights to drop */
    assert_non_null(strstr(last_error(), "attn_dropout"));
    d.block.attn_dropout = 0.0f;
    assert_int_equal(gpt_create(&g, &d, 1, 1), 0);
    assert_int_equal(g.cfg.block.D_H, 4);
    gpt_free(&g);
    /* a config with a line missing: one clear error */
    assert_int_equal(config_read("model=gpt\nlayers=2\n", GPT_CONFIG_FIELDS, GPT_CONFIG_N, &d), -1);
    assert_non_null(strstr(last_error(), "dim"));
    /* rotary positions: the line pos=rope, read back; no pos_emb tensor (with the sparse pattern,
     * which rotates its own queries and keys) */
    c.pos = POSITIONS_ROPE;
    c.block.attn_dropout = 0.0f;
    snprintf(text, sizeof text, "model=gpt\n");
    assert_int_equal(config_write(text, sizeof text, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &c), 0);
    assert_non_null(strstr(text, "\npos=rope\n"));
    memset(&d, 0, sizeof d);
    assert_int_equal(config_read(text, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &d), 0);
    assert_int_equal(d.pos, POSITIONS_ROPE);
    assert_int_equal(gpt_create(&g, &d, 1, 1), 0);
    assert_null(params_find(&g.params, "pos_emb"));
    gpt_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_gradients),
        cmocka_unit_test(test_gpt_is_causal),
        cmocka_unit_test(test_gpt_kv_cache_matches_recompute),
        cmocka_unit_test(test_gpt_stream_nll),
        cmocka_unit_test(test_gpt_config_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
