/* positions.c - chapter 06: the names of a transformer's positions (see
 * positions.h). */
#include "06_transformer/positions.h"

#include <string.h>

#include "util/error.h"

const char *positions_name(Positions p) {
    if (p == POSITIONS_ROPE) return "rope";
    return (p >= 0 && p < POSITIONS_ROPE) ? pos_type_name((PosType)p) : "?";   /* chapter 04's names */
}

int positions_from_name(const char *name, Positions *p) {
    for (int i = 0; i < POSITIONS_N; i++)
        if (strcmp(name, positions_name((Positions)i)) == 0) {
            *p = (Positions)i;
            return 0;
        }
    return fail("pos: expected one of none, sinusoidal, learned, rope, got '%s'", name);
}
