/* task_g2p.c - the "g2p" task (grapheme to phoneme): the letters of an English
 * word -> its pronunciation as ARPAbet phonemes, from the CMU Pronouncing
 * Dictionary (data/cmudict.dict.gz; data/README.md says where it comes from).
 *
 * The file has one pronunciation per line, the word, whitespace, then the
 * phonemes; a word's alternative pronunciations carry a suffix "(1)", "(2)":
 *
 *     ABDOMEN  AE0 B D OW1 M AH0 N
 *     ABDOMEN(1)  AE1 B D AH0 M AH0 N
 *
 * Loading:
 *   1. Every line is checked: a word, then one or more of the 39 phonemes,
 *      each with an optional stress digit 0-2; at most G2P_MAX_LEN (100)
 *      characters in a word and phonemes in a pronunciation (CMUdict's
 *      longest: 34 and 32), as in the reverse task. Anything else is an
 *      error naming the file, the line (and the limit). Blank lines and
 *      "# comments" are ignored.
 *   2. The stress digits are dropped (AH0, AH1 -> AH): 39 phoneme tokens.
 *   3. "WORD(1)" lines join WORD's list of pronunciations (a hash table maps a
 *      word to its entry). A pronunciation that is identical to one the word
 *      already has once stress is gone is dropped.
 *   4. Words with characters other than A-Z, apostrophe, period and hyphen
 *      (digits, underscores, accented letters) are skipped.
 *   5. Each word goes to train (90%), valid (5%) or test (5%) by a hash of its
 *      split key: the spelling with every apostrophe, period and hyphen
 *      removed (split_key() below). Spellings of one word that differ only in
 *      those characters share a key and so a side: ACCIDENT'S, ACCIDENTS' and
 *      ACCIDENTS are all ACCIDENTS, ADA'S and ADAS are ADAS, A. and A are A,
 *      so no test word is a train word with ' . - added or removed (a
 *      possessive 'S or S' needs no rule of its own). ACCIDENT is another key
 *      and may land on the other side, as in any split by word. No random
 *      numbers, so the split never changes, and every pronunciation of a word
 *      lands on the same side.
 *   6. Train: one example per (word, pronunciation). Valid/test: one example
 *      per word, refs = all its pronunciations (any of them counts as right),
 *      tgt = the first one in the file.
 * The words keep the dictionary's (alphabetical) order in each split. */
#include "data/dataset.h"
#include "data/dataset_tasks.h"
#include "util/error.h"
#include "util/reader.h"
#include "util/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_PHONEMES 39
#define G2P_MAX_LEN 100   /* characters in a word, phonemes in a pronunciation */
/* Characters in a line: room for the longest entry G2P_MAX_LEN allows
 * (100 letters, "(9)", 100 phonemes of up to 4 characters) and a comment;
 * CMUdict's longest line has 129. A longer line is refused before it is
 * parsed (an 8 MB line once asked for 8 GB). */
#define G2P_MAX_LINE 4096
/* The longest dictionary read (CMUdict is 3.7 MB): a file that decompresses
 * to more, such as a gzip bomb, is refused when it passes this mark. */
#define G2P_MAX_BYTES ((size_t)64 << 20)

/* The ARPAbet phonemes of CMUdict, without stress, alphabetical. */
static const char *const phonemes[N_PHONEMES] = {
    "AA", "AE", "AH", "AO", "AW", "AY", "B",  "CH", "D",  "DH", "EH", "ER", "EY",
    "F",  "G",  "HH", "IH", "IY", "JH", "K",  "L",  "M",  "N",  "NG", "OW", "OY",
    "P",  "R",  "S",  "SH", "T",  "TH", "UH", "UW", "V",  "W",  "Y",  "Z",  "ZH"};

static const char *const word_characters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ'.-";

/* One pronunciation: `len` phoneme ids starting at phones[start]. The
 * pronunciations of a word form a linked list through `next`. */
typedef struct { int start, len, next; } Pron;

/* One word: its spelling (points into the file buffer) and its list. */
typedef struct { const char *spelling; int first_pron, last_pron, n_prons; } Word;

/* Everything read from the file, in growing arrays. */
typedef struct {
    int *phones; int n_phones, cap_phones;
    Pron *prons; int n_prons, cap_prons;
    Word *words; int n_words, cap_words;
    int *table; uint64_t table_mask;   /* open addressing: word index or -1 */
    int skipped_lines, duplicate_prons;
} Dictionary;

static void *grow(void *array, int *capacity, int needed, size_t item_size) {
    if (needed <= *capacity) return array;
    int new_capacity = *capacity > 0 ? *capacity : 1024;
    while (new_capacity < needed) new_capacity *= 2;
    void *bigger = xmalloc(item_size * (size_t)new_capacity);
    if (array != NULL) memcpy(bigger, array, item_size * (size_t)*capacity);
    free(array);
    *capacity = new_capacity;
    return bigger;
}

/* Id in the target vocabulary of a phoneme without stress, or -1. The
 * vocabulary holds the 4 specials and then phonemes[] in order. */
static int phoneme_id(const char *text, int len) {
    for (int i = 0; i < N_PHONEMES; i++) {
        if ((int)strlen(phonemes[i]) == len && memcmp(phonemes[i], text, (size_t)len) == 0) {
            return 4 + i;
        }
    }
    return -1;
}

/* Index of the word spelled `spelling`, adding it when new. */
static int find_or_add_word(Dictionary *dict, const char *spelling) {
    uint64_t i = hash_string(spelling) & dict->table_mask;
    while (dict->table[i] >= 0) {
        if (strcmp(dict->words[dict->table[i]].spelling, spelling) == 0) return dict->table[i];
        i = (i + 1) & dict->table_mask;
    }
    dict->words = grow(dict->words, &dict->cap_words, dict->n_words + 1, sizeof(Word));
    Word *w = &dict->words[dict->n_words];
    w->spelling = spelling;
    w->first_pron = w->last_pron = -1;
    w->n_prons = 0;
    dict->table[i] = dict->n_words;
    return dict->n_words++;
}

/* Append the pronunciation held in the last `len` entries of phones to the
 * word, unless the word already has it (then those entries are taken back). */
static void add_pronunciation(Dictionary *dict, int word_index, int len) {
    Word *w = &dict->words[word_index];
    int start = dict->n_phones - len;
    for (int p = w->first_pron; p >= 0; p = dict->prons[p].next) {
        const Pron *old = &dict->prons[p];
        if (old->len == len &&
            memcmp(&dict->phones[old->start], &dict->phones[start], sizeof(int) * (size_t)len) == 0) {
            dict->n_phones = start;
            dict->duplicate_prons++;
            return;
        }
    }
    dict->prons = grow(dict->prons, &dict->cap_prons, dict->n_prons + 1, sizeof(Pron));
    Pron *pron = &dict->prons[dict->n_prons];
    pron->start = start;
    pron->len = len;
    pron->next = -1;
    if (w->last_pron >= 0) {
        dict->prons[w->last_pron].next = dict->n_prons;
    } else {
        w->first_pron = dict->n_prons;
    }
    w->last_pron = dict->n_prons;
    w->n_prons++;
    dict->n_prons++;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* If word ends in "(digits)", cut that suffix off (in place). Returns 0, or
 * -1 when the parentheses are there but malformed. */
static int strip_alternate_suffix(char *word) {
    size_t len = strlen(word);
    if (len == 0 || word[len - 1] != ')') return 0;
    char *open = strrchr(word, '(');
    if (open == NULL || open == word || open + 1 == word + len - 1) return -1;
    for (char *p = open + 1; p < word + len - 1; p++) {
        if (*p < '0' || *p > '9') return -1;
    }
    *open = '\0';
    return 0;
}

/* Parse one line (NUL-terminated, modified in place). */
static int parse_line(Dictionary *dict, char *line, const char *path, int line_number) {
    char *comment = strchr(line, '#');
    if (comment != NULL) *comment = '\0';
    char *p = line;
    while (is_space(*p)) p++;
    if (*p == '\0') return 0; /* blank line */

    char *word = p;
    while (*p != '\0' && !is_space(*p)) p++;
    char quoted[96];
    if (*p == '\0') {
        return fail("%s line %d: \"%s\" has no phonemes (expected a word, spaces, then phonemes "
                    "like \"AH0 B AW1 T\")", path, line_number, error_excerpt(word, quoted, sizeof quoted));
    }
    *p++ = '\0';
    if (strip_alternate_suffix(word) != 0) {
        return fail("%s line %d: \"%s\": an alternative pronunciation is marked WORD(n) with a "
                    "number n", path, line_number, error_excerpt(word, quoted, sizeof quoted));
    }
    if (strlen(word) > G2P_MAX_LEN) {
        return fail("%s line %d: the word \"%.24s...\" has %zu characters; at most %d fit (G2P_MAX_LEN)",
                    path, line_number, word, strlen(word), G2P_MAX_LEN);
    }

    int start = dict->n_phones, count = 0;
    for (;;) {
        while (is_space(*p)) p++;
        if (*p == '\0') break;
        char *symbol = p;
        while (*p != '\0' && !is_space(*p)) p++;
        int len = (int)(p - symbol);
        int base_len = len;
        if (len > 1 && symbol[len - 1] >= '0' && symbol[len - 1] <= '2') base_len--; /* stress */
        int id = phoneme_id(symbol, base_len);
        if (id < 0) {
            dict->n_phones = start;
            return fail("%s line %d: unknown phoneme \"%.*s%s\" (expected one of the 39 ARPAbet "
                        "phonemes such as AH or K, with an optional stress digit 0-2)",
                        path, line_number, len > 40 ? 40 : len, symbol, len > 40 ? "..." : "");
        }
        dict->phones = grow(dict->phones, &dict->cap_phones, dict->n_phones + 1, sizeof(int));
        dict->phones[dict->n_phones++] = id;
        count++;
    }
    if (count > G2P_MAX_LEN) {
        dict->n_phones = start;
        return fail("%s line %d: the pronunciation of \"%s\" has %d phonemes; at most %d fit (G2P_MAX_LEN)",
                    path, line_number, error_excerpt(word, quoted, sizeof quoted), count, G2P_MAX_LEN);
    }
    if (count == 0) {
        return fail("%s line %d: \"%s\" has no phonemes (expected a word, spaces, then phonemes "
                    "like \"AH0 B AW1 T\")", path, line_number, word);
    }

    if (word[strspn(word, word_characters)] != '\0') {
        /* A well-formed entry outside our alphabet (e.g. "C1", "AIR_FORCE"). */
        dict->n_phones = start;
        dict->skipped_lines++;
        return 0;
    }
    add_pronunciation(dict, find_or_add_word(dict, word), count);
    return 0;
}

/* The spelling without ' . - (key has room for strlen(spelling) + 1 chars). */
static void split_key(const char *spelling, char *key) {
    for (; *spelling; spelling++) {
        if (*spelling != '\'' && *spelling != '.' && *spelling != '-') *key++ = *spelling;
    }
    *key = '\0';
}

/* 0 = train (90%), 1 = valid (5%), 2 = test (5%), from the split key alone;
 * key is scratch space of at least strlen(spelling) + 1 chars. */
static int word_split(const char *spelling, char *key) {
    split_key(spelling, key);
    int bucket = (int)(hash_string(key) % 100);
    if (bucket < 90) return 0;
    if (bucket < 95) return 1;
    return 2;
}

static void encode_word(const Vocab *v, const char *spelling, int *ids) {
    for (int i = 0; spelling[i]; i++) ids[i] = vocab_char_id(v, spelling[i]);
}

/* Turn the dictionary into the three splits. Returns 0, or -1 with fail()
 * naming path and the counts when a split would be empty (a dictionary of a
 * few words: a model trained on it would report 0.00% on 0 test examples). */
static int build_splits(Dataset *d, const Dictionary *dict, const char *path) {
    int n_train = 0, n_valid = 0, n_test = 0, longest = 1;
    for (int w = 0; w < dict->n_words; w++) {
        int len = (int)strlen(dict->words[w].spelling);
        if (len > longest) longest = len;
    }
    int *sides = xmalloc(sizeof(int) * (size_t)dict->n_words);
    char *key = xmalloc((size_t)longest + 1);
    for (int w = 0; w < dict->n_words; w++) {
        const Word *word = &dict->words[w];
        int side = sides[w] = word_split(word->spelling, key);
        if (side == 0) n_train += word->n_prons;
        if (side == 1) n_valid++;
        if (side == 2) n_test++;
    }
    free(key);
    if (n_train == 0 || n_valid == 0 || n_test == 0) {
        free(sides);
        return fail("%s: %d word%s split into %d training, %d validation and %d test examples: expected at "
                    "least one in each (the split by word puts about 90%% / 5%% / 5%% of the words in them: a "
                    "dictionary of more words)", path, dict->n_words, dict->n_words == 1 ? "" : "s", n_train,
                    n_valid, n_test);
    }
    split_alloc(&d->train, n_train);
    split_alloc(&d->valid, n_valid);
    split_alloc(&d->test, n_test);

    int *src = xmalloc(sizeof(int) * (size_t)longest);
    int i_train = 0, i_valid = 0, i_test = 0;
    for (int w = 0; w < dict->n_words; w++) {
        const Word *word = &dict->words[w];
        int src_len = (int)strlen(word->spelling);
        encode_word(&d->src_vocab, word->spelling, src);
        int side = sides[w];
        if (side == 0) {
            for (int p = word->first_pron; p >= 0; p = dict->prons[p].next) {
                Example *e = &d->train.ex[i_train++];
                example_init(e, word->spelling, src, src_len, 1);
                example_set_ref(e, 0, &dict->phones[dict->prons[p].start], dict->prons[p].len);
            }
        } else {
            Example *e = side == 1 ? &d->valid.ex[i_valid++] : &d->test.ex[i_test++];
            example_init(e, word->spelling, src, src_len, word->n_prons);
            int r = 0;
            for (int p = word->first_pron; p >= 0; p = dict->prons[p].next) {
                example_set_ref(e, r++, &dict->phones[dict->prons[p].start], dict->prons[p].len);
            }
        }
    }
    free(src);
    free(sides);
    return 0;
}

int g2p_load(Dataset *d, const TaskConfig *cfg) {
    vocab_init(&d->src_vocab);
    for (const char *c = word_characters; *c; c++) {
        char token[2] = {*c, '\0'};
        vocab_add(&d->src_vocab, token);
    }
    vocab_init(&d->tgt_vocab);
    for (int i = 0; i < N_PHONEMES; i++) vocab_add(&d->tgt_vocab, phonemes[i]);
    d->src_sep = "";
    d->tgt_sep = " ";

    char path[1024];
    snprintf(path, sizeof path, "%s/cmudict.dict.gz", cfg->data_dir ? cfg->data_dir : "data");
    size_t size;
    char *text = read_file_at_most(path, READ_GZIP_BY_NAME, G2P_MAX_BYTES, "pronouncing dictionary", &size);
    if (text == NULL) {
        char why[512];
        snprintf(why, sizeof why, "%s", last_error());
        return fail("g2p: cannot read the CMU Pronouncing Dictionary: %s (it ships in the "
                    "repository as data/cmudict.dict.gz and is read relative to the current "
                    "directory: run from the repository root)", why);
    }

    /* One table slot per line at most, kept under half full. */
    int n_lines = 1;
    for (size_t i = 0; i < size; i++) n_lines += text[i] == '\n';
    uint64_t table_size = 16;
    while (table_size < 2 * (uint64_t)n_lines) table_size *= 2;
    Dictionary dict;
    memset(&dict, 0, sizeof dict);
    dict.table = xmalloc(sizeof(int) * table_size);
    for (uint64_t i = 0; i < table_size; i++) dict.table[i] = -1;
    dict.table_mask = table_size - 1;

    int rc = 0, line_number = 0;
    char *line = text;
    while (rc == 0 && line < text + size) {
        char *end = memchr(line, '\n', (size_t)(text + size - line));
        if (end == NULL) end = text + size;
        *end = '\0';
        line_number++;
        if ((size_t)(end - line) > G2P_MAX_LINE) {
            char quoted[96];
            rc = fail("%s line %d: a line of %zu characters (\"%s\"); at most %d fit (a word of at most %d "
                      "letters and its phonemes)", path, line_number, (size_t)(end - line),
                      error_excerpt(line, quoted, sizeof quoted), G2P_MAX_LINE, G2P_MAX_LEN);
            break;
        }
        if (strlen(line) != (size_t)(end - line)) {
            rc = fail("%s line %d: contains a NUL byte (expected text)", path, line_number);
            break;
        }
        rc = parse_line(&dict, line, path, line_number);
        line = end + 1;
    }
    if (rc == 0 && dict.n_words == 0) {
        rc = fail("%s: no entries (expected lines like \"ABOUT  AH0 B AW1 T\")", path);
    }
    if (rc == 0) rc = build_splits(d, &dict, path);

    free(dict.table);
    free(dict.words);
    free(dict.prons);
    free(dict.phones);
    free(text);
    return rc;
}
