/* test_genre_cli.c - what a user types at build/06_gpt_genre (chapter 06, part
 * 6: a pretrained GPT fine-tuned to tell a passage's genre): a tiny GPT
 * trained by build/06_gpt, then each of the three ways trained on a few
 * labelled passages, its results and checkpoints, --load of one; and bad
 * flags, values and checkpoints each get one clear error and exit code 1
 * (never a crash). Run from the repository root (the Brown corpus at its
 * default path, data/brown.txt.gz), as make test does.
 *
 * The programs are found next to this test's binary (<build>/tests/..), so
 * the sanitizer build tests the sanitizer binaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "program_run.h"
#include "temp_dir.h"

static char build_dir[1024];
static char tmp_dir[256];

static void run(RunResult *r, const char *program, const char *args) {
    program_run(r, build_dir, program, args, tmp_dir);
}

/* Exit code 1 and one error line that mentions expect. */
static void expect_error(const char *args, const char *expect) {
    RunResult *r = malloc(sizeof *r);
    run(r, "06_gpt_genre", args);
    if (!program_failed_cleanly(r, expect))
        print_error("06_gpt_genre %s\n  exit %d (exited normally: %d)\n  stderr: %s\n  expected exit 1 and one error line "
                    "mentioning '%s'\n", args, r->code, r->exited, r->err, expect);
    assert_true(program_failed_cleanly(r, expect));
    free(r);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void test_help(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    run(r, "06_gpt_genre", "--help");
    assert_int_equal(r->code, 0);
    int lines = 0;
    for (const char *c = r->out; *c; c++) lines += *c == '\n';
    assert_true(lines <= 60);
    const char *flags[] = {"--gpt", "--runs", "--per-genre", "--split", "--data", "--steps", "--lr", "--load"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) assert_non_null(strstr(r->out, flags[i]));
    free(r);
}

static void test_runs(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    char args[2048], path[1024], json[16384];
    /* a tiny pretrained GPT */
    snprintf(args, sizeof args, "--steps 2 --layers 1 --dim 8 --heads 2 --ff 8 --context 16 --batch 2 --eval-every 0 "
             "--eval-max-tokens 300 --max-new 5 --quiet --out %s/gpt", tmp_dir);
    run(r, "06_gpt", args);
    if (r->code != 0) print_error("06_gpt %s: %s\n", args, r->err);
    assert_int_equal(r->code, 0);
    /* the three ways on 2 labelled passages per genre */
    snprintf(args, sizeof args, "--gpt %s/gpt/model.ckpt --per-genre 2 --steps 3 --batch 4 --eval-every 0 "
             "--test-size 30 --quiet --out %s/genre", tmp_dir, tmp_dir);
    run(r, "06_gpt_genre", args);
    if (r->code != 0) print_error("06_gpt_genre %s: %s\n", args, r->err);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "30 labelled passages (15 genres; 2 per genre), 30 evaluated of the test texts"));
    const char *keys[] = {"scratch", "probe", "finetune"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/genre/model_%s.ckpt", tmp_dir, keys[k]);
        assert_true(exists(path));
        snprintf(path, sizeof path, "%s/genre/confusion_%s.gp", tmp_dir, keys[k]);   /* with or without gnuplot */
        assert_true(exists(path));
    }
    snprintf(path, sizeof path, "%s/genre/results.json", tmp_dir);
    read_text_file(path, json, sizeof json);
    assert_non_null(strstr(json, "\"labelled\": 30"));
    assert_non_null(strstr(json, "\"split\": \"test\""));
    assert_non_null(strstr(json, "\"test_n\": 30"));
    assert_non_null(strstr(json, "\"headline\": \"finetune\""));
    assert_non_null(strstr(json, "\"probe_trained_parameters\": 135"));   /* the head: D 8 x 15 + 15 */
    assert_non_null(strstr(json, "\"finetune_acc_r\": "));
    /* a saved model evaluated again */
    snprintf(args, sizeof args, "--load %s/genre/model_finetune.ckpt --test-size 30 --out %s/eval", tmp_dir, tmp_dir);
    run(r, "06_gpt_genre", args);
    if (r->code != 0) print_error("06_gpt_genre %s: %s\n", args, r->err);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "30 test examples of 'brown_genre'"));

    /* bad flags and files, each refused by name */
    snprintf(args, sizeof args, "--gpt %s/gpt/model.ckpt --runs scratch,bogus --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "'bogus' is not a run");
    snprintf(args, sizeof args, "--gpt %s/gpt/model.ckpt --runs probe,probe --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "probe twice");
    snprintf(args, sizeof args, "--gpt %s/gpt/model.ckpt --runs probe --weight-decay 0.1 --out %s/bad", tmp_dir,
             tmp_dir);
    expect_error(args, "--weight-decay");
    snprintf(args, sizeof args, "--gpt %s/missing.ckpt --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "missing.ckpt");
    snprintf(args, sizeof args, "--gpt %s/genre/model_probe.ckpt --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "06_gpt");
    snprintf(args, sizeof args, "--gpt %s/gpt/model.ckpt --test-size 5000 --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "--test-size 5000");
    snprintf(args, sizeof args, "--gpt %s/gpt/model.ckpt --split train --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "--split");
    snprintf(args, sizeof args, "--load %s/genre/model_probe.ckpt --per-genre 5 --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "--per-genre");
    snprintf(args, sizeof args, "--load %s/gpt/model.ckpt --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "06_gpt_genre");
    /* and the genre model given to the GPT's program: named as the chapter that wrote it */
    snprintf(args, sizeof args, "--load %s/genre/model_finetune.ckpt --out %s/bad", tmp_dir, tmp_dir);
    run(r, "06_gpt", args);
    if (!program_failed_cleanly(r, "a checkpoint of chapter 06_gpt_genre"))
        print_error("06_gpt %s\n  exit %d\n  stderr: %s\n", args, r->code, r->err);
    assert_true(program_failed_cleanly(r, "a checkpoint of chapter 06_gpt_genre"));
    free(r);
}

int main(int argc, char **argv) {
    (void)argc;
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    if (temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_test_genre_cli") < 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_runs),
    };
    int failed = cmocka_run_group_tests_name("genre_cli", tests, NULL, NULL);
    temp_dir_remove(tmp_dir);
    return failed;
}
