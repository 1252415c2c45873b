/* fuzz_checkpoint.c - libFuzzer target: the checkpoint reader and every
 * chapter's config parsing behind it (what --load FILE runs).
 *
 * The input is a checkpoint file. A file the fuzzer mutates almost always
 * fails the CRC-32 check at its end, which would keep it from ever reaching
 * the config parsers; so each input is tried twice: as it is, and with its
 * last 4 bytes replaced by the right CRC of the bytes before them (as a
 * careless or hostile writer would produce). For each readable config:
 *   - checkpoint_check_model against every chapter's model name;
 *   - each chapter's config reader (RNN cell and sizes of chapters 01-03,
 *     chapter 06's transformer and GPT, chapter 07's ViT, the digit models
 *     of chapters 04/05 and their task, the seq2seq task lines);
 *   - for chapters 04, 05 and 07 the whole load: build the model the config
 *     describes (when it is small enough for a fuzzing loop) and
 *     checkpoint_load its tensors, which checks every name and dim. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "04_self_attention/digit_model.h"
#include "05_multi_head_attention/multi_head_model.h"
#include "06_transformer/gpt.h"
#include "06_transformer/transformer.h"
#include "07_vision_transformer/vit.h"
#include "data/dataset.h"
#include "data/digit_tasks.h"
#include "fuzz_util.h"
#include "io/checkpoint.h"
#include "util/error.h"

static const char *const MODELS[][2] = {
    {"rnn_seq2seq", "01_rnn_seq2seq"},           {"bahdanau", "02_bahdanau_attention"},
    {"attn_seq2seq", "03_dot_product_attention"}, {"ch04_digit_self_attention", "04_self_attention"},
    {"ch05_digit_multi_head", "05_multi_head_attention"}, {"transformer", "06_transformer"},
    {"gpt", "06_gpt"},                            {VIT_MODEL_NAME, "07_vision_transformer"},
};

/* A model small enough to build thousands of times a second. */
static int small_digit(const DigitModelSizes *s) {
    return (long)s->N * s->D <= 4096 && (long)s->D * s->F <= 65536 && s->L <= 4 && s->C <= 256;
}

static void load_classifier(const char *path, Classifier *c) {
    (void)checkpoint_load(path, c->params);
    c->destroy(c->self);
}

static void exercise(const char *path) {
    char *config = NULL;
    if (checkpoint_read_config(path, &config) != 0) return;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        (void)checkpoint_check_model(path, config, MODELS[i][0], MODELS[i][1]);

    RnnConfig rnn;
    (void)rnn_config_read(config, &rnn);
    TransformerConfig tr;
    (void)transformer_config_read(config, &tr);
    GptConfig gpt;
    (void)gpt_config_read(config, &gpt);
    TaskConfig tc;
    char task_buf[32];
    (void)task_from_config(&tc, config, task_buf, sizeof task_buf);
    DigitTaskSpec spec;
    ExampleTask et;
    (void)digit_task_from_config(config, &spec, &et);

    Classifier c;
    DigitModelSizes s;
    if (digit_model_sizes(config, DIGIT_MODEL_NAME, "fuzz", &s) == 0 && small_digit(&s) &&
        digit_model_build(&c, config, 2, 1) == 0)
        load_classifier(path, &c);
    if (digit_model_sizes(config, "ch05_digit_multi_head", "fuzz", &s) == 0 && small_digit(&s) &&
        mh_model_build(&c, config, MULTI_HEAD_PLAIN, 2, 1) == 0)
        load_classifier(path, &c);
    VitConfig vc;
    if (vit_config_from_text(config, &vc) == 0 && (long)vc.patch.rows * vc.patch.cols * vc.patch.channels <= 4096 &&
        vc.patch.D <= 64 && vc.ff <= 256 && vc.layers <= 4 && vc.classes <= 256 && vit_build(&c, config, 2, 1) == 0)
        load_classifier(path, &c);
    free(config);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[512];
    if (path[0] == '\0') fuzz_path(path, sizeof path, "checkpoint.ckpt");
    fuzz_write(path, data, size);
    exercise(path);
    if (size >= 4) {
        uint8_t *fixed = malloc(size);
        if (fixed == NULL) abort();
        memcpy(fixed, data, size);
        uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), fixed, (uInt)(size - 4));
        for (int k = 0; k < 4; k++) fixed[size - 4 + k] = (uint8_t)(crc >> (8 * k));
        fuzz_write(path, fixed, size);
        exercise(path);
        free(fixed);
    }
    clear_error();
    return 0;
}
