/* edge: on the CPU, a thread whose register tile reaches past the output's
 * edge runs the reduction for the points inside only.
 *
 * requires: vectorize's loop kinds; tile's handles (the register-tile
 *           loops, the reduction's ko and ki); pad's guarded stores.
 * ensures:  along one axis a (edge_axis), the reduction's outermost
 *           loop inside each thread loop becomes
 *
 *             if (tile[a] <= left)        the loop as it was
 *             else if (tile[a]-1 <= left) a copy with r_a in 0..tile[a]-1
 *             ...
 *             else                        a copy with r_a in 0..1
 *
 *           where left = extent - the thread's first point along a (at
 *           least 1: bind skips a thread with none, tile's k->live).
 *           Every copy keeps the loop kinds, so its register tile is as
 *           unrolled as the whole one, only shorter. The accumulators'
 *           init, the fold of their lanes and the stores stay whole: the
 *           points past left keep the identity init stored, and pad's
 *           guards never store them.
 *
 * Local padding computes a whole tile at the edge: at T = 9 with tiles of
 * 5 rows, 10 rows for 9; with the copies, 9. The GPU keeps the padding
 * (its threads run side by side: a short tile would only idle lanes of a
 * warp).
 * breaks:   Kernel.ko_loop (NULL: the chunk loop is copied). The copies
 *           share the accumulators and the other loops' variables (each
 *           copy's loops are siblings of the others').
 */
#include "dietcode/passes.h"

/* The axis along which a kernel of mk computing out gets its copies (-1:
 * none): the one with the longest register tile of 2 .. MK_MAX_EDGE_TILE
 * points (not vector lanes) whose extent may end inside a tile. */
static int edge_axis(const MicroKernel *mk, const Tensor *out, const TargetInfo *ti)
{
    if (ti->kind != PT_CPU || mk->strided)
        return -1;
    int best = -1;
    for (int a = 0; a < out->rank; a++) {
        int64_t t = mk->tile[a], e;
        if (t < 2 || t > MK_MAX_EDGE_TILE)
            continue;
        if (a == out->rank - 1 && mk->vaxis == MK_VEC_SPATIAL && mk->vec > 1)
            continue; /* its points are vector lanes */
        if (ir_is_const(out->shape[a], &e) && e % t == 0)
            continue; /* every tile whole */
        if (best < 0 || t > mk->tile[best])
            best = a;
    }
    return best;
}

typedef struct Edge {
    ExprCtx *c;
    Var *from, *to;
} Edge;

static Expr *retarget_expr(Expr *e, void *ud)
{
    Edge *g = ud;
    return ir_subst(g->c, e, g->from, ir_varref(g->c, g->to));
}

/* A loop over from becomes a loop over to (retarget_expr does its uses). */
static void retarget_loop(Stmt *s, void *ud)
{
    const Edge *g = ud;
    if (s->kind == ST_FOR && s->loop.var == g->from)
        s->loop.var = g->to;
}

static bool loops_over(const Stmt *s, void *ud)
{
    return s->kind == ST_FOR && s->loop.var == ud;
}

/* The store the kernel's output gets along axis a, its index there using
 * r (found: set, and the search stops). */
typedef struct OutStore {
    const Tensor *out;
    int a;
    const Var *r;
    const Stmt *found;
} OutStore;

static bool is_out_store(const Stmt *s, void *ud)
{
    OutStore *o = ud;
    if (s->kind != ST_STORE || s->store.buf != o->out || s->store.n != o->out->rank ||
        !ir_expr_uses_var(s->store.idx[o->a], o->r))
        return false;
    o->found = s;
    return true;
}

typedef struct Versions {
    ExprCtx *c;
    Arena *a;
    Var *r;
    int tile;
    Expr *left;
} Versions;

/* s, or if (tile <= left) s else if (tile-1 <= left) s with r in
 * 0..tile-1 else .. else s with r in 0..1 */
static Stmt *versions(const Versions *v, Stmt *s)
{
    Stmt *chain = NULL;
    for (int m = 1; m < v->tile; m++) {
        Stmt *copy = ir_stmt_clone(v->a, s);
        Edge g = {v->c, v->r, ir_var(v->c, v->r->name, VK_LOOP, ir_int(v->c, m))};
        ir_stmt_map_exprs(copy, retarget_expr, &g);
        ir_stmt_visit(copy, retarget_loop, &g);
        chain = chain ? ir_if(v->a, ir_binop(v->c, EX_LE, ir_int(v->c, m), v->left), copy, chain)
                      : copy;
    }
    return ir_if(v->a, ir_binop(v->c, EX_LE, ir_int(v->c, v->tile), v->left), s, chain);
}

/* The reduction's outermost loop (over ko, or ki without chunks) inside
 * each thread loop gets its versions: the loop over the chunks when the
 * thread runs them all, the loop within a chunk when staging put the chunk
 * loop around the threads (bind split the thread's work at its barriers).
 * The accumulators' init, the fold and the stores stay whole: the rows
 * past left keep the identity and their stores are guarded (pad), a few
 * vector operations, where copies of them would be most of each copy's
 * code. A kernel without the single-reduction form gets none (it has no
 * ko or ki): an elementwise one's guard already skips a point's work past
 * the edge, and copies of its tile loops took the whole encoder's object
 * from 5.7 s to 6.3 s of compile time (4.2 s with no copies at all); one
 * with several reductions a point keeps computing its padded points. */
static void version_reduction(const Versions *v, const Kernel *k, Stmt *s, bool in_thread)
{
    switch (s->kind) {
    case ST_FOR:
        if (in_thread && (s->loop.var == k->ko || s->loop.var == k->ki)) {
            if (ir_stmt_any(s, loops_over, v->r))
                *s = *versions(v, ir_stmt_clone(v->a, s));
            return;
        }
        version_reduction(v, k, s->loop.body, in_thread || s->loop.fk == FK_THREAD);
        return;
    case ST_LET: version_reduction(v, k, s->let.body, in_thread); return;
    case ST_ALLOC: version_reduction(v, k, s->alloc.body, in_thread); return;
    case ST_IF:
        version_reduction(v, k, s->ifs.then, in_thread);
        if (s->ifs.els)
            version_reduction(v, k, s->ifs.els, in_thread);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            version_reduction(v, k, s->seq.s[i], in_thread);
        return;
    case ST_STORE: case ST_BARRIER: return;
    }
}

static void edge_kernel(Kernel *k, const TargetInfo *ti, ExprCtx *c, Arena *arena)
{
    int a = k->nspatial == k->out->rank ? edge_axis(&k->mk, k->out, ti) : -1;
    Var *r = a >= 0 ? k->rvar[a] : NULL;
    OutStore o = {k->out, a, r, NULL};
    if (!r || !ir_stmt_any(k->body, is_out_store, &o))
        return;
    const Stmt *st = o.found;
    /* the point along a is first + r: the tile's points are consecutive */
    Expr *idx = st->store.idx[a];
    Expr *first = ir_simplify(c, ir_subst(c, idx, r, ir_int(c, 0)));
    int64_t step;
    if (!ir_is_const(ir_simplify(c, ir_binop(c, EX_SUB, ir_subst(c, idx, r, ir_int(c, 1)), first)),
                     &step) ||
        step != 1)
        return;
    Versions v = {c, arena, r, k->mk.tile[a],
                  ir_simplify(c, ir_binop(c, EX_SUB, k->out->shape[a], first))};
    version_reduction(&v, k, k->body, false);
    k->ko_loop = NULL; /* under the versions' if now, and copied */
}

void pass_edge(LoopProgram *lp, const TargetInfo *ti)
{
    for (int i = 0; i < lp->nkernels; i++)
        edge_kernel(lp->kernels[i], ti, lp->te->ctx, lp->te->arena);
}
