/* transformer.h - chapter 06: the encoder-decoder transformer (Vaswani et
 * al. 2017), as a model of the seq2seq driver, so it trains on the same
 * tasks with the same flags, tables, beam search and plots as chapters 01-03.
 *
 * Lecture notation, a source x_1..x_T and a target prefix y_0 = <bos>, y_1..:
 *   encoder:  X_0 = sqrt(D) E_src[x_t] + P[t]          P: chapter 04's positions (rope: no P,
 *                                                      the self-attentions rotate Q and K by t)
 *             X_l = EncoderBlock_l(X_{l-1})            l = 1..L  (self-attention, MLP)
 *             M   = Norm(X_L)   (pre-norm stacks end with a norm; post-norm: M = X_L)
 *   decoder:  Y_0 = sqrt(D) E_tgt[y_t] + P[t]
 *             Y_l = DecoderBlock_l(Y_{l-1}, M)         causal self-attention,
 *                                                      cross-attention to M, MLP
 *             p(y_{t+1} | y_0..y_t, x) = softmax(Norm(Y_L)[t] W_out + b_out)
 * Training is teacher-forced: every target position in one pass, the causal
 * mask keeping position t from seeing y_{t+1}... The loss is the
 * cross-entropy per target token; with label smoothing eps the gradient is
 * that of the cross-entropy against (1 - eps) one-hot + eps / V, and the
 * loss REPORTED stays the plain cross-entropy, comparable with chapters 01-03.
 *
 * Decoding keeps, per row and per decoder block, the keys and values of the
 * positions generated so far (the KV cache, block.h), and the memory's keys
 * and values per block computed once per source: a step costs O(t) per
 * block instead of re-running the whole prefix. kv_cache = 0 recomputes the
 * prefix at every step (the reference the tests compare against).
 *
 * Parameter names: src_emb [V_src, D], tgt_emb [V_tgt, D], src_pos/tgt_pos
 * (learned positions), enc<l>.* and dec<l>.* (block.h's tensors, one
 * contiguous tensor per block), enc_norm.*, dec_norm.*, out.W [D, V_tgt], out.b.
 * With batch norm (norm_type=batchnorm) the two stacks' running statistics
 * are saved beside them as enc.running_mean, enc.running_var,
 * dec.running_mean and dec.running_var (stack.h); the decoder's statistics
 * leave each target's padding out (its lengths), and in training they mix a
 * target's positions, later ones too (block.h's BlockNorm). */
#ifndef TRANSFORMER_H
#define TRANSFORMER_H
#include <stdint.h>
#include "06_transformer/positions.h"
#include "06_transformer/block.h"
#include "06_transformer/stack.h"
#include "io/config.h"
#include "model/seq2seq.h"

#define TRANSFORMER_MAX_LAYERS STACK_MAX_LAYERS
#define TRANSFORMER_DECODE_EXTRA 10   /* decoding positions beyond the longest target (then <eos>) */

typedef struct {
    int layers;             /* L: blocks in the encoder, and in the decoder */
    BlockSpec block;        /* D, H, D_H, F, norm place and type, MLP, dropout (also on embeddings);
                             * D_H 0: D / H (the checkpoint text gives dim and heads) */
    Positions pos;            /* POSITIONS_SINUSOIDAL, POSITIONS_LEARNED or POSITIONS_ROPE */
    float label_smoothing;  /* eps in [0, 1) */
    int kv_cache;           /* 1: decode with the KV cache; 0: recompute the prefix */
    int src_pos_rows;       /* learned positions: rows of the source table (0: the data's longest source) */
    int tgt_pos_rows;       /* ... and of the target table (0: the data's T_cap). A longer input (testing
                             * on longer strings than trained on) gets the last row at every later position */
} TransformerConfig;

/* The checkpoint's keys of a TransformerConfig, in the order of its text
 * (io/config.h): layers, dim, heads, ff, norm, norm_type, mlp, dropout,
 * attn_dropout (0 when missing: older checkpoints), pos, label_smoothing,
 * kv_cache, src_pos_rows and tgt_pos_rows (0 when missing). The program reads
 * and writes them; the model takes the struct. */
extern const ConfigField TRANSFORMER_CONFIG_FIELDS[];
extern const int TRANSFORMER_CONFIG_N;

typedef struct {
    TransformerConfig cfg;
    Stack enc, dec;         /* cfg.block as encoder blocks (not causal) and decoder blocks (causal, cross);
                             * enc.out is the memory M [B, T, D], dec.out the top [B, Tt, D] */
    int L, D, V_src, V_tgt;
    int T_src;              /* longest source */
    int T_tgt;              /* longest target + 1 (<eos>): teacher-forced positions */
    int T_cap;              /* decoding positions a state can hold */
    int max_B;
    Params params;
    size_t src_emb, tgt_emb, src_pos, tgt_pos, out_W, out_b;
    float *P_src, *P_tgt;   /* [T_src, D], [T_cap, D]: sinusoidal tables; learned ones shorter than T_src
                             * or T_cap, spread out to full length (the last row repeated); else NULL */
    Rng dropout_rng;
    StateItem running[4];                       /* batch norm's running statistics (stack_running_items) */
    int n_running;                              /* 4 with batch norm, else 0 */

    /* activations of one pass, sized for max_B (the blocks' are in the stacks) */
    float *enc_mask, *dec_mask;                 /* dropout on the embeddings */
    float *logits, *probs;                      /* [B Tt, V_tgt] */
    int *src_lens;                              /* the last pass's source lengths [B] */
    /* backward */
    float *dlogits, *dtop, *dM;
    /* decoding */
    int enc_T;                                  /* source length of the last encode() */
    float *mem_KV[TRANSFORMER_MAX_LAYERS];      /* [B, T, 2 H D_H] per decoder block */
    float *step_x, *step_y, *step_top, *step_logits, *step_work, *step_mean, *step_rstd;
    float *step_cross;                          /* [B, H, T] the last block's cross-attention */
} Transformer;

/* Build the model (parameters from seed) for vocabularies V_src, V_tgt,
 * sources of up to T_src tokens and T_tgt teacher-forced positions, batches
 * of up to max_B. Returns 0, or -1 with fail() for a configuration it cannot
 * run (dim not a multiple of heads, no positions, a dropout out of range). */
int transformer_create(Transformer *t, const TransformerConfig *cfg, int V_src, int V_tgt, int T_src,
                       int T_tgt, int max_B, uint64_t seed);
void transformer_free(Transformer *t);
void transformer_interface(Transformer *t, Seq2Seq *m);

/* The seq2seq interface (seq2seq.h). */
double transformer_train_step(void *self, const Batch *b, int backward);
void transformer_encode(void *self, const Batch *b, float *states);
void transformer_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                      float *next, float *logprobs, float *attn);
/* Every layer's and head's attention in one picture: maps [L, H, rows, cols]
 * as L rows of H panels titled "layer l, head h", tick labels x_labels[cols]
 * and y_labels[rows], colours over [0, 1]. Returns 0 or -1 with fail(). */
int transformer_plot_grid(const char *stem, const char *what, const float *maps, int L, int H, int rows, int cols,
                          const char *const *x_labels, const char *const *y_labels, const char *x_title,
                          const char *y_title);
int transformer_plot_layers(void *self, const Dataset *d, const int *src, int src_len, const int *out,
                               int out_len, const char *stem);

/* Learned positions: the tables' rows from the data set d where c says 0
 * (a new model; a checkpoint's config keeps its own). */
void transformer_pos_rows(TransformerConfig *c, const Dataset *d);

/* A Transformer on the heap, sized for the data set d, as the seq2seq
 * driver's model m (m->destroy frees it). Returns 0, or -1 with fail(). */
int transformer_build(Seq2Seq *m, const Dataset *d, const TransformerConfig *c, int max_batch, uint64_t seed);

#endif
