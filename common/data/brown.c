/* brown.c - the Brown corpus as token ids, split as Bengio et al. 2003 (see brown.h).
 *
 * Loading goes in four steps:
 *
 *   read_gzip      the whole decompressed text; refuses a missing, empty,
 *                  non-gzip, truncated or corrupt file
 *   parse_text     "# name" headers and "word/tag" tokens -> one stream of
 *                  words; each distinct word (a "type") is stored once and
 *                  the stream holds type numbers
 *   build_words    the <unk> rule and the word ids of each part, or
 *   build_chars    the text of each part and its characters as ids, or
 *   build_bpe      merges learned on the training words, each part's
 *                  words as BPE pieces
 *
 * Strings are found with small open-addressing hash tables: an array of
 * slots holding an index into an array of strings (-1 = empty slot), the
 * slot chosen by a hash of the string, the next slot tried on a collision.
 * Memory comes from xmalloc (util.h), which stops the program on out of
 * memory (a resource problem, not a problem of the file). */
#include "data/brown.h"
#include "util/error.h"
#include "util/reader.h"
#include "util/util.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const char UNK_TEXT[] = "<unk>";

/* ------------------------------------------------------ string hash tables */

/* FNV-1a: a simple hash that mixes every byte of the string. */
static uint64_t hash_string(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The slot where s is, or the empty slot where it would go. */
static int find_slot(const int *table, int mask, char *const *strings, const char *s) {
    int i = (int)(hash_string(s) & (uint64_t)mask);
    while (table[i] >= 0 && strcmp(strings[table[i]], s) != 0) i = (i + 1) & mask;
    return i;
}

/* A table of 2^k slots, k the smallest with 2^k >= 2 * n (so it is at most
 * half full and a search soon meets an empty slot). */
static int *new_table(int n, int *mask) {
    int size = 16;
    while (size < 2 * n) size *= 2;
    int *table = xmalloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) table[i] = -1;
    *mask = size - 1;
    return table;
}

/* ------------------------------------------------------------ reading */

/* The longest decompressed corpus read (the Brown corpus is 10 MB): a file
 * that decompresses to more, such as a gzip bomb, is refused when it passes
 * this mark instead of being read whole. */
#define BROWN_MAX_BYTES ((size_t)256 << 20)

/* The whole decompressed text, NUL-terminated (*len bytes before the NUL).
 * The file is opened once (a FIFO or a pipe is read like a file) and must
 * start with the gzip magic bytes 1f 8b (gzip would read a plain file as
 * if it were decompressed text); truncated or damaged data is an error.
 * NULL with fail() on any error. */
static char *read_gzip(const char *path, size_t *len) {
    FileReader r;
    if (reader_open(&r, path, READ_GZIP, BROWN_MAX_BYTES, "corpus") < 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", last_error());
        fail("%s (the Brown corpus ships in the repository as %s and is read relative to the current directory: "
             "run from the repository root, or give its path)", why, BROWN_DEFAULT_PATH);
        return NULL;
    }
    unsigned char magic[2] = {0, 0};
    size_t got = 0;
    if (reader_raw_prefix(&r, magic, 2, &got) < 0) goto error;
    if (got == 0) {
        fail("'%s' is empty: expected the gzip-compressed Brown corpus", path);
        goto error;
    }
    if (got < 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
        fail("'%s' is not a gzip file: it starts with the bytes 0x%02x 0x%02x, a gzip "
             "file with 0x1f 0x8b", path, magic[0], got < 2 ? 0 : magic[1]);
        goto error;
    }
    if (reader_rest(&r) < 0) goto error;
    return (char *)reader_take(&r, len);
error:
    reader_close(&r);
    return NULL;
}

/* ------------------------------------------------------------ parsing */

/* The file as a stream of words. */
typedef struct {
    char **type_word;       /* [n_types] each distinct word, pointing into the text */
    int n_types;
    int *table, mask;       /* hash table of type_word */
    int *type_of;           /* [n_words] the type of each word of the stream */
    unsigned char *ends;    /* [n_words] 1 when the word ends its sentence */
    int n_words;
    int n_sentences, n_files;
    char last_file[32];     /* the name in the latest "# name" header */
    BrownText *files;       /* [n_files] each text's name and first word */
} Stream;

static void stream_free(Stream *s) {
    free(s->type_word);
    free(s->table);
    free(s->type_of);
    free(s->ends);
    free(s->files);
    memset(s, 0, sizeof *s);
}

/* Room for up to max_words words (a word has at least one '/', so the
 * caller counts the slashes) and max_files texts (lines that start '#'). */
static void stream_alloc(Stream *s, int max_words, int max_files) {
    memset(s, 0, sizeof *s);
    s->files = xcalloc((size_t)max_files, sizeof(BrownText));
    s->type_word = xmalloc(sizeof(char *) * (size_t)max_words);
    s->type_of = xmalloc(sizeof(int) * (size_t)max_words);
    s->ends = xmalloc((size_t)max_words);
    s->table = new_table(1024, &s->mask);
}

/* Double the hash table when it is half full, re-placing every type. */
static void stream_grow_table(Stream *s) {
    if (2 * (s->n_types + 1) <= s->mask + 1) return;
    int mask;
    int *table = new_table(2 * (s->mask + 1), &mask);
    for (int t = 0; t < s->n_types; t++)
        table[find_slot(table, mask, s->type_word, s->type_word[t])] = t;
    free(s->table);
    s->table = table;
    s->mask = mask;
}

/* Append one word (NUL-terminated, inside the text) to the stream. */
static void stream_add(Stream *s, char *word) {
    stream_grow_table(s);
    int slot = find_slot(s->table, s->mask, s->type_word, word);
    if (s->table[slot] < 0) {
        s->type_word[s->n_types] = word;
        s->table[slot] = s->n_types++;
    }
    s->type_of[s->n_words] = s->table[slot];
    s->ends[s->n_words] = 0;
    s->n_words++;
}

/* A header line "# name": the next text of the file. Names must increase
 * (ca01 < ca02 < ... < cr09), so the stream is in the paper's file order. */
static int parse_header(Stream *s, char *line, int line_no, const char *path) {
    char *name = line + 1;
    while (*name == ' ' || *name == '\t') name++;
    size_t n = strcspn(name, " \t\r");
    int more = name[n + strspn(name + n, " \t\r")] != '\0';      /* text after the name */
    if (line[1] != ' ' || n == 0 || n >= sizeof s->last_file || more)
        return fail("'%s' line %d: expected a file header '# ca01' (one name after '# ')", path,
                    line_no);
    name[n] = '\0';
    if (s->n_files > 0 && strcmp(name, s->last_file) <= 0)
        return fail("'%s' line %d: file '%s' comes after '%s': the texts must be in order ca01 "
                    "... cr09", path, line_no, name, s->last_file);
    memcpy(s->last_file, name, n + 1);
    BrownText *t = &s->files[s->n_files++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->first_word = s->n_words;
    return 0;
}

/* One token "word/tag" (bytes [a, b) of a line): cut at the last '/' and
 * add the word. */
static int parse_token(Stream *s, char *a, char *b, int line_no, const char *path) {
    char *slash = b - 1;
    while (slash >= a && *slash != '/') slash--;
    const char *problem = NULL;
    if (slash < a) problem = "has no '/'";
    else if (slash == a) problem = "has an empty word";
    else if (slash == b - 1) problem = "has an empty tag";
    if (problem != NULL)
        return fail("'%s' line %d: the token '%.*s' %s: expected word/tag", path, line_no,
                    (int)(b - a > 40 ? 40 : b - a), a, problem);
    if (s->n_files == 0)
        return fail("'%s' line %d: words before the first file header '# ca01'", path, line_no);
    *slash = '\0';
    stream_add(s, a);
    return 0;
}

/* A sentence line: tokens separated by spaces or tabs. A line of blanks
 * only is no sentence. */
static int parse_sentence(Stream *s, char *line, int line_no, const char *path) {
    const char *blanks = " \t\r";
    int before = s->n_words;
    char *p = line + strspn(line, blanks);
    while (*p != '\0') {
        char *end = p + strcspn(p, blanks);
        char next = *end;
        if (parse_token(s, p, end, line_no, path) != 0) return -1;
        if (next == '\0') break;
        p = end + 1 + strspn(end + 1, blanks);
    }
    if (s->n_words > before) {
        s->ends[s->n_words - 1] = 1;
        s->n_sentences++;
    }
    return 0;
}

/* Every line of the text. The text is changed in place: each line and each
 * word gets a NUL at its end, so type_word can point into it. */
static int parse_text(Stream *s, char *text, size_t len, const char *path) {
    size_t slashes = 0, headers = 1;
    for (size_t i = 0; i < len; i++) {
        slashes += text[i] == '/';
        headers += text[i] == '#' && (i == 0 || text[i - 1] == '\n');
    }
    if (slashes > (size_t)INT32_MAX / 2) return fail("'%s' is too large", path);
    stream_alloc(s, (int)slashes + 1, (int)headers);

    char *p = text, *end = text + len;
    int line_no = 0;
    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL) eol = end;           /* the text has a NUL at end */
        *eol = '\0';
        line_no++;
        if (strlen(p) != (size_t)(eol - p))   /* a NUL would silently cut the line short */
            return fail("'%s' line %d: contains a NUL byte (expected text)", path, line_no);
        int rc = p[0] == '#' ? parse_header(s, p, line_no, path)
                             : parse_sentence(s, p, line_no, path);
        if (rc != 0) return -1;
        p = eol + 1;
    }
    return 0;
}

/* ------------------------------------------------------ the vocabulary */

/* Copy the V strings into one pool and index them for brown_id. */
static void set_tokens(BrownCorpus *c, char *const *strings, int V) {
    size_t bytes = 0;
    for (int i = 0; i < V; i++) bytes += strlen(strings[i]) + 1;
    c->V = V;
    c->tokens = xmalloc(sizeof(char *) * (size_t)V);
    c->pool = xmalloc(bytes);
    c->lookup = new_table(V, &c->lookup_mask);
    char *p = c->pool;
    for (int i = 0; i < V; i++) {
        size_t n = strlen(strings[i]) + 1;
        memcpy(p, strings[i], n);
        c->tokens[i] = p;
        p += n;
        int slot = find_slot(c->lookup, c->lookup_mask, c->tokens, c->tokens[i]);
        if (c->lookup[slot] < 0) c->lookup[slot] = i;
    }
}

static void alloc_part(BrownPart *part, int n) {
    part->ids = xmalloc(sizeof(int) * (size_t)n);
    part->n = n;
}

/* A word kept in the vocabulary, for sorting by frequency. */
typedef struct {
    const char *word;
    int count;
    int type;
} Ranked;

/* More frequent first; equal counts in byte order, so ids never depend on
 * how qsort breaks ties. */
static int by_count_then_text(const void *pa, const void *pb) {
    const Ranked *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return strcmp(a->word, b->word);
}

/* The words view: count, keep the words seen more than max_rare times, give
 * them ids 1.. by falling count, map every other word to <unk>. */
static void build_words(BrownCorpus *c, const Stream *s, const BrownConfig *cfg) {
    int *count = xcalloc((size_t)s->n_types, sizeof(int));
    Ranked *kept = xmalloc(sizeof(Ranked) * (size_t)s->n_types);
    char **strings = xmalloc(sizeof(char *) * ((size_t)s->n_types + 1));
    int *id_of_type = xmalloc(sizeof(int) * (size_t)s->n_types);

    int counted = cfg->vocab_from_all ? s->n_words : cfg->n_train;
    for (int i = 0; i < counted; i++) count[s->type_of[i]]++;
    int n_kept = 0;
    for (int t = 0; t < s->n_types; t++) {
        id_of_type[t] = BROWN_UNK;
        if (count[t] > cfg->max_rare) kept[n_kept++] = (Ranked){s->type_word[t], count[t], t};
    }
    qsort(kept, (size_t)n_kept, sizeof(Ranked), by_count_then_text);
    strings[0] = (char *)UNK_TEXT;
    for (int r = 0; r < n_kept; r++) {
        id_of_type[kept[r].type] = r + 1;
        strings[r + 1] = (char *)kept[r].word;
    }
    set_tokens(c, strings, n_kept + 1);

    /* The parts are consecutive runs of the stream: train, valid, test. */
    BrownPart *parts[3] = {&c->train, &c->valid, &c->test};
    int start = 0;
    for (int k = 0; k < 3; k++) {
        BrownPart *part = parts[k];
        alloc_part(part, part->n_words);
        for (int i = 0; i < part->n_words; i++) {
            part->ids[i] = id_of_type[s->type_of[start + i]];
            part->n_unk += part->ids[i] == BROWN_UNK;
        }
        start += part->n_words;
    }
    free(count);
    free(kept);
    free(strings);
    free(id_of_type);
}

/* The text of words [start, start + n): each word, then '\n' if it ends a
 * sentence, else ' '. Returns a malloc'd buffer of *len bytes (+ a NUL). */
static char *render_text(const Stream *s, int start, int n, int *len) {
    size_t bytes = 0;
    for (int i = start; i < start + n; i++) bytes += strlen(s->type_word[s->type_of[i]]) + 1;
    char *text = xmalloc(bytes + 1);
    char *p = text;
    for (int i = start; i < start + n; i++) {
        const char *w = s->type_word[s->type_of[i]];
        size_t k = strlen(w);
        memcpy(p, w, k);
        p += k;
        *p++ = s->ends[i] ? '\n' : ' ';
    }
    *p = '\0';
    *len = (int)bytes;
    return text;
}

/* The chars view: each part's text, its bytes as ids; the bytes of the
 * training text get ids 1.. in byte order, any other byte is <unk>. */
static void build_chars(BrownCorpus *c, const Stream *s) {
    BrownPart *parts[3] = {&c->train, &c->valid, &c->test};
    char *texts[3];
    int lens[3], start = 0;
    for (int k = 0; k < 3; k++) {
        texts[k] = render_text(s, start, parts[k]->n_words, &lens[k]);
        start += parts[k]->n_words;
    }

    int seen[256] = {0}, id_of_byte[256];
    for (int i = 0; i < lens[0]; i++) seen[(unsigned char)texts[0][i]] = 1;
    char one_char[256][2];
    char *strings[257];
    int V = 0;
    strings[V++] = (char *)UNK_TEXT;
    for (int b = 0; b < 256; b++) {
        id_of_byte[b] = seen[b] ? V : BROWN_UNK;
        if (!seen[b]) continue;
        one_char[b][0] = (char)b;
        one_char[b][1] = '\0';
        strings[V++] = one_char[b];
    }
    set_tokens(c, strings, V);

    for (int k = 0; k < 3; k++) {
        alloc_part(parts[k], lens[k]);
        for (int i = 0; i < lens[k]; i++) {
            parts[k]->ids[i] = id_of_byte[(unsigned char)texts[k][i]];
            parts[k]->n_unk += parts[k]->ids[i] == BROWN_UNK;
        }
        free(texts[k]);
    }
}

/* The bpe view: merges learned on the training part's distinct words with
 * their counts (what bpe_learn_texts would count in the training text: its
 * words are the stream's words, which hold no blank), then every distinct
 * word of the file encoded once (a word's pieces do not depend on its
 * neighbours) and each part written as its words' pieces. Returns 0, or -1
 * with fail() naming the file (a training word BPE refuses: not UTF-8, the
 * text </w> in it, longer than BPE_MAX_WORD bytes). */
static int build_bpe(BrownCorpus *c, const Stream *s, const BrownConfig *cfg, const char *path) {
    long *count = xcalloc((size_t)s->n_types, sizeof(long));
    for (int i = 0; i < cfg->n_train; i++) count[s->type_of[i]]++;
    const char **words = xmalloc(sizeof(char *) * (size_t)s->n_types);
    long *counts = xmalloc(sizeof(long) * (size_t)s->n_types);
    int n = 0;
    for (int t = 0; t < s->n_types; t++)
        if (count[t] > 0) {
            words[n] = s->type_word[t];
            counts[n++] = count[t];
        }
    int rc = bpe_learn(&c->bpe, words, counts, n, cfg->bpe_merges);
    free(words);
    free(counts);
    free(count);
    if (rc != 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", last_error());
        return fail("'%s': the byte-pair encoding of the training part: %s", path, why);
    }
    c->unk = BPE_UNK;

    /* tokens[id]: each piece as bpe_piece shows it */
    const Bpe *b = &c->bpe;
    char **strings = xmalloc(sizeof(char *) * (size_t)b->V);
    for (int id = 0; id < b->V; id++) {
        const size_t cap = strlen(b->text[id]) + sizeof BPE_END_TEXT + 8;   /* ("<unk>" etc. fit too) */
        strings[id] = xmalloc(cap);
        bpe_piece(b, id, strings[id], (int)cap);
    }
    set_tokens(c, strings, b->V);
    for (int id = 0; id < b->V; id++) free(strings[id]);
    free(strings);

    /* each distinct word's pieces: type t's are ids[start[t] .. start[t] + len[t]) */
    size_t total = 0;
    for (int t = 0; t < s->n_types; t++) total += strlen(s->type_word[t]) + 1;   /* at most a piece a byte, and </w> */
    int *pieces = xmalloc(sizeof(int) * total), *start = xmalloc(sizeof(int) * (size_t)s->n_types),
        *len = xmalloc(sizeof(int) * (size_t)s->n_types), *unk = xmalloc(sizeof(int) * (size_t)s->n_types);
    size_t at = 0;
    for (int t = 0; t < s->n_types && rc == 0; t++) {
        const int room = (int)(strlen(s->type_word[t]) + 1);
        const int k = bpe_encode(b, s->type_word[t], pieces + at, room, &unk[t]);
        if (k < 0) {
            char why[1024];
            snprintf(why, sizeof why, "%s", last_error());
            rc = fail("'%s': the byte-pair encoding of its words: %s", path, why);
            break;
        }
        start[t] = (int)at;
        len[t] = k;
        at += (size_t)k;
    }

    /* the parts, consecutive runs of the stream as in the other views */
    BrownPart *parts[3] = {&c->train, &c->valid, &c->test};
    int first = 0;
    for (int p = 0; p < 3 && rc == 0; p++) {
        BrownPart *part = parts[p];
        long n_ids = 0;
        for (int i = first; i < first + part->n_words; i++) n_ids += len[s->type_of[i]];
        if (n_ids > INT32_MAX) {
            rc = fail("'%s' is too large: its BPE pieces do not fit in an int", path);
            break;
        }
        alloc_part(part, (int)n_ids);
        int k = 0;
        for (int i = first; i < first + part->n_words; i++) {
            const int t = s->type_of[i];
            memcpy(part->ids + k, pieces + start[t], sizeof(int) * (size_t)len[t]);
            k += len[t];
            part->n_unk += unk[t];
        }
        first += part->n_words;
    }
    free(pieces);
    free(start);
    free(len);
    free(unk);
    return rc;
}

/* ------------------------------------------------------------ loading */

void brown_defaults(BrownConfig *cfg, BrownTokens kind) {
    memset(cfg, 0, sizeof *cfg);
    cfg->path = BROWN_DEFAULT_PATH;
    cfg->kind = kind;
    cfg->n_train = BROWN_N_TRAIN;
    cfg->n_valid = BROWN_N_VALID;
    cfg->max_rare = BROWN_MAX_RARE;
    cfg->vocab_from_all = 0;
    cfg->bpe_merges = BROWN_BPE_MERGES;
}

int brown_load(BrownCorpus *c, const char *path, BrownTokens kind) {
    BrownConfig cfg;
    brown_defaults(&cfg, kind);
    if (path != NULL && path[0] != '\0') cfg.path = path;
    return brown_load_config(c, &cfg);
}

static int check_config(const BrownConfig *cfg) {
    if (cfg->kind != BROWN_WORDS && cfg->kind != BROWN_CHARS && cfg->kind != BROWN_BPE)
        return fail("Brown corpus: unknown token kind %d (expected words, chars or bpe)", (int)cfg->kind);
    if (cfg->n_train < 1 || cfg->n_valid < 0 || cfg->max_rare < 0)
        return fail("Brown corpus: bad split: %d training words (at least 1), %d validation words "
                    "(at least 0), max_rare %d (at least 0)", cfg->n_train, cfg->n_valid, cfg->max_rare);
    if (cfg->bpe_merges < 0)
        return fail("Brown corpus: %d BPE merges asked for (expected 0 or more)", cfg->bpe_merges);
    return 0;
}

/* The split sizes, checked against the words the file has. */
static int set_split(BrownCorpus *c, const Stream *s, const BrownConfig *cfg, const char *path) {
    if (s->n_words == 0)
        return fail("'%s' holds no words: expected '# ca01' headers, each followed by lines of "
                    "word/tag tokens", path);
    if ((long)s->n_words <= (long)cfg->n_train + cfg->n_valid)
        return fail("'%s' has %d words, too few for %d training + %d validation words and a test "
                    "part", path, s->n_words, cfg->n_train, cfg->n_valid);
    c->train.n_words = cfg->n_train;
    c->valid.n_words = cfg->n_valid;
    c->test.n_words = s->n_words - cfg->n_train - cfg->n_valid;
    c->n_files = s->n_files;
    c->n_sentences = s->n_sentences;
    c->n_words = s->n_words;
    c->n_types = s->n_types;
    BrownPart *parts[3] = {&c->train, &c->valid, &c->test};   /* each word and its separator */
    for (int p = 0, i = 0; p < 3; p++)
        for (int end = i + parts[p]->n_words; i < end; i++)
            parts[p]->n_chars += (long)strlen(s->type_word[s->type_of[i]]) + 1;

    unsigned char *in_train = xcalloc((size_t)s->n_types, 1);
    for (int i = 0; i < cfg->n_train; i++) {
        c->n_train_types += !in_train[s->type_of[i]];
        in_train[s->type_of[i]] = 1;
    }
    free(in_train);
    return 0;
}

/* cfg->keep_texts: each "# name" text of the file, its words rendered as
 * the chars view renders them, into c->texts. */
static void keep_texts(BrownCorpus *c, const Stream *s) {
    c->texts = xcalloc((size_t)s->n_files, sizeof(BrownText));
    c->n_texts = s->n_files;
    for (int f = 0; f < s->n_files; f++) {
        BrownText *t = &c->texts[f];
        *t = s->files[f];
        t->n_words = (f + 1 < s->n_files ? s->files[f + 1].first_word : s->n_words) - t->first_word;
        t->text = render_text(s, t->first_word, t->n_words, &t->len);
    }
}

int brown_load_config(BrownCorpus *c, const BrownConfig *cfg) {
    memset(c, 0, sizeof *c);
    if (check_config(cfg) != 0) return -1;
    const char *path = cfg->path && cfg->path[0] ? cfg->path : BROWN_DEFAULT_PATH;
    size_t len = 0;
    char *text = read_gzip(path, &len);
    if (text == NULL) return -1;

    Stream s;
    memset(&s, 0, sizeof s);
    int rc = parse_text(&s, text, len, path);
    if (rc == 0) rc = set_split(c, &s, cfg, path);
    if (rc == 0) {
        c->kind = cfg->kind;
        c->unk = BROWN_UNK;
        if (cfg->kind == BROWN_WORDS) build_words(c, &s, cfg);
        else if (cfg->kind == BROWN_CHARS) build_chars(c, &s);
        else rc = build_bpe(c, &s, cfg, path);
    }
    if (rc == 0 && cfg->keep_texts) keep_texts(c, &s);
    stream_free(&s);
    free(text);
    if (rc != 0) brown_free(c);
    return rc;
}

void brown_free(BrownCorpus *c) {
    free(c->train.ids);
    free(c->valid.ids);
    free(c->test.ids);
    free(c->tokens);
    free(c->pool);
    free(c->lookup);
    bpe_free(&c->bpe);
    for (int f = 0; f < c->n_texts; f++) free(c->texts[f].text);
    free(c->texts);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------ ids and text */

uint32_t brown_vocab_crc(const BrownCorpus *c) {
    if (c->kind == BROWN_BPE) return bpe_crc(&c->bpe);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int id = 0; id < c->V; id++)   /* each token with its NUL: "ab","c" differs from "a","bc" */
        crc = crc32(crc, (const Bytef *)c->tokens[id], (uInt)strlen(c->tokens[id]) + 1);
    return (uint32_t)crc;
}

const char *brown_token(const BrownCorpus *c, int id) {
    if (id < 0 || id >= c->V) return "?";
    return c->tokens[id];
}

int brown_id(const BrownCorpus *c, const char *token) {
    if (c->lookup == NULL) return c->unk;
    int slot = find_slot(c->lookup, c->lookup_mask, c->tokens, token);
    return c->lookup[slot] >= 0 ? c->lookup[slot] : c->unk;
}

/* Append id to ids, or fail when there is no room. */
static int push_id(int *ids, int *n, int max_ids, int id) {
    if (*n >= max_ids) return fail("the text is too long: more than %d tokens", max_ids);
    ids[(*n)++] = id;
    return 0;
}

int brown_encode(const BrownCorpus *c, const char *text, int *ids, int max_ids) {
    if (c->kind == BROWN_BPE) return bpe_encode(&c->bpe, text, ids, max_ids, NULL);
    int n = 0;
    if (c->kind == BROWN_CHARS) {
        for (const char *p = text; *p; p++) {
            char one[2] = {*p, '\0'};
            if (push_id(ids, &n, max_ids, brown_id(c, one)) != 0) return -1;
        }
        return n;
    }
    const char *blanks = " \t\r\n";
    const char *p = text + strspn(text, blanks);
    while (*p != '\0') {
        size_t k = strcspn(p, blanks);
        char word[256];
        int id = BROWN_UNK;              /* a word this long is in no vocabulary */
        if (k < sizeof word) {
            memcpy(word, p, k);
            word[k] = '\0';
            id = brown_id(c, word);
        }
        if (push_id(ids, &n, max_ids, id) != 0) return -1;
        p += k;
        p += strspn(p, blanks);
    }
    return n;
}

int brown_decode(const BrownCorpus *c, const int *ids, int n, char *out, int outlen) {
    if (outlen <= 0) return fail("brown_decode: no room for the text");
    if (c->kind == BROWN_BPE) return bpe_decode(&c->bpe, ids, n, out, outlen);
    const char *sep = c->kind == BROWN_WORDS ? " " : "";
    int used = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const char *parts[2] = {i > 0 ? sep : "", brown_token(c, ids[i])};
        for (int k = 0; k < 2; k++) {
            int len = (int)strlen(parts[k]);
            if (used + len >= outlen) {
                int room = outlen - 1 - used;
                memcpy(out + used, parts[k], (size_t)room);
                out[outlen - 1] = '\0';
                return fail("brown_decode: the text of %d tokens does not fit in %d bytes", n, outlen);
            }
            memcpy(out + used, parts[k], (size_t)len + 1);
            used += len;
        }
    }
    return 0;
}

long brown_chars(const BrownCorpus *c, const int *ids, int n) {
    if (c->kind == BROWN_CHARS) return n;
    long chars = 0;
    for (int i = 0; i < n; i++) {
        const int id = ids[i];
        if (c->kind == BROWN_WORDS) chars += (long)strlen(brown_token(c, id)) + 1;
        else if (id == BPE_UNK) chars += 1;
        else if (id >= BPE_END_OF_WORD && id < c->V) chars += (long)strlen(c->bpe.text[id]) + c->bpe.ends[id];
        /* <pad> <bos> <eos>, and an id outside [0, V), spell nothing */
    }
    return chars;
}
