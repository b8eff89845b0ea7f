/* test_golden.c - every case under tests/data/{ops,nets}/<name>/case.json run through the public
 * API and compared with PyTorch's outputs, with zoo-check's metric:
 *   max |kinfer - pytorch| / (|pytorch| + mean|pytorch|) <= rtol (from case.json).
 * Each case runs with 1 and 2 threads, at every instruction-set level this CPU runs (generic,
 * avx2, avx512: a line per level), so each level's kernels meet PyTorch on every machine. The two
 * runs must also give the same bits: no kernel's result depends on the thread count, which lets a
 * session run on one thread when its team is held up (core/solo.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/npy.h"
#include "../../core/kinfer.h"

#define MAX_IO 32

typedef struct gcase {
    char name[1024];
    char dir[512];
    char param[128], bin[128];
    char inputs[MAX_IO][128], outputs[MAX_IO][128];
    int n_in, n_out;
    double rtol;
} gcase;

/* Reads the string after "key": starting at p; returns a pointer past it. */
static const char *json_str(const char *p, char *out, size_t n)
{
    p = strchr(p, '"');
    if (!p) {
        return NULL;
    }
    const char *e = strchr(p + 1, '"');
    if (!e || (size_t)(e - p - 1) >= n) {
        return NULL;
    }
    memcpy(out, p + 1, (size_t)(e - p - 1));
    out[e - p - 1] = '\0';
    return e + 1;
}

static int json_list(const char *p, const char *end, char (*out)[128])
{
    const char *open = strchr(p, '['), *close = open ? strchr(open, ']') : NULL;
    int n = 0;
    if (!open || !close || close > end) {
        return -1;
    }
    const char *q = open;
    while (n < MAX_IO && (q = strchr(q, '"')) && q < close) {
        q = json_str(q, out[n++], 128);
    }
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    char *buf = calloc(1, 1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

/* Appends one gcase per object in "cases". */
static int read_cases(const char *dir, const char *name, gcase **cases, int *n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/case.json", dir);
    char *text = slurp(path);
    if (!text) {
        return 0;
    }
    const char *rt = strstr(text, "\"rtol\"");
    double rtol = rt ? strtod(strchr(rt, ':') + 1, NULL) : 1e-4;
    const char *p = strstr(text, "\"cases\"");
    while (p && (p = strstr(p, "\"param\""))) {
        const char *end = strchr(p, '}');
        gcase c;
        memset(&c, 0, sizeof c);
        json_str(p + 7, c.param, sizeof c.param);
        const char *b = strstr(p, "\"bin\""), *in = strstr(p, "\"inputs\""),
                   *out = strstr(p, "\"outputs\"");
        if (!end || !b || !in || !out || b > end) {
            break;
        }
        json_str(b + 5, c.bin, sizeof c.bin);
        c.n_in = json_list(in, end, c.inputs);
        c.n_out = json_list(out, end, c.outputs);
        c.rtol = rtol;
        snprintf(c.dir, sizeof c.dir, "%s", dir);
        snprintf(c.name, sizeof c.name, "%s/%s+%s", name, c.param, c.inputs[0]);
        gcase *nc = realloc(*cases, (size_t)(*n + 1) * sizeof *nc);
        if (!nc) {
            break;
        }
        *cases = nc;
        (*cases)[(*n)++] = c;
        p = end;
    }
    free(text);
    return 1;
}

static double compare(const float *got, const float *ref, int64_t n)
{
    double mean = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) {
        mean += fabs((double)ref[i]);
    }
    mean = n ? mean / (double)n : 0;
    double floor = mean > 0 ? mean : 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs((double)ref[i]) + floor);
        if (e != e) {
            return INFINITY;
        }
        worst = e > worst ? e : worst;
    }
    return worst;
}

static ki_session *run_case(const gcase *c, const ki_model *m, int threads)
{
    ki_error err;
    ki_shape shapes[MAX_IO];
    float *data[MAX_IO];
    char path[700];
    for (int i = 0; i < c->n_in; i++) {
        snprintf(path, sizeof path, "%s/%s", c->dir, c->inputs[i]);
        if (ki_npy_read(path, &shapes[i], &data[i], &err) != KI_OK) {
            fail_msg("%s", err.msg);
        }
    }
    ki_session_options so = { threads, 0 };
    ki_session *s = NULL;
    if (ki_session_create(m, shapes, c->n_in, &so, &s, &err) != KI_OK) {
        fail_msg("%s: %s", c->name, err.msg);
    }
    for (int i = 0; i < c->n_in; i++) {
        ki_tensor t = ki_session_input(s, i);
        memcpy(t.data, data[i], (size_t)ki_shape_count(&t.shape) * sizeof(float));
        free(data[i]);
    }
    if (ki_session_run(s, &err) != KI_OK) {
        fail_msg("%s: %s", c->name, err.msg);
    }
    return s;
}

static void check_outputs(const gcase *c, const ki_model *m, const ki_session *s)
{
    ki_error err;
    char path[700], b1[128], b2[128];
    assert_int_equal(ki_model_n_outputs(m), c->n_out);
    for (int i = 0; i < c->n_out; i++) {
        ki_shape rs;
        float *ref;
        snprintf(path, sizeof path, "%s/%s", c->dir, c->outputs[i]);
        assert_int_equal(ki_npy_read(path, &rs, &ref, &err), KI_OK);
        ki_tensor t = ki_session_output(s, i);
        if (!ki_shape_equal(&rs, &t.shape)) {
            fail_msg("%s out%d: shape %s, PyTorch %s", c->name, i, ki_shape_str(&t.shape, b1, 128),
                     ki_shape_str(&rs, b2, 128));
        }
        double e = compare(t.data, ref, ki_shape_count(&rs));
        free(ref);
        if (e > c->rtol) {
            fail_msg("%s out%d: error %.3g > %.3g", c->name, i, e, c->rtol);
        }
    }
}

static void test_case(void **state)
{
    const gcase *c = *state;
    ki_error err;
    ki_model *m;
    char param[700], bin[700];
    snprintf(param, sizeof param, "%s/%s", c->dir, c->param);
    snprintf(bin, sizeof bin, "%s/%s", c->dir, c->bin);
    if (ki_model_load(param, bin, NULL, &m, &err) != KI_OK) {
        fail_msg("%s", err.msg);
    }
    ki_session *s1 = run_case(c, m, 1), *s2 = run_case(c, m, 2);
    check_outputs(c, m, s1);
    check_outputs(c, m, s2);
    for (int i = 0; i < c->n_out; i++) {
        const ki_tensor a = ki_session_output(s1, i), b = ki_session_output(s2, i);
        if (memcmp(a.data, b.data, (size_t)ki_shape_count(&a.shape) * sizeof(float)) != 0) {
            fail_msg("%s out%d: 1 and 2 threads give different bits", c->name, i);
        }
    }
    ki_session_destroy(s1);
    ki_session_destroy(s2);
    ki_model_destroy(m);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const gcase *)a)->name, ((const gcase *)b)->name);
}

static void collect(const char *root, gcase **cases, int *n)
{
    DIR *d = opendir(root);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        read_cases(dir, e->d_name, cases, n);
    }
    if (d) {
        closedir(d);
    }
}

int main(void)
{
    gcase *cases = NULL;
    int n = 0;
    collect("tests/data/ops", &cases, &n);
    collect("tests/data/nets", &cases, &n);
    if (n == 0) {
        fprintf(stderr, "test_golden: no cases under tests/data (run from the repository root)\n");
        return 1;
    }
    qsort(cases, (size_t)n, sizeof *cases, cmp_name);
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    for (int i = 0; i < n; i++) {
        tests[i] = (struct CMUnitTest){ cases[i].name, test_case, NULL, NULL, &cases[i] };
    }
    /* Every level this CPU runs, each with its own kernels (layers choose them at load). */
    int rc = 0;
    for (int level = KI_ISA_GENERIC; level <= (int)ki_cpu_get()->isa; level++) {
        ki_error err;
        char group[32];
        if (ki_cpu_set_isa((ki_isa)level, &err) != KI_OK) {
            fprintf(stderr, "test_golden: %s\n", err.msg);
            return 1;
        }
        snprintf(group, sizeof group, "golden-%s", ki_isa_name((ki_isa)level));
        int failed = _cmocka_run_group_tests(group, tests, (size_t)n, NULL, NULL);
        printf("golden %s: %d cases at 1 and 2 threads, %d failed\n", ki_isa_name((ki_isa)level), n,
               failed);
        rc |= failed != 0;
    }
    free(tests);
    free(cases);
    return rc;
}
