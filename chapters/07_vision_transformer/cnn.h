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
#include "nn/conv2d.h"
#include "nn/params.h"
#include "util/rng.h"

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

/* The two convolutions with their ReLUs and max-pools, without the head:
 * the body of the classifier below, and the captioner's CNN encoder
 * (caption.h), which reads its last grid of features p_2 as the memory its
 * decoder attends to. Its four tensors conv1.W, conv1.b, conv2.W, conv2.b
 * live in the owner's Params (the same names in both models, so a trained
 * classifier's filters can start the captioner's). Activations for max_B
 * images; backward ACCUMULATES into the gradients. */
typedef struct {
    Conv2dSpec conv1, conv2;
    MaxPool2dSpec pool1, pool2;
    int F;                   /* the first convolution's filters; p_2 has 2F channels */
    int n1, n2, n3, n4;      /* floats per image of h_1, p_1, h_2, p_2 */
    size_t W1, b1, W2, b2;   /* the tensors, in the owner's Params */
    int B, max_B;
    float *pre1, *h1, *p1, *pre2, *h2, *p2;   /* [max_B, n1], [max_B, n1], [max_B, n2], [max_B, n3], .., [max_B, n4] */
    int *arg1, *arg2;        /* the pools' argmax, [max_B, n2], [max_B, n4] */
    float *cache1, *cache2;  /* the convolutions' column matrices */
    float *scratch2;         /* conv2's backward scratch (conv1 needs none: the pixels get no gradient) */
    float *dh2, *dpre2, *dp1, *dh1, *dpre1;   /* the gradients of h_2, its pre-activation, p_1, h_1, ... */
} CnnTrunk;

/* Declare the four tensors in p (before params_alloc) for images
 * [channels, rows, cols] (sides divisible by 4) and F filters. Returns 0, or
 * -1 with fail() naming the bad size. */
int cnn_trunk_declare(CnnTrunk *t, Params *p, int channels, int rows, int cols, int F);
/* After params_alloc: Glorot uniform filters (W_1, then W_2, from rng), zero biases. */
void cnn_trunk_init(const CnnTrunk *t, Params *p, Rng *rng);
/* The activations for up to max_B images. */
void cnn_trunk_alloc(CnnTrunk *t, int max_B);
void cnn_trunk_free(CnnTrunk *t);
/* x [B, channels, rows, cols] -> t->p2 [B, 2F, rows/4, cols/4] (B <= max_B). */
void cnn_trunk_forward(CnnTrunk *t, Params *p, const float *x, int B);
/* After forward: dp2 [B, 2F, rows/4, cols/4], the gradient of t->p2 (read
 * only) -> the four tensors' gradients, added into p->grad. */
void cnn_trunk_backward(CnnTrunk *t, Params *p, const float *dp2);

/* The model behind the Classifier face (model/classifier.h), its weights
 * initialised from seed (Glorot uniform over each filter's fan-in and
 * fan-out, zero biases), activations for up to max_B images. Returns 0, or
 * -1 with fail() naming the bad field. */
int cnn_build(Classifier *m, const CnnConfig *c, int max_B, uint64_t seed);

#endif
