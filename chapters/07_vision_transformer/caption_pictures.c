/* caption_pictures.c - chapter 07, captioning: one panel per word, the
 * attention over the grid laid over the scene (see caption_pictures.h). */
#include "07_vision_transformer/caption_pictures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "07_vision_transformer/caption.h"
#include "io/pgm.h"
#include "io/plot.h"
#include "util/error.h"
#include "util/util.h"

#define MAX_WORDS 24

void caption_ink(float *ink, const float *image, int side, int normalized, float mean, float std) {
    for (int i = 0; i < side * side; i++) {
        float x = normalized ? image[i] * std + mean : image[i];
        ink[i] = x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x;
    }
}

void caption_upsample(float *up, const float *map, int g, int side) {
    const float P = (float)side / (float)g;
    for (int y = 0; y < side; y++) {
        /* the pixel's place in patch units, patch centres at 0, 1, .., g - 1 */
        float fy = (y + 0.5f) / P - 0.5f;
        if (fy < 0) fy = 0;
        if (fy > g - 1) fy = (float)(g - 1);
        const int y0 = (int)fy, y1 = y0 + 1 < g ? y0 + 1 : y0;
        const float wy = fy - (float)y0;
        for (int x = 0; x < side; x++) {
            float fx = (x + 0.5f) / P - 0.5f;
            if (fx < 0) fx = 0;
            if (fx > g - 1) fx = (float)(g - 1);
            const int x0 = (int)fx, x1 = x0 + 1 < g ? x0 + 1 : x0;
            const float wx = fx - (float)x0;
            const float top = (1 - wx) * map[y0 * g + x0] + wx * map[y0 * g + x1];
            const float bottom = (1 - wx) * map[y1 * g + x0] + wx * map[y1 * g + x1];
            up[(size_t)y * side + x] = (1 - wy) * top + wy * bottom;
        }
    }
}

/* Model 3: stem_heads.png, a row of panels per decoder layer and head (the
 * mean over heads of the picture above hides what each head does), a column
 * per word: that head's cross-attention of the word's position over the
 * grid, on the scene. */
static int draw_heads(Caption *c, const Dataset *d, const Batch *one, const int *out, int n, int words, const float *ink, int side,
                      int P, const char *stem, const char *label) {
    const int g = side / P, N = g * g, L = c->cfg.dec_layers, H = c->cfg.heads, T = n + 1;
    const size_t pix = (size_t)side * side;
    float *cross = xcalloc((size_t)L * H * T * N, sizeof(float));
    int rc = caption_cross_maps(c, one, out, n, cross);   /* [L, H, T, N] */
    const int panels = L * H * words;
    float *maps = NULL, *inks = NULL;
    char (*titles)[48] = NULL;
    const char **tp = NULL;
    if (rc == 0) {
        maps = xcalloc((size_t)panels * pix, sizeof(float));
        inks = xcalloc((size_t)panels * pix, sizeof(float));
        titles = xcalloc((size_t)panels, 48);
        tp = xcalloc((size_t)panels, sizeof(char *));
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < words; w++) {
                    const int k = (l * H + h) * words + w;
                    caption_upsample(maps + (size_t)k * pix, cross + (((size_t)l * H + h) * T + w) * N, g, side);
                    memcpy(inks + (size_t)k * pix, ink, sizeof(float) * pix);
                    snprintf(titles[k], 48, "L%d H%d: %s", l + 1, h + 1,
                             w < n ? vocab_token(&d->tgt_vocab, out[w]) : "<eos>");
                    tp[k] = titles[k];
                }
        char path[1100], title[300];
        rc = path_format(path, sizeof path, "%s_heads", stem);
        snprintf(title, sizeof title, "%.100s: each decoder layer (L) and head (H), where it looked for each word",
                 label);
        if (rc == 0) rc = plot_overlay_grid(path, title, inks, maps, panels, words, tp, side, side);
        if (rc == 0) printf("    %s.%s\n", path, gnuplot_available() ? "png" : "gp");
    }
    free(cross); free(maps); free(inks); free(titles); free(tp);
    return rc;
}

int caption_draw_one(Seq2Seq *m, const Dataset *d, const float *image, int side, int P, int normalized, float mean,
                     float std, const char *stem, const char *label, const char *truth) {
    const int g = side / P, N = g * g, max_out = d->max_tgt_len + 10;
    const size_t pix = (size_t)side * side;
    /* decode_greedy's attention rows have src_len entries: here the N grid positions */
    int *src = xcalloc((size_t)N, sizeof(int)), src_lens[1] = {N}, zero[1] = {0};
    Batch one = {.batch = 1, .src_len = N, .tgt_len = 1, .src = src, .src_lens = src_lens, .tgt_in = zero,
                 .tgt_out = zero, .tgt_lens = zero, .value_size = (int)pix, .values = (float *)image};
    int *out = xmalloc(sizeof(int) * (size_t)max_out), n = 0;
    float *attn = xcalloc((size_t)max_out * N, sizeof(float));
    decode_greedy(m, &one, max_out, out, &n, attn);
    char caption[512];
    vocab_decode(&d->tgt_vocab, out, n, " ", caption, sizeof caption);
    printf("  %s: %s", label, caption);
    if (truth) printf("   (true: %s)", truth);
    printf("\n");

    /* panels: the scene, then (models with attention) one per word and <eos> */
    int words = n < max_out ? n + 1 : n;
    if (words > MAX_WORDS) words = MAX_WORDS;
    const int panels = 1 + (m->has_attention ? words : 0);
    float *maps = xcalloc((size_t)panels * pix, sizeof(float));            /* panel 0: no attention */
    float *inks = xcalloc((size_t)panels * pix, sizeof(float)), *ink = inks; /* the scene under every panel */
    char (*titles)[48] = xcalloc((size_t)panels, 48);
    const char **tp = xcalloc((size_t)panels, sizeof(char *));
    caption_ink(ink, image, side, normalized, mean, std);
    for (int k = 1; k < panels; k++) memcpy(inks + (size_t)k * pix, ink, sizeof(float) * pix);
    snprintf(titles[0], 48, "%s", truth ? "the scene" : "the image");
    for (int k = 1; k < panels; k++) {
        /* the step's attention over the grid, on the scene's pixels (plot_overlay_grid scales it) */
        caption_upsample(maps + (size_t)k * pix, attn + (size_t)(k - 1) * N, g, side);
        snprintf(titles[k], 48, "%d. %s", k, k - 1 < n ? vocab_token(&d->tgt_vocab, out[k - 1]) : "<eos>");
    }
    for (int k = 0; k < panels; k++) tp[k] = titles[k];
    /* the title: the model's caption, the true one beside it (a test scene),
     * and what a panel's map is */
    const Caption *c = m->self;
    const char *base = strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem;
    char title[1400], truth_text[420] = "", what[400];
    if (truth) snprintf(truth_text, sizeof truth_text, "; true: %.400s", truth);
    if (!m->has_attention) snprintf(what, sizeof what, " (no attention to draw)");
    else if (c->cfg.kind == CAPTION_TRANSFORMER)
        snprintf(what, sizeof what, " -- where it looked for each word: the last decoder block's cross-attention, "
                 "the mean over its %d heads (each head: %.200s_heads.png)", c->cfg.heads, base);
    else snprintf(what, sizeof what, " -- where it looked for each word");
    snprintf(title, sizeof title, "%.100s -- model: %.400s%s%s", label, caption[0] ? caption : "(nothing)",
             truth_text, what);
    const int cols = panels < 6 ? panels : 6;
    int rc = plot_overlay_grid(stem, title, inks, maps, panels, cols, tp, side, side);
    if (rc == 0) printf("    %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    if (rc == 0 && c->cfg.kind == CAPTION_TRANSFORMER)
        rc = draw_heads(m->self, d, &one, out, n, words, ink, side, P, stem, label);
    free(src); free(out); free(attn); free(maps); free(inks); free(titles); free(tp);
    return rc;
}

int caption_draw_test_scenes(Seq2Seq *m, const Dataset *d, int n, const SceneScale *scale, const char *out_dir) {
    const Caption *c = m->self;
    if (n > 0) printf("\nTest scenes, captioned (one panel per word):\n");
    for (int i = 0; i < n && i < d->test.n; i++) {
        const Example *e = &d->test.ex[i];
        char stem[1024], label[64], truth[256];
        if (path_format(stem, sizeof stem, "%s/caption_test%d", out_dir, i) < 0) return -1;
        snprintf(label, sizeof label, "test scene %d", i);
        vocab_decode(&d->tgt_vocab, e->tgt, e->tgt_len, " ", truth, sizeof truth);
        if (caption_draw_one(m, d, e->values, c->cfg.side, c->cfg.P, scale->normalized, scale->mean, scale->std,
                             stem, label, truth) < 0)
            return -1;
    }
    return 0;
}

int caption_draw_file(Seq2Seq *m, const Dataset *d, const char *path, const SceneScale *scale, const char *out_dir) {
    const Caption *c = m->self;
    const int side = c->cfg.side;
    PgmImage pgm;
    if (pgm_read(&pgm, path) < 0) return -1;
    float *ink = xmalloc(sizeof(float) * (size_t)side * side), *image = xmalloc(sizeof(float) * (size_t)side * side);
    image_resize_area(ink, side, side, pgm.pixels, pgm.height, pgm.width);
    if (pgm.width != side || pgm.height != side)
        printf("  (%s is %d x %d: scaled to the model's %d x %d)\n", path, pgm.width, pgm.height, side, side);
    pgm_free(&pgm);
    for (int i = 0; i < side * side; i++) image[i] = scale->normalized ? (ink[i] - scale->mean) / scale->std : ink[i];
    const char *base = strrchr(path, '/');
    char name[200], stem[1024];
    snprintf(name, sizeof name, "%s", base ? base + 1 : path);   /* (a long name: its first 199 bytes) */
    char *dot = strrchr(name, '.');
    if (dot) *dot = '\0';
    int rc = make_dirs(out_dir);
    if (rc == 0) rc = path_format(stem, sizeof stem, "%s/caption_%s", out_dir, name);
    if (rc == 0) rc = caption_draw_one(m, d, image, side, c->cfg.P, scale->normalized, scale->mean, scale->std, stem,
                                       name, NULL);
    free(ink);
    free(image);
    return rc;
}
