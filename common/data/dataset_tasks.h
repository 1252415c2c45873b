/* dataset_tasks.h - what the task files (task_dates.c, task_reverse.c,
 * task_g2p.c, task_translate.c) and dataset.c share. Not part of the public API: chapters use
 * dataset.h.
 *
 * Memory of one Example: src, src_text, refs (the pointer array), ref_lens and
 * every refs[r] are separate allocations; tgt is NOT one: it points at
 * refs[0]. dataset_free() releases them all. */
#ifndef DATASET_TASKS_H
#define DATASET_TASKS_H
#include <stdint.h>
#include "data/dataset.h"

/* Each task fills d->src_vocab, d->tgt_vocab, the three splits, d->tgt_sep and
 * d->src_sep. dataset_load() has already zeroed d, checked the sizes and set
 * d->task; it computes max_src_len / max_tgt_len afterwards, and calls
 * dataset_free() when a task returns -1. */
int dates_load(Dataset *d, const TaskConfig *cfg);
int reverse_load(Dataset *d, const TaskConfig *cfg);
int g2p_load(Dataset *d, const TaskConfig *cfg);
int translate_load(Dataset *d, const TaskConfig *cfg);

/* split_alloc(), example_init() and example_set_ref() build the examples (example_build.c)
 * (declared in dataset.h: chapter 07 builds its captions with them too). */
/* A character-level example: encode src_text and tgt_text one character per
 * token (the characters must be in the vocabularies) with one reference. */
void example_from_chars(Example *e, const Vocab *src_vocab, const char *src_text,
                        const Vocab *tgt_vocab, const char *tgt_text);

/* A 64-bit mixing function (splitmix64's finaliser): neighbouring inputs give
 * unrelated outputs. Used to split data by hashing, so a split does not depend
 * on random-number draws. */
uint64_t hash_mix64(uint64_t x);
/* FNV-1a hash of a string, then mixed with hash_mix64. */
uint64_t hash_string(const char *s);

#endif
