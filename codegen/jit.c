/* JIT compilation for the host CPU, a process-wide kernel cache, and the
 * runner that executes a LoopProgram over a thread pool: every variant of
 * every stage is compiled, and a run runs the one kernel per stage that
 * the stage's dispatch tree picks for the dims.
 *
 * Search measures many candidate kernels and `dcc run` compiles the same
 * ones again, so compiled code is kept for the life of the process in one
 * ORC LLJIT, keyed by everything the generated code depends on: the target,
 * the dims (position and range, since the simplifier's facts depend on it),
 * the global tensors (id, shape) and the printed loop IR of the kernel. The
 * key is hashed; a hit compares the full text, so a collision cannot return
 * the wrong code. Each kernel is its own LLVM module with a unique symbol,
 * so a kernel compiled twice by racing threads is harmless: the first one
 * into the cache wins.
 *
 * The lock protects only the cache and the JIT pointer; building and
 * optimising a module (the slow part) runs outside it.
 */
#include "dietcode/codegen.h"

#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { NBUCKETS = 1024 };

typedef struct Entry {
    uint64_t hash;
    char *key;
    void *fn;
    struct Entry *next;
} Entry;

static struct {
    pthread_mutex_t mu;
    LLVMOrcLLJITRef jit;
    Entry *bucket[NBUCKETS];
    RtPool *pool;
    int64_t ncompiled;
    uint64_t nsyms;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct CgProgram {
    const LoopProgram *lp;
    int n;
    CgKernelFn *fn;
};

static void error_msg(LLVMErrorRef e, const char *what, char *err, size_t errlen)
{
    char *m = LLVMGetErrorMessage(e);
    snprintf(err, errlen, "%s: %s", what, m);
    LLVMDisposeErrorMessage(m);
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Everything the code generated for k depends on, as text. */
static char *kernel_key(const CgTarget *t, const LoopProgram *lp, const Kernel *k)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    const TeProgram *te = lp->te;
    fprintf(f, "target %s %s %s %s\n", t->name, t->triple, t->cpu, t->features);
    for (int i = 0; i < te->ndims; i++) {
        const Var *d = te->dims[i];
        fprintf(f, "dim %s @%d %lld..%lld max %lld\n", d->name, d->pos, (long long)d->lo,
                (long long)d->hi, (long long)d->max);
    }
    for (int i = 0; i < te->ntensors; i++) {
        const Tensor *x = te->tensors[i];
        fprintf(f, "tensor %s #%d %s [", x->name, x->id, ir_dtype_name(x->dtype));
        for (int j = 0; j < x->rank; j++) {
            if (j)
                fputs(", ", f);
            ir_print_expr(f, x->shape[j]);
        }
        fputs("]\n", f);
    }
    ir_print_kernel(f, k);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void *cache_find(uint64_t h, const char *key)
{
    for (Entry *e = G.bucket[h % NBUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e->fn;
    return NULL;
}

/* Creates the process-wide LLJIT on first use; call with G.mu held. */
static int ensure_jit(char *err, size_t errlen)
{
    if (G.jit)
        return 0;
    LLVMTargetMachineRef tm = cg_target_machine(cg_target_cpu(), err, errlen);
    if (!tm)
        return -1;
    LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        jb, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&G.jit, jb);
    if (e) {
        G.jit = NULL;
        error_msg(e, "cannot create the JIT", err, errlen);
        return -1;
    }
    /* what emu kernels call: a function of this executable, not of a library */
    LLVMOrcCSymbolMapPair sym = {
        LLVMOrcLLJITMangleAndIntern(G.jit, "rt_simt_barrier_at"),
        {(LLVMOrcExecutorAddress)(uintptr_t)rt_simt_barrier_at,
         {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0}},
    };
    e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(G.jit), LLVMOrcAbsoluteSymbols(&sym, 1));
    if (e) {
        error_msg(e, "cannot define the JIT's runtime symbols", err, errlen);
        return -1;
    }
    return 0;
}

/* Builds, optimises and JIT-compiles kernel k for t as symbol sym. */
static void *compile_kernel(LLVMOrcLLJITRef jit, const CgTarget *t, const LoopProgram *lp,
                            const Kernel *k, const char *sym, char *err, size_t errlen)
{
    LLVMTargetMachineRef tm = cg_target_machine(t, err, errlen);
    if (!tm)
        return NULL;
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMModuleRef mod = cg_module_new(LLVMOrcThreadSafeContextGetContext(tsc), sym, t, tm);
    cg_emit_kernel(mod, t, lp, k, sym);
    int bad = cg_verify_module(mod, err, errlen) < 0 || cg_optimize_module(mod, tm, err, errlen) < 0;
    LLVMDisposeTargetMachine(tm);
    if (bad) {
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsc);
        return NULL;
    }
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc);
    LLVMOrcDisposeThreadSafeContext(tsc);
    LLVMErrorRef e = LLVMOrcLLJITAddLLVMIRModule(jit, LLVMOrcLLJITGetMainJITDylib(jit), tsm);
    if (e) {
        error_msg(e, "cannot add a kernel to the JIT", err, errlen);
        return NULL;
    }
    LLVMOrcExecutorAddress addr = 0;
    e = LLVMOrcLLJITLookup(jit, &addr, sym);
    if (e) {
        error_msg(e, "cannot compile kernel", err, errlen);
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

void *cg_jit_kernel(const CgTarget *t, const LoopProgram *lp, const Kernel *k, char *err,
                    size_t errlen)
{
    if (k->body->kind != ST_FOR || k->body->loop.fk != FK_BLOCK) {
        snprintf(err, errlen, "internal error: kernel %s does not start with a block loop",
                 k->name);
        return NULL;
    }
    char *key = kernel_key(t, lp, k);
    if (!key) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    uint64_t h = fnv1a(key, strlen(key));
    pthread_mutex_lock(&G.mu);
    void *fn = cache_find(h, key);
    LLVMOrcLLJITRef jit = NULL;
    uint64_t id = G.nsyms++;
    if (!fn && ensure_jit(err, errlen) == 0)
        jit = G.jit;
    pthread_mutex_unlock(&G.mu);
    if (fn || !jit) {
        free(key);
        return fn;
    }

    char sym[96];
    int n = snprintf(sym, sizeof sym, "dc%llu_", (unsigned long long)id);
    for (const char *c = k->name; *c && n < (int)sizeof sym - 1; c++, n++)
        sym[n] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
                     ? *c : '_';
    sym[n] = 0;
    fn = compile_kernel(jit, t, lp, k, sym, err, errlen);
    if (!fn) {
        free(key);
        return NULL;
    }

    pthread_mutex_lock(&G.mu);
    void *old = cache_find(h, key);
    Entry *e = old ? NULL : malloc(sizeof *e);
    if (e) {
        *e = (Entry){h, key, fn, G.bucket[h % NBUCKETS]};
        G.bucket[h % NBUCKETS] = e;
        G.ncompiled++;
    }
    pthread_mutex_unlock(&G.mu);
    if (!e)
        free(key);
    return old ? old : fn;
}

CgProgram *cg_jit_compile(const LoopProgram *lp, char *err, size_t errlen)
{
    CgProgram *p = calloc(1, sizeof *p);
    if (!p || !(p->fn = calloc((size_t)lp->nkernels + 1, sizeof *p->fn))) {
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->lp = lp;
    p->n = lp->nkernels;
    for (int i = 0; i < lp->nkernels; i++) {
        void *fn = cg_jit_kernel(cg_target_cpu(), lp, lp->kernels[i], err, errlen);
        if (!(p->fn[i] = (CgKernelFn)(uintptr_t)fn)) {
            cg_program_destroy(p);
            return NULL;
        }
    }
    return p;
}

int cg_program_nkernels(const CgProgram *p) { return p->n; }

CgKernelFn cg_program_kernel(const CgProgram *p, int i)
{
    IR_ASSERT(i >= 0 && i < p->n);
    return p->fn[i];
}

int64_t cg_program_nblocks(const CgProgram *p, int i, const int64_t *dims)
{
    IR_ASSERT(i >= 0 && i < p->n);
    return ir_eval_dims(p->lp->kernels[i]->body->loop.var->extent, dims);
}

typedef struct RunCtx {
    CgKernelFn fn;
    const int64_t *dims;
    float *const *bufs;
} RunCtx;

static void run_chunk(void *ctx, int64_t begin, int64_t end)
{
    RunCtx *r = ctx;
    r->fn(r->dims, r->bufs, begin, end);
}

/* Checks dims and buffers and returns the pool to run on (the
 * process-wide one when pool is NULL); NULL with a message. */
static RtPool *run_prepare(const CgProgram *p, RtPool *pool, const int64_t *dims,
                           float *const *bufs, char *err, size_t errlen)
{
    const TeProgram *te = p->lp->te;
    if (!ir_check_dims(te, dims, err, errlen))
        return NULL;
    for (int i = 0; i < te->ntensors; i++)
        if (p->lp->materialized[i] && !bufs[i]) {
            snprintf(err, errlen, "no buffer for tensor %s", te->tensors[i]->name);
            return NULL;
        }
    if (!pool) {
        pthread_mutex_lock(&G.mu);
        if (!G.pool)
            G.pool = rt_pool_new(0);
        pool = G.pool;
        pthread_mutex_unlock(&G.mu);
        if (!pool)
            snprintf(err, errlen, "cannot start the thread pool");
    }
    return pool;
}

static void run_kernel(const CgProgram *p, RtPool *pool, int i, const int64_t *dims,
                       float *const *bufs)
{
    RunCtx c = {p->fn[i], dims, bufs};
    rt_pool_run(pool, cg_program_nblocks(p, i, dims), run_chunk, &c);
}

int cg_program_run_on(CgProgram *p, RtPool *pool, const int64_t *dims, float *const *bufs,
                      char *err, size_t errlen)
{
    if (!(pool = run_prepare(p, pool, dims, bufs, err, errlen)))
        return -1;
    for (int s = 0; s < p->lp->nstages; s++)
        run_kernel(p, pool, ir_stage_kernel(p->lp, s, dims), dims, bufs);
    return 0;
}

int cg_program_run_kernel(CgProgram *p, RtPool *pool, int i, const int64_t *dims,
                          float *const *bufs, char *err, size_t errlen)
{
    if (i < 0 || i >= p->n) {
        snprintf(err, errlen, "no kernel %d (the program has %d)", i, p->n);
        return -1;
    }
    if (!(pool = run_prepare(p, pool, dims, bufs, err, errlen)))
        return -1;
    run_kernel(p, pool, i, dims, bufs);
    return 0;
}

int cg_program_run(CgProgram *p, const int64_t *dims, float *const *bufs, char *err,
                   size_t errlen)
{
    return cg_program_run_on(p, NULL, dims, bufs, err, errlen);
}

void cg_program_destroy(CgProgram *p)
{
    if (!p)
        return;
    free(p->fn);
    free(p);
}

int64_t cg_jit_compile_count(void)
{
    pthread_mutex_lock(&G.mu);
    int64_t n = G.ncompiled;
    pthread_mutex_unlock(&G.mu);
    return n;
}

void cg_jit_shutdown(void)
{
    pthread_mutex_lock(&G.mu);
    for (int i = 0; i < NBUCKETS; i++) {
        for (Entry *e = G.bucket[i], *next; e; e = next) {
            next = e->next;
            free(e->key);
            free(e);
        }
        G.bucket[i] = NULL;
    }
    if (G.jit) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(G.jit);
        if (e)
            LLVMConsumeError(e);
        G.jit = NULL;
    }
    rt_pool_destroy(G.pool);
    G.pool = NULL;
    pthread_mutex_unlock(&G.mu);
}
