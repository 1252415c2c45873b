/* fashion_mnist.c - load Fashion-MNIST from its IDX files, split it, normalise
 * it, and augment training images (fashion_mnist.h says what each does).
 *
 * Loading, step by step:
 *   1. read the training images and labels (idx.c checks the files), check
 *      that they agree in number and that every label is 0..9;
 *   2. the same for the test files;
 *   3. convert bytes to floats, pixel / 255;
 *   4. the training split's pixel statistics from a histogram of the 256 byte
 *      values (exact, and one pass over the bytes), then optionally standardise;
 *   5. point the validation split at the last FASHION_MNIST_N_VALID training images. */
#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "util/error.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const fashion_mnist_class_names[FASHION_MNIST_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

/* Path of file `name` in dir: "dir/name.gz" when that exists, else "dir/name"
 * when THAT exists (a gunzip'd copy), else fail() naming both and saying how to
 * get the files. Returns 0 or -1. */
static int find_file(char *path, size_t cap, const char *dir, const char *name) {
    struct stat st;
    int n = snprintf(path, cap, "%s/%s.gz", dir, name);
    if (n < 0 || (size_t)n >= cap) return fail("data directory name too long (%zu bytes): '%s'", strlen(dir), dir);
    if (stat(path, &st) == 0) return 0;
    const int gz_errno = errno;
    snprintf(path, cap, "%s/%s", dir, name);   /* shorter than the .gz name: fits */
    if (stat(path, &st) == 0) return 0;
    snprintf(path, cap, "%s/%s.gz", dir, name);
    if (gz_errno == ENOENT && strcmp(dir, FASHION_MNIST_DIR) == 0)
        return fail("cannot open '%s': %s; Fashion-MNIST comes in the Debian package dataset-fashion-mnist: "
                    "sudo apt-get install -y dataset-fashion-mnist (or give --data DIR)", path, strerror(gz_errno));
    return fail("cannot open '%s' (nor '%s/%s'): %s; expected the Fashion-MNIST files in '%s'", path, dir, name,
                strerror(gz_errno), dir);
}

/* Read one images file and its labels file into a split of floats (pixel / 255).
 * On success *raw keeps the bytes (the caller computes statistics from them and
 * frees them). */
static int load_pair(ImageSplit *s, IdxData *raw, const char *dir, const char *images_name,
                     const char *labels_name) {
    char images_path[4096], labels_path[4096];
    IdxData labels = {0};
    memset(s, 0, sizeof *s);
    if (find_file(images_path, sizeof images_path, dir, images_name) != 0) return -1;
    if (find_file(labels_path, sizeof labels_path, dir, labels_name) != 0) return -1;
    if (idx_read_images(raw, images_path, FASHION_MNIST_ROWS, FASHION_MNIST_COLS) != 0) return -1;
    if (idx_read_labels(&labels, labels_path) != 0) {
        idx_free(raw);
        return -1;
    }
    if (labels.count != raw->count) {
        fail("'%s' holds %d images but '%s' holds %d labels: expected one label per image", images_path,
             raw->count, labels_path, labels.count);
        goto error;
    }
    for (int i = 0; i < labels.count; i++)
        if (labels.data[i] >= FASHION_MNIST_CLASSES) {
            fail("'%s': label %d of image %d (byte %d), expected 0 to %d", labels_path, labels.data[i], i, 8 + i,
                 FASHION_MNIST_CLASSES - 1);
            goto error;
        }

    s->n = raw->count;
    s->images = xmalloc(sizeof(float) * (size_t)s->n * FASHION_MNIST_PIXELS);
    s->labels = xmalloc(sizeof(int) * (size_t)s->n);
    for (size_t k = 0; k < (size_t)s->n * FASHION_MNIST_PIXELS; k++) s->images[k] = (float)raw->data[k] / 255.0f;
    for (int i = 0; i < s->n; i++) s->labels[i] = labels.data[i];
    idx_free(&labels);
    return 0;

error:
    idx_free(raw);
    idx_free(&labels);
    return -1;
}

/* Mean and population standard deviation of bytes[0..n) / 255, from the
 * histogram of the 256 values, summed in double. */
static void pixel_stats(const unsigned char *bytes, size_t n, float *mean, float *std) {
    double count[256] = {0};
    for (size_t k = 0; k < n; k++) count[bytes[k]] += 1.0;
    double sum = 0.0;
    for (int v = 0; v < 256; v++) sum += count[v] * (v / 255.0);
    const double m = sum / (double)n;
    double sq = 0.0;
    for (int v = 0; v < 256; v++) sq += count[v] * (v / 255.0 - m) * (v / 255.0 - m);
    *mean = (float)m;
    *std = (float)sqrt(sq / (double)n);
}

static void standardise(ImageSplit *s, float mean, float std) {
    for (size_t k = 0; k < (size_t)s->n * FASHION_MNIST_PIXELS; k++) s->images[k] = (s->images[k] - mean) / std;
}

int fashion_mnist_load(FashionMnist *d, const char *dir, int normalize) {
    memset(d, 0, sizeof *d);
    if (dir == NULL || dir[0] == '\0') dir = FASHION_MNIST_DIR;
    IdxData raw = {0};
    ImageSplit all_train;   /* the 60,000 of the training file: train + valid */

    if (load_pair(&all_train, &raw, dir, "train-images-idx3-ubyte", "train-labels-idx1-ubyte") != 0) return -1;
    if (all_train.n <= FASHION_MNIST_N_VALID) {
        fail("'%s/train-images-idx3-ubyte.gz': %d training images, expected more than the %d held out for "
             "validation", dir, all_train.n, FASHION_MNIST_N_VALID);
        idx_free(&raw);
        free(all_train.images);
        free(all_train.labels);
        return -1;
    }
    const int n_train = all_train.n - FASHION_MNIST_N_VALID;
    /* statistics of the training split only: the validation images are held out */
    pixel_stats(raw.data, (size_t)n_train * FASHION_MNIST_PIXELS, &d->mean, &d->std);
    idx_free(&raw);

    if (load_pair(&d->test, &raw, dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte") != 0) {
        free(all_train.images);
        free(all_train.labels);
        memset(d, 0, sizeof *d);
        return -1;
    }
    idx_free(&raw);

    d->normalized = normalize ? 1 : 0;
    d->background = 0.0f;
    d->ink = 1.0f;
    if (d->normalized) {
        if (!(d->std > 0.0f)) {
            fail("'%s': every training pixel has the same value %g: cannot normalise by a standard deviation of 0",
                 dir, d->mean);
            free(all_train.images);
            free(all_train.labels);
            fashion_mnist_free(d);
            return -1;
        }
        standardise(&all_train, d->mean, d->std);
        standardise(&d->test, d->mean, d->std);
        d->background = (0.0f - d->mean) / d->std;
        d->ink = (1.0f - d->mean) / d->std;
    }

    d->train.n = n_train;
    d->train.images = all_train.images;
    d->train.labels = all_train.labels;
    d->valid.n = FASHION_MNIST_N_VALID;
    d->valid.images = all_train.images + (size_t)n_train * FASHION_MNIST_PIXELS;
    d->valid.labels = all_train.labels + n_train;
    return 0;
}

void fashion_mnist_free(FashionMnist *d) {
    free(d->train.images);   /* valid points into the same buffers */
    free(d->train.labels);
    free(d->test.images);
    free(d->test.labels);
    memset(d, 0, sizeof *d);
}

void fashion_mnist_augment(float *out, const float *image, int max_shift, int flip, float background, Rng *rng) {
    const int R = FASHION_MNIST_ROWS, C = FASHION_MNIST_COLS;
    const uint32_t span = 2 * (uint32_t)max_shift + 1;   /* -max_shift..max_shift */
    const int dy = (int)rng_below(rng, span) - max_shift;
    const int dx = (int)rng_below(rng, span) - max_shift;
    const int mirror = flip ? (int)rng_below(rng, 2) : 0;
    for (int r = 0; r < R; r++) {
        const int rs = r - dy;   /* the source row */
        for (int c = 0; c < C; c++) {
            int cs = c - dx;     /* the source column, before mirroring */
            if (mirror) cs = C - 1 - cs;
            out[r * C + c] = (rs >= 0 && rs < R && cs >= 0 && cs < C) ? image[rs * C + cs] : background;
        }
    }
}

void fashion_mnist_erase(float *image, float p, float lo, float hi, Rng *rng) {
    const int R = FASHION_MNIST_ROWS, C = FASHION_MNIST_COLS;
    if (p <= 0.0f || rng_uniform(rng) >= p) return;
    for (int attempt = 0; attempt < 10; attempt++) {
        const float area = (0.02f + 0.38f * rng_uniform(rng)) * (float)(R * C);
        const float ratio = expf(logf(0.3f) + (logf(3.3f) - logf(0.3f)) * rng_uniform(rng));
        const int h = (int)lroundf(sqrtf(area * ratio)), w = (int)lroundf(sqrtf(area / ratio));
        if (h < 1 || w < 1 || h > R || w > C) continue;   /* does not fit: draw again */
        const int top = (int)rng_below(rng, (uint32_t)(R - h + 1));
        const int left = (int)rng_below(rng, (uint32_t)(C - w + 1));
        for (int r = top; r < top + h; r++)
            for (int c = left; c < left + w; c++) image[r * C + c] = lo + (hi - lo) * rng_uniform(rng);
        return;
    }
}

/* ---------------------------------------------- the driver's ExampleTask */

static void fm_train_batch(void *self, Examples *e, int B, Rng *rng) {
    const FashionMnistTask *ft = self;
    const ImageSplit *s = &ft->d->train;
    const int n = ft->train_size > 0 && ft->train_size < s->n ? ft->train_size : s->n;
    e->B = B;
    for (int b = 0; b < B; b++) {
        const int i = (int)rng_below(rng, (uint32_t)n);
        const float *image = s->images + (size_t)i * FASHION_MNIST_PIXELS;
        float *out = e->values + (size_t)b * FASHION_MNIST_PIXELS;
        if (ft->max_shift > 0 || ft->flip)
            fashion_mnist_augment(out, image, ft->max_shift, ft->flip, ft->d->background, rng);
        else
            memcpy(out, image, sizeof(float) * FASHION_MNIST_PIXELS);
        if (ft->erase > 0.0f) fashion_mnist_erase(out, ft->erase, ft->d->background, ft->d->ink, rng);
        e->targets[b] = s->labels[i];
    }
}

static void fm_test_batch(void *self, Examples *e, int B, Rng *rng) {
    (void)rng;                                   /* a fixed set, read in order */
    FashionMnistTask *ft = self;
    const ImageSplit *s = ft->eval_valid ? &ft->d->valid : &ft->d->test;
    e->B = B;
    for (int b = 0; b < B; b++) {
        const int i = ft->cursor++ % s->n;
        memcpy(e->values + (size_t)b * FASHION_MNIST_PIXELS, s->images + (size_t)i * FASHION_MNIST_PIXELS,
               sizeof(float) * FASHION_MNIST_PIXELS);
        e->targets[b] = s->labels[i];
    }
}

static void fm_test_reset(void *self) { ((FashionMnistTask *)self)->cursor = 0; }

static int fm_parse_input(void *self, const char *text, Examples *e) {
    (void)self;
    (void)text;
    (void)e;
    return fail("Fashion-MNIST takes no typed input: give an image with --image FILE.pgm or a test image "
                "with --index N");
}

static void fm_class_text(void *self, int c, char *buf, int cap) {
    (void)self;
    snprintf(buf, (size_t)cap, "%s", c >= 0 && c < FASHION_MNIST_CLASSES ? fashion_mnist_class_names[c] : "?");
}

int fashion_mnist_train_size(const FashionMnistTask *ft) {
    const int n = ft->d->train.n;
    if (ft->train_size < 0 || ft->train_size > n)
        return fail("--train-size %d: expected 1 to the %d images of the training split (0: all of them)",
                    ft->train_size, n);
    return ft->train_size > 0 ? ft->train_size : n;
}

void fashion_mnist_task(FashionMnistTask *ft, ExampleTask *t) {
    memset(t, 0, sizeof *t);
    ft->cursor = 0;
    t->self = ft;
    t->name = "fashion_mnist";
    t->n_in = FASHION_MNIST_PIXELS;
    t->n_out = 1;
    t->float_inputs = 1;
    t->classes = FASHION_MNIST_CLASSES;
    t->train_batch = fm_train_batch;
    t->test_batch = fm_test_batch;
    t->test_reset = fm_test_reset;
    t->parse_input = fm_parse_input;
    t->input_text = NULL;
    t->class_text = fm_class_text;
}
