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
#include "io/config.h"
#include "05_multi_head_attention/multi_head.h"
#include "model/classifier.h"

#define MH_MODEL_NAME "ch05_digit_multi_head"

/* Chapter 05's attention for a DigitModel whose attention_spec is a
 * MultiHeadSpec {D, H, D_H, D}: layer l's tensors are W_QKV [D, 3 H D_H],
 * W_O [H D_H, D], b_O [D]. */
extern const DigitAttention DIGIT_MULTI_HEAD_ATTENTION;

/* The configuration: chapter 04's, and the heads. Its checkpoint keeps it
 * as the lines of MH_MODEL_CONFIG_FIELDS (io/config.h), chapter 04's with
 * heads and head_dim after dim:
 *   len=8  dim=64  heads=4  head_dim=16  ff=128  layers=1  classes=90
 *   pos=learned  causal=0 */
typedef struct {
    DigitConfig digit;   /* N, D, F, L, C, pos, causal (digit_model.h) */
    int H, D_H;          /* heads, and the width of each (H D_H = D in this chapter) */
} MultiHeadModelConfig;
extern const ConfigField MH_MODEL_CONFIG_FIELDS[];
extern const int MH_MODEL_CONFIG_N;

/* A DigitModel with multi-head attention, and the spec it points to. */
typedef struct {
    DigitModel model;
    MultiHeadSpec spec;
} MultiHeadModel;

/* Declare, allocate and initialise (from seed) c's model, H heads of D_H
 * per layer, the attention computed plain or fused. Returns 0 or -1 with
 * fail(). */
int mh_model_create(MultiHeadModel *m, const MultiHeadModelConfig *c, MultiHeadAttention attention, int max_B,
                    uint64_t seed);
void mh_model_free(MultiHeadModel *m);

/* The model of configuration cfg as a Classifier (model/classifier.h),
 * attention plain or fused. Returns 0, or -1 with fail(). */
int mh_model_build(Classifier *c, const MultiHeadModelConfig *cfg, MultiHeadAttention attention, int max_B,
                   uint64_t seed);

#endif
