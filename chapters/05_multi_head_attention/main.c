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
 * The program, top to bottom: flags; with --load, the saved model on its
 * test set (or your digits) and done; otherwise the 4 big matmuls with
 * their shapes and a check that the fused layer equals H separate chapter-04
 * heads (concatenated, then W_O), with the time of both, and the compute and
 * memory as the sequence length N grows, the O(N^2) (demos.c); then chapter
 * 04's digit model trained with H = 1, 2, 4 heads at equal total width
 * H*D_H, the results table, and in out/05_multi_head_attention/:
 * results.json, a checkpoint of every model (model_<task>_h<H>.ckpt), one
 * attention heatmap per head, the loss curves and the scaling plots. Each
 * step is a call of the classifier driver (common/train/classifier.h; the
 * training runs train/loop.h's train_loop). */
#include <stdio.h>

#include "05_multi_head_attention/demos.h"
#include "05_multi_head_attention/multi_head_model.h"
#include "data/digit_tasks.h"
#include "train/classifier.h"
#include "util/error.h"
#include "util/output.h"

static const ClassifierProgram PROGRAM = {
    .chapter = "05_multi_head_attention",
    .model_name = MH_MODEL_NAME,
    .summary = "Chapter 05: multi-head attention, H heads in 4 big matmuls, its cost as N grows, and\n"
               "chapter 04's digit model with 1, 2 and 4 heads at equal width on a two-lookup task.",
    .examples = "./build/05_multi_head_attention\n"
                "./build/05_multi_head_attention --heads 1,8 --task neighbours\n"
                "./build/05_multi_head_attention --attention fused --scale-max-len 0\n"
                "./build/05_multi_head_attention --load out/05_multi_head_attention/model_count_next_h2.ckpt "
                "--input \"3 1 4 1 5 9 2 6\" --plot",
    .typed_input = 1,
};

#define MAX_HEAD_COUNTS 8

/* "1,2,4" -> heads[] = {1, 2, 4}; every count must divide dim, and none
 * comes twice (it would train the same model again). */
static int parse_heads(const char *text, int dim, int *heads) {
    int n = args_int_list("heads", text, heads, MAX_HEAD_COUNTS, dim);
    for (int i = 0; i < n; i++) {
        if (dim % heads[i] != 0)
            return fail("--heads: %d heads do not divide --dim %d (each head gets dim / heads)", heads[i], dim);
        for (int j = 0; j < i; j++)
            if (heads[j] == heads[i])
                return fail("--heads %s: %d comes twice (it would train the same model twice): expected "
                            "different head counts", text, heads[i]);
    }
    return n;
}

/* One model: built from its configuration (attention plain or fused),
 * trained on the task, tested, saved, and its first test example shown. */
static int train_one(ClassifierRuns *runs, int i, const MultiHeadModelConfig *c, MultiHeadAttention attention,
                     DigitTask task) {
    const ClassifierFlags *f = &runs->flags;
    DigitTaskSpec spec = {task, c->digit.N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    Classifier m;
    if (mh_model_build(&m, c, attention, f->shared.batch, (uint64_t)f->shared.seed) < 0) return -1;
    printf("  %s: %zu parameters\n", runs->run[i].label, m.params->size);
    int rc = classifier_train(&m, &t, &f->shared.train, f->shared.batch, (uint64_t)f->shared.seed, NULL,
                              &runs->result[i]);
    if (rc == 0) classifier_test(runs, &m, &t, &runs->result[i]);
    if (rc == 0) rc = classifier_save(runs, &runs->run[i], &m, &runs->result[i]);
    if (rc == 0) rc = classifier_show_first_test_example(runs, &runs->run[i], &m, &t);
    m.destroy(m.self);
    return rc;
}

/* --load: the saved model (its configuration and task are its checkpoint's;
 * --attention still chooses how it computes) on its task's test set, or on
 * the digits of --input. */
static int use_saved_model(ClassifierRuns *runs, MultiHeadAttention attention) {
    MultiHeadModelConfig c;
    DigitTaskSpec spec;
    ExampleTask t;
    Classifier m;
    if (classifier_read_config(runs, MH_MODEL_CONFIG_FIELDS, MH_MODEL_CONFIG_N, &c) < 0 ||
        digit_task_from_config(runs->config, &spec, &t) < 0 ||
        mh_model_build(&m, &c, attention, runs->flags.shared.batch, 0) < 0)
        return -1;
    const int rc = classifier_use_saved(runs, &m, &t);
    m.destroy(m.self);
    return rc;
}

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration, the task and the cost table
     *    (defaults here), then the flags every such program shares. */
    const char *task_flag = "count_next", *pos_flag = "learned", *heads_flag = "1,2,4", *attention_flag = "plain";
    MultiHeadModelConfig c = {.digit = {.N = 8, .D = 64, .F = 128, .L = 1}};
    MultiHeadDemoSetup demo = {.scale_max_len = 2048, .scale_dim = 64, .scale_heads = 4, .scale_repeats = 5};
    const ArgSpec model_flags[] = {
        {"heads", ARG_STRING, &heads_flag, "head counts to compare, at equal width H*D_H = --dim", 0, 0, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"dim", ARG_INT, &c.digit.D, "model width D = H*D_H", 2, 1024, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"ff", ARG_INT, &c.digit.F, "MLP width F", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"hidden", ARG_REFUSED, NULL, "the MLP width F is --ff here, as in chapters 06 and 07 (--hidden is the RNN "
         "state S of chapters 01-03)", 0, 0, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"layers", ARG_INT, &c.digit.L, "multi-head attention layers", 1, DIGIT_MAX_LAYERS, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"pos", ARG_STRING, &pos_flag, "positional encoding", 0, 0, "none,sinusoidal,learned",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"causal", ARG_BOOL, &c.digit.causal, "causal mask: output i only sees inputs 1..i", 0, 0, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"attention", ARG_STRING, &attention_flag, "plain (N x N weights) or fused (online softmax)", 0, 0,
         "plain,fused", ARG_MODEL, ARG_ACTS_WITH_LOAD},
        {"task", ARG_STRING, &task_flag, "digit task (see the README)", 0, 0,
         "count_next,neighbours,reverse,sort,count", ARG_DATA, ARG_TRAINING_ONLY},
        {"len", ARG_INT, &c.digit.N, "sequence length N of the digit task", 3, 64, NULL, ARG_DATA, ARG_TRAINING_ONLY},
        {"scale-max-len", ARG_INT, &demo.scale_max_len, "largest N of the cost table (0 skips it)", 0, 16384, NULL,
         ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"scale-dim", ARG_INT, &demo.scale_dim, "width D of the cost table's layer", 1, 4096, NULL,
         ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"scale-heads", ARG_INT, &demo.scale_heads, "heads of the cost table's layer", 1, 256, NULL,
         ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"scale-repeats", ARG_INT, &demo.scale_repeats, "timed runs per N (the median is printed)", 1, 15, NULL,
         ARG_OUTPUT, ARG_TRAINING_ONLY},
    };
    static ClassifierRuns runs;
    classifier_init(&runs, &PROGRAM);
    runs.flags.shared.train.steps = 1000;
    runs.flags.shared.train.warmup = 50;       /* steps / 20, as before the shared loop */
    runs.flags.shared.train.eval_every = 20;   /* steps / 50: a loss curve of 50 points */
    runs.flags.test_size = 2000;
    int rc = classifier_parse_flags(&runs, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));
    MultiHeadAttention attention = MULTI_HEAD_PLAIN;   /* (the flag's choices are checked) */
    if (rc == 0) multi_head_attention_from_name(attention_flag, &attention);

    /* 2. With --load: the saved model, and done. */
    if (rc == 0 && runs.flags.shared.load) return classifier_finish(&runs, use_saved_model(&runs, attention));

    /* 3. The runs: one per head count, at equal width D = H D_H; the headline has the most heads. */
    DigitTask task = TASK_COUNT_NEXT;
    int heads[MAX_HEAD_COUNTS], n_heads = rc == 0 ? parse_heads(heads_flag, c.digit.D, heads) : 0;
    if (rc == 0 && (n_heads < 0 || digit_task_from_name(task_flag, &task) < 0 ||
                    pos_type_from_name(pos_flag, &c.digit.pos) < 0))
        rc = -1;
    MultiHeadModelConfig configs[MAX_HEAD_COUNTS];
    for (int i = 0; rc == 0 && i < n_heads; i++) {
        configs[i] = c;
        configs[i].digit.C = digit_task_classes(task, c.digit.N);
        configs[i].H = heads[i];
        configs[i].D_H = c.digit.D / heads[i];
        char key[24];
        snprintf(key, sizeof key, "%s_h%d", task_flag, heads[i]);
        ClassifierRun *run = classifier_add_run(&runs, key, "H = %d, D_H = %d", configs[i].H, configs[i].D_H);
        if (heads[i] > heads[runs.headline]) runs.headline = i;
        rc = run ? classifier_config_text(run, MH_MODEL_NAME, task_flag, MH_MODEL_CONFIG_FIELDS, MH_MODEL_CONFIG_N,
                                          &configs[i], runs.flags.shared.seed) : -1;
    }

    /* 4. The 4 big matmuls at the most heads asked for, then the cost table (demos.c). */
    demo.batch = runs.flags.shared.batch;
    demo.len = c.digit.N;
    demo.dim = c.digit.D;
    demo.causal = c.digit.causal;
    demo.seed = runs.flags.shared.seed;
    demo.attention = attention;
    demo.out = runs.flags.shared.out;
    if (rc == 0 && demo.scale_dim % demo.scale_heads != 0)
        rc = fail("--scale-heads: expected a divisor of --scale-dim %d, got %d", demo.scale_dim, demo.scale_heads);
    if (rc == 0) four_matmuls_demo(&demo, heads[runs.headline]);
    if (rc == 0 && demo.scale_max_len >= 64) rc = length_scaling_experiment(&demo, &runs.results);

    /* 5. Training: each model built, trained, tested, saved. */
    if (rc == 0) classifier_start(&runs);
    for (int i = 0; rc == 0 && i < runs.n; i++) rc = train_one(&runs, i, &configs[i], attention, task);

    /* 6. The results table, the loss curves, results.json. */
    if (rc == 0) rc = classifier_report(&runs);
    if (rc == 0) rc = classifier_write_results(&runs);
    return classifier_finish(&runs, rc);
}
