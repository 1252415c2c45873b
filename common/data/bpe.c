/* bpe.c - byte-pair encoding: learn, encode, decode, save (see bpe.h).
 *
 * Learning keeps, for every adjacent pair of symbols met so far, its count
 * over all words and the list of words it was seen in (a list may hold words
 * that no longer have the pair: each is checked when its turn comes). A merge
 * then touches only the words that have the pair: each loses the counts of
 * its old pairs and gains those of its new ones. Finding the most frequent
 * pair scans every pair: simple, and fast enough for a few thousand merges.
 *
 * Lookups are open-addressing hash tables: an array of 2^k slots holding an
 * index (-1 = empty), the slot chosen by a hash, the next slot tried on a
 * collision. Memory comes from xmalloc (util.h). */
#include "data/bpe.h"
#include "util/error.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* realloc that stops the program on out of memory, as xmalloc does. */
static void *xrealloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (q == NULL) {
        fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", bytes);
        abort();
    }
    return q;
}

static const char *const SPECIAL_TEXT[4] = {"<pad>", "<bos>", "<eos>", "<unk>"};

int bpe_utf8_len(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return 0;
    if (u[0] < 0x80) return 1;
    int k;
    unsigned cp;
    if (u[0] >= 0xc2 && u[0] <= 0xdf) k = 2, cp = u[0] & 0x1fu;
    else if (u[0] >= 0xe0 && u[0] <= 0xef) k = 3, cp = u[0] & 0x0fu;
    else if (u[0] >= 0xf0 && u[0] <= 0xf4) k = 4, cp = u[0] & 0x07u;
    else return 0;                                   /* a continuation byte, 0xc0, 0xc1 or past 0xf4 */
    if (n < (size_t)k) return 0;
    for (int i = 1; i < k; i++) {
        if ((u[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (u[i] & 0x3fu);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000)) return 0;   /* overlong */
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;                       /* a surrogate */
    if (cp > 0x10ffff) return 0;
    return k;
}

/* ------------------------------------------------------------ hash tables */

static uint64_t hash_bytes(const char *s, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_pair(int a, int b) {
    uint64_t h = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static int *new_table(int n, int *mask) {
    int size = 16;
    while (size < 2 * n) size *= 2;
    int *t = xmalloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) t[i] = -1;
    *mask = size - 1;
    return t;
}

/* ------------------------------------------------------------ symbols */

static uint64_t hash_symbol(const char *text, int ends) { return hash_bytes(text, strlen(text), 14695981039346656037ULL + (uint64_t)ends); }

/* The slot of symbol (text, ends) in b's symbol table, or the empty slot where it would go. */
static int symbol_slot(const Bpe *b, const char *text, int ends) {
    int i = (int)(hash_symbol(text, ends) & (uint64_t)b->sym_mask);
    while (b->sym_table[i] >= 0 &&
           (b->ends[b->sym_table[i]] != ends || strcmp(b->text[b->sym_table[i]], text) != 0))
        i = (i + 1) & b->sym_mask;
    return i;
}

static int symbol_find(const Bpe *b, const char *text, int ends) {
    return b->sym_table[symbol_slot(b, text, ends)];
}

/* The id of (text, ends), added when new (text is copied). cap: room in text/ends. */
static int symbol_add(Bpe *b, const char *text, int ends, int *cap) {
    int slot = symbol_slot(b, text, ends);
    if (b->sym_table[slot] >= 0) return b->sym_table[slot];
    if (b->V == *cap) {
        *cap *= 2;
        b->text = xrealloc(b->text, sizeof(char *) * (size_t)*cap);
        b->ends = xrealloc(b->ends, (size_t)*cap);
    }
    int id = b->V++;
    size_t n = strlen(text);
    b->text[id] = xmalloc(n + 1);
    memcpy(b->text[id], text, n + 1);
    b->ends[id] = (unsigned char)ends;
    b->sym_table[slot] = id;
    if (2 * b->V > b->sym_mask + 1) {                 /* keep the table at most half full */
        free(b->sym_table);
        b->sym_table = new_table(2 * b->V, &b->sym_mask);
        for (int s = 0; s < b->V; s++) b->sym_table[symbol_slot(b, b->text[s], b->ends[s])] = s;
    }
    return id;
}

/* The rank (0-based) of merge (l, r), or -1. */
static int merge_rank(const Bpe *b, int l, int r) {
    if (b->pair_table == NULL) return -1;
    int i = (int)(hash_pair(l, r) & (uint64_t)b->pair_mask);
    while (b->pair_table[i] >= 0) {
        int m = b->pair_table[i];
        if (b->merge_left[m] == l && b->merge_right[m] == r) return m;
        i = (i + 1) & b->pair_mask;
    }
    return -1;
}

static void index_merges(Bpe *b) {
    free(b->pair_table);
    b->pair_table = new_table(b->n_merges, &b->pair_mask);
    for (int m = 0; m < b->n_merges; m++) {
        int i = (int)(hash_pair(b->merge_left[m], b->merge_right[m]) & (uint64_t)b->pair_mask);
        while (b->pair_table[i] >= 0) i = (i + 1) & b->pair_mask;
        b->pair_table[i] = m;
    }
}

/* An empty model with the specials and </w>; chars: the alphabet's
 * characters (each one UTF-8 character), in byte order. */
static void start_model(Bpe *b, char **chars, int n_chars, int *cap) {
    memset(b, 0, sizeof *b);
    *cap = 64;
    b->text = xmalloc(sizeof(char *) * (size_t)*cap);
    b->ends = xmalloc((size_t)*cap);
    b->sym_table = new_table(64, &b->sym_mask);
    for (int i = 0; i < 4; i++) {
        b->text[i] = xmalloc(1);
        b->text[i][0] = '\0';
        b->ends[i] = 2;                               /* never looked up */
        b->V++;
    }
    symbol_add(b, "", 1, cap);                       /* BPE_END_OF_WORD */
    for (int i = 0; i < n_chars; i++) symbol_add(b, chars[i], 0, cap);
    b->n_chars = n_chars;
}

/* ------------------------------------------------------------ learning */

typedef struct {
    int *sym;             /* the word's symbols */
    int len;
    long count;
} Word;

typedef struct {
    int a, b;
    long count;
    int *words, n_words, cap;
} Pair;

typedef struct {
    Pair *pairs;
    int n, cap;
    int *table, mask;
} PairSet;

static int pairset_find(PairSet *ps, int a, int b) {
    int i = (int)(hash_pair(a, b) & (uint64_t)ps->mask);
    while (ps->table[i] >= 0 && (ps->pairs[ps->table[i]].a != a || ps->pairs[ps->table[i]].b != b))
        i = (i + 1) & ps->mask;
    if (ps->table[i] >= 0) return ps->table[i];
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 1024;
        ps->pairs = xrealloc(ps->pairs, sizeof(Pair) * (size_t)ps->cap);
    }
    int p = ps->n++;
    ps->pairs[p] = (Pair){a, b, 0, NULL, 0, 0};
    ps->table[i] = p;
    if (2 * ps->n > ps->mask + 1) {
        free(ps->table);
        ps->table = new_table(2 * ps->n, &ps->mask);
        for (int q = 0; q < ps->n; q++) {
            int j = (int)(hash_pair(ps->pairs[q].a, ps->pairs[q].b) & (uint64_t)ps->mask);
            while (ps->table[j] >= 0) j = (j + 1) & ps->mask;
            ps->table[j] = q;
        }
    }
    return p;
}

/* Add sign * the word's count to each of its pairs (sign > 0 also lists the word). */
static void count_pairs(PairSet *ps, const Word *w, int word, int sign) {
    for (int i = 0; i + 1 < w->len; i++) {
        int q = pairset_find(ps, w->sym[i], w->sym[i + 1]);   /* may move ps->pairs: index it after */
        Pair *p = &ps->pairs[q];
        p->count += sign * w->count;
        if (sign > 0 && (p->n_words == 0 || p->words[p->n_words - 1] != word)) {
            if (p->n_words == p->cap) {
                p->cap = p->cap ? 2 * p->cap : 4;
                p->words = xrealloc(p->words, sizeof(int) * (size_t)p->cap);
            }
            p->words[p->n_words++] = word;
        }
    }
}

/* The symbol's text as the tie rule compares it: its characters, then "</w>" if it ends a word. */
static int compare_symbols(const Bpe *b, int x, int y) {
    if (x == y) return 0;
    int c = strcmp(b->text[x], b->text[y]);
    if (c != 0) {
        /* One text may be a prefix of the other: the shorter one's "</w>" then comes next. */
        size_t nx = strlen(b->text[x]), ny = strlen(b->text[y]);
        if (nx < ny && strncmp(b->text[x], b->text[y], nx) == 0 && b->ends[x])
            return strcmp(BPE_END_TEXT, b->text[y] + nx);
        if (ny < nx && strncmp(b->text[x], b->text[y], ny) == 0 && b->ends[y])
            return strcmp(b->text[x] + ny, BPE_END_TEXT);
        return c;
    }
    return (int)b->ends[x] - (int)b->ends[y];
}

static int check_word(const char *w, size_t n, const char *what) {
    char quote[80];
    if (n == 0) return fail("%s is empty: expected a word", what);
    if (n > BPE_MAX_WORD)
        return fail("%s '%s' is %zu bytes long, longer than the %d a word may be", what,
                    error_excerpt(w, quote, sizeof quote), n, BPE_MAX_WORD);
    for (size_t i = 0; i < n;) {
        if (w[i] == ' ' || w[i] == '\t' || w[i] == '\n' || w[i] == '\r')
            return fail("%s '%s' holds a blank: words are cut at blanks", what, error_excerpt(w, quote, sizeof quote));
        int k = bpe_utf8_len(w + i, n - i);
        if (k == 0)
            return fail("%s '%s' is not UTF-8 at byte %zu", what, error_excerpt(w, quote, sizeof quote), i + 1);
        i += (size_t)k;
    }
    if (strstr(w, BPE_END_TEXT) != NULL)
        return fail("%s '%s' holds the end-of-word marker " BPE_END_TEXT ", which the saved merges could not tell "
                    "apart", what, error_excerpt(w, quote, sizeof quote));
    return 0;
}

static int by_bytes(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int bpe_learn(Bpe *b, const char *const *words, const long *counts, int n_words, int n_merges) {
    memset(b, 0, sizeof *b);
    if (n_merges < 0) return fail("bpe: %d merges asked for, expected 0 or more", n_merges);
    char what[64];
    for (int i = 0; i < n_words; i++) {
        snprintf(what, sizeof what, "bpe: word %d", i + 1);
        if (check_word(words[i], strlen(words[i]), what) != 0) return -1;
        if (counts[i] < 1) return fail("bpe: word %d has the count %ld, expected 1 or more", i + 1, counts[i]);
    }
    /* The alphabet: every character of every word, sorted, each once. */
    size_t total = 0;
    for (int i = 0; i < n_words; i++) total += strlen(words[i]);
    char **chars = xmalloc(sizeof(char *) * (total + 1));
    char *pool = xmalloc(5 * (total + 1));
    int n_all = 0;
    char *p = pool;
    for (int i = 0; i < n_words; i++)
        for (const char *s = words[i]; *s;) {
            int k = bpe_utf8_len(s, strlen(s));
            memcpy(p, s, (size_t)k);
            p[k] = '\0';
            chars[n_all++] = p;
            p += k + 1;
            s += k;
        }
    qsort(chars, (size_t)n_all, sizeof *chars, by_bytes);
    int n_chars = 0;
    for (int i = 0; i < n_all; i++)
        if (n_chars == 0 || strcmp(chars[n_chars - 1], chars[i]) != 0) chars[n_chars++] = chars[i];
    int cap;
    start_model(b, chars, n_chars, &cap);
    free(chars);
    free(pool);

    /* Each word as its characters and </w>. */
    Word *w = xmalloc(sizeof(Word) * (size_t)(n_words > 0 ? n_words : 1));
    char one[5];
    for (int i = 0; i < n_words; i++) {
        size_t n = strlen(words[i]);
        w[i].sym = xmalloc(sizeof(int) * (n + 1));
        w[i].len = 0;
        w[i].count = counts[i];
        for (const char *s = words[i]; *s;) {
            int k = bpe_utf8_len(s, strlen(s));
            memcpy(one, s, (size_t)k);
            one[k] = '\0';
            w[i].sym[w[i].len++] = symbol_find(b, one, 0);
            s += k;
        }
        w[i].sym[w[i].len++] = BPE_END_OF_WORD;
    }
    PairSet ps = {0};
    ps.table = new_table(1024, &ps.mask);
    for (int i = 0; i < n_words; i++) count_pairs(&ps, &w[i], i, +1);

    int merge_cap = 16;
    b->merge_left = xmalloc(sizeof(int) * (size_t)merge_cap);
    b->merge_right = xmalloc(sizeof(int) * (size_t)merge_cap);
    b->merge_result = xmalloc(sizeof(int) * (size_t)merge_cap);
    b->merge_count = xmalloc(sizeof(long) * (size_t)merge_cap);
    int *stamp = xmalloc(sizeof(int) * (size_t)(n_words > 0 ? n_words : 1));
    for (int i = 0; i < n_words; i++) stamp[i] = -1;
    int *todo = NULL;
    size_t text_cap = 64;
    char *joined = xmalloc(text_cap);
    while (b->n_merges < n_merges) {
        int best = -1;
        for (int q = 0; q < ps.n; q++) {
            const Pair *c = &ps.pairs[q];
            if (c->count < BPE_MIN_COUNT) continue;
            if (best < 0) { best = q; continue; }
            const Pair *o = &ps.pairs[best];
            if (c->count > o->count) best = q;
            else if (c->count == o->count) {
                int k = compare_symbols(b, c->a, o->a);
                if (k == 0) k = compare_symbols(b, c->b, o->b);
                if (k < 0) best = q;
            }
        }
        if (best < 0) break;
        int l = ps.pairs[best].a, r = ps.pairs[best].b;
        long count = ps.pairs[best].count;
        size_t need = strlen(b->text[l]) + strlen(b->text[r]) + 1;
        if (need > text_cap) {
            text_cap = 2 * need;
            joined = xrealloc(joined, text_cap);
        }
        snprintf(joined, text_cap, "%s%s", b->text[l], b->text[r]);
        int m = symbol_add(b, joined, b->ends[r], &cap);
        if (b->n_merges == merge_cap) {
            merge_cap *= 2;
            b->merge_left = xrealloc(b->merge_left, sizeof(int) * (size_t)merge_cap);
            b->merge_right = xrealloc(b->merge_right, sizeof(int) * (size_t)merge_cap);
            b->merge_result = xrealloc(b->merge_result, sizeof(int) * (size_t)merge_cap);
            b->merge_count = xrealloc(b->merge_count, sizeof(long) * (size_t)merge_cap);
        }
        int rank = b->n_merges++;
        b->merge_left[rank] = l;
        b->merge_right[rank] = r;
        b->merge_result[rank] = m;
        b->merge_count[rank] = count;

        /* The words listed for the pair (copied: merging adds to other lists). */
        int n_todo = ps.pairs[best].n_words;
        todo = xrealloc(todo, sizeof(int) * (size_t)(n_todo > 0 ? n_todo : 1));
        memcpy(todo, ps.pairs[best].words, sizeof(int) * (size_t)n_todo);
        free(ps.pairs[best].words);
        ps.pairs[best].words = NULL;
        ps.pairs[best].n_words = ps.pairs[best].cap = 0;
        for (int t = 0; t < n_todo; t++) {
            int i = todo[t];
            if (stamp[i] == rank) continue;
            stamp[i] = rank;
            Word *x = &w[i];
            int has = 0;
            for (int j = 0; j + 1 < x->len && !has; j++) has = x->sym[j] == l && x->sym[j + 1] == r;
            if (!has) continue;
            count_pairs(&ps, x, i, -1);
            int out = 0;
            for (int j = 0; j < x->len;) {
                if (j + 1 < x->len && x->sym[j] == l && x->sym[j + 1] == r) {
                    x->sym[out++] = m;
                    j += 2;
                } else {
                    x->sym[out++] = x->sym[j++];
                }
            }
            x->len = out;
            count_pairs(&ps, x, i, +1);
        }
    }
    free(joined);
    free(todo);
    free(stamp);
    for (int i = 0; i < n_words; i++) free(w[i].sym);
    free(w);
    for (int q = 0; q < ps.n; q++) free(ps.pairs[q].words);
    free(ps.pairs);
    free(ps.table);
    index_merges(b);
    return 0;
}

/* ------------------------------------------------------------ counting words */

int bpe_learn_texts(Bpe *b, const char *const *texts, int n_texts, int n_merges) {
    memset(b, 0, sizeof *b);
    int cap = 1024, n = 0, mask;
    char **word = xmalloc(sizeof(char *) * (size_t)cap);
    long *count = xmalloc(sizeof(long) * (size_t)cap);
    int *table = new_table(cap, &mask);
    int rc = 0;
    for (int t = 0; t < n_texts && rc == 0; t++) {
        const char *s = texts[t];
        for (;;) {
            s += strspn(s, " \t\r\n");
            size_t k = strcspn(s, " \t\r\n");
            if (k == 0) break;
            uint64_t h = hash_bytes(s, k, 14695981039346656037ULL);
            int i = (int)(h & (uint64_t)mask);
            while (table[i] >= 0 && (strlen(word[table[i]]) != k || memcmp(word[table[i]], s, k) != 0))
                i = (i + 1) & mask;
            if (table[i] >= 0) {
                count[table[i]]++;
            } else {
                if (n == cap) {
                    cap *= 2;
                    word = xrealloc(word, sizeof(char *) * (size_t)cap);
                    count = xrealloc(count, sizeof(long) * (size_t)cap);
                }
                word[n] = xmalloc(k + 1);
                memcpy(word[n], s, k);
                word[n][k] = '\0';
                count[n] = 1;
                table[i] = n++;
                if (2 * n > mask + 1) {
                    free(table);
                    table = new_table(2 * n, &mask);
                    for (int j = 0; j < n; j++) {
                        int q = (int)(hash_bytes(word[j], strlen(word[j]), 14695981039346656037ULL) & (uint64_t)mask);
                        while (table[q] >= 0) q = (q + 1) & mask;
                        table[q] = j;
                    }
                }
            }
            s += k;
        }
    }
    rc = bpe_learn(b, (const char *const *)word, count, n, n_merges);
    for (int i = 0; i < n; i++) free(word[i]);
    free(word);
    free(count);
    free(table);
    return rc;
}

/* ------------------------------------------------------------ encoding */

int bpe_encode(const Bpe *b, const char *text, int *ids, int max_ids, int *n_unk) {
    int n = 0, unk = 0;
    int sym[BPE_MAX_WORD + 1];
    char one[5];
    const char *s = text;
    for (;;) {
        s += strspn(s, " \t\r\n");
        size_t k = strcspn(s, " \t\r\n");
        if (k == 0) break;
        if (k > BPE_MAX_WORD) {
            char quote[80];
            return fail("bpe: the word '%s' is %zu bytes long, longer than the %d a word may be",
                        error_excerpt(s, quote, sizeof quote), k, BPE_MAX_WORD);
        }
        int len = 0;
        for (size_t i = 0; i < k;) {
            int c = bpe_utf8_len(s + i, k - i);
            int id = BPE_UNK;
            if (c == 0) {
                c = 1;                                   /* one unknown byte */
            } else {
                memcpy(one, s + i, (size_t)c);
                one[c] = '\0';
                id = symbol_find(b, one, 0);
                if (id < 0) id = BPE_UNK;
            }
            unk += id == BPE_UNK;
            sym[len++] = id;
            i += (size_t)c;
        }
        sym[len++] = BPE_END_OF_WORD;
        for (;;) {                                       /* the earliest-learned pair, leftmost first */
            int best = -1, at = -1;
            for (int j = 0; j + 1 < len; j++) {
                int r = merge_rank(b, sym[j], sym[j + 1]);
                if (r >= 0 && (best < 0 || r < best)) best = r, at = j;
            }
            if (best < 0) break;
            sym[at] = b->merge_result[best];
            memmove(sym + at + 1, sym + at + 2, sizeof(int) * (size_t)(len - at - 2));
            len--;
        }
        for (int j = 0; j < len; j++) {
            if (n < max_ids) ids[n] = sym[j];
            n++;
        }
        s += k;
    }
    if (n_unk) *n_unk = unk;
    if (n > max_ids) return fail("bpe: the text is %d tokens long, more than the %d there is room for", n, max_ids);
    return n;
}

const char *bpe_piece(const Bpe *b, int id, char *buf, int cap) {
    if (id < 0 || id >= b->V) snprintf(buf, (size_t)cap, "?");
    else if (id < 4) snprintf(buf, (size_t)cap, "%s", SPECIAL_TEXT[id]);
    else snprintf(buf, (size_t)cap, "%s%s", b->text[id], b->ends[id] ? BPE_END_TEXT : "");
    return buf;
}

int bpe_decode(const Bpe *b, const int *ids, int n, char *out, int outlen) {
    if (outlen < 1) return fail("bpe: no room to decode into");
    size_t at = 0, cap = (size_t)outlen;
    out[0] = '\0';
    int space = 0;                               /* a word ended: a space before any more text */
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        const char *piece;
        int ends = 0;
        if (id == BPE_UNK) piece = SPECIAL_TEXT[BPE_UNK];
        else if (id >= 0 && id < 4) continue;
        else if (id < 0 || id >= b->V) piece = "?";
        else piece = b->text[id], ends = b->ends[id];
        size_t k = strlen(piece) + (size_t)(space && piece[0] != '\0');
        if (at + k + 1 > cap) return fail("bpe: the decoded text is longer than the %d bytes there is room for", outlen);
        if (space && piece[0] != '\0') out[at++] = ' ', space = 0;
        memcpy(out + at, piece, strlen(piece));
        at += strlen(piece);
        out[at] = '\0';
        if (ends) space = 1;
    }
    return 0;
}

/* ------------------------------------------------------------ text form */

/* Append text to a growing buffer. */
static void append(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap) *cap *= 2;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

char *bpe_to_text(const Bpe *b, const char *prefix) {
    size_t len = 0, cap = 256;
    char *buf = xmalloc(cap);
    buf[0] = '\0';
    append(&buf, &len, &cap, prefix);
    append(&buf, &len, &cap, "bpe_alphabet=");
    for (int i = 0; i < b->n_chars; i++) append(&buf, &len, &cap, b->text[BPE_FIRST_CHAR + i]);
    char line[64], piece[BPE_MAX_WORD + 8];
    snprintf(line, sizeof line, "\n%.20sbpe_merges=%d\n", prefix, b->n_merges);
    append(&buf, &len, &cap, line);
    for (int m = 0; m < b->n_merges; m++) {
        snprintf(line, sizeof line, "%.20sbpe_merge_%d=", prefix, m + 1);
        append(&buf, &len, &cap, line);
        append(&buf, &len, &cap, bpe_piece(b, b->merge_left[m], piece, sizeof piece));
        append(&buf, &len, &cap, " ");
        append(&buf, &len, &cap, bpe_piece(b, b->merge_right[m], piece, sizeof piece));
        append(&buf, &len, &cap, "\n");
    }
    return buf;
}

uint32_t bpe_crc(const Bpe *b) {
    char *t = bpe_to_text(b, "");
    uint32_t crc = (uint32_t)crc32(0L, (const Bytef *)t, (uInt)strlen(t));
    free(t);
    return crc;
}

/* The value of the line "key=..." in text: a pointer to it and its length, or NULL. */
static const char *find_value(const char *text, const char *key, size_t *len) {
    size_t k = strlen(key);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, key, k) == 0 && p[k] == '=') {
            const char *v = p + k + 1;
            *len = strcspn(v, "\n");
            return v;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NULL;
}

/* A symbol in the saved form ("est</w>", "e", "</w>") as an id, or -1. */
static int parse_symbol(const Bpe *b, const char *s, size_t n) {
    char text[BPE_MAX_WORD + 8];
    if (n >= sizeof text) return -1;
    int ends = 0;
    size_t e = strlen(BPE_END_TEXT);
    if (n >= e && memcmp(s + n - e, BPE_END_TEXT, e) == 0) ends = 1, n -= e;
    memcpy(text, s, n);
    text[n] = '\0';
    if (n == 0 && !ends) return -1;
    return symbol_find(b, text, ends);
}

int bpe_from_text(Bpe *b, const char *config_text, const char *prefix) {
    memset(b, 0, sizeof *b);
    if (strlen(prefix) > 20) return fail("bpe_from_text: the key prefix \"%s\" is longer than 20 bytes", prefix);
    size_t n;
    char key[64];
    snprintf(key, sizeof key, "%sbpe_alphabet", prefix);
    const char *v = find_value(config_text, key, &n);
    if (v == NULL) return fail("the BPE vocabulary has no line %s=...: expected the characters of its merges", key);
    char **chars = xmalloc(sizeof(char *) * (n + 1));
    int n_chars = 0, rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        int k = bpe_utf8_len(v + i, n - i);
        if (k == 0 || (k == 1 && (unsigned char)v[i] <= ' ')) {
            rc = fail("%s= is not UTF-8 text without blanks at byte %zu", key, i + 1);
            break;
        }
        chars[n_chars] = xmalloc((size_t)k + 1);
        memcpy(chars[n_chars], v + i, (size_t)k);
        chars[n_chars][k] = '\0';
        if (n_chars > 0 && strcmp(chars[n_chars - 1], chars[n_chars]) >= 0)
            rc = fail("%s=: the character '%s' comes after '%s': expected each character once, in byte "
                      "order", key, chars[n_chars], chars[n_chars - 1]);
        n_chars++;
        i += (size_t)k;
    }
    int cap = 0;
    if (rc == 0) start_model(b, chars, n_chars, &cap);
    for (int i = 0; i < n_chars; i++) free(chars[i]);
    free(chars);
    if (rc != 0) return -1;

    int merges = -1;
    snprintf(key, sizeof key, "%sbpe_merges", prefix);
    v = find_value(config_text, key, &n);
    if (v == NULL || sscanf(v, "%d", &merges) != 1 || merges < 0 || merges > 1000000 ||
        strspn(v, "0123456789") != n)
        rc = fail("the BPE vocabulary has no line %s=N (N from 0 to 1000000)", key);
    if (rc == 0) {
        b->merge_left = xmalloc(sizeof(int) * (size_t)(merges + 1));
        b->merge_right = xmalloc(sizeof(int) * (size_t)(merges + 1));
        b->merge_result = xmalloc(sizeof(int) * (size_t)(merges + 1));
        b->merge_count = xcalloc((size_t)merges + 1, sizeof(long));
    }
    char joined[2 * BPE_MAX_WORD + 16];
    for (int m = 0; m < merges && rc == 0; m++) {
        snprintf(key, sizeof key, "%sbpe_merge_%d", prefix, m + 1);
        v = find_value(config_text, key, &n);
        const char *space = v ? memchr(v, ' ', n) : NULL;
        int l = -1, r = -1;
        if (space) {
            l = parse_symbol(b, v, (size_t)(space - v));
            r = parse_symbol(b, space + 1, n - (size_t)(space - v) - 1);
        }
        if (v == NULL)
            rc = fail("the BPE vocabulary has %sbpe_merges=%d but no line %s=", prefix, merges, key);
        else if (space == NULL || l < 0 || r < 0 || b->ends[l] == 1)
            rc = fail("%s=%.*s: expected two symbols of the merges before it, separated by one space", key,
                      (int)(n > 60 ? 60 : n), v);
        else {
            snprintf(joined, sizeof joined, "%s%s", b->text[l], b->text[r]);
            b->merge_left[m] = l;
            b->merge_right[m] = r;
            b->merge_result[m] = symbol_add(b, joined, b->ends[r], &cap);
            b->n_merges = m + 1;
        }
    }
    if (rc != 0) {
        bpe_free(b);
        return -1;
    }
    index_merges(b);
    return 0;
}

void bpe_free(Bpe *b) {
    if (b->text)
        for (int i = 0; i < b->V; i++) free(b->text[i]);
    free(b->text);
    free(b->ends);
    free(b->merge_left);
    free(b->merge_right);
    free(b->merge_result);
    free(b->merge_count);
    free(b->sym_table);
    free(b->pair_table);
    memset(b, 0, sizeof *b);
}
