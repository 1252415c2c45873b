/* moe_report.c - what a GPT's experts did (moe_report.h). */
#include "06_transformer/moe_report.h"
#include "06_transformer/mlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/plot.h"
#include "util/util.h"

void report_experts(const Gpt *g, const MoeTrainingCounts *t, Results *res) {
    const BlockSpec *s = &g->cfg.block;
    if (s->moe.E == 0) return;
    const size_t per_expert = mlp_param_count(s);
    const size_t active = g->params.size - (size_t)g->L * (s->moe.E - s->moe.k) * per_expert;
    const double dropped = t->pairs ? (double)t->dropped / (double)t->pairs : 0.0;
    /* the aux loss of the last training step's batch (as results.json's moe_aux_per_block), not of the
     * model's last forward pass, which was an evaluation batch */
    printf("mixture of experts: %d experts, %d per token: %zu parameters, %zu active per token; aux loss %.3f "
           "(1 is balanced) per block on the last training batch; %ld of %ld (position, expert) pairs dropped in "
           "training (%.2f%%)\n", s->moe.E, s->moe.k, g->params.size, active, t->aux / g->L, t->dropped,
           t->pairs, 100.0 * dropped);
    results_set_num(res, "moe_experts", s->moe.E);
    results_set_num(res, "moe_top_k", s->moe.k);
    results_set_num(res, "active_parameters", (double)active);
    results_set_num(res, "moe_aux_per_block", t->aux / g->L);
    results_set_num(res, "moe_dropped_share", dropped);
}

int expert_usage(Gpt *g, const BrownCorpus *c, const char *out_dir, Results *res) {
    const BlockSpec *s = &g->cfg.block;
    if (s->moe.E == 0) return 0;
    enum { TOP = 5, MIN_SEEN = 50 };
    const int L = g->L, E = s->moe.E, k = s->moe.k, N = g->N, V = c->V;
    const int n = c->valid.n < 20000 ? c->valid.n : 20000;
    float *share = xcalloc((size_t)L * E, sizeof(float));
    long *count = xcalloc((size_t)L * E * V, sizeof(long)), *seen = xcalloc((size_t)V, sizeof(long));
    for (int start = 0; start + N <= n; start += N) {
        const int *ids = c->valid.ids + start;
        gpt_forward(g, ids, NULL, 1, 0);
        for (int r = 0; r < N; r++) seen[ids[r]]++;
        for (int l = 0; l < L; l++)
            for (int i = 0; i < N * k; i++) {
                const int e = g->st.cache[l].moe.choice[i];
                share[l * E + e] += 1.0f;
                count[((size_t)l * E + e) * V + ids[i / k]]++;
            }
    }
    printf("\nthe tokens each expert takes the largest part of (of those seen %d times or more):\n", MIN_SEEN);
    for (int l = 0; l < L; l++) {
        float total = 0.0f;
        for (int e = 0; e < E; e++) total += share[l * E + e];
        char key[64], line[256];
        int at = 0;
        for (int e = 0; e < E; e++) {
            share[l * E + e] /= total > 0.0f ? total : 1.0f;
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%.3f", e ? " " : "", (double)share[l * E + e]);
            if (at >= (int)sizeof line) at = (int)sizeof line - 1;
        }
        snprintf(key, sizeof key, "moe_share_l%d", l);
        results_set_str(res, key, line);
        for (int e = 0; e < E; e++) {
            const long *ce = count + ((size_t)l * E + e) * V;
            int top[TOP], n_top = 0;
            for (int t = 0; t < V; t++) {   /* insertion into the best TOP by ce[t] / seen[t] */
                if (seen[t] < MIN_SEEN || ce[t] == 0) continue;
                int j = n_top < TOP ? n_top++ : TOP;
                while (j > 0 && (double)ce[t] * seen[top[j - 1]] > (double)ce[top[j - 1]] * seen[t]) {
                    if (j < TOP) top[j] = top[j - 1];
                    j--;
                }
                if (j < TOP) top[j] = t;
            }
            at = 0;
            for (int j = 0; j < n_top; j++) {
                const char *tok = brown_token(c, top[j]);
                at += snprintf(line + at, sizeof line - (size_t)at, "%s%s %.0f%%", j ? ", " : "",
                               strcmp(tok, " ") == 0 ? "(space)" : strcmp(tok, "\n") == 0 ? "(newline)" : tok,
                               100.0 * ce[top[j]] / seen[top[j]]);
                if (at >= (int)sizeof line) at = (int)sizeof line - 1;
            }
            printf("  block %d expert %d (%4.1f%% of the pairs): %s\n", l, e, 100.0 * share[l * E + e], line);
            snprintf(key, sizeof key, "moe_tokens_l%d_e%d", l, e);
            results_set_str(res, key, line);
        }
    }
    char stem[1100], x_text[BLOCK_MAX_EXPERTS][16], y_text[STACK_MAX_LAYERS][24];
    const char *xl[BLOCK_MAX_EXPERTS], *yl[STACK_MAX_LAYERS];
    for (int e = 0; e < E; e++) {
        snprintf(x_text[e], sizeof x_text[e], "%d", e);
        xl[e] = x_text[e];
    }
    for (int l = 0; l < L; l++) {
        snprintf(y_text[l], sizeof y_text[l], "%d", l);
        yl[l] = y_text[l];
    }
    /* A diverging colour scale from 0, white at the even share 1/E, so a
     * near-even split looks near-even (an automatic range would spread
     * 0.21-0.29 over the whole palette); up to 2/E, or the largest share. */
    float top = 2.0f / E;
    for (int i = 0; i < L * E; i++) top = share[i] > top ? share[i] : top;
    char cb_title[96];
    snprintf(cb_title, sizeof cb_title, "share (white: 1/E = %.3g, an even split)", 1.0 / E);
    int rc = path_format(stem, sizeof stem, "%s/moe_share", out_dir);
    if (rc == 0)
        rc = plot_heatmap_diverging(stem, "share of the (token, expert) pairs each expert takes", share, L, E, xl,
                                    yl, "expert", "block", cb_title, 0.0f, 1.0f / E, top);
    if (rc == 0) printf("expert shares: %s.png\n", stem);
    free(share); free(count); free(seen);
    return rc;
}
