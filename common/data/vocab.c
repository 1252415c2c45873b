/* vocab.c - token <-> id tables (see vocab.h).
 *
 * A vocabulary is a plain array of token strings; the id of a token is its
 * index. Ids 0..3 are the specials <pad>, <bos>, <eos>, <unk>. Lookups are a
 * linear scan: the vocabularies here hold at most a few dozen tokens, so a
 * scan is as fast as a hash table and much easier to read. */
#include "data/vocab.h"
#include "util/error.h"
#include <stdio.h>
#include <string.h>

static const char *const special_tokens[4] = {"<pad>", "<bos>", "<eos>", "<unk>"};

void vocab_init(Vocab *v) {
    memset(v, 0, sizeof *v);
    for (int i = 0; i < 4; i++) {
        strcpy(v->tokens[i], special_tokens[i]);
    }
    v->size = 4;
}

/* Position of token in v, or -1. */
static int vocab_find(const Vocab *v, const char *token) {
    for (int i = 0; i < v->size; i++) {
        if (strcmp(v->tokens[i], token) == 0) return i;
    }
    return -1;
}

int vocab_add(Vocab *v, const char *token) {
    int existing = vocab_find(v, token);
    if (existing >= 0) return existing;
    size_t len = strlen(token);
    if (len == 0) return fail("vocab_add: empty token (tokens need at least one character)");
    if (len >= TOKEN_MAX) {
        return fail("vocab_add: token \"%s\" has %zu characters; at most %d fit", token, len,
                    TOKEN_MAX - 1);
    }
    if (strpbrk(token, "\t\n") != NULL) {
        return fail("vocab_add: token \"%s\" contains a tab or newline", token);
    }
    if (v->size >= VOCAB_MAX) {
        return fail("vocab_add: vocabulary full (%d tokens) while adding \"%s\"", VOCAB_MAX, token);
    }
    strcpy(v->tokens[v->size], token);
    return v->size++;
}

int vocab_id(const Vocab *v, const char *token) {
    int id = vocab_find(v, token);
    return id >= 0 ? id : UNK_ID;
}

int vocab_char_id(const Vocab *v, char c) {
    for (int i = 4; i < v->size; i++) {
        if (v->tokens[i][0] == c && v->tokens[i][1] == '\0') return i;
    }
    return UNK_ID;
}

const char *vocab_token(const Vocab *v, int id) {
    if (id < 0 || id >= v->size) return "<?>";
    return v->tokens[id];
}

int vocab_serialize(const Vocab *v, char *out, int outlen) {
    int used = 0;
    if (outlen <= 0) return fail("vocab_serialize: no room for the vocabulary text");
    out[0] = '\0';
    for (int i = 0; i < v->size; i++) {
        int n = snprintf(out + used, (size_t)(outlen - used), "%s%s", i > 0 ? "\t" : "",
                         v->tokens[i]);
        if (n < 0 || n >= outlen - used) {
            return fail("vocab_serialize: %d tokens do not fit in %d bytes", v->size, outlen);
        }
        used += n;
    }
    return 0;
}

int vocab_deserialize(Vocab *v, const char *text) {
    Vocab parsed;
    memset(&parsed, 0, sizeof parsed);
    const char *p = text;
    for (;;) {
        /* One token runs up to the next tab, newline or the end. */
        size_t len = strcspn(p, "\t\n");
        int index = parsed.size;
        if (len == 0) {
            return fail("vocabulary text: token %d is empty (expected tokens separated by single tabs)",
                        index);
        }
        if (len >= TOKEN_MAX) {
            return fail("vocabulary text: token %d is %zu characters long; at most %d fit", index,
                        len, TOKEN_MAX - 1);
        }
        if (index >= VOCAB_MAX) {
            return fail("vocabulary text: more than %d tokens", VOCAB_MAX);
        }
        char token[TOKEN_MAX];
        memcpy(token, p, len);
        token[len] = '\0';
        if (vocab_find(&parsed, token) >= 0) {
            return fail("vocabulary text: token %d \"%s\" appears twice", index, token);
        }
        strcpy(parsed.tokens[index], token);
        parsed.size++;
        p += len;
        if (*p != '\t') break;
        p++;
    }
    if (*p == '\n') p++;
    if (*p != '\0') return fail("vocabulary text: unexpected text after the first line");
    for (int i = 0; i < 4; i++) {
        if (parsed.size <= i || strcmp(parsed.tokens[i], special_tokens[i]) != 0) {
            return fail("vocabulary text: token %d should be %s (the specials come first)", i,
                        special_tokens[i]);
        }
    }
    *v = parsed;
    return 0;
}

void vocab_decode(const Vocab *v, const int *ids, int n, const char *sep, char *out, int outlen) {
    if (outlen <= 0) return;
    int used = 0, written_tokens = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (ids[i] == EOS_ID) break;
        if (ids[i] == PAD_ID || ids[i] == BOS_ID) continue;
        const char *token = vocab_token(v, ids[i]);
        int m = snprintf(out + used, (size_t)(outlen - used), "%s%s",
                         written_tokens > 0 ? sep : "", token);
        if (m < 0 || m >= outlen - used) {
            out[outlen - 1] = '\0'; /* truncated: keep what fits */
            return;
        }
        used += m;
        written_tokens++;
    }
}
