/* rope.c - rotary position embeddings (see rope.h). */
#include "nn/rope.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

/* X [N, H D_H] (row stride ld): pair i of every head of row n turned by
 * sign (pos0 + n) theta_i; sign = +1 forward, -1 backward. The angles are
 * computed in double, once per row and pair, and serve every head. */
static void rotate_rows(float *X, int ld, int N, int H, int D_H, int pos0, double sign) {
    assert(D_H % 2 == 0);
    for (int n = 0; n < N; n++) {
        float *x = X + (size_t)n * ld;
        const double t = (double)(pos0 + n);
        for (int i = 0; i < D_H / 2; i++) {
            const double theta = pow(ROPE_BASE, -2.0 * i / D_H);
            const double c = cos(t * theta), s = sign * sin(t * theta);
            for (int h = 0; h < H; h++) {
                float *pair = x + (size_t)h * D_H + 2 * i;
                const double a = pair[0], b = pair[1];
                pair[0] = (float)(a * c - b * s);
                pair[1] = (float)(a * s + b * c);
            }
        }
    }
}

void rope_forward(float *X, int ld, int N, int H, int D_H, int pos0) {
    rotate_rows(X, ld, N, H, D_H, pos0, 1.0);
}

void rope_backward(float *dX, int ld, int N, int H, int D_H, int pos0) {
    rotate_rows(dX, ld, N, H, D_H, pos0, -1.0);
}
