/* dataset.h - the three sequence-to-sequence tasks, as train/valid/test splits
 * of token-id sequences.
 *
 *  dates   (default) human-written dates in many formats -> ISO "YYYY-MM-DD".
 *          Generated from a seed. Splits are disjoint by calendar day: a day in
 *          the test split never appears in training, in any format.
 *  reverse a random string -> the same string reversed; length range is a flag.
 *          Splits are disjoint by string.
 *  g2p     CMU Pronouncing Dictionary (data/cmudict.dict.gz): a word's letters ->
 *          its phonemes (stress marks removed: 39 phonemes). Deterministic split
 *          by word (every pronunciation of a word, and every spelling that
 *          differs from it only in ' . -, on the same side). For
 *          training every pronunciation is an example; for valid/test each word
 *          is one example whose refs[] hold all its pronunciations (any counts
 *          as correct).
 *  translate  an English Bible verse -> the same verse in Spanish
 *          (data/bible_en_es.tsv.gz, bible.h), byte-pair-encoded tokens (bpe.h),
 *          split by whole Bible chapters (task_translate.c).
 *
 * Source and target sequences hold no <bos>/<eos>; models add them. */
#ifndef DATASET_H
#define DATASET_H
#include <stdint.h>
#include "data/bpe.h"
#include "data/vocab.h"

typedef struct {
    int *src; int src_len;
    int *tgt; int tgt_len;          /* the training target (= refs[0]) */
    int n_refs;                     /* >= 1 */
    int **refs; int *ref_lens;      /* every acceptable output */
    char *src_text;                 /* the raw input, for printing */
    char *tgt_text;                 /* translate: the reference as printed, which BLEU scores
                                     * against; NULL for the other tasks */
    const float *values;            /* image tasks (chapter 07's captions): the source as
                                     * Dataset.value_size floats, an image; NULL for token tasks */
} Example;

typedef struct { int n; Example *ex; } Split;

#define TASK_NAMES "dates, reverse, g2p or translate"
/* translate: the training verses' most English words by default, and the
 * merges of each BPE vocabulary */
#define TRANSLATE_MAX_WORDS 40
#define TRANSLATE_BPE_MERGES 2000

typedef struct {
    const char *task;       /* "dates", "reverse", "g2p", "translate" */
    int n_train, n_valid, n_test;   /* generated tasks (dates, reverse), each >= 1; ignored by g2p, translate */
    int min_len, max_len;   /* reverse: string lengths; translate: the training verses' English words;
                             * inclusive */
    int bpe_merges;         /* translate: merges of each BPE vocabulary when it is learned */
    const char *saved_bpe;  /* translate: a checkpoint's configuration text holding both vocabularies
                             * (task_lines' src_bpe_* and tgt_bpe_* keys), or NULL to learn them */
    uint64_t seed;          /* generated tasks: the data seed (not the model seed) */
    const char *data_dir;   /* g2p, translate: directory holding cmudict.dict.gz, bible_en_es.tsv.gz ("data") */
} TaskConfig;

typedef struct {
    char task[16];
    Vocab src_vocab, tgt_vocab;
    Split train, valid, test;
    int max_src_len, max_tgt_len;   /* over all splits */
    const char *tgt_sep;            /* "" for characters, " " for phonemes */
    const char *src_sep;
    /* Image tasks (chapter 07's captions) only; 0 / NULL for the token tasks.
     * Each example's source is then an image of value_size floats
     * (Example.values, pointing into value_store, which dataset_free frees),
     * and src_len counts something the chapter names in src_len_name (the
     * items in a scene), for the table of exact match by length. */
    int value_size;
    float *value_store;
    const char *src_len_name;
    /* The translate task only (NULL / 0 otherwise): the two BPE vocabularies
     * (the Vocabs above hold their pieces, id for id), and the CRC-32 of the
     * training verses they were learned from (a checkpoint's train_crc). */
    Bpe *src_bpe, *tgt_bpe;
    uint32_t train_crc;
} Dataset;

/* Fill cfg with the task's defaults (sizes, lengths, seed, data_dir "data").
 * Returns -1 with fail() for an unknown task name. */
int task_defaults(TaskConfig *cfg, const char *task);

/* Build or load the task. Returns 0, or -1 with fail(): unknown task, bad
 * sizes, missing or malformed data file (naming the file and line), a
 * dictionary too small to give each of train, valid and test an example
 * (naming the file and the counts). */
int dataset_load(Dataset *d, const TaskConfig *cfg);
/* Rebuild the task a checkpoint was trained on from its config lines (the
 * keys the seq2seq driver writes: task, data_seed, n_train, n_valid, n_test,
 * for reverse and translate min_len, max_len; translate's vocabularies are
 * read from the same text, so tc->saved_bpe points at config); task_buf (task_cap bytes) holds the task's name.
 * Returns 0, or -1 with fail() naming the missing or bad key. */
int task_from_config(TaskConfig *tc, const char *config, char *task_buf, int task_cap);
void dataset_free(Dataset *d);

/* Encode text typed by a user with the source vocabulary (for --translate).
 * For g2p the text is upper-cased first. Returns 0, or -1 with fail() naming
 * the first character the vocabulary does not know, or when longer than max. */
int dataset_encode_source(const Dataset *d, const char *text, int *ids, int max, int *len);

/* Building a data set of one's own (example_build.c; chapter 07's captions, the token tasks
 * use them too). Memory of one Example: src, src_text, refs (the pointer
 * array), ref_lens and every refs[r] are separate allocations; tgt points at
 * refs[0]. dataset_free() releases them all.
 *   split_alloc:     room for n zeroed examples;
 *   example_init:    a copy of src_text and of the source ids, room for n_refs references;
 *   example_set_ref: copy ids into reference r (reference 0 is the training target). */
void split_alloc(Split *s, int n);
void example_init(Example *e, const char *src_text, const int *src, int src_len, int n_refs);
void example_set_ref(Example *e, int r, const int *ids, int len);

/* The text of target ids (up to <eos>): BPE pieces joined into words for
 * translate, else vocab_decode with the task's separator. */
void dataset_decode_target(const Dataset *d, const int *ids, int n, char *out, int outlen);

/* Splits by name: "train", "valid", "test"; NULL for anything else. */
const Split *dataset_split(const Dataset *d, const char *name);

/* The generators, exposed for tests and the examples in the READMEs. */
/* Format the date (y, m, d) in input style `format` (0 <= format < DATE_N_FORMATS)
 * into out; weekday names are computed from the date. */
#define DATE_N_FORMATS 20
void date_format(int year, int month, int day, int format, char *out, int outlen);

#endif
