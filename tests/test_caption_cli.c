/* test_caption_cli.c - what a user types at build/07_caption (chapter 07's
 * captioning program): bad flags, values and files get one clear error and
 * exit code 1 (never a crash); the good paths work: a short training run of
 * each model, --load (evaluation into its own directory), --load --image
 * with the scene --compose wrote, the panels' files; the CNN encoder from a
 * 07_cnn checkpoint, frozen, trained and loaded. The runs need
 * Fashion-MNIST and are skipped without it.
 *
 * The program is found next to this test's binary (<build>/tests/..), so the
 * sanitizer build tests the sanitizer binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "data/fashion_mnist.h"
#include "program_run.h"
#include "temp_dir.h"

static char build_dir[1024];
static char tmp_dir[256];

/* "<build>/07_caption <args>" through the shell, both streams captured. */
static void run(RunResult *r, const char *args) {
    program_run(r, build_dir, "07_caption", args, tmp_dir);
}

/* Exit code 1 and one error line that mentions expect. */
static void expect_error(const char *args, const char *expect) {
    RunResult *r = malloc(sizeof *r);
    run(r, args);
    if (!program_failed_cleanly(r, expect))
        print_error("%s %s\n  exit %d (exited normally: %d)\n  stderr: %s\n  expected exit 1 and one error line "
                    "mentioning '%s'\n", "07_caption", args, r->code, r->exited, r->err, expect);
    assert_true(program_failed_cleanly(r, expect));
    free(r);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int have_data(void) {
    if (exists(FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz")) return 1;
    printf("[  SKIP    ] Fashion-MNIST is not installed (%s)\n", FASHION_MNIST_DIR);
    return 0;
}

static void test_flags(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    run(r, "--help");
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "--model"));
    assert_non_null(strstr(r->out, "--compose"));
    assert_null(strstr(r->out, "--task"));         /* the token tasks' flags are not offered */
    assert_null(strstr(r->out, "--translate"));
    free(r);
    expect_error("--model lstm", "--model");
    expect_error("--grid 4", "--grid");
    expect_error("--task dates", "--task");
    expect_error("--translate hello", "--translate");
    expect_error("--image scene.pgm", "--load");
    expect_error("--to scene.pgm", "--compose");
    expect_error("--freeze-encoder", "--encoder cnn");
    expect_error("--encoder cnn --freeze-encoder", "--pretrained");
    expect_error("--encoder cnn --patch 4", "--patch");
    expect_error("--filters 4", "--encoder cnn");
    expect_error("--encoder resnet", "vit, cnn");
    expect_error("--compose 1,2,3", "--to");
    char args[1024];
    snprintf(args, sizeof args, "--compose 1,2,3 --to %s/s.pgm", tmp_dir);
    expect_error(args, "expected 4");
    snprintf(args, sizeof args, "--compose 1,x,3,4 --to %s/s.pgm", tmp_dir);
    expect_error(args, "'x'");
    snprintf(args, sizeof args, "--compose 1,2,3,10000 --to %s/s.pgm", tmp_dir);
    expect_error(args, "'10000'");
    snprintf(args, sizeof args, "--data %s/no_such_dir --steps 1 --out %s/x", tmp_dir, tmp_dir);
    expect_error(args, "no_such_dir");
    if (!have_data()) return;
    snprintf(args, sizeof args, "--patch 5 --steps 1 --train-scenes 10 --valid-scenes 2 --test-scenes 2 --out %s/x",
             tmp_dir);
    expect_error(args, "patch");
    snprintf(args, sizeof args, "--heads 3 --steps 1 --train-scenes 10 --valid-scenes 2 --test-scenes 2 --out %s/x",
             tmp_dir);
    expect_error(args, "heads=3");
}

/* Train each model a few steps, then --load it: the evaluation, a scene from
 * --compose captioned with its panels, and bad inputs refused. */
static void test_runs(void **state) {
    (void)state;
    if (!have_data()) return;
    static const char *const models[] = {"pool", "attend", "transformer"};
    RunResult *r = malloc(sizeof *r);
    char args[2048], path[1200];
    snprintf(path, sizeof path, "%s/scene.pgm", tmp_dir);
    snprintf(args, sizeof args, "--compose 12,-,345,7 --to %s", path);
    run(r, args);
    assert_int_equal(r->code, 0);
    assert_true(exists(path));
    assert_non_null(strstr(r->out, "its caption: "));
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args,
                 "--model %s --steps 3 --batch 4 --train-scenes 40 --valid-scenes 4 --test-scenes 6 --pictures 1 "
                 "--dim 16 --heads 2 --ff 16 --layers 1 --quiet --threads 1 --out %s/%s",
                 models[i], tmp_dir, models[i]);
        run(r, args);
        if (r->code != 0) print_error("%s\n", r->err);
        assert_int_equal(r->code, 0);
        assert_non_null(strstr(r->out, "exact match"));
        assert_non_null(strstr(r->out, "Exact match by items in the scene"));
        snprintf(path, sizeof path, "%s/%s/results.json", tmp_dir, models[i]);
        assert_true(exists(path));
        snprintf(path, sizeof path, "%s/%s/caption_test0.gp", tmp_dir, models[i]);
        assert_true(exists(path));

        /* --load: evaluation into eval_model, never over the training run's files */
        snprintf(args, sizeof args, "--load %s/%s/model.ckpt --threads 1 --pictures 0", tmp_dir, models[i]);
        char cwd_args[4096];
        snprintf(cwd_args, sizeof cwd_args, "%s --out %s/%s/eval", args, tmp_dir, models[i]);
        run(r, cwd_args);
        assert_int_equal(r->code, 0);
        snprintf(path, sizeof path, "%s/%s/eval/results.json", tmp_dir, models[i]);
        assert_true(exists(path));

        /* --load --image: the composed scene, captioned, one panel per word */
        snprintf(cwd_args, sizeof cwd_args, "%s --image %s/scene.pgm --out %s/%s/img", args, tmp_dir, tmp_dir,
                 models[i]);
        run(r, cwd_args);
        if (r->code != 0) print_error("%s\n", r->err);
        assert_int_equal(r->code, 0);
        assert_non_null(strstr(r->out, "scene: "));
        snprintf(path, sizeof path, "%s/%s/img/caption_scene.gp", tmp_dir, models[i]);
        assert_true(exists(path));
    }
    /* the CNN encoder, its convolutions from a 07_cnn run (the pretraining) and frozen: trains, loads, and
     * says so in results.json; a CNN of other filters refused */
    snprintf(args, sizeof args, "--steps 3 --batch 4 --filters 4 --test-size 20 --quiet --threads 1 "
             "--out %s/cnn", tmp_dir);
    program_run(r, build_dir, "07_cnn", args, tmp_dir);
    if (r->code != 0) print_error("%s\n", r->err);
    assert_int_equal(r->code, 0);
    const char *cnn_run = "--encoder cnn --steps 3 --batch 4 --train-scenes 40 --valid-scenes 4 --test-scenes 6 "
                          "--pictures 1 --dim 16 --heads 2 --ff 16 --quiet --threads 1";
    snprintf(args, sizeof args, "%s --filters 4 --pretrained %s/cnn/model_cnn.ckpt --freeze-encoder --out %s/frozen",
             cnn_run, tmp_dir, tmp_dir);
    run(r, args);
    if (r->code != 0) print_error("%s\n", r->err);
    assert_int_equal(r->code, 0);
    snprintf(path, sizeof path, "%s/frozen/results.json", tmp_dir);
    char *json = malloc(65536);
    read_text_file(path, json, 65536);
    assert_non_null(strstr(json, "\"encoder\": \"cnn\""));
    assert_non_null(strstr(json, "\"encoder_start\": \"pretrained\""));
    assert_non_null(strstr(json, "\"encoder_frozen\": 1"));
    free(json);
    snprintf(args, sizeof args, "--load %s/frozen/model.ckpt --image %s/scene.pgm --threads 1 --out %s/frozen/img",
             tmp_dir, tmp_dir, tmp_dir);
    run(r, args);
    if (r->code != 0) print_error("%s\n", r->err);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "scene: "));
    snprintf(args, sizeof args, "%s --pretrained %s/cnn/model_cnn.ckpt --out %s/bad", cnn_run, tmp_dir, tmp_dir);
    expect_error(args, "--filters 4");
    snprintf(args, sizeof args, "%s --filters 4 --pretrained %s/attend/model.ckpt --out %s/bad", cnn_run, tmp_dir,
             tmp_dir);
    expect_error(args, "07_cnn");

    /* bad inputs with a good checkpoint */
    snprintf(path, sizeof path, "%s/bad.pgm", tmp_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("P2\n2 2\n255\n0 0 0\n", f);   /* one pixel short */
    fclose(f);
    snprintf(args, sizeof args, "--load %s/attend/model.ckpt --image %s --out %s/bad", tmp_dir, path, tmp_dir);
    expect_error(args, "bad.pgm");
    snprintf(args, sizeof args, "--load %s/attend/model.ckpt --steps 5 --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "--steps");
    snprintf(args, sizeof args, "--load %s/scene.pgm --out %s/bad", tmp_dir, tmp_dir);
    expect_error(args, "scene.pgm");
    free(r);
}

int main(int argc, char **argv) {
    (void)argc;
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    if (temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_test_caption_cli") < 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_runs),
    };
    int failed = cmocka_run_group_tests_name("caption_cli", tests, NULL, NULL);
    temp_dir_remove(tmp_dir);
    return failed;
}
