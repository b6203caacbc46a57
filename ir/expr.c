/* Hash-consed expressions.
 *
 * Every constructor builds a candidate node on the stack, hashes it, and
 * returns the interned copy if one exists. Interning makes structural
 * equality a pointer compare and keeps canonical forms cheap to compare.
 * Constructors also do the language's implicit promotion (an integer meeting
 * a float becomes a float) so every node is well typed by construction.
 */
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

struct ExprCtx {
    Arena *arena;
    Expr **table;
    size_t cap, count;
    uint32_t next_id;
    int nvars;
};

static const struct { const char *name; int arity; bool comm; } op_info[EX_KIND_COUNT] = {
    [EX_INT] = {"int", 0, false},
    [EX_FLOAT] = {"float", 0, false},
    [EX_VAR] = {"var", 0, false},
    [EX_LOAD] = {"load", 0, false},
    [EX_REDUCE] = {"reduce", 0, false},
#define X(name, text, arity, form, comm) [EX_##name] = {text, arity, comm},
    IR_OPS(X)
#undef X
};

static const struct { const char *name; double ident; ExprKind comb; } reduce_info[] = {
#define X(name, text, ident, comb) [RD_##name] = {text, ident, EX_##comb},
    IR_REDUCE_OPS(X)
#undef X
};

int ir_op_arity(ExprKind k) { return op_info[k].arity; }
const char *ir_op_name(ExprKind k) { return op_info[k].name; }
bool ir_op_commutative(ExprKind k) { return op_info[k].comm; }

bool ir_op_special(ExprKind k)
{
    switch (k) {
    case EX_EXP: case EX_LOG: case EX_TANH: case EX_ERF: case EX_POW: case EX_SIGMOID:
    case EX_GELU: case EX_SQRT: case EX_RSQRT: case EX_DIV:
        return true;
    default:
        return false;
    }
}
const char *ir_reduce_name(ReduceOp op) { return reduce_info[op].name; }
double ir_reduce_identity(ReduceOp op) { return reduce_info[op].ident; }
ExprKind ir_reduce_combiner(ReduceOp op) { return reduce_info[op].comb; }

int64_t ir_reduce_int_identity(ReduceOp op)
{
    switch (op) {
    case RD_SUM: return 0;
    case RD_PROD: return 1;
    case RD_MAX: return INT64_MIN;
    case RD_MIN: return INT64_MAX;
    }
    IR_UNREACHABLE();
}

Expr *ir_reduce_init(ExprCtx *c, ReduceOp op, DType t)
{
    return t == DT_F32 ? ir_float(c, ir_reduce_identity(op)) : ir_int(c, ir_reduce_int_identity(op));
}

const char *ir_dtype_name(DType t)
{
    switch (t) {
    case DT_BOOL: return "bool";
    case DT_I32: return "i32";
    case DT_I64: return "i64";
    case DT_F32: return "f32";
    }
    IR_UNREACHABLE();
}

int ir_dtype_size(DType t)
{
    switch (t) {
    case DT_BOOL: return 1;
    case DT_I32: return 4;
    case DT_I64: return 8;
    case DT_F32: return 4;
    }
    IR_UNREACHABLE();
}

DType ir_dtype_value(DType t) { return t == DT_I32 ? DT_I64 : t; }

bool ir_dtype_parse(const char *name, DType *t)
{
    static const DType all[] = {DT_F32, DT_I32, DT_I64, DT_BOOL};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (strcmp(name, ir_dtype_name(all[i])) == 0) {
            *t = all[i];
            return true;
        }
    return false;
}

ExprCtx *ir_ctx_new(Arena *a)
{
    ExprCtx *c = calloc(1, sizeof *c);
    if (!c)
        ir_panic(__FILE__, __LINE__, "out of memory");
    c->arena = a;
    c->cap = 1024;
    c->table = calloc(c->cap, sizeof *c->table);
    if (!c->table)
        ir_panic(__FILE__, __LINE__, "out of memory");
    return c;
}

void ir_ctx_destroy(ExprCtx *c)
{
    if (!c)
        return;
    free(c->table);
    free(c);
}

Arena *ir_ctx_arena(ExprCtx *c) { return c->arena; }
int ir_var_count(const ExprCtx *c) { return c->nvars; }
uint32_t ir_expr_count(const ExprCtx *c) { return c->next_id; }

static uint32_t mix(uint32_t h, uint64_t v)
{
    h ^= (uint32_t)v + 0x9e3779b9u + (h << 6) + (h >> 2);
    h ^= (uint32_t)(v >> 32) + 0x9e3779b9u + (h << 6) + (h >> 2);
    return h;
}

static uint64_t ptr_bits(const void *p) { return (uint64_t)(uintptr_t)p; }

static uint32_t hash_expr(const Expr *e)
{
    uint32_t h = mix((uint32_t)e->kind * 2654435761u, e->type);
    switch (e->kind) {
    case EX_INT: return mix(h, (uint64_t)e->ival);
    case EX_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &e->fval, sizeof bits);
        return mix(h, bits);
    }
    case EX_VAR: return mix(h, ptr_bits(e->var));
    case EX_LOAD:
        h = mix(mix(h, ptr_bits(e->load.t)), (uint64_t)e->load.padded);
        for (int i = 0; i < e->load.n; i++)
            h = mix(h, ptr_bits(e->load.idx[i]));
        return h;
    case EX_REDUCE:
        h = mix(mix(h, (uint64_t)e->red.op), ptr_bits(e->red.body));
        for (int i = 0; i < e->red.n; i++)
            h = mix(h, ptr_bits(e->red.axes[i]));
        return h;
    default:
        return mix(mix(mix(h, ptr_bits(e->op.a)), ptr_bits(e->op.b)), ptr_bits(e->op.c));
    }
}

static bool same_expr(const Expr *x, const Expr *y)
{
    if (x->kind != y->kind || x->type != y->type)
        return false;
    switch (x->kind) {
    case EX_INT: return x->ival == y->ival;
    case EX_FLOAT: return memcmp(&x->fval, &y->fval, sizeof x->fval) == 0;
    case EX_VAR: return x->var == y->var;
    case EX_LOAD:
        return x->load.t == y->load.t && x->load.n == y->load.n &&
               x->load.padded == y->load.padded &&
               (x->load.n == 0 ||
                memcmp(x->load.idx, y->load.idx, sizeof(Expr *) * (size_t)x->load.n) == 0);
    case EX_REDUCE:
        return x->red.op == y->red.op && x->red.n == y->red.n && x->red.body == y->red.body &&
               memcmp(x->red.axes, y->red.axes, sizeof(Var *) * (size_t)x->red.n) == 0;
    default:
        return x->op.a == y->op.a && x->op.b == y->op.b && x->op.c == y->op.c;
    }
}

static void grow(ExprCtx *c)
{
    size_t ncap = c->cap * 2;
    Expr **nt = calloc(ncap, sizeof *nt);
    if (!nt)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (size_t i = 0; i < c->cap; i++) {
        Expr *e = c->table[i];
        if (!e)
            continue;
        size_t j = e->hash & (ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = e;
    }
    free(c->table);
    c->table = nt;
    c->cap = ncap;
}

/* Returns the interned copy of the candidate *e (arrays copied on insert). */
static Expr *intern(ExprCtx *c, Expr *e)
{
    e->hash = hash_expr(e);
    size_t j = e->hash & (c->cap - 1);
    for (Expr *x; (x = c->table[j]); j = (j + 1) & (c->cap - 1))
        if (x->hash == e->hash && same_expr(x, e))
            return x;
    Expr *n = IR_NEW(c->arena, Expr);
    *n = *e;
    n->id = c->next_id++;
    if (n->kind == EX_LOAD && n->load.n) {
        n->load.idx = IR_NEWN(c->arena, Expr *, n->load.n);
        memcpy(n->load.idx, e->load.idx, sizeof(Expr *) * (size_t)e->load.n);
    } else if (n->kind == EX_REDUCE) {
        n->red.axes = IR_NEWN(c->arena, Var *, n->red.n);
        memcpy(n->red.axes, e->red.axes, sizeof(Var *) * (size_t)e->red.n);
    }
    c->table[j] = n;
    if (++c->count * 2 > c->cap)
        grow(c);
    return n;
}

Var *ir_var(ExprCtx *c, const char *name, VarKind kind, Expr *extent)
{
    Var *v = IR_NEW(c->arena, Var);
    v->name = ir_arena_strdup(c->arena, name);
    v->id = c->nvars++;
    v->kind = kind;
    v->extent = extent;
    return v;
}

Var *ir_dim(ExprCtx *c, const char *name, int64_t lo, int64_t hi)
{
    Var *v = ir_var(c, name, VK_DIM, NULL);
    v->lo = lo;
    v->hi = hi;
    v->max = hi;
    return v;
}

Expr *ir_int(ExprCtx *c, int64_t v)
{
    Expr e = {.kind = EX_INT, .type = DT_I64, .ival = v};
    return intern(c, &e);
}

Expr *ir_bool(ExprCtx *c, bool v)
{
    Expr e = {.kind = EX_INT, .type = DT_BOOL, .ival = v};
    return intern(c, &e);
}

Expr *ir_float(ExprCtx *c, double v)
{
    Expr e = {.kind = EX_FLOAT, .type = DT_F32, .fval = (double)(float)v};
    return intern(c, &e);
}

Expr *ir_flat_index(ExprCtx *c, int rank, Expr *const *shape, Var *const *vars)
{
    Expr *f = ir_int(c, 0);
    for (int d = 0; d < rank; d++)
        f = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, f, shape[d]), ir_varref(c, vars[d]));
    return ir_simplify(c, f);
}

Expr *ir_zero(ExprCtx *c, DType t)
{
    switch (t) {
    case DT_F32: return ir_float(c, 0.0);
    case DT_BOOL: return ir_bool(c, false);
    case DT_I32: return ir_cast(c, DT_I32, ir_int(c, 0));
    default: return ir_int(c, 0);
    }
}

Expr *ir_varref(ExprCtx *c, Var *v)
{
    Expr e = {.kind = EX_VAR, .type = DT_I64, .var = v};
    return intern(c, &e);
}

Expr *ir_cast(ExprCtx *c, DType to, Expr *a)
{
    if (to == DT_I32)
        return a->kind == EX_I32 ? a : ir_op(c, EX_I32, a, NULL, NULL);
    if (a->type == to)
        return a;
    if (to == DT_BOOL)
        return ir_binop(c, EX_NE, a, a->type == DT_F32 ? ir_float(c, 0.0) : ir_int(c, 0));
    Expr e = {.kind = EX_CAST, .type = to, .op = {a, NULL, NULL}};
    return intern(c, &e);
}

static Expr *to_float(ExprCtx *c, Expr *a)
{
    return a->type == DT_F32 ? a : ir_cast(c, DT_F32, a);
}

/* Result type of an operator, promoting operands as the language does. */
Expr *ir_op(ExprCtx *c, ExprKind k, Expr *a, Expr *b, Expr *x)
{
    IR_ASSERT(k > EX_REDUCE && k < EX_KIND_COUNT && k != EX_CAST);
    Expr e = {.kind = k};
    switch (k) {
    case EX_ADD: case EX_SUB: case EX_MUL: case EX_DIV: case EX_MOD:
    case EX_MIN: case EX_MAX:
        if (a->type == DT_F32 || b->type == DT_F32) {
            a = to_float(c, a);
            b = to_float(c, b);
            e.type = DT_F32;
        } else {
            e.type = DT_I64;
        }
        break;
    case EX_POW:
        a = to_float(c, a);
        b = to_float(c, b);
        e.type = DT_F32;
        break;
    case EX_FMA:
        a = to_float(c, a);
        b = to_float(c, b);
        x = to_float(c, x);
        e.type = DT_F32;
        break;
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE:
        if (a->type == DT_F32 || b->type == DT_F32) {
            a = to_float(c, a);
            b = to_float(c, b);
        }
        e.type = DT_BOOL;
        break;
    case EX_AND: case EX_OR: case EX_NOT:
        e.type = DT_BOOL;
        break;
    case EX_I32: case EX_CHECK:
        e.type = DT_I64;
        break;
    case EX_SHFL_XOR: /* of an f32 or an integer (an integer reduction's) */
        e.type = a->type == DT_F32 ? DT_F32 : DT_I64;
        break;
    case EX_NEG: case EX_ABS: case EX_RELU:
        e.type = a->type == DT_F32 ? DT_F32 : DT_I64;
        break;
    case EX_SELECT:
        if (b->type == DT_F32 || x->type == DT_F32) {
            b = to_float(c, b);
            x = to_float(c, x);
        }
        e.type = b->type;
        break;
    default: /* float math */
        a = to_float(c, a);
        e.type = DT_F32;
        break;
    }
    e.op.a = a;
    e.op.b = b;
    e.op.c = x;
    return intern(c, &e);
}

Expr *ir_binop(ExprCtx *c, ExprKind k, Expr *a, Expr *b) { return ir_op(c, k, a, b, NULL); }
Expr *ir_unop(ExprCtx *c, ExprKind k, Expr *a) { return ir_op(c, k, a, NULL, NULL); }
Expr *ir_select(ExprCtx *c, Expr *cond, Expr *a, Expr *b) { return ir_op(c, EX_SELECT, cond, a, b); }

Expr *ir_load(ExprCtx *c, Tensor *t, int n, Expr **idx, bool padded)
{
    Expr e = {.kind = EX_LOAD, .type = ir_dtype_value(t->dtype), .load = {t, n, padded, idx}};
    return intern(c, &e);
}

Expr *ir_reduce(ExprCtx *c, ReduceOp op, int n, Var **axes, Expr *body)
{
    Expr e = {.kind = EX_REDUCE, .type = body->type == DT_F32 ? DT_F32 : DT_I64,
              .red = {op, n, axes, body}};
    return intern(c, &e);
}

bool ir_is_const(const Expr *e, int64_t *v)
{
    if (e->kind != EX_INT)
        return false;
    if (v)
        *v = e->ival;
    return true;
}

Expr *ir_subst(ExprCtx *c, Expr *e, Var *v, Expr *r)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: return e;
    case EX_VAR: return e->var == v ? r : e;
    case EX_LOAD: {
        Expr *buf[16], **idx = e->load.n <= 16 ? buf : IR_NEWN(c->arena, Expr *, e->load.n);
        bool changed = false;
        for (int i = 0; i < e->load.n; i++) {
            idx[i] = ir_subst(c, e->load.idx[i], v, r);
            changed |= idx[i] != e->load.idx[i];
        }
        return changed ? ir_load(c, e->load.t, e->load.n, idx, e->load.padded) : e;
    }
    case EX_REDUCE: {
        Expr *b = ir_subst(c, e->red.body, v, r);
        return b == e->red.body ? e : ir_reduce(c, e->red.op, e->red.n, e->red.axes, b);
    }
    case EX_CAST: {
        Expr *a = ir_subst(c, e->op.a, v, r);
        return a == e->op.a ? e : ir_cast(c, e->type, a);
    }
    default: {
        Expr *a = e->op.a ? ir_subst(c, e->op.a, v, r) : NULL;
        Expr *b = e->op.b ? ir_subst(c, e->op.b, v, r) : NULL;
        Expr *x = e->op.c ? ir_subst(c, e->op.c, v, r) : NULL;
        if (a == e->op.a && b == e->op.b && x == e->op.c)
            return e;
        return ir_op(c, e->kind, a, b, x);
    }
    }
}

void ir_expr_visit(Expr *e, void (*f)(Expr *e, void *ud), void *ud)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: break;
    case EX_LOAD:
        for (int i = 0; i < e->load.n; i++)
            ir_expr_visit(e->load.idx[i], f, ud);
        break;
    case EX_REDUCE: ir_expr_visit(e->red.body, f, ud); break;
    default:
        if (e->op.a) ir_expr_visit(e->op.a, f, ud);
        if (e->op.b) ir_expr_visit(e->op.b, f, ud);
        if (e->op.c) ir_expr_visit(e->op.c, f, ud);
        break;
    }
    f(e, ud);
}

bool ir_expr_uses_var(Expr *e, const Var *v)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: return false;
    case EX_VAR: return e->var == v;
    case EX_LOAD:
        for (int i = 0; i < e->load.n; i++)
            if (ir_expr_uses_var(e->load.idx[i], v))
                return true;
        return false;
    case EX_REDUCE: return ir_expr_uses_var(e->red.body, v);
    default:
        return (e->op.a && ir_expr_uses_var(e->op.a, v)) ||
               (e->op.b && ir_expr_uses_var(e->op.b, v)) ||
               (e->op.c && ir_expr_uses_var(e->op.c, v));
    }
}

Expr *ir_subst_many(ExprCtx *c, Expr *e, int n, Var *const *vars, Expr *const *by)
{
    for (int i = 0; i < n; i++)
        e = ir_subst(c, e, vars[i], by[i]);
    return e;
}

/* Rebuilds e bottom-up with f applied to each rebuilt node. */
static Expr *rebuild(ExprCtx *c, Expr *e, Expr *(*f)(ExprCtx *c, Expr *e, void *ud), void *ud)
{
    Expr *n = e;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: break;
    case EX_LOAD: {
        Expr *buf[16], **idx = e->load.n <= 16 ? buf : IR_NEWN(c->arena, Expr *, e->load.n);
        bool changed = false;
        for (int i = 0; i < e->load.n; i++) {
            idx[i] = rebuild(c, e->load.idx[i], f, ud);
            changed |= idx[i] != e->load.idx[i];
        }
        if (changed)
            n = ir_load(c, e->load.t, e->load.n, idx, e->load.padded);
        break;
    }
    case EX_REDUCE: {
        Expr *b = rebuild(c, e->red.body, f, ud);
        if (b != e->red.body)
            n = ir_reduce(c, e->red.op, e->red.n, e->red.axes, b);
        break;
    }
    case EX_CAST: {
        Expr *a = rebuild(c, e->op.a, f, ud);
        if (a != e->op.a)
            n = ir_cast(c, e->type, a);
        break;
    }
    default: {
        Expr *a = e->op.a ? rebuild(c, e->op.a, f, ud) : NULL;
        Expr *b = e->op.b ? rebuild(c, e->op.b, f, ud) : NULL;
        Expr *x = e->op.c ? rebuild(c, e->op.c, f, ud) : NULL;
        if (a != e->op.a || b != e->op.b || x != e->op.c)
            n = ir_op(c, e->kind, a, b, x);
        break;
    }
    }
    return f(c, n, ud);
}

Expr *ir_rewrite(ExprCtx *c, Expr *e, Expr *(*f)(ExprCtx *c, Expr *e, void *ud), void *ud)
{
    return rebuild(c, e, f, ud);
}

typedef struct ReplaceCtx { const Expr *from; Expr *to; } ReplaceCtx;

static Expr *replace_one(ExprCtx *c, Expr *e, void *ud)
{
    (void)c;
    ReplaceCtx *r = ud;
    return e == r->from ? r->to : e;
}

Expr *ir_replace(ExprCtx *c, Expr *e, const Expr *from, Expr *to)
{
    if (e == from)
        return to;
    ReplaceCtx r = {from, to};
    return rebuild(c, e, replace_one, &r);
}

static Expr *pad_one(ExprCtx *c, Expr *e, void *ud)
{
    (void)ud;
    if (e->kind != EX_LOAD || e->load.padded)
        return e;
    return ir_load(c, e->load.t, e->load.n, e->load.idx, true);
}

Expr *ir_pad_loads(ExprCtx *c, Expr *e) { return rebuild(c, e, pad_one, NULL); }

Expr *ir_outer_reduce(Expr *e)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return NULL;
    case EX_REDUCE: return e;
    case EX_LOAD:
        for (int i = 0; i < e->load.n; i++) {
            Expr *r = ir_outer_reduce(e->load.idx[i]);
            if (r)
                return r;
        }
        return NULL;
    default: {
        Expr *r = e->op.a ? ir_outer_reduce(e->op.a) : NULL;
        if (!r && e->op.b)
            r = ir_outer_reduce(e->op.b);
        if (!r && e->op.c)
            r = ir_outer_reduce(e->op.c);
        return r;
    }
    }
}
