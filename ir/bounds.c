/* Interval analysis over the dims' ranges and the axes' extents.
 *
 * Two layers. ir_interval gives numeric bounds with saturating arithmetic
 * (IR_NEG_INF / IR_POS_INF for unbounded). Numeric bounds alone cannot
 * prove i < T for an axis i in 0..T-1 (both range over 0..127), so
 * ir_prove_nonneg first replaces every axis or loop variable by its
 * symbolic extreme (0 or extent - 1, an expression over dims), picking the
 * extreme from the sign of its coefficient, simplifies, and only then asks
 * for numeric bounds: T - 1 - i becomes T - 1 - (T - 1) = 0. A floor modulo
 * by a positive divisor is bounded the same way, by 0 and divisor - 1:
 * T - 1 - (i + 1) % T becomes T - 1 - (T - 1) = 0. What numeric bounds
 * still cannot decide over the dims (T * T - T >= 0, each occurrence of T
 * bounded on its own) is proven by monotonicity in each dim (below).
 */
#include "dietcode/ir.h"

/* a + b for a lower (up = false) or upper bound: an infinite operand wins,
 * and when both infinities meet, the bound stays conservative. */
static int64_t sat_add(int64_t a, int64_t b, bool up)
{
    int64_t inf = up ? IR_POS_INF : IR_NEG_INF, other = up ? IR_NEG_INF : IR_POS_INF;
    if (a == inf || b == inf)
        return inf;
    if (a == other || b == other)
        return other;
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return a > 0 ? IR_POS_INF : IR_NEG_INF;
    return r;
}

static int64_t sat_neg(int64_t a)
{
    return a == IR_NEG_INF ? IR_POS_INF : a == IR_POS_INF ? IR_NEG_INF : -a;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
    if (a == 0 || b == 0)
        return 0;
    bool neg = (a < 0) != (b < 0);
    int64_t r;
    if (a == IR_NEG_INF || a == IR_POS_INF || b == IR_NEG_INF || b == IR_POS_INF ||
        __builtin_mul_overflow(a, b, &r))
        return neg ? IR_NEG_INF : IR_POS_INF;
    return r;
}

static int64_t min2(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

static const Interval UNBOUNDED = {IR_NEG_INF, IR_POS_INF};

static Interval iv_mul(Interval a, Interval b)
{
    int64_t p[4] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo),
                    sat_mul(a.hi, b.hi)};
    Interval r = {p[0], p[0]};
    for (int i = 1; i < 4; i++) {
        r.lo = min2(r.lo, p[i]);
        r.hi = max2(r.hi, p[i]);
    }
    return r;
}

static int64_t sat_floordiv(int64_t a, int64_t d)
{
    if (a == IR_NEG_INF || a == IR_POS_INF)
        return (a == IR_POS_INF) == (d > 0) ? IR_POS_INF : IR_NEG_INF;
    return ir_floordiv(a, d);
}

static Interval var_interval(ExprCtx *c, const Var *v, RangeMode m)
{
    if (v->kind == VK_DIM)
        return (Interval){v->lo, m == RANGE_DECLARED ? v->hi : v->max};
    if (!v->extent)
        return UNBOUNDED;
    Interval e = ir_interval(c, v->extent, m);
    /* e.hi may be IR_NEG_INF (an extent that overflowed below): no values */
    return (Interval){0, e.hi == IR_POS_INF ? IR_POS_INF : e.hi <= 0 ? 0 : e.hi - 1};
}

static Interval interval(ExprCtx *c, Expr *e, RangeMode m, int *budget)
{
    if (--*budget < 0)
        return UNBOUNDED; /* a bound, if a loose one */
    Interval a, b;
    int64_t d;
    switch (e->kind) {
    case EX_INT: return (Interval){e->ival, e->ival};
    case EX_VAR: return var_interval(c, e->var, m);
    case EX_LOAD:
        if (e->load.t->dtype == DT_BOOL)
            return (Interval){0, 1};
        if (e->load.t->dtype == DT_I32)
            return (Interval){INT32_MIN, INT32_MAX};
        return UNBOUNDED;
    case EX_FLOAT: case EX_REDUCE: return UNBOUNDED;
    case EX_I32:
        a = e->op.a->type == DT_I64 ? interval(c, e->op.a, m, budget) : (Interval){0, -1};
        if (a.lo >= INT32_MIN && a.hi <= INT32_MAX && a.lo <= a.hi)
            return a;
        if (e->op.a->type == DT_BOOL)
            return (Interval){0, 1};
        return (Interval){INT32_MIN, INT32_MAX};
    case EX_CAST:
        if (e->type == DT_I64 && e->op.a->type == DT_BOOL)
            return (Interval){0, 1};
        return UNBOUNDED;
    case EX_CHECK: /* 0 .. n - 1 */
        b = interval(c, e->op.b, m, budget);
        return (Interval){0, b.hi == IR_POS_INF ? IR_POS_INF : max2(0, b.hi - 1)};
    case EX_ADD:
        a = interval(c, e->op.a, m, budget);
        b = interval(c, e->op.b, m, budget);
        return (Interval){sat_add(a.lo, b.lo, false), sat_add(a.hi, b.hi, true)};
    case EX_SUB:
        a = interval(c, e->op.a, m, budget);
        b = interval(c, e->op.b, m, budget);
        return (Interval){sat_add(a.lo, sat_neg(b.hi), false), sat_add(a.hi, sat_neg(b.lo), true)};
    case EX_NEG:
        a = interval(c, e->op.a, m, budget);
        return (Interval){sat_neg(a.hi), sat_neg(a.lo)};
    case EX_MUL:
        if (e->type != DT_I64)
            return UNBOUNDED;
        return iv_mul(interval(c, e->op.a, m, budget), interval(c, e->op.b, m, budget));
    case EX_DIV:
        if (e->type != DT_I64)
            return UNBOUNDED;
        a = interval(c, e->op.a, m, budget);
        if (ir_is_const(e->op.b, &d) && d != 0) {
            int64_t x = sat_floordiv(a.lo, d), y = sat_floordiv(a.hi, d);
            return (Interval){min2(x, y), max2(x, y)};
        }
        b = interval(c, e->op.b, m, budget);
        if (b.lo > 0 && a.lo >= 0) /* nonnegative over positive */
            return (Interval){0, a.hi};
        return UNBOUNDED;
    case EX_MOD:
        if (e->type != DT_I64)
            return UNBOUNDED;
        b = interval(c, e->op.b, m, budget);
        if (b.lo > 0) {
            a = interval(c, e->op.a, m, budget);
            if (a.lo >= 0 && a.hi != IR_POS_INF && a.hi < b.lo)
                return a;
            return (Interval){0, b.hi == IR_POS_INF ? IR_POS_INF : b.hi - 1};
        }
        if (b.hi < 0) /* floor modulo takes the divisor's sign */
            return (Interval){b.lo == IR_NEG_INF ? IR_NEG_INF : b.lo + 1, 0};
        return UNBOUNDED;
    case EX_MIN: case EX_MAX:
        if (e->type != DT_I64)
            return UNBOUNDED;
        a = interval(c, e->op.a, m, budget);
        b = interval(c, e->op.b, m, budget);
        if (e->kind == EX_MIN)
            return (Interval){min2(a.lo, b.lo), min2(a.hi, b.hi)};
        return (Interval){max2(a.lo, b.lo), max2(a.hi, b.hi)};
    case EX_ABS:
        if (e->type != DT_I64)
            return UNBOUNDED;
        a = interval(c, e->op.a, m, budget);
        if (a.lo >= 0)
            return a;
        return (Interval){0, max2(sat_neg(a.lo), a.hi)};
    case EX_RELU:
        if (e->type != DT_I64)
            return UNBOUNDED;
        a = interval(c, e->op.a, m, budget);
        return (Interval){max2(0, a.lo), max2(0, a.hi)};
    case EX_SELECT:
        if (e->type == DT_BOOL)
            return (Interval){0, 1};
        if (e->type != DT_I64)
            return UNBOUNDED;
        a = interval(c, e->op.b, m, budget);
        b = interval(c, e->op.c, m, budget);
        return (Interval){min2(a.lo, b.lo), max2(a.hi, b.hi)};
    default:
        if (e->type == DT_BOOL)
            return (Interval){0, 1};
        return UNBOUNDED;
    }
}

/* Reading an expression stops after INTERVAL_NODES of its nodes (the rest
 * unbounded), so that asking for the interval of each node of a long chain
 * stays linear. */
enum { INTERVAL_NODES = 4096 };

Interval ir_interval(ExprCtx *c, Expr *e, RangeMode m)
{
    int budget = INTERVAL_NODES;
    return interval(c, e, m, &budget);
}

/* The symbolic minimum (want_max false) or maximum of e over the axis and
 * loop variables, as an expression over dims; NULL when none is known. */
static Expr *sym_bound(ExprCtx *c, Expr *e, bool want_max, RangeMode m)
{
    Expr *a, *b;
    int64_t k;
    switch (e->kind) {
    case EX_INT: return e;
    case EX_VAR:
        if (e->var->kind == VK_DIM)
            return e;
        if (!e->var->extent)
            return NULL;
        return want_max ? ir_binop(c, EX_SUB, e->var->extent, ir_int(c, 1)) : ir_int(c, 0);
    case EX_ADD:
        a = sym_bound(c, e->op.a, want_max, m);
        b = sym_bound(c, e->op.b, want_max, m);
        return a && b ? ir_binop(c, EX_ADD, a, b) : NULL;
    case EX_SUB:
        a = sym_bound(c, e->op.a, want_max, m);
        b = sym_bound(c, e->op.b, !want_max, m);
        return a && b ? ir_binop(c, EX_SUB, a, b) : NULL;
    case EX_NEG:
        a = sym_bound(c, e->op.a, !want_max, m);
        return a ? ir_unop(c, EX_NEG, a) : NULL;
    case EX_MUL:
        if (e->type != DT_I64)
            return NULL;
        if (ir_is_const(e->op.b, &k) || ir_is_const(e->op.a, &k)) {
            Expr *x = e->op.a->kind == EX_INT ? e->op.b : e->op.a;
            int64_t d;
            if (x->kind == EX_DIV && ir_is_const(x->op.b, &d) && d > 0 && k % d == 0) {
                /* d * floor(a / d) lies in a - (d - 1) .. a */
                bool up = k >= 0 ? want_max : !want_max;
                a = sym_bound(c, x->op.a, up, m);
                if (!a)
                    return NULL;
                if (!up)
                    a = ir_binop(c, EX_SUB, a, ir_int(c, d - 1));
                return ir_binop(c, EX_MUL, a, ir_int(c, k / d));
            }
            a = sym_bound(c, x, k >= 0 ? want_max : !want_max, m);
            return a ? ir_binop(c, EX_MUL, a, ir_int(c, k)) : NULL;
        }
        /* both factors nonnegative: the product is monotone in each */
        if (ir_interval(c, e->op.a, m).lo >= 0 && ir_interval(c, e->op.b, m).lo >= 0) {
            a = sym_bound(c, e->op.a, want_max, m);
            b = sym_bound(c, e->op.b, want_max, m);
            return a && b ? ir_binop(c, EX_MUL, a, b) : NULL;
        }
        break;
    case EX_DIV:
        if (e->type == DT_I64 && ir_is_const(e->op.b, &k) && k > 0) {
            a = sym_bound(c, e->op.a, want_max, m);
            return a ? ir_binop(c, EX_DIV, a, e->op.b) : NULL;
        }
        break;
    case EX_MOD: {
        /* a % b for b >= 1 is a when 0 <= a < b, else somewhere in 0..b - 1:
         * i % T <= T - 1 even though both range over 0..127 */
        Interval ib = ir_interval(c, e->op.b, m);
        if (e->type != DT_I64 || ib.lo <= 0)
            break;
        Interval ia = ir_interval(c, e->op.a, m);
        if (ia.lo >= 0 && ia.hi < ib.lo)
            return sym_bound(c, e->op.a, want_max, m);
        if (!want_max)
            return ir_int(c, 0);
        b = sym_bound(c, e->op.b, true, m);
        return b ? ir_binop(c, EX_SUB, b, ir_int(c, 1)) : NULL;
    }
    case EX_MIN: case EX_MAX:
        if (e->type != DT_I64)
            return NULL;
        a = sym_bound(c, e->op.a, want_max, m);
        b = sym_bound(c, e->op.b, want_max, m);
        return a && b ? ir_binop(c, e->kind, a, b) : NULL;
    case EX_CHECK: /* 0 .. n - 1 */
        if (!want_max)
            return ir_int(c, 0);
        b = sym_bound(c, e->op.b, true, m);
        return b ? ir_binop(c, EX_SUB, b, ir_int(c, 1)) : NULL;
    default:
        break;
    }
    /* fall back to a numeric bound */
    Interval iv = ir_interval(c, e, m);
    int64_t v = want_max ? iv.hi : iv.lo;
    if (v == IR_NEG_INF || v == IR_POS_INF)
        return NULL;
    return ir_int(c, v);
}

/* The first integer min or max in e, outermost first, not looking into
 * loads and reductions (their insides are not terms of e). */
static Expr *find_minmax(Expr *e)
{
    if ((e->kind == EX_MIN || e->kind == EX_MAX) && e->type == DT_I64)
        return e;
    if (e->kind <= EX_REDUCE)
        return NULL;
    Expr *ops[3] = {e->op.a, e->op.b, e->op.c}, *r = NULL;
    for (int i = 0; i < 3 && !r; i++)
        if (ops[i])
            r = find_minmax(ops[i]);
    return r;
}

/* e with every occurrence of the sub-expression `from` replaced by `to`. */
static Expr *replace(ExprCtx *c, Expr *e, Expr *from, Expr *to)
{
    if (e == from)
        return to;
    if (e->kind <= EX_REDUCE)
        return e;
    Expr *a = e->op.a ? replace(c, e->op.a, from, to) : NULL;
    if (e->kind == EX_CAST)
        return a == e->op.a ? e : ir_cast(c, e->type, a);
    Expr *b = e->op.b ? replace(c, e->op.b, from, to) : NULL;
    Expr *x = e->op.c ? replace(c, e->op.c, from, to) : NULL;
    if (a == e->op.a && b == e->op.b && x == e->op.c)
        return e;
    return ir_op(c, e->kind, a, b, x);
}

/* ---- monotonicity in the dims ----
 *
 * Numeric bounds take each occurrence of a dim on its own, so they cannot
 * see that T * T - T >= 0: T * T is 1..4096 and T is 1..64. But an
 * expression over dims whose step e[d := d + 1] - e is provably >= 0
 * never decreases as d grows, so its least value is at d's lowest one;
 * fixing d there and going on with the other dims, the last expression is
 * a number. A step of a polynomial is one of lower degree (proven the same
 * way, to a bounded depth); across a floor division by a positive constant
 * k, floor(x / k) - floor(y / k) lies in floor((x - y) / k) ..
 * ceil((x - y) / k). Where the step is provably <= 0 instead, the least
 * value is at d's top, when that is finite. Each step is proven over d's
 * whole range, more than the step needs, so nothing unsound follows. */
enum { MONOTONE_DEPTH = 3, MONOTONE_DIMS = 8 };

/* Whether e is a polynomial in d: + - * over anything not involving d. */
static bool poly_in(Expr *e, const Var *d)
{
    switch (e->kind) {
    case EX_INT: return true;
    case EX_VAR: return true;
    case EX_ADD: case EX_SUB: case EX_MUL:
        return e->type == DT_I64 && poly_in(e->op.a, d) && poly_in(e->op.b, d);
    case EX_NEG: return e->type == DT_I64 && poly_in(e->op.a, d);
    default: return !ir_expr_uses_var(e, d);
    }
}

/* A lower (up false) or upper bound of e[d := d + 1] - e over the dims'
 * ranges, as an expression over dims; NULL when none is known. */
static Expr *step_bound(ExprCtx *c, Expr *e, Var *d, bool up, RangeMode m)
{
    if (!ir_expr_uses_var(e, d))
        return ir_int(c, 0);
    if (poly_in(e, d)) { /* exactly */
        Expr *next = ir_subst(c, e, d, ir_binop(c, EX_ADD, ir_varref(c, d), ir_int(c, 1)));
        return ir_simplify(c, ir_binop(c, EX_SUB, next, e));
    }
    Expr *a, *b;
    int64_t k;
    switch (e->kind) {
    case EX_ADD: case EX_SUB:
        a = step_bound(c, e->op.a, d, up, m);
        b = step_bound(c, e->op.b, d, e->kind == EX_ADD ? up : !up, m);
        return a && b ? ir_binop(c, e->kind, a, b) : NULL;
    case EX_NEG:
        a = step_bound(c, e->op.a, d, !up, m);
        return a ? ir_unop(c, EX_NEG, a) : NULL;
    case EX_MUL:
        if (ir_is_const(e->op.a, &k) || ir_is_const(e->op.b, &k)) {
            Expr *x = e->op.a->kind == EX_INT ? e->op.b : e->op.a;
            a = step_bound(c, x, d, k >= 0 ? up : !up, m);
            return a ? ir_binop(c, EX_MUL, a, ir_int(c, k)) : NULL;
        }
        return NULL;
    case EX_DIV:
        if (e->type != DT_I64 || !ir_is_const(e->op.b, &k) || k <= 0)
            return NULL;
        a = step_bound(c, e->op.a, d, up, m);
        if (!a)
            return NULL;
        if (up) /* ceil(a / k) */
            a = ir_binop(c, EX_ADD, a, ir_int(c, k - 1));
        return ir_binop(c, EX_DIV, a, e->op.b);
    default:
        return NULL;
    }
}

/* The dims of an expression, and whether one occurs more than once
 * (numeric bounds are exact when none does: each occurrence is then free
 * to take its extreme). ir_expr_visit visits a shared node once per use. */
typedef struct DimSet {
    int n;
    bool repeated;
    bool other; /* a variable that is not a dim, or a load */
    Var *d[MONOTONE_DIMS];
} DimSet;

static void collect_dims(Expr *e, void *ud)
{
    DimSet *s = ud;
    if (e->kind == EX_LOAD || e->kind == EX_REDUCE || (e->kind == EX_VAR && e->var->kind != VK_DIM)) {
        s->other = true;
        return;
    }
    if (e->kind != EX_VAR)
        return;
    for (int i = 0; i < s->n; i++)
        if (s->d[i] == e->var) {
            s->repeated = true;
            return;
        }
    if (s->n == MONOTONE_DIMS)
        s->other = true;
    else
        s->d[s->n++] = e->var;
}

/* e >= 0, e over dims only, by monotonicity in each dim in turn. */
static bool monotone_nonneg(ExprCtx *c, Expr *e, RangeMode m, int depth)
{
    e = ir_simplify(c, e);
    if (ir_interval(c, e, m).lo >= 0)
        return true;
    DimSet s = {0};
    ir_expr_visit(e, collect_dims, &s);
    if (depth == 0 || s.other || !s.repeated)
        return false;
    for (int i = 0; i < s.n; i++) {
        Var *d = s.d[i];
        Interval r = var_interval(c, d, m);
        Expr *st = step_bound(c, e, d, false, m);
        int64_t at;
        if (st && monotone_nonneg(c, st, m, depth - 1)) {
            at = r.lo; /* non-decreasing in d */
        } else if (r.hi != IR_POS_INF && (st = step_bound(c, e, d, true, m)) &&
                   monotone_nonneg(c, ir_unop(c, EX_NEG, st), m, depth - 1)) {
            at = r.hi; /* non-increasing */
        } else {
            continue;
        }
        e = ir_simplify(c, ir_subst(c, e, d, ir_int(c, at)));
        if (ir_interval(c, e, m).lo >= 0)
            return true;
    }
    return false;
}

static bool prove_nonneg(ExprCtx *c, Expr *e, RangeMode m, int splits)
{
    if (e->type != DT_I64)
        return false;
    e = ir_simplify(c, e);
    if (ir_interval(c, e, m).lo >= 0)
        return true;
    /* A second round sees patterns the first one created: with y in
     * 0..(H - 3) / 2, the bound of H - 1 - 2 * y is H - 1 - 2 * ((H - 3) / 2),
     * and only bounding 2 * floor(a / 2) >= a - 1 again proves it >= 0. */
    Expr *x = e, *last = NULL;
    for (int round = 0; round < 3; round++) {
        Expr *lo = sym_bound(c, x, false, m);
        if (!lo)
            break;
        lo = ir_simplify(c, lo);
        if (ir_interval(c, lo, m).lo >= 0)
            return true;
        last = lo;
        if (lo == x)
            break;
        x = lo;
    }
    /* the bound over dims alone: T * T - T >= 0 for i < T <= T * T */
    if (last && monotone_nonneg(c, last, m, MONOTONE_DEPTH))
        return true;
    /* A min or max equals one of its operands, so e >= 0 holds if it holds
     * with either operand in its place. This proves clamps such as
     * T - 1 - min(max(i - 2, 0), T - 1) >= 0, where bounds of the operands
     * taken separately lose that both sides move with T. Each split doubles
     * the work, so they are few. */
    Expr *mm = splits > 0 ? find_minmax(e) : NULL;
    return mm && prove_nonneg(c, replace(c, e, mm, mm->op.a), m, splits - 1) &&
           prove_nonneg(c, replace(c, e, mm, mm->op.b), m, splits - 1);
}

bool ir_prove_nonneg(ExprCtx *c, Expr *e, RangeMode m)
{
    return prove_nonneg(c, e, m, 3);
}

bool ir_prove_multiple(ExprCtx *c, Expr *e, int64_t m)
{
    int64_t r;
    return ir_is_const(ir_simplify(c, ir_binop(c, EX_MOD, e, ir_int(c, m))), &r) && r == 0;
}

bool ir_prove_in_bounds(ExprCtx *c, Expr *idx, Expr *extent, RangeMode m, Interval *range)
{
    Expr *s = ir_simplify(c, idx);
    if (range)
        *range = ir_interval(c, s, m);
    Expr *room = ir_binop(c, EX_SUB, ir_binop(c, EX_SUB, extent, s), ir_int(c, 1));
    if (ir_prove_nonneg(c, s, m) && ir_prove_nonneg(c, room, m))
        return true;
    /* floor(a / z) for z >= 1 lies in 0..extent - 1 when a lies in
     * 0..extent * z - 1: a reshape's row i / sequence of i < batch * sequence */
    Expr *one = ir_int(c, 1);
    if (s->kind != EX_DIV || !ir_prove_nonneg(c, ir_binop(c, EX_SUB, s->op.b, one), m))
        return false;
    Expr *a = s->op.a, *top = ir_binop(c, EX_MUL, extent, s->op.b);
    return ir_prove_nonneg(c, a, m) &&
           ir_prove_nonneg(c, ir_binop(c, EX_SUB, ir_binop(c, EX_SUB, top, a), one), m);
}
