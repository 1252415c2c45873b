/* golden.c - read and write golden tensor files (see golden.h and
 * tests/golden/README.md for the byte layout), and compare float arrays. */
#include "golden.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/util.h"

/* ------------------------------------------------------------------ reading */

typedef struct {
    const unsigned char *data;
    size_t len, pos;
    const char *path;
} Cursor;

static int read_u32(Cursor *c, uint32_t *out, const char *what) {
    if (c->len - c->pos < 4)
        return fail("%s: truncated at byte %zu (reading %s)", c->path, c->pos, what);
    const unsigned char *p = c->data + c->pos;
    *out = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    c->pos += 4;
    return 0;
}

static int read_tensor(Cursor *c, GoldTensor *t, int index) {
    uint32_t name_len = 0, type = 0, ndim = 0;   /* set by read_u32 (GCC -O3 cannot tell) */
    if (read_u32(c, &name_len, "a tensor name length") < 0) return -1;
    if (name_len == 0 || name_len > 255 || c->len - c->pos < name_len)
        return fail("%s: tensor %d at byte %zu: bad name length %u", c->path, index, c->pos - 4, name_len);
    t->name = xmalloc(name_len + 1);
    memcpy(t->name, c->data + c->pos, name_len);
    t->name[name_len] = '\0';
    c->pos += name_len;
    if (read_u32(c, &type, "a dtype") < 0 || read_u32(c, &ndim, "ndim") < 0) return -1;
    if (type > GOLD_I32)
        return fail("%s: tensor '%s': dtype %u, expected 0 (float32) or 1 (int32)", c->path, t->name, type);
    if (ndim > GOLD_MAX_DIMS)
        return fail("%s: tensor '%s': %u dims, at most %d supported", c->path, t->name, ndim, GOLD_MAX_DIMS);
    t->type = (GoldType)type;
    t->ndim = (int)ndim;
    t->count = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint32_t dim = 0;
        if (read_u32(c, &dim, "a dim") < 0) return -1;
        if (dim > (1u << 24)) return fail("%s: tensor '%s': dim %u too large", c->path, t->name, dim);
        t->dims[d] = (int)dim;
        t->count *= dim;
    }
    if ((c->len - c->pos) / 4 < t->count)
        return fail("%s: tensor '%s' (%zu values) truncated at byte %zu", c->path, t->name, t->count, c->pos);
    /* The file is little-endian, as is every machine this project targets. */
    t->data = xmalloc(t->count * 4 + 4);
    memcpy(t->data, c->data + c->pos, t->count * 4);
    c->pos += t->count * 4;
    return 0;
}

int gold_read(GoldFile *f, const char *path) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    size_t len = 0;
    char *buf = read_whole_file(path, &len);
    if (buf == NULL) return -1;
    Cursor c = {(const unsigned char *)buf, len, 8, path};
    uint32_t version, count;
    int rc = -1;
    if (len < 16 || memcmp(buf, GOLD_MAGIC, 8) != 0) {
        fail("%s: not a golden tensor file (expected magic \"%s\" at byte 0)", path, GOLD_MAGIC);
        goto out;
    }
    if (read_u32(&c, &version, "the version") < 0 || read_u32(&c, &count, "the tensor count") < 0) goto out;
    if (version != GOLD_VERSION) {
        fail("%s: format version %u, expected %u", path, version, GOLD_VERSION);
        goto out;
    }
    if (count > 100000) {
        fail("%s: implausible tensor count %u at byte 12", path, count);
        goto out;
    }
    f->t = xcalloc(count ? count : 1, sizeof(GoldTensor));
    for (uint32_t i = 0; i < count; i++) {
        f->n = (int)i + 1;   /* so gold_free releases a partly read tensor too */
        if (read_tensor(&c, &f->t[i], (int)i) < 0) goto out;
    }
    if (c.pos != len) {
        fail("%s: %zu unexpected bytes after the last tensor (byte %zu)", path, len - c.pos, c.pos);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    if (rc < 0) gold_free(f);
    return rc;
}

void gold_free(GoldFile *f) {
    for (int i = 0; i < f->n; i++) {
        free(f->t[i].name);
        free(f->t[i].data);
    }
    free(f->t);
    f->t = NULL;
    f->n = 0;
}

const GoldTensor *gold_find(const GoldFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

/* Length of the case prefix of a name (up to the first '/', or all of it). */
static size_t case_len(const char *name) {
    const char *slash = strchr(name, '/');
    return slash ? (size_t)(slash - name) : strlen(name);
}

int gold_case(const GoldFile *f, int i, char *out, size_t outlen) {
    int seen = -1;
    for (int k = 0; k < f->n; k++) {
        const char *name = f->t[k].name;
        size_t n = case_len(name);
        int is_new = 1;
        for (int j = 0; j < k && is_new; j++)
            if (case_len(f->t[j].name) == n && strncmp(f->t[j].name, name, n) == 0) is_new = 0;
        if (!is_new) continue;
        if (++seen == i) {
            snprintf(out, outlen, "%.*s", (int)n, name);
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ writing */

static void put_u32(GoldWriter *w, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    if (w->fp && fwrite(b, 1, 4, w->fp) != 4) w->error = 1;
}

int gold_writer_open(GoldWriter *w, const char *path) {
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    w->fp = fopen(path, "wb");
    if (w->fp == NULL) return fail("%s: cannot open for writing: %s", path, strerror(errno));
    if (fwrite(GOLD_MAGIC, 1, 8, w->fp) != 8) w->error = 1;
    put_u32(w, GOLD_VERSION);
    put_u32(w, 0);   /* count, patched by gold_writer_close */
    return 0;
}

static void write_tensor(GoldWriter *w, const char *name, GoldType type, const void *data,
                         int ndim, const int *dims) {
    size_t count = 1;
    put_u32(w, (uint32_t)strlen(name));
    if (w->fp && fwrite(name, 1, strlen(name), w->fp) != strlen(name)) w->error = 1;
    put_u32(w, (uint32_t)type);
    put_u32(w, (uint32_t)ndim);
    for (int d = 0; d < ndim; d++) {
        put_u32(w, (uint32_t)dims[d]);
        count *= (size_t)dims[d];
    }
    if (w->fp && count && fwrite(data, 4, count, w->fp) != count) w->error = 1;
    w->n++;
}

void gold_write_f32(GoldWriter *w, const char *name, const float *data, int ndim, const int *dims) {
    write_tensor(w, name, GOLD_F32, data, ndim, dims);
}

void gold_write_i32(GoldWriter *w, const char *name, const int *data, int ndim, const int *dims) {
    write_tensor(w, name, GOLD_I32, data, ndim, dims);
}

int gold_writer_close(GoldWriter *w) {
    if (w->fp == NULL) return -1;
    if (fseek(w->fp, 12, SEEK_SET) != 0) w->error = 1;
    put_u32(w, w->n);
    if (fclose(w->fp) != 0) w->error = 1;
    w->fp = NULL;
    return w->error ? fail("%s: write failed: %s", w->path, strerror(errno)) : 0;
}

/* ---------------------------------------------------------------- comparing */

double gold_atol_for_scale(const float *want, size_t n, double atol) {
    double scale = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(want[i]) && fabs((double)want[i]) > scale) scale = fabs((double)want[i]);
    return atol * (scale < 1.0 ? scale : 1.0);
}

GoldDiff gold_compare(const float *got, const float *want, size_t n, double rtol, double atol) {
    GoldDiff d = {1, 0, 0.0f, 0.0f, 0.0, 0.0};
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i], ratio;
        if (isnan(g) || isnan(w)) {
            ratio = INFINITY;
        } else if (isinf(g) || isinf(w)) {
            ratio = g == w ? 0.0 : INFINITY;
        } else {
            double err = fabs(g - w);
            if (err > d.max_abs) d.max_abs = err;
            ratio = err == 0.0 ? 0.0 : err / (atol + rtol * fabs(w));
        }
        if (i == 0 || ratio > d.ratio) {
            d.ratio = ratio;
            d.worst = i;
            d.got = got[i];
            d.want = want[i];
        }
    }
    d.ok = n == 0 || d.ratio <= 1.0;
    return d;
}
