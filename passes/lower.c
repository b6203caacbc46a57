/* lower: canonical loop nests for every materialized computed tensor.
 *
 * requires: pass_inline's bodies.
 * ensures:  a stage per computed, materialized tensor, in definition
 *           order, with a kernel per variant of its schedule, each of the
 *           canonical form the tile pass recognises:
 *
 *   for i in 0..T serial:  for j in 0..N serial:        (spatial loops)
 *     alloc local acc_Y[1]                              (one per reduction)
 *       acc_Y[0] = identity
 *       for k in 0..K serial:
 *         acc_Y[0] = combine(acc_Y[0], body)
 *       Y[i, j] = epilogue(acc_Y[0])
 *
 * Every reduction in an expression, nested ones included, becomes such an
 * accumulator computed right before the statement that uses it, so any
 * valid program lowers, however its reductions are placed. The outer
 * loops are plain serial loops here; tile gives them their roles.
 */
#include "dietcode/passes.h"

#include <string.h>

typedef struct Lower {
    TeProgram *p;
    ExprCtx *c;
    Arena *a;
    int nacc;
} Lower;

typedef Stmt *(*Consume)(Lower *l, Expr *value, void *ud);

typedef struct Accum {
    Tensor *acc;
    ExprKind comb;
} Accum;

static Stmt *consume_accumulate(Lower *l, Expr *v, void *ud)
{
    Accum *ac = ud;
    Expr *zero = ir_int(l->c, 0);
    Expr *cur = ir_load(l->c, ac->acc, 1, &zero, false);
    return ir_store(l->a, ac->acc, 1, &zero, ir_binop(l->c, ac->comb, cur, v));
}

/* Emits the statements computing e's reductions, then consume(e'). */
static Stmt *emit_value(Lower *l, Expr *e, Consume consume, void *ud)
{
    Expr *r = ir_outer_reduce(e);
    if (!r)
        return consume(l, e, ud);
    ExprCtx *c = l->c;
    char name[32];
    snprintf(name, sizeof name, "acc%d", l->nacc++);
    int64_t one = 1;
    Tensor *acc = ir_buffer(l->a, name, MS_LOCAL, c, 1, &one);
    Expr *zero = ir_int(c, 0);
    Stmt *init = ir_store(l->a, acc, 1, &zero, ir_float(c, ir_reduce_identity(r->red.op)));

    /* the reduction's own loops, over fresh loop variables */
    Var *lv[MK_MAX_AXES + 8];
    Expr *lr[MK_MAX_AXES + 8];
    IR_ASSERT(r->red.n <= MK_MAX_AXES + 8);
    for (int i = 0; i < r->red.n; i++) {
        lv[i] = ir_var(c, r->red.axes[i]->name, VK_LOOP, r->red.axes[i]->extent);
        lr[i] = ir_varref(c, lv[i]);
    }
    Expr *body = ir_subst_many(c, r->red.body, r->red.n, r->red.axes, lr);
    if (body->type != DT_F32)
        body = ir_cast(c, DT_F32, body);
    Accum ac = {acc, ir_reduce_combiner(r->red.op)};
    Stmt *loop = emit_value(l, body, consume_accumulate, &ac);
    for (int i = r->red.n - 1; i >= 0; i--)
        loop = ir_for(l->a, lv[i], FK_SERIAL, loop);

    Expr *result = ir_load(c, acc, 1, &zero, false);
    if (r->type != DT_F32)
        result = ir_cast(c, r->type, result);
    Stmt *rest = emit_value(l, ir_replace(c, e, r, result), consume, ud);
    Stmt *items[3] = {init, loop, rest};
    return ir_alloc(l->a, acc, ir_seq(l->a, 3, items));
}

typedef struct Out {
    Tensor *t;
    Expr **idx;
} Out;

static Stmt *consume_store(Lower *l, Expr *v, void *ud)
{
    Out *o = ud;
    if (v->type != DT_F32)
        v = ir_cast(l->c, DT_F32, v);
    return ir_store(l->a, o->t, o->t->rank, o->idx, v);
}

/* Variant v of t's stage (a nest of its own, fresh variables and buffers):
 * PROG_T for variant 0, PROG_T_vV after it. */
static Kernel *lower_tensor(Lower *l, Tensor *t, Expr *body, const MicroKernel *mk, int v)
{
    ExprCtx *c = l->c;
    Var *lv[MK_MAX_AXES];
    Expr *idx[MK_MAX_AXES];
    for (int a = 0; a < t->rank; a++) {
        lv[a] = ir_var(c, t->axes[a]->name, VK_LOOP, t->shape[a]);
        idx[a] = ir_varref(c, lv[a]);
    }
    Out o = {t, idx};
    l->nacc = 0;
    Stmt *s = emit_value(l, ir_subst_many(c, body, t->rank, t->axes, idx), consume_store, &o);
    for (int a = t->rank - 1; a >= 0; a--)
        s = ir_for(l->a, lv[a], FK_SERIAL, s);
    char name[128];
    if (v)
        snprintf(name, sizeof name, "%s_%s_v%d", l->p->name, t->name, v);
    else
        snprintf(name, sizeof name, "%s_%s", l->p->name, t->name);
    Kernel *k = ir_kernel_new(l->a, name, t, s);
    k->mk = *mk;
    return k;
}

LoopProgram *pass_lower(TeProgram *p, Expr **bodies, const bool *materialized,
                        const StageSchedule *sched)
{
    Lower l = {p, p->ctx, p->arena, 0};
    LoopProgram *lp = ir_loop_program_new(p);
    memcpy(lp->materialized, materialized, sizeof(bool) * (size_t)p->ntensors);
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT || !materialized[i])
            continue;
        const StageSchedule *st = &sched[i];
        IR_ASSERT(st->nvariants >= 1);
        Kernel **ks = IR_NEWN(p->arena, Kernel *, st->nvariants);
        for (int v = 0; v < st->nvariants; v++)
            ks[v] = lower_tensor(&l, t, bodies[i], &st->variants[v], v);
        ir_loop_program_add_stage(lp, t, st->nvariants, ks, st->dispatch);
    }
    return lp;
}
