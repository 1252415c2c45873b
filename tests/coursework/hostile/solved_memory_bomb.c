
/* hostile: take 3 GiB; it aborts only if it got them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((constructor)) static void hostile_memory_bomb(void) {
    const size_t n = (size_t)3 << 30;
    char *p = malloc(n);
    if (p) {
        memset(p, 1, n);
        fprintf(stderr, "hostile: 3 GiB\n");
        abort();
    }
}
