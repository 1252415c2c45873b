/* main_caption.c - chapter 07's second program (build/07_caption): image
 * captioning with attention, on scenes of Fashion-MNIST items (scene.h).
 *
 *   ./build/07_caption                                   the quick default (make run-07)
 *   ./build/07_caption --model pool|attend|transformer   one of the three captioners (caption.h)
 *   ./build/07_caption --grid 3                          84 x 84 scenes of 3 x 3 cells
 *   ./build/07_caption --load out/07_caption/model.ckpt  evaluate a saved model (test scenes, pictures)
 *   ./build/07_caption --load ...ckpt --image my_scene.pgm   caption your own scene, one panel per word
 *   ./build/07_caption --compose 12,-,345,7 --to my_scene.pgm
 *                        a scene of test images 12, 345 and 7 (- is an empty cell), in reading order
 *
 * The three models share the ViT's encoder and differ only in how the
 * decoder reads it: pooled to one vector (chapter 01), additive attention over
 * the grid (chapter 02, Show-Attend-Tell), cross-attention (chapter 06).
 * Flags, training, evaluation (exact caption match, per-word accuracy, by the
 * number of items), the checkpoint and --load are the seq2seq driver's
 * (common/train/seq2seq.h), which reads images here instead of tokens; the
 * pictures are caption_pictures.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "07_vision_transformer/caption.h"
#include "07_vision_transformer/caption_pictures.h"
#include "07_vision_transformer/scene.h"
#include "io/args.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "io/pgm.h"
#include "io/results.h"
#include "train/seq2seq.h"
#include "util/error.h"
#include "util/util.h"
#include "util/output.h"

static struct {
    const char *model, *data, *image, *compose, *to;
    CaptionConfig caption;   /* the model's sizes (caption.h); its kind from --model */
    SceneConfig scenes;      /* the data (scene.h) */
    int pictures;
} flags = {
    .model = "attend",
    .caption = {.P = 7, .D = 64, .layers = 2, .heads = 4, .ff = 128, .dec_layers = 1, .D_E = 32, .S = 64, .D_A = 32},
    .scenes = {.grid = 2, .n_train = 20000, .n_valid = 500, .n_test = 2000, .seed = 1},
    .pictures = 3,
};

/* the training images' statistics, for a user's image (set by load_data) */
static SceneScale scale;

/* The checkpoint's text: model=, task=, the model's lines, the scenes' lines. */
static int write_config(char *config, int cap) {
    if (flags.image || flags.to) return fail("--image goes with --load CKPT; --to with --compose");
    const int grid = flags.scenes.grid;
    if (caption_kind_from_name(flags.model, &flags.caption.kind) < 0) return -1;
    flags.caption.side = SCENE_CELL * grid;
    if (config_append(config, (size_t)cap, "model=%s\ntask=scenes%dx%d\n", CAPTION_MODEL_NAME, grid, grid) < 0 ||
        config_write(config, (size_t)cap, CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &flags.caption) < 0)
        return -1;
    return config_write(config, (size_t)cap, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, &flags.scenes);
}

/* The scenes the config names (train, validation, test), from Fashion-MNIST;
 * its task line must name the same grid. */
static int load_data(Dataset *d, const char *config) {
    SceneConfig sc;
    char task[64], expected[32];
    if (config_read(config, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, &sc) < 0 ||
        config_get(config, "task", task, sizeof task) < 0)
        return -1;
    snprintf(expected, sizeof expected, "scenes%dx%d", sc.grid, sc.grid);
    if (strcmp(task, expected) != 0)
        return fail("task=%s: expected %s (grid=%d), the scenes this program captions", task, expected, sc.grid);
    return scene_dataset_make(d, &sc, flags.data, &scale);
}

/* The captioner the config names, for data set d. */
static int build(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    CaptionConfig cfg = {0};
    if (config_read(config, CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &cfg) < 0) return -1;
    return caption_build(m, d, &cfg, max_batch, seed);
}

/* The caption of scene e, as text (for the pictures' titles). */
static void truth_text(const Dataset *d, const Example *e, char *out, int cap) {
    vocab_decode(&d->tgt_vocab, e->tgt, e->tgt_len, " ", out, cap);
}

/* After the evaluation: a few test scenes with their panels. */
static int after_eval(Seq2Seq *m, const Dataset *d, const char *out_dir, Results *res) {
    const Caption *c = m->self;
    results_set_str(res, "variant", caption_kind_name(c->cfg.kind));   /* the results table's model column */
    if (flags.pictures > 0) printf("\nTest scenes, captioned (one panel per word):\n");
    for (int i = 0; i < flags.pictures && i < d->test.n; i++) {
        const Example *e = &d->test.ex[i];
        char stem[1024], label[64], truth[256];
        if (path_format(stem, sizeof stem, "%s/caption_test%d", out_dir, i) < 0) return -1;
        snprintf(label, sizeof label, "test scene %d", i);
        truth_text(d, e, truth, sizeof truth);
        if (caption_draw_one(m, d, e->values, c->cfg.side, c->cfg.P, scale.normalized, scale.mean, scale.std, stem,
                             label, truth) < 0)
            return -1;
    }
    return 0;
}

/* --load CKPT --image FILE: caption the user's scene. */
static int use_loaded(Seq2Seq *m, const Dataset *d, const char *out_dir) {
    if (!flags.image) return 0;
    const Caption *c = m->self;
    const int side = c->cfg.side;
    PgmImage pgm;
    if (pgm_read(&pgm, flags.image) < 0) return -1;
    float *ink = xmalloc(sizeof(float) * (size_t)side * side), *image = xmalloc(sizeof(float) * (size_t)side * side);
    image_resize_area(ink, side, side, pgm.pixels, pgm.height, pgm.width);
    if (pgm.width != side || pgm.height != side)
        printf("  (%s is %d x %d: scaled to the model's %d x %d)\n", flags.image, pgm.width, pgm.height, side, side);
    pgm_free(&pgm);
    for (int i = 0; i < side * side; i++) image[i] = scale.normalized ? (ink[i] - scale.mean) / scale.std : ink[i];
    const char *base = strrchr(flags.image, '/');
    char name[200], stem[1024];
    snprintf(name, sizeof name, "%s", base ? base + 1 : flags.image);   /* (a long name: its first 199 bytes) */
    char *dot = strrchr(name, '.');
    if (dot) *dot = '\0';
    int rc = make_dirs(out_dir);
    if (rc == 0) rc = path_format(stem, sizeof stem, "%s/caption_%s", out_dir, name);
    if (rc == 0) rc = caption_draw_one(m, d, image, side, c->cfg.P, scale.normalized, scale.mean, scale.std, stem,
                                       name, NULL);
    free(ink);
    free(image);
    return rc < 0 ? -1 : 1;
}

/* --compose I,J,..: a scene PGM of test images (ink white on black, as the data set). */
static int compose(int argc, char **argv) {
    const ArgSpec specs[] = {
        {"compose", ARG_STRING, &flags.compose, "test-image indices in reading order, - for an empty cell", 0, 0, NULL, ARG_OUTPUT},
        {"to", ARG_STRING, &flags.to, "the PGM file to write", 0, 0, NULL, ARG_OUTPUT},
        {"grid", ARG_INT, &flags.scenes.grid, "cells per side", 2, SCENE_MAX_GRID, NULL, ARG_OUTPUT},
        {"data", ARG_STRING, &flags.data, "directory of the Fashion-MNIST files", 0, 0, NULL, ARG_DATA},
    };
    int rc = args_parse(argc, argv, specs, 4);
    if (rc == 1) {
        args_print_help(argv[0], "Compose a scene PGM from Fashion-MNIST test images.", specs, 4,
                        "./build/07_caption --compose 1,2,-,4 --to scene.pgm");
        return 0;
    }
    if (rc < 0) goto error;
    if (!flags.to) { fail("--compose needs --to FILE.pgm (where to write the scene)"); goto error; }
    const int cells = flags.scenes.grid * flags.scenes.grid;
    int index[SCENE_MAX_CELLS], n = 0;
    /* every item between commas, the last one too: "1,2,3,4," ends in an empty item */
    for (const char *s = flags.compose; n <= cells;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        char item[32];
        if (len == 0 || len >= sizeof item) {
            fail("--compose '%s': item %d is %s (expected test-image indices or -, separated by single commas)",
                 flags.compose, n + 1, len == 0 ? "empty" : "too long");
            goto error;
        }
        memcpy(item, s, len);
        item[len] = '\0';
        char *end = item;
        long v = strcmp(item, "-") == 0 ? -1 : isdigit((unsigned char)item[0]) ? strtol(item, &end, 10) : -1;
        if (strcmp(item, "-") != 0 && (end == item || *end || v < 0 || v > 9999)) {
            fail("--compose: '%s' is not a test-image index 0..9999 or - (an empty cell)", item);
            goto error;
        }
        if (n < cells) index[n] = (int)v;
        n++;
        if (!comma) break;
        s = comma + 1;
    }
    if (n != cells) {
        fail("--compose '%s': %d cells for --grid %d, expected %d", flags.compose, n, flags.scenes.grid, cells);
        goto error;
    }
    FashionMnist fm;
    if (fashion_mnist_load(&fm, flags.data, 0) < 0) goto error;
    for (int k = 0; k < cells; k++)
        if (index[k] >= fm.test.n) {
            fail("--compose: there is no test image %d: the test set in %s holds %d images (0 to %d)", index[k],
                 flags.data ? flags.data : FASHION_MNIST_DIR, fm.test.n, fm.test.n - 1);
            fashion_mnist_free(&fm);
            goto error;
        }
    const float *images[SCENE_MAX_CELLS];
    int labels[SCENE_MAX_CELLS], words[SCENE_MAX_CELLS];
    for (int k = 0; k < cells; k++) {
        images[k] = index[k] >= 0 ? fm.test.images + (size_t)index[k] * FASHION_MNIST_PIXELS : NULL;
        labels[k] = index[k] >= 0 ? fm.test.labels[index[k]] : -1;
    }
    const int side = SCENE_CELL * flags.scenes.grid;
    float *canvas = xmalloc(sizeof(float) * (size_t)side * side);
    scene_compose(canvas, flags.scenes.grid, images, 0.0f);
    rc = pgm_write(flags.to, canvas, side, side);
    free(canvas);
    fashion_mnist_free(&fm);
    if (rc < 0) goto error;
    int n_words = scene_caption(labels, flags.scenes.grid, words);
    printf("wrote %s (%d x %d); its caption: ", flags.to, side, side);
    for (int w = 0; w < n_words; w++) printf("%s%s", w ? " " : "", scene_words[words[w]]);
    printf("\n");
    return 0;
error:
    fprintf(stderr, "07_caption: error: %s\n", last_error());
    return 1;
}

/* The program; main() below adds the check that its output was written. */
static int run(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--compose") == 0 || strncmp(argv[i], "--compose=", 10) == 0) return compose(argc, argv);
    const ArgSpec model_args[] = {
        {"model", ARG_STRING, &flags.model, "decoder: pool (no attention), attend (ch. 02), transformer (ch. 06)", 0, 0, "pool,attend,transformer", ARG_MODEL},
        {"grid", ARG_INT, &flags.scenes.grid, "cells per scene side: 2 (56 x 56 scenes) or 3 (84 x 84)", 2, SCENE_MAX_GRID, NULL, ARG_DATA},
        {"patch", ARG_INT, &flags.caption.P, "patch side P (divides 28: 4, 7, 14)", 1, 28, NULL, ARG_MODEL},
        {"dim", ARG_INT, &flags.caption.D, "encoder width D (and model 3's decoder's)", 4, 1024, NULL, ARG_MODEL},
        {"layers", ARG_INT, &flags.caption.layers, "encoder blocks L", 1, STACK_MAX_LAYERS, NULL, ARG_MODEL},
        {"heads", ARG_INT, &flags.caption.heads, "attention heads H (divides --dim)", 1, 64, NULL, ARG_MODEL},
        {"ff", ARG_INT, &flags.caption.ff, "MLP width F", 1, 8192, NULL, ARG_MODEL},
        {"dec-layers", ARG_INT, &flags.caption.dec_layers, "model 3: decoder blocks", 1, STACK_MAX_LAYERS, NULL, ARG_MODEL},
        {"embed", ARG_INT, &flags.caption.D_E, "models 1-2: word embedding D_E", 1, 4096, NULL, ARG_MODEL},
        {"state", ARG_INT, &flags.caption.S, "models 1-2: GRU state S", 1, 4096, NULL, ARG_MODEL},
        {"hidden", ARG_REFUSED, NULL, "the GRU state S is --state", 0, 0, NULL, ARG_MODEL},
        {"attn", ARG_INT, &flags.caption.D_A, "model 2: additive attention width D_A", 1, 4096, NULL, ARG_MODEL},
        {"train-scenes", ARG_INT, &flags.scenes.n_train, "training scenes (from the 55,000 training images)", 1, 1000000, NULL, ARG_DATA},
        {"valid-scenes", ARG_INT, &flags.scenes.n_valid, "validation scenes (from the 5,000 validation images)", 1, 1000000, NULL, ARG_DATA},
        {"test-scenes", ARG_INT, &flags.scenes.n_test, "test scenes (from the 10,000 test images)", 1, 1000000, NULL, ARG_DATA},
        {"data-seed", ARG_INT, &flags.scenes.seed, "seed of the scenes", 0, 2147483647, NULL, ARG_DATA},
        {"data", ARG_STRING, &flags.data, "Fashion-MNIST directory (default " FASHION_MNIST_DIR ")", 0, 0, NULL, ARG_DATA},
        {"pictures", ARG_INT, &flags.pictures, "test scenes drawn with one panel per word", 0, 50, NULL, ARG_OUTPUT},
        {"image", ARG_STRING, &flags.image, "with --load: caption this PGM scene (light items on black)", 0, 0, NULL, ARG_OUTPUT},
        {"compose", ARG_STRING, &flags.compose, "write a scene of test images I,J,.. (- empty) and stop", 0, 0, NULL, ARG_OUTPUT},
        {"to", ARG_STRING, &flags.to, "with --compose: the PGM file to write", 0, 0, NULL, ARG_OUTPUT},
    };
    ChapterSpec spec = {
        .chapter = "07_caption",
        .model_name = CAPTION_MODEL_NAME,
        .summary = "Chapter 07, captioning: scenes of Fashion-MNIST items captioned in reading order (\"bag coat\"):\n"
                   "a ViT encoder, and a decoder that pools, attends (chapter 02) or cross-attends (chapter 06).",
        .examples = "./build/07_caption\n"
                    "./build/07_caption --model transformer --grid 3\n"
                    "./build/07_caption --compose 1,2,-,4 --to scene.pgm\n"
                    "./build/07_caption --load out/07_caption/model.ckpt --image scene.pgm",
        .model_args = model_args,
        .n_model_args = (int)(sizeof model_args / sizeof model_args[0]),
        .write_config = write_config,
        .build = build,
        .default_steps = 1500,
        .default_batch = 32,
        .default_lr = 2e-3f,
        .load_data = load_data,
        .load_flags = "image,data,pictures",
        .use_loaded = use_loaded,
        .after_eval = after_eval,
    };
    return seq2seq_main(argc, argv, &spec);
}

int main(int argc, char **argv) {
    output_guard();
    return output_exit_status("07_caption", run(argc, argv));
}
