/* ngram.h - counting baselines for language models: a unigram model and an
 * interpolated Kneser-Ney trigram model, over token ids 0 .. V-1.
 *
 * Both are trained on one stream of ids (the training part) and score
 * another (the test part): perplexity = exp(-(1/n) sum_i ln p(x_i | its
 * context)), every one of the n tokens counted, as Bengio et al. 2003 did.
 * For characters, bits per character = log2(perplexity).
 *
 * Unigram, add-one (Laplace) smoothed:
 *     p(w) = (c(w) + 1) / (n + V)
 * c(w) the count of w in the training stream of n ids. The +1 gives every
 * id of the vocabulary a probability, also one never seen in training (the
 * <unk> character, say), so no test token gets probability 0.
 *
 * Interpolated Kneser-Ney trigram (Chen & Goodman 1998, "interpolated
 * Kneser-Ney", one absolute discount D_k per order k). Counts come from the
 * n-2 windows (u, v, w) of three consecutive training ids:
 *
 *   order 3, raw counts:   c(uvw) windows;  c(uv.) = sum_w c(uvw);  N(uv.) = #{w : c(uvw) > 0}
 *     p3(w | u v) = max(c(uvw) - D3, 0) / c(uv.)  +  D3 N(uv.) / c(uv.) * p2(w | v)
 *   order 2, continuation counts: N(.vw) = #{u : c(uvw) > 0}, how many different
 *   words come before "v w";  N(.v.) = sum_w N(.vw);  T(v) = #{w : N(.vw) > 0}
 *     p2(w | v) = max(N(.vw) - D2, 0) / N(.v.)  +  D2 T(v) / N(.v.) * p1(w)
 *   order 1, continuation counts: N(.w) = #{v : N(.vw) > 0}, in how many different
 *   bigrams w comes second;  N(..) = sum_w N(.w);  T = #{w : N(.w) > 0}
 *     p1(w) = max(N(.w) - D1, 0) / N(..)  +  D1 T / N(..) * 1/V
 *
 * A context never seen (c(uv.) = 0, or N(.v.) = 0) passes straight to the
 * next lower order. Each order's distribution sums to 1 over the V ids.
 * The discount of order k is D_k = n1 / (n1 + 2 n2) (Ney, Essen and Kneser
 * 1994), n1 and n2 the numbers of order-k entries whose count (raw at order
 * 3, continuation at orders 2 and 1) is exactly 1 and exactly 2; when n1 or
 * n2 is 0 (a tiny corpus) D_k = 0.75. A caller may fix all three instead.
 *
 * The counts live in hash tables keyed by the ids packed into one 64-bit
 * integer (u V^2 + v V + w), so V may be up to 2^21. */
#ifndef NGRAM_H
#define NGRAM_H
#include <stdint.h>

/* ------------------------------------------------------------ unigram */

typedef struct {
    int V;
    double *p;            /* [V] p(w) */
} Unigram;

/* Train on ids[0 .. n-1] (each in [0, V)). Returns 0, or -1 with fail()
 * on an id outside [0, V) or V < 1. */
int unigram_train(Unigram *m, const int *ids, int n, int V);
double unigram_prob(const Unigram *m, int w);
/* Perplexity of ids[0 .. n-1] (every token scored). */
double unigram_perplexity(const Unigram *m, const int *ids, int n);
void unigram_free(Unigram *m);

/* ------------------------------------------------- Kneser-Ney trigram */

/* A hash table from a packed key to two counts; what a and b mean depends
 * on the table (see KneserNey below). */
typedef struct {
    uint64_t *keys;       /* [mask + 1] UINT64_MAX for a free slot */
    int *a, *b;           /* [mask + 1] */
    uint64_t mask;
    long used;
} NgramTable;

typedef struct {
    int V;
    double D[4];          /* D[1], D[2], D[3]: the discount of each order (D[0] unused) */
    NgramTable tri;       /* key (u,v,w): a = c(uvw) */
    NgramTable hist3;     /* key (u,v):   a = c(uv.), b = N(uv.) */
    NgramTable cont2;     /* key (v,w):   a = N(.vw) */
    int *sum2;            /* [V] N(.v.) */
    int *types2;          /* [V] T(v) */
    int *cont1;           /* [V] N(.w) */
    long sum1;            /* N(..) */
    int types1;           /* T */
} KneserNey;

/* Train on ids[0 .. n-1]. discount <= 0: estimate D_k = n1/(n1 + 2 n2) per
 * order; a discount in (0, 1): use it for all three orders. Returns 0, or
 * -1 with fail() on an id outside [0, V), V outside [1, 2^21], or a
 * discount >= 1. */
int kn_train(KneserNey *m, const int *ids, int n, int V, double discount);

/* p(w | u v). u < 0: no first word of context, so p2(w | v); v < 0 as
 * well: p1(w). */
double kn_prob(const KneserNey *m, int u, int v, int w);

/* Perplexity of ids[0 .. n-1], every token scored with the up to two ids
 * before it in this array as context: ids[0] by p1, ids[1] by p2, ids[i]
 * by p3(ids[i] | ids[i-2] ids[i-1]) from i = 2 on. */
double kn_perplexity(const KneserNey *m, const int *ids, int n);

void kn_free(KneserNey *m);

#endif
