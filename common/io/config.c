/* config.c - configuration structs to and from checkpoint text (see config.h). */
#include "io/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "util/error.h"

/* The index of name among the comma-separated choices, or -1. */
static int choice_index(const char *choices, const char *name) {
    const size_t len = strlen(name);
    int i = 0;
    for (const char *c = choices; *c; i++) {
        const char *end = strchr(c, ',');
        const size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == len && strncmp(c, name, n) == 0) return i;
        if (!end) break;
        c = end + 1;
    }
    return -1;
}

/* Choice i of the comma-separated choices, copied into out. */
static void choice_name(const char *choices, int i, char *out, size_t cap) {
    const char *c = choices;
    for (; i > 0 && c; i--) {
        c = strchr(c, ',');
        if (c) c++;
    }
    const char *end = c ? strchr(c, ',') : NULL;
    const size_t n = !c ? 0 : end ? (size_t)(end - c) : strlen(c);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), c ? c : "");
}

static int read_field(const char *text, const ConfigField *f, char *base) {
    char value[256];
    const char *key = f->key;
    if (config_get_or(text, key, "", value, sizeof value) < 0) return -1;
    if (!value[0] && f->old_key) {
        key = f->old_key;
        if (config_get_or(text, key, "", value, sizeof value) < 0) return -1;
    }
    if (!value[0]) {
        if (!f->fallback) return fail("config: missing key '%s'", f->key);
        snprintf(value, sizeof value, "%s", f->fallback);
    }
    void *field = base + f->offset;
    char *end = NULL;
    switch (f->type) {
    case CONFIG_INT: {
        const long v = strtol(value, &end, 10);
        if (end == value || *end || v < f->lo || v > f->hi)
            return fail("config key '%s': expected an integer in %g..%g, got '%s'", key, f->lo, f->hi, value);
        *(int *)field = (int)v;
        return 0;
    }
    case CONFIG_FLOAT: {
        const float v = strtof(value, &end);
        if (end == value || *end || !(v >= f->lo && v <= f->hi))
            return fail("config key '%s': expected a number in [%g, %g], got '%s'", key, f->lo, f->hi, value);
        *(float *)field = v;
        return 0;
    }
    case CONFIG_CHOICE: {
        const int i = choice_index(f->choices, value);
        if (i < 0) return fail("config key '%s': expected one of %s, got '%s'", key, f->choices, value);
        *(int *)field = i;
        return 0;
    }
    case CONFIG_TEXT:
        if ((int)strlen(value) >= f->size)
            return fail("config key '%s': '%s' is longer than %d characters", key, value, f->size - 1);
        memcpy(field, value, strlen(value) + 1);
        return 0;
    }
    return fail("config key '%s': unknown field type", f->key);
}

int config_read(const char *text, const ConfigField *fields, int n, void *out) {
    for (int i = 0; i < n; i++)
        if (read_field(text, &fields[i], out) < 0) return -1;
    return 0;
}

int config_append(char *buf, size_t cap, const char *fmt, ...) {
    const size_t used = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - used) {
        buf[used] = '\0';
        return fail("configuration text longer than %zu bytes", cap - 1);
    }
    return 0;
}

int config_write(char *buf, size_t cap, const ConfigField *fields, int n, const void *in) {
    const char *base = in;
    for (int i = 0; i < n; i++) {
        const ConfigField *f = &fields[i];
        const void *field = base + f->offset;
        char name[64];
        int rc = 0;
        switch (f->type) {
        case CONFIG_INT:
            if (f->omit_fallback && f->fallback && *(const int *)field == atoi(f->fallback)) break;   /* as before */
            rc = config_append(buf, cap, "%s=%d\n", f->key, *(const int *)field);
            break;
        case CONFIG_FLOAT: rc = config_append(buf, cap, "%s=%g\n", f->key, (double)*(const float *)field); break;
        case CONFIG_CHOICE:
            choice_name(f->choices, *(const int *)field, name, sizeof name);
            if (f->omit_fallback && f->fallback && strcmp(name, f->fallback) == 0) break;   /* the text of before */
            rc = config_append(buf, cap, "%s=%s\n", f->key, name);
            break;
        case CONFIG_TEXT: rc = config_append(buf, cap, "%s=%s\n", f->key, (const char *)field); break;
        }
        if (rc < 0) return -1;
    }
    return 0;
}
