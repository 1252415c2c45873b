/* test_hostile.c - what a careless or hostile user does with the files and
 * flags the programs read, and that each gets one clear error (exit 1) or
 * the right result, never a crash, a hang, a read without end or a silent
 * exit 0:
 *  - crashes and hangs: 07_caption --compose with indices past a 1-image
 *    test file; a CMUdict line of 8 MB; OMP_NUM_THREADS=99999999; a
 *    checkpoint or a corpus given as a FIFO with a writer (it was opened
 *    twice, and the second open waited for a writer forever);
 *  - inputs read without bound: /dev/zero and /dev/urandom as a checkpoint
 *    or an image, and gzip bombs as a checkpoint, a dictionary and a corpus,
 *    are refused after their first bytes or at a size limit (in a child under
 *    a time limit and, outside the sanitizer builds, a memory limit); a
 *    checkpoint piped in (--load /dev/stdin) loads; a bad file's bytes in a
 *    message are escaped (\xNN), never written to the terminal raw;
 *  - silently wrong: list flags with an empty item ("1,2,"); 06_gpt --load
 *    --plot without --prompt; 03 --load with --scaling-experiment;
 *    ATTN_BACKEND=bogus in 06_gpt; a Brown file of the GPT's vocabulary size
 *    but another mapping of ids to characters; checkpoints whose config says
 *    tokens=bogus, task=bogus, task=scenes3x3 with grid=2, or whose weights
 *    are NaN; every program's standard output on a full disk or closed;
 *  - the captioner's checkpoints are named by checkpoint_check_model.
 * The programs are found next to this test's binary (<build>/tests/..), so
 * the sanitizer build tests the sanitizer binaries. The runs that need
 * Fashion-MNIST are skipped without it. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "data/brown.h"
#include "data/dataset.h"
#include "data/fashion_mnist.h"
#include "io/checkpoint.h"
#include "io/pgm.h"
#include "kernels/matmul.h"
#include "program_run.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/util.h"

#include <cmocka.h>

static char build_dir[1024];
static char tmp_dir[256];
static char repo_dir[1024];   /* the working directory at start: data/ is there */

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* ------------------------------------------------------------ helpers */

/* The run failed as bad input must: exit 1, one error line naming expect. */
static void assert_clean_failure(const RunResult *r, const char *what, const char *expect) {
    if (!program_failed_cleanly(r, expect))
        print_error("%s\n  exit %d (exited normally: %d)\n  stderr: %.2000s\n  expected exit 1 and one error line "
                    "mentioning '%s'\n", what, r->code, r->exited, r->err, expect);
    assert_true(program_failed_cleanly(r, expect));
}

static void assert_success(const RunResult *r, const char *what) {
    if (!r->exited || r->code != 0)
        print_error("%s\n  exit %d (exited normally: %d)\n  stderr: %.2000s\n", what, r->code, r->exited, r->err);
    assert_true(r->exited);
    assert_int_equal(r->code, 0);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int have_fashion_mnist(void) {
    if (exists(FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz")) return 1;
    printf("[  SKIP    ] Fashion-MNIST is not installed (%s)\n", FASHION_MNIST_DIR);
    return 0;
}

/* A short training run of `program` into tmp_dir/<dir>; returns the path of
 * its checkpoint `name` there in ckpt. */
static void train(const char *program, const char *args, const char *dir, const char *name, char *ckpt, size_t cap) {
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "cd %s && %s/%s %s --quiet --out %s/%s", repo_dir, build_dir, program, args, tmp_dir, dir);
    assert_success(r, program);
    free(r);
    snprintf(ckpt, cap, "%s/%s/%s", tmp_dir, dir, name);
    assert_true(exists(ckpt));
}

/* A copy of checkpoint `from` at `to` whose config has `was` replaced by
 * `now` (any length), with the config length and the CRC-32 made right: a
 * file that passes every file check and carries a bad value. */
static void rewrite_config(const char *from, const char *to, const char *was, const char *now) {
    size_t len;
    unsigned char *b = (unsigned char *)read_whole_file(from, &len);
    assert_non_null(b);
    assert_true(len > 20 && memcmp(b, CKPT_MAGIC, 8) == 0);
    const uint32_t config_len = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
    unsigned char *at = memmem(b + 16, config_len, was, strlen(was));
    assert_non_null(at);
    const size_t new_len = len - strlen(was) + strlen(now);
    unsigned char *out = malloc(new_len);
    assert_non_null(out);
    size_t before = (size_t)(at - b), after = len - before - strlen(was);
    memcpy(out, b, before);
    memcpy(out + before, now, strlen(now));
    memcpy(out + before + strlen(now), at + strlen(was), after);
    const uint32_t new_config_len = config_len - (uint32_t)strlen(was) + (uint32_t)strlen(now);
    for (int i = 0; i < 4; i++) out[12 + i] = (unsigned char)(new_config_len >> (8 * i));
    const uLong crc = crc32(0L, out, (uInt)(new_len - 4));
    for (int i = 0; i < 4; i++) out[new_len - 4 + i] = (unsigned char)(crc >> (8 * i));
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out, 1, new_len, f), new_len);
    assert_int_equal(fclose(f), 0);
    free(out);
    free(b);
}

/* Run fn(arg) in a child process under a time limit and (outside the
 * sanitizer builds, whose shadow memory a limit would break) a memory limit
 * of 2 GiB: a reader without bound is stopped by one of them, and fails the
 * test instead of eating the machine. fn returns 0 when its check passed.
 * Returns 1 when the child exited 0. */
static int in_limited_child(int (*fn)(void *), void *arg, const char *what) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        if (!UNDER_ASAN) {
            struct rlimit lim = {(rlim_t)2 << 30, (rlim_t)2 << 30};
            setrlimit(RLIMIT_AS, &lim);
        }
        int rc = fn(arg);
        fflush(NULL);
        _exit(rc == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok)
        print_error("%s: the child %s %d\n", what, WIFSIGNALED(status) ? "was killed by signal" : "exited",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return ok;
}

/* A gzip file of `mib` MiB of zero bytes, small on disk: one gzip member of
 * 1 MiB of zeros (about 1 KB), written mib times (gzip allows members one
 * after another). first (may be NULL) goes in front, as a member of its own. */
static void write_gzip_bomb(const char *path, int mib, const char *first) {
    static unsigned char zeros[1 << 20];
    unsigned char *packed = malloc(1 << 16);
    assert_non_null(packed);
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = zeros;
    z.avail_in = sizeof zeros;
    z.next_out = packed;
    z.avail_out = 1 << 16;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    const size_t member = (1 << 16) - z.avail_out;
    deflateEnd(&z);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (first) {
        fclose(f);
        gzFile gz = gzopen(path, "wb");
        assert_non_null(gz);
        gzputs(gz, first);
        assert_int_equal(gzclose(gz), Z_OK);
        f = fopen(path, "ab");
        assert_non_null(f);
    }
    for (int i = 0; i < mib; i++) assert_int_equal(fwrite(packed, 1, member, f), member);
    assert_int_equal(fclose(f), 0);
    free(packed);
}

/* ------------------------------------------------------ crashes and hangs */

/* --compose 0,1,2,3 with a test file of one image read past its end
 * (SIGSEGV, or garbage and exit 0): the indices are now checked against
 * the test set that was loaded. */
static void write_idx_gz(const char *path, const unsigned char *header, size_t header_len, size_t data_len) {
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, header, (unsigned)header_len), (int)header_len);
    unsigned char *data = calloc(data_len, 1);
    assert_non_null(data);
    for (size_t i = 0; i < data_len; i++) data[i] = (unsigned char)(i % 7);
    assert_int_equal(gzwrite(gz, data, (unsigned)data_len), (int)data_len);
    free(data);
    assert_int_equal(gzclose(gz), Z_OK);
}

static void test_compose_past_the_test_set(void **state) {
    (void)state;
    if (!have_fashion_mnist()) return;
    char dir[400], path[600];
    snprintf(dir, sizeof dir, "%s/one_test_image", tmp_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    assert_int_equal(symlink(FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", path), 0);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", dir);
    assert_int_equal(symlink(FASHION_MNIST_DIR "/train-labels-idx1-ubyte.gz", path), 0);
    const unsigned char images[16] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28};
    const unsigned char labels[8] = {0, 0, 8, 1, 0, 0, 0, 1};
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
    write_idx_gz(path, images, sizeof images, 784);
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
    write_idx_gz(path, labels, sizeof labels, 1);
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "timeout 120 %s/07_caption --compose 0,1,2,3 --data %s --to %s/composed.pgm", build_dir, dir, tmp_dir);
    assert_clean_failure(r, "07_caption --compose 0,1,2,3 with one test image", "holds 1 images (0 to 0)");
    /* index 0 alone exists: a scene of it and empty cells is fine */
    program_shell(r, tmp_dir, "timeout 120 %s/07_caption --compose 0,-,-,- --data %s --to %s/composed.pgm", build_dir, dir, tmp_dir);
    assert_success(r, "07_caption --compose 0,-,-,-");
    free(r);
}

/* A dictionary line of 8 MB: once an abort ("out of memory allocating
 * 8192000000 bytes"), then a message of 4 KB of the line itself. Now one
 * short line naming the file, the line and the limit, before it is parsed. */
static void write_dictionary(const char *path, const char *extra, size_t extra_len) {
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    for (int i = 0; i < 100; i++) gzprintf(gz, "%c%cAT  K AE1 T\n", 'A' + i % 26, 'A' + i / 26);
    if (extra_len) assert_int_equal(gzwrite(gz, extra, (unsigned)extra_len), (int)extra_len);
    assert_int_equal(gzclose(gz), Z_OK);
}

static int load_g2p(const char *data_dir, Dataset *d) {
    TaskConfig tc;
    if (task_defaults(&tc, "g2p") != 0) return -2;
    tc.data_dir = data_dir;
    return dataset_load(d, &tc);
}

static void test_long_dictionary_line(void **state) {
    (void)state;
    char dir[400], path[600];
    snprintf(dir, sizeof dir, "%s/g2p_line", tmp_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/cmudict.dict.gz", dir);
    const size_t n = 8u << 20;
    char *line = malloc(n + 2);
    assert_non_null(line);
    memset(line, 'A', n);
    line[n] = '\n';
    line[n + 1] = '\0';
    static const char *const variants[2] = {"a word of 8 MB and no phonemes", "a word and 2 M phonemes"};
    for (int v = 0; v < 2; v++) {
        if (v == 1)   /* "LONG  AH0 AH0 ..." */
            for (size_t i = 0; i < n; i++) line[i] = i < 4 ? "LONG"[i] : (i % 4 == 0 ? ' ' : "AH0"[i % 4 - 1]);
        write_dictionary(path, line, n + 1);
        Dataset d;
        clear_error();
        int rc = load_g2p(dir, &d);
        const char *msg = last_error();
        print_message("%s: %.300s\n", variants[v], msg);
        assert_int_equal(rc, -1);
        assert_non_null(strstr(msg, "cmudict.dict.gz line 101"));
        assert_non_null(strstr(msg, "at most 4096"));
        assert_true(strlen(msg) < 400);   /* the line quoted short, the explanation kept */
    }
    free(line);
}

/* OMP_NUM_THREADS=99999999: a program hung (the grid search of every
 * product is quadratic in the thread count, and then it starts that many
 * threads). The count is capped where it is read. */
static void test_huge_thread_count(void **state) {
    (void)state;
    char saved[64] = "";
    const char *outer = getenv("OMP_NUM_THREADS");
    if (outer) snprintf(saved, sizeof saved, "%s", outer);
    setenv("OMP_NUM_THREADS", "99999999", 1);
    threads_set(0);
    const int threads = threads_current();
    if (outer) setenv("OMP_NUM_THREADS", saved, 1);
    else unsetenv("OMP_NUM_THREADS");
    threads_set(0);
    print_message("OMP_NUM_THREADS=99999999: %d threads\n", threads);
    assert_true(threads >= 1 && threads <= 256);

    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "OMP_NUM_THREADS=99999999 timeout 120 %s/04_self_attention --task count --pos none --steps 2 "
             "--test-size 10 --quiet --out %s/threads04", build_dir, tmp_dir);
    assert_success(r, "04_self_attention with OMP_NUM_THREADS=99999999");
    free(r);
}

/* A checkpoint given as a FIFO, with a writer: the program opened it once
 * for the config and once for the tensors, and the second open waited for a
 * writer that had finished. A pipe (--load /dev/stdin) found the pipe empty
 * the second time and said "not a checkpoint". Both are read once now. */
static char ckpt01[700], ckpt_gpt[700];

static void need_checkpoints(void) {
    if (!ckpt01[0])
        train("01_rnn_seq2seq", "--steps 2 --state 16 --embed 8 --n-train 200 --max-eval 10 --samples 0", "r01",
              "model.ckpt", ckpt01, sizeof ckpt01);
    if (!ckpt_gpt[0])
        train("06_gpt", "--steps 2 --layers 1 --dim 8 --heads 2 --ff 8 --context 16 --batch 2 --eval-every 0 "
                        "--eval-max-tokens 300 --max-new 5", "rgpt", "model.ckpt", ckpt_gpt, sizeof ckpt_gpt);
}

static void test_checkpoint_from_a_fifo_or_a_pipe(void **state) {
    (void)state;
    need_checkpoints();
    char fifo[400];
    snprintf(fifo, sizeof fifo, "%s/ckpt.fifo", tmp_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "(timeout 60 cat %s > %s &) ; timeout 60 %s/01_rnn_seq2seq --load %s --translate '21 Nov 2026' "
             "--out %s/fifo01", ckpt01, fifo, build_dir, fifo, tmp_dir);
    assert_success(r, "01_rnn_seq2seq --load FIFO");
    assert_non_null(strstr(r->out, "21 Nov 2026 ->"));
    program_shell(r, tmp_dir, "cat %s | timeout 60 %s/01_rnn_seq2seq --load /dev/stdin --translate '21 Nov 2026' --out %s/pipe01",
          ckpt01, build_dir, tmp_dir);
    assert_success(r, "01_rnn_seq2seq --load /dev/stdin");
    assert_non_null(strstr(r->out, "21 Nov 2026 ->"));
    /* the GPT reads the config a third time (for --max-new's default) */
    program_shell(r, tmp_dir, "cat %s | timeout 60 %s/06_gpt --load /dev/stdin --data %s/data/brown.txt.gz --prompt 'The jury' "
             "--max-new 3 --out %s/pipegpt", ckpt_gpt, build_dir, repo_dir, tmp_dir);
    assert_success(r, "06_gpt --load /dev/stdin");
    assert_non_null(strstr(r->out, "[The jury]"));
    /* the corpus as a FIFO: opened once for its magic bytes, once to read it */
    char corpus_fifo[400];
    snprintf(corpus_fifo, sizeof corpus_fifo, "%s/corpus.fifo", tmp_dir);
    assert_int_equal(mkfifo(corpus_fifo, 0600), 0);
    program_shell(r, tmp_dir, "(timeout 60 cat %s/data/brown.txt.gz > %s &) ; timeout 60 %s/06_gpt --load %s --data %s "
             "--prompt 'The jury' --max-new 3 --out %s/fifogpt", repo_dir, corpus_fifo, build_dir, ckpt_gpt,
          corpus_fifo, tmp_dir);
    assert_success(r, "06_gpt --data FIFO");
    assert_non_null(strstr(r->out, "[The jury]"));
    free(r);
}

/* -------------------------------------------------- inputs read without bound */

static int checkpoint_refused(void *path) {
    char *config = NULL;
    clear_error();
    int rc = checkpoint_read_config((const char *)path, &config);
    free(config);
    if (rc == 0 || !strstr(last_error(), "is not a checkpoint")) {
        fprintf(stderr, "%s: rc %d, '%s'\n", (const char *)path, rc, last_error());
        return 1;
    }
    return 0;
}

static int image_refused(void *path) {
    PgmImage img;
    clear_error();
    int rc = pgm_read(&img, (const char *)path);
    if (rc == 0) pgm_free(&img);
    if (rc == 0 || !strstr(last_error(), "not a PGM image")) {
        fprintf(stderr, "%s: rc %d, '%s'\n", (const char *)path, rc, last_error());
        return 1;
    }
    return 0;
}

static int dictionary_refused(void *dir) {
    Dataset d;
    clear_error();
    int rc = load_g2p((const char *)dir, &d);
    if (rc == 0 || !strstr(last_error(), "holds more than 64 MiB")) {
        fprintf(stderr, "%s: rc %d, '%.300s'\n", (const char *)dir, rc, last_error());
        return 1;
    }
    return 0;
}

static int corpus_refused(void *path) {
    BrownCorpus c;
    clear_error();
    int rc = brown_load(&c, (const char *)path, BROWN_CHARS);
    if (rc == 0) brown_free(&c);
    if (rc == 0 || !strstr(last_error(), "holds more than 256 MiB")) {
        fprintf(stderr, "%s: rc %d, '%.300s'\n", (const char *)path, rc, last_error());
        return 1;
    }
    return 0;
}

/* /dev/zero and /dev/urandom as a checkpoint or an image were read whole
 * (2 GB in 10 s, without end) before the magic number was looked at. */
static void test_devices_refused_at_their_first_bytes(void **state) {
    (void)state;
    static const char *const devices[2] = {"/dev/zero", "/dev/urandom"};
    for (int i = 0; i < 2; i++) {
        if (!exists(devices[i])) continue;
        assert_true(in_limited_child(checkpoint_refused, (void *)devices[i], devices[i]));
        assert_true(in_limited_child(image_refused, (void *)devices[i], devices[i]));
    }
    /* and through a program, the one error line */
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "%s timeout 60 %s/01_rnn_seq2seq --load /dev/zero --translate x --out %s/zero01",
          UNDER_ASAN ? "" : "ulimit -v 4000000;", build_dir, tmp_dir);
    assert_clean_failure(r, "01_rnn_seq2seq --load /dev/zero", "is not a checkpoint");
    free(r);
}

/* Gzip bombs (a little file that inflates to 1 GiB of zeros) were inflated
 * whole before anything was checked: as a checkpoint (named .gz, which the
 * loader gunzips) it is now refused at its magic; as the dictionary or the
 * corpus, at their size limits. */
static void test_gzip_bombs(void **state) {
    (void)state;
    char path[600], dir[400];
    snprintf(path, sizeof path, "%s/bomb.ckpt.gz", tmp_dir);
    write_gzip_bomb(path, 1024, NULL);
    assert_true(in_limited_child(checkpoint_refused, path, "a gzip bomb as a checkpoint"));
    snprintf(dir, sizeof dir, "%s/g2p_bomb", tmp_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/cmudict.dict.gz", dir);
    write_gzip_bomb(path, 1024, "ABOUT  AH0 B AW1 T\n");
    assert_true(in_limited_child(dictionary_refused, dir, "a gzip bomb as the dictionary"));
    snprintf(path, sizeof path, "%s/brown_bomb.txt.gz", tmp_dir);
    write_gzip_bomb(path, 1024, "# ca01\n\nThe/at jury/nn said/vbd ./.\n");
    assert_true(in_limited_child(corpus_refused, path, "a gzip bomb as the corpus"));
}

/* The bytes of a bad file in a message: a checkpoint whose model name holds
 * terminal escape codes (clear the screen, red text, a bell). The message
 * shows them as \xNN text. */
static void test_escape_codes_in_messages(void **state) {
    (void)state;
    /* error.h's fail(), in parentheses: cmocka.h defines a macro fail() too */
    (fail)("model '%s' is unknown", "a\x1b[2J\x1b[31mred\a\x7f\xff\xc2\x9b" "caf\xc3\xa9\n");
    const char *msg = last_error();
    print_message("%s\n", msg);
    assert_string_equal(msg, "model 'a\\x1b[2J\\x1b[31mred\\x07\\x7f\\xff\\xc2\\x9bcaf\xc3\xa9\\x0a' is unknown");

    need_checkpoints();
    char bad[600];
    snprintf(bad, sizeof bad, "%s/escape.ckpt", tmp_dir);
    rewrite_config(ckpt01, bad, "model=rnn_seq2seq", "model=\x1b[2J\x1b[31mevil\a");
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "%s/04_self_attention --load %s --test-size 5 --out %s/escape04", build_dir, bad, tmp_dir);
    assert_clean_failure(r, "04_self_attention --load a checkpoint with escape codes", "\\x1b[2J\\x1b[31mevil\\x07");
    for (const char *c = r->err; *c; c++) assert_true(*c != '\x1b' && *c != '\a');
    free(r);
}

/* ---------------------------------------------------- silently wrong, exit 0 */

/* "1,2," was read as 1,2. */
static void test_list_flags_refuse_an_empty_item(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "timeout 120 %s/05_multi_head_attention --task neighbours --heads 1,2, --steps 1 --dim 8 --ff 8 "
             "--batch 8 --test-size 5 --scale-max-len 0 --quiet --out %s/comma05", build_dir, tmp_dir);
    assert_clean_failure(r, "05 --heads 1,2,", "--heads '1,2,': item 3 is empty");
    program_shell(r, tmp_dir, "timeout 120 %s/05_multi_head_attention --heads ,2 --steps 1 --out %s/comma05", build_dir, tmp_dir);
    assert_clean_failure(r, "05 --heads ,2", "item 1 is empty");
    program_shell(r, tmp_dir, "timeout 120 %s/07_vision_transformer --patch 7, --steps 1 --dim 8 --heads 2 --ff 8 --layers 1 "
             "--batch 8 --test-size 5 --pictures 0 --quiet --out %s/comma07", build_dir, tmp_dir);
    assert_clean_failure(r, "07 --patch 7,", "--patch '7,': item 2 is empty");
    program_shell(r, tmp_dir, "timeout 120 %s/07_vision_transformer --patch 14,,7 --steps 1 --out %s/comma07", build_dir, tmp_dir);
    assert_clean_failure(r, "07 --patch 14,,7", "item 2 is empty");
    program_shell(r, tmp_dir, "timeout 120 %s/07_caption --compose 1,2,3,4, --to %s/comma.pgm", build_dir, tmp_dir);
    assert_clean_failure(r, "07_caption --compose 1,2,3,4,", "item 5 is empty");
    free(r);
}

/* 06_gpt --load CKPT --plot without --prompt measured the test figures and
 * drew nothing; ATTN_BACKEND=bogus was a warning in 06_gpt alone. */
static void test_gpt_flags(void **state) {
    (void)state;
    need_checkpoints();
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/06_gpt --load %s --plot --out %s/plotgpt", repo_dir, build_dir, ckpt_gpt,
          tmp_dir);
    assert_clean_failure(r, "06_gpt --load --plot", "add --prompt TEXT");
    program_shell(r, tmp_dir, "cd %s && ATTN_BACKEND=bogus timeout 120 %s/06_gpt --steps 1 --layers 1 --dim 8 --heads 2 --ff 8 "
             "--context 16 --batch 2 --eval-every 0 --eval-max-tokens 300 --max-new 5 --quiet --out %s/envgpt",
          repo_dir, build_dir, tmp_dir);
    assert_clean_failure(r, "ATTN_BACKEND=bogus 06_gpt", "ATTN_BACKEND");
    free(r);
}

/* A Brown file of the same vocabulary size but another mapping of ids to
 * characters (here every 'z' written '~', a character the corpus lacks)
 * loaded with a GPT checkpoint and generated other text, exit 0. The
 * checkpoint keeps the vocabulary's fingerprint (vocab_crc=); --load refuses
 * such a corpus in one line naming it. (Checkpoints saved before the line
 * still load: test_old_checkpoints.) */
static void test_gpt_refuses_another_vocabulary(void **state) {
    (void)state;
    need_checkpoints();
    char other[600], *config = NULL;
    assert_int_equal(checkpoint_read_config(ckpt_gpt, &config), 0);
    assert_non_null(strstr(config, "\nvocab_crc="));
    free(config);
    snprintf(other, sizeof other, "%s/brown_other.txt.gz", tmp_dir);
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "gzip -dc %s/data/brown.txt.gz | tr z '~' | gzip -1 > %s", repo_dir, other);
    assert_success(r, "writing a Brown file with '~' for 'z'");
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/06_gpt --load %s --data %s --prompt 'The jury' --max-new 3 --out %s/othergpt",
          repo_dir, build_dir, ckpt_gpt, other, tmp_dir);
    assert_clean_failure(r, "06_gpt --load CKPT --data (another mapping of the same size)", "vocab_crc=");
    assert_non_null(strstr(r->err, "brown_other.txt.gz give vocab_crc="));
    assert_null(strstr(r->err, "a vocabulary of"));   /* the same V: not the size check */
    free(r);
}

/* 03_dot_product_attention --load CKPT --scaling-experiment exited 0: with
 * --load the scaling experiment is skipped, so the flag did nothing and the
 * checkpoint was not used either. It is refused with the other flags that
 * have no effect with --load. */
static void test_scaling_experiment_refused_with_load(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/03_dot_product_attention --load "
             "tests/data/old_checkpoints/03_dot_product_attention.ckpt --scaling-experiment --out %s/scaling03",
          repo_dir, build_dir, tmp_dir);
    assert_clean_failure(r, "03_dot_product_attention --load CKPT --scaling-experiment",
                         "--scaling-experiment has no effect with --load");
    free(r);
}

/* Config values checked at load: each of these loaded and ran on. */
static void test_config_values_checked_at_load(void **state) {
    (void)state;
    need_checkpoints();
    char bad[600];
    RunResult *r = malloc(sizeof *r);
    snprintf(bad, sizeof bad, "%s/tokens.ckpt", tmp_dir);
    rewrite_config(ckpt_gpt, bad, "tokens=char", "tokens=bogus");
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/06_gpt --load %s --out %s/badgpt", repo_dir, build_dir, bad, tmp_dir);
    assert_clean_failure(r, "06_gpt with tokens=bogus", "tokens=bogus in its config: expected char or word");
    if (!have_fashion_mnist()) {
        free(r);
        return;
    }
    char vit[700], cap[700];
    train("07_vision_transformer", "--steps 1 --dim 8 --heads 2 --ff 8 --layers 1 --patch 14 --batch 4 "
          "--test-size 5 --pictures 0", "r07", "model_vit_p14.ckpt", vit, sizeof vit);
    snprintf(bad, sizeof bad, "%s/task07.ckpt", tmp_dir);
    rewrite_config(vit, bad, "task=fashion_mnist", "task=bogus");
    program_shell(r, tmp_dir, "timeout 120 %s/07_vision_transformer --load %s --pictures 0 --out %s/bad07", build_dir, bad, tmp_dir);
    assert_clean_failure(r, "07_vision_transformer with task=bogus", "task=bogus: expected fashion_mnist");
    train("07_caption", "--steps 1 --batch 4 --train-scenes 10 --valid-scenes 2 --test-scenes 2 --pictures 0 "
          "--dim 8 --heads 2 --ff 8 --layers 1 --embed 4 --state 8 --attn 4 --patch 14 --threads 1", "rcap",
          "model.ckpt", cap, sizeof cap);
    snprintf(bad, sizeof bad, "%s/taskcap.ckpt", tmp_dir);
    rewrite_config(cap, bad, "task=scenes2x2", "task=bogus");
    program_shell(r, tmp_dir, "timeout 120 %s/07_caption --load %s --pictures 0 --out %s/badcap", build_dir, bad, tmp_dir);
    assert_clean_failure(r, "07_caption with task=bogus", "task=bogus: expected scenes2x2 (grid=2)");
    rewrite_config(cap, bad, "task=scenes2x2", "task=scenes3x3");
    program_shell(r, tmp_dir, "timeout 120 %s/07_caption --load %s --pictures 0 --out %s/badcap", build_dir, bad, tmp_dir);
    assert_clean_failure(r, "07_caption with task=scenes3x3, grid=2", "task=scenes3x3: expected scenes2x2 (grid=2)");
    /* and the captioner's checkpoint in another chapter is named as the captioner's */
    program_shell(r, tmp_dir, "timeout 120 %s/01_rnn_seq2seq --load %s --out %s/cap01", build_dir, cap, tmp_dir);
    assert_clean_failure(r, "01_rnn_seq2seq --load a captioner checkpoint",
                         "a checkpoint of chapter 07_caption (model=ch07_caption)");
    free(r);
}

/* Weights that are NaN or infinite (a run that diverged) loaded, and the
 * model answered nonsense: empty captions, 0% for every class. */
static void test_nonfinite_weights_refused(void **state) {
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/nan.ckpt", tmp_dir);
    static const float bad_values[3] = {NAN, INFINITY, -INFINITY};
    static const char *const names[3] = {"NaN", "+inf", "-inf"};
    for (int v = 0; v < 3; v++) {
        Params saved, loaded;
        params_init(&saved);
        params_add(&saved, "enc.W", 2, (int[]){3, 4});
        params_add(&saved, "enc.b", 1, (int[]){4});
        assert_int_equal(params_alloc(&saved), 0);
        for (size_t i = 0; i < saved.size; i++) saved.data[i] = 0.25f * (float)i;
        saved.data[12 + 2] = bad_values[v];            /* enc.b[2] */
        assert_int_equal(checkpoint_save(path, "model=x\n", &saved), 0);
        params_init(&loaded);
        params_add(&loaded, "enc.W", 2, (int[]){3, 4});
        params_add(&loaded, "enc.b", 1, (int[]){4});
        assert_int_equal(params_alloc(&loaded), 0);
        for (size_t i = 0; i < loaded.size; i++) loaded.data[i] = 7.0f;
        clear_error();
        assert_int_equal(checkpoint_load(path, &loaded), -1);
        print_message("%s\n", last_error());
        assert_non_null(strstr(last_error(), "tensor 1 'enc.b' holds "));
        assert_non_null(strstr(last_error(), names[v]));
        assert_non_null(strstr(last_error(), "at element 2"));
        for (size_t i = 0; i < loaded.size; i++) assert_true(loaded.data[i] == 7.0f);   /* left as it was */
        params_free(&saved);
        params_free(&loaded);
    }
}

/* Standard output on a full disk or closed: the printed results were lost
 * and every program exited 0. */
static void test_stdout_write_errors(void **state) {
    (void)state;
    static const char *const programs[] = {"01_rnn_seq2seq", "02_bahdanau_attention", "03_dot_product_attention",
                                           "04_self_attention", "05_multi_head_attention", "06_transformer",
                                           "06_gpt", "06_gpt_genre", "07_vision_transformer", "07_caption"};
    RunResult *r = malloc(sizeof *r);
    char what[128];
    if (exists("/dev/full")) {
        for (size_t p = 0; p < sizeof programs / sizeof programs[0]; p++) {
            program_shell(r, tmp_dir, "%s/%s --help >/dev/full", build_dir, programs[p]);
            snprintf(what, sizeof what, "%s --help >/dev/full", programs[p]);
            assert_clean_failure(r, what, "cannot write to standard output");
        }
        program_shell(r, tmp_dir, "%s/01_rnn_seq2seq --steps 2 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0 --quiet "
                 "--out %s/full01 >/dev/full", build_dir, tmp_dir);
        assert_clean_failure(r, "01_rnn_seq2seq >/dev/full", "cannot write to standard output");
    }
    /* closed: the checkpoint must not take the number of standard output and receive the printed text */
    program_shell(r, tmp_dir, "%s/01_rnn_seq2seq --steps 2 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0 "
             "--out %s/closed01 >&-", build_dir, tmp_dir);
    assert_clean_failure(r, "01_rnn_seq2seq >&-", "cannot write to standard output");
    char path[600], *config = NULL;
    snprintf(path, sizeof path, "%s/closed01/model.ckpt", tmp_dir);
    if (checkpoint_read_config(path, &config) != 0) print_error("%s\n", last_error());
    assert_non_null(config);
    free(config);
    /* and a good run still exits 0 */
    program_shell(r, tmp_dir, "%s/04_self_attention --help", build_dir);
    assert_success(r, "04_self_attention --help");
    free(r);
}

/* ------------------------------------------------------------ the captioner */

static void test_captioner_named_by_check_model(void **state) {
    (void)state;
    clear_error();
    assert_int_equal(checkpoint_check_model("cap.ckpt", "model=ch07_caption\n", "rnn_seq2seq", "01_rnn_seq2seq"), -1);
    print_message("%s\n", last_error());
    assert_non_null(strstr(last_error(), "a checkpoint of chapter 07_caption (model=ch07_caption)"));
}

static int setup(void **state) {
    (void)state;
    if (!getcwd(repo_dir, sizeof repo_dir)) return -1;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_hostile");
}

static int teardown(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

int main(int argc, char **argv) {
    (void)argc;
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    char absolute[PATH_MAX];   /* some runs change directory first */
    if (realpath(build_dir, absolute) && strlen(absolute) < sizeof build_dir) strcpy(build_dir, absolute);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compose_past_the_test_set),
        cmocka_unit_test(test_long_dictionary_line),
        cmocka_unit_test(test_huge_thread_count),
        cmocka_unit_test(test_checkpoint_from_a_fifo_or_a_pipe),
        cmocka_unit_test(test_devices_refused_at_their_first_bytes),
        cmocka_unit_test(test_gzip_bombs),
        cmocka_unit_test(test_escape_codes_in_messages),
        cmocka_unit_test(test_list_flags_refuse_an_empty_item),
        cmocka_unit_test(test_gpt_flags),
        cmocka_unit_test(test_gpt_refuses_another_vocabulary),
        cmocka_unit_test(test_scaling_experiment_refused_with_load),
        cmocka_unit_test(test_config_values_checked_at_load),
        cmocka_unit_test(test_nonfinite_weights_refused),
        cmocka_unit_test(test_stdout_write_errors),
        cmocka_unit_test(test_captioner_named_by_check_model),
    };
    return cmocka_run_group_tests_name("hostile", tests, setup, teardown);
}
