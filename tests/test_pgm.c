/* test_pgm.c - the PGM reader, writer and area resizing (common/io/pgm.h).
 *
 *  - P2 and P5 files (8 and 16 bits, comments in the header) read to the
 *    right values; a written file reads back;
 *  - broken files are refused with ONE message naming the file and what was
 *    wrong: missing, wrong magic, a width or height of 0, an oversized image
 *    (refused before allocating), a bad maxval, a pixel above maxval, a
 *    truncated raster (P5 and P2), data after the last pixel;
 *  - resizing: a constant image stays constant, halving averages 2 x 2
 *    blocks, growing repeats pixels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pgm.h"
#include "temp_dir.h"
#include "util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

static char tmp_dir[512];

static int setup(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "attn_test_pgm");
}

static int teardown(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

static const char *write_file(char *path, const char *name, const void *bytes, size_t n) {
    snprintf(path, 1024, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return path;
}

static const char *write_text(char *path, const char *name, const char *text) {
    return write_file(path, name, text, strlen(text));
}

/* The call failed with one message that names the file and contains `what`. */
static void expect_error(const char *path, const char *what) {
    PgmImage img;
    assert_int_equal(pgm_read(&img, path), -1);
    assert_null(img.pixels);
    if (strstr(last_error(), path) == NULL || strstr(last_error(), what) == NULL)
        fail_msg("message \"%s\" should name '%s' and say \"%s\"", last_error(), path, what);
}

static void test_reads_p2_and_p5(void **state) {
    (void)state;
    char path[1024];
    PgmImage img;
    write_text(path, "a.pgm", "P2\n# a comment\n3 2\n# another\n10\n0 5 10\n  10 0 1\n");
    assert_int_equal(pgm_read(&img, path), 0);
    assert_int_equal(img.width, 3);
    assert_int_equal(img.height, 2);
    const float want[6] = {0.0f, 0.5f, 1.0f, 1.0f, 0.0f, 0.1f};
    for (int i = 0; i < 6; i++) assert_true(fabsf(img.pixels[i] - want[i]) < 1e-6f);
    pgm_free(&img);

    const unsigned char p5[] = {'P', '5', '\n', '2', ' ', '2', '\n', '2', '5', '5', '\n', 0, 51, 255, 102};
    write_file(path, "b.pgm", p5, sizeof p5);
    assert_int_equal(pgm_read(&img, path), 0);
    assert_true(img.width == 2 && img.height == 2);
    assert_true(fabsf(img.pixels[1] - 0.2f) < 1e-6f && img.pixels[2] == 1.0f && fabsf(img.pixels[3] - 0.4f) < 1e-6f);
    pgm_free(&img);

    const unsigned char p5_16[] = {'P', '5', ' ', '2', ' ', '1', ' ', '1', '0', '0', '0', '\n', 0x01, 0xF4, 0x03, 0xE8};
    write_file(path, "c.pgm", p5_16, sizeof p5_16);
    assert_int_equal(pgm_read(&img, path), 0);
    assert_true(img.pixels[0] == 0.5f && img.pixels[1] == 1.0f);
    pgm_free(&img);

    /* write, read back: 8 bits, so within half a step of 1/255 */
    float px[12];
    for (int i = 0; i < 12; i++) px[i] = (float)i / 11.0f;
    snprintf(path, sizeof path, "%s/w.pgm", tmp_dir);
    assert_int_equal(pgm_write(path, px, 4, 3), 0);
    assert_int_equal(pgm_read(&img, path), 0);
    assert_true(img.width == 4 && img.height == 3);
    for (int i = 0; i < 12; i++) assert_true(fabsf(img.pixels[i] - px[i]) <= 0.5f / 255 + 1e-6f);
    pgm_free(&img);
}

static void test_refuses_broken_files(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/missing.pgm", tmp_dir);
    expect_error(path, "cannot open");
    expect_error(write_text(path, "magic.pgm", "P6\n2 2\n255\nabcdefghijkl"), "P2 or P5");
    expect_error(write_text(path, "png.pgm", "\x89PNG\r\n"), "P2 or P5");
    expect_error(write_text(path, "empty.pgm", ""), "P2 or P5");
    expect_error(write_text(path, "zero.pgm", "P2\n0 3\n255\n"), "0 x 3");
    expect_error(write_text(path, "huge.pgm", "P5\n100000 100000\n255\n"), "100000 x 100000");
    expect_error(write_text(path, "header.pgm", "P5\n28 28\n"), "maxval");
    expect_error(write_text(path, "maxval.pgm", "P2\n1 1\n70000\n5\n"), "maxval 70000");
    expect_error(write_text(path, "notnum.pgm", "P2\n2 x\n255\n"), "height");
    expect_error(write_text(path, "above.pgm", "P2\n2 1\n10\n3 11\n"), "larger than 10");
    const unsigned char above5[] = {'P', '5', ' ', '2', ' ', '1', ' ', '9', '\n', 3, 12};
    expect_error(write_file(path, "above5.pgm", above5, sizeof above5), "above maxval");
    /* truncated: 2 x 2 pixels need 4 bytes, 3 are there */
    const unsigned char cut[] = {'P', '5', ' ', '2', ' ', '2', ' ', '2', '5', '5', '\n', 1, 2, 3};
    expect_error(write_file(path, "cut.pgm", cut, sizeof cut), "truncated");
    expect_error(write_text(path, "cut2.pgm", "P2\n2 2\n255\n1 2 3\n"), "truncated");
    /* a legal size in a file far too short for it: refused before the pixels
     * are allocated (8192 x 8192 floats would be 256 MiB) */
    expect_error(write_text(path, "promise.pgm", "P5\n8192 8192\n255\n\1\2"), "need at least");
    expect_error(write_text(path, "promise2.pgm", "P2\n8192 8192\n255\n1 2 3\n"), "need at least");
    /* longer than the header says */
    const unsigned char longer[] = {'P', '5', ' ', '1', ' ', '1', ' ', '2', '5', '5', '\n', 1, 2};
    expect_error(write_file(path, "long.pgm", longer, sizeof longer), "longer than its 1 x 1 header");
    expect_error(write_text(path, "long2.pgm", "P2\n1 1\n255\n1 2\n"), "longer than its header");
}

static void test_resize(void **state) {
    (void)state;
    float in[6 * 4], out[3 * 2];
    for (int i = 0; i < 24; i++) in[i] = 0.25f;
    image_resize_area(out, 3, 2, in, 6, 4);
    for (int i = 0; i < 6; i++) assert_true(fabsf(out[i] - 0.25f) < 1e-6f);
    for (int i = 0; i < 24; i++) in[i] = (float)i;
    image_resize_area(out, 3, 2, in, 6, 4);     /* 2 x 2 blocks */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) {
            const int y = 2 * r, x = 2 * c;
            const float want = (in[y * 4 + x] + in[y * 4 + x + 1] + in[(y + 1) * 4 + x] + in[(y + 1) * 4 + x + 1]) / 4;
            assert_true(fabsf(out[r * 2 + c] - want) < 1e-5f);
        }
    float small[2] = {0.0f, 1.0f}, big[4 * 4];
    image_resize_area(big, 4, 4, small, 1, 2);   /* growing repeats */
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) assert_true(big[r * 4 + c] == (c < 2 ? 0.0f : 1.0f));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_p2_and_p5),
        cmocka_unit_test(test_refuses_broken_files),
        cmocka_unit_test(test_resize),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
