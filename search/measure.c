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
 * takes. Buffers are allocated once, for the largest shape, and filled
 * with seeded random values; a stage's inputs are the original program's
 * buffers of the same tensors.
 *
 *   cpu    one warm-up run, then runs until the budget (20 ms unless set)
 *          or SRCH_MAX_REPEATS have passed (at least 3), wall clock.
 *   cuda   a warm-up, then 5 runs timed with CUDA events.
 *   model  no hardware: the analytic time of the lowered kernels
 *          (search/cost.c), with the registers ptxas (search/ptxas.c)
 *          reports when it is installed, and a penalty for spills.
 */
#include "dietcode/exec.h"
#include "dietcode/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_BUILT = 16 };

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
    uint64_t *dbufs;        /* cuda */
    Built built[MAX_BUILT];
    int nbuilt;
    uint64_t clock;
    double budget_ms;       /* cpu: keep repeating until this much has run */
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
    for (int i = 0; m->bufs && i < m->p->ntensors; i++)
        free(m->bufs[i]);
    for (int i = 0; m->dbufs && i < m->p->ntensors; i++)
        rt_cuda_free(m->dbufs[i]);
    free(m->bufs);
    free(m->dbufs);
    free(m->materialized);
    free(m);
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
    m->budget_ms = 20.0;
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
    m->dbufs = calloc((size_t)nt, sizeof *m->dbufs);
    for (int i = 0; i < p->ntensors; i++) {
        if (!m->materialized[i])
            continue;
        int64_t numel = 1;
        for (int s = 0; s < nshapes; s++) {
            int64_t n = ir_te_numel(p->tensors[i], shapes + (size_t)s * (size_t)p->ndims);
            if (n < 0 || n > INT64_MAX / 8) {
                srch_seterr(err, errlen, "tensor %s is too large to measure", p->tensors[i]->name);
                srch_measurer_free(m);
                return NULL;
            }
            if (n > numel)
                numel = n;
        }
        size_t bytes = ((size_t)numel * sizeof(float) + 63) / 64 * 64;
        m->bufs[i] = aligned_alloc(64, bytes);
        if (!m->bufs[i]) {
            srch_seterr(err, errlen, "out of memory for tensor %s (%zu bytes)",
                        p->tensors[i]->name, bytes);
            srch_measurer_free(m);
            return NULL;
        }
        rt_rng_fill(0x5eed, (uint64_t)i, m->bufs[i], (size_t)numel);
        if (bk == BK_CUDA &&
            (rt_cuda_alloc(&m->dbufs[i], bytes, err, errlen) != DCRT_OK ||
             rt_cuda_copy_to_device(m->dbufs[i], m->bufs[i], bytes, err, errlen) != DCRT_OK)) {
            srch_measurer_free(m);
            return NULL;
        }
    }
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

/* The candidate (st, mk), built on first use, the least recently used one
 * freed to make room. */
static Built *built(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk, char *err,
                    size_t errlen)
{
    Built *b = NULL;
    for (int i = 0; i < m->nbuilt && !b; i++)
        if (m->built[i].stage == st->t && ir_microkernel_cmp(&m->built[i].mk, mk) == 0)
            b = &m->built[i];
    if (!b) {
        if (m->nbuilt < MAX_BUILT) {
            b = &m->built[m->nbuilt++];
        } else {
            b = &m->built[0];
            for (int i = 1; i < m->nbuilt; i++)
                if (m->built[i].used < b->used)
                    b = &m->built[i];
            unbuild(b);
        }
        if (!build(m, b, st, mk, err, errlen)) {
            unbuild(b);
            *b = m->built[--m->nbuilt];
            memset(&m->built[m->nbuilt], 0, sizeof *b);
            return NULL;
        }
    }
    b->used = ++m->clock;
    return b;
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

static int time_cuda(SrchMeasurer *m, Built *b, const int64_t *dims, double *t, int *nt,
                     char *err, size_t errlen)
{
    for (int r = -1; r < 5; r++) {
        float ms = 0;
        if (run(m, b, dims, &ms, err, errlen) != 0)
            return -1;
        if (r >= 0)
            t[(*nt)++] = ms;
    }
    return 0;
}

int srch_measure(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk, const int64_t *dims,
                 double cutoff_ms, double *times_ms, int *ntimes, char *err, size_t errlen)
{
    *ntimes = 0;
    Built *b = built(m, st, mk, err, errlen);
    if (!b)
        return -1;
    if (m->bk == BK_MODEL) {
        double ms = srch_model_ms(b->lp, m->arch, dims, b->have_ptx ? b->ptx.regs : 0, err, errlen);
        if (ms < 0)
            return -1;
        if (b->have_ptx && b->ptx.spill_bytes > 0)
            ms *= 1.5; /* local-memory traffic the model does not see */
        times_ms[(*ntimes)++] = ms;
        return 0;
    }
    if (m->bk == BK_CUDA)
        return time_cuda(m, b, dims, times_ms, ntimes, err, errlen);
    double t0 = rt_now_ms();
    if (run(m, b, dims, NULL, err, errlen) != 0)
        return -1; /* the warm-up */
    double first = rt_now_ms() - t0;
    if (cutoff_ms > 0 && first > cutoff_ms) {
        times_ms[(*ntimes)++] = first;
        return 0;
    }
    double total = 0;
    while (*ntimes < SRCH_MAX_REPEATS && (*ntimes < 3 || total < m->budget_ms)) {
        t0 = rt_now_ms();
        if (run(m, b, dims, NULL, err, errlen) != 0)
            return -1;
        double t = rt_now_ms() - t0;
        times_ms[(*ntimes)++] = t;
        total += t;
    }
    return 0;
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

void srch_measurer_set_budget(SrchMeasurer *m, double ms) { m->budget_ms = ms; }
