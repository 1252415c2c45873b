/* conv2d.c - 2-D convolution as im2col + one sgemm per image, and max-pooling
 * (conv2d.h explains the idea, the layouts and the conventions).
 *
 * Convolution, for each image b of the batch:
 *   forward:   columns_b = im2col(image_b)                 [D_in, N_out]   kept in the cache
 *              out_b     = W @ columns_b + bias            [channels_out, N_out]   one sgemm
 *   backward:  db       += row sums of dout_b              [channels_out]
 *              dW       += dout_b @ columns_b^T            [channels_out, D_in]    one sgemm
 *              dcolumns  = W^T @ dout_b                    [D_in, N_out]   one sgemm, into scratch
 *              dimage_b += col2im(dcolumns)                [channels_in, rows, cols]
 * The loops over images stay on the calling thread; the products thread
 * themselves (kernels/threads.h). */
#include "nn/conv2d.h"
#include "kernels/matmul.h"
#include "util/error.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Convolution                                                               */
/* ------------------------------------------------------------------------ */

int conv2d_rows_out(const Conv2dSpec *s) { return (s->rows + 2 * s->pad - s->K) / s->stride + 1; }

int conv2d_cols_out(const Conv2dSpec *s) { return (s->cols + 2 * s->pad - s->K) / s->stride + 1; }

int conv2d_dim(const Conv2dSpec *s) { return s->channels_in * s->K * s->K; }

int conv2d_check(const Conv2dSpec *s) {
    if (s->channels_in < 1 || s->rows < 1 || s->cols < 1 || s->channels_out < 1)
        return fail("convolution: %d input channels, image %d x %d, %d output channels: expected each to be at "
                    "least 1", s->channels_in, s->rows, s->cols, s->channels_out);
    if (s->K < 1) return fail("convolution: kernel side %d: expected at least 1", s->K);
    if (s->stride < 1) return fail("convolution: stride %d: expected at least 1", s->stride);
    if (s->pad < 0) return fail("convolution: padding %d: expected 0 or more zeros on each side", s->pad);
    /* in long long: rows + 2 pad must not overflow before it is compared */
    const long long padded_rows = s->rows + 2LL * s->pad, padded_cols = s->cols + 2LL * s->pad;
    if (s->K > padded_rows || s->K > padded_cols)
        return fail("convolution: a %d x %d kernel does not fit a %d x %d image padded by %d (%lld x %lld): expected "
                    "a kernel of at most %lld, or more padding", s->K, s->K, s->rows, s->cols, s->pad, padded_rows,
                    padded_cols, padded_rows < padded_cols ? padded_rows : padded_cols);
    if (padded_rows > INT_MAX || padded_cols > INT_MAX)
        return fail("convolution: image %d x %d padded by %d is more than %d pixels on a side", s->rows, s->cols,
                    s->pad, INT_MAX);
    const long long rows_out = (padded_rows - s->K) / s->stride + 1, cols_out = (padded_cols - s->K) / s->stride + 1;
    const long long D_in = (long long)s->channels_in * s->K * s->K;
    /* sgemm takes int sizes and strides: D_in, N_out and the product's other side must each fit */
    if (D_in > INT_MAX || rows_out * cols_out > INT_MAX || (long long)s->rows * s->cols > INT_MAX)
        return fail("convolution: %d input channels with a %d x %d kernel over a %d x %d image (%lld x %lld "
                    "positions): more numbers than a C int counts (%d)", s->channels_in, s->K, s->K, s->rows,
                    s->cols, rows_out, cols_out, INT_MAX);
    return 0;
}

size_t conv2d_cache_floats(const Conv2dSpec *s, int B) { return (size_t)B * conv2d_scratch_floats(s); }

size_t conv2d_scratch_floats(const Conv2dSpec *s) {
    return (size_t)conv2d_dim(s) * conv2d_rows_out(s) * conv2d_cols_out(s);
}

/* image [channels_in, rows, cols] -> columns [D_in, N_out] (written) */
void conv2d_im2col(float *columns, const float *image, const Conv2dSpec *s) {
    const int K = s->K, stride = s->stride, pad = s->pad;
    const int rows_out = conv2d_rows_out(s), cols_out = conv2d_cols_out(s);
    const size_t N_out = (size_t)rows_out * cols_out, plane = (size_t)s->rows * s->cols;
    /* Row (c, i, j) of columns: kernel pixel (i, j) of channel c at every output position, in the
     * output's row-major order; the image pixel it reads is (oy stride - pad + i, ox stride - pad + j). */
    for (int c = 0; c < s->channels_in; c++)
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) {
                float *dst = columns + ((size_t)(c * K + i) * K + j) * N_out;
                for (int oy = 0; oy < rows_out; oy++) {
                    const int y = oy * stride - pad + i;
                    float *d = dst + (size_t)oy * cols_out;
                    if (y < 0 || y >= s->rows) {   /* a row of padding */
                        memset(d, 0, sizeof(float) * (size_t)cols_out);
                        continue;
                    }
                    const float *src = image + c * plane + (size_t)y * s->cols;
                    for (int ox = 0; ox < cols_out; ox++) {
                        const int x = ox * stride - pad + j;
                        d[ox] = (x >= 0 && x < s->cols) ? src[x] : 0.0f;
                    }
                }
            }
}

/* dcolumns [D_in, N_out] -> dimage [channels_in, rows, cols] += (the same walk as im2col) */
void conv2d_col2im_add(float *dimage, const float *dcolumns, const Conv2dSpec *s) {
    const int K = s->K, stride = s->stride, pad = s->pad;
    const int rows_out = conv2d_rows_out(s), cols_out = conv2d_cols_out(s);
    const size_t N_out = (size_t)rows_out * cols_out, plane = (size_t)s->rows * s->cols;
    for (int c = 0; c < s->channels_in; c++)
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) {
                const float *src = dcolumns + ((size_t)(c * K + i) * K + j) * N_out;
                for (int oy = 0; oy < rows_out; oy++) {
                    const int y = oy * stride - pad + i;
                    if (y < 0 || y >= s->rows) continue;   /* padding: nothing to give back */
                    const float *g = src + (size_t)oy * cols_out;
                    float *dst = dimage + c * plane + (size_t)y * s->cols;
                    for (int ox = 0; ox < cols_out; ox++) {
                        const int x = ox * stride - pad + j;
                        if (x >= 0 && x < s->cols) dst[x] += g[ox];
                    }
                }
            }
}

/* images [B, channels_in, rows, cols] -> out [B, channels_out, rows_out, cols_out],
 * cache = columns [B, D_in, N_out] */
void conv2d_forward(float *out, float *cache, const float *images, const float *W, const float *bias,
                    const Conv2dSpec *s, int B) {
    const int D_in = conv2d_dim(s), N_out = conv2d_rows_out(s) * conv2d_cols_out(s), O = s->channels_out;
    const size_t image_size = (size_t)s->channels_in * s->rows * s->cols;
    const size_t columns_size = (size_t)D_in * N_out, out_size = (size_t)O * N_out;
    for (int b = 0; b < B; b++) {
        float *columns = cache + b * columns_size, *out_b = out + b * out_size;
        /* 1. im2col: every K x K square the filters visit becomes a column */
        conv2d_im2col(columns, images + b * image_size, s);
        /* 2. out_b [O, N_out] = W [O, D_in] @ columns [D_in, N_out]: every filter at every position */
        sgemm(0, 0, O, N_out, D_in, 1.0f, W, D_in, columns, N_out, 0.0f, out_b, N_out);
        /* 3. + bias[o] on the whole plane of output channel o */
        if (bias)
            for (int o = 0; o < O; o++) {
                float *plane = out_b + (size_t)o * N_out;
                for (int p = 0; p < N_out; p++) plane[p] += bias[o];
            }
    }
}

/* dout [B, channels_out, rows_out, cols_out] -> dimages +=, dW [channels_out, D_in] +=, db [channels_out] += */
void conv2d_backward(float *dimages, float *dW, float *db, float *scratch, const float *dout, const float *cache,
                     const float *W, const Conv2dSpec *s, int B) {
    const int D_in = conv2d_dim(s), N_out = conv2d_rows_out(s) * conv2d_cols_out(s), O = s->channels_out;
    const size_t image_size = (size_t)s->channels_in * s->rows * s->cols;
    const size_t columns_size = (size_t)D_in * N_out, out_size = (size_t)O * N_out;
    for (int b = 0; b < B; b++) {
        const float *columns = cache + b * columns_size, *dout_b = dout + b * out_size;
        /* 3'. db[o] += the sum of output channel o's plane of gradients, summed in double */
        if (db)
            for (int o = 0; o < O; o++) {
                const float *g = dout_b + (size_t)o * N_out;
                double sum = 0.0;
                for (int p = 0; p < N_out; p++) sum += g[p];
                db[o] += (float)sum;
            }
        /* 2'. dW [O, D_in] += dout_b [O, N_out] @ columns^T [N_out, D_in] */
        if (dW) sgemm(0, 1, O, D_in, N_out, 1.0f, dout_b, N_out, columns, N_out, 1.0f, dW, D_in);
        if (dimages) {
            /* dcolumns [D_in, N_out] = W^T [D_in, O] @ dout_b [O, N_out]; 1'. col2im adds each back to its pixel */
            sgemm(1, 0, D_in, N_out, O, 1.0f, W, D_in, dout_b, N_out, 0.0f, scratch, N_out);
            conv2d_col2im_add(dimages + b * image_size, scratch, s);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Max-pooling                                                               */
/* ------------------------------------------------------------------------ */

int maxpool2d_rows_out(const MaxPool2dSpec *s) { return (s->rows - s->K) / s->stride + 1; }

int maxpool2d_cols_out(const MaxPool2dSpec *s) { return (s->cols - s->K) / s->stride + 1; }

int maxpool2d_check(const MaxPool2dSpec *s) {
    if (s->channels < 1 || s->rows < 1 || s->cols < 1)
        return fail("max-pooling: %d channels, image %d x %d: expected each to be at least 1", s->channels, s->rows,
                    s->cols);
    if (s->K < 1) return fail("max-pooling: window side %d: expected at least 1", s->K);
    if (s->stride < 1) return fail("max-pooling: stride %d: expected at least 1", s->stride);
    if (s->K > s->rows || s->K > s->cols)
        return fail("max-pooling: a %d x %d window does not fit a %d x %d image: expected a window of at most %d",
                    s->K, s->K, s->rows, s->cols, s->rows < s->cols ? s->rows : s->cols);
    if ((long long)s->rows * s->cols > INT_MAX)
        return fail("max-pooling: image %d x %d: more pixels than a C int counts (%d)", s->rows, s->cols, INT_MAX);
    return 0;
}

/* images [B, channels, rows, cols] -> out, argmax [B, channels, rows_out, cols_out] */
void maxpool2d_forward(float *out, int *argmax, const float *images, const MaxPool2dSpec *s, int B) {
    const int K = s->K, stride = s->stride, rows_out = maxpool2d_rows_out(s), cols_out = maxpool2d_cols_out(s);
    const size_t plane = (size_t)s->rows * s->cols, plane_out = (size_t)rows_out * cols_out;
    for (size_t bc = 0; bc < (size_t)B * s->channels; bc++) {   /* every channel of every image */
        const float *x = images + bc * plane;
        float *o = out + bc * plane_out;
        int *a = argmax + bc * plane_out;
        for (int oy = 0; oy < rows_out; oy++)
            for (int ox = 0; ox < cols_out; ox++) {
                const int top = oy * stride, left = ox * stride;
                int best = top * s->cols + left;   /* the window's first pixel */
                for (int i = 0; i < K; i++)
                    for (int j = 0; j < K; j++) {
                        const int at = (top + i) * s->cols + left + j;
                        /* strictly larger: a tie keeps the first; a NaN beats any number, not a NaN before it */
                        if (x[at] > x[best] || (isnan(x[at]) && !isnan(x[best]))) best = at;
                    }
                o[(size_t)oy * cols_out + ox] = x[best];
                a[(size_t)oy * cols_out + ox] = best;
            }
    }
}

/* dout [B, channels, rows_out, cols_out] -> dimages [B, channels, rows, cols] += at the argmax pixels */
void maxpool2d_backward(float *dimages, const float *dout, const int *argmax, const MaxPool2dSpec *s, int B) {
    const size_t plane = (size_t)s->rows * s->cols;
    const size_t plane_out = (size_t)maxpool2d_rows_out(s) * maxpool2d_cols_out(s);
    for (size_t bc = 0; bc < (size_t)B * s->channels; bc++) {
        float *dx = dimages + bc * plane;
        const float *g = dout + bc * plane_out;
        const int *a = argmax + bc * plane_out;
        for (size_t p = 0; p < plane_out; p++) dx[a[p]] += g[p];
    }
}
