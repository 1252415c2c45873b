/* test_idx.c - the IDX reader (data/idx.h) and the Fashion-MNIST loader
 * (data/fashion_mnist.h).
 *
 *  - tiny IDX files written by the test into a temporary directory, gzip'd and
 *    plain (an uncompressed IDX file is accepted on purpose: idx.h), read back
 *    byte for byte;
 *  - every broken file the reader must refuse, each with one message naming the
 *    file and what was wrong: missing, not IDX at all (a text file), wrong type
 *    byte, wrong number of dimensions, truncated header, truncated data, more
 *    data than announced, sizes of 0, sizes too large (refused before any
 *    allocation), images of the wrong size, corrupt and cut-off gzip;
 *  - the loader on a small fake data set (5,003 training and 4 test images):
 *    splits, pixel / 255, statistics, normalisation, the files without .gz, and
 *    its own checks: label count against image count, labels 0..9, a missing
 *    directory;
 *  - augmentation: the shift and mirror it promises, pixel by pixel, the same
 *    images for the same seed;
 *  - the real data set from the Debian package dataset-fashion-mnist: counts,
 *    the first training label (9, "Ankle boot"), the pixel range, 1,000 test
 *    images per class, the training mean and std of data/README.md. Skipped,
 *    with a message, only when the package is not installed (tools/deps.sh
 *    installs it for make test). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "temp_dir.h"

static char tmp_dir[256];

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_idx");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

/* tmp_dir/name into out (512 bytes). */
static const char *tmp_path(char *out, const char *name) {
    snprintf(out, 512, "%s/%s", tmp_dir, name);
    return out;
}

/* Write n bytes to tmp_dir/name, gzip'd (level 1: fast) when gz is 1. */
static const char *write_bytes(char *path, const char *name, const unsigned char *bytes, size_t n, int gz) {
    tmp_path(path, name);
    if (gz) {
        gzFile f = gzopen(path, "wb1");
        assert_non_null(f);
        if (n > 0) assert_int_equal(gzwrite(f, bytes, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(bytes, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
    return path;
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* An IDX file in memory: header (magic bytes 0 0 type n_dims, then the sizes)
 * and data[k] = (k * 7 + 3) % 256. Returns a malloc'd buffer of *len bytes;
 * n_data bytes of data are written whatever the sizes say (to make broken files). */
static unsigned char *make_idx(size_t *len, int type, int n_dims, const uint32_t *dims, size_t n_data) {
    *len = 4 + 4 * (size_t)n_dims + n_data;
    unsigned char *b = malloc(*len);
    b[0] = 0;
    b[1] = 0;
    b[2] = (unsigned char)type;
    b[3] = (unsigned char)n_dims;
    for (int k = 0; k < n_dims; k++) put_u32(b + 4 + 4 * k, dims[k]);
    for (size_t k = 0; k < n_data; k++) b[4 + 4 * n_dims + k] = (unsigned char)((k * 7 + 3) % 256);
    return b;
}

/* Write an IDX file to tmp_dir/name (gzip'd or not). */
static const char *write_idx(char *path, const char *name, int type, int n_dims, const uint32_t *dims,
                             size_t n_data, int gz) {
    size_t len;
    unsigned char *b = make_idx(&len, type, n_dims, dims, n_data);
    write_bytes(path, name, b, len, gz);
    free(b);
    return path;
}

/* The call failed with one message that names the file and contains `what`. */
static void expect_error(int rc, const char *path, const char *what) {
    assert_int_equal(rc, -1);
    if (strstr(last_error(), path) == NULL || strstr(last_error(), what) == NULL)
        fail_msg("message \"%s\" should name '%s' and say \"%s\"", last_error(), path, what);
}

/* ------------------------------------------------------------ valid files */

static void test_reads_gzip_and_plain(void **state) {
    (void)state;
    char path[512];
    const uint32_t dims[3] = {3, 4, 5};
    for (int gz = 1; gz >= 0; gz--) {
        IdxData d;
        write_idx(path, gz ? "images.gz" : "images", 0x08, 3, dims, 60, gz);
        assert_int_equal(idx_read_images(&d, path, 4, 5), 0);
        assert_int_equal(d.count, 3);
        assert_int_equal(d.rows, 4);
        assert_int_equal(d.cols, 5);
        for (int k = 0; k < 60; k++) assert_int_equal(d.data[k], (k * 7 + 3) % 256);
        idx_free(&d);
        assert_null(d.data);
        /* 0, 0: any size */
        assert_int_equal(idx_read_images(&d, path, 0, 0), 0);
        idx_free(&d);
    }
    const uint32_t n_labels = 7;
    IdxData l;
    write_idx(path, "labels.gz", 0x08, 1, &n_labels, 7, 1);
    assert_int_equal(idx_read_labels(&l, path), 0);
    assert_int_equal(l.count, 7);
    assert_int_equal(l.rows, 1);
    assert_int_equal(l.cols, 1);
    for (int k = 0; k < 7; k++) assert_int_equal(l.data[k], (k * 7 + 3) % 256);
    idx_free(&l);
    idx_free(&l);   /* twice is harmless */
}

/* ------------------------------------------------------------ broken files */

static void test_missing_file(void **state) {
    (void)state;
    char path[512];
    IdxData d;
    tmp_path(path, "no-such-file.gz");
    expect_error(idx_read_images(&d, path, 28, 28), path, "No such file or directory");
    assert_null(d.data);
}

static void test_not_idx(void **state) {
    (void)state;
    char path[512];
    IdxData d;
    const char *text = "This is a text file, not an IDX file.\n";
    /* plain text, and the same gzip'd: both reach the magic-number check */
    write_bytes(path, "text.txt", (const unsigned char *)text, strlen(text), 0);
    expect_error(idx_read_images(&d, path, 0, 0), path, "not an IDX file: it starts with the bytes 0x54 0x68");
    write_bytes(path, "text.gz", (const unsigned char *)text, strlen(text), 1);
    expect_error(idx_read_labels(&d, path), path, "not an IDX file");
    assert_non_null(strstr(last_error(), "0x00000801"));
    /* an empty file: the header is cut off at byte 0 */
    write_bytes(path, "empty", (const unsigned char *)"", 0, 0);
    expect_error(idx_read_images(&d, path, 0, 0), path, "truncated IDX header: the file ends after 0 bytes, expected 16");
}

static void test_wrong_type_and_dimensions(void **state) {
    (void)state;
    char path[512];
    IdxData d;
    const uint32_t dims[3] = {2, 3, 3};
    /* 0x0D = float: a valid IDX type, but not the bytes this reader wants */
    write_idx(path, "floats.gz", 0x0D, 3, dims, 18, 1);
    expect_error(idx_read_images(&d, path, 0, 0), path, "IDX data type 0x0d (byte 2, magic number 0x00000d03), expected 0x08");
    /* a label file given as images, and an image file given as labels */
    write_idx(path, "labels.gz", 0x08, 1, dims, 2, 1);
    expect_error(idx_read_images(&d, path, 0, 0), path, "1 dimension (byte 3, magic number 0x00000801), expected 3 for images");
    assert_non_null(strstr(last_error(), "is this a label file?"));
    write_idx(path, "images.gz", 0x08, 3, dims, 18, 1);
    expect_error(idx_read_labels(&d, path), path, "3 dimensions (byte 3, magic number 0x00000803), expected 1 for labels");
    /* images of another size than the caller expects */
    expect_error(idx_read_images(&d, path, 28, 28), path, "images of 3x3 pixels (rows x cols, bytes 8-15), expected 28x28");
    /* sizes of 0 */
    const uint32_t zero_count[3] = {0, 28, 28}, zero_cols[3] = {5, 28, 0};
    write_idx(path, "zero.gz", 0x08, 3, zero_count, 0, 1);
    expect_error(idx_read_images(&d, path, 0, 0), path, "the count in the IDX header (bytes 4-7) is 0, expected 1 to");
    write_idx(path, "zero.gz", 0x08, 3, zero_cols, 0, 1);
    expect_error(idx_read_images(&d, path, 0, 0), path, "the cols in the IDX header (bytes 12-15) is 0");
}

static void test_absurd_sizes_refused_before_allocating(void **state) {
    (void)state;
    char path[512];
    IdxData d;
    /* Each would ask for far more memory than exists (the first multiplies to
     * more than 2^64 in 32-bit pieces); the reader must refuse before malloc
     * (under ASan an allocation this size would abort the test). */
    const uint32_t huge[][3] = {{0x7fffffff, 0x7fffffff, 0x7fffffff}, {1, 0x7fffffff, 0x7fffffff},
                                {0x7fffffff, 28, 28}, {342393, 28, 28}};
    for (int k = 0; k < 4; k++) {
        write_idx(path, "huge.gz", 0x08, 3, huge[k], 100, 1);
        expect_error(idx_read_images(&d, path, 0, 0), path, "MiB this reader accepts");
        assert_null(d.data);
    }
    /* just under the limit passes the size check, and is then found truncated
     * (the reader's buffer grows with the bytes that arrive: 1 MiB here, not 256) */
    const uint32_t fits[3] = {342392, 28, 28};   /* 342,392 x 784 <= 256 MiB < 342,393 x 784 */
    write_idx(path, "fits.gz", 0x08, 3, fits, 100, 1);
    expect_error(idx_read_images(&d, path, 0, 0), path, "truncated: the header announces 342392 images");
    /* a size over 2^31 - 1 */
    const uint32_t negative = 0x80000000u;
    write_idx(path, "neg.gz", 0x08, 1, &negative, 10, 1);
    expect_error(idx_read_labels(&d, path), path, "is 2147483648, expected 1 to 2147483647");
}

static void test_truncated(void **state) {
    (void)state;
    char path[512];
    IdxData d;
    const uint32_t dims[3] = {3, 4, 5};
    size_t len;
    unsigned char *b = make_idx(&len, 0x08, 3, dims, 60);
    for (int gz = 0; gz <= 1; gz++) {
        /* the header cut after 10 of its 16 bytes */
        write_bytes(path, "header", b, 10, gz);
        expect_error(idx_read_images(&d, path, 0, 0), path, "truncated IDX header: the file ends after 10 bytes, expected 16");
        /* the data cut after 2.5 of 3 images */
        write_bytes(path, "data", b, 16 + 50, gz);
        expect_error(idx_read_images(&d, path, 0, 0), path,
                     "truncated: the header announces 3 images of 4x5 pixels (60 bytes of data after the 16-byte "
                     "header), the file holds only 50 of them");
        assert_null(d.data);
    }
    /* labels: 7 announced, 5 there */
    const uint32_t n = 7;
    free(b);
    b = make_idx(&len, 0x08, 1, &n, 5);
    write_bytes(path, "labels.gz", b, len, 1);
    expect_error(idx_read_labels(&d, path), path, "truncated: the header announces 7 labels");
    free(b);
}

static void test_more_data_than_announced(void **state) {
    (void)state;
    char path[512];
    IdxData d;
    const uint32_t dims[3] = {2, 4, 5};   /* 2 images announced, 3 written */
    write_idx(path, "extra.gz", 0x08, 3, dims, 60, 1);
    expect_error(idx_read_images(&d, path, 0, 0), path, "more data than the header announces (2 images");
    assert_null(d.data);
}

static void test_corrupt_gzip(void **state) {
    (void)state;
    char path[512];
    IdxData d;
    /* a gzip header followed by garbage */
    const unsigned char junk[] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 0x03, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa,
                                  0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22};
    write_bytes(path, "junk.gz", junk, sizeof junk, 0);
    expect_error(idx_read_images(&d, path, 0, 0), path, "corrupt gzip data");
    /* a good .gz cut in half: the gzip stream ends early */
    const uint32_t dims[3] = {50, 28, 28};
    write_idx(path, "whole.gz", 0x08, 3, dims, 50 * 784, 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 100 && n < sizeof buf);
    write_bytes(path, "cut.gz", buf, n / 2, 0);
    expect_error(idx_read_images(&d, path, 0, 0), path, "the .gz file is truncated");
    assert_null(d.data);
}

/* ------------------------------------------------- the Fashion-MNIST loader */

enum { FAKE_TRAIN = FASHION_MNIST_N_VALID + 3, FAKE_TEST = 4 };

static unsigned char fake_pixel(int image, int k) { return (unsigned char)((image * 31 + k * 7) % 256); }

/* A fake data set in tmp_dir/sub: n_train and n_test images of 28 x 28 with
 * fake_pixel() values, labels i % 10 (labels_train of them in the training
 * labels file; one label set to bad_label when bad_label >= 0). gz: 1 = *.gz
 * names, 0 = plain files without .gz. */
static void write_fake_set(const char *sub, int n_train, int labels_train, int n_test, int bad_label, int gz) {
    char dir[512], path[512], name[600];
    tmp_path(dir, sub);
    mkdir(dir, 0755);
    const char *suffix = gz ? ".gz" : "";
    for (int part = 0; part < 2; part++) {
        const int n = part == 0 ? n_train : n_test, n_lab = part == 0 ? labels_train : n_test;
        const char *prefix = part == 0 ? "train" : "t10k";
        size_t len = 16 + (size_t)n * 784;
        unsigned char *b = malloc(len);
        const uint32_t dims[3] = {(uint32_t)n, 28, 28};
        b[0] = b[1] = 0;
        b[2] = 0x08;
        b[3] = 3;
        for (int k = 0; k < 3; k++) put_u32(b + 4 + 4 * k, dims[k]);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < 784; k++) b[16 + (size_t)i * 784 + k] = fake_pixel(i, k);
        snprintf(name, sizeof name, "%s/%s-images-idx3-ubyte%s", sub, prefix, suffix);
        write_bytes(path, name, b, len, gz);
        free(b);
        len = 8 + (size_t)n_lab;
        b = malloc(len);
        b[0] = b[1] = 0;
        b[2] = 0x08;
        b[3] = 1;
        put_u32(b + 4, (uint32_t)n_lab);
        for (int i = 0; i < n_lab; i++) b[8 + i] = (unsigned char)(i % 10);
        if (part == 0 && bad_label >= 0) b[8 + 1] = (unsigned char)bad_label;
        snprintf(name, sizeof name, "%s/%s-labels-idx1-ubyte%s", sub, prefix, suffix);
        write_bytes(path, name, b, len, gz);
        free(b);
    }
}

static void test_loader_on_fake_set(void **state) {
    (void)state;
    char dir[512];
    write_fake_set("fake", FAKE_TRAIN, FAKE_TRAIN, FAKE_TEST, -1, 1);
    FashionMnist d;
    if (fashion_mnist_load(&d, tmp_path(dir, "fake"), 0) != 0) fail_msg("%s", last_error());
    assert_int_equal(d.train.n, 3);
    assert_int_equal(d.valid.n, FASHION_MNIST_N_VALID);
    assert_int_equal(d.test.n, FAKE_TEST);
    assert_int_equal(d.normalized, 0);
    assert_true(d.background == 0.0f);
    assert_true(d.ink == 1.0f);
    /* the valid split is the END of the training file */
    assert_int_equal(d.valid.labels[0], 3 % 10);
    assert_true(d.valid.images[5] == fake_pixel(3, 5) / 255.0f);
    for (int i = 0; i < d.train.n; i++) {
        assert_int_equal(d.train.labels[i], i % 10);
        for (int k = 0; k < 784; k++) assert_true(d.train.images[(size_t)i * 784 + k] == fake_pixel(i, k) / 255.0f);
    }
    for (int i = 0; i < d.test.n; i++) {
        assert_int_equal(d.test.labels[i], i % 10);
        for (int k = 0; k < 784; k++) assert_true(d.test.images[(size_t)i * 784 + k] == fake_pixel(i, k) / 255.0f);
    }
    /* statistics of the 3 training images only, in double here */
    double s = 0.0, sq = 0.0;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 784; k++) s += fake_pixel(i, k) / 255.0;
    const double mean = s / (3 * 784);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 784; k++) sq += (fake_pixel(i, k) / 255.0 - mean) * (fake_pixel(i, k) / 255.0 - mean);
    const double std = sqrt(sq / (3 * 784));
    assert_float_equal(d.mean, mean, 1e-6);
    assert_float_equal(d.std, std, 1e-6);
    fashion_mnist_free(&d);
    assert_null(d.train.images);

    /* normalised: the training split has mean 0 and std 1, others use its statistics */
    if (fashion_mnist_load(&d, dir, 1) != 0) fail_msg("%s", last_error());
    assert_int_equal(d.normalized, 1);
    s = sq = 0.0;
    for (size_t k = 0; k < 3 * 784; k++) s += d.train.images[k];
    for (size_t k = 0; k < 3 * 784; k++) sq += (double)d.train.images[k] * d.train.images[k];
    assert_float_equal(s / (3 * 784), 0.0, 1e-5);
    assert_float_equal(sqrt(sq / (3 * 784)), 1.0, 1e-5);
    assert_float_equal(d.test.images[9], (fake_pixel(0, 9) / 255.0f - d.mean) / d.std, 1e-6);
    assert_float_equal(d.background, -d.mean / d.std, 1e-6);
    assert_float_equal(d.ink, (1.0f - d.mean) / d.std, 1e-6);

    /* the training stream with erase = 1 and no shift or flip: every image is
     * the training image of its label (labels are i % 10 here) but for one
     * rectangle of noise between a blank and a full pixel */
    FashionMnistTask ft = {.d = &d, .erase = 1.0f};
    ExampleTask task;
    fashion_mnist_task(&ft, &task);
    Examples e;
    examples_alloc(&e, 16, 784, 1, 1);
    Rng r;
    rng_seed(&r, 8, 2);
    task.train_batch(task.self, &e, 16, &r);
    for (int b = 0; b < 16; b++) {
        const float *want = d.train.images + (size_t)e.targets[b] * 784, *got = e.values + (size_t)b * 784;
        int row_lo = 28, row_hi = -1, col_lo = 28, col_hi = -1, changed = 0;
        for (int k = 0; k < 784; k++)
            if (got[k] != want[k]) {
                assert_true(got[k] >= d.background && got[k] < d.ink);
                changed++;
                row_lo = k / 28 < row_lo ? k / 28 : row_lo, row_hi = k / 28 > row_hi ? k / 28 : row_hi;
                col_lo = k % 28 < col_lo ? k % 28 : col_lo, col_hi = k % 28 > col_hi ? k % 28 : col_hi;
            }
        assert_true(changed > 0);   /* (a noise value equal to the pixel it covers is vanishingly rare) */
        assert_true(changed <= (row_hi - row_lo + 1) * (col_hi - col_lo + 1));   /* inside one rectangle */
        assert_true(changed * 10 >= 9 * (row_hi - row_lo + 1) * (col_hi - col_lo + 1));
    }

    /* --train-size 2: the stream draws from the first 2 training images only
     * (labels 0 and 1 here), and both of them come; 0 is all 3; more than the
     * split holds, or a negative size, is refused */
    FashionMnistTask small = {.d = &d, .train_size = 2};
    assert_int_equal(fashion_mnist_train_size(&small), 2);
    fashion_mnist_task(&small, &task);
    int seen[3] = {0, 0, 0};
    for (int round = 0; round < 4; round++) {
        task.train_batch(task.self, &e, 16, &r);
        for (int b = 0; b < 16; b++) seen[e.targets[b]]++;
    }
    assert_true(seen[0] > 0 && seen[1] > 0);
    assert_int_equal(seen[2], 0);
    small.train_size = 0;
    assert_int_equal(fashion_mnist_train_size(&small), 3);
    small.train_size = 4;
    assert_int_equal(fashion_mnist_train_size(&small), -1);
    assert_non_null(strstr(last_error(), "--train-size 4: expected 1 to the 3 images of the training split"));
    small.train_size = -1;
    assert_int_equal(fashion_mnist_train_size(&small), -1);
    examples_free(&e);
    fashion_mnist_free(&d);

    /* the same files gunzip'd, without the .gz in their names */
    write_fake_set("plain", FAKE_TRAIN, FAKE_TRAIN, FAKE_TEST, -1, 0);
    if (fashion_mnist_load(&d, tmp_path(dir, "plain"), 0) != 0) fail_msg("%s", last_error());
    assert_int_equal(d.train.n, 3);
    assert_true(d.test.images[783] == fake_pixel(0, 783) / 255.0f);
    fashion_mnist_free(&d);
}

static void test_loader_errors(void **state) {
    (void)state;
    char dir[512], path[600];
    FashionMnist d;
    /* one label fewer than images */
    write_fake_set("mismatch", FAKE_TRAIN, FAKE_TRAIN - 1, FAKE_TEST, -1, 1);
    tmp_path(dir, "mismatch");
    expect_error(fashion_mnist_load(&d, dir, 0), "train-labels-idx1-ubyte.gz",
                 "holds 5003 images but");
    assert_non_null(strstr(last_error(), "holds 5002 labels: expected one label per image"));
    assert_null(d.train.images);
    /* a label of 10 */
    write_fake_set("badlabel", FAKE_TRAIN, FAKE_TRAIN, FAKE_TEST, 10, 1);
    tmp_path(dir, "badlabel");
    expect_error(fashion_mnist_load(&d, dir, 0), "train-labels-idx1-ubyte.gz",
                 "label 10 of image 1 (byte 9), expected 0 to 9");
    /* too few training images to hold 5,000 out */
    write_fake_set("small", FASHION_MNIST_N_VALID, FASHION_MNIST_N_VALID, FAKE_TEST, -1, 1);
    tmp_path(dir, "small");
    expect_error(fashion_mnist_load(&d, dir, 0), dir, "5000 training images, expected more than the 5000");
    /* a directory without the files */
    tmp_path(dir, "nothing-here");
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    expect_error(fashion_mnist_load(&d, dir, 0), path, "No such file or directory");
    assert_null(d.train.images);
}

/* ---------------------------------------------------------- augmentation */

static void test_augment(void **state) {
    (void)state;
    float image[784], out[784], again[784];
    for (int k = 0; k < 784; k++) image[k] = (float)(k + 1);   /* every pixel different, none 0 */
    Rng r;
    rng_seed(&r, 42, 7);
    /* max_shift 0, flip 0: a copy */
    fashion_mnist_augment(out, image, 0, 0, -1.0f, &r);
    assert_memory_equal(out, image, sizeof image);

    int seen_shift[7][7] = {{0}}, mirrored = 0;
    const int trials = 400;
    for (int t = 0; t < trials; t++) {
        /* the draws augment will make, from a copy of the generator */
        Rng copy = r;
        const int dy = (int)rng_below(&copy, 7) - 3, dx = (int)rng_below(&copy, 7) - 3;
        const int mirror = (int)rng_below(&copy, 2);
        fashion_mnist_augment(out, image, 3, 1, -1.0f, &r);
        assert_memory_equal(&copy, &r, sizeof r);   /* exactly those three draws */
        seen_shift[dy + 3][dx + 3] = 1;
        mirrored += mirror;
        for (int row = 0; row < 28; row++)
            for (int col = 0; col < 28; col++) {
                /* mirror the source image, then shift it down by dy and right by dx */
                const int sr = row - dy, sc_shifted = col - dx;
                const int sc = mirror ? 27 - sc_shifted : sc_shifted;
                const float want = (sr >= 0 && sr < 28 && sc_shifted >= 0 && sc_shifted < 28)
                                       ? image[sr * 28 + sc] : -1.0f;
                assert_true(out[row * 28 + col] == want);
            }
    }
    /* every one of the 49 shifts was drawn, and the mirror about half the time */
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 7; b++) assert_int_equal(seen_shift[a][b], 1);
    assert_in_range(mirrored, trials / 2 - 50, trials / 2 + 50);

    /* the same seed gives the same images */
    Rng r1, r2;
    rng_seed(&r1, 9, 1);
    rng_seed(&r2, 9, 1);
    for (int t = 0; t < 20; t++) {
        fashion_mnist_augment(out, image, 2, 1, 0.0f, &r1);
        fashion_mnist_augment(again, image, 2, 1, 0.0f, &r2);
        assert_memory_equal(out, again, sizeof out);
    }
}

/* Random erasing against its definition: the rectangle the draws of a copy of
 * the generator describe is exactly the set of changed pixels. The image's
 * values (>= 1) lie outside the noise range [-1, 0), so every changed pixel
 * shows. */
static void test_erase(void **state) {
    (void)state;
    float image[784], out[784];
    for (int k = 0; k < 784; k++) image[k] = (float)(k + 1);
    Rng r;
    rng_seed(&r, 5, 3);
    /* p = 0: nothing changed, nothing drawn */
    Rng before = r;
    memcpy(out, image, sizeof out);
    fashion_mnist_erase(out, 0.0f, -1.0f, 0.0f, &r);
    assert_memory_equal(out, image, sizeof image);
    assert_memory_equal(&before, &r, sizeof r);

    int erased = 0, tall = 0, wide = 0;
    double area_sum = 0.0;
    const int trials = 2000;
    for (int t = 0; t < trials; t++) {
        const float p = t < trials / 2 ? 1.0f : 0.5f;
        Rng copy = r;
        int top = -1, left = -1, h = 0, w = 0;
        if (rng_uniform(&copy) < p)
            for (int attempt = 0; attempt < 10; attempt++) {
                /* in float, as the definition is computed */
                const float area = (0.02f + 0.38f * rng_uniform(&copy)) * 784.0f;
                const float ratio = expf(logf(0.3f) + (logf(3.3f) - logf(0.3f)) * rng_uniform(&copy));
                const int hh = (int)lroundf(sqrtf(area * ratio)), ww = (int)lroundf(sqrtf(area / ratio));
                if (hh < 1 || ww < 1 || hh > 28 || ww > 28) continue;
                h = hh, w = ww;
                top = (int)rng_below(&copy, (uint32_t)(28 - h + 1));
                left = (int)rng_below(&copy, (uint32_t)(28 - w + 1));
                break;
            }
        memcpy(out, image, sizeof out);
        fashion_mnist_erase(out, p, -1.0f, 0.0f, &r);
        for (int row = 0; row < 28; row++)
            for (int col = 0; col < 28; col++) {
                const float v = out[row * 28 + col];
                if (row >= top && row < top + h && col >= left && col < left + w)
                    assert_true(v >= -1.0f && v < 0.0f);   /* noise in [lo, hi) */
                else
                    assert_true(v == image[row * 28 + col]);
            }
        if (h > 0) {
            erased += t >= trials / 2;
            tall += h > w;
            wide += w > h;
            area_sum += (double)(h * w) / 784.0;
            assert_in_range(h * w, 5, 392);   /* 2-40% of 784, give or take the rounding */
        }
        if (p == 1.0f) assert_true(h > 0);   /* a fitting rectangle is (nearly) always found */
    }
    /* p = 0.5 erases about half the images; both orientations occur; the mean area about 21% */
    assert_in_range(erased, trials / 4 - 60, trials / 4 + 60);
    assert_true(tall > trials / 8 && wide > trials / 8);
    const double mean_area = area_sum / (trials / 2 + erased);
    assert_true(mean_area > 0.17 && mean_area < 0.24);
}

/* ---------------------------------------------------- the real data set */

/* The training split's mean and std of pixel / 255, as data/README.md gives
 * them (measured there with an independent Python command). */
#define README_TRAIN_MEAN 0.28582
#define README_TRAIN_STD 0.35294

static void test_real_fashion_mnist(void **state) {
    (void)state;
    struct stat st;
    if (stat(FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", &st) != 0) {
        printf("[  SKIP    ] Fashion-MNIST is not installed (%s): sudo apt-get install -y dataset-fashion-mnist "
               "(make test does it through tools/deps.sh)\n", FASHION_MNIST_DIR);
        skip();
    }
    FashionMnist d;
    if (fashion_mnist_load(&d, NULL, 0) != 0) fail_msg("%s", last_error());
    assert_int_equal(d.train.n, 55000);
    assert_int_equal(d.valid.n, 5000);
    assert_int_equal(d.test.n, 10000);
    assert_int_equal(d.train.labels[0], 9);
    assert_string_equal(fashion_mnist_class_names[d.train.labels[0]], "Ankle boot");
    assert_string_equal(fashion_mnist_class_names[0], "T-shirt/top");
    /* pixels in [0, 1], both ends reached */
    float lo = 1.0f, hi = 0.0f;
    for (size_t k = 0; k < (size_t)60000 * 784; k++) {
        const float x = d.train.images[k];
        if (x < lo) lo = x;
        if (x > hi) hi = x;
    }
    assert_true(lo == 0.0f && hi == 1.0f);
    /* the official test set holds 1,000 images of each class */
    int per_class[FASHION_MNIST_CLASSES] = {0};
    for (int i = 0; i < d.test.n; i++) per_class[d.test.labels[i]]++;
    for (int c = 0; c < FASHION_MNIST_CLASSES; c++) assert_int_equal(per_class[c], 1000);
    /* data/README.md's row "train, first 1,000" (what --train-size 1000 trains on) */
    const int first_1000[FASHION_MNIST_CLASSES] = {107, 104, 86, 92, 95, 100, 100, 115, 102, 99};
    int first[FASHION_MNIST_CLASSES] = {0};
    for (int i = 0; i < 1000; i++) first[d.train.labels[i]]++;
    for (int c = 0; c < FASHION_MNIST_CLASSES; c++) assert_int_equal(first[c], first_1000[c]);
    assert_float_equal(d.mean, README_TRAIN_MEAN, 1e-5);
    assert_float_equal(d.std, README_TRAIN_STD, 1e-5);
    fashion_mnist_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_gzip_and_plain),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_not_idx),
        cmocka_unit_test(test_wrong_type_and_dimensions),
        cmocka_unit_test(test_absurd_sizes_refused_before_allocating),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_more_data_than_announced),
        cmocka_unit_test(test_corrupt_gzip),
        cmocka_unit_test(test_loader_on_fake_set),
        cmocka_unit_test(test_loader_errors),
        cmocka_unit_test(test_augment),
        cmocka_unit_test(test_erase),
        cmocka_unit_test(test_real_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
