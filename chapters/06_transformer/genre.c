/* genre.c - chapter 06, part 6: the GPT's features under a genre head,
 * trained from scratch, as a frozen probe, or fine-tuned (see genre.h).
 *
 * Reading order: genre_create() (the GPT's tensors, then the head's),
 * genre_read_gpt() and genre_load_gpt() (a pretrained GPT into it),
 * cut_windows() (passages into windows of N), genre_forward() (features,
 * mean over the passage, head, loss), genre_backward() (the same in
 * reverse), then the Classifier face. */
#include "06_transformer/genre.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/brown.h"
#include "data/brown_genre.h"
#include "io/checkpoint.h"
#include "nn/layers.h"
#include "train/memory.h"
#include "util/error.h"
#include "util/util.h"

const ConfigField GENRE_CONFIG_FIELDS[] = {
    {"classes", CONFIG_INT, offsetof(GenreConfig, classes), .lo = 2, .hi = 1000},
    {"max_tokens", CONFIG_INT, offsetof(GenreConfig, max_tokens), .lo = 1, .hi = 1 << 16},
    {"frozen", CONFIG_INT, offsetof(GenreConfig, frozen), .lo = 0, .hi = 1},
    {"tokens", CONFIG_CHOICE, offsetof(GenreConfig, tokens), .choices = "word,char"},   /* BrownTokens' order */
    {"vocab_crc", CONFIG_TEXT, offsetof(GenreConfig, vocab_crc), .size = 16},
};
const int GENRE_CONFIG_N = (int)(sizeof GENRE_CONFIG_FIELDS / sizeof GENRE_CONFIG_FIELDS[0]);

/* ================================================================= model */

static float *floats(size_t n) { return xcalloc(n > 0 ? n : 1, sizeof(float)); }

void genre_free(Genre *m) {
    gpt_free(&m->g);
    free(m->windows);
    free(m->first);
    free(m->count);
    free(m->f);
    free(m->logits);
    free(m->probs);
    free(m->dlogits);
    free(m->df);
    free(m->dZ);
    memset(m, 0, sizeof *m);
}

int genre_create(Genre *m, const GenreConfig *cfg, int max_B, uint64_t seed) {
    memset(m, 0, sizeof *m);
    if (cfg->classes < 2) return fail("classes=%d: expected at least 2", cfg->classes);
    if (cfg->max_tokens < 1) return fail("max_tokens=%d: expected at least 1", cfg->max_tokens);
    if (max_B < 1) return fail("batch %d: expected at least 1 passage", max_B);
    m->cfg = *cfg;
    m->C = cfg->classes;
    m->T = cfg->max_tokens;
    m->max_B = max_B;
    /* the GPT's tensors, the head's after them, then all allocated */
    if (gpt_declare(&m->g, &cfg->gpt) < 0) return -1;
    const int D = m->g.D, N = m->g.N, C = m->C;
    m->W = params_add(&m->g.params, "head.W", 2, (int[]){D, C});
    m->b = params_add(&m->g.params, "head.b", 1, (int[]){C});
    m->max_windows = max_B * ((m->T + N - 1) / N);
    if (gpt_alloc(&m->g, m->max_windows, seed) < 0) return -1;
    Rng rng;
    rng_seed(&rng, seed, 11);   /* the GPT's own draws use streams 1 and 7 */
    init_xavier(params_data(&m->g.params, m->W), D, C, &rng);
    const size_t B = (size_t)max_B, R = (size_t)m->max_windows * N;
    m->windows = xcalloc(R, sizeof(int));
    m->first = xcalloc(B, sizeof(int));
    m->count = xcalloc(B, sizeof(int));
    m->f = floats(B * D);
    m->logits = floats(B * C);
    m->probs = floats(B * C);
    m->dlogits = floats(B * C);
    m->df = floats(B * D);
    m->dZ = floats(R * D);
    return 0;
}

int genre_read_gpt(const char *path, GenreConfig *cfg) {
    char *text = NULL, tokens[16];
    if (checkpoint_read_config(path, &text) < 0) return -1;
    int rc = checkpoint_check_model(path, text, "gpt", "06_gpt");
    if (rc == 0 && config_read(text, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg->gpt) < 0)
        rc = fail("%s: %s", path, last_error());
    if (rc == 0 && config_get(text, "tokens", tokens, sizeof tokens) < 0) rc = fail("%s: %s", path, last_error());
    if (rc == 0 && config_get_or(text, "vocab_crc", "", cfg->vocab_crc, sizeof cfg->vocab_crc) < 0)
        rc = fail("%s: %s", path, last_error());
    if (rc == 0) {
        if (strcmp(tokens, "char") == 0) cfg->tokens = BROWN_CHARS;
        else if (strcmp(tokens, "word") == 0) cfg->tokens = BROWN_WORDS;
        else {
            char quoted[96];
            rc = fail("%s: a GPT of tokens=%s: expected char or word (a BPE model's merges are not read here; "
                      "train one with --tokens char or --tokens word)", path,
                      error_excerpt(tokens, quoted, sizeof quoted));
        }
    }
    if (rc == 0 && cfg->vocab_crc[0] == '\0')
        rc = fail("%s: a GPT saved without vocab_crc=: its vocabulary cannot be checked against the corpus (train "
                  "it again)", path);
    free(text);
    return rc;
}

int genre_load_gpt(Genre *m, const char *path) {
    GenreConfig saved = m->cfg;
    if (genre_read_gpt(path, &saved) < 0) return -1;
    Gpt pretrained;   /* the whole GPT read, every tensor copied into m's of the same name */
    if (gpt_create(&pretrained, &saved.gpt, 1, 0) < 0) return fail("%s: %s", path, last_error());
    int rc = checkpoint_load(path, &pretrained.params);
    for (int i = 0; rc == 0 && i < pretrained.params.n_tensors; i++) {
        const ParamTensor *from = &pretrained.params.tensors[i], *to = params_find(&m->g.params, from->name);
        if (!to || to->count != from->count) {
            rc = fail("%s: tensor %s is not the shape of this model's (expected the GPT it was built from)", path,
                      from->name);
            break;
        }
        memcpy(m->g.params.data + to->offset, pretrained.params.data + from->offset, sizeof(float) * to->count);
    }
    gpt_free(&pretrained);
    return rc;
}

/* ============================================================== forward */

/* tokens [B, T] -> m->windows [n_windows, N]: passage b's n_b tokens in
 * windows first[b] .. first[b] + ceil(n_b / N) - 1, the last one padded
 * with token 0 (after the real ones: causal attention keeps it out of
 * their features). */
static void cut_windows(Genre *m, const int *tokens, int B) {
    const int N = m->g.N, T = m->T;
    int w = 0;
    for (int b = 0; b < B; b++) {
        const int *row = tokens + (size_t)b * T;
        int n = 0;
        while (n < T && row[n] != BROWN_GENRE_PAD) n++;
        m->first[b] = w;
        m->count[b] = n;
        const int nw = n > 0 ? (n + N - 1) / N : 1;   /* an empty passage: one window of pads */
        memset(m->windows + (size_t)w * N, 0, sizeof(int) * (size_t)nw * N);
        memcpy(m->windows + (size_t)w * N, row, sizeof(int) * (size_t)n);
        w += nw;
    }
    m->n_windows = w;
}

double genre_forward(Genre *m, const int *tokens, const int *targets, int B, int train) {
    const int D = m->g.D, N = m->g.N, C = m->C;
    m->B = B;
    cut_windows(m, tokens, B);
    /* Z [windows N, D]: window w's position t is row w N + t, so a passage's real positions are one run of rows */
    const float *Z = gpt_features(&m->g, m->windows, m->n_windows, train);
    /* f_b = mean of Z over passage b's real positions */
    memset(m->f, 0, sizeof(float) * (size_t)B * D);
    for (int b = 0; b < B; b++) {
        float *f = m->f + (size_t)b * D;
        const float *z = Z + (size_t)m->first[b] * N * D;
        for (int t = 0; t < m->count[b]; t++)
            for (int d = 0; d < D; d++) f[d] += z[(size_t)t * D + d];
        const float inv = m->count[b] > 0 ? 1.0f / (float)m->count[b] : 0.0f;
        for (int d = 0; d < D; d++) f[d] *= inv;
    }
    /* logits [B, C] = f W + b */
    linear_forward(m->logits, m->f, params_data(&m->g.params, m->W), params_data(&m->g.params, m->b), B, D, C);
    if (!targets) return 0.0;
    int counted = 0;
    const double sum = cross_entropy_forward(m->probs, m->logits, targets, B, C, -1, &counted);
    return counted ? sum / counted : 0.0;
}

/* ============================================================= backward */

void genre_backward(Genre *m, const int *targets) {
    Params *p = &m->g.params;
    const int B = m->B, D = m->g.D, N = m->g.N, C = m->C;
    /* the loss, then the head: dlogits = (probs - onehot) / B; dW += f^T dlogits, db += sum, df = dlogits W^T */
    memset(m->dlogits, 0, sizeof(float) * (size_t)B * C);
    cross_entropy_backward(m->dlogits, m->probs, targets, B, C, -1, 1.0f / (float)B);
    memset(m->df, 0, sizeof(float) * (size_t)B * D);
    linear_backward(m->df, params_grad(p, m->W), params_grad(p, m->b), m->dlogits, m->f, params_data(p, m->W), B, D,
                    C);
    if (m->cfg.frozen) return;   /* the probe: the pretrained GPT stays as loaded */
    /* the mean: each real position's dZ is df_b / n_b; pads get none */
    memset(m->dZ, 0, sizeof(float) * (size_t)m->n_windows * N * D);
    for (int b = 0; b < B; b++) {
        if (m->count[b] == 0) continue;
        const float inv = 1.0f / (float)m->count[b], *df = m->df + (size_t)b * D;
        float *dz = m->dZ + (size_t)m->first[b] * N * D;
        for (int t = 0; t < m->count[b]; t++)
            for (int d = 0; d < D; d++) dz[(size_t)t * D + d] = df[d] * inv;
    }
    gpt_features_backward(&m->g, m->windows, m->n_windows, m->dZ);
}

/* ---------------------------------------------------- the Classifier face */

typedef struct {
    Genre m;
    int training;
} GenreFace;

static double face_forward(void *self, const Examples *e) {
    GenreFace *f = self;
    return genre_forward(&f->m, e->tokens, e->targets, e->B, f->training);
}
static void face_backward(void *self, const Examples *e) { genre_backward(&((GenreFace *)self)->m, e->targets); }
static void face_predict(void *self, int *pred) {
    const Genre *m = &((GenreFace *)self)->m;
    for (int b = 0; b < m->B; b++) {
        const float *z = m->logits + (size_t)b * m->C;
        int best = 0;
        for (int c = 1; c < m->C; c++) if (z[c] > z[best]) best = c;
        pred[b] = best;
    }
}
static const float *face_logits(void *self) { return ((GenreFace *)self)->m.logits; }
static void face_set_training(void *self, int on) { ((GenreFace *)self)->training = on; }
static void face_destroy(void *self) {
    genre_free(&((GenreFace *)self)->m);
    free(self);
}

int genre_build(Classifier *c, const GenreConfig *cfg, int max_B, uint64_t seed, const char *gpt_path) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("06_gpt_genre", "a smaller --batch");
    GenreFace *f = xcalloc(1, sizeof *f);
    int rc = genre_create(&f->m, cfg, max_B, seed);
    memory_budget_end();
    if (rc == 0 && gpt_path) rc = genre_load_gpt(&f->m, gpt_path);
    if (rc < 0) {
        genre_free(&f->m);
        free(f);
        return -1;
    }
    memset(c, 0, sizeof *c);
    c->self = f;
    c->params = &f->m.g.params;
    c->max_B = max_B;
    c->n_out = 1;
    c->classes = cfg->classes;
    c->forward = face_forward;
    c->backward = face_backward;
    c->predict = face_predict;
    c->logits = face_logits;
    c->destroy = face_destroy;
    c->set_training = face_set_training;
    c->rng = &f->m.g.dropout_rng;
    return 0;
}
