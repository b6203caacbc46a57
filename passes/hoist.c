/* hoist: a gather's check out of the loops it does not depend on.
 *
 * requires: loop IR after edge.
 * ensures:  every checked index (EX_CHECK) that a statement evaluates
 *           whatever its expression's other values (not in a select's
 *           branch, nor the right side of && or ||) is bound by a let
 *           (a fresh variable over 0 .. n-1) as far out as its variables
 *           allow, but never above an if (whose guard may be what keeps
 *           its tensor's reads in bounds) nor above the kernel's thread
 *           loop (or, without one, its block loop); the statements below
 *           read the variable instead. A reduction over a gathered row
 *           then checks the row's index once, not once per step, and its
 *           error path leaves the loop.
 *
 * A checked index inside another one's operands is hoisted first, so the
 * outer one's let reads the inner one's variable.
 */
#include "dietcode/passes.h"

#include <stdlib.h>

enum { MAX_DEPTH = 256 };

/* Where a let may go: the statements whose body a hoisted let wraps, from
 * the outermost allowed (floor) to the current one. */
typedef struct Hoist {
    Arena *a;
    ExprCtx *c;
    int n, floor;
    Stmt **at[MAX_DEPTH]; /* the body of a loop or let, or a branch of an if */
    Var *var[MAX_DEPTH];  /* the variable it binds, or NULL (an if) */
    Stmt **tail[MAX_DEPTH]; /* where the next let hoisted to that place goes: after
                             * the ones hoisted there before, which it may read */
    int count;
    /* the lets hoisted so far and the places they are at */
    int nlets;
    Var *let[MAX_DEPTH];
    int let_at[MAX_DEPTH];
} Hoist;

typedef struct Find {
    Expr *check; /* the first eager check with no check in its operands */
} Find;

static void find_eager(Expr *e, Find *f)
{
    if (f->check)
        return;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return;
    case EX_LOAD:
        for (int i = 0; i < e->load.n && !f->check; i++)
            find_eager(e->load.idx[i], f);
        return;
    case EX_REDUCE: return;
    case EX_SELECT: find_eager(e->op.a, f); return;
    case EX_AND: case EX_OR: find_eager(e->op.a, f); return;
    case EX_CHECK:
        find_eager(e->op.a, f);
        if (!f->check)
            find_eager(e->op.b, f);
        if (!f->check)
            find_eager(e->op.c, f);
        if (!f->check)
            f->check = e;
        return;
    default:
        if (e->op.a) find_eager(e->op.a, f);
        if (e->op.b && !f->check) find_eager(e->op.b, f);
        if (e->op.c && !f->check) find_eager(e->op.c, f);
        return;
    }
}

static Expr *eager_check(Stmt *s)
{
    Find f = {NULL};
    switch (s->kind) {
    case ST_STORE:
        for (int i = 0; i < s->store.n && !f.check; i++)
            find_eager(s->store.idx[i], &f);
        if (!f.check)
            find_eager(s->store.value, &f);
        break;
    case ST_LET: find_eager(s->let.value, &f); break;
    case ST_IF: find_eager(s->ifs.cond, &f); break;
    default: break;
    }
    return f.check;
}

typedef struct Swap {
    ExprCtx *c;
    Expr *from, *to;
} Swap;

static Expr *swap_expr(Expr *e, void *ud)
{
    Swap *w = ud;
    return ir_replace(w->c, e, w->from, w->to);
}

static bool check_uses(Expr *check, const Var *v)
{
    return ir_expr_uses_var(check->op.a, v) || ir_expr_uses_var(check->op.b, v);
}

/* Binds check by a let at the innermost place among h's that binds one
 * of the variables of its index or extent (the floor when none does), and
 * reads the let's variable everywhere below. The element it reports (its
 * position operand) becomes the first of those the let serves: the
 * variables bound below the let at 0, an element that reads the same
 * index. */
static void bind_check(Hoist *h, Expr *check)
{
    int at = h->floor;
    for (int i = h->n - 1; i > h->floor; i--)
        if (h->var[i] && check_uses(check, h->var[i])) {
            at = i;
            break;
        }
    for (int i = 0; i < h->nlets; i++)
        if (h->let_at[i] < h->n && h->let_at[i] > at && check_uses(check, h->let[i]))
            at = h->let_at[i];
    for (int i = h->n - 1; i > at; i--)
        if (!h->var[i]) { /* an if: no higher */
            at = i;
            break;
        }
    char name[32];
    snprintf(name, sizeof name, "row%d", h->count++);
    Var *v = ir_var(h->c, name, VK_LOOP, check->op.b);
    Expr *pos = check->op.c;
    for (int i = at + 1; i < h->n; i++)
        if (h->var[i])
            pos = ir_subst(h->c, pos, h->var[i], ir_int(h->c, 0));
    Expr *first = ir_op(h->c, EX_CHECK, check->op.a, check->op.b, ir_simplify(h->c, pos));
    Swap w = {h->c, check, ir_varref(h->c, v)};
    ir_stmt_map_exprs(*h->at[at], swap_expr, &w);
    Stmt **tail = h->tail[at];
    *tail = ir_let(h->a, v, first, *tail);
    h->tail[at] = &(*tail)->let.body;
    if (h->nlets < MAX_DEPTH) {
        h->let[h->nlets] = v;
        h->let_at[h->nlets++] = at;
    }
}

static void walk(Hoist *h, Stmt *s);

/* Walks body as the place var (NULL: a branch) binds; fence: no let above it. */
static void inside(Hoist *h, Stmt **body, Var *var, bool fence)
{
    if (h->n == MAX_DEPTH)
        return;
    int saved = h->floor;
    h->at[h->n] = body;
    h->tail[h->n] = body;
    h->var[h->n] = var;
    if (fence)
        h->floor = h->n;
    h->n++;
    walk(h, *body);
    h->n--;
    h->floor = saved;
    while (h->nlets > 0 && h->let_at[h->nlets - 1] >= h->n) /* out of their scope */
        h->nlets--;
}

static void walk(Hoist *h, Stmt *s)
{
    Expr *check;
    /* a let's value, an if's guard and a store are evaluated where they are */
    if (s->kind == ST_LET || s->kind == ST_IF || s->kind == ST_STORE)
        while (h->floor >= 0 && (check = eager_check(s)))
            bind_check(h, check);
    switch (s->kind) {
    case ST_FOR: {
        bool fence = s->loop.fk == FK_THREAD || (s->loop.fk == FK_BLOCK && h->floor < 0);
        inside(h, &s->loop.body, s->loop.var, fence);
        return;
    }
    case ST_LET: inside(h, &s->let.body, s->let.var, false); return;
    case ST_IF:
        inside(h, &s->ifs.then, NULL, false);
        if (s->ifs.els)
            inside(h, &s->ifs.els, NULL, false);
        return;
    case ST_ALLOC: walk(h, s->alloc.body); return;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            walk(h, s->seq.s[i]);
        return;
    case ST_STORE: case ST_BARRIER: return;
    }
}

void pass_hoist(LoopProgram *lp)
{
    if (!lp->index_error)
        return;
    for (int i = 0; i < lp->nkernels; i++) {
        Hoist h = {.a = ir_ctx_arena(lp->te->ctx), .c = lp->te->ctx, .floor = -1};
        walk(&h, lp->kernels[i]->body);
    }
}
