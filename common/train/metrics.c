/* metrics.c - edit distance and the accuracy scores of predicted sequences
 * (see metrics.h).
 *
 * Every prediction is compared with its closest reference: the one with the
 * smallest edit distance (the first one on a tie). Exact match, token accuracy
 * and PER are all measured against that one reference, so a g2p word with two
 * pronunciations is judged against the one the model was aiming for. */
#include "train/metrics.h"
#include "util/util.h"
#include <stdlib.h>

/* Levenshtein distance with one row of the dynamic-programming table:
 * row[j] = distance between a[0..i) and b[0..j). */
int edit_distance(const int *a, int na, const int *b, int nb) {
    if (na == 0) return nb;
    if (nb == 0) return na;
    int *row = xmalloc(sizeof(int) * (size_t)(nb + 1));
    for (int j = 0; j <= nb; j++) row[j] = j; /* "" -> b[0..j): j insertions */
    for (int i = 1; i <= na; i++) {
        int diagonal = row[0]; /* distance(a[0..i-1), b[0..0)) */
        row[0] = i;
        for (int j = 1; j <= nb; j++) {
            int above = row[j]; /* distance(a[0..i-1), b[0..j)) */
            int substitute = diagonal + (a[i - 1] != b[j - 1]);
            int delete_a = above + 1;
            int insert_b = row[j - 1] + 1;
            int best = substitute;
            if (delete_a < best) best = delete_a;
            if (insert_b < best) best = insert_b;
            row[j] = best;
            diagonal = above;
        }
    }
    int distance = row[nb];
    free(row);
    return distance;
}

void scores_init(Scores *s) {
    s->n = 0;
    s->exact = 0;
    s->tok_correct = 0;
    s->tok_total = 0;
    s->edits = 0;
    s->ref_tokens = 0;
}

void scores_add(Scores *s, const int *pred, int pred_len,
                const int *const *refs, const int *ref_lens, int n_refs) {
    /* No reference at all: score against the empty sequence. */
    static const int empty[1] = {0};
    const int *best_ref = empty;
    int best_len = 0;
    int best_distance = pred_len;
    for (int r = 0; r < n_refs; r++) {
        int distance = edit_distance(pred, pred_len, refs[r], ref_lens[r]);
        if (r == 0 || distance < best_distance) {
            best_distance = distance;
            best_ref = refs[r];
            best_len = ref_lens[r];
        }
    }

    int same_position = 0;
    for (int i = 0; i < best_len && i < pred_len; i++) {
        if (pred[i] == best_ref[i]) same_position++;
    }

    s->n++;
    if (best_distance == 0) s->exact++;
    s->tok_correct += same_position;
    s->tok_total += best_len;
    s->edits += best_distance;
    s->ref_tokens += best_len;
}

double scores_exact(const Scores *s) {
    return s->n > 0 ? (double)s->exact / (double)s->n : 0.0;
}

double scores_token_acc(const Scores *s) {
    return s->tok_total > 0 ? (double)s->tok_correct / (double)s->tok_total : 0.0;
}

double scores_per(const Scores *s) {
    return s->ref_tokens > 0 ? (double)s->edits / (double)s->ref_tokens : 0.0;
}

double scores_wer(const Scores *s) {
    return s->n > 0 ? 1.0 - (double)s->exact / (double)s->n : 0.0;
}
