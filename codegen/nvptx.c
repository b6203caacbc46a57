/* The NVPTX target's hooks: kernels as PTX for NVIDIA GPUs.
 *
 * A kernel is one PTX entry (the PTX kernel calling convention) with the
 * ABI documented in dietcode/codegen.h: every dim as an i64, then each
 * materialised buffer the kernel reads or writes as a `ptr addrspace(1)`,
 * in id order (cg_kernel_params), at most PARAM_BYTES in all. A buffer
 * the kernel never stores to is `noalias readonly`, which NVPTX turns into
 * non-coherent loads (ld.global.nc); the others are `noalias`. All are
 * declared 16-byte aligned (the host allocates them with cuMemAlloc, which
 * aligns to 256), so loads whose offset is a proven multiple of four floats
 * become vector loads.
 *
 * The shared lowering (codegen/llvm.c) builds masked loads and stores on
 * generic pointers, so buffers are handed to it as generic pointers: the
 * global parameters and the shared arrays are address-space-cast once, and
 * LLVM's address-space inference gives the accesses back their real space
 * (ld.global, ld.shared) during optimisation and code generation.
 *
 * The block loop is one iteration at ctaid.x, guarded by ctaid.x < extent;
 * the thread loop one iteration at tid.x, with no guard because the launch
 * uses exactly k->nthreads threads (its extent) per block, which
 * `!nvvm.annotations` maxntidx also states (PTX .maxntid). Barriers are
 * bar.sync 0 (llvm.nvvm.barrier0), after cp.async.wait_all where the
 * barrier waits for async stores, which are cp.async from sm_80 on (a
 * plain load and store before); shared buffers are internal
 * addrspace(3) globals, one per buffer per kernel, or offsets into the
 * extern dynamic shared memory when a kernel's exceed 48 KB; local
 * buffers stay allocas that SROA turns into registers once the register
 * tiles are unrolled. Index arithmetic is the shared lowering's i64.
 *
 * Math goes to libdevice (__nv_expf, ...) when the CUDA toolkit's
 * libdevice.10.bc exists: it is linked into the module and internalised,
 * and NVVMReflect (run by the target machine's pipeline) folds its
 * architecture tests. Without it, exp and log use the approximate ex2/lg2
 * instructions and tanh, erf and pow are built from them (see approx_math).
 */
#include "dietcode/codegen_llvm.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIBDEVICE_PATH "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"

/* the archs, and whether each has cp.async (sm_80 on; the schedule's side
 * of the same fact: pass_target_gpu_arch) */
static const struct {
    const char *name;
    bool async;
} archs[] = {{"sm_75", false}, {"sm_80", true}, {"sm_86", true}, {"sm_87", true},
             {"sm_89", true},  {"sm_90", true}, {"sm_90a", true}};
enum { NARCHS = sizeof archs / sizeof *archs };

/* A kernel's parameters may take this many bytes: the PTX ISA's limit for
 * a kernel entry on every arch and driver (CUDA 12.1 raised it to 32764
 * bytes on Volta and later, for drivers of 12.1 and later only). */
enum { PARAM_BYTES = 4096 };

static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;
static CgTarget targets[NARCHS][2]; /* [arch][uses libdevice] */

static void add_attr(LLVMContextRef cx, LLVMValueRef fn, unsigned idx, const char *name,
                     uint64_t val)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(cx, kind, val));
}

/* The launch runs k->nthreads threads per block, so every thread loop must
 * have that extent (or one the guard in loop_range covers). */
static void check_thread_loops(const Stmt *s, int nthreads)
{
    switch (s->kind) {
    case ST_FOR: {
        int64_t n;
        if (s->loop.fk == FK_THREAD && ir_is_const(s->loop.var->extent, &n) && n != nthreads)
            ir_panic(__FILE__, __LINE__, "thread loop of extent %lld in a kernel of %d threads",
                     (long long)n, nthreads);
        check_thread_loops(s->loop.body, nthreads);
        return;
    }
    case ST_LET: check_thread_loops(s->let.body, nthreads); return;
    case ST_IF:
        check_thread_loops(s->ifs.then, nthreads);
        if (s->ifs.els)
            check_thread_loops(s->ifs.els, nthreads);
        return;
    case ST_ALLOC: check_thread_loops(s->alloc.body, nthreads); return;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            check_thread_loops(s->seq.s[i], nthreads);
        return;
    case ST_STORE: case ST_BARRIER: return;
    }
}

static void annotate(CgFn *g, LLVMValueRef fn, const char *key, int val)
{
    LLVMMetadataRef ops[3] = {
        LLVMValueAsMetadata(fn),
        LLVMMDStringInContext2(g->cx, key, strlen(key)),
        LLVMValueAsMetadata(LLVMConstInt(g->i32, (unsigned long long)val, 0)),
    };
    LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(g->cx, LLVMMDNodeInContext2(g->cx, ops, 3)));
}

static void nvptx_kernel_begin(CgFn *g, const Kernel *k, const char *sym)
{
    const TeProgram *te = g->lp->te;
    int nd = te->ndims, nt = g->lp->nbuffers;
    LLVMTypeRef gptr = LLVMPointerTypeInContext(g->cx, 1);
    LLVMTypeRef *pt = calloc((size_t)(nd + nt) + 1, sizeof *pt);
    int32_t *ids = calloc((size_t)nt + 1, sizeof *ids);
    if (!pt || !ids)
        ir_panic(__FILE__, __LINE__, "out of memory");
    int nb = cg_kernel_params(g->lp, k, ids), np = nd + nb;
    for (int i = 0; i < np; i++)
        pt[i] = i < nd ? g->i64 : gptr;
    LLVMValueRef fn = LLVMAddFunction(g->mod, sym, LLVMFunctionType(g->voidt, pt, (unsigned)np, 0));
    free(pt);
    LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
    add_attr(g->cx, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
    for (int i = 0; i < nd; i++)
        LLVMSetValueName2(LLVMGetParam(fn, (unsigned)i), te->dims[i]->name,
                          strlen(te->dims[i]->name));
    g->fn = fn;
    g->entry = LLVMAppendBasicBlockInContext(g->cx, fn, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    for (int i = 0; i < nd; i++)
        g->dimv[i] = LLVMGetParam(fn, (unsigned)i);
    for (int j = 0; j < nb; j++) {
        int i = ids[j];
        const Tensor *t = g->lp->buffers[i];
        unsigned idx = (unsigned)(nd + j) + 1;
        LLVMValueRef p = LLVMGetParam(fn, (unsigned)(nd + j));
        LLVMSetValueName2(p, t->name, strlen(t->name));
        add_attr(g->cx, fn, idx, "noalias", 0);
        add_attr(g->cx, fn, idx, "nocapture", 0);
        add_attr(g->cx, fn, idx, "align", 16);
        if (!(g->use[i] & IR_WRITES))
            add_attr(g->cx, fn, idx, "readonly", 0);
        g->bufv[i] = LLVMBuildAddrSpaceCast(g->b, p, g->ptr, t->name);
    }
    free(ids);
    check_thread_loops(k->body, k->nthreads);
    annotate(g, fn, "kernel", 1);
    annotate(g, fn, "maxntidx", k->nthreads > 0 ? k->nthreads : 1);
}

static void nvptx_kernel_end(CgFn *g) { LLVMBuildRetVoid(g->b); }

static LLVMValueRef sreg(CgFn *g, const char *name)
{
    LLVMValueRef v = cg_intrinsic(g, name, NULL, 0, NULL, 0);
    return LLVMBuildZExt(g->b, v, g->i64, "");
}

static CgRange nvptx_loop_range(CgFn *g, ForKind fk, LLVMValueRef extent)
{
    if (fk == FK_BLOCK)
        return (CgRange){.index = sreg(g, "llvm.nvvm.read.ptx.sreg.ctaid.x"), .guard = true};
    /* the thread loop's extent is the block size the kernel is launched
     * with; only a non-constant one could differ */
    return (CgRange){.index = sreg(g, "llvm.nvvm.read.ptx.sreg.tid.x"),
                     .guard = !LLVMIsAConstantInt(extent)};
}

static void nvptx_barrier(CgFn *g) { cg_intrinsic(g, "llvm.nvvm.barrier0", NULL, 0, NULL, 0); }

/* cp.async (sm_80 and later) with a source size: .cg (L2 only, as the
 * block's other threads read the copy from shared memory) for 16 bytes,
 * .ca for 4 and 8 */
static void nvptx_async_copy(CgFn *g, LLVMValueRef dst, LLVMValueRef src, int bytes,
                             LLVMValueRef src_bytes)
{
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.cp.async.%s.shared.global.%d.s", bytes == 16 ? "cg" : "ca",
             bytes);
    LLVMValueRef args[3] = {
        LLVMBuildAddrSpaceCast(g->b, dst, LLVMPointerTypeInContext(g->cx, 3), ""),
        LLVMBuildAddrSpaceCast(g->b, src, LLVMPointerTypeInContext(g->cx, 1), ""),
        src_bytes,
    };
    cg_intrinsic(g, name, NULL, 0, args, 3);
}

/* cp.async.wait_all: commits the thread's copies and waits for them */
static void nvptx_async_wait(CgFn *g)
{
    cg_intrinsic(g, "llvm.nvvm.cp.async.wait.all", NULL, 0, NULL, 0);
}

/* shfl.sync.bfly.b32 over the full warp (c = 0x1f: lanes wrap within it) */
static LLVMValueRef nvptx_shuffle_xor(CgFn *g, LLVMValueRef v, int mask)
{
    LLVMValueRef args[4] = {LLVMConstInt(g->i32, 0xffffffffu, 0), v,
                            LLVMConstInt(g->i32, (unsigned)mask, 0), LLVMConstInt(g->i32, 0x1f, 0)};
    return cg_intrinsic(g, "llvm.nvvm.shfl.sync.bfly.f32", NULL, 0, args, 4);
}

/* A kernel whose shared buffers exceed the 48 KB it may declare statically
 * takes them from dynamic shared memory (the launch gives it
 * cg_dynamic_shared_bytes): offsets (codegen/shared.c) into one extern
 * array of the module. */
static LLVMValueRef dynamic_shared(CgFn *g, const Tensor *buf)
{
    const Kernel *k = NULL;
    int64_t at = cg_shared_offset(g->lp, buf, &k);
    if (at < 0 || cg_dynamic_shared_bytes(g->lp, k) == 0)
        return NULL;
    static const char name[] = "dc_dynamic_shared";
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->cx);
    LLVMValueRef gv = LLVMGetNamedGlobal(g->mod, name);
    if (!gv) {
        gv = LLVMAddGlobalInAddressSpace(g->mod, LLVMArrayType2(i8, 0), name, 3);
        LLVMSetLinkage(gv, LLVMExternalLinkage);
        LLVMSetAlignment(gv, 16);
    }
    LLVMValueRef off = LLVMConstInt(g->i64, (unsigned long long)at, 0);
    return LLVMConstAddrSpaceCast(LLVMConstInBoundsGEP2(i8, gv, &off, 1), g->ptr);
}

static LLVMValueRef nvptx_shared_alloc(CgFn *g, const Tensor *buf, LLVMTypeRef ty)
{
    LLVMValueRef dyn = dynamic_shared(g, buf);
    if (dyn)
        return dyn;
    size_t fl = 0;
    const char *fname = LLVMGetValueName2(g->fn, &fl);
    size_t bl = strlen(buf->name);
    char *name = malloc(fl + bl + 2);
    if (!name)
        ir_panic(__FILE__, __LINE__, "out of memory");
    memcpy(name, fname, fl);
    name[fl] = '_';
    memcpy(name + fl + 1, buf->name, bl + 1);
    LLVMValueRef gv = LLVMAddGlobalInAddressSpace(g->mod, ty, name, 3);
    free(name);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    LLVMSetInitializer(gv, LLVMGetUndef(ty));
    LLVMSetAlignment(gv, 16);
    return LLVMConstAddrSpaceCast(gv, g->ptr);
}

/* ---- math ---- */

static LLVMValueRef fconst(CgFn *g, double v) { return LLVMConstReal(g->f32, v); }

static LLVMValueRef intr1(CgFn *g, const char *name, LLVMValueRef x)
{
    LLVMTypeRef t = g->f32;
    return cg_intrinsic(g, name, &t, 1, &x, 1);
}

static LLVMValueRef intr2(CgFn *g, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef t = g->f32;
    LLVMValueRef args[2] = {x, y};
    return cg_intrinsic(g, name, &t, 1, args, 2);
}

static LLVMValueRef f_add(CgFn *g, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef v = LLVMBuildFAdd(g->b, a, b, "");
    LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
    return v;
}

static LLVMValueRef f_mul(CgFn *g, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef v = LLVMBuildFMul(g->b, a, b, "");
    LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
    return v;
}

/* c[0] + x * (c[1] + x * (... c[n-1])) */
static LLVMValueRef horner(CgFn *g, LLVMValueRef x, const double *c, int n)
{
    LLVMValueRef r = fconst(g, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        r = f_add(g, f_mul(g, r, x), fconst(g, c[i]));
    return r;
}

/* On other targets (tests run the expansions on the host) the exact
 * llvm.exp2 / llvm.log2 stand in for the approximate instructions. */
static bool on_nvptx(CgFn *g) { return strcmp(g->target->name, "nvptx") == 0; }

static LLVMValueRef ex2(CgFn *g, LLVMValueRef x)
{
    if (!on_nvptx(g))
        return intr1(g, "llvm.exp2", x);
    return cg_intrinsic(g, "llvm.nvvm.ex2.approx.f", NULL, 0, &x, 1);
}

static LLVMValueRef lg2(CgFn *g, LLVMValueRef x)
{
    if (!on_nvptx(g))
        return intr1(g, "llvm.log2", x);
    return cg_intrinsic(g, "llvm.nvvm.lg2.approx.f", NULL, 0, &x, 1);
}

static LLVMValueRef select_f(CgFn *g, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(g->b, c, a, b, "");
}

static LLVMValueRef fcmp(CgFn *g, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(g->b, p, a, b, "");
}

/* Math without libdevice, on scalars. exp and log are one ex2/lg2
 * instruction (relative error about 2^-22, plus the rounding of the scaled
 * argument); tanh is an odd Taylor polynomial below 0.125 and
 * 1 - 2 / (e^2|x| + 1) above; erf a Taylor polynomial below 0.5 and
 * Abramowitz & Stegun 7.1.26 (absolute error 1.5e-7) above; pow is
 * exp2(b log2 |a|) with the sign of an odd integer power, NaN for a
 * negative base and a non-integer power, and pow(a, 0) = 1. */
static LLVMValueRef approx_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b)
{
    switch (f) {
    case CG_SQRT: return intr1(g, "llvm.sqrt", a);
    case CG_FABS: return intr1(g, "llvm.fabs", a);
    case CG_FLOOR: return intr1(g, "llvm.floor", a);
    case CG_FMIN: return intr2(g, "llvm.minimum", a, b);
    case CG_FMAX: return intr2(g, "llvm.maximum", a, b);
    default: break;
    }
    LLVMBuilderRef B = g->b;
    switch (f) {
    case CG_EXP: return ex2(g, f_mul(g, a, fconst(g, 1.4426950408889634)));
    case CG_LOG: return f_mul(g, lg2(g, a), fconst(g, 0.6931471805599453));
    case CG_POW: {
        LLVMValueRef ax = intr1(g, "llvm.fabs", a);
        LLVMValueRef r = ex2(g, f_mul(g, b, lg2(g, ax)));
        LLVMValueRef isint = fcmp(g, LLVMRealOEQ, intr1(g, "llvm.floor", b), b);
        LLVMValueRef half = f_mul(g, b, fconst(g, 0.5));
        LLVMValueRef odd = LLVMBuildAnd(B, isint, fcmp(g, LLVMRealONE, intr1(g, "llvm.floor", half), half), "");
        LLVMValueRef neg = select_f(g, odd, LLVMBuildFNeg(B, r, ""), r);
        neg = select_f(g, isint, neg, fconst(g, NAN));
        r = select_f(g, fcmp(g, LLVMRealOLT, a, fconst(g, 0.0)), neg, r);
        return select_f(g, fcmp(g, LLVMRealOEQ, b, fconst(g, 0.0)), fconst(g, 1.0), r);
    }
    case CG_TANH: {
        static const double c[] = {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315};
        LLVMValueRef ax = intr1(g, "llvm.fabs", a);
        LLVMValueRef small = f_mul(g, a, horner(g, f_mul(g, a, a), c, 4));
        LLVMValueRef e = ex2(g, f_mul(g, ax, fconst(g, 2.0 * 1.4426950408889634)));
        LLVMValueRef big = LLVMBuildFSub(
            B, fconst(g, 1.0), LLVMBuildFDiv(B, fconst(g, 2.0), f_add(g, e, fconst(g, 1.0)), ""), "");
        big = intr2(g, "llvm.copysign", big, a);
        return select_f(g, fcmp(g, LLVMRealOLT, ax, fconst(g, 0.125)), small, big);
    }
    case CG_ERF: {
        static const double c[] = {1.1283791670955126, -0.37612638903183754, 0.11283791670955126,
                                   -0.026866170645131252, 0.005223977625442188,
                                   -0.0008548327023450853};
        static const double as[] = {0.0, 0.254829592, -0.284496736, 1.421413741, -1.453152027,
                                    1.061405429};
        LLVMValueRef ax = intr1(g, "llvm.fabs", a);
        LLVMValueRef small = f_mul(g, a, horner(g, f_mul(g, a, a), c, 6));
        LLVMValueRef t = LLVMBuildFDiv(
            B, fconst(g, 1.0), f_add(g, fconst(g, 1.0), f_mul(g, ax, fconst(g, 0.3275911))), "");
        LLVMValueRef poly = horner(g, t, as, 6);
        LLVMValueRef e = ex2(g, f_mul(g, f_mul(g, ax, ax), fconst(g, -1.4426950408889634)));
        LLVMValueRef big = LLVMBuildFSub(B, fconst(g, 1.0), f_mul(g, poly, e), "");
        big = intr2(g, "llvm.copysign", big, a);
        return select_f(g, fcmp(g, LLVMRealOLT, ax, fconst(g, 0.5)), small, big);
    }
    default: IR_UNREACHABLE();
    }
}

static LLVMValueRef libdevice_call(CgFn *g, const char *name, LLVMValueRef a, LLVMValueRef b)
{
    LLVMTypeRef args[2] = {g->f32, g->f32};
    LLVMTypeRef fty = LLVMFunctionType(g->f32, args, b ? 2 : 1, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(g->mod, name, fty);
        add_attr(g->cx, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
    }
    LLVMValueRef av[2] = {a, b};
    return LLVMBuildCall2(g->b, fty, fn, av, b ? 2 : 1, "");
}

static LLVMValueRef scalar_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b, bool libdev)
{
    if (!libdev || f == CG_SQRT || f == CG_FABS || f == CG_FLOOR || f == CG_FMIN || f == CG_FMAX)
        return approx_math(g, f, a, b);
    switch (f) {
    case CG_EXP: return libdevice_call(g, "__nv_expf", a, NULL);
    case CG_LOG: return libdevice_call(g, "__nv_logf", a, NULL);
    case CG_POW: return libdevice_call(g, "__nv_powf", a, b);
    case CG_TANH: return libdevice_call(g, "__nv_tanhf", a, NULL);
    case CG_ERF: return libdevice_call(g, "__nv_erff", a, NULL);
    default: IR_UNREACHABLE();
    }
}

/* Vectors (from vectorised loops) are computed lane by lane. */
static LLVMValueRef lanewise(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b, bool libdev)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind)
        return scalar_math(g, f, a, b, libdev);
    unsigned n = LLVMGetVectorSize(t);
    LLVMValueRef r = LLVMGetPoison(t);
    for (unsigned i = 0; i < n; i++) {
        LLVMValueRef lane = LLVMConstInt(g->i32, i, 0);
        LLVMValueRef ai = LLVMBuildExtractElement(g->b, a, lane, "");
        LLVMValueRef bi = b ? LLVMBuildExtractElement(g->b, b, lane, "") : NULL;
        r = LLVMBuildInsertElement(g->b, r, scalar_math(g, f, ai, bi, libdev), lane, "");
    }
    return r;
}

static LLVMValueRef math_libdevice(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b)
{
    return lanewise(g, f, a, b, true);
}

LLVMValueRef cg_nvptx_approx_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b)
{
    return lanewise(g, f, a, b, false);
}

/* ---- targets ---- */

static bool have_libdevice;

static void nvptx_init(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    have_libdevice = access(LIBDEVICE_PATH, R_OK) == 0;
    for (int i = 0; i < NARCHS; i++)
        for (int l = 0; l < 2; l++)
            targets[i][l] = (CgTarget){
                .name = "nvptx",
                .triple = "nvptx64-nvidia-cuda",
                .cpu = archs[i].name,
                .features = "+ptx80",
                .kernel_begin = nvptx_kernel_begin,
                .kernel_end = nvptx_kernel_end,
                .loop_range = nvptx_loop_range,
                .barrier = nvptx_barrier,
                .shared_alloc = nvptx_shared_alloc,
                .shuffle_xor = nvptx_shuffle_xor,
                .async_copy = archs[i].async ? nvptx_async_copy : NULL,
                .async_wait = archs[i].async ? nvptx_async_wait : NULL,
                .index32 = true,
                .math = l ? math_libdevice : cg_nvptx_approx_math,
            };
}

bool cg_nvptx_arch_valid(const char *arch)
{
    if (!arch)
        return false;
    for (int i = 0; i < NARCHS; i++)
        if (strcmp(arch, archs[i].name) == 0)
            return true;
    return false;
}

bool cg_nvptx_have_libdevice(void)
{
    pthread_once(&nvptx_once, nvptx_init);
    return have_libdevice;
}

const CgTarget *cg_target_nvptx(const char *arch, bool libdevice)
{
    pthread_once(&nvptx_once, nvptx_init);
    if (!arch)
        arch = "sm_80";
    for (int i = 0; i < NARCHS; i++)
        if (strcmp(arch, archs[i].name) == 0)
            return &targets[i][libdevice && have_libdevice];
    return NULL;
}

/* ---- modules ---- */

static bool uses_libdevice(LLVMModuleRef mod)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (LLVMIsDeclaration(f) && n > 5 && strncmp(name, "__nv_", 5) == 0)
            return true;
    }
    return false;
}

/* Links libdevice into m and makes everything but the kernels internal,
 * so the optimiser drops what the kernels do not call. */
static int link_libdevice(CgModule *m, char *err, size_t errlen)
{
    LLVMMemoryBufferRef buf = NULL;
    char *msg = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(LIBDEVICE_PATH, &buf, &msg)) {
        snprintf(err, errlen, "cannot read %s: %s", LIBDEVICE_PATH, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return -1;
    }
    LLVMModuleRef lib = NULL;
    bool bad = LLVMParseBitcodeInContext2(m->cx, buf, &lib);
    LLVMDisposeMemoryBuffer(buf);
    if (bad || !lib) {
        snprintf(err, errlen, "cannot parse %s", LIBDEVICE_PATH);
        return -1;
    }
    LLVMSetTarget(lib, LLVMGetTarget(m->mod));
    LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(m->mod));
    if (LLVMLinkModules2(m->mod, lib)) {
        snprintf(err, errlen, "cannot link %s", LIBDEVICE_PATH);
        return -1;
    }
    for (LLVMValueRef f = LLVMGetFirstFunction(m->mod); f; f = LLVMGetNextFunction(f))
        if (!LLVMIsDeclaration(f) && LLVMGetFunctionCallConv(f) != LLVMPTXKernelCallConv)
            LLVMSetLinkage(f, LLVMInternalLinkage);
    for (LLVMValueRef v = LLVMGetFirstGlobal(m->mod); v; v = LLVMGetNextGlobal(v))
        if (!LLVMIsDeclaration(v))
            LLVMSetLinkage(v, LLVMInternalLinkage);
    return 0;
}

int cg_nvptx_check_params(const LoopProgram *lp, char *err, size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen))
        return -1;
    int32_t *ids = calloc((size_t)lp->nbuffers + 1, sizeof *ids);
    if (!ids)
        ir_panic(__FILE__, __LINE__, "out of memory");
    int rc = 0;
    for (int i = 0; i < lp->nkernels && rc == 0; i++) {
        const Kernel *k = lp->kernels[i];
        int n = lp->te->ndims + cg_kernel_params(lp, k, ids);
        if (n * 8 > PARAM_BYTES) {
            snprintf(err, errlen,
                     "GPU kernel %s takes %d parameters (%d dims and %d buffers, %d bytes): more "
                     "than the %d bytes of a kernel's parameter space; split the computation of "
                     "%s so that each kernel reads fewer tensors",
                     k->name, n, lp->te->ndims, n - lp->te->ndims, n * 8, PARAM_BYTES,
                     lp->stages[k->stage].out->name);
            rc = -1;
        }
    }
    free(ids);
    return rc;
}

CgModule *cg_nvptx_module(const LoopProgram *lp, const char *arch, bool libdevice, bool optimize,
                          char *err, size_t errlen)
{
    const CgTarget *t = cg_target_nvptx(arch, libdevice);
    if (!t) {
        snprintf(err, errlen, "unknown GPU architecture '%s'", arch ? arch : "");
        return NULL;
    }
    if (cg_nvptx_check_params(lp, err, errlen) < 0)
        return NULL;
    CgModule *m = cg_kernels_module(lp, t, NULL, false, err, errlen);
    if (!m)
        return NULL;
    /* address spaces first (the lowering hands out generic pointers), so
     * that the alignment of global and shared accesses is known when O3
     * runs and aligned vector accesses stay vectors; then default<O3> */
    if ((uses_libdevice(m->mod) && link_libdevice(m, err, errlen) < 0) ||
        (optimize && (cg_module_run_passes(m, "function(infer-address-spaces)", err, errlen) < 0 ||
                      cg_module_optimize(m, err, errlen) < 0))) {
        cg_module_destroy(m);
        return NULL;
    }
    return m;
}

char *cg_emit_ptx(const LoopProgram *lp, const char *arch, bool libdevice, char *err,
                  size_t errlen)
{
    CgModule *m = cg_nvptx_module(lp, arch, libdevice, true, err, errlen);
    size_t len;
    char *ptx = m ? cg_module_emit(m, false, &len, err, errlen) : NULL;
    cg_module_destroy(m);
    return ptx;
}
