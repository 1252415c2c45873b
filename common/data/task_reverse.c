/* task_reverse.c - the "reverse" task: a random string of lowercase letters
 * a-z -> the same string reversed ("attention" -> "noitnetta").
 *
 * Why this task: the alignment is known exactly (output position t looks at
 * input position n-1-t), so the attention heatmap should show a clean
 * anti-diagonal, and longer strings (up to REVERSE_MAX_LEN) show how a fixed
 * context vector runs out of room.
 *
 * Lengths are uniform in [min_len, max_len], letters uniform. Splits are
 * disjoint by string: a hash set of every string drawn so far rejects
 * repeats. The test split is drawn first, then valid, then train, each with
 * its own PCG32 stream, so the test set does not change when n_train does. */
#include "data/dataset.h"
#include "data/dataset_tasks.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/util.h"
#include <stdlib.h>
#include <string.h>

#define REVERSE_MAX_LEN 100

/* An open-addressing hash set of strings (linear probing). It stores
 * pointers to strings owned by the examples. */
typedef struct { const char **slots; uint64_t mask; } StringSet;

static void set_init(StringSet *set, uint64_t expected) {
    uint64_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2; /* at most half full */
    set->slots = xcalloc(capacity, sizeof(char *));
    set->mask = capacity - 1;
}

/* Is s present? */
static int set_contains(const StringSet *set, const char *s) {
    for (uint64_t i = hash_string(s) & set->mask;; i = (i + 1) & set->mask) {
        if (set->slots[i] == NULL) return 0;
        if (strcmp(set->slots[i], s) == 0) return 1;
    }
}

/* Insert s (not present yet). */
static void set_insert(StringSet *set, const char *s) {
    uint64_t i = hash_string(s) & set->mask;
    while (set->slots[i] != NULL) i = (i + 1) & set->mask;
    set->slots[i] = s;
}

static int draw_split(Dataset *d, Split *s, int n, const char *name, const TaskConfig *cfg,
                      uint64_t stream, StringSet *seen) {
    Rng rng;
    rng_seed(&rng, cfg->seed, stream);
    split_alloc(s, n);
    char text[REVERSE_MAX_LEN + 1], reversed[REVERSE_MAX_LEN + 1];
    int n_lengths = cfg->max_len - cfg->min_len + 1;
    /* With short strings there may not be n distinct ones: give up after
     * many repeats instead of looping for ever. */
    long attempts_left = 50L * n + 1000;
    for (int j = 0; j < n; j++) {
        int len;
        do {
            if (attempts_left-- == 0) {
                s->n = j; /* the examples made so far get freed */
                return fail("reverse: could only draw %d distinct strings of length %d..%d for "
                            "the %s split (wanted %d); widen the length range or ask for fewer",
                            j, cfg->min_len, cfg->max_len, name, n);
            }
            len = cfg->min_len + (int)rng_below(&rng, (uint32_t)n_lengths);
            for (int i = 0; i < len; i++) text[i] = (char)('a' + rng_below(&rng, 26));
            text[len] = '\0';
        } while (set_contains(seen, text));
        for (int i = 0; i < len; i++) reversed[i] = text[len - 1 - i];
        reversed[len] = '\0';
        example_from_chars(&s->ex[j], &d->src_vocab, text, &d->tgt_vocab, reversed);
        set_insert(seen, s->ex[j].src_text);
    }
    return 0;
}

int reverse_load(Dataset *d, const TaskConfig *cfg) {
    if (cfg->min_len < 1 || cfg->max_len < cfg->min_len || cfg->max_len > REVERSE_MAX_LEN) {
        return fail("reverse: string lengths %d..%d: expected 1 <= min_len <= max_len <= %d",
                    cfg->min_len, cfg->max_len, REVERSE_MAX_LEN);
    }
    /* Both sides use the same 26 letters (two identical tables, so a model
     * may share its embeddings or not). */
    vocab_init(&d->src_vocab);
    for (char c = 'a'; c <= 'z'; c++) {
        char token[2] = {c, '\0'};
        vocab_add(&d->src_vocab, token);
    }
    d->tgt_vocab = d->src_vocab;
    d->src_sep = "";
    d->tgt_sep = "";

    StringSet seen;
    set_init(&seen, (uint64_t)cfg->n_train + (uint64_t)cfg->n_valid + (uint64_t)cfg->n_test);
    int rc = draw_split(d, &d->test, cfg->n_test, "test", cfg, 3, &seen);
    if (rc == 0) rc = draw_split(d, &d->valid, cfg->n_valid, "valid", cfg, 2, &seen);
    if (rc == 0) rc = draw_split(d, &d->train, cfg->n_train, "train", cfg, 1, &seen);
    free(seen.slots);
    return rc;
}
