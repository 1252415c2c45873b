/* main_gpt_genre.c - chapter 06, part 6: pretrain, then fine-tune. The GPT
 * build/06_gpt trained on the Brown corpus's text is given a linear head
 * and taught the genre of a passage (15 classes, data/brown_genre.h) from a
 * few labelled passages per genre, three ways (genre.h): from scratch, as a
 * frozen probe of the pretrained features, and fine-tuned.
 *
 *   ./build/06_gpt_genre                         the quick default (make run-06): 50 passages per genre
 *   ./build/06_gpt_genre --per-genre 200 --steps 600   more labels
 *   ./build/06_gpt_genre --load out/06_gpt_genre/model_finetune.ckpt   evaluate a saved model on the test texts
 *
 * The program, top to bottom: the flags; the pretrained GPT's config (its
 * architecture and its view of the corpus); the corpus and the genre task
 * (with --load: the saved model evaluated, and done); one run per way,
 * each built, trained, tested and saved; the results table, results.json.
 * Each step is a call of the classifier driver (common/train/classifier.h). */
#include <stdio.h>
#include <string.h>

#include "06_transformer/genre.h"
#include "data/brown.h"
#include "data/brown_genre.h"
#include "io/plot.h"
#include "train/classifier.h"
#include "util/error.h"
#include "util/output.h"

#define EVAL_PER_GENRE 60   /* evaluated passages per genre: 900 in all (the fewest a genre has is 76) */

static const ClassifierProgram PROGRAM = {
    .chapter = "06_gpt_genre",
    .model_name = GENRE_MODEL_NAME,
    .summary = "Chapter 06, part 6: the GPT of build/06_gpt, pretrained on the Brown corpus, given a linear head\n"
               "on its mean feature and taught the genre of a passage of 64-256 characters (15 genres) from\n"
               "--per-genre labelled passages: from scratch, as a frozen probe, and fine-tuned. Split by text.",
    .examples = "./build/06_gpt_genre\n"
                "./build/06_gpt_genre --per-genre 200 --steps 600\n"
                "./build/06_gpt_genre --runs probe,finetune --split valid\n"
                "./build/06_gpt_genre --load out/06_gpt_genre/model_finetune.ckpt",
    .load_hint = "(evaluates it on the test texts' passages)",
};

typedef struct {
    const char *key, *label;
    int pretrained, frozen;
} Way;

static const Way WAYS[] = {
    {"scratch", "from scratch (the GPT's shape, new weights)", 0, 0},
    {"probe", "pretrained GPT, frozen: the head only", 1, 1},
    {"finetune", "pretrained GPT, fine-tuned with the head", 1, 0},
};

/* --runs "scratch,probe": which of WAYS, into use[3]. 0, or -1 with fail(). */
static int parse_runs(const char *list, int *use) {
    memset(use, 0, 3 * sizeof *use);
    char buf[128];
    if (strlen(list) >= sizeof buf) return fail("--runs: too long (expected names among scratch,probe,finetune)");
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save), n++) {
        int k = 0;
        while (k < 3 && strcmp(item, WAYS[k].key) != 0) k++;
        char quoted[96];
        if (k == 3)
            return fail("--runs: '%s' is not a run: expected names among scratch,probe,finetune",
                        error_excerpt(item, quoted, sizeof quoted));
        if (use[k]) return fail("--runs: %s twice", WAYS[k].key);
        use[k] = 1;
    }
    if (n == 0) return fail("--runs: empty: expected names among scratch,probe,finetune");
    return 0;
}

/* The corpus in the model's view, with its texts; its vocabulary checked
 * against the model's (size and fingerprint). 0, or -1 with fail(). */
static int load_corpus(BrownCorpus *corpus, const GenreConfig *cfg, const char *data, const char *model_path) {
    BrownConfig bc;
    brown_defaults(&bc, (BrownTokens)cfg->tokens);
    if (data && data[0]) bc.path = data;
    bc.keep_texts = 1;
    if (brown_load_config(corpus, &bc) < 0) return -1;
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)brown_vocab_crc(corpus));
    if (corpus->V != cfg->gpt.V || strcmp(crc, cfg->vocab_crc) != 0)
        return fail("%s: the model's vocabulary (%d tokens, vocab_crc=%s) is not the one %s gives (%d tokens, "
                    "vocab_crc=%s): expected the corpus its GPT was trained on", model_path, cfg->gpt.V,
                    cfg->vocab_crc, bc.path, corpus->V, crc);
    return 0;
}

/* "50 per genre", or with genres that have fewer: "1000 per genre; m 302, r 473". */
static const char *per_genre_note(const BrownGenre *g, int per_genre) {
    static char note[256];
    int at = snprintf(note, sizeof note, "%d per genre", per_genre);
    const char *sep = "; ";
    for (int k = 0; k < BROWN_GENRES && at < (int)sizeof note - 16; k++)
        if (g->labelled_per_genre[k] < per_genre) {
            at += snprintf(note + at, sizeof note - (size_t)at, "%s%c %d", sep, brown_genre_letter(k),
                           g->labelled_per_genre[k]);
            sep = ", ";
        }
    return note;
}

/* The run's confusion matrix on the evaluated passages, OUT/confusion_KEY.png
 * (row: the true genre; each row's shares sum to 1), and its accuracy per
 * genre into results.json (KEY_acc_a .. KEY_acc_r). 0, or -1 with fail(). */
static int draw_confusion(ClassifierRuns *runs, const ClassifierRun *run, Classifier *m, const ExampleTask *t) {
    enum { C = BROWN_GENRES };
    long confusion[C * C], per_genre[C] = {0};
    float share[C * C];
    classifier_confusion(runs, m, t, C, confusion);
    for (int i = 0; i < C * C; i++) per_genre[i / C] += confusion[i];
    for (int i = 0; i < C * C; i++) share[i] = per_genre[i / C] ? (float)confusion[i] / per_genre[i / C] : 0.0f;
    /* tick labels "a-press-reportage": '-' for a space (plot.c draws a space as a visible sign), no ':' or ',' */
    char names[C][32];
    const char *labels[C];
    for (int k = 0; k < C; k++) {
        const char *name = brown_genre_name(k);
        int n = snprintf(names[k], sizeof names[k], "%c-", brown_genre_letter(k));
        for (const char *q = name; *q && n < (int)sizeof names[k] - 1; q++)
            if (*q != ':' && *q != ',') names[k][n++] = *q == ' ' ? '-' : *q;
        names[k][n] = '\0';
        labels[k] = names[k];
    }
    char stem[1100], title[200];
    if (path_format(stem, sizeof stem, "%s/confusion_%.24s", runs->flags.shared.out, run->key) < 0) return -1;
    snprintf(title, sizeof title, "%.100s: passages of each true genre (row) by predicted genre", run->label);
    if (plot_heatmap(stem, title, share, C, C, labels, labels, "predicted genre", "true genre",
                     "share of the true genre's passages", 0.0f, 1.0f) < 0)
        return -1;
    printf("  per genre:");
    for (int k = 0; k < C; k++) {
        char key[64];
        snprintf(key, sizeof key, "%s_acc_%c", run->key, brown_genre_letter(k));
        results_set_num(&runs->results, key, share[k * C + k]);
        printf(" %c %.0f%%", brown_genre_letter(k), 100.0 * share[k * C + k]);
    }
    printf("\n");
    return 0;
}

/* A run's config text: model=, task=, the GPT's lines, the head's, seed=. */
static int config_text(ClassifierRun *run, const GenreConfig *cfg, int seed) {
    run->config[0] = '\0';
    if (config_append(run->config, sizeof run->config, "model=%s\ntask=brown_genre\n", GENRE_MODEL_NAME) < 0 ||
        config_write(run->config, sizeof run->config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg->gpt) < 0 ||
        config_write(run->config, sizeof run->config, GENRE_CONFIG_FIELDS, GENRE_CONFIG_N, cfg) < 0 ||
        config_append(run->config, sizeof run->config, "seed=%d\n", seed) < 0)
        return -1;
    return 0;
}

int main(int argc, char **argv) {
    output_guard();
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* 1. Flags: the pretrained GPT, which runs, the labels; then the flags every
     *    such program shares, with this program's defaults for the budget. */
    const char *gpt_path = "out/06_gpt/model.ckpt", *runs_list = "scratch,probe,finetune", *split = "test";
    const char *data = NULL;
    int per_genre = 50;
    float probe_lr = 3e-2f;
    const ArgSpec own[] = {
        {"gpt", ARG_STRING, &gpt_path, "the pretrained GPT (a build/06_gpt checkpoint, --tokens char or word)", 0, 0,
         NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"runs", ARG_STRING, &runs_list, "which ways to train, among scratch,probe,finetune", 0, 0, NULL, ARG_MODEL,
         ARG_TRAINING_ONLY},
        {"per-genre", ARG_INT, &per_genre, "labelled passages per genre (fewer where a genre has fewer)", 1, 100000,
         NULL, ARG_DATA, ARG_TRAINING_ONLY},
        {"probe-lr", ARG_FLOAT, &probe_lr, "the probe's learning rate (its head alone; --lr is the others')", 1e-6,
         10, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"split", ARG_STRING, &split, "the texts evaluated: validation (to choose settings) or test", 0, 0,
         "valid,test", ARG_DATA, ARG_ACTS_WITH_LOAD},
        {"data", ARG_STRING, &data, "the Brown corpus file (default " BROWN_DEFAULT_PATH ")", 0, 0, NULL, ARG_DATA,
         ARG_ACTS_WITH_LOAD},
    };
    static ClassifierRuns runs;
    classifier_init(&runs, &PROGRAM);
    TrainOptions *o = &runs.flags.shared.train;
    o->steps = 150;
    o->lr = 1e-3f;
    o->warmup = 15;
    o->clip = 1.0f;
    o->eval_every = 25;
    runs.flags.shared.batch = 16;
    runs.flags.test_size = BROWN_GENRES * EVAL_PER_GENRE;
    int rc = classifier_parse_flags(&runs, argc, argv, own, (int)(sizeof own / sizeof own[0]));
    int use[3] = {0};
    if (rc == 0 && !runs.flags.shared.load) rc = parse_runs(runs_list, use);
    if (rc == 0 && use[1] && o->weight_decay > 0.0f)
        rc = fail("--runs probe with --weight-decay %g: the decay would shrink the frozen GPT; give --weight-decay 0 "
                  "or leave probe out", (double)o->weight_decay);

    /* 2. The model's config: with --load the saved model's; else the
     *    pretrained GPT's (its architecture, its view of the corpus). */
    GenreConfig cfg = {.classes = BROWN_GENRES};
    const char *model_path = runs.flags.shared.load ? runs.flags.shared.load : gpt_path;
    if (rc == 0 && runs.flags.shared.load) {
        if (classifier_read_config(&runs, GENRE_CONFIG_FIELDS, GENRE_CONFIG_N, &cfg) < 0 ||
            config_read(runs.config, GPT_CONFIG_FIELDS, GPT_CONFIG_N, &cfg.gpt) < 0)
            rc = fail("%s: %s", model_path, last_error());
    } else if (rc == 0) {
        rc = genre_read_gpt(gpt_path, &cfg);
    }

    /* 3. The corpus with its texts, and the task: the labelled passages of
     *    the training texts, the evaluated ones of --split's texts. */
    static BrownCorpus corpus;
    static BrownGenre genres;
    ExampleTask t;
    BrownGenreConfig gc = {.per_genre = per_genre, .eval_per_genre = EVAL_PER_GENRE,
                           .split = strcmp(split, "valid") == 0 ? BROWN_GENRE_VALID : BROWN_GENRE_TEST,
                           .seed = (uint64_t)runs.flags.shared.seed};
    if (rc == 0) rc = load_corpus(&corpus, &cfg, data, model_path);
    if (rc == 0) rc = brown_genre_build(&genres, &corpus, &gc);
    if (rc == 0 && runs.flags.test_size > genres.n_eval)
        rc = fail("--test-size %d: the %s texts give %d evaluated passages (%d per genre)", runs.flags.test_size,
                  split, genres.n_eval, EVAL_PER_GENRE);
    if (rc == 0) {
        brown_genre_task(&genres, &t);
        if (!runs.flags.shared.load || cfg.max_tokens == 0) cfg.max_tokens = genres.max_tokens;
        if (cfg.max_tokens != genres.max_tokens)
            rc = fail("%s: max_tokens=%d, but passages in this view have up to %d tokens", model_path, cfg.max_tokens,
                      genres.max_tokens);
    }

    /* With --load: the saved model's accuracy on the evaluated passages, and done. */
    Classifier m;
    if (rc == 0 && runs.flags.shared.load) {
        rc = genre_build(&m, &cfg, runs.flags.shared.batch, 0, NULL);
        if (rc == 0) {
            rc = classifier_use_saved(&runs, &m, &t);
            m.destroy(m.self);
        }
        brown_genre_free(&genres);
        brown_free(&corpus);
        return classifier_finish(&runs, rc);
    }
    if (rc == 0)
        printf("  %d labelled passages (%d genres; %s), %d evaluated of the %s texts; the GPT of %s\n",
               genres.n_labelled, BROWN_GENRES, per_genre_note(&genres, per_genre), runs.flags.test_size, split,
               gpt_path);

    /* 4. The runs: their names, their configurations (the checkpoints' text). */
    for (int k = 0; rc == 0 && k < 3; k++) {
        if (!use[k]) continue;
        GenreConfig c = cfg;
        c.frozen = WAYS[k].frozen;
        ClassifierRun *run = classifier_add_run(&runs, WAYS[k].key, "%s", WAYS[k].label);
        if (!run || config_text(run, &c, runs.flags.shared.seed) < 0) rc = -1;
        if (k == 2) runs.headline = runs.n - 1;   /* the fine-tuned run's figures lead results.json */
    }

    /* 5. Each run: built (from scratch, or the pretrained GPT loaded), trained,
     *    tested and saved. */
    size_t trained[3] = {0}, parameters = 0;
    if (rc == 0) classifier_start(&runs);
    for (int r = 0, k = 0; rc == 0 && r < runs.n; r++, k++) {
        while (!use[k]) k++;
        GenreConfig c = cfg;
        c.frozen = WAYS[k].frozen;
        ClassifierResult *res = &runs.result[r];
        rc = genre_build(&m, &c, runs.flags.shared.batch, (uint64_t)runs.flags.shared.seed,
                         WAYS[k].pretrained ? gpt_path : NULL);
        if (rc < 0) break;
        size_t head = (size_t)cfg.gpt.block.D * (size_t)c.classes + (size_t)c.classes;
        trained[r] = c.frozen ? head : m.params->size;
        parameters = m.params->size;
        printf("  %s: %zu parameters, %zu trained\n", runs.run[r].label, m.params->size, trained[r]);
        TrainOptions way = *o;
        if (c.frozen) way.lr = probe_lr;
        rc = classifier_train(&m, &t, &way, runs.flags.shared.batch, (uint64_t)runs.flags.shared.seed, NULL, res);
        if (rc == 0) classifier_test(&runs, &m, &t, res);
        if (rc == 0) rc = draw_confusion(&runs, &runs.run[r], &m, &t);
        if (rc == 0) rc = classifier_save(&runs, &runs.run[r], &m, res);
        m.destroy(m.self);
    }

    /* 6. The results table, the loss curves, results.json. */
    runs.eval_split = strcmp(split, "valid") == 0 ? "validation" : "test";
    if (rc == 0) rc = classifier_report(&runs);
    if (rc == 0) {
        results_set_num(&runs.results, "parameters", (double)parameters);
        for (int r = 0; r < runs.n; r++) {
            char key[64];
            snprintf(key, sizeof key, "%s_trained_parameters", runs.run[r].key);
            results_set_num(&runs.results, key, (double)trained[r]);
        }
        results_set_num(&runs.results, "per_genre", per_genre);
        results_set_num(&runs.results, "labelled", genres.n_labelled);
        results_set_num(&runs.results, "probe_lr", probe_lr);
        results_set_str(&runs.results, "runs", runs_list);
        results_set_str(&runs.results, "split", split);
        results_set_str(&runs.results, "gpt", gpt_path);
    }
    if (rc == 0) rc = classifier_write_results(&runs);
    brown_genre_free(&genres);
    brown_free(&corpus);
    return classifier_finish(&runs, rc);
}
