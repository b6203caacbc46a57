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
 */
#include "dietcode/runtime.h"

#include <pthread.h>
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

void *dcrt_alloc(int64_t bytes)
{
    if (bytes < 0)
        return NULL;
    size_t n = ((size_t)bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, n ? n : 64);
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
        return DCRT_ERR_THREADS;
    Job j = {fn, dims, bufs};
    rt_pool_run(pool, nblocks, run_chunk, &j);
    return DCRT_OK;
}
