/* pictures.c - chapter 07: what a trained ViT shows, and using a saved one
 * (see pictures.h). */
#include "07_vision_transformer/pictures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "io/pgm.h"
#include "io/plot.h"
#include "nn/layers.h"
#include "util/error.h"
#include "util/util.h"

#define PIX FASHION_MNIST_PIXELS
#define SIDE FASHION_MNIST_ROWS
#define MAX_TABLE 8

/* the patch-size table: one row per run of this program */
typedef struct {
    int P, N, T;
    double step_ms, attn_mb, valid, test, seconds;
} TableRow;
static TableRow table[MAX_TABLE];
static int n_table, table_steps, table_batch;

static const char *class_name(int c) { return fashion_mnist_class_names[c]; }

/* a normalised image back to ink in [0, 1] */
static void ink(float *out, const float *image, const FashionMnist *d) {
    for (int i = 0; i < PIX; i++) out[i] = d->normalized ? image[i] * d->std + d->mean : image[i];
}

static void print_wrote(const char *stem) { printf("  %s.%s\n", stem, gnuplot_available() ? "png" : "gp"); }

/* blank tick labels: pixel numbers on an image are clutter */
static const char *const *no_ticks(void) {
    static const char *blank[SIDE];
    for (int i = 0; i < SIDE; i++) blank[i] = "";
    return blank;
}

/* ------------------------------------------------------ where it looked */

/* For image b of v's last forward, grid [L + 1, g, g] (g = patches per side):
 * panel l < L: what layer l's output reads from each patch, averaged over
 * the heads: the class token's row of A (cls pooling), the mean of all
 * rows (mean pooling, whose output is the mean of all tokens) or the rows
 * weighted by attention pooling's a (its output is that weighted mean);
 * panel L: the rollout, R = Abar_L .. Abar_1 with Abar = (A + I) / 2 (the
 * residual stream carries half of each token through), read the same way. */
static void looked(const Vit *v, int b, float *grid) {
    const int L = v->cfg.layers, H = v->cfg.heads, T = v->T, N = v->N, off = T - N;
    const float *a = v->pool_a ? v->pool_a + (size_t)b * T : NULL;   /* attention pooling's weights */
    double *Abar = xcalloc((size_t)T * T, sizeof(double)), *R = xcalloc((size_t)T * T, sizeof(double));
    double *tmp = xcalloc((size_t)T * T, sizeof(double));
    for (int i = 0; i < T; i++) R[(size_t)i * T + i] = 1.0;
    for (int l = 0; l <= L; l++) {
        const double *M = R;                         /* panel L: the rollout */
        if (l < L) {
            const float *A = vit_attention(v, l) + (size_t)b * H * T * T;
            for (size_t k = 0; k < (size_t)T * T; k++) {
                double s = 0.0;
                for (int h = 0; h < H; h++) s += A[(size_t)h * T * T + k];
                Abar[k] = s / H;
            }
            M = Abar;
        }
        float *panel = grid + (size_t)l * N;
        double total = 0.0;
        for (int n = 0; n < N; n++) {
            double s = 0.0;
            if (v->cfg.pool == VIT_POOL_CLS) s = M[off + n];
            else if (a) for (int i = 0; i < T; i++) s += M[(size_t)i * T + off + n] * a[i];
            else for (int i = 0; i < T; i++) s += M[(size_t)i * T + off + n] / T;
            panel[n] = (float)s;
            total += s;
        }
        for (int n = 0; n < N; n++) panel[n] = total > 0 ? (float)(panel[n] / total) : 0.0f;  /* sums to 1 */
        if (l < L) {                                 /* R <- (Abar + I) / 2 R */
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++) {
                    double s = 0.5 * R[(size_t)i * T + j];
                    for (int k = 0; k < T; k++) s += 0.5 * Abar[(size_t)i * T + k] * R[(size_t)k * T + j];
                    tmp[(size_t)i * T + j] = s;
                }
            memcpy(R, tmp, sizeof(double) * (size_t)T * T);
        }
    }
    free(Abar); free(R); free(tmp);
}

/* out [28, 28]: the patch map [g, g], each patch's value over its P x P pixels. */
static void upsample(float *out, const float *map, int P) {
    const int g = SIDE / P;
    for (int r = 0; r < SIDE; r++)
        for (int c = 0; c < SIDE; c++) out[r * SIDE + c] = map[(r / P) * g + c / P];
}

/* One row per image: the image, then every layer's attention over it (in
 * colour, the image in grey), then the rollout. None for a Linformer model. */
static int draw_looked(const char *stem, const char *title, const Vit *v, const float *inks, const int *pred,
                       const int *truth, int n) {
    if (v->cfg.linformer) {   /* its weights A [T, k] are over k mixtures of the tokens, not over the patches */
        printf("  (no %s picture: Linformer's attention weights are over k mixtures of the tokens, not patches)\n",
               stem);
        return 0;
    }
    const int L = v->cfg.layers, cols = L + 2, N = v->N;
    float *panels = xcalloc((size_t)n * cols * PIX, sizeof(float)), *grid = xcalloc((size_t)(L + 1) * N, sizeof(float));
    float *images = xcalloc((size_t)n * cols * PIX, sizeof(float));   /* the image under every panel */
    char (*titles)[64] = xcalloc((size_t)n * cols, 64);
    const char **tp = xcalloc((size_t)n * cols, sizeof(char *));
    for (int b = 0; b < n; b++) {
        looked(v, b, grid);
        float *row = panels + (size_t)b * cols * PIX;            /* panel 0: no attention, the image alone */
        for (int k = 0; k < cols; k++)
            memcpy(images + ((size_t)b * cols + k) * PIX, inks + (size_t)b * PIX, sizeof(float) * PIX);
        if (truth && truth[b] >= 0)
            snprintf(titles[b * cols], 64, "%s (true %s)", class_name(pred[b]), class_name(truth[b]));
        else
            snprintf(titles[b * cols], 64, "%s", class_name(pred[b]));
        for (int l = 0; l <= L; l++) {
            upsample(row + (size_t)(l + 1) * PIX, grid + (size_t)l * N, v->cfg.patch.P);
            if (l < L) snprintf(titles[b * cols + l + 1], 64, "layer %d", l + 1);
            else snprintf(titles[b * cols + l + 1], 64, "rollout");
        }
    }
    for (int k = 0; k < n * cols; k++) tp[k] = titles[k];
    int rc = plot_overlay_grid(stem, title, images, panels, n * cols, cols, tp, SIDE, SIDE);
    if (rc == 0) print_wrote(stem);
    free(panels); free(images); free(grid); free(titles); free(tp);
    return rc;
}

/* ------------------------------------------------------- after training */

/* Accuracy over the whole evaluation split (valid or test); with confusion
 * [C, C] (true row, predicted column) counted too. The first n_keep images'
 * predictions go to keep. With flip_acc (may be NULL) also the accuracy of
 * test-time augmentation with the training's own horizontal flip: each image
 * classified by the mean of two class distributions, softmax of its logits
 * and of its mirror image's. With pool_spread (may be NULL; attention
 * pooling only) also how its weights a spread over the T outputs, as means
 * over the images: [0] the largest weight, [1] exp(entropy of a), the
 * number of outputs an even spread with the same entropy would read (T when
 * a is uniform, as mean pooling's weights are; 1 when it reads one). */
static double evaluate(Vit *v, const ImageSplit *s, long *confusion, int *keep, int n_keep, double *flip_acc,
                       double *pool_spread) {
    const int C = v->C;
    int *pred = xmalloc(sizeof(int) * (size_t)v->max_B);
    float *mirror = NULL, *p = NULL, *q = NULL;
    if (flip_acc) {
        mirror = xmalloc(sizeof(float) * (size_t)v->max_B * PIX);
        p = xmalloc(sizeof(float) * (size_t)v->max_B * C);
        q = xmalloc(sizeof(float) * (size_t)v->max_B * C);
    }
    long right = 0, right_flip = 0;
    double top_sum = 0.0, spread_sum = 0.0;
    for (int done = 0; done < s->n; done += v->max_B) {
        const int B = s->n - done < v->max_B ? s->n - done : v->max_B;
        const float *images = s->images + (size_t)done * PIX;
        vit_forward(v, images, NULL, B);
        vit_predict(v, pred);
        if (pool_spread && v->pool_a)
            for (int b = 0; b < B; b++) {   /* chapter 03's measure of one row of attention weights */
                double top = 0.0;
                spread_sum += exp(attention_row_entropy(v->pool_a + (size_t)b * v->T, v->T, &top));
                top_sum += top;
            }
        for (int b = 0; b < B; b++) {
            const int t = s->labels[done + b];
            right += pred[b] == t;
            if (confusion) confusion[t * FASHION_MNIST_CLASSES + pred[b]]++;
            if (done + b < n_keep) keep[done + b] = pred[b];
        }
        if (!flip_acc) continue;
        softmax_forward(p, v->logits, B, C);
        for (int b = 0; b < B; b++)
            for (int r = 0; r < SIDE; r++)
                for (int c = 0; c < SIDE; c++)
                    mirror[(size_t)b * PIX + r * SIDE + c] = images[(size_t)b * PIX + r * SIDE + (SIDE - 1 - c)];
        vit_forward(v, mirror, NULL, B);
        softmax_forward(q, v->logits, B, C);
        for (int b = 0; b < B; b++) {
            int best = 0;
            for (int c = 1; c < C; c++)
                if (p[b * C + c] + q[b * C + c] > p[b * C + best] + q[b * C + best]) best = c;
            right_flip += best == s->labels[done + b];
        }
    }
    if (flip_acc) *flip_acc = (double)right_flip / s->n;
    if (pool_spread) {
        pool_spread[0] = top_sum / s->n;
        pool_spread[1] = spread_sum / s->n;
    }
    free(pred);
    free(mirror);
    free(p);
    free(q);
    return (double)right / s->n;
}

static int draw_confusion(const char *out, const char *key, const char *label, const long *confusion,
                          const ImageSplit *test) {
    const int C = FASHION_MNIST_CLASSES;
    float m[FASHION_MNIST_CLASSES * FASHION_MNIST_CLASSES];
    long per_class[FASHION_MNIST_CLASSES] = {0};
    for (int i = 0; i < test->n; i++) per_class[test->labels[i]]++;
    for (int t = 0; t < C; t++)
        for (int p = 0; p < C; p++) m[t * C + p] = per_class[t] ? (float)confusion[t * C + p] / per_class[t] : 0.0f;
    /* tick labels: a space would be drawn as a visible-space sign (plot.c shows token spaces) */
    char names[FASHION_MNIST_CLASSES][24];
    const char *labels[FASHION_MNIST_CLASSES];
    for (int i = 0; i < C; i++) {
        snprintf(names[i], sizeof names[i], "%s", class_name(i));
        for (char *q = names[i]; *q; q++) if (*q == ' ') *q = '-';
        labels[i] = names[i];
    }
    char stem[1100], title[200];
    if (path_format(stem, sizeof stem, "%s/confusion_%.24s", out, key) < 0) return -1;
    snprintf(title, sizeof title, "%.120s: test images of each true class (row) by predicted class", label);
    if (plot_heatmap(stem, title, m, C, C, labels, labels, "predicted",
                     "true class", "share of the true class's test images", 0.0f, 1.0f) < 0)
        return -1;
    print_wrote(stem);
    printf("  per class (test): ");
    for (int t = 0; t < C; t++) printf("%s %.1f%%%s", class_name(t), 100.0 * m[t * C + t], t + 1 < C ? ", " : "\n");
    return 0;
}

/* cos(E_pos[i], E_pos[j]) of every patch i with every patch j: N panels of [g, g] */
static int draw_positions(const char *out, const char *key, const Vit *v) {
    const int N = v->N, D = v->D, off = v->T - v->N, g = SIDE / v->cfg.patch.P;
    const float *P = v->pos ? params_data((Params *)&v->params, v->pos) : v->P_fixed;
    float *sim = xcalloc((size_t)N * N, sizeof(float));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            const float *a = P + (size_t)(off + i) * D, *b = P + (size_t)(off + j) * D;
            double ab = 0, aa = 0, bb = 0;
            for (int d = 0; d < D; d++) {
                ab += (double)a[d] * b[d];
                aa += (double)a[d] * a[d];
                bb += (double)b[d] * b[d];
            }
            sim[(size_t)i * N + j] = aa > 0 && bb > 0 ? (float)(ab / sqrt(aa * bb)) : 0.0f;
        }
    char stem[1100], title[200];
    if (path_format(stem, sizeof stem, "%s/pos_similarity_%.24s", out, key) < 0) {
        free(sim);
        return -1;
    }
    snprintf(title, sizeof title, "Cosine similarity of each patch's %s position embedding (panel = patch at that "
             "place) with every other patch's", vit_pos_name(v->cfg.pos));
    int rc = plot_heatmap_grid(stem, title, sim, N, g, NULL, g, g, NULL, NULL, NULL, NULL, "cosine similarity", -1.0f,
                               1.0f);
    if (rc == 0) print_wrote(stem);
    free(sim);
    return rc;
}

int vit_pictures_after_training(const char *out, const char *key, const char *label, int steps, int batch,
                                double seconds, Vit *v, Classifier *m, const ExampleTask *t, const FashionMnist *d,
                                int n_pictures, Results *res) {
    (void)m;
    const int C = FASHION_MNIST_CLASSES, n_grid = 16;
    long confusion[FASHION_MNIST_CLASSES * FASHION_MNIST_CLASSES] = {0};
    int first[16];
    /* a model trained on mirrored images too: also its accuracy with each image's
     * mirror averaged in, printed beside the plain figure (which stays the
     * headline: the published figures are of one view) */
    const int flipped = ((const FashionMnistTask *)t->self)->flip;
    double valid_flip = 0.0, test_flip = 0.0;
    double spread[2] = {0.0, 0.0};   /* attention pooling's weights on the test images: largest, exp(entropy) */
    const double valid = evaluate(v, &d->valid, NULL, NULL, 0, flipped ? &valid_flip : NULL, NULL);
    const double test = evaluate(v, &d->test, confusion, first, n_grid, flipped ? &test_flip : NULL,
                                 v->pool_a ? spread : NULL);
    printf("  %s: validation accuracy %.2f%% (%d images), test accuracy %.2f%% (%d images)\n", label, 100 * valid,
           d->valid.n, 100 * test, d->test.n);
    if (v->pool_a)
        printf("  attention pooling's weights a over the %d outputs (test images, mean): the largest %.3f (uniform: "
               "%.3f); exp(entropy) %.1f, as many outputs as an even spread of the same entropy reads\n", v->T,
               spread[0], 1.0 / v->T, spread[1]);
    char k[64];
    if (res) {
        snprintf(k, sizeof k, "%.24s_valid_acc", key);
        results_set_num(res, k, valid);
        snprintf(k, sizeof k, "%.24s_test_acc", key);
        results_set_num(res, k, test);
    }
    if (flipped) {
        printf("  %s, each image averaged with its mirror image: validation accuracy %.2f%%, test accuracy %.2f%%\n",
               label, 100 * valid_flip, 100 * test_flip);
        if (res) {
            snprintf(k, sizeof k, "%.24s_valid_acc_flip_averaged", key);
            results_set_num(res, k, valid_flip);
            snprintf(k, sizeof k, "%.24s_test_acc_flip_averaged", key);
            results_set_num(res, k, test_flip);
        }
    }
    if (steps > 0 && n_table < MAX_TABLE) {
        table[n_table] = (TableRow){
            .P = v->cfg.patch.P, .N = v->N, .T = v->T, .step_ms = 1000.0 * seconds / steps,
            /* the attention weights A [B, H, T, T] of every layer, kept for backward */
            .attn_mb = (double)batch * v->cfg.heads * v->T * v->T * v->cfg.layers * sizeof(float) / 1e6,
            .valid = valid, .test = test, .seconds = seconds};
        n_table++;
        table_steps = steps;
        table_batch = batch;
    }

    if (n_pictures == 0) return 0;
    if (make_dirs(out) < 0) return -1;
    /* 16 test images with the predicted and the true label */
    float *inks = xcalloc((size_t)n_grid * PIX, sizeof(float));
    const char *titles[16];
    char text[16][64];
    for (int i = 0; i < n_grid && i < d->test.n; i++) {
        ink(inks + (size_t)i * PIX, d->test.images + (size_t)i * PIX, d);
        snprintf(text[i], sizeof text[i], "%s%s / %s", first[i] == d->test.labels[i] ? "" : "WRONG: ",
                 class_name(first[i]), class_name(d->test.labels[i]));
        titles[i] = text[i];
    }
    char stem[1100], title[200];
    if (path_format(stem, sizeof stem, "%s/test_images_%.24s", out, key) < 0) {
        free(inks);
        return -1;
    }
    snprintf(title, sizeof title, "The first 16 test images: predicted / true class (%.120s)", label);
    int rc = plot_heatmap_grid(stem, title, inks, n_grid, 4, titles, SIDE, SIDE, no_ticks(), no_ticks(), NULL, NULL,
                               "ink", 0.0f, 1.0f);
    if (rc == 0) print_wrote(stem);

    /* where the first n_pictures test images were looked at */
    if (rc == 0) {
        if (n_pictures > v->max_B) n_pictures = v->max_B;
        vit_forward(v, d->test.images, NULL, n_pictures);
        int pred[16];
        vit_predict(v, pred);
        rc = path_format(stem, sizeof stem, "%s/attention_%.24s", out, key);
        snprintf(title, sizeof title, "Where %s looks: each layer (mean over heads), then the rollout",
                 v->cfg.pool == VIT_POOL_CLS ? "the class token" : v->pool_a ? "attention pooling"
                 : "the mean of the outputs");
        if (rc == 0) rc = draw_looked(stem, title, v, inks, pred, d->test.labels, n_pictures);
    }
    if (rc == 0) rc = draw_positions(out, key, v);
    if (rc == 0) rc = draw_confusion(out, key, label, confusion, &d->test);
    (void)C;
    free(inks);
    return rc;
}

int vit_patch_table_print(const char *out) {
    if (n_table < 2) return 0;
    char path[1100], line[512];
    if (path_format(path, sizeof path, "%s/patch_table.md", out) < 0) return -1;
    AtomicFile f;
    if (atomic_open(&f, path) < 0) return -1;
    printf("\nThe patch size (%d steps of %d images each):\n\n", table_steps, table_batch);
    const char *head = "| patch P | patches N | tokens T | train step | attention weights A kept (all layers) "
                       "| validation acc. | test acc. |\n|---|---|---|---|---|---|---|\n";
    printf("%s", head);
    fputs(head, f.f);
    for (int i = 0; i < n_table; i++) {
        snprintf(line, sizeof line, "| %d | %d | %d | %.1f ms | %.1f MB | %.2f%% | %.2f%% |\n", table[i].P, table[i].N,
                 table[i].T, table[i].step_ms, table[i].attn_mb, 100 * table[i].valid, 100 * table[i].test);
        printf("%s", line);
        fputs(line, f.f);
    }
    if (atomic_close(&f, 1) < 0) return -1;
    printf("\n  %s\n", path);
    return 0;
}

/* ------------------------------------------------------- one image, loaded */

int vit_classify_one(const char *out, Vit *v, const FashionMnist *d, const char *image_path, int index) {
    float image[PIX], ink28[PIX];
    int truth = -1;
    char name[256];
    if (image_path) {
        PgmImage pgm;
        if (pgm_read(&pgm, image_path) < 0) return -1;
        image_resize_area(ink28, SIDE, SIDE, pgm.pixels, pgm.height, pgm.width);
        pgm_free(&pgm);
        /* PGM: 0 black, 1 white. Fashion-MNIST: 0 background, 1 ink, a light
         * object on black. A photo of a dark object on a white page has a bright
         * border: then ink = 1 - grey. */
        double border = 0.0;
        for (int i = 0; i < SIDE; i++)
            border += ink28[i] + ink28[(SIDE - 1) * SIDE + i] + ink28[i * SIDE] + ink28[i * SIDE + SIDE - 1];
        border /= 4 * SIDE;
        if (border > 0.5) {
            for (int i = 0; i < PIX; i++) ink28[i] = 1.0f - ink28[i];
            printf("  (a bright border: read as a dark object on a light background, inverted to the data set's "
                   "light object on black)\n");
        }
        for (int i = 0; i < PIX; i++) image[i] = d->normalized ? (ink28[i] - d->mean) / d->std : ink28[i];
        const char *base = strrchr(image_path, '/');
        snprintf(name, sizeof name, "%s", base ? base + 1 : image_path);
        char *dot = strrchr(name, '.');
        if (dot) *dot = '\0';
    } else {
        if (index < 0 || index >= d->test.n)
            return fail("--index %d: expected a test image 0..%d", index, d->test.n - 1);
        memcpy(image, d->test.images + (size_t)index * PIX, sizeof image);
        ink(ink28, image, d);
        truth = d->test.labels[index];
        snprintf(name, sizeof name, "test%d", index);
    }
    vit_forward(v, image, NULL, 1);
    float probs[FASHION_MNIST_CLASSES];
    softmax_forward(probs, v->logits, 1, FASHION_MNIST_CLASSES);
    int order[FASHION_MNIST_CLASSES];
    for (int c = 0; c < FASHION_MNIST_CLASSES; c++) order[c] = c;
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < FASHION_MNIST_CLASSES; j++)
            if (probs[order[j]] > probs[order[i]]) {
                int tmp = order[i];
                order[i] = order[j];
                order[j] = tmp;
            }
    printf("  %s%s%s\n", image_path ? image_path : name, truth >= 0 ? ", true class: " : "",
           truth >= 0 ? class_name(truth) : "");
    for (int i = 0; i < 3; i++) printf("    %d. %-12s %5.1f%%\n", i + 1, class_name(order[i]), 100.0 * probs[order[i]]);
    if (make_dirs(out) < 0) return -1;
    char stem[1100], title[300];
    if (path_format(stem, sizeof stem, "%s/looked_%.100s", out, name) < 0) return -1;
    snprintf(title, sizeof title, "%.100s: where the model looked: each layer (mean over its heads), then the rollout",
             name);
    int pred = order[0];
    printf("Wrote:\n");
    int rc = draw_looked(stem, title, v, ink28, &pred, truth >= 0 ? &truth : NULL, 1);
    if (rc == 0) rc = path_format(stem, sizeof stem, "%s/input_%.100s.pgm", out, name);
    if (rc == 0) rc = pgm_write(stem, ink28, SIDE, SIDE);
    if (rc == 0) printf("  %s   (the 28 x 28 image the model saw, ink white on black)\n", stem);
    return rc;
}
