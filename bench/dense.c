/* bench/dense: dcc's CPU kernels against oneDNN (dnnl_sgemm) and OpenBLAS
 * (cblas_sgemm) on the four dense layers of BERT-base, Y[T, N] = X[T, K]
 * W[N, K]^T + b, for T = 1, step, 2 step, ..., 128 (--tmax: up to TMAX, above
 * the layers' declared range of 1..128).
 *
 *   dense [--mk "threads [...] tile [...] ..." | --records FILE] [--step S] [--tmax TMAX]
 *         [--reps R] [--rounds N] [--threads N] [--scaling] [SRCDIR]
 *
 * The layers are examples/bert_qkv.tex and the three in bench/layers (SRCDIR:
 * the source tree, default "."). dcc runs twice: JIT-compiled for this CPU (as
 * `dcc run` does; with --mk, that micro-kernel, and the table's AOT columns
 * left empty), and as an object: the one `dcc --emit=obj` wrote at build time
 * (default micro-kernels, the default instruction sets), linked in. --records
 * FILE: both run the kernels and dispatch trees tuned into FILE (`dcc tune
 * LAYER --records=FILE` for each of the four layers; a layer without records
 * there is an error), the object being the one `dcc LAYER --records=FILE
 * --emit=obj` writes now, linked as a shared object and loaded
 * (bench/object.c; its launches and output checked against the JIT's at every
 * T before any timing). The libraries compute the same GEMM with beta = 1 into
 * a Y that holds the broadcast bias, so they add the bias in the GEMM as dcc's
 * kernel does (the timed calls keep accumulating into Y, which changes the
 * values, not the work). Same buffers, same threads, the median of R timed
 * calls after a warm-up; dcc first, then oneDNN, then OpenBLAS, because the
 * libraries' idle threads spin for a while after a call and would take a core
 * from whatever runs next (after each batch OpenBLAS's threads are stopped and
 * oneDNN's given 20 ms to sleep). That sequence runs --rounds times (3) and
 * each cell keeps its best round's median, the same for every library: on a
 * shared machine a core goes missing for a few hundred milliseconds now and
 * then, and would otherwise halve whichever column it lands on. OpenBLAS is
 * made to use the best kernels this CPU has (Debian's build takes recent CPUs
 * for an SSE3 core): SkylakeX with AVX-512, else Haswell.
 *
 * Prints GFLOP/s per T and the geometric means of dcc / oneDNN and dcc /
 * OpenBLAS, JIT and AOT. With --scaling instead, for T = 1, 2, 4, 8, 16:
 * the N-thread time over the 1-thread time of each (N from --threads),
 * the two measured alternately in three rounds (the median of the
 * rounds' medians), so that a busy moment of the machine does not land on
 * one side only. Not a test: timing decides nothing here.
 */
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include "bert_attn_out.h"
#include "bert_ffn1.h"
#include "bert_ffn2.h"
#include "bert_qkv.h"
#include "common.h"
#include "load.h"
#include "object.h"

#include <cblas.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*RunFn)(int64_t T, const float *X, const float *W, const float *b, float *Y,
                     void *workspace);

typedef struct Layer {
    const char *name, *path;
    int64_t n, k;
    RunFn aot; /* the default object, linked in */
} Layer;

static const Layer layers[] = {
    {"qkv", "examples/bert_qkv.tex", 2304, 768, bert_qkv_run},
    {"attn_out", "bench/layers/bert_attn_out.tex", 768, 768, bert_attn_out_run},
    {"ffn1", "bench/layers/bert_ffn1.tex", 3072, 768, bert_ffn1_run},
    {"ffn2", "bench/layers/bert_ffn2.tex", 768, 3072, bert_ffn2_run},
};
enum { NLAYERS = sizeof layers / sizeof *layers, TMAX_LIMIT = 8192 };

/* T = 1, then every step-th value, always ending at tmax. */
static int64_t next_T(int64_t T, int step, int64_t tmax)
{
    int64_t n = T == 1 && step > 1 ? step : T + step;
    return T < tmax && n > tmax ? tmax : n;
}

typedef struct Case {
    const Layer *l;
    ExCpu *cp;
    ExCpu *obj; /* --records: the tuned object's entry, else NULL */
    float **bufs; /* by the program's tensor ids */
    const float *x, *w, *b;
    float *y;
    int64_t T;
} Case;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "dense: %s: %s\n", what, msg);
    exit(1);
}

static void run_entry(Case *c, ExCpu *cp)
{
    char err[256];
    if (ex_cpu_run(cp, &c->T, c->bufs, NULL, err, sizeof err) != 0)
        die(c->l->name, err);
}

static void run_jit(void *ctx)
{
    Case *c = ctx;
    run_entry(c, c->cp);
}

static void run_aot(void *ctx)
{
    Case *c = ctx;
    if (c->obj)
        run_entry(c, c->obj);
    else if (c->l->aot(c->T, c->x, c->w, c->b, c->y, NULL) != DCRT_OK)
        die(c->l->name, dcrt_last_error());
}

static void run_dnnl(void *ctx)
{
    Case *c = ctx;
    if (dnnl_sgemm('N', 'T', c->T, c->l->n, c->l->k, 1.0f, c->x, c->l->k, c->w, c->l->k, 1.0f, c->y,
                   c->l->n) != dnnl_success)
        die(c->l->name, "dnnl_sgemm failed");
}

static void run_blas(void *ctx)
{
    Case *c = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->T, (int)c->l->n, (int)c->l->k,
                1.0f, c->x, (int)c->l->k, c->w, (int)c->l->k, 1.0f, c->y, (int)c->l->n);
}

/* After a batch of runs[r]: the libraries' idle threads leave the cores
 * to whatever runs next (OpenBLAS's are stopped; oneDNN's OpenMP threads
 * spin for a moment, then sleep). */
static void settle(int r)
{
    if (r == 3)
        bench_openblas_quiet();
    else if (r == 2)
        usleep(20000);
}

static void set_threads(int n)
{
    bench_openblas_threads(n);
    bench_dnnl_threads(n);
    bench_dcrt_threads(n);
}

/* --scaling: N-thread over 1-thread times at small T, alternating. */
static void scaling(const Layer *l, ExCpu *cp, ExCpu *obj, float **bufs, const float *x,
                    const float *w, const float *b, float *y, int reps, int threads,
                    double *logsum, int *count)
{
    static const int64_t Ts[] = {1, 2, 4, 8, 16};
    enum { NT = sizeof Ts / sizeof *Ts, ROUNDS = 3 };
    void (*runs[4])(void *) = {run_jit, run_aot, run_dnnl, run_blas};
    printf("%5s %16s %16s %16s %16s   (ms with 1 thread, %d-thread/1-thread time)\n", "T",
           "dcc JIT", "dcc AOT", "oneDNN", "OpenBLAS", threads);
    for (int i = 0; i < NT; i++) {
        double t[2][4][ROUNDS];
        for (int round = 0; round < ROUNDS; round++)
            for (int side = 0; side < 2; side++) {
                set_threads(side == 0 ? 1 : threads);
                for (int r = 0; r < 4; r++) {
                    Case c = {l, cp, obj, bufs, x, w, b, y, Ts[i]};
                    t[side][r][round] = bench_median_ms(reps, runs[r], &c);
                    settle(r);
                }
            }
        printf("%5lld", (long long)Ts[i]);
        for (int r = 0; r < 4; r++) {
            double one = bench_median(t[0][r], ROUNDS), many = bench_median(t[1][r], ROUNDS);
            printf(" %8.3f %6.2fx", one, many / one);
            if (r < 2) {
                logsum[r] += log(many / one);
                count[r]++;
            }
        }
        printf("\n");
    }
    set_threads(threads);
}

int main(int argc, char **argv)
{
    bench_openblas_coretype(argv);
    const char *mkspec = NULL, *records = NULL, *src = ".";
    int step = 8, reps = 15, rounds = 3, threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int64_t tmax = 128;
    bool scale = false;
    double scale_logs[2] = {0};
    int scale_count[2] = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--scaling") == 0) {
            scale = true;
            continue;
        }
        if (i + 1 < argc && strcmp(argv[i], "--mk") == 0) mkspec = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--records") == 0) records = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--step") == 0) step = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--tmax") == 0) tmax = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) reps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) threads = atoi(argv[++i]);
        else if (argv[i][0] != '-') src = argv[i];
        else {
            fprintf(stderr, "usage: dense [--mk SPEC | --records FILE] [--step S] [--tmax TMAX] "
                            "[--reps R] [--rounds N] [--threads N] [--scaling] [SRCDIR]\n");
            return 2;
        }
    }
    if (step < 1 || tmax < 1 || tmax > TMAX_LIMIT || reps < 1 || reps > 64 || rounds < 1 ||
        rounds > 20 || threads < 1 || (mkspec && records)) {
        fprintf(stderr, "dense: bad --step, --tmax (1..%d), --reps (1..64), --rounds (1..20) or "
                        "--threads, or both --mk and --records\n", TMAX_LIMIT);
        return 2;
    }
    set_threads(threads);
    const dnnl_version_t *dv = dnnl_version();
    printf("# dcc (JIT for this CPU; AOT: %s) against oneDNN %d.%d.%d\n"
           "# dnnl_sgemm and OpenBLAS cblas_sgemm (core %s), %d threads each; Y = X W^T + b, FP32\n"
           "# each cell: the best of %d rounds' medians of %d calls\n",
           records ? "the tuned object dcc --records writes, linked as a shared object"
                   : "the object of the default micro-kernels, linked in",
           dv->major, dv->minor, dv->patch, bench_openblas_core(), threads, rounds, reps);
    double logs[4] = {0}; /* jit/dnnl, jit/blas, aot/dnnl, aot/blas */
    int count = 0;
    /* the lowest JIT and AOT cells against oneDNN: the floor is per
     * (layer, T) */
    double low[2] = {INFINITY, INFINITY};
    const char *low_layer[2] = {"", ""};
    int64_t low_T[2] = {0, 0};
    for (int li = 0; li < NLAYERS; li++) {
        const Layer *l = &layers[li];
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/%s", src, l->path);
        FeUnit u;
        TeProgram *p = bench_load("dense", path, &u);
        MicroKernel *mks = NULL;
        if (mkspec) {
            mks = calloc((size_t)p->ntensors, sizeof *mks);
            for (int i = 0; i < p->ntensors; i++)
                if (!pass_parse_microkernel(mkspec, &mks[i], NULL))
                    die("--mk", mkspec);
        }
        TargetInfo ti = pass_target_info(PT_CPU);
        LoopProgram *lp;
        if (records) {
            StageSchedule *sched = calloc((size_t)p->ntensors + 1, sizeof *sched);
            char used[64];
            if (srch_schedule_from_records(p, records, "cpu", srch_host_arch(), sched, NULL, used,
                                           sizeof used, NULL, NULL, err, sizeof err) != 0)
                die(path, err);
            lp = pass_run_pipeline_sched(p, sched, &ti, NULL, err, sizeof err);
            free(sched);
        } else {
            lp = pass_run_pipeline(p, mks, &ti, NULL, err, sizeof err);
        }
        ExCpu *cp = lp ? ex_cpu_compile(lp, err, sizeof err) : NULL;
        if (!cp)
            die(l->name, err);
        int64_t n = l->n, k = l->k;
        float *x = malloc(sizeof(float) * (size_t)(tmax * k));
        float *w = malloc(sizeof(float) * (size_t)(n * k));
        float *b = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)(tmax * n));
        rt_rng_fill(1, rt_rng_hash("X"), x, (size_t)(tmax * k));
        rt_rng_fill(1, rt_rng_hash("W"), w, (size_t)(n * k));
        rt_rng_fill(1, rt_rng_hash("b"), b, (size_t)n);
        for (int64_t i = 0; i < tmax; i++)
            memcpy(y + i * n, b, sizeof(float) * (size_t)n);
        float **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
        for (int i = 0; i < p->ntensors; i++) {
            const char *tn = p->tensors[i]->name;
            bufs[i] = strcmp(tn, "X") == 0 ? x : strcmp(tn, "W") == 0 ? w : strcmp(tn, "b") == 0 ? b : y;
        }
        BenchObject *obj = records ? bench_object(p, path, records) : NULL;
        ExCpu *aot = obj ? obj->cp : NULL;
        printf("\n%s: T x %lld by %lld x %lld, micro-kernel ", l->name, (long long)k, (long long)k,
               (long long)n);
        ir_print_microkernel(stdout, &lp->kernels[0]->mk, 2);
        const Stage *st = &lp->stages[lp->nstages - 1];
        if (st->nvariants > 1)
            printf(" and %d more, dispatched by T", st->nvariants - 1);
        if (scale) {
            printf("\n");
            scaling(l, cp, aot, bufs, x, w, b, y, reps, threads, scale_logs, scale_count);
            goto next;
        }
        printf("%s\n%5s %9s %9s %9s %9s %8s %8s %8s %8s   (GFLOP/s)\n", mkspec ? " (JIT only)" : "",
               "T", "dcc JIT", "dcc AOT", "oneDNN", "OpenBLAS", "JIT/dnnl", "JIT/blas", "AOT/dnnl",
               "AOT/blas");
        int64_t Ts[TMAX_LIMIT + 1];
        int nt = 0;
        for (int64_t T = 1; T <= tmax; T = next_T(T, step, tmax))
            Ts[nt++] = T;
        for (int i = 0; obj && i < nt; i++)
            bench_object_check(obj, cp, &Ts[i], bufs, (size_t)(Ts[i] * n));
        static double t[4][TMAX_LIMIT + 1];
        void (*runs[4])(void *) = {run_jit, run_aot, run_dnnl, run_blas};
        for (int round = 0; round < rounds; round++)
            for (int r = 0; r < 4; r++)
                for (int i = 0; i < nt; i++) {
                    if (r == 1 && mkspec) {
                        t[r][i] = NAN;
                        continue;
                    }
                    Case c = {l, cp, aot, bufs, x, w, b, y, Ts[i]};
                    bench_round_ms(&t[r][i], round, reps, runs[r], &c);
                    if (i == nt - 1)
                        settle(r);
                }
        for (int i = 0; i < nt; i++) {
            double flop = 2.0 * (double)Ts[i] * (double)n * (double)k, g[4];
            for (int r = 0; r < 4; r++)
                g[r] = flop / t[r][i] / 1e6;
            printf("%5lld %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f %8.2f %8.2f\n", (long long)Ts[i], g[0],
                   g[1], g[2], g[3], g[0] / g[2], g[0] / g[3], g[1] / g[2], g[1] / g[3]);
            for (int r = 0; r < 2; r++)
                if (g[r] / g[2] < low[r]) {
                    low[r] = g[r] / g[2];
                    low_layer[r] = l->name;
                    low_T[r] = Ts[i];
                }
            logs[0] += log(g[0] / g[2]);
            logs[1] += log(g[0] / g[3]);
            logs[2] += log(g[1] / g[2]);
            logs[3] += log(g[1] / g[3]);
            count++;
        }
    next:
        free(bufs);
        free(mks);
        free(x);
        free(w);
        free(b);
        free(y);
        ex_cpu_destroy(cp);
        bench_object_close(obj);
        fe_unload(&u);
    }
    if (scale) {
        printf("\ngeometric mean of the %d-thread/1-thread time at T <= 16: JIT %.2fx, AOT %.2fx\n",
               threads, exp(scale_logs[0] / scale_count[0]), exp(scale_logs[1] / scale_count[1]));
        return 0;
    }
    printf("\ngeometric mean over %d (layer, T): JIT %.2fx oneDNN, %.2fx OpenBLAS", count,
           exp(logs[0] / count), exp(logs[1] / count));
    if (!mkspec)
        printf("; AOT %.2fx oneDNN, %.2fx OpenBLAS", exp(logs[2] / count), exp(logs[3] / count));
    printf("\nlowest JIT cell: %.2fx oneDNN (%s, T = %lld)", low[0], low_layer[0],
           (long long)low_T[0]);
    if (!mkspec)
        printf("; lowest AOT cell: %.2fx oneDNN (%s, T = %lld)", low[1], low_layer[1],
               (long long)low_T[1]);
    printf("\n");
    return 0;
}
