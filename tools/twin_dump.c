/* twin_dump.c - the C side of the PyTorch twin (tools/twin.py, make twin).
 *
 *   build/tools/twin_dump CHECKPOINT OUT.bin [--batch N] [--split test|valid|train]
 *   build/tools/twin_dump train CHECKPOINT [--model digit_model|multi_head_model] [--task ...] ...
 *
 * Dump. Loads a chapter's checkpoint (the model is chosen by the "model=" line
 * of its config), runs one training step's forward and backward on one batch
 * (no update), and writes a golden tensor file (tests/golden/README.md).
 *
 * Sequence-to-sequence models (chapters 01-03, MODELS[]): the batch is the
 * first N examples of a split, padded, and the file holds
 *   src [B,T], src_lens [B], tgt_in [B,Tt], tgt_out [B,Tt]   the batch (int32)
 *   logits [B,Tt,V]        the output layer, batch-major
 *   loss [1]               mean cross-entropy per target token
 *   grad/<name> [dims]     d loss / d parameter, for every parameter tensor
 *   max_out [1], greedy [B,max_out], greedy_len [B]
 *                          greedy decoding of each source (-1 padded)
 *
 * Digit models (chapters 04 and 05, DIGIT_MODELS[]): the batch is the first N
 * sequences of the chapter's test stream (seed, stream 99), and the file holds
 *   x [B,N], y [B,N]       inputs and targets (int32)
 *   logits [B,N,C], loss [1], grad/<name>   as above
 *   pred [B,N]             argmax of the logits (what the chapter scores)
 *
 * Train (digit models only: chapters 04 and 05 write no checkpoint). Builds
 * the chapter's model from a seed, trains it with the chapters' own loop
 * (Adam, gradient clipping at 1, warm-up + cosine schedule, training stream 1)
 * and saves a checkpoint whose config rebuilds it. The sequence-to-sequence
 * chapters' binaries write their checkpoints themselves.
 *
 * tools/twin.py rebuilds the same model in PyTorch from the checkpoint and
 * compares. A chapter joins by one line in MODELS[] or DIGIT_MODELS[] (and a
 * tools/twin_NN.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "02_bahdanau_attention/bahdanau.h"
#include "03_dot_product_attention/attn_seq2seq.h"
#include "04_self_attention/digit_model.h"
#include "05_multi_head_attention/multi_head_model.h"
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

typedef struct {
    const char *model;   /* the config's "model=" value */
    int (*build)(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed);
    /* After train_step: the batch's logits, batch-major [B, Tt, V]. */
    void (*logits)(void *self, int B, int Tt, int V, float *out);
} TwinModel;

static const TwinModel MODELS[] = {
    {"rnn_seq2seq", rnn_seq2seq_build, rnn_seq2seq_logits},          /* chapter 01 */
    {"bahdanau", bahdanau_build, bahdanau_logits},                   /* chapter 02 */
    {"attn_seq2seq", attn_seq2seq_build, attn_seq2seq_logits},       /* chapter 03 */
};

/* ------------------------------------------------------ the digit models */

/* Chapter 04's DigitModel or chapter 05's MultiHeadModel behind one face. */
typedef struct {
    int multi_head;
    DigitModel d;
    MultiHeadModel m;
} Digits;

typedef struct {
    const char *task, *pos;
    int len, dim, heads, hidden, layers, causal, seed;
} DigitConfig;

static Params *digits_params(Digits *g) { return g->multi_head ? &g->m.params : &g->d.params; }

/* The chapters' tasks: 04's reverse, sort, count; 05 adds neighbours and count_next. */
static int digits_task(const char *name, DigitTask *t) {
    for (int i = 0; i < DIGIT_N_TASKS; i++)
        if (strcmp(name, digit_task_name((DigitTask)i)) == 0) { *t = (DigitTask)i; return 0; }
    if (strcmp(name, "neighbours") == 0) { *t = DIGIT_N_TASKS; return 0; }
    if (strcmp(name, "count_next") == 0) { *t = DIGIT_N_TASKS + 1; return 0; }
    return fail("task '%s': expected reverse, sort, count, neighbours or count_next", name);
}

static int digits_classes(DigitTask t, int N) {
    if ((int)t == DIGIT_N_TASKS) return NEIGHBOUR_CLASSES;
    if ((int)t == DIGIT_N_TASKS + 1) return count_next_classes(N);
    return digit_task_classes(t, N);
}

static void digits_batch(DigitTask t, int *x, int *y, int B, int N, Rng *rng) {
    if ((int)t == DIGIT_N_TASKS) neighbour_task_batch(x, y, B, N, rng);
    else if ((int)t == DIGIT_N_TASKS + 1) count_next_task_batch(x, y, B, N, rng);
    else digit_task_batch(t, x, y, B, N, rng);
}

static int digits_pos(const char *name, PosType *p) {
    for (int i = 0; i < POS_N_TYPES; i++)
        if (strcmp(name, pos_type_name((PosType)i)) == 0) { *p = (PosType)i; return 0; }
    return fail("pos '%s': expected none, sinusoidal or learned", name);
}

/* Build the model a config describes (parameters initialised from its seed). */
static int digits_create(Digits *g, int multi_head, const DigitConfig *c, int max_B, DigitTask *task) {
    PosType pos = POS_NONE;
    memset(g, 0, sizeof *g);
    g->multi_head = multi_head;
    if (digits_task(c->task, task) < 0 || digits_pos(c->pos, &pos) < 0) return -1;
    if (!multi_head && (int)*task >= DIGIT_N_TASKS)
        return fail("task '%s' is chapter 05's: use --model multi_head_model", c->task);
    if (c->heads < 1 || c->dim % c->heads != 0)
        return fail("heads %d must divide dim %d", c->heads, c->dim);
    int C = digits_classes(*task, c->len);
    if (multi_head)
        return mh_model_create(&g->m, c->len, c->dim, c->heads, c->dim / c->heads, c->hidden, c->layers, C,
                               pos, c->causal, MULTI_HEAD_PLAIN, max_B, (uint64_t)c->seed);
    return digit_model_create(&g->d, c->len, c->dim, c->hidden, c->layers, C, pos, c->causal, max_B,
                              (uint64_t)c->seed);
}

static void digits_free(Digits *g) {
    if (g->multi_head) mh_model_free(&g->m);
    else digit_model_free(&g->d);
}

static double digits_forward(Digits *g, const int *x, const int *y, int B) {
    return g->multi_head ? mh_model_forward(&g->m, x, y, B) : digit_model_forward(&g->d, x, y, B);
}

static void digits_backward(Digits *g, const int *x, const int *y) {
    if (g->multi_head) mh_model_backward(&g->m, x, y);
    else digit_model_backward(&g->d, x, y);
}

static void digits_predict(Digits *g, int *pred) {
    if (g->multi_head) mh_model_predict(&g->m, pred);
    else digit_model_predict(&g->d, pred);
}

static const float *digits_logits(Digits *g) { return g->multi_head ? g->m.logits : g->d.logits; }
static int digits_n_classes(Digits *g) { return g->multi_head ? g->m.C : g->d.C; }

static const char *const DIGIT_MODELS[] = {"digit_model", "multi_head_model"};   /* chapters 04, 05 */

static int config_digits(const char *config, DigitConfig *c, char *task, char *pos, int cap) {
    if (config_get(config, "task", task, cap) < 0 || config_get(config, "pos", pos, cap) < 0 ||
        config_get_int(config, "len", &c->len) < 0 || config_get_int(config, "dim", &c->dim) < 0 ||
        config_get_int(config, "heads", &c->heads) < 0 || config_get_int(config, "hidden", &c->hidden) < 0 ||
        config_get_int(config, "layers", &c->layers) < 0 || config_get_int(config, "causal", &c->causal) < 0 ||
        config_get_int(config, "seed", &c->seed) < 0)
        return -1;
    c->task = task;
    c->pos = pos;
    return 0;
}

/* twin_dump train CKPT [flags]: build, train, save. Returns the exit code. */
static int train_digits(int argc, char **argv) {
    const char *model = "digit_model", *out = argv[2];
    DigitConfig c = {"reverse", "sinusoidal", 8, 16, 1, 32, 2, 0, 1};
    int steps = 200, batch = 32;
    float lr = 3e-3f;
    const ArgSpec specs[] = {
        {"model", ARG_STRING, &model, "chapter 04 or 05's model", 0, 0, "digit_model,multi_head_model"},
        {"task", ARG_STRING, &c.task, "digit task", 0, 0, "reverse,sort,count,neighbours,count_next"},
        {"pos", ARG_STRING, &c.pos, "positional encoding", 0, 0, "none,sinusoidal,learned"},
        {"len", ARG_INT, &c.len, "sequence length N", 2, 64, NULL},
        {"dim", ARG_INT, &c.dim, "model width D", 1, 1024, NULL},
        {"heads", ARG_INT, &c.heads, "heads H (multi_head_model; D_H = D / H)", 1, 1024, NULL},
        {"hidden", ARG_INT, &c.hidden, "MLP hidden size", 1, 4096, NULL},
        {"layers", ARG_INT, &c.layers, "layers", 1, DIGIT_MAX_LAYERS, NULL},
        {"causal", ARG_BOOL, &c.causal, "causal mask", 0, 0, NULL},
        {"steps", ARG_INT, &steps, "training steps", 0, 1000000, NULL},
        {"batch", ARG_INT, &batch, "sequences per step", 1, 4096, NULL},
        {"lr", ARG_FLOAT, &lr, "Adam learning rate", 1e-6, 1, NULL},
        {"seed", ARG_INT, &c.seed, "seed of the model, the batches and the test stream", 0, 2147483647, NULL},
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    int rc = args_parse(argc - 2, argv + 2, specs, n_specs);   /* argv[2] (the path) plays argv[0] */
    if (rc == 1) {
        args_print_help("twin_dump train CHECKPOINT", "Train a chapter 04/05 digit model briefly and save it.",
                        specs, n_specs);
        return 0;
    }
    if (rc < 0) { fprintf(stderr, "twin_dump: %s\n", last_error()); return 2; }
    int multi_head = strcmp(model, "multi_head_model") == 0;
    Digits g;
    DigitTask task;
    if (digits_create(&g, multi_head, &c, batch, &task) < 0) {
        fprintf(stderr, "twin_dump: %s\n", last_error());
        return 1;
    }
    Params *p = digits_params(&g);
    Adam opt;
    if (adam_init(&opt, p, lr, 0.0f) < 0) { fprintf(stderr, "twin_dump: %s\n", last_error()); return 1; }
    int *x = xmalloc(sizeof(int) * (size_t)batch * c.len), *y = xmalloc(sizeof(int) * (size_t)batch * c.len);
    Rng rng;
    rng_seed(&rng, (uint64_t)c.seed, 1);          /* the chapters' training stream */
    double loss = 0.0;
    for (int step = 0; step < steps; step++) {
        digits_batch(task, x, y, batch, c.len, &rng);
        params_zero_grad(p);
        loss = digits_forward(&g, x, y, batch);
        digits_backward(&g, x, y);
        clip_grad_norm(p, 1.0f);
        adam_step(&opt, p, lr_schedule(step, steps, steps / 20, lr, 0.05f));
    }
    char config[1024];
    snprintf(config, sizeof config,
             "model=%s\ntask=%s\npos=%s\nlen=%d\ndim=%d\nheads=%d\nhidden=%d\nlayers=%d\ncausal=%d\nseed=%d\n",
             model, c.task, c.pos, c.len, c.dim, multi_head ? c.heads : 1, c.hidden, c.layers, c.causal, c.seed);
    rc = checkpoint_save(out, config, p);
    if (rc < 0) fprintf(stderr, "twin_dump: %s\n", last_error());
    else printf("twin_dump: trained %s (%s, %d steps, last loss %.4f) -> %s\n", model, c.task, steps, loss, out);
    free(x); free(y);
    adam_free(&opt);
    digits_free(&g);
    return rc < 0 ? 1 : 0;
}

/* One test batch of a digit model's checkpoint: forward, backward, predictions. */
static int dump_digits(const char *ckpt, const char *config, const char *model, const char *out, int B) {
    char task_name[32], pos_name[32];
    DigitConfig c;
    if (config_digits(config, &c, task_name, pos_name, sizeof task_name) < 0) return -1;
    Digits g;
    DigitTask task;
    if (digits_create(&g, strcmp(model, "multi_head_model") == 0, &c, B, &task) < 0) return -1;
    int rc = -1, N = c.len, C = digits_n_classes(&g);
    int *x = xmalloc(sizeof(int) * (size_t)B * N), *y = xmalloc(sizeof(int) * (size_t)B * N);
    int *pred = xmalloc(sizeof(int) * (size_t)B * N);
    Params *p = digits_params(&g);
    if (checkpoint_load(ckpt, p) == 0) {
        Rng rng;
        rng_seed(&rng, (uint64_t)c.seed, 99);     /* the chapters' test stream */
        digits_batch(task, x, y, B, N, &rng);
        params_zero_grad(p);
        float loss = (float)digits_forward(&g, x, y, B);
        digits_backward(&g, x, y);
        digits_predict(&g, pred);
        GoldWriter w;
        if (gold_writer_open(&w, out) == 0) {
            gold_write_i32(&w, "x", x, 2, (int[]){B, N});
            gold_write_i32(&w, "y", y, 2, (int[]){B, N});
            gold_write_f32(&w, "logits", digits_logits(&g), 3, (int[]){B, N, C});
            gold_write_f32(&w, "loss", &loss, 1, (int[]){1});
            for (int i = 0; i < p->n_tensors; i++) {
                const ParamTensor *t = &p->tensors[i];
                char name[PARAMS_NAME_LEN + 8];
                snprintf(name, sizeof name, "grad/%s", t->name);
                gold_write_f32(&w, name, p->grad + t->offset, t->ndim, t->dims);
            }
            gold_write_i32(&w, "pred", pred, 2, (int[]){B, N});
            rc = gold_writer_close(&w);
        }
    }
    if (rc == 0) printf("twin_dump: %s (%s, %d test sequences) -> %s\n", ckpt, model, B, out);
    free(x); free(y); free(pred);
    digits_free(&g);
    return rc;
}

/* ------------------------------------------------------------ the task */

/* The task a checkpoint was trained on, from its config lines (the same keys
 * common/train/seq2seq.c writes: task, data_seed, n_train, n_valid, n_test,
 * min_len, max_len). */
static int task_from_config(TaskConfig *tc, const char *config, char *task, int task_cap) {
    char seed[32];
    if (config_get(config, "task", task, task_cap) < 0 || task_defaults(tc, task) < 0) return -1;
    tc->task = task;
    if (config_get(config, "data_seed", seed, sizeof seed) < 0) return -1;
    tc->seed = strtoull(seed, NULL, 10);
    if (config_get_int(config, "n_train", &tc->n_train) < 0 ||
        config_get_int(config, "n_valid", &tc->n_valid) < 0 ||
        config_get_int(config, "n_test", &tc->n_test) < 0 ||
        config_get_int(config, "min_len", &tc->min_len) < 0 ||
        config_get_int(config, "max_len", &tc->max_len) < 0)
        return -1;
    return 0;
}

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s CHECKPOINT OUT.bin [--batch N] [--split test|valid|train]\n"
                    "       %s train CHECKPOINT [--model digit_model|multi_head_model] [...]  (train --help)\n",
            argv0, argv0);
    return 2;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "train") == 0) {
        threads_set(1);
        if (backend_select(NULL) < 0) { fprintf(stderr, "twin_dump: %s\n", last_error()); return 1; }
        return train_digits(argc, argv);
    }
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
    for (size_t i = 0; i < sizeof DIGIT_MODELS / sizeof DIGIT_MODELS[0]; i++)
        if (strcmp(DIGIT_MODELS[i], model_name) == 0) {
            rc = dump_digits(ckpt, config, model_name, out, want_batch) == 0 ? 0 : 1;
            if (rc) goto error;
            goto done;
        }
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (strcmp(MODELS[i].model, model_name) == 0) tm = &MODELS[i];
    if (!tm) { fail("%s: model '%s' has no twin in tools/twin_dump.c", ckpt, model_name); goto error; }
    if (task_from_config(&tc, config, task, sizeof task) < 0) goto error;
    if (dataset_load(&data, &tc) < 0) goto error;
    const Split *split = dataset_split(&data, split_name);
    if (!split) { fail("--split %s: expected test, valid or train", split_name); goto error; }
    int B = want_batch < split->n ? want_batch : split->n;
    if (tm->build(&model, &data, config, B, 1) < 0) goto error;
    if (checkpoint_load(ckpt, model.params) < 0) goto error;

    /* ---- one batch, forward and backward */
    batch_alloc(&batch, B, data.max_src_len, data.max_tgt_len);
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
