/* task_translate.c - the "translate" task: an English Bible verse -> the
 * same verse in Spanish, two human translations (data/bible_en_es.tsv.gz,
 * read by bible.h: the World English Bible and the Reina-Valera 1909).
 *
 * Tokens: byte-pair encoding (bpe.h), one vocabulary per language, each
 * learned on the training part's verses (TRANSLATE_BPE_MERGES merges). A
 * vocabulary's ids are the BPE's ids (0..3 the specials, 4 </w>, then the
 * characters and the merged pieces), its tokens the pieces as bpe_piece
 * writes them ("begin", "ning</w>").
 *
 * The parts are the file's, split by whole Bible chapters:
 *   train  the training verses of min_len..max_len English words (the model
 *          learns on these; longer ones are left out to keep a step cheap),
 *   valid, test  every verse of those parts without a near-duplicate in the
 *          training part (near_dup = 0), of any length: the test set's long
 *          verses are where a fixed context should give out.
 * Each example keeps its reference as printed (Example.tgt_text): BLEU
 * scores detokenised output against it.
 *
 * With a checkpoint's configuration (TaskConfig.saved_bpe) the two
 * vocabularies are read from it instead of learned, and the training
 * verses' CRC-32 there must equal the file's: a model is never scored with
 * pieces its embeddings were not trained on. */
#include "data/bible.h"
#include "data/bpe.h"
#include "data/dataset.h"
#include "data/dataset_tasks.h"
#include "io/checkpoint.h"
#include "util/error.h"
#include "util/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The vocabulary's tokens from the BPE's pieces, id for id. */
static int vocab_from_bpe(Vocab *v, const Bpe *b, const char *side) {
    if (b->V > VOCAB_MAX)
        return fail("translate: the %s BPE has %d pieces, more than a vocabulary holds (%d)", side, b->V, VOCAB_MAX);
    vocab_init(v);
    char piece[BPE_MAX_WORD + 8];
    for (int id = BPE_END_OF_WORD; id < b->V; id++) {
        if (vocab_add(v, bpe_piece(b, id, piece, sizeof piece)) != id)
            return fail("translate: the %s BPE piece %d (\"%s\") does not fit the vocabulary: %s", side, id, piece,
                        last_error());
    }
    return 0;
}

/* CRC-32 of the training verses, both sides: what the vocabularies were learned from. */
static uint32_t training_crc(const BibleCorpus *c) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < c->n; i++) {
        const BiblePair *p = &c->pairs[i];
        if (p->split != BIBLE_TRAIN) continue;
        crc = crc32(crc, (const Bytef *)p->english, (uInt)strlen(p->english) + 1);
        crc = crc32(crc, (const Bytef *)p->spanish, (uInt)strlen(p->spanish) + 1);
    }
    return (uint32_t)crc;
}

/* Learn both vocabularies on the training part. */
static int learn_bpe(Bpe *src, Bpe *tgt, const BibleCorpus *c, int n_merges) {
    const char **en = xmalloc(sizeof(char *) * (size_t)c->n_split[BIBLE_TRAIN]);
    const char **es = xmalloc(sizeof(char *) * (size_t)c->n_split[BIBLE_TRAIN]);
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (c->pairs[i].split == BIBLE_TRAIN) en[n] = c->pairs[i].english, es[n++] = c->pairs[i].spanish;
    int rc = bpe_learn_texts(src, en, n, n_merges);
    if (rc == 0 && (rc = bpe_learn_texts(tgt, es, n, n_merges)) != 0) bpe_free(src);
    free(en);
    free(es);
    return rc;
}

/* Both vocabularies from a checkpoint's text, checked against the corpus. */
static int saved_bpe(Bpe *src, Bpe *tgt, const BibleCorpus *c, const char *config, const char *path) {
    char want[32], have[32];
    if (config_get(config, "train_crc", want, sizeof want) < 0) return -1;
    snprintf(have, sizeof have, "%08x", training_crc(c));
    if (strcmp(want, have) != 0)
        return fail("its BPE vocabularies were learned on other training verses (train_crc=%s) than %s holds "
                    "(%s): retrain on this file, or load the checkpoint with the file it was trained on",
                    want, path, have);
    if (bpe_from_text(src, config, "src_") != 0) return -1;
    if (bpe_from_text(tgt, config, "tgt_") != 0) {
        bpe_free(src);
        return -1;
    }
    return 0;
}

/* One verse as an example; -1 when a side has more tokens than a verse may. */
static int add_example(Example *e, const BiblePair *p, const Bpe *src, const Bpe *tgt, int *buf, int cap) {
    int n_src = bpe_encode(src, p->english, buf, cap, NULL);
    if (n_src < 0) return -1;
    example_init(e, p->english, buf, n_src, 1);
    int n_tgt = bpe_encode(tgt, p->spanish, buf, cap, NULL);
    if (n_tgt < 0) return -1;
    example_set_ref(e, 0, buf, n_tgt);
    size_t len = strlen(p->spanish) + 1;
    e->tgt_text = xmalloc(len);
    memcpy(e->tgt_text, p->spanish, len);
    return 0;
}

int translate_load(Dataset *d, const TaskConfig *cfg) {
    if (cfg->min_len < 1 || cfg->max_len < cfg->min_len)
        return fail("translate: training verses of %d..%d English words: expected 1 <= min_len <= max_len",
                    cfg->min_len, cfg->max_len);
    char path[1024];
    if (path_format(path, sizeof path, "%s/%s", cfg->data_dir, "bible_en_es.tsv.gz") < 0) return -1;
    BibleCorpus c;
    if (bible_load(&c, path) != 0) return -1;
    d->src_bpe = xcalloc(1, sizeof(Bpe));
    d->tgt_bpe = xcalloc(1, sizeof(Bpe));
    int rc = cfg->saved_bpe ? saved_bpe(d->src_bpe, d->tgt_bpe, &c, cfg->saved_bpe, path)
                            : learn_bpe(d->src_bpe, d->tgt_bpe, &c, cfg->bpe_merges);
    if (rc != 0) {
        free(d->src_bpe), free(d->tgt_bpe);
        d->src_bpe = d->tgt_bpe = NULL;
        bible_free(&c);
        return -1;
    }
    d->train_crc = training_crc(&c);
    if (vocab_from_bpe(&d->src_vocab, d->src_bpe, "English") != 0 ||
        vocab_from_bpe(&d->tgt_vocab, d->tgt_bpe, "Spanish") != 0) {
        bible_free(&c);
        return -1;
    }
    d->src_sep = " ";
    d->tgt_sep = " ";

    /* which verses go where: count, then fill */
    Split *parts[3] = {&d->train, &d->valid, &d->test};
    int counts[3] = {0, 0, 0};
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < 3; k++) {
            if (pass == 1) split_alloc(parts[k], counts[k]);
            counts[k] = 0;
        }
        int cap = BIBLE_MAX_LINE, *buf = pass ? xmalloc(sizeof(int) * (size_t)cap) : NULL;
        for (int i = 0; i < c.n && rc == 0; i++) {
            const BiblePair *p = &c.pairs[i];
            const int words = bible_source_words(p);
            int keep = p->split == BIBLE_TRAIN ? words >= cfg->min_len && words <= cfg->max_len : !p->near_dup;
            if (!keep) continue;
            if (pass == 1) {
                rc = add_example(&parts[p->split]->ex[counts[p->split]], p, d->src_bpe, d->tgt_bpe, buf, cap);
            }
            counts[p->split]++;
        }
        free(buf);
    }
    bible_free(&c);
    if (rc == 0 && (d->train.n == 0 || d->valid.n == 0 || d->test.n == 0))
        rc = fail("translate: %d training verses of %d..%d words, %d valid, %d test: expected at least one each",
                  d->train.n, cfg->min_len, cfg->max_len, d->valid.n, d->test.n);
    return rc;
}
