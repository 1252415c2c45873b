/* test_robust_determinism.c - every chapter's program, run twice with the
 * same seed, backend and thread count, writes a byte-identical checkpoint
 * (a tiny run of each: a step or two at a few units of width).
 *
 * Each program runs with --threads 2 (so the work is split between threads
 * as on this 2-core machine, and a reduction whose order depended on the
 * scheduling would show) and its default backend; chapter 07's ViT a second
 * time with --replicas 2 (two copies of the model, one thread each, with
 * dropout: each copy draws its own masks). The programs are found
 * next to this test's binary: <build>/tests/test_robust_determinism runs
 * <build>/01_rnn_seq2seq and so on. Chapter 07's two programs are skipped when Fashion-MNIST
 * is not installed (tools/deps.sh test installs it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "program_run.h"
#include "temp_dir.h"
#include "util/util.h"

static char build_dir[1024];
static char tmp_dir[256];

typedef struct {
    const char *program, *args, *ckpt;   /* ckpt: relative to the --out directory */
} Run;

static const Run RUNS[] = {
    {"01_rnn_seq2seq", "--steps 2 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0", "model.ckpt"},
    {"02_bahdanau_attention", "--steps 2 --state 8 --embed 4 --attn 4 --n-train 50 --max-eval 5 --samples 0",
     "model.ckpt"},
    {"03_dot_product_attention", "--steps 2 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0", "model.ckpt"},
    {"04_self_attention", "--task reverse --pos learned --steps 2 --dim 8 --ff 8 --layers 1 --batch 8 --test-size 5",
     "model_reverse_learned.ckpt"},
    {"05_multi_head_attention",
     "--task neighbours --heads 2 --steps 2 --dim 8 --ff 8 --batch 8 --test-size 5 --scale-max-len 0",
     "model_neighbours_h2.ckpt"},
    {"06_transformer", "--steps 2 --dim 8 --heads 2 --ff 8 --layers 1 --n-train 50 --max-eval 5 --samples 0",
     "model.ckpt"},
    {"06_gpt", "--tokens char --steps 2 --layers 1 --dim 8 --heads 2 --ff 8 --context 8 --batch 2 --eval-every 0 "
               "--eval-max-tokens 50 --max-new 2",
     "model.ckpt"},
    {"07_vision_transformer", "--steps 2 --dim 8 --heads 2 --ff 8 --layers 1 --patch 14 --batch 4 --test-size 5 "
                              "--pictures 0",
     "model_vit_p14.ckpt"},
    {"07_vision_transformer", "--steps 2 --dim 8 --heads 2 --ff 8 --layers 1 --patch 14 --batch 5 --test-size 5 "
                              "--pictures 0 --replicas 2 --dropout 0.1",
     "model_vit_p14.ckpt"},
    {"07_caption", "--model transformer --steps 2 --batch 4 --train-scenes 40 --valid-scenes 4 --test-scenes 6 "
                   "--pictures 0 --samples 0 --dim 16 --heads 2 --ff 16 --layers 1",
     "model.ckpt"},
};

/* Run the program into <tmp>/<program>_<tag>; the checkpoint's bytes (malloc'd). */
static char *run_once(const Run *r, const char *tag, size_t *len) {
    char out[600], cmd[4096];
    snprintf(out, sizeof out, "%s/%s_%s", tmp_dir, r->program, tag);
    snprintf(cmd, sizeof cmd, "%s/%s %s --seed 3 --threads 2 --quiet --out %s >%s.log 2>&1 </dev/null", build_dir,
             r->program, r->args, out, out);
    int status = system(cmd);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char log[700];
        snprintf(log, sizeof log, "%s.log", out);
        size_t n;
        char *text = read_whole_file(log, &n);
        print_error("%s failed:\n%s\n", cmd, text ? text : "(no log)");
        free(text);
        fail();
    }
    char path[700];
    snprintf(path, sizeof path, "%s/%s", out, r->ckpt);
    char *bytes = read_whole_file(path, len);
    if (bytes == NULL) print_error("%s wrote no %s\n", r->program, path);
    assert_non_null(bytes);
    return bytes;
}

static void check_program(const Run *r) {
    size_t la, lb;
    char *a = run_once(r, "a", &la);
    char *b = run_once(r, "b", &lb);
    if (la != lb || memcmp(a, b, la) != 0)
        print_error("%s: two runs with the same seed, backend and threads wrote different checkpoints "
                    "(%zu and %zu bytes)\n", r->program, la, lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
}

static void test_chapter(void **state) {
    const Run *r = *state;
    if (strncmp(r->program, "07_", 3) == 0) {   /* chapter 07's two programs read Fashion-MNIST */
        struct stat st;
        if (stat("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", &st) != 0) skip();
    }
    check_program(r);
}

int main(int argc, char **argv) {
    (void)argc;
    /* argv[0] is <build>/tests/test_robust_determinism */
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    if (temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_determinism") != 0) return 1;
    enum { N_RUNS = sizeof RUNS / sizeof RUNS[0] };
    struct CMUnitTest tests[N_RUNS];
    for (int i = 0; i < N_RUNS; i++)
        tests[i] = (struct CMUnitTest){RUNS[i].program, test_chapter, NULL, NULL, (void *)&RUNS[i]};
    int failed = cmocka_run_group_tests_name("determinism", tests, NULL, NULL);
    temp_dir_remove(tmp_dir);
    return failed;
}
