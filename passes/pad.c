/* pad: local padding. Every global load whose indices interval analysis
 * cannot prove in bounds becomes a guarded load that reads zero outside;
 * every global store that cannot be proven in bounds is wrapped in a guard.
 * The compute between them (register tiles, shared tiles) has no guards.
 *
 * requires: tiled kernels (any loop IR works).
 * ensures:  no global access can leave its tensor, for every size the
 *           program accepts (facts are taken under RANGE_OPEN, so sizes
 *           above the declared range stay correct). Guards that are
 *           provably true are never emitted: a 768-wide axis with a 128
 *           tile has none.
 */
#include "dietcode/passes.h"

typedef struct Pad {
    ExprCtx *c;
    Arena *a;
} Pad;

static bool in_bounds(ExprCtx *c, Expr *idx, Expr *ext)
{
    return ir_prove_in_bounds(c, idx, ext, RANGE_OPEN, NULL);
}

static Expr *pad_load(ExprCtx *c, Expr *e, void *ud)
{
    (void)ud;
    if (e->kind != EX_LOAD || e->load.padded || e->load.t->scope != MS_GLOBAL)
        return e;
    for (int i = 0; i < e->load.n; i++)
        if (!in_bounds(c, e->load.idx[i], e->load.t->shape[i]))
            return ir_load(c, e->load.t, e->load.n, e->load.idx, true);
    return e;
}

static Expr *pad_expr(Expr *e, void *ud)
{
    Pad *p = ud;
    return ir_rewrite(p->c, e, pad_load, NULL);
}

static void guard_store(Stmt *s, void *ud)
{
    Pad *p = ud;
    ExprCtx *c = p->c;
    if (s->kind != ST_STORE || s->store.buf->scope != MS_GLOBAL)
        return;
    Expr *cond = NULL;
    for (int i = 0; i < s->store.n; i++) {
        Expr *idx = s->store.idx[i], *ext = s->store.buf->shape[i];
        if (in_bounds(c, idx, ext))
            continue;
        Expr *x = ir_binop(c, EX_LT, idx, ext);
        if (!ir_prove_nonneg(c, idx, RANGE_OPEN))
            x = ir_binop(c, EX_AND, ir_binop(c, EX_LE, ir_int(c, 0), idx), x);
        cond = cond ? ir_binop(c, EX_AND, cond, x) : x;
    }
    if (cond) {
        Stmt *inner = IR_NEW(p->a, Stmt);
        *inner = *s;
        *s = *ir_if(p->a, cond, inner, NULL);
    }
}

void pass_pad(LoopProgram *lp)
{
    Pad p = {lp->te->ctx, lp->te->arena};
    for (int i = 0; i < lp->nkernels; i++) {
        Kernel *k = lp->kernels[i];
        ir_stmt_map_exprs(k->body, pad_expr, &p);
        ir_stmt_visit(k->body, guard_store, &p);
    }
}
