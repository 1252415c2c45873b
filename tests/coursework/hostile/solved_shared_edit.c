
/* hostile: edit what other hand-ins are graded with: the shared student tree, the
 * teacher's grader sources, the solution's recorded values, another hand-in's copy. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>
#include <string.h>
/* Another hand-in's copy, where the grader keeps them (/tmp/attn_hand_ins.*): "" when none is seen. */
static void hostile_other_copy(char *out, size_t cap, const char *rest) {
    out[0] = '\0';
    DIR *d = opendir("/tmp");
    if (d == NULL) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, "attn_hand_ins.", 14) == 0) snprintf(out, cap, "/tmp/%s/0/%s", e->d_name, rest);
    closedir(d);
}
__attribute__((constructor)) static void hostile_shared_edit(void) {
    char other[600];
    hostile_other_copy(other, sizeof other, "tree/chapters/04_self_attention/self_attention.c");
    const char *paths[] = {"@WORK@/stub/04_self_attention/tests/coursework/grade.c",
                           "@WORK@/stub/04_self_attention/chapters/04_self_attention/self_attention.c",
                           "@ROOT@/tests/coursework/grade_04.c", "@WORK@/teacher/solution-04.bin",
                           other,
                           "../../../../stub/04_self_attention/tests/coursework/grade.c",
                           "tests/coursework/grade.c"};
    for (int i = 0; i < (int)(sizeof paths / sizeof paths[0]); i++) {
        if (!*paths[i]) continue;
        int fd = open(paths[i], O_WRONLY | O_TRUNC);
        if (fd >= 0) {
            if (write(fd, "x", 1) < 0) {}
            close(fd);
            fprintf(stderr, "hostile: wrote %s\n", paths[i]);
            abort();
        }
    }
}
