/* sparse_attention.c - chapter 06, part 5: window, global and random
 * attention on chapter 05's fused kernel (see sparse_attention.h).
 *
 * The kernel is chapter 05's, one block of query rows at a time
 * (flash_rows_*): for query block bi, the key blocks of the layout are
 * folded in as runs of consecutive blocks (a window is one run), each run
 * clipped where the causal and padding rules end the block's keys. */
#include "06_transformer/sparse_attention.h"

#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "05_multi_head_attention/flash_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "06_transformer/rope_attention.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/util.h"

int sparse_pattern_check(const SparsePattern *p) {
    if (p->P < 1) return fail("sparse attention: block size %d: expected at least 1 position", p->P);
    if (p->window < 0 || p->global < 0 || p->random < 0)
        return fail("sparse attention: window %d, global %d, random %d: expected counts of blocks >= 0", p->window,
                    p->global, p->random);
    return 0;
}

/* Does query block bi see key block bj by the window or the global rule? */
static int fixed_rule(const SparsePattern *p, int causal, int bi, int bj) {
    const int d = bi - bj;
    const int window = causal ? (d >= 0 && d <= p->window) : (d <= p->window && -d <= p->window);
    return window || bi < p->global || bj < p->global;
}

int sparse_layout_create(SparseLayout *L, const SparsePattern *p, int N, int causal) {
    memset(L, 0, sizeof *L);
    if (sparse_pattern_check(p) != 0) return -1;
    if (N < 1) return fail("sparse attention: length %d: expected at least 1 position", N);
    const int nb = (N + p->P - 1) / p->P;
    *L = (SparseLayout){*p, N, causal != 0, nb, xmalloc(sizeof(int) * (size_t)(nb + 1)), NULL};
    int *seen = xmalloc(sizeof(int) * (size_t)nb), *others = xmalloc(sizeof(int) * (size_t)nb);
    /* a global query block sees every block, another at most 2w + 1 + g + r */
    const int g_rows = p->global < nb ? p->global : nb;
    const size_t per_row = (size_t)2 * p->window + 1 + p->global + p->random;
    size_t used = 0;
    L->keys = xmalloc(sizeof(int) * ((size_t)g_rows * nb + (size_t)(nb - g_rows) * (per_row < (size_t)nb ? per_row : (size_t)nb)));
    Rng rng;
    rng_seed(&rng, p->seed, 0x5ba25e);
    for (int bi = 0; bi < nb; bi++) {
        const int last = L->causal ? bi : nb - 1;   /* a causal query block sees no later one */
        int n_others = 0;
        for (int bj = 0; bj < nb; bj++) {
            seen[bj] = bj <= last && fixed_rule(p, L->causal, bi, bj);
            if (!seen[bj] && bj <= last) others[n_others++] = bj;
        }
        /* r of the others, drawn: the first r of a shuffle (all when fewer) */
        rng_shuffle(&rng, others, n_others);
        for (int t = 0; t < p->random && t < n_others; t++) seen[others[t]] = 1;
        L->first[bi] = (int)used;
        for (int bj = 0; bj < nb; bj++)
            if (seen[bj]) L->keys[used++] = bj;
    }
    L->first[nb] = (int)used;
    free(seen);
    free(others);
    return 0;
}

void sparse_layout_free(SparseLayout *L) {
    free(L->first);
    free(L->keys);
    memset(L, 0, sizeof *L);
}

int sparse_allows(const SparseLayout *L, int i, int j) {
    if (L->causal && j > i) return 0;
    const int bi = i / L->p.P, bj = j / L->p.P;
    for (int k = L->first[bi]; k < L->first[bi + 1]; k++)
        if (L->keys[k] == bj) return 1;
    return 0;
}

double sparse_density(const SparseLayout *L, int N) {
    double pairs = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < (L->causal ? i + 1 : N); j++) pairs += sparse_allows(L, i, j);
    return pairs / (L->causal ? 0.5 * N * (N + 1.0) : (double)N * N);
}

size_t sparse_attention_block_floats(const SparseLayout *L) {
    return flash_attention_scratch_floats(L->p.P, L->p.P);
}

/* Calls fn on each run of consecutive key blocks query block bi sees,
 * as the positions [j_begin, j_end), clipped at limit. */
typedef struct {
    const SparseLayout *L;
    int bi, limit;
    int k;   /* the next entry of the layout's list */
} KeyRuns;

static int next_run(KeyRuns *it, int *j_begin, int *j_end) {
    const SparseLayout *L = it->L;
    const int stop = L->first[it->bi + 1], P = L->p.P;
    while (it->k < stop) {
        const int b0 = L->keys[it->k];
        int b1 = b0 + 1;
        for (it->k++; it->k < stop && L->keys[it->k] == b1; it->k++) b1++;
        *j_begin = b0 * P;
        *j_end = b1 * P < it->limit ? b1 * P : it->limit;
        if (*j_begin < *j_end) return 1;
    }
    return 0;
}

/* One head: FlashHead h (Bq = Bk = P) -> O [N, D_H] (ldo), lse [N]. */
static void head_forward(float *O, int ldo, float *lse, const FlashHead *h, const SparseLayout *L, float *scratch) {
    const int P = L->p.P, N = h->N;
    const AttentionMask mask = {NULL, h->causal, h->key_len, 0};
    float *S = scratch, *m = S + (size_t)P * P, *l = m + P;
    for (int i0 = 0, bi = 0; i0 < N; i0 += P, bi++) {
        const FlashRows rows = {O + (size_t)i0 * ldo, ldo, m, l, i0, N - i0 < P ? N - i0 : P};
        flash_rows_start(&rows, h->D_H);
        KeyRuns it = {L, bi, mask_key_limit(&mask, i0 + rows.bq - 1, N), L->first[bi]};
        int j_begin, j_end;
        while (next_run(&it, &j_begin, &j_end)) flash_rows_fold(&rows, h, j_begin, j_end, S);
        for (int r = 0; r < rows.bq; r++)
            if (l[r] == 0.0f) l[r] = 1.0f;   /* a row that saw no key: O stays 0 (and lse = m, unread) */
        flash_rows_finish(&rows, lse + i0, h->D_H);
    }
}

/* One head: dO, O, lse -> dQ, dK, dV [N, D_H] (ldd) +=. */
static void head_backward(float *dQ, float *dK, float *dV, int ldd, const float *dO, int lddo, const float *O,
                          int ldo, const float *lse, const FlashHead *h, const SparseLayout *L, float *scratch) {
    const int P = L->p.P, N = h->N;
    const AttentionMask mask = {NULL, h->causal, h->key_len, 0};
    float *Pb = scratch, *dP = Pb + (size_t)P * P, *Dvec = dP + (size_t)P * P;
    for (int i0 = 0, bi = 0; i0 < N; i0 += P, bi++) {
        const int bq = N - i0 < P ? N - i0 : P;
        flash_rows_dvec(Dvec, dO, lddo, O, ldo, i0, bq, h->D_H);
        KeyRuns it = {L, bi, mask_key_limit(&mask, i0 + bq - 1, N), L->first[bi]};
        int j_begin, j_end;
        while (next_run(&it, &j_begin, &j_end))
            flash_rows_backward(dQ, dK, dV, ldd, dO, lddo, lse, Dvec, h, i0, bq, j_begin, j_end, Pb, dP);
    }
}

static int seq_key_len(const int *lens, int b, int N) {
    return (lens && lens[b] > 0 && lens[b] < N) ? lens[b] : N;
}

/* Head h of sequence b of QKV [B, N, 3 H D_H], as the kernel reads it. */
static FlashHead head_of(const float *QKV_b, int h, int N, int H, int D_H, int key_len, const SparseLayout *L) {
    const int HD = H * D_H, ld = 3 * HD;
    return (FlashHead){QKV_b + h * D_H, ld, QKV_b + HD + h * D_H, ld, QKV_b + 2 * HD + h * D_H, ld,
                       N, D_H, L->causal, key_len, L->p.P, L->p.P};
}

/* QKV [B, N, 3 H D_H] -> Y [B, N, H D_H], lse [B, H, N] */
void sparse_attention_forward_heads(float *Y, float *lse, const float *QKV, int B, int N, int H, int D_H,
                                    const int *lens, const SparseLayout *L, float *scratch) {
    const int HD = H * D_H;
    for (int b = 0; b < B; b++) {
        const float *QKV_b = QKV + (size_t)b * N * 3 * HD;
        for (int h = 0; h < H; h++) {
            const FlashHead head = head_of(QKV_b, h, N, H, D_H, seq_key_len(lens, b, N), L);
            head_forward(Y + (size_t)b * N * HD + h * D_H, HD, lse + ((size_t)b * H + h) * N, &head, L, scratch);
        }
    }
}

/* dY [B, N, H D_H], QKV, Y, lse -> dQKV [B, N, 3 H D_H] += */
void sparse_attention_backward_heads(float *dQKV, const float *dY, const float *QKV, const float *Y,
                                     const float *lse, int B, int N, int H, int D_H, const int *lens,
                                     const SparseLayout *L, float *scratch) {
    const int HD = H * D_H, ld = 3 * HD;
    for (int b = 0; b < B; b++) {
        const size_t off_qkv = (size_t)b * N * ld, off_y = (size_t)b * N * HD;
        float *dQKV_b = dQKV + off_qkv;
        for (int h = 0; h < H; h++) {
            const FlashHead head = head_of(QKV + off_qkv, h, N, H, D_H, seq_key_len(lens, b, N), L);
            head_backward(dQKV_b + h * D_H, dQKV_b + HD + h * D_H, dQKV_b + 2 * HD + h * D_H, ld,
                          dY + off_y + h * D_H, HD, Y + off_y + h * D_H, HD, lse + ((size_t)b * H + h) * N,
                          &head, L, scratch);
        }
    }
}

/* ------------------------------------------------- the block's self-attention */

static int hook_check(const void *options, const MultiHeadSpec *s, int causal, int cross) {
    const SparseAttention *a = options;
    const SparseLayout *L = a->layout;
    if (cross) return fail("sparse attention is a self-attention: a decoder block's cross-attention is chapter 05's");
    if (causal != L->causal)
        return fail("sparse attention: its layout was made %s, the block is %s", L->causal ? "causal" : "not causal",
                    causal ? "causal" : "not causal");
    return a->rope ? rope_attention_check(s) : multi_head_spec_check(s);
}

static size_t hook_extra_params(const void *options, const MultiHeadSpec *s) {
    (void)options;
    (void)s;
    return 0;   /* chapter 05's W_QKV, W_O, b_O only */
}

static void hook_init(const void *options, float *extra, const MultiHeadSpec *s) {
    (void)options;
    (void)extra;
    (void)s;
}

/* [Q|K|V] [R, 3 H D_H] | Y [R, H D_H] | lse [B, H, N] | the kernel's block */
static size_t hook_cache_floats(const void *options, const MultiHeadSpec *s, int B, int N) {
    const SparseAttention *a = options;
    return (size_t)B * N * 4 * s->H * s->D_H + (size_t)B * s->H * N + sparse_attention_block_floats(a->layout);
}

/* d[Q|K|V] | dY | the kernel's block */
static size_t hook_scratch_floats(const void *options, const MultiHeadSpec *s, int B, int N) {
    const SparseAttention *a = options;
    return (size_t)B * N * 4 * s->H * s->D_H + sparse_attention_block_floats(a->layout);
}

/* X [B, N, D] -> O [B, N, D]; A is not formed */
static void hook_forward(const void *options, float *O, float *A, const float *keep, float *cache, const float *X,
                         const MultiHeadSpec *s, const MultiHeadWeights *w, const float *extra, int causal,
                         const int *lens, int B, int N) {
    (void)A;
    (void)keep;
    (void)extra;
    (void)causal;   /* the layout's (checked) */
    const SparseAttention *a = options;
    const int R = B * N, HD = s->H * s->D_H;
    float *QKV = cache, *Y = cache + (size_t)R * 3 * HD, *lse = Y + (size_t)R * HD;
    multi_head_qkv_forward(QKV, X, s, w, R);                                            /* 1. [Q|K|V] = X W_QKV */
    if (a->rope) rope_attention_rotate(QKV, s->H, s->D_H, B, N, 0);                     /*    Q_h, K_h rotated */
    sparse_attention_forward_heads(Y, lse, QKV, B, N, s->H, s->D_H, lens, a->layout,
                                   lse + (size_t)B * s->H * N);                         /* 2.-3. on the pattern */
    multi_head_output_forward(O, Y, s, w, R);                                           /* 4. O = Y W_O + b_O */
}

/* dO [B, N, D] -> dX +=, dw += */
static void hook_backward(const void *options, float *dX, MultiHeadWeights *dw, float *dextra, float *scratch,
                          const float *dO, const float *A, const float *keep, const float *cache, const float *X,
                          const MultiHeadSpec *s, const MultiHeadWeights *w, const float *extra, int causal,
                          const int *lens, int B, int N) {
    (void)dextra;
    (void)A;
    (void)keep;
    (void)extra;
    (void)causal;
    const SparseAttention *a = options;
    const int R = B * N, HD = s->H * s->D_H, ld_qkv = 3 * HD;
    const float *QKV = cache, *Y = cache + (size_t)R * ld_qkv, *lse = Y + (size_t)R * HD;
    float *dQKV = scratch, *dY = scratch + (size_t)R * ld_qkv;
    multi_head_output_backward(dY, dw, dO, Y, s, w, R);                                 /* 4'. dY, dW_O, db_O */
    memset(dQKV, 0, sizeof(float) * (size_t)R * ld_qkv);
    sparse_attention_backward_heads(dQKV, dY, QKV, Y, lse, B, N, s->H, s->D_H, lens, a->layout,
                                    dY + (size_t)R * HD);                               /* 3'.-2'. */
    if (a->rope) rope_attention_rotate(dQKV, s->H, s->D_H, B, N, 1);                    /*    d[Q|K] turned back */
    multi_head_qkv_backward(dX, dw ? dw->W_QKV : NULL, dQKV, X, s, w, R);               /* 1'. dW_QKV, dX */
}

BlockSelfAttention sparse_attention_hook(const SparseAttention *a) {
    return (BlockSelfAttention){"sparse self-attention", a, hook_check, hook_extra_params, hook_init,
                                hook_cache_floats, hook_scratch_floats, hook_forward, hook_backward};
}
