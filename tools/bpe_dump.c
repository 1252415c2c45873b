/* bpe_dump.c - the C byte-pair encoding on the translation corpus, for
 * tools/bpe_check.py to compare with its own.
 *
 *   make build/tools/bpe_dump && ./build/tools/bpe_dump [--side en|es|both] [--merges N] [--encode K] [PATH]
 *
 * Learns N merges (default 1000) on the training part's English, Spanish or
 * both sides (default en) of PATH (default data/bible_en_es.tsv.gz), then
 * prints the merges in their text form (common/data/bpe.h) and the token ids
 * of the first K test verses of that side (default 200; both: English then
 * Spanish), one "ids=" line each. */
#include "data/bible.h"
#include "data/bpe.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(const char *why) {
    fprintf(stderr, "bpe_dump: %s\nusage: bpe_dump [--side en|es|both] [--merges N] [--encode K] [PATH]\n", why);
    return 2;
}

int main(int argc, char **argv) {
    const char *side = "en", *path = NULL;
    int merges = 1000, encode = 200;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--side") == 0 && i + 1 < argc) side = argv[++i];
        else if (strcmp(argv[i], "--merges") == 0 && i + 1 < argc) merges = atoi(argv[++i]);
        else if (strcmp(argv[i], "--encode") == 0 && i + 1 < argc) encode = atoi(argv[++i]);
        else if (argv[i][0] == '-') return usage("unknown flag");
        else path = argv[i];
    }
    int en = strcmp(side, "en") == 0 || strcmp(side, "both") == 0;
    int es = strcmp(side, "es") == 0 || strcmp(side, "both") == 0;
    if (!en && !es) return usage("--side takes en, es or both");
    if (merges < 0 || encode < 0) return usage("--merges and --encode take a number, 0 or more");
    BibleCorpus c;
    if (bible_load(&c, path) != 0) {
        fprintf(stderr, "bpe_dump: %s\n", last_error());
        return 1;
    }
    const char **texts = malloc(sizeof(char *) * 2 * (size_t)c.n);
    int n = 0;
    for (int i = 0; i < c.n; i++)
        if (c.pairs[i].split == BIBLE_TRAIN) {
            if (en) texts[n++] = c.pairs[i].english;
            if (es) texts[n++] = c.pairs[i].spanish;
        }
    Bpe b;
    if (bpe_learn_texts(&b, texts, n, merges) != 0) {
        fprintf(stderr, "bpe_dump: %s\n", last_error());
        return 1;
    }
    char *text = bpe_to_text(&b, "");
    fputs(text, stdout);
    free(text);
    int ids[4096];
    for (int s = 0; s < 2; s++) {
        if ((s == 0 && !en) || (s == 1 && !es)) continue;
        int done = 0;
        for (int i = 0; i < c.n && done < encode; i++) {
            if (c.pairs[i].split != BIBLE_TEST) continue;
            int k = bpe_encode(&b, s == 0 ? c.pairs[i].english : c.pairs[i].spanish, ids, 4096, NULL);
            if (k < 0) {
                fprintf(stderr, "bpe_dump: %s\n", last_error());
                return 1;
            }
            printf("ids=");
            for (int j = 0; j < k; j++) printf(j ? " %d" : "%d", ids[j]);
            printf("\n");
            done++;
        }
    }
    bpe_free(&b);
    free(texts);
    bible_free(&c);
    return 0;
}
