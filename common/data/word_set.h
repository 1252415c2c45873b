/* word_set.h - the distinct words of the Brown corpus's training text (the
 * characters view, brown.h), to ask whether a word occurs in it: chapter
 * 06's GPT counts how many of a character model's sampled words are words
 * of the training text.
 *
 * The training characters are kept as one string, cut into words at the
 * separators (each space or newline made a NUL), and the words are found
 * through an open-addressing table of pointers into that string (FNV-1a
 * hash, linear probing, at most half full).
 *
 *   WordSet s;
 *   word_set_build(&s, &corpus);          corpus: a BROWN_CHARS view
 *   ... word_set_contains(&s, "jury") ...
 *   word_set_free(&s); */
#ifndef WORD_SET_H
#define WORD_SET_H
#include <stddef.h>
#include "data/brown.h"

typedef struct {
    char *text;           /* the training characters, each separator made a NUL */
    const char **slots;   /* [mask + 1] a word, or NULL */
    size_t mask;
    int n;                /* distinct words */
} WordSet;

/* The distinct words of c's training part; c is a characters view (one
 * character per id; <unk> counts as the letter '<'). */
void word_set_build(WordSet *s, const BrownCorpus *c);

/* 1 when w (a NUL-terminated word, no separator in it) occurs in the set, else 0. */
int word_set_contains(const WordSet *s, const char *w);

void word_set_free(WordSet *s);

#endif
