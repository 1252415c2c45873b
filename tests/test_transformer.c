/* test_transformer.c - chapter 06: the encoder-decoder transformer.
 *
 *  - the whole model's backward against finite differences (every
 *    parameter: embeddings, positions, every block, final norms, output
 *    layer), post-norm and pre-norm, sinusoidal, learned and rotary positions,
 *    LayerNorm and RMSNorm, GELU and SwiGLU, on a padded toy batch;
 *  - label smoothing: the gradient is that of the smoothed cross-entropy
 *    (finite differences of the smoothed loss, computed here);
 *  - decoding through the seq2seq interface (encode + step, what greedy
 *    and beam search use) reproduces the teacher-forced pass within 1e-5;
 *  - the KV cache: decoding with it gives the same logits (within 1e-5) and
 *    the same tokens as recomputing the whole prefix at every step, for
 *    greedy decoding of a batch and for beam search; both also with rotary
 *    positions (rope), whose cached keys stay rotated at their positions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "06_transformer/transformer.h"
#include "nn/gradcheck.h"
#include "nn/layers.h"
#include "toy_split.h"
#include "util/util.h"

enum { V_SRC = 9, V_TGT = 9, MAX_LEN = 6 };

static TransformerConfig tiny_config(BlockNormPlace place, BlockNorm norm, BlockMlp mlp, Positions pos) {
    TransformerConfig c;
    memset(&c, 0, sizeof c);
    c.layers = 2;
    c.block = (BlockSpec){8, 2, 4, 12, place, norm, mlp, 0.0f, MULTI_HEAD_PLAIN, 0, 0, 0.0f, 0, 0.0f, 0, {0}};
    c.pos = pos;
    c.kv_cache = 1;
    return c;
}

/* A padded batch of the first n toy examples (lengths 2..6). */
static void make_batch(Batch *batch, ToySplit *ts, int n) {
    batch_alloc(batch, n, MAX_LEN, MAX_LEN);
    int idx[16];
    for (int i = 0; i < n; i++) idx[i] = i;
    batch_fill(batch, &ts->split, idx, n);
}

typedef struct {
    Transformer *t;
    Batch *batch;
} LossCtx;

static double model_loss(void *ctx) {
    LossCtx *c = ctx;
    return transformer_train_step(c->t, c->batch, 0);
}

static void check_model_gradients(BlockNormPlace place, BlockNorm norm, BlockMlp mlp, Positions pos) {
    ToySplit ts;
    toy_split(&ts, 4, 5, 2, MAX_LEN, 1, 21);
    Batch batch;
    make_batch(&batch, &ts, 4);
    TransformerConfig c = tiny_config(place, norm, mlp, pos);
    Transformer t;
    assert_int_equal(transformer_create(&t, &c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 5), 0);
    params_zero_grad(&t.params);
    transformer_train_step(&t, &batch, 1);
    LossCtx ctx = {&t, &batch};
    GradCheckResult r = gradcheck(model_loss, &ctx, t.params.data, t.params.grad, t.params.size, 3e-3f, 400);
    if (!(r.max_rel_err < 3e-2))
        fail_msg("transformer (%s-norm, norm %d, mlp %d, pos %d): max_rel_err %.3g at %zu (numeric %.6g, "
                 "analytic %.6g)",
                 place == BLOCK_PRE_NORM ? "pre" : "post", norm, mlp, pos, r.max_rel_err, r.worst_index,
                 r.worst_numeric, r.worst_analytic);
    transformer_free(&t);
    batch_free(&batch);
}

static void test_model_gradients(void **state) {
    (void)state;
    check_model_gradients(BLOCK_POST_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, POSITIONS_SINUSOIDAL);
    check_model_gradients(BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, POSITIONS_LEARNED);
    check_model_gradients(BLOCK_PRE_NORM, BLOCK_RMSNORM, BLOCK_MLP_SWIGLU, POSITIONS_SINUSOIDAL);
    check_model_gradients(BLOCK_POST_NORM, BLOCK_RMSNORM, BLOCK_MLP_SWIGLU, POSITIONS_LEARNED);
    check_model_gradients(BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, POSITIONS_ROPE);
}

/* -------------------------------------------------------- label smoothing */

typedef struct {
    float *logits;
    const int *targets;
    int N, C;
    float eps;
} SmoothCtx;

/* The smoothed loss, written as its definition: sum over counted rows of
 * -sum_c q_c log p_c with q = (1 - eps) onehot + eps / C, divided by the count. */
static double smoothed_loss(void *p) {
    SmoothCtx *s = p;
    double total = 0.0;
    int counted = 0;
    for (int n = 0; n < s->N; n++) {
        if (s->targets[n] == PAD_ID) continue;
        const float *x = s->logits + (size_t)n * s->C;
        double max = x[0], sum = 0.0;
        for (int c = 1; c < s->C; c++) max = x[c] > max ? x[c] : max;
        for (int c = 0; c < s->C; c++) sum += exp(x[c] - max);
        for (int c = 0; c < s->C; c++) {
            double q = (c == s->targets[n] ? 1.0 - s->eps : 0.0) + s->eps / s->C;
            total -= q * (x[c] - max - log(sum));
        }
        counted++;
    }
    return total / counted;
}

static void test_label_smoothing_gradient(void **state) {
    (void)state;
    enum { N = 5, C = 7 };
    float logits[N * C], probs[N * C], d[N * C];
    int targets[N] = {3, PAD_ID, 1, 6, 4};
    Rng r;
    rng_seed(&r, 3, 0);
    for (int i = 0; i < N * C; i++) logits[i] = 2.0f * rng_normal(&r);
    const float epsilons[3] = {0.0f, 0.1f, 0.4f};
    for (int k = 0; k < 3; k++) {
        int counted = 0;
        cross_entropy_forward(probs, logits, targets, N, C, PAD_ID, &counted);
        memset(d, 0, sizeof d);
        cross_entropy_smoothed_backward(d, probs, targets, N, C, PAD_ID, epsilons[k], 1.0f / (float)counted);
        SmoothCtx ctx = {logits, targets, N, C, epsilons[k]};
        GradCheckResult res = gradcheck(smoothed_loss, &ctx, logits, d, N * C, 1e-3f, N * C);
        if (!(res.max_rel_err < 1e-3)) fail_msg("eps %g: max_rel_err %.3g", (double)epsilons[k], res.max_rel_err);
        for (int c = 0; c < C; c++) assert_true(d[1 * C + c] == 0.0f);   /* the padding row */
    }
}

/* ------------------------------------------------------------------ decoding */

/* Decoding step by step, fed the true previous tokens, gives the
 * probabilities of the teacher-forced pass (probs [B Tt, V], row b Tt + t). */
static void test_decoding_matches_training(void **state) {
    (void)state;
    ToySplit ts;
    toy_split(&ts, 4, 5, 2, MAX_LEN, 1, 22);
    Batch batch;
    make_batch(&batch, &ts, 4);
    for (int k = 0; k < 3; k++) {   /* post-norm, pre-norm; pre-norm with rotary positions */
        const int place = k > 0;
        TransformerConfig c = tiny_config((BlockNormPlace)place, BLOCK_LAYERNORM, BLOCK_MLP_GELU,
                                          k == 2 ? POSITIONS_ROPE : POSITIONS_LEARNED);
        Transformer t;
        assert_int_equal(transformer_create(&t, &c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 6), 0);
        Seq2Seq m;
        transformer_interface(&t, &m);
        transformer_train_step(&t, &batch, 0);
        const int B = batch.batch, Tt = batch.tgt_len, V = V_TGT, S = m.state_size;
        float *probs = xmalloc(sizeof(float) * (size_t)B * Tt * V);
        memcpy(probs, t.probs, sizeof(float) * (size_t)B * Tt * V);
        float *states = xmalloc(sizeof(float) * (size_t)B * S), *next = xmalloc(sizeof(float) * (size_t)B * S);
        float logprobs[4 * V_TGT];
        int src_row[4] = {0, 1, 2, 3}, prev[4];
        m.encode(m.self, &batch, states);
        for (int step = 0; step < Tt; step++) {
            for (int b = 0; b < B; b++) prev[b] = batch.tgt_in[b * Tt + step];
            m.step(m.self, B, src_row, states, prev, next, logprobs, NULL);
            for (int b = 0; b < B; b++) {
                if (step >= batch.tgt_lens[b]) continue;
                for (int v = 0; v < V; v++)
                    assert_float_equal(expf(logprobs[b * V + v]), probs[((size_t)b * Tt + step) * V + v], 1e-5);
            }
            float *swap = states; states = next; next = swap;
        }
        free(probs); free(states); free(next);
        transformer_free(&t);
    }
    batch_free(&batch);
}

/* The KV cache against recomputing the prefix: the same logits within 1e-5
 * at every step of greedy decoding, the same tokens, and the same beam. */
static void test_kv_cache_matches_recompute(void **state) {
    (void)state;
    ToySplit ts;
    toy_split(&ts, 4, 5, 2, MAX_LEN, 1, 23);
    Batch batch;
    make_batch(&batch, &ts, 4);
    for (int k = 0; k < 3; k++) {   /* post-norm, pre-norm; pre-norm with rotary positions */
        const int place = k > 0;
        TransformerConfig c = tiny_config((BlockNormPlace)place, BLOCK_RMSNORM, BLOCK_MLP_SWIGLU,
                                          k == 2 ? POSITIONS_ROPE : POSITIONS_SINUSOIDAL);
        Transformer cached, recomputed;
        assert_int_equal(transformer_create(&cached, &c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 8), 0);
        c.kv_cache = 0;
        assert_int_equal(transformer_create(&recomputed, &c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 4, 8), 0);
        Seq2Seq mc, mr;
        transformer_interface(&cached, &mc);
        transformer_interface(&recomputed, &mr);
        const int B = batch.batch, S = mc.state_size, V = V_TGT, steps = 12;   /* past T_tgt: positions up to T_cap */
        float *sc = xmalloc(sizeof(float) * (size_t)B * S), *nc = xmalloc(sizeof(float) * (size_t)B * S);
        float *sr = xmalloc(sizeof(float) * (size_t)B * S), *nr = xmalloc(sizeof(float) * (size_t)B * S);
        float lc[4 * V_TGT], lr[4 * V_TGT], ac[4 * MAX_LEN], ar[4 * MAX_LEN];
        int src_row[4] = {3, 2, 1, 0}, prev[4] = {BOS_ID, BOS_ID, BOS_ID, BOS_ID};
        mc.encode(mc.self, &batch, sc);
        mr.encode(mr.self, &batch, sr);
        for (int step = 0; step < steps; step++) {
            mc.step(mc.self, B, src_row, sc, prev, nc, lc, ac);
            mr.step(mr.self, B, src_row, sr, prev, nr, lr, ar);
            for (int i = 0; i < B * V; i++)
                if (fabsf(lc[i] - lr[i]) > 1e-5f * (1.0f + fabsf(lr[i])))
                    fail_msg("%s-norm step %d logprob %d: cached %.8g, recomputed %.8g", place ? "pre" : "post", step,
                             i, lc[i], lr[i]);
            for (int i = 0; i < B * batch.src_len; i++) assert_float_equal(ac[i], ar[i], 1e-5);
            for (int b = 0; b < B; b++) {   /* feed the argmax, not <eos>: longer than any target */
                int best = 3;
                for (int v = 4; v < V; v++)
                    if (lc[b * V + v] > lc[b * V + best]) best = v;
                prev[b] = best;
            }
            float *swap = sc; sc = nc; nc = swap;
            swap = sr; sr = nr; nr = swap;
        }
        /* greedy over the batch and beam search of each source: the same tokens */
        int out_c[4 * 16], out_r[4 * 16], len_c[4], len_r[4];
        decode_greedy(&mc, &batch, 16, out_c, len_c, NULL);
        decode_greedy(&mr, &batch, 16, out_r, len_r, NULL);
        for (int b = 0; b < B; b++) {
            assert_int_equal(len_c[b], len_r[b]);
            assert_memory_equal(out_c + b * 16, out_r + b * 16, sizeof(int) * (size_t)len_c[b]);
            int beam_c[16], beam_r[16];
            const int *src = batch.src + b * batch.src_len;
            int n_c = decode_beam(&mc, src, batch.src_lens[b], 16, 3, beam_c);
            int n_r = decode_beam(&mr, src, batch.src_lens[b], 16, 3, beam_r);
            assert_int_equal(n_c, n_r);
            assert_memory_equal(beam_c, beam_r, sizeof(int) * (size_t)n_c);
        }
        free(sc); free(nc); free(sr); free(nr);
        transformer_free(&cached);
        transformer_free(&recomputed);
    }
    batch_free(&batch);
}

/* The text read with the table (transformer.h), then the model built:
 * 0 with the model's configuration in *c, or -1 with one message. */
static int read_and_create(const char *text, TransformerConfig *c) {
    memset(c, 0, sizeof *c);
    if (config_read(text, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, c) < 0) return -1;
    Transformer t;
    const int rc = transformer_create(&t, c, V_SRC, V_TGT, MAX_LEN, MAX_LEN + 1, 2, 1);
    if (rc == 0) *c = t.cfg;
    transformer_free(&t);
    return rc;
}

/* The table writes today's checkpoint text byte for byte, and reads it back. */
static void test_config_text(void **state) {
    (void)state;
    TransformerConfig c = tiny_config(BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, POSITIONS_SINUSOIDAL), back;
    c.label_smoothing = 0.1f;
    char text[512] = "model=transformer\n";
    assert_int_equal(config_write(text, sizeof text, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &c), 0);
    assert_string_equal(text, "model=transformer\nlayers=2\ndim=8\nheads=2\nff=12\nnorm=pre\nnorm_type=layernorm\n"
                              "mlp=gelu\ndropout=0\nattn_dropout=0\npos=sinusoidal\nlabel_smoothing=0.1\nkv_cache=1\n"
                              "src_pos_rows=0\ntgt_pos_rows=0\n");
    assert_int_equal(read_and_create(text, &back), 0);
    assert_memory_equal(&back, &c, sizeof c);
}

/* Bad configuration text: one clear error, no model. */
static void test_config_errors(void **state) {
    (void)state;
    TransformerConfig c;
    const char *good = "layers=2\ndim=8\nheads=2\nff=16\nnorm=pre\nnorm_type=layernorm\nmlp=gelu\ndropout=0.1\n"
                       "pos=sinusoidal\nlabel_smoothing=0.1\nkv_cache=1\n";
    assert_int_equal(read_and_create(good, &c), 0);
    assert_int_equal(c.block.D_H, 4);   /* dim / heads */
    assert_true(c.block.norm_place == BLOCK_PRE_NORM && c.block.mlp == BLOCK_MLP_GELU);
    assert_true(c.block.attn_dropout == 0.0f);   /* no attn_dropout line (older checkpoints): 0 */
    char text[512];
    snprintf(text, sizeof text, "%sattn_dropout=0.25\n", good);
    assert_int_equal(read_and_create(text, &c), 0);
    assert_true(c.block.attn_dropout == 0.25f);
    snprintf(text, sizeof text, "attn_dropout=1\n%s", good);
    assert_int_equal(read_and_create(text, &c), -1);
    assert_non_null(strstr(last_error(), "attention dropout 1"));
    const char *bad[] = {
        "layers=2\ndim=9\nheads=2\nff=16\nnorm=pre\nnorm_type=layernorm\nmlp=gelu\ndropout=0\npos=learned\nlabel_smoothing=0\nkv_cache=1\n",
        "layers=2\ndim=8\nheads=2\nff=16\nnorm=middle\nnorm_type=layernorm\nmlp=gelu\ndropout=0\npos=learned\nlabel_smoothing=0\nkv_cache=1\n",
        "layers=2\ndim=8\nheads=2\nff=16\nnorm=pre\nnorm_type=layernorm\nmlp=gelu\ndropout=1.5\npos=learned\nlabel_smoothing=0\nkv_cache=1\n",
        "layers=2\ndim=8\nheads=2\nff=16\nnorm=pre\nnorm_type=layernorm\nmlp=gelu\ndropout=0\npos=none\nlabel_smoothing=0\nkv_cache=1\n",
        "layers=99\ndim=8\nheads=2\nff=16\nnorm=pre\nnorm_type=layernorm\nmlp=gelu\ndropout=0\npos=learned\nlabel_smoothing=0\nkv_cache=1\n",
        "layers=2\ndim=8\nheads=2\nff=16\nnorm=pre\nnorm_type=layernorm\nmlp=gelu\ndropout=0\npos=learned\nkv_cache=1\n",
    };
    const char *expect[] = {"multiple of heads", "'middle'", "'1.5'", "pos=none", "layers", "label_smoothing"};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(read_and_create(bad[i], &c), -1);
        if (!strstr(last_error(), expect[i])) fail_msg("case %d: message '%s' lacks '%s'", i, last_error(), expect[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_text),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_label_smoothing_gradient),
        cmocka_unit_test(test_model_gradients),
        cmocka_unit_test(test_decoding_matches_training),
        cmocka_unit_test(test_kv_cache_matches_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
