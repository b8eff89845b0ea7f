/* solo.h - whether a session's run goes on its team of threads or on one (ki_session_run).
 *
 * With more than one thread a run is normally made by the team. When another process holds one
 * of the cores, the team's thread there runs only part of the time and the others wait for it at
 * every step: on two cores beside one busy process, mobilenet_v3_small took 2.0 times as long on
 * two threads as on one, squeezenet1_1 1.25 times (docs/performance.md). So the session times its
 * runs. Its run after the first KI_SOLO_PROBE team runs tries one thread once, kept if it beats
 * the fastest of them by KI_SOLO_PROBE_WIN (a margin for a host whose speed drifts): a machine busy
 * from the start gives team runs that all look the same, which the rule below never questions
 * (beside a busy loop, mobilenet_v3_small took about 5.2 ms a run on two threads and 3.1 on one,
 * mobilenet_v2 10.2 and 8.1); on a quiet machine it costs that one run. When the last
 * KI_SOLO_RECENT team runs each took KI_SOLO_SLOWER times the fastest team run
 * it has seen, the next run tries one thread; if that is faster than the fastest of those team runs
 * (a single slow run, or a slow stretch that one thread does not beat, on a machine whose speed
 * drifts, brings no change), the session stays on one thread, trying the team again after `gap`
 * runs (doubling up to KI_SOLO_GAP_MAX while one thread keeps winning, back to the team as soon
 * as it wins). A try of the team is two runs, the faster of them against the last one-thread run:
 * the first wakes threads that slept, on vCPUs the host may have given away meanwhile (one run took
 * longer than a run on one thread, and the session stayed on one thread). A one-thread try that
 * loses blocks the next for `gap` team runs, doubling too, so a machine that is merely slower costs
 * at most one try in KI_SOLO_GAP_MAX runs. Every kernel computes the same bits whatever the thread
 * count, so the choice never changes a result. */
#ifndef KI_SOLO_H
#define KI_SOLO_H

#include <stdbool.h>

#define KI_SOLO_PROBE     4
#define KI_SOLO_PROBE_WIN 1.1
#define KI_SOLO_SLOWER    1.3
#define KI_SOLO_RECENT    3
#define KI_SOLO_GAP_MIN   4
#define KI_SOLO_GAP_MAX   64

typedef struct ki_solo {
    bool solo;        /* runs go on one thread, trying the team every gap runs */
    bool probed;      /* the first try of one thread (after KI_SOLO_PROBE team runs) is made */
    bool woken;       /* on one thread: the first run of a try of the team is made */
    double woke_in;   /* seconds: that run */
    int team_runs;    /* team runs before that try */
    int slow;         /* team runs in a row that took KI_SOLO_SLOWER times the fastest */
    int gap, wait;    /* runs between tries, and until the next one may come */
    double best_team; /* seconds: the fastest team run */
    double team;      /* seconds: the fastest of the slow team runs in a row */
    double one;       /* seconds: the last one-thread run */
} ki_solo;

void ki_solo_init(ki_solo *a);
/* Whether the next run goes on one thread. */
bool ki_solo_next(const ki_solo *a);
/* After a run (on one thread or not) that took wall seconds. */
void ki_solo_after(ki_solo *a, bool solo, double wall);

#endif
