/* bench_sgemm.c - GFLOP/s of the naive loop, our AVX2 and AVX-512 kernels (or on
 * an ARM CPU, AArch64, our NEON kernel) and OpenBLAS.
 *
 *   build/bench/bench_sgemm [--out DIR] [--min-ms MS] [--reps N]
 *
 * For square sizes 64..1024 and a few shapes the chapters use, on 1 and 2
 * threads. Each figure is the median of --reps samples taken after a warm-up
 * call; one sample repeats the product until at least --min-ms milliseconds
 * have passed, so even a 64x64 product is timed over thousands of calls.
 *
 * Each of our kernels is compared with OpenBLAS using the same instruction
 * set, measured in the same process (on 1 thread the two take turns sample
 * by sample, so a change of clock or a busy spell hits both alike; on 2
 * threads each runs in a block of its own, see measure()):
 *   avx512 against "openblas", the library as installed, which picks its
 *          kernels for this CPU at load time (AVX-512 ones on a CPU that has
 *          AVX-512);
 *   avx2   against "openblas-avx2", the same library told to use its Haswell
 *          (AVX2/FMA) kernels with OPENBLAS_CORETYPE=Haswell. The core type is
 *          read when the library is loaded, so this pair is measured by a
 *          second copy of this program started with the variable set
 *          (--openblas-only prints its rows on stdout);
 *   neon   (on AArch64, instead of the two above) against "openblas" as
 *          installed, whose kernels there are NEON ones.
 *
 * The machine's peak comes from a loop of independent FMAs on registers
 * only (no memory traffic): what the FMA units can do at best, with ymm (AVX2)
 * and with zmm (AVX-512) registers, or NEON's on AArch64. Each figure's
 * "peak_fraction" is its share of the peak of the instruction set it uses
 * (AVX-512 for avx512 and for openblas when its kernels are AVX-512 ones,
 * NEON on AArch64, AVX2 for the others).
 *
 * Writes DIR/sgemm.tsv (impl threads M N K gflops op peak_fraction
 * vs_openblas: for avx2, avx512 and neon, the ratio to the same-instruction-set
 * OpenBLAS measured beside it, '-' for the others; impl "avx2-paired" is our
 * AVX2 kernel as measured in the OpenBLAS-AVX2 process, the other half of
 * avx2's ratio) and
 * DIR/sgemm.gp, a gnuplot script for GFLOP/s against size (bench/run.sh
 * renders it). Prints figures and ratios; never passes or fails. */
#include <cblas.h>
#if defined(__aarch64__)
#include <arm_neon.h>
#else
#include <immintrin.h>
#endif
#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_fma.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"

typedef struct {
    int M, N, K;
    int trans_a, trans_b;
    const char *note; /* where the shape comes from */
} Shape;

static const Shape SHAPES[] = {
    {64, 64, 64, 0, 0, "square"},
    {128, 128, 128, 0, 0, "square"},
    {256, 256, 256, 0, 0, "square"},
    {512, 512, 512, 0, 0, "square"},
    {1024, 1024, 1024, 0, 0, "square"},
    {64, 384, 128, 0, 0, "QKV projection: 64 tokens, d=128 -> 3*128"},
    {2048, 128, 128, 0, 0, "linear layer on a 2048-token batch"},
    {64, 64, 512, 0, 0, "small output, long reduction"},
    {256, 256, 64, 0, 1, "attention scores Q K^T: T=256, d=64"},
    {128, 384, 2048, 1, 0, "weight gradient X^T dY over 2048 rows"},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

enum { IMPL_NAIVE, IMPL_AVX2, IMPL_AVX512, IMPL_NEON, IMPL_OPENBLAS, IMPL_OPENBLAS_AVX2, N_IMPLS };
static const char *IMPL_NAMES[N_IMPLS] = {"naive", "avx2", "avx512", "neon", "openblas", "openblas-avx2"};

/* Naive above this many multiply-adds takes seconds per call: skipped. */
#define NAIVE_MAX_WORK (512.0 * 512.0 * 512.0)

static const char *op_name(const Shape *s) {
    static const char *names[4] = {"nn", "nt", "tn", "tt"};
    return names[s->trans_a * 2 + s->trans_b];
}

static void run_once(int impl, const Shape *s, const float *A, const float *B, float *C) {
    int lda = s->trans_a ? s->M : s->K, ldb = s->trans_b ? s->K : s->N;
    switch (impl) {
    case IMPL_NAIVE:
        sgemm_naive(s->trans_a, s->trans_b, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
        break;
    case IMPL_AVX2:
        sgemm_avx2(s->trans_a, s->trans_b, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
        break;
    case IMPL_AVX512:
        sgemm_avx512(s->trans_a, s->trans_b, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
        break;
    case IMPL_NEON: /* sgemm_neon exists only on AArch64, where use[IMPL_NEON] is set */
#if defined(__aarch64__)
        sgemm_neon(s->trans_a, s->trans_b, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
#endif
        break;
    default:
        cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                    s->trans_b ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, A, lda, B,
                    ldb, 0.0f, C, s->N);
    }
}

/* Median GFLOP/s of each implementation with use[impl] set, over `reps`
 * samples of >= min_seconds each.
 *
 * On 1 thread the implementations take turns sample by sample, so a slow
 * spell on this shared machine (another process, a clock change) hits all of
 * them alike instead of one.
 *
 * On 2 threads taking turns measures the wrong thing. OpenBLAS's worker
 * threads and OpenMP's keep polling for a while after a call, waiting for
 * the next one; a sample of the other library taken during that time shares
 * the CPU with a polling thread, and its threads wait for a switched-out
 * thread: measured here, our 128^3 product fell from ~75 to 0.4 GFLOP/s right
 * after OpenBLAS calls (with our fall-back to one thread disabled). A pause
 * long enough for the pollers to give up (150 ms) is no cure either: right
 * after it this VM runs slower for a while (our 1-thread 128^3 measured 77-90
 * GFLOP/s after 150 ms pauses, 99-101 after 0-20 ms ones). So on 2 threads
 * each sample is a block of its own: a 150 ms pause, 200 ms of untimed calls
 * to reach the steady state, then the timed sample; the implementations take
 * turns block by block.
 * A program that uses only one of the two libraries never sees any of this. */
/* GFLOP/s of `calls` back-to-back calls of one implementation. */
static double time_sample(int impl, const Shape *s, const float *A, const float *B, float *C,
                          long calls) {
    double t0 = bench_now_seconds();
    for (long c = 0; c < calls; c++) run_once(impl, s, A, B, C);
    return 2.0 * s->M * s->N * s->K * calls / (bench_now_seconds() - t0) * 1e-9;
}

static void measure(const int use[N_IMPLS], int threads, const Shape *s, const float *A,
                    const float *B, float *C, int reps, double min_seconds,
                    double gflops[N_IMPLS]) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    long calls[N_IMPLS] = {0};
    static double samples[N_IMPLS][64];
    if (reps > 64) reps = 64;
    for (int impl = 0; impl < N_IMPLS; impl++) {
        if (!use[impl]) continue;
        run_once(impl, s, A, B, C); /* warm-up: caches, packing buffers, thread pool */
        double t0 = bench_now_seconds();
        run_once(impl, s, A, B, C);
        double one = bench_now_seconds() - t0;
        calls[impl] = one > 0 ? (long)ceil(min_seconds / one) : 1000;
        if (calls[impl] < 1) calls[impl] = 1;
    }
    if (threads == 1) {
        for (int r = 0; r < reps; r++)
            for (int impl = 0; impl < N_IMPLS; impl++) {
                if (!use[impl]) continue;
                samples[impl][r] = time_sample(impl, s, A, B, C, calls[impl]);
            }
    } else {
        /* One sample per block, the implementations taking turns block by
         * block: a slow spell of the VM (they last seconds) then falls on a
         * block or two of each implementation rather than on all of one
         * implementation's samples. */
        for (int r = 0; r < reps; r++)
            for (int impl = 0; impl < N_IMPLS; impl++) {
                if (!use[impl]) continue;
                usleep(150 * 1000);
                double t0 = bench_now_seconds();
                while (bench_now_seconds() - t0 < 0.2) run_once(impl, s, A, B, C);
                samples[impl][r] = time_sample(impl, s, A, B, C, calls[impl]);
            }
    }
    for (int impl = 0; impl < N_IMPLS; impl++) {
        if (!use[impl]) continue;
        qsort(samples[impl], reps, sizeof samples[impl][0], bench_compare_doubles);
        gflops[impl] = samples[impl][reps / 2];
    }
}

/* ---- The machine's FMA peak: bench_fma.h ---- */

/* ---- Output ----------------------------------------------------------------------- */

static int write_gnuplot_script(const char *dir) {
    AtomicFile gp_file;
    FILE *f = bench_open_result(&gp_file, "bench_sgemm", dir, "sgemm.gp");
    if (!f) return -1;
    fprintf(f,
            "# sgemm.gp - GFLOP/s against size for square products (data: sgemm.tsv).\n"
            "# Render: cd %s && gnuplot sgemm.gp   (writes sgemm.png)\n"
            "set terminal pngcairo size 1000,560 noenhanced\n"
            "set output 'sgemm.png'\n"
            "set datafile separator '\\t'\n"
            "set title 'SGEMM, square M = N = K, single precision'\n"
            "set xlabel 'size'\n"
            "set ylabel 'GFLOP/s'\n"
            "set logscale x 2\n"
            "set xrange [48:1400]\n"
            "set xtics (64, 128, 256, 512, 1024)\n"
            "set yrange [0:*]\n"
            "set key outside right\n"
            "set grid\n"
            "sq(impl, t) = (strcol(1) eq impl && $2 == t && $3 == $4 && $4 == $5 && strcol(7) eq 'nn') ? $6 : 1/0\n"
            "plot \\\n",
            dir);
    const char *colors[N_IMPLS] = {"#999999", "#d62728", "#9467bd", "#ff7f0e", "#1f77b4", "#2ca02c"};
    /* the implementations of this CPU: x86 all but neon; AArch64 naive, neon, openblas */
    int shown[N_IMPLS], n_shown = 0;
    for (int impl = 0; impl < N_IMPLS; impl++)
        if (cpu_has_neon() ? impl == IMPL_NAIVE || impl == IMPL_NEON || impl == IMPL_OPENBLAS : impl != IMPL_NEON)
            shown[n_shown++] = impl;
    for (int k = 0; k < n_shown; k++)
        for (int t = 1; t <= 2; t++)
            fprintf(f, "  'sgemm.tsv' skip 1 using 3:(sq('%s', %d)) with linespoints lc rgb '%s' dt %d pt %d title '%s, %d thread%s'%s\n",
                    IMPL_NAMES[shown[k]], t, colors[shown[k]], t == 1 ? 1 : 2, t == 1 ? 7 : 5,
                    IMPL_NAMES[shown[k]], t, t == 1 ? "" : "s",
                    k == n_shown - 1 && t == 2 ? "" : ", \\");
    return bench_close_result(&gp_file, "bench_sgemm");
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_sgemm [--out DIR] [--min-ms MS] [--reps N]\n"
            "  --out DIR     where to write sgemm.tsv and sgemm.gp (default bench/results)\n"
            "  --min-ms MS   minimum length of one timed sample (default 50)\n"
            "  --reps N      samples per figure, the median is reported (default 9, max 64)\n");
}

int main(int argc, char **argv) {
    const char *out_dir = "bench/results";
    double min_ms = 50.0;
    int reps = 9, openblas_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (strcmp(argv[i], "--min-ms") == 0 && i + 1 < argc) {
            if (bench_positive_arg("bench_sgemm", "--min-ms", argv[++i], &min_ms) != 0) return 2;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            if (bench_int_arg("bench_sgemm", "--reps", argv[++i], 1, 64, &reps) != 0) return 2;
        } else if (strcmp(argv[i], "--openblas-only") == 0) {
            openblas_only = 1; /* internal: the OPENBLAS_CORETYPE=Haswell child */
        } else {
            fprintf(stderr, "bench_sgemm: unknown or incomplete argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    const int has_neon = cpu_has_neon();
    if (!openblas_only && !cpu_has_avx2_fma() && !has_neon) {
        fprintf(stderr, "bench_sgemm: this CPU has neither AVX2/FMA nor NEON; nothing to compare\n");
        return 1;
    }

    /* Inputs big enough for every shape, filled once. */
    size_t max_floats = 0;
    for (int s = 0; s < N_SHAPES; s++) {
        size_t a = (size_t)SHAPES[s].M * SHAPES[s].K, b = (size_t)SHAPES[s].K * SHAPES[s].N,
               c = (size_t)SHAPES[s].M * SHAPES[s].N;
        if (a > max_floats) max_floats = a;
        if (b > max_floats) max_floats = b;
        if (c > max_floats) max_floats = c;
    }
    float *A = aligned_alloc(64, max_floats * sizeof(float));
    float *B = aligned_alloc(64, max_floats * sizeof(float));
    float *C = aligned_alloc(64, max_floats * sizeof(float));
    if (!A || !B || !C) {
        fprintf(stderr, "bench_sgemm: out of memory\n");
        return 1;
    }
    unsigned seed = 12345;
    for (size_t i = 0; i < max_floats; i++) {
        seed = seed * 1664525u + 1013904223u;
        A[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
        seed = seed * 1664525u + 1013904223u;
        B[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
        C[i] = 0.0f;
    }
    double min_seconds = min_ms * 1e-3;
    double load_at_start = bench_load_average();

    if (openblas_only) {
        /* The OPENBLAS_CORETYPE=Haswell child: our AVX2 kernel and OpenBLAS's
         * AVX2 kernels, taking turns. One line per shape and thread count. */
        int use[N_IMPLS] = {0};
        use[IMPL_AVX2] = use[IMPL_OPENBLAS] = 1;
        for (int s = 0; s < N_SHAPES; s++)
            for (int t = 1; t <= 2; t++) {
                double g[N_IMPLS] = {0};
                measure(use, t, &SHAPES[s], A, B, C, reps, min_seconds, g);
                printf("%d\t%d\t%.3f\t%.3f\n", s, t, g[IMPL_AVX2], g[IMPL_OPENBLAS]);
                fflush(stdout);
            }
        if (threads_busy_backoffs() > 0)
            fprintf(stderr, "note: in the avx2 / ob-avx2 run, %ld fall-back(s) to one thread: another "
                    "program was using the CPU\n", threads_busy_backoffs());
        return 0;
    }

    /* gflops[shape][threads-1][impl]; 0 = not measured. avx2_beside_ob_avx2
     * is our AVX2 kernel as measured in the child, beside OpenBLAS's AVX2
     * kernels: the ratio avx2 / openblas-avx2 comes from that pair. */
    static double gflops[N_SHAPES][2][N_IMPLS];
    static double avx2_beside_ob_avx2[N_SHAPES][2];

    /* OpenBLAS restricted to its AVX2 kernels: a second copy of this program. */
    char self[1024];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    int have_openblas_avx2 = 0;
    if (len > 0 && !has_neon) { /* x86 only: OpenBLAS's Haswell kernels */
        self[len] = '\0';
        char command[1400];
        snprintf(command, sizeof command,
                 "OPENBLAS_CORETYPE=Haswell '%s' --openblas-only --min-ms %g --reps %d", self,
                 min_ms, reps);
        fprintf(stderr, "measuring OpenBLAS with its AVX2 (Haswell) kernels beside ours...\n");
        FILE *child = popen(command, "r");
        if (child) {
            int s, t;
            double ours, theirs;
            while (fscanf(child, "%d %d %lf %lf", &s, &t, &ours, &theirs) == 4)
                if (s >= 0 && s < N_SHAPES && t >= 1 && t <= 2) {
                    avx2_beside_ob_avx2[s][t - 1] = ours;
                    gflops[s][t - 1][IMPL_OPENBLAS_AVX2] = theirs;
                    have_openblas_avx2 = 1;
                }
            pclose(child);
        }
    }
    if (!have_openblas_avx2 && !has_neon)
        fprintf(stderr, "note: the OPENBLAS_CORETYPE=Haswell run failed; skipped\n");

    fprintf(stderr, "measuring the FMA peak...\n");
    double peak_avx2[2] = {0, 0}, peak_avx512[2] = {0, 0}, peak_neon[2] = {0, 0};
    int has_avx512 = cpu_has_avx512f();
    for (int t = 1; t <= 2; t++) {
        if (has_neon) peak_neon[t - 1] = fma_peak(t, 4);
        else peak_avx2[t - 1] = fma_peak(t, 8);
        if (has_avx512) peak_avx512[t - 1] = fma_peak(t, 16);
    }
    /* OpenBLAS as installed uses AVX-512 when its kernel set is one of the
     * AVX-512 ones (SkylakeX, Cooperlake, Sapphire Rapids). */
    const char *core = openblas_get_corename();
    int openblas_is_avx512 = has_avx512 && (strcasecmp(core, "skylakex") == 0 ||
                                            strcasecmp(core, "cooperlake") == 0 ||
                                            strcasecmp(core, "sapphirerapids") == 0);
    double *peak_simd = has_neon ? peak_neon : peak_avx2; /* the naive loop's, against this CPU's SIMD */
    double *peak_of[N_IMPLS] = {peak_simd, peak_avx2, has_avx512 ? peak_avx512 : peak_avx2, peak_neon,
                                openblas_is_avx512 ? peak_avx512 : peak_simd, peak_avx2};

    for (int s = 0; s < N_SHAPES; s++) {
        const Shape *sh = &SHAPES[s];
        fprintf(stderr, "measuring %s %dx%dx%d...\n", op_name(sh), sh->M, sh->N, sh->K);
        if (s == N_SHAPES / 2) { /* the clock of this VM drifts: take the peak twice, keep the best */
            for (int t = 1; t <= 2; t++) {
                double p = fma_peak(t, has_neon ? 4 : 8), p512 = has_avx512 ? fma_peak(t, 16) : 0.0;
                if (p > peak_simd[t - 1]) peak_simd[t - 1] = p;
                if (p512 > peak_avx512[t - 1]) peak_avx512[t - 1] = p512;
            }
        }
        int use[N_IMPLS] = {0};
        use[IMPL_NAIVE] = (double)sh->M * sh->N * sh->K <= NAIVE_MAX_WORK;
        use[IMPL_OPENBLAS] = 1;
        use[IMPL_AVX2] = cpu_has_avx2_fma();
        use[IMPL_AVX512] = has_avx512;
        use[IMPL_NEON] = has_neon;
        for (int t = 1; t <= 2; t++) measure(use, t, sh, A, B, C, reps, min_seconds, gflops[s][t - 1]);
    }

    /* The table. */
    printf("\nSGEMM, GFLOP/s (median of %d samples of >= %g ms each); CPU: %d cores\n", reps,
           min_ms, omp_get_num_procs());
    if (load_at_start > 0.5)
        printf("note: load average %.2f at start: other processes shared the CPU, figures are low "
               "and noisy\n", load_at_start);
    printf("OpenBLAS %s, kernels picked at load: %s\n", OPENBLAS_VERSION, core);
    printf("FMA peak (register-only loop): %s %.1f GFLOP/s on 1 thread, %.1f on 2", has_neon ? "NEON" : "AVX2",
           peak_simd[0], peak_simd[1]);
    if (has_avx512) printf("; AVX-512 %.1f and %.1f", peak_avx512[0], peak_avx512[1]);
    printf("\n\n");
    if (has_neon) { /* AArch64: naive, neon, OpenBLAS's NEON kernels */
        printf("%-4s %-15s %3s %6s %6s %9s %14s %8s\n", "op", "M x N x K", "thr", "naive", "neon", "openblas",
               "neon/openblas", "of peak");
        for (int s = 0; s < N_SHAPES; s++) {
            const Shape *sh = &SHAPES[s];
            char dims[32];
            snprintf(dims, sizeof dims, "%dx%dx%d", sh->M, sh->N, sh->K);
            for (int t = 1; t <= 2; t++) {
                double *g = gflops[s][t - 1];
                char naive[16] = "-";
                if (g[IMPL_NAIVE] > 0) snprintf(naive, sizeof naive, "%.1f", g[IMPL_NAIVE]);
                printf("%-4s %-15s %3d %6s %6.1f %9.1f %13.2fx %7.0f%%\n", op_name(sh), dims, t, naive,
                       g[IMPL_NEON], g[IMPL_OPENBLAS], g[IMPL_NEON] / g[IMPL_OPENBLAS],
                       100.0 * g[IMPL_NEON] / peak_neon[t - 1]);
            }
        }
    } else { /* x86: naive, avx2, avx512, OpenBLAS as installed and with its AVX2 kernels */
        printf("%-4s %-15s %3s %6s %6s %7s %9s %8s %14s %13s %8s\n", "op", "M x N x K", "thr", "naive",
               "avx2", "avx512", "openblas", "ob-avx2", "avx512/openblas", "avx2/ob-avx2", "of peak");
        for (int s = 0; s < N_SHAPES; s++) {
            const Shape *sh = &SHAPES[s];
            char dims[32];
            snprintf(dims, sizeof dims, "%dx%dx%d", sh->M, sh->N, sh->K);
            for (int t = 1; t <= 2; t++) {
                double *g = gflops[s][t - 1];
                char naive[16] = "-", avx512[16] = "-", ob_avx2[16] = "-", ratio512[16] = "-",
                     ratio2[16] = "-";
                if (g[IMPL_NAIVE] > 0) snprintf(naive, sizeof naive, "%.1f", g[IMPL_NAIVE]);
                if (g[IMPL_AVX512] > 0) {
                    snprintf(avx512, sizeof avx512, "%.1f", g[IMPL_AVX512]);
                    snprintf(ratio512, sizeof ratio512, "%.2fx", g[IMPL_AVX512] / g[IMPL_OPENBLAS]);
                }
                if (g[IMPL_OPENBLAS_AVX2] > 0) {
                    snprintf(ob_avx2, sizeof ob_avx2, "%.1f", g[IMPL_OPENBLAS_AVX2]);
                    snprintf(ratio2, sizeof ratio2, "%.2fx",
                             avx2_beside_ob_avx2[s][t - 1] / g[IMPL_OPENBLAS_AVX2]);
                }
                int best = g[IMPL_AVX512] > 0 ? IMPL_AVX512 : IMPL_AVX2;
                printf("%-4s %-15s %3d %6s %6.1f %7s %9.1f %8s %15s %13s %7.0f%%\n", op_name(sh), dims, t,
                       naive, g[IMPL_AVX2], avx512, g[IMPL_OPENBLAS], ob_avx2, ratio512, ratio2,
                       100.0 * g[best] / peak_of[best][t - 1]);
            }
        }
    }
    if (threads_busy_backoffs() > 0)
        printf("\nnote: %ld time(s) a thread of ours was twice found switched out (late waits), and the\n"
               "products of the next quarter second ran on one thread (common/kernels/threads.c): some 2-thread\n"
               "figures are partly 1-thread figures. Something else was using the CPU.\n", threads_busy_backoffs());
    if (has_neon)
        printf("\nopenblas = OpenBLAS as installed (%s kernels). 'of peak' = neon / the NEON FMA peak\n"
               "on the same thread count.\n", core);
    else
        printf("\nopenblas = OpenBLAS as installed (%s kernels); ob-avx2 = OPENBLAS_CORETYPE=Haswell,\n"
               "its AVX2/FMA kernels, measured beside our avx2 kernel in a second process (the ratio\n"
               "avx2/ob-avx2 is from that pair). 'of peak' = our fastest kernel / the FMA peak of its\n"
               "instruction set on the same thread count.\n", core);

    /* The data file. */
    AtomicFile tsv_file;
    FILE *f = bench_open_result(&tsv_file, "bench_sgemm", out_dir, "sgemm.tsv");
    if (!f) return 1;
    fprintf(f, "impl\tthreads\tM\tN\tK\tgflops\top\tpeak_fraction\tvs_openblas\n");
    for (int t = 1; t <= 2; t++)
        fprintf(f, "fma-peak-%s\t%d\t0\t0\t0\t%.3f\t-\t1.000\t-\n", has_neon ? "neon" : "avx2", t, peak_simd[t - 1]);
    if (has_avx512)
        for (int t = 1; t <= 2; t++)
            fprintf(f, "fma-peak-avx512\t%d\t0\t0\t0\t%.3f\t-\t1.000\t-\n", t, peak_avx512[t - 1]);
    for (int impl = 0; impl < N_IMPLS; impl++)
        for (int t = 1; t <= 2; t++)
            for (int s = 0; s < N_SHAPES; s++) {
                double g = gflops[s][t - 1][impl];
                if (g <= 0) continue;
                char vs[16] = "-";
                if ((impl == IMPL_AVX512 || impl == IMPL_NEON) && gflops[s][t - 1][IMPL_OPENBLAS] > 0)
                    snprintf(vs, sizeof vs, "%.3f", g / gflops[s][t - 1][IMPL_OPENBLAS]);
                if (impl == IMPL_AVX2 && gflops[s][t - 1][IMPL_OPENBLAS_AVX2] > 0)
                    snprintf(vs, sizeof vs, "%.3f",
                             avx2_beside_ob_avx2[s][t - 1] / gflops[s][t - 1][IMPL_OPENBLAS_AVX2]);
                fprintf(f, "%s\t%d\t%d\t%d\t%d\t%.3f\t%s\t%.3f\t%s\n", IMPL_NAMES[impl], t,
                        SHAPES[s].M, SHAPES[s].N, SHAPES[s].K, g, op_name(&SHAPES[s]),
                        g / peak_of[impl][t - 1], vs);
            }
    /* Our AVX2 kernel as measured beside OpenBLAS's AVX2 kernels (the pair
     * behind avx2's vs_openblas). */
    for (int t = 1; t <= 2; t++)
        for (int s = 0; s < N_SHAPES; s++) {
            double g = avx2_beside_ob_avx2[s][t - 1];
            if (g <= 0 || gflops[s][t - 1][IMPL_OPENBLAS_AVX2] <= 0) continue;
            fprintf(f, "avx2-paired\t%d\t%d\t%d\t%d\t%.3f\t%s\t%.3f\t%.3f\n", t, SHAPES[s].M,
                    SHAPES[s].N, SHAPES[s].K, g, op_name(&SHAPES[s]), g / peak_avx2[t - 1],
                    g / gflops[s][t - 1][IMPL_OPENBLAS_AVX2]);
        }
    if (bench_close_result(&tsv_file, "bench_sgemm") != 0 || write_gnuplot_script(out_dir) != 0)
        return 1;
    printf("wrote %s/sgemm.tsv and %s/sgemm.gp\n", out_dir, out_dir);
    free(A);
    free(B);
    free(C);
    return 0;
}
