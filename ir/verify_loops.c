/* The loop IR verifier: run between passes under --verify-each and always
 * in tests. It checks scoping (every variable bound by an enclosing loop or
 * let, or a dim; every shared or local buffer by an enclosing alloc),
 * ranks, types, the shape rules of kernels (one block loop outermost,
 * constant extents for unrolled and vectorized loops), kernels' names
 * (one each) and the stage table (stages cover the kernels in order,
 * valid dispatch trees). */
#include "dietcode/ir.h"

#include <string.h>

typedef struct Env {
    const LoopProgram *lp;
    const Var *vars[256];
    int nvars;
    const Tensor *bufs[64];
    int nbufs;
    const char *problem;
    char detail[160];
} Env;

static bool bound_var(const Env *e, const Var *v)
{
    if (v->kind == VK_DIM)
        return true;
    for (int i = 0; i < e->nvars; i++)
        if (e->vars[i] == v)
            return true;
    return false;
}

static bool bound_buf(const Env *e, const Tensor *t)
{
    if (t->scope == MS_GLOBAL)
        return t->id >= 0 && t->id < e->lp->nbuffers && e->lp->buffers[t->id] == t &&
               e->lp->materialized[t->id];
    for (int i = 0; i < e->nbufs; i++)
        if (e->bufs[i] == t)
            return true;
    return false;
}

static void fail(Env *e, const char *what, const char *name)
{
    if (!e->problem) {
        e->problem = what;
        snprintf(e->detail, sizeof e->detail, "%s '%s'", what, name ? name : "");
    }
}

static void check_expr(Env *e, const Expr *x)
{
    switch (x->kind) {
    case EX_INT: case EX_FLOAT: return;
    case EX_VAR:
        if (!bound_var(e, x->var))
            fail(e, "unbound variable", x->var->name);
        return;
    case EX_REDUCE: fail(e, "reduction left in loop IR", NULL); return;
    case EX_LOAD:
        if (!bound_buf(e, x->load.t))
            fail(e, "load of an unallocated buffer", x->load.t->name);
        if (x->load.n != x->load.t->rank)
            fail(e, "load with the wrong number of indices", x->load.t->name);
        for (int i = 0; i < x->load.n; i++) {
            if (x->load.idx[i]->type != DT_I64)
                fail(e, "non-integer index", x->load.t->name);
            check_expr(e, x->load.idx[i]);
        }
        return;
    default:
        if (x->op.a) check_expr(e, x->op.a);
        if (x->op.b) check_expr(e, x->op.b);
        if (x->op.c) check_expr(e, x->op.c);
    }
}

static void check_stmt(Env *e, const Stmt *s)
{
    int64_t v;
    if (e->problem)
        return;
    switch (s->kind) {
    case ST_FOR:
        check_expr(e, s->loop.var->extent);
        if ((s->loop.fk == FK_UNROLLED || s->loop.fk == FK_VECTORIZED) &&
            !ir_is_const(s->loop.var->extent, &v))
            fail(e, "unrolled or vectorized loop with a non-constant extent", s->loop.var->name);
        if (s->loop.fk == FK_BLOCK)
            fail(e, "block loop not outermost", s->loop.var->name);
        if (bound_var(e, s->loop.var))
            fail(e, "loop variable bound twice", s->loop.var->name);
        if (e->nvars == 256)
            { fail(e, "nesting too deep", NULL); return; }
        e->vars[e->nvars++] = s->loop.var;
        check_stmt(e, s->loop.body);
        e->nvars--;
        return;
    case ST_LET:
        check_expr(e, s->let.value);
        if (bound_var(e, s->let.var))
            fail(e, "let variable bound twice", s->let.var->name);
        if (e->nvars == 256)
            { fail(e, "nesting too deep", NULL); return; }
        e->vars[e->nvars++] = s->let.var;
        check_stmt(e, s->let.body);
        e->nvars--;
        return;
    case ST_IF:
        check_expr(e, s->ifs.cond);
        if (s->ifs.cond->type != DT_BOOL)
            fail(e, "if condition is not a condition", NULL);
        check_stmt(e, s->ifs.then);
        if (s->ifs.els)
            check_stmt(e, s->ifs.els);
        return;
    case ST_STORE:
        if (!bound_buf(e, s->store.buf))
            fail(e, "store to an unallocated buffer", s->store.buf->name);
        if (s->store.n != s->store.buf->rank)
            fail(e, "store with the wrong number of indices", s->store.buf->name);
        if (s->store.value->type != ir_dtype_value(s->store.buf->dtype))
            fail(e, "store of a value of another type than the buffer's", s->store.buf->name);
        if (s->store.atomic && s->store.buf->dtype != DT_F32)
            fail(e, "atomic store to a buffer that is not f32", s->store.buf->name);
        if (s->store.async && (s->store.buf->scope != MS_SHARED || s->store.value->kind != EX_LOAD ||
                               s->store.value->load.t->scope != MS_GLOBAL))
            fail(e, "async store that is not a copy of a global load into shared memory",
                 s->store.buf->name);
        if (s->store.atomic && (s->store.async || s->store.buf->scope != MS_GLOBAL))
            fail(e, "atomic store to a buffer that is not global", s->store.buf->name);
        for (int i = 0; i < s->store.n; i++)
            check_expr(e, s->store.idx[i]);
        check_expr(e, s->store.value);
        return;
    case ST_ALLOC:
        if (s->alloc.buf->scope == MS_GLOBAL)
            fail(e, "alloc of a global buffer", s->alloc.buf->name);
        for (int i = 0; i < s->alloc.buf->rank; i++)
            if (!ir_is_const(s->alloc.buf->shape[i], &v) || v < 1)
                fail(e, "buffer with a non-constant shape", s->alloc.buf->name);
        if (e->nbufs == 64)
            { fail(e, "too many buffers", NULL); return; }
        e->bufs[e->nbufs++] = s->alloc.buf;
        check_stmt(e, s->alloc.body);
        e->nbufs--;
        return;
    case ST_BARRIER: return;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            check_stmt(e, s->seq.s[i]);
        return;
    }
}

bool ir_verify_dispatch(const Dispatch *d, int nvariants, int ndims, char *err, size_t errlen)
{
    if (!d)
        return true;
    if (d->nnodes < 0 || (d->nnodes > 0 && !d->nodes)) {
        snprintf(err, errlen, "dispatch tree without nodes");
        return false;
    }
    for (int i = 0; i < d->nnodes; i++) {
        const DispatchNode *n = &d->nodes[i];
        if (n->variant >= 0 ? n->variant < nvariants
                            : n->dim >= 0 && n->dim < ndims && n->then_node > i &&
                                  n->then_node < d->nnodes && n->else_node > i &&
                                  n->else_node < d->nnodes)
            continue;
        if (n->variant >= 0)
            snprintf(err, errlen, "dispatch node %d: variant %d of %d", i, n->variant, nvariants);
        else
            snprintf(err, errlen, "dispatch node %d: split on dim %d of %d to nodes %d and %d of %d",
                     i, n->dim, ndims, n->then_node, n->else_node, d->nnodes);
        return false;
    }
    return true;
}

/* The stage table: the variants of the stages cover the kernels in order,
 * each kernel knows its stage and variant, a variant's last kernel
 * computes its stage's tensor and the others its scratch buffers (global
 * buffers past the TE program's tensors), dispatch trees are valid. */
static bool check_stages(const LoopProgram *lp, char *err, size_t errlen)
{
    int next = 0;
    for (int s = 0; s < lp->nstages; s++) {
        const Stage *st = &lp->stages[s];
        if (st->nvariants < 1) {
            snprintf(err, errlen, "stage %d (%s) has no variant", s, st->out->name);
            return false;
        }
        for (int v = 0; v < st->nvariants; v++) {
            const Variant *va = &st->variants[v];
            if (va->first != next || va->nkernels < 1 || va->first + va->nkernels > lp->nkernels) {
                snprintf(err, errlen, "stage %d variant %d: kernels %d..%d do not follow kernel %d",
                         s, v, va->first, va->first + va->nkernels - 1, next - 1);
                return false;
            }
            for (int i = 0; i < va->nscratch; i++) {
                const Tensor *t = va->scratch[i];
                if (t->id < lp->te->ntensors || t->id >= lp->nbuffers || lp->buffers[t->id] != t) {
                    snprintf(err, errlen, "stage %d variant %d: scratch buffer %s is not one of the "
                             "program's", s, v, t->name);
                    return false;
                }
            }
            for (int i = 0; i < va->nkernels; i++) {
                const Kernel *k = lp->kernels[va->first + i];
                bool last = i == va->nkernels - 1, scratch = false;
                for (int j = 0; j < va->nscratch; j++)
                    scratch |= k->out == va->scratch[j];
                /* an atomic split-K first sets the output, then adds to it */
                scratch |= va->mk.atomic && k->out == st->out;
                if (k->stage != s || k->variant != v || (last ? k->out != st->out : !scratch)) {
                    snprintf(err, errlen, "kernel %s: stage %d variant %d computing %s, expected "
                             "stage %d variant %d computing %s", k->name, k->stage, k->variant,
                             k->out->name, s, v, last ? st->out->name : "a scratch buffer");
                    return false;
                }
            }
            next += va->nkernels;
        }
        char why[200];
        if (!ir_verify_dispatch(st->dispatch, st->nvariants, lp->te->ndims, why, sizeof why)) {
            snprintf(err, errlen, "stage %d (%s): %s", s, st->out->name, why);
            return false;
        }
    }
    if (next != lp->nkernels) {
        snprintf(err, errlen, "stages cover %d of %d kernels", next, lp->nkernels);
        return false;
    }
    return true;
}

bool ir_verify_loops(const LoopProgram *lp, char *err, size_t errlen)
{
    if (!check_stages(lp, err, errlen))
        return false;
    for (int i = 0; i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        /* a kernel's name is its symbol in the object: one each */
        for (int j = 0; j < i; j++)
            if (strcmp(lp->kernels[j]->name, k->name) == 0) {
                snprintf(err, errlen, "kernels %d and %d are both named %s", j, i, k->name);
                return false;
            }
        Env e;
        memset(&e, 0, sizeof e);
        e.lp = lp;
        const Stmt *body = k->body;
        if (body->kind == ST_FOR && body->loop.fk == FK_BLOCK) {
            check_expr(&e, body->loop.var->extent);
            e.vars[e.nvars++] = body->loop.var;
            body = body->loop.body;
        }
        check_stmt(&e, body);
        if (e.problem) {
            snprintf(err, errlen, "kernel %s: %s", k->name, e.detail);
            return false;
        }
    }
    return true;
}
