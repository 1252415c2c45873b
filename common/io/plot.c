/* plot.c - gnuplot output (see plot.h).
 *
 * Every plot is two plain-text files next to each other:
 *   stem.dat  the numbers (a heatmap: one line per row, one column per cell;
 *             a grid of heatmaps: one such matrix per panel, separated by
 *             two blank lines; a line plot: x, then one column per series)
 *   stem.gp   a gnuplot script that reads stem.dat and writes stem.png
 * and, when gnuplot is installed, we run the script once to get stem.png.
 * The script refers to its files by their base names, so a reader can tweak
 * it and re-run it by hand:  cd out/02 && gnuplot attn_0.gp
 *
 * Every string in a script (titles, axis titles, tick labels, series names,
 * file names) is a gnuplot double-quoted string, and those come from the
 * user: an image's or a checkpoint's file name, a GPT prompt with Brown's ``
 * quote marks. gnuplot runs `...` inside a double-quoted string as a shell
 * command, so a backquote is written as the octal escape \140; a double
 * quote and a backslash are escaped too. In text, a space in a tick label is
 * drawn as a visible "␣" and control characters are spelled out (a newline
 * shows as the two characters \n), so no string can end its line; a file
 * name keeps its exact bytes (a control character as an octal escape). A
 * file name that gnuplot would read as a command ("<cmd", "|cmd") is written
 * as "./<cmd", and the comment lines that repeat it have its control
 * characters made spaces. (Single-quoted strings do no substitution either,
 * but gnuplot 5.4 cannot read one that starts with a quote or holds two
 * quotes in a row, such as Brown's closing quote mark: '''''' is an error.) */
#include "io/plot.h"
#include "util/error.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
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

/* How write_gp_string writes a string. */
enum {
    GP_TEXT,        /* a title: control characters spelled out ("\n" shows as \n) */
    GP_LABEL,       /* a tick label: as GP_TEXT, and a space drawn as "␣" (U+2423), so a space
                     * token is not an invisible label */
    GP_FILE_NAME    /* a file name: its exact bytes (a control character as an octal escape) */
};

/* Write s as a gnuplot double-quoted string that runs nothing: a backquote
 * as \140 (gnuplot would run `...` as a command), a double quote and a
 * backslash escaped, and no raw control character (a newline would end the
 * command). With wrap > 0 (a title), a space after which the next word
 * would take the line past wrap characters becomes a line break: gnuplot's
 * \n escape, which only this code writes (a newline in s still shows as
 * the two characters \n). f NULL: write nothing, only count. Returns the
 * number of lines. */
static int write_gp_text(FILE *f, const char *s, int how, int wrap) {
    int lines = 1, col = 0;
    if (f) fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (wrap > 0 && how == GP_TEXT && *c == ' ' && col > 0) {
            int word = 0;   /* characters up to the next space (UTF-8 continuation bytes do not count) */
            for (const unsigned char *w = c + 1; *w && *w != ' '; w++) word += (*w & 0xC0) != 0x80;
            if (col + 1 + word > wrap) {
                if (f) fputs("\\n", f);
                lines++;
                col = 0;
                continue;
            }
        }
        col += (*c & 0xC0) != 0x80;
        if (f == NULL) continue;
        if (*c == '"') fputs("\\\"", f);
        else if (*c == '\\') fputs("\\\\", f);
        else if (*c == '`') fputs("\\140", f);
        else if (*c == ' ' && how == GP_LABEL) fputs("\xe2\x90\xa3", f);
        else if ((*c < 0x20 || *c == 0x7f) && how == GP_FILE_NAME) fprintf(f, "\\%03o", *c);
        else if (*c == '\n') fputs("\\\\n", f);    /* shows as the two characters \n */
        else if (*c == '\t') fputs("\\\\t", f);
        else if (*c == '\r') fputs("\\\\r", f);
        else if (*c < 0x20 || *c == 0x7f) fprintf(f, "\\\\x%02x", *c);
        else fputc(*c, f);
    }
    if (f) fputc('"', f);
    return lines;
}

static void write_gp_string(FILE *f, const char *s, int how) { write_gp_text(f, s, how, 0); }

/* A file name for "set output" or "plot": gnuplot pipes "|cmd" and "<cmd"
 * through the shell and reads "-", "+" and "$name" as special inputs, so a
 * name that starts with anything but a letter, a digit, '_', '.' or a
 * non-ASCII byte is written as "./name" (the same file). */
static void write_gp_file_name(FILE *f, const char *name) {
    unsigned char first = (unsigned char)name[0];
    char safe[1100];
    if (!(isalnum(first) || first == '_' || first == '.' || first >= 0x80)) {
        snprintf(safe, sizeof safe, "./%s", name);
        name = safe;
    }
    write_gp_string(f, name, GP_FILE_NAME);
}

/* The file name in the script's comment lines: one line, whatever the name
 * holds (a newline would end the comment and start a command). */
static const char *comment_safe(const char *s, char *buf, size_t len) {
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && n + 1 < len; c++)
        buf[n++] = (char)(*c < 0x20 || *c == 0x7f ? ' ' : *c);
    buf[n] = '\0';
    return buf;
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
    /* the programs run "gnuplot -c NAME.gp FILE" and rename FILE to NAME.png
     * once it is complete (render); by hand, the picture is NAME.png */
    fputs("# gnuplot -c this.gp FILE draws into FILE instead of the .png below\n", f);
    fputs("if (ARGC > 0) {\n    set output ARG1\n} else {\n    set output ", f);
    write_gp_file_name(f, png);
    fputs("\n}\n", f);
}

/* "set xtics (...)" with explicit labels, every step-th one, a few per line. */
static void write_tic_labels(FILE *f, const char *axis, const char *const *labels, int n, int step) {
    fprintf(f, "set %s (", axis);
    int written = 0;
    for (int i = 0; i < n; i += step) {
        if (written > 0) fputs(written % 8 == 0 ? ", \\\n    " : ", ", f);
        write_gp_string(f, labels[i], GP_LABEL);
        fprintf(f, " %d", i);
        written++;
    }
    fputs(")\n", f);
}

/* ---------------------------------------------------------------- rendering */

/* A complete PNG file: its signature first and its IEND chunk last. gnuplot
 * may exit 0 after writes that failed (a full disk left a 0-byte picture). */
static int png_complete(const char *path) {
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    unsigned char head[8], tail[12];
    int ok = fread(head, 1, 8, f) == 8 && memcmp(head, signature, 8) == 0 && fseek(f, -12, SEEK_END) == 0 &&
             fread(tail, 1, 12, f) == 12 && memcmp(tail, iend, 12) == 0;
    fclose(f);
    return ok;
}

/* How long one picture may take: 60 s, or $ATTN_GNUPLOT_TIMEOUT seconds (a
 * positive number). A picture takes well under a second; a gnuplot that
 * waits for something that never comes must not hang the program after its
 * training is done. */
static double gnuplot_timeout(void) {
    const char *env = getenv("ATTN_GNUPLOT_TIMEOUT");
    char *end = NULL;
    const double t = env ? strtod(env, &end) : 0.0;
    return env && end != env && *end == '\0' && t > 0 && t < 1e6 ? t : 60.0;
}

int gnuplot_timeout_check(void) {
    const char *env = getenv("ATTN_GNUPLOT_TIMEOUT");
    char *end = NULL;
    const double t = env ? strtod(env, &end) : 0.0;
    if (env == NULL || env[0] == '\0' || (end != env && *end == '\0' && t > 0 && t < 1e6)) return 0;
    char quoted[96];
    return fail("ATTN_GNUPLOT_TIMEOUT=%s: expected the seconds one picture may take, a number above 0 and below "
                "1000000 (unset: 60)", error_excerpt(env, quoted, sizeof quoted));
}

/* Wait for the gnuplot child: its wait status; -1 when waiting failed; -2
 * when it ran past timeout seconds (it is then killed and reaped). */
static int wait_for_gnuplot(pid_t child, double timeout) {
    const double deadline = now_seconds() + timeout;
    for (;;) {
        int status = 0;
        const pid_t got = waitpid(child, &status, WNOHANG);
        if (got == child) return status;
        if (got < 0 && errno != EINTR) return -1;
        if (now_seconds() > deadline) {
            kill(child, SIGKILL);
            while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
            return -2;
        }
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 5000000}, NULL);   /* 5 ms */
    }
}

/* Run "gnuplot -c base.gp TEMP" inside dir: the script draws into the
 * temporary file TEMP = base.png.tmp.<pid>, renamed to base.png only when
 * gnuplot succeeded and the picture is complete, so a failed drawing never
 * replaces an earlier picture with a broken one (and a Ctrl-C meanwhile
 * removes TEMP, util.h). A failure is reported on stderr but is not an
 * error of the run: the .dat and .gp files are already written. */
static void render(const char *dir, const char *base) {
    if (!gnuplot_available()) {
        hint_missing_gnuplot_once();
        return;
    }
    char script[1100], png_tmp[1200], tmp_path[2300], png_path[2300];
    snprintf(script, sizeof script, "%s.gp", base);
    snprintf(png_tmp, sizeof png_tmp, "%s.png.tmp.%ld", base, (long)getpid());
    snprintf(tmp_path, sizeof tmp_path, "%s/%s", dir, png_tmp);
    snprintf(png_path, sizeof png_path, "%s/%s.png", dir, base);
    write_signals_install();
    temp_remove_stale(png_path);
    fflush(stdout);
    fflush(stderr);
    int slot = temp_register(tmp_path);
    pid_t child = fork();
    if (child < 0) {
        temp_forget(slot);
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
        /* "./": gnuplot runs a script named "<cmd..." as a shell command, and
         * writes into a command for an output named "|cmd..." */
        char path[1200], output[1300];
        snprintf(path, sizeof path, "./%s", script);
        snprintf(output, sizeof output, "./%s", png_tmp);
        execlp("gnuplot", "gnuplot", "-c", path, output, (char *)NULL);
        _exit(127);
    }
    const int status = wait_for_gnuplot(child, gnuplot_timeout());
    char log_path[2300];
    snprintf(log_path, sizeof log_path, "%s/%s", dir, log_name);
    if (status == -2) {
        fprintf(stderr, "warning: gnuplot did not finish '%s/%s' in %g s and was stopped; the .dat and .gp "
                        "files are still there (run it by hand: cd %s && gnuplot %s)\n", dir, script,
                gnuplot_timeout(), dir, script);
        unlink(tmp_path);
    } else if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "warning: gnuplot failed on '%s/%s' (its messages are in %s); "
                        "the .dat and .gp files are still there\n", dir, script, log_path);
        unlink(tmp_path);
    } else if (!png_complete(tmp_path)) {
        fprintf(stderr, "warning: gnuplot wrote an incomplete picture for '%s/%s' (a full disk? its messages are "
                        "in %s); an earlier %s, if any, is left as it was\n", dir, script, log_path, png_path);
        unlink(tmp_path);
    } else if (rename(tmp_path, png_path) != 0) {
        fprintf(stderr, "warning: cannot write '%s': rename from '%s' failed: %s\n", png_path, tmp_path,
                strerror(errno));
        unlink(tmp_path);
    } else {
        unlink(log_path);
    }
    temp_forget(slot);
}

/* Open stem.dat and stem.gp for writing (atomically, see util.h). */
static int open_outputs(const char *stem, AtomicFile *dat, AtomicFile *gp) {
    char path[1100];
    if (path_format(path, sizeof path, "%s.dat", stem) != 0) return -1;
    if (atomic_open(dat, path) != 0) return -1;
    if (path_format(path, sizeof path, "%s.gp", stem) != 0 || atomic_open(gp, path) != 0) {
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

/* ------------------------------------------------------------- plot pieces */

/* The start of every plot: split the stem, create its directory, open
 * stem.dat and stem.gp. */
static int begin_plot(const char *path_stem, char *dir, char *base, size_t len,
                      AtomicFile *dat, AtomicFile *gp) {
    if (split_stem(path_stem, dir, len, base, len) != 0) return -1;
    if (make_dirs(dir) != 0) return -1;
    return open_outputs(path_stem, dat, gp);
}

/* "set <what> "<text>"" on one line, e.g. set title "loss". */
static void write_set_string(FILE *f, const char *what, const char *text) {
    fprintf(f, "set %s ", what);
    write_gp_string(f, text, GP_TEXT);
    fputc('\n', f);
}

/* A picture's title, "set title "<text>"", wrapped at spaces to lines of
 * at most wrap characters (see write_gp_text). Returns the number of lines. */
static int write_set_title(FILE *f, const char *text, int wrap) {
    fputs("set title ", f);
    int lines = write_gp_text(f, text, GP_TEXT, wrap);
    fputc('\n', f);
    return lines;
}

/* How wide a character of a title is, in pixels, at most: the titles of
 * line plots and heatmaps use the terminal's 10-point font, a grid's
 * figure title 13 points (write_terminal, heatmap_grid). A title is given
 * the width it needs (up to PLOT_MAX_WIDTH), and wrapped beyond that, so it
 * is never cut at the picture's edges. */
enum { TITLE_CHAR_PX = 7, BIG_TITLE_CHAR_PX = 9 };

/* The data file's name as a gnuplot string: "attn_0.dat". */
static void write_data_name(FILE *f, const char *base) {
    char data_name[1100];
    snprintf(data_name, sizeof data_name, "%s.dat", base);
    write_gp_file_name(f, data_name);
}

/* "set cbrange [lo:hi]", the values the palette's two ends stand for. */
static void write_cbrange(FILE *f, double lo, double hi) {
    fputs("set cbrange [", f);
    write_value(f, lo);
    fputc(':', f);
    write_value(f, hi);
    fputs("]", f);
}

/* ------------------------------------------------------------------ heatmap */

/* One matrix in gnuplot's plain "matrix" format: row r on line r. */
static void write_matrix_rows(FILE *f, const float *m, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            if (c > 0) fputc(' ', f);
            write_value(f, m[(size_t)r * cols + c]);
        }
        fputc('\n', f);
    }
}

/* The widest picture: a README (or a laptop's screen) shows it whole at
 * this width; a bigger figure is split into more rows of panels. */
enum { PLOT_MAX_WIDTH = 1200 };

/* How many pixels a cell gets so it stays readable: about 24, shrinking for
 * big matrices (never below 8). */
static int heatmap_cell_px(int rows, int cols) {
    int biggest = rows > cols ? rows : cols;
    return clamp_int(1600 / biggest, 8, 24);
}

/* Pixels the tick labels need: rotated x labels take vertical room, y labels
 * horizontal room; numeric ticks (no labels) about 24. */
static int x_label_px(const char *const *x_labels, int cols) {
    return x_labels ? 8 * max_label_width(x_labels, cols) : 24;
}

static int y_label_px(const char *const *y_labels, int rows) {
    return y_labels ? 8 * max_label_width(y_labels, rows) : 24;
}

/* The axes of a heatmap: square cells, row 0 at the top, a tick label per
 * row and column (every few when the cells are too small for all of them),
 * and the white -> dark blue palette. */
static void write_heatmap_axes(FILE *f, int rows, int cols, int cell,
                               const char *const *x_labels, const char *const *y_labels) {
    int step = cell >= 12 ? 1 : (12 + cell - 1) / cell;
    fputs("unset key\n", f);
    fputs("set size ratio -1            # square cells\n", f);
    fprintf(f, "set xrange [-0.5:%d.5]\n", cols - 1);
    fprintf(f, "set yrange [%d.5:-0.5]       # reversed, so row 0 is at the top\n", rows - 1);
    fputs("set tics scale 0 nomirror\n", f);
    fputs("set xtics rotate by 90 right\n", f);
    if (x_labels) write_tic_labels(f, "xtics", x_labels, cols, step);
    else if (cols <= 60) fputs("set xtics 0,1\n", f);
    if (y_labels) write_tic_labels(f, "ytics", y_labels, rows, step);
    else if (rows <= 60) fputs("set ytics 0,1\n", f);
    fputs("set palette defined (0 \"white\", 0.5 \"#6baed6\", 1 \"#08306b\")   # white = 0, dark blue = high\n", f);
}

/* plot_heatmap, and with a finite centre plot_heatmap_diverging. */
static int heatmap(const char *path_stem, const char *title, const float *m, int rows, int cols,
                   const char *const *x_labels, const char *const *y_labels, const char *x_title,
                   const char *y_title, const char *cb_title, float vmin, float vmax, float centre) {
    if (rows <= 0 || cols <= 0)
        return fail("plot_heatmap '%s': the matrix is empty (%d x %d)", path_stem, rows, cols);
    const int diverging = isfinite(centre);
    if (diverging && !(isfinite(vmin) && isfinite(vmax) && vmin < centre && centre < vmax))
        return fail("plot_heatmap_diverging '%s': the centre %g is not inside the colour range [%g, %g] "
                    "(want vmin < centre < vmax)", path_stem, (double)centre, (double)vmin, (double)vmax);
    char dir[1024], base[1024];
    AtomicFile dat, gp;
    if (begin_plot(path_stem, dir, base, sizeof dir, &dat, &gp) != 0) return -1;

    fputs("# ", dat.f);
    write_comment_text(dat.f, title ? title : "heatmap");
    fprintf(dat.f, ": %d rows x %d columns (row 0 is drawn at the top)\n", rows, cols);
    write_matrix_rows(dat.f, m, rows, cols);

    /* Size the picture so every cell stays readable; labels that no longer
     * fit are thinned out (write_heatmap_axes). */
    int cell = heatmap_cell_px(rows, cols);
    /* at most PLOT_MAX_WIDTH pixels wide: a README shows it at its width */
    int room = PLOT_MAX_WIDTH - y_label_px(y_labels, rows) - 220;
    if (cell * cols > room) cell = room / cols > 4 ? room / cols : 4;
    int width = clamp_int(cols * cell + y_label_px(y_labels, rows) + 220, 480, PLOT_MAX_WIDTH);
    /* room for the title (centred over the cells, which sit near the middle) */
    const int title_w = TITLE_CHAR_PX * label_width(title) + 80;
    if (width < title_w) width = title_w < PLOT_MAX_WIDTH ? title_w : PLOT_MAX_WIDTH;
    const int wrap = (width - 80) / TITLE_CHAR_PX;
    const int title_lines = write_gp_text(NULL, title, GP_TEXT, wrap);
    int height = clamp_int(rows * cell + x_label_px(x_labels, cols) + 160 + 16 * (title_lines - 1), 360, 4000);

    FILE *f = gp.f;
    char shown[1024];
    comment_safe(base, shown, sizeof shown);
    fprintf(f, "# %s.gp - heatmap written by plot_heatmap (common/io/plot.c).\n", shown);
    fprintf(f, "# Data: %s.dat (%d rows x %d columns). Render from this directory:\n", shown, rows, cols);
    fprintf(f, "#   gnuplot %s.gp    -> %s.png\n", shown, shown);
    write_terminal(f, width, height, base);
    write_set_title(f, title, wrap);
    write_set_string(f, "xlabel", x_title);
    write_set_string(f, "ylabel", y_title);
    write_set_string(f, "cblabel", cb_title);
    write_heatmap_axes(f, rows, cols, cell, x_labels, y_labels);
    if (diverging) {
        /* below the centre blue, the centre white, above it red; the palette's
         * numbers are the values themselves (gnuplot maps their range onto
         * the cbrange, which is the same range) */
        fputs("set palette defined (", f);
        write_value(f, vmin);
        fputs(" \"#2166ac\", ", f);
        write_value(f, centre);
        fputs(" \"white\", ", f);
        write_value(f, vmax);
        fputs(" \"#b2182b\")   # diverging: white = the centre\n", f);
    }
    if (vmin != vmax && isfinite(vmin) && isfinite(vmax)) {
        write_cbrange(f, vmin, vmax);
        fputc('\n', f);
    }
    /* A colour bar of fixed width just right of the matrix, whatever its size. */
    fputs("set rmargin 14\n", f);
    fputs("set colorbox user origin graph 1.02, graph 0 size character 2, graph 1\n", f);
    fputs("plot ", f);
    write_data_name(f, base);
    fputs(" matrix with image\n", f);

    if (close_outputs(&dat, &gp) != 0) return -1;
    render(dir, base);
    return 0;
}

int plot_heatmap(const char *path_stem, const char *title,
                 const float *m, int rows, int cols,
                 const char *const *x_labels, const char *const *y_labels,
                 const char *x_title, const char *y_title, const char *cb_title, float vmin, float vmax) {
    return heatmap(path_stem, title, m, rows, cols, x_labels, y_labels, x_title, y_title, cb_title, vmin, vmax,
                   NAN);
}

int plot_heatmap_diverging(const char *path_stem, const char *title, const float *m, int rows, int cols,
                           const char *const *x_labels, const char *const *y_labels, const char *x_title,
                           const char *y_title, const char *cb_title, float vmin, float centre, float vmax) {
    if (!isfinite(centre))
        return fail("plot_heatmap_diverging '%s': the centre %g is not a number", path_stem, (double)centre);
    return heatmap(path_stem, title, m, rows, cols, x_labels, y_labels, x_title, y_title, cb_title, vmin, vmax,
                   centre);
}

/* ------------------------------------------------------------- heatmap grid */

/* The smallest and largest finite value of n numbers, for a colour range
 * shared by every panel. Falls back to [0, 1] when there is none, and widens
 * a single value v to [v, v + 1] (gnuplot refuses an empty range). */
static void finite_range(const float *v, size_t n, double *lo, double *hi) {
    int seen = 0;
    *lo = 0.0;
    *hi = 1.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        if (!seen || v[i] < *lo) *lo = v[i];
        if (!seen || v[i] > *hi) *hi = v[i];
        seen = 1;
    }
    if (*hi <= *lo) *hi = *lo + 1.0;
}

/* One panel of an overlay (plot_overlay_grid) as gnuplot rgbimage rows
 * "x y r g b": the image in grey, dimmed to 0.7 so that colour stands out,
 * blended with orange by the map scaled to its own largest value:
 * alpha = 0.85 map / max(map), rgb = (1 - alpha) grey + alpha orange. */
static void write_overlay_rows(FILE *f, const float *ink, const float *map, int rows, int cols) {
    float top = 0.0f;
    for (int i = 0; i < rows * cols; i++) if (map[i] > top) top = map[i];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float v = ink[r * cols + c], grey = 0.7f * 255.0f * (v < 0 ? 0 : v > 1 ? 1 : v);
            float alpha = top > 0 ? 0.85f * map[r * cols + c] / top : 0.0f;
            fprintf(f, "%d %d %d %d %d\n", c, r, (int)((1 - alpha) * grey + alpha * 255.0f + 0.5f),
                    (int)((1 - alpha) * grey + alpha * 127.0f + 0.5f), (int)((1 - alpha) * grey + 0.5f));
        }
}

/* plot_heatmap_grid, and with inks (not NULL) plot_overlay_grid. */
static int heatmap_grid(const char *path_stem, const char *title, const float *maps, const float *inks,
                        int n_panels, int grid_cols, const char *const *panel_titles, int rows, int cols,
                        const char *const *x_labels, const char *const *y_labels,
                        const char *x_title, const char *y_title, const char *cb_title, float vmin, float vmax) {
    if (rows <= 0 || cols <= 0)
        return fail("plot_heatmap_grid '%s': the matrix is empty (%d x %d)", path_stem, rows, cols);
    if (n_panels < 1 || grid_cols < 1)
        return fail("plot_heatmap_grid '%s': need at least one panel and one panel per row "
                    "(got %d panels, %d per row)", path_stem, n_panels, grid_cols);
    if (grid_cols > n_panels) grid_cols = n_panels;        /* no empty columns */
    int grid_rows = (n_panels + grid_cols - 1) / grid_cols;
    size_t panel_size = (size_t)rows * cols;

    char dir[1024], base[1024];
    AtomicFile dat, gp;
    if (begin_plot(path_stem, dir, base, sizeof dir, &dat, &gp) != 0) return -1;

    /* The data: one matrix per panel, each a gnuplot data block; two blank
     * lines end a block, so "index p" in the script picks panel p. */
    fputs("# ", dat.f);
    write_comment_text(dat.f, title ? title : "heatmaps");
    fprintf(dat.f, ": %d panels of %d rows x %d columns (row 0 is drawn at the top)\n",
            n_panels, rows, cols);
    for (int p = 0; p < n_panels; p++) {
        if (p > 0) fputs("\n\n", dat.f);
        fprintf(dat.f, "# panel %d: ", p);
        write_comment_text(dat.f, panel_titles ? panel_titles[p] : NULL);
        fputc('\n', dat.f);
        if (inks) write_overlay_rows(dat.f, inks + p * panel_size, maps + p * panel_size, rows, cols);
        else write_matrix_rows(dat.f, maps + p * panel_size, rows, cols);
    }

    /* The picture, in pixels. Every panel is the same box:
     *   left:   y tick labels and the y axis title
     *   middle: the cells, `cell` pixels square (as in plot_heatmap, and
     *           smaller when the whole grid would not fit in 4000 pixels)
     *   right:  a small gap to the next panel
     * with the panel's title above and the rotated x tick labels and the x
     * axis title below (an overlay has no ticks, blank labels take no room,
     * and a missing title none either: the images get the room). The figure
     * adds the title on top and one colour bar, for all panels, on the right. */
    const int tick_y = inks ? 0 : y_label_px(y_labels, rows), tick_x = inks ? 0 : x_label_px(x_labels, cols);
    int left = tick_y + (y_title && *y_title ? 40 : 12), right = 24;
    int top = panel_titles ? 28 : 12, bottom = tick_x + (x_title && *x_title ? 40 : 12);
    int fig_top = 44, colorbar = 110;
    int cell = heatmap_cell_px(rows, cols);
    int longest = rows > cols ? rows : cols;
    if (longest * cell < 160) cell = 160 / longest;   /* a tiny matrix: not a postage stamp */
    /* Cells too narrow for the width (labelled ones under 12 pixels lose
     * every other label; any under 4 are specks; blank labels count as
     * none): take fewer panels per row, more rows, until they fit or one
     * panel is left per row. */
    const int labelled = max_label_width(x_labels, cols) > 0 || max_label_width(y_labels, rows) > 0;
    int narrowest = labelled ? 12 : 4;
    if (narrowest > cell) narrowest = cell;
    while (grid_cols > 1 && ((PLOT_MAX_WIDTH - colorbar) / grid_cols - left - right) / cols < narrowest)
        grid_cols = (grid_cols + 1) / 2;
    grid_rows = (n_panels + grid_cols - 1) / grid_cols;
    int room_w = (PLOT_MAX_WIDTH - colorbar) / grid_cols - left - right;
    int room_h = (4000 - fig_top) / grid_rows - top - bottom;
    if (cell * cols > room_w) cell = room_w / cols;
    if (cell * rows > room_h) cell = room_h / rows;
    if (cell < 1) cell = 1;
    /* A panel title wider than its cells hangs out on both sides: widen the
     * gap between panels so two neighbouring titles do not touch (and cut
     * the cells to keep the picture within PLOT_MAX_WIDTH). */
    int title_px = 7 * max_label_width(panel_titles, n_panels);
    int gap = title_px - cols * cell + 16 - left;
    if (gap > right && grid_cols * (left + cols * cell + gap) + colorbar > PLOT_MAX_WIDTH) {
        int fit = ((PLOT_MAX_WIDTH - colorbar) / grid_cols - 16) / cols;
        if (fit < cell) cell = fit > 1 ? fit : 1;
    }
    if (left + right < title_px - cols * cell + 16) right = title_px - cols * cell + 16 - left;
    int panel_w = left + cols * cell + right, panel_h = top + rows * cell + bottom;
    int grid_w = grid_cols * panel_w + colorbar;
    int width = grid_w > 480 ? grid_w : 480;
    /* the figure's title: as wide as it needs (up to PLOT_MAX_WIDTH), wrapped beyond */
    const int title_w = BIG_TITLE_CHAR_PX * label_width(title) + 40;
    const int widest = width > PLOT_MAX_WIDTH ? width : PLOT_MAX_WIDTH;
    if (width < title_w) width = title_w < widest ? title_w : widest;
    const int wrap = (width - 40) / BIG_TITLE_CHAR_PX;
    fig_top += 20 * (write_gp_text(NULL, title, GP_TEXT, wrap) - 1);
    int grid_h = fig_top + grid_rows * panel_h;
    int height = grid_h > 200 ? grid_h : 200;
    int pad_x = (width - grid_w) / 2, pad_y = height - grid_h;   /* a tiny grid: centred, on the top */

    FILE *f = gp.f;
    char shown[1024];
    comment_safe(base, shown, sizeof shown);
    fprintf(f, "# %s.gp - grid of heatmaps written by plot_heatmap_grid (common/io/plot.c).\n", shown);
    fprintf(f, "# Data: %s.dat, %d blocks (panels) of %d rows x %d columns. Render from this directory:\n",
            shown, n_panels, rows, cols);
    fprintf(f, "#   gnuplot %s.gp    -> %s.png\n", shown, shown);
    write_terminal(f, clamp_int(width, 480, 4000), clamp_int(height, 200, 4000), base);
    write_heatmap_axes(f, rows, cols, cell, x_labels, y_labels);
    double lo = vmin, hi = vmax;
    if (inks) {
        /* the colour bar of an overlay: the blend over the darkest pixel */
        fputs("unset xtics\nunset ytics\n", f);
        fputs("set palette defined (0 \"black\", 1 \"#d96c00\")\n", f);
        fputs("set cblabel \"attention / the panel's largest\"\n", f);
        lo = 0.0;
        hi = 1.0;
    } else {
        write_set_string(f, "cblabel", cb_title);
        if (vmin == vmax || !isfinite(vmin) || !isfinite(vmax)) finite_range(maps, (size_t)n_panels * panel_size, &lo, &hi);
    }
    write_cbrange(f, lo, hi);
    fputs("   # one colour range for every panel\n", f);

    /* Positions as fractions of the picture ("screen" coordinates, 0 at the
     * bottom left): the outer edges of the cell areas, and the gaps between
     * them, which hold the labels. */
    double cells_left = (double)(pad_x + left) / width;
    double cells_right = (double)(pad_x + grid_cols * panel_w - right) / width;
    double cells_top = 1.0 - (double)(fig_top + top) / height;
    double cells_bottom = (double)(pad_y + bottom) / height;
    fprintf(f, "# the colour bar: right of the panels, as tall as the whole grid\n");
    fprintf(f, "set colorbox user origin screen %.4f, screen %.4f size screen %.4f, screen %.4f\n",
            (double)(pad_x + grid_cols * panel_w + 16) / width, cells_bottom,
            20.0 / width, cells_top - cells_bottom);
    fprintf(f, "# %d rows of %d panels; margins = where the cells of the outer panels end,\n"
               "# spacing = the room between two panels for their labels and titles\n",
            grid_rows, grid_cols);
    fprintf(f, "set multiplot layout %d,%d rowsfirst title ", grid_rows, grid_cols);
    write_gp_text(f, title, GP_TEXT, wrap);
    fprintf(f, " font \",13\" \\\n    margins %.4f, %.4f, %.4f, %.4f spacing %.4f, %.4f\n",
            cells_left, cells_right, cells_bottom, cells_top,
            (double)(right + left) / width, (double)(bottom + top) / height);
    for (int p = 0; p < n_panels; p++) {
        /* axis titles only on the outer panels: the bottom one of each
         * column and the leftmost of each row */
        int is_bottom = p + grid_cols >= n_panels, is_left = p % grid_cols == 0;
        fprintf(f, "\n# panel %d\n", p);
        write_set_string(f, "title", panel_titles ? panel_titles[p] : NULL);
        write_set_string(f, "xlabel", is_bottom ? x_title : NULL);
        write_set_string(f, "ylabel", is_left ? y_title : NULL);
        fputs("plot ", f);
        write_data_name(f, base);
        if (inks && p == 0)    /* a point outside the axes in palette colour: it makes the colour bar */
            fprintf(f, " index %d using 1:2:3:4:5 with rgbimage, '+' using (-10):(-10):(0.5) with points palette\n", p);
        else if (inks)
            fprintf(f, " index %d using 1:2:3:4:5 with rgbimage\n", p);
        else
            fprintf(f, " index %d matrix with image\n", p);
        if (p == 0) fputs("unset colorbox              # drawn once, with the first panel\n", f);
    }
    fputs("unset multiplot\n", f);

    if (close_outputs(&dat, &gp) != 0) return -1;
    render(dir, base);
    return 0;
}

int plot_heatmap_grid(const char *path_stem, const char *title, const float *maps, int n_panels,
                      int grid_cols, const char *const *panel_titles, int rows, int cols,
                      const char *const *x_labels, const char *const *y_labels,
                      const char *x_title, const char *y_title, const char *cb_title, float vmin, float vmax) {
    return heatmap_grid(path_stem, title, maps, NULL, n_panels, grid_cols, panel_titles, rows, cols, x_labels,
                        y_labels, x_title, y_title, cb_title, vmin, vmax);
}

int plot_overlay_grid(const char *path_stem, const char *title, const float *inks, const float *maps, int n_panels,
                      int grid_cols, const char *const *panel_titles, int rows, int cols) {
    return heatmap_grid(path_stem, title, maps, inks, n_panels, grid_cols, panel_titles, rows, cols, NULL, NULL,
                        NULL, NULL, NULL, 0.0f, 1.0f);
}

/* ---------------------------------------------------------------- line plot */

/* gnuplot's own line colours are 8, used again from the 9th series on. A
 * plot with more series gives series s colour s % 12 of these (matplotlib's
 * ten, black and navy) and dash pattern s % 3 (solid, dashed, dotted), so
 * no two of its first 12 curves look alike, and neighbours in the key
 * (often runs of one task) differ in both. */
enum { LINE_COLOURS = 12, LINE_DASHES = 3, GNUPLOT_LINE_COLOURS = 8 };
static const char *const line_colour[LINE_COLOURS] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#000080"};
static const char *const line_dash[LINE_DASHES] = {"solid", "(8,4)", "(3,3)"};

/* A tick step for [lo, hi] (hi > lo): 1, 2 or 5 times a power of ten, about
 * five steps in all, as gnuplot picks its own. */
static double tick_step(double lo, double hi) {
    const double raw = (hi - lo) / 5.0, mag = pow(10.0, floor(log10(raw))), norm = raw / mag;
    return (norm <= 1.0 ? 1.0 : norm <= 2.0 ? 2.0 : norm <= 5.0 ? 5.0 : 10.0) * mag;
}

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
    AtomicFile dat, gp;
    if (begin_plot(path_stem, dir, base, sizeof dir, &dat, &gp) != 0) return -1;

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
    char shown[1024];
    comment_safe(base, shown, sizeof shown);
    fprintf(f, "# %s.gp - line plot written by plot_lines (common/io/plot.c).\n", shown);
    fprintf(f, "# Data: %s.dat (column 1 = x, then one column per series). Render from this directory:\n", shown);
    fprintf(f, "#   gnuplot %s.gp    -> %s.png\n", shown, shown);
    /* many series: the key right of the plot, off the curves, the picture
     * wider by its width (the names and a sample of each line) */
    const int many = n_series > GNUPLOT_LINE_COLOURS;
    int width = 900 + (many ? TITLE_CHAR_PX * max_label_width(names, n_series) + 40 : 0);
    if (width > PLOT_MAX_WIDTH) width = PLOT_MAX_WIDTH;
    const int wrap = (width - 80) / TITLE_CHAR_PX;
    const int title_lines = write_gp_text(NULL, title, GP_TEXT, wrap);
    const int key_below = fixed_y && !many;   /* (see the key below) */
    write_terminal(f, width, 560 + 16 * (title_lines - 1) + 20 * key_below, base);
    write_set_title(f, title, wrap);
    write_set_string(f, "xlabel", x_title);
    write_set_string(f, "ylabel", y_title);
    fputs("set grid\n", f);
    /* a log-log plot shows growing power laws: the top left corner is
     * empty; a fixed range's curves may run along its top or its bottom
     * (100% or 0%): the key goes under the plot */
    if (many) fputs("set key outside right top Left reverse   # each line left of its name\n", f);
    else if (key_below) fputs("set key below\n", f);
    else fputs(log_y == 2 ? "set key top left\n" : "set key top right\n", f);
    /* "%g" labels: gnuplot's own format prints a log axis down to 1e-7 as 10.0000000 */
    if (log_y) fputs("set logscale y\nset format y \"%g\"\n", f);
    if (log_y == 2) fputs("set logscale x 2\nset format x \"%g\"\n", f);   /* log-log: x doubles per tick */
    if (fixed_y) {
        /* the frame a little outside the range, so a curve at y_max (100%)
         * or y_min is not hidden in it; the ticks stay inside */
        const double pad_lo = log_y ? y_min / pow((double)y_max / y_min, 0.03) : y_min - 0.03 * (y_max - y_min);
        const double pad_hi = log_y ? y_max * pow((double)y_max / y_min, 0.03) : y_max + 0.03 * (y_max - y_min);
        fputs("set yrange [", f);
        write_value(f, pad_lo);
        fputc(':', f);
        write_value(f, pad_hi);
        fputs("]            # fixed by the caller (", f);
        write_value(f, y_min);
        fputs(" to ", f);
        write_value(f, y_max);
        fputs("), not fitted to the data, with room for the curves\n", f);
        if (!log_y) {
            fputs("set ytics ", f);
            write_value(f, y_min);
            fputs(", ", f);
            write_value(f, tick_step(y_min, y_max));
            fputs(", ", f);
            write_value(f, y_max);
            fputc('\n', f);
        }
    }
    fputs("plot ", f);
    for (int s = 0; s < n_series; s++) {
        if (s > 0) fputs(", \\\n     ", f);
        write_data_name(f, base);
        fprintf(f, " using 1:%d with lines linewidth 2", s + 2);
        if (many)
            fprintf(f, " linecolor rgb \"%s\" dashtype %s", line_colour[s % LINE_COLOURS],
                    line_dash[s % LINE_DASHES]);
        fputs(" title ", f);
        write_gp_string(f, names && names[s] ? names[s] : "", GP_TEXT);
    }
    fputc('\n', f);

    if (close_outputs(&dat, &gp) != 0) return -1;
    if (n_points > 0) render(dir, base);   /* gnuplot refuses an empty plot */
    return 0;
}
