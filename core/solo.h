/* solo.h - whether a session's run goes on its team of threads or on one (ki_session_run).
 *
 * With more than one thread a run is normally made by the team. When another process holds one
 * of the cores, the team's thread there runs only part of the time and the others wait for it at
 * every step: on two cores beside one busy process, mobilenet_v3_small took 2.0 times as long on
 * two threads as on one, squeezenet1_1 1.25 times (docs/performance.md). So the session times its
 * runs. When the last KI_SOLO_RECENT team runs each took KI_SOLO_SLOWER times the fastest team run
 * it has seen, the next run tries one thread; if that is faster than the fastest of those team runs
 * (a single slow run, or a slow stretch that one thread does not beat, on a machine whose speed
 * drifts, brings no change), the session stays on one thread, trying the team again after `gap`
 * runs (doubling up to KI_SOLO_GAP_MAX while one thread keeps winning, back to the team as soon
 * as it wins). A one-thread try that loses blocks the next for
 * `gap` team runs, doubling too, so a machine that is merely slower costs at most one try in
 * KI_SOLO_GAP_MAX runs. Every kernel computes the same bits whatever the thread count, so the
 * choice never changes a result. */
#ifndef KI_SOLO_H
#define KI_SOLO_H

#include <stdbool.h>

#define KI_SOLO_SLOWER  1.3
#define KI_SOLO_RECENT  3
#define KI_SOLO_GAP_MIN 4
#define KI_SOLO_GAP_MAX 64

typedef struct ki_solo {
    bool solo;        /* runs go on one thread, trying the team every gap runs */
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
