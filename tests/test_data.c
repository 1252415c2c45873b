/* test_data.c - the vocabularies and the three data sets (vocab.c, dataset.c,
 * task_dates.c, task_reverse.c, task_g2p.c).
 *
 * What is checked: the vocabulary round trips through its text form; each
 * task is deterministic; the splits are disjoint the way dataset.h promises
 * (dates by calendar day, reverse by string, g2p by word, spellings that
 * differ only in ' . - on one side); every date style renders with the
 * source alphabet and no two (date, style) pairs give the same string;
 * weekdays are right; the CMU dictionary loads completely with stress removed
 * and alternates grouped; and every bad input (task name, sizes, missing or
 * malformed dictionary, a word or pronunciation over the length limit,
 * typed text) gets a clear error.
 *
 * Run from the repository root (the g2p tests read data/cmudict.dict.gz). */
/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "data/dataset.h"
#include "util/error.h"
#include "data/vocab.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>

/* ---- helpers ------------------------------------------------------------- */

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The source texts of a split, sorted (for membership tests with bsearch). */
static const char **sorted_sources(const Split *s) {
    const char **texts = malloc(sizeof(char *) * (size_t)(s->n > 0 ? s->n : 1));
    for (int i = 0; i < s->n; i++) texts[i] = s->ex[i].src_text;
    qsort(texts, (size_t)s->n, sizeof(char *), compare_strings);
    return texts;
}

static int contains(const char **sorted, int n, const char *text) {
    return bsearch(&text, sorted, (size_t)n, sizeof(char *), compare_strings) != NULL;
}

/* The target of an example as text. */
static void target_text(const Dataset *d, const Example *e, char *out, int outlen) {
    vocab_decode(&d->tgt_vocab, e->tgt, e->tgt_len, d->tgt_sep, out, outlen);
}

static void assert_error_mentions(const char *needle) {
    if (strstr(last_error(), needle) == NULL) {
        fail_msg("error \"%s\" does not mention \"%s\"", last_error(), needle);
    }
}

static void load_task(Dataset *d, const char *task, int n_train, int n_valid, int n_test,
                      uint64_t seed) {
    TaskConfig cfg;
    assert_int_equal(task_defaults(&cfg, task), 0);
    cfg.n_train = n_train;
    cfg.n_valid = n_valid;
    cfg.n_test = n_test;
    cfg.seed = seed;
    if (dataset_load(d, &cfg) != 0) {
        fail_msg("dataset_load(%s): %s", task, last_error());
    }
}

/* A temporary directory holding cmudict.dict.gz with the given text. */
static void write_dictionary(char *dir, size_t dirlen, const char *text) {
    snprintf(dir, dirlen, "/tmp/test_data_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char path[512];
    snprintf(path, sizeof path, "%s/cmudict.dict.gz", dir);
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
    assert_int_equal(gzclose(gz), Z_OK);
}

/* 100 short words ("AAAT  K AE1 T" ...), then text: enough words for every
 * split to get some (a dictionary with an empty split is refused), and the
 * text's last line stays the file's last. Free the result. */
static char *with_filler(const char *text) {
    char *out = malloc(100 * 16 + strlen(text) + 1);
    assert_non_null(out);
    size_t at = 0;
    for (int i = 0; i < 100; i++) at += (size_t)sprintf(out + at, "%c%cAT  K AE1 T\n", 'A' + i % 26, 'A' + i / 26);
    strcpy(out + at, text);
    return out;
}

static void remove_dictionary(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/cmudict.dict.gz", dir);
    unlink(path);
    rmdir(dir);
}

/* ---- vocab --------------------------------------------------------------- */

static void test_vocab_basics(void **state) {
    (void)state;
    Vocab v;
    vocab_init(&v);
    assert_int_equal(v.size, 4);
    assert_string_equal(vocab_token(&v, PAD_ID), "<pad>");
    assert_string_equal(vocab_token(&v, BOS_ID), "<bos>");
    assert_string_equal(vocab_token(&v, EOS_ID), "<eos>");
    assert_string_equal(vocab_token(&v, UNK_ID), "<unk>");
    assert_int_equal(vocab_add(&v, "a"), 4);
    assert_int_equal(vocab_add(&v, "AH"), 5);
    assert_int_equal(vocab_add(&v, "a"), 4); /* already there */
    assert_int_equal(v.size, 6);
    assert_int_equal(vocab_id(&v, "AH"), 5);
    assert_int_equal(vocab_id(&v, "ZZ"), UNK_ID);
    assert_int_equal(vocab_char_id(&v, 'a'), 4);
    assert_int_equal(vocab_char_id(&v, 'A'), UNK_ID); /* "AH" is not the character 'A' */
    assert_int_equal(vocab_char_id(&v, '<'), UNK_ID); /* nor is "<pad>" */
    assert_string_equal(vocab_token(&v, 99), "<?>");
    assert_int_equal(vocab_add(&v, "a-token-much-too-long-for-any-table"), -1);
    assert_error_mentions("a-token-much-too-long-for-any-table");
    assert_int_equal(vocab_add(&v, ""), -1);
    assert_int_equal(vocab_add(&v, "a\tb"), -1);
}

static void test_vocab_full(void **state) {
    (void)state;
    Vocab v;
    vocab_init(&v);
    char token[16];
    for (int i = 4; i < VOCAB_MAX; i++) {
        snprintf(token, sizeof token, "t%d", i);
        assert_int_equal(vocab_add(&v, token), i);
    }
    assert_int_equal(vocab_add(&v, "one-more"), -1);
    assert_error_mentions("full");
}

static void test_vocab_serialize_round_trip(void **state) {
    (void)state;
    Vocab v, back;
    vocab_init(&v);
    const char *tokens[] = {" ", ",", "a", "AH", "ZH", "-"};
    for (int i = 0; i < 6; i++) vocab_add(&v, tokens[i]);
    char text[1024];
    assert_int_equal(vocab_serialize(&v, text, sizeof text), 0);
    assert_string_equal(text, "<pad>\t<bos>\t<eos>\t<unk>\t \t,\ta\tAH\tZH\t-");
    assert_int_equal(vocab_deserialize(&back, text), 0);
    assert_int_equal(back.size, v.size);
    for (int i = 0; i < v.size; i++) assert_string_equal(back.tokens[i], v.tokens[i]);

    /* A trailing newline is fine (it is one line of a file). */
    strcat(text, "\n");
    assert_int_equal(vocab_deserialize(&back, text), 0);
    assert_int_equal(back.size, v.size);

    /* Too small a buffer. */
    char small[10];
    assert_int_equal(vocab_serialize(&v, small, sizeof small), -1);
}

static void test_vocab_deserialize_rejects(void **state) {
    (void)state;
    Vocab v;
    vocab_init(&v);
    vocab_add(&v, "x");
    assert_int_equal(vocab_deserialize(&v, "<pad>\t<bos>\t<unk>\t<eos>\ta"), -1);
    assert_error_mentions("<eos>");
    assert_int_equal(vocab_deserialize(&v, "<pad>\t<bos>\t<eos>\t<unk>\ta\ta"), -1);
    assert_error_mentions("twice");
    assert_int_equal(vocab_deserialize(&v, "<pad>\t<bos>\t<eos>\t<unk>\ta\t\tb"), -1);
    assert_error_mentions("empty");
    assert_int_equal(vocab_deserialize(&v, "<pad>\t<bos>"), -1);
    assert_int_equal(vocab_deserialize(&v, ""), -1);
    /* A failed call leaves the vocabulary as it was. */
    assert_int_equal(v.size, 5);
    assert_string_equal(v.tokens[4], "x");
}

static void test_vocab_decode(void **state) {
    (void)state;
    Vocab v;
    vocab_init(&v);
    int a = vocab_add(&v, "a"), b = vocab_add(&v, "b"), ah = vocab_add(&v, "AH");
    char out[64];
    int ids[] = {BOS_ID, a, PAD_ID, b, a, EOS_ID, b};
    vocab_decode(&v, ids, 7, "", out, sizeof out);
    assert_string_equal(out, "aba");
    int phones[] = {ah, b, ah};
    vocab_decode(&v, phones, 3, " ", out, sizeof out);
    assert_string_equal(out, "AH b AH");
    vocab_decode(&v, phones, 0, " ", out, sizeof out);
    assert_string_equal(out, "");
    /* Truncation keeps a terminated string. */
    char tiny[4];
    vocab_decode(&v, phones, 3, " ", tiny, sizeof tiny);
    assert_int_equal(strlen(tiny), 3);
}

/* ---- task selection and sizes -------------------------------------------- */

static void test_task_defaults(void **state) {
    (void)state;
    TaskConfig cfg;
    assert_int_equal(task_defaults(&cfg, "dates"), 0);
    assert_string_equal(cfg.task, "dates");
    assert_int_equal(cfg.n_train, 50000);
    assert_int_equal(cfg.n_valid, 1000);
    assert_int_equal(cfg.n_test, 2000);
    assert_int_equal(cfg.min_len, 4);
    assert_int_equal(cfg.max_len, 20);
    assert_true(cfg.seed == 1234);
    assert_string_equal(cfg.data_dir, "data");
    assert_int_equal(task_defaults(&cfg, "reverse"), 0);
    assert_int_equal(task_defaults(&cfg, "g2p"), 0);
    assert_int_equal(task_defaults(&cfg, "translate"), 0);   /* the training verses' words */
    assert_int_equal(cfg.min_len, 1);
    assert_int_equal(cfg.max_len, TRANSLATE_MAX_WORDS);

    clear_error();
    assert_int_equal(task_defaults(&cfg, "french"), -1);
    assert_error_mentions("french");
    assert_error_mentions("dates, reverse, g2p or translate");
}

static void test_dataset_load_rejects_bad_config(void **state) {
    (void)state;
    TaskConfig cfg;
    Dataset d;
    task_defaults(&cfg, "dates");
    cfg.task = "sorting";
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("sorting");

    task_defaults(&cfg, "dates");
    cfg.n_train = 0;
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("n_train");

    task_defaults(&cfg, "reverse");
    cfg.n_test = -5;
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("n_test");

    /* More (day, style) pairs than the train days allow. */
    task_defaults(&cfg, "dates");
    cfg.n_train = 2000000;
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("train");
    dataset_free(&d); /* safe after a failed load */
}

/* ---- dates --------------------------------------------------------------- */

static void test_dates_styles_exactly(void **state) {
    (void)state;
    /* Saturday 2026-11-21 in every style: this is the table in task_dates.c. */
    const char *expected[DATE_N_FORMATS] = {
        "Saturday, 21 November 2026", "11/21/26", "21st of Nov. 2026", "2026 Nov 21",
        "21.11.2026", "November 21, 2026", "nov 21 2026", "21 NOV 2026", "Sat 21 Nov 2026",
        "21-11-2026", "the 21st of November, 2026", "11/21/2026", "2026/11/21",
        "Sat, Nov 21, 2026", "21 November 2026", "November 21st, 2026",
        "Saturday, November 21, 2026", "21 Nov 26", "21-Nov-2026", "21st November 2026"};
    char out[64];
    for (int f = 0; f < DATE_N_FORMATS; f++) {
        date_format(2026, 11, 21, f, out, sizeof out);
        assert_string_equal(out, expected[f]);
    }
    /* Padding, "May" without a period, two-digit years. */
    date_format(2026, 1, 4, 1, out, sizeof out);
    assert_string_equal(out, "1/4/26");
    date_format(2026, 1, 4, 11, out, sizeof out);
    assert_string_equal(out, "01/04/2026");
    date_format(2005, 1, 4, 17, out, sizeof out);
    assert_string_equal(out, "4 Jan 05");
    date_format(2026, 5, 4, 2, out, sizeof out);
    assert_string_equal(out, "4th of May 2026");
    date_format(2026, 1, 4, 7, out, sizeof out);
    assert_string_equal(out, "04 JAN 2026");
    /* An unknown style gives an empty string. */
    date_format(2026, 1, 4, DATE_N_FORMATS, out, sizeof out);
    assert_string_equal(out, "");
}

static void test_dates_weekdays_and_ordinals(void **state) {
    (void)state;
    struct { int y, m, d; const char *text; } cases[] = {
        {2026, 11, 21, "Saturday, 21 November 2026"},
        {2000, 1, 1, "Saturday, 1 January 2000"},
        {1969, 7, 20, "Sunday, 20 July 1969"},
        {2024, 2, 29, "Thursday, 29 February 2024"},
        {1950, 1, 1, "Sunday, 1 January 1950"},
        {2049, 12, 31, "Friday, 31 December 2049"},
        {2001, 9, 11, "Tuesday, 11 September 2001"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        date_format(cases[i].y, cases[i].m, cases[i].d, 0, out, sizeof out);
        assert_string_equal(out, cases[i].text);
    }
    struct { int day; const char *text; } ordinals[] = {
        {1, "1st"}, {2, "2nd"}, {3, "3rd"}, {4, "4th"}, {11, "11th"}, {12, "12th"},
        {13, "13th"}, {21, "21st"}, {22, "22nd"}, {23, "23rd"}, {30, "30th"}, {31, "31st"}};
    for (size_t i = 0; i < sizeof ordinals / sizeof ordinals[0]; i++) {
        date_format(2026, 3, ordinals[i].day, 19, out, sizeof out);
        assert_true(strncmp(out, ordinals[i].text, strlen(ordinals[i].text)) == 0);
        assert_true(out[strlen(ordinals[i].text)] == ' ');
    }
}

static int days_in_month(int y, int m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Every style of every day of 1950..2049 is a distinct string, so no input
 * means two dates; and most styles put the year last. */
static void test_dates_unambiguous(void **state) {
    (void)state;
    int capacity = 36525 * DATE_N_FORMATS, n = 0;
    char **texts = malloc(sizeof(char *) * (size_t)capacity);
    char out[64];
    for (int y = 1950; y <= 2049; y++) {
        for (int m = 1; m <= 12; m++) {
            for (int d = 1; d <= days_in_month(y, m); d++) {
                for (int f = 0; f < DATE_N_FORMATS; f++) {
                    date_format(y, m, d, f, out, sizeof out);
                    texts[n++] = strdup(out);
                }
            }
        }
    }
    assert_int_equal(n, capacity);
    qsort(texts, (size_t)n, sizeof(char *), compare_strings);
    for (int i = 1; i < n; i++) {
        if (strcmp(texts[i - 1], texts[i]) == 0) {
            fail_msg("\"%s\" comes from two different (date, style) pairs", texts[i]);
        }
    }
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);

    int year_last = 0;
    for (int f = 0; f < DATE_N_FORMATS; f++) {
        date_format(2026, 11, 21, f, out, sizeof out);
        size_t len = strlen(out);
        if (len >= 2 && strcmp(out + len - 2, "26") == 0) year_last++;
    }
    assert_true(year_last >= 15);
    assert_true(year_last < DATE_N_FORMATS); /* and a few put it first */
}

/* Every style renders with the source alphabet, and dataset_encode_source
 * takes it. */
static void test_dates_styles_in_vocab(void **state) {
    (void)state;
    Dataset d;
    load_task(&d, "dates", 10, 1, 1, 1234);
    int dates[][3] = {{1950, 1, 1}, {2049, 12, 31}, {2000, 2, 29}, {2026, 11, 21},
                      {1999, 9, 9}, {2013, 5, 3}, {1987, 8, 22}, {2032, 6, 12}};
    char out[64];
    int ids[64], len;
    for (size_t i = 0; i < sizeof dates / sizeof dates[0]; i++) {
        for (int f = 0; f < DATE_N_FORMATS; f++) {
            date_format(dates[i][0], dates[i][1], dates[i][2], f, out, sizeof out);
            assert_true(strlen(out) > 0);
            for (const char *p = out; *p; p++) {
                assert_int_not_equal(vocab_char_id(&d.src_vocab, *p), UNK_ID);
            }
            assert_int_equal(dataset_encode_source(&d, out, ids, 64, &len), 0);
            assert_int_equal(len, (int)strlen(out));
        }
    }
    /* Targets: digits and '-'. */
    assert_int_equal(d.tgt_vocab.size, 4 + 11);
    assert_string_equal(d.tgt_sep, "");
    assert_string_equal(d.src_sep, "");
    dataset_free(&d);
}

static void assert_same_split(const Split *a, const Split *b) {
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_string_equal(a->ex[i].src_text, b->ex[i].src_text);
        assert_int_equal(a->ex[i].src_len, b->ex[i].src_len);
        assert_int_equal(a->ex[i].tgt_len, b->ex[i].tgt_len);
        assert_memory_equal(a->ex[i].src, b->ex[i].src, sizeof(int) * (size_t)a->ex[i].src_len);
        assert_memory_equal(a->ex[i].tgt, b->ex[i].tgt, sizeof(int) * (size_t)a->ex[i].tgt_len);
    }
}

static int same_sources(const Split *a, const Split *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        if (strcmp(a->ex[i].src_text, b->ex[i].src_text) != 0) return 0;
    }
    return 1;
}

static void test_dates_deterministic(void **state) {
    (void)state;
    Dataset a, b, c;
    load_task(&a, "dates", 3000, 200, 300, 1234);
    load_task(&b, "dates", 3000, 200, 300, 1234);
    load_task(&c, "dates", 3000, 200, 300, 99);
    assert_same_split(&a.train, &b.train);
    assert_same_split(&a.valid, &b.valid);
    assert_same_split(&a.test, &b.test);
    assert_false(same_sources(&a.train, &c.train));
    assert_false(same_sources(&a.test, &c.test));
    dataset_free(&a);
    dataset_free(&b);
    dataset_free(&c);
}

/* Index of an ISO date "YYYY-MM-DD" in a (year, month, day) grid. */
static int iso_index(const char *iso) {
    int y, m, d;
    assert_int_equal(sscanf(iso, "%4d-%2d-%2d", &y, &m, &d), 3);
    assert_true(y >= 1950 && y <= 2049);
    assert_true(m >= 1 && m <= 12);
    assert_true(d >= 1 && d <= days_in_month(y, m));
    return ((y - 1950) * 12 + (m - 1)) * 31 + (d - 1);
}

static void test_dates_splits_disjoint_by_day(void **state) {
    (void)state;
    Dataset d;
    load_task(&d, "dates", 50000, 1000, 2000, 1234);
    int n_cells = 100 * 12 * 31;
    unsigned char *side = calloc((size_t)n_cells, 1); /* bit 0 train, 1 valid, 2 test */
    const Split *splits[3] = {&d.train, &d.valid, &d.test};
    char iso[64];
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < splits[s]->n; i++) {
            const Example *e = &splits[s]->ex[i];
            target_text(&d, e, iso, sizeof iso);
            assert_int_equal(strlen(iso), 10);
            assert_int_equal(e->n_refs, 1);
            assert_ptr_equal(e->tgt, e->refs[0]);
            side[iso_index(iso)] |= (unsigned char)(1 << s);
        }
    }
    int test_days = 0, train_days = 0;
    for (int i = 0; i < n_cells; i++) {
        /* A day belongs to one split only. */
        assert_true(side[i] == 0 || side[i] == 1 || side[i] == 2 || side[i] == 4);
        test_days += side[i] == 4;
        train_days += side[i] == 1;
    }
    assert_true(test_days > 1000);
    assert_true(train_days > 20000);
    free(side);

    /* No (day, style) pair is drawn twice within a split. */
    const char **texts = sorted_sources(&d.train);
    for (int i = 1; i < d.train.n; i++) assert_true(strcmp(texts[i - 1], texts[i]) != 0);
    free(texts);

    assert_int_equal(d.max_tgt_len, 10);
    assert_true(d.max_src_len >= 20 && d.max_src_len <= 40);
    dataset_free(&d);
}

/* The source text of an example is what its source ids say, and its target
 * is that date in ISO form. */
static void test_dates_examples_consistent(void **state) {
    (void)state;
    Dataset d;
    load_task(&d, "dates", 500, 50, 50, 7);
    char text[128], iso[32], again[64];
    for (int i = 0; i < d.train.n; i++) {
        const Example *e = &d.train.ex[i];
        vocab_decode(&d.src_vocab, e->src, e->src_len, "", text, sizeof text);
        assert_string_equal(text, e->src_text);
        target_text(&d, e, iso, sizeof iso);
        int y, m, dd, found = 0;
        sscanf(iso, "%d-%d-%d", &y, &m, &dd);
        for (int f = 0; f < DATE_N_FORMATS && !found; f++) {
            date_format(y, m, dd, f, again, sizeof again);
            found = strcmp(again, e->src_text) == 0;
        }
        assert_true(found);
    }
    dataset_free(&d);
}

/* ---- reverse ------------------------------------------------------------- */

static void test_reverse_targets_and_lengths(void **state) {
    (void)state;
    TaskConfig cfg;
    task_defaults(&cfg, "reverse");
    cfg.n_train = 5000;
    Dataset d;
    assert_int_equal(dataset_load(&d, &cfg), 0);
    const Split *splits[3] = {&d.train, &d.valid, &d.test};
    int shortest = 1000, longest = 0;
    char target[128];
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < splits[s]->n; i++) {
            const Example *e = &splits[s]->ex[i];
            int n = (int)strlen(e->src_text);
            assert_int_equal(e->src_len, n);
            assert_int_equal(e->tgt_len, n);
            for (int k = 0; k < n; k++) {
                assert_true(e->src_text[k] >= 'a' && e->src_text[k] <= 'z');
                assert_int_equal(e->tgt[k], e->src[n - 1 - k]);
            }
            target_text(&d, e, target, sizeof target);
            for (int k = 0; k < n; k++) assert_true(target[k] == e->src_text[n - 1 - k]);
            if (n < shortest) shortest = n;
            if (n > longest) longest = n;
        }
    }
    assert_int_equal(shortest, 4);
    assert_int_equal(longest, 20);
    assert_int_equal(d.max_src_len, 20);
    assert_int_equal(d.max_tgt_len, 20);
    assert_int_equal(d.src_vocab.size, 30);
    dataset_free(&d);
}

static void test_reverse_disjoint_and_deterministic(void **state) {
    (void)state;
    Dataset a, b, c;
    load_task(&a, "reverse", 20000, 1000, 2000, 1234);
    load_task(&b, "reverse", 20000, 1000, 2000, 1234);
    load_task(&c, "reverse", 30000, 1000, 2000, 1234);
    assert_same_split(&a.train, &b.train);
    assert_same_split(&a.test, &b.test);
    /* The test split does not depend on n_train. */
    assert_same_split(&a.test, &c.test);
    assert_same_split(&a.valid, &c.valid);

    const char **train = sorted_sources(&a.train);
    const char **valid = sorted_sources(&a.valid);
    for (int i = 1; i < a.train.n; i++) assert_true(strcmp(train[i - 1], train[i]) != 0);
    for (int i = 0; i < a.test.n; i++) {
        assert_false(contains(train, a.train.n, a.test.ex[i].src_text));
        assert_false(contains(valid, a.valid.n, a.test.ex[i].src_text));
    }
    for (int i = 0; i < a.valid.n; i++) {
        assert_false(contains(train, a.train.n, a.valid.ex[i].src_text));
    }
    free(train);
    free(valid);
    dataset_free(&a);
    dataset_free(&b);
    dataset_free(&c);
}

static void test_reverse_length_limits(void **state) {
    (void)state;
    TaskConfig cfg;
    Dataset d;
    task_defaults(&cfg, "reverse");
    cfg.n_train = 200;
    cfg.n_valid = 20;
    cfg.n_test = 20;
    cfg.min_len = 100;
    cfg.max_len = 100;
    assert_int_equal(dataset_load(&d, &cfg), 0);
    assert_int_equal(d.max_src_len, 100);
    dataset_free(&d);

    cfg.max_len = 101;
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("100");
    cfg.min_len = 8;
    cfg.max_len = 5;
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("8..5");
    cfg.min_len = 0;
    cfg.max_len = 5;
    assert_int_equal(dataset_load(&d, &cfg), -1);

    /* Only 26 strings of length 1: asking for 60 fails instead of looping. */
    cfg.min_len = 1;
    cfg.max_len = 1;
    cfg.n_train = 60;
    cfg.n_valid = 1;
    cfg.n_test = 1;
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("distinct");
    dataset_free(&d);
}

/* ---- g2p ----------------------------------------------------------------- */

/* Find the example whose source is `word` in a split (-1 if absent). */
static int find_word(const Split *s, const char *word) {
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->ex[i].src_text, word) == 0) return i;
    }
    return -1;
}

static void test_g2p_full_dictionary(void **state) {
    (void)state;
    Dataset d;
    TaskConfig cfg;
    task_defaults(&cfg, "g2p");
    assert_int_equal(dataset_load(&d, &cfg), 0);

    /* Every one of the 133,784 lines is accounted for: 127 lines have words
     * outside A-Z ' . - and 315 repeat a pronunciation once stress is gone
     * (numbers in data/README.md). */
    long pronunciations = d.train.n, words_valid_test = d.valid.n + d.test.n;
    for (int i = 0; i < d.valid.n; i++) pronunciations += d.valid.ex[i].n_refs;
    for (int i = 0; i < d.test.n; i++) pronunciations += d.test.ex[i].n_refs;
    assert_int_equal(pronunciations + 127 + 315, 133784);
    assert_int_equal(d.train.n, 120171);
    assert_int_equal(d.valid.n, 6132);
    assert_int_equal(d.test.n, 6208);
    assert_true(words_valid_test > 0);
    assert_int_equal(d.max_src_len, 34);
    assert_int_equal(d.max_tgt_len, 32);

    /* Stress removed: 39 phonemes, none with a digit. */
    assert_int_equal(d.tgt_vocab.size, 4 + 39);
    for (int i = 4; i < d.tgt_vocab.size; i++) {
        assert_null(strpbrk(d.tgt_vocab.tokens[i], "0123456789"));
    }
    assert_string_equal(d.tgt_sep, " ");
    assert_string_equal(d.src_sep, "");

    /* No valid or test word in train. */
    const char **train = sorted_sources(&d.train);
    for (int i = 0; i < d.test.n; i++) assert_false(contains(train, d.train.n, d.test.ex[i].src_text));
    for (int i = 0; i < d.valid.n; i++) assert_false(contains(train, d.train.n, d.valid.ex[i].src_text));
    free(train);

    /* Each valid/test word is one example. */
    const char **test = sorted_sources(&d.test);
    for (int i = 1; i < d.test.n; i++) assert_true(strcmp(test[i - 1], test[i]) != 0);
    free(test);

    /* Known entries. */
    char text[256];
    int i = find_word(&d.train, "ABOUT");
    assert_true(i >= 0);
    target_text(&d, &d.train.ex[i], text, sizeof text);
    assert_string_equal(text, "AH B AW T");
    /* READ has two pronunciations: two training examples, in file order. */
    i = find_word(&d.train, "READ");
    assert_true(i >= 0 && i + 1 < d.train.n);
    assert_string_equal(d.train.ex[i + 1].src_text, "READ");
    target_text(&d, &d.train.ex[i], text, sizeof text);
    assert_string_equal(text, "R EH D");
    target_text(&d, &d.train.ex[i + 1], text, sizeof text);
    assert_string_equal(text, "R IY D");
    /* COOPERATION (test) keeps its three pronunciations as refs. */
    i = find_word(&d.test, "COOPERATION");
    assert_true(i >= 0);
    const Example *e = &d.test.ex[i];
    assert_int_equal(e->n_refs, 3);
    assert_ptr_equal(e->tgt, e->refs[0]);
    const char *expected[3] = {"K OW AA P ER EY SH AH N", "K W AA P ER EY SH AH N",
                               "K W AO P ER EY SH AH N"};
    for (int r = 0; r < 3; r++) {
        vocab_decode(&d.tgt_vocab, e->refs[r], e->ref_lens[r], " ", text, sizeof text);
        assert_string_equal(text, expected[r]);
    }
    assert_true(find_word(&d.valid, "ACCEPT") >= 0);
    /* Skipped: words with digits or underscores. */
    assert_int_equal(find_word(&d.train, "C1"), -1);
    assert_int_equal(find_word(&d.train, "AIR_FORCE"), -1);
    dataset_free(&d);
}

/* The split key of data/README.md: the spelling without ' . - */
static char *g2p_split_key(const char *spelling) {
    char *key = malloc(strlen(spelling) + 1), *k = key;
    for (; *spelling; spelling++) {
        if (strchr("'.-", *spelling) == NULL) *k++ = *spelling;
    }
    *k = '\0';
    return key;
}

/* Sorted split keys of every example of a split (free with free_keys). */
static char **sorted_keys(const Split *s) {
    char **keys = malloc(sizeof(char *) * (size_t)(s->n > 0 ? s->n : 1));
    for (int i = 0; i < s->n; i++) keys[i] = g2p_split_key(s->ex[i].src_text);
    qsort(keys, (size_t)s->n, sizeof(char *), compare_strings);
    return keys;
}

static void free_keys(char **keys, int n) {
    for (int i = 0; i < n; i++) free(keys[i]);
    free(keys);
}

/* Which split (0 train, 1 valid, 2 test) holds `word`, or -1. */
static int g2p_side(const Dataset *d, const char *word) {
    const Split *splits[3] = {&d->train, &d->valid, &d->test};
    for (int s = 0; s < 3; s++) {
        if (find_word(splits[s], word) >= 0) return s;
    }
    return -1;
}

/* No near-duplicates across the splits: spellings that differ only in ' . -
 * (ACCIDENTS / ACCIDENT'S, ADAS / ADA'S) are on one side. Splitting by the
 * spelling itself put 283 test words next to such a twin in train. */
static void test_g2p_split_by_key(void **state) {
    (void)state;
    Dataset d;
    TaskConfig cfg;
    task_defaults(&cfg, "g2p");
    assert_int_equal(dataset_load(&d, &cfg), 0);

    const Split *splits[3] = {&d.train, &d.valid, &d.test};
    char **keys[3];
    for (int s = 0; s < 3; s++) keys[s] = sorted_keys(splits[s]);
    for (int a = 0; a < 3; a++) {
        for (int b = a + 1; b < 3; b++) {
            for (int i = 0; i < splits[b]->n; i++) {
                const char *key = keys[b][i];
                if (bsearch(&key, keys[a], (size_t)splits[a]->n, sizeof(char *), compare_strings)) {
                    fail_msg("split key %s is in split %d and split %d", key, a, b);
                }
            }
        }
    }
    for (int s = 0; s < 3; s++) free_keys(keys[s], splits[s]->n);

    /* The examples of the issue: each pair is in the dictionary, on one side. */
    const char *pairs[][2] = {{"ACCIDENTS", "ACCIDENT'S"}, {"ADAS", "ADA'S"}, {"A", "A."}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        int side = g2p_side(&d, pairs[p][0]);
        assert_true(side >= 0);
        assert_int_equal(g2p_side(&d, pairs[p][1]), side);
    }
    dataset_free(&d);
}

static void test_g2p_small_file(void **state) {
    (void)state;
    char dir[64];
    char *text = with_filler("# a comment line\n"
                             "READ  R IY1 D\n"
                             "\n"
                             "READ(1)  R EH1 D\n"
                             "A  AH0\n"
                             "A(1)  AH1\n"            /* same as A once stress is gone: dropped */
                             "C1  S IY1 W AH1 N\n"    /* digit in the word: skipped */
                             "DON'T  D OW1 N T\r\n"   /* apostrophe kept, CRLF accepted */
                             "A.  EY1");              /* no final newline */
    write_dictionary(dir, sizeof dir, text);
    free(text);
    TaskConfig cfg;
    task_defaults(&cfg, "g2p");
    cfg.data_dir = dir;
    Dataset d;
    if (dataset_load(&d, &cfg) != 0) {
        fail_msg("%s", last_error());
    }
    const char *words[4] = {"READ", "A", "DON'T", "A."};
    int n_prons[4] = {2, 1, 1, 1};
    for (int w = 0; w < 4; w++) {
        int total = 0;
        const Split *splits[3] = {&d.train, &d.valid, &d.test};
        for (int s = 0; s < 3; s++) {
            for (int i = 0; i < splits[s]->n; i++) {
                if (strcmp(splits[s]->ex[i].src_text, words[w]) == 0) {
                    total += s == 0 ? 1 : splits[s]->ex[i].n_refs;
                }
            }
        }
        assert_int_equal(total, n_prons[w]);
    }
    assert_int_equal(d.train.n + d.valid.n + d.test.n >= 4, 1);
    dataset_free(&d);
    remove_dictionary(dir);
}

static void test_g2p_malformed_lines(void **state) {
    (void)state;
    struct { const char *text; const char *line; const char *detail; } cases[] = {
        {"ABOUT  AH0 B AW1 T\nBAD  XX1 Y\n", "line 2", "XX1"},
        {"ABOUT  AH0 B AW1 T\nB  B IY1\nNOPHONES\n", "line 3", "NOPHONES"},
        {"ABOUT  AH0 B AW1 T\nNOPHONES   \n", "line 2", "no phonemes"},
        {"READ(x)  R EH1 D\n", "line 1", "READ(x)"},
        {"AH  AH3\n", "line 1", "AH3"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char dir[64];
        write_dictionary(dir, sizeof dir, cases[c].text);
        TaskConfig cfg;
        task_defaults(&cfg, "g2p");
        cfg.data_dir = dir;
        Dataset d;
        clear_error();
        assert_int_equal(dataset_load(&d, &cfg), -1);
        assert_error_mentions("cmudict.dict.gz");
        assert_error_mentions(cases[c].line);
        assert_error_mentions(cases[c].detail);
        dataset_free(&d);
        remove_dictionary(dir);
    }

    /* An empty dictionary is an error too. */
    char dir[64];
    write_dictionary(dir, sizeof dir, "# nothing here\n");
    TaskConfig cfg;
    task_defaults(&cfg, "g2p");
    cfg.data_dir = dir;
    Dataset d;
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions("no entries");
    remove_dictionary(dir);
}

/* Words and pronunciations longer than G2P_MAX_LEN (100) are refused, naming
 * the file, the line and the limit: a dictionary entry of 600 letters or 600
 * phonemes overflowed the --translate path's buffers of 512 (test_robust.c);
 * 100 of each still load. */
static void test_g2p_length_limits(void **state) {
    (void)state;
    char word[601], *text = malloc(8000);
    assert_non_null(text);
    memset(word, 'B', 600);
    word[600] = '\0';
    struct { int letters, phonemes; const char *detail; } cases[] = {
        {600, 1, "600 characters"}, {101, 1, "101 characters"},
        {3, 600, "600 phonemes"}, {3, 101, "101 phonemes"}, {100, 100, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = snprintf(text, 8000, "ABOUT  AH0 B AW1 T\n%.*s ", cases[c].letters, word);
        for (int i = 0; i < cases[c].phonemes; i++) n += snprintf(text + n, 8000 - (size_t)n, " AH0");
        snprintf(text + n, 8000 - (size_t)n, "\n");
        char dir[64];
        if (cases[c].detail == NULL) {   /* the one that loads: with words for every split */
            char *padded = with_filler(text);
            write_dictionary(dir, sizeof dir, padded);
            free(padded);
        } else {
            write_dictionary(dir, sizeof dir, text);
        }
        TaskConfig cfg;
        task_defaults(&cfg, "g2p");
        cfg.data_dir = dir;
        Dataset d;
        clear_error();
        if (cases[c].detail == NULL) {
            if (dataset_load(&d, &cfg) != 0) fail_msg("%s", last_error());
            assert_int_equal(d.max_src_len, 100);
            assert_int_equal(d.max_tgt_len, 100);
            dataset_free(&d);
        } else {
            assert_int_equal(dataset_load(&d, &cfg), -1);
            assert_error_mentions("cmudict.dict.gz line 2");
            assert_error_mentions(cases[c].detail);
            assert_error_mentions("at most 100");
        }
        remove_dictionary(dir);
    }
    free(text);
}

static void test_g2p_missing_file(void **state) {
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/test_data_XXXXXX");
    assert_non_null(mkdtemp(dir));
    TaskConfig cfg;
    task_defaults(&cfg, "g2p");
    cfg.data_dir = dir;
    Dataset d;
    clear_error();
    assert_int_equal(dataset_load(&d, &cfg), -1);
    assert_error_mentions(dir);
    assert_error_mentions("cmudict.dict.gz");
    rmdir(dir);
}

/* A dictionary of one entry (or a few) gives empty splits: it "trained" and
 * reported 0.00% on 0 test examples with exit 0. Now refused with one line
 * naming the file and the counts; so is a generated task asked for an empty
 * validation or test split (a checkpoint's n_valid=0). */
static void test_empty_split_refused(void **state) {
    (void)state;
    char dir[64];
    write_dictionary(dir, sizeof dir, "HELLO  HH AH0 L OW1\n");
    TaskConfig cfg;
    task_defaults(&cfg, "g2p");
    cfg.data_dir = dir;
    Dataset d;
    clear_error();
    assert_int_equal(dataset_load(&d, &cfg), -1);
    print_message("%s\n", last_error());
    assert_error_mentions("cmudict.dict.gz: 1 word split into 1 training, 0 validation and 0 test examples");
    assert_error_mentions("expected at least one in each");
    assert_null(strchr(last_error(), '\n'));
    remove_dictionary(dir);

    const char *const tasks[2] = {"dates", "reverse"};
    for (int t = 0; t < 2; t++) {
        task_defaults(&cfg, tasks[t]);
        cfg.n_train = 20;
        cfg.n_valid = 0;
        clear_error();
        assert_int_equal(dataset_load(&d, &cfg), -1);
        assert_error_mentions("n_valid is 0: expected at least 1");
        cfg.n_valid = 5;
        cfg.n_test = 0;
        clear_error();
        assert_int_equal(dataset_load(&d, &cfg), -1);
        assert_error_mentions("n_test is 0: expected at least 1");
    }
}

/* ---- text typed by a user ------------------------------------------------ */

static void test_encode_source(void **state) {
    (void)state;
    int ids[128], len;
    char many[200];
    Dataset dates, reverse, g2p;
    load_task(&dates, "dates", 10, 1, 1, 1);
    load_task(&reverse, "reverse", 10, 1, 1, 1);
    char dir[64], *text = with_filler("HELLO  HH AH0 L OW1\n");
    write_dictionary(dir, sizeof dir, text);
    free(text);
    TaskConfig cfg;
    task_defaults(&cfg, "g2p");
    cfg.data_dir = dir;
    assert_int_equal(dataset_load(&g2p, &cfg), 0);
    remove_dictionary(dir);

    assert_int_equal(dataset_encode_source(&dates, "21 Nov 2026", ids, 128, &len), 0);
    assert_int_equal(len, 11);
    assert_int_equal(ids[0], vocab_char_id(&dates.src_vocab, '2'));
    assert_int_equal(dataset_encode_source(&dates, "21 Nov 2026!", ids, 128, &len), -1);
    assert_error_mentions("'!'");
    assert_error_mentions("position 12");
    assert_error_mentions("21 Nov 2026"); /* what a date looks like */

    assert_int_equal(dataset_encode_source(&reverse, "attention", ids, 128, &len), 0);
    assert_int_equal(len, 9);
    assert_int_equal(dataset_encode_source(&reverse, "Hello", ids, 128, &len), -1);
    assert_error_mentions("'H'");
    assert_error_mentions("lowercase letters a-z");
    assert_int_equal(dataset_encode_source(&reverse, "ab\tc", ids, 128, &len), -1);
    assert_error_mentions("0x09");

    /* g2p upper-cases first. */
    int upper[128], upper_len;
    assert_int_equal(dataset_encode_source(&g2p, "don't", ids, 128, &len), 0);
    assert_int_equal(dataset_encode_source(&g2p, "DON'T", upper, 128, &upper_len), 0);
    assert_int_equal(len, upper_len);
    assert_memory_equal(ids, upper, sizeof(int) * (size_t)len);
    assert_int_equal(dataset_encode_source(&g2p, "abc1", ids, 128, &len), -1);
    assert_error_mentions("'1'");
    assert_error_mentions("A-Z");

    /* Length limit and empty input. */
    memset(many, 'a', 150);
    many[150] = '\0';
    assert_int_equal(dataset_encode_source(&reverse, many, ids, 128, &len), -1);
    assert_error_mentions("128");
    assert_int_equal(dataset_encode_source(&reverse, "", ids, 128, &len), -1);
    assert_error_mentions("empty");

    dataset_free(&dates);
    dataset_free(&reverse);
    dataset_free(&g2p);
}

static void test_dataset_split_names(void **state) {
    (void)state;
    Dataset d;
    load_task(&d, "reverse", 10, 2, 3, 5);
    assert_ptr_equal(dataset_split(&d, "train"), &d.train);
    assert_ptr_equal(dataset_split(&d, "valid"), &d.valid);
    assert_ptr_equal(dataset_split(&d, "test"), &d.test);
    assert_null(dataset_split(&d, "dev"));
    assert_null(dataset_split(&d, NULL));
    assert_int_equal(dataset_split(&d, "test")->n, 3);
    dataset_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_basics),
        cmocka_unit_test(test_vocab_full),
        cmocka_unit_test(test_vocab_serialize_round_trip),
        cmocka_unit_test(test_vocab_deserialize_rejects),
        cmocka_unit_test(test_vocab_decode),
        cmocka_unit_test(test_task_defaults),
        cmocka_unit_test(test_dataset_load_rejects_bad_config),
        cmocka_unit_test(test_dates_styles_exactly),
        cmocka_unit_test(test_dates_weekdays_and_ordinals),
        cmocka_unit_test(test_dates_unambiguous),
        cmocka_unit_test(test_dates_styles_in_vocab),
        cmocka_unit_test(test_dates_deterministic),
        cmocka_unit_test(test_dates_splits_disjoint_by_day),
        cmocka_unit_test(test_dates_examples_consistent),
        cmocka_unit_test(test_reverse_targets_and_lengths),
        cmocka_unit_test(test_reverse_disjoint_and_deterministic),
        cmocka_unit_test(test_reverse_length_limits),
        cmocka_unit_test(test_g2p_full_dictionary),
        cmocka_unit_test(test_g2p_split_by_key),
        cmocka_unit_test(test_g2p_small_file),
        cmocka_unit_test(test_g2p_malformed_lines),
        cmocka_unit_test(test_g2p_length_limits),
        cmocka_unit_test(test_g2p_missing_file),
        cmocka_unit_test(test_empty_split_refused),
        cmocka_unit_test(test_encode_source),
        cmocka_unit_test(test_dataset_split_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
