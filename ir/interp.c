/* The reference interpreter: the ground truth every compiled kernel is
 * checked against. It is deliberately naive: each computed tensor is
 * evaluated point by point, walking the expression tree, with reductions as
 * plain nested loops accumulating in double. Elementwise float operators
 * use the same f32 semantics the simplifier folds with (ir_eval_float_op).
 * A plain access out of bounds cannot happen in a checked program; it is
 * still caught and reported rather than read.
 */
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Shape {
    int64_t ext[16], stride[16];
} Shape;

typedef struct Interp {
    const TeProgram *p;
    const int64_t *dims;
    float **bufs;
    Shape *shapes; /* per tensor */
    int64_t *env;  /* per variable id */
    const char *fault;
} Interp;

static double evalf(Interp *it, const Expr *e);

static int64_t wrap(uint64_t v) { return (int64_t)v; }

static int64_t evali(Interp *it, const Expr *e)
{
    int64_t a, b;
    switch (e->kind) {
    case EX_INT: return e->ival;
    case EX_VAR:
        return e->var->kind == VK_DIM ? it->dims[e->var->pos] : it->env[e->var->id];
    case EX_CAST: {
        double f = evalf(it, e->op.a);
        if (f != f)
            return 0;
        if (f >= 2147483647.0)
            return 2147483647;
        if (f <= -2147483648.0)
            return -2147483648LL;
        return (int64_t)f;
    }
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE:
        if (e->op.a->type == DT_F32) {
            double x = evalf(it, e->op.a), y = evalf(it, e->op.b);
            return e->kind == EX_LT ? x < y : e->kind == EX_LE ? x <= y
                 : e->kind == EX_EQ ? x == y : x != y;
        }
        a = evali(it, e->op.a);
        b = evali(it, e->op.b);
        return e->kind == EX_LT ? a < b : e->kind == EX_LE ? a <= b
             : e->kind == EX_EQ ? a == b : a != b;
    case EX_AND: return evali(it, e->op.a) && evali(it, e->op.b);
    case EX_OR: return evali(it, e->op.a) || evali(it, e->op.b);
    case EX_NOT: return !evali(it, e->op.a);
    case EX_SELECT: return evali(it, e->op.a) ? evali(it, e->op.b) : evali(it, e->op.c);
    case EX_NEG: return wrap(0 - (uint64_t)evali(it, e->op.a));
    case EX_ABS: a = evali(it, e->op.a); return a < 0 ? wrap(0 - (uint64_t)a) : a;
    case EX_RELU: a = evali(it, e->op.a); return a > 0 ? a : 0;
    case EX_REDUCE: {
        /* integer reductions: rare, evaluated through the float path */
        return (int64_t)evalf(it, e);
    }
    default: break;
    }
    a = evali(it, e->op.a);
    b = evali(it, e->op.b);
    switch (e->kind) {
    case EX_ADD: return wrap((uint64_t)a + (uint64_t)b);
    case EX_SUB: return wrap((uint64_t)a - (uint64_t)b);
    case EX_MUL: return wrap((uint64_t)a * (uint64_t)b);
    case EX_DIV: return b == 0 || (a == INT64_MIN && b == -1) ? 0 : ir_floordiv(a, b);
    case EX_MOD: return b == 0 || (a == INT64_MIN && b == -1) ? 0 : ir_floormod(a, b);
    case EX_MIN: return a < b ? a : b;
    case EX_MAX: return a > b ? a : b;
    default: ir_panic(__FILE__, __LINE__, "bad integer operator %s", ir_op_name(e->kind));
    }
}

static double load(Interp *it, const Expr *e)
{
    const Tensor *t = e->load.t;
    const Shape *s = &it->shapes[t->id];
    int64_t off = 0;
    for (int i = 0; i < e->load.n; i++) {
        int64_t x = evali(it, e->load.idx[i]);
        if (x < 0 || x >= s->ext[i]) {
            if (e->load.padded)
                return 0.0;
            it->fault = t->name;
            return 0.0;
        }
        off += x * s->stride[i];
    }
    return it->bufs[t->id][off];
}

/* Runs the reduction's axes as nested loops starting at axis k. */
static void reduce_loop(Interp *it, const Expr *e, int k, double *acc)
{
    if (k == e->red.n) {
        double v = evalf(it, e->red.body);
        switch (e->red.op) {
        case RD_SUM: *acc += v; break;
        case RD_PROD: *acc *= v; break;
        case RD_MAX: *acc = v > *acc || v != v ? v : *acc; break;
        case RD_MIN: *acc = v < *acc || v != v ? v : *acc; break;
        }
        return;
    }
    const Var *ax = e->red.axes[k];
    int64_t n = ir_eval_dims(ax->extent, it->dims);
    for (int64_t i = 0; i < n && !it->fault; i++) {
        it->env[ax->id] = i;
        reduce_loop(it, e, k + 1, acc);
    }
}

static double evalf(Interp *it, const Expr *e)
{
    switch (e->kind) {
    case EX_FLOAT: return e->fval;
    case EX_LOAD: return load(it, e);
    case EX_CAST: return (double)(float)evali(it, e->op.a);
    case EX_SELECT:
        return evali(it, e->op.a) ? evalf(it, e->op.b) : evalf(it, e->op.c);
    case EX_REDUCE: {
        double acc = ir_reduce_identity(e->red.op);
        reduce_loop(it, e, 0, &acc);
        return (double)(float)acc;
    }
    default: break;
    }
    if (e->type != DT_F32)
        return (double)evali(it, e);
    double a = evalf(it, e->op.a);
    double b = ir_op_arity(e->kind) == 2 ? evalf(it, e->op.b) : 0.0;
    return ir_eval_float_op(e->kind, a, b);
}

/* Evaluates computed tensor t at every point of its index space. */
static void run_tensor(Interp *it, const Tensor *t)
{
    const Shape *s = &it->shapes[t->id];
    int64_t n = ir_te_numel(t, it->dims);
    float *out = it->bufs[t->id];
    for (int64_t flat = 0; flat < n && !it->fault; flat++) {
        int64_t rem = flat;
        for (int i = t->rank - 1; i >= 0; i--) {
            it->env[t->axes[i]->id] = rem % s->ext[i];
            rem /= s->ext[i];
        }
        out[flat] = (float)evalf(it, t->body);
    }
}

int ir_interp(const TeProgram *p, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    if (!ir_check_dims(p, dims, err, errlen))
        return -1;
    Interp it = {p, dims, bufs, calloc((size_t)p->ntensors, sizeof(Shape)),
                 calloc((size_t)ir_var_count(p->ctx) + 1, sizeof(int64_t)), NULL};
    if (!it.shapes || !it.env) {
        free(it.shapes);
        free(it.env);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        IR_ASSERT(t->rank <= 16);
        int64_t stride = 1;
        for (int j = t->rank - 1; j >= 0; j--) {
            it.shapes[i].ext[j] = ir_eval_dims(t->shape[j], dims);
            it.shapes[i].stride[j] = stride;
            stride *= it.shapes[i].ext[j];
        }
    }
    for (int i = 0; i < p->ntensors && !it.fault; i++)
        if (p->tensors[i]->kind != TK_INPUT)
            run_tensor(&it, p->tensors[i]);
    free(it.shapes);
    free(it.env);
    if (it.fault) {
        snprintf(err, errlen, "access to %s out of bounds for these sizes", it.fault);
        return -1;
    }
    return 0;
}
