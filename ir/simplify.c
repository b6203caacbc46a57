/* The simplifier: integer expressions to a canonical polynomial form,
 * constant folding for everything, and facts from interval analysis.
 *
 * An integer expression made of + - * and constants is a polynomial: a
 * constant plus terms coeff * (product of atoms), where an atom is any other
 * integer expression (a variable, a floor division, a load...). Terms are
 * kept sorted by atom ids, so equal polynomials rebuild to the same interned
 * expression and "T - 1 - (T - 1)" cancels to 0. Floor division and modulo by
 * a positive constant split the polynomial into the part that divides
 * exactly and a remainder, and drop the remainder when its interval shows it
 * cannot reach the divisor: (8*io + ii) / 8 is io when ii is in 0..7.
 * Comparisons, min and max fold when interval analysis decides them.
 * Facts are taken for every size the program accepts (RANGE_OPEN), so a
 * guard removed here stays correct for sizes above the declared range.
 */
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

enum { MAXF = 4, MAXT = 32 };

typedef struct Term {
    int64_t coeff;
    int nf;
    Expr *f[MAXF]; /* sorted by id */
} Term;

typedef struct Poly {
    int n;
    int64_t k;
    Term t[MAXT];
} Poly;

typedef struct Memo {
    Expr **key, **val;
    size_t cap, count;
} Memo;

typedef struct Simp {
    ExprCtx *c;
    Memo memo;
} Simp;

static Expr *simp(Simp *s, Expr *e);

/* ---- polynomials ---- */

static int cmp_term(const Term *a, const Term *b)
{
    if (a->nf != b->nf)
        return a->nf < b->nf ? -1 : 1;
    for (int i = 0; i < a->nf; i++)
        if (a->f[i] != b->f[i])
            return a->f[i]->id < b->f[i]->id ? -1 : 1;
    return 0;
}

/* Adds coeff * monomial to p; false on overflow of the fixed capacity. */
static bool poly_add_term(Poly *p, const Term *t)
{
    if (t->coeff == 0)
        return true;
    for (int i = 0; i < p->n; i++) {
        if (cmp_term(&p->t[i], t) == 0) {
            if (__builtin_add_overflow(p->t[i].coeff, t->coeff, &p->t[i].coeff))
                return false;
            if (p->t[i].coeff == 0)
                p->t[i] = p->t[--p->n];
            return true;
        }
    }
    if (p->n == MAXT)
        return false;
    p->t[p->n++] = *t;
    return true;
}

static bool poly_add(Poly *p, const Poly *q, int64_t scale)
{
    int64_t k;
    if (__builtin_mul_overflow(q->k, scale, &k) || __builtin_add_overflow(p->k, k, &p->k))
        return false;
    for (int i = 0; i < q->n; i++) {
        Term t = q->t[i];
        if (__builtin_mul_overflow(t.coeff, scale, &t.coeff) || !poly_add_term(p, &t))
            return false;
    }
    return true;
}

static bool term_mul(Term *out, const Term *a, const Term *b)
{
    if (a->nf + b->nf > MAXF || __builtin_mul_overflow(a->coeff, b->coeff, &out->coeff))
        return false;
    int i = 0, j = 0, n = 0;
    while (i < a->nf || j < b->nf) {
        if (j == b->nf || (i < a->nf && a->f[i]->id <= b->f[j]->id))
            out->f[n++] = a->f[i++];
        else
            out->f[n++] = b->f[j++];
    }
    out->nf = n;
    return true;
}

static bool poly_mul(Poly *out, const Poly *a, const Poly *b)
{
    out->n = 0;
    out->k = 0;
    if (__builtin_mul_overflow(a->k, b->k, &out->k))
        return false;
    Term ka = {.coeff = a->k}, kb = {.coeff = b->k};
    for (int i = 0; i < a->n; i++) {
        Term t;
        if (!term_mul(&t, &a->t[i], &kb) || !poly_add_term(out, &t))
            return false;
        for (int j = 0; j < b->n; j++)
            if (!term_mul(&t, &a->t[i], &b->t[j]) || !poly_add_term(out, &t))
                return false;
    }
    for (int j = 0; j < b->n; j++) {
        Term t;
        if (!term_mul(&t, &ka, &b->t[j]) || !poly_add_term(out, &t))
            return false;
    }
    return true;
}

static void poly_atom(Poly *p, Expr *e)
{
    p->k = 0;
    p->n = 1;
    p->t[0].coeff = 1;
    p->t[0].nf = 1;
    p->t[0].f[0] = e;
}

/* A polynomial has at most MAXT terms of MAXF factors: a canonical one is a
 * few hundred nodes. Reading an expression stops after POLY_NODES of them
 * and takes the rest as atoms, so that simplifying a long chain bottom-up
 * (each node reads its children again) stays linear, not quadratic. */
enum { POLY_NODES = 512 };

static void poly_read(Poly *p, Expr *e, int *budget)
{
    Poly a, b;
    p->n = 0;
    p->k = 0;
    if (e->type != DT_I64 || --*budget < 0) {
        poly_atom(p, e);
        return;
    }
    switch (e->kind) {
    case EX_INT: p->k = e->ival; return;
    case EX_ADD: case EX_SUB:
        poly_read(&a, e->op.a, budget);
        poly_read(&b, e->op.b, budget);
        *p = a;
        if (poly_add(p, &b, e->kind == EX_ADD ? 1 : -1))
            return;
        break;
    case EX_NEG:
        poly_read(&a, e->op.a, budget);
        if (poly_add(p, &a, -1))
            return;
        break;
    case EX_MUL:
        poly_read(&a, e->op.a, budget);
        poly_read(&b, e->op.b, budget);
        if (poly_mul(p, &a, &b))
            return;
        break;
    default: break;
    }
    poly_atom(p, e);
}

/* Reads a (canonical) integer expression as a polynomial. */
static void poly_of(Poly *p, Expr *e)
{
    int budget = POLY_NODES;
    poly_read(p, e, &budget);
}

static int qsort_term(const void *a, const void *b) { return cmp_term(a, b); }

static Expr *poly_expr(ExprCtx *c, Poly *p)
{
    qsort(p->t, (size_t)p->n, sizeof(Term), qsort_term);
    Expr *sum = NULL;
    for (int i = 0; i < p->n; i++) {
        Term *t = &p->t[i];
        Expr *m = t->f[0];
        for (int j = 1; j < t->nf; j++)
            m = ir_binop(c, EX_MUL, m, t->f[j]);
        int64_t mag = t->coeff < 0 && t->coeff != INT64_MIN ? -t->coeff : t->coeff;
        if (mag != 1)
            m = ir_binop(c, EX_MUL, m, ir_int(c, mag));
        if (!sum)
            sum = t->coeff < 0 && mag > 0 ? ir_unop(c, EX_NEG, m) : m;
        else
            sum = ir_binop(c, t->coeff < 0 ? EX_SUB : EX_ADD, sum, m);
    }
    if (!sum)
        return ir_int(c, p->k);
    if (p->k > 0)
        sum = ir_binop(c, EX_ADD, sum, ir_int(c, p->k));
    else if (p->k < 0 && p->k != INT64_MIN)
        sum = ir_binop(c, EX_SUB, sum, ir_int(c, -p->k));
    else if (p->k < 0)
        sum = ir_binop(c, EX_ADD, sum, ir_int(c, p->k));
    return sum;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a < 0 ? -a : a;
}

/* floor(r / d) or r mod d for a constant d > 1 when r is g * s + rho for
 * a factor g of d (g the divisor's gcd with one of r's terms) and rho, the
 * terms g does not divide and the constant's remainder, in 0..g - 1: the
 * low part of a flattened index, 64 * i + j for j in 0..63, leaves the
 * division: floor(r / d) is floor(s / (d / g)), r mod d is
 * s mod (d / g) * g + rho. NULL when no term gives such a g. */
static Expr *split_low(ExprCtx *c, const Poly *r, int64_t d, bool is_mod)
{
    for (int i = 0; i < r->n; i++) {
        int64_t g = gcd(d, r->t[i].coeff);
        if (g <= 1 || g >= d)
            continue;
        Poly hi = {0}, lo = {0};
        lo.k = ir_floormod(r->k, g);
        hi.k = ir_floordiv(r->k, g);
        for (int j = 0; j < r->n; j++) {
            Term t = r->t[j];
            if (t.coeff % g == 0) {
                t.coeff /= g;
                poly_add_term(&hi, &t);
            } else {
                poly_add_term(&lo, &t);
            }
        }
        Expr *rho = poly_expr(c, &lo);
        Interval iv = ir_interval(c, rho, RANGE_OPEN);
        if (iv.lo < 0 || iv.hi == IR_POS_INF || iv.hi >= g)
            continue;
        Expr *s = poly_expr(c, &hi), *dg = ir_int(c, d / g);
        if (!is_mod)
            return ir_simplify(c, ir_binop(c, EX_DIV, s, dg));
        Expr *sm = ir_binop(c, EX_MUL, ir_binop(c, EX_MOD, s, dg), ir_int(c, g));
        return ir_simplify(c, ir_binop(c, EX_ADD, sm, rho));
    }
    return NULL;
}

/* floor(p / c) or p mod c for a constant c > 0. The terms c divides
 * leave the division; a factor g that c shares with every term and the
 * constant of what remains, r, is taken out of both: floor(r / c) is
 * floor((r / g) / (c / g)) and r mod c is (r / g) mod (c / g) * g, so
 * that s * 6 / 4 and s * 3 / 2 are one expression. */
static Expr *div_mod_const(ExprCtx *c, Expr *orig, Expr *a, int64_t d, bool is_mod)
{
    Poly p, q = {0}, r = {0};
    poly_of(&p, a);
    q.k = ir_floordiv(p.k, d);
    r.k = ir_floormod(p.k, d);
    for (int i = 0; i < p.n; i++) {
        Term t = p.t[i];
        if (t.coeff % d == 0) {
            t.coeff /= d;
            poly_add_term(&q, &t);
        } else {
            poly_add_term(&r, &t);
        }
    }
    int64_t g = r.n > 0 ? gcd(d, r.k) : 1;
    for (int i = 0; i < r.n && g > 1; i++)
        g = gcd(g, r.t[i].coeff);
    if (g > 1) {
        for (int i = 0; i < r.n; i++)
            r.t[i].coeff /= g;
        r.k /= g;
        d /= g;
    }
    Expr *re = poly_expr(c, &r);
    Interval iv = ir_interval(c, re, RANGE_OPEN);
    int64_t m = 0, md = 0;
    bool fixed = iv.lo != IR_NEG_INF && iv.hi != IR_POS_INF &&
                 ir_floordiv(iv.lo, d) == ir_floordiv(iv.hi, d);
    if (fixed) {
        m = ir_floordiv(iv.lo, d);
        fixed = !__builtin_mul_overflow(m, d, &md);
    }
    Expr *low = fixed || g > 1 ? NULL : split_low(c, &r, d, is_mod);
    if (low)
        return is_mod ? low : ir_simplify(c, ir_binop(c, EX_ADD, poly_expr(c, &q), low));
    if (is_mod) {
        Expr *rm;
        if (fixed)
            rm = ir_binop(c, EX_SUB, re, ir_int(c, md));
        else if (r.n == p.n && r.k == p.k && g == 1)
            return orig->op.a == a ? orig : ir_binop(c, EX_MOD, a, orig->op.b);
        else
            rm = ir_binop(c, EX_MOD, re, ir_int(c, d));
        if (g > 1)
            rm = ir_binop(c, EX_MUL, rm, ir_int(c, g));
        return fixed || g > 1 ? ir_simplify(c, rm) : rm;
    }
    Expr *rest = fixed ? ir_int(c, m) : ir_binop(c, EX_DIV, re, ir_int(c, d));
    if (!fixed && r.n == p.n && r.k == p.k && q.n == 0 && q.k == 0 && g == 1)
        return orig->op.a == a ? orig : ir_binop(c, EX_DIV, a, orig->op.b);
    Poly qr;
    poly_of(&qr, rest);
    if (!poly_add(&q, &qr, 1))
        return ir_binop(c, EX_DIV, a, ir_int(c, d * g));
    return poly_expr(c, &q);
}

/* floor(a / b) or a mod b for b = z * d, a product of factors z >= 1 and
 * a constant d > 1, by d first: floor(floor(a / d) / z), and
 * (floor(a / d) mod z) * d + a mod d, so that a's terms that d divides
 * leave (a reshape's flat index (i * 3072 + j) / (S * 3072) becomes i / S,
 * which no longer varies along j). NULL when b is not such a product. */
static Expr *div_mod_product(ExprCtx *c, Expr *a, Expr *b, bool is_mod)
{
    Poly pb;
    poly_of(&pb, b);
    if (pb.n != 1 || pb.k != 0 || pb.t[0].coeff <= 1 || pb.t[0].nf < 1)
        return NULL;
    int64_t d = pb.t[0].coeff;
    Expr *z = pb.t[0].f[0];
    for (int i = 1; i < pb.t[0].nf; i++)
        z = ir_binop(c, EX_MUL, z, pb.t[0].f[i]);
    if (!ir_prove_nonneg(c, ir_binop(c, EX_SUB, z, ir_int(c, 1)), RANGE_OPEN))
        return NULL;
    Expr *ad = ir_simplify(c, ir_binop(c, EX_DIV, a, ir_int(c, d)));
    if (!is_mod)
        return ir_simplify(c, ir_binop(c, EX_DIV, ad, z));
    Expr *hi = ir_binop(c, EX_MUL, ir_binop(c, EX_MOD, ad, z), ir_int(c, d));
    return ir_simplify(c, ir_binop(c, EX_ADD, hi, ir_binop(c, EX_MOD, a, ir_int(c, d))));
}

/* floor(a / z) or a mod z for a divisor z that is a product of atoms
 * (a dim, or dims): a's terms z divides give y, and when the rest, r, is
 * provably in 0..z - 1 (for every size), floor(a / z) is y and a mod z is
 * r: a reshape's (i + S * j) % S is i and (i + S * j) / S is j for an axis
 * i of extent S. NULL when it is not so. */
static Expr *div_mod_symbolic(ExprCtx *c, Expr *a, Expr *b, bool is_mod)
{
    Poly pa, pb, y = {0}, r = {0};
    poly_of(&pb, b);
    if (pb.n != 1 || pb.k != 0 || pb.t[0].coeff != 1)
        return NULL;
    const Term *z = &pb.t[0];
    poly_of(&pa, a);
    r.k = pa.k;
    for (int i = 0; i < pa.n; i++) {
        Term t = pa.t[i], rest = {.coeff = t.coeff};
        int k = 0; /* z's factors matched, in order: both are sorted by id */
        for (int j = 0; j < t.nf; j++) {
            if (k < z->nf && t.f[j] == z->f[k])
                k++;
            else
                rest.f[rest.nf++] = t.f[j];
        }
        if (k == z->nf) {
            if (rest.nf == 0) { /* a constant times z: a term of y all the same */
                y.k += rest.coeff;
                continue;
            }
            if (!poly_add_term(&y, &rest))
                return NULL;
        } else if (!poly_add_term(&r, &t)) {
            return NULL;
        }
    }
    if (y.n == 0 && y.k == 0)
        return NULL;
    Expr *re = poly_expr(c, &r), *one = ir_int(c, 1);
    if (!ir_prove_nonneg(c, re, RANGE_OPEN) ||
        !ir_prove_nonneg(c, ir_binop(c, EX_SUB, ir_binop(c, EX_SUB, b, re), one), RANGE_OPEN))
        return NULL;
    return is_mod ? re : poly_expr(c, &y);
}

/* ---- folding ---- */

static bool fconst(const Expr *e, double *v)
{
    if (e->kind == EX_FLOAT) {
        *v = e->fval;
        return true;
    }
    return false;
}


/* Folds an integer comparison a K b using interval analysis. -1: unknown. */
static int decide_cmp(ExprCtx *c, ExprKind k, Expr *a, Expr *b)
{
    Expr *d = ir_simplify(c, ir_binop(c, EX_SUB, b, a)); /* b - a */
    int64_t v;
    if (ir_is_const(d, &v))
        return ir_sem_compare_int(k, 0, v);
    Expr *one = ir_int(c, 1);
    switch (k) {
    case EX_LT: /* b - a >= 1 */
        if (ir_prove_nonneg(c, ir_binop(c, EX_SUB, d, one), RANGE_OPEN)) return 1;
        if (ir_prove_nonneg(c, ir_unop(c, EX_NEG, d), RANGE_OPEN)) return 0;
        return -1;
    case EX_LE:
        if (ir_prove_nonneg(c, d, RANGE_OPEN)) return 1;
        if (ir_prove_nonneg(c, ir_binop(c, EX_SUB, ir_unop(c, EX_NEG, d), one), RANGE_OPEN))
            return 0;
        return -1;
    default: {
        Interval iv = ir_interval(c, d, RANGE_OPEN);
        if (iv.lo > 0 || iv.hi < 0)
            return k == EX_NE;
        return -1;
    }
    }
}

static Expr *fold_op(Simp *s, Expr *e)
{
    ExprCtx *c = s->c;
    ExprKind k = e->kind;
    Expr *a = e->op.a, *b = e->op.b, *x = e->op.c;
    double fa, fb;
    int64_t ia, ib;

    if (e->type == DT_I64 && (k == EX_ADD || k == EX_SUB || k == EX_MUL || k == EX_NEG)) {
        Poly p;
        poly_of(&p, e);
        return poly_expr(c, &p);
    }
    switch (k) {
    case EX_DIV: case EX_MOD:
        if (e->type != DT_I64)
            break;
        if (ir_is_const(b, &ib) && ib != 0) {
            if (ir_is_const(a, &ia))
                return ir_int(c, ir_sem_int(k, ia, ib));
            if (ib == 1)
                return k == EX_DIV ? a : ir_int(c, 0);
            if (ib > 0)
                return div_mod_const(c, e, a, ib, k == EX_MOD);
            return e;
        }
        {
            Expr *r = div_mod_symbolic(c, a, b, k == EX_MOD);
            /* floor(floor(x / d) / z) is floor(floor(x / z) / d) for d > 0, z >= 1 (the
             * second a proof of the first's): a reshape's (64 * (i + S * j) + l) / 768 / S */
            if (!r && k == EX_DIV && a->kind == EX_DIV && ir_is_const(a->op.b, &ia) && ia > 0 &&
                (r = div_mod_symbolic(c, a->op.a, b, false)))
                r = ir_simplify(c, ir_binop(c, EX_DIV, r, a->op.b));
            if (!r)
                r = div_mod_product(c, a, b, k == EX_MOD);
            return r ? r : e;
        }
    case EX_MIN: case EX_MAX:
        if (e->type != DT_I64)
            break;
        if (a == b)
            return a;
        switch (decide_cmp(c, EX_LE, a, b)) {
        case 1: return k == EX_MIN ? a : b;
        case 0: return k == EX_MIN ? b : a;
        default: return e;
        }
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE:
        if (a->type == DT_F32) {
            if (fconst(a, &fa) && fconst(b, &fb))
                return ir_bool(c, ir_sem_compare(k, fa, fb));
            return e;
        }
        if (a == b)
            return ir_bool(c, k == EX_LE || k == EX_EQ);
        switch (decide_cmp(c, k, a, b)) {
        case 1: return ir_bool(c, true);
        case 0: return ir_bool(c, false);
        default: return e;
        }
    case EX_AND: case EX_OR: {
        bool is_and = k == EX_AND;
        if (ir_is_const(a, &ia))
            return (ia != 0) == is_and ? b : a;
        if (ir_is_const(b, &ib))
            return (ib != 0) == is_and ? a : b;
        return a == b ? a : e;
    }
    case EX_NOT:
        if (ir_is_const(a, &ia))
            return ir_bool(c, !ia);
        return e;
    case EX_SELECT:
        if (ir_is_const(a, &ia))
            return ia ? b : x;
        return b == x ? b : e;
    case EX_SHFL_XOR: /* a value every thread holds is every thread's */
        return fconst(a, &fa) ? a : e;
    case EX_ABS: case EX_RELU:
        if (e->type == DT_I64) {
            if (ir_is_const(a, &ia))
                return ir_int(c, ir_sem_int(k, ia, 0));
            Interval iv = ir_interval(c, a, RANGE_OPEN);
            if (iv.lo >= 0)
                return a;
            return e;
        }
        break;
    case EX_I32: { /* i32(a): a itself where a's values fit */
        if (fconst(a, &fa))
            return ir_int(c, ir_sem_f32_to_i32(fa));
        if (ir_is_const(a, &ia))
            return ir_int(c, ir_sem_wrap32(ia));
        if (a->type == DT_F32)
            return e;
        Interval iv = ir_interval(c, a, RANGE_OPEN);
        return a->type == DT_I64 && iv.lo >= INT32_MIN && iv.hi <= INT32_MAX ? a : e;
    }
    case EX_POW:
        break;
    default:
        break;
    }
    if (e->type != DT_F32)
        return e;
    /* float arithmetic */
    if (ir_op_arity(k) == 1 && fconst(a, &fa))
        return ir_float(c, ir_sem_float(k, fa, 0));
    if (ir_op_arity(k) == 2 && fconst(a, &fa) && fconst(b, &fb))
        return ir_float(c, ir_sem_float(k, fa, fb));
    double fx;
    if (k == EX_FMA && fconst(a, &fa) && fconst(b, &fb) && fconst(x, &fx))
        return ir_float(c, ir_sem_fma(fa, fb, fx));
    if (k == EX_MUL && fconst(b, &fb) && fb == 1.0) return a;
    if (k == EX_MUL && fconst(a, &fa) && fa == 1.0) return b;
    if ((k == EX_ADD || k == EX_SUB) && fconst(b, &fb) && fb == 0.0) return a;
    if (k == EX_ADD && fconst(a, &fa) && fa == 0.0) return b;
    if (k == EX_DIV && fconst(b, &fb) && fb == 1.0) return a;
    return e;
}

static Expr *fold_cast(ExprCtx *c, Expr *e, Expr *a)
{
    int64_t v;
    double f;
    if (e->type == DT_F32 && ir_is_const(a, &v))
        return ir_float(c, ir_sem_i2f(v));
    if (e->type == DT_I64 && fconst(a, &f))
        return ir_int(c, ir_sem_f32_to_i64(f));
    return a == e->op.a ? e : ir_cast(c, e->type, a);
}

/* ---- the walk, memoised per call ---- */

static Expr **memo_slot(Memo *m, Expr *key)
{
    size_t j = key->hash & (m->cap - 1);
    while (m->key[j] && m->key[j] != key)
        j = (j + 1) & (m->cap - 1);
    return &m->key[j];
}

static Expr *memo_get(Memo *m, Expr *key)
{
    Expr **slot = memo_slot(m, key);
    return *slot ? m->val[slot - m->key] : NULL;
}

static void memo_put(Memo *m, Expr *key, Expr *val)
{
    if ((m->count + 1) * 2 > m->cap) {
        Memo n = {calloc(m->cap * 2, sizeof(Expr *)), calloc(m->cap * 2, sizeof(Expr *)),
                  m->cap * 2, 0};
        if (!n.key || !n.val)
            ir_panic(__FILE__, __LINE__, "out of memory");
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i])
                memo_put(&n, m->key[i], m->val[i]);
        free(m->key);
        free(m->val);
        *m = n;
    }
    Expr **slot = memo_slot(m, key);
    if (!*slot)
        m->count++;
    *slot = key;
    m->val[slot - m->key] = val;
}

static Expr *simp_uncached(Simp *s, Expr *e)
{
    ExprCtx *c = s->c;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR:
        return e;
    case EX_LOAD: {
        Expr *buf[16], **idx = e->load.n <= 16 ? buf : IR_NEWN(ir_ctx_arena(c), Expr *, e->load.n);
        for (int i = 0; i < e->load.n; i++)
            idx[i] = simp(s, e->load.idx[i]);
        return ir_load(c, e->load.t, e->load.n, idx, e->load.padded);
    }
    case EX_REDUCE:
        return ir_reduce(c, e->red.op, e->red.n, e->red.axes, simp(s, e->red.body));
    case EX_CAST:
        return fold_cast(c, e, simp(s, e->op.a));
    default: {
        Expr *a = e->op.a ? simp(s, e->op.a) : NULL;
        Expr *b = e->op.b ? simp(s, e->op.b) : NULL;
        Expr *x = e->op.c ? simp(s, e->op.c) : NULL;
        Expr *n = (a == e->op.a && b == e->op.b && x == e->op.c) ? e : ir_op(c, e->kind, a, b, x);
        return fold_op(s, n);
    }
    }
}

static Expr *simp(Simp *s, Expr *e)
{
    Expr *r = memo_get(&s->memo, e);
    if (!r) {
        r = simp_uncached(s, e);
        memo_put(&s->memo, e, r);
    }
    return r;
}

/* The walk in progress on this thread, if any. Folding a comparison or a
 * min/max asks interval analysis, which simplifies again (decide_cmp,
 * ir_prove_nonneg); those nested calls share the outer call's memo, or a
 * chain of n clamps min(max(...)) would take time exponential in n. The
 * memo is valid for the whole outer call: nothing changes a range while
 * it runs. Set only for the duration of that call. */
static _Thread_local Simp *active;

Expr *ir_simplify(ExprCtx *c, Expr *e)
{
    if (active && active->c == c)
        return simp(active, e);
    Simp s = {c, {calloc(64, sizeof(Expr *)), calloc(64, sizeof(Expr *)), 64, 0}};
    if (!s.memo.key || !s.memo.val)
        ir_panic(__FILE__, __LINE__, "out of memory");
    Simp *outer = active;
    active = &s;
    Expr *r = simp(&s, e);
    active = outer;
    free(s.memo.key);
    free(s.memo.val);
    return r;
}
