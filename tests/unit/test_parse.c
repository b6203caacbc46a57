/* Unit tests for the lexer and parser: the LANGUAGE.md examples, the
 * precedence and newline rules, numbers, the locations that later error
 * messages point at, syntax errors with their exact positions, and inputs
 * that must not crash or recurse without bound, a leading byte-order mark,
 * and the element limit sema checks. A tree is checked through
 * its fe_ast_print form; diagnostics as "LINE:COL: MESSAGE" lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/frontend.h"
#include "frontend/ast.h"

#include <stdlib.h>
#include <string.h>

typedef struct Parsed {
    Arena *a;
    AstProgram *p;
    char *ast;  /* fe_ast_print output */
    char *errs; /* "LINE:COL: MESSAGE\n" per diagnostic */
    int nerrs;
} Parsed;

static Parsed parse_n(const char *text, size_t len)
{
    Parsed r = {.a = ir_arena_new()};
    char *copy = ir_arena_alloc(r.a, len + 1);
    memcpy(copy, text, len);
    Source src = {.path = "t.tex", .text = copy, .len = len};
    DiagList d;
    ir_diags_init(&d, r.a, &src);
    r.p = fe_parse(r.a, &src, &d);
    assert_non_null(r.p);

    size_t n;
    FILE *f = open_memstream(&r.ast, &n);
    fe_ast_print(r.p, f);
    fclose(f);
    f = open_memstream(&r.errs, &n);
    for (const Diag *g = d.head; g; g = g->next)
        fprintf(f, "%d:%d: %s\n", g->loc.line, g->loc.col, g->msg);
    fclose(f);
    r.nerrs = d.count;
    return r;
}

static Parsed parse(const char *text) { return parse_n(text, strlen(text)); }

static void release(Parsed *r)
{
    free(r->ast);
    free(r->errs);
    ir_arena_destroy(r->a);
}

/* Parses src; checks the printed tree and the diagnostics ("" for none). */
static void check(const char *src, const char *ast, const char *errs)
{
    Parsed r = parse(src);
    assert_string_equal(r.errs, errs);
    assert_string_equal(r.ast, ast);
    release(&r);
}

/* The body of `output s[] = SRC`, printed. */
static void check_expr(const char *src, const char *want)
{
    char in[512], out[512];
    snprintf(in, sizeof in, "output s[] = %s", src);
    snprintf(out, sizeof out, "output s[] = %s\n", want);
    check(in, out, "");
}

/* Parses `output s[] = SRC`, checks it gives exactly one error. */
static void check_expr_error(const char *src, const char *err)
{
    char in[512];
    snprintf(in, sizeof in, "output s[] = %s", src);
    check(in, "", err);
}

/* Printing then parsing again gives the same tree. */
static void check_round_trip(const char *src)
{
    Parsed r = parse(src), r2 = parse(r.ast);
    assert_string_equal(r.errs, "");
    assert_string_equal(r2.errs, "");
    assert_string_equal(r2.ast, r.ast);
    release(&r);
    release(&r2);
}

static const char *const examples[][2] = {
    {"# BERT-base QKV projection: T tokens (dynamic) x 768 -> 2304\n"
     "dim T in 1..128\n"
     "input X[T, 768] f32\n"
     "input W[2304, 768] f32\n"
     "input b[2304] f32\n"
     "output Y[i: T, j: 2304] = sum[k: 768](X[i, k] * W[j, k]) + b[j]\n",
     "dim T in 1..128\n"
     "input X[T, 768] f32\n"
     "input W[2304, 768] f32\n"
     "input b[2304] f32\n"
     "output Y[i: T, j: 2304] = (sum[k: 768]((X[i, k] * W[j, k])) + b[j])\n"},
    {"# attention scores, batched over 12 heads\n"
     "dim T in 1..128\n"
     "input Q[12, T, 64] f32\n"
     "input K[12, T, 64] f32\n"
     "output S[h: 12, i: T, j: T] = sum[d: 64](Q[h, i, d] * K[h, j, d]) * 0.125\n",
     "dim T in 1..128\n"
     "input Q[12, T, 64] f32\n"
     "input K[12, T, 64] f32\n"
     "output S[h: 12, i: T, j: T] = (sum[d: 64]((Q[h, i, d] * K[h, j, d])) * 0.125)\n"},
    {"# 3x3 convolution, stride 1, zero padding 1, dynamic batch\n"
     "dim N in 1..16\n"
     "input I[N, 64, 56, 56] f32\n"
     "input F[64, 64, 3, 3] f32\n"
     "output O[n: N, k: 64, y: 56, x: 56] =\n"
     "    sum[c: 64, r: 3, s: 3](I?[n, c, y + r - 1, x + s - 1] * F[k, c, r, s])\n",
     "dim N in 1..16\n"
     "input I[N, 64, 56, 56] f32\n"
     "input F[64, 64, 3, 3] f32\n"
     "output O[n: N, k: 64, y: 56, x: 56] = sum[c: 64, r: 3, s: 3]("
     "(I?[n, c, ((y + r) - 1), ((x + s) - 1)] * F[k, c, r, s]))\n"},
    {"# row softmax: several stages, each reduction its own kernel or fused\n"
     "dim T in 1..128\n"
     "input X[T, 1000] f32\n"
     "M[i: T] = max[j: 1000](X[i, j])\n"
     "E[i: T, j: 1000] = exp(X[i, j] - M[i])\n"
     "Z[i: T] = sum[j: 1000](E[i, j])\n"
     "output P[i: T, j: 1000] = E[i, j] / Z[i]\n",
     "dim T in 1..128\n"
     "input X[T, 1000] f32\n"
     "M[i: T] = max[j: 1000](X[i, j])\n"
     "E[i: T, j: 1000] = exp((X[i, j] - M[i]))\n"
     "Z[i: T] = sum[j: 1000](E[i, j])\n"
     "output P[i: T, j: 1000] = (E[i, j] / Z[i])\n"},
};

static void test_language_examples(void **state)
{
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        check(examples[i][0], examples[i][1], "");
        check_round_trip(examples[i][0]);
    }
}

static void test_statement_kinds(void **state)
{
    Parsed r = parse("dim T in 1..128\ninput s[] f32\nM[i: T] = s\noutput o[] = M[0] + s[]");
    assert_string_equal(r.errs, "");
    assert_int_equal(r.p->n, 4);
    AstStmt **s = r.p->stmts;
    assert_int_equal(s[0]->kind, AST_DIM);
    assert_string_equal(s[0]->name, "T");
    assert_int_equal(s[0]->dim.lo, 1);
    assert_int_equal(s[0]->dim.hi, 128);
    assert_int_equal(s[1]->kind, AST_INPUT);
    assert_int_equal(s[1]->input.n, 0);
    assert_string_equal(s[1]->input.type, "f32");
    assert_int_equal(s[2]->kind, AST_DEF);
    assert_int_equal(s[2]->def.n, 1);
    assert_int_equal(s[2]->def.body->kind, AX_NAME);
    assert_int_equal(s[3]->kind, AST_OUTPUT);
    assert_int_equal(s[3]->def.n, 0);
    AstExpr *b = s[3]->def.body->binary.b;
    assert_int_equal(b->kind, AX_ACCESS);
    assert_int_equal(b->access.n, 0);
    assert_false(b->access.padded);
    release(&r);

    /* the type is a name: sema decides which are valid */
    check("input X[4] f64", "input X[4] f64\n", "");
    /* extents are expressions */
    check("input X[T * 12, (H - 3) / 2 + 1] f32",
          "input X[(T * 12), (((H - 3) / 2) + 1)] f32\n", "");
}

static void test_precedence(void **state)
{
    static const char *const cases[][2] = {
        {"a || b && c", "(a || (b && c))"},
        {"a && b || c", "((a && b) || c)"},
        {"a || b || c", "((a || b) || c)"},
        {"a < b + c", "(a < (b + c))"},
        {"a + b * c - d", "((a + (b * c)) - d)"},
        {"a - b - c", "((a - b) - c)"},
        {"a / b % c * d", "(((a / b) % c) * d)"},
        {"-a * b", "((-a) * b)"},
        {"-X[i]", "(-X[i])"},
        {"!a == b", "((!a) == b)"},
        {"- -a", "(-(-a))"},
        {"2 * -3", "(2 * (-3))"},
        {"a - -1", "(a - (-1))"},
        {"(a + b) * c", "((a + b) * c)"},
        {"((a))", "a"},
        {"a == b && c != d || e <= f", "(((a == b) && (c != d)) || (e <= f))"},
        {"a > b && c >= d", "((a > b) && (c >= d))"},
        {"(a < b) < c", "((a < b) < c)"},
        {"(a < b) == (c < d)", "((a < b) == (c < d))"},
        {"max(a, b) + max[j: 4](x)", "(max(a, b) + max[j: 4](x))"},
        {"min[j: 4, k: T * 2](X[j, k]) * prod[r: 3](2)",
         "(min[j: 4, k: (T * 2)](X[j, k]) * prod[r: 3](2))"},
        {"max[j] + sum[i, j]", "(max[j] + sum[i, j])"}, /* tensors named so: sema's job */
        {"select(c, f32(i), i32(x) + 1)", "select(c, f32(i), (i32(x) + 1))"},
        {"exp(x) * log(x) + sqrt(x) - rsqrt(x)", "(((exp(x) * log(x)) + sqrt(x)) - rsqrt(x))"},
        {"tanh(erf(abs(sigmoid(relu(gelu(x))))))", "tanh(erf(abs(sigmoid(relu(gelu(x))))))"},
        {"pow(a, 2) % 3", "(pow(a, 2) % 3)"},
        {"X[X[i] + 1, Y?[j]]", "X[(X[i] + 1), Y?[j]]"},
        {"X []", "X[]"},
        {"sum[k: 4](X[k]) / sum[k: 4](1)", "(sum[k: 4](X[k]) / sum[k: 4](1))"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_expr(cases[i][0], cases[i][1]);
}

static void test_numbers(void **state)
{
    static const struct { const char *text; double val; } floats[] = {
        {"0.125", 0.125}, {"1e-5", 1e-5}, {"2.", 2.0}, {".5", 0.5}, {"3e2", 300.0},
        {"1.5E+3", 1500.0}, {"2.e1", 20.0}, {"007.0", 7.0}, {"1e-400", 0.0},
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        char in[64];
        snprintf(in, sizeof in, "output s[] = %s", floats[i].text);
        Parsed r = parse(in);
        assert_string_equal(r.errs, "");
        AstExpr *e = r.p->stmts[0]->def.body;
        assert_int_equal(e->kind, AX_FLOAT);
        assert_true(e->flt.val == floats[i].val);
        assert_string_equal(e->flt.text, floats[i].text);
        release(&r);
    }

    Parsed r = parse("output s[] = 9223372036854775807 + 007");
    assert_string_equal(r.errs, "");
    AstExpr *e = r.p->stmts[0]->def.body;
    assert_int_equal(e->binary.a->kind, AX_INT);
    assert_true(e->binary.a->ival == INT64_MAX);
    assert_int_equal(e->binary.b->ival, 7);
    release(&r);

    /* `1..128` is INT DOTDOT INT, not `1.` `.128` */
    check("dim T in 1..128", "dim T in 1..128\n", "");
    check("dim T in 1 .. 128", "dim T in 1..128\n", "");
    check("dim T in 0..0", "dim T in 0..0\n", ""); /* the range is sema's to check */

    check_expr_error("9223372036854775808", "1:14: integer literal '9223372036854775808' is too large\n");
    check_expr_error("1e999", "1:14: float literal '1e999' is too large\n");
    check_expr_error("2x", "1:14: malformed number '2x'\n");
    check_expr_error("1e", "1:14: malformed number '1e'\n");
    check_expr_error("0x10", "1:14: malformed number '0x10'\n");
    check_expr_error("1.5.5", "1:17: expected end of statement, found '.5'\n");
    check("dim T in 1...128", "", "1:13: expected integer upper bound after '..', found '.128'\n");
}

static void test_newlines(void **state)
{
    /* after '=', an operator, ',' and ':', and inside brackets */
    check("output Y[i: T] =\n\n   # a comment\n  X[i]", "output Y[i: T] = X[i]\n", "");
    check("output Y[i: T] = X[i] +\n  1 *\n  2", "output Y[i: T] = (X[i] + (1 * 2))\n", "");
    check("input X[T,\n  768] f32", "input X[T, 768] f32\n", "");
    check("output Y[i:\n T,\n j: 4] = sum[\n k: 4,\n r:\n 3](\n X[k,\n r]\n)\n",
          "output Y[i: T, j: 4] = sum[k: 4, r: 3](X[k, r])\n", "");
    check("output Y[] = -\n!\nx", "output Y[] = (-(!x))\n", "");
    /* not before an operator */
    check("output Y[i: T] = X[i]\n  + 1\n", "output Y[i: T] = X[i]\n",
          "2:3: expected a statement, found '+'\n");
    /* a statement keyword after a newline ends the statement, even in brackets */
    check("output Y[i: T] = X[i\ninput W[4] f32\n", "input W[4] f32\n",
          "1:21: expected ']' after indices, found 'newline'\n");
    check("output Y[i: T] =\ndim N in 1..2\n", "dim N in 1..2\n",
          "1:17: expected an expression, found 'newline'\n");
    check("output Y[i: T] = (1 +\n", "", "1:22: expected an expression, found 'newline'\n");
    check("output Y[i: T] = (1 + 2", "", "1:24: expected ')' after expression, found end of file\n");
    /* ';' separates, empty statements are fine, comments and CRLF */
    check(";;dim T in 1..2; input X[T] f32;; output Y[i: T] = X[i];\n\n",
          "dim T in 1..2\ninput X[T] f32\noutput Y[i: T] = X[i]\n", "");
    check("# only\n  # comments\n\n#", "", "");
    check("dim T in 1..2 # dims\r\n# \xff\x80 any bytes in a comment\r\noutput Y[i: T] = 1\r\n",
          "dim T in 1..2\noutput Y[i: T] = 1\n", "");
    check("", "", "");
    check("\n\n\n", "", "");
}

static void test_locations(void **state)
{
    Parsed r = parse("dim T in 1..128\n"
                     "input X[T, 768] f32\n"
                     "output Y[i: T, j: 2304] = sum[k: 768](X?[i, k + 1]) * 2\n"
                     "M[i: 4] =\n  (1 + f32(i))\n");
    assert_string_equal(r.errs, "");
    AstStmt **s = r.p->stmts;
#define LOC(l, ln, cl)                                                       \
    do {                                                                     \
        assert_int_equal((l).line, ln);                                      \
        assert_int_equal((l).col, cl);                                       \
    } while (0)
    LOC(s[0]->loc, 1, 1);
    LOC(s[0]->name_loc, 1, 5);
    LOC(s[0]->dim.lo_loc, 1, 10);
    LOC(s[0]->dim.hi_loc, 1, 13);
    LOC(s[1]->loc, 2, 1);
    LOC(s[1]->name_loc, 2, 7);
    LOC(s[1]->input.extents[0]->loc, 2, 9);
    LOC(s[1]->input.extents[1]->loc, 2, 12);
    LOC(s[1]->input.type_loc, 2, 17);
    LOC(s[2]->loc, 3, 1);
    LOC(s[2]->name_loc, 3, 8);
    LOC(s[2]->def.axes[1].loc, 3, 16);
    LOC(s[2]->def.axes[1].extent->loc, 3, 19);
    AstExpr *mul = s[2]->def.body;
    LOC(mul->loc, 3, 27);
    LOC(mul->binary.oploc, 3, 53);
    AstExpr *red = mul->binary.a;
    assert_int_equal(red->kind, AX_REDUCE);
    assert_int_equal(red->reduce.op, AR_SUM);
    LOC(red->loc, 3, 27);
    LOC(red->reduce.axes[0].loc, 3, 31);
    LOC(red->reduce.axes[0].extent->loc, 3, 34);
    AstExpr *acc = red->reduce.body;
    assert_true(acc->access.padded);
    LOC(acc->loc, 3, 39);
    LOC(acc->access.idx[0]->loc, 3, 42);
    LOC(acc->access.idx[1]->loc, 3, 45);
    LOC(acc->access.idx[1]->binary.oploc, 3, 47);
    LOC(s[3]->loc, 4, 1);
    AstExpr *add = s[3]->def.body;
    LOC(add->loc, 5, 4); /* inside the parentheses */
    assert_int_equal(add->binary.b->call.fn, AF_F32);
    LOC(add->binary.b->loc, 5, 8);
#undef LOC
    release(&r);
}

/* One diagnostic each, at the right place, with the right words. */
static void test_syntax_errors(void **state)
{
    static const char *const cases[][2] = {
        {"dim T 1..128", "1:7: expected 'in' after dim name 'T', found '1'\n"},
        {"dim T in 1.5..2", "1:10: expected integer lower bound after 'in', found '1.5'\n"},
        {"dim T in 1..\n", "1:13: expected integer upper bound after '..', found 'newline'\n"},
        {"dim T in 1 128", "1:12: expected '..' after lower bound, found '128'\n"},
        {"dim 5 in 1..2", "1:5: expected dim name after 'dim', found '5'\n"},
        {"dim in in 1..2", "1:5: expected dim name after 'dim', found 'in'\n"},
        {"dim T in 1..99999999999999999999", "1:13: integer literal '99999999999999999999' is too large\n"},
        {"input X[T, 768]\n", "1:16: expected element type after ']', found 'newline'\n"},
        {"input X[T 768] f32", "1:11: expected ']' after extents, found '768'\n"},
        {"input X f32", "1:9: expected '[' after tensor name 'X', found 'f32'\n"},
        {"output [i: T] = 1", "1:8: expected tensor name after 'output', found '['\n"},
        {"output Y[i T] = 1", "1:12: expected ':' after axis name 'i', found 'T'\n"},
        {"output Y[5: T] = 1", "1:10: expected axis name, found '5'\n"},
        {"output Y[i: T] X[i]", "1:16: expected '=' after ']', found 'X'\n"},
        {"output Y[i: T] = X[i\n", "1:21: expected ']' after indices, found 'newline'\n"},
        {"output Y[i: T] = X[i, ]", "1:23: expected an expression, found ']'\n"},
        {"output Y[i: T] = X[i] $", "1:23: unexpected character '$'\n"},
        {"output Y[i: T] = a & b", "1:20: unexpected character '&'\n"},
        {"output Y[i: T] = a . b", "1:20: unexpected character '.'\n"},
        {"output Y[i: T] = \x01", "1:18: unexpected byte 0x01\n"},
        {"output Y[i: T] = X[i] X[i]", "1:23: expected end of statement, found 'X'\n"},
        {"output Y[i: T] = foo(1)", "1:18: unknown function 'foo'\n"},
        {"output Y[i: T] = X(i)", "1:18: unknown function 'X'\n"},
        {"output Y[i: T] = pow(1)", "1:18: 'pow' takes 2 arguments, got 1\n"},
        {"output Y[i: T] = exp(1, 2)", "1:18: 'exp' takes 1 argument, got 2\n"},
        {"output Y[i: T] = select()", "1:18: 'select' takes 3 arguments, got 0\n"},
        {"output Y[i: T] = sum(X[i])", "1:18: 'sum' is a reduction: write sum[k: N](...)\n"},
        {"output Y[i: T] = exp(1\n", "1:23: expected ')' after arguments of 'exp', found 'newline'\n"},
        {"output Y[i: T] = sum[k: 4] X[k]", "1:28: expected '(' after reduction axes, found 'X'\n"},
        {"output Y[i: T] = sum[k: 4, 5](1)", "1:28: expected axis name, found '5'\n"},
        {"output Y[i: T] = sum[](X[i])", "1:22: a reduction needs at least one axis: sum[k: N](...)\n"},
        {"output Y[i: T] = max[\n](X[i]) + 1", "2:1: a reduction needs at least one axis: max[k: N](...)\n"},
        {"output Y[i: T] = sum[k: 4](1", "1:29: expected ')' after reduction body, found end of file\n"},
        {"output Y[i: T] = X?(i)", "1:20: expected '[' after 'X?', found '('\n"},
        {"output Y[i: T] = a < b < c", "1:24: comparisons do not chain; join them with '&&'\n"},
        {"output Y[i: T] = a == b != c", "1:25: comparisons do not chain; join them with '&&'\n"},
        {"output Y[i: T] = a < b == c", "1:24: comparisons do not chain; join them with '&&'\n"},
        {"output Y[i: 2, ] = 1", "1:16: expected axis name, found ']'\n"},
        {"output Y[i: T] =", "1:17: expected an expression, found end of file\n"},
        {"output Y[i: T] = ?", "1:18: expected an expression, found '?'\n"},
        {"Y = 1", "1:3: expected '[' after tensor name 'Y', found '='\n"},
        {"5 + 3", "1:1: expected a statement, found '5'\n"},
        {") x", "1:1: expected a statement, found ')'\n"},
        {"output Y[i: T] = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         ""}, /* fine: a long name */
        {"output Y[i: T] = X[i] bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
         "1:23: expected end of statement, found 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb...'\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Parsed r = parse(cases[i][0]);
        assert_string_equal(r.errs, cases[i][1]);
        assert_int_equal(r.p->n, cases[i][1][0] ? 0 : 1);
        release(&r);
    }
}

/* Each bad statement gets one message; the good ones around it survive. */
static void test_recovery(void **state)
{
    check("dim T in 1..128\n"
          "input X[T 768] f32 $ $ $\n"
          "input W[768] f32\n"
          "output Y[i: T] = X[i, $] & | .\n"
          "output Z[i: T] = (X[i, 0]\n"
          "  + W[i]\n"
          "output V[i: T] = 1\n"
          "output A[i: T] = X[i; j] + 1; output B[i: T] = 2\n"
          "\x80\x81\x82 garbage\n"
          "output C[i: T] = (((\n"
          "output D[] = 3; output E[] = ] ; output F[] = 4\n",
          "dim T in 1..128\n"
          "input W[768] f32\n"
          "output V[i: T] = 1\n"
          "output B[i: T] = 2\n"
          "output D[] = 3\n"
          "output F[] = 4\n",
          "2:11: expected ']' after extents, found '768'\n"
          "4:23: unexpected character '$'\n"
          "6:9: expected ')' after expression, found 'newline'\n"
          "8:21: expected ']' after indices, found ';'\n"
          "9:1: unexpected byte 0x80\n"
          "10:21: expected an expression, found 'newline'\n"
          "11:30: expected an expression, found ']'\n");
}

static char *repeat(const char *pre, const char *unit, int n, const char *post)
{
    size_t lp = strlen(pre), lu = strlen(unit), lq = strlen(post);
    char *s = malloc(lp + lu * (size_t)n + lq + 1), *q = s;
    memcpy(q, pre, lp);
    q += lp;
    for (int i = 0; i < n; i++, q += lu)
        memcpy(q, unit, lu);
    memcpy(q, post, lq + 1);
    return s;
}

static const char too_deep[] = ": expression nested too deeply\n";
static const char too_long[] = ": expression too long: its tree is more than 2048 levels high; "
                               "split a long chain with an intermediate tensor\n";

/* Parses `output s[i: 4] = unit*n x close*n` and a dim; checks it parses,
 * or (err non-NULL) fails with that one message and keeps the dim. */
static void check_depth(const char *unit, const char *close, int n, const char *err)
{
    char *open = repeat("output s[i: 4] = ", unit, n, "x");
    char *src = repeat(open, close, n, "\ndim T in 1..2\n");
    Parsed r = parse(src);
    if (!err) {
        assert_string_equal(r.errs, "");
        assert_int_equal(r.p->n, 2);
    } else {
        assert_int_equal(r.nerrs, 1);
        assert_non_null(strstr(r.errs, err));
        assert_int_equal(r.p->n, 1); /* the dim after it */
    }
    release(&r);
    free(open);
    free(src);
}

static void test_depth_limits(void **state)
{
    static const char *const nests[][2] = {
        {"(", ")"}, {"-", ""}, {"!", ""}, {"exp(", ")"}, {"X[", "]"},
        {"max(1, ", ")"}, {"sum[k: 2](", ")"}, {"X?[0, ", "]"}, {"1 + (", ")"},
        {"(1 + ", ")"}, {"a * b - (", ")"},
    };
    for (size_t i = 0; i < sizeof nests / sizeof nests[0]; i++) {
        check_depth(nests[i][0], nests[i][1], FE_MAX_DEPTH / 2, NULL);
        check_depth(nests[i][0], nests[i][1], FE_MAX_DEPTH + 1, too_deep);
        check_depth(nests[i][0], nests[i][1], 100000, too_deep);
    }
    /* the exact limit: FE_MAX_DEPTH - 1 parentheses leave room for x */
    check_depth("(", ")", FE_MAX_DEPTH - 1, NULL);
    check_depth("(", ")", FE_MAX_DEPTH, too_deep);
    /* a left-associative chain is a loop, not nesting: `1 + 1 + ... + x`
     * passes the nesting limit, and only its height is limited */
    check_depth("1 + ", "", FE_MAX_DEPTH * 5, NULL);
    check_depth("", " + x", FE_MAX_HEIGHT - 1, NULL); /* as high as FE_MAX_HEIGHT */
    check_depth("", " + x", FE_MAX_HEIGHT, too_long);
    check_depth("", " * x - x", 100000, too_long);
    check_depth("1 + ", "", 100000, too_long);
    /* chains inside nesting: each limit on its own */
    check_depth("(x * 2 + x * 3 + x * 4 - ", ")", FE_MAX_DEPTH - 1, NULL);
    char *chain = repeat("(", "x + ", FE_MAX_HEIGHT / 2, "");
    check_depth(chain, ")", FE_MAX_DEPTH - 1, NULL);
    free(chain);
    /* an unclosed bracket swallows the rest without recursing */
    char *src = repeat("output s[] = ", "[(\n", 100000, "");
    Parsed r = parse(src);
    assert_int_equal(r.nerrs, 1);
    release(&r);
    free(src);
}

/* A UTF-8 byte-order mark starting the file is skipped and takes no
 * column; anywhere else it is an error of its own. */
static void test_byte_order_mark(void **state)
{
    static const char prog[] = "\xef\xbb\xbf" "dim T in 1..2\ninput X[T] f32\n"
                               "output Y[i: T] = X[i] * 2\n";
    check(prog, "dim T in 1..2\ninput X[T] f32\noutput Y[i: T] = (X[i] * 2)\n", "");
    check("\xef\xbb\xbf", "", "");
    check("\xef\xbb\xbf" "dim 5 in 1..2\n", "", "1:5: expected dim name after 'dim', found '5'\n");
    check("dim T in 1..2\n\xef\xbb\xbf" "input X[T] f32\n", "dim T in 1..2\n",
          "2:1: unexpected byte-order mark (bytes ef bb bf): only the file may start with one\n");
    check("\xef\xbb\xbf\xef\xbb\xbf" "dim T in 1..2\n", "",
          "1:1: unexpected byte-order mark (bytes ef bb bf): only the file may start with one\n");
    check("\xef\xbb" "dim T in 1..2\n", "", "1:1: unexpected byte 0xef\n");

    /* and the whole frontend takes it: a checked program */
    Arena *a = ir_arena_new();
    Source src = {.path = "bom.tex", .text = prog, .len = sizeof prog - 1};
    DiagList d;
    ir_diags_init(&d, a, &src);
    TeProgram *p = fe_compile(&src, "bom", &d);
    assert_int_equal(d.count, 0);
    assert_non_null(p);
    assert_non_null(ir_te_find(p, "Y"));
    ir_te_destroy(p);
    ir_arena_destroy(a);
}

/* The number of errors fe_compile reports for text. */
static int compile_errors(const char *text)
{
    Arena *a = ir_arena_new();
    Source src = {.path = "t.tex", .text = text, .len = strlen(text)};
    DiagList d;
    ir_diags_init(&d, a, &src);
    TeProgram *p = fe_compile(&src, "t", &d);
    int n = d.count;
    assert_true((p == NULL) == (n > 0));
    ir_te_destroy(p);
    ir_arena_destroy(a);
    return n;
}

/* A tensor over the element limit at every size is refused when checked
 * (the golden tests hold the messages); one that is over it only at large
 * sizes compiles, and the run time refuses those sizes. */
static void test_size_limit(void **state)
{
    assert_int_equal(compile_errors("input W[65536, 65536] f32\noutput Y[i: 4] = W[i, 0]\n"), 1);
    /* the limit, 2^31 - 2^20 - 1, is 65536 * 32752 - 1 */
    assert_int_equal(compile_errors("input W[65536, 32752] f32\noutput Y[i: 4] = W[i, 0]\n"), 1);
    assert_int_equal(compile_errors("input W[65536, 32751] f32\noutput Y[i: 4] = W[i, 0]\n"), 0);
    assert_int_equal(compile_errors("dim T in 1..1048576\ninput W[T, 65536] f32\n"
                                    "output Y[i: T] = W[i, 0]\n"), 0);
    assert_int_equal(compile_errors("dim T in 32768..1048576\ninput W[T, 65536] f32\n"
                                    "output Y[i: T] = W[i, 0]\n"), 1);
    /* W is over the limit for T in 1..128, but T = 299 runs too */
    assert_int_equal(compile_errors("dim T in 1..128\ninput W[300 - T, 16384, 1024] f32\n"
                                    "output Y[i: T] = W[0, 0, 0]\n"), 0);
    assert_int_equal(compile_errors("dim T in 1..8\nE[i: T, j: 65536, k: 65536] = 1\n"
                                    "output Y[i: T] = E[i, 0, 0]\n"), 1);
}

/* Bytes that are not .tex: each bad statement one error, every location
 * inside the text, no crash. */
static void test_garbage(void **state)
{
    static const char nul[] = "dim T in 1..2\n\0\nout\0put Y[i: T] = 1\ninput X[T] f32\n";
    Parsed r = parse_n(nul, sizeof nul - 1);
    assert_string_equal(r.errs, "2:1: unexpected byte 0x00\n3:4: unexpected byte 0x00\n");
    assert_string_equal(r.ast, "dim T in 1..2\ninput X[T] f32\n");
    release(&r);

    check("input \xc3\xa9[4] f32\noutput Y[] = 1 \xff\n", "",
          "1:7: unexpected byte 0xc3\n2:16: unexpected byte 0xff\n");

    unsigned seed = 12345;
    char buf[4096];
    static const char alphabet[] = "dim input output in sum max X[]()?:,;=+-*/%<>!&|.#\n\t 0123456789eE_\x80\xff";
    for (int iter = 0; iter < 2000; iter++) {
        size_t len = (size_t)(iter * 7 % (int)sizeof buf);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned x = seed >> 16;
            buf[i] = iter % 2 ? (char)(x & 0xff) : alphabet[x % (sizeof alphabet - 1)];
        }
        int lines = 1, stmts = 1;
        for (size_t i = 0; i < len; i++) {
            lines += buf[i] == '\n';
            stmts += buf[i] == '\n' || buf[i] == ';';
        }
        r = parse_n(buf, len);
        for (const char *e = r.errs; *e; e = strchr(e, '\n') + 1) {
            int line = 0, col = 0;
            assert_int_equal(sscanf(e, "%d:%d:", &line, &col), 2);
            assert_in_range(line, 1, lines);
            assert_in_range(col, 1, (int)len + 1);
        }
        assert_true(r.nerrs <= stmts);
        release(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_language_examples),
        cmocka_unit_test(test_statement_kinds),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_newlines),
        cmocka_unit_test(test_locations),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_recovery),
        cmocka_unit_test(test_depth_limits),
        cmocka_unit_test(test_byte_order_mark),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
