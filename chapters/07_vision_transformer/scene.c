/* scene.c - chapter 07, captioning: scenes of Fashion-MNIST items, their
 * captions, and the data set the seq2seq driver reads (see scene.h). */
#include "07_vision_transformer/scene.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pgm.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/util.h"

const char *const scene_words[FASHION_MNIST_CLASSES] = {"tshirt", "trouser", "pullover", "dress", "coat",
                                                        "sandal", "shirt",   "sneaker",  "bag",   "boot"};

/* canvas [28 grid, 28 grid]: cell k = (k / grid, k % grid) is cells[k] or background */
void scene_compose(float *canvas, int grid, const float *const *cells, float background) {
    const int side = SCENE_CELL * grid;
    for (int k = 0; k < grid * grid; k++) {
        const int r0 = (k / grid) * SCENE_CELL, c0 = (k % grid) * SCENE_CELL;
        for (int r = 0; r < SCENE_CELL; r++) {
            float *row = canvas + (size_t)(r0 + r) * side + c0;
            if (cells[k]) memcpy(row, cells[k] + (size_t)r * SCENE_CELL, sizeof(float) * SCENE_CELL);
            else for (int c = 0; c < SCENE_CELL; c++) row[c] = background;
        }
    }
}

int scene_caption(const int *labels, int grid, int *words) {
    int n = 0;
    for (int k = 0; k < grid * grid; k++)   /* reading order: row by row, left to right */
        if (labels[k] >= 0) words[n++] = labels[k];
    return n;
}

int scene_set_make(SceneSet *s, const ImageSplit *src, float background, int grid, int n, uint64_t seed) {
    memset(s, 0, sizeof *s);
    if (grid < 2 || grid > SCENE_MAX_GRID) return fail("grid %d: expected 2 (56 x 56 scenes) or 3 (84 x 84)", grid);
    if (n < 1) return fail("%d scenes: expected at least 1", n);
    if (src->n < 1) return fail("no images to make scenes from");
    const int cells = grid * grid, side = SCENE_CELL * grid;
    s->grid = grid;
    s->side = side;
    s->n = n;
    s->pixels = xmalloc(sizeof(float) * (size_t)n * side * side);
    s->items = xmalloc(sizeof(int) * (size_t)n * cells);
    s->labels = xmalloc(sizeof(int) * (size_t)n * cells);
    Rng rng;
    rng_seed(&rng, seed, 16);
    for (int i = 0; i < n; i++) {
        int *items = s->items + (size_t)i * cells, *labels = s->labels + (size_t)i * cells, used = 0;
        /* each cell empty with probability 1/3; draw again until one is not */
        while (used == 0)
            for (int k = 0; k < cells; k++) {
                items[k] = rng_below(&rng, 3) == 0 ? -1 : (int)rng_below(&rng, (uint32_t)src->n);
                used += items[k] >= 0;
            }
        const float *images[SCENE_MAX_CELLS];
        for (int k = 0; k < cells; k++) {
            labels[k] = items[k] >= 0 ? src->labels[items[k]] : -1;
            images[k] = items[k] >= 0 ? src->images + (size_t)items[k] * FASHION_MNIST_PIXELS : NULL;
        }
        scene_compose(s->pixels + (size_t)i * side * side, grid, images, background);
    }
    return 0;
}

void scene_set_free(SceneSet *s) {
    free(s->pixels);
    free(s->items);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

/* One split of the data set: n scenes from src as examples whose values
 * point into store (n side side floats, copied from the scenes). */
static int make_split(Split *split, float *store, const Vocab *words, const ImageSplit *src, const char *name,
                      float background, int grid, int n, uint64_t seed) {
    SceneSet s;
    if (scene_set_make(&s, src, background, grid, n, seed) < 0) return -1;
    const int cells = grid * grid;
    const size_t canvas = (size_t)s.side * s.side;
    memcpy(store, s.pixels, sizeof(float) * canvas * n);
    split_alloc(split, n);
    int zeros[SCENE_MAX_CELLS] = {0}, caption[SCENE_MAX_CELLS], ids[SCENE_MAX_CELLS];
    for (int i = 0; i < n; i++) {
        const int *items = s.items + (size_t)i * cells;
        char text[160];
        int len = snprintf(text, sizeof text, "%s:", name);
        for (int k = 0; k < cells; k++) {
            if (items[k] >= 0) len += snprintf(text + len, sizeof text - (size_t)len, " %d", items[k]);
            else len += snprintf(text + len, sizeof text - (size_t)len, " -");
        }
        int n_words = scene_caption(s.labels + (size_t)i * cells, grid, caption);
        for (int w = 0; w < n_words; w++) ids[w] = vocab_id(words, scene_words[caption[w]]);
        /* the source holds no tokens (the image is in values); its length is the item count */
        Example *e = &split->ex[i];
        example_init(e, text, zeros, n_words, 1);
        example_set_ref(e, 0, ids, n_words);
        e->values = store + canvas * i;
    }
    scene_set_free(&s);
    return 0;
}

int scene_dataset(Dataset *d, const FashionMnist *fm, int grid, int n_train, int n_valid, int n_test, uint64_t seed) {
    memset(d, 0, sizeof *d);
    if (n_train < 1 || n_valid < 1 || n_test < 1)
        return fail("scene counts %d / %d / %d: expected at least 1 of each", n_train, n_valid, n_test);
    if (grid < 2 || grid > SCENE_MAX_GRID) return fail("grid %d: expected 2 (56 x 56 scenes) or 3 (84 x 84)", grid);
    snprintf(d->task, sizeof d->task, "scenes%dx%d", grid, grid);
    vocab_init(&d->src_vocab);
    vocab_init(&d->tgt_vocab);
    for (int c = 0; c < FASHION_MNIST_CLASSES; c++)
        if (vocab_add(&d->tgt_vocab, scene_words[c]) < 0) return -1;
    d->tgt_sep = " ";
    d->src_sep = " ";
    d->src_len_name = "items in the scene";
    const int side = SCENE_CELL * grid;
    d->value_size = side * side;
    const size_t canvas = (size_t)side * side;
    d->value_store = xmalloc(sizeof(float) * canvas * ((size_t)n_train + n_valid + n_test));
    float *store = d->value_store;
    if (make_split(&d->train, store, &d->tgt_vocab, &fm->train, "train", fm->background, grid, n_train, seed) < 0 ||
        make_split(&d->valid, store + canvas * n_train, &d->tgt_vocab, &fm->valid, "valid", fm->background, grid,
                   n_valid, seed + 1) < 0 ||
        make_split(&d->test, store + canvas * ((size_t)n_train + n_valid), &d->tgt_vocab, &fm->test, "test",
                   fm->background, grid, n_test, seed + 2) < 0) {
        dataset_free(d);
        return -1;
    }
    d->max_src_len = grid * grid;
    d->max_tgt_len = grid * grid;
    return 0;
}

/* list "12,-,345,7" -> index[cells] (-1: empty). Every item between commas
 * counts, the last one too: "1,2,3,4," ends in an empty item. */
static int parse_cells(const char *list, int grid, int *index) {
    const int cells = grid * grid;
    int n = 0;
    for (const char *s = list; n <= cells;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        char item[32];
        if (len == 0 || len >= sizeof item)
            return fail("--compose '%s': item %d is %s (expected test-image indices or -, separated by single commas)",
                        list, n + 1, len == 0 ? "empty" : "too long");
        memcpy(item, s, len);
        item[len] = '\0';
        char *end = item;
        long v = strcmp(item, "-") == 0 ? -1 : isdigit((unsigned char)item[0]) ? strtol(item, &end, 10) : -1;
        if (strcmp(item, "-") != 0 && (end == item || *end || v < 0 || v > 9999))
            return fail("--compose: '%s' is not a test-image index 0..9999 or - (an empty cell)", item);
        if (n < cells) index[n] = (int)v;
        n++;
        if (!comma) break;
        s = comma + 1;
    }
    if (n != cells) return fail("--compose '%s': %d cells for --grid %d, expected %d", list, n, grid, cells);
    return 0;
}

int scene_compose_pgm(const char *list, int grid, const char *data_dir, const char *path, int *words) {
    if (grid < 2 || grid > SCENE_MAX_GRID) return fail("grid %d: expected 2 (56 x 56 scenes) or 3 (84 x 84)", grid);
    const int cells = grid * grid;
    int index[SCENE_MAX_CELLS];
    if (parse_cells(list, grid, index) < 0) return -1;
    FashionMnist fm;
    if (fashion_mnist_load(&fm, data_dir, 0) < 0) return -1;
    for (int k = 0; k < cells; k++)
        if (index[k] >= fm.test.n) {
            fail("--compose: there is no test image %d: the test set in %s holds %d images (0 to %d)", index[k],
                 data_dir ? data_dir : FASHION_MNIST_DIR, fm.test.n, fm.test.n - 1);
            fashion_mnist_free(&fm);
            return -1;
        }
    const float *images[SCENE_MAX_CELLS];
    int labels[SCENE_MAX_CELLS];
    for (int k = 0; k < cells; k++) {
        images[k] = index[k] >= 0 ? fm.test.images + (size_t)index[k] * FASHION_MNIST_PIXELS : NULL;
        labels[k] = index[k] >= 0 ? fm.test.labels[index[k]] : -1;
    }
    const int side = SCENE_CELL * grid;
    float *canvas = xmalloc(sizeof(float) * (size_t)side * side);
    scene_compose(canvas, grid, images, 0.0f);
    const int rc = pgm_write(path, canvas, side, side);
    free(canvas);
    fashion_mnist_free(&fm);
    return rc < 0 ? -1 : scene_caption(labels, grid, words);
}

const ConfigField SCENE_CONFIG_FIELDS[] = {
    {"grid", CONFIG_INT, offsetof(SceneConfig, grid), .lo = 2, .hi = SCENE_MAX_GRID},
    {"train_scenes", CONFIG_INT, offsetof(SceneConfig, n_train), .lo = 1, .hi = 1000000},
    {"valid_scenes", CONFIG_INT, offsetof(SceneConfig, n_valid), .lo = 1, .hi = 1000000},
    {"test_scenes", CONFIG_INT, offsetof(SceneConfig, n_test), .lo = 1, .hi = 1000000},
    {"data_seed", CONFIG_INT, offsetof(SceneConfig, seed), .lo = 0, .hi = 2147483647},
};
const int SCENE_CONFIG_N = (int)(sizeof SCENE_CONFIG_FIELDS / sizeof SCENE_CONFIG_FIELDS[0]);

int scene_dataset_make(Dataset *d, const SceneConfig *c, const char *data_dir, SceneScale *scale) {
    memset(d, 0, sizeof *d);
    FashionMnist fm;
    if (fashion_mnist_load(&fm, data_dir, 1) < 0) return -1;
    if (scale) *scale = (SceneScale){fm.mean, fm.std, fm.normalized};
    int rc = scene_dataset(d, &fm, c->grid, c->n_train, c->n_valid, c->n_test, (uint64_t)c->seed);
    fashion_mnist_free(&fm);
    return rc;
}
