/* inline: substitute elementwise intermediates into their consumers.
 *
 * requires: a checked TE program.
 * ensures:  bodies[t->id] of every computed tensor mentions only tensors
 *           with materialized[] set: inputs, outputs, and intermediates
 *           whose bodies contain a reduction (each becomes its own kernel).
 *
 * A load U[e0, e1] of an inlined U becomes U's body with U's axes replaced
 * by e0, e1. A padded load U?[...] becomes select(in bounds, body, 0), and
 * every load inside the substituted body is made padded too, because the
 * select's arms are both evaluated and the indices may be out of range.
 */
#include "dietcode/passes.h"

typedef struct Inliner {
    TeProgram *p;
    Expr **bodies;
    const bool *materialized;
} Inliner;

static Expr *inline_expr(Inliner *in, Expr *e);

static Expr *inline_load(Inliner *in, Expr *e)
{
    ExprCtx *c = in->p->ctx;
    Tensor *u = e->load.t;
    Expr *idx[MK_MAX_AXES];
    for (int i = 0; i < e->load.n; i++)
        idx[i] = inline_expr(in, e->load.idx[i]);
    if (in->materialized[u->id])
        return ir_load(c, u, e->load.n, idx, e->load.padded);
    Expr *body = ir_subst_many(c, in->bodies[u->id], u->rank, u->axes, idx);
    if (!e->load.padded)
        return body;
    Expr *ok = ir_bool(c, true);
    for (int i = 0; i < u->rank; i++) {
        Expr *lo = ir_binop(c, EX_LE, ir_int(c, 0), idx[i]);
        Expr *hi = ir_binop(c, EX_LT, idx[i], u->shape[i]);
        ok = ir_binop(c, EX_AND, ok, ir_binop(c, EX_AND, lo, hi));
    }
    return ir_select(c, ok, ir_pad_loads(c, body), ir_float(c, 0.0));
}

static Expr *inline_expr(Inliner *in, Expr *e)
{
    ExprCtx *c = in->p->ctx;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return e;
    case EX_LOAD: return inline_load(in, e);
    case EX_REDUCE:
        return ir_reduce(c, e->red.op, e->red.n, e->red.axes, inline_expr(in, e->red.body));
    case EX_CAST: return ir_cast(c, e->type, inline_expr(in, e->op.a));
    default:
        return ir_op(c, e->kind, inline_expr(in, e->op.a),
                     e->op.b ? inline_expr(in, e->op.b) : NULL,
                     e->op.c ? inline_expr(in, e->op.c) : NULL);
    }
}

static void find_reduce(Expr *e, void *ud)
{
    if (e->kind == EX_REDUCE)
        *(bool *)ud = true;
}

bool pass_stage_has_reduction(const Expr *body)
{
    bool found = false;
    ir_expr_visit((Expr *)body, find_reduce, &found);
    return found;
}

void pass_inline(TeProgram *p, Expr **bodies, bool *materialized)
{
    Inliner in = {p, bodies, materialized};
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT) {
            materialized[i] = true;
            continue;
        }
        bodies[i] = inline_expr(&in, t->body);
        materialized[i] = t->kind == TK_OUTPUT || pass_stage_has_reduction(bodies[i]);
    }
}
