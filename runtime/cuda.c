/* The CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
 *
 * Nothing links -lcuda, so dcc and libdcrt.a build and run on machines
 * without a GPU and say so in one line when one is needed: a missing
 * library, cuInit's CUDA_ERROR_STUB_LIBRARY (34: the toolkit's stub) and
 * CUDA_ERROR_NO_DEVICE (100) all mean "no GPU" (DCRT_ERR_NO_DRIVER or
 * DCRT_ERR_NO_DEVICE). The types come from the toolkit's cuda.h when the
 * build found one (DC_HAVE_CUDA_H), otherwise from the few declarations
 * below, which repeat cuda.h's own. The function pointers live in struct
 * fields not named cuXxx, because cuda.h #defines some of those names to
 * versioned symbols (cuCtxCreate -> cuCtxCreate_v4) that older drivers
 * lack; the symbols are looked up by their exact, versioned names.
 *
 * One device (0) and its primary context, as Triton and PyTorch use, made
 * current on the calling thread by every entry point. Loading a module
 * passes the JIT's error and info log buffers and shows the error log in
 * err when the driver rejects the PTX. A generated object's call of
 * several launches is replayed as a CUDA graph once it repeats (see
 * launch_graph; the graph calls are optional symbols).
 */
#include "dietcode/runtime.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DC_HAVE_CUDA_H
#include <cuda.h>
#else
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef enum CUjit_option_enum {
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
} CUjit_option;
#define CUDA_SUCCESS 0
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_STREAM_NON_BLOCKING 1
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#endif

enum { ERR_STUB_LIBRARY = 34, ERR_NO_DEVICE = 100, LOG_BYTES = 8192 };

static struct {
    pthread_mutex_t mu;
    bool tried;
    int rc;               /* DCRT_OK once ready, else why not */
    char msg[512];
    void *lib;
    CUdevice dev;
    CUcontext ctx;
    CUresult (*init)(unsigned);
    CUresult (*driver_version)(int *);
    CUresult (*error_string)(CUresult, const char **);
    CUresult (*error_name)(CUresult, const char **);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_attr)(int *, int, CUdevice);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*ctx_sync)(void);
    CUresult (*stream_sync)(CUstream);
    CUresult (*module_load)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
    CUresult (*module_function)(CUfunction *, CUmodule, const char *);
    CUresult (*module_unload)(CUmodule);
    CUresult (*func_set_attr)(CUfunction, int, int);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_sync)(CUevent);
    CUresult (*event_elapsed)(float *, CUevent, CUevent);
    CUresult (*event_destroy)(CUevent);
    /* graphs (optional: NULL on drivers without them) */
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*capture_begin)(CUstream, int);
    CUresult (*capture_end)(CUstream, CUgraph *);
    CUresult (*graph_instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*graph_launch)(CUgraphExec, CUstream);
    CUresult (*graph_exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*is_capturing)(CUstream, int *);
    /* the driver is up, every one of those was found, and
     * DCRT_CUDA_GRAPHS is not 0 */
    bool graphs;
} D = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct RtCuModule {
    CUmodule mod;
};

struct RtCuTimer {
    CUevent start, stop;
};

/* "what: CUDA_ERROR_NAME (N): description" into err; returns DCRT_ERR_CUDA. */
static int cu_fail(CUresult r, const char *what, char *err, size_t errlen)
{
    const char *name = NULL, *desc = NULL;
    if (D.error_name)
        D.error_name(r, &name);
    if (D.error_string)
        D.error_string(r, &desc);
    if (err)
        snprintf(err, errlen, "%s: %s (%d): %s", what, name ? name : "CUDA error", (int)r,
                 desc ? desc : "no description");
    return DCRT_ERR_CUDA;
}

#define LOAD(field, sym)                                                                       \
    do {                                                                                       \
        *(void **)(&D.field) = dlsym(D.lib, sym);                                              \
        if (!D.field) {                                                                        \
            snprintf(D.msg, sizeof D.msg, "the CUDA driver (libcuda.so.1) lacks %s", sym);     \
            return DCRT_ERR_NO_DRIVER;                                                         \
        }                                                                                      \
    } while (0)

/* Loads the library and every symbol, initialises device 0's primary
 * context; called once, under D.mu. */
static int open_driver(void)
{
    D.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!D.lib) {
        const char *why = dlerror();
        snprintf(D.msg, sizeof D.msg, "no CUDA driver found (libcuda.so.1 cannot be loaded: %s)",
                 why ? why : "no reason given");
        return DCRT_ERR_NO_DRIVER;
    }
    LOAD(init, "cuInit");
    LOAD(driver_version, "cuDriverGetVersion");
    LOAD(error_string, "cuGetErrorString");
    LOAD(error_name, "cuGetErrorName");
    LOAD(device_get, "cuDeviceGet");
    LOAD(device_attr, "cuDeviceGetAttribute");
    LOAD(primary_retain, "cuDevicePrimaryCtxRetain");
    LOAD(ctx_set_current, "cuCtxSetCurrent");
    LOAD(ctx_sync, "cuCtxSynchronize");
    LOAD(stream_sync, "cuStreamSynchronize");
    LOAD(module_load, "cuModuleLoadDataEx");
    LOAD(module_function, "cuModuleGetFunction");
    LOAD(module_unload, "cuModuleUnload");
    LOAD(func_set_attr, "cuFuncSetAttribute");
    LOAD(launch, "cuLaunchKernel");
    LOAD(mem_alloc, "cuMemAlloc_v2");
    LOAD(mem_free, "cuMemFree_v2");
    LOAD(htod, "cuMemcpyHtoD_v2");
    LOAD(dtoh, "cuMemcpyDtoH_v2");
    LOAD(event_create, "cuEventCreate");
    LOAD(event_record, "cuEventRecord");
    LOAD(event_sync, "cuEventSynchronize");
    LOAD(event_elapsed, "cuEventElapsedTime");
    LOAD(event_destroy, "cuEventDestroy_v2");
    /* graphs are optional: without them every call launches directly */
    *(void **)(&D.stream_create) = dlsym(D.lib, "cuStreamCreate");
    *(void **)(&D.stream_destroy) = dlsym(D.lib, "cuStreamDestroy_v2");
    *(void **)(&D.capture_begin) = dlsym(D.lib, "cuStreamBeginCapture_v2");
    *(void **)(&D.capture_end) = dlsym(D.lib, "cuStreamEndCapture");
    *(void **)(&D.graph_instantiate) = dlsym(D.lib, "cuGraphInstantiateWithFlags");
    *(void **)(&D.graph_launch) = dlsym(D.lib, "cuGraphLaunch");
    *(void **)(&D.graph_exec_destroy) = dlsym(D.lib, "cuGraphExecDestroy");
    *(void **)(&D.graph_destroy) = dlsym(D.lib, "cuGraphDestroy");
    *(void **)(&D.is_capturing) = dlsym(D.lib, "cuStreamIsCapturing");
    const char *env = getenv("DCRT_CUDA_GRAPHS");
    bool graphs = D.stream_create && D.stream_destroy && D.capture_begin && D.capture_end &&
               D.graph_instantiate && D.graph_launch && D.graph_exec_destroy && D.graph_destroy &&
               D.is_capturing && !(env && strcmp(env, "0") == 0);
    CUresult r = D.init(0);
    if ((int)r == ERR_STUB_LIBRARY) {
        snprintf(D.msg, sizeof D.msg,
                 "no CUDA driver found (libcuda.so.1 is the toolkit's stub library)");
        return DCRT_ERR_NO_DRIVER;
    }
    if ((int)r == ERR_NO_DEVICE) {
        snprintf(D.msg, sizeof D.msg, "no CUDA device (the driver found none)");
        return DCRT_ERR_NO_DEVICE;
    }
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "cuInit", D.msg, sizeof D.msg);
    /* DCRT_CUDA_DEVICE=N: device N modulo the devices' count (dcc tune
     * under MPI sets it to the rank's local rank); else device 0 */
    const char *want = getenv("DCRT_CUDA_DEVICE");
    int ordinal = 0, ndev = 0;
    CUresult (*count)(int *);
    *(void **)(&count) = dlsym(D.lib, "cuDeviceGetCount");
    if (want && atoi(want) > 0 && count && count(&ndev) == CUDA_SUCCESS && ndev > 0)
        ordinal = atoi(want) % ndev;
    if ((r = D.device_get(&D.dev, ordinal)) != CUDA_SUCCESS) {
        cu_fail(r, "no CUDA device: cuDeviceGet", D.msg, sizeof D.msg);
        return DCRT_ERR_NO_DEVICE;
    }
    if ((r = D.primary_retain(&D.ctx, D.dev)) != CUDA_SUCCESS)
        return cu_fail(r, "cuDevicePrimaryCtxRetain", D.msg, sizeof D.msg);
    D.graphs = graphs; /* only once the driver is up: D.graphs implies it */
    return DCRT_OK;
}

int rt_cuda_init(char *err, size_t errlen)
{
    pthread_mutex_lock(&D.mu);
    if (!D.tried) {
        D.tried = true;
        D.rc = open_driver();
    }
    int rc = D.rc;
    pthread_mutex_unlock(&D.mu);
    if (rc != DCRT_OK) {
        if (err)
            snprintf(err, errlen, "%s", D.msg);
        return rc;
    }
    CUresult r = D.ctx_set_current(D.ctx);
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuCtxSetCurrent", err, errlen);
}

bool rt_cuda_is_no_gpu(int code) { return code == DCRT_ERR_NO_DRIVER || code == DCRT_ERR_NO_DEVICE; }

int rt_cuda_device_info(RtCudaDeviceInfo *info, char *err, size_t errlen)
{
    int rc = rt_cuda_init(err, errlen);
    if (rc != DCRT_OK)
        return rc;
    CUresult r;
    if ((r = D.driver_version(&info->driver_version)) != CUDA_SUCCESS ||
        (r = D.device_attr(&info->sm_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, D.dev)) !=
            CUDA_SUCCESS ||
        (r = D.device_attr(&info->sm_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, D.dev)) !=
            CUDA_SUCCESS ||
        (r = D.device_attr(&info->nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, D.dev)) != CUDA_SUCCESS)
        return cu_fail(r, "cuDeviceGetAttribute", err, errlen);
    return DCRT_OK;
}

int rt_cuda_load_module(const char *ptx, RtCuModule **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = rt_cuda_init(err, errlen);
    if (rc != DCRT_OK)
        return rc;
    RtCuModule *m = calloc(1, sizeof *m);
    char *log = calloc(2, LOG_BYTES);
    if (!m || !log) {
        free(m);
        free(log);
        if (err)
            snprintf(err, errlen, "out of memory");
        return DCRT_ERR_OUT_OF_MEMORY;
    }
    char *errlog = log, *infolog = log + LOG_BYTES;
    CUjit_option opt[4] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *val[4] = {errlog, (void *)(uintptr_t)(LOG_BYTES - 1), infolog,
                    (void *)(uintptr_t)(LOG_BYTES - 1)};
    CUresult r = D.module_load(&m->mod, ptx, 4, opt, val);
    if (r != CUDA_SUCCESS) {
        char what[LOG_BYTES + 64];
        snprintf(what, sizeof what, "cannot load the PTX (JIT log: %s)",
                 errlog[0] ? errlog : "empty");
        cu_fail(r, what, err, errlen);
        free(m);
        free(log);
        return DCRT_ERR_MODULE;
    }
    free(log);
    *out = m;
    return DCRT_OK;
}

int rt_cuda_get_function(RtCuModule *m, const char *name, RtCuFunction **fn, char *err,
                         size_t errlen)
{
    CUfunction f = NULL;
    CUresult r = D.module_function(&f, m->mod, name);
    *fn = (RtCuFunction *)(void *)f;
    if (r != CUDA_SUCCESS) {
        char what[300];
        snprintf(what, sizeof what, "no kernel %.200s in the module", name);
        return cu_fail(r, what, err, errlen);
    }
    return DCRT_OK;
}

void rt_cuda_unload_module(RtCuModule *m)
{
    if (!m)
        return;
    if (D.module_unload)
        D.module_unload(m->mod);
    free(m);
}

int rt_cuda_allow_dynamic_shared(RtCuFunction *fn, int bytes, char *err, size_t errlen)
{
    CUresult r = D.func_set_attr((CUfunction)(void *)fn,
                                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
    if (r == CUDA_SUCCESS)
        return DCRT_OK;
    char what[100];
    snprintf(what, sizeof what, "cuFuncSetAttribute (%d bytes of dynamic shared memory)", bytes);
    return cu_fail(r, what, err, errlen);
}

int rt_cuda_launch(RtCuFunction *fn, const unsigned grid[3], const unsigned block[3],
                   unsigned shared_bytes, void *stream, void **args, char *err, size_t errlen)
{
    CUresult r = D.launch((CUfunction)(void *)fn, grid[0], grid[1], grid[2], block[0], block[1],
                          block[2], shared_bytes, (CUstream)stream, args, NULL);
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuLaunchKernel", err, errlen);
}

int rt_cuda_sync(char *err, size_t errlen)
{
    CUresult r = D.ctx_sync();
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuCtxSynchronize", err, errlen);
}

int rt_cuda_stream_sync(void *stream, char *err, size_t errlen)
{
    CUresult r = D.stream_sync((CUstream)stream);
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuStreamSynchronize", err, errlen);
}

int rt_cuda_alloc(uint64_t *ptr, size_t bytes, char *err, size_t errlen)
{
    int rc = rt_cuda_init(err, errlen);
    if (rc != DCRT_OK)
        return rc;
    CUdeviceptr p = 0;
    CUresult r = D.mem_alloc(&p, bytes ? bytes : 1);
    *ptr = (uint64_t)p;
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuMemAlloc", err, errlen);
}

void rt_cuda_free(uint64_t ptr)
{
    if (ptr && D.mem_free)
        D.mem_free((CUdeviceptr)ptr);
}

int rt_cuda_copy_to_device(uint64_t dst, const void *src, size_t bytes, char *err, size_t errlen)
{
    CUresult r = D.htod((CUdeviceptr)dst, src, bytes);
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuMemcpyHtoD", err, errlen);
}

int rt_cuda_copy_to_host(void *dst, uint64_t src, size_t bytes, char *err, size_t errlen)
{
    CUresult r = D.dtoh(dst, (CUdeviceptr)src, bytes);
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuMemcpyDtoH", err, errlen);
}

int rt_cuda_timer_new(RtCuTimer **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = rt_cuda_init(err, errlen);
    if (rc != DCRT_OK)
        return rc;
    RtCuTimer *t = calloc(1, sizeof *t);
    if (!t)
        return DCRT_ERR_OUT_OF_MEMORY;
    CUresult r = D.event_create(&t->start, 0);
    if (r == CUDA_SUCCESS && (r = D.event_create(&t->stop, 0)) != CUDA_SUCCESS)
        D.event_destroy(t->start);
    if (r != CUDA_SUCCESS) {
        free(t);
        return cu_fail(r, "cuEventCreate", err, errlen);
    }
    *out = t;
    return DCRT_OK;
}

int rt_cuda_timer_start(RtCuTimer *t, void *stream, char *err, size_t errlen)
{
    CUresult r = D.event_record(t->start, (CUstream)stream);
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "cuEventRecord", err, errlen);
}

int rt_cuda_timer_stop(RtCuTimer *t, void *stream, float *ms, char *err, size_t errlen)
{
    CUresult r = D.event_record(t->stop, (CUstream)stream);
    if (r == CUDA_SUCCESS)
        r = D.event_sync(t->stop);
    if (r == CUDA_SUCCESS)
        r = D.event_elapsed(ms, t->start, t->stop);
    return r == CUDA_SUCCESS ? DCRT_OK : cu_fail(r, "timing with CUDA events", err, errlen);
}

void rt_cuda_timer_destroy(RtCuTimer *t)
{
    if (!t)
        return;
    D.event_destroy(t->start);
    D.event_destroy(t->stop);
    free(t);
}

/* ---- graphs ---- */

static _Atomic long graphs_made, graph_launches;

bool rt_cuda_graphs_available(void) { return rt_cuda_init(NULL, 0) == DCRT_OK && D.graphs; }

void rt_cuda_graph_counts(long *made, long *launched)
{
    *made = atomic_load(&graphs_made);
    *launched = atomic_load(&graph_launches);
}

static int no_graphs(char *err, size_t errlen)
{
    if (err)
        snprintf(err, errlen, "CUDA graphs are not available (a driver before CUDA 11.4, "
                              "or DCRT_CUDA_GRAPHS=0)");
    return DCRT_ERR_CUDA;
}

bool rt_cuda_stream_capturing(void *stream)
{
    int status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
    return D.graphs && D.is_capturing((CUstream)stream, &status) == CUDA_SUCCESS && status != 0;
}

int rt_cuda_capture_begin(void **stream, char *err, size_t errlen)
{
    if (!D.graphs)
        return no_graphs(err, errlen);
    CUstream s = NULL;
    CUresult r = D.stream_create(&s, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "cuStreamCreate", err, errlen);
    if ((r = D.capture_begin(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)) != CUDA_SUCCESS) {
        D.stream_destroy(s);
        return cu_fail(r, "cuStreamBeginCapture", err, errlen);
    }
    *stream = s;
    return DCRT_OK;
}

int rt_cuda_capture_end(void *stream, bool ok, RtCuGraph **g, char *err, size_t errlen)
{
    *g = NULL;
    if (!D.graphs)
        return no_graphs(err, errlen);
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUresult r = D.capture_end((CUstream)stream, &graph);
    const char *what = "cuStreamEndCapture";
    if (r == CUDA_SUCCESS && ok) {
        r = D.graph_instantiate(&exec, graph, 0);
        what = "cuGraphInstantiateWithFlags";
    }
    if (graph)
        D.graph_destroy(graph); /* the executable graph is a copy */
    D.stream_destroy((CUstream)stream);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, what, err, errlen);
    if (exec)
        atomic_fetch_add(&graphs_made, 1);
    *g = (RtCuGraph *)(void *)exec;
    return DCRT_OK;
}

int rt_cuda_graph_launch(RtCuGraph *g, void *stream, char *err, size_t errlen)
{
    if (!D.graphs)
        return no_graphs(err, errlen);
    CUresult r = D.graph_launch((CUgraphExec)(void *)g, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "cuGraphLaunch", err, errlen);
    atomic_fetch_add(&graph_launches, 1);
    return DCRT_OK;
}

void rt_cuda_graph_destroy(RtCuGraph *g)
{
    if (g && D.graph_exec_destroy)
        D.graph_exec_destroy((CUgraphExec)(void *)g);
}

/* ---- what dcc-generated GPU objects call (prog_launch) ----
 * They pass no message buffer: a failure's message goes to dcrt_last_error. */

/* rc, its message err recorded for dcrt_last_error when it is a failure. */
static int recorded(int rc, const char *err) { return rc == DCRT_OK ? rc : dcrt_fail(rc, err); }

/* A loaded program: its module and kernels, cached in the object, and the
 * graphs of its recent calls (runtime/graphs.c). */
typedef struct Loaded {
    RtCuModule *mod;
    pthread_mutex_t graph_mu; /* around a lookup and the launch that follows */
    RtGraphCache *graphs;     /* NULL: out of memory, launch directly */
    bool graphs_failed;       /* a capture failed: launch directly from then on */
    uint64_t *consts;         /* per buffer: a constant's copy on the device, else 0 */
    RtCuFunction *fn[];
} Loaded;

/* The constants' copies on the device, made once when the module loads. */
static int upload_consts(const DcrtProgram *p, Loaded *l, char *err, size_t errlen)
{
    if (!(l->consts = calloc((size_t)p->nbuffers + 1, sizeof *l->consts)))
        return DCRT_ERR_OUT_OF_MEMORY;
    int64_t *zeros = calloc((size_t)p->ndims + 1, sizeof *zeros); /* extents use no dim */
    int rc = zeros ? DCRT_OK : DCRT_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < p->nbuffers && rc == DCRT_OK; i++) {
        const DcrtBuffer *b = &p->buffers[i];
        if (b->kind != DCRT_BUF_CONST || !b->data)
            continue; /* a constant no kernel reads has no copy */
        size_t bytes = (size_t)rt_dtype_size(b->dtype);
        for (int j = 0; j < b->rank; j++) {
            int32_t ovf = 0;
            bytes *= (size_t)p->size(p->size_ctx, b->extents + j, zeros, &ovf);
        }
        rc = rt_cuda_alloc(&l->consts[i], bytes ? bytes : 1, err, errlen);
        if (rc == DCRT_OK)
            rc = rt_cuda_copy_to_device(l->consts[i], b->data, bytes, err, errlen);
    }
    free(zeros);
    return rc;
}

enum { GRAPH_SLOTS = 8 };

static void destroy_graph(void *g) { rt_cuda_graph_destroy(g); }

/* Frees l (NULL is fine) and everything on the device it holds. */
static void loaded_free(const DcrtProgram *p, Loaded *l)
{
    if (!l)
        return;
    rt_graph_cache_free(l->graphs);
    for (int i = 0; l->consts && i < p->nbuffers; i++)
        rt_cuda_free(l->consts[i]);
    free(l->consts);
    rt_cuda_unload_module(l->mod);
    pthread_mutex_destroy(&l->graph_mu);
    free(l);
}

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

/* The program's kernels, its PTX loaded on first use (and cached in the
 * object's module_cache); the context made current on this thread. */
static int load_kernels(const DcrtProgram *p, Loaded **out)
{
    char err[LOG_BYTES + 256] = "out of memory";
    pthread_mutex_lock(&load_mu);
    int rc = DCRT_OK;
    Loaded *l = *p->module_cache;
    if (!l) {
        rc = rt_cuda_init(err, sizeof err);
        if (rc == DCRT_OK && !(l = calloc(1, sizeof *l + (size_t)p->nkernels * sizeof l->fn[0])))
            rc = DCRT_ERR_OUT_OF_MEMORY;
        if (l)
            pthread_mutex_init(&l->graph_mu, NULL);
        if (rc == DCRT_OK)
            rc = rt_cuda_load_module(p->ptx, &l->mod, err, sizeof err);
        for (int i = 0; i < p->nkernels && rc == DCRT_OK; i++)
            rc = rt_cuda_get_function(l->mod, p->kernels[i].name, &l->fn[i], err, sizeof err);
        /* above 48 KB a kernel must be allowed its dynamic shared memory */
        for (int i = 0; i < p->nkernels && rc == DCRT_OK; i++)
            if (p->kernels[i].shared_bytes > 0)
                rc = rt_cuda_allow_dynamic_shared(l->fn[i], p->kernels[i].shared_bytes, err,
                                                  sizeof err);
        if (rc == DCRT_OK)
            rc = upload_consts(p, l, err, sizeof err);
        if (rc == DCRT_OK) {
            l->graphs = rt_graph_cache_new(GRAPH_SLOTS, destroy_graph);
            *p->module_cache = l;
        } else {
            loaded_free(p, l);
            l = NULL;
        }
    }
    pthread_mutex_unlock(&load_mu);
    if (rc != DCRT_OK)
        return recorded(rc, err);
    *out = l;
    return recorded(rt_cuda_init(err, sizeof err), err); /* the context current on this thread */
}

void dcrt_cuda_release(const DcrtProgram *p)
{
    if (!p || !p->module_cache)
        return;
    pthread_mutex_lock(&load_mu);
    Loaded *l = *p->module_cache;
    *p->module_cache = NULL;
    pthread_mutex_unlock(&load_mu);
    if (l)
        (void)rt_cuda_init(NULL, 0); /* the context current on this thread */
    loaded_free(p, l);
}

/* The per-thread device workspace (freed at thread exit). */
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static pthread_key_t ws_key;

typedef struct DevWorkspace {
    uint64_t ptr;
    size_t bytes;
} DevWorkspace;

static void ws_free(void *v)
{
    DevWorkspace *w = v;
    rt_cuda_free(w->ptr);
    free(w);
}

static void ws_init(void) { pthread_key_create(&ws_key, ws_free); }

static int thread_workspace(size_t bytes, uint64_t *ptr)
{
    char err[512] = "out of memory";
    pthread_once(&ws_once, ws_init);
    DevWorkspace *w = pthread_getspecific(ws_key);
    if (!w && (w = calloc(1, sizeof *w)) && pthread_setspecific(ws_key, w) != 0) {
        free(w);
        w = NULL;
    }
    if (!w)
        return recorded(DCRT_ERR_OUT_OF_MEMORY, err);
    if (w->bytes < bytes) {
        rt_cuda_free(w->ptr);
        w->ptr = 0;
        w->bytes = 0;
        int rc = rt_cuda_alloc(&w->ptr, bytes, err, sizeof err);
        if (rc != DCRT_OK)
            return recorded(rc == DCRT_ERR_CUDA ? DCRT_ERR_OUT_OF_MEMORY : rc, err);
        w->bytes = bytes;
    }
    *ptr = w->ptr;
    return DCRT_OK;
}

/* A call's kernel arguments: the dims' values and every buffer's device
 * address (0 for one without memory), and room for one launch's list. */
typedef struct Args {
    int64_t *dimv;
    uint64_t *dptr;
    void **args;
} Args;

/* The plan's launches on stream, one by one, each told to the launch hook;
 * each kernel takes every dim, then its own buffers (DcrtKernel.args: the
 * NVPTX kernel ABI). A failure is recorded for dcrt_last_error only when
 * record: a launch into a graph's capture that fails is retried directly. */
static int launch_each(const DcrtProgram *p, const DcrtPlan *pl, const Loaded *l, const Args *a,
                       void *stream, bool record)
{
    char err[512];
    void *ud;
    DcrtLaunchHook h = dcrt_launch_hook(&ud);
    int rc = DCRT_OK;
    for (int i = 0; i < p->ndims; i++)
        a->args[i] = &a->dimv[i];
    for (int i = 0, before = 0; i < pl->nlaunches && rc == DCRT_OK; i++) {
        const DcrtLaunch *ln = &pl->launches[i];
        const DcrtKernel *k = &p->kernels[ln->kernel];
        for (int j = 0; j < k->nargs; j++)
            a->args[p->ndims + j] = &a->dptr[p->kernel_args[k->args + j]];
        for (int j = k->nargs; j < before; j++) /* none of the last launch's left over */
            a->args[p->ndims + j] = NULL;
        before = k->nargs;
        unsigned grid[3] = {(unsigned)ln->blocks, 1, 1}, block[3] = {(unsigned)ln->threads, 1, 1};
        rc = rt_cuda_launch(l->fn[ln->kernel], grid, block, (unsigned)k->shared_bytes, stream,
                            a->args, err, sizeof err);
        if (record)
            rc = recorded(rc, err);
        if (h)
            h(ud, p, ln, NAN);
    }
    return rc;
}

/* The plan's launches as one graph launch when a call with the same key
 * (dims and buffer addresses) came before: the second such call captures
 * them into a graph, later ones replay it (runtime/graphs.c). A capture
 * that fails leaves the program launching directly. */
static int launch_graph(const DcrtProgram *p, const DcrtPlan *pl, Loaded *l, const Args *a,
                        const uint64_t *key, int nkey, void *stream)
{
    char err[512];
    pthread_mutex_lock(&l->graph_mu);
    bool seen = false;
    RtCuGraph *g = NULL;
    if (!l->graphs_failed)
        g = rt_graph_cache_lookup(l->graphs, key, nkey, &seen);
    if (!g && seen) {
        void *cs = NULL;
        if (rt_cuda_capture_begin(&cs, err, sizeof err) == DCRT_OK) {
            int lrc = launch_each(p, pl, l, a, cs, false);
            rt_cuda_capture_end(cs, lrc == DCRT_OK, &g, err, sizeof err);
        }
        if (g)
            rt_graph_cache_store(l->graphs, key, nkey, g);
        else
            l->graphs_failed = true;
    }
    int rc = g ? recorded(rt_cuda_graph_launch(g, stream, err, sizeof err), err)
               : launch_each(p, pl, l, a, stream, true);
    pthread_mutex_unlock(&l->graph_mu);
    return rc;
}

int dcrt_cuda_run(const DcrtProgram *p, const int64_t *dims, const uint64_t *tensors,
                  uint64_t workspace, void *stream)
{
    char err[512];
    int rc = dcrt_check_call(p, dims, tensors);
    if (rc != DCRT_OK)
        return rc;
    DcrtPlan *pl = dcrt_plan_new(p);
    if (!pl)
        return DCRT_ERR_OUT_OF_MEMORY;
    size_t nb = (size_t)p->nbuffers + 1, nd = (size_t)p->ndims + 1;
    /* the call's key for its graph (launch_graph): the dims' values, then
     * every buffer's address (dptr, the buffers' kernel arguments) */
    uint64_t *key = calloc(nd + nb, sizeof *key);
    int64_t *dimv = calloc(nd, sizeof *dimv);
    void **args = calloc(nd + nb, sizeof *args);
    if (!key || !dimv || !args) {
        free(key);
        free(dimv);
        free(args);
        dcrt_plan_free(pl);
        return dcrt_fail(DCRT_ERR_OUT_OF_MEMORY, NULL);
    }
    uint64_t *dptr = key + p->ndims;
    Args a = {dimv, dptr, args};
    Loaded *l = NULL;
    bool own = false;
    rc = dcrt_plan(p, dims, pl);
    for (int i = 0; i < p->nparams && rc == DCRT_OK; i++)
        if (!tensors[i]) {
            snprintf(err, sizeof err, "%s: the pointer to tensor %s is 0", p->name,
                     p->buffers[p->params[i]].name);
            rc = dcrt_fail(DCRT_ERR_NULL_POINTER, err);
        }
    if (rc == DCRT_OK)
        rc = load_kernels(p, &l);
    if (rc == DCRT_OK && !workspace && pl->workspace_bytes > 0) {
        rc = thread_workspace((size_t)pl->workspace_bytes, &workspace);
        own = true;
    }
    for (int i = 0; i < p->ndims; i++) {
        dimv[i] = dims[i];
        key[i] = (uint64_t)dims[i];
    }
    for (int i = 0; i < p->nparams; i++)
        dptr[p->params[i]] = tensors[i];
    for (int i = 0; i < p->nbuffers; i++) {
        if (pl->offset[i] >= 0)
            dptr[i] = workspace + (uint64_t)pl->offset[i];
        if (p->buffers[i].kind == DCRT_BUF_CONST && l)
            dptr[i] = l->consts[i];
    }
    /* the gathers' error record: zeroed before the launches (a call before
     * this one that has one has synchronised), read back after them, so a
     * program with checked gathers waits for its kernels; inside a caller's
     * own stream capture nothing can be read back: its indices go unchecked
     * (an index out of range reads row 0) */
    int rec = rt_cuda_stream_capturing(stream) ? -1 : dcrt_index_buffer(p);
    int64_t record[4] = {0, 0, 0, 0};
    if (rc == DCRT_OK && rec >= 0)
        rc = recorded(rt_cuda_copy_to_device(dptr[rec], record, sizeof record, err, sizeof err),
                      err);
    /* several launches go as one graph (a launch hook sees each launch
     * instead, and a caller capturing its own stream captures them) */
    void *ud;
    if (rc == DCRT_OK && pl->nlaunches > 1 && D.graphs && l->graphs && !dcrt_launch_hook(&ud) &&
        !rt_cuda_stream_capturing(stream)) {
        rc = launch_graph(p, pl, l, &a, key, p->ndims + p->nbuffers, stream);
    } else if (rc == DCRT_OK) {
        rc = launch_each(p, pl, l, &a, stream, true);
    }
    /* the thread's own workspace is free for the next call only when this
     * one is done */
    if ((own || rec >= 0) && rc == DCRT_OK)
        rc = recorded(rt_cuda_stream_sync(stream, err, sizeof err), err);
    if (rec >= 0 && rc == DCRT_OK &&
        (rc = recorded(rt_cuda_copy_to_host(record, dptr[rec], sizeof record, err, sizeof err),
                       err)) == DCRT_OK)
        rc = dcrt_index_report(p, dims, record);
    free(key);
    free(args);
    free(dimv);
    dcrt_plan_free(pl);
    return rc;
}
