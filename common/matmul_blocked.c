/* matmul_blocked.c - the five loops around a micro-kernel, the packing
 * buffers and the threads: the half of a fast SGEMM that does not depend on
 * the instruction set (see matmul_blocked.h; common/README.md is the lesson).
 *
 *   for jc in N by NC:              B panel  op(B)[pc.., jc..] -> L3
 *     for pc in K by KC:
 *       for ic in M by MC:          A block  op(A)[ic.., pc..] -> L2
 *         pack the A block (and, for the first ic, the B panel)
 *         for jr in NC by NR:       one B sliver               -> L1
 *           for ir in MC by MR:     one A sliver, micro-kernel on C tile (ir, jr)
 *
 * The first KC block (pc == 0) applies the caller's beta; the later ones add
 * to what the earlier ones wrote (beta = 1). Plain C and OpenMP: the SIMD
 * code is all behind the GemmKernel's function pointers, one call per sliver
 * packed and per tile computed (each call does thousands of FMAs, so the
 * indirect call costs nothing measurable). */
#include "matmul_blocked.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Below this many multiply-adds (M*N*K) two threads are no faster than one:
 * the fork/join and the barriers between packing and computing cost a few
 * microseconds, the time of a small product. Measured here with the AVX-512
 * kernel (2 threads against 1, interleaved medians): 96^3 0.87x, 128^3 1.08x,
 * 160^3 1.22x, 192^3 1.37x; but 512x64x64 0.90x and 512x128x64 0.98x, where
 * the thin B gives the threads little to share. */
static const double PARALLEL_MIN_WORK = 160.0 * 160.0 * 160.0;

/* Up to this many multiply-adds (and K <= KC) a product skips packing and
 * runs kernel->small on one thread: all of A, B and C are in L1 anyway, and
 * packing them costs more than it saves. Measured here, 1 thread, small path
 * against blocked AVX-512 path: 8x8x16 (Q K^T of one head in chapter 05)
 * 0.23 against 1.42 microseconds, 16^3 0.25 against 1.93, 32^3 1.70 against
 * 1.73 (2.30 against 1.86 with B transposed), 64^3 14.0 against 7.8. */
static const double SMALL_MAX_WORK = 16384.0; /* 2^14, about 25^3 */

/* ---- Sharing the cores with other programs -----------------------------------
 * Two threads on two cores are fast only while both cores are ours. When
 * another program (a browser, a second training run) is running too, the
 * kernel's scheduler gives three busy threads two cores by turns, and a thread
 * of ours is regularly switched out for a few milliseconds. Its partner then
 * waits at the next barrier for that long, and a product that takes 50
 * microseconds takes 5 milliseconds: measured here with one busy-looping
 * process beside it, 2 threads ran a training step many times slower than 1.
 *
 * So the calling thread times its waits at the barriers. On an idle machine
 * a wait lasts as long as the partner's last piece of work, microseconds; a
 * wait of more than LATE_NS means the partner was switched out. Then the
 * products of the next BUSY_BACKOFF_NS run on one thread, after which two are
 * tried again. The bits do not change (each tile is computed the same way by
 * whichever thread takes it), only the speed.
 *
 * Even an idle virtual machine like this one sees such a wait now and then
 * (the host runs something else on our core): 3 to 5 in 12 s of back-to-back
 * 128^3..1024^3 products. Hence a short back-off, a quarter of a second, and
 * only after two late waits less than 0.1 s apart (below): a lone hiccup of
 * the host is not a busy machine. */
static const long long LATE_NS = 1000 * 1000;              /* 1 ms */
static const long long BUSY_BACKOFF_NS = 250 * 1000 * 1000; /* 0.25 s */
static atomic_llong one_thread_until_ns;                    /* 0: never */
static atomic_long busy_backoffs;                           /* how many times, for the curious */

static long long monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Called by the calling thread after a barrier it entered at waited_since.
 * One late wait alone is not enough: it takes a second one within
 * SECOND_STRIKE_NS. A busy program beside us makes late waits at almost
 * every product, so the second comes at once; the host's hiccups come alone. */
static const long long SECOND_STRIKE_NS = 100 * 1000 * 1000; /* 0.1 s */
static atomic_llong last_late_wait_ns;                        /* 0: never */

static void note_barrier_wait(long long waited_since) {
    long long now = monotonic_ns();
    if (now - waited_since <= LATE_NS) return;
    long long previous = atomic_exchange(&last_late_wait_ns, now);
    if (previous != 0 && now - previous < SECOND_STRIKE_NS) {
        atomic_store(&one_thread_until_ns, now + BUSY_BACKOFF_NS);
        atomic_fetch_add(&busy_backoffs, 1);
    }
}

long sgemm_busy_backoffs(void) { return atomic_load(&busy_backoffs); }

/* ---- Packing buffers ---------------------------------------------------------
 * Allocated on first use and grown when a bigger product comes along, then
 * reused: a fresh allocation per call would pay a page fault per 4 KiB on
 * first touch (about 2-3 microseconds each on this VM), more than the product
 * itself for the chapters' sizes. The blocking bounds them: at most MC x KC
 * floats of A and KC x NC of B, whatever the matrix sizes.
 * _Thread_local makes each calling thread own its buffers, so two threads
 * may call sgemm at the same time; inside one call the OpenMP team shares the
 * caller's buffers. 64-byte aligned: the kernels' aligned loads need up to 64,
 * and 64 keeps each sliver on whole cache lines. */
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
        fprintf(stderr, "sgemm: out of memory (%zu bytes of packing buffer)\n", bytes);
        abort();
    }
    buf->capacity = floats;
    return buf->data;
}

/* C = beta * C, for K == 0 or alpha == 0 (A and B are not read then). */
static void scale_c(int M, int N, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        float *crow = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++) crow[j] = beta == 0.0f ? 0.0f : beta * crow[j];
    }
}

/* c[rows, cols] = alpha * sums + beta * c, element by element, with the
 * operations the kernels' vector stores use: a multiply when beta == 0, else
 * one fused multiply-add (fmaf rounds once, like the FMA instruction).
 * Shapes: c row stride ldc, sums row stride sums_ld. */
static void tile_store_sums(float *c, int ldc, const float *sums, int sums_ld, int rows, int cols,
                            float alpha, float beta) {
    for (int i = 0; i < rows; i++) {
        float *crow = c + (size_t)i * ldc;
        const float *srow = sums + (size_t)i * sums_ld;
        for (int j = 0; j < cols; j++) {
            if (beta == 0.0f) crow[j] = alpha * srow[j];
            else if (beta == 1.0f) crow[j] = fmaf(alpha, srow[j], crow[j]);
            else crow[j] = fmaf(alpha, srow[j], beta * crow[j]);
        }
    }
}

/* A tile at the bottom or right edge of C (rows < mr or cols < nr): run the
 * full kernel into a private tile (the packed padding is zero, so the extra
 * rows and columns are just unused) with alpha = 1 and beta = 0, which leaves
 * the raw sums there, then apply alpha and beta to the part that exists with
 * the operations the kernel's own stores use.
 * Shape: c is [rows, cols] with row stride ldc. */
enum { MAX_TILE_FLOATS = 512 };

static void ragged_tile(const GemmKernel *kernel, int kc, const float *a_sliver,
                        const float *b_sliver, float *c, int ldc, int rows, int cols, float alpha,
                        float beta) {
    _Alignas(64) float sums[MAX_TILE_FLOATS];
    kernel->kernel(kc, a_sliver, b_sliver, sums, kernel->nr, 1.0f, 0.0f);
    tile_store_sums(c, ldc, sums, kernel->nr, rows, cols, alpha, beta);
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

/* Threads: all threads pack together (each packs whole slivers), wait at a
 * barrier until the packed data is complete, then share out the (jr, ir)
 * tiles. Tiles are numbered jr-major and handed out in runs of consecutive
 * tiles (a thread keeps its B sliver in L1 along a run) on demand: a thread
 * that finishes takes the next run. So when another program holds one core
 * for a while, the thread still running does the remaining work instead of
 * waiting at the barrier for its partner's fixed half. Which thread computes
 * a tile changes from run to run, the bits do not: each tile is computed by
 * one thread, in the same k order, whatever the thread count. Before the next
 * block is packed over the buffers, a second barrier waits until everyone has
 * finished reading them. A product that fits in one block (the usual case in
 * the chapters) costs two synchronisations: the packing barrier and the end
 * of the parallel region. */
void sgemm_blocked(const GemmKernel *kernel, int trans_a, int trans_b, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    if (K <= kernel->kc && (double)M * N * K <= SMALL_MAX_WORK) {
        kernel->small(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const int MR = kernel->mr, NR = kernel->nr;
    if (MR * NR > MAX_TILE_FLOATS) abort(); /* a kernel file's constants are wrong */
    const int KC = kernel->kc, MC = kernel->mc, NC = kernel->nc;

    int kc_max = min_int(K, KC);
    int mc_max = min_int(ceil_div(M, MR) * MR, MC);
    int nc_max = min_int(ceil_div(N, NR) * NR, NC);
    float *packed_a = pack_buffer_reserve(&packed_a_buffer, (size_t)mc_max * kc_max);
    float *packed_b = pack_buffer_reserve(&packed_b_buffer, (size_t)nc_max * kc_max);

    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if ((double)M * N * K < PARALLEL_MIN_WORK) threads = 1;
    if (threads > 1 && monotonic_ns() < atomic_load(&one_thread_until_ns)) threads = 1;
    long long work_done_at = 0; /* when the calling thread finished its share */

#pragma omp parallel num_threads(threads) if (threads > 1) default(none)                        \
    shared(kernel, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, packed_a,    \
               packed_b, threads, MR, NR, KC, MC, NC, work_done_at)
    {
        int caller = omp_get_thread_num() == 0; /* the thread that called sgemm */
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
#pragma omp for schedule(dynamic, 1) nowait
                    for (int item = 0; item < n_pack_b + n_slivers_a; item++) {
                        if (item < n_pack_b) {
                            int jr = item;
                            kernel->pack_b(packed_b + (size_t)jr * kc * NR, B, ldb, trans_b, pc,
                                           kc, jc + jr * NR, min_int(NR, nc - jr * NR));
                        } else {
                            int ir = item - n_pack_b;
                            kernel->pack_a(packed_a + (size_t)ir * kc * MR, A, lda, trans_a,
                                           ic + ir * MR, min_int(MR, mc - ir * MR), pc, kc);
                        }
                    }
                    /* Wait until the packed data is complete. */
                    long long waited_since = threads > 1 ? monotonic_ns() : 0;
#pragma omp barrier
                    if (caller && threads > 1) note_barrier_wait(waited_since);

                    /* Runs of tiles: about 4 per thread, at most one B sliver's column. */
                    int n_tiles = n_slivers_a * n_slivers_b;
                    int run = max_int(1, min_int(n_slivers_a, n_tiles / (4 * threads)));
#pragma omp for schedule(dynamic, run) nowait
                    for (int tile = 0; tile < n_tiles; tile++) {
                        int jr = tile / n_slivers_a, ir = tile % n_slivers_a;
                        const float *a_sliver = packed_a + (size_t)ir * kc * MR;
                        const float *b_sliver = packed_b + (size_t)jr * kc * NR;
                        float *c = C + (size_t)(ic + ir * MR) * ldc + jc + jr * NR;
                        int rows = min_int(MR, mc - ir * MR), cols = min_int(NR, nc - jr * NR);
                        if (rows == MR && cols == NR)
                            kernel->kernel(kc, a_sliver, b_sliver, c, ldc, alpha, block_beta);
                        else
                            ragged_tile(kernel, kc, a_sliver, b_sliver, c, ldc, rows, cols, alpha,
                                        block_beta);
                    }

                    /* The next block overwrites the packed buffers: wait until
                     * everyone is done reading them. After the last block the
                     * end of the parallel region waits anyway. */
                    int last_block = jc + NC >= N && pc + KC >= K && ic + MC >= M;
                    if (!last_block) {
                        waited_since = threads > 1 ? monotonic_ns() : 0;
#pragma omp barrier
                        if (caller && threads > 1) note_barrier_wait(waited_since);
                    }
                }
            }
        }
        if (caller && threads > 1) work_done_at = monotonic_ns();
    } /* the end of the region waits for every thread too */
    if (threads > 1) note_barrier_wait(work_done_at);
}
