/* fuzz_bible.c - libFuzzer target: the English -> Spanish verse reader
 * (common/data/bible.c), and byte-pair encoding learned on what it loads
 * (common/data/bpe.c).
 *
 * Input: byte 0 chooses the storage (bit 0: raw bytes instead of gzip, so
 * the reader sees plain text and damaged gzip data alike) and the number of
 * merges (bits 1-4: 0 to 15); the rest is the file. A file that loads has
 * its training sides learned as BPE, every pair encoded, decoded and its ids
 * checked against V, and the merges written out and read back to the same
 * fingerprint. */
#include <stdint.h>
#include <stdlib.h>

#include "data/bible.h"
#include "data/bpe.h"
#include "fuzz_util.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[512];
    if (path[0] == '\0') fuzz_path(path, sizeof path, "bible.tsv.gz");
    if (size < 1) return 0;
    if (data[0] & 1) fuzz_write(path, data + 1, size - 1);
    else fuzz_write_gzip(path, data + 1, size - 1);

    BibleCorpus c;
    if (bible_load(&c, path) == 0) {
        const char **texts = malloc(sizeof(char *) * 2 * (size_t)c.n);
        int n = 0;
        for (int i = 0; i < c.n; i++) {
            if (c.pairs[i].split < BIBLE_TRAIN || c.pairs[i].split > BIBLE_TEST) abort();
            if (c.pairs[i].english[0] == '\0' || c.pairs[i].spanish[0] == '\0') abort();
            if (c.pairs[i].split == BIBLE_TRAIN) {
                texts[n++] = c.pairs[i].english;
                texts[n++] = c.pairs[i].spanish;
            }
        }
        Bpe b, back;
        if (bpe_learn_texts(&b, texts, n, (data[0] >> 1) & 15) == 0) {
            int ids[512];
            char out[2048];
            for (int i = 0; i < c.n; i++) {
                int k = bpe_encode(&b, c.pairs[i].english, ids, 512, NULL);
                for (int j = 0; j < k && j < 512; j++)
                    if (ids[j] < 0 || ids[j] >= b.V) abort();
                if (k > 0) (void)bpe_decode(&b, ids, k, out, sizeof out);
            }
            char *text = bpe_to_text(&b, "");
            if (bpe_from_text(&back, text, "") != 0 || bpe_crc(&back) != bpe_crc(&b)) abort();
            bpe_free(&back);
            free(text);
        }
        bpe_free(&b);
        free(texts);
    }
    bible_free(&c);
    clear_error();
    return 0;
}
