/* example_build.c - building examples, split by split: the calls the task
 * files (task_*.c, dataset_tasks.h) and chapter 07's captions (dataset.h)
 * share, and the hashes that split a data set without random draws.
 * dataset.c frees what they build. */
#include "data/dataset.h"
#include "data/dataset_tasks.h"
#include "util/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The arrays of an example are small (a few dozen ints), and g2p has 133,000
 * examples: plain malloc packs them tightly where xmalloc's 64-byte alignment
 * would double the memory. Like xmalloc, running out of memory is fatal (a
 * resource problem, not bad user input). */
static void *small_alloc(size_t bytes) {
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "fatal: out of memory allocating %zu bytes for a data example\n", bytes);
        abort();
    }
    return p;
}

static void *small_calloc(size_t count, size_t size) {
    void *p = calloc(count > 0 ? count : 1, size > 0 ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "fatal: out of memory allocating %zu x %zu bytes for a data example\n",
                count, size);
        abort();
    }
    return p;
}

void split_alloc(Split *s, int n) {
    s->n = n;
    s->ex = n > 0 ? xcalloc((size_t)n, sizeof(Example)) : NULL;
}

void example_init(Example *e, const char *src_text, const int *src, int src_len, int n_refs) {
    size_t text_len = strlen(src_text);
    e->src_text = small_alloc(text_len + 1);
    memcpy(e->src_text, src_text, text_len + 1);
    e->src_len = src_len;
    e->src = small_alloc(sizeof(int) * (size_t)(src_len > 0 ? src_len : 1));
    memcpy(e->src, src, sizeof(int) * (size_t)src_len);
    e->n_refs = n_refs;
    e->refs = small_calloc((size_t)n_refs, sizeof(int *));
    e->ref_lens = small_calloc((size_t)n_refs, sizeof(int));
    e->tgt = NULL;
    e->tgt_len = 0;
}

void example_set_ref(Example *e, int r, const int *ids, int len) {
    e->refs[r] = small_alloc(sizeof(int) * (size_t)(len > 0 ? len : 1));
    memcpy(e->refs[r], ids, sizeof(int) * (size_t)len);
    e->ref_lens[r] = len;
    if (r == 0) {
        e->tgt = e->refs[0];
        e->tgt_len = len;
    }
}

void example_from_chars(Example *e, const Vocab *src_vocab, const char *src_text,
                        const Vocab *tgt_vocab, const char *tgt_text) {
    int src_len = (int)strlen(src_text), tgt_len = (int)strlen(tgt_text);
    int *src = small_alloc(sizeof(int) * (size_t)(src_len + 1));
    int *tgt = small_alloc(sizeof(int) * (size_t)(tgt_len + 1));
    for (int i = 0; i < src_len; i++) src[i] = vocab_char_id(src_vocab, src_text[i]);
    for (int i = 0; i < tgt_len; i++) tgt[i] = vocab_char_id(tgt_vocab, tgt_text[i]);
    example_init(e, src_text, src, src_len, 1);
    example_set_ref(e, 0, tgt, tgt_len);
    free(src);
    free(tgt);
}

uint64_t hash_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t hash_string(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a offset basis */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL; /* FNV prime */
    }
    return hash_mix64(h);
}
