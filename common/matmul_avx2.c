/* matmul_avx2.c - a packed, cache-blocked SGEMM with an AVX2/FMA micro-kernel.
 *
 *   C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N]      (see matmul.h)
 *
 * This is the GotoBLAS / BLIS recipe, written out one step at a time:
 *
 *   1. The micro-kernel computes one 6x16 tile of C entirely in registers:
 *      12 ymm accumulators (6 rows x 2 vectors of 8 floats). Each step of k
 *      loads 16 floats of B (two vectors), broadcasts 6 floats of A, and issues
 *      12 fused multiply-adds. 12 independent FMAs per step keep both FMA
 *      units busy despite the 4-cycle FMA latency.
 *   2. Packing copies a 6-row sliver of op(A) and a 16-column sliver of op(B)
 *      into small contiguous buffers laid out in exactly the order the kernel
 *      reads them (k-major). The kernel then walks memory linearly with no
 *      strides, whatever the transposes, strides or alignment of the caller's
 *      matrices were; the ragged edges are padded with zeros.
 *   3. Five loops around the micro-kernel choose which block of each matrix
 *      lives in which cache level (KC, MC, NC below), so every float the
 *      kernel loads comes from L1 or L2, not from memory.
 *   4. OpenMP threads share the packing and split the 6x16 tiles of C between
 *      them. Each C element is computed by exactly one thread, in the same k
 *      order, so the result does not depend on the number of threads.
 *
 * Compiled with -mavx2 -mfma (Makefile rule for *_avx2.c); call it only when
 * cpu_has_avx2_fma() says the CPU has those instructions. */
#include "matmul.h"

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- Register tile --------------------------------------------------------- */

enum {
    MR = 6,  /* rows of C per micro-kernel tile (one ymm broadcast each)     */
    NR = 16, /* columns of C per tile (two ymm vectors of 8 floats)          */
};

/* ---- Cache blocking -------------------------------------------------------
 * Derived from this machine's caches (lscpu, /sys/devices/system/cpu/cpu0/
 * cache): L1d 48 KiB per core, L2 2 MiB per core, L3 105 MiB shared
 * (an "Intel Xeon Processor" under KVM with AVX-512, Sapphire Rapids class;
 * 2 cores).
 *
 * KC (depth of one block): the kernel streams a 6 x KC sliver of packed A and
 *   a KC x 16 sliver of packed B. (6 + 16) * 4 bytes * KC = 88 * KC bytes;
 *   KC = 256 gives 22.5 KiB, under half of the 48 KiB L1, so the B sliver
 *   (16 KiB, reused by every A sliver) stays in L1 while the A slivers and
 *   the C tile pass through the other half.
 * MC (rows of A per block): the packed MC x KC block of A is reused for every
 *   16-column sliver of B, so it should stay in L2: MC * KC * 4 bytes =
 *   MC KiB. MC = 384 uses 384 KiB, under a quarter of the 2 MiB L2, leaving
 *   room for the B sliver stream and for C.
 * NC (columns of B per block): the packed KC x NC panel of B is reused for
 *   every MC block of A and lives in L3: KC * NC * 4 bytes = 4 MiB for
 *   NC = 4096, a small share of the 105 MiB L3 (shared by both cores).
 * MC is a multiple of MR and NC of NR, so only the last block has ragged
 * tiles. (bench/bench_sgemm.c measures the result; common/README.md shows
 * the numbers.) */
enum {
    KC = 256,
    MC = 384,  /* 64 * MR */
    NC = 4096, /* 256 * NR */
};

/* Below this many multiply-adds (M*N*K) one thread is faster than two: the
 * fork/join and the barriers between packing and computing cost a few
 * microseconds, about the time of a 64x64x64 product. */
static const double PARALLEL_MIN_WORK = 96.0 * 96.0 * 96.0;

/* ---- Packing buffers ---------------------------------------------------------
 * Allocated on first use and grown when a bigger product comes along, then
 * reused: a fresh allocation per call would pay a page fault per 4 KiB on
 * first touch (about 2-3 microseconds each on this VM), more than the product
 * itself for the chapters' sizes. The blocking bounds them: at most MC x KC
 * floats of A (384 KiB) and KC x NC of B (4 MiB), whatever the matrix sizes.
 * _Thread_local makes each calling thread own its buffers, so two threads
 * may call sgemm_avx2 at the same time; inside one call the OpenMP team
 * shares the caller's buffers. 64-byte aligned: the kernel's aligned loads
 * need 32, and 64 keeps each sliver on whole cache lines. */
typedef struct {
    float *data;
    size_t capacity; /* in floats */
} PackBuffer;

static _Thread_local PackBuffer packed_a_buffer;
static _Thread_local PackBuffer packed_b_buffer;

static float *pack_buffer_reserve(PackBuffer *buf, size_t floats) {
    if (buf->capacity >= floats) return buf->data;
    free(buf->data);
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    buf->data = aligned_alloc(64, bytes);
    if (!buf->data) {
        fprintf(stderr, "sgemm_avx2: out of memory (%zu bytes of packing buffer)\n", bytes);
        abort();
    }
    buf->capacity = floats;
    return buf->data;
}

/* ---- Packing ----------------------------------------------------------------- */

/* One element of op(A) (M x K) and of op(B) (K x N) as the caller stored them. */
static inline float op_a(const float *A, int lda, int trans_a, int i, int p) {
    return trans_a ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
}
static inline float op_b(const float *B, int ldb, int trans_b, int p, int j) {
    return trans_b ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
}

/* Transpose an 8x8 block held in 8 registers: lane j of r[i] goes to lane i
 * of r[j]. Three rounds: interleave pairs of rows (unpack), then pairs of
 * pairs (shuffle), then swap 128-bit halves (permute2f128). */
static inline void transpose_8x8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]); /* r00 r10 r01 r11 | r04 r14 r05 r15 */
    __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]); /* r02 r12 r03 r13 | r06 r16 r07 r17 */
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
    __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
    __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
    __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)); /* r00 r10 r20 r30 | r04 .. */
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)); /* r01 r11 r21 r31 | r05 .. */
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)); /* r40 r50 r60 r70 | r44 .. */
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20); /* r00 r10 ... r70 */
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31); /* r04 r14 ... r74 */
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* A mask selecting the first 6 of 8 lanes, for loads and stores of one
 * 6-float row of a packed A sliver. */
static inline __m256i first_six_lanes(void) { return _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0); }

/* Pack rows [i0, i0+rows) x depth [p0, p0+kc) of op(A) into an MR-row sliver:
 *   sliver[p * MR + i] = op(A)[i0 + i, p0 + p],   rows padded with zeros to MR.
 * Shape: A as stored, sliver[kc * MR]. */
static void pack_a_sliver(float *sliver, const float *A, int lda, int trans_a,
                          int i0, int rows, int p0, int kc) {
    int p = 0;
    if (!trans_a && rows == MR) {
        /* A stored [M, K]: each of the 6 rows is contiguous in k. Take 8 k at
         * a time from each row (plus 2 zero rows), transpose the 8x8 block, and
         * each result register r[q] = column p+q = the 6 values the kernel
         * wants for step p+q. Storing 8 lanes at stride 6 writes 2 lanes too
         * many; the next store overwrites them, and the last one is masked. */
        const float *row = A + (size_t)i0 * lda + p0;
        __m256i six = first_six_lanes();
        for (; p + 8 <= kc; p += 8) {
            __m256 r[8];
            for (int i = 0; i < MR; i++) r[i] = _mm256_loadu_ps(row + (size_t)i * lda + p);
            r[6] = r[7] = _mm256_setzero_ps();
            transpose_8x8(r);
            for (int q = 0; q < 7; q++) _mm256_storeu_ps(sliver + (p + q) * MR, r[q]);
            _mm256_maskstore_ps(sliver + (p + 7) * MR, six, r[7]);
        }
    } else if (trans_a && rows == MR) {
        /* A stored [K, M]: the 6 values for one k are already adjacent. */
        __m256i six = first_six_lanes();
        for (; p < kc; p++) {
            __m256 v = _mm256_maskload_ps(A + (size_t)(p0 + p) * lda + i0, six);
            _mm256_maskstore_ps(sliver + p * MR, six, v);
        }
    }
    for (; p < kc; p++) /* what is left: the k remainder, or a ragged last sliver */
        for (int i = 0; i < MR; i++)
            sliver[p * MR + i] = i < rows ? op_a(A, lda, trans_a, i0 + i, p0 + p) : 0.0f;
}

/* Pack depth [p0, p0+kc) x columns [j0, j0+cols) of op(B) into an NR-column
 * sliver:
 *   sliver[p * NR + j] = op(B)[p0 + p, j0 + j],   columns padded with zeros.
 * Shape: B as stored, sliver[kc * NR] (32-byte aligned). */
static void pack_b_sliver(float *sliver, const float *B, int ldb, int trans_b,
                          int p0, int kc, int j0, int cols) {
    int p = 0;
    if (!trans_b && cols == NR) {
        /* B stored [K, N]: rows are contiguous in n, a straight copy. */
        for (; p < kc; p++) {
            const float *src = B + (size_t)(p0 + p) * ldb + j0;
            _mm256_store_ps(sliver + p * NR, _mm256_loadu_ps(src));
            _mm256_store_ps(sliver + p * NR + 8, _mm256_loadu_ps(src + 8));
        }
    } else if (trans_b && cols == NR) {
        /* B stored [N, K]: column j of op(B) is row j of B, contiguous in k.
         * Transpose 8x8 blocks: 8 rows of B x 8 k -> 8 k x 8 columns. */
        for (; p + 8 <= kc; p += 8) {
            for (int half = 0; half < 2; half++) {
                const float *src = B + (size_t)(j0 + 8 * half) * ldb + p0 + p;
                __m256 r[8];
                for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(src + (size_t)q * ldb);
                transpose_8x8(r);
                for (int q = 0; q < 8; q++) _mm256_store_ps(sliver + (p + q) * NR + 8 * half, r[q]);
            }
        }
    }
    for (; p < kc; p++) /* what is left: the k remainder, or a ragged last sliver */
        for (int j = 0; j < NR; j++)
            sliver[p * NR + j] = j < cols ? op_b(B, ldb, trans_b, p0 + p, j0 + j) : 0.0f;
}

/* ---- Micro-kernel ------------------------------------------------------------- */

/* Write one row of 16 results: c = alpha * acc + beta * c. beta == 0 never
 * reads c (it may hold NaN); beta == 1 is the accumulate of a backward pass. */
static inline void store_row(float *c, __m256 acc0, __m256 acc1, __m256 alpha, float beta) {
    if (beta == 0.0f) {
        _mm256_storeu_ps(c, _mm256_mul_ps(alpha, acc0));
        _mm256_storeu_ps(c + 8, _mm256_mul_ps(alpha, acc1));
    } else if (beta == 1.0f) {
        _mm256_storeu_ps(c, _mm256_fmadd_ps(alpha, acc0, _mm256_loadu_ps(c)));
        _mm256_storeu_ps(c + 8, _mm256_fmadd_ps(alpha, acc1, _mm256_loadu_ps(c + 8)));
    } else {
        __m256 vbeta = _mm256_set1_ps(beta);
        _mm256_storeu_ps(c, _mm256_fmadd_ps(alpha, acc0, _mm256_mul_ps(vbeta, _mm256_loadu_ps(c))));
        _mm256_storeu_ps(c + 8, _mm256_fmadd_ps(alpha, acc1,
                                                _mm256_mul_ps(vbeta, _mm256_loadu_ps(c + 8))));
    }
}

/* C tile [6,16] = alpha * a_sliver^T @ b_sliver + beta * C tile.
 * Shapes: a_sliver[kc * 6] (k-major, packed), b_sliver[kc * 16] (k-major,
 * packed, 32-byte aligned), c with row stride ldc. */
static inline void kernel_6x16(int kc, const float *restrict a_sliver,
                               const float *restrict b_sliver, float *c, int ldc,
                               float alpha, float beta) {
    /* Accumulator c<row><half>: row of the tile, half 0 = columns 0..7, 1 = 8..15. */
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float *a = a_sliver, *b = b_sliver;

    /* Ask for the C tile now; it arrives while the k loop runs. C is the one
     * operand that is not packed, and for a big C it comes from L3 or memory,
     * which would otherwise cost a stall of ~100 ns at the store. */
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + NR - 1), _MM_HINT_T0);
    }

#pragma GCC unroll 4
    for (int p = 0; p < kc; p++) {
        __m256 b0 = _mm256_load_ps(b);     /* op(B)[p, 0..7]  */
        __m256 b1 = _mm256_load_ps(b + 8); /* op(B)[p, 8..15] */
        __m256 ai;                         /* op(A)[i, p] in all 8 lanes */
        ai = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(ai, b0, c00);
        c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(ai, b0, c10);
        c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(ai, b0, c20);
        c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(ai, b0, c30);
        c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(ai, b0, c40);
        c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(ai, b0, c50);
        c51 = _mm256_fmadd_ps(ai, b1, c51);
        a += MR;
        b += NR;
    }

    __m256 valpha = _mm256_set1_ps(alpha);
    store_row(c + 0 * (size_t)ldc, c00, c01, valpha, beta);
    store_row(c + 1 * (size_t)ldc, c10, c11, valpha, beta);
    store_row(c + 2 * (size_t)ldc, c20, c21, valpha, beta);
    store_row(c + 3 * (size_t)ldc, c30, c31, valpha, beta);
    store_row(c + 4 * (size_t)ldc, c40, c41, valpha, beta);
    store_row(c + 5 * (size_t)ldc, c50, c51, valpha, beta);
}

/* A tile at the bottom or right edge of C (rows < 6 or cols < 16): run the
 * full kernel into a private 6x16 tile (the packed padding is zero, so the
 * extra rows/columns are just unused), then copy the part that exists.
 * Shape: c is [rows, cols] with row stride ldc. */
static void kernel_edge(int kc, const float *a_sliver, const float *b_sliver, float *c,
                        int ldc, int rows, int cols, float alpha, float beta) {
    _Alignas(32) float tile[MR * NR];
    kernel_6x16(kc, a_sliver, b_sliver, tile, NR, alpha, 0.0f);
    for (int i = 0; i < rows; i++) {
        float *crow = c + (size_t)i * ldc;
        const float *trow = tile + i * NR;
        for (int j = 0; j < cols; j++)
            crow[j] = beta == 0.0f ? trow[j] : trow[j] + beta * crow[j];
    }
}

/* ---- Special cases --------------------------------------------------------------- */

/* C = beta * C, for K == 0 or alpha == 0 (A and B are not read then). */
static void scale_c(int M, int N, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        float *crow = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++) crow[j] = beta == 0.0f ? 0.0f : beta * crow[j];
    }
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int min_int(int a, int b) { return a < b ? a : b; }

/* ---- The five loops ----------------------------------------------------------------
 *
 *   for jc in N by NC:              B panel  op(B)[pc.., jc..] -> L3
 *     for pc in K by KC:
 *       for ic in M by MC:          A block  op(A)[ic.., pc..] -> L2
 *         pack the A block (and, for the first ic, the B panel)
 *         for jr in NC by 16:       one B sliver               -> L1
 *           for ir in MC by 6:      one A sliver, micro-kernel on C tile (ir, jr)
 *
 * The first KC block (pc == 0) applies the caller's beta; the later ones add
 * to what the earlier ones wrote (beta = 1).
 *
 * Threads: all threads pack together (each packs whole slivers), wait at a
 * barrier until the packed data is complete, then split the (jr, ir) tiles:
 * numbered jr-major and handed out in contiguous static chunks, so a thread
 * keeps its B sliver in L1 across consecutive tiles, and which thread computes
 * a tile depends only on the shape and the thread count. Before the next
 * block is packed over the buffers, a second barrier waits until everyone has
 * finished reading them. A product that fits in one block (the usual case in
 * the chapters) thus costs two synchronisations: the packing barrier and the
 * end of the parallel region. */
void sgemm_avx2(int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }

    int kc_max = min_int(K, KC);
    int mc_max = min_int(ceil_div(M, MR) * MR, MC);
    int nc_max = min_int(ceil_div(N, NR) * NR, NC);
    float *packed_a = pack_buffer_reserve(&packed_a_buffer, (size_t)mc_max * kc_max);
    float *packed_b = pack_buffer_reserve(&packed_b_buffer, (size_t)nc_max * kc_max);

    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if ((double)M * N * K < PARALLEL_MIN_WORK) threads = 1;

#pragma omp parallel num_threads(threads) if (threads > 1) default(none) \
    shared(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, packed_a, packed_b)
    {
        for (int jc = 0; jc < N; jc += NC) {
            int nc = min_int(NC, N - jc);
            int n_slivers_b = ceil_div(nc, NR);
            for (int pc = 0; pc < K; pc += KC) {
                int kc = min_int(KC, K - pc);
                float block_beta = pc == 0 ? beta : 1.0f;
                for (int ic = 0; ic < M; ic += MC) {
                    int mc = min_int(MC, M - ic);
                    int n_slivers_a = ceil_div(mc, MR);

                    /* Pack: the B panel once per (jc, pc), the A block every time. */
                    int n_pack_b = ic == 0 ? n_slivers_b : 0;
#pragma omp for schedule(static)
                    for (int item = 0; item < n_pack_b + n_slivers_a; item++) {
                        if (item < n_pack_b) {
                            int jr = item;
                            pack_b_sliver(packed_b + (size_t)jr * kc * NR, B, ldb, trans_b, pc,
                                          kc, jc + jr * NR, min_int(NR, nc - jr * NR));
                        } else {
                            int ir = item - n_pack_b;
                            pack_a_sliver(packed_a + (size_t)ir * kc * MR, A, lda, trans_a,
                                          ic + ir * MR, min_int(MR, mc - ir * MR), pc, kc);
                        }
                    } /* implicit barrier: the packed data is complete */

                    int n_tiles = n_slivers_a * n_slivers_b;
#pragma omp for schedule(static) nowait
                    for (int tile = 0; tile < n_tiles; tile++) {
                        int jr = tile / n_slivers_a, ir = tile % n_slivers_a;
                        int rows = min_int(MR, mc - ir * MR);
                        int cols = min_int(NR, nc - jr * NR);
                        const float *a_sliver = packed_a + (size_t)ir * kc * MR;
                        const float *b_sliver = packed_b + (size_t)jr * kc * NR;
                        float *c = C + (size_t)(ic + ir * MR) * ldc + jc + jr * NR;
                        if (rows == MR && cols == NR)
                            kernel_6x16(kc, a_sliver, b_sliver, c, ldc, alpha, block_beta);
                        else
                            kernel_edge(kc, a_sliver, b_sliver, c, ldc, rows, cols, alpha,
                                        block_beta);
                    }

                    /* The next block overwrites the packed buffers: wait until
                     * everyone is done reading them. After the last block the
                     * end of the parallel region waits anyway. */
                    int last_block = jc + NC >= N && pc + KC >= K && ic + MC >= M;
                    if (!last_block) {
#pragma omp barrier
                    }
                }
            }
        }
    }
}
