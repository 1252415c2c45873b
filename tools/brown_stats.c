/* brown_stats.c - the figures of data/README.md's Brown corpus section: the
 * split, the vocabularies, and the perplexity of the two counting baselines
 * (common/data/ngram.h) on the validation and test parts.
 *
 *   make build/tools/brown_stats && ./build/tools/brown_stats [PATH]
 *
 * PATH defaults to data/brown.txt.gz. Prints, for the words view (with the
 * vocabulary counted on the training part, then on the whole corpus as the
 * published replication on NLTK's copy did) and for the chars view: token
 * counts per part, |V|, <unk> tokens, and the unigram and Kneser-Ney trigram
 * perplexity (bits per token for characters). Takes a few seconds. */
#include "data/brown.h"
#include "data/ngram.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>

static void print_part(const char *name, const BrownPart *p) {
    printf("  %-6s %9d tokens  %9d words  %7d <unk> (%.2f%%)\n", name, p->n, p->n_words, p->n_unk,
           p->n ? 100.0 * p->n_unk / p->n : 0.0);
}

/* Perplexity (and bits per token) of both models on valid and test. */
static int print_baselines(const BrownCorpus *c) {
    Unigram uni;
    KneserNey kn;
    if (unigram_train(&uni, c->train.ids, c->train.n, c->V) != 0) return -1;
    if (kn_train(&kn, c->train.ids, c->train.n, c->V, 0.0) != 0) return -1;
    const BrownPart *parts[2] = {&c->valid, &c->test};
    const char *names[2] = {"valid", "test"};
    printf("  discounts D1 %.4f  D2 %.4f  D3 %.4f\n", kn.D[1], kn.D[2], kn.D[3]);
    for (int k = 0; k < 2; k++) {
        double pu = unigram_perplexity(&uni, parts[k]->ids, parts[k]->n);
        double pk = kn_perplexity(&kn, parts[k]->ids, parts[k]->n);
        printf("  %-6s unigram (add-one) perplexity %8.2f (%.3f bits)", names[k], pu, log2(pu));
        printf("   KN trigram perplexity %8.2f (%.3f bits)\n", pk, log2(pk));
    }
    unigram_free(&uni);
    kn_free(&kn);
    return 0;
}

static int report(const char *title, const BrownConfig *cfg) {
    BrownCorpus c;
    if (brown_load_config(&c, cfg) != 0) return -1;
    printf("%s\n", title);
    printf("  %d files, %d sentences, %d words, %d distinct words (%d in the training part)\n",
           c.n_files, c.n_sentences, c.n_words, c.n_types, c.n_train_types);
    printf("  |V| = %d (<unk> included)\n", c.V);
    print_part("train", &c.train);
    print_part("valid", &c.valid);
    print_part("test", &c.test);
    int rc = print_baselines(&c);
    brown_free(&c);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [PATH]   (default %s)\n", argv[0], BROWN_DEFAULT_PATH);
        return 2;
    }
    BrownConfig cfg;
    brown_defaults(&cfg, BROWN_WORDS);
    if (argc == 2) cfg.path = argv[1];
    int rc = report("words, frequencies counted on the training part (the default)", &cfg);
    cfg.vocab_from_all = 1;
    if (rc == 0) rc = report("words, frequencies counted on the whole corpus (for comparison only)", &cfg);
    cfg.vocab_from_all = 0;
    cfg.kind = BROWN_CHARS;
    if (rc == 0) rc = report("characters", &cfg);
    if (rc != 0) {
        fprintf(stderr, "brown_stats: %s\n", last_error());
        return 1;
    }
    return 0;
}
