/* test_util.c - the small helpers: mkdir -p, atomic writes (the old file
 * survives an abandoned write, no temporary file is left behind),
 * read_whole_file on plain and gzip files, aligned allocation, results.json
 * (JSON escaping, exact numbers, null for NaN/inf, replacing a key), where an
 * evaluation (--load) writes, and the plain-log mode of the progress line. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/error.h"
#include "train/progress.h"
#include "io/results.h"
#include "util/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "temp_dir.h"
#include "util/rng.h"

static char tmp_dir[256];

static void path_in_tmp(char *out, size_t outlen, const char *name) {
    snprintf(out, outlen, "%s/%s", tmp_dir, name);
}

static int count_leftover_tmp_files(void) {
    DIR *d = opendir(tmp_dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        if (strstr(e->d_name, ".tmp.") != NULL) n++;
    closedir(d);
    return n;
}

static char *read_text(const char *path) {
    size_t len;
    char *text = read_whole_file(path, &len);
    if (text == NULL) fail_msg("%s", last_error());
    assert_int_equal(strlen(text), len);
    return text;
}

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_util");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

/* -------------------------------------------------------------- make_dirs */

/* fail() may quote last_error() to add context: the old message must come
 * out whole, not as the garbage of a buffer formatted into itself. */
/* (fail) is the function of util/error.h: cmocka.h defines a fail() macro. */
static void test_fail_wraps_last_error(void **state) {
    (void)state;
    (fail)("tensor 3 'W' has dims [%d], model expects [%d]", 4, 8);
    (fail)("%s: %s", "out/model.ckpt", last_error());
    assert_string_equal(last_error(), "out/model.ckpt: tensor 3 'W' has dims [4], model expects [8]");
    (fail)("%s (%s)", last_error(), "again");
    assert_string_equal(last_error(), "out/model.ckpt: tensor 3 'W' has dims [4], model expects [8] (again)");
}

static void test_make_dirs(void **state) {
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "a/b//c/");
    assert_int_equal(make_dirs(path), 0);
    assert_int_equal(make_dirs(path), 0);             /* already there: fine */
    struct stat st;
    path_in_tmp(path, sizeof path, "a/b/c");
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));

    /* A file in the way is an error that names the path. */
    path_in_tmp(path, sizeof path, "plain_file");
    assert_int_equal(write_file_atomic(path, "x", 1), 0);
    path_in_tmp(path, sizeof path, "plain_file/sub");
    assert_int_equal(make_dirs(path), -1);
    assert_non_null(strstr(last_error(), "plain_file"));
}

/* ---------------------------------------------------------- atomic writes */

static void test_write_file_atomic(void **state) {
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "data.bin");
    assert_int_equal(write_file_atomic(path, "first version", 13), 0);
    assert_int_equal(write_file_atomic(path, "second", 6), 0);
    char *text = read_text(path);
    assert_string_equal(text, "second");
    free(text);
    assert_int_equal(count_leftover_tmp_files(), 0);

    assert_int_equal(write_file_atomic("/nonexistent_dir_for_test/f.bin", "x", 1), -1);
    assert_non_null(strstr(last_error(), "/nonexistent_dir_for_test/f.bin"));
    assert_non_null(strstr(last_error(), "No such file"));
}

static void test_atomic_open_close(void **state) {
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "report.txt");
    AtomicFile af;
    assert_int_equal(atomic_open(&af, path), 0);
    fprintf(af.f, "line %d\n", 1);
    assert_int_equal(atomic_close(&af, 1), 0);

    /* An abandoned write (ok = 0) leaves the previous file as it was. */
    assert_int_equal(atomic_open(&af, path), 0);
    fprintf(af.f, "half a report");
    assert_int_equal(access(af.tmp, F_OK), 0);        /* written beside, not over */
    assert_int_equal(atomic_close(&af, 0), 0);
    char *text = read_text(path);
    assert_string_equal(text, "line 1\n");
    free(text);
    assert_int_equal(count_leftover_tmp_files(), 0);

    assert_int_equal(atomic_open(&af, "/nonexistent_dir_for_test/r.txt"), -1);
    assert_non_null(strstr(last_error(), "/nonexistent_dir_for_test/r.txt"));
}

/* ---------------------------------------------------------------- reading */

static void test_read_plain_and_gzip(void **state) {
    (void)state;
    /* Bigger than one 64 KiB read, so the buffer has to grow. */
    size_t n = 200000;
    char *original = malloc(n + 1);
    for (size_t i = 0; i < n; i++) original[i] = (char)('a' + (i * 7 + i / 13) % 26);
    original[n] = '\0';

    char plain[512], gz_path[512];
    path_in_tmp(plain, sizeof plain, "words.txt");
    path_in_tmp(gz_path, sizeof gz_path, "words.txt.gz");
    assert_int_equal(write_file_atomic(plain, original, n), 0);
    gzFile gz = gzopen(gz_path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, original, (unsigned)n), (int)n);
    assert_int_equal(gzclose(gz), Z_OK);

    size_t len = 0;
    char *text = read_whole_file(plain, &len);
    assert_non_null(text);
    assert_int_equal(len, n);
    assert_memory_equal(text, original, n + 1);       /* includes the NUL */
    free(text);

    text = read_whole_file(gz_path, &len);
    assert_non_null(text);
    assert_int_equal(len, n);
    assert_memory_equal(text, original, n + 1);
    free(text);

    /* The compressed file really is smaller: we did gunzip something. */
    struct stat st;
    assert_int_equal(stat(gz_path, &st), 0);
    assert_true((size_t)st.st_size < n);

    path_in_tmp(plain, sizeof plain, "empty.txt");
    assert_int_equal(write_file_atomic(plain, "", 0), 0);
    text = read_whole_file(plain, &len);
    assert_non_null(text);
    assert_int_equal(len, 0);
    assert_int_equal(text[0], '\0');
    free(text);

    /* Sizes around the old fixed 64 KiB read: the buffer starts at the
     * file's size, so these end exactly at or just past a full read. */
    const size_t edges[] = {1, 65535, 65536, 65537};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        path_in_tmp(plain, sizeof plain, "edge.txt");
        assert_int_equal(write_file_atomic(plain, original, edges[e]), 0);
        text = read_whole_file(plain, &len);
        assert_non_null(text);
        assert_int_equal(len, edges[e]);
        assert_memory_equal(text, original, edges[e]);
        assert_int_equal(text[len], '\0');
        free(text);
    }

    /* A pipe has no size: read in 64 KiB pieces, growing the buffer. */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_true(fcntl(fds[1], F_SETPIPE_SZ, 1 << 20) >= (int)n);   /* the whole text fits unread */
    assert_int_equal(write(fds[1], original, n), (ssize_t)n);
    close(fds[1]);
    char pipe_path[64];
    snprintf(pipe_path, sizeof pipe_path, "/dev/fd/%d", fds[0]);
    text = read_whole_file(pipe_path, &len);
    close(fds[0]);
    assert_non_null(text);
    assert_int_equal(len, n);
    assert_memory_equal(text, original, n + 1);
    free(text);

    assert_null(read_whole_file("/nonexistent_dir_for_test/missing.txt", &len));
    assert_non_null(strstr(last_error(), "/nonexistent_dir_for_test/missing.txt"));
    assert_null(read_whole_file("/nonexistent_dir_for_test/missing.txt.gz", &len));
    assert_non_null(strstr(last_error(), "missing.txt.gz"));
    free(original);
}

static void test_corrupt_gzip(void **state) {
    (void)state;
    /* A gzip header followed by garbage. */
    unsigned char junk[64] = {0x1f, 0x8b, 0x08, 0x00};
    for (int i = 10; i < 64; i++) junk[i] = (unsigned char)(i * 37);
    char path[512];
    path_in_tmp(path, sizeof path, "junk.gz");
    assert_int_equal(write_file_atomic(path, junk, sizeof junk), 0);
    size_t len;
    assert_null(read_whole_file(path, &len));
    assert_non_null(strstr(last_error(), "junk.gz"));
}

/* A gzip file cut short (a copy that stopped, a full disk) is an error, not
 * a shorter text: zlib reports the missing end only through gzerror. */
static void test_truncated_gzip(void **state) {
    (void)state;
    char whole[512], cut[512];
    path_in_tmp(whole, sizeof whole, "long.txt.gz");
    path_in_tmp(cut, sizeof cut, "cut.txt.gz");
    gzFile gz = gzopen(whole, "wb");
    assert_non_null(gz);
    Rng r;
    rng_seed(&r, 5, 0);
    for (int i = 0; i < 20000; i++) gzprintf(gz, "word%u ", rng_below(&r, 100000));
    assert_int_equal(gzclose(gz), Z_OK);
    size_t len;
    char *text = read_whole_file(whole, &len);   /* the whole file decompresses */
    assert_non_null(text);
    free(text);
    FILE *f = fopen(whole, "rb");
    assert_non_null(f);
    static unsigned char raw[1 << 20];
    size_t n = fread(raw, 1, sizeof raw, f);
    fclose(f);
    assert_true(n > 1000);
    assert_int_equal(write_file_atomic(cut, raw, n / 2), 0);
    assert_null(read_whole_file(cut, &len));
    if (!strstr(last_error(), "truncated")) fail_msg("message: %s", last_error());
}

/* ------------------------------------------------------------- allocation */

static void test_aligned_allocation(void **state) {
    (void)state;
    size_t sizes[] = {0, 1, 7, 64, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = xmalloc(sizes[i]);
        assert_int_equal((uintptr_t)p % 64, 0);
        memset(p, 0xAB, sizes[i]);
        free(p);
        unsigned char *z = xcalloc(sizes[i], 3);
        assert_int_equal((uintptr_t)z % 64, 0);
        for (size_t k = 0; k < sizes[i] * 3; k++) assert_int_equal(z[k], 0);
        free(z);
    }
}

/* ---------------------------------------------------------------- results */

static void test_results_json(void **state) {
    (void)state;
    Results r;
    results_init(&r);
    results_set_str(&r, "chapter", "01_rnn_seq2seq");
    results_set_str(&r, "sample", "say \"hi\"\\ now\n\ttab\x01 é");
    results_set_num(&r, "test_exact_match", 0.93);
    results_set_num(&r, "tiny", 1.5e-7);
    results_set_num(&r, "steps", 2000);
    results_set_num(&r, "loss", NAN);
    results_set_num(&r, "ppl", INFINITY);
    results_set_num(&r, "third", 1.0 / 3.0);
    results_set_str(&r, "chapter", "02_bahdanau_attention");   /* replaces, no duplicate */
    results_set_str(&r, "quo\"te", "x");
    assert_int_equal(r.n, 9);

    char path[512];
    path_in_tmp(path, sizeof path, "results.json");
    assert_int_equal(results_write(&r, path), 0);
    char *text = read_text(path);
    const char *expected =
        "{\n"
        "  \"chapter\": \"02_bahdanau_attention\",\n"
        "  \"sample\": \"say \\\"hi\\\"\\\\ now\\n\\ttab\\u0001 é\",\n"
        "  \"test_exact_match\": 0.93,\n"
        "  \"tiny\": 1.5e-07,\n"
        "  \"steps\": 2000,\n"
        "  \"loss\": null,\n"
        "  \"ppl\": null,\n"
        "  \"third\": 0.3333333333333333,\n"
        "  \"quo\\\"te\": \"x\"\n"
        "}\n";
    assert_string_equal(text, expected);
    free(text);
    assert_int_equal(count_leftover_tmp_files(), 0);

    assert_int_equal(results_write(&r, "/nonexistent_dir_for_test/results.json"), -1);
    assert_non_null(strstr(last_error(), "results.json"));
}

/* --load without --out: out/<chapter>/eval_<folder>_<file>, so two runs'
 * models of the same file name go to two places; a training run's
 * directory is refused. */
static void test_results_eval_dir(void **state) {
    (void)state;
    char out[512];
    const char *chapter = "out/07_vision_transformer";
    struct { const char *checkpoint, *expected; } cases[] = {
        {"out/07_vision_transformer_long/model_vit_p4.ckpt", "out/07_vision_transformer/eval_07_vision_transformer_long_model_vit_p4"},
        {"out/seed2/model_vit_p4.ckpt", "out/07_vision_transformer/eval_seed2_model_vit_p4"},
        {"/abs/path/run/m.ckpt", "out/07_vision_transformer/eval_run_m"},
        {"out/07_vision_transformer/model_vit_p7.ckpt", "out/07_vision_transformer/eval_model_vit_p7"},
        {"model.ckpt", "out/07_vision_transformer/eval_model"},
        {"./model.ckpt", "out/07_vision_transformer/eval_model"},
        {"../model.ckpt", "out/07_vision_transformer/eval_model"},
        {"weights", "out/07_vision_transformer/eval_weights"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(results_eval_dir(out, sizeof out, NULL, chapter, cases[i].checkpoint), 0);
        assert_string_equal(out, cases[i].expected);
    }
    assert_int_equal(results_eval_dir(out, sizeof out, "mine", chapter, "out/a/model.ckpt"), 0);
    assert_string_equal(out, "mine");

    /* too long for the buffer: refused, not cut */
    char small[24];
    assert_int_equal(results_eval_dir(small, sizeof small, NULL, chapter, "out/a/model.ckpt"), -1);
    assert_non_null(strstr(last_error(), "longer than 23"));

    /* a training run's directory (steps > 0) is refused; an evaluation's is not */
    Results r;
    results_init(&r);
    results_set_num(&r, "steps", 10);
    char path[600];
    path_in_tmp(path, sizeof path, "results.json");
    assert_int_equal(results_write(&r, path), 0);
    assert_int_equal(results_eval_dir(out, sizeof out, tmp_dir, chapter, "out/a/model.ckpt"), -1);
    assert_non_null(strstr(last_error(), "holds a training run's results"));
    results_set_num(&r, "steps", 0);
    assert_int_equal(results_write(&r, path), 0);
    assert_int_equal(results_eval_dir(out, sizeof out, tmp_dir, chapter, "out/a/model.ckpt"), 0);
    unlink(path);
}

static void test_results_long_value_is_cut_cleanly(void **state) {
    (void)state;
    /* 300 two-byte characters do not fit in 256 bytes: the value is cut on a
     * character boundary and still a valid JSON string. */
    char long_value[700] = "";
    for (int i = 0; i < 300; i++) strcat(long_value, "é");
    Results r;
    results_init(&r);
    results_set_str(&r, "k", long_value);
    const char *v = r.values[0];
    size_t len = strlen(v);
    assert_true(len < sizeof r.values[0]);
    assert_int_equal(v[0], '"');
    assert_int_equal(v[len - 1], '"');
    assert_int_equal((len - 2) % 2, 0);              /* whole "é"s only */

    /* Quotes near the end: never half an escape. */
    char quotes[400];
    memset(quotes, '"', 399);
    quotes[399] = '\0';
    results_set_str(&r, "q", quotes);
    v = r.values[1];
    len = strlen(v);
    assert_int_equal((len - 2) % 2, 0);              /* whole \" pairs only */
}

/* --------------------------------------------------------------- progress */

static void test_progress_plain_lines(void **state) {
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "progress.log");
    FILE *log = fopen(path, "w");
    assert_non_null(log);
    fflush(stdout);
    int saved = dup(1);
    dup2(fileno(log), 1);                             /* stdout is now a file, not a terminal */

    Progress pr;
    progress_start(&pr, 10, 4, "tokens", 0);
    for (long step = 1; step <= 10; step++) progress_update(&pr, step, 2.5f / (float)step, step * 32, "valid loss 1.5");
    progress_end(&pr);
    /* A long run's log: step 3 is no multiple of 1000, but the last line
     * (here: the start) was over a minute ago, so it is printed; step 4,
     * right after it, is not. */
    Progress slow;
    progress_start(&slow, 10000, 1000, NULL, 0);
    slow.t_start -= 61.0;
    progress_update(&slow, 3, 1.0f, 96, NULL);
    progress_update(&slow, 4, 1.0f, 128, NULL);
    Progress quiet;
    progress_start(&quiet, 10, 1, NULL, 1);
    progress_update(&quiet, 5, 1.0f, 10, NULL);
    progress_end(&quiet);

    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(log);

    assert_int_equal(pr.is_tty, 0);
    char *text = read_text(path);
    /* Steps 4 and 8 (every 4), then the last one; then the "done" line;
     * then the slow run's step 3 alone. */
    int lines = 0;
    for (char *c = text; *c; c++) lines += *c == '\n';
    assert_int_equal(lines, 5);
    assert_non_null(strstr(text, "step      3/10000"));
    assert_null(strstr(text, "step      4/10000"));
    /* every number labelled: the training loss, the extra figure, the rate and its unit */
    assert_non_null(strstr(text, "step    4/10  train loss 0.6250  valid loss 1.5  "));
    assert_non_null(strstr(text, "step    8/10"));
    assert_non_null(strstr(text, "step   10/10  train loss 0.2500"));
    assert_non_null(strstr(text, " tokens/s  ETA "));
    assert_non_null(strstr(text, " examples/s  ETA "));  /* the default unit */
    assert_non_null(strstr(text, "done in"));
    assert_null(strchr(text, '\r'));                  /* no terminal control in a log */
    free(text);

    double t0 = now_seconds(), t1 = now_seconds();
    assert_true(t1 >= t0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_wraps_last_error),
        cmocka_unit_test(test_make_dirs),
        cmocka_unit_test(test_write_file_atomic),
        cmocka_unit_test(test_atomic_open_close),
        cmocka_unit_test(test_read_plain_and_gzip),
        cmocka_unit_test(test_corrupt_gzip),
        cmocka_unit_test(test_truncated_gzip),
        cmocka_unit_test(test_aligned_allocation),
        cmocka_unit_test(test_results_json),
        cmocka_unit_test(test_results_long_value_is_cut_cleanly),
        cmocka_unit_test(test_results_eval_dir),
        cmocka_unit_test(test_progress_plain_lines),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
