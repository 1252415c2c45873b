/* fuzz_cmudict.c - libFuzzer target: the CMU Pronouncing Dictionary loader
 * of the g2p task (common/data/task_g2p.c, through dataset_load).
 *
 * The input's first byte chooses how the rest is stored as
 * <dir>/cmudict.dict.gz: even = gzip-compressed (as the file ships, so the
 * fuzzer works on the dictionary text), odd = the raw bytes (so the gzip
 * layer itself sees damaged, truncated and non-gzip data). A dictionary that
 * loads is then split and its sources encoded, as --translate does. */
#include <stdint.h>
#include <stdlib.h>

#include "data/dataset.h"
#include "fuzz_util.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[512], path[600];
    if (dir[0] == '\0') {
        fuzz_path(dir, sizeof dir, "cmudict");
        mkdir(dir, 0755);
        snprintf(path, sizeof path, "%s/cmudict.dict.gz", dir);
    }
    if (size == 0) return 0;
    if (data[0] % 2 == 0) fuzz_write_gzip(path, data + 1, size - 1);
    else fuzz_write(path, data + 1, size - 1);

    TaskConfig tc;
    if (task_defaults(&tc, "g2p") != 0) abort();
    tc.data_dir = dir;
    Dataset d;
    if (dataset_load(&d, &tc) == 0) {
        /* every training source back through the --translate encoder */
        int ids[256], len;
        for (int i = 0; i < d.train.n && i < 64; i++)
            (void)dataset_encode_source(&d, d.train.ex[i].src_text, ids, 256, &len);
        dataset_free(&d);
    }
    clear_error();
    return 0;
}
