/* The emu target: the device form of a kernel, compiled for the host and
 * run on the SIMT emulator (runtime/simt.c).
 *
 * The point is to test what the GPU would run without a GPU: the loop IR
 * lowered for PT_GPU (one block loop, one thread loop, barriers inside it,
 * shared buffers around it) goes through the same lowering as every other
 * target, with hooks that make one call of the function one GPU thread of
 * one block:
 *
 *     void NAME(const int64_t *dims, float *const *bufs, int64_t block,
 *               int64_t thread, char *shared);
 *
 * FK_BLOCK is the block argument and FK_THREAD the thread argument (each
 * one iteration, guarded by index < extent, as on the GPU); a barrier is a
 * call to rt_simt_barrier_at, which parks the fiber until the whole block has
 * arrived (the call is `convergent`, so LLVM does not duplicate it into
 * divergent paths); shared buffers are 64-byte aligned offsets into the
 * block's shared buffer, laid out in the order the kernel allocates them
 * (cg_emu_shared_bytes); math is the CPU target's. Kernels are compiled by
 * the process-wide JIT (codegen/jit.c) and cached like CPU kernels.
 *
 * Running a program runs, per stage, the blocks of the kernel its dispatch
 * picks, each block as k->nthreads fibers, over a thread pool when one is
 * given (each worker its own fibers).
 */
#include "dietcode/codegen.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { SHARED_ALIGN = 64, BASE_STACK = 128 << 10 };

static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static CgTarget emu;

/* Shared offsets (in allocation order) and local bytes of a kernel. */
typedef struct Layout {
    const Tensor *want;
    int64_t want_off; /* -1 until found */
    int64_t shared;   /* bytes so far */
    int64_t local;    /* bytes of per-thread buffers, lanes included */
} Layout;

static int64_t buffer_bytes(const Tensor *t)
{
    int64_t n = 4, d;
    for (int i = 0; i < t->rank; i++) {
        if (!ir_is_const(t->shape[i], &d))
            ir_panic(__FILE__, __LINE__, "buffer %s has a non-constant shape", t->name);
        n *= d > 0 ? d : 1;
    }
    return n;
}

static void layout(const Stmt *s, int64_t lanes, Layout *L)
{
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            layout(s->seq.s[i], lanes, L);
        return;
    case ST_FOR: {
        int64_t n = 1;
        if (s->loop.fk == FK_VECTORIZED && ir_is_const(s->loop.var->extent, &n) && n > 1)
            lanes *= n;
        layout(s->loop.body, lanes, L);
        return;
    }
    case ST_LET: layout(s->let.body, lanes, L); return;
    case ST_IF:
        layout(s->ifs.then, lanes, L);
        if (s->ifs.els)
            layout(s->ifs.els, lanes, L);
        return;
    case ST_ALLOC: {
        const Tensor *t = s->alloc.buf;
        if (t->scope == MS_SHARED) {
            IR_ASSERT(lanes == 1);
            L->shared = (L->shared + SHARED_ALIGN - 1) / SHARED_ALIGN * SHARED_ALIGN;
            if (t == L->want)
                L->want_off = L->shared;
            L->shared += buffer_bytes(t);
        } else {
            L->local += buffer_bytes(t) * lanes;
        }
        layout(s->alloc.body, lanes, L);
        return;
    }
    case ST_STORE: case ST_BARRIER: return;
    }
}

int64_t cg_emu_shared_bytes(const Kernel *k)
{
    Layout L = {.want_off = -1};
    layout(k->body, 1, &L);
    return L.shared;
}

/* Fiber stack for k: room for its per-thread buffers, twice over. */
static size_t stack_bytes(const Kernel *k)
{
    Layout L = {.want_off = -1};
    layout(k->body, 1, &L);
    return (size_t)(BASE_STACK + 2 * L.local + 4095) / 4096 * 4096;
}

static void emu_kernel_begin(CgFn *g, const Kernel *k, const char *sym)
{
    const TeProgram *te = g->lp->te;
    LLVMTypeRef pt[5] = {g->ptr, g->ptr, g->i64, g->i64, g->ptr};
    LLVMValueRef fn = LLVMAddFunction(g->mod, sym, LLVMFunctionType(g->voidt, pt, 5, 0));
    const char *names[5] = {"dims", "bufs", "block", "thread", "shared"};
    for (unsigned i = 0; i < 5; i++)
        LLVMSetValueName2(LLVMGetParam(fn, i), names[i], strlen(names[i]));
    LLVMAddAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMCreateEnumAttribute(g->cx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    g->fn = fn;
    g->entry = LLVMAppendBasicBlockInContext(g->cx, fn, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    for (int i = 0; i < te->ndims + te->ntensors; i++) {
        bool isdim = i < te->ndims;
        LLVMTypeRef ty = isdim ? g->i64 : g->ptr;
        LLVMValueRef idx = LLVMConstInt(g->i64, (unsigned long long)(isdim ? i : i - te->ndims), 0);
        LLVMValueRef p = LLVMBuildGEP2(g->b, ty, LLVMGetParam(fn, isdim ? 0 : 1), &idx, 1, "");
        LLVMValueRef v = LLVMBuildLoad2(g->b, ty, p, "");
        LLVMSetAlignment(v, 8);
        if (isdim)
            g->dimv[i] = v;
        else
            g->bufv[i - te->ndims] = v;
    }
    (void)k;
}

static void emu_kernel_end(CgFn *g) { LLVMBuildRetVoid(g->b); }

static CgRange emu_loop_range(CgFn *g, ForKind fk, LLVMValueRef extent)
{
    (void)extent;
    return (CgRange){.index = LLVMGetParam(g->fn, fk == FK_BLOCK ? 2 : 3), .guard = true};
}

/* A barrier is rt_simt_barrier_at(id), id numbering the kernel's barriers:
 * the host backend may tail-duplicate the call into several places (it
 * does not treat it as convergent), and the id keeps it one barrier. */
static void emu_barrier(CgFn *g)
{
    LLVMTypeRef fty = LLVMFunctionType(g->voidt, &g->i64, 1, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, "rt_simt_barrier_at");
    int64_t id = 0;
    for (LLVMUseRef u = fn ? LLVMGetFirstUse(fn) : NULL; u; u = LLVMGetNextUse(u)) {
        LLVMValueRef call = LLVMGetUser(u);
        id += LLVMGetBasicBlockParent(LLVMGetInstructionParent(call)) == g->fn;
    }
    if (!fn) {
        fn = LLVMAddFunction(g->mod, "rt_simt_barrier_at", fty);
        const char *attrs[] = {"convergent", "nounwind"};
        for (int i = 0; i < 2; i++)
            LLVMAddAttributeAtIndex(
                fn, LLVMAttributeFunctionIndex,
                LLVMCreateEnumAttribute(
                    g->cx, LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
    }
    LLVMValueRef arg = LLVMConstInt(g->i64, (unsigned long long)id, 0);
    LLVMBuildCall2(g->b, fty, fn, &arg, 1, "");
}

static LLVMValueRef emu_shared_alloc(CgFn *g, const Tensor *buf, LLVMTypeRef ty)
{
    Layout L = {.want = buf, .want_off = -1};
    for (int i = 0; i < g->lp->nkernels && L.want_off < 0; i++) {
        L.shared = L.local = 0;
        layout(g->lp->kernels[i]->body, 1, &L);
    }
    IR_ASSERT(L.want_off >= 0);
    (void)ty;
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->cx);
    LLVMValueRef off = LLVMConstInt(g->i64, (unsigned long long)L.want_off, 0);
    return LLVMBuildInBoundsGEP2(g->b, i8, LLVMGetParam(g->fn, 4), &off, 1, buf->name);
}

static LLVMValueRef emu_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b)
{
    return cg_target_cpu()->math(g, f, a, b);
}

static void emu_init(void)
{
    const CgTarget *cpu = cg_target_cpu();
    emu = (CgTarget){
        .name = "emu",
        .triple = cpu->triple,
        .cpu = cpu->cpu,
        .features = cpu->features,
        .kernel_begin = emu_kernel_begin,
        .kernel_end = emu_kernel_end,
        .loop_range = emu_loop_range,
        .barrier = emu_barrier,
        .shared_alloc = emu_shared_alloc,
        .math = emu_math,
    };
}

const CgTarget *cg_target_emu(void)
{
    pthread_once(&emu_once, emu_init);
    return &emu;
}

/* ---- compiling and running ---- */

typedef struct EmuKernel {
    CgEmuKernelFn fn;
    size_t shared, stack;
    int nthreads;
} EmuKernel;

struct CgEmuProgram {
    const LoopProgram *lp;
    int n;
    EmuKernel *k;
};

CgEmuProgram *cg_emu_compile(const LoopProgram *lp, char *err, size_t errlen)
{
    CgEmuProgram *p = calloc(1, sizeof *p);
    if (!p || !(p->k = calloc((size_t)lp->nkernels + 1, sizeof *p->k))) {
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->lp = lp;
    p->n = lp->nkernels;
    for (int i = 0; i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        if (k->nthreads < 1 || k->nthreads > RT_SIMT_MAX_THREADS) {
            snprintf(err, errlen, "kernel %s: %d threads per block", k->name, k->nthreads);
            cg_emu_program_destroy(p);
            return NULL;
        }
        void *fn = cg_jit_kernel(cg_target_emu(), lp, k, err, errlen);
        if (!fn) {
            cg_emu_program_destroy(p);
            return NULL;
        }
        p->k[i] = (EmuKernel){(CgEmuKernelFn)(uintptr_t)fn, (size_t)cg_emu_shared_bytes(k),
                              stack_bytes(k), k->nthreads};
    }
    return p;
}

void cg_emu_program_destroy(CgEmuProgram *p)
{
    if (!p)
        return;
    free(p->k);
    free(p);
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

int cg_emu_program_run(CgEmuProgram *p, RtPool *pool, const int64_t *dims, float *const *bufs,
                       char *err, size_t errlen)
{
    const TeProgram *te = p->lp->te;
    if (!ir_check_dims(te, dims, err, errlen))
        return -1;
    for (int i = 0; i < te->ntensors; i++)
        if (p->lp->materialized[i] && !bufs[i]) {
            snprintf(err, errlen, "no buffer for tensor %s", te->tensors[i]->name);
            return -1;
        }
    for (int s = 0; s < p->lp->nstages; s++) {
        int i = ir_stage_kernel(p->lp, s, dims);
        EmuRun r = {.k = &p->k[i], .rk = {thread_entry, p->k[i].stack}, .dims = dims,
                    .bufs = bufs, .err = err, .errlen = errlen};
        atomic_init(&r.failed, 0);
        pthread_mutex_init(&r.mu, NULL);
        int64_t nblocks = ir_eval_dims(p->lp->kernels[i]->body->loop.var->extent, dims);
        if (pool)
            rt_pool_run(pool, nblocks, run_blocks, &r);
        else
            run_blocks(&r, 0, nblocks);
        pthread_mutex_destroy(&r.mu);
        if (atomic_load(&r.failed)) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "kernel %s: %s", p->lp->kernels[i]->name, why);
            return -1;
        }
    }
    return 0;
}
