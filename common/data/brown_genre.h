/* brown_genre.h - the Brown corpus's genres as a classification task:
 * which of the 15 genres a passage of 64 to 256 characters comes from
 * (chapter 06's pretrain-then-fine-tune program, main_gpt_genre.c).
 *
 * The genre. Every text of the file has a name "cXNN" whose letter X is
 * its genre (Francis and Kucera's categories), in file order:
 *
 *   a press: reportage      b press: editorial     c press: reviews
 *   d religion              e skills and hobbies   f popular lore
 *   g belles-lettres        h miscellaneous        j learned
 *   k general fiction       l mystery              m science fiction
 *   n adventure, western    p romance              r humor
 *
 * (44, 27, 17, 17, 36, 48, 75, 30, 80, 29, 24, 6, 29, 29, 9 texts; 500.)
 *
 * The passages. Each text, as the chars view renders it (brown.h: words
 * separated by a space, a newline after a sentence), is cut from its start
 * into consecutive passages: a length drawn uniformly from 64 .. 256
 * characters, shortened to end at a word's end (lengthened to the next
 * word's end when no word ends between 64 and it); what is left
 * at the end under 64 characters is dropped. The draws come from one fixed
 * stream per text, so every run sees the same passages.
 *
 * The split is by text, so no text has passages on two sides: the k-th
 * text of a genre (k = 0, 1, ... in file order) is a validation text when
 * k % 5 == 3, a test text when k % 5 == 4, a training text otherwise.
 *
 *   labelled   per_genre passages of each genre drawn from its training
 *              texts (seed's draw; all of them when it has fewer: science
 *              fiction's 4 training texts hold 302), the examples a
 *              run learns from
 *   evaluated  eval_per_genre passages of each genre of the validation or
 *              the test texts (one fixed draw, the same for every run and
 *              seed), taken in turn (the first of each genre, then the
 *              second of each, ...): the accuracy is over 15 x that many
 *
 * A passage is the token ids of its text in the view of the corpus it was
 * loaded with (brown_encode: characters, words or BPE pieces), at most
 * max_tokens of them. Examples (data/examples.h) hold them as tokens
 * [B, max_tokens], the unused places after a passage -1, and one target,
 * the genre 0 .. 14. */
#ifndef BROWN_GENRE_H
#define BROWN_GENRE_H
#include <stdint.h>

#include "data/brown.h"
#include "data/examples.h"

#define BROWN_GENRES 15
#define BROWN_PASSAGE_MIN 64     /* characters */
#define BROWN_PASSAGE_MAX 256
#define BROWN_GENRE_PAD (-1)     /* the token of an unused place after a passage */

typedef enum { BROWN_GENRE_VALID, BROWN_GENRE_TEST } BrownGenreSplit;

typedef struct {
    int per_genre;           /* labelled passages per genre (>= 1), fewer where a genre has fewer */
    int eval_per_genre;      /* evaluated passages per genre (>= 1), fewer where a genre has fewer */
    BrownGenreSplit split;   /* which texts are evaluated */
    uint64_t seed;           /* which training passages are labelled */
} BrownGenreConfig;

typedef struct {
    int genre;               /* 0 .. 14 */
    int text;                /* its text, in the corpus's texts */
    int start, len;          /* its bytes in that text */
} BrownPassage;

typedef struct {
    const BrownCorpus *c;    /* loaded with keep_texts: its texts, its view of tokens */
    BrownPassage *all;       /* every passage of every text, in file order */
    int n_all;
    int max_tokens;          /* the most tokens a passage has in this view (BROWN_PASSAGE_MAX characters) */
    /* the labelled and the evaluated passages: their tokens [n, max_tokens] (pads -1) and genres [n] */
    int n_labelled, n_eval;
    int *labelled_tokens, *labelled_genre;
    int *eval_tokens, *eval_genre;
    int labelled_per_genre[BROWN_GENRES], eval_per_genre[BROWN_GENRES];   /* how many each genre got */
    int texts_per_split[3][BROWN_GENRES];   /* training, validation, test texts of each genre */
    int next_eval;           /* the evaluated stream's place (ExampleTask.test_batch) */
} BrownGenre;

/* The genre of letter ('a' .. 'r', no 'i', 'o', 'q'): 0 .. 14, or -1. */
int brown_genre_of_letter(char letter);
/* Its name ("press: reportage"), and its letter. */
const char *brown_genre_name(int genre);
char brown_genre_letter(int genre);

/* The passages of c (loaded with keep_texts), split by text, the labelled
 * and evaluated ones encoded. Returns 0, or -1 with fail() for a corpus
 * without its texts, a text whose name is not "c" and a genre letter, a
 * genre with no training, validation or test text, or a bad cfg. */
int brown_genre_build(BrownGenre *g, const BrownCorpus *c, const BrownGenreConfig *cfg);
void brown_genre_free(BrownGenre *g);

/* The classification task (data/examples.h): n_in max_tokens, one output
 * of 15 classes; training batches drawn uniformly from the labelled
 * passages (rng), test batches the evaluated ones in order. */
void brown_genre_task(BrownGenre *g, ExampleTask *t);

#endif
