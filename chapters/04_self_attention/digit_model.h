/* digit_model.h - chapter 04: a small self-attention model for the digit
 * tasks (common/data/digit_tasks.h), built so that chapter 05 can swap in
 * its multi-head attention and keep everything else.
 *
 * Model (per position, for a batch of B sequences of N digits):
 *   X_0 = embed(x) + P                  P: none, sinusoidal, or a learned table [N, D]
 *   for each layer l:
 *     Z       = X_l + Attention(X_l)                (residual)
 *     X_{l+1} = Z + relu(Z W_1 + b_1) W_2 + b_2     (a small MLP, residual)
 *   logits = X_L W_out + b_out,  loss = mean cross-entropy over positions
 * Attention is chapter 04's self-attention (DIGIT_SELF_ATTENTION below) or,
 * in chapter 05, multi-head attention: a DigitAttention is the one piece
 * that differs. Without P the whole model is permutation equivariant, so it
 * can solve count but not reverse or sort. */
#ifndef DIGIT_MODEL_H
#define DIGIT_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "io/config.h"
#include "nn/params.h"
#include "model/classifier.h"
#include "util/rng.h"

#define DIGIT_MAX_LAYERS 4

/* The positional encodings added to X (positional_encoding_sinusoidal, or a
 * learned table), or none. */
typedef enum { POS_NONE = 0, POS_SINUSOIDAL, POS_LEARNED, POS_N_TYPES } PosType;
const char *pos_type_name(PosType p);          /* "none", "sinusoidal", "learned" */
/* Name -> PosType; returns 0, or -1 with fail() listing the names. */
int pos_type_from_name(const char *name, PosType *p);

typedef struct DigitModel DigitModel;

/* The attention sublayer of every layer, as functions of the model (its
 * sizes are m->N, m->D, m->causal; anything else is in m->attention_spec).
 * Layer l's tensors are m->attn[l][0..2] in m->params. */
typedef struct {
    const char *model_name;   /* the checkpoint's "model=" */
    /* Declare layer l's tensors ("layer<l>.<name>") into m->attn[l]. */
    void (*declare)(DigitModel *m, int l);
    /* Their initial values, drawn from rng. */
    void (*init)(DigitModel *m, int l, Rng *rng);
    /* Floats, for B sequences, of one layer's attention weights A (the
     * heatmaps; 0 if not kept), of one layer's cache, and of the scratch
     * backward shares between layers. */
    size_t (*weights_floats)(const DigitModel *m, int B);
    size_t (*cache_floats)(const DigitModel *m, int B);
    size_t (*scratch_floats)(const DigitModel *m, int B);
    /* X [B, N, D] -> Y [B, N, D] (written), A and cache (written). */
    void (*forward)(const DigitModel *m, int l, float *Y, float *A, float *cache, const float *X, int B);
    /* dY [B, N, D] -> dX [B, N, D] +=, layer l's parameter gradients +=. */
    void (*backward)(DigitModel *m, int l, float *dX, float *scratch, const float *dY, const float *A,
                     const float *cache, const float *X, int B);
} DigitAttention;

/* Chapter 04's: self_attention.h, W_Q, W_K, W_V [D, D], one head. */
extern const DigitAttention DIGIT_SELF_ATTENTION;
#define DIGIT_MODEL_NAME "ch04_digit_self_attention"

/* The model's configuration. Its checkpoint keeps it as the lines of
 * DIGIT_CONFIG_FIELDS (io/config.h), between the program's model= and
 * task= lines and its seed= line:
 *   len=8  dim=64  ff=128  layers=2  classes=10  pos=sinusoidal  causal=0
 * (ff was hidden= in checkpoints saved before the letter table's names;
 * they still load). */
typedef struct {
    int N, D, F, L, C;      /* length, width, MLP width, layers, classes */
    PosType pos;
    int causal;             /* 1: output i only sees inputs 1..i */
} DigitConfig;
extern const ConfigField DIGIT_CONFIG_FIELDS[];
extern const int DIGIT_CONFIG_N;

struct DigitModel {
    int N, D, F, L, C;
    PosType pos;
    int causal;
    int heads;                              /* attention maps per layer */
    const DigitAttention *attention;
    const void *attention_spec;             /* chapter 05: its MultiHeadSpec; NULL for chapter 04 */
    Params params;
    size_t emb, pos_table, W_out, b_out;    /* [10, D], [N, D], [D, C], [C] */
    size_t attn[DIGIT_MAX_LAYERS][3];       /* the attention's tensors of layer l */
    size_t W_1[DIGIT_MAX_LAYERS], b_1[DIGIT_MAX_LAYERS];   /* [D, F], [F] */
    size_t W_2[DIGIT_MAX_LAYERS], b_2[DIGIT_MAX_LAYERS];   /* [F, D], [D] */
    int max_B, B;              /* capacity, and the batch of the last forward */
    float *P_sin;              /* [N, D] */
    float *X;                  /* [L+1, B, N, D]: X_0 .. X_L */
    float *Z;                  /* [L, B, N, D] after the attention residual */
    float *Y_attn;             /* [L, B, N, D] attention outputs */
    float *A;                  /* [L, weights_floats(max_B)] attention weights */
    float *attn_cache;         /* [L, cache_floats(max_B)] */
    float *pre, *act;          /* [L, B, N, F] MLP before / after relu */
    float *logits, *probs;     /* [B*N, C] */
    float *dlogits, *dX, *dZ, *dpre, *dact, *attn_scratch;   /* backward work */
};

/* Declare, allocate and initialise (from seed) a model with the given
 * attention (spec: what it needs besides the model's sizes, or NULL) and
 * heads attention maps per layer. Returns 0 or -1 with fail(). */
int digit_model_create(DigitModel *m, const DigitAttention *attention, const void *spec, int heads,
                       const DigitConfig *c, int max_B, uint64_t seed);
void digit_model_free(DigitModel *m);
/* Forward over x [B, N] (B <= max_B). With targets y, returns the mean
 * cross-entropy per position; with y == NULL returns 0. Logits stay in m. */
double digit_model_forward(DigitModel *m, const int *x, const int *y, int B);
/* After forward with the same x, y: accumulate d(loss)/d(params) into params.grad. */
void digit_model_backward(DigitModel *m, const int *x, const int *y);
/* pred [B, N] = argmax of the last forward's logits. */
void digit_model_predict(const DigitModel *m, int *pred);
/* Attention weights of layer l, head h, sequence b of the last forward:
 * [N, N], or NULL when the attention does not keep them. */
const float *digit_model_attention(const DigitModel *m, int l, int h, int b);

/* ------------------------------------------------ the Classifier face */
/* m behind the Classifier face (model/classifier.h); its destroy frees m's
 * buffers, then allocation: the malloc'd block m lives in (m itself, or a
 * struct holding m and its attention spec). */
void digit_model_classifier(DigitModel *m, void *allocation, Classifier *c);
/* Chapter 04's model of configuration cfg as a Classifier, for batches of
 * up to max_B, initialised from seed. Returns 0, or -1 with fail(). */
int digit_model_build(Classifier *c, const DigitConfig *cfg, int max_B, uint64_t seed);

#endif
