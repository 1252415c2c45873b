/* test_plot.c - the files a plot writes: a heatmap's .dat holds rows x cols
 * numbers (NaN for a non-finite cell), its .gp script has the tick labels
 * escaped for gnuplot (quote, backslash, a visible space), a reversed y axis
 * and a colour bar; a line plot's .dat has one column per series, and its
 * .gp a fixed y range when one is asked for (0-100% accuracy). Nothing
 * here needs gnuplot: when it is installed a PNG appears as a bonus. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "io/plot.h"
#include "util/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

static char tmp_dir[256];

static int setup_dir(void **state) {
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_plot.XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *read_text(const char *stem, const char *ext) {
    char path[600];
    snprintf(path, sizeof path, "%s%s", stem, ext);
    size_t len;
    char *text = read_whole_file(path, &len);
    if (text == NULL) fail_msg("%s", last_error());
    return text;
}

/* Count the data lines (not comments) of a .dat and check each has `fields`
 * whitespace-separated values. */
static int count_data_rows(char *text, int fields) {
    int rows = 0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        int n = 0;
        for (char *p = line; *p;) {
            while (*p == ' ') p++;
            if (*p == '\0') break;
            n++;
            while (*p && *p != ' ') p++;
        }
        assert_int_equal(n, fields);
        rows++;
    }
    return rows;
}

static void expect_in(const char *text, const char *want) {
    if (strstr(text, want) == NULL) fail_msg("expected '%s' in:\n%s", want, text);
}

static void test_heatmap_files(void **state) {
    (void)state;
    enum { ROWS = 3, COLS = 4 };
    float m[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) m[i] = (float)i / 11.0f;
    m[5] = NAN;
    const char *x_labels[COLS] = {"say", "\"hi\"", "a\\b", " "};
    const char *y_labels[ROWS] = {"<bos>", "x y", "<eos>"};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/plots/attn_0", tmp_dir);   /* the directory is created */

    assert_int_equal(plot_heatmap(stem, "Attention \"weights\"", m, ROWS, COLS, x_labels, y_labels,
                                  "source", "output", 0.0f, 1.0f), 0);

    char *dat = read_text(stem, ".dat");
    expect_in(dat, "NaN");
    assert_int_equal(count_data_rows(dat, COLS), ROWS);
    free(dat);

    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set terminal png");
    expect_in(gp, "set output \"attn_0.png\"");
    expect_in(gp, "set title \"Attention \\\"weights\\\"\"");
    /* Labels: a quote and a backslash escaped, a space made visible. */
    expect_in(gp, "set xtics (\"say\" 0, \"\\\"hi\\\"\" 1, \"a\\\\b\" 2, \"\xe2\x90\xa3\" 3)");
    expect_in(gp, "set ytics (\"<bos>\" 0, \"x\xe2\x90\xa3y\" 1, \"<eos>\" 2)");
    expect_in(gp, "set xtics rotate");
    expect_in(gp, "set yrange [2.5:-0.5]");          /* reversed: row 0 on top */
    expect_in(gp, "set xrange [-0.5:3.5]");
    expect_in(gp, "set cbrange [0:1]");
    expect_in(gp, "set colorbox");
    expect_in(gp, "plot \"attn_0.dat\" matrix with image");
    free(gp);
}

static void test_heatmap_without_labels(void **state) {
    (void)state;
    float m[2 * 5] = {0};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/plain", tmp_dir);
    assert_int_equal(plot_heatmap(stem, "scores", m, 2, 5, NULL, NULL, NULL, NULL, 0.0f, 0.0f), 0);
    char *gp = read_text(stem, ".gp");
    assert_null(strstr(gp, "set xtics ("));
    assert_null(strstr(gp, "set cbrange"));           /* vmin == vmax: automatic range */
    free(gp);
    char *dat = read_text(stem, ".dat");
    assert_int_equal(count_data_rows(dat, 5), 2);
    free(dat);
}

static void test_heatmap_errors(void **state) {
    (void)state;
    float m[1] = {0};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/empty", tmp_dir);
    assert_int_equal(plot_heatmap(stem, "t", m, 0, 3, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "empty"));

    /* A path that cannot be created: a file stands where a directory should. */
    char file_path[512];
    snprintf(file_path, sizeof file_path, "%s/not_a_dir", tmp_dir);
    assert_int_equal(write_file_atomic(file_path, "x", 1), 0);
    snprintf(stem, sizeof stem, "%s/not_a_dir/attn", tmp_dir);
    assert_int_equal(plot_heatmap(stem, "t", m, 1, 1, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "not_a_dir"));
}

static void test_line_plot_files(void **state) {
    (void)state;
    enum { POINTS = 5 };
    float x[POINTS] = {0, 100, 200, 300, 400};
    float train[POINTS] = {3.0f, 1.5f, 0.75f, 0.0f, 0.25f};   /* a 0 cannot go on a log axis */
    float valid[POINTS] = {3.2f, 1.9f, 1.1f, 0.9f, INFINITY};
    const float *ys[2] = {train, valid};
    const char *names[2] = {"train", "valid \"held out\""};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/loss", tmp_dir);
    assert_int_equal(plot_lines(stem, "loss", "step", "cross-entropy", x, ys, names, 2, POINTS, 1), 0);

    char *dat = read_text(stem, ".dat");
    expect_in(dat, "300 NaN 0.9\n");               /* the 0 on a log axis, skipped */
    expect_in(dat, "400 0.25 NaN\n");              /* inf */
    assert_int_equal(count_data_rows(dat, 3), POINTS);
    free(dat);

    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set logscale y");
    expect_in(gp, "\"loss.dat\" using 1:2 with lines");
    expect_in(gp, "\"loss.dat\" using 1:3 with lines");
    expect_in(gp, "title \"valid \\\"held out\\\"\"");
    expect_in(gp, "set xlabel \"step\"");
    free(gp);

    /* Linear axis: no logscale, zeros kept. */
    snprintf(stem, sizeof stem, "%s/acc", tmp_dir);
    assert_int_equal(plot_lines(stem, "accuracy", "step", "exact match", x, ys, names, 1, POINTS, 0), 0);
    gp = read_text(stem, ".gp");
    assert_null(strstr(gp, "logscale"));
    free(gp);
    dat = read_text(stem, ".dat");
    expect_in(dat, "300 0\n");
    assert_int_equal(count_data_rows(dat, 2), POINTS);
    free(dat);
}

/* An accuracy axis fixed to 0-100%: the .gp carries the range, the .dat the
 * points as they are; plot_lines (auto range) writes no yrange; a range that
 * is not an interval, or reaches 0 on a log axis, is refused. */
static void test_line_plot_fixed_range(void **state) {
    (void)state;
    enum { POINTS = 4 };
    float x[POINTS] = {4, 8, 12, 16};
    float acc[POINTS] = {100.0f, 100.0f, 99.65f, 100.0f};   /* one miss in 288 */
    const float *ys[1] = {acc};
    const char *names[1] = {"exact match"};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/acc_by_len", tmp_dir);
    assert_int_equal(plot_lines_range(stem, "exact match by length", "length", "exact match (%)",
                                      x, ys, names, 1, POINTS, 0, 0.0f, 100.0f), 0);
    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set yrange [0:100]");
    assert_null(strstr(gp, "logscale"));
    free(gp);
    char *dat = read_text(stem, ".dat");
    expect_in(dat, "12 99.65\n");
    assert_int_equal(count_data_rows(dat, 2), POINTS);
    free(dat);

    /* y_min == y_max: auto, byte for byte what plot_lines writes */
    char auto_stem[512];
    snprintf(auto_stem, sizeof auto_stem, "%s/acc_auto", tmp_dir);
    assert_int_equal(plot_lines_range(auto_stem, "t", "x", "y", x, ys, names, 1, POINTS, 0, 0.0f, 0.0f), 0);
    gp = read_text(auto_stem, ".gp");
    assert_null(strstr(gp, "yrange"));
    free(gp);
    assert_int_equal(plot_lines(stem, "t", "x", "y", x, ys, names, 1, POINTS, 0), 0);
    gp = read_text(stem, ".gp");
    assert_null(strstr(gp, "yrange"));
    free(gp);

    assert_int_equal(plot_lines_range(stem, "t", "x", "y", x, ys, names, 1, POINTS, 0, 100.0f, 0.0f), -1);
    assert_non_null(strstr(last_error(), "y range"));
    assert_int_equal(plot_lines_range(stem, "t", "x", "y", x, ys, names, 1, POINTS, 0, 0.0f, NAN), -1);
    assert_int_equal(plot_lines_range(stem, "t", "x", "y", x, ys, names, 1, POINTS, 1, 0.0f, 10.0f), -1);
    assert_non_null(strstr(last_error(), "log"));
    assert_int_equal(plot_lines_range(stem, "t", "x", "y", x, ys, names, 1, POINTS, 1, 1e-3f, 10.0f), 0);
    gp = read_text(stem, ".gp");
    expect_in(gp, "set yrange [0.001:10]");
    free(gp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heatmap_files),
        cmocka_unit_test(test_heatmap_without_labels),
        cmocka_unit_test(test_heatmap_errors),
        cmocka_unit_test(test_line_plot_files),
        cmocka_unit_test(test_line_plot_fixed_range),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
