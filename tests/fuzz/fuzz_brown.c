/* fuzz_brown.c - libFuzzer target: the Brown corpus reader
 * (common/data/brown.c), words and characters views, on tiny splits.
 *
 * Input: byte 0 chooses the storage (bit 0: raw bytes instead of gzip, so the
 * gzip check sees non-gzip and damaged data) and the view (bit 1: chars);
 * byte 1 the split (1 to 8 training words, 0 to 3 validation words, words
 * seen at most 0 or 1 times become <unk>); the rest is the corpus text. A
 * corpus that loads has every part's ids checked against V and decoded. */
#include <stdint.h>
#include <stdlib.h>

#include "data/brown.h"
#include "fuzz_util.h"
#include "util/error.h"

static void check_part(const BrownCorpus *c, const BrownPart *p) {
    char text[256];
    for (int i = 0; i < p->n; i++)
        if (p->ids[i] < 0 || p->ids[i] >= c->V) abort();
    (void)brown_decode(c, p->ids, p->n < 32 ? p->n : 32, text, sizeof text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[512];
    if (path[0] == '\0') fuzz_path(path, sizeof path, "brown.txt.gz");
    if (size < 2) return 0;
    if (data[0] & 1) fuzz_write(path, data + 2, size - 2);
    else fuzz_write_gzip(path, data + 2, size - 2);

    BrownConfig cfg;
    brown_defaults(&cfg, (data[0] & 2) ? BROWN_CHARS : BROWN_WORDS);
    cfg.path = path;
    cfg.n_train = 1 + data[1] % 8;
    cfg.n_valid = (data[1] / 8) % 4;
    cfg.max_rare = (data[1] / 32) % 2;
    cfg.vocab_from_all = (data[1] / 64) % 2;
    BrownCorpus c;
    if (brown_load_config(&c, &cfg) == 0) {
        check_part(&c, &c.train);
        check_part(&c, &c.valid);
        check_part(&c, &c.test);
        for (int id = -1; id <= c.V; id++) (void)brown_token(&c, id);
    }
    brown_free(&c);
    clear_error();
    return 0;
}
