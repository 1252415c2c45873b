/* test_args.c - command-line flags: valid values in both "--flag value" and
 * "--flag=value" forms (range ends included), --help, and every kind of
 * mistake giving -1 with one message that names the flag: a non-number,
 * trailing garbage, an empty value, NaN/inf, overflow, out of range, not a
 * choice, a value given to a boolean flag, a missing value, an unknown flag,
 * a positional argument; an integer too big for an int is reported with the
 * flag's own range. Also what --help prints, and that a string flag without
 * a default prints none, and which flags --load refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/args.h"
#include "util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

/* The flags of a typical chapter program, reset before every test. */
static int steps, seed, verbose;
static float lr;
static const char *cell, *out_dir, *note;

static ArgSpec specs[] = {
    {"steps",   ARG_INT,    &steps,   "training steps",        1, 1000000, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
    {"seed",    ARG_INT,    &seed,    "random seed",           0, 0, NULL,
     ARG_SHARED, ARG_TRAINING_ONLY},       /* no range */
    {"lr",      ARG_FLOAT,  &lr,      "learning rate",         1e-6, 1, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
    {"cell",    ARG_STRING, &cell,    "recurrent cell",        0, 0, "rnn,gru,lstm", ARG_MODEL, ARG_TRAINING_ONLY},
    {"out",     ARG_STRING, &out_dir, "output directory",      0, 0, NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
    {"verbose", ARG_BOOL,   &verbose, "print more",            0, 0, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
    {"plot",    ARG_REFUSED, NULL,    "this model has no attention weights to draw", 0, 0, NULL,
     ARG_OUTPUT, ARG_TRAINING_ONLY},
    {"note",    ARG_STRING, &note,    "a long help text that goes on and on, naming what the flag does, what it "
                                      "does not do, and why a user would give it, until it needs more than one "
                                      "line of the terminal", 0, 0, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
};
static const int n_specs = sizeof specs / sizeof specs[0];

static int reset(void **state) {
    (void)state;
    steps = 2000;
    seed = 1;
    verbose = 0;
    lr = 0.001f;
    cell = "gru";
    out_dir = "out";
    note = NULL;
    clear_error();
    return 0;
}

/* Parse a NULL-terminated list of arguments (after the program name). */
static int parse(const char *first, ...) {
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"prog";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a != NULL && argc < 31; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return args_parse(argc, argv, specs, n_specs);
}

static void expect_message(const char *expected) {
    assert_string_equal(last_error(), expected);
}

static void expect_error_naming(const char *flag) {
    if (strstr(last_error(), flag) == NULL) fail_msg("message '%s' does not name %s", last_error(), flag);
}

/* ------------------------------------------------------------------ valid */

static void test_valid_both_forms(void **state) {
    (void)state;
    assert_int_equal(parse("--steps", "100", "--lr=0.01", "--cell", "lstm", "--out=results/x",
                           "--verbose", "--seed", "-5", NULL), 0);
    assert_int_equal(steps, 100);
    assert_true(lr == 0.01f);
    assert_string_equal(cell, "lstm");
    assert_string_equal(out_dir, "results/x");
    assert_int_equal(verbose, 1);
    assert_int_equal(seed, -5);
}

static void test_no_arguments_keeps_defaults(void **state) {
    (void)state;
    assert_int_equal(parse(NULL), 0);
    assert_int_equal(steps, 2000);
    assert_string_equal(cell, "gru");
    assert_int_equal(verbose, 0);
}

static void test_ranges_are_inclusive(void **state) {
    (void)state;
    assert_int_equal(parse("--steps", "1", "--lr", "1e-6", NULL), 0);
    assert_int_equal(steps, 1);
    assert_true(lr == 1e-6f);
    assert_int_equal(parse("--steps=1000000", "--lr=1", NULL), 0);
    assert_int_equal(steps, 1000000);
    assert_true(lr == 1.0f);
    assert_int_equal(parse("--seed", "-2147483648", NULL), 0);   /* no range: any int */
    assert_int_equal(seed, -2147483647 - 1);
    assert_int_equal(parse("--steps", "+12", "--lr", "5E-3", NULL), 0);
    assert_int_equal(steps, 12);
    assert_true(lr == 5e-3f);
}

static void test_last_value_wins(void **state) {
    (void)state;
    assert_int_equal(parse("--steps", "5", "--steps=6", NULL), 0);
    assert_int_equal(steps, 6);
}

static void test_help(void **state) {
    (void)state;
    assert_int_equal(parse("--help", NULL), 1);
    assert_int_equal(parse("--steps", "5", "-h", NULL), 1);
}

/* ------------------------------------------- the messages shown in args.h */

static void test_header_examples(void **state) {
    (void)state;
    assert_int_equal(parse("--steps", "abc", NULL), -1);
    expect_message("--steps: expected an integer, got 'abc'");
    assert_int_equal(parse("--lr", "-1", NULL), -1);
    expect_message("--lr: expected a number in [1e-06, 1], got '-1'");
    assert_int_equal(parse("--cell", "foo", NULL), -1);
    expect_message("--cell: expected one of rnn, gru, lstm, got 'foo'");
    assert_int_equal(parse("--bogus", NULL), -1);
    expect_message("unknown flag '--bogus' (see --help)");
    assert_int_equal(parse("--bogus=3", NULL), -1);
    expect_message("unknown flag '--bogus' (see --help)");
}

/* ------------------------------------------------------------ bad values */

static void test_bad_integers(void **state) {
    (void)state;
    const char *bad[] = {"12abc", "", "1.5", " 12", "0x10", "99999999999", "2147483648", "-", "12 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--steps=%s", bad[i]);
        steps = 2000;
        assert_int_equal(parse(flag, NULL), -1);
        expect_error_naming("--steps");
        assert_int_equal(steps, 2000);     /* not half-set */
    }
    assert_int_equal(parse("--seed", "2147483648", NULL), -1);     /* overflows an int */
    expect_error_naming("--seed");
    assert_int_equal(parse("--seed", "-99999999999999999999", NULL), -1);
    expect_error_naming("--seed");
}

static void test_out_of_range(void **state) {
    (void)state;
    assert_int_equal(parse("--steps", "0", NULL), -1);
    expect_message("--steps: expected an integer in [1, 1000000], got '0'");
    assert_int_equal(parse("--steps", "1000001", NULL), -1);
    expect_error_naming("--steps");
    /* too big for an int: still the flag's own range, not the int's */
    assert_int_equal(parse("--steps", "99999999999", NULL), -1);
    expect_message("--steps: expected an integer in [1, 1000000], got '99999999999'");
    assert_int_equal(parse("--steps=-99999999999999999999", NULL), -1);
    expect_message("--steps: expected an integer in [1, 1000000], got '-99999999999999999999'");
    /* a flag without a range: the range of an int */
    assert_int_equal(parse("--seed", "2147483648", NULL), -1);
    expect_message("--seed: expected an integer in [-2147483648, 2147483647], got '2147483648'");
    assert_int_equal(parse("--lr", "1e-7", NULL), -1);
    expect_error_naming("--lr");
    assert_int_equal(parse("--lr", "1.0001", NULL), -1);
    expect_error_naming("--lr");
}

static void test_bad_floats(void **state) {
    (void)state;
    const char *bad[] = {"nan", "NaN", "inf", "-inf", "infinity", "1e999", "0.1x", "", "abc", " 0.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--lr=%s", bad[i]);
        lr = 0.5f;
        assert_int_equal(parse(flag, NULL), -1);
        expect_error_naming("--lr");
        assert_true(lr == 0.5f);
    }
    assert_int_equal(parse("--lr", "abc", NULL), -1);
    expect_message("--lr: expected a number, got 'abc'");
}

static void test_bad_strings(void **state) {
    (void)state;
    assert_int_equal(parse("--out=", NULL), -1);
    expect_error_naming("--out");
    assert_int_equal(parse("--cell=", NULL), -1);
    expect_error_naming("--cell");
    assert_int_equal(parse("--cell", "GRU", NULL), -1);      /* choices are exact */
    expect_error_naming("--cell");
    assert_int_equal(parse("--cell", "gr", NULL), -1);       /* not a prefix match */
    expect_error_naming("--cell");
}

static void test_bool_takes_no_value(void **state) {
    (void)state;
    assert_int_equal(parse("--verbose=1", NULL), -1);
    expect_error_naming("--verbose");
    assert_int_equal(verbose, 0);
}

static void test_missing_value(void **state) {
    (void)state;
    assert_int_equal(parse("--steps", NULL), -1);
    expect_error_naming("--steps");
    assert_int_equal(parse("--out", "--verbose", NULL), -1);   /* the next flag is not a value */
    expect_error_naming("--out");
}

static void test_positional_and_malformed(void **state) {
    (void)state;
    assert_int_equal(parse("train.txt", NULL), -1);
    expect_error_naming("train.txt");
    assert_int_equal(parse("-steps", "5", NULL), -1);
    expect_error_naming("-steps");
    assert_int_equal(parse("--", NULL), -1);
    assert_int_equal(parse("--step", "5", NULL), -1);          /* no abbreviations */
    expect_message("unknown flag '--step' (see --help)");
}

/* ------------------------------------------------------------------ help */

/* What args_print_help writes to stdout, in text[size]. */
static void capture_help(char *text, size_t size) {
    char path[] = "/tmp/test_args_help.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    args_print_help("prog", "Train a model.", specs, n_specs, "prog --steps 10\nprog --cell lstm");
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(fd);

    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, size - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
}

static void test_help_text(void **state) {
    (void)state;
    char text[4096];
    capture_help(text, sizeof text);
    const char *expected[] = {"usage: prog", "Train a model.", "--steps N", "training steps",
                              "default 2000", "--lr X", "default 0.001",
                              "--cell S", "(default gru; rnn|gru|lstm)", "--verbose",
                              "--help", "\nexamples:\n  prog --steps 10\n  prog --cell lstm\n"};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        if (strstr(text, expected[i]) == NULL) fail_msg("help lacks '%s':\n%s", expected[i], text);
    /* the groups in their order: the program's own (model, training, output), then the shared ones */
    const char *model = strstr(text, "\nmodel:\n"), *training = strstr(text, "\ntraining:\n"),
               *output = strstr(text, "\nevaluation and output:\n"), *shared = strstr(text, "\nshared:\n");
    assert_non_null(strstr(text, "Train a model.\n\nmodel:\n"));
    assert_non_null(model);
    assert_non_null(training);
    assert_non_null(output);
    assert_non_null(shared);
    assert_true(model < training && training < output && output < shared);
    assert_true(strstr(text, "--cell") < training && strstr(text, "--steps") > training);
    assert_true(strstr(text, "--seed") > shared && strstr(text, "--help") > shared);
    assert_null(strstr(text, "\ndata:"));                 /* an empty group has no heading */
    /* a refused flag is not listed */
    assert_null(strstr(text, "--plot"));
    /* long help is wrapped: no line over 100 columns, and the text is whole */
    int column = 0;
    for (const char *c = text; *c; c++) {
        column = *c == '\n' ? 0 : column + 1;
        if (column > 100) fail_msg("a help line is longer than 100 columns:\n%s", text);
    }
    assert_non_null(strstr(text, "more than one"));
}

/* A list flag: positive integers separated by single commas, each at most
 * `largest`, at most `max` of them; an empty item, a word or too many refused. */
static void test_int_list(void **state) {
    (void)state;
    int v[3];
    assert_int_equal(args_int_list("heads", "1,2,4", v, 3, 64), 3);
    assert_int_equal(v[0], 1);
    assert_int_equal(v[2], 4);
    assert_int_equal(args_int_list("heads", "7", v, 3, 64), 1);
    const char *bad[] = {"", ",", "1,", ",1", "1,,2", "1,x", "0", "65", "1,2,3,4", "2 ", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(args_int_list("heads", bad[i], v, 3, 64), -1);
        expect_error_naming("--heads");
    }
    assert_int_equal(args_int_list("heads", "1,2,", v, 3, 64), -1);
    expect_message("--heads '1,2,': item 3 is empty (expected numbers separated by single commas, e.g. 1,2,4)");
}

/* A flag the program knows but that has no effect in it: refused with the
 * reason, in both forms. */
static void test_refused_flag(void **state) {
    (void)state;
    assert_int_equal(parse("--plot", NULL), -1);
    expect_message("--plot has no effect in this program: this model has no attention weights to draw");
    assert_int_equal(parse("--steps", "5", "--plot", NULL), -1);
    expect_error_naming("--plot has no effect in this program");
}

/* With --load only the flags marked ARG_ACTS_WITH_LOAD may be given: the
 * first other one is named; a refused flag is left to args_parse. */
static void test_refuse_with_load(void **state) {
    (void)state;
    char *with_out[] = {"prog", "--load", "m.ckpt", "--out", "o", NULL};
    assert_int_equal(args_refuse_with_load(5, with_out, specs, n_specs), 0);
    char *with_steps[] = {"prog", "--out=o", "--steps", "5", "--lr", "0.1", NULL};
    assert_int_equal(args_refuse_with_load(6, with_steps, specs, n_specs), -1);
    expect_message("--steps has no effect with --load: the checkpoint's config decides the model, its task and "
                   "its training; drop --steps (or train a new model without --load)");
    char *with_plot[] = {"prog", "--plot", NULL};
    assert_int_equal(args_refuse_with_load(2, with_plot, specs, n_specs), 0);
    /* a program marks a flag of a shared table afterwards (the GPT's --seed seeds its sampling) */
    ArgSpec copy[sizeof specs / sizeof specs[0]];
    memcpy(copy, specs, sizeof specs);
    assert_non_null(args_find(copy, n_specs, "seed"));
    assert_null(args_find(copy, n_specs, "sed"));
    char *with_seed[] = {"prog", "--seed", "3", NULL};
    assert_int_equal(args_refuse_with_load(3, with_seed, copy, n_specs), -1);
    args_find(copy, n_specs, "seed")->with_load = ARG_ACTS_WITH_LOAD;
    assert_int_equal(args_refuse_with_load(3, with_seed, copy, n_specs), 0);
}

/* A string flag without a default (NULL) prints no "(default (none))": its
 * help text says what happens without it. A string with choices but no
 * default still lists the choices. */
static void test_help_without_default(void **state) {
    (void)state;
    out_dir = NULL;
    cell = NULL;
    char text[4096];
    capture_help(text, sizeof text);
    const char *line = strstr(text, "--out S");
    assert_non_null(line);
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    char out_line[256];
    snprintf(out_line, sizeof out_line, "%.*s", (int)(end - line), line);
    if (strstr(out_line, "default") != NULL || strstr(out_line, "(none)") != NULL)
        fail_msg("--out line shows a default: '%s'", out_line);
    assert_non_null(strstr(out_line, "output directory"));
    assert_null(strstr(text, "(none)"));
    if (strstr(text, "recurrent cell (rnn|gru|lstm)\n") == NULL)
        fail_msg("--cell line without a default lacks its choices:\n%s", text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_valid_both_forms, reset),
        cmocka_unit_test_setup(test_no_arguments_keeps_defaults, reset),
        cmocka_unit_test_setup(test_ranges_are_inclusive, reset),
        cmocka_unit_test_setup(test_last_value_wins, reset),
        cmocka_unit_test_setup(test_help, reset),
        cmocka_unit_test_setup(test_header_examples, reset),
        cmocka_unit_test_setup(test_bad_integers, reset),
        cmocka_unit_test_setup(test_out_of_range, reset),
        cmocka_unit_test_setup(test_bad_floats, reset),
        cmocka_unit_test_setup(test_bad_strings, reset),
        cmocka_unit_test_setup(test_bool_takes_no_value, reset),
        cmocka_unit_test_setup(test_missing_value, reset),
        cmocka_unit_test_setup(test_positional_and_malformed, reset),
        cmocka_unit_test_setup(test_help_text, reset),
        cmocka_unit_test_setup(test_help_without_default, reset),
        cmocka_unit_test_setup(test_refused_flag, reset),
        cmocka_unit_test_setup(test_refuse_with_load, reset),
        cmocka_unit_test_setup(test_int_list, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
