/* test_malformed.c - runs the built kinfer binary on every case of tests/malformed/cases.txt and
 * checks its exit status, that stderr holds the expected message (and no sanitizer report), and
 * that a failing run left no file in its --save-dir. The binary is BUILD/kinfer, found from
 * argv[0] (BUILD/tests/test_malformed); cases are read relative to the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CASES_FILE   "tests/malformed/cases.txt"
#define MAX_ARGS     32
#define MAX_CASES    512
#define TIMEOUT_SECS 120

extern char **environ;

typedef struct mcase {
    char *line; /* the whole manifest line, also the test name */
    char *kind, *args, *message;
    int exit_code;
} mcase;

static char g_kinfer[4096];

/* Reads FILE's whole contents (for `<FILE` arguments); NULL on failure. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    char *buf = malloc(1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf) {
        buf[n] = '\0';
    }
    return buf;
}

/* Expands $M, $D and $O in one argument into a malloc'd string. */
static char *expand(const char *tok, const char *outdir)
{
    char buf[4096];
    size_t n = 0;
    for (const char *p = tok; *p && n < sizeof buf - 512; p++) {
        const char *rep = NULL;
        if (p[0] == '$' && p[1] == 'M') {
            rep = "tests/malformed";
        } else if (p[0] == '$' && p[1] == 'D') {
            rep = "tests/data";
        } else if (p[0] == '$' && p[1] == 'O') {
            rep = outdir;
        }
        if (rep) {
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s", rep);
            p++;
        } else {
            buf[n++] = *p;
        }
    }
    buf[n] = '\0';
    if (buf[0] == '<') {
        return slurp(buf + 1);
    }
    return strdup(buf);
}

/* Waits for pid, killing it after TIMEOUT_SECS; returns its exit status or -signal. */
static int wait_child(pid_t pid)
{
    int status = 0;
    for (int ms = 0; ms < TIMEOUT_SECS * 1000; ms += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -SIGKILL;
}

/* Runs kinfer with the case's arguments, stderr to errpath; returns the exit status. */
static int run_case(const mcase *c, const char *outdir, const char *errpath)
{
    char *argv[MAX_ARGS + 2] = { g_kinfer };
    int argc = 1;
    char *copy = strdup(c->args);
    assert_non_null(copy);
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t && argc <= MAX_ARGS;
         t = strtok_r(NULL, " ", &save)) {
        argv[argc] = expand(t, outdir);
        assert_non_null(argv[argc]);
        argc++;
    }
    free(copy);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int rc = posix_spawn(&pid, g_kinfer, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 1; i < argc; i++) {
        free(argv[i]);
    }
    assert_int_equal(rc, 0);
    return wait_child(pid);
}

/* Number of entries in dir other than . and .. (0 when it does not exist); removes them. */
static int drain_dir(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) {
        return 0;
    }
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            fprintf(stderr, "left behind: %s\n", p);
            remove(p);
            n++;
        }
    }
    closedir(d);
    return n;
}

static void test_case(void **state)
{
    const mcase *c = *state;
    char outdir[] = "/tmp/ki_malformed_XXXXXX";
    assert_non_null(mkdtemp(outdir));
    char errpath[64];
    snprintf(errpath, sizeof errpath, "%s.stderr", outdir);
    int code = run_case(c, outdir, errpath);
    char *msg = slurp(errpath);
    remove(errpath);
    int left = drain_dir(outdir);
    rmdir(outdir);
    assert_non_null(msg);
    if (code != c->exit_code || !strstr(msg, c->message) || strstr(msg, "Sanitizer") ||
        strstr(msg, "runtime error")) {
        fprintf(stderr, "case: %s\nexit %d (expected %d), stderr:\n%s\n", c->line, code,
                c->exit_code, msg);
        free(msg);
        fail();
    }
    free(msg);
    if (code != 0) {
        assert_int_equal(left, 0);
    }
}

/* Splits "kind|args|exit|message" in place; false for comments, blank or malformed lines. */
static bool parse_line(char *line, mcase *c)
{
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
        line[--n] = '\0';
    }
    if (n == 0 || line[0] == '#') {
        return false;
    }
    c->line = strdup(line);
    char *f[4];
    char *p = line;
    for (int i = 0; i < 4; i++) {
        f[i] = p;
        p = i < 3 ? strchr(p, '|') : NULL;
        if (i < 3 && !p) {
            fprintf(stderr, "%s: malformed line: %s\n", CASES_FILE, c->line);
            free(c->line);
            return false;
        }
        if (p) {
            *p++ = '\0';
        }
    }
    c->kind = strdup(f[0]);
    c->args = strdup(f[1]);
    c->exit_code = atoi(f[2]);
    c->message = strdup(f[3]);
    return c->kind && c->args && c->message;
}

/* BUILD/kinfer from argv[0] = BUILD/tests/test_malformed. */
static void find_kinfer(const char *argv0)
{
    snprintf(g_kinfer, sizeof g_kinfer, "%s", argv0);
    char *slash = strrchr(g_kinfer, '/');
    if (slash) {
        *slash = '\0';
        slash = strrchr(g_kinfer, '/');
    }
    if (slash) {
        snprintf(slash, sizeof g_kinfer - (size_t)(slash - g_kinfer), "/kinfer");
    } else {
        snprintf(g_kinfer, sizeof g_kinfer, "kinfer");
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    find_kinfer(argv[0]);
    FILE *f = fopen(CASES_FILE, "r");
    if (!f) {
        fprintf(stderr, "test_malformed: cannot open %s (run from the repository root)\n",
                CASES_FILE);
        return 1;
    }
    static mcase cases[MAX_CASES];
    static struct CMUnitTest tests[MAX_CASES];
    static char line[8192];
    size_t n = 0;
    while (n < MAX_CASES && fgets(line, sizeof line, f)) {
        if (parse_line(line, &cases[n])) {
            tests[n] = (struct CMUnitTest){ cases[n].line, test_case, NULL, NULL, &cases[n] };
            n++;
        }
    }
    fclose(f);
    int rc = _cmocka_run_group_tests("malformed", tests, n, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        free(cases[i].line);
        free(cases[i].kind);
        free(cases[i].args);
        free(cases[i].message);
    }
    return rc;
}
