/* dietcode/runtime.h: the table of contents of libdcrt.a.
 *
 * The runtime is what compiled programs and their drivers link with: file
 * I/O for tensors, input generation, and (in later sections) the hooks that
 * load and launch kernels. It stands alone: it includes only the C library
 * and no other header of the project, so a user can link libdcrt.a without
 * the compiler. Public names carry the rt_ prefix. Functions that can fail
 * return 0 or -1 and write a one-line message to a caller's buffer; they
 * never print and never exit.
 */
#ifndef DIETCODE_RUNTIME_H
#define DIETCODE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* runtime/npy.c */
#define RT_NPY_MAX_RANK 8

/* A dense float32 tensor in C (row-major) order. rank 0 is a scalar with one
 * element; shape[rank..] is unused. data is malloc'd and owned by the array. */
typedef struct RtArray {
    int rank;
    int64_t shape[RT_NPY_MAX_RANK];
    float *data; /* release with rt_array_free */
} RtArray;

/* Reads a .npy file of little-endian float32 ('<f4') in C order, format
 * version 1.0, 2.0 or 3.0. On failure *out is zeroed (safe to free) and err
 * holds a one-line message starting with the path. err may be NULL. */
int rt_npy_read(const char *path, RtArray *out, char *err, size_t errlen);
/* Writes a as a version 1.0 .npy file (2.0 if the header would not fit) with
 * the header numpy itself writes. Atomic: the data goes to a temporary file
 * beside path that is renamed over it, so on failure any file already at
 * path is untouched and nothing is left behind. */
int rt_npy_write(const char *path, const RtArray *a, char *err, size_t errlen);
void rt_array_free(RtArray *a); /* frees data, zeroes *a; NULL is fine */
/* Product of the shape (1 for rank 0); -1 if the rank or a dimension is out
 * of range or the byte size would overflow int64_t. */
int64_t rt_array_numel(const RtArray *a);

/* runtime/rng.c */
/* Fills out[0..n) with floats uniform in [-1, 1), multiples of 2^-23,
 * determined by (seed, stream) alone; a shorter fill is a prefix of a longer
 * one. Distinct streams give independent sequences from the same seed. */
void rt_rng_fill(uint64_t seed, uint64_t stream, float *out, size_t n);
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

#endif
