/* Where a call's time goes: `dcc run --profile`.
 *
 * While a profile is started, libdcrt's launch hook records the time of
 * every CPU launch (runtime/dcrt.c times each around its thread-pool run),
 * by kernel. The table has a row per stage (the sum of its launches'
 * medians), and a row per launch under a stage that has several: the
 * median time, a rate and the share of the sum over all launches. The rate
 * of a stage with a reduction is in GFLOP/s: one per floating-point
 * operation of its body as its kernels evaluate it (inlined producers
 * included, reductions multiplying what they enclose, a reduction's combine
 * counted once a step); the rate of an elementwise stage in GB/s: the
 * materialised tensors it reads and the one it writes, each once.
 */
#include "dietcode/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ExProfile {
    const LoopProgram *lp;
    int nkernels;
    int *n, *cap;   /* per kernel: times recorded */
    double **ms;
    bool failed;    /* out of memory while recording */
};

static void record(void *ud, const DcrtProgram *p, const DcrtLaunch *l, double ms)
{
    ExProfile *pr = ud;
    (void)p;
    int k = l->kernel;
    if (k < 0 || k >= pr->nkernels || isnan(ms))
        return;
    if (pr->n[k] == pr->cap[k]) {
        int cap = pr->cap[k] ? 2 * pr->cap[k] : 16;
        double *m = realloc(pr->ms[k], sizeof *m * (size_t)cap);
        if (!m) {
            pr->failed = true;
            return;
        }
        pr->ms[k] = m;
        pr->cap[k] = cap;
    }
    pr->ms[k][pr->n[k]++] = ms;
}

ExProfile *ex_profile_start(const LoopProgram *lp, char *err, size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen))
        return NULL;
    ExProfile *pr = calloc(1, sizeof *pr);
    int nk = lp->nkernels;
    if (pr) {
        pr->lp = lp;
        pr->nkernels = nk;
        pr->n = calloc((size_t)nk + 1, sizeof *pr->n);
        pr->cap = calloc((size_t)nk + 1, sizeof *pr->cap);
        pr->ms = calloc((size_t)nk + 1, sizeof *pr->ms);
    }
    if (!pr || !pr->n || !pr->cap || !pr->ms) {
        ex_profile_free(pr);
        snprintf(err, errlen, "out of memory for a profile");
        return NULL;
    }
    dcrt_set_launch_hook(record, pr);
    return pr;
}

void ex_profile_stop(ExProfile *pr)
{
    void *ud;
    if (pr && dcrt_launch_hook(&ud) == record && ud == pr)
        dcrt_set_launch_hook(NULL, NULL);
}

void ex_profile_free(ExProfile *pr)
{
    if (!pr)
        return;
    ex_profile_stop(pr);
    for (int k = 0; pr->ms && k < pr->nkernels; k++)
        free(pr->ms[k]);
    free(pr->ms);
    free(pr->n);
    free(pr->cap);
    free(pr);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of kernel k's times, or NAN when it never ran. */
static double median(ExProfile *pr, int k)
{
    if (pr->n[k] == 0)
        return NAN;
    qsort(pr->ms[k], (size_t)pr->n[k], sizeof *pr->ms[k], by_value);
    return pr->ms[k][pr->n[k] / 2];
}

/* ---- work of a stage ---- */

typedef struct Work {
    const LoopProgram *lp;
    const int64_t *dims;
    double flops;
    bool reduces; /* the stage has a reduction */
    bool *read;   /* per tensor: a materialised tensor the stage reads */
} Work;

static void work_of(Work *w, const Expr *e, double evals)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return;
    case EX_LOAD: {
        const Tensor *t = e->load.t;
        if (t->kind == TK_TEMP && !w->lp->materialized[t->id])
            work_of(w, t->body, evals);
        else
            w->read[t->id] = true;
        return;
    }
    case EX_REDUCE:
        for (int i = 0; i < e->red.n; i++)
            evals *= (double)ir_eval_dims(e->red.axes[i]->extent, w->dims);
        w->flops += evals; /* the combine */
        w->reduces = true;
        work_of(w, e->red.body, evals);
        return;
    default:
        if (e->type == DT_F32 && e->kind != EX_CAST)
            w->flops += evals;
        if (e->op.a) work_of(w, e->op.a, evals);
        if (e->op.b) work_of(w, e->op.b, evals);
        if (e->op.c) work_of(w, e->op.c, evals);
        return;
    }
}

static double numel(const Tensor *t, const int64_t *dims)
{
    double n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (double)ir_eval_dims(t->shape[i], dims);
    return n;
}

/* "123.4 GFLOP/s" or "12.3 GB/s" for stage s taking ms. */
static void rate(const LoopProgram *lp, const Stage *st, const int64_t *dims, double ms,
                 bool *read, char *out, size_t n)
{
    const TeProgram *te = lp->te;
    memset(read, 0, sizeof *read * (size_t)te->ntensors);
    double size = numel(st->out, dims);
    Work w = {.lp = lp, .dims = dims, .read = read};
    work_of(&w, st->out->body, size);
    double bytes = 4 * size;
    for (int i = 0; i < te->ntensors; i++)
        if (read[i])
            bytes += 4 * numel(te->tensors[i], dims);
    if (!(ms > 0))
        snprintf(out, n, "-");
    else if (w.reduces)
        snprintf(out, n, "%.1f GFLOP/s", w.flops / (ms * 1e6));
    else
        snprintf(out, n, "%.1f GB/s", bytes / (ms * 1e6));
}

int ex_profile_print(FILE *out, ExProfile *pr, const int64_t *dims, char *err, size_t errlen)
{
    if (!IR_ARG_OK(out, err, errlen) || !IR_ARG_OK(pr, err, errlen) ||
        (pr->lp->te->ndims > 0 && !IR_ARG_OK(dims, err, errlen)))
        return -1;
    const LoopProgram *lp = pr->lp;
    const TeProgram *te = lp->te;
    if (pr->failed) {
        snprintf(err, errlen, "out of memory while profiling");
        return -1;
    }
    double *med = calloc((size_t)pr->nkernels + 1, sizeof *med);
    bool *read = calloc((size_t)te->ntensors + 1, sizeof *read);
    if (!med || !read) {
        free(med);
        free(read);
        snprintf(err, errlen, "out of memory for a profile");
        return -1;
    }
    double total = 0;
    int runs = 0;
    for (int k = 0; k < pr->nkernels; k++) {
        med[k] = median(pr, k);
        if (!isnan(med[k]))
            total += med[k];
        runs = pr->n[k] > runs ? pr->n[k] : runs;
    }
    fprintf(out, "profile of %s for", te->name);
    for (int i = 0; i < te->ndims; i++)
        fprintf(out, "%s %s = %lld", i ? "," : "", te->dims[i]->name, (long long)dims[i]);
    fprintf(out, ": the median of %d run%s of each launch\n", runs, runs == 1 ? "" : "s");
    fprintf(out, "%-28s %11s %16s %7s\n", "stage / launch", "median ms", "rate", "share");
    char r[64];
    for (int s = 0; s < lp->nstages; s++) {
        const Stage *st = &lp->stages[s];
        double ms = 0;
        int nl = 0;
        for (int k = 0; k < pr->nkernels; k++)
            if (lp->kernels[k]->stage == s && !isnan(med[k]))
                ms += med[k], nl++;
        if (nl == 0)
            continue;
        rate(lp, st, dims, ms, read, r, sizeof r);
        fprintf(out, "%-28s %11.4f %16s %6.1f%%\n", st->out->name, ms, r,
                total > 0 ? 100 * ms / total : 0.0);
        for (int k = 0; nl > 1 && k < pr->nkernels; k++)
            if (lp->kernels[k]->stage == s && !isnan(med[k]))
                fprintf(out, "  %-26s %11.4f %16s %6.1f%%\n", lp->kernels[k]->name, med[k], "",
                        total > 0 ? 100 * med[k] / total : 0.0);
    }
    fprintf(out, "%-28s %11.4f %16s %6.1f%%\n", "total (launches)", total, "", 100.0);
    free(med);
    free(read);
    return 0;
}
