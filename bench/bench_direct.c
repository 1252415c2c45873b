/* bench_direct.c - reading A in place or packing it: which is faster, and
 * which one the driver's rule picks (kernels/matmul_blocked.c, "2.").
 *
 *   build/bench/bench_direct [--out DIR] [--reps N]
 *
 * For each product below and each SIMD kernel this CPU has (AVX2, AVX-512),
 * on 1 thread: the blocked driver forced down the direct path (GEMM_DIRECT:
 * op(A) read where it is, only B packed) and down the packed path
 * (GEMM_PACKED: both packed), taking turns sample by sample; each figure is
 * the median of --reps samples (default 7) of at least 20 ms. Beside them,
 * which path GEMM_AUTO takes (gemm_reads_a_in_place) and whether that was
 * the faster one here. The products: square ones, the shapes of the sgemm
 * benchmark, and one replica's products in chapter 07's D 96 long ViT (64 images
 * of 50 tokens: 3200 rows; D 96, F 192: the projections [Q|K|V] and O, the
 * MLP's two layers, their input gradients (nt) and a weight gradient (tn),
 * which add to C as the backward pass does, beta = 1), then tall products
 * of 1024-1600 rows (C of 1-1.8 MiB: where an earlier rule of the AVX2
 * kernel changed paths, matmul_blocked.c, "2.").
 *
 * The two paths must give the same bits (the same chain of FMAs per
 * element); the program checks that on every product and fails if not.
 * Writes DIR/direct.tsv: a first line "# machine: ..." (the CPU's name and
 * family and L2 size: the figures differ most between CPUs, and
 * tools/perf_table.sh prints it above the table), then op M N K kernel
 * direct_gflops packed_gflops auto_path. Never passes or fails on a time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "util/util.h"

enum { MAX_REPS = 64 };

typedef struct {
    int trans_a, trans_b, M, N, K;
    float beta; /* 1: C += (the backward products' convention), 0: C = */
    const char *what;
} Product;

static const Product PRODUCTS[] = {
    {0, 0, 64, 64, 64, 0, "square"},
    {0, 0, 256, 256, 256, 0, "square"},
    {0, 0, 512, 512, 512, 0, "square"},
    {0, 0, 2048, 128, 128, 0, "sgemm benchmark"},
    {1, 0, 128, 384, 2048, 0, "sgemm benchmark"},
    {0, 0, 64, 384, 128, 0, "sgemm benchmark"},
    {0, 0, 3200, 288, 96, 0, "ViT long: [Q|K|V] = X W_QKV"},
    {0, 0, 3200, 96, 96, 0, "ViT long: O = Y W_O"},
    {0, 0, 3200, 192, 96, 0, "ViT long: MLP in"},
    {0, 0, 3200, 96, 192, 0, "ViT long: MLP out"},
    {0, 1, 3200, 96, 288, 1, "ViT long: dX of [Q|K|V]"},
    {0, 1, 3200, 192, 96, 1, "ViT long: dH of MLP out"},
    {1, 0, 96, 288, 3200, 1, "ViT long: dW_QKV"},
    {0, 0, 1024, 256, 96, 0, "tall: C 1 MiB"},
    {0, 0, 1024, 288, 96, 0, "tall: C 1.1 MiB"},
    {0, 0, 1600, 288, 96, 0, "tall: C 1.8 MiB"},
};

/* One product `count` times down `path`; milliseconds. */
static double timed(GemmPath path, const GemmKernel *kernel, const Product *p, int count, const float *A,
                    const float *B, float *C) {
    int lda = p->trans_a ? p->M : p->K, ldb = p->trans_b ? p->K : p->N;
    double t0 = bench_now_ms();
    for (int i = 0; i < count; i++)
        sgemm_blocked_path(path, kernel, p->trans_a, p->trans_b, p->M, p->N, p->K, 1.0f, A, lda, B, ldb, p->beta, C,
                           p->N);
    return bench_now_ms() - t0;
}

/* "AMD EPYC, family 25, L2 512 KiB per core": what the figures depend on. */
static void machine_line(char *out, size_t size) {
    char name[128] = "unknown CPU", family[16] = "?", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *value = colon + 1 + strspn(colon + 1, " \t");
        value[strcspn(value, "\n")] = '\0';
        if (strncmp(line, "model name", 10) == 0 && strcmp(name, "unknown CPU") == 0)
            snprintf(name, sizeof name, "%s", value);
        else if (strncmp(line, "cpu family", 10) == 0 && strcmp(family, "?") == 0)
            snprintf(family, sizeof family, "%s", value);
    }
    if (f) fclose(f);
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    snprintf(out, size, "%s, family %s, L2 %ld KiB per core", name, family, l2 > 0 ? l2 / 1024 : 0);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), bench_compare_doubles);
    return x[n / 2];
}

int main(int argc, char **argv) {
    const char *program = "bench_direct", *out_dir = "bench/results";
    int reps = 7;
    if (bench_out_reps_args(program, argc, argv, &out_dir, &reps, MAX_REPS) < 0) return 2;
    threads_set(1);

    const GemmKernel *kernels[2];
    int n_kernels = 0;
    if (cpu_has_avx2_fma()) kernels[n_kernels++] = gemm_kernel_avx2();
    if (cpu_has_avx512f()) kernels[n_kernels++] = gemm_kernel_avx512();
    if (n_kernels == 0) {
        printf("%s: this CPU has neither AVX2 + FMA nor AVX-512: nothing to measure\n", program);
        return 0;
    }

    size_t max_a = 0, max_b = 0, max_c = 0;
    for (size_t i = 0; i < sizeof PRODUCTS / sizeof PRODUCTS[0]; i++) {
        const Product *p = &PRODUCTS[i];
        if ((size_t)p->M * p->K > max_a) max_a = (size_t)p->M * p->K;
        if ((size_t)p->K * p->N > max_b) max_b = (size_t)p->K * p->N;
        if ((size_t)p->M * p->N > max_c) max_c = (size_t)p->M * p->N;
    }
    float *A = xmalloc(sizeof(float) * max_a), *B = xmalloc(sizeof(float) * max_b);
    float *C_direct = xmalloc(sizeof(float) * max_c), *C_packed = xmalloc(sizeof(float) * max_c);
    for (size_t i = 0; i < max_a; i++) A[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < max_b; i++) B[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;

    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, program, out_dir, "direct.tsv");
    if (!tsv) return 1;
    char machine[256];
    machine_line(machine, sizeof machine);
    fprintf(tsv, "# machine: %s\n", machine);
    fprintf(tsv, "op\tM\tN\tK\tkernel\tdirect_gflops\tpacked_gflops\tauto_path\n");
    printf("%s: A read in place (direct) or packed, 1 thread, the two taking turns, median of %d samples "
           "(load average %.2f)\n  on %s\n\n", program, reps, bench_load_average(), machine);
    printf("  %-2s %-16s %-12s | %8s | %8s | %14s | %-6s | %s\n", "op", "M x N x K", "kernel", "direct", "packed",
           "packed/direct", "auto", "product");
    for (int k = 0; k < n_kernels; k++) {
        const GemmKernel *kernel = kernels[k];
        for (size_t i = 0; i < sizeof PRODUCTS / sizeof PRODUCTS[0]; i++) {
            const Product *p = &PRODUCTS[i];
            size_t c_size = (size_t)p->M * p->N;
            double flops = 2.0 * p->M * p->N * p->K;
            memset(C_direct, 0, sizeof(float) * c_size);
            memset(C_packed, 0, sizeof(float) * c_size);
            /* How many products make a sample of at least 20 ms, from one
             * timed product of each path (which also fills both C's). */
            double once = fmax(timed(GEMM_DIRECT, kernel, p, 1, A, B, C_direct),
                               timed(GEMM_PACKED, kernel, p, 1, A, B, C_packed));
            if (memcmp(C_direct, C_packed, sizeof(float) * c_size) != 0) {
                fprintf(stderr, "%s: %s %dx%dx%d: the direct and packed paths differ: they must give the same bits\n",
                        program, kernel->name, p->M, p->N, p->K);
                return 1;
            }
            int count = once > 0.0 ? (int)ceil(20.0 / once) : 1000;
            if (count < 1) count = 1;
            static double samples[2][MAX_REPS];
            for (int r = 0; r < reps; r++) {
                samples[0][r] = timed(GEMM_DIRECT, kernel, p, count, A, B, C_direct) / count;
                samples[1][r] = timed(GEMM_PACKED, kernel, p, count, A, B, C_packed) / count;
            }
            double t_direct = median(samples[0], reps), t_packed = median(samples[1], reps);
            int lda = p->trans_a ? p->M : p->K;
            int in_place = gemm_reads_a_in_place(kernel, p->N, lda);
            int right = in_place ? t_direct <= t_packed : t_packed <= t_direct;
            char op[3] = {p->trans_a ? 't' : 'n', p->trans_b ? 't' : 'n', '\0'}, shape[32];
            snprintf(shape, sizeof shape, "%dx%dx%d", p->M, p->N, p->K);
            printf("  %-2s %-16s %-12s | %8.1f | %8.1f | %13.2fx | %-6s | %s%s\n", op, shape, kernel->name,
                   flops / t_direct * 1e-6, flops / t_packed * 1e-6, t_direct / t_packed,
                   in_place ? "direct" : "packed", p->what, right ? "" : " (the slower here)");
            fprintf(tsv, "%s\t%d\t%d\t%d\t%s\t%.2f\t%.2f\t%s\n", op, p->M, p->N, p->K, kernel->name,
                    flops / t_direct * 1e-6, flops / t_packed * 1e-6, in_place ? "direct" : "packed");
        }
    }
    printf("\n  direct, packed: GFLOP/s; packed/direct above 1: packing A is faster; auto: the path GEMM_AUTO takes\n");
    free(A);
    free(B);
    free(C_direct);
    free(C_packed);
    if (bench_close_result(&tsv_file, program) < 0) return 1;
    printf("  %s/direct.tsv\n", out_dir);
    return 0;
}
