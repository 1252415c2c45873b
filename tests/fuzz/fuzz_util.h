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

/* Write bytes to path gzip-compressed (level 1: fast), as the data files ship.
 * One deflate stream, made once and reset per input: gzopen/gzclose would
 * allocate and free zlib's 256 KiB of state per input, and under ASan each
 * such free is an munmap (with a TLB flush, slow in a virtual machine): 2.6
 * of them per input of the cmudict target. */
static inline void fuzz_write_gzip(const char *path, const void *data, size_t size) {
    static z_stream zs;
    static int ready;
    static unsigned char *out;
    static size_t out_cap;
    if (!ready) {
        /* windowBits 15 + 16: a gzip header and trailer, as gzopen writes */
        if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
        ready = 1;
    } else if (deflateReset(&zs) != Z_OK) {
        abort();
    }
    size_t need = deflateBound(&zs, (uLong)size);
    if (need > out_cap) {
        free(out);
        out = malloc(need);
        if (out == NULL) abort();
        out_cap = need;
    }
    zs.next_in = (Bytef *)data;
    zs.avail_in = (uInt)size;
    zs.next_out = out;
    zs.avail_out = (uInt)out_cap;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END) abort();
    fuzz_write(path, out, out_cap - zs.avail_out);
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
