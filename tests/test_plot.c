/* test_plot.c - the files a plot writes: a heatmap's .dat holds rows x cols
 * numbers (NaN for a non-finite cell), its .gp script has the tick labels
 * escaped for gnuplot (quote, backslash, a visible space), a reversed y axis
 * and a colour bar; a line plot's .dat has one column per series, and its
 * .gp a fixed y range when one is asked for (0-100% accuracy); a grid of
 * heatmaps has one data block per panel and one multiplot script drawing
 * them all. Nothing planted in a file name, a title, an axis title, a tick
 * label or a panel title (backquotes, quotes and system(), a newline,
 * $(...), a file name starting with < or |) runs when the script is drawn
 * or re-run by hand. Nothing here needs gnuplot: when it is installed a PNG
 * appears as a bonus (and for the grid and the planted strings we check
 * that it does). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
    char path[1024];
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
    const char *y_labels[ROWS] = {"<bos>", "x y", "``"};     /* Brown's opening quote mark */
    char stem[512];
    snprintf(stem, sizeof stem, "%s/plots/attn_0", tmp_dir);   /* the directory is created */

    assert_int_equal(plot_heatmap(stem, "Attention \"weights\" `x`", m, ROWS, COLS, x_labels, y_labels,
                                  "source", "output", "attention weight", 0.0f, 1.0f), 0);

    char *dat = read_text(stem, ".dat");
    expect_in(dat, "NaN");
    assert_int_equal(count_data_rows(dat, COLS), ROWS);
    free(dat);

    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set terminal png");
    expect_in(gp, "set output \"attn_0.png\"");
    /* A quote and a backslash escaped, a backquote written \140 (gnuplot
     * would run `...` as a command), a space in a label made visible. */
    expect_in(gp, "set title \"Attention \\\"weights\\\" \\140x\\140\"");
    expect_in(gp, "set xtics (\"say\" 0, \"\\\"hi\\\"\" 1, \"a\\\\b\" 2, \"\xe2\x90\xa3\" 3)");
    expect_in(gp, "set ytics (\"<bos>\" 0, \"x\xe2\x90\xa3y\" 1, \"\\140\\140\" 2)");
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
        snprintf(want, sizeof want, "set title \"%s\"\n", panel_titles[p]);
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
    expect_in(gp, "set format y \"%g\"");          /* not gnuplot's 10.0000000 on a log axis */
    assert_null(strstr(gp, "linecolor"));          /* 2 series: gnuplot's own colours */
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
    assert_null(strstr(gp, "set format"));
    free(gp);
    dat = read_text(stem, ".dat");
    expect_in(dat, "300 0\n");
    assert_int_equal(count_data_rows(dat, 2), POINTS);
    free(dat);
}

/* The two numbers of "set yrange [lo:hi]" in a script. */
static void read_yrange(const char *gp, double *lo, double *hi) {
    const char *at = strstr(gp, "set yrange [");
    assert_non_null(at);
    assert_int_equal(sscanf(at, "set yrange [%lf:%lf]", lo, hi), 2);
}

/* An accuracy axis fixed to 0-100%: the .gp carries the range, with the
 * frame a little outside it so a curve at 100% is not drawn on the frame,
 * and ticks from 0 to 100 only; the .dat the points as they are;
 * plot_lines (auto range) writes no yrange; a range that is not an
 * interval, or reaches 0 on a log axis, is refused. */
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
    double lo, hi;
    read_yrange(gp, &lo, &hi);
    assert_true(lo < 0.0 && lo > -10.0);            /* room below 0 and above 100, a little */
    assert_true(hi > 100.0 && hi < 110.0);
    expect_in(gp, "set ytics 0, 20, 100\n");       /* the ticks stay 0..100 */
    expect_in(gp, "set key below\n");              /* not on a curve at 100% */
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
    read_yrange(gp, &lo, &hi);                       /* a log axis: room by a factor, ticks gnuplot's */
    assert_true(lo < 1e-3 && lo > 0.5e-3);
    assert_true(hi > 10.0 && hi < 20.0);
    assert_null(strstr(gp, "set ytics"));
    free(gp);
}

/* More series than gnuplot's 8 colours (chapter 04 draws 9 runs): each of
 * the first 12 curves gets its own colour, neighbours differ in dash
 * pattern too, and the key stands right of the plot, off the curves. */
static void test_line_plot_many_series(void **state) {
    (void)state;
    enum { SERIES = 12, POINTS = 3 };
    float x[POINTS] = {1, 2, 3}, y[SERIES][POINTS];
    const float *ys[SERIES];
    const char *names[SERIES];
    char name_text[SERIES][16];
    for (int s = 0; s < SERIES; s++) {
        for (int i = 0; i < POINTS; i++) y[s][i] = (float)(s + i + 1);
        ys[s] = y[s];
        snprintf(name_text[s], sizeof name_text[s], "run %d", s);
        names[s] = name_text[s];
    }
    char stem[512];
    snprintf(stem, sizeof stem, "%s/many", tmp_dir);
    assert_int_equal(plot_lines(stem, "loss", "step", "loss", x, ys, names, SERIES, POINTS, 1), 0);
    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set key outside right");
    char styles[SERIES][16], dashes[SERIES][16];
    for (int s = 0; s < SERIES; s++) {
        char want[32];
        snprintf(want, sizeof want, "using 1:%d with lines", s + 2);
        const char *at = strstr(gp, want), *colour = at ? strstr(at, "linecolor rgb \"") : NULL;
        assert_non_null(colour);
        const char *dash = strstr(colour, "dashtype ");
        assert_non_null(dash);
        assert_int_equal(sscanf(colour, "linecolor rgb \"%7[#0-9a-f]\"", styles[s]), 1);
        assert_int_equal(sscanf(dash, "dashtype %15[^ ]", dashes[s]), 1);
        for (int t = 0; t < s; t++) assert_string_not_equal(styles[s], styles[t]);
        if (s > 0) assert_string_not_equal(dashes[s], dashes[s - 1]);
    }
    free(gp);
}

/* A title wider than the picture's cells: the picture widens to hold it (up
 * to 1,200 pixels) and wraps it at spaces beyond that, so no title is cut at
 * the edges (a confusion matrix's was, at both sides). The break is
 * gnuplot's \n escape; a newline in the text itself still shows as \n. */
static void test_long_titles_fit(void **state) {
    (void)state;
    enum { R = 10, C = 10 };
    float m[R * C] = {0};
    char stem[512], title[400];
    snprintf(title, sizeof title, "ViT, patch 7 (16 patches), cls pooling: test images of each true class (row) by "
             "predicted class");
    snprintf(stem, sizeof stem, "%s/confusion", tmp_dir);
    assert_int_equal(plot_heatmap(stem, title, m, R, C, NULL, NULL, "predicted", "true", NULL, 0.0f, 1.0f), 0);
    char *gp = read_text(stem, ".gp");
    assert_true(picture_width(gp) >= 7 * (int)strlen(title));
    const char *at = strstr(gp, "set title \""), *brk = at ? strstr(at, "\\n") : NULL;
    assert_non_null(at);
    assert_true(brk == NULL || brk > strchr(at, '\n'));   /* it fits on one line: no break in it */
    free(gp);

    /* too long for 1,200 pixels: wrapped at spaces, and a newline in it escaped */
    char words[400] = "";
    for (int i = 0; i < 30; i++) strcat(words, "attention ");
    strcat(words, "a\nb");
    assert_int_equal(plot_heatmap(stem, words, m, R, C, NULL, NULL, NULL, NULL, NULL, 0.0f, 1.0f), 0);
    gp = read_text(stem, ".gp");
    assert_true(picture_width(gp) <= 1200);
    const char *line = strstr(gp, "set title \"");
    assert_non_null(line);
    expect_in(line, "attention\\nattention");      /* a break between two words */
    expect_in(line, "a\\\\nb");                  /* the text's own newline: the two characters \n */
    assert_true(strchr(line, '\n') > strstr(line, "a\\\\nb"));   /* the whole title on one script line */
    free(gp);

    /* a grid's figure title the same */
    snprintf(stem, sizeof stem, "%s/grid_title", tmp_dir);
    assert_int_equal(plot_heatmap_grid(stem, words, m, 1, 1, NULL, R, C, NULL, NULL, NULL, NULL, NULL, 0.0f, 1.0f),
                     0);
    gp = read_text(stem, ".gp");
    assert_true(picture_width(gp) <= 1200);
    expect_in(gp, "rowsfirst title \"attention attention");
    expect_in(gp, "attention\\nattention");
    free(gp);
}

/* Where a model looked (chapter 07's looked_*.png): four 28 x 28 images
 * with titles and no ticks make one row of big panels, not a strip of small
 * ones in a mostly empty picture; blank tick labels take no room either. */
static void test_overlay_row_fills_the_picture(void **state) {
    (void)state;
    enum { R = 28, C = 28, PANELS = 4 };
    float *inks = calloc((size_t)PANELS * R * C, sizeof(float)), *maps = calloc((size_t)PANELS * R * C, sizeof(float));
    const char *titles[PANELS] = {"T-shirt/top (true Dress)", "layer 1", "layer 2", "rollout"};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/looked", tmp_dir);
    assert_int_equal(plot_overlay_grid(stem, "test42: where the model looked", inks, maps, PANELS, PANELS, titles, R,
                                       C), 0);
    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set multiplot layout 1,4");
    const char *size = strstr(gp, " size ");
    int w = 0, h = 0;
    assert_non_null(size);
    assert_int_equal(sscanf(size, " size %d,%d", &w, &h), 2);
    /* the panels' side: the height of the one row of cells ("margins l, r, b, t" in
     * fractions of the picture); the four cover over half of it */
    const char *margins = strstr(gp, "\n    margins ");
    double l, r, b, t;
    assert_non_null(margins);
    assert_int_equal(sscanf(margins, "\n    margins %lf, %lf, %lf, %lf", &l, &r, &b, &t), 4);
    const double side = (t - b) * h;
    assert_true(PANELS * side * side > 0.5 * w * h);
    free(gp);

    const char *blank[R];
    for (int i = 0; i < R; i++) blank[i] = "";
    snprintf(stem, sizeof stem, "%s/blank_ticks", tmp_dir);
    assert_int_equal(plot_heatmap_grid(stem, "16 images", inks, PANELS, 4, titles, R, C, blank, blank, NULL, NULL,
                                       "ink", 0.0f, 1.0f), 0);
    gp = read_text(stem, ".gp");
    expect_in(gp, "set multiplot layout 1,4");      /* not 2 panels a row, as labelled cells would need */
    free(gp);
    free(inks);
    free(maps);
}

/* A diverging colour scale (chapter 06's expert shares): white at the
 * centre (the even share 1/E), the range as given, from 0; a centre outside
 * the range is refused. */
static void test_heatmap_diverging(void **state) {
    (void)state;
    const float share[2 * 4] = {0.21f, 0.29f, 0.25f, 0.25f, 0.3f, 0.2f, 0.26f, 0.24f};
    char stem[512];
    snprintf(stem, sizeof stem, "%s/moe_share", tmp_dir);
    assert_int_equal(plot_heatmap_diverging(stem, "share", share, 2, 4, NULL, NULL, "expert", "block",
                                            "share (white: 1/E = 0.25)", 0.0f, 0.25f, 0.5f), 0);
    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set palette defined (0 \"#2166ac\", 0.25 \"white\", 0.5 \"#b2182b\")");
    expect_in(gp, "set cbrange [0:0.5]");
    expect_in(gp, "set cblabel \"share (white: 1/E = 0.25)\"");
    free(gp);
    char *dat = read_text(stem, ".dat");
    expect_in(dat, "0.21 0.29 0.25 0.25\n");         /* the numbers as they are */
    free(dat);
    clear_error();
    assert_int_equal(plot_heatmap_diverging(stem, "share", share, 2, 4, NULL, NULL, NULL, NULL, NULL, 0.0f, 0.5f,
                                            0.5f), -1);
    assert_non_null(strstr(last_error(), "centre"));
    assert_int_equal(plot_heatmap_diverging(stem, "share", share, 2, 4, NULL, NULL, NULL, NULL, NULL, 0.0f, NAN,
                                            0.5f), -1);
}

/* ------------------------------------------------ strings that run nothing */

/* gnuplot runs `cmd` inside a double-quoted string, pipes a file name that
 * starts with < or | through the shell, and ends a command at a newline or a
 * ;, and the strings of a script come from the user: an image's or a
 * checkpoint's file name in a path stem or a title, a GPT prompt (Brown's ``
 * quote marks) in tick labels. Each kind of planted text below would create
 * a file MARK_<where>_<kind> in the plot's directory if it ran. */
enum { PLANTED_KINDS = 5 };

static void plant(char *out, size_t cap, int kind, const char *dir, const char *where) {
    char mark[300];
    snprintf(mark, sizeof mark, "%s/MARK_%s_%d", dir, where, kind);
    switch (kind) {
    case 0: snprintf(out, cap, "a `touch %s` b", mark); break;                      /* command substitution */
    case 1: snprintf(out, cap, "\" . system(\"touch %s\") . \"", mark); break;     /* ends a "string" */
    case 2: snprintf(out, cap, "' . system('touch %s') . '", mark); break;         /* ends a 'string' */
    case 3: snprintf(out, cap, "x\nsystem('touch %s')\n", mark); break;             /* ends the command */
    default: snprintf(out, cap, "$(touch %s); system(\"touch %s\") \\", mark, mark); /* shell, ;, a trailing \ */
    }
}

/* A file name (no '/', no control character) planted the same way; gnuplot
 * runs in the plot's directory, so a relative MARK lands there too. */
static void plant_stem(char *out, size_t cap, int kind, const char *dir, const char *plot) {
    char mark[64];
    snprintf(mark, sizeof mark, "MARK_%s_stem_%d", plot, kind);
    switch (kind) {
    case 0: snprintf(out, cap, "%s/s `touch %s` x", dir, mark); break;
    case 1: snprintf(out, cap, "%s/s\" . system(\"touch %s\") . \"", dir, mark); break;
    case 2: snprintf(out, cap, "%s/s' . system('touch %s') . '", dir, mark); break;
    case 3: snprintf(out, cap, "%s/<touch %s;x", dir, mark); break;     /* 'plot "<cmd"' reads a command's output */
    default: snprintf(out, cap, "%s/|touch %s;x", dir, mark); break;    /* 'set output "|cmd"' writes into one */
    }
}

/* Fails when a planted command ran: a MARK_ file in dir. */
static void expect_no_marks(const char *dir, const char *after) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    char found[256] = "";   /* a copy: the entry is d's, gone after closedir */
    for (struct dirent *e = readdir(d); e != NULL && !found[0]; e = readdir(d))
        if (strncmp(e->d_name, "MARK_", 5) == 0) snprintf(found, sizeof found, "%s", e->d_name);
    closedir(d);
    if (found[0]) fail_msg("a command planted in a plot's strings ran (it created %s/%s) %s", dir, found, after);
}

/* The script read the way gnuplot reads it, without gnuplot: outside
 * comments and strings no ` and no "system"; every string ends on its own
 * line; no ` inside a double-quoted string; no comment ends in a backslash
 * (it would go on to the next line); no file name starts with < or |. */
static void expect_inert_script(const char *gp) {
    for (const char *p = gp; *p;) {
        if (*p == '#') {
            const char *end = strchr(p, '\n');
            if (end == NULL) break;
            if (end[-1] == '\\') fail_msg("a comment line goes on to the next line:\n%s", gp);
            p = end + 1;
        } else if (*p == '\'') {
            for (p++; !(*p == '\'' && p[1] != '\''); p += *p == '\'' ? 2 : 1)
                if (*p == '\0' || *p == '\n') fail_msg("a single-quoted string runs past its line:\n%s", gp);
            p++;
        } else if (*p == '"') {
            for (p++; *p != '"'; p += *p == '\\' && p[1] ? 2 : 1) {
                if (*p == '\0' || *p == '\n') fail_msg("a double-quoted string runs past its line:\n%s", gp);
                if (*p == '`') fail_msg("a ` inside a double-quoted string:\n%s", gp);
            }
            p++;
        } else {
            if (*p == '`' || strncmp(p, "system", 6) == 0) fail_msg("'%.20s' outside a string:\n%s", p, gp);
            p++;
        }
    }
    /* where a file name goes: set output NAME, plot NAME, and plot_lines' continued plot lines */
    const char *before_names[] = {"set output ", "plot ", "\n     "};
    for (size_t i = 0; i < sizeof before_names / sizeof before_names[0]; i++)
        for (const char *p = strstr(gp, before_names[i]); p != NULL; p = strstr(p + 1, before_names[i])) {
            const char *name = p + strlen(before_names[i]);
            if ((name[0] == '"' || name[0] == '\'') && (name[1] == '<' || name[1] == '|'))
                fail_msg("a file name gnuplot runs as a command (%.20s):\n%s", name, gp);
        }
}

/* Run "gnuplot script" in dir, as a reader re-running it by hand; its exit status. */
static int run_gnuplot(const char *dir, const char *script) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0) {
            dup2(null_fd, 1);
            dup2(null_fd, 2);
        }
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* After a plot with planted strings: nothing ran while it was drawn, the
 * script is inert, and (with gnuplot) it runs cleanly by hand too, still
 * running nothing. */
static void check_planted_plot(const char *dir, const char *stem, int kind) {
    char after[64];
    snprintf(after, sizeof after, "(planted text of kind %d)", kind);
    expect_no_marks(dir, after);
    char *gp = read_text(stem, ".gp");
    expect_inert_script(gp);
    free(gp);
    if (gnuplot_available()) {
        char script[600];
        snprintf(script, sizeof script, "./%s.gp", strrchr(stem, '/') + 1);   /* gnuplot "<x.gp" runs x */
        char log[600];
        snprintf(log, sizeof log, "%s.gnuplot.log", stem);       /* kept when drawing it failed */
        if (access(log, F_OK) == 0) fail_msg("gnuplot failed on %s.gp (see %s)", stem, log);
        if (run_gnuplot(dir, script) != 0) fail_msg("gnuplot failed on %s.gp (run it by hand to see why)", stem);
        char png[600];
        snprintf(png, sizeof png, "%s.png", stem);
        if (access(png, F_OK) != 0) fail_msg("gnuplot wrote no %s", png);
        expect_no_marks(dir, after);
    }
}

static void test_planted_strings_run_nothing(void **state) {
    (void)state;
    enum { R = 2, C = 3, PANELS = 2 };
    const float m[PANELS * R * C] = {0, 0.5f, 1, 0.25f, 0.75f, 0.1f, /* panel 1 */ 1, 0, 0.5f, 0.2f, 0.4f, 0.6f};
    const float x[C] = {1, 2, 3};
    const float *ys[2] = {m, m + C};
    char dir[400];
    snprintf(dir, sizeof dir, "%s/planted", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    for (int kind = 0; kind < PLANTED_KINDS; kind++) {
        char stem[700], title[700], x_title[700], y_title[700], cb_title[700], xt[700], yt[700], p0[700], p1[700];
        plant(title, sizeof title, kind, dir, "title");
        plant(x_title, sizeof x_title, kind, dir, "xlabel");
        plant(y_title, sizeof y_title, kind, dir, "ylabel");
        plant(cb_title, sizeof cb_title, kind, dir, "cblabel");
        plant(xt, sizeof xt, kind, dir, "xtic");
        plant(yt, sizeof yt, kind, dir, "ytic");
        plant(p0, sizeof p0, kind, dir, "panel0");
        plant(p1, sizeof p1, kind, dir, "panel1");
        const char *x_labels[C] = {"a", xt, "c"}, *y_labels[R] = {yt, "b"}, *panels[PANELS] = {p0, p1};

        plant_stem(stem, sizeof stem, kind, dir, "heatmap");
        assert_int_equal(plot_heatmap(stem, title, m, R, C, x_labels, y_labels, x_title, y_title, cb_title,
                                      0.0f, 1.0f), 0);
        check_planted_plot(dir, stem, kind);
        char *gp = read_text(stem, ".gp");        /* the text as it shows, escaped */
        if (kind == 0) expect_in(gp, "set title \"a \\140touch ");
        if (kind == 1) expect_in(gp, "set title \"\\\" . system(\\\"touch ");
        if (kind == 3) expect_in(gp, "set title \"x\\\\nsystem('touch ");
        free(gp);

        plant_stem(stem, sizeof stem, kind, dir, "grid");
        assert_int_equal(plot_heatmap_grid(stem, title, m, PANELS, 2, panels, R, C, x_labels, y_labels, x_title,
                                           y_title, cb_title, 0.0f, 1.0f), 0);
        check_planted_plot(dir, stem, kind);

        plant_stem(stem, sizeof stem, kind, dir, "overlay");
        assert_int_equal(plot_overlay_grid(stem, title, m, m, PANELS, 2, panels, R, C), 0);
        check_planted_plot(dir, stem, kind);

        plant_stem(stem, sizeof stem, kind, dir, "lines");
        assert_int_equal(plot_lines(stem, title, x_title, y_title, x, ys, panels, 2, C, 0), 0);
        check_planted_plot(dir, stem, kind);
    }
}

/* A file name with a newline (and a command after it) is named exactly in
 * the script, with an octal escape, and its comment lines stay comments. */
static void test_control_characters_in_file_names(void **state) {
    (void)state;
    float m[4] = {0, 1, 0.5f, 0.25f};
    char dir[400], stem[600];
    snprintf(dir, sizeof dir, "%s/newline", tmp_dir);
    assert_int_equal(make_dirs(dir), 0);
    snprintf(stem, sizeof stem, "%s/a\nsystem('touch MARK_newline')\nb", dir);
    assert_int_equal(plot_heatmap(stem, "t", m, 2, 2, NULL, NULL, NULL, NULL, NULL, 0, 0), 0);
    check_planted_plot(dir, stem, 3);
    char *gp = read_text(stem, ".gp");
    expect_in(gp, "set output \"a\\012system('touch MARK_newline')\\012b.png\"\n");
    expect_in(gp, "# a system('touch MARK_newline') b.gp - heatmap");
    free(gp);
}

/* A gnuplot that never finishes (here a stand-in that sleeps) is stopped
 * after $ATTN_GNUPLOT_TIMEOUT seconds: the program goes on, the .dat and
 * .gp files stay, and no picture (or temporary file) is left. The plot runs
 * in a child process of its own group under alarm(HUNG_PLOT_LIMIT), so that
 * a plot code without the timeout FAILS this test after that many seconds
 * (the child killed by SIGALRM) instead of stalling the suite for the stand-in's
 * 10 minutes; the group is killed after, so no stand-in outlives the test.
 * (The plot code uses no OpenMP, so the child of this process can run it.) */
#define HUNG_PLOT_LIMIT 30
static void test_hung_gnuplot_is_stopped(void **state) {
    (void)state;
    if (!gnuplot_available()) skip();   /* without gnuplot nothing is run at all */
    char bin[400], fake[500], dir[400], stem[500], path[600];
    snprintf(bin, sizeof bin, "%s/fake_bin", tmp_dir);
    snprintf(dir, sizeof dir, "%s/hung", tmp_dir);
    assert_int_equal(make_dirs(bin), 0);
    assert_int_equal(make_dirs(dir), 0);
    snprintf(fake, sizeof fake, "%s/gnuplot", bin);
    FILE *f = fopen(fake, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nexec sleep 600\n", f);
    fclose(f);
    assert_int_equal(chmod(fake, 0755), 0);
    snprintf(stem, sizeof stem, "%s/curve", dir);
    fflush(stdout);
    fflush(stderr);
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {   /* the child: only the plot call, then its result as the exit status */
        setpgid(0, 0);
        alarm(HUNG_PLOT_LIMIT);
        char new_path[5000];
        const char *old_path = getenv("PATH");
        snprintf(new_path, sizeof new_path, "%s:%s", bin, old_path ? old_path : "");
        setenv("PATH", new_path, 1);
        setenv("ATTN_GNUPLOT_TIMEOUT", "0.5", 1);
        const float x[3] = {1, 2, 3}, y[3] = {3, 1, 2};
        const float *ys[1] = {y};
        const char *names[1] = {"loss"};
        const int rc = plot_lines(stem, "a curve", "step", "loss", x, ys, names, 1, 3, 0);
        fflush(NULL);
        _exit(rc == 0 ? 0 : 1);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
    kill(-child, SIGKILL);   /* a stand-in left running when the plot call was stopped */
    if (WIFSIGNALED(status))
        fail_msg("the plot call did not return within %d s with a gnuplot that never finishes (killed by signal "
                 "%d): the program would hang after its training", HUNG_PLOT_LIMIT, WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);    /* a picture that failed is not an error of the run */
    snprintf(path, sizeof path, "%s.png", stem);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s.gp", stem);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s.dat", stem);
    assert_int_equal(access(path, F_OK), 0);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) fail_msg("a temporary file was left: %s", e->d_name);
    closedir(d);
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
        cmocka_unit_test(test_line_plot_many_series),
        cmocka_unit_test(test_long_titles_fit),
        cmocka_unit_test(test_overlay_row_fills_the_picture),
        cmocka_unit_test(test_heatmap_diverging),
        cmocka_unit_test(test_planted_strings_run_nothing),
        cmocka_unit_test(test_control_characters_in_file_names),
        cmocka_unit_test(test_hung_gnuplot_is_stopped),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
