/* test_solo.c - the session's choice between its team and one thread (core/solo.h), driven by
 * made-up run times: the run after the first KI_SOLO_PROBE team runs tries one thread, which a
 * machine busy from the start keeps when it wins by KI_SOLO_PROBE_WIN (not by less); after that a
 * steady team never tries one thread, nor does one slow run now and then; KI_SOLO_RECENT slow team
 * runs in a row bring a one-thread try, which must beat the fastest of them; a faster one thread is
 * kept, the team tried again (two runs, the first waking the threads, the faster counting) after
 * KI_SOLO_GAP_MIN runs, then twice as long while one thread keeps
 * winning, up to KI_SOLO_GAP_MAX; the team back when it wins; a losing one-thread try blocks the
 * next for a gap that doubles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// clang-format off
#include <cmocka.h>
// clang-format on

#include "../../core/solo.h"

/* One run: on one thread or not as ki_solo_next says, taking team or one seconds; returns
 * whether it went on one thread. */
static bool run(ki_solo *a, double team, double one)
{
    const bool solo = ki_solo_next(a);
    ki_solo_after(a, solo, solo ? one : team);
    return solo;
}

/* The first KI_SOLO_PROBE runs on the team, then the try of one thread (which loses here). */
static void start(ki_solo *a, double team, double one)
{
    ki_solo_init(a);
    for (int i = 0; i < KI_SOLO_PROBE; i++) {
        assert_false(run(a, team, one));
    }
    assert_true(run(a, team, one));
    assert_false(ki_solo_next(a));
}

static void test_steady_team(void **unused)
{
    (void)unused;
    ki_solo a;
    start(&a, 1.0, 2.0);
    for (int i = 0; i < 1000; i++) { /* within KI_SOLO_SLOWER of the best: never one thread */
        assert_false(run(&a, 1.0 + 0.25 * (i % 3) / 2, 2.0));
    }
}

/* Another process holds a core from the first run: the team's runs all take 5, one thread 2.5.
 * The first try of one thread wins, and the session stays on one thread but for the team's tries.
 */
static void test_busy_from_start(void **unused)
{
    (void)unused;
    ki_solo a;
    ki_solo_init(&a);
    for (int i = 0; i < KI_SOLO_PROBE; i++) {
        assert_false(run(&a, 5.0, 2.5));
    }
    int solo = 0;
    for (int i = 0; i < 200; i++) {
        solo += run(&a, 5.0, 2.5);
    }
    assert_true(solo >= 200 - 200 / KI_SOLO_GAP_MIN);
    /* one thread faster than the first team runs, but not by KI_SOLO_PROBE_WIN: the team stays */
    start(&a, 1.05, 1.0);
    for (int i = 0; i < 200; i++) {
        assert_false(run(&a, 1.05, 1.0));
    }
}

static void test_busy_then_quiet(void **unused)
{
    (void)unused;
    ki_solo a;
    start(&a, 1.0, 2.0);
    for (int i = 0; i < 2 * KI_SOLO_GAP_MIN; i++) { /* the wait after that try */
        assert_false(run(&a, 1.0, 2.0));
    }
    /* another process takes a core: the team now takes 5, one thread 2.5 */
    for (int i = 0; i < KI_SOLO_RECENT; i++) {
        assert_false(run(&a, 5.0, 2.5)); /* the slow team runs */
    }
    assert_true(run(&a, 5.0, 2.5)); /* the try of one thread: it wins */
    for (int gap = KI_SOLO_GAP_MIN, round = 0; round < 7; round++) {
        for (int i = 0; i < gap; i++) {
            assert_true(run(&a, 5.0, 2.5));
        }
        assert_false(run(&a, 5.0, 2.5)); /* the team tried, two runs: it loses */
        assert_false(run(&a, 5.0, 2.5));
        gap = 2 * gap < KI_SOLO_GAP_MAX ? 2 * gap : KI_SOLO_GAP_MAX;
    }
    /* runs on one thread for at most KI_SOLO_GAP_MAX between tries, however long it lasts */
    int solo = 0, team = 0, longest = 0, stretch = 0;
    for (int i = 0; i < 2000; i++) {
        if (run(&a, 5.0, 2.5)) {
            solo++, stretch++;
            longest = stretch > longest ? stretch : longest;
        } else {
            team++, stretch = 0;
        }
    }
    assert_true(longest <= KI_SOLO_GAP_MAX);
    assert_true(team >= 2 * (2000 / (KI_SOLO_GAP_MAX + 2)) &&
                team <= 2 * (2000 / KI_SOLO_GAP_MAX) + 8);
    /* the process ends: the next team try wins and the team stays */
    int tries = 0;
    while (run(&a, 1.0, 2.5)) {
        tries++;
        assert_true(tries <= KI_SOLO_GAP_MAX);
    }
    for (int i = 0; i < 500; i++) {
        assert_false(run(&a, 1.0, 2.5));
    }
}

/* On one thread, a try of the team whose first run is slow (threads that slept, a vCPU the host
 * gave away meanwhile) but whose second wins: back to the team. */
static void test_team_try_wakes(void **unused)
{
    (void)unused;
    ki_solo a;
    ki_solo_init(&a);
    for (int i = 0; i < KI_SOLO_PROBE; i++) {
        assert_false(run(&a, 5.0, 2.5));
    }
    for (int i = 0; i <= KI_SOLO_GAP_MIN; i++) { /* the first try of one thread and its gap */
        assert_true(run(&a, 5.0, 2.5));
    }
    assert_false(run(&a, 3.0, 2.5)); /* the try's first run: slower than one thread */
    assert_false(run(&a, 1.0, 2.5)); /* its second: faster */
    for (int i = 0; i < 100; i++) {
        assert_false(run(&a, 1.0, 2.5));
    }
}

/* A single slow team run, or slow ones that one thread does not beat, bring no change. */
static void test_noise(void **unused)
{
    (void)unused;
    ki_solo a;
    start(&a, 1.0, 2.0);
    for (int i = 0; i < 300; i++) { /* every third run slow: never three in a row */
        assert_false(run(&a, i % 3 ? 1.0 : 3.0, 1.5));
    }
    /* a slow stretch whose fastest run one thread does not beat: one try, then the team */
    const double team[] = { 3.0, 1.4, 3.0 };
    for (int i = 0; i < 3; i++) {
        assert_false(run(&a, team[i], 2.0));
    }
    assert_true(run(&a, 3.0, 2.0)); /* the try: 2.0 against 1.4, it loses */
    for (int i = 0; i < 2 * KI_SOLO_GAP_MIN; i++) {
        assert_false(run(&a, 1.0, 2.0));
    }
}

static void test_losing_tries_back_off(void **unused)
{
    (void)unused;
    ki_solo a;
    ki_solo_init(&a);
    assert_false(run(&a, 1.0, 3.0));
    /* the team is slow now (2x its best) but one thread slower still: tries become rarer */
    int tries = 0, last = -1, gaps[8], n = 0;
    for (int i = 0; i < 400; i++) {
        if (run(&a, 2.0, 3.0)) {
            if (last >= 0 && n < 8) {
                gaps[n++] = i - last;
            }
            last = i, tries++;
        }
    }
    assert_true(tries >= 4 && tries <= 12);
    for (int k = 1; k < n; k++) { /* each gap at least the one before, up to the most */
        assert_true(gaps[k] >= gaps[k - 1]);
        assert_true(gaps[k] <= KI_SOLO_GAP_MAX + 2);
    }
    assert_true(gaps[n - 1] >= KI_SOLO_GAP_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_team),    cmocka_unit_test(test_busy_from_start),
        cmocka_unit_test(test_team_try_wakes), cmocka_unit_test(test_busy_then_quiet),
        cmocka_unit_test(test_noise),          cmocka_unit_test(test_losing_tries_back_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
