/* test_plot.c - the files a plot writes: a heatmap's .dat holds rows x cols
 * numbers (NaN for a non-finite cell), its .gp script has the tick labels
 * escaped for gnuplot (quote, backslash, a visible space), a reversed y axis
 * and a colour bar; a line plot's .dat has one column per series, and its
 * .gp a fixed y range when one is asked for (0-100% accuracy); a grid of
 * heatmaps has one data block per panel and one multiplot script drawing
 * them all. Nothing here needs gnuplot: when it is installed a PNG appears
 * as a bonus (and for the grid we check that it does). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "io/plot.h"
#include "util/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "temp_dir.h"

static char tmp_dir[256];

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_plot");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
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
                                  "source", "output", "attention weight", 0.0f, 1.0f), 0);

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
    expect_in(gp, "set cblabel \"attention weight\"");     /* the colour scale says what it shows */
    expect_in(gp, "set colorbox");
    expect_in(gp, "plot \"attn_0.dat\" matrix with image");
    free(gp);
}

/* The width of the picture a script draws: "size W,H" of its terminal line. */
static int picture_width(const char *gp) {
    const char *size = strstr(gp, " size ");
    assert_non_null(size);
    return atoi(size + strlen(" size "));
}

/* A big matrix or many panels still make a picture at most 1,200 pixels
 * wide (a README's width): the cells shrink, or the panels take more rows. */
static void test_pictures_fit_a_page(void **state) {
    (void)state;
    enum { R = 30, C = 150, PANELS = 8 };
    float *m = calloc((size_t)PANELS * R * C, sizeof(float));
    char stem[512];
    snprintf(stem, sizeof stem, "%s/wide", tmp_dir);
    assert_int_equal(plot_heatmap(stem, "wide", m, R, C, NULL, NULL, NULL, NULL, "w", 0.0f, 1.0f), 0);
    char *gp = read_text(stem, ".gp");
    assert_true(picture_width(gp) <= 1200);
    free(gp);
    snprintf(stem, sizeof stem, "%s/wide_grid", tmp_dir);
    assert_int_equal(plot_heatmap_grid(stem, "grid", m, PANELS, 8, NULL, R, C, NULL, NULL, NULL, NULL, "w", 0.0f,
                                       1.0f), 0);
    gp = read_text(stem, ".gp");
    assert_true(picture_width(gp) <= 1200);
    free(gp);
    free(m);
}

/* An overlay: the image in grey under the map in orange, each panel's map
 * scaled to its own largest value (said on the colour bar), no tick labels. */
static void test_overlay_grid(void **state) {
    (void)state;
    enum { R = 2, C = 2 };
    const float inks[2 * R * C] = {0, 1, 0.5f, 1, /* panel 1 */ 0, 1, 0.5f, 1};
    const float maps[2 * R * C] = {0, 0, 0, 0, /* panel 1 */ 0, 0.2f, 0, 0.1f};
    const char *titles[2] = {"image", "layer 1"};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/overlay", tmp_dir);
    assert_int_equal(plot_overlay_grid(stem, "where it looked", inks, maps, 2, 2, titles, R, C), 0);
    char *dat = read_text(stem, ".dat");
    /* panel 0 (no map): grey 0.7 of the ink; panel 1: its largest value (0.2 at x 1, y 0) is 0.85 orange */
    expect_in(dat, "1 0 179 179 179\n");
    expect_in(dat, "1 1 179 179 179\n");
    expect_in(dat, "1 0 244 135 27\n");
    free(dat);
    char *gp = read_text(stem, ".gp");
    expect_in(gp, "with rgbimage");
    expect_in(gp, "set cblabel \"attention / the panel's largest\"");
    expect_in(gp, "unset xtics");
    free(gp);
}

static void test_heatmap_without_labels(void **state) {
    (void)state;
    float m[2 * 5] = {0};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/plain", tmp_dir);
    assert_int_equal(plot_heatmap(stem, "scores", m, 2, 5, NULL, NULL, NULL, NULL, NULL, 0.0f, 0.0f), 0);
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
    assert_int_equal(plot_heatmap(stem, "t", m, 0, 3, NULL, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "empty"));

    /* A path that cannot be created: a file stands where a directory should. */
    char file_path[512];
    snprintf(file_path, sizeof file_path, "%s/not_a_dir", tmp_dir);
    assert_int_equal(write_file_atomic(file_path, "x", 1), 0);
    snprintf(stem, sizeof stem, "%s/not_a_dir/attn", tmp_dir);
    assert_int_equal(plot_heatmap(stem, "t", m, 1, 1, NULL, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "not_a_dir"));
}

/* How many times `want` occurs in text. */
static int count_in(const char *text, const char *want) {
    int n = 0;
    for (const char *p = strstr(text, want); p != NULL; p = strstr(p + 1, want)) n++;
    return n;
}

/* Check block `p` of a grid's .dat (blocks end at two blank lines): its
 * numbers, row by row, are the panel's matrix. Returns the text after it. */
static char *check_block(char *block, const float *want, int rows, int cols) {
    char *end = strstr(block, "\n\n\n");
    if (end != NULL) *end = '\0';
    int n = 0;
    for (char *line = strtok(block, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *p = line;
        for (int c = 0; c < cols; c++) {
            char *after;
            float v = strtof(p, &after);
            assert_true(after != p);
            assert_float_equal(v, want[n * cols + c], 1e-5);
            p = after;
        }
        while (*p == ' ') p++;
        assert_int_equal(*p, '\0');                /* no extra numbers on the line */
        n++;
    }
    assert_int_equal(n, rows);
    return end ? end + 3 : NULL;
}

/* The cross-attention of 2 layers x 4 heads as one picture: 8 data blocks
 * holding the right numbers, a 2 x 4 multiplot with 8 plot commands, each
 * panel's title, the tick labels, one colour range, and (with gnuplot) the
 * PNG, rendered without errors. */
static void test_heatmap_grid_files(void **state) {
    (void)state;
    enum { LAYERS = 2, HEADS = 4, PANELS = LAYERS * HEADS, ROWS = 3, COLS = 4 };
    float maps[PANELS * ROWS * COLS];
    for (int p = 0; p < PANELS; p++)            /* every row sums to 1, like attention */
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++)
                maps[(p * ROWS + r) * COLS + c] = (c == (r + p) % COLS) ? 0.625f : 0.125f;
    maps[5 * ROWS * COLS + 7] = 0.25f;           /* one odd cell, to find in block 5 */
    const char *x_labels[COLS] = {"<bos>", "the", "cat", "<eos>"};
    const char *y_labels[ROWS] = {"le", "chat", "\"x\""};
    char titles[PANELS][32];
    const char *panel_titles[PANELS];
    for (int p = 0; p < PANELS; p++) {
        snprintf(titles[p], sizeof titles[p], "layer %d, head %d", p / HEADS + 1, p % HEADS + 1);
        panel_titles[p] = titles[p];
    }
    char stem[512];
    snprintf(stem, sizeof stem, "%s/grid/cross", tmp_dir);
    assert_int_equal(plot_heatmap_grid(stem, "cross-attention", maps, PANELS, HEADS, panel_titles,
                                       ROWS, COLS, x_labels, y_labels, "source", "output",
                                       "attention weight", 0.0f, 1.0f), 0);

    char *dat = read_text(stem, ".dat");
    assert_int_equal(count_in(dat, "\n\n\n"), PANELS - 1);   /* 8 blocks, 7 separators */
    expect_in(dat, "# panel 5: layer 2, head 2\n");
    char *block = dat;
    for (int p = 0; p < PANELS; p++) {
        assert_non_null(block);
        block = check_block(block, maps + p * ROWS * COLS, ROWS, COLS);
    }
    assert_null(block);                         /* nothing after the last block */
    free(dat);

    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set output \"cross.png\"");
    expect_in(gp, "set multiplot layout 2,4 rowsfirst title \"cross-attention\"");
    expect_in(gp, "unset multiplot");
    assert_int_equal(count_in(gp, "plot \"cross.dat\" index "), PANELS);
    for (int p = 0; p < PANELS; p++) {
        char want[64];
        snprintf(want, sizeof want, "plot \"cross.dat\" index %d matrix with image\n", p);
        expect_in(gp, want);
        snprintf(want, sizeof want, "set title \"%s\"\n", titles[p]);
        expect_in(gp, want);
    }
    expect_in(gp, "set xtics (\"<bos>\" 0, \"the\" 1, \"cat\" 2, \"<eos>\" 3)");
    expect_in(gp, "set ytics (\"le\" 0, \"chat\" 1, \"\\\"x\\\"\" 2)");
    expect_in(gp, "set yrange [2.5:-0.5]");          /* row 0 on top, as in plot_heatmap */
    expect_in(gp, "set cbrange [0:1]");
    assert_int_equal(count_in(gp, "set cbrange"), 1); /* one range for all panels */
    expect_in(gp, "set colorbox user");
    /* axis titles on the outer panels: x under the bottom row, y left of each row */
    assert_int_equal(count_in(gp, "set xlabel \"source\""), HEADS);
    assert_int_equal(count_in(gp, "set ylabel \"output\""), LAYERS);
    free(gp);

    if (gnuplot_available()) {
        char path[600];
        snprintf(path, sizeof path, "%s.png", stem);
        assert_int_equal(access(path, F_OK), 0);
        snprintf(path, sizeof path, "%s.gnuplot.log", stem);   /* kept only when gnuplot fails */
        assert_int_not_equal(access(path, F_OK), 0);
    }
}

/* vmin == vmax: one automatic range over all panels (not one per panel);
 * no titles or labels; more panels per row than panels: a single row. */
static void test_heatmap_grid_auto_range(void **state) {
    (void)state;
    enum { PANELS = 3, ROWS = 2, COLS = 2 };
    float maps[PANELS * ROWS * COLS] = {0, 1, 2, 3,   -2, 0, 0, 0,   7, NAN, 1, 1};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/grid_auto", tmp_dir);
    assert_int_equal(plot_heatmap_grid(stem, NULL, maps, PANELS, 8, NULL, ROWS, COLS,
                                       NULL, NULL, NULL, NULL, NULL, 0.0f, 0.0f), 0);
    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set cbrange [-2:7]");            /* min and max over every panel, NaN skipped */
    expect_in(gp, "set multiplot layout 1,3 ");
    assert_null(strstr(gp, "set xtics ("));
    assert_int_equal(count_in(gp, " matrix with image\n"), PANELS);
    free(gp);
    char *dat = read_text(stem, ".dat");
    expect_in(dat, "NaN");
    assert_int_equal(count_data_rows(dat, COLS), PANELS * ROWS);
    free(dat);
}

static void test_heatmap_grid_errors(void **state) {
    (void)state;
    float maps[4] = {0};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/grid_bad", tmp_dir);
    clear_error();
    assert_int_equal(plot_heatmap_grid(stem, "t", maps, 0, 4, NULL, 1, 1, NULL, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "0 panels"));
    clear_error();
    assert_int_equal(plot_heatmap_grid(stem, "t", maps, 4, 0, NULL, 1, 1, NULL, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "0 per row"));
    clear_error();
    assert_int_equal(plot_heatmap_grid(stem, "t", maps, 4, 2, NULL, 1, 0, NULL, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "empty"));
    char dat_path[600];
    snprintf(dat_path, sizeof dat_path, "%s.dat", stem);
    assert_int_not_equal(access(dat_path, F_OK), 0);  /* nothing written */

    /* A path that cannot be created: a file stands where a directory should. */
    char file_path[512];
    snprintf(file_path, sizeof file_path, "%s/grid_file", tmp_dir);
    assert_int_equal(write_file_atomic(file_path, "x", 1), 0);
    snprintf(stem, sizeof stem, "%s/grid_file/attn", tmp_dir);
    clear_error();
    assert_int_equal(plot_heatmap_grid(stem, "t", maps, 4, 2, NULL, 1, 1, NULL, NULL, NULL, NULL, NULL, 0, 0), -1);
    assert_non_null(strstr(last_error(), "grid_file"));
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
        cmocka_unit_test(test_heatmap_grid_files),
        cmocka_unit_test(test_heatmap_grid_auto_range),
        cmocka_unit_test(test_heatmap_grid_errors),
        cmocka_unit_test(test_pictures_fit_a_page),
        cmocka_unit_test(test_overlay_grid),
        cmocka_unit_test(test_line_plot_files),
        cmocka_unit_test(test_line_plot_fixed_range),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
