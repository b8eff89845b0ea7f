/* team.h - a barrier for the threads of one OpenMP team (ki_team_sync), used inside a parallel
 * region in place of OpenMP's own barriers and before the region's end; a work share (ki_share);
 * and the team a session's run keeps across its steps (ki_crew, ki_team_run).
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
#include <stdbool.h>
#include <stdint.h>

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
/* The same for the first n threads of the team (those that run a ki_part_sync). */
void ki_team_sync_n(ki_team *t, int n);

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

/* ---- one team for a run ----
 * ki_session_run runs each stretch of steps whose layers are KI_LAYER_TEAM in one parallel region
 * (an OpenMP region costs about a microsecond to enter and leave, libgomp waking its threads
 * through a futex each time: docs/performance.md). Every thread of it calls each step's forward()
 * with ki_exec.crew set, and the threads meet at crew->step after each step. Such a forward
 * opens no region of its own: it hands its parallel part, a body, to ki_team_run, which runs it
 * on the threads already there; without a crew (a layer run on its own, as the unit tests do)
 * ki_team_run opens a region for it as a layer did before. */
typedef struct ki_crew {
    ki_team step;   /* the session's barrier between steps */
    ki_team inner;  /* the layers' barrier inside a step (ki_part_sync) */
    ki_share share; /* a work share for a body (ki_part.share) */
} ki_crew;

/* A crew for a team of up to n_threads threads. */
void ki_crew_init(ki_crew *c, int n_threads);

/* One thread's part of a body run by ki_team_run: thread tid of nt. */
typedef struct ki_part {
    int tid, nt;
    ki_team *sync;   /* the nt threads' barrier: ki_part_sync */
    ki_share *share; /* shared by the nt threads: ki_share_begin, then ki_share_take */
} ki_part;

typedef void (*ki_team_body)(void *arg, const ki_part *p);
struct ki_exec;

/* Runs body(arg, part) on every thread of ex's team (ex->n_threads threads, or those of the
 * session's region, which has at most that many). arg is the caller's (one per thread in a
 * crew: each thread computes the same one); it ends when every thread has finished the body
 * (a crew's threads meet at the session's barrier instead). The body splits its items with
 * ki_part_range or p->share and may meet the others with ki_part_sync. */
void ki_team_run(const struct ki_exec *ex, ki_team_body body, void *arg);
/* The same on the first nt threads only (the others pass): for work too small to share among
 * all. Such a body neither syncs nor uses p->share; ki_part_range splits its items. */
void ki_team_run_n(const struct ki_exec *ex, int nt, ki_team_body body, void *arg);
void ki_part_sync(const ki_part *p);
/* Starts a use of p->share for items 0..items-1, called by each of the nt threads: each sets its
 * own range, without waiting for the others (a thread that looks at a range its owner has not set
 * yet finds it empty, as every use leaves every range: the owner then does it all). With more
 * threads than KI_SHARE_MAX ranges, thread 0 sets them all and the threads meet. */
void ki_share_begin(const ki_part *p, long long items);
/* ki_share_begin for n items handed out as runs of consecutive items, KI_SHARE_RUNS a thread (at
 * most one an item): returns the number of runs; run q is items [ki_run_start(n, runs, q),
 * ki_run_start(n, runs, q + 1)). A thread's own runs follow each other, so undisturbed it does
 * what a static split would; a thread that runs slower (another process on its core) leaves its
 * last runs to the others. */
#define KI_SHARE_RUNS 4
int64_t ki_share_begin_runs(const ki_part *p, int64_t n);
/* Takes thread p->tid's next run of the `runs` ki_share_begin_runs gave for n items: its items
 * [*lo, *hi); false when none is left. */
bool ki_share_take_run(const ki_part *p, int64_t n, int64_t runs, int64_t *lo, int64_t *hi);
/* The first item of run q (q <= runs, runs > 0) over n items: n * q / runs without overflow. */
static inline int64_t ki_run_start(int64_t n, int64_t runs, int64_t q)
{
    return n / runs * q + n % runs * q / runs;
}
/* Thread p->tid's items [lo, hi) of n: OpenMP's static split (contiguous, the first n % nt
 * threads one more). */
void ki_part_range(int64_t n, const ki_part *p, int64_t *lo, int64_t *hi);

#endif
