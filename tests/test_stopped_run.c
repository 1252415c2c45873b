/* test_stopped_run.c - a run stopped before its end keeps its weights:
 *  - Ctrl-C (SIGINT) in the middle of 06_gpt's training ends the step in
 *    flight, writes the weights so far (model_so_far.ckpt, which --load
 *    reads) and exits 1 with one line saying where they are and that
 *    --force trains anew;
 *  - the same command again refuses to replace them (the file's bytes stay),
 *    in every driver (06_gpt, the seq2seq programs, the classifiers);
 *  - with --force it trains, and its final checkpoint replaces them;
 *  - with --resume it goes on from them, to the bytes of a run never stopped. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "program_run.h"
#include "temp_dir.h"
#include "util/util.h"

static char build_dir[1024];
static char tmp_dir[256];
static char repo_dir[1024];   /* the working directory at start: data/ is there */

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#define GPT_ARGS "--layers 1 --dim 8 --heads 2 --ff 8 --context 16 --batch 2 --eval-every 1 --eval-tokens 20 " \
                 "--eval-max-tokens 300 --max-new 5 --threads 1 --quiet"

/* Start program with args (and --out out) in a child whose stderr goes
 * to err_path; settle_ms after so_far is on disk, SIGINT. Returns the
 * child's status (also when it ended before so_far appeared). */
static int run_and_interrupt(const char *program, const char *args, const char *out, const char *so_far,
                             const char *err_path, long settle_ms) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", build_dir, program);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), null = open("/dev/null", O_WRONLY);
        if (err < 0 || null < 0 || dup2(err, 2) < 0 || dup2(null, 1) < 0) _exit(99);
        signal(SIGINT, SIG_DFL);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "exec '%s' %s --out '%s'", path, args, out);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(98);
    }
    int status = 0;
    for (int i = 0; i < 60000 && !exists(so_far); i++) {   /* the first weights so far (1 ms polls) */
        if (waitpid(pid, &status, WNOHANG) == pid) return status;
        sleep_ms(1);
    }
    sleep_ms(settle_ms);
    kill(pid, SIGINT);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

/* 06_gpt of 100000 steps, a curve point (and the weights so far) at every
 * step, stopped by SIGINT once the first weights so far are on disk. */
static void test_interrupt_keeps_the_weights(void **state) {
    (void)state;
    char out[512], so_far[600], err_path[600];
    snprintf(out, sizeof out, "%s/gpt", tmp_dir);
    snprintf(so_far, sizeof so_far, "%s/model_so_far.ckpt", out);
    snprintf(err_path, sizeof err_path, "%s/gpt.err", tmp_dir);
    /* (the corpus and its baselines come first); a few steps more after
     * the first weights so far: the interrupt falls in the middle */
    const int status = run_and_interrupt("06_gpt", "--steps 100000 " GPT_ARGS, out, so_far, err_path, 200);
    assert_true(exists(so_far));
    char err[8192];
    read_text_file(err_path, err, sizeof err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1)
        print_error("06_gpt after SIGINT: status %d, stderr: %s\n", status, err);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_non_null(strstr(err, "interrupted (Ctrl-C) after step "));
    assert_non_null(strstr(err, "--force trains anew"));
    char model[600];
    snprintf(model, sizeof model, "%s/model.ckpt", out);
    assert_false(exists(model));   /* no final checkpoint: the run did not end */

    /* the weights so far load */
    RunResult *r = malloc(sizeof *r);
    char args[2048];
    snprintf(args, sizeof args, "--load %s --prompt 'The jury' --max-new 5 --out %s/gpt_eval", so_far, tmp_dir);
    char cmd_dir[1100];
    snprintf(cmd_dir, sizeof cmd_dir, "%s", build_dir);
    program_run(r, cmd_dir, "06_gpt", args, tmp_dir);
    if (r->code != 0) print_error("--load so far: %s\n", r->err);
    assert_int_equal(r->code, 0);

    /* the same command again: refused, the file as it was */
    size_t before_len, after_len;
    char *before = read_whole_file(so_far, &before_len);
    assert_non_null(before);
    snprintf(args, sizeof args, "--steps 3 " GPT_ARGS " --out %s", out);
    program_run(r, build_dir, "06_gpt", args, tmp_dir);
    assert_true(program_failed_cleanly(r, "add --force to train anew over them"));
    char *after = read_whole_file(so_far, &after_len);
    assert_non_null(after);
    assert_true(before_len == after_len && memcmp(before, after, before_len) == 0);
    free(before);
    free(after);

    /* --force: trains, and the final checkpoint replaces the weights so far */
    snprintf(args, sizeof args, "--steps 3 " GPT_ARGS " --force --out %s", out);
    program_run(r, build_dir, "06_gpt", args, tmp_dir);
    if (r->code != 0) print_error("--force: %s\n", r->err);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "note: --force: "));
    assert_true(exists(model));
    assert_false(exists(so_far));
    free(r);
}

/* The seq2seq and classifier drivers refuse a --out with a stopped run's
 * weights so far too (a file of that name is enough: the check reads no
 * bytes), and take --force. */
static void test_every_driver_refuses(void **state) {
    (void)state;
    const char *programs[][2] = {{"01_rnn_seq2seq", "--steps 1 --state 8 --embed 4 --n-train 100 --max-eval 5 "
                                                    "--samples 0 --quiet"},
                                 {"04_self_attention", "--steps 1 --test-size 10 --quiet"}};
    RunResult *r = malloc(sizeof *r);
    for (int i = 0; i < 2; i++) {
        char out[600], so_far[700], args[2048];
        snprintf(out, sizeof out, "%s/stopped_%d", tmp_dir, i);
        assert_int_equal(make_dirs(out), 0);
        snprintf(so_far, sizeof so_far, "%s/model_x_so_far.ckpt", out);
        FILE *f = fopen(so_far, "w");
        assert_non_null(f);
        fputs("weights", f);
        fclose(f);
        snprintf(args, sizeof args, "%s --out %s", programs[i][1], out);
        program_run(r, build_dir, programs[i][0], args, tmp_dir);
        if (!program_failed_cleanly(r, "--force"))
            print_error("%s: exit %d, stderr %s\n", programs[i][0], r->code, r->err);
        assert_true(program_failed_cleanly(r, "model_x_so_far.ckpt holds the weights of a run that stopped"));
        snprintf(args, sizeof args, "%s --force --out %s", programs[i][1], out);
        program_run(r, build_dir, programs[i][0], args, tmp_dir);
        if (r->code != 0) print_error("%s --force: %s\n", programs[i][0], r->err);
        assert_int_equal(r->code, 0);
    }
    free(r);
}

static int same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = read_whole_file(a, &na), *y = read_whole_file(b, &nb);
    const int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* One run of each driver (the GPT; the seq2seq programs' transformer; the
 * classifiers' ViT with a moving average), each with dropout so that the
 * model's own random stream matters: stopped by SIGINT after its first
 * checkpoint so far, then the same command with --resume, ends with the
 * checkpoint and loss curve of the same run left alone, to the byte. */
static void test_resume_gives_the_uninterrupted_bits(void **state) {
    (void)state;
    static const char *const runs[][3] = {
        {"06_gpt", "--steps 20000 --eval-every 100 --dropout 0.1 --layers 1 --dim 8 --heads 2 --ff 8 --context 16 "
                   "--batch 2 --eval-tokens 20 --eval-max-tokens 300 --max-new 5 --threads 1 --quiet",
         "model.ckpt"},
        {"06_transformer", "--steps 600 --eval-every 20 --dropout 0.1 --dim 8 --heads 2 --ff 8 --layers 1 "
                           "--n-train 200 --max-eval 10 --samples 0 --threads 1 --quiet",
         "model.ckpt"},
        {"07_vision_transformer", "--steps 1500 --eval-every 20 --dropout 0.1 --ema 0.99 --dim 8 --heads 2 --ff 8 "
                                  "--layers 1 --patch 14 --batch 4 --test-size 5 --threads 1 --quiet",
         "model_vit_p14.ckpt"},
    };
    RunResult *r = malloc(sizeof *r);
    for (int i = 0; i < 3; i++) {
        const char *program = runs[i][0], *args = runs[i][1], *name = runs[i][2];
        char whole[600], part[600], err_path[700], so_far[800], a[900], b[900], cmd[4096];
        snprintf(whole, sizeof whole, "%s/whole_%d", tmp_dir, i);
        snprintf(part, sizeof part, "%s/part_%d", tmp_dir, i);
        snprintf(err_path, sizeof err_path, "%s/part_%d.err", tmp_dir, i);
        snprintf(so_far, sizeof so_far, "%s/%.*s_so_far.ckpt", part, (int)(strlen(name) - 5), name);
        snprintf(cmd, sizeof cmd, "%s --out %s", args, whole);
        program_run(r, build_dir, program, cmd, tmp_dir);
        if (r->code != 0) print_error("%s: %s\n", program, r->err);
        assert_int_equal(r->code, 0);

        const int status = run_and_interrupt(program, args, part, so_far, err_path, 0);
        char err[8192];
        read_text_file(err_path, err, sizeof err);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 || !strstr(err, "with --resume continues"))
            print_error("%s after SIGINT: status %d (the run may have ended first), stderr: %s\n", program, status,
                        err);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
        assert_non_null(strstr(err, "with --resume continues the run"));

        snprintf(cmd, sizeof cmd, "%s --resume --out %s", args, part);
        program_run(r, build_dir, program, cmd, tmp_dir);
        if (r->code != 0) print_error("%s --resume: %s\n", program, r->err);
        assert_int_equal(r->code, 0);
        assert_non_null(strstr(r->out, "resuming "));
        assert_false(exists(so_far));   /* the final checkpoint replaced it */
        snprintf(a, sizeof a, "%s/%s", whole, name);
        snprintf(b, sizeof b, "%s/%s", part, name);
        if (!same_bytes(a, b)) print_error("%s: %s and %s differ\n", program, a, b);
        assert_true(same_bytes(a, b));
        snprintf(a, sizeof a, "%s/loss.dat", whole);
        snprintf(b, sizeof b, "%s/loss.dat", part);
        assert_true(same_bytes(a, b));
    }
    free(r);
}

/* --resume where there is nothing to resume, or with --force: one line each. */
static void test_resume_refusals(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    char args[2048];
    snprintf(args, sizeof args, "--steps 3 " GPT_ARGS " --resume --out %s/nothing_here", tmp_dir);
    program_run(r, build_dir, "06_gpt", args, tmp_dir);
    assert_true(program_failed_cleanly(r, "holds no stopped run"));
    snprintf(args, sizeof args, "--steps 1 --test-size 10 --quiet --resume --out %s/nothing_here", tmp_dir);
    program_run(r, build_dir, "04_self_attention", args, tmp_dir);
    assert_true(program_failed_cleanly(r, "holds no stopped run"));
    snprintf(args, sizeof args, "--steps 1 --state 8 --embed 4 --n-train 100 --quiet --resume --force --out %s/x",
             tmp_dir);
    program_run(r, build_dir, "01_rnn_seq2seq", args, tmp_dir);
    assert_true(program_failed_cleanly(r, "give one of them"));
    free(r);
}

static int setup(void **state) {
    (void)state;
    if (!getcwd(repo_dir, sizeof repo_dir)) return -1;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_stopped_run");
}

static int teardown(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

int main(int argc, char **argv) {
    (void)argc;
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    char absolute[PATH_MAX];
    if (realpath(build_dir, absolute) && strlen(absolute) < sizeof build_dir) strcpy(build_dir, absolute);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interrupt_keeps_the_weights),
        cmocka_unit_test(test_every_driver_refuses),
        cmocka_unit_test(test_resume_gives_the_uninterrupted_bits),
        cmocka_unit_test(test_resume_refusals),
    };
    return cmocka_run_group_tests_name("stopped_run", tests, setup, teardown);
}
