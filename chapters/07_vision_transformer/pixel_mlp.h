/* pixel_mlp.h - chapter 07's baseline without attention: a multi-layer
 * perceptron on the raw pixels, trained by the same driver, loop, data and
 * budget as the ViT (main_mlp.c), so that the ViT's figure has something to
 * stand beside.
 *
 * One image x [rows * cols] (the pixels, normalised as the ViT reads them),
 * L hidden layers of width F:
 *
 *   h_0 = x                                 [B, rows * cols]
 *   h_l = GELU(h_{l-1} W_l + b_l)           [B, F], l = 1..L
 *   logits = h_L W_out + b_out              [B, C]; loss = cross-entropy
 *
 * Every pixel has its own weights: nothing is shared between places of the
 * image and nothing attends, so what a patch means must be learned anew at
 * every position. That is the difference the ViT's figure is measured against.
 *
 * Letters as in common/README.md: B images, F the hidden width, L layers,
 * C classes. One Params buffer, activations allocated once for max_B images,
 * backward ACCUMULATES into the gradients. */
#ifndef PIXEL_MLP_H
#define PIXEL_MLP_H
#include <stdint.h>
#include "io/config.h"
#include "model/classifier.h"

#define PIXEL_MLP_MODEL_NAME "ch07_pixel_mlp"
#define PIXEL_MLP_MAX_LAYERS 8

typedef struct {
    int inputs;    /* pixels per image, rows * cols */
    int hidden;    /* F */
    int layers;    /* L hidden layers, 1..PIXEL_MLP_MAX_LAYERS */
    int classes;   /* C */
} PixelMlpConfig;

/* The checkpoint's lines of a PixelMlpConfig (io/config.h). */
extern const ConfigField PIXEL_MLP_CONFIG_FIELDS[];
extern const int PIXEL_MLP_CONFIG_N;

/* The model behind the Classifier face (model/classifier.h), its weights
 * initialised from seed (Glorot uniform, zero biases), activations for up to
 * max_B images. Returns 0, or -1 with fail() naming the bad field. */
int pixel_mlp_build(Classifier *m, const PixelMlpConfig *c, int max_B, uint64_t seed);

#endif
