/* scene.h - chapter 07, captioning: scenes of Fashion-MNIST items and their
 * captions, the data of the captioning experiment (main_caption.c).
 *
 * A scene is a square canvas cut into grid x grid cells of 28 x 28 pixels
 * (grid 2: 56 x 56, grid 3: 84 x 84). Each cell is empty (background) or
 * holds one Fashion-MNIST image. Its caption names the items in READING
 * ORDER, left to right and top to bottom, empty cells skipped:
 *
 *     +---------+---------+
 *     |  bag    |         |
 *     +---------+---------+        caption: "bag sneaker coat"
 *     | sneaker |  coat   |
 *     +---------+---------+
 *
 * The word order is what forces a captioner to look in different places: the
 * first word is about the first occupied cell, the second about the next
 * one, and which cells are occupied changes from scene to scene, so a word's
 * place in the caption does not fix a place in the image. One word per class
 * (scene_words: "tshirt", "trouser", ..., "boot").
 *
 * Scenes come from a seed: the same seed and source split give the same
 * scenes, bit for bit. Training scenes use images of the training split
 * only, validation scenes the validation split, test scenes the official test
 * split, so no test scene shows an item a model was trained on.
 *
 * Letters: grid cells per side; side = 28 grid pixels; the canvas [side, side]
 * row-major, like a Fashion-MNIST image. */
#ifndef SCENE_H
#define SCENE_H
#include <stdint.h>
#include "data/dataset.h"
#include "data/fashion_mnist.h"
#include "io/config.h"

#define SCENE_CELL FASHION_MNIST_ROWS   /* 28: a cell is one item's image */
#define SCENE_MAX_GRID 3
#define SCENE_MAX_CELLS (SCENE_MAX_GRID * SCENE_MAX_GRID)

/* The caption words, one per class (index = Fashion-MNIST label). */
extern const char *const scene_words[FASHION_MNIST_CLASSES];

typedef struct {
    int grid;        /* cells per side: 2 or 3 */
    int side;        /* canvas side in pixels: 28 grid */
    int n;           /* scenes */
    float *pixels;   /* [n, side, side] the canvases, in the source images' scale */
    int *items;      /* [n, grid grid] each cell's image: an index into the source split, -1 empty */
    int *labels;     /* [n, grid grid] each cell's class 0..9, -1 empty */
} SceneSet;

/* n scenes of grid x grid cells (grid 2 or 3, n >= 1) from the images of
 * split src, from seed: each cell is empty with probability 1/3 (a scene has
 * at least one item), else holds an image drawn uniformly from src; empty
 * pixels get background (FashionMnist.background). Returns 0, or -1 with
 * fail() for a bad grid or count, or an empty split. */
int scene_set_make(SceneSet *s, const ImageSplit *src, float background, int grid, int n, uint64_t seed);
void scene_set_free(SceneSet *s);

/* Paint one canvas [28 grid, 28 grid]: cell k (reading order) gets image
 * cells[k] [28, 28], or background when cells[k] is NULL. */
void scene_compose(float *canvas, int grid, const float *const *cells, float background);

/* The caption of cells labels[grid grid] (-1 empty): the classes of the
 * occupied cells in reading order, into words[] (room for grid grid).
 * Returns the number of words. */
int scene_caption(const int *labels, int grid, int *words);

/* The captioning data set for a Seq2Seq (model/seq2seq.h), an image
 * task: d->value_size = side side floats per example (the canvas), targets
 * the caption as word ids (the target vocabulary: the four specials, then
 * scene_words in class order), src_len the number of items (the driver's
 * table of exact match by length reads "items in the scene"), src_text a
 * line naming the split and the source images. Train, validation and test
 * scenes from fm's train, valid and test splits, seeds seed, seed + 1,
 * seed + 2. Returns 0, or -1 with fail() (d then empty). */
int scene_dataset(Dataset *d, const FashionMnist *fm, int grid, int n_train, int n_valid, int n_test, uint64_t seed);

/* A scene of chosen test images, for a user to caption (07_caption
 * --compose): list names grid grid cells in reading order, each a test-image
 * index 0..9999 or - (an empty cell), separated by single commas
 * ("12,-,345,7"). The images come from the Fashion-MNIST files in data_dir
 * (NULL: FASHION_MNIST_DIR), in their own scale (ink white on black, as the
 * data set draws them); the canvas [28 grid, 28 grid] is written to path as
 * a PGM, and words[] (room for grid grid) gets its caption (class ids).
 * Returns the number of words, or -1 with fail() naming the bad item or the
 * index past the test set. */
int scene_compose_pgm(const char *list, int grid, const char *data_dir, const char *path, int *words);

/* What a captioning data set is made of: the grid, the number of scenes
 * per split and their seed (the checkpoint records them, so --load rebuilds
 * the same scenes). Its fields as checkpoint lines (io/config.h): grid,
 * train_scenes, valid_scenes, test_scenes, data_seed. */
typedef struct {
    int grid;                     /* cells per side: 2 or 3 */
    int n_train, n_valid, n_test; /* scenes per split */
    int seed;                     /* the training scenes' seed (validation: seed + 1, test: seed + 2) */
} SceneConfig;
extern const ConfigField SCENE_CONFIG_FIELDS[];
extern const int SCENE_CONFIG_N;

/* The training images' statistics, for a user's image: x = (ink - mean) / std. */
typedef struct {
    float mean, std;
    int normalized;
} SceneScale;

/* The data set c describes, from the Fashion-MNIST files in data_dir (NULL:
 * FASHION_MNIST_DIR), normalised; scale (may be NULL) gets the training
 * images' statistics. Returns 0, or -1 with fail(). */
int scene_dataset_make(Dataset *d, const SceneConfig *c, const char *data_dir, SceneScale *scale);

#endif
