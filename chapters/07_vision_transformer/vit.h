/* vit.h - chapter 07: the Vision Transformer (Dosovitskiy et al. 2021).
 *
 * Chapter 06 built a transformer encoder for a sequence of tokens. The ViT's
 * one new idea is how an IMAGE becomes that sequence: cut it into N patches,
 * map each to a vector of width D (patch_embed.h: a convolution whose stride
 * equals its kernel), add a position, and run the encoder unchanged; every
 * patch attends to every patch (no mask). One image, in the lecture's notation:
 *
 *   x_n = p_n W_E + b_E                     n = 1..N, the patch embedding [N, D]
 *   X_0 = [x_cls; x_1; ..; x_N] + E_pos     class token: a learned vector x_cls
 *                                           first, T = N + 1 tokens
 *   X_0 = [x_1; ..; x_N] + E_pos            mean pooling: no class token, T = N
 *   Z   = Norm(Block_L(..Block_1(X_0)))     chapter 06's pre-norm stack (stack.h)
 *   u   = Z[0]             (--pool cls)     the class token's output row
 *   u   = (1/T) sum_t Z[t] (--pool mean)    or the mean of all outputs
 *   u   = sum_t a_t Z[t]   (--pool attention) or a weighted mean, below
 *   logits = u W_head + b_head              [C]; loss = cross-entropy
 *
 * ATTENTION POOLING (--pool attention; the "sequence pooling" of Hassani et
 * al. 2021, "Escaping the big data paradigm with compact transformers"): no
 * class token, and the head reads a weighted mean of the outputs whose
 * weights the model learns to choose per image. It is chapter 03's dot-
 * product attention with ONE learned query w [D] and the outputs as keys
 * and values:
 *
 *   e_t = w . Z[t],   a = softmax(e) over the T tokens,   u = sum_t a_t Z[t]
 *
 * w starts at zero, where a is uniform and u is mean pooling's; a is a
 * picture of which patches the head read.
 *
 * With label smoothing eps (--label-smoothing, Szegedy et al. 2016) the
 * training target of an image of class t is (1 - eps) onehot(t) + eps / C
 * instead of onehot(t): the gradient no longer pushes the right logit up
 * without end. The loss the program prints stays the plain cross-entropy.
 *
 * E_pos [T, D] is either LEARNED (a table, initialised N(0, 0.02^2) as the ViT
 * does) or FIXED 2-D SINUSOIDS: patch n at row r, column c of the grid of
 * patches gets chapter 04's 1-D sinusoids of r in its first D/2 numbers and
 * of c in its last D/2 (the class token gets zeros). The learned table
 * is free to discover that 2-D structure by itself; its cosine similarity
 * picture shows whether it did.
 *
 * A CONVOLUTIONAL STEM (--stem S, after Xiao et al. 2021, "Early convolutions
 * help transformers see better"): before the patch embedding, one 4 x 4
 * convolution of stride 2 (padding 1: patch_embed.h with P = 2, K = 4) maps
 * the image to S channels at half its size, followed by GELU:
 *
 *   M = GELU(conv_4x4/2(image))                 [S, rows / 2, cols / 2]
 *   x_n = patch_embed(M, patch P / 2, kernel K / 2)
 *
 * Each token still covers the same P x P cell of the image (N is unchanged),
 * but it is now built from S learned local features instead of raw pixels.
 * The ViT paper's "hybrid" model does the same with a whole ResNet.
 *
 * PATCH DROPOUT (--keep k, after Liu et al. 2023, "PatchDropout"): while
 * training, each image keeps only K = round(k N) of its N patches, chosen at
 * random, each with its own position added (so the model still knows where
 * each kept patch sits), and the class token:
 *
 *   X_0 = [x_cls; x_{n_1}; ..; x_{n_K}] + [E_pos[0]; E_pos[n_1]; ..; E_pos[n_K]]
 *
 * The encoder runs on T' = 1 + K tokens instead of T (K with mean pooling,
 * which has no class token): its products shrink in
 * proportion and attention's T^2 by k^2, so a step costs about k of one with
 * every patch. Evaluation always reads every patch. The dropped patches get
 * no gradient that step, like dropout's zeros. With --keep-until u, patch
 * dropout stops after the first u of the training steps and the rest see
 * every patch (the "unmasked tuning" of Li et al. 2023, FLIP), so the
 * model ends its training on the inputs it will be tested on.
 *
 * Letters as in common/README.md: B images, N patches, T tokens, D width, H
 * heads, D_H = D / H, F the MLP width, L blocks, C classes. Conventions as in
 * chapter 06: one Params buffer, activations allocated once for max_B
 * images, backward ACCUMULATES into the gradients. */
#ifndef VIT_H
#define VIT_H
#include <stdint.h>
#include "06_transformer/linformer.h"
#include "06_transformer/stack.h"
#include "07_vision_transformer/patch_embed.h"
#include "io/config.h"
#include "nn/params.h"
#include "model/classifier.h"

#define VIT_MODEL_NAME "ch07_vit"

typedef enum { VIT_POOL_CLS = 0, VIT_POOL_MEAN = 1, VIT_POOL_ATTENTION = 2 } VitPool;
typedef enum { VIT_POS_LEARNED = 0, VIT_POS_SINUSOIDAL_2D = 1 } VitPos;

typedef struct {
    PatchEmbedSpec patch;   /* channels, rows, cols, P and the width D */
    int layers, heads, ff;  /* L, H (D_H = D / H), F */
    float dropout;          /* on each sublayer's output (chapter 06), training only */
    VitPool pool;
    VitPos pos;
    int classes;            /* C */
    float label_smoothing;  /* eps in [0, 1): the training target (1 - eps) onehot + eps / C */
    int locality;           /* 1: locality self-attention in every block (locality_attention.h) */
    int linformer;          /* k >= 1: Linformer attention in every block (chapter 06's linformer.h), the keys
                             * and values of the T tokens projected to k rows; 0: full attention */
    int stem;               /* S: channels of the convolutional stem; 0: none (the patches read the pixels) */
    float drop_path;        /* stochastic depth, the last block's rate (chapter 06's stack.h: block l's is
                             * (l + 1) / L of it), training only; 0: none */
    float keep;             /* patch dropout: the fraction of patches a training image keeps, (0, 1]; 0 or 1: all */
    float keep_until;       /* patch dropout for the first keep_until of the training steps, (0, 1]; 0 or 1: to
                             * the last step */
    BlockNorm norm;         /* the encoder's norms (chapter 06's block.h): BLOCK_LAYERNORM (the ViT's), RMSNorm,
                             * or batch norm (each feature over the batch's images and tokens; its running
                             * statistics are saved beside the weights as enc.running_mean, enc.running_var) */
} VitConfig;
/* Its checkpoint keeps it as the lines of VIT_CONFIG_FIELDS (io/config.h),
 * between the program's model= and task= lines and its seed= line:
 *   channels=1 rows=28 cols=28 patch=7 kernel=0 dim=64 layers=2 heads=4 ff=128
 *   dropout=0 pool=cls pos=learned classes=10 label_smoothing=0 locality=0
 *   stem=0 drop_path=0 keep=1 keep_until=1
 * and norm_type=rmsnorm or batchnorm (no line for layernorm), linformer=k
 * (no line for 0, full attention): the text, and so the checkpoints, of the
 * models from before those keys. */
extern const ConfigField VIT_CONFIG_FIELDS[];
extern const int VIT_CONFIG_N;

typedef struct {
    VitConfig cfg;
    int N, T, D, C;         /* patches, tokens (N or N + 1), width, classes */
    int max_B, B;           /* capacity; images in the last forward */
    int T_run;              /* tokens of the last forward: T, or 1 + K while training with patch dropout */
    Params params;
    size_t patch_W, patch_b, cls, pos, head_W, head_b;   /* tensor offsets (cls, pos: 0 when absent) */
    size_t pool_w;          /* attention pooling's query w [D]; 0 with cls or mean pooling */
    size_t stem_W, stem_b;  /* the stem's convolution [channels 4 4, S], [S]; 0 without one */
    PatchEmbedSpec stem_spec;   /* image -> [B, (rows / 2) (cols / 2), S] (with a stem) */
    PatchEmbedSpec embed;   /* what the patch embedding reads: cfg.patch, or the stem's map */
    Stack st;               /* chapter 06's stack: X_0 in st.x[0], Z in st.out */
    Linformer linformer;    /* with cfg.linformer: k and the T tokens its E, F [k, T] are made for */
    BlockSelfAttention linformer_attention;   /* ... and the blocks' self-attention of it */
    float *P_fixed;         /* [T, D] the 2-D sinusoids (VIT_POS_SINUSOIDAL_2D), else NULL */
    int training;           /* 1: dropout on */
    int unmasked;           /* 1: past keep_until of the training steps: every patch again (vit_set_progress) */
    Rng dropout_rng;
    StateItem running[2];   /* batch norm's running statistics as checkpoint items (stack_running_items) */
    int n_running;          /* 2 with batch norm, else 0 */
    Rng rng_at_forward;     /* dropout_rng as the last forward found it (vit_replay) */
    /* activations and gradients, for max_B images */
    float *patches;         /* [B, N, D] the patch embeddings */
    float *patch_cache;     /* patch_embed_cache_floats */
    float *pooled;          /* [B, D] u */
    float *pool_a;          /* [B, T] attention pooling's weights a (NULL with cls or mean pooling) */
    float *pool_scratch;    /* [2 T] its backward's scratch */
    float *logits, *probs;  /* [B, C] */
    float *dlogits, *dpooled, *dout, *dpatches;   /* [B, C], [B, D], [B, T, D], [B, N, D] */
    int *kept;              /* [B, K] with patch dropout: the patches each image kept, in order; else NULL */
    /* the stem's, [B, R, S] with R = (rows / 2) (cols / 2), NULL without one: the convolution's output,
     * its GELU, that transposed to the map [B, S, rows / 2, cols / 2] the patch embedding reads, their
     * gradients, and the two convolutions' caches and scratch */
    float *stem_pre, *stem_act, *stem_map, *dstem_pre, *dstem_act, *dstem_map;
    float *stem_cache, *embed_scratch;
} Vit;

const char *vit_pool_name(VitPool p);   /* "cls", "mean", "attention" */
const char *vit_pos_name(VitPos p);     /* "learned", "sinusoidal2d" */
/* Returns 0, or -1 with fail() listing the choices. */
int vit_pool_from_name(const char *name, VitPool *p);
int vit_pos_from_name(const char *name, VitPos *p);

/* The fixed 2-D positions: P [T, D] for a grid of grid_rows x grid_cols
 * patches, row 0 zeros when has_cls (then patch n is row n + 1). D % 4 == 0. */
void vit_positions_2d(float *P, int grid_rows, int grid_cols, int D, int has_cls);

/* The driver's step of steps (classifier.h): from step keep_until x steps on,
 * training forwards read every patch. */
void vit_set_progress(Vit *v, int step, int steps);

/* The next forward drops the same patches and draws the same dropout masks
 * as the last one (the second pass of a sharpness-aware step, classifier.h). */
void vit_replay(Vit *v);

/* K: the patches a training image keeps (N without patch dropout). */
int vit_kept_patches(const Vit *v);

/* Pooling, shape [B, T, D] -> [B, D], cls or mean (attention pooling has its
 * own pair below, for it has a parameter and keeps its weights):
 *   cls:  pooled[b] = Z[b, 0]          mean: pooled[b] = (1/T) sum_t Z[b, t]
 * backward: dZ [B, T, D] += the gradient of pooled spread back. */
void vit_pool_forward(float *pooled, const float *Z, VitPool pool, int B, int T, int D);
void vit_pool_backward(float *dZ, const float *dpooled, VitPool pool, int B, int T, int D);

/* Attention pooling, one learned query w over each image's outputs (chapter
 * 03's dot_attention_forward with N_Q = 1 and keys = values = Z):
 *   forward:  Z [B, T, D], w [D] -> pooled [B, D], a [B, T] (the weights)
 *   backward: dpooled [B, D] -> dZ [B, T, D] +=, dw [D] +=; a, Z, w as forward
 *             saw and wrote them; scratch [2 T]. */
void vit_attention_pool_forward(float *pooled, float *a, const float *Z, const float *w, int B, int T, int D);
void vit_attention_pool_backward(float *dZ, float *dw, float *scratch, const float *dpooled, const float *a,
                                 const float *Z, const float *w, int B, int T, int D);

/* Checks the sizes (patch divides the image, heads divide D, D % 4 == 0
 * for the sinusoids, layers 1..STACK_MAX_LAYERS), declares and initialises
 * the parameters from seed, allocates for max_B images. Returns 0, or -1
 * with fail() (vit_free is then still safe). */
int vit_create(Vit *v, const VitConfig *cfg, int max_B, uint64_t seed);
void vit_free(Vit *v);

/* images [B, channels, rows, cols] -> logits [B, C] (v->logits). With
 * targets [B], returns the mean (plain) cross-entropy and keeps the
 * probabilities for backward; without, 0. */
double vit_forward(Vit *v, const float *images, const int *targets, int B);
/* After forward with targets: every gradient += d loss / d parameters, the
 * loss being the cross-entropy with the smoothed target (eps = 0: plain). */
void vit_backward(Vit *v, const int *targets);
/* pred [B] = argmax of the last forward's logits. */
void vit_predict(const Vit *v, int *pred);
/* Block l's attention weights of the last forward, [B, H, T, T]. */
const float *vit_attention(const Vit *v, int l);

/* The model in words, for tables and titles, naming what differs from the
 * plain ViT: "ViT, patch 7 (16 patches), cls pooling", "ViT with a
 * 32-channel stem, patch 4 (49 patches) read through 8 x 8 kernels, mean
 * pooling, locality attention, patch dropout (keep 0.4)". */
void vit_config_label(const VitConfig *c, char *out, int cap);

/* The Classifier face (model/classifier.h): the Vit of cfg (vit_create);
 * n_out = 1, classes C. Its attention hook is NULL (the driver's heatmaps
 * are per-position; the chapter draws the [T, T] maps itself from
 * vit_of(c)). Returns 0, or -1 with fail(). */
int vit_build(Classifier *c, const VitConfig *cfg, int max_B, uint64_t seed);
/* The Vit behind a Classifier vit_build made. */
Vit *vit_of(const Classifier *c);

#endif
