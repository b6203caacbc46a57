/* simplify: fold every expression and drop what became trivial.
 *
 * requires: any loop IR.
 * ensures:  expressions in canonical form; guards proven true are gone
 *           and guards proven false take their else branch; serial,
 *           unrolled and vectorized loops of extent 1 and lets bound to
 *           constants are substituted away. Block and thread loops stay,
 *           since they define the kernel's launch shape.
 */
#include "dietcode/passes.h"

typedef struct Simp {
    ExprCtx *c;
    Arena *a;
} Simp;

static Expr *simp_expr(Expr *e, void *ud)
{
    Simp *s = ud;
    return ir_simplify(s->c, e);
}

typedef struct Bind {
    ExprCtx *c;
    Var *v;
    Expr *by;
} Bind;

static Expr *bind_expr(Expr *e, void *ud)
{
    Bind *b = ud;
    return ir_simplify(b->c, ir_subst(b->c, e, b->v, b->by));
}

static Stmt *substitute(Simp *s, Stmt *body, Var *v, Expr *by)
{
    Bind b = {s->c, v, by};
    ir_stmt_map_exprs(body, bind_expr, &b);
    return body;
}

static Stmt *simp_stmt(Simp *s, Stmt *st)
{
    int64_t v;
    switch (st->kind) {
    case ST_FOR:
        st->loop.body = simp_stmt(s, st->loop.body);
        if (st->loop.fk != FK_BLOCK && st->loop.fk != FK_THREAD &&
            ir_is_const(st->loop.var->extent, &v)) {
            if (v <= 0)
                return ir_seq(s->a, 0, NULL);
            if (v == 1)
                return simp_stmt(s, substitute(s, st->loop.body, st->loop.var, ir_int(s->c, 0)));
        }
        return st;
    case ST_LET:
        st->let.value = ir_simplify(s->c, st->let.value);
        if (ir_is_const(st->let.value, &v))
            return simp_stmt(s, substitute(s, st->let.body, st->let.var, st->let.value));
        st->let.body = simp_stmt(s, st->let.body);
        return st;
    case ST_IF:
        st->ifs.cond = ir_simplify(s->c, st->ifs.cond);
        if (ir_is_const(st->ifs.cond, &v)) {
            Stmt *taken = v ? st->ifs.then : st->ifs.els;
            return taken ? simp_stmt(s, taken) : ir_seq(s->a, 0, NULL);
        }
        st->ifs.then = simp_stmt(s, st->ifs.then);
        if (st->ifs.els)
            st->ifs.els = simp_stmt(s, st->ifs.els);
        return st;
    case ST_STORE:
        ir_stmt_map_exprs(st, simp_expr, s);
        return st;
    case ST_ALLOC:
        st->alloc.body = simp_stmt(s, st->alloc.body);
        return st;
    case ST_SEQ:
        for (int i = 0; i < st->seq.n; i++)
            st->seq.s[i] = simp_stmt(s, st->seq.s[i]);
        return ir_seq(s->a, st->seq.n, st->seq.s);
    case ST_BARRIER:
        return st;
    }
    IR_UNREACHABLE();
}

void pass_simplify(LoopProgram *lp)
{
    Simp s = {lp->te->ctx, lp->te->arena};
    for (int i = 0; i < lp->nkernels; i++)
        lp->kernels[i]->body = simp_stmt(&s, lp->kernels[i]->body);
}
