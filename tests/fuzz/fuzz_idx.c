/* fuzz_idx.c - libFuzzer target: the IDX reader (common/data/idx.c) that
 * loads Fashion-MNIST's images and labels for chapter 07.
 *
 * The input's first byte chooses the storage (even: gzip-compressed, as the
 * data set ships; odd: raw, as torchvision keeps it) and which reader runs
 * (bit 1: images of any size, or of 28 x 28; bit 2: the label reader). */
#include <stdint.h>

#include "data/idx.h"
#include "fuzz_util.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[512];
    if (path[0] == '\0') fuzz_path(path, sizeof path, "images.idx.gz");
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    if (mode % 2 == 0) fuzz_write_gzip(path, data + 1, size - 1);
    else fuzz_write(path, data + 1, size - 1);

    IdxData d;
    int rc;
    if (mode & 4) rc = idx_read_labels(&d, path);
    else if (mode & 2) rc = idx_read_images(&d, path, 28, 28);
    else rc = idx_read_images(&d, path, 0, 0);
    if (rc == 0) {
        /* touch every byte the reader claims to have read */
        unsigned sum = 0;
        for (size_t i = 0; i < (size_t)d.count * (size_t)d.rows * (size_t)d.cols; i++) sum += d.data[i];
        if (sum == 0xffffffffu) clear_error();
    }
    idx_free(&d);
    clear_error();
    return 0;
}
