/* test_coursework.c - the coursework mode end to end (README.md,
 * "Coursework"; tools/coursework.py, tools/coursework_grade.py,
 * tests/coursework/):
 *
 *  - the graders give the solution full marks, every chapter (make grade here);
 *  - tools/coursework.py writes every chapter's student tree, and checks that
 *    each file it stubbed compiles without a warning;
 *  - chapter 04's tree is built for real with warnings as errors, and make
 *    grade there scores 0 with one "not written yet" per exercise and no crash;
 *    each exercise put back alone (--keep) turns exactly its own points green;
 *    all of them put back give full marks. After --keep the tree is written
 *    again in place, only the changed files, so those rebuilds are short.
 *
 * The trees go to a fresh folder under /tmp. The graders and the tools are
 * found from this test's own binary (<build>/tests/test_coursework) and the
 * current directory (make test runs from the repository's top). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "temp_dir.h"

#define CHAPTER "04"
#define CHAPTER_TREE "04_self_attention"
#define MAX_EXERCISES 8

static char build_dir[1024];   /* relative to the repository's top, as make's BUILD */
static char tmp_dir[256];

/* Runs a shell command with make's own variables removed (a nested make
 * must not join the outer one's jobs); its output goes to <tmp>/log.
 * Returns the exit code, or -1 when it was killed by a signal. */
static int shell(const char *cmd) {
    char full[4096];
    snprintf(full, sizeof full, "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL sh -c '%s' >%s/log 2>&1 </dev/null", cmd, tmp_dir);
    int status = system(full);
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void print_log(void) {
    char path[512], line[1024];
    snprintf(path, sizeof path, "%s/log", tmp_dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    while (fgets(line, sizeof line, f)) print_message("    %s", line);
    fclose(f);
}

/* One row of a grade.json (tools/coursework_grade.py writes one per line). */
typedef struct {
    char id[64], message[512];
    int points, earned;
} Row;

static int field_int(const char *line, const char *key) {
    const char *p = strstr(line, key);
    return p ? atoi(p + strlen(key)) : -1;
}

static void field_text(const char *line, const char *key, char *out, size_t cap) {
    const char *p = strstr(line, key);
    out[0] = '\0';
    if (p == NULL) return;
    p += strlen(key);
    size_t n = 0;
    while (*p && !(*p == '"' && p[-1] != '\\') && n + 1 < cap) out[n++] = *p++;
    out[n] = '\0';
}

/* The rows of a grade.json; returns their number. */
static int read_grades(const char *path, Row *rows, int cap) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        if (strncmp(line, "{\"id\": \"", 8) != 0) continue;
        field_text(line, "\"id\": \"", rows[n].id, sizeof rows[n].id);
        field_text(line, "\"message\": \"", rows[n].message, sizeof rows[n].message);
        rows[n].points = field_int(line, "\"points\": ");
        rows[n].earned = field_int(line, "\"earned\": ");
        n++;
    }
    fclose(f);
    return n;
}

/* ------------------------------------------------------------ the solution */

static void solution_gets_full_marks(void **state) {
    (void)state;
    char cmd[2048], json[512];
    snprintf(json, sizeof json, "%s/solution_grade.json", tmp_dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/coursework_grade.py --build %s --json %s", build_dir, json);
    if (shell(cmd) != 0) {
        print_log();
        fail_msg("tools/coursework_grade.py failed on the solution");
    }
    Row rows[64];
    const int n = read_grades(json, rows, 64);
    assert_true(n >= 14);   /* 2-5 exercises in each of chapters 01-07 */
    for (int i = 0; i < n; i++)
        if (rows[i].earned != rows[i].points || rows[i].points <= 0) {
            print_log();
            fail_msg("the solution's %s: %d of %d points: %s", rows[i].id, rows[i].earned, rows[i].points, rows[i].message);
        }
}

/* ------------------------------------------------------------ the student trees */

static void every_tree_is_written(void **state) {
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/coursework.py --out %s/trees", tmp_dir);
    if (shell(cmd) != 0) {
        print_log();
        fail_msg("tools/coursework.py could not write every chapter's tree");
    }
}

/* The chapter's exercise ids, from tools/coursework.py --list. */
static int exercise_ids(char ids[MAX_EXERCISES][64]) {
    char path[512], line[512];
    if (shell("/usr/bin/python3 tools/coursework.py --list --chapter " CHAPTER) != 0) {
        print_log();
        fail_msg("tools/coursework.py --list failed");
    }
    snprintf(path, sizeof path, "%s/log", tmp_dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int n = 0;
    while (n < MAX_EXERCISES && fgets(line, sizeof line, f) && sscanf(line, "%63s", ids[n]) == 1) n++;
    fclose(f);
    return n;
}

/* Writes the tree with the exercises in keep ("" none, "all"), builds it with
 * warnings as errors, grades it, and checks every row: kept exercises get
 * their points, the others none and the message of a TODO stub. */
static void grade_tree(const char *keep, char ids[MAX_EXERCISES][64], int n_ids) {
    char cmd[2048], json[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/coursework.py --chapter %s --out %s/trees%s%s", CHAPTER, tmp_dir,
             keep[0] ? " --keep " : "", keep);
    if (shell(cmd) != 0) {
        print_log();
        fail_msg("tools/coursework.py --keep '%s' failed", keep);
    }
    /* the student's build (build/, no sanitizers) even when this test runs under make test-san */
    snprintf(cmd, sizeof cmd, "make -C %s/trees/%s -j2 CI=true SAN= BUILD=build grade", tmp_dir, CHAPTER_TREE);
    if (shell(cmd) != 0) {
        print_log();
        fail_msg("the student tree (exercises kept: '%s') does not build warning-free, or make grade failed", keep);
    }
    Row rows[MAX_EXERCISES];
    snprintf(json, sizeof json, "%s/trees/%s/build/coursework/grade.json", tmp_dir, CHAPTER_TREE);
    const int n = read_grades(json, rows, MAX_EXERCISES);
    assert_int_equal(n, n_ids);
    for (int i = 0; i < n; i++) {
        const int kept = strcmp(keep, "all") == 0 || strcmp(keep, rows[i].id) == 0;
        const int want = kept ? rows[i].points : 0;
        if (strcmp(rows[i].id, ids[i]) != 0 || rows[i].earned != want ||
            (!kept && strstr(rows[i].message, "not written yet") == NULL)) {
            print_log();
            fail_msg("exercises kept '%s': %s got %d of %d points, want %d (%s)", keep[0] ? keep : "none", rows[i].id,
                     rows[i].earned, rows[i].points, want, rows[i].message);
        }
    }
}

static void one_tree_graded(void **state) {
    (void)state;
    char ids[MAX_EXERCISES][64];
    const int n = exercise_ids(ids);
    assert_true(n >= 2);
    grade_tree("", ids, n);                            /* stubs only: 0 points, one message each */
    for (int i = 0; i < n; i++) grade_tree(ids[i], ids, n);   /* one back: its points only */
    grade_tree("all", ids, n);                         /* all back: full marks */
}

/* ------------------------------------------------------------ main */

static int setup(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_coursework");
}

static int teardown(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

int main(int argc, char **argv) {
    (void)argc;
    /* <build>/tests/test_coursework -> <build> */
    snprintf(build_dir, sizeof build_dir, "%s", argv[0]);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(build_dir, '/');
        if (slash) *slash = '\0';
        else snprintf(build_dir, sizeof build_dir, ".");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(solution_gets_full_marks),
        cmocka_unit_test(every_tree_is_written),
        cmocka_unit_test(one_tree_graded),
    };
    return cmocka_run_group_tests_name("coursework", tests, setup, teardown);
}
