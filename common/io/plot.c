/* plot.c - gnuplot output (see plot.h).
 *
 * Every plot is two plain-text files next to each other:
 *   stem.dat  the numbers (a heatmap: one line per row, one column per cell;
 *             a line plot: x, then one column per series)
 *   stem.gp   a gnuplot script that reads stem.dat and writes stem.png
 * and, when gnuplot is installed, we run the script once to get stem.png.
 * The script refers to its files by their base names, so a reader can tweak
 * it and re-run it by hand:  cd out/02 && gnuplot attn_0.gp
 *
 * Labels (tokens) go into the script as gnuplot double-quoted strings, so a
 * backslash or a double quote in a token is escaped, a space is drawn as a
 * visible "␣", and control characters are spelled out ("\n"). */
#include "io/plot.h"
#include "util/error.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ gnuplot binary */

int gnuplot_available(void) {
    static int cached = -1;           /* -1: not looked up yet */
    if (cached >= 0) return cached;
    cached = 0;
    const char *path_env = getenv("PATH");
    if (path_env == NULL) return cached;
    /* Look for an executable "gnuplot" in each PATH directory. */
    const char *dir = path_env;
    while (*dir != '\0') {
        const char *colon = strchr(dir, ':');
        size_t dir_len = colon ? (size_t)(colon - dir) : strlen(dir);
        char candidate[4096];
        if (dir_len == 0)
            snprintf(candidate, sizeof candidate, "./gnuplot");
        else
            snprintf(candidate, sizeof candidate, "%.*s/gnuplot", (int)dir_len, dir);
        if (access(candidate, X_OK) == 0) {
            cached = 1;
            break;
        }
        if (colon == NULL) break;
        dir = colon + 1;
    }
    return cached;
}

static void hint_missing_gnuplot_once(void) {
    static int hinted = 0;
    if (hinted) return;
    hinted = 1;
    fprintf(stderr, "hint: gnuplot is not installed, so plots are written as .dat + .gp files only. "
                    "Install it (e.g. apt-get install gnuplot-nox) to get PNG images.\n");
}

/* ------------------------------------------------------------- file names */

/* Split "out/02/attn_0" into dir "out/02" and base "attn_0" (dir "." when
 * the stem has no slash). */
static int split_stem(const char *stem, char *dir, size_t dirlen, char *base, size_t baselen) {
    const char *slash = strrchr(stem, '/');
    if (slash == NULL) {
        snprintf(dir, dirlen, ".");
        slash = stem - 1;
    } else {
        size_t n = (size_t)(slash - stem);
        if (n == 0) n = 1;            /* "/attn" lives in "/" */
        if (n >= dirlen) return fail("plot path too long: '%s'", stem);
        memcpy(dir, stem, n);
        dir[n] = '\0';
    }
    const char *b = slash + 1;
    if (*b == '\0') return fail("plot path '%s' has no file name", stem);
    if (strlen(b) + 1 > baselen) return fail("plot path too long: '%s'", stem);
    strcpy(base, b);
    return 0;
}

/* ---------------------------------------------------------- gnuplot strings */

/* Write s as a gnuplot double-quoted string. With visible_spaces, a space is
 * drawn as "␣" (U+2423) so a space token is not an invisible tick label. */
static void write_gp_string(FILE *f, const char *s, int visible_spaces) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        switch (*c) {
        case '"':  fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\\\n", f); break;    /* shows as the two characters \n */
        case '\t': fputs("\\\\t", f); break;
        case '\r': fputs("\\\\r", f); break;
        case ' ':  fputs(visible_spaces ? "\xe2\x90\xa3" : " ", f); break;
        default:
            if (*c < 0x20 || *c == 0x7f) fprintf(f, "\\\\x%02x", *c);
            else fputc(*c, f);
        }
    }
    fputc('"', f);
}

/* Width of a label in characters (UTF-8 continuation bytes do not count). */
static int label_width(const char *s) {
    int n = 0;
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++)
        if ((*c & 0xC0) != 0x80) n += (*c < 0x20) ? 4 : 1;
    return n;
}

static int max_label_width(const char *const *labels, int n) {
    int widest = 0;
    for (int i = 0; labels != NULL && i < n; i++) {
        int w = label_width(labels[i]);
        if (w > widest) widest = w;
    }
    return widest;
}

/* The terminal line: pngcairo (anti-aliased, good Unicode) when this gnuplot
 * has it, the plain libgd png terminal otherwise. */
static void write_terminal(FILE *f, int width, int height, const char *base) {
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, \" pngcairo \") > 0) {\n"
               "    set terminal pngcairo noenhanced size %d,%d font \"Sans,10\"\n"
               "} else {\n"
               "    set terminal png noenhanced size %d,%d\n"
               "}\n",
            width, height, width, height);
    char png[1100];
    snprintf(png, sizeof png, "%s.png", base);
    fputs("set output ", f);
    write_gp_string(f, png, 0);
    fputc('\n', f);
}

/* "set xtics (...)" with explicit labels, every step-th one, a few per line. */
static void write_tic_labels(FILE *f, const char *axis, const char *const *labels, int n, int step) {
    fprintf(f, "set %s (", axis);
    int written = 0;
    for (int i = 0; i < n; i += step) {
        if (written > 0) fputs(written % 8 == 0 ? ", \\\n    " : ", ", f);
        write_gp_string(f, labels[i], 1);
        fprintf(f, " %d", i);
        written++;
    }
    fputs(")\n", f);
}

/* ---------------------------------------------------------------- rendering */

/* Run "gnuplot base.gp" inside dir. A failure is reported on stderr but is
 * not an error of the run: the .dat and .gp files are already written. */
static void render(const char *dir, const char *base) {
    if (!gnuplot_available()) {
        hint_missing_gnuplot_once();
        return;
    }
    char script[1100];
    snprintf(script, sizeof script, "%s.gp", base);
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "warning: cannot run gnuplot for '%s/%s': fork failed\n", dir, script);
        return;
    }
    char log_name[1100];
    snprintf(log_name, sizeof log_name, "%s.gnuplot.log", base);
    if (child == 0) {                     /* the child: become gnuplot */
        if (chdir(dir) != 0) _exit(126);
        /* gnuplot's messages (e.g. "empty y range" for a flat curve) go to a
         * log that is kept only when gnuplot fails */
        int log_fd = open(log_name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (log_fd >= 0) {
            dup2(log_fd, 2);
            close(log_fd);
        }
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno == EINTR) continue;
        return;
    }
    char log_path[2300];
    snprintf(log_path, sizeof log_path, "%s/%s", dir, log_name);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "warning: gnuplot failed on '%s/%s' (its messages are in %s); "
                        "the .dat and .gp files are still there\n", dir, script, log_path);
    else
        unlink(log_path);
}

/* Open stem.dat and stem.gp for writing (atomically, see util.h). */
static int open_outputs(const char *stem, AtomicFile *dat, AtomicFile *gp) {
    char path[1100];
    snprintf(path, sizeof path, "%s.dat", stem);
    if (atomic_open(dat, path) != 0) return -1;
    snprintf(path, sizeof path, "%s.gp", stem);
    if (atomic_open(gp, path) != 0) {
        atomic_close(dat, 0);
        return -1;
    }
    return 0;
}

static int close_outputs(AtomicFile *dat, AtomicFile *gp) {
    int rc_dat = atomic_close(dat, 1);
    if (rc_dat != 0) {
        atomic_close(gp, 0);
        return -1;
    }
    return atomic_close(gp, 1);
}

/* Text inside a "# ..." comment line: keep it on one line. */
static void write_comment_text(FILE *f, const char *s) {
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++)
        fputc(*c < 0x20 ? ' ' : *c, f);
}

/* A number for a data file: gnuplot reads "NaN" as a missing value. */
static void write_value(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fputs("NaN", f);
}

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* ------------------------------------------------------------------ heatmap */

int plot_heatmap(const char *path_stem, const char *title,
                 const float *m, int rows, int cols,
                 const char *const *x_labels, const char *const *y_labels,
                 const char *x_title, const char *y_title, float vmin, float vmax) {
    if (rows <= 0 || cols <= 0)
        return fail("plot_heatmap '%s': the matrix is empty (%d x %d)", path_stem, rows, cols);
    char dir[1024], base[1024];
    if (split_stem(path_stem, dir, sizeof dir, base, sizeof base) != 0) return -1;
    if (make_dirs(dir) != 0) return -1;

    AtomicFile dat, gp;
    if (open_outputs(path_stem, &dat, &gp) != 0) return -1;

    /* The data: gnuplot's plain "matrix" format, row r on line r. */
    fputs("# ", dat.f);
    write_comment_text(dat.f, title ? title : "heatmap");
    fprintf(dat.f, ": %d rows x %d columns (row 0 is drawn at the top)\n", rows, cols);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            if (c > 0) fputc(' ', dat.f);
            write_value(dat.f, m[(size_t)r * cols + c]);
        }
        fputc('\n', dat.f);
    }

    /* Size the picture so every cell stays readable: about 24 pixels a cell,
     * shrinking for big matrices; labels that no longer fit are thinned out. */
    int biggest = rows > cols ? rows : cols;
    int cell = clamp_int(1600 / biggest, 8, 24);
    int x_step = cell >= 12 ? 1 : (12 + cell - 1) / cell;
    int y_step = x_step;
    int x_label_px = x_labels ? 8 * max_label_width(x_labels, cols) : 24;   /* rotated: vertical room */
    int y_label_px = y_labels ? 8 * max_label_width(y_labels, rows) : 24;
    int width = clamp_int(cols * cell + y_label_px + 220, 480, 4000);
    int height = clamp_int(rows * cell + x_label_px + 160, 360, 4000);

    FILE *f = gp.f;
    fprintf(f, "# %s.gp - heatmap written by plot_heatmap (common/io/plot.c).\n", base);
    fprintf(f, "# Data: %s.dat (%d rows x %d columns). Render from this directory:\n", base, rows, cols);
    fprintf(f, "#   gnuplot %s.gp    -> %s.png\n", base, base);
    write_terminal(f, width, height, base);
    fputs("set title ", f);
    write_gp_string(f, title, 0);
    fputs("\nset xlabel ", f);
    write_gp_string(f, x_title, 0);
    fputs("\nset ylabel ", f);
    write_gp_string(f, y_title, 0);
    fputc('\n', f);
    fputs("unset key\n", f);
    fputs("set size ratio -1            # square cells\n", f);
    fprintf(f, "set xrange [-0.5:%d.5]\n", cols - 1);
    fprintf(f, "set yrange [%d.5:-0.5]       # reversed, so row 0 is at the top\n", rows - 1);
    fputs("set tics scale 0 nomirror\n", f);
    fputs("set xtics rotate by 90 right\n", f);
    if (x_labels) write_tic_labels(f, "xtics", x_labels, cols, x_step);
    else if (cols <= 60) fputs("set xtics 0,1\n", f);
    if (y_labels) write_tic_labels(f, "ytics", y_labels, rows, y_step);
    else if (rows <= 60) fputs("set ytics 0,1\n", f);
    fputs("set palette defined (0 \"white\", 0.5 \"#6baed6\", 1 \"#08306b\")   # white = 0, dark blue = high\n", f);
    if (vmin != vmax && isfinite(vmin) && isfinite(vmax)) {
        fputs("set cbrange [", f);
        write_value(f, vmin);
        fputc(':', f);
        write_value(f, vmax);
        fputs("]\n", f);
    }
    /* A colour bar of fixed width just right of the matrix, whatever its size. */
    fputs("set rmargin 14\n", f);
    fputs("set colorbox user origin graph 1.02, graph 0 size character 2, graph 1\n", f);
    fputs("plot ", f);
    char data_name[1100];
    snprintf(data_name, sizeof data_name, "%s.dat", base);
    write_gp_string(f, data_name, 0);
    fputs(" matrix with image\n", f);

    if (close_outputs(&dat, &gp) != 0) return -1;
    render(dir, base);
    return 0;
}

/* ---------------------------------------------------------------- line plot */

int plot_lines(const char *path_stem, const char *title,
               const char *x_title, const char *y_title,
               const float *x, const float *const *ys, const char *const *names,
               int n_series, int n_points, int log_y) {
    return plot_lines_range(path_stem, title, x_title, y_title, x, ys, names,
                            n_series, n_points, log_y, 0.0f, 0.0f);
}

int plot_lines_range(const char *path_stem, const char *title,
                     const char *x_title, const char *y_title,
                     const float *x, const float *const *ys, const char *const *names,
                     int n_series, int n_points, int log_y, float y_min, float y_max) {
    if (n_series <= 0 || n_points < 0)
        return fail("plot_lines '%s': need at least one series (got %d series of %d points)",
                    path_stem, n_series, n_points);
    int fixed_y = y_min != y_max;           /* y_min == y_max: fit the axis to the data */
    if (fixed_y && !(isfinite(y_min) && isfinite(y_max) && y_min < y_max))
        return fail("plot_lines '%s': y range [%g, %g] is not an interval (want y_min < y_max, "
                    "or y_min == y_max for auto)", path_stem, (double)y_min, (double)y_max);
    if (fixed_y && log_y && y_min <= 0)
        return fail("plot_lines '%s': y range [%g, %g] starts at or below 0 on a log axis",
                    path_stem, (double)y_min, (double)y_max);
    char dir[1024], base[1024];
    if (split_stem(path_stem, dir, sizeof dir, base, sizeof base) != 0) return -1;
    if (make_dirs(dir) != 0) return -1;

    AtomicFile dat, gp;
    if (open_outputs(path_stem, &dat, &gp) != 0) return -1;

    /* The data: column 1 is x, column s+2 is series s. */
    fputs("# ", dat.f);
    write_comment_text(dat.f, title ? title : "lines");
    fputs("\n# x", dat.f);
    for (int s = 0; s < n_series; s++) {
        fputs(" | ", dat.f);
        write_comment_text(dat.f, names ? names[s] : NULL);
    }
    fputc('\n', dat.f);
    for (int i = 0; i < n_points; i++) {
        write_value(dat.f, (log_y == 2 && x[i] <= 0) ? NAN : x[i]);
        for (int s = 0; s < n_series; s++) {
            double y = ys[s][i];
            if (log_y && y <= 0) y = NAN;       /* no place on a log axis */
            fputc(' ', dat.f);
            write_value(dat.f, y);
        }
        fputc('\n', dat.f);
    }

    FILE *f = gp.f;
    fprintf(f, "# %s.gp - line plot written by plot_lines (common/io/plot.c).\n", base);
    fprintf(f, "# Data: %s.dat (column 1 = x, then one column per series). Render from this directory:\n", base);
    fprintf(f, "#   gnuplot %s.gp    -> %s.png\n", base, base);
    write_terminal(f, 900, 560, base);
    fputs("set title ", f);
    write_gp_string(f, title, 0);
    fputs("\nset xlabel ", f);
    write_gp_string(f, x_title, 0);
    fputs("\nset ylabel ", f);
    write_gp_string(f, y_title, 0);
    fputc('\n', f);
    fputs("set grid\n", f);
    /* a log-log plot shows growing power laws: the top left corner is empty */
    fputs(log_y == 2 ? "set key top left\n" : "set key top right\n", f);
    if (log_y) fputs("set logscale y\n", f);
    if (log_y == 2) fputs("set logscale x 2\n", f);   /* log-log: x doubles per tick */
    if (fixed_y) {
        fputs("set yrange [", f);
        write_value(f, y_min);
        fputc(':', f);
        write_value(f, y_max);
        fputs("]            # fixed by the caller, not fitted to the data\n", f);
    }
    char data_name[1100];
    snprintf(data_name, sizeof data_name, "%s.dat", base);
    fputs("plot ", f);
    for (int s = 0; s < n_series; s++) {
        if (s > 0) fputs(", \\\n     ", f);
        write_gp_string(f, data_name, 0);
        fprintf(f, " using 1:%d with lines linewidth 2 title ", s + 2);
        write_gp_string(f, names && names[s] ? names[s] : "", 0);
    }
    fputc('\n', f);

    if (close_outputs(&dat, &gp) != 0) return -1;
    if (n_points > 0) render(dir, base);   /* gnuplot refuses an empty plot */
    return 0;
}
