/* examples.h - batches of examples for models that predict per position or
 * per example, and the interface of a task that supplies them.
 *
 * A per-position model (chapters 04 and 05, the GPT of chapter 06) reads N
 * tokens and predicts a class at each of the N positions; a per-example
 * model (the ViT of chapter 07) reads N_in floats (pixels) and predicts one
 * class. Both are fed the same way:
 *
 *   Examples     B examples: inputs (token ids OR floats) and targets
 *   ExampleTask  where examples come from: a training stream, a test set,
 *                text a user typed, and how to print inputs and classes
 *
 * The driver (train/classifier.h) and the tools (twin_dump, the training-step
 * benchmark) only see these two, so a new task or model plugs in without a
 * new training loop. */
#ifndef EXAMPLES_H
#define EXAMPLES_H
#include "util/rng.h"

typedef struct {
    int B;            /* examples in the batch (<= the capacity it was made with) */
    int n_in;         /* inputs per example: N tokens, or N_in floats */
    int n_out;        /* targets per example: N (per position) or 1 (per example) */
    int *tokens;      /* [B, n_in] token ids, or NULL when the inputs are floats */
    float *values;    /* [B, n_in] float inputs (pixels), or NULL when they are tokens */
    int *targets;     /* [B, n_out] class ids */
} Examples;

/* Room for max_B examples; float_inputs picks values over tokens. */
void examples_alloc(Examples *e, int max_B, int n_in, int n_out, int float_inputs);
void examples_free(Examples *e);

typedef struct {
    void *self;
    const char *name;       /* "reverse", "count_next", ... */
    int n_in, n_out;        /* as in Examples */
    int float_inputs;       /* 1: Examples.values, 0: Examples.tokens */
    int classes;            /* C: targets are 0..C-1 */
    /* B examples (e->B = B) of the training stream rng. */
    void (*train_batch)(void *self, Examples *e, int B, Rng *rng);
    /* B test examples (e->B = B), the next ones of the test stream rng (a task
     * that generates its examples draws them from rng; a fixed test set reads
     * them in order). */
    void (*test_batch)(void *self, Examples *e, int B, Rng *rng);
    /* Optional (may be NULL): start the test set again from its first
     * example. A fixed test set read in order needs it (the driver calls it
     * before every evaluation); a generated one does not. */
    void (*test_reset)(void *self);
    /* One example a user typed (--input), with its targets, as e's example 0
     * (e->B = 1). Returns 0, or -1 with fail() saying what was expected. */
    int (*parse_input)(void *self, const char *text, Examples *e);
    /* Text of input i of example b (a tick label, a printed row). May be
     * NULL when inputs are not worth printing one by one (pixels). */
    void (*input_text)(void *self, const Examples *e, int b, int i, char *buf, int cap);
    /* Text of class c. */
    void (*class_text)(void *self, int c, char *buf, int cap);
} ExampleTask;

#endif
