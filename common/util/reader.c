/* reader.c - reading a file in pieces, each only when it is needed (see reader.h).
 *
 * The file is one file descriptor, opened once. Plain bytes go straight into
 * the caller's buffer, exactly as many as asked for; gzip data goes through
 * an input buffer of its own and zlib's inflate, which writes the
 * decompressed bytes into the caller's buffer, again only as many as asked
 * for. Like zlib's gzread, a READ_GZIP file that does not start with the
 * gzip magic (1f 8b) is read as it is, concatenated gzip members are read one
 * after another, and bytes after the last member that are not gzip are
 * ignored. */
#include "util/reader.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { IN_CAP = 65536, FIRST_CAP = 65536 };

static int ends_with_gz(const char *s) {
    size_t n = strlen(s);
    return n >= 3 && strcmp(s + n - 3, ".gz") == 0;
}

/* One read(2), retried after a signal: the bytes read, 0 at the end, -1 on error. */
static ssize_t read_once(int fd, unsigned char *buf, size_t n) {
    for (;;) {
        ssize_t got = read(fd, buf, n);
        if (got >= 0 || errno != EINTR) return got;
    }
}

/* "64 MiB" or "1000 bytes" */
static void size_text(char *out, size_t cap, size_t bytes) {
    if (bytes >= ((size_t)1 << 20) && bytes % ((size_t)1 << 20) == 0)
        snprintf(out, cap, "%zu MiB", bytes >> 20);
    else
        snprintf(out, cap, "%zu bytes", bytes);
}

static int too_long(const FileReader *r) {
    char limit[32];
    size_text(limit, sizeof limit, r->max);
    return fail("'%s' holds more than %s, more than a %s may (the wrong file, or a damaged one)", r->path, limit,
                r->what);
}

int reader_open(FileReader *r, const char *path, ReadMode mode, size_t max, const char *what) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->what = what ? what : "file of this program";
    r->max = max;
    r->fd = -1;
    r->gzip = mode == READ_GZIP || (mode == READ_GZIP_BY_NAME && ends_with_gz(path));
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return fail("cannot open '%s': %s", path, strerror(errno));
    /* A plain file whose size is known gets a buffer of its size at once (one
     * more byte than it holds, so the read that finds its end needs no
     * growing, and the '\0'): those bytes are there, not promised. */
    struct stat st;
    size_t cap = FIRST_CAP;
    if (!r->gzip && fstat(r->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
        (unsigned long long)st.st_size <= max)
        cap = (size_t)st.st_size + 2;
    if (r->gzip) {
        r->in = malloc(IN_CAP);
        if (r->in == NULL) {
            reader_close(r);
            return fail("cannot read '%s': out of memory", path);
        }
    }
    r->data = malloc(cap);
    if (r->data == NULL) {
        reader_close(r);
        return fail("cannot read '%s': out of memory at %zu bytes", path, cap);
    }
    r->cap = cap;
    r->data[0] = '\0';
    return 0;
}

/* Make room for at least one more byte (and the '\0'), doubling, never past max + 2. */
static int grow(FileReader *r) {
    if (r->len + 1 < r->cap) return 0;
    size_t limit = r->max > SIZE_MAX - 2 ? SIZE_MAX : r->max + 2;
    size_t cap = r->cap < limit / 2 ? 2 * r->cap : limit;
    if (cap <= r->cap) return too_long(r);
    unsigned char *bigger = realloc(r->data, cap);
    if (bigger == NULL) return fail("cannot read '%s': out of memory at %zu bytes", r->path, cap);
    r->data = bigger;
    r->cap = cap;
    return 0;
}

/* Raw input for gunzipping: at least `want` bytes in r->in (fewer only at
 * the end of the file), without reading more than one read(2) past them. */
static int fill_input(FileReader *r, size_t want) {
    if (r->in_at > 0 && r->in_len > 0) memmove(r->in, r->in + r->in_at, r->in_len);
    r->in_at = 0;
    while (r->in_len < want && !r->in_eof) {
        ssize_t got = read_once(r->fd, r->in + r->in_len, IN_CAP - r->in_len);
        if (got < 0) return fail("cannot read '%s': %s", r->path, strerror(errno));
        if (got == 0) r->in_eof = 1;
        r->in_len += (size_t)got;
        r->raw_read += (size_t)got;
    }
    return 0;
}

int reader_raw_prefix(FileReader *r, unsigned char *out, size_t n, size_t *got) {
    *got = 0;
    if (!r->gzip) {
        if (reader_need(r, n) < 0) return -1;
        *got = r->len < n ? r->len : n;
        memcpy(out, r->data, *got);
        return 0;
    }
    if (r->started) return fail("cannot read '%s': its first bytes were already decompressed", r->path);
    if (fill_input(r, n) < 0) return -1;
    *got = r->in_len < n ? r->in_len : n;
    memcpy(out, r->in + r->in_at, *got);
    return 0;
}

/* Plain bytes from the file into data, up to `room` of them. */
static int read_plain(FileReader *r, size_t room) {
    size_t done = 0;
    while (done < room) {
        ssize_t got = read_once(r->fd, r->data + r->len + done, room - done);
        if (got < 0) return fail("cannot read '%s': %s", r->path, strerror(errno));
        if (got == 0) {
            r->eof = 1;
            break;
        }
        done += (size_t)got;
    }
    r->len += done;
    return 0;
}

/* Copy mode of a READ_GZIP file without the gzip magic: what is left in the
 * input buffer, then the file itself. */
static int read_copied(FileReader *r, size_t room) {
    if (r->in_len > 0) {
        size_t n = r->in_len < room ? r->in_len : room;
        memcpy(r->data + r->len, r->in + r->in_at, n);
        r->len += n;
        r->in_at += n;
        r->in_len -= n;
        return 0;
    }
    if (r->in_eof) {
        r->eof = 1;
        return 0;
    }
    return read_plain(r, room);
}

/* At the start of the file or after a gzip member: another member follows
 * (inflating = 1), the file is not gzip (plain = 1), or the data ends (eof). */
static int next_member(FileReader *r) {
    if (fill_input(r, 2) < 0) return -1;
    const int magic = r->in_len >= 2 && r->in[r->in_at] == 0x1f && r->in[r->in_at + 1] == 0x8b;
    if (!r->started) {
        r->started = 1;
        if (r->in_len == 0) {
            r->eof = 1;
            return 0;
        }
        if (!magic) {
            r->plain = 1;
            return 0;
        }
        if (inflateInit2(&r->z, 16 + MAX_WBITS) != Z_OK) return fail("cannot read '%s': out of memory", r->path);
        r->z_live = 1;
        r->inflating = 1;
        return 0;
    }
    if (!magic) {             /* the end, or bytes after the last member: ignored, as gzread does */
        r->eof = 1;
        return 0;
    }
    if (inflateReset(&r->z) != Z_OK) return fail("cannot read '%s': zlib cannot restart", r->path);
    r->inflating = 1;
    return 0;
}

/* Decompress up to `room` bytes into data. */
static int read_inflated(FileReader *r, size_t room) {
    if (r->in_len == 0 && !r->in_eof && fill_input(r, 1) < 0) return -1;
    r->z.next_in = r->in + r->in_at;
    r->z.avail_in = (uInt)r->in_len;
    r->z.next_out = r->data + r->len;
    r->z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
    const uInt out_before = r->z.avail_out;
    const int ret = inflate(&r->z, Z_NO_FLUSH);
    const size_t used = r->in_len - r->z.avail_in, produced = out_before - r->z.avail_out;
    r->in_at += used;
    r->in_len -= used;
    r->len += produced;
    if (ret == Z_STREAM_END) {
        r->inflating = 0;
        return 0;
    }
    if (ret == Z_OK) return 0;
    if (ret == Z_BUF_ERROR && r->in_len == 0 && r->in_eof)
        return fail("'%s' is truncated: the gzip data ends after %zu bytes of text, before its end marker", r->path,
                    r->len);
    if (ret == Z_BUF_ERROR) return 0;   /* no room or no input yet: the caller's loop brings either */
    return fail("cannot read '%s': corrupt gzip data after %zu bytes: %s", r->path, r->len,
                r->z.msg ? r->z.msg : ret == Z_MEM_ERROR ? "out of memory" : "inflate failed");
}

int reader_need(FileReader *r, size_t want) {
    /* one byte past max tells a file longer than max from one exactly max long */
    const size_t target = want > r->max ? (r->max == SIZE_MAX ? SIZE_MAX : r->max + 1) : want;
    while (r->len < target && !r->eof) {
        if (grow(r) < 0) return -1;
        size_t room = r->cap - 1 - r->len;
        if (room > target - r->len) room = target - r->len;
        int rc;
        if (!r->gzip) {
            rc = read_plain(r, room);
        } else if (!r->inflating && !r->plain) {
            rc = next_member(r);
        } else {
            rc = r->plain ? read_copied(r, room) : read_inflated(r, room);
        }
        if (rc < 0) return -1;
    }
    r->data[r->len] = '\0';
    if (r->len > r->max) return too_long(r);
    return 0;
}

int reader_rest(FileReader *r) { return reader_need(r, SIZE_MAX); }

void reader_close(FileReader *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    if (r->z_live) inflateEnd(&r->z);
    r->z_live = 0;
    free(r->in);
    free(r->data);
    r->in = NULL;
    r->data = NULL;
    r->len = r->cap = 0;
}

unsigned char *reader_take(FileReader *r, size_t *len) {
    unsigned char *data = r->data;
    *len = r->len;
    r->data = NULL;
    reader_close(r);
    return data;
}

char *read_file_at_most(const char *path, ReadMode mode, size_t max, const char *what, size_t *len) {
    *len = 0;
    FileReader r;
    if (reader_open(&r, path, mode, max, what) < 0) return NULL;
    if (reader_rest(&r) < 0) {
        reader_close(&r);
        return NULL;
    }
    return (char *)reader_take(&r, len);
}
