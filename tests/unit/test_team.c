/* test_team.c - ki_team_sync (layers/team.h): with one to four threads, over many rounds, every
 * thread sees every other thread's write of the round before the barrier and none of the next
 * round's; a thread held back past the spinning and yielding phases (into the naps) still meets
 * the others; one thread passes straight through. ki_share: every item is taken exactly once,
 * each thread's own items in order, a held-back thread's items by the others, shares sized for
 * more threads than the team has, no items at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// clang-format off
#include <cmocka.h>
// clang-format on

#include <omp.h>
#include <stdatomic.h>
#include <time.h>

#include "../../layers/team.h"

#define ROUNDS 2000
#define MAX_TH 4

/* Each round every thread writes its slot, syncs, checks all slots hold the round, syncs again
 * (so no thread writes the next round while another still reads this one). */
static void rounds_with(int nth)
{
    static volatile int slot[MAX_TH];
    atomic_int bad = 0;
    ki_team team = KI_TEAM_INIT;
    for (int i = 0; i < MAX_TH; i++) {
        slot[i] = -1;
    }
#pragma omp parallel num_threads(nth)
    {
        const int tid = omp_get_thread_num(), n = omp_get_num_threads();
        for (int r = 0; r < ROUNDS; r++) {
            slot[tid] = r;
            ki_team_sync(&team);
            for (int i = 0; i < n; i++) {
                if (slot[i] != r) {
                    atomic_fetch_add(&bad, 1);
                }
            }
            ki_team_sync(&team);
        }
    }
    assert_int_equal(atomic_load(&bad), 0);
    assert_int_equal(atomic_load(&team.arrived), 0);
}

static void test_rounds(void **unused)
{
    (void)unused;
    for (int nth = 1; nth <= MAX_TH; nth++) {
        rounds_with(nth);
    }
}

/* Thread 0 arrives 5 ms late (the others pass the spin and the yields and nap): everyone still
 * leaves after it arrives and sees its write. */
static void test_late_thread(void **unused)
{
    (void)unused;
    static volatile int flag;
    atomic_int early = 0;
    ki_team team = KI_TEAM_INIT;
    flag = 0;
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0) {
            const struct timespec late = { 0, 5000000L };
            nanosleep(&late, NULL);
            flag = 1;
        }
        ki_team_sync(&team);
        if (flag != 1) {
            atomic_fetch_add(&early, 1);
        }
    }
    assert_int_equal(atomic_load(&early), 0);
}

/* Items 0..n-1 through a share of `shares` for a team of nth; thread 0 starts `late_us` late.
 * Returns how many items the other threads took from thread 0's share. */
static long long share_with(long long n, int shares, int nth, long late_us)
{
    static atomic_int taken[3000];
    atomic_llong stolen = 0;
    atomic_int out_of_order = 0;
    ki_share sh;
    assert_true(n <= 3000);
    for (long long i = 0; i < n; i++) {
        atomic_init(&taken[i], 0);
    }
    ki_share_init(&sh, n, shares);
    const long long first0 = n / shares; /* thread 0's share is [0, this) */
#pragma omp parallel num_threads(nth)
    {
        const int tid = omp_get_thread_num();
        if (tid == 0 && late_us > 0) {
            const struct timespec late = { 0, late_us * 1000L };
            nanosleep(&late, NULL);
        }
        long long prev = -1;
        for (long long q = ki_share_take(&sh, tid); q >= 0; q = ki_share_take(&sh, tid)) {
            atomic_fetch_add(&taken[q], 1);
            if (tid != 0 && q < first0) {
                atomic_fetch_add(&stolen, 1);
            }
            /* a thread's own items come in order: the front of its share */
            const long long lo = n * tid / shares, hi = n * (tid + 1) / shares;
            if (tid < shares && q >= lo && q < hi) {
                if (q < prev) {
                    atomic_fetch_add(&out_of_order, 1);
                }
                prev = q;
            }
            for (volatile int spin = 0; spin < 2000; spin++) {
            }
        }
    }
    for (long long i = 0; i < n; i++) {
        assert_int_equal(atomic_load(&taken[i]), 1);
    }
    assert_int_equal(atomic_load(&out_of_order), 0);
    return atomic_load(&stolen);
}

static void test_share(void **unused)
{
    (void)unused;
    for (int nth = 1; nth <= MAX_TH; nth++) {
        share_with(0, nth, nth, 0);
        share_with(1, nth, nth, 0);
        share_with(2999, nth, nth, 0);
        share_with(777, nth + 2, nth, 0); /* shares for threads the team does not have */
    }
    /* thread 0 20 ms late: the others take (some of) its items */
    assert_true(share_with(2000, 2, 2, 20000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounds),
        cmocka_unit_test(test_late_thread),
        cmocka_unit_test(test_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
