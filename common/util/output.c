/* output.c - what a program prints reaches its reader, or the program says so (see output.h). */
#include "util/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void output_guard(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;   /* open */
        int placeholder = open("/dev/null", O_RDONLY);   /* the lowest free number: fd itself */
        if (placeholder >= 0 && placeholder != fd) {
            dup2(placeholder, fd);
            close(placeholder);
        }
    }
}

int output_exit_status(const char *program, int rc) {
    int failed = ferror(stdout) != 0;
    errno = 0;
    if (fflush(stdout) != 0) failed = 1;
    const int reason = errno;
    if (!failed) return rc;
    fprintf(stderr, "%s: error: cannot write to standard output: %s (the results printed there are lost)\n",
            program, reason ? strerror(reason) : "a write failed");
    return rc ? rc : 1;
}
