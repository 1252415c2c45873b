/* stack.c - chapter 06: L blocks and the final norm, forward and backward
 * (see stack.h). A loop of block_forward calls, and the same loop backwards. */
#include "06_transformer/stack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/util.h"

int stack_has_final_norm(const BlockSpec *s) {
    return s->norm_place == BLOCK_PRE_NORM && s->norm != BLOCK_NO_NORM;
}

int stack_declare(Stack *st, const BlockSpec *s, int L, Params *p, const char *prefix) {
    memset(st, 0, sizeof *st);
    if (L < 1 || L > STACK_MAX_LAYERS) return fail("layers=%d: expected 1 to %d", L, STACK_MAX_LAYERS);
    st->spec = *s;
    st->L = L;
    st->params = p;
    char name[32];
    for (int l = 0; l < L; l++) {
        snprintf(name, sizeof name, "%s%d", prefix, l);
        st->block[l] = params_add(p, name, 1, (int[]){(int)block_param_count(s)});
    }
    const size_t n = stack_running_floats(st);
    if (n > 0) {   /* batch norm's running statistics: means 0, variances 1 (as PyTorch starts them) */
        st->running_mean = xcalloc(n, sizeof(float));
        st->running_var = xcalloc(n, sizeof(float));
        init_constant(st->running_var, n, 1.0f);
        snprintf(st->running_names[0], PARAMS_NAME_LEN, "%.30s.running_mean", prefix);
        snprintf(st->running_names[1], PARAMS_NAME_LEN, "%.30s.running_var", prefix);
    }
    return 0;
}

size_t stack_running_floats(const Stack *st) {
    if (st->spec.norm != BLOCK_BATCHNORM) return 0;
    return (size_t)st->L * block_running_floats(&st->spec) + (stack_has_final_norm(&st->spec) ? (size_t)st->spec.D : 0);
}

float *stack_final_running_mean(const Stack *st) {
    return st->running_mean && stack_has_final_norm(&st->spec)
               ? st->running_mean + (size_t)st->L * block_running_floats(&st->spec) : NULL;
}

float *stack_final_running_var(const Stack *st) {
    return st->running_var && stack_has_final_norm(&st->spec)
               ? st->running_var + (size_t)st->L * block_running_floats(&st->spec) : NULL;
}

int stack_running_items(Stack *st, StateItem *items) {
    if (!st->running_mean) return 0;
    const size_t n = stack_running_floats(st);
    items[0] = (StateItem){st->running_names[0], STATE_FLOAT, st->running_mean, n};
    items[1] = (StateItem){st->running_names[1], STATE_FLOAT, st->running_var, n};
    return 2;
}

BlockSpec stack_layer_spec(const Stack *st, int l) {
    BlockSpec s = st->spec;
    s.drop_path = st->spec.drop_path * (float)(l + 1) / (float)st->L;
    return s;
}

BlockWeights stack_block_weights(const Stack *st, int l, int grad) {
    float *base = grad ? params_grad(st->params, st->block[l]) : params_data(st->params, st->block[l]);
    BlockWeights w = block_weights_view(&st->spec, base);
    if (!grad && st->running_mean) {
        const size_t at = (size_t)l * block_running_floats(&st->spec);
        w.running_mean = st->running_mean + at;
        w.running_var = st->running_var + at;
    }
    return w;
}

void stack_init_weights(Stack *st, Rng *rng) {
    for (int l = 0; l < st->L; l++) {
        BlockWeights w = stack_block_weights(st, l, 0);
        block_init(&st->spec, &w, rng);
    }
    const size_t D = (size_t)st->spec.D;
    if (st->norm_g) init_constant(params_data(st->params, st->norm_g), D, 1.0f);
    if (st->norm_b) init_constant(params_data(st->params, st->norm_b), D, 0.0f);
}

void stack_alloc(Stack *st, int max_B, int max_N, int N_M) {
    const size_t rows = (size_t)max_B * max_N, RD = rows * st->spec.D;
    for (int l = 0; l <= st->L; l++) st->x[l] = xcalloc(RD, sizeof(float));
    for (int l = 0; l < st->L; l++) {
        const BlockSpec s = stack_layer_spec(st, l);
        block_cache_alloc(&st->cache[l], &s, max_B, max_N, N_M);
    }
    st->out = xcalloc(RD, sizeof(float));
    const size_t stats = rows > (size_t)st->spec.D ? rows : (size_t)st->spec.D;   /* batch norm: [D] */
    st->mean = xcalloc(stats, sizeof(float));
    st->rstd = xcalloc(stats, sizeof(float));
    st->batch_stats = xcalloc(1, sizeof(float));
    st->grad_a = xcalloc(RD, sizeof(float));
    st->grad_b = xcalloc(RD, sizeof(float));
    st->scratch = xcalloc(block_scratch_floats(&st->spec, max_B, max_N, N_M), sizeof(float));
}

void stack_free(Stack *st) {
    for (int l = 0; l <= st->L; l++) free(st->x[l]);
    for (int l = 0; l < st->L; l++) block_cache_free(&st->cache[l]);
    free(st->out); free(st->mean); free(st->rstd); free(st->batch_stats);
    free(st->grad_a); free(st->grad_b); free(st->scratch);
    free(st->running_mean); free(st->running_var);
    memset(st->x, 0, sizeof st->x);
    st->out = st->mean = st->rstd = st->batch_stats = st->grad_a = st->grad_b = st->scratch = NULL;
    st->running_mean = st->running_var = NULL;
}

/* X_0 -> X_1 .. X_L -> out */
void stack_forward(Stack *st, const int *lens, const BlockMemory *mem, int B, int N, int train, Rng *rng) {
    const int hold = train && st->hold_running;   /* batch norm: the pass's statistics, the running ones kept */
    for (int l = 0; l < st->L; l++) {
        const BlockSpec s = stack_layer_spec(st, l);
        BlockWeights w = stack_block_weights(st, l, 0);
        if (hold) w.running_mean = w.running_var = NULL;
        block_forward(st->x[l + 1], &st->cache[l], st->x[l], &s, &w, lens, mem, B, N, train, rng);
    }
    if (train) st->hold_running = 0;
    if (stack_has_final_norm(&st->spec))
        block_norm_forward_batch(st->out, st->mean, st->rstd, st->batch_stats, st->x[st->L], &st->spec,
                                 params_data(st->params, st->norm_g),
                                 st->norm_b ? params_data(st->params, st->norm_b) : NULL,
                                 hold ? NULL : stack_final_running_mean(st), hold ? NULL : stack_final_running_var(st),
                                 lens, B, N, train);
    else
        memcpy(st->out, st->x[st->L], sizeof(float) * (size_t)B * N * st->spec.D);
}

/* d out -> d X_L -> ... -> d X_0 */
float *stack_backward(Stack *st, const float *dout, const int *lens, const BlockMemory *mem, float *dM,
                            int B, int N) {
    const size_t n = (size_t)B * N * st->spec.D;
    float *dcur = st->grad_a, *dprev = st->grad_b;
    memset(dcur, 0, sizeof(float) * n);
    if (stack_has_final_norm(&st->spec))
        block_norm_backward_batch(dcur, params_grad(st->params, st->norm_g),
                                  st->norm_b ? params_grad(st->params, st->norm_b) : NULL, dout, st->mean, st->rstd,
                                  st->batch_stats, st->x[st->L], &st->spec, params_data(st->params, st->norm_g),
                                  lens, B, N);
    else
        memcpy(dcur, dout, sizeof(float) * n);
    for (int l = st->L - 1; l >= 0; l--) {   /* block l: d X_{l+1} -> d X_l */
        const BlockSpec s = stack_layer_spec(st, l);
        BlockWeights w = stack_block_weights(st, l, 0), dw = stack_block_weights(st, l, 1);
        memset(dprev, 0, sizeof(float) * n);
        block_backward(dprev, dM, &dw, st->scratch, dcur, &st->cache[l], st->x[l], &s, &w, lens, mem, B, N);
        float *swap = dcur; dcur = dprev; dprev = swap;
    }
    return dcur;
}

/* (B, N, N_M: the last forward's; its maps are the first rows of the buffers) */
const float *stack_attention(const Stack *st, int l, int B, int N, int N_M) {
    (void)B, (void)N, (void)N_M;
    return st->cache[l].A;
}

const float *stack_cross_attention(const Stack *st, int l, int B, int N, int N_M) {
    (void)B, (void)N, (void)N_M;
    return st->cache[l].cross_A;
}
