/* plot.h - gnuplot output: every plot is a plain data file (.dat) plus a
 * ready-to-run script (.gp) next to it, rendered to PNG when gnuplot is
 * installed. A missing gnuplot is a hint printed once, never an error.
 *
 * path_stem is the output path without extension, e.g. "out/02/attn_0":
 * writes attn_0.dat, attn_0.gp and (with gnuplot) attn_0.png. */
#ifndef PLOT_H
#define PLOT_H

/* Heatmap of matrix m[rows, cols] (row-major), rows drawn top to bottom.
 * x_labels[cols] label the columns (e.g. source tokens), y_labels[rows] the
 * rows (output tokens); either may be NULL for numeric ticks. Has a colour
 * bar titled cb_title (what a colour stands for, e.g. "attention weight";
 * NULL: none); cell values are in [vmin, vmax] (vmin == vmax: auto range).
 * Returns 0, or -1 with fail() when a file cannot be written. */
int plot_heatmap(const char *path_stem, const char *title,
                 const float *m, int rows, int cols,
                 const char *const *x_labels, const char *const *y_labels,
                 const char *x_title, const char *y_title, const char *cb_title, float vmin, float vmax);

/* plot_heatmap on a diverging colour scale over [vmin, vmax]: white at
 * centre (vmin < centre < vmax), blue below it, red above it, for a
 * quantity with a natural middle, e.g. each expert's share of the tokens
 * against the even share 1/E (say which value is white in cb_title).
 * Returns 0, or -1 with fail() (a centre outside the range, as plot_heatmap). */
int plot_heatmap_diverging(const char *path_stem, const char *title, const float *m, int rows, int cols,
                           const char *const *x_labels, const char *const *y_labels, const char *x_title,
                           const char *y_title, const char *cb_title, float vmin, float centre, float vmax);

/* A grid of heatmaps in one picture: n_panels matrices of the same shape
 * [rows, cols], stored one after another in maps (panel p at
 * maps + p * rows * cols), drawn grid_cols panels per row, left to right and
 * top to bottom, each with its own title panel_titles[p] (may be NULL) and
 * the same tick labels (x_labels[cols], y_labels[rows]; either may be NULL),
 * one shared colour range [vmin, vmax] (vmin == vmax: auto over all panels).
 * For example the cross-attention of 2 layers x 4 heads: 8 panels, grid_cols 4.
 * Returns 0, or -1 with fail() (empty matrix, n_panels < 1, grid_cols < 1, or
 * a file that cannot be written). */
int plot_heatmap_grid(const char *path_stem, const char *title, const float *maps, int n_panels,
                      int grid_cols, const char *const *panel_titles, int rows, int cols,
                      const char *const *x_labels, const char *const *y_labels,
                      const char *x_title, const char *y_title, const char *cb_title, float vmin, float vmax);

/* Where a model looked, over the image it looked at: n_panels images
 * inks[rows, cols] (grey levels in [0, 1]) each with a map maps[rows, cols]
 * (>= 0, e.g. attention upsampled to pixels) drawn over it in orange, every
 * map scaled to its own largest value (an all-zero map: the image alone).
 * Layout as plot_heatmap_grid, without tick labels; the colour bar says that
 * each panel has its own scale. */
int plot_overlay_grid(const char *path_stem, const char *title, const float *inks, const float *maps, int n_panels,
                      int grid_cols, const char *const *panel_titles, int rows, int cols);

/* Line plot of n_series curves sharing the x values x[n_points];
 * ys[s] points at n_points values of series s, named names[s].
 * log_y: 1 for a logarithmic y axis (loss curves), 2 for logarithmic x and
 * y axes (log-log: a power law y ~ x^k is a straight line of slope k).
 * Up to 8 series take gnuplot's 8 colours; more get 12 colours and 3 dash
 * patterns, and the key moves to the right of the plot. */
int plot_lines(const char *path_stem, const char *title,
               const char *x_title, const char *y_title,
               const float *x, const float *const *ys, const char *const *names,
               int n_series, int n_points, int log_y);

/* plot_lines with the y axis fixed to [y_min, y_max] instead of fitted to the
 * data, for quantities with a natural scale: an accuracy axis runs 0-100%, so
 * one miss in 288 is a dip of 0.35, not a cliff from top to bottom.
 * Percent accuracies (values already multiplied by 100):
 *   plot_lines_range(stem, "exact match by length", "length", "exact match (%)",
 *                    x, ys, names, n_series, n_points, 0, 0.0f, 100.0f);
 * writes "set yrange [-3:103]" and "set ytics 0, 20, 100" into stem.gp: the
 * frame 3% outside the range, so a curve at 100% is not hidden in it, and
 * ticks only inside (a log axis: 3% of its decades), and the key under the
 * plot, off a curve along 100% or 0%. y_min == y_max means auto (the
 * same as plot_lines); otherwise y_min < y_max, both finite, and y_min > 0
 * on a logarithmic axis, or -1 with fail(). Points outside the range are
 * kept in the .dat and clipped only in the picture. */
int plot_lines_range(const char *path_stem, const char *title,
                     const char *x_title, const char *y_title,
                     const float *x, const float *const *ys, const char *const *names,
                     int n_series, int n_points, int log_y, float y_min, float y_max);

/* 1 when a gnuplot binary is on PATH (checked once). */
int gnuplot_available(void);

/* $ATTN_GNUPLOT_TIMEOUT, when set, must be a number of seconds above 0 and
 * below 10^6 (unset or empty: 60). Programs check it with their flags, before any
 * training. Returns 0, or -1 with fail() naming the value. */
int gnuplot_timeout_check(void);

#endif
