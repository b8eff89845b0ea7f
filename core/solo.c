/* solo.c - the session's choice between its team and one thread (solo.h). */
#include "solo.h"

void ki_solo_init(ki_solo *a)
{
    *a = (ki_solo){ .gap = KI_SOLO_GAP_MIN };
}

bool ki_solo_next(const ki_solo *a)
{
    return a->solo ? a->wait > 0 : a->wait <= 0 && a->slow >= KI_SOLO_RECENT;
}

static int doubled(int gap)
{
    return 2 * gap < KI_SOLO_GAP_MAX ? 2 * gap : KI_SOLO_GAP_MAX;
}

void ki_solo_after(ki_solo *a, bool solo, double wall)
{
    a->wait -= a->wait > 0;
    if (!solo) {
        a->best_team = a->best_team > 0 && a->best_team < wall ? a->best_team : wall;
        const bool slow = wall > KI_SOLO_SLOWER * a->best_team;
        a->team = slow && a->slow > 0 && a->team < wall ? a->team : wall;
        a->slow = slow ? a->slow + 1 : 0;
        if (a->solo) { /* a try of the team: it stays on one thread unless the team won */
            a->solo = wall >= a->one;
            a->gap = a->solo ? doubled(a->gap) : KI_SOLO_GAP_MIN;
            a->wait = a->solo ? a->gap : 0;
            a->slow = a->solo ? a->slow : 0; /* back on the team: a fresh look */
        }
        return;
    }
    a->one = wall;
    if (!a->solo) { /* a try of one thread, after a slow team run */
        a->solo = wall < a->team;
        a->gap = a->solo ? KI_SOLO_GAP_MIN : doubled(a->gap);
        a->wait = a->gap;
        a->slow = 0;
    }
}
