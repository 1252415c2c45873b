/* util.c - small file-system helpers used across the project (see util.h).
 *
 *   make_dirs          mkdir -p
 *   write_file_atomic  write to "<path>.tmp.<pid>", fsync, rename over path,
 *   atomic_open/close  so a crash never leaves a half-written file behind
 *                      (a device such as /dev/null is written in place)
 *   out_dir_prepare    an output directory checked (length, writable) before training
 *   path_format        snprintf for a path, refusing one that does not fit
 *   write_signals_install, temp_register: a Ctrl-C during a save removes its
 *                      temporary; SIGXFSZ ignored (a file-size limit is an error)
 *   read_whole_file    read a file into memory, gunzipping "*.gz" with zlib
 *   xmalloc/xcalloc    64-byte aligned allocation; out of memory ends the
 *                      program with one line (exit 1): the one place here
 *                      that exits, as no caller could go on without the bytes
 *
 * Errors from user-visible operations go through fail() (error.h) with the
 * path and the operating system's reason; nothing here calls exit(). */
#include "util/util.h"
#include "util/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
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

/* ------------------------------------------------------ output directories */

int path_format(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < cap) return 0;
    char start[48];
    snprintf(start, sizeof start, "%.40s", cap > 0 ? buf : "");
    if (cap > 0) buf[0] = '\0';
    return fail("the path %s... would have %d characters, more than the %zu that fit (a path is never cut): "
                "give a shorter --out", start, n, cap > 0 ? cap - 1 : 0);
}

/* The directories this process holds a lock on (by device and inode of the
 * lock file): preparing one of them again is not a second run. */
enum { OUT_LOCKS = 16 };
static struct { dev_t dev; ino_t ino; } out_locks[OUT_LOCKS];
static int n_out_locks = 0;

/* One run at a time in a directory: an exclusive flock on "<dir>/.lock",
 * held until the process ends (the kernel lets go of it however the process
 * ends, SIGKILL included, so a killed run never leaves a stale lock). A
 * second run into the same directory while the first still runs would mix
 * their files (one's checkpoint beside the other's results.json): it is
 * refused, naming the process that holds the directory. */
static int out_dir_lock(const char *flag, const char *dir) {
    char path[OUT_DIR_MAX + 16];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return fail("%s %s: cannot create its lock file .lock: %s", flag, dir, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return fail("%s %s: cannot read its lock file .lock: %s", flag, dir, strerror(errno));
    }
    for (int i = 0; i < n_out_locks; i++)
        if (out_locks[i].dev == st.st_dev && out_locks[i].ino == st.st_ino) {
            close(fd);                                 /* this process holds it already */
            return 0;
        }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int saved = errno;
        char holder[32] = "";
        ssize_t n = read(fd, holder, sizeof holder - 1);
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        close(fd);
        if (saved == EWOULDBLOCK)
            return fail("%s %s: another run (process %s) is writing there now; wait for it or give another %s",
                        flag, dir, holder[0] ? holder : "?", flag);
        return fail("%s %s: cannot lock it: %s", flag, dir, strerror(saved));
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        /* the lock holds without the number; only the message loses it */
    }
    if (n_out_locks < OUT_LOCKS) {
        out_locks[n_out_locks].dev = st.st_dev;
        out_locks[n_out_locks].ino = st.st_ino;
        n_out_locks++;
    }
    return 0;                                          /* fd stays open: the lock lasts the process */
}

int out_dir_prepare(const char *flag, const char *dir) {
    write_signals_install();
    char quoted[96];
    if (strlen(dir) > OUT_DIR_MAX)
        return fail("%s %s: longer than %d characters, the most an output directory may have (a path is never "
                    "cut: a cut one names another place); give a shorter one", flag,
                    error_excerpt(dir, quoted, sizeof quoted), OUT_DIR_MAX);
    if (make_dirs(dir) != 0) return fail("%s: %s", flag, last_error());
    /* a file created and removed: the directory takes this program's files */
    char probe[OUT_DIR_MAX + 64];
    snprintf(probe, sizeof probe, "%s/.write_probe", dir);
    temp_remove_stale(probe);                           /* one a killed run left */
    snprintf(probe, sizeof probe, "%s/.write_probe.tmp.%ld", dir, (long)getpid());
    int slot = temp_register(probe);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        int saved = errno;
        temp_forget(slot);
        return fail("%s %s: cannot write files there (checked before training): %s", flag, dir, strerror(saved));
    }
    close(fd);
    unlink(probe);
    temp_forget(slot);
    return out_dir_lock(flag, dir);
}

/* ------------------------------------------------- signals and temporaries */

/* The temporary files of writes in progress (at most TEMP_SLOTS at once: a
 * plot writes two), for the signal handler to remove. A slot is filled
 * before its file is created and emptied after the file is renamed or
 * removed; the handler reads only slots marked in use. */
enum { TEMP_SLOTS = 8, TEMP_PATH = 2400 };
static char temp_paths[TEMP_SLOTS][TEMP_PATH];
static volatile sig_atomic_t temp_in_use[TEMP_SLOTS];

/* What the signal handler does before the signal acts (async-signal-safe). */
static void temp_remove_registered(void) {
    for (int i = 0; i < TEMP_SLOTS; i++)
        if (temp_in_use[i]) unlink(temp_paths[i]);     /* unlink is async-signal-safe */
}

int temp_register(const char *tmp) {
    size_t len = strlen(tmp);
    if (len >= TEMP_PATH) return -1;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        if (temp_in_use[i]) continue;
        memcpy(temp_paths[i], tmp, len + 1);
        atomic_signal_fence(memory_order_seq_cst);     /* the name is complete before the slot counts */
        temp_in_use[i] = 1;
        return i;
    }
    return -1;
}

void temp_forget(int slot) {
    if (slot >= 0 && slot < TEMP_SLOTS) temp_in_use[slot] = 0;
}

/* SIGINT, SIGTERM, SIGHUP: remove the temporaries, then let the signal do
 * what it does by default (SA_RESETHAND restored that on entry; the signal
 * raised here is delivered when the handler returns). */
static void on_stop_signal(int sig) {
    int saved = errno;
    temp_remove_registered();
    raise(sig);
    errno = saved;
}

void write_signals_install(void) {
    static int installed = 0;
    if (installed) return;
    installed = 1;
    const int stops[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        struct sigaction old;
        if (sigaction(stops[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
            continue;                                   /* ignored, or the program's own handler */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(stops[i], &sa, NULL);
    }
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
        signal(SIGXFSZ, SIG_IGN);
}

void temp_remove_stale(const char *path) {
    char dir[1100];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash == NULL) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1;
        if (n >= sizeof dir) return;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    size_t base_len = strlen(base);
    DIR *d = opendir(dir);
    if (d == NULL) return;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        /* exactly "<base>.tmp.<digits>" */
        const char *name = e->d_name;
        if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp.", 5) != 0) continue;
        const char *digits = name + base_len + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (*digits < '0' || *digits > '9' || *end != '\0' || errno != 0 || pid <= 0 || pid > INT32_MAX) continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* still running */
        char stale[2200];
        if (snprintf(stale, sizeof stale, "%s/%s", dir, name) < (int)sizeof stale) unlink(stale);
    }
    closedir(d);
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
    write_signals_install();
    temp_remove_stale(path);
    int slot = temp_register(tmp);

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        int saved = errno;
        temp_forget(slot);
        return fail("cannot write '%s': cannot create '%s': %s", path, tmp, strerror(saved));
    }
    if (write_all(fd, data, len) != 0) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        temp_forget(slot);
        return fail("cannot write '%s': %s", path, strerror(saved));
    }
    int renamed = sync_and_rename(fd, tmp, path);
    if (renamed != 0) unlink(tmp);
    temp_forget(slot);
    if (renamed != 0) {
        close(fd);
        return -1;
    }
    if (close(fd) != 0) return fail("cannot write '%s': close failed: %s", path, strerror(errno));
    return 0;
}

int atomic_open(AtomicFile *af, const char *path) {
    af->f = NULL;
    af->slot = -1;
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
    write_signals_install();
    temp_remove_stale(path);
    af->slot = temp_register(af->tmp);

    af->f = fopen(af->tmp, "wb");
    if (af->f == NULL) {
        int saved = errno;
        temp_forget(af->slot);
        af->slot = -1;
        return fail("cannot write '%s': cannot create '%s': %s", path, af->tmp, strerror(saved));
    }
    return 0;
}

int atomic_close(AtomicFile *af, int ok) {
    if (af->f == NULL) return fail("cannot write '%s': file was not opened", af->path);
    FILE *f = af->f;
    af->f = NULL;

    const int in_place = af->tmp[0] == '\0';   /* a device or pipe (is_special_file) */
    const int slot = af->slot;
    af->slot = -1;
    if (!ok) {                      /* the caller gave up: leave no trace */
        fclose(f);
        if (!in_place) unlink(af->tmp);
        temp_forget(slot);
        return 0;
    }
    int write_error = ferror(f);
    errno = 0;
    if (fflush(f) != 0) write_error = 1;
    int saved = errno;
    if (write_error) {
        fclose(f);
        if (!in_place) unlink(af->tmp);
        temp_forget(slot);
        return fail("cannot write '%s': %s", af->path, saved ? strerror(saved) : "write error");
    }
    if (in_place) {
        if (fclose(f) != 0) return fail("cannot write '%s': %s", af->path, strerror(errno));
        return 0;
    }
    int renamed = sync_and_rename(fileno(f), af->tmp, af->path);
    if (renamed != 0) unlink(af->tmp);
    temp_forget(slot);
    if (renamed != 0) {
        fclose(f);
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

static double counted, count_limit;
static void (*count_over)(double counted, size_t asked);

void xmalloc_limit(double limit, void (*over_limit)(double counted, size_t asked)) {
    counted = 0.0;
    count_limit = limit;
    count_over = over_limit;
}

void xmalloc_count(size_t bytes) {
    if (!count_over) return;
    if (counted + (double)bytes > count_limit) count_over(counted, bytes);
    counted += (double)bytes;
}

void *xmalloc(size_t bytes) {
    xmalloc_count(bytes);
    void *p = NULL;
    /* posix_memalign(0) may return NULL legitimately; ask for one byte. */
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0 || p == NULL) {
        fprintf(stderr, "error: out of memory: %zu bytes asked for at once, more than this process may have: "
                "a smaller --batch or model\n", bytes);
        exit(1);
    }
    return p;
}

void *xcalloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) {
        fprintf(stderr, "error: an allocation of %zu x %zu bytes overflows: a smaller --batch or model\n", count,
                size);
        exit(1);
    }
    void *p = xmalloc(count * size);
    memset(p, 0, count * size);
    return p;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

float *floats_take(float *base, size_t *used, size_t n) {
    float *p = (base == NULL || n == 0) ? NULL : base + *used;
    *used += n;
    return p;
}
