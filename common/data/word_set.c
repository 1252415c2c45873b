/* word_set.c - the distinct words of the Brown training text (word_set.h). */
#include "data/word_set.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static uint64_t word_hash(const char *w) {
    uint64_t h = 1469598103934665603ull;
    for (; *w; w++) h = (h ^ (unsigned char)*w) * 1099511628211ull;
    return h;
}

/* The slot of w: where it is, or the empty slot where it would go. */
static size_t word_slot(const WordSet *s, const char *w) {
    size_t i = (size_t)word_hash(w) & s->mask;
    while (s->slots[i] && strcmp(s->slots[i], w) != 0) i = (i + 1) & s->mask;
    return i;
}

void word_set_build(WordSet *s, const BrownCorpus *c) {
    const BrownPart *p = &c->train;
    s->text = xmalloc((size_t)p->n + 1);
    for (int i = 0; i < p->n; i++) {
        const char ch = brown_token(c, p->ids[i])[0];   /* one character per id (<unk>: '<', never a separator) */
        s->text[i] = isspace((unsigned char)ch) ? '\0' : ch;
    }
    s->text[p->n] = '\0';
    size_t cap = 1024;
    while (cap < 2 * (size_t)p->n_words + 2) cap *= 2;   /* distinct words <= words: at most half full */
    s->slots = xcalloc(cap, sizeof *s->slots);
    s->mask = cap - 1;
    s->n = 0;
    for (int i = 0; i < p->n;) {
        if (s->text[i] == '\0') { i++; continue; }
        const char *w = s->text + i;
        const size_t at = word_slot(s, w);
        if (!s->slots[at]) { s->slots[at] = w; s->n++; }
        i += (int)strlen(w);
    }
}

int word_set_contains(const WordSet *s, const char *w) {
    return s->slots[word_slot(s, w)] != NULL;
}

void word_set_free(WordSet *s) {
    free(s->text);
    free(s->slots);
    s->text = NULL;
    s->slots = NULL;
}
