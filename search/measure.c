/* Measuring one stage's kernel, built from one micro-kernel, at one shape.
 *
 * The program is lowered with that micro-kernel for the stage (defaults
 * for the others) and only the stage's kernel is timed, so the other
 * stages cost nothing. Lowerings and compiled kernels are kept per
 * micro-kernel: a candidate measured at many shapes (the selection step)
 * is lowered and compiled once. Buffers are allocated once, for the
 * largest shape, and filled with seeded random values.
 *
 *   cpu    JIT-compiled for the host; one warm-up run, then runs until the
 *          budget (20 ms unless set) or SRCH_MAX_REPEATS have passed (at
 *          least 3), wall clock.
 *   cuda   PTX through the driver; a warm-up, then 5 runs timed with events.
 *   model  no hardware: the analytic time flops / (prior x adaptation),
 *          with the occupancy registers allow and a spill penalty when
 *          ptxas (search/ptxas.c) reports on the kernel's PTX.
 */
#include "dietcode/codegen.h"
#include "dietcode/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum Backend { BK_CPU, BK_CUDA, BK_MODEL } Backend;

typedef struct Built {
    char *key;              /* stage name, '|', micro-kernel */
    LoopProgram *lp;
    int kernel;             /* index into lp->kernels */
    CgProgram *cp;          /* cpu */
    RtCuModule *mod;        /* cuda */
    RtCuFunction *fn;
    bool have_ptx;          /* GPU backends: ptxas's report, when ptxas exists */
    SrchPtxInfo ptx;
} Built;

struct SrchMeasurer {
    Backend bk;
    const char *arch;
    TeProgram *p;
    const SrchTarget *tg;
    MicroKernel *defaults;  /* per tensor id */
    float **bufs;           /* cpu: per tensor id */
    uint64_t *dbufs;        /* cuda */
    int nbuilt, capbuilt;
    Built *built;
    double budget_ms;       /* cpu: keep repeating until this much has run */
};

void srch_measurer_free(SrchMeasurer *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nbuilt; i++) {
        cg_program_destroy(m->built[i].cp);
        rt_cuda_unload_module(m->built[i].mod);
        free(m->built[i].key);
    }
    free(m->built);
    for (int i = 0; m->bufs && i < m->p->ntensors; i++)
        free(m->bufs[i]);
    for (int i = 0; m->dbufs && i < m->p->ntensors; i++)
        rt_cuda_free(m->dbufs[i]);
    free(m->bufs);
    free(m->dbufs);
    free(m->defaults);
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
    m->defaults = calloc((size_t)nt, sizeof *m->defaults);
    Expr **bodies = IR_NEWN(p->arena, Expr *, nt);
    bool *mat = IR_NEWN(p->arena, bool, nt);
    pass_inline(p, bodies, mat);
    for (int i = 0; i < p->ntensors; i++)
        if (p->tensors[i]->kind != TK_INPUT && mat[i])
            m->defaults[i] = pass_default_microkernel(p, p->tensors[i], bodies[i], &tg->ti);
    if (bk == BK_MODEL)
        return m;
    /* buffers for the largest of the shapes */
    m->bufs = calloc((size_t)nt, sizeof *m->bufs);
    m->dbufs = calloc((size_t)nt, sizeof *m->dbufs);
    for (int i = 0; i < p->ntensors; i++) {
        if (!mat[i] && p->tensors[i]->kind != TK_INPUT)
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

/* The lowering (and compiled code) of stage st with mk, built on first use. */
static Built *build(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk, char *err,
                    size_t errlen)
{
    char *mks = srch_mk_str(mk, st->rank);
    size_t klen = strlen(st->t->name) + strlen(mks) + 2;
    char *key = malloc(klen);
    snprintf(key, klen, "%s|%s", st->t->name, mks);
    free(mks);
    for (int i = 0; i < m->nbuilt; i++)
        if (strcmp(m->built[i].key, key) == 0) {
            free(key);
            return &m->built[i];
        }
    MicroKernel *all = calloc((size_t)m->p->ntensors + 1, sizeof *all);
    memcpy(all, m->defaults, sizeof *all * (size_t)m->p->ntensors);
    all[st->t->id] = *mk;
    LoopProgram *lp = pass_run_pipeline(m->p, all, &m->tg->ti, NULL, err, errlen);
    free(all);
    Built b = {key, lp, -1, NULL, NULL, NULL, false, {0, 0, 0}};
    for (int i = 0; lp && i < lp->nkernels; i++)
        if (lp->kernels[i]->out == st->t)
            b.kernel = i;
    if (!lp || b.kernel < 0) {
        if (lp)
            srch_seterr(err, errlen, "stage %s has no kernel", st->t->name);
        free(key);
        return NULL;
    }
    if (m->bk == BK_CPU && !(b.cp = cg_jit_compile(lp, err, errlen))) {
        free(key);
        return NULL;
    }
    if (m->bk != BK_CPU && (m->bk == BK_CUDA || srch_ptxas_path())) {
        char *ptx = cg_emit_ptx_text(lp, m->arch, err, errlen);
        int rc = ptx ? DCRT_OK : -1;
        const char *kname = lp->kernels[b.kernel]->name;
        char perr[256];
        if (ptx)
            b.have_ptx = srch_ptxas_info(ptx, m->arch, kname, &b.ptx, perr, sizeof perr);
        if (ptx && m->bk == BK_CUDA)
            rc = rt_cuda_load_module(ptx, &b.mod, err, errlen);
        free(ptx);
        if (rc == DCRT_OK && m->bk == BK_CUDA)
            rc = rt_cuda_get_function(b.mod, kname, &b.fn, err, errlen);
        if (rc != DCRT_OK) {
            rt_cuda_unload_module(b.mod);
            free(key);
            return NULL;
        }
    }
    if (m->nbuilt == m->capbuilt) {
        m->capbuilt = m->capbuilt ? 2 * m->capbuilt : 64;
        m->built = realloc(m->built, sizeof *m->built * (size_t)m->capbuilt);
    }
    m->built[m->nbuilt] = b;
    return &m->built[m->nbuilt++];
}

static int time_cuda(SrchMeasurer *m, Built *b, const int64_t *dims, double *t, int *nt,
                     char *err, size_t errlen)
{
    const Kernel *k = b->lp->kernels[b->kernel];
    void **args = cg_nvptx_launch_args(b->lp, dims, m->dbufs);
    if (!args) {
        srch_seterr(err, errlen, "out of memory");
        return -1;
    }
    int64_t nb = ir_eval_dims(k->body->loop.var->extent, dims);
    unsigned grid[3] = {(unsigned)nb, 1, 1}, block[3] = {(unsigned)k->nthreads, 1, 1};
    RtCuTimer *tm = NULL;
    int rc = rt_cuda_timer_new(&tm, err, errlen);
    for (int r = -1; rc == DCRT_OK && r < 5; r++) {
        float ms = 0;
        rc = rt_cuda_timer_start(tm, NULL, err, errlen);
        if (rc == DCRT_OK)
            rc = rt_cuda_launch(b->fn, grid, block, 0, NULL, args, err, errlen);
        if (rc == DCRT_OK)
            rc = rt_cuda_timer_stop(tm, NULL, &ms, err, errlen);
        if (rc == DCRT_OK && r >= 0)
            t[(*nt)++] = ms;
    }
    rt_cuda_timer_destroy(tm);
    free(args);
    return rc == DCRT_OK ? 0 : -1;
}

int srch_measure(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk, const int64_t *dims,
                 double cutoff_ms, double *times_ms, int *ntimes, char *err, size_t errlen)
{
    *ntimes = 0;
    Built *b = build(m, st, mk, err, errlen);
    if (!b)
        return -1;
    if (m->bk == BK_MODEL) {
        int64_t ext[MK_MAX_AXES + 1];
        srch_stage_extents(st, dims, ext);
        double g = srch_prior_gflops(st, mk) * srch_adapt(st, mk, ext, NULL);
        if (b->have_ptx && b->ptx.regs > 0) {
            /* registers bound the threads an SM keeps resident (65536 per
             * SM); fewer than 1024 hide latency less well */
            double resident = 65536.0 / b->ptx.regs;
            if (resident > st->tg->threads_per_core)
                resident = st->tg->threads_per_core;
            g *= resident >= 1024 ? 1.0 : sqrt(resident / 1024.0);
            if (b->ptx.spill_bytes > 0)
                g *= 0.5;
        }
        times_ms[(*ntimes)++] = srch_stage_flops(st, ext) / (g * 1e6) + 0.002;
        return 0;
    }
    if (m->bk == BK_CUDA)
        return time_cuda(m, b, dims, times_ms, ntimes, err, errlen);
    double t0 = rt_now_ms();
    if (cg_program_run_kernel(b->cp, NULL, b->kernel, dims, m->bufs, err, errlen) != 0)
        return -1; /* the warm-up */
    double first = rt_now_ms() - t0;
    if (cutoff_ms > 0 && first > cutoff_ms) {
        times_ms[(*ntimes)++] = first;
        return 0;
    }
    double total = 0;
    while (*ntimes < SRCH_MAX_REPEATS && (*ntimes < 3 || total < m->budget_ms)) {
        t0 = rt_now_ms();
        if (cg_program_run_kernel(b->cp, NULL, b->kernel, dims, m->bufs, err, errlen) != 0)
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
    Built *b = build(m, st, mk, err, sizeof err);
    if (!b || !b->have_ptx)
        return false;
    *out = b->ptx;
    return true;
}

void srch_measurer_set_budget(SrchMeasurer *m, double ms) { m->budget_ms = ms; }
