/* The emulator executor: the GPU form of a program's kernels (lowered for
 * PT_GPU: thread loops, barriers and shared buffers kept), compiled for
 * this CPU with the emu hooks (codegen/emu.c) and run launch by launch as
 * the plan lists them, each block as k->nthreads fibers of the SIMT
 * emulator (runtime/simt.c), blocks spread over a thread pool when one is
 * given (each worker its own fibers). */
#include "dietcode/exec.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct EmuKernel {
    CgEmuKernelFn fn;
    size_t shared, stack;
    int nthreads;
} EmuKernel;

struct ExEmu {
    const LoopProgram *lp;
    ExProgram *prog;
    CgJitCode *code;
    EmuKernel *k;
};

ExEmu *ex_emu_compile(const LoopProgram *lp, char *err, size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen))
        return NULL;
    ex_jit_runtime();
    ExEmu *x = calloc(1, sizeof *x);
    if (!x || !(x->k = calloc((size_t)lp->nkernels + 1, sizeof *x->k)))
        ir_panic(__FILE__, __LINE__, "out of memory");
    x->lp = lp;
    x->prog = ex_program_new(lp);
    for (int i = 0; i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        if (k->nthreads < 1 || k->nthreads > RT_SIMT_MAX_THREADS) {
            snprintf(err, errlen, "kernel %s: %d threads per block", k->name, k->nthreads);
            ex_emu_destroy(x);
            return NULL;
        }
    }
    char *prefix = cg_jit_prefix();
    CgModule *m = cg_kernels_module(lp, cg_target_emu(), prefix, true, err, errlen);
    x->code = m ? cg_jit_add(m, err, errlen) : NULL;
    for (int i = 0; x->code && i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        char *sym = cg_symbol(prefix, k->name);
        void *fn = cg_jit_lookup(x->code, sym, err, errlen);
        free(sym);
        if (!fn) {
            cg_jit_release(x->code);
            x->code = NULL;
            break;
        }
        x->k[i] = (EmuKernel){(CgEmuKernelFn)(uintptr_t)fn, (size_t)cg_shared_bytes(k),
                              cg_emu_stack_bytes(k), k->nthreads};
    }
    free(prefix);
    if (!x->code) {
        ex_emu_destroy(x);
        return NULL;
    }
    return x;
}

void ex_emu_destroy(ExEmu *x)
{
    if (!x)
        return;
    cg_jit_release(x->code);
    ex_program_free(x->prog);
    free(x->k);
    free(x);
}

typedef struct EmuRun {
    const EmuKernel *k;
    RtSimtKernel rk;
    const int64_t *dims;
    float *const *bufs;
    atomic_int failed;
    pthread_mutex_t mu;
    char *err;
    size_t errlen;
} EmuRun;

/* One GPU thread: the simt entry calling the kernel's ABI. */
static void thread_entry(void *args, int64_t block, int64_t thread, void *shared)
{
    EmuRun *r = args;
    r->k->fn(r->dims, r->bufs, block, thread, shared);
}

static void run_blocks(void *ctx, int64_t begin, int64_t end)
{
    EmuRun *r = ctx;
    char err[512];
    for (int64_t b = begin; b < end && !atomic_load(&r->failed); b++) {
        if (rt_simt_run_block(&r->rk, b, r->k->nthreads, r->k->shared, r, err, sizeof err) == 0)
            continue;
        pthread_mutex_lock(&r->mu);
        if (!atomic_load(&r->failed))
            snprintf(r->err, r->errlen, "%s", err);
        atomic_store(&r->failed, 1);
        pthread_mutex_unlock(&r->mu);
    }
}

/* Runs one launch's blocks; -1 and err on barrier divergence. */
static int launch(ExEmu *x, RtPool *pool, const DcrtLaunch *l, const int64_t *dims,
                  float *const *bufs, char *err, size_t errlen)
{
    const EmuKernel *k = &x->k[l->kernel];
    EmuRun r = {.k = k, .rk = {thread_entry, k->stack}, .dims = dims, .bufs = bufs, .err = err,
                .errlen = errlen};
    atomic_init(&r.failed, 0);
    pthread_mutex_init(&r.mu, NULL);
    if (pool)
        rt_pool_run(pool, l->blocks, run_blocks, &r);
    else
        run_blocks(&r, 0, l->blocks);
    pthread_mutex_destroy(&r.mu);
    if (!atomic_load(&r.failed))
        return 0;
    char why[512];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, errlen, "kernel %s: %s", x->lp->kernels[l->kernel]->name, why);
    return -1;
}

int ex_emu_run(ExEmu *x, RtPool *pool, const int64_t *dims, float *const *tensors, char *err,
               size_t errlen)
{
    if (!IR_ARG_OK(x, err, errlen))
        return -1;
    ExCall c;
    int rc = ex_call_begin(x->prog, dims, tensors, &c, err, errlen);
    const DcrtProgram *p = ex_program_table(x->prog);
    if (rc == 0)
        dcrt_index_reset(p, c.bufs);
    for (int i = 0; rc == 0 && i < c.plan->nlaunches; i++)
        rc = launch(x, pool, &c.plan->launches[i], dims, c.bufs, err, errlen);
    if (rc == 0 && dcrt_index_check(p, dims, c.bufs) != DCRT_OK) {
        snprintf(err, errlen, "%s", dcrt_last_error());
        rc = -1;
    }
    ex_call_end(&c);
    return rc;
}
