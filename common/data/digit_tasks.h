/* digit_tasks.h - the digit tasks of chapters 04 and 05: N random digits in,
 * one class out at every position.
 *
 * An input is N random digits x_1..x_N; the target y_i at position i is
 *   reverse     y_i = x_{N+1-i}                       needs positions
 *   sort        y_i = the i-th smallest digit         needs positions (of the output slot i)
 *   count       y_i = how often x_i occurs in x       does not: permuting x permutes y
 *   neighbours  y_i = 10 x_{i-1} + x_{i+1}            two lookups by position
 *   count_next  y_i = 10 count(x_i) + x_{i+1}         one lookup by content, one by position
 * (chapter 04 trains the first three; chapter 05 adds the last two, which
 * need two lookups per output: indices wrap around, x_0 = x_N and
 * x_{N+1} = x_1; y_i is the two-digit number, one class).
 *
 * Examples are generated from a seeded stream, so there is no data file:
 * the chapters draw training batches from stream 1 of the seed and test
 * examples from stream 99. */
#ifndef DIGIT_TASKS_H
#define DIGIT_TASKS_H
#include "data/examples.h"
#include "util/rng.h"

#define DIGIT_VOCAB 10

typedef enum {
    TASK_REVERSE = 0, TASK_SORT, TASK_COUNT,     /* chapter 04 */
    TASK_NEIGHBOURS, TASK_COUNT_NEXT,            /* chapter 05 */
    DIGIT_N_TASKS
} DigitTask;
#define DIGIT_N_POSITION_TASKS 3   /* the first three: chapter 04's */

/* "reverse", "sort", "count", "neighbours", "count_next" */
const char *digit_task_name(DigitTask t);
/* Name -> task; returns 0, or -1 with fail() listing the names. */
int digit_task_from_name(const char *name, DigitTask *t);
/* Number of classes C: 10 digits (reverse, sort), N + 1 counts (count),
 * 100 (neighbours), 10 (N + 1) (count_next). */
int digit_task_classes(DigitTask t, int N);
/* y [N] = the task's targets for one sequence x [N]. */
void digit_task_targets(DigitTask t, const int *x, int *y, int N);
/* x [B, N] random digits from rng, y [B, N] their targets. */
void digit_task_batch(DigitTask t, int *x, int *y, int B, int N, Rng *rng);

/* Digits a user typed ("3 1 4 1 5 9 2 6", "3,1,4,1,5,9,2,6" or "31415926")
 * -> x [N]. Returns 0, or -1 with fail() naming the first character that is
 * not a digit, or saying how many digits were expected and how many given. */
int digits_parse(const char *text, int N, int *x);

/* A digit task as an ExampleTask (examples.h): spec must outlive et. */
typedef struct {
    DigitTask task;
    int N;
} DigitTaskSpec;
void digit_example_task(ExampleTask *et, DigitTaskSpec *spec);
/* The task a model's config text names ("task=count_next", "len=8"), as
 * spec and et. Returns 0, or -1 with fail() naming the key. */
int digit_task_from_config(const char *config, DigitTaskSpec *spec, ExampleTask *et);

#endif
