/* bench/tuning: DietCode's claim, measured in one run on one machine.
 *
 * The BERT-base QKV layer (examples/bert_qkv.tex: Y[T, 2304] = X[T, 768]
 * W^T + b) on the CPU target, tuned for T = 1..128 twice:
 *   joint      one search for the whole range (--trials N in all), then the
 *              measured selection at every T and the dispatch tree;
 *   per-shape  a search of N trials for each T on its own (the Ansor way).
 * Then the dispatched kernels of both (JIT-compiled for this CPU, as `dcc
 * run` does; bench/aot shows the object runs as fast), oneDNN (dnnl_sgemm)
 * and OpenBLAS (cblas_sgemm), each of the two with the bias copied into Y
 * and beta = 1, same threads, are timed side by side at every T (dcc
 * first, then oneDNN, then OpenBLAS: the libraries' idle threads spin for
 * a while after a call). Prints the tuning times, the geometric-mean
 * latencies and the ratios: tuning time per-shape / joint, latency joint /
 * per-shape, and each against oneDNN and OpenBLAS.
 *
 *   tuning [--trials N] [--step S] [--reps R] [--keep DIR] [SRCDIR]
 *
 * --step S tunes and times T = 1, 1+S, ..., and 128 instead of every T;
 * --keep DIR keeps the two records files there (a rerun with the same DIR
 * reuses them, so its tuning times are not comparable). Not a test.
 */
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include "common.h"

#include <cblas.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Prog {
    FeUnit u;
    TeProgram *p;
} Prog;

static Prog load(const char *path)
{
    Prog g;
    char err[512];
    int rc = fe_load(path, &g.u, err, sizeof err);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "tuning: %s\n", err);
        else
            ir_diags_print(&g.u.diags, stderr);
        exit(1);
    }
    g.p = g.u.prog;
    return g;
}

static BenchTuned tune(Prog *g, bool per_shape, int trials, SrchRange *range, const char *records)
{
    SrchTuneOpts o = {.trials = trials, .seed = 1, .per_shape = per_shape, .records = records,
                      .nranges = 1, .ranges = range};
    return bench_tune(g->p, &o);
}

typedef struct Case {
    ExCpu *cp;
    int64_t T;
    float **bufs; /* X W b Y */
} Case;

static void run_dcc(void *ctx)
{
    Case *c = ctx;
    int64_t dims[1] = {c->T};
    char err[256];
    if (ex_cpu_run(c->cp, dims, c->bufs, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "tuning: %s\n", err);
        exit(1);
    }
}

static void run_blas(void *ctx)
{
    Case *c = ctx;
    float *Y = c->bufs[3];
    for (int64_t i = 0; i < c->T; i++)
        memcpy(Y + i * 2304, c->bufs[2], 2304 * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->T, 2304, 768, 1.0f, c->bufs[0],
                768, c->bufs[1], 768, 1.0f, Y, 2304);
}

static void run_dnnl(void *ctx)
{
    Case *c = ctx;
    float *Y = c->bufs[3];
    for (int64_t i = 0; i < c->T; i++)
        memcpy(Y + i * 2304, c->bufs[2], 2304 * sizeof(float));
    if (dnnl_sgemm('N', 'T', c->T, 2304, 768, 1.0f, c->bufs[0], 768, c->bufs[1], 768, 1.0f, Y,
                   2304) != dnnl_success) {
        fprintf(stderr, "tuning: dnnl_sgemm failed\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    bench_openblas_coretype(argv);
    int trials = 32, step = 1, reps = 9;
    const char *keep = NULL, *srcdir = ".";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--trials") == 0) trials = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--step") == 0) step = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) reps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--keep") == 0) keep = argv[++i];
        else if (argv[i][0] != '-') srcdir = argv[i];
        else {
            fprintf(stderr, "usage: tuning [--trials N] [--step S] [--reps R] [--keep DIR] [SRCDIR]\n");
            return 2;
        }
    }
    if (trials < 1 || step < 1 || reps < 1 || reps > 64) {
        fprintf(stderr, "tuning: bad --trials, --step or --reps (1..64)\n");
        return 2;
    }
    char path[1024], rec_joint[1100], rec_shape[1100], dir[1024];
    snprintf(path, sizeof path, "%s/examples/bert_qkv.tex", srcdir);
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
    } else {
        snprintf(dir, sizeof dir, "/tmp/dc_bench_tuning_XXXXXX");
        if (!mkdtemp(dir)) {
            perror("tuning: mkdtemp");
            return 1;
        }
    }
    snprintf(rec_joint, sizeof rec_joint, "%s/joint.jsonl", dir);
    snprintf(rec_shape, sizeof rec_shape, "%s/per_shape.jsonl", dir);
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    bench_openblas_threads(threads);
    bench_dnnl_threads(threads);

    Prog g = load(path);
    int64_t Ts[130];
    int nt = 0;
    for (int64_t T = 1; T < 128; T += step)
        Ts[nt++] = T;
    Ts[nt++] = 128;
    int npts = nt;
    SrchRange range = {"T", 1, 128, npts};
    printf("BERT QKV on the CPU: Y[T, 2304] = X[T, 768] W^T + b, %d values of T in 1..128, "
           "%d threads\n", npts, threads);
    BenchTuned joint = tune(&g, false, trials, &range, rec_joint);
    BenchTuned shape = tune(&g, true, trials, &range, rec_shape);
    printf("joint search:     %5d trials + %4d selection measurements, %8.1f s\n", joint.trials,
           joint.select, joint.seconds);
    printf("per-shape search: %5d trials (%d per shape),            %8.1f s\n", shape.trials,
           trials, shape.seconds);

    /* the same buffers for all three; all of dcc first, then OpenBLAS, whose
     * idle threads spin for a while after each call */
    float *bufs[4];
    int64_t n[4] = {128 * 768, 2304 * 768, 2304, 128 * 2304};
    for (int i = 0; i < 4; i++) {
        bufs[i] = aligned_alloc(64, (size_t)n[i] * sizeof(float));
        rt_rng_fill(9, (uint64_t)i, bufs[i], (size_t)n[i]);
    }
    double tj[130], ts[130], tb[130], td[130];
    for (int i = 0; i < nt; i++) {
        Case a = {joint.cp, Ts[i], bufs}, b = {shape.cp, Ts[i], bufs};
        tj[i] = bench_median_ms(reps, run_dcc, &a);
        ts[i] = bench_median_ms(reps, run_dcc, &b);
    }
    for (int i = 0; i < nt; i++) {
        Case c = {NULL, Ts[i], bufs};
        td[i] = bench_median_ms(reps, run_dnnl, &c);
    }
    for (int i = 0; i < nt; i++) {
        Case c = {NULL, Ts[i], bufs};
        tb[i] = bench_median_ms(reps, run_blas, &c);
    }
    bench_openblas_quiet();
    printf("\nOpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n", bench_openblas_core(),
           getenv("OPENBLAS_CORETYPE"));
    const dnnl_version_t *dv = dnnl_version();
    printf("oneDNN %d.%d.%d\n", dv->major, dv->minor, dv->patch);
    printf("%5s %10s %10s %10s %10s %9s\n", "T", "joint ms", "shape ms", "oneDNN ms", "BLAS ms",
           "dnnl/joint");
    double lj = 0, ls = 0, lb = 0, ld = 0, worst = INFINITY;
    int tworst = 0;
    for (int i = 0; i < nt; i++) {
        if (nt <= 40 || i % 8 == 0 || i == nt - 1)
            printf("%5lld %10.4f %10.4f %10.4f %10.4f %9.2f\n", (long long)Ts[i], tj[i], ts[i], td[i],
                   tb[i], td[i] / tj[i]);
        lj += log(tj[i]);
        ls += log(ts[i]);
        lb += log(tb[i]);
        ld += log(td[i]);
        if (td[i] / tj[i] < worst)
            worst = td[i] / tj[i], tworst = (int)Ts[i];
    }
    lj = exp(lj / nt), ls = exp(ls / nt), lb = exp(lb / nt), ld = exp(ld / nt);
    printf("\ngeometric-mean latency: joint %.4f ms, per-shape %.4f ms, oneDNN %.4f ms, OpenBLAS "
           "%.4f ms\n", lj, ls, ld, lb);
    printf("speed against oneDNN (oneDNN / dcc):   joint %.2fx (worst %.2fx at T = %d), per-shape "
           "%.2fx\n", ld / lj, worst, tworst, ld / ls);
    printf("tuning time, per-shape / joint:        %6.1fx  (target >= 20x)\n",
           shape.seconds / joint.seconds);
    printf("latency, joint / per-shape:            %6.3fx  (target <= 1.05x)\n", lj / ls);
    printf("speed against OpenBLAS (BLAS / dcc):   joint %.2fx, per-shape %.2fx  (target >= 1.0x)\n",
           lb / lj, lb / ls);
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
    ex_cpu_destroy(joint.cp);
    ex_cpu_destroy(shape.cp);
    if (!keep) {
        unlink(rec_joint);
        unlink(rec_shape);
        rmdir(dir);
    }
    return 0;
}
