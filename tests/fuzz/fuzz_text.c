/* fuzz_text.c - libFuzzer target: the text-to-ids paths of what a user types.
 *
 *   --translate TEXT  (chapters 01-03, 06)  dataset_encode_source on the
 *                     dates, reverse, g2p and translate tasks (g2p and
 *                     translate read the shipped data/cmudict.dict.gz and
 *                     data/bible_en_es.tsv.gz once: run from the repository root)
 *   --input DIGITS    (chapters 04, 05)     the digit tasks' parse_input
 *   --prompt TEXT     (chapter 06's GPT)    brown_encode, words and characters
 *                     views, on a small corpus written at start-up
 * Every path gets the input as one string (ending at its first NUL, as an
 * argument would); ids that come back must lie inside the vocabulary, and
 * decoding them again must fit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/brown.h"
#include "data/dataset.h"
#include "data/digit_tasks.h"
#include "data/examples.h"
#include "fuzz_util.h"
#include "util/error.h"

#define MAX_IDS 512

static Dataset tasks[4];
static int n_tasks;
static BrownCorpus brown[2];
static DigitTaskSpec digit_specs[2];
static ExampleTask digit_tasks[2];
static Examples digit_examples;

static const char *const BROWN_TEXT =
    "# ca01\n\nThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
    "investigation/nn of/in recent/jj primary/nn election/nn produced/vbd ``/`` no/at evidence/nn ''/'' ./.\n\n"
    "The/at jury/nn further/rbr said/vbd in/in term-end/nn presentments/nns ,/, 1/2/cd ./.\n\n"
    "# ca02\n\nAustin/np-hl ,/,-hl Texas/np-hl the/at jury/nn said/vbd ./.\n";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *names[4] = {"dates", "reverse", "g2p", "translate"};
    for (int i = 0; i < 4; i++) {
        TaskConfig tc;
        if (task_defaults(&tc, names[i]) != 0) abort();
        if (tc.n_train > 2000) tc.n_train = 2000;   /* the vocabulary is what matters, not the size */
        if (dataset_load(&tasks[n_tasks], &tc) != 0) {
            fprintf(stderr, "fuzz_text: %s (run from the repository root)\n", last_error());
            abort();
        }
        n_tasks++;
    }
    char path[512];
    fuzz_path(path, sizeof path, "brown.txt.gz");
    fuzz_write_gzip(path, BROWN_TEXT, strlen(BROWN_TEXT));
    for (int k = 0; k < 2; k++) {
        BrownConfig cfg;
        brown_defaults(&cfg, k == 0 ? BROWN_WORDS : BROWN_CHARS);
        cfg.path = path;
        cfg.n_train = 20;
        cfg.n_valid = 5;
        cfg.max_rare = 0;
        if (brown_load_config(&brown[k], &cfg) != 0) {
            fprintf(stderr, "fuzz_text: %s\n", last_error());
            abort();
        }
    }
    if (digit_task_from_config("task=reverse\nlen=8\n", &digit_specs[0], &digit_tasks[0]) != 0 ||
        digit_task_from_config("task=count_next\nlen=16\n", &digit_specs[1], &digit_tasks[1]) != 0) {
        fprintf(stderr, "fuzz_text: %s\n", last_error());
        abort();
    }
    examples_alloc(&digit_examples, 1, 16, 16, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_string(data, size);
    int ids[MAX_IDS], len = 0;
    char out[4 * MAX_IDS + 64];

    for (int i = 0; i < n_tasks; i++) {
        const Dataset *d = &tasks[i];
        if (dataset_encode_source(d, text, ids, d->max_src_len, &len) == 0) {
            if (len < 0 || len > d->max_src_len) abort();
            for (int k = 0; k < len; k++)
                if (ids[k] < 0 || ids[k] >= d->src_vocab.size) abort();
            vocab_decode(&d->src_vocab, ids, len, d->src_sep, out, sizeof out);
        }
    }
    for (int k = 0; k < 2; k++) {
        int n = brown_encode(&brown[k], text, ids, MAX_IDS);
        if (n > MAX_IDS) abort();
        if (n >= 0) {
            for (int j = 0; j < n; j++)
                if (ids[j] < 0 || ids[j] >= brown[k].V) abort();
            (void)brown_decode(&brown[k], ids, n, out, sizeof out);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (digit_tasks[k].parse_input(digit_tasks[k].self, text, &digit_examples) == 0)
            for (int j = 0; j < digit_tasks[k].n_in; j++)
                if (digit_examples.tokens[j] < 0 || digit_examples.tokens[j] > 9) abort();
    }
    clear_error();
    free(text);
    return 0;
}
