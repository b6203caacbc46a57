/* bench/object.c: see object.h. */
#include "object.h"

#include "dietcode/codegen.h"
#include "dietcode/runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void fail(const char *what, const char *why)
{
    fprintf(stderr, "bench: the tuned object: %s: %s\n", what, why);
    exit(1);
}

/* Runs argv (argv[0] a path) to completion: true, or false and why. */
static bool spawn(char *const argv[], char *why, size_t len)
{
    pid_t pid;
    int status = 0, rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
    if (rc != 0)
        snprintf(why, len, "%s: %s", argv[0], strerror(rc));
    else if (waitpid(pid, &status, 0) != pid)
        snprintf(why, len, "%s: %s", argv[0], strerror(errno));
    else if (WIFSIGNALED(status))
        snprintf(why, len, "%s: killed by signal %d", argv[0], WTERMSIG(status));
    else if (WEXITSTATUS(status) != 0)
        snprintf(why, len, "%s: exit status %d", argv[0], WEXITSTATUS(status));
    else
        return true;
    return false;
}

BenchObject *bench_object(const TeProgram *p, const char *tex, const char *records)
{
    const char *tmp = getenv("TMPDIR");
    char dir[1024], obj[1100], so[1100], why[1200] = "";
    snprintf(dir, sizeof dir, "%s/dc_bench_object_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        fail(dir, strerror(errno));
    snprintf(obj, sizeof obj, "%s/tuned.o", dir);
    snprintf(so, sizeof so, "%s/tuned.so", dir);
    char *dcc[] = {DC_BENCH_DCC, (char *)tex, "--records", (char *)records, "--emit=obj", "-o",
                   obj, NULL};
    /* dlsym on the handle finds the object's own NAME_run_packed, and
     * RTLD_LOCAL keeps its names out of the process's scope; -Bsymbolic
     * only guards the object's references to its own names, of which it
     * has none today, against a default object of the same program linked
     * into the benchmark */
    char *cc[] = {DC_BENCH_CC, "-shared", "-Wl,-Bsymbolic", "-o", so, obj, NULL};
    void *handle = NULL;
    if (spawn(dcc, why, sizeof why) && spawn(cc, why, sizeof why) &&
        !(handle = dlopen(so, RTLD_NOW | RTLD_LOCAL)))
        snprintf(why, sizeof why, "%s", dlerror());
    unlink(obj);
    unlink(so);
    rmdir(dir);
    if (!handle)
        fail(tex, why);
    char *sym = cg_symbol(p->name, "_run_packed"); /* as codegen/host.c names it */
    void *run = dlsym(handle, sym);
    if (!run)
        fail(sym, "not in the object");
    free(sym);
    BenchObject *o = calloc(1, sizeof *o);
    if (!o)
        fail(tex, "out of memory");
    o->handle = handle;
    o->cp = ex_cpu_entry(p, (ExRunPacked)(uintptr_t)run);
    for (int i = 0; i < p->ntensors; i++)
        o->out = p->tensors[i]->kind == TK_OUTPUT ? i : o->out;
    return o;
}

/* A call's launches as text, "NAME[BLOCKS] ..." (cut at the end of text). */
typedef struct Launches {
    char text[4096];
    size_t len;
} Launches;

static void record(void *ud, const DcrtProgram *p, const DcrtLaunch *l, double ms)
{
    (void)ms;
    Launches *r = ud;
    size_t room = sizeof r->text - r->len;
    int n = snprintf(r->text + r->len, room, "%s[%lld] ", p->kernels[l->kernel].name,
                     (long long)l->blocks);
    r->len += n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
}

/* One call of cp at dims, its launches into *r. */
static void run_recorded(ExCpu *cp, const int64_t *dims, float *const *tensors, Launches *r,
                         const char *who)
{
    char err[512];
    r->len = 0;
    r->text[0] = 0;
    dcrt_set_launch_hook(record, r);
    int rc = ex_cpu_run(cp, dims, tensors, NULL, err, sizeof err);
    dcrt_set_launch_hook(NULL, NULL);
    if (rc != 0)
        fail(who, err);
}

void bench_object_check(const BenchObject *o, ExCpu *jit, const int64_t *dims,
                        float *const *tensors, size_t len)
{
    const int out = o->out;
    float *want = malloc(len * sizeof *want);
    Launches *l = malloc(2 * sizeof *l);
    if (!want || !l)
        fail("check", "out of memory");
    run_recorded(jit, dims, tensors, &l[0], "the JIT");
    memcpy(want, tensors[out], len * sizeof *want);
    memset(tensors[out], 0, len * sizeof *want);
    run_recorded(o->cp, dims, tensors, &l[1], "run");
    if (strcmp(l[0].text, l[1].text) != 0) {
        fprintf(stderr, "bench: the JIT launches %s\nbench: the object launches %s\n", l[0].text,
                l[1].text);
        fail("check", "it launches other kernels than the JIT");
    }
    for (size_t i = 0; i < len; i++)
        if (!(fabsf(tensors[out][i] - want[i]) <= 1e-4f * (1 + fabsf(want[i]))))
            fail("check", "its output differs from the JIT's");
    free(want);
    free(l);
}

void bench_object_close(BenchObject *o)
{
    if (!o)
        return;
    ex_cpu_destroy(o->cp);
    dlclose(o->handle);
    free(o);
}
