/* error.c - the last error message (see error.h). */
#include "util/error.h"
#include <stdarg.h>
#include <stdio.h>

static char last_message[1024];

int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return -1;
}

const char *last_error(void) { return last_message; }

void clear_error(void) { last_message[0] = '\0'; }
