/* multi_head_model.h - chapter 05: chapter 04's digit model with multi-head
 * attention.
 *
 * The model is chapter 04's (digit_model.h), with its single-head
 * self-attention replaced by the multi-head layer of multi_head.h:
 *   X_0 = embed(x) + P                        P: none, sinusoidal, or learned [N, D]
 *   for each layer l:
 *     Z       = X_l + MultiHead(X_l)          H heads of size D_H, then W_O [H D_H, D], b_O
 *     X_{l+1} = Z + relu(Z W_1 + b_1) W_2 + b_2
 *   logits = X_L W_out + b_out,  loss = mean cross-entropy over positions
 * Everything but the attention is chapter 04's code: this file only gives
 * its DigitModel a DigitAttention made of multi_head.h. With H = 1,
 * W_O = I and b_O = 0 it computes exactly what chapter 04's model computes
 * (a test checks it). The tasks (count_next and neighbours need two lookups
 * per output) are in common/data/digit_tasks.h. */
#ifndef MULTI_HEAD_MODEL_H
#define MULTI_HEAD_MODEL_H
#include <stdint.h>
#include "04_self_attention/digit_model.h"
#include "05_multi_head_attention/multi_head.h"
#include "model/classifier.h"

#define MH_MODEL_NAME "ch05_digit_multi_head"

/* Chapter 05's attention for a DigitModel whose attention_spec is a
 * MultiHeadSpec {D, H, D_H, D}: layer l's tensors are W_QKV [D, 3 H D_H],
 * W_O [H D_H, D], b_O [D]. */
extern const DigitAttention DIGIT_MULTI_HEAD_ATTENTION;

/* A DigitModel with multi-head attention, and the spec it points to. */
typedef struct {
    DigitModel model;
    MultiHeadSpec spec;
} MultiHeadModel;

/* Declare, allocate and initialise (from seed) H heads of D_H per layer,
 * the attention computed plain or fused. Returns 0 or -1 with fail(). */
int mh_model_create(MultiHeadModel *m, const DigitModelSizes *s, int H, int D_H,
                    MultiHeadAttention attention, int max_B, uint64_t seed);
void mh_model_free(MultiHeadModel *m);

/* The config text adds heads and head_dim to chapter 04's:
 *   model=ch05_digit_multi_head  task=count_next  len=8  dim=64  heads=4
 *   head_dim=16  hidden=128  layers=1  classes=90  pos=learned  causal=0  seed=1 */
void mh_model_config_text(char *out, int cap, const char *task, const DigitModelSizes *s, int H, int D_H,
                          int seed);
/* The driver's build: the model a config describes, attention plain or fused. */
int mh_model_build(Classifier *c, const char *config, MultiHeadAttention attention, int max_B,
                   uint64_t seed);

#endif
