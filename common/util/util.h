/* util.h - small file-system helpers used across the project. */
#ifndef UTIL_H
#define UTIL_H
#include <stddef.h>
#include <stdio.h>

/* mkdir -p. Returns 0, or -1 with fail(). */
int make_dirs(const char *path);

/* 1 when path names a plain file, else 0. */
int file_exists(const char *path);

/* The longest output directory a program writes into, in bytes: --out, or
 * the eval_* directory that --load picks (results.h). The names a program
 * puts in it are at most about 250 bytes ("/caption_<name>.png.tmp.<pid>",
 * an image's name being cut at 200 characters), so every path under it fits
 * the programs' path buffers (1024 bytes and more) whole: a longer directory
 * is refused, never cut, since a cut path writes somewhere else (its parent,
 * over another run's files). */
#define OUT_DIR_MAX 768

/* Before a program computes anything it will write: check that dir, the
 * value of flag (e.g. "--out"), is at most OUT_DIR_MAX bytes, create it
 * (mkdir -p), and create and remove a probe file in it, so a path that is
 * too long or a directory that cannot be written is refused at the start,
 * not after the training whose results would be lost. Then takes the
 * directory's lock ("<dir>/.lock", held to the end of the process): a second
 * run into a directory another process is writing is refused. Also installs
 * the write-side signal handling (write_signals_install). Returns 0, or -1
 * with fail() naming the flag, the directory and the reason. */
int out_dir_prepare(const char *flag, const char *dir);

/* snprintf for a file path: 0, or -1 with fail() when the path does not
 * fit in cap bytes (then buf holds "" and must not be used: a cut path
 * names another file). */
int path_format(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Write len bytes atomically: to "<path>.tmp.<pid>", fsync, rename; on any
 * error the temporary file is removed and a previous file at path is left
 * as it was. A path that names a device or a pipe (/dev/null, /dev/full) is
 * written in place instead (a rename would replace the device).
 * Temporaries "<path>.tmp.<pid>" that a killed process left (its pid no
 * longer runs) are removed first; a SIGINT, SIGTERM or SIGHUP during the
 * write removes this one (write_signals_install).
 * Returns 0, or -1 with fail() naming the path and the OS error. */
int write_file_atomic(const char *path, const void *data, size_t len);

/* Same, for text produced with fprintf: open a temporary file, write to it,
 * then atomic_close() renames it over path (or removes it when ok == 0).
 * af->tmp is "" when path is a device or pipe, written in place. */
typedef struct { FILE *f; char path[1024]; char tmp[1100]; int slot; } AtomicFile;
int atomic_open(AtomicFile *af, const char *path);
int atomic_close(AtomicFile *af, int ok);

/* Signals and the temporary files of writes in progress:
 *   SIGINT, SIGTERM, SIGHUP  the temporaries registered below are removed,
 *                            then the signal acts as it would have (the
 *                            program stops, killed by it);
 *   SIGXFSZ                  ignored, so a write past a file-size limit
 *                            (ulimit -f) fails with EFBIG and is reported,
 *                            like a full disk, instead of killing the program.
 * Only a signal whose action is still the default is changed (a program's
 * own handler stays). Called by out_dir_prepare and by the first atomic
 * write; calling it again does nothing. (A SIGKILL cannot be caught: its
 * temporary is removed by the next write of the same file.) */
void write_signals_install(void);

/* Register the temporary file tmp (a copy is kept) so that a signal removes
 * it; returns a slot for temp_forget, or -1 when all slots are taken (then
 * only the signal's cleanup of this file is lost). One thread writes at a
 * time. */
int temp_register(const char *tmp);
void temp_forget(int slot);

/* Remove "<path>.tmp.<pid>" files beside path whose process no longer
 * exists (left by a process killed while writing path). Best effort. */
void temp_remove_stale(const char *path);

/* Read a whole file (transparently gunzipping when the name ends in ".gz").
 * Returns a malloc'd buffer with a NUL appended, *len = bytes without it;
 * NULL with fail() on error. */
char *read_whole_file(const char *path, size_t *len);
/* The same for a gzip file whatever its name. A file that stops before the
 * gzip end marker (truncated) or has damaged data is an error, not a short
 * text. */
char *read_gzip_file(const char *path, size_t *len);

/* Aligned allocation (64 bytes) that never returns NULL: aborts with a
 * message on out-of-memory (a programming/resource error, not user input). */
/* Float tensors laid out one after another in one block: hands out the
 * next n floats of base and counts them in *used. Returns NULL when n is 0
 * (an absent tensor) or base is NULL (only counting the floats). */
float *floats_take(float *base, size_t *used, size_t n);

void *xmalloc(size_t bytes);
/* While a model is built (train/memory.h's memory_budget_begin), xmalloc
 * counts the bytes it hands out: over_limit(counted, asked) is called, before
 * the system is asked, by the allocation that would take the count past
 * limit, and ends the program. over_limit NULL: no count. */
void xmalloc_limit(double limit, void (*over_limit)(double counted, size_t asked));
/* The same count for bytes allocated by other means (the parameters' aligned_alloc). */
void xmalloc_count(size_t bytes);
void *xcalloc(size_t count, size_t size);

/* Wall-clock seconds (monotonic), for timing a run. */
double now_seconds(void);

#endif
