/* results.c - the flat results.json every run writes (see results.h).
 *
 * Values are stored already JSON-encoded: a string value with its quotes and
 * escapes, a number exactly (json_number: an integer as an integer, any other
 * value with the fewest digits that read back to the same float or double;
 * JSON has no NaN or Infinity, so a non-finite number is written as null). A
 * config value that is an id (a key ending in _crc: hex digits) stays a
 * string. Setting a key again replaces its value, so the file never holds
 * duplicate keys. */
#include "io/results.h"
#include "util/error.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void results_init(Results *r) {
    memset(r, 0, sizeof *r);
}

/* JSON-encode s (with the surrounding quotes) into out. A value too long for
 * out is cut, never in the middle of an escape or a UTF-8 character. */
static void json_string(char *out, size_t outlen, const char *s) {
    size_t used = 0;
    out[used++] = '"';
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        char piece[8];
        switch (*c) {
        case '"':  strcpy(piece, "\\\""); break;
        case '\\': strcpy(piece, "\\\\"); break;
        case '\n': strcpy(piece, "\\n"); break;
        case '\r': strcpy(piece, "\\r"); break;
        case '\t': strcpy(piece, "\\t"); break;
        case '\b': strcpy(piece, "\\b"); break;
        case '\f': strcpy(piece, "\\f"); break;
        default:
            if (*c < 0x20) snprintf(piece, sizeof piece, "\\u%04x", *c);
            else { piece[0] = (char)*c; piece[1] = '\0'; }
        }
        size_t n = strlen(piece);
        if (used + n + 2 > outlen) {                  /* room for '"' and NUL */
            /* Cut inside a UTF-8 character (the next byte continues it)?
             * Then drop the part of that character already copied. */
            if ((*c & 0xC0) == 0x80) {
                while (used > 1 && ((unsigned char)out[used - 1] & 0xC0) == 0x80) used--;
                if (used > 1 && ((unsigned char)out[used - 1] & 0xC0) == 0xC0) used--;
            }
            break;
        }
        memcpy(out + used, piece, n);
        used += n;
    }
    out[used++] = '"';
    out[used] = '\0';
}

/* Store an encoded value under key (replacing an earlier value). */
static void set_encoded(Results *r, const char *key, const char *encoded) {
    int slot = -1;
    for (int i = 0; i < r->n; i++)
        if (strncmp(r->keys[i], key, sizeof r->keys[i] - 1) == 0) slot = i;
    if (slot < 0) {
        if (r->n >= RESULTS_MAX) {
            fprintf(stderr, "warning: results: more than %d keys, dropping '%s'\n", RESULTS_MAX, key);
            return;
        }
        slot = r->n++;
        snprintf(r->keys[slot], sizeof r->keys[slot], "%s", key);
    }
    snprintf(r->values[slot], sizeof r->values[slot], "%s", encoded);
}

void results_set_str(Results *r, const char *key, const char *value) {
    char encoded[sizeof r->values[0]];
    json_string(encoded, sizeof encoded, value);
    set_encoded(r, key, encoded);
}

/* value as JSON that reads back to the same number: an integer below 2^53
 * with all its digits (2385408, never 2.38541e+06); a value that is a float
 * widened to double (a loss, a rate) with the fewest digits (at most 9) that
 * strtof reads back to that float, so 0.0003f is 0.0003; any other double
 * with the fewest (at most 17) that strtod reads back; null when not finite. */
static void json_number(char *out, size_t cap, double value) {
    if (!isfinite(value)) {
        snprintf(out, cap, "null");
        return;
    }
    if (value == floor(value) && fabs(value) < 9007199254740992.0) {    /* 2^53: every integer exact */
        snprintf(out, cap, "%.0f", value);
        return;
    }
    int is_float = fabs(value) <= 3.4e38 && (double)(float)value == value;
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(out, cap, "%.*g", digits, value);
        if (is_float ? (double)strtof(out, NULL) == value : strtod(out, NULL) == value) return;
    }
}

void results_set_num(Results *r, const char *key, double value) {
    char encoded[64];
    json_number(encoded, sizeof encoded, value);
    set_encoded(r, key, encoded);
}

int results_write(const Results *r, const char *path) {
    AtomicFile af;
    if (atomic_open(&af, path) != 0) return -1;
    fputs("{\n", af.f);
    for (int i = 0; i < r->n; i++) {
        char key[6 * sizeof r->keys[0] + 8];   /* worst case: every byte a 6-character escape */
        json_string(key, sizeof key, r->keys[i]);
        fprintf(af.f, "  %s: %s%s\n", key, r->values[i], i + 1 < r->n ? "," : "");
    }
    fputs("}\n", af.f);
    return atomic_close(&af, 1);
}

void results_set_config(Results *r, const char *config) {
    char key[48], value[256];
    const char *line = config;
    while (*line) {
        const char *eq = strchr(line, '='), *nl = strchr(line, '\n');
        if (!nl) nl = line + strlen(line);
        if (eq && eq < nl && eq - line < (long)sizeof key && nl - eq - 1 < (long)sizeof value) {
            snprintf(key, sizeof key, "%.*s", (int)(eq - line), line);
            snprintf(value, sizeof value, "%.*s", (int)(nl - eq - 1), eq + 1);
            char *end;
            double num = strtod(value, &end);
            size_t key_len = strlen(key);
            int is_id = key_len >= 4 && strcmp(key + key_len - 4, "_crc") == 0;   /* hex: 57522811 is no number */
            /* a BPE vocabulary's lines stay in the checkpoint (its number of merges is kept) */
            int is_vocabulary = strstr(key, "bpe_merge_") != NULL || strstr(key, "bpe_alphabet") != NULL;
            if (!is_vocabulary && !is_id && end != value && *end == '\0') results_set_num(r, key, num);
            else if (!is_vocabulary) results_set_str(r, key, value);
        }
        line = *nl ? nl + 1 : nl;
    }
}

/* The value of "key" in a results.json as results_write wrote it (a line
 * `  "key": VALUE,`): a pointer to VALUE and its length in *len; NULL when
 * the key is not there. */
static const char *json_value(const char *json, const char *key, int *len) {
    char pattern[80];
    snprintf(pattern, sizeof pattern, "\n  \"%s\": ", key);
    const char *at = strstr(json, pattern);
    if (at == NULL) return NULL;
    const char *value = at + strlen(pattern), *end = strchr(value, '\n');
    if (end == NULL) end = value + strlen(value);
    if (end > value && end[-1] == ',') end--;
    *len = (int)(end - value);
    return value;
}

/* Whether a results.json value (len characters) and an encoded one mean the
 * same: the same text, or two numbers that agree to 6 digits (files written
 * before numbers were exact kept %.6g: 2.38541e+06 for 2385408), where a
 * quoted id counts as its digits ("57522811" and 5.75228e+07). */
static int same_value(const char *old, int len, const char *now) {
    if (len == (int)strlen(now) && strncmp(old, now, (size_t)len) == 0) return 1;
    char a[64], b[64];
    const char *texts[2] = {old, now};
    int lens[2] = {len, (int)strlen(now)};
    char *outs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        const char *t = texts[i];
        int n = lens[i];
        if (n >= 2 && t[0] == '"' && t[n - 1] == '"') t++, n -= 2;
        if (n <= 0 || n >= 48) return 0;
        char digits[48], *end;
        snprintf(digits, sizeof digits, "%.*s", n, t);
        double v = strtod(digits, &end);
        if (end == digits || *end != '\0') return 0;
        snprintf(outs[i], 64, "%.6g", v);
    }
    return strcmp(a, b) == 0;
}

int results_note_other_run(const char *out_dir, const char *config) {
    char path[OUT_DIR_MAX + 64];
    if (snprintf(path, sizeof path, "%s/results.json", out_dir) >= (int)sizeof path) return 0;
    FILE *exists = fopen(path, "rb");
    if (exists == NULL) return 0;
    fclose(exists);
    size_t len;
    char *json = read_whole_file(path, &len);
    if (json == NULL) {
        clear_error();                              /* unreadable: nothing to say, not an error */
        return 0;
    }
    int steps_len, noted = 0;
    const char *steps = json_value(json, "steps", &steps_len);
    static Results mine;                            /* 38 KB: not on the stack */
    results_init(&mine);
    results_set_config(&mine, config);
    for (int i = 0; steps && atof(steps) > 0 && i < mine.n && !noted; i++) {
        int old_len = 0;
        const char *old = json_value(json, mine.keys[i], &old_len);
        if (old && same_value(old, old_len, mine.values[i])) continue;
        printf("note: %s holds the results of a training run with another configuration (%s: %.*s there, %s "
               "now): this run replaces its files of the same names, and its other files stay beside them\n",
               out_dir, mine.keys[i], old ? (old_len > 60 ? 60 : old_len) : 7, old ? old : "missing",
               mine.values[i]);
        noted = 1;
    }
    free(json);
    return noted;
}

/* The last name in the first len characters of path: "out/run" -> "run"
 * (its length in *name_len). */
static const char *last_name(const char *path, int len, int *name_len) {
    int start = len;
    while (start > 0 && path[start - 1] != '/') start--;
    *name_len = len - start;
    return path + start;
}

int results_eval_dir(char *out, int cap, const char *given, const char *default_dir, const char *checkpoint) {
    int n;
    if (given) {
        n = snprintf(out, (size_t)cap, "%s", given);
    } else {
        /* the file's name without .ckpt, after the name of the folder it is
         * in, so that out/a/model.ckpt and out/b/model.ckpt get two places */
        int file_len, folder_len = 0, default_len;
        const char *slash = strrchr(checkpoint, '/');
        const char *file = last_name(checkpoint, (int)strlen(checkpoint), &file_len);
        const char *folder = slash ? last_name(checkpoint, (int)(slash - checkpoint), &folder_len) : checkpoint;
        const char *default_name = last_name(default_dir, (int)strlen(default_dir), &default_len);
        if (file_len > 5 && strncmp(file + file_len - 5, ".ckpt", 5) == 0) file_len -= 5;
        int is_default = folder_len == default_len && strncmp(folder, default_name, (size_t)folder_len) == 0;
        int is_dots = (folder_len == 1 && folder[0] == '.') || (folder_len == 2 && strncmp(folder, "..", 2) == 0);
        if (folder_len > 0 && !is_default && !is_dots)
            n = snprintf(out, (size_t)cap, "%s/eval_%.*s_%.*s", default_dir, folder_len, folder, file_len, file);
        else
            n = snprintf(out, (size_t)cap, "%s/eval_%.*s", default_dir, file_len, file);
    }
    /* never cut (a cut path is another directory): at most OUT_DIR_MAX, so
     * every file written there fits its path buffer (util.h) */
    int limit = cap - 1 < OUT_DIR_MAX ? cap - 1 : OUT_DIR_MAX;
    if (n < 0 || n > limit) {
        char quoted[96];
        if (given)
            return fail("--out %s: longer than %d characters, the most an output directory may have (a path is "
                        "never cut: a cut one names another place); give a shorter one",
                        error_excerpt(given, quoted, sizeof quoted), limit);
        return fail("--load %s: the evaluation's output directory named after it would have %d characters, longer "
                    "than %d: give a shorter --out", error_excerpt(checkpoint, quoted, sizeof quoted), n, limit);
    }
    /* a training run's results.json says how many steps it trained */
    char path[OUT_DIR_MAX + 64];
    snprintf(path, sizeof path, "%s/results.json", out);
    FILE *exists = fopen(path, "rb");
    if (!exists) return 0;
    fclose(exists);
    size_t len;
    char *json = read_whole_file(path, &len);
    if (!json) return -1;                       /* the message names the file */
    const char *steps = strstr(json, "\"steps\":");
    int trained = steps && atof(steps + strlen("\"steps\":")) > 0;
    free(json);
    if (trained)
        return fail("--out %s holds a training run's results (%s); an evaluation with --load writes "
                    "elsewhere: give another --out, or none (then %s/eval_<folder>_<checkpoint>)", out, path, default_dir);
    return 0;
}
