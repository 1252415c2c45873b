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
 *   - the whole load, as --load runs it, for every chapter: the seq2seq
 *     chapters (01, 02, 03, 06) rebuild their task's data set from the
 *     config (kept between inputs while the task lines stay the same), check
 *     its vocabulary sizes, build the model and checkpoint_load it; chapters
 *     04, 05, 07, the GPT and its genre model build their model and load it; chapter 07's
 *     captioner reads its scenes' and model's lines (scene.h, caption.h),
 *     checks its vocabulary sizes against the scenes' words, builds and
 *     loads. Only models small enough for a fuzzing loop are built (a real
 *     checkpoint of a huge model is not a bug). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "02_bahdanau_attention/bahdanau.h"
#include "03_dot_product_attention/attn_seq2seq.h"
#include "04_self_attention/digit_model.h"
#include "05_multi_head_attention/multi_head_model.h"
#include "06_transformer/genre.h"
#include "06_transformer/gpt.h"
#include "06_transformer/transformer.h"
#include "07_vision_transformer/caption.h"
#include "07_vision_transformer/cnn.h"
#include "07_vision_transformer/scene.h"
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
    {CAPTION_MODEL_NAME, "07_caption"},          {CNN_MODEL_NAME, "07_cnn"},
    {GENRE_MODEL_NAME, "06_gpt_genre"},
};

/* With FUZZ_VERBOSE set, say how far each load went (to check that the
 * seeds reach the end: bash -c 'FUZZ_VERBOSE=1 fuzz_checkpoint -runs=0 tests/fuzz/checkpoint'). */
static void report(const char *what, int rc) {
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "  %s: %s\n", what, rc == 0 ? "loaded" : last_error());
}

/* A model small enough to build thousands of times a second. */
static int small_digit(const DigitConfig *c) {
    return (long)c->N * c->D <= 4096 && (long)c->D * c->F <= 65536 && c->L <= 4 && c->C <= 256;
}

static void load_classifier(const char *path, Classifier *c) {
    report("classifier", checkpoint_load(path, c->params));
    c->destroy(c->self);
}

/* The data set of the last seq2seq config, kept while its task lines stay the same. */
static Dataset data;
static TaskConfig data_tc;
static char data_task[32];
static int have_data;

static const Dataset *dataset_for(const TaskConfig *tc) {
    if (have_data && strcmp(tc->task, data_task) == 0 && tc->seed == data_tc.seed && tc->n_train == data_tc.n_train &&
        tc->n_valid == data_tc.n_valid && tc->n_test == data_tc.n_test && tc->min_len == data_tc.min_len &&
        tc->max_len == data_tc.max_len)
        return &data;
    if (have_data) dataset_free(&data);
    have_data = 0;
    /* generated tasks: at most a few thousand examples per input */
    if (strcmp(tc->task, "g2p") != 0 && (long)tc->n_train + tc->n_valid + tc->n_test > 4000) return NULL;
    /* --load rebuilds the validation and test parts too, but nothing it then
     * checks reads them (every task's vocabularies are fixed alphabets, the
     * same whatever the split): at most 50 examples each here, as drawing the
     * seeds' 3,000 unique dates took 59% of this target's time, at every
     * mutation of a task line. (So a config asking for more validation or
     * test examples than the task has is refused by --load, not here.) */
    TaskConfig load_tc = *tc;
    if (load_tc.n_valid > 50) load_tc.n_valid = 50;
    if (load_tc.n_test > 50) load_tc.n_test = 50;
    if (dataset_load(&data, &load_tc) != 0) return NULL;
    data_tc = *tc;
    snprintf(data_task, sizeof data_task, "%s", tc->task);
    data_tc.task = data_task;
    have_data = 1;
    return &data;
}

/* The seq2seq driver's --load: data set, vocabulary sizes, build, load. */
static void load_seq2seq(const char *path, const char *config) {
    TaskConfig tc;
    char task_buf[32];
    if (task_from_config(&tc, config, task_buf, sizeof task_buf) != 0) return;
    tc.data_dir = "data";
    const Dataset *d = dataset_for(&tc);
    int src_size, tgt_size;
    if (d == NULL || config_get_int(config, "src_vocab_size", &src_size) != 0 ||
        config_get_int(config, "tgt_vocab_size", &tgt_size) != 0 || src_size != d->src_vocab.size ||
        tgt_size != d->tgt_vocab.size)
        return;
    char model[64];
    if (config_get(config, "model", model, sizeof model) != 0) return;
    RnnConfig rnn;
    BahdanauConfig bahdanau;
    AttnSeq2SeqConfig attn;
    TransformerConfig tr = {0};
    Seq2Seq m;
    memset(&m, 0, sizeof m);
    int rc = -1;
    if (strcmp(model, "rnn_seq2seq") == 0) {
        if (config_read(config, RNN_CONFIG_FIELDS, RNN_CONFIG_N, &rnn) != 0 || rnn.D_E > 64 || rnn.S > 64) return;
        rc = rnn_seq2seq_build(&m, d, &rnn, 2, 1);
    } else if (strcmp(model, "bahdanau") == 0) {
        if (config_read(config, BAHDANAU_CONFIG_FIELDS, BAHDANAU_CONFIG_N, &bahdanau) != 0 || bahdanau.D_E > 64 ||
            bahdanau.S > 64 || bahdanau.D_A > 64)
            return;
        rc = bahdanau_build(&m, d, &bahdanau, 2, 1);
    } else if (strcmp(model, "attn_seq2seq") == 0) {
        if (config_read(config, ATTN_SEQ2SEQ_CONFIG_FIELDS, ATTN_SEQ2SEQ_CONFIG_N, &attn) != 0 || attn.D_E > 64 ||
            attn.S > 64 || attn.D_A > 64)
            return;
        rc = attn_seq2seq_build(&m, d, &attn, 2, 1);
    } else if (strcmp(model, "transformer") == 0) {
        if (config_read(config, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &tr) != 0 || tr.block.D > 64 ||
            tr.block.F > 256 || tr.layers > 2)
            return;
        rc = transformer_build(&m, d, &tr, 2, 1);
    }
    if (rc != 0) return;
    report(model, checkpoint_load(path, m.params));
    m.destroy(m.self);
}

/* The captioner's --load (07_caption): the scenes' and the model's lines
 * read (SCENE_CONFIG_FIELDS, CAPTION_CONFIG_FIELDS), a data set of the
 * scenes' words and image size without images (nothing the load checks
 * reads them: the real one is built from Fashion-MNIST), its vocabulary
 * sizes, build, load. */
static void load_caption(const char *path, const char *config) {
    int src_size, tgt_size;
    SceneConfig sc;
    CaptionConfig cc = {0};
    if (config_read(config, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, &sc) != 0 ||
        config_read(config, CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &cc) != 0)
        return;
    if (cc.D > 64 || cc.ff > 256 || cc.layers > 2 || cc.dec_layers > 2 || cc.heads > 8 || cc.D_E > 64 ||
        cc.S > 64 || cc.D_A > 64)
        return;
    const int grid = sc.grid;
    Dataset d;
    memset(&d, 0, sizeof d);
    vocab_init(&d.src_vocab);
    vocab_init(&d.tgt_vocab);
    for (int c = 0; c < FASHION_MNIST_CLASSES; c++) vocab_add(&d.tgt_vocab, scene_words[c]);
    d.value_size = SCENE_CELL * grid * SCENE_CELL * grid;
    d.max_src_len = d.max_tgt_len = grid * grid;
    if (config_get_int(config, "src_vocab_size", &src_size) != 0 ||
        config_get_int(config, "tgt_vocab_size", &tgt_size) != 0 || src_size != d.src_vocab.size ||
        tgt_size != d.tgt_vocab.size)
        return;
    Seq2Seq m;
    memset(&m, 0, sizeof m);
    if (caption_build(&m, &d, &cc, 2, 1) != 0) return;
    report("caption", checkpoint_load(path, m.params));
    m.destroy(m.self);
}

static void exercise(const char *path) {
    char *config = NULL;
    if (checkpoint_read_config(path, &config) != 0) return;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        (void)checkpoint_check_model(path, config, MODELS[i][0], MODELS[i][1]);

    RnnConfig rnn;
    (void)config_read(config, RNN_CONFIG_FIELDS, RNN_CONFIG_N, &rnn);
    BahdanauConfig bahdanau;
    (void)config_read(config, BAHDANAU_CONFIG_FIELDS, BAHDANAU_CONFIG_N, &bahdanau);
    AttnSeq2SeqConfig attn;
    (void)config_read(config, ATTN_SEQ2SEQ_CONFIG_FIELDS, ATTN_SEQ2SEQ_CONFIG_N, &attn);
    TransformerConfig tr = {0};
    (void)config_read(config, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &tr);
    GptConfig gpt;
    memset(&gpt, 0, sizeof gpt);
    if (config_read(config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &gpt) != 0) gpt.layers = 1000;   /* (not built below) */
    TaskConfig tc;
    char task_buf[32];
    (void)task_from_config(&tc, config, task_buf, sizeof task_buf);
    DigitTaskSpec spec;
    ExampleTask et;
    (void)digit_task_from_config(config, &spec, &et);

    load_seq2seq(path, config);
    load_caption(path, config);
    if (gpt.block.D <= 64 && gpt.block.F <= 256 && gpt.layers <= 2 && gpt.context <= 64 && gpt.V <= 512) {
        Gpt g;
        if (gpt_create(&g, &gpt, 2, 1) == 0) {
            report("gpt", checkpoint_load(path, &g.params));
            gpt_free(&g);
        }
    }

    /* chapter 06's genre model (06_gpt_genre --load): the head's lines, the GPT's under it, build, load */
    GenreConfig gc;
    memset(&gc, 0, sizeof gc);
    if (config_read(config, GENRE_CONFIG_FIELDS, GENRE_CONFIG_N, &gc) == 0 &&
        config_read(config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &gc.gpt) == 0 && gc.gpt.block.D <= 64 &&
        gc.gpt.block.F <= 256 && gc.gpt.layers <= 2 && gc.gpt.context <= 64 && gc.gpt.V <= 512 && gc.classes <= 64 &&
        gc.max_tokens <= 512) {
        Genre m;
        if (genre_create(&m, &gc, 2, 1) == 0) {
            report("genre", checkpoint_load(path, &m.g.params));
            genre_free(&m);
        }
    }

    /* chapters 04, 05 and 07 (the ViT, the CNN): the lines of the model the config names (its table of fields) */
    Classifier c;
    char model[64] = "";
    (void)config_get(config, "model", model, sizeof model);
    DigitConfig dc;
    if (strcmp(model, DIGIT_MODEL_NAME) == 0 && config_read(config, DIGIT_CONFIG_FIELDS, DIGIT_CONFIG_N, &dc) == 0 &&
        small_digit(&dc) && digit_model_build(&c, &dc, 2, 1) == 0)
        load_classifier(path, &c);
    MultiHeadModelConfig mc;
    if (strcmp(model, MH_MODEL_NAME) == 0 && config_read(config, MH_MODEL_CONFIG_FIELDS, MH_MODEL_CONFIG_N, &mc) == 0 &&
        small_digit(&mc.digit) && (long)mc.H * mc.D_H <= 256 && mh_model_build(&c, &mc, MULTI_HEAD_PLAIN, 2, 1) == 0)
        load_classifier(path, &c);
    VitConfig vc;
    if (strcmp(model, VIT_MODEL_NAME) == 0 && config_read(config, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &vc) == 0 &&
        (long)vc.patch.rows * vc.patch.cols * vc.patch.channels <= 4096 && vc.patch.D <= 64 && vc.ff <= 256 &&
        vc.layers <= 4 && vc.classes <= 256 && vit_build(&c, &vc, 2, 1) == 0)
        load_classifier(path, &c);
    CnnConfig cc;
    if (strcmp(model, CNN_MODEL_NAME) == 0 && config_read(config, CNN_CONFIG_FIELDS, CNN_CONFIG_N, &cc) == 0 &&
        (long)cc.rows * cc.cols * cc.channels <= 4096 && cc.filters <= 16 && cc.classes <= 256 &&
        cnn_build(&c, &cc, 2, 1) == 0)
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
