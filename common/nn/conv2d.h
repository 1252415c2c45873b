/* conv2d.h - 2-D convolution and max-pooling over images, as forward/backward
 * pairs: the layers of a convolutional network (CNN).
 *
 * Images are laid out as chapter 07's (patch_embed.h) and PyTorch's:
 * [B, channels, rows, cols], row-major, so pixel (b, c, y, x) is at
 * ((b channels + c) rows + y) cols + x. "channels", "rows" and "cols" are
 * spelled out, because C means classes and H heads everywhere else
 * (common/README.md); K is the kernel side, as in patch_embed.h.
 *
 * CONVOLUTION (PyTorch F.conv2d(images, W, bias, stride, padding), cross-
 * correlation as every deep-learning library computes it). channels_out
 * filters, each K x K over every input channel, slide over the image padded
 * with pad zeros on each side, stride pixels at a time:
 *
 *   rows_out = (rows + 2 pad - K) / stride + 1      (rounded down; cols_out alike)
 *   out[b, o, oy, ox] = bias[o] + sum_{c,i,j} W[o, c, i, j] images[b, c, oy stride - pad + i, ox stride - pad + j]
 *
 * (a pixel outside the image is 0). It is computed as the ViT's patch
 * embedding is: im2col copies, for one image, every K x K square the filter
 * visits into a COLUMN of a matrix, and one product through the project's
 * sgemm applies every filter at every position:
 *
 *   columns [D_in, N_out]    D_in = channels_in K K, N_out = rows_out cols_out positions;
 *                            row (c K + i) K + j, column oy cols_out + ox
 *   out_b [channels_out, N_out] = W [channels_out, D_in] @ columns [D_in, N_out] + bias   (image b)
 *
 * The weight is stored as PyTorch's conv.weight, W [channels_out, channels_in,
 * K, K] = [channels_out, D_in] row-major, NOT transposed as the project's
 * linear layers store theirs ([in, out]): with the output's channels first,
 * each output channel's plane is one row of W times the column matrix, a
 * plain sgemm with neither operand transposed, and out_b comes out already
 * in [channels_out, rows_out, cols_out] order. (patch_embed.h's W [D_in, D]
 * is the transpose of this one, for its [B, N, D] tokens.)
 *
 * MAX-POOLING (PyTorch F.max_pool2d(images, K, stride), no padding,
 * dilation 1, rounding down): each K x K window, stride pixels apart, of
 * each channel keeps its largest pixel,
 *
 *   rows_out = (rows - K) / stride + 1,   out[b, c, oy, ox] = max_{i, j} image[b, c, oy stride + i, ox stride + j]
 *
 * and the index of that pixel in its channel's plane, y cols + x (PyTorch's
 * return_indices), for backward: the gradient goes to that one pixel. TIES
 * go to the FIRST of the equal pixels in the window's row-major order (top
 * row first, left to right), as PyTorch's CPU kernel does. A NaN counts as
 * larger than every number, so it propagates; of several NaNs the first is
 * kept (PyTorch keeps the last: the same output, another index).
 *
 * Conventions (layers.h): flat row-major float arrays, outputs first, nothing
 * allocated inside forward or backward (the caller gives the cache and the
 * scratch, sized by the *_floats() functions); forward OVERWRITES its
 * outputs and cache; backward ACCUMULATES (+=) into every gradient it
 * writes (dimages, dW, db) and skips a NULL one; callers zero first. Sizes
 * are checked once, by conv2d_check() / maxpool2d_check(), before the
 * buffers are allocated (the project's error convention: -1 and fail()
 * naming the value); forward and backward trust a checked spec. */
#ifndef CONV2D_H
#define CONV2D_H
#include <stddef.h>

typedef struct {
    int channels_in;    /* input channels: 1 for grey images, 3 for RGB */
    int rows, cols;     /* input height and width in pixels */
    int channels_out;   /* number of filters: the output's channels */
    int K;              /* kernel side: K x K pixels */
    int stride;         /* pixels between neighbouring output positions, >= 1 */
    int pad;            /* zeros added on each side of the image, >= 0 */
} Conv2dSpec;

/* 0 when the sizes make sense: channels_in, rows, cols, channels_out, K and
 * stride at least 1, pad at least 0, the kernel fitting the padded image
 * (K <= rows + 2 pad and K <= cols + 2 pad: rows_out, cols_out >= 1), and
 * every count below a C int. Otherwise -1 with fail() naming the value and
 * what would fit. */
int conv2d_check(const Conv2dSpec *s);

/* rows_out = (rows + 2 pad - K) / stride + 1 and cols_out alike. */
int conv2d_rows_out(const Conv2dSpec *s);
int conv2d_cols_out(const Conv2dSpec *s);
/* D_in = channels_in K K: the numbers one filter reads at one position. */
int conv2d_dim(const Conv2dSpec *s);

/* The cache forward fills and backward reads: every image's column matrix,
 * [B, D_in, N_out] (dW = dout columns^T needs them). */
size_t conv2d_cache_floats(const Conv2dSpec *s, int B);
/* Scratch for backward: one image's dcolumns [D_in, N_out], used only when
 * dimages is asked for. */
size_t conv2d_scratch_floats(const Conv2dSpec *s);

/* im2col of ONE image: image [channels_in, rows, cols] -> columns [D_in, N_out]
 * (written): columns[(c K + i) K + j, oy cols_out + ox] = image[c, oy stride -
 * pad + i, ox stride - pad + j], 0 outside the image. */
void conv2d_im2col(float *columns, const float *image, const Conv2dSpec *s);
/* col2im, its backward: dcolumns [D_in, N_out] -> dimage [channels_in, rows,
 * cols] +=; a pixel read at several positions gets the sum of their
 * gradients, the padding's zeros get nothing. */
void conv2d_col2im_add(float *dimage, const float *dcolumns, const Conv2dSpec *s);

/* images [B, channels_in, rows, cols], W [channels_out, channels_in, K, K],
 * bias [channels_out] or NULL (none)
 *   -> out [B, channels_out, rows_out, cols_out] (written),
 *      cache [conv2d_cache_floats(s, B)] (written: the column matrices). */
void conv2d_forward(float *out, float *cache, const float *images, const float *W, const float *bias,
                    const Conv2dSpec *s, int B);

/* dout [B, channels_out, rows_out, cols_out]
 *   -> dimages [B, channels_in, rows, cols] +=  (dcolumns = W^T dout_b, then col2im),
 *      dW [channels_out, channels_in, K, K] +=   (sum over images of dout_b columns_b^T),
 *      db [channels_out] +=                      (sum of dout over images and positions).
 * Each of dimages, dW, db may be NULL (skipped); scratch
 * [conv2d_scratch_floats(s)] is overwritten, and needed only with dimages
 * (may be NULL otherwise). cache and W are what forward used; the images
 * themselves are not needed, the cache holds their column matrices. */
void conv2d_backward(float *dimages, float *dW, float *db, float *scratch, const float *dout, const float *cache,
                     const float *W, const Conv2dSpec *s, int B);

typedef struct {
    int channels;       /* channels: pooled one by one, their number unchanged */
    int rows, cols;     /* input height and width in pixels */
    int K;              /* window side: K x K pixels */
    int stride;         /* pixels between neighbouring windows (K: windows that do not overlap) */
} MaxPool2dSpec;

/* 0 when channels, rows, cols, K and stride are at least 1 and the window
 * fits the image (K <= rows, K <= cols); otherwise -1 with fail() naming the
 * value and what would fit. */
int maxpool2d_check(const MaxPool2dSpec *s);

/* rows_out = (rows - K) / stride + 1 and cols_out alike. */
int maxpool2d_rows_out(const MaxPool2dSpec *s);
int maxpool2d_cols_out(const MaxPool2dSpec *s);

/* images [B, channels, rows, cols]
 *   -> out [B, channels, rows_out, cols_out] (written): each window's largest pixel,
 *      argmax [B, channels, rows_out, cols_out] (written): its index y cols + x in
 *      its channel's plane (ties: the first in row-major order; the header says more). */
void maxpool2d_forward(float *out, int *argmax, const float *images, const MaxPool2dSpec *s, int B);

/* dout [B, channels, rows_out, cols_out], argmax from forward
 *   -> dimages [B, channels, rows, cols] += : each output's gradient added to the
 *      pixel it came from (a pixel that is the largest of several overlapping
 *      windows gets the sum). */
void maxpool2d_backward(float *dimages, const float *dout, const int *argmax, const MaxPool2dSpec *s, int B);

#endif
