/* brown_genre.c - the Brown corpus's genres as a classification task (see
 * brown_genre.h).
 *
 * Reading order: cut_passages() (each text into passages), split_of()
 * (which side of the split a text is on), choose() (the labelled and the
 * evaluated passages of one genre), encode() (their token ids), then the
 * ExampleTask's calls. */
#include "data/brown_genre.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"
#include "util/util.h"

static const char LETTERS[BROWN_GENRES + 1] = "abcdefghjklmnpr";
static const char *const NAMES[BROWN_GENRES] = {
    "press: reportage", "press: editorial", "press: reviews", "religion", "skills and hobbies",
    "popular lore", "belles-lettres", "miscellaneous", "learned", "general fiction",
    "mystery", "science fiction", "adventure, western", "romance", "humor"};

enum { SPLIT_TRAIN, SPLIT_VALID, SPLIT_TEST };
#define PASSAGE_STREAM 1000   /* the passages' cuts: stream 1000 + text of seed 1, the same in every run */
#define EVAL_STREAM 2000      /* the evaluated passages' draw: stream 2000 + genre of seed 1 */
#define LABEL_STREAM 3000     /* the labelled passages' draw: stream 3000 + genre of the run's seed */

int brown_genre_of_letter(char letter) {
    const char *p = letter ? strchr(LETTERS, letter) : NULL;
    return p ? (int)(p - LETTERS) : -1;
}

const char *brown_genre_name(int genre) { return genre >= 0 && genre < BROWN_GENRES ? NAMES[genre] : "?"; }

char brown_genre_letter(int genre) { return genre >= 0 && genre < BROWN_GENRES ? LETTERS[genre] : '?'; }

static int is_separator(char ch) { return ch == ' ' || ch == '\n'; }

/* Text t's passages, appended to g->all (room for len / 64 more). */
static void cut_passages(BrownGenre *g, const BrownText *t, int text, int genre) {
    Rng rng;
    rng_seed(&rng, 1, PASSAGE_STREAM + (uint64_t)text);
    int pos = 0;
    while (t->len - pos >= BROWN_PASSAGE_MIN) {
        const int want = BROWN_PASSAGE_MIN + (int)rng_below(&rng, BROWN_PASSAGE_MAX - BROWN_PASSAGE_MIN + 1);
        const int end = pos + want < t->len ? pos + want : t->len;
        /* at a word's end: the last separator in [pos + 64, end]; when no word ends there, the next one
         * after end (within 256 characters) */
        int cut = end;
        if (end < t->len) {
            int s = end;
            while (s >= pos + BROWN_PASSAGE_MIN && !is_separator(t->text[s])) s--;
            if (s >= pos + BROWN_PASSAGE_MIN) {
                cut = s;
            } else {
                s = end;
                while (s < t->len && s < pos + BROWN_PASSAGE_MAX && !is_separator(t->text[s])) s++;
                cut = s;
            }
        }
        while (cut > pos && is_separator(t->text[cut - 1])) cut--;    /* no separator at the end */
        if (cut - pos >= BROWN_PASSAGE_MIN) g->all[g->n_all++] = (BrownPassage){genre, text, pos, cut - pos};
        pos = cut >= t->len ? t->len : cut + 1;
        while (pos < t->len && is_separator(t->text[pos])) pos++;
    }
}

/* The k-th text of its genre: training, validation or test. */
static int split_of(int k) { return k % 5 == 3 ? SPLIT_VALID : k % 5 == 4 ? SPLIT_TEST : SPLIT_TRAIN; }

/* Passage p's tokens into row [max_tokens] (pads after). Returns 0 or -1. */
static int encode(const BrownGenre *g, const BrownPassage *p, int *row, char *buf) {
    const BrownText *t = &g->c->texts[p->text];
    memcpy(buf, t->text + p->start, (size_t)p->len);
    buf[p->len] = '\0';
    const int n = brown_encode(g->c, buf, row, g->max_tokens);
    if (n < 0) return fail("Brown genres: text %s, passage at byte %d: %s", t->name, p->start, last_error());
    for (int i = n; i < g->max_tokens; i++) row[i] = BROWN_GENRE_PAD;
    return 0;
}

/* Of the passages of genre on side split, up to want drawn with stream
 * (seed's), encoded into tokens/genres from row *n on. Returns how many, or -1. */
static int choose(BrownGenre *g, int genre, int split, const int *text_split, int want, uint64_t seed,
                  uint64_t stream, int *tokens, int *genres, int *n) {
    int *pick = xmalloc(sizeof(int) * (size_t)(g->n_all ? g->n_all : 1));
    int found = 0;
    for (int i = 0; i < g->n_all; i++)
        if (g->all[i].genre == genre && text_split[g->all[i].text] == split) pick[found++] = i;
    Rng rng;
    rng_seed(&rng, seed, stream);
    rng_shuffle(&rng, pick, found);
    const int take = found < want ? found : want;
    char *buf = xmalloc(BROWN_PASSAGE_MAX * 4 + 1);
    int rc = 0;
    for (int k = 0; k < take && rc == 0; k++, (*n)++) {
        rc = encode(g, &g->all[pick[k]], tokens + (size_t)*n * g->max_tokens, buf);
        genres[*n] = genre;
    }
    free(buf);
    free(pick);
    return rc < 0 ? -1 : take;
}

/* The evaluated passages, drawn genre by genre, put in turn order: the
 * first of each genre, then the second of each, ...; so the first n of
 * them (--test-size) are as balanced as n allows. */
static void interleave_eval(BrownGenre *g) {
    const int T = g->max_tokens;
    int *tokens = xmalloc(sizeof(int) * (size_t)g->n_eval * T), *genres = xmalloc(sizeof(int) * (size_t)g->n_eval);
    int first[BROWN_GENRES], n = 0;
    for (int k = 0, at = 0; k < BROWN_GENRES; at += g->eval_per_genre[k], k++) first[k] = at;
    for (int i = 0; n < g->n_eval; i++)
        for (int k = 0; k < BROWN_GENRES; k++)
            if (i < g->eval_per_genre[k]) {
                memcpy(tokens + (size_t)n * T, g->eval_tokens + (size_t)(first[k] + i) * T, sizeof(int) * (size_t)T);
                genres[n++] = k;
            }
    free(g->eval_tokens);
    free(g->eval_genre);
    g->eval_tokens = tokens;
    g->eval_genre = genres;
}

int brown_genre_build(BrownGenre *g, const BrownCorpus *c, const BrownGenreConfig *cfg) {
    memset(g, 0, sizeof *g);
    g->c = c;
    if (!c->texts || c->n_texts == 0)
        return fail("Brown genres: the corpus was loaded without its texts (BrownConfig.keep_texts)");
    if (cfg->per_genre < 1 || cfg->eval_per_genre < 1)
        return fail("Brown genres: %d labelled and %d evaluated passages per genre: expected at least 1 of each",
                    cfg->per_genre, cfg->eval_per_genre);
    /* each text's genre and side of the split, then its passages */
    int *text_split = xmalloc(sizeof(int) * (size_t)c->n_texts);
    int seen[BROWN_GENRES] = {0};
    long bytes = 0;
    for (int t = 0; t < c->n_texts; t++) bytes += c->texts[t].len;
    g->all = xmalloc(sizeof(BrownPassage) * (size_t)(bytes / BROWN_PASSAGE_MIN + 1));
    for (int t = 0; t < c->n_texts; t++) {
        const BrownText *text = &c->texts[t];
        const int genre = text->name[0] == 'c' ? brown_genre_of_letter(text->name[1]) : -1;
        if (genre < 0) {
            free(text_split);
            brown_genre_free(g);
            char quoted[96];
            return fail("Brown genres: text '%s' (the %d-th): expected a name 'c' + a genre letter of %s + a number "
                        "(ca01)", error_excerpt(text->name, quoted, sizeof quoted), t + 1, LETTERS);
        }
        text_split[t] = split_of(seen[genre]++);
        g->texts_per_split[text_split[t]][genre]++;
        cut_passages(g, text, t, genre);
    }
    for (int k = 0; k < BROWN_GENRES; k++)
        for (int s = 0; s < 3; s++)
            if (g->texts_per_split[s][k] == 0) {
                free(text_split);
                brown_genre_free(g);
                return fail("Brown genres: genre %c (%s) has %d texts: too few for a training, a validation and a "
                            "test text (the 5th text of a genre is its first test text)",
                            LETTERS[k], NAMES[k], seen[k]);
            }
    /* the labelled and the evaluated passages, encoded */
    g->max_tokens = c->kind == BROWN_WORDS ? BROWN_PASSAGE_MAX / 2 + 1 : BROWN_PASSAGE_MAX;
    g->labelled_tokens = xmalloc(sizeof(int) * (size_t)BROWN_GENRES * cfg->per_genre * g->max_tokens);
    g->labelled_genre = xmalloc(sizeof(int) * (size_t)BROWN_GENRES * cfg->per_genre);
    g->eval_tokens = xmalloc(sizeof(int) * (size_t)BROWN_GENRES * cfg->eval_per_genre * g->max_tokens);
    g->eval_genre = xmalloc(sizeof(int) * (size_t)BROWN_GENRES * cfg->eval_per_genre);
    const int eval_split = cfg->split == BROWN_GENRE_VALID ? SPLIT_VALID : SPLIT_TEST;
    int rc = 0;
    for (int k = 0; k < BROWN_GENRES && rc == 0; k++) {
        g->labelled_per_genre[k] = choose(g, k, SPLIT_TRAIN, text_split, cfg->per_genre, cfg->seed,
                                          LABEL_STREAM + (uint64_t)k, g->labelled_tokens, g->labelled_genre,
                                          &g->n_labelled);
        g->eval_per_genre[k] = g->labelled_per_genre[k] < 0 ? -1
                               : choose(g, k, eval_split, text_split, cfg->eval_per_genre, 1,
                                        EVAL_STREAM + (uint64_t)k, g->eval_tokens, g->eval_genre, &g->n_eval);
        rc = g->labelled_per_genre[k] < 0 || g->eval_per_genre[k] < 0 ? -1 : 0;
    }
    free(text_split);
    if (rc == 0) interleave_eval(g);
    if (rc < 0) brown_genre_free(g);
    return rc;
}

void brown_genre_free(BrownGenre *g) {
    free(g->all);
    free(g->labelled_tokens);
    free(g->labelled_genre);
    free(g->eval_tokens);
    free(g->eval_genre);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------------------ the task */

static void copy_example(const BrownGenre *g, Examples *e, int b, const int *tokens, const int *genres, int i) {
    memcpy(e->tokens + (size_t)b * e->n_in, tokens + (size_t)i * g->max_tokens, sizeof(int) * (size_t)g->max_tokens);
    e->targets[b] = genres[i];
}

static void genre_train_batch(void *self, Examples *e, int B, Rng *rng) {
    BrownGenre *g = self;
    e->B = B;
    for (int b = 0; b < B; b++)
        copy_example(g, e, b, g->labelled_tokens, g->labelled_genre, (int)rng_below(rng, (uint32_t)g->n_labelled));
}

static void genre_test_batch(void *self, Examples *e, int B, Rng *rng) {
    BrownGenre *g = self;
    (void)rng;   /* a fixed set, read in order */
    e->B = B;
    for (int b = 0; b < B; b++) {
        copy_example(g, e, b, g->eval_tokens, g->eval_genre, g->next_eval);
        g->next_eval = (g->next_eval + 1) % g->n_eval;
    }
}

static void genre_test_reset(void *self) { ((BrownGenre *)self)->next_eval = 0; }

static void genre_input_text(void *self, const Examples *e, int b, int i, char *buf, int cap) {
    const BrownGenre *g = self;
    const int id = e->tokens[(size_t)b * e->n_in + i];
    snprintf(buf, (size_t)cap, "%s", id == BROWN_GENRE_PAD ? "" : brown_token(g->c, id));
}

static void genre_class_text(void *self, int c, char *buf, int cap) {
    (void)self;
    snprintf(buf, (size_t)cap, "%c", brown_genre_letter(c));
}

void brown_genre_task(BrownGenre *g, ExampleTask *t) {
    memset(t, 0, sizeof *t);
    g->next_eval = 0;
    t->self = g;
    t->name = "brown_genre";
    t->n_in = g->max_tokens;
    t->n_out = 1;
    t->float_inputs = 0;
    t->classes = BROWN_GENRES;
    t->train_batch = genre_train_batch;
    t->test_batch = genre_test_batch;
    t->test_reset = genre_test_reset;
    t->parse_input = NULL;
    t->input_text = genre_input_text;
    t->class_text = genre_class_text;
}
