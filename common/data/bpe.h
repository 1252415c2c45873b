/* bpe.h - byte-pair encoding (Sennrich, Haddow and Birch 2016, "Neural
 * Machine Translation of Rare Words with Subword Units"): the tokens of the
 * translation task.
 *
 * Words. Text is cut into words at blanks (spaces, tabs, newlines) and
 * nothing else, so punctuation stays on its word ("earth." is one word) and
 * decoding gives the text back with single spaces between words. A word is
 * its UTF-8 characters followed by the end-of-word marker </w>:
 * "low" -> l o w </w>.
 *
 * Learning (the paper's Algorithm 1). Count every pair of adjacent symbols
 * over all words (each word weighted by its count), merge the most frequent
 * pair into one symbol everywhere, repeat. Ties go to the pair whose left
 * symbol, then right symbol, comes first in byte order (strcmp of their
 * texts, "</w>" spelt out). Learning stops after n_merges merges, or sooner
 * when no pair occurs at least BPE_MIN_COUNT times. Two pairs may merge into
 * the same text ("ab"+"c", "a"+"bc"): that is one symbol, as in the paper,
 * where symbols are strings.
 *
 * Encoding a word: its characters and </w>, then, while two adjacent
 * symbols form a learned pair, merge the pair learned earliest (the leftmost
 * such place first). A word never seen in training thus falls back to
 * smaller pieces, down to single characters; a character the training words
 * never had becomes BPE_UNK (and is counted in *n_unk).
 *
 * Token ids: 0..3 are <pad> <bos> <eos> <unk> (as every vocabulary of the
 * project), 4 is </w> alone, 5.. the training words' characters in byte
 * order, then each merged symbol in the order its first merge made it.
 *
 * Text form (for a checkpoint's "key=value" lines):
 *
 *   bpe_alphabet=!',-.:;?ABC...abc...óú      every character, in byte order, no separator
 *   bpe_merges=2                              the number of merges
 *   bpe_merge_1=e s                           merge 1: left symbol, one space, right symbol,
 *   bpe_merge_2=es t</w>                      a symbol that ends a word written with "</w>"
 *
 * A training word containing the text "</w>" is refused, so that form is
 * never ambiguous; a word has no blank, so neither is the space. A
 * translation checkpoint keeps two vocabularies, the keys of each behind a
 * prefix ("src_bpe_alphabet=", "tgt_bpe_merge_1=", ...). */
#ifndef BPE_H
#define BPE_H
#include <stddef.h>
#include <stdint.h>

#define BPE_PAD 0
#define BPE_BOS 1
#define BPE_EOS 2
#define BPE_UNK 3
#define BPE_END_OF_WORD 4      /* the id of </w> alone */
#define BPE_FIRST_CHAR 5
#define BPE_MIN_COUNT 2
#define BPE_MAX_WORD 1024      /* the longest word in bytes (longer: an error) */
#define BPE_END_TEXT "</w>"

typedef struct {
    int n_chars;          /* the alphabet: ids BPE_FIRST_CHAR .. BPE_FIRST_CHAR + n_chars - 1 */
    int V;                /* ids in all: 5 + n_chars + merged symbols */
    char **text;          /* [V] each id's characters ("" for </w> and the specials) */
    unsigned char *ends;  /* [V] 1 when the symbol ends a word (has </w>) */
    int n_merges;
    int *merge_left, *merge_right, *merge_result;   /* [n_merges] ids, in learned order */
    long *merge_count;    /* [n_merges] the pair's count when it was merged (0 after bpe_from_text) */
    /* Private lookups: (text, ends) -> id; (left, right) -> merge rank. */
    int *sym_table, sym_mask;
    int *pair_table, pair_mask;
} Bpe;

/* The length in bytes (1-4) of the valid UTF-8 character at s[0..n), or 0
 * when s does not start one (a stray continuation byte, an overlong form, a
 * surrogate, a code point past U+10FFFF, a character cut short). */
int bpe_utf8_len(const char *s, size_t n);

/* Learn up to n_merges merges from n_words distinct words with their counts
 * (counts >= 1). Returns 0, or -1 with fail() (an empty or blank word, a
 * word with "</w>" or longer than BPE_MAX_WORD bytes, invalid UTF-8, a count
 * below 1, n_merges < 0); b is then empty (bpe_free is safe). */
int bpe_learn(Bpe *b, const char *const *words, const long *counts, int n_words, int n_merges);

/* The same, from texts: their blank-separated words are counted first. */
int bpe_learn_texts(Bpe *b, const char *const *texts, int n_texts, int n_merges);

/* Text as ids (no <bos>/<eos>). Writes at most max_ids; returns how many the
 * text has (0 for blank text), or -1 with fail() when that is more than
 * max_ids or a word is longer than BPE_MAX_WORD bytes. *n_unk (may be NULL)
 * gets the number of BPE_UNK ids. Bytes that are not UTF-8 are unknown
 * characters, one BPE_UNK each. */
int bpe_encode(const Bpe *b, const char *text, int *ids, int max_ids, int *n_unk);

/* ids as text: the pieces' characters, a space after each word's end, no
 * space at the very end; BPE_UNK as "<unk>", other specials skipped, an id
 * outside [0, V) as "?". NUL-terminates out; returns 0, or -1 with fail()
 * when it did not fit in outlen bytes (out holds what fitted). */
int bpe_decode(const Bpe *b, const int *ids, int n, char *out, int outlen);

/* One id as a piece to show: its characters and "</w>" if it ends a word
 * ("est</w>"), "<unk>" etc. for the specials, "?" outside [0, V). */
const char *bpe_piece(const Bpe *b, int id, char *buf, int cap);

/* The text form above, each key behind prefix ("" or e.g. "src_", at most
 * 20 bytes); malloc'd, NUL-terminated, each line ending in '\n'. */
char *bpe_to_text(const Bpe *b, const char *prefix);

/* Read the text form back from "key=value" lines (other keys are ignored):
 * the alphabet, then merge 1 .. bpe_merges, each of two symbols that exist
 * by then. Returns 0, or -1 with fail() naming the first missing or bad
 * line; b is then empty. */
int bpe_from_text(Bpe *b, const char *config_text, const char *prefix);

/* CRC-32 of bpe_to_text: equal only for the same alphabet and merges. */
uint32_t bpe_crc(const Bpe *b);

void bpe_free(Bpe *b);

#endif
