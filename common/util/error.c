/* error.c - the last error message (see error.h). */
#include "util/error.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char last_message[4096];

/* The length of the well-formed UTF-8 character at s that a terminal shows
 * as text (not a C1 control, U+0080..U+009F), or 0. */
static int printable_utf8(const unsigned char *s) {
    const unsigned char c = s[0];
    int n;
    unsigned char lo = 0x80, hi = 0xbf;          /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) n = 3;
    else if (c >= 0xf0 && c <= 0xf4) n = 4;
    else return 0;
    if (c == 0xc2) lo = 0xa0;                    /* C2 80..C2 9F: the C1 controls */
    if (c == 0xe0) lo = 0xa0;                    /* overlong */
    if (c == 0xed) hi = 0x9f;                    /* surrogates */
    if (c == 0xf0) lo = 0x90;                    /* overlong */
    if (c == 0xf4) hi = 0x8f;                    /* past U+10FFFF */
    if (s[1] < lo || s[1] > hi) return 0;
    for (int k = 2; k < n; k++)
        if (s[k] < 0x80 || s[k] > 0xbf) return 0;
    return n;
}

/* in -> out (cap bytes), every byte that could act on a terminal written as
 * the four characters \xNN: control characters (a newline, a tab, ESC that
 * starts a colour or cursor sequence), DEL, and bytes of 0x80 and above that
 * are not printable UTF-8. A message quotes what a bad file holds, and must
 * stay one line of text whatever that is. Stops before a piece that would not
 * fit. */
static void escape_unprintable(const char *in, char *out, size_t cap) {
    const unsigned char *s = (const unsigned char *)in;
    size_t used = 0;
    while (*s) {
        int n = *s >= 0x20 && *s < 0x7f ? 1 : *s >= 0x80 ? printable_utf8(s) : 0;
        if (n > 0) {
            if (used + (size_t)n >= cap) break;
            memcpy(out + used, s, (size_t)n);
            used += (size_t)n;
            s += n;
        } else {
            if (used + 4 >= cap) break;
            snprintf(out + used, cap - used, "\\x%02x", *s);
            used += 4;
            s++;
        }
    }
    out[used] = '\0';
}

int fail(const char *fmt, ...) {
    /* Format into a buffer of its own first: an argument may be last_error()
     * itself (fail("%s: %s", path, last_error()) adds context to a message),
     * and vsnprintf must not read the buffer it is writing. */
    char message[sizeof last_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    escape_unprintable(message, last_message, sizeof last_message);
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
