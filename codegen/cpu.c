/* The CPU target's hooks: kernels for x86-64 processors, the host's (what
 * the JIT runs) or a named instruction set (what objects hold, one set of
 * kernels per --arch entry, picked at run time by libdcrt from the CPU's
 * x86-64 level: runtime/dcrt.c).
 *
 * Each kernel becomes two functions. NAME is the C ABI entry point
 * (dims, bufs, block_begin, block_end); it loads every dim and the
 * pointers of the buffers the kernel uses once and calls NAME.body, an
 * internal function that takes them as separate arguments, each buffer
 * `noalias`: LLVM knows distinct tensors never overlap, so loads can be
 * hoisted past stores. Kernels that differ only in their buffers (the
 * same stage of a model's twelve layers) have the same body: mergefunc
 * (codegen/module.c) keeps one, which is optimised and compiled once and
 * called from each entry; a body with one caller is inlined into it. The
 * block loop is a serial loop over [block_begin, block_end) (the runner
 * splits the blocks over a thread pool), thread loops are serial loops,
 * shared buffers are stack arrays in the entry block (one per call, i.e.
 * per chunk of blocks), and there are no barriers: a pass splits the
 * thread loop at each one before codegen. Math on vectors goes to
 * libmvec, glibc's vector math library (below); on scalars to LLVM
 * intrinsics, which lower to the C library's expf, logf, powf on x86, or
 * to erff and tanhf directly: the functions the reference interpreter calls.
 */
#include "dietcode/codegen_llvm.h"

#include <llvm-c/Target.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host_triple[128], host_cpu[128], host_features[8192];
static CgTarget host;

static void add_fn_attr(LLVMContextRef cx, LLVMValueRef fn, const char *name)
{
    LLVMAddAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMCreateEnumAttribute(cx, LLVMGetEnumAttributeKindForName(name, strlen(name)), 0));
}

static void add_str_attr(LLVMContextRef cx, LLVMValueRef fn, const char *k, const char *v)
{
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(cx, k, (unsigned)strlen(k), v,
                                                      (unsigned)strlen(v)));
}

static void target_attrs(CgFn *g, LLVMValueRef fn)
{
    add_fn_attr(g->cx, fn, "nounwind");
    if (g->target->cpu[0])
        add_str_attr(g->cx, fn, "target-cpu", g->target->cpu);
    if (g->target->features[0])
        add_str_attr(g->cx, fn, "target-features", g->target->features);
    /* 16-float vectors in zmm registers, also as arguments (libmvec's
     * _ZGVeN16 functions take theirs in zmm0); absent, it is the default */
    if (g->target->level >= 4)
        add_str_attr(g->cx, fn, "min-legal-vector-width", "512");
}

/* A kernel body's parameters: every dim, the buffers it uses (use), the
 * block range; slot[j] is parameter j's index in dims or bufs. Returns
 * how many, *nb of them buffers. */
static int body_params(LLVMContextRef cx, const LoopProgram *lp, const unsigned char *use,
                       LLVMTypeRef *pt, int *slot, int *nb)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(cx), ptr = LLVMPointerTypeInContext(cx, 0);
    int nd = lp->te->ndims, np = nd;
    for (int i = 0; i < nd; i++)
        pt[i] = i64, slot[i] = i;
    for (int i = 0; i < lp->nbuffers; i++)
        if (use[i])
            pt[np] = ptr, slot[np++] = i;
    *nb = np - nd;
    pt[np++] = i64;
    pt[np++] = i64;
    return np;
}

/* The C ABI entry sym (dims, bufs, block_begin, block_end): loads every
 * dim and the buffers' pointers (slot, body_params') and calls body. */
static void build_entry(LLVMModuleRef mod, const CgTarget *t, LLVMValueRef body, const int *slot,
                        int np, const char *sym)
{
    LLVMContextRef cx = LLVMGetModuleContext(mod);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(cx), ptr = LLVMPointerTypeInContext(cx, 0);
    LLVMTypeRef abi[4] = {ptr, ptr, i64, i64};
    LLVMValueRef fn = LLVMAddFunction(mod, sym, LLVMFunctionType(LLVMVoidTypeInContext(cx), abi, 4, 0));
    CgFn g = {.target = t, .cx = cx};
    target_attrs(&g, fn);
    const char *names[4] = {"dims", "bufs", "block_begin", "block_end"};
    for (unsigned i = 0; i < 4; i++)
        LLVMSetValueName2(LLVMGetParam(fn, i), names[i], strlen(names[i]));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(cx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(cx, fn, "entry"));
    LLVMValueRef *args = calloc((size_t)np, sizeof *args);
    if (!args)
        ir_panic(__FILE__, __LINE__, "out of memory");
    int nd = np - 2; /* dims and buffers */
    for (int j = 0; j < nd; j++) {
        bool isdim = LLVMGetTypeKind(LLVMTypeOf(LLVMGetParam(body, (unsigned)j))) == LLVMIntegerTypeKind;
        LLVMValueRef idx = LLVMConstInt(i64, (unsigned long long)slot[j], 0);
        LLVMValueRef p = LLVMBuildGEP2(b, isdim ? i64 : ptr, LLVMGetParam(fn, isdim ? 0 : 1), &idx, 1, "");
        args[j] = LLVMBuildLoad2(b, isdim ? i64 : ptr, p, "");
        LLVMSetAlignment(args[j], 8);
    }
    args[np - 2] = LLVMGetParam(fn, 2);
    args[np - 1] = LLVMGetParam(fn, 3);
    LLVMBuildCall2(b, LLVMGlobalGetValueType(body), body, args, (unsigned)np, "");
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    free(args);
}

static void cpu_kernel_begin(CgFn *g, const Kernel *k, const char *sym)
{
    const TeProgram *te = g->lp->te;
    int nd = te->ndims, nt = g->lp->nbuffers, nb;
    LLVMTypeRef *pt = calloc((size_t)(nd + nt) + 2, sizeof *pt);
    int *slot = calloc((size_t)(nd + nt) + 2, sizeof *slot);
    if (!pt || !slot)
        ir_panic(__FILE__, __LINE__, "out of memory");
    int np = body_params(g->cx, g->lp, g->use, pt, slot, &nb);
    size_t n = strlen(sym);
    char *bodyname = malloc(n + 6);
    if (!bodyname)
        ir_panic(__FILE__, __LINE__, "out of memory");
    memcpy(bodyname, sym, n);
    memcpy(bodyname + n, ".body", 6);
    LLVMValueRef body = LLVMAddFunction(g->mod, bodyname, LLVMFunctionType(g->voidt, pt, (unsigned)np, 0));
    free(bodyname);
    free(pt);
    LLVMSetLinkage(body, LLVMInternalLinkage);
    target_attrs(g, body);
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (int i = 0; i < nd; i++)
        LLVMSetValueName2(LLVMGetParam(body, (unsigned)i), te->dims[i]->name,
                          strlen(te->dims[i]->name));
    for (int j = nd; j < nd + nb; j++) {
        const char *name = g->lp->buffers[slot[j]]->name;
        LLVMSetValueName2(LLVMGetParam(body, (unsigned)j), name, strlen(name));
        LLVMAddAttributeAtIndex(body, (unsigned)(j + 1), LLVMCreateEnumAttribute(g->cx, noalias, 0));
    }
    LLVMSetValueName2(LLVMGetParam(body, (unsigned)np - 2), "block_begin", 11);
    LLVMSetValueName2(LLVMGetParam(body, (unsigned)np - 1), "block_end", 9);
    build_entry(g->mod, g->target, body, slot, np, sym);

    g->fn = body;
    g->entry = LLVMAppendBasicBlockInContext(g->cx, body, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    for (int i = 0; i < nd; i++)
        g->dimv[i] = LLVMGetParam(body, (unsigned)i);
    for (int j = nd; j < nd + nb; j++)
        g->bufv[slot[j]] = LLVMGetParam(body, (unsigned)j);
    free(slot);
    g->block_lo = LLVMGetParam(body, (unsigned)np - 2);
    g->block_hi = LLVMGetParam(body, (unsigned)np - 1);
    (void)k;
}

void cg_cpu_entry(LLVMModuleRef mod, const CgTarget *t, const LoopProgram *lp, const Kernel *k,
                  const char *sym, LLVMValueRef body)
{
    int n = lp->te->ndims + lp->nbuffers + 2, nb;
    unsigned char *use = calloc((size_t)lp->nbuffers + 1, 1);
    LLVMTypeRef *pt = calloc((size_t)n, sizeof *pt);
    int *slot = calloc((size_t)n, sizeof *slot);
    if (!use || !pt || !slot)
        ir_panic(__FILE__, __LINE__, "out of memory");
    cg_kernel_uses(lp, k, use, NULL);
    int np = body_params(LLVMGetModuleContext(mod), lp, use, pt, slot, &nb);
    IR_ASSERT((unsigned)np == LLVMCountParams(body));
    build_entry(mod, t, body, slot, np, sym);
    free(use);
    free(pt);
    free(slot);
}

static void cpu_kernel_end(CgFn *g) { LLVMBuildRetVoid(g->b); }

static CgRange cpu_loop_range(CgFn *g, ForKind fk, LLVMValueRef extent)
{
    if (fk == FK_BLOCK)
        return (CgRange){.lo = g->block_lo, .hi = g->block_hi};
    return (CgRange){.lo = LLVMConstInt(g->i64, 0, 0), .hi = extent};
}

static LLVMValueRef cpu_shared_alloc(CgFn *g, const Tensor *buf, LLVMTypeRef ty)
{
    return cg_entry_alloca(g, ty, buf->name);
}

/* glibc's libmvec: vector forms of expf, logf, powf, tanhf and erff under
 * the x86-64 vector function ABI, _ZGV<isa>N<lanes><args>_<name> with isa b
 * (SSE, 4 lanes), d (AVX2, 8) or e (AVX-512, 16). One call replaces a libm
 * call per lane. Loaded once into the process for the JIT; an object's
 * user gets it through -lm (glibc's libm.so names libmvec as needed), so
 * objects use it where the machine that compiles them has all five (glibc
 * 2.35 added erff and tanhf) and need glibc 2.35 where they are linked;
 * otherwise lanes call libm one by one. Vectors of up to MVEC_LANES. */
enum { MVEC_LANES = 32 };
static pthread_once_t mvec_once = PTHREAD_ONCE_INIT;
static bool mvec_ok;

static void mvec_init(void)
{
    void *h = dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL);
    mvec_ok = h && dlsym(h, "_ZGVbN4v_erff") && dlsym(h, "_ZGVbN4v_tanhf");
}

static LLVMValueRef mvec_chunk(CgFn *g, const char *name, unsigned w, LLVMValueRef *args, unsigned nargs)
{
    static const char isa[17] = {[4] = 'b', [8] = 'd', [16] = 'e'};
    char sym[64];
    snprintf(sym, sizeof sym, "_ZGV%cN%u%s_%s", isa[w], w, nargs == 2 ? "vv" : "v", name);
    LLVMTypeRef vt = LLVMVectorType(g->f32, w), pt[2] = {vt, vt};
    LLVMTypeRef fty = LLVMFunctionType(vt, pt, nargs, 0);
    return LLVMBuildCall2(g->b, fty, cg_math_fn(g, sym, fty), args, nargs, "");
}

/* v in every lane of a vector shaped like like. */
static LLVMValueRef splat(CgFn *g, LLVMValueRef like, double v)
{
    return cg_splat(g, LLVMConstReal(g->f32, v), LLVMGetVectorSize(LLVMTypeOf(like)));
}

/* f over the lanes of a (and b) in chunks of 16, 8 or 4 lanes, as wide as
 * the target's level allows, the last one padded with lanes of 1 (on every
 * function's fast path: 0 is a special case of logf and powf). */
static LLVMValueRef mvec_call(CgFn *g, const char *name, LLVMValueRef a, LLVMValueRef b)
{
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(a));
    unsigned widest = g->target->level >= 4 ? 16 : g->target->level >= 3 ? 8 : 4;
    LLVMValueRef in[2] = {a, b}, one = splat(g, a, 1.0);
    LLVMValueRef r = LLVMGetPoison(LLVMTypeOf(a));
    LLVMValueRef idx[MVEC_LANES];
    for (unsigned at = 0, w; at < n; at += w) {
        unsigned left = n - at;
        w = widest;
        while (w > 4 && w / 2 >= left)
            w /= 2;
        unsigned used = left < w ? left : w;
        LLVMValueRef args[2], m[16];
        for (unsigned i = 0; i < w; i++)
            m[i] = LLVMConstInt(g->i32, i < used ? at + i : n, 0);
        for (int j = 0; j < (b ? 2 : 1); j++)
            args[j] = LLVMBuildShuffleVector(g->b, in[j], one, LLVMConstVector(m, w), "");
        LLVMValueRef c = mvec_chunk(g, name, w, args, b ? 2 : 1);
        /* the chunk's lanes into r: widen to n lanes, then pick */
        LLVMValueRef wide = c;
        if (w != n) {
            for (unsigned i = 0; i < n; i++)
                idx[i] = i >= at && i < at + used ? LLVMConstInt(g->i32, i - at, 0)
                                                  : LLVMGetPoison(g->i32);
            wide = LLVMBuildShuffleVector(g->b, c, LLVMGetPoison(LLVMTypeOf(c)),
                                          LLVMConstVector(idx, n), "");
        }
        if (at == 0 && used == n) {
            r = wide;
            continue;
        }
        for (unsigned i = 0; i < n; i++)
            idx[i] = LLVMConstInt(g->i32, i >= at && i < at + used ? n + i : i, 0);
        r = LLVMBuildShuffleVector(g->b, r, wide, LLVMConstVector(idx, n), "");
    }
    return r;
}

/* libmvec's expf leaves its fast path for |x| > about 87.3, where results
 * are denormal, zero or infinite: 22 times slower, and softmax under a mask
 * of -inf or -1e9 lives there. When any lane is there, x is shifted by 64
 * into the fast range and the result scaled back by e^-64 or e^64 (one
 * more rounding; zero and infinity where expf gives them), and a vector
 * all below -104 is zero without a call; the common case pays two
 * compares and a branch. NaN compares false: unshifted. */
static LLVMValueRef mvec_exp(CgFn *g, LLVMValueRef x)
{
    LLVMBuilderRef B = g->b;
    LLVMValueRef lo = LLVMBuildFCmp(B, LLVMRealOLT, x, splat(g, x, -87.0), "");
    LLVMValueRef hi = LLVMBuildFCmp(B, LLVMRealOGT, x, splat(g, x, 87.0), "");
    LLVMValueRef out = LLVMBuildOr(B, lo, hi, "");
    LLVMTypeRef mt = LLVMTypeOf(out);
    /* frozen: a lane of x may be padding no one wrote */
    LLVMValueRef any = LLVMBuildFreeze(
        B, cg_intrinsic(g, "llvm.vector.reduce.or", &mt, 1, &out, 1), "");
    LLVMBasicBlockRef near = LLVMAppendBasicBlockInContext(g->cx, g->fn, "exp.near");
    LLVMBasicBlockRef far = LLVMAppendBasicBlockInContext(g->cx, g->fn, "exp.far");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->cx, g->fn, "exp.join");
    LLVMBuildCondBr(B, any, far, near);

    LLVMPositionBuilderAtEnd(B, near);
    LLVMValueRef fast = mvec_call(g, "expf", x, NULL);
    LLVMBasicBlockRef near_end = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, join);

    /* below -104 e^x rounds to zero: a vector all there (a masked
     * softmax's scores past the diagonal) is zero without a call */
    LLVMPositionBuilderAtEnd(B, far);
    LLVMTypeRef t = LLVMTypeOf(x);
    /* frozen lane by lane: a padding lane may be any value, not all */
    LLVMValueRef below = LLVMBuildFreeze(
        B, LLVMBuildFCmp(B, LLVMRealOLT, x, splat(g, x, -104.0), ""), "");
    LLVMValueRef all = cg_intrinsic(g, "llvm.vector.reduce.and", &mt, 1, &below, 1);
    LLVMBasicBlockRef zeroed = LLVMInsertBasicBlockInContext(g->cx, join, "exp.zero");
    LLVMBasicBlockRef scaled = LLVMInsertBasicBlockInContext(g->cx, join, "exp.scaled");
    LLVMBuildCondBr(B, all, zeroed, scaled);
    LLVMPositionBuilderAtEnd(B, zeroed);
    LLVMBuildBr(B, join);

    LLVMPositionBuilderAtEnd(B, scaled);
    LLVMValueRef args[2] = {x, splat(g, x, -120.0)};
    LLVMValueRef down = LLVMBuildFAdd(B, cg_intrinsic(g, "llvm.maxnum", &t, 1, args, 2),
                                      splat(g, x, 64.0), "");
    args[1] = splat(g, x, 120.0);
    LLVMValueRef up = LLVMBuildFSub(B, cg_intrinsic(g, "llvm.minnum", &t, 1, args, 2),
                                    splat(g, x, 64.0), "");
    LLVMValueRef in = LLVMBuildSelect(B, lo, down, LLVMBuildSelect(B, hi, up, x, ""), "");
    LLVMValueRef scale = LLVMBuildSelect(
        B, lo, splat(g, x, 1.6038108905486378e-28), /* e^-64 */
        LLVMBuildSelect(B, hi, splat(g, x, 6.2351490808116168e27), splat(g, x, 1.0), ""), "");
    /* and those lanes scaled by zero, not by e^-64, whose product
     * underflows and takes the FPU a microcode assist a lane (3x the time
     * of the fast path where every lane was) */
    scale = LLVMBuildSelect(B, below, splat(g, x, 0.0), scale, "");
    LLVMValueRef slow = LLVMBuildFMul(B, mvec_call(g, "expf", in, NULL), scale, "");
    LLVMBasicBlockRef far_end = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, join);

    LLVMPositionBuilderAtEnd(B, join);
    LLVMValueRef phi = LLVMBuildPhi(B, t, "");
    LLVMValueRef vals[3] = {fast, LLVMConstNull(t), slow};
    LLVMBasicBlockRef blocks[3] = {near_end, zeroed, far_end};
    LLVMAddIncoming(phi, vals, blocks, 3);
    return phi;
}

static LLVMValueRef cpu_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b)
{
    static const char *const intr[] = {
        [CG_EXP] = "llvm.exp", [CG_LOG] = "llvm.log", [CG_SQRT] = "llvm.sqrt",
        [CG_POW] = "llvm.pow", [CG_FABS] = "llvm.fabs", [CG_FLOOR] = "llvm.floor",
        [CG_FMIN] = "llvm.minimum", [CG_FMAX] = "llvm.maximum",
    };
    static const char *const mvec[] = {
        [CG_EXP] = "expf", [CG_LOG] = "logf", [CG_POW] = "powf",
        [CG_TANH] = "tanhf", [CG_ERF] = "erff", [CG_FMAX] = NULL,
    };
    LLVMTypeRef t = LLVMTypeOf(a);
    if (mvec[f] && LLVMGetTypeKind(t) == LLVMVectorTypeKind &&
        LLVMGetVectorSize(t) <= MVEC_LANES) {
        pthread_once(&mvec_once, mvec_init);
        if (mvec_ok)
            return f == CG_EXP ? mvec_exp(g, a) : mvec_call(g, mvec[f], a, b);
    }
    if (f == CG_TANH)
        return cg_libm_call(g, "tanhf", a);
    if (f == CG_ERF)
        return cg_libm_call(g, "erff", a);
    LLVMValueRef args[2] = {a, b};
    return cg_intrinsic(g, intr[f], &t, 1, args, b ? 2 : 1);
}

static void copy_msg(char *dst, size_t n, char *msg)
{
    snprintf(dst, n, "%s", msg ? msg : "");
    LLVMDisposeMessage(msg);
}

/* The x86-64 level a feature string ("+avx2,-avx512f,...") reaches. */
static int features_level(const char *f)
{
    static const char *const need[][6] = {
        {"+sse3", "+ssse3", "+sse4.1", "+sse4.2", "+popcnt", NULL},
        {"+avx", "+avx2", "+bmi", "+bmi2", "+fma", NULL},
        {"+avx512f", "+avx512bw", "+avx512cd", "+avx512dq", "+avx512vl", NULL},
    };
    int level = 1;
    for (int l = 0; l < 3; l++) {
        for (int i = 0; need[l][i]; i++) {
            size_t n = strlen(need[l][i]);
            bool found = false;
            for (const char *p = f; (p = strstr(p, need[l][i])); p += n)
                if ((p == f || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
                    found = true;
            if (!found)
                return level;
        }
        level = l + 2;
    }
    return level;
}

/* x86-64 CPUs by LLVM's names and the level their instruction sets reach. */
static const struct {
    const char *name;
    int level;
} cpus[] = {
    {"x86-64", 1}, {"core2", 1}, {"penryn", 1},
    {"x86-64-v2", 2}, {"nehalem", 2}, {"corei7", 2}, {"westmere", 2}, {"sandybridge", 2},
    {"corei7-avx", 2}, {"ivybridge", 2}, {"core-avx-i", 2}, {"silvermont", 2}, {"goldmont", 2},
    {"goldmont-plus", 2}, {"tremont", 2}, {"btver2", 2}, {"bdver1", 2}, {"bdver2", 2},
    {"bdver3", 2},
    {"x86-64-v3", 3}, {"haswell", 3}, {"core-avx2", 3}, {"broadwell", 3}, {"skylake", 3},
    {"alderlake", 3}, {"raptorlake", 3}, {"meteorlake", 3}, {"arrowlake", 3}, {"lunarlake", 3},
    {"gracemont", 3}, {"sierraforest", 3}, {"grandridge", 3}, {"znver1", 3}, {"znver2", 3},
    {"znver3", 3},
    {"x86-64-v4", 4}, {"skylake-avx512", 4}, {"skx", 4}, {"cascadelake", 4}, {"cooperlake", 4},
    {"cannonlake", 4}, {"icelake-client", 4}, {"icelake-server", 4}, {"tigerlake", 4},
    {"rocketlake", 4}, {"sapphirerapids", 4}, {"emeraldrapids", 4}, {"graniterapids", 4},
    {"znver4", 4}, {"znver5", 4},
};

static pthread_mutex_t arch_mu = PTHREAD_MUTEX_INITIALIZER;
static CgTarget named[sizeof cpus / sizeof *cpus];

static void host_init(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    copy_msg(host_triple, sizeof host_triple, LLVMGetDefaultTargetTriple());
    copy_msg(host_cpu, sizeof host_cpu, LLVMGetHostCPUName());
    copy_msg(host_features, sizeof host_features, LLVMGetHostCPUFeatures());
    host = (CgTarget){
        .name = "cpu",
        .triple = host_triple,
        .cpu = host_cpu,
        .features = host_features,
        .arch = "native",
        .level = features_level(host_features),
        .kernel_begin = cpu_kernel_begin,
        .kernel_end = cpu_kernel_end,
        .loop_range = cpu_loop_range,
        .barrier = NULL,
        .shared_alloc = cpu_shared_alloc,
        .math = cpu_math,
        .no_llvm_unroll = true,
    };
}

const CgTarget *cg_target_cpu(void)
{
    pthread_once(&host_once, host_init);
    return &host;
}

int cg_target_level(const CgTarget *t) { return t ? t->level : 0; }

const CgTarget *cg_target_cpu_arch(const char *arch, char *err, size_t errlen)
{
    if (!IR_ARG_OK(arch, err, errlen))
        return NULL;
    const CgTarget *h = cg_target_cpu();
    if (strcmp(arch, "native") == 0)
        return h;
    for (size_t i = 0; i < sizeof cpus / sizeof *cpus; i++) {
        if (strcmp(arch, cpus[i].name) != 0)
            continue;
        pthread_mutex_lock(&arch_mu);
        if (!named[i].name) {
            named[i] = *h;
            named[i].triple = "x86_64-pc-linux-gnu";
            named[i].cpu = cpus[i].name;
            named[i].features = "";
            named[i].arch = cpus[i].name;
            named[i].level = cpus[i].level;
        }
        pthread_mutex_unlock(&arch_mu);
        return &named[i];
    }
    snprintf(err, errlen,
             "unknown --arch '%s' for the cpu target (expected native, x86-64, x86-64-v2, "
             "x86-64-v3, x86-64-v4 or an x86-64 CPU name such as skylake-avx512 or znver4)",
             arch);
    return NULL;
}

int cg_cpu_arch_list(const char *list, const CgTarget **out, int max, char *err, size_t errlen)
{
    if (!IR_ARG_OK(list, err, errlen) || !IR_ARG_OK(out, err, errlen))
        return -1;
    int n = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (len == 0 || len >= sizeof name) {
            snprintf(err, errlen, "--arch expects a comma-separated list of names, got '%s'", list);
            return -1;
        }
        memcpy(name, p, len);
        name[len] = 0;
        const CgTarget *t = cg_target_cpu_arch(name, err, errlen);
        if (!t)
            return -1;
        bool dup = false;
        for (int i = 0; i < n; i++)
            dup |= out[i] == t;
        if (!dup) {
            if (n == max) {
                snprintf(err, errlen, "--arch names more than %d instruction sets", max);
                return -1;
            }
            /* highest level first; the given order among equals */
            int at = n;
            while (at > 0 && out[at - 1]->level < t->level)
                at--;
            memmove(&out[at + 1], &out[at], sizeof *out * (size_t)(n - at));
            out[at] = t;
            n++;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    return n;
}
