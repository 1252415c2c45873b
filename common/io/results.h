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
/* Every "key=value" line of a model's config text (the one its checkpoint
 * keeps) as a key: numbers as numbers, anything else as a string. Lines with
 * a key or value too long for the file are skipped. */
void results_set_config(Results *r, const char *config);

/* Atomic write. Returns 0 or -1 with fail(). */
int results_write(const Results *r, const char *path);

/* Before a training run writes into out_dir: when out_dir holds the
 * results.json of a training run ("steps" above 0) whose configuration
 * differs from config (a "key=value" line of config with another value
 * there, or missing), print one note on stdout saying so: this run's files
 * replace that run's files of the same names, and its others stay beside
 * them (a checkpoint of one model next to the results of another). Returns
 * 1 when it printed the note, else 0; never an error. */
int results_note_other_run(const char *out_dir, const char *config);

/* Where an evaluation of a saved model (--load) writes its outputs: out
 * (cap bytes) gets given (the user's --out) or, when given is NULL,
 * <default_dir>/eval_<directory>_<checkpoint file name without .ckpt>, where
 * <directory> is the name of the folder the checkpoint is in (left out when
 * that is default_dir's own folder, "." or "..", or the path has none), so
 * two models saved under the same file name in two runs' folders are
 * evaluated into two places. A directory
 * holding the results.json of a training run ("steps" above 0) is refused,
 * so evaluating never overwrites what training wrote; so is a directory
 * longer than OUT_DIR_MAX (util.h) or cap - 1 bytes, never cut. Returns 0,
 * or -1 with fail() naming the directory (and the flag) and what to do. */
int results_eval_dir(char *out, int cap, const char *given, const char *default_dir, const char *checkpoint);

#endif
