/* test_cells.c - the RNN, GRU and LSTM cells of cells.c.
 *
 *  1. forward against a scalar double-precision re-statement of the
 *     equations in cells.h (gate order included), so the gradient checks
 *     below check the right function;
 *  2. backward against central finite differences w.r.t. x, h_prev, c_prev,
 *     W_x, W_h and b, with and without a mask, on odd shapes;
 *  3. masked rows keep their state bit for bit and pass dh (dc) straight
 *     through to dh_prev (dc_prev), contributing nothing else.
 *
 * Loss: L = sum w_h * h (+ sum w_c * c for the LSTM) in double, so the
 * upstream gradients are dh = w_h, dc = w_c.
 * Step and tolerance: the forward pass runs in float, so the loss carries
 * rounding noise of ~1e-7 relative per output, which the central difference
 * divides by 2 eps. Measured max_rel_err over all checks below:
 * eps = 1e-3 -> 1.05e-2, 3e-3 -> 2.8e-3, 1e-2 -> 1.6e-3; the error falling as
 * eps grows shows it is float noise, not a wrong derivative (which would not
 * shrink). So eps = 1e-2 (truncation error ~eps^2/6 is still ~2e-5) and
 * max_rel_err < 1e-2: about 6x above what correct code shows, and far below
 * what a wrong gate derivative or a swapped gate produces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cells.h"
#include "util/error.h"
#include "nn/gradcheck.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define EPS 1e-2f
#define TOL 1e-2
#define MAX_CHECKS 150

typedef struct {
    CellType type;
    int B, I, H, G;
    const int *mask;
    float *x, *h_prev, *c_prev, *W_x, *W_h, *b;   /* inputs */
    float *h, *c, *cache, *scratch;               /* outputs / work */
    float *w_h, *w_c;                             /* loss weights = dh, dc */
} CellCtx;

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static float *alloc_filled(size_t n, float scale, Rng *r) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    fill(p, n, scale, r);
    return p;
}

static void ctx_make(CellCtx *c, CellType t, int B, int I, int H, const int *mask, Rng *r) {
    memset(c, 0, sizeof *c);
    c->type = t;
    c->B = B; c->I = I; c->H = H; c->G = cell_gates(t);
    c->mask = mask;
    size_t GH = (size_t)c->G * H;
    c->x = alloc_filled((size_t)B * I, 1.0f, r);
    c->h_prev = alloc_filled((size_t)B * H, 0.9f, r);
    c->c_prev = alloc_filled((size_t)B * H, 1.5f, r);
    /* weights large enough that gates sit well inside their curved range */
    c->W_x = alloc_filled((size_t)I * GH, 0.8f, r);
    c->W_h = alloc_filled((size_t)H * GH, 0.8f, r);
    c->b = alloc_filled(GH, 0.5f, r);
    c->h = alloc_filled((size_t)B * H, 0.0f, r);
    c->c = alloc_filled((size_t)B * H, 0.0f, r);
    c->cache = alloc_filled((size_t)B * cell_cache_size(t, H), 0.0f, r);
    c->scratch = alloc_filled((size_t)B * 2 * GH, 0.0f, r);
    c->w_h = alloc_filled((size_t)B * H, 1.0f, r);
    c->w_c = alloc_filled((size_t)B * H, 1.0f, r);
}

static void ctx_free(CellCtx *c) {
    free(c->x); free(c->h_prev); free(c->c_prev); free(c->W_x); free(c->W_h); free(c->b);
    free(c->h); free(c->c); free(c->cache); free(c->scratch); free(c->w_h); free(c->w_c);
}

static void run_forward(CellCtx *c) {
    int lstm = cell_has_c(c->type);
    cell_forward(c->h, lstm ? c->c : NULL, c->cache, c->scratch, &(CellStep){c->type, c->B, c->I, c->H, c->mask,
                 c->x, c->h_prev, lstm ? c->c_prev : NULL}, &(CellWeights){c->W_x, c->W_h, c->b});
}

static double cell_loss(void *p) {
    CellCtx *c = p;
    run_forward(c);
    double s = 0.0;
    for (int i = 0; i < c->B * c->H; i++) {
        s += (double)c->w_h[i] * c->h[i];
        if (cell_has_c(c->type)) s += (double)c->w_c[i] * c->c[i];
    }
    return s;
}

/* ------------------------------------------------------------------------ */
/* 1. forward against the equations                                          */
/* ------------------------------------------------------------------------ */

static double sig(double v) { return 1.0 / (1.0 + exp(-v)); }

/* Pre-activation of gate `gate`, unit j, batch row b, split into the x part
 * (x W_x + b) and the h part (h_prev W_h), as the GRU needs them apart. */
static void preact(const CellCtx *c, int b, int gate, int j, double *xpart, double *hpart) {
    int GH = c->G * c->H, col = gate * c->H + j;
    double sx = c->b[col], sh = 0.0;
    for (int k = 0; k < c->I; k++) sx += (double)c->x[b * c->I + k] * c->W_x[k * GH + col];
    for (int k = 0; k < c->H; k++) sh += (double)c->h_prev[b * c->H + k] * c->W_h[k * GH + col];
    *xpart = sx;
    *hpart = sh;
}

static void test_forward_matches_equations(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 10, 0);
    for (int t = 0; t < 3; t++) {
        CellCtx c;
        const int mask[3] = {1, 0, 1};
        ctx_make(&c, (CellType)t, 3, 5, 7, mask, &r);
        run_forward(&c);
        for (int b = 0; b < c.B; b++)
            for (int j = 0; j < c.H; j++) {
                double h_want, c_want = 0.0, hp = c.h_prev[b * c.H + j], cp = c.c_prev[b * c.H + j];
                double ax[4], ah[4];
                for (int g = 0; g < c.G; g++) preact(&c, b, g, j, &ax[g], &ah[g]);
                if (t == CELL_RNN) {
                    h_want = tanh(ax[0] + ah[0]);
                } else if (t == CELL_GRU) {   /* [r | z | n] */
                    double rg = sig(ax[0] + ah[0]), z = sig(ax[1] + ah[1]);
                    double n = tanh(ax[2] + rg * ah[2]);
                    h_want = (1.0 - z) * n + z * hp;
                } else {                      /* [i | f | g | o] */
                    double ig = sig(ax[0] + ah[0]), f = sig(ax[1] + ah[1]);
                    double g = tanh(ax[2] + ah[2]), o = sig(ax[3] + ah[3]);
                    c_want = f * cp + ig * g;
                    h_want = o * tanh(c_want);
                }
                if (mask[b] == 0) {   /* masked row: state kept bit for bit */
                    assert_true(c.h[b * c.H + j] == c.h_prev[b * c.H + j]);
                    if (t == CELL_LSTM) assert_true(c.c[b * c.H + j] == c.c_prev[b * c.H + j]);
                    continue;
                }
                if (fabs(c.h[b * c.H + j] - h_want) > 1e-5)
                    fail_msg("%s h[%d,%d] = %.7f, want %.7f", cell_type_name(c.type), b, j,
                             c.h[b * c.H + j], h_want);
                if (t == CELL_LSTM && fabs(c.c[b * c.H + j] - c_want) > 1e-5)
                    fail_msg("lstm c[%d,%d] = %.7f, want %.7f", b, j, c.c[b * c.H + j], c_want);
            }
        ctx_free(&c);
    }
}

/* ------------------------------------------------------------------------ */
/* 2. gradients                                                              */
/* ------------------------------------------------------------------------ */

static void expect_grad_ok(GradCheckResult res, const CellCtx *c, const char *what) {
    if (!(res.max_rel_err < TOL) || res.n_checked == 0)
        fail_msg("%s B=%d I=%d H=%d mask=%s: %s max_rel_err %.3g at %zu (numeric %.6g, analytic %.6g)",
                 cell_type_name(c->type), c->B, c->I, c->H, c->mask ? "yes" : "no", what,
                 res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic);
}

static void check_cell_gradients(CellType t, int B, int I, int H, const int *mask, Rng *r) {
    CellCtx c;
    ctx_make(&c, t, B, I, H, mask, r);
    int lstm = cell_has_c(t);
    size_t GH = (size_t)c.G * H;
    size_t nx = (size_t)B * I, nh = (size_t)B * H, nWx = (size_t)I * GH, nWh = (size_t)H * GH;
    /* Gradient buffers start at a known non-zero value: backward must ADD. */
    const float start = 0.25f;
    float *dx = malloc(sizeof(float) * nx), *dh_prev = malloc(sizeof(float) * nh);
    float *dc_prev = malloc(sizeof(float) * nh), *dW_x = malloc(sizeof(float) * nWx);
    float *dW_h = malloc(sizeof(float) * nWh), *db = malloc(sizeof(float) * GH);
    for (size_t i = 0; i < nx; i++) dx[i] = start;
    for (size_t i = 0; i < nh; i++) dh_prev[i] = dc_prev[i] = start;
    for (size_t i = 0; i < nWx; i++) dW_x[i] = start;
    for (size_t i = 0; i < nWh; i++) dW_h[i] = start;
    for (size_t i = 0; i < GH; i++) db[i] = start;

    run_forward(&c);
    /* the scratch area is work memory: garbage in it must not matter */
    for (size_t i = 0; i < (size_t)B * 2 * GH; i++) c.scratch[i] = NAN;
    cell_backward(dx, dh_prev, lstm ? dc_prev : NULL, &(CellWeights){dW_x, dW_h, db}, c.w_h, lstm ? c.w_c : NULL,
                  c.cache, c.scratch, &(CellStep){t, B, I, H, mask, c.x, c.h_prev, lstm ? c.c_prev : NULL},
                  &(CellWeights){c.W_x, c.W_h, NULL});
    for (size_t i = 0; i < nx; i++) dx[i] -= start;
    for (size_t i = 0; i < nh; i++) { dh_prev[i] -= start; dc_prev[i] -= start; }
    for (size_t i = 0; i < nWx; i++) dW_x[i] -= start;
    for (size_t i = 0; i < nWh; i++) dW_h[i] -= start;
    for (size_t i = 0; i < GH; i++) db[i] -= start;

    expect_grad_ok(gradcheck(cell_loss, &c, c.x, dx, nx, EPS, MAX_CHECKS), &c, "dx");
    expect_grad_ok(gradcheck(cell_loss, &c, c.h_prev, dh_prev, nh, EPS, MAX_CHECKS), &c, "dh_prev");
    if (lstm)
        expect_grad_ok(gradcheck(cell_loss, &c, c.c_prev, dc_prev, nh, EPS, MAX_CHECKS), &c, "dc_prev");
    expect_grad_ok(gradcheck(cell_loss, &c, c.W_x, dW_x, nWx, EPS, MAX_CHECKS), &c, "dW_x");
    expect_grad_ok(gradcheck(cell_loss, &c, c.W_h, dW_h, nWh, EPS, MAX_CHECKS), &c, "dW_h");
    expect_grad_ok(gradcheck(cell_loss, &c, c.b, db, GH, EPS, MAX_CHECKS), &c, "db");

    /* 3. masked rows: dh (dc) passes straight through, exactly; no dx */
    if (mask)
        for (int b = 0; b < B; b++) {
            if (mask[b]) continue;
            for (int j = 0; j < H; j++) {
                assert_float_equal(dh_prev[b * H + j], c.w_h[b * H + j], 1e-6);
                if (lstm) assert_float_equal(dc_prev[b * H + j], c.w_c[b * H + j], 1e-6);
            }
            for (int k = 0; k < I; k++) assert_float_equal(dx[b * I + k], 0.0f, 1e-6);
        }
    free(dx); free(dh_prev); free(dc_prev); free(dW_x); free(dW_h); free(db);
    ctx_free(&c);
}

static void test_gradients_no_mask(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 20, 0);
    const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {2, 7, 3}, {5, 3, 17}};
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < 4; s++)
            check_cell_gradients((CellType)t, shapes[s][0], shapes[s][1], shapes[s][2], NULL, &r);
}

static void test_gradients_with_mask(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 21, 0);
    const int mask5[5] = {1, 0, 1, 0, 0};
    const int mask3[3] = {0, 1, 1};
    const int all_off[2] = {0, 0};
    for (int t = 0; t < 3; t++) {
        check_cell_gradients((CellType)t, 5, 3, 7, mask5, &r);
        check_cell_gradients((CellType)t, 3, 7, 5, mask3, &r);
        check_cell_gradients((CellType)t, 2, 3, 3, all_off, &r);
    }
}

/* LSTM with dc = NULL (only h is used downstream) treats dc as zero. */
static void test_lstm_dc_null(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 22, 0);
    CellCtx c;
    ctx_make(&c, CELL_LSTM, 3, 5, 7, NULL, &r);
    run_forward(&c);
    enum { N = 3 * 7 };
    float dh_a[N] = {0}, dh_b[N] = {0}, dc_a[N] = {0}, dc_b[N] = {0}, zeros[N] = {0};
    cell_backward(NULL, dh_a, dc_a, &(CellWeights){NULL, NULL, NULL}, c.w_h, NULL, c.cache, c.scratch,
                  &(CellStep){CELL_LSTM, 3, 5, 7, NULL, c.x, c.h_prev, c.c_prev}, &(CellWeights){c.W_x, c.W_h, NULL});
    cell_backward(NULL, dh_b, dc_b, &(CellWeights){NULL, NULL, NULL}, c.w_h, zeros, c.cache, c.scratch,
                  &(CellStep){CELL_LSTM, 3, 5, 7, NULL, c.x, c.h_prev, c.c_prev}, &(CellWeights){c.W_x, c.W_h, NULL});
    assert_memory_equal(dh_a, dh_b, sizeof dh_a);
    assert_memory_equal(dc_a, dc_b, sizeof dc_a);
    int nonzero = 0;
    for (int i = 0; i < N; i++) nonzero += dh_a[i] != 0.0f;
    assert_true(nonzero > 0);
    ctx_free(&c);
}

static void test_type_helpers(void **state) {
    (void)state;
    CellType t = CELL_RNN;
    assert_int_equal(cell_type_parse("gru", &t), 0);
    assert_int_equal(t, CELL_GRU);
    assert_int_equal(cell_type_parse("lstm", &t), 0);
    assert_int_equal(t, CELL_LSTM);
    assert_int_equal(cell_type_parse("rnn", &t), 0);
    assert_int_equal(t, CELL_RNN);
    clear_error();
    assert_int_equal(cell_type_parse("transformer", &t), -1);
    assert_non_null(strstr(last_error(), "'transformer'"));
    assert_int_equal(cell_gates(CELL_RNN), 1);
    assert_int_equal(cell_gates(CELL_GRU), 3);
    assert_int_equal(cell_gates(CELL_LSTM), 4);
    assert_int_equal(cell_has_c(CELL_LSTM), 1);
    assert_int_equal(cell_has_c(CELL_GRU), 0);
    assert_string_equal(cell_type_name(CELL_GRU), "gru");
    assert_true(cell_cache_size(CELL_LSTM, 7) >= 4 * 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_helpers),
        cmocka_unit_test(test_forward_matches_equations),
        cmocka_unit_test(test_gradients_no_mask),
        cmocka_unit_test(test_gradients_with_mask),
        cmocka_unit_test(test_lstm_dc_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
