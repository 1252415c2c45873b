/* test_bible.c - the English -> Spanish verse reader (common/data/bible.c).
 *
 * What is checked, on tiny files the tests write into a temporary
 * directory: a good file loads (gzip'd or plain) with its fields and split
 * counts; each broken file - missing, empty, a wrong header, a missing or
 * extra column, an unknown split, a bad chapter/verse/near_dup, an empty
 * side, a control byte, invalid UTF-8, a 10 MB line, a verse given twice, a
 * chapter in two parts, no test verse - is refused with one message naming
 * the file and the line. Then the shipped data/bible_en_es.tsv.gz: the
 * figures data/README.md reports (run from the repository root, as make
 * test does). */
/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "data/bible.h"
#include "util/error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <cmocka.h>

#include "temp_dir.h"

static char tmp_dir[256];

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_bible");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

static void expect_error(const char *needle) {
    if (strstr(last_error(), needle) == NULL)
        fail_msg("error \"%s\" does not mention \"%s\"", last_error(), needle);
    clear_error();
}

/* Write n bytes to tmp_dir/name (gzip'd when gz); path gets the full name. */
static void write_file(char *path, size_t cap, const char *name, const char *bytes, size_t n, int gz) {
    snprintf(path, cap, "%s/%s", tmp_dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb1");
        assert_non_null(f);
        if (n > 0) assert_int_equal(gzwrite(f, bytes, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        if (n > 0) assert_int_equal(fwrite(bytes, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
}

#define HEADER BIBLE_HEADER "\n"
static const char GOOD[] = HEADER
    "train\tGenesis\t2\t1\t0\tThe heavens, the earth, and all their vast array were finished.\tY fueron acabados los cielos y la tierra, y todo su ornamento.\n"
    "train\tGenesis\t2\t2\t0\tOn the seventh day God finished his work.\tY acabó Dios en el día séptimo su obra que hizo.\n"
    "valid\tJohn\t11\t35\t1\tJesus wept.\tY lloró Jesús.\n"
    "test\tGenesis\t12\t1\t0\tNow Yahweh said to Abram, “Leave your country.”\tEmpero Jehová había dicho á Abram: Vete de tu tierra\n";

/* Load text (written plain) and expect an error mentioning needle and the line. */
static void expect_refused(const char *text, size_t n, const char *needle, const char *line) {
    char path[512];
    write_file(path, sizeof path, "bad.tsv", text, n, 0);
    BibleCorpus c;
    assert_int_equal(bible_load(&c, path), -1);
    assert_null(c.pairs);
    if (line != NULL && strstr(last_error(), line) == NULL)
        fail_msg("error \"%s\" does not name \"%s\"", last_error(), line);
    if (strstr(last_error(), "bad.tsv") == NULL) fail_msg("error \"%s\" does not name the file", last_error());
    expect_error(needle);
    bible_free(&c);
}

/* GOOD with its last line replaced by `last`. */
static void expect_last_line_refused(const char *last, const char *needle) {
    char text[4096];
    const char *cut = strstr(GOOD, "test\tGenesis\t12");
    size_t head = (size_t)(cut - GOOD);
    memcpy(text, GOOD, head);
    snprintf(text + head, sizeof text - head, "%s", last);
    expect_refused(text, strlen(text), needle, "line 5");
}

static void test_good_file(void **state) {
    (void)state;
    for (int gz = 0; gz <= 1; gz++) {
        char path[512];
        write_file(path, sizeof path, gz ? "good.tsv.gz" : "good.tsv", GOOD, strlen(GOOD), gz);
        BibleCorpus c;
        if (bible_load(&c, path) != 0) fail_msg("%s", last_error());
        assert_int_equal(c.n, 4);
        assert_int_equal(c.n_split[BIBLE_TRAIN], 2);
        assert_int_equal(c.n_split[BIBLE_VALID], 1);
        assert_int_equal(c.n_split[BIBLE_TEST], 1);
        const BiblePair *p = &c.pairs[2];
        assert_int_equal(p->split, BIBLE_VALID);
        assert_string_equal(p->book, "John");
        assert_int_equal(p->chapter, 11);
        assert_int_equal(p->verse, 35);
        assert_int_equal(p->near_dup, 1);
        assert_string_equal(p->english, "Jesus wept.");
        assert_string_equal(p->spanish, "Y lloró Jesús.");
        assert_int_equal(p->line, 4);
        assert_int_equal(bible_source_words(p), 2);
        assert_int_equal(bible_source_words(&c.pairs[3]), 8);
        assert_string_equal(bible_split_name(c.pairs[3].split), "test");
        bible_free(&c);
        bible_free(&c);                       /* safe twice */
    }
}

static void test_broken_files(void **state) {
    (void)state;
    char path[512];
    BibleCorpus c;
    snprintf(path, sizeof path, "%s/missing.tsv.gz", tmp_dir);
    assert_int_equal(bible_load(&c, path), -1);
    expect_error("missing.tsv.gz");
    expect_refused("", 0, "is empty", NULL);
    expect_refused("english\tspanish\nJesus wept.\tY lloró Jesús.\n", 40, "expected the header line", "line 1");
    expect_refused(HEADER, strlen(HEADER), "expected at least one of each", NULL);
    /* The same file cut inside a gzip stream. */
    write_file(path, sizeof path, "good.tsv.gz", GOOD, strlen(GOOD), 1);
    FILE *f = fopen(path, "rb");
    char gz[2048];
    size_t n = fread(gz, 1, sizeof gz, f);
    fclose(f);
    write_file(path, sizeof path, "cut.tsv.gz", gz, n / 2, 0);
    assert_int_equal(bible_load(&c, path), -1);
    expect_error("cut.tsv.gz");

    expect_last_line_refused("test\tGenesis\t12\t1\t0\tNow Yahweh said to Abram.\n", "6 columns, expected 7");
    expect_last_line_refused("test\tGenesis\t12\t1\t0\ta\tb\tc\n", "8 columns, expected 7");
    expect_last_line_refused("test\tGenesis\t12\t1\t0\tNow Yahweh said to Abram.\t\n", "the spanish side is empty");
    expect_last_line_refused("test\tGenesis\t12\t1\t0\t\tEmpero\n", "the english side is empty");
    expect_last_line_refused("test\t\t12\t1\t0\tNow\tEmpero\n", "the book column is empty");
    expect_last_line_refused("dev\tGenesis\t12\t1\t0\tNow\tEmpero\n", "the split is 'dev', expected train, valid or test");
    expect_last_line_refused("test\tGenesis\t0\t1\t0\tNow\tEmpero\n", "the chapter is '0'");
    expect_last_line_refused("test\tGenesis\t12\tx1\t0\tNow\tEmpero\n", "the verse is 'x1'");
    expect_last_line_refused("test\tGenesis\t12\t1\t2\tNow\tEmpero\n", "near_dup is '2', expected 0 or 1");
    expect_last_line_refused("test\tGenesis\t12\t1\t0\tNow\tEmp\xe9ro\n", "the spanish column is not UTF-8 at byte 28");
    expect_last_line_refused("test\tGenesis\t12\t1\t0\tNo\x1bw\tEmpero\n", "control byte 0x1b");
    expect_last_line_refused("test\tGenesis\t12\t1\t0\tNow\tEmpero\r\n", "control byte 0x0d");
    expect_last_line_refused("test\tJohn\t11\t36\t0\tNow\tEmpero\n", "the split is by whole chapters");
    expect_last_line_refused("test\tGenesis\t2\t1\t0\tNow\tEmpero\n", "given twice (first on line 2)");

    /* A NUL byte, and a line of 10 MB. */
    char with_nul[] = HEADER "test\tGenesis\t12\t1\t0\tNo\0w\tEmpero\n";
    expect_refused(with_nul, sizeof with_nul - 1, "NUL byte", "line 2");
    size_t big = (size_t)10 << 20;
    char *huge = malloc(big + 256);
    assert_non_null(huge);
    size_t h = (size_t)snprintf(huge, 256, HEADER "train\tGenesis\t1\t1\t0\t");
    memset(huge + h, 'a', big);
    memcpy(huge + h + big, "\tb\n", 3);
    expect_refused(huge, h + big + 3, "longer than the 65536 a verse line may be", "line 2");
    free(huge);
}

/* The shipped file: the figures data/README.md gives. */
static void test_shipped_corpus(void **state) {
    (void)state;
    BibleCorpus c;
    if (bible_load(&c, NULL) != 0) fail_msg("%s", last_error());
    assert_int_equal(c.n, 31077);
    assert_int_equal(c.n_split[BIBLE_TRAIN], 28018);
    assert_int_equal(c.n_split[BIBLE_VALID], 1576);
    assert_int_equal(c.n_split[BIBLE_TEST], 1483);
    int dup[3] = {0, 0, 0}, longest = 0, buckets[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < c.n; i++) {
        dup[c.pairs[i].split] += c.pairs[i].near_dup;
        int w = bible_source_words(&c.pairs[i]);
        if (w > longest) longest = w;
        buckets[w > 40 ? 4 : (w - 1) / 10]++;
    }
    assert_int_equal(dup[BIBLE_TRAIN], 0);
    assert_int_equal(dup[BIBLE_VALID], 58);
    assert_int_equal(dup[BIBLE_TEST], 58);
    assert_int_equal(longest, 102);
    assert_int_equal(buckets[0], 1732);
    assert_int_equal(buckets[4], 2474);
    /* The example the lecture translates. */
    int found = 0;
    for (int i = 0; i < c.n && !found; i++)
        if (strcmp(c.pairs[i].book, "Genesis") == 0 && c.pairs[i].chapter == 1 && c.pairs[i].verse == 1) {
            assert_string_equal(c.pairs[i].english, "In the beginning, God created the heavens and the earth.");
            assert_string_equal(c.pairs[i].spanish, "En el principio crió Dios los cielos y la tierra.");
            found = 1;
        }
    assert_true(found);
    bible_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file),
        cmocka_unit_test(test_broken_files),
        cmocka_unit_test(test_shipped_corpus),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
