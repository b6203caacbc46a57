/* bench/aot: the object users link against what `dcc run` executes.
 *
 * BERT QKV (examples/bert_qkv.tex), Y[T, 2304] = X[T, 768] W^T + b: the
 * object `dcc --emit=obj` wrote at build time (default instruction sets:
 * x86-64-v2, v3 and v4, the best one this CPU has picked at run time),
 * linked into this program, against the same program JIT-compiled for
 * this CPU (exec/cpu.c, as `dcc run` does), on the same buffers, with the
 * same threads. The two are timed alternately, call by call, so both see
 * the same machine; prints the medians and AOT / JIT. With --level N
 * (1..4, at most this CPU's), the object runs the kernels it holds for
 * x86-64 level N (DCRT_CPU_LEVEL=N) and the JIT is built as for
 * --arch=x86-64-vN (that level's vectors and instructions).
 *
 *   aot [--reps R] [--level N] [SRCDIR]
 *
 * Not a test: timing decides nothing here.
 */
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#include "bert_qkv.h"
#include "load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int reps = 51, level = dcrt_cpu_level();
    /* without --level: the JIT as `dcc run` builds it, for this CPU */
    bool native = !getenv("DCRT_CPU_LEVEL");
    const char *src = ".";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--level") == 0 && i + 1 < argc) {
            level = atoi(argv[++i]);
            native = false;
        } else
            src = argv[i];
    }
    if (reps < 1 || reps > 1000 || level < 1 || level > dcrt_cpu_level()) {
        fprintf(stderr, "usage: aot [--reps R] [--level 1..%d] [SRCDIR]\n", dcrt_cpu_level());
        return 2;
    }
    char lv[16], arch[32];
    snprintf(lv, sizeof lv, "%d", level);
    snprintf(arch, sizeof arch, native ? "native" : level > 1 ? "x86-64-v%d" : "x86-64", level);
    setenv("DCRT_CPU_LEVEL", lv, 1);
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/examples/bert_qkv.tex", src);
    FeUnit u;
    TeProgram *p = bench_load("aot", path, &u);
    TargetInfo ti = pass_target_info_cpu(level);
    LoopProgram *lp = pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err);
    const CgTarget *isa = lp ? cg_target_cpu_arch(arch, err, sizeof err) : NULL;
    ExCpu *jit = isa ? ex_cpu_compile_isa(lp, isa, err, sizeof err) : NULL;
    if (!jit) {
        fprintf(stderr, "aot: %s\n", err);
        return 1;
    }
    enum { TMAX = 128, K = 768, N = 2304 };
    float *X = malloc(sizeof(float) * TMAX * K), *W = malloc(sizeof(float) * N * K),
          *b = malloc(sizeof(float) * N), *Y = malloc(sizeof(float) * TMAX * N);
    rt_rng_fill(1, 1, X, TMAX * K);
    rt_rng_fill(1, 2, W, (size_t)N * K);
    rt_rng_fill(1, 3, b, N);
    float *bufs[4] = {X, W, b, Y};
    double *ta = malloc(sizeof(double) * (size_t)reps), *tj = malloc(sizeof(double) * (size_t)reps);
    printf("BERT QKV: the object dcc ships (default instruction sets; its kernels for x86-64 "
           "level %d, this CPU's being %d) against the JIT built for %s, %d alternating calls "
           "each\n",
           level, dcrt_cpu_level(), arch, reps);
    printf("%5s %10s %10s %9s\n", "T", "AOT ms", "JIT ms", "AOT/JIT");
    static const int64_t Ts[] = {1, 16, 64, 128};
    double logsum = 0;
    for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
        int64_t T = Ts[i];
        if (bert_qkv_run(T, X, W, b, Y, NULL) != DCRT_OK ||
            ex_cpu_run(jit, &T, bufs, NULL, err, sizeof err) != 0) {
            fprintf(stderr, "aot: T=%lld: %s%s\n", (long long)T, dcrt_last_error(), err);
            return 1;
        }
        for (int r = 0; r < reps; r++) {
            double t0 = rt_now_ms();
            bert_qkv_run(T, X, W, b, Y, NULL);
            double t1 = rt_now_ms();
            ex_cpu_run(jit, &T, bufs, NULL, err, sizeof err);
            double t2 = rt_now_ms();
            ta[r] = t1 - t0;
            tj[r] = t2 - t1;
        }
        qsort(ta, (size_t)reps, sizeof *ta, cmpd);
        qsort(tj, (size_t)reps, sizeof *tj, cmpd);
        double a = ta[reps / 2], j = tj[reps / 2];
        printf("%5lld %10.3f %10.3f %9.3f\n", (long long)T, a, j, a / j);
        logsum += log(a / j);
    }
    printf("geometric mean of AOT / JIT: %.3f\n", exp(logsum / (double)(sizeof Ts / sizeof *Ts)));
    ex_cpu_destroy(jit);
    fe_unload(&u);
    free(X);
    free(W);
    free(b);
    free(Y);
    free(ta);
    free(tj);
    return 0;
}
