/* twin_dump.c - the C side of the PyTorch twin (tools/twin.py, make twin).
 *
 *   build/tools/twin_dump CHECKPOINT OUT.bin [--batch N] [--split test|valid|train]
 *
 * Dump. Loads a chapter's checkpoint (the model is chosen by the "model=" line
 * of its config), runs one training step's forward and backward on one batch
 * (no update), and writes a golden tensor file (tests/golden/README.md).
 *
 * Sequence-to-sequence models (chapters 01-03 and 06, MODELS[]): the batch is the
 * first N examples of a split, padded, and the file holds
 *   src [B,T], src_lens [B], tgt_in [B,Tt], tgt_out [B,Tt]   the batch (int32)
 *   logits [B,Tt,V]        the output layer, batch-major
 *   loss [1]               mean cross-entropy per target token (what train_step
 *                          returns: chapter 06 reports the plain cross-entropy,
 *                          its gradients are of the label-smoothed loss)
 *   grad/<name> [dims]     d loss / d parameter, for every parameter tensor
 *   max_out [1], greedy [B,max_out], greedy_len [B]
 *                          greedy decoding of each source (-1 padded)
 *   images [B, side side]  chapter 07's captions only: the scenes (src holds no tokens)
 *
 * Per-position and per-example models (chapters 04, 05 and 07, CLASSIFIERS[]:
 * the driver of common/train/classifier.h): the batch is the first B examples
 * of the chapter's test stream (seed, stream 99; chapter 07: the first B
 * Fashion-MNIST test images, from the default directory), and the file holds
 *   x [B,N], y [B,N]       inputs and targets (int32); chapter 07: images
 *                          [B,784] (float32, normalised as trained) and y [B,1]
 *   logits [B,N,C], loss [1], grad/<name>   as above
 *   pred [B,N]             argmax of the logits (what the chapter scores)
 *
 * Chapter 06's genre model (06_gpt_genre, in CLASSIFIERS[]): x [B, T] the
 * first B test passages' tokens (-1 after each passage), y [B, 1] their
 * genres, logits [B, 1, C].
 *
 * The GPT (chapter 06 part 2, model=gpt, dump_gpt): the batch is the first B
 * windows of N tokens of the Brown corpus's test part (the checkpoint's
 * tokens=char|word), one after the other, each predicting the next tokens;
 * the file holds
 *   x [B,N], y [B,N]       tokens and targets (int32)
 *   logits [B,N,V], loss [1], grad/<name>   as above (loss: the mean over the B N targets)
 *   prompt [B,P], greedy [B,M]
 *                          greedy generation (temperature 0) with the KV cache
 *                          from each window's first P = N/4 tokens, M = N - P tokens
 *                          (the window never fills, so no shift)
 *
 * Every chapter's binary trains and writes the checkpoints (twin.py runs it).
 *
 * tools/twin.py rebuilds the same model in PyTorch from the checkpoint and
 * compares. A chapter joins by one line in MODELS[] or CLASSIFIERS[] (and a
 * tools/twin_NN.py). */
#include <stdio.h>
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
#include "data/brown.h"
#include "data/brown_genre.h"
#include "07_vision_transformer/cnn.h"
#include "07_vision_transformer/caption.h"
#include "07_vision_transformer/scene.h"
#include "07_vision_transformer/vit.h"
#include "data/fashion_mnist.h"
#include "train/classifier.h"
#include "data/digit_tasks.h"
#include "io/args.h"
#include "io/checkpoint.h"
#include "data/dataset.h"
#include "util/error.h"
#include "golden.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "train/seq2seq.h"
#include "util/util.h"

/* ---------------------------------------------------------- the models */

/* Copy a time-major [Tt*B, V] logits block (row t*B + b) to batch-major [B, Tt, V]. */
static void time_major_to_batch_major(float *out, const float *logits, int B, int Tt, int V) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tt; t++)
            memcpy(out + ((size_t)b * Tt + t) * V, logits + ((size_t)t * B + b) * V, sizeof(float) * (size_t)V);
}

static void rnn_seq2seq_logits(void *self, int B, int Tt, int V, float *out) {
    time_major_to_batch_major(out, ((RnnSeq2Seq *)self)->logits, B, Tt, V);
}

static void bahdanau_logits(void *self, int B, int Tt, int V, float *out) {
    time_major_to_batch_major(out, ((Bahdanau *)self)->logits, B, Tt, V);
}

static void attn_seq2seq_logits(void *self, int B, int Tt, int V, float *out) {
    time_major_to_batch_major(out, ((AttnSeq2Seq *)self)->logits, B, Tt, V);
}

/* Chapters 01-03's models from their checkpoint's lines (each model's table of fields). */
static int rnn_seq2seq_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    RnnConfig cfg;
    if (config_read(config, RNN_CONFIG_FIELDS, RNN_CONFIG_N, &cfg) < 0) return -1;
    return rnn_seq2seq_build(m, d, &cfg, max_batch, seed);
}

static int bahdanau_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    BahdanauConfig cfg;
    if (config_read(config, BAHDANAU_CONFIG_FIELDS, BAHDANAU_CONFIG_N, &cfg) < 0) return -1;
    return bahdanau_build(m, d, &cfg, max_batch, seed);
}

static int attn_seq2seq_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    AttnSeq2SeqConfig cfg;
    if (config_read(config, ATTN_SEQ2SEQ_CONFIG_FIELDS, ATTN_SEQ2SEQ_CONFIG_N, &cfg) < 0) return -1;
    return attn_seq2seq_build(m, d, &cfg, max_batch, seed);
}

/* Chapter 07's captioners: models 1-2 keep chapter 01's time-major rows, model 3 chapter 06's batch-major. */
static void caption_logits(void *self, int B, int Tt, int V, float *out) {
    Caption *c = self;
    if (c->cfg.kind == CAPTION_TRANSFORMER) memcpy(out, c->logits, sizeof(float) * (size_t)B * Tt * V);
    else time_major_to_batch_major(out, c->logits, B, Tt, V);
}

/* Chapter 07's captioner from its checkpoint's lines (caption.h's fields). */
static int caption_build_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    CaptionConfig cfg = {0};
    if (config_read(config, CAPTION_CONFIG_FIELDS, CAPTION_CONFIG_N, &cfg) < 0) return -1;
    return caption_build(m, d, &cfg, max_batch, seed);
}

/* Chapter 06's transformer from its checkpoint's lines (transformer.h's fields). */
static int transformer_build_from_text(Seq2Seq *m, const Dataset *d, const char *config, int max_batch,
                                       uint64_t seed) {
    TransformerConfig cfg = {0};
    if (config_read(config, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &cfg) < 0) return -1;
    return transformer_build(m, d, &cfg, max_batch, seed);
}

/* The transformer's logits are batch-major already (row b Tt + t). */
static void transformer_logits(void *self, int B, int Tt, int V, float *out) {
    memcpy(out, ((Transformer *)self)->logits, sizeof(float) * (size_t)B * Tt * V);
}

typedef struct {
    const char *model;   /* the config's "model=" value */
    int (*build)(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed);
    /* After train_step: the batch's logits, batch-major [B, Tt, V]. */
    void (*logits)(void *self, int B, int Tt, int V, float *out);
} TwinModel;

static const TwinModel MODELS[] = {
    {"rnn_seq2seq", rnn_seq2seq_from_text, rnn_seq2seq_logits},      /* chapter 01 */
    {"bahdanau", bahdanau_from_text, bahdanau_logits},               /* chapter 02 */
    {"attn_seq2seq", attn_seq2seq_from_text, attn_seq2seq_logits},   /* chapter 03 */
    {"transformer", transformer_build_from_text, transformer_logits}, /* chapter 06 */
    {CAPTION_MODEL_NAME, caption_build_from_text, caption_logits},    /* chapter 07's captions */
};

/* ------------------------------------------- the per-position models */

/* Chapters 04, 05 and 07's models from their checkpoint's lines (each model's table of fields). */
static int digit_model_from_text(Classifier *c, const char *config, int max_B, uint64_t seed) {
    DigitConfig cfg;
    if (config_read(config, DIGIT_CONFIG_FIELDS, DIGIT_CONFIG_N, &cfg) < 0) return -1;
    return digit_model_build(c, &cfg, max_B, seed);
}

static int mh_model_from_text(Classifier *c, const char *config, int max_B, uint64_t seed) {
    MultiHeadModelConfig cfg;
    if (config_read(config, MH_MODEL_CONFIG_FIELDS, MH_MODEL_CONFIG_N, &cfg) < 0) return -1;
    return mh_model_build(c, &cfg, MULTI_HEAD_PLAIN, max_B, seed);
}

static int vit_from_text(Classifier *c, const char *config, int max_B, uint64_t seed) {
    VitConfig cfg;
    if (config_read(config, VIT_CONFIG_FIELDS, VIT_CONFIG_N, &cfg) < 0) return -1;
    return vit_build(c, &cfg, max_B, seed);
}

static int cnn_from_text(Classifier *c, const char *config, int max_B, uint64_t seed) {
    CnnConfig cfg;
    if (config_read(config, CNN_CONFIG_FIELDS, CNN_CONFIG_N, &cfg) < 0) return -1;
    return cnn_build(c, &cfg, max_B, seed);
}

/* Chapter 06's genre model (build/06_gpt_genre): the head's lines, then the GPT's under it. */
static int genre_from_text(Classifier *c, const char *config, int max_B, uint64_t seed) {
    GenreConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    if (config_read(config, GENRE_CONFIG_FIELDS, GENRE_CONFIG_N, &cfg) < 0 ||
        config_read(config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg.gpt) < 0)
        return -1;
    return genre_build(c, &cfg, max_B, seed, NULL);
}

/* Its test passages: the Brown corpus in the checkpoint's view, the test texts' 60 per genre. */
static int genre_task_of(const char *config, ExampleTask *t) {
    static BrownCorpus corpus;
    static BrownGenre genres;
    GenreConfig cfg;
    int seed;
    memset(&cfg, 0, sizeof cfg);
    if (config_read(config, GENRE_CONFIG_FIELDS, GENRE_CONFIG_N, &cfg) < 0 || config_get_int(config, "seed", &seed) < 0)
        return -1;
    BrownConfig bc;
    brown_defaults(&bc, (BrownTokens)cfg.tokens);
    bc.keep_texts = 1;
    BrownGenreConfig gc = {.per_genre = 1, .eval_per_genre = 60, .split = BROWN_GENRE_TEST, .seed = (uint64_t)seed};
    if (brown_load_config(&corpus, &bc) < 0 || brown_genre_build(&genres, &corpus, &gc) < 0) return -1;
    brown_genre_task(&genres, t);
    return 0;
}

static int digit_task_of(const char *config, ExampleTask *t) {
    static DigitTaskSpec spec;
    return digit_task_from_config(config, &spec, t);
}

/* Chapter 07's test images (no augmentation: the test split is read as is). */
static int fashion_mnist_task_of(const char *config, ExampleTask *t) {
    static FashionMnist data;
    static FashionMnistTask ft;
    (void)config;
    if (data.test.n == 0 && fashion_mnist_load(&data, NULL, 1) < 0) return -1;
    ft = (FashionMnistTask){.d = &data};
    fashion_mnist_task(&ft, t);
    return 0;
}

/* The models of the per-position driver (common/train/classifier.h). */
typedef struct {
    const char *model;   /* the config's "model=" value */
    int (*build)(Classifier *c, const char *config, int max_B, uint64_t seed);
    int (*task)(const char *config, ExampleTask *t);
} TwinClassifier;

static const TwinClassifier CLASSIFIERS[] = {
    {DIGIT_MODEL_NAME, digit_model_from_text, digit_task_of},  /* chapter 04 */
    {MH_MODEL_NAME, mh_model_from_text, digit_task_of},        /* chapter 05 */
    {VIT_MODEL_NAME, vit_from_text, fashion_mnist_task_of},    /* chapter 07 */
    {CNN_MODEL_NAME, cnn_from_text, fashion_mnist_task_of},    /* chapter 07's convolutional baseline */
    {GENRE_MODEL_NAME, genre_from_text, genre_task_of},        /* chapter 06's GPT with a genre head */
};

/* One test batch of a per-position model's checkpoint: forward, backward, predictions. */
static int dump_classifier(const char *ckpt, const char *config, const TwinClassifier *tc, const char *out,
                           int B) {
    Classifier m;
    ExampleTask task;
    int seed;
    memset(&m, 0, sizeof m);
    if (tc->build(&m, config, B, 0) < 0 || tc->task(config, &task) < 0 ||
        config_get_int(config, "seed", &seed) < 0) {
        if (m.destroy) m.destroy(m.self);
        return -1;
    }
    const int N = task.n_in, n_out = task.n_out, C = m.classes;
    Examples e;
    examples_alloc(&e, B, N, n_out, task.float_inputs);
    int *pred = xmalloc(sizeof(int) * (size_t)B * n_out), rc = -1;
    if (checkpoint_load_with_state(ckpt, m.params, m.buffers, m.n_buffers) == 0) {   /* (batch norm's running statistics too) */
        Rng rng;
        rng_seed(&rng, (uint64_t)seed, 99);      /* the chapters' test stream */
        if (task.test_reset) task.test_reset(task.self);
        task.test_batch(task.self, &e, B, &rng);
        params_zero_grad(m.params);
        float loss = (float)m.forward(m.self, &e);
        m.backward(m.self, &e);
        m.predict(m.self, pred);
        GoldWriter w;
        if (gold_writer_open(&w, out) == 0) {
            if (task.float_inputs)
                gold_write_f32(&w, "images", e.values, 2, (int[]){B, N});
            else
                gold_write_i32(&w, "x", e.tokens, 2, (int[]){B, N});
            gold_write_i32(&w, "y", e.targets, 2, (int[]){B, n_out});
            gold_write_f32(&w, "logits", m.logits(m.self), 3, (int[]){B, n_out, C});
            gold_write_f32(&w, "loss", &loss, 1, (int[]){1});
            const Params *p = m.params;
            for (int i = 0; i < p->n_tensors; i++) {
                const ParamTensor *t = &p->tensors[i];
                char name[PARAMS_NAME_LEN + 8];
                snprintf(name, sizeof name, "grad/%s", t->name);
                gold_write_f32(&w, name, p->grad + t->offset, t->ndim, t->dims);
            }
            gold_write_i32(&w, "pred", pred, 2, (int[]){B, n_out});
            rc = gold_writer_close(&w);
        }
    }
    if (rc == 0) printf("twin_dump: %s (%s, %d test sequences) -> %s\n", ckpt, tc->model, B, out);
    examples_free(&e);
    free(pred);
    m.destroy(m.self);
    return rc;
}

/* ----------------------------------------------------------------- the GPT */

/* One batch of the GPT's checkpoint: B windows of the Brown test part,
 * forward and backward (dropout must be 0: its masks are not dumped), then
 * greedy generation with the KV cache from each window's start. */
static int dump_gpt(const char *ckpt, const char *config, const char *out, int B) {
    GptConfig cfg = {0};
    char tokens_kind[16];
    if (config_read(config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg) < 0 ||
        config_get(config, "tokens", tokens_kind, sizeof tokens_kind) < 0)
        return -1;
    BrownCorpus c;
    if (brown_load(&c, NULL, strcmp(tokens_kind, "word") == 0 ? BROWN_WORDS : BROWN_CHARS) < 0) return -1;
    const int N = cfg.context, V = cfg.V, P = N / 4 > 0 ? N / 4 : 1, M = N - P;
    if (c.V != V) {
        brown_free(&c);
        return fail("%s: vocab=%d, but the Brown corpus (%s) gives %d", ckpt, V, tokens_kind, c.V);
    }
    if ((long)B * N + 1 > c.test.n) {
        brown_free(&c);
        return fail("--batch %d: the test part has %d tokens, too few for %d windows of %d", B, c.test.n, B, N);
    }
    Gpt g;
    if (gpt_create(&g, &cfg, B, 1) < 0 || checkpoint_load(ckpt, &g.params) < 0) {
        gpt_free(&g);
        brown_free(&c);
        return -1;
    }
    int *x = xmalloc(sizeof(int) * (size_t)B * N), *y = xmalloc(sizeof(int) * (size_t)B * N);
    int *prompt = xmalloc(sizeof(int) * (size_t)B * P), *greedy = xmalloc(sizeof(int) * (size_t)B * M);
    for (int b = 0; b < B; b++) {
        memcpy(x + (size_t)b * N, c.test.ids + (size_t)b * N, sizeof(int) * (size_t)N);
        memcpy(y + (size_t)b * N, c.test.ids + (size_t)b * N + 1, sizeof(int) * (size_t)N);
        memcpy(prompt + (size_t)b * P, x + (size_t)b * N, sizeof(int) * (size_t)P);
    }
    params_zero_grad(&g.params);
    const double sum = gpt_forward(&g, x, y, B, 1);
    const float loss = (float)(sum / g.last_counted);
    float *logits = xmalloc(sizeof(float) * (size_t)B * N * V);
    memcpy(logits, g.logits, sizeof(float) * (size_t)B * N * V);   /* backward overwrites them */
    gpt_backward(&g, x, y, B, (float)g.last_counted);
    int rc = -1;
    const GptSampling s = {0.0f, 0, 1};
    Rng rng;
    rng_seed(&rng, 1, 11);
    for (int b = 0; b < B; b++)
        if (gpt_generate(&g, prompt + (size_t)b * P, P, M, &s, &rng, greedy + (size_t)b * M, NULL) < 0) goto done;
    GoldWriter w;
    if (gold_writer_open(&w, out) < 0) goto done;
    gold_write_i32(&w, "x", x, 2, (int[]){B, N});
    gold_write_i32(&w, "y", y, 2, (int[]){B, N});
    gold_write_f32(&w, "logits", logits, 3, (int[]){B, N, V});
    gold_write_f32(&w, "loss", &loss, 1, (int[]){1});
    for (int i = 0; i < g.params.n_tensors; i++) {
        const ParamTensor *t = &g.params.tensors[i];
        char name[PARAMS_NAME_LEN + 8];
        snprintf(name, sizeof name, "grad/%s", t->name);
        gold_write_f32(&w, name, g.params.grad + t->offset, t->ndim, t->dims);
    }
    gold_write_i32(&w, "prompt", prompt, 2, (int[]){B, P});
    gold_write_i32(&w, "greedy", greedy, 2, (int[]){B, M});
    rc = gold_writer_close(&w);
    if (rc == 0) printf("twin_dump: %s (gpt, %d windows of %d test %ss) -> %s\n", ckpt, B, N, tokens_kind, out);
done:
    free(x); free(y); free(prompt); free(greedy); free(logits);
    gpt_free(&g);
    brown_free(&c);
    return rc;
}

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s CHECKPOINT OUT.bin [--batch N] [--split test|valid|train]\n"
                    "       %s train CHECKPOINT [--model digit_model|multi_head_model] [...]  (train --help)\n",
            argv0, argv0);
    return 2;
}

int main(int argc, char **argv) {
    const char *ckpt = NULL, *out = NULL, *split_name = "test";
    int want_batch = 8;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            want_batch = atoi(argv[++i]);
            if (want_batch < 1 || want_batch > 4096) {
                fprintf(stderr, "twin_dump: --batch %s: expected 1..4096\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--split") == 0 && i + 1 < argc) {
            split_name = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(argv[0]);
            return 0;
        } else if (!ckpt) {
            ckpt = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            return usage(argv[0]);
        }
    }
    if (!ckpt || !out) return usage(argv[0]);

    threads_set(1);   /* deterministic, and these batches are tiny */
    if (backend_select(NULL) < 0) { fprintf(stderr, "twin_dump: %s\n", last_error()); return 1; }

    int rc = 1;
    char *config = NULL;
    Dataset data;
    memset(&data, 0, sizeof data);
    Seq2Seq model;
    memset(&model, 0, sizeof model);
    Batch batch;
    memset(&batch, 0, sizeof batch);
    TaskConfig tc;
    char task[32], model_name[64];
    const TwinModel *tm = NULL;
    float *logits = NULL;
    int *greedy = NULL, *greedy_len = NULL;

    if (checkpoint_read_config(ckpt, &config) < 0) goto error;
    if (config_get(config, "model", model_name, sizeof model_name) < 0) goto error;
    if (strcmp(model_name, "gpt") == 0) {
        if (dump_gpt(ckpt, config, out, want_batch) < 0) goto error;
        rc = 0;
        goto done;
    }
    for (size_t i = 0; i < sizeof CLASSIFIERS / sizeof CLASSIFIERS[0]; i++)
        if (strcmp(CLASSIFIERS[i].model, model_name) == 0) {
            rc = dump_classifier(ckpt, config, &CLASSIFIERS[i], out, want_batch) == 0 ? 0 : 1;
            if (rc) goto error;
            goto done;
        }
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (strcmp(MODELS[i].model, model_name) == 0) tm = &MODELS[i];
    if (!tm) { fail("%s: model '%s' has no twin in tools/twin_dump.c", ckpt, model_name); goto error; }
    if (strcmp(model_name, CAPTION_MODEL_NAME) == 0) {   /* an image task: the scenes its config names */
        SceneConfig scenes;
        if (config_read(config, SCENE_CONFIG_FIELDS, SCENE_CONFIG_N, &scenes) < 0 ||
            scene_dataset_make(&data, &scenes, NULL, NULL) < 0)
            goto error;
    } else {
        if (task_from_config(&tc, config, task, sizeof task) < 0) goto error;
        if (dataset_load(&data, &tc) < 0) goto error;
    }
    const Split *split = dataset_split(&data, split_name);
    if (!split) { fail("--split %s: expected test, valid or train", split_name); goto error; }
    int B = want_batch < split->n ? want_batch : split->n;
    if (tm->build(&model, &data, config, B, 1) < 0) goto error;
    if (checkpoint_load_with_state(ckpt, model.params, model.buffers, model.n_buffers) < 0) goto error;

    /* ---- one batch, forward and backward */
    batch_alloc(&batch, B, data.max_src_len, data.max_tgt_len);
    if (data.value_size) batch_alloc_values(&batch, B, data.value_size);
    int *idx = xmalloc(sizeof(int) * (size_t)B);
    for (int i = 0; i < B; i++) idx[i] = i;
    batch_fill(&batch, split, idx, B);
    free(idx);
    params_zero_grad(model.params);
    double loss = model.train_step(model.self, &batch, 1);
    int T = batch.src_len, Tt = batch.tgt_len, V = model.vocab_size;
    logits = xmalloc(sizeof(float) * (size_t)B * Tt * V);
    tm->logits(model.self, B, Tt, V, logits);

    /* ---- greedy decoding of the batch's sources (the twin decodes them one by one) */
    int max_out = data.max_tgt_len + 5;
    greedy = xmalloc(sizeof(int) * (size_t)B * max_out);
    greedy_len = xmalloc(sizeof(int) * (size_t)B);
    decode_greedy(&model, &batch, max_out, greedy, greedy_len, NULL);
    for (int b = 0; b < B; b++)
        for (int k = greedy_len[b]; k < max_out; k++) greedy[(size_t)b * max_out + k] = -1;

    /* ---- write */
    GoldWriter w;
    if (gold_writer_open(&w, out) < 0) goto error;
    gold_write_i32(&w, "src", batch.src, 2, (int[]){B, T});
    gold_write_i32(&w, "src_lens", batch.src_lens, 1, (int[]){B});
    if (data.value_size) gold_write_f32(&w, "images", batch.values, 2, (int[]){B, data.value_size});
    gold_write_i32(&w, "tgt_in", batch.tgt_in, 2, (int[]){B, Tt});
    gold_write_i32(&w, "tgt_out", batch.tgt_out, 2, (int[]){B, Tt});
    gold_write_f32(&w, "logits", logits, 3, (int[]){B, Tt, V});
    float loss32 = (float)loss;
    gold_write_f32(&w, "loss", &loss32, 1, (int[]){1});
    const Params *p = model.params;
    for (int i = 0; i < p->n_tensors; i++) {
        const ParamTensor *t = &p->tensors[i];
        char name[PARAMS_NAME_LEN + 8];
        snprintf(name, sizeof name, "grad/%s", t->name);
        gold_write_f32(&w, name, p->grad + t->offset, t->ndim, t->dims);
    }
    gold_write_i32(&w, "max_out", &max_out, 1, (int[]){1});
    gold_write_i32(&w, "greedy", greedy, 2, (int[]){B, max_out});
    gold_write_i32(&w, "greedy_len", greedy_len, 1, (int[]){B});
    if (gold_writer_close(&w) < 0) goto error;
    printf("twin_dump: %s (%s, %d examples of the %s split) -> %s\n", ckpt, model_name, B, split_name, out);
    rc = 0;
    goto done;
error:
    fprintf(stderr, "twin_dump: error: %s\n", last_error());
done:
    free(logits);
    free(greedy);
    free(greedy_len);
    batch_free(&batch);
    if (model.destroy) model.destroy(model.self);
    dataset_free(&data);
    free(config);
    return rc;
}
