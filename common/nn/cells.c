/* cells.c - one time step of an RNN, GRU or LSTM cell, batched over B rows
 * (see cells.h for the equations, gate order and mask semantics).
 *
 * Forward, for every cell type:
 *   1. gate pre-activations  a[B, G*S] = x W_x + h_prev W_h + b   (two sgemms)
 *   2. element-wise gate math per row, writing h (and c) and the cache; the
 *      sigmoids and tanhs run over whole gate slices with vec_sigmoid and
 *      vec_tanh (vecmath.h: libm on the naive backend, 8 at a time on avx2).
 *   3. masked rows (mask[b] == 0) copy h_prev (c_prev) instead.
 * Backward reverses step 2 into da[B, G*S] (zero for masked rows), and then
 * the same four products give every gradient:
 *   dx += da W_x^T,  dW_x += x^T da,  db += sum_b da,
 *   dh_prev += da_h W_h^T,  dW_h += h_prev^T da_h.
 * da_h is the gradient w.r.t. (h_prev W_h); it equals da except in the GRU's
 * n columns, where h_prev W_hn is multiplied by r before it joins the sum.
 *
 * Cache per batch row (cell_cache_size floats):
 *   RNN : [h]                    the tanh output, S
 *   GRU : [r | z | n | hn]       hn = h_prev W_hn, 4S
 *   LSTM: [i | f | g | o | tc]   tc = tanh(c), 5S
 *
 * At the end: StateGrads, the state gradients backpropagation through time
 * carries from one step to the one before (used by chapter 01's encoder and
 * decoder). */
#include "nn/cells.h"
#include "util/error.h"
#include "kernels/matmul.h"
#include "kernels/vecmath.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cell_type_parse(const char *name, CellType *out) {
    if (name != NULL) {
        if (strcmp(name, "rnn") == 0) { *out = CELL_RNN; return 0; }
        if (strcmp(name, "gru") == 0) { *out = CELL_GRU; return 0; }
        if (strcmp(name, "lstm") == 0) { *out = CELL_LSTM; return 0; }
    }
    return fail("unknown cell type '%s': expected rnn, gru or lstm", name ? name : "(null)");
}

const char *cell_type_name(CellType t) {
    switch (t) {
    case CELL_RNN: return "rnn";
    case CELL_GRU: return "gru";
    case CELL_LSTM: return "lstm";
    }
    return "unknown";
}

int cell_gates(CellType t) {
    switch (t) {
    case CELL_RNN: return 1;
    case CELL_GRU: return 3;
    case CELL_LSTM: return 4;
    }
    return 0;
}

int cell_cache_size(CellType t, int S) {
    switch (t) {
    case CELL_RNN: return S;
    case CELL_GRU: return 4 * S;
    case CELL_LSTM: return 5 * S;
    }
    return 0;
}

int cell_has_c(CellType t) { return t == CELL_LSTM; }

static int row_is_active(const int *mask, int b) { return mask == NULL || mask[b] != 0; }

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */
/* ------------------------------------------------------------------------ */

/* x[B,I], h_prev[B,S], W_x[I,S], W_h[S,S], b[S] -> h[B,S], cache[B,S]
 * scratch[B,S] holds the pre-activation a. */
static void rnn_forward(float *h, float *cache, float *a,
                        const float *x, const float *h_prev,
                        const float *W_x, const float *W_h, const float *bias,
                        const int *mask, int B, int I, int S) {
    matmul(a, x, W_x, B, S, I, 0);
    matmul(a, h_prev, W_h, B, S, S, 1);
    for (int b = 0; b < B; b++) {
        const float *ar = a + (size_t)b * S;
        float *cr = cache + (size_t)b * S;
        float *hr = h + (size_t)b * S;
        const float *hp = h_prev + (size_t)b * S;
        for (int j = 0; j < S; j++) cr[j] = ar[j] + bias[j];
        vec_tanh(cr, cr, S);
        for (int j = 0; j < S; j++) hr[j] = row_is_active(mask, b) ? cr[j] : hp[j];
    }
}

/* x[B,I], h_prev[B,S], W_x[I,3S], W_h[S,3S], b[3S] -> h[B,S], cache[B,4S]
 * scratch[B,3S] holds a = x W_x + b, plus h_prev W_h in the r and z columns.
 * h_prev W_hn goes straight into the cache's hn slot (it is needed apart,
 * because r multiplies it): a strided sgemm writes into [B,4S] at column 3S. */
static void gru_forward(float *h, float *cache, float *a,
                        const float *x, const float *h_prev,
                        const float *W_x, const float *W_h, const float *bias,
                        const int *mask, int B, int I, int S) {
    int G3 = 3 * S, C4 = 4 * S;
    matmul(a, x, W_x, B, G3, I, 0);
    /* a[:, 0:2S] += h_prev @ W_h[:, 0:2S]   (W_h rows are 3S long) */
    sgemm(0, 0, B, 2 * S, S, 1.0f, h_prev, S, W_h, G3, 1.0f, a, G3);
    /* cache[:, 3S:4S] = h_prev @ W_h[:, 2S:3S] */
    sgemm(0, 0, B, S, S, 1.0f, h_prev, S, W_h + 2 * S, G3, 0.0f, cache + 3 * S, C4);
    /* Exercise 01.gru_step (4 points): the GRU's gates r, z, n and its new state h', row by row. */
    for (int b = 0; b < B; b++) {
        const float *ar = a + (size_t)b * G3;
        float *r = cache + (size_t)b * C4, *z = r + S, *n = r + 2 * S;
        const float *hn = r + 3 * S;
        const float *hp = h_prev + (size_t)b * S;
        float *hr = h + (size_t)b * S;
        /* r, z: sigmoid over the 2S contiguous columns [r | z] */
        for (int j = 0; j < 2 * S; j++) r[j] = ar[j] + bias[j];
        vec_sigmoid(r, r, 2 * S);
        /* n = tanh(a_n + b_n + r * hn) */
        for (int j = 0; j < S; j++) n[j] = ar[2 * S + j] + bias[2 * S + j] + r[j] * hn[j];
        vec_tanh(n, n, S);
        for (int j = 0; j < S; j++) {
            float h_new = (1.0f - z[j]) * n[j] + z[j] * hp[j];
            hr[j] = row_is_active(mask, b) ? h_new : hp[j];
        }
    }
    /* End of exercise 01.gru_step. */
}

/* x[B,I], h_prev[B,S], c_prev[B,S], W_x[I,4S], W_h[S,4S], b[4S]
 *   -> h[B,S], c[B,S], cache[B,5S];  scratch[B,4S] holds a. */
static void lstm_forward(float *h, float *c, float *cache, float *a,
                         const float *x, const float *h_prev, const float *c_prev,
                         const float *W_x, const float *W_h, const float *bias,
                         const int *mask, int B, int I, int S) {
    int G4 = 4 * S, C5 = 5 * S;
    matmul(a, x, W_x, B, G4, I, 0);
    matmul(a, h_prev, W_h, B, G4, S, 1);
    for (int b = 0; b < B; b++) {
        const float *ar = a + (size_t)b * G4;
        float *in_gate = cache + (size_t)b * C5, *forget = in_gate + S, *g = in_gate + 2 * S;
        float *out_gate = in_gate + 3 * S, *tc = in_gate + 4 * S;
        const float *hp = h_prev + (size_t)b * S, *cp = c_prev + (size_t)b * S;
        float *hr = h + (size_t)b * S, *cr = c + (size_t)b * S;
        int active = row_is_active(mask, b);
        /* the four gates [i | f | g | o] are contiguous in the cache */
        for (int j = 0; j < 4 * S; j++) in_gate[j] = ar[j] + bias[j];
        vec_sigmoid(in_gate, in_gate, 2 * S);   /* i, f */
        vec_tanh(g, g, S);
        vec_sigmoid(out_gate, out_gate, S);
        for (int j = 0; j < S; j++) {
            float c_new = forget[j] * cp[j] + in_gate[j] * g[j];
            tc[j] = c_new;
            cr[j] = active ? c_new : cp[j];
        }
        vec_tanh(tc, tc, S);
        for (int j = 0; j < S; j++) hr[j] = active ? out_gate[j] * tc[j] : hp[j];
    }
}

void cell_forward(float *h, float *c, float *cache, float *scratch, const CellStep *st, const CellWeights *w) {
    const float *x = st->x, *h_prev = st->h_prev, *c_prev = st->c_prev;
    const float *W_x = w->W_x, *W_h = w->W_h, *b = w->b;
    const int *mask = st->mask;
    const int B = st->B, I = st->I, S = st->S;
    switch (st->type) {
    case CELL_RNN: rnn_forward(h, cache, scratch, x, h_prev, W_x, W_h, b, mask, B, I, S); break;
    case CELL_GRU: gru_forward(h, cache, scratch, x, h_prev, W_x, W_h, b, mask, B, I, S); break;
    case CELL_LSTM:
        lstm_forward(h, c, cache, scratch, x, h_prev, c_prev, W_x, W_h, b, mask, B, I, S);
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                  */
/* ------------------------------------------------------------------------ */

/* The shared tail. da[B,GS]: gradient w.r.t. x W_x + b; da_h[B,GS]: gradient
 * w.r.t. h_prev W_h. Accumulates into the (non-NULL) parameter and input
 * gradients. */
static void cell_backward_products(float *dx, float *dh_prev, float *dW_x, float *dW_h, float *db,
                                   const float *da, const float *da_h,
                                   const float *x, const float *h_prev,
                                   const float *W_x, const float *W_h, int B, int I, int S, int G) {
    int GS = G * S;
    if (dx) matmul_nt(dx, da, W_x, B, I, GS, 1);              /* [B,GS] @ [I,GS]^T */
    if (dh_prev) matmul_nt(dh_prev, da_h, W_h, B, S, GS, 1);  /* [B,GS] @ [S,GS]^T */
    if (dW_x) matmul_tn(dW_x, x, da, I, GS, B, 1);            /* [B,I]^T @ [B,GS] */
    if (dW_h) matmul_tn(dW_h, h_prev, da_h, S, GS, B, 1);     /* [B,S]^T @ [B,GS] */
    if (db)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < GS; j++) db[j] += da[(size_t)b * GS + j];
}

/* h = tanh(a): da = dh (1 - h^2). */
static void rnn_backward_gates(float *da, float *dh_prev, const float *dh, const float *cache,
                               const int *mask, int B, int S) {
    for (int b = 0; b < B; b++) {
        const float *hr = cache + (size_t)b * S;
        const float *g = dh ? dh + (size_t)b * S : NULL;
        float *dar = da + (size_t)b * S;
        int active = row_is_active(mask, b);
        for (int j = 0; j < S; j++) {
            float grad = g ? g[j] : 0.0f;
            if (active) {
                dar[j] = grad * (1.0f - hr[j] * hr[j]);
            } else {
                dar[j] = 0.0f;
                if (dh_prev) dh_prev[(size_t)b * S + j] += grad;   /* h = h_prev */
            }
        }
    }
}

/* h' = (1 - z) n + z h_prev,  n = tanh(a_n + r hn),  r = sig(a_r),  z = sig(a_z):
 *   dn = dh (1 - z)        dz = dh (h_prev - n)       dh_prev += dh z (direct path)
 *   da_n = dn (1 - n^2)    d(hn) = da_n r             dr = da_n hn
 *   da_r = dr r (1 - r)    da_z = dz z (1 - z)
 * da = [da_r | da_z | da_n],  da_h = [da_r | da_z | da_n r]. */
static void gru_backward_gates(float *da, float *da_h, float *dh_prev, const float *dh,
                               const float *cache, const float *h_prev,
                               const int *mask, int B, int S) {
    int G3 = 3 * S, C4 = 4 * S;
    /* Exercise 01.gru_step, continued: the GRU step's backward, from dh to da, da_h and dh_prev. */
    for (int b = 0; b < B; b++) {
        const float *r = cache + (size_t)b * C4, *z = r + S, *n = r + 2 * S, *hn = r + 3 * S;
        const float *hp = h_prev + (size_t)b * S;
        const float *g = dh ? dh + (size_t)b * S : NULL;
        float *dar = da + (size_t)b * G3, *dahr = da_h + (size_t)b * G3;
        float *dhp = dh_prev ? dh_prev + (size_t)b * S : NULL;
        int active = row_is_active(mask, b);
        for (int j = 0; j < S; j++) {
            float grad = g ? g[j] : 0.0f;
            if (!active) {
                dar[j] = dar[S + j] = dar[2 * S + j] = 0.0f;
                dahr[j] = dahr[S + j] = dahr[2 * S + j] = 0.0f;
                if (dhp) dhp[j] += grad;
                continue;
            }
            float dn = grad * (1.0f - z[j]);
            float dz = grad * (hp[j] - n[j]);
            float da_n = dn * (1.0f - n[j] * n[j]);
            float dr = da_n * hn[j];
            float da_r = dr * r[j] * (1.0f - r[j]);
            float da_z = dz * z[j] * (1.0f - z[j]);
            dar[j] = dahr[j] = da_r;
            dar[S + j] = dahr[S + j] = da_z;
            dar[2 * S + j] = da_n;
            dahr[2 * S + j] = da_n * r[j];
            if (dhp) dhp[j] += grad * z[j];
        }
    }
    /* End of exercise 01.gru_step. */
}

/* c' = f c + i g,  h' = o tanh(c'):
 *   do = dh tanh(c')         dct = dc + dh o (1 - tanh(c')^2)   (total dL/dc')
 *   di = dct g   df = dct c_prev   dg = dct i   dc_prev += dct f
 *   da_i = di i (1 - i)  da_f = df f (1 - f)  da_g = dg (1 - g^2)  da_o = do o (1 - o) */
static void lstm_backward_gates(float *da, float *dh_prev, float *dc_prev,
                                const float *dh, const float *dc,
                                const float *cache, const float *c_prev,
                                const int *mask, int B, int S) {
    int G4 = 4 * S, C5 = 5 * S;
    for (int b = 0; b < B; b++) {
        const float *in_gate = cache + (size_t)b * C5, *forget = in_gate + S, *g = in_gate + 2 * S;
        const float *out_gate = in_gate + 3 * S, *tc = in_gate + 4 * S;
        const float *cp = c_prev + (size_t)b * S;
        float *dar = da + (size_t)b * G4;
        int active = row_is_active(mask, b);
        for (int j = 0; j < S; j++) {
            float grad_h = dh ? dh[(size_t)b * S + j] : 0.0f;
            float grad_c = dc ? dc[(size_t)b * S + j] : 0.0f;
            if (!active) {
                dar[j] = dar[S + j] = dar[2 * S + j] = dar[3 * S + j] = 0.0f;
                if (dh_prev) dh_prev[(size_t)b * S + j] += grad_h;
                if (dc_prev) dc_prev[(size_t)b * S + j] += grad_c;
                continue;
            }
            float d_out = grad_h * tc[j];
            float dct = grad_c + grad_h * out_gate[j] * (1.0f - tc[j] * tc[j]);
            float d_in = dct * g[j];
            float d_forget = dct * cp[j];
            float d_g = dct * in_gate[j];
            if (dc_prev) dc_prev[(size_t)b * S + j] += dct * forget[j];
            dar[j] = d_in * in_gate[j] * (1.0f - in_gate[j]);
            dar[S + j] = d_forget * forget[j] * (1.0f - forget[j]);
            dar[2 * S + j] = d_g * (1.0f - g[j] * g[j]);
            dar[3 * S + j] = d_out * out_gate[j] * (1.0f - out_gate[j]);
        }
    }
}

void cell_backward(float *dx, float *dh_prev, float *dc_prev, const CellWeights *dw, const float *dh,
                   const float *dc, const float *cache, float *scratch, const CellStep *st, const CellWeights *w) {
    const CellType t = st->type;
    const float *x = st->x, *h_prev = st->h_prev, *c_prev = st->c_prev;
    const float *W_x = w->W_x, *W_h = w->W_h;
    float *dW_x = dw ? dw->W_x : NULL, *dW_h = dw ? dw->W_h : NULL, *db = dw ? dw->b : NULL;
    const int *mask = st->mask;
    const int B = st->B, I = st->I, S = st->S;
    int G = cell_gates(t);
    float *da = scratch;                               /* [B, G*S] */
    float *da_h = da;                                  /* same except for the GRU */
    switch (t) {
    case CELL_RNN:
        rnn_backward_gates(da, dh_prev, dh, cache, mask, B, S);
        break;
    case CELL_GRU:
        da_h = scratch + (size_t)B * G * S;            /* second half of scratch */
        gru_backward_gates(da, da_h, dh_prev, dh, cache, h_prev, mask, B, S);
        break;
    case CELL_LSTM:
        lstm_backward_gates(da, dh_prev, dc_prev, dh, dc, cache, c_prev, mask, B, S);
        break;
    }
    cell_backward_products(dx, dh_prev, dW_x, dW_h, db, da, da_h, x, h_prev, W_x, W_h, B, I, S, G);
}

/* ------------------------------------------------------------------------ */
/* State gradients for backpropagation through time                          */
/* ------------------------------------------------------------------------ */

void state_grads_alloc(StateGrads *g, int B, int S) {
    g->dh = xcalloc((size_t)B * S, sizeof(float));
    g->dc = xcalloc((size_t)B * S, sizeof(float));
    g->dh_prev = xcalloc((size_t)B * S, sizeof(float));
    g->dc_prev = xcalloc((size_t)B * S, sizeof(float));
}

void state_grads_free(StateGrads *g) {
    free(g->dh); free(g->dc); free(g->dh_prev); free(g->dc_prev);
}

void state_grads_swap(StateGrads *g) {
    float *swap = g->dh; g->dh = g->dh_prev; g->dh_prev = swap;
    swap = g->dc; g->dc = g->dc_prev; g->dc_prev = swap;
}
