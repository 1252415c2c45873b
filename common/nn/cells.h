/* cells.h - recurrent cells, one time step, batched over B sequences.
 *
 * All three share one shape convention (S is the state size: h and c have S
 * entries; in the project's table of names H means attention heads):
 *   x[B,I]     input at this step
 *   h_prev[B,S] hidden state from the previous step (c_prev too for the LSTM)
 *   h[B,S]     new hidden state
 * The cache holds what backward needs (gate activations); its size in floats
 * per batch row is given by *_cache_size(S). Backward accumulates into
 * dx, dh_prev (dc_prev) and the weight gradients; pass NULL to skip one.
 *
 * Weights: W_x [I, G*S], W_h [S, G*S], b [G*S], where G is the number of
 * gates (RNN 1, GRU 3, LSTM 4). Gate order in the columns:
 *   RNN : h = tanh(x W_x + h_prev W_h + b)
 *   GRU : [r | z | n]  (PyTorch's convention)
 *         r = sigmoid(x W_xr + h W_hr + b_r)
 *         z = sigmoid(x W_xz + h W_hz + b_z)
 *         n = tanh(x W_xn + r * (h W_hn) + b_n)   (b_n added outside the r product
 *                                                  here; PyTorch splits b_in/b_hn)
 *         h' = (1 - z) * n + z * h
 *   LSTM: [i | f | g | o]  (PyTorch's convention)
 *         c' = f * c + i * g ;  h' = o * tanh(c')
 *
 * mask[B] (may be NULL): where mask[b] == 0 the row keeps its previous state
 * (h = h_prev, c = c_prev) and passes gradients straight through; this is how
 * padded positions in a batch of different lengths are skipped. */
#ifndef CELLS_H
#define CELLS_H

typedef enum { CELL_RNN = 0, CELL_GRU = 1, CELL_LSTM = 2 } CellType;

/* "rnn", "gru", "lstm" -> type; returns -1 with fail() otherwise. */
int cell_type_parse(const char *name, CellType *out);
const char *cell_type_name(CellType t);
int cell_gates(CellType t);              /* G: 1, 3 or 4 */
int cell_cache_size(CellType t, int S);  /* floats per batch row */
int cell_has_c(CellType t);              /* 1 for the LSTM (a second state) */

/* What one step reads besides the weights: its type and sizes, the mask,
 * the input and the state before the step. */
typedef struct {
    CellType type;
    int B, I, S;            /* rows, input size, state size */
    const int *mask;        /* [B] or NULL: rows with mask 0 keep their state (above) */
    const float *x;         /* [B, I] */
    const float *h_prev;    /* [B, S] */
    const float *c_prev;    /* [B, S] the LSTM's cell state; NULL for the others */
} CellStep;

/* A cell's weights, or their gradients (a NULL field is skipped). */
typedef struct {
    float *W_x;   /* [I, G*S] */
    float *W_h;   /* [S, G*S] */
    float *b;     /* [G*S] */
} CellWeights;

/* One step of any cell type: st, w -> h [B, S] (and c [B, S] for the LSTM,
 * else NULL). cache: [B, cell_cache_size(t,S)]. scratch: [B, G*S] work
 * memory. */
void cell_forward(float *h, float *c, float *cache, float *scratch, const CellStep *st, const CellWeights *w);

/* dh: gradient w.r.t. h (and dc w.r.t. c for the LSTM; NULL otherwise) ->
 * dx [B, I] +=, dh_prev [B, S] +=, dc_prev +=, dw's fields += (any of them,
 * and dw, may be NULL). cache, st and w as forward saw them. scratch:
 * [B, 2*G*S] work memory. */
void cell_backward(float *dx, float *dh_prev, float *dc_prev, const CellWeights *dw, const float *dh,
                   const float *dc, const float *cache, float *scratch, const CellStep *st, const CellWeights *w);

/* The gradients backpropagation through time carries from step to step, each
 * [B, S]: w.r.t. the state after the step (dh, and dc for the LSTM) and before
 * it (dh_prev, dc_prev), the latter filled by cell_backward. */
typedef struct {
    float *dh, *dc, *dh_prev, *dc_prev;
} StateGrads;
void state_grads_alloc(StateGrads *g, int B, int S);   /* zero-filled */
void state_grads_free(StateGrads *g);
/* One step back in time: the _prev gradients become dh, dc (the buffers trade places). */
void state_grads_swap(StateGrads *g);

#endif
