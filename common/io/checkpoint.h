/* checkpoint.h - save and load a model's parameters with its configuration.
 *
 * File format (all integers little-endian):
 *   offset 0   8 bytes  magic "ATTNCKPT"
 *          8   u32      format version (1, or 2 with a training state)
 *         12   u32      config length L in bytes
 *         16   L bytes  config text: "key=value\n" lines (model hyper-parameters,
 *                       task, vocabulary) - enough to rebuild the model
 *   16+L       u32      number of tensors T
 *   then T times:
 *              u32      name length n, then n bytes of name
 *              u32      ndim, then ndim x u32 dims
 *              count x f32 values (count = product of dims)
 *   version 2 only (the weights so far of a run in training, which a resume
 *   continues from; a final checkpoint is version 1):
 *              u32      length S, then S bytes of training state:
 *                       u32 number of items, then each item as
 *                       u32 name length n, n bytes of name, u32 kind (StateKind),
 *                       u32 count, count values (4 bytes each for ints and
 *                       floats, 8 for longs, u64s and doubles)
 *   end        u32      CRC-32 (zlib) of every byte before it
 * Written atomically: to "<path>.tmp.<pid>", fsync, then rename over path,
 * so an interrupted save never destroys the previous checkpoint. */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H
#include "nn/params.h"

#define CKPT_MAGIC "ATTNCKPT"
#define CKPT_VERSION 1u         /* weights and config */
#define CKPT_VERSION_STATE 2u   /* ... and a training state after the tensors */
#define CKPT_CONFIG_MAX (1 << 20)   /* a translation model keeps its two BPE vocabularies here */
/* The longest checkpoint a load reads (8 GiB: two billion floats, far more
 * than any model of these chapters): a longer file, or a header that
 * promises more, is refused rather than read. */
#define CKPT_MAX_BYTES ((size_t)8 << 30)

/* Returns 0, or -1 with fail() naming the path and the OS error. */
int checkpoint_save(const char *path, const char *config_text, const Params *p);

/* What a resume puts back besides the weights (train/loop.h): named arrays of
 * C numbers, each stored in a fixed little-endian width, so a run stopped on
 * one machine resumes on another. */
typedef enum { STATE_INT = 1, STATE_LONG, STATE_U64, STATE_FLOAT, STATE_DOUBLE } StateKind;
typedef struct {
    const char *name;    /* e.g. "adam.m", "batches.rng" */
    StateKind kind;      /* what data points to: int, long, uint64_t, float or double */
    void *data;
    size_t count;        /* how many of them */
} StateItem;

/* checkpoint_save with the n items after the tensors (version 2; n = 0: the
 * same file as checkpoint_save writes). */
int checkpoint_save_with_state(const char *path, const char *config_text, const Params *p, const StateItem *items,
                               int n);
/* Fill each of the n items from the state a version 2 file keeps: every item
 * must be there, of its kind and count. Returns 0, or -1 with fail() naming
 * the file and the first item missing or unlike (a version 1 file: "holds no
 * training state"); on error the items may be partly filled. */
int checkpoint_load_state(const char *path, StateItem *items, int n);

/* checkpoint_load, then (n > 0) checkpoint_load_state of the n items: a
 * model's own state besides its weights (its buffers: batch norm's running
 * statistics), which its final checkpoint keeps after the tensors
 * (checkpoint_save_with_state). Returns 0, or -1 with fail(). */
int checkpoint_load_with_state(const char *path, Params *p, StateItem *items, int n);

/* The weights so far while a run trains (train/loop.h's Trainer.save): the
 * checkpoint PATH's sibling NAME_so_far.ckpt ("out/model.ckpt" ->
 * "out/model_so_far.ckpt"), so that a run stopped early keeps its latest
 * weights and a previous run's PATH stays until this run writes its final
 * one (which removes the sibling). Returns 0, or -1 with fail() when the
 * name does not fit in cap. */
int checkpoint_so_far_path(char *dst, size_t cap, const char *path);
/* Writes PATH's weights-so-far sibling, with the n items of training state. */
int checkpoint_save_so_far(const char *path, const char *config_text, const Params *p, const StateItem *items, int n);
/* Removes it, after the final PATH is written (absent: nothing to do). */
void checkpoint_remove_so_far(const char *path);

/* Before a training run writes into out_dir: a file there whose name ends
 * in _so_far.ckpt holds the weights of a run that stopped before its end
 * (Ctrl-C, a crash, a divergence), and this run would replace it. Returns 0
 * when there is none (or no such directory yet), or when force (--force) is
 * set, after one note on stdout naming the file to be replaced; otherwise -1
 * with fail() naming the file and the ways on (--resume it, --load it, move
 * it, another --out, or --force). With resume (--resume): 0 when there is
 * one to continue, -1 with fail() when there is none or force is set too. */
int checkpoint_check_stopped_run(const char *out_dir, int force, int resume);

/* Read only the config text (so the caller can build the matching model).
 * config_out gets a malloc'd NUL-terminated string the caller frees.
 * Returns 0, or -1 with fail(): missing file, wrong magic, unsupported
 * version, truncated file, bad CRC. The file is read once even when it is a
 * pipe or a FIFO (--load /dev/stdin): checkpoint_load of the same path then
 * takes the bytes this call read. */
int checkpoint_read_config(const char *path, char **config_out);

/* Load tensors into an allocated Params whose layout must match the file:
 * same tensor names, order and dims. Returns 0, or -1 with fail() naming the
 * first mismatch (e.g. "tensor 3 'enc.W_h' has dims [64,192], model expects
 * [128,384]"), truncation, a CRC mismatch, or a value that is NaN or
 * infinite (the weights of a diverged run). p is left unchanged on error. */
int checkpoint_load(const char *path, Params *p);

/* Before building a model from a checkpoint: its config's "model=" must be
 * expected_model, the model of this program (chapter expected_chapter).
 * Otherwise fail() with one line naming the chapter that wrote the file and
 * the one that reads it, e.g. "out/04/model_x.ckpt: a checkpoint of chapter
 * 04_self_attention (model=ch04_digit_self_attention), but 01_rnn_seq2seq
 * loads its own (model=rnn_seq2seq)". Returns 0 or -1. */
int checkpoint_check_model(const char *path, const char *config, const char *expected_model,
                           const char *expected_chapter);

/* Helpers for the config text. */
/* Look key up in "key=value\n" text; copy value into out (size outlen).
 * Returns 0, or -1 with fail() when the key is missing. */
int config_get(const char *config_text, const char *key, char *out, int outlen);
/* The same for a key added after checkpoints were already saved: a config
 * without its line gets fallback (what those checkpoints were trained with).
 * Returns 0, or -1 with fail() when the value does not fit in out. */
int config_get_or(const char *config_text, const char *key, const char *fallback, char *out, int outlen);
int config_get_int(const char *config_text, const char *key, int *out);
/* An integer in [lo, hi]; -1 with fail() naming the key and the range otherwise. */
int config_get_int_in(const char *config_text, const char *key, int lo, int hi, int *out);
/* A number in [lo, hi] (in [lo, hi) when hi_open), as "dropout=0.1" or
 * "keep=0.5"; fallback as config_get_or's, or NULL when the line is required.
 * Returns 0, or -1 with fail() naming the key, its value and the range:
 * "keep=1.5: expected a number in [0, 1]". */
int config_get_float_in(const char *config_text, const char *key, const char *fallback, float lo, float hi,
                        int hi_open, float *out);

#endif
