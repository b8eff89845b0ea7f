/* test_team.c - ki_team_sync (core/team.h): with one to four threads, over many rounds, every
 * thread sees every other thread's write of the round before the barrier and none of the next
 * round's; a thread held back past the spinning and yielding phases (into the naps) still meets
 * the others; one thread passes straight through. ki_share: every item is taken exactly once,
 * each thread's own items in order, a held-back thread's items by the others, shares sized for
 * more threads than the team has, no items at all. ki_part_range splits as OpenMP's static
 * schedule does. ki_team_run and ki_team_run_n, without a crew (a region of their own, none at one
 * thread) and inside a running team with one (the threads already there, only the first nt for
 * ki_team_run_n): every item done once, ki_part_sync between two passes, the right thread ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// clang-format off
#include <cmocka.h>
// clang-format on

#include <omp.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "../../core/layer.h"
#include "../../core/team.h"

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

/* Every thread's items from ki_part_range are those OpenMP's schedule(static) gives it. */
static void test_part_range(void **unused)
{
    (void)unused;
    for (int nt = 1; nt <= MAX_TH; nt++) {
        for (int64_t n = 0; n <= 11; n++) {
            int owner[16];
#pragma omp parallel num_threads(nt)
            {
#pragma omp for schedule(static)
                for (int64_t i = 0; i < n; i++) {
                    owner[i] = omp_get_thread_num();
                }
            }
            for (int tid = 0; tid < nt; tid++) {
                const ki_part p = { tid, nt, NULL, NULL };
                int64_t lo, hi;
                ki_part_range(n, &p, &lo, &hi);
                assert_true(lo >= 0 && lo <= hi && hi <= n);
                for (int64_t i = lo; i < hi; i++) {
                    assert_int_equal(owner[i], tid);
                }
            }
            int64_t lo, hi, sum = 0;
            for (int tid = 0; tid < nt; tid++) {
                const ki_part p = { tid, nt, NULL, NULL };
                ki_part_range(n, &p, &lo, &hi);
                sum += hi - lo;
            }
            assert_int_equal(sum, n);
        }
    }
}

#define ITEMS 1000

/* Two passes over ITEMS: each thread adds 1 to its items, syncs, then checks every item is 1 and
 * adds 1 to its items of the reversed order (other threads' items of the first pass). */
typedef struct run_check {
    atomic_int count[ITEMS];
    atomic_int bad, calls, max_nt;
    atomic_int tids; /* bit per thread id seen */
} run_check;

/* Counts the call and its thread; the thread's items. */
static void note_call(run_check *r, const ki_part *p, int64_t *lo, int64_t *hi)
{
    atomic_fetch_add(&r->calls, 1);
    atomic_fetch_or(&r->tids, 1 << p->tid);
    if (p->nt > atomic_load(&r->max_nt)) {
        atomic_store(&r->max_nt, p->nt);
    }
    ki_part_range(ITEMS, p, lo, hi);
}

static void two_passes(void *arg, const ki_part *p)
{
    run_check *r = arg;
    int64_t lo, hi;
    note_call(r, p, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        atomic_fetch_add(&r->count[i], 1);
    }
    ki_part_sync(p);
    for (int i = 0; i < ITEMS; i++) {
        if (atomic_load(&r->count[i]) < 1) {
            atomic_fetch_add(&r->bad, 1);
        }
    }
    ki_part_sync(p); /* every thread has looked before any adds again */
    for (int64_t i = lo; i < hi; i++) {
        atomic_fetch_add(&r->count[ITEMS - 1 - i], 1);
    }
}

/* One pass, no sync: what ki_team_run_n's bodies may do. */
static void one_pass(void *arg, const ki_part *p)
{
    run_check *r = arg;
    int64_t lo, hi;
    note_call(r, p, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        atomic_fetch_add(&r->count[i], 2);
    }
}

static void check_run(run_check *r, int calls, int nt)
{
    for (int i = 0; i < ITEMS; i++) {
        assert_int_equal(atomic_load(&r->count[i]), 2);
    }
    assert_int_equal(atomic_load(&r->bad), 0);
    assert_int_equal(atomic_load(&r->calls), calls);
    assert_int_equal(atomic_load(&r->max_nt), nt);
    assert_int_equal(atomic_load(&r->tids), (1 << nt) - 1);
}

static void test_run_alone(void **unused)
{
    (void)unused;
    for (int th = 1; th <= MAX_TH; th++) {
        static run_check r;
        memset(&r, 0, sizeof r);
        const ki_exec ex = { th, NULL, 0, NULL };
        ki_team_run(&ex, two_passes, &r);
        check_run(&r, th, th);
        for (int nt = 1; nt <= th + 1; nt++) { /* never more than the team asked for */
            memset(&r, 0, sizeof r);
            ki_team_run_n(&ex, nt, one_pass, &r);
            check_run(&r, nt < th ? nt : th, nt < th ? nt : th);
        }
    }
}

/* Inside a running team with a crew, as ki_session_run calls a KI_LAYER_TEAM layer: each thread
 * calls ki_team_run, several times in a row with the session's barrier between. */
static void test_run_in_crew(void **unused)
{
    (void)unused;
    for (int th = 1; th <= MAX_TH; th++) {
        for (int nt = 1; nt <= th; nt++) {
            static run_check r[3];
            static ki_crew crew;
            memset(r, 0, sizeof r);
            ki_crew_init(&crew, th);
#pragma omp parallel num_threads(th)
            {
                const ki_exec ex = { th, NULL, 0, &crew };
                for (int step = 0; step < 3; step++) {
                    if (step == 1) {
                        ki_team_run_n(&ex, nt, one_pass, &r[step]);
                    } else {
                        ki_team_run(&ex, two_passes, &r[step]);
                    }
                    ki_team_sync(&crew.step);
                }
            }
            check_run(&r[0], th, th);
            check_run(&r[1], nt, nt);
            check_run(&r[2], th, th);
        }
    }
}

/* ki_share_begin: every item taken exactly once, over uses one after another in a crew, some with
 * a thread that starts late (the others find its range empty or take from it). */
typedef struct share_check {
    atomic_int count[ITEMS];
    int items, late; /* the thread that starts late, or -1 */
} share_check;

static void share_pass(void *arg, const ki_part *p)
{
    share_check *r = arg;
    if (p->tid == r->late) {
        const struct timespec t = { 0, 2000000 };
        nanosleep(&t, NULL);
    }
    ki_share_begin(p, r->items);
    for (long long q = ki_share_take(p->share, p->tid); q >= 0;
         q = ki_share_take(p->share, p->tid)) {
        atomic_fetch_add(&r->count[q], 1);
    }
}

static void test_share_begin(void **unused)
{
    (void)unused;
    for (int th = 1; th <= MAX_TH; th++) {
        static share_check r[6];
        static ki_crew crew;
        memset(r, 0, sizeof r);
        for (int u = 0; u < 6; u++) {
            r[u].items = (int[]){ 1000, 7, 0, 1, 500, 3 }[u];
            r[u].late = u % 2 ? u % th : -1;
        }
        ki_crew_init(&crew, th);
#pragma omp parallel num_threads(th)
        {
            const ki_exec ex = { th, NULL, 0, &crew };
            for (int u = 0; u < 6; u++) {
                ki_team_run(&ex, share_pass, &r[u]);
                ki_team_sync(&crew.step);
            }
        }
        for (int u = 0; u < 6; u++) {
            for (int i = 0; i < ITEMS; i++) {
                assert_int_equal(atomic_load(&r[u].count[i]), i < r[u].items ? 1 : 0);
            }
        }
        /* without a crew: a region of the team's own, each use a new share */
        memset(r, 0, sizeof r);
        r[0].items = 999, r[0].late = th - 1;
        const ki_exec ex = { th, NULL, 0, NULL };
        ki_team_run(&ex, share_pass, &r[0]);
        for (int i = 0; i < ITEMS; i++) {
            assert_int_equal(atomic_load(&r[0].count[i]), i < 999 ? 1 : 0);
        }
    }
}

/* ki_share_begin_runs: at most KI_SHARE_RUNS runs a thread and one an item; the runs cover the
 * items in order, each item exactly once, also with a thread that starts late. ki_run_start is
 * n * q / runs rounded down, without overflow near INT64_MAX. */
typedef struct runs_check {
    share_check s;
    atomic_int bad; /* runs of a wrong count, or empty (checked after the region) */
} runs_check;

static void runs_pass(void *arg, const ki_part *p)
{
    runs_check *r = arg;
    if (p->tid == r->s.late) {
        const struct timespec t = { 0, 2000000 };
        nanosleep(&t, NULL);
    }
    const int64_t runs = ki_share_begin_runs(p, r->s.items);
    const int64_t most = KI_SHARE_RUNS * (int64_t)p->nt;
    if (runs != (r->s.items < most ? r->s.items : most)) {
        atomic_fetch_add(&r->bad, 1);
    }
    for (int64_t i0, i1; ki_share_take_run(p, r->s.items, runs, &i0, &i1);) {
        if (i0 >= i1) {
            atomic_fetch_add(&r->bad, 1);
        }
        for (int64_t i = i0; i < i1; i++) {
            atomic_fetch_add(&r->s.count[i], 1);
        }
    }
}

static void test_share_runs(void **unused)
{
    (void)unused;
    for (int64_t n = 0; n < 40; n++) {
        for (int64_t runs = 1; runs < 12; runs++) {
            for (int64_t q = 0; q <= runs; q++) {
                assert_int_equal(ki_run_start(n, runs, q), n * q / runs);
            }
        }
    }
    assert_int_equal(ki_run_start(INT64_MAX, 8, 8), INT64_MAX);
    assert_int_equal(ki_run_start(INT64_MAX, 8, 4), INT64_MAX / 2);
    assert_int_equal(ki_run_start(INT64_MAX - 1, 3, 2), (INT64_MAX - 1) / 3 * 2);
    for (int th = 1; th <= MAX_TH; th++) {
        static runs_check r;
        for (int u = 0; u < 5; u++) {
            memset(&r, 0, sizeof r);
            r.s.items = (int[]){ 1000, 7, 0, 1, 3 }[u];
            r.s.late = u % 2 ? u % th : -1;
            const ki_exec ex = { th, NULL, 0, NULL };
            ki_team_run(&ex, runs_pass, &r);
            assert_int_equal(atomic_load(&r.bad), 0);
            for (int i = 0; i < ITEMS; i++) {
                assert_int_equal(atomic_load(&r.s.count[i]), i < r.s.items ? 1 : 0);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounds),      cmocka_unit_test(test_late_thread),
        cmocka_unit_test(test_share),       cmocka_unit_test(test_part_range),
        cmocka_unit_test(test_run_alone),   cmocka_unit_test(test_run_in_crew),
        cmocka_unit_test(test_share_begin), cmocka_unit_test(test_share_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
