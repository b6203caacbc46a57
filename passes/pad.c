/* pad: local padding. Every global load whose indices interval analysis
 * cannot prove in bounds becomes a guarded load that reads zero outside;
 * every global store that cannot be proven in bounds is wrapped in a guard.
 * The compute between them (register tiles, shared tiles) has no guards.
 * An index that depends on the output point alone (its block, thread and
 * tile positions and the dims) leaves its extent only for points whose
 * results the guarded stores drop: it is clamped to the last element
 * instead (min(idx, extent - 1)), which costs no mask.
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
    /* the kernel's output-point positions: block, thread and register-tile
     * indices of its spatial axes */
    int npos;
    const Var *pos[4 * MK_MAX_AXES];
} Pad;

static bool in_bounds(ExprCtx *c, Expr *idx, Expr *ext)
{
    return ir_prove_in_bounds(c, idx, ext, RANGE_OPEN, NULL);
}

typedef struct Only {
    const Pad *p;
    bool ok;
} Only;

static void only_positions(Expr *e, void *ud)
{
    Only *o = ud;
    if (e->kind != EX_VAR || e->var->kind == VK_DIM)
        return;
    bool found = false;
    for (int i = 0; i < o->p->npos && !found; i++)
        found = o->p->pos[i] == e->var;
    o->ok &= found;
}

/* An index that is a function of the output point alone (and the dims):
 * past its extent only for points past the output's edge, whose results
 * are never stored. */
static bool of_the_point(const Pad *p, Expr *idx)
{
    Only o = {p, true};
    ir_expr_visit(idx, only_positions, &o);
    return o.ok;
}

static Expr *pad_load(ExprCtx *c, Expr *e, void *ud)
{
    Pad *p = ud;
    if (e->kind != EX_LOAD || e->load.padded || e->load.t->scope != MS_GLOBAL)
        return e;
    Expr *idx[MK_MAX_AXES + 8];
    bool padded = false, clamped = false;
    IR_ASSERT(e->load.n <= MK_MAX_AXES + 8);
    for (int i = 0; i < e->load.n; i++) {
        idx[i] = e->load.idx[i];
        Expr *ext = e->load.t->shape[i];
        if (in_bounds(c, idx[i], ext))
            continue;
        if (of_the_point(p, idx[i]) && ir_prove_nonneg(c, idx[i], RANGE_OPEN)) {
            /* any element serves a point whose result is dropped: the last */
            idx[i] = ir_binop(c, EX_MIN, idx[i], ir_binop(c, EX_SUB, ext, ir_int(c, 1)));
            clamped = true;
        } else {
            padded = true;
        }
    }
    if (!padded && !clamped)
        return e;
    return ir_load(c, e->load.t, e->load.n, idx, padded);
}

static Expr *pad_expr(Expr *e, void *ud)
{
    Pad *p = ud;
    return ir_rewrite(p->c, e, pad_load, p);
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

/* The lets under the block loop (b_a) and the thread loop (t_a, but not a
 * thread's place along the reduction), and the register-tile loops. */
static void collect_positions(Pad *p, const Kernel *k)
{
    for (const Stmt *s = k->body; s->kind == ST_FOR || s->kind == ST_LET;
         s = s->kind == ST_FOR ? s->loop.body : s->let.body)
        if (s->kind == ST_LET && s->let.var != k->rlane && p->npos < 4 * MK_MAX_AXES)
            p->pos[p->npos++] = s->let.var;
    /* not the vector lanes of a spatial vector: lanes clamped to one
     * element are no longer consecutive, and their load a gather */
    int vaxis = k->mk.vaxis == MK_VEC_SPATIAL && k->mk.vec > 1 ? k->nspatial - 1 : -1;
    for (int a = 0; a < k->nspatial && p->npos + 2 <= 4 * MK_MAX_AXES; a++) {
        if (k->tvar[a])
            p->pos[p->npos++] = k->tvar[a];
        if (k->rvar[a] && a != vaxis)
            p->pos[p->npos++] = k->rvar[a];
    }
}

void pass_pad(LoopProgram *lp)
{
    for (int i = 0; i < lp->nkernels; i++) {
        Kernel *k = lp->kernels[i];
        Pad p = {lp->te->ctx, lp->te->arena, 0, {0}};
        collect_positions(&p, k);
        ir_stmt_map_exprs(k->body, pad_expr, &p);
        ir_stmt_visit(k->body, guard_store, &p);
    }
}
