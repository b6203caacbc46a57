/* TE programs: construction, lookup, size arithmetic and the verifier.
 * A program owns its arena and expression context; destroying the program
 * frees every node at once. */
#include "dietcode/abi.h"
#include "dietcode/hash.h"
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

TeProgram *ir_te_new(const char *name)
{
    if (!name)
        return NULL;
    Arena *a = ir_arena_new();
    TeProgram *p = IR_NEW(a, TeProgram);
    p->arena = a;
    p->ctx = ir_ctx_new(a);
    p->name = ir_arena_strdup(a, name);
    return p;
}

void ir_te_destroy(TeProgram *p)
{
    if (!p)
        return;
    ir_ctx_destroy(p->ctx);
    ir_arena_destroy(p->arena);
}

/* Appends x to an arena array of *n elements with room for *cap, doubling
 * it when full (the old copy stays in the arena: at most as much again). */
static void *append(Arena *a, void *arr, int *n, int *cap, size_t elem, const void *x)
{
    unsigned char *na = arr;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        na = ir_arena_alloc(a, elem * (size_t)*cap);
        if (*n)
            memcpy(na, arr, elem * (size_t)*n);
    }
    memcpy(na + elem * (size_t)(*n)++, x, elem);
    return na;
}

/* Dims and tensors by name: open addressing, at most half full. */
typedef struct TeNames {
    int cap, n;
    struct { const char *name; Var *dim; Tensor *tensor; } *slot;
} TeNames;

uint64_t ir_name_hash(const char *s) { return dc_fnv1a_str(s); }

/* The slot of name: where it is, or the empty one where it would go. */
static int name_slot(const TeNames *t, const char *name)
{
    int i = (int)(ir_name_hash(name) & (uint64_t)(t->cap - 1));
    while (t->slot[i].name && strcmp(t->slot[i].name, name) != 0)
        i = (i + 1) & (t->cap - 1);
    return i;
}

static void name_add(TeProgram *p, const char *name, Var *dim, Tensor *tensor)
{
    TeNames *t = p->names;
    if (!t)
        t = p->names = IR_NEW(p->arena, TeNames);
    if (2 * (t->n + 1) > t->cap) {
        TeNames old = *t;
        t->cap = t->cap ? 2 * t->cap : 64;
        t->slot = ir_arena_alloc(p->arena, sizeof *t->slot * (size_t)t->cap);
        for (int i = 0; i < old.cap; i++)
            if (old.slot[i].name)
                t->slot[name_slot(t, old.slot[i].name)] = old.slot[i];
    }
    int i = name_slot(t, name);
    if (!t->slot[i].name) {
        t->slot[i].name = name;
        t->n++;
    }
    /* the first dim and the first tensor of a name, as a scan finds them */
    if (!t->slot[i].dim)
        t->slot[i].dim = dim;
    if (!t->slot[i].tensor)
        t->slot[i].tensor = tensor;
}

Var *ir_te_add_dim(TeProgram *p, const char *name, int64_t lo, int64_t hi)
{
    if (!p || !name)
        return NULL;
    Var *d = ir_dim(p->ctx, name, lo, hi);
    d->pos = p->ndims;
    p->dims = append(p->arena, p->dims, &p->ndims, &p->cap_dims, sizeof d, &d);
    name_add(p, d->name, d, NULL);
    return d;
}

static Tensor *add_tensor(TeProgram *p, const char *name, TensorKind kind, int rank)
{
    Tensor *t = IR_NEW(p->arena, Tensor);
    t->name = ir_arena_strdup(p->arena, name);
    t->id = p->ntensors;
    t->kind = kind;
    t->dtype = DT_F32;
    t->rank = rank;
    t->shape = IR_NEWN(p->arena, Expr *, rank ? rank : 1);
    p->tensors = append(p->arena, p->tensors, &p->ntensors, &p->cap_tensors, sizeof t, &t);
    name_add(p, t->name, NULL, t);
    return t;
}

Tensor *ir_te_add_input(TeProgram *p, const char *name, DType dt, int rank, Expr **shape)
{
    if (!p || !name || rank < 0 || (rank > 0 && !shape))
        return NULL;
    for (int i = 0; i < rank; i++)
        if (!shape[i])
            return NULL;
    Tensor *t = add_tensor(p, name, TK_INPUT, rank);
    t->dtype = dt;
    memcpy(t->shape, shape, sizeof(Expr *) * (size_t)rank);
    return t;
}

Tensor *ir_te_add_const(TeProgram *p, const char *name, DType t, int rank, Expr **shape,
                        const void *data, size_t bytes, const char *source)
{
    if (!data || !source)
        return NULL;
    Tensor *x = ir_te_add_input(p, name, t, rank, shape);
    if (!x)
        return NULL;
    void *copy = ir_arena_alloc(p->arena, bytes ? bytes : 1);
    memcpy(copy, data, bytes);
    x->data = copy;
    x->source = ir_arena_strdup(p->arena, source);
    return x;
}

Tensor *ir_te_adopt_const(TeProgram *p, const char *name, DType t, int rank, Expr **shape,
                          void *data, size_t bytes, const char *source)
{
    if (!data || !bytes || !source)
        return NULL;
    Tensor *x = ir_te_add_input(p, name, t, rank, shape);
    if (!x)
        return NULL;
    x->data = ir_arena_adopt(p->arena, data, bytes);
    x->source = ir_arena_strdup(p->arena, source);
    return x;
}

int64_t ir_te_release_unread_consts(TeProgram *p, const LoopProgram *lp)
{
    if (!p || !lp || lp->te != p)
        return 0;
    unsigned char *use = calloc((size_t)lp->nbuffers + 1, 1);
    if (!use)
        return 0;
    for (int i = 0; i < lp->nkernels; i++)
        ir_kernel_uses(lp->kernels[i], use, NULL);
    int64_t bytes = 0;
    for (int i = 0; i < p->ntensors; i++)
        if (!use[p->tensors[i]->id])
            bytes += ir_te_release_const(p, p->tensors[i]);
    free(use);
    return bytes;
}

int64_t ir_te_release_const(TeProgram *p, Tensor *t)
{
    static const unsigned char released; /* still a constant; never read */
    if (!p || !t || !t->data || t->data == &released)
        return 0;
    int64_t size = ir_te_bytes(t, NULL);
    if (size <= 0 || !ir_arena_release(p->arena, t->data))
        return 0;
    t->data = &released;
    p->consts_released = true;
    return size;
}

bool ir_te_consts_whole(const TeProgram *p, char *err, size_t errlen)
{
    if (!IR_ARG_OK(p, err, errlen))
        return false;
    if (p->consts_released)
        snprintf(err, errlen, "%s: its unread constants were released after its last compile",
                 p->name);
    return !p->consts_released;
}

int ir_te_bind_const(TeProgram *p, const char *name, const void *data, size_t bytes,
                     const char *source, char *err, size_t errlen)
{
    if (!IR_ARG_OK(p, err, errlen) || !IR_ARG_OK(name, err, errlen) ||
        !IR_ARG_OK(data, err, errlen))
        return -1;
    Tensor *t = ir_te_find(p, name);
    const char *why = !t ? "the program has no tensor of that name" :
                      t->kind != TK_INPUT ? "it is computed, not an input" :
                      t->data ? "it is a constant already" : NULL;
    int64_t size = why ? 0 : ir_te_bytes(t, NULL);
    if (!why && size < 0)
        why = "its extents use dims (a constant's are fixed)";
    if (why) {
        snprintf(err, errlen, "cannot bind '%s': %s", name, why);
        return -1;
    }
    if ((uint64_t)size != (uint64_t)bytes) {
        snprintf(err, errlen, "cannot bind '%s': it holds %lld bytes (%s), not %zu", name,
                 (long long)size, ir_dtype_name(t->dtype), bytes);
        return -1;
    }
    t->data = data;
    t->source = source ? ir_arena_strdup(p->arena, source) : NULL;
    return 0;
}

Tensor *ir_te_add_compute(TeProgram *p, const char *name, TensorKind kind, int rank,
                          Var **axes, Expr *body)
{
    return ir_te_add_compute_as(p, name, kind, DT_F32, rank, axes, body);
}

Tensor *ir_te_add_compute_as(TeProgram *p, const char *name, TensorKind kind, DType dt,
                             int rank, Var **axes, Expr *body)
{
    if (!p || !name || !body || rank < 0 || (rank > 0 && !axes))
        return NULL;
    for (int i = 0; i < rank; i++)
        if (!axes[i])
            return NULL;
    Tensor *t = add_tensor(p, name, kind, rank);
    t->axes = IR_NEWN(p->arena, Var *, rank ? rank : 1);
    memcpy(t->axes, axes, sizeof(Var *) * (size_t)rank);
    for (int i = 0; i < rank; i++)
        t->shape[i] = axes[i]->extent;
    t->dtype = dt;
    t->body = ir_cast(p->ctx, dt, body);
    return t;
}

static const TeNames *lookup(const TeProgram *p, const char *name, int *slot)
{
    if (!p || !name || !p->names)
        return NULL;
    *slot = name_slot(p->names, name);
    return p->names->slot[*slot].name ? p->names : NULL;
}

Tensor *ir_te_find(const TeProgram *p, const char *name)
{
    int i;
    const TeNames *t = lookup(p, name, &i);
    return t ? t->slot[i].tensor : NULL;
}

Var *ir_te_find_dim(const TeProgram *p, const char *name)
{
    int i;
    const TeNames *t = lookup(p, name, &i);
    return t ? t->slot[i].dim : NULL;
}

Tensor *ir_te_find_tensor(const TeProgram *p, const char *name) { return ir_te_find(p, name); }

int64_t ir_eval_dims(const Expr *e, const int64_t *dims)
{
    int64_t a, b;
    switch (e->kind) {
    case EX_INT: return e->ival;
    case EX_VAR:
        IR_ASSERT(e->var->kind == VK_DIM);
        return dims[e->var->pos];
    case EX_NEG: return ir_sem_int(EX_NEG, ir_eval_dims(e->op.a, dims), 0);
    case EX_ADD: case EX_SUB: case EX_MUL: case EX_DIV: case EX_MOD: case EX_MIN: case EX_MAX:
        a = ir_eval_dims(e->op.a, dims);
        b = ir_eval_dims(e->op.b, dims);
        return ir_sem_int(e->kind, a, b);
    default: ir_panic(__FILE__, __LINE__, "not a size expression: %s", ir_op_name(e->kind));
    }
}

int64_t ir_eval_at(const Expr *e, int n, Var *const *vars, const int64_t *vals)
{
    switch (e->kind) {
    case EX_INT: return e->ival;
    case EX_VAR:
        for (int i = 0; i < n; i++)
            if (vars[i] == e->var)
                return vals[i];
        ir_panic(__FILE__, __LINE__, "ir_eval_at: %s is not bound", e->var->name);
    case EX_NEG: return ir_sem_int(EX_NEG, ir_eval_at(e->op.a, n, vars, vals), 0);
    case EX_ADD: case EX_SUB: case EX_MUL: case EX_DIV: case EX_MOD: case EX_MIN: case EX_MAX:
        return ir_sem_int(e->kind, ir_eval_at(e->op.a, n, vars, vals),
                          ir_eval_at(e->op.b, n, vars, vals));
    default: ir_panic(__FILE__, __LINE__, "not an index expression: %s", ir_op_name(e->kind));
    }
}

bool ir_eval_dims_checked(const Expr *e, const int64_t *dims, int64_t *out)
{
    int64_t a, b;
    switch (e->kind) {
    case EX_INT: *out = e->ival; return true;
    case EX_VAR:
        if (!dims)
            return false;
        *out = dims[e->var->pos];
        return true;
    case EX_NEG:
        return ir_eval_dims_checked(e->op.a, dims, &a) && !__builtin_sub_overflow((int64_t)0, a, out);
    default: break;
    }
    if (!ir_eval_dims_checked(e->op.a, dims, &a) || !ir_eval_dims_checked(e->op.b, dims, &b))
        return false;
    switch (e->kind) {
    case EX_ADD: return !__builtin_add_overflow(a, b, out);
    case EX_SUB: return !__builtin_sub_overflow(a, b, out);
    case EX_MUL: return !__builtin_mul_overflow(a, b, out);
    default: *out = ir_eval_dims(e, dims); return true;
    }
}

typedef struct Bound {
    const int64_t *shapes;
    int nshapes, ndims;
    int64_t least; /* 0: no checked gather yet */
} Bound;

static void check_extent(Expr *e, void *ud)
{
    Bound *b = ud;
    if (e->kind != EX_CHECK)
        return;
    for (int s = 0; s < b->nshapes; s++) {
        int64_t n = ir_eval_dims(e->op.b, b->shapes + (size_t)s * (size_t)b->ndims);
        if (n >= 1 && (!b->least || n < b->least))
            b->least = n;
    }
}

int64_t ir_te_index_bound(const TeProgram *p, const int64_t *shapes, int nshapes)
{
    Bound b = {shapes, nshapes, p->ndims, 0};
    for (int i = 0; i < p->ntensors; i++)
        if (p->tensors[i]->body)
            ir_expr_visit(p->tensors[i]->body, check_extent, &b);
    return b.least;
}

void ir_bound_indices(DType dt, void *buf, int64_t n, int64_t b)
{
    for (int64_t k = 0; b && dt == DT_I64 && k < n; k++)
        ((int64_t *)buf)[k] = (((int64_t *)buf)[k] % b + b) % b;
    for (int64_t k = 0; b && dt == DT_I32 && k < n; k++)
        ((int32_t *)buf)[k] = (int32_t)((((int32_t *)buf)[k] % b + b) % b);
}

int64_t ir_te_numel(const Tensor *t, const int64_t *dims)
{
    int64_t n = 1, e;
    if (!t)
        return -1;
    for (int i = 0; i < t->rank; i++)
        if (!ir_eval_dims_checked(t->shape[i], dims, &e) || e < 0 || __builtin_mul_overflow(n, e, &n))
            return -1;
    return n;
}

int ir_te_params(const TeProgram *p, int *ids)
{
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->ntensors; i++) {
            const Tensor *t = p->tensors[i];
            if (pass ? t->kind == TK_OUTPUT : t->kind == TK_INPUT && !t->data)
                ids[n++] = i;
        }
    return n;
}

int64_t ir_te_bytes(const Tensor *t, const int64_t *dims)
{
    int64_t n = ir_te_numel(t, dims);
    return n < 0 || __builtin_mul_overflow(n, ir_dtype_size(t->dtype), &n) ? -1 : n;
}

bool ir_check_dims(const TeProgram *p, const int64_t *dims, char *err, size_t errlen)
{
    if (!IR_ARG_OK(p, err, errlen) || (p->ndims > 0 && !IR_ARG_OK(dims, err, errlen)))
        return false;
    for (int i = 0; i < p->ndims; i++) {
        const Var *d = p->dims[i];
        if (dims[i] < d->lo) {
            snprintf(err, errlen, "%s = %lld is below the declared range %lld..%lld", d->name,
                     (long long)dims[i], (long long)d->lo, (long long)d->hi);
            return false;
        }
        if (dims[i] > d->max) {
            if (d->max == d->hi)
                snprintf(err, errlen,
                         "%s = %lld is above the declared range %lld..%lld, and the program's "
                         "accesses are proven in bounds only within it",
                         d->name, (long long)dims[i], (long long)d->lo, (long long)d->hi);
            else
                snprintf(err, errlen, "%s = %lld is too large (at most %lld)", d->name,
                         (long long)dims[i], (long long)d->max);
            return false;
        }
    }
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        int64_t n = ir_te_numel(t, dims);
        if (n < 0 || n > DCRT_MAX_ELEMENTS) {
            /* kernels may index with 32-bit arithmetic (codegen/index.c):
             * refuse rather than compute a wrong answer */
            snprintf(err, errlen,
                     "sizes too large: tensor %s would have %s%lld elements, more than the %d a "
                     "tensor may have (32-bit indices)",
                     t->name, n < 0 ? "over " : "", (long long)(n < 0 ? INT64_MAX : n),
                     DCRT_MAX_ELEMENTS);
            return false;
        }
        for (int j = 0; j < t->rank; j++) {
            int64_t e;
            if (!ir_eval_dims_checked(t->shape[j], dims, &e) || e < 1) {
                snprintf(err, errlen, "extent %d of tensor %s is below 1 for these sizes", j,
                         t->name);
                return false;
            }
        }
    }
    return true;
}

/* ---- verifier ---- */

/* Scope of variables while walking a body: the tensor's axes and the axes
 * of the reductions that enclose the current node. */
typedef struct Scope {
    Var *const *vars;
    int n;
    const struct Scope *up;
} Scope;

static bool in_scope(const Scope *s, const Var *x)
{
    for (; s; s = s->up)
        for (int i = 0; i < s->n; i++)
            if (s->vars[i] == x)
                return true;
    return false;
}

/* After inlining (materialized non-NULL): a load may only read a tensor
 * that has memory. */
typedef struct Verify {
    const TeProgram *p;
    const bool *materialized;
} Verify;

static const char *verify_expr(const Verify *v, const Tensor *cur, const Expr *e, const Scope *s)
{
    const TeProgram *p = v->p;
    const char *bad = NULL;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: return NULL;
    case EX_VAR:
        if (e->var->kind == VK_DIM)
            return e->var->pos < p->ndims && p->dims[e->var->pos] == e->var
                       ? NULL : "unknown dim";
        return in_scope(s, e->var) ? NULL : "variable out of scope";
    case EX_LOAD:
        if (e->load.t->id >= cur->id || p->tensors[e->load.t->id] != e->load.t)
            return "load of a tensor not defined before";
        if (v->materialized && !v->materialized[e->load.t->id])
            return "load of an inlined tensor left after inlining";
        if (e->load.n != e->load.t->rank)
            return "load with the wrong number of indices";
        for (int i = 0; i < e->load.n && !bad; i++)
            bad = e->load.idx[i]->type != DT_I64 ? "non-integer index"
                                                   : verify_expr(v, cur, e->load.idx[i], s);
        return bad;
    case EX_REDUCE: {
        for (int i = 0; i < e->red.n; i++)
            if (!e->red.axes[i]->extent || in_scope(s, e->red.axes[i]))
                return "reduction axis without extent or reused";
        Scope inner = {e->red.axes, e->red.n, s};
        return verify_expr(v, cur, e->red.body, &inner);
    }
    default:
        if (e->op.a && (bad = verify_expr(v, cur, e->op.a, s)))
            return bad;
        if (e->op.b && (bad = verify_expr(v, cur, e->op.b, s)))
            return bad;
        return e->op.c ? verify_expr(v, cur, e->op.c, s) : NULL;
    }
}

bool ir_verify_te(const TeProgram *p, char *err, size_t errlen)
{
    return ir_verify_te_inlined(p, NULL, NULL, err, errlen);
}

bool ir_verify_te_inlined(const TeProgram *p, Expr *const *bodies, const bool *materialized,
                          char *err, size_t errlen)
{
    if (!IR_ARG_OK(p, err, errlen))
        return false;
    Verify v = {p, materialized};
    bool has_output = false;
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->id != i) {
            snprintf(err, errlen, "tensor %s: id %d at position %d", t->name, t->id, i);
            return false;
        }
        has_output |= t->kind == TK_OUTPUT;
        if (t->kind == TK_INPUT || (materialized && !materialized[i]))
            continue;
        const Expr *body = bodies ? bodies[i] : t->body;
        if (!body || body->type != ir_dtype_value(t->dtype)) {
            snprintf(err, errlen, "tensor %s: body missing or not %s", t->name,
                     ir_dtype_name(t->dtype));
            return false;
        }
        Scope axes = {t->axes, t->rank, NULL};
        const char *problem = verify_expr(&v, t, body, &axes);
        if (problem) {
            snprintf(err, errlen, "tensor %s: %s", t->name, problem);
            return false;
        }
    }
    if (!has_output) {
        snprintf(err, errlen, "program has no output");
        return false;
    }
    return true;
}
