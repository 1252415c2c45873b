/* seq2seq.h - the seq2seq driver: the calls a sequence-to-sequence program
 * (chapters 01, 02, 03, 06's encoder-decoder and 07's captioner) makes from
 * its main, in this order:
 *
 *   seq2seq_init            the shared flags' defaults (Seq2SeqFlags)
 *   seq2seq_parse_flags     the chapter's own flags (its model's config struct), then the shared ones
 *   seq2seq_load_data       the task's examples, and the first lines of the config text the
 *                           checkpoint keeps (with --load: the checkpoint's text, and its task)
 *   seq2seq_model_config    the model's config struct into that text (with --load: from it)
 *     (the chapter builds its model from the struct, into run.model)
 *   seq2seq_use_saved       with --load: the saved weights; --translate decodes the user's text
 *   seq2seq_train           train_loop (train/loop.h) over the shuffled training examples
 *   seq2seq_evaluate        decode the test split: the results table, sample predictions
 *   seq2seq_write_outputs   model.ckpt, loss.png, acc_by_len.png, attention_*.png, results.json
 *   seq2seq_finish          free everything, report an error; the exit code
 *
 * Each returns 0, or -1 with fail() (seq2seq_finish prints the message);
 * seq2seq_parse_flags and seq2seq_use_saved return 1 when the program is
 * done (--help printed, a text translated). A main chains them:
 *
 *   int rc = seq2seq_parse_flags(&run, argc, argv, model_flags, n);
 *   if (rc == 0) rc = seq2seq_load_data(&run);
 *   ...
 *   return seq2seq_finish(&run, rc);
 *
 * What they print and write: one line naming the task, its sizes and the
 * backend; the progress line; the results table on the test split (exact
 * match, token accuracy, for g2p word and phoneme error rates, for translate
 * BLEU) and exact match (translate: BLEU) by input length; sample
 * predictions; and in the output directory (--out, default out/<chapter>;
 * with --load eval_<checkpoint> in it): results.json, model.ckpt, loss.png,
 * acc_by_len.png (translate: bleu_by_len.png and translations.tsv),
 * attention_{0,1,2}.png. */
#ifndef SEQ2SEQ_H
#define SEQ2SEQ_H
#include "data/dataset.h"
#include "io/args.h"
#include "io/config.h"
#include "io/results.h"
#include "model/seq2seq.h"
#include "train/bleu.h"
#include "train/flags.h"
#include "train/loop.h"
#include "train/metrics.h"
#include "util/util.h"

/* What a program is, for --help, messages and its checkpoints (no code). */
typedef struct {
    const char *chapter;       /* "01_rnn_seq2seq": messages, the default --out out/<chapter> */
    const char *model_name;    /* the "model=" line of its checkpoints: "rnn_seq2seq" */
    const char *summary;       /* --help's paragraph */
    const char *examples;      /* --help's example lines, '\n' between them */
    const char *preset_long;   /* the flags --preset long stands for (NULL: no preset) */
    const char *preset_translate;   /* the flags --preset long-translate stands for: the translate task
                                     * at about 30 minutes on 2 cores (NULL: none) */
    int no_attention;          /* 1: the model has no attention weights (--plot refused, no maps drawn) */
    /* 1: the sources are images the chapter's own flags choose (chapter 07's
     * captions): --task, --n-train, --min-len, --max-len, --translate and
     * --plot are refused, and the chapter loads its data itself. */
    int image_sources;
} Seq2SeqProgram;

/* The flags of every seq2seq program (seq2seq_init sets the defaults). */
typedef struct {
    TrainFlags shared;             /* the training flags every program shares (train/flags.h) */
    const char *task;              /* --task: dates, reverse, g2p or translate */
    int n_train, min_len, max_len; /* --n-train, --min-len, --max-len (0: the task's default) */
    int beam;                      /* --beam: beam width of the decoding (1: greedy) */
    int samples;                   /* --samples: sample predictions printed */
    int max_eval;                  /* --max-eval: test examples evaluated (0: all) */
    const char *translate;         /* --translate: with --load, decode this text */
    int plot;                      /* --plot: with --translate, draw its attention */
} Seq2SeqFlags;

/* The test split's scores: over all of it and by source length. */
#define SEQ2SEQ_LEN_BUCKETS 6
#define SEQ2SEQ_TEXT_MAX 8192   /* the longest decoded text kept (a verse is at most about 1 KB) */
typedef struct {
    Scores all;
    Scores by_len[SEQ2SEQ_LEN_BUCKETS];   /* equal-width buckets of source lengths */
    int bucket_lo[SEQ2SEQ_LEN_BUCKETS], bucket_hi[SEQ2SEQ_LEN_BUCKETS];
    int n_buckets;
    double seconds;
    /* translate: corpus BLEU over all and by the source's English words, and
     * each decoded example's text [n_outputs] (translations.tsv) */
    int has_bleu;
    BleuByLength bleu;
    char **outputs;
    int n_outputs;
} Seq2SeqScores;

/* One run of a program: what the calls above share. */
typedef struct {
    const Seq2SeqProgram *program;
    Seq2SeqFlags flags;
    char out_dir[OUT_DIR_MAX + 1]; /* where its files go (seq2seq_parse_flags) */
    char *config;                  /* the configuration text the checkpoint keeps [CKPT_CONFIG_MAX] */
    Dataset data;
    Seq2Seq model;                 /* built by the chapter; seq2seq_finish destroys it */
    TrainLog log;                  /* the training's loss curve and figures */
    Seq2SeqScores scores;          /* the test split's (seq2seq_evaluate) */
    Results results;               /* results.json's keys (seq2seq_evaluate; a chapter may add its own) */
    char **preset_argv;            /* (--preset long: the flags' text) */
} Seq2SeqRun;

/* The shared flags' defaults into run->flags: --task dates, --batch 64,
 * --seed 42, --beam 1, --samples 8, and the training loop's TRAIN_DEFAULTS
 * (1000 steps, lr 3e-3, warm-up 100, clip 1, validation every 250 steps).
 * A chapter changes a default in its main, after this call. */
void seq2seq_init(Seq2SeqRun *run, const Seq2SeqProgram *program);

/* Parse argv: the chapter's own flags own[0..n_own) (destinations in its
 * model's config struct), then the shared ones; --preset long first puts
 * program->preset_long in front of the user's flags. Checks what goes
 * together (--translate needs --load, ...; with --load only the flags that
 * still act), selects the backend and threads, and sets run->out_dir
 * (training: --out, checked writable now; --load: an eval_* directory).
 * Returns 0; 1 after printing --help; -1 with fail(). */
int seq2seq_parse_flags(Seq2SeqRun *run, int argc, char **argv, const ArgSpec *own, int n_own);

/* The data set of the flags' task (--task, --n-train, --min-len,
 * --max-len), and the first lines of run->config: the task's (task=,
 * data_seed=, sizes, vocabulary sizes).
 * With --load: run->config is the checkpoint's text (its model= checked),
 * and the data set the task it names (its vocabulary sizes checked).
 * Returns 0 or -1 with fail(). */
int seq2seq_load_data(Seq2SeqRun *run);

/* seq2seq_load_data's parts, for a chapter that loads its own data (image
 * sources): with --load, run->config gets the checkpoint's text, its model=
 * line checked; and the data set's vocabulary sizes checked against the
 * text's src_vocab_size= and tgt_vocab_size=. Return 0 or -1 with fail(). */
int seq2seq_saved_config(Seq2SeqRun *run);
int seq2seq_check_vocab_sizes(const Seq2SeqRun *run);

/* The model's configuration struct cfg and run->config, through its table
 * of fields (io/config.h): training, model=<program->model_name> and cfg's
 * lines are appended to the text (config_write); with --load, cfg is read
 * from it (config_read). Returns 0 or -1 with fail() naming the key. */
int seq2seq_model_config(Seq2SeqRun *run, const ConfigField *fields, int n_fields, void *cfg);

/* The batch a model must be built for: --batch, or --beam's hypotheses
 * when there are more. */
int seq2seq_max_batch(const Seq2SeqRun *run);

/* With --load, after the model is built: the checkpoint's weights into it;
 * then with --translate, the decoded text (and with --plot its attention
 * map, out_dir/translate_attention.png). Returns 1 when it translated (the
 * program is done), 0 to go on and evaluate, -1 with fail(). */
int seq2seq_use_saved(Seq2SeqRun *run);

/* Train run->model on the training split: run->flags.shared.train's steps, each a
 * batch of --batch examples in a shuffled order (reshuffled when a batch
 * would pass the end), the validation loss on up to 1000 validation
 * examples every --eval-every steps; the curve into run->log. Prints the
 * run's line first. Without steps, nothing is trained. Returns 0, or -1
 * with fail() when the training diverged (nothing is to be saved then). */
int seq2seq_train(Seq2SeqRun *run);

/* Decode the test split (up to --max-eval examples, greedy or --beam) and
 * score it into run->scores; print the results table and --samples sample
 * predictions; fill run->results with results.json's keys. With --load, the
 * run's line first (seq2seq_train prints it when training). Returns 0 or -1. */
int seq2seq_evaluate(Seq2SeqRun *run);

/* Into run->out_dir: model.ckpt (run->config and the weights; not with
 * --load), loss.png (after training), acc_by_len.png, attention maps of
 * three test inputs (token sources, a model with attention), results.json.
 * Returns 0 or -1 with fail(). */
int seq2seq_write_outputs(Seq2SeqRun *run);

/* Free what the run holds (the model too). rc: what the calls returned (-1:
 * the error fail() recorded is printed as "<chapter>: error: ..."). Returns
 * the exit code, 0 or 1, checked that standard output was written
 * (util/output.h). */
int seq2seq_finish(Seq2SeqRun *run, int rc);

#endif
