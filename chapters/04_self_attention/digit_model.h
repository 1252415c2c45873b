/* digit_model.h - chapter 04: digit tasks where order does (or does not)
 * matter, and a small self-attention model that learns them.
 *
 * Tasks: an input of N random digits x_1..x_N, a target digit (class) for
 * every position:
 *   reverse  y_i = x_{N+1-i}                     needs positions
 *   sort     y_i = the i-th smallest digit       needs positions (for the OUTPUT slot i)
 *   count    y_i = how often x_i occurs in x     does not: permuting x permutes y
 *
 * Model (per position, for a batch of B sequences):
 *   X_0 = embed(x) + P                  P: none, sinusoidal, or a learned table [N, D]
 *   for each layer l:
 *     H       = X_l + SelfAttention(X_l)            (residual)
 *     X_{l+1} = H + relu(H W_1 + b_1) W_2 + b_2     (a small MLP, residual)
 *   logits = X_L W_out + b_out,  loss = mean cross-entropy over positions
 * Without P the whole model is permutation equivariant, so it can solve
 * count but not reverse or sort. */
#ifndef DIGIT_MODEL_H
#define DIGIT_MODEL_H
#include <stdint.h>
#include "nn/params.h"
#include "util/rng.h"

#define DIGIT_VOCAB 10
#define DIGIT_MAX_LAYERS 4

typedef enum { TASK_REVERSE = 0, TASK_SORT, TASK_COUNT, DIGIT_N_TASKS } DigitTask;
typedef enum { POS_NONE = 0, POS_SINUSOIDAL, POS_LEARNED, POS_N_TYPES } PosType;

const char *digit_task_name(DigitTask t);      /* "reverse", "sort", "count" */
const char *pos_type_name(PosType p);          /* "none", "sinusoidal", "learned" */
/* Number of output classes: 10 digits, or N + 1 counts (0..N) for count. */
int digit_task_classes(DigitTask t, int N);
/* x [B, N] random digits, y [B, N] the task's targets. */
void digit_task_batch(DigitTask t, int *x, int *y, int B, int N, Rng *rng);
/* y [N] = the task's targets for one given sequence x [N]. */
void digit_task_targets(DigitTask t, const int *x, int *y, int N);
/* Name -> enum; returns 0, or -1 with fail() listing the names. */
int digit_task_from_name(const char *name, DigitTask *t);
int pos_type_from_name(const char *name, PosType *p);

/* Digits a user typed ("3 1 4 1 5 9 2 6", "3,1,4,1,5,9,2,6" or "31415926")
 * -> x [N]. Returns 0, or -1 with fail() naming the first character that is
 * not a digit, or saying how many digits were expected and how many given. */
int digits_parse(const char *text, int N, int *x);

typedef struct {
    int N, D, F, L, C;          /* length, width, MLP hidden size, layers, classes */
    PosType pos;
    int causal;
    Params params;
    size_t emb, pos_table, W_out, b_out;                 /* [10,D], [N,D], [D,C], [C] */
    size_t W_Q[DIGIT_MAX_LAYERS], W_K[DIGIT_MAX_LAYERS], W_V[DIGIT_MAX_LAYERS];   /* [D,D] */
    size_t W_1[DIGIT_MAX_LAYERS], b_1[DIGIT_MAX_LAYERS];                         /* [D,F], [F] */
    size_t W_2[DIGIT_MAX_LAYERS], b_2[DIGIT_MAX_LAYERS];                         /* [F,D], [D] */
    int max_B, B;               /* capacity, and the batch of the last forward */
    float *P_sin;               /* [N, D] */
    float *X;                   /* [L+1, B, N, D]: X_0 .. X_L */
    float *H;                   /* [L, B, N, D] */
    float *Y_attn;              /* [L, B, N, D] self-attention outputs */
    float *A;                   /* [L, B, N, N] attention weights */
    float *sa_cache;            /* [L, self_attention_cache_floats] */
    float *pre, *act;           /* [L, B, N, F] MLP before / after relu */
    float *logits, *probs;      /* [B*N, C] */
    float *dlogits, *dX, *dH, *dpre, *dact, *sa_scratch;   /* backward work */
} DigitModel;

/* The pieces around the attention layer, exported so chapter 05 swaps only
 * the attention and calls the rest (R = B*N rows, width D, MLP width F,
 * C classes). Backward passes accumulate into parameter gradients (+=).
 *
 * Input:  X [R, D] = embed(x) + P   (P: pos_sin [N, D] or the learned table;
 *         nothing for POS_NONE) */
void digit_input_forward(float *X, const int *x, const float *emb, PosType pos, const float *P,
                         int B, int N, int D);
/* dX [R, D] -> d emb (+=) and, for learned positions, d P (+=). */
void digit_input_backward(float *demb, float *dP, const float *dX, const int *x, PosType pos,
                          int B, int N, int D);
/* Residual MLP: X_out [R, D] = H + relu(H W_1 + b_1) W_2 + b_2; keeps pre, act [R, F]. */
void residual_mlp_forward(float *X_out, float *pre, float *act, const float *H, const float *W_1,
                          const float *b_1, const float *W_2, const float *b_2, int R, int D, int F);
/* dH [R, D] is OVERWRITTEN with dX_out + (the MLP's backward of dX_out);
 * dpre, dact [R, F] are scratch. */
void residual_mlp_backward(float *dH, float *dpre, float *dact, float *dW_1, float *db_1, float *dW_2,
                           float *db_2, const float *dX_out, const float *H, const float *pre,
                           const float *act, const float *W_1, const float *W_2, int R, int D, int F);
/* Head: logits [R, C] = X W_out + b_out; with targets y (not NULL) also
 * probs and the mean cross-entropy (returned; 0 without y). */
double digit_head_forward(float *logits, float *probs, const float *X, const float *W_out,
                          const float *b_out, const int *y, int R, int D, int C);
/* dX [R, D] is OVERWRITTEN with d loss / d X; dlogits [R, C] is scratch. */
void digit_head_backward(float *dX, float *dW_out, float *db_out, float *dlogits, const float *probs,
                         const int *y, const float *X, const float *W_out, int R, int D, int C);
/* pred [R] = argmax over the C logits of each row. */
void digit_argmax(const float *logits, int R, int C, int *pred);
/* Print a typed input x [N], the model's output pred [N] and the right
 * answer y [N] for the task, one row each (for --input). */
void digit_print_prediction(const char *task, const int *x, const int *pred, const int *y, int N);

/* Declare, allocate and initialise (from seed). Returns 0 or -1 with fail(). */
int digit_model_create(DigitModel *m, int N, int D, int F, int L, int C, PosType pos, int causal,
                       int max_B, uint64_t seed);
void digit_model_free(DigitModel *m);
/* Forward over x [B, N] (B <= max_B). With targets y, returns the mean
 * cross-entropy per position; with y == NULL returns 0. Logits stay in m. */
double digit_model_forward(DigitModel *m, const int *x, const int *y, int B);
/* After forward with the same x, y: accumulate d(loss)/d(params) into params.grad. */
void digit_model_backward(DigitModel *m, const int *x, const int *y);
/* pred [B, N] = argmax of the last forward's logits. */
void digit_model_predict(const DigitModel *m, int *pred);
/* Attention weights of layer l for sequence b of the last forward: [N, N]. */
const float *digit_model_attention(const DigitModel *m, int l, int b);

/* Checkpoints (common/io/checkpoint.h). The config text holds everything needed
 * to rebuild the model:
 *   model=ch04_digit_self_attention  task=reverse  len=8  dim=64  hidden=128
 *   layers=2  classes=10  pos=sinusoidal  causal=0  seed=1
 * (seed: the training seed, which also picks the test stream). */
#define DIGIT_MODEL_NAME "ch04_digit_self_attention"
/* Returns 0, or -1 with fail() naming the path. */
int digit_model_save(const DigitModel *m, const char *task, int seed, const char *path);
/* Rebuild the model saved at path (for batches of up to max_B) and load its
 * parameters; task (task_cap bytes) and seed get the saved ones. Returns 0,
 * or -1 with fail() naming the path and the problem: unreadable, corrupt or
 * truncated file, or a checkpoint of another model ("model=" key). */
int digit_model_load(DigitModel *m, const char *path, int max_B, char *task, int task_cap, int *seed);

#endif
