/* main_mlp.c - chapter 07's baseline without attention: an MLP on the pixels
 * of Fashion-MNIST (pixel_mlp.h), trained by the ViT's driver, loop, data,
 * steps, batch and learning-rate schedule, so its test accuracy is the
 * figure the ViT's stands beside (make run's ladder).
 *
 *   ./build/07_mlp                          the quick default (make run-07), the ViT's budget
 *   ./build/07_mlp --hidden 256 --layers 1  another shape
 *   ./build/07_mlp --load out/07_mlp/model_mlp.ckpt   evaluate a saved model on the test images
 *
 * The program, top to bottom: the flags; with --load, the saved model's test
 * accuracy, and done; otherwise the data, the model built, trained, tested
 * and saved, then the results table and results.json. Each step is a call of
 * the classifier driver (common/train/classifier.h), as in main.c. */
#include <stdio.h>

#include "07_vision_transformer/pixel_mlp.h"
#include "data/fashion_mnist.h"
#include "train/classifier.h"
#include "util/error.h"
#include "util/output.h"

static const ClassifierProgram PROGRAM = {
    .chapter = "07_mlp",
    .model_name = PIXEL_MLP_MODEL_NAME,
    .summary = "Chapter 07's baseline without attention: an MLP on the 784 pixels of Fashion-MNIST, trained\n"
               "with the ViT's data, steps, batch and schedule; tested on the 10,000 test images.",
    .examples = "./build/07_mlp\n"
                "./build/07_mlp --hidden 256 --layers 1\n"
                "./build/07_mlp --load out/07_mlp/model_mlp.ckpt",
    .load_hint = "(evaluates it on the test images)",
};

static FashionMnist data;

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's shape, then the flags every such program shares,
     *    with the ViT's defaults (main.c) for the budget. */
    PixelMlpConfig c = {.inputs = FASHION_MNIST_ROWS * FASHION_MNIST_COLS, .hidden = 80, .layers = 2,
                        .classes = FASHION_MNIST_CLASSES};
    const char *data_dir = NULL;
    int train_size = 0;
    const ArgSpec model_flags[] = {
        {"hidden", ARG_INT, &c.hidden, "width F of each hidden layer", 1, 8192, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"layers", ARG_INT, &c.layers, "hidden layers L", 1, PIXEL_MLP_MAX_LAYERS, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"data", ARG_STRING, &data_dir, "directory of the Fashion-MNIST files", 0, 0, NULL, ARG_DATA,
         ARG_ACTS_WITH_LOAD},
        {"train-size", ARG_INT, &train_size, "train on the first N training images only (0: all 55,000)", 0, 55000,
         NULL, ARG_DATA, ARG_TRAINING_ONLY},
    };
    static ClassifierRuns runs;
    classifier_init(&runs, &PROGRAM);
    runs.flags.shared.train.steps = 5000;
    runs.flags.shared.train.lr = 2e-3f;
    runs.flags.shared.train.weight_decay = 0.05f;
    runs.flags.shared.train.warmup = 250;
    runs.flags.shared.train.eval_every = 100;
    runs.flags.shared.batch = 128;
    runs.flags.test_size = 10000;
    int rc = classifier_parse_flags(&runs, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));

    /* 2. With --load: the saved model's accuracy on the test images, and done. */
    FashionMnistTask ft = {.d = &data};
    ExampleTask t;
    Classifier m;
    if (rc == 0 && runs.flags.shared.load) {
        if (classifier_read_config(&runs, PIXEL_MLP_CONFIG_FIELDS, PIXEL_MLP_CONFIG_N, &c) < 0 ||
            fashion_mnist_load(&data, data_dir, 1) < 0)
            return classifier_finish(&runs, -1);
        fashion_mnist_task(&ft, &t);
        if (pixel_mlp_build(&m, &c, runs.flags.shared.batch, 0) < 0) return classifier_finish(&runs, -1);
        rc = classifier_use_saved(&runs, &m, &t);
        m.destroy(m.self);
        return classifier_finish(&runs, rc);
    }

    /* 3. The run: its name, its configuration (the checkpoint's text). */
    if (rc == 0) {
        ClassifierRun *run = classifier_add_run(&runs, "mlp", "MLP on pixels, %d x %d hidden, no attention",
                                                c.layers, c.hidden);
        if (!run || classifier_config_text(run, PIXEL_MLP_MODEL_NAME, "fashion_mnist", PIXEL_MLP_CONFIG_FIELDS,
                                           PIXEL_MLP_CONFIG_N, &c, runs.flags.shared.seed) < 0)
            rc = -1;
    }

    /* 4. The data: Fashion-MNIST's training images (less 5,000 for validation; with --train-size N
     *    only the first N) and its test images. */
    ft.train_size = train_size;
    if (rc == 0) rc = fashion_mnist_load(&data, data_dir, 1);
    if (rc == 0 && (train_size = fashion_mnist_train_size(&ft)) < 0) rc = -1;
    if (rc == 0 && train_size < data.train.n)
        printf("  training on the first %d of the %d training images\n", train_size, data.train.n);
    if (rc == 0) fashion_mnist_task(&ft, &t);

    /* 5. Training, then the test images and the checkpoint. */
    int built = 0;
    if (rc == 0) {
        classifier_start(&runs);
        rc = pixel_mlp_build(&m, &c, runs.flags.shared.batch, (uint64_t)runs.flags.shared.seed);
        built = rc == 0;
    }
    ClassifierResult *r = &runs.result[0];
    if (rc == 0) printf("  %s: %zu parameters\n", runs.run[0].label, m.params->size);
    if (rc == 0) rc = classifier_train(&m, &t, &runs.flags.shared.train, runs.flags.shared.batch,
                                       (uint64_t)runs.flags.shared.seed, NULL, r);
    if (rc == 0) classifier_test(&runs, &m, &t, r);
    if (rc == 0) rc = classifier_save(&runs, &runs.run[0], &m, r);
    if (built) m.destroy(m.self);

    /* 6. The results table, the loss curve, results.json. */
    if (rc == 0) rc = classifier_report(&runs);
    if (rc == 0) results_set_num(&runs.results, "train_size", train_size);
    if (rc == 0) rc = classifier_write_results(&runs);
    return classifier_finish(&runs, rc);
}
