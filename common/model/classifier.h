/* classifier.h (model/) - what a model that predicts classes is to the code
 * that trains and uses it: the Classifier face (forward with the loss,
 * backward, the predictions, the attention maps for pictures). The digit
 * models of chapters 04 and 05, the GPT of chapter 06 and the ViT of
 * chapter 07 fill one; the training driver (train/classifier.h) and the
 * programs use only this. */
#ifndef MODEL_CLASSIFIER_H
#define MODEL_CLASSIFIER_H
#include "data/examples.h"
#include "util/rng.h"
#include "io/checkpoint.h"
#include "nn/params.h"

typedef struct {
    void *self;
    Params *params;
    int max_B;            /* the largest batch forward takes */
    int n_out, classes;   /* outputs per example, classes per output (C) */
    int layers, heads;    /* attention maps: layers x heads, each [n_in, n_in] */
    /* Forward over e (e->B <= max_B). With e->targets, returns the mean
     * cross-entropy per target; without, 0. */
    double (*forward)(void *self, const Examples *e);
    /* After forward on the same e: accumulate d loss / d params into
     * params->grad. */
    void (*backward)(void *self, const Examples *e);
    /* pred [B, n_out] = the most likely class of each output of the last forward. */
    void (*predict)(void *self, int *pred);
    /* The last forward's logits [B * n_out, classes]. */
    const float *(*logits)(void *self);
    /* Attention weights of layer l, head h, example b of the last forward,
     * [n_in, n_in] (query i, key j); NULL when the model does not keep them
     * (the fused attention of chapter 05). May itself be NULL. */
    const float *(*attention)(void *self, int l, int h, int b);
    void (*destroy)(void *self);
    /* Optional (may be NULL): training mode on (1) or off (0), for models
     * with dropout. classifier_train turns it on for its steps and off
     * after; a model starts with it off. */
    void (*set_training)(void *self, int on);
    /* Optional (may be NULL): classifier_train calls it before each of its
     * steps with step (0-based) and steps, for models whose training changes
     * along the run (chapter 07's patch dropout stops at a chosen step). */
    void (*set_progress)(void *self, int step, int steps);
    /* Optional (may be NULL): the next forward draws the same random choices
     * (dropout masks, dropped patches) as the last one did, for the second
     * pass of a sharpness-aware step (--sam, below) over the same batch.
     * Without it that pass draws new ones. */
    void (*replay)(void *self);
    /* Optional (NULL: none): the model's own random stream (dropout's, the
     * dropped patches'), which a resumed training run puts back (train/loop.h). */
    Rng *rng;
    /* Optional (n_buffers 0: none): the model's state that is not parameters
     * (PyTorch's buffers: batch norm's running statistics), named arrays the
     * model owns. Its checkpoints keep them after the tensors (io/checkpoint.h's
     * items), --load and a resumed run put them back. */
    StateItem *buffers;
    int n_buffers;
} Classifier;

#endif
