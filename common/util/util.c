/* util.c - small file-system helpers used across the project (see util.h).
 *
 *   make_dirs          mkdir -p
 *   write_file_atomic  write to "<path>.tmp.<pid>", fsync, rename over path,
 *   atomic_open/close  so a crash never leaves a half-written file behind
 *                      (a device such as /dev/null is written in place)
 *   read_whole_file    read a file into memory, gunzipping "*.gz" with zlib
 *   xmalloc/xcalloc    64-byte aligned allocation that aborts on out-of-memory
 *
 * Errors from user-visible operations go through fail() (error.h) with the
 * path and the operating system's reason; nothing here calls exit(). */
#include "util/util.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

/* ------------------------------------------------------------------ dirs */

/* Create one directory; an existing directory is fine. */
static int make_one_dir(const char *dir) {
    if (mkdir(dir, 0755) == 0) return 0;
    if (errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
        return fail("cannot create directory '%s': a file with that name exists", dir);
    }
    return fail("cannot create directory '%s': %s", dir, strerror(errno));
}

int make_dirs(const char *path) {
    char buf[1024];
    size_t len = strlen(path);
    if (len == 0) return fail("cannot create a directory with an empty name");
    if (len >= sizeof buf) return fail("directory path too long (%zu bytes): '%s'", len, path);
    memcpy(buf, path, len + 1);

    /* Walk the path and create each prefix ending before a '/': for
     * "out/02/plots" that is "out", "out/02", then "out/02/plots". */
    for (size_t i = 1; i < len; i++) {
        if (buf[i] != '/' || buf[i - 1] == '/') continue;
        buf[i] = '\0';
        int rc = make_one_dir(buf);
        buf[i] = '/';
        if (rc != 0) return -1;
    }
    return make_one_dir(buf);
}

/* ---------------------------------------------------------- atomic writes */

/* The temporary name used while writing: "<path>.tmp.<pid>". */
static int temp_name(char *out, size_t outlen, const char *path) {
    int n = snprintf(out, outlen, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= outlen) return fail("path too long: '%s'", path);
    return 0;
}

/* Flush a file's data to the disk and move it into place. Also flushes the
 * directory entry (best effort) so the rename itself survives a power cut. */
static int sync_and_rename(int fd, const char *tmp, const char *path) {
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        return fail("cannot write '%s': fsync failed: %s", path, strerror(errno));
    if (rename(tmp, path) != 0)
        return fail("cannot write '%s': rename from '%s' failed: %s", path, tmp, strerror(errno));

    char dir[1024];
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1;                     /* "/file" lives in "/" */
        if (n >= sizeof dir) return 0;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int dfd = open(dir, O_RDONLY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* A path that exists and is neither a regular file nor a directory (a device
 * such as /dev/null or /dev/full, a pipe) cannot be replaced by a rename
 * without destroying it (as root, renaming over /dev/full would turn the
 * device into a plain file): such a path is written in place, and its write
 * errors reported like any other. */
static int is_special_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

/* Write all len bytes to fd (retrying short writes); 0, or -1 with errno set. */
static int write_all(int fd, const unsigned char *bytes, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, bytes + done, len - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len) {
    if (is_special_file(path)) {
        int fd = open(path, O_WRONLY);
        if (fd < 0) return fail("cannot write '%s': %s", path, strerror(errno));
        if (write_all(fd, data, len) != 0) {
            int saved = errno;
            close(fd);
            return fail("cannot write '%s': %s", path, strerror(saved));
        }
        if (close(fd) != 0) return fail("cannot write '%s': close failed: %s", path, strerror(errno));
        return 0;
    }
    char tmp[1100];
    if (temp_name(tmp, sizeof tmp, path) != 0) return -1;

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return fail("cannot write '%s': cannot create '%s': %s", path, tmp, strerror(errno));

    if (write_all(fd, data, len) != 0) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        return fail("cannot write '%s': %s", path, strerror(saved));
    }
    if (sync_and_rename(fd, tmp, path) != 0) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (close(fd) != 0) return fail("cannot write '%s': close failed: %s", path, strerror(errno));
    return 0;
}

int atomic_open(AtomicFile *af, const char *path) {
    af->f = NULL;
    size_t len = strlen(path);
    if (len >= sizeof af->path) return fail("path too long (%zu bytes): '%s'", len, path);
    memcpy(af->path, path, len + 1);
    if (is_special_file(path)) {           /* written in place: af->tmp stays "" */
        af->tmp[0] = '\0';
        af->f = fopen(path, "wb");
        if (af->f == NULL) return fail("cannot write '%s': %s", path, strerror(errno));
        return 0;
    }
    if (temp_name(af->tmp, sizeof af->tmp, path) != 0) return -1;

    af->f = fopen(af->tmp, "wb");
    if (af->f == NULL)
        return fail("cannot write '%s': cannot create '%s': %s", path, af->tmp, strerror(errno));
    return 0;
}

int atomic_close(AtomicFile *af, int ok) {
    if (af->f == NULL) return fail("cannot write '%s': file was not opened", af->path);
    FILE *f = af->f;
    af->f = NULL;

    const int in_place = af->tmp[0] == '\0';   /* a device or pipe (is_special_file) */
    if (!ok) {                      /* the caller gave up: leave no trace */
        fclose(f);
        if (!in_place) unlink(af->tmp);
        return 0;
    }
    int write_error = ferror(f);
    errno = 0;
    if (fflush(f) != 0) write_error = 1;
    int saved = errno;
    if (write_error) {
        fclose(f);
        if (!in_place) unlink(af->tmp);
        return fail("cannot write '%s': %s", af->path, saved ? strerror(saved) : "write error");
    }
    if (in_place) {
        if (fclose(f) != 0) return fail("cannot write '%s': %s", af->path, strerror(errno));
        return 0;
    }
    if (sync_and_rename(fileno(f), af->tmp, af->path) != 0) {
        fclose(f);
        unlink(af->tmp);
        return -1;
    }
    if (fclose(f) != 0) return fail("cannot write '%s': close failed: %s", af->path, strerror(errno));
    return 0;
}

/* ---------------------------------------------------------------- reading */

static int ends_with(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/* Grow *buf so it holds at least need bytes (doubling). 0, or -1 with fail(). */
static int grow(char **buf, size_t *cap, size_t need, const char *path) {
    if (need <= *cap) return 0;
    size_t new_cap = *cap ? *cap : 65536;
    while (new_cap < need) {
        if (new_cap > SIZE_MAX / 2) return fail("cannot read '%s': file too large", path);
        new_cap *= 2;
    }
    char *bigger = realloc(*buf, new_cap);
    if (bigger == NULL) return fail("cannot read '%s': out of memory at %zu bytes", path, new_cap);
    *buf = bigger;
    *cap = new_cap;
    return 0;
}

char *read_gzip_file(const char *path, size_t *len) {
    *len = 0;
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL) {
        fail("cannot open '%s': %s", path, errno ? strerror(errno) : "gzopen failed");
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, used = 0;
    for (;;) {
        if (grow(&buf, &cap, used + 65536 + 1, path) != 0) {
            free(buf);
            gzclose(gz);
            return NULL;
        }
        int n = gzread(gz, buf + used, 65536);
        int code = Z_OK;
        const char *why = gzerror(gz, &code);
        if (n < 0) {
            fail("cannot read '%s': corrupt gzip data after %zu bytes: %s", path, used, why);
            free(buf);
            gzclose(gz);
            return NULL;
        }
        /* At the end of the input zlib returns 0 bytes; Z_BUF_ERROR then
         * means the compressed data stopped before the gzip end marker. */
        if (n == 0 && code == Z_BUF_ERROR) {
            fail("'%s' is truncated: the gzip data ends after %zu bytes of text, before its end marker", path,
                 used);
            free(buf);
            gzclose(gz);
            return NULL;
        }
        if (n == 0) break;
        used += (size_t)n;
    }
    gzclose(gz);
    buf[used] = '\0';
    *len = used;
    return buf;
}

/* Read a plain file. The buffer starts at the file's size plus 2 bytes (one
 * more byte than the file holds, so the first read ends short at the end of
 * the file, and the '\0'), and grows only if the file grew meanwhile or has
 * no size (a pipe).
 * A fixed 64 KiB start would cost a small file (a checkpoint of a few KiB) a
 * 128 KiB block: a fresh mmap and munmap per read at glibc's (and ASan's)
 * threshold, most of the checkpoint fuzz target's time (tests/fuzz/README.md). */
static char *read_plain_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail("cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    size_t cap = 65536;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
        (unsigned long long)st.st_size < SIZE_MAX - 2)
        cap = (size_t)st.st_size + 2;
    char *buf = malloc(cap);
    if (buf == NULL) {
        fail("cannot read '%s': out of memory at %zu bytes", path, cap);
        fclose(f);
        return NULL;
    }
    size_t used = 0;
    for (;;) {
        size_t want = cap - used - 1;                 /* keep one byte for the '\0' */
        size_t n = fread(buf + used, 1, want, f);
        used += n;
        if (n < want) break;                          /* end of file, or an error (below) */
        if (grow(&buf, &cap, used + 65536 + 1, path) != 0) {
            free(buf);
            fclose(f);
            return NULL;
        }
    }
    if (ferror(f)) {
        fail("cannot read '%s': %s", path, strerror(errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[used] = '\0';
    *len = used;
    return buf;
}

char *read_whole_file(const char *path, size_t *len) {
    *len = 0;
    errno = 0;
    if (ends_with(path, ".gz")) return read_gzip_file(path, len);   /* (it sets *len and errno too) */
    return read_plain_file(path, len);
}

/* ------------------------------------------------------------- allocation */

void *xmalloc(size_t bytes) {
    void *p = NULL;
    /* posix_memalign(0) may return NULL legitimately; ask for one byte. */
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0 || p == NULL) {
        fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", bytes);
        abort();
    }
    return p;
}

void *xcalloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) {
        fprintf(stderr, "fatal: allocation of %zu x %zu bytes overflows\n", count, size);
        abort();
    }
    void *p = xmalloc(count * size);
    memset(p, 0, count * size);
    return p;
}
