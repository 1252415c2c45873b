/* idx.c - the IDX reader (the format is described in idx.h).
 *
 * One function does the work, read_idx(): open with gzopen (which reads gzip'd
 * and plain files alike), read and check the header field by field, check the
 * sizes BEFORE allocating, read the data (into a buffer that grows as the
 * bytes arrive), then make sure the file ends exactly there. Each check stops with one fail() message. */
#include "data/idx.h"
#include "util/error.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* zlib's message, without the "path: " it puts in front (our messages name the file already). */
static const char *zlib_reason(gzFile gz, const char *path, int *code) {
    const char *why = gzerror(gz, code);
    const size_t n = strlen(path);
    if (strncmp(why, path, n) == 0 && why[n] == ':' && why[n + 1] == ' ') why += n + 2;
    return why;
}

/* Read up to n bytes into buf, looping (gzread may return fewer at a time).
 * Returns the number read (< n only at the end of the file), or -1 with fail()
 * when zlib reports corrupt data. `at` is the offset of buf in the file, for the
 * message. A gzip stream that is cut off in the middle is reported as an error
 * here too (zlib flags it as Z_BUF_ERROR, "unexpected end of file"), so the
 * message says the .gz itself is truncated rather than the IDX data. */
static long long read_bytes(gzFile gz, unsigned char *buf, size_t n, const char *path, size_t at) {
    size_t got = 0;
    while (got < n) {
        size_t want = n - got;
        if (want > (1u << 30)) want = 1u << 30;   /* gzread takes an unsigned int */
        int r = gzread(gz, buf + got, (unsigned)want);
        if (r < 0) {
            int code;
            const char *why = zlib_reason(gz, path, &code);
            return fail("'%s': corrupt gzip data after %zu bytes of the uncompressed stream: %s", path,
                        at + got, why);
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (got < n) {
        int code;
        const char *why = zlib_reason(gz, path, &code);
        if (code == Z_BUF_ERROR)
            return fail("'%s': the gzip stream is cut off after %zu bytes of uncompressed data (%s): "
                        "the .gz file is truncated", path, at + got, why);
        if (code != Z_OK)
            return fail("'%s': cannot read after %zu bytes: %s", path, at + got, why);
    }
    return (long long)got;
}

/* Read the n bytes of data the header announced into a malloc'd *data. The
 * buffer starts at 1 MiB (or n) and doubles as the bytes arrive, so a damaged
 * header that announces 200 MB in front of 100 bytes costs 1 MiB, not 200 MB;
 * a real 47 MB file costs six reallocations. Returns the bytes read, or -1. */
static long long read_data(gzFile gz, unsigned char **data, size_t n, const char *path, size_t at) {
    size_t cap = n < ((size_t)1 << 20) ? n : (size_t)1 << 20, got = 0;
    *data = malloc(cap);
    if (*data == NULL) return fail("'%s': out of memory for %zu bytes of data", path, cap);
    for (;;) {
        long long r = read_bytes(gz, *data + got, cap - got, path, at + got);
        if (r < 0) return -1;
        got += (size_t)r;
        if (got < cap || cap == n) return (long long)got;   /* the end of the file, or all n bytes */
        cap = cap > n / 2 ? n : 2 * cap;
        unsigned char *bigger = realloc(*data, cap);
        if (bigger == NULL) return fail("'%s': out of memory for %zu bytes of data", path, cap);
        *data = bigger;
    }
}

/* The 4-byte big-endian number at p. */
static uint32_t big_endian_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* Read an IDX file of unsigned bytes with n_dims dimensions (3: images, 1:
 * labels). want_rows, want_cols: expected image size, 0 = any (images only). */
static int read_idx(IdxData *out, const char *path, int n_dims, int want_rows, int want_cols) {
    memset(out, 0, sizeof *out);
    const char *what = n_dims == 3 ? "images" : "labels";
    const uint32_t magic_expected = n_dims == 3 ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS;

    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL)
        return fail("cannot open '%s': %s", path, errno ? strerror(errno) : "gzopen failed (out of memory?)");

    /* The header: the 4 bytes of the magic number first, checked one byte at a
     * time so the message says which part is wrong (and a label file given as
     * images is named as such, not as a truncated image header); then 4 bytes
     * per dimension. */
    unsigned char header[16];
    const size_t header_len = 4 + 4 * (size_t)n_dims;
    long long got = read_bytes(gz, header, 4, path, 0);
    if (got < 0) goto error;
    if (got == 4) {
        const uint32_t magic = big_endian_u32(header);
        if (header[0] != 0 || header[1] != 0) {
            fail("'%s': not an IDX file: it starts with the bytes 0x%02x 0x%02x, expected 0x00 0x00 "
                 "(an IDX %s file starts with the magic number 0x%08x)",
                 path, header[0], header[1], what, magic_expected);
            goto error;
        }
        if (header[2] != 0x08) {
            fail("'%s': IDX data type 0x%02x (byte 2, magic number 0x%08x), expected 0x08 (unsigned bytes: "
                 "magic number 0x%08x)", path, header[2], magic, magic_expected);
            goto error;
        }
        if (header[3] != n_dims) {
            fail("'%s': IDX file with %d dimension%s (byte 3, magic number 0x%08x), expected %d for %s "
                 "(magic number 0x%08x)%s", path, header[3], header[3] == 1 ? "" : "s", magic, n_dims, what,
                 magic_expected,
                 header[3] == 1 ? ": is this a label file?" : header[3] == 3 ? ": is this an image file?" : "");
            goto error;
        }
        long long more = read_bytes(gz, header + 4, header_len - 4, path, 4);
        if (more < 0) goto error;
        got += more;
    }
    if ((size_t)got < header_len) {
        fail("'%s': truncated IDX header: the file ends after %lld bytes, expected %zu "
             "(the magic number 0x%08x, then %d big-endian sizes of 4 bytes)",
             path, got, header_len, magic_expected, n_dims);
        goto error;
    }

    /* The sizes. Each must be at least 1 and fit an int, and their product must
     * stay under IDX_MAX_BYTES: checked one factor at a time, so nothing can
     * overflow (three 32-bit numbers can multiply to 96 bits). */
    static const char *const dim_names[3] = {"count", "rows", "cols"};
    uint32_t dims[3] = {1, 1, 1};
    for (int k = 0; k < n_dims; k++) {
        dims[k] = big_endian_u32(header + 4 + 4 * k);
        if (dims[k] == 0 || dims[k] > (uint32_t)INT32_MAX) {
            fail("'%s': the %s in the IDX header (bytes %d-%d) is %u, expected 1 to %d", path, dim_names[k],
                 4 + 4 * k, 7 + 4 * k, dims[k], INT32_MAX);
            goto error;
        }
    }
    if (n_dims == 3 && ((want_rows > 0 && dims[1] != (uint32_t)want_rows) ||
                        (want_cols > 0 && dims[2] != (uint32_t)want_cols))) {
        fail("'%s': images of %ux%u pixels (rows x cols, bytes 8-15), expected %dx%d", path, dims[1], dims[2],
             want_rows, want_cols);
        goto error;
    }
    const size_t per_item = (size_t)dims[1] * dims[2];   /* <= 2^62: fits size_t */
    if (per_item > IDX_MAX_BYTES || dims[0] > IDX_MAX_BYTES / per_item) {
        fail("'%s': the header announces %u x %u x %u bytes of %s (count x rows x cols), more than the %zu MiB "
             "this reader accepts: a damaged header?", path, dims[0], dims[1], dims[2], what, IDX_MAX_BYTES >> 20);
        goto error;
    }
    const size_t n_bytes = (size_t)dims[0] * per_item;

    /* The data, then one more byte to make sure the file ends where the header says. */
    got = read_data(gz, &out->data, n_bytes, path, header_len);
    if (got < 0) goto error;
    if ((size_t)got < n_bytes) {
        if (n_dims == 3)
            fail("'%s': truncated: the header announces %u images of %ux%u pixels (%zu bytes of data after "
                 "the %zu-byte header), the file holds only %lld of them", path, dims[0], dims[1], dims[2],
                 n_bytes, header_len, got);
        else
            fail("'%s': truncated: the header announces %u labels (%zu bytes after the %zu-byte header), "
                 "the file holds only %lld of them", path, dims[0], n_bytes, header_len, got);
        goto error;
    }
    unsigned char extra;
    got = read_bytes(gz, &extra, 1, path, header_len + n_bytes);
    if (got < 0) goto error;
    if (got > 0) {
        fail("'%s': more data than the header announces (%u %s, %zu bytes after the %zu-byte header): "
             "the count in the header is wrong", path, dims[0], what, n_bytes, header_len);
        goto error;
    }
    gzclose(gz);
    out->count = (int)dims[0];
    out->rows = (int)dims[1];
    out->cols = (int)dims[2];
    return 0;

error:
    gzclose(gz);
    idx_free(out);
    return -1;
}

int idx_read_images(IdxData *out, const char *path, int rows, int cols) {
    return read_idx(out, path, 3, rows, cols);
}

int idx_read_labels(IdxData *out, const char *path) {
    return read_idx(out, path, 1, 0, 0);
}

void idx_free(IdxData *d) {
    free(d->data);
    memset(d, 0, sizeof *d);
}
