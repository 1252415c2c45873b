/* linformer.h - chapter 06, part 5: Linformer (Wang et al. 2020), attention
 * whose keys and values are first squeezed along the SEQUENCE axis from N
 * positions to k << N rows, composed of chapter 05's steps and chapter 03's
 * heads.
 *
 * Full attention compares each of the N queries with each of the N keys:
 * an [N, N] map per head, N^2 work and memory. Linformer multiplies the
 * keys and the values by learned matrices E, F [k, N] before the heads, so
 * each query is compared with k mixtures of keys instead:
 *   1. [Q|K|V] = X W_QKV                       [N, 3 H D_H]   multi_head_qkv_forward
 *   1e. K~ = E K,  V~ = F V                    [k, H D_H]      (all heads share E, F)
 *   2.-3. Y_h = softmax(Q_h K~_h^T / sqrt(D_H)) V~_h   [N, D_H], A_h [N, k]  dot_attention_forward
 *   4. O = Y W_O + b_O                         [N, D]          multi_head_output_forward
 * Work and memory are O(N k) per head: linear in N at a fixed k.
 * Backward, after chapter 03's 3'-2' gave dK~, dV~:
 *   dK = E^T dK~,  dV = F^T dV~,  dE += dK~ K^T,  dF += dV~ V^T.
 *
 * The price, stated: E and F have N columns, one per position, so a model
 * is made for ONE length N (a ViT's tokens) and cannot read a longer
 * sequence; a shorter one (padding, or fewer tokens) uses E's and F's
 * first columns. Row r of E~ mixes every position, the later ones too, so
 * there is no causal mask: Linformer is an encoder's attention (the check
 * refuses a causal block). E and F start as mean pooling: row r averages
 * the r-th of k equal segments of the positions.
 *
 * The parameters are chapter 05's W_QKV | W_O | b_O followed by E [k, N]
 * then F [k, N] (the block's extra parameters). The block's map A [N, N]
 * is not formed (A_h [N, k] stays in the hook's cache). */
#ifndef LINFORMER_H
#define LINFORMER_H
#include <stddef.h>

#include "06_transformer/block.h"

/* k, the projected length, and N, the length E and F are made for. */
typedef struct {
    int k;
    int N;
} Linformer;

/* Returns 0, or -1 with fail() unless 1 <= k <= N. */
int linformer_check(const Linformer *l);

/* Returns 0, or -1 with fail() when a sequence of N positions is longer
 * than the N the projections were made for (the fixed-length limit). */
int linformer_check_length(const Linformer *l, int N);

/* The projections, shared by every head: E, F [k, N] (rows r N .. of each).
 *   K [N_x, ld] -> Kt [k, ldt] (written): Kt = E[:, :N_x] K   (N_x <= l->N)
 *   dKt [k, ldt] -> dK [N_x, ld] +=, dE [k, N] += (either may be NULL) */
void linformer_project_forward(float *Kt, int ldt, const float *E, const float *K, int ld, int width, int N_x,
                               const Linformer *l);
void linformer_project_backward(float *dK, int ld, float *dE, const float *dKt, int ldt, const float *K,
                                const float *E, int width, int N_x, const Linformer *l);

/* The block's self-attention of l (its options: l must outlive the block). */
BlockSelfAttention linformer_hook(const Linformer *l);
#endif
