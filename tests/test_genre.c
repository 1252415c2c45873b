/* test_genre.c - chapter 06, part 6: the genre classifier on the GPT's
 * features (genre.c) and the genre task (common/data/brown_genre.c).
 *
 *  - the whole model's backward against finite differences (every GPT
 *    tensor through gpt_features_backward, the mean over each passage's real
 *    positions, the head), passages of one, two and three windows;
 *  - frozen: the head's gradients are the same, the GPT's are zero;
 *  - a passage's logits do not depend on the other passages of its batch,
 *    nor on the windows' padding;
 *  - a 06_gpt checkpoint loads into it tensor for tensor; a checkpoint of
 *    another kind, a BPE GPT, or one without vocab_crc is refused by name;
 *  - the shipped corpus's genres: 500 texts, no text's passages on two sides
 *    of the split, every passage 64..256 characters ending at a word's end,
 *    60 evaluated passages per genre taken in turn and the same for every
 *    seed, the labelled ones the seed's draw; a corpus whose text names
 *    carry no genre is refused. */
#include "06_transformer/genre.h"
#include "data/brown.h"
#include "data/brown_genre.h"
#include "io/checkpoint.h"
#include "nn/gradcheck.h"
#include "util/error.h"
#include "util/util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <cmocka.h>

#include "temp_dir.h"

enum { V = 11, N = 6, T = 14, B = 3, C = 4 };

static char tmp_dir[256];

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_genre");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

static GenreConfig tiny(int frozen) {
    GenreConfig c;
    memset(&c, 0, sizeof c);
    c.gpt.layers = 2;
    c.gpt.block = (BlockSpec){.D = 8, .H = 2, .D_H = 4, .F = 12, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                              .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN};
    c.gpt.pos = POSITIONS_LEARNED;
    c.gpt.context = N;
    c.gpt.V = V;
    c.classes = C;
    c.max_tokens = T;
    c.frozen = frozen;
    c.tokens = BROWN_CHARS;
    snprintf(c.vocab_crc, sizeof c.vocab_crc, "0badc0de");
    return c;
}

/* Passages of 14 (three windows: 6, 6, 2), 5 and 9 tokens, pads after. */
static void passages(int *tokens, int *targets) {
    const int len[B] = {14, 5, 9};
    Rng r;
    rng_seed(&r, 3, 0);
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < T; i++) tokens[b * T + i] = i < len[b] ? (int)rng_below(&r, V) : BROWN_GENRE_PAD;
        targets[b] = b % C;
    }
}

/* Move the weights off their initial values, so every path carries a gradient. */
static void spread(Genre *m, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed, 0);
    Params *p = &m->g.params;
    for (int t = 0; t < p->n_tensors; t++) {
        float *x = p->data + p->tensors[t].offset;
        for (size_t i = 0; i < p->tensors[t].count; i++)
            x[i] = strstr(p->tensors[t].name, "norm") ? 1.0f + 0.3f * (rng_uniform(&r) - 0.5f)
                   : strstr(p->tensors[t].name, "_emb") ? x[i] * 25.0f : x[i] + 0.2f * (rng_uniform(&r) - 0.5f);
    }
}

typedef struct {
    Genre *m;
    const int *tokens, *targets;
} LossCtx;

static double model_loss(void *ctx) {
    LossCtx *c = ctx;
    return genre_forward(c->m, c->tokens, c->targets, B, 0);
}

static void test_genre_gradients(void **state) {
    (void)state;
    int tokens[B * T], targets[B];
    passages(tokens, targets);
    GenreConfig c = tiny(0);
    Genre m;
    assert_int_equal(genre_create(&m, &c, B, 9), 0);
    spread(&m, 4);
    Params *p = &m.g.params;
    params_zero_grad(p);
    assert_true(genre_forward(&m, tokens, targets, B, 0) > 0);
    assert_int_equal(m.n_windows, 3 + 1 + 2);
    genre_backward(&m, targets);
    float *analytic = xmalloc(sizeof(float) * p->size);
    memcpy(analytic, p->grad, sizeof(float) * p->size);
    LossCtx ctx = {&m, tokens, targets};
    for (int t = 0; t < p->n_tensors; t++) {   /* tensor by tensor, to name a wrong one */
        const ParamTensor *pt = &p->tensors[t];
        GradCheckResult res = gradcheck(model_loss, &ctx, p->data + pt->offset, analytic + pt->offset, pt->count,
                                        1e-3f, 300);
        if (res.max_rel_err > 2e-2)
            print_error("%s: max rel err %g at %zu (numeric %g, analytic %g)\n", pt->name, res.max_rel_err,
                        res.worst_index, res.worst_numeric, res.worst_analytic);
        assert_true(res.max_rel_err < 2e-2);
    }

    /* frozen: the same head gradients, none for the GPT */
    m.cfg.frozen = 1;
    params_zero_grad(p);
    genre_forward(&m, tokens, targets, B, 0);
    genre_backward(&m, targets);
    for (int t = 0; t < p->n_tensors; t++) {
        const ParamTensor *pt = &p->tensors[t];
        const int head = strncmp(pt->name, "head.", 5) == 0;
        for (size_t i = 0; i < pt->count; i++) {
            const float want = head ? analytic[pt->offset + i] : 0.0f;
            if (p->grad[pt->offset + i] != want)
                fail_msg("frozen, %s[%zu]: gradient %g, expected %g", pt->name, i, (double)p->grad[pt->offset + i],
                         (double)want);
        }
    }
    free(analytic);
    genre_free(&m);
}

/* Passage 1 alone, or beside others, or with another passage's tokens
 * changed: the same logits, bit for bit. */
static void test_genre_passages_are_independent(void **state) {
    (void)state;
    int tokens[B * T], targets[B];
    passages(tokens, targets);
    GenreConfig c = tiny(0);
    Genre m;
    assert_int_equal(genre_create(&m, &c, B, 9), 0);
    spread(&m, 4);
    genre_forward(&m, tokens, NULL, B, 0);
    float together[C];
    memcpy(together, m.logits + C, sizeof together);
    tokens[0] = (tokens[0] + 1) % V;
    tokens[2 * T + 3] = (tokens[2 * T + 3] + 5) % V;
    genre_forward(&m, tokens, NULL, B, 0);
    assert_memory_equal(m.logits + C, together, sizeof together);
    genre_forward(&m, tokens + T, NULL, 1, 0);
    for (int k = 0; k < C; k++) assert_float_equal(m.logits[k], together[k], 1e-6);
    /* a change inside the passage does change them */
    tokens[T + 4] = (tokens[T + 4] + 1) % V;
    genre_forward(&m, tokens + T, NULL, 1, 0);
    int changed = 0;
    for (int k = 0; k < C; k++) changed |= m.logits[k] != together[k];
    assert_true(changed);
    genre_free(&m);
}

/* A GPT checkpoint with config text config (its own tensors from seed). */
static void save_gpt(const char *path, const GptConfig *cfg, const char *config, uint64_t seed) {
    Gpt g;
    assert_int_equal(gpt_create(&g, cfg, 1, seed), 0);
    assert_int_equal(checkpoint_save(path, config, &g.params), 0);
    gpt_free(&g);
}

static void gpt_text(char *buf, size_t cap, const GptConfig *cfg, const char *model, const char *tokens,
                     const char *crc) {
    buf[0] = '\0';
    assert_int_equal(config_append(buf, cap, "model=%s\n", model), 0);
    assert_int_equal(config_write(buf, cap, GPT_CONFIG_FIELDS, GPT_CONFIG_N, cfg), 0);
    assert_int_equal(config_append(buf, cap, "tokens=%s\n%s", tokens, crc), 0);
}

static void assert_error_mentions(const char *needle) {
    if (!strstr(last_error(), needle)) fail_msg("error \"%s\" does not mention \"%s\"", last_error(), needle);
}

static void test_genre_loads_a_gpt(void **state) {
    (void)state;
    GenreConfig c = tiny(0);
    char path[512], text[2048];
    snprintf(path, sizeof path, "%s/gpt.ckpt", tmp_dir);
    gpt_text(text, sizeof text, &c.gpt, "gpt", "char", "vocab_crc=1234abcd\n");
    save_gpt(path, &c.gpt, text, 21);

    GenreConfig read;
    memset(&read, 0, sizeof read);
    assert_int_equal(genre_read_gpt(path, &read), 0);
    assert_int_equal(read.gpt.block.D, 8);
    assert_int_equal(read.gpt.V, V);
    assert_int_equal(read.tokens, BROWN_CHARS);
    assert_string_equal(read.vocab_crc, "1234abcd");
    read.classes = C;
    read.max_tokens = T;
    Genre m;
    assert_int_equal(genre_create(&m, &read, 2, 5), 0);
    float head_before = m.g.params.data[params_find(&m.g.params, "head.W")->offset];
    assert_int_equal(genre_load_gpt(&m, path), 0);
    Gpt g;
    assert_int_equal(gpt_create(&g, &c.gpt, 1, 21), 0);
    for (int t = 0; t < g.params.n_tensors; t++) {
        const ParamTensor *from = &g.params.tensors[t], *to = params_find(&m.g.params, from->name);
        assert_non_null(to);
        assert_memory_equal(m.g.params.data + to->offset, g.params.data + from->offset, sizeof(float) * from->count);
    }
    assert_true(m.g.params.data[params_find(&m.g.params, "head.W")->offset] == head_before);   /* the head stays */
    gpt_free(&g);
    genre_free(&m);

    /* the wrong kinds, each refused by name */
    gpt_text(text, sizeof text, &c.gpt, "ch07_cnn", "char", "vocab_crc=1234abcd\n");
    save_gpt(path, &c.gpt, text, 21);
    assert_int_equal(genre_read_gpt(path, &read), -1);
    assert_error_mentions(path);
    assert_error_mentions("06_gpt");
    gpt_text(text, sizeof text, &c.gpt, "gpt", "bpe", "vocab_crc=1234abcd\n");
    save_gpt(path, &c.gpt, text, 21);
    assert_int_equal(genre_read_gpt(path, &read), -1);
    assert_error_mentions("tokens=bpe");
    gpt_text(text, sizeof text, &c.gpt, "gpt", "char", "");
    save_gpt(path, &c.gpt, text, 21);
    assert_int_equal(genre_read_gpt(path, &read), -1);
    assert_error_mentions("vocab_crc");
    /* a GPT of another width: its tensors do not fit this model */
    GptConfig wide = c.gpt;
    wide.block.D = 12;
    wide.block.D_H = 6;
    gpt_text(text, sizeof text, &wide, "gpt", "char", "vocab_crc=1234abcd\n");
    save_gpt(path, &wide, text, 21);
    assert_int_equal(genre_create(&m, &c, 2, 5), 0);
    assert_int_equal(genre_load_gpt(&m, path), -1);
    assert_error_mentions(path);
    genre_free(&m);
}

/* ---- the shipped corpus's genres ------------------------------------------ */

static void test_brown_genres(void **state) {
    (void)state;
    BrownConfig bc;
    brown_defaults(&bc, BROWN_CHARS);
    bc.keep_texts = 1;
    static BrownCorpus c;
    if (brown_load_config(&c, &bc) < 0) fail_msg("%s", last_error());
    assert_int_equal(c.n_texts, 500);
    BrownGenre g, h;
    BrownGenreConfig cfg = {.per_genre = 50, .eval_per_genre = 60, .split = BROWN_GENRE_TEST, .seed = 1};
    if (brown_genre_build(&g, &c, &cfg) < 0) fail_msg("%s", last_error());
    /* 500 texts in 15 genres, each with texts on all three sides, none on two */
    int texts = 0;
    for (int k = 0; k < BROWN_GENRES; k++)
        for (int s = 0; s < 3; s++) {
            assert_true(g.texts_per_split[s][k] >= 1);
            texts += g.texts_per_split[s][k];
        }
    assert_int_equal(texts, 500);
    assert_int_equal(g.texts_per_split[0][brown_genre_of_letter('m')], 4);   /* science fiction: 6 texts */
    /* passages: 64 .. 256 characters, in one text, starting and ending at a word */
    for (int i = 0; i < g.n_all; i++) {
        const BrownPassage *p = &g.all[i];
        const BrownText *t = &c.texts[p->text];
        assert_in_range(p->len, BROWN_PASSAGE_MIN, BROWN_PASSAGE_MAX);
        assert_true(p->start + p->len <= t->len);
        assert_true(p->start == 0 || t->text[p->start - 1] == ' ' || t->text[p->start - 1] == '\n');
        assert_true(p->start + p->len == t->len || t->text[p->start + p->len] == ' ' ||
                    t->text[p->start + p->len] == '\n');
        assert_int_equal(p->genre, brown_genre_of_letter(t->name[1]));
    }
    /* 60 per genre evaluated, in turn: example i is genre i % 15 */
    assert_int_equal(g.n_eval, 900);
    for (int i = 0; i < g.n_eval; i++) assert_int_equal(g.eval_genre[i], i % BROWN_GENRES);
    assert_int_equal(g.n_labelled, 750);
    /* another seed: other labelled passages, the same evaluated ones; the validation texts: others */
    cfg.seed = 2;
    if (brown_genre_build(&h, &c, &cfg) < 0) fail_msg("%s", last_error());
    const size_t eval_bytes = sizeof(int) * (size_t)g.n_eval * g.max_tokens;
    assert_memory_equal(h.eval_tokens, g.eval_tokens, eval_bytes);
    assert_memory_not_equal(h.labelled_tokens, g.labelled_tokens, sizeof(int) * (size_t)g.n_labelled * g.max_tokens);
    brown_genre_free(&h);
    cfg.split = BROWN_GENRE_VALID;
    if (brown_genre_build(&h, &c, &cfg) < 0) fail_msg("%s", last_error());
    assert_memory_not_equal(h.eval_tokens, g.eval_tokens, eval_bytes);
    brown_genre_free(&h);
    /* the cap: science fiction's training texts hold fewer than 1000 */
    cfg.per_genre = 1000;
    if (brown_genre_build(&h, &c, &cfg) < 0) fail_msg("%s", last_error());
    const int m = brown_genre_of_letter('m');
    assert_true(h.labelled_per_genre[m] > 200 && h.labelled_per_genre[m] < 1000);
    assert_int_equal(h.labelled_per_genre[brown_genre_of_letter('j')], 1000);
    brown_genre_free(&h);
    /* a labelled passage's tokens are its text */
    char buf[BROWN_PASSAGE_MAX + 1] = "";
    const int *row = g.labelled_tokens;
    for (int i = 0; i < g.max_tokens && row[i] != BROWN_GENRE_PAD; i++) strcat(buf, brown_token(&c, row[i]));
    assert_in_range(strlen(buf), BROWN_PASSAGE_MIN, BROWN_PASSAGE_MAX);
    int found = 0;
    for (int t = 0; t < c.n_texts && !found; t++) found = c.texts[t].name[1] == 'a' && strstr(c.texts[t].text, buf);
    assert_true(found);
    brown_genre_free(&g);
    /* a corpus loaded without its texts is refused */
    BrownCorpus plain = c;
    plain.texts = NULL;
    plain.n_texts = 0;
    assert_int_equal(brown_genre_build(&g, &plain, &cfg), -1);
    assert_error_mentions("keep_texts");
    brown_free(&c);
}

static void test_brown_genres_refuse_a_text_without_a_genre(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/names.gz", tmp_dir);
    gzFile gz = gzopen(path, "wb9");
    assert_non_null(gz);
    gzputs(gz, "# ca01\n\tThe/at cat/nn sat/vbd ./.\n# zz02\n\tA/at dog/nn ran/vbd ./.\n\tIt/pps sat/vbd ./.\n");
    gzclose(gz);
    BrownConfig bc;
    brown_defaults(&bc, BROWN_CHARS);
    bc.path = path;
    bc.n_train = 8;
    bc.n_valid = 1;
    bc.keep_texts = 1;
    BrownCorpus c;
    if (brown_load_config(&c, &bc) < 0) fail_msg("%s", last_error());
    assert_int_equal(c.n_texts, 2);
    assert_string_equal(c.texts[1].name, "zz02");
    BrownGenre g;
    BrownGenreConfig cfg = {.per_genre = 5, .eval_per_genre = 5, .split = BROWN_GENRE_TEST, .seed = 1};
    assert_int_equal(brown_genre_build(&g, &c, &cfg), -1);
    assert_error_mentions("zz02");
    assert_error_mentions("genre letter");
    brown_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_genre_gradients),
        cmocka_unit_test(test_genre_passages_are_independent),
        cmocka_unit_test(test_genre_loads_a_gpt),
        cmocka_unit_test(test_brown_genres),
        cmocka_unit_test(test_brown_genres_refuse_a_text_without_a_genre),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
