/* bind: map the block and thread loops onto the target.
 *
 * requires: tiled kernels (one FK_BLOCK loop, at most one FK_THREAD loop).
 * ensures:  GPU: the kernel is left as it is, its thread count checked.
 *           CPU: no barrier remains. A thread loop whose body has barriers
 *           is split at them: each barrier-free region becomes its own loop
 *           over the threads, uniform loops and allocations around the
 *           barriers stay outside, and per-thread (local) buffers declared
 *           inside gain a leading thread dimension so their values survive
 *           from one region to the next. This is how one block of GPU
 *           threads runs correctly as plain loops on one core. A region
 *           that writes no shared buffer is skipped by a thread whose tile
 *           lies wholly past the output's edge (tile's k->live), so a
 *           block larger than the output wastes no work.
 */
#include "dietcode/passes.h"

#include <string.h>

typedef struct Fission {
    ExprCtx *c;
    Arena *a;
    Stmt *header;     /* the thread loop: FOR Th { LET t_a ... { body } } */
    Var *thread;
    Expr *live;       /* the thread's tile reaches into the output (NULL: always) */
} Fission;

static bool is_shared_store(const Stmt *s, void *ud)
{
    (void)ud;
    return s->kind == ST_STORE && s->store.buf->scope == MS_SHARED;
}

static bool stores_shared(const Stmt *s) { return ir_stmt_any(s, is_shared_store, NULL); }

/* A fresh copy of the thread loop and its lets around s. A region that
 * writes only the thread's own buffers and guarded outputs is skipped by
 * a thread whose tile lies wholly past the output's edge. */
static Stmt *wrap(Fission *f, Stmt *s)
{
    if (f->live && !stores_shared(s))
        s = ir_if(f->a, f->live, s, NULL);
    Stmt *lets[MK_MAX_AXES + 1];
    int n = 0;
    for (Stmt *x = f->header->loop.body; x->kind == ST_LET && n < MK_MAX_AXES; x = x->let.body)
        lets[n++] = x;
    for (int i = n - 1; i >= 0; i--)
        s = ir_let(f->a, lets[i]->let.var, lets[i]->let.value, s);
    return ir_for(f->a, f->thread, FK_THREAD, s);
}

typedef struct Promote {
    ExprCtx *c;
    Arena *a;
    Tensor *from, *to;
    Expr *th;
} Promote;

static Expr *promote_load(ExprCtx *c, Expr *e, void *ud)
{
    Promote *p = ud;
    if (e->kind != EX_LOAD || e->load.t != p->from)
        return e;
    Expr *idx[MK_MAX_AXES + 2];
    idx[0] = p->th;
    for (int i = 0; i < e->load.n; i++)
        idx[i + 1] = e->load.idx[i];
    return ir_load(c, p->to, e->load.n + 1, idx, false);
}

static Expr *promote_expr(Expr *e, void *ud)
{
    Promote *p = ud;
    return ir_rewrite(p->c, e, promote_load, p);
}

static void promote_store(Stmt *s, void *ud)
{
    Promote *p = ud;
    if (s->kind != ST_STORE || s->store.buf != p->from)
        return;
    Expr *idx[MK_MAX_AXES + 2];
    idx[0] = p->th;
    for (int i = 0; i < s->store.n; i++)
        idx[i + 1] = s->store.idx[i];
    *s = *ir_store(p->a, p->to, s->store.n + 1, idx, s->store.value);
}

static Stmt *distribute(Fission *f, Stmt *s);

/* True when s only copies global data into shared buffers, so its
 * iterations are independent of each other and of the thread order. */
static bool is_copy(const Stmt *s)
{
    switch (s->kind) {
    case ST_STORE: return s->store.buf->scope == MS_SHARED;
    case ST_IF: return is_copy(s->ifs.then) && (!s->ifs.els || is_copy(s->ifs.els));
    case ST_FOR:
        return (s->loop.fk == FK_SERIAL || s->loop.fk == FK_UNROLLED ||
                s->loop.fk == FK_VECTORIZED) && is_copy(s->loop.body);
    default: return false;
    }
}

static void find_local_load(Expr *e, void *ud)
{
    if (e->kind == EX_LOAD && e->load.t->scope != MS_GLOBAL)
        *(bool *)ud = true;
}

static bool reads_only_global(Stmt *s)
{
    bool local = false;
    switch (s->kind) {
    case ST_STORE:
        ir_expr_visit(s->store.value, find_local_load, &local);
        for (int i = 0; i < s->store.n; i++)
            ir_expr_visit(s->store.idx[i], find_local_load, &local);
        return !local;
    case ST_IF:
        ir_expr_visit(s->ifs.cond, find_local_load, &local);
        return !local && reads_only_global(s->ifs.then) &&
               (!s->ifs.els || reads_only_global(s->ifs.els));
    case ST_FOR: return reads_only_global(s->loop.body);
    default: return false;
    }
}

/* Ends a barrier-free run of statements: one loop over the threads. A
 * cooperative copy `for e: dst[e*NT + Th] = ...` runs with the thread loop
 * inside (for e: for Th), which walks the source in order: the same
 * iterations, independent of each other, in a cache-friendly order. */
static void flush(Fission *f, Stmt **group, int *ng, Stmt **out, int *no)
{
    bool copies = *ng > 0;
    for (int i = 0; i < *ng; i++)
        copies &= group[i]->kind == ST_FOR && is_copy(group[i]) && reads_only_global(group[i]);
    if (copies)
        for (int i = 0; i < *ng; i++)
            out[(*no)++] = ir_for(f->a, group[i]->loop.var, FK_SERIAL, wrap(f, group[i]->loop.body));
    else if (*ng)
        out[(*no)++] = wrap(f, ir_seq(f->a, *ng, group));
    *ng = 0;
}

static Stmt *distribute(Fission *f, Stmt *s)
{
    if (!ir_stmt_has_barrier(s))
        return wrap(f, s);
    switch (s->kind) {
    case ST_BARRIER: return ir_seq(f->a, 0, NULL);
    case ST_SEQ: {
        Stmt **out = IR_NEWN(f->a, Stmt *, s->seq.n), **group = IR_NEWN(f->a, Stmt *, s->seq.n);
        int no = 0, ng = 0;
        for (int i = 0; i < s->seq.n; i++) {
            Stmt *x = s->seq.s[i];
            if (!ir_stmt_has_barrier(x)) {
                group[ng++] = x;
                continue;
            }
            flush(f, group, &ng, out, &no);
            if (x->kind != ST_BARRIER)
                out[no++] = distribute(f, x);
        }
        flush(f, group, &ng, out, &no);
        return ir_seq(f->a, no, out);
    }
    case ST_FOR:
        IR_ASSERT(!ir_expr_uses_var(s->loop.var->extent, f->thread));
        return ir_for(f->a, s->loop.var, s->loop.fk, distribute(f, s->loop.body));
    case ST_IF:
        return ir_if(f->a, s->ifs.cond, distribute(f, s->ifs.then),
                     s->ifs.els ? distribute(f, s->ifs.els) : NULL);
    case ST_LET:
        return ir_let(f->a, s->let.var, s->let.value, distribute(f, s->let.body));
    case ST_ALLOC: {
        Tensor *b = s->alloc.buf;
        if (b->scope != MS_LOCAL)
            return ir_alloc(f->a, b, distribute(f, s->alloc.body));
        /* a per-thread buffer: one copy per thread, indexed by Th */
        int64_t shape[MK_MAX_AXES + 2];
        int64_t nt;
        IR_ASSERT(ir_is_const(f->thread->extent, &nt) && b->rank < MK_MAX_AXES + 1);
        shape[0] = nt;
        for (int i = 0; i < b->rank; i++)
            IR_ASSERT(ir_is_const(b->shape[i], &shape[i + 1]));
        Tensor *nb = ir_buffer(f->a, b->name, MS_LOCAL, f->c, b->rank + 1, shape);
        nb->dtype = b->dtype;
        Promote p = {f->c, f->a, b, nb, ir_varref(f->c, f->thread)};
        ir_stmt_map_exprs(s->alloc.body, promote_expr, &p);
        ir_stmt_visit(s->alloc.body, promote_store, &p);
        return ir_alloc(f->a, nb, distribute(f, s->alloc.body));
    }
    case ST_STORE: IR_UNREACHABLE();
    }
    IR_UNREACHABLE();
}

/* Replaces every thread loop under s whose body has barriers; in the
 * others, threads past the edge skip their work (live). */
static void split_thread_loops(ExprCtx *c, Arena *a, Stmt *s, Expr *live)
{
    switch (s->kind) {
    case ST_FOR:
        if (s->loop.fk == FK_THREAD && !ir_stmt_has_barrier(s->loop.body)) {
            Stmt *b = s->loop.body;
            while (b->kind == ST_LET)
                b = b->let.body;
            if (live && !stores_shared(b)) {
                Stmt *inner = IR_NEW(a, Stmt);
                *inner = *b;
                *b = *ir_if(a, live, inner, NULL);
            }
            return;
        }
        if (s->loop.fk == FK_THREAD) {
            Fission f = {c, a, s, s->loop.var, live};
            Stmt *body = s->loop.body;
            while (body->kind == ST_LET)
                body = body->let.body;
            Stmt *header = IR_NEW(a, Stmt);
            *header = *s;
            f.header = header;
            *s = *distribute(&f, body);
            return;
        }
        split_thread_loops(c, a, s->loop.body, live);
        return;
    case ST_LET: split_thread_loops(c, a, s->let.body, live); return;
    case ST_ALLOC: split_thread_loops(c, a, s->alloc.body, live); return;
    case ST_IF:
        split_thread_loops(c, a, s->ifs.then, live);
        if (s->ifs.els)
            split_thread_loops(c, a, s->ifs.els, live);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            split_thread_loops(c, a, s->seq.s[i], live);
        return;
    case ST_STORE: case ST_BARRIER: return;
    }
}

void pass_bind(LoopProgram *lp, const TargetInfo *ti)
{
    for (int i = 0; i < lp->nkernels; i++) {
        Kernel *k = lp->kernels[i];
        IR_ASSERT(k->nthreads <= ti->max_threads);
        if (ti->kind == PT_CPU)
            split_thread_loops(lp->te->ctx, lp->te->arena, k->body, k->live);
    }
}
