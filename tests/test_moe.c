/* test_moe.c - chapter 06's mixture-of-experts sublayer (moe.h).
 *
 *  - finite differences agree with moe_backward for the input, the router
 *    and every expert, with the load-balancing loss in the objective: GELU
 *    and SwiGLU experts, k = 1 and 2, the weights renormalised or not, with
 *    and without a capacity that drops pairs;
 *  - the routing: each row of P sums to 1; a position's k experts are
 *    distinct, the most likely first; their weights are p itself (Switch)
 *    or sum to 1 (renormalised, Mixtral); no expert holds more than its
 *    capacity, and the dropped count is what is missing;
 *  - an expert that no position chose gets exactly zero gradient;
 *  - one expert is the dense MLP, bit for bit (the idea switched off);
 *  - aux is 1 when the router is uniform, and E when one expert takes all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_transformer/block.h"
#include "06_transformer/mlp.h"
#include "06_transformer/moe.h"
#include "nn/gradcheck.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define EPS 3e-3f
#define TOL 2e-2
#define MAX_CHECKS 150

/* One mixture, its parameters and buffers, for R rows. */
typedef struct {
    BlockSpec s;
    int R, train;
    float *U, *params, *out, *wout;
    float *cache_mem;
    BlockMoeCache c;
    BlockWeights w;
} Moe;

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static float *floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static BlockSpec moe_spec(BlockMlp mlp, int E, int k, float aux, float capacity, int renorm) {
    BlockSpec s;
    memset(&s, 0, sizeof s);
    s.D = 5;
    s.H = 1;
    s.D_H = 5;
    s.F = 7;
    s.norm_place = BLOCK_PRE_NORM;
    s.mlp = mlp;
    s.moe = (BlockMoe){E, k, aux, capacity, renorm};
    return s;
}

static void moe_make(Moe *m, BlockSpec s, int R, Rng *r) {
    memset(m, 0, sizeof *m);
    m->s = s;
    m->R = R;
    const size_t nU = (size_t)R * s.D, nP = moe_param_count(&s);
    m->U = floats(nU);
    m->params = floats(nP);
    m->out = floats(nU);
    m->wout = floats(nU);
    m->cache_mem = floats(moe_cache_layout(&s, R, NULL, &m->c));
    moe_cache_layout(&s, R, m->cache_mem, &m->c);
    m->w.W_r = m->params;
    m->w.experts = m->params + (size_t)s.D * s.moe.E;
    fill(m->U, nU, 1.0f, r);
    fill(m->params, nP, 0.6f, r);
    fill(m->wout, nU, 1.0f, r);
}

static void moe_free(Moe *m) {
    free(m->U); free(m->params); free(m->out); free(m->wout); free(m->cache_mem);
}

/* L = sum of wout * out + alpha aux: the objective moe_backward differentiates */
static double moe_loss(void *p) {
    Moe *m = p;
    moe_forward(m->out, &m->c, m->U, &m->s, &m->w, m->R, m->train);
    double sum = 0.0;
    for (size_t i = 0; i < (size_t)m->R * m->s.D; i++) sum += (double)m->wout[i] * m->out[i];
    return sum + (double)m->s.moe.aux * m->c.stats[0];
}

/* dU and dparams of the loss above, from one forward and backward */
static void moe_grads(Moe *m, float *dU, float *dP) {
    BlockWeights dw;
    memset(&dw, 0, sizeof dw);
    dw.W_r = dP;
    dw.experts = dP + (size_t)m->s.D * m->s.moe.E;
    float *scratch = floats(moe_scratch_floats(&m->s, m->R));
    moe_forward(m->out, &m->c, m->U, &m->s, &m->w, m->R, m->train);
    moe_backward(dU, &dw, scratch, m->wout, &m->c, m->U, &m->s, &m->w, m->R);
    free(scratch);
}

static void expect_ok(GradCheckResult g, const char *what, const BlockSpec *s) {
    if (!(g.max_rel_err < TOL) || g.n_checked == 0)
        fail_msg("%s (mlp %d, E %d, k %d, aux %g, capacity %g, renorm %d): max_rel_err %.3g at %zu "
                 "(numeric %.6g, analytic %.6g)", what, s->mlp, s->moe.E, s->moe.k, (double)s->moe.aux,
                 (double)s->moe.capacity, s->moe.renorm, g.max_rel_err, g.worst_index, g.worst_numeric,
                 g.worst_analytic);
}

static void test_moe_gradients(void **state) {
    (void)state;
    const BlockMlp mlps[2] = {BLOCK_MLP_GELU, BLOCK_MLP_SWIGLU};
    const float capacities[2] = {0.0f, 1.0f};
    for (int a = 0; a < 2; a++)
        for (int k = 1; k <= 2; k++)
            for (int renorm = 0; renorm < 2; renorm++)
                for (int c = 0; c < 2; c++) {
                    Rng r;
                    rng_seed(&r, 11, 0);
                    Moe m;
                    moe_make(&m, moe_spec(mlps[a], 4, k, 0.5f, capacities[c], renorm), 9, &r);
                    m.train = 1;
                    const size_t nU = (size_t)m.R * m.s.D, nP = moe_param_count(&m.s);
                    float *dU = floats(nU), *dP = floats(nP);
                    moe_grads(&m, dU, dP);
                    if (c == 1) assert_true(m.c.stats[1] > 0.0f);   /* capacity 1 with 9 rows: some dropped */
                    expect_ok(gradcheck(moe_loss, &m, m.U, dU, nU, EPS, MAX_CHECKS), "moe dU", &m.s);
                    expect_ok(gradcheck(moe_loss, &m, m.params, dP, nP, EPS, MAX_CHECKS * 4), "moe dparams",
                              &m.s);
                    free(dU); free(dP);
                    moe_free(&m);
                }
}

static void test_moe_routing_invariants(void **state) {
    (void)state;
    for (int k = 1; k <= 3; k++)
        for (int renorm = 0; renorm < 2; renorm++)
            for (int c = 0; c < 2; c++) {
                Rng r;
                rng_seed(&r, 5, 0);
                const int E = 5, R = 23;
                Moe m;
                moe_make(&m, moe_spec(BLOCK_MLP_GELU, E, k, 0.01f, c ? 1.25f : 0.0f, renorm), R, &r);
                m.train = 1;
                moe_loss(&m);
                const BlockMoeCache *mc = &m.c;
                const int cap = c ? (int)ceilf(1.25f * R * k / E) : R;
                for (int t = 0; t < R; t++) {
                    const float *p = mc->P + (size_t)t * E;
                    float psum = 0.0f, gsum = 0.0f;
                    for (int e = 0; e < E; e++) psum += p[e];
                    assert_true(fabsf(psum - 1.0f) < 1e-5f);
                    for (int j = 0; j < k; j++) {
                        const int e = mc->choice[t * k + j];
                        assert_true(e >= 0 && e < E);
                        for (int i = 0; i < j; i++) {
                            assert_int_not_equal(mc->choice[t * k + i], e);      /* distinct */
                            assert_true(p[mc->choice[t * k + i]] >= p[e]);        /* best first */
                        }
                        for (int x = 0; x < E; x++) {   /* no expert outside the k beats one inside */
                            int in = 0;
                            for (int i = 0; i < k; i++) in |= mc->choice[t * k + i] == x;
                            if (!in) assert_true(p[x] <= p[mc->choice[t * k + k - 1]]);
                        }
                        if (!renorm) assert_true(mc->g[t * k + j] == p[e]);   /* Switch: g = p */
                        gsum += mc->g[t * k + j];
                    }
                    if (renorm) assert_true(fabsf(gsum - 1.0f) < 1e-6f);     /* Mixtral: they sum to 1 */
                }
                int kept = 0;
                for (int e = 0; e < E; e++) {
                    const int n = mc->offset[e + 1] - mc->offset[e];
                    assert_true(n >= 0 && n <= cap);
                    kept += n;
                }
                assert_int_equal(kept + (int)mc->stats[1], R * k);
                if (!c) assert_int_equal((int)mc->stats[1], 0);
                for (int i = 0; i < R * k; i++)   /* each kept pair sits in its expert's block */
                    if (mc->slot[i] >= 0) {
                        const int e = mc->choice[i];
                        assert_true(mc->slot[i] >= mc->offset[e] && mc->slot[i] < mc->offset[e + 1]);
                        assert_int_equal(mc->slot_pair[mc->slot[i]], i);
                    }
                moe_free(&m);
            }
}

/* Expert 3's router column is very negative on positive inputs: no row
 * picks it, and its parameters get exactly 0 while the others do not. */
static void test_moe_idle_expert_gets_zero_gradient(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 3, 0);
    const int E = 4, R = 12;
    Moe m;
    moe_make(&m, moe_spec(BLOCK_MLP_SWIGLU, E, 2, 0.1f, 0.0f, 0), R, &r);
    for (int i = 0; i < R * m.s.D; i++) m.U[i] = 0.5f + 0.5f * fabsf(m.U[i]);
    for (int d = 0; d < m.s.D; d++) m.w.W_r[d * E + 3] = -5.0f;
    const size_t nU = (size_t)R * m.s.D, nP = moe_param_count(&m.s), nX = mlp_param_count(&m.s);
    float *dU = floats(nU), *dP = floats(nP);
    moe_grads(&m, dU, dP);
    assert_int_equal(m.c.offset[4] - m.c.offset[3], 0);
    const float *d_experts = dP + (size_t)m.s.D * E;
    for (int e = 0; e < E; e++) {
        double sum = 0.0;
        for (size_t i = 0; i < nX; i++) sum += fabs(d_experts[e * nX + i]);
        if (e == 3) assert_true(sum == 0.0);
        else assert_true(sum > 0.0);
    }
    free(dU); free(dP);
    moe_free(&m);
}

/* E = 1: the weight is p = 1 and the mixture is the one dense MLP, bit for bit. */
static void test_moe_one_expert_is_the_dense_mlp(void **state) {
    (void)state;
    for (int renorm = 0; renorm < 2; renorm++) {
        Rng r;
        rng_seed(&r, 8, 0);
        const int R = 6;
        Moe m;
        moe_make(&m, moe_spec(BLOCK_MLP_GELU, 1, 1, 0.0f, 0.0f, renorm), R, &r);
        moe_loss(&m);
        const int F = m.s.F;
        float *pre = floats((size_t)R * F), *hid = floats((size_t)R * F), *y = floats((size_t)R * m.s.D);
        const BlockWeights x = moe_expert(&m.s, m.w.experts, 0);
        mlp_forward(y, pre, NULL, hid, m.U, &m.s, &x, R);
        assert_memory_equal(y, m.out, sizeof(float) * (size_t)R * m.s.D);
        free(pre); free(hid); free(y);
        moe_free(&m);
    }
}

/* aux = E sum_e f_e P_e: 1 for a uniform router (W_r = 0: every p_e = 1/E),
 * E when one expert has every choice and all the probability. */
static void test_moe_aux_loss_bounds(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 4, 0);
    const int E = 4, R = 10;
    Moe m;
    moe_make(&m, moe_spec(BLOCK_MLP_GELU, E, 1, 0.01f, 0.0f, 0), R, &r);
    memset(m.w.W_r, 0, sizeof(float) * (size_t)m.s.D * E);
    moe_loss(&m);
    assert_true(fabsf(m.c.stats[0] - 1.0f) < 1e-5f);
    for (int i = 0; i < R * m.s.D; i++) m.U[i] = 1.0f;
    for (int d = 0; d < m.s.D; d++) m.w.W_r[d * E + 2] = 20.0f;
    moe_loss(&m);
    assert_true(fabsf(m.c.stats[0] - (float)E) < 1e-4f);
    assert_true(m.c.f[2] == 1.0f);
    moe_free(&m);
}

/* Capacity is a training rule: at evaluation no pair is dropped. */
static void test_moe_capacity_only_in_training(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 6, 0);
    Moe m;
    moe_make(&m, moe_spec(BLOCK_MLP_GELU, 4, 2, 0.01f, 0.5f, 0), 16, &r);
    m.train = 1;
    moe_loss(&m);
    assert_true(m.c.stats[1] > 0.0f);
    m.train = 0;
    moe_loss(&m);
    assert_true(m.c.stats[1] == 0.0f);
    moe_free(&m);
}

static void test_moe_spec_check(void **state) {
    (void)state;
    BlockSpec s = moe_spec(BLOCK_MLP_GELU, 4, 5, 0.01f, 0.0f, 0);
    assert_int_equal(moe_spec_check(&s), -1);   /* k > E */
    s = moe_spec(BLOCK_NO_MLP, 4, 1, 0.01f, 0.0f, 0);
    assert_int_equal(moe_spec_check(&s), -1);   /* experts of no MLP */
    s = moe_spec(BLOCK_MLP_GELU, BLOCK_MAX_EXPERTS + 1, 1, 0.01f, 0.0f, 0);
    assert_int_equal(moe_spec_check(&s), -1);
    s = moe_spec(BLOCK_MLP_GELU, 4, 1, -1.0f, 0.0f, 0);
    assert_int_equal(moe_spec_check(&s), -1);
    s = moe_spec(BLOCK_MLP_GELU, 4, 2, 0.01f, 1.25f, 1);
    assert_int_equal(moe_spec_check(&s), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moe_gradients),
        cmocka_unit_test(test_moe_routing_invariants),
        cmocka_unit_test(test_moe_idle_expert_gets_zero_gradient),
        cmocka_unit_test(test_moe_one_expert_is_the_dense_mlp),
        cmocka_unit_test(test_moe_aux_loss_bounds),
        cmocka_unit_test(test_moe_capacity_only_in_training),
        cmocka_unit_test(test_moe_spec_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
