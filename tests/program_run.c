/* program_run.c - running a built program from a test (program_run.h). */
#include "program_run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

void program_build_dir(char *dir, size_t cap, const char *argv0) {
    snprintf(dir, cap, "%s", argv0);
    char *slash = strrchr(dir, '/');   /* drop the program's name */
    if (slash) *slash = '\0';
    slash = strrchr(dir, '/');         /* and "tests" */
    if (slash) *slash = '\0';
    else snprintf(dir, cap, "..");
}

void read_text_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = 0;
    if (f) {
        n = fread(buf, 1, cap - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
}

/* Runs the shell command cmd with stdin from /dev/null, its two streams through files in tmp_dir into r. */
static void run_captured(RunResult *r, const char *cmd, const char *tmp_dir) {
    char full[8192 + 1200], out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/stdout", tmp_dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", tmp_dir);
    snprintf(full, sizeof full, "( %s ) >%s 2>%s </dev/null", cmd, out_path, err_path);
    int status = system(full);
    r->exited = status != -1 && WIFEXITED(status);
    r->code = r->exited ? WEXITSTATUS(status) : -1;
    read_text_file(out_path, r->out, sizeof r->out);
    read_text_file(err_path, r->err, sizeof r->err);
}

void program_run(RunResult *r, const char *build_dir, const char *program, const char *args, const char *tmp_dir) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/%s %s", build_dir, program, args);
    run_captured(r, cmd, tmp_dir);
}

void program_shell(RunResult *r, const char *tmp_dir, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    run_captured(r, cmd, tmp_dir);
}

int program_failed_cleanly(const RunResult *r, const char *expect) {
    if (!r->exited || r->code != 1 || strstr(r->err, expect) == NULL) return 0;
    int lines = 0;   /* one clear line, not a cascade */
    for (const char *c = r->err; *c; c++) lines += *c == '\n';
    return lines <= 2;
}
