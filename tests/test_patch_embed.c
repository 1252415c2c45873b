/* test_patch_embed.c - chapter 07: the patch embedding (im2col + sgemm).
 *
 *  - forward against two plain loops written from the definitions, for
 *    P = 4, 7, 14 on 28 x 28 grey images and on a 3-channel 12 x 8 image,
 *    and with overlapping patches (kernel K > P: 8 and 9 on 28 x 28, 6 on
 *    the 3-channel image):
 *      a direct convolution with stride P, kernel K and (K - P) / 2 zeros
 *        of padding, its weights stored as
 *        PyTorch's Conv2d keeps them, [D, channels, P, P] (this checks the
 *        layout patch_embed.h promises: W = weight.reshape(D, D_in).T);
 *      "flatten each patch and project": walk the patch's pixels into a
 *        vector, multiply by W, add b;
 *  - im2col is a pure reordering when K = P: col2im of it gives the images
 *    back exactly; with overlap, col2im of it gives each pixel times the
 *    number of squares that read it (counted here from the definition);
 *  - backward against central finite differences for W, b and the images
 *    (L = sum_i w_i out_i as in test_layers.c), accumulating (+=) into
 *    gradients that start non-zero, and skipping NULL ones;
 *  - patch_embed_check refuses a patch size that does not divide the image,
 *    and a kernel smaller than the patch or one that cannot be centred.
 *
 * Tolerance of the forward comparisons. The references sum in double; sgemm
 * sums D_in float products in float (in some order, depending on the backend),
 * so its error is at most about D_in u sum_k |p_k W_kd| with u = 2^-24 (the
 * classic bound for a float dot product). We allow twice that, plus 1e-6.
 * A wrong index moves an output by the size of a whole term, about 0.1 here:
 * hundreds of times more.
 *
 * The layer is linear in each of W, b and the images, so a central difference
 * has no truncation error, only float rounding: eps = 1e-2 and
 * max_rel_err < 1e-2, as in test_layers.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "07_vision_transformer/patch_embed.h"
#include "kernels/matmul.h"
#include "nn/gradcheck.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define EPS 1e-2f
#define TOL 1e-2
#define MAX_CHECKS 200

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static double weighted_sum(const float *out, const float *w, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * (double)out[i];
    return s;
}

static void expect_grad_ok(GradCheckResult res, size_t n, const char *what, int P) {
    if (!(res.max_rel_err < TOL) || res.n_checked == 0)
        fail_msg("P = %d, %s: max_rel_err %.3g at index %zu (numeric %.6g, analytic %.6g), %zu checked", P, what,
                 res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic, res.n_checked);
    assert_int_equal(res.n_checked, n < MAX_CHECKS ? n : MAX_CHECKS);
}

/* The shapes tested: 28 x 28 grey with the three patch sizes of the chapter,
 * a 3-channel, non-square image so rows, cols and channels cannot be mixed up,
 * and overlapping patches (the last field, the kernel K; 0 means K = P). */
static const PatchEmbedSpec SPECS[] = {
    {1, 28, 28, 4, 5, 0}, {1, 28, 28, 7, 5, 0}, {1, 28, 28, 14, 5, 0}, {3, 12, 8, 4, 3, 0},
    {1, 28, 28, 4, 5, 8}, {1, 28, 28, 7, 5, 9}, {3, 12, 8, 4, 3, 6}};
enum { N_SPECS = sizeof SPECS / sizeof SPECS[0] };

/* An image pixel: images [B, channels, rows, cols]; 0 past the edge (the padding). */
static float pixel(const float *images, const PatchEmbedSpec *s, int b, int c, int y, int x) {
    if (y < 0 || y >= s->rows || x < 0 || x >= s->cols) return 0.0f;
    return images[(((size_t)b * s->channels + c) * s->rows + y) * s->cols + x];
}

/* ------------------------------------------------------------------ forward */

static void test_forward_equals_convolution_and_flatten_project(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 7, 0);
    const int B = 3;
    for (int k = 0; k < N_SPECS; k++) {
        const PatchEmbedSpec *s = &SPECS[k];
        assert_int_equal(patch_embed_check(s), 0);
        const int P = s->P, N = patch_embed_count(s), D_in = patch_embed_dim(s), D = s->D, per_row = s->cols / P;
        const int K = s->K ? s->K : P, pad = (K - P) / 2;
        assert_int_equal(patch_embed_kernel(s), K);
        assert_int_equal(patch_embed_padding(s), pad);
        assert_int_equal(N, (s->rows / P) * (s->cols / P));
        assert_int_equal(D_in, s->channels * K * K);
        const size_t n_img = (size_t)B * s->channels * s->rows * s->cols, n_out = (size_t)B * N * D;
        float *images = alloc_floats(n_img), *conv_weight = alloc_floats((size_t)D * D_in);
        float *W = alloc_floats((size_t)D_in * D), *bias = alloc_floats(D);
        float *out = alloc_floats(n_out), *cache = alloc_floats(patch_embed_cache_floats(s, B));
        float *vec = alloc_floats(D_in);
        fill(images, n_img, 1.0f, &r);
        fill(conv_weight, (size_t)D * D_in, 0.5f, &r);
        fill(bias, D, 0.5f, &r);
        /* W = weight.reshape(D, D_in).T: W[(c K + i) K + j, d] = weight[d, c, i, j] */
        for (int d = 0; d < D; d++)
            for (int q = 0; q < D_in; q++) W[(size_t)q * D + d] = conv_weight[(size_t)d * D_in + q];
        for (size_t i = 0; i < n_out; i++) out[i] = NAN;   /* forward must write every output */
        patch_embed_forward(out, cache, images, W, bias, s, B);

        for (int b = 0; b < B; b++)
            for (int n = 0; n < N; n++) {
                /* the output position's first pixel in the padded image */
                const int top = (n / per_row) * P - pad, left = (n % per_row) * P - pad;
                /* flatten the K x K square: (c, i, j) order */
                for (int c = 0; c < s->channels; c++)
                    for (int i = 0; i < K; i++)
                        for (int j = 0; j < K; j++)
                            vec[(c * K + i) * K + j] = pixel(images, s, b, c, top + i, left + j);
                for (int d = 0; d < D; d++) {
                    /* a direct convolution: filter d at output position (n / per_row, n % per_row), stride P */
                    double conv = bias[d], sum_abs = fabs(bias[d]);
                    for (int c = 0; c < s->channels; c++)
                        for (int i = 0; i < K; i++)
                            for (int j = 0; j < K; j++) {
                                const double t = (double)pixel(images, s, b, c, top + i, left + j) *
                                                 conv_weight[(((size_t)d * s->channels + c) * K + i) * K + j];
                                conv += t;
                                sum_abs += fabs(t);
                            }
                    /* flatten and project: vec [D_in] @ W[:, d] + b[d] */
                    double proj = bias[d];
                    for (int q = 0; q < D_in; q++) proj += (double)vec[q] * W[(size_t)q * D + d];
                    const double got = out[((size_t)b * N + n) * D + d];
                    const double tol = 2.0 * D_in * 0x1p-24 * sum_abs + 1e-6;
                    if (!(fabs(got - conv) <= tol) || !(fabs(got - proj) <= tol))
                        fail_msg("P = %d, K = %d, %d x %d x %d: image %d patch %d filter %d: %.8g, convolution %.8g, "
                                 "flatten-and-project %.8g (tolerance %.2g)", P, K, s->channels, s->rows, s->cols, b,
                                 n, d, got, conv, proj, tol);
                }
            }

        /* no bias: the same products without b */
        patch_embed_forward(out, cache, images, W, NULL, s, B);
        double s0 = 0.0;
        for (int q = 0; q < D_in; q++) s0 += (double)cache[q] * W[(size_t)q * D];
        assert_float_equal(out[0], s0, 2.0 * D_in * 0x1p-24 * D_in + 1e-6);
        free(images); free(conv_weight); free(W); free(bias); free(out); free(cache); free(vec);
    }
}

/* -------------------------------------------------------------- im2col */

static void test_im2col_is_a_reordering(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 8, 0);
    const int B = 2;
    for (int k = 0; k < N_SPECS; k++) {
        const PatchEmbedSpec *s = &SPECS[k];
        const size_t n_img = (size_t)B * s->channels * s->rows * s->cols;
        float *images = alloc_floats(n_img), *patches = alloc_floats(patch_embed_cache_floats(s, B));
        float *back = alloc_floats(n_img);
        fill(images, n_img, 1.0f, &r);
        patch_embed_im2col(patches, images, s, B);
        patch_embed_col2im_add(back, patches, s, B);   /* back starts at 0 */
        if (patch_embed_kernel(s) == s->P) {
            assert_int_equal(patch_embed_cache_floats(s, B), n_img);   /* stride = kernel: each pixel once */
            assert_memory_equal(back, images, sizeof(float) * n_img);
            /* col2im ADDS: a second time doubles (exactly: x + x) */
            patch_embed_col2im_add(back, patches, s, B);
            for (size_t i = 0; i < n_img; i++) assert_true(back[i] == 2.0f * images[i]);
        } else {
            /* overlap: pixel (y, x) comes back once for every K x K square that reads it, the
             * squares of patch (gr, gc) covering rows gr P - pad .. gr P - pad + K - 1 (columns alike) */
            const int P = s->P, K = patch_embed_kernel(s), pad = patch_embed_padding(s);
            int most = 0;
            for (int b = 0; b < B; b++)
                for (int c = 0; c < s->channels; c++)
                    for (int y = 0; y < s->rows; y++)
                        for (int x = 0; x < s->cols; x++) {
                            int count = 0;
                            for (int gr = 0; gr < s->rows / P; gr++)
                                for (int gc = 0; gc < s->cols / P; gc++)
                                    count += y >= gr * P - pad && y < gr * P - pad + K && x >= gc * P - pad &&
                                             x < gc * P - pad + K;
                            if (count > most) most = count;
                            const size_t i = (((size_t)b * s->channels + c) * s->rows + y) * s->cols + x;
                            assert_float_equal(back[i], count * images[i], 1e-6);
                        }
            assert_true(most > 1);   /* some pixel really is read by several squares */
        }
        free(images); free(patches); free(back);
    }
}

/* ----------------------------------------------------------- gradients */

typedef struct {
    const PatchEmbedSpec *s;
    int B;
    float *images, *W, *b, *out, *cache, *w;
} EmbedCtx;

static double embed_loss(void *p) {
    EmbedCtx *c = p;
    patch_embed_forward(c->out, c->cache, c->images, c->W, c->b, c->s, c->B);
    return weighted_sum(c->out, c->w, (size_t)c->B * patch_embed_count(c->s) * c->s->D);
}

static void test_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 9, 0);
    const int B = 2;
    for (int k = 0; k < N_SPECS; k++) {
        const PatchEmbedSpec *s = &SPECS[k];
        const int N = patch_embed_count(s), D_in = patch_embed_dim(s), D = s->D;
        const size_t n_img = (size_t)B * s->channels * s->rows * s->cols, n_W = (size_t)D_in * D;
        const size_t n_out = (size_t)B * N * D;
        EmbedCtx c = {s, B, alloc_floats(n_img), alloc_floats(n_W), alloc_floats(D), alloc_floats(n_out),
                      alloc_floats(patch_embed_cache_floats(s, B)), alloc_floats(n_out)};
        fill(c.images, n_img, 1.0f, &r);
        fill(c.W, n_W, 0.5f, &r);
        fill(c.b, D, 0.5f, &r);
        fill(c.w, n_out, 1.0f, &r);
        float *scratch = alloc_floats(patch_embed_scratch_floats(s, B));
        /* gradients start non-zero, to prove backward ADDS to them */
        float *dimages = alloc_floats(n_img), *dW = alloc_floats(n_W), *db = alloc_floats(D);
        float *dimages0 = alloc_floats(n_img), *dW0 = alloc_floats(n_W), *db0 = alloc_floats(D);
        fill(dimages0, n_img, 1.0f, &r);
        fill(dW0, n_W, 1.0f, &r);
        fill(db0, D, 1.0f, &r);
        memcpy(dimages, dimages0, sizeof(float) * n_img);
        memcpy(dW, dW0, sizeof(float) * n_W);
        memcpy(db, db0, sizeof(float) * D);
        embed_loss(&c);
        patch_embed_backward(dimages, dW, db, scratch, c.w, c.cache, c.W, s, B);
        for (size_t i = 0; i < n_img; i++) dimages[i] -= dimages0[i];
        for (size_t i = 0; i < n_W; i++) dW[i] -= dW0[i];
        for (int i = 0; i < D; i++) db[i] -= db0[i];
        expect_grad_ok(gradcheck(embed_loss, &c, c.W, dW, n_W, EPS, MAX_CHECKS), n_W, "dW", s->P);
        expect_grad_ok(gradcheck(embed_loss, &c, c.b, db, D, EPS, MAX_CHECKS), D, "db", s->P);
        expect_grad_ok(gradcheck(embed_loss, &c, c.images, dimages, n_img, EPS, MAX_CHECKS), n_img, "dimages",
                       s->P);

        /* NULL gradients are skipped, and scratch is not needed without dimages:
         * dW and db alone come out the same */
        float *dW2 = alloc_floats(n_W), *db2 = alloc_floats(D);
        memset(dW, 0, sizeof(float) * n_W);
        memset(db, 0, sizeof(float) * D);
        embed_loss(&c);
        patch_embed_backward(NULL, dW, db, NULL, c.w, c.cache, c.W, s, B);
        patch_embed_backward(NULL, dW2, NULL, NULL, c.w, c.cache, c.W, s, B);
        patch_embed_backward(NULL, NULL, db2, NULL, c.w, c.cache, c.W, s, B);
        assert_memory_equal(dW, dW2, sizeof(float) * n_W);
        assert_memory_equal(db, db2, sizeof(float) * D);

        free(c.images); free(c.W); free(c.b); free(c.out); free(c.cache); free(c.w); free(scratch);
        free(dimages); free(dW); free(db); free(dimages0); free(dW0); free(db0); free(dW2); free(db2);
    }
}

/* ----------------------------------------------------------- sizes, init */

static void test_check_and_init(void **state) {
    (void)state;
    PatchEmbedSpec s = {1, 28, 28, 5, 64, 0};
    assert_int_equal(patch_embed_check(&s), -1);
    assert_string_equal(last_error(),
                        "patch size 5 does not cut a 28 x 28 image into whole patches: expected one of 1, 2, 4, 7, 14, 28");
    s.P = 0;
    assert_int_equal(patch_embed_check(&s), -1);
    s.P = 7;
    s.D = 0;
    assert_int_equal(patch_embed_check(&s), -1);
    assert_non_null(strstr(last_error(), "width D 0"));
    s.D = 64;
    assert_int_equal(patch_embed_check(&s), 0);
    /* kernels: P itself, or P plus an even number of pixels (centred); not smaller, not lopsided */
    s.K = 7;
    assert_int_equal(patch_embed_check(&s), 0);
    s.K = 11;
    assert_int_equal(patch_embed_check(&s), 0);
    assert_int_equal(patch_embed_padding(&s), 2);
    assert_int_equal(patch_embed_dim(&s), 121);
    s.K = 8;
    assert_int_equal(patch_embed_check(&s), -1);
    assert_string_equal(last_error(), "kernel 8 with patch 7: expected 0 (no overlap) or a kernel of 7, 9, 11, ... "
                                      "(the patch side plus an even number of pixels, at most the patch plus the "
                                      "image)");
    s.K = 5;
    assert_int_equal(patch_embed_check(&s), -1);
    s.K = 0;
    /* the chapter's three patch sizes: 49, 16 and 4 tokens */
    const int P[3] = {4, 7, 14}, N[3] = {49, 16, 4};
    for (int k = 0; k < 3; k++) {
        s.P = P[k];
        assert_int_equal(patch_embed_count(&s), N[k]);
        assert_int_equal(patch_embed_dim(&s), P[k] * P[k]);
    }
    /* init: Xavier-uniform W within its limit, not all equal; b = 0 */
    s.P = 7;
    Rng r;
    rng_seed(&r, 10, 0);
    const int D_in = patch_embed_dim(&s);
    float *W = alloc_floats((size_t)D_in * s.D), b[64];
    for (int d = 0; d < 64; d++) b[d] = 1.0f;
    patch_embed_init(&s, W, b, &r);
    const float limit = sqrtf(6.0f / (float)(D_in + s.D));
    float lo = 1.0f, hi = -1.0f;
    for (int i = 0; i < D_in * s.D; i++) {
        assert_true(fabsf(W[i]) <= limit);
        lo = fminf(lo, W[i]);
        hi = fmaxf(hi, W[i]);
    }
    assert_true(hi - lo > limit);
    for (int d = 0; d < 64; d++) assert_true(b[d] == 0.0f);
    free(W);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_equals_convolution_and_flatten_project),
        cmocka_unit_test(test_im2col_is_a_reordering),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_check_and_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
