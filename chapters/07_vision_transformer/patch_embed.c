/* patch_embed.c - chapter 07: the patch embedding as a strided convolution,
 * im2col + one sgemm (patch_embed.h explains the idea and the layout).
 *
 * Forward:   patches = im2col(images)            [B N, D_in]   copies, kept in the cache
 *            out     = patches @ W + b           [B N, D]      one sgemm
 * Backward:  db     += column sums of dout       [D]
 *            dW     += patches^T @ dout          [D_in, D]     one sgemm
 *            dpatches = dout @ W^T               [B N, D_in]   one sgemm, into scratch
 *            dimages += col2im(dpatches)         [B, channels, rows, cols] */
#include "07_vision_transformer/patch_embed.h"
#include "kernels/matmul.h"
#include "nn/params.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

int patch_embed_check(const PatchEmbedSpec *s) {
    if (s->channels < 1 || s->rows < 1 || s->cols < 1 || s->D < 1)
        return fail("patch embedding: channels %d, image %d x %d, width D %d: expected each to be at least 1",
                    s->channels, s->rows, s->cols, s->D);
    if (s->P >= 1 && s->rows % s->P == 0 && s->cols % s->P == 0) {
        if (s->K == 0 || (s->K >= s->P && (s->K - s->P) % 2 == 0 && s->K <= s->P + s->rows && s->K <= s->P + s->cols))
            return 0;
        return fail("kernel %d with patch %d: expected 0 (no overlap) or a kernel of %d, %d, %d, ... (the patch side "
                    "plus an even number of pixels, at most the patch plus the image)", s->K, s->P, s->P, s->P + 2,
                    s->P + 4);
    }
    /* list the patch sizes that would fit: the common divisors of rows and cols */
    char fits[256] = "";
    size_t used = 0;
    for (int p = 1; p <= s->rows && p <= s->cols && used < sizeof fits - 16; p++)
        if (s->rows % p == 0 && s->cols % p == 0)
            used += (size_t)snprintf(fits + used, sizeof fits - used, "%s%d", used ? ", " : "", p);
    return fail("patch size %d does not cut a %d x %d image into whole patches: expected one of %s", s->P, s->rows,
                s->cols, fits);
}

int patch_embed_count(const PatchEmbedSpec *s) { return (s->rows / s->P) * (s->cols / s->P); }

int patch_embed_kernel(const PatchEmbedSpec *s) { return s->K ? s->K : s->P; }

int patch_embed_padding(const PatchEmbedSpec *s) { return (patch_embed_kernel(s) - s->P) / 2; }

int patch_embed_dim(const PatchEmbedSpec *s) { return s->channels * patch_embed_kernel(s) * patch_embed_kernel(s); }

void patch_embed_init(const PatchEmbedSpec *s, float *W, float *b, Rng *rng) {
    init_xavier(W, patch_embed_dim(s), s->D, rng);
    if (b) init_constant(b, (size_t)s->D, 0.0f);
}

size_t patch_embed_cache_floats(const PatchEmbedSpec *s, int B) {
    return (size_t)B * patch_embed_count(s) * patch_embed_dim(s);
}

size_t patch_embed_scratch_floats(const PatchEmbedSpec *s, int B) {
    return (size_t)B * patch_embed_count(s) * patch_embed_dim(s);
}

/* images [B, channels, rows, cols] -> patches [B N, D_in] (written) */
void patch_embed_im2col(float *patches, const float *images, const PatchEmbedSpec *s, int B) {
    const int P = s->P, K = patch_embed_kernel(s), pad = patch_embed_padding(s);
    const int per_row = s->cols / P, N = patch_embed_count(s), D_in = patch_embed_dim(s);
    const size_t image_size = (size_t)s->channels * s->rows * s->cols, plane = (size_t)s->rows * s->cols;
    /* The K x K square of patch n in every channel becomes one row (K = P: the patch itself),
     * zeros where the square hangs over the image's edge. */
    /* Exercise 07.patch_embedding (5 points): im2col, every patch's square of every channel into one row. */
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            /* the kernel's first pixel: the patch's, moved up and left by the padding */
            const int top = (n / per_row) * P - pad, left = (n % per_row) * P - pad;
            float *p = patches + ((size_t)b * N + n) * D_in;
            for (int c = 0; c < s->channels; c++)
                for (int i = 0; i < K; i++) {
                    const int y = top + i;
                    float *dst = p + (c * K + i) * K;
                    if (y < 0 || y >= s->rows) {   /* a row of padding */
                        memset(dst, 0, sizeof(float) * K);
                        continue;
                    }
                    const float *src = images + b * image_size + c * plane + (size_t)y * s->cols;
                    for (int j = 0; j < K; j++) {
                        const int x = left + j;
                        dst[j] = (x >= 0 && x < s->cols) ? src[x] : 0.0f;
                    }
                }
        }
    /* End of exercise 07.patch_embedding. */
}

/* dpatches [B N, D_in] -> dimages [B, channels, rows, cols] += (the same walk as im2col) */
void patch_embed_col2im_add(float *dimages, const float *dpatches, const PatchEmbedSpec *s, int B) {
    const int P = s->P, K = patch_embed_kernel(s), pad = patch_embed_padding(s);
    const int per_row = s->cols / P, N = patch_embed_count(s), D_in = patch_embed_dim(s);
    const size_t image_size = (size_t)s->channels * s->rows * s->cols, plane = (size_t)s->rows * s->cols;
    /* A pixel in several overlapping squares gets the sum of their gradients; the padding's zeros get nothing. */
    /* Exercise 07.patch_embedding, continued: col2im, each number of dpatches added back to its pixel. */
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            const int top = (n / per_row) * P - pad, left = (n % per_row) * P - pad;
            const float *p = dpatches + ((size_t)b * N + n) * D_in;
            for (int c = 0; c < s->channels; c++)
                for (int i = 0; i < K; i++) {
                    const int y = top + i;
                    if (y < 0 || y >= s->rows) continue;
                    float *dst = dimages + b * image_size + c * plane + (size_t)y * s->cols;
                    for (int j = 0; j < K; j++) {
                        const int x = left + j;
                        if (x >= 0 && x < s->cols) dst[x] += p[(c * K + i) * K + j];
                    }
                }
        }
    /* End of exercise 07.patch_embedding. */
}

/* images [B, channels, rows, cols] -> out [B, N, D], cache = patches [B N, D_in] */
void patch_embed_forward(float *out, float *cache, const float *images, const float *W, const float *b,
                         const PatchEmbedSpec *s, int B) {
    const int R = B * patch_embed_count(s), D_in = patch_embed_dim(s), D = s->D;
    float *patches = cache;
    /* 1. im2col: every patch of every image becomes a row */
    patch_embed_im2col(patches, images, s, B);
    /* 2. out [R, D] = patches [R, D_in] @ W [D_in, D]: all filters at all positions, one product */
    sgemm(0, 0, R, D, D_in, 1.0f, patches, D_in, W, D, 0.0f, out, D);
    /* 3. + b on every row */
    if (b)
        for (int r = 0; r < R; r++)
            for (int d = 0; d < D; d++) out[(size_t)r * D + d] += b[d];
}

/* dout [B, N, D] -> dW [D_in, D] +=, db [D] +=, dimages [B, channels, rows, cols] += */
void patch_embed_backward(float *dimages, float *dW, float *db, float *scratch, const float *dout,
                          const float *cache, const float *W, const PatchEmbedSpec *s, int B) {
    const int R = B * patch_embed_count(s), D_in = patch_embed_dim(s), D = s->D;
    const float *patches = cache;
    /* 3'. db [D] += the sum of dout's rows */
    if (db)
        for (int r = 0; r < R; r++)
            for (int d = 0; d < D; d++) db[d] += dout[(size_t)r * D + d];
    /* 2'. dW [D_in, D] += patches^T [D_in, R] @ dout [R, D] */
    if (dW) sgemm(1, 0, D_in, D, R, 1.0f, patches, D_in, dout, D, 1.0f, dW, D);
    if (dimages) {
        /*  dpatches [R, D_in] = dout [R, D] @ W^T [D, D_in], then 1'. col2im puts each back in its image */
        float *dpatches = scratch;
        sgemm(0, 1, R, D_in, D, 1.0f, dout, D, W, D, 0.0f, dpatches, D_in);
        patch_embed_col2im_add(dimages, dpatches, s, B);
    }
}
