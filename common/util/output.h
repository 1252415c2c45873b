/* output.h - what a program prints reaches its reader, or the program says so.
 *
 * A program's results table goes to standard output. When that is a full
 * disk (> /dev/full) or was closed (>&-), printf fails without a word and
 * the program would still exit 0: the results are lost and nobody is told.
 * So each main() starts with output_guard() and ends with
 *
 *     return output_exit_status("01_rnn_seq2seq", rc);
 *
 * which flushes standard output and turns a write that failed (then or at
 * any time before) into one error line on stderr and exit code 1. */
#ifndef OUTPUT_H
#define OUTPUT_H

/* First thing in main(): a standard stream the caller closed (0, 1 or 2)
 * gets /dev/null opened read-only in its place, so that no file the program
 * opens later (a checkpoint being written) takes its number and receives the
 * printed text; writes to it fail, which output_exit_status reports. */
void output_guard(void);

/* Last thing in main(): flush standard output; when that or any earlier
 * write to it failed, print "PROGRAM: error: cannot write to standard
 * output: REASON (the results printed there are lost)" on stderr and return 1
 * (or rc when rc is already non-zero); else return rc. */
int output_exit_status(const char *program, int rc);

#endif
