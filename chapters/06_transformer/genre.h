/* genre.h - chapter 06, part 6: pretrain, then fine-tune. The GPT of
 * part 2 (gpt.h), trained to predict the next character of the Brown
 * corpus, is reused to classify a passage of 64 to 256 characters into
 * one of the corpus's 15 genres (data/brown_genre.h), with a linear head
 * on its features:
 *
 *   passage x_1 .. x_n, cut into windows of N tokens (the GPT's context;
 *   the last one padded), each window run through the GPT without its
 *   output layer (gpt_features):
 *     Z = Norm(X_L)                        [windows N, D]
 *     f = (1/n) sum_{t=1..n} Z[t]          [D]  the mean over the passage's n real positions
 *     logits = f W + b                     W [D, C], b [C]   (C = 15 genres)
 *     loss = cross-entropy(softmax(logits), genre), the mean over the batch
 *
 * Three ways to start and train the same model (genre_load_gpt):
 *   scratch    every weight from a seed (gpt.h's initial values, W Xavier),
 *              all of them trained on the labelled passages
 *   probe      the GPT's weights from its checkpoint, frozen: only W and b
 *              train (a "linear probe" of what pretraining put in Z)
 *   finetune   the GPT's weights from its checkpoint, then all of them
 *              trained with the head ("fine-tuning", the ImageNet moment)
 *
 * A window sees only its own tokens (each starts its positions at 0), so a
 * passage longer than N is read as independent windows whose features are
 * averaged; padded positions come after the real ones, so causal attention
 * keeps them out of every real position's Z.
 *
 * Parameter names: the GPT's (gpt.h), then head.W [D, C], head.b [C].
 * Letters as in common/README.md: B passages, N the context, D the width,
 * C classes. */
#ifndef GENRE_H
#define GENRE_H
#include <stdint.h>
#include "06_transformer/gpt.h"
#include "io/config.h"
#include "model/classifier.h"

#define GENRE_MODEL_NAME "ch06_gpt_genre"

typedef struct {
    GptConfig gpt;     /* the GPT under the head (the checkpoint's lines, gpt.h's keys) */
    int classes;       /* C */
    int max_tokens;    /* T: tokens per passage at most (rows of the task's examples) */
    int frozen;        /* 1: only the head trains (the probe); 0: everything */
    int tokens;        /* the corpus's view: BROWN_WORDS or BROWN_CHARS (data/brown.h) */
    char vocab_crc[16];   /* the vocabulary's fingerprint (brown_vocab_crc), "%08x" */
} GenreConfig;

/* The checkpoint's keys of a GenreConfig after the GPT's: classes,
 * max_tokens, frozen, tokens (char or word), vocab_crc (io/config.h). */
extern const ConfigField GENRE_CONFIG_FIELDS[];
extern const int GENRE_CONFIG_N;

typedef struct {
    GenreConfig cfg;
    Gpt g;                    /* the GPT; its Params hold the head too */
    size_t W, b;              /* head.W, head.b */
    int C, T, max_B, max_windows;
    int B, n_windows;         /* the last forward's passages and windows */
    int *windows;             /* [max_windows, N] the passages' tokens cut into windows */
    int *first, *count;       /* [max_B] passage b: its first window, its real tokens n_b */
    float *f;                 /* [max_B, D] the pooled features */
    float *logits, *probs, *dlogits;   /* [max_B, C] */
    float *df;                /* [max_B, D] */
    float *dZ;                /* [max_windows N, D] */
} Genre;

/* Build the model for passages of at most cfg->max_tokens tokens, up to
 * max_B at a time, every weight from seed. Returns 0, or -1 with fail(). */
int genre_create(Genre *m, const GenreConfig *cfg, int max_B, uint64_t seed);
void genre_free(Genre *m);

/* The GPT's weights from a checkpoint of build/06_gpt (its model=gpt; its
 * architecture must be m's: genre_read_gpt gives it). */
int genre_load_gpt(Genre *m, const char *path);

/* A 06_gpt checkpoint's config text: its GptConfig, its tokens= (char or
 * word; bpe is refused) and vocab_crc= lines into cfg (classes, max_tokens
 * and frozen are the caller's). Returns 0, or -1 with fail() naming the
 * file: not a GPT's checkpoint, or a view this program does not read. */
int genre_read_gpt(const char *path, GenreConfig *cfg);

/* tokens [B, T] (pads BROWN_GENRE_PAD after each passage) -> logits [B, C];
 * with targets [B], returns the mean cross-entropy. train 1: dropout. */
double genre_forward(Genre *m, const int *tokens, const int *targets, int B, int train);
/* After genre_forward with targets: d mean loss / d params into params.grad
 * (+=): the head's, and the GPT's unless frozen. */
void genre_backward(Genre *m, const int *targets);

/* The model behind the Classifier face (model/classifier.h): genre_create,
 * and with gpt_path (not NULL) genre_load_gpt. Returns 0, or -1 with fail(). */
int genre_build(Classifier *c, const GenreConfig *cfg, int max_B, uint64_t seed, const char *gpt_path);

#endif
