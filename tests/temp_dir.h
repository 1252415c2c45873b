/* temp_dir.h - a fresh directory under /tmp for a test program's files, and
 * its removal afterwards (the suites that write files share these). */
#ifndef TEMP_DIR_H
#define TEMP_DIR_H
#include <stddef.h>

/* Create /tmp/<prefix>.XXXXXX and write its path into dir (cap bytes).
 * Returns 0, or -1 when it cannot be made. */
int temp_dir_make(char *dir, size_t cap, const char *prefix);

/* Remove dir and everything in it. Returns 0, or -1 on failure. */
int temp_dir_remove(const char *dir);

#endif
