/* results.h - the flat results.json every run writes, e.g.
 *   {"chapter": "01_rnn_seq2seq", "task": "dates", "test_exact_match": 0.93, ...}
 * Chapter READMEs and the top README build their results tables from these. */
#ifndef RESULTS_H
#define RESULTS_H

#define RESULTS_MAX 128

typedef struct {
    int n;
    char keys[RESULTS_MAX][48];
    char values[RESULTS_MAX][256];   /* already JSON-encoded */
} Results;

void results_init(Results *r);
void results_set_str(Results *r, const char *key, const char *value);
void results_set_num(Results *r, const char *key, double value);
/* Atomic write. Returns 0 or -1 with fail(). */
int results_write(const Results *r, const char *path);

#endif
