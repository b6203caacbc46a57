/* vectorize: unroll the register tiles and vectorise the innermost one;
 * unroll the loop over a reduction chunk by the micro-kernel's unroll.
 *
 * requires: tile's handles (register-tile variables, reduction lane).
 * ensures:  register-tile loops over straight-line code are FK_UNROLLED, so
 *           their values become constants and the accumulators registers
 *           (a per-point body with loops inside stays serial); with vectors along
 *           the innermost spatial axis, its tile loop r (tile = m * vec) is
 *           split into r = ro * vec + rl with ro unrolled and rl
 *           FK_VECTORIZED; with vectors along the reduction, the lane loop
 *           and the loops of tile's fold by halves are FK_VECTORIZED.
 *           Codegen turns vectorized loops into vector instructions. The
 *           chunk's loop ki (a constant trip count n) with unroll u > 1
 *           becomes ki = kio * u' + kiu with kiu
 *           FK_UNROLLED, u' the largest divisor of n up to u (the whole
 *           loop unrolled when u' = n); k->ki then names kio.
 */
#include "dietcode/passes.h"

enum { MAX_UNROLL = 64 };

typedef struct Vec {
    ExprCtx *c;
    Arena *a;
    Kernel *k;
} Vec;

typedef struct Split {
    ExprCtx *c;
    Var *from;
    Expr *to;
} Split;

static Expr *split_expr(Expr *e, void *ud)
{
    Split *s = ud;
    return ir_simplify(s->c, ir_subst(s->c, e, s->from, s->to));
}

/* Straight-line code: stores under lets and ifs. Lanes of a vector loop
 * run such a body together (a loop or an allocation inside would be shared
 * by the lanes); an unrolled loop may also contain loops that are already
 * unrolled or vectorized, since those become straight-line code too. */
static bool straight(const Stmt *s, bool unrolled_ok)
{
    switch (s->kind) {
    case ST_STORE: return true;
    case ST_LET: return straight(s->let.body, unrolled_ok);
    case ST_IF:
        return straight(s->ifs.then, unrolled_ok) && (!s->ifs.els || straight(s->ifs.els, unrolled_ok));
    case ST_FOR:
        return unrolled_ok && (s->loop.fk == FK_UNROLLED || s->loop.fk == FK_VECTORIZED) &&
               straight(s->loop.body, true);
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            if (!straight(s->seq.s[i], unrolled_ok))
                return false;
        return true;
    default: return false;
    }
}

static bool lanes_ok(const Stmt *s) { return straight(s, false); }

static bool is_tile_var(const Kernel *k, const Var *v, int *axis)
{
    for (int a = 0; a < k->nspatial; a++)
        if (k->rvar[a] == v) {
            *axis = a;
            return true;
        }
    return false;
}

static bool is_fold_var(const Kernel *k, const Var *v)
{
    for (int i = 0; i < MK_MAX_FOLDS; i++)
        if (v && k->fold[i] == v)
            return true;
    return false;
}

static void vec_stmt(Vec *v, Stmt *s)
{
    Kernel *k = v->k;
    int a;
    int64_t ext;
    switch (s->kind) {
    case ST_FOR:
        vec_stmt(v, s->loop.body);
        if (!ir_is_const(s->loop.var->extent, &ext))
            return;
        if (s->loop.var == k->lane || is_fold_var(k, s->loop.var)) {
            s->loop.fk = lanes_ok(s->loop.body) ? FK_VECTORIZED : FK_SERIAL;
            return;
        }
        if (!is_tile_var(k, s->loop.var, &a))
            return;
        if (a == k->nspatial - 1 && k->mk.vaxis == MK_VEC_SPATIAL && k->mk.vec > 1 &&
            ext % k->mk.vec == 0 && lanes_ok(s->loop.body)) {
            int64_t m = ext / k->mk.vec;
            if (m == 1) {
                s->loop.fk = FK_VECTORIZED;
                return;
            }
            Var *ro = ir_var(v->c, "ro", VK_LOOP, ir_int(v->c, m));
            Var *rl = ir_var(v->c, "rl", VK_LOOP, ir_int(v->c, k->mk.vec));
            Expr *to = ir_binop(v->c, EX_ADD,
                                ir_binop(v->c, EX_MUL, ir_varref(v->c, ro), ir_int(v->c, k->mk.vec)),
                                ir_varref(v->c, rl));
            Split sp = {v->c, s->loop.var, to};
            ir_stmt_map_exprs(s->loop.body, split_expr, &sp);
            Stmt *inner = ir_for(v->a, rl, FK_VECTORIZED, s->loop.body);
            *s = *ir_for(v->a, ro, m <= MAX_UNROLL ? FK_UNROLLED : FK_SERIAL, inner);
            return;
        }
        if (ext <= MAX_UNROLL && straight(s->loop.body, true))
            s->loop.fk = FK_UNROLLED;
        return;
    case ST_LET: vec_stmt(v, s->let.body); return;
    case ST_ALLOC: vec_stmt(v, s->alloc.body); return;
    case ST_IF:
        vec_stmt(v, s->ifs.then);
        if (s->ifs.els)
            vec_stmt(v, s->ifs.els);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            vec_stmt(v, s->seq.s[i]);
        return;
    case ST_STORE: case ST_BARRIER: return;
    }
}

/* The loop over variable var under s, or NULL. */
static Stmt *find_loop(Stmt *s, const Var *var)
{
    Stmt *r = NULL;
    switch (s->kind) {
    case ST_FOR:
        return s->loop.var == var ? s : find_loop(s->loop.body, var);
    case ST_LET: return find_loop(s->let.body, var);
    case ST_ALLOC: return find_loop(s->alloc.body, var);
    case ST_IF:
        r = find_loop(s->ifs.then, var);
        return r || !s->ifs.els ? r : find_loop(s->ifs.els, var);
    case ST_SEQ:
        for (int i = 0; i < s->seq.n && !r; i++)
            r = find_loop(s->seq.s[i], var);
        return r;
    case ST_STORE: case ST_BARRIER: return NULL;
    }
    return NULL;
}

static void unroll_chunk(Vec *v)
{
    Kernel *k = v->k;
    int64_t n;
    Stmt *s = k->ki && k->mk.unroll > 1 ? find_loop(k->body, k->ki) : NULL;
    if (!s || !ir_is_const(s->loop.var->extent, &n) || n < 2)
        return;
    int64_t u = k->mk.unroll < n ? k->mk.unroll : n;
    while (n % u != 0)
        u--;
    if (u < 2)
        return;
    if (u == n) {
        if (n <= MAX_UNROLL)
            s->loop.fk = FK_UNROLLED;
        return;
    }
    Var *kio = ir_var(v->c, "kio", VK_LOOP, ir_int(v->c, n / u));
    Var *kiu = ir_var(v->c, "kiu", VK_LOOP, ir_int(v->c, u));
    Expr *to = ir_binop(v->c, EX_ADD, ir_binop(v->c, EX_MUL, ir_varref(v->c, kio), ir_int(v->c, u)),
                        ir_varref(v->c, kiu));
    Split sp = {v->c, s->loop.var, to};
    ir_stmt_map_exprs(s->loop.body, split_expr, &sp);
    Stmt *inner = ir_for(v->a, kiu, FK_UNROLLED, s->loop.body);
    *s = *ir_for(v->a, kio, FK_SERIAL, inner);
    k->ki = kio; /* the chunk's loop is now kio's (edge copies it) */
}

void pass_vectorize(LoopProgram *lp, const TargetInfo *ti)
{
    (void)ti;
    for (int i = 0; i < lp->nkernels; i++) {
        Vec v = {lp->te->ctx, lp->te->arena, lp->kernels[i]};
        vec_stmt(&v, lp->kernels[i]->body);
        unroll_chunk(&v);
    }
}
