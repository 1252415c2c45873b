/* config.h - a model's configuration struct to and from the text its
 * checkpoint keeps ("key=value\n" lines), read and written in one place.
 *
 * A model never parses text: it takes a C struct (RnnConfig, GptConfig, ...).
 * The struct's fields that a checkpoint records are listed once, beside the
 * struct, as a table of ConfigFields: the key, the type, where the field
 * sits (offsetof) and what values are accepted. config_write turns a struct
 * into its lines; config_read fills a struct from a checkpoint's text and
 * refuses a missing line or a value out of range with one message naming
 * the key. The program (its main.c) calls them at its edge: writing when it
 * trains, reading with --load.
 *
 *   static const ConfigField RNN_FIELDS[] = {
 *       {"cell",  CONFIG_CHOICE, offsetof(RnnConfig, cell), .choices = "rnn,gru,lstm"},
 *       {"embed", CONFIG_INT,    offsetof(RnnConfig, D_E),  .lo = 1, .hi = 4096},
 *       {"state", CONFIG_INT,    offsetof(RnnConfig, S),    .lo = 1, .hi = 4096, .old_key = "hidden"},
 *   };
 */
#ifndef CONFIG_H
#define CONFIG_H
#include <stddef.h>

typedef enum {
    CONFIG_INT,     /* an int field, "%d" */
    CONFIG_FLOAT,   /* a float field, "%g" */
    CONFIG_CHOICE,  /* an int (or enum) field holding the index of one of .choices, written as its name */
    CONFIG_TEXT     /* a char array of .size bytes, written as it is */
} ConfigType;

typedef struct {
    const char *key;       /* the line's key: "embed" */
    ConfigType type;
    size_t offset;         /* offsetof(the struct, the field) */
    double lo, hi;         /* CONFIG_INT, CONFIG_FLOAT: the accepted range, both ends included */
    const char *choices;   /* CONFIG_CHOICE: the names, comma-separated: "rnn,gru,lstm" */
    const char *fallback;  /* a key added after checkpoints were saved: the value those mean (NULL: required) */
    const char *old_key;   /* the key's earlier name, still read from old checkpoints (NULL: none) */
    int size;              /* CONFIG_TEXT: the char array's size */
    int omit_fallback;     /* CONFIG_CHOICE or CONFIG_INT with a fallback: 1 writes no line when the value
                            * is the fallback, so a model without the newer option keeps the text (and the
                            * checkpoint bytes) it had before the key existed */
} ConfigField;

/* Fill the struct at out from text: each field from its key's line (or its
 * old_key's, or its fallback). Returns 0, or -1 with fail() naming the
 * first key that is missing or out of range. */
int config_read(const char *text, const ConfigField *fields, int n, void *out);

/* Append the struct's lines ("key=value\n", in the table's order) to the
 * NUL-terminated text in buf (cap bytes). Returns 0, or -1 with fail() when
 * they do not fit. */
int config_write(char *buf, size_t cap, const ConfigField *fields, int n, const void *in);

/* Append one line "key=value\n" (formatted like printf) to buf. Returns 0,
 * or -1 with fail() when it does not fit. */
int config_append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
