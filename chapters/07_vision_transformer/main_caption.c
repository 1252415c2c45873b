/* main_caption.c - chapter 07's second program (build/07_caption): image
 * captioning with attention, on scenes of Fashion-MNIST items (scene.h).
 *
 *   ./build/07_caption                                   the quick default (make run-07)
 *   ./build/07_caption --model pool|attend|transformer   one of the three captioners (caption.h)
 *   ./build/07_caption --grid 3                          84 x 84 scenes of 3 x 3 cells
 *   ./build/07_caption --encoder cnn --pretrained out/07_cnn/model_cnn.ckpt   a pretrained CNN's grid as the memory
 *   ./build/07_caption --load out/07_caption/model.ckpt  evaluate a saved model (test scenes, pictures)
 *   ./build/07_caption --load ...ckpt --image my_scene.pgm   caption your own scene, one panel per word
 *   ./build/07_caption --compose 12,-,345,7 --to s.pgm    a scene of test images 12, 345, 7 (- empty)
 *
 * The three models share the ViT's encoder (or, with --encoder cnn, chapter
 * 07's CNN, from scratch or pretrained as a classifier of single items) and
 * differ only in how the decoder reads it: pooled to one vector (chapter 01), additive attention over
 * the grid (chapter 02, Show-Attend-Tell), cross-attention (chapter 06).
 * main() reads top to bottom, each step one call: the seq2seq driver's
 * (train/seq2seq.h; its training is train/loop.h's train_loop), the scenes'
 * (scene.c), the model's (caption.c), the pictures' (caption_pictures.c). */
#include <stdio.h>
#include <string.h>

#include "07_vision_transformer/caption.h"
#include "07_vision_transformer/caption_pictures.h"
#include "07_vision_transformer/scene.h"
#include "io/args.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "train/seq2seq.h"
#include "util/error.h"
#include "util/output.h"

static const Seq2SeqProgram PROGRAM = {
    .chapter = "07_caption",
    .model_name = CAPTION_MODEL_NAME,
    .summary = "Chapter 07, captioning: scenes of Fashion-MNIST items captioned in reading order (\"bag coat\").",
    .examples = "./build/07_caption\n"
                "./build/07_caption --model transformer --grid 3\n"
                "./build/07_cnn --out out/07_cnn && "
                "./build/07_caption --encoder cnn --pretrained out/07_cnn/model_cnn.ckpt --freeze-encoder\n"
                "./build/07_caption --compose 1,2,-,4 --to scene.pgm\n"
                "./build/07_caption --load out/07_caption/model.ckpt --image scene.pgm",
    .image_sources = 1,
};

/* The scenes and the first lines of the checkpoint's text. Training: sc's
 * (task=, SCENE_CONFIG_FIELDS' lines, the vocabulary sizes). With --load:
 * the checkpoint's text and its scenes, read into sc. scale: the training
 * images' statistics, for a user's image. */
static int load_scenes(Seq2SeqRun *run, SceneConfig *sc, const char *data_dir, SceneScale *scale) {
    char *text = run->config;
    const char *load = run->flags.shared.load;
    if (load) {
        char task[64], expected[32];
        if (seq2seq_saved_config(run) < 0) return -1;
        if (config_read(text, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, sc) < 0 ||
            config_get(text, "task", task, sizeof task) < 0)
            return fail("%s: %s", load, last_error());
        snprintf(expected, sizeof expected, "scenes%dx%d", sc->grid, sc->grid);
        if (strcmp(task, expected) != 0)
            return fail("%s: task=%s: expected %s (grid=%d), the scenes this program captions", load, task, expected,
                        sc->grid);
        if (scene_dataset_make(&run->data, sc, data_dir, scale) < 0) return fail("%s: %s", load, last_error());
        return seq2seq_check_vocab_sizes(run);
    }
    if (config_append(text, CKPT_CONFIG_MAX, "task=scenes%dx%d\n", sc->grid, sc->grid) < 0 ||
        config_write(text, CKPT_CONFIG_MAX, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, sc) < 0 ||
        scene_dataset_make(&run->data, sc, data_dir, scale) < 0)
        return -1;
    return config_append(text, CKPT_CONFIG_MAX, "src_vocab_size=%d\ntgt_vocab_size=%d\n", run->data.src_vocab.size,
                         run->data.tgt_vocab.size);
}

/* --compose LIST --to FILE: write the scene and print its caption. */
static int compose(const char *list, const char *to, int grid, const char *data_dir) {
    int words[SCENE_MAX_CELLS];
    if (!to) return fail("--compose needs --to FILE.pgm (where to write the scene)");
    const int n = scene_compose_pgm(list, grid, data_dir, to, words);
    if (n < 0) return -1;
    printf("wrote %s (%d x %d); its caption: ", to, SCENE_CELL * grid, SCENE_CELL * grid);
    for (int w = 0; w < n; w++) printf("%s%s", w ? " " : "", scene_words[words[w]]);
    printf("\n");
    return 1;
}

/* --encoder, --filters, --pretrained, --freeze-encoder into cfg; each flag
 * refused where it has no effect. */
static int encoder_flags(CaptionConfig *cfg, const char *encoder, int filters, const char *pretrained, int freeze,
                         int argc, char **argv, float weight_decay) {
    const int cnn = strcmp(encoder, "cnn") == 0;
    cfg->encoder = cnn ? CAPTION_ENCODER_CNN : CAPTION_ENCODER_VIT;
    cfg->filters = cnn ? filters : 0;
    const char *vit_only[] = {"patch", "layers"}, *cnn_only[] = {"filters", "pretrained", "freeze-encoder"};
    for (int i = 0; cnn && i < 2; i++)
        if (args_given(argc, argv, vit_only[i]))
            return fail("--%s is the ViT encoder's: the CNN encoder has two convolutions and one grid position per "
                        "4 x 4 pixels", vit_only[i]);
    for (int i = 0; !cnn && i < 3; i++)
        if (args_given(argc, argv, cnn_only[i])) return fail("--%s goes with --encoder cnn", cnn_only[i]);
    if (freeze && !pretrained) return fail("--freeze-encoder goes with --pretrained CKPT (the convolutions to keep)");
    if (freeze && weight_decay > 0.0f)
        return fail("--freeze-encoder with --weight-decay %g: the decay would shrink the frozen filters; give "
                    "--weight-decay 0", (double)weight_decay);
    if (cnn) cfg->P = 4;   /* the CNN's grid: one position per 4 x 4 pixels (two 2 x 2 pools) */
    return 0;
}

/* results.json: which encoder; after training, how it started and whether it was trained. */
static void encoder_results(Results *r, const CaptionConfig *cfg, const char *pretrained, int freeze, int trained) {
    results_set_str(r, "encoder", cfg->encoder == CAPTION_ENCODER_CNN ? "cnn" : "vit");
    if (!trained) return;
    results_set_str(r, "encoder_start", pretrained ? "pretrained" : "scratch");
    results_set_num(r, "encoder_frozen", freeze);
}

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration and the scenes (their defaults
     *    here), this program's own, then the flags every seq2seq program shares. */
    CaptionConfig cfg = {.P = 7, .D = 64, .layers = 2, .heads = 4, .ff = 128, .dec_layers = 1,
                         .D_E = 32, .S = 64, .D_A = 32};
    SceneConfig scenes = {.grid = 2, .n_train = 20000, .n_valid = 500, .n_test = 2000, .seed = 1};
    const char *model = "attend", *data_dir = NULL, *image = NULL, *list = NULL, *to = NULL;
    const char *encoder = "vit", *pretrained = NULL;
    int pictures = 3, freeze = 0, filters = 8;
    const ArgSpec own[] = {
        {"model", ARG_STRING, &model, "the decoder (ch. 02, ch. 06)", 0, 0,
         "pool,attend,transformer",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"encoder", ARG_STRING, &encoder, "the encoder (the ViT; the CNN's grid)", 0, 0,
         "vit,cnn", ARG_MODEL, ARG_TRAINING_ONLY},
        {"filters", ARG_INT, &filters, "--encoder cnn: filters F of its first convolution", 1, 256, NULL, ARG_MODEL,
         ARG_TRAINING_ONLY},
        {"pretrained", ARG_STRING, &pretrained, "--encoder cnn: start its convolutions from this 07_cnn checkpoint",
         0, 0, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"freeze-encoder", ARG_BOOL, &freeze, "with --pretrained: keep the loaded convolutions fixed", 0, 0, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"grid", ARG_INT, &scenes.grid, "cells per scene side: 2 (56 x 56 scenes) or 3 (84 x 84)", 2,
         SCENE_MAX_GRID, NULL,
         ARG_DATA, ARG_TRAINING_ONLY},
        {"patch", ARG_INT, &cfg.P, "patch side P (divides 28: 4, 7, 14)", 1, 28, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"dim", ARG_INT, &cfg.D, "encoder width D (and model 3's decoder's)", 4, 1024, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"layers", ARG_INT, &cfg.layers, "encoder blocks L", 1, STACK_MAX_LAYERS, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"heads", ARG_INT, &cfg.heads, "attention heads H (divides --dim)", 1, 64, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"ff", ARG_INT, &cfg.ff, "MLP width F", 1, 8192, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"dec-layers", ARG_INT, &cfg.dec_layers, "model 3: decoder blocks", 1, STACK_MAX_LAYERS, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"embed", ARG_INT, &cfg.D_E, "models 1-2: word embedding D_E", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"state", ARG_INT, &cfg.S, "models 1-2: GRU state S", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        args_refused("hidden", "the GRU state S is --state (the letter table's S)"),
        {"attn", ARG_INT, &cfg.D_A, "model 2: additive attention width D_A", 1, 4096, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"train-scenes", ARG_INT, &scenes.n_train, "training scenes (from the 55,000 training images)", 1, 1000000,
         NULL,
         ARG_DATA, ARG_TRAINING_ONLY},
        {"valid-scenes", ARG_INT, &scenes.n_valid, "validation scenes (from the 5,000 validation images)", 1,
         1000000, NULL,
         ARG_DATA, ARG_TRAINING_ONLY},
        {"test-scenes", ARG_INT, &scenes.n_test, "test scenes (from the 10,000 test images)", 1, 1000000, NULL,
         ARG_DATA, ARG_TRAINING_ONLY},
        {"data-seed", ARG_INT, &scenes.seed, "seed of the scenes", 0, 2147483647, NULL, ARG_DATA, ARG_TRAINING_ONLY},
        {"data", ARG_STRING, &data_dir, "Fashion-MNIST directory (default " FASHION_MNIST_DIR ")", 0, 0, NULL, ARG_DATA,
         ARG_ACTS_WITH_LOAD},
        {"pictures", ARG_INT, &pictures, "test scenes drawn with one panel per word", 0, 50, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},
        {"image", ARG_STRING, &image, "with --load: caption this PGM scene (light items on black)", 0, 0, NULL,
         ARG_OUTPUT, ARG_ACTS_WITH_LOAD},
        {"compose", ARG_STRING, &list, "write a scene of test images I,J,.. (- empty) and stop", 0, 0, NULL,
         ARG_OUTPUT, ARG_TRAINING_ONLY},
        {"to", ARG_STRING, &to, "with --compose: the PGM file to write", 0, 0, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
    };
    Seq2SeqRun run;
    seq2seq_init(&run, &PROGRAM);
    run.flags.shared.train.steps = 1500;   /* this program's quick default */
    run.flags.shared.batch = 32;
    run.flags.shared.train.lr = 2e-3f;
    int rc = seq2seq_parse_flags(&run, argc, argv, own, (int)(sizeof own / sizeof own[0]));
    if (rc == 0 && image && !run.flags.shared.load)
        rc = fail("--image goes with --load CKPT (a model to caption with)");
    if (rc == 0 && to && !list) rc = fail("--to goes with --compose I,J,.. (the scene to write)");
    if (rc == 0 && list) rc = compose(list, to, scenes.grid, data_dir);   /* --compose: the scene, and stop */
    if (rc == 0) rc = caption_kind_from_name(model, &cfg.kind);
    if (rc == 0) rc = encoder_flags(&cfg, encoder, filters, pretrained, freeze, argc, argv, run.flags.shared.train.weight_decay);
    cfg.side = SCENE_CELL * scenes.grid;

    /* 2. The scenes (with --load, the ones the checkpoint names). */
    SceneScale scale = {0};
    if (rc == 0) rc = load_scenes(&run, &scenes, data_dir, &scale);

    /* 3. The model, from its configuration (with --load, the checkpoint's). */
    if (rc == 0) rc = seq2seq_model_config(&run, CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &cfg);
    if (rc == 0) rc = caption_build(&run.model, &run.data, &cfg, seq2seq_max_batch(&run),
                                    (uint64_t)run.flags.shared.seed);
    /*    --pretrained: the CNN encoder's convolutions from a classifier of single items (07_cnn) */
    if (rc == 0 && pretrained && !run.flags.shared.load) rc = caption_load_cnn(run.model.self, pretrained, freeze);

    /* 4. With --load: the saved weights; --image FILE captions the user's scene and stops. */
    if (rc == 0 && run.flags.shared.load) rc = seq2seq_use_saved(&run);
    if (rc == 0 && image) rc = caption_draw_file(&run.model, &run.data, image, &scale, run.out_dir) < 0 ? -1 : 1;

    /* 5. Training: train_loop over batches of training scenes. */
    if (rc == 0 && !run.flags.shared.load) rc = seq2seq_train(&run);

    /* 6. Evaluation on the test scenes, 7. a few of them drawn with one
     *    panel per word, the checkpoint, plots and results.json. */
    if (rc == 0) rc = seq2seq_evaluate(&run);
    if (rc == 0) results_set_str(&run.results, "variant", caption_kind_name(cfg.kind));   /* the results table's model column */
    if (rc == 0) encoder_results(&run.results, &cfg, pretrained, freeze, !run.flags.shared.load);
    if (rc == 0) rc = caption_draw_test_scenes(&run.model, &run.data, pictures, &scale, run.out_dir);
    if (rc == 0) rc = seq2seq_write_outputs(&run);
    return seq2seq_finish(&run, rc);
}
