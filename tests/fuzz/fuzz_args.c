/* fuzz_args.c - libFuzzer target: the flag parser (common/io/args.c) with an
 * argv built from the input.
 *
 * The input is split at NUL bytes: the first piece is a preset (as
 * "--preset NAME" expands it, words separated by spaces), the others are the
 * arguments argv[1..]. The flag table has every kind the programs use: an
 * integer and a float with ranges, strings with and without choices, a
 * boolean. After parsing, the values must be in their ranges (the parser
 * promises it), and the --load checks and --help printing run too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/args.h"
#include "util/error.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (text == NULL) abort();
    memcpy(text, data, size);
    text[size] = '\0';

    /* pieces between NUL bytes: preset, then argv[1..] */
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = "fuzz";
    const char *preset = text;
    size_t i = strlen(text) + 1;
    while (i <= size && argc < MAX_ARGS) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;

    int steps = 100, batch = 32, quiet = 0;
    float lr = 3e-3f, clip = 1.0f, ls = 0.0f;
    const char *task = "dates", *out = NULL, *cell = "gru";
    const ArgSpec specs[] = {
        {"steps", ARG_INT, &steps, "training steps", 0, 1000000, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"batch", ARG_INT, &batch, "batch", 1, 4096, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"lr", ARG_FLOAT, &lr, "learning rate", 1e-6, 1, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"clip", ARG_FLOAT, &clip, "clip", 0, 1e6, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"label-smoothing", ARG_FLOAT, &ls, "eps", 0, 0, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"task", ARG_STRING, &task, "task", 0, 0, "dates,reverse,g2p", ARG_TRAINING, ARG_TRAINING_ONLY},
        {"cell", ARG_STRING, &cell, "cell", 0, 0, "rnn,gru,lstm", ARG_TRAINING, ARG_TRAINING_ONLY},
        {"out", ARG_STRING, &out, "output directory", 0, 0, NULL, ARG_TRAINING, ARG_ACTS_WITH_LOAD},
        {"quiet", ARG_BOOL, &quiet, "no progress", 0, 0, NULL, ARG_TRAINING, ARG_ACTS_WITH_LOAD},
        {"plot", ARG_REFUSED, NULL, "this model has no attention to draw", 0, 0, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    char **storage = NULL;
    int rc = args_parse_with_preset(argc, argv, preset, specs, n_specs, &storage);
    if (rc == 0) {
        if (steps < 0 || steps > 1000000 || batch < 1 || batch > 4096 || !(lr >= 1e-6f && lr <= 1.0f) ||
            !(clip >= 0 && clip <= 1e6f) || (quiet != 0 && quiet != 1))
            abort();   /* the parser let a value out of its range through */
        if (strcmp(task, "dates") && strcmp(task, "reverse") && strcmp(task, "g2p")) abort();
        if (out != NULL && out[0] == '\0') abort();
        (void)args_refuse_with_load(argc, argv, specs, n_specs);
    }
    free(storage);
    for (int k = 0; k < argc; k++) (void)args_given(argc, argv, argv[k][0] == '-' && argv[k][1] == '-' ? argv[k] + 2 : argv[k]);
    clear_error();
    free(text);
    return 0;
}
