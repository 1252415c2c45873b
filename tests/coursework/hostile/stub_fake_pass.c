
/* hostile: print the grader's PASS lines for every exercise and stop before any check runs. */
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void hostile_fake_pass(void) {
    static const char *const ids[] = {"04.projections", "04.causal_mask", "04.padding_mask", "04.sinusoidal"};
    for (int i = 0; i < 4; i++) printf("check %s: x\nok %s: x\nPASS %s\n", ids[i], ids[i], ids[i]);
    fflush(stdout);
    _exit(0);
}
