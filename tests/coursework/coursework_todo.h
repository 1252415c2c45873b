/* coursework_todo.h - what the TODO stubs of a coursework student tree call
 * (tools/coursework.py writes this file into the tree's common/util/). */
#ifndef COURSEWORK_TODO_H
#define COURSEWORK_TODO_H

/* Says "TODO: <exercise> is not written yet" on stderr, once per exercise
 * and program; the stub that calls it leaves its outputs as they were. */
void coursework_todo(const char *exercise);

#endif
