/* The scalar semantics of the language: one table, every evaluator.
 *
 * Each operator's meaning on integers and on floats is written here once,
 * as plain C, and everything that evaluates an expression in C calls it:
 * the simplifier's constant folding, the extents of ir_eval_dims, the
 * reference interpreter and the loop-IR interpreter. Code generation
 * (codegen/llvm.c, and the host function of codegen/host.c through it)
 * emits the same rules as LLVM IR; tests/unit/test_semantics.c runs every
 * corner case below through the JIT, the loop interpreter and the
 * reference and requires the same bits.
 *
 * Integers (every integer, an i32 tensor's element too, is computed in 64
 * bits; an i32 tensor stores i32() of the value):
 *   + - * and negation wrap (two's complement); abs(INT64_MIN) = INT64_MIN
 *   a / b  floor division (rounds toward minus infinity); a / 0 = 0;
 *          a / -1 = -a, wrapping, so INT64_MIN / -1 = INT64_MIN
 *   a % b  floor modulo (the sign of b), a - b * (a / b); a % 0 = 0; a % -1 = 0
 *   min max as written; relu(a) = max(a, 0)
 *   i32(a) of an integer: its low 32 bits as a signed value (wraps)
 *   i32(x) of a float: truncates toward zero, saturates, NaN is 0
 *   i64(x) of a float: the same in the i64 range; i64(a) of an integer: a
 *   i32(c), i64(c), f32(c) of a condition: 1 or 0
 *   bool(a) is a != 0 (so bool(NaN) holds, as in C and numpy)
 *   checked(i, n, pos), a gather's index: i, or i + n when i < 0, if that
 *          lies in 0..n-1; else the run fails (and the index reads as 0)
 *   f32(a) of an integer: rounded to the nearest f32
 *
 * Floats are IEEE 754 binary32, each operator rounded to f32:
 *   + - * / as IEEE; a % b = a - b * floor(a / b), each step rounded
 *   max min: IEEE 754-2019 maximum and minimum, as numpy's maximum and
 *          minimum: NaN if either operand is NaN, and +0 > -0; so a max or
 *          min reduction over values with a NaN is NaN
 *   relu(x) = max(x, 0) (so relu(NaN) is NaN); abs; negation
 *   exp log sqrt pow tanh erf: the C library's f32 functions (the GPU's
 *          libdevice or its approximations differ in the last bits)
 *   rsqrt(x) = 1 / sqrt(x); sigmoid(x) = 1 / (1 + exp(-x));
 *   gelu(x) = 0.5 * x * (1 + erf(x * 0.70710678))
 *   comparisons are ordered: with a NaN, < <= == are false and != true
 *   fma(x, y, z) = x * y + z rounded once (C's fmaf)
 *
 * Contraction (docs/LANGUAGE.md), unless the program says fp-contract
 * off: in a tensor's body as written, an f32 + or - one of whose operands
 * is an f32 * (the left one when both are) is one fma:
 *   x*y + z, z + x*y -> fma(x, y, z)     x*y - z -> fma(x, y, -z)
 *   z - x*y -> fma(-x, y, z)
 * (negation is exact, so each is the sum rounded once). ir_contract is the
 * rule, the only place it is written: the reference interpreter applies it
 * to each body, passes/inline.c to each body before inlining, so what the
 * loop IR and every code generator see is explicit fma nodes, never a
 * pattern to match again (a product inlined from another tensor stays a
 * rounded product). A sum's step acc + x*y is fma(x, y, acc)
 * (ir_accumulate, in the loop IR only: the reference accumulates in
 * double, and a reduction's order depends on its schedule anyway).
 */
#include "dietcode/ir.h"
#include "dietcode/runtime.h"

static int64_t wrap(uint64_t v) { return (int64_t)v; }

int64_t ir_floordiv(int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    if (b == -1)
        return wrap(0 - (uint64_t)a);
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

int64_t ir_floormod(int64_t a, int64_t b)
{
    if (b == 0 || b == -1)
        return 0;
    int64_t r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

int64_t ir_sem_int(ExprKind k, int64_t a, int64_t b)
{
    switch (k) {
    case EX_ADD: return wrap((uint64_t)a + (uint64_t)b);
    case EX_SUB: return wrap((uint64_t)a - (uint64_t)b);
    case EX_MUL: return wrap((uint64_t)a * (uint64_t)b);
    case EX_DIV: return ir_floordiv(a, b);
    case EX_MOD: return ir_floormod(a, b);
    case EX_MIN: return a < b ? a : b;
    case EX_MAX: return a > b ? a : b;
    case EX_NEG: return wrap(0 - (uint64_t)a);
    case EX_ABS: return a < 0 ? wrap(0 - (uint64_t)a) : a;
    case EX_RELU: return a > 0 ? a : 0;
    case EX_I32: return ir_sem_wrap32(a);
    default: ir_panic(__FILE__, __LINE__, "no integer semantics for %s", ir_op_name(k));
    }
}

int64_t ir_sem_f32_to_i32(double f)
{
    if (f != f)
        return 0;
    if (f >= 2147483647.0)
        return INT32_MAX;
    if (f <= -2147483648.0)
        return INT32_MIN;
    return (int64_t)f;
}

int64_t ir_sem_gather_index(int64_t i, int64_t n)
{
    if (i < 0)
        i = wrap((uint64_t)i + (uint64_t)n);
    return i >= 0 && i < n ? i : -1;
}

void ir_gather_error(char *err, size_t errlen, const IrGatherFault *f, const Tensor *out,
                     const int64_t *dims)
{
    int64_t ext[16];
    IR_ASSERT(out->rank <= 16);
    for (int j = 0; j < out->rank; j++)
        ext[j] = ir_eval_dims(out->shape[j], dims);
    dcrt_index_message(err, errlen, f->tensor, f->axis, f->value, f->extent, out->name, out->rank,
                       ext, f->pos);
}

int64_t ir_sem_f32_to_i64(double f)
{
    if (f != f)
        return 0;
    if (f >= 9223372036854775808.0)
        return INT64_MAX;
    if (f <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)f;
}

int64_t ir_sem_wrap32(int64_t a) { return (int32_t)(uint32_t)(uint64_t)a; }

double ir_sem_i2f(int64_t a) { return (float)a; }

/* IEEE 754-2019 maximum / minimum on f32 values. */
static float maximum(float x, float y)
{
    if (x != x || y != y)
        return NAN;
    if (x == y) /* +0 and -0: the positive one */
        return signbit(x) ? y : x;
    return x > y ? x : y;
}

static float minimum(float x, float y)
{
    if (x != x || y != y)
        return NAN;
    if (x == y)
        return signbit(x) ? x : y;
    return x < y ? x : y;
}

double ir_sem_float(ExprKind k, double a, double b)
{
    float x = (float)a, y = (float)b, r;
    switch (k) {
    case EX_ADD: r = x + y; break;
    case EX_SUB: r = x - y; break;
    case EX_MUL: r = x * y; break;
    case EX_DIV: r = x / y; break;
    case EX_MOD: {
        float q = floorf(x / y), m = y * q;
        r = x - m;
        break;
    }
    case EX_MIN: r = minimum(x, y); break;
    case EX_MAX: r = maximum(x, y); break;
    case EX_POW: r = powf(x, y); break;
    case EX_NEG: r = -x; break;
    case EX_EXP: r = expf(x); break;
    case EX_LOG: r = logf(x); break;
    case EX_SQRT: r = sqrtf(x); break;
    case EX_RSQRT: r = 1.0f / sqrtf(x); break;
    case EX_TANH: r = tanhf(x); break;
    case EX_ERF: r = erff(x); break;
    case EX_ABS: r = fabsf(x); break;
    case EX_SIGMOID: r = 1.0f / (1.0f + expf(-x)); break;
    case EX_RELU: r = maximum(x, 0.0f); break;
    case EX_GELU: r = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); break;
    default: ir_panic(__FILE__, __LINE__, "no float semantics for %s", ir_op_name(k));
    }
    return r;
}

double ir_sem_fma(double a, double b, double c) { return fmaf((float)a, (float)b, (float)c); }

static bool is_fmul(const Expr *e) { return e->kind == EX_MUL && e->type == DT_F32; }

/* One node of ir_contract, its operands already contracted (a product
 * stays a product: only + and - nodes change). */
static Expr *contract_node(ExprCtx *c, Expr *e, void *ud)
{
    (void)ud;
    if ((e->kind != EX_ADD && e->kind != EX_SUB) || e->type != DT_F32)
        return e;
    bool sub = e->kind == EX_SUB;
    Expr *l = e->op.a, *r = e->op.b;
    if (is_fmul(l)) /* x*y + z, x*y - z */
        return ir_op(c, EX_FMA, l->op.a, l->op.b, sub ? ir_unop(c, EX_NEG, r) : r);
    if (is_fmul(r)) /* z + x*y, z - x*y */
        return ir_op(c, EX_FMA, sub ? ir_unop(c, EX_NEG, r->op.a) : r->op.a, r->op.b, l);
    return e;
}

Expr *ir_contract(ExprCtx *c, Expr *e) { return ir_rewrite(c, e, contract_node, NULL); }

Expr *ir_accumulate(ExprCtx *c, ExprKind comb, Expr *acc, Expr *v, bool contract)
{
    if (contract && comb == EX_ADD && is_fmul(v))
        return ir_op(c, EX_FMA, v->op.a, v->op.b, acc);
    return ir_binop(c, comb, acc, v);
}

/* A comparison from whether a < b and a == b (both false: unordered, a
 * NaN), for floats and integers alike. */
static bool compare(ExprKind k, bool lt, bool eq)
{
    switch (k) {
    case EX_LT: return lt;
    case EX_LE: return lt || eq;
    case EX_EQ: return eq;
    case EX_NE: return !eq;
    default: ir_panic(__FILE__, __LINE__, "%s is not a comparison", ir_op_name(k));
    }
}

bool ir_sem_compare(ExprKind k, double a, double b) { return compare(k, a < b, a == b); }

bool ir_sem_compare_int(ExprKind k, int64_t a, int64_t b) { return compare(k, a < b, a == b); }
