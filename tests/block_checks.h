/* block_checks.h - chapter 06's block held to finite differences with a
 * self-attention of a later part plugged in (block.h's BlockSelfAttention):
 * what test_locality.c, test_sparse_attention.c and test_linformer.c share.
 * The loss is sum(wY o Y) for a fixed random wY, so dY = wY. Static
 * functions, as layer_checks.h (only cmocka test programs include it). */
#ifndef BLOCK_CHECKS_H
#define BLOCK_CHECKS_H
#include <stdio.h>
#include <stdlib.h>

#include "06_transformer/block.h"
#include "layer_checks.h"

/* One block, its weights, cache and batch: gradcheck's argument. */
typedef struct {
    BlockSpec s;
    BlockWeights w;
    BlockCache c;
    float *X, *Y, *wY;
    const int *lens;
    int B, N;
} BlockCase;

static double block_loss(void *p) {
    BlockCase *k = p;
    block_forward(k->Y, &k->c, k->X, &k->s, &k->w, k->lens, NULL, k->B, k->N, 0, NULL);
    double s = 0.0;
    for (size_t i = 0; i < (size_t)k->B * k->N * k->s.D; i++) s += (double)k->wY[i] * k->Y[i];
    return s;
}

/* The block of spec s on B sequences of N positions (lens [B] or NULL):
 * its weights by block_init, then drawn in [-0.5, 0.5) so that no gradient
 * is trivial, X and wY in [-1, 1), all from r. Checks dX, every parameter's
 * gradient, and the self-attention's own parameters apart (its first n_extra
 * from BlockWeights.attn_extra; 0: none), against finite differences of
 * step eps, at most max_checks entries each, within tol. */
static inline void expect_block_gradients(const BlockSpec *s, int B, int N, const int *lens, size_t n_extra, Rng *r,
                                          float eps, double tol, int max_checks, const char *what) {
    char name[160];
    BlockCase k = {.s = *s, .lens = lens, .B = B, .N = N};
    assert_int_equal(block_spec_check(&k.s), 0);
    const size_t nP = block_param_count(&k.s), nX = (size_t)B * N * s->D;
    float *params = zeroed_floats(nP), *grads = zeroed_floats(nP);
    k.w = block_weights_view(&k.s, params);
    block_init(&k.s, &k.w, r);
    fill_uniform(params, nP, 0.5f, r);
    block_cache_alloc(&k.c, &k.s, B, N, 0);
    k.X = zeroed_floats(nX);
    k.Y = zeroed_floats(nX);
    k.wY = zeroed_floats(nX);
    fill_uniform(k.X, nX, 1.0f, r);
    fill_uniform(k.wY, nX, 1.0f, r);
    float *dX = zeroed_floats(nX), *scratch = zeroed_floats(block_scratch_floats(&k.s, B, N, 0));
    BlockWeights dw = block_weights_view(&k.s, grads);
    block_loss(&k);
    block_backward(dX, NULL, &dw, scratch, k.wY, &k.c, k.X, &k.s, &k.w, k.lens, NULL, B, N);
    snprintf(name, sizeof name, "%s: dX", what);
    expect_gradient(gradcheck(block_loss, &k, k.X, dX, nX, eps, max_checks), tol, name);
    snprintf(name, sizeof name, "%s: parameters", what);
    expect_gradient(gradcheck(block_loss, &k, params, grads, nP, eps, max_checks), tol, name);
    if (n_extra > 0) {
        snprintf(name, sizeof name, "%s: its own parameters", what);
        expect_gradient(gradcheck(block_loss, &k, k.w.attn_extra, dw.attn_extra, n_extra, eps, max_checks), tol, name);
    }
    block_cache_free(&k.c);
    free(params); free(grads); free(k.X); free(k.Y); free(k.wY); free(dX); free(scratch);
}
#endif
