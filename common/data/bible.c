/* bible.c - read the English -> Spanish verse pairs (see bible.h).
 *
 * The whole file is read (at most BIBLE_MAX_BYTES, decompressed as it is
 * read), then cut in place: each line's end and each tab become a NUL, so
 * the pairs' strings point into the one buffer. Every line is checked before
 * it is kept; then the pairs are sorted by (book, chapter, verse) to find a
 * verse given twice and a chapter split across two parts. */
#include "data/bible.h"
#include "data/bpe.h"
#include "util/error.h"
#include "util/reader.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const COLUMN_NAMES[BIBLE_COLUMNS] = {"split",    "book",    "chapter", "verse",
                                                         "near_dup", "english", "spanish"};

const char *bible_split_name(BibleSplit s) {
    switch (s) {
    case BIBLE_TRAIN: return "train";
    case BIBLE_VALID: return "valid";
    case BIBLE_TEST: return "test";
    }
    return "?";
}

int bible_words(const char *text) {
    int n = 0;
    for (const char *s = text; *s;) {
        while (*s == ' ') s++;
        if (*s == '\0') break;
        n++;
        while (*s && *s != ' ') s++;
    }
    return n;
}

int bible_source_words(const BiblePair *p) { return bible_words(p->english); }

/* A whole number in [lo, hi] written with digits only. */
static int parse_number(const char *s, int lo, int hi, int *out) {
    if (*s == '\0' || strlen(s) > 6) return -1;
    int v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = 10 * v + (*s - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* The bytes of one field: UTF-8, no control byte. Returns 0, or -1 with
 * fail() naming the line, the column and the byte's offset in the line. */
static int check_text(const char *path, int line_no, const char *line, const char *field, int column) {
    size_t n = strlen(field);
    for (size_t i = 0; i < n;) {
        unsigned char b = (unsigned char)field[i];
        if (b < 0x20 || b == 0x7f)
            return fail("'%s' line %d: the %s column holds the control byte 0x%02x at byte %zu of the line "
                        "(expected text)", path, line_no, COLUMN_NAMES[column], b, (size_t)(field + i - line) + 1);
        int k = bpe_utf8_len(field + i, n - i);
        if (k == 0)
            return fail("'%s' line %d: the %s column is not UTF-8 at byte %zu of the line (the byte 0x%02x "
                        "starts no UTF-8 character there)", path, line_no, COLUMN_NAMES[column],
                        (size_t)(field + i - line) + 1, b);
        i += (size_t)k;
    }
    return 0;
}

/* One verse line (NUL-terminated, changed in place) into *p. */
static int parse_line(const char *path, int line_no, char *line, BiblePair *p) {
    char *field[BIBLE_COLUMNS];
    int n = 0;
    char *s = line;
    for (;;) {
        char *tab = strchr(s, '\t');
        if (n < BIBLE_COLUMNS) field[n] = s;
        n++;
        if (tab == NULL) break;
        *tab = '\0';
        s = tab + 1;
    }
    if (n != BIBLE_COLUMNS)
        return fail("'%s' line %d: %d column%s, expected %d separated by tabs (%s)", path, line_no, n,
                    n == 1 ? "" : "s", BIBLE_COLUMNS, "split, book, chapter, verse, near_dup, english, spanish");
    for (int k = 0; k < BIBLE_COLUMNS; k++) {
        if (field[k][0] == '\0') {
            if (k >= 5)
                return fail("'%s' line %d: the %s side is empty (expected the verse's text)", path, line_no,
                            COLUMN_NAMES[k]);
            return fail("'%s' line %d: the %s column is empty", path, line_no, COLUMN_NAMES[k]);
        }
        if (check_text(path, line_no, line, field[k], k) != 0) return -1;
    }
    char quote[80];
    if (strcmp(field[0], "train") == 0) p->split = BIBLE_TRAIN;
    else if (strcmp(field[0], "valid") == 0) p->split = BIBLE_VALID;
    else if (strcmp(field[0], "test") == 0) p->split = BIBLE_TEST;
    else
        return fail("'%s' line %d: the split is '%s', expected train, valid or test", path, line_no,
                    error_excerpt(field[0], quote, sizeof quote));
    if (parse_number(field[2], 1, BIBLE_MAX_CHAPTER, &p->chapter) != 0)
        return fail("'%s' line %d: the chapter is '%s', expected a number from 1 to %d", path, line_no,
                    error_excerpt(field[2], quote, sizeof quote), BIBLE_MAX_CHAPTER);
    if (parse_number(field[3], 1, BIBLE_MAX_VERSE, &p->verse) != 0)
        return fail("'%s' line %d: the verse is '%s', expected a number from 1 to %d", path, line_no,
                    error_excerpt(field[3], quote, sizeof quote), BIBLE_MAX_VERSE);
    if (parse_number(field[4], 0, 1, &p->near_dup) != 0)
        return fail("'%s' line %d: near_dup is '%s', expected 0 or 1", path, line_no,
                    error_excerpt(field[4], quote, sizeof quote));
    p->book = field[1];
    p->english = field[5];
    p->spanish = field[6];
    p->line = line_no;
    return 0;
}

static int by_reference(const void *pa, const void *pb) {
    const BiblePair *a = *(const BiblePair *const *)pa, *b = *(const BiblePair *const *)pb;
    int c = strcmp(a->book, b->book);
    if (c != 0) return c;
    if (a->chapter != b->chapter) return a->chapter < b->chapter ? -1 : 1;
    if (a->verse != b->verse) return a->verse < b->verse ? -1 : 1;
    return a->line < b->line ? -1 : 1;
}

/* No verse twice, no chapter in two parts. */
static int check_references(const BibleCorpus *c, const char *path) {
    const BiblePair **order = xmalloc(sizeof(BiblePair *) * (size_t)c->n);
    for (int i = 0; i < c->n; i++) order[i] = &c->pairs[i];
    qsort(order, (size_t)c->n, sizeof *order, by_reference);
    int rc = 0;
    for (int i = 1; i < c->n && rc == 0; i++) {
        const BiblePair *a = order[i - 1], *b = order[i];
        if (strcmp(a->book, b->book) != 0 || a->chapter != b->chapter) continue;
        char quote[80];
        if (a->verse == b->verse)
            rc = fail("'%s' line %d: %s %d:%d is given twice (first on line %d); expected each verse once", path,
                      b->line, error_excerpt(b->book, quote, sizeof quote), b->chapter, b->verse, a->line);
        else if (a->split != b->split)
            rc = fail("'%s' line %d: %s %d:%d is in %s but %s %d:%d (line %d) is in %s; the split is by whole "
                      "chapters, so every verse of a chapter must be in one part", path, b->line,
                      error_excerpt(b->book, quote, sizeof quote), b->chapter, b->verse, bible_split_name(b->split),
                      quote, a->chapter, a->verse, a->line, bible_split_name(a->split));
    }
    free(order);
    return rc;
}

static int parse_file(BibleCorpus *c, const char *path, char *text, size_t len) {
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    if (lines > (size_t)1 << 28) return fail("'%s' has too many lines", path);
    c->pairs = xcalloc(lines, sizeof(BiblePair));
    char *p = text, *end = text + len;
    int line_no = 0;
    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL) eol = end;
        line_no++;
        size_t n = (size_t)(eol - p);
        if (n > BIBLE_MAX_LINE)
            return fail("'%s' line %d is %zu bytes long, longer than the %d a verse line may be", path, line_no, n,
                        BIBLE_MAX_LINE);
        *eol = '\0';
        if (strlen(p) != n) return fail("'%s' line %d: contains a NUL byte (expected text)", path, line_no);
        if (line_no == 1) {
            if (strcmp(p, BIBLE_HEADER) != 0) {
                char quote[80];
                return fail("'%s' line 1 is '%s', expected the header line naming the %d columns: %s", path,
                            error_excerpt(p, quote, sizeof quote), BIBLE_COLUMNS,
                            "split, book, chapter, verse, near_dup, english, spanish (tab-separated)");
            }
        } else {
            BiblePair *pair = &c->pairs[c->n];
            if (parse_line(path, line_no, p, pair) != 0) return -1;
            c->n_split[pair->split]++;
            c->n++;
        }
        p = eol + 1;
    }
    if (line_no == 0) return fail("'%s' is empty: expected the header line and verse pairs", path);
    if (c->n_split[BIBLE_TRAIN] == 0 || c->n_split[BIBLE_TEST] == 0)
        return fail("'%s' has %d training and %d test pairs: expected at least one of each", path,
                    c->n_split[BIBLE_TRAIN], c->n_split[BIBLE_TEST]);
    return check_references(c, path);
}

int bible_load(BibleCorpus *c, const char *path) {
    memset(c, 0, sizeof *c);
    if (path == NULL || path[0] == '\0') path = BIBLE_DEFAULT_PATH;
    size_t len = 0;
    char *text = read_file_at_most(path, READ_GZIP, BIBLE_MAX_BYTES, "verse file", &len);
    if (text == NULL) {
        char why[1024];
        snprintf(why, sizeof why, "%s", last_error());
        return fail("%s (the verse pairs ship in the repository as %s and are read relative to the current "
                    "directory: run from the repository root, or give its path)", why, BIBLE_DEFAULT_PATH);
    }
    c->text = text;
    if (parse_file(c, path, text, len) != 0) {
        bible_free(c);
        return -1;
    }
    return 0;
}

void bible_free(BibleCorpus *c) {
    free(c->pairs);
    free(c->text);
    memset(c, 0, sizeof *c);
}
