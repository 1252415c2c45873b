/* test_results_exact.c - results.json keeps every digit: integers as
 * integers (2385408 parameters, never 2.38541e+06), floats and doubles with
 * the fewest digits that read back to the same value, a config's hex id
 * (vocab_crc=57522811) as a string; and the readers of these files
 * (tools/results_table.sh, Python's json as tools/readme_tables.py reads them)
 * give the same table for a file of the old %.6g form and of the new one. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/results.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "program_run.h"
#include "temp_dir.h"

static char tmp_dir[256];
static char root[1024];                 /* the repository: the build directory's parent */

/* The text after "key": in a results.json as written (up to the comma or the
 * end of the line) into out. Fails the test when the key is not there. */
static void raw_value(const char *json, const char *key, char *out, size_t cap) {
    char pattern[96];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(json, pattern);
    assert_non_null(at);
    at += strlen(pattern);
    size_t n = strcspn(at, ",\n");
    assert_true(n < cap);
    memcpy(out, at, n);
    out[n] = '\0';
}

static char *write_and_read(const Results *r, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    assert_int_equal(results_write(r, path), 0);
    size_t len;
    char *text = read_whole_file(path, &len);
    assert_non_null(text);
    return text;
}

/* The two figures: 2,385,408 parameters and the GPT's vocab_crc. */
static void test_parameters_and_crc_are_exact(void **state) {
    (void)state;
    static Results r;
    results_init(&r);
    results_set_num(&r, "parameters", 2385408.0);
    results_set_config(&r, "model=gpt\ndim=64\nlr=0.0003\ntokens=char\nvocab_crc=57522811\nother_crc=00c0ffee\n");
    results_set_num(&r, "big", 9007199254740991.0);           /* 2^53 - 1 */
    results_set_num(&r, "negative", -12.0);
    char *json = write_and_read(&r, "exact.json");
    char v[64];
    raw_value(json, "parameters", v, sizeof v);
    assert_string_equal(v, "2385408");
    assert_true(strtod(v, NULL) == 2385408.0);
    raw_value(json, "vocab_crc", v, sizeof v);
    assert_string_equal(v, "\"57522811\"");                  /* a string: the hex digits as written */
    raw_value(json, "other_crc", v, sizeof v);
    assert_string_equal(v, "\"00c0ffee\"");
    raw_value(json, "dim", v, sizeof v);
    assert_string_equal(v, "64");
    raw_value(json, "lr", v, sizeof v);
    assert_string_equal(v, "0.0003");
    raw_value(json, "big", v, sizeof v);
    assert_string_equal(v, "9007199254740991");
    raw_value(json, "negative", v, sizeof v);
    assert_string_equal(v, "-12");
    free(json);
}

/* Random floats (a loss, an accuracy as float) and doubles (seconds) read
 * back bit for bit; a float is written with at most 9 digits, a double with
 * at most 17 (a double that is exactly a float, as the loss widened to
 * double, reads back through strtof). */
static void test_numbers_round_trip(void **state) {
    (void)state;
    static Results r;
    Rng rng;
    rng_seed(&rng, 70, 1);
    float floats[40];
    double doubles[40];
    results_init(&r);
    for (int i = 0; i < 40; i++) {
        char key[16];
        floats[i] = (rng_uniform(&rng) - 0.5f) * powf(10.0f, (float)(i % 13) - 6.0f);
        doubles[i] = ((double)rng_uniform(&rng) + (double)rng_uniform(&rng) / 3.0) * pow(10.0, (double)(i % 11) - 3.0);
        snprintf(key, sizeof key, "f%d", i);
        results_set_num(&r, key, floats[i]);
        snprintf(key, sizeof key, "d%d", i);
        results_set_num(&r, key, doubles[i]);
    }
    results_set_num(&r, "loss", 1.1402436f);
    char *json = write_and_read(&r, "round_trip.json");
    char v[64];
    for (int i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        raw_value(json, key, v, sizeof v);
        assert_true(strtof(v, NULL) == floats[i]);
        assert_true(strlen(v) <= 9 + 7);                     /* sign, point, e-XX */
        snprintf(key, sizeof key, "d%d", i);
        raw_value(json, key, v, sizeof v);
        if ((double)(float)doubles[i] == doubles[i])          /* a float widened: its float digits */
            assert_true((double)strtof(v, NULL) == doubles[i]);
        else
            assert_true(strtod(v, NULL) == doubles[i]);
    }
    raw_value(json, "loss", v, sizeof v);
    assert_string_equal(v, "1.1402436");
    free(json);
}

/* A folder whose old results.json (numbers at %.6g) has the same config is
 * not reported as another run's; one with another config is. */
static void test_old_files_compare_by_value(void **state) {
    (void)state;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/old_run", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    snprintf(path, sizeof path, "%s/results.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\n  \"model\": \"gpt\",\n  \"lr\": 0.0003,\n  \"big\": 2.38541e+06,\n  \"vocab_crc\": 5.75228e+07,\n"
          "  \"steps\": 2000\n}\n", f);
    fclose(f);
    assert_int_equal(results_note_other_run(dir, "model=gpt\nlr=0.0003\nbig=2385408\nvocab_crc=57522811\n"), 0);
    assert_int_equal(results_note_other_run(dir, "model=gpt\nlr=0.001\nbig=2385408\nvocab_crc=57522811\n"), 1);
}

/* Run a command, its stdout into out (cap bytes); returns its exit status. */
static int run_capture(const char *command, char *out, size_t cap) {
    FILE *p = popen(command, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* The same run as an old file (%.6g) and as a new one: results_table.sh
 * prints the same row, and Python's json reads every number of both as a
 * number (what readme_tables.py's number() takes). */
static void test_readers_take_old_and_new_files(void **state) {
    (void)state;
    static Results r;
    results_init(&r);
    results_set_str(&r, "chapter", "06_gpt");
    results_set_config(&r, "model=gpt\nlayers=2\ndim=128\nheads=4\ntokens=char\nvocab_crc=57522811\n");
    results_set_num(&r, "steps", 2000);
    results_set_num(&r, "parameters", 2385408);
    results_set_num(&r, "test_bpc", 2.3541234567);
    results_set_num(&r, "train_seconds", 68.1234567891);
    results_set_num(&r, "threads", 2);
    char *json = write_and_read(&r, "new.json");
    free(json);
    char old_path[512], new_path[512];
    snprintf(new_path, sizeof new_path, "%s/new.json", tmp_dir);
    snprintf(old_path, sizeof old_path, "%s/old.json", tmp_dir);
    FILE *f = fopen(old_path, "w");
    assert_non_null(f);
    fputs("{\n  \"chapter\": \"06_gpt\",\n  \"model\": \"gpt\",\n  \"layers\": 2,\n  \"dim\": 128,\n  \"heads\": 4,\n"
          "  \"tokens\": \"char\",\n  \"vocab_crc\": 5.75228e+07,\n  \"steps\": 2000,\n  \"parameters\": 2.38541e+06,\n"
          "  \"test_bpc\": 2.35412,\n  \"train_seconds\": 68.1235,\n  \"threads\": 2\n}\n", f);
    fclose(f);

    char command[3000], old_row[2048], new_row[2048];
    snprintf(command, sizeof command, "bash '%s/tools/results_table.sh' '%s' 2>&1 | tail -n 1", root, old_path);
    assert_int_equal(run_capture(command, old_row, sizeof old_row), 0);
    snprintf(command, sizeof command, "bash '%s/tools/results_table.sh' '%s' 2>&1 | tail -n 1", root, new_path);
    assert_int_equal(run_capture(command, new_row, sizeof new_row), 0);
    assert_non_null(strstr(new_row, "2.354 bpc"));
    assert_string_equal(old_row, new_row);

    char out[2048];
    snprintf(command, sizeof command,
             "/usr/bin/python3 -c 'import json, sys\n"
             "for p in sys.argv[1:]:\n"
             "    d = json.load(open(p))\n"
             "    print(d[\"parameters\"], int(float(d[\"parameters\"])), d[\"test_bpc\"], d[\"threads\"])' '%s' '%s'",
             old_path, new_path);
    assert_int_equal(run_capture(command, out, sizeof out), 0);
    assert_string_equal(out, "2385410.0 2385410 2.35412 2\n2385408 2385408 2.3541234567 2\n");
}

int main(int argc, char **argv) {
    (void)argc;
    char build[900];
    program_build_dir(build, sizeof build, argv[0]);
    snprintf(root, sizeof root, "%s/..", build);
    if (temp_dir_make(tmp_dir, sizeof tmp_dir, "test_results_exact") != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameters_and_crc_are_exact),
        cmocka_unit_test(test_numbers_round_trip),
        cmocka_unit_test(test_old_files_compare_by_value),
        cmocka_unit_test(test_readers_take_old_and_new_files),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    temp_dir_remove(tmp_dir);
    return failed;
}
