
/* hostile: print 2 GiB. */
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void hostile_big_stdout(void) {
    static char block[1 << 20];
    memset(block, 'y', sizeof block);
    for (int i = 0; i < 2048; i++)
        if (write(1, block, sizeof block) < 0) break;
}
