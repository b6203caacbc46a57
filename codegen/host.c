/* Ahead-of-time output: one relocatable host object and its C header.
 *
 * `dcc prog.tex --emit=obj,header` writes prog.o and prog.h. The object is
 * an x86-64 ELF module (PIC, since Debian links PIE by default) holding
 * every kernel of the LoopProgram, compiled through the same lowering as
 * the JIT (cg_emit_kernel with the CPU hooks) but for a fixed, portable
 * ISA: triple x86_64-pc-linux-gnu, cpu x86-64, no extra features. The JIT
 * may use the build machine's AVX-512; an object may be linked and run
 * anywhere, so it assumes only what every x86-64 has (the vector code is
 * legalised to SSE2; correctness does not depend on the width).
 *
 * The kernels get internal linkage (prog__KERNEL), so several programs link
 * into one executable. The one exported function,
 *
 *     int prog_run(int64_t DIM..., float *PTR...);
 *
 * dims in declaration order, then inputs, then outputs, each in
 * declaration order, does what cg_program_run does with the checks of
 * ir_check_dims compiled in: each dim >= LO and <= its max, every extent
 * >= 1 and every tensor's element count <= INT32_MAX (products computed with
 * overflow checks), no NULL pointer; it then allocates the materialised
 * intermediates with dcrt_alloc, runs each stage's kernel over its blocks
 * with dcrt_parallel_for (libdcrt.a's thread pool), frees the intermediates
 * and returns DCRT_OK or the first error code (runtime.h). A stage with
 * several variants holds them all; its dispatch tree becomes nested
 * integer compares on the dims, a basic block per node, that pick the
 * kernel and its block count (stage_pick), as ir_stage_kernel does.
 *
 * For --target=nvptx the object holds no kernels but their PTX, as a
 * private string, and exports
 *
 *     int prog_launch(int64_t DIM..., uint64_t PTR..., void *stream);
 *
 * with the same checks, then dcrt_cuda_kernels loads the PTX once (cached
 * in a private global) and dcrt_cuda_launch runs each stage's kernel (the
 * same dispatch picks its function, grid and block) with the NVPTX ABI of
 * dietcode/codegen.h; intermediates are device buffers freed
 * after a synchronisation. Both functions return DCRT_* codes. Extents are integer
 * expressions over the dims; only + - * / % min max and negation occur in
 * them, and anything else is reported as an error, not miscompiled.
 */
#include "dietcode/codegen.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t portable_once = PTHREAD_ONCE_INIT;
static CgTarget portable;

static void portable_init(void)
{
    portable = *cg_target_cpu(); /* the CPU hooks; also initialises the X86 target */
    portable.triple = "x86_64-pc-linux-gnu";
    portable.cpu = "x86-64";
    portable.features = "";
}

const CgTarget *cg_target_cpu_portable(void)
{
    pthread_once(&portable_once, portable_init);
    return &portable;
}

/* ---- the exported run function ---- */

typedef struct Host {
    LLVMContextRef cx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMTypeRef i1, i64, ptr;
    LLVMValueRef *dimv;  /* per dim position */
    LLVMValueRef ovf;    /* i1: some extent computation overflowed */
    const char *bad;     /* an operator extents may not use, or NULL */
} Host;

static LLVMValueRef ci64(Host *h, int64_t v) { return LLVMConstInt(h->i64, (unsigned long long)v, 1); }

static LLVMValueRef checked(Host *h, const char *op, LLVMValueRef a, LLVMValueRef b)
{
    char name[64];
    snprintf(name, sizeof name, "llvm.%s.with.overflow", op);
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    IR_ASSERT(id != 0);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(h->mod, id, &h->i64, 1);
    LLVMTypeRef ft = LLVMIntrinsicGetType(h->cx, id, &h->i64, 1);
    LLVMValueRef args[2] = {a, b};
    LLVMValueRef r = LLVMBuildCall2(h->b, ft, f, args, 2, "");
    h->ovf = LLVMBuildOr(h->b, h->ovf, LLVMBuildExtractValue(h->b, r, 1, ""), "");
    return LLVMBuildExtractValue(h->b, r, 0, "");
}

/* An integer expression over the dims, as i64. */
static LLVMValueRef extent(Host *h, const Expr *e)
{
    switch (e->kind) {
    case EX_INT: return ci64(h, e->ival);
    case EX_VAR:
        if (e->var->kind == VK_DIM)
            return h->dimv[e->var->pos];
        h->bad = "a variable other than a dim";
        return ci64(h, 0);
    case EX_NEG: return checked(h, "ssub", ci64(h, 0), extent(h, e->op.a));
    case EX_ADD: return checked(h, "sadd", extent(h, e->op.a), extent(h, e->op.b));
    case EX_SUB: return checked(h, "ssub", extent(h, e->op.a), extent(h, e->op.b));
    case EX_MUL: return checked(h, "smul", extent(h, e->op.a), extent(h, e->op.b));
    case EX_DIV:
    case EX_MOD: return cg_floordivmod(h->b, extent(h, e->op.a), extent(h, e->op.b), e->kind == EX_MOD);
    case EX_MIN:
    case EX_MAX: {
        LLVMValueRef a = extent(h, e->op.a), b = extent(h, e->op.b);
        LLVMValueRef lt = LLVMBuildICmp(h->b, LLVMIntSLT, a, b, "");
        return e->kind == EX_MIN ? LLVMBuildSelect(h->b, lt, a, b, "")
                                 : LLVMBuildSelect(h->b, lt, b, a, "");
    }
    default:
        h->bad = ir_op_name(e->kind);
        return ci64(h, 0);
    }
}

static LLVMValueRef runtime_fn(Host *h, const char *name, LLVMTypeRef ty);
static LLVMValueRef const_string(Host *h, const char *s, const char *name);

/* if (cond) return dcrt_fail(code, msg), msg NULL for the code's own
 * description; continues in a new block. */
static void fail_if(Host *h, LLVMValueRef cond, int code, const char *msg)
{
    LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(h->cx, h->fn, "fail");
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(h->cx, h->fn, "ok");
    LLVMBuildCondBr(h->b, cond, bad, ok);
    LLVMPositionBuilderAtEnd(h->b, bad);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(h->cx), at[2] = {i32, h->ptr};
    LLVMTypeRef fty = LLVMFunctionType(i32, at, 2, 0);
    LLVMValueRef a[2] = {LLVMConstInt(i32, (unsigned)code, 0),
                         msg ? const_string(h, msg, "dc.error") : LLVMConstPointerNull(h->ptr)};
    LLVMBuildRet(h->b, LLVMBuildCall2(h->b, fty, runtime_fn(h, "dcrt_fail", fty), a, 2, ""));
    LLVMPositionBuilderAtEnd(h->b, ok);
}

static LLVMValueRef runtime_fn(Host *h, const char *name, LLVMTypeRef ty)
{
    LLVMValueRef f = LLVMGetNamedFunction(h->mod, name);
    return f ? f : LLVMAddFunction(h->mod, name, ty);
}

/* The kernel's symbol in the object: PROG__KERNEL, internal. */
static char *kernel_sym(const char *prog, const char *kname)
{
    size_t n = strlen(prog) + strlen(kname) + 3;
    char *s = malloc(n);
    if (!s)
        ir_panic(__FILE__, __LINE__, "out of memory");
    snprintf(s, n, "%s__%s", prog, kname);
    for (char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            *c = '_';
    return s;
}

/* Adds the exported entry PROG_SUFFIX: i64 dims in declaration order, then
 * one pointer per input and per output in declaration order (CPU: ptr;
 * GPU: i64 device addresses), then, for the GPU, a ptr stream. Emits the
 * checks (DCRT_ERR_DIM_RANGE, _TOO_LARGE, _NULL_POINTER) and leaves the
 * builder after them. param_of[id]: the tensor's parameter or -1;
 * numel[id]: its element count. */
static void entry_begin(Host *h, const LoopProgram *lp, const char *suffix, bool gpu,
                        int *param_of, LLVMValueRef *numel)
{
    const TeProgram *te = lp->te;
    int nd = te->ndims, nt = te->ntensors, np = nd;
    LLVMTypeRef i32 = LLVMInt32TypeInContext(h->cx), pty = gpu ? h->i64 : h->ptr;
    LLVMTypeRef *pt = calloc((size_t)(nd + nt) + 2, sizeof *pt);
    if (!pt)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < nd; i++)
        pt[i] = h->i64;
    for (int i = 0; i < nt; i++)
        param_of[i] = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nt; i++)
            if (te->tensors[i]->kind == (pass ? TK_OUTPUT : TK_INPUT)) {
                param_of[i] = np;
                pt[np++] = pty;
            }
    if (gpu)
        pt[np++] = h->ptr;
    char *name = malloc(strlen(te->name) + strlen(suffix) + 1);
    if (!name)
        ir_panic(__FILE__, __LINE__, "out of memory");
    sprintf(name, "%s%s", te->name, suffix);
    h->fn = LLVMAddFunction(h->mod, name, LLVMFunctionType(i32, pt, (unsigned)np, 0));
    free(name);
    free(pt);
    LLVMAddAttributeAtIndex(h->fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(h->cx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    for (int i = 0; i < nd; i++)
        LLVMSetValueName2(LLVMGetParam(h->fn, (unsigned)i), te->dims[i]->name, strlen(te->dims[i]->name));
    for (int i = 0; i < nt; i++)
        if (param_of[i] >= 0)
            LLVMSetValueName2(LLVMGetParam(h->fn, (unsigned)param_of[i]), te->tensors[i]->name,
                              strlen(te->tensors[i]->name));
    if (gpu)
        LLVMSetValueName2(LLVMGetParam(h->fn, (unsigned)np - 1), "stream", 6);
    LLVMPositionBuilderAtEnd(h->b, LLVMAppendBasicBlockInContext(h->cx, h->fn, "entry"));

    /* dims: in range */
    for (int i = 0; i < nd; i++) {
        const Var *d = te->dims[i];
        LLVMValueRef v = LLVMGetParam(h->fn, (unsigned)i);
        h->dimv[d->pos] = v;
        LLVMValueRef out = LLVMBuildOr(h->b, LLVMBuildICmp(h->b, LLVMIntSLT, v, ci64(h, d->lo), ""),
                                       LLVMBuildICmp(h->b, LLVMIntSGT, v, ci64(h, d->max), ""), "");
        char msg[512];
        snprintf(msg, sizeof msg, "%s%s: dim %s is out of its range %lld..%lld", te->name, suffix,
                 d->name, (long long)d->lo, (long long)d->max);
        fail_if(h, out, DCRT_ERR_DIM_RANGE, msg);
    }
    /* sizes: every extent >= 1, every element count <= INT32_MAX, no overflow */
    h->ovf = LLVMConstInt(h->i1, 0, 0);
    LLVMValueRef big = LLVMConstInt(h->i1, 0, 0);
    for (int i = 0; i < nt; i++) {
        const Tensor *t = te->tensors[i];
        LLVMValueRef n = ci64(h, 1);
        for (int j = 0; j < t->rank; j++) {
            LLVMValueRef e = extent(h, t->shape[j]);
            big = LLVMBuildOr(h->b, big, LLVMBuildICmp(h->b, LLVMIntSLT, e, ci64(h, 1), ""), "");
            n = checked(h, "smul", n, e);
        }
        big = LLVMBuildOr(h->b, big, LLVMBuildICmp(h->b, LLVMIntSGT, n, ci64(h, INT32_MAX), ""), "");
        numel[i] = n;
    }
    fail_if(h, LLVMBuildOr(h->b, big, h->ovf, ""), DCRT_ERR_TOO_LARGE, NULL);
    /* pointers */
    LLVMValueRef null = LLVMConstNull(pty), anynull = LLVMConstInt(h->i1, 0, 0);
    for (int i = 0; i < nt; i++)
        if (param_of[i] >= 0)
            anynull = LLVMBuildOr(h->b, anynull,
                                  LLVMBuildICmp(h->b, LLVMIntEQ, LLVMGetParam(h->fn, (unsigned)param_of[i]),
                                                null, ""), "");
    fail_if(h, anynull, DCRT_ERR_NULL_POINTER, NULL);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n + 1, size);
    if (!p)
        ir_panic(__FILE__, __LINE__, "out of memory");
    return p;
}

/* br to cleanup when the i32 r is not 0, after storing it in rc. */
static void check_rc(Host *h, LLVMValueRef r, LLVMValueRef rc, LLVMBasicBlockRef cleanup)
{
    LLVMBuildStore(h->b, r, rc);
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(h->cx, h->fn, "next");
    LLVMBuildCondBr(h->b, LLVMBuildICmp(h->b, LLVMIntNE, r, LLVMConstNull(LLVMTypeOf(r)), ""),
                    cleanup, next);
    LLVMPositionBuilderAtEnd(h->b, next);
}
/* Frees the scratch buffers of the materialised intermediates (the tensors
 * that are not parameters), each held in slot[i] as a value of type ty, with
 * the runtime function `fname`. */
static void free_temps(Host *h, const LoopProgram *lp, const int *param_of, LLVMValueRef *slot,
                       LLVMTypeRef ty, const char *fname)
{
    LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(h->cx), &ty, 1, 0);
    LLVMValueRef f = runtime_fn(h, fname, fty);
    for (int i = 0; i < lp->te->ntensors; i++)
        if (param_of[i] < 0 && lp->materialized[i]) {
            LLVMValueRef p = LLVMBuildLoad2(h->b, ty, slot[i], "");
            LLVMBuildCall2(h->b, fty, f, &p, 1, "");
        }
}


/* What a stage launches: the kernel (CPU: its function; GPU: its index
 * among the loaded functions, i64), its block count and threads per block. */
typedef struct Pick {
    LLVMValueRef kernel, nblocks, nthreads;
} Pick;

/* Kernel i's Pick (kfn: the CPU functions; NULL for the GPU), computed at
 * the builder. The block count's overflow flags stay out of h->ovf: only
 * the entry's size checks read it, and a flag computed in one dispatch leaf
 * does not dominate the others. */
static Pick kernel_pick(Host *h, const LoopProgram *lp, int i, const LLVMValueRef *kfn)
{
    const Kernel *k = lp->kernels[i];
    LLVMValueRef ovf = h->ovf;
    Pick p = {kfn ? kfn[i] : ci64(h, i), extent(h, k->body->loop.var->extent),
              ci64(h, k->nthreads)};
    h->ovf = ovf;
    return p;
}

/* What stage s launches for the dims. Without a dispatch tree, its variant
 * 0, computed in place. With one, the tree as nested compares: a basic
 * block per node, a split branching on dims[dim] <= le, a leaf computing
 * its variant's Pick; the leaves join in one block whose phis are the
 * result, and the builder is left there. */
static Pick stage_pick(Host *h, const LoopProgram *lp, int s, const LLVMValueRef *kfn)
{
    const Stage *st = &lp->stages[s];
    const Dispatch *d = st->dispatch;
    if (!d || d->nnodes == 0)
        return kernel_pick(h, lp, st->first, kfn);
    int nn = d->nnodes, nleaves = 0;
    LLVMBasicBlockRef *bb = xcalloc((size_t)nn, sizeof *bb), *from = xcalloc((size_t)nn, sizeof *from);
    LLVMValueRef *val[3];
    for (int f = 0; f < 3; f++)
        val[f] = xcalloc((size_t)nn, sizeof *val[f]);
    for (int i = 0; i < nn; i++)
        bb[i] = LLVMAppendBasicBlockInContext(h->cx, h->fn, d->nodes[i].variant >= 0 ? "leaf" : "split");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(h->cx, h->fn, "dispatched");
    LLVMBuildBr(h->b, bb[0]);
    IR_ASSERT(d->nodes[nn - 1].variant >= 0); /* children follow parents: the last is a leaf */
    for (int i = 0; i < nn; i++) {
        const DispatchNode *n = &d->nodes[i];
        LLVMPositionBuilderAtEnd(h->b, bb[i]);
        if (n->variant < 0) {
            LLVMValueRef le = LLVMBuildICmp(h->b, LLVMIntSLE, h->dimv[n->dim], ci64(h, n->le), "");
            LLVMBuildCondBr(h->b, le, bb[n->then_node], bb[n->else_node]);
            continue;
        }
        Pick p = kernel_pick(h, lp, st->first + n->variant, kfn);
        val[0][nleaves] = p.kernel;
        val[1][nleaves] = p.nblocks;
        val[2][nleaves] = p.nthreads;
        from[nleaves++] = LLVMGetInsertBlock(h->b);
        LLVMBuildBr(h->b, join);
    }
    LLVMPositionBuilderAtEnd(h->b, join);
    LLVMValueRef phi[3];
    for (int f = 0; f < 3; f++) {
        phi[f] = LLVMBuildPhi(h->b, LLVMTypeOf(val[f][0]), "");
        LLVMAddIncoming(phi[f], val[f], from, (unsigned)nleaves);
        free(val[f]);
    }
    free(from);
    free(bb);
    return (Pick){phi[0], phi[1], phi[2]};
}

/* int PROG_run(int64_t DIM..., float *PTR...): the CPU kernels over the pool. */
static void build_run(Host *h, const LoopProgram *lp, const LLVMValueRef *kfn)
{
    const TeProgram *te = lp->te;
    int nd = te->ndims, nt = te->ntensors;
    LLVMTypeRef i32 = LLVMInt32TypeInContext(h->cx);
    int *param_of = xcalloc((size_t)nt, sizeof *param_of);
    LLVMValueRef *numel = xcalloc((size_t)nt, sizeof *numel);
    entry_begin(h, lp, "_run", false, param_of, numel);

    /* the dims and bufs arrays of the kernel ABI; intermediates allocated */
    LLVMValueRef null = LLVMConstPointerNull(h->ptr);
    LLVMValueRef dims = LLVMBuildAlloca(h->b, LLVMArrayType2(h->i64, (uint64_t)nd + 1), "dims");
    LLVMValueRef bufs = LLVMBuildAlloca(h->b, LLVMArrayType2(h->ptr, (uint64_t)nt + 1), "bufs");
    LLVMValueRef rc = LLVMBuildAlloca(h->b, i32, "rc");
    LLVMBuildStore(h->b, LLVMConstInt(i32, 0, 0), rc);
    for (int i = 0; i < nd; i++) {
        LLVMValueRef idx = ci64(h, te->dims[i]->pos);
        LLVMBuildStore(h->b, LLVMGetParam(h->fn, (unsigned)i), LLVMBuildGEP2(h->b, h->i64, dims, &idx, 1, ""));
    }
    LLVMValueRef *slot = xcalloc((size_t)nt, sizeof *slot);
    for (int i = 0; i < nt; i++) {
        LLVMValueRef idx = ci64(h, i);
        slot[i] = LLVMBuildGEP2(h->b, h->ptr, bufs, &idx, 1, "");
        LLVMBuildStore(h->b, param_of[i] >= 0 ? LLVMGetParam(h->fn, (unsigned)param_of[i]) : null, slot[i]);
    }
    LLVMBasicBlockRef cleanup = LLVMAppendBasicBlockInContext(h->cx, h->fn, "cleanup");
    LLVMTypeRef allocty = LLVMFunctionType(h->ptr, &h->i64, 1, 0);
    LLVMValueRef allocf = runtime_fn(h, "dcrt_alloc", allocty);
    for (int i = 0; i < nt; i++) {
        if (param_of[i] >= 0 || !lp->materialized[i])
            continue;
        LLVMValueRef bytes = LLVMBuildMul(h->b, numel[i], ci64(h, 4), "");
        LLVMValueRef p = LLVMBuildCall2(h->b, allocty, allocf, &bytes, 1, "");
        LLVMBuildStore(h->b, p, slot[i]);
        LLVMValueRef nomem = LLVMBuildSelect(h->b, LLVMBuildICmp(h->b, LLVMIntEQ, p, null, ""),
                                             LLVMConstInt(i32, DCRT_ERR_OUT_OF_MEMORY, 0),
                                             LLVMConstInt(i32, 0, 0), "");
        check_rc(h, nomem, rc, cleanup);
    }
    /* the stages, in order, each the kernel its dispatch picks */
    LLVMTypeRef pft[4] = {h->i64, h->ptr, h->ptr, h->ptr};
    LLVMTypeRef pfty = LLVMFunctionType(i32, pft, 4, 0);
    LLVMValueRef pf = runtime_fn(h, "dcrt_parallel_for", pfty);
    for (int s = 0; s < lp->nstages; s++) {
        Pick k = stage_pick(h, lp, s, kfn);
        LLVMValueRef args[4] = {k.nblocks, k.kernel, dims, bufs};
        check_rc(h, LLVMBuildCall2(h->b, pfty, pf, args, 4, ""), rc, cleanup);
    }
    LLVMBuildBr(h->b, cleanup);
    LLVMPositionBuilderAtEnd(h->b, cleanup);
    free_temps(h, lp, param_of, slot, h->ptr, "dcrt_free");
    LLVMBuildRet(h->b, LLVMBuildLoad2(h->b, i32, rc, ""));
    free(slot);
    free(numel);
    free(param_of);
}

/* A private constant NUL-terminated string. */
static LLVMValueRef const_string(Host *h, const char *s, const char *name)
{
    LLVMValueRef init = LLVMConstStringInContext(h->cx, s, (unsigned)strlen(s), 0);
    LLVMValueRef g = LLVMAddGlobal(h->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    return g;
}

/* int PROG_launch(int64_t DIM..., uint64_t PTR..., void *stream): the PTX
 * (embedded) loaded through the runtime on first call, kernels launched
 * on stream with the NVPTX ABI of dietcode/codegen.h. Intermediates are
 * device buffers allocated here and freed after a synchronisation, so a
 * program with intermediates returns only when its kernels are done; one
 * without returns at once. */
static void build_launch(Host *h, const LoopProgram *lp, const char *ptx)
{
    const TeProgram *te = lp->te;
    int nd = te->ndims, nt = te->ntensors, nk = lp->nkernels;
    LLVMTypeRef i32 = LLVMInt32TypeInContext(h->cx);
    int *param_of = xcalloc((size_t)nt, sizeof *param_of);
    LLVMValueRef *numel = xcalloc((size_t)nt, sizeof *numel);
    entry_begin(h, lp, "_launch", true, param_of, numel);
    LLVMValueRef stream = LLVMGetParam(h->fn, LLVMCountParams(h->fn) - 1);

    /* the module, loaded once */
    LLVMValueRef cache = LLVMAddGlobal(h->mod, h->ptr, "dc.module");
    LLVMSetInitializer(cache, LLVMConstPointerNull(h->ptr));
    LLVMSetLinkage(cache, LLVMInternalLinkage);
    LLVMValueRef ptxg = const_string(h, ptx, "dc.ptx");
    LLVMValueRef *namev = xcalloc((size_t)nk, sizeof *namev);
    for (int i = 0; i < nk; i++)
        namev[i] = const_string(h, lp->kernels[i]->name, "dc.kname");
    LLVMValueRef names_init = LLVMConstArray2(h->ptr, namev, (uint64_t)nk);
    LLVMValueRef names = LLVMAddGlobal(h->mod, LLVMTypeOf(names_init), "dc.knames");
    LLVMSetInitializer(names, names_init);
    LLVMSetGlobalConstant(names, 1);
    LLVMSetLinkage(names, LLVMPrivateLinkage);
    free(namev);
    LLVMValueRef fns = LLVMBuildAlloca(h->b, LLVMArrayType2(h->ptr, (uint64_t)nk + 1), "fns");
    LLVMTypeRef kt[5] = {h->ptr, h->ptr, i32, h->ptr, h->ptr};
    LLVMTypeRef kty = LLVMFunctionType(i32, kt, 5, 0);
    LLVMValueRef kargs[5] = {cache, ptxg, LLVMConstInt(i32, (unsigned)nk, 0), names, fns};
    LLVMValueRef r = LLVMBuildCall2(h->b, kty, runtime_fn(h, "dcrt_cuda_kernels", kty), kargs, 5, "");
    LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(h->cx, h->fn, "noload");
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(h->cx, h->fn, "loaded");
    LLVMBuildCondBr(h->b, LLVMBuildICmp(h->b, LLVMIntNE, r, LLVMConstInt(i32, 0, 0), ""), fail, ok);
    LLVMPositionBuilderAtEnd(h->b, fail);
    LLVMBuildRet(h->b, r);
    LLVMPositionBuilderAtEnd(h->b, ok);

    /* kernel parameters: every dim (by position), every materialised buffer */
    LLVMValueRef dimv = LLVMBuildAlloca(h->b, LLVMArrayType2(h->i64, (uint64_t)nd + 1), "dimv");
    LLVMValueRef dbuf = LLVMBuildAlloca(h->b, LLVMArrayType2(h->i64, (uint64_t)nt + 1), "dbuf");
    LLVMValueRef args = LLVMBuildAlloca(h->b, LLVMArrayType2(h->ptr, (uint64_t)(nd + nt) + 1), "args");
    LLVMValueRef rc = LLVMBuildAlloca(h->b, i32, "rc");
    LLVMBuildStore(h->b, LLVMConstInt(i32, 0, 0), rc);
    int na = 0;
    for (int pos = 0; pos < nd; pos++) {
        LLVMValueRef idx = ci64(h, pos), ai = ci64(h, na++);
        LLVMValueRef p = LLVMBuildGEP2(h->b, h->i64, dimv, &idx, 1, "");
        LLVMBuildStore(h->b, h->dimv[pos], p);
        LLVMBuildStore(h->b, p, LLVMBuildGEP2(h->b, h->ptr, args, &ai, 1, ""));
    }
    LLVMValueRef *slot = xcalloc((size_t)nt, sizeof *slot);
    for (int i = 0; i < nt; i++) {
        LLVMValueRef idx = ci64(h, i);
        slot[i] = LLVMBuildGEP2(h->b, h->i64, dbuf, &idx, 1, "");
        LLVMBuildStore(h->b, param_of[i] >= 0 ? LLVMGetParam(h->fn, (unsigned)param_of[i]) : ci64(h, 0),
                       slot[i]);
        if (lp->materialized[i]) {
            LLVMValueRef ai = ci64(h, na++);
            LLVMBuildStore(h->b, slot[i], LLVMBuildGEP2(h->b, h->ptr, args, &ai, 1, ""));
        }
    }
    LLVMBasicBlockRef cleanup = LLVMAppendBasicBlockInContext(h->cx, h->fn, "cleanup");
    bool temps = false;
    LLVMTypeRef at[2] = {h->i64, h->ptr};
    LLVMTypeRef allocty = LLVMFunctionType(i32, at, 2, 0);
    for (int i = 0; i < nt; i++) {
        if (param_of[i] >= 0 || !lp->materialized[i])
            continue;
        temps = true;
        LLVMValueRef a[2] = {LLVMBuildMul(h->b, numel[i], ci64(h, 4), ""), slot[i]};
        check_rc(h, LLVMBuildCall2(h->b, allocty, runtime_fn(h, "dcrt_cuda_alloc", allocty), a, 2, ""),
                 rc, cleanup);
    }
    LLVMTypeRef lt[5] = {h->ptr, h->i64, h->i64, h->ptr, h->ptr};
    LLVMTypeRef lty = LLVMFunctionType(i32, lt, 5, 0);
    LLVMValueRef launch = runtime_fn(h, "dcrt_cuda_launch", lty);
    for (int s = 0; s < lp->nstages; s++) {
        Pick k = stage_pick(h, lp, s, NULL);
        LLVMValueRef fn = LLVMBuildLoad2(h->b, h->ptr, LLVMBuildGEP2(h->b, h->ptr, fns, &k.kernel, 1, ""), "");
        LLVMValueRef a[5] = {fn, k.nblocks, k.nthreads, stream, args};
        check_rc(h, LLVMBuildCall2(h->b, lty, launch, a, 5, ""), rc, cleanup);
    }
    LLVMBuildBr(h->b, cleanup);
    LLVMPositionBuilderAtEnd(h->b, cleanup);
    if (temps) {
        LLVMTypeRef syty = LLVMFunctionType(i32, NULL, 0, 0);
        LLVMValueRef s = LLVMBuildCall2(h->b, syty, runtime_fn(h, "dcrt_cuda_sync", syty), NULL, 0, "");
        LLVMValueRef r0 = LLVMBuildLoad2(h->b, i32, rc, "");
        LLVMBuildStore(h->b, LLVMBuildSelect(h->b, LLVMBuildICmp(h->b, LLVMIntNE, r0, LLVMConstInt(i32, 0, 0), ""),
                                             r0, s, ""), rc);
        free_temps(h, lp, param_of, slot, h->i64, "dcrt_cuda_free");
    }
    LLVMBuildRet(h->b, LLVMBuildLoad2(h->b, i32, rc, ""));
    free(slot);
    free(numel);
    free(param_of);
}

/* The module of the object, verified and optimised: for the CPU (ptx
 * NULL) the kernels and PROG_run, for the GPU the PTX and PROG_launch. */
static LLVMModuleRef build_host_module(LLVMContextRef cx, const LoopProgram *lp, const char *ptx,
                                       LLVMTargetMachineRef tm, char *err, size_t errlen)
{
    const CgTarget *t = cg_target_cpu_portable();
    const char *prog = lp->te->name;
    LLVMModuleRef mod = cg_module_new(cx, prog, t, tm);
    LLVMValueRef *kfn = xcalloc((size_t)lp->nkernels, sizeof *kfn);
    for (int i = 0; i < lp->nkernels && !ptx; i++) {
        const Kernel *k = lp->kernels[i];
        IR_ASSERT(k->body->kind == ST_FOR && k->body->loop.fk == FK_BLOCK);
        char *sym = kernel_sym(prog, k->name);
        cg_emit_kernel(mod, t, lp, k, sym);
        kfn[i] = LLVMGetNamedFunction(mod, sym);
        IR_ASSERT(kfn[i]);
        LLVMSetLinkage(kfn[i], LLVMInternalLinkage);
        free(sym);
    }
    Host h = {
        .cx = cx, .mod = mod, .b = LLVMCreateBuilderInContext(cx),
        .i1 = LLVMInt1TypeInContext(cx), .i64 = LLVMInt64TypeInContext(cx),
        .ptr = LLVMPointerTypeInContext(cx, 0),
        .dimv = xcalloc((size_t)lp->te->ndims, sizeof(LLVMValueRef)),
    };
    if (ptx)
        build_launch(&h, lp, ptx);
    else
        build_run(&h, lp, kfn);
    LLVMDisposeBuilder(h.b);
    free(h.dimv);
    free(kfn);
    if (h.bad)
        snprintf(err, errlen, "internal error: cannot compute an extent on the host: it uses %s", h.bad);
    if (h.bad || cg_verify_module(mod, err, errlen) < 0 || cg_optimize_module(mod, tm, err, errlen) < 0) {
        LLVMDisposeModule(mod);
        return NULL;
    }
    return mod;
}

int cg_emit_object(const LoopProgram *lp, const char *ptx, char **out, size_t *len, char *err,
                   size_t errlen)
{
    *out = NULL;
    *len = 0;
    LLVMTargetMachineRef tm = cg_target_machine(cg_target_cpu_portable(), err, errlen);
    if (!tm)
        return -1;
    LLVMContextRef cx = LLVMContextCreate();
    LLVMModuleRef mod = build_host_module(cx, lp, ptx, tm, err, errlen);
    int rc = -1;
    if (mod) {
        char *msg = NULL;
        LLVMMemoryBufferRef buf = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg, &buf)) {
            snprintf(err, errlen, "LLVM code generation failed: %s", msg ? msg : "?");
        } else {
            *len = LLVMGetBufferSize(buf);
            *out = malloc(*len ? *len : 1);
            if (*out) {
                memcpy(*out, LLVMGetBufferStart(buf), *len);
                rc = 0;
            } else {
                snprintf(err, errlen, "out of memory");
            }
            LLVMDisposeMemoryBuffer(buf);
        }
        LLVMDisposeMessage(msg);
        LLVMDisposeModule(mod);
    }
    LLVMContextDispose(cx);
    LLVMDisposeTargetMachine(tm);
    return rc;
}

/* ---- the header ---- */

/* Prints s with every line prefixed " * " and no comment terminator. */
static void comment_lines(FILE *f, const char *s)
{
    fputs(" *   ", f);
    for (; *s; s++) {
        if (*s == '\n') {
            if (s[1])
                fputs("\n *   ", f);
            continue;
        }
        if (*s == '*' && s[1] == '/') {
            fputs("* ", f);
            continue;
        }
        fputc(*s, f);
    }
    fputc('\n', f);
}

char *cg_emit_header(const LoopProgram *lp, bool gpu, char *err, size_t errlen)
{
    const TeProgram *te = lp->te;
    const char *prog = te->name;
    char *te_text = NULL, *buf = NULL;
    size_t te_len = 0, len = 0;
    FILE *m = open_memstream(&te_text, &te_len);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ir_print_te(m, te);
    fclose(m);
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        free(te_text);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char guard[256];
    snprintf(guard, sizeof guard, "DCC_%s_H", prog);
    for (char *c = guard; *c; c++)
        if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
    fprintf(f, "/* Generated by dcc for program %s: link its object with libdcrt.a\n"
               " * (-lpthread -lm -ldl). Do not edit.\n *\n * The program:\n", prog);
    comment_lines(f, te_text);
    fputs(" *\n * Dims (any value from LO up to the largest accepted runs; the range is\n"
          " * what the kernels were tuned for):\n", f);
    for (int i = 0; i < te->ndims; i++) {
        const Var *d = te->dims[i];
        fprintf(f, " *   %s in %lld..%lld, accepted up to %lld\n", d->name, (long long)d->lo,
                (long long)d->hi, (long long)d->max);
    }
    if (gpu)
        fprintf(f, " *\n * %s_launch checks the dims and that no tensor exceeds INT32_MAX\n"
                   " * elements, loads the embedded PTX through the CUDA driver on first call\n"
                   " * (libdcrt.a dlopens libcuda.so.1), and launches the kernels on stream\n"
                   " * (a CUstream, NULL for the default). Tensors are device pointers\n"
                   " * (CUdeviceptr) to row-major float32 data. A program with intermediate\n"
                   " * tensors allocates them on the device and synchronises before freeing\n"
                   " * them; otherwise the call returns as soon as the kernels are queued.\n"
                   " * Returns DCRT_OK or an error code below; after an error,\n"
                   " * dcrt_last_error() says on the calling thread what failed (the dim, the\n"
                   " * driver's message, the JIT's log when the driver rejects the PTX).\n", prog);
    else
        fprintf(f, " *\n * %s_run checks the dims and that no tensor exceeds INT32_MAX elements,\n"
                   " * computes the outputs (tensors row-major, float32) with a thread pool\n"
                   " * (one thread per core) and returns DCRT_OK or an error code below;\n"
                   " * after an error, dcrt_last_error() says on the calling thread what failed.\n",
                prog);
    fprintf(f, " */\n#ifndef %s\n#define %s\n\n#include <stdint.h>\n\n"
               "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
            guard, guard);
    fputs("/* Error codes (the same in every dcc header and in libdcrt.a). */\n"
          "#define DCRT_OK 0\n"
          "#define DCRT_ERR_DIM_RANGE 1\n"
          "#define DCRT_ERR_TOO_LARGE 2\n"
          "#define DCRT_ERR_NULL_POINTER 3\n"
          "#define DCRT_ERR_OUT_OF_MEMORY 4\n"
          "#define DCRT_ERR_THREADS 5\n"
          "#define DCRT_ERR_NO_DRIVER 6\n"
          "#define DCRT_ERR_NO_DEVICE 7\n"
          "#define DCRT_ERR_CUDA 8\n"
          "#define DCRT_ERR_MODULE 9\n"
          "const char *dcrt_error_string(int code);\n"
          "/* The calling thread's last failure in detail (\"\" before any). */\n"
          "const char *dcrt_last_error(void);\n\n", f);
    fprintf(f, "int %s_%s(", prog, gpu ? "launch" : "run");
    bool first = true;
    for (int i = 0; i < te->ndims; i++, first = false)
        fprintf(f, "%sint64_t %s", first ? "" : ", ", te->dims[i]->name);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < te->ntensors; i++)
            if (te->tensors[i]->kind == (pass ? TK_OUTPUT : TK_INPUT)) {
                fprintf(f, "%s%s%s", first ? "" : ", ", gpu ? "uint64_t " : "float *",
                        te->tensors[i]->name);
                first = false;
            }
    if (gpu)
        fprintf(f, "%svoid *stream", first ? "" : ", ");
    fprintf(f, "%s);\n\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n", first && !gpu ? "void" : "");
    free(te_text);
    if (fclose(f) != 0) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return buf;
}
