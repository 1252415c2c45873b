/* ngram.c - a unigram model and an interpolated Kneser-Ney trigram model
 * (see ngram.h for the formulas). Nothing here but counting:
 *
 *   unigram_*   c(w) over the stream, then (c(w) + 1) / (n + V)
 *   kn_train    1. count every window (u, v, w)
 *               2. from the distinct windows: the histories (u, v) and the
 *                  continuation counts N(.vw)
 *               3. from the distinct (v, w): N(.v.), T(v) and N(.w)
 *               4. a discount per order from how many counts are 1 and 2
 *   kn_prob     the three interpolated orders, lowest first
 *
 * The tables are open-addressing hash tables: a key's slot is chosen by a
 * hash of the key, the next slot tried when it is taken; a table doubles
 * when it gets half full, so it stays about as small as its contents (a few
 * thousand entries for characters, about a million for Brown's words). */
#include "data/ngram.h"
#include "util/error.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY_KEY UINT64_MAX
#define MAX_V (1 << 21)          /* so u V^2 + v V + w fits in 63 bits */

/* Every id in [0, V)? 0, or -1 with fail() naming the first bad one. */
static int check_ids(const int *ids, int n, int V, const char *who) {
    if (V < 1 || V > MAX_V) return fail("%s: vocabulary size %d outside [1, %d]", who, V, MAX_V);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return fail("%s: token %d has id %d, outside the vocabulary [0, %d)", who, i, ids[i], V);
    return 0;
}

/* ------------------------------------------------------------ unigram */

int unigram_train(Unigram *m, const int *ids, int n, int V) {
    memset(m, 0, sizeof *m);
    if (check_ids(ids, n, V, "unigram") != 0) return -1;
    long *count = xcalloc((size_t)V, sizeof(long));
    for (int i = 0; i < n; i++) count[ids[i]]++;
    m->V = V;
    m->p = xmalloc(sizeof(double) * (size_t)V);
    for (int w = 0; w < V; w++) m->p[w] = (count[w] + 1.0) / ((double)n + V);
    free(count);
    return 0;
}

double unigram_prob(const Unigram *m, int w) {
    return w >= 0 && w < m->V ? m->p[w] : 0.0;
}

double unigram_perplexity(const Unigram *m, const int *ids, int n) {
    double log_sum = 0.0;
    for (int i = 0; i < n; i++) log_sum += log(unigram_prob(m, ids[i]));
    return n > 0 ? exp(-log_sum / n) : 1.0;
}

void unigram_free(Unigram *m) {
    free(m->p);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------- hash tables */

/* An empty table of size slots (a power of 2). */
static void table_init(NgramTable *t, uint64_t size) {
    t->keys = xmalloc(sizeof(uint64_t) * size);
    t->a = xcalloc(size, sizeof(int));
    t->b = xcalloc(size, sizeof(int));
    for (uint64_t i = 0; i < size; i++) t->keys[i] = EMPTY_KEY;
    t->mask = size - 1;
    t->used = 0;
}

static void table_free(NgramTable *t) {
    free(t->keys);
    free(t->a);
    free(t->b);
    memset(t, 0, sizeof *t);
}

/* Mix the bits of a key (the splitmix64 finaliser), so keys that differ
 * in their last bits land far apart. */
static uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The slot holding key, or the empty slot where it would go. */
static uint64_t table_find(const NgramTable *t, uint64_t key) {
    uint64_t i = mix(key) & t->mask;
    while (t->keys[i] != EMPTY_KEY && t->keys[i] != key) i = (i + 1) & t->mask;
    return i;
}

/* Move every entry into a table twice the size. */
static void table_grow(NgramTable *t) {
    NgramTable bigger;
    table_init(&bigger, 2 * (t->mask + 1));
    for (uint64_t i = 0; i <= t->mask; i++) {
        if (t->keys[i] == EMPTY_KEY) continue;
        uint64_t j = table_find(&bigger, t->keys[i]);
        bigger.keys[j] = t->keys[i];
        bigger.a[j] = t->a[i];
        bigger.b[j] = t->b[i];
    }
    bigger.used = t->used;
    table_free(t);
    *t = bigger;
}

/* The slot of key, taking a free one for a new key (and doubling the
 * table first when it is half full). */
static uint64_t table_slot(NgramTable *t, uint64_t key) {
    uint64_t i = table_find(t, key);
    if (t->keys[i] == EMPTY_KEY) {
        if (2 * (uint64_t)(t->used + 1) > t->mask + 1) {
            table_grow(t);
            i = table_find(t, key);
        }
        t->keys[i] = key;
        t->used++;
    }
    return i;
}

/* Count a of key, 0 when absent. */
static int table_a(const NgramTable *t, uint64_t key) {
    uint64_t i = table_find(t, key);
    return t->keys[i] == key ? t->a[i] : 0;
}

/* --------------------------------------------------- Kneser-Ney trigram */

/* The ids of a pair or a triple as one number: digits in base V. */
static uint64_t key2(const KneserNey *m, int v, int w) {
    return (uint64_t)v * (uint64_t)m->V + (uint64_t)w;
}
static uint64_t key3(const KneserNey *m, int u, int v, int w) {
    return key2(m, u, v) * (uint64_t)m->V + (uint64_t)w;
}

/* Tally how many counts are exactly 1 and exactly 2 (for the discount). */
static void tally(int count, long *n1, long *n2) {
    *n1 += count == 1;
    *n2 += count == 2;
}

/* D = n1 / (n1 + 2 n2), or 0.75 when n1 or n2 is 0; a fixed discount wins. */
static double pick_discount(long n1, long n2, double fixed) {
    if (fixed > 0) return fixed;
    if (n1 == 0 || n2 == 0) return 0.75;
    return (double)n1 / (double)(n1 + 2 * n2);
}

/* Step 1: c(uvw) for every window. */
static void count_windows(KneserNey *m, const int *ids, int n) {
    table_init(&m->tri, 1024);
    for (int i = 2; i < n; i++) {
        /* First the slot, then the array: table_slot may move the arrays. */
        uint64_t slot = table_slot(&m->tri, key3(m, ids[i - 2], ids[i - 1], ids[i]));
        m->tri.a[slot]++;
    }
}

/* Step 2: over the distinct windows, c(uv.) and N(uv.) per history, N(.vw)
 * per pair; D3 from the raw counts. */
static void count_histories(KneserNey *m, double fixed) {
    table_init(&m->hist3, 1024);
    table_init(&m->cont2, 1024);
    long n1 = 0, n2 = 0;
    uint64_t V = (uint64_t)m->V;
    for (uint64_t i = 0; i <= m->tri.mask; i++) {
        uint64_t key = m->tri.keys[i];
        if (key == EMPTY_KEY) continue;
        int u = (int)(key / (V * V)), v = (int)(key / V % V), w = (int)(key % V);
        uint64_t h = table_slot(&m->hist3, key2(m, u, v));
        m->hist3.a[h] += m->tri.a[i];
        m->hist3.b[h] += 1;
        uint64_t g = table_slot(&m->cont2, key2(m, v, w));
        m->cont2.a[g] += 1;
        tally(m->tri.a[i], &n1, &n2);
    }
    m->D[3] = pick_discount(n1, n2, fixed);
}

/* Step 3: over the distinct pairs (v, w), N(.v.), T(v) and N(.w); then N(..)
 * and T; D2 and D1 from the continuation counts. */
static void count_continuations(KneserNey *m, double fixed) {
    long n1 = 0, n2 = 0;
    uint64_t V = (uint64_t)m->V;
    for (uint64_t i = 0; i <= m->cont2.mask; i++) {
        uint64_t key = m->cont2.keys[i];
        if (key == EMPTY_KEY) continue;
        int v = (int)(key / V), w = (int)(key % V);
        m->sum2[v] += m->cont2.a[i];
        m->types2[v] += 1;
        m->cont1[w] += 1;
        tally(m->cont2.a[i], &n1, &n2);
    }
    m->D[2] = pick_discount(n1, n2, fixed);

    n1 = n2 = 0;
    for (int w = 0; w < m->V; w++) {
        m->sum1 += m->cont1[w];
        m->types1 += m->cont1[w] > 0;
        tally(m->cont1[w], &n1, &n2);
    }
    m->D[1] = pick_discount(n1, n2, fixed);
}

int kn_train(KneserNey *m, const int *ids, int n, int V, double discount) {
    memset(m, 0, sizeof *m);
    if (check_ids(ids, n, V, "Kneser-Ney") != 0) return -1;
    if (discount >= 1.0)
        return fail("Kneser-Ney: discount %g must be below 1 (or <= 0 to estimate it)", discount);
    m->V = V;
    m->sum2 = xcalloc((size_t)V, sizeof(int));
    m->types2 = xcalloc((size_t)V, sizeof(int));
    m->cont1 = xcalloc((size_t)V, sizeof(int));
    count_windows(m, ids, n);
    count_histories(m, discount);
    count_continuations(m, discount);
    return 0;
}

/* Order 1: continuation unigram, interpolated with the uniform 1/V. */
static double kn_p1(const KneserNey *m, int w) {
    if (m->sum1 == 0) return 1.0 / m->V;
    double D = m->D[1];
    return (fmax(m->cont1[w] - D, 0.0) + D * m->types1 / m->V) / (double)m->sum1;
}

/* Order 2: continuation bigram, interpolated with order 1. */
static double kn_p2(const KneserNey *m, int v, int w) {
    if (v < 0 || m->sum2[v] == 0) return kn_p1(m, w);
    double D = m->D[2];
    int k = table_a(&m->cont2, key2(m, v, w));
    return (fmax(k - D, 0.0) + D * m->types2[v] * kn_p1(m, w)) / m->sum2[v];
}

/* Order 3: raw trigram counts, interpolated with order 2. */
static double kn_p3(const KneserNey *m, int u, int v, int w) {
    if (u < 0 || v < 0) return kn_p2(m, v, w);
    uint64_t h = table_find(&m->hist3, key2(m, u, v));
    if (m->hist3.keys[h] == EMPTY_KEY) return kn_p2(m, v, w);
    double D = m->D[3];
    int c = table_a(&m->tri, key3(m, u, v, w));
    return (fmax(c - D, 0.0) + D * m->hist3.b[h] * kn_p2(m, v, w)) / m->hist3.a[h];
}

double kn_prob(const KneserNey *m, int u, int v, int w) {
    if (w < 0 || w >= m->V || u >= m->V || v >= m->V) return 0.0;
    return kn_p3(m, u, v, w);
}

double kn_perplexity(const KneserNey *m, const int *ids, int n) {
    double log_sum = 0.0;
    for (int i = 0; i < n; i++) {
        int u = i >= 2 ? ids[i - 2] : -1;
        int v = i >= 1 ? ids[i - 1] : -1;
        log_sum += log(kn_prob(m, u, v, ids[i]));
    }
    return n > 0 ? exp(-log_sum / n) : 1.0;
}

void kn_free(KneserNey *m) {
    table_free(&m->tri);
    table_free(&m->hist3);
    table_free(&m->cont2);
    free(m->sum2);
    free(m->types2);
    free(m->cont1);
    memset(m, 0, sizeof *m);
}
