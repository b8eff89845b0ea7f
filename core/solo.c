/* solo.c - the session's choice between its team and one thread (solo.h). */
#include "solo.h"

void ki_solo_init(ki_solo *a)
{
    *a = (ki_solo){ .gap = KI_SOLO_GAP_MIN };
}

bool ki_solo_next(const ki_solo *a)
{
    if (a->solo) {
        return a->wait > 0 && !a->woken;
    }
    return a->probed ? a->wait <= 0 && a->slow >= KI_SOLO_RECENT : a->team_runs >= KI_SOLO_PROBE;
}

static int doubled(int gap)
{
    return 2 * gap < KI_SOLO_GAP_MAX ? 2 * gap : KI_SOLO_GAP_MAX;
}

void ki_solo_after(ki_solo *a, bool solo, double wall)
{
    a->wait -= a->wait > 0;
    if (!solo) {
        a->team_runs += !a->probed;
        a->best_team = a->best_team > 0 && a->best_team < wall ? a->best_team : wall;
        const bool slow = wall > KI_SOLO_SLOWER * a->best_team;
        a->team = slow && a->slow > 0 && a->team < wall ? a->team : wall;
        a->slow = slow ? a->slow + 1 : 0;
        if (a->solo && !a->woken) { /* a try of the team: its first run wakes the threads */
            a->woken = true;
            a->woke_in = wall;
            return;
        }
        if (a->solo) { /* it stays on one thread unless the team won either run */
            a->woken = false;
            a->solo = (wall < a->woke_in ? wall : a->woke_in) >= a->one;
            a->gap = a->solo ? doubled(a->gap) : KI_SOLO_GAP_MIN;
            a->wait = a->solo ? a->gap : 0;
            a->slow = a->solo ? a->slow : 0; /* back on the team: a fresh look */
        }
        return;
    }
    a->one = wall;
    if (!a->solo) { /* a try of one thread: the first one, or after slow team runs */
        /* the first try must win by KI_SOLO_PROBE_WIN (against the fastest team run so far) */
        a->solo = a->probed ? wall < a->team : KI_SOLO_PROBE_WIN * wall < a->best_team;
        a->probed = true;
        a->gap = a->solo ? KI_SOLO_GAP_MIN : doubled(a->gap);
        a->wait = a->gap;
        a->slow = 0;
    }
}
