/* cpu.h - what this CPU offers, read once: the instruction-set level the fast kernels may use,
 * the cache sizes and the core count. Every kernel and path choice asks this module; no other
 * code reads CPUID. The level can be capped (KINFER_ISA / --isa in the CLI, tests forcing each
 * level): layers read ki_cpu_isa() when a model is loaded, so a cap applies to models loaded
 * after it. Detection is idempotent and thread-safe; the cap is one process-wide setting, like
 * the OpenMP team size, set by the program before it loads models. */
#ifndef KI_CPU_H
#define KI_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

/* The x86 kernels (the *_avx2.c and *_avx512.c files) are built only for x86 targets. Elsewhere
 * KI_X86(f) is NULL instead of the kernel f and code that calls one directly sits under
 * #if KI_HAVE_X86; ki_cpu_isa() is then generic, so no path asks for them. */
#if defined(__x86_64__) || defined(__i386__)
#define KI_HAVE_X86 1
#define KI_X86(f)   (f)
#else
#define KI_HAVE_X86 0
#define KI_X86(f)   NULL
#endif

/* Instruction-set levels, in order: each includes the ones below it. */
typedef enum ki_isa {
    KI_ISA_GENERIC = 0, /* plain C: any CPU */
    KI_ISA_AVX2,        /* x86-64 with AVX2 and FMA (the *_avx2.c files) */
    KI_ISA_AVX512       /* AVX-512 F, BW and VL besides (the *_avx512.c files) */
} ki_isa;
#define KI_ISA_COUNT 3

typedef struct ki_cpu_info {
    ki_isa isa;       /* the highest level this CPU (and its OS) runs */
    size_t l1d;       /* bytes of one core's L1 data cache */
    size_t l2;        /* bytes of one core's L2 cache */
    size_t l3;        /* bytes of the L3 cache (shared), 0 when there is none */
    int cores;        /* logical CPUs online */
    bool caches_read; /* false: the sizes above are defaults, the system did not report them */
} ki_cpu_info;

/* What the CPU reports, detected on the first call. */
const ki_cpu_info *ki_cpu_get(void);
/* The level kernels use: the CPU's, or the cap when lower. */
ki_isa ki_cpu_isa(void);
/* Caps the level at isa; KI_ERR_UNSUPPORTED (naming what the CPU has) when the CPU lacks it. */
ki_status ki_cpu_set_isa(ki_isa isa, ki_error *err);
/* For tests: from now on ki_cpu_get() reports at most isa as the CPU's own level (the caches and
 * cores stay), so code and tests behave as on a CPU without the levels above it (an AVX2-only
 * one on an AVX-512 machine). Call it first, before any thread or layer asks for the level. */
void ki_cpu_pretend(ki_isa isa);
/* Nanoseconds one spin-wait pause (x86 PAUSE; elsewhere a compiler barrier) takes on this CPU:
 * the best of three timed runs of 256, measured anew at each call. */
double ki_cpu_pause_ns(void);
/* How long a waiting thread spins before it sleeps (libgomp's barriers: the CLI sets
 * GOMP_SPINCOUNT from it) or yields its CPU (layers/team.h): long enough for the waits of a
 * balanced step, short enough that a thread waiting for one that another process holds off its
 * core gives the core up soon (docs/performance.md). */
#define KI_SPIN_NS 20000
/* "generic", "avx2", "avx512". */
const char *ki_isa_name(ki_isa isa);
/* The level named s (also "ref" for generic); false when s names none. */
bool ki_isa_parse(const char *s, ki_isa *out);

#endif
