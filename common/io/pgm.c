/* pgm.c - PGM (P2, P5) grey images: a strict reader, a writer, and area
 * resizing (see pgm.h). */
#include "io/pgm.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"
#include "util/reader.h"
#include "util/util.h"

/* Skip whitespace and comments ("#" to the end of the line) of the header. */
static size_t skip_space(const unsigned char *s, size_t n, size_t i) {
    while (i < n) {
        if (isspace(s[i])) i++;
        else if (s[i] == '#') while (i < n && s[i] != '\n') i++;
        else break;
    }
    return i;
}

/* A decimal number at s[*i] (after whitespace and comments), at most max. */
static int read_number(const char *path, const unsigned char *s, size_t n, size_t *i, const char *what, long max,
                       long *out) {
    *i = skip_space(s, n, *i);
    if (*i >= n) return fail("%s: the file ends at byte %zu where the %s was expected (truncated?)", path, *i, what);
    if (!isdigit(s[*i]))
        return fail("%s: byte %zu: expected the %s (a decimal number), found '%c'", path, *i, what,
                    isprint(s[*i]) ? s[*i] : '?');
    long v = 0;
    size_t start = *i;
    while (*i < n && isdigit(s[*i])) {
        v = v * 10 + (s[*i] - '0');
        if (v > max) return fail("%s: byte %zu: the %s is larger than %ld", path, start, what, max);
        (*i)++;
    }
    *out = v;
    return 0;
}

/* The largest legal file: a P2 image of PGM_MAX_SIDE^2 values of up to 6
 * characters, plus a header. */
static const size_t PGM_MAX_BYTES = (size_t)PGM_MAX_SIDE * PGM_MAX_SIDE * 6 + 4096;
/* How much of the file is read to find the header (its magic, sizes and
 * maxval, with any comments) before the rest. */
enum { PGM_HEAD_BYTES = 65536 };

/* The header: magic, width, height, maxval; *i is left on the byte after maxval. */
static int parse_header(const char *path, const unsigned char *s, size_t n, size_t *i, long *w, long *h,
                        long *maxval) {
    *i = 2;
    if (n < 2 || s[0] != 'P' || (s[1] != '2' && s[1] != '5'))
        return fail("%s: not a PGM image: expected the magic number P2 or P5 at byte 0", path);
    if (read_number(path, s, n, i, "width", 1000000000L, w) < 0 ||
        read_number(path, s, n, i, "height", 1000000000L, h) < 0 ||
        read_number(path, s, n, i, "maxval", 1000000000L, maxval) < 0)
        return -1;
    if (*w < 1 || *h < 1 || *w > PGM_MAX_SIDE || *h > PGM_MAX_SIDE)
        return fail("%s: a %ld x %ld image: expected a width and height of 1 to %d pixels", path, *w, *h, PGM_MAX_SIDE);
    if (*maxval < 1 || *maxval > 65535) return fail("%s: maxval %ld: expected 1 to 65535", path, *maxval);
    return 0;
}

/* The bytes of the file, read once (a pipe or a device is read like a file)
 * and no further than needed: the magic number first (so /dev/zero or
 * /dev/urandom is refused after 2 bytes), then the header, then for a P5
 * image exactly the raster it announces (and one byte more, to find a file
 * longer than its header says); a P2 image to its end, at most PGM_MAX_BYTES. */
static unsigned char *read_pgm_bytes(const char *path, size_t *n) {
    FileReader r;
    if (reader_open(&r, path, READ_GZIP_BY_NAME, PGM_MAX_BYTES, "PGM image") < 0) return NULL;
    size_t i;
    long w, h, maxval;
    if (reader_need(&r, 2) < 0) goto error;
    if (r.len < 2 || r.data[0] != 'P' || (r.data[1] != '2' && r.data[1] != '5')) {
        fail("%s: not a PGM image: expected the magic number P2 or P5 at byte 0", path);
        goto error;
    }
    if (reader_need(&r, PGM_HEAD_BYTES) < 0) goto error;
    if (r.data[1] == '5' && parse_header(path, r.data, r.len, &i, &w, &h, &maxval) == 0 && i < r.len) {
        const size_t raster = (size_t)w * (size_t)h * (maxval < 256 ? 1 : 2);
        if (reader_need(&r, i + 1 + raster + 1) < 0) goto error;
    } else if (reader_rest(&r) < 0) {
        goto error;
    }
    return reader_take(&r, n);
error:
    reader_close(&r);
    return NULL;
}

int pgm_read(PgmImage *img, const char *path) {
    memset(img, 0, sizeof *img);
    struct stat st;
    if (stat(path, &st) != 0) return fail("%s: cannot open: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > PGM_MAX_BYTES)
        return fail("%s: %lld bytes is larger than any PGM image of at most %d x %d pixels", path,
                    (long long)st.st_size, PGM_MAX_SIDE, PGM_MAX_SIDE);
    size_t n;
    unsigned char *s = read_pgm_bytes(path, &n);
    if (!s) return -1;
    int rc = 0;
    long w = 0, h = 0, maxval = 0;
    size_t i = 2;
    if (parse_header(path, s, n, &i, &w, &h, &maxval) < 0) {
        free(s);
        return -1;
    }
    const size_t count = (size_t)w * (size_t)h;
    /* The raster must fit in what is left of the file before its pixels are
     * allocated: a header that promises 4096 x 4096 pixels in a 20-byte file
     * is refused here, not after allocating 64 MiB for them. P5: at least
     * one byte per pixel (after the one whitespace byte); P2: at least one
     * separator and one digit per pixel. The exact checks follow. */
    const size_t least = s[1] == '5' ? count + 1 : 2 * count;
    if (n - i < least) {
        free(s);
        return fail("%s: truncated: %ld x %ld pixels need at least %zu bytes after byte %zu, the file has %zu",
                    path, w, h, least, i, n - i);
    }
    float *px = xmalloc(sizeof(float) * count);
    if (s[1] == '5') {
        /* exactly one whitespace byte, then the raster */
        if (i >= n || !isspace(s[i])) {
            rc = fail("%s: byte %zu: expected one whitespace byte after maxval, then the pixels", path, i);
        } else {
            i++;
            const size_t bytes = maxval < 256 ? 1 : 2, need = count * bytes;
            if (n - i < need) {
                rc = fail("%s: truncated: %ld x %ld pixels need %zu bytes after byte %zu, the file has %zu", path, w,
                          h, need, i, n - i);
            } else if (n - i > need) {
                rc = fail("%s: %zu bytes after the last pixel (byte %zu): the file is longer than its %ld x %ld "
                          "header says", path, n - i - need, i + need, w, h);
            } else {
                for (size_t k = 0; k < count && rc == 0; k++) {
                    long v = bytes == 1 ? s[i + k] : (long)s[i + 2 * k] << 8 | s[i + 2 * k + 1];
                    if (v > maxval)
                        rc = fail("%s: byte %zu: pixel value %ld is above maxval %ld", path, i + k * bytes, v, maxval);
                    px[k] = (float)v / (float)maxval;
                }
            }
        }
    } else {
        for (size_t k = 0; k < count && rc == 0; k++) {
            long v;
            if (skip_space(s, n, i) >= n) {
                rc = fail("%s: truncated: %zu of %ld x %ld pixel values before the end of the file", path, k, w, h);
            } else if (read_number(path, s, n, &i, "pixel value", maxval, &v) < 0) {
                rc = -1;
            } else {
                px[k] = (float)v / (float)maxval;
            }
        }
        if (rc == 0 && skip_space(s, n, i) < n)
            rc = fail("%s: byte %zu: data after the last of %ld x %ld pixel values: the file is longer than its "
                      "header says", path, skip_space(s, n, i), w, h);
    }
    free(s);
    if (rc < 0) {
        free(px);
        return -1;
    }
    img->width = (int)w;
    img->height = (int)h;
    img->pixels = px;
    return 0;
}

void pgm_free(PgmImage *img) {
    free(img->pixels);
    memset(img, 0, sizeof *img);
}

int pgm_write(const char *path, const float *pixels, int width, int height) {
    char header[64];
    int hl = snprintf(header, sizeof header, "P5\n%d %d\n255\n", width, height);
    const size_t count = (size_t)width * height;
    unsigned char *buf = xmalloc((size_t)hl + count);
    memcpy(buf, header, (size_t)hl);
    for (size_t k = 0; k < count; k++) {
        float v = pixels[k] < 0.0f ? 0.0f : pixels[k] > 1.0f ? 1.0f : pixels[k];
        buf[hl + k] = (unsigned char)(v * 255.0f + 0.5f);
    }
    int rc = write_file_atomic(path, buf, (size_t)hl + count);
    free(buf);
    return rc;
}

/* out [out_h, out_w] <- in [h, w], each output pixel the area mean of what it covers */
void image_resize_area(float *out, int out_h, int out_w, const float *in, int h, int w) {
    const double sy = (double)h / out_h, sx = (double)w / out_w;
    for (int oy = 0; oy < out_h; oy++) {
        const double y0 = oy * sy, y1 = (oy + 1) * sy;
        for (int ox = 0; ox < out_w; ox++) {
            const double x0 = ox * sx, x1 = (ox + 1) * sx;
            double sum = 0.0, area = 0.0;
            for (int y = (int)y0; y < h && y < y1; y++) {
                const double wy = (y + 1 < y1 ? y + 1 : y1) - (y > y0 ? y : y0);
                if (wy <= 0) continue;
                for (int x = (int)x0; x < w && x < x1; x++) {
                    const double wx = (x + 1 < x1 ? x + 1 : x1) - (x > x0 ? x : x0);
                    if (wx <= 0) continue;
                    sum += wy * wx * in[(size_t)y * w + x];
                    area += wy * wx;
                }
            }
            out[(size_t)oy * out_w + ox] = area > 0 ? (float)(sum / area) : 0.0f;
        }
    }
}
