/* fuzz_pgm.c - libFuzzer target: the PGM reader (common/io/pgm.c) behind
 * chapter 07's --input picture.pgm, and the area resize that follows it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "io/pgm.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[512];
    if (path[0] == '\0') fuzz_path(path, sizeof path, "picture.pgm");
    fuzz_write(path, data, size);
    PgmImage img;
    if (pgm_read(&img, path) == 0) {
        for (long i = 0; i < (long)img.width * img.height; i++)
            if (!(img.pixels[i] >= 0.0f && img.pixels[i] <= 1.0f)) abort();   /* the documented range */
        float out[28 * 28];
        image_resize_area(out, 28, 28, img.pixels, img.height, img.width);
        for (int i = 0; i < 28 * 28; i++)
            if (!(out[i] >= -1e-4f && out[i] <= 1.0001f)) abort();
        pgm_free(&img);
    }
    clear_error();
    return 0;
}
