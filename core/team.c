/* team.c - ki_team_sync (team.h). Thread-safe by construction: the state is the caller's ki_team,
 * touched only through atomics. */
#include "team.h"

#include <omp.h>
#include <sched.h>
#include <time.h>

#include "cpu.h"
#include "layer.h"

/* Spinning with the CPU's pause hint for KI_SPIN_NS (as libgomp's barriers do before they
 * sleep), then yielding until KI_TEAM_YIELD_NS, then napping (team.h, docs/performance.md). */
#define KI_TEAM_YIELD_NS 2000000LL
#define KI_TEAM_NAP_NS   50000L
/* Spins between looks at the clock (about 1-5 us of pauses). */
#define KI_TEAM_CHECK 64

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void ki_team_sync(ki_team *t)
{
    ki_team_sync_n(t, omp_get_num_threads());
}

void ki_team_sync_n(ki_team *t, int nth)
{
    if (nth <= 1) {
        return;
    }
    const int round = atomic_load_explicit(&t->round, memory_order_acquire);
    /* acq_rel: the last thread to arrive acquires every earlier thread's writes, and its release
     * of the new round passes them (and its own) on to the waiting threads */
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) == nth - 1) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed); /* before the new round */
        atomic_fetch_add_explicit(&t->round, 1, memory_order_release);
        return;
    }
    long long start = 0;
    for (unsigned i = 1; atomic_load_explicit(&t->round, memory_order_acquire) == round; i++) {
        if (i % KI_TEAM_CHECK != 0) {
            cpu_relax();
            continue;
        }
        const long long now = now_ns();
        start = start ? start : now;
        if (now - start < KI_SPIN_NS) {
            continue;
        }
        if (now - start < KI_TEAM_YIELD_NS) {
            sched_yield();
        } else {
            const struct timespec nap = { 0, KI_TEAM_NAP_NS };
            nanosleep(&nap, NULL);
        }
    }
}

/* A share's [lo, hi) in one word, so that the owner's take from the front and a thief's from
 * the back are each one compare-and-swap. */
static unsigned long long pack(unsigned long long lo, unsigned long long hi)
{
    return lo | hi << 32;
}

/* Share i of n of items 0..items-1 (at most 2^31 - 1 of them), packed. */
static unsigned long long share_of(long long items, int i, int n)
{
    const long long m = items < 0 ? 0 : items > 0x7fffffffLL ? 0x7fffffffLL : items;
    return pack((unsigned long long)(m * i / n), (unsigned long long)(m * (i + 1) / n));
}

void ki_share_init(ki_share *s, long long items, int n_threads)
{
    /* more threads than KI_SHARE_MAX: the threads past the shares only take what is left */
    const int n = n_threads < 1 ? 1 : n_threads > KI_SHARE_MAX ? KI_SHARE_MAX : n_threads;
    s->n = n;
    for (int i = 0; i < n; i++) {
        atomic_init(&s->range[i].v, share_of(items, i, n));
    }
}

long long ki_share_peek(const ki_share *s, int tid)
{
    if (tid < 0 || tid >= s->n) {
        return -1;
    }
    const unsigned long long v =
        atomic_load_explicit((_Atomic unsigned long long *)&s->range[tid].v, memory_order_relaxed);
    const unsigned long long lo = v & 0xffffffffULL, hi = v >> 32;
    return lo < hi ? (long long)lo : -1;
}

long long ki_share_take(ki_share *s, int tid)
{
    for (int k = 0; k < s->n; k++) {
        const int i = (tid + k) % s->n, own = i == tid;
        unsigned long long v = atomic_load_explicit(&s->range[i].v, memory_order_relaxed);
        for (;;) {
            const unsigned long long lo = v & 0xffffffffULL, hi = v >> 32;
            if (lo >= hi) {
                break;
            }
            const unsigned long long next = own ? pack(lo + 1, hi) : pack(lo, hi - 1);
            if (atomic_compare_exchange_weak_explicit(&s->range[i].v, &v, next,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                return (long long)(own ? lo : hi - 1);
            }
        }
    }
    return -1;
}

void ki_part_sync(const ki_part *p)
{
    ki_team_sync_n(p->sync, p->nt);
}

void ki_share_begin(const ki_part *p, long long items)
{
    if (p->nt > KI_SHARE_MAX) {
        if (p->tid == 0) {
            ki_share_init(p->share, items, p->nt);
        }
        ki_part_sync(p);
        return;
    }
    atomic_store_explicit(&p->share->range[p->tid].v, share_of(items, p->tid, p->nt),
                          memory_order_relaxed);
}

int64_t ki_share_begin_runs(const ki_part *p, int64_t n)
{
    const int64_t most = KI_SHARE_RUNS * (int64_t)(p->nt > 0 ? p->nt : 1);
    const int64_t runs = n < most ? (n > 0 ? n : 0) : most;
    ki_share_begin(p, runs);
    return runs;
}

bool ki_share_take_run(const ki_part *p, int64_t n, int64_t runs, int64_t *lo, int64_t *hi)
{
    const long long q = ki_share_take(p->share, p->tid);
    if (q < 0) {
        return false;
    }
    *lo = ki_run_start(n, runs, q);
    *hi = ki_run_start(n, runs, q + 1);
    return true;
}

/* An empty share of n ranges (ki_share_begin sets each). */
static void share_empty(ki_share *s, int n)
{
    s->n = n < KI_SHARE_MAX ? n : KI_SHARE_MAX;
    for (int i = 0; i < s->n; i++) {
        atomic_init(&s->range[i].v, 0);
    }
}

void ki_part_range(int64_t n, const ki_part *p, int64_t *lo, int64_t *hi)
{
    int64_t q = n / p->nt, r = n % p->nt;
    if (p->tid < r) {
        q++, r = 0;
    }
    *lo = q * p->tid + r;
    *hi = *lo + q;
}

void ki_team_run_n(const ki_exec *ex, int nt, ki_team_body body, void *arg)
{
    nt = nt < ex->n_threads ? nt : ex->n_threads;
    nt = nt > 1 ? nt : 1;
    if (ex->crew) { /* inside the session's region: the threads are here */
        const int tid = omp_get_thread_num(), team = omp_get_num_threads();
        const ki_part p = { tid, nt < team ? nt : team, &ex->crew->inner, &ex->crew->share };
        if (tid < p.nt) {
            body(arg, &p);
        }
        return;
    }
    ki_team inner = KI_TEAM_INIT;
    ki_share share;
    share_empty(&share, nt);
    if (nt == 1) { /* no region to enter and leave */
        const ki_part p = { 0, 1, &inner, &share };
        body(arg, &p);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        const ki_part p = { omp_get_thread_num(), omp_get_num_threads(), &inner, &share };
        body(arg, &p);
        ki_team_sync_n(&inner, p.nt); /* all together into the region's closing barrier */
    }
}

void ki_team_run(const ki_exec *ex, ki_team_body body, void *arg)
{
    ki_team_run_n(ex, ex->n_threads, body, arg);
}

void ki_crew_init(ki_crew *c, int n_threads)
{
    c->step = (ki_team)KI_TEAM_INIT;
    c->inner = (ki_team)KI_TEAM_INIT;
    share_empty(&c->share, n_threads);
}
