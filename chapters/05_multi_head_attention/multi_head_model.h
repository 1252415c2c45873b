/* multi_head_model.h - chapter 05: chapter 04's digit model with multi-head
 * attention, and two more digit tasks that need two lookups per output.
 *
 * The model is chapter 04's (digit_model.h), with its single-head
 * self-attention replaced by the multi-head layer of multi_head.h:
 *   X_0 = embed(x) + P                        P: none, sinusoidal, or learned [N, D]
 *   for each layer l:
 *     Z       = X_l + MultiHead(X_l)          H heads of size D_H, then W_O [H D_H, D], b_O
 *     X_{l+1} = Z + relu(Z W_1 + b_1) W_2 + b_2
 *   logits = X_L W_out + b_out,  loss = mean cross-entropy over positions
 * It reuses chapter 04's tasks (digit_task_batch), positional encodings and
 * names (PosType); with H = 1, W_O = I and b_O = 0 it computes exactly what
 * chapter 04's DigitModel computes (a test checks it).
 *
 * Two new tasks, each needing TWO lookups per output (N random digits x):
 *   neighbours   y_i = 10 x_{i-1} + x_{i+1}              two positional lookups
 *   count_next   y_i = 10 count(x_i) + x_{i+1}           one by content (the digits
 *                                                        equal to x_i), one by position
 * (indices wrap around: x_0 = x_N, x_{N+1} = x_1; y is the two-digit number,
 * one class). Two heads can each do one lookup; a single head has to blend
 * both into one weighted average.
 */
#ifndef MULTI_HEAD_MODEL_H
#define MULTI_HEAD_MODEL_H
#include <stdint.h>
#include "04_self_attention/digit_model.h"
#include "05_multi_head_attention/multi_head.h"
#include "nn/params.h"
#include "util/rng.h"

#define MH_MAX_LAYERS 4

/* x [B, N] random digits, y [B, N] = 10 x_{i-1} + x_{i+1} (wrapping), one of
 * NEIGHBOUR_CLASSES classes 0..99. */
#define NEIGHBOUR_CLASSES 100
void neighbour_task_batch(int *x, int *y, int B, int N, Rng *rng);

/* x [B, N] random digits, y [B, N] = 10 * (how often x_i occurs in x) + x_{i+1}
 * (wrapping): one lookup by content (the equal digits), one by position (the
 * next one). count_next_classes(N) = 10 (N + 1) classes. */
void count_next_task_batch(int *x, int *y, int B, int N, Rng *rng);
int count_next_classes(int N);

/* Every task chapter 05 trains on, by name: "count_next", "neighbours", or
 * chapter 04's "reverse", "sort", "count". */
/* x [B, N] random digits, y [B, N] the task's targets (task must be valid). */
void mh_task_batch(const char *task, int *x, int *y, int B, int N, Rng *rng);
/* y [N] = the task's targets for one given sequence x [N] (task must be valid). */
void mh_task_targets(const char *task, const int *x, int *y, int N);
/* Number of output classes, or -1 with fail() for an unknown task name. */
int mh_task_classes(const char *task, int N);

typedef struct {
    int N, D, H, D_H, F, L, C;  /* length, width, heads, head size, MLP size, layers, classes */
    PosType pos;
    int causal;
    MultiHeadAttention attention;   /* how each layer computes softmax(Q K^T / sqrt(D_H)) V */
    Params params;
    size_t emb, pos_table, W_out, b_out;              /* [10, D], [N, D], [D, C], [C] */
    size_t W_QKV[MH_MAX_LAYERS], W_O[MH_MAX_LAYERS], b_O[MH_MAX_LAYERS];  /* [D, 3 H D_H], [H D_H, D], [D] */
    size_t W_1[MH_MAX_LAYERS], b_1[MH_MAX_LAYERS];                        /* [D, F], [F] */
    size_t W_2[MH_MAX_LAYERS], b_2[MH_MAX_LAYERS];                        /* [F, D], [D] */
    int max_B, B;               /* capacity, and the batch of the last forward */
    float *P_sin;               /* [N, D] */
    float *X;                   /* [L+1, B, N, D]: X_0 .. X_L */
    float *Z;                   /* [L, B, N, D] after the attention residual */
    float *attn_out;            /* [L, B, N, D] multi-head outputs */
    float *A;                   /* [L, B, H, N, N] attention weights (none when fused) */
    float *mh_cache;            /* [L, multi_head_cache_floats] */
    float *pre, *act;           /* [L, B, N, F] MLP before / after relu */
    float *logits, *probs;      /* [B*N, C] */
    float *dlogits, *dX, *dZ, *dpre, *dact, *mh_scratch;   /* backward work */
} MultiHeadModel;

/* Declare, allocate and initialise (from seed). attention: plain or fused
 * (multi_head.h); the buffers are sized for it. Returns 0 or -1 with fail(). */
int mh_model_create(MultiHeadModel *m, int N, int D, int H, int D_H, int F, int L, int C,
                    PosType pos, int causal, MultiHeadAttention attention, int max_B, uint64_t seed);
void mh_model_free(MultiHeadModel *m);
/* Forward over x [B, N] (B <= max_B). With targets y, returns the mean
 * cross-entropy per position; with y == NULL returns 0. */
double mh_model_forward(MultiHeadModel *m, const int *x, const int *y, int B);
/* After forward with the same x, y: accumulate d(loss)/d(params) into params.grad. */
void mh_model_backward(MultiHeadModel *m, const int *x, const int *y);
/* pred [B, N] = argmax of the last forward's logits. */
void mh_model_predict(const MultiHeadModel *m, int *pred);
/* Attention weights of layer l, head h, sequence b of the last forward: [N, N]
 * (plain attention only: the fused layer never forms them). */
const float *mh_model_attention(const MultiHeadModel *m, int l, int h, int b);

/* Checkpoints (common/io/checkpoint.h). The config text holds everything needed
 * to rebuild the model:
 *   model=ch05_digit_multi_head  task=count_next  len=8  dim=64  heads=4
 *   head_dim=16  hidden=128  layers=1  classes=90  pos=learned  causal=0  seed=1
 * (seed: the training seed, which also picks the test stream). */
#define MH_MODEL_NAME "ch05_digit_multi_head"
/* Returns 0, or -1 with fail() naming the path. */
int mh_model_save(const MultiHeadModel *m, const char *task, int seed, const char *path);
/* Rebuild the model saved at path (for batches of up to max_B, computing
 * attention as the argument says) and load its parameters; task (task_cap
 * bytes) and seed get the saved ones. Returns 0,
 * or -1 with fail() naming the path and the problem: unreadable, corrupt or
 * truncated file, or a checkpoint of another model ("model=" key). */
int mh_model_load(MultiHeadModel *m, const char *path, int max_B, MultiHeadAttention attention,
                  char *task, int task_cap, int *seed);

#endif
