/* flags.c - the shared flags' one table (flags.h). */
#include "train/flags.h"
#include "io/plot.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"

int train_flag_specs(TrainFlags *f, const char *preset_choices, ArgSpec *specs) {
    TrainOptions *o = &f->train;
    const ArgSpec table[TRAIN_FLAG_SPECS] = {
        {"steps", ARG_INT, &o->steps, "training steps (batches)", 1, 10000000, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"batch", ARG_INT, &f->batch, "examples per batch", 1, 4096, NULL, ARG_TRAINING, ARG_ACTS_WITH_LOAD},
        {"lr", ARG_FLOAT, &o->lr, "peak learning rate (AdamW; warm-up, then cosine decay)", 1e-6, 1, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"warmup", ARG_INT, &o->warmup, "learning-rate warm-up steps", 0, 1000000, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"clip", ARG_FLOAT, &o->clip, "clip the global gradient norm to this (0: off)", 0, 1e6, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"weight-decay", ARG_FLOAT, &o->weight_decay, "AdamW's decoupled weight decay", 0, 1, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"seed", ARG_INT, &f->seed, "random seed (weights, batches, all else drawn)", 0,
         2147483647, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"eval-every", ARG_INT, &o->eval_every, "steps between loss-curve points (0: at the end)", 0,
         1000000, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"preset", ARG_STRING, &f->preset, "named flags before yours (yours win)", 0, 0,
         preset_choices, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"out", ARG_STRING, &f->out, "output directory (none: out/<program>; --load: eval_* in it)", 0, 0, NULL,
         ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"load", ARG_STRING, &f->load, "use this saved model instead of training one", 0, 0, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},
        {"force", ARG_BOOL, &f->force, "train over the weights of a stopped run in --out (its *_so_far.ckpt)", 0, 0,
         NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"resume", ARG_BOOL, &f->resume, "continue the stopped run in --out (its *_so_far.ckpt; the same flags)", 0,
         0, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"backend", ARG_STRING, &f->backend, "matmul backend ($ATTN_BACKEND, else auto)", 0, 0, BACKEND_CHOICES,
         ARG_SHARED, ARG_ACTS_WITH_LOAD},
        {"matmul-precision", ARG_STRING, &f->matmul_precision, MATMUL_PRECISION_HELP, 0, 0, "float,bf16",
         ARG_SHARED, ARG_ACTS_WITH_LOAD},
        {"threads", ARG_INT, &f->threads, "threads (0 = OMP_NUM_THREADS or all cores)", 0, 256, NULL, ARG_SHARED,
         ARG_ACTS_WITH_LOAD},
        {"quiet", ARG_BOOL, &o->quiet, "no progress line", 0, 0, NULL, ARG_SHARED, ARG_ACTS_WITH_LOAD},
    };
    for (int i = 0; i < TRAIN_FLAG_SPECS; i++) specs[i] = table[i];
    if (preset_choices == NULL) *args_find(specs, TRAIN_FLAG_SPECS, "preset") = args_refused("preset", "this program has no presets");
    return TRAIN_FLAG_SPECS;
}

int train_flags_apply(const TrainFlags *f) {
    if (backend_select(f->backend) < 0 || matmul_precision_select(f->matmul_precision) < 0 ||
        gnuplot_timeout_check() < 0)
        return -1;
    threads_set(f->threads);
    return 0;
}
