
/* hostile: a fork bomb (1000 processes that sleep); it aborts only if they all started. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((constructor)) static void hostile_fork_bomb(void) {
    enum { WANT = 1000 };
    static pid_t kids[WANT];
    int n = 0;
    while (n < WANT) {
        pid_t p = fork();
        if (p < 0) break;
        if (p == 0) {
            pause();
            _exit(0);
        }
        kids[n++] = p;
    }
    for (int i = 0; i < n; i++) kill(kids[i], SIGKILL);
    for (int i = 0; i < n; i++) waitpid(kids[i], NULL, 0);
    if (n == WANT) {
        fprintf(stderr, "hostile: %d processes\n", n);
        abort();
    }
}
