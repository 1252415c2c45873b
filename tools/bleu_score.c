/* bleu_score.c - BLEU of a file of translations, by the C code
 * (common/train/bleu.c), for tools/bleu_check.py to compare with NLTK.
 *
 *   make build/tools/bleu_score && ./build/tools/bleu_score FILE.tsv
 *
 * FILE.tsv: a header line naming the columns, tab-separated, among them
 * "reference" and "output" (detokenised text) and, optionally, "source"
 * (its words give the length bucket); then one pair a line, as
 * translations.tsv and tests/data/bleu_pairs.tsv are. Prints pairs=,
 * corpus_bleu=, one bucket line per length bucket with pairs, then for each
 * pair its sentence_bleu= and the 13a tokens of its output and reference. */
#include "train/bleu.h"
#include "util/error.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 16

/* Cut line at tabs in place: up to MAX_COLUMNS fields; returns how many. */
static int split_tabs(char *line, char **field) {
    int n = 0;
    for (char *s = line;;) {
        char *tab = strchr(s, '\t');
        if (n < MAX_COLUMNS) field[n] = s;
        n++;
        if (tab == NULL) break;
        *tab = '\0';
        s = tab + 1;
    }
    return n;
}

static int words_of(const char *s) {
    int n = 0;
    while (*s) {
        while (*s == ' ') s++;
        if (*s == '\0') break;
        n++;
        while (*s && *s != ' ') s++;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bleu_score FILE.tsv (columns reference, output and optionally source)\n");
        return 2;
    }
    size_t len;
    char *text = read_whole_file(argv[1], &len);
    if (text == NULL) {
        fprintf(stderr, "bleu_score: %s\n", last_error());
        return 1;
    }
    char *line = text, *field[MAX_COLUMNS];
    char *eol = strchr(line, '\n');
    if (eol) *eol = '\0';
    int n_cols = split_tabs(line, field), ref_col = -1, out_col = -1, src_col = -1;
    for (int k = 0; k < n_cols && k < MAX_COLUMNS; k++) {
        if (strcmp(field[k], "reference") == 0) ref_col = k;
        if (strcmp(field[k], "output") == 0) out_col = k;
        if (strcmp(field[k], "source") == 0) src_col = k;
    }
    if (ref_col < 0 || out_col < 0) {
        fprintf(stderr, "bleu_score: '%s' line 1: expected a header naming the columns reference and output\n",
                argv[1]);
        return 1;
    }
    BleuByLength by;
    bleu_by_length_init(&by);
    int pairs = 0, cap = 64, line_no = 1;
    double *sentence = xmalloc(sizeof(double) * (size_t)cap);
    char **tokens = xmalloc(sizeof(char *) * 2 * (size_t)cap);
    while (eol != NULL && eol[1] != '\0') {
        line = eol + 1;
        line_no++;
        eol = strchr(line, '\n');
        if (eol) *eol = '\0';
        int n = split_tabs(line, field);
        if (n != n_cols) {
            fprintf(stderr, "bleu_score: '%s' line %d: %d columns, the header has %d\n", argv[1], line_no, n, n_cols);
            return 1;
        }
        if (pairs == cap) {
            cap *= 2;
            double *s = xmalloc(sizeof(double) * (size_t)cap);
            char **t = xmalloc(sizeof(char *) * 2 * (size_t)cap);
            memcpy(s, sentence, sizeof(double) * (size_t)pairs);
            memcpy(t, tokens, sizeof(char *) * 2 * (size_t)pairs);
            free(sentence);
            free(tokens);
            sentence = s;
            tokens = t;
        }
        const char *ref = field[ref_col], *out = field[out_col];
        bleu_by_length_add(&by, src_col >= 0 ? words_of(field[src_col]) : 1, out, ref);
        sentence[pairs] = bleu_sentence(out, ref);
        tokens[2 * pairs] = bleu_tokenize_13a(out);
        tokens[2 * pairs + 1] = bleu_tokenize_13a(ref);
        pairs++;
    }
    printf("pairs=%d\ncorpus_bleu=%.6f\n", pairs, bleu_score(&by.all));
    for (int b = 0; b < BLEU_BUCKETS; b++)
        printf("bucket=%s pairs=%ld bleu=%.6f\n", bleu_bucket_name(b), by.bucket[b].n, bleu_score(&by.bucket[b]));
    for (int i = 0; i < pairs; i++) {
        printf("sentence_bleu=%.6f\noutput_tokens=%s\nreference_tokens=%s\n", sentence[i], tokens[2 * i],
               tokens[2 * i + 1]);
        free(tokens[2 * i]);
        free(tokens[2 * i + 1]);
    }
    free(sentence);
    free(tokens);
    free(text);
    return 0;
}
