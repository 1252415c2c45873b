/* gpt_run.h - chapter 06's GPT driver: the calls build/06_gpt
 * (main_gpt.c) makes from its main, in this order:
 *
 *   gpt_run_init            the run's defaults (GptFlags; main sets the GPT's training defaults)
 *   gpt_run_parse_flags     the model's flags (main_gpt.c's table, into GptModelFlags), then the run's
 *   gpt_run_load_corpus     the Brown corpus in the view --tokens names and the counting baselines
 *                           on its split (with --load: the checkpoint's config, and the corpus it
 *                           was trained on, checked against it)
 *   gpt_run_build           the model's GptConfig and the text the checkpoint keeps (with --load:
 *                           the checkpoint's), the memory it needs checked, gpt_create
 *   gpt_run_use_saved       with --load: the saved weights; --prompt continues the text (--plot:
 *                           and draws its attention), else the test figure; then done
 *   gpt_run_train           train_loop (train/loop.h) over batches of random windows
 *   gpt_run_evaluate        the final figures beside the baselines; the experts' report (moe_report.h)
 *   gpt_run_samples         text from three prompts; from a character model, the share of its
 *                           sampled words that occur in the training text (data/word_set.h)
 *   gpt_run_write_outputs   model.ckpt, results.json, loss.png
 *   gpt_run_finish          free everything, report an error; the exit code
 *
 * Each returns 0, or -1 with fail() (gpt_run_finish prints the message);
 * gpt_run_parse_flags and gpt_run_use_saved return 1 when the program is
 * done (--help printed; a saved model used). A main chains them:
 *
 *   int rc = gpt_run_parse_flags(&run, argc, argv, model_flags, n);
 *   if (rc == 0) rc = gpt_run_load_corpus(&run);
 *   ...
 *   return gpt_run_finish(&run, rc);
 *
 * The model is gpt.c (chapter 06's blocks in one causal stack); the data
 * and the split are common/data/brown.c, the baselines common/data/ngram.c. */
#ifndef GPT_RUN_H
#define GPT_RUN_H
#include "06_transformer/gpt.h"
#include "06_transformer/moe_report.h"
#include "data/brown.h"
#include "io/args.h"
#include "io/results.h"
#include "train/flags.h"
#include "train/loop.h"

/* What the program is, for --help (no code). */
typedef struct {
    const char *summary;       /* --help's paragraph */
    const char *examples;      /* --help's example lines, '\n' between them */
    const char *preset_long;   /* the flags --preset long stands for */
} GptProgram;

/* The model's flags: main_gpt.c's table points into them, gpt_run_build
 * makes the GptConfig of them (not with --load: the checkpoint's). */
typedef struct {
    int layers, dim, heads, ff, context;        /* L, D, H, F, N */
    const char *norm, *norm_type, *mlp, *pos;   /* by name: post/pre; layernorm/rmsnorm/none;
                                                 * gelu/relu/swiglu/none/moe; learned/sinusoidal/rope */
    int experts, moe_top_k;                     /* --mlp moe: E experts, k per position */
    float moe_aux, capacity;                    /* --mlp moe: the balancing loss's alpha, the capacity factor */
    float dropout, attn_dropout;
    const char *sparse;                         /* "none", or part 5's pattern "P,w,g,r" (sparse_attention.h) */
} GptModelFlags;

/* The run's flags (gpt_run_init sets the defaults). */
typedef struct {
    TrainFlags shared;              /* the training flags every program shares (train/flags.h); --batch:
                                     * windows per step; --seed: weights, batches, sampling */
    const char *tokens, *data;      /* --tokens char, word or bpe; --data (NULL: data/brown.txt.gz) */
    int eval_tokens;                /* --eval-tokens: validation tokens of each check */
    int eval_stride, final_valid_tokens, eval_max_tokens;   /* the final figures (0: the view's default) */
    const char *prompt;
    int plot, no_kv_cache;
    float temperature;
    int top_k, max_new;             /* sampling (--max-new 0: the view's default) */
    float max_memory;               /* MiB this run may use (0: what the machine and ulimit -v allow) */
} GptFlags;

/* What the training loop's two calls work on (train/loop.h's Trainer). */
typedef struct {
    Gpt *g;
    const BrownPart *train;   /* the windows are drawn from it */
    int *tokens, *targets;    /* [B, N] the batch: windows and the tokens that follow each position */
    int B;
    Rng rng;                  /* which windows */
    MoeTrainingCounts moe;    /* --mlp moe: pairs dropped and chosen over training, the last aux loss */
    const int *valid;         /* the validation part: its first valid_n tokens are each check's */
    int valid_n;
    char checkpoint[1200];    /* --out/model.ckpt: the weights so far go beside it */
    char so_far[1300];        /* ... as model_so_far.ckpt, which --resume continues from */
} GptBatches;

/* The final figures: the validation and test parts (all of them; or the
 * first final_valid_tokens of the validation part; or the first
 * eval_max_tokens of both, for quick checks), windows moved by --eval-stride. */
typedef struct {
    int valid_n, test_n;
    double valid_nll, test_nll, seconds;   /* mean -ln p per predicted token (nats) */
    long valid_chars, test_chars;          /* the characters the predicted tokens spell (brown_chars) */
    double valid_tpc, test_tpc;            /* predicted tokens per such character (metric) */
} GptFigures;

/* One run of the program: what the calls above share. */
typedef struct {
    const GptProgram *program;
    GptFlags flags;
    GptModelFlags model;
    BrownCorpus corpus;
    Bpe saved_bpe;          /* --load, tokens=bpe: the checkpoint's merges */
    char *config;           /* the configuration text the checkpoint keeps (--load: the checkpoint's) */
    GptConfig cfg;
    Gpt *g;
    GptBatches batches;
    TrainLog log;           /* the training's loss curve and figures */
    double kn_test;         /* the Kneser-Ney trigram's test figure (the baselines) */
    GptFigures figures;     /* the final figures (gpt_run_evaluate) */
    Results results;        /* results.json's keys */
    char **preset_argv;     /* (--preset long: the flags' text) */
} GptRun;

/* The run's defaults into run: --tokens char, --batch 16, --seed 42,
 * --eval-tokens 20000, sampling at temperature 0.8 among the top 40, and
 * the training loop's TRAIN_DEFAULTS. main sets the model's defaults, and
 * the training's where the GPT's differ, after this call. */
void gpt_run_init(GptRun *run, const GptProgram *program);

/* Parse argv: --tokens and --data, the model's flags own[0..n_own)
 * (destinations in run->model), then the run's, the order --help lists
 * them in; --preset long first puts program->preset_long in front of the
 * user's flags. Checks what goes together (--prompt needs --load, the
 * experts' flags --mlp moe, ...; with --load only the flags that still
 * act), selects the backend and threads, and for a training run fills the
 * defaults that depend on the view (--eval-stride, --max-new ...) and
 * checks --out writable. Returns 0; 1 after printing --help; -1 with fail(). */
int gpt_run_parse_flags(GptRun *run, int argc, char **argv, const ArgSpec *own, int n_own);

/* The corpus in the view of --tokens, its sizes printed, and the unigram
 * and Kneser-Ney trigram baselines on its split (printed, into results).
 * With --load: the checkpoint's config text and GptConfig, and the corpus
 * its tokens= names (for BPE the same number of merges learned again),
 * checked against the checkpoint (the merges, V, vocab_crc), nothing
 * printed. Returns 0 or -1 with fail() naming the files. */
int gpt_run_load_corpus(GptRun *run);

/* The GptConfig of run->model and its checkpoint text (model=gpt,
 * GPT_CONFIG_FIELDS, tokens=, vocab_crc=, for BPE the merges), or with
 * --load the checkpoint's; the memory it asks for checked (--max-memory);
 * the model created (seed --seed) and its line printed. Returns 0 or -1. */
int gpt_run_build(GptRun *run);

/* With --load, after gpt_run_build: the checkpoint's weights; with
 * --prompt, the prompt's tokens and its continuation (--plot: each layer's
 * and head's attention over it, eval_<checkpoint>/prompt_attention.png);
 * without, the test figure into eval_<checkpoint>/results.json. Returns 1
 * (the program is done), or -1 with fail(). */
int gpt_run_use_saved(GptRun *run);

/* Train run->g: --steps batches of --batch random windows of the training
 * part, a validation check on --eval-tokens tokens every --eval-every steps
 * (and the weights so far beside --out/model.ckpt); the curve into
 * run->log. Returns 0, or -1 with fail() when it diverged. */
int gpt_run_train(GptRun *run);

/* The final figures on the validation and test parts (run->figures),
 * printed beside the Kneser-Ney trigram's; with --mlp moe the experts'
 * report (report_experts, expert_usage). Returns 0 or -1. */
int gpt_run_evaluate(GptRun *run);

/* Text sampled from three prompts; from a character model, how many of
 * its sampled words occur in the training text (into results). Returns 0. */
int gpt_run_samples(GptRun *run);

/* Into --out: model.ckpt (the weights so far removed), loss.png (or its
 * gnuplot script), results.json. Returns 0 or -1 with fail(). */
int gpt_run_write_outputs(GptRun *run);

/* Free what the run holds. rc: what the calls returned (-1: the error
 * fail() recorded is printed as "06_gpt: error: ..."). Returns the exit
 * code, 0 or 1, checked that standard output was written (util/output.h). */
int gpt_run_finish(GptRun *run, int rc);

#endif
