/* test_optim.c - Adam/AdamW (a hand-computed first and second step, decoupled
 * weight decay, convergence on a quadratic; the SIMD update of this CPU,
 * AVX2 on x86 and NEON on AArch64, against the scalar loop: the same bits,
 * on odd lengths and unaligned pointers, and the same bits on both CPUs),
 * global gradient-norm clipping, the warm-up + cosine learning-rate
 * schedule, and the moving average of the weights (hand-computed updates,
 * refused decays). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_bits.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "nn/params.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "skip_threads.h"

static void make_params(Params *p, int n) {
    params_init(p);
    params_add(p, "w", 1, (int[]){n});
    assert_int_equal(params_alloc(p), 0);
}

/* One weight w0 = 1, lr = 0.01, weight_decay = 0.1, beta1 0.9, beta2 0.999.
 * Step 1, g = 0.5: m = 0.05, v = 0.00025; bias-corrected m_hat = 0.5,
 *   v_hat = 0.25, so m_hat / sqrt(v_hat) = 1 (the first Adam step has size lr
 *   whatever the gradient's scale) and
 *   w1 = 1 - 0.01 * (1 + 0.1 * 1) = 0.989.
 * Step 2, g = 1.0: m = 0.9*0.05 + 0.1*1 = 0.145, m_hat = 0.145 / 0.19 = 0.763158;
 *   v = 0.999*0.00025 + 0.001*1 = 0.00124975, v_hat = v / 0.001999 = 0.625188;
 *   update = 0.763158 / 0.790688 + 0.1 * 0.989 = 0.965183 + 0.0989
 *   w2 = 0.989 - 0.01 * 1.064083 = 0.978359. */
static void test_adam_hand_computed_steps(void **state) {
    (void)state;
    Params p;
    make_params(&p, 3);
    Adam opt;
    assert_int_equal(adam_init(&opt, &p, 0.01f, 0.1f), 0);
    assert_float_equal(opt.beta1, 0.9f, 0.0f);
    assert_float_equal(opt.beta2, 0.999f, 0.0f);
    p.data[0] = 1.0f;  p.grad[0] = 0.5f;
    p.data[1] = 2.0f;  p.grad[1] = 0.0f;    /* no gradient: only decay acts */
    p.data[2] = -1.0f; p.grad[2] = -4.0f;   /* big negative gradient: still a step of lr */
    adam_step(&opt, &p, 0.01f);
    assert_int_equal(opt.step, 1);
    assert_float_equal(p.data[0], 0.989f, 1e-6);
    assert_float_equal(p.data[1], 2.0f - 0.01f * 0.1f * 2.0f, 1e-6);
    /* update = m_hat / sqrt(v_hat) + wd * w = -1 + 0.1 * (-1) = -1.1: both the
     * gradient step and the decay move w towards 0, to -0.989 */
    assert_float_equal(p.data[2], -0.989f, 1e-6);
    p.grad[0] = 1.0f;
    adam_step(&opt, &p, 0.01f);
    assert_float_equal(p.data[0], 0.978359f, 2e-6);
    adam_free(&opt);
    params_free(&p);
}

/* Decoupled decay: with zero gradients the moments stay 0 and every step is
 * exactly w *= (1 - lr * wd), independent of Adam's normalisation. */
static void test_adamw_decay_is_decoupled(void **state) {
    (void)state;
    Params p;
    make_params(&p, 1);
    Adam opt;
    assert_int_equal(adam_init(&opt, &p, 0.1f, 0.5f), 0);
    p.data[0] = 3.0f;
    for (int t = 0; t < 20; t++) adam_step(&opt, &p, 0.1f);
    assert_float_equal(p.data[0], 3.0 * pow(1.0 - 0.05, 20), 1e-5);
    adam_free(&opt);
    params_free(&p);
}

/* L = 0.5 * sum a_i (w_i - t_i)^2 with curvatures a_i from 0.1 to 100:
 * Adam's per-coordinate scaling copes with the bad conditioning, and with
 * the cosine schedule it settles on the minimum. */
static void test_adam_converges_on_quadratic(void **state) {
    (void)state;
    enum { N = 7, STEPS = 1500 };
    Params p;
    make_params(&p, N);
    Rng r;
    rng_seed(&r, 9, 0);
    float a[N], target[N];
    for (int i = 0; i < N; i++) {
        a[i] = 0.1f * powf(10.0f, 3.0f * i / (N - 1));
        target[i] = 4.0f * rng_uniform(&r) - 2.0f;
        p.data[i] = 0.0f;
    }
    Adam opt;
    assert_int_equal(adam_init(&opt, &p, 0.05f, 0.0f), 0);
    double first_loss = 0.0, loss = 0.0;
    for (int step = 0; step < STEPS; step++) {
        loss = 0.0;
        for (int i = 0; i < N; i++) {
            double d = p.data[i] - target[i];
            loss += 0.5 * a[i] * d * d;
            p.grad[i] = (float)(a[i] * d);
        }
        if (step == 0) first_loss = loss;
        adam_step(&opt, &p, lr_schedule(step, STEPS, 50, 0.05f, 0.01f));
    }
    assert_true(first_loss > 0.5);
    assert_true(loss < 1e-5 * first_loss);
    for (int i = 0; i < N; i++) assert_float_equal(p.data[i], target[i], 5e-3);
    adam_free(&opt);
    params_free(&p);
}

/* The SIMD backend of this CPU: "neon" on AArch64, "avx2" on x86 (NULL
 * without AVX2/FMA). */
static const char *simd_backend(void) {
#if defined(__aarch64__)
    return "neon";
#else
    return cpu_has_avx2_fma() ? "avx2" : NULL;
#endif
}

typedef size_t (*AdamUpdate)(float *w, const float *g, float *m, float *v, size_t n, float beta1, float beta2,
                             float eps, float weight_decay, float lr, double correction1, double correction2);

/* The SIMD update of this CPU and its width (floats per step). */
static AdamUpdate simd_update(int *width) {
#if defined(__aarch64__)
    *width = 4;
    return adam_update_neon;
#else
    *width = 8;
    return adam_update_avx2;
#endif
}

/* The SIMD updates (optim_avx2.c, optim_neon.c) run adam_step's operations 8
 * or 4 parameters at a time: after several steps with weight decay, on a size
 * that leaves a scalar tail (1003), weights and both moments must be the
 * naive backend's bits. Gradients span many magnitudes so that every
 * rounding shows. */
static void test_adam_simd_same_bits(void **state) {
    (void)state;
    const char *simd = simd_backend();
    if (!simd) skip();
    enum { N = 1003 };
    Params naive, simd_params;
    make_params(&naive, N);
    make_params(&simd_params, N);
    Rng rng;
    rng_seed(&rng, 11, 0);
    for (int i = 0; i < N; i++) naive.data[i] = simd_params.data[i] = rng_normal(&rng);
    Adam opt_naive, opt_simd;
    assert_int_equal(adam_init(&opt_naive, &naive, 1e-3f, 0.05f), 0);
    assert_int_equal(adam_init(&opt_simd, &simd_params, 1e-3f, 0.05f), 0);
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < N; i++)
            naive.grad[i] = simd_params.grad[i] = rng_normal(&rng) * powf(10.0f, (float)(i % 13) - 6.0f);
        assert_int_equal(backend_select("naive"), 0);
        adam_step(&opt_naive, &naive, 3e-3f);
        assert_int_equal(backend_select(simd), 0);
        adam_step(&opt_simd, &simd_params, 3e-3f);
    }
    assert_int_equal(backend_select("auto"), 0);
    assert_memory_equal(naive.data, simd_params.data, N * sizeof(float));
    assert_memory_equal(opt_naive.m, opt_simd.m, N * sizeof(float));
    assert_memory_equal(opt_naive.v, opt_simd.v, N * sizeof(float));
    adam_free(&opt_naive);
    adam_free(&opt_simd);
    params_free(&naive);
    params_free(&simd_params);
}

/* Integer-made values (no libm, no Rng: the same on every CPU), spanning
 * magnitudes 2^-12 .. 1 so that every rounding shows. */
static float integer_value(long k) {
    float sign_and_digits = (float)((k * 7919) % 601 - 300) / 300.0f;
    return sign_and_digits * (float)(1 << (k % 13)) / 4096.0f;
}

/* The SIMD update called alone, on lengths 0..19, 33 and 1003 on pointers
 * one float past an aligned address: it does the first n - n % width
 * parameters (the caller's scalar loop the rest), those with the bits of the
 * naive backend's adam_step, and writes nothing past them. Then adam_step on
 * the SIMD backend, over integer-made values, hashed: the hash was taken on
 * x86 with AVX2, so NEON giving it means the AVX2 bits (and the scalar loop's,
 * libm's pow in the bias corrections included, the same on both CPUs). */
static const uint64_t EXPECTED_ADAM_HASH = 0x6aaefe789fa96fbfull;

static void test_adam_simd_odd_lengths_unaligned(void **state) {
    (void)state;
    const char *simd = simd_backend();
    if (!simd) skip();
    int width;
    AdamUpdate update = simd_update(&width);
    enum { MAX = 1003 };
    static const int lengths[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 33, MAX};
    const float sentinel = -12345.0f;
    float *buffers[4];
    for (int b = 0; b < 4; b++) {
        buffers[b] = aligned_alloc(64, sizeof(float) * 1024);   /* MAX + 2 floats, rounded to 4 KiB */
        assert_non_null(buffers[b]);
        for (int i = 0; i < 1024; i++) buffers[b][i] = sentinel;
    }
    float *w = buffers[0] + 1, *g = buffers[1] + 1, *m = buffers[2] + 1, *v = buffers[3] + 1;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const int n = lengths[l];
        Params p;
        make_params(&p, n > 0 ? n : 1);
        p.size = (size_t)n;
        Adam opt;
        assert_int_equal(adam_init(&opt, &p, 1e-3f, 0.05f), 0);
        for (int i = 0; i <= n; i++) w[i] = g[i] = m[i] = v[i] = sentinel;
        for (int i = 0; i < n; i++) {
            p.data[i] = w[i] = integer_value(i + 3L * n) * 4096.0f;
            opt.m[i] = m[i] = integer_value(i + 5L * n);
            opt.v[i] = v[i] = fabsf(integer_value(i + 7L * n));
            p.grad[i] = g[i] = integer_value(i + 11L * n);
        }
        opt.step = 2;   /* the third update: corrections 1 - 0.9^3, 1 - 0.999^3 */
        assert_int_equal(backend_select("naive"), 0);
        adam_step(&opt, &p, 3e-3f);
        double correction1 = 1.0 - pow((double)opt.beta1, 3.0), correction2 = 1.0 - pow((double)opt.beta2, 3.0);
        size_t done = update(w, g, m, v, (size_t)n, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, 3e-3f,
                             correction1, correction2);
        assert_int_equal(done, (size_t)(n - n % width));
        assert_memory_equal(w, p.data, done * sizeof(float));
        assert_memory_equal(m, opt.m, done * sizeof(float));
        assert_memory_equal(v, opt.v, done * sizeof(float));
        for (int i = (int)done; i < n; i++) assert_true(w[i] == integer_value(i + 3L * n) * 4096.0f);
        assert_true(w[n] == sentinel && m[n] == sentinel && v[n] == sentinel && g[n] == sentinel);
        assert_true(w[-1] == sentinel && m[-1] == sentinel && v[-1] == sentinel);
        adam_free(&opt);
        p.size = (size_t)(n > 0 ? n : 1);
        params_free(&p);
    }
    for (int b = 0; b < 4; b++) free(buffers[b]);

    /* adam_step on the SIMD backend, 5 steps with weight decay: the hash */
    Params p;
    make_params(&p, MAX);
    Adam opt;
    assert_int_equal(adam_init(&opt, &p, 1e-3f, 0.05f), 0);
    for (int i = 0; i < MAX; i++) p.data[i] = integer_value(i + 17) * 4096.0f;
    assert_int_equal(backend_select(simd), 0);
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < MAX; i++) p.grad[i] = integer_value(i + 1000L * step);
        adam_step(&opt, &p, 3e-3f);
    }
    assert_int_equal(backend_select("auto"), 0);
    uint64_t h = hash_floats(hash_floats(hash_floats(FNV_START, p.data, MAX), opt.m, MAX), opt.v, MAX);
    printf("  adam_step (%s) hash 0x%016llxull\n", simd, (unsigned long long)h);
    if (EXPECTED_ADAM_HASH != 0) assert_true(h == EXPECTED_ADAM_HASH);
    adam_free(&opt);
    params_free(&p);
}

/* With the model off (threads_model_set(0)) the update runs in one band per
 * thread: 2 threads must give 1 thread's bits (70,001 parameters: a ragged
 * last block and a scalar tail). */
static void test_adam_threads_same_bits(void **state) {
    (void)state;
    skip_without_threads();
    threads_model_set(0);   /* split even small work between the threads: their bits are compared */
    enum { N = 70001 };
    Params one, two;
    make_params(&one, N);
    make_params(&two, N);
    Rng rng;
    rng_seed(&rng, 12, 0);
    for (int i = 0; i < N; i++) one.data[i] = two.data[i] = rng_normal(&rng);
    Adam opt_one, opt_two;
    assert_int_equal(adam_init(&opt_one, &one, 1e-3f, 0.05f), 0);
    assert_int_equal(adam_init(&opt_two, &two, 1e-3f, 0.05f), 0);
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < N; i++) one.grad[i] = two.grad[i] = rng_normal(&rng);
        threads_set(1);
        adam_step(&opt_one, &one, 3e-3f);
        threads_set(2);
        adam_step(&opt_two, &two, 3e-3f);
    }
    threads_set(0);
    assert_memory_equal(one.data, two.data, N * sizeof(float));
    assert_memory_equal(opt_one.v, opt_two.v, N * sizeof(float));
    adam_free(&opt_one);
    adam_free(&opt_two);
    params_free(&one);
    params_free(&two);
}

static void test_clip_grad_norm(void **state) {
    (void)state;
    Params p;
    make_params(&p, 4);
    float g[4] = {3.0f, 0.0f, -4.0f, 0.0f};   /* norm 5 */
    memcpy(p.grad, g, sizeof g);
    assert_float_equal(clip_grad_norm(&p, 10.0f), 5.0f, 1e-6);   /* under the limit: untouched */
    assert_memory_equal(p.grad, g, sizeof g);
    assert_float_equal(clip_grad_norm(&p, 0.0f), 5.0f, 1e-6);    /* 0 = no clipping */
    assert_memory_equal(p.grad, g, sizeof g);
    assert_float_equal(clip_grad_norm(&p, 1.0f), 5.0f, 1e-6);    /* returns the norm before */
    assert_float_equal(p.grad[0], 0.6f, 1e-6);
    assert_float_equal(p.grad[2], -0.8f, 1e-6);
    assert_true(p.grad[1] == 0.0f);
    assert_float_equal(clip_grad_norm(&p, 100.0f), 1.0f, 1e-6);  /* now exactly max_norm */
    params_free(&p);
}

static void test_lr_schedule(void **state) {
    (void)state;
    const float base = 1e-3f, min_ratio = 0.1f;
    const long warmup = 10, total = 110;
    assert_float_equal(lr_schedule(0, total, warmup, base, min_ratio), 0.0f, 0.0f);
    assert_float_equal(lr_schedule(5, total, warmup, base, min_ratio), 0.5e-3f, 1e-9);
    /* end of warm-up: the full rate */
    assert_float_equal(lr_schedule(warmup, total, warmup, base, min_ratio), base, 1e-9);
    /* halfway through the decay: cos(pi/2) = 0, so min + (1 - min) / 2 */
    assert_float_equal(lr_schedule(60, total, warmup, base, min_ratio), 0.55e-3f, 1e-9);
    /* a quarter through: (1 + cos(pi/4)) / 2 = 0.853553 */
    assert_float_equal(lr_schedule(35, total, warmup, base, min_ratio),
                       base * (0.1 + 0.9 * 0.8535534), 1e-9);
    /* the end, and past it: min_ratio * base */
    assert_float_equal(lr_schedule(total, total, warmup, base, min_ratio), 1e-4f, 1e-9);
    assert_float_equal(lr_schedule(total + 50, total, warmup, base, min_ratio), 1e-4f, 1e-9);
    /* monotone decay after warm-up */
    for (long s = warmup; s < total; s++)
        assert_true(lr_schedule(s + 1, total, warmup, base, min_ratio) <=
                    lr_schedule(s, total, warmup, base, min_ratio));
    /* no warm-up: starts at base */
    assert_float_equal(lr_schedule(0, 100, 0, base, 0.0f), base, 1e-9);
    assert_float_equal(lr_schedule(100, 100, 0, base, 0.0f), 0.0f, 1e-9);
}

/* decay 0.75: avg starts at w = (1, -2); after w = (3, 2):
 * avg = 0.75 (1, -2) + 0.25 (3, 2) = (1.5, -1); after w = (3, 2) again:
 * 0.75 (1.5, -1) + 0.25 (3, 2) = (1.875, -0.25). Training never touches it
 * except through update, and a decay outside (0, 1) is refused. */
static void test_weight_average_hand_computed(void **state) {
    (void)state;
    Params p;
    make_params(&p, 2);
    p.data[0] = 1.0f;
    p.data[1] = -2.0f;
    WeightAverage a;
    assert_int_equal(weight_average_init(&a, &p, 0.75f), 0);
    assert_true(a.avg != p.data && a.size == 2);
    assert_true(a.avg[0] == 1.0f && a.avg[1] == -2.0f);
    p.data[0] = 3.0f;
    p.data[1] = 2.0f;
    assert_true(a.avg[0] == 1.0f);              /* a copy, not a view */
    weight_average_update(&a, &p);
    assert_float_equal(a.avg[0], 1.5f, 1e-7);
    assert_float_equal(a.avg[1], -1.0f, 1e-7);
    weight_average_update(&a, &p);
    assert_float_equal(a.avg[0], 1.875f, 1e-7);
    assert_float_equal(a.avg[1], -0.25f, 1e-7);
    assert_true(p.data[0] == 3.0f && p.data[1] == 2.0f);   /* the weights are left alone */
    weight_average_free(&a);
    assert_null(a.avg);
    const float bad[] = {0.0f, 1.0f, -0.5f, 1.5f, NAN};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(weight_average_init(&a, &p, bad[i]), -1);
        assert_null(a.avg);
        weight_average_free(&a);   /* harmless after a refusal */
    }
    params_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adam_hand_computed_steps),
        cmocka_unit_test(test_adamw_decay_is_decoupled),
        cmocka_unit_test(test_adam_converges_on_quadratic),
        cmocka_unit_test(test_adam_simd_same_bits),
        cmocka_unit_test(test_adam_simd_odd_lengths_unaligned),
        cmocka_unit_test(test_adam_threads_same_bits),
        cmocka_unit_test(test_clip_grad_norm),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_weight_average_hand_computed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
