/* threads.c - the thread count (threads_set) and the cost model every
 * parallel region asks for its threads (threads.h says the model).
 *
 * THREAD_COSTS below are measured, not guessed, by
 *     make build/bench/bench_threads && ./build/bench/bench_threads
 * which prints this table's line (bench/bench_threads.c says how each figure
 * is taken). The figures below: the 2-core AVX-512 development machine (an
 * AMD EPYC of the Zen 5 class, a virtual machine), two runs on the idle
 * machine, each figure the quietest of its batches, rounded:
 *   fork_join_ns   2895, 3058     an empty 2-thread region
 *   moved_byte_ns  0.1120, 0.1138 128^3 products on A, B just written, C read
 *                                 after (1 and 2 threads both 27.7-27.9 us)
 *   mac_ns         0.0088, 0.0089 256^3, 1 thread
 *   small_mac_ns   0.0751, 0.0788 8x8x16 and 8x16x8, 1 thread
 *   naive_mac_ns   0.681, 0.748   64^3 naive, 1 thread
 *   gelu_ns        1.080, 1.126   GELU (erf form) over 4096 values, 1 thread
 *   softmax_ns     0.714, 0.749   softmax rows of 64
 *   layernorm_ns   0.369, 0.387   LayerNorm rows of 128
 *   adam_ns        1.411, 1.470   Adam over 4096 parameters
 * So here two threads pay from products of about 175^3, a GELU pass from
 * 32768 values, Adam from 16384 parameters, softmax and LayerNorm's forward
 * pass never (bench_threads prints these). On a machine of 2 cores the cost
 * of each further thread cannot be measured, and the model charges each
 * the same as the second (libgomp wakes its threads one by one);
 * bench_threads prints the slope on a machine with more cores. On a CPU
 * whose SIMD kernels are slower (AVX2 only, NEON) the work is
 * underestimated, so a region there takes at most the threads it would take
 * here: never more than pays. */
#include "kernels/threads.h"

#include <math.h>
#include "util/openmp.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

const ThreadCosts THREAD_COSTS = {
    .fork_join_ns = 2900.0,
    .moved_byte_ns = 0.112,
    .mac_ns = 0.0088,
    .small_mac_ns = 0.075,
    .naive_mac_ns = 0.68,
    .gelu_ns = 1.08,
    .softmax_ns = 0.71,
    .layernorm_ns = 0.37,
    .adam_ns = 1.41,
};

/* time(t) = W / t + F (t - 1) is convex in t, smallest at t = sqrt(W / F):
 * the better of the two whole counts either side of it (constant time,
 * whatever the cap). */
static double region_ns(double work_ns, double bytes, int t) {
    if (t <= 1) return work_ns;
    return (work_ns + THREAD_COSTS.moved_byte_ns * bytes) / t + THREAD_COSTS.fork_join_ns * (t - 1);
}

/* For t > 1, time(t) = (W + X b) / t + F (t - 1) is convex in t, smallest
 * at t = sqrt((W + X b) / F): the better of the two whole counts either side
 * of it, and then 1 if that is better still (constant time, whatever the cap). */
int threads_for_work(double work_ns, double bytes, double pieces, int cap) {
    int most = cap;
    if (pieces < most) most = pieces >= 1.0 ? (int)pieces : 1;
    if (most <= 1 || !(work_ns > 0.0)) return 1;
    if (!(bytes > 0.0)) bytes = 0.0;
    double best = sqrt((work_ns + THREAD_COSTS.moved_byte_ns * bytes) / THREAD_COSTS.fork_join_ns);
    int t = most;
    if (best < most) {
        int below = best < 2.0 ? 2 : (int)best, above = below + 1 <= most ? below + 1 : most;
        t = region_ns(work_ns, bytes, above) < region_ns(work_ns, bytes, below) ? above : below;
    }
    return region_ns(work_ns, bytes, t) < region_ns(work_ns, bytes, 1) ? t : 1;
}

static double product_bytes(int M, int N, int K) { return 4.0 * ((double)M * K + (double)K * N + (double)M * N); }

static int model_on = 1;   /* threads_model_set; set by a test's main thread between regions */

void threads_model_set(int on) { model_on = on != 0; }

/* The model's count, or with the model off (tests) every thread it may take. */
static int decide(double work_ns, double bytes, double pieces, int cap) {
    if (model_on) return threads_for_work(work_ns, bytes, pieces, cap);
    int most = pieces < cap ? (pieces >= 1.0 ? (int)pieces : 1) : cap;
    return most > 1 ? most : 1;
}

/* ---- Sharing the cores with other programs (common/README.md, step 5) -------
 * Two threads on two cores are fast only while both cores are ours. When
 * another program (a browser, a second training run) is running too, the
 * kernel's scheduler gives three busy threads two cores by turns, and a thread
 * of ours is regularly switched out for a few milliseconds. Its partner then
 * waits at the end of the region for that long, and a product that takes 50
 * microseconds takes 5 milliseconds: measured here with one busy-looping
 * process beside it, 2 threads ran a training step many times slower than 1.
 *
 * So the calling thread times its wait for its partner at the end of each
 * parallel region (each product, each element-wise pass: threads_note_join).
 * On an idle machine that wait lasts microseconds (the blocks are
 * equal). A wait is late when it is longer than LATE_NS (a switch-out, not
 * the jitter of waking a thread) and longer than the caller's own block took:
 * then two threads took longer than the caller alone would have taken for
 * both blocks. (An absolute limit alone is wrong for big products: at 1024^3
 * each block takes 5-10 ms, and a core of this VM running 15% slower than the
 * other for a while is a 1 ms wait that costs nothing.) After late waits
 * every region of the next BUSY_BACKOFF_NS runs on one thread (threads_cap),
 * after which two are tried again. The bits do not change (each piece is
 * computed the same way by whichever thread takes it), only the speed.
 *
 * Even an idle virtual machine like this one sees such waits (the host runs
 * something else on our core for a while). Counted in 12 s of back-to-back
 * 128^3..1024^3 products on 2 threads (a throwaway loop, twice): 110 and 342
 * waits over 1 ms, of which 2 and 0 were late by the rule above. Hence a
 * short back-off, a quarter of a second, and only after two late waits less
 * than 0.1 s apart (below): a lone hiccup of the host is not a busy
 * machine. Those two runs fell back 0 times. */
static const long long LATE_NS = 1000 * 1000;              /* 1 ms */
static const long long BUSY_BACKOFF_NS = 250 * 1000 * 1000; /* 0.25 s */
static atomic_llong one_thread_until_ns;                    /* 0: never */
static atomic_long busy_backoffs;                           /* how many times, for the curious */

long long threads_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Called by the calling thread after the region's join: it started its own
 * block at `started` and finished it at `finished`, then waited for its
 * partners until now.
 * One late wait alone is not enough: it takes a second one within
 * SECOND_STRIKE_NS. A busy program beside us makes late waits at almost
 * every product, so the second comes at once; the host's hiccups come alone. */
static const long long SECOND_STRIKE_NS = 100 * 1000 * 1000; /* 0.1 s */
static atomic_llong last_late_wait_ns;                        /* 0: never */

void threads_note_join(long long started, long long finished) {
    long long now = threads_now_ns();
    long long wait_ns = now - finished, own_ns = finished - started;
    if (wait_ns <= LATE_NS || wait_ns <= own_ns) return;
    long long previous = atomic_exchange(&last_late_wait_ns, now);
    if (previous != 0 && now - previous < SECOND_STRIKE_NS) {
        atomic_store(&one_thread_until_ns, now + BUSY_BACKOFF_NS);
        atomic_fetch_add(&busy_backoffs, 1);
    }
}

long threads_busy_backoffs(void) { return atomic_load(&busy_backoffs); }

int threads_backed_off(void) {
    long long until = atomic_load(&one_thread_until_ns);
    return until != 0 && threads_now_ns() < until;
}

int threads_cap(void) {
    if (omp_in_parallel() || threads_backed_off()) return 1;
    return omp_get_max_threads();
}

int threads_for_product(int M, int N, int K, double pieces) {
    return decide((double)M * N * K * THREAD_COSTS.mac_ns, product_bytes(M, N, K), pieces, threads_cap());
}

int threads_for_naive_product(int M, int N, int K, double pieces) {
    return decide((double)M * N * K * THREAD_COSTS.naive_mac_ns, product_bytes(M, N, K), pieces, threads_cap());
}

int threads_for_elements(size_t n, double value_ns) {
    return decide((double)n * value_ns, 8.0 * (double)n, (double)((n + 63) / 64), threads_cap());
}

int threads_for_items(int items, double macs_per_item, double bytes_per_item) {
    return decide((double)items * macs_per_item * THREAD_COSTS.mac_ns, (double)items * bytes_per_item, items,
                  threads_cap());
}

int threads_slots(int items) {
    int cores = omp_get_num_procs();
    if (items < 1) return 1;
    return items < cores ? items : cores;
}

int threads_in_slots(int items, double macs_per_item, double bytes_per_item) {
    int slots = threads_slots(items);
    int cap = threads_cap();
    return decide((double)items * macs_per_item * THREAD_COSTS.small_mac_ns, (double)items * bytes_per_item, items,
                  cap < slots ? cap : slots);
}

/* ---- The count itself ------------------------------------------------------ */

void threads_set(int n) {
    if (n <= 0) {
        const char *env = getenv("OMP_NUM_THREADS");
        long v = env ? strtol(env, NULL, 10) : 0;   /* "4" or "4,2" (nested lists): first number */
        n = v > THREADS_MAX ? THREADS_MAX : v > 0 ? (int)v : 0;
        if (n <= 0) n = omp_get_num_procs();
    }
    omp_set_num_threads(n < THREADS_MAX ? n : THREADS_MAX);
}

/* OpenMP reads OMP_NUM_THREADS itself, at start-up, for every parallel
 * region that names no count: capped here before main() runs, so a program
 * or test that never calls threads_set is as safe. LLVM's libomp (clang's
 * OpenMP) reads the variable at the program's first OpenMP call and stops it
 * there on a count like 99999999 ("Out of heap memory"), so the variable
 * itself is capped first; gcc's libgomp has read it already, when the
 * program was loaded, so its count is capped after. */
__attribute__((constructor)) static void threads_cap_environment(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && strtol(env, NULL, 10) > THREADS_MAX) {   /* "99999999" or "99999999,2": its first number */
        char capped[16];
        snprintf(capped, sizeof capped, "%d", THREADS_MAX);
        setenv("OMP_NUM_THREADS", capped, 1);
    }
    if (omp_get_max_threads() > THREADS_MAX) omp_set_num_threads(THREADS_MAX);
}

int threads_current(void) { return omp_get_max_threads(); }
