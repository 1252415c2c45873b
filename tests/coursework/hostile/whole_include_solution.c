/* hostile: the whole exercise file is the teacher's solution, compiled in from where the grader keeps it. */
#include "@WORK@/teacher/solution/04_self_attention/chapters/04_self_attention/self_attention.c"
