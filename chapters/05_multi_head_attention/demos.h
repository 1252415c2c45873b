/* demos.h - chapter 05's demonstrations besides training. */
#ifndef MULTI_HEAD_DEMOS_H
#define MULTI_HEAD_DEMOS_H
#include "05_multi_head_attention/multi_head.h"
#include "io/results.h"

typedef struct {
    int batch, len, dim, causal, seed;     /* the 4-matmul check: B sequences of N, width D */
    MultiHeadAttention attention;          /* plain or fused */
    int scale_max_len, scale_dim, scale_heads, scale_repeats;   /* the cost table */
    const char *out;                       /* where the plots go */
} MultiHeadDemoSetup;

/* Prints the 4 big matmuls with their shapes, checks the fused layer against
 * H separate chapter-04 heads (concatenated, then W_O) on random weights, and
 * times both (forward + backward, median of 7). */
void four_matmuls_demo(const MultiHeadDemoSetup *f, int H);

/* Forward + backward time and memory of one layer for N = 64, 128, ... up
 * to scale_max_len: the table, scale_* keys in res, and the log-log plots
 * out/scaling_time and out/scaling_memory. Returns 0 or -1 with fail(). */
int length_scaling_experiment(const MultiHeadDemoSetup *f, Results *res);

#endif
