/* team.c - ki_team_sync (team.h). Thread-safe by construction: the state is the caller's ki_team,
 * touched only through atomics. */
#include "team.h"

#include <omp.h>
#include <sched.h>
#include <time.h>

#include "../core/cpu.h"

/* Spinning with the CPU's pause hint for KI_SPIN_NS (as libgomp's barriers do before they
 * sleep), then yielding until KI_TEAM_YIELD_NS, then napping (team.h, docs/performance.md). */
#define KI_TEAM_YIELD_NS 2000000LL
#define KI_TEAM_NAP_NS   50000L
/* Spins between looks at the clock (about 1-5 us of pauses). */
#define KI_TEAM_CHECK 64

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void ki_team_sync(ki_team *t)
{
    const int nth = omp_get_num_threads();
    if (nth <= 1) {
        return;
    }
    const int round = atomic_load_explicit(&t->round, memory_order_acquire);
    /* acq_rel: the last thread to arrive acquires every earlier thread's writes, and its release
     * of the new round passes them (and its own) on to the waiting threads */
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) == nth - 1) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed); /* before the new round */
        atomic_fetch_add_explicit(&t->round, 1, memory_order_release);
        return;
    }
    long long start = 0;
    for (unsigned i = 1; atomic_load_explicit(&t->round, memory_order_acquire) == round; i++) {
        if (i % KI_TEAM_CHECK != 0) {
            cpu_relax();
            continue;
        }
        const long long now = now_ns();
        start = start ? start : now;
        if (now - start < KI_SPIN_NS) {
            continue;
        }
        if (now - start < KI_TEAM_YIELD_NS) {
            sched_yield();
        } else {
            const struct timespec nap = { 0, KI_TEAM_NAP_NS };
            nanosleep(&nap, NULL);
        }
    }
}
