/* flash_attention.h - chapter 05: fused attention (FlashAttention style),
 * the same numbers as multi_head.c's steps 2-3 without the N x N matrix.
 *
 * Plain attention (multi_head.c, through chapter 03) writes the whole score matrix
 * E = Q K^T / sqrt(D_H) [N, N] per head, softmaxes it into A [N, N], keeps A
 * for backward, and only then multiplies A V. That is N^2 floats per head:
 * 256 MiB at N = 8192. The fused kernel never holds more than one block of
 * Bq queries x Bk keys of scores. It walks over the keys block by block and
 * keeps, per query row, a running maximum m, a running sum l of
 * exp(score - m) and an unnormalised output accumulator (the rows of O).
 * Forward saves only the log-sum-exp of each query row (N floats per head);
 * backward recomputes each block of scores from Q, K and that log-sum-exp.
 *
 * Layout: exactly that of multi_head.c. One head's Q, K, V, O are [N, D_H]
 * blocks addressed through a row stride (leading dimension), so head h of
 * the [N, 3*H*D_H] matrix [Q|K|V] is used in place.
 *
 * Masks, as in chapters 04 and 05: causal (query i sees keys j <= i) and
 * key_len (keys j >= key_len are padding; key_len >= N or <= 0 means none),
 * the two rules of chapter 03's AttentionMask; the kernel asks
 * mask_key_limit (attention.h) where each row's keys end.
 * Every query row must see at least one key (always true here: key 0).
 *
 * Backward ACCUMULATES (+=) into dQ, dK, dV. No allocation inside: the
 * caller passes scratch of flash_attention_scratch_floats(Bq, Bk) floats. */
#ifndef FLASH_ATTENTION_H
#define FLASH_ATTENTION_H
#include <stddef.h>

/* Default block sizes used by the multi-head layer (multi_head.c). */
#define FLASH_BLOCK_Q 64
#define FLASH_BLOCK_K 64

/* Scratch floats forward or backward needs for one head at a time:
 * two [Bq, Bk] blocks and two [Bq] vectors. */
size_t flash_attention_scratch_floats(int Bq, int Bk);

/* What the kernel reads of one head: its blocks with their row strides,
 * the sizes, the masks and the block sizes. */
typedef struct {
    const float *Q; int ldq;   /* [N, D_H] the queries */
    const float *K; int ldk;   /* [N, D_H] the keys */
    const float *V; int ldv;   /* [N, D_H] the values */
    int N, D_H;
    int causal, key_len;       /* chapter 03's two rules (above) */
    int Bq, Bk;                /* queries and keys per block */
} FlashHead;

/* One head: h's Q, K, V -> O [N, D_H] (row stride ldo, written),
 * lse [N] (written: log sum_j exp(s_ij)). */
void flash_attention_forward(float *O, int ldo, float *lse, const FlashHead *h, float *scratch);

/* One head. dO [N, D_H] (lddo), and h, O, lse as forward saw / wrote them
 *   -> dQ, dK, dV [N, D_H] (row stride ldd each) +=. */
void flash_attention_backward(float *dQ, float *dK, float *dV, int ldd, const float *dO, int lddo,
                              const float *O, int ldo, const float *lse, const FlashHead *h, float *scratch);

/* The pieces the two functions above are made of, one block of query rows
 * at a time, for a later part that chooses for itself which keys a block of
 * queries sees (chapter 06's sparse attention, sparse_attention.h):
 *   forward:   flash_rows_start, flash_rows_fold over each range of keys, flash_rows_finish
 *   backward:  flash_rows_dvec, then flash_rows_backward over each range of keys
 * The state of the online softmax for the rows i0 .. i0+bq-1 (bq <= Bq): */
typedef struct {
    float *O; int ldo;   /* [bq, D_H] the rows' accumulator: row r is O's row i0 + r */
    float *m, *l;        /* [bq] the running maximum and sum */
    int i0, bq;
} FlashRows;

/* m = -inf, l = 0, the rows of O = 0. */
void flash_rows_start(const FlashRows *rows, int D_H);
/* Fold keys j_begin .. j_end-1 (h's masks still apply) into the rows, Bk at
 * a time; S: [Bq, Bk] floats of room. */
void flash_rows_fold(const FlashRows *rows, const FlashHead *h, int j_begin, int j_end, float *S);
/* O = O / l, lse_I [bq] = m + log(l) (a row must have seen a key: l > 0). */
void flash_rows_finish(const FlashRows *rows, float *lse_I, int D_H);
/* Dvec [bq] = sum_d dO_id O_id for the rows i0 .. i0+bq-1 (dO, O: whole [N, D_H]). */
void flash_rows_dvec(float *Dvec, const float *dO, int lddo, const float *O, int ldo, int i0, int bq, int D_H);
/* The rows i0 .. i0+bq-1 against keys j_begin .. j_end-1: dQ, dK, dV [N, D_H]
 * (whole, row stride ldd) +=; P, dP: [Bq, Bk] floats of room each. */
void flash_rows_backward(float *dQ, float *dK, float *dV, int ldd, const float *dO, int lddo, const float *lse,
                         const float *Dvec, const FlashHead *h, int i0, int bq, int j_begin, int j_end, float *P,
                         float *dP);

/* All sequences and heads, in multi_head.c's layout:
 *   QKV [B, N, 3*H*D_H] = [Q|K|V]  ->  Y [B, N, H*D_H] (written), lse [B, H, N] (written).
 * lens [B] or NULL: sequence b has lens[b] real positions (0 = all N). */
void flash_attention_forward_heads(float *Y, float *lse, const float *QKV,
                                   int B, int N, int H, int D_H, int causal, const int *lens,
                                   int Bq, int Bk, float *scratch);

/* dY [B, N, H*D_H], and QKV, Y, lse from forward  ->  dQKV [B, N, 3*H*D_H] +=. */
void flash_attention_backward_heads(float *dQKV, const float *dY, const float *QKV,
                                    const float *Y, const float *lse,
                                    int B, int N, int H, int D_H, int causal, const int *lens,
                                    int Bq, int Bk, float *scratch);

#endif
