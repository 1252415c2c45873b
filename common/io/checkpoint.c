/* checkpoint.c - save and load a model's parameters with its configuration.
 *
 * The file format is documented in checkpoint.h. In short:
 *   "ATTNCKPT" | version | config text | tensor table with values | CRC-32
 * All integers and floats are stored little-endian, whatever the machine.
 *
 * Saving streams the bytes through a running CRC-32 into a temporary file
 * that is renamed over the target only when complete (util.h, atomic_open),
 * so an interrupted save never destroys the previous checkpoint.
 *
 * Loading reads the file into memory first, once and in the order of its
 * format (the magic before anything else, then each part only as far as the
 * lengths before it say, at most CKPT_MAX_BYTES), and checks it completely -
 * magic, version, every length against the bytes that are actually there,
 * the CRC, finite values - before a single parameter is touched. So a bad
 * file produces one clear message and leaves the model exactly as it was,
 * and /dev/zero or a pipe that never ends is refused after its first bytes.
 * A pipe (--load /dev/stdin) is read once: its bytes are kept between the
 * config read and the load (`kept` below). */
#include "io/checkpoint.h"
#include "util/error.h"
#include "util/reader.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* ------------------------------------------------------ byte-order helpers */

static void encode_u32(unsigned char out[4], uint32_t v) {
    out[0] = (unsigned char)(v & 0xff);
    out[1] = (unsigned char)((v >> 8) & 0xff);
    out[2] = (unsigned char)((v >> 16) & 0xff);
    out[3] = (unsigned char)((v >> 24) & 0xff);
}

static uint32_t decode_u32(const unsigned char in[4]) {
    return (uint32_t)in[0] | ((uint32_t)in[1] << 8) | ((uint32_t)in[2] << 16) | ((uint32_t)in[3] << 24);
}

/* zlib's crc32() takes a 32-bit length; feed big buffers in pieces. */
static uLong crc_update(uLong crc, const unsigned char *data, size_t n) {
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, data, piece);
        data += piece;
        n -= piece;
    }
    return crc;
}

/* ------------------------------------------------------------------ saving */

/* Every byte written goes both to the file and into the running CRC. */
typedef struct {
    FILE *f;
    uLong crc;
} Writer;

static void write_bytes(Writer *w, const void *data, size_t n) {
    fwrite(data, 1, n, w->f);
    w->crc = crc_update(w->crc, data, n);
}

static void write_u32(Writer *w, uint32_t v) {
    unsigned char b[4];
    encode_u32(b, v);
    write_bytes(w, b, 4);
}

static void write_floats(Writer *w, const float *x, size_t count) {
    unsigned char chunk[4096];
    size_t filled = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);           /* the float's IEEE-754 bit pattern */
        encode_u32(chunk + filled, bits);
        filled += 4;
        if (filled == sizeof chunk) {
            write_bytes(w, chunk, filled);
            filled = 0;
        }
    }
    if (filled > 0) write_bytes(w, chunk, filled);
}

int checkpoint_so_far_path(char *dst, size_t cap, const char *path) {
    const size_t n = strlen(path);
    const size_t stem = n > 5 && strcmp(path + n - 5, ".ckpt") == 0 ? n - 5 : n;
    return path_format(dst, cap, "%.*s_so_far.ckpt", (int)stem, path);
}

int checkpoint_save_so_far(const char *path, const char *config_text, const Params *p, const StateItem *items, int n) {
    char so_far[PATH_MAX];
    if (checkpoint_so_far_path(so_far, sizeof so_far, path) < 0) return -1;
    return checkpoint_save_with_state(so_far, config_text, p, items, n);
}

void checkpoint_remove_so_far(const char *path) {
    char so_far[PATH_MAX];
    if (checkpoint_so_far_path(so_far, sizeof so_far, path) == 0) remove(so_far);
}

/* ------------------------------------------------------ the training state */

/* The bytes an item's value takes in the file. */
static size_t state_width(StateKind kind) {
    return kind == STATE_INT || kind == STATE_FLOAT ? 4 : 8;
}

static const char *state_kind_name(uint32_t kind) {
    switch (kind) {
    case STATE_INT: return "int";
    case STATE_LONG: return "long";
    case STATE_U64: return "u64";
    case STATE_FLOAT: return "float";
    case STATE_DOUBLE: return "double";
    default: return "an unknown kind";
    }
}

static void encode_u64(unsigned char out[8], uint64_t v) {
    encode_u32(out, (uint32_t)(v & 0xffffffffu));
    encode_u32(out + 4, (uint32_t)(v >> 32));
}

static uint64_t decode_u64(const unsigned char in[8]) {
    return (uint64_t)decode_u32(in) | ((uint64_t)decode_u32(in + 4) << 32);
}

/* Value k of an item, as the file stores it (4 or 8 little-endian bytes). */
static void encode_state_value(unsigned char *out, const StateItem *it, size_t k) {
    uint32_t u32;
    uint64_t u64;
    switch (it->kind) {
    case STATE_INT: encode_u32(out, (uint32_t)((const int *)it->data)[k]); return;
    case STATE_LONG: encode_u64(out, (uint64_t)(int64_t)((const long *)it->data)[k]); return;
    case STATE_U64: encode_u64(out, ((const uint64_t *)it->data)[k]); return;
    case STATE_FLOAT: memcpy(&u32, (const float *)it->data + k, 4); encode_u32(out, u32); return;
    case STATE_DOUBLE: memcpy(&u64, (const double *)it->data + k, 8); encode_u64(out, u64); return;
    }
}

static void decode_state_value(const unsigned char *in, StateItem *it, size_t k) {
    uint32_t u32;
    uint64_t u64;
    switch (it->kind) {
    case STATE_INT: ((int *)it->data)[k] = (int)(int32_t)decode_u32(in); return;
    case STATE_LONG: ((long *)it->data)[k] = (long)(int64_t)decode_u64(in); return;
    case STATE_U64: ((uint64_t *)it->data)[k] = decode_u64(in); return;
    case STATE_FLOAT: u32 = decode_u32(in); memcpy((float *)it->data + k, &u32, 4); return;
    case STATE_DOUBLE: u64 = decode_u64(in); memcpy((double *)it->data + k, &u64, 8); return;
    }
}

/* The state section's length S (after its own u32), or 0 when it does not
 * fit the format's u32 lengths. */
static size_t state_bytes(const StateItem *items, int n) {
    size_t S = 4;
    for (int i = 0; i < n; i++) {
        if (items[i].count > UINT32_MAX) return 0;
        S += 4 + strlen(items[i].name) + 4 + 4 + items[i].count * state_width(items[i].kind);
    }
    return S <= UINT32_MAX ? S : 0;
}

static void write_state(Writer *w, const StateItem *items, int n, size_t S) {
    write_u32(w, (uint32_t)S);
    write_u32(w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        const StateItem *it = &items[i];
        const size_t name_len = strlen(it->name), width = state_width(it->kind);
        write_u32(w, (uint32_t)name_len);
        write_bytes(w, it->name, name_len);
        write_u32(w, (uint32_t)it->kind);
        write_u32(w, (uint32_t)it->count);
        unsigned char chunk[4096];
        size_t filled = 0;
        for (size_t k = 0; k < it->count; k++) {
            encode_state_value(chunk + filled, it, k);
            filled += width;
            if (filled == sizeof chunk) {
                write_bytes(w, chunk, filled);
                filled = 0;
            }
        }
        if (filled > 0) write_bytes(w, chunk, filled);
    }
}

int checkpoint_save(const char *path, const char *config_text, const Params *p) {
    return checkpoint_save_with_state(path, config_text, p, NULL, 0);
}

int checkpoint_save_with_state(const char *path, const char *config_text, const Params *p, const StateItem *items,
                               int n) {
    const size_t S = n > 0 ? state_bytes(items, n) : 0;
    if (n > 0 && S == 0)
        return fail("cannot save checkpoint '%s': its training state is larger than the format's 4 GiB", path);
    if (config_text == NULL) config_text = "";
    size_t config_len = strlen(config_text);
    if (config_len > CKPT_CONFIG_MAX)
        return fail("cannot save checkpoint '%s': config text is %zu bytes, the format allows at most %d",
                    path, config_len, CKPT_CONFIG_MAX);
    if (p->data == NULL && p->size > 0)
        return fail("cannot save checkpoint '%s': the parameters are not allocated", path);

    AtomicFile af;
    if (atomic_open(&af, path) != 0) return -1;

    Writer w = { af.f, crc32(0L, Z_NULL, 0) };
    write_bytes(&w, CKPT_MAGIC, 8);
    write_u32(&w, n > 0 ? CKPT_VERSION_STATE : CKPT_VERSION);
    write_u32(&w, (uint32_t)config_len);
    write_bytes(&w, config_text, config_len);
    write_u32(&w, (uint32_t)p->n_tensors);
    for (int i = 0; i < p->n_tensors; i++) {
        const ParamTensor *t = &p->tensors[i];
        size_t name_len = strnlen(t->name, PARAMS_NAME_LEN);
        write_u32(&w, (uint32_t)name_len);
        write_bytes(&w, t->name, name_len);
        write_u32(&w, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) write_u32(&w, (uint32_t)t->dims[d]);
        write_floats(&w, p->data + t->offset, t->count);
    }
    if (n > 0) write_state(&w, items, n, S);

    /* The CRC covers every byte before it, so it is not part of itself. */
    unsigned char crc_bytes[4];
    encode_u32(crc_bytes, (uint32_t)w.crc);
    fwrite(crc_bytes, 1, 4, af.f);

    return atomic_close(&af, 1);   /* checks for write errors, fsyncs, renames */
}

/* ----------------------------------------------------------------- loading */

/* One tensor as described by the file. */
typedef struct {
    char name[PARAMS_NAME_LEN];
    int ndim;
    int dims[PARAMS_MAX_DIMS];
    size_t count;          /* product of dims */
    size_t values_at;      /* byte offset of the first value in the file */
} FileTensor;

/* A checkpoint read into memory and checked: where everything is. */
typedef struct {
    unsigned char *bytes;  /* the whole file */
    size_t size;
    size_t config_at;      /* byte offset of the config text */
    size_t config_len;
    int n_tensors;
    FileTensor tensors[PARAMS_MAX_TENSORS];
    size_t state_at;       /* version 2: the byte offset of the training state (its item count), else 0 */
    size_t state_len;
} CheckpointFile;

/* A read position in the file, for the length checks. */
typedef struct {
    const char *path;
    const unsigned char *bytes;
    size_t size;
    size_t pos;
} Cursor;

/* Make sure n more bytes exist at the cursor; else report a truncated file,
 * saying where and what was expected. */
static int need_bytes(const Cursor *c, size_t n, const char *what) {
    if (c->size - c->pos >= n) return 0;
    return fail("checkpoint '%s' is truncated: at byte offset %zu expected %s (%zu bytes), "
                "but the file ends at byte %zu",
                c->path, c->pos, what, n, c->size);
}

static int read_u32(Cursor *c, const char *what, uint32_t *out) {
    if (need_bytes(c, 4, what) != 0) return -1;
    *out = decode_u32(c->bytes + c->pos);
    c->pos += 4;
    return 0;
}

/* Parse one tensor's header (name, ndim, dims) and skip over its values. */
static int read_tensor_entry(Cursor *c, int index, FileTensor *t) {
    char what[128];
    uint32_t name_len, ndim;

    snprintf(what, sizeof what, "the name length of tensor %d", index);
    if (read_u32(c, what, &name_len) != 0) return -1;
    if (name_len == 0 || name_len >= PARAMS_NAME_LEN)
        return fail("checkpoint '%s' is corrupted: at byte offset %zu tensor %d has a name length of %u, "
                    "expected 1 to %d",
                    c->path, c->pos - 4, index, name_len, PARAMS_NAME_LEN - 1);
    snprintf(what, sizeof what, "the name of tensor %d", index);
    if (need_bytes(c, name_len, what) != 0) return -1;
    memcpy(t->name, c->bytes + c->pos, name_len);
    t->name[name_len] = '\0';
    c->pos += name_len;

    snprintf(what, sizeof what, "the number of dims of tensor %d '%s'", index, t->name);
    if (read_u32(c, what, &ndim) != 0) return -1;
    if (ndim > PARAMS_MAX_DIMS)
        return fail("checkpoint '%s' is corrupted: at byte offset %zu tensor %d '%s' has %u dims, "
                    "expected at most %d",
                    c->path, c->pos - 4, index, t->name, ndim, PARAMS_MAX_DIMS);
    t->ndim = (int)ndim;

    size_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint32_t dim;
        snprintf(what, sizeof what, "dim %d of tensor %d '%s'", d, index, t->name);
        if (read_u32(c, what, &dim) != 0) return -1;
        /* Refuse absurd sizes before multiplying, so count * 4 cannot overflow. */
        if (dim > INT_MAX || (dim != 0 && count > SIZE_MAX / 4 / dim))
            return fail("checkpoint '%s' is corrupted: at byte offset %zu tensor %d '%s' has an "
                        "impossible dim %u",
                        c->path, c->pos - 4, index, t->name, dim);
        t->dims[d] = (int)dim;
        count *= dim;
    }
    t->count = count;

    snprintf(what, sizeof what, "the %zu float values of tensor %d '%s'", count, index, t->name);
    if (need_bytes(c, count * 4, what) != 0) return -1;
    t->values_at = c->pos;
    c->pos += count * 4;
    return 0;
}

/* ------------------------------------------------ reading the file once */

/* The bytes of the file, read in the order of its format and each part only
 * after what comes before it was found sound: the magic first (so /dev/zero,
 * /dev/urandom or a gzip bomb is refused after 8 bytes), then each length
 * the header gives, read only as far as it says (and at most CKPT_MAX_BYTES
 * in all). Wherever a length is impossible, or the file ends, reading stops
 * and parse_checkpoint names the problem from the bytes read so far. After
 * the CRC at most TRAILING_PEEK more bytes are read: *more_after is 1 when
 * the file went on past them. Returns 0 with *bytes (malloc'd) and *size,
 * or -1 with fail(). */
enum { TRAILING_PEEK = 65536 };

static int read_checkpoint_bytes(const char *path, unsigned char **bytes, size_t *size, int *more_after) {
    *bytes = NULL;
    *size = 0;
    *more_after = 0;
    FileReader r;
    if (reader_open(&r, path, READ_GZIP_BY_NAME, CKPT_MAX_BYTES, "checkpoint") < 0) goto unreadable;
    const size_t magic_len = strlen(CKPT_MAGIC);
    if (reader_need(&r, magic_len) < 0) goto unreadable;
    if (r.len == 0 || memcmp(r.data, CKPT_MAGIC, r.len < magic_len ? r.len : magic_len) != 0) {
        reader_close(&r);
        return fail("'%s' is not a checkpoint: it does not start with \"%s\"", path, CKPT_MAGIC);
    }
    /* each step: read up to `at`; stop (the parse says why) when the file is shorter */
#define READ_TO(n)                                  \
    do {                                            \
        if (reader_need(&r, (n)) < 0) goto unreadable; \
        if (r.len < (n)) goto done;                 \
    } while (0)
    size_t at = magic_len + 8;
    READ_TO(at);
    const uint32_t version = decode_u32(r.data + magic_len);
    if (version != CKPT_VERSION && version != CKPT_VERSION_STATE) goto done;
    const uint32_t config_len = decode_u32(r.data + magic_len + 4);
    if (config_len > CKPT_CONFIG_MAX) goto done;
    at += (size_t)config_len + 4;
    READ_TO(at);
    const uint32_t n_tensors = decode_u32(r.data + at - 4);
    if (n_tensors > PARAMS_MAX_TENSORS) goto done;
    for (uint32_t i = 0; i < n_tensors; i++) {
        READ_TO(at + 4);
        const uint32_t name_len = decode_u32(r.data + at);
        if (name_len == 0 || name_len >= PARAMS_NAME_LEN) goto done;
        at += 4 + (size_t)name_len + 4;
        READ_TO(at);
        const uint32_t ndim = decode_u32(r.data + at - 4);
        if (ndim > PARAMS_MAX_DIMS) goto done;
        READ_TO(at + 4 * (size_t)ndim);
        size_t count = 1;
        for (uint32_t d = 0; d < ndim; d++) {
            const uint32_t dim = decode_u32(r.data + at + 4 * d);
            if (dim > INT_MAX || (dim != 0 && count > SIZE_MAX / 4 / dim)) goto done;
            count *= dim;
        }
        at += 4 * (size_t)ndim;
        if (count * 4 > SIZE_MAX - at - 4) goto done;
        at += count * 4;
        READ_TO(at);    /* the values: beyond CKPT_MAX_BYTES, refused here */
    }
    if (version == CKPT_VERSION_STATE) {   /* the training state: its length, then its bytes */
        READ_TO(at + 4);
        const uint32_t state_len = decode_u32(r.data + at);
        at += 4 + (size_t)state_len;
        READ_TO(at);
    }
    READ_TO(at + 4);    /* the CRC */
    at += 4;
    if (reader_need(&r, at + TRAILING_PEEK) < 0) goto unreadable;
    *more_after = r.len == at + TRAILING_PEEK && !r.eof;
#undef READ_TO
done:
    *bytes = reader_take(&r, size);
    return 0;

unreadable: {
        char reason[1024];
        snprintf(reason, sizeof reason, "%s", last_error());   /* fail() overwrites it */
        reader_close(&r);
        return fail("cannot load checkpoint: %s", reason);
    }
}

/* Check the bytes of a checkpoint (all of the file, or as much as
 * read_checkpoint_bytes read) completely, except the match with a model,
 * and note where everything is in ck. ck->bytes is left to the caller. */
static int parse_checkpoint(const char *path, const unsigned char *bytes, size_t size, int more_after,
                            CheckpointFile *ck) {
    Cursor c = { path, bytes, size, 0 };

    /* Magic: a file that does not start with it is something else entirely. */
    size_t magic_len = strlen(CKPT_MAGIC);
    size_t compare = size < magic_len ? size : magic_len;
    if (size == 0 || memcmp(bytes, CKPT_MAGIC, compare) != 0)
        return fail("'%s' is not a checkpoint: it does not start with \"%s\"", path, CKPT_MAGIC);
    if (need_bytes(&c, magic_len, "the magic \"" CKPT_MAGIC "\"") != 0) return -1;
    c.pos = magic_len;

    uint32_t version, config_len, n_tensors;
    if (read_u32(&c, "the format version", &version) != 0) return -1;
    if (version != CKPT_VERSION && version != CKPT_VERSION_STATE)
        return fail("checkpoint '%s' has format version %u; this program reads version %u (and %u, the same "
                    "with a training state)", path, version, CKPT_VERSION, CKPT_VERSION_STATE);

    if (read_u32(&c, "the config length", &config_len) != 0) return -1;
    if (config_len > CKPT_CONFIG_MAX)
        return fail("checkpoint '%s' is corrupted: at byte offset %zu the config length is %u, "
                    "expected at most %d",
                    path, c.pos - 4, config_len, CKPT_CONFIG_MAX);
    if (need_bytes(&c, config_len, "the config text") != 0) return -1;
    ck->config_at = c.pos;
    ck->config_len = config_len;
    c.pos += config_len;

    if (read_u32(&c, "the tensor count", &n_tensors) != 0) return -1;
    if (n_tensors > PARAMS_MAX_TENSORS)
        return fail("checkpoint '%s' is corrupted: at byte offset %zu the tensor count is %u, "
                    "expected at most %d",
                    path, c.pos - 4, n_tensors, PARAMS_MAX_TENSORS);
    ck->n_tensors = (int)n_tensors;
    for (int i = 0; i < ck->n_tensors; i++)
        if (read_tensor_entry(&c, i, &ck->tensors[i]) != 0) return -1;
    ck->state_at = ck->state_len = 0;
    if (version == CKPT_VERSION_STATE) {   /* checked item by item when a resume reads it */
        uint32_t state_len;
        if (read_u32(&c, "the training state's length", &state_len) != 0 ||
            need_bytes(&c, state_len, "the training state") != 0)
            return -1;
        ck->state_at = c.pos;
        ck->state_len = state_len;
        c.pos += state_len;
    }

    /* Exactly the 4-byte CRC must remain. */
    size_t crc_at = c.pos;
    uint32_t stored_crc;
    if (read_u32(&c, "the CRC-32", &stored_crc) != 0) return -1;
    if (c.pos != size || more_after)
        return fail("checkpoint '%s' is corrupted: %s%zu unexpected bytes after the CRC at byte offset %zu",
                    path, more_after ? "more than " : "", size - c.pos, crc_at);
    uint32_t computed_crc = (uint32_t)crc_update(crc32(0L, Z_NULL, 0), bytes, crc_at);
    if (computed_crc != stored_crc)
        return fail("checkpoint '%s' is corrupted: CRC-32 mismatch (stored 0x%08x, computed 0x%08x)",
                    path, stored_crc, computed_crc);
    return 0;
}

/* A checkpoint that is not a plain file (a pipe: --load /dev/stdin or
 * --load <(...), a FIFO) can be read only once, but a program reads its
 * config (checkpoint_read_config) before it builds the model and loads the
 * tensors (checkpoint_load). So the bytes of such a file, once read and found
 * sound, are kept here until checkpoint_load of the same path takes them. A
 * plain file is read afresh each time (it may have changed in between). */
static struct {
    char *path;
    unsigned char *bytes;
    size_t size;
} kept;

static void kept_clear(void) {
    free(kept.path);
    free(kept.bytes);
    memset(&kept, 0, sizeof kept);
}

static int is_plain_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Read and check path (or take the bytes kept for it) into ck: ck->bytes is
 * then the caller's to free. keep: a config read, which the tensors' load of
 * the same file follows (see `kept`). On error nothing is left. */
static int open_checkpoint(const char *path, CheckpointFile *ck, int keep) {
    unsigned char *bytes;
    size_t size;
    int more_after = 0;
    if (kept.path && strcmp(kept.path, path) == 0) {
        size = kept.size;
        if (keep) {
            bytes = malloc(size ? size : 1);
            if (bytes == NULL) return fail("cannot load checkpoint '%s': out of memory", path);
            memcpy(bytes, kept.bytes, size);
        } else {
            bytes = kept.bytes;
            kept.bytes = NULL;
            kept_clear();
        }
    } else if (read_checkpoint_bytes(path, &bytes, &size, &more_after) < 0) {
        return -1;
    }
    if (parse_checkpoint(path, bytes, size, more_after, ck) < 0) {
        free(bytes);
        return -1;
    }
    if (keep && !is_plain_file(path) && !(kept.path && strcmp(kept.path, path) == 0)) {
        kept_clear();
        kept.path = strdup(path);
        kept.bytes = malloc(size ? size : 1);
        if (kept.path && kept.bytes) {
            memcpy(kept.bytes, bytes, size);
            kept.size = size;
        } else {
            kept_clear();
        }
    }
    ck->bytes = bytes;
    ck->size = size;
    return 0;
}

/* A "key=" that starts two lines of config text: its first line's start and
 * the key's length (*len), or NULL when every key comes once. Which line a
 * reader would take is not for a checkpoint to leave open. */
typedef struct {
    const char *at;
    size_t len;
} ConfigKey;

static int compare_keys(const void *a, const void *b) {
    const ConfigKey *x = a, *y = b;
    const size_t n = x->len < y->len ? x->len : y->len;
    const int c = memcmp(x->at, y->at, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

static const char *duplicate_key(const char *text, size_t *len) {
    size_t lines = 1;
    for (const char *c = text; *c; c++) lines += *c == '\n';
    ConfigKey *keys = malloc(lines * sizeof *keys);
    if (keys == NULL) return NULL;
    size_t n = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n'), *eq = strchr(line, '=');
        if (end == NULL) end = line + strlen(line);
        if (eq && eq < end && eq > line) keys[n++] = (ConfigKey){line, (size_t)(eq - line)};
        line = *end ? end + 1 : end;
    }
    qsort(keys, n, sizeof *keys, compare_keys);
    const char *found = NULL;
    for (size_t i = 1; i < n && !found; i++)
        if (compare_keys(&keys[i - 1], &keys[i]) == 0) {
            found = keys[i].at;
            *len = keys[i].len;
        }
    free(keys);
    return found;
}

int checkpoint_read_config(const char *path, char **config_out) {
    *config_out = NULL;
    CheckpointFile *ck = calloc(1, sizeof *ck);
    if (ck == NULL) return fail("cannot load checkpoint '%s': out of memory", path);
    if (open_checkpoint(path, ck, 1) != 0) {
        free(ck);
        return -1;
    }
    char *config = malloc(ck->config_len + 1);   /* config_len <= CKPT_CONFIG_MAX */
    if (config == NULL) {
        free(ck->bytes);
        free(ck);
        return fail("cannot load checkpoint '%s': out of memory", path);
    }
    memcpy(config, ck->bytes + ck->config_at, ck->config_len);
    config[ck->config_len] = '\0';
    free(ck->bytes);
    free(ck);
    size_t key_len = 0;
    const char *twice = duplicate_key(config, &key_len);
    if (twice) {
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(key_len < 40 ? key_len : 40), twice);
        fail("%s: its config has two '%s%s=' lines: expected each key once (which one would the model be?)", path,
             key, key_len > 40 ? "..." : "");
        free(config);
        return -1;
    }
    *config_out = config;
    return 0;
}

/* Write dims as "[64,192]" into out. */
static void format_dims(char *out, size_t outlen, int ndim, const int *dims) {
    size_t used = 0;
    used += (size_t)snprintf(out, outlen, "[");
    for (int d = 0; d < ndim && used < outlen; d++)
        used += (size_t)snprintf(out + used, outlen - used, d ? ",%d" : "%d", dims[d]);
    if (used < outlen) snprintf(out + used, outlen - used, "]");
}

/* Does the file's tensor table match the model's, tensor by tensor? */
static int check_layout(const char *path, const CheckpointFile *ck, const Params *p) {
    if (ck->n_tensors != p->n_tensors)
        return fail("checkpoint '%s' holds %d tensors, the model expects %d",
                    path, ck->n_tensors, p->n_tensors);
    for (int i = 0; i < ck->n_tensors; i++) {
        const FileTensor *ft = &ck->tensors[i];
        const ParamTensor *mt = &p->tensors[i];
        if (strncmp(ft->name, mt->name, PARAMS_NAME_LEN) != 0)
            return fail("checkpoint '%s': tensor %d is named '%s' in the file, the model expects '%s'",
                        path, i, ft->name, mt->name);
        int same = ft->ndim == mt->ndim;
        for (int d = 0; same && d < ft->ndim; d++) same = ft->dims[d] == mt->dims[d];
        if (!same) {
            char file_dims[96], model_dims[96];
            format_dims(file_dims, sizeof file_dims, ft->ndim, ft->dims);
            format_dims(model_dims, sizeof model_dims, mt->ndim, mt->dims);
            return fail("checkpoint '%s': tensor %d '%s' has dims %s, model expects %s",
                        path, i, ft->name, file_dims, model_dims);
        }
    }
    return 0;
}

/* Every value a finite number? A model saved after its training diverged
 * (NaN or infinite weights) would load and then answer nonsense - empty
 * captions, 0% for every class - without a word; it is refused instead,
 * naming the first tensor and element. */
static int check_finite(const char *path, const CheckpointFile *ck) {
    for (int i = 0; i < ck->n_tensors; i++) {
        const FileTensor *ft = &ck->tensors[i];
        const unsigned char *src = ck->bytes + ft->values_at;
        for (size_t k = 0; k < ft->count; k++) {
            /* all exponent bits set: an infinity or a NaN (IEEE-754 single) */
            if ((decode_u32(src + 4 * k) & 0x7f800000u) == 0x7f800000u) {
                float v;
                uint32_t bits = decode_u32(src + 4 * k);
                memcpy(&v, &bits, 4);
                return fail("checkpoint '%s': tensor %d '%s' holds %s at element %zu (of %zu): the weights of a "
                            "run that diverged, not a model to use; expected finite numbers",
                            path, i, ft->name, isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf", k, ft->count);
            }
        }
    }
    return 0;
}

int checkpoint_load(const char *path, Params *p) {
    if (p->data == NULL && p->size > 0)
        return fail("cannot load checkpoint '%s': the model's parameters are not allocated "
                    "(call params_alloc first)", path);
    CheckpointFile *ck = calloc(1, sizeof *ck);
    if (ck == NULL) return fail("cannot load checkpoint '%s': out of memory", path);
    if (open_checkpoint(path, ck, 0) != 0 || check_layout(path, ck, p) != 0 || check_finite(path, ck) != 0) {
        free(ck->bytes);
        free(ck);
        return -1;
    }

    /* Everything checked: now (and only now) overwrite the parameters. */
    for (int i = 0; i < ck->n_tensors; i++) {
        const FileTensor *ft = &ck->tensors[i];
        float *dest = p->data + p->tensors[i].offset;
        const unsigned char *src = ck->bytes + ft->values_at;
        for (size_t k = 0; k < ft->count; k++) {
            uint32_t bits = decode_u32(src + 4 * k);
            memcpy(&dest[k], &bits, 4);
        }
    }
    free(ck->bytes);
    free(ck);
    return 0;
}

/* One item as the file's training state holds it. */
typedef struct {
    char name[PARAMS_NAME_LEN];
    uint32_t kind, count;
    size_t values_at;      /* byte offset in the file */
} FileItem;

enum { STATE_MAX_ITEMS = 256 };

/* The items of ck's training state, checked against its length, into items
 * (at most STATE_MAX_ITEMS); their number, or -1 with fail(). */
static int read_state_items(const char *path, const CheckpointFile *ck, FileItem *items) {
    Cursor c = {path, ck->bytes, ck->state_at + ck->state_len, ck->state_at};
    uint32_t n;
    if (read_u32(&c, "the training state's item count", &n) != 0) return -1;
    if (n > STATE_MAX_ITEMS)
        return fail("checkpoint '%s' is corrupted: its training state has %u items, expected at most %d", path, n,
                    STATE_MAX_ITEMS);
    for (uint32_t i = 0; i < n; i++) {
        FileItem *it = &items[i];
        uint32_t name_len;
        if (read_u32(&c, "a state item's name length", &name_len) != 0) return -1;
        if (name_len == 0 || name_len >= PARAMS_NAME_LEN)
            return fail("checkpoint '%s' is corrupted: state item %u has a name length of %u, expected 1 to %d",
                        path, i, name_len, PARAMS_NAME_LEN - 1);
        if (need_bytes(&c, name_len, "a state item's name") != 0) return -1;
        memcpy(it->name, c.bytes + c.pos, name_len);
        it->name[name_len] = '\0';
        c.pos += name_len;
        if (read_u32(&c, "a state item's kind", &it->kind) != 0 || read_u32(&c, "a state item's count", &it->count))
            return -1;
        if (it->kind < STATE_INT || it->kind > STATE_DOUBLE)
            return fail("checkpoint '%s' is corrupted: state item '%s' has kind %u, expected %d to %d", path,
                        it->name, it->kind, STATE_INT, STATE_DOUBLE);
        if (need_bytes(&c, (size_t)it->count * state_width((StateKind)it->kind), "a state item's values") != 0)
            return -1;
        it->values_at = c.pos;
        c.pos += (size_t)it->count * state_width((StateKind)it->kind);
    }
    if (c.pos != c.size)
        return fail("checkpoint '%s' is corrupted: %zu bytes after its training state's last item", path,
                    c.size - c.pos);
    return (int)n;
}

int checkpoint_load_with_state(const char *path, Params *p, StateItem *items, int n) {
    if (checkpoint_load(path, p) < 0) return -1;
    return n > 0 ? checkpoint_load_state(path, items, n) : 0;
}

int checkpoint_load_state(const char *path, StateItem *items, int n) {
    CheckpointFile *ck = calloc(1, sizeof *ck);
    FileItem *found = calloc(STATE_MAX_ITEMS, sizeof *found);
    int rc = -1;
    if (ck == NULL || found == NULL) {
        fail("cannot load checkpoint '%s': out of memory", path);
        goto done;
    }
    if (open_checkpoint(path, ck, 0) != 0) goto done;
    if (ck->state_at == 0) {
        fail("checkpoint '%s' holds no training state (a final checkpoint, or one written before resumes "
             "existed): nothing to resume from", path);
        goto done;
    }
    const int n_found = read_state_items(path, ck, found);
    if (n_found < 0) goto done;
    for (int i = 0; i < n; i++) {
        StateItem *it = &items[i];
        const FileItem *f = NULL;
        for (int j = 0; j < n_found && !f; j++)
            if (strcmp(found[j].name, it->name) == 0) f = &found[j];
        if (f == NULL) {
            fail("checkpoint '%s': its training state has no '%s' (written by another program or version?)", path,
                 it->name);
            goto done;
        }
        if (f->kind != (uint32_t)it->kind || f->count != it->count) {
            fail("checkpoint '%s': state item '%s' holds %u of %s, this run expects %zu of %s", path, it->name,
                 f->count, state_kind_name(f->kind), it->count, state_kind_name((uint32_t)it->kind));
            goto done;
        }
        for (size_t k = 0; k < it->count; k++)
            decode_state_value(ck->bytes + f->values_at + k * state_width(it->kind), it, k);
    }
    rc = 0;
done:
    if (ck) free(ck->bytes);
    free(ck);
    free(found);
    return rc;
}

/* 1 when out_dir holds a *_so_far.ckpt (its name into name, cap bytes), else 0. */
static int find_stopped_run(const char *out_dir, char *name, size_t cap) {
    name[0] = '\0';
    DIR *d = opendir(out_dir);
    if (d == NULL) return 0;   /* a new directory: nothing in it to lose */
    const char *suffix = "_so_far.ckpt";
    const size_t n = strlen(suffix);
    for (struct dirent *e = readdir(d); e != NULL && !name[0]; e = readdir(d)) {
        const size_t len = strlen(e->d_name);
        if (len > n && strcmp(e->d_name + len - n, suffix) == 0) snprintf(name, cap, "%s", e->d_name);
    }
    closedir(d);
    return name[0] != '\0';
}

int checkpoint_check_stopped_run(const char *out_dir, int force, int resume) {
    if (resume && force)
        return fail("--resume continues the stopped run in --out, --force trains anew over it: give one of them");
    char found[256];
    const int stopped = find_stopped_run(out_dir, found, sizeof found);
    if (resume)
        return stopped ? 0 : fail("--resume: %s holds no stopped run (no *_so_far.ckpt): nothing to continue", out_dir);
    if (!stopped) return 0;
    if (force) {
        printf("note: --force: %s/%s, the weights of a run that stopped before its end, is replaced by this run's\n",
               out_dir, found);
        return 0;
    }
    return fail("%s/%s holds the weights of a run that stopped before its end, and this run would replace them: "
                "continue that run with its command and --resume, evaluate them with --load %s/%s, move the file "
                "away, give another --out, or add --force to train anew over them", out_dir, found, out_dir, found);
}

/* ------------------------------------------------------------ config text */

/* The value of key's line in "key=value\n" text: 1 with *value and *len set
 * (a CRLF line's '\r' left out), or 0 when no line has that key. */
static int find_value(const char *config_text, const char *key, const char **value, size_t *len) {
    size_t key_len = strlen(key);
    const char *line = config_text ? config_text : "";
    while (*line != '\0') {
        const char *end = strchr(line, '\n');
        if (end == NULL) end = line + strlen(line);
        size_t line_len = (size_t)(end - line);
        if (line_len > key_len && strncmp(line, key, key_len) == 0 && line[key_len] == '=') {
            *value = line + key_len + 1;
            *len = (size_t)(end - *value);
            if (*len > 0 && (*value)[*len - 1] == '\r') (*len)--;   /* CRLF text */
            return 1;
        }
        line = (*end == '\n') ? end + 1 : end;
    }
    return 0;
}

static int copy_value(const char *key, const char *value, size_t value_len, char *out, int outlen) {
    if (outlen <= 0 || value_len + 1 > (size_t)outlen)
        return fail("config key '%s': value is %zu characters, longer than the %d allowed",
                    key, value_len, outlen > 0 ? outlen - 1 : 0);
    memcpy(out, value, value_len);
    out[value_len] = '\0';
    return 0;
}

int config_get(const char *config_text, const char *key, char *out, int outlen) {
    const char *value;
    size_t value_len;
    if (!find_value(config_text, key, &value, &value_len)) return fail("config: missing key '%s'", key);
    return copy_value(key, value, value_len, out, outlen);
}

int config_get_or(const char *config_text, const char *key, const char *fallback, char *out, int outlen) {
    const char *value = fallback;
    size_t value_len = strlen(fallback);
    find_value(config_text, key, &value, &value_len);   /* no line: the fallback stays */
    return copy_value(key, value, value_len, out, outlen);
}

int config_get_int(const char *config_text, const char *key, int *out) {
    char value[64];
    if (config_get(config_text, key, value, sizeof value) != 0) return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (value[0] == '\0' || end == value || *end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return fail("config key '%s': expected an integer, got '%s'", key, value);
    *out = (int)v;
    return 0;
}

int config_get_int_in(const char *config_text, const char *key, int lo, int hi, int *out) {
    if (config_get_int(config_text, key, out) < 0) return -1;
    if (*out < lo || *out > hi) return fail("config key '%s': expected %d..%d, got %d", key, lo, hi, *out);
    return 0;
}

int config_get_float_in(const char *config_text, const char *key, const char *fallback, float lo, float hi,
                        int hi_open, float *out) {
    char text[64], *end;
    if ((fallback ? config_get_or(config_text, key, fallback, text, sizeof text)
                  : config_get(config_text, key, text, sizeof text)) < 0)
        return -1;
    *out = strtof(text, &end);
    if (end == text || *end || !(*out >= lo && (hi_open ? *out < hi : *out <= hi)))
        return fail("%s=%s: expected a number in [%g, %g%c", key, text, (double)lo, (double)hi, hi_open ? ')' : ']');
    return 0;
}

/* The model names the chapters write, and the chapter that writes each
 * (a new chapter adds its line), so a wrong checkpoint can be named. */
static const char *const MODEL_CHAPTERS[][2] = {
    {"rnn_seq2seq", "01_rnn_seq2seq"},
    {"bahdanau", "02_bahdanau_attention"},
    {"attn_seq2seq", "03_dot_product_attention"},
    {"ch04_digit_self_attention", "04_self_attention"},
    {"ch05_digit_multi_head", "05_multi_head_attention"},
    {"transformer", "06_transformer"},
    {"gpt", "06_gpt"},
    {"ch06_gpt_genre", "06_gpt_genre"},
    {"ch07_vit", "07_vision_transformer"},
    {"ch07_caption", "07_caption"},
    {"ch07_cnn", "07_cnn"},
    {"ch07_pixel_mlp", "07_mlp"},
};

int checkpoint_check_model(const char *path, const char *config, const char *expected_model,
                           const char *expected_chapter) {
    char model[64];
    if (config_get(config, "model", model, sizeof model) < 0)
        return fail("%s: its config has no 'model=' line: not a checkpoint of this project's chapters, "
                    "expected one written by %s (model=%s)", path, expected_chapter, expected_model);
    if (strcmp(model, expected_model) == 0) return 0;
    const char *maker = NULL;
    for (size_t i = 0; i < sizeof MODEL_CHAPTERS / sizeof MODEL_CHAPTERS[0]; i++)
        if (strcmp(model, MODEL_CHAPTERS[i][0]) == 0) maker = MODEL_CHAPTERS[i][1];
    if (maker)
        return fail("%s: a checkpoint of chapter %s (model=%s), but %s loads its own (model=%s)", path, maker,
                    model, expected_chapter, expected_model);
    return fail("%s: a checkpoint of model '%s', which no chapter writes; %s loads its own (model=%s)", path,
                model, expected_chapter, expected_model);
}
