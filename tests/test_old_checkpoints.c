/* test_old_checkpoints.c - checkpoints written by an older build still load
 * and give the same figures. tests/data/old_checkpoints/ holds one tiny
 * checkpoint per program (chapter 07's captioner: one per decoder), written
 * and evaluated by the build of the commit its README.md names (make.sh
 * there); expected.txt holds each evaluation command and the output lines it
 * printed then:
 *
 *   $ 04_self_attention --load tests/data/old_checkpoints/04_self_attention.ckpt --test-size 200 --quiet
 *     200 test examples of 'reverse': exact match 0.0%, token accuracy 39.6%
 *
 * Each command runs as <build>/PROGRAM FLAGS --out <tmp>, from the
 * repository's top folder (as make test runs it); it must exit 0 and print
 * every expected line (runs of spaces and line breaks count as one space).
 * One test per program; chapter 07's are skipped when Fashion-MNIST is not
 * installed. */
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

#include "data/fashion_mnist.h"

#define EXPECTED_FILE "tests/data/old_checkpoints/expected.txt"

static char build_dir[1024];
static char tmp_dir[256];

/* text with every run of whitespace made one space, and none at either end,
 * into out (cap bytes) */
static void collapse_spaces(char *out, size_t cap, const char *text) {
    size_t n = 0;
    int space = 0;
    for (const char *c = text; *c && n + 2 < cap; c++) {
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r') {
            space = n > 0;
            continue;
        }
        if (space) out[n++] = ' ';
        space = 0;
        out[n++] = *c;
    }
    out[n] = '\0';
}

/* Runs one command of expected.txt (FLAGS after "$ PROGRAM ") and checks its
 * expected lines (n_lines of them, each NUL-terminated, one after another in
 * lines). Returns 1 when it passed, 0 after printing why not. */
static int check_command(const char *program, const char *flags, const char *lines, int n_lines, int index) {
    char args[4096];
    snprintf(args, sizeof args, "%s --out %s/eval%d", flags, tmp_dir, index);
    RunResult *r = malloc(sizeof *r);
    char *out = malloc(sizeof r->out), want[1024];
    assert_non_null(r);
    assert_non_null(out);
    program_run(r, build_dir, program, args, tmp_dir);
    int ok = r->exited && r->code == 0;
    if (!ok) print_error("%s %s\n  exit %d; stderr:\n%s\n", program, args, r->code, r->err);
    collapse_spaces(out, sizeof r->out, r->out);
    const char *line = lines;
    for (int i = 0; ok && i < n_lines; i++, line += strlen(line) + 1) {
        collapse_spaces(want, sizeof want, line);
        if (!strstr(out, want)) {
            print_error("%s %s\n  expected the line  %s\n  (the checkpoint's figures when it was written), in:\n%s\n",
                        program, args, want, r->out);
            ok = 0;
        }
    }
    free(out);
    free(r);
    return ok;
}

/* Every command of expected.txt for program: each must pass, and there must
 * be at least one. */
static void check_program(const char *program) {
    FILE *f = fopen(EXPECTED_FILE, "r");
    if (!f) print_error("cannot read %s (run the tests from the repository's top folder)\n", EXPECTED_FILE);
    assert_non_null(f);
    char line[4096], flags[4096] = "", lines[8192];
    size_t used = 0;
    int n_lines = 0, commands = 0, failed = 0, mine = 0;
    for (;;) {
        int more = fgets(line, sizeof line, f) != NULL;
        line[strcspn(line, "\n")] = '\0';
        /* a command ends at the next one, a blank line or the end of the file */
        if (mine && (!more || line[0] == '\0' || strncmp(line, "$ ", 2) == 0)) {
            failed += !check_command(program, flags, lines, n_lines, commands);
            commands++;
            mine = 0;
        }
        if (!more) break;
        if (strncmp(line, "$ ", 2) == 0) {
            size_t len = strlen(program);
            mine = strncmp(line + 2, program, len) == 0 && line[2 + len] == ' ';
            if (mine) snprintf(flags, sizeof flags, "%s", line + 2 + len + 1);
            used = 0;
            n_lines = 0;
        } else if (mine && line[0] != '#' && line[0] != '\0') {
            size_t len = strlen(line) + 1;
            assert_true(used + len <= sizeof lines);
            memcpy(lines + used, line, len);
            used += len;
            n_lines++;
        }
    }
    fclose(f);
    if (commands == 0) print_error("%s has no command for %s\n", EXPECTED_FILE, program);
    assert_int_not_equal(commands, 0);
    assert_int_equal(failed, 0);
}

static int fashion_mnist_installed(void) {
    struct stat st;
    return stat(FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", &st) == 0;
}

static void test_01_rnn_seq2seq(void **state) { (void)state; check_program("01_rnn_seq2seq"); }
static void test_02_bahdanau_attention(void **state) { (void)state; check_program("02_bahdanau_attention"); }
static void test_03_dot_product_attention(void **state) { (void)state; check_program("03_dot_product_attention"); }
static void test_04_self_attention(void **state) { (void)state; check_program("04_self_attention"); }
static void test_05_multi_head_attention(void **state) { (void)state; check_program("05_multi_head_attention"); }
static void test_06_transformer(void **state) { (void)state; check_program("06_transformer"); }
static void test_06_gpt(void **state) { (void)state; check_program("06_gpt"); }

static void test_07_vision_transformer(void **state) {
    (void)state;
    if (!fashion_mnist_installed()) skip();
    check_program("07_vision_transformer");
}

static void test_07_caption(void **state) {
    (void)state;
    if (!fashion_mnist_installed()) skip();
    check_program("07_caption");
}

int main(int argc, char **argv) {
    (void)argc;
    /* argv[0] is <build>/tests/test_old_checkpoints */
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    if (temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_test_old_checkpoints") < 0) return 1;
    /* the figures, not the pictures: with no gnuplot on PATH the programs
     * draw nothing (common/io/plot.c), which saves most of the time */
    char *path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    setenv("PATH", "", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_01_rnn_seq2seq),
        cmocka_unit_test(test_02_bahdanau_attention),
        cmocka_unit_test(test_03_dot_product_attention),
        cmocka_unit_test(test_04_self_attention),
        cmocka_unit_test(test_05_multi_head_attention),
        cmocka_unit_test(test_06_transformer),
        cmocka_unit_test(test_06_gpt),
        cmocka_unit_test(test_07_vision_transformer),
        cmocka_unit_test(test_07_caption),
    };
    int failed = cmocka_run_group_tests_name("old_checkpoints", tests, NULL, NULL);
    if (path) setenv("PATH", path, 1);   /* temp_dir_remove runs rm */
    free(path);
    if (temp_dir_remove(tmp_dir) < 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return failed;
}
