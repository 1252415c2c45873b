/* sparse_patterns.c - chapter 06, part 5: the patterns of sparse attention,
 * drawn as the BigBird paper and the lecture draw them: query i's row, key
 * j's column, dark where i may look at j, white where it may not.
 *
 *   ./build/tools/sparse_patterns [--out DIR]     (default out/sparse_patterns)
 *
 * Four layouts of sparse_attention.h over N = 64 positions in blocks of
 * P = 4, no causal mask (an encoder's, as in the paper's figure): random
 * (each query block's own block and 2 random blocks), window (one block each
 * side), global (the first block sees and is seen by all, besides each
 * block's own), and BigBird, their union. The numbers of each title are the
 * share of the N x N pairs scored. Writes DIR/patterns.png (and its .dat,
 * .gp); the picture of COST.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_transformer/sparse_attention.h"
#include "io/plot.h"
#include "util/error.h"
#include "util/util.h"

enum { N = 64, P = 4, PANELS = 4 };

int main(int argc, char **argv) {
    const char *out = "out/sparse_patterns";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "sparse_patterns: unknown argument '%s'; usage: sparse_patterns [--out DIR]\n", argv[i]);
            return 2;
        }
    }
    const SparsePattern patterns[PANELS] = {{P, 0, 0, 2, 1}, {P, 1, 0, 0, 1}, {P, 0, 1, 0, 1}, {P, 1, 1, 2, 1}};
    const char *const names[PANELS] = {"random (r = 2)", "window (w = 1)", "global (g = 1)", "BigBird"};
    float *maps = calloc((size_t)PANELS * N * N, sizeof(float));
    char titles[PANELS][64];
    const char *title_of[PANELS];
    for (int k = 0; k < PANELS; k++) {
        SparseLayout L;
        if (!maps || sparse_layout_create(&L, &patterns[k], N, 0) != 0) {
            fprintf(stderr, "sparse_patterns: %s\n", maps ? last_error() : "out of memory");
            return 1;
        }
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) maps[((size_t)k * N + i) * N + j] = (float)sparse_allows(&L, i, j);
        snprintf(titles[k], sizeof titles[k], "%s: %.0f%% of the pairs", names[k], 100.0 * sparse_density(&L, N));
        title_of[k] = titles[k];
        sparse_layout_free(&L);
    }
    char stem[1024];
    if (make_dirs(out) != 0 || snprintf(stem, sizeof stem, "%s/patterns", out) >= (int)sizeof stem ||
        plot_heatmap_grid(stem, "Sparse attention, N = 64 in blocks of 4: dark where query i may look at key j",
                          maps, PANELS, 2, title_of, N, N, NULL, NULL, "key j", "query i", "attends", 0.0f,
                          1.0f) != 0) {
        fprintf(stderr, "sparse_patterns: %s\n", last_error());
        free(maps);
        return 1;
    }
    free(maps);
    printf("wrote %s/patterns.png\n", out);
    return 0;
}
