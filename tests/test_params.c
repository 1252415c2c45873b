/* test_params.c - the one-buffer parameter store: packing and offsets,
 * 64-byte alignment, zeroed allocation, lookup by name, zero_grad, and the
 * initialisers' ranges and statistics. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/params.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

static void test_layout_and_lookup(void **state) {
    (void)state;
    Params p;
    params_init(&p);
    size_t w = params_add(&p, "enc.W_x", 2, (int[]){3, 7});
    size_t b = params_add(&p, "enc.b", 1, (int[]){7});
    size_t e = params_add(&p, "emb", 3, (int[]){2, 5, 3});
    assert_int_equal(w, 0);
    assert_int_equal(b, 21);
    assert_int_equal(e, 28);
    assert_int_equal(p.size, 21 + 7 + 30);   /* packed: size = parameter count */
    assert_int_equal(p.n_tensors, 3);
    assert_int_equal(params_alloc(&p), 0);
    assert_int_equal((uintptr_t)p.data % 64, 0);
    assert_int_equal((uintptr_t)p.grad % 64, 0);
    for (size_t i = 0; i < p.size; i++) assert_true(p.data[i] == 0.0f && p.grad[i] == 0.0f);
    assert_ptr_equal(params_data(&p, b), p.data + 21);
    assert_ptr_equal(params_grad(&p, e), p.grad + 28);

    const ParamTensor *t = params_find(&p, "emb");
    assert_non_null(t);
    assert_int_equal(t->offset, 28);
    assert_int_equal(t->count, 30);
    assert_int_equal(t->ndim, 3);
    assert_int_equal(t->dims[1], 5);
    assert_string_equal(t->name, "emb");
    assert_null(params_find(&p, "nope"));

    for (size_t i = 0; i < p.size; i++) p.grad[i] = 1.5f;
    params_zero_grad(&p);
    for (size_t i = 0; i < p.size; i++) assert_true(p.grad[i] == 0.0f);
    params_free(&p);
    assert_null(p.data);
    assert_int_equal(p.size, 0);
}

static void test_initialisers(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 1, 2);
    enum { N = 20000 };
    float *x = malloc(sizeof(float) * N);
    init_uniform(x, N, 0.3f, &r);
    double s = 0.0, s2 = 0.0;
    for (int i = 0; i < N; i++) {
        assert_true(x[i] >= -0.3f && x[i] <= 0.3f);
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    /* U(-a, a): mean 0, variance a^2 / 3 = 0.03 */
    assert_true(fabs(s / N) < 0.01);
    assert_float_equal(s2 / N, 0.03, 0.002);

    init_normal(x, N, 2.0f, &r);
    s = s2 = 0.0;
    for (int i = 0; i < N; i++) { s += x[i]; s2 += (double)x[i] * x[i]; }
    assert_true(fabs(s / N) < 0.05);
    assert_float_equal(s2 / N, 4.0, 0.2);

    /* Glorot: limit sqrt(6 / (fan_in + fan_out)) = sqrt(6 / 250) */
    init_xavier(x, 100, 150, &r);
    float limit = sqrtf(6.0f / 250.0f), biggest = 0.0f;
    for (int i = 0; i < 100 * 150 && i < N; i++) {
        assert_true(fabsf(x[i]) <= limit);
        if (fabsf(x[i]) > biggest) biggest = fabsf(x[i]);
    }
    assert_true(biggest > 0.95f * limit);

    init_constant(x, 5, 0.25f);
    for (int i = 0; i < 5; i++) assert_true(x[i] == 0.25f);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_lookup),
        cmocka_unit_test(test_initialisers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
