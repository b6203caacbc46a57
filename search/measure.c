/* Measuring one stage built from one micro-kernel at one shape.
 *
 * The stage is lowered as a program of its own (ir_te_extract: the stage's
 * tensor as the output, what it reads as inputs), so only its launches are
 * timed, through the same executors `dcc run` uses (exec/): on the CPU the
 * object's NAME_run_packed JIT-compiled, on the GPU NAME_launch_packed.
 * Each candidate lives in an arena and a piece of JIT code of its own,
 * kept while it may be measured again (the selection step measures a
 * candidate at many shapes) and freed when the least recently used of
 * MAX_BUILT gives way, so memory stays flat however many trials a search
 * takes. A tensor's buffer is allocated, for the largest shape, when a
 * stage using it is first timed, and filled with seeded random values; a
 * stage's inputs are the original program's buffers of the same tensors.
 *
 *   cpu    one warm-up run, then runs until enough of them are quiet
 *          (undisturbed: no involuntary context switch of this process's
 *          threads while it ran, getrusage; and within SRCH_QUIET_BAND
 *          of the fastest) and their spread is small or the budget (20
 *          ms unless set) has run, at most SRCH_BUSY_BUDGETS budgets or
 *          SRCH_MAX_REPEATS runs, wall clock; the disturbed runs, the
 *          slow ones and the outliers dropped (srch_time_batch). The
 *          candidates a step asks for together are timed interleaved, one
 *          run each per turn, the order reversed each turn, so that a
 *          stretch in which the machine is busy slows all of them alike.
 *   cuda   two warm-ups (the second captures a CUDA graph when the
 *          call has several launches), then 5 runs timed with CUDA events.
 *   model  no hardware: the analytic time of the lowered kernels
 *          (search/cost.c), with the registers ptxas (search/ptxas.c)
 *          reports when it is installed, and a penalty for spills.
 */
#include "dietcode/exec.h"
#include "dietcode/search.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a joint search's trials (up to 64) all stay built for its selection,
 * which measures them again at many shapes (a build costs tens of ms);
 * twice that for the searches side by side under mpirun, whose
 * candidates a measuring rank builds for ptxas's reports before it
 * measures some of them (search/mpi.c) */
enum { MAX_BUILT = 128 };

typedef enum Backend { BK_CPU, BK_CUDA, BK_MODEL } Backend;

typedef struct Built {
    const Tensor *stage;    /* the original program's tensor */
    MicroKernel mk;
    TeProgram *prog;        /* the stage alone: its own arena */
    Tensor **map;           /* original tensor id -> its copy in prog, or NULL */
    LoopProgram *lp;
    ExCpu *cpu;
    ExCuda *cuda;
    bool have_ptx;          /* GPU backends: ptxas's report, when ptxas exists */
    SrchPtxInfo ptx;
    uint64_t used;          /* when last asked for: the least recent goes first */
} Built;

struct SrchMeasurer {
    Backend bk;
    const char *arch;
    TeProgram *p;
    const SrchTarget *tg;
    bool *materialized;     /* per tensor id, as pass_inline decides */
    float **bufs;           /* cpu: per tensor id */
    float **base;           /* what bufs[i] lies in (allocated) */
    uint64_t *dbufs;        /* cuda */
    int64_t *shapes;        /* the shape points the buffers serve (nshapes rows) */
    int nshapes;
    Built built[MAX_BUILT];
    int nbuilt;
    uint64_t clock;
    SrchTiming timing;      /* cpu: how long to repeat */
    int64_t index_bound;    /* integer buffers hold values below it (0: any) */
};

static void unbuild(Built *b)
{
    ex_cpu_destroy(b->cpu);
    ex_cuda_destroy(b->cuda);
    ir_te_destroy(b->prog);
    free(b->map);
    memset(b, 0, sizeof *b);
}

void srch_measurer_free(SrchMeasurer *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nbuilt; i++)
        unbuild(&m->built[i]);
    for (int i = 0; m->base && i < m->p->ntensors; i++)
        free(m->base[i]);
    for (int i = 0; m->dbufs && i < m->p->ntensors; i++)
        rt_cuda_free(m->dbufs[i]);
    free(m->bufs);
    free(m->base);
    free(m->dbufs);
    free(m->shapes);
    free(m->materialized);
    free(m);
}

/* Where tensor t's CPU buffer starts past a 64-byte boundary, in floats.
 * Intermediates live in the workspace (DCRT_ALIGN aligned). A program's
 * inputs and outputs are the caller's, which the ABI only asks to be
 * 16-byte aligned, and a large malloc'd or numpy buffer is exactly that:
 * 16 bytes past a page. Measured there, a kernel whose vector loads of a
 * caller's buffer straddle cache lines (about 30% slower for a dot-product
 * kernel over W) is timed as users will run it. */
static size_t caller_offset(const SrchMeasurer *m, const Tensor *t)
{
    return m->bk == BK_CPU && t->kind != TK_TEMP ? 16 / sizeof(float) : 0;
}

/* Brings tensor i's first n elements below the index bound, if integers
 * (ir_te_index_bound: integer tensors measured so index every table in
 * range, so no measurement stops at a failed check). A stage that
 * computes integers (GPT-2's mask indices) leaves values for its shape in
 * its buffer; they are brought below it again after each run, since the
 * next stage measured may read them at another shape. */
static void within_bound(const SrchMeasurer *m, int i, int64_t n)
{
    ir_bound_indices(m->p->tensors[i]->dtype, m->bufs[i], n, m->index_bound);
}

SrchMeasurer *srch_measurer_new(const char *backend, const char *arch, TeProgram *p,
                                const SrchTarget *tg, const int64_t *shapes, int nshapes,
                                char *err, size_t errlen)
{
    Backend bk = strcmp(backend, "cpu") == 0    ? BK_CPU
                 : strcmp(backend, "cuda") == 0 ? BK_CUDA
                 : strcmp(backend, "model") == 0 ? BK_MODEL
                                                 : (Backend)-1;
    if ((int)bk < 0) {
        srch_seterr(err, errlen, "unknown measurement backend '%s' (cpu, cuda or model)", backend);
        return NULL;
    }
    if (bk == BK_CUDA && rt_cuda_init(err, errlen) != DCRT_OK)
        return NULL;
    SrchMeasurer *m = calloc(1, sizeof *m);
    int nt = p->ntensors ? p->ntensors : 1;
    m->bk = bk;
    m->timing = (SrchTiming){.budget_ms = 20.0};
    m->arch = arch ? arch : "sm_80";
    m->p = p;
    m->tg = tg;
    m->materialized = calloc((size_t)nt, sizeof *m->materialized);
    Expr **bodies = calloc((size_t)nt, sizeof *bodies);
    pass_inline(p, bodies, m->materialized);
    free(bodies);
    if (bk == BK_MODEL)
        return m;
    /* buffers for the largest of the shapes */
    m->bufs = calloc((size_t)nt, sizeof *m->bufs);
    m->base = calloc((size_t)nt, sizeof *m->base);
    m->dbufs = calloc((size_t)nt, sizeof *m->dbufs);
    if (!m->bufs || !m->base || !m->dbufs) {
        srch_seterr(err, errlen, "out of memory for the measurement buffers");
        srch_measurer_free(m);
        return NULL;
    }
    m->index_bound = ir_te_index_bound(p, shapes, nshapes);
    size_t rows = sizeof *shapes * (size_t)nshapes * (size_t)(p->ndims ? p->ndims : 1);
    if (!(m->shapes = malloc(rows + 1))) {
        srch_seterr(err, errlen, "out of memory for the measurement buffers");
        srch_measurer_free(m);
        return NULL;
    }
    memcpy(m->shapes, shapes, rows);
    m->nshapes = nshapes;
    return m;
}

/* Lowers and compiles stage st with mk into b (empty); false and err. */
static bool build(SrchMeasurer *m, Built *b, const SrchStage *st, const MicroKernel *mk,
                  char *err, size_t errlen)
{
    const TeProgram *p = m->p;
    b->stage = st->t;
    b->mk = *mk;
    b->map = calloc((size_t)p->ntensors + 1, sizeof *b->map);
    b->prog = ir_te_extract(p, st->t, m->materialized, false, b->map);
    const Tensor *out = b->map[st->t->id];
    StageSchedule *sched = IR_NEWN(b->prog->arena, StageSchedule, b->prog->ntensors);
    sched[out->id] = (StageSchedule){1, mk, NULL};
    if (!(b->lp = pass_run_pipeline_sched(b->prog, sched, &m->tg->ti, NULL, err, errlen)))
        return false;
    if (m->bk == BK_CPU)
        return (b->cpu = ex_cpu_compile(b->lp, err, errlen)) != NULL;
    if (m->bk == BK_CUDA && !(b->cuda = ex_cuda_compile(b->lp, m->arch, true, err, errlen)))
        return false;
    if (srch_ptxas_path()) {
        /* the stage's first kernel: the one computing the reduction */
        const Kernel *k = b->lp->kernels[b->lp->stages[0].variants[0].first];
        char perr[256];
        char *ptx = cg_emit_ptx(b->lp, m->arch, true, err, errlen);
        if (!ptx)
            return false;
        b->have_ptx = srch_ptxas_info(ptx, m->arch, k->name, &b->ptx, perr, sizeof perr);
        free(ptx);
    }
    return true;
}

static Built *find_built(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk)
{
    for (int i = 0; i < m->nbuilt; i++)
        if (m->built[i].stage == st->t && ir_microkernel_cmp(&m->built[i].mk, mk) == 0)
            return &m->built[i];
    return NULL;
}

/* An empty entry of m->built: a new one, or the least recently used one
 * freed. */
static Built *free_slot(SrchMeasurer *m)
{
    if (m->nbuilt < MAX_BUILT)
        return &m->built[m->nbuilt++];
    Built *b = &m->built[0];
    for (int i = 1; i < m->nbuilt; i++)
        if (m->built[i].used < b->used)
            b = &m->built[i];
    unbuild(b);
    return b;
}

/* Entry b of m->built given back (a failed build): the last entry moves
 * into its place. */
static void drop_built(SrchMeasurer *m, Built *b)
{
    unbuild(b);
    *b = m->built[--m->nbuilt];
    memset(&m->built[m->nbuilt], 0, sizeof *b);
}

/* The candidate (st, mk), built on first use, the least recently used one
 * freed to make room. */
static Built *built(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk, char *err,
                    size_t errlen)
{
    Built *b = find_built(m, st, mk);
    if (!b) {
        b = free_slot(m);
        if (!build(m, b, st, mk, err, errlen)) {
            drop_built(m, b);
            return NULL;
        }
    }
    b->used = ++m->clock;
    return b;
}

/* Tensor i's buffer for the largest of the shape points, made on first
 * use (a stage run reads and writes only its own: of a model's identical
 * layers, those of the one that is measured), filled with seeded random
 * values (integers within the index bound); false and err. */
static bool buffer(SrchMeasurer *m, int i, char *err, size_t errlen)
{
    if (m->bufs[i])
        return true;
    const TeProgram *p = m->p;
    const Tensor *t = p->tensors[i];
    int64_t numel = 1;
    for (int s = 0; s < m->nshapes; s++) {
        int64_t n = ir_te_numel(t, m->shapes + (size_t)s * (size_t)p->ndims);
        if (n < 0 || n > INT64_MAX / 8) {
            srch_seterr(err, errlen, "tensor %s is too large to measure", t->name);
            return false;
        }
        if (n > numel)
            numel = n;
    }
    size_t bytes = ((size_t)numel * (size_t)ir_dtype_size(t->dtype) + 63) / 64 * 64;
    m->base[i] = aligned_alloc(64, bytes + 64);
    if (!m->base[i]) {
        srch_seterr(err, errlen, "out of memory for tensor %s (%zu bytes)", t->name, bytes);
        return false;
    }
    m->bufs[i] = m->base[i] + caller_offset(m, t);
    rt_rng_fill_elems(0x5eed, (uint64_t)i, (int32_t)t->dtype, m->bufs[i], (size_t)numel);
    within_bound(m, i, numel);
    if (m->bk == BK_CUDA &&
        (rt_cuda_alloc(&m->dbufs[i], bytes, err, errlen) != DCRT_OK ||
         rt_cuda_copy_to_device(m->dbufs[i], m->bufs[i], bytes, err, errlen) != DCRT_OK)) {
        /* not made: the next stage that uses it tries again */
        rt_cuda_free(m->dbufs[i]);
        free(m->base[i]);
        m->dbufs[i] = 0;
        m->base[i] = m->bufs[i] = NULL;
        return false;
    }
    return true;
}

/* The buffers of every tensor b reads or writes, made before it is timed;
 * false and err. */
static bool buffers(SrchMeasurer *m, const Built *b, char *err, size_t errlen)
{
    for (int i = 0; m->bk != BK_MODEL && i < m->p->ntensors; i++)
        if (b->map[i] && !buffer(m, i, err, errlen))
            return false;
    return true;
}

/* Runs b once at dims; -1 and err on failure. */
static int run(SrchMeasurer *m, Built *b, const int64_t *dims, float *ms, char *err,
               size_t errlen)
{
    int n = b->prog->ntensors;
    float *bufs[n + 1];
    uint64_t dbufs[n + 1];
    for (int i = 0; i < m->p->ntensors; i++)
        if (b->map[i]) {
            bufs[b->map[i]->id] = m->bufs[i];
            dbufs[b->map[i]->id] = m->dbufs[i];
        }
    if (b->cuda)
        return ex_cuda_run(b->cuda, dims, dbufs, 0, NULL, ms, err, errlen);
    return ex_cpu_run(b->cpu, dims, bufs, NULL, err, errlen);
}

/* ---- noise-aware timing ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1, linear between ranks) of n sorted values. */
static double quantile(const double *s, int n, double q)
{
    double r = q * (n - 1);
    int i = (int)r;
    return i + 1 < n ? s[i] + (r - i) * (s[i + 1] - s[i]) : s[n - 1];
}

/* A copy of t sorted, in s (n entries). */
static void sorted(const double *t, int n, double *s)
{
    memcpy(s, t, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
}

double srch_spread(const double *t, int n)
{
    if (n < 2)
        return INFINITY;
    double s[n];
    sorted(t, n, s);
    double med = quantile(s, n, 0.5);
    return med > 0 ? (quantile(s, n, 0.75) - quantile(s, n, 0.25)) / med : INFINITY;
}

int srch_drop_outliers(double *t, int n)
{
    if (n < 2)
        return n;
    double s[n], dev[n];
    sorted(t, n, s);
    /* slow runs: timed while another process had a core this one needed
     * (the fastest run is the machine undisturbed, whatever the load) */
    double quiet = s[0] * (1 + SRCH_QUIET_BAND);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (t[i] <= quiet)
            t[k++] = t[i];
    n = k;
    if (n < 4)
        return n;
    sorted(t, n, s);
    double med = quantile(s, n, 0.5);
    for (int i = 0; i < n; i++)
        dev[i] = fabs(t[i] - med);
    qsort(dev, (size_t)n, sizeof *dev, cmp_double);
    /* the median absolute deviation, scaled to a normal's sigma, and never
     * below half a percent of the median: identical runs are not noise */
    double sigma = 1.4826 * quantile(dev, n, 0.5);
    if (sigma < 0.005 * med)
        sigma = 0.005 * med;
    k = 0;
    for (int i = 0; i < n; i++)
        if (fabs(t[i] - med) <= SRCH_OUTLIER_SIGMAS * sigma)
            t[k++] = t[i];
    return k;
}

/* The runs that count of n runs t, preempted pre[i] times each: the
 * undisturbed ones (when every one was disturbed and all is true, the
 * least disturbed: the best there is), then the slow ones and the
 * outliers dropped; into q, their number. */
static int counted(const double *t, const int *pre, int n, bool all, double *q)
{
    int least = 0, k = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || pre[i] < least)
            least = pre[i];
    for (int i = 0; i < n && (least == 0 || all); i++)
        if (pre[i] == least)
            q[k++] = t[i];
    return srch_drop_outliers(q, k);
}

/* o's runs reduced to those that count (counted), the rest dropped. */
static void keep_counted(SrchTimed *o, const int *pre)
{
    double q[SRCH_MAX_REPEATS];
    int kept = counted(o->times_ms, pre, o->ntimes, true, q);
    memcpy(o->times_ms, q, sizeof *q * (size_t)kept);
    o->ndropped = o->ntimes - kept;
    o->ntimes = kept;
}

/* Whether a runner, with its runs t so far, is timed enough by tm: at
 * least lo runs that count (a run another process disturbed, or one of
 * a slow stretch, does not), and those within tol of each other or its
 * budget spent; on a machine that stays busy, SRCH_BUSY_BUDGETS budgets
 * at most; never more than hi runs. */
static bool timed_enough(const double *t, const int *pre, int n, double total, int lo, int hi,
                         double tol, double budget)
{
    if (n >= hi)
        return true;
    double q[SRCH_MAX_REPEATS];
    int nq = counted(t, pre, n, false, q);
    if (nq >= lo && (total >= budget || srch_spread(q, nq) <= tol))
        return true;
    return n >= lo && total >= SRCH_BUSY_BUDGETS * budget;
}

void srch_time_batch(int n, SrchRunOnce once, void *const *ud, const SrchTiming *tm,
                     const double *cutoff_ms, SrchTimed *out)
{
    int lo = tm->min_runs > 0 ? tm->min_runs : 3;
    int hi = tm->max_runs > 0 && tm->max_runs < SRCH_MAX_REPEATS ? tm->max_runs : SRCH_MAX_REPEATS;
    double tol = tm->spread > 0 ? tm->spread : SRCH_SPREAD;
    if (lo > hi)
        lo = hi;
    bool done[n + 1];
    int lo_of[n + 1]; /* lo, or 2 after a warm-up that took the budget */
    int pre[n + 1][SRCH_MAX_REPEATS];
    double total[n + 1];
    int left = 0;
    for (int k = 0; k < n; k++) {
        SrchTimed *o = &out[k];
        *o = (SrchTimed){.ntimes = 0};
        total[k] = 0;
        /* the warm-ups; the first one's time decides the cutoff (a later
         * one may capture a graph, which costs more than the run), taken
         * again when it was disturbed and over */
        double first = 0, again;
        int rc = 0;
        double cut = cutoff_ms && cutoff_ms[k] > 0 ? cutoff_ms[k] : INFINITY;
        for (int w = 0; w < (tm->warmups > 1 ? tm->warmups : 1) && rc >= 0; w++)
            rc = once(ud[k], w == 0 ? &first : &again, o->err, sizeof o->err);
        if (rc > 0 && first > cut &&
            (rc = once(ud[k], &again, o->err, sizeof o->err)) >= 0 && again < first)
            first = again;
        bool ok = rc >= 0;
        lo_of[k] = tm->min_runs <= 0 && first >= tm->budget_ms && lo > 2 ? 2 : lo;
        done[k] = !ok || first > cut;
        if (ok && done[k])
            o->times_ms[o->ntimes++] = first; /* hopeless: one run */
        o->failed = !ok;
        left += !done[k];
    }
    /* in turns, one run each, the order reversed every turn: what slows
     * the machine for a while slows all alike */
    for (int turn = 0; left > 0; turn++)
        for (int i = 0; i < n; i++) {
            int k = turn % 2 ? n - 1 - i : i;
            SrchTimed *o = &out[k];
            if (done[k])
                continue;
            double t;
            int rc = once(ud[k], &t, o->err, sizeof o->err);
            if (rc < 0) {
                o->failed = true;
                done[k] = true;
                left--;
                continue;
            }
            pre[k][o->ntimes] = rc;
            o->times_ms[o->ntimes++] = t;
            total[k] += t;
            if (timed_enough(o->times_ms, pre[k], o->ntimes, total[k], lo_of[k], hi, tol,
                             tm->budget_ms))
                done[k] = true, left--;
        }
    for (int k = 0; k < n; k++) {
        SrchTimed *o = &out[k];
        if (o->failed)
            o->ntimes = 0;
        else if (o->ntimes > 1) /* a hopeless one's single run stands */
            keep_counted(o, pre[k]);
    }
}

int srch_time_runs(SrchRunOnce once, void *ud, const SrchTiming *tm, double cutoff_ms,
                   double *times_ms, int *ntimes, char *err, size_t errlen)
{
    SrchTimed o;
    srch_time_batch(1, once, &ud, tm, &cutoff_ms, &o);
    if (o.failed) {
        srch_seterr(err, errlen, "%s", o.err);
        return -1;
    }
    memcpy(times_ms, o.times_ms, sizeof *times_ms * (size_t)o.ntimes);
    *ntimes = o.ntimes;
    return 0;
}

int srch_time_turns(int n, SrchRunOnce once, void *const *ud, int turns, int runs,
                    SrchTimed *out, char *err, size_t errlen)
{
    int pre[n + 1][SRCH_MAX_REPEATS];
    for (int k = 0; k < n; k++) {
        double warm;
        out[k] = (SrchTimed){.ntimes = 0};
        if (once(ud[k], &warm, err, errlen) < 0)
            return -1;
    }
    for (int r = 0; r < turns; r++)
        for (int i = 0; i < n; i++) {
            int k = r % 2 ? n - 1 - i : i; /* a b, b a, a b, ... */
            for (int j = 0; j < runs; j++) {
                double t;
                int rc = once(ud[k], &t, err, errlen);
                if (rc < 0)
                    return -1;
                if (out[k].ntimes < SRCH_MAX_REPEATS) {
                    pre[k][out[k].ntimes] = rc;
                    out[k].times_ms[out[k].ntimes++] = t;
                }
            }
        }
    for (int k = 0; k < n; k++)
        keep_counted(&out[k], pre[k]);
    return 0;
}

typedef struct RunCtx {
    SrchMeasurer *m;
    Built *b;
    const int64_t *dims;
} RunCtx;

/* One run of a built candidate: wall clock on the CPU, CUDA's events on
 * the GPU, the analytic time on the model (with a penalty for spills:
 * local-memory traffic the model does not see). */
static int run_once(void *ud, double *ms, char *err, size_t errlen)
{
    RunCtx *c = ud;
    if (c->m->bk == BK_MODEL) {
        const Built *b = c->b;
        *ms = srch_model_ms(b->lp, c->m->arch, c->dims, b->have_ptx ? b->ptx.regs : 0, err,
                            errlen);
        if (b->have_ptx && b->ptx.stage_spill_bytes > 0) /* any of the stage's kernels */
            *ms *= 1.5;
        return *ms < 0 ? -1 : 0;
    }
    /* on the CPU, whether another process took a core from one of this
     * one's threads during the run: the involuntary context switches of
     * all its threads (the pool's) */
    float gpu_ms = 0;
    struct rusage u0, u1;
    getrusage(RUSAGE_SELF, &u0);
    double t0 = rt_now_ms();
    if (run(c->m, c->b, c->dims, &gpu_ms, err, errlen) != 0)
        return -1;
    if (c->m->bk == BK_CUDA) {
        *ms = gpu_ms;
        return 0;
    }
    *ms = rt_now_ms() - t0;
    getrusage(RUSAGE_SELF, &u1);
    const Tensor *out = c->b->stage;
    within_bound(c->m, out->id, ir_te_numel(out, c->dims));
    long n = u1.ru_nivcsw - u0.ru_nivcsw;
    return n > 0 ? (n < INT_MAX ? (int)n : INT_MAX) : 0;
}

/* How the backend repeats: the model is deterministic, CUDA's events
 * precise (five runs), the CPU as set. */
static SrchTiming timing_of(const SrchMeasurer *m)
{
    switch (m->bk) {
    case BK_MODEL: return (SrchTiming){.min_runs = 1, .max_runs = 1};
    /* two warm-ups: a call of several launches captures the CUDA graph
     * on its second run, and the timed ones replay it, as a user's do */
    case BK_CUDA: return (SrchTiming){.min_runs = 5, .max_runs = 5, .warmups = 2};
    default: return m->timing;
    }
}

typedef struct BuildJob {
    SrchMeasurer *m;
    Built *b;
    const SrchStage *st;
    MicroKernel mk;
    bool ok;
} BuildJob;

typedef struct BuildQueue {
    BuildJob *jobs;
    int n;
    atomic_int next;
} BuildQueue;

static void *build_worker(void *arg)
{
    BuildQueue *q = arg;
    for (int k; (k = atomic_fetch_add(&q->next, 1)) < q->n;) {
        BuildJob *j = &q->jobs[k];
        char err[512];
        j->ok = build(j->m, j->b, j->st, &j->mk, err, sizeof err);
    }
    return NULL;
}

/* The CPU candidates of a batch not built yet, built side by side on the
 * machine's cores: each build has its own program, arena and LLVM
 * context, and the JIT takes modules from several threads. One that fails
 * is left out, for built() to try again and say why. */
static void prebuild(SrchMeasurer *m, int n, const SrchStage *const *st, const MicroKernel *mk)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (m->bk != BK_CPU || ncpu < 2)
        return;
    BuildJob jobs[n + 1];
    int nj = 0;
    for (int k = 0; k < n; k++) { /* the batch's built ones kept from eviction */
        Built *b = find_built(m, st[k], &mk[k]);
        if (b)
            b->used = ++m->clock;
    }
    for (int k = 0; k < n; k++) {
        bool dup = find_built(m, st[k], &mk[k]) != NULL;
        for (int i = 0; i < nj && !dup; i++)
            dup = jobs[i].st->t == st[k]->t && ir_microkernel_cmp(&jobs[i].mk, &mk[k]) == 0;
        if (!dup)
            jobs[nj++] = (BuildJob){m, NULL, st[k], mk[k], false};
    }
    if (nj < 2)
        return;
    for (int i = 0; i < nj; i++) {
        jobs[i].b = free_slot(m);
        jobs[i].b->used = ++m->clock;
        jobs[i].b->stage = jobs[i].st->t; /* taken: not evicted for the next */
    }
    BuildQueue q = {jobs, nj, 0};
    int nt = (int)(ncpu < nj ? ncpu : nj), started = 0;
    pthread_t th[nt];
    for (int i = 1; i < nt; i++)
        started += pthread_create(&th[started], NULL, build_worker, &q) == 0;
    build_worker(&q);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    /* the failed ones' entries given back, the highest first: removing
     * one moves the last entry, which no other failed one is then */
    for (int s = m->nbuilt - 1; s >= 0; s--)
        for (int i = 0; i < nj; i++)
            if (jobs[i].b == &m->built[s] && !jobs[i].ok)
                drop_built(m, &m->built[s]);
}

void srch_measure_batch(SrchMeasurer *m, int n, const SrchStage *const *st,
                        const MicroKernel *mk, const int64_t *const *dims,
                        const double *cutoff_ms, SrchTimed *out)
{
    IR_ASSERT(n <= MAX_BUILT);
    prebuild(m, n, st, mk);
    /* all built first (a failed build moves another entry of m->built,
     * so the pointers are taken after) */
    for (int k = 0; k < n; k++) {
        out[k] = (SrchTimed){.ntimes = 0};
        out[k].failed = !built(m, st[k], &mk[k], out[k].err, sizeof out[k].err);
    }
    RunCtx c[n + 1];
    void *ud[n + 1];
    double cut[n + 1];
    SrchTimed got[n + 1];
    int live[n + 1], nlive = 0;
    for (int k = 0; k < n; k++) {
        if (out[k].failed)
            continue;
        c[nlive] = (RunCtx){m, built(m, st[k], &mk[k], out[k].err, sizeof out[k].err), dims[k]};
        if ((out[k].failed = !c[nlive].b || !buffers(m, c[nlive].b, out[k].err, sizeof out[k].err)))
            continue;
        ud[nlive] = &c[nlive];
        cut[nlive] = cutoff_ms ? cutoff_ms[k] : 0;
        live[nlive++] = k;
    }
    if (m->bk == BK_MODEL) { /* no warm-up to take, one exact time */
        for (int i = 0; i < nlive; i++) {
            SrchTimed *o = &out[live[i]];
            o->failed = run_once(&c[i], &o->times_ms[0], o->err, sizeof o->err) < 0;
            o->ntimes = !o->failed;
        }
        return;
    }
    SrchTiming tm = timing_of(m);
    srch_time_batch(nlive, run_once, ud, &tm, cut, got);
    for (int i = 0; i < nlive; i++)
        out[live[i]] = got[i];
}

int srch_measure(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk, const int64_t *dims,
                 double cutoff_ms, double *times_ms, int *ntimes, char *err, size_t errlen)
{
    SrchTimed o;
    srch_measure_batch(m, 1, &st, mk, &dims, &cutoff_ms, &o);
    *ntimes = o.ntimes;
    if (o.failed) {
        srch_seterr(err, errlen, "%s", o.err);
        return -1;
    }
    memcpy(times_ms, o.times_ms, sizeof *times_ms * (size_t)o.ntimes);
    return 0;
}

int srch_measure_turns(SrchMeasurer *m, const SrchStage *st, const MicroKernel *a,
                       const MicroKernel *b, const int64_t *dims, int turns, int runs,
                       SrchTimed out[2], char *err, size_t errlen)
{
    /* both built first: building one may evict the other's code otherwise */
    Built *ba = built(m, st, a, err, errlen), *bb = ba ? built(m, st, b, err, errlen) : NULL;
    if (!bb || !buffers(m, ba, err, errlen) || !buffers(m, bb, err, errlen))
        return -1;
    RunCtx c[2] = {{m, ba, dims}, {m, bb, dims}};
    if (m->bk == BK_MODEL) {
        for (int k = 0; k < 2; k++) {
            out[k] = (SrchTimed){.ntimes = 1};
            if (run_once(&c[k], &out[k].times_ms[0], err, errlen) < 0)
                return -1;
        }
        return 0;
    }
    void *ud[2] = {&c[0], &c[1]};
    return srch_time_turns(2, run_once, ud, turns, runs, out, err, errlen);
}

bool srch_measure_ptxinfo(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk,
                          SrchPtxInfo *out)
{
    if (m->bk == BK_CPU || !srch_ptxas_path())
        return false;
    char err[256];
    Built *b = built(m, st, mk, err, sizeof err);
    if (!b || !b->have_ptx)
        return false;
    *out = b->ptx;
    return true;
}

void srch_measurer_set_timing(SrchMeasurer *m, const SrchTiming *tm) { m->timing = *tm; }

SrchTiming srch_measurer_timing(const SrchMeasurer *m) { return m->timing; }
