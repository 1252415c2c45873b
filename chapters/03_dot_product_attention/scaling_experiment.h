/* scaling_experiment.h - chapter 03: why the Transformer divides by sqrt(D_Q).
 *
 * Take random Gaussian queries and keys, q, k ~ N(0, I_D). Then q . k is a
 * sum of D products of unit variance, so its standard deviation is sqrt(D):
 * the scores spread out as D grows, softmax turns into a near one-hot
 * (entropy -> 0, max weight -> 1) and its Jacobian diag(a) - a a^T -> 0, so
 * almost no gradient reaches the scores. Dividing by sqrt(D) keeps the
 * scores at unit variance whatever D is.
 *
 * scaling_experiment() measures this with the chapter-03 attention layer,
 * for the dot score and the scaled dot score, at each D in a list;
 * scaling_experiment_run() is the chapter's run of it, its table and plots. */
#ifndef SCALING_EXPERIMENT_H
#define SCALING_EXPERIMENT_H
#include <stdint.h>

#define SCALING_MAX_DIMS 32

/* One value per D, index d matching dims[d]. Index [0]: dot, [1]: scaled dot. */
typedef struct {
    int n_dims;
    float score_std[2][SCALING_MAX_DIMS];   /* standard deviation of the scores E_ij */
    float entropy[2][SCALING_MAX_DIMS];     /* mean entropy of a row of A, in nats (uniform: log N_X) */
    float max_weight[2][SCALING_MAX_DIMS];  /* mean of max_j A_ij (1 = one-hot) */
    float grad_norm[2][SCALING_MAX_DIMS];   /* mean ||dE_i|| for an upstream gradient dA_i ~ N(0, I) */
} ScalingCurves;

/* For each D = dims[d] (1 <= n_dims <= SCALING_MAX_DIMS): n_queries queries
 * over n_keys keys, all N(0, I_D) from seed. Returns 0, or -1 with fail() for
 * bad sizes. */
int scaling_experiment(ScalingCurves *out, const int *dims, int n_dims, int n_queries, int n_keys,
                       uint64_t seed);

/* The chapter's experiment: random queries and keys q, k ~ N(0, I_D), with
 * the dot score and the scaled dot score, for D = 1 .. 1024 (512 queries
 * over 16 keys). Prints the table and writes out_dir/scaling_entropy.{dat,gp,png}
 * and out_dir/scaling_grad.{dat,gp,png}. Returns 0 or -1 with fail(). */
int scaling_experiment_run(const char *out_dir);

#endif
