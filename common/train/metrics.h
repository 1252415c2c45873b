/* metrics.h - how good are the predicted sequences?
 *
 * exact match : the prediction equals a reference exactly (1 - WER for g2p,
 *               where each example is one word).
 * token acc.  : fraction of reference positions whose token the prediction
 *               has at the same position (against the best-matching reference).
 * PER         : total edit distance to the closest reference / total length of
 *               those references (phoneme error rate for g2p).
 * WER         : fraction of words whose prediction matches no reference. */
#ifndef METRICS_H
#define METRICS_H

/* Levenshtein distance between token sequences. */
int edit_distance(const int *a, int na, const int *b, int nb);

typedef struct {
    long n;               /* examples scored */
    long exact;           /* exactly right */
    long tok_correct, tok_total;
    long edits, ref_tokens;
} Scores;

void scores_init(Scores *s);
/* Score one prediction against its references (refs[n_refs], ref_lens). */
void scores_add(Scores *s, const int *pred, int pred_len,
                const int *const *refs, const int *ref_lens, int n_refs);
double scores_exact(const Scores *s);      /* 0..1 */
double scores_token_acc(const Scores *s);  /* 0..1 */
double scores_per(const Scores *s);        /* 0..  */
double scores_wer(const Scores *s);        /* 0..1 */

#endif
