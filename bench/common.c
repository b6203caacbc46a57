/* bench/common.c: see common.h. */
#include "common.h"

#include "dietcode/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern char *openblas_get_corename(void);
extern void openblas_set_num_threads(int);
extern void omp_set_num_threads(int); /* oneDNN's runtime is OpenMP (libgomp) */
extern int blas_thread_shutdown_(void);


static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median_ms(int reps, void (*run)(void *), void *ctx)
{
    double t[64];
    if (reps > 64)
        reps = 64;
    /* warm-up: at least one call and 20 ms, so that caches, the clock and
     * threads just started (which the kernel places next to the caller
     * at first) settle */
    double until = rt_now_ms() + 20;
    for (int i = 0; i < 1000 && (i == 0 || rt_now_ms() < until); i++)
        run(ctx);
    for (int r = 0; r < reps; r++) {
        double t0 = rt_now_ms();
        run(ctx);
        t[r] = rt_now_ms() - t0;
    }
    return bench_median(t, reps);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return v[n / 2];
}

void bench_openblas_coretype(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE"))
        return;
    __builtin_cpu_init();
    setenv("OPENBLAS_CORETYPE", __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell", 1);
    execv("/proc/self/exe", argv);
    perror("bench: re-exec");
    exit(1);
}

const char *bench_openblas_core(void) { return openblas_get_corename(); }
void bench_openblas_threads(int n) { openblas_set_num_threads(n); }
void bench_openblas_quiet(void) { blas_thread_shutdown_(); }
void bench_dnnl_threads(int n) { omp_set_num_threads(n); }

void bench_dcrt_threads(int n)
{
    if (dcrt_set_num_threads(n) != DCRT_OK) {
        fprintf(stderr, "%s\n", dcrt_last_error());
        exit(1);
    }
}
