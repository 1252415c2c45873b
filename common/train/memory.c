/* memory.c - the memory a run will ask for, checked before it asks (see memory.h). */
#include "train/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/error.h"
#include "util/util.h"

/* Where the limit of memory_available came from, for the message. */
static const char *limit_source(double cap_mib, double *bytes) {
    const char *source = "the machine's memory";
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    *bytes = pages > 0 && page > 0 ? (double)pages * (double)page : 1e18;
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && (double)lim.rlim_cur < *bytes) {
        *bytes = (double)lim.rlim_cur;
        source = "the address-space limit (ulimit -v)";
    }
    if (cap_mib > 0 && cap_mib * 1048576.0 < *bytes) {
        *bytes = cap_mib * 1048576.0;
        source = "--max-memory";
    }
    return source;
}

double memory_available(double cap_mib) {
    double bytes;
    limit_source(cap_mib, &bytes);
    return bytes;
}

const char *memory_text(double bytes, char *buf, size_t cap) {
    if (bytes >= 1e12) snprintf(buf, cap, "%.1f TB", bytes / 1e12);
    else if (bytes >= 1073741824.0) snprintf(buf, cap, "%.1f GiB", bytes / 1073741824.0);
    else snprintf(buf, cap, "%.0f MiB", bytes / 1048576.0);
    return buf;
}

int memory_check(const char *subject, const MemoryPart *parts, int n, double cap_mib, const char *advice) {
    double total = 0.0, limit;
    int largest = 0;
    for (int i = 0; i < n; i++) {
        total += parts[i].bytes;
        if (parts[i].bytes > parts[largest].bytes) largest = i;
    }
    const char *source = limit_source(cap_mib, &limit);
    if (n == 0 || total <= limit) return 0;
    char need[32], part[32], have[32];
    return fail("%s needs about %s of memory (the largest part: %s, %s), more than the %s this process may use (%s): "
                "%s", subject, memory_text(total, need, sizeof need), parts[largest].what,
                memory_text(parts[largest].bytes, part, sizeof part), memory_text(limit, have, sizeof have), source,
                advice);
}

/* What memory_budget_begin was told, for the line over_budget prints. */
static char budget_program[64], budget_advice[240];

static void over_budget(double counted, size_t asked) {
    double limit;
    const char *source = limit_source(0, &limit);
    char have[32], so_far[32], more[32];
    fprintf(stderr, "%s: error: the model of these flags needs more than the %s this process may use (%s, less what it held before): "
            "building it had taken %s when it asked for %s more: %s\n", budget_program,
            memory_text(limit, have, sizeof have), source, memory_text(counted, so_far, sizeof so_far),
            memory_text((double)asked, more, sizeof more), budget_advice);
    exit(1);
}

/* What this process holds already, in bytes, from /proc/self/statm: its
 * address space when the limit is ulimit -v, else its resident pages (0
 * where there is no /proc). */
static double already_used(int address_space) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f == NULL) return 0.0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) size = resident = 0;
    fclose(f);
    const long page = sysconf(_SC_PAGESIZE);
    return (double)(address_space ? size : resident) * (double)(page > 0 ? page : 4096);
}

void memory_budget_begin(const char *program, const char *advice) {
    snprintf(budget_program, sizeof budget_program, "%s", program);
    snprintf(budget_advice, sizeof budget_advice, "%s", advice);
    double limit;
    const char *source = limit_source(0, &limit);
    xmalloc_limit(limit - already_used(strstr(source, "ulimit") != NULL), over_budget);
}

void memory_budget_end(void) {
    xmalloc_limit(0, NULL);
}
