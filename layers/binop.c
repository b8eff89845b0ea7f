/* binop.c - the plain ki_binop (binop.h) and the choice of version. */
#include "binop.h"

#include <string.h>

/* Blocks of 8 of o = a OP b over [i, n) with constant steps SA, SB: each block is computed into
 * t before it is stored, so o may be a's or b's buffer (in place); with the operator and the
 * steps fixed, each loop vectorises (a branch per element and scalar stores read back as a vector
 * made mobilenet_v3's channel scalings 1 ns per float). */
#define BIN8_LOOP(OP, SA, SB)                                                                      \
    for (; i + 8 <= n; i += 8) {                                                                   \
        float t[8];                                                                                \
        for (int j = 0; j < 8; j++) {                                                              \
            t[j] = a[(i + (size_t)j) * (SA)] OP b[(i + (size_t)j) * (SB)];                         \
        }                                                                                          \
        memcpy(o + i, t, sizeof t);                                                                \
    }

/* The blocks of 8 of o[i] = a[i] op b[i]; the tail is the caller's. */
#define BIN8_STEPS(OP)                                                                             \
    do {                                                                                           \
        if (sa && sb) {                                                                            \
            BIN8_LOOP(OP, 1, 1)                                                                    \
        } else if (sa) {                                                                           \
            BIN8_LOOP(OP, 1, 0)                                                                    \
        } else if (sb) {                                                                           \
            BIN8_LOOP(OP, 0, 1)                                                                    \
        }                                                                                          \
    } while (0)

void ki_binop_ref(char op, const float *a, int sa, const float *b, int sb, size_t n, float *o)
{
    size_t i = 0;
    if (op == '+') {
        BIN8_STEPS(+);
    } else {
        BIN8_STEPS(*);
    }
    for (; i < n; i++) {
        const float u = a[i * (size_t)sa], v = b[i * (size_t)sb];
        o[i] = op == '+' ? u + v : u * v;
    }
}

ki_binop_fn ki_binop_for(ki_isa isa)
{
    return isa >= KI_ISA_AVX2 ? KI_X86(ki_binop_avx2) : ki_binop_ref;
}
