/* grade.c - the harness of the coursework graders (see grade.h): the
 * failure message, buffers freed after each check, comparisons against
 * PyTorch's golden vectors and against finite differences, and main. */
#include "grade.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"

static char message[1024];
static const char *current_case;   /* the golden case being checked, named in messages */

int grade_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return -1;
}

/* ------------------------------------------------------------ buffers */

enum { MAX_BUFFERS = 256 };
static void *buffers[MAX_BUFFERS];
static int n_buffers;

static void *zeroed(size_t n, size_t size) {
    if (n_buffers == MAX_BUFFERS) {
        fprintf(stderr, "grade: more than %d buffers in one check\n", MAX_BUFFERS);
        exit(2);
    }
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "grade: out of memory\n");
        exit(2);
    }
    buffers[n_buffers++] = p;
    return p;
}

float *grade_floats(size_t n) { return zeroed(n, sizeof(float)); }
int *grade_ints(size_t n) { return zeroed(n, sizeof(int)); }

static void free_buffers(void) {
    while (n_buffers > 0) free(buffers[--n_buffers]);
}

void grade_fill(float *x, size_t n, float scale, unsigned seed) {
    Rng r;
    rng_seed(&r, seed, 18);
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(&r) - 1.0f);
}

/* ------------------------------------------------------------ comparisons */

/* Flat index -> "[i, j, ...]" in dims. */
static void format_index(char *out, size_t cap, size_t flat, int ndim, const int *dims) {
    size_t idx[8] = {0};
    for (int d = ndim - 1; d >= 0 && d < 8; d--) {
        idx[d] = flat % (size_t)dims[d];
        flat /= (size_t)dims[d];
    }
    int used = snprintf(out, cap, "[");
    for (int d = 0; d < ndim && d < 8 && used < (int)cap; d++)
        used += snprintf(out + used, cap - (size_t)used, "%s%zu", d ? ", " : "", idx[d]);
    if (used < (int)cap) snprintf(out + used, cap - (size_t)used, "]");
}

static size_t count_of(int ndim, const int *dims) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (size_t)dims[d];
    return n;
}

static const char *case_note(void) {
    static char note[160];
    if (current_case == NULL) return "";
    snprintf(note, sizeof note, " (case %s)", current_case);
    return note;
}

int grade_close(const char *what, const char *source, const float *got, const float *want, int ndim,
                const int *dims, double rtol, double atol) {
    GoldDiff d = gold_compare(got, want, count_of(ndim, dims), rtol, atol);
    if (d.ok) return 0;
    char idx[96];
    format_index(idx, sizeof idx, d.worst, ndim, dims);
    return grade_fail("%s differs from %s at %s%s: got %.6g, want %.6g", what, source, idx, case_note(),
                      (double)d.got, (double)d.want);
}

int grade_gradient(const char *what, LossFn loss, void *ctx, float *x, const float *analytic, int ndim,
                   const int *dims, float eps, double tol) {
    const size_t n = count_of(ndim, dims);
    GradCheckResult r = gradcheck(loss, ctx, x, analytic, n, eps, 0);
    if (r.n_checked > 0 && r.max_rel_err < tol) return 0;
    char idx[96];
    format_index(idx, sizeof idx, r.worst_index, ndim, dims);
    return grade_fail("%s differs from finite differences at %s%s: analytic %.6g, numeric %.6g", what, idx,
                      case_note(), r.worst_analytic, r.worst_numeric);
}

/* ------------------------------------------------------------ golden vectors */

int grade_golden_cases(const char *layer, int (*want)(const GoldCase *c), int (*check)(const GoldCase *c)) {
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    char path[512], name[128];
    snprintf(path, sizeof path, "%s/%s.bin", dir && *dir ? dir : "tests/golden", layer);
    GoldFile file;
    if (gold_read(&file, path) < 0) return grade_fail("%s (run from the tree's top folder)", last_error());
    int result = 0, wanted = 0;
    for (int i = 0; result == 0 && gold_case(&file, i, name, sizeof name) == 0; i++) {
        GoldCase c = {&file, layer, name};
        if (want && !want(&c)) continue;
        wanted++;
        current_case = name;
        result = check(&c);
        current_case = NULL;
    }
    gold_free(&file);
    if (result == 0 && wanted == 0) return grade_fail("%s has no case this check wants", path);
    return result;
}

const GoldTensor *grade_tensor(const GoldCase *c, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "%s/%s", c->name, name);
    return gold_find(c->file, full);
}

static const void *need(const GoldCase *c, const char *name, GoldType type) {
    const GoldTensor *t = grade_tensor(c, name);
    if (t == NULL || t->type != type) {
        fprintf(stderr, "grade: golden %s, case %s: no %s tensor '%s' (a broken file)\n", c->layer, c->name,
                type == GOLD_F32 ? "float" : "int", name);
        exit(2);
    }
    return t->data;
}

const float *grade_f32(const GoldCase *c, const char *name) { return need(c, name, GOLD_F32); }
const int *grade_i32(const GoldCase *c, const char *name) { return need(c, name, GOLD_I32); }
const float *grade_f32_or_null(const GoldCase *c, const char *name) {
    return grade_tensor(c, name) ? grade_f32(c, name) : NULL;
}
const int *grade_i32_or_null(const GoldCase *c, const char *name) {
    return grade_tensor(c, name) ? grade_i32(c, name) : NULL;
}

int grade_golden_close(const GoldCase *c, const char *name, const float *got, int times, double rtol,
                       double atol) {
    const GoldTensor *t = grade_tensor(c, name);
    grade_f32(c, name);   /* present and float, or the file is broken */
    const float *want = t->data;
    if (times != 1) {
        float *scaled = grade_floats(t->count);
        for (size_t i = 0; i < t->count; i++) scaled[i] = (float)times * want[i];
        want = scaled;
    }
    char what[160];
    snprintf(what, sizeof what, "%s%s", name, times == 1 ? "" : " after a second backward (it must add up: +=)");
    return grade_close(what, "PyTorch", got, want, t->ndim ? t->ndim : 1, t->ndim ? t->dims : (int[]){1}, rtol,
                       atol);
}

/* ------------------------------------------------------------ main */

int grade_main(int argc, char **argv, const GradeExercise *exercises, int n_exercises) {
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && strcmp(only, "--help") == 0) {
        printf("usage: %s [EXERCISE | --list]\n\nRuns the checks of every exercise, or of the one named (as in the code's\n"
               "markers, e.g. %s), and prints PASS or FAIL with the first failing check.\n"
               "make grade runs each exercise alone and prints the score table.\n", argv[0], exercises[0].id);
        return 0;
    }
    if (only && strcmp(only, "--list") == 0) {
        for (int e = 0; e < n_exercises; e++) printf("%s\n", exercises[e].id);
        return 0;
    }
    int ran = 0, failed = 0;
    for (int e = 0; e < n_exercises; e++) {
        const GradeExercise *ex = &exercises[e];
        if (only && strcmp(only, ex->id) != 0) continue;
        ran++;
        int ok = 1;
        for (int k = 0; k < ex->n_checks && ok; k++) {
            printf("check %s: %s\n", ex->id, ex->checks[k].name);
            fflush(stdout);
            message[0] = '\0';
            if (ex->checks[k].run() != 0) {
                printf("FAIL %s: %s: %s\n", ex->id, ex->checks[k].name, message[0] ? message : "failed");
                ok = 0;
            }
            free_buffers();
        }
        if (ok) printf("PASS %s\n", ex->id);
        failed += !ok;
        fflush(stdout);
    }
    if (only && ran == 0) {
        fprintf(stderr, "%s: no exercise '%s' (try --list)\n", argv[0], only);
        return 2;
    }
    return failed ? 1 : 0;
}
