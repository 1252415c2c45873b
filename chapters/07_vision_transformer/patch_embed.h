/* patch_embed.h - chapter 07: an image as a sequence of patch vectors.
 *
 * A transformer reads a sequence of N vectors of width D. The Vision
 * Transformer makes one from an image by cutting it into non-overlapping
 * P x P squares (patches), flattening each into a vector of D_in = channels P P
 * numbers, and mapping that to D with ONE linear map shared by every patch:
 *
 *   image [channels, rows, cols]  ->  N = (rows / P) (cols / P) patches
 *   patch vector p_n [D_in]          (pixel (c, i, j) of the patch at index (c P + i) P + j)
 *   x_n = p_n W + b                  W [D_in, D], b [D]:  X [N, D]
 *
 * For a 28 x 28 grey image: P = 14 gives 4 patches of 196 pixels, P = 7
 * gives 16 of 49, P = 4 gives 49 of 16.
 *
 * That is exactly a convolution with D filters of size P x P whose STRIDE
 * equals its kernel size: the filter never overlaps itself, so each output
 * position sees one patch. The fast way to compute a convolution is the one
 * used here too: "im2col" copies every patch into a row of a matrix
 * (patches [B N, D_in]), and then one matrix product through the project's
 * sgemm does all the filters at every position of every image:
 *
 *   out [B N, D] = patches [B N, D_in] @ W [D_in, D] + b
 *
 * In the ViT each pixel lands in exactly one row, so im2col is only a
 * reordering, and its backward, col2im, puts each gradient back in place.
 *
 * OVERLAPPING patches (--kernel K > P): the same convolution with a kernel
 * larger than its stride. Patch n still starts every P pixels, but reads a
 * K x K square centred on its P x P cell, (K - P) / 2 pixels beyond it on
 * each side (zeros past the image's edge): N does not change, D_in grows to
 * channels K K, and each token starts out seeing its neighbours' edges.
 * im2col now copies a pixel into several rows, and col2im ADDS each
 * copy's gradient back. This is the convolutional token embedding of
 * later vision transformers (CvT, PVTv2); P = 4 and K = 8 read an 8 x 8
 * square around each 4 x 4 patch.
 *
 * The layout matches PyTorch, so weights can be compared:
 *   conv = nn.Conv2d(channels, D, kernel_size=K, stride=P, padding=(K - P) / 2)
 *   W = conv.weight.reshape(D, D_in).T         (W[(c K + i) K + j, d] = weight[d, c, i, j])
 *   b = conv.bias
 *   out = conv(images).flatten(2).transpose(1, 2)   [B, N, D]
 * and patch n is the one at row n / (cols / P), column n % (cols / P) of the
 * grid of patches (row-major, left to right then top to bottom).
 *
 * Letters as in common/README.md: B images, N patches (the sequence length),
 * D model width, D_in = channels K K. "channels", "rows" and "cols" are
 * spelled out, because C means classes and H heads everywhere else.
 *
 * Conventions as in chapters 05-06: outputs first, no allocation inside
 * forward or backward (the caller gives buffers sized by the *_floats()
 * functions), backward ACCUMULATES (+=) into the gradients and skips NULL ones. */
#ifndef PATCH_EMBED_H
#define PATCH_EMBED_H
#include <stddef.h>
#include "util/rng.h"

typedef struct {
    int channels;     /* 1 for grey images (Fashion-MNIST), 3 for RGB */
    int rows, cols;   /* image height and width in pixels: 28, 28 */
    int P;            /* patch side: P x P pixels; divides rows and cols */
    int D;            /* model width: every patch becomes D numbers */
    int K;            /* kernel side: 0 (or P) for the ViT's non-overlapping patches; K > P for
                         overlapping ones, K - P even, padded by (K - P) / 2 zeros on each side */
} PatchEmbedSpec;

/* 0 when the sizes make sense (all >= 1, P divides rows and cols, K = 0 or
 * K >= P with K - P even); otherwise -1 with fail() naming the value and
 * what fits. */
int patch_embed_check(const PatchEmbedSpec *s);

/* The kernel side K (P when s->K is 0) and the zeros around the image,
 * (K - P) / 2 on each side. */
int patch_embed_kernel(const PatchEmbedSpec *s);
int patch_embed_padding(const PatchEmbedSpec *s);

/* N = (rows / P) (cols / P): patches per image, the length of the sequence. */
int patch_embed_count(const PatchEmbedSpec *s);
/* D_in = channels K K: the numbers in one flattened patch (channels P P
 * without overlap). */
int patch_embed_dim(const PatchEmbedSpec *s);

/* W [D_in, D] Xavier-uniform (as the project's other linear maps), b [D] = 0. */
void patch_embed_init(const PatchEmbedSpec *s, float *W, float *b, Rng *rng);

/* The cache forward fills and backward reads: the patches [B N, D_in]
 * (dW = patches^T dout needs them). */
size_t patch_embed_cache_floats(const PatchEmbedSpec *s, int B);
/* Scratch for backward: d patches [B N, D_in], used only when dimages is asked for. */
size_t patch_embed_scratch_floats(const PatchEmbedSpec *s, int B);

/* im2col: images [B, channels, rows, cols] -> patches [B N, D_in] (written).
 * Row b N + n holds patch n of image b, pixels in (c, i, j) order, i and j
 * counting from the kernel's first row and column (zeros outside the image). */
void patch_embed_im2col(float *patches, const float *images, const PatchEmbedSpec *s, int B);
/* col2im, its backward: dpatches [B N, D_in] -> dimages [B, channels, rows, cols] +=. */
void patch_embed_col2im_add(float *dimages, const float *dpatches, const PatchEmbedSpec *s, int B);

/* images [B, channels, rows, cols] -> out [B, N, D] (written), cache
 * [patch_embed_cache_floats] (written): out = im2col(images) W + b.
 * b may be NULL (no bias). */
void patch_embed_forward(float *out, float *cache, const float *images, const float *W, const float *b,
                         const PatchEmbedSpec *s, int B);

/* dout [B, N, D] -> dW [D_in, D] +=, db [D] +=, dimages [B, channels, rows, cols] +=.
 * Each of dW, db, dimages may be NULL (skipped); scratch
 * [patch_embed_scratch_floats] is needed only with dimages (may be NULL
 * otherwise). cache and W are what forward used. The images themselves are
 * not needed: the cache holds their patches. */
void patch_embed_backward(float *dimages, float *dW, float *db, float *scratch, const float *dout,
                          const float *cache, const float *W, const PatchEmbedSpec *s, int B);

#endif
