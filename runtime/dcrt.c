/* The entry points that dcc-generated objects call (AOT output), and the
 * error codes they return to their callers.
 *
 * An object written by `dcc prog.tex --emit=obj` exports prog_run (CPU) or
 * prog_launch (GPU) and calls back into this file: dcrt_alloc/dcrt_free for
 * materialised intermediates (softmax's row maxima, say) and
 * dcrt_parallel_for to run a kernel's blocks over a process-wide thread
 * pool (runtime/pool.c), started on first use. These names carry the dcrt_
 * prefix rather than rt_ because they are a binary interface: generated
 * code and the generated header name them, so they must not change.
 *
 * A code says what kind of failure it was; dcrt_last_error says which: every
 * failing dcrt_ call, and the generated checks through dcrt_fail, leave a
 * one-line message (for a PTX the driver rejects, the JIT's log) in a
 * thread-local buffer, as errno does for the C library.
 */
#include "dietcode/runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static RtPool *pool;

static void pool_init(void) { pool = rt_pool_new(0); }

const char *dcrt_error_string(int code)
{
    switch (code) {
    case DCRT_OK: return "success";
    case DCRT_ERR_DIM_RANGE: return "a dim is below its declared lower bound or above the largest value the program accepts";
    case DCRT_ERR_TOO_LARGE: return "sizes too large: a tensor would have more elements than 32-bit indices can address";
    case DCRT_ERR_NULL_POINTER: return "a tensor pointer is NULL";
    case DCRT_ERR_OUT_OF_MEMORY: return "out of memory for intermediate buffers";
    case DCRT_ERR_THREADS: return "cannot start the thread pool";
    case DCRT_ERR_NO_DRIVER: return "no CUDA driver found (libcuda.so.1)";
    case DCRT_ERR_NO_DEVICE: return "no CUDA device";
    case DCRT_ERR_CUDA: return "a CUDA driver call failed";
    case DCRT_ERR_MODULE: return "the CUDA driver could not load the kernels' PTX";
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

void *dcrt_alloc(int64_t bytes)
{
    void *p = NULL;
    if (bytes >= 0) {
        size_t n = ((size_t)bytes + 63) & ~(size_t)63;
        p = aligned_alloc(64, n ? n : 64);
    }
    if (!p) {
        char msg[128];
        snprintf(msg, sizeof msg, "cannot allocate %lld bytes for an intermediate tensor",
                 (long long)bytes);
        dcrt_fail(DCRT_ERR_OUT_OF_MEMORY, msg);
    }
    return p;
}

void dcrt_free(void *p) { free(p); }

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

int dcrt_parallel_for(int64_t nblocks, DcrtKernelFn fn, const int64_t *dims, float *const *bufs)
{
    pthread_once(&pool_once, pool_init);
    if (!pool)
        return dcrt_fail(DCRT_ERR_THREADS, "cannot start the thread pool (one thread per online core)");
    Job j = {fn, dims, bufs};
    rt_pool_run(pool, nblocks, run_chunk, &j);
    return DCRT_OK;
}
