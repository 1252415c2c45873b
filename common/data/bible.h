/* bible.h - English -> Spanish verse pairs: the translation task's corpus.
 *
 * The file. data/bible_en_es.tsv.gz (built by tools/bible_pack.sh from the
 * World English Bible and the Reina-Valera 1909, both public domain;
 * data/README.md) is UTF-8 text, gzip-compressed, one verse a line, seven
 * fields separated by tabs, after one header line that names them:
 *
 *   split  book     chapter  verse  near_dup  english                        spanish
 *   train  Genesis  2        1      0         The heavens, the earth, ...    Y fueron acabados los cielos ...
 *
 *   split     train, valid or test. The split is by whole Bible chapters:
 *             every verse of one (book, chapter) is in the same part.
 *   book      the book's English name as the SWORD modules spell it
 *             ("I Samuel", "Revelation of John")
 *   chapter, verse   numbers from 1
 *   near_dup  1 when this valid or test verse has a near-duplicate in the
 *             training part (its words, in English or in Spanish, equal or
 *             at least 0.8 similar to a training verse's; the Gospels repeat
 *             each other), else 0
 *   english, spanish  the two sides, never empty, detokenised text as
 *             printed ("Jesus wept." / "Y lloró Jesús.")
 *
 * Usage:
 *
 *   BibleCorpus c;
 *   if (bible_load(&c, NULL) != 0) { puts(last_error()); ... }
 *   for (int i = 0; i < c.n; i++) if (c.pairs[i].split == BIBLE_TEST) ... c.pairs[i].english ...
 *   bible_free(&c);
 *
 * Errors: a missing, empty, truncated or corrupt file; a wrong header line; a
 * line with a missing or extra column, an unknown split, a chapter, verse or
 * near_dup that is not a number in range, an empty side, a control byte, a
 * byte that is not UTF-8, a line longer than BIBLE_MAX_LINE bytes; a verse
 * given twice or a chapter whose verses are in two parts; a file without a
 * training or a test verse. Each returns -1 with one fail() message naming
 * the file, the line and what was expected. */
#ifndef BIBLE_H
#define BIBLE_H

#define BIBLE_DEFAULT_PATH "data/bible_en_es.tsv.gz"
#define BIBLE_HEADER "split\tbook\tchapter\tverse\tnear_dup\tenglish\tspanish"
#define BIBLE_COLUMNS 7
/* The longest line accepted (the shipped file's longest is 985 bytes). */
#define BIBLE_MAX_LINE 65536
/* The most bytes the decompressed file may hold (the shipped one: 8.6 MB). */
#define BIBLE_MAX_BYTES ((size_t)64 << 20)
#define BIBLE_MAX_CHAPTER 999
#define BIBLE_MAX_VERSE 999

typedef enum { BIBLE_TRAIN = 0, BIBLE_VALID = 1, BIBLE_TEST = 2 } BibleSplit;

typedef struct {
    BibleSplit split;
    const char *book;     /* "Genesis" */
    int chapter, verse;
    int near_dup;         /* 0 or 1 (see the top) */
    const char *english;  /* the source side, UTF-8 */
    const char *spanish;  /* the target side, UTF-8 */
    int line;             /* its line in the file (the header is line 1) */
} BiblePair;

typedef struct {
    BiblePair *pairs;     /* [n] in file order */
    int n;
    int n_split[3];       /* pairs in each part, indexed by BibleSplit */
    char *text;           /* private: the file's bytes; the strings point into it */
} BibleCorpus;

/* Load path (NULL or "": BIBLE_DEFAULT_PATH), gzip'd or plain. Returns 0, or
 * -1 with fail() and c left empty (bible_free is safe). */
int bible_load(BibleCorpus *c, const char *path);

/* "train", "valid", "test" ("?" for anything else). */
const char *bible_split_name(BibleSplit s);

/* The number of English words of a pair (runs of non-blank bytes): what the
 * BLEU-by-length buckets count. */
int bible_source_words(const BiblePair *p);
/* The same count for any text (a verse, a model's output). */
int bible_words(const char *text);

void bible_free(BibleCorpus *c);

#endif
