/* Unit tests for ir/banks.c: wavefronts of a warp's shared-memory access.
 *
 * The bank model on address patterns whose cost is known (unit stride,
 * strides that share banks, broadcast, 64- and 128-bit accesses, phases),
 * and the same from index expressions: a transposed tile store is 16-way
 * conflicted with 64 words a row, 2-way with 65 and conflict-free with 66,
 * a 128-bit read
 * of a padded row that breaks alignment costs its four scalar parts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dietcode/ir.h"

static int pattern(int64_t (*f)(int t), int n, int width)
{
    int64_t w[32];
    for (int t = 0; t < n; t++)
        w[t] = f(t);
    return ir_bank_wavefronts(w, n, width);
}

static int64_t unit(int t) { return t; }
static int64_t stride2(int t) { return 2 * t; }
static int64_t stride32(int t) { return 32 * t; }
static int64_t stride33(int t) { return 33 * t; }
static int64_t same(int t) { (void)t; return 7; }
static int64_t transposed(int t) { return (t % 16) * 64 + t / 16; }
static int64_t padded65(int t) { return (t % 16) * 65 + t / 16; }
static int64_t padded66(int t) { return (t % 16) * 66 + t / 16; }
static int64_t vec4(int t) { return 4 * t; }
static int64_t vec4_stride8(int t) { return 8 * t; }
static int64_t vec2(int t) { return 2 * t; }
static int64_t halves(int t) { return t / 16; } /* two words, broadcast */

static void test_patterns(void **state)
{
    (void)state;
    assert_int_equal(pattern(unit, 32, 1), 1);
    assert_int_equal(pattern(stride2, 32, 1), 2);
    assert_int_equal(pattern(stride32, 32, 1), 32);
    assert_int_equal(pattern(stride33, 32, 1), 1);
    assert_int_equal(pattern(same, 32, 1), 1);
    assert_int_equal(pattern(halves, 32, 1), 1);
    assert_int_equal(pattern(transposed, 32, 1), 16);
    /* a word of padding: the two half-warps' rows fall one bank apart */
    assert_int_equal(pattern(padded65, 32, 1), 2);
    assert_int_equal(pattern(padded66, 32, 1), 1);
    /* 128-bit: four phases of 8 threads, each 32 consecutive words */
    assert_int_equal(pattern(vec4, 32, 4), 4);
    /* 128-bit at a stride of 8 words: each phase's words fold onto half the banks */
    assert_int_equal(pattern(vec4_stride8, 32, 4), 8);
    /* 64-bit: two phases of 16 threads */
    assert_int_equal(pattern(vec2, 32, 2), 2);
    /* a partial warp */
    assert_int_equal(pattern(stride32, 8, 1), 8);
    assert_int_equal(pattern(unit, 8, 1), 1);
}

typedef struct Fix {
    Arena *a;
    ExprCtx *c;
    Var *th, *ti, *tj, *ki, *lane;
} Fix;

static Fix fix(void)
{
    Fix f;
    f.a = ir_arena_new();
    f.c = ir_ctx_new(f.a);
    f.th = ir_var(f.c, "Th", VK_LOOP, ir_int(f.c, 256));
    f.ti = ir_var(f.c, "t_i", VK_LOOP, ir_int(f.c, 16));
    f.tj = ir_var(f.c, "t_j", VK_LOOP, ir_int(f.c, 16));
    f.ki = ir_var(f.c, "ki", VK_LOOP, ir_int(f.c, 16));
    f.lane = ir_var(f.c, "lane", VK_LOOP, ir_int(f.c, 4));
    return f;
}

static void fix_free(Fix *f)
{
    ir_ctx_destroy(f->c);
    ir_arena_destroy(f->a);
}

static Expr *V(Fix *f, Var *v) { return ir_varref(f->c, v); }
static Expr *I(Fix *f, int64_t v) { return ir_int(f->c, v); }
static Expr *add(Fix *f, Expr *a, Expr *b) { return ir_binop(f->c, EX_ADD, a, b); }
static Expr *mul(Fix *f, Expr *a, Expr *b) { return ir_binop(f->c, EX_MUL, a, b); }

static void test_expressions(void **state)
{
    (void)state;
    Fix f = fix();
    ExprCtx *c = f.c;
    /* lets as the tile pass writes them: t_i = Th / 16, t_j = Th % 16 */
    Var *letv[2] = {f.ti, f.tj};
    Expr *letval[2] = {ir_binop(c, EX_DIV, V(&f, f.th), I(&f, 16)),
                       ir_binop(c, EX_MOD, V(&f, f.th), I(&f, 16))};
    /* the staging store X_s[t_j, t_i + 16 e] of a 16 x 64 tile: row t_j */
    Expr *store64 = add(&f, mul(&f, V(&f, f.tj), I(&f, 64)), V(&f, f.ti));
    Expr *store65 = add(&f, mul(&f, V(&f, f.tj), I(&f, 65)), V(&f, f.ti));
    Expr *store66 = add(&f, mul(&f, V(&f, f.tj), I(&f, 66)), V(&f, f.ti));
    assert_int_equal(ir_access_wavefronts(c, store64, f.th, 256, 2, letv, letval, NULL, 1), 16);
    assert_int_equal(ir_access_wavefronts(c, store65, f.th, 256, 2, letv, letval, NULL, 1), 2);
    assert_int_equal(ir_access_wavefronts(c, store66, f.th, 256, 2, letv, letval, NULL, 1), 1);
    /* the compute read W_s[ki, 4 t_j + lane] as 128-bit vectors */
    Expr *read64 = add(&f, add(&f, mul(&f, V(&f, f.ki), I(&f, 64)), mul(&f, V(&f, f.tj), I(&f, 4))),
                       V(&f, f.lane));
    assert_int_equal(ir_access_wavefronts(c, read64, f.th, 256, 2, letv, letval, f.lane, 4), 4);
    /* rows of 65 words: odd rows are not 16-byte aligned, four scalar reads */
    Expr *read65 = add(&f, add(&f, mul(&f, V(&f, f.ki), I(&f, 65)), mul(&f, V(&f, f.tj), I(&f, 4))),
                       V(&f, f.lane));
    int w = ir_access_wavefronts(c, read65, f.th, 256, 2, letv, letval, f.lane, 4);
    assert_true(w > 4);
    /* rows of 68 words keep the alignment */
    Expr *read68 = add(&f, add(&f, mul(&f, V(&f, f.ki), I(&f, 68)), mul(&f, V(&f, f.tj), I(&f, 4))),
                       V(&f, f.lane));
    assert_int_equal(ir_access_wavefronts(c, read68, f.th, 256, 2, letv, letval, f.lane, 4), 4);
    /* X_s[ki, 4 t_i + r]: two distinct words per warp, broadcast */
    Expr *bcast = add(&f, mul(&f, V(&f, f.ki), I(&f, 64)), mul(&f, V(&f, f.ti), I(&f, 4)));
    assert_int_equal(ir_access_wavefronts(c, bcast, f.th, 256, 2, letv, letval, NULL, 1), 1);
    /* small blocks: only their threads count */
    assert_int_equal(ir_access_wavefronts(c, mul(&f, V(&f, f.th), I(&f, 32)), f.th, 4, 0, NULL,
                                          NULL, NULL, 1),
                     4);
    fix_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_expressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
