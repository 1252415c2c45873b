/* digit_tasks.c - the digit tasks of chapters 04 and 05 (see digit_tasks.h). */
#include "data/digit_tasks.h"

#include <stdio.h>
#include <string.h>

#include "io/checkpoint.h"
#include "util/error.h"

static const char *const TASK_NAMES[DIGIT_N_TASKS] = {"reverse", "sort", "count", "neighbours",
                                                      "count_next"};

const char *digit_task_name(DigitTask t) { return (t >= 0 && t < DIGIT_N_TASKS) ? TASK_NAMES[t] : "?"; }

int digit_task_from_name(const char *name, DigitTask *t) {
    for (int i = 0; i < DIGIT_N_TASKS; i++)
        if (strcmp(name, TASK_NAMES[i]) == 0) {
            *t = (DigitTask)i;
            return 0;
        }
    return fail("task: expected one of reverse, sort, count, neighbours, count_next, got '%s'", name);
}

int digit_task_classes(DigitTask t, int N) {
    switch (t) {
    case TASK_COUNT: return N + 1;                            /* a count 0..N */
    case TASK_NEIGHBOURS: return DIGIT_VOCAB * DIGIT_VOCAB;   /* "left right" */
    case TASK_COUNT_NEXT: return DIGIT_VOCAB * (N + 1);       /* "count next" */
    default: return DIGIT_VOCAB;
    }
}

/* x [N] -> y [N] */
void digit_task_targets(DigitTask t, const int *x, int *y, int N) {
    int histogram[DIGIT_VOCAB] = {0};
    for (int i = 0; i < N; i++) histogram[x[i]]++;
    switch (t) {
    case TASK_REVERSE:
        for (int i = 0; i < N; i++) y[i] = x[N - 1 - i];
        break;
    case TASK_SORT: {                     /* counting sort */
        int i = 0;
        for (int digit = 0; digit < DIGIT_VOCAB; digit++)
            for (int k = 0; k < histogram[digit]; k++) y[i++] = digit;
        break;
    }
    case TASK_COUNT:
        for (int i = 0; i < N; i++) y[i] = histogram[x[i]];
        break;
    case TASK_NEIGHBOURS:                 /* indices wrap around */
        for (int i = 0; i < N; i++) y[i] = DIGIT_VOCAB * x[(i + N - 1) % N] + x[(i + 1) % N];
        break;
    case TASK_COUNT_NEXT:
        for (int i = 0; i < N; i++) y[i] = DIGIT_VOCAB * histogram[x[i]] + x[(i + 1) % N];
        break;
    default:
        break;
    }
}

/* x [B, N], y [B, N] */
void digit_task_batch(DigitTask t, int *x, int *y, int B, int N, Rng *rng) {
    for (int b = 0; b < B; b++) {
        int *xs = x + (size_t)b * N;
        for (int i = 0; i < N; i++) xs[i] = (int)rng_below(rng, DIGIT_VOCAB);
        digit_task_targets(t, xs, y + (size_t)b * N, N);
    }
}

int digits_parse(const char *text, int N, int *x) {
    int n = 0;
    char quoted[96];
    error_excerpt(text, quoted, sizeof quoted);
    for (int i = 0; text[i] != '\0'; i++) {
        char c = text[i];
        if (c == ' ' || c == ',' || c == '\t') continue;
        if (c < '0' || c > '9')
            return fail("--input: expected %d digits 0-9 (e.g. \"3 1 4 1 ...\"), got '%c' at character %d "
                        "of '%s'", N, c, i + 1, quoted);
        if (n < N) x[n] = c - '0';
        n++;
    }
    if (n != N)
        return fail("--input: expected %d digits (the model's sequence length), got %d in '%s'", N, n,
                    quoted);
    return 0;
}

/* ------------------------------------------------ the ExampleTask face */

static void digits_batch(void *self, Examples *e, int B, Rng *rng) {
    const DigitTaskSpec *s = self;
    e->B = B;
    digit_task_batch(s->task, e->tokens, e->targets, B, s->N, rng);
}

static int digits_input(void *self, const char *text, Examples *e) {
    const DigitTaskSpec *s = self;
    if (digits_parse(text, s->N, e->tokens) < 0) return -1;
    digit_task_targets(s->task, e->tokens, e->targets, s->N);
    e->B = 1;
    return 0;
}

static void digit_text(void *self, const Examples *e, int b, int i, char *buf, int cap) {
    const DigitTaskSpec *s = self;
    snprintf(buf, (size_t)cap, "%d", e->tokens[(size_t)b * s->N + i]);
}

static void class_text(void *self, int c, char *buf, int cap) {
    (void)self;
    snprintf(buf, (size_t)cap, "%d", c);
}

void digit_example_task(ExampleTask *et, DigitTaskSpec *spec) {
    memset(et, 0, sizeof *et);
    et->self = spec;
    et->name = digit_task_name(spec->task);
    et->n_in = et->n_out = spec->N;
    et->float_inputs = 0;
    et->classes = digit_task_classes(spec->task, spec->N);
    et->train_batch = digits_batch;
    et->test_batch = digits_batch;      /* generated: the test stream is another seed stream */
    et->parse_input = digits_input;
    et->input_text = digit_text;
    et->class_text = class_text;
}

int digit_task_from_config(const char *config, DigitTaskSpec *spec, ExampleTask *et) {
    char name[32];
    if (config_get(config, "task", name, sizeof name) < 0 || digit_task_from_name(name, &spec->task) < 0 ||
        config_get_int_in(config, "len", 2, 64, &spec->N) < 0)
        return -1;
    digit_example_task(et, spec);
    return 0;
}
