/* main.c - chapter 05: multi-head attention.
 *
 *   ./build/05_multi_head_attention                       everything, quick defaults
 *   ./build/05_multi_head_attention --heads 1,2,4,8 --task neighbours --steps 400
 *   ./build/05_multi_head_attention --scale-max-len 4096  the N^2 table up to N = 4096
 *   ./build/05_multi_head_attention --load out/05_multi_head_attention/model_count_next_h4.ckpt
 *                                                          evaluate a saved model on its test set
 *   ./build/05_multi_head_attention --load out/05_multi_head_attention/model_count_next_h4.ckpt \
 *                                   --input "3 1 4 1 5 9 2 6" --plot   its output and heads for your digits
 *
 * It prints, in order:
 *   1. the 4 big matmuls with their shapes, and a check that the fused layer
 *      equals H separate chapter-04 heads (concatenated, then W_O), with the
 *      time of both (demos.c);
 *   2. compute and memory as the sequence length N grows (the O(N^2));
 *   3. training of chapter 04's digit model with H = 1, 2, 4 heads at equal
 *      total width H*D_H, and the results table;
 * and writes out/05_multi_head_attention/: results.json, a checkpoint of
 * every trained model (model_<task>_h<H>.ckpt), one attention heatmap per
 * head of every trained model, the loss curves and the scaling plots.
 * Flags, training, evaluation, plots and --load are the driver's
 * (common/train/classifier.h); this file says which models to train. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "05_multi_head_attention/demos.h"
#include "05_multi_head_attention/multi_head_model.h"
#include "data/digit_tasks.h"
#include "train/classifier.h"
#include "util/error.h"
#include "util/output.h"

#define MAX_VARIANTS 8

static struct {
    const char *task, *pos, *heads, *attention;
    int len, dim, ff, layers, causal;
    int scale_max_len, scale_dim, scale_heads, scale_repeats;
} model_flags = {"count_next", "learned", "1,2,4", "plain", 8, 64, 128, 1, 0, 2048, 64, 4, 5};

static const ArgSpec MODEL_ARGS[] = {
    {"heads", ARG_STRING, &model_flags.heads, "head counts to compare, at equal width H*D_H = --dim", 0, 0, NULL,
     ARG_MODEL},
    {"dim", ARG_INT, &model_flags.dim, "model width D = H*D_H", 2, 1024, NULL, ARG_MODEL},
    {"ff", ARG_INT, &model_flags.ff, "MLP width F", 1, 4096, NULL, ARG_MODEL},
    {"hidden", ARG_REFUSED, NULL, "the MLP width F is --ff here, as in chapters 06 and 07 (--hidden is the RNN state "
     "S of chapters 01-03)", 0, 0, NULL, ARG_MODEL},
    {"layers", ARG_INT, &model_flags.layers, "multi-head attention layers", 1, DIGIT_MAX_LAYERS, NULL, ARG_MODEL},
    {"pos", ARG_STRING, &model_flags.pos, "positional encoding", 0, 0, "none,sinusoidal,learned", ARG_MODEL},
    {"causal", ARG_BOOL, &model_flags.causal, "causal mask: output i only sees inputs 1..i", 0, 0, NULL, ARG_MODEL},
    {"attention", ARG_STRING, &model_flags.attention, "plain (N x N weights) or fused (online softmax)", 0,
     0, "plain,fused", ARG_MODEL},
    {"task", ARG_STRING, &model_flags.task, "digit task (see the README)", 0, 0,
     "count_next,neighbours,reverse,sort,count", ARG_DATA},
    {"len", ARG_INT, &model_flags.len, "sequence length N of the digit task", 3, 64, NULL, ARG_DATA},
    {"scale-max-len", ARG_INT, &model_flags.scale_max_len, "largest N of the cost table (0 skips it)", 0, 16384, NULL,
     ARG_OUTPUT},
    {"scale-dim", ARG_INT, &model_flags.scale_dim, "width D of the cost table's layer", 1, 4096, NULL, ARG_OUTPUT},
    {"scale-heads", ARG_INT, &model_flags.scale_heads, "heads of the cost table's layer", 1, 256, NULL, ARG_OUTPUT},
    {"scale-repeats", ARG_INT, &model_flags.scale_repeats, "timed runs per N (the median is printed)", 1, 15, NULL,
     ARG_OUTPUT},
};

/* "1,2,4" -> heads[] = {1, 2, 4}; every count must divide dim. */
static int parse_heads(const char *text, int dim, int *heads) {
    int n = args_int_list("heads", text, heads, MAX_VARIANTS, dim);
    for (int i = 0; i < n; i++)
        if (dim % heads[i] != 0)
            return fail("--heads: %d heads do not divide --dim %d (each head gets dim / heads)", heads[i], dim);
    return n;
}

/* One run per head count, at equal width; the headline is the most heads. */
static int plan(const ClassifierFlags *f, ClassifierRun *runs, int max, int *headline) {
    int heads[MAX_VARIANTS], n = parse_heads(model_flags.heads, model_flags.dim, heads);
    DigitTask task;
    PosType pos;
    if (n < 0 || digit_task_from_name(model_flags.task, &task) < 0 ||
        pos_type_from_name(model_flags.pos, &pos) < 0)
        return -1;
    MultiHeadModelConfig c = {.digit = {.N = model_flags.len, .D = model_flags.dim, .F = model_flags.ff,
                                        .L = model_flags.layers, .C = digit_task_classes(task, model_flags.len),
                                        .pos = pos, .causal = model_flags.causal}};
    *headline = 0;
    for (int v = 0; v < n && v < max; v++) {
        c.H = heads[v];
        c.D_H = model_flags.dim / c.H;
        snprintf(runs[v].key, sizeof runs[v].key, "%s_h%d", model_flags.task, c.H);
        snprintf(runs[v].label, sizeof runs[v].label, "H = %d, D_H = %d", c.H, c.D_H);
        if (classifier_config_text(&runs[v], MH_MODEL_NAME, model_flags.task, MH_MODEL_CONFIG_FIELDS,
                                   MH_MODEL_CONFIG_N, &c, f->seed) < 0)
            return -1;
        if (c.H > heads[*headline]) *headline = v;
    }
    return n;
}

/* --attention, already checked against its choices by the flag parser */
static MultiHeadAttention attention_flag(void) {
    MultiHeadAttention a = MULTI_HEAD_PLAIN;
    multi_head_attention_from_name(model_flags.attention, &a);
    return a;
}

static int build(Classifier *c, const char *config, int max_B, uint64_t seed) {
    MultiHeadModelConfig cfg;
    if (config_read(config, MH_MODEL_CONFIG_FIELDS, MH_MODEL_CONFIG_N, &cfg) < 0) return -1;
    return mh_model_build(c, &cfg, attention_flag(), max_B, seed);
}

static int task_of(const char *config, ExampleTask *t) {
    static DigitTaskSpec spec;
    return digit_task_from_config(config, &spec, t);
}

/* The 4 big matmuls at the largest head count asked for, then the cost table. */
static int before(const ClassifierFlags *f, Results *res) {
    if (model_flags.scale_dim % model_flags.scale_heads != 0)
        return fail("--scale-heads: expected a divisor of --scale-dim %d, got %d", model_flags.scale_dim,
                    model_flags.scale_heads);
    int heads[MAX_VARIANTS], n = parse_heads(model_flags.heads, model_flags.dim, heads), most = 0;
    if (n < 0) return -1;
    for (int v = 0; v < n; v++) if (heads[v] > most) most = heads[v];
    const MultiHeadDemoSetup setup = {f->batch, model_flags.len, model_flags.dim, model_flags.causal, f->seed,
                                      attention_flag(), model_flags.scale_max_len, model_flags.scale_dim,
                                      model_flags.scale_heads, model_flags.scale_repeats, f->out};
    four_matmuls_demo(&setup, most);
    return model_flags.scale_max_len >= 64 ? length_scaling_experiment(&setup, res) : 0;
}

int main(int argc, char **argv) {
    output_guard();
    const ClassifierChapter chapter = {
        .model_name = MH_MODEL_NAME,
        .chapter = "05_multi_head_attention",
        .summary = "Chapter 05: multi-head attention, H heads in 4 big matmuls, its cost as N grows, and\n"
                   "chapter 04's digit model with 1, 2 and 4 heads at equal width on a two-lookup task.",
        .examples = "./build/05_multi_head_attention\n"
                    "./build/05_multi_head_attention --heads 1,8 --task neighbours\n"
                    "./build/05_multi_head_attention --attention fused --scale-max-len 0\n"
                    "./build/05_multi_head_attention --load out/05_multi_head_attention/model_count_next_h2.ckpt "
                    "--input \"3 1 4 1 5 9 2 6\" --plot",
        .typed_input = 1,
        .model_args = MODEL_ARGS,
        .n_model_args = (int)(sizeof MODEL_ARGS / sizeof MODEL_ARGS[0]),
        .load_flags = "attention",
        /* warm-up 50 steps and a point of the loss curve every 20: steps / 20 and steps / 50 */
        .defaults = {.train = {.steps = 1000, .lr = 3e-3f, .warmup = 50, .lr_floor = 0.05f, .clip = 1.0f,
                               .eval_every = 20, .unit = "examples"},
                     .batch = 64, .seed = 1, .test_size = 2000},
        .plan = plan,
        .build = build,
        .task = task_of,
        .before = before,
    };
    return output_exit_status("05_multi_head_attention", classifier_main(argc, argv, &chapter));
}
