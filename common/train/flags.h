/* flags.h - the flags every training program shares, written once: the
 * run's (--steps --batch --lr --warmup --clip --weight-decay --seed
 * --eval-every --preset), its files' (--out --load --force --resume) and
 * the machine's (--backend --matmul-precision --threads --quiet), each with
 * one range, one help text, and whether it still acts with --load.
 *
 * A driver (train/seq2seq.h, train/classifier.h, chapter 06's gpt_run.h)
 * keeps a TrainFlags in its own flags, appends train_flag_specs' table to
 * its own specs and parses them together (io/args.h); then train_flags_apply
 * selects the backend, the precision and the threads. */
#ifndef TRAIN_FLAGS_H
#define TRAIN_FLAGS_H
#include "io/args.h"
#include "train/loop.h"

typedef struct {
    TrainOptions train;   /* --steps --lr --warmup --clip --weight-decay --eval-every --quiet (train/loop.h) */
    int batch;            /* --batch: examples per step (the GPT's example is a window of text) */
    int seed;             /* --seed: the initial weights, the batches, and what else the program draws */
    const char *preset;   /* --preset: a name among the program's presets, "none" for none */
    const char *out;      /* --out: the output directory (NULL: the program's default) */
    const char *load;     /* --load: a saved model to use instead of training (NULL: train one) */
    int force;            /* --force: train over the weights of a stopped run in --out */
    int resume;           /* --resume: continue the stopped run in --out */
    const char *backend;  /* --backend (NULL: $ATTN_BACKEND, else auto) */
    const char *matmul_precision;   /* --matmul-precision (NULL: float) */
    int threads;          /* --threads (0: OMP_NUM_THREADS or all cores) */
} TrainFlags;

enum { TRAIN_FLAG_SPECS = 17 };   /* the shared flags: specs train_flag_specs writes */

/* The shared flags' specs, their destinations in f, into
 * specs[0..TRAIN_FLAG_SPECS). preset_choices: the program's presets
 * ("none,long"), or NULL where it has none (then --preset is refused, and
 * says so). --out, --load, --batch and the machine's flags act with --load
 * (a saved model is evaluated in batches, on that machine); the rest are
 * the training's. Returns TRAIN_FLAG_SPECS. */
int train_flag_specs(TrainFlags *f, const char *preset_choices, ArgSpec *specs);

/* After the flags are parsed: select --backend and --matmul-precision,
 * check $GNUPLOT_TIMEOUT, set --threads. Returns 0, or -1 with fail() (an
 * unknown backend, one this machine cannot run). */
int train_flags_apply(const TrainFlags *f);
#endif
