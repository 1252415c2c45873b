/* caption.h - chapter 07, captioning: an image in, a sentence out, and where
 * the model looks for each word (the lectures' way into attention: Xu et
 * al., "Show, Attend and Tell", 2015).
 *
 * Three captioners with the SAME encoder, so the table compares only how the
 * decoder reads the image. The encoder is the ViT's (vit.h) without its head:
 *
 *   patches  x_n = p_n W_E + b_E          chapter 07's patch embedding, n = 1..N
 *   X_0      = [x_1; ..; x_N] + E_pos     fixed 2-D sinusoids (vit_positions_2d)
 *   Z        = Norm(Block_L(..Block_1(X_0)))   chapter 06's pre-norm stack: the grid [N, D]
 *   u        = (1/N) sum_n Z[n]           the grid pooled to one vector
 *
 * or, with the CNN encoder (the lecture's own pipeline: spatial features of a
 * pretrained CNN, Show-Attend-Tell's conv grid), chapter 07's CNN (cnn.h)
 * without its head, run over the whole scene, its last grid of features
 * p_2 [2F, side/4, side/4] read position by position:
 *
 *   G        = p_2 as [N, 2F], N = (side/4)^2   one 2F-vector z_{i,j} per 4 x 4 pixels
 *   Z        = G W_proj + b_proj + E_pos        [N, D], the same 2-D sinusoids
 *   u        = (1/N) sum_n Z[n]
 *
 * its convolutions from scratch, or from a CNN classifier trained on single
 * items (caption_load_cnn; frozen or fine-tuned);
 *
 * and three decoders, all fed the previous word y_{t-1} (teacher forcing in
 * training, their own output when captioning):
 *
 * 1. CAPTION_POOL, no attention (the bottleneck of chapter 01): chapter 01's
 *    GRU decoder with the pooled image as its context,
 *      c = tanh(u W_init + b_init) [S],  s_0 = c,  s_t = GRU([E y_{t-1} ; c], s_{t-1})
 *    The same c for every word: one vector must hold every item and its place.
 * 2. CAPTION_ATTEND, Show-Attend-Tell: chapter 02's additive attention over
 *    the grid, a new context for every word,
 *      s_0 = tanh(u W_init + b_init)
 *      e_{t,n} = v^T tanh(Z[n] W_1 + s_{t-1} W_2),  a_t = softmax_n(e_t)
 *      c_t = sum_n a_{t,n} Z[n] [D],  s_t = GRU([E y_{t-1} ; c_t], s_{t-1})
 * 3. CAPTION_TRANSFORMER: chapter 06's decoder (causal self-attention, cross-
 *    attention to the grid Z as its memory M, MLP), Y_0 = sqrt(D) E y + P.
 * Each ends in p(y_t | ...) = softmax(top W_out + b_out), the loss is the
 * cross-entropy per word (<eos> included).
 *
 * The model is a Seq2Seq (model/seq2seq.h) over an image task: Batch.values
 * [B, side side] holds the images. Parameter names: patch.W, patch.b, enc<l>.*,
 * enc_norm.* (the ViT encoder) or conv1.*, conv2.*, proj.W, proj.b (the CNN
 * encoder); init.W, init.b, dec.*, out.* (chapter 01's decoder)
 * and att.W_1, att.W_2, att.v (model 2); tgt_emb, dec<l>.*, dec_norm.*,
 * out.W, out.b (model 3).
 *
 * Letters (common/README.md): B images, N grid positions (patches), D width,
 * H heads, F MLP width, L blocks, V words, S the GRU state, D_E its word
 * embedding, D_A the additive attention's width, T' caption steps. */
#ifndef CAPTION_H
#define CAPTION_H
#include <stdint.h>
#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "06_transformer/stack.h"
#include "07_vision_transformer/cnn.h"
#include "07_vision_transformer/patch_embed.h"
#include "data/dataset.h"
#include "io/config.h"
#include "model/seq2seq.h"

#define CAPTION_MODEL_NAME "ch07_caption"

typedef enum { CAPTION_POOL = 0, CAPTION_ATTEND = 1, CAPTION_TRANSFORMER = 2 } CaptionKind;
typedef enum { CAPTION_ENCODER_VIT = 0, CAPTION_ENCODER_CNN = 1 } CaptionEncoder;

typedef struct {
    CaptionKind kind;
    int side;                 /* image side in pixels (square images) */
    CaptionEncoder encoder;   /* the ViT's (the default) or the CNN's */
    int P, D;                 /* patch side (the CNN encoder: 4, the pixels per grid step), width */
    int filters;              /* the CNN encoder: F of its first convolution (p_2 has 2F channels) */
    int layers, heads, ff;    /* the encoder's L, H, F; model 3's decoder has dec_layers blocks of H, F */
    int dec_layers;
    int D_E, S, D_A;          /* models 1-2: word embedding, GRU state, additive attention's width */
    int V;                    /* words, the four specials included */
    int max_words;            /* longest caption (without <eos>) */
} CaptionConfig;

/* The fields a checkpoint records, as "key=value" lines (io/config.h):
 * caption_model, encoder (written only for the CNN's; vit without the
 * line), filters (the CNN encoder's), side, patch, dim, layers, heads, ff,
 * dec_layers, embed, state (read as hidden from older checkpoints), attn. V and max_words come
 * from the data set (caption_build). */
extern const ConfigField CAPTION_CONFIG_FIELDS[];
extern const int CAPTION_CONFIG_N;

typedef struct {
    CaptionConfig cfg;
    int N, D, T_tgt, T_cap;   /* grid positions; width; teacher-forced steps (max_words + 1); decoding room */
    int max_B;
    Params params;
    /* ---- the encoder */
    PatchEmbedSpec patch;
    size_t patch_W, patch_b;
    Stack enc;                /* enc.out = Z [B, N, D] */
    CnnTrunk trunk;           /* the CNN encoder: conv1.*, conv2.*; trunk.p2 [B, 2F, side/4, side/4] */
    size_t proj_W, proj_b;    /* [2F, D], [D] */
    float *G, *dG, *dp2;      /* [B, N, 2F] p_2 position by position, its gradient; dp2 [B, 2F, N] */
    float *cnn_Z;             /* [B, N, D] the CNN encoder's Z */
    int frozen;               /* 1: the convolutions get no gradient (caption_load_cnn) */
    float *Z;                 /* the grid the decoders read: enc.out or cnn_Z */
    float *E_pos;             /* [N, D] fixed 2-D sinusoids */
    float *patches, *patch_cache;   /* [B, N, D], patch_embed_cache_floats */
    float *dZ;                /* [B, N, D] */
    int *lens;                /* [max_B] = N: every position of the grid is real */
    float *u, *du;            /* [B, D] the pooled grid */
    /* ---- models 1 and 2: chapter 01's GRU decoder */
    RnnDecoder dec;
    size_t init_W, init_b;    /* [D, S], [S] */
    size_t att_W1, att_W2, att_v;   /* model 2: [D, D_A], [S, D_A], [D_A] */
    float *ctx, *dctx;        /* model 1: c [B, S]; model 2: c_t [B, D] */
    float *keys, *dkeys;      /* model 2: [B, N, D_A] Z W_1 */
    float *query, *dquery;    /* [B, D_A] */
    float *feat;              /* [T', B, N, D_A] tanh(keys + query), kept for backward */
    float *attn;              /* [T', B, N] a_t */
    float *dattn, *dscores;   /* [B, N] */
    float *logits, *probs, *dlogits;   /* [T' B, V] (models 1-2: time-major; 3: [B, T']) */
    /* ---- model 3: chapter 06's decoder blocks */
    Stack tdec;               /* causal, cross: tdec.out [B, T', D] */
    size_t tgt_emb, out_W, out_b;     /* model 3's output layer (models 1-2 use dec.out_W) */
    float *P_tgt;             /* [T_cap, D] chapter 04's sinusoids */
    float *dtop;              /* [B, T', D] */
    Rng rng;                  /* dropout (unused: p = 0), for the stack's signature */
    /* ---- decoding: encode() keeps the grid, steps gather each row's */
    float *grid;              /* [max_B, N, D] Z of the last encode() */
    float *grid_keys;         /* [max_B, N, D_A] model 2 */
    float *step_grid, *step_keys, *step_feat, *step_attn, *step_query, *step_ctx;
    int *step_tokens;         /* [max_B, T_cap] model 3 */
    float *step_logits;       /* [max_B, V] */
    float *s0;                /* [max_B, S] models 1-2: the initial state of each encoded image */
} Caption;

const char *caption_kind_name(CaptionKind k);            /* "pool", "attend", "transformer" */
int caption_kind_from_name(const char *name, CaptionKind *k);   /* 0, or -1 with fail() */

/* Checks the sizes, declares and initialises the parameters from seed,
 * allocates for max_B images. Returns 0, or -1 with fail() (caption_free is
 * then still safe). */
int caption_create(Caption *c, const CaptionConfig *cfg, int max_B, uint64_t seed);
void caption_free(Caption *c);
void caption_interface(Caption *c, Seq2Seq *m);

/* The Seq2Seq face (seq2seq.h); b->values [B, side side] are the images. */
double caption_train_step(void *self, const Batch *b, int backward);
void caption_encode(void *self, const Batch *b, float *states);
/* Model 3: every decoder layer's and head's cross-attention for one image
 * (the batch `one` of one row) and its caption out[n], from one
 * teacher-forced pass over <bos> out[0] .. out[n - 1]: maps [L, H, n + 1, N]
 * (L = dec_layers, H = heads; row t is the position that predicts out[t], the
 * last row <eos>). Returns 0, or -1 with fail() for another model or a
 * caption longer than the decoder's positions. */
int caption_cross_maps(Caption *c, const Batch *one, const int *out, int n, float *maps);
void caption_step(void *self, int n, const int *src_row, const float *states, const int *prev, float *next,
                  float *logprobs, float *attn);

/* The CNN encoder's convolutions from a 07_cnn checkpoint at path (a
 * classifier trained on single Fashion-MNIST items: the pretraining), copied
 * over the ones drawn at random: conv1.W, conv1.b, conv2.W, conv2.b. The file
 * must be a 07_cnn checkpoint of one input channel and cfg.filters filters
 * (otherwise one fail() naming the file and what differs). frozen = 1: the
 * convolutions then get no gradient in training, so they stay as loaded
 * (plain Adam moves no weight whose gradient is 0; the caller refuses weight
 * decay beside it). Returns 0, or -1 with fail(). */
int caption_load_cnn(Caption *c, const char *path, int frozen);

/* The captioner cfg describes, for the images and words of data set d, as
 * a Seq2Seq m: cfg's V and max_words are taken from d (its target
 * vocabulary and longest caption), its side checked against d's images.
 * Returns 0, or -1 with fail() (nothing is then left allocated). */
int caption_build(Seq2Seq *m, const Dataset *d, const CaptionConfig *cfg, int max_batch, uint64_t seed);

#endif
