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
 * The program, top to bottom: flags; with --load, the saved model on its
 * test set (or your digits) and done; otherwise permutation equivariance in
 * numbers (one self-attention layer on X and on a permutation of X, without
 * and with positional encodings, demos.c), then the small model of
 * digit_model.h trained on each task (reverse, sort, count) with each
 * positional encoding (none, sinusoidal, learned), the results table (exact
 * sequence match, per-output accuracy), and in out/04_self_attention/:
 * results.json, a checkpoint of every model (model_<task>_<pos>.ckpt),
 * attention heatmaps, the loss curves and the heatmaps of the sinusoidal
 * encodings. Each step is a call of the classifier driver
 * (common/train/classifier.h; the training runs train/loop.h's train_loop). */
#include <stdio.h>
#include <string.h>

#include "04_self_attention/demos.h"
#include "04_self_attention/digit_model.h"
#include "data/digit_tasks.h"
#include "train/classifier.h"
#include "util/output.h"

static const ClassifierProgram PROGRAM = {
    .chapter = "04_self_attention",
    .model_name = DIGIT_MODEL_NAME,
    .summary = "Chapter 04: self-attention (Q, K, V from one input X) on reverse, sort and count of digits,\n"
               "without and with positional encodings: without them the layer cannot tell the order.",
    .examples = "./build/04_self_attention\n"
                "./build/04_self_attention --task sort --pos sinusoidal --layers 1\n"
                "./build/04_self_attention --load out/04_self_attention/model_reverse_sinusoidal.ckpt "
                "--input \"3 1 4 1 5 9 2 6\" --plot",
    .typed_input = 1,
};

/* The runs of the tasks and positional encodings the flags name (or
 * "all"), each model's configuration c with the task's classes and that
 * encoding. The headline is the first run with sinusoidal positions (else
 * the first run). */
static int plan_runs(ClassifierRuns *runs, const DigitConfig *c, const char *task_flag, const char *pos_flag,
                     DigitConfig *configs, DigitTask *tasks) {
    for (int t = 0; t < DIGIT_N_POSITION_TASKS; t++) {
        const char *task = digit_task_name((DigitTask)t);
        if (strcmp(task_flag, "all") != 0 && strcmp(task_flag, task) != 0) continue;
        for (int p = POS_NONE; p <= POS_LEARNED; p++) {   /* none, sinusoidal, learned */
            const char *pos = pos_type_name((PosType)p);
            if (strcmp(pos_flag, "all") != 0 && strcmp(pos_flag, pos) != 0) continue;
            char key[24];
            snprintf(key, sizeof key, "%s_%s", task, pos);
            ClassifierRun *run = classifier_add_run(runs, key, "%s, %s positions", task, pos);
            if (!run) return -1;
            const int i = runs->n - 1;
            configs[i] = *c;
            configs[i].C = digit_task_classes((DigitTask)t, c->N);
            configs[i].pos = (PosType)p;
            tasks[i] = (DigitTask)t;
            if (configs[i].pos == POS_SINUSOIDAL && configs[runs->headline].pos != POS_SINUSOIDAL) runs->headline = i;
            if (classifier_config_text(run, DIGIT_MODEL_NAME, task, DIGIT_CONFIG_FIELDS, DIGIT_CONFIG_N, &configs[i],
                                       runs->flags.shared.seed) < 0)
                return -1;
        }
    }
    return 0;
}

/* One model: built from its configuration, trained on its task, tested,
 * saved, and its first test example shown. */
static int train_one(ClassifierRuns *runs, int i, const DigitConfig *c, DigitTask task) {
    const ClassifierFlags *f = &runs->flags;
    DigitTaskSpec spec = {task, c->N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    Classifier m;
    if (digit_model_build(&m, c, f->shared.batch, (uint64_t)f->shared.seed) < 0) return -1;
    printf("  %s: %zu parameters\n", runs->run[i].label, m.params->size);
    int rc = classifier_train(&m, &t, &f->shared.train, f->shared.batch, (uint64_t)f->shared.seed, NULL,
                              &runs->result[i]);
    if (rc == 0) classifier_test(runs, &m, &t, &runs->result[i]);
    if (rc == 0) rc = classifier_save(runs, &runs->run[i], &m, &runs->result[i]);
    if (rc == 0) rc = classifier_show_first_test_example(runs, &runs->run[i], &m, &t);
    m.destroy(m.self);
    return rc;
}

/* --load: the saved model (its configuration and task are its checkpoint's)
 * on its task's test set, or on the digits of --input. */
static int use_saved_model(ClassifierRuns *runs) {
    DigitConfig c;
    DigitTaskSpec spec;
    ExampleTask t;
    Classifier m;
    if (classifier_read_config(runs, DIGIT_CONFIG_FIELDS, DIGIT_CONFIG_N, &c) < 0 ||
        digit_task_from_config(runs->config, &spec, &t) < 0 || digit_model_build(&m, &c, runs->flags.shared.batch,
                                                                                 0) < 0)
        return -1;
    const int rc = classifier_use_saved(runs, &m, &t);
    m.destroy(m.self);
    return rc;
}

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration and the tasks (defaults here), then
     *    the flags every such program shares. */
    const char *task_flag = "all", *pos_flag = "all";
    DigitConfig c = {.N = 8, .D = 64, .F = 128, .L = 2};
    const ArgSpec model_flags[] = {
        {"pos", ARG_STRING, &pos_flag, "positional encoding(s)", 0, 0, "all,none,sinusoidal,learned",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"dim", ARG_INT, &c.D, "model width D (= D_in = D_out of every layer)", 2, 1024, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"ff", ARG_INT, &c.F, "MLP width F", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"hidden", ARG_REFUSED, NULL, "the MLP width F is --ff here, as in chapters 06 and 07 (--hidden is the RNN "
         "state S of chapters 01-03)", 0, 0, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"layers", ARG_INT, &c.L, "self-attention layers", 1, DIGIT_MAX_LAYERS, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"causal", ARG_BOOL, &c.causal, "causal mask: output i only sees inputs 1..i", 0, 0, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"task", ARG_STRING, &task_flag, "which task(s) to train", 0, 0, "all,reverse,sort,count",
         ARG_DATA, ARG_TRAINING_ONLY},
        {"len", ARG_INT, &c.N, "sequence length N", 2, 64, NULL, ARG_DATA, ARG_TRAINING_ONLY},
    };
    static ClassifierRuns runs;
    classifier_init(&runs, &PROGRAM);
    runs.flags.shared.train.steps = 600;
    runs.flags.shared.train.warmup = 30;       /* steps / 20, as before the shared loop */
    runs.flags.shared.train.eval_every = 12;   /* steps / 50: a loss curve of 50 points */
    runs.flags.test_size = 2000;
    int rc = classifier_parse_flags(&runs, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));

    /* 2. With --load: the saved model, and done. */
    if (rc == 0 && runs.flags.shared.load) return classifier_finish(&runs, use_saved_model(&runs));

    /* 3. The runs: every task asked for, with every positional encoding asked for. */
    DigitConfig configs[CLASSIFIER_MAX_RUNS];
    DigitTask tasks[CLASSIFIER_MAX_RUNS];
    if (rc == 0) rc = plan_runs(&runs, &c, task_flag, pos_flag, configs, tasks);

    /* 4. Permutation equivariance in numbers (demos.c). */
    if (rc == 0) equivariance_demo((uint64_t)runs.flags.shared.seed);

    /* 5. Training: each model built, trained, tested, saved. */
    if (rc == 0) classifier_start(&runs);
    for (int i = 0; rc == 0 && i < runs.n; i++) rc = train_one(&runs, i, &configs[i], tasks[i]);

    /* 6. The results table, the loss curves, the sinusoids' pictures, results.json. */
    if (rc == 0) rc = classifier_report(&runs);
    if (rc == 0) rc = plot_sinusoids(runs.flags.shared.out, c.D);
    if (rc == 0) rc = classifier_write_results(&runs);
    return classifier_finish(&runs, rc);
}
