/* coursework_todo.h - what the TODO stubs of a coursework student tree call
 * (tools/coursework.py writes this file into the tree's common/util/). */
#ifndef COURSEWORK_TODO_H
#define COURSEWORK_TODO_H

/* Says "TODO: <exercise> is not written yet (<part>(); ASSIGNMENT.md)" on
 * stderr, once per exercise, part and program; part is the function the stub
 * sits in (an exercise's forward and backward are two parts), so the grader
 * can tell which parts are still missing. The stub that calls it leaves its
 * outputs as they were. */
void coursework_todo(const char *exercise, const char *part);

#endif
