/* program_run.h - running a built program from a test: where the programs
 * are (from the test's own argv[0]), one run through the shell with both
 * output streams captured, and the project's rule for bad input (exit 1 and
 * one clear error line). Shared by the suites that drive whole programs
 * (test_cli, test_caption_cli, test_robust, test_robust_determinism, test_hostile,
 * test_refusals, test_stopped_run). */
#ifndef PROGRAM_RUN_H
#define PROGRAM_RUN_H
#include <stddef.h>

typedef struct {
    int exited;      /* 1 when the program exited normally (no signal) */
    int code;        /* its exit code, -1 when killed */
    char out[32768]; /* stdout (cut at the size) */
    char err[16384]; /* stderr */
} RunResult;

/* The build directory of a test whose argv[0] is <build>/tests/<name>:
 * writes <build> into dir (".." when argv[0] has no directory). */
void program_build_dir(char *dir, size_t cap, const char *argv0);

/* The file at path as text into buf (cap bytes, cut there, NUL-terminated;
 * empty when it cannot be read). */
void read_text_file(const char *path, char *buf, size_t cap);

/* Runs "<build_dir>/<program> <args>" through the shell, stdin from
 * /dev/null; stdout and stderr go through files in tmp_dir into r. */
void program_run(RunResult *r, const char *build_dir, const char *program, const char *args, const char *tmp_dir);

/* Runs a whole shell command (printf-formatted; it may hold pipes and
 * redirections of its own) the same way: stdin from /dev/null, both output
 * streams through files in tmp_dir into r. */
void program_shell(RunResult *r, const char *tmp_dir, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 1 when the run failed as bad input must: exit code 1 and at most two
 * lines on stderr, one of them mentioning expect; otherwise 0. */
int program_failed_cleanly(const RunResult *r, const char *expect);

#endif
