/* temp_dir.c - a fresh temporary directory for a test program (temp_dir.h). */
#include "temp_dir.h"

#include <stdio.h>
#include <stdlib.h>

int temp_dir_make(char *dir, size_t cap, const char *prefix) {
    int n = snprintf(dir, cap, "/tmp/%s.XXXXXX", prefix);
    if (n < 0 || (size_t)n >= cap) return -1;
    return mkdtemp(dir) ? 0 : -1;
}

int temp_dir_remove(const char *dir) {
    char cmd[600];
    int n = snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (n < 0 || (size_t)n >= sizeof cmd) return -1;
    return system(cmd) == 0 ? 0 : -1;
}
