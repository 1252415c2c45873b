/* matmul.c - the one matrix-multiply entry point (see matmul.h).
 *
 * Contents:
 *   sgemm_naive   the specification: three plain loops, double accumulation;
 *   sgemm_naive_bf16, bf16_round   the same with the inputs rounded to bf16;
 *   sgemm         dispatch to the backend chosen once (naive, avx2, avx512, neon)
 *                 and the matmul precision (float, bf16);
 *   matmul, matmul_nt, matmul_tn   dense convenience wrappers;
 *   cpu_has_avx2_fma, cpu_has_avx512f, cpu_has_avx512_bf16, cpu_has_neon,
 *   backend_select/current/name
 *                 run-time backend choice;
 *   matmul_precision_select/current/name   float or bf16 products.
 * The thread count and the threads each product takes: threads.c.
 *
 * Backend default: nothing is chosen until the first sgemm() (or
 * backend_current()) call; if backend_select() was never called by then, the
 * choice is made lazily exactly as backend_select(NULL) would: the environment
 * variable ATTN_BACKEND if set, else "auto" (avx512 when the CPU has it, else
 * avx2, else neon on AArch64, else naive). A bad ATTN_BACKEND value found this way cannot be returned as an
 * error (sgemm returns void), so it is reported on stderr once and "auto" is
 * used. Programs should call backend_select() at start-up so that a bad value
 * gets a proper error and a non-zero exit. */
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "util/error.h"

#include "util/openmp.h"
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* ------------------------------------------------------------------------ */
/* The specification                                                         */
/* ------------------------------------------------------------------------ */

/* C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N]
 *   op(A)[i,k] = A[i*lda + k]  (trans_a == 0, A stored [M,K])
 *              = A[k*lda + i]  (trans_a == 1, A stored [K,M])
 *   op(B)[k,j] = B[k*ldb + j]  (trans_b == 0, B stored [K,N])
 *              = B[j*ldb + k]  (trans_b == 1, B stored [N,K])
 * Each output element is one dot product of length K summed in double, so
 * the result does not depend on the thread count (rows are independent). */
static void naive_loops(int trans_a, int trans_b, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta,
                        float *C, int ldc, int round_to_bf16) {
    if (M <= 0 || N <= 0) return;
    /* As many threads as the product pays for (threads.h), one row of C at
     * least each. */
    #pragma omp parallel for schedule(static) num_threads(threads_for_naive_product(M, N, K > 0 ? K : 1, M))
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) {
                float a = trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = trans_b ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                if (round_to_bf16) {
                    a = bf16_round(a);
                    b = bf16_round(b);
                }
                sum += (double)a * (double)b;
            }
            float *c = &C[(size_t)i * ldc + j];
            if (beta == 0.0f)
                *c = (float)(alpha * sum);                 /* old C never read */
            else
                *c = (float)(alpha * sum + (double)beta * (double)*c);
        }
    }
}

void sgemm_naive(int trans_a, int trans_b, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc) {
    naive_loops(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

/* The same with the inputs rounded to bf16: the specification of the "bf16"
 * matmul precision (matmul_bf16.c). */
void sgemm_naive_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta,
                      float *C, int ldc) {
    naive_loops(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 1);
}

/* A float's bits: sign (1), exponent (8), fraction (23). bf16 keeps the top
 * 16. Adding 0x7FFF plus the lowest kept bit, then dropping the low 16 bits,
 * rounds to nearest with ties to even (a carry into the exponent is right:
 * it rounds up to the next power of two, or to infinity). */
float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u) {          /* inf or NaN */
        if (u & 0x007FFFFFu) u |= 0x00400000u;       /* NaN: keep it a (quiet) NaN */
    } else if ((u & 0x7F800000u) == 0) {
        u &= 0x80000000u;                            /* zero or subnormal: a zero of its sign */
    } else {
        u += 0x7FFFu + ((u >> 16) & 1u);
    }
    u &= 0xFFFF0000u;
    memcpy(&x, &u, sizeof u);
    return x;
}

/* ------------------------------------------------------------------------ */
/* Backend choice                                                            */
/* ------------------------------------------------------------------------ */

/* -1 = not chosen yet, else a Backend value. Atomic because sgemm may be
 * first called from several OpenMP threads at once. */
static atomic_int chosen_backend = -1;

int cpu_has_avx2_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned int eax, ebx, ecx, edx;
    /* Leaf 1: ECX bit 12 = FMA, bit 27 = OSXSAVE (XGETBV usable), bit 28 = AVX. */
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    int has_fma = (ecx >> 12) & 1;
    int has_osxsave = (ecx >> 27) & 1;
    int has_avx = (ecx >> 28) & 1;
    if (!has_fma || !has_osxsave || !has_avx) return 0;
    /* XCR0 bits 1 (SSE/XMM) and 2 (AVX/YMM): the OS saves YMM registers on a
     * context switch. Without that, AVX instructions fault. */
    unsigned int xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 0x6u) != 0x6u) return 0;
    /* Leaf 7, sub-leaf 0: EBX bit 5 = AVX2. */
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    return (ebx >> 5) & 1;
#else
    return 0;
#endif
}

int cpu_has_avx512f(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (!cpu_has_avx2_fma()) return 0; /* also checks OSXSAVE, so XGETBV is usable */
    /* XCR0 bits 5, 6, 7: the OS saves the opmask registers, the upper halves
     * of zmm0-15 and zmm16-31. Without them AVX-512 instructions fault. */
    unsigned int xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 0xE0u) != 0xE0u) return 0;
    /* Leaf 7, sub-leaf 0: EBX bit 16 = AVX512F. */
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    return (ebx >> 16) & 1;
#else
    return 0;
#endif
}

int cpu_has_avx512_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (!cpu_has_avx512f()) return 0;
    unsigned int eax, ebx, ecx, edx;
    /* Leaf 7, sub-leaf 0: EBX bit 30 = AVX512BW; sub-leaf 1: EAX bit 5 = AVX512_BF16. */
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !((ebx >> 30) & 1)) return 0;
    if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return 0;
    return (eax >> 5) & 1;
#else
    return 0;
#endif
}

int cpu_has_neon(void) {
#if defined(__aarch64__)
    return 1; /* Advanced SIMD and its FMA are part of every AArch64 CPU */
#else
    return 0;
#endif
}

const char *backend_name(Backend b) {
    switch (b) {
    case BACKEND_NAIVE: return "naive";
    case BACKEND_AVX2: return "avx2";
    case BACKEND_AVX512: return "avx512";
    case BACKEND_NEON: return "neon";
    }
    return "unknown";
}

const char BACKEND_CHOICES[] = "auto,naive,avx2,avx512,neon";

/* What "auto" takes on this CPU: the widest SIMD backend it has. */
static Backend widest_backend(void) {
    return cpu_has_avx512f()   ? BACKEND_AVX512
           : cpu_has_avx2_fma() ? BACKEND_AVX2
           : cpu_has_neon()     ? BACKEND_NEON
                                : BACKEND_NAIVE;
}

/* A backend this CPU cannot run is refused in one line that says what it
 * needs and what to use instead (what auto takes here, or naive). */
int backend_select(const char *name) {
    const char *source = "--backend";
    if (name == NULL) {
        name = getenv("ATTN_BACKEND");
        source = "environment variable ATTN_BACKEND";
        if (name == NULL || name[0] == '\0') name = "auto";
    }
    const char *here = backend_name(widest_backend());
    if (strcmp(name, "naive") == 0) {
        chosen_backend = BACKEND_NAIVE;
        return 0;
    }
    if (strcmp(name, "avx2") == 0) {
        if (!cpu_has_avx2_fma())
            return fail("matmul backend 'avx2' (from %s) needs an x86 CPU with AVX2 and FMA "
                        "and an OS that saves YMM registers; this machine has not: "
                        "use 'auto' (%s here) or 'naive'", source, here);
        chosen_backend = BACKEND_AVX2;
        return 0;
    }
    if (strcmp(name, "avx512") == 0) {
        if (!cpu_has_avx512f())
            return fail("matmul backend 'avx512' (from %s) needs an x86 CPU with AVX-512F "
                        "and an OS that saves ZMM registers; this machine has not: "
                        "use 'auto' (%s here) or 'naive'", source, here);
        chosen_backend = BACKEND_AVX512;
        return 0;
    }
    if (strcmp(name, "neon") == 0) {
        if (!cpu_has_neon())
            return fail("matmul backend 'neon' (from %s) needs an AArch64 (ARM) CPU; "
                        "this machine is not one: use 'auto' (%s here) or 'naive'", source, here);
        chosen_backend = BACKEND_NEON;
        return 0;
    }
    if (strcmp(name, "auto") == 0) {
        chosen_backend = widest_backend();
        return 0;
    }
    return fail("unknown matmul backend '%s' (from %s): expected naive, avx2, avx512, neon or auto",
                name, source);
}

/* The matmul precision (matmul.h). bf16_on_cpu is looked up once, when bf16
 * is chosen: sgemm() must not ask CPUID on every call. */
static atomic_int chosen_precision = PRECISION_FLOAT;
static atomic_int bf16_on_cpu;

const char MATMUL_PRECISION_HELP[] =
    "matmul inputs: float, or bf16 with float sums where faster";

const char *matmul_precision_name(MatmulPrecision p) { return p == PRECISION_BF16 ? "bf16" : "float"; }

MatmulPrecision matmul_precision_current(void) { return (MatmulPrecision)atomic_load(&chosen_precision); }

int matmul_precision_select(const char *name) {
    if (name == NULL || strcmp(name, "float") == 0) {
        chosen_precision = PRECISION_FLOAT;
        return 0;
    }
    if (strcmp(name, "bf16") != 0)
        return fail("unknown matmul precision '%s': expected float or bf16", name);
    bf16_on_cpu = cpu_has_avx512_bf16();
    Backend b = backend_current();
    if (b == BACKEND_AVX2 || b == BACKEND_NEON || (b == BACKEND_AVX512 && !bf16_on_cpu))
        return fail("matmul precision 'bf16' needs the avx512 backend on a CPU with AVX512_BF16%s, "
                    "or the naive backend (the same rounding, slowly); the backend is %s",
                    bf16_on_cpu ? "" : " (this one has not)", backend_name(b));
    chosen_precision = PRECISION_BF16;
    return 0;
}

/* The lazy default described at the top of this file. */
static Backend resolve_backend(void) {
    int b = chosen_backend;
    if (b >= 0) return (Backend)b;
    #pragma omp critical(attn_backend_choice)
    {
        if (chosen_backend < 0 && backend_select(NULL) != 0) {
            fprintf(stderr, "warning: %s; using 'auto'\n", last_error());
            backend_select("auto");
        }
    }
    return (Backend)chosen_backend;
}

Backend backend_current(void) { return resolve_backend(); }

int backend_uses_avx2(void) {
    Backend b = resolve_backend();
    return b == BACKEND_AVX2 || b == BACKEND_AVX512;
}

int backend_uses_neon(void) { return resolve_backend() == BACKEND_NEON; }

/* M * N * K of every sgemm() call so far, for benchmarks (a relaxed atomic
 * add per call: nothing next to the product itself). */
static atomic_ullong multiply_adds;

unsigned long long sgemm_multiply_adds(void) { return atomic_load(&multiply_adds); }

/* Which products the bf16 precision takes. The bf16 kernel packs (and so
 * rounds) both operands on every call, M K + K N floats, where the float
 * kernel reads small products in place; its gain is per multiply-add, M N K
 * of them. So it pays when each packed float is used in enough of them:
 * M N K / (M K + K N) = M N / (M + N) >= 32. Measured here (1 thread,
 * interleaved best of 7, bf16 against float): the ViT's 3200x96x96,
 * 3200x192x96 and 96x288x3200 (M N / (M + N) 48-93) 1.3-1.8x; one head's
 * attention, 50x24x50 (16) 0.52-0.57x and 50x50x24 (25) 0.97x; the
 * classifier head 3200x10x96 (10) 0.65x. The smaller products stay float:
 * bf16 is a permission to round where it is faster, as in PyTorch's
 * set_float32_matmul_precision("medium"), not a promise. */
static const double BF16_MIN_REUSE = 32.0;
int matmul_bf16_pays(int M, int N) { return (double)M * N >= BF16_MIN_REUSE * ((double)M + N); }

void sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
           const float *A, int lda, const float *B, int ldb, float beta,
           float *C, int ldc) {
    if (M > 0 && N > 0 && K > 0)
        atomic_fetch_add_explicit(&multiply_adds, (unsigned long long)M * N * K, memory_order_relaxed);
    if (atomic_load_explicit(&chosen_precision, memory_order_relaxed) == PRECISION_BF16 && matmul_bf16_pays(M, N)) {
        if (resolve_backend() == BACKEND_AVX512 && bf16_on_cpu)
            sgemm_avx512_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        else /* the naive backend, or a backend changed after the precision: the specification */
            sgemm_naive_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    switch (resolve_backend()) {
    case BACKEND_AVX512:
        sgemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        break;
    case BACKEND_AVX2:
        sgemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        break;
#if defined(__aarch64__)
    case BACKEND_NEON: /* sgemm_neon exists only on AArch64 (matmul_neon.c) */
        sgemm_neon(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        break;
#endif
    default:
        sgemm_naive(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
}

/* ------------------------------------------------------------------------ */
/* Dense wrappers (alpha = 1, no padding between rows)                       */
/* ------------------------------------------------------------------------ */

/* C[M,N] (+)= A[M,K] @ B[K,N] */
void matmul(float *C, const float *A, const float *B, int M, int N, int K, int accumulate) {
    sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, accumulate ? 1.0f : 0.0f, C, N);
}

/* C[M,N] (+)= A[M,K] @ B[N,K]^T */
void matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate) {
    sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, accumulate ? 1.0f : 0.0f, C, N);
}

/* C[M,N] (+)= A[K,M]^T @ B[K,N] */
void matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate) {
    sgemm(1, 0, M, N, K, 1.0f, A, M, B, N, accumulate ? 1.0f : 0.0f, C, N);
}
