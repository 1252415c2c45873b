/* threads.h - how many threads a parallel region uses: the thread count and
 * the one cost model every parallel loop asks (threads.c).
 *
 * A parallel region of t threads on work that takes W ns on one thread and
 * touches b bytes of data takes
 *     time(1) = W
 *     time(t) = W / t + fork_join_ns (t - 1) + moved_byte_ns b / t     (t > 1)
 * W / t: the work shared out; fork_join_ns (t - 1): waking t - 1 threads and
 * waiting for the last of them; moved_byte_ns b / t: the cache it needs,
 * each thread's share of the data brought into its own core's cache from the
 * core that wrote it last (on one thread it is where it was written, in that
 * core's cache). The region takes the t that makes time(t)
 * smallest, never more than the thread count (threads_set: the cap) nor than
 * its pieces of work (rows of tiles, sequences, blocks of 64 values). W comes
 * from what the region does, times the measured cost of one unit of it on one
 * thread: a multiply-add of a product, one value of an element-wise pass
 * (each pass its own: a value of GELU costs 25 of ReLU).
 * The constants are measured by bench/bench_threads.c (threads.c says how).
 *
 * The thread count changes which thread computes which piece, never how a
 * piece is computed: the bits do not depend on it. */
#ifndef THREADS_H
#define THREADS_H

#include <stddef.h>

/* Threads used by the kernels (OpenMP): the cap of every region below.
 * n <= 0 means: OMP_NUM_THREADS if set, else the number of cores. Results are
 * deterministic whatever the count. In a build without OpenMP (make OMP=0)
 * the count is always 1.
 * Never more than THREADS_MAX, whatever n or OMP_NUM_THREADS asks (the
 * programs' --threads stops there too): OMP_NUM_THREADS=99999999 would make
 * the first big product start that many threads. A program that never calls
 * threads_set starts with OpenMP's count capped the same way. */
#define THREADS_MAX 256
void threads_set(int n);
int threads_current(void);

/* The model's constants (threads.c), for benchmarks and tests. */
typedef struct {
    double fork_join_ns;       /* per thread beyond the first: start it, wait for it */
    double moved_byte_ns;      /* a byte read by one core after another core wrote it */
    double mac_ns;             /* one multiply-add of a SIMD product, one thread */
    double small_mac_ns;       /* one multiply-add of a product of one head (8..64 rows) */
    double naive_mac_ns;       /* one multiply-add of the naive (specification) product */
    double gelu_ns;            /* one value of GELU or its gradient (either form) */
    double softmax_ns;         /* one value of softmax rows or their gradient */
    double layernorm_ns;       /* one value of LayerNorm's forward pass */
    double adam_ns;            /* one parameter's Adam update */
} ThreadCosts;
extern const ThreadCosts THREAD_COSTS;

/* The model itself: threads for work of work_ns on one thread touching
 * `bytes` of data, in `pieces` independent pieces, under the cap `cap`: the
 * t <= min(cap, pieces) with the smallest time(t). Pure (no OpenMP call):
 * the tests ask it directly. */
int threads_for_work(double work_ns, double bytes, double pieces, int cap);

/* 1 (the default): every region below asks the model. 0: every region takes
 * as many threads as its cap and its pieces allow, whatever its work, so
 * that the tests that compare the bits of 1 and 2 threads split even small
 * work (never in a program). */
void threads_model_set(int on);

/* The cap of a region starting now: the thread count; 1 inside a parallel
 * region (nested regions run on their caller's thread) or while a region has
 * found another program on our cores (threads_backed_off). */
int threads_cap(void);

/* Sharing the cores with another program (threads.c): every region of more
 * than one thread times its join. The calling thread reads threads_now_ns()
 * (CLOCK_MONOTONIC) as it starts its share and again as it finishes it, and
 * after the region calls threads_note_join(started, finished).
 * Two late waits for a switched-out partner (over 1 ms and over the caller's
 * own share) less than 0.1 s apart make threads_backed_off() 1 for the next
 * quarter second, and every region then runs on one thread.
 * threads_busy_backoffs() counts those quarter seconds, for benchmarks. */
long long threads_now_ns(void);
void threads_note_join(long long started, long long finished);
int threads_backed_off(void);
long threads_busy_backoffs(void);

/* A product C[M,N] = A[M,K] B[K,N] on the SIMD kernels, in `pieces` blocks
 * of whole tiles at most (matmul_blocked.c); the naive loops' likewise. */
int threads_for_product(int M, int N, int K, double pieces);
int threads_for_naive_product(int M, int N, int K, double pieces);

/* An element-wise pass over n independent values of value_ns each on one
 * thread (THREAD_COSTS.gelu_ns, .softmax_ns, .layernorm_ns, .adam_ns), cut in
 * blocks of 64 values; 8 bytes each (read one, write one). */
int threads_for_elements(size_t n, double value_ns);

/* Loops over `items` independent pieces of work of macs_per_item multiply-
 * adds each (attention per sequence: a few products of one head, at
 * small_mac_ns) touching bytes_per_item, that give each thread a room of its
 * own (each thread its [N, N] scratch), allocate threads_slots(items) rooms,
 * min(cores, items), and run on threads_in_slots(items, macs_per_item,
 * bytes_per_item) threads, at most that many. Thread t uses room t. */
int threads_slots(int items);
int threads_in_slots(int items, double macs_per_item, double bytes_per_item);
/* A loop over `items` replicas of a model, each macs_per_item multiply-adds
 * of products (at mac_ns) on bytes_per_item: at most one thread per item. */
int threads_for_items(int items, double macs_per_item, double bytes_per_item);

#endif
