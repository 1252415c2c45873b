/* vocab.h - token <-> id tables with the four special tokens.
 *
 * Ids 0..3 are always <pad>, <bos>, <eos>, <unk>. A token is a string: one
 * character for character-level vocabularies (dates, reverse, the letters of
 * g2p), or a symbol such as "AH" for the phonemes of g2p. */
#ifndef VOCAB_H
#define VOCAB_H

#define PAD_ID 0
#define BOS_ID 1
#define EOS_ID 2
#define UNK_ID 3
#define VOCAB_MAX 4096
#define TOKEN_MAX 32

typedef struct {
    int size;
    char tokens[VOCAB_MAX][TOKEN_MAX];
} Vocab;

/* Start with just the four specials. */
void vocab_init(Vocab *v);
/* Add a token if absent; returns its id (or -1 with fail() when full or too long). */
int vocab_add(Vocab *v, const char *token);
/* Id of token, or UNK_ID when absent. */
int vocab_id(const Vocab *v, const char *token);
/* Id of a one-character token, or UNK_ID when absent. */
int vocab_char_id(const Vocab *v, char c);
const char *vocab_token(const Vocab *v, int id);

/* As one line of text: tokens joined by '\t' (tokens never contain tabs or
 * newlines). Returns 0, or -1 with fail() if it does not fit in outlen. */
int vocab_serialize(const Vocab *v, char *out, int outlen);
/* Inverse of vocab_serialize; checks the specials are in place.
 * Returns 0, or -1 with fail() on malformed text. */
int vocab_deserialize(Vocab *v, const char *text);

/* Render ids as text: characters concatenated (sep = "") or symbols joined
 * by sep (" " for phonemes). Stops at <eos>; skips <pad>/<bos>. */
void vocab_decode(const Vocab *v, const int *ids, int n, const char *sep, char *out, int outlen);

#endif
