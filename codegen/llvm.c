/* Loop IR -> LLVM IR: the one lowering every target shares.
 *
 * A kernel is lowered by walking its statement tree with an environment
 * (an LLVM value per loop or let variable) and a builder. What a target
 * decides (the signature, where dims and buffers come from, block and thread
 * indices, barriers, shared memory, math functions) goes through the hooks
 * of CgTarget; everything else is here, once.
 *
 * Types: booleans are i1, integers i64 (the interpreter's semantics: wrapping
 * + - *, floor division and modulo, x / 0 = 0), or i32 in a kernel of a
 * target with index32 when codegen/index.c proves every integer of the
 * kernel fits, floats f32. No float operation carries a fast-math flag:
 * each rounds on its own, and an fma node (the language's contraction,
 * made by ir_contract and ir_accumulate) is llvm.fma, rounded once on
 * every target, so no result depends on what LLVM chooses to fuse.
 *
 * Vectorised loops are lowered Halide-style rather than as loops: the loop
 * variable becomes the vector <0, 1, ..., V-1> and every expression that
 * depends on it (directly or through a let bound inside the loop) is computed
 * as a <V x T> vector; everything else stays scalar and is broadcast where
 * it meets a vector. A load or store looks at the flat offset of its access
 * as an expression: with the lane-varying lets inlined, stride =
 * simplify(flat[v := v + 1] - flat). Stride 1 is one unaligned vector access
 * at the lane-0 address, stride 0 a scalar access (broadcast when mixed),
 * anything else a per-lane gather or scatter. An If whose condition varies
 * across lanes does not branch: its condition becomes a lane mask that
 * masks every load and store beneath it. A buffer allocated inside the loop
 * gets a copy per lane (an extra innermost dimension indexed by the lane).
 *
 * Loads never touch memory they are not allowed to: a padded load (value 0
 * outside its tensor) and any load under a condition (a masked If, a select
 * arm, the right side of && or ||) clamps its offset to 0 or masks its
 * lanes instead of branching, so expressions stay straight-line code.
 */
#include "dietcode/codegen_llvm.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_VEC = 64 };

typedef struct MemoEnt {
    const Expr *e;
    LLVMValueRef guard, v;
} MemoEnt;

/* A shared or local buffer in scope. One allocated inside a vectorised
 * loop holds a copy per lane: an extra innermost dimension indexed by the
 * lane, so each lane's element is contiguous with its neighbours'. */
typedef struct LocalBuf {
    const Tensor *t;
    LLVMValueRef p;
    bool per_lane;
} LocalBuf;

/* A let bound inside the vectorised loop whose value varies across lanes:
 * its value with earlier such lets substituted, over the lane variable. */
typedef struct VecLet {
    Var *v;
    Expr *inl;
} VecLet;

typedef struct Lower {
    CgFn *g;
    LLVMValueRef *env; /* per var id */
    int nvars;
    LocalBuf *bufs;
    int nbufs, capbufs;
    Var *lane; /* vectorised loop variable, NULL outside one */
    int width;
    VecLet *vlets;
    int nvlets, capvlets;
    MemoEnt *memo; /* per statement: expressions are straight-line code */
    size_t memocap, memocount;
    LLVMTypeRef ity; /* the kernel's integers: i64, or i32 (cg_index32) */
    /* checked gathers: the kernel's EX_CHECK indices and their accesses
     * (ir_check_sites), and its stage's tensor, which the error record's
     * code names (LoopProgram.index_error) */
    IrCheckSite *sites;
    int nsites;
    int64_t out_id;
} Lower;

static void st(Lower *L, Stmt *s, LLVMValueRef guard);
static LLVMValueRef ex(Lower *L, Expr *e, LLVMValueRef guard);

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        ir_panic(__FILE__, __LINE__, "out of memory");
    return q;
}

/* ---- values, vectors, masks ---- */

static bool is_vec(LLVMValueRef v) { return v && LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind; }

static LLVMTypeRef elem_type(LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
}

/* scalar, or a vector of scalar as wide as shape */
static LLVMTypeRef like(Lower *L, LLVMTypeRef scalar, LLVMValueRef shape)
{
    return is_vec(shape) ? LLVMVectorType(scalar, LLVMGetVectorSize(LLVMTypeOf(shape))) : scalar;
}

LLVMValueRef cg_splat(CgFn *g, LLVMValueRef v, unsigned n)
{
    if (LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind)
        return v;
    IR_ASSERT(n <= MAX_VEC);
    if (LLVMIsConstant(v)) {
        LLVMValueRef c[MAX_VEC];
        for (unsigned i = 0; i < n; i++)
            c[i] = v;
        return LLVMConstVector(c, n);
    }
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(v), n);
    LLVMValueRef x = LLVMBuildInsertElement(g->b, LLVMGetPoison(vt), v,
                                            LLVMConstInt(g->i32, 0, 0), "");
    return LLVMBuildShuffleVector(g->b, x, LLVMGetPoison(vt),
                                  LLVMConstNull(LLVMVectorType(g->i32, n)), "splat");
}

static LLVMValueRef splat_n(Lower *L, LLVMValueRef v, unsigned n) { return cg_splat(L->g, v, n); }

static LLVMValueRef splat(Lower *L, LLVMValueRef v) { return splat_n(L, v, (unsigned)L->width); }

/* Broadcasts the scalar of a mixed pair. */
static void bcast(Lower *L, LLVMValueRef *a, LLVMValueRef *b)
{
    if (is_vec(*a) && !is_vec(*b))
        *b = splat_n(L, *b, LLVMGetVectorSize(LLVMTypeOf(*a)));
    else if (is_vec(*b) && !is_vec(*a))
        *a = splat_n(L, *a, LLVMGetVectorSize(LLVMTypeOf(*b)));
}

static LLVMValueRef cint(Lower *L, LLVMValueRef shape, int64_t v)
{
    LLVMValueRef c = LLVMConstInt(L->ity, (unsigned long long)v, 1);
    return is_vec(shape) ? splat_n(L, c, LLVMGetVectorSize(LLVMTypeOf(shape))) : c;
}

static LLVMValueRef cfloat(Lower *L, LLVMValueRef shape, double v)
{
    LLVMValueRef c = LLVMConstReal(L->g->f32, v);
    return is_vec(shape) ? splat_n(L, c, LLVMGetVectorSize(LLVMTypeOf(shape))) : c;
}

static LLVMValueRef as_int(Lower *L, LLVMValueRef v)
{
    if (elem_type(v) == L->g->i1)
        return LLVMBuildZExt(L->g->b, v, like(L, L->ity, v), "");
    return v;
}

static LLVMValueRef as_bool(Lower *L, LLVMValueRef v)
{
    if (elem_type(v) == L->g->i1)
        return v;
    if (elem_type(v) == L->g->f32)
        return LLVMBuildFCmp(L->g->b, LLVMRealUNE, v, cfloat(L, v, 0.0), "");
    return LLVMBuildICmp(L->g->b, LLVMIntNE, v, cint(L, v, 0), "");
}

/* a && b over masks, either of which may be NULL (all lanes on). */
static LLVMValueRef mask_and(Lower *L, LLVMValueRef a, LLVMValueRef b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    bcast(L, &a, &b);
    return LLVMBuildAnd(L->g->b, a, b, "");
}

static LLVMValueRef mask_not(Lower *L, LLVMValueRef a) { return LLVMBuildNot(L->g->b, a, ""); }

static LLVMValueRef any_lane(Lower *L, LLVMValueRef m)
{
    if (!is_vec(m))
        return m;
    LLVMTypeRef t = LLVMTypeOf(m);
    return cg_intrinsic(L->g, "llvm.vector.reduce.or", &t, 1, &m, 1);
}

static LLVMValueRef all_true(Lower *L, unsigned n)
{
    return splat_n(L, LLVMConstInt(L->g->i1, 1, 0), n);
}

/* ---- helpers shared with the targets ---- */

LLVMValueRef cg_intrinsic(CgFn *g, const char *name, LLVMTypeRef *over, int nover,
                          LLVMValueRef *args, int nargs)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (!id)
        ir_panic(__FILE__, __LINE__, "unknown intrinsic %s", name);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, over, (size_t)nover);
    LLVMTypeRef fty = LLVMIntrinsicGetType(g->cx, id, over, (size_t)nover);
    return LLVMBuildCall2(g->b, fty, fn, args, (unsigned)nargs, "");
}

LLVMValueRef cg_math_fn(CgFn *g, const char *name, LLVMTypeRef fty)
{
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (fn)
        return fn;
    fn = LLVMAddFunction(g->mod, name, fty);
    /* memory(none): the errno they may set is never read by kernels */
    const char *attrs[] = {"nounwind", "willreturn", "nosync", "memory"};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++)
        LLVMAddAttributeAtIndex(
            fn, LLVMAttributeFunctionIndex,
            LLVMCreateEnumAttribute(g->cx,
                                    LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
    return fn;
}

LLVMValueRef cg_libm_call(CgFn *g, const char *name, LLVMValueRef x)
{
    LLVMTypeRef fty = LLVMFunctionType(g->f32, &g->f32, 1, 0);
    LLVMValueRef fn = cg_math_fn(g, name, fty);
    if (!is_vec(x))
        return LLVMBuildCall2(g->b, fty, fn, &x, 1, "");
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(x));
    LLVMValueRef r = LLVMGetPoison(LLVMTypeOf(x));
    for (unsigned i = 0; i < n; i++) {
        LLVMValueRef lane = LLVMConstInt(g->i32, i, 0);
        LLVMValueRef xi = LLVMBuildExtractElement(g->b, x, lane, "");
        LLVMValueRef yi = LLVMBuildCall2(g->b, fty, fn, &xi, 1, "");
        r = LLVMBuildInsertElement(g->b, r, yi, lane, "");
    }
    return r;
}

LLVMValueRef cg_entry_alloca(CgFn *g, LLVMTypeRef ty, const char *name)
{
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(g->cx);
    LLVMValueRef first = LLVMGetFirstInstruction(g->entry);
    if (first)
        LLVMPositionBuilderBefore(eb, first);
    else
        LLVMPositionBuilderAtEnd(eb, g->entry);
    LLVMValueRef a = LLVMBuildAlloca(eb, ty, name);
    LLVMSetAlignment(a, 64);
    LLVMDisposeBuilder(eb);
    return a;
}

/* ---- memo of emitted expressions, reset at every statement ---- */

static size_t memo_hash(const Expr *e, LLVMValueRef g)
{
    return ((size_t)e->hash * 31u) ^ ((size_t)(uintptr_t)g >> 4);
}

static LLVMValueRef memo_get(Lower *L, const Expr *e, LLVMValueRef g)
{
    if (!L->memocount)
        return NULL;
    for (size_t j = memo_hash(e, g) & (L->memocap - 1); L->memo[j].e; j = (j + 1) & (L->memocap - 1))
        if (L->memo[j].e == e && L->memo[j].guard == g)
            return L->memo[j].v;
    return NULL;
}

static void memo_put(Lower *L, const Expr *e, LLVMValueRef g, LLVMValueRef v)
{
    if ((L->memocount + 1) * 2 > L->memocap) {
        MemoEnt *old = L->memo;
        size_t oldcap = L->memocap;
        L->memocap = oldcap ? oldcap * 2 : 64;
        L->memo = calloc(L->memocap, sizeof *L->memo);
        if (!L->memo)
            ir_panic(__FILE__, __LINE__, "out of memory");
        L->memocount = 0;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].e)
                memo_put(L, old[i].e, old[i].guard, old[i].v);
        free(old);
    }
    size_t j = memo_hash(e, g) & (L->memocap - 1);
    while (L->memo[j].e)
        j = (j + 1) & (L->memocap - 1);
    L->memo[j] = (MemoEnt){e, g, v};
    L->memocount++;
}

static void memo_reset(Lower *L)
{
    if (L->memocount) {
        memset(L->memo, 0, L->memocap * sizeof *L->memo);
        L->memocount = 0;
    }
}

/* ---- analysis of lane-varying expressions ---- */

static LLVMValueRef var_value(Lower *L, const Var *v)
{
    if (v->kind == VK_DIM)
        return L->g->dimv[v->pos];
    IR_ASSERT(v->id < L->nvars);
    if (!L->env[v->id])
        ir_panic(__FILE__, __LINE__, "variable %s used outside its binding", v->name);
    return L->env[v->id];
}

static bool varies(Lower *L, const Expr *e)
{
    if (!L->lane)
        return false;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: return false;
    case EX_VAR: return e->var->kind != VK_DIM && is_vec(var_value(L, e->var));
    case EX_LOAD:
        for (int i = 0; i < e->load.n; i++)
            if (varies(L, e->load.idx[i]))
                return true;
        return false;
    case EX_REDUCE: IR_UNREACHABLE();
    default:
        return (e->op.a && varies(L, e->op.a)) || (e->op.b && varies(L, e->op.b)) ||
               (e->op.c && varies(L, e->op.c));
    }
}

static bool has_load(const Expr *e, bool unsafe_only)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return false;
    case EX_LOAD:
        if (!unsafe_only || !e->load.padded)
            return true;
        for (int i = 0; i < e->load.n; i++)
            if (has_load(e->load.idx[i], unsafe_only))
                return true;
        return false;
    case EX_REDUCE: return has_load(e->red.body, unsafe_only);
    default:
        return (e->op.a && has_load(e->op.a, unsafe_only)) ||
               (e->op.b && has_load(e->op.b, unsafe_only)) ||
               (e->op.c && has_load(e->op.c, unsafe_only));
    }
}

static Expr *inline_vlets(Lower *L, Expr *e)
{
    for (int i = L->nvlets - 1; i >= 0; i--)
        e = ir_subst(L->g->ec, e, L->vlets[i].v, L->vlets[i].inl);
    return e;
}

static const LocalBuf *local_buf(Lower *L, const Tensor *t)
{
    for (int i = L->nbufs - 1; i >= 0; i--)
        if (L->bufs[i].t == t)
            return &L->bufs[i];
    ir_panic(__FILE__, __LINE__, "buffer %s used outside its alloc", t->name);
}

/* The row-major flat offset of buf[idx...] as an expression. */
static Expr *flat_offset(Lower *L, const Tensor *t, int n, Expr **idx)
{
    ExprCtx *c = L->g->ec;
    Expr *f = ir_int(c, 0);
    for (int i = 0; i < n; i++)
        f = i ? ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, f, t->shape[i]), idx[i]) : idx[0];
    if (t->scope != MS_GLOBAL && local_buf(L, t)->per_lane) {
        IR_ASSERT(L->lane);
        f = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, f, ir_int(c, L->width)), ir_varref(c, L->lane));
    }
    return ir_simplify(c, f);
}

/* The stride of flat offset f along var x, when a constant. */
static bool const_stride(Lower *L, Expr *f, Var *x, int64_t *k)
{
    ExprCtx *c = L->g->ec;
    Expr *next = ir_subst(c, f, x, ir_binop(c, EX_ADD, ir_varref(c, x), ir_int(c, 1)));
    return ir_is_const(ir_simplify(c, ir_binop(c, EX_SUB, next, f)), k);
}

typedef enum Access { AC_SCALAR, AC_CONTIG, AC_GATHER } Access;

/* Classifies an access at flat offset f; for AC_CONTIG and AC_SCALAR sets
 * *base to the lane-0 offset, an expression uniform across lanes. */
static Access classify(Lower *L, Expr *f, Expr **base)
{
    *base = f;
    if (!varies(L, f))
        return AC_SCALAR;
    ExprCtx *c = L->g->ec;
    Expr *inl = inline_vlets(L, f);
    if (has_load(inl, false))
        return AC_GATHER;
    int64_t k;
    if (!const_stride(L, inl, L->lane, &k) || (k != 0 && k != 1))
        return AC_GATHER;
    *base = ir_simplify(c, ir_subst(c, inl, L->lane, ir_int(c, 0)));
    return k == 1 ? AC_CONTIG : AC_SCALAR;
}

/* ---- memory ---- */

static LLVMValueRef buffer_ptr(Lower *L, const Tensor *t)
{
    if (t->scope == MS_GLOBAL) {
        IR_ASSERT(t->id >= 0 && t->id < L->g->lp->nbuffers && L->g->lp->buffers[t->id] == t);
        return L->g->bufv[t->id];
    }
    return local_buf(L, t)->p;
}

static LLVMValueRef clamp_lanes(Lower *L, LLVMValueRef x)
{
    LLVMBuilderRef B = L->g->b;
    LLVMValueRef zero = cint(L, x, 0), w = cint(L, x, L->width);
    x = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, x, zero, ""), zero, x, "");
    x = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, x, w, ""), w, x, "");
    return splat(L, LLVMBuildIntCast2(B, x, L->g->i32, true, ""));
}

/* In-bounds mask of a padded access: every index that interval analysis
 * cannot prove in [0, extent) is compared (NULL: none). An index
 * base + lane (stride 1 along the lanes, the common case) is in range on
 * the lanes [-base, extent - base), compared as small i32 lane numbers. */
static LLVMValueRef inbounds(Lower *L, const Tensor *t, int n, Expr **idx, LLVMValueRef guard)
{
    CgFn *g = L->g;
    LLVMValueRef m = NULL;
    for (int i = 0; i < n; i++) {
        if (ir_prove_in_bounds(g->ec, idx[i], t->shape[i], RANGE_OPEN, NULL))
            continue; /* pad marks the load; this index needs no check */
        LLVMValueRef e = ex(L, t->shape[i], NULL), c;
        Expr *b0;
        if (varies(L, idx[i]) && classify(L, idx[i], &b0) == AC_CONTIG) {
            LLVMValueRef base = as_int(L, ex(L, b0, NULL));
            LLVMValueRef lo = clamp_lanes(L, LLVMBuildNeg(g->b, base, ""));
            LLVMValueRef hi = clamp_lanes(L, LLVMBuildSub(g->b, e, base, ""));
            LLVMValueRef lanes[MAX_VEC];
            for (int j = 0; j < L->width; j++)
                lanes[j] = LLVMConstInt(g->i32, (unsigned long long)j, 0);
            LLVMValueRef lv = LLVMConstVector(lanes, (unsigned)L->width);
            c = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, lv, lo, ""),
                             LLVMBuildICmp(g->b, LLVMIntSLT, lv, hi, ""), "inb");
        } else {
            LLVMValueRef x = as_int(L, ex(L, idx[i], guard));
            bcast(L, &x, &e);
            c = LLVMBuildICmp(g->b, LLVMIntULT, x, e, "inb");
        }
        m = mask_and(L, m, c);
    }
    return m;
}

/* The offset of a masked vector access: off, or 0 when no lane is active.
 * Masked-off lanes never fault, but on current x86 cores they cost a
 * microcode assist of about a microsecond each when they fall on an
 * unmapped page, as whole vectors of padding past a tensor's ends do; an
 * access with no active lane is parked on the tensor's first element.
 * (Stack buffers are always surrounded by mapped memory.) */
static LLVMValueRef park(Lower *L, const Tensor *t, LLVMValueRef off, LLVMValueRef mask)
{
    if (t->scope != MS_GLOBAL)
        return off;
    return LLVMBuildSelect(L->g->b, any_lane(L, mask), off, cint(L, off, 0), "");
}

static LLVMValueRef gep_of(Lower *L, LLVMTypeRef elt, LLVMValueRef base, LLVMValueRef off)
{
    return LLVMBuildGEP2(L->g->b, elt, base, &off, 1, "");
}

static LLVMValueRef gep(Lower *L, LLVMValueRef base, LLVMValueRef off)
{
    return gep_of(L, L->g->f32, base, off);
}

/* The LLVM type of an element of a tensor of type t: bool is a byte. */
static LLVMTypeRef storage_type(CgFn *g, DType t)
{
    switch (t) {
    case DT_BOOL: return LLVMInt8TypeInContext(g->cx);
    case DT_I32: return g->i32;
    case DT_I64: return g->i64;
    case DT_F32: return g->f32;
    }
    IR_UNREACHABLE();
}

/* The alignment of a vector or scalar of type vt in memory: its element's. */
static unsigned align_of(LLVMTypeRef vt)
{
    LLVMTypeRef et = LLVMGetTypeKind(vt) == LLVMVectorTypeKind ? LLVMGetElementType(vt) : vt;
    return LLVMGetTypeKind(et) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(et) / 8 : 4;
}

/* A vector load whose lanes are all in or all out: on SIMT targets a
 * branch around a plain load (a masked load becomes one branch and one
 * scalar load per lane there), zeros when out. */
static LLVMValueRef uniform_load(Lower *L, LLVMTypeRef vt, LLVMValueRef ptr, LLVMValueRef mask)
{
    CgFn *g = L->g;
    LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->cx, g->fn, "vload");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->cx, g->fn, "vjoin");
    LLVMBuildCondBr(g->b, mask, yes, join);
    LLVMPositionBuilderAtEnd(g->b, yes);
    LLVMValueRef v = LLVMBuildLoad2(g->b, vt, ptr, "");
    LLVMSetAlignment(v, align_of(vt));
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
    LLVMValueRef phi = LLVMBuildPhi(g->b, vt, "");
    LLVMValueRef vals[2] = {LLVMConstNull(vt), v};
    LLVMBasicBlockRef from2[2] = {from, yes};
    LLVMAddIncoming(phi, vals, from2, 2);
    return phi;
}

/* A contiguous vector load of type vt at base + off, lanes masked by mask
 * (NULL: none; a scalar mask: all lanes or none) and zero where masked. */
static LLVMValueRef contig_load(Lower *L, const Tensor *t, LLVMTypeRef vt, LLVMValueRef base,
                                LLVMValueRef off, LLVMValueRef mask)
{
    CgFn *g = L->g;
    LLVMTypeRef et = LLVMGetElementType(vt);
    if (!mask) {
        LLVMValueRef v = LLVMBuildLoad2(g->b, vt, gep_of(L, et, base, off), t->name);
        LLVMSetAlignment(v, align_of(vt));
        return v;
    }
    if (!is_vec(mask) && g->target->shuffle_xor)
        return uniform_load(L, vt, gep_of(L, et, base, off), mask);
    LLVMTypeRef over[2] = {vt, g->ptr};
    LLVMValueRef args[4] = {gep_of(L, et, base, park(L, t, off, mask)),
                            LLVMConstInt(g->i32, align_of(vt), 0),
                            splat_n(L, mask, LLVMGetVectorSize(vt)), LLVMConstNull(vt)};
    return cg_intrinsic(g, "llvm.masked.load", over, 2, args, 4);
}

/* A loaded element (or vector of them) as the value its expression has:
 * an f32, an integer of the kernel's width, or a condition. */
static LLVMValueRef loaded(Lower *L, DType t, LLVMValueRef v)
{
    switch (t) {
    case DT_F32: return v;
    case DT_I32: case DT_I64: return LLVMBuildIntCast2(L->g->b, v, like(L, L->ity, v), true, "");
    case DT_BOOL:
        return LLVMBuildICmp(L->g->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    }
    IR_UNREACHABLE();
}

static LLVMValueRef load_raw(Lower *L, Expr *e, LLVMValueRef guard);

static LLVMValueRef load(Lower *L, Expr *e, LLVMValueRef guard)
{
    return loaded(L, e->load.t->dtype, load_raw(L, e, guard));
}

/* The element e reads, in the tensor's storage type. */
static LLVMValueRef load_raw(Lower *L, Expr *e, LLVMValueRef guard)
{
    CgFn *g = L->g;
    const Tensor *t = e->load.t;
    LLVMTypeRef elt = storage_type(g, t->dtype);
    LLVMValueRef base = buffer_ptr(L, t);
    LLVMValueRef inb = e->load.padded ? inbounds(L, t, e->load.n, e->load.idx, guard) : NULL;
    LLVMValueRef mask = mask_and(L, guard, inb);
    Expr *f = flat_offset(L, t, e->load.n, e->load.idx), *f0;
    Access ac = classify(L, f, &f0);
    if (ac == AC_SCALAR && is_vec(inb))
        ac = AC_GATHER, f0 = f;
    LLVMValueRef zero = LLVMConstNull(elt);
    switch (ac) {
    case AC_SCALAR: {
        LLVMValueRef off = ex(L, f0, is_vec(guard) ? NULL : guard);
        if (mask) /* clamp: a lane that may not read reads element 0 */
            off = LLVMBuildSelect(g->b, any_lane(L, mask), off, cint(L, off, 0), "");
        LLVMValueRef v = LLVMBuildLoad2(g->b, elt, gep_of(L, elt, base, off), t->name);
        LLVMSetAlignment(v, align_of(elt));
        return inb ? LLVMBuildSelect(g->b, inb, v, zero, "") : v;
    }
    case AC_CONTIG:
        return contig_load(L, t, LLVMVectorType(elt, (unsigned)L->width), base,
                           ex(L, f0, NULL), mask);
    case AC_GATHER: {
        LLVMValueRef off = splat(L, ex(L, f0, guard));
        if (mask)
            off = LLVMBuildSelect(g->b, splat(L, mask), off, cint(L, off, 0), "");
        LLVMValueRef ptrs = gep_of(L, elt, base, off);
        LLVMTypeRef vt = LLVMVectorType(elt, (unsigned)L->width);
        LLVMTypeRef over[2] = {vt, LLVMTypeOf(ptrs)};
        LLVMValueRef args[4] = {ptrs, LLVMConstInt(g->i32, align_of(elt), 0),
                                mask ? splat(L, mask) : all_true(L, (unsigned)L->width),
                                LLVMConstNull(vt)};
        return cg_intrinsic(g, "llvm.masked.gather", over, 2, args, 4);
    }
    }
    IR_UNREACHABLE();
}

static LLVMValueRef to_f32(Lower *L, LLVMValueRef v)
{
    LLVMTypeRef et = elem_type(v);
    if (et == L->g->f32)
        return v;
    LLVMTypeRef ft = like(L, L->g->f32, v);
    return et == L->g->i1 ? LLVMBuildUIToFP(L->g->b, v, ft, "") : LLVMBuildSIToFP(L->g->b, v, ft, "");
}

/* Whether t[idx] over the lanes is one run along t's last axis that starts
 * at a proven multiple of w elements, in a row of a multiple of w: aligned
 * to w floats (buffers are 16-byte aligned), and wholly in or wholly out of
 * bounds. */
static bool aligned_run(Lower *L, const Tensor *t, int n, Expr **idx, int w)
{
    Expr *b;
    for (int i = 0; i + 1 < n; i++)
        if (varies(L, idx[i]))
            return false;
    return n > 0 && classify(L, idx[n - 1], &b) == AC_CONTIG && ir_prove_multiple(L->g->ec, b, w) &&
           ir_prove_multiple(L->g->ec, t->shape[n - 1], w);
}

static LLVMValueRef lane_of(Lower *L, LLVMValueRef v, int j)
{
    if (!v || !is_vec(v))
        return v;
    return LLVMBuildExtractElement(L->g->b, v, LLVMConstInt(L->g->i32, (unsigned)j, 0), "");
}

/* One async copy of `bytes` from src_base[off] to dst: when ok (i1) may be
 * false, of no source byte (zero fill), its offset parked on element 0. */
static void async_copy(Lower *L, LLVMValueRef dst, LLVMValueRef src_base, LLVMValueRef off,
                       int bytes, LLVMValueRef ok)
{
    CgFn *g = L->g;
    LLVMValueRef n = LLVMConstInt(g->i32, (unsigned)bytes, 0);
    if (ok) {
        off = LLVMBuildSelect(g->b, ok, off, cint(L, off, 0), "");
        n = LLVMBuildSelect(g->b, ok, n, LLVMConstInt(g->i32, 0, 0), "");
    }
    g->target->async_copy(g, dst, gep(L, src_base, off), bytes, n);
}

/* An async store through the target's async_copy: one copy of the lanes
 * when they are one aligned run of 8 or 16 bytes on both sides (or one
 * element), else a 4-byte copy per lane. An element out of its tensor is
 * zero-filled and its source parked on element 0. False: not an async
 * store the target copies asynchronously (it is stored at once). */
static bool async_store(Lower *L, Stmt *s, LLVMValueRef guard)
{
    CgFn *g = L->g;
    Expr *v = s->store.value;
    if (!s->store.async || !g->target->async_copy || guard)
        return false;
    IR_ASSERT(v->kind == EX_LOAD && v->load.t->scope == MS_GLOBAL);
    const Tensor *dt = s->store.buf, *src = v->load.t;
    LLVMValueRef ok = v->load.padded ? inbounds(L, src, v->load.n, v->load.idx, NULL) : NULL;
    Expr *df = flat_offset(L, dt, s->store.n, s->store.idx), *d0;
    Expr *sf = flat_offset(L, src, v->load.n, v->load.idx), *s0;
    Access da = classify(L, df, &d0), sa = classify(L, sf, &s0);
    int w = L->lane ? L->width : 1;
    LLVMValueRef dbase = buffer_ptr(L, dt), sbase = buffer_ptr(L, src);
    int bytes = 0;
    if (da == AC_SCALAR && sa == AC_SCALAR)
        bytes = 4; /* every lane the same element: the last lane's store */
    else if (da == AC_CONTIG && sa == AC_CONTIG && (w == 2 || w == 4) &&
             aligned_run(L, dt, s->store.n, s->store.idx, w) &&
             aligned_run(L, src, v->load.n, v->load.idx, w))
        bytes = 4 * w;
    if (bytes) {
        async_copy(L, gep(L, dbase, ex(L, d0, NULL)), sbase, ex(L, s0, NULL), bytes, lane_of(L, ok, 0));
        return true;
    }
    LLVMValueRef doff = ex(L, df, NULL), soff = ex(L, sf, NULL);
    for (int j = 0; j < w; j++)
        async_copy(L, gep(L, dbase, lane_of(L, doff, j)), sbase, lane_of(L, soff, j), 4,
                   lane_of(L, ok, j));
    return true;
}

/* An atomic add (split-K's parts) per lane, in lane order: an inactive
 * lane adds -0.0, which leaves every value as it is, to element 0. */
static void atomic_store(Lower *L, Stmt *s, LLVMValueRef guard)
{
    CgFn *g = L->g;
    const Tensor *t = s->store.buf;
    LLVMValueRef base = buffer_ptr(L, t);
    LLVMValueRef val = to_f32(L, ex(L, s->store.value, guard));
    LLVMValueRef off = ex(L, flat_offset(L, t, s->store.n, s->store.idx), guard);
    int w = L->lane ? L->width : 1; /* each lane adds, as in the serial loop */
    for (int j = 0; j < w; j++) {
        LLVMValueRef v = lane_of(L, val, j), o = lane_of(L, off, j);
        if (guard) {
            LLVMValueRef on = lane_of(L, guard, j);
            v = LLVMBuildSelect(g->b, on, v, LLVMConstReal(g->f32, -0.0), "");
            o = LLVMBuildSelect(g->b, on, o, cint(L, o, 0), "");
        }
        LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpFAdd, gep(L, base, o), v,
                           LLVMAtomicOrderingMonotonic, false);
    }
}

/* A value (scalar or vector) as a tensor of type t stores it. */
static LLVMValueRef to_storage(Lower *L, DType t, LLVMValueRef v)
{
    CgFn *g = L->g;
    switch (t) {
    case DT_F32: return to_f32(L, v);
    case DT_I32: case DT_I64: {
        LLVMTypeRef st = storage_type(g, t);
        return LLVMBuildIntCast2(g->b, as_int(L, v), like(L, st, v), true, "");
    }
    case DT_BOOL:
        return LLVMBuildZExt(g->b, as_bool(L, v), like(L, storage_type(g, t), v), "");
    }
    IR_UNREACHABLE();
}

static void store(Lower *L, Stmt *s, LLVMValueRef guard)
{
    CgFn *g = L->g;
    if (async_store(L, s, guard))
        return;
    if (s->store.atomic) {
        atomic_store(L, s, guard);
        return;
    }
    const Tensor *t = s->store.buf;
    IR_ASSERT(!guard || is_vec(guard));
    LLVMTypeRef elt = storage_type(g, t->dtype);
    unsigned align = align_of(elt);
    LLVMValueRef base = buffer_ptr(L, t);
    LLVMValueRef val = to_storage(L, t->dtype, ex(L, s->store.value, guard));
    Expr *f = flat_offset(L, t, s->store.n, s->store.idx), *f0;
    Access ac = classify(L, f, &f0);
    if (ac == AC_SCALAR && !is_vec(val) && !guard) {
        LLVMValueRef st = LLVMBuildStore(g->b, val, gep_of(L, elt, base, ex(L, f0, NULL)));
        LLVMSetAlignment(st, align);
        return;
    }
    LLVMTypeRef vt = LLVMVectorType(elt, (unsigned)L->width);
    val = splat(L, val);
    if (ac == AC_CONTIG) {
        LLVMValueRef off = ex(L, f0, NULL);
        if (!guard) {
            LLVMValueRef st = LLVMBuildStore(g->b, val, gep_of(L, elt, base, off));
            LLVMSetAlignment(st, align);
            return;
        }
        LLVMTypeRef over[2] = {vt, g->ptr};
        LLVMValueRef args[4] = {val, gep_of(L, elt, base, park(L, t, off, guard)),
                                LLVMConstInt(g->i32, align, 0), guard};
        cg_intrinsic(g, "llvm.masked.store", over, 2, args, 4);
        return;
    }
    /* a scatter; lanes store in order, so with a uniform address the last
     * active lane wins, as it would in a serial loop */
    LLVMValueRef off = splat(L, ex(L, ac == AC_SCALAR ? f0 : f, guard));
    if (guard)
        off = LLVMBuildSelect(g->b, guard, off, cint(L, off, 0), "");
    LLVMValueRef ptrs = gep_of(L, elt, base, off);
    LLVMTypeRef over[2] = {vt, LLVMTypeOf(ptrs)};
    LLVMValueRef args[4] = {val, ptrs, LLVMConstInt(g->i32, align, 0),
                            guard ? guard : all_true(L, (unsigned)L->width)};
    cg_intrinsic(g, "llvm.masked.scatter", over, 2, args, 4);
}

/* ---- expressions ---- */

static LLVMValueRef fmath(Lower *L, CgMath f, LLVMValueRef a, LLVMValueRef b)
{
    if (b)
        bcast(L, &a, &b);
    return L->g->target->math(L->g, f, a, b);
}

/* Floor division or modulo as ir/semantics.c defines them: x / 0 = x % 0
 * = 0, x / -1 = -x (wrapping), x % -1 = 0; never an sdiv that traps. */
static LLVMValueRef idivmod(Lower *L, LLVMValueRef a, LLVMValueRef b, Expr *be, bool mod)
{
    LLVMBuilderRef B = L->g->b;
    int64_t d;
    if (ir_is_const(be, &d) && d > 0) {
        if ((d & (d - 1)) == 0) {
            int k = __builtin_ctzll((unsigned long long)d);
            return mod ? LLVMBuildAnd(B, a, cint(L, a, d - 1), "")
                       : LLVMBuildAShr(B, a, cint(L, a, k), "");
        }
        LLVMValueRef q = LLVMBuildSDiv(B, a, b, ""), r = LLVMBuildSRem(B, a, b, "");
        LLVMValueRef neg = LLVMBuildICmp(B, LLVMIntSLT, r, cint(L, r, 0), "");
        return mod ? LLVMBuildAdd(B, r, LLVMBuildSelect(B, neg, b, cint(L, b, 0), ""), "")
                   : LLVMBuildSub(B, q, LLVMBuildZExt(B, neg, LLVMTypeOf(q), ""), "");
    }
    return cg_floordivmod(B, a, b, mod);
}

LLVMValueRef cg_floordivmod(LLVMBuilderRef B, LLVMValueRef a, LLVMValueRef b, bool mod)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstNull(t), m1 = LLVMConstAllOnes(t);
    LLVMValueRef one = LLVMConstSub(zero, m1);
    LLVMValueRef bz = LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
    LLVMValueRef bm1 = LLVMBuildICmp(B, LLVMIntEQ, b, m1, "");
    LLVMValueRef special = LLVMBuildOr(B, bz, bm1, "");
    LLVMValueRef bs = LLVMBuildSelect(B, special, one, b, "");
    LLVMValueRef q = LLVMBuildSDiv(B, a, bs, ""), r = LLVMBuildSRem(B, a, bs, "");
    LLVMValueRef fix = LLVMBuildAnd(
        B, LLVMBuildICmp(B, LLVMIntNE, r, zero, ""),
        LLVMBuildICmp(B, LLVMIntSLT, LLVMBuildXor(B, r, bs, ""), zero, ""), "");
    if (mod) {
        LLVMValueRef res = LLVMBuildAdd(B, r, LLVMBuildSelect(B, fix, bs, zero, ""), "");
        return LLVMBuildSelect(B, special, zero, res, "");
    }
    LLVMValueRef res = LLVMBuildSub(B, q, LLVMBuildZExt(B, fix, t, ""), "");
    res = LLVMBuildSelect(B, bm1, LLVMBuildSub(B, zero, a, ""), res, "");
    return LLVMBuildSelect(B, bz, zero, res, "");
}

/* The lane of v (a vector, or a scalar for all) that mask's first set lane
 * picks, widened to i64: selects over constant lanes, last to first (a
 * lane picked by a variable index would put a GPU thread's registers in
 * local memory). */
static LLVMValueRef first_lane(Lower *L, LLVMValueRef mask, LLVMValueRef v)
{
    CgFn *g = L->g;
    if (is_vec(v) && !is_vec(mask)) /* every lane the same mask: the first */
        v = LLVMBuildExtractElement(g->b, v, LLVMConstInt(g->i32, 0, 0), "");
    if (is_vec(v)) {
        unsigned w = LLVMGetVectorSize(LLVMTypeOf(mask));
        LLVMValueRef r = LLVMBuildExtractElement(g->b, v, LLVMConstInt(g->i32, w - 1, 0), "");
        for (unsigned i = w - 1; i-- > 0;) {
            LLVMValueRef at = LLVMConstInt(g->i32, i, 0);
            r = LLVMBuildSelect(g->b, LLVMBuildExtractElement(g->b, mask, at, ""),
                                LLVMBuildExtractElement(g->b, v, at, ""), r, "");
        }
        v = r;
    }
    return LLVMBuildIntCast2(g->b, v, g->i64, true, "");
}

/* A gather's index (EX_CHECK): i, or i + n where i < 0, when in 0..n-1;
 * else 0, and the first lane that is out writes the error record once
 * (compare-and-swap on its code word, then the index, n and the element). */
static LLVMValueRef checked(Lower *L, Expr *e, LLVMValueRef guard)
{
    CgFn *g = L->g;
    LLVMBuilderRef B = g->b;
    LLVMValueRef v = as_int(L, ex(L, e->op.a, guard)), n = ex(L, e->op.b, guard);
    bcast(L, &v, &n);
    LLVMValueRef zero = cint(L, v, 0);
    LLVMValueRef i = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, v, zero, ""),
                                     LLVMBuildAdd(B, v, n, ""), v, "");
    LLVMValueRef bad = LLVMBuildICmp(B, LLVMIntUGE, i, n, "");
    LLVMValueRef res = LLVMBuildSelect(B, bad, zero, i, "");
    const Tensor *rec = g->lp->index_error;
    if (!rec)
        return res;
    /* the lanes that are out; with one index for every lane, the lanes the
     * guard lets run, of which the first is the element reported */
    LLVMValueRef live = mask_and(L, guard, bad);
    int64_t code = 0;
    /* the site, as ir_check_sites saw it or as flat_offset simplified it */
    ExprCtx *cx = g->lp->te->ctx;
    for (int k = 0; k < L->nsites && !code; k++)
        if (L->sites[k].check == e || ir_simplify(cx, (Expr *)L->sites[k].check) == e)
            code = DCRT_INDEX_CODE(L->sites[k].axis, L->sites[k].t->id, L->out_id);
    IR_ASSERT(code); /* every checked index is an access's (ir_check_sites) */
    LLVMBasicBlockRef out = LLVMAppendBasicBlockInContext(g->cx, g->fn, "index_out");
    LLVMBasicBlockRef record = LLVMAppendBasicBlockInContext(g->cx, g->fn, "index_record");
    LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(g->cx, g->fn, "index_ok");
    LLVMBuildCondBr(B, any_lane(L, live), out, cont);
    LLVMPositionBuilderAtEnd(B, out);
    /* the element's position only here, out of the hot path (it would hold
     * registers there): a memo of its own, since what this block computes
     * does not dominate the code after it */
    MemoEnt *memo = L->memo;
    size_t memocap = L->memocap, memocount = L->memocount;
    L->memo = NULL;
    L->memocap = L->memocount = 0;
    LLVMValueRef pos = ex(L, e->op.c, guard);
    free(L->memo);
    L->memo = memo;
    L->memocap = memocap;
    L->memocount = memocount;
    LLVMValueRef vals[3] = {first_lane(L, live, v), first_lane(L, live, n),
                            first_lane(L, live, pos)};
    LLVMValueRef base = buffer_ptr(L, rec);
    LLVMValueRef xchg = LLVMBuildAtomicCmpXchg(B, base, LLVMConstInt(g->i64, 0, 0),
                                               LLVMConstInt(g->i64, (unsigned long long)code, 0),
                                               LLVMAtomicOrderingMonotonic,
                                               LLVMAtomicOrderingMonotonic, false);
    LLVMBuildCondBr(B, LLVMBuildExtractValue(B, xchg, 1, ""), record, cont);
    LLVMPositionBuilderAtEnd(B, record);
    for (int k = 0; k < 3; k++) {
        LLVMValueRef at = LLVMConstInt(g->i64, (unsigned long long)k + 1, 0);
        LLVMValueRef st = LLVMBuildStore(B, vals[k], gep_of(L, g->i64, base, at));
        LLVMSetAlignment(st, 8);
    }
    LLVMBuildBr(B, cont);
    LLVMPositionBuilderAtEnd(B, cont);
    return res;
}

/* f32(a), i64(a) (EX_CAST) and i32(a) (EX_I32), as ir/semantics.c says. */
static LLVMValueRef cast(Lower *L, Expr *e, LLVMValueRef a)
{
    CgFn *g = L->g;
    if (e->type == DT_F32)
        return to_f32(L, a);
    IR_ASSERT(e->type == DT_I64);
    LLVMTypeRef to = e->kind == EX_I32 ? g->i32 : g->i64;
    if (elem_type(a) == g->f32) { /* saturating, NaN -> 0 */
        LLVMTypeRef over[2] = {like(L, to, a), LLVMTypeOf(a)};
        a = cg_intrinsic(g, "llvm.fptosi.sat", over, 2, &a, 1);
    } else if (elem_type(a) == g->i1) {
        return as_int(L, a);
    } else if (e->kind == EX_I32) { /* the low 32 bits */
        a = LLVMBuildTrunc(g->b, a, like(L, g->i32, a), "");
    }
    return LLVMBuildIntCast2(g->b, a, like(L, L->ity, a), true, "");
}

static LLVMValueRef float_op(Lower *L, ExprKind k, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = L->g->b;
    if (b)
        bcast(L, &a, &b);
    switch (k) {
    case EX_ADD: return LLVMBuildFAdd(B, a, b, "");
    case EX_SUB: return LLVMBuildFSub(B, a, b, "");
    case EX_MUL: return LLVMBuildFMul(B, a, b, "");
    case EX_DIV: return LLVMBuildFDiv(B, a, b, "");
    case EX_MOD: { /* x - y * floor(x / y), rounded at every step */
        LLVMValueRef q = fmath(L, CG_FLOOR, LLVMBuildFDiv(B, a, b, ""), NULL);
        return LLVMBuildFSub(B, a, LLVMBuildFMul(B, b, q, ""), "");
    }
    case EX_MIN: return fmath(L, CG_FMIN, a, b);
    case EX_MAX: return fmath(L, CG_FMAX, a, b);
    case EX_POW: return fmath(L, CG_POW, a, b);
    case EX_NEG: return LLVMBuildFNeg(B, a, "");
    case EX_EXP: return fmath(L, CG_EXP, a, NULL);
    case EX_LOG: return fmath(L, CG_LOG, a, NULL);
    case EX_SQRT: return fmath(L, CG_SQRT, a, NULL);
    case EX_RSQRT: return LLVMBuildFDiv(B, cfloat(L, a, 1.0), fmath(L, CG_SQRT, a, NULL), "");
    case EX_TANH: return fmath(L, CG_TANH, a, NULL);
    case EX_ERF: return fmath(L, CG_ERF, a, NULL);
    case EX_ABS: return fmath(L, CG_FABS, a, NULL);
    case EX_SIGMOID: {
        LLVMValueRef ex_ = fmath(L, CG_EXP, LLVMBuildFNeg(B, a, ""), NULL);
        return LLVMBuildFDiv(B, cfloat(L, a, 1.0), LLVMBuildFAdd(B, cfloat(L, a, 1.0), ex_, ""), "");
    }
    case EX_RELU: return fmath(L, CG_FMAX, a, cfloat(L, a, 0.0));
    case EX_GELU: {
        LLVMValueRef s = LLVMBuildFMul(B, a, cfloat(L, a, 0.70710678118654752), "");
        LLVMValueRef e1 = LLVMBuildFAdd(B, cfloat(L, a, 1.0), fmath(L, CG_ERF, s, NULL), "");
        return LLVMBuildFMul(B, LLVMBuildFMul(B, cfloat(L, a, 0.5), a, ""), e1, "");
    }
    default: ir_panic(__FILE__, __LINE__, "no float lowering for %s", ir_op_name(k));
    }
}

static LLVMValueRef int_op(Lower *L, Expr *e, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = L->g->b;
    a = as_int(L, a);
    if (b) {
        b = as_int(L, b);
        bcast(L, &a, &b);
    }
    switch (e->kind) {
    case EX_ADD: return LLVMBuildAdd(B, a, b, "");
    case EX_SUB: return LLVMBuildSub(B, a, b, "");
    case EX_MUL: return LLVMBuildMul(B, a, b, "");
    case EX_DIV: return idivmod(L, a, b, e->op.b, false);
    case EX_MOD: return idivmod(L, a, b, e->op.b, true);
    case EX_MIN: return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, b, ""), a, b, "");
    case EX_MAX: return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, a, b, ""), a, b, "");
    case EX_NEG: return LLVMBuildSub(B, cint(L, a, 0), a, "");
    case EX_ABS:
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, cint(L, a, 0), ""),
                               LLVMBuildSub(B, cint(L, a, 0), a, ""), a, "");
    case EX_RELU:
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, a, cint(L, a, 0), ""), a,
                               cint(L, a, 0), "");
    default: ir_panic(__FILE__, __LINE__, "no integer lowering for %s", ir_op_name(e->kind));
    }
}

static LLVMValueRef compare(Lower *L, ExprKind k, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = L->g->b;
    if (elem_type(a) == L->g->f32 || elem_type(b) == L->g->f32) {
        a = to_f32(L, a);
        b = to_f32(L, b);
        bcast(L, &a, &b);
        LLVMRealPredicate p = k == EX_LT ? LLVMRealOLT : k == EX_LE ? LLVMRealOLE
                            : k == EX_EQ ? LLVMRealOEQ : LLVMRealUNE;
        return LLVMBuildFCmp(B, p, a, b, "");
    }
    if (elem_type(a) != elem_type(b)) {
        a = as_int(L, a);
        b = as_int(L, b);
    }
    bcast(L, &a, &b);
    LLVMIntPredicate p = k == EX_LT ? LLVMIntSLT : k == EX_LE ? LLVMIntSLE
                       : k == EX_EQ ? LLVMIntEQ : LLVMIntNE;
    return LLVMBuildICmp(B, p, a, b, "");
}

/* A target's shuffle (of 32-bit floats) of a scalar: an int64 as the bits
 * of its two halves. */
static LLVMValueRef shuffle_one(CgFn *g, LLVMValueRef v, int mask)
{
    if (LLVMTypeOf(v) == g->f32)
        return g->target->shuffle_xor(g, v, mask);
    LLVMValueRef half[2];
    for (int h = 0; h < 2; h++) {
        LLVMValueRef x = h ? LLVMBuildLShr(g->b, v, LLVMConstInt(g->i64, 32, 0), "") : v;
        x = LLVMBuildBitCast(g->b, LLVMBuildTrunc(g->b, x, g->i32, ""), g->f32, "");
        x = g->target->shuffle_xor(g, x, mask);
        half[h] = LLVMBuildZExt(g->b, LLVMBuildBitCast(g->b, x, g->i32, ""), g->i64, "");
    }
    return LLVMBuildOr(g->b, half[0],
                       LLVMBuildShl(g->b, half[1], LLVMConstInt(g->i64, 32, 0), ""), "");
}

/* shfl_xor: the target's shuffle, lane by lane for a vector. */
static LLVMValueRef shuffle(Lower *L, Expr *e, LLVMValueRef v)
{
    CgFn *g = L->g;
    int64_t mask;
    if (!g->target->shuffle_xor || !ir_is_const(e->op.b, &mask))
        ir_panic(__FILE__, __LINE__, "a warp shuffle on target %s", g->target->name);
    if (!is_vec(v))
        return shuffle_one(g, v, (int)mask);
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(v));
    LLVMValueRef r = LLVMGetPoison(LLVMTypeOf(v));
    for (unsigned i = 0; i < n; i++) {
        LLVMValueRef lane = LLVMConstInt(g->i32, i, 0);
        LLVMValueRef x = shuffle_one(g, LLVMBuildExtractElement(g->b, v, lane, ""), (int)mask);
        r = LLVMBuildInsertElement(g->b, r, x, lane, "");
    }
    return r;
}

/* The guard under which a conditionally evaluated operand runs: only
 * operands that could read memory they may not need one. */
static LLVMValueRef narrow(Lower *L, LLVMValueRef guard, LLVMValueRef cond, Expr *operand)
{
    return has_load(operand, true) ? mask_and(L, guard, cond) : guard;
}

static LLVMValueRef ex_uncached(Lower *L, Expr *e, LLVMValueRef guard)
{
    CgFn *g = L->g;
    LLVMBuilderRef B = g->b;
    switch (e->kind) {
    case EX_INT:
        return e->type == DT_BOOL ? LLVMConstInt(g->i1, e->ival != 0, 0)
                                  : LLVMConstInt(L->ity, (unsigned long long)e->ival, 1);
    case EX_FLOAT: return LLVMConstReal(g->f32, e->fval);
    case EX_VAR: return var_value(L, e->var);
    case EX_LOAD: return load(L, e, guard);
    case EX_REDUCE: ir_panic(__FILE__, __LINE__, "reduction reached codegen");
    case EX_CAST: case EX_I32: return cast(L, e, ex(L, e->op.a, guard));
    case EX_CHECK: return checked(L, e, guard);
    case EX_AND: case EX_OR: {
        LLVMValueRef a = as_bool(L, ex(L, e->op.a, guard));
        LLVMValueRef c = e->kind == EX_AND ? a : mask_not(L, a);
        LLVMValueRef b = as_bool(L, ex(L, e->op.b, narrow(L, guard, c, e->op.b)));
        bcast(L, &a, &b);
        return e->kind == EX_AND ? LLVMBuildAnd(B, a, b, "") : LLVMBuildOr(B, a, b, "");
    }
    case EX_NOT: return mask_not(L, as_bool(L, ex(L, e->op.a, guard)));
    case EX_SELECT: {
        LLVMValueRef c = as_bool(L, ex(L, e->op.a, guard));
        LLVMValueRef x = ex(L, e->op.b, narrow(L, guard, c, e->op.b));
        LLVMValueRef y = ex(L, e->op.c, narrow(L, guard, mask_not(L, c), e->op.c));
        if (e->type == DT_F32) {
            x = to_f32(L, x);
            y = to_f32(L, y);
        } else if (e->type == DT_I64) {
            x = as_int(L, x);
            y = as_int(L, y);
        }
        bcast(L, &x, &y);
        if (is_vec(c) && !is_vec(x)) {
            x = splat_n(L, x, LLVMGetVectorSize(LLVMTypeOf(c)));
            y = splat_n(L, y, LLVMGetVectorSize(LLVMTypeOf(c)));
        }
        return LLVMBuildSelect(B, c, x, y, "");
    }
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE:
        return compare(L, e->kind, ex(L, e->op.a, guard), ex(L, e->op.b, guard));
    case EX_SHFL_XOR: {
        LLVMValueRef v = ex(L, e->op.a, guard);
        return shuffle(L, e, e->type == DT_F32 ? to_f32(L, v) : as_int(L, v));
    }
    case EX_FMA: {
        LLVMValueRef x[3] = {to_f32(L, ex(L, e->op.a, guard)), to_f32(L, ex(L, e->op.b, guard)),
                             to_f32(L, ex(L, e->op.c, guard))};
        bcast(L, &x[0], &x[1]);
        bcast(L, &x[1], &x[2]);
        bcast(L, &x[0], &x[2]);
        LLVMTypeRef t = LLVMTypeOf(x[0]);
        return cg_intrinsic(g, "llvm.fma", &t, 1, x, 3);
    }
    default: break;
    }
    LLVMValueRef a = ex(L, e->op.a, guard);
    LLVMValueRef b = ir_op_arity(e->kind) == 2 ? ex(L, e->op.b, guard) : NULL;
    if (e->type == DT_F32)
        return float_op(L, e->kind, to_f32(L, a), b ? to_f32(L, b) : NULL);
    return int_op(L, e, a, b);
}

static LLVMValueRef ex(Lower *L, Expr *e, LLVMValueRef guard)
{
    LLVMValueRef v = memo_get(L, e, guard);
    if (!v) {
        v = ex_uncached(L, e, guard);
        memo_put(L, e, guard, v);
    }
    return v;
}

/* ---- statements ---- */

static void bind(Lower *L, Var *v, LLVMValueRef val)
{
    IR_ASSERT(v->id < L->nvars);
    L->env[v->id] = val;
}

/* for v in [lo, hi): body */
static void serial_loop(Lower *L, Var *v, LLVMValueRef lo, LLVMValueRef hi, Stmt *body,
                        LLVMValueRef guard)
{
    CgFn *g = L->g;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(g->cx, g->fn, v->name);
    LLVMBasicBlockRef bodyb = LLVMAppendBasicBlockInContext(g->cx, g->fn, "body");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->cx, g->fn, "exit");
    LLVMBuildBr(g->b, head);
    LLVMPositionBuilderAtEnd(g->b, head);
    LLVMValueRef i = LLVMBuildPhi(g->b, L->ity, v->name);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, hi, ""), bodyb, exit);
    LLVMPositionBuilderAtEnd(g->b, bodyb);
    bind(L, v, i);
    st(L, body, guard);
    LLVMValueRef next = LLVMBuildAdd(g->b, i, LLVMConstInt(L->ity, 1, 0), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, head);
    LLVMValueRef vals[2] = {lo, next};
    LLVMBasicBlockRef bbs[2] = {pre, latch};
    LLVMAddIncoming(i, vals, bbs, 2);
    LLVMPositionBuilderAtEnd(g->b, exit);
    bind(L, v, NULL);
}

static void branch(Lower *L, LLVMValueRef cond, Stmt *then, Stmt *els, LLVMValueRef guard)
{
    CgFn *g = L->g;
    LLVMBasicBlockRef tb = LLVMAppendBasicBlockInContext(g->cx, g->fn, "then");
    LLVMBasicBlockRef eb = els ? LLVMAppendBasicBlockInContext(g->cx, g->fn, "else") : NULL;
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->cx, g->fn, "endif");
    LLVMBuildCondBr(g->b, cond, tb, eb ? eb : join);
    LLVMPositionBuilderAtEnd(g->b, tb);
    st(L, then, guard);
    LLVMBuildBr(g->b, join);
    if (els) {
        LLVMPositionBuilderAtEnd(g->b, eb);
        st(L, els, guard);
        LLVMBuildBr(g->b, join);
    }
    LLVMPositionBuilderAtEnd(g->b, join);
}

/* A hook's index or bound (i64) as the kernel's integer type. */
static LLVMValueRef to_ity(Lower *L, LLVMValueRef v)
{
    return LLVMTypeOf(v) == L->ity ? v : LLVMBuildIntCast2(L->g->b, v, L->ity, true, "");
}

static void vector_loop(Lower *L, Var *v, int width, Stmt *body)
{
    LLVMValueRef lanes[MAX_VEC];
    for (int i = 0; i < width; i++)
        lanes[i] = LLVMConstInt(L->ity, (unsigned long long)i, 0);
    L->lane = v;
    L->width = width;
    bind(L, v, LLVMConstVector(lanes, (unsigned)width));
    st(L, body, NULL);
    bind(L, v, NULL);
    L->lane = NULL;
    L->width = 0;
}

/* f with x and y replaced by the constants i and j. */
static Expr *at2(Lower *L, Expr *f, Var *x, int64_t i, Var *y, int64_t j)
{
    ExprCtx *c = L->g->ec;
    return ir_simplify(c, ir_subst(c, ir_subst(c, f, x, ir_int(c, i)), y, ir_int(c, j)));
}

/* Whether every index of load ld that interval analysis cannot prove in
 * range is independent of u: then each row of a transposing copy (v
 * fixed) is wholly in bounds or wholly out. */
static bool rows_whole(Lower *L, Expr *ld, Var *u)
{
    for (int i = 0; i < ld->load.n; i++)
        if (ir_expr_uses_var(ld->load.idx[i], u) &&
            !ir_prove_in_bounds(L->g->ec, ld->load.idx[i], ld->load.t->shape[i], RANGE_OPEN, NULL))
            return false;
    return true;
}

/* A square transposing copy on the CPU, `for u in 0..n unrolled: for v in
 * 0..n vectorized: dst[..] = src[..]`, the store contiguous along v and
 * the load along u (passes/stage.c packs W[N, K]'s panels as [K][N] so):
 * n contiguous loads of n elements, one per lane v, transposed in
 * registers by log2(n) rounds of two-input shuffles (round b swaps the
 * off-diagonal b x b blocks of every 2b x 2b block, b = n/2 .. 1), and n
 * contiguous stores in the order of u, instead of n gathers. It reads
 * exactly the elements the gathers would: a padded load whose unproven
 * indices do not use u loads each row wholly or not at all (inbounds at
 * v = j, u = 0; the indices that use u are proven for every u). Its loads
 * all come before its stores, so src and dst must differ. false, emitting
 * nothing, for any other loop. */
static bool transposed_copy(Lower *L, Stmt *s)
{
    CgFn *g = L->g;
    Var *u = s->loop.var, *v;
    int64_t n, w, su, sv;
    Stmt *in = s->loop.body, *sto;
    if (L->lane || g->target->shuffle_xor || !ir_is_const(u->extent, &n) || n < 2 ||
        n > MAX_VEC || (n & (n - 1)) || in->kind != ST_FOR || in->loop.fk != FK_VECTORIZED)
        return false;
    v = in->loop.var;
    sto = in->loop.body;
    if (!ir_is_const(v->extent, &w) || w != n || sto->kind != ST_STORE || sto->store.async ||
        sto->store.atomic || sto->store.value->kind != EX_LOAD)
        return false;
    Expr *ld = sto->store.value;
    const Tensor *dt = sto->store.buf, *srct = ld->load.t;
    if (srct == dt || srct->dtype != DT_F32 || dt->dtype != DT_F32)
        return false;
    Expr *fl = flat_offset(L, srct, ld->load.n, ld->load.idx);
    Expr *fs = flat_offset(L, dt, sto->store.n, sto->store.idx);
    if (has_load(fl, false) || has_load(fs, false) || !const_stride(L, fl, u, &su) || su != 1 ||
        !const_stride(L, fs, v, &sv) || sv != 1 || (ld->load.padded && !rows_whole(L, ld, u)))
        return false;
    LLVMTypeRef vt = LLVMVectorType(g->f32, (unsigned)n);
    LLVMValueRef r[MAX_VEC], src = buffer_ptr(L, srct), dst = buffer_ptr(L, dt);
    for (int64_t j = 0; j < n; j++) {
        memo_reset(L);
        LLVMValueRef inb = NULL;
        if (ld->load.padded) {
            Expr *idx[MK_MAX_AXES + 8];
            IR_ASSERT(ld->load.n <= MK_MAX_AXES + 8);
            for (int i = 0; i < ld->load.n; i++)
                idx[i] = at2(L, ld->load.idx[i], u, 0, v, j);
            inb = inbounds(L, srct, ld->load.n, idx, NULL);
        }
        r[j] = contig_load(L, srct, vt, src, ex(L, at2(L, fl, u, 0, v, j), NULL), inb);
    }
    for (int64_t b = n / 2; b >= 1; b /= 2) {
        LLVMValueRef lo[MAX_VEC], hi[MAX_VEC];
        for (int64_t i = 0; i < n; i++) {
            lo[i] = LLVMConstInt(g->i32, (unsigned long long)((i & b) ? n + i - b : i), 0);
            hi[i] = LLVMConstInt(g->i32, (unsigned long long)((i & b) ? n + i : i + b), 0);
        }
        LLVMValueRef mlo = LLVMConstVector(lo, (unsigned)n), mhi = LLVMConstVector(hi, (unsigned)n);
        for (int64_t j = 0; j < n; j++) {
            if (j & b)
                continue;
            LLVMValueRef x = r[j], y = r[j + b];
            r[j] = LLVMBuildShuffleVector(g->b, x, y, mlo, "");
            r[j + b] = LLVMBuildShuffleVector(g->b, x, y, mhi, "");
        }
    }
    for (int64_t i = 0; i < n; i++) {
        memo_reset(L);
        LLVMValueRef p = gep(L, dst, ex(L, at2(L, fs, u, i, v, 0), NULL));
        LLVMSetAlignment(LLVMBuildStore(g->b, r[i], p), 4);
    }
    memo_reset(L);
    return true;
}

static void loop(Lower *L, Stmt *s, LLVMValueRef guard)
{
    CgFn *g = L->g;
    Var *v = s->loop.var;
    int64_t n = 0;
    bool cst = ir_is_const(v->extent, &n);
    switch (s->loop.fk) {
    case FK_BLOCK:
    case FK_THREAD: {
        IR_ASSERT(!L->lane);
        LLVMValueRef ext = ex(L, v->extent, NULL);
        CgRange r = g->target->loop_range(g, s->loop.fk, ext);
        if (!r.index) {
            serial_loop(L, v, to_ity(L, r.lo), to_ity(L, r.hi), s->loop.body, guard);
            return;
        }
        r.index = to_ity(L, r.index);
        bind(L, v, r.index);
        if (r.guard) {
            LLVMValueRef c = LLVMBuildICmp(g->b, LLVMIntSLT, r.index, ext, "");
            branch(L, c, s->loop.body, NULL, guard);
        } else {
            st(L, s->loop.body, guard);
        }
        return;
    }
    case FK_VECTORIZED:
        if (cst && n >= 2 && n <= MAX_VEC && !L->lane) {
            vector_loop(L, v, (int)n, s->loop.body);
            return;
        }
        /* nested or odd widths: lanes one after another */
        /* fall through */
    case FK_UNROLLED:
        if (s->loop.fk == FK_UNROLLED && !guard && transposed_copy(L, s))
            return;
        if (cst && n <= 4 * MAX_VEC) {
            for (int64_t i = 0; i < n; i++) {
                bind(L, v, LLVMConstInt(L->ity, (unsigned long long)i, 0));
                st(L, s->loop.body, guard);
            }
            bind(L, v, NULL);
            return;
        }
        /* fall through */
    case FK_SERIAL:
        serial_loop(L, v, LLVMConstInt(L->ity, 0, 0), ex(L, v->extent, NULL), s->loop.body, guard);
        return;
    }
}

static void alloc(Lower *L, Stmt *s, LLVMValueRef guard)
{
    CgFn *g = L->g;
    const Tensor *t = s->alloc.buf;
    IR_ASSERT(t->scope != MS_GLOBAL);
    int64_t n = 1, d;
    for (int i = 0; i < t->rank; i++) {
        if (!ir_is_const(t->shape[i], &d))
            ir_panic(__FILE__, __LINE__, "buffer %s has a non-constant shape", t->name);
        n *= d;
    }
    if (L->lane)
        n *= L->width;
    LLVMTypeRef ty = LLVMArrayType2(storage_type(g, t->dtype), (uint64_t)(n > 0 ? n : 1));
    LLVMValueRef p = t->scope == MS_SHARED ? g->target->shared_alloc(g, t, ty)
                                           : cg_entry_alloca(g, ty, t->name);
    if (L->nbufs == L->capbufs) {
        L->capbufs = L->capbufs ? 2 * L->capbufs : 8;
        L->bufs = xrealloc(L->bufs, sizeof *L->bufs * (size_t)L->capbufs);
    }
    L->bufs[L->nbufs++] = (LocalBuf){t, p, L->lane != NULL};
    st(L, s->alloc.body, guard);
    L->nbufs--;
}

static void let(Lower *L, Stmt *s, LLVMValueRef guard)
{
    LLVMValueRef v = ex(L, s->let.value, guard);
    IR_ASSERT(elem_type(v) != L->g->f32);
    bind(L, s->let.var, as_int(L, v));
    bool vl = is_vec(v);
    if (vl) {
        if (L->nvlets == L->capvlets) {
            L->capvlets = L->capvlets ? 2 * L->capvlets : 8;
            L->vlets = xrealloc(L->vlets, sizeof *L->vlets * (size_t)L->capvlets);
        }
        L->vlets[L->nvlets] = (VecLet){s->let.var, inline_vlets(L, s->let.value)};
        L->nvlets++;
    }
    st(L, s->let.body, guard);
    if (vl)
        L->nvlets--;
    bind(L, s->let.var, NULL);
}

static void st(Lower *L, Stmt *s, LLVMValueRef guard)
{
    memo_reset(L);
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            st(L, s->seq.s[i], guard);
        return;
    case ST_LET: let(L, s, guard); return;
    case ST_FOR: loop(L, s, guard); return;
    case ST_STORE: store(L, s, guard); return;
    case ST_ALLOC: alloc(L, s, guard); return;
    case ST_IF: {
        LLVMValueRef c = as_bool(L, ex(L, s->ifs.cond, guard));
        if (is_vec(c)) {
            st(L, s->ifs.then, mask_and(L, guard, c));
            if (s->ifs.els)
                st(L, s->ifs.els, mask_and(L, guard, mask_not(L, c)));
        } else {
            branch(L, c, s->ifs.then, s->ifs.els, guard);
        }
        return;
    }
    case ST_BARRIER:
        if (!L->g->target->barrier)
            ir_panic(__FILE__, __LINE__, "barrier reached codegen for target %s",
                     L->g->target->name);
        IR_ASSERT(!L->lane);
        if (s->barrier.wait_async && L->g->target->async_wait)
            L->g->target->async_wait(L->g);
        L->g->target->barrier(L->g);
        return;
    }
}

/* ---- kernels and modules ---- */

void cg_emit_kernel(LLVMModuleRef mod, const CgTarget *t, const LoopProgram *lp, const Kernel *k,
                    const char *sym)
{
    IR_ASSERT(k->body->kind == ST_FOR && k->body->loop.fk == FK_BLOCK);
    LLVMContextRef cx = LLVMGetModuleContext(mod);
    TeProgram *te = lp->te;
    CgFn g = {
        .target = t, .lp = lp, .ec = te->ctx, .cx = cx, .mod = mod,
        .b = LLVMCreateBuilderInContext(cx),
        .i1 = LLVMInt1TypeInContext(cx), .i32 = LLVMInt32TypeInContext(cx),
        .i64 = LLVMInt64TypeInContext(cx), .f32 = LLVMFloatTypeInContext(cx),
        .ptr = LLVMPointerTypeInContext(cx, 0), .voidt = LLVMVoidTypeInContext(cx),
    };
    g.dimv = calloc((size_t)te->ndims + 1, sizeof *g.dimv);
    g.bufv = calloc((size_t)lp->nbuffers + 1, sizeof *g.bufv);
    unsigned char *use = calloc((size_t)lp->nbuffers + 1, 1);
    if (!use)
        ir_panic(__FILE__, __LINE__, "out of memory");
    cg_kernel_uses(lp, k, use, NULL);
    g.use = use;
    bool narrow = t->index32 && cg_index32(lp, k);
    Lower L = {.g = &g, .nvars = ir_var_count(te->ctx), .ity = narrow ? g.i32 : g.i64,
               .out_id = lp->stages[k->stage].out->id};
    L.env = calloc((size_t)L.nvars + 1, sizeof *L.env);
    if (!g.dimv || !g.bufv || !L.env)
        ir_panic(__FILE__, __LINE__, "out of memory");
    g.priv = &L;
    t->kernel_begin(&g, k, sym);
    for (int i = 0; narrow && i < te->ndims; i++)
        g.dimv[i] = LLVMBuildTrunc(g.b, g.dimv[i], g.i32, te->dims[i]->name);
    if (lp->index_error)
        L.sites = ir_check_sites(k, L.nvars, &L.nsites);
    st(&L, k->body, NULL);
    t->kernel_end(&g);
    LLVMDisposeBuilder(g.b);
    free(g.dimv);
    free(g.bufv);
    free(use);
    free(L.env);
    free(L.bufs);
    free(L.vlets);
    free(L.memo);
    free(L.sites);
}
