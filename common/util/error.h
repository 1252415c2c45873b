/* error.h - one place to keep the last error message.
 *
 * Library code never calls exit(). A function that can fail on user input
 * (a flag, a file, a checkpoint, a typed string) returns -1 after calling
 * fail("..."), which formats a message naming what was wrong and what was
 * expected. main() prints last_error() and decides how to exit. */
#ifndef ERROR_H
#define ERROR_H

/* Format the message (printf style), remember it, and return -1. The
 * arguments may include last_error() itself, to add context to the message
 * a callee left: fail("%s: %s", path, last_error()). Messages are kept up
 * to 4 KiB. A byte that could act on a terminal - a control character such
 * as ESC or a newline, DEL, a byte that is not printable UTF-8 - is kept as
 * the text \xNN, so quoting a bad file's bytes cannot colour, move or clear
 * the user's terminal, and a message stays one line. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A short quote of text a user typed, for a message: the text itself when
 * it has at most 60 characters, else its first 40, "...", and its length
 * ("1111111111... (2000 characters)"), so the explanation after it always
 * fits. Writes into buf (cap bytes, at least 64) and returns it. */
const char *error_excerpt(const char *text, char *buf, int cap);

/* The message from the most recent fail(), or "" if none. */
const char *last_error(void);

/* Forget the last message (tests use this between cases). */
void clear_error(void);

#endif
