/* seq2seq.c (model/) - padded batches, and greedy and beam-search decoding
 * over a model's Seq2Seq face (see model/seq2seq.h). */
#include "model/seq2seq.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* ------------------------------------------------------------------ batches */

void batch_alloc(Batch *b, int max_batch, int max_src_len, int max_tgt_len) {
    memset(b, 0, sizeof *b);
    int tgt_cap = max_tgt_len + 1; /* room for <bos> / <eos> */
    b->src = xcalloc((size_t)max_batch * max_src_len, sizeof(int));
    b->src_lens = xcalloc((size_t)max_batch, sizeof(int));
    b->tgt_in = xcalloc((size_t)max_batch * tgt_cap, sizeof(int));
    b->tgt_out = xcalloc((size_t)max_batch * tgt_cap, sizeof(int));
    b->tgt_lens = xcalloc((size_t)max_batch, sizeof(int));
}

void batch_alloc_values(Batch *b, int max_batch, int value_size) {
    b->value_size = value_size;
    b->values = xcalloc((size_t)max_batch * value_size, sizeof(float));
}

void batch_free(Batch *b) {
    free(b->src);
    free(b->src_lens);
    free(b->tgt_in);
    free(b->tgt_out);
    free(b->tgt_lens);
    free(b->values);
    memset(b, 0, sizeof *b);
}

void batch_fill(Batch *b, const Split *split, const int *idx, int n) {
    int src_len = 1, tgt_len = 1;
    for (int i = 0; i < n; i++) {
        const Example *e = &split->ex[idx[i]];
        if (e->src_len > src_len) src_len = e->src_len;
        if (e->tgt_len + 1 > tgt_len) tgt_len = e->tgt_len + 1;
    }
    b->batch = n;
    b->src_len = src_len;
    b->tgt_len = tgt_len;
    for (int i = 0; i < n; i++) {
        const Example *e = &split->ex[idx[i]];
        int *src = b->src + (size_t)i * src_len;
        int *tin = b->tgt_in + (size_t)i * tgt_len;
        int *tout = b->tgt_out + (size_t)i * tgt_len;
        for (int t = 0; t < src_len; t++) src[t] = t < e->src_len ? e->src[t] : PAD_ID;
        for (int t = 0; t < tgt_len; t++) {
            tin[t] = t == 0 ? BOS_ID : (t <= e->tgt_len ? e->tgt[t - 1] : PAD_ID);
            tout[t] = t < e->tgt_len ? e->tgt[t] : (t == e->tgt_len ? EOS_ID : PAD_ID);
        }
        b->src_lens[i] = e->src_len;
        b->tgt_lens[i] = e->tgt_len + 1;
        if (b->values)   /* an image task: the source's floats */
            memcpy(b->values + (size_t)i * b->value_size, e->values, sizeof(float) * (size_t)b->value_size);
    }
}

/* ----------------------------------------------------------------- decoding */

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void decode_greedy(Seq2Seq *m, const Batch *b, int max_out, int *out, int *out_lens, float *attn) {
    int B = b->batch, S = m->state_size, V = m->vocab_size, T = b->src_len;
    float *states = xmalloc(sizeof(float) * (size_t)B * S);
    float *next = xmalloc(sizeof(float) * (size_t)B * S);
    float *logprobs = xmalloc(sizeof(float) * (size_t)B * V);
    float *step_attn = attn ? xmalloc(sizeof(float) * (size_t)B * T) : NULL;
    int *src_row = xmalloc(sizeof(int) * (size_t)B);
    int *prev = xmalloc(sizeof(int) * (size_t)B);
    int *done = xcalloc((size_t)B, sizeof(int));
    for (int r = 0; r < B; r++) {
        src_row[r] = r;
        prev[r] = BOS_ID;
        out_lens[r] = 0;
    }
    if (attn) memset(attn, 0, sizeof(float) * (size_t)B * max_out * T);
    m->encode(m->self, b, states);
    int n_done = 0;
    for (int t = 0; t < max_out && n_done < B; t++) {
        /* finished rows are stepped too (it keeps the batch simple); their
         * outputs are ignored */
        m->step(m->self, B, src_row, states, prev, next, logprobs, step_attn);
        for (int r = 0; r < B; r++) {
            if (done[r]) continue;
            if (attn) memcpy(attn + ((size_t)r * max_out + t) * T, step_attn + (size_t)r * T, sizeof(float) * (size_t)T);
            int tok = argmax(logprobs + (size_t)r * V, V);
            if (tok == EOS_ID) {
                done[r] = 1;
                n_done++;
                continue;
            }
            out[(size_t)r * max_out + out_lens[r]++] = tok;
            prev[r] = tok;
        }
        float *swap = states; states = next; next = swap;
    }
    free(states); free(next); free(logprobs); free(step_attn); free(src_row); free(prev); free(done);
}

/* One hypothesis of the beam: its tokens so far and the sum of their
 * log-probabilities; its decoder state lives in the beam's state array. */
typedef struct {
    int *tokens;
    int len;
    int done;
    double logp;
    int parent;    /* candidate: the beam row it extends */
} Hypothesis;

static double beam_score(const Hypothesis *h) {
    /* per token, so that short outputs are not favoured just because they
     * multiply fewer probabilities (the <eos> counts as a token) */
    int n = h->len + (h->done ? 1 : 0);
    return h->logp / (double)(n > 0 ? n : 1);
}

/* Beam search over the one source of batch one (see decode_beam). */
static int decode_beam_one(Seq2Seq *m, const Batch *one_src, int max_out, int beam_width, int *out) {
    int W = beam_width, S = m->state_size, V = m->vocab_size;
    Batch one = *one_src;
    if (W <= 1) {
        int n = 0;
        int *tmp = xmalloc(sizeof(int) * (size_t)max_out);
        decode_greedy(m, &one, max_out, tmp, &n, NULL);
        memcpy(out, tmp, sizeof(int) * (size_t)n);
        free(tmp);
        return n;
    }

    Hypothesis *beam = xcalloc((size_t)W, sizeof(Hypothesis));
    Hypothesis *cand = xcalloc((size_t)W * W, sizeof(Hypothesis));
    for (int i = 0; i < W; i++) beam[i].tokens = xcalloc((size_t)max_out + 1, sizeof(int));
    for (int i = 0; i < W * W; i++) cand[i].tokens = xcalloc((size_t)max_out + 1, sizeof(int));
    float *states = xmalloc(sizeof(float) * (size_t)W * S);
    float *next = xmalloc(sizeof(float) * (size_t)W * S);
    float *new_states = xmalloc(sizeof(float) * (size_t)W * S);
    float *logprobs = xmalloc(sizeof(float) * (size_t)W * V);
    int *src_row = xcalloc((size_t)W, sizeof(int));   /* every row decodes source 0 */
    int *prev = xmalloc(sizeof(int) * (size_t)W);
    int *top = xmalloc(sizeof(int) * (size_t)W);

    m->encode(m->self, &one, states);
    int n_beam = 1;
    for (int t = 0; t < max_out; t++) {
        int all_done = 1;
        for (int h = 0; h < n_beam; h++) {
            prev[h] = beam[h].len ? beam[h].tokens[beam[h].len - 1] : BOS_ID;
            all_done &= beam[h].done;
        }
        if (all_done) break;
        m->step(m->self, n_beam, src_row, states, prev, next, logprobs, NULL);
        int n_cand = 0;
        for (int h = 0; h < n_beam; h++) {
            const Hypothesis *hyp = &beam[h];
            if (hyp->done) { /* a finished hypothesis competes as it is */
                Hypothesis *c = &cand[n_cand++];
                memcpy(c->tokens, hyp->tokens, sizeof(int) * (size_t)hyp->len);
                c->len = hyp->len; c->done = 1; c->logp = hyp->logp; c->parent = h;
                continue;
            }
            const float *lp = logprobs + (size_t)h * V;
            /* the W most likely next tokens of this hypothesis (insertion into a short list) */
            for (int k = 0; k < W; k++) top[k] = -1;
            for (int v = 0; v < V; v++) {
                if (v == PAD_ID || v == BOS_ID || v == UNK_ID) continue;
                for (int k = 0; k < W; k++) {
                    if (top[k] < 0 || lp[v] > lp[top[k]]) {
                        for (int j = W - 1; j > k; j--) top[j] = top[j - 1];
                        top[k] = v;
                        break;
                    }
                }
            }
            for (int k = 0; k < W && top[k] >= 0; k++) {
                Hypothesis *c = &cand[n_cand++];
                memcpy(c->tokens, hyp->tokens, sizeof(int) * (size_t)hyp->len);
                c->len = hyp->len;
                c->logp = hyp->logp + lp[top[k]];
                c->parent = h;
                c->done = top[k] == EOS_ID;
                if (!c->done) c->tokens[c->len++] = top[k];
            }
        }
        /* keep the W best candidates (selection sort: W is small) */
        int n_keep = n_cand < W ? n_cand : W;
        for (int i = 0; i < n_keep; i++) {
            int best = i;
            for (int j = i + 1; j < n_cand; j++)
                if (beam_score(&cand[j]) > beam_score(&cand[best])) best = j;
            Hypothesis tmp = cand[i]; cand[i] = cand[best]; cand[best] = tmp;
            Hypothesis *dst = &beam[i];
            memcpy(dst->tokens, cand[i].tokens, sizeof(int) * (size_t)cand[i].len);
            dst->len = cand[i].len; dst->done = cand[i].done; dst->logp = cand[i].logp;
            /* a finished hypothesis keeps its old state; a live one takes its parent's next state */
            const float *from = (cand[i].done ? states : next) + (size_t)cand[i].parent * S;
            memcpy(new_states + (size_t)i * S, from, sizeof(float) * (size_t)S);
        }
        n_beam = n_keep;
        float *swap = states; states = new_states; new_states = swap;
    }
    int best = 0;
    for (int i = 1; i < n_beam; i++)
        if (beam_score(&beam[i]) > beam_score(&beam[best])) best = i;
    int n = beam[best].len;
    memcpy(out, beam[best].tokens, sizeof(int) * (size_t)n);

    for (int i = 0; i < W; i++) free(beam[i].tokens);
    for (int i = 0; i < W * W; i++) free(cand[i].tokens);
    free(beam); free(cand); free(states); free(next); free(new_states); free(logprobs);
    free(src_row); free(prev); free(top);
    return n;
}

/* A batch of one source (no targets): its tokens, and its floats for an image task. */
static Batch one_source(const int *src, int src_len, int *src_lens, int *zero, const float *values,
                        int value_size) {
    src_lens[0] = src_len;
    zero[0] = 0;
    return (Batch){.batch = 1, .src_len = src_len, .tgt_len = 1, .src = (int *)src, .src_lens = src_lens,
                   .tgt_in = zero, .tgt_out = zero, .tgt_lens = zero, .value_size = values ? value_size : 0,
                   .values = (float *)values};
}

int decode_beam(Seq2Seq *m, const int *src, int src_len, int max_out, int beam_width, int *out) {
    int src_lens[1], zero[1];
    Batch one = one_source(src, src_len, src_lens, zero, NULL, 0);
    return decode_beam_one(m, &one, max_out, beam_width, out);
}

int decode_beam_example(Seq2Seq *m, const Example *e, int value_size, int max_out, int beam_width, int *out) {
    int src_lens[1], zero[1];
    Batch one = one_source(e->src, e->src_len, src_lens, zero, e->values, value_size);
    return decode_beam_one(m, &one, max_out, beam_width, out);
}

