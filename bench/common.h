/* bench/common.h: what the benchmarks share: timing, threads for dcc,
 * oneDNN and OpenBLAS, and OpenBLAS made to use the best kernel set this
 * CPU supports (Debian's build misdetects recent CPUs as an old SSE3 core):
 * SkylakeX with AVX-512, else Haswell. */
#ifndef DC_BENCH_COMMON_H
#define DC_BENCH_COMMON_H

#include "dietcode/exec.h"
#include "dietcode/search.h"

/* The median of reps timed calls of run(ctx) after a warm-up of at least
 * one call and 20 ms. */
double bench_median_ms(int reps, void (*run)(void *), void *ctx);
/* One round of a best-of-rounds cell: bench_median_ms's median, kept in
 * *best when round is the first or the median is lower. */
void bench_round_ms(double *best, int round, int reps, void (*run)(void *), void *ctx);
/* The median of v[0..n-1] (n >= 1), sorting v in place. */
double bench_median(double *v, int n);
/* Sets OPENBLAS_CORETYPE and re-executes the program when it is not set
 * yet (OpenBLAS reads it when it loads); returns only when it is set. */
void bench_openblas_coretype(char **argv);
const char *bench_openblas_core(void);
void bench_openblas_threads(int n);
/* Stops OpenBLAS's worker threads (its next call starts them again):
 * after a call they busy-wait, yielding, for about 2^28 cycles and take
 * a core from whatever runs next. Call after each batch of OpenBLAS
 * calls. */
void bench_openblas_quiet(void);
/* Threads for oneDNN (its OpenMP runtime). */
void bench_dnnl_threads(int n);
/* Threads for dcc's objects and JIT (dcrt_set_num_threads; exits on failure). */
void bench_dcrt_threads(int n);

/* A tuning run on the CPU (o: trials, ranges or points, per-shape,
 * records; its progress and warnings go to stderr) and the dispatch its
 * records hold, JIT-compiled: its time, the measurements of its first
 * stage (search trials, selection), the distinct kernels its tree
 * dispatches to, and the noise its timing saw (timed runs, those dropped
 * as slow or outliers; shape points checked, picks the check changed).
 * Exits with a message on failure. */
typedef struct BenchTuned {
    double seconds;
    int trials, select, kernels;
    int64_t runs, dropped;
    int checked, changed;
    int stages, workloads;      /* the program's, and distinct among them */
    ExCpu *cp;
} BenchTuned;
/* last: p's last compile, its unread constants released before the JIT
 * (ir_te_release_unread_consts). */
BenchTuned bench_tune(TeProgram *p, SrchTuneOpts *o, bool last);

/* A process that keeps one core busy (a CPU-bound loop, as a test suite or
 * a second tune beside a tuning run): started, and stopped (killed and
 * waited for). It ends on its own when its parent does. */
int bench_busy_start(void);
void bench_busy_stop(int pid);

#endif
