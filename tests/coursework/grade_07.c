/* grade_07.c - the coursework grader of chapter 07 (see grade.h): the patch
 * embedding (im2col and col2im), the 2-D sinusoidal positions, the pooling.
 *
 * The patch embedding against PyTorch's conv2d with stride P, kernel K = P
 * and, for overlapping patches, K > P with padding (tests/golden/patch_embed.bin);
 * the positions against chapter 04's 1-D sinusoids, which they are made of;
 * the pooling against its definition. */
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "04_self_attention/self_attention.h"
#include "07_vision_transformer/patch_embed.h"
#include "07_vision_transformer/vit.h"

/* ------------------------------------------------------------ 07.patch_embedding */

/* 1: the forward's out and cache pre-filled with garbage (im2col writes every
 * number of every row, the padding's zeros too, over whatever was there) */
static int patch_garbage;

static int patch_case(const GoldCase *c, int with_backward) {
    const int *config = grade_i32(c, "config");   /* channels, rows, cols, P, K */
    const GoldTensor *images = grade_tensor(c, "images"), *W = grade_tensor(c, "W");
    const PatchEmbedSpec s = {config[0], config[1], config[2], config[3], W->dims[1], config[4]};
    const int B = images->dims[0], N = patch_embed_count(&s), D_in = patch_embed_dim(&s);
    float *out = grade_floats((size_t)B * N * s.D), *cache = grade_floats(patch_embed_cache_floats(&s, B));
    if (patch_garbage) {
        grade_fill_garbage(out, (size_t)B * N * s.D);
        grade_fill_garbage(cache, patch_embed_cache_floats(&s, B));
    }
    patch_embed_forward(out, cache, images->data, W->data, grade_f32(c, "b"), &s, B);
    if (grade_golden_close(c, "out", out, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    if (!with_backward) return 0;
    float *dimages = grade_floats(images->count), *dW = grade_floats((size_t)D_in * s.D), *db = grade_floats((size_t)s.D);
    float *scratch = grade_floats(patch_embed_scratch_floats(&s, B));
    for (int times = 1; times <= 2; times++) {
        patch_embed_backward(dimages, dW, db, scratch, grade_f32(c, "dout"), cache, W->data, &s, B);
        if (grade_golden_close(c, "dimages", dimages, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW", dW, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
            return -1;
    }
    return 0;
}

static int patch_forward_case(const GoldCase *c) { return patch_case(c, 0); }
static int patch_backward_case(const GoldCase *c) { return patch_case(c, 1); }
static int patch_forward(void) { return grade_golden_cases("patch_embed", NULL, patch_forward_case); }
static int patch_backward(void) { return grade_golden_cases("patch_embed", NULL, patch_backward_case); }
static int patch_forward_garbage(void) {
    patch_garbage = 1;
    const int result = grade_golden_cases("patch_embed", NULL, patch_backward_case);
    patch_garbage = 0;
    return result;
}

/* ------------------------------------------------------------ 07.positions_2d */

enum { GRID_ROWS = 3, GRID_COLS = 4, POS_D = 8 };

static int positions_with(int has_cls) {
    const int T = GRID_ROWS * GRID_COLS + has_cls, half = POS_D / 2;
    float *P = grade_floats((size_t)T * POS_D), *want = grade_floats((size_t)T * POS_D);
    float rows[GRID_ROWS * POS_D / 2], cols[GRID_COLS * POS_D / 2];
    positional_encoding_sinusoidal(rows, GRID_ROWS, half);   /* chapter 04's, of width D/2 */
    positional_encoding_sinusoidal(cols, GRID_COLS, half);
    for (int r = 0; r < GRID_ROWS; r++)
        for (int c = 0; c < GRID_COLS; c++)
            for (int d = 0; d < POS_D; d++)
                want[(size_t)(has_cls + r * GRID_COLS + c) * POS_D + d] = d < half ? rows[r * half + d] : cols[c * half + d - half];
    grade_fill(P, (size_t)T * POS_D, 1.0f, 3);   /* what was there must go */
    vit_positions_2d(P, GRID_ROWS, GRID_COLS, POS_D, has_cls);
    return grade_close(has_cls ? "P with a class token (row 0)" : "P", "[row r's sinusoids ; column c's sinusoids]", P,
                       want, 2, (int[]){T, POS_D}, 1e-6, 1e-7);
}

static int positions_plain(void) { return positions_with(0); }
static int positions_cls(void) { return positions_with(1); }

/* ------------------------------------------------------------ 07.pooling */

enum { POOL_B = 2, POOL_T = 5, POOL_D = 3 };

static int pool_forward_with(VitPool pool) {
    float Z[POOL_B * POOL_T * POOL_D], pooled[POOL_B * POOL_D], want[POOL_B * POOL_D];
    grade_fill(Z, POOL_B * POOL_T * POOL_D, 1.0f, 4);
    grade_fill(pooled, POOL_B * POOL_D, 1.0f, 5);   /* what was there must go */
    for (int b = 0; b < POOL_B; b++)
        for (int d = 0; d < POOL_D; d++) {
            double sum = 0.0;
            for (int t = 0; t < POOL_T; t++) sum += Z[(b * POOL_T + t) * POOL_D + d];
            want[b * POOL_D + d] = pool == VIT_POOL_CLS ? Z[b * POOL_T * POOL_D + d] : (float)(sum / POOL_T);
        }
    vit_pool_forward(pooled, Z, pool, POOL_B, POOL_T, POOL_D);
    return grade_close(pool == VIT_POOL_CLS ? "pooled (cls)" : "pooled (mean)",
                       pool == VIT_POOL_CLS ? "the class token's output Z[b, 0]" : "the mean of Z[b, t] over t", pooled,
                       want, 2, (int[]){POOL_B, POOL_D}, 1e-6, 1e-7);
}

/* dZ starts non-zero: backward adds (+=). */
static int pool_backward_with(VitPool pool) {
    float dpooled[POOL_B * POOL_D], dZ[POOL_B * POOL_T * POOL_D], want[POOL_B * POOL_T * POOL_D];
    grade_fill(dpooled, POOL_B * POOL_D, 1.0f, 6);
    grade_fill(dZ, POOL_B * POOL_T * POOL_D, 1.0f, 7);
    memcpy(want, dZ, sizeof want);
    for (int b = 0; b < POOL_B; b++)
        for (int t = 0; t < POOL_T; t++)
            for (int d = 0; d < POOL_D; d++) {
                const float g = dpooled[b * POOL_D + d];
                want[(b * POOL_T + t) * POOL_D + d] += pool == VIT_POOL_CLS ? (t == 0 ? g : 0.0f) : g / POOL_T;
            }
    vit_pool_backward(dZ, dpooled, pool, POOL_B, POOL_T, POOL_D);
    return grade_close(pool == VIT_POOL_CLS ? "dZ (cls)" : "dZ (mean)", "dZ + the gradient of the pooled outputs", dZ,
                       want, 3, (int[]){POOL_B, POOL_T, POOL_D}, 1e-6, 1e-7);
}

static int pool_cls(void) { return pool_forward_with(VIT_POOL_CLS); }
static int pool_mean(void) { return pool_forward_with(VIT_POOL_MEAN); }
static int pool_cls_backward(void) { return pool_backward_with(VIT_POOL_CLS); }
static int pool_mean_backward(void) { return pool_backward_with(VIT_POOL_MEAN); }

/* ------------------------------------------------------------ hidden checks
 *
 * make grade-submissions only (grade.h): shapes and inputs drawn from the
 * teacher's seed, outputs compared with the reference solution's. */

/* The patch embedding of drawn images, patches (overlapping or not) and D:
 * out, then dimages, dW, db of a drawn dout. */
static int hidden_patches(void) {
    const int P = grade_draw(1, 3), overlap = grade_draw(0, 1);
    const PatchEmbedSpec s = {grade_draw(1, 3), P * grade_draw(1, 4), P * grade_draw(1, 4), P, grade_draw(1, 4),
                              overlap ? P + 2 * grade_draw(1, 2) : 0};
    const int B = grade_draw(1, 2), N = patch_embed_count(&s), D_in = patch_embed_dim(&s);
    const size_t n_images = (size_t)B * s.channels * s.rows * s.cols;
    float *images = grade_floats(n_images), *W = grade_floats((size_t)D_in * s.D), *b = grade_floats((size_t)s.D);
    float *dout = grade_floats((size_t)B * N * s.D);
    grade_draw_fill(images, n_images, 1.0f);
    grade_draw_fill(W, (size_t)D_in * s.D, 0.5f);
    grade_draw_fill(b, (size_t)s.D, 0.5f);
    grade_draw_fill(dout, (size_t)B * N * s.D, 1.0f);
    float *out = grade_floats((size_t)B * N * s.D), *cache = grade_floats(patch_embed_cache_floats(&s, B));
    patch_embed_forward(out, cache, images, W, b, &s, B);
    if (grade_reference("out", out, 3, (int[]){B, N, s.D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    float *dimages = grade_floats(n_images), *dW = grade_floats((size_t)D_in * s.D), *db = grade_floats((size_t)s.D);
    float *scratch = grade_floats(patch_embed_scratch_floats(&s, B));
    grade_draw_fill(dimages, n_images, 1.0f);   /* backward adds to what is there */
    grade_draw_fill(dW, (size_t)D_in * s.D, 1.0f);
    grade_draw_fill(db, (size_t)s.D, 1.0f);
    patch_embed_backward(dimages, dW, db, scratch, dout, cache, W, &s, B);
    if (grade_reference("dimages", dimages, 4, (int[]){B, s.channels, s.rows, s.cols}, GRADE_RTOL_GRAD,
                        GRADE_ATOL_GRAD) ||
        grade_reference("dW", dW, 2, (int[]){D_in, s.D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    return grade_reference("db", db, 1, (int[]){s.D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

static int hidden_positions(void) {
    const int rows = grade_draw(2, 6), cols = grade_draw(2, 6), D = 2 * grade_draw(1, 7), has_cls = grade_draw(0, 1);
    const int T = rows * cols + has_cls;
    float *P = grade_floats((size_t)T * D);
    grade_draw_fill(P, (size_t)T * D, 1.0f);   /* what was there must go */
    vit_positions_2d(P, rows, cols, D, has_cls);
    return grade_reference("P", P, 2, (int[]){T, D}, GRADE_RTOL_OUT, GRADE_ATOL_OUT);
}

static int hidden_pool(VitPool pool) {
    const int B = grade_draw(1, 3), T = grade_draw(1, 8), D = grade_draw(1, 5);
    float *Z = grade_floats((size_t)B * T * D), *pooled = grade_floats((size_t)B * D);
    float *dpooled = grade_floats((size_t)B * D), *dZ = grade_floats((size_t)B * T * D);
    grade_draw_fill(Z, (size_t)B * T * D, 1.0f);
    grade_draw_fill(pooled, (size_t)B * D, 1.0f);
    grade_draw_fill(dpooled, (size_t)B * D, 1.0f);
    grade_draw_fill(dZ, (size_t)B * T * D, 1.0f);   /* backward adds */
    vit_pool_forward(pooled, Z, pool, B, T, D);
    if (grade_reference("pooled", pooled, 2, (int[]){B, D}, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    vit_pool_backward(dZ, dpooled, pool, B, T, D);
    return grade_reference("dZ", dZ, 3, (int[]){B, T, D}, GRADE_RTOL_OUT, GRADE_ATOL_OUT);
}

static int hidden_pool_cls(void) { return hidden_pool(VIT_POOL_CLS); }
static int hidden_pool_mean(void) { return hidden_pool(VIT_POOL_MEAN); }

/* ------------------------------------------------------------ end to end */

/* A ViT on 8 x 8 images of 4 patches, trained GRADE_TRAIN_STEPS steps on drawn images
 * (grade.h): each step's loss the solution's. */
static int training_with(VitPool pool, VitPos pos, const char *what) {
    const VitConfig cfg = {.patch = {.channels = 1, .rows = 8, .cols = 8, .P = 4, .D = 16}, .layers = 2,
                           .heads = 2, .ff = 32, .pool = pool, .pos = pos, .classes = 4};
    Classifier m;
    if (vit_build(&m, &cfg, GRADE_TRAIN_B, 3) < 0) return grade_fail("vit_build failed");
    const int rc = grade_classifier_training(what, &m, 64, 0);
    m.destroy(m.self);
    return rc;
}
static int training(void) { return training_with(VIT_POOL_CLS, VIT_POS_LEARNED, "07 ViT"); }
static int training_pools(void) {
    return training_with(VIT_POOL_MEAN, VIT_POS_LEARNED, "07 ViT, mean pooling") ||
           training_with(VIT_POOL_ATTENTION, VIT_POS_LEARNED, "07 ViT, attention pooling");
}
static int training_2d(void) { return training_with(VIT_POOL_CLS, VIT_POS_SINUSOIDAL_2D, "07 ViT, 2-D positions"); }

static const GradeCheck HIDDEN_PATCH_EMBEDDING[] = {
    {"out, dimages, dW, db on drawn images and patches", hidden_patches},
    {"the same on other drawn images and patches", hidden_patches},
    {"end to end: 40 training steps of a ViT, each loss the solution's", training},
};
static const GradeCheck HIDDEN_POSITIONS_2D[] = {
    {"P on a drawn grid and D", hidden_positions},
    {"end to end: 40 training steps of a ViT with 2-D sinusoidal positions, each loss the solution's", training_2d},
};
static const GradeCheck HIDDEN_POOLING[] = {
    {"cls pooling and its backward on a drawn shape", hidden_pool_cls},
    {"mean pooling and its backward on a drawn shape", hidden_pool_mean},
    {"end to end: 40 training steps of a ViT with mean, then attention pooling, each loss the solution's",
     training_pools},
};
static const GradeExercise HIDDEN[] = {
    {"07.patch_embedding", HIDDEN_PATCH_EMBEDDING, GRADE_COUNT(HIDDEN_PATCH_EMBEDDING)},
    {"07.positions_2d", HIDDEN_POSITIONS_2D, GRADE_COUNT(HIDDEN_POSITIONS_2D)},
    {"07.pooling", HIDDEN_POOLING, GRADE_COUNT(HIDDEN_POOLING)},
};

/* ------------------------------------------------------------ the exercises */

static const GradeCheck PATCH_EMBEDDING[] = {
    {"the patch embeddings against PyTorch's conv2d (stride P; kernel P, or larger with padding)", patch_forward},
    {"dimages and dW against PyTorch's autograd", patch_backward},
    {"the same with out and the cache of patches pre-filled with garbage (padding written as zeros)",
     patch_forward_garbage},
};
static const GradeCheck POSITIONS_2D[] = {
    {"a 3 x 4 grid of patches", positions_plain},
    {"the same with a class token", positions_cls},
};
static const GradeCheck POOLING[] = {
    {"cls pooling", pool_cls},
    {"mean pooling", pool_mean},
    {"cls pooling backward", pool_cls_backward},
    {"mean pooling backward", pool_mean_backward},
};
static const GradeExercise EXERCISES[] = {
    {"07.patch_embedding", PATCH_EMBEDDING, GRADE_COUNT(PATCH_EMBEDDING)},
    {"07.positions_2d", POSITIONS_2D, GRADE_COUNT(POSITIONS_2D)},
    {"07.pooling", POOLING, GRADE_COUNT(POOLING)},
};

int main(int argc, char **argv) {
    return grade_main_hidden(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES), HIDDEN, GRADE_COUNT(HIDDEN));
}
