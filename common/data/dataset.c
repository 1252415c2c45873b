/* dataset.c - the task-independent half of the data sets (see dataset.h):
 * defaults per task, dataset_load() dispatching to the task files, freeing,
 * encoding text a user types.
 *
 * The tasks themselves live in task_dates.c, task_reverse.c, task_g2p.c and
 * task_translate.c; the examples they build, with example_build.c's calls. */
#include "data/dataset.h"

#include "io/checkpoint.h"
#include "data/dataset_tasks.h"
#include "util/error.h"
#include "util/util.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- defaults and loading ------------------------------------------------ */

int task_defaults(TaskConfig *cfg, const char *task) {
    memset(cfg, 0, sizeof *cfg);
    if (task == NULL) return fail("no task given: expected " TASK_NAMES);
    if (strcmp(task, "dates") == 0) {
        cfg->task = "dates";
    } else if (strcmp(task, "reverse") == 0) {
        cfg->task = "reverse";
    } else if (strcmp(task, "g2p") == 0) {
        cfg->task = "g2p";
    } else if (strcmp(task, "translate") == 0) {
        cfg->task = "translate";
    } else {
        return fail("unknown task \"%s\": expected " TASK_NAMES, task);
    }
    /* The sizes apply to the generated tasks; g2p ignores them (its splits
     * come from the dictionary). */
    cfg->n_train = 50000;
    cfg->n_valid = 1000;
    cfg->n_test = 2000;
    cfg->min_len = 4;
    cfg->max_len = 20;
    if (strcmp(task, "translate") == 0) {   /* the training verses' English words */
        cfg->min_len = 1;
        cfg->max_len = TRANSLATE_MAX_WORDS;
    }
    cfg->bpe_merges = TRANSLATE_BPE_MERGES;
    cfg->seed = 1234;
    cfg->data_dir = "data";
    return 0;
}

static int check_sizes(const TaskConfig *cfg) {
    if (cfg->n_train < 1) return fail("n_train is %d: expected at least 1", cfg->n_train);
    /* an empty validation or test split would report 0.00% on 0 examples */
    if (cfg->n_valid < 1) return fail("n_valid is %d: expected at least 1", cfg->n_valid);
    if (cfg->n_test < 1) return fail("n_test is %d: expected at least 1", cfg->n_test);
    return 0;
}

static void update_max_lengths(Dataset *d, const Split *s) {
    for (int i = 0; i < s->n; i++) {
        const Example *e = &s->ex[i];
        if (e->src_len > d->max_src_len) d->max_src_len = e->src_len;
        for (int r = 0; r < e->n_refs; r++) {
            if (e->ref_lens[r] > d->max_tgt_len) d->max_tgt_len = e->ref_lens[r];
        }
    }
}

int dataset_load(Dataset *d, const TaskConfig *cfg) {
    memset(d, 0, sizeof *d);
    if (cfg->task == NULL) return fail("no task given: expected " TASK_NAMES);
    int rc;
    if (strcmp(cfg->task, "dates") == 0) {
        if (check_sizes(cfg) != 0) return -1;
        strcpy(d->task, "dates");
        rc = dates_load(d, cfg);
    } else if (strcmp(cfg->task, "reverse") == 0) {
        if (check_sizes(cfg) != 0) return -1;
        strcpy(d->task, "reverse");
        rc = reverse_load(d, cfg);
    } else if (strcmp(cfg->task, "g2p") == 0) {
        strcpy(d->task, "g2p");
        rc = g2p_load(d, cfg);
    } else if (strcmp(cfg->task, "translate") == 0) {
        strcpy(d->task, "translate");
        rc = translate_load(d, cfg);
    } else {
        return fail("unknown task \"%s\": expected " TASK_NAMES, cfg->task);
    }
    if (rc != 0) {
        dataset_free(d);
        return -1;
    }
    update_max_lengths(d, &d->train);
    update_max_lengths(d, &d->valid);
    update_max_lengths(d, &d->test);
    return 0;
}

static void split_free(Split *s) {
    for (int i = 0; i < s->n; i++) {
        Example *e = &s->ex[i];
        free(e->src);
        free(e->src_text);
        free(e->tgt_text);
        for (int r = 0; r < e->n_refs; r++) free(e->refs[r]);
        free(e->refs);
        free(e->ref_lens);
        /* e->tgt points at refs[0]: already freed. */
    }
    free(s->ex);
    s->ex = NULL;
    s->n = 0;
}

void dataset_free(Dataset *d) {
    split_free(&d->train);
    split_free(&d->valid);
    split_free(&d->test);
    free(d->value_store);   /* image tasks: every example's values */
    d->value_store = NULL;
    if (d->src_bpe) bpe_free(d->src_bpe);
    if (d->tgt_bpe) bpe_free(d->tgt_bpe);
    free(d->src_bpe);
    free(d->tgt_bpe);
    d->src_bpe = d->tgt_bpe = NULL;
}

void dataset_decode_target(const Dataset *d, const int *ids, int n, char *out, int outlen) {
    if (d->tgt_bpe == NULL) {
        vocab_decode(&d->tgt_vocab, ids, n, d->tgt_sep, out, outlen);
        return;
    }
    int len = 0;   /* up to <eos>, as vocab_decode */
    while (len < n && ids[len] != EOS_ID) len++;
    if (bpe_decode(d->tgt_bpe, ids, len, out, outlen) != 0) clear_error();   /* too long: what fitted */
}

const Split *dataset_split(const Dataset *d, const char *name) {
    if (name == NULL) return NULL;
    if (strcmp(name, "train") == 0) return &d->train;
    if (strcmp(name, "valid") == 0) return &d->valid;
    if (strcmp(name, "test") == 0) return &d->test;
    return NULL;
}

/* ---- text typed by a user ------------------------------------------------ */

/* What each task accepts, for error messages. */
static const char *expected_input(const char *task) {
    if (strcmp(task, "dates") == 0) {
        return "a date such as \"21 Nov 2026\", \"11/21/26\" or \"Saturday, 21 November 2026\"";
    }
    if (strcmp(task, "reverse") == 0) return "lowercase letters a-z";
    if (strcmp(task, "g2p") == 0) {
        return "a word of letters A-Z (either case), apostrophe, period or hyphen";
    }
    if (strcmp(task, "translate") == 0) return "an English sentence";
    return "text in the task's source alphabet";
}

int dataset_encode_source(const Dataset *d, const char *text, int *ids, int max, int *len) {
    int is_g2p = strcmp(d->task, "g2p") == 0;
    int n = (int)strlen(text);
    *len = 0;
    int blank = 1;
    for (int i = 0; i < n; i++) blank &= isspace((unsigned char)text[i]) != 0;
    if (blank)
        return fail("%s input: the %s task expects %s", n == 0 ? "empty" : "blank (only spaces)", d->task,
                    expected_input(d->task));
    char quoted[96];
    error_excerpt(text, quoted, sizeof quoted);
    if (d->src_bpe) {   /* translate: BPE pieces; a character the training verses never had becomes <unk> */
        int count = bpe_encode(d->src_bpe, text, ids, max, NULL);
        if (count < 0)
            return fail("input \"%s\": %s (the model reads at most %d tokens)", quoted, last_error(), max);
        *len = count;
        return 0;
    }
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (is_g2p) c = (unsigned char)toupper(c);
        int id = vocab_char_id(&d->src_vocab, (char)c);
        if (id == UNK_ID) {
            char shown[16];
            if (isprint(c)) {
                snprintf(shown, sizeof shown, "'%c'", c);
            } else {
                snprintf(shown, sizeof shown, "byte 0x%02x", c);
            }
            return fail("unknown character %s at position %d of \"%s\": the %s task expects %s",
                        shown, i + 1, quoted, d->task, expected_input(d->task));
        }
        if (i >= max) {
            return fail("input \"%s\" has %d characters; the %s task's model reads at most %d", quoted, n,
                        d->task, max);
        }
        ids[i] = id;
    }
    *len = n;
    return 0;
}

/* task, data_seed, n_train, n_valid, n_test (and for reverse and translate
 * min_len, max_len) from a config. */
int task_from_config(TaskConfig *tc, const char *config, char *task_buf, int task_cap) {
    if (config_get(config, "task", task_buf, task_cap) < 0) return -1;
    if (task_defaults(tc, task_buf) < 0) return -1;
    tc->task = task_buf;
    char seed[32];
    if (config_get(config, "data_seed", seed, sizeof seed) < 0) return -1;
    /* all digits, and no overflow: "abc" or "12x" must not quietly become
     * another seed, and so another data set */
    char *end = NULL;
    errno = 0;
    tc->seed = strtoull(seed, &end, 10);
    if (seed[0] < '0' || seed[0] > '9' || *end != '\0' || errno == ERANGE)
        return fail("config key 'data_seed': expected an unsigned integer, got '%s'", seed);
    if (config_get_int(config, "n_train", &tc->n_train) < 0 ||
        config_get_int(config, "n_valid", &tc->n_valid) < 0 ||
        config_get_int(config, "n_test", &tc->n_test) < 0)
        return -1;
    const int lengths = strcmp(tc->task, "reverse") == 0 || strcmp(tc->task, "translate") == 0;
    if (lengths &&
        (config_get_int(config, "min_len", &tc->min_len) < 0 || config_get_int(config, "max_len", &tc->max_len) < 0))
        return -1;
    if (strcmp(tc->task, "translate") == 0) tc->saved_bpe = config;
    return 0;
}
