/* bench_fma.h - the machine's FMA peak, measured: a register-only loop of
 * fused multiply-adds that runs as fast as the FMA units allow. bench_sgemm
 * and bench_transformer both report their GFLOP/s against it.
 *
 * Include after <immintrin.h> (x86) or <arm_neon.h> (AArch64), util/openmp.h
 * and bench_common.h. */
#ifndef BENCH_FMA_H
#define BENCH_FMA_H

#if defined(__x86_64__) || defined(__i386__)
/* 12 independent accumulator chains (more than FMA latency x FMA units = 4 x 2),
 * no loads or stores. */
__attribute__((target("avx2,fma"))) static float fma_loop_avx2(long iterations) {
    __m256 acc[12];
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i * 1e-3f);
    __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
    }
    __m256 sum = acc[0];
    for (int i = 1; i < 12; i++) sum = _mm256_add_ps(sum, acc[i]);
    float out[8];
    _mm256_storeu_ps(out, sum);
    return out[0];
}

__attribute__((target("avx512f"))) static float fma_loop_avx512(long iterations) {
    __m512 acc[12];
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    }
    __m512 sum = acc[0];
    for (int i = 1; i < 12; i++) sum = _mm512_add_ps(sum, acc[i]);
    return _mm512_reduce_add_ps(sum);
}
#endif

#if defined(__aarch64__)
/* NEON: 24 chains of 4 floats (more than the 16 that 4 FMA pipes of latency
 * 4 need, as in Apple's M-series and Arm's Neoverse V cores). */
static float fma_loop_neon(long iterations) {
    float32x4_t acc[24];
    for (int i = 0; i < 24; i++) acc[i] = vdupq_n_f32((float)i * 1e-3f);
    float32x4_t x = vdupq_n_f32(0.999999f), y = vdupq_n_f32(1e-7f);
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) acc[i] = vfmaq_f32(y, acc[i], x);
    }
    float32x4_t sum = acc[0];
    for (int i = 1; i < 24; i++) sum = vaddq_f32(sum, acc[i]);
    return vaddvq_f32(sum);
}
#endif

/* GFLOP/s of a register-only `loop` on `threads` threads, best of 3, each
 * iteration of it doing flops_per_iteration flops on each thread. The call
 * through the pointer happens once per thread, outside the timed loop's body. */
static double loop_peak(float (*loop)(long), int threads, double flops_per_iteration) {
    long iterations = 20 * 1000 * 1000;
    volatile float sink = 0.0f; /* keeps the loops' results alive */
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        float total = 0.0f;
        double t0 = bench_now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : total)
        total += loop(iterations);
        sink = total;
        double gflops = threads * flops_per_iteration * iterations / (bench_now_seconds() - t0) * 1e-9;
        if (gflops > best) best = gflops;
    }
    (void)sink;
    return best;
}

/* GFLOP/s of the FMA loop on `threads` threads (each FMA = width * 2 flops):
 * x86, 12 FMAs an iteration, width 8 (AVX2) or 16 (AVX-512); AArch64, 24
 * FMAs of width 4 (NEON, whatever width asks). */
static double fma_peak(int threads, int width) {
#if defined(__aarch64__)
    (void)width;
    return loop_peak(fma_loop_neon, threads, 24.0 * 4 * 2.0);
#else
    return loop_peak(width == 16 ? fma_loop_avx512 : fma_loop_avx2, threads, 12.0 * width * 2.0);
#endif
}

#endif
