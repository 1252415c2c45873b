/* error.c - the last error message (see error.h). */
#include "util/error.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char last_message[4096];

int fail(const char *fmt, ...) {
    /* Format into a buffer of its own first: an argument may be last_error()
     * itself (fail("%s: %s", path, last_error()) adds context to a message),
     * and vsnprintf must not read the buffer it is writing. */
    char message[sizeof last_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(last_message, message, sizeof last_message);
    return -1;
}

const char *error_excerpt(const char *text, char *buf, int cap) {
    const size_t n = strlen(text);
    if (n <= 60) snprintf(buf, (size_t)cap, "%s", text);
    else snprintf(buf, (size_t)cap, "%.40s... (%zu characters)", text, n);
    return buf;
}

const char *last_error(void) { return last_message; }

void clear_error(void) { last_message[0] = '\0'; }
