/* Unit tests for the reference interpreter's fast paths: batches of lanes,
 * values shared by all lanes, lazily evaluated sub-batches and threads.
 *
 * The oracle is a naive point-by-point tree walk kept here: the form the
 * interpreter had before it was made fast, and the clearest statement of
 * what it computes. Every program runs through both and the outputs must
 * agree bit for bit. Plain accesses out of bounds must fail the run, except
 * where select, && or || or an earlier padded index skips them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/runtime.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ---- the oracle ---- */

typedef struct Naive {
    const int64_t *dims;
    float **bufs;
    int64_t (*ext)[16];
    int64_t *env; /* per Var id */
    const char *fault;
} Naive;

static double naive_f(Naive *it, const Expr *e);

/* Scalar operators take ir/semantics.c's table, as every evaluator does:
 * what is checked here is the walk, not the arithmetic. */
static int64_t naive_i(Naive *it, const Expr *e)
{
    switch (e->kind) {
    case EX_INT: return e->ival;
    case EX_VAR: return e->var->kind == VK_DIM ? it->dims[e->var->pos] : it->env[e->var->id];
    case EX_CAST:
        if (e->op.a->type == DT_F32)
            return ir_sem_f32_to_i64(naive_f(it, e->op.a));
        return naive_i(it, e->op.a);
    case EX_I32:
        if (e->op.a->type == DT_F32)
            return ir_sem_f32_to_i32(naive_f(it, e->op.a));
        return ir_sem_wrap32(naive_i(it, e->op.a));
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE:
        if (e->op.a->type == DT_F32)
            return ir_sem_compare(e->kind, naive_f(it, e->op.a), naive_f(it, e->op.b));
        return ir_sem_compare_int(e->kind, naive_i(it, e->op.a), naive_i(it, e->op.b));
    case EX_AND: return naive_i(it, e->op.a) && naive_i(it, e->op.b);
    case EX_OR: return naive_i(it, e->op.a) || naive_i(it, e->op.b);
    case EX_NOT: return !naive_i(it, e->op.a);
    case EX_SELECT: return naive_i(it, e->op.a) ? naive_i(it, e->op.b) : naive_i(it, e->op.c);
    case EX_NEG: case EX_ABS: case EX_RELU: return ir_sem_int(e->kind, naive_i(it, e->op.a), 0);
    case EX_REDUCE: return (int64_t)naive_f(it, e);
    default: return ir_sem_int(e->kind, naive_i(it, e->op.a), naive_i(it, e->op.b));
    }
}

static double naive_load(Naive *it, const Expr *e)
{
    const Tensor *t = e->load.t;
    int64_t off = 0;
    for (int i = 0; i < e->load.n; i++) {
        int64_t x = naive_i(it, e->load.idx[i]);
        if (x < 0 || x >= it->ext[t->id][i]) {
            if (!e->load.padded && !it->fault)
                it->fault = t->name;
            return 0.0;
        }
        off = off * it->ext[t->id][i] + x;
    }
    return it->bufs[t->id][off];
}

static void naive_reduce(Naive *it, const Expr *e, int k, double *acc)
{
    if (k == e->red.n) {
        double v = naive_f(it, e->red.body);
        switch (e->red.op) {
        case RD_SUM: *acc += v; break;
        case RD_PROD: *acc *= v; break;
        case RD_MAX: *acc = ir_sem_float(EX_MAX, *acc, v); break;
        case RD_MIN: *acc = ir_sem_float(EX_MIN, *acc, v); break;
        }
        return;
    }
    const Var *ax = e->red.axes[k];
    int64_t n = ir_eval_dims(ax->extent, it->dims);
    for (int64_t i = 0; i < n && !it->fault; i++) {
        it->env[ax->id] = i;
        naive_reduce(it, e, k + 1, acc);
    }
}

static double naive_f(Naive *it, const Expr *e)
{
    switch (e->kind) {
    case EX_FLOAT: return e->fval;
    case EX_LOAD: return naive_load(it, e);
    case EX_CAST:
        if (e->type == DT_F32)
            return ir_sem_i2f(naive_i(it, e->op.a));
        break;
    case EX_SELECT: return naive_i(it, e->op.a) ? naive_f(it, e->op.b) : naive_f(it, e->op.c);
    case EX_FMA: {
        double a = naive_f(it, e->op.a), b = naive_f(it, e->op.b);
        return ir_sem_fma(a, b, naive_f(it, e->op.c));
    }
    case EX_REDUCE: {
        double acc = ir_reduce_identity(e->red.op);
        naive_reduce(it, e, 0, &acc);
        return (double)(float)acc;
    }
    default: break;
    }
    if (e->type != DT_F32)
        return (double)naive_i(it, e);
    double a = naive_f(it, e->op.a);
    double b = ir_op_arity(e->kind) == 2 ? naive_f(it, e->op.b) : 0.0;
    return ir_sem_float(e->kind, a, b);
}

/* The oracle's ir_interp: 0, or -1 naming the tensor read out of bounds. */
static int naive_interp(const TeProgram *p, const int64_t *dims, float **bufs, char *err,
                        size_t errlen)
{
    int64_t (*ext)[16] = calloc((size_t)p->ntensors, sizeof *ext);
    Naive it = {dims, bufs, ext, calloc((size_t)ir_var_count(p->ctx) + 1, sizeof(int64_t)),
                NULL};
    for (int i = 0; i < p->ntensors; i++)
        for (int j = 0; j < p->tensors[i]->rank; j++)
            ext[i][j] = ir_eval_dims(p->tensors[i]->shape[j], dims);
    for (int i = 0; i < p->ntensors && !it.fault; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT)
            continue;
        int64_t n = ir_te_numel(t, dims);
        /* the body as the language defines it: contracted (ir/semantics.c) */
        Expr *body = p->fp_contract_off ? t->body : ir_contract(p->ctx, t->body);
        for (int64_t flat = 0; flat < n && !it.fault; flat++) {
            int64_t rem = flat;
            for (int k = t->rank - 1; k >= 0; k--) {
                it.env[t->axes[k]->id] = rem % ext[i][k];
                rem /= ext[i][k];
            }
            bufs[i][flat] = (float)naive_f(&it, body);
        }
    }
    free(ext);
    free(it.env);
    if (it.fault) {
        snprintf(err, errlen, "access to %s out of bounds for these sizes", it.fault);
        return -1;
    }
    return 0;
}

/* ---- running both ---- */

typedef int (*InterpFn)(const TeProgram *, const int64_t *, float **, char *, size_t);

typedef struct Run {
    int rc;
    char err[256];
    float **bufs;
} Run;

/* Runs p with seeded inputs; outputs start as NaN so an unwritten point shows. */
static Run run_with(InterpFn fn, const TeProgram *p, const int64_t *dims, uint64_t seed)
{
    Run r = {.bufs = calloc((size_t)p->ntensors, sizeof(float *))};
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        int64_t n = ir_te_numel(t, dims);
        r.bufs[i] = malloc((size_t)n * sizeof(float));
        if (t->kind == TK_INPUT)
            rt_rng_fill(seed, rt_rng_hash(t->name), r.bufs[i], (size_t)n);
        else
            for (int64_t k = 0; k < n; k++)
                r.bufs[i][k] = NAN;
    }
    r.rc = fn(p, dims, r.bufs, r.err, sizeof r.err);
    return r;
}

static void release(const TeProgram *p, Run *r)
{
    for (int i = 0; i < p->ntensors; i++)
        free(r->bufs[i]);
    free(r->bufs);
}

/* Runs p through ir_interp and the oracle; both must succeed with the same
 * bytes in every computed tensor. */
static void check_same(const TeProgram *p, const int64_t *dims, uint64_t seed)
{
    Run fast = run_with(ir_interp, p, dims, seed), slow = run_with(naive_interp, p, dims, seed);
    if (fast.rc != 0 || slow.rc != 0)
        fail_msg("%s: ir_interp %d (%s), oracle %d (%s)", p->name, fast.rc, fast.err, slow.rc,
                 slow.err);
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        int64_t n = ir_te_numel(t, dims);
        if (t->kind != TK_INPUT && memcmp(fast.bufs[i], slow.bufs[i], (size_t)n * 4) != 0) {
            int64_t k = 0;
            while (memcmp(&fast.bufs[i][k], &slow.bufs[i][k], 4) == 0)
                k++;
            fail_msg("%s: tensor %s differs at flat index %lld: %.9g, oracle %.9g", p->name,
                     t->name, (long long)k, fast.bufs[i][k], slow.bufs[i][k]);
        }
    }
    release(p, &fast);
    release(p, &slow);
}

typedef struct Compiled {
    FeUnit u;
    TeProgram *p;
} Compiled;

static Compiled compile(const char *text)
{
    Compiled c;
    if (fe_load_text("t.tex", "t", text, &c.u) != 0)
        fail_msg("does not compile: %s", c.u.diags.head ? c.u.diags.head->msg : "?");
    c.p = c.u.prog;
    return c;
}

static void destroy(Compiled *c) { fe_unload(&c->u); }

/* Checks a program with one dim T at each of the given sizes and two seeds. */
static void check_sizes(const char *text, const int64_t *sizes, int nsizes)
{
    Compiled c = compile(text);
    for (int i = 0; i < nsizes; i++)
        for (uint64_t seed = 1; seed <= 2; seed++)
            check_same(c.p, &sizes[i], seed);
    destroy(&c);
}

static const int64_t SIZES[] = {1, 2, 13, 40};
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])

/* ---- programs ---- */

static void test_float_operators(void **state)
{
    (void)state;
    check_sizes("dim T in 1..40\n"
                "input X[T, 7] f32\n"
                "input Y[7] f32\n"
                "input s[] f32\n"
                "output A[i: T, j: 7] = select(X[i, j] > 0.0 && Y[j] < 0.5 || !(X[i, j] <= Y[j]),"
                " X[i, j] * s, Y[j] - s[])\n"
                "output B[i: T, j: 7] = exp(X[i, j]) + log(abs(X[i, j]) + 0.1)"
                " - sqrt(abs(Y[j])) * rsqrt(abs(X[i, j]) + 1e-3)\n"
                "output C[i: T, j: 7] = tanh(X[i, j] * 3.0) / erf(Y[j] + 2.0)"
                " + sigmoid(X[i, j] * 5.0) - relu(X[i, j]) + gelu(Y[j] * 4.0)\n"
                "output D[i: T, j: 7] = pow(abs(X[i, j]), Y[j] * 3.0) + max(X[i, j], Y[j])"
                " - min(X[i, j], s) + X[i, j] % 0.3 + -X[i, j]\n"
                "output E[i: T, j: 7] = select(X[i, j] == X[i, j] && X[i, j] != Y[j], 1.5,"
                " select(X[i, j] >= 0.0, 2, -3.0)) + f32(X[i, j] < Y[j])\n",
                SIZES, NSIZES);
}

static void test_integer_operators(void **state)
{
    (void)state;
    check_sizes("dim T in 1..40\n"
                "input X[T, 9] f32\n"
                "output A[i: T, j: 9] = (i - 7) / 3 + (j - 5) % 4 * 10 + (i * j - 20) / 7"
                " - (3 - i * 5) % 6\n"
                "output B[i: T, j: 9] = i32(X[i, j] * 100.0) / 7 + i32(X[i, j] * 100.0) % 7 * 1000"
                " + i32(X[i, j] * 1e12) + i32(X[i, j] * 0.0 / 0.0)\n"
                "output C[i: T, j: 9] = f32(max(i - 3, j) * min(j - 4, i))"
                " + f32(abs(j - 4) + relu(i - 2) - -j) + f32(i32(i < j))\n"
                "output D[i: T, j: 9] = select(i < j || j == 3, i * 3, j - i)"
                " + select(!(i >= 2) && i != 1, 5, 7) + f32(T - i) / 3\n"
                "output E[i: T, j: 9] = f32(i * 1000000007 * 1000000009 * 998244353)"
                " + f32(-(i + 1) * 2147483647 * 2147483647 * 3) + pow(2, j)"
                " + f32(i32(X[i, j] * 3.0) / (j + 1)) + f32(i32(X[i, j] * 3.0) % (i + 2))\n",
                SIZES, NSIZES);
}

static void test_reductions(void **state)
{
    (void)state;
    check_sizes("dim T in 1..40\n"
                "input X[T, 6, 5] f32\n"
                "input W[5, 6] f32\n"
                "input s[] f32\n"
                "output A[i: T] = sum[j: 6, k: 5](X[i, j, k] * W[k, j])\n"
                "output B[i: T, j: 6] = max[k: 5](X[i, j, k]) - min[k: 5](X[i, j, k] * s)\n"
                "output C[i: T] = prod[j: 6, k: 5](X[i, j, k] + 1.0)\n"
                "output D[i: T, k: 5] = sum[j: 6](X[i, j, k]"
                " * max[m: 5](X[i, j, m] * sum[n: 6](W[m, n])))\n"
                "output E[i: T] = f32(sum[j: 6](j * i - 3)) + f32(max[k: 5](k - i))"
                " + f32(prod[k: 3](k + i)) + f32(sum[j: 6](i * 100000007 * 1000 + j))"
                " + f32(min[j: 6](i32(X[i, j, 0] * 10.0)))\n"
                "output F[] = sum[i: T, j: 6](X[i, j, 1]) + s\n"
                "output G[i: T] = max[j: 6, k: 5](select(X[i, j, k] > 0.9, 0.0 / 0.0, X[i, j, k]))\n"
                "output H[i: T, j: 5] = select(X[i, 0, j] > 0.0, sum[k: 5](X[i, 1, k] * W[k, 0]),"
                " max[k: T](X[k, 2, j]))\n"
                "output I[i: T] = sum[j: 6](sum[k: 5](X[i, j, k] * 0.1))"
                " + select(sum[k: 5](X[i, 0, k]) < 0.3, 1.0, 0.0)\n",
                SIZES, NSIZES);
}

/* Intermediates, and batches that cross rows of small extents. */
static void test_chains(void **state)
{
    (void)state;
    check_sizes("dim T in 1..40\n"
                "input X[T, 3, 70] f32\n"
                "input s[] f32\n"
                "A[i: T, c: 3, j: 70] = X[i, c, j] * s + f32(c)\n"
                "B[i: T, c: 3] = sum[j: 70](A[i, c, j] * A[i, c, 69 - j])\n"
                "C[c: 3, j: 70] = max[i: T](A[i, c, j]) - min[i: T](A[i, c, j])\n"
                "output D[i: T, c: 3, j: 70] = (A[i, c, j] - B[i, c]) / (C[c, j] + 1.0) + s[]\n"
                "output E[j: 70] = sum[i: T, c: 3](D[i, c, j] * f32(i - c))\n",
                SIZES, NSIZES);
}

static void test_padded(void **state)
{
    (void)state;
    Compiled c = compile(
        "dim N in 1..5\n"
        "dim H in 3..20\n"
        "input I[N, 2, H, H] f32\n"
        "input F[3, 2, 3, 3] f32\n"
        "output O[n: N, k: 3, y: H, x: H] ="
        " sum[c: 2, r: 3, s: 3](I?[n, c, y + r - 1, x + s - 1] * F[k, c, r, s])\n"
        "output P[n: N, y: H] = I?[n, y - 1, y % 2 - 1, y * 7 % 5 - 2] + I?[n + 1, 0, y + 1, y]\n"
        "output Q[y: H, x: H] = I?[0, 0, i32(I[0, 0, y, x] * 4.0), i32(I[0, 1, x, y] * 3.0) + 2]\n");
    static const int64_t dims[][2] = {{1, 3}, {2, 9}, {5, 20}};
    for (int i = 0; i < 3; i++)
        check_same(c.p, dims[i], 1);
    destroy(&c);
}

/* Large enough to be split between threads; the result must not depend on
 * how many there are. */
static void test_threads(void **state)
{
    (void)state;
    Compiled c = compile("dim T in 1..64\n"
                         "input X[T, 256] f32\n"
                         "input W[300, 256] f32\n"
                         "input b[300] f32\n"
                         "output Y[i: T, j: 300] = sum[k: 256](X[i, k] * W[j, k]) + b[j]\n");
    int64_t T = 9;
    check_same(c.p, &T, 3);
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    Run many = run_with(ir_interp, c.p, &T, 3);
    CPU_ZERO(&one);
    for (int k = 0; k < CPU_SETSIZE; k++)
        if (CPU_ISSET(k, &all)) {
            CPU_SET(k, &one);
            break;
        }
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    Run single = run_with(ir_interp, c.p, &T, 3);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(many.rc, 0);
    assert_int_equal(single.rc, 0);
    assert_memory_equal(many.bufs[3], single.bufs[3], T * 300 * sizeof(float));
    release(c.p, &many);
    release(c.p, &single);
    destroy(&c);
}

/* ---- accesses out of bounds, in hand-built programs sema would reject ---- */

typedef struct Fx {
    TeProgram *p;
    ExprCtx *c;
    Tensor *X, *Z; /* X[4, 4], Z[4] */
    Var *i;        /* the output axis, 0..3 */
} Fx;

static Fx fixture(void)
{
    Fx f = {.p = ir_te_new("oob")};
    f.c = f.p->ctx;
    Expr *four = ir_int(f.c, 4);
    Expr *shape[2] = {four, four};
    f.X = ir_te_add_input(f.p, "X", DT_F32, 2, shape);
    f.Z = ir_te_add_input(f.p, "Z", DT_F32, 1, shape);
    f.i = ir_var(f.c, "i", VK_AXIS, four);
    return f;
}

static Expr *at2(Fx *f, Tensor *t, Expr *a, Expr *b, bool padded)
{
    Expr *idx[2] = {a, b};
    return ir_load(f->c, t, 2, idx, padded);
}

static Expr *at1(Fx *f, Tensor *t, Expr *a) { return ir_load(f->c, t, 1, &a, false); }

/* Adds Y[i: 4] = body; runs both interpreters; both must agree, and fail
 * naming `fault` or succeed when it is NULL. */
static void check_oob(Fx *f, Expr *body, const char *fault)
{
    ir_te_add_compute(f->p, "Y", TK_OUTPUT, 1, &f->i, body);
    int64_t dims[1] = {0};
    Run fast = run_with(ir_interp, f->p, dims, 1), slow = run_with(naive_interp, f->p, dims, 1);
    assert_int_equal(slow.rc, fault ? -1 : 0);
    assert_int_equal(fast.rc, slow.rc);
    if (fault) {
        char want[128];
        snprintf(want, sizeof want, "access to %s out of bounds for these sizes", fault);
        assert_string_equal(fast.err, want);
        assert_string_equal(slow.err, want);
    } else {
        assert_memory_equal(fast.bufs[2], slow.bufs[2], 4 * sizeof(float));
    }
    release(f->p, &fast);
    release(f->p, &slow);
    ir_te_destroy(f->p);
}

static Expr *num(Fx *f, int64_t v) { return ir_int(f->c, v); }
static Expr *flt(Fx *f, double v) { return ir_float(f->c, v); }
static Expr *op(Fx *f, ExprKind k, Expr *a, Expr *b) { return ir_binop(f->c, k, a, b); }

static void test_out_of_bounds(void **state)
{
    (void)state;
    /* Z[i + 1] reads Z[4] at i = 3 */
    Fx f = fixture();
    Expr *i = ir_varref(f.c, f.i);
    check_oob(&f, at1(&f, f.Z, op(&f, EX_ADD, i, num(&f, 1))), "Z");

    /* sum[k: 5](Z[k]) */
    f = fixture();
    Var *k = ir_var(f.c, "k", VK_AXIS, num(&f, 5));
    check_oob(&f, ir_reduce(f.c, RD_SUM, 1, &k, at1(&f, f.Z, ir_varref(f.c, k))), "Z");

    /* X?[i, i - 1] reads 0 at i = 0 */
    f = fixture();
    i = ir_varref(f.c, f.i);
    check_oob(&f, at2(&f, f.X, i, op(&f, EX_SUB, i, num(&f, 1)), true), NULL);
}

static void test_skipped_accesses(void **state)
{
    (void)state;
    /* select(i < 3, Z[i + 1], 0.0): Z[4] is never read */
    Fx f = fixture();
    Expr *i = ir_varref(f.c, f.i);
    Expr *in = op(&f, EX_LT, i, num(&f, 3)), *next = at1(&f, f.Z, op(&f, EX_ADD, i, num(&f, 1)));
    check_oob(&f, ir_select(f.c, in, next, flt(&f, 0.0)), NULL);

    /* select(i < 3 && 0.0 < Z[i + 1], 1.0, 2.0) */
    f = fixture();
    i = ir_varref(f.c, f.i);
    in = op(&f, EX_LT, i, num(&f, 3));
    next = at1(&f, f.Z, op(&f, EX_ADD, i, num(&f, 1)));
    Expr *both = op(&f, EX_AND, in, op(&f, EX_LT, flt(&f, 0.0), next));
    check_oob(&f, ir_select(f.c, both, flt(&f, 1.0), flt(&f, 2.0)), NULL);

    /* select(3 <= i || 0.0 < Z[i + 1], 1.0, 2.0) */
    f = fixture();
    i = ir_varref(f.c, f.i);
    Expr *out = op(&f, EX_LE, num(&f, 3), i);
    next = at1(&f, f.Z, op(&f, EX_ADD, i, num(&f, 1)));
    Expr *either = op(&f, EX_OR, out, op(&f, EX_LT, flt(&f, 0.0), next));
    check_oob(&f, ir_select(f.c, either, flt(&f, 1.0), flt(&f, 2.0)), NULL);

    /* X?[i - 1, i32(Z[4 - i] * 4.0)]: at i = 0 the first index is out, Z[4] unread */
    f = fixture();
    i = ir_varref(f.c, f.i);
    Expr *back = at1(&f, f.Z, op(&f, EX_SUB, num(&f, 4), i));
    Expr *gather = ir_cast(f.c, DT_I32, op(&f, EX_MUL, back, flt(&f, 4.0)));
    check_oob(&f, at2(&f, f.X, op(&f, EX_SUB, i, num(&f, 1)), gather, true), NULL);

    /* ...but X?[i, i32(Z[4 - i])] reads Z[4] */
    f = fixture();
    i = ir_varref(f.c, f.i);
    back = at1(&f, f.Z, op(&f, EX_SUB, num(&f, 4), i));
    check_oob(&f, at2(&f, f.X, i, ir_cast(f.c, DT_I32, back), true), "Z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_operators),
        cmocka_unit_test(test_integer_operators),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_chains),
        cmocka_unit_test(test_padded),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_out_of_bounds),
        cmocka_unit_test(test_skipped_accesses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
