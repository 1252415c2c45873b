/* util.h - small file-system helpers used across the project. */
#ifndef UTIL_H
#define UTIL_H
#include <stddef.h>
#include <stdio.h>

/* mkdir -p. Returns 0, or -1 with fail(). */
int make_dirs(const char *path);

/* Write len bytes atomically: to "<path>.tmp.<pid>", fsync, rename; on any
 * error the temporary file is removed and a previous file at path is left
 * as it was. A path that names a device or a pipe (/dev/null, /dev/full) is
 * written in place instead (a rename would replace the device).
 * Returns 0, or -1 with fail() naming the path and the OS error. */
int write_file_atomic(const char *path, const void *data, size_t len);

/* Same, for text produced with fprintf: open a temporary file, write to it,
 * then atomic_close() renames it over path (or removes it when ok == 0).
 * af->tmp is "" when path is a device or pipe, written in place. */
typedef struct { FILE *f; char path[1024]; char tmp[1100]; } AtomicFile;
int atomic_open(AtomicFile *af, const char *path);
int atomic_close(AtomicFile *af, int ok);

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
void *xmalloc(size_t bytes);
void *xcalloc(size_t count, size_t size);

#endif
