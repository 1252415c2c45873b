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
 *                                   (and a few lines of the next block asked for)
 *
 * The first KC block (pc == 0) applies the caller's beta; the later ones add
 * to what the earlier ones wrote (beta = 1). Plain C and OpenMP: the SIMD
 * code is all behind the GemmKernel's function pointers, one call per sliver
 * packed and per tile computed (each call does thousands of FMAs, so the
 * indirect call costs nothing measurable). */
#include "kernels/matmul_blocked.h"
#include "kernels/threads.h"

#include <math.h>
#include "util/openmp.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* How many threads a product takes is the cost model's (kernels/threads.h):
 * its M N K multiply-adds against the cost of starting and joining each
 * thread. Before the model, a fixed limit measured here with the AVX-512
 * kernel, each thread on its own block of C (below), 2 threads against 1,
 * medians of 15 interleaved samples: 32^3 0.78x, 64^3 1.14x but 32x128x64
 * 0.90x and 128x32x64 1.02x; 64x64x128 1.30x, 80^3 1.35x, 96^3 1.46x, 128^3
 * 1.66x: two threads start to pay at about 2^19 multiply-adds, where the
 * model's constants put it too. */

/* Three loop nests, by size (GEMM_AUTO):
 *
 * 1. Up to kernel->small_max_work multiply-adds (and K <= KC) a product skips
 *    packing and the register tile and runs kernel->small on one thread: all
 *    of A, B and C are in L1, and setting up tiles costs more than it saves.
 *    Measured on an Intel Xeon (Sapphire Rapids class), 1 thread, small path
 *    against the packed AVX-512 path: 8x8x16 (Q K^T of one head in chapter
 *    05) 0.23 against 1.42 microseconds, 16^3 0.25 against 1.93. On an AMD
 *    EPYC (Zen 5), small path against the direct one (2. below): AVX-512
 *    16^3 1.02x, 24^3 0.43x (the direct tile is 2.3x faster), 50x50x24 with
 *    B transposed 0.48x; AVX2 16^3 1.12x, 24^3 1.03x, 32x32x16 0.81x. Hence
 *    small_max_work = 2^12 for the AVX-512 kernel, 2^14 for the AVX2 one.
 *
 * 2. When the rows of A lie at most DIRECT_MAX_LD floats (2 KiB) apart and C
 *    has at most DIRECT_MAX_N columns, the micro-kernel reads op(A) where it
 *    is (kernel->kernel_direct) and only B is packed; when B's rows are that
 *    close too (and B is not transposed), a kernel that can (the AVX-512 one,
 *    with masked loads) reads B in place as well, and nothing is packed.
 *    Packing is a copy into the kernel's order. It pays when the operand's
 *    rows are far apart (a tile reads 6 or 8 rows of A, or KC rows of B, at
 *    the same offset, and rows 4 KiB apart fall into the same L1 set and
 *    defeat the prefetchers), and when each block of A is reread for many B
 *    slivers (N / NR of them): a packed sliver streams from L2 a little
 *    faster than rows in place, and the copy is paid once. Below both limits
 *    the copy costs more than it saves. On the AMD EPYC, 1 thread, direct
 *    against packed, interleaved medians (AVX-512; AVX2 in brackets): 64^3
 *    1.34x (1.22x), 256^3 1.21x (1.08x), 512^3 1.02x (1.0x), 2048x128x128
 *    1.14x (1.09x), 64x64x512 1.16x, tn 128x384x2048 1.07x (1.03x); but
 *    rows 4 KiB apart: 512x1024x1024 0.74x (0.91x); 1024 columns with
 *    rows 1 KiB apart, 1024x1024x256: 0.81x (1.02x). The choice is made per
 *    thread's block and does not change the bits.
 *    On an AMD EPYC of the Zen 3 generation (AVX2 only, 512 KiB of L2 per
 *    core) tall products once ran up to 2x slower with A in place
 *    (3200x288x96, one replica's [Q|K|V] = X W_QKV in chapter 07's long ViT),
 *    and for a day the AVX2 kernel read A in place only while C was under
 *    twice the L2. Then AVX2's masked stores went (lanes_avx2.h: AMD's
 *    cores run them as microcode, and every tile ended in 12 of them), and
 *    both paths ran those products at 58-84 GFLOP/s there (one core's FMA
 *    peak is 92.6), within 14% of each other, either way from run to run
 *    (bench/bench_direct.c); the long ViT's step took the same time with
 *    the rule and without it (60 steps taking turns, 3 each: 16.4, 19.1,
 *    17.2 s against 16.8, 17.1, 18.4 s of training), so the rule went.
 *
 * 3. Otherwise, the GotoBLAS loops with both operands packed. */
enum { DIRECT_MAX_LD = 512, DIRECT_MAX_N = 512 };

/* ---- Packing buffers ---------------------------------------------------------
 * Allocated on first use and grown when a bigger product comes along, then
 * reused: a fresh allocation per call would pay a page fault per 4 KiB on
 * first touch (about 2-3 microseconds each on this VM), more than the product
 * itself for the chapters' sizes. The blocking bounds them: at most MC x KC
 * floats of A and KC x NC of B, whatever the matrix sizes.
 * _Thread_local gives each thread its own: each thread of a parallel product
 * packs its block into its own buffers, and two threads may call sgemm at the
 * same time. A thread's buffers are freed when the thread ends (OpenMP ends
 * worker threads, for one, when a smaller team follows a bigger one): a
 * pthread key's destructor does that, as _Thread_local has no destructors in
 * C. 64-byte aligned: the kernels' aligned loads need up to 64, and 64 keeps
 * each sliver on whole cache lines. */
typedef struct {
    float *data;
    size_t capacity; /* in floats */
} PackBuffer;

typedef struct {
    PackBuffer a, b;
    int registered; /* with buffers_key, so that the thread's end frees them */
} PackBuffers;

static _Thread_local PackBuffers thread_buffers;
static pthread_key_t buffers_key;
static pthread_once_t buffers_key_once = PTHREAD_ONCE_INIT;

static void free_pack_buffers(void *buffers) {
    PackBuffers *own = buffers;
    free(own->a.data);
    free(own->b.data);
    *own = (PackBuffers){0};
}

static void create_buffers_key(void) {
    if (pthread_key_create(&buffers_key, free_pack_buffers) != 0) {
        fprintf(stderr, "sgemm: cannot create the key that frees packing buffers\n");
        abort();
    }
}

/* The calling thread's buffers, registered for freeing on first use. */
static PackBuffers *own_pack_buffers(void) {
    PackBuffers *own = &thread_buffers;
    if (!own->registered) {
        pthread_once(&buffers_key_once, create_buffers_key);
        if (pthread_setspecific(buffers_key, own) != 0) {
            fprintf(stderr, "sgemm: cannot register this thread's packing buffers\n");
            abort();
        }
        own->registered = 1;
    }
    return own;
}

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

/* ---- Cache blocks from the caches the CPU reports ---------------------------
 * KC, the depth of a block, is the kernel's own (256 for both kernels: the
 * same k blocks give the same bits, see matmul_avx512.c; the kernel's B
 * sliver, KC x NR floats, is 16 or 32 KiB, inside any recent x86 L1d of 32-48 KiB).
 * MC, the rows of the packed A block, is sized so that the block (MC x KC
 * floats) fills half of the L2 of one core: it is reread for every B sliver,
 * while the B sliver stream and C pass through the other half.
 * NC, the columns of the packed B panel (KC x NC floats), is sized to a
 * quarter of the L3 (shared by the cores), at most 4096 columns.
 * glibc's sysconf reads the sizes from CPUID; when it reports nothing (0 or
 * -1), the kernel's own constants stand. The bits do not depend on MC or NC
 * (each C element is summed in the same k order whatever the blocks). */
static long cache_l2_bytes, cache_l3_bytes; /* 0: not reported */
static pthread_once_t cache_sizes_once = PTHREAD_ONCE_INIT;

static void read_cache_sizes(void) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    cache_l2_bytes = l2 > 0 ? l2 : 0;
    cache_l3_bytes = l3 > 0 ? l3 : 0;
}

void gemm_blocking(const GemmKernel *kernel, int *kc, int *mc, int *nc) {
    /* sysconf asks CPUID, which a virtual machine's host answers slowly
     * (microseconds, the time of a small product): once per process. */
    pthread_once(&cache_sizes_once, read_cache_sizes);
    *kc = kernel->kc;
    *mc = kernel->mc;
    *nc = kernel->nc;
    long l2 = cache_l2_bytes, l3 = cache_l3_bytes;
    long row_bytes = (long)kernel->kc * (long)sizeof(float); /* one row of A or column of B */
    if (l2 > 0) {
        long rows = l2 / 2 / row_bytes / kernel->mr * kernel->mr;
        if (rows < 4 * kernel->mr) rows = 4 * kernel->mr;
        if (rows > 1024) rows = 1024 / kernel->mr * kernel->mr;
        *mc = (int)rows;
    }
    if (l3 > 0) {
        long cols = l3 / 4 / row_bytes / kernel->nr * kernel->nr;
        if (cols < 8 * kernel->nr) cols = 8 * kernel->nr;
        if (cols > 4096) cols = 4096 / kernel->nr * kernel->nr;
        *nc = (int)cols;
    }
}

/* ---- Fetching the next block while this one is computed --------------------
 * Packing reads a block of op(A) (or op(B)) once and writes it in the
 * kernel's order; the kernel then works on it for a long while, reading
 * only the cache. In a training step the operands are cold: an activation
 * saved in the forward pass and read again by a backward product, tens of
 * megabytes later, comes from memory, and packing it runs at the speed of
 * memory while the kernel sits idle. Between two packings, meanwhile, the
 * kernel computes and memory does nothing. So while the kernel works on one
 * block, the driver asks the cache to fetch the rows of the next block to be
 * packed (__builtin_prefetch, to L2), a few cache lines before each tile,
 * spread evenly over the block's tiles: by the time that block is packed,
 * it is read from L2. A prefetch is a hint: the bits do not change.
 *
 * Only what will be packed is fetched, and only for the kernel that asks
 * (GemmKernel.fetch_next: the bf16 one). Measured on chapter 07's long ViT
 * (bench/bench_fetch.c, its training step on two replicas, the fetching on
 * and off by turns): the wider model's step with bf16 products, which packs
 * every operand, 1.05-1.09x as fast with it (seven runs on this shared host,
 * whose memory is faster some hours than others). The float D 96 step on
 * the AVX-512 kernel, whose products read their operands in place (the
 * direct path), was
 * 0.96-0.97x when the direct path's next blocks were fetched too (the
 * hardware's own prefetcher already streams a block read in place, and the
 * extra requests only competed with it), and 0.99-1.01x without that. The
 * float kernels' big packed products, timed warm (the same operands again
 * and again, as bench_sgemm does) in a throwaway probe, were 0.95-1.02x
 * with it: their packed A block fills half of L2, and the next one fetched
 * beside it leaves little room for the rest. On the Zen 3 of "2." above,
 * while the AVX2 kernel still packed the step's tall products (the rule of
 * that day, since gone), the same step with that kernel fetching
 * (fetch_next set for the trial) was 1.036x and 1.020x, against 1.008x for
 * the same code on both sides: within that host's noise.
 * So the float kernels do not fetch.
 *
 * A Region is the part of an operand a block reads: `rows` runs of
 * `row_bytes` bytes, `stride` bytes apart. */
typedef struct {
    const char *first;
    size_t stride, row_bytes;
    int rows;
} Region;

/* Where the driver has got to in fetching a Region, a cache line at a time. */
typedef struct {
    Region region;
    int row;
    size_t offset; /* in bytes, from the start of the line that holds the row's first byte */
} Fetch;

enum { CACHE_LINE = 64 };

/* For the kernels that ask for it (GemmKernel.fetch_next), on unless a
 * benchmark turns it off (gemm_set_fetch_next, matmul_blocked.h). */
static atomic_int fetch_next_on = 1;

void gemm_set_fetch_next(int on) { atomic_store(&fetch_next_on, on != 0); }

/* The block op(X)[r0 .. r0+nr-1, c0 .. c0+nc-1] of an operand X stored
 * with leading dimension ld, op(X) = X (trans 0) or X^T (trans 1). */
static Region region_of(const float *X, int ld, int trans, int r0, int nr, int c0, int nc) {
    if (!trans) /* op(X)[r, c] = X[r * ld + c]: nr rows of nc floats */
        return (Region){(const char *)(X + (size_t)r0 * ld + c0), (size_t)ld * sizeof(float),
                        (size_t)nc * sizeof(float), nr};
    /* op(X)[r, c] = X[c * ld + r]: nc rows of nr floats */
    return (Region){(const char *)(X + (size_t)c0 * ld + r0), (size_t)ld * sizeof(float),
                    (size_t)nr * sizeof(float), nc};
}

static size_t region_lines(const Region *r) {
    return (size_t)r->rows * ((r->row_bytes + CACHE_LINE - 1) / CACHE_LINE + 1); /* +1: a row may straddle */
}

/* Asks for the next `lines` cache lines of the region (fewer at its end).
 * A row's lines run from the one holding its first byte to the one holding
 * its last (addresses as integers: a prefetch may name any address, and the
 * first line may begin before the operand does). */
static void fetch_lines(Fetch *f, size_t lines) {
    for (; lines > 0 && f->row < f->region.rows; lines--) {
        uintptr_t row = (uintptr_t)f->region.first + (uintptr_t)f->row * f->region.stride;
        uintptr_t line = row - row % CACHE_LINE + f->offset;
        __builtin_prefetch((const void *)line, 0, 2); /* for reading, into L2 */
        f->offset += CACHE_LINE;
        if (line + CACHE_LINE >= row + f->region.row_bytes) { /* that was the row's last line */
            f->row++;
            f->offset = 0;
        }
    }
}

/* The rule of "2." above, for a thread's block (matmul_blocked.h). */
int gemm_reads_a_in_place(const GemmKernel *kernel, int N, int lda) {
    return kernel->kernel_direct != NULL && lda <= DIRECT_MAX_LD && N <= DIRECT_MAX_N;
}

/* One thread's share: the five loops over C[M, N] (all of the caller's C, or
 * the rows or columns one thread was given), with this thread's own packing
 * buffers. Tiles go jr-major: one B sliver stays in L1 while the kernel walks
 * down the A slivers. */
static void blocked_one_thread(const GemmKernel *kernel, GemmPath path, int trans_a, int trans_b,
                               int M, int N, int K, float alpha, const float *A, int lda,
                               const float *B, int ldb, float beta, float *C, int ldc) {
    if (path == GEMM_AUTO && K <= kernel->kc && (double)M * N * K <= kernel->small_max_work) {
        kernel->small(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const int MR = kernel->mr, NR = kernel->nr;
    int KC, MC, NC;
    gemm_blocking(kernel, &KC, &MC, &NC);
    int direct = path == GEMM_DIRECT ? kernel->kernel_direct != NULL
                                     : path == GEMM_AUTO && gemm_reads_a_in_place(kernel, N, lda);
    int b_in_place = direct && !trans_b && kernel->b_in_place &&
                     (path == GEMM_DIRECT || ldb <= DIRECT_MAX_LD);
    int kc_max = min_int(K, KC);
    int mc_max = min_int(ceil_div(M, MR) * MR, MC);
    int nc_max = min_int(ceil_div(N, NR) * NR, NC);
    PackBuffers *own = own_pack_buffers();
    float *packed_a = direct ? NULL : pack_buffer_reserve(&own->a, (size_t)mc_max * kc_max);
    float *packed_b = b_in_place ? NULL : pack_buffer_reserve(&own->b, (size_t)nc_max * kc_max);
    /* op(A)[i, p] = A[i * a_row + p * a_col], for the direct path */
    size_t a_row = trans_a ? 1 : (size_t)lda, a_col = trans_a ? (size_t)lda : 1;

    for (int jc = 0; jc < N; jc += NC) {
        int nc = min_int(NC, N - jc);
        int n_slivers_b = ceil_div(nc, NR);
        for (int pc = 0; pc < K; pc += KC) {
            int kc = min_int(KC, K - pc);
            float block_beta = pc == 0 ? beta : 1.0f;
            for (int jr = 0; jr < n_slivers_b && !b_in_place; jr++)
                kernel->pack_b(packed_b + (size_t)jr * kc * NR, B, ldb, trans_b, pc, kc,
                               jc + jr * NR, min_int(NR, nc - jr * NR));
            for (int ic = 0; ic < M; ic += MC) {
                int mc = min_int(MC, M - ic);
                int n_slivers_a = ceil_div(mc, MR);
                if (!direct)
                    for (int ir = 0; ir < n_slivers_a; ir++)
                        kernel->pack_a(packed_a + (size_t)ir * kc * MR, A, lda, trans_a,
                                       ic + ir * MR, min_int(MR, mc - ir * MR), pc, kc);
                /* What is packed next: the next A block, or the next depth's
                 * B panel and first A block; nothing after the last, and
                 * nothing of an operand the kernel reads in place. */
                Fetch next_a = {0}, next_b = {0};
                if (!kernel->fetch_next || !atomic_load_explicit(&fetch_next_on, memory_order_relaxed)) {
                    /* leave both empty */
                } else if (ic + MC < M) {
                    if (!direct) next_a.region = region_of(A, lda, trans_a, ic + MC, min_int(MC, M - ic - MC), pc, kc);
                } else if (pc + KC < K) {
                    int kc_next = min_int(KC, K - pc - KC);
                    if (!direct) next_a.region = region_of(A, lda, trans_a, 0, min_int(MC, M), pc + KC, kc_next);
                    if (!b_in_place) next_b.region = region_of(B, ldb, trans_b, pc + KC, kc_next, jc, nc);
                }
                size_t tiles = (size_t)n_slivers_a * n_slivers_b;
                size_t lines_per_tile = (region_lines(&next_a.region) + region_lines(&next_b.region) + tiles - 1) / tiles;
                for (int jr = 0; jr < n_slivers_b; jr++) {
                    const float *b_sliver = b_in_place ? B + (size_t)pc * ldb + jc + jr * NR
                                                       : packed_b + (size_t)jr * kc * NR;
                    size_t b_row = b_in_place ? (size_t)ldb : (size_t)NR;
                    int cols = min_int(NR, nc - jr * NR);
                    for (int ir = 0; ir < n_slivers_a; ir++) {
                        fetch_lines(&next_a, lines_per_tile);
                        fetch_lines(&next_b, lines_per_tile);
                        float *c = C + (size_t)(ic + ir * MR) * ldc + jc + jr * NR;
                        int rows = min_int(MR, mc - ir * MR);
                        if (direct) {
                            const float *a = A + (size_t)(ic + ir * MR) * a_row + (size_t)pc * a_col;
                            kernel->kernel_direct(kc, a, a_row, a_col, rows, b_sliver, b_row, cols, c,
                                                  ldc, alpha, block_beta);
                            continue;
                        }
                        const float *a_sliver = packed_a + (size_t)ir * kc * MR;
                        if (rows == MR && cols == NR)
                            kernel->kernel(kc, a_sliver, b_sliver, c, ldc, alpha, block_beta);
                        else
                            ragged_tile(kernel, kc, a_sliver, b_sliver, c, ldc, rows, cols, alpha,
                                        block_beta);
                    }
                }
            }
        }
    }
}

/* Threads: C is cut into one block per thread, a grid of row_parts x
 * col_parts blocks, and each thread runs the five loops above on its block
 * with its own packing buffers: no barriers, only the end of the parallel
 * region. On 2 threads the grid is 2 x 1 or 1 x 2: two bands of whole rows or
 * whole columns.
 *
 * Why not share the packing? The earlier driver here had the threads pack one
 * A block and one B panel together, wait at a barrier, and then share out
 * the tiles. On 2 threads it was no faster than 1 at 128^3, because on this
 * machine data moves between the cores slowly: a thread reading the slivers
 * its partner packed, or writing over lines its partner read in the previous
 * call, waits for the other core's cache. Measured with timers in that driver
 * at 128^3: one thread packed everything in 10 us and computed in 37; each of
 * two threads took 16 us to pack its half and 30 to compute its half.
 * With one block each, what a thread packs is read only by itself, and the
 * same thread gets the same block on every call, so its data stays in its
 * own cache.
 *
 * The price is packing done twice: a thread packs the rows of op(A) and the
 * columns of op(B) its block needs, K * (M / row_parts + N / col_parts)
 * floats, and its neighbours pack the same rows or columns again.
 * choose_grid picks the grid that makes that smallest: on 2 threads, the
 * longer of M and N is cut, so the operand packed twice is the smaller one.
 * Block edges fall on whole tiles (multiples of MR and NR).
 *
 * The bits do not depend on the thread count: each element of C is computed
 * by one thread, by the same kernel, in the same k order (the KC blocks), and a
 * tile cut at a block edge is finished by ragged_tile with the operations of
 * the kernel's own stores. */
typedef struct {
    int row_parts, col_parts; /* row_parts * col_parts threads */
} Grid;

/* The grid of the most blocks, at most `threads`, over row_units x
 * col_units whole tiles, and of those the one that packs the fewest floats
 * per thread. On a tie (a square C on 2 threads) the rows are cut: each
 * thread then packs all of B, a copy, rather than all of A, a transpose,
 * which took 2.4x as long here (7 against 2.9 us at 128^3).
 * For each number of row parts the most column parts that fit is
 * min(threads / rows, col_units): any other grid of that many rows has
 * fewer blocks. So one pass over the row counts finds it, linear in the
 * thread count. */
static Grid choose_grid(int threads, int M, int N, int row_units, int col_units) {
    Grid best = {1, 1};
    double best_floats = (double)M + N; /* per thread, divided by K */
    int most_rows = threads < row_units ? threads : row_units;
    for (int rows = most_rows; rows >= 1; rows--) { /* most row parts first: they win ties */
        int cols = threads / rows < col_units ? threads / rows : col_units;
        double floats = (double)M / rows + (double)N / cols;
        int blocks = rows * cols, best_blocks = best.row_parts * best.col_parts;
        if (blocks > best_blocks || (blocks == best_blocks && floats < best_floats)) {
            best = (Grid){rows, cols};
            best_floats = floats;
        }
    }
    return best;
}

void gemm_choose_grid(int threads, int M, int N, int mr, int nr, int *row_parts, int *col_parts) {
    Grid g = choose_grid(threads, M, N, ceil_div(M, mr), ceil_div(N, nr));
    *row_parts = g.row_parts;
    *col_parts = g.col_parts;
}

void sgemm_blocked(const GemmKernel *kernel, int trans_a, int trans_b, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc) {
    sgemm_blocked_path(GEMM_AUTO, kernel, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                       C, ldc);
}

void sgemm_blocked_path(GemmPath path, const GemmKernel *kernel, int trans_a, int trans_b, int M,
                        int N, int K, float alpha, const float *A, int lda, const float *B,
                        int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    if (kernel->mr * kernel->nr > MAX_TILE_FLOATS) abort(); /* a kernel file's constants are wrong */

    int row_units = ceil_div(M, kernel->mr), col_units = ceil_div(N, kernel->nr);
    /* the cost model's count (1 inside a parallel region or while backed off) */
    int threads = threads_for_product(M, N, K, (double)row_units * col_units);
    Grid grid = choose_grid(threads, M, N, row_units, col_units);
    threads = grid.row_parts * grid.col_parts;
    if (threads <= 1) {
        blocked_one_thread(kernel, path, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                           ldc);
        return;
    }

    long long started_at = threads_now_ns();
    long long work_done_at = 0; /* when the calling thread finished its block */
#pragma omp parallel num_threads(threads) default(none)                                          \
    shared(kernel, path, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads,      \
               grid, row_units, col_units, work_done_at)
    {
        int t = omp_get_thread_num();
        int row_part = t / grid.col_parts, col_part = t % grid.col_parts;
        /* This thread's block: rows [i0, i1) of C and op(A), columns [j0, j1)
         * of C and op(B), cut on whole tiles. */
        int i0 = (int)((long long)row_units * row_part / grid.row_parts) * kernel->mr;
        int i1 = min_int((int)((long long)row_units * (row_part + 1) / grid.row_parts) * kernel->mr, M);
        int j0 = (int)((long long)col_units * col_part / grid.col_parts) * kernel->nr;
        int j1 = min_int((int)((long long)col_units * (col_part + 1) / grid.col_parts) * kernel->nr, N);
        const float *a_block = trans_a ? A + i0 : A + (size_t)i0 * lda;
        const float *b_block = trans_b ? B + (size_t)j0 * ldb : B + j0;
        blocked_one_thread(kernel, path, trans_a, trans_b, i1 - i0, j1 - j0, K, alpha, a_block,
                           lda, b_block, ldb, beta, C + (size_t)i0 * ldc + j0, ldc);
        if (t == 0) work_done_at = threads_now_ns();
    } /* the end of the region waits for every thread */
    threads_note_join(started_at, work_done_at);
}
