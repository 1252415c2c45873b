/* memory.h - the memory a run will ask for, checked before it asks.
 *
 * A configuration whose every flag is in range can still need more memory
 * than the machine has (06_gpt --batch 4096 --context 4096: the activations
 * alone are terabytes). Before allocating, a program lists the parts of its
 * peak (parameters with their gradients and the optimizer's moments, the
 * activations, the attention maps, the output probabilities ...) from its
 * configuration, and memory_check refuses, with one line naming the total
 * and the largest part, a total above what this process may have: the
 * machine's memory (sysconf), the address-space limit (ulimit -v) or a
 * --max-memory cap, whichever is smallest. The figures are estimates of
 * what the model allocates, not of the C library's overhead. */
#ifndef TRAIN_MEMORY_H
#define TRAIN_MEMORY_H
#include <stddef.h>

typedef struct {
    const char *what;   /* e.g. "the logits and probabilities, 2 x B N V floats" */
    double bytes;
} MemoryPart;

/* The bytes this process may use: the machine's physical memory, lowered to
 * RLIMIT_AS when one is set, and to cap_mib MiB when cap_mib > 0. */
double memory_available(double cap_mib);

/* "1.1 TB", "512 MiB": bytes for a message, into buf (cap bytes). */
const char *memory_text(double bytes, char *buf, size_t cap);

/* 0 when the n parts sum to at most memory_available(cap_mib); otherwise -1
 * with fail(): "<subject> needs about X (the largest part: WHAT, Y), more
 * than the Z this process may use (<where Z comes from>): <advice>". */
int memory_check(const char *subject, const MemoryPart *parts, int n, double cap_mib, const char *advice);

/* For the models whose parts no formula here lists (the seq2seq programs'
 * and the classifiers'): from memory_budget_begin, the bytes allocated are
 * counted (util.h's xmalloc_limit), and the allocation that would take the
 * count past memory_available(0) ends the program, before it is asked of
 * the system, with one line and exit 1: "<program>: error: the model of these flags needs more than the Z
 * this process may use (<where Z comes from>): building it had taken X
 * when it asked for Y more: <advice>". memory_budget_end stops the count
 * (the model is built; what training allocates is not counted). */
void memory_budget_begin(const char *program, const char *advice);
void memory_budget_end(void);

#endif
