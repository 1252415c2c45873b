/* grade.c - the harness of the coursework graders (see grade.h): the
 * failure message, buffers freed after each check, comparisons against
 * PyTorch's golden vectors and against finite differences, and main. */
#include "grade.h"

#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/loop.h"
#include "util/error.h"
#include "util/rng.h"

static char message[1024];
static const char *current_case;   /* the golden case being checked, named in messages */

/* Record mode (--record FILE): every comparison writes the values it was
 * given instead of judging them, for the teacher's process to compare
 * (defined with the hidden checks below). */
static int recording(void);
static void record_values(const char *what, const float *got, int ndim, const int *dims, double rtol,
                          double atol);

int grade_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return -1;
}

/* ------------------------------------------------------------ buffers */

enum { MAX_BUFFERS = 256 };
static void *buffers[MAX_BUFFERS];
static int n_buffers;

static void *zeroed(size_t n, size_t size) {
    if (n_buffers == MAX_BUFFERS) {
        fprintf(stderr, "grade: more than %d buffers in one check\n", MAX_BUFFERS);
        exit(2);
    }
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "grade: out of memory\n");
        exit(2);
    }
    buffers[n_buffers++] = p;
    return p;
}

float *grade_floats(size_t n) { return zeroed(n, sizeof(float)); }
int *grade_ints(size_t n) { return zeroed(n, sizeof(int)); }

static void free_buffers(void) {
    while (n_buffers > 0) free(buffers[--n_buffers]);
}

void grade_fill(float *x, size_t n, float scale, unsigned seed) {
    Rng r;
    rng_seed(&r, seed, 18);
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(&r) - 1.0f);
}

/* ------------------------------------------------------------ comparisons */

/* Flat index -> "[i, j, ...]" in dims. */
static void format_index(char *out, size_t cap, size_t flat, int ndim, const int *dims) {
    size_t idx[8] = {0};
    for (int d = ndim - 1; d >= 0 && d < 8; d--) {
        idx[d] = flat % (size_t)dims[d];
        flat /= (size_t)dims[d];
    }
    int used = snprintf(out, cap, "[");
    for (int d = 0; d < ndim && d < 8 && used < (int)cap; d++)
        used += snprintf(out + used, cap - (size_t)used, "%s%zu", d ? ", " : "", idx[d]);
    if (used < (int)cap) snprintf(out + used, cap - (size_t)used, "]");
}

static size_t count_of(int ndim, const int *dims) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (size_t)dims[d];
    return n;
}

static const char *case_note(void) {
    static char note[160];
    if (current_case == NULL) return "";
    snprintf(note, sizeof note, " (case %s)", current_case);
    return note;
}

int grade_close(const char *what, const char *source, const float *got, const float *want, int ndim,
                const int *dims, double rtol, double atol) {
    if (recording()) {
        record_values(what, got, ndim, dims, rtol, atol);
        return 0;
    }
    GoldDiff d = gold_compare(got, want, count_of(ndim, dims), rtol, atol);
    if (d.ok) return 0;
    char idx[96];
    format_index(idx, sizeof idx, d.worst, ndim, dims);
    return grade_fail("%s differs from %s at %s%s: got %.6g, want %.6g", what, source, idx, case_note(),
                      (double)d.got, (double)d.want);
}

int grade_gradient(const char *what, LossFn loss, void *ctx, float *x, const float *analytic, int ndim,
                   const int *dims, float eps, double tol) {
    const size_t n = count_of(ndim, dims);
    if (recording()) {   /* the analytic gradient, against the solution's (no finite differences needed) */
        record_values(what, analytic, ndim, dims, tol, gold_atol_for_scale(analytic, n, GRADE_ATOL_GRAD));
        return 0;
    }
    GradCheckResult r = gradcheck(loss, ctx, x, analytic, n, eps, 0);
    if (r.n_checked > 0 && r.max_rel_err < tol) return 0;
    char idx[96];
    format_index(idx, sizeof idx, r.worst_index, ndim, dims);
    return grade_fail("%s differs from finite differences at %s%s: analytic %.6g, numeric %.6g", what, idx,
                      case_note(), r.worst_analytic, r.worst_numeric);
}

/* ------------------------------------------------------------ checks by class */

void grade_fill_garbage(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * (float)(7919 + (i * 104729u) % 1000003u) * 1e-2f;
}

float *grade_garbage(size_t n) {
    float *x = grade_floats(n);
    grade_fill_garbage(x, n);
    return x;
}

int grade_added(const char *what, const float *got, const float *start, const float *once, int times, int ndim,
                const int *dims, double rtol, double atol) {
    const size_t n = count_of(ndim, dims);
    float *want = grade_floats(n);
    for (size_t i = 0; i < n; i++) want[i] = (start ? start[i] : 0.0f) + (float)times * once[i];
    char full[256];
    snprintf(full, sizeof full, "%s after %d backward call%s into a buffer that held %s (it must add: +=)", what,
             times, times == 1 ? "" : "s", start ? "garbage" : "zeros");
    return grade_close(full, "what was there plus the gradient", got, want, ndim, dims, rtol, atol);
}

int grade_finite(const char *what, const float *x, int ndim, const int *dims, float bound) {
    if (recording()) {
        record_values(what, x, ndim, dims, 1e-3, 1e-4);
        return 0;
    }
    const size_t n = count_of(ndim, dims);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || fabsf(x[i]) > bound) {
            char idx[96];
            format_index(idx, sizeof idx, i, ndim, dims);
            return grade_fail("%s at %s is %g%s (large inputs: expf overflows past 88: a softmax "
                              "subtracts the maximum, a tanh is tanhf)", what, idx, (double)x[i],
                              isfinite(x[i]) ? " (out of its range)" : "");
        }
    return 0;
}

int grade_true(const char *what, int holds, const char *fmt, ...) {
    if (recording()) {
        const float v = holds ? 1.0f : 0.0f;
        record_values(what, &v, 1, (int[]){1}, 0.0, 0.0);
        return 0;
    }
    if (holds) return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return -1;
}

/* ------------------------------------------------------------ golden vectors */

int grade_golden_cases(const char *layer, int (*want)(const GoldCase *c), int (*check)(const GoldCase *c)) {
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    char path[512], name[128];
    snprintf(path, sizeof path, "%s/%s.bin", dir && *dir ? dir : "tests/golden", layer);
    GoldFile file;
    if (gold_read(&file, path) < 0) return grade_fail("%s (run from the tree's top folder)", last_error());
    int result = 0, wanted = 0;
    for (int i = 0; result == 0 && gold_case(&file, i, name, sizeof name) == 0; i++) {
        GoldCase c = {&file, layer, name};
        if (want && !want(&c)) continue;
        wanted++;
        current_case = name;
        result = check(&c);
        current_case = NULL;
    }
    gold_free(&file);
    if (result == 0 && wanted == 0) return grade_fail("%s has no case this check wants", path);
    return result;
}

const GoldTensor *grade_tensor(const GoldCase *c, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "%s/%s", c->name, name);
    return gold_find(c->file, full);
}

static const void *need(const GoldCase *c, const char *name, GoldType type) {
    const GoldTensor *t = grade_tensor(c, name);
    if (t == NULL || t->type != type) {
        fprintf(stderr, "grade: golden %s, case %s: no %s tensor '%s' (a broken file)\n", c->layer, c->name,
                type == GOLD_F32 ? "float" : "int", name);
        exit(2);
    }
    return t->data;
}

const float *grade_f32(const GoldCase *c, const char *name) { return need(c, name, GOLD_F32); }
const int *grade_i32(const GoldCase *c, const char *name) { return need(c, name, GOLD_I32); }
const float *grade_f32_or_null(const GoldCase *c, const char *name) {
    return grade_tensor(c, name) ? grade_f32(c, name) : NULL;
}
const int *grade_i32_or_null(const GoldCase *c, const char *name) {
    return grade_tensor(c, name) ? grade_i32(c, name) : NULL;
}

int grade_golden_close(const GoldCase *c, const char *name, const float *got, int times, double rtol,
                       double atol) {
    const GoldTensor *t = grade_tensor(c, name);
    grade_f32(c, name);   /* present and float, or the file is broken */
    const float *want = t->data;
    if (times != 1) {
        float *scaled = grade_floats(t->count);
        for (size_t i = 0; i < t->count; i++) scaled[i] = (float)times * want[i];
        want = scaled;
    }
    char what[160];
    snprintf(what, sizeof what, "%s%s", name, times == 1 ? "" : " after a second backward (it must add up: +=)");
    return grade_close(what, "PyTorch", got, want, t->ndim ? t->ndim : 1, t->ndim ? t->dims : (int[]){1}, rtol,
                       atol);
}

/* ------------------------------------------------------------ hidden checks */

static struct {
    int on;                  /* --hidden SEED given */
    unsigned long seed;
    const char *record;      /* --record FILE: the solution writes its values */
    const char *reference;   /* --reference FILE: the student's are compared with them */
    GoldWriter writer;
    GoldFile file;
    int writer_open, file_read;
    Rng rng;                 /* the current hidden check's stream */
    char key[96];            /* "<exercise>/<check index>": names its values */
    int n_values;            /* values recorded or compared in the current check */
    char record_key[96];     /* "<exercise>/<v or h><check index>": names what record mode writes */
    int n_recorded;          /* values record mode wrote in the current check */
} hidden;

static int recording(void) { return hidden.writer_open; }

/* "<record key>/<n>/<what>" with got, and "<...>#tol" with [rtol, atol]:
 * the teacher's process (tools/coursework_submissions.py) compares a
 * student's values with the solution's, within the solution's tolerances. */
static void record_values(const char *what, const float *got, int ndim, const int *dims, double rtol,
                          double atol) {
    char name[320];
    snprintf(name, sizeof name, "%s/%d/%s", hidden.record_key, hidden.n_recorded++, what);
    gold_write_f32(&hidden.writer, name, got, ndim, dims);
    const float tol[2] = {(float)rtol, (float)atol};
    strncat(name, "#tol", sizeof name - strlen(name) - 1);
    gold_write_f32(&hidden.writer, name, tol, 1, (int[]){2});
}

int grade_counts(const char *what, const float *count, const float *expected, const float *bound, int n) {
    if (recording()) {   /* the counts, and (the solution's are the ones used) what they are held to */
        char name[320];
        snprintf(name, sizeof name, "%s/%d/%s", hidden.record_key, hidden.n_recorded++, what);
        gold_write_f32(&hidden.writer, name, count, 1, &n);
        const size_t len = strlen(name);
        snprintf(name + len, sizeof name - len, "#want");
        gold_write_f32(&hidden.writer, name, expected, 1, &n);
        snprintf(name + len, sizeof name - len, "#atol");
        gold_write_f32(&hidden.writer, name, bound, 1, &n);
        return 0;
    }
    for (int v = 0; v < n; v++)
        if (!(fabs((double)count[v] - (double)expected[v]) <= (double)bound[v]))
            return grade_fail("%s: entry %d is %.0f, want %.0f +- %.0f", what, v, (double)count[v],
                              (double)expected[v], (double)bound[v]);
    return 0;
}

int grade_draw(int lo, int hi) { return lo + (int)rng_below(&hidden.rng, (uint32_t)(hi - lo + 1)); }

void grade_draw_fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(&hidden.rng) - 1.0f);
}

/* The stream of a check: the seed, and a hash of its key (FNV-1a). */
static void start_hidden_check(const char *exercise, int k) {
    snprintf(hidden.key, sizeof hidden.key, "%s/%d", exercise, k);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = hidden.key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    rng_seed(&hidden.rng, hidden.seed, h);
    hidden.n_values = 0;
}

int grade_reference(const char *what, const float *got, int ndim, const int *dims, double rtol, double atol) {
    char name[256];
    snprintf(name, sizeof name, "%s/%d/%s", hidden.key, hidden.n_values++, what);
    if (hidden.record) {
        gold_write_f32(&hidden.writer, name, got, ndim, dims);
        char tol[300];
        snprintf(tol, sizeof tol, "%s#tol", name);
        gold_write_f32(&hidden.writer, tol, (const float[]){(float)rtol, (float)atol}, 1, (int[]){2});
        return 0;
    }
    const GoldTensor *want = hidden.file_read ? gold_find(&hidden.file, name) : NULL;
    if (want == NULL) return grade_fail("%s: no value '%s' in the reference file", what, name);
    if (want->count != count_of(ndim, dims)) return grade_fail("%s: the reference has %zu values, this %zu", what, want->count, count_of(ndim, dims));
    return grade_close(what, "the reference solution", got, want->data, ndim, dims, rtol, atol);
}

/* --hidden SEED, --record FILE, --reference FILE: 0, or -1 with a message. */
static int hidden_options(int *argc, char **argv) {
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        int is_hidden = strcmp(a, "--hidden") == 0, is_record = strcmp(a, "--record") == 0,
            is_reference = strcmp(a, "--reference") == 0;
        if (!is_hidden && !is_record && !is_reference) {
            argv[out++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc) {
            fprintf(stderr, "%s: %s needs a value (--hidden SEED, --record FILE, --reference FILE)\n", argv[0], a);
            return -1;
        }
        const char *v = argv[++i];
        if (is_hidden) {
            char *end;
            hidden.seed = strtoul(v, &end, 10);
            if (*v == '\0' || *end != '\0') {
                fprintf(stderr, "%s: --hidden %s: expected a seed, a whole number\n", argv[0], v);
                return -1;
            }
            hidden.on = 1;
        } else if (is_record) {
            hidden.record = v;
        } else {
            hidden.reference = v;
        }
    }
    *argc = out;
    if (hidden.on && !hidden.record == !hidden.reference) {
        fprintf(stderr, "%s: --hidden needs one of --record FILE (the solution) or --reference FILE (a student)\n",
                argv[0]);
        return -1;
    }
    if (!hidden.on && hidden.reference) {
        fprintf(stderr, "%s: --reference goes with --hidden SEED\n", argv[0]);
        return -1;
    }
    if (hidden.record) {
        if (gold_writer_open(&hidden.writer, hidden.record) < 0) {
            fprintf(stderr, "%s: --record: %s\n", argv[0], last_error());
            return -1;
        }
        hidden.writer_open = 1;
    }
    if (hidden.reference) {
        if (gold_read(&hidden.file, hidden.reference) < 0) {
            fprintf(stderr, "%s: --reference: %s\n", argv[0], last_error());
            return -1;
        }
        hidden.file_read = 1;
    }
    return 0;
}

/* ------------------------------------------------------------ end to end */

typedef struct {
    double (*gradient)(void *ctx, int step);
    void *ctx;
    float *losses;   /* [GRADE_TRAIN_STEPS] each step's loss, as the loop gets it */
} TrainingRun;

/* Trainer.gradient (train/loop.h): the chapter's step, its loss kept. */
static double recorded_gradient(void *self, int step, long *count) {
    TrainingRun *run = self;
    const double loss = run->gradient(run->ctx, step);
    run->losses[step] = (float)loss;
    *count = 1;
    return loss;
}

int grade_training(const char *what, Params *p, double (*gradient)(void *ctx, int step), void *ctx) {
    TrainingRun run = {gradient, ctx, grade_floats(GRADE_TRAIN_STEPS)};
    const Trainer trainer = {.self = &run, .params = p, .gradient = recorded_gradient};
    TrainOptions o = TRAIN_DEFAULTS;   /* the programs' loop, at a constant rate */
    o.steps = GRADE_TRAIN_STEPS;
    o.lr = 0.01f;
    o.warmup = 0;
    o.lr_floor = 1.0f;
    o.eval_every = GRADE_TRAIN_STEPS;
    o.quiet = 1;
    TrainLog log;
    const int rc = train_loop(&trainer, &o, &log);
    train_log_free(&log);
    if (rc < 0) return grade_fail("%s: %s", what, last_error());
    /* the solution's losses at the same steps: recorded by its build, or compared with that record */
    int n = GRADE_TRAIN_STEPS;
    return grade_reference(what, run.losses, 1, &n, GRADE_TRAIN_RTOL, 1e-4);
}

typedef struct {
    Seq2Seq *m;
    Batch b;
    Rng rng;
} Seq2SeqRun;

/* The step's batch of reverse (rows of 2 to T symbols), forward and backward. */
static double seq2seq_gradient(void *ctx, int step) {
    Seq2SeqRun *r = ctx;
    Batch *b = &r->b;
    (void)step;
    for (int row = 0; row < b->batch; row++) {
        const int n = 2 + (int)rng_below(&r->rng, GRADE_TRAIN_T - 1);
        int *src = b->src + row * b->src_len, *in = b->tgt_in + row * b->tgt_len, *out = b->tgt_out + row * b->tgt_len;
        for (int t = 0; t < b->src_len; t++)
            src[t] = t < n ? EOS_ID + 1 + (int)rng_below(&r->rng, GRADE_TRAIN_V - EOS_ID - 1) : PAD_ID;
        for (int t = 0; t < b->tgt_len; t++) {
            out[t] = t < n ? src[n - 1 - t] : t == n ? EOS_ID : PAD_ID;
            in[t] = t == 0 ? BOS_ID : t <= n ? out[t - 1] : PAD_ID;
        }
        b->src_lens[row] = n;
        b->tgt_lens[row] = n + 1;
    }
    return r->m->train_step(r->m->self, b, 1);
}

int grade_seq2seq_training(const char *what, Seq2Seq *m) {
    enum { B = GRADE_TRAIN_B, T = GRADE_TRAIN_T };
    Seq2SeqRun r = {.m = m};
    r.b = (Batch){.batch = B, .src_len = T, .tgt_len = T + 1, .src = grade_ints(B * T), .src_lens = grade_ints(B),
                  .tgt_in = grade_ints(B * (T + 1)), .tgt_out = grade_ints(B * (T + 1)), .tgt_lens = grade_ints(B)};
    rng_seed(&r.rng, 2024, 5);
    return grade_training(what, m->params, seq2seq_gradient, &r);
}

typedef struct {
    Classifier *m;
    Examples e;
    Rng rng;
    int vocab;
} ClassifierRun;

/* The step's examples (tokens or floats, targets from every input), forward and backward. */
static double classifier_gradient(void *ctx, int step) {
    ClassifierRun *r = ctx;
    Examples *e = &r->e;
    const int C = r->m->classes;
    (void)step;
    for (int b = 0; b < e->B; b++) {
        long sum = 0;
        for (int i = 0; i < e->n_in; i++) {
            if (r->vocab > 0) {
                e->tokens[b * e->n_in + i] = (int)rng_below(&r->rng, (uint32_t)r->vocab);
                sum += e->tokens[b * e->n_in + i] * (i + 1);
            } else {
                const float x = 2.0f * rng_uniform(&r->rng) - 1.0f;
                e->values[b * e->n_in + i] = x;
                sum += x > 0.0f;
            }
        }
        if (e->n_out == 1) {
            e->targets[b] = (int)(sum % C);
        } else {
            for (int i = 0; i < e->n_out; i++)
                e->targets[b * e->n_out + i] =
                    (r->vocab > 0 ? e->tokens[b * e->n_in + (e->n_in - 1 - i)] : (int)(sum + i)) % C;
        }
    }
    const double loss = r->m->forward(r->m->self, e);
    r->m->backward(r->m->self, e);
    return loss;
}

int grade_classifier_training(const char *what, Classifier *m, int n_in, int vocab) {
    enum { B = GRADE_TRAIN_B };
    ClassifierRun r = {.m = m, .vocab = vocab};
    r.e = (Examples){.B = B, .n_in = n_in, .n_out = m->n_out,
                     .tokens = vocab > 0 ? grade_ints((size_t)B * n_in) : NULL,
                     .values = vocab > 0 ? NULL : grade_floats((size_t)B * n_in),
                     .targets = grade_ints((size_t)B * m->n_out)};
    rng_seed(&r.rng, 2024, 6);
    if (m->set_training) m->set_training(m->self, 1);
    const int rc = grade_training(what, m->params, classifier_gradient, &r);
    if (m->set_training) m->set_training(m->self, 0);
    return rc;
}

/* ------------------------------------------------------------ main */

/* Runs every check of a list; returns the number that failed. */
static int run_checks(const char *id, const GradeCheck *checks, int n, const char *prefix) {
    int failed = 0;
    for (int k = 0; k < n; k++) {
        if (*prefix) start_hidden_check(id, k);
        snprintf(hidden.record_key, sizeof hidden.record_key, "%s/%c%d", id, *prefix ? 'h' : 'v', k);
        hidden.n_recorded = 0;
        printf("check %s: %s%s\n", id, prefix, checks[k].name);
        fflush(stdout);
        message[0] = '\0';
        if (checks[k].run() != 0) {
            printf("FAIL %s: %s%s: %s\n", id, prefix, checks[k].name, message[0] ? message : "failed");
            failed++;
        } else {
            printf("ok %s: %s%s\n", id, prefix, checks[k].name);
        }
        fflush(stdout);
        if (hidden.writer_open) fflush(hidden.writer.fp);   /* a later crash keeps this check's values */
        free_buffers();
    }
    return failed;
}

int grade_main_hidden(int argc, char **argv, const GradeExercise *exercises, int n_exercises,
                      const GradeExercise *hidden_checks, int n_hidden) {
    if (hidden_options(&argc, argv) < 0) return 2;
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && strcmp(only, "--help") == 0) {
        printf("usage: %s [EXERCISE | --list] [--record FILE] [--hidden SEED (--record FILE | --reference FILE)]\n\n"
               "Runs the checks of every exercise, or of the one named (as in the code's\n"
               "markers, e.g. %s), and prints PASS or FAIL with each failing check.\n"
               "make grade runs each exercise alone and prints the score table.\n"
               "--record FILE judges nothing: every check writes the values it would compare\n"
               "to FILE (make grade-submissions compares them with the solution's, outside\n"
               "this program). --hidden SEED also runs the hidden checks, on shapes drawn\n"
               "from SEED; with --reference FILE (a file the solution's build recorded) their\n"
               "outputs are compared with the solution's here.\n", argv[0], exercises[0].id);
        return 0;
    }
    if (only && strcmp(only, "--list") == 0) {
        for (int e = 0; e < n_exercises; e++) printf("%s\n", exercises[e].id);
        return 0;
    }
    int ran = 0, failed = 0;
    for (int e = 0; e < n_exercises; e++) {
        const GradeExercise *ex = &exercises[e];
        if (only && strcmp(only, ex->id) != 0) continue;
        ran++;
        int bad = run_checks(ex->id, ex->checks, ex->n_checks, "");
        for (int h = 0; hidden.on && h < n_hidden; h++)
            if (strcmp(hidden_checks[h].id, ex->id) == 0)
                bad += run_checks(ex->id, hidden_checks[h].checks, hidden_checks[h].n_checks, "hidden: ");
        if (!bad) printf("PASS %s\n", ex->id);
        failed += bad > 0;
        fflush(stdout);
    }
    if (hidden.writer_open && gold_writer_close(&hidden.writer) < 0) {
        fprintf(stderr, "%s: --record: %s\n", argv[0], last_error());
        return 2;
    }
    if (hidden.file_read) gold_free(&hidden.file);
    if (only && ran == 0) {
        fprintf(stderr, "%s: no exercise '%s' (try --list)\n", argv[0], only);
        return 2;
    }
    return failed ? 1 : 0;
}

int grade_main(int argc, char **argv, const GradeExercise *exercises, int n_exercises) {
    return grade_main_hidden(argc, argv, exercises, n_exercises, NULL, 0);
}
