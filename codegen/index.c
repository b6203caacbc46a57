/* Whether a kernel's integers fit in 32 bits (GPU kernels then compute
 * them in i32: a 64-bit multiply or add is two or more instructions on a
 * GPU, and about a quarter of a kernel's non-FMA instructions are index
 * arithmetic). Not on the CPU: x86 addressing wants 64-bit offsets, and
 * an i32 offset (LLVM cannot see it never wraps) costs a sign extension
 * per access, two extra instructions per broadcast in the outer-product
 * kernel's hot loop; only its gathers would gain (one 16-lane vgatherdps
 * instead of two vgatherqps).
 *
 * The plan refuses every call in which some buffer (tensor or scratch) has
 * more than DCRT_MAX_ELEMENTS (2^31 - 2^20 - 1) elements. So when a buffer's extents never decrease
 * as a dim grows, the dim has a cap: the largest value at which that
 * buffer, with every other dim at its lowest, still fits. With every dim
 * in LO .. cap, interval analysis bounds each integer the kernel computes:
 * every index, guard, loop extent, let and integer value of its
 * expressions. If each one provably lies in the i32 range, the kernel may
 * compute all of them in i32 and gets the same values as in the 64 bits
 * the language specifies. (Flat offsets into a buffer are built by codegen
 * after this check: those of accesses in bounds are below the buffer's
 * element count, so they fit as well; an access out of bounds is masked,
 * its offset never dereferenced.)
 *
 * The caps enter the analysis through a copy of the kernel's variables:
 * each dim becomes LO + a variable of range 0 .. cap - LO, each loop or let
 * variable one whose extent is its own over the capped dims, the block
 * index one below INT32_MAX (the plan's limit on grids).
 */
#include "dietcode/codegen.h"

#include <stdlib.h>

typedef struct Capped {
    ExprCtx *c;
    Var **as;      /* per var id: its capped copy (NULL: not made yet) */
    int nvars;
    int64_t *cap;  /* per dim position */
    bool ok;
} Capped;

static Expr *capped(Capped *k, Expr *e);

static Var *capped_var(Capped *k, Var *v)
{
    if (v->id >= k->nvars)
        return NULL;
    if (k->as[v->id])
        return k->as[v->id];
    Expr *ext;
    if (v->kind == VK_DIM) /* dim = lo + this, 0 .. cap - lo */
        ext = ir_int(k->c, k->cap[v->pos] - v->lo + 1);
    else if (v->extent)
        ext = capped(k, v->extent);
    else
        return NULL;
    Var *n = ir_var(k->c, v->name, VK_LOOP, ext);
    k->as[v->id] = n;
    return n;
}

static Expr *rewrite_var(ExprCtx *c, Expr *e, void *ud)
{
    Capped *k = ud;
    if (e->kind != EX_VAR)
        return e;
    Var *n = capped_var(k, e->var);
    if (!n) {
        k->ok = false;
        return e;
    }
    if (e->var->kind == VK_DIM)
        return ir_binop(c, EX_ADD, ir_int(c, e->var->lo), ir_varref(c, n));
    return ir_varref(c, n);
}

static Expr *capped(Capped *k, Expr *e) { return ir_rewrite(k->c, e, rewrite_var, k); }

static bool fits(Capped *k, Expr *e)
{
    if (e->type != DT_I64)
        return true;
    Interval iv = ir_interval(k->c, capped(k, e), RANGE_OPEN);
    return k->ok && iv.lo >= INT32_MIN && iv.hi <= INT32_MAX;
}

static void check_sub(Expr *e, void *ud)
{
    Capped *k = ud;
    if (k->ok && !fits(k, e))
        k->ok = false;
}

static void check_expr(Capped *k, Expr *e)
{
    if (k->ok)
        ir_expr_visit(e, check_sub, k);
}

/* The factors of a product (the block loop's extent: the grid). */
static void check_factors(Capped *k, Expr *e)
{
    if (e->kind == EX_MUL && e->type == DT_I64) {
        check_factors(k, e->op.a);
        check_factors(k, e->op.b);
        return;
    }
    check_expr(k, e);
}

static void check_stmt(Stmt *s, void *ud)
{
    Capped *k = ud;
    switch (s->kind) {
    case ST_FOR:
        if (s->loop.fk != FK_BLOCK) /* the block loop: see cg_index32 */
            check_expr(k, s->loop.var->extent);
        break;
    case ST_LET: check_expr(k, s->let.value); break;
    case ST_IF: check_expr(k, s->ifs.cond); break;
    case ST_STORE:
        for (int i = 0; i < s->store.n; i++)
            check_expr(k, s->store.idx[i]);
        check_expr(k, s->store.value);
        break;
    default: break;
    }
}

/* Loads' indices are inside the expressions check_expr visits. */

/* The largest v in lo .. max at which buffer b, with every other dim at
 * its lowest, has at most DCRT_MAX_ELEMENTS elements (lo - 1 when none). */
static int64_t largest_fitting(const TeProgram *te, const Tensor *b, int d)
{
    int64_t *dims = calloc((size_t)te->ndims + 1, sizeof *dims);
    if (!dims)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < te->ndims; i++)
        dims[i] = te->dims[i]->lo;
    const Var *v = te->dims[d];
    int64_t lo = v->lo - 1, hi = v->max; /* fits(lo) holds by convention; find the last fit */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        dims[d] = mid;
        int64_t n = 1, e;
        bool ok = true;
        for (int j = 0; j < b->rank && ok; j++)
            ok = ir_eval_dims_checked(b->shape[j], dims, &e) && e >= 0 &&
                 !__builtin_mul_overflow(n, e, &n) && n <= DCRT_MAX_ELEMENTS;
        if (ok)
            lo = mid;
        else
            hi = mid - 1;
    }
    free(dims);
    return lo;
}

/* Every extent of b is non-decreasing in dim d, and some extent uses it. */
static bool grows_with(ExprCtx *c, const Tensor *b, const Var *d)
{
    bool uses = false;
    for (int j = 0; j < b->rank; j++) {
        Expr *e = b->shape[j];
        if (!ir_expr_uses_var(e, d))
            continue;
        uses = true;
        Expr *next = ir_subst(c, e, (Var *)d, ir_binop(c, EX_ADD, ir_varref(c, (Var *)d), ir_int(c, 1)));
        if (!ir_prove_nonneg(c, ir_simplify(c, ir_binop(c, EX_SUB, next, e)), RANGE_OPEN))
            return false;
    }
    return uses;
}

bool cg_index32(const LoopProgram *lp, const Kernel *k)
{
    const TeProgram *te = lp->te;
    ExprCtx *c = te->ctx;
    int64_t *cap = calloc((size_t)te->ndims + 1, sizeof *cap);
    if (!cap)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int d = 0; d < te->ndims; d++) {
        cap[d] = te->dims[d]->max;
        for (int i = 0; i < lp->nbuffers; i++)
            if (grows_with(c, lp->buffers[i], te->dims[d])) {
                int64_t v = largest_fitting(te, lp->buffers[i], d);
                if (v < cap[d])
                    cap[d] = v;
            }
        if (cap[d] < te->dims[d]->lo)
            cap[d] = te->dims[d]->lo; /* no call runs at all: any width will do */
    }
    int nvars = ir_var_count(c);
    Capped kc = {c, calloc((size_t)nvars + 1, sizeof(Var *)), nvars, cap, true};
    if (!kc.as)
        ir_panic(__FILE__, __LINE__, "out of memory");
    /* the grid: its factors (blocks per axis, each >= 1) are bounded by the
     * caps, and it and its partial products by the plan, which refuses
     * grids over INT32_MAX blocks; so the block index is below INT32_MAX */
    const Var *blk = k->body->loop.var;
    IR_ASSERT(k->body->kind == ST_FOR && k->body->loop.fk == FK_BLOCK && blk->id < nvars);
    check_factors(&kc, blk->extent);
    kc.as[blk->id] = ir_var(c, blk->name, VK_LOOP, ir_int(c, INT32_MAX));
    ir_stmt_visit(k->body, check_stmt, &kc);
    free(kc.as);
    free(cap);
    return kc.ok;
}
