/* bleu.c - sacreBLEU's 13a tokens, corpus and sentence BLEU (see bleu.h).
 *
 * The tokeniser follows sacreBLEU's regular expressions one after another,
 * each applied left to right without overlaps as Python's re.sub does. The
 * n-gram counts compare token strings directly: a sentence has at most a few
 * hundred tokens, so for each distinct n-gram of the output its count in the
 * output and in the reference is found by scanning (quadratic, simple). */
#include "train/bleu.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ 13a tokens */

/* The characters sacreBLEU's first rule sets apart:
 * [{-~] [[-`] [ -&] [(-+] [:-@] and /. */
static int is_13a_mark(unsigned char c) {
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Replace every `from` in s by `to` (to no longer than from). */
static void replace_all(char *s, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to);
    char *w = s;
    for (const char *r = s; *r;) {
        if (strncmp(r, from, nf) == 0) {
            memcpy(w, to, nt);
            w += nt;
            r += nf;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

char *bleu_tokenize_13a(const char *text) {
    size_t n = strlen(text);
    char *a = xmalloc(n + 3);
    /* The language-independent part, then the text between two spaces. */
    a[0] = ' ';
    memcpy(a + 1, text, n + 1);
    replace_all(a + 1, "<skipped>", "");
    replace_all(a + 1, "-\n", "");
    replace_all(a + 1, "\n", " ");
    replace_all(a + 1, "&quot;", "\"");
    replace_all(a + 1, "&amp;", "&");
    replace_all(a + 1, "&lt;", "<");
    replace_all(a + 1, "&gt;", ">");
    strcat(a, " ");
    /* Each rule reads a and writes a new string: the first at most triples
     * the text (one character -> three), each later one at most doubles it. */
    for (int rule = 0; rule < 4; rule++) {
        const unsigned char *s = (const unsigned char *)a;
        size_t len = strlen(a);
        char *b = xmalloc((rule == 0 ? 3 : 2) * len + 1);
        char *o = b;
        for (size_t i = 0; s[i];) {
            unsigned char c = s[i], d = s[i + 1];
            if (rule == 0 && is_13a_mark(c)) {                       /* ([marks]) -> " \1 " */
                *o++ = ' ', *o++ = (char)c, *o++ = ' ';
                i += 1;
            } else if (rule == 1 && d && !is_digit(c) && (d == '.' || d == ',')) {   /* ([^0-9])([.,]) -> "\1 \2 " */
                *o++ = (char)c, *o++ = ' ', *o++ = (char)d, *o++ = ' ';
                i += 2;
            } else if (rule == 2 && d && (c == '.' || c == ',') && !is_digit(d)) {   /* ([.,])([^0-9]) -> " \1 \2" */
                *o++ = ' ', *o++ = (char)c, *o++ = ' ', *o++ = (char)d;
                i += 2;
            } else if (rule == 3 && d && is_digit(c) && d == '-') {                  /* ([0-9])(-) -> "\1 \2 " */
                *o++ = (char)c, *o++ = ' ', *o++ = '-', *o++ = ' ';
                i += 2;
            } else {
                *o++ = (char)c;
                i += 1;
            }
        }
        *o = '\0';
        free(a);
        a = b;
    }
    /* Single spaces between tokens, none at the ends. */
    char *w = a;
    for (const char *r = a; *r;) {
        while (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r' || *r == '\v' || *r == '\f') r++;
        if (*r == '\0') break;
        if (w != a) *w++ = ' ';
        while (*r && !(*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r' || *r == '\v' || *r == '\f')) *w++ = *r++;
    }
    *w = '\0';
    return a;
}

/* ------------------------------------------------------------ n-grams */

/* The tokens of a 13a string, cut in place: pointers to each. */
typedef struct {
    char *text;
    char **tok;
    int n;
} Tokens;

static void tokens_of(Tokens *t, const char *detokenised) {
    t->text = bleu_tokenize_13a(detokenised);
    size_t len = strlen(t->text);
    t->tok = xmalloc(sizeof(char *) * (len / 2 + 2));
    t->n = 0;
    for (char *p = t->text; *p;) {
        t->tok[t->n++] = p;
        char *space = strchr(p, ' ');
        if (space == NULL) break;
        *space = '\0';
        p = space + 1;
    }
}

static void tokens_free(Tokens *t) {
    free(t->text);
    free(t->tok);
}

static int same_ngram(char *const *a, char *const *b, int n) {
    for (int k = 0; k < n; k++)
        if (strcmp(a[k], b[k]) != 0) return 0;
    return 1;
}

/* How many of the output's n-grams the reference has, each clipped to the
 * reference's count of it. */
static long clipped_matches(const Tokens *out, const Tokens *ref, int n) {
    long matches = 0;
    for (int i = 0; i + n <= out->n; i++) {
        int first = 1;                                   /* count each distinct n-gram once, at its first place */
        for (int j = 0; j < i && first; j++) first = !same_ngram(out->tok + i, out->tok + j, n);
        if (!first) continue;
        long in_out = 0, in_ref = 0;
        for (int j = i; j + n <= out->n; j++) in_out += same_ngram(out->tok + i, out->tok + j, n);
        for (int j = 0; j + n <= ref->n; j++) in_ref += same_ngram(out->tok + i, ref->tok + j, n);
        matches += in_out < in_ref ? in_out : in_ref;
    }
    return matches;
}

void bleu_init(BleuStats *s) { memset(s, 0, sizeof *s); }

/* The counts of one pair, into s. */
static void add_pair(BleuStats *s, const Tokens *out, const Tokens *ref) {
    for (int n = 1; n <= BLEU_ORDER; n++) {
        s->match[n - 1] += clipped_matches(out, ref, n);
        s->total[n - 1] += out->n >= n ? out->n - n + 1 : 0;
    }
    s->out_len += out->n;
    s->ref_len += ref->n;
    s->n++;
}

void bleu_add(BleuStats *s, const char *output, const char *reference) {
    Tokens out, ref;
    tokens_of(&out, output);
    tokens_of(&ref, reference);
    add_pair(s, &out, &ref);
    tokens_free(&out);
    tokens_free(&ref);
}

static double brevity_penalty(long c, long r) {
    if (c > r) return 1.0;
    if (c == 0) return 0.0;
    return exp(1.0 - (double)r / (double)c);
}

double bleu_score(const BleuStats *s) {
    double log_sum = 0.0;
    for (int n = 0; n < BLEU_ORDER; n++) {
        if (s->match[n] == 0 || s->total[n] == 0) return 0.0;
        log_sum += log((double)s->match[n] / (double)s->total[n]);
    }
    return 100.0 * brevity_penalty(s->out_len, s->ref_len) * exp(log_sum / BLEU_ORDER);
}

double bleu_sentence(const char *output, const char *reference) {
    BleuStats s;
    bleu_init(&s);
    bleu_add(&s, output, reference);
    if (s.match[0] == 0) return 0.0;
    double log_sum = 0.0;
    int k = 0;
    for (int n = 0; n < BLEU_ORDER; n++) {
        double total = s.total[n] > 0 ? (double)s.total[n] : 1.0;     /* NLTK: max(1, count) */
        double p = s.match[n] > 0 ? (double)s.match[n] / total : 1.0 / (ldexp(1.0, ++k) * total);
        log_sum += log(p);
    }
    return 100.0 * brevity_penalty(s.out_len, s.ref_len) * exp(log_sum / BLEU_ORDER);
}

/* ------------------------------------------------------------ by length */

int bleu_bucket(int source_words) {
    if (source_words <= 10) return 0;
    if (source_words > 40) return 4;
    return (source_words - 1) / 10;
}

const char *bleu_bucket_name(int bucket) {
    static const char *const names[BLEU_BUCKETS] = {"1-10", "11-20", "21-30", "31-40", "41+"};
    return bucket >= 0 && bucket < BLEU_BUCKETS ? names[bucket] : "?";
}

void bleu_by_length_init(BleuByLength *b) { memset(b, 0, sizeof *b); }

void bleu_by_length_add(BleuByLength *b, int source_words, const char *output, const char *reference) {
    Tokens out, ref;
    tokens_of(&out, output);
    tokens_of(&ref, reference);
    add_pair(&b->all, &out, &ref);
    add_pair(&b->bucket[bleu_bucket(source_words)], &out, &ref);
    tokens_free(&out);
    tokens_free(&ref);
}
