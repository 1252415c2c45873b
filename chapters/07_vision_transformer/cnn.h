/* cnn.h - chapter 07's convolutional baseline: the network the ViT is
 * contrasted with in the lecture (a CNN's bias is built in: each filter
 * sees a small neighbourhood and is the same at every place), trained by
 * the same driver, loop, data and budget as the ViT (main_cnn.c).
 *
 * One image x [channels, rows, cols] (the pixels, normalised as the ViT
 * reads them), two convolutions of 3 x 3 filters, each followed by ReLU and
 * a 2 x 2 max-pool (common/nn/conv2d.h), then a linear head:
 *
 *   h_1 = ReLU(conv(x, W_1) + b_1)       W_1 [F, channels, 3, 3]   h_1 [B, F, rows, cols]   (padding 1)
 *   p_1 = maxpool_2x2(h_1)                                          [B, F, rows/2, cols/2]
 *   h_2 = ReLU(conv(p_1, W_2) + b_2)     W_2 [2F, F, 3, 3]         [B, 2F, rows/2, cols/2]
 *   p_2 = maxpool_2x2(h_2)                                          [B, 2F, rows/4, cols/4]
 *   logits = flatten(p_2) W_out + b_out  W_out [2F (rows/4) (cols/4), C]   [B, C]; loss = cross-entropy
 *
 * F is the first convolution's number of filters (`--filters`); the second
 * has twice as many, on a map of a quarter the size. On 28 x 28 images each
 * output of p_2 has seen a 10 x 10 square of pixels.
 *
 * Letters as in common/README.md: B images, C classes. One Params buffer
 * (conv1.W, conv1.b, conv2.W, conv2.b, out.W, out.b), activations allocated
 * once for max_B images, backward ACCUMULATES into the gradients. */
#ifndef CNN_H
#define CNN_H
#include <stdint.h>
#include "io/config.h"
#include "model/classifier.h"

#define CNN_MODEL_NAME "ch07_cnn"

typedef struct {
    int channels;   /* of the input image: 1 for Fashion-MNIST */
    int rows, cols; /* divisible by 4 (two 2 x 2 pools) */
    int filters;    /* F: the first convolution's output channels; the second has 2F */
    int classes;    /* C */
} CnnConfig;

/* The checkpoint's lines of a CnnConfig (io/config.h). */
extern const ConfigField CNN_CONFIG_FIELDS[];
extern const int CNN_CONFIG_N;

/* The model behind the Classifier face (model/classifier.h), its weights
 * initialised from seed (Glorot uniform over each filter's fan-in and
 * fan-out, zero biases), activations for up to max_B images. Returns 0, or
 * -1 with fail() naming the bad field. */
int cnn_build(Classifier *m, const CnnConfig *c, int max_B, uint64_t seed);

#endif
