/* bench_threads.c - measures the constants of the threads' cost model
 * (common/kernels/threads.c, THREAD_COSTS) and prints them as that table's
 * line, beside the ones compiled in.
 *
 *   build/bench/bench_threads [--batches N]
 *
 * fork_join_ns  an empty `#pragma omp parallel num_threads(2)` region: the
 *               calling thread wakes one more and waits for it; per region,
 *               divided by t - 1 for t threads (t = 2 .. cores; the slope from
 *               2 to the cores is printed too, where there are more than 2).
 *               The threads stay spinning between regions as in a training
 *               step (libgomp's default wait policy), so the figure is what a
 *               step pays per region.
 * moved_byte_ns the cache a product needs: 128 x 128 x 128 products whose
 *               A and B the calling thread has just written (as the layer
 *               before does in a training step) and whose C it reads after
 *               (as the layer after does), on 2 threads and on 1; what
 *               2 threads take beyond half the work and fork_join_ns, per
 *               byte of A, B and C the second thread's half brings to its core.
 * mac_ns        ns per multiply-add of a 256 x 256 x 256 product, 1 thread
 *               (the blocked SIMD path, the kind of product that is shared out).
 * small_mac_ns  the same for 8 x 8 x 16 and 8 x 16 x 8 products, one head's
 *               Q K^T and A V in chapters 04-05 (the per-sequence loops).
 * naive_mac_ns  the naive backend's product, 64 x 64 x 64, 1 thread.
 * gelu_ns, softmax_ns, layernorm_ns, adam_ns
 *               ns per value of each element-wise pass the kernels share out,
 *               over 4096 values, 1 thread: GELU (erf form), softmax rows of
 *               64, LayerNorm's forward pass on rows of 128, Adam's update of
 *               4096 parameters (ReLU is printed beside them: the cheapest).
 * Each figure is the quietest (smallest) of N batches (default 15), each
 * batch the mean of many repetitions: the cost with the cores free, which is
 * what the model is for (another program on the cores is sgemm's back-off,
 * matmul_blocked.c). Prints figures; never passes or fails. */
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "kernels/vecmath.h"
#include "nn/layers.h"
#include "nn/optim.h"

/* The smallest over batches of the mean ns of one call of f(arg) in a batch
 * of `reps` calls. */
typedef void (*Timed)(void *arg);

static double quietest_ns(Timed f, void *arg, int reps, int batches) {
    double best = 0.0;
    f(arg); /* warm-up: thread pool, buffers, first touch */
    for (int b = 0; b < batches; b++) {
        double t0 = bench_now_ms();
        for (int r = 0; r < reps; r++) f(arg);
        double ns = (bench_now_ms() - t0) * 1e6 / reps;
        if (b == 0 || ns < best) best = ns;
    }
    return best;
}

/* ---- what is timed ---- */

static void empty_region(void *arg) {
    int t = *(int *)arg;
    volatile int sink = 0;
#pragma omp parallel num_threads(t)
    {
        if (omp_get_thread_num() == t) sink = 1; /* never: an empty region the compiler keeps */
    }
    (void)sink;
}

typedef struct {
    int M, N, K;
    float *A, *B, *C;
} Product;

static void product(void *arg) {
    Product *p = arg;
    matmul(p->C, p->A, p->B, p->M, p->N, p->K, 0);
}

/* A and B written by the calling thread, as by the layer before */
static void touch(void *arg) {
    Product *p = arg;
    for (int i = 0; i < p->M * p->K; i++) p->A[i] += 1e-7f;
    for (int i = 0; i < p->K * p->N; i++) p->B[i] += 1e-7f;
}

/* ... and C read by it, as by the layer after (a sum the compiler must keep) */
static volatile float c_sum;

static void touch_then_product(void *arg) {
    Product *p = arg;
    touch(arg);
    product(arg);
    float sum = 0.0f;
    for (int i = 0; i < p->M * p->N; i++) sum += p->C[i];
    c_sum = sum;
}

enum { PASS_RELU, PASS_GELU, PASS_SOFTMAX, PASS_LAYERNORM, PASS_ADAM, PASSES };

typedef struct {
    int kind, n;
    float *x, *y, *mean, *rstd, *gamma, *beta;
    Params *params;
    Adam *adam;
} Pass;

/* One element-wise pass over p->n values, on the calling thread (threads_set(1)). */
static void pass(void *arg) {
    Pass *p = arg;
    switch (p->kind) {
    case PASS_RELU: vec_relu(p->y, p->x, p->n); break;
    case PASS_GELU: vec_gelu(p->y, p->x, p->n); break;
    case PASS_SOFTMAX: vec_softmax_rows(p->y, p->x, p->n / 64, 64); break;
    case PASS_LAYERNORM: layernorm_forward(p->y, p->mean, p->rstd, p->x, p->gamma, p->beta, p->n / 128, 128, 1e-5f); break;
    default: adam_step(p->adam, p->params, 1e-9f); break;
    }
}

static double product_mac_ns(int M, int N, int K, int batches) {
    Product p = {M, N, K, malloc(sizeof(float) * (size_t)M * K), malloc(sizeof(float) * (size_t)K * N),
                 malloc(sizeof(float) * (size_t)M * N)};
    for (int i = 0; i < M * K; i++) p.A[i] = (float)(i % 7) * 0.1f;
    for (int i = 0; i < K * N; i++) p.B[i] = (float)(i % 5) * 0.1f;
    double macs = (double)M * N * K;
    int reps = (int)(2e7 / macs) + 1;
    double ns = quietest_ns(product, &p, reps, batches) / macs;
    free(p.A);
    free(p.B);
    free(p.C);
    return ns;
}

int main(int argc, char **argv) {
    int batches = 15;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: bench_threads [--batches N]\n"
                   "  --batches N  batches per figure, the quietest is taken (default 15, 1..1000)\n");
            return 0;
        } else if (strcmp(argv[i], "--batches") == 0 && i + 1 < argc) {
            if (bench_int_arg("bench_threads", "--batches", argv[++i], 1, 1000, &batches) != 0) return 2;
        } else {
            fprintf(stderr, "bench_threads: unknown or incomplete argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    int cores = omp_get_num_procs();
    printf("The threads' cost model's constants (common/kernels/threads.c), quietest of %d batches;\n"
           "load average %.2f on %d cores, backend %s\n\n", batches, bench_load_average(), cores,
           backend_name(backend_current()));

    /* fork and join, per thread beyond the first */
    double fork_join = 0.0, at_cores = 0.0;
    threads_set(cores);
    for (int t = 2; t <= (cores > 2 ? cores : 2); t++) {
        double ns = quietest_ns(empty_region, &t, 2000, batches);
        printf("empty region of %3d threads: %9.0f ns, %7.0f ns per thread beyond the first\n", t, ns, ns / (t - 1));
        if (t == 2) fork_join = ns;
        at_cores = ns;
    }
    if (cores > 2)
        printf("slope from 2 to %d threads: %.0f ns per thread\n", cores, (at_cores - fork_join) / (cores - 2));
    if (cores < 2) printf("one core: the 2-thread figure shares it, an upper bound\n");

    /* the cache a product needs: A, B fresh from the calling thread, 2 threads against 1 */
    enum { S = 128 };
    Product fresh = {S, S, S, calloc(S * S, sizeof(float)), calloc(S * S, sizeof(float)), calloc(S * S, sizeof(float))};
    threads_set(1);
    /* short batches (10 products, about a millisecond): a quiet one is likelier */
    double touch_ns = quietest_ns(touch, &fresh, 10, 4 * batches);
    double one_ns = quietest_ns(touch_then_product, &fresh, 10, 4 * batches) - touch_ns;
    threads_set(2);
    double two_ns = quietest_ns(touch_then_product, &fresh, 10, 4 * batches) - touch_ns;
    double half_bytes = 0.5 * 4.0 * 3.0 * S * S;   /* the second thread's half of A, B and C */
    double moved_byte = (two_ns - one_ns / 2 - fork_join) / half_bytes;
    if (moved_byte < 0.0) moved_byte = 0.0;
    printf("%d^3 product on A, B just written: 1 thread %.0f ns, 2 threads %.0f ns: %.4f ns per byte moved\n", S,
           one_ns, two_ns, moved_byte);
    free(fresh.A);
    free(fresh.B);
    free(fresh.C);

    threads_set(1);
    double mac = product_mac_ns(256, 256, 256, batches);
    double small = 0.5 * (product_mac_ns(8, 8, 16, batches) + product_mac_ns(8, 16, 8, batches));
    backend_select("naive");
    double naive = product_mac_ns(64, 64, 64, batches);
    backend_select(NULL);

    enum { N_VALUES = 4096 };
    Pass p = {0, N_VALUES, malloc(sizeof(float) * N_VALUES), malloc(sizeof(float) * N_VALUES),
              malloc(sizeof(float) * N_VALUES / 128), malloc(sizeof(float) * N_VALUES / 128),
              malloc(sizeof(float) * 128), calloc(128, sizeof(float)), NULL, NULL};
    for (int i = 0; i < N_VALUES; i++) p.x[i] = (float)(i % 17) * 0.25f - 2.0f;
    for (int i = 0; i < 128; i++) p.gamma[i] = 1.0f;
    Params params;
    params_init(&params);
    size_t w = params_add(&params, "w", 1, (int[]){N_VALUES});
    Adam adam;
    if (params_alloc(&params) != 0 || adam_init(&adam, &params, 1e-3f, 0.0f) != 0) {
        fprintf(stderr, "bench_threads: out of memory\n");
        return 1;
    }
    for (int i = 0; i < N_VALUES; i++) {
        params_data(&params, w)[i] = p.x[i];
        params_grad(&params, w)[i] = 0.01f * p.x[i];
    }
    p.params = &params;
    p.adam = &adam;
    double value_ns[PASSES];
    const char *names[PASSES] = {"ReLU", "GELU", "softmax rows of 64", "LayerNorm rows of 128", "Adam"};
    for (int k = 0; k < PASSES; k++) {
        p.kind = k;
        value_ns[k] = quietest_ns(pass, &p, 200, batches) / N_VALUES;
        printf("element-wise %-22s %.3f ns per value\n", names[k], value_ns[k]);
    }
    adam_free(&adam);
    params_free(&params);
    free(p.x);
    free(p.y);
    free(p.mean);
    free(p.rstd);
    free(p.gamma);
    free(p.beta);
    printf("product 256^3 %.4f ns, one head's 8x8x16 / 8x16x8 %.4f ns, naive 64^3 %.3f ns per multiply-add\n\n",
           mac, small, naive);

    printf("measured:  .fork_join_ns = %.0f, .moved_byte_ns = %.4f, .mac_ns = %.4f, .small_mac_ns = %.4f, "
           ".naive_mac_ns = %.3f,\n           .gelu_ns = %.3f, .softmax_ns = %.3f, .layernorm_ns = %.3f, .adam_ns = %.3f\n",
           fork_join, moved_byte, mac, small, naive, value_ns[PASS_GELU], value_ns[PASS_SOFTMAX],
           value_ns[PASS_LAYERNORM], value_ns[PASS_ADAM]);
    const ThreadCosts *c = &THREAD_COSTS;
    printf("compiled:  .fork_join_ns = %.0f, .moved_byte_ns = %.4f, .mac_ns = %.4f, .small_mac_ns = %.4f, "
           ".naive_mac_ns = %.3f,\n           .gelu_ns = %.3f, .softmax_ns = %.3f, .layernorm_ns = %.3f, .adam_ns = %.3f\n",
           c->fork_join_ns, c->moved_byte_ns, c->mac_ns, c->small_mac_ns, c->naive_mac_ns, c->gelu_ns,
           c->softmax_ns, c->layernorm_ns, c->adam_ns);
    /* where the measured model starts to take 2 threads: the smallest n^3 product and pass */
    int n = 1;
    while (n < 4096 && !(((double)n * n * n * mac + moved_byte * 12.0 * n * n) / 2 + fork_join < (double)n * n * n * mac))
        n++;
    printf("With the measured figures two threads pay from a %d^3 product;", n);
    for (int k = PASS_GELU; k < PASSES; k++) {
        double v = value_ns[k];
        size_t values = 64;
        while (values < (1u << 30) && !((values * v + moved_byte * 8.0 * values) / 2 + fork_join < values * v))
            values *= 2;
        if (values >= (1u << 30)) printf(" %s never;", names[k]);
        else printf(" %s from %zu values;", names[k], values);
    }
    printf("\n");
    return 0;
}
