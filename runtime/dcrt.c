/* What dcc-generated objects call, and the error codes they return.
 *
 * An object written by `dcc prog.tex --emit=obj` holds its program's table
 * (dietcode/abi.h) and exports thin functions that hand it to dcrt_run
 * (CPU; dcrt_cuda_run in runtime/cuda.c for the GPU): the plan of the call
 * (runtime/plan.c) picks each stage's variant and lays out the workspace,
 * the instruction set is the best one of the object's that this CPU has,
 * and each launch runs its kernel's blocks over a process-wide thread pool
 * (runtime/pool.c), started on first use. These names carry the dcrt_
 * prefix rather than rt_ because they are a binary interface.
 *
 * A code says what kind of failure it was; dcrt_last_error says which: every
 * failing dcrt_ call leaves a one-line message (for a PTX the driver
 * rejects, the JIT's log) in a thread-local buffer, as errno does for the
 * C library.
 */
#include "dietcode/runtime.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *dcrt_error_string(int code)
{
    switch (code) {
    case DCRT_OK: return "success";
    case DCRT_ERR_DIM_RANGE: return "a dim is below its declared lower bound or above the largest value the program accepts";
    case DCRT_ERR_TOO_LARGE: return "sizes too large: a tensor would have more elements than 32-bit indices can address";
    case DCRT_ERR_NULL_POINTER: return "a pointer argument is NULL (a tensor, or the dims or tensors array)";
    case DCRT_ERR_OUT_OF_MEMORY: return "out of memory for the workspace";
    case DCRT_ERR_THREADS: return "cannot start the thread pool";
    case DCRT_ERR_NO_DRIVER: return "no CUDA driver found (libcuda.so.1)";
    case DCRT_ERR_NO_DEVICE: return "no CUDA device";
    case DCRT_ERR_CUDA: return "a CUDA driver call failed";
    case DCRT_ERR_MODULE: return "the kernels could not be loaded";
    case DCRT_ERR_CPU: return "this CPU lacks the instruction sets the kernels were built for";
    case DCRT_ERR_INDEX: return "an index read from a tensor is out of range";
    default: return "unknown error code";
    }
}

/* Room for the JIT's error log (runtime/cuda.c keeps 8 KB of it) and the
 * words around it. */
static _Thread_local char last_error[8192 + 256];

int dcrt_fail(int code, const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg ? msg : dcrt_error_string(code));
    return code;
}

const char *dcrt_last_error(void) { return last_error; }

/* ---- the per-thread workspace ---- */

static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static pthread_key_t ws_key;

typedef struct Workspace {
    void *p;
    size_t bytes;
} Workspace;

static void ws_free(void *v)
{
    Workspace *w = v;
    free(w->p);
    free(w);
}

static void ws_init(void) { pthread_key_create(&ws_key, ws_free); }

void *dcrt_thread_workspace(size_t bytes)
{
    pthread_once(&ws_once, ws_init);
    Workspace *w = pthread_getspecific(ws_key);
    if (!w && (w = calloc(1, sizeof *w)) && pthread_setspecific(ws_key, w) != 0) {
        free(w);
        w = NULL;
    }
    if (w && w->bytes < bytes) {
        free(w->p);
        w->bytes = 0;
        size_t n = (bytes + DCRT_ALIGN - 1) / DCRT_ALIGN * DCRT_ALIGN;
        if ((w->p = aligned_alloc(DCRT_ALIGN, n)))
            w->bytes = n;
    }
    if (!w || w->bytes < bytes) {
        char msg[128];
        snprintf(msg, sizeof msg, "cannot allocate a workspace of %zu bytes", bytes);
        dcrt_fail(DCRT_ERR_OUT_OF_MEMORY, msg);
        return NULL;
    }
    return w->p;
}

/* ---- the CPU's instruction sets ---- */

int dcrt_cpu_level(void)
{
    static _Atomic int level;
    int l = atomic_load(&level);
    if (l)
        return l;
    __builtin_cpu_init();
    l = 1;
    if (__builtin_cpu_supports("sse3") && __builtin_cpu_supports("ssse3") &&
        __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("sse4.2") &&
        __builtin_cpu_supports("popcnt")) {
        l = 2;
        if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
            __builtin_cpu_supports("fma")) {
            l = 3;
            if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vl"))
                l = 4;
        }
    }
    atomic_store(&level, l);
    return l;
}

/* ---- observing launches (profiles, tests) ---- */

static _Atomic(DcrtLaunchHook) hook;
static void *_Atomic hook_ud;

void dcrt_set_launch_hook(DcrtLaunchHook h, void *ud)
{
    atomic_store(&hook_ud, ud);
    atomic_store(&hook, h);
}

DcrtLaunchHook dcrt_launch_hook(void **ud)
{
    *ud = atomic_load(&hook_ud);
    return atomic_load(&hook);
}

/* ---- running a CPU object ---- */

/* The process's pool, held by reference: the process holds one while the
 * pool is current, and every call that runs on it one more, taken under
 * pool_mu and dropped with one atomic decrement when its launches are
 * done. dcrt_set_num_threads swaps a new pool in and drops the process's
 * reference to the old one; whoever drops the last reference (that call,
 * or the last call still running on the old pool) shuts it down. So a
 * change never pulls a pool from under a call in progress, and calls from
 * several threads at once share the current pool (taking turns launch by
 * launch, rt_pool_run). */
typedef struct PoolRef {
    RtPool *pool;
    _Atomic int refs;
} PoolRef;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static PoolRef *current_pool;

static PoolRef *pool_ref_new(int nthreads)
{
    PoolRef *r = malloc(sizeof *r);
    if (r && !(r->pool = rt_pool_new(nthreads))) {
        free(r);
        r = NULL;
    }
    if (r)
        atomic_init(&r->refs, 1);
    return r;
}

static void pool_release(PoolRef *r)
{
    if (r && atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        rt_pool_destroy(r->pool);
        free(r);
    }
}

/* A reference to the process's pool, started on first use: one thread per
 * online core, or DCRT_NUM_THREADS of them. NULL when it cannot start, the
 * last error saying how many threads were asked for and by whom. */
static PoolRef *pool_acquire(void)
{
    pthread_mutex_lock(&pool_mu);
    if (!current_pool) {
        const char *env = getenv("DCRT_NUM_THREADS");
        int n = env ? atoi(env) : 0;
        n = n > 0 && n <= 4096 ? n : 0;
        if (!(current_pool = pool_ref_new(n))) {
            char msg[160];
            if (n)
                snprintf(msg, sizeof msg, "cannot start a thread pool of %d threads "
                         "(DCRT_NUM_THREADS=%s): the system refused a thread", n, env);
            else
                snprintf(msg, sizeof msg, "cannot start the thread pool (one thread per online "
                         "core, %ld): the system refused a thread", sysconf(_SC_NPROCESSORS_ONLN));
            dcrt_fail(DCRT_ERR_THREADS, msg);
        }
    }
    PoolRef *r = current_pool;
    if (r)
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&pool_mu);
    return r;
}

int dcrt_set_num_threads(int n)
{
    if (n < 0 || n > 4096)
        return dcrt_fail(DCRT_ERR_THREADS, "the number of threads must be 0..4096");
    PoolRef *fresh = pool_ref_new(n);
    if (!fresh)
        return dcrt_fail(DCRT_ERR_THREADS, "cannot start the thread pool");
    pthread_mutex_lock(&pool_mu);
    PoolRef *old = current_pool;
    current_pool = fresh;
    pthread_mutex_unlock(&pool_mu);
    pool_release(old);
    return DCRT_OK;
}

typedef struct Job {
    DcrtKernelFn fn;
    const int64_t *dims;
    float *const *bufs;
} Job;

static void run_chunk(void *ctx, int64_t begin, int64_t end)
{
    const Job *j = ctx;
    j->fn(j->dims, j->bufs, begin, end);
}

/* "NAME: WHAT is NULL" as the calling thread's last error. */
static int null_argument(const DcrtProgram *p, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s%s%s is NULL", p ? p->name : "", p ? ": " : "", what);
    return dcrt_fail(DCRT_ERR_NULL_POINTER, msg);
}

int dcrt_check_call(const DcrtProgram *p, const int64_t *dims, const void *tensors)
{
    if (!p)
        return null_argument(NULL, "the program (DcrtProgram)");
    if (!tensors && p->nparams > 0)
        return null_argument(p, "the tensors array");
    if (!dims && p->ndims > 0)
        return null_argument(p, "the dims array");
    return DCRT_OK;
}

int dcrt_check_params(const DcrtProgram *p, const void *const *tensors)
{
    if (!p || (!tensors && p->nparams > 0))
        return dcrt_check_call(p, NULL, tensors); /* checks p, then the array */
    for (int i = 0; i < p->nparams; i++)
        if (!tensors[i]) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s: the pointer to tensor %s is NULL", p->name,
                     p->buffers[p->params[i]].name);
            return dcrt_fail(DCRT_ERR_NULL_POINTER, msg);
        }
    return DCRT_OK;
}

/* The level whose kernels objects run: this CPU's, or DCRT_CPU_LEVEL's
 * when lower; read once, so that every call of a process picks the same
 * program (its workspace size included). */
static int run_level(void)
{
    static _Atomic int cached;
    int level = atomic_load(&cached);
    if (level)
        return level;
    level = dcrt_cpu_level();
    const char *e = getenv("DCRT_CPU_LEVEL");
    if (e && e[0] >= '1' && e[0] <= '4' && !e[1] && e[0] - '0' < level)
        level = e[0] - '0';
    atomic_store(&cached, level);
    return level;
}

const DcrtProgram *dcrt_cpu_program(const DcrtProgram *p, int *isa)
{
    /* a GPU program, or a table of another ABI (which has no next: the
     * plan refuses it with a message) */
    if (p && (p->nisas == 0 || p->abi != DCRT_ABI_VERSION))
        return p;
    int level = run_level();
    for (; p; p = p->next)
        for (int i = 0; i < p->nisas; i++)
            if (p->isa_levels[i] <= level) {
                if (isa)
                    *isa = i;
                return p;
            }
    return NULL;
}

/* "this CPU lacks ..." for p's chain, as the calling thread's last error. */
static int no_isa(const DcrtProgram *p)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "%s: this CPU (x86-64 level %d) lacks the instruction sets "
                                      "the kernels were built for (",
                     p->name, run_level());
    const char *sep = "";
    for (const DcrtProgram *q = p; q; q = q->next)
        for (int i = 0; i < q->nisas && n < (int)sizeof msg; i++, sep = ", ")
            n += snprintf(msg + n, sizeof msg - (size_t)n, "%s%s", sep, q->isa_names[i]);
    if (n < (int)sizeof msg)
        snprintf(msg + n, sizeof msg - (size_t)n, ")");
    return dcrt_fail(DCRT_ERR_CPU, msg);
}

/* The buffer pointers of a call: parameters, then the workspace's. */
float **dcrt_bind_buffers(const DcrtProgram *p, const DcrtPlan *pl, void *const *tensors,
                          char *workspace)
{
    float **bufs = calloc((size_t)p->nbuffers + 1, sizeof *bufs);
    if (!bufs) {
        dcrt_fail(DCRT_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    for (int i = 0; i < p->nparams; i++)
        bufs[p->params[i]] = tensors[i];
    for (int i = 0; i < p->nbuffers; i++) {
        if (pl->offset[i] >= 0)
            bufs[i] = (float *)(workspace + pl->offset[i]);
        if (p->buffers[i].kind == DCRT_BUF_CONST) /* kernels only read it */
            bufs[i] = (float *)(uintptr_t)p->buffers[i].data;
    }
    return bufs;
}

/* The gathers' error record of a call (DCRT_BUF_CHECK), or NULL. */
static int64_t *index_record(const DcrtProgram *p, float *const *bufs)
{
    int i = dcrt_index_buffer(p);
    return i >= 0 ? (int64_t *)bufs[i] : NULL;
}

void dcrt_index_reset(const DcrtProgram *p, float *const *bufs)
{
    int64_t *r = index_record(p, bufs);
    if (r)
        memset(r, 0, 4 * sizeof *r);
}

int dcrt_index_check(const DcrtProgram *p, const int64_t *dims, float *const *bufs)
{
    const int64_t *r = index_record(p, bufs);
    return r ? dcrt_index_report(p, dims, r) : DCRT_OK;
}

int dcrt_index_buffer(const DcrtProgram *p)
{
    for (int i = 0; i < p->nbuffers; i++)
        if (p->buffers[i].kind == DCRT_BUF_CHECK)
            return i;
    return -1;
}

int dcrt_index_report(const DcrtProgram *p, const int64_t *dims, const int64_t *r)
{
    if (r[0] == 0)
        return DCRT_OK;
    int64_t axis = DCRT_INDEX_AXIS(r[0]), t = DCRT_INDEX_TENSOR(r[0]), out = DCRT_INDEX_OUT(r[0]);
    if (t >= p->nbuffers || out >= p->nbuffers)
        return dcrt_fail(DCRT_ERR_INDEX, "an index read from a tensor is out of range");
    const DcrtBuffer *o = &p->buffers[out];
    int64_t ext[16];
    int rank = o->rank < 16 ? o->rank : 16;
    for (int j = 0; j < rank; j++) {
        int32_t ovf = 0;
        ext[j] = p->size(p->size_ctx, o->extents + j, dims, &ovf);
    }
    char what[448], msg[512];
    dcrt_index_message(what, sizeof what, p->buffers[t].name, (int)axis, r[1], r[2], o->name, rank,
                       ext, r[3]);
    snprintf(msg, sizeof msg, "%s: %s", p->name, what);
    return dcrt_fail(DCRT_ERR_INDEX, msg);
}

void dcrt_index_message(char *buf, size_t n, const char *tensor, int axis, int64_t value,
                        int64_t extent, const char *out, int rank, const int64_t *ext,
                        int64_t pos)
{
    int64_t coord[16];
    rank = rank < 16 ? rank : 16;
    for (int j = rank - 1; j >= 0; j--) {
        coord[j] = ext[j] > 0 ? pos % ext[j] : 0;
        pos = ext[j] > 0 ? pos / ext[j] : 0;
    }
    int at = snprintf(buf, n, "index %lld of %s on axis %d is out of range %lld..%lld (computing %s[",
                      (long long)value, tensor, axis, -(long long)extent, (long long)extent - 1, out);
    for (int j = 0; j < rank && at >= 0 && (size_t)at < n; j++)
        at += snprintf(buf + at, n - (size_t)at, j ? ", %lld" : "%lld", (long long)coord[j]);
    if (at >= 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, "])");
}

int dcrt_run(const DcrtProgram *p, const int64_t *dims, void *const *tensors, void *workspace)
{
    int rc = dcrt_check_call(p, dims, tensors);
    if (rc != DCRT_OK)
        return rc;
    int isa = 0;
    const DcrtProgram *run = dcrt_cpu_program(p, &isa);
    if (!run)
        return no_isa(p);
    p = run;
    DcrtPlan *pl = dcrt_plan_new(p);
    if (!pl)
        return DCRT_ERR_OUT_OF_MEMORY;
    rc = dcrt_plan(p, dims, pl);
    if (rc == DCRT_OK)
        rc = dcrt_check_params(p, (const void *const *)tensors);
    if (rc == DCRT_OK && !workspace && pl->workspace_bytes > 0 &&
        !(workspace = dcrt_thread_workspace((size_t)pl->workspace_bytes)))
        rc = DCRT_ERR_OUT_OF_MEMORY;
    float **bufs = rc == DCRT_OK ? dcrt_bind_buffers(p, pl, tensors, workspace) : NULL;
    if (rc == DCRT_OK && !bufs)
        rc = DCRT_ERR_OUT_OF_MEMORY;
    PoolRef *workers = rc == DCRT_OK ? pool_acquire() : NULL;
    if (rc == DCRT_OK && !workers)
        rc = DCRT_ERR_THREADS; /* pool_acquire said why */
    void *ud;
    DcrtLaunchHook h = dcrt_launch_hook(&ud);
    if (rc == DCRT_OK)
        dcrt_index_reset(p, bufs);
    for (int i = 0; i < pl->nlaunches && rc == DCRT_OK; i++) {
        const DcrtLaunch *l = &pl->launches[i];
        Job j = {p->fns[(size_t)isa * (size_t)p->nkernels + (size_t)l->kernel], dims, bufs};
        double t0 = h ? rt_now_ms() : 0;
        rt_pool_run(workers->pool, l->blocks, run_chunk, &j);
        if (h)
            h(ud, p, l, rt_now_ms() - t0);
    }
    pool_release(workers);
    if (rc == DCRT_OK)
        rc = dcrt_index_check(p, dims, bufs);
    free(bufs);
    dcrt_plan_free(pl);
    return rc;
}
