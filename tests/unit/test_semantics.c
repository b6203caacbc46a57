/* The scalar semantics of ir/semantics.c: the table itself against values
 * worked out by hand, then the same corner cases through every way a
 * program runs (the reference interpreter, the loop-IR interpreter, the
 * JIT-compiled CPU kernels and the GPU form on the emulator), which must
 * agree bit for bit: integer division by 0 and by -1 with INT64_MIN,
 * floor rounding, i32() of floats, NaN and signed zeros through max and
 * min, elementwise and as reductions, and relu; and the contraction of
 * a * b + c into one fma, with it and without (fp-contract off). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_integer_table(void **state)
{
    (void)state;
    assert_true(ir_sem_int(EX_DIV, 7, 2) == 3);
    assert_true(ir_sem_int(EX_DIV, -7, 2) == -4);
    assert_true(ir_sem_int(EX_DIV, 7, -2) == -4);
    assert_true(ir_sem_int(EX_DIV, -7, -2) == 3);
    assert_true(ir_sem_int(EX_MOD, -7, 2) == 1);
    assert_true(ir_sem_int(EX_MOD, 7, -2) == -1);
    assert_true(ir_sem_int(EX_MOD, -7, -2) == -1);
    assert_true(ir_sem_int(EX_DIV, 5, 0) == 0);
    assert_true(ir_sem_int(EX_MOD, 5, 0) == 0);
    assert_true(ir_sem_int(EX_DIV, 5, -1) == -5);
    assert_true(ir_sem_int(EX_MOD, 5, -1) == 0);
    assert_true(ir_sem_int(EX_DIV, INT64_MIN, -1) == INT64_MIN);
    assert_true(ir_sem_int(EX_MOD, INT64_MIN, -1) == 0);
    assert_true(ir_sem_int(EX_DIV, INT64_MIN, 1) == INT64_MIN);
    assert_true(ir_sem_int(EX_DIV, INT64_MIN, INT64_MIN) == 1);
    assert_true(ir_sem_int(EX_MOD, INT64_MAX, INT64_MIN) == -1);
    assert_true(ir_sem_int(EX_DIV, INT64_MAX, INT64_MIN) == -1);
    assert_true(ir_sem_int(EX_NEG, INT64_MIN, 0) == INT64_MIN);
    assert_true(ir_sem_int(EX_ABS, INT64_MIN, 0) == INT64_MIN);
    assert_true(ir_sem_int(EX_ADD, INT64_MAX, 1) == INT64_MIN);
    assert_true(ir_sem_int(EX_MUL, INT64_MIN, -1) == INT64_MIN);
    assert_true(ir_sem_int(EX_RELU, -3, 0) == 0);
    assert_true(ir_sem_f32_to_i32(NAN) == 0);
    assert_true(ir_sem_f32_to_i32(INFINITY) == INT32_MAX);
    assert_true(ir_sem_f32_to_i32(-INFINITY) == INT32_MIN);
    assert_true(ir_sem_f32_to_i32(3e9) == INT32_MAX);
    assert_true(ir_sem_f32_to_i32(-3.7) == -3);
    assert_true(ir_sem_f32_to_i32(3.7) == 3);
    assert_true(ir_sem_i2f(16777217) == 16777216.0);
    assert_true(ir_sem_f32_to_i64(NAN) == 0);
    assert_true(ir_sem_f32_to_i64(INFINITY) == INT64_MAX);
    assert_true(ir_sem_f32_to_i64(-INFINITY) == INT64_MIN);
    assert_true(ir_sem_f32_to_i64(1e19) == INT64_MAX);
    assert_true(ir_sem_f32_to_i64(3e9) == 3000000000);
    assert_true(ir_sem_f32_to_i64(-3.7) == -3);
    assert_true(ir_sem_wrap32(INT64_MIN) == 0);
    assert_true(ir_sem_wrap32(2147483648) == INT32_MIN);
    assert_true(ir_sem_wrap32(-2147483649) == INT32_MAX);
    assert_true(ir_sem_wrap32(4294967295) == -1);
    assert_true(ir_sem_int(EX_I32, INT64_MAX, 0) == -1);
}

static void test_float_table(void **state)
{
    (void)state;
    assert_true(isnan(ir_sem_float(EX_MAX, NAN, 1)));
    assert_true(isnan(ir_sem_float(EX_MAX, 1, NAN)));
    assert_true(isnan(ir_sem_float(EX_MIN, NAN, -INFINITY)));
    assert_true(isnan(ir_sem_float(EX_MIN, -INFINITY, NAN)));
    assert_true(!signbit(ir_sem_float(EX_MAX, -0.0, 0.0)));
    assert_true(!signbit(ir_sem_float(EX_MAX, 0.0, -0.0)));
    assert_true(signbit(ir_sem_float(EX_MIN, 0.0, -0.0)));
    assert_true(signbit(ir_sem_float(EX_MIN, -0.0, 0.0)));
    assert_true(ir_sem_float(EX_MAX, 2, 3) == 3);
    assert_true(ir_sem_float(EX_MIN, 2, 3) == 2);
    assert_true(isnan(ir_sem_float(EX_RELU, NAN, 0)));
    assert_true(ir_sem_float(EX_RELU, -2, 0) == 0 && !signbit(ir_sem_float(EX_RELU, -0.0, 0)));
    assert_true(ir_sem_float(EX_MOD, -7, 2) == 1);
    assert_true(ir_sem_float(EX_MOD, 7, -2) == -1);
    assert_true(ir_sem_float(EX_DIV, 1, 0) == INFINITY);
    assert_true(!ir_sem_compare(EX_LT, NAN, 1) && !ir_sem_compare(EX_EQ, NAN, NAN) &&
                ir_sem_compare(EX_NE, NAN, NAN));
}

/* ---- the same corners through every evaluator ---- */

static const int64_t ia[] = {INT64_MIN, INT64_MIN + 1, -7, -1, 0, 1, 7, INT64_MAX};
static const int64_t ib[] = {INT64_MIN, -3, -1, 0, 1, 3, INT64_MAX};
enum { NA = 8, NB = 7, NF = 6 };

/* An integer literal of any 64-bit value (literals stop at INT32_MAX). */
static void literal(FILE *f, int64_t v)
{
    if (v == INT64_MIN)
        fputs("(-1073741824 * 1073741824 * 8)", f);
    else if (v == INT64_MIN + 1)
        fputs("(-1073741824 * 1073741824 * 8 + 1)", f);
    else if (v == INT64_MAX)
        fputs("(-(-1073741824 * 1073741824 * 8 + 1))", f);
    else
        fprintf(f, "(%lld)", (long long)v);
}

/* "select(VAR == 0, v0, select(VAR == 1, v1, ... vN))" of integer literals. */
static void int_chain(FILE *f, const char *var, const int64_t *v, int n)
{
    for (int i = 0; i < n - 1; i++) {
        fprintf(f, "select(%s == %d, ", var, i);
        literal(f, v[i]);
        fputs(", ", f);
    }
    literal(f, v[n - 1]);
    for (int i = 0; i < n - 1; i++)
        fputc(')', f);
}

/* Float corners: 1.5, -0, +0, NaN, -inf, +inf, picked by VAR. X[0] is 0
 * at run time (so nothing folds them away before the kernels see them). */
static void float_chain(FILE *f, const char *var)
{
    static const char *const v[] = {"1.5", "(-X[0])", "X[0]", "(X[0] / X[0])", "(-1.0 / X[0])",
                                    "(1.0 / X[0])"};
    for (int i = 0; i < NF - 1; i++)
        fprintf(f, "select(%s == %d, %s, ", var, i, v[i]);
    fputs(v[NF - 1], f);
    for (int i = 0; i < NF - 1; i++)
        fputc(')', f);
}

/* The 64-bit integer R as four 16-bit chunks: f32((R / 65536^c) % 65536). */
static void chunks(FILE *f, const char *r)
{
    fprintf(f, "f32(((%s) / select(c == 0, 1, select(c == 1, 65536, select(c == 2, "
               "65536 * 65536, 65536 * 65536 * 65536)))) %% 65536)",
            r);
}

static char *corner_program(void)
{
    char *text = NULL, *a = NULL, *b = NULL;
    size_t len = 0, la = 0, lb = 0;
    FILE *fa = open_memstream(&a, &la), *fb = open_memstream(&b, &lb);
    /* an index read at run time (X[1] is 0): the kernels see values, not literals */
    fputs("(", fa);
    int_chain(fa, "i", ia, NA);
    fputs(" + i32(X[1]))", fa);
    fputs("(", fb);
    int_chain(fb, "j", ib, NB);
    fputs(" + i32(X[1]))", fb);
    fclose(fa);
    fclose(fb);
    FILE *f = open_memstream(&text, &len);
    fputs("dim N in 1..4\ninput X[2] f32\n", f);
    /* the language refuses a divisor that may be 0, so DIV and MOD are
     * written with min and max and rewritten after checking (as a program
     * built through the C API may have them) */
    char r[8192];
    snprintf(r, sizeof r, "min(%s, %s)", a, b);
    fprintf(f, "output DIV[i: %d, j: %d, c: 4] = ", NA, NB);
    chunks(f, r);
    snprintf(r, sizeof r, "max(%s, %s)", a, b);
    fprintf(f, "\noutput MOD[i: %d, j: %d, c: 4] = ", NA, NB);
    chunks(f, r);
    snprintf(r, sizeof r, "abs(%s) + -(%s)", a, a);
    fprintf(f, "\noutput NEG[i: %d, c: 4] = ", NA);
    chunks(f, r);
    fprintf(f, "\noutput SAT[i: %d] = f32(i32(%s))", NA, a);
    fprintf(f, "\noutput FMAX[i: %d, j: %d] = max(", NF, NF);
    float_chain(f, "i");
    fputs(", ", f);
    float_chain(f, "j");
    fprintf(f, ")\noutput FMIN[i: %d, j: %d] = min(", NF, NF);
    float_chain(f, "i");
    fputs(", ", f);
    float_chain(f, "j");
    fprintf(f, ")\noutput RELU[i: %d] = relu(", NF);
    float_chain(f, "i");
    fprintf(f, ")\noutput F2I[i: %d] = f32(i32(", NF);
    float_chain(f, "i");
    fprintf(f, "))\noutput F2L[i: %d] = f32(i64(", NF);
    float_chain(f, "i");
    fprintf(f, "))\noutput F2B[i: %d] = f32(bool(", NF);
    float_chain(f, "i");
    /* prefix reductions: max and min over the first i + 1 corners, and the
     * same in the opposite order */
    fprintf(f, "))\noutput RMAX[i: %d, o: 2] = max[k: %d](select(k <= i, ", NF, NF);
    float_chain(f, "select(o == 0, k, 5 - k)");
    fprintf(f, ", -1.0 / X[0]))\noutput RMIN[i: %d, o: 2] = min[k: %d](select(k <= i, ", NF, NF);
    float_chain(f, "select(o == 0, k, 5 - k)");
    fputs(", 1.0 / X[0]))\n", f);
    fclose(f);
    free(a);
    free(b);
    return text;
}

/* Integer min becomes /, integer max %. */
static Expr *to_divmod(ExprCtx *c, Expr *e, void *ud)
{
    ExprKind k = *(const ExprKind *)ud;
    if (e->type == DT_I64 && e->kind == (k == EX_DIV ? EX_MIN : EX_MAX))
        return ir_binop(c, k, e->op.a, e->op.b);
    return e;
}

typedef struct Run {
    FeUnit u;
    TeProgram *p;
    float **bufs;
} Run;

static Run prepare(const char *text)
{
    Run r;
    if (fe_load_text("corners.tex", "corners", text, &r.u) != 0)
        ir_diags_print(&r.u.diags, stderr);
    r.p = r.u.prog;
    r.bufs = NULL;
    assert_non_null(r.p);
    static const ExprKind ops[2] = {EX_DIV, EX_MOD};
    for (int i = 0; i < 2; i++) {
        Tensor *t = ir_te_find(r.p, i ? "MOD" : "DIV");
        t->body = ir_rewrite(r.p->ctx, t->body, to_divmod, (void *)&ops[i]);
    }
    int64_t dims[1] = {1};
    r.bufs = calloc((size_t)r.p->ntensors, sizeof *r.bufs);
    for (int i = 0; i < r.p->ntensors; i++) {
        int64_t n = ir_te_numel(r.p->tensors[i], dims);
        r.bufs[i] = calloc((size_t)n, sizeof(float));
        for (int64_t j = 0; j < n; j++)
            r.bufs[i][j] = r.p->tensors[i]->kind == TK_INPUT ? 0.0f : 12345.0f;
    }
    return r;
}

static void release(Run *r)
{
    for (int i = 0; i < r->p->ntensors; i++)
        free(r->bufs[i]);
    free(r->bufs);
    fe_unload(&r->u);
}

static bool same(float x, float y)
{
    uint32_t a, b;
    memcpy(&a, &x, 4);
    memcpy(&b, &y, 4);
    return (isnan(x) && isnan(y)) || a == b;
}

static void compare(const Run *ref, const Run *got, const char *how)
{
    int64_t dims[1] = {1};
    for (int i = 0; i < ref->p->ntensors; i++) {
        const Tensor *t = ref->p->tensors[i];
        for (int64_t j = 0; t->kind == TK_OUTPUT && j < ir_te_numel(t, dims); j++)
            if (!same(ref->bufs[i][j], got->bufs[i][j]))
                fail_msg("%s: %s[%lld] = %.9g, the reference %.9g", how, t->name, (long long)j,
                         got->bufs[i][j], ref->bufs[i][j]);
    }
}

static const float *output(const Run *r, const char *name)
{
    const Tensor *t = ir_te_find(r->p, name);
    assert_non_null(t);
    return r->bufs[t->id];
}

/* The integer result of a chunked output at (i, j). */
static int64_t unchunk(const float *v, int i, int j, int nj)
{
    uint64_t r = 0;
    for (int c = 3; c >= 0; c--)
        r = (r << 16) | (uint64_t)v[((size_t)i * (size_t)nj + (size_t)j) * 4 + (size_t)c];
    return (int64_t)r;
}

static void test_every_evaluator(void **state)
{
    (void)state;
    char *text = corner_program();
    int64_t dims[1] = {1};
    char err[512];
    Run ref = prepare(text);
    assert_int_equal(ir_interp(ref.p, dims, ref.bufs, err, sizeof err), 0);

    /* the reference is the table */
    const float *dv = output(&ref, "DIV"), *mv = output(&ref, "MOD"), *nv = output(&ref, "NEG");
    for (int i = 0; i < NA; i++) {
        for (int j = 0; j < NB; j++) {
            assert_true(unchunk(dv, i, j, NB) == ir_sem_int(EX_DIV, ia[i], ib[j]));
            assert_true(unchunk(mv, i, j, NB) == ir_sem_int(EX_MOD, ia[i], ib[j]));
        }
        assert_true(unchunk(nv, i, 0, 1) ==
                    ir_sem_int(EX_ADD, ir_sem_int(EX_ABS, ia[i], 0), ir_sem_int(EX_NEG, ia[i], 0)));
        assert_true(output(&ref, "SAT")[i] == (float)ir_sem_i2f(ir_sem_wrap32(ia[i])));
    }
    static const double fv[NF] = {1.5, -0.0, 0.0, NAN, -INFINITY, INFINITY};
    for (int i = 0; i < NF; i++) {
        for (int j = 0; j < NF; j++) {
            assert_true(same(output(&ref, "FMAX")[i * NF + j], (float)ir_sem_float(EX_MAX, fv[i], fv[j])));
            assert_true(same(output(&ref, "FMIN")[i * NF + j], (float)ir_sem_float(EX_MIN, fv[i], fv[j])));
        }
        assert_true(same(output(&ref, "RELU")[i], (float)ir_sem_float(EX_RELU, fv[i], 0)));
        assert_true(output(&ref, "F2I")[i] == (float)ir_sem_f32_to_i32(fv[i]));
        assert_true(output(&ref, "F2L")[i] == (float)ir_sem_i2f(ir_sem_f32_to_i64(fv[i])));
        assert_true(output(&ref, "F2B")[i] == (fv[i] != 0));
        for (int o = 0; o < 2; o++) {
            double mx = -INFINITY, mn = INFINITY;
            for (int k = 0; k <= i; k++) {
                mx = ir_sem_float(EX_MAX, mx, fv[o ? 5 - k : k]);
                mn = ir_sem_float(EX_MIN, mn, fv[o ? 5 - k : k]);
            }
            assert_true(same(output(&ref, "RMAX")[i * 2 + o], (float)mx));
            assert_true(same(output(&ref, "RMIN")[i * 2 + o], (float)mn));
        }
    }

    /* every other evaluator agrees with it, for the default kernels and ones
     * that vectorise along the reduction */
    for (int variant = 0; variant < 2; variant++) {
        for (int gpu = 0; gpu < 2; gpu++) {
            Run r = prepare(text);
            TargetInfo ti = pass_target_info(gpu ? PT_GPU : PT_CPU);
            MicroKernel *mks = NULL;
            if (variant) {
                mks = calloc((size_t)r.p->ntensors, sizeof *mks);
                for (int i = 0; i < r.p->ntensors; i++) {
                    for (int a = 0; a < MK_MAX_AXES; a++)
                        mks[i].threads[a] = mks[i].tile[a] = 1;
                    mks[i].threads[0] = 2;
                    mks[i].unroll = 1;
                    mks[i].vec = 4;
                    mks[i].rchunk = 4;
                    mks[i].vaxis = MK_VEC_REDUCE;
                }
            }
            LoopProgram *lp = pass_run_pipeline(r.p, mks, &ti, NULL, err, sizeof err);
            free(mks);
            assert_non_null(lp);
            if (gpu) {
                ExEmu *ep = ex_emu_compile(lp, err, sizeof err);
                assert_non_null(ep);
                assert_int_equal(ex_emu_run(ep, NULL, dims, r.bufs, err, sizeof err), 0);
                compare(&ref, &r, variant ? "emu, vectors along the reduction" : "emu");
                ex_emu_destroy(ep);
            } else {
                ExCpu *cp = ex_cpu_compile(lp, err, sizeof err);
                assert_non_null(cp);
                assert_int_equal(ex_cpu_run(cp, dims, r.bufs, NULL, err, sizeof err), 0);
                compare(&ref, &r, variant ? "cpu, vectors along the reduction" : "cpu");
                ex_cpu_destroy(cp);
                Run l = prepare(text);
                assert_int_equal(ex_loops_run(lp, dims, l.bufs, err, sizeof err), 0);
                compare(&ref, &l, "loops");
                release(&l);
            }
            release(&r);
        }
    }
    release(&ref);
    free(text);
}

/* ---- contraction: a * b + c is one fma, in every evaluator ---- */

static const char fma_program[] =
    "dim N in 1..4\ninput A[N] f32\ninput B[N] f32\ninput C[N] f32\n"
    "output P1[i: N] = A[i] * B[i] + C[i]\n"
    "output P2[i: N] = C[i] + A[i] * B[i]\n"
    "output P3[i: N] = A[i] * B[i] - C[i]\n"
    "output P4[i: N] = C[i] - A[i] * B[i]\n"
    "output P5[i: N] = A[i] * B[i] + C[i] * B[i]\n"
    "M[i: N] = A[i] * B[i]\n" /* inlined into P6: a product of another tensor */
    "output P6[i: N] = M[i] + C[i]\n";
enum { NFMA = 6, NLANES = 4 };

/* Lanes where the fused and the twice-rounded results differ: overflow of
 * the product (2e38 * 2), and a product's last bit (1 + 2^-12 squared). */
static const float fma_a[NLANES] = {2e38f, 2e38f, 1.0f + 0x1p-12f, 1.0f + 0x1p-12f};
static const float fma_b[NLANES] = {2.0f, 2.0f, 1.0f + 0x1p-12f, 1.0f + 0x1p-12f};
static const float fma_c[NLANES] = {-3e38f, 3e38f, -(1.0f + 0x1p-11f), 1.0f + 0x1p-11f};

/* Output o at lane l as the language defines it, fused or not. */
static float fma_expected(int o, int l, bool fused)
{
    volatile float a = fma_a[l], b = fma_b[l], c = fma_c[l];
    volatile float ab = a * b, cb = c * b; /* each rounded to f32 */
    switch (o) {
    case 0: case 1: return fused ? fmaf(a, b, c) : ab + c;
    case 2: return fused ? fmaf(a, b, -c) : ab - c;
    case 3: return fused ? fmaf(-a, b, c) : c - ab;
    case 4: return fused ? fmaf(a, b, cb) : ab + cb;
    default: return ab + c; /* never fused: the product is M's */
    }
}

/* Runs fma_program on one evaluator (0 reference, 1 loops, 2 cpu, 3 emu)
 * and compares each output with fma_expected bit for bit. */
static void fma_run(int how, bool off)
{
    static const char *const names[] = {"reference", "loops", "cpu", "emu"};
    FeUnit u;
    assert_int_equal(fe_load_text("fma.tex", "fma", fma_program, &u), 0);
    TeProgram *p = u.prog;
    p->fp_contract_off = off;
    int64_t dims[1] = {NLANES};
    float **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
    for (int i = 0; i < p->ntensors; i++)
        bufs[i] = calloc(NLANES, sizeof(float));
    memcpy(bufs[ir_te_find(p, "A")->id], fma_a, sizeof fma_a);
    memcpy(bufs[ir_te_find(p, "B")->id], fma_b, sizeof fma_b);
    memcpy(bufs[ir_te_find(p, "C")->id], fma_c, sizeof fma_c);
    char err[512];
    if (how == 0) {
        assert_int_equal(ir_interp(p, dims, bufs, err, sizeof err), 0);
    } else {
        TargetInfo ti = pass_target_info(how == 3 ? PT_GPU : PT_CPU);
        LoopProgram *lp = pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err);
        assert_non_null(lp);
        if (how == 1) {
            assert_int_equal(ex_loops_run(lp, dims, bufs, err, sizeof err), 0);
        } else if (how == 2) {
            ExCpu *cp = ex_cpu_compile(lp, err, sizeof err);
            assert_non_null(cp);
            assert_int_equal(ex_cpu_run(cp, dims, bufs, NULL, err, sizeof err), 0);
            ex_cpu_destroy(cp);
        } else {
            ExEmu *ep = ex_emu_compile(lp, err, sizeof err);
            assert_non_null(ep);
            assert_int_equal(ex_emu_run(ep, NULL, dims, bufs, err, sizeof err), 0);
            ex_emu_destroy(ep);
        }
    }
    for (int o = 0; o < NFMA; o++) {
        char name[8];
        snprintf(name, sizeof name, "P%d", o + 1);
        const float *got = bufs[ir_te_find(p, name)->id];
        for (int l = 0; l < NLANES; l++)
            if (!same(got[l], fma_expected(o, l, !off)))
                fail_msg("%s, fp-contract %s: %s[%d] = %.9g, expected %.9g", names[how],
                         off ? "off" : "on", name, l, got[l], fma_expected(o, l, !off));
    }
    for (int i = 0; i < p->ntensors; i++)
        free(bufs[i]);
    free(bufs);
    fe_unload(&u);
}

static void test_contraction(void **state)
{
    (void)state;
    /* the lanes tell the two apart for every output that may fuse */
    for (int o = 0; o < NFMA - 1; o++) {
        bool differs = false;
        for (int l = 0; l < NLANES; l++)
            differs |= !same(fma_expected(o, l, true), fma_expected(o, l, false));
        assert_true(differs);
    }
    assert_true(fabsf(fma_expected(0, 0, true) - 1e38f) < 1e32f && isinf(fma_expected(0, 0, false)));
    for (int how = 0; how < 4; how++) {
        fma_run(how, false);
        fma_run(how, true);
    }
}

/* The contraction rule itself: which forms fuse, and the negations. */
static void test_contract_rule(void **state)
{
    (void)state;
    FeUnit u;
    assert_int_equal(fe_load_text("fma.tex", "fma", fma_program, &u), 0);
    static const char *const want[] = {
        "fma(A[i], B[i], C[i])", "fma(A[i], B[i], C[i])", "fma(A[i], B[i], -C[i])",
        "fma(-A[i], B[i], C[i])", "fma(A[i], B[i], C[i] * B[i])", "M[i] + C[i]"};
    for (int o = 0; o < NFMA; o++) {
        char name[8];
        snprintf(name, sizeof name, "P%d", o + 1);
        const Tensor *t = ir_te_find(u.prog, name);
        char *got = ir_expr_str(u.prog->arena, ir_contract(u.prog->ctx, t->body));
        assert_string_equal(got, want[o]);
    }
    /* integer arithmetic and a product that is not an operand never fuse */
    ExprCtx *c = u.prog->ctx;
    Var *i = ir_te_find(u.prog, "P1")->axes[0];
    Expr *ii = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, ir_varref(c, i), ir_varref(c, i)),
                        ir_int(c, 1));
    assert_ptr_equal(ir_contract(c, ii), ii);
    Expr *x = ir_load(c, ir_te_find(u.prog, "A"), 1, (Expr *[]){ir_varref(c, i)}, false);
    Expr *neg = ir_binop(c, EX_ADD, ir_unop(c, EX_NEG, ir_binop(c, EX_MUL, x, x)), x);
    assert_ptr_equal(ir_contract(c, neg), neg);
    /* a sum's step: fused only when asked and the value is a product */
    Expr *xx = ir_binop(c, EX_MUL, x, x);
    assert_int_equal(ir_accumulate(c, EX_ADD, x, xx, true)->kind, EX_FMA);
    assert_int_equal(ir_accumulate(c, EX_ADD, x, xx, false)->kind, EX_ADD);
    assert_int_equal(ir_accumulate(c, EX_MAX, x, xx, true)->kind, EX_MAX);
    fe_unload(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integer_table),
        cmocka_unit_test(test_float_table),
        cmocka_unit_test(test_every_evaluator),
        cmocka_unit_test(test_contraction),
        cmocka_unit_test(test_contract_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
