/* bleu.h - BLEU, the translation score (Papineni, Roukos, Ward and Zhu 2002,
 * "BLEU: a Method for Automatic Evaluation of Machine Translation").
 *
 * Text. Both the output and the reference are detokenised text ("Y lloró
 * Jesús."), cut into tokens by sacreBLEU's default tokeniser "13a" (the one
 * of mteval-v13a.pl): the ASCII punctuation marks ! " # $ % & ( ) * + / : ;
 * < = > ? @ [ \ ] ^ _ ` { | } ~ become tokens of their own; a period or comma
 * does too, unless it stands between digits ("3.5", "1,000"); a dash after a
 * digit does; &quot; &amp; &lt; &gt; are decoded first; then the text is cut
 * at blanks. Other characters stay where they are: "¿Conque" and "“Leave"
 * are single tokens, as they are for sacreBLEU. Case counts.
 *
 * Corpus BLEU, one reference per output: for n = 1..4 the clipped n-gram
 * precision p_n = (sum over outputs of the n-grams that the reference also
 * has, each counted at most as often as the reference has it) / (sum of the
 * outputs' n-grams); the brevity penalty BP = 1 when the outputs' total
 * length c exceeds the references' total r, else exp(1 - r / c) (0 when
 * c = 0); BLEU = 100 * BP * exp(mean of log p_n). No smoothing: if any p_n
 * is 0, BLEU is 0 (NLTK's corpus_bleu gives 1e-75 or less then).
 *
 * Sentence BLEU (to rank single translations, as translations.tsv does):
 * the same on one output, with the NIST geometric smoothing (NLTK's
 * SmoothingFunction().method3, sacreBLEU's "exp"): the k-th order n with no
 * matching n-gram gets the precision 1 / (2^k * its n-gram count), an output
 * shorter than n counting one n-gram of that order; 0 when no token matches.
 *
 * tools/bleu_check.py computes both with NLTK on a file of (reference,
 * output) pairs and compares. NLTK counts a sentence shorter than n as one
 * n-gram in corpus BLEU's denominators too, where Papineni et al. and
 * sacreBLEU count none: the two differ only when outputs have fewer than 4
 * tokens. */
#ifndef BLEU_H
#define BLEU_H

#define BLEU_ORDER 4
#define BLEU_BUCKETS 5          /* source lengths 1-10, 11-20, 21-30, 31-40, 41+ words */

/* What corpus BLEU adds up. */
typedef struct {
    long match[BLEU_ORDER];     /* clipped matching n-grams, n = 1..4 */
    long total[BLEU_ORDER];     /* n-grams of the outputs */
    long out_len, ref_len;      /* tokens of the outputs, of the references */
    long n;                     /* pairs added */
} BleuStats;

/* The 13a tokens of text, as one string with single spaces between them
 * (the form sacreBLEU scores); malloc'd, the caller frees. */
char *bleu_tokenize_13a(const char *text);

void bleu_init(BleuStats *s);
/* Add one (output, reference) pair of detokenised texts. */
void bleu_add(BleuStats *s, const char *output, const char *reference);
/* Corpus BLEU of what was added, 0..100 (0 when nothing was added). */
double bleu_score(const BleuStats *s);
/* Sentence BLEU of one pair, 0..100, smoothed as above. */
double bleu_sentence(const char *output, const char *reference);

/* BLEU by source length: the bucket of a source of w words (w >= 1; 0 for
 * w <= 10, ... 4 for w > 40) and its name ("1-10", ..., "41+"). */
int bleu_bucket(int source_words);
const char *bleu_bucket_name(int bucket);

/* Corpus BLEU in each bucket and over all. */
typedef struct {
    BleuStats all;
    BleuStats bucket[BLEU_BUCKETS];
} BleuByLength;

void bleu_by_length_init(BleuByLength *b);
void bleu_by_length_add(BleuByLength *b, int source_words, const char *output, const char *reference);

#endif
