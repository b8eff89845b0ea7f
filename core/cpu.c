/* cpu.c - CPU detection (see cpu.h): the only place that asks the CPU what it runs. */
#include "cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define KI_CPU_X86 1
#else
#define KI_CPU_X86 0
#endif

/* Defaults when the system reports no size: common values, so blocks stay modest. */
#define DEFAULT_L1D (32u * 1024)
#define DEFAULT_L2  (512u * 1024)

static ki_cpu_info g_info;
static int g_detected; /* 0, then 1 once g_info is filled (idempotent: racing callers agree) */
static int g_cap = KI_ISA_AVX512;

static ki_isa detect_isa(void)
{
#if KI_CPU_X86
    /* GCC's checks include the OS's XGETBV state: the registers are saved on a context switch */
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
        return KI_ISA_AVX512;
    }
    return avx2 ? KI_ISA_AVX2 : KI_ISA_GENERIC;
#else
    return KI_ISA_GENERIC;
#endif
}

/* "48K", "2048K", "32M" or plain bytes, as sysfs writes cache sizes; 0 when unreadable. */
static size_t read_size(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[32] = { 0 };
    if (!f) {
        return 0;
    }
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    char *end;
    unsigned long long v = ok ? strtoull(buf, &end, 10) : 0;
    if (!ok || end == buf || v > (1ull << 40)) {
        return 0;
    }
    return (size_t)(*end == 'K' ? v << 10 : *end == 'M' ? v << 20 : v);
}

static int read_int(const char *path)
{
    size_t v = read_size(path);
    return v < 16 ? (int)v : 0;
}

static bool read_word(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return false;
    }
    bool ok = fgets(out, (int)n, f) != NULL;
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
    return ok;
}

/* Cache sizes from sysfs (cpu0's caches: a level's data or unified cache). */
static void caches_from_sysfs(ki_cpu_info *ci)
{
    char path[96], type[32];
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!read_word(path, type, sizeof type)) {
            break;
        }
        if (strcmp(type, "Instruction") == 0) {
            continue;
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        int level = read_int(path);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        size_t size = read_size(path);
        size_t *slot = level == 1 ? &ci->l1d : level == 2 ? &ci->l2 : level == 3 ? &ci->l3 : NULL;
        if (slot && size > 0 && *slot == 0) {
            *slot = size;
        }
    }
}

static void detect(ki_cpu_info *ci)
{
    memset(ci, 0, sizeof *ci);
    ci->isa = detect_isa();
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) &&                           \
    defined(_SC_LEVEL3_CACHE_SIZE)
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE),
         l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    ci->l1d = l1 > 0 ? (size_t)l1 : 0;
    ci->l2 = l2 > 0 ? (size_t)l2 : 0;
    ci->l3 = l3 > 0 ? (size_t)l3 : 0;
#endif
    /* sysfs: where sysconf gives no L1d or L2 size, and the L3 as the kernel reports it wherever
     * it does (glibc's sysconf read 320 MiB on a KVM AMD EPYC whose sysfs and lscpu said 32 MiB;
     * the L1 and L2 sizes agreed) */
    ki_cpu_info fs;
    memset(&fs, 0, sizeof fs);
    caches_from_sysfs(&fs);
    if (ci->l1d == 0 || ci->l2 == 0) {
        ci->l1d = ci->l1d ? ci->l1d : fs.l1d;
        ci->l2 = ci->l2 ? ci->l2 : fs.l2;
    }
    ci->l3 = fs.l3 ? fs.l3 : ci->l3;
    ci->caches_read = ci->l1d > 0 && ci->l2 > 0;
    ci->l1d = ci->l1d ? ci->l1d : DEFAULT_L1D;
    ci->l2 = ci->l2 ? ci->l2 : DEFAULT_L2;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ci->cores = n > 0 && n < 65536 ? (int)n : 1;
}

const ki_cpu_info *ki_cpu_get(void)
{
    if (!__atomic_load_n(&g_detected, __ATOMIC_ACQUIRE)) {
        ki_cpu_info ci;
        detect(&ci); /* the same result in every thread, so a race only repeats the work */
        g_info = ci;
        __atomic_store_n(&g_detected, 1, __ATOMIC_RELEASE);
    }
    return &g_info;
}

ki_isa ki_cpu_isa(void)
{
    ki_isa have = ki_cpu_get()->isa;
    int cap = __atomic_load_n(&g_cap, __ATOMIC_RELAXED);
    return (int)have < cap ? have : (ki_isa)cap;
}

void ki_cpu_pretend(ki_isa isa)
{
    ki_cpu_get();
    if ((int)isa >= KI_ISA_GENERIC && isa < g_info.isa) {
        g_info.isa = isa;
    }
}

ki_status ki_cpu_set_isa(ki_isa isa, ki_error *err)
{
    ki_isa have = ki_cpu_get()->isa;
    if ((int)isa < KI_ISA_GENERIC || (int)isa >= KI_ISA_COUNT) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "instruction-set level %d does not exist",
                       (int)isa);
    }
    if (isa > have) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "this CPU does not run %s; it runs %s%s",
                       ki_isa_name(isa), ki_isa_name(have),
                       have == KI_ISA_AVX512 ? ", avx2 and generic"
                       : have == KI_ISA_AVX2 ? " and generic"
                                             : " only");
    }
    __atomic_store_n(&g_cap, (int)isa, __ATOMIC_RELAXED);
    return KI_OK;
}

const char *ki_isa_name(ki_isa isa)
{
    switch (isa) {
    case KI_ISA_AVX512:
        return "avx512";
    case KI_ISA_AVX2:
        return "avx2";
    case KI_ISA_GENERIC:
        break;
    }
    return "generic";
}

bool ki_isa_parse(const char *s, ki_isa *out)
{
    static const struct {
        const char *name;
        ki_isa isa;
    } names[] = { { "generic", KI_ISA_GENERIC },
                  { "ref", KI_ISA_GENERIC },
                  { "avx2", KI_ISA_AVX2 },
                  { "avx512", KI_ISA_AVX512 } };
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].isa;
            return true;
        }
    }
    return false;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

double ki_cpu_pause_ns(void)
{
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        for (int i = 0; i < 256; i++) {
#if KI_HAVE_X86
            __builtin_ia32_pause();
#else
            __asm__ __volatile__("" ::: "memory");
#endif
        }
        double per = (now_ns() - t0) / 256.0;
        best = per < best ? per : best;
    }
    return best;
}
