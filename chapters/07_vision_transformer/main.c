/* main.c - chapter 07: the Vision Transformer on Fashion-MNIST.
 *
 *   ./build/07_vision_transformer                      the quick default (make run-07)
 *   ./build/07_vision_transformer --preset long        the long run (70 minutes with AVX-512, ~2.3 h without)
 *   ./build/07_vision_transformer --preset long-d96    the previous long run (70 minutes with AVX-512, ~2.6 h without)
 *   ./build/07_vision_transformer --patch 14,7,4 --steps 600   the patch-size table
 *   ./build/07_vision_transformer --load out/07_vision_transformer/model_vit_p7.ckpt
 *                                  evaluate a saved model (validation and test) and draw its
 *                                  pictures into out/07_vision_transformer/eval_model_vit_p7/
 *   ./build/07_vision_transformer --load ...ckpt --index 42       test image 42: top 3, where it looked
 *   ./build/07_vision_transformer --load ...ckpt --image shoe.pgm your own picture (PGM, any size)
 *
 * The program, top to bottom: the flags (a preset puts its flags in front
 * of yours); with --load, the saved model's figures and pictures, and done;
 * otherwise the data, then one ViT (vit.h) per --patch size built, trained,
 * tested on the official 10,000 test images, saved and drawn (pictures.c:
 * validation accuracy, attention maps and rollout, positions, confusion
 * matrix); then the results table, the patch-size table and results.json.
 * Each step is a call of the classifier driver (common/train/classifier.h;
 * the training runs train/loop.h's train_loop). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "07_vision_transformer/pictures.h"
#include "07_vision_transformer/recipe.h"
#include "07_vision_transformer/vit.h"
#include "data/fashion_mnist.h"
#include "io/checkpoint.h"
#include "train/classifier.h"
#include "util/error.h"
#include "util/output.h"

/* The presets. quick (make run-07): patch 7, 2 blocks of D 64, 5,000 steps
 * of 128 images (11.6 epochs); at this budget the epochs matter more than
 * the depth (4 blocks for 1,500 steps: 87.1% test, 2 for 4,000: 88.1%).
 * The long ones share patch 4 read through overlapping 8 x 8 kernels, 6
 * blocks, augmentation, AdamW with decay, the moving average of the weights,
 * and a batch split between two replicas, one per core (1.4x the images per
 * second). long: D 128, paid for by patch dropout (20 of 49 patches kept)
 * and read by mean pooling, 45,000 steps, 68-70 minutes with AVX-512 (about
 * 94.2% validation, 93.7-93.8% test). long-d96: the previous one, D 96 on
 * whole images, 33,000 steps (93.44% validation, 92.63% test). Warm-up is
 * steps / 20 and a point of the loss curve every steps / 50, as before the
 * shared loop. The chapter's README ("The long preset") gives the runs
 * behind these choices and what was tried beside them. */
#define LONG_RECIPE "--patch 4 --kernel 8 --layers 6 --heads 4 --augment --dropout 0 --batch 128 --lr 1.5e-3 " \
                    "--weight-decay 0.05 --replicas 2 --ema 0.9995"
static const ClassifierPreset PRESETS[] = {
    {"quick", ""},
    {"long", LONG_RECIPE " --dim 128 --ff 256 --pool mean --keep 0.4 --shift 1 --steps 45000 --warmup 2250 "
             "--eval-every 900"},
    {"long-d96", LONG_RECIPE " --dim 96 --ff 192 --shift 2 --steps 33000 --warmup 1650 --eval-every 660"},
};

static const ClassifierProgram PROGRAM = {
    .chapter = "07_vision_transformer",
    .model_name = VIT_MODEL_NAME,
    .summary = "Chapter 07: the Vision Transformer on Fashion-MNIST, P x P patches through chapter 06's encoder.",
    .examples = "./build/07_vision_transformer\n"
                "./build/07_vision_transformer --load out/07_vision_transformer/model_vit_p7.ckpt "
                "--image chapters/07_vision_transformer/img/example_box.pgm",
    .load_hint = "--index 0, or --image FILE.pgm",
    .presets = PRESETS,
    .n_presets = (int)(sizeof PRESETS / sizeof PRESETS[0]),
};

/* The augmentation's lines of the checkpoint, after its seed= line
 * (augment_erase came later: a checkpoint without it was trained without). */
static const ConfigField AUGMENT_FIELDS[] = {
    {"augment_shift", CONFIG_INT, offsetof(FashionMnistTask, max_shift), .lo = 0, .hi = 8},
    {"augment_flip", CONFIG_INT, offsetof(FashionMnistTask, flip), .lo = 0, .hi = 1},
    {"augment_erase", CONFIG_FLOAT, offsetof(FashionMnistTask, erase), .lo = 0, .hi = 1, .fallback = "0"},
};
#define AUGMENT_N ((int)(sizeof AUGMENT_FIELDS / sizeof AUGMENT_FIELDS[0]))

static FashionMnist data;
#define MAX_PATCHES 3   /* --patch: patch sides, a model each */

/* One model: built (with --replicas, a replica per slice of a batch, each
 * drawing its own dropout from seed + k), trained (with --ema, the moving
 * average then takes the last weights' place), tested, saved, drawn. */
static int train_one(ClassifierRuns *runs, const RecipeFlags *recipe, int i, const VitConfig *c, const ExampleTask *t,
                     int n_pictures) {
    const ClassifierFlags *f = &runs->flags;
    ClassifierRun *run = &runs->run[i];
    ClassifierResult *r = &runs->result[i];
    Classifier m[RECIPE_MAX_REPLICAS];
    const int n = recipe->replicas, max_B = (f->shared.batch + n - 1) / n;
    int built = 0, rc = 0;
    while (rc == 0 && built < n)
        if ((rc = vit_build(&m[built], c, max_B, (uint64_t)f->shared.seed + (uint64_t)built)) == 0) built++;
    WeightAverage average = {0};
    if (rc == 0) printf("  %s: %zu parameters\n", run->label, m[0].params->size);
    if (rc == 0 && recipe->ema > 0) rc = weight_average_init(&average, m[0].params, recipe->ema);
    if (rc == 0)
        rc = recipe_train(m, recipe, t, &f->shared.train, f->shared.batch, recipe->ema > 0 ? &average : NULL,
                          (uint64_t)f->shared.seed, r);
    for (int k = 1; k < built; k++) m[k].destroy(m[k].self);   /* the trained model is m[0] */
    if (rc == 0 && recipe->ema > 0) rc = recipe_use_average(runs, run, &m[0], t, &average, recipe->ema, r);
    weight_average_free(&average);
    if (rc == 0) classifier_test(runs, &m[0], t, r);
    if (rc == 0) rc = classifier_save(runs, run, &m[0], r);
    if (rc == 0) rc = classifier_show_first_test_example(runs, run, &m[0], t);
    if (rc == 0)
        rc = vit_pictures_after_training(f->shared.out, run->key, run->label, f->shared.train.steps,
                                         f->shared.batch, r->seconds,
                                         vit_of(&m[0]), &m[0], t, &data, n_pictures, &runs->results);
    if (built > 0) m[0].destroy(m[0].self);
    return rc;
}

/* --load: the saved model (its configuration and augmentation are its
 * checkpoint's): one image (--image, --index), or its accuracies and every
 * picture, drawn into the evaluation directory. */
static int use_saved_model(ClassifierRuns *runs, const char *data_dir, const char *image, int index,
                           int n_pictures) {
    VitConfig c;
    FashionMnistTask ft = {.d = &data};
    ExampleTask t;
    Classifier m;
    char task[64];
    if (classifier_read_config(runs, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &c) < 0 ||
        config_get(runs->config, "task", task, sizeof task) < 0)
        return -1;
    if (strcmp(task, "fashion_mnist") != 0)
        return fail("task=%s: expected fashion_mnist, the one data set of this chapter", task);
    if (config_read(runs->config, AUGMENT_FIELDS, AUGMENT_N, &ft) < 0 || fashion_mnist_load(&data, data_dir, 1) < 0)
        return -1;
    fashion_mnist_task(&ft, &t);
    if (vit_build(&m, &c, runs->flags.shared.batch, 0) < 0) return -1;
    int rc = classifier_load_weights(runs, &m, &t);
    const char *base = strrchr(runs->flags.shared.load, '/');
    char label[160];
    snprintf(label, sizeof label, "%.150s", base ? base + 1 : runs->flags.shared.load);
    if (rc == 0 && (image || index >= 0)) rc = vit_classify_one(runs->flags.shared.out, vit_of(&m), &data, image,
                                                                index);
    else if (rc == 0)
        rc = vit_pictures_after_training(runs->flags.shared.out, "loaded", label, 0, runs->flags.shared.batch, 0.0,
                                         vit_of(&m), &m,
                                         &t, &data, n_pictures, NULL);
    m.destroy(m.self);
    return rc;
}

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration, the data's and the pictures'
     *    (defaults here), then the flags every such program shares. */
    VitConfig c = {.patch = {.channels = 1, .rows = FASHION_MNIST_ROWS, .cols = FASHION_MNIST_COLS, .D = 64},
                   .layers = 2, .heads = 4, .ff = 128, .classes = FASHION_MNIST_CLASSES, .keep = 1.0f,
                   .keep_until = 1.0f};
    const char *patch_flag = "7", *pool_flag = "cls", *pos_flag = "learned", *data_dir = NULL, *image = NULL;
    const char *norm_flag = "layernorm";
    int augment = 0, shift = 2, index = -1, n_pictures = 4, train_size = 0;
    float erase = 0.0f;
    const ArgSpec model_flags[] = {
        {"patch", ARG_STRING, &patch_flag, "patch side P (4, 7, 14); a list 4,7 trains a model per size", 0, 0, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"kernel", ARG_INT, &c.patch.K, "overlapping patches: each reads K x K pixels (0: K = P)", 0, 28, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"stem", ARG_INT, &c.stem, "a convolutional stem of this many channels (0: none)", 0, 256, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"pool", ARG_STRING, &pool_flag, "what the head reads", 0, 0, "cls,mean,attention",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"pos", ARG_STRING, &pos_flag, "position embeddings", 0, 0, "learned,sinusoidal2d",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"layers", ARG_INT, &c.layers, "transformer blocks L", 1, STACK_MAX_LAYERS, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"dim", ARG_INT, &c.patch.D, "model width D", 4, 1024, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"heads", ARG_INT, &c.heads, "attention heads H (divides --dim)", 1, 64, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"ff", ARG_INT, &c.ff, "MLP width F", 1, 8192, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"norm-type", ARG_STRING, &norm_flag, "the blocks' norms", 0, 0, "layernorm,rmsnorm,batchnorm", ARG_MODEL,
         ARG_TRAINING_ONLY},
        {"locality", ARG_BOOL, &c.locality, "locality self-attention: no token attends to itself, learned scale", 0,
         0, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"linformer", ARG_INT, &c.linformer, "Linformer attention: keys, values projected to K rows (0: full)", 0,
         4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"data", ARG_STRING, &data_dir, "directory of the Fashion-MNIST files", 0, 0, NULL, ARG_DATA,
         ARG_ACTS_WITH_LOAD},
        {"train-size", ARG_INT, &train_size, "train on the first N training images only (0: all 55,000)", 0, 55000,
         NULL, ARG_DATA, ARG_TRAINING_ONLY},
        {"augment", ARG_BOOL, &augment, "random shifts (up to --shift pixels) and mirror images while training", 0,
         0, NULL, ARG_DATA, ARG_TRAINING_ONLY},
        {"shift", ARG_INT, &shift, "largest shift of --augment, in pixels", 0, 8, NULL, ARG_DATA, ARG_TRAINING_ONLY},
        {"erase", ARG_FLOAT, &erase, "random erasing: chance of a noise patch per image", 0, 1, NULL,
         ARG_DATA, ARG_TRAINING_ONLY},
        {"dropout", ARG_FLOAT, &c.dropout, "dropout p on each sublayer's output while training", 0, 0.9, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"drop-path", ARG_FLOAT, &c.drop_path, "stochastic depth: chance to skip the last block", 0, 0.9, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"keep", ARG_FLOAT, &c.keep, "patch dropout: share of patches kept (1: off)", 0.05, 1, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"keep-until", ARG_FLOAT, &c.keep_until, "with --keep: for this share of the steps only", 0.05, 1, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"label-smoothing", ARG_FLOAT, &c.label_smoothing, "label smoothing eps (0: off)", 0, 0.95, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"pictures", ARG_INT, &n_pictures, "test images in the attention picture (0: no pictures)", 0, 16, NULL,
         ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"image", ARG_STRING, &image, "with --load: classify this PGM image and draw where the model looked", 0, 0,
         NULL, ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"index", ARG_INT, &index, "with --load: the same for test image N", -1, 9999, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},
    };
    /* ... and the long training recipe's (recipe.h) */
    RecipeFlags recipe = {.replicas = 1};
    enum { N_MODEL_FLAGS = sizeof model_flags / sizeof model_flags[0] };
    ArgSpec flags[N_MODEL_FLAGS + RECIPE_FLAG_SPECS];
    memcpy(flags, model_flags, sizeof model_flags);
    const int n_flags = N_MODEL_FLAGS + recipe_flag_specs(&recipe, flags + N_MODEL_FLAGS);
    static ClassifierRuns runs;
    classifier_init(&runs, &PROGRAM);
    runs.flags.shared.train.steps = 5000;
    runs.flags.shared.train.lr = 2e-3f;
    runs.flags.shared.train.weight_decay = 0.05f;
    runs.flags.shared.train.warmup = 250;       /* steps / 20, as before the shared loop */
    runs.flags.shared.train.eval_every = 100;   /* steps / 50: a loss curve of 50 points */
    runs.flags.shared.batch = 128;
    runs.flags.test_size = 10000;
    int rc = classifier_parse_flags(&runs, argc, argv, flags, n_flags);
    if (rc == 0 && !runs.flags.shared.load) rc = recipe_flags_check(&recipe, runs.flags.shared.batch);
    if (rc == 0 && runs.flags.shared.load && image && index >= 0) rc = fail("--image and --index: give one of them");
    if (rc == 0 && !runs.flags.shared.load && (image || index >= 0))
        rc = fail("--image and --index go with --load CHECKPOINT");

    /* 2. With --load: the saved model, and done. */
    if (rc == 0 && runs.flags.shared.load)
        return classifier_finish(&runs, use_saved_model(&runs, data_dir, image, index, n_pictures));

    /* 3. The runs: one per patch side (each divides the 28 pixels of a side). */
    int P[MAX_PATCHES], n_patches = rc == 0 ? args_int_list("patch", patch_flag, P, MAX_PATCHES, 28) : 0;
    for (int i = 0; rc == 0 && i < n_patches; i++)
        if (28 % P[i] != 0) rc = fail("--patch: a side of %d does not divide 28 (expected 1, 2, 4, 7, 14 or 28)", P[i]);
    if (rc == 0 && (n_patches < 0 || vit_pool_from_name(pool_flag, &c.pool) < 0 || vit_pos_from_name(pos_flag, &c.pos) < 0))
        rc = -1;
    c.norm = strcmp(norm_flag, "rmsnorm") == 0     ? BLOCK_RMSNORM
             : strcmp(norm_flag, "batchnorm") == 0 ? BLOCK_BATCHNORM
                                                   : BLOCK_LAYERNORM;
    if (rc == 0 && c.keep_until < 1.0f && c.keep >= 1.0f)
        rc = fail("--keep-until %g: it ends patch dropout, which is off: give --keep below 1 too", (double)c.keep_until);
    FashionMnistTask ft = {.d = &data, .max_shift = augment ? shift : 0, .flip = augment, .erase = erase,
                           .train_size = train_size};
    VitConfig configs[MAX_PATCHES];
    for (int i = 0; rc == 0 && i < n_patches; i++) {
        configs[i] = c;
        configs[i].patch.P = P[i];
        char key[24], label[128];
        snprintf(key, sizeof key, "vit_p%d", P[i]);
        vit_config_label(&configs[i], label, sizeof label);
        ClassifierRun *run = classifier_add_run(&runs, key, "%s", label);
        if (!run || classifier_config_text(run, VIT_MODEL_NAME, "fashion_mnist", VIT_CONFIG_FIELDS, VIT_CONFIG_N,
                                           &configs[i], runs.flags.shared.seed) < 0 ||
            config_write(run->config, sizeof run->config, AUGMENT_FIELDS, AUGMENT_N, &ft) < 0)
            rc = -1;
    }

    /* 4. The data: Fashion-MNIST's training images (less 5,000 for validation; with --train-size N
     *    only the first N) and its test images. */
    ExampleTask t;
    if (rc == 0) rc = fashion_mnist_load(&data, data_dir, 1);
    if (rc == 0 && (train_size = fashion_mnist_train_size(&ft)) < 0) rc = -1;
    if (rc == 0 && train_size < data.train.n)
        printf("  training on the first %d of the %d training images\n", train_size, data.train.n);
    if (rc == 0) fashion_mnist_task(&ft, &t);

    /* 5. Training: each model built, trained, tested, saved and drawn. */
    if (rc == 0) classifier_start(&runs);
    if (rc == 0 && recipe.replicas > 1) printf("  %d data-parallel replicas of the model\n", recipe.replicas);
    for (int i = 0; rc == 0 && i < runs.n; i++) rc = train_one(&runs, &recipe, i, &configs[i], &t, n_pictures);

    /* 6. The results table, the loss curves, the patch-size table, results.json. */
    if (rc == 0) rc = classifier_report(&runs);
    if (rc == 0) rc = vit_patch_table_print(runs.flags.shared.out);
    if (rc == 0) recipe_results(&runs.results, &recipe);
    if (rc == 0) results_set_num(&runs.results, "train_size", train_size);
    if (rc == 0) rc = classifier_write_results(&runs);
    return classifier_finish(&runs, rc);
}
