/* float_bits.c - ulps and bit hashes of float arrays (see float_bits.h). */
#include "float_bits.h"

#include <math.h>
#include <string.h>

double ulp_of(float v) {
    float a = fabsf(v);
    if (isinf(a)) return INFINITY;
    double spacing = (double)nextafterf(a, INFINITY) - (double)a;
    double min_spacing = ldexp(1.0, -149);
    return spacing > min_spacing ? spacing : min_spacing;
}

double ulp_error(float got, float want) {
    if (isnan(want)) return isnan(got) ? 0.0 : INFINITY;
    if (isinf(want) || isinf(got)) return got == want ? 0.0 : INFINITY;
    return fabs((double)got - (double)want) / ulp_of(want);
}

uint64_t hash_floats(uint64_t h, const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        if (isnan(v[i])) bits = 0x7FC00000u;
        for (int b = 0; b < 4; b++) {
            h ^= (bits >> (8 * b)) & 0xFFu;
            h *= 0x100000001B3ull;
        }
    }
    return h;
}
