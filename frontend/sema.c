/* Semantic checks: from the AST to a TE program.
 *
 * Names are resolved innermost first (reduction axes, then the tensor's
 * axes, then dims, then 0-d tensors by bare name), types are checked and
 * promoted as the language says, and every plain access is proven in
 * bounds by interval analysis over the dims' declared ranges. A proof
 * that holds only within the declared range (X[i] with X[128] and i < T)
 * caps the dims involved at their HI, so sizes above the range are refused
 * at run time instead of reading out of bounds. Each problem gets one
 * diagnostic at the offending token; checking goes on with the next
 * statement, so one run reports every bad statement.
 *
 * A statement that failed defines nothing, so later uses of its name would
 * fail too. Those follow-on errors are not reported: a name declared by an
 * earlier (failed) statement fails quietly, and so does an unknown name
 * once the parser has dropped statements with syntax errors, since the
 * name was most likely declared by one of them.
 */
#include "dietcode/abi.h"
#include "dietcode/frontend.h"
#include "dietcode/runtime.h"
#include "frontend/ast.h"

#include <string.h>

enum { MAX_RANK = 8, MAX_DIM_VALUE = 2147483647 };

typedef struct Scope {
    const char *name;
    Var *var;
    struct Scope *up;
} Scope;

typedef struct Sema {
    TeProgram *p;
    ExprCtx *c;
    DiagList *d;
    Arena *scratch; /* for messages */
    const Source *src; /* constants' files are relative to its path */
    const AstProgram *ast;
    /* statements by name: slot[] holds the first statement of a name (or
     * -1), same[i] the next statement after i with i's name (or -1) */
    int cap, *slot, *same;
    const char *defining; /* the tensor whose body is being checked */
    Expr *def_pos;        /* its element's flat offset over its axes */
    int index;            /* of the statement being checked */
    bool syntax_errors;   /* the parser dropped statements */
    bool failed;          /* the current statement had an error */
} Sema;

static void error(Sema *s, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void error(Sema *s, SrcLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_vdiag(s->d, loc, fmt, ap);
    va_end(ap);
    s->failed = true;
}

/* Fails the statement without a message: the cause was reported already. */
static void fail_quietly(Sema *s)
{
    IR_ASSERT(s->d->count > 0);
    s->failed = true;
}

static const char *reserved[] = {
#define X(e, name, arity) name,
    AST_FUNCS(X)
#undef X
#define X(e, name) name,
    AST_REDUCES(X)
#undef X
    "f32", "f16", "i32", "i64", "bool",
};

static bool is_reserved(const char *name)
{
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcmp(reserved[i], name) == 0)
            return true;
    return false;
}

bool fe_reserved_name(const char *name)
{
    return name && (is_reserved(name) || fe_lex_is_keyword(name));
}

/* Where name's first statement is in the table, or the empty slot where
 * it would be. */
static int *name_slot(const Sema *s, const char *name)
{
    int i = (int)(ir_name_hash(name) & (uint64_t)(s->cap - 1));
    while (s->slot[i] >= 0 && strcmp(s->ast->stmts[s->slot[i]]->name, name) != 0)
        i = (i + 1) & (s->cap - 1);
    return &s->slot[i];
}

static void index_names(Sema *s)
{
    int n = s->ast->n;
    s->cap = 64;
    while (s->cap < 2 * n)
        s->cap *= 2;
    s->slot = IR_NEWN(s->scratch, int, s->cap);
    s->same = IR_NEWN(s->scratch, int, n ? n : 1);
    int *last = IR_NEWN(s->scratch, int, s->cap); /* per slot: its name's latest */
    for (int i = 0; i < s->cap; i++)
        s->slot[i] = -1;
    for (int i = 0; i < n; i++) {
        s->same[i] = -1;
        const char *name = s->ast->stmts[i]->name;
        if (!name)
            continue;
        int *at = name_slot(s, name);
        if (*at < 0)
            *at = i;
        else
            s->same[last[at - s->slot]] = i;
        last[at - s->slot] = i;
    }
}

/* The statement that defines name, if any, among statements [0, upto). */
static const AstStmt *find_stmt(const Sema *s, const char *name, int upto)
{
    int i = *name_slot(s, name);
    return i >= 0 && i < upto ? s->ast->stmts[i] : NULL;
}

/* Whether a statement before the current one declares name as a dim
 * (dim true) or as a tensor. Called when the lookup of what it declared
 * failed: then that statement failed, and its error is reported already. */
static bool failed_decl(const Sema *s, const char *name, bool dim)
{
    for (int i = *name_slot(s, name); i >= 0 && i < s->index; i = s->same[i])
        if ((s->ast->stmts[i]->kind == AST_DIM) == dim)
            return true;
    return false;
}

/* The innermost index variable named name, if any. */
static Var *find_axis(const Scope *scope, const char *name)
{
    for (const Scope *x = scope; x; x = x->up)
        if (strcmp(x->name, name) == 0)
            return x->var;
    return NULL;
}

static const char *str(Sema *s, const Expr *e) { return ir_expr_str(s->scratch, e); }

static const char *range_str(Sema *s, Interval iv)
{
    char lo[32], hi[32];
    if (iv.lo == IR_NEG_INF) strcpy(lo, "-inf"); else snprintf(lo, sizeof lo, "%lld", (long long)iv.lo);
    if (iv.hi == IR_POS_INF) strcpy(hi, "inf"); else snprintf(hi, sizeof hi, "%lld", (long long)iv.hi);
    return ir_arena_printf(s->scratch, "%s..%s", lo, hi);
}

/* ---- extents: literals and dims with + - *, and / by a positive constant ---- */

static Expr *check_extent_expr(Sema *s, const AstExpr *e, const Scope *scope)
{
    switch (e->kind) {
    case AX_INT: return ir_int(s->c, e->ival);
    case AX_NAME: {
        Var *d = ir_te_find_dim(s->p, e->name);
        if (d)
            return ir_varref(s->c, d);
        const AstStmt *def = find_stmt(s, e->name, s->ast->n);
        if (find_axis(scope, e->name))
            error(s, e->loc,
                  "'%s' is an index variable, but an extent may use only integer literals and dims",
                  e->name);
        else if (failed_decl(s, e->name, true))
            fail_quietly(s);
        else if (def && def->kind == AST_DIM)
            error(s, e->loc, "dim '%s' is used before its declaration at line %d", e->name,
                  def->loc.line);
        else if (def)
            error(s, e->loc,
                  "'%s' is a tensor, but an extent may use only integer literals and dims",
                  e->name);
        else if (s->syntax_errors)
            fail_quietly(s);
        else
            error(s, e->loc, "unknown dim '%s' (declare it with 'dim %s in LO..HI')", e->name,
                  e->name);
        return NULL;
    }
    case AX_UNARY:
        if (e->unary.op == AOP_NEG) {
            Expr *a = check_extent_expr(s, e->unary.a, scope);
            return a ? ir_unop(s->c, EX_NEG, a) : NULL;
        }
        break;
    case AX_BINARY: {
        ExprKind k;
        switch (e->binary.op) {
        case AOP_ADD: k = EX_ADD; break;
        case AOP_SUB: k = EX_SUB; break;
        case AOP_MUL: k = EX_MUL; break;
        case AOP_DIV: k = EX_DIV; break;
        default:
            error(s, e->binary.oploc, "operator '%s' is not allowed in an extent (use + - * /)",
                  fe_op_str(e->binary.op));
            return NULL;
        }
        Expr *a = check_extent_expr(s, e->binary.a, scope);
        Expr *b = a ? check_extent_expr(s, e->binary.b, scope) : NULL;
        if (!a || !b)
            return NULL;
        if (k == EX_DIV) {
            int64_t v;
            Expr *bs = ir_simplify(s->c, b);
            if (!ir_is_const(bs, &v) || v <= 0) {
                error(s, e->binary.b->loc,
                      "an extent may divide only by a positive constant, not '%s'", str(s, bs));
                return NULL;
            }
        }
        return ir_binop(s->c, k, a, b);
    }
    case AX_FLOAT:
        error(s, e->loc, "an extent must be an integer, not '%s'", e->flt.text);
        return NULL;
    default:
        break;
    }
    error(s, e->loc, "an extent may use only integer literals, dims and + - * /");
    return NULL;
}

/* An extent, proven to lie in 1 .. MAX_DIM_VALUE; messages show it as
 * written, not simplified. */
static Expr *check_extent(Sema *s, const AstExpr *e, const Scope *scope)
{
    Expr *written = check_extent_expr(s, e, scope);
    if (!written)
        return NULL;
    Expr *x = ir_simplify(s->c, written);
    Interval iv = ir_interval(s->c, x, RANGE_DECLARED);
    const char *range = iv.lo == iv.hi ? "" : ir_arena_printf(s->scratch, " (its range is %s)",
                                                             range_str(s, iv));
    if (iv.lo == IR_NEG_INF || iv.hi == IR_POS_INF) { /* dims are bounded: an overflow */
        error(s, e->loc, "extent '%s' overflows 64-bit integers", str(s, written));
        return NULL;
    }
    if (!ir_prove_nonneg(s->c, ir_binop(s->c, EX_SUB, x, ir_int(s->c, 1)), RANGE_DECLARED)) {
        error(s, e->loc, "extent '%s' %s less than 1%s", str(s, written),
              iv.hi < 1 ? "is" : "may be", range);
        return NULL;
    }
    if (iv.hi > MAX_DIM_VALUE) {
        error(s, e->loc, "extent '%s' %s %d%s", str(s, written),
              iv.lo > MAX_DIM_VALUE ? "exceeds" : "may exceed", MAX_DIM_VALUE, range);
        return NULL;
    }
    return x;
}

/* A tensor over DCRT_MAX_ELEMENTS elements cannot run (kernels index in 32
 * bits). The size at the lowest value each extent takes, over every size
 * the program accepts, is a lower bound: over the limit, no size can run,
 * so the declaration is an error. Otherwise the run time refuses the sizes
 * that are too large (T * 65536 runs at small T). */
static bool check_size(Sema *s, const AstStmt *st, int rank, Expr *const *shape)
{
    int64_t n = 1;
    bool fixed = true;
    for (int i = 0; i < rank; i++) {
        int64_t lo = ir_interval(s->c, shape[i], RANGE_OPEN).lo;
        fixed &= shape[i]->kind == EX_INT;
        if (lo < 1)
            return true;
        if (__builtin_mul_overflow(n, lo, &n))
            n = INT64_MAX;
    }
    if (n <= DCRT_MAX_ELEMENTS)
        return true;
    const char *count = n == INT64_MAX ? "more than 2^63"
                        : ir_arena_printf(s->scratch, "%s%lld", fixed ? "" : "at least ",
                                          (long long)n);
    error(s, st->name_loc,
          "tensor '%s' has %s elements%s, more than the %d a tensor may have (32-bit indices)",
          st->name, count, fixed ? "" : " at any size", DCRT_MAX_ELEMENTS);
    return false;
}

/* Declares an index variable; false (with an error) when the name clashes. */
static bool check_new_name(Sema *s, const char *name, SrcLoc loc, const Scope *scope,
                           const char *what)
{
    if (is_reserved(name)) {
        error(s, loc, "'%s' is a builtin name and cannot name %s %s", name,
              what[0] == 'a' ? "an" : "a", what);
        return false;
    }
    for (const Scope *x = scope; x; x = x->up)
        if (strcmp(x->name, name) == 0) {
            error(s, loc, "%s '%s' reuses the name of an enclosing axis", what, name);
            return false;
        }
    if (ir_te_find_dim(s->p, name) || ir_te_find(s->p, name)) {
        error(s, loc, "%s '%s' has the name of a %s", what, name,
              ir_te_find_dim(s->p, name) ? "dim" : "tensor");
        return false;
    }
    return true;
}

/* Builds the axes of a definition or reduction, pushing them on *scope. */
static Var **check_axes(Sema *s, const AstAxis *axes, int n, Scope **scope, const char *what)
{
    Var **vars = IR_NEWN(s->p->arena, Var *, n ? n : 1);
    for (int i = 0; i < n; i++) {
        if (!check_new_name(s, axes[i].name, axes[i].loc, *scope, what))
            return NULL;
        Expr *ext = check_extent(s, axes[i].extent, *scope);
        if (!ext)
            return NULL;
        vars[i] = ir_var(s->c, axes[i].name, VK_AXIS, ext);
        vars[i]->loc = axes[i].loc;
        Scope *sc = IR_NEW(s->scratch, Scope);
        *sc = (Scope){axes[i].name, vars[i], *scope};
        *scope = sc;
    }
    return vars;
}

/* ---- expressions ---- */

static Expr *check_expr(Sema *s, const AstExpr *e, Scope *scope);

static const char *type_word(DType t)
{
    return t == DT_BOOL ? "a condition" : t == DT_I64 ? "an integer" : "a float";
}

static bool need_number(Sema *s, const AstExpr *at, Expr *x, const char *op)
{
    if (x->type != DT_BOOL)
        return true;
    error(s, at->loc, "type mismatch: '%s' needs a number, got a condition", op);
    return false;
}

static bool need_bool(Sema *s, const AstExpr *at, Expr *x, const char *op)
{
    if (x->type == DT_BOOL)
        return true;
    error(s, at->loc, "type mismatch: '%s' needs a condition, got %s", op, type_word(x->type));
    return false;
}

/* Adds to `mark` every dim an expression depends on, through axis extents. */
static void mark_dims(Expr *e, bool *mark);

static void mark_var(const Var *v, bool *mark)
{
    if (v->kind == VK_DIM)
        mark[v->pos] = true;
    else if (v->extent)
        mark_dims(v->extent, mark);
}

static void mark_dims(Expr *e, bool *mark)
{
    switch (e->kind) {
    case EX_VAR: mark_var(e->var, mark); break;
    case EX_INT: case EX_FLOAT: break;
    case EX_LOAD:
        for (int i = 0; i < e->load.n; i++)
            mark_dims(e->load.idx[i], mark);
        break;
    case EX_REDUCE: mark_dims(e->red.body, mark); break;
    default:
        if (e->op.a) mark_dims(e->op.a, mark);
        if (e->op.b) mark_dims(e->op.b, mark);
        if (e->op.c) mark_dims(e->op.c, mark);
    }
}

/* Proves one plain index in bounds, reporting at the index when it fails. */
static void has_load(Expr *e, void *ud)
{
    if (e->kind == EX_LOAD)
        *(bool *)ud = true;
}

/* The index of a plain access, checked: where it reads a tensor and no
 * proof bounds it, a gather checked when it runs (EX_CHECK); NULL and an
 * error where it is not provably in bounds otherwise. */
static Expr *check_index(Sema *s, const AstExpr *at, Tensor *t, int dim, Expr *idx)
{
    Interval iv;
    Expr *ext = t->shape[dim];
    bool gather = false;
    ir_expr_visit(idx, has_load, &gather);
    if (gather && s->def_pos && !ir_prove_in_bounds(s->c, idx, ext, RANGE_OPEN, NULL))
        return ir_op(s->c, EX_CHECK, idx, ext, s->def_pos);
    if (!ir_prove_in_bounds(s->c, idx, ext, RANGE_DECLARED, &iv)) {
        Interval ev = ir_interval(s->c, ext, RANGE_DECLARED);
        Expr *last = ir_simplify(s->c, ir_binop(s->c, EX_SUB, ext, ir_int(s->c, 1)));
        const char *ext_desc = ext->kind == EX_INT
            ? ir_arena_printf(s->scratch, "%lld", (long long)ext->ival)
            : ir_arena_printf(s->scratch, "%s (%s)", str(s, ext), range_str(s, ev));
        bool surely = iv.hi < 0 || iv.lo >= ev.hi;
        error(s, at->loc,
              "index '%s' of '%s' %s out of bounds: its range is %s, but dimension %d has "
              "extent %s, so valid indices are 0..%s; use %s?[...] to read zeros outside",
              str(s, idx), t->name, surely ? "is" : "may be",
              range_str(s, iv), dim, ext_desc, str(s, last), t->name);
        return NULL;
    }
    if (!ir_prove_in_bounds(s->c, idx, ext, RANGE_OPEN, NULL)) {
        /* holds only within the declared range: refuse larger sizes */
        bool *mark = IR_NEWN(s->scratch, bool, s->p->ndims ? s->p->ndims : 1);
        mark_dims(idx, mark);
        mark_dims(ext, mark);
        for (int i = 0; i < s->p->ndims; i++)
            if (mark[i])
                s->p->dims[i]->max = s->p->dims[i]->hi;
    }
    return idx;
}

static Expr *check_access(Sema *s, const AstExpr *e, Scope *scope)
{
    const char *name = e->access.name;
    Tensor *t = ir_te_find(s->p, name);
    if (!t) {
        const AstStmt *def = find_stmt(s, name, s->ast->n);
        if (s->defining && strcmp(name, s->defining) == 0)
            error(s, e->loc, "'%s' is used in its own definition", name);
        else if (find_axis(scope, name))
            error(s, e->loc, "'%s' is an index variable, not a tensor", name);
        else if (failed_decl(s, name, false))
            fail_quietly(s);
        else if (ir_te_find_dim(s->p, name) || (def && def->kind == AST_DIM))
            error(s, e->loc, "'%s' is a dim, not a tensor", name);
        else if (def)
            error(s, e->loc, "'%s' is used before its definition at line %d", name, def->loc.line);
        else if (s->syntax_errors)
            fail_quietly(s);
        else
            error(s, e->loc, "unknown tensor '%s'", name);
        return NULL;
    }
    if (e->access.n != t->rank) {
        error(s, e->loc, "wrong number of indices for '%s': it has rank %d, got %d", name,
              t->rank, e->access.n);
        return NULL;
    }
    Expr **idx = IR_NEWN(s->p->arena, Expr *, t->rank ? t->rank : 1);
    for (int i = 0; i < t->rank; i++) {
        const AstExpr *ae = e->access.idx[i];
        idx[i] = check_expr(s, ae, scope);
        if (!idx[i])
            return NULL;
        if (idx[i]->type != DT_I64) {
            error(s, ae->loc,
                  "type mismatch: the index for dimension %d of '%s' must be an integer, got %s%s",
                  i, name, type_word(idx[i]->type),
                  idx[i]->type == DT_F32 ? " (convert it with i32(...))" : "");
            return NULL;
        }
        Expr *checked = e->access.padded ? NULL : check_index(s, ae, t, i, idx[i]);
        if (checked) /* else an error, and the rest is checked as it is */
            idx[i] = checked;
    }
    return ir_load(s->c, t, t->rank, idx, e->access.padded);
}

static Expr *check_name(Sema *s, const AstExpr *e, Scope *scope)
{
    Var *v = find_axis(scope, e->name);
    if (v)
        return ir_varref(s->c, v);
    Var *d = ir_te_find_dim(s->p, e->name);
    if (d)
        return ir_varref(s->c, d);
    Tensor *t = ir_te_find(s->p, e->name);
    if (t && t->rank == 0)
        return ir_load(s->c, t, 0, NULL, false);
    if (t) {
        error(s, e->loc, "'%s' is a tensor of rank %d; index it as %s[...]", e->name, t->rank,
              e->name);
        return NULL;
    }
    const AstStmt *def = find_stmt(s, e->name, s->ast->n);
    if (s->defining && strcmp(e->name, s->defining) == 0)
        error(s, e->loc, "'%s' is used in its own definition", e->name);
    else if (failed_decl(s, e->name, true) || failed_decl(s, e->name, false))
        fail_quietly(s);
    else if (def && def->kind == AST_DIM)
        error(s, e->loc, "dim '%s' is used before its declaration at line %d", e->name,
              def->loc.line);
    else if (def)
        error(s, e->loc, "'%s' is used before its definition at line %d", e->name, def->loc.line);
    else if (s->syntax_errors)
        fail_quietly(s);
    else
        error(s, e->loc, "unknown name '%s'", e->name);
    return NULL;
}

/* Integer division or modulo needs a divisor that cannot be zero. */
static bool check_divisor(Sema *s, const AstExpr *at, AstOp op, Expr *b)
{
    Interval iv = ir_interval(s->c, ir_simplify(s->c, b), RANGE_DECLARED);
    const char *what = op == AOP_DIV ? "division" : "modulo";
    if (iv.lo > 0 || iv.hi < 0)
        return true;
    if (iv.lo == 0 && iv.hi == 0)
        error(s, at->loc, "integer %s by zero", what);
    else
        error(s, at->loc, "integer %s by '%s', which may be zero (its range is %s)", what,
              str(s, b), range_str(s, iv));
    return false;
}

static Expr *check_binary(Sema *s, const AstExpr *e, Scope *scope)
{
    Expr *a = check_expr(s, e->binary.a, scope);
    Expr *b = a ? check_expr(s, e->binary.b, scope) : NULL;
    if (!a || !b)
        return NULL;
    AstOp op = e->binary.op;
    const char *ops = fe_op_str(op);
    static const ExprKind kinds[] = {
        [AOP_OR] = EX_OR, [AOP_AND] = EX_AND, [AOP_LT] = EX_LT, [AOP_LE] = EX_LE,
        [AOP_GT] = EX_LT, [AOP_GE] = EX_LE, [AOP_EQ] = EX_EQ, [AOP_NE] = EX_NE,
        [AOP_ADD] = EX_ADD, [AOP_SUB] = EX_SUB, [AOP_MUL] = EX_MUL, [AOP_DIV] = EX_DIV,
        [AOP_MOD] = EX_MOD,
    };
    switch (op) {
    case AOP_OR: case AOP_AND:
        if (!need_bool(s, e->binary.a, a, ops) || !need_bool(s, e->binary.b, b, ops))
            return NULL;
        return ir_binop(s->c, kinds[op], a, b);
    case AOP_GT: case AOP_GE: {
        Expr *t = a;
        a = b;
        b = t;
        if (!need_number(s, e->binary.b, a, ops) || !need_number(s, e->binary.a, b, ops))
            return NULL;
        return ir_binop(s->c, kinds[op], a, b);
    }
    default:
        if (!need_number(s, e->binary.a, a, ops) || !need_number(s, e->binary.b, b, ops))
            return NULL;
        if ((op == AOP_DIV || op == AOP_MOD) && a->type == DT_I64 && b->type == DT_I64 &&
            !check_divisor(s, e->binary.b, op, b))
            return NULL;
        return ir_binop(s->c, kinds[op], a, b);
    }
}

static Expr *check_call(Sema *s, const AstExpr *e, Scope *scope)
{
    Expr *args[3] = {NULL, NULL, NULL};
    const char *fname = fe_func_name(e->call.fn);
    for (int i = 0; i < e->call.n; i++)
        if (!(args[i] = check_expr(s, e->call.args[i], scope)))
            return NULL;
    switch (e->call.fn) {
    case AF_SELECT:
        if (!need_bool(s, e->call.args[0], args[0], "select"))
            return NULL;
        for (int i = 1; i < 3; i++)
            if (!need_number(s, e->call.args[i], args[i], "select"))
                return NULL;
        return ir_select(s->c, args[0], args[1], args[2]);
    case AF_F32: return ir_cast(s->c, DT_F32, args[0]);
    case AF_I32: return ir_cast(s->c, DT_I32, args[0]);
    case AF_I64: return ir_cast(s->c, DT_I64, args[0]);
    case AF_BOOL: return ir_cast(s->c, DT_BOOL, args[0]);
    default: break;
    }
    for (int i = 0; i < e->call.n; i++)
        if (!need_number(s, e->call.args[i], args[i], fname))
            return NULL;
    static const ExprKind kinds[] = {
        [AF_EXP] = EX_EXP, [AF_LOG] = EX_LOG, [AF_SQRT] = EX_SQRT, [AF_RSQRT] = EX_RSQRT,
        [AF_TANH] = EX_TANH, [AF_ERF] = EX_ERF, [AF_ABS] = EX_ABS, [AF_SIGMOID] = EX_SIGMOID,
        [AF_RELU] = EX_RELU, [AF_GELU] = EX_GELU, [AF_MAX] = EX_MAX, [AF_MIN] = EX_MIN,
        [AF_POW] = EX_POW,
    };
    return ir_op(s->c, kinds[e->call.fn], args[0], args[1], NULL);
}

static Expr *check_reduce(Sema *s, const AstExpr *e, Scope *scope)
{
    static const ReduceOp ops[] = {[AR_SUM] = RD_SUM, [AR_MAX] = RD_MAX, [AR_MIN] = RD_MIN,
                                   [AR_PROD] = RD_PROD};
    Scope *inner = scope;
    Var **axes = check_axes(s, e->reduce.axes, e->reduce.n, &inner, "reduction axis");
    if (!axes)
        return NULL;
    Expr *body = check_expr(s, e->reduce.body, inner);
    if (!body || !need_number(s, e->reduce.body, body, fe_reduce_name(e->reduce.op)))
        return NULL;
    return ir_reduce(s->c, ops[e->reduce.op], e->reduce.n, axes, body);
}

static Expr *check_expr(Sema *s, const AstExpr *e, Scope *scope)
{
    switch (e->kind) {
    case AX_INT:
        if (e->ival > MAX_DIM_VALUE) {
            error(s, e->loc, "integer literal %lld is too large for i32", (long long)e->ival);
            return NULL;
        }
        return ir_int(s->c, e->ival);
    case AX_FLOAT: return ir_float(s->c, e->flt.val);
    case AX_NAME: return check_name(s, e, scope);
    case AX_ACCESS: return check_access(s, e, scope);
    case AX_CALL: return check_call(s, e, scope);
    case AX_REDUCE: return check_reduce(s, e, scope);
    case AX_UNARY: {
        Expr *a = check_expr(s, e->unary.a, scope);
        if (!a)
            return NULL;
        if (e->unary.op == AOP_NOT)
            return need_bool(s, e->unary.a, a, "!") ? ir_unop(s->c, EX_NOT, a) : NULL;
        return need_number(s, e->unary.a, a, "-") ? ir_unop(s->c, EX_NEG, a) : NULL;
    }
    case AX_BINARY: return check_binary(s, e, scope);
    }
    IR_UNREACHABLE();
}

/* ---- statements ---- */

static bool check_fresh_global(Sema *s, const AstStmt *st, int index)
{
    if (is_reserved(st->name)) {
        error(s, st->name_loc, "'%s' is a builtin name and cannot name a %s", st->name,
              st->kind == AST_DIM ? "dim" : "tensor");
        return false;
    }
    const AstStmt *prev = find_stmt(s, st->name, index);
    if (prev) {
        error(s, st->name_loc, "'%s' is already defined at line %d", st->name, prev->loc.line);
        return false;
    }
    return true;
}

static void check_dim(Sema *s, const AstStmt *st)
{
    int64_t lo = st->dim.lo, hi = st->dim.hi;
    if (lo < 1) {
        error(s, st->dim.lo_loc, "the lower bound of dim '%s' must be at least 1, got %lld",
              st->name, (long long)lo);
        return;
    }
    if (hi < lo) {
        error(s, st->dim.hi_loc, "empty range %lld..%lld for dim '%s': HI must be >= LO",
              (long long)lo, (long long)hi, st->name);
        return;
    }
    if (hi > MAX_DIM_VALUE) {
        error(s, st->dim.hi_loc, "the upper bound of dim '%s' must be at most %d, got %lld",
              st->name, MAX_DIM_VALUE, (long long)hi);
        return;
    }
    Var *d = ir_te_add_dim(s->p, st->name, lo, hi);
    d->max = MAX_DIM_VALUE;
    d->loc = st->name_loc;
}

/* A tensor's element type by name; false and an error if it is none. */
static bool element_type(Sema *s, const char *ty, SrcLoc loc, DType *dt)
{
    if (strcmp(ty, "f16") == 0 || strcmp(ty, "bf16") == 0 || strcmp(ty, "f64") == 0) {
        error(s, loc, "element type '%s' is not supported yet; use f32", ty);
        return false;
    }
    if (!ir_dtype_parse(ty, dt)) {
        error(s, loc, "unknown element type '%s' (expected f32, i32, i64 or bool)", ty);
        return false;
    }
    return true;
}

/* A constant's values from its .npy file (relative to the program's
 * directory): its type and shape must be the declared ones, which must not
 * depend on dims. NULL and an error otherwise. */
static Tensor *load_const(Sema *s, const AstStmt *st, DType dt, Expr **shape)
{
    int64_t want[RT_NPY_MAX_RANK];
    for (int i = 0; i < st->input.n; i++)
        if (!ir_is_const(shape[i] = ir_simplify(s->c, shape[i]), &want[i])) {
            error(s, st->input.extents[i]->loc,
                  "the extents of constant '%s' must not depend on dims (its values are fixed)",
                  st->name);
            return NULL;
        }
    const char *file = st->input.file, *src = s->src->path ? s->src->path : "";
    const char *slash = strrchr(src, '/');
    const char *path = file[0] == '/' || !slash
        ? file : ir_arena_printf(s->scratch, "%.*s/%s", (int)(slash - src), src, file);
    RtArray a;
    char err[1024];
    if (rt_npy_read(path, &a, err, sizeof err) != 0) {
        error(s, st->input.file_loc, "constant '%s': %s", st->name, err);
        return NULL;
    }
    Tensor *t = NULL;
    bool same = a.rank == st->input.n;
    for (int i = 0; same && i < a.rank; i++)
        same = a.shape[i] == want[i];
    if (a.dtype != (int32_t)dt) {
        error(s, st->input.file_loc, "constant '%s' is %s, but %s holds %s", st->name,
              ir_dtype_name(dt), path, rt_dtype_name(a.dtype));
    } else if (!same) {
        char got[256] = "(", exp[256] = "(";
        for (int i = 0; i < a.rank; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "",
                     (long long)a.shape[i]);
        for (int i = 0; i < st->input.n; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%lld", i ? ", " : "",
                     (long long)want[i]);
        error(s, st->input.file_loc, "constant '%s' has shape %s), but %s holds %s)", st->name,
              exp, path, got);
    } else {
        size_t bytes = (size_t)rt_array_numel(&a) * (size_t)ir_dtype_size(dt);
        t = ir_te_add_const(s->p, st->name, dt, st->input.n, shape, a.data, bytes, file);
    }
    rt_array_free(&a);
    return t;
}

static void check_input(Sema *s, const AstStmt *st)
{
    DType dt;
    if (!element_type(s, st->input.type, st->input.type_loc, &dt))
        return;
    if (st->input.n > MAX_RANK) {
        error(s, st->name_loc, "tensor '%s' has rank %d; at most %d is supported", st->name,
              st->input.n, MAX_RANK);
        return;
    }
    Expr *shape[MAX_RANK];
    for (int i = 0; i < st->input.n; i++)
        if (!(shape[i] = check_extent(s, st->input.extents[i], NULL)))
            return;
    if (!check_size(s, st, st->input.n, shape))
        return;
    Tensor *t = st->input.file ? load_const(s, st, dt, shape) :
                ir_te_add_input(s->p, st->name, dt, st->input.n, shape);
    if (t)
        t->loc = st->name_loc;
}

static void reads_constants_only(Expr *e, void *ud)
{
    bool *only = ud;
    if ((e->kind == EX_LOAD && !e->load.t->data) || (e->kind == EX_VAR && e->var->kind == VK_DIM))
        *only = false;
}

/* An intermediate of fixed extents computed from constants alone is a
 * constant: its values computed now, by the reference interpreter, and
 * every pass then treats it as the constant it is (it keeps its body, which
 * --emit=te prints). An error there (a gather out of range) is the
 * program's. */
static void fold_constant(Sema *s, Tensor *t)
{
    bool only = t->kind == TK_TEMP;
    int64_t e;
    for (int i = 0; i < t->rank && only; i++)
        only = ir_is_const(ir_simplify(s->c, t->shape[i]), &e);
    if (only)
        ir_expr_visit(t->body, reads_constants_only, &only);
    if (!only)
        return;
    TeProgram *p = s->p;
    bool *mat = IR_NEWN(s->scratch, bool, p->ntensors);
    Tensor **map = IR_NEWN(s->scratch, Tensor *, p->ntensors);
    int64_t *dims = IR_NEWN(s->scratch, int64_t, p->ndims + 1);
    for (int i = 0; i < p->ntensors; i++)
        mat[i] = true;
    for (int i = 0; i < p->ndims; i++)
        dims[i] = p->dims[i]->lo;
    TeProgram *sub = ir_te_extract(p, t, mat, false, map);
    float **bufs = IR_NEWN(s->scratch, float *, sub->ntensors + 1);
    for (int i = 0; i < p->ntensors; i++)
        if (map[i] && map[i]->kind == TK_INPUT)
            bufs[map[i]->id] = (float *)(uintptr_t)p->tensors[i]->data;
    int64_t bytes = ir_te_bytes(t, dims);
    void *data = ir_arena_alloc(p->arena, bytes > 0 ? (size_t)bytes : 1);
    bufs[map[t->id]->id] = data;
    char err[512];
    if (ir_interp(sub, dims, bufs, err, sizeof err) != 0)
        error(s, t->loc, "'%s' is computed from constants alone, and computing it fails: %s",
              t->name, err);
    else {
        t->kind = TK_INPUT; /* a constant that keeps its body */
        t->data = data;
    }
    ir_te_destroy(sub);
}

static void check_def(Sema *s, const AstStmt *st)
{
    if (st->def.n > MAX_RANK) {
        error(s, st->name_loc, "tensor '%s' has rank %d; at most %d is supported", st->name,
              st->def.n, MAX_RANK);
        return;
    }
    Scope *scope = NULL;
    Var **axes = check_axes(s, st->def.axes, st->def.n, &scope, "axis");
    if (!axes)
        return;
    Expr *shape[MAX_RANK];
    for (int i = 0; i < st->def.n; i++)
        shape[i] = axes[i]->extent;
    if (!check_size(s, st, st->def.n, shape))
        return;
    s->defining = st->name;
    s->def_pos = ir_flat_index(s->c, st->def.n, shape, axes);
    Expr *body = check_expr(s, st->def.body, scope);
    s->defining = NULL;
    s->def_pos = NULL;
    if (!body)
        return;
    DType dt = DT_F32;
    if (st->def.type && !element_type(s, st->def.type, st->def.type_loc, &dt))
        return;
    if (body->type == DT_BOOL && !st->def.type) {
        error(s, st->def.body->loc,
              "type mismatch: the value of '%s' is a condition; declare it a bool tensor (%s[...] "
              "bool = ...) or use select(c, 1.0, 0.0)",
              st->name, st->name);
        return;
    }
    if (s->failed)
        return;
    Tensor *t = ir_te_add_compute_as(s->p, st->name, st->kind == AST_OUTPUT ? TK_OUTPUT : TK_TEMP,
                                     dt, st->def.n, axes, body);
    t->loc = st->name_loc;
    fold_constant(s, t);
}

TeProgram *fe_compile(const Source *src, const char *name, DiagList *diags)
{
    const char *null = !src ? "src" : !src->text ? "src->text" : !name ? "name" : NULL;
    if (!diags || !diags->arena)
        return NULL;
    if (null) {
        ir_diag(diags, (SrcLoc){0, 0}, "fe_compile: %s is NULL", null);
        return NULL;
    }
    Arena *scratch = ir_arena_new();
    int before = diags->count;
    AstProgram *ast = fe_parse(scratch, src, diags);
    TeProgram *p = ir_te_new(name);
    Sema s = {.p = p, .c = p->ctx, .d = diags, .scratch = scratch, .src = src, .ast = ast,
              .syntax_errors = diags->count > before};
    index_names(&s);
    bool has_output = false;
    for (int i = 0; i < ast->n; i++) {
        const AstStmt *st = ast->stmts[i];
        s.index = i;
        s.failed = false;
        if (!check_fresh_global(&s, st, i))
            continue;
        switch (st->kind) {
        case AST_DIM: check_dim(&s, st); break;
        case AST_INPUT: check_input(&s, st); break;
        case AST_DEF: case AST_OUTPUT: check_def(&s, st); break;
        }
        has_output |= st->kind == AST_OUTPUT;
    }
    if (!has_output && diags->count == before) {
        SrcLoc end = ast->n ? ast->stmts[ast->n - 1]->loc : (SrcLoc){1, 1};
        ir_diag(diags, end, "the program has no output; mark a result with 'output'");
    }
    ir_arena_destroy(scratch);
    if (diags->count > before) {
        ir_te_destroy(p);
        return NULL;
    }
    char err[256];
    if (!ir_verify_te(p, err, sizeof err))
        ir_panic(__FILE__, __LINE__, "sema built an invalid program: %s", err);
    return p;
}
