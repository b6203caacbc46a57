/* A fake libcuda.so.1 for tests on machines without a GPU: the driver API
 * calls libdcrt makes (runtime/cuda.c), on host memory, with nothing run.
 * Built as tests/fake-cuda/libcuda.so.1; a test puts its folder first in
 * LD_LIBRARY_PATH, so dlopen("libcuda.so.1") finds it.
 *
 * What it checks and counts, for the tests of what libdcrt holds and
 * frees (tests/cuda/fake_client.c):
 * - modules: the PTX is kept, each .entry's parameter count read from it;
 *   cuModuleGetFunction of a name no .entry has fails;
 * - cuLaunchKernel reads each of the kernel's parameters (8 bytes each: the
 *   NVPTX kernel ABI's i64 dims and pointers) and fails when one is missing
 *   (a NULL in kernelParams: libdcrt clears what a launch does not pass) or
 *   one that is not a small number (a dim) points into no live allocation;
 * - live modules, allocations, graphs and executable graphs, launches,
 *   graph launches and host-to-device copies, read with fake_cuda_count;
 * - FAKE_CUDA_FAIL_CAPTURE=1: a launch into a capturing stream fails (as
 *   a driver does for what a capture does not support), and so does the
 *   capture's end, as CUDA's does after such a failure.
 * Handles are heap objects; nothing is thread-safe beyond one lock.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum {
    OK = 0,
    ERR_INVALID_VALUE = 1,
    ERR_NOT_FOUND = 500,
    ERR_CAPTURE_UNSUPPORTED = 900,
    ERR_CAPTURE_INVALIDATED = 901,
};
enum { MAX_PARAMS = 1100 };

typedef struct Entry {
    char name[256];
    int nparams;
} Entry;

typedef struct Module {
    Entry *entries;
    int n;
} Module;

typedef struct Stream {
    int capturing, failed;
} Stream;

typedef struct Alloc {
    char *p;
    size_t bytes;
    struct Alloc *next;
} Alloc;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static Alloc *allocs;
static long live_modules, live_allocs, live_graphs, live_execs, launches, graph_launches, htod,
    bad_launches;

long fake_cuda_count(const char *what);
long fake_cuda_count(const char *what)
{
    pthread_mutex_lock(&mu);
    long v = strcmp(what, "modules") == 0          ? live_modules
             : strcmp(what, "allocs") == 0         ? live_allocs
             : strcmp(what, "graphs") == 0         ? live_graphs
             : strcmp(what, "execs") == 0          ? live_execs
             : strcmp(what, "launches") == 0       ? launches
             : strcmp(what, "graph_launches") == 0 ? graph_launches
             : strcmp(what, "htod") == 0           ? htod
             : strcmp(what, "bad_launches") == 0   ? bad_launches
                                                   : -1;
    pthread_mutex_unlock(&mu);
    return v;
}

/* The allocation holding [p, p + bytes), or NULL; call with mu held. */
static Alloc *find(uint64_t p, size_t bytes)
{
    for (Alloc *a = allocs; a; a = a->next)
        if (p >= (uint64_t)(uintptr_t)a->p && p + bytes <= (uint64_t)(uintptr_t)a->p + a->bytes)
            return a;
    return NULL;
}

CUresult cuInit(unsigned flags);
CUresult cuInit(unsigned flags) { return flags == 0 ? OK : ERR_INVALID_VALUE; }
CUresult cuDriverGetVersion(int *v);
CUresult cuDriverGetVersion(int *v)
{
    *v = 12040;
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char **s);
CUresult cuGetErrorString(CUresult r, const char **s)
{
    *s = r == ERR_CAPTURE_UNSUPPORTED ? "operation not permitted when stream is capturing"
                                      : "fake driver error";
    return OK;
}
CUresult cuGetErrorName(CUresult r, const char **s);
CUresult cuGetErrorName(CUresult r, const char **s)
{
    *s = r == ERR_CAPTURE_UNSUPPORTED ? "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" : "CUDA_ERROR_FAKE";
    return OK;
}
CUresult cuDeviceGet(int *dev, int ordinal);
CUresult cuDeviceGet(int *dev, int ordinal)
{
    *dev = ordinal;
    return ordinal == 0 ? OK : ERR_INVALID_VALUE;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev);
CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    (void)dev;
    *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : 1024; /* sm_90, 132 SMs */
    return OK;
}
static int ctx;
CUresult cuDevicePrimaryCtxRetain(void **c, int dev);
CUresult cuDevicePrimaryCtxRetain(void **c, int dev)
{
    (void)dev;
    *c = &ctx;
    return OK;
}
CUresult cuCtxSetCurrent(void *c);
CUresult cuCtxSetCurrent(void *c) { return c == &ctx ? OK : ERR_INVALID_VALUE; }
CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize(void) { return OK; }
CUresult cuStreamSynchronize(Stream *s);
CUresult cuStreamSynchronize(Stream *s) { return s && s->capturing ? ERR_CAPTURE_UNSUPPORTED : OK; }

/* Each ".entry NAME(" of ptx and the .param lines up to its ")". */
CUresult cuModuleLoadDataEx(Module **out, const char *ptx, unsigned n, void *opts, void **vals);
CUresult cuModuleLoadDataEx(Module **out, const char *ptx, unsigned n, void *opts, void **vals)
{
    (void)n, (void)opts, (void)vals;
    Module *m = calloc(1, sizeof *m);
    if (!m)
        return ERR_INVALID_VALUE;
    for (const char *s = ptx; (s = strstr(s, ".entry ")); ) {
        s += 7;
        const char *open = strchr(s, '('), *close = open ? strchr(open, ')') : NULL;
        if (!close || open - s >= 256) {
            free(m->entries);
            free(m);
            return ERR_INVALID_VALUE;
        }
        Entry *e = realloc(m->entries, sizeof *e * (size_t)(m->n + 1));
        if (!e) {
            free(m->entries);
            free(m);
            return ERR_INVALID_VALUE;
        }
        m->entries = e;
        e = &m->entries[m->n++];
        memcpy(e->name, s, (size_t)(open - s));
        e->name[open - s] = '\0';
        e->nparams = 0;
        for (const char *p = open; (p = strstr(p, ".param")) && p < close; p += 6)
            e->nparams++;
        s = close;
    }
    pthread_mutex_lock(&mu);
    live_modules++;
    pthread_mutex_unlock(&mu);
    *out = m;
    return OK;
}
CUresult cuModuleGetFunction(Entry **f, Module *m, const char *name);
CUresult cuModuleGetFunction(Entry **f, Module *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->entries[i].name, name) == 0) {
            *f = &m->entries[i];
            return OK;
        }
    return ERR_NOT_FOUND;
}
CUresult cuModuleUnload(Module *m);
CUresult cuModuleUnload(Module *m)
{
    free(m->entries);
    free(m);
    pthread_mutex_lock(&mu);
    live_modules--;
    pthread_mutex_unlock(&mu);
    return OK;
}
CUresult cuFuncSetAttribute(Entry *f, int attr, int v);
CUresult cuFuncSetAttribute(Entry *f, int attr, int v)
{
    (void)f, (void)attr, (void)v;
    return OK;
}

static int fail_capture(void)
{
    const char *e = getenv("FAKE_CUDA_FAIL_CAPTURE");
    return e && strcmp(e, "1") == 0;
}

CUresult cuLaunchKernel(Entry *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, Stream *s, void **params, void **extra);
CUresult cuLaunchKernel(Entry *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, Stream *s, void **params, void **extra)
{
    (void)shared, (void)extra;
    if (s && s->capturing && fail_capture()) {
        s->failed = 1;
        return ERR_CAPTURE_UNSUPPORTED;
    }
    int ok = gx > 0 && gy == 1 && gz == 1 && bx > 0 && by == 1 && bz == 1 && params &&
             f->nparams <= MAX_PARAMS;
    pthread_mutex_lock(&mu);
    for (int i = 0; ok && i < f->nparams; i++) {
        uint64_t v = 0;
        if (params[i])
            memcpy(&v, params[i], sizeof v);
        if (!params[i] || (v >= 65536 && !find(v, 1)))
            ok = 0;
    }
    if (ok)
        launches++;
    else
        bad_launches++;
    pthread_mutex_unlock(&mu);
    return ok ? OK : ERR_INVALID_VALUE;
}

CUresult cuMemAlloc_v2(uint64_t *p, size_t bytes);
CUresult cuMemAlloc_v2(uint64_t *p, size_t bytes)
{
    Alloc *a = malloc(sizeof *a);
    char *mem = calloc(1, bytes);
    if (!a || !mem) {
        free(a);
        free(mem);
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    *a = (Alloc){mem, bytes, NULL};
    pthread_mutex_lock(&mu);
    a->next = allocs;
    allocs = a;
    live_allocs++;
    pthread_mutex_unlock(&mu);
    *p = (uint64_t)(uintptr_t)mem;
    return OK;
}
CUresult cuMemFree_v2(uint64_t p);
CUresult cuMemFree_v2(uint64_t p)
{
    pthread_mutex_lock(&mu);
    for (Alloc **a = &allocs; *a; a = &(*a)->next)
        if ((uint64_t)(uintptr_t)(*a)->p == p) {
            Alloc *x = *a;
            *a = x->next;
            live_allocs--;
            pthread_mutex_unlock(&mu);
            free(x->p);
            free(x);
            return OK;
        }
    pthread_mutex_unlock(&mu);
    return ERR_INVALID_VALUE;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t bytes);
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t bytes)
{
    pthread_mutex_lock(&mu);
    Alloc *a = find(dst, bytes);
    if (a)
        htod++;
    pthread_mutex_unlock(&mu);
    if (!a)
        return ERR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes);
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes)
{
    pthread_mutex_lock(&mu);
    Alloc *a = find(src, bytes);
    pthread_mutex_unlock(&mu);
    if (!a)
        return ERR_INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return OK;
}

CUresult cuEventCreate(void **e, unsigned flags);
CUresult cuEventCreate(void **e, unsigned flags)
{
    (void)flags;
    *e = malloc(1);
    return *e ? OK : ERR_INVALID_VALUE;
}
CUresult cuEventRecord(void *e, Stream *s);
CUresult cuEventRecord(void *e, Stream *s)
{
    (void)e, (void)s;
    return OK;
}
CUresult cuEventSynchronize(void *e);
CUresult cuEventSynchronize(void *e)
{
    (void)e;
    return OK;
}
CUresult cuEventElapsedTime(float *ms, void *a, void *b);
CUresult cuEventElapsedTime(float *ms, void *a, void *b)
{
    (void)a, (void)b;
    *ms = 0.01f;
    return OK;
}
CUresult cuEventDestroy_v2(void *e);
CUresult cuEventDestroy_v2(void *e)
{
    free(e);
    return OK;
}

CUresult cuStreamCreate(Stream **s, unsigned flags);
CUresult cuStreamCreate(Stream **s, unsigned flags)
{
    (void)flags;
    *s = calloc(1, sizeof **s);
    return *s ? OK : ERR_INVALID_VALUE;
}
CUresult cuStreamDestroy_v2(Stream *s);
CUresult cuStreamDestroy_v2(Stream *s)
{
    free(s);
    return OK;
}
CUresult cuStreamBeginCapture_v2(Stream *s, int mode);
CUresult cuStreamBeginCapture_v2(Stream *s, int mode)
{
    (void)mode;
    if (!s || s->capturing)
        return ERR_INVALID_VALUE;
    s->capturing = 1;
    s->failed = 0;
    return OK;
}
CUresult cuStreamEndCapture(Stream *s, void **graph);
CUresult cuStreamEndCapture(Stream *s, void **graph)
{
    *graph = NULL;
    if (!s || !s->capturing)
        return ERR_INVALID_VALUE;
    s->capturing = 0;
    if (s->failed)
        return ERR_CAPTURE_INVALIDATED;
    *graph = malloc(1);
    pthread_mutex_lock(&mu);
    live_graphs++;
    pthread_mutex_unlock(&mu);
    return *graph ? OK : ERR_INVALID_VALUE;
}
CUresult cuStreamIsCapturing(Stream *s, int *status);
CUresult cuStreamIsCapturing(Stream *s, int *status)
{
    *status = s ? s->capturing : 0;
    return OK;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags);
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    (void)graph, (void)flags;
    *exec = malloc(1);
    pthread_mutex_lock(&mu);
    live_execs++;
    pthread_mutex_unlock(&mu);
    return *exec ? OK : ERR_INVALID_VALUE;
}
CUresult cuGraphLaunch(void *exec, Stream *s);
CUresult cuGraphLaunch(void *exec, Stream *s)
{
    (void)exec, (void)s;
    pthread_mutex_lock(&mu);
    graph_launches++;
    pthread_mutex_unlock(&mu);
    return OK;
}
CUresult cuGraphExecDestroy(void *exec);
CUresult cuGraphExecDestroy(void *exec)
{
    free(exec);
    pthread_mutex_lock(&mu);
    live_execs--;
    pthread_mutex_unlock(&mu);
    return OK;
}
CUresult cuGraphDestroy(void *graph);
CUresult cuGraphDestroy(void *graph)
{
    free(graph);
    pthread_mutex_lock(&mu);
    live_graphs--;
    pthread_mutex_unlock(&mu);
    return OK;
}
