/* A stage as a program of its own.
 *
 * The tuner measures one stage at a time, and two stages that compute the
 * same thing from different tensors (BERT's Q, K and V projections) are
 * one workload. Both need the stage apart from its program: the computed
 * tensor as the output, the materialised tensors it reads (directly or
 * through intermediates that are inlined into it) as inputs, those
 * intermediates as they are. ir_te_extract builds that program in a fresh
 * arena and expression context (so a measurement's lowering, and its
 * freeing, touch nothing else).
 *
 * In canonical form the copy drops the dims the stage does not use, orders
 * the inputs by first use in the stage's body, and renames everything by
 * first use in printing order: dims d0, d1, ..., tensors t0, t1, ...,
 * axes a0, a1, ...; printed, it is the text a
 * workload fingerprint hashes, the same for every program that computes
 * the stage the same way (ranges, constant extents and dtypes included).
 */
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Copier {
    const TeProgram *from;
    TeProgram *to;
    bool canonical;
    Var **vars;       /* by old var id */
    Tensor **tensors; /* by old tensor id */
    Expr **memo;      /* by old expr id */
    int naxes, ndims;
} Copier;

static Expr *copy(Copier *c, const Expr *e);

static Var *copy_var(Copier *c, Var *v)
{
    if (c->vars[v->id])
        return c->vars[v->id];
    char name[32];
    Var *n;
    if (v->kind == VK_DIM) {
        if (c->canonical)
            snprintf(name, sizeof name, "d%d", c->ndims++);
        n = ir_te_add_dim(c->to, c->canonical ? name : v->name, v->lo, v->hi);
        n->max = v->max;
    } else {
        if (c->canonical)
            snprintf(name, sizeof name, "a%d", c->naxes++);
        n = ir_var(c->to->ctx, c->canonical ? name : v->name, v->kind, copy(c, v->extent));
    }
    n->loc = v->loc;
    return c->vars[v->id] = n;
}

static Expr *copy(Copier *c, const Expr *e)
{
    if (c->memo[e->id])
        return c->memo[e->id];
    ExprCtx *x = c->to->ctx;
    Expr *r;
    switch (e->kind) {
    case EX_INT: r = e->type == DT_BOOL ? ir_bool(x, e->ival != 0) : ir_int(x, e->ival); break;
    case EX_FLOAT: r = ir_float(x, e->fval); break;
    case EX_VAR: r = ir_varref(x, copy_var(c, e->var)); break;
    case EX_LOAD: {
        Expr **idx = IR_NEWN(c->to->arena, Expr *, e->load.n ? e->load.n : 1);
        for (int i = 0; i < e->load.n; i++)
            idx[i] = copy(c, e->load.idx[i]);
        Tensor *t = c->tensors[e->load.t->id];
        IR_ASSERT(t);
        r = ir_load(x, t, e->load.n, idx, e->load.padded);
        break;
    }
    case EX_REDUCE: {
        Var **axes = IR_NEWN(c->to->arena, Var *, e->red.n);
        for (int i = 0; i < e->red.n; i++)
            axes[i] = copy_var(c, e->red.axes[i]);
        r = ir_reduce(x, e->red.op, e->red.n, axes, copy(c, e->red.body));
        break;
    }
    case EX_CAST: r = ir_cast(x, e->type, copy(c, e->op.a)); break;
    default: {
        int n = ir_op_arity(e->kind);
        Expr *a = copy(c, e->op.a), *b = n > 1 ? copy(c, e->op.b) : NULL;
        r = ir_op(x, e->kind, a, b, n > 2 ? copy(c, e->op.c) : NULL);
        break;
    }
    }
    IR_ASSERT(r->type == e->type);
    return c->memo[e->id] = r;
}

/* Marks the tensors body reads: materialised ones as inputs (need[id] 1),
 * inlined intermediates as computed (2), whose bodies are walked too. */
typedef struct Needs {
    const TeProgram *p;
    const bool *materialized;
    char *need;
    int *order, norder; /* the inputs in the order they are first read */
} Needs;

static void mark(Expr *e, void *ud)
{
    Needs *n = ud;
    if (e->kind != EX_LOAD || n->need[e->load.t->id])
        return;
    const Tensor *t = e->load.t;
    bool inlined = t->kind == TK_TEMP && !n->materialized[t->id];
    n->need[t->id] = inlined ? 2 : 1;
    if (inlined)
        ir_expr_visit(t->body, mark, n);
    else
        n->order[n->norder++] = t->id;
}

static void copy_compute(Copier *c, const Tensor *t, TensorKind kind, const char *name)
{
    Var **axes = IR_NEWN(c->to->arena, Var *, t->rank ? t->rank : 1);
    for (int i = 0; i < t->rank; i++)
        axes[i] = copy_var(c, t->axes[i]);
    Tensor *n = ir_te_add_compute_as(c->to, name, kind, t->dtype, t->rank, axes,
                                     copy(c, t->body));
    n->loc = t->loc;
    n->fuse = kind == TK_TEMP ? FUSE_INLINE : FUSE_COST; /* as p's inlining left it */
    c->tensors[t->id] = n;
}

TeProgram *ir_te_extract(const TeProgram *p, const Tensor *t, const bool *materialized,
                         bool canonical, Tensor **map)
{
    size_t nt = (size_t)p->ntensors + 1;
    char *need = calloc(nt, 1);
    Copier c = {p, NULL, canonical, calloc((size_t)ir_var_count(p->ctx) + 1, sizeof(Var *)),
                calloc(nt, sizeof(Tensor *)),
                calloc((size_t)ir_expr_count(p->ctx) + 1, sizeof(Expr *)), 0, 0};
    if (!need || !c.vars || !c.tensors || !c.memo)
        ir_panic(__FILE__, __LINE__, "out of memory");
    Needs n = {p, materialized, need, calloc(nt, sizeof(int)), 0};
    if (!n.order)
        ir_panic(__FILE__, __LINE__, "out of memory");
    ir_expr_visit(t->body, mark, &n);
    char *name = malloc(strlen(p->name) + strlen(t->name) + 2);
    sprintf(name, "%s_%s", p->name, t->name);
    c.to = ir_te_new(canonical ? "stage" : name);
    c.to->fp_contract_off = p->fp_contract_off;
    free(name);
    if (!canonical) /* every dim, at its position */
        for (int i = 0; i < p->ndims; i++)
            copy_var(&c, p->dims[i]);
    /* inputs in p's order, or by first use (canonical); then the
     * intermediates in p's order (a topological one); then t */
    if (!canonical)
        for (int i = 0, j = 0; i < p->ntensors; i++)
            if (need[i] == 1)
                n.order[j++] = i;
    int k = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int q = 0; q < (pass == 0 ? n.norder : p->ntensors); q++) {
            int i = pass == 0 ? n.order[q] : q;
            const Tensor *u = p->tensors[i];
            char tn[32];
            snprintf(tn, sizeof tn, "t%d", k);
            const char *nm = canonical ? tn : u->name;
            if (pass == 0) {
                Expr *shape[16];
                IR_ASSERT(u->rank <= 16);
                for (int j = 0; j < u->rank; j++)
                    shape[j] = copy(&c, u->shape[j]);
                Tensor *x = ir_te_add_input(c.to, nm, u->dtype, u->rank, shape);
                x->loc = u->loc;
                /* a constant stays one (its values shared, not copied: a
                 * packed panel of it is packed when compiling); canonical,
                 * without its file, so a workload is its shapes and types */
                x->data = u->data;
                x->source = canonical ? NULL : u->source;
                c.tensors[i] = x;
                k++;
            } else if (pass == 1 && need[i] == 2) {
                copy_compute(&c, u, TK_TEMP, nm);
                k++;
            } else if (pass == 2 && u == t) {
                copy_compute(&c, u, TK_OUTPUT, nm);
                k++;
            }
        }
    if (map)
        memcpy(map, c.tensors, sizeof *map * (size_t)p->ntensors);
    free(need);
    free(n.order);
    free(c.vars);
    free(c.tensors);
    free(c.memo);
    return c.to;
}
