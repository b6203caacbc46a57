/* Ahead-of-time output: one relocatable host object and its C header.
 *
 * `dcc prog.tex --emit=obj,header` writes prog.o and prog.h. The object is
 * an x86-64 ELF module (PIC, since Debian links PIE by default) for the
 * portable x86-64 host, holding
 *   - the program's table (dietcode/abi.h, built by codegen/table.c) as
 *     constants, and its size expressions (every extent and grid) as one
 *     function prog__size(ctx, which, dims, overflow) in checked int64
 *     arithmetic;
 *   - for the CPU, every kernel once per instruction set asked for
 *     (--arch: x86-64-v2, v3, v4, a CPU name or native), each compiled
 *     with that set's features, internal (prog__KERNEL__SET), and a table
 *     of their addresses; for the GPU, the PTX as a private string and a
 *     slot where libdcrt keeps the loaded module;
 *   - the exported entry points (cg_host_module in dietcode/codegen.h),
 *     each packing its arguments into arrays and calling libdcrt: dcrt_run
 *     or dcrt_cuda_run, which plan the call from the table
 *     (runtime/plan.c: dims and sizes checked, each stage's variant picked
 *     by its dispatch tree, grids, the workspace laid out), pick the
 *     instruction set and launch.
 * So an object does nothing on its own that dcc's executors do not do in
 * the same code: `dcc run` JIT-compiles this very module.
 */
#include "dietcode/codegen_llvm.h"

#include <stdlib.h>
#include <string.h>

typedef struct Host {
    CgModule *m;
    LLVMContextRef cx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef i1, i32, i64, ptr;
    LLVMValueRef dims;  /* in the size function: the dims array */
    LLVMValueRef ovf;   /* i1: some step overflowed */
    const char *bad;    /* an operator a size may not use, or NULL */
    /* the constants' elements already in the object, by where the program
     * holds them (several lowerings share a TE program's constants) */
    const void **cdata;
    LLVMValueRef *cglob;
    int nconst;
} Host;

static LLVMValueRef ci64(Host *h, int64_t v) { return LLVMConstInt(h->i64, (unsigned long long)v, 1); }
static LLVMValueRef ci32(Host *h, int64_t v) { return LLVMConstInt(h->i32, (unsigned long long)v, 1); }

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n + 1, size);
    if (!p)
        ir_panic(__FILE__, __LINE__, "out of memory");
    return p;
}

/* ---- the size function ---- */

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

/* A size expression over the dims, exact: + - * negation overflow-checked
 * (as ir_eval_dims_checked), / and % as ir/semantics.c defines them. */
static LLVMValueRef size_expr(Host *h, const Expr *e)
{
    switch (e->kind) {
    case EX_INT: return ci64(h, e->ival);
    case EX_VAR: {
        if (e->var->kind != VK_DIM) {
            h->bad = "a variable other than a dim";
            return ci64(h, 0);
        }
        LLVMValueRef idx = ci64(h, e->var->pos);
        return LLVMBuildLoad2(h->b, h->i64, LLVMBuildGEP2(h->b, h->i64, h->dims, &idx, 1, ""),
                              e->var->name);
    }
    case EX_NEG: return checked(h, "ssub", ci64(h, 0), size_expr(h, e->op.a));
    case EX_ADD: return checked(h, "sadd", size_expr(h, e->op.a), size_expr(h, e->op.b));
    case EX_SUB: return checked(h, "ssub", size_expr(h, e->op.a), size_expr(h, e->op.b));
    case EX_MUL: return checked(h, "smul", size_expr(h, e->op.a), size_expr(h, e->op.b));
    case EX_DIV:
    case EX_MOD:
        return cg_floordivmod(h->b, size_expr(h, e->op.a), size_expr(h, e->op.b), e->kind == EX_MOD);
    case EX_MIN:
    case EX_MAX: {
        LLVMValueRef a = size_expr(h, e->op.a), b = size_expr(h, e->op.b);
        LLVMValueRef lt = LLVMBuildICmp(h->b, LLVMIntSLT, a, b, "");
        return e->kind == EX_MIN ? LLVMBuildSelect(h->b, lt, a, b, "")
                                 : LLVMBuildSelect(h->b, lt, b, a, "");
    }
    default:
        h->bad = ir_op_name(e->kind);
        return ci64(h, 0);
    }
}

/* Size indices by their expressions (interned: equal is identical), then
 * by index. */
static int by_expr(const void *a, const void *b, void *ud)
{
    const CgTable *tb = ud;
    int i = *(const int *)a, j = *(const int *)b;
    uint32_t x = tb->sizes[i]->id, y = tb->sizes[j]->id;
    return x != y ? (x < y ? -1 : 1) : i - j;
}

/* int64_t SYM__size(const void *ctx, int32_t which, const int64_t *dims,
 * int32_t *overflow): a switch over the table's size expressions. */
static LLVMValueRef size_function(Host *h, const CgTable *tb, const char *name)
{
    LLVMTypeRef pt[4] = {h->ptr, h->i32, h->ptr, h->ptr};
    LLVMValueRef fn = LLVMAddFunction(h->mod, name, LLVMFunctionType(h->i64, pt, 4, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    h->dims = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(h->cx, fn, "entry");
    LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(h->cx, fn, "unknown");
    LLVMPositionBuilderAtEnd(h->b, entry);
    LLVMValueRef sw = LLVMBuildSwitch(h->b, LLVMGetParam(fn, 1), bad, (unsigned)tb->nsizes);
    /* one block per distinct expression (most extents are the same few), in
     * order of their first use */
    int *order = xcalloc((size_t)tb->nsizes, sizeof *order);
    for (int i = 0; i < tb->nsizes; i++)
        order[i] = i;
    qsort_r(order, (size_t)tb->nsizes, sizeof *order, by_expr, (void *)tb);
    LLVMBasicBlockRef *block = xcalloc((size_t)tb->nsizes, sizeof *block);
    for (int k = 0; k < tb->nsizes; k++) {
        int i = order[k];
        if (k > 0 && tb->sizes[order[k - 1]] == tb->sizes[i])
            block[i] = block[order[k - 1]];
        else
            block[i] = LLVMAppendBasicBlockInContext(h->cx, fn, "size");
    }
    for (int i = 0; i < tb->nsizes; i++) {
        LLVMAddCase(sw, ci32(h, i), block[i]);
        if (LLVMGetFirstInstruction(block[i]))
            continue; /* built for an earlier equal expression */
        LLVMPositionBuilderAtEnd(h->b, block[i]);
        h->ovf = LLVMConstInt(h->i1, 0, 0);
        LLVMValueRef v = size_expr(h, tb->sizes[i]);
        LLVMBasicBlockRef set = LLVMAppendBasicBlockInContext(h->cx, fn, "overflow");
        LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(h->cx, fn, "done");
        LLVMBuildCondBr(h->b, h->ovf, set, done);
        LLVMPositionBuilderAtEnd(h->b, set);
        LLVMBuildStore(h->b, ci32(h, 1), LLVMGetParam(fn, 3));
        LLVMBuildBr(h->b, done);
        LLVMPositionBuilderAtEnd(h->b, done);
        LLVMBuildRet(h->b, v);
    }
    free(order);
    free(block);
    LLVMPositionBuilderAtEnd(h->b, bad);
    LLVMBuildStore(h->b, ci32(h, 1), LLVMGetParam(fn, 3));
    LLVMBuildRet(h->b, ci64(h, 0));
    return fn;
}

/* ---- the table as constants ---- */

/* A private constant: a NUL-terminated string, or an array. */
static LLVMValueRef private_const(Host *h, LLVMValueRef init, const char *name)
{
    LLVMValueRef g = LLVMAddGlobal(h->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    return g;
}

static LLVMValueRef string(Host *h, const char *s)
{
    if (!s)
        return LLVMConstPointerNull(h->ptr);
    return private_const(h, LLVMConstStringInContext(h->cx, s, (unsigned)strlen(s), 0), "dc.str");
}

/* A private array of n elements of type ty, or NULL for none. */
static LLVMValueRef array(Host *h, LLVMTypeRef ty, LLVMValueRef *v, int n, const char *name)
{
    if (n == 0)
        return LLVMConstPointerNull(h->ptr);
    return private_const(h, LLVMConstArray2(ty, v, (uint64_t)n), name);
}

static LLVMValueRef record(Host *h, LLVMValueRef *f, unsigned n)
{
    return LLVMConstStructInContext(h->cx, f, n, 0);
}

static LLVMTypeRef record_type(Host *h, LLVMTypeRef *f, unsigned n)
{
    return LLVMStructTypeInContext(h->cx, f, n, 0);
}

/* Buffer i's constant elements (NULL when it is none): in the object's
 * read-only data, or where the program holds them for a JIT. */
static LLVMValueRef const_data(Host *h, const CgTable *tb, int i, bool jit)
{
    const DcrtBuffer *b = &tb->prog.buffers[i];
    if (!b->data)
        return LLVMConstPointerNull(h->ptr);
    if (jit)
        return LLVMConstIntToPtr(ci64(h, (int64_t)(uintptr_t)b->data), h->ptr);
    for (int c = 0; c < h->nconst; c++)
        if (h->cdata[c] == b->data)
            return h->cglob[c];
    int64_t bytes = ir_dtype_size((DType)b->dtype), e;
    for (int j = 0; j < b->rank; j++) {
        bool fixed = ir_is_const(tb->sizes[b->extents + j], &e);
        IR_ASSERT(fixed); /* a constant's extents are */
        bytes *= e;
    }
    LLVMValueRef g = private_const(
        h, LLVMConstStringInContext(h->cx, b->data, (unsigned)bytes, 1), "dc.const");
    LLVMSetAlignment(g, 64);
    h->cdata = realloc(h->cdata, sizeof *h->cdata * (size_t)(h->nconst + 1));
    h->cglob = realloc(h->cglob, sizeof *h->cglob * (size_t)(h->nconst + 1));
    if (!h->cdata || !h->cglob)
        ir_panic(__FILE__, __LINE__, "out of memory");
    h->cdata[h->nconst] = b->data;
    h->cglob[h->nconst++] = g;
    return g;
}

/* The DcrtProgram of tb, with fns (CPU) or ptx (GPU), and next (a table
 * of another lowering, or NULL), named name. */
static LLVMValueRef program_table(Host *h, const CgTable *tb, LLVMValueRef size_fn,
                                  const CgHostOpts *o, LLVMValueRef const *kfn, LLVMValueRef next,
                                  const char *name)
{
    const DcrtProgram *p = &tb->prog;
    LLVMTypeRef P = h->ptr, I32 = h->i32, I64 = h->i64;
    int cap = p->ndims + p->nbuffers + p->nparams + p->nkernels + tb->nkernel_args +
              p->nvariants + p->nnodes + p->nstages + o->nisas * (p->nkernels + 2) + 1;
    LLVMValueRef *v = xcalloc((size_t)cap, sizeof *v);

    LLVMTypeRef dim_t = record_type(h, (LLVMTypeRef[]){P, I64, I64, I64}, 4);
    for (int i = 0; i < p->ndims; i++) {
        const DcrtDim *d = &p->dims[i];
        v[i] = record(h, (LLVMValueRef[]){string(h, d->name), ci64(h, d->lo), ci64(h, d->hi),
                                          ci64(h, d->max)}, 4);
    }
    LLVMValueRef dims = array(h, dim_t, v, p->ndims, "dc.dims");

    LLVMTypeRef buf_t =
        record_type(h, (LLVMTypeRef[]){P, I32, I32, I32, I32, I32, I32, I32, I32, P}, 10);
    for (int i = 0; i < p->nbuffers; i++) {
        const DcrtBuffer *b = &p->buffers[i];
        v[i] = record(h, (LLVMValueRef[]){string(h, b->name), ci32(h, b->kind), ci32(h, b->rank),
                                          ci32(h, b->extents), ci32(h, b->stage),
                                          ci32(h, b->variant), ci32(h, b->first),
                                          ci32(h, b->last), ci32(h, b->dtype),
                                          const_data(h, tb, i, o->jit)}, 10);
    }
    LLVMValueRef bufs = array(h, buf_t, v, p->nbuffers, "dc.buffers");

    for (int i = 0; i < p->nparams; i++)
        v[i] = ci32(h, p->params[i]);
    LLVMValueRef params = array(h, I32, v, p->nparams, "dc.params");

    LLVMTypeRef kern_t = record_type(h, (LLVMTypeRef[]){P, I32, I32, I32, I32, I32}, 6);
    for (int i = 0; i < p->nkernels; i++) {
        const DcrtKernel *k = &p->kernels[i];
        v[i] = record(h, (LLVMValueRef[]){string(h, k->name), ci32(h, k->blocks), ci32(h, k->threads),
                                          ci32(h, k->shared_bytes), ci32(h, k->args),
                                          ci32(h, k->nargs)},
                      6);
    }
    LLVMValueRef kernels = array(h, kern_t, v, p->nkernels, "dc.kernels");
    for (int i = 0; i < tb->nkernel_args; i++)
        v[i] = ci32(h, p->kernel_args[i]);
    LLVMValueRef kargs = array(h, I32, v, tb->nkernel_args, "dc.kernel_args");

    LLVMTypeRef var_t = record_type(h, (LLVMTypeRef[]){I32, I32}, 2);
    for (int i = 0; i < p->nvariants; i++)
        v[i] = record(h, (LLVMValueRef[]){ci32(h, p->variants[i].first), ci32(h, p->variants[i].count)},
                      2);
    LLVMValueRef variants = array(h, var_t, v, p->nvariants, "dc.variants");

    LLVMTypeRef node_t = record_type(h, (LLVMTypeRef[]){I32, I32, I32, I32, I64}, 5);
    for (int i = 0; i < p->nnodes; i++) {
        const DcrtNode *x = &p->nodes[i];
        v[i] = record(h, (LLVMValueRef[]){ci32(h, x->variant), ci32(h, x->dim), ci32(h, x->then_node),
                                          ci32(h, x->else_node), ci64(h, x->le)}, 5);
    }
    LLVMValueRef nodes = array(h, node_t, v, p->nnodes, "dc.nodes");

    LLVMTypeRef stage_t = record_type(h, (LLVMTypeRef[]){P, I32, I32, I32, I32}, 5);
    for (int i = 0; i < p->nstages; i++) {
        const DcrtStage *s = &p->stages[i];
        v[i] = record(h, (LLVMValueRef[]){string(h, s->name), ci32(h, s->variants),
                                          ci32(h, s->nvariants), ci32(h, s->nodes),
                                          ci32(h, s->nnodes)}, 5);
    }
    LLVMValueRef stages = array(h, stage_t, v, p->nstages, "dc.stages");

    LLVMValueRef levels = LLVMConstPointerNull(P), names = levels, fns = levels, ptx = levels,
                 cache = levels;
    if (o->ptx) {
        ptx = string(h, o->ptx);
        cache = LLVMAddGlobal(h->mod, P, "dc.module");
        LLVMSetInitializer(cache, LLVMConstPointerNull(P));
        LLVMSetLinkage(cache, LLVMInternalLinkage);
    } else {
        for (int i = 0; i < o->nisas; i++)
            v[i] = ci32(h, o->isas[i]->level);
        levels = array(h, I32, v, o->nisas, "dc.isa_levels");
        for (int i = 0; i < o->nisas; i++)
            v[i] = string(h, o->isas[i]->arch);
        names = array(h, P, v, o->nisas, "dc.isa_names");
        fns = array(h, P, (LLVMValueRef *)kfn, o->nisas * p->nkernels, "dc.fns");
    }
    free(v);

    LLVMValueRef f[] = {
        ci32(h, p->abi), string(h, p->name), ci32(h, p->ndims), ci32(h, p->nbuffers),
        ci32(h, p->nparams), ci32(h, p->nkernels), ci32(h, p->nvariants), ci32(h, p->nnodes),
        ci32(h, p->nstages), ci32(h, o->ptx ? 0 : o->nisas), dims, bufs, params, kernels,
        variants, nodes, stages, size_fn, LLVMConstPointerNull(P), levels, names, fns, ptx, cache,
        kargs, next ? next : LLVMConstPointerNull(P),
    };
    LLVMValueRef init = record(h, f, sizeof f / sizeof *f);
    LLVMValueRef g = LLVMAddGlobal(h->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    return g;
}

/* ---- the exported entry points ---- */

/* An exported function SYM + suffix of type fty, the builder at its entry. */
static LLVMValueRef entry(Host *h, const char *sym, const char *suffix, LLVMTypeRef fty)
{
    char *name = cg_symbol(sym, suffix);
    LLVMValueRef fn = LLVMAddFunction(h->mod, name, fty);
    free(name);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(h->cx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    LLVMPositionBuilderAtEnd(h->b, LLVMAppendBasicBlockInContext(h->cx, fn, "entry"));
    return fn;
}

/* An array of n values of type ty on the stack, filled from params
 * first .. first + n - 1 of fn. */
static LLVMValueRef pack(Host *h, LLVMValueRef fn, int first, int n, LLVMTypeRef ty)
{
    LLVMValueRef a = LLVMBuildAlloca(h->b, LLVMArrayType2(ty, (uint64_t)n + 1), "");
    for (int i = 0; i < n; i++) {
        LLVMValueRef idx = ci64(h, i);
        LLVMBuildStore(h->b, LLVMGetParam(fn, (unsigned)(first + i)),
                       LLVMBuildGEP2(h->b, ty, a, &idx, 1, ""));
    }
    return a;
}

static LLVMValueRef runtime_call(Host *h, const char *name, LLVMTypeRef ret, LLVMValueRef *args,
                                 int n)
{
    LLVMTypeRef at[8];
    for (int i = 0; i < n; i++)
        at[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef fty = LLVMFunctionType(ret, at, (unsigned)n, 0);
    LLVMValueRef f = LLVMGetNamedFunction(h->mod, name);
    if (!f)
        f = LLVMAddFunction(h->mod, name, fty);
    return LLVMBuildCall2(h->b, fty, f, args, (unsigned)n, "");
}

static void name_params(LLVMValueRef fn, const TeProgram *te, const DcrtProgram *p)
{
    int k = 0;
    for (int i = 0; i < te->ndims; i++, k++)
        LLVMSetValueName2(LLVMGetParam(fn, (unsigned)k), te->dims[i]->name, strlen(te->dims[i]->name));
    for (int i = 0; i < p->nparams; i++, k++) {
        const char *n = p->buffers[p->params[i]].name;
        LLVMSetValueName2(LLVMGetParam(fn, (unsigned)k), n, strlen(n));
    }
}

static void entries(Host *h, const LoopProgram *lp, const DcrtProgram *p, LLVMValueRef prog,
                    const char *sym, bool gpu)
{
    int nd = p->ndims, np = p->nparams;
    LLVMTypeRef ptrt = gpu ? h->i64 : h->ptr, wst = gpu ? h->i64 : h->ptr;
    LLVMTypeRef *pt = xcalloc((size_t)(nd + np + 2), sizeof *pt);
    for (int i = 0; i < nd + np; i++)
        pt[i] = i < nd ? h->i64 : ptrt;
    pt[nd + np] = wst;
    pt[nd + np + 1] = h->ptr;
    const char *run = gpu ? "dcrt_cuda_run" : "dcrt_run";

    /* NAME_run / NAME_launch: by value */
    LLVMValueRef fn = entry(h, sym, gpu ? "_launch" : "_run",
                            LLVMFunctionType(h->i32, pt, (unsigned)(nd + np + 1 + gpu), 0));
    name_params(fn, lp->te, p);
    LLVMValueRef a[5] = {prog, pack(h, fn, 0, nd, h->i64), pack(h, fn, nd, np, ptrt),
                         LLVMGetParam(fn, (unsigned)(nd + np)),
                         gpu ? LLVMGetParam(fn, (unsigned)(nd + np + 1)) : NULL};
    LLVMBuildRet(h->b, runtime_call(h, run, h->i32, a, gpu ? 5 : 4));

    /* NAME_run_packed / NAME_launch_packed: by array */
    LLVMTypeRef ppt[4] = {h->ptr, h->ptr, wst, h->ptr};
    fn = entry(h, sym, gpu ? "_launch_packed" : "_run_packed",
               LLVMFunctionType(h->i32, ppt, gpu ? 4 : 3, 0));
    LLVMValueRef b[5] = {prog, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2),
                         gpu ? LLVMGetParam(fn, 3) : NULL};
    LLVMBuildRet(h->b, runtime_call(h, run, h->i32, b, gpu ? 5 : 4));

    /* NAME_workspace_size */
    fn = entry(h, sym, "_workspace_size", LLVMFunctionType(h->i64, pt, (unsigned)nd, 0));
    for (int i = 0; i < nd; i++)
        LLVMSetValueName2(LLVMGetParam(fn, (unsigned)i), p->dims[i].name, strlen(p->dims[i].name));
    LLVMValueRef c[2] = {prog, pack(h, fn, 0, nd, h->i64)};
    LLVMBuildRet(h->b, runtime_call(h, "dcrt_workspace_size", h->i64, c, 2));
    free(pt);

    /* NAME_release (GPU): what the first call loaded */
    if (gpu) {
        LLVMTypeRef voidt = LLVMVoidTypeInContext(h->cx);
        entry(h, sym, "_release", LLVMFunctionType(voidt, NULL, 0, 0));
        runtime_call(h, "dcrt_cuda_release", voidt, &prog, 1);
        LLVMBuildRetVoid(h->b);
    }
}

/* The lowering instruction set i's kernels come from (o->isa_lps). */
static const LoopProgram *lowering_of(const LoopProgram *lp, const CgHostOpts *o, int i)
{
    return o->isa_lps && o->isa_lps[i] ? o->isa_lps[i] : lp;
}

/* What kernels that may be twins (one body, other buffers) share: their
 * threads, rank and micro-kernel, as text (malloc'd). */
static char *twin_class(const Kernel *k)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f)
        ir_panic(__FILE__, __LINE__, "out of memory");
    fprintf(f, "%d %d ", k->nthreads, k->domain->rank);
    ir_print_microkernel(f, &k->mk, k->domain->rank);
    fclose(f);
    return s;
}

/* Whether kernel i of g may have a twin among g's kernels: another of its
 * class. A tuning candidate's one or two kernels have none, and are not
 * built twice. */
static bool may_have_twin(const LoopProgram *g, int i, char **cls)
{
    for (int j = 0; j < g->nkernels; j++)
        if (j != i && strcmp(cls[i], cls[j]) == 0)
            return true;
    return false;
}

/* Kernel k of g as function ksym of m: on the CPU, where it may have a
 * twin, built first in a module of its own, and where its body is one
 * kept (codegen/dedupe.c) only its entry, calling that body. */
static void emit_kernel(CgModule *m, const CgTarget *t, const LoopProgram *g, const Kernel *k,
                        const char *ksym, CgBodies *bodies, bool twin_maybe)
{
    if (strcmp(t->name, "cpu") != 0 || !twin_maybe) {
        cg_emit_kernel(m->mod, t, g, k, ksym);
        return;
    }
    size_t blen = strlen(ksym) + 6;
    char *bname = xcalloc(blen, 1);
    snprintf(bname, blen, "%s.body", ksym);
    LLVMModuleRef own = LLVMModuleCreateWithNameInContext("dc.kernel", m->cx);
    cg_emit_kernel(own, t, g, k, ksym);
    LLVMValueRef fn = LLVMGetNamedFunction(own, bname);
    IR_ASSERT(fn);
    char *key = NULL;
    LLVMValueRef twin = cg_bodies_find(bodies, fn, &key);
    LLVMDisposeModule(own);
    if (twin) {
        cg_cpu_entry(m->mod, t, g, k, ksym, twin);
    } else {
        cg_emit_kernel(m->mod, t, g, k, ksym);
        if (key)
            cg_bodies_keep(bodies, key, LLVMGetNamedFunction(m->mod, bname));
    }
    free(bname);
}

/* The kernels of g's lowering for each of its instruction sets (kfn:
 * isa-major), internal to the module; bodies alike are one
 * (codegen/dedupe.c). */
static void isa_kernels(CgModule *m, const LoopProgram *g, const CgHostOpts *go, const char *sym,
                        LLVMValueRef *kfn)
{
    int nk = g->nkernels;
    CgBodies *bodies = cg_bodies_new();
    char **cls = xcalloc((size_t)nk + 1, sizeof *cls);
    bool *twins = xcalloc((size_t)nk + 1, sizeof *twins);
    for (int i = 0; i < nk; i++)
        cls[i] = twin_class(g->kernels[i]);
    for (int i = 0; i < nk; i++)
        twins[i] = may_have_twin(g, i, cls);
    for (int s = 0; s < go->nisas; s++)
        for (int i = 0; i < nk; i++) {
            const Kernel *k = g->kernels[i];
            size_t len = strlen(sym) + strlen(k->name) + strlen(go->isas[s]->arch) + 8;
            char *name = xcalloc(len, 1);
            snprintf(name, len, "%s__%s__%s", sym, k->name, go->isas[s]->arch);
            char *ksym = cg_symbol(NULL, name);
            free(name);
            emit_kernel(m, go->isas[s], g, k, ksym, bodies, twins[i]);
            kfn[s * nk + i] = LLVMGetNamedFunction(m->mod, ksym);
            IR_ASSERT(kfn[s * nk + i]);
            LLVMSetLinkage(kfn[s * nk + i], LLVMInternalLinkage);
            free(ksym);
        }
    cg_bodies_free(bodies);
    for (int i = 0; i < nk; i++)
        free(cls[i]);
    free(cls);
    free(twins);
}

CgModule *cg_host_module(const LoopProgram *lp, const CgHostOpts *o, char *err, size_t errlen)
{
    const char *sym = o->symbol ? o->symbol : lp->te->name;
    if (cg_symbol_prefix_check(sym, err, errlen) != 0)
        return NULL;
    /* the lowerings, in the order of their first instruction set: one
     * program table each, chained (DcrtProgram.next) */
    int nisa = o->ptx ? 0 : o->nisas, ng = 0;
    const LoopProgram **groups = xcalloc((size_t)nisa + 1, sizeof *groups);
    groups[ng++] = nisa > 0 ? lowering_of(lp, o, 0) : lp;
    for (int i = 1; i < nisa; i++) {
        const LoopProgram *g = lowering_of(lp, o, i);
        bool seen = false;
        for (int j = 0; j < ng && !seen; j++)
            seen = groups[j] == g;
        if (!seen)
            groups[ng++] = g;
    }
    CgTable **tb = xcalloc((size_t)ng, sizeof *tb);
    /* an object's constants lie in its read-only data, which code built for
     * the small code model reaches only within 2 GB; a JIT refers to the
     * program's copy instead (lowerings share the program's own) */
    int64_t bytes = 0;
    int nseen = 0;
    const void **seen = NULL;
    for (int g = 0; g < ng; g++) {
        tb[g] = cg_table_new(groups[g]);
        for (int i = 0; i < tb[g]->prog.nbuffers && !o->jit; i++) {
            const void *d = tb[g]->prog.buffers[i].data;
            bool again = !d;
            for (int j = 0; j < nseen && !again; j++)
                again = seen[j] == d;
            if (again)
                continue;
            if (!(seen = realloc(seen, sizeof *seen * (size_t)(nseen + 1))))
                ir_panic(__FILE__, __LINE__, "out of memory");
            seen[nseen++] = d;
            bytes += ir_te_bytes(groups[g]->buffers[i], NULL);
        }
    }
    free(seen);
    const CgTarget *host = cg_target_cpu_arch("x86-64", err, errlen);
    CgModule *m = NULL;
    if (bytes > CG_MAX_CONST_BYTES)
        snprintf(err, errlen,
                 "the program's constants are %lld bytes, more than the %lld an object holds "
                 "(its code reaches its read-only data within 2 GB)",
                 (long long)bytes, (long long)CG_MAX_CONST_BYTES);
    else if (!o->ptx && o->nisas < 1)
        snprintf(err, errlen, "internal error: a CPU object needs an instruction set");
    else if (host)
        m = cg_module_create(host, sym, err, errlen);
    if (!m) {
        for (int g = 0; g < ng; g++)
            cg_table_free(tb[g]);
        free(tb);
        free(groups);
        return NULL;
    }
    Host h = {
        .m = m, .cx = m->cx, .mod = m->mod, .b = LLVMCreateBuilderInContext(m->cx),
        .i1 = LLVMInt1TypeInContext(m->cx), .i32 = LLVMInt32TypeInContext(m->cx),
        .i64 = LLVMInt64TypeInContext(m->cx), .ptr = LLVMPointerTypeInContext(m->cx, 0),
    };
    /* the last lowering first, so that each table can name the next */
    LLVMValueRef prog = NULL;
    const CgTarget **gisas = xcalloc((size_t)nisa + 1, sizeof *gisas);
    for (int g = ng - 1; g >= 0; g--) {
        CgHostOpts go = *o;
        go.nisas = 0;
        go.isas = gisas;
        for (int i = 0; i < nisa; i++)
            if (lowering_of(lp, o, i) == groups[g])
                gisas[go.nisas++] = o->isas[i];
        LLVMValueRef *kfn = xcalloc((size_t)(go.nisas * groups[g]->nkernels), sizeof *kfn);
        isa_kernels(m, groups[g], &go, sym, kfn);
        char suffix[32];
        snprintf(suffix, sizeof suffix, g ? "__size_%d" : "__size", g);
        char *name = cg_symbol(sym, suffix);
        LLVMValueRef size_fn = size_function(&h, tb[g], name);
        free(name);
        snprintf(suffix, sizeof suffix, g ? "__program_%d" : "__program", g);
        name = cg_symbol(sym, suffix);
        prog = program_table(&h, tb[g], size_fn, &go, kfn, prog, name);
        free(name);
        free(kfn);
    }
    entries(&h, lp, &tb[0]->prog, prog, sym, o->ptx != NULL);
    for (int g = 0; g < ng; g++)
        cg_table_free(tb[g]);
    free(tb);
    free(groups);
    free(gisas);
    free(h.cdata);
    free(h.cglob);
    LLVMDisposeBuilder(h.b);
    if (h.bad) {
        snprintf(err, errlen, "internal error: cannot compute a size on the host: it uses %s", h.bad);
        cg_module_destroy(m);
        return NULL;
    }
    if (cg_module_optimize(m, err, errlen) < 0) {
        cg_module_destroy(m);
        return NULL;
    }
    return m;
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

/* ---- the header ---- */

/* Whether a header may not use s as a parameter's name: a C11, C23 or C++
 * keyword (or alternative token), a name the header itself uses (the
 * workspace and stream parameters, its types, its macros), one that
 * <stddef.h> or <stdint.h> define (their types and limit macros), or an
 * identifier reserved to the implementation (_X, and in C++ any with __). */
static bool reserved_name(const char *s)
{
    static const char *const words[] = {
        /* C11 */
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
        "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
        "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
        "typedef", "union", "unsigned", "void", "volatile", "while",
        /* C23 */
        "alignas", "alignof", "bool", "constexpr", "false", "nullptr", "static_assert",
        "thread_local", "true", "typeof", "typeof_unqual",
        /* C++ */
        "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t", "char32_t",
        "class", "co_await", "co_return", "co_yield", "compl", "concept", "const_cast",
        "consteval", "constinit", "decltype", "delete", "dynamic_cast", "explicit", "export",
        "friend", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "operator", "or",
        "or_eq", "private", "protected", "public", "reinterpret_cast", "requires",
        "static_cast", "template", "this", "throw", "try", "typeid", "typename", "using",
        "virtual", "wchar_t", "xor", "xor_eq",
        /* the header's own, and what its includes define */
        "workspace", "stream", "dims", "tensors", "NULL", "offsetof", "size_t", "ptrdiff_t",
        "max_align_t", "intptr_t", "uintptr_t", "intmax_t", "uintmax_t", "int8_t", "int16_t",
        "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strcmp(s, words[i]) == 0)
            return true;
    size_t n = strlen(s);
    bool ends_t = n > 2 && strcmp(s + n - 2, "_t") == 0;
    return (s[0] == '_' && s[1] >= 'A' && s[1] <= 'Z') || strstr(s, "__") ||
           strncmp(s, "DCRT_", 5) == 0 ||
           (n > 4 && (strcmp(s + n - 4, "_MAX") == 0 || strcmp(s + n - 4, "_MIN") == 0)) ||
           (n > 2 && strcmp(s + n - 2, "_C") == 0) || /* INT64_C(x) and the like */
           (ends_t && (strncmp(s, "int_", 4) == 0 || strncmp(s, "uint_", 5) == 0)); /* int_least8_t */
}

/* The parameters' names in the header, dims then inputs then outputs as
 * the entry takes them: each the program's own name where reserved_name
 * allows it and no other parameter has it, else the first free one of
 * NAME_, NAME_2, NAME_3, ... (argK, argK_2, ... for the K-th parameter
 * where NAME itself has a __ or ends in _): tensors int and int_ are int_2
 * and int_. Names are arena-allocated. */
static const char **param_names(Arena *a, const TeProgram *te, int *n)
{
    const char **names = IR_NEWN(a, const char *, te->ndims + te->ntensors);
    *n = 0;
    for (int i = 0; i < te->ndims; i++)
        names[(*n)++] = te->dims[i]->name;
    int *ids = IR_NEWN(a, int, te->ntensors + 1), np = ir_te_params(te, ids);
    for (int j = 0; j < np; j++)
        names[(*n)++] = te->tensors[ids[j]]->name;
    for (int i = 0; i < *n; i++) {
        const char *own = names[i];
        size_t len = strlen(own);
        bool plain = !strstr(own, "__") && own[len - 1] != '_';
        const char *base = plain ? own : ir_arena_printf(a, "arg%d", i + 1);
        for (int k = 0;; k++) {
            const char *c = k == 0 ? own : k == 1 ? ir_arena_printf(a, "%s_", base)
                                                  : ir_arena_printf(a, "%s_%d", base, k);
            bool taken = reserved_name(c);
            for (int j = 0; !taken && j < *n; j++)
                taken = j != i && strcmp(c, names[j]) == 0;
            if (!taken) {
                names[i] = c;
                break;
            }
        }
    }
    return names;
}

/* The C type of a tensor's elements in the header. */
static const char *c_elem_type(DType t)
{
    switch (t) {
    case DT_F32: return "float";
    case DT_I32: return "int32_t";
    case DT_I64: return "int64_t";
    case DT_BOOL: return "uint8_t"; /* one byte, 0 or 1 */
    }
    IR_UNREACHABLE();
}

/* "int64_t T, int64_t N" and the tensors after them, as the entry takes
 * them, with names from param_names. */
static void signature(FILE *f, const TeProgram *te, const char **names, bool gpu, bool dims_only)
{
    bool first = true;
    int k = 0;
    for (int i = 0; i < te->ndims; i++, first = false)
        fprintf(f, "%sint64_t %s", first ? "" : ", ", names[k++]);
    int *ids = calloc((size_t)te->ntensors + 1, sizeof *ids);
    if (!ids)
        ir_panic(__FILE__, __LINE__, "out of memory");
    int np = dims_only ? 0 : ir_te_params(te, ids);
    for (int j = 0; j < np; j++, first = false) {
        const Tensor *t = te->tensors[ids[j]];
        if (gpu)
            fprintf(f, "%suint64_t %s", first ? "" : ", ", names[k++]);
        else
            fprintf(f, "%s%s%s *%s", first ? "" : ", ", t->kind == TK_OUTPUT ? "" : "const ",
                    c_elem_type(t->dtype), names[k++]);
    }
    free(ids);
    if (!dims_only)
        fprintf(f, "%s%s", first ? "" : ", ", gpu ? "uint64_t workspace, void *stream" : "void *workspace");
    else if (first)
        fputs("void", f);
}

char *cg_emit_header(const LoopProgram *lp, const CgHostOpts *o, char *err, size_t errlen)
{
    const TeProgram *te = lp->te;
    const char *prog = o->symbol ? o->symbol : te->name;
    bool gpu = o->ptx != NULL;
    if (cg_symbol_prefix_check(prog, err, errlen) != 0)
        return NULL;
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
    if (o->guard)
        snprintf(guard, sizeof guard, "DCC_%s_H", o->guard);
    else
        snprintf(guard, sizeof guard, "DCC_%s_%s_H", prog, gpu ? "GPU" : "CPU");
    for (char *c = guard; *c; c++)
        *c = *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A')
             : (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c
                                                                    : '_';
    fprintf(f, "/* Generated by dcc for program %s: link its object with libdcrt.a\n"
               " * (-lpthread -lm -ldl). Do not edit.\n *\n * The program:\n", te->name);
    comment_lines(f, te_text);
    fputs(" *\n * Dims (any value from LO up to the largest accepted runs; the range is\n"
          " * what the kernels were tuned for):\n", f);
    for (int i = 0; i < te->ndims; i++) {
        const Var *d = te->dims[i];
        fprintf(f, " *   %s in %lld..%lld, accepted up to %lld\n", d->name, (long long)d->lo,
                (long long)d->hi, (long long)d->max);
    }
    if (gpu)
        fprintf(f, " *\n * %s_launch checks the dims and that no tensor exceeds 2^31 - 2^20 - 1\n"
                   " * elements, loads the embedded PTX through the CUDA driver on first call\n"
                   " * (libdcrt.a dlopens libcuda.so.1), and launches the kernels on stream\n"
                   " * (a CUstream, NULL for the default). Tensors are device pointers\n"
                   " * (CUdeviceptr) to row-major float32 data. workspace is a device buffer\n"
                   " * of at least %s_workspace_size(dims) bytes for the intermediates, 256-byte\n"
                   " * aligned (cuMemAlloc's are), that no other launch uses meanwhile; with 0,\n"
                   " * libdcrt keeps one per calling thread and the call waits for its kernels\n"
                   " * before it returns; otherwise it returns as soon as they are queued.\n"
                   " * A call that repeats one before it (the same dims, tensors and\n"
                   " * workspace) replays its kernels as one CUDA graph (DCRT_CUDA_GRAPHS=0:\n"
                   " * never).\n",
                prog, prog);
    else
        fprintf(f, " *\n * %s_run checks the dims and that no tensor exceeds 2^31 - 2^20 - 1 elements,\n"
                   " * computes the outputs (tensors row-major, of the element types the\n"
                   " * arguments say; a bool is one byte, 0 or 1) with a thread pool\n"
                   " * (one thread per core), running the kernels built for the best of the\n"
                   " * instruction sets below that this CPU has. workspace holds the\n"
                   " * intermediates: at least %s_workspace_size(dims) bytes, 256-byte\n"
                   " * aligned, used by one call at a time; NULL lets libdcrt keep one per\n"
                   " * calling thread. Instruction sets (x86-64 level):",
                prog, prog);
    for (int i = 0; !gpu && i < o->nisas; i++)
        fprintf(f, "%s %s (%d)", i ? "," : "", o->isas[i]->arch, o->isas[i]->level);
    fprintf(f, "%s *\n * Every entry returns DCRT_OK or an error code below; after an error,\n"
               " * dcrt_last_error() says on the calling thread what failed (the dim and its\n"
               " * range, the driver's message, the JIT's log when the driver rejects the PTX).\n"
               " * The _packed forms take the dims and the tensors as arrays, in the order of\n"
               " * the arguments.\n */\n#ifndef %s\n#define %s\n\n#include <stddef.h>\n#include <stdint.h>\n\n"
               "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
            gpu ? "" : "\n", guard, guard);
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
          "#define DCRT_ERR_CPU 10\n"
          "#define DCRT_ERR_INDEX 11\n"
          "const char *dcrt_error_string(int code);\n"
          "/* The calling thread's last failure in detail (\"\" before any). */\n"
          "const char *dcrt_last_error(void);\n\n", f);
    fprintf(f, "int %s_%s(", prog, gpu ? "launch" : "run");
    Arena *a = ir_arena_new();
    int nnames;
    const char **names = param_names(a, te, &nnames);
    signature(f, te, names, gpu, false);
    fprintf(f, ");\nint %s_%s_packed(const int64_t *dims, %s, %s);\n", prog, gpu ? "launch" : "run",
            gpu ? "const uint64_t *tensors" : "void *const *tensors",
            gpu ? "uint64_t workspace, void *stream" : "void *workspace");
    fprintf(f, "size_t %s_workspace_size(", prog);
    signature(f, te, names, gpu, true);
    fputs(");\n", f);
    if (gpu)
        fprintf(f, "/* Frees what the first call loaded (the module, the constants' device\n"
                   " * copies, the calls' CUDA graphs); the next call loads them again. No call\n"
                   " * may run meanwhile, and the calls' kernels must have finished (their\n"
                   " * streams synchronised; a graph captured from them may not run again). */\n"
                   "void %s_release(void);\n", prog);
    fputs("\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n", f);
    ir_arena_destroy(a);
    free(te_text);
    if (fclose(f) != 0) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return buf;
}
