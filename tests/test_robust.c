/* test_robust.c - nothing a user saved is lost, and a run that goes wrong
 * says so (issue "Robustness"):
 *  - non-finite training: grads_check_finite names the first tensor whose
 *    gradient is NaN or infinite; classifier_train with an absurd learning
 *    rate stops with one message naming the step and the tensor, and makes
 *    no update with the bad gradient (every parameter is still finite);
 *    each training driver's whole program (the classifier driver's calls
 *    in chapter 04's order with its model, the seq2seq driver's calls with
 *    chapter 06's transformer), run at that
 *    rate over a good run's output directory, exits 1 with that message and
 *    leaves the good run's checkpoint as it was;
 *  - long data: a dictionary entry longer than chapter 01's --translate
 *    buffers (a 600-letter word, a 600-phoneme pronunciation) is refused
 *    with one line naming the file, the line and the limit, where it
 *    overflowed int ids[512] of the seq2seq driver;
 *  - failing disks: checkpoints, results, plots and PGM images written to
 *    /dev/full (no space left) or into a read-only directory give one clear
 *    error naming the path, and leave the previous files as they were (no
 *    temporary file left behind either); /dev/full stays a device; a file
 *    cut short by the file-size limit (a disk that fills up mid-write) too;
 *    chapters 01 and 04's programs into a read-only directory exit 1 with
 *    one line naming the file and keep the earlier run's checkpoint;
 *  - kills: a process saving checkpoints in a loop is killed with SIGKILL at
 *    random moments; each time, the checkpoint on disk still loads and holds
 *    one of the two complete sets of values that were saved;
 *  - where outputs go (issue "a hostile user"): a --out too long for the
 *    path buffers is refused before anything is written, never cut (a cut
 *    path wrote into its parent, over another run's checkpoint), and one of
 *    OUT_DIR_MAX characters gets every file whole; an --out that cannot be
 *    written is refused before training; a file-size limit (ulimit -f) is an
 *    error with a message, not a SIGXFSZ death; SIGINT/SIGTERM during a save
 *    and a killed writer's next save leave no "*.tmp.<pid>"; a PNG replaces
 *    the earlier one only when complete; a run into another configuration's
 *    --out says so.
 * Chapter determinism (byte-identical checkpoints) is test_robust_determinism.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "04_self_attention/digit_model.h"
#include "06_transformer/transformer.h"
#include "data/brown.h"
#include "data/dataset.h"
#include "data/digit_tasks.h"
#include "io/checkpoint.h"
#include "io/pgm.h"
#include "io/plot.h"
#include "io/results.h"
#include "program_run.h"
#include "temp_dir.h"
#include "train/classifier.h"
#include "train/finite.h"
#include "train/seq2seq.h"
#include "util/error.h"
#include "util/util.h"

#include <cmocka.h>

static char tmp_dir[256];   /* this suite's files (setup, teardown) */

/* ------------------------------------------------------ non-finite training */

/* A Params of three tensors a [2,3], b [4], c [5] with finite gradients. */
static void three_tensors(Params *p) {
    params_init(p);
    params_add(p, "a", 2, (int[]){2, 3});
    params_add(p, "b", 1, (int[]){4});
    params_add(p, "c", 1, (int[]){5});
    assert_int_equal(params_alloc(p), 0);
    for (size_t i = 0; i < p->size; i++) {
        p->data[i] = (float)i;
        p->grad[i] = 0.5f * (float)i;
    }
}

static void test_check_finite_names_the_tensor(void **state) {
    (void)state;
    Params p;
    three_tensors(&p);
    assert_int_equal(grads_check_finite(&p, 1.5), 0);

    p.grad[6 + 2] = NAN;             /* b[2] */
    p.grad[6 + 4 + 1] = INFINITY;    /* c[1]: later in the table, so b is named */
    assert_int_equal(grads_check_finite(&p, 1.5), -1);
    assert_non_null(strstr(last_error(), "'b' (tensor 2 of 3)"));
    assert_non_null(strstr(last_error(), "nan at element 2"));

    p.grad[6 + 2] = 0.0f;
    assert_int_equal(grads_check_finite(&p, 1.5), -1);
    assert_non_null(strstr(last_error(), "'c' (tensor 3 of 3)"));
    assert_non_null(strstr(last_error(), "inf at element 1"));

    p.grad[6 + 4 + 1] = 0.0f;       /* gradients finite, the loss not */
    assert_int_equal(grads_check_finite(&p, NAN), -1);
    assert_non_null(strstr(last_error(), "the loss is nan"));
    params_free(&p);
}

/* Chapter 04's model on the reverse task, trained with Adam at lr 1e30: the
 * weights blow up within a few steps and training must stop, naming the
 * step and the tensor, without having applied the bad gradient. */
static void test_absurd_learning_rate_stops_training(void **state) {
    (void)state;
    enum { N = 6, B = 8 };
    const DigitConfig c = {.N = N, .D = 16, .F = 32, .L = 2, .C = digit_task_classes(TASK_REVERSE, N),
                           .pos = POS_LEARNED};
    Classifier m;
    assert_int_equal(digit_model_build(&m, &c, B, 1), 0);
    DigitTaskSpec spec = {TASK_REVERSE, N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    ClassifierResult r;
    memset(&r, 0, sizeof r);
    clear_error();
    TrainOptions o = TRAIN_DEFAULTS;
    o.steps = 200;
    o.lr = 1e30f;
    o.quiet = 1;
    int rc = classifier_train(&m, &t, &o, B, 1, NULL, &r);
    train_log_free(&r.log);
    if (rc != -1) print_error("classifier_train at lr 1e30 returned %d (message '%s')\n", rc, last_error());
    assert_int_equal(rc, -1);
    const char *msg = last_error();
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "training diverged at step "));
    assert_true(strstr(msg, "the gradient of '") != NULL || strstr(msg, "the loss is ") != NULL);
    assert_non_null(strstr(msg, "--lr"));
    assert_null(strchr(msg, '\n'));                       /* one line */
    for (size_t i = 0; i < m.params->size; i++) assert_true(isfinite(m.params->data[i]));
    m.destroy(m.self);
}

/* The same through the seq2seq driver (train/seq2seq.h, the calls of
 * chapters 01-03's and 06's main.c) with chapter 06's transformer, small. A
 * good run first, then lr 1e30 (set before the flags are parsed: --lr stops
 * at 1). (The RNNs of chapters 01-03 at that rate do not reach a NaN: tanh
 * and the gates saturate, the clipped gradients stay finite, and the loss
 * grows huge but finite, which is not what this check is about.) Returns
 * the exit code. */
static int small_transformer_program(int argc, char **argv, int steps, float lr) {
    static const Seq2SeqProgram program = {.chapter = "robust_seq2seq", .model_name = "transformer", .summary = ""};
    TransformerConfig cfg = {
        .layers = 1,
        .block = {.D = 8, .H = 2, .F = 16, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                  .mlp = BLOCK_MLP_GELU},
        .pos = POSITIONS_SINUSOIDAL,
        .kv_cache = 1,
    };
    Seq2SeqRun run;
    seq2seq_init(&run, &program);
    run.flags.shared.train.steps = steps;
    run.flags.shared.train.lr = lr;
    run.flags.shared.batch = 8;
    int rc = seq2seq_parse_flags(&run, argc, argv, NULL, 0);
    if (rc == 0) rc = seq2seq_load_data(&run);
    if (rc == 0) rc = seq2seq_model_config(&run, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &cfg);
    if (rc == 0) rc = transformer_build(&run.model, &run.data, &cfg, seq2seq_max_batch(&run), 42);
    if (rc == 0 && run.flags.shared.load) rc = seq2seq_use_saved(&run);
    if (rc == 0 && !run.flags.shared.load) rc = seq2seq_train(&run);
    if (rc == 0) rc = seq2seq_evaluate(&run);
    if (rc == 0) rc = seq2seq_write_outputs(&run);
    return seq2seq_finish(&run, rc);
}

static void test_diverged_seq2seq_program_keeps_the_last_checkpoint(void **state) {
    (void)state;
    char out[400], ckpt[500];
    snprintf(out, sizeof out, "%s/diverge_seq2seq", tmp_dir);
    snprintf(ckpt, sizeof ckpt, "%s/model.ckpt", out);
    char *argv[] = {"robust_seq2seq", "--out", out, "--quiet", "--n-train", "100", "--max-eval", "5",
                    "--samples", "0", NULL};
    assert_int_equal(small_transformer_program(10, argv, 5, 3e-3f), 0);
    size_t good_len;
    char *good = read_whole_file(ckpt, &good_len);
    assert_non_null(good);

    clear_error();
    int rc = small_transformer_program(10, argv, 300, 1e30f);
    print_message("seq2seq at lr 1e30: exit %d, %s\n", rc, last_error());
    assert_int_equal(rc, 1);
    assert_non_null(strstr(last_error(), "training diverged at step "));
    size_t len;
    char *now = read_whole_file(ckpt, &len);
    assert_non_null(now);
    assert_int_equal(len, good_len);
    assert_memory_equal(now, good, len);
    free(now);
    free(good);
}

/* A checkpoint's data_seed that is not a number was read as 0 (another
 * data set, silently); now refused (tests/fuzz/checkpoint/regression-data-seed-not-a-number.ckpt). */
static void test_config_data_seed_must_be_a_number(void **state) {
    (void)state;
    TaskConfig tc;
    char task[32];
    const char *good = "task=dates\ndata_seed=1234\nn_train=50\nn_valid=10\nn_test=10\n";
    assert_int_equal(task_from_config(&tc, good, task, sizeof task), 0);
    assert_true(tc.seed == 1234);
    const char *bad[3] = {"task=dates\ndata_seed=12x4\nn_train=50\nn_valid=10\nn_test=10\n",
                          "task=dates\ndata_seed=abc\nn_train=50\nn_valid=10\nn_test=10\n",
                          "task=dates\ndata_seed=-1\nn_train=50\nn_valid=10\nn_test=10\n"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(task_from_config(&tc, bad[i], task, sizeof task), -1);
        assert_non_null(strstr(last_error(), "data_seed"));
    }
}

/* A NUL byte in the Brown corpus ended its line early: the words after it
 * were dropped without a word (tests/fuzz/brown/regression-nul-byte). */
static void test_brown_refuses_a_nul_byte(void **state) {
    (void)state;
    char path[400];
    snprintf(path, sizeof path, "%s/brown_nul.txt.gz", tmp_dir);
    const char text[] = "# ca01\n\nThe/at jury/nn said/vbd ./.\nIt/pps was/bedz \0 late/jj ./.\n";
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, text, sizeof text - 1), (int)(sizeof text - 1));
    assert_int_equal(gzclose(gz), Z_OK);
    BrownConfig cfg;
    brown_defaults(&cfg, BROWN_WORDS);
    cfg.path = path;
    cfg.n_train = 4;
    cfg.n_valid = 2;
    cfg.max_rare = 0;
    BrownCorpus c;
    assert_int_equal(brown_load_config(&c, &cfg), -1);
    assert_non_null(strstr(last_error(), "line 4: contains a NUL byte"));
    brown_free(&c);
}

/* A dictionary entry longer than the --translate path's fixed buffers (int
 * ids[512], out_ids[512] of the seq2seq driver) overflowed them: a data file with
 * a word of 600 letters and a pronunciation of 600 phonemes, then chapter
 * 01's program with --load of a g2p checkpoint and --translate of a 600-letter
 * word (the checkpoint holds no lengths, so it still loads). Now the
 * dictionary is refused with one line naming the file, the line and the
 * limit, and the buffers are sized by the data. Run in a scratch working
 * directory: g2p reads data/cmudict.dict.gz from there. */
static int small_rnn_program(int argc, char **argv) {
    static const Seq2SeqProgram program = {.chapter = "robust_g2p", .model_name = "rnn_seq2seq", .summary = "",
                                           .no_attention = 1};
    RnnConfig cfg = {.cell = CELL_GRU, .D_E = 8, .S = 8};
    Seq2SeqRun run;
    seq2seq_init(&run, &program);
    run.flags.shared.train.steps = 1;
    run.flags.shared.batch = 4;
    int rc = seq2seq_parse_flags(&run, argc, argv, NULL, 0);
    if (rc == 0) rc = seq2seq_load_data(&run);
    if (rc == 0) rc = seq2seq_model_config(&run, RNN_CONFIG_FIELDS, RNN_CONFIG_N, &cfg);
    if (rc == 0) rc = rnn_seq2seq_build(&run.model, &run.data, &cfg, seq2seq_max_batch(&run), 42);
    if (rc == 0 && run.flags.shared.load) rc = seq2seq_use_saved(&run);
    if (rc == 0 && !run.flags.shared.load) rc = seq2seq_train(&run);
    if (rc == 0) rc = seq2seq_evaluate(&run);
    if (rc == 0) rc = seq2seq_write_outputs(&run);
    return seq2seq_finish(&run, rc);
}

static void write_g2p_dictionary(const char *path, const char *extra_lines) {
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    for (int i = 0; i < 100; i++)                 /* 100 short words: every split has some */
        gzprintf(gz, "%c%cAT  K AE1 T\n", 'A' + i % 26, 'A' + i / 26);
    gzputs(gz, extra_lines);
    assert_int_equal(gzclose(gz), Z_OK);
}

static void test_long_dictionary_entry_is_refused(void **state) {
    (void)state;
    char cwd[1024], dir[600], out[700], ckpt[800], long_word[601];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(dir, sizeof dir, "%s/g2p_long", tmp_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(mkdir("data", 0755), 0);
    write_g2p_dictionary("data/cmudict.dict.gz", "");
    snprintf(out, sizeof out, "%s/model", dir);
    char *train_argv[] = {"robust_g2p", "--task", "g2p", "--out", out, "--quiet", "--samples", "0",
                          "--max-eval", "4", NULL};
    if (small_rnn_program(10, train_argv) != 0) print_error("training on the small dictionary: %s\n", last_error());
    snprintf(ckpt, sizeof ckpt, "%s/model.ckpt", out);
    assert_int_equal(access(ckpt, F_OK), 0);

    /* the dictionary grows an entry of 600 letters and one of 600 phonemes */
    memset(long_word, 'A', 600);
    long_word[600] = '\0';
    size_t cap = 600 * 4 + 1000;
    char *extra = malloc(cap);
    assert_non_null(extra);
    int n = snprintf(extra, cap, "%s  AH0\nLONG ", long_word);
    for (int i = 0; i < 600; i++) n += snprintf(extra + n, cap - (size_t)n, " AH0");
    snprintf(extra + n, cap - (size_t)n, "\n");
    write_g2p_dictionary("data/cmudict.dict.gz", extra);
    free(extra);
    snprintf(out, sizeof out, "%s/translate", dir);
    char *translate_argv[] = {"robust_g2p", "--load", ckpt, "--translate", long_word, "--out", out, NULL};
    clear_error();
    int rc = small_rnn_program(7, translate_argv);
    print_message("--load --translate with a 600-letter entry: exit %d, %s\n", rc, last_error());
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(last_error(), "data/cmudict.dict.gz line 101"));
    assert_non_null(strstr(last_error(), "600 characters"));
    assert_non_null(strstr(last_error(), "at most 100"));
    assert_null(strchr(last_error(), '\n'));              /* one line */
}

/* ---------------------------------------------------------- failing disks */

/* A program of the classifier driver's calls, in the order of chapter 04's
 * main (flags, the run, train, test, save, report, results.json): one small
 * run of chapter 04's model on the reverse task into out, at learning rate
 * lr for steps steps. (The programs' --lr flag stops at 1, so the absurd
 * rate comes in as the default.) Returns the exit code. */
static int small_program(const char *out, float lr, int steps) {
    static const ClassifierProgram program = {.chapter = "robust_test", .model_name = DIGIT_MODEL_NAME,
                                              .summary = ""};
    static ClassifierRuns runs;
    classifier_init(&runs, &program);
    runs.flags.shared.train.steps = steps;
    runs.flags.shared.train.lr = lr;
    runs.flags.shared.train.warmup = 1;
    runs.flags.shared.train.eval_every = 1;
    runs.flags.shared.batch = 8;
    runs.flags.test_size = 10;
    char *argv[] = {"robust_test", "--out", (char *)out, "--quiet", NULL};
    int rc = classifier_parse_flags(&runs, 4, argv, NULL, 0);
    const DigitConfig c = {.N = 6, .D = 16, .F = 32, .L = 2, .C = digit_task_classes(TASK_REVERSE, 6),
                           .pos = POS_LEARNED};
    ClassifierRun *run = rc == 0 ? classifier_add_run(&runs, "reverse", "reverse") : NULL;
    if (rc == 0)
        rc = run ? classifier_config_text(run, DIGIT_MODEL_NAME, "reverse", DIGIT_CONFIG_FIELDS, DIGIT_CONFIG_N, &c,
                                          runs.flags.shared.seed) : -1;
    DigitTaskSpec spec = {TASK_REVERSE, 6};
    ExampleTask t;
    digit_example_task(&t, &spec);
    Classifier m;
    if (rc == 0) classifier_start(&runs);
    if (rc == 0 && (rc = digit_model_build(&m, &c, runs.flags.shared.batch, 1)) == 0) {
        rc = classifier_train(&m, &t, &runs.flags.shared.train, runs.flags.shared.batch, 1, NULL, &runs.result[0]);
        if (rc == 0) classifier_test(&runs, &m, &t, &runs.result[0]);
        if (rc == 0) rc = classifier_save(&runs, run, &m, &runs.result[0]);
        m.destroy(m.self);
    }
    if (rc == 0) rc = classifier_report(&runs);
    if (rc == 0) rc = classifier_write_results(&runs);
    return classifier_finish(&runs, rc);
}

/* The program trains once at a sane learning rate (its checkpoint is the
 * "last good" one), then again into the same directory at lr 1e30: the
 * second run must exit non-zero with the divergence message and leave the
 * first run's checkpoint byte for byte as it was. */
static void test_diverged_program_keeps_the_last_checkpoint(void **state) {
    (void)state;
    char out[400], ckpt[500];
    snprintf(out, sizeof out, "%s/diverge", tmp_dir);
    snprintf(ckpt, sizeof ckpt, "%s/model_reverse.ckpt", out);
    assert_int_equal(small_program(out, 3e-3f, 20), 0);
    size_t good_len;
    char *good = read_whole_file(ckpt, &good_len);
    assert_non_null(good);

    clear_error();
    assert_int_equal(small_program(out, 1e30f, 200), 1);
    assert_non_null(strstr(last_error(), "training diverged at step "));
    size_t len;
    char *now = read_whole_file(ckpt, &len);
    assert_non_null(now);
    assert_int_equal(len, good_len);
    assert_memory_equal(now, good, len);
    free(now);
    free(good);
}

static int setup(void **state) {
    (void)state;
    /* 0755, so "nobody" (test_read_only_directory_...) may enter it */
    if (temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_robust") != 0) return -1;
    return chmod(tmp_dir, 0755);
}

static int teardown(void **state) {
    (void)state;
    chmod(tmp_dir, 0755);
    return temp_dir_remove(tmp_dir);
}

/* A small checkpoint's Params: one tensor of n floats, value[i] = base + i. */
static void filled(Params *p, int n, float base) {
    params_init(p);
    params_add(p, "w", 1, (int[]){n});
    assert_int_equal(params_alloc(p), 0);
    for (int i = 0; i < n; i++) p->data[i] = base + (float)i;
}

static char *slurp(const char *path, size_t *len) {
    char *s = read_whole_file(path, len);
    assert_non_null(s);
    return s;
}

/* Files of dir whose name contains ".tmp." (a temporary left behind). */
static int temporaries_in(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static void test_dev_full_gives_one_clear_error(void **state) {
    (void)state;
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) skip();
    const char *no_space = strerror(ENOSPC);
    Params p;
    filled(&p, 3000, 1.0f);

    assert_int_equal(checkpoint_save("/dev/full", "model=x\n", &p), -1);
    assert_non_null(strstr(last_error(), "/dev/full"));
    assert_non_null(strstr(last_error(), no_space));

    Results res;
    results_init(&res);
    results_set_num(&res, "exact_match", 0.5);
    assert_int_equal(results_write(&res, "/dev/full"), -1);
    assert_non_null(strstr(last_error(), no_space));

    float px[4] = {0, 0.25f, 0.5f, 1};
    assert_int_equal(pgm_write("/dev/full", px, 2, 2), -1);
    assert_non_null(strstr(last_error(), no_space));
    assert_int_equal(write_file_atomic("/dev/full", "abc", 3), -1);
    assert_non_null(strstr(last_error(), no_space));

    /* still the device: never renamed over, never replaced by a plain file */
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    /* and /dev/null, also a device, takes the same writes without complaint */
    assert_int_equal(checkpoint_save("/dev/null", "model=x\n", &p), 0);
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    params_free(&p);
}

/* The files the write tests keep and compare: path and bytes. */
typedef struct {
    char path[600];
    char *bytes;
    size_t len;
} Kept;

static void keep(Kept *k, const char *dir, const char *name) {
    snprintf(k->path, sizeof k->path, "%s/%s", dir, name);
    k->bytes = slurp(k->path, &k->len);
}

static void assert_unchanged(const Kept *k) {
    size_t len;
    char *now = slurp(k->path, &len);
    assert_int_equal(len, k->len);
    assert_memory_equal(now, k->bytes, len);
    free(now);
}

/* Write a checkpoint, results.json, a plot and a PGM into dir. */
static void write_outputs(const char *dir, float base) {
    char path[600];
    Params p;
    filled(&p, 500, base);
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    assert_int_equal(checkpoint_save(path, "model=x\n", &p), 0);
    params_free(&p);
    Results res;
    results_init(&res);
    results_set_num(&res, "exact_match", base);
    snprintf(path, sizeof path, "%s/results.json", dir);
    assert_int_equal(results_write(&res, path), 0);
    float x[3] = {1, 2, 3}, y[3] = {base, 2, 1};
    const float *ys[1] = {y};
    const char *names[1] = {"loss"};
    snprintf(path, sizeof path, "%s/loss", dir);
    assert_int_equal(plot_lines(path, "loss", "step", "loss", x, ys, names, 1, 3, 0), 0);
    float px[4] = {0, 0.25f, 0.5f, base > 1 ? 1 : base};
    snprintf(path, sizeof path, "%s/picture.pgm", dir);
    assert_int_equal(pgm_write(path, px, 2, 2), 0);
}

/* In a child process (so the rights and limits it takes do not leak into
 * the other tests), try to overwrite the outputs of dir; exit 0 when every
 * write failed with one message naming its file and containing `reason`. */
static void child_overwrite_fails(const char *dir, const char *reason) {
    const char *names[4] = {"model.ckpt", "results.json", "loss.dat", "picture.pgm"};
    char path[600];
    Params p;
    params_init(&p);
    params_add(&p, "w", 1, (int[]){500});
    if (params_alloc(&p) != 0) _exit(10);
    for (int i = 0; i < 500; i++) p.data[i] = -1.0f;
    for (int k = 0; k < 4; k++) {
        clear_error();
        int rc;
        if (k == 0) {
            snprintf(path, sizeof path, "%s/model.ckpt", dir);
            rc = checkpoint_save(path, "model=x\n", &p);
        } else if (k == 1) {
            Results res;
            results_init(&res);
            results_set_num(&res, "exact_match", -1);
            snprintf(path, sizeof path, "%s/results.json", dir);
            rc = results_write(&res, path);
        } else if (k == 2) {
            float x[2] = {1, 2}, y[2] = {-1, -1};
            const float *ys[1] = {y};
            const char *series[1] = {"loss"};
            snprintf(path, sizeof path, "%s/loss", dir);
            rc = plot_lines(path, "loss", "step", "loss", x, ys, series, 1, 2, 0);
        } else {
            float px[4] = {1, 1, 1, 1};
            snprintf(path, sizeof path, "%s/picture.pgm", dir);
            rc = pgm_write(path, px, 2, 2);
        }
        if (rc != -1 || !strstr(last_error(), names[k]) || !strstr(last_error(), reason) ||
            strchr(last_error(), '\n')) {
            fprintf(stderr, "write %d (%s): rc %d, message '%s', expected one line naming it with '%s'\n", k,
                    names[k], rc, last_error(), reason);
            _exit(20 + k);
        }
    }
    _exit(0);
}

static void run_child(void (*prepare)(void), const char *dir, const char *reason) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prepare();
        child_overwrite_fails(dir, reason);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* root may write anywhere: become "nobody" to feel a read-only directory. */
static void drop_root(void) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
        fprintf(stderr, "cannot become nobody (uid 65534): %s\n", strerror(errno));
        _exit(30);
    }
}

static void test_read_only_directory_keeps_previous_files(void **state) {
    (void)state;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/readonly", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    write_outputs(dir, 0.5f);
    Kept kept[4];
    keep(&kept[0], dir, "model.ckpt");
    keep(&kept[1], dir, "results.json");
    keep(&kept[2], dir, "loss.dat");
    keep(&kept[3], dir, "picture.pgm");
    assert_int_equal(chmod(dir, 0555), 0);
    run_child(drop_root, dir, strerror(EACCES));
    assert_int_equal(chmod(dir, 0755), 0);
    for (int k = 0; k < 4; k++) {
        assert_unchanged(&kept[k]);
        free(kept[k].bytes);
    }
    assert_int_equal(temporaries_in(dir), 0);
}

/* The programs themselves: a chapter told to write into a read-only
 * directory that holds an earlier run's files exits 1 with one error line
 * naming a file there, and the earlier files are unchanged. (The programs
 * sit next to this test's binary: <build>/tests/test_robust.) */
static char build_dir[1024];

static void program_into_read_only_dir(const char *program, const char *args, const char *ckpt_name) {
    char dir[400], cmd[2048], log[500];
    snprintf(dir, sizeof dir, "%s/ro_%s", tmp_dir, program);
    snprintf(log, sizeof log, "%s/ro_%s.log", tmp_dir, program);
    snprintf(cmd, sizeof cmd, "%s/%s %s --quiet --threads 1 --out %s >%s 2>&1 </dev/null", build_dir, program, args,
             dir, log);
    assert_int_equal(system(cmd), 0);                 /* the earlier run, as the user */
    Kept k;
    keep(&k, dir, ckpt_name);
    assert_int_equal(chmod(dir, 0555), 0);
    assert_int_equal(write_file_atomic(log, "", 0), 0);
    assert_int_equal(chmod(log, 0666), 0);            /* so "nobody" may write its stderr there */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        drop_root();
        snprintf(cmd, sizeof cmd, "%s/%s %s --quiet --threads 1 --out %s >/dev/null 2>%s </dev/null", build_dir,
                 program, args, dir, log);
        int status = system(cmd);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(chmod(dir, 0755), 0);
    size_t len;
    char *err = read_whole_file(log, &len);
    assert_non_null(err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 || !strstr(err, dir) || !strstr(err, strerror(EACCES)))
        print_error("%s into a read-only directory: exit %d, stderr:\n%s\n", program,
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_non_null(strstr(err, dir));
    assert_non_null(strstr(err, strerror(EACCES)));
    int lines = 0;
    for (const char *c = err; *c; c++) lines += *c == '\n';
    assert_int_equal(lines, 1);
    free(err);
    assert_unchanged(&k);
    free(k.bytes);
    assert_int_equal(temporaries_in(dir), 0);
}

static void test_programs_into_a_read_only_directory(void **state) {
    (void)state;
    program_into_read_only_dir("01_rnn_seq2seq", "--steps 2 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0",
                               "model.ckpt");
    program_into_read_only_dir("04_self_attention",
                               "--task reverse --pos learned --steps 2 --dim 8 --ff 8 --layers 1 --batch 8 "
                               "--test-size 5",
                               "model_reverse_learned.ckpt");
}

/* A disk that fills up in the middle of a write: the file-size limit makes
 * every write past 1,000 bytes fail (EFBIG; SIGXFSZ ignored), the way ENOSPC
 * does on a full disk. */
static void small_file_limit(void) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1000, 1000};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(31);
}

static void test_disk_full_mid_write_keeps_previous_files(void **state) {
    (void)state;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/full", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    write_outputs(dir, 0.25f);
    /* results.json, loss.dat and picture.pgm are under 1,000 bytes: only the
     * checkpoint (2 KB) meets the limit, so check it alone. */
    Kept k;
    keep(&k, dir, "model.ckpt");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        small_file_limit();
        Params p;
        filled(&p, 500, -1.0f);
        char path[600];
        snprintf(path, sizeof path, "%s/model.ckpt", dir);
        int rc = checkpoint_save(path, "model=x\n", &p);
        _exit(rc == -1 && strstr(last_error(), "model.ckpt") && strstr(last_error(), strerror(EFBIG)) ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_unchanged(&k);
    free(k.bytes);
    assert_int_equal(temporaries_in(dir), 0);
}

/* ------------------------------------------------------------------ kills */

/* Kill a process that saves checkpoints A and B over one path in a loop, at
 * a random moment, KILLS times; after each kill the file must load and hold
 * all of A or all of B. */
static void test_sigkill_during_save_leaves_a_loadable_checkpoint(void **state) {
    (void)state;
    enum { KILLS = 30, COUNT = 100000 };   /* 400 KB: a save takes a few ms */
    char path[400];
    snprintf(path, sizeof path, "%s/killed.ckpt", tmp_dir);
    Params a, b, loaded;
    filled(&a, COUNT, 1.0f);
    filled(&b, COUNT, -7.0f);
    filled(&loaded, COUNT, 0.0f);
    assert_int_equal(checkpoint_save(path, "model=x\n", &a), 0);
    srand((unsigned)time(NULL));
    int saw_a = 0, saw_b = 0;
    for (int kill_no = 0; kill_no < KILLS; kill_no++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (long i = 0;; i++)
                if (checkpoint_save(path, "model=x\n", i % 2 ? &a : &b) != 0) _exit(1);
        }
        usleep((useconds_t)(1000 + rand() % 20000));    /* 1 to 21 ms: before, during, between saves */
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));               /* it was still saving, never failed */
        if (checkpoint_load(path, &loaded) != 0) print_error("after kill %d: %s\n", kill_no, last_error());
        assert_int_equal(checkpoint_load(path, &loaded), 0);
        int is_a = memcmp(loaded.data, a.data, sizeof(float) * COUNT) == 0;
        int is_b = memcmp(loaded.data, b.data, sizeof(float) * COUNT) == 0;
        assert_true(is_a || is_b);
        saw_a += is_a;
        saw_b += is_b;
        /* the killed writer's half-written temporary is all that is left over */
        char tmp[500];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
        unlink(tmp);
    }
    print_message("%d kills: the checkpoint held A %d times, B %d times\n", KILLS, saw_a, saw_b);
    assert_int_equal(saw_a + saw_b, KILLS);
    params_free(&a);
    params_free(&b);
    params_free(&loaded);
}

/* ------------------------------------------------------ where outputs go */

/* Every directory and file under root, one line each, sorted: the path
 * below root and, for a file, its size and CRC-32. skip (may be NULL): a
 * subtree left out. A snapshot to compare: "no file outside --out changed". */
typedef struct {
    char **lines;
    int n, cap;
} Lines;

static void lines_add(Lines *l, const char *text) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->lines = realloc(l->lines, sizeof(char *) * (size_t)l->cap);
        assert_non_null(l->lines);
    }
    l->lines[l->n] = strdup(text);
    assert_non_null(l->lines[l->n]);
    l->n++;
}

static void snapshot_walk(Lines *l, const char *path, size_t root_len, const char *skip) {
    DIR *d = opendir(path);
    assert_non_null(d);
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (strcmp(e->d_name, ".lock") == 0) continue;   /* a run's lock on its --out (out_dir_prepare) */
        char child[4096], line[4200];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        if (skip && strcmp(child, skip) == 0) continue;
        struct stat st;
        assert_int_equal(lstat(child, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            snprintf(line, sizeof line, "%s/", child + root_len);
            lines_add(l, line);
            snapshot_walk(l, child, root_len, skip);
        } else {
            size_t len = 0;
            char *bytes = read_whole_file(child, &len);
            assert_non_null(bytes);
            snprintf(line, sizeof line, "%s %zu %08lx", child + root_len, len,
                     crc32(0L, (const Bytef *)bytes, (uInt)len));
            free(bytes);
            lines_add(l, line);
        }
    }
    closedir(d);
}

static int compare_lines(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *tree_snapshot(const char *root, const char *skip) {
    Lines l = {0};
    snapshot_walk(&l, root, strlen(root), skip);
    if (l.n > 1) qsort(l.lines, (size_t)l.n, sizeof(char *), compare_lines);
    size_t total = 1;
    for (int i = 0; i < l.n; i++) total += strlen(l.lines[i]) + 1;
    char *text = calloc(total, 1);
    assert_non_null(text);
    for (int i = 0; i < l.n; i++) {
        strcat(text, l.lines[i]);
        strcat(text, "\n");
        free(l.lines[i]);
    }
    free(l.lines);
    return text;
}

/* base, then "/" and runs of `fill` (directories of at most 200 characters)
 * up to exactly len characters. */
static void long_path(char *out, size_t cap, const char *base, size_t len, char fill) {
    size_t n = (size_t)snprintf(out, cap, "%s", base);
    assert_true(len > n + 1 && len < cap);
    while (n < len) {
        size_t room = len - n - 1, piece = room > 200 ? 200 : room;   /* after the '/' */
        if (room - piece == 1) piece--;                                /* no empty last name */
        out[n++] = '/';
        memset(out + n, fill, piece);
        n += piece;
    }
    out[n] = '\0';
}

static RunResult run_result;   /* 48 KB: not on the stack */

/* A run that must be refused for its --out: exit 1, one line naming --out and
 * the limit, and nothing under root changed (not even --out created). */
static void expect_out_refused(const char *root, const char *program, const char *args, const char *out) {
    char *before = tree_snapshot(root, NULL);
    char cmd[4096], limit[16];
    snprintf(cmd, sizeof cmd, "%s --quiet --threads 1 --out %s", args, out);
    snprintf(limit, sizeof limit, "%d", OUT_DIR_MAX);
    program_run(&run_result, build_dir, program, cmd, tmp_dir);
    int ok = program_failed_cleanly(&run_result, "--out") && strstr(run_result.err, limit) != NULL;
    if (!ok)
        print_error("%s with a %zu-character --out: exit %d, stderr:\n%s\n(expected exit 1 and one line naming --out "
                    "and its limit %s)\n", program, strlen(out), run_result.code, run_result.err, limit);
    assert_true(ok);
    char *after = tree_snapshot(root, NULL);
    if (strcmp(before, after) != 0)
        print_error("%s with a %zu-character --out changed files outside it:\nbefore:\n%s\nafter:\n%s\n", program,
                    strlen(out), before, after);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

static const char *const QUICK_04 =
    "--task reverse --pos learned --steps 2 --dim 8 --ff 8 --layers 1 --batch 8 --test-size 5";
static const char *const QUICK_01 = "--steps 2 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0";
static const char *const QUICK_CAPTION =
    "--steps 1 --batch 4 --train-scenes 10 --valid-scenes 2 --test-scenes 2 --pictures 1";
static const char *const QUICK_GPT = "--layers 1 --dim 8 --heads 1 --ff 8 --context 8 --steps 1 --batch 2 "
                                     "--eval-tokens 20 --eval-max-tokens 50 --max-new 5";

/* A run stopped while it trains (Ctrl-C, SIGTERM, a time limit) keeps the
 * weights of its last curve point: the loop writes them beside the
 * checkpoint (model_so_far.ckpt) every --eval-every steps, and --load
 * evaluates them; a run that finishes writes model.ckpt and removes them.
 * (Before, the only checkpoint was written after training: a stopped run
 * left nothing.) Chapter 01's program, run on its own (a fork of this
 * process could not start OpenMP threads again). */
static void test_stopped_run_keeps_its_weights_so_far(void **state) {
    (void)state;
    char out[400], ckpt[500], so_far[500], cmd[2400], args[1200];
    snprintf(out, sizeof out, "%s/stopped", tmp_dir);
    snprintf(ckpt, sizeof ckpt, "%s/model.ckpt", out);
    snprintf(so_far, sizeof so_far, "%s/model_so_far.ckpt", out);
    const char *small = "--n-train 200 --state 16 --embed 8 --batch 16 --max-eval 20 --samples 0 --eval-every 5";
    snprintf(cmd, sizeof cmd, "exec %s/01_rnn_seq2seq %s --steps 1000000 --quiet --threads 1 --out %s "
             ">/dev/null 2>&1 </dev/null", build_dir, small, out);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {                                  /* a run that would not end */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct stat st;
    for (int i = 0; i < 1200 && stat(so_far, &st) != 0; i++) usleep(100000);   /* up to 2 minutes */
    usleep(200000);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));                /* stopped while training, not finished */
    assert_int_equal(temporaries_in(out), 0);
    assert_int_equal(stat(ckpt, &st), -1);           /* no final checkpoint: the run never ended */
    snprintf(args, sizeof args, "--load %s --translate \"1 May 2020\" --quiet --out %s/stopped_eval", so_far,
             tmp_dir);
    program_run(&run_result, build_dir, "01_rnn_seq2seq", args, tmp_dir);
    if (!run_result.exited || run_result.code != 0) print_error("--load of the weights so far: %s\n", run_result.err);
    assert_true(run_result.exited && run_result.code == 0);
    /* a new run into the same --out refuses to replace them; with --force it finishes: its
     * model.ckpt, and no weights so far left */
    snprintf(args, sizeof args, "%s --steps 10 --quiet --threads 1 --out %s", small, out);
    program_run(&run_result, build_dir, "01_rnn_seq2seq", args, tmp_dir);
    assert_true(program_failed_cleanly(&run_result, "add --force"));
    assert_int_equal(stat(so_far, &st), 0);
    snprintf(args, sizeof args, "%s --steps 10 --quiet --threads 1 --force --out %s", small, out);
    program_run(&run_result, build_dir, "01_rnn_seq2seq", args, tmp_dir);
    assert_true(run_result.exited && run_result.code == 0);
    assert_int_equal(stat(ckpt, &st), 0);
    assert_int_equal(stat(so_far, &st), -1);
}

/* A long --out was cut at a fixed width (%.900s, %.500s, a 1024-byte
 * buffer): chapter 04 with --out P/run2 under a 900-character P wrote its
 * checkpoint and pictures into P, over P's own model_*.ckpt; 07_caption with
 * a 1,000-character --out wrote into a directory named after its first 500
 * characters and exited 0; chapter 01 at 1,017 characters, 03's experiment at
 * 1,015 and 06_gpt at 1,017 cut file names or failed after training. Now each
 * is refused before anything is written, and a --out of OUT_DIR_MAX
 * characters gets every file whole, inside it. */
static void test_long_out_is_refused_never_cut(void **state) {
    (void)state;
    char root[600], parent[1100], out[1100];
    snprintf(root, sizeof root, "%s/long", tmp_dir);
    long_path(parent, sizeof parent, root, 900, 'p');
    assert_int_equal(make_dirs(parent), 0);
    /* an earlier run's files in P, which a cut path would overwrite */
    const char *names[] = {"model_reverse_learned.ckpt", "model.ckpt", "results.json", "loss.png",
                           "attn_reverse_learned_layer1.dat"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", parent, names[i]);
        assert_int_equal(write_file_atomic(path, "the earlier run's file\n", 23), 0);
    }
    long_path(out, sizeof out, parent, 905, 'r');                        /* P/rrrr */
    expect_out_refused(root, "04_self_attention", QUICK_04, out);
    expect_out_refused(root, "06_gpt", QUICK_GPT, out);
    long_path(out, sizeof out, parent, 1000, 'c');
    expect_out_refused(root, "07_caption", QUICK_CAPTION, out);
    long_path(out, sizeof out, parent, 1017, 's');
    expect_out_refused(root, "01_rnn_seq2seq", QUICK_01, out);
    expect_out_refused(root, "06_gpt", QUICK_GPT, out);
    long_path(out, sizeof out, parent, 1015, 'e');
    expect_out_refused(root, "03_dot_product_attention", "--scaling-experiment", out);

    /* the longest --out accepted: every file whole, inside it */
    char fit_root[600], fit[1100], ckpt[1200], args[4096];
    snprintf(fit_root, sizeof fit_root, "%s/fit", tmp_dir);
    long_path(fit, sizeof fit, fit_root, OUT_DIR_MAX, 'f');
    *strrchr(fit, '/') = '\0';
    assert_int_equal(make_dirs(fit), 0);             /* its parent, with nothing else in it */
    fit[strlen(fit)] = '/';
    char *before = tree_snapshot(fit_root, fit);
    snprintf(args, sizeof args, "%s --quiet --threads 1 --out %s", QUICK_04, fit);
    program_run(&run_result, build_dir, "04_self_attention", args, tmp_dir);
    if (run_result.code != 0) print_error("04 with a %d-character --out: %s\n", OUT_DIR_MAX, run_result.err);
    assert_int_equal(run_result.code, 0);
    snprintf(ckpt, sizeof ckpt, "%s/model_reverse_learned.ckpt", fit);
    Params loaded;
    params_init(&loaded);
    char *config = NULL;
    assert_int_equal(checkpoint_read_config(ckpt, &config), 0);
    free(config);
    snprintf(ckpt, sizeof ckpt, "%s/results.json", fit);
    assert_int_equal(access(ckpt, F_OK), 0);
    char *after = tree_snapshot(fit_root, fit);
    assert_string_equal(before, after);              /* nothing beside --out, only inside it */
    free(before);
    free(after);

    /* an evaluation (--load) into a --out too long: refused the same way */
    snprintf(ckpt, sizeof ckpt, "%s/model_reverse_learned.ckpt", fit);
    snprintf(args, sizeof args, "--load %s", ckpt);
    long_path(out, sizeof out, parent, 905, 'l');
    expect_out_refused(root, "04_self_attention", args, out);
}

/* Run "<program> <args> --out dir" as "nobody" (who cannot write into a
 * read-only dir); stdout and stderr into out_log and err_log (made writable
 * for it). Returns the exit code (-1: killed). */
static int run_as_nobody(const char *program, const char *args, const char *dir, const char *out_log,
                         const char *err_log) {
    assert_int_equal(write_file_atomic(out_log, "", 0), 0);
    assert_int_equal(write_file_atomic(err_log, "", 0), 0);
    assert_int_equal(chmod(out_log, 0666), 0);
    assert_int_equal(chmod(err_log, 0666), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        drop_root();
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s/%s %s --quiet --threads 1 --out %s >%s 2>%s </dev/null", build_dir, program,
                 args, dir, out_log, err_log);
        int status = system(cmd);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) && WEXITSTATUS(status) != 99 ? WEXITSTATUS(status) : -1;
}

/* An --out that cannot be written was found only when the results were
 * saved, after the training: the trained weights were lost. Now each
 * training driver (seq2seq_parse_flags, classifier_parse_flags, 06_gpt's) refuses it
 * before training: exit 1, one line naming the directory and the reason,
 * and nothing trained (no "trained ..." or "Training: ..." line). */
static void test_unwritable_out_is_refused_before_training(void **state) {
    (void)state;
    char dir[400], out_log[500], err_log[500];
    snprintf(dir, sizeof dir, "%s/locked", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    assert_int_equal(chmod(dir, 0555), 0);
    snprintf(out_log, sizeof out_log, "%s/locked.out", tmp_dir);
    snprintf(err_log, sizeof err_log, "%s/locked.err", tmp_dir);
    const char *programs[][2] = {{"01_rnn_seq2seq", QUICK_01}, {"04_self_attention", QUICK_04},
                                 {"06_gpt", QUICK_GPT}};
    for (int i = 0; i < 3; i++) {
        int code = run_as_nobody(programs[i][0], programs[i][1], dir, out_log, err_log);
        size_t len;
        char *out = read_whole_file(out_log, &len), *err = read_whole_file(err_log, &len);
        assert_non_null(out);
        assert_non_null(err);
        int lines = 0;
        for (const char *c = err; *c; c++) lines += *c == '\n';
        int ok = code == 1 && strstr(err, dir) && strstr(err, strerror(EACCES)) && lines == 1 &&
                 !strstr(out, "trained") && !strstr(out, "Training");
        if (!ok)
            print_error("%s into a read-only --out: exit %d\nstdout:\n%s\nstderr:\n%s\n(expected exit 1, one line "
                        "naming %s, before any training)\n", programs[i][0], code, out, err, dir);
        assert_true(ok);
        free(out);
        free(err);
    }
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(temporaries_in(dir), 0);
}

/* A file-size limit (ulimit -f) killed a save with SIGXFSZ: no message, exit
 * 153, and <ckpt>.tmp.<pid> left behind. SIGXFSZ is ignored now, so the
 * write fails with EFBIG: exit 1, one line naming the file, no temporary. */
static void test_file_size_limit_fails_with_a_message(void **state) {
    (void)state;
    char dir[400], err_log[500], cmd[4096];
    snprintf(dir, sizeof dir, "%s/fsize", tmp_dir);
    snprintf(err_log, sizeof err_log, "%s/fsize.err", tmp_dir);
    /* 2 blocks: the checkpoint of a 32-wide RNN is bigger */
    snprintf(cmd, sizeof cmd,
             "ulimit -f 2; %s/01_rnn_seq2seq --steps 2 --state 32 --embed 16 --n-train 50 --max-eval 5 --samples 0 "
             "--quiet --threads 1 --out %s >/dev/null 2>%s </dev/null", build_dir, dir, err_log);
    int status = system(cmd);
    size_t len;
    char *err = read_whole_file(err_log, &len);
    assert_non_null(err);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int ok = code == 1 && strstr(err, "model.ckpt") && strstr(err, strerror(EFBIG));
    if (!ok) print_error("under ulimit -f 2: exit %d, stderr:\n%s\n", code, err);
    assert_true(ok);
    free(err);
    assert_int_equal(temporaries_in(dir), 0);
}

/* Ctrl-C or a kill (SIGINT, SIGTERM) in the middle of a save left its
 * "<file>.tmp.<pid>" behind. A writer stopped by the signal between creating
 * its temporary and renaming it leaves nothing now, and still dies of that
 * signal (as the shell and the user expect). */
static void test_signal_during_save_removes_its_temporary(void **state) {
    (void)state;
    char dir[400], path[500];
    snprintf(dir, sizeof dir, "%s/signals", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    assert_int_equal(write_file_atomic(path, "the earlier checkpoint", 22), 0);
    const int signals[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            AtomicFile af;
            if (atomic_open(&af, path) != 0) _exit(10);
            fputs("half a checkpoint", af.f);
            fflush(af.f);
            if (access(af.tmp, F_OK) != 0) _exit(11);
            kill(getpid(), signals[i]);
            _exit(12);                               /* not reached: the signal ends the process */
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status)) print_error("the writer exited %d instead of dying of the signal\n",
                                              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), signals[i]);
        assert_int_equal(temporaries_in(dir), 0);
        size_t len;
        char *now = slurp(path, &len);
        assert_int_equal(len, 22);                   /* the earlier file, as it was */
        free(now);
    }
}

/* A SIGKILL cannot be caught: the next save of the same file removes the
 * temporary a dead writer left ("<file>.tmp.<pid>" of a pid that no longer
 * runs), and leaves a running process's, and other names, alone. */
static void test_next_save_removes_a_killed_writers_temporary(void **state) {
    (void)state;
    char dir[400], path[500], dead[600], alive[600], other[600], odd[600];
    snprintf(dir, sizeof dir, "%s/stale", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    fflush(NULL);
    pid_t pid = fork();                              /* a pid that ran and is gone */
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    snprintf(dead, sizeof dead, "%s.tmp.%ld", path, (long)pid);
    snprintf(alive, sizeof alive, "%s.tmp.%ld", path, (long)getppid());
    snprintf(other, sizeof other, "%s/loss.dat.tmp.%ld", dir, (long)pid);
    snprintf(odd, sizeof odd, "%s.tmp.12x", path);
    const char *files[4] = {dead, alive, other, odd};
    for (int i = 0; i < 4; i++) assert_int_equal(write_file_atomic(files[i], "left over", 9), 0);
    Params p;
    filled(&p, 10, 1.0f);
    assert_int_equal(checkpoint_save(path, "model=x\n", &p), 0);
    params_free(&p);
    assert_int_equal(access(dead, F_OK), -1);        /* the dead writer's: removed */
    assert_int_equal(access(alive, F_OK), 0);        /* a running process's: kept */
    assert_int_equal(access(other, F_OK), 0);        /* another file's: not this save's business */
    assert_int_equal(access(odd, F_OK), 0);
    for (int i = 1; i < 4; i++) unlink(files[i]);
}

/* gnuplot wrote each PNG in place: a full disk left a 0-byte (or cut)
 * picture over the earlier one. Now it draws into a temporary that is
 * renamed only when complete: under a file-size limit that the .dat and .gp
 * files fit and the picture does not, the earlier picture stays as it was and
 * no temporary is left. */
static void test_png_replaced_only_when_complete(void **state) {
    (void)state;
    if (!gnuplot_available()) skip();
    char dir[400], stem[500], png[600];
    snprintf(dir, sizeof dir, "%s/pictures", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    snprintf(stem, sizeof stem, "%s/loss", dir);
    snprintf(png, sizeof png, "%s.png", stem);
    float x[3] = {1, 2, 3}, y[3] = {3, 2, 1};
    const float *ys[1] = {y};
    const char *names[1] = {"loss"};
    assert_int_equal(plot_lines(stem, "loss", "step", "loss", x, ys, names, 1, 3, 0), 0);
    Kept k;
    keep(&k, dir, "loss.png");
    assert_true(k.len > 4000);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {3000, 3000};            /* the .dat and .gp fit, the picture does not */
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(31);
        int devnull = open("/dev/null", O_WRONLY);   /* the warning is expected */
        if (devnull >= 0) dup2(devnull, 2);
        y[0] = 7;
        _exit(plot_lines(stem, "loss", "step", "loss", x, ys, names, 1, 3, 0) == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);        /* the .dat and .gp were written */
    assert_unchanged(&k);                            /* the picture: the earlier one, whole */
    free(k.bytes);
    assert_int_equal(temporaries_in(dir), 0);
}

/* Two training runs into one --out mixed their files without a word (run A's
 * checkpoint beside run B's results.json). A run into a directory that holds
 * the results of a training run with another configuration says so in one
 * note on stdout; a run of the same configuration says nothing. */
static void test_second_run_into_one_out_is_noted(void **state) {
    (void)state;
    char dir[400], args[4096];
    snprintf(dir, sizeof dir, "%s/shared_out", tmp_dir);
    const char *dims[3] = {"8", "16", "16"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args,
                 "--task reverse --pos learned --steps 2 --dim %s --ff 8 --layers 1 --batch 8 --test-size 5 "
                 "--quiet --threads 1 --out %s", dims[i], dir);
        program_run(&run_result, build_dir, "04_self_attention", args, tmp_dir);
        assert_int_equal(run_result.code, 0);
        const char *note = strstr(run_result.out, "note: ");
        int notes = 0;
        for (const char *c = run_result.out; (c = strstr(c, "note: ")) != NULL; c++) notes++;
        if (i == 1 && (notes != 1 || !strstr(note, dir) || !strstr(note, "another configuration")))
            print_error("a run of --dim 16 over a run of --dim 8: expected one note naming %s, stdout:\n%s\n", dir,
                        run_result.out);
        if (i != 1 && notes != 0) print_error("run %d: an unexpected note:\n%s\n", i, run_result.out);
        assert_int_equal(notes, i == 1 ? 1 : 0);
    }
}

/* Two runs at once into one --out: the second is refused at the start with
 * one line naming the process that writes there (here the test itself holds
 * the directory, as a running program would), and writes nothing. */
static void test_concurrent_run_into_one_out_is_refused(void **state) {
    (void)state;
    char dir[400], args[1024];
    snprintf(dir, sizeof dir, "%s/busy_out", tmp_dir);
    assert_int_equal(out_dir_prepare("--out", dir), 0);
    assert_int_equal(out_dir_prepare("--out", dir), 0);       /* the same process again: not a second run */
    snprintf(args, sizeof args, "--task reverse --steps 2 --dim 8 --ff 8 --layers 1 --batch 8 --test-size 5 "
                                "--quiet --threads 1 --out %s", dir);
    program_run(&run_result, build_dir, "04_self_attention", args, tmp_dir);
    char pid[32];
    snprintf(pid, sizeof pid, "process %ld", (long)getpid());
    if (!program_failed_cleanly(&run_result, "another run") || !strstr(run_result.err, pid))
        print_error("a run into a directory another process holds: exit %d, stderr:\n%s\n", run_result.code,
                    run_result.err);
    assert_true(program_failed_cleanly(&run_result, "another run"));
    assert_non_null(strstr(run_result.err, pid));
    char *listing = tree_snapshot(dir, NULL);
    assert_string_equal(listing, "");                          /* nothing written (the lock file is hidden) */
    free(listing);
}

/* The two helpers under the above: path_format refuses (and empties) a path
 * that does not fit its buffer instead of cutting it; out_dir_prepare
 * refuses a directory longer than OUT_DIR_MAX without creating anything,
 * creates one that fits and leaves it empty, and names --out when a file is
 * in the way. */
static void test_path_helpers_refuse_never_cut(void **state) {
    (void)state;
    char buf[16];
    assert_int_equal(path_format(buf, sizeof buf, "%s/%s", "abc", "def"), 0);
    assert_string_equal(buf, "abc/def");
    assert_int_equal(path_format(buf, sizeof buf, "%s/%s", "abcdefgh", "ijklmnop"), -1);
    assert_string_equal(buf, "");
    assert_non_null(strstr(last_error(), "17 characters"));

    char base[400], dir[OUT_DIR_MAX + 100], limit[16];
    snprintf(base, sizeof base, "%s/prepare", tmp_dir);
    snprintf(limit, sizeof limit, "%d", OUT_DIR_MAX);
    long_path(dir, sizeof dir, base, OUT_DIR_MAX + 1, 'x');
    assert_int_equal(out_dir_prepare("--out", dir), -1);
    assert_non_null(strstr(last_error(), "--out"));
    assert_non_null(strstr(last_error(), limit));
    assert_int_equal(access(base, F_OK), -1);                /* nothing created */
    dir[OUT_DIR_MAX] = '\0';                                 /* exactly OUT_DIR_MAX */
    if (dir[OUT_DIR_MAX - 1] == '/') dir[OUT_DIR_MAX - 1] = 'x';
    assert_int_equal(out_dir_prepare("--out", dir), 0);
    char *listing = tree_snapshot(dir, NULL);
    assert_string_equal(listing, "");                        /* the probe file is gone */
    free(listing);
    char file[500];
    snprintf(file, sizeof file, "%s/a_file", tmp_dir);
    assert_int_equal(write_file_atomic(file, "x", 1), 0);
    assert_int_equal(out_dir_prepare("--out", file), -1);
    assert_non_null(strstr(last_error(), "--out"));
    assert_non_null(strstr(last_error(), "a file with that name exists"));
}

int main(int argc, char **argv) {
    (void)argc;
    /* argv[0] is <build>/tests/test_robust */
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    /* A suite started in the background by a non-interactive shell (nohup,
     * `cmd &`) inherits SIGINT ignored, and the library leaves an ignored
     * signal alone (write_signals_install): the signal tests need the
     * default action a program run from a terminal has. */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_finite_names_the_tensor),
        cmocka_unit_test(test_absurd_learning_rate_stops_training),
        cmocka_unit_test(test_diverged_program_keeps_the_last_checkpoint),
        cmocka_unit_test(test_diverged_seq2seq_program_keeps_the_last_checkpoint),
        cmocka_unit_test(test_stopped_run_keeps_its_weights_so_far),
        cmocka_unit_test(test_config_data_seed_must_be_a_number),
        cmocka_unit_test(test_brown_refuses_a_nul_byte),
        cmocka_unit_test(test_long_dictionary_entry_is_refused),
        cmocka_unit_test(test_dev_full_gives_one_clear_error),
        cmocka_unit_test(test_read_only_directory_keeps_previous_files),
        cmocka_unit_test(test_programs_into_a_read_only_directory),
        cmocka_unit_test(test_disk_full_mid_write_keeps_previous_files),
        cmocka_unit_test(test_sigkill_during_save_leaves_a_loadable_checkpoint),
        cmocka_unit_test(test_long_out_is_refused_never_cut),
        cmocka_unit_test(test_unwritable_out_is_refused_before_training),
        cmocka_unit_test(test_file_size_limit_fails_with_a_message),
        cmocka_unit_test(test_signal_during_save_removes_its_temporary),
        cmocka_unit_test(test_next_save_removes_a_killed_writers_temporary),
        cmocka_unit_test(test_png_replaced_only_when_complete),
        cmocka_unit_test(test_second_run_into_one_out_is_noted),
        cmocka_unit_test(test_concurrent_run_into_one_out_is_refused),
        cmocka_unit_test(test_path_helpers_refuse_never_cut),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
