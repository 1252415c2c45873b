/* sparse_attention.h - chapter 06, part 5: attention that skips most of the
 * N x N pairs: a sliding window, global blocks and random blocks, and their
 * union (BigBird: Zaheer et al. 2020), on chapter 05's fused kernel.
 *
 * Full attention scores every query against every key: N^2 work per head,
 * forward and backward. A sparse pattern lets each query see only some
 * keys. So that skipped pairs cost nothing, the pattern is made of blocks
 * of P positions (BigBird's own choice): block bi of queries (positions
 * bi P .. bi P + P - 1) sees whole blocks of keys, and the fused kernel
 * (flash_attention.h) folds exactly those blocks into its online softmax,
 * never computing a score outside them. Query block bi sees key block bj
 * when any rule allows it:
 *   window  |bi - bj| <= w           (causal: 0 <= bi - bj <= w), its own block always
 *   global  bi < g or bj < g         the first g blocks see, and are seen by, all
 *   random  bj among r blocks drawn for bi (fixed by the seed) from the blocks the
 *           two rules above leave out (causal: from those before bi)
 * and the causal and padding rules of chapter 03 still apply to each pair
 * (a causal query i sees no key j > i even inside its own block). With
 * n_b = N / P blocks, a query block sees at most 2w + 1 + g + r of them
 * (full attention: n_b), so the work is O(N P (w + g + r)) instead of O(N^2):
 * linear in N at a fixed pattern.
 *
 * The layout (which key blocks each query block sees) is made once, for
 * the longest N the model runs (sparse_layout_create), and read by every
 * forward and backward; a shorter sequence uses its first blocks. A query
 * that sees no real key (a padding position outside every window of real
 * keys) gets the output 0.
 *
 * The block's self-attention (block.h's BlockSelfAttention) built from it,
 * sparse_attention_hook: chapter 05's step 1 (with rotary positions, the
 * rotation after it), these heads for steps 2-3, chapter 05's step 4; no
 * N x N map A is formed (as with fused attention). */
#ifndef SPARSE_ATTENTION_H
#define SPARSE_ATTENTION_H
#include <stddef.h>
#include <stdint.h>

#include "06_transformer/block.h"

/* The pattern, in blocks of P positions. */
typedef struct {
    int P;          /* positions per block (>= 1): the pattern's unit and the kernel's Bq = Bk */
    int window;     /* w >= 0: key blocks each side of a query's own block (causal: before it) */
    int global;     /* g >= 0: the first g blocks are global */
    int random;     /* r >= 0: random key blocks per query block */
    uint64_t seed;  /* the random blocks' draw */
} SparsePattern;

/* Returns 0, or -1 with fail() for a pattern outside those ranges. */
int sparse_pattern_check(const SparsePattern *p);

/* Which key blocks each query block sees, for sequences of up to N positions. */
typedef struct {
    SparsePattern p;
    int N, causal, n_blocks;   /* n_blocks = ceil(N / P) */
    int *first;                /* [n_blocks + 1] */
    int *keys;                 /* query block bi sees key blocks keys[first[bi] .. first[bi+1]-1], ascending */
} SparseLayout;

/* Build (allocates) the layout of p for N positions; 0, or -1 with fail(). */
int sparse_layout_create(SparseLayout *L, const SparsePattern *p, int N, int causal);
void sparse_layout_free(SparseLayout *L);

/* 1 when query i may look at key j (the block rules and causality; padding
 * aside): the dense [N, N] mask of the same pattern, for tests and pictures. */
int sparse_allows(const SparseLayout *L, int i, int j);

/* The share of the N x N pairs (causal: of the N (N + 1) / 2 pairs j <= i)
 * the kernel computes at length N (<= L->N), in whole blocks. */
double sparse_density(const SparseLayout *L, int N);

/* Scratch floats for the heads below: the kernel's blocks of P x P. */
size_t sparse_attention_block_floats(const SparseLayout *L);

/* All sequences and heads, in chapter 05's layout (flash_attention.h):
 *   QKV [B, N, 3 H D_H] -> Y [B, N, H D_H] (written), lse [B, H, N] (written).
 * lens [B] or NULL: sequence b has lens[b] real positions (0 = all N). N <= L->N. */
void sparse_attention_forward_heads(float *Y, float *lse, const float *QKV, int B, int N, int H, int D_H,
                                    const int *lens, const SparseLayout *L, float *scratch);

/* dY [B, N, H D_H], and QKV, Y, lse from forward -> dQKV [B, N, 3 H D_H] +=. */
void sparse_attention_backward_heads(float *dQKV, const float *dY, const float *QKV, const float *Y,
                                     const float *lse, int B, int N, int H, int D_H, const int *lens,
                                     const SparseLayout *L, float *scratch);

/* The block's self-attention: the layout, and rope 1 to rotate the queries
 * and keys after step 1 (rotary positions, rope_attention.h), as the block
 * does for chapter 05's attention. */
typedef struct {
    const SparseLayout *layout;
    int rope;
} SparseAttention;

/* The block's self-attention of a (its options: a and its layout must
 * outlive the block). Its check refuses a cross-attention block, a block
 * whose causality differs from the layout's, and with rope an odd D_H. */
BlockSelfAttention sparse_attention_hook(const SparseAttention *a);
#endif
