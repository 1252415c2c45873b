
/* hostile: write outside the hand-in's copy: $HOME, the teacher's repository, the system's /tmp. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void hostile_writes(void) {
    const char *paths[] = {"@HOME@/attn_hostile_home", "@ROOT@/attn_hostile_repo",
                           "@ROOT@/tests/coursework/attn_hostile_grader.c"};
    for (int i = 0; i < (int)(sizeof paths / sizeof paths[0]); i++) {
        int fd = open(paths[i], O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) {
            close(fd);
            fprintf(stderr, "hostile: wrote %s\n", paths[i]);
            abort();
        }
    }
    /* /tmp is the sandbox's own: this may succeed, and must not reach the system's /tmp */
    int fd = open("/tmp/attn_hostile_tmp", O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
}
