/* seq2seq_checks.h - a check every seq2seq model test shares (chapters 01-03):
 * decoding through the Seq2Seq interface (encode + step, the path greedy and
 * beam search use) must reproduce the batched teacher-forced pass.
 *
 * Header-only, with cmocka asserts, because it is included only by the test
 * programs (the other files in tests/ are also linked into tools/, which do
 * not link cmocka). Include it after <cmocka.h>. */
#ifndef SEQ2SEQ_CHECKS_H
#define SEQ2SEQ_CHECKS_H
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/seq2seq.h"
#include "util/util.h"

/* Layout of the attention weights a training pass kept. */
typedef enum { ATTN_NONE, ATTN_TIME_MAJOR /* [Tt, B, T] */, ATTN_BATCH_MAJOR /* [B, Tt, T] */ } AttnLayout;

/* Call right after m's train_step(batch, backward = 0): probs [Tt*B, V] (row
 * t*B + b) and attn (layout as given; NULL with ATTN_NONE) are what it kept.
 * Feeds the true previous tokens step by step, rows in reverse order (row i
 * decodes source B-1-i, which checks that step() follows src_row), and checks
 * every probability and attention weight within 1e-5, and that attention
 * past a source's length is exactly 0. Needs B <= 8, state_size <= 64, V <= 64. */
static void check_decoding_matches_training(Seq2Seq *m, const Batch *batch, const float *probs_kept,
                                            const float *attn_kept_by_model, AttnLayout layout) {
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, V = m->vocab_size, S = m->state_size;
    assert_true(B <= 8 && S <= 64 && V <= 64 && T <= 16);
    /* copies, so that a step() that reused the training buffers cannot pass by comparing with itself */
    float *probs = xmalloc(sizeof(float) * (size_t)Tt * B * V);
    memcpy(probs, probs_kept, sizeof(float) * (size_t)Tt * B * V);
    float *attn_kept = NULL;
    if (layout != ATTN_NONE) {
        attn_kept = xmalloc(sizeof(float) * (size_t)Tt * B * T);
        memcpy(attn_kept, attn_kept_by_model, sizeof(float) * (size_t)Tt * B * T);
    }
    float states[8 * 64], rows[8 * 64], next[8 * 64], logprobs[8 * 64], attn[8 * 16];
    int src_row[8], prev[8];
    m->encode(m->self, batch, states);
    for (int i = 0; i < B; i++) {   /* row i decodes source B-1-i */
        src_row[i] = B - 1 - i;
        memcpy(rows + i * S, states + src_row[i] * S, sizeof(float) * (size_t)S);
    }
    for (int t = 0; t < Tt; t++) {
        for (int i = 0; i < B; i++) prev[i] = batch->tgt_in[src_row[i] * Tt + t];
        m->step(m->self, B, src_row, rows, prev, next, logprobs, layout == ATTN_NONE ? NULL : attn);
        for (int i = 0; i < B; i++) {
            int b = src_row[i];
            if (t >= batch->tgt_lens[b]) continue;   /* past this row's <eos> */
            for (int v = 0; v < V; v++)
                assert_float_equal(expf(logprobs[i * V + v]), probs[((size_t)t * B + b) * V + v], 1e-5);
            if (layout == ATTN_NONE) continue;
            const float *kept = attn_kept + (layout == ATTN_TIME_MAJOR ? ((size_t)t * B + b) * T
                                                                       : ((size_t)b * Tt + t) * T);
            for (int j = 0; j < T; j++) {
                assert_float_equal(attn[i * T + j], kept[j], 1e-5);
                if (j >= batch->src_lens[b]) assert_true(attn[i * T + j] == 0.0f);
            }
        }
        memcpy(rows, next, sizeof(float) * (size_t)B * S);
    }
    free(probs);
    free(attn_kept);
}

#endif
