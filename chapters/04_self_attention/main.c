/* main.c - chapter 04: self-attention, and why it needs positions.
 *
 *   ./build/04_self_attention                     every task x every positional encoding
 *   ./build/04_self_attention --task reverse --pos sinusoidal --steps 3000
 *   ./build/04_self_attention --task reverse --causal      (output i sees inputs 1..i only)
 *   ./build/04_self_attention --load out/04_self_attention/model_reverse_sinusoidal.ckpt
 *                                                   evaluate a saved model on its task's test set
 *   ./build/04_self_attention --load out/04_self_attention/model_reverse_sinusoidal.ckpt \
 *                             --input "3 1 4 1 5 9 2 6" --plot     its output (and attention) for your digits
 *
 * It prints, in order:
 *   1. permutation equivariance in numbers: one self-attention layer on X and
 *      on a permutation of X, without and with positional encodings (demos.c);
 *   2. training of the small model of digit_model.h on each task (reverse,
 *      sort, count) with each positional encoding (none, sinusoidal, learned);
 *   3. the results table (exact sequence match, per-output accuracy);
 * and writes out/04_self_attention/: results.json, a checkpoint of every
 * trained model (model_<task>_<pos>.ckpt), attention heatmaps of the trained
 * models, the loss curves, and the heatmaps of the sinusoidal encodings.
 * Flags, training, evaluation, plots and --load are the driver's
 * (common/train/classifier.h); this file says which models to train. */
#include <stdio.h>
#include <string.h>

#include "04_self_attention/demos.h"
#include "04_self_attention/digit_model.h"
#include "data/digit_tasks.h"
#include "train/classifier.h"
#include "util/output.h"

static struct {
    const char *task, *pos;
    int len, dim, ff, layers, causal;
} model_flags = {"all", "all", 8, 64, 128, 2, 0};

static const ArgSpec MODEL_ARGS[] = {
    {"pos", ARG_STRING, &model_flags.pos, "positional encoding(s)", 0, 0, "all,none,sinusoidal,learned", ARG_MODEL},
    {"dim", ARG_INT, &model_flags.dim, "model width D (= D_in = D_out of every layer)", 2, 1024, NULL, ARG_MODEL},
    {"ff", ARG_INT, &model_flags.ff, "MLP width F", 1, 4096, NULL, ARG_MODEL},
    {"hidden", ARG_REFUSED, NULL, "the MLP width F is --ff here, as in chapters 06 and 07 (--hidden is the RNN state "
     "S of chapters 01-03)", 0, 0, NULL, ARG_MODEL},
    {"layers", ARG_INT, &model_flags.layers, "self-attention layers", 1, DIGIT_MAX_LAYERS, NULL, ARG_MODEL},
    {"causal", ARG_BOOL, &model_flags.causal, "causal mask: output i only sees inputs 1..i", 0, 0, NULL, ARG_MODEL},
    {"task", ARG_STRING, &model_flags.task, "which task(s) to train", 0, 0, "all,reverse,sort,count", ARG_DATA},
    {"len", ARG_INT, &model_flags.len, "sequence length N", 2, 64, NULL, ARG_DATA},
};

/* Every chapter-04 task the flags ask for, with every positional encoding
 * they ask for; the headline is the first task with sinusoidal positions. */
static int plan(const ClassifierFlags *f, ClassifierRun *runs, int max, int *headline) {
    int n = 0;
    *headline = -1;
    for (int t = 0; t < DIGIT_N_POSITION_TASKS; t++) {
        const char *task = digit_task_name((DigitTask)t);
        if (strcmp(model_flags.task, "all") != 0 && strcmp(model_flags.task, task) != 0) continue;
        for (int p = 0; p < POS_N_TYPES && n < max; p++) {
            const char *pos = pos_type_name((PosType)p);
            if (strcmp(model_flags.pos, "all") != 0 && strcmp(model_flags.pos, pos) != 0) continue;
            const DigitConfig c = {.N = model_flags.len, .D = model_flags.dim, .F = model_flags.ff,
                                   .L = model_flags.layers, .C = digit_task_classes((DigitTask)t, model_flags.len),
                                   .pos = (PosType)p, .causal = model_flags.causal};
            ClassifierRun *r = &runs[n];
            snprintf(r->key, sizeof r->key, "%s_%s", task, pos);
            snprintf(r->label, sizeof r->label, "%s, %s positions", task, pos);
            if (classifier_config_text(r, DIGIT_MODEL_NAME, task, DIGIT_CONFIG_FIELDS, DIGIT_CONFIG_N, &c, f->seed) < 0)
                return -1;
            if (*headline < 0 || (p == POS_SINUSOIDAL && strncmp(runs[*headline].key, task, strlen(task)) == 0))
                *headline = n;
            n++;
        }
    }
    return n;
}

static int build(Classifier *m, const char *config, int max_B, uint64_t seed) {
    DigitConfig c;
    if (config_read(config, DIGIT_CONFIG_FIELDS, DIGIT_CONFIG_N, &c) < 0) return -1;
    return digit_model_build(m, &c, max_B, seed);
}

static int task_of(const char *config, ExampleTask *t) {
    static DigitTaskSpec spec;
    return digit_task_from_config(config, &spec, t);
}

static int before(const ClassifierFlags *f, Results *res) {
    (void)res;
    equivariance_demo((uint64_t)f->seed);
    return 0;
}

static int after(const ClassifierFlags *f, Results *res) {
    (void)res;
    return plot_sinusoids(f->out, model_flags.dim);
}

int main(int argc, char **argv) {
    output_guard();
    const ClassifierChapter chapter = {
        .model_name = DIGIT_MODEL_NAME,
        .chapter = "04_self_attention",
        .summary = "Chapter 04: self-attention (Q, K, V from one input X) on reverse, sort and count of digits,\n"
                   "without and with positional encodings: without them the layer cannot tell the order.",
        .examples = "./build/04_self_attention\n"
                    "./build/04_self_attention --task sort --pos sinusoidal --layers 1\n"
                    "./build/04_self_attention --load out/04_self_attention/model_reverse_sinusoidal.ckpt "
                    "--input \"3 1 4 1 5 9 2 6\" --plot",
        .typed_input = 1,
        .model_args = MODEL_ARGS,
        .n_model_args = (int)(sizeof MODEL_ARGS / sizeof MODEL_ARGS[0]),
        /* warm-up 30 steps and a point of the loss curve every 12: steps / 20 and steps / 50 */
        .defaults = {.train = {.steps = 600, .lr = 3e-3f, .warmup = 30, .lr_floor = 0.05f, .clip = 1.0f,
                               .eval_every = 12, .unit = "examples"},
                     .batch = 64, .seed = 1, .test_size = 2000},
        .plan = plan,
        .build = build,
        .task = task_of,
        .before = before,
        .after = after,
    };
    return output_exit_status("04_self_attention", classifier_main(argc, argv, &chapter));
}
