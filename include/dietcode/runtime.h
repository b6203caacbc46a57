/* dietcode/runtime.h: the table of contents of libdcrt.a.
 *
 * The runtime is what compiled programs and their drivers link with: file
 * I/O for tensors, input generation, and (in later sections) the hooks that
 * load and launch kernels. It stands alone: it includes only the C library
 * and dietcode/abi.h (the contract with generated code), so a user can link
 * libdcrt.a without the compiler. Public names carry the rt_ prefix (dcrt_
 * for what generated objects call). Functions that can fail
 * return 0 or -1 and write a one-line message to a caller's buffer; they
 * never print and never exit.
 */
#ifndef DIETCODE_RUNTIME_H
#define DIETCODE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dietcode/abi.h"

/* runtime/npy.c */
#define RT_NPY_MAX_RANK 8

/* A dense tensor in C (row-major) order of elements of type dtype (DCRT_F32
 * when zeroed). rank 0 is a scalar with one element; shape[rank..] is
 * unused. data is malloc'd and owned by the array. */
typedef struct RtArray {
    int rank;
    int64_t shape[RT_NPY_MAX_RANK];
    void *data; /* release with rt_array_free */
    int32_t dtype; /* DCRT_F32, _I32, _I64, _BOOL */
} RtArray;

/* Bytes of one element of type dtype (0 if it is none). */
int rt_dtype_size(int32_t dtype);
/* numpy's name of the type: "float32", "int32", "int64", "bool". */
const char *rt_dtype_name(int32_t dtype);

/* Reads a .npy file in C order, format version 1.0, 2.0 or 3.0, of
 * little-endian float32 ('<f4'), int32 ('<i4'), int64 ('<i8') or bool
 * ('|b1'). On failure *out is zeroed (safe to free) and err
 * holds a one-line message starting with the path. err may be NULL. */
int rt_npy_read(const char *path, RtArray *out, char *err, size_t errlen);
/* Writes a as a version 1.0 .npy file (2.0 if the header would not fit) with
 * the header numpy itself writes, as one output of rt_out_* below: on
 * failure any file already at path is untouched and nothing is left behind. */
int rt_npy_write(const char *path, const RtArray *a, char *err, size_t errlen);
/* The preamble and header rt_npy_write writes for a into buf; its length,
 * or 0 if a's rank or shape is out of range. */
#define RT_NPY_HEAD_MAX 512
size_t rt_npy_header(const RtArray *a, char buf[RT_NPY_HEAD_MAX]);
void rt_array_free(RtArray *a); /* frees data, zeroes *a; NULL is fine */
/* Product of the shape (1 for rank 0); -1 if the rank or a dimension is out
 * of range or the byte size would overflow int64_t. */
int64_t rt_array_numel(const RtArray *a);

/* runtime/compare.c: whether a result matches the reference (dcc run
 * --check, the tests): finite values within 1e-5 * (scale + 1) + 1e-3 *
 * |r| (scale: the largest finite |r|), infinities exactly with their sign,
 * NaN only where the reference has NaN. */
typedef struct RtCompare {
    int64_t nbad;   /* elements that do not match */
    int64_t first;  /* the first of them (flat index), or -1 */
    double max_abs; /* the largest |out - ref| where both are finite */
} RtCompare;
RtCompare rt_compare(const float *out, const float *ref, int64_t n);
/* The same for n elements of type dtype: integers and bools exactly. */
RtCompare rt_compare_elems(int32_t dtype, const void *out, const void *ref, int64_t n);
/* Element i of an array of type dtype, as a double (to print it). */
double rt_elem(int32_t dtype, const void *p, int64_t i);

/* runtime/infile.c: files read (programs, .npy inputs, records, shapes).
 * Opens path for reading if it is a regular file: a FIFO, device, socket or
 * directory is refused at once (opened with O_NONBLOCK, so nothing can hang
 * the open). NULL with errno kept (ENOENT for a missing file) and a
 * one-line message starting with path in err (err may be NULL). */
FILE *rt_open_read(const char *path, char *err, size_t errlen);

/* runtime/outfile.c: output files written all or nothing.
 *
 * rt_out_add resolves path (symlinks are followed: their targets are
 * written, the links stay) and writes head then data to a temporary beside
 * it (flushed to disk); rt_out_commit renames every temporary over its
 * target, so a failure before it changes no file, and a rename that fails
 * (or rt_out_abandon during the commit) puts back the targets renamed
 * before it from backups kept as hard links; only a process killed
 * outright between two renames can leave some outputs new and others old
 * (runtime/outfile.c says exactly what is guaranteed). A path that exists and is not a regular file
 * (a device, a FIFO) is written in place by rt_out_commit, never replaced,
 * and so is a descriptor the process has open (- and /dev/stdout for
 * standard output, /dev/stderr, /dev/fd/N: where it stands); those are outside that guarantee, and their
 * buffers must live until rt_out_commit. A directory, a path that is also an input
 * (rt_out_input: the same file, by device and inode) and two outputs that
 * are one file are refused. Errors start with the path as given;
 * rt_out_free removes temporaries not committed. */
typedef struct RtOutFiles RtOutFiles;
RtOutFiles *rt_out_new(void); /* NULL: out of memory */
int rt_out_input(RtOutFiles *o, const char *path); /* a file no output may be */
/* For a file written by other means (the records a tune appends to): -1
 * and the message rt_out_add gives when path is one of o's inputs. */
int rt_out_check(const RtOutFiles *o, const char *path, char *err, size_t errlen);
int rt_out_add(RtOutFiles *o, const char *path, const void *head, size_t hlen, const void *data,
               size_t len, char *err, size_t errlen);
int rt_out_commit(RtOutFiles *o, char *err, size_t errlen);
/* Whether path is written in place, as a stream: - (standard output), a
 * descriptor name, or an existing device, FIFO or socket. No other file
 * name is derived from such a path (dcc -o /dev/null writes no
 * /dev/null.h). */
bool rt_out_is_stream(const char *path);
void rt_out_free(RtOutFiles *o);
/* For a signal handler: unlinks o's temporaries and nothing else
 * (async-signal-safe; rt_out_free still owns the memory). */
void rt_out_abandon(const RtOutFiles *o);

/* runtime/clock.c */
/* Milliseconds on the monotonic clock (an arbitrary origin): for timing. */
double rt_now_ms(void);

/* runtime/heap.c */
/* Gives the heap memory freed so far back to the system (glibc; elsewhere
 * nothing): after a large compile, whose transient memory would stay. */
void rt_heap_trim(void);

/* runtime/rng.c */
/* Fills out[0..n) with floats uniform in [-1, 1), multiples of 2^-23,
 * determined by (seed, stream) alone; a shorter fill is a prefix of a longer
 * one. Distinct streams give independent sequences from the same seed. */
void rt_rng_fill(uint64_t seed, uint64_t stream, float *out, size_t n);
/* The same for n elements of type dtype (DCRT_*): floats as above, integers
 * uniform in -2..13 (small indices, and negative ones, which count from
 * the end), bools 0 or 1. */
void rt_rng_fill_elems(uint64_t seed, uint64_t stream, int32_t dtype, void *out, size_t n);
/* 64-bit FNV-1a of a NUL-terminated string: a stream id from a tensor name. */
uint64_t rt_rng_hash(const char *s);

/* runtime/pool.c */
/* A small pool of worker threads for data-parallel loops (the CPU target
 * runs a kernel's blocks over it). Workers have 16 MB stacks, since kernels
 * keep their staging buffers on the stack. */
typedef struct RtPool RtPool;
/* nthreads: how many threads run a loop, the caller included (nthreads - 1
 * workers are started); 0 means one per online core. NULL on failure. */
RtPool *rt_pool_new(int nthreads);
int rt_pool_nthreads(const RtPool *p);
/* Calls fn(ctx, begin, end) on disjoint chunks covering [0, n), on the
 * workers and the calling thread, chunks handed out dynamically; returns
 * when all are done. Calls from several threads take turns. */
void rt_pool_run(RtPool *p, int64_t n, void (*fn)(void *ctx, int64_t begin, int64_t end),
                 void *ctx);
void rt_pool_destroy(RtPool *p); /* joins the workers; NULL is fine */

/* runtime/dcrt.c: what dcc-generated objects call (AOT output); the error
 * codes and the program table are in dietcode/abi.h. */
/* A static, one-line description of a code (never NULL). */
const char *dcrt_error_string(int code);
/* Which failure it was: the message of the calling thread's most recent
 * failing call into libdcrt.a, generated prog_run / prog_launch included
 * (the dim out of range, the driver's error, the JIT's log for PTX the
 * driver rejects: then several lines). "" before any failure. Like errno,
 * a later successful call leaves it as it was: read it right after a call
 * returned a code other than DCRT_OK. Valid until the thread's next call. */
const char *dcrt_last_error(void);
/* Records msg (NULL: dcrt_error_string(code)) as the calling thread's last
 * error and returns code. */
int dcrt_fail(int code, const char *msg);
/* Runs a CPU program: the plan for dims, the object's best instruction set
 * this CPU has (the first of p's, else of p->next's, ...: dcrt_cpu_program),
 * each launch's blocks over a process-wide pool (one thread
 * per online core). tensors: the entry's arguments (p->params: inputs, then
 * outputs); workspace: at least dcrt_workspace_size bytes, DCRT_ALIGN
 * aligned, or NULL for one libdcrt keeps per thread. DCRT_OK or a code
 * (DCRT_ERR_NULL_POINTER for a NULL program, dims, tensors or tensor). */
int dcrt_run(const DcrtProgram *p, const int64_t *dims, void *const *tensors, void *workspace);
/* The workspace a call with these dims needs (0 also when it would fail,
 * or p or dims is NULL); of dcrt_cpu_program(p) for a CPU object. */
size_t dcrt_workspace_size(const DcrtProgram *p, const int64_t *dims);
/* The program of p's chain (p, p->next, ...) that dcrt_run runs on this
 * CPU: the first with an instruction set the CPU has (*isa: its index,
 * when not NULL), else NULL. A GPU program (no instruction sets) is its
 * own. DCRT_CPU_LEVEL=N (1..4) makes objects run the kernels they hold
 * for level N or below, as on such a CPU. */
const DcrtProgram *dcrt_cpu_program(const DcrtProgram *p, int *isa);
/* The calling thread's workspace of at least bytes (kept and grown from
 * call to call, freed at thread exit); NULL when out of memory. */
void *dcrt_thread_workspace(size_t bytes);
/* Runs the CPU launches of calls that start after it on n threads, the
 * caller included (0: one per online core, the default unless
 * DCRT_NUM_THREADS says otherwise). Safe from any thread at any time, also
 * while other threads are inside dcrt_run (generated NAME_run): calls in
 * progress finish on the old pool, which the last of them shuts down.
 * dcrt_run itself may be called from several threads at once; they share
 * the pool, taking turns launch by launch. DCRT_OK, or DCRT_ERR_THREADS
 * when the threads cannot be started (the old pool stays). */
int dcrt_set_num_threads(int n);
/* The x86-64 microarchitecture level of this CPU: 1 (baseline) to 4
 * (AVX-512), as -march=x86-64-vN names them; OS support included
 * (DCRT_CPU_LEVEL does not change it). */
int dcrt_cpu_level(void);
/* DCRT_ERR_NULL_POINTER, with a message naming it, when p, or the dims or
 * tensors array a call needs (p has dims, tensors), is NULL: what dcrt_run
 * and dcrt_cuda_run (every generated entry) check first. */
int dcrt_check_call(const DcrtProgram *p, const int64_t *dims, const void *tensors);
/* DCRT_ERR_NULL_POINTER unless every tensor argument is set. */
int dcrt_check_params(const DcrtProgram *p, const void *const *tensors);
/* The buffer pointers of a planned call (malloc'd, per buffer id): the
 * arguments, and slices of workspace for intermediates and scratch. */
/* A call's checked gathers (DCRT_BUF_CHECK): the record zeroed before its
 * launches; after them DCRT_OK, or DCRT_ERR_INDEX naming the tensor, the
 * axis, the index and the element being computed when a kernel wrote it. */
void dcrt_index_reset(const DcrtProgram *p, float *const *bufs);
int dcrt_index_check(const DcrtProgram *p, const int64_t *dims, float *const *bufs);
/* The record's buffer id, or -1 when no kernel checks an index. */
int dcrt_index_buffer(const DcrtProgram *p);
/* dcrt_index_check of a record read back (the GPU's, copied to the host). */
int dcrt_index_report(const DcrtProgram *p, const int64_t *dims, const int64_t *record);
/* The one wording of a gather's index out of range, for libdcrt and the
 * compiler's evaluators alike: "index V of TENSOR on axis A is out of range
 * -E..E-1 (computing OUT[c0, c1, ...])", the element at flat position pos
 * of an output of rank extents ext, into buf. */
void dcrt_index_message(char *buf, size_t n, const char *tensor, int axis, int64_t value,
                        int64_t extent, const char *out, int rank, const int64_t *ext,
                        int64_t pos);
float **dcrt_bind_buffers(const DcrtProgram *p, const DcrtPlan *pl, void *const *tensors,
                          char *workspace);
/* Called after every launch of dcrt_run (with its time) and dcrt_cuda_run
 * (time NAN) while set: for profiles and tests. NULL unsets it. */
typedef void (*DcrtLaunchHook)(void *ud, const DcrtProgram *p, const DcrtLaunch *l, double ms);
void dcrt_set_launch_hook(DcrtLaunchHook hook, void *ud);
DcrtLaunchHook dcrt_launch_hook(void **ud);

/* runtime/plan.c: one call's launches (see dietcode/abi.h). */
/* A plan with room for p's launches and buffers; NULL when out of memory. */
DcrtPlan *dcrt_plan_new(const DcrtProgram *p);
/* Fills pl for dims with every check; DCRT_OK, or a code and
 * dcrt_last_error's message. */
int dcrt_plan(const DcrtProgram *p, const int64_t *dims, DcrtPlan *pl);
void dcrt_plan_free(DcrtPlan *pl); /* NULL is fine */

/* runtime/simt.c */
/* A SIMT emulator for testing device-form kernels on the host: one block
 * of GPU threads runs as fibers with a real barrier and a shared buffer. */
#define RT_SIMT_MAX_THREADS 1024
/* A kernel's entry for one GPU thread. shared: the block's shared buffer
 * (64-byte aligned, filled with 0xff bytes, i.e. NaN floats, per block). */
typedef void (*RtSimtFn)(void *args, int64_t block, int64_t thread, void *shared);
typedef struct RtSimtKernel {
    RtSimtFn fn;
    size_t stack_bytes; /* per GPU thread; 0: 256 KB */
} RtSimtKernel;
/* Runs threads 0..nthreads-1 (1..RT_SIMT_MAX_THREADS) of block `block` to
 * completion on the calling OS thread. -1 and a message on barrier
 * divergence (a thread returns while others wait at a barrier, or threads
 * wait at different barriers) or when out of memory. Several OS threads
 * may run blocks at once; each keeps its own fiber stacks for reuse. */
int rt_simt_run_block(const RtSimtKernel *k, int64_t block, int nthreads, size_t shared_bytes,
                      void *args, char *err, size_t errlen);
/* __syncthreads(): called by a kernel running under rt_simt_run_block.
 * Threads must meet at the same barrier: the same call site, or for
 * rt_simt_barrier_at the same id (what generated code calls: a compiler
 * may duplicate one barrier's call into several places, e.g. into both
 * arms of a thread-dependent branch, and it is still one barrier). */
void rt_simt_barrier(void);
void rt_simt_barrier_at(int64_t id);
/* __shfl_xor_sync(0xffffffff, v, mask): v as the thread whose index is
 * this one's xor mask passed it; every thread of the block calls it
 * together (as a barrier, numbered id). A partner outside the calling
 * thread's warp of 32 or past the block is an error of the block. */
float rt_simt_shfl_xor(float v, int32_t mask, int64_t id);
/* cp.async: copies bytes (4, 8 or 16) to shared memory at dst, the first
 * src_bytes from src and zeros after them; the source is read now, dst
 * written at the calling thread's next rt_simt_cp_wait (cp.async.wait_all).
 * A bad size, a destination outside the block's shared memory, addresses
 * not aligned to bytes, or a thread that returns with copies it did not
 * wait for is an error of the block. */
void rt_simt_cp_async(void *dst, const void *src, int32_t bytes, int32_t src_bytes);
void rt_simt_cp_wait(void);
/* Frees the calling OS thread's fiber stacks (they are freed at thread
 * exit anyway); for leak checkers. */
void rt_simt_release(void);

/* runtime/cuda.c: the CUDA driver API through dlopen("libcuda.so.1"), so
 * nothing links -lcuda. Device 0, its primary context (made current on the
 * calling thread by rt_cuda_init). Entry points return DCRT_OK or a
 * DCRT_ERR_* code with a one-line message in err (err may be NULL);
 * DCRT_ERR_NO_DRIVER and DCRT_ERR_NO_DEVICE mean there is no GPU to use.
 * Device pointers are uint64_t (CUdeviceptr); a stream is a CUstream or
 * NULL for the default stream. */
typedef struct RtCuModule RtCuModule;
typedef struct RtCuFunction RtCuFunction; /* a CUfunction */
typedef struct RtCuTimer RtCuTimer;       /* a pair of CUDA events */
typedef struct RtCudaDeviceInfo {
    int driver_version; /* e.g. 13000 */
    int sm_major, sm_minor, nsm;
} RtCudaDeviceInfo;
/* Loads the driver and initialises it on first call (later calls return
 * the first outcome). */
int rt_cuda_init(char *err, size_t errlen);
bool rt_cuda_is_no_gpu(int code);
int rt_cuda_device_info(RtCudaDeviceInfo *info, char *err, size_t errlen);
/* JIT-compiles NUL-terminated PTX; on failure err holds the JIT's error log. */
int rt_cuda_load_module(const char *ptx, RtCuModule **mod, char *err, size_t errlen);
int rt_cuda_get_function(RtCuModule *m, const char *name, RtCuFunction **fn, char *err,
                         size_t errlen);
void rt_cuda_unload_module(RtCuModule *m); /* NULL is fine */
/* Lets fn launch with more than 48 KB of dynamic shared memory, up to
 * bytes (cuFuncSetAttribute). */
int rt_cuda_allow_dynamic_shared(RtCuFunction *fn, int bytes, char *err, size_t errlen);
/* args: one pointer per kernel parameter, to its value (cuLaunchKernel's).
 * shared_bytes: the kernel's dynamic shared memory. */
int rt_cuda_launch(RtCuFunction *fn, const unsigned grid[3], const unsigned block[3],
                   unsigned shared_bytes, void *stream, void **args, char *err, size_t errlen);
int rt_cuda_sync(char *err, size_t errlen);
/* Waits for the work queued on stream (not the whole context: a context
 * sync would break another thread's capture). */
int rt_cuda_stream_sync(void *stream, char *err, size_t errlen);
int rt_cuda_alloc(uint64_t *ptr, size_t bytes, char *err, size_t errlen);
void rt_cuda_free(uint64_t ptr); /* 0 is fine */
int rt_cuda_copy_to_device(uint64_t dst, const void *src, size_t bytes, char *err, size_t errlen);
int rt_cuda_copy_to_host(void *dst, uint64_t src, size_t bytes, char *err, size_t errlen);
int rt_cuda_timer_new(RtCuTimer **t, char *err, size_t errlen);
int rt_cuda_timer_start(RtCuTimer *t, void *stream, char *err, size_t errlen);
/* Records the stop event, waits for it, *ms = time since the start event. */
int rt_cuda_timer_stop(RtCuTimer *t, void *stream, float *ms, char *err, size_t errlen);
void rt_cuda_timer_destroy(RtCuTimer *t); /* NULL is fine */

/* CUDA graphs (stream capture): a call's launches recorded on a stream of
 * its own, instantiated, and replayed on any stream with one launch.
 * rt_cuda_graphs_available is false when the driver lacks the calls
 * (before CUDA 11.4) or DCRT_CUDA_GRAPHS=0 is set. */
typedef struct RtCuGraph RtCuGraph; /* a CUgraphExec */
bool rt_cuda_graphs_available(void);
/* Whether the caller is capturing stream into a graph of its own. */
bool rt_cuda_stream_capturing(void *stream);
/* Graphs instantiated and graph launches so far in this process. */
void rt_cuda_graph_counts(long *made, long *launched);
/* Starts a capture on a new stream (*stream); every launch on it until
 * rt_cuda_capture_end is recorded, not run. The capture and launch calls
 * fail (DCRT_ERR_CUDA) when graphs are not available, or before
 * rt_cuda_init has brought the driver up. */
int rt_cuda_capture_begin(void **stream, char *err, size_t errlen);
/* Ends the capture begun on stream (and destroys the stream); with ok,
 * instantiates what it recorded into *g, else discards it (*g = NULL). */
int rt_cuda_capture_end(void *stream, bool ok, RtCuGraph **g, char *err, size_t errlen);
int rt_cuda_graph_launch(RtCuGraph *g, void *stream, char *err, size_t errlen);
void rt_cuda_graph_destroy(RtCuGraph *g); /* NULL is fine */

/* runtime/graphs.c: the graphs of recent calls, by key (a call's dims and
 * buffer addresses), for dcrt_cuda_run. A key's first lookup records it and
 * returns NULL with *seen false; later ones set *seen and return the graph
 * stored for it (NULL until one is). nslots keys are kept, the least
 * recently used making room (its graph passed to destroy). Not locked: the
 * owner holds its lock around a lookup and what follows it. */
typedef struct RtGraphCache RtGraphCache;
RtGraphCache *rt_graph_cache_new(int nslots, void (*destroy)(void *graph));
void rt_graph_cache_free(RtGraphCache *c); /* destroys every graph; NULL is fine */
void *rt_graph_cache_lookup(RtGraphCache *c, const uint64_t *key, int n, bool *seen);
void rt_graph_cache_store(RtGraphCache *c, const uint64_t *key, int n, void *graph);

/* Runs a GPU program (dcc-generated prog_launch): the plan for dims, the
 * PTX loaded on first use (cached in the object), each launch on stream
 * with the NVPTX kernel ABI. tensors: device pointers (p->params order);
 * workspace: a device buffer of at least dcrt_workspace_size bytes, or 0
 * for one libdcrt keeps per thread (then the call waits for its kernels
 * before returning). DCRT_OK or a code. */
int dcrt_cuda_run(const DcrtProgram *p, const int64_t *dims, const uint64_t *tensors,
                  uint64_t workspace, void *stream);
/* Frees what calls of GPU program p loaded (generated prog_release): its
 * module, its constants' device copies and the CUDA graphs of its calls;
 * the next call loads them again. No call of p may run meanwhile, and its
 * launches must have finished (the caller has synchronised their streams;
 * a graph the caller captured from them may not run again). Nothing
 * loaded: nothing to do. */
void dcrt_cuda_release(const DcrtProgram *p);

#endif
