/* layernorm.h - LayerNorm's implementations, for tests and benchmarks.
 *
 * Layers call layernorm_forward / layernorm_backward (layers.h, where the
 * contract is), which pick one of these on backend_current(), like sgemm()
 * and vecmath.h:
 *
 *   naive  layernorm.c, the specification: row statistics summed in double
 *          (two passes: the mean, then the squared distances to it), each
 *          output computed in double and rounded once.
 *   avx2   layernorm_avx2.c, 8 floats at a time. The row sums are kept in
 *          double too (4 lanes), so the statistics agree with the naive ones
 *          to about 1e-15 whatever D is; the per-element work is in float.
 *          The error bounds against the naive results, in units of
 *          u = 2^-24 and independent of D, are stated and derived at the
 *          definitions, and checked by tests/test_layernorm.c.
 *   neon   layernorm_neon.c, 4 floats at a time on AArch64: the AVX2 form's
 *          operations in its order, the same bits (and so the same bounds).
 *
 * Call the _avx2 functions only when cpu_has_avx2_fma() is true; the _neon
 * functions exist only on AArch64. */
#ifndef LAYERNORM_H
#define LAYERNORM_H

void layernorm_forward_naive(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                             const float *beta, int N, int D, float eps);
void layernorm_forward_avx2(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                            const float *beta, int N, int D, float eps);
void layernorm_forward_neon(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                            const float *beta, int N, int D, float eps);
void layernorm_backward_naive(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                              const float *rstd, const float *x, const float *gamma, int N, int D);
void layernorm_backward_avx2(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                             const float *rstd, const float *x, const float *gamma, int N, int D);
void layernorm_backward_neon(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                             const float *rstd, const float *x, const float *gamma, int N, int D);

#endif
