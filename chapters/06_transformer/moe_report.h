/* moe_report.h - chapter 06: what a GPT's mixture of experts (moe.h) did,
 * printed and into results.json, after its training (gpt_run.c calls them
 * in this order; each does nothing for a dense MLP):
 *
 *   report_experts   the parameters all experts hold beside the ones a token
 *                    uses; the balance (aux loss) and the pairs the capacity
 *                    dropped in training
 *   expert_usage     which expert each token goes to, on the validation
 *                    part: each block's shares (OUT/moe_share.png) and the
 *                    tokens each expert takes the largest part of */
#ifndef MOE_REPORT_H
#define MOE_REPORT_H
#include "06_transformer/gpt.h"
#include "data/brown.h"
#include "io/results.h"

/* What training counted of the experts (gpt_run.c's gradient adds each step's). */
typedef struct {
    long dropped, pairs;   /* (position, expert) pairs dropped by the capacity, and chosen, over training */
    double aux;            /* the last step's aux loss, summed over the blocks */
} MoeTrainingCounts;

/* --mlp moe: the parameters all experts hold and those active per token,
 * the aux loss per block of the last training batch and the share of pairs
 * dropped; printed, and into res (moe_experts, moe_top_k,
 * active_parameters, moe_aux_per_block, moe_dropped_share). */
void report_experts(const Gpt *g, const MoeTrainingCounts *t, Results *res);

/* --mlp moe: over the first windows of c's validation part (up to 20,000
 * tokens), each block's share of the (token, expert) pairs per expert ->
 * out_dir/moe_share.png (blocks x experts) and res (moe_share_l<l>), and
 * for each expert of each block the 5 tokens (seen 50 times or more) it
 * takes the largest part of (moe_tokens_l<l>_e<e>), printed as a table.
 * Runs g forward (its caches hold the last window after). Returns 0, or -1
 * with fail() when the picture cannot be written. */
int expert_usage(Gpt *g, const BrownCorpus *c, const char *out_dir, Results *res);

#endif
