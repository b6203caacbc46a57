/* stage: copy each block's operand tiles into a buffer shared by the
 * block's threads once per reduction chunk (GPU shared memory; on the CPU
 * the same copy is the packing step of a BLAS micro-kernel).
 *
 * requires: tile's structure (ko loop, thread and register-tile vars).
 * ensures:  for every global load in the reduction update whose indices
 *           are each block-uniform plus at most one of "a thread's tile
 *           position along spatial axis a" or "the position in the chunk",
 *           a shared buffer L_s[chunk, tile...] (chunk first, so a row of
 *           one chunk step is contiguous along the tile) filled at the top
 *           of each chunk by all threads together, between two barriers,
 *           reading the source in its own row-major order; the update
 *           reads L_s instead. Other loads (a convolution's halo) stay
 *           global.
 * breaks:   nothing; the copy's global loads are guarded later by pad.
 */
#include "dietcode/passes.h"

#include <string.h>

enum { MAX_STAGED = 8 };

typedef struct Staged {
    const Expr *orig;       /* the global load replaced */
    Tensor *buf;            /* its shared copy */
    Expr *repl;             /* the load of the copy in the update */
    Stmt *copy;             /* the cooperative copy */
} Staged;

typedef struct Stager {
    ExprCtx *c;
    Arena *a;
    Kernel *k;
    const TargetInfo *ti;
    Var *zero_vars[MK_MAX_AXES * 2 + 3];
    Expr *zeros[MK_MAX_AXES * 2 + 3];
    int nzero;
    Expr *tpos[MK_MAX_AXES]; /* t_a * tile_a + r_a */
    Expr *kpos;              /* position in the chunk */
    Staged st[MAX_STAGED];
    int nst;
    int bytes;
    Var *thread;
} Stager;

/* Which part of a tile an index moves along: -1 none, 0..n-1 spatial
 * axis, n the chunk; -2 when it is not stageable. */
static int classify(Stager *s, Expr *idx, Expr **base)
{
    ExprCtx *c = s->c;
    *base = ir_simplify(c, ir_subst_many(c, idx, s->nzero, s->zero_vars, s->zeros));
    Expr *delta = ir_simplify(c, ir_binop(c, EX_SUB, idx, *base));
    int64_t v;
    if (ir_is_const(delta, &v))
        return v == 0 ? -1 : -2;
    for (int a = 0; a < s->k->nspatial; a++)
        if (delta == s->tpos[a])
            return a;
    if (delta == s->kpos)
        return s->k->nspatial;
    return -2;
}

static Expr *C(Stager *s, int64_t v) { return ir_int(s->c, v); }

/* Builds the shared copy of one load, or returns false. */
static bool stage_load(Stager *s, Expr *ld)
{
    ExprCtx *c = s->c;
    Kernel *k = s->k;
    int n = k->nspatial, rank = ld->load.n;
    int which[MK_MAX_AXES + 8];
    Expr *base[MK_MAX_AXES + 8];
    bool used[MK_MAX_AXES + 1] = {0};
    if (rank > MK_MAX_AXES + 8)
        return false;
    for (int d = 0; d < rank; d++) {
        which[d] = classify(s, ld->load.idx[d], &base[d]);
        if (which[d] == -2 || (which[d] >= 0 && used[which[d]]))
            return false;
        if (which[d] >= 0)
            used[which[d]] = true;
    }
    /* shared layout: chunk first, then spatial axes in axis order */
    int64_t shape[MK_MAX_AXES + 1], ext[MK_MAX_AXES + 1];
    int layout_of[MK_MAX_AXES + 1], ns = 0;
    int order[MK_MAX_AXES + 1];
    order[ns++] = n;
    for (int a = 0; a < n; a++)
        order[ns++] = a;
    int nd = 0;
    int64_t elems = 1;
    for (int i = 0; i < ns; i++) {
        int part = order[i];
        if (!used[part])
            continue;
        ext[part] = part == n ? k->kc : (int64_t)k->mk.threads[part] * k->mk.tile[part];
        layout_of[part] = nd;
        shape[nd++] = ext[part];
        elems *= ext[part];
    }
    if (nd == 0 || s->bytes + elems * 4 > s->ti->shared_bytes)
        return false;
    char name[64];
    snprintf(name, sizeof name, "%s_s", ld->load.t->name);
    Tensor *buf = ir_buffer(s->a, name, MS_SHARED, c, nd, shape);

    /* the copy: thread Th takes elements Th, Th + NT, ... in source order */
    int64_t NT = k->nthreads, steps = (elems + NT - 1) / NT;
    Var *e = ir_var(c, "e", VK_LOOP, C(s, steps));
    Expr *flat = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, ir_varref(c, e), C(s, NT)),
                          ir_varref(c, s->thread));
    Expr *src[MK_MAX_AXES + 8], *dst[MK_MAX_AXES + 1];
    int64_t below = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (which[d] < 0) {
            src[d] = base[d];
            continue;
        }
        int part = which[d];
        Expr *q = below == 1 ? flat : ir_binop(c, EX_DIV, flat, C(s, below));
        Expr *coord = ir_simplify(c, ir_binop(c, EX_MOD, q, C(s, ext[part])));
        below *= ext[part];
        src[d] = ir_simplify(c, ir_binop(c, EX_ADD, base[d], coord));
        dst[layout_of[part]] = coord;
    }
    Stmt *copy = ir_store(s->a, buf, nd, dst, ir_load(c, ld->load.t, rank, src, ld->load.padded));
    if (steps * NT != elems)
        copy = ir_if(s->a, ir_binop(c, EX_LT, flat, C(s, elems)), copy, NULL);
    copy = ir_for(s->a, e, FK_SERIAL, copy);

    Expr *ridx[MK_MAX_AXES + 1];
    for (int part = 0; part <= n; part++)
        if (used[part])
            ridx[layout_of[part]] = part == n ? s->kpos : s->tpos[part];
    s->st[s->nst++] = (Staged){ld, buf, ir_load(c, buf, nd, ridx, false), copy};
    s->bytes += (int)(elems * 4);
    return true;
}

static void collect_loads(Expr *e, void *ud)
{
    Stager *s = ud;
    if (e->kind != EX_LOAD || e->load.t->scope != MS_GLOBAL || s->nst == MAX_STAGED)
        return;
    for (int i = 0; i < s->nst; i++)
        if (s->st[i].orig == e)
            return;
    stage_load(s, e);
}

static void scan_store(Stmt *st, void *ud)
{
    if (st->kind == ST_STORE)
        ir_expr_visit(st->store.value, collect_loads, ud);
}

static void replace_in_store(Stmt *st, void *ud)
{
    Stager *s = ud;
    if (st->kind != ST_STORE)
        return;
    for (int i = 0; i < s->nst; i++)
        st->store.value = ir_replace(s->c, st->store.value, s->st[i].orig, s->st[i].repl);
}

/* The FK_THREAD loop of a kernel (under the block loop and its lets). */
static Stmt *find_thread_loop(Stmt *s)
{
    while (s->kind == ST_FOR || s->kind == ST_LET) {
        if (s->kind == ST_FOR && s->loop.fk == FK_THREAD)
            return s;
        s = s->kind == ST_FOR ? s->loop.body : s->let.body;
    }
    return NULL;
}

static void stage_kernel(Kernel *k, ExprCtx *c, Arena *a, const TargetInfo *ti)
{
    if (!k->mk.stage || !k->ko_loop || k->kc <= 0)
        return;
    Stmt *th = find_thread_loop(k->body);
    if (!th)
        return;
    Stager s = {.c = c, .a = a, .k = k, .ti = ti, .thread = th->loop.var};
    int n = k->nspatial;
    for (int i = 0; i < n; i++) {
        s.zero_vars[s.nzero] = k->tvar[i];
        s.zeros[s.nzero++] = ir_int(c, 0);
        s.zero_vars[s.nzero] = k->rvar[i];
        s.zeros[s.nzero++] = ir_int(c, 0);
        s.tpos[i] = ir_simplify(c, ir_binop(c, EX_ADD,
                         ir_binop(c, EX_MUL, ir_varref(c, k->tvar[i]), ir_int(c, k->mk.tile[i])),
                         ir_varref(c, k->rvar[i])));
    }
    /* the update loop over the chunk */
    Stmt *ki_loop = k->ko_loop->loop.body;
    IR_ASSERT(ki_loop->kind == ST_FOR && ki_loop->loop.var == k->ki);
    s.zero_vars[s.nzero] = k->ki;
    s.zeros[s.nzero++] = ir_int(c, 0);
    /* the chunk position as tile wrote it: zero at ki = rlane = lane = 0 */
    if (k->rlane) {
        s.zero_vars[s.nzero] = k->rlane;
        s.zeros[s.nzero++] = ir_int(c, 0);
    }
    if (k->lane) {
        s.zero_vars[s.nzero] = k->lane;
        s.zeros[s.nzero++] = ir_int(c, 0);
    }
    s.kpos = k->kpos;

    ir_stmt_visit(ki_loop, scan_store, &s);
    if (s.nst == 0)
        return;
    ir_stmt_visit(ki_loop, replace_in_store, &s);

    Stmt *items[MAX_STAGED + 3];
    int ni = 0;
    items[ni++] = ir_barrier(a);
    for (int i = 0; i < s.nst; i++)
        items[ni++] = s.st[i].copy;
    items[ni++] = ir_barrier(a);
    items[ni++] = ki_loop;
    k->ko_loop->loop.body = ir_seq(a, ni, items);

    /* the shared buffers live around the thread loop */
    Stmt *inner = IR_NEW(a, Stmt);
    *inner = *th;
    Stmt *wrapped = inner;
    for (int i = s.nst - 1; i >= 0; i--)
        wrapped = ir_alloc(a, s.st[i].buf, wrapped);
    *th = *wrapped;
}

void pass_stage(LoopProgram *lp, const TargetInfo *ti)
{
    for (int i = 0; i < lp->nkernels; i++)
        stage_kernel(lp->kernels[i], lp->te->ctx, lp->te->arena, ti);
}
