/* Loop IR statements: constructors, in-place expression rewriting, cloning.
 * Statements are mutable trees in the program's arena; the expressions in
 * them are the shared, immutable Exprs. */
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

static Stmt *node(Arena *a, StmtKind k)
{
    Stmt *s = IR_NEW(a, Stmt);
    s->kind = k;
    return s;
}

Stmt *ir_for(Arena *a, Var *v, ForKind fk, Stmt *body)
{
    IR_ASSERT(v->extent && body);
    Stmt *s = node(a, ST_FOR);
    s->loop.var = v;
    s->loop.fk = fk;
    s->loop.body = body;
    return s;
}

Stmt *ir_let(Arena *a, Var *v, Expr *value, Stmt *body)
{
    Stmt *s = node(a, ST_LET);
    s->let.var = v;
    s->let.value = value;
    s->let.body = body;
    return s;
}

Stmt *ir_if(Arena *a, Expr *cond, Stmt *then, Stmt *els)
{
    Stmt *s = node(a, ST_IF);
    s->ifs.cond = cond;
    s->ifs.then = then;
    s->ifs.els = els;
    return s;
}

Stmt *ir_store(Arena *a, Tensor *buf, int n, Expr **idx, Expr *value)
{
    IR_ASSERT(n == buf->rank);
    Stmt *s = node(a, ST_STORE);
    s->store.buf = buf;
    s->store.n = n;
    s->store.idx = IR_NEWN(a, Expr *, n ? n : 1);
    if (n)
        memcpy(s->store.idx, idx, sizeof(Expr *) * (size_t)n);
    s->store.value = value;
    return s;
}

Stmt *ir_alloc(Arena *a, Tensor *buf, Stmt *body)
{
    Stmt *s = node(a, ST_ALLOC);
    s->alloc.buf = buf;
    s->alloc.body = body;
    return s;
}

Stmt *ir_barrier(Arena *a) { return node(a, ST_BARRIER); }

Stmt *ir_barrier_async(Arena *a)
{
    Stmt *s = node(a, ST_BARRIER);
    s->barrier.wait_async = true;
    return s;
}

Stmt *ir_seq(Arena *a, int n, Stmt **items)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (items[i])
            m += items[i]->kind == ST_SEQ ? items[i]->seq.n : 1;
    if (m == 1)
        for (int i = 0; i < n; i++)
            if (items[i] && items[i]->kind != ST_SEQ)
                return items[i];
    Stmt *s = node(a, ST_SEQ);
    s->seq.s = IR_NEWN(a, Stmt *, m ? m : 1);
    for (int i = 0; i < n; i++) {
        if (!items[i])
            continue;
        if (items[i]->kind == ST_SEQ)
            for (int j = 0; j < items[i]->seq.n; j++)
                s->seq.s[s->seq.n++] = items[i]->seq.s[j];
        else
            s->seq.s[s->seq.n++] = items[i];
    }
    return s;
}

Stmt *ir_seq2(Arena *a, Stmt *x, Stmt *y)
{
    Stmt *items[2] = {x, y};
    return ir_seq(a, 2, items);
}

Tensor *ir_buffer(Arena *a, const char *name, MemScope scope, ExprCtx *c, int rank,
                  const int64_t *shape)
{
    Tensor *t = IR_NEW(a, Tensor);
    t->name = ir_arena_strdup(a, name);
    t->id = -1;
    t->kind = TK_TEMP;
    t->dtype = DT_F32;
    t->scope = scope;
    t->rank = rank;
    t->shape = IR_NEWN(a, Expr *, rank ? rank : 1);
    for (int i = 0; i < rank; i++)
        t->shape[i] = ir_int(c, shape[i]);
    return t;
}

int64_t ir_buffer_words(const Tensor *t)
{
    int64_t n = 1, d;
    for (int i = 0; i < t->rank; i++)
        n *= ir_is_const(t->shape[i], &d) ? d : 1;
    return (n * ir_dtype_size(t->dtype) + 3) / 4;
}

const char *ir_for_kind_name(ForKind fk)
{
    switch (fk) {
    case FK_SERIAL: return "serial";
    case FK_UNROLLED: return "unrolled";
    case FK_VECTORIZED: return "vectorized";
    case FK_BLOCK: return "block.x";
    case FK_THREAD: return "thread.x";
    }
    IR_UNREACHABLE();
}

void ir_stmt_visit(Stmt *s, void (*f)(Stmt *s, void *ud), void *ud)
{
    switch (s->kind) {
    case ST_FOR: ir_stmt_visit(s->loop.body, f, ud); break;
    case ST_LET: ir_stmt_visit(s->let.body, f, ud); break;
    case ST_IF:
        ir_stmt_visit(s->ifs.then, f, ud);
        if (s->ifs.els)
            ir_stmt_visit(s->ifs.els, f, ud);
        break;
    case ST_ALLOC: ir_stmt_visit(s->alloc.body, f, ud); break;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            ir_stmt_visit(s->seq.s[i], f, ud);
        break;
    case ST_STORE: case ST_BARRIER: break;
    }
    f(s, ud);
}

void ir_stmt_map_exprs(Stmt *s, Expr *(*f)(Expr *e, void *ud), void *ud)
{
    switch (s->kind) {
    case ST_FOR: ir_stmt_map_exprs(s->loop.body, f, ud); break;
    case ST_LET:
        s->let.value = f(s->let.value, ud);
        ir_stmt_map_exprs(s->let.body, f, ud);
        break;
    case ST_IF:
        s->ifs.cond = f(s->ifs.cond, ud);
        ir_stmt_map_exprs(s->ifs.then, f, ud);
        if (s->ifs.els)
            ir_stmt_map_exprs(s->ifs.els, f, ud);
        break;
    case ST_STORE:
        for (int i = 0; i < s->store.n; i++)
            s->store.idx[i] = f(s->store.idx[i], ud);
        s->store.value = f(s->store.value, ud);
        break;
    case ST_ALLOC: ir_stmt_map_exprs(s->alloc.body, f, ud); break;
    case ST_BARRIER: break;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            ir_stmt_map_exprs(s->seq.s[i], f, ud);
        break;
    }
}

Stmt *ir_stmt_clone(Arena *a, const Stmt *s)
{
    Stmt *c = IR_NEW(a, Stmt);
    *c = *s;
    switch (s->kind) {
    case ST_FOR: c->loop.body = ir_stmt_clone(a, s->loop.body); break;
    case ST_LET: c->let.body = ir_stmt_clone(a, s->let.body); break;
    case ST_IF:
        c->ifs.then = ir_stmt_clone(a, s->ifs.then);
        c->ifs.els = s->ifs.els ? ir_stmt_clone(a, s->ifs.els) : NULL;
        break;
    case ST_STORE:
        c->store.idx = IR_NEWN(a, Expr *, s->store.n ? s->store.n : 1);
        memcpy(c->store.idx, s->store.idx, sizeof(Expr *) * (size_t)s->store.n);
        break;
    case ST_ALLOC: c->alloc.body = ir_stmt_clone(a, s->alloc.body); break;
    case ST_BARRIER: break;
    case ST_SEQ:
        c->seq.s = IR_NEWN(a, Stmt *, s->seq.n ? s->seq.n : 1);
        for (int i = 0; i < s->seq.n; i++)
            c->seq.s[i] = ir_stmt_clone(a, s->seq.s[i]);
        break;
    }
    return c;
}

bool ir_stmt_any(const Stmt *s, bool (*pred)(const Stmt *s, void *ud), void *ud)
{
    if (pred(s, ud))
        return true;
    switch (s->kind) {
    case ST_FOR: return ir_stmt_any(s->loop.body, pred, ud);
    case ST_LET: return ir_stmt_any(s->let.body, pred, ud);
    case ST_IF:
        return ir_stmt_any(s->ifs.then, pred, ud) || (s->ifs.els && ir_stmt_any(s->ifs.els, pred, ud));
    case ST_ALLOC: return ir_stmt_any(s->alloc.body, pred, ud);
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            if (ir_stmt_any(s->seq.s[i], pred, ud))
                return true;
        return false;
    case ST_STORE: case ST_BARRIER: return false;
    }
    IR_UNREACHABLE();
}

static bool is_barrier(const Stmt *s, void *ud)
{
    (void)ud;
    return s->kind == ST_BARRIER;
}

bool ir_stmt_has_barrier(const Stmt *s) { return ir_stmt_any(s, is_barrier, NULL); }

Kernel *ir_kernel_new(Arena *a, const char *name, const Tensor *out, Stmt *body)
{
    Kernel *k = IR_NEW(a, Kernel);
    k->name = ir_arena_strdup(a, name);
    k->out = k->domain = out;
    k->body = body;
    k->nthreads = 1;
    return k;
}

LoopProgram *ir_loop_program_new(TeProgram *te)
{
    LoopProgram *lp = IR_NEW(te->arena, LoopProgram);
    lp->te = te;
    lp->nbuffers = te->ntensors;
    lp->buffers = IR_NEWN(te->arena, Tensor *, te->ntensors ? te->ntensors : 1);
    if (te->ntensors)
        memcpy(lp->buffers, te->tensors, sizeof *lp->buffers * (size_t)te->ntensors);
    lp->materialized = IR_NEWN(te->arena, bool, te->ntensors ? te->ntensors : 1);
    return lp;
}

/* Copies n elements of size sz into a new arena array of room for n + more. */
static void *grow(Arena *a, const void *old, size_t n, size_t more, size_t sz)
{
    void *p = ir_arena_alloc(a, (n + more) * sz);
    if (n)
        memcpy(p, old, n * sz);
    return p;
}

Tensor *ir_global_tensor(Arena *a, const char *name, int rank, Expr *const *shape)
{
    Tensor *t = IR_NEW(a, Tensor);
    t->name = ir_arena_strdup(a, name);
    t->id = -1;
    t->kind = TK_TEMP;
    t->dtype = DT_F32;
    t->rank = rank;
    t->shape = IR_NEWN(a, Expr *, rank ? rank : 1);
    if (rank)
        memcpy(t->shape, shape, sizeof *shape * (size_t)rank);
    t->scope = MS_GLOBAL;
    return t;
}

Tensor *ir_loop_program_add_scratch(LoopProgram *lp, const char *name, int rank, Expr **shape)
{
    Arena *a = lp->te->arena;
    Tensor *t = ir_global_tensor(a, name, rank, shape);
    t->id = lp->nbuffers;
    size_t n = (size_t)lp->nbuffers;
    lp->buffers = grow(a, lp->buffers, n, 1, sizeof *lp->buffers);
    lp->materialized = grow(a, lp->materialized, n, 1, sizeof *lp->materialized);
    lp->buffers[n] = t;
    lp->materialized[n] = true;
    lp->nbuffers++;
    return t;
}

int ir_loop_program_add_stage(LoopProgram *lp, const Tensor *out, const Dispatch *d)
{
    lp->stages = grow(lp->te->arena, lp->stages, (size_t)lp->nstages, 1, sizeof *lp->stages);
    lp->stages[lp->nstages] = (Stage){out, 0, NULL, d};
    return lp->nstages++;
}

void ir_loop_program_add_variant(LoopProgram *lp, const MicroKernel *mk, int n, Kernel *const *ks,
                                 int nscratch, Tensor *const *scratch)
{
    IR_ASSERT(n >= 1 && lp->nstages >= 1);
    Arena *a = lp->te->arena;
    Stage *st = &lp->stages[lp->nstages - 1];
    st->variants = grow(a, st->variants, (size_t)st->nvariants, 1, sizeof *st->variants);
    Variant *v = &st->variants[st->nvariants];
    *v = (Variant){*mk, lp->nkernels, n, nscratch, IR_NEWN(a, Tensor *, nscratch ? nscratch : 1)};
    if (nscratch)
        memcpy(v->scratch, scratch, sizeof *scratch * (size_t)nscratch);
    lp->kernels = grow(a, lp->kernels, (size_t)lp->nkernels, (size_t)n, sizeof *lp->kernels);
    for (int i = 0; i < n; i++) {
        ks[i]->stage = lp->nstages - 1;
        ks[i]->variant = st->nvariants;
        lp->kernels[lp->nkernels++] = ks[i];
    }
    st->nvariants++;
}

int ir_microkernel_cmp(const MicroKernel *a, const MicroKernel *b)
{
    const int fa[] = {a->rchunk, a->unroll, a->vec, (int)a->vaxis, a->stage, a->split,
                      a->rthreads > 1 ? a->rthreads : 1, a->strided, a->pipeline,
                      a->raster > 1 ? a->raster : 1, a->atomic, a->pack};
    const int fb[] = {b->rchunk, b->unroll, b->vec, (int)b->vaxis, b->stage, b->split,
                      b->rthreads > 1 ? b->rthreads : 1, b->strided, b->pipeline,
                      b->raster > 1 ? b->raster : 1, b->atomic, b->pack};
    for (int i = 0; i < MK_MAX_AXES; i++) {
        if (a->threads[i] != b->threads[i])
            return a->threads[i] < b->threads[i] ? -1 : 1;
        if (a->tile[i] != b->tile[i])
            return a->tile[i] < b->tile[i] ? -1 : 1;
    }
    for (size_t i = 0; i < sizeof fa / sizeof *fa; i++)
        if (fa[i] != fb[i])
            return fa[i] < fb[i] ? -1 : 1;
    return 0;
}

typedef struct Uses {
    unsigned char *use;
    int *touched, n;
} Uses;

static void mark(Uses *u, const Tensor *t, unsigned char how)
{
    if (t->scope != MS_GLOBAL)
        return;
    if (!u->use[t->id] && u->touched)
        u->touched[u->n++] = t->id;
    u->use[t->id] |= how;
}

static void use_load(Expr *e, void *ud)
{
    if (e->kind == EX_LOAD)
        mark(ud, e->load.t, IR_READS);
}

static void use_stmt(Stmt *s, void *ud)
{
    switch (s->kind) {
    case ST_STORE:
        mark(ud, s->store.buf, IR_WRITES);
        for (int i = 0; i < s->store.n; i++)
            ir_expr_visit(s->store.idx[i], use_load, ud);
        ir_expr_visit(s->store.value, use_load, ud);
        break;
    case ST_LET: ir_expr_visit(s->let.value, use_load, ud); break;
    case ST_IF: ir_expr_visit(s->ifs.cond, use_load, ud); break;
    default: break;
    }
}

int ir_kernel_uses(const Kernel *k, unsigned char *use, int *touched)
{
    Uses u = {use, touched, 0};
    ir_stmt_visit(k->body, use_stmt, &u);
    return u.n;
}

typedef struct SiteScan {
    Expr **let_value; /* per var id: a let's value that is a check */
    int nvars;
    IrCheckSite *sites;
    int n, cap;
} SiteScan;

static void scan_let(Stmt *s, void *ud)
{
    SiteScan *sc = ud;
    if (s->kind == ST_LET && s->let.value->kind == EX_CHECK && s->let.var->id < sc->nvars)
        sc->let_value[s->let.var->id] = s->let.value;
}

static void scan_load(Expr *e, void *ud)
{
    SiteScan *sc = ud;
    if (e->kind != EX_LOAD)
        return;
    for (int i = 0; i < e->load.n; i++) {
        Expr *x = e->load.idx[i];
        if (x->kind == EX_VAR && x->var->id < sc->nvars && sc->let_value[x->var->id])
            x = sc->let_value[x->var->id];
        if (x->kind != EX_CHECK)
            continue;
        if (sc->n == sc->cap) {
            sc->cap = sc->cap ? 2 * sc->cap : 8;
            sc->sites = realloc(sc->sites, sizeof *sc->sites * (size_t)sc->cap);
            if (!sc->sites)
                ir_panic(__FILE__, __LINE__, "out of memory");
        }
        sc->sites[sc->n++] = (IrCheckSite){x, e->load.t, i};
    }
}

static Expr *scan_expr(Expr *e, void *ud)
{
    ir_expr_visit(e, scan_load, ud);
    return e;
}

IrCheckSite *ir_check_sites(const Kernel *k, int nvars, int *n)
{
    SiteScan sc = {calloc((size_t)nvars + 1, sizeof(Expr *)), nvars, NULL, 0, 0};
    if (!sc.let_value)
        ir_panic(__FILE__, __LINE__, "out of memory");
    ir_stmt_visit(k->body, scan_let, &sc);
    ir_stmt_map_exprs(k->body, scan_expr, &sc);
    free(sc.let_value);
    *n = sc.n;
    return sc.sites;
}
