/* copy_corpus.c - a corpus where context far back matters: each line is K
 * random letters, "=", and the same K letters again, in the Brown file's
 * format (brown.h: "# name" headers, "word/tag" tokens), so chapter 06's
 * GPT reads it with --data FILE --tokens char.
 *
 *   ./build/tools/copy_corpus [--out FILE] [--letters K] [--lines N] [--seed S]
 *       (default out/copy_task/copy.txt.gz, K 24, N 26000, seed 1)
 *
 * In the chars view a line is "q x b ... = q x b ...\n": a letter and a
 * space each, so the copy of a letter stands 2 K + 2 characters after it
 * (50 for K = 24). The first half of a line cannot be predicted better than
 * log2(26) = 4.70 bits a letter (its spaces are free); the second half can be
 * predicted exactly, but only by a model that looks 2 K + 2 characters back.
 * A window of attention narrower than that sees none of it. Lines are grouped
 * 100 to a "text"; 26,000 lines are 1.27 million words: the split's 800,000
 * training, 200,000 validation words and the rest for the test part. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/rng.h"
#include "util/util.h"

static int whole(const char *flag, const char *text, int lo, int hi, int *out) {
    char *end = NULL;
    const long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "copy_corpus: %s expects a whole number from %d to %d, got '%s'\n", flag, lo, hi, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv) {
    const char *out = "out/copy_task/copy.txt.gz";
    int K = 24, lines = 26000, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(argv[i], "--out") == 0) out = v;
        else if (v && strcmp(argv[i], "--letters") == 0) { if (whole("--letters", v, 1, 1000, &K) < 0) return 2; }
        else if (v && strcmp(argv[i], "--lines") == 0) { if (whole("--lines", v, 1, 10000000, &lines) < 0) return 2; }
        else if (v && strcmp(argv[i], "--seed") == 0) { if (whole("--seed", v, 0, 1 << 30, &seed) < 0) return 2; }
        else {
            fprintf(stderr, "copy_corpus: unknown argument '%s'; usage: copy_corpus [--out FILE] [--letters K] "
                            "[--lines N] [--seed S]\n", argv[i]);
            return 2;
        }
        i++;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        if (make_dirs(dir) != 0) {
            fprintf(stderr, "copy_corpus: cannot make the folder %s\n", dir);
            return 1;
        }
    }
    gzFile f = gzopen(out, "wb9");
    if (!f) {
        fprintf(stderr, "copy_corpus: cannot write %s\n", out);
        return 1;
    }
    Rng rng;
    rng_seed(&rng, (uint64_t)seed, 0);
    char *letters = malloc((size_t)K);
    int ok = letters != NULL;
    for (int n = 0; ok && n < lines; n++) {
        if (n % 100 == 0) ok &= gzprintf(f, "%s# copy%04d\n\n", n ? "\n" : "", n / 100) > 0;
        for (int k = 0; k < K; k++) letters[k] = (char)('a' + rng_below(&rng, 26));
        ok &= gzputs(f, "\t") >= 0;
        for (int half = 0; half < 2; half++) {   /* the letters, "=", the letters again */
            if (half == 1) ok &= gzputs(f, "=/sym ") >= 0;
            for (int k = 0; k < K; k++) ok &= gzprintf(f, "%c/nn ", letters[k]) > 0;
        }
        ok &= gzputs(f, "\n") >= 0;
    }
    free(letters);
    if (gzclose(f) != Z_OK || !ok) {
        fprintf(stderr, "copy_corpus: writing %s failed\n", out);
        return 1;
    }
    printf("wrote %s: %d lines of %d letters and their copy\n", out, lines, K);
    return 0;
}
