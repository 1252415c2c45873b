/* golden.h - read and write golden tensor files (format: tests/golden/README.md).
 *
 * A golden file is a list of named float32 or int32 tensors with their dims.
 * tools/golden.py writes one per layer (names "<case>/<tensor>", e.g.
 * "n3_i7_o17/dW") from PyTorch; tests/test_golden.c reads them. The PyTorch
 * twin (tools/twin.py) reads the files tools/twin_dump.c writes with the same
 * format. Python side: tools/goldfile.py.
 *
 * Also here: gold_compare(), the |got - want| <= atol + rtol |want| check
 * that reports the worst element. */
#ifndef GOLDEN_H
#define GOLDEN_H
#include <stddef.h>
#include <stdio.h>

#define GOLD_MAGIC "ATTNGOLD"
#define GOLD_VERSION 1u
#define GOLD_MAX_DIMS 4

typedef enum { GOLD_F32 = 0, GOLD_I32 = 1 } GoldType;

typedef struct {
    char *name;
    GoldType type;
    int ndim;
    int dims[GOLD_MAX_DIMS];
    size_t count;              /* product of dims (1 when ndim == 0) */
    void *data;                /* float * or int * (count values) */
} GoldTensor;

typedef struct {
    char path[512];
    int n;
    GoldTensor *t;
} GoldFile;

/* Read a whole file. Returns 0, or -1 with fail() naming the path and what was
 * wrong (missing, bad magic, version, truncated at byte offset ...). */
int gold_read(GoldFile *f, const char *path);
void gold_free(GoldFile *f);

/* Look a tensor up by its full name; NULL when absent. */
const GoldTensor *gold_find(const GoldFile *f, const char *name);

/* Cases: the distinct name prefixes before '/', in file order.
 * gold_case() copies the i-th (0-based) into out; returns 0, or -1 when i is
 * past the last case. */
int gold_case(const GoldFile *f, int i, char *out, size_t outlen);

/* Writing, tensor by tensor (the count in the header is patched at close). */
typedef struct {
    FILE *fp;
    char path[512];
    unsigned n;
    int error;
} GoldWriter;

int gold_writer_open(GoldWriter *w, const char *path);
void gold_write_f32(GoldWriter *w, const char *name, const float *data, int ndim, const int *dims);
void gold_write_i32(GoldWriter *w, const char *name, const int *data, int ndim, const int *dims);
/* Returns 0, or -1 with fail() if any write failed. */
int gold_writer_close(GoldWriter *w);

/* The result of comparing got[n] with want[n] element by element:
 * pass iff every |got - want| <= atol + rtol |want| (equal infinities pass,
 * any NaN fails). worst is the element with the largest excess
 * |got - want| / (atol + rtol |want|). */
typedef struct {
    int ok;
    size_t worst;
    float got, want;
    double ratio;              /* excess at worst: <= 1 passes */
    double max_abs;            /* max |got - want| over finite pairs */
} GoldDiff;

GoldDiff gold_compare(const float *got, const float *want, size_t n, double rtol, double atol);

/* The absolute floor for a gradient, relative to its tensor's scale:
 * atol * min(1, max |want|). A fixed floor let any error under it pass, so a
 * small parameter (every gradient about 1e-4) passed a 5% error in every entry
 * against a floor of 1e-5; scaled, the floor stays atol for tensors of scale 1
 * and above and shrinks with a smaller one. */
double gold_atol_for_scale(const float *want, size_t n, double atol);

#endif
