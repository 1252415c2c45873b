/* flash_attention.c - chapter 05: fused attention with an online softmax
 * (see flash_attention.h).
 *
 * The online softmax. Output row i is sum_j exp(s_ij) v_j / sum_j exp(s_ij).
 * To keep exp() from overflowing, one subtracts the row maximum first; but we
 * see the keys one block at a time, so we only know the maximum of the
 * blocks seen so far, m. We therefore keep two running quantities per row,
 *   l = sum over seen keys of exp(s_ij - m)          (a number)
 *   O = sum over seen keys of exp(s_ij - m) v_j      (a row of D_H numbers)
 * both measured against the current m. When a new block brings a larger
 * maximum m_new, everything accumulated so far was measured against the old
 * m, and exp(s - m) = exp(s - m_new) * exp(m_new - m) tells how to convert:
 * multiply l and O by alpha = exp(m - m_new) (<= 1), then add the new block's
 * terms exp(s_ij - m_new) and exp(s_ij - m_new) v_j. After the last block,
 * O / l is exactly the softmax-weighted average, and m + log(l) is the row's
 * log-sum-exp, which is all backward needs to rebuild any block of weights:
 * a_ij = exp(s_ij - lse_i).
 *
 * Backward, per block of queries I and keys J (scores recomputed):
 *   S = Q_I K_J^T / sqrt(D_H),  P = exp(S - lse_I)           [Bq, Bk]
 *   dV_J += P^T dO_I
 *   dP    = dO_I V_J^T                                        [Bq, Bk]
 *   dS    = P * (dP - Dvec_I),   Dvec_i = sum_d dO_id O_id    (= sum_j a_ij dP_ij)
 *   dQ_I += dS K_J / sqrt(D_H),  dK_J += dS^T Q_I / sqrt(D_H)
 * Dvec is the softmax backward's row sum, computed from O instead of from the
 * whole row of A, which we no longer have. All block products go through
 * sgemm, so they use the chosen backend like every other layer. */
#include "05_multi_head_attention/flash_attention.h"

#include <math.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "kernels/matmul.h"
#include "kernels/vecmath.h"

size_t flash_attention_scratch_floats(int Bq, int Bk) {
    return 2 * (size_t)Bq * Bk + 2 * (size_t)Bq;
}

/* The masks are chapter 03's (attention.h): query row i may see keys
 * 0 .. mask_key_limit(&mask, i, N) - 1. The last row of a query block sees
 * the most keys, so the blocks of keys stop at its limit. */

/* ---------------------------------------------------- one block of query rows */

void flash_rows_start(const FlashRows *rows, int D_H) {
    for (int r = 0; r < rows->bq; r++) {
        rows->m[r] = -INFINITY;
        rows->l[r] = 0.0f;
        memset(rows->O + (size_t)r * rows->ldo, 0, sizeof(float) * (size_t)D_H);
    }
}

/* rows i0 .. i0+bq-1 += keys j_begin .. j_end-1, Bk keys at a time.
 * S: [Bq, Bk] scores, then weights. */
void flash_rows_fold(const FlashRows *rows, const FlashHead *h, int j_begin, int j_end, float *S) {
    const int i0 = rows->i0, bq = rows->bq, N = h->N, D_H = h->D_H, Bk = h->Bk;
    const float scale = 1.0f / sqrtf((float)D_H);
    const AttentionMask mask = {NULL, h->causal, h->key_len, 0};
    float *m = rows->m, *l = rows->l, *O_I = rows->O;
    const int ldo = rows->ldo;
    for (int j0 = j_begin; j0 < j_end; j0 += Bk) {
        const int bk = j_end - j0 < Bk ? j_end - j0 : Bk;
        /* S [bq, bk] = Q_I [bq, D_H] @ K_J^T [D_H, bk] / sqrt(D_H) */
        sgemm(0, 1, bq, bk, D_H, scale, h->Q + (size_t)i0 * h->ldq, h->ldq, h->K + (size_t)j0 * h->ldk, h->ldk,
              0.0f, S, bk);
        /* Exercise 05.online_softmax (3 bonus points): fold this block into each row's running m, l and O. */
        for (int r = 0; r < bq; r++) {
            float *s = S + (size_t)r * bk;
            /* keys j0 + c >= limit are masked: weight exactly 0 */
            int n_ok = mask_key_limit(&mask, i0 + r, N) - j0;
            if (n_ok > bk) n_ok = bk;
            if (n_ok <= 0) {                       /* the whole block is masked for this row */
                memset(s, 0, sizeof(float) * (size_t)bk);
                continue;
            }
            float m_new = m[r];
            for (int c = 0; c < n_ok; c++)
                if (s[c] > m_new) m_new = s[c];
            /* rescale what we have by alpha = exp(m_old - m_new); 0 before the first block */
            const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
            for (int c = 0; c < n_ok; c++) s[c] -= m_new;
            vec_exp(s, s, n_ok);                   /* p = exp(s - m_new) */
            for (int c = n_ok; c < bk; c++) s[c] = 0.0f;
            float sum = 0.0f;
            for (int c = 0; c < n_ok; c++) sum += s[c];
            l[r] = alpha * l[r] + sum;
            m[r] = m_new;
            if (alpha != 1.0f) {
                float *o = O_I + (size_t)r * ldo;
                for (int d = 0; d < D_H; d++) o[d] *= alpha;
            }
        }
        /* End of exercise 05.online_softmax. */
        /* O_I [bq, D_H] += P [bq, bk] @ V_J [bk, D_H] */
        sgemm(0, 0, bq, D_H, bk, 1.0f, S, bk, h->V + (size_t)j0 * h->ldv, h->ldv, 1.0f, O_I, ldo);
    }
}

/* O_I = O_I / l, lse_I [bq] = m + log(l) */
void flash_rows_finish(const FlashRows *rows, float *lse_I, int D_H) {
    /* Exercise 05.online_softmax, continued: normalise, O = O / l, and keep lse = m + log(l). */
    for (int r = 0; r < rows->bq; r++) {
        float *o = rows->O + (size_t)r * rows->ldo;
        const float inv = 1.0f / rows->l[r];
        for (int d = 0; d < D_H; d++) o[d] *= inv;
        lse_I[r] = rows->m[r] + logf(rows->l[r]);
    }
    /* End of exercise 05.online_softmax. */
}

/* Q [N, D_H] (ldq), K, V [N, D_H] (ldk, ldv) -> O [N, D_H] (ldo), lse [N].
 * scratch: S [Bq, Bk] | m [Bq] | l [Bq]. */
void flash_attention_forward(float *O, int ldo, float *lse, const FlashHead *h, float *scratch) {
    const int N = h->N, Bq = h->Bq;
    const AttentionMask mask = {NULL, h->causal, h->key_len, 0};
    float *S = scratch;                        /* [bq, bk] scores, then weights */
    float *m = S + (size_t)Bq * h->Bk;         /* [bq] running maximum */
    float *l = m + Bq;                         /* [bq] running sum of exp(s - m) */

    for (int i0 = 0; i0 < N; i0 += Bq) {
        const FlashRows rows = {O + (size_t)i0 * ldo, ldo, m, l, i0, N - i0 < Bq ? N - i0 : Bq};
        flash_rows_start(&rows, h->D_H);
        flash_rows_fold(&rows, h, 0, mask_key_limit(&mask, i0 + rows.bq - 1, N), S);   /* keys any row sees */
        flash_rows_finish(&rows, lse + i0, h->D_H);
    }
}

/* Dvec [bq] = rowsum(dO_I * O_I) */
void flash_rows_dvec(float *Dvec, const float *dO, int lddo, const float *O, int ldo, int i0, int bq, int D_H) {
    /* Exercise 05.flash_backward (3 bonus points): Dvec_i = dO_i . O_i, the softmax backward's row sum. */
    for (int r = 0; r < bq; r++) {
        const float *o = O + (size_t)(i0 + r) * ldo, *g = dO + (size_t)(i0 + r) * lddo;
        float acc = 0.0f;
        for (int d = 0; d < D_H; d++) acc += g[d] * o[d];
        Dvec[r] = acc;
    }
    /* End of exercise 05.flash_backward. */
}

/* Rows i0 .. i0+bq-1 against keys j_begin .. j_end-1: dQ_I, dK_J, dV_J +=.
 * P, dP: [Bq, Bk] each. */
void flash_rows_backward(float *dQ, float *dK, float *dV, int ldd, const float *dO, int lddo, const float *lse,
                         const float *Dvec, const FlashHead *h, int i0, int bq, int j_begin, int j_end, float *P,
                         float *dP) {
    const int ldq = h->ldq, ldk = h->ldk, ldv = h->ldv, N = h->N, D_H = h->D_H, Bk = h->Bk;
    const float scale = 1.0f / sqrtf((float)D_H);
    const AttentionMask mask = {NULL, h->causal, h->key_len, 0};
    const float *Q_I = h->Q + (size_t)i0 * ldq, *dO_I = dO + (size_t)i0 * lddo;
    float *dQ_I = dQ + (size_t)i0 * ldd;
    for (int j0 = j_begin; j0 < j_end; j0 += Bk) {
        const int bk = j_end - j0 < Bk ? j_end - j0 : Bk;
        const float *K_J = h->K + (size_t)j0 * ldk, *V_J = h->V + (size_t)j0 * ldv;
        /* S [bq, bk] = Q_I [bq, D_H] @ K_J^T [D_H, bk] / sqrt(D_H), into P */
        sgemm(0, 1, bq, bk, D_H, scale, Q_I, ldq, K_J, ldk, 0.0f, P, bk);
        /* P = exp(S - lse), masked pairs 0 */
        /* Exercise 05.flash_backward, continued: rebuild the block's weights, P = exp(S - lse). */
        for (int r = 0; r < bq; r++) {
            float *p = P + (size_t)r * bk;
            int n_ok = mask_key_limit(&mask, i0 + r, N) - j0;
            if (n_ok > bk) n_ok = bk;
            if (n_ok < 0) n_ok = 0;
            const float lse_r = lse[i0 + r];
            for (int c = 0; c < n_ok; c++) p[c] -= lse_r;
            vec_exp(p, p, n_ok);
            for (int c = n_ok; c < bk; c++) p[c] = 0.0f;
        }
        /* End of exercise 05.flash_backward. */
        /* dV_J [bk, D_H] += P^T [bk, bq] @ dO_I [bq, D_H] */
        sgemm(1, 0, bk, D_H, bq, 1.0f, P, bk, dO_I, lddo, 1.0f, dV + (size_t)j0 * ldd, ldd);
        /* dP [bq, bk] = dO_I [bq, D_H] @ V_J^T [D_H, bk] */
        sgemm(0, 1, bq, bk, D_H, 1.0f, dO_I, lddo, V_J, ldv, 0.0f, dP, bk);
        /* dS = P * (dP - Dvec), in dP's place (masked pairs: P = 0, so dS = 0) */
        /* Exercise 05.flash_backward, continued: dS = P * (dP - Dvec). */
        for (int r = 0; r < bq; r++) {
            const float *p = P + (size_t)r * bk;
            float *ds = dP + (size_t)r * bk;
            for (int c = 0; c < bk; c++) ds[c] = p[c] * (ds[c] - Dvec[r]);
        }
        /* End of exercise 05.flash_backward. */
        /* dQ_I [bq, D_H] += dS [bq, bk] @ K_J [bk, D_H] / sqrt(D_H) */
        sgemm(0, 0, bq, D_H, bk, scale, dP, bk, K_J, ldk, 1.0f, dQ_I, ldd);
        /* dK_J [bk, D_H] += dS^T [bk, bq] @ Q_I [bq, D_H] / sqrt(D_H) */
        sgemm(1, 0, bk, D_H, bq, scale, dP, bk, Q_I, ldq, 1.0f, dK + (size_t)j0 * ldd, ldd);
    }
}

/* dO [N, D_H] (lddo), Q, K, V, O [N, D_H], lse [N] -> dQ, dK, dV [N, D_H] (ldd) +=.
 * scratch: P [Bq, Bk] | dP [Bq, Bk] | Dvec [Bq]. */
void flash_attention_backward(float *dQ, float *dK, float *dV, int ldd, const float *dO, int lddo,
                              const float *O, int ldo, const float *lse, const FlashHead *h, float *scratch) {
    const int N = h->N, Bq = h->Bq;
    const AttentionMask mask = {NULL, h->causal, h->key_len, 0};
    float *P = scratch;                        /* [bq, bk] weights a_ij of the block */
    float *dP = P + (size_t)Bq * h->Bk;        /* [bq, bk] dL/da_ij, then dL/ds_ij */
    float *Dvec = dP + (size_t)Bq * h->Bk;     /* [bq] rowsum(dO * O) */

    for (int i0 = 0; i0 < N; i0 += Bq) {
        const int bq = N - i0 < Bq ? N - i0 : Bq;
        flash_rows_dvec(Dvec, dO, lddo, O, ldo, i0, bq, h->D_H);
        const int j_end = mask_key_limit(&mask, i0 + bq - 1, N);   /* keys any row of the block sees */
        flash_rows_backward(dQ, dK, dV, ldd, dO, lddo, lse, Dvec, h, i0, bq, 0, j_end, P, dP);
    }
}

static int seq_key_len(const int *lens, int b, int N) {
    return (lens && lens[b] > 0 && lens[b] < N) ? lens[b] : N;
}

/* QKV [B, N, 3 H D_H] -> Y [B, N, H D_H], lse [B, H, N] */
void flash_attention_forward_heads(float *Y, float *lse, const float *QKV,
                                   int B, int N, int H, int D_H, int causal, const int *lens,
                                   int Bq, int Bk, float *scratch) {
    const int HD = H * D_H, ld_qkv = 3 * HD;
    for (int b = 0; b < B; b++) {
        const float *QKV_b = QKV + (size_t)b * N * ld_qkv;
        float *Y_b = Y + (size_t)b * N * HD;
        const int key_len = seq_key_len(lens, b, N);
        for (int h = 0; h < H; h++) {
            const FlashHead head = {QKV_b + h * D_H, ld_qkv, QKV_b + HD + h * D_H, ld_qkv, QKV_b + 2 * HD + h * D_H,
                                    ld_qkv, N, D_H, causal, key_len, Bq, Bk};
            flash_attention_forward(Y_b + h * D_H, HD, lse + ((size_t)b * H + h) * N, &head, scratch);
        }
    }
}

/* dY [B, N, H D_H], QKV, Y, lse -> dQKV [B, N, 3 H D_H] += */
void flash_attention_backward_heads(float *dQKV, const float *dY, const float *QKV,
                                    const float *Y, const float *lse,
                                    int B, int N, int H, int D_H, int causal, const int *lens,
                                    int Bq, int Bk, float *scratch) {
    const int HD = H * D_H, ld_qkv = 3 * HD;
    for (int b = 0; b < B; b++) {
        const size_t off_qkv = (size_t)b * N * ld_qkv, off_y = (size_t)b * N * HD;
        const int key_len = seq_key_len(lens, b, N);
        for (int h = 0; h < H; h++) {
            float *dQKV_b = dQKV + off_qkv;
            const float *QKV_b = QKV + off_qkv;
            const FlashHead head = {QKV_b + h * D_H, ld_qkv, QKV_b + HD + h * D_H, ld_qkv, QKV_b + 2 * HD + h * D_H,
                                    ld_qkv, N, D_H, causal, key_len, Bq, Bk};
            flash_attention_backward(dQKV_b + h * D_H, dQKV_b + HD + h * D_H, dQKV_b + 2 * HD + h * D_H, ld_qkv,
                                     dY + off_y + h * D_H, HD, Y + off_y + h * D_H, HD,
                                     lse + ((size_t)b * H + h) * N, &head, scratch);
        }
    }
}
