/* bench/tuning: DietCode's claim, measured in one run on one machine.
 *
 * The BERT-base QKV layer (examples/bert_qkv.tex: Y[T, 2304] = X[T, 768]
 * W^T + b) on the CPU target, or with --layer gpt2 GPT-2's (bench/layers/
 * gpt2_qkv.tex: Y[T, 2304] = X[T, 768] W + b, T = 1..256), tuned twice:
 *   joint      one search for the whole range (--trials N in all), then the
 *              measured selection at every T and the dispatch tree;
 *   per-shape  a search of N trials for each T on its own (the Ansor way).
 * Then the dispatched kernels of both (JIT-compiled for this CPU, as `dcc
 * run` does), the joint search's as an object too (`dcc --records
 * --emit=obj`, linked as a shared object and loaded; its launches and
 * output checked against the JIT's at every T first), oneDNN (dnnl_sgemm)
 * and OpenBLAS (cblas_sgemm), each of the two with the bias copied into Y
 * and beta = 1, same threads, are timed side by side at every T (dcc
 * first, then oneDNN, then OpenBLAS: the libraries' idle threads spin for
 * a while after a call). Prints the tuning times, the geometric-mean
 * latencies and the ratios: tuning time per-shape / joint, latency joint /
 * per-shape, and each (the joint one JIT and AOT) against oneDNN and
 * OpenBLAS.
 *
 *   tuning [--layer bert|gpt2] [--trials N] [--step S | --points P] [--reps R]
 *          [--keep DIR] [--busy] [--seeds A,B | --warm] [SRCDIR]
 *
 * --step S tunes and times T = 1, 1+S, ..., and the largest T instead of
 * every T; --points P tunes and times P values of T spread evenly over the
 * range (as `dcc tune --shapes T=1..256:P` takes them);
 * --seeds A,B tunes jointly twice, with seeds A and B, and times the two
 * dispatches in turns at every T instead (the search's stability);
 * --warm tunes QKV, then BERT FFN2 with all trials, half of them, and half
 * after a warm start from QKV's records, and times the three instead;
 * --keep DIR keeps the two records files there (a rerun with the same DIR
 * reuses them, so its tuning times are not comparable); --busy runs a
 * CPU-bound process beside every tuning run (not beside the timing of
 * what they chose: the question is whether the choices hold). Not a test.
 */
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

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

/* A dense layer Y[T, n] = X[T, k] W + b, W stored [n, k] (wt: Y = X W^T,
 * as torch.nn.Linear) or [k, n] (a Conv1D, as GPT-2's), T = 1..tmax. */
typedef struct Layer {
    const char *name, *title, *file;
    int n, k, tmax;
    bool wt;
} Layer;

static const Layer layers[] = {
    {"bert", "BERT QKV", "examples/bert_qkv.tex", 2304, 768, 128, true},
    {"gpt2", "GPT-2 QKV (c_attn)", "bench/layers/gpt2_qkv.tex", 2304, 768, 256, false},
};

enum { MAX_T = 256 };

typedef struct Prog {
    FeUnit u;
    TeProgram *p;
} Prog;

static Prog load(const char *path)
{
    Prog g;
    g.p = bench_load("tuning", path, &g.u);
    return g;
}

/* --busy: the CPU-bound process running beside each tuning run */
static bool busy;

static BenchTuned tune(Prog *g, bool per_shape, int trials, uint64_t seed, SrchRange *range,
                       const char *records)
{
    SrchTuneOpts o = {.trials = trials, .seed = seed, .per_shape = per_shape, .records = records,
                      .nranges = 1, .ranges = range};
    int pid = busy ? bench_busy_start() : 0;
    BenchTuned t = bench_tune(g->p, &o, false);
    if (busy)
        bench_busy_stop(pid);
    return t;
}

/* What a tuning run's timing saw: its runs dropped, its choices checked. */
static void print_noise(const char *who, const BenchTuned *t)
{
    printf("  %s: %lld of %lld timed runs dropped (%.1f%%); choice checked at %d points, %d "
           "changed\n", who, (long long)t->dropped, (long long)t->runs,
           t->runs ? 100.0 * (double)t->dropped / (double)t->runs : 0.0, t->checked, t->changed);
}

typedef struct Case {
    ExCpu *cp;
    int64_t T;
    float **bufs; /* X W b Y */
    const Layer *l;
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
    const Layer *l = c->l;
    float *Y = c->bufs[3];
    for (int64_t i = 0; i < c->T; i++)
        memcpy(Y + i * l->n, c->bufs[2], (size_t)l->n * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, l->wt ? CblasTrans : CblasNoTrans, (int)c->T, l->n,
                l->k, 1.0f, c->bufs[0], l->k, c->bufs[1], l->wt ? l->k : l->n, 1.0f, Y, l->n);
}

static void run_dnnl(void *ctx)
{
    Case *c = ctx;
    const Layer *l = c->l;
    float *Y = c->bufs[3];
    for (int64_t i = 0; i < c->T; i++)
        memcpy(Y + i * l->n, c->bufs[2], (size_t)l->n * sizeof(float));
    if (dnnl_sgemm('N', l->wt ? 'T' : 'N', c->T, l->n, l->k, 1.0f, c->bufs[0], l->k, c->bufs[1],
                   l->wt ? l->k : l->n, 1.0f, Y, l->n) != dnnl_success) {
        fprintf(stderr, "tuning: dnnl_sgemm failed\n");
        exit(1);
    }
}

/* Buffers for a dense layer Y[T, n] = X[T, k] W + b at T <= tmax: X W b
 * Y, seeded. */
static void dense_bufs(float *bufs[4], int64_t n, int64_t k, int64_t tmax)
{
    int64_t len[4] = {tmax * k, n * k, n, tmax * n};
    for (int i = 0; i < 4; i++) {
        bufs[i] = aligned_alloc(64, ((size_t)len[i] * sizeof(float) + 63) / 64 * 64);
        rt_rng_fill(9, (uint64_t)i, bufs[i], (size_t)len[i]);
    }
}

/* --warm: DietCode's second layer after a first. BERT QKV tuned with N
 * trials; then BERT FFN2 (Y[T, 768] = X[T, 3072] W^T + b: another
 * reduction, another width) tuned cold with N trials, cold with N/2 and
 * with N/2 after a warm start from QKV's records; the three dispatches
 * timed in turns at every T. */
static int warm(Prog *qkv, const char *srcdir, int trials, SrchRange *range, const int64_t *Ts,
                int nt, int reps, const char *dir, bool keep)
{
    char path[1100], rec[4][1100];
    const char *names[4] = {"qkv", "ffn2-full", "ffn2-half-cold", "ffn2-half-warm"};
    for (int k = 0; k < 4; k++)
        snprintf(rec[k], sizeof rec[k], "%s/%s.jsonl", dir, names[k]);
    snprintf(path, sizeof path, "%s/bench/layers/bert_ffn2.tex", srcdir);
    Prog ffn2 = load(path);
    int half = trials / 2 > 0 ? trials / 2 : 1;
    BenchTuned q = tune(qkv, false, trials, 1, range, rec[0]);
    BenchTuned t[3];
    t[0] = tune(&ffn2, false, trials, 1, range, rec[1]);
    t[1] = tune(&ffn2, false, half, 1, range, rec[2]);
    SrchTuneOpts o = {.trials = half, .seed = 1, .records = rec[3], .nranges = 1, .ranges = range,
                      .warm_start = rec[0]};
    t[2] = bench_tune(ffn2.p, &o, false);
    printf("BERT QKV tuned with %d trials (%.1f s), then BERT FFN2 three ways:\n", trials,
           q.seconds);
    const char *how[3] = {"cold, all trials", "cold, half the trials", "warm, half the trials"};
    int ntr[3] = {trials, half, half};
    for (int k = 0; k < 3; k++)
        printf("  %-22s %4d trials + %4d selection measurements, %d kernels, %6.1f s\n", how[k],
               ntr[k], t[k].select, t[k].kernels, t[k].seconds);
    float *bufs[4];
    dense_bufs(bufs, 768, 3072, 128);
    printf("%5s %12s %12s %12s\n", "T", "full ms", "half ms", "warm ms");
    double lg[3] = {0, 0, 0};
    for (int i = 0; i < nt; i++) {
        double r[3][3], m[3];
        for (int round = 0; round < 3; round++)
            for (int j = 0; j < 3; j++) {
                int k = (j + round + i) % 3; /* each first in turn */
                Case c = {t[k].cp, Ts[i], bufs, NULL};
                r[k][round] = bench_median_ms(reps, run_dcc, &c);
            }
        for (int k = 0; k < 3; k++) {
            m[k] = bench_median(r[k], 3);
            lg[k] += log(m[k]);
        }
        if (nt <= 40 || i % 8 == 0 || i == nt - 1)
            printf("%5lld %12.4f %12.4f %12.4f\n", (long long)Ts[i], m[0], m[1], m[2]);
    }
    for (int k = 0; k < 3; k++)
        lg[k] = exp(lg[k] / nt);
    printf("\ngeometric-mean latency: all trials %.4f ms, half cold %.4f ms (%.3fx), half warm "
           "%.4f ms (%.3fx; target <= 1.05x)\n", lg[0], lg[1], lg[1] / lg[0], lg[2],
           lg[2] / lg[0]);
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
    ex_cpu_destroy(q.cp);
    for (int k = 0; k < 3; k++)
        ex_cpu_destroy(t[k].cp);
    for (int k = 0; k < 4 && !keep; k++)
        unlink(rec[k]);
    return 0;
}

/* --seeds A,B: the joint search twice, with seeds A and B, then both
 * dispatches timed in turns at every T (three rounds of reps runs each,
 * the order swapped every round; the median of the rounds). */
static int stability(const Layer *l, Prog *g, int trials, const uint64_t seeds[2],
                     SrchRange *range, const int64_t *Ts, int nt, int reps, const char *dir,
                     bool keep)
{
    char rec[2][1100];
    BenchTuned t[2];
    for (int k = 0; k < 2; k++) {
        snprintf(rec[k], sizeof rec[k], "%s/seed%llu.jsonl", dir, (unsigned long long)seeds[k]);
        t[k] = tune(g, false, trials, seeds[k], range, rec[k]);
    }
    float *bufs[4];
    dense_bufs(bufs, l->n, l->k, l->tmax);
    printf("the joint search with %d trials, seeds %llu and %llu\n", trials,
           (unsigned long long)seeds[0], (unsigned long long)seeds[1]);
    for (int k = 0; k < 2; k++) {
        char who[64];
        printf("seed %llu: %4d trials + %4d selection measurements, %d kernels, %6.1f s\n",
               (unsigned long long)seeds[k], t[k].trials, t[k].select, t[k].kernels,
               t[k].seconds);
        snprintf(who, sizeof who, "seed %llu", (unsigned long long)seeds[k]);
        print_noise(who, &t[k]);
    }
    printf("%5s %12s %12s %8s\n", "T", "seed A ms", "seed B ms", "B / A");
    double lg[2] = {0, 0};
    for (int i = 0; i < nt; i++) {
        double m[2];
        /* the two in turns, round by round */
        double ra[3], rb[3];
        for (int r = 0; r < 3; r++) {
            Case a = {t[0].cp, Ts[i], bufs, l}, b = {t[1].cp, Ts[i], bufs, l};
            if ((r + i) % 2) {
                ra[r] = bench_median_ms(reps, run_dcc, &a);
                rb[r] = bench_median_ms(reps, run_dcc, &b);
            } else {
                rb[r] = bench_median_ms(reps, run_dcc, &b);
                ra[r] = bench_median_ms(reps, run_dcc, &a);
            }
        }
        m[0] = bench_median(ra, 3);
        m[1] = bench_median(rb, 3);
        if (nt <= 40 || i % 8 == 0 || i == nt - 1)
            printf("%5lld %12.4f %12.4f %8.3f\n", (long long)Ts[i], m[0], m[1], m[1] / m[0]);
        lg[0] += log(m[0]);
        lg[1] += log(m[1]);
    }
    double ga = exp(lg[0] / nt), gb = exp(lg[1] / nt);
    double gap = (ga > gb ? ga / gb : gb / ga) - 1;
    printf("\ngeometric-mean latency: seed %llu %.4f ms, seed %llu %.4f ms: %.1f%% apart "
           "(target <= 5%%)\n", (unsigned long long)seeds[0], ga, (unsigned long long)seeds[1], gb,
           100 * gap);
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
    for (int k = 0; k < 2; k++) {
        ex_cpu_destroy(t[k].cp);
        if (!keep)
            unlink(rec[k]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_openblas_coretype(argv);
    int trials = 32, step = 1, points = 0, reps = 9;
    uint64_t seeds[2] = {0, 0};
    bool warm_mode = false;
    const char *keep = NULL, *srcdir = ".", *layer = "bert";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--trials") == 0) trials = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--step") == 0) step = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--points") == 0) points = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--layer") == 0) layer = argv[++i];
        else if (strcmp(argv[i], "--busy") == 0) busy = true;
        else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) reps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--keep") == 0) keep = argv[++i];
        else if (strcmp(argv[i], "--warm") == 0) warm_mode = true;
        else if (i + 1 < argc && strcmp(argv[i], "--seeds") == 0) {
            char *end;
            seeds[0] = strtoull(argv[++i], &end, 10);
            seeds[1] = *end == ',' ? strtoull(end + 1, &end, 10) : 0;
            if (*end || !seeds[0] || !seeds[1] || seeds[0] == seeds[1]) {
                fprintf(stderr, "tuning: --seeds takes two different positive seeds, A,B\n");
                return 2;
            }
        }
        else if (argv[i][0] != '-') srcdir = argv[i];
        else {
            fprintf(stderr, "usage: tuning [--layer bert|gpt2] [--trials N] [--step S | --points P] "
                            "[--reps R] [--keep DIR] [--busy] [--seeds A,B | --warm] [SRCDIR]\n");
            return 2;
        }
    }
    const Layer *l = NULL;
    for (size_t k = 0; k < sizeof layers / sizeof layers[0]; k++)
        if (strcmp(layer, layers[k].name) == 0)
            l = &layers[k];
    if (!l || (warm_mode && l != &layers[0])) {
        fprintf(stderr, "tuning: --layer takes bert or gpt2 (--warm: bert)\n");
        return 2;
    }
    if (trials < 1 || step < 1 || reps < 1 || reps > 64 || points < 0 || points == 1 ||
        points > l->tmax || (points && step > 1)) {
        fprintf(stderr, "tuning: bad --trials, --step, --points (2..%d, not with --step) or "
                        "--reps (1..64)\n", l->tmax);
        return 2;
    }
    char path[1024], rec_joint[1100], rec_shape[1100], dir[1024];
    snprintf(path, sizeof path, "%s/%s", srcdir, l->file);
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
    int64_t Ts[MAX_T + 1];
    int nt = 0;
    if (points) /* as the tuner spreads a range's COUNT points */
        for (int i = 0; i < points; i++)
            Ts[nt++] = 1 + (int64_t)(l->tmax - 1) * i / (points - 1);
    else {
        for (int64_t T = 1; T < l->tmax; T += step)
            Ts[nt++] = T;
        Ts[nt++] = l->tmax;
    }
    int npts = nt;
    SrchRange range = {"T", 1, l->tmax, npts};
    printf("%s on the CPU: Y[T, %d] = X[T, %d] W%s + b, %d values of T in 1..%d, %d threads%s\n",
           l->title, l->n, l->k, l->wt ? "^T" : "", npts, l->tmax, threads,
           busy ? "; tuned with a CPU-bound process running beside it" : "");
    if (warm_mode) {
        int rc = warm(&g, srcdir, trials, &range, Ts, nt, reps, dir, keep != NULL);
        if (!keep)
            rmdir(dir);
        return rc;
    }
    if (seeds[0]) {
        int rc = stability(l, &g, trials, seeds, &range, Ts, nt, reps, dir, keep != NULL);
        if (!keep)
            rmdir(dir);
        return rc;
    }
    BenchTuned joint = tune(&g, false, trials, 1, &range, rec_joint);
    BenchTuned shape = tune(&g, true, trials, 1, &range, rec_shape);
    printf("joint search:     %5d trials + %4d selection measurements, %8.1f s\n", joint.trials,
           joint.select, joint.seconds);
    printf("per-shape search: %5d trials (%d per shape),            %8.1f s\n", shape.trials,
           trials, shape.seconds);
    print_noise("joint", &joint);
    print_noise("per-shape", &shape);

    /* the same buffers for all; all of dcc first, then oneDNN, then
     * OpenBLAS, whose idle threads spin for a while after each call (they
     * are stopped after it, and oneDNN's given 20 ms to sleep). The
     * sequence runs in ROUNDS rounds and each cell keeps its best round's
     * median, the same for every side: a core that goes missing for a few
     * hundred milliseconds would otherwise halve one column's cells */
    enum { ROUNDS = 3 };
    float *bufs[4];
    dense_bufs(bufs, l->n, l->k, l->tmax);
    BenchObject *obj = bench_object(g.p, path, rec_joint);
    for (int i = 0; i < nt; i++)
        bench_object_check(obj, joint.cp, &Ts[i], bufs, (size_t)Ts[i] * (size_t)l->n);
    double tj[MAX_T + 1], to[MAX_T + 1], ts[MAX_T + 1], tb[MAX_T + 1], td[MAX_T + 1];
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < nt; i++) {
            Case a = {joint.cp, Ts[i], bufs, l}, o = {obj->cp, Ts[i], bufs, l};
            Case b = {shape.cp, Ts[i], bufs, l};
            bench_round_ms(&tj[i], round, reps, run_dcc, &a);
            bench_round_ms(&to[i], round, reps, run_dcc, &o);
            bench_round_ms(&ts[i], round, reps, run_dcc, &b);
        }
        for (int i = 0; i < nt; i++) {
            Case c = {NULL, Ts[i], bufs, l};
            bench_round_ms(&td[i], round, reps, run_dnnl, &c);
        }
        usleep(20000);
        for (int i = 0; i < nt; i++) {
            Case c = {NULL, Ts[i], bufs, l};
            bench_round_ms(&tb[i], round, reps, run_blas, &c);
        }
        bench_openblas_quiet();
    }
    printf("\nOpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n", bench_openblas_core(),
           getenv("OPENBLAS_CORETYPE"));
    const dnnl_version_t *dv = dnnl_version();
    printf("oneDNN %d.%d.%d\n", dv->major, dv->minor, dv->patch);
    printf("%5s %10s %10s %10s %10s %10s %9s %9s\n", "T", "joint ms", "joint AOT", "shape ms",
           "oneDNN ms", "BLAS ms", "dnnl/jit", "dnnl/aot");
    double lj = 0, lo = 0, ls = 0, lb = 0, ld = 0, worst[2] = {INFINITY, INFINITY};
    int tworst[2] = {0, 0};
    for (int i = 0; i < nt; i++) {
        if (nt <= 40 || i % 8 == 0 || i == nt - 1)
            printf("%5lld %10.4f %10.4f %10.4f %10.4f %10.4f %9.2f %9.2f\n", (long long)Ts[i], tj[i],
                   to[i], ts[i], td[i], tb[i], td[i] / tj[i], td[i] / to[i]);
        lj += log(tj[i]);
        lo += log(to[i]);
        ls += log(ts[i]);
        lb += log(tb[i]);
        ld += log(td[i]);
        double r[2] = {td[i] / tj[i], td[i] / to[i]};
        for (int k = 0; k < 2; k++)
            if (r[k] < worst[k])
                worst[k] = r[k], tworst[k] = (int)Ts[i];
    }
    lj = exp(lj / nt), lo = exp(lo / nt), ls = exp(ls / nt), lb = exp(lb / nt), ld = exp(ld / nt);
    printf("\ngeometric-mean latency: joint %.4f ms (AOT %.4f ms), per-shape %.4f ms, oneDNN %.4f "
           "ms, OpenBLAS %.4f ms\n", lj, lo, ls, ld, lb);
    printf("speed against oneDNN (oneDNN / dcc):   joint %.2fx (worst %.2fx at T = %d), AOT %.2fx "
           "(worst %.2fx at T = %d), per-shape %.2fx\n", ld / lj, worst[0], tworst[0], ld / lo,
           worst[1], tworst[1], ld / ls);
    printf("tuning time, per-shape / joint:        %6.1fx  (target >= 64x over all 128 T of BERT)\n",
           shape.seconds / joint.seconds);
    printf("latency, joint / per-shape:            %6.3fx  (target <= 1.05x)\n", lj / ls);
    printf("speed against OpenBLAS (BLAS / dcc):   joint %.2fx, AOT %.2fx, per-shape %.2fx  "
           "(target >= 1.0x)\n", lb / lj, lb / lo, lb / ls);
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
    ex_cpu_destroy(joint.cp);
    ex_cpu_destroy(shape.cp);
    bench_object_close(obj);
    if (!keep) {
        unlink(rec_joint);
        unlink(rec_shape);
        rmdir(dir);
    }
    return 0;
}
