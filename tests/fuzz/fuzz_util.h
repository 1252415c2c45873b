/* fuzz_util.h - what the libFuzzer targets in tests/fuzz/ share.
 *
 * Every loader of the project reads a PATH (a checkpoint, an IDX file, a PGM
 * image, a dictionary), so a target writes the fuzzer's bytes to a file and
 * calls the real loader on it: the code under test is exactly the code the
 * programs run, with nothing stubbed. The file lives in /dev/shm (memory)
 * when it exists, so a run costs no disk I/O, and its name carries the
 * process id, so several targets (or libFuzzer's -jobs) never share one.
 *
 * Each target is one C file defining LLVMFuzzerTestOneInput (and maybe
 * LLVMFuzzerInitialize); `make fuzz` builds them with -fsanitize=fuzzer,
 * AddressSanitizer and UBSan (Makefile, FUZZ=1) and tests/fuzz/run.sh runs them. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* A directory for the fuzzer's scratch files: $FUZZ_SCRATCH (run.sh makes
 * one per run and removes it afterwards), else /dev/shm, else $TMPDIR, else /tmp. */
static inline const char *fuzz_scratch_dir(void) {
    const char *given = getenv("FUZZ_SCRATCH");
    if (given && given[0]) return given;
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0) return "/dev/shm";
    const char *t = getenv("TMPDIR");
    return t && t[0] ? t : "/tmp";
}

/* "<scratch>/attn-fuzz-<pid>-<name>" into out. */
static inline void fuzz_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/attn-fuzz-%ld-%s", fuzz_scratch_dir(), (long)getpid(), name);
}

/* Write bytes to path (whole, replacing it); aborts if the scratch disk
 * fails, which is the harness's problem, not a finding in the loader. */
static inline void fuzz_write(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* Write bytes to path gzip-compressed (level 1: fast), as the data files ship. */
static inline void fuzz_write_gzip(const char *path, const void *data, size_t size) {
    gzFile gz = gzopen(path, "wb1");
    if (gz == NULL || (size > 0 && gzwrite(gz, data, (unsigned)size) != (int)size) || gzclose(gz) != Z_OK) {
        perror(path);
        abort();
    }
}

/* The bytes as a NUL-terminated string (malloc'd): a NUL inside ends it early,
 * as it would in a command-line argument. */
static inline char *fuzz_string(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (s == NULL) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
