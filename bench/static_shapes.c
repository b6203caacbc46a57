/* bench/static_shapes: a static model's many instances of one operator
 * tuned once into a few shape-generic kernels plus a dispatch, against a
 * kernel tuned for each instance (the other half of the problem, from the
 * DietCode RFC's discussion).
 *
 * ResNet-50's 1x1 convolutions at batch 1 (bench/layers/resnet50_1x1.tex:
 * Y[P, Cout] = X[P, Cin] W^T) at the N distinct (Cin, Cout, P) that
 * bench/layers/resnet50_1x1.shapes.json lists, on the CPU target:
 *   joint      one search over the N points (--trials N in all), the
 *              measured selection at each and a dispatch tree over M
 *              kernels;
 *   per-shape  a search of N trials for each point on its own (N kernels).
 * Then both dispatches (JIT-compiled, as dcc run does), oneDNN (dnnl_sgemm
 * 'N', 'T') and OpenBLAS are timed side by side at each point, same
 * threads. Prints N, M, the tuning times and the latency ratios.
 *
 *   static_shapes [--trials N] [--reps R] [SRCDIR]
 *
 * Not a test.
 */
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include "common.h"
#include "load.h"

#include <cblas.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Case {
    ExCpu *cp;
    int64_t dims[3]; /* by Var.pos: P, Cin, Cout as declared */
    int64_t P, Cin, Cout;
    float **bufs;    /* X W Y */
} Case;

static void run_dcc(void *ctx)
{
    Case *c = ctx;
    char err[256];
    if (ex_cpu_run(c->cp, c->dims, c->bufs, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "static_shapes: %s\n", err);
        exit(1);
    }
}

static void run_blas(void *ctx)
{
    Case *c = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->P, (int)c->Cout, (int)c->Cin,
                1.0f, c->bufs[0], (int)c->Cin, c->bufs[1], (int)c->Cin, 0.0f, c->bufs[2],
                (int)c->Cout);
}

static void run_dnnl(void *ctx)
{
    Case *c = ctx;
    if (dnnl_sgemm('N', 'T', c->P, c->Cout, c->Cin, 1.0f, c->bufs[0], c->Cin, c->bufs[1], c->Cin,
                   0.0f, c->bufs[2], c->Cout) != dnnl_success) {
        fprintf(stderr, "static_shapes: dnnl_sgemm failed\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    bench_openblas_coretype(argv);
    int trials = 32, reps = 9;
    const char *srcdir = ".";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--trials") == 0) trials = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) reps = atoi(argv[++i]);
        else if (argv[i][0] != '-') srcdir = argv[i];
        else {
            fprintf(stderr, "usage: static_shapes [--trials N] [--reps R] [SRCDIR]\n");
            return 2;
        }
    }
    if (trials < 1 || reps < 1 || reps > 64) {
        fprintf(stderr, "static_shapes: bad --trials or --reps (1..64)\n");
        return 2;
    }
    char path[1024], list[1024], dir[] = "/tmp/dc_bench_static_XXXXXX", rec[2][1100], err[1024];
    snprintf(path, sizeof path, "%s/bench/layers/resnet50_1x1.tex", srcdir);
    snprintf(list, sizeof list, "%s/bench/layers/resnet50_1x1.shapes.json", srcdir);
    if (!mkdtemp(dir)) {
        perror("static_shapes: mkdtemp");
        return 1;
    }
    snprintf(rec[0], sizeof rec[0], "%s/joint.jsonl", dir);
    snprintf(rec[1], sizeof rec[1], "%s/per_shape.jsonl", dir);
    FeUnit u;
    TeProgram *p = bench_load("static_shapes", path, &u);
    int npts = 0;
    int64_t *pts = srch_shape_points_file(p, list, &npts, err, sizeof err);
    if (!pts) {
        fprintf(stderr, "static_shapes: %s\n", err);
        return 1;
    }
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    bench_openblas_threads(threads);
    bench_dnnl_threads(threads);
    printf("ResNet-50 1x1 convolutions, batch 1, on the CPU: Y[P, Cout] = X[P, Cin] W^T at %d "
           "shape instances, %d threads\n", npts, threads);
    BenchTuned tuned[2];
    for (int k = 0; k < 2; k++) {
        SrchTuneOpts o = {.trials = trials, .seed = 1, .per_shape = k == 1, .records = rec[k],
                          .points = pts, .npoints = npts};
        tuned[k] = bench_tune(p, &o, false);
    }
    printf("joint search:     %5d trials + %4d selection measurements, %7.1f s -> %d kernels\n",
           tuned[0].trials, tuned[0].select, tuned[0].seconds, tuned[0].kernels);
    printf("per-shape search: %5d trials (%d per shape),            %7.1f s -> one per shape\n",
           tuned[1].trials, trials, tuned[1].seconds);

    int pos[3];
    for (int i = 0; i < 3; i++)
        pos[i] = ir_te_find_dim(p, (const char *[]){"P", "Cin", "Cout"}[i])->pos;
    float *bufs[3];
    size_t n[3] = {3136 * 2048, 2048 * 2048, 3136 * 2048};
    for (int i = 0; i < 3; i++) {
        bufs[i] = aligned_alloc(64, n[i] * sizeof(float));
        rt_rng_fill(9, (uint64_t)i, bufs[i], n[i]);
    }
    double t[4][64];
    for (int q = 0; q < npts && q < 64; q++) {
        const int64_t *row = pts + (size_t)q * 3;
        Case c = {NULL, {row[0], row[1], row[2]}, row[pos[0]], row[pos[1]], row[pos[2]], bufs};
        for (int k = 0; k < 2; k++) {
            c.cp = tuned[k].cp;
            t[k][q] = bench_median_ms(reps, run_dcc, &c);
        }
    }
    for (int q = 0; q < npts && q < 64; q++) { /* oneDNN, then OpenBLAS: idle threads spin */
        const int64_t *row = pts + (size_t)q * 3;
        Case c = {NULL, {row[0], row[1], row[2]}, row[pos[0]], row[pos[1]], row[pos[2]], bufs};
        t[2][q] = bench_median_ms(reps, run_dnnl, &c);
    }
    for (int q = 0; q < npts && q < 64; q++) {
        const int64_t *row = pts + (size_t)q * 3;
        Case c = {NULL, {row[0], row[1], row[2]}, row[pos[0]], row[pos[1]], row[pos[2]], bufs};
        t[3][q] = bench_median_ms(reps, run_blas, &c);
    }
    bench_openblas_quiet();
    const dnnl_version_t *dv = dnnl_version();
    printf("\noneDNN %d.%d.%d, OpenBLAS core %s\n", dv->major, dv->minor, dv->patch,
           bench_openblas_core());
    printf("%5s %5s %5s %10s %10s %10s %10s\n", "P", "Cin", "Cout", "joint ms", "shape ms",
           "oneDNN ms", "BLAS ms");
    double g[4] = {0, 0, 0, 0};
    for (int q = 0; q < npts && q < 64; q++) {
        const int64_t *row = pts + (size_t)q * 3;
        printf("%5lld %5lld %5lld %10.4f %10.4f %10.4f %10.4f\n", (long long)row[pos[0]],
               (long long)row[pos[1]], (long long)row[pos[2]], t[0][q], t[1][q], t[2][q],
               t[3][q]);
        for (int k = 0; k < 4; k++)
            g[k] += log(t[k][q]) / npts;
    }
    for (int k = 0; k < 4; k++)
        g[k] = exp(g[k]);
    printf("\n%d shape points, %d kernels (joint) against %d (per-shape)\n", npts,
           tuned[0].kernels, npts);
    printf("geometric-mean latency: joint %.4f ms, per-shape %.4f ms, oneDNN %.4f ms, OpenBLAS "
           "%.4f ms\n", g[0], g[1], g[2], g[3]);
    printf("tuning time, per-shape / joint:   %6.1fx\n", tuned[1].seconds / tuned[0].seconds);
    printf("latency, joint / per-shape:       %6.3fx\n", g[0] / g[1]);
    printf("speed against oneDNN (oneDNN / dcc): joint %.2fx, per-shape %.2fx\n", g[2] / g[0],
           g[2] / g[1]);
    printf("speed against OpenBLAS (BLAS / dcc): joint %.2fx, per-shape %.2fx\n", g[3] / g[0],
           g[3] / g[1]);
    for (int i = 0; i < 3; i++)
        free(bufs[i]);
    for (int k = 0; k < 2; k++) {
        ex_cpu_destroy(tuned[k].cp);
        unlink(rec[k]);
    }
    rmdir(dir);
    free(pts);
    fe_unload(&u);
    return 0;
}
