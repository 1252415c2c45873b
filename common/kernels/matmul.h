/* matmul.h - the single matrix-multiply entry point every layer goes through.
 *
 *   C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N]
 *
 * op(X) is X or X^T. Matrices are row-major; lda, ldb, ldc are the row
 * strides (in floats) of A, B and C as they are stored, so a block inside a
 * bigger matrix (one head of a multi-head projection) can be passed directly:
 *   A stored as [M,K] (lda >= K) when trans_a == 0, as [K,M] (lda >= M) when 1.
 *   B stored as [K,N] (ldb >= N) when trans_b == 0, as [N,K] (ldb >= K) when 1.
 * beta == 0 means C is overwritten (its old contents are never read, so it
 * may hold NaN); beta == 1 accumulates, which is what backward passes need.
 *
 * sgemm() dispatches to the backend chosen once at start-up: the naive loop
 * (the specification), the AVX2/FMA kernel, the AVX-512 kernel (each only
 * when the CPU has it), or on AArch64 (ARM: Apple's M-series, ARM Linux) the
 * NEON kernel. The SIMD kernels give the same bits. */
#ifndef MATMUL_H
#define MATMUL_H

#include <stddef.h>

#include "kernels/threads.h"

typedef enum { BACKEND_NAIVE = 0, BACKEND_AVX2 = 1, BACKEND_AVX512 = 2, BACKEND_NEON = 3 } Backend;

void sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
           const float *A, int lda, const float *B, int ldb, float beta,
           float *C, int ldc);

/* How many multiply-adds (M * N * K, summed) sgemm() has been asked for since
 * the program started: benchmarks divide it by time for GFLOP/s. */
unsigned long long sgemm_multiply_adds(void);

/* The specification: three plain loops, accumulated in double per element. */
void sgemm_naive(int trans_a, int trans_b, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc);

/* The packed, cache-blocked AVX2/FMA kernel (matmul_avx2.c). Only call it
 * when cpu_has_avx2_fma() is true. */
void sgemm_avx2(int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc);

/* The same with an 8x32 AVX-512 tile (matmul_avx512.c), bit-identical to
 * sgemm_avx2. Only call it when cpu_has_avx512f() is true. */
void sgemm_avx512(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc);

/* The same with a 12x8 tile of AArch64 Advanced SIMD (NEON) FMAs
 * (matmul_neon.c), bit-identical to sgemm_avx2. Only on AArch64
 * (cpu_has_neon()); elsewhere it does not exist. */
void sgemm_neon(int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc);

/* The bf16 products (matmul_bf16.c): each input rounded to bf16, float
 * sums, with the AVX-512 8x32 tile and VDPBF16PS. Only call it when
 * cpu_has_avx512_bf16() is true. */
void sgemm_avx512_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta,
                       float *C, int ldc);

/* Their specification: sgemm_naive with every element of A and B rounded
 * by bf16_round first. */
void sgemm_naive_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta,
                      float *C, int ldc);

/* x rounded to bf16 (its top 16 bits: sign, 8 exponent bits, 7 fraction
 * bits) and returned as a float: to nearest, ties to even; NaN stays NaN,
 * +-inf stay, a value past the largest bf16 becomes +-inf, and a subnormal
 * float becomes a zero of its sign, as the CPU's VCVTNEPS2BF16 does. */
float bf16_round(float x);

/* Convenience forms for the common dense case (no strides, alpha = 1):
 *   matmul(C, A, B, M, N, K, accumulate):     C[M,N] (+)= A[M,K]   @ B[K,N]
 *   matmul_nt(C, A, B, M, N, K, accumulate):  C[M,N] (+)= A[M,K]   @ B[N,K]^T
 *   matmul_tn(C, A, B, M, N, K, accumulate):  C[M,N] (+)= A[K,M]^T @ B[K,N] */
void matmul(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);
void matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);
void matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);

/* 1 when the CPU supports AVX2 and FMA (CPUID), else 0. */
int cpu_has_avx2_fma(void);
/* 1 when the CPU supports AVX-512F (and AVX2/FMA) and the OS saves the zmm
 * and mask registers (XGETBV), else 0. */
int cpu_has_avx512f(void);

/* 1 when the CPU also has AVX512_BF16 (and AVX512BW), else 0. */
int cpu_has_avx512_bf16(void);
/* 1 on AArch64, whose every CPU has Advanced SIMD (NEON) with fused
 * multiply-add (the architecture requires it), else 0. */
int cpu_has_neon(void);

/* Choose the backend. name is "naive", "avx2", "avx512", "neon" or "auto"
 * (NULL = read the environment variable ATTN_BACKEND, default "auto": the
 * widest the CPU has, avx512, else avx2, else neon on AArch64, else naive).
 * Returns 0, or -1 with fail() for an unknown name or a backend this CPU
 * cannot run. */
int backend_select(const char *name);
/* The choices of every program's --backend flag, "auto,naive,avx2,avx512,neon"
 * (the ones this CPU cannot run are refused by backend_select, saying why). */
extern const char BACKEND_CHOICES[];
Backend backend_current(void);
const char *backend_name(Backend b);
/* 1 when the current backend may use AVX2 code (avx2 and avx512: the
 * element-wise kernels of vecmath.h have one AVX2 form for both). */
int backend_uses_avx2(void);
/* 1 when the current backend is neon (the element-wise kernels' NEON forms). */
int backend_uses_neon(void);

/* The matmul precision: what the products do with their float inputs.
 *   "float" (the default): the products of the chosen backend, in float.
 *   "bf16": each element of A and B rounded to bf16 first, the sums in float
 *           (mixed-precision training: parameters, gradients, optimizer and
 *           every element-wise pass stay float), for the products where that
 *           is faster: M N / (M + N) >= 32 (each packed input used in 32
 *           multiply-adds or more, see matmul.c); the smaller ones (one
 *           head's attention over 50 tokens, say) stay float. Runs
 *           sgemm_avx512_bf16 on the avx512 backend and sgemm_naive_bf16 on
 *           the naive one (slowly: the same numbers, for a CPU without
 *           AVX512_BF16); refused on avx2 and neon.
 * PyTorch's torch.set_float32_matmul_precision("medium") is the same idea.
 * Returns 0, or -1 with fail() for an unknown name or a bf16 this backend
 * and CPU cannot run. Select the backend first. */
typedef enum { PRECISION_FLOAT = 0, PRECISION_BF16 = 1 } MatmulPrecision;
/* The help text of every program's --matmul-precision flag. */
extern const char MATMUL_PRECISION_HELP[];
int matmul_precision_select(const char *name);
/* 1 when the bf16 precision takes an M x N product (M N / (M + N) >= 32). */
int matmul_bf16_pays(int M, int N);
MatmulPrecision matmul_precision_current(void);
const char *matmul_precision_name(MatmulPrecision p);

/* The thread count and how many threads each region takes: threads.h. */

#endif
