/* Stages with several variants and a dispatch tree (tests/aot/dispatch_case.h:
 * a dense layer, three micro-kernels, T <= 5 / T <= 40 / above):
 *
 * - lowering makes one kernel per variant (PROG_Y, PROG_Y_v1, PROG_Y_v2,
 *   with their own micro-kernels) and one stage; ir_stage_kernel picks the
 *   tree's variant for every T from 1 to 70 (above the declared 48 too);
 *   the printer shows the tree; the verifier and the pipeline reject bad
 *   trees and stage tables;
 * - the JIT, the loop interpreter and the SIMT emulator (GPU form) match
 *   the reference interpreter for every T, and on a marked lowering (each
 *   variant adds MARK * v to what it stores) show they ran exactly the
 *   picked variant; cg_program_run_kernel runs the kernel it is given;
 * - the AOT objects (CPU and GPU) build; tests/aot/run_dispatch.sh runs the
 *   CPU one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/codegen.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"

#include "tests/aot/dispatch_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TMAX = 70 };

typedef int (*Runner)(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen);

static int run_jit(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    return cg_program_run(ctx, dims, bufs, err, errlen);
}

static int run_loops(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    return ir_run_loops(ctx, dims, bufs, err, errlen);
}

static int run_emu(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    return cg_emu_program_run(ctx, NULL, dims, bufs, err, errlen);
}

/* Buffers for every tensor at T = TMAX, inputs seeded per T. */
typedef struct Bufs {
    float *b[8];
} Bufs;

static Bufs bufs_new(const TeProgram *p)
{
    Bufs b = {{0}};
    int64_t dims[1] = {TMAX};
    assert_true(p->ntensors <= 8);
    for (int i = 0; i < p->ntensors; i++)
        b.b[i] = calloc((size_t)ir_te_numel(p->tensors[i], dims), sizeof(float));
    return b;
}

static void bufs_free(Bufs *b)
{
    for (int i = 0; i < 8; i++)
        free(b->b[i]);
}

/* Seeded inputs for T in got and ref, NaN outputs in got, the reference
 * interpreter's outputs in ref. */
static void prepare(TeProgram *p, int64_t T, Bufs *got, Bufs *ref)
{
    int64_t dims[1] = {T};
    char err[512] = "";
    for (int i = 0; i < p->ntensors; i++) {
        int64_t n = ir_te_numel(p->tensors[i], dims);
        if (p->tensors[i]->kind == TK_INPUT) {
            rt_rng_fill((uint64_t)T, (uint64_t)i, ref->b[i], (size_t)n);
            memcpy(got->b[i], ref->b[i], (size_t)n * sizeof(float));
        } else {
            for (int64_t j = 0; j < n; j++)
                got->b[i][j] = NAN;
        }
    }
    assert_int_equal(ir_interp(p, dims, ref->b, err, sizeof err), 0);
}

/* Runs run for every T in 1..TMAX and compares Y with the reference plus
 * MARK * (the variant the tree picks) when marked. */
static void check_runner(TeProgram *p, Runner run, void *ctx, bool marked, const char *what)
{
    Bufs got = bufs_new(p), ref = bufs_new(p);
    int y = ir_te_find(p, "Y")->id;
    char err[512] = "";
    for (int64_t T = 1; T <= TMAX; T++) {
        int64_t dims[1] = {T};
        prepare(p, T, &got, &ref);
        if (run(ctx, dims, got.b, err, sizeof err) != 0)
            fail_msg("%s, T=%lld: %s", what, (long long)T, err);
        double mark = marked ? DISPATCH_MARK * dispatch_expected(T) : 0;
        for (int64_t j = 0; j < T * DISPATCH_N; j++) {
            double want = ref.b[y][j] + mark, d = fabs(got.b[y][j] - want);
            if (!(d <= 1e-4 * (1 + fabs(want))))
                fail_msg("%s, T=%lld: Y[%lld] = %g, expected %g (variant %d%s)", what,
                         (long long)T, (long long)j, got.b[y][j], want, dispatch_expected(T),
                         marked ? ", marked" : "");
        }
    }
    bufs_free(&got);
    bufs_free(&ref);
}

typedef struct Case {
    TeProgram *p;
    LoopProgram *lp;
} Case;

static Case lower(const char *name, PassTarget kind, bool mark)
{
    Case c = {dispatch_program(name), NULL};
    assert_non_null(c.p);
    char err[512] = "";
    c.lp = dispatch_lower(c.p, kind, mark, err, sizeof err);
    if (!c.lp)
        fail_msg("%s", err);
    return c;
}

static void test_stage_table(void **state)
{
    (void)state;
    Case c = lower("dd", PT_CPU, false);
    const LoopProgram *lp = c.lp;
    assert_int_equal(lp->nstages, 1);
    assert_int_equal(lp->nkernels, DISPATCH_NVARIANTS);
    assert_int_equal(lp->stages[0].first, 0);
    assert_int_equal(lp->stages[0].nvariants, DISPATCH_NVARIANTS);
    assert_string_equal(lp->kernels[0]->name, "dd_Y");
    assert_string_equal(lp->kernels[1]->name, "dd_Y_v1");
    assert_string_equal(lp->kernels[2]->name, "dd_Y_v2");
    for (int v = 0; v < DISPATCH_NVARIANTS; v++) {
        MicroKernel mk;
        assert_true(pass_parse_microkernel(dispatch_variants[v], &mk, NULL));
        assert_int_equal(lp->kernels[v]->variant, v);
        assert_int_equal(lp->kernels[v]->stage, 0);
        assert_memory_equal(lp->kernels[v]->mk.threads, mk.threads, sizeof mk.threads);
        assert_memory_equal(lp->kernels[v]->mk.tile, mk.tile, sizeof mk.tile);
    }
    int seen[DISPATCH_NVARIANTS] = {0};
    for (int64_t T = 1; T <= TMAX; T++) {
        int k = ir_stage_kernel(lp, 0, &T);
        assert_int_equal(lp->kernels[k]->variant, dispatch_expected(T));
        seen[k]++;
    }
    assert_int_equal(seen[0], DISPATCH_LE0);
    assert_int_equal(seen[1], DISPATCH_LE1 - DISPATCH_LE0);
    assert_int_equal(seen[2], TMAX - DISPATCH_LE1);
    assert_int_equal(ir_dispatch_eval(NULL, (int64_t[]){3}), 0);

    char err[512] = "";
    assert_true(ir_verify_loops(lp, err, sizeof err));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ir_print_loops(f, lp);
    fclose(f);
    assert_non_null(strstr(text, "# stage 0 computes Y: 3 variants, dispatch:\n"
                                 "#  if T <= 5:\n#    variant 0\n#  else:\n#    if T <= 40:\n"));
    assert_non_null(strstr(text, "# stage 0 variant 2\nkernel dd_Y_v2 "));
    free(text);

    /* a broken stage table */
    Kernel *k1 = lp->kernels[1];
    k1->variant = 2;
    assert_false(ir_verify_loops(lp, err, sizeof err));
    assert_non_null(strstr(err, "dd_Y_v1"));
    k1->variant = 1;
    c.lp->stages[0].nvariants = 2;
    assert_false(ir_verify_loops(lp, err, sizeof err));
    c.lp->stages[0].nvariants = 3;
    assert_true(ir_verify_loops(lp, err, sizeof err));
    ir_te_destroy(c.p);
}

static void test_bad_trees(void **state)
{
    (void)state;
    static const DispatchNode bad_variant[] = {{-1, 0, 5, 1, 2}, {0, 0, 0, 0, 0}, {3, 0, 0, 0, 0}};
    static const DispatchNode bad_dim[] = {{-1, 1, 5, 1, 2}, {0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}};
    static const DispatchNode cycle[] = {{-1, 0, 5, 1, 2}, {-1, 0, 3, 0, 2}, {1, 0, 0, 0, 0}};
    static const DispatchNode past_end[] = {{-1, 0, 5, 1, 3}, {0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}};
    const Dispatch bad[] = {{3, bad_variant}, {3, bad_dim}, {3, cycle}, {3, past_end}, {2, NULL}};
    const char *why[] = {"variant 3 of 3", "dim 1 of 1", "nodes 0 and 2", "nodes 1 and 3",
                         "without nodes"};
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_false(ir_verify_dispatch(&bad[i], 3, 1, err, sizeof err));
        assert_non_null(strstr(err, why[i]));
    }
    assert_true(ir_verify_dispatch(NULL, 1, 1, err, sizeof err));

    /* the pipeline refuses a schedule whose tree does not fit */
    TeProgram *p = dispatch_program("dd");
    assert_non_null(p);
    MicroKernel mk[3];
    for (int v = 0; v < 3; v++)
        assert_true(pass_parse_microkernel(dispatch_variants[v], &mk[v], NULL));
    StageSchedule *sched = IR_NEWN(p->arena, StageSchedule, p->ntensors);
    sched[ir_te_find(p, "Y")->id] = (StageSchedule){3, mk, &bad[0]};
    TargetInfo ti = pass_target_info(PT_CPU);
    assert_null(pass_run_pipeline_sched(p, sched, &ti, NULL, err, sizeof err));
    assert_non_null(strstr(err, "schedule of Y: dispatch node 2: variant 3 of 3"));
    /* nvariants 0: the default micro-kernel alone, as without a schedule */
    sched[ir_te_find(p, "Y")->id] = (StageSchedule){0, NULL, NULL};
    LoopProgram *lp = pass_run_pipeline_sched(p, sched, &ti, NULL, err, sizeof err);
    assert_non_null(lp);
    assert_int_equal(lp->nkernels, 1);
    assert_int_equal(lp->nstages, 1);
    assert_string_equal(lp->kernels[0]->name, "dd_Y");
    ir_te_destroy(p);
}

/* Every runner of kind's lowering, plain and marked: the JIT and the loop
 * interpreter for the CPU form, the SIMT emulator for the GPU form. */
static void check_runners(PassTarget kind)
{
    for (int mark = 0; mark < 2; mark++) {
        Case c = lower(mark ? "ddm" : "dd", kind, mark);
        char err[512] = "";
        CgProgram *cp = kind == PT_CPU ? cg_jit_compile(c.lp, err, sizeof err) : NULL;
        CgEmuProgram *ep = kind == PT_GPU ? cg_emu_compile(c.lp, err, sizeof err) : NULL;
        if (!cp && !ep)
            fail_msg("%s", err);
        if (cp) {
            assert_int_equal(cg_program_nkernels(cp), DISPATCH_NVARIANTS);
            check_runner(c.p, run_jit, cp, mark, "jit");
            check_runner(c.p, run_loops, c.lp, mark, "loops");
        } else {
            check_runner(c.p, run_emu, ep, mark, "emu");
        }
        cg_program_destroy(cp);
        cg_emu_program_destroy(ep);
        ir_te_destroy(c.p);
    }
}

static void test_runners(void **state)
{
    (void)state;
    check_runners(PT_CPU);
    check_runners(PT_GPU);
}

/* cg_program_run_kernel runs the kernel it is given, whatever the tree says. */
static void test_run_kernel(void **state)
{
    (void)state;
    Case c = lower("ddm", PT_CPU, true);
    char err[512] = "";
    CgProgram *cp = cg_jit_compile(c.lp, err, sizeof err);
    assert_non_null(cp);
    Bufs b = bufs_new(c.p), ref = bufs_new(c.p);
    int64_t dims[1] = {17};
    int y = ir_te_find(c.p, "Y")->id;
    prepare(c.p, 17, &b, &ref);
    for (int k = 0; k < DISPATCH_NVARIANTS; k++) {
        assert_int_equal(cg_program_run_kernel(cp, NULL, k, dims, b.b, err, sizeof err), 0);
        for (int64_t j = 0; j < 17 * DISPATCH_N; j++)
            assert_float_equal(b.b[y][j], ref.b[y][j] + DISPATCH_MARK * k,
                               1e-4 * (1 + fabs(ref.b[y][j] + DISPATCH_MARK * k)));
    }
    assert_int_equal(cg_program_run_kernel(cp, NULL, 3, dims, b.b, err, sizeof err), -1);
    assert_int_equal(cg_program_run_kernel(cp, NULL, 0, (int64_t[]){0}, b.b, err, sizeof err), -1);
    bufs_free(&b);
    bufs_free(&ref);
    cg_program_destroy(cp);
    ir_te_destroy(c.p);
}

/* Both AOT objects build and verify with the tree compiled in. */
static void test_objects(void **state)
{
    (void)state;
    char err[512] = "";
    char *obj = NULL;
    size_t len = 0;
    Case c = lower("dd", PT_CPU, false);
    if (cg_emit_object(c.lp, NULL, &obj, &len, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_true(len > 0);
    free(obj);
    ir_te_destroy(c.p);

    c = lower("dd", PT_GPU, false);
    char *ptx = cg_emit_ptx_text(c.lp, NULL, err, sizeof err);
    if (!ptx)
        fail_msg("%s", err);
    assert_non_null(strstr(ptx, ".entry dd_Y_v2"));
    if (cg_emit_object(c.lp, ptx, &obj, &len, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_true(len > 0);
    free(obj);
    free(ptx);
    ir_te_destroy(c.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_table),  cmocka_unit_test(test_bad_trees),
        cmocka_unit_test(test_runners),      cmocka_unit_test(test_run_kernel),
        cmocka_unit_test(test_objects),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cg_jit_shutdown();
    rt_simt_release();
    return rc;
}
