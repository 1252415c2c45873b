/* demos.c - chapter 04's two demonstrations besides training: permutation
 * equivariance in numbers, and the sinusoidal encodings drawn (see demos.h). */
#include "04_self_attention/demos.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/self_attention.h"
#include "io/plot.h"
#include "kernels/matmul.h"
#include "util/rng.h"
#include "util/util.h"

static void print_rows(const char *name, const float *M, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        printf("  %-10s", r == 0 ? name : "");
        for (int c = 0; c < cols; c++) printf(" %7.3f", M[r * cols + c]);
        printf("\n");
    }
}

/* Y(sigma X) against sigma Y(X) for one random self-attention layer. */
void equivariance_demo(uint64_t seed) {
    enum { N = 5, D_IN = 4, D = 3 };
    const int sigma[N] = {2, 0, 4, 1, 3};        /* row i of sigma(X) is row sigma[i] of X */
    float W_Q[D_IN * D], W_K[D_IN * D], W_V[D_IN * D], X[N * D_IN], X_perm[N * D_IN], P[N * D_IN];
    float Y[N * D], Y_perm[N * D], A[N * N];
    float cache[3 * N * D + N * N];
    Rng rng;
    rng_seed(&rng, seed, 11);
    for (int i = 0; i < D_IN * D; i++) {
        W_Q[i] = rng_normal(&rng); W_K[i] = rng_normal(&rng); W_V[i] = rng_normal(&rng);
    }
    for (int i = 0; i < N * D_IN; i++) X[i] = rng_normal(&rng);
    SelfAttentionWeights w = {W_Q, W_K, W_V};
    positional_encoding_sinusoidal(P, N, D_IN);

    printf("1. Permutation equivariance: F(sigma(X)) = sigma(F(X))\n");
    printf("   one self-attention layer, N = %d inputs of size %d, outputs of size %d;\n", N, D_IN, D);
    printf("   sigma puts input rows in the order 2 0 4 1 3.\n\n");
    for (int with_pos = 0; with_pos <= 1; with_pos++) {
        float Xa[N * D_IN];
        memcpy(Xa, X, sizeof X);
        if (with_pos) add_positional_encoding(Xa, P, 1, N, D_IN);
        for (int i = 0; i < N; i++) memcpy(X_perm + i * D_IN, X + sigma[i] * D_IN, sizeof(float) * D_IN);
        if (with_pos) add_positional_encoding(X_perm, P, 1, N, D_IN);   /* positions stay 0..N-1 */
        self_attention_forward(Y, A, cache, Xa, &w, 0, NULL, 1, N, D_IN, D);
        self_attention_forward(Y_perm, A, cache, X_perm, &w, 0, NULL, 1, N, D_IN, D);
        float sigma_Y[N * D];
        double max_diff = 0.0;
        for (int i = 0; i < N; i++)
            for (int d = 0; d < D; d++) {
                sigma_Y[i * D + d] = Y[sigma[i] * D + d];
                max_diff = fmax(max_diff, fabs(Y_perm[i * D + d] - sigma_Y[i * D + d]));
            }
        printf("   %s positional encoding:\n", with_pos ? "WITH sinusoidal" : "without");
        print_rows("F(sX)", Y_perm, N, D);
        print_rows("s(F(X))", sigma_Y, N, D);
        printf("  max |F(sigma X) - sigma F(X)| = %.2g%s\n\n", max_diff,
               with_pos ? "   (positions break the symmetry)" : "   (equal: the layer ignores order)");
    }
}


int plot_sinusoids(const char *out, int D) {
    enum { N_POS = 64 };
    float *P = xmalloc(sizeof(float) * N_POS * D), *PP = xmalloc(sizeof(float) * N_POS * N_POS);
    positional_encoding_sinusoidal(P, N_POS, D);
    matmul_nt(PP, P, P, N_POS, N_POS, D, 0);         /* PP[s, t] = P_s . P_t */
    char stem[1024];
    int rc = path_format(stem, sizeof stem, "%s/pos_encoding", out);
    if (rc == 0)
        rc = plot_heatmap(stem, "Sinusoidal positional encoding P[t, :]", P, N_POS, D, NULL, NULL,
                          "dimension (sin, cos pairs; frequency falls to the right)", "position t",
                          "P[t, i]", -1.0f, 1.0f);
    if (rc == 0) printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    if (rc == 0) rc = path_format(stem, sizeof stem, "%s/pos_dot_products", out);
    if (rc == 0)
        rc = plot_heatmap(stem, "Dot products P_s . P_t of sinusoidal encodings", PP, N_POS, N_POS, NULL,
                          NULL, "position t", "position s", "P_s . P_t", 0.0f, 0.0f);
    if (rc == 0) printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    free(P); free(PP);
    return rc ? -1 : 0;
}
