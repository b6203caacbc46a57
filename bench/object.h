/* bench/object.h: the AOT object of tuned kernels, as a user gets it, for
 * the benchmarks that time it beside the JIT (bench/dense --records and
 * bench/tuning). */
#ifndef DC_BENCH_OBJECT_H
#define DC_BENCH_OBJECT_H

#include "dietcode/exec.h"

#include <stddef.h>

/* What `dcc TEX --records RECORDS --emit=obj` writes (the instruction sets
 * dcc ships for those records: the CPU they were tuned on, and
 * x86-64-v2), linked by the C compiler as a shared object and loaded with
 * dlopen; cp runs its NAME_run_packed. Its calls into libdcrt resolve
 * against the runtime linked into the benchmark, which exports its
 * symbols, so the object, the JIT and the default objects share one pool.
 * Exits with a message on failure, leaving no file behind. */
typedef struct BenchObject {
    void *handle;
    ExCpu *cp;
    int out; /* the program's output (its last, where it has several) */
} BenchObject;
BenchObject *bench_object(const TeProgram *p, const char *tex, const char *records);
/* Exits with a message unless, at dims, o launches what the JIT jit
 * launches (kernel names and grids, seen by libdcrt's launch hook) and
 * writes the JIT's output o->out (its first len floats, overwritten), to
 * 1e-4 relative: a benchmark then times the kernels and dispatch it says. */
void bench_object_check(const BenchObject *o, ExCpu *jit, const int64_t *dims,
                        float *const *tensors, size_t len);
void bench_object_close(BenchObject *o); /* NULL is fine */

#endif
