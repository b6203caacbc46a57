/* bench/common.c: see common.h. */
#include "common.h"

#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
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

void bench_round_ms(double *best, int round, int reps, void (*run)(void *), void *ctx)
{
    double m = bench_median_ms(reps, run, ctx);
    if (round == 0 || m < *best)
        *best = m;
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

/* The tune's progress: one line rewritten on a terminal; into a log (a
 * benchmark's stderr is often a file), a line every 30 s of the tune. */
static void progress(void *ud, const SrchProgress *p)
{
    (void)ud;
    static int tty = -1;
    static double last = -1;
    if (tty < 0)
        tty = isatty(2);
    if (tty)
        fprintf(stderr, "\r\033[K  %s: %d/%d measured, %.0f s, ~%.0f s left", p->phase, p->done,
                p->total, p->elapsed_s, p->eta_s);
    else if (last < 0 || p->elapsed_s < last || p->elapsed_s - last >= 30) {
        fprintf(stderr, "  %s %s: %d/%d measured, %.0f s\n", p->stage, p->phase, p->done,
                p->total, p->elapsed_s);
        last = p->elapsed_s;
    }
}

static void warn(void *ud, const char *msg)
{
    (void)ud;
    fprintf(stderr, "\nwarning: %s\n", msg);
}

BenchTuned bench_tune(TeProgram *p, SrchTuneOpts *o, bool last)
{
    char err[1024];
    o->backend = "cpu";
    o->progress = progress;
    o->warn = warn;
    fprintf(stderr, "%s search, %d trials%s:\n", o->per_shape ? "per-shape" : "joint", o->trials,
            o->per_shape ? " per shape" : "");
    SrchTuneResult *r = srch_tune(p, o, err, sizeof err);
    fputc('\n', stderr);
    if (!r) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    for (int i = 0; i < r->nfusion; i++) /* the search's close calls */
        fprintf(stderr, "fusion: %s %s (%.3f ms summed over the shapes, the other way %.3f)\n",
                r->fusion[i].tensor, r->fusion[i].materialized ? "materialised" : "inlined",
                r->fusion[i].ms, r->fusion[i].same ? r->fusion[i].ms : r->fusion[i].other_ms);
    const SrchStageResult *s = &r->stages[0];
    BenchTuned t = {r->seconds, s->measured + s->reused, s->select_measured + s->select_reused,
                    0, s->runs, s->dropped, s->checked, s->check_changed, r->nstages, r->nworkloads,
                    NULL};
    for (int k = 0; k < s->tree->nnodes; k++) {
        const SrchTreeNode *n = srch_tree_node(s->tree, k);
        t.kernels += n->kind == TN_LEAF && !srch_tree_uses(s->tree, n->kernel, k);
    }
    srch_tune_result_free(r);
    StageSchedule *sched = calloc((size_t)p->ntensors + 1, sizeof *sched);
    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lp = NULL;
    char used[64];
    if (srch_schedule_from_records(p, o->records, "cpu", srch_host_arch(), sched, NULL, used,
                                   sizeof used, NULL, NULL, err, sizeof err) != 0 ||
        !(lp = pass_run_pipeline_sched(p, sched, &ti, &(PipelineOpts){.release_consts = last}, err,
                                       sizeof err))) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    if (last) /* as dcc run: the weights only their packed panels read go */
        ir_te_release_unread_consts(p, lp);
    if (!(t.cp = ex_cpu_compile(lp, err, sizeof err))) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    free(sched);
    return t;
}

int bench_busy_start(void)
{
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        perror("bench: fork");
        exit(1);
    }
    if (pid == 0) {
        volatile unsigned long x = 0;
        while (getppid() == parent) /* the parent gone: the loop ends */
            for (int i = 0; i < 1 << 20; i++)
                x += (unsigned long)i;
        (void)x;
        _exit(0);
    }
    return (int)pid;
}

void bench_busy_stop(int pid)
{
    kill((pid_t)pid, SIGKILL);
    waitpid((pid_t)pid, NULL, 0);
}
