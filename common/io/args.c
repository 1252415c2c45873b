/* args.c - command-line flags with one clear error per mistake (see args.h).
 *
 * Each argument is looked up in the program's ArgSpec table, its value
 * parsed strictly (the whole string must be a number: "12abc", "", "nan" and
 * "inf" are refused, so are integers that overflow), range-checked and
 * stored. The first mistake stops parsing with a one-line message that names
 * the flag, what was expected, and what was given.
 *
 * Ranges: min and max are inclusive; min == max == 0 means "no range". */
#include "io/args.h"
#include "util/error.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_range(const ArgSpec *s) { return !(s->min == 0 && s->max == 0); }

/* Find the spec whose name is the first name_len characters of name. */
static const ArgSpec *find_spec(const ArgSpec *specs, int n_specs, const char *name, size_t name_len) {
    for (int i = 0; i < n_specs; i++)
        if (strlen(specs[i].name) == name_len && strncmp(specs[i].name, name, name_len) == 0)
            return &specs[i];
    return NULL;
}

/* Is value one of the comma-separated choices? */
static int is_choice(const char *choices, const char *value) {
    size_t value_len = strlen(value);
    const char *c = choices;
    while (*c != '\0') {
        const char *comma = strchr(c, ',');
        size_t len = comma ? (size_t)(comma - c) : strlen(c);
        if (len == value_len && strncmp(c, value, len) == 0) return 1;
        if (comma == NULL) break;
        c = comma + 1;
    }
    return 0;
}

/* "rnn,gru,lstm" -> "rnn, gru, lstm" */
static void format_choices(char *out, size_t outlen, const char *choices) {
    size_t used = 0;
    for (const char *c = choices; *c != '\0' && used + 3 < outlen; c++) {
        out[used++] = *c;
        if (*c == ',') out[used++] = ' ';
    }
    out[used] = '\0';
}

static int parse_int(const ArgSpec *s, const char *value) {
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (value[0] == '\0' || isspace((unsigned char)value[0]) || end == value || *end != '\0')
        return fail("--%s: expected an integer, got '%s'", s->name, value);
    /* Too big for a long or an int counts as out of range: the message gives
     * the flag's own range when it has one, the range of an int otherwise. */
    int overflow = errno == ERANGE || v < INT_MIN || v > INT_MAX;
    if (has_range(s) && (overflow || v < s->min || v > s->max))
        return fail("--%s: expected an integer in [%.0f, %.0f], got '%s'", s->name, s->min, s->max, value);
    if (overflow)
        return fail("--%s: expected an integer in [%d, %d], got '%s'", s->name, INT_MIN, INT_MAX, value);
    *(int *)s->dest = (int)v;
    return 0;
}

static int parse_float(const ArgSpec *s, const char *value) {
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (value[0] == '\0' || isspace((unsigned char)value[0]) || end == value || *end != '\0' ||
        !isfinite(v) || fabs(v) > FLT_MAX)      /* nan, inf, 1e999 */
        return fail("--%s: expected a number, got '%s'", s->name, value);
    if (has_range(s) && (v < s->min || v > s->max))
        return fail("--%s: expected a number in [%g, %g], got '%s'", s->name, s->min, s->max, value);
    *(float *)s->dest = (float)v;
    return 0;
}

static int parse_string(const ArgSpec *s, const char *value) {
    if (s->choices != NULL && !is_choice(s->choices, value)) {
        char list[512];
        format_choices(list, sizeof list, s->choices);
        return fail("--%s: expected one of %s, got '%s'", s->name, list, value);
    }
    if (value[0] == '\0') return fail("--%s: expected a non-empty value", s->name);
    *(const char **)s->dest = value;
    return 0;
}

int args_parse(int argc, char **argv, const ArgSpec *specs, int n_specs) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return 1;
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            return fail("unexpected argument '%s' (flags look like --name value; see --help)", arg);

        /* "--name=value" or "--name value" */
        const char *name = arg + 2;
        const char *equals = strchr(name, '=');
        size_t name_len = equals ? (size_t)(equals - name) : strlen(name);
        const ArgSpec *s = find_spec(specs, n_specs, name, name_len);
        if (s == NULL) {
            if (equals) return fail("unknown flag '--%.*s' (see --help)", (int)name_len, name);
            return fail("unknown flag '%s' (see --help)", arg);
        }

        if (s->type == ARG_REFUSED)
            return fail("--%s has no effect in this program: %s", s->name, s->help ? s->help : "it is not used here");
        if (s->type == ARG_BOOL) {
            if (equals) return fail("--%s: takes no value, got '%s'", s->name, equals + 1);
            *(int *)s->dest = 1;
            continue;
        }

        const char *value;
        if (equals) {
            value = equals + 1;
        } else {
            /* The next argument is the value, unless there is none or it is
             * another flag (a negative number like -1 is still a value). */
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0)
                return fail("--%s: expected a value after the flag", s->name);
            value = argv[++i];
        }

        int rc;
        switch (s->type) {
        case ARG_INT:    rc = parse_int(s, value); break;
        case ARG_FLOAT:  rc = parse_float(s, value); break;
        case ARG_STRING: rc = parse_string(s, value); break;
        default:         rc = fail("--%s: unknown flag type %d", s->name, (int)s->type); break;
        }
        if (rc != 0) return -1;
    }
    return 0;
}

/* Print text from column `column` on, breaking lines at spaces before
 * column HELP_COLUMNS; continuation lines start at column `indent`. */
enum { HELP_COLUMNS = 100 };
static void print_wrapped(const char *text, int column, int indent) {
    int line_empty = 1;                         /* no word of text on this line yet */
    for (const char *p = text; *p;) {
        int word = (int)strcspn(p, " ");
        if (!line_empty && column + 1 + word > HELP_COLUMNS) {
            printf("\n%*s", indent, "");
            column = indent;
            line_empty = 1;
        }
        if (!line_empty) {
            putchar(' ');
            column++;
        }
        printf("%.*s", word, p);
        column += word;
        line_empty = 0;
        p += word;
        while (*p == ' ') p++;
    }
    putchar('\n');
}

/* "--name N" (or X, S; nothing for a switch) into out. */
static void flag_column(char *out, size_t cap, const ArgSpec *s) {
    const char *type = s->type == ARG_INT ? " N" : s->type == ARG_FLOAT ? " X" : s->type == ARG_STRING ? " S" : "";
    snprintf(out, cap, "--%s%s", s->name, type);
}

/* One flag: its column, then help, default and choices, wrapped. A number's
 * range is left to the message that refuses a value outside it. */
static void print_flag(const ArgSpec *s, int width) {
    char first[128], range[96] = "", dflt[256] = "", text[1024];
    flag_column(first, sizeof first, s);
    switch (s->type) {
    case ARG_INT:
        snprintf(dflt, sizeof dflt, "%d", *(const int *)s->dest);   /* the range is in the error message */
        break;
    case ARG_FLOAT:
        snprintf(dflt, sizeof dflt, "%g", (double)*(const float *)s->dest);
        break;
    case ARG_STRING: {
        const char *v = *(const char *const *)s->dest;
        /* No default (NULL): nothing printed, the help text says what
         * happens without the flag ("default out/<chapter>"). */
        if (v != NULL) snprintf(dflt, sizeof dflt, "%s", v);
        if (s->choices) {                               /* "rnn,gru,lstm" -> "; rnn|gru|lstm" */
            snprintf(range, sizeof range, "; %s", s->choices);
            for (char *c = range; *c; c++)
                if (*c == ',') *c = '|';
        }
        break;
    }
    default:                                           /* a switch: off unless given */
        break;
    }
    const char *help = s->help ? s->help : "";
    if (dflt[0] != '\0')
        snprintf(text, sizeof text, "%s (default %s%s)", help, dflt, range);
    else if (range[0] != '\0')
        snprintf(text, sizeof text, "%s (%s)", help, range + 2);   /* without the "; " */
    else
        snprintf(text, sizeof text, "%s", help);
    printf("  %-*s  ", width, first);
    print_wrapped(text, 2 + width + 2, 2 + width + 2);
}

void args_print_help(const char *prog, const char *summary, const ArgSpec *specs, int n_specs,
                     const char *examples) {
    static const ArgGroup order[] = {ARG_MODEL, ARG_DATA, ARG_TRAINING, ARG_OUTPUT, ARG_NO_GROUP, ARG_SHARED};
    static const char *const heading[] = {"", "model", "data", "training", "evaluation and output", "shared"};
    printf("usage: %s [flags]\n", prog);
    if (summary != NULL && summary[0] != '\0') printf("\n%s\n", summary);
    printf("\n");

    /* First column: "--name TYPE", padded to the widest one. */
    char first[128];
    int width = (int)strlen("--help");
    for (int i = 0; i < n_specs; i++) {
        if (specs[i].type == ARG_REFUSED) continue;
        flag_column(first, sizeof first, &specs[i]);
        if ((int)strlen(first) > width) width = (int)strlen(first);
    }
    for (size_t g = 0; g < sizeof order / sizeof order[0]; g++) {
        int printed = 0;
        for (int i = 0; i < n_specs; i++) {
            if (specs[i].group != order[g] || specs[i].type == ARG_REFUSED) continue;
            if (!printed++) printf("%s:\n", order[g] == ARG_NO_GROUP ? "flags" : heading[order[g]]);
            print_flag(&specs[i], width);
        }
        if (order[g] == ARG_SHARED) {
            if (!printed) printf("shared:\n");
            printf("  %-*s  %s\n", width, "--help", "print this help and exit");
        }
    }
    if (examples != NULL && examples[0] != '\0') {
        printf("\nexamples:\n");
        for (const char *line = examples; *line;) {
            const char *nl = strchr(line, '\n');
            int len = nl ? (int)(nl - line) : (int)strlen(line);
            printf("  %.*s\n", len, line);
            line += len + (nl != NULL);
        }
    }
}

ArgSpec args_refused(const char *name, const char *why) {
    return (ArgSpec){.name = name, .type = ARG_REFUSED, .help = why};
}

int args_int_list(const char *flag, const char *text, int *out, int max, int largest) {
    int n = 0;
    const char *p = text;
    for (;;) {   /* one item per turn, the one after a last comma too ("1,2," ends in an empty one) */
        if (*p == ',' || *p == '\0')
            return fail("--%s '%s': item %d is empty (expected numbers separated by single commas, e.g. 1,2,4)",
                        flag, text, n + 1);
        char *end = (char *)p;
        long v = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : 0;
        if (end == p || (*end != ',' && *end != '\0') || v < 1 || v > largest || n == max)
            return fail("--%s: expected up to %d comma-separated numbers from 1 to %d, got '%s'", flag, max, largest,
                        text);
        out[n++] = (int)v;
        if (*end == '\0') return n;
        p = end + 1;
    }
}

int args_given(int argc, char **argv, const char *name) {
    const size_t n = strlen(name);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, name, n) == 0 &&
            (argv[i][2 + n] == '\0' || argv[i][2 + n] == '='))
            return 1;
    return 0;
}

int args_refuse_with_load(int argc, char **argv, const ArgSpec *specs, int n_specs) {
    for (int i = 0; i < n_specs; i++)
        if (specs[i].type != ARG_REFUSED && specs[i].with_load != ARG_ACTS_WITH_LOAD &&
            args_given(argc, argv, specs[i].name))
            return fail("--%s has no effect with --load: the checkpoint's config decides the model, its task "
                        "and its training; drop --%s (or train a new model without --load)", specs[i].name,
                        specs[i].name);
    return 0;
}

ArgSpec *args_find(ArgSpec *specs, int n_specs, const char *name) {
    for (int i = 0; i < n_specs; i++)
        if (strcmp(specs[i].name, name) == 0) return &specs[i];
    return NULL;
}

/* The preset's flags in front of the user's (see args.h). */
int args_parse_with_preset(int argc, char **argv, const char *preset, const ArgSpec *specs,
                             int n_specs, char ***storage) {
    size_t preset_len = strlen(preset);
    int max_words = (int)preset_len / 2 + 2;
    char **new_argv = xcalloc((size_t)(argc + max_words + 1) * sizeof(char *) + preset_len + 1, 1);
    char *words = (char *)(new_argv + argc + max_words + 1);
    memcpy(words, preset, preset_len + 1);
    int n = 0;
    new_argv[n++] = argv[0];
    for (char *w = strtok(words, " "); w; w = strtok(NULL, " ")) new_argv[n++] = w;
    for (int i = 1; i < argc; i++) new_argv[n++] = argv[i];
    *storage = new_argv;
    return args_parse(n, new_argv, specs, n_specs);
}
