/* args.h - command-line flags with one clear error per mistake.
 *
 * A program lists its flags in a table of ArgSpec; args_parse fills the
 * destinations and checks types, ranges and choices:
 *   --steps abc     -> "--steps: expected an integer, got 'abc'"
 *   --steps 99999999999 -> "--steps: expected an integer in [1, 1000000], got '99999999999'"
 *   --lr -1         -> "--lr: expected a number in [1e-06, 1], got '-1'"
 *   --cell foo      -> "--cell: expected one of rnn, gru, lstm, got 'foo'"
 *   --bogus         -> "unknown flag '--bogus' (see --help)"
 * Both "--flag value" and "--flag=value" are accepted. */
#ifndef ARGS_H
#define ARGS_H

/* ARG_REFUSED: a flag this program knows but that has no effect in it
 * (chapter 01's --plot: its RNN has no attention to draw). It is not listed
 * in --help; given, args_parse fails with "--NAME has no effect in this
 * program: HELP", the spec's help text saying why. */
typedef enum { ARG_INT, ARG_FLOAT, ARG_STRING, ARG_BOOL, ARG_REFUSED } ArgType;

/* Where --help lists a flag: the program's own flags first, in these groups
 * and this order, then the flags every program shares (backend, threads ...).
 * ARG_NO_GROUP (0, a spec that names none) is listed after ARG_OUTPUT. */
typedef enum { ARG_NO_GROUP, ARG_MODEL, ARG_DATA, ARG_TRAINING, ARG_OUTPUT, ARG_SHARED } ArgGroup;

/* Whether a flag still acts when a program runs a saved model (--load):
 * with --load the checkpoint's config decides the model, its task and its
 * training, so every flag not marked ARG_ACTS_WITH_LOAD is refused then
 * (args_refuse_with_load). 0, a spec that says nothing, is training only. */
typedef enum { ARG_TRAINING_ONLY, ARG_ACTS_WITH_LOAD } ArgLoad;

typedef struct {
    const char *name;        /* without the leading "--" */
    ArgType type;
    void *dest;              /* int*, float*, const char**, int* (bool) */
    const char *help;
    double min, max;         /* ranges for ARG_INT / ARG_FLOAT (inclusive) */
    const char *choices;     /* ARG_STRING: comma-separated allowed values, or NULL */
    ArgGroup group;          /* where --help lists it */
    ArgLoad with_load;       /* does it act with --load (0: no) */
} ArgSpec;

/* Returns 0 on success, 1 when --help/-h was given (caller prints help and
 * exits 0), -1 with fail() on a bad flag or value. ARG_BOOL flags take no
 * value. Positional arguments are errors. */
int args_parse(int argc, char **argv, const ArgSpec *specs, int n_specs);

/* Print usage: the summary, then the flags by group (model, data, training,
 * output, then the shared ones), each with its type, help text, default
 * (current value of dest) and choices, wrapped at 100 columns; then
 * the examples (lines separated by '\n', or NULL for none). A string flag
 * whose dest is NULL has no default to show, so none is printed: its help
 * text says what happens without it. ARG_REFUSED flags are not listed. */
void args_print_help(const char *prog, const char *summary, const ArgSpec *specs, int n_specs,
                     const char *examples);

/* The spec of a flag this program knows but has no use for (ARG_REFUSED):
 * given, it fails with "--NAME has no effect in this program: WHY". */
ArgSpec args_refused(const char *name, const char *why);

/* A list flag's value, "1,2,4": up to max positive integers of at most
 * `largest`, separated by single commas, into out. Returns how many, or -1
 * with fail() naming the flag for an empty item ("1,,2", "7,"), a word, or
 * too many items; the caller checks what else each item must be. */
int args_int_list(const char *flag, const char *text, int *out, int max, int largest);

/* 1 when the command line names flag `name` ("--name" or "--name=..."). */
int args_given(int argc, char **argv, const char *name);

/* With --load a saved model's config decides the model and its task, so a
 * training flag would be ignored without a word. Returns -1 with fail()
 * naming the first flag of specs[0..n_specs) that argv gives but whose spec
 * is not ARG_ACTS_WITH_LOAD; 0 when there is none. */
int args_refuse_with_load(int argc, char **argv, const ArgSpec *specs, int n_specs);

/* The spec of flag `name` in specs[0..n_specs), or NULL. */
ArgSpec *args_find(ArgSpec *specs, int n_specs, const char *name);

/* A preset ("--task g2p --steps 4000 ..."): parse the preset's flags in
 * front of the user's, so a flag the user gives overrides the preset's.
 * *storage gets the combined argv (free it when the parsed strings are no
 * longer needed). Returns what args_parse returns. */
int args_parse_with_preset(int argc, char **argv, const char *preset, const ArgSpec *specs, int n_specs,
                           char ***storage);
#endif
