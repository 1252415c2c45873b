/* grade_06.c - the coursework grader of chapter 06 (see grade.h): the
 * block's backward, one sublayer at a time; the KV cache of decoding; the
 * GPT's sampling.
 *
 * The backward against PyTorch (tests/golden/block.bin: post- and pre-norm,
 * LayerNorm, RMSNorm and none, every MLP); the KV cache against the block's
 * own forward over the whole prefix; sampling against the distribution it
 * must draw from, counted over many draws (the logits come from the GPT run
 * without the KV cache, so the two exercises stay apart). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "06_transformer/block.h"
#include "06_transformer/gpt.h"

/* ------------------------------------------------------------ 06.block_backward */

typedef struct {
    const char *name;
    float *data;
} NamedTensor;

/* An encoder block's tensors by their names in block.bin (absent ones NULL). */
static int block_named(const BlockWeights *w, NamedTensor out[12]) {
    const NamedTensor all[12] = {
        {"W_QKV", w->attn.W_QKV}, {"W_O", w->attn.W_O}, {"b_O", w->attn.b_O}, {"norm1_gamma", w->norm1_gamma},
        {"norm1_beta", w->norm1_beta}, {"W_1", w->W_1}, {"b_1", w->b_1}, {"W_3", w->W_3}, {"W_2", w->W_2},
        {"b_2", w->b_2}, {"norm2_gamma", w->norm2_gamma}, {"norm2_beta", w->norm2_beta}};
    memcpy(out, all, sizeof all);
    return 12;
}

static int block_case(const GoldCase *c) {
    const GoldTensor *X = grade_tensor(c, "X"), *W_QKV = grade_tensor(c, "W_QKV"), *W_1 = grade_tensor(c, "W_1");
    const int *config = grade_i32(c, "config");   /* H, norm placement, norm, MLP, causal */
    const int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = config[0];
    const BlockSpec s = {D, H, W_QKV->dims[1] / (3 * H), W_1 ? W_1->dims[1] : 0, (BlockNormPlace)config[1],
                         (BlockNorm)config[2], (BlockMlp)config[3], 0.0f, MULTI_HEAD_PLAIN, config[4], 0, 0.0f, 0, 0.0f, 0, {0}};
    const int *lens = grade_i32_or_null(c, "lens");
    const size_t n_params = block_param_count(&s);
    BlockWeights w = block_weights_view(&s, grade_floats(n_params)), dw = block_weights_view(&s, grade_floats(n_params));
    NamedTensor tensors[12], grads[12];
    const int n = block_named(&w, tensors);
    block_named(&dw, grads);
    for (int i = 0; i < n; i++)
        if (tensors[i].data) memcpy(tensors[i].data, grade_f32(c, tensors[i].name), sizeof(float) * grade_tensor(c, tensors[i].name)->count);
    const size_t nX = (size_t)B * N * D;
    float *Y = grade_floats(nX), *dX = grade_floats(nX), *scratch = grade_floats(block_scratch_floats(&s, B, N, 0));
    const BlockCache cache = block_cache_view(&s, B, N, 0, grade_floats(block_cache_floats(&s, B, N, 0)));
    block_forward(Y, &cache, X->data, &s, &w, lens, NULL, B, N, 0, NULL);
    for (int times = 1; times <= 2; times++) {
        block_backward(dX, NULL, &dw, scratch, grade_f32(c, "dY"), &cache, X->data, &s, &w, lens, NULL, B, N);
        if (grade_golden_close(c, "dX", dX, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
        for (int i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "d%s", grads[i].name);
            if (grads[i].data && grade_golden_close(c, name, grads[i].data, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
                return -1;
        }
    }
    return 0;
}

static int post_norm(const GoldCase *c) { return grade_i32(c, "config")[1] == BLOCK_POST_NORM && grade_i32(c, "config")[2] != BLOCK_NO_NORM; }
static int pre_norm(const GoldCase *c) { return grade_i32(c, "config")[1] == BLOCK_PRE_NORM && grade_i32(c, "config")[2] != BLOCK_NO_NORM; }
static int no_norm(const GoldCase *c) { return grade_i32(c, "config")[2] == BLOCK_NO_NORM; }
static int backward_no_norm(void) { return grade_golden_cases("block", no_norm, block_case); }
static int backward_post_norm(void) { return grade_golden_cases("block", post_norm, block_case); }
static int backward_pre_norm(void) { return grade_golden_cases("block", pre_norm, block_case); }

/* The options the sheet asks for, switched on: a block trained (train = 1)
 * with dropout or drop path, its masks drawn from a generator seeded the
 * same before every forward, so that they stay fixed; dX and every weight's
 * gradient against finite differences of L = sum wY . Y. B = 4 examples and
 * drop path 0.5: the seed drops some examples' branches and keeps the others
 * (checked first). */
enum { DP_B = 4, DP_N = 3, DP_D = 5, DP_H = 2, DP_DH = 3, DP_F = 6 };
typedef struct {
    BlockSpec s;
    BlockWeights w;
    BlockCache cache;
    float *X, *Y, *wY;
} Dropped;

static double dropped_loss(void *ctx) {
    Dropped *d = ctx;
    Rng rng;
    rng_seed(&rng, 31, 7);
    block_forward(d->Y, &d->cache, d->X, &d->s, &d->w, NULL, NULL, DP_B, DP_N, 1, &rng);
    double sum = 0.0;
    for (int i = 0; i < DP_B * DP_N * DP_D; i++) sum += (double)d->wY[i] * d->Y[i];
    return sum;
}

static int backward_dropped(BlockNormPlace place, float dropout, float drop_path) {
    static Dropped d;
    d.s = (BlockSpec){DP_D, DP_H, DP_DH, DP_F, place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, dropout, MULTI_HEAD_PLAIN,
                      0, 0, 0.0f, 0, drop_path, 0, {0}};
    const size_t n_params = block_param_count(&d.s), nX = (size_t)DP_B * DP_N * DP_D;
    float *params = grade_floats(n_params), *dparams = grade_floats(n_params);
    d.w = block_weights_view(&d.s, params);
    BlockWeights dw = block_weights_view(&d.s, dparams);
    grade_fill(params, n_params, 0.6f, 41);
    d.X = grade_floats(nX), d.Y = grade_floats(nX), d.wY = grade_floats(nX);
    grade_fill(d.X, nX, 1.0f, 42);
    grade_fill(d.wY, nX, 1.0f, 43);
    d.cache = block_cache_view(&d.s, DP_B, DP_N, 0, grade_floats(block_cache_floats(&d.s, DP_B, DP_N, 0)));
    dropped_loss(&d);
    if (drop_path > 0.0f) {
        int dropped = 0, kept = 0;
        for (int k = 0; k < 3; k++)
            for (int b = 0; d.cache.sub[k].path_keep && b < DP_B; b++) {
                dropped += d.cache.sub[k].path_keep[b] == 0.0f;
                kept += d.cache.sub[k].path_keep[b] != 0.0f;
            }
        if (grade_true("drop path: some branches dropped, some kept", dropped > 0 && kept > 0,
                       "drop path 0.5 with the grader's seed dropped %d and kept %d examples' branches", dropped, kept))
            return -1;
    }
    float *dX = grade_floats(nX), *scratch = grade_floats(block_scratch_floats(&d.s, DP_B, DP_N, 0));
    block_backward(dX, NULL, &dw, scratch, d.wY, &d.cache, d.X, &d.s, &d.w, NULL, NULL, DP_B, DP_N);
    return grade_gradient("dX", dropped_loss, &d, d.X, dX, 3, (int[]){DP_B, DP_N, DP_D}, 1e-3f, 1e-2) ||
           grade_gradient("the weights' gradients (W_QKV | W_O | b_O | norms | MLP)", dropped_loss, &d, params,
                          dparams, 1, (int[]){(int)n_params}, 1e-3f, 1e-2);
}

static int backward_drop_path(void) { return backward_dropped(BLOCK_PRE_NORM, 0.0f, 0.5f); }
static int backward_dropout(void) { return backward_dropped(BLOCK_POST_NORM, 0.3f, 0.0f); }

/* ------------------------------------------------------------ 06.kv_cache */

enum { KV_ROWS = 2, KV_N = 6, KV_D = 8, KV_H = 2 };

/* Feeds each row's positions one at a time through block_step and compares
 * every new row with block_forward's (causal) output at that position; the
 * block D wide with H heads of D_H (D <= KV_D; H D_H may differ from D: the
 * cache's rows are H D_H wide). */
static int kv_cache_shaped(BlockNormPlace place, int D, int H, int D_H) {
    const BlockSpec s = {D, H, D_H, 16, place, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f, MULTI_HEAD_PLAIN,
                         1, 0, 0.0f, 0, 0.0f, 0, {0}};
    const size_t n_params = block_param_count(&s), nX = (size_t)KV_ROWS * KV_N * D;
    float *params = grade_floats(n_params);
    BlockWeights w = block_weights_view(&s, params);
    Rng rng;
    rng_seed(&rng, 3, 6);
    block_init(&s, &w, &rng);
    grade_fill(w.attn.b_O, (size_t)D, 0.5f, 4);
    float *X = grade_floats(nX), *Y = grade_floats(nX);
    const BlockCache cache =
        block_cache_view(&s, KV_ROWS, KV_N, 0, grade_floats(block_cache_floats(&s, KV_ROWS, KV_N, 0)));
    grade_fill(X, nX, 1.0f, 5);
    block_forward(Y, &cache, X, &s, &w, NULL, NULL, KV_ROWS, KV_N, 0, NULL);
    BlockStepRow rows[KV_ROWS];
    const size_t cache_row = (size_t)KV_N * H * D_H;
    for (int r = 0; r < KV_ROWS; r++)
        rows[r] = (BlockStepRow){grade_floats(cache_row), grade_floats(cache_row), 0, NULL, 0};
    float *work = grade_floats(block_step_work_floats(&s, KV_ROWS, KV_N, 0));
    float x_t[KV_ROWS * KV_D], y_t[KV_ROWS * KV_D], want[KV_ROWS * KV_D];
    for (int t = 0; t < KV_N; t++) {
        for (int r = 0; r < KV_ROWS; r++) {
            rows[r].pos = t;
            memcpy(x_t + r * D, X + ((size_t)r * KV_N + t) * D, sizeof(float) * (size_t)D);
            memcpy(want + r * D, Y + ((size_t)r * KV_N + t) * D, sizeof(float) * (size_t)D);
        }
        block_step(y_t, NULL, x_t, &s, &w, rows, KV_ROWS, KV_N, 0, work);
        char what[128];
        snprintf(what, sizeof what, "%s-norm block, D = %d, H = %d, D_H = %d, the step of position %d: Y",
                 place == BLOCK_PRE_NORM ? "pre" : "post", D, H, D_H, t);
        if (grade_close(what, "block_forward's row at that position", y_t, want, 2, (int[]){KV_ROWS, D}, 1e-4, 1e-5))
            return -1;
    }
    return 0;
}

static int kv_cache_with(BlockNormPlace place) { return kv_cache_shaped(place, KV_D, KV_H, KV_D / KV_H); }
/* H D_H = 8 != D = 7 (and, below, 6 != 7): a cache row D wide, as if D_H were D / H, fails */
static int kv_cache_odd(void) { return kv_cache_shaped(BLOCK_PRE_NORM, 7, 2, 4) || kv_cache_shaped(BLOCK_POST_NORM, 7, 3, 2); }

/* Rows at different positions in one step: row 1 starts two steps after
 * row 0, so each step's rows sit at positions t and t - 2 (each row's own
 * position, never the first row's); each new row against block_forward's. */
static int kv_cache_staggered(void) {
    const BlockSpec s = {KV_D, KV_H, KV_D / KV_H, 16, BLOCK_PRE_NORM, BLOCK_LAYERNORM, BLOCK_MLP_GELU, 0.0f,
                         MULTI_HEAD_PLAIN, 1, 0, 0.0f, 0, 0.0f, 0, {0}};
    enum { LAG = 2 };
    const size_t n_params = block_param_count(&s), nX = (size_t)KV_ROWS * KV_N * KV_D;
    BlockWeights w = block_weights_view(&s, grade_floats(n_params));
    Rng rng;
    rng_seed(&rng, 3, 7);
    block_init(&s, &w, &rng);
    float *X = grade_floats(nX), *Y = grade_floats(nX);
    const BlockCache cache =
        block_cache_view(&s, KV_ROWS, KV_N, 0, grade_floats(block_cache_floats(&s, KV_ROWS, KV_N, 0)));
    grade_fill(X, nX, 1.0f, 8);
    block_forward(Y, &cache, X, &s, &w, NULL, NULL, KV_ROWS, KV_N, 0, NULL);
    BlockStepRow rows[KV_ROWS], active[KV_ROWS];
    for (int r = 0; r < KV_ROWS; r++)
        rows[r] = (BlockStepRow){grade_garbage((size_t)KV_N * KV_D), grade_garbage((size_t)KV_N * KV_D), 0, NULL, 0};
    float *work = grade_floats(block_step_work_floats(&s, KV_ROWS, KV_N, 0));
    float x_t[KV_ROWS * KV_D], y_t[KV_ROWS * KV_D], want[KV_ROWS * KV_D];
    for (int step = 0; step < KV_N + LAG; step++) {
        int n = 0;
        for (int r = 0; r < KV_ROWS; r++) {
            const int pos = step - r * LAG;
            if (pos < 0 || pos >= KV_N) continue;
            active[n] = rows[r];
            active[n].pos = pos;
            memcpy(x_t + n * KV_D, X + ((size_t)r * KV_N + pos) * KV_D, sizeof(float) * KV_D);
            memcpy(want + n * KV_D, Y + ((size_t)r * KV_N + pos) * KV_D, sizeof(float) * KV_D);
            n++;
        }
        block_step(y_t, NULL, x_t, &s, &w, active, n, KV_N, 0, work);
        char what[128];
        snprintf(what, sizeof what, "step %d, rows at positions %d and %d: Y", step, step, step - LAG);
        if (grade_close(what, "block_forward's rows at those positions", y_t, want, 2, (int[]){n, KV_D}, 1e-4, 1e-5))
            return -1;
    }
    return 0;
}

static int kv_cache_pre(void) { return kv_cache_with(BLOCK_PRE_NORM); }
static int kv_cache_post(void) { return kv_cache_with(BLOCK_POST_NORM); }

/* ------------------------------------------------------------ 06.sampling */

enum { GPT_V = 6, GPT_N = 8, DRAWS = 3000 };

/* DRAWS tokens from a small GPT, each the one token generated after a
 * one-token prompt (token t mod V for draw t), with the logits each was drawn
 * from. One token per prompt keeps the logits independent of earlier draws,
 * so that they (and the counts expected from them) are the same whichever
 * way a right sampler uses its random numbers: make grade-submissions then
 * holds a student's counts to the solution's expected ones (grade.h, record
 * mode). Its token embeddings are scaled up (x10) so that the logits differ
 * by a unit or two: the distributions are neither flat nor one-hot, and a
 * temperature changes the counts clearly. */
static int draw(const GptSampling *sampling, int *out, float *logits) {
    const GptConfig cfg = {.layers = 1,
                           .block = {.D = 8, .H = 2, .D_H = 4, .F = 16, .norm_place = BLOCK_PRE_NORM,
                                     .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN,
                                     .causal = 1},
                           .pos = POSITIONS_LEARNED, .context = GPT_N, .V = GPT_V};
    static Gpt g;
    if (gpt_create(&g, &cfg, 1, 11) < 0) return grade_fail("gpt_create failed");
    float *E = params_data(&g.params, g.tok_emb);
    for (int i = 0; i < GPT_V * 8; i++) E[i] *= 10.0f;
    Rng rng;
    rng_seed(&rng, 12, 6);
    int err = 0;
    for (int t = 0; t < DRAWS && err == 0; t++) {
        const int prompt[1] = {t % GPT_V};
        err = gpt_generate(&g, prompt, 1, 1, sampling, &rng, out + t, logits + (size_t)t * GPT_V);
    }
    gpt_free(&g);
    return err < 0 ? grade_fail("gpt_generate failed") : 0;
}

/* p [V] = softmax(logits / temperature) over the top_k largest logits (all when 0). */
static void distribution(double *p, const float *logits, float temperature, int top_k) {
    double max = logits[0], sum = 0.0;
    for (int v = 1; v < GPT_V; v++) max = fmax(max, logits[v]);
    for (int v = 0; v < GPT_V; v++) {
        int larger = 0;   /* how many logits beat this one */
        for (int u = 0; u < GPT_V; u++) larger += logits[u] > logits[v];
        p[v] = top_k > 0 && larger >= top_k ? 0.0 : exp((logits[v] - max) / temperature);
        sum += p[v];
    }
    for (int v = 0; v < GPT_V; v++) p[v] /= sum;
}

/* Draws with the settings; each token must have a chance under its
 * distribution, and each token's count must be within 5 standard deviations
 * (+ 1) of the sum of its probabilities over the draws. */
static int sampling_follows(float temperature, int top_k) {
    const GptSampling s = {temperature, top_k, 0};
    int *out = grade_ints(DRAWS);
    float *logits = grade_floats((size_t)DRAWS * GPT_V);
    if (draw(&s, out, logits)) return -1;
    /* entry v < V: how often token v was drawn; entry V: draws of a token
     * with probability 0, or of no token at all (expected 0, exactly) */
    double expected[GPT_V] = {0}, variance[GPT_V] = {0}, p[GPT_V];
    float count[GPT_V + 1] = {0}, want[GPT_V + 1] = {0}, bound[GPT_V + 1] = {0};
    for (int t = 0; t < DRAWS; t++) {
        distribution(p, logits + (size_t)t * GPT_V, temperature, top_k);
        if (out[t] < 0 || out[t] >= GPT_V || p[out[t]] == 0.0)
            count[GPT_V]++;
        else
            count[out[t]]++;
        for (int v = 0; v < GPT_V; v++) {
            expected[v] += p[v];
            variance[v] += p[v] * (1.0 - p[v]);
        }
    }
    for (int v = 0; v < GPT_V; v++) {
        want[v] = (float)expected[v];
        bound[v] = variance[v] > 0.0 ? (float)(5.0 * sqrt(variance[v]) + 1.0) : 0.5f;   /* a sure token: exact */
    }
    bound[GPT_V] = 0.5f;
    char what[160];
    snprintf(what, sizeof what, "temperature %.1f, top_k %d: the count of each token in %d draws (last: tokens of "
             "probability 0), against softmax(logits / temperature) over the top_k", (double)temperature, top_k, DRAWS);
    return grade_counts(what, count, want, bound, GPT_V + 1);
}

/* GEN_T tokens generated after a one-token prompt by draw()'s model, with
 * rng seeded (seed, 6). */
enum { GEN_T = 40 };
static int generate_seeded(const GptSampling *sampling, uint64_t seed, int *out) {
    const GptConfig cfg = {.layers = 1,
                           .block = {.D = 8, .H = 2, .D_H = 4, .F = 16, .norm_place = BLOCK_PRE_NORM,
                                     .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN,
                                     .causal = 1},
                           .pos = POSITIONS_LEARNED, .context = GEN_T + 1, .V = GPT_V};
    static Gpt g;
    if (gpt_create(&g, &cfg, 1, 11) < 0) return grade_fail("gpt_create failed");
    float *E = params_data(&g.params, g.tok_emb);
    for (int i = 0; i < GPT_V * 8; i++) E[i] *= 3.0f;
    Rng rng;
    rng_seed(&rng, seed, 6);
    const int prompt[1] = {1};
    const int err = gpt_generate(&g, prompt, 1, GEN_T, sampling, &rng, out, NULL);
    gpt_free(&g);
    return err < 0 ? grade_fail("gpt_generate failed") : 0;
}

/* The generator, not rand(): the same seed gives the same tokens, another
 * seed others. */
static int sampling_seeded(void) {
    const GptSampling s = {1.0f, 0, 0};
    int *a = grade_ints(GEN_T), *b = grade_ints(GEN_T), *c = grade_ints(GEN_T);
    if (generate_seeded(&s, 21, a) || generate_seeded(&s, 21, b) || generate_seeded(&s, 22, c)) return -1;
    int same = 1, differ = 0;
    for (int t = 0; t < GEN_T; t++) {
        same &= a[t] == b[t];
        differ |= a[t] != c[t];
    }
    return grade_true("the same seed, the same tokens", same, "two runs from the same seed drew different tokens "
                      "(draw with rng_uniform(rng), the generator given, never rand())") ||
           grade_true("another seed, other tokens", differ, "seeds 21 and 22 drew the same %d tokens (the draws "
                      "must come from rng)", GEN_T);
}

/* top_k above V keeps every token: the same draws as top_k = 0 (and never
 * a read past the V logits). */
static int sampling_top_k_above_v(void) {
    const GptSampling all = {1.0f, 0, 0}, above = {1.0f, GPT_V + 3, 0};
    int *a = grade_ints(GEN_T), *b = grade_ints(GEN_T);
    if (generate_seeded(&all, 23, a) || generate_seeded(&above, 23, b)) return -1;
    int same = 1;
    for (int t = 0; t < GEN_T; t++) same &= a[t] == b[t];
    return grade_true("top_k above V: the draws of top_k = 0", same, "top_k = %d with V = %d drew other tokens than "
                      "top_k = 0 from the same seed (top_k >= V keeps every token)", GPT_V + 3, GPT_V);
}

static int sampling_all(void) { return sampling_follows(1.0f, 0); }
static int sampling_cool(void) { return sampling_follows(0.5f, 0); }
static int sampling_top_k(void) { return sampling_follows(1.0f, 3); }
static int sampling_top_1(void) { return sampling_follows(2.0f, 1); }

/* ------------------------------------------------------------ hidden checks
 *
 * make grade-submissions only (grade.h): block settings, shapes, weights and
 * inputs drawn from the teacher's seed. The block's backward and the KV cache
 * are compared with the reference solution's outputs; sampling, whose draws
 * may use the random numbers in another order and still be right, is checked
 * against its distribution as above, with a drawn temperature and top_k. */

/* A block of drawn settings (encoder or causal, every norm and MLP) with drawn weights. */
static BlockSpec drawn_block(int causal, float **params) {
    const int H = grade_draw(1, 2), D_H = grade_draw(1, 3);
    const BlockSpec s = {H * D_H + grade_draw(0, 2), H, D_H, grade_draw(1, 6), (BlockNormPlace)grade_draw(0, 1),
                         (BlockNorm)grade_draw(0, 2), (BlockMlp)grade_draw(0, 3), 0.0f, MULTI_HEAD_PLAIN,
                         causal, 0, 0.0f, 0, 0.0f, 0, {0}};
    *params = grade_floats(block_param_count(&s));
    grade_draw_fill(*params, block_param_count(&s), 0.6f);
    return s;
}

static int hidden_block_backward(void) {
    float *params;
    const BlockSpec s = drawn_block(grade_draw(0, 1), &params);
    const int B = grade_draw(1, 2), N = grade_draw(1, 5);
    int *lens = grade_draw(0, 1) ? grade_ints((size_t)B) : NULL;
    for (int b = 0; lens && b < B; b++) lens[b] = grade_draw(1, N);
    const size_t n_params = block_param_count(&s), nX = (size_t)B * N * s.D;
    BlockWeights w = block_weights_view(&s, params);
    float *dparams = grade_floats(n_params);
    BlockWeights dw = block_weights_view(&s, dparams);
    float *X = grade_floats(nX), *dY = grade_floats(nX), *Y = grade_floats(nX), *dX = grade_floats(nX);
    grade_draw_fill(X, nX, 1.0f);
    grade_draw_fill(dY, nX, 1.0f);
    float *scratch = grade_floats(block_scratch_floats(&s, B, N, 0));
    const BlockCache cache = block_cache_view(&s, B, N, 0, grade_floats(block_cache_floats(&s, B, N, 0)));
    block_forward(Y, &cache, X, &s, &w, lens, NULL, B, N, 0, NULL);
    grade_draw_fill(dX, nX, 1.0f);   /* backward adds to what is there */
    grade_draw_fill(dparams, n_params, 1.0f);
    block_backward(dX, NULL, &dw, scratch, dY, &cache, X, &s, &w, lens, NULL, B, N);
    if (grade_reference("dX", dX, 3, (int[]){B, N, s.D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    return grade_reference("the weights' gradients (W_QKV | W_O | b_O | norms | MLP)", dparams, 1, (int[]){(int)n_params},
                           GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

/* A causal block fed one position at a time (block_step): every step's rows. */
static int hidden_kv_cache(void) {
    float *params;
    const BlockSpec s = drawn_block(1, &params);
    const int rows_n = grade_draw(1, 3), N = grade_draw(1, 6);
    BlockWeights w = block_weights_view(&s, params);
    BlockStepRow rows[3];
    for (int r = 0; r < rows_n; r++)
        rows[r] = (BlockStepRow){grade_floats((size_t)N * s.H * s.D_H), grade_floats((size_t)N * s.H * s.D_H), 0, NULL, 0};
    float *work = grade_floats(block_step_work_floats(&s, rows_n, N, 0));
    float *x_t = grade_floats((size_t)rows_n * s.D), *y = grade_floats((size_t)N * rows_n * s.D);
    for (int t = 0; t < N; t++) {
        for (int r = 0; r < rows_n; r++) rows[r].pos = t;
        grade_draw_fill(x_t, (size_t)rows_n * s.D, 1.0f);
        block_step(y + (size_t)t * rows_n * s.D, NULL, x_t, &s, &w, rows, rows_n, N, 0, work);
    }
    return grade_reference("each step's Y", y, 3, (int[]){N, rows_n, s.D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

static int hidden_sampling(void) {
    static const float temperatures[4] = {0.5f, 0.8f, 1.0f, 1.5f};
    return sampling_follows(temperatures[grade_draw(0, 3)], grade_draw(0, GPT_V - 1));
}

/* ------------------------------------------------------------ end to end */

typedef struct {
    Gpt g;
    int *tokens, *targets;   /* [B, N] a window and its next tokens */
    Rng rng;
} GptRun;

/* The step's windows (each token 3 x the last + 1 mod V, one in four drawn; each target the next token),
 * forward and backward. */
static double gpt_gradient(void *ctx, int step) {
    GptRun *r = ctx;
    (void)step;
    for (int b = 0; b < GRADE_TRAIN_B; b++) {
        int prev = (int)rng_below(&r->rng, GPT_V);
        for (int i = 0; i < GPT_N; i++) {
            const int next = rng_below(&r->rng, 4) ? (3 * prev + 1) % GPT_V : (int)rng_below(&r->rng, GPT_V);
            r->tokens[b * GPT_N + i] = prev;
            r->targets[b * GPT_N + i] = next;
            prev = next;
        }
    }
    const double sum = gpt_forward(&r->g, r->tokens, r->targets, GRADE_TRAIN_B, 1);   /* over B x GPT_N targets */
    gpt_backward(&r->g, r->tokens, r->targets, GRADE_TRAIN_B, (float)(GRADE_TRAIN_B * GPT_N));
    return sum / (GRADE_TRAIN_B * GPT_N);
}

/* A 2-block GPT trained GRADE_TRAIN_STEPS steps on drawn windows (grade.h): each step's loss the solution's. */
static int training(void) {
    const GptConfig cfg = {.layers = 2,
                           .block = {.D = 8, .H = 2, .D_H = 4, .F = 16, .norm_place = BLOCK_PRE_NORM,
                                     .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN,
                                     .causal = 1},
                           .pos = POSITIONS_LEARNED, .context = GPT_N, .V = GPT_V};
    GptRun r = {.tokens = grade_ints(GRADE_TRAIN_B * GPT_N), .targets = grade_ints(GRADE_TRAIN_B * GPT_N)};
    if (gpt_create(&r.g, &cfg, GRADE_TRAIN_B, 3) < 0) return grade_fail("gpt_create failed");
    rng_seed(&r.rng, 2024, 7);
    const int rc = grade_training("06 GPT", &r.g.params, gpt_gradient, &r);
    gpt_free(&r.g);
    return rc;
}

static const GradeCheck HIDDEN_BLOCK_BACKWARD[] = {
    {"dX and every weight's gradient of a drawn block (norm, MLP, mask, shape)", hidden_block_backward},
    {"the same for another drawn block", hidden_block_backward},
    {"the same for a third drawn block", hidden_block_backward},
    {"end to end: 40 training steps of a 2-block GPT, each loss the solution's", training},
};
static const GradeCheck HIDDEN_KV_CACHE[] = {
    {"each step's Y of a drawn causal block, one position at a time", hidden_kv_cache},
    {"the same for another drawn block", hidden_kv_cache},
};
static const GradeCheck HIDDEN_SAMPLING[] = {
    {"draws against softmax(logits / temperature) over the top_k, drawn temperature and top_k", hidden_sampling},
};
static const GradeExercise HIDDEN[] = {
    {"06.block_backward", HIDDEN_BLOCK_BACKWARD, GRADE_COUNT(HIDDEN_BLOCK_BACKWARD)},
    {"06.kv_cache", HIDDEN_KV_CACHE, GRADE_COUNT(HIDDEN_KV_CACHE)},
    {"06.sampling", HIDDEN_SAMPLING, GRADE_COUNT(HIDDEN_SAMPLING)},
};

/* ------------------------------------------------------------ the exercises */

static const GradeCheck BLOCK_BACKWARD[] = {
    {"no norm: dX and every weight's gradient against PyTorch's autograd", backward_no_norm},
    {"post-norm: dX and every weight's gradient against PyTorch's autograd", backward_post_norm},
    {"pre-norm: dX and every weight's gradient against PyTorch's autograd", backward_pre_norm},
    {"drop path 0.5 (pre-norm, trained, a fixed seed): dX and the weights' gradients against finite differences",
     backward_drop_path},
    {"dropout 0.3 (post-norm, trained, a fixed seed): dX and the weights' gradients against finite differences",
     backward_dropout},
};
static const GradeCheck KV_CACHE[] = {
    {"pre-norm: each step's row against the whole prefix's forward", kv_cache_pre},
    {"post-norm: each step's row against the whole prefix's forward", kv_cache_post},
    {"rows at different positions in one step (the cache pre-filled with garbage)", kv_cache_staggered},
    {"odd shapes: D = 7 with H D_H = 8 and 6, each step's row against the whole prefix's forward", kv_cache_odd},
};
static const GradeCheck SAMPLING[] = {
    {"temperature 1: the draws follow softmax(logits)", sampling_all},
    {"temperature 0.5: the draws follow softmax(logits / 0.5)", sampling_cool},
    {"top_k 3: only the 3 most likely, renormalised", sampling_top_k},
    {"top_k 1: always the most likely", sampling_top_1},
    {"seeds: the same seed draws the same tokens, another seed others (not rand())", sampling_seeded},
    {"top_k above V draws as top_k = 0", sampling_top_k_above_v},
};
static const GradeExercise EXERCISES[] = {
    {"06.block_backward", BLOCK_BACKWARD, GRADE_COUNT(BLOCK_BACKWARD)},
    {"06.kv_cache", KV_CACHE, GRADE_COUNT(KV_CACHE)},
    {"06.sampling", SAMPLING, GRADE_COUNT(SAMPLING)},
};

int main(int argc, char **argv) {
    return grade_main_hidden(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES), HIDDEN, GRADE_COUNT(HIDDEN));
}
