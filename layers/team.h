/* team.h - a barrier for the threads of one OpenMP team (ki_team_sync), used inside a layer's
 * parallel region in place of OpenMP's own barriers and before the region's end.
 *
 * libgomp's barriers spin for the time the CLI sets (GOMP_SPINCOUNT for KI_SPIN_NS), then sleep
 * on a futex, and waking a sleeping thread took 35-46 us in the VMs this was measured on. A
 * thread that reached a barrier 20 us or more before the other one (a static share that ran a
 * little slower, a core that the host briefly took away) therefore cost the run those 35-46 us
 * again: in resnet18 about ten times per run. ki_team_sync spins for the same KI_SPIN_NS (20 us,
 * core/cpu.h), then yields the CPU (sched_yield) between looks, so a runnable process on that CPU
 * gets it while the thread keeps no futex to be woken from; after KI_TEAM_YIELD_NS it naps in
 * short sleeps, so a waiting thread never spins for long (docs/performance.md). Each region that
 * uses it ends with it, so the threads reach libgomp's closing barrier together and nobody sleeps
 * there.
 *
 * The caller zero-initialises one ki_team per parallel region, outside it, shared by the team
 * (KI_TEAM_INIT); every thread of the team must call ki_team_sync the same number of times.
 * Writes made before ki_team_sync by any thread are visible to every thread after it. */
#ifndef KI_TEAM_H
#define KI_TEAM_H

#include <stdatomic.h>

typedef struct ki_team {
    atomic_int arrived; /* threads at the current barrier */
    atomic_int round;   /* barriers completed */
} ki_team;

#define KI_TEAM_INIT                                                                               \
    {                                                                                              \
        0, 0                                                                                       \
    }

/* Waits until every thread of the calling OpenMP team has called it (a no-op for one thread). */
void ki_team_sync(ki_team *t);

/* Items 0..n-1 shared by a team: each thread takes its own contiguous share from the front, in
 * order (so what it reads next is what it asked the cache for), and once that is empty takes
 * the last remaining item of another thread's share. A thread that another process holds off its
 * core thus leaves its remaining items to the others instead of holding them up. The caller
 * fills it before the region (ki_share_init, for the team size asked for) and every thread then
 * calls ki_share_take until it returns -1; each item is taken exactly once. */
#define KI_SHARE_MAX 64
/* A share's [lo, hi) (lo the low, hi the high half), a cache line to itself: in one line with
 * the other thread's, each take's compare-and-swap fetched the line back from the other core. */
typedef struct ki_share_range {
    _Alignas(64) _Atomic unsigned long long v;
} ki_share_range;
typedef struct ki_share {
    ki_share_range range[KI_SHARE_MAX];
    int n; /* shares */
} ki_share;

void ki_share_init(ki_share *s, long long items, int n_threads);
/* The next item for thread tid (its own share first), or -1 when none is left. */
long long ki_share_take(ki_share *s, int tid);
/* The next item of thread tid's own share without taking it, or -1 (for asking ahead). */
long long ki_share_peek(const ki_share *s, int tid);

#endif
