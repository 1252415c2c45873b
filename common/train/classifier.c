/* classifier.c - the calls of the programs that train per-position and
 * per-example models: the gradient, training through train_loop,
 * evaluation, flags, --load, checkpoints, heatmaps, the results table and
 * results.json (see classifier.h). */
#include "train/classifier.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "io/plot.h"
#include "kernels/matmul.h"
#include "train/finite.h"
#include "train/progress.h"
#include "util/error.h"
#include "util/output.h"
#include "util/util.h"

#define MAX_LABELS 64    /* inputs labelled on a heatmap's axes */

/* ------------------------------------------------------------- training */

/* What train_loop's calls work on (train/loop.h's Trainer): the model, the
 * task's training stream and its batch, and a recipe's gradient. */
typedef struct {
    Classifier *m;
    int batch, steps;
    const ExampleTask *task;
    Examples e;
    Rng rng;
    const ClassifierRecipe *recipe;   /* NULL: the plain gradient */
} ClassifierTraining;

/* The next batch of the training stream, and its gradient. */
static double training_gradient(void *self, int step, long *count) {
    ClassifierTraining *c = self;
    if (c->m->set_progress) c->m->set_progress(c->m->self, step, c->steps);
    c->task->train_batch(c->task->self, &c->e, c->batch, &c->rng);
    *count = c->batch;
    if (c->recipe) return c->recipe->gradient(c->recipe->self, step, &c->e);
    const double loss = c->m->forward(c->m->self, &c->e);   /* the plain gradient: one forward, one backward */
    c->m->backward(c->m->self, &c->e);
    return loss;
}

static void training_updated(void *self) {
    ClassifierTraining *c = self;
    if (c->recipe && c->recipe->updated) c->recipe->updated(c->recipe->self);
}

int classifier_train(Classifier *m, const ExampleTask *task, const TrainOptions *o, int batch, uint64_t seed,
                     const ClassifierRecipe *recipe, ClassifierResult *r) {
    ClassifierTraining c = {.m = m, .batch = batch, .steps = o->steps, .task = task, .recipe = recipe};
    examples_alloc(&c.e, batch, task->n_in, task->n_out, task->float_inputs);
    rng_seed(&c.rng, seed, 1);                      /* the training stream */
    /* the weights so far beside the run's checkpoint (io/checkpoint.h), at each point of the curve; with
     * them what a resume puts back: the training stream, the model's own stream, the recipe's */
    const int saved = r->checkpoint[0] && r->config;
    char so_far[1100] = "";
    if (saved && checkpoint_so_far_path(so_far, sizeof so_far, r->checkpoint) < 0) return -1;
    Trainer t = {.self = &c, .params = m->params, .gradient = training_gradient, .updated = training_updated,
                 .checkpoint = saved ? r->checkpoint : NULL, .config = r->config, .batch = batch,
                 .state = {{"batches.rng", STATE_U64, &c.rng, 2}}, .n_state = 1};
    if (m->rng) t.state[t.n_state++] = (StateItem){"model.rng", STATE_U64, m->rng, 2};
    for (int k = 0; recipe && k < recipe->n_state; k++) t.state[t.n_state++] = recipe->state[k];
    for (int k = 0; k < m->n_buffers && t.n_state < TRAIN_STATE_MAX; k++)
        t.state[t.n_state++] = m->buffers[k];   /* batch norm's running statistics */
    if (saved && r->resume) {   /* (a run of the program that had finished: trained again, to the same bits) */
        if (file_exists(so_far)) t.resume = so_far;
        else printf("--resume: no %s: this run trains from step 0\n", so_far);
    }
    if (m->set_training) m->set_training(m->self, 1);
    const int rc = train_loop(&t, o, &r->log);
    if (m->set_training) m->set_training(m->self, 0);
    examples_free(&c.e);
    r->seconds = r->log.seconds;
    r->final_loss = r->log.last_loss;
    r->solved_step = 0;   /* the first point of the curve below SOLVED_LOSS */
    for (int i = 0; i < r->log.n && r->solved_step == 0; i++)
        if (r->log.train[i] < SOLVED_LOSS) r->solved_step = (int)r->log.step[i];
    return rc;
}

/* The test stream's n_test examples through m: the counts of classifier_evaluate,
 * and with confusion (one output per example) [C, C] += 1 at [true, predicted]. */
static void evaluate_stream(Classifier *m, const ExampleTask *task, int n_test, uint64_t seed, double *exact,
                            double *token_acc, int C, long *confusion) {
    const int n_out = task->n_out, max_B = m->max_B;
    Examples e;
    examples_alloc(&e, max_B, task->n_in, n_out, task->float_inputs);
    int *pred = xmalloc(sizeof(int) * (size_t)max_B * n_out);
    Rng rng;
    rng_seed(&rng, seed, 99);                       /* the test stream: apart from training */
    if (task->test_reset) task->test_reset(task->self);
    long n_exact = 0, n_right = 0;
    for (int done = 0; done < n_test; done += max_B) {
        int B = n_test - done < max_B ? n_test - done : max_B;
        task->test_batch(task->self, &e, B, &rng);
        m->forward(m->self, &(Examples){B, e.n_in, n_out, e.tokens, e.values, NULL});
        m->predict(m->self, pred);
        for (int b = 0; b < B; b++) {
            int right = 0;
            for (int i = 0; i < n_out; i++) right += pred[b * n_out + i] == e.targets[b * n_out + i];
            n_right += right;
            n_exact += right == n_out;
            if (confusion) confusion[e.targets[b] * C + pred[b]]++;
        }
    }
    *exact = (double)n_exact / n_test;
    *token_acc = (double)n_right / ((double)n_test * n_out);
    examples_free(&e);
    free(pred);
}

void classifier_evaluate(Classifier *m, const ExampleTask *task, int n_test, uint64_t seed,
                         double *exact, double *token_acc) {
    evaluate_stream(m, task, n_test, seed, exact, token_acc, 0, NULL);
}

void classifier_confusion(const ClassifierRuns *runs, Classifier *m, const ExampleTask *t, int C, long *confusion) {
    double exact, token_acc;
    memset(confusion, 0, sizeof *confusion * (size_t)C * (size_t)C);
    evaluate_stream(m, t, runs->flags.test_size, (uint64_t)runs->flags.shared.seed, &exact, &token_acc, C, confusion);
}

int classifier_config_text(ClassifierRun *run, const char *model, const char *task, const ConfigField *fields,
                           int n, const void *cfg, int seed) {
    run->config[0] = '\0';
    if (config_append(run->config, sizeof run->config, "model=%s\ntask=%s\n", model, task) < 0 ||
        config_write(run->config, sizeof run->config, fields, n, cfg) < 0 ||
        config_append(run->config, sizeof run->config, "seed=%d\n", seed) < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------ printing, plots */

/* "  label   3  1  4 ..." : one row of texts (the first MAX_LABELS of n). */
static void print_row(const char *label, const char *const *texts, int n) {
    printf("  %-11s", label);
    for (int i = 0; i < n && i < MAX_LABELS; i++) printf(" %2s", texts[i]);
    printf("%s\n", n > MAX_LABELS ? " ..." : "");
}

typedef struct {
    char text[MAX_LABELS][16];
    const char *ptr[MAX_LABELS];
} Labels;

static void input_labels(Labels *l, const ExampleTask *t, const Examples *e, int b) {
    if (!t->input_text) return;
    for (int i = 0; i < t->n_in && i < MAX_LABELS; i++) {
        t->input_text(t->self, e, b, i, l->text[i], sizeof l->text[i]);
        l->ptr[i] = l->text[i];
    }
}

static void class_labels(Labels *l, const ExampleTask *t, const int *classes, int n) {
    for (int i = 0; i < n && i < MAX_LABELS; i++) {
        t->class_text(t->self, classes[i], l->text[i], sizeof l->text[i]);
        l->ptr[i] = l->text[i];
    }
}

/* Input, prediction and truth of example 0 of e, one row each; one line for
 * a task with one output per example (a class for an image). */
static void print_example(const ExampleTask *t, const Examples *e, const int *pred) {
    if (t->n_out == 1) {
        char predicted[64], truth[64];
        t->class_text(t->self, pred[0], predicted, sizeof predicted);
        t->class_text(t->self, e->targets[0], truth, sizeof truth);
        printf("  first test example: predicted %s, true class %s (%s)\n", predicted, truth,
               pred[0] == e->targets[0] ? "right" : "wrong");
        return;
    }
    Labels in, out, truth;
    input_labels(&in, t, e, 0);
    class_labels(&out, t, pred, t->n_out);
    class_labels(&truth, t, e->targets, t->n_out);
    if (t->input_text) print_row("input", in.ptr, t->n_in);
    print_row("output", out.ptr, t->n_out);
    print_row(t->name, truth.ptr, t->n_out);
    printf("  (the right answer: %s)\n",
           memcmp(pred, e->targets, sizeof(int) * (size_t)t->n_out) == 0 ? "all correct" : "some outputs are wrong");
}

/* One heatmap per layer and head of example 0 of the last forward, written
 * as <stem_prefix>_layer<l>[_head<h>]. The y axis shows y_classes. */
static int plot_attention(const Classifier *m, const ExampleTask *t, const Examples *e, const int *y_classes,
                          const char *stem_prefix, const char *title_prefix, const char *y_title) {
    if (t->n_in > MAX_LABELS || t->n_out != t->n_in) return 0;   /* per-position maps of up to 64 inputs */
    if (!m->attention || !m->attention(m->self, 0, 0, 0)) {
        printf("  (no heatmaps: this model does not keep its attention weights; the plain attention does)\n");
        return 0;
    }
    Labels x_labels, y_labels;
    input_labels(&x_labels, t, e, 0);
    class_labels(&y_labels, t, y_classes, t->n_out);
    for (int l = 0; l < m->layers; l++)
        for (int h = 0; h < m->heads; h++) {
            char stem[1100], title[200];
            if (m->heads == 1) {
                if (path_format(stem, sizeof stem, "%s_layer%d", stem_prefix, l + 1) < 0) return -1;
                snprintf(title, sizeof title, "%.120s: layer %d attention A", title_prefix, l + 1);
            } else {
                if (path_format(stem, sizeof stem, "%s_layer%d_head%d", stem_prefix, l + 1, h + 1) < 0) return -1;
                snprintf(title, sizeof title, "%.120s: layer %d, head %d of %d", title_prefix, l + 1, h + 1, m->heads);
            }
            if (plot_heatmap(stem, title, m->attention(m->self, l, h, 0), t->n_in, t->n_in, x_labels.ptr,
                             y_labels.ptr, "input (key j)", y_title, "attention weight", 0.0f, 1.0f) < 0)
                return -1;
            printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
        }
    return 0;
}

/* ------------------------------------------------------ flags, --load */

void classifier_init(ClassifierRuns *runs, const ClassifierProgram *program) {
    memset(runs, 0, sizeof *runs);
    runs->program = program;
    runs->flags = (ClassifierFlags){.shared = {.train = TRAIN_DEFAULTS, .batch = 64, .seed = 1}, .test_size = 1000};
    if (program->n_presets > 0) runs->flags.shared.preset = program->presets[0].name;
    snprintf(runs->default_out, sizeof runs->default_out, "out/%s", program->chapter);
    results_init(&runs->results);
    results_set_str(&runs->results, "chapter", program->chapter);
    /* the headline's keys first; classifier_report fills them in */
    results_set_num(&runs->results, "test_exact_match", 0.0);
    results_set_num(&runs->results, "test_token_acc", 0.0);
    results_set_num(&runs->results, "train_seconds", 0.0);
    runs->t_start = now_seconds();
}

/* The preset of that name, or NULL. */
static const ClassifierPreset *find_preset(const ClassifierProgram *p, const char *name) {
    for (int i = 0; name && i < p->n_presets; i++)
        if (strcmp(p->presets[i].name, name) == 0) return &p->presets[i];
    return NULL;
}

int classifier_parse_flags(ClassifierRuns *runs, int argc, char **argv, const ArgSpec *own, int n_own) {
    const ClassifierProgram *p = runs->program;
    ClassifierFlags *f = &runs->flags;
    for (int i = 0; i < p->n_presets; i++)
        snprintf(runs->preset_choices + strlen(runs->preset_choices),
                 sizeof runs->preset_choices - strlen(runs->preset_choices), "%s%s", i ? "," : "", p->presets[i].name);
    ArgSpec classifier[] = {
        {"test-size", ARG_INT, &f->test_size, "test examples", 1, 1000000, NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"input", ARG_STRING, &f->input, "with --load: run the model on these digits, e.g. \"3 1 4 1 5 9 2 6\"", 0, 0,
         NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"plot", ARG_BOOL, &f->plot, "with --load and --input: draw the attention over that input", 0, 0, NULL,
         ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
    };
    const int n_classifier = (int)(sizeof classifier / sizeof classifier[0]);
    /* flags this program has no use for: not listed, refused with the reason */
    for (int i = 0; i < n_classifier; i++) {
        const char *name = classifier[i].name;
        if (!p->typed_input && (strcmp(name, "input") == 0 || strcmp(name, "plot") == 0))
            classifier[i] = args_refused(name, "this chapter's inputs are not typed digits (see --help's examples)");
    }
    /* the chapter's own flags, the classifier programs', then those of every program */
    const int n_specs = n_own + n_classifier + TRAIN_FLAG_SPECS;
    ArgSpec *specs = xcalloc((size_t)n_specs, sizeof(ArgSpec));
    if (n_own) memcpy(specs, own, sizeof(ArgSpec) * (size_t)n_own);
    memcpy(specs + n_own, classifier, sizeof classifier);
    train_flag_specs(&f->shared, p->n_presets > 0 ? runs->preset_choices : NULL, specs + n_own + n_classifier);

    int rc = args_parse(argc, argv, specs, n_specs);
    const ClassifierPreset *preset = rc == 0 ? find_preset(p, f->shared.preset) : NULL;
    if (preset && preset->flags[0]) {   /* the preset's flags, then the user's again */
        rc = args_parse_with_preset(argc, argv, preset->flags, specs, n_specs, &runs->preset_argv);
        if (rc == 0) printf("--preset %s = %s\n", preset->name, preset->flags);
    }
    if (rc == 1) {
        args_print_help(argv[0], p->summary, specs, n_specs, p->examples);
        free(specs);
        return 1;
    }
    if (rc == 0 && f->shared.load) rc = args_refuse_with_load(argc, argv, specs, n_specs);
    free(specs);
    if (rc < 0) return -1;
    if (f->input && !f->shared.load) return fail("--input needs --load CHECKPOINT (a trained model to run)");
    if (f->plot && !f->input) return fail("--plot goes with --load CHECKPOINT --input TEXT");
    /* training writes to --out (default out/<chapter>); evaluating a saved
     * model never over a training run's files (results.h) */
    if (f->shared.load) {
        const char *given = f->shared.out;   /* NULL: no --out */
        if (results_eval_dir(runs->eval_out, sizeof runs->eval_out, given, runs->default_out, f->shared.load) < 0)
            return -1;
        f->shared.out = runs->eval_out;
    } else if (f->shared.out == NULL) {
        f->shared.out = runs->default_out;
    }
    /* before training: a path too long or a directory that cannot be written
     * is said now, not after the training whose models would be lost */
    if (train_flags_apply(&f->shared) < 0 || (!f->shared.load && out_dir_prepare("--out", f->shared.out) < 0) ||
        (!f->shared.load && checkpoint_check_stopped_run(f->shared.out, f->shared.force, f->shared.resume) < 0) ||
        (f->shared.load && f->plot && make_dirs(f->shared.out) < 0))
        return -1;
    return 0;
}

int classifier_read_config(ClassifierRuns *runs, const ConfigField *fields, int n_fields, void *cfg) {
    const char *path = runs->flags.shared.load;
    if (checkpoint_read_config(path, &runs->config) < 0) return -1;     /* the message names the path */
    if (checkpoint_check_model(path, runs->config, runs->program->model_name, runs->program->chapter) < 0) return -1;
    if (config_read(runs->config, fields, n_fields, cfg) < 0) {
        char why[1024];                          /* copied: fail() reuses the buffer it came from */
        snprintf(why, sizeof why, "%s", last_error());
        return fail("%s: %s", path, why);
    }
    if (config_get_int(runs->config, "seed", &runs->saved_seed) < 0)
        return fail("%s: the config has no seed (the test stream's)", path);
    return 0;
}

/* The config text on one line: "model=x task=y ...". It comes from a file:
 * any other control character (an ESC that would drive the terminal) is
 * shown as '?'. */
static void config_one_line(const char *config, char *out, int cap) {
    snprintf(out, (size_t)cap, "%s", config);
    for (char *c = out; *c; c++)
        if (*c == '\n') *c = ' ';
        else if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
}

int classifier_load_weights(ClassifierRuns *runs, Classifier *m, const ExampleTask *t) {
    if (t->classes != m->classes || t->n_out != m->n_out)
        return fail("%s: the model predicts %d outputs of %d classes, but task '%s' has %d of %d",
                    runs->flags.shared.load,
                    m->n_out, m->classes, t->name, t->n_out, t->classes);
    char line[CLASSIFIER_CONFIG_MAX];
    config_one_line(runs->config, line, sizeof line);
    printf("Loaded %s: %s(%zu parameters)\n", runs->flags.shared.load, line, m->params->size);
    return checkpoint_load_with_state(runs->flags.shared.load, m->params, m->buffers, m->n_buffers);
}

/* --input: the model on the user's digits, and (--plot) its attention. */
static int run_on_input(const ClassifierFlags *f, Classifier *m, const ExampleTask *t) {
    Examples e;
    examples_alloc(&e, 1, t->n_in, t->n_out, t->float_inputs);
    int *pred = xmalloc(sizeof(int) * (size_t)t->n_out);
    int rc = t->parse_input(t->self, f->input, &e);
    if (rc == 0) {
        m->forward(m->self, &(Examples){1, e.n_in, e.n_out, e.tokens, e.values, NULL});
        m->predict(m->self, pred);
        print_example(t, &e, pred);
    }
    if (rc == 0 && f->plot) {
        if (!m->attention || !m->attention(m->self, 0, 0, 0)) {
            rc = fail("--plot: this model does not keep its attention weights (fused attention); "
                      "load it with the plain attention");
        } else {
            char stem[1100];
            rc = path_format(stem, sizeof stem, "%s/input_attn", f->shared.out);
            if (rc == 0) printf("Wrote:\n");
            if (rc == 0) rc = plot_attention(m, t, &e, pred, stem, "your input", "output at i (query i)");
        }
    }
    examples_free(&e);
    free(pred);
    return rc;
}

int classifier_use_saved(ClassifierRuns *runs, Classifier *m, const ExampleTask *t) {
    const ClassifierFlags *f = &runs->flags;
    if (classifier_load_weights(runs, m, t) < 0) return -1;
    if (f->input) return run_on_input(f, m, t);
    double exact, token_acc;
    classifier_evaluate(m, t, f->test_size, (uint64_t)runs->saved_seed, &exact, &token_acc);
    printf("  %d test examples of '%s': exact match %.1f%%, token accuracy %.1f%%\n", f->test_size, t->name,
           100 * exact, 100 * token_acc);
    return 0;
}

/* ------------------------------------------------------------- the runs */

ClassifierRun *classifier_add_run(ClassifierRuns *runs, const char *key, const char *label_format, ...) {
    if (runs->n >= CLASSIFIER_MAX_RUNS) {
        fail("more than %d models to train", CLASSIFIER_MAX_RUNS);
        return NULL;
    }
    ClassifierRun *run = &runs->run[runs->n];
    ClassifierResult *r = &runs->result[runs->n++];
    memset(run, 0, sizeof *run);
    snprintf(run->key, sizeof run->key, "%s", key);
    /* where training writes its weights so far, and classifier_save the final ones */
    r->config = run->config;
    r->resume = runs->flags.shared.resume;
    if (path_format(r->checkpoint, sizeof r->checkpoint, "%s/model_%.24s.ckpt", runs->flags.shared.out, run->key) < 0)
        return NULL;
    va_list ap;
    va_start(ap, label_format);
    vsnprintf(run->label, sizeof run->label, label_format, ap);
    va_end(ap);
    return run;
}

void classifier_start(ClassifierRuns *runs) {
    const ClassifierFlags *f = &runs->flags;
    results_note_other_run(f->shared.out,
                           runs->run[runs->headline].config);   /* another model's files there? say so once */
    printf("Training: %d run%s of %d steps of %d examples (backend %s, ", runs->n, runs->n == 1 ? "" : "s",
           f->shared.train.steps, f->shared.batch, backend_name(backend_current()));
    if (matmul_precision_current() == PRECISION_BF16) printf("bf16 products, ");
    printf("%d thread%s)\n", threads_current(), threads_current() == 1 ? "" : "s");
}

void classifier_test(const ClassifierRuns *runs, Classifier *m, const ExampleTask *t, ClassifierResult *r) {
    classifier_evaluate(m, t, runs->flags.test_size, (uint64_t)runs->flags.shared.seed, &r->exact, &r->token_acc);
    r->n_out = t->n_out;
}

int classifier_save(const ClassifierRuns *runs, const ClassifierRun *run, const Classifier *m, ClassifierResult *r) {
    if (path_format(r->checkpoint, sizeof r->checkpoint, "%s/model_%.24s.ckpt", runs->flags.shared.out, run->key) < 0)
        return -1;
    if (checkpoint_save_with_state(r->checkpoint, run->config, m->params, m->buffers, m->n_buffers) < 0) return -1;
    checkpoint_remove_so_far(r->checkpoint);   /* training's weights so far: replaced by these */
    return 0;
}

int classifier_show_first_test_example(const ClassifierRuns *runs, const ClassifierRun *run, Classifier *m,
                                       const ExampleTask *t) {
    Examples e;
    examples_alloc(&e, 1, t->n_in, t->n_out, t->float_inputs);
    int *pred = xmalloc(sizeof(int) * (size_t)t->n_out);
    Rng rng;
    rng_seed(&rng, (uint64_t)runs->flags.shared.seed, 99);
    if (t->test_reset) t->test_reset(t->self);
    t->test_batch(t->self, &e, 1, &rng);
    m->forward(m->self, &(Examples){1, e.n_in, e.n_out, e.tokens, e.values, NULL});
    m->predict(m->self, pred);
    if (t->n_out > 1) printf("  first test example:\n");
    print_example(t, &e, pred);
    char stem[1100];
    int rc = path_format(stem, sizeof stem, "%s/attn_%.24s", runs->flags.shared.out, run->key);
    if (rc == 0) rc = plot_attention(m, t, &e, e.targets, stem, run->label, "target at output i (query i)");
    examples_free(&e);
    free(pred);
    return rc;
}

/* ---------------------------------------------------- table and results */

/* One row per run. A task of one output per example (a class per image) has
 * one figure, its accuracy; a task of n outputs has two (every output right,
 * and the share of outputs right) and the step its loss fell below 0.5. */
static void print_table(const ClassifierRun *runs, const ClassifierResult *r, int n, const char *split) {
    int w = 3;
    for (int i = 0; i < n; i++) if ((int)strlen(runs[i].label) > w) w = (int)strlen(runs[i].label);
    if (r[0].n_out == 1) {
        char title[64];
        snprintf(title, sizeof title, "%s accuracy", split);
        const int a = (int)strlen(title);
        printf("  | %-*s | %s | final loss | train s |\n  |-", w, "run", title);
        for (int i = 0; i < w; i++) printf("-");
        printf("-|-");
        for (int i = 0; i < a; i++) printf("-");
        printf("-|------------|---------|\n");
        for (int i = 0; i < n; i++)
            printf("  | %-*s | %*.2f%% | %10.3f | %7.1f |\n", w, runs[i].label, a - 1, 100 * r[i].exact,
                   r[i].final_loss, r[i].seconds);
        return;
    }
    printf("  | %-*s | exact match | token acc. | final loss | loss < %.1f at step | train s |\n", w, "run",
           SOLVED_LOSS);
    printf("  |-");
    for (int i = 0; i < w; i++) printf("-");
    printf("-|-------------|------------|------------|--------------------|---------|\n");
    for (int i = 0; i < n; i++) {
        char solved[32] = "never";
        if (r[i].solved_step > 0) snprintf(solved, sizeof solved, "%d", r[i].solved_step);
        printf("  | %-*s | %10.1f%% | %9.1f%% | %10.3f | %18s | %7.1f |\n", w, runs[i].label, 100 * r[i].exact,
               100 * r[i].token_acc, r[i].final_loss, solved, r[i].seconds);
    }
}

static int plot_loss_curves(const char *out, const ClassifierRun *runs, const ClassifierResult *r, int n) {
    const float *ys[CLASSIFIER_MAX_RUNS];
    const char *names[CLASSIFIER_MAX_RUNS];
    for (int i = 0; i < n; i++) {
        ys[i] = r[i].log.train;
        names[i] = runs[i].label;
    }
    char stem[1100];
    if (path_format(stem, sizeof stem, "%s/loss", out) < 0) return -1;
    /* every run has the same steps, so the same points */
    if (plot_lines(stem, "Training loss, one curve per run", "step", "cross-entropy (mean over the window)",
                   r[0].log.step, ys, names, n, r[0].log.n, 1) < 0)
        return -1;
    printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    return 0;
}

int classifier_report(ClassifierRuns *runs) {
    const ClassifierFlags *f = &runs->flags;
    const int n = runs->n, h = runs->headline;
    Results *res = &runs->results;
    const char *split = runs->eval_split ? runs->eval_split : "test";
    printf("\nResults on the %s set (%d examples)\n\n", split, f->test_size);
    print_table(runs->run, runs->result, n, split);
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const ClassifierResult *r = &runs->result[i];
        const char *k = runs->run[i].key;
        char key[64];
        total += r->seconds;
        snprintf(key, sizeof key, "%.24s_exact_match", k);
        results_set_num(res, key, r->exact);
        snprintf(key, sizeof key, "%.24s_token_acc", k);
        results_set_num(res, key, r->token_acc);
        snprintf(key, sizeof key, "%.24s_final_loss", k);
        results_set_num(res, key, r->final_loss);
        snprintf(key, sizeof key, "%.24s_solved_step", k);
        results_set_num(res, key, r->solved_step);
        snprintf(key, sizeof key, "%.24s_train_seconds", k);
        results_set_num(res, key, r->seconds);
        if (r->checkpoint_last_weights[0]) {   /* a moving average was evaluated: the last weights' too */
            snprintf(key, sizeof key, "%.24s_exact_match_last_weights", k);
            results_set_num(res, key, r->exact_last_weights);
            snprintf(key, sizeof key, "%.24s_token_acc_last_weights", k);
            results_set_num(res, key, r->token_acc_last_weights);
        }
    }
    results_set_num(res, "test_exact_match", runs->result[h].exact);
    results_set_num(res, "test_token_acc", runs->result[h].token_acc);
    results_set_num(res, "train_seconds", total);
    results_set_str(res, "headline", runs->run[h].key);
    results_set_config(res, runs->run[h].config);
    results_set_num(res, "steps", f->shared.train.steps);
    results_set_num(res, "batch", f->shared.batch);
    results_set_num(res, "lr", f->shared.train.lr);
    results_set_num(res, "test_n", f->test_size);
    results_set_str(res, "backend", backend_name(backend_current()));
    results_set_str(res, "matmul_precision", matmul_precision_name(matmul_precision_current()));
    results_set_num(res, "threads", threads_current());
    printf("\n  total training time %.1f s, whole program %.1f s\n\nWrote:\n", total, now_seconds() - runs->t_start);
    return plot_loss_curves(f->shared.out, runs->run, runs->result, n);
}

int classifier_write_results(ClassifierRuns *runs) {
    char path[1100];
    if (path_format(path, sizeof path, "%s/results.json", runs->flags.shared.out) < 0) return -1;
    if (results_write(&runs->results, path) < 0) return -1;
    printf("  %s\n", path);
    const char *hint = runs->program->load_hint ? runs->program->load_hint : "--input \"...\"";
    for (int i = 0; i < runs->n; i++) {
        const ClassifierResult *r = &runs->result[i];
        printf("  %s   (try: --load %s %s)\n", r->checkpoint, r->checkpoint, hint);
        if (r->checkpoint_last_weights[0])
            printf("  %s   (the last step's weights, before the average)\n", r->checkpoint_last_weights);
    }
    return 0;
}

int classifier_finish(ClassifierRuns *runs, int rc) {
    if (rc < 0) fprintf(stderr, "%s: error: %s\n", runs->program->chapter, last_error());
    for (int i = 0; i < runs->n; i++) train_log_free(&runs->result[i].log);
    free(runs->config);
    free(runs->preset_argv);
    runs->config = NULL;
    runs->preset_argv = NULL;
    return output_exit_status(runs->program->chapter, rc < 0 ? 1 : 0);
}
