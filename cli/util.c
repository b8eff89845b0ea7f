/* util.c - helpers shared by the subcommands. */
#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../core/kinfer.h"
#include "commands.h"

void ki_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kinfer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int ki_cli_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
        return 0;
    }
    *out = v;
    return 1;
}

void ki_cli_set_threads(int n)
{
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

/* The CPUs this process may run on (its affinity mask: taskset, a container's cpuset), as
 * OpenMP counts them, not every CPU online: two threads on one allowed CPU made resnet18 1.13x
 * slower than one. */
static int usable_cpus(void)
{
    const int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

int ki_cli_default_threads(void)
{
    const int n = usable_cpus();
    return n > 256 ? 256 : n;
}

size_t ki_cli_memory_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    if (kb == 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
    }
    return (size_t)kb * 1024;
}

size_t ki_cli_peak_rss(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (size_t)ru.ru_maxrss * 1024 : 0;
}

bool ki_cli_set_isa(const char *s, const char *what)
{
    ki_isa isa;
    ki_error err = { KI_OK, "" };
    if (!ki_isa_parse(s, &isa)) {
        ki_cli_error("%s '%s': not a level (use generic, avx2 or avx512)", what, s);
        return false;
    }
    if (ki_cpu_set_isa(isa, &err) != KI_OK) {
        ki_cli_error("%s %s: %s", what, s, err.msg);
        return false;
    }
    return true;
}

bool ki_cli_isa_from_env(void)
{
    const char *s = getenv("KINFER_ISA");
    return !s || !*s || ki_cli_set_isa(s, "KINFER_ISA");
}

/* "48 KiB", "2 MiB" */
static void size_str(size_t b, char *buf, size_t n)
{
    if (b >= (1u << 20) && b % (1u << 20) == 0) {
        snprintf(buf, n, "%zu MiB", b >> 20);
    } else {
        snprintf(buf, n, "%zu KiB", b >> 10);
    }
}

void ki_cli_cpu_str(char *buf, size_t n)
{
    const ki_cpu_info *ci = ki_cpu_get();
    char l1[32], l2[32], l3[32] = "none";
    size_str(ci->l1d, l1, sizeof l1);
    size_str(ci->l2, l2, sizeof l2);
    if (ci->l3) {
        size_str(ci->l3, l3, sizeof l3);
    }
    char usable[48] = "";
    const int cpus = usable_cpus(); /* not the default threads, which stop at 256 */
    if (cpus < ci->cores) {
        snprintf(usable, sizeof usable, " (%d for this process)", cpus);
    }
    snprintf(buf, n, "%s (CPU: %s); L1d %s, L2 %s, L3 %s%s; %d cores%s", ki_isa_name(ki_cpu_isa()),
             ki_isa_name(ci->isa), l1, l2, l3, ci->caches_read ? "" : " (defaults, not reported)",
             ci->cores, usable);
}

/* Edit distance of a and b counting a swap of neighbours as one edit (optimal string alignment),
 * over at most 64 characters of each (longer strings are not options). */
static int edit_distance(const char *a, const char *b)
{
    int d[65][65];
    size_t na = strlen(a), nb = strlen(b);
    na = na > 64 ? 64 : na, nb = nb > 64 ? 64 : nb;
    for (size_t i = 0; i <= na; i++) {
        for (size_t j = 0; j <= nb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = (int)(i + j);
                continue;
            }
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            int v = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v) {
                v = d[i - 2][j - 2] + 1;
            }
            d[i][j] = v;
        }
    }
    return d[na][nb];
}

const char *ki_cli_closest(const char *s, const char *const *names)
{
    const char *best = NULL;
    int bd = 4; /* further than three edits is no hint */
    for (int i = 0; s && strlen(s) <= 64 && names[i]; i++) {
        int d = edit_distance(s, names[i]);
        if (d < bd || (strstr(names[i], s) && strlen(s) >= 4 && !best)) {
            bd = d < bd ? d : bd, best = names[i];
        }
    }
    return best;
}

void ki_cli_unknown_option(const char *cmd, const char *opt, const char *const *names)
{
    const char *hint = ki_cli_closest(opt, names);
    if (hint) {
        ki_cli_error("%s: unknown option '%s'; did you mean '%s'? (see 'kinfer %s --help')", cmd,
                     opt, hint, cmd);
    } else {
        ki_cli_error("%s: unknown option '%s' (see 'kinfer %s --help')", cmd, opt, cmd);
    }
}

const char *ki_cli_split_eq(const char *a, char *buf, size_t n)
{
    const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
    if (!eq || (size_t)(eq - a) >= n) {
        return NULL;
    }
    memcpy(buf, a, (size_t)(eq - a));
    buf[eq - a] = '\0';
    return eq + 1;
}

bool ki_cli_parse_shape(const char *s, ki_shape *out)
{
    int64_t d[KI_MAX_DIMS];
    int n = 0;
    char *end;
    while (*s && n < KI_MAX_DIMS) {
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || v > KI_MAX_DIM || (*end != ',' && *end != '\0')) {
            return false;
        }
        d[n++] = v;
        s = *end == ',' ? end + 1 : end;
    }
    if (*s != '\0' || n == 0) {
        return false;
    }
    *out = ki_shape_make(n, d);
    return true;
}
