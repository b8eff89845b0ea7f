/* test_team.c - ki_team_sync (layers/team.h): with one to four threads, over many rounds, every
 * thread sees every other thread's write of the round before the barrier and none of the next
 * round's; a thread held back past the spinning and yielding phases (into the naps) still meets
 * the others; one thread passes straight through. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounds),
        cmocka_unit_test(test_late_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
