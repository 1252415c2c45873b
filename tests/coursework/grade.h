/* grade.h - the harness of the coursework graders (tests/coursework/grade_NN.c).
 *
 * A chapter's grader is a list of exercises, named as the code's markers name
 * them ("Exercise 04.projections"), each a list of checks run in order. A
 * check returns 0 when it passes, or grade_fail(...) (which returns -1) at its
 * first problem, with a message that says what differs where. grade_main()
 * runs the exercise named on the command line (or every one), every check of
 * it (a failing check does not stop the next: a forward that passes while its
 * backward fails is reported as such), and prints the lines that
 * tools/coursework_grade.py reads:
 *
 *     check 04.projections: <check>          before each check, so a crash names it
 *     ok 04.projections: <check>             after a check that passed
 *     FAIL 04.projections: <check>: <message>   after each check that failed
 *     PASS 04.projections                    when every check passed
 *
 * and exits 0 when every exercise it ran passed.
 *
 * Hidden checks (the teacher's side, tools/coursework_submissions.py): a
 * grader may list, apart from its exercises, more checks per exercise that
 * draw their shapes and inputs from a seed the student never saw, and
 * compare the outputs with those of the reference solution. The teacher's
 * grader built on the solution records them (--hidden SEED --record FILE);
 * the same grader built on the student's code compares with that file
 * (--hidden SEED --reference FILE). Two builds of one grader source, two
 * processes: the student's functions and the solution's, which have the same
 * names, never meet in one program.
 *
 * Record mode (--record FILE, with or without --hidden): nothing is judged
 * in the program. Every grade_close(), grade_gradient(), grade_counts()
 * and grade_reference() writes the values it was given (the analytic
 * gradient, not finite differences) and the tolerance, named by exercise,
 * check and order ("04.projections/v0/2/dX", "04.projections/h1/0/Y"), and
 * returns 0. make grade-submissions records the solution's values once and
 * each student's in a sandbox, and its own process compares them: what a
 * student's program prints, or its exit status, never makes a check pass.
 * So every check must compare at least one value through these functions.
 *
 * Each exercise's checks depend on that exercise's code only: the code they
 * call around it is never another exercise of the same chapter, and the
 * answers come from PyTorch (tests/golden/), from finite differences, or from
 * an earlier chapter. So a missing exercise costs only its own points.
 *
 * The harness is not cmocka because the grader needs, per exercise, the first
 * failing check as one line, and each exercise run in a process of its own
 * (a crash then costs only that exercise). Memory from grade_floats() and
 * grade_ints() is freed after each check. */
#ifndef GRADE_H
#define GRADE_H
#include <stddef.h>

#include "golden.h"
#include "model/classifier.h"
#include "model/seq2seq.h"
#include "nn/gradcheck.h"

typedef int (*GradeCheckFn)(void);

typedef struct {
    const char *name;        /* what it checks, in a few words */
    GradeCheckFn run;
} GradeCheck;

typedef struct {
    const char *id;          /* "NN.name", as in the code's marker */
    const GradeCheck *checks;
    int n_checks;
} GradeExercise;

#define GRADE_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

/* Records the message of the failing check; returns -1. */
int grade_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Zeroed buffers that live until the end of the current check. */
float *grade_floats(size_t n);
int *grade_ints(size_t n);

/* Uniform numbers in [-scale, scale] from a fixed seed. */
void grade_fill(float *x, size_t n, float scale, unsigned seed);

/* got[n] against want[n], n = the product of dims[0..ndim): passes when
 * every |got - want| <= atol + rtol |want|. Otherwise fails with
 * "<what> differs from <source> at [i, j]: got x, want y". */
int grade_close(const char *what, const char *source, const float *got, const float *want, int ndim,
                const int *dims, double rtol, double atol);

/* The analytic gradient dL/dx [n] against central finite differences of
 * loss(ctx) (nn/gradcheck.h, step eps), n = the product of dims; passes when
 * every checked entry has a relative error below tol. Otherwise fails with
 * "<what> differs from finite differences at [i, j]: analytic a, numeric b". */
int grade_gradient(const char *what, LossFn loss, void *ctx, float *x, const float *analytic, int ndim,
                   const int *dims, float eps, double tol);

/* ------------------------------------------------ checks by class
 *
 * The wrong solutions students write fall into classes a check on one
 * small call never sees; these helpers are written once here and used by
 * every grade_NN.c where the class applies:
 *
 *  - state across calls: call twice on the same state (a backward into
 *    the same buffers must add the same gradient again: grade_added; a
 *    forward twice must write the same output), and buffers pre-filled with
 *    garbage (grade_garbage: an output written over whatever was there, a
 *    gradient added to it, no reliance on zeroed memory);
 *  - large inputs: scores of +-1e3, activations past 50 (a softmax without
 *    the max subtraction, a tanh through exp: inf or NaN): grade_finite;
 *  - shapes at least as large as the sheets' own commands use
 *    (GRADE_LONG positions: a fixed local array of 32 must fail), and odd
 *    ones (N != M, H > 1, D_H != D / H where the code allows it);
 *  - every option a sheet asks for switched on in one case (dropout with a
 *    fixed mask, drop_path, the learned per-head scale);
 *  - randomness and bounds: the same seed gives the same draws and another
 *    seed others (rand() must fail), top_k above V is top_k = 0, KV-cache
 *    rows at different positions: grade_true for what is a yes or no. */

/* Longer than any sequence a sheet's commands use (chapter 01's reverse
 * strings of 40 letters). */
enum { GRADE_LONG = 48 };

/* A buffer of n floats (freed after the check) filled with garbage: large
 * values of both signs, the same each time. grade_fill_garbage refills one. */
float *grade_garbage(size_t n);
void grade_fill_garbage(float *x, size_t n);

/* Accumulation: got [dims] against start + times * once, what a backward
 * that adds (+=) leaves in a buffer that held start before `times` calls
 * that each give once. Fails with "<what> after N backward calls into a
 * buffer that held ... (it must add: +=)". */
int grade_added(const char *what, const float *got, const float *start, const float *once, int times, int ndim,
                const int *dims, double rtol, double atol);

/* Large inputs: every value of x [dims] finite and |x| <= bound (INFINITY:
 * no bound). Record mode records x (compared with the solution's within
 * rtol 1e-3, atol 1e-4). */
int grade_finite(const char *what, const float *x, int ndim, const int *dims, float bound);

/* A yes-or-no property: passes when holds; else fails with the message.
 * Record mode records holds (the solution's is 1). */
int grade_true(const char *what, int holds, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------ end to end
 *
 * A few dozen training steps of the chapter's own model, built with the code
 * being graded in place (graded alone: this exercise the student's, the rest
 * the solution's), from a fixed seed on fixed data, with Adam: each step's
 * loss must stay within rtol of the reference solution's at the same step.
 * A slip that only shows after an update (a result kept from the previous
 * call, a parameter's gradient added to another, a weight changed in place
 * by the forward) passes every check on one call and fails here.
 *
 * They are hidden checks (grade_main_hidden's list), for two reasons: the
 * model runs every exercise of the chapter, so only make grade-submissions,
 * which links the student's exercise with the solution's others, can grade
 * one exercise by it alone; and the reference is the solution's own run
 * (grade_reference: its build records the losses, the student's are compared
 * with them), so no curve is kept in the tree to go stale. make mutants runs
 * them on a mutant the other checks pass. */

/* The run: GRADE_TRAIN_STEPS steps of batches of GRADE_TRAIN_B, and a
 * seq2seq model's sources of 2 to GRADE_TRAIN_T symbols of a vocabulary of
 * GRADE_TRAIN_V (the symbols after <eos>); each loss within GRADE_TRAIN_RTOL
 * (and 1e-4) of the solution's. */
enum { GRADE_TRAIN_STEPS = 40, GRADE_TRAIN_B = 8, GRADE_TRAIN_T = 6, GRADE_TRAIN_V = 10 };
#define GRADE_TRAIN_RTOL 1e-3

/* GRADE_TRAIN_STEPS steps of the programs' training loop (train/loop.h's
 * train_loop: AdamW at a constant lr 0.01, gradients clipped to norm 1) on
 * p, each from gradient(ctx, step): forward and backward over the step's
 * batch, returning its loss with d loss / d p in p->grad (zeroed before);
 * then every step's loss against the solution's at that step
 * (grade_reference, named what). */
int grade_training(const char *what, Params *p, double (*gradient)(void *ctx, int step), void *ctx);

/* The same for a Seq2Seq (chapters 01-03), built for batches of
 * GRADE_TRAIN_B sources of GRADE_TRAIN_T tokens and targets of
 * GRADE_TRAIN_T + 1 over GRADE_TRAIN_V symbols: `reverse`, sources drawn
 * from a fixed seed, to be written backwards. */
int grade_seq2seq_training(const char *what, Seq2Seq *m);

/* The same for a Classifier (chapters 04-07) taking batches of
 * GRADE_TRAIN_B: examples of n_in tokens in [0, vocab) (or, when vocab is
 * 0, n_in floats in [-1, 1]); the targets are the inputs' tokens written
 * backwards (n_out = n_in), or a class that depends on every input
 * (n_out = 1), both modulo m->classes. */
int grade_classifier_training(const char *what, Classifier *m, int n_in, int vocab);

/* ------------------------------------------------ PyTorch's golden vectors */

/* One case of tests/golden/<layer>.bin (or $ATTN_GOLDEN_DIR/<layer>.bin). */
typedef struct {
    const GoldFile *file;
    const char *layer;
    const char *name;
} GoldCase;

/* Calls check on every case of the layer's file for which want (NULL: every
 * case) returns 1, and stops at the first that fails. Fails also when the
 * file cannot be read or no case was wanted. */
int grade_golden_cases(const char *layer, int (*want)(const GoldCase *c), int (*check)(const GoldCase *c));

/* The case's tensor <name>, or NULL when it has none. */
const GoldTensor *grade_tensor(const GoldCase *c, const char *name);
/* Its data; grade_f32 fails the program (a broken file) when it is missing. */
const float *grade_f32(const GoldCase *c, const char *name);
const int *grade_i32(const GoldCase *c, const char *name);
const float *grade_f32_or_null(const GoldCase *c, const char *name);
const int *grade_i32_or_null(const GoldCase *c, const char *name);

/* got against times x the case's tensor <name> (times 2 after a second
 * backward call into the same buffers: backward accumulates). */
int grade_golden_close(const GoldCase *c, const char *name, const float *got, int times, double rtol,
                       double atol);

/* The tolerances of tests/test_golden.c: outputs, then gradients. */
#define GRADE_RTOL_OUT 1e-5
#define GRADE_ATOL_OUT 1e-6
#define GRADE_RTOL_GRAD 1e-4
#define GRADE_ATOL_GRAD 1e-5

/* Runs the exercises (argv[1]: only that one; "--list": print the ids). */
int grade_main(int argc, char **argv, const GradeExercise *exercises, int n_exercises);

/* ------------------------------------------------ hidden checks */

/* The same, with hidden checks: hidden[] lists, per exercise id, the checks
 * that run after its own when the command line has --hidden SEED (named
 * "hidden: <check>" in the output). An exercise missing from hidden[] has
 * none. */
int grade_main_hidden(int argc, char **argv, const GradeExercise *exercises, int n_exercises,
                      const GradeExercise *hidden, int n_hidden);

/* A whole number in [lo, hi], and uniform numbers in [-scale, scale], from
 * the stream of the current hidden check: the seed of --hidden and the
 * check's place in the grader (the same draws in the teacher's build and
 * the student's, whatever other checks ran). */
int grade_draw(int lo, int hi);
void grade_draw_fill(float *x, size_t n, float scale);

/* count[n] against expected[n]: passes when every |count - expected| <=
 * bound (a statistical check: the draws of a sampler). In record mode the
 * counts are written with the solution's expected and bound. */
int grade_counts(const char *what, const float *count, const float *expected, const float *bound, int n);

/* got [dims] against the reference solution's values of the same name:
 * recorded (--record) or compared (--reference; "<what> differs from the
 * reference solution at [i, j] ..."). */
int grade_reference(const char *what, const float *got, int ndim, const int *dims, double rtol, double atol);

#endif
