/* test_conv2d.c - 2-D convolution and max-pooling (common/nn/conv2d.h).
 *
 *  - forward against a direct convolution written here from the definition
 *    (seven loops: image, filter, output row and column, channel, kernel row
 *    and column, summed in double), with and without the bias, over shapes
 *    that cover padding 0, 1 and 2, stride 1 and 2 (a stride that leaves the
 *    last rows unread too), kernels 1, 3 and 5 (one as large as the padded
 *    image), 1 and 3 input channels, non-square images and B = 2;
 *  - backward against the same loops run backwards (every product's share
 *    scattered to dimages, dW, db, in double), and against central finite
 *    differences (nn/gradcheck.h, L = sum_i w_i out_i as in test_layers.c)
 *    for dimages, dW and db; backward ADDS to gradients that start non-zero,
 *    and skips NULL ones (scratch is then not needed);
 *  - im2col then col2im gives each pixel back once per position that reads it;
 *  - max-pooling against its definition (overlapping windows, windows with
 *    gaps between them, one window over the whole image); ties go to the
 *    first pixel of the window in row-major order, forward and backward; a
 *    NaN wins its window; dimages against finite differences;
 *  - conv2d_check and maxpool2d_check refuse the sizes that give no output,
 *    naming the value.
 * Its numbers against PyTorch's F.conv2d and F.max_pool2d are test_golden's
 * (tests/golden/conv2d.bin, maxpool2d.bin).
 *
 * Tolerance of the comparisons with the direct loops (as test_patch_embed.c):
 * the reference sums in double, sgemm sums D_in float products in float, so
 * its error is at most about D_in u sum_k |term_k| (u = 2^-24); we allow
 * twice that plus 1e-6. A wrong index moves a value by a whole term, about
 * 0.1 here. The convolution is linear in each of its inputs and max-pooling
 * is linear where no window's largest pixel changes, so a central difference
 * has no truncation error: eps 1e-2 and max_rel_err < 1e-2 (the pooled
 * pixels in the gradient check are 0.1 apart, so a step of 1e-2 changes no
 * window's largest). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"   /* before cmocka.h, whose fail() macro would clash with error.h's fail() */
#include "nn/conv2d.h"
#include "nn/gradcheck.h"
#include "layer_checks.h"

#define EPS 1e-2f
#define TOL 1e-2
#define MAX_CHECKS 200
#define U 0x1p-24

/* channels_in, rows, cols, channels_out, K, stride, pad */
static const Conv2dSpec SPECS[] = {
    {1, 7, 5, 2, 3, 1, 0},    /* K 3, stride 1, no padding, non-square */
    {3, 6, 9, 4, 3, 2, 1},    /* 3 channels, stride 2, padding 1 */
    {1, 8, 6, 3, 5, 1, 2},    /* K 5, padding 2: "same" size */
    {3, 5, 7, 2, 1, 1, 0},    /* K 1: a per-pixel linear map of the channels */
    {3, 9, 6, 2, 5, 2, 2},    /* K 5, stride 2, padding 2 */
    {1, 4, 6, 3, 1, 2, 1},    /* K 1 with padding: the border outputs read only zeros (the bias) */
    {2, 3, 3, 2, 5, 1, 1},    /* a kernel as large as the padded image: one output */
    {3, 10, 7, 5, 3, 2, 0},   /* stride 2 leaves the last row unread: (10 - 3) / 2 + 1 = 4 */
};
enum { N_SPECS = sizeof SPECS / sizeof SPECS[0], B = 2 };

static size_t image_floats(const Conv2dSpec *s) { return (size_t)B * s->channels_in * s->rows * s->cols; }
static size_t weight_floats(const Conv2dSpec *s) { return (size_t)s->channels_out * conv2d_dim(s); }
static size_t out_floats(const Conv2dSpec *s) {
    return (size_t)B * s->channels_out * conv2d_rows_out(s) * conv2d_cols_out(s);
}

/* pixel (b, c, y, x) of images [B, channels_in, rows, cols]; 0 past the edge (the padding) */
static double pixel(const float *images, const Conv2dSpec *s, int b, int c, int y, int x) {
    if (y < 0 || y >= s->rows || x < 0 || x >= s->cols) return 0.0;
    return images[(((size_t)b * s->channels_in + c) * s->rows + y) * s->cols + x];
}

static double weighted_sum(const float *out, const float *w, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)w[i] * out[i];
    return sum;
}

static void describe(char *what, size_t cap, const Conv2dSpec *s, const char *tensor) {
    snprintf(what, cap, "%d x %d x %d -> %d, K %d, stride %d, pad %d: %s", s->channels_in, s->rows, s->cols,
             s->channels_out, s->K, s->stride, s->pad, tensor);
}

/* ------------------------------------------------------------------ forward */

/* The direct convolution, seven loops in double: want [B, channels_out, rows_out, cols_out] and the
 * sum of its terms' sizes (for the tolerance). */
static void direct_convolution(double *want, double *size, const float *images, const float *W, const float *bias,
                               const Conv2dSpec *s) {
    const int rows_out = conv2d_rows_out(s), cols_out = conv2d_cols_out(s), K = s->K;
    size_t at = 0;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < s->channels_out; o++)
            for (int oy = 0; oy < rows_out; oy++)
                for (int ox = 0; ox < cols_out; ox++, at++) {
                    double sum = bias ? bias[o] : 0.0, abs_sum = bias ? fabs(bias[o]) : 0.0;
                    for (int c = 0; c < s->channels_in; c++)
                        for (int i = 0; i < K; i++)
                            for (int j = 0; j < K; j++) {
                                const double t = W[(((size_t)o * s->channels_in + c) * K + i) * K + j] *
                                                 pixel(images, s, b, c, oy * s->stride - s->pad + i,
                                                       ox * s->stride - s->pad + j);
                                sum += t;
                                abs_sum += fabs(t);
                            }
                    want[at] = sum;
                    size[at] = abs_sum;
                }
}

static void test_forward_equals_direct_convolution(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 11, 0);
    for (int k = 0; k < N_SPECS; k++) {
        const Conv2dSpec *s = &SPECS[k];
        assert_int_equal(conv2d_check(s), 0);
        const size_t n_img = image_floats(s), n_W = weight_floats(s), n_out = out_floats(s);
        float *images = zeroed_floats(n_img), *W = zeroed_floats(n_W), *bias = zeroed_floats((size_t)s->channels_out);
        float *out = zeroed_floats(n_out), *cache = zeroed_floats(conv2d_cache_floats(s, B));
        double *want = calloc(n_out, sizeof(double)), *size = calloc(n_out, sizeof(double));
        assert_non_null(want);
        assert_non_null(size);
        fill_uniform(images, n_img, 1.0f, &r);
        fill_uniform(W, n_W, 0.5f, &r);
        fill_uniform(bias, (size_t)s->channels_out, 0.5f, &r);
        for (int with_bias = 1; with_bias >= 0; with_bias--) {
            const float *b = with_bias ? bias : NULL;
            for (size_t i = 0; i < n_out; i++) out[i] = NAN;   /* forward must write every output */
            conv2d_forward(out, cache, images, W, b, s, B);
            direct_convolution(want, size, images, W, b, s);
            for (size_t i = 0; i < n_out; i++) {
                const double tol = 2.0 * conv2d_dim(s) * U * size[i] + 1e-6;
                if (!(fabs(out[i] - want[i]) <= tol)) {
                    char what[128];
                    describe(what, sizeof what, s, with_bias ? "out" : "out without bias");
                    fail_msg("%s: entry %zu is %.8g, the direct convolution %.8g (tolerance %.2g)", what, i,
                             (double)out[i], want[i], tol);
                }
            }
        }
        free(images); free(W); free(bias); free(out); free(cache); free(want); free(size);
    }
}

static void test_sizes(void **state) {
    (void)state;
    const Conv2dSpec s = {3, 28, 20, 8, 5, 2, 1};   /* (28 + 2 - 5) / 2 + 1 = 13, (20 + 2 - 5) / 2 + 1 = 9 */
    assert_int_equal(conv2d_rows_out(&s), 13);
    assert_int_equal(conv2d_cols_out(&s), 9);
    assert_int_equal(conv2d_dim(&s), 75);
    assert_int_equal(conv2d_scratch_floats(&s), 75 * 13 * 9);
    assert_int_equal(conv2d_cache_floats(&s, 4), 4 * 75 * 13 * 9);
    const MaxPool2dSpec p = {3, 28, 20, 3, 2};      /* (28 - 3) / 2 + 1 = 13, (20 - 3) / 2 + 1 = 9 */
    assert_int_equal(maxpool2d_rows_out(&p), 13);
    assert_int_equal(maxpool2d_cols_out(&p), 9);
}

/* ----------------------------------------------------------------- backward */

/* The direct loops run backwards: each term W[o, c, i, j] pixel(b, c, y, x) of out[b, o, oy, ox] sends
 * dout W to the pixel, dout pixel to the weight, and dout to the bias. Doubles; size gets the sizes. */
static void direct_backward(double *dimages, double *dW, double *db, double *dimages_size, double *dW_size,
                            const float *dout, const float *images, const float *W, const Conv2dSpec *s) {
    const int rows_out = conv2d_rows_out(s), cols_out = conv2d_cols_out(s), K = s->K;
    size_t at = 0;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < s->channels_out; o++)
            for (int oy = 0; oy < rows_out; oy++)
                for (int ox = 0; ox < cols_out; ox++, at++) {
                    db[o] += dout[at];
                    for (int c = 0; c < s->channels_in; c++)
                        for (int i = 0; i < K; i++)
                            for (int j = 0; j < K; j++) {
                                const int y = oy * s->stride - s->pad + i, x = ox * s->stride - s->pad + j;
                                const size_t w = (((size_t)o * s->channels_in + c) * K + i) * K + j;
                                const double g = dout[at] * pixel(images, s, b, c, y, x);
                                dW[w] += g;
                                dW_size[w] += fabs(g);
                                if (y < 0 || y >= s->rows || x < 0 || x >= s->cols) continue;
                                const size_t p = (((size_t)b * s->channels_in + c) * s->rows + y) * s->cols + x;
                                dimages[p] += dout[at] * W[w];
                                dimages_size[p] += fabs(dout[at] * W[w]);
                            }
                }
}

/* |got - start - want| within the budget of sums of `terms` float terms of these sizes */
static void expect_sum(const float *got, const float *start, const double *want, const double *size, size_t n,
                       int terms, const Conv2dSpec *s, const char *tensor) {
    for (size_t i = 0; i < n; i++) {
        const double tol = 2.0 * terms * U * (size[i] + fabs(start[i])) + 1e-6;
        if (!(fabs((double)got[i] - start[i] - want[i]) <= tol)) {
            char what[128];
            describe(what, sizeof what, s, tensor);
            fail_msg("%s: entry %zu is %.8g (started at %.8g), the direct loops give %.8g more (tolerance %.2g)",
                     what, i, (double)got[i], (double)start[i], want[i], tol);
        }
    }
}

typedef struct {
    const Conv2dSpec *s;
    float *images, *W, *bias, *out, *cache, *w;
} ConvCtx;

static double conv_loss(void *p) {
    ConvCtx *c = p;
    conv2d_forward(c->out, c->cache, c->images, c->W, c->bias, c->s, B);
    return weighted_sum(c->out, c->w, out_floats(c->s));
}

static void expect_grad_ok(GradCheckResult res, size_t n, const Conv2dSpec *s, const char *tensor) {
    char what[128];
    describe(what, sizeof what, s, tensor);
    expect_gradient(res, TOL, what);
    assert_int_equal(res.n_checked, n < MAX_CHECKS ? n : MAX_CHECKS);
}

static void test_backward(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 12, 0);
    for (int k = 0; k < N_SPECS; k++) {
        const Conv2dSpec *s = &SPECS[k];
        const int O = s->channels_out;
        const size_t n_img = image_floats(s), n_W = weight_floats(s), n_out = out_floats(s);
        ConvCtx c = {s, zeroed_floats(n_img), zeroed_floats(n_W), zeroed_floats((size_t)O), zeroed_floats(n_out),
                     zeroed_floats(conv2d_cache_floats(s, B)), zeroed_floats(n_out)};
        fill_uniform(c.images, n_img, 1.0f, &r);
        fill_uniform(c.W, n_W, 0.5f, &r);
        fill_uniform(c.bias, (size_t)O, 0.5f, &r);
        fill_uniform(c.w, n_out, 1.0f, &r);
        float *scratch = zeroed_floats(conv2d_scratch_floats(s));
        /* gradients start non-zero, to prove backward ADDS to them */
        float *dimages = zeroed_floats(n_img), *dW = zeroed_floats(n_W), *db = zeroed_floats((size_t)O);
        float *dimages0 = zeroed_floats(n_img), *dW0 = zeroed_floats(n_W), *db0 = zeroed_floats((size_t)O);
        fill_uniform(dimages0, n_img, 1.0f, &r);
        fill_uniform(dW0, n_W, 1.0f, &r);
        fill_uniform(db0, (size_t)O, 1.0f, &r);
        memcpy(dimages, dimages0, sizeof(float) * n_img);
        memcpy(dW, dW0, sizeof(float) * n_W);
        memcpy(db, db0, sizeof(float) * (size_t)O);
        conv_loss(&c);
        conv2d_backward(dimages, dW, db, scratch, c.w, c.cache, c.W, s, B);

        /* against the direct loops: dW sums B N_out terms, dimages up to channels_out K K, db B N_out */
        double *want_dimages = calloc(n_img, sizeof(double)), *want_dW = calloc(n_W, sizeof(double));
        double *want_db = calloc((size_t)O, sizeof(double)), *size_dimages = calloc(n_img, sizeof(double));
        double *size_dW = calloc(n_W, sizeof(double)), *size_db = calloc((size_t)O, sizeof(double));
        assert_true(want_dimages && want_dW && want_db && size_dimages && size_dW && size_db);
        direct_backward(want_dimages, want_dW, want_db, size_dimages, size_dW, c.w, c.images, c.W, s);
        const int N_out = conv2d_rows_out(s) * conv2d_cols_out(s);
        for (size_t p = 0; p < n_out; p++) size_db[p / N_out % O] += fabs(c.w[p]);
        expect_sum(dimages, dimages0, want_dimages, size_dimages, n_img, O * s->K * s->K + 1, s, "dimages");
        expect_sum(dW, dW0, want_dW, size_dW, n_W, B * N_out + 1, s, "dW");
        expect_sum(db, db0, want_db, size_db, (size_t)O, B * N_out + 1, s, "db");

        /* against finite differences */
        for (size_t i = 0; i < n_img; i++) dimages[i] -= dimages0[i];
        for (size_t i = 0; i < n_W; i++) dW[i] -= dW0[i];
        for (int i = 0; i < O; i++) db[i] -= db0[i];
        expect_grad_ok(gradcheck(conv_loss, &c, c.images, dimages, n_img, EPS, MAX_CHECKS), n_img, s, "dimages");
        expect_grad_ok(gradcheck(conv_loss, &c, c.W, dW, n_W, EPS, MAX_CHECKS), n_W, s, "dW");
        expect_grad_ok(gradcheck(conv_loss, &c, c.bias, db, (size_t)O, EPS, MAX_CHECKS), (size_t)O, s, "db");

        /* NULL gradients are skipped, and scratch is not needed without dimages: each alone comes out
         * as all three together, bit for bit */
        float *dimages2 = zeroed_floats(n_img), *dW2 = zeroed_floats(n_W), *db2 = zeroed_floats((size_t)O);
        memset(dimages, 0, sizeof(float) * n_img);
        memset(dW, 0, sizeof(float) * n_W);
        memset(db, 0, sizeof(float) * (size_t)O);
        conv_loss(&c);
        conv2d_backward(dimages, dW, db, scratch, c.w, c.cache, c.W, s, B);
        conv2d_backward(dimages2, NULL, NULL, scratch, c.w, c.cache, c.W, s, B);
        conv2d_backward(NULL, dW2, NULL, NULL, c.w, c.cache, c.W, s, B);
        conv2d_backward(NULL, NULL, db2, NULL, c.w, c.cache, c.W, s, B);
        assert_memory_equal(dimages, dimages2, sizeof(float) * n_img);
        assert_memory_equal(dW, dW2, sizeof(float) * n_W);
        assert_memory_equal(db, db2, sizeof(float) * (size_t)O);

        free(c.images); free(c.W); free(c.bias); free(c.out); free(c.cache); free(c.w); free(scratch);
        free(dimages); free(dW); free(db); free(dimages0); free(dW0); free(db0);
        free(dimages2); free(dW2); free(db2);
        free(want_dimages); free(want_dW); free(want_db); free(size_dimages); free(size_dW); free(size_db);
    }
}

/* col2im(im2col(image)): pixel (y, x) once for every output position whose square covers it */
static void test_im2col_col2im(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 13, 0);
    for (int k = 0; k < N_SPECS; k++) {
        const Conv2dSpec *s = &SPECS[k];
        const size_t n_img = (size_t)s->channels_in * s->rows * s->cols;
        float *image = zeroed_floats(n_img), *back = zeroed_floats(n_img);
        float *columns = zeroed_floats(conv2d_scratch_floats(s));
        fill_uniform(image, n_img, 1.0f, &r);
        conv2d_im2col(columns, image, s);
        conv2d_col2im_add(back, columns, s);
        for (int c = 0; c < s->channels_in; c++)
            for (int y = 0; y < s->rows; y++)
                for (int x = 0; x < s->cols; x++) {
                    int count = 0;
                    for (int oy = 0; oy < conv2d_rows_out(s); oy++)
                        for (int ox = 0; ox < conv2d_cols_out(s); ox++) {
                            const int i = y - (oy * s->stride - s->pad), j = x - (ox * s->stride - s->pad);
                            count += i >= 0 && i < s->K && j >= 0 && j < s->K;
                        }
                    const size_t at = ((size_t)c * s->rows + y) * s->cols + x;
                    assert_float_equal(back[at], count * image[at], 1e-6 * (count + 1));
                }
        free(image); free(back); free(columns);
    }
}

static void test_conv2d_check(void **state) {
    (void)state;
    Conv2dSpec s = {1, 3, 4, 1, 6, 1, 1};
    assert_int_equal(conv2d_check(&s), -1);
    assert_string_equal(last_error(), "convolution: a 6 x 6 kernel does not fit a 3 x 4 image padded by 1 (5 x 6): "
                                      "expected a kernel of at most 5, or more padding");
    s.K = 5;   /* 5 x 5 fits the padded 5 x 6: one row of outputs */
    assert_int_equal(conv2d_check(&s), 0);
    assert_int_equal(conv2d_rows_out(&s), 1);
    assert_int_equal(conv2d_cols_out(&s), 2);
    s.stride = 0;
    assert_int_equal(conv2d_check(&s), -1);
    assert_string_equal(last_error(), "convolution: stride 0: expected at least 1");
    s.stride = 1;
    s.pad = -1;
    assert_int_equal(conv2d_check(&s), -1);
    assert_non_null(strstr(last_error(), "padding -1"));
    s.pad = 0;
    s.K = 0;
    assert_int_equal(conv2d_check(&s), -1);
    assert_non_null(strstr(last_error(), "kernel side 0"));
    s.K = 3;
    s.channels_in = 0;
    assert_int_equal(conv2d_check(&s), -1);
    assert_non_null(strstr(last_error(), "0 input channels"));
    s.channels_in = 1;
    s.channels_out = 0;
    assert_int_equal(conv2d_check(&s), -1);
    assert_non_null(strstr(last_error(), "0 output channels"));
    s.channels_out = 1;
    s.rows = 0;
    assert_int_equal(conv2d_check(&s), -1);
    s.rows = 3;
    s.pad = 1 << 30;   /* rows + 2 pad past INT_MAX */
    assert_int_equal(conv2d_check(&s), -1);
    s.pad = 0;
    s.channels_in = 1 << 28;   /* D_in = 9 2^28 */
    assert_int_equal(conv2d_check(&s), -1);
    assert_non_null(strstr(last_error(), "more numbers than a C int"));
}

/* -------------------------------------------------------------- max-pooling */

/* channels, rows, cols, K, stride */
static const MaxPool2dSpec POOLS[] = {
    {2, 6, 8, 2, 2},   /* the usual 2 x 2, stride 2 */
    {3, 7, 5, 3, 2},   /* overlapping windows (stride < K), non-square */
    {1, 5, 9, 3, 1},   /* stride 1 */
    {2, 7, 7, 2, 3},   /* gaps: pixels no window reads */
    {1, 4, 6, 4, 1},   /* windows as tall as the image */
};
enum { N_POOLS = sizeof POOLS / sizeof POOLS[0] };

static size_t pool_in(const MaxPool2dSpec *s) { return (size_t)B * s->channels * s->rows * s->cols; }
static size_t pool_out(const MaxPool2dSpec *s) {
    return (size_t)B * s->channels * maxpool2d_rows_out(s) * maxpool2d_cols_out(s);
}

/* The definition: the window's largest value, and the first pixel (row-major) holding it. */
static void direct_maxpool(float *want, int *want_at, const float *images, const MaxPool2dSpec *s) {
    const int rows_out = maxpool2d_rows_out(s), cols_out = maxpool2d_cols_out(s);
    size_t at = 0;
    for (int bc = 0; bc < B * s->channels; bc++)
        for (int oy = 0; oy < rows_out; oy++)
            for (int ox = 0; ox < cols_out; ox++, at++) {
                const float *plane = images + (size_t)bc * s->rows * s->cols;
                float m = -INFINITY;
                for (int i = 0; i < s->K; i++)
                    for (int j = 0; j < s->K; j++)
                        m = fmaxf(m, plane[(oy * s->stride + i) * s->cols + ox * s->stride + j]);
                int first = -1;
                for (int i = 0; i < s->K && first < 0; i++)
                    for (int j = 0; j < s->K && first < 0; j++) {
                        const int p = (oy * s->stride + i) * s->cols + ox * s->stride + j;
                        if (plane[p] == m) first = p;
                    }
                want[at] = m;
                want_at[at] = first;
            }
}

/* Values from {-1, -0.5, 0, 0.5, 1}: most windows hold a tie for their largest. */
static void test_maxpool_forward_and_ties(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 14, 0);
    for (int k = 0; k < N_POOLS; k++) {
        const MaxPool2dSpec *s = &POOLS[k];
        assert_int_equal(maxpool2d_check(s), 0);
        const size_t n_in = pool_in(s), n_out = pool_out(s);
        float *images = zeroed_floats(n_in), *out = zeroed_floats(n_out), *want = zeroed_floats(n_out);
        float *dimages = zeroed_floats(n_in), *dout = zeroed_floats(n_out), *want_dimages = zeroed_floats(n_in);
        int *argmax = calloc(n_out, sizeof(int)), *want_at = calloc(n_out, sizeof(int));
        assert_true(argmax && want_at);
        for (int ties = 0; ties < 2; ties++) {
            for (size_t i = 0; i < n_in; i++)
                images[i] = ties ? 0.5f * (float)((int)(rng_uniform(&r) * 5.0f) - 2) : 2.0f * rng_uniform(&r) - 1.0f;
            for (size_t i = 0; i < n_out; i++) out[i] = NAN, argmax[i] = -1;
            maxpool2d_forward(out, argmax, images, s, B);
            direct_maxpool(want, want_at, images, s);
            assert_memory_equal(out, want, sizeof(float) * n_out);
            assert_memory_equal(argmax, want_at, sizeof(int) * n_out);
            /* backward: dout to the chosen pixel, added to what dimages held */
            fill_uniform(dout, n_out, 1.0f, &r);
            fill_uniform(dimages, n_in, 1.0f, &r);
            memcpy(want_dimages, dimages, sizeof(float) * n_in);
            const size_t plane = (size_t)s->rows * s->cols, plane_out = n_out / ((size_t)B * s->channels);
            for (size_t i = 0; i < n_out; i++) want_dimages[i / plane_out * plane + (size_t)want_at[i]] += dout[i];
            maxpool2d_backward(dimages, dout, argmax, s, B);
            assert_memory_equal(dimages, want_dimages, sizeof(float) * n_in);
        }
        free(images); free(out); free(want); free(dimages); free(dout); free(want_dimages); free(argmax); free(want_at);
    }
}

/* One 4 x 4 plane, 2 x 2 windows, stride 2, written out: ties, a constant window, a NaN. */
static void test_maxpool_ties_by_hand(void **state) {
    (void)state;
    const MaxPool2dSpec s = {1, 4, 4, 2, 2};
    /* window (0, 0): 3 at 1 and at 4 -> 1;  window (0, 1): 5 at 2 and at 3 -> 2;
     * window (1, 0): all 7 -> 8;            window (1, 1): NaN at 11 and at 15 -> 11 */
    const float images[16] = {1, 3, 5, 5,
                              3, 2, 0, 0,
                              7, 7, 1, NAN,
                              7, 7, 9, NAN};
    float out[4], dimages[16] = {0};
    int argmax[4];
    /* one image: the file-wide B is not used here */
    maxpool2d_forward(out, argmax, images, &s, 1);
    assert_int_equal(argmax[0], 1);
    assert_int_equal(argmax[1], 2);
    assert_int_equal(argmax[2], 8);
    assert_int_equal(argmax[3], 11);
    assert_true(out[0] == 3.0f && out[1] == 5.0f && out[2] == 7.0f && isnan(out[3]));
    const float dout[4] = {1, 2, 3, 4};
    maxpool2d_backward(dimages, dout, argmax, &s, 1);
    for (int p = 0; p < 16; p++) {
        const float want = p == 1 ? 1.0f : p == 2 ? 2.0f : p == 8 ? 3.0f : p == 11 ? 4.0f : 0.0f;
        assert_true(dimages[p] == want);
    }
}

typedef struct {
    const MaxPool2dSpec *s;
    float *images, *out, *w;
    int *argmax;
} PoolCtx;

static double pool_loss(void *p) {
    PoolCtx *c = p;
    maxpool2d_forward(c->out, c->argmax, c->images, c->s, B);
    return weighted_sum(c->out, c->w, pool_out(c->s));
}

/* Distinct pixels, 0.1 apart (a shuffled ramp): a step of 1e-2 changes no window's largest. */
static void test_maxpool_gradient(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 15, 0);
    for (int k = 0; k < N_POOLS; k++) {
        const MaxPool2dSpec *s = &POOLS[k];
        const size_t n_in = pool_in(s), n_out = pool_out(s);
        PoolCtx c = {s, zeroed_floats(n_in), zeroed_floats(n_out), zeroed_floats(n_out), calloc(n_out, sizeof(int))};
        assert_non_null(c.argmax);
        for (size_t i = 0; i < n_in; i++) c.images[i] = 0.1f * (float)i - 0.05f * (float)n_in;
        for (size_t i = n_in - 1; i > 0; i--) {   /* Fisher-Yates */
            const size_t j = rng_below(&r, (uint32_t)(i + 1));
            const float t = c.images[i];
            c.images[i] = c.images[j];
            c.images[j] = t;
        }
        fill_uniform(c.w, n_out, 1.0f, &r);
        float *dimages = zeroed_floats(n_in), *dimages0 = zeroed_floats(n_in);
        fill_uniform(dimages0, n_in, 1.0f, &r);
        memcpy(dimages, dimages0, sizeof(float) * n_in);
        pool_loss(&c);
        maxpool2d_backward(dimages, c.w, c.argmax, s, B);
        for (size_t i = 0; i < n_in; i++) dimages[i] -= dimages0[i];
        char what[96];
        snprintf(what, sizeof what, "max-pool %d x %d x %d, K %d, stride %d: dimages", s->channels, s->rows, s->cols,
                 s->K, s->stride);
        GradCheckResult res = gradcheck(pool_loss, &c, c.images, dimages, n_in, EPS, MAX_CHECKS);
        expect_gradient(res, TOL, what);
        assert_int_equal(res.n_checked, n_in < MAX_CHECKS ? n_in : MAX_CHECKS);
        free(c.images); free(c.out); free(c.w); free(c.argmax); free(dimages); free(dimages0);
    }
}

static void test_maxpool2d_check(void **state) {
    (void)state;
    MaxPool2dSpec s = {2, 3, 5, 4, 1};
    assert_int_equal(maxpool2d_check(&s), -1);
    assert_string_equal(last_error(),
                        "max-pooling: a 4 x 4 window does not fit a 3 x 5 image: expected a window of at most 3");
    s.K = 3;
    assert_int_equal(maxpool2d_check(&s), 0);
    assert_int_equal(maxpool2d_rows_out(&s), 1);
    assert_int_equal(maxpool2d_cols_out(&s), 3);
    s.stride = 0;
    assert_int_equal(maxpool2d_check(&s), -1);
    assert_string_equal(last_error(), "max-pooling: stride 0: expected at least 1");
    s.stride = 2;
    s.K = 0;
    assert_int_equal(maxpool2d_check(&s), -1);
    assert_non_null(strstr(last_error(), "window side 0"));
    s.K = 2;
    s.channels = 0;
    assert_int_equal(maxpool2d_check(&s), -1);
    assert_non_null(strstr(last_error(), "0 channels"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_equals_direct_convolution),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_backward),
        cmocka_unit_test(test_im2col_col2im),
        cmocka_unit_test(test_conv2d_check),
        cmocka_unit_test(test_maxpool_forward_and_ties),
        cmocka_unit_test(test_maxpool_ties_by_hand),
        cmocka_unit_test(test_maxpool_gradient),
        cmocka_unit_test(test_maxpool2d_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
