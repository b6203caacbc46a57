/* Stages with several variants and a dispatch tree (tests/aot/dispatch_case.h:
 * a dense layer, three micro-kernels, T <= 5 / T <= 40 / above, the middle
 * one splitting its reduction into two launches):
 *
 * - lowering makes the variants' kernels (dd_Y, dd_Y_v1_part + dd_Y_v1,
 *   dd_Y_v2, with their own micro-kernels), one stage and one scratch
 *   buffer; the plan (exec/plan.c over runtime/plan.c) picks the tree's
 *   variant for every T from 1 to 70 (above the declared 48 too), with its
 *   launches, grids and workspace; the printer shows the tree; the
 *   verifier and the pipeline reject bad trees and stage tables;
 * - the object dcc ships (exec/cpu.c: JIT-compiled, its own table and
 *   dispatch) launches exactly what the plan lists, for every T;
 * - the object, the loop interpreter and the SIMT emulator (GPU form)
 *   match the reference interpreter for every T, and on a marked lowering
 *   (each variant adds MARK * v to what it stores) show they ran exactly
 *   the picked variant;
 * - the AOT objects (CPU and GPU) build; tests/aot/run_dispatch.sh runs the
 *   CPU one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"

#include "tests/aot/dispatch_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TMAX = 70 };

typedef int (*Runner)(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen);

static int run_cpu(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    return ex_cpu_run(ctx, dims, bufs, NULL, err, errlen);
}

static int run_loops(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    return ex_loops_run(ctx, dims, bufs, err, errlen);
}

static int run_emu(void *ctx, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    return ex_emu_run(ctx, NULL, dims, bufs, err, errlen);
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
    assert_int_equal(lp->nkernels, DISPATCH_NVARIANTS + 1);
    assert_int_equal(lp->nbuffers, c.p->ntensors + 1);
    const Stage *st = &lp->stages[0];
    assert_int_equal(st->nvariants, DISPATCH_NVARIANTS);
    static const char *const names[] = {"dd_Y", "dd_Y_v1_part", "dd_Y_v1", "dd_Y_v2"};
    for (int i = 0; i < lp->nkernels; i++)
        assert_string_equal(lp->kernels[i]->name, names[i]);
    assert_int_equal(st->variants[1].nkernels, 2);
    assert_int_equal(st->variants[1].nscratch, 1);
    assert_string_equal(st->variants[1].scratch[0]->name, "Y_v1_part");
    assert_ptr_equal(lp->kernels[1]->out, st->variants[1].scratch[0]);
    for (int v = 0; v < DISPATCH_NVARIANTS; v++) {
        MicroKernel mk;
        assert_true(pass_parse_microkernel(dispatch_variants[v], &mk, NULL));
        assert_int_equal(ir_microkernel_cmp(&st->variants[v].mk, &mk), 0);
        const Kernel *k = lp->kernels[st->variants[v].first + st->variants[v].nkernels - 1];
        assert_int_equal(k->variant, v);
        assert_int_equal(k->stage, 0);
        assert_ptr_equal(k->out, st->out);
    }

    /* the plan: the tree's variant for every T, its launches and grids */
    ExProgram *x = ex_program_new(lp);
    char err[512] = "";
    int seen[DISPATCH_NVARIANTS] = {0};
    for (int64_t T = 1; T <= TMAX; T++) {
        DcrtPlan *pl = ex_plan(x, &T, err, sizeof err);
        assert_non_null(pl);
        int v = dispatch_expected(T);
        assert_int_equal(pl->variant[0], v);
        assert_int_equal(pl->nlaunches, st->variants[v].nkernels);
        for (int i = 0; i < pl->nlaunches; i++) {
            const Kernel *k = lp->kernels[pl->launches[i].kernel];
            assert_int_equal(pl->launches[i].kernel, st->variants[v].first + i);
            assert_int_equal(pl->launches[i].blocks, ir_eval_dims(k->body->loop.var->extent, &T));
            assert_int_equal(pl->launches[i].threads, k->nthreads);
        }
        /* the scratch buffer of the split variant, [3, T, 20], only when it runs */
        int scratch = c.p->ntensors;
        assert_int_equal(pl->numel[scratch], v == 1 ? 3 * T * DISPATCH_N : 0);
        assert_int_equal(pl->workspace_bytes, v == 1 ? (3 * T * DISPATCH_N * 4 + 255) / 256 * 256 : 0);
        assert_int_equal(pl->offset[scratch], v == 1 ? 0 : -1);
        seen[v]++;
        dcrt_plan_free(pl);
    }
    assert_int_equal(seen[0], DISPATCH_LE0);
    assert_int_equal(seen[1], DISPATCH_LE1 - DISPATCH_LE0);
    assert_int_equal(seen[2], TMAX - DISPATCH_LE1);
    int64_t zero = 0;
    assert_null(ex_plan(x, &zero, err, sizeof err));
    assert_non_null(strstr(err, "T = 0 is below the declared range 1..48"));
    ex_program_free(x);

    assert_true(ir_verify_loops(lp, err, sizeof err));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ir_print_loops(f, lp);
    fclose(f);
    assert_non_null(strstr(text, "# stage 0 computes Y: 3 variants, dispatch:\n"
                                 "#  if T <= 5:\n#    variant 0\n#  else:\n#    if T <= 40:\n"));
    assert_non_null(strstr(text, "# stage 0 variant 1\n# launch 1 of 2 of stage Y; scratch "
                                 "Y_v1_part[3, T, 20]\nkernel dd_Y_v1_part "));
    assert_non_null(strstr(text, "# stage 0 variant 2\nkernel dd_Y_v2 "));
    free(text);

    /* a broken stage table */
    Kernel *k1 = lp->kernels[2];
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

/* Every runner of kind's lowering, plain and marked: the object and the
 * loop interpreter for the CPU form, the SIMT emulator for the GPU form. */
static void check_runners(PassTarget kind)
{
    for (int mark = 0; mark < 2; mark++) {
        Case c = lower(mark ? "ddm" : "dd", kind, mark);
        char err[512] = "";
        ExCpu *cpu = kind == PT_CPU ? ex_cpu_compile(c.lp, err, sizeof err) : NULL;
        ExEmu *emu = kind == PT_GPU ? ex_emu_compile(c.lp, err, sizeof err) : NULL;
        if (!cpu && !emu)
            fail_msg("%s", err);
        if (cpu) {
            check_runner(c.p, run_cpu, cpu, mark, "cpu");
            check_runner(c.p, run_loops, c.lp, mark, "loops");
        } else {
            check_runner(c.p, run_emu, emu, mark, "emu");
        }
        ex_cpu_destroy(cpu);
        ex_emu_destroy(emu);
        ir_te_destroy(c.p);
    }
}

static void test_runners(void **state)
{
    (void)state;
    check_runners(PT_CPU);
    check_runners(PT_GPU);
}

/* The launches the compiled object makes, as libdcrt reports them. */
typedef struct Seen {
    int n;
    DcrtLaunch l[8];
} Seen;

static void record(void *ud, const DcrtProgram *p, const DcrtLaunch *l, double ms)
{
    (void)p;
    (void)ms;
    Seen *s = ud;
    if (s->n < 8)
        s->l[s->n] = *l;
    s->n++;
}

/* The object's own dispatch (its table, compiled in) launches for every T
 * exactly what exec/plan.c plans from the LoopProgram. */
static void test_object_follows_plan(void **state)
{
    (void)state;
    Case c = lower("dd", PT_CPU, false);
    char err[512] = "";
    ExCpu *cpu = ex_cpu_compile(c.lp, err, sizeof err);
    assert_non_null(cpu);
    ExProgram *x = ex_program_new(c.lp);
    Bufs b = bufs_new(c.p), ref = bufs_new(c.p);
    Seen seen;
    for (int64_t T = 1; T <= TMAX; T++) {
        prepare(c.p, T, &b, &ref);
        memset(&seen, 0, sizeof seen);
        dcrt_set_launch_hook(record, &seen);
        assert_int_equal(ex_cpu_run(cpu, &T, b.b, NULL, err, sizeof err), 0);
        dcrt_set_launch_hook(NULL, NULL);
        DcrtPlan *pl = ex_plan(x, &T, err, sizeof err);
        assert_int_equal(seen.n, pl->nlaunches);
        for (int i = 0; i < pl->nlaunches; i++) {
            assert_int_equal(seen.l[i].kernel, pl->launches[i].kernel);
            assert_int_equal(seen.l[i].variant, pl->launches[i].variant);
            assert_int_equal(seen.l[i].blocks, pl->launches[i].blocks);
        }
        dcrt_plan_free(pl);
    }
    bufs_free(&b);
    bufs_free(&ref);
    ex_program_free(x);
    ex_cpu_destroy(cpu);
    ir_te_destroy(c.p);
}

/* dcrt_set_num_threads: every thread count computes the reference's
 * result for every T (so every launch's blocks are all run, once), and a
 * count out of range is refused with a message, the pool unchanged. */
static void test_thread_counts(void **state)
{
    (void)state;
    Case c = lower("dd", PT_CPU, false);
    char err[512] = "";
    ExCpu *cpu = ex_cpu_compile(c.lp, err, sizeof err);
    assert_non_null(cpu);
    static const int counts[] = {1, 3, 2, 0};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        assert_int_equal(dcrt_set_num_threads(counts[i]), DCRT_OK);
        check_runner(c.p, run_cpu, cpu, false, "cpu after dcrt_set_num_threads");
    }
    assert_int_equal(dcrt_set_num_threads(-1), DCRT_ERR_THREADS);
    assert_non_null(strstr(dcrt_last_error(), "threads"));
    assert_int_equal(dcrt_set_num_threads(5000), DCRT_ERR_THREADS);
    check_runner(c.p, run_cpu, cpu, false, "cpu after a refused count");
    ex_cpu_destroy(cpu);
    ir_te_destroy(c.p);
}

/* An object holds at most CG_MAX_CONST_BYTES of constants (its code
 * reaches its read-only data within 2 GB): a program whose constant is 2
 * GB gets an error naming the size, before any byte of it is read (the
 * constant here holds 16 bytes and claims 2^29 floats); a JIT, which
 * refers to the constants where they are, is not limited. */
static void test_const_limit(void **state)
{
    (void)state;
    char err[512] = "";
    TeProgram *p = ir_te_new("big");
    ExprCtx *c = p->ctx;
    Expr *n = ir_int(c, (int64_t)1 << 29);
    float four[4] = {1, 2, 3, 4};
    Tensor *W = ir_te_add_const(p, "W", DT_F32, 1, &n, four, sizeof four, "w.npy");
    Var *i = ir_var(c, "i", VK_AXIS, ir_int(c, 4));
    Expr *idx = ir_varref(c, i);
    assert_non_null(ir_te_add_compute(p, "Y", TK_OUTPUT, 1, &i, ir_load(c, W, 1, &idx, false)));
    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lp = pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err);
    if (!lp)
        fail_msg("%s", err);
    const CgTarget *isa = cg_target_cpu_arch("x86-64", err, sizeof err);
    CgHostOpts o = {.nisas = 1, .isas = &isa};
    assert_null(cg_host_module(lp, &o, err, sizeof err));
    assert_non_null(strstr(err, "constants are 2147483648 bytes, more than the 1879048192"));
    o.jit = true;
    CgModule *m = cg_host_module(lp, &o, err, sizeof err);
    if (!m)
        fail_msg("%s", err);
    cg_module_destroy(m);
    ir_te_destroy(p);
}

/* p lowered for the CPU, tensor `out`'s micro-kernel mk, the others the
 * default; a failure fails the test. */
static LoopProgram *lower_opts(TeProgram *p, int out, const char *mk, const PipelineOpts *o)
{
    char err[512];
    MicroKernel *mks = calloc((size_t)p->ntensors, sizeof *mks);
    if (!mks || !pass_parse_microkernel(mk, &mks[out], NULL))
        fail_msg("bad micro-kernel %s", mk);
    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lp = pass_run_pipeline(p, mks, &ti, o, err, sizeof err);
    free(mks);
    if (!lp)
        fail_msg("%s", err);
    return lp;
}

static LoopProgram *lower_with(TeProgram *p, int out, const char *mk)
{
    return lower_opts(p, out, mk, NULL);
}

/* A dense layer Y[T, N] = X[T, K] x its bound constants (consts, in the
 * program's input order after X), compiled as cpu, against the reference
 * at T = T0, T0 + step, ... up to T1. */
static void check_dense(ExCpu *cpu, TeProgram *p, float *const *consts, int nconsts, int64_t K,
                        int64_t N, int64_t T0, int64_t T1, int64_t step)
{
    char err[512];
    for (int64_t T = T0; T <= T1; T += step) {
        float *x = malloc(sizeof(float) * (size_t)(T * K));
        float *y = malloc(sizeof(float) * (size_t)(T * N));
        float *ry = malloc(sizeof(float) * (size_t)(T * N));
        float *bufs[8] = {x}, *ref[8] = {x};
        rt_rng_fill(4, (uint64_t)T, x, (size_t)(T * K));
        for (int i = 0; i < nconsts; i++)
            ref[1 + i] = consts[i];
        bufs[1 + nconsts] = y;
        ref[1 + nconsts] = ry;
        assert_int_equal(ex_cpu_run(cpu, &T, bufs, NULL, err, sizeof err), 0);
        assert_int_equal(ir_interp(p, &T, ref, err, sizeof err), 0);
        for (int64_t e = 0; e < T * N; e++)
            assert_true(fabsf(y[e] - ry[e]) <= 1e-4f * (1 + fabsf(ry[e])));
        free(x);
        free(y);
        free(ry);
    }
}

/* ir_te_bind_const: an input of fixed extents becomes a constant read
 * where the caller keeps it. A dense layer whose W and b are bound runs
 * on the JIT as the reference computes it, its packed variant reading
 * panels packed from the caller's W when compiling (one launch); what
 * cannot be bound is refused with the reason. */
static void test_bind_const(void **state)
{
    (void)state;
    char err[512] = "";
    FeUnit u;
    if (fe_load_text("bind.tex", "bind",
                     "dim T in 1..64\n"
                     "input X[T, 40] f32\n"
                     "input W[24, 40] f32\n"
                     "input b[24] f32\n"
                     "output Y[i: T, j: 24] = sum[k: 40](X[i, k] * W[j, k]) + b[j]\n",
                     &u) != 0)
        fail_msg("bind.tex does not compile");
    TeProgram *p = u.prog;
    float w[24 * 40], bias[24];
    rt_rng_fill(3, 1, w, 24 * 40);
    rt_rng_fill(3, 2, bias, 24);
    assert_int_equal(ir_te_bind_const(p, "W", w, sizeof w - 4, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot bind 'W': it holds 3840 bytes (f32), not 3836"));
    assert_int_equal(ir_te_bind_const(p, "X", w, sizeof w, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "its extents use dims"));
    assert_int_equal(ir_te_bind_const(p, "Y", w, sizeof w, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "computed, not an input"));
    assert_int_equal(ir_te_bind_const(p, "Z", w, sizeof w, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "no tensor of that name"));
    assert_int_equal(ir_te_bind_const(p, "W", w, sizeof w, "w", err, sizeof err), 0);
    assert_int_equal(ir_te_bind_const(p, "b", bias, sizeof bias, NULL, err, sizeof err), 0);
    assert_int_equal(ir_te_bind_const(p, "W", w, sizeof w, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "a constant already"));
    assert_true(ir_te_find_tensor(p, "W")->data == w); /* not copied */

    LoopProgram *lp = lower_with(p, 3, "threads [3, 1] tile [6, 16] rchunk 16 unroll 1 vec 16 staged packed");
    assert_int_equal(lp->nkernels, 1); /* no packing launch */
    ExCpu *cpu = ex_cpu_compile(lp, err, sizeof err);
    if (!cpu)
        fail_msg("%s", err);
    float *consts[2] = {w, bias};
    check_dense(cpu, p, consts, 2, 40, 24, 1, 70, 23);
    ex_cpu_destroy(cpu);
    fe_unload(&u);
}

/* A constant's panels are at most 16 wide (lowering 4): variants of tile
 * widths 16, 32 and 48 along N read one packed copy of W, each as the
 * reference computes it. */
static void test_const_panels_shared(void **state)
{
    (void)state;
    char err[512] = "";
    FeUnit u;
    if (fe_load_text("share.tex", "share",
                     "dim T in 1..64\n"
                     "input X[T, 40] f32\n"
                     "input W[96, 40] f32\n"
                     "output Y[i: T, j: 96] = sum[k: 40](X[i, k] * W[j, k])\n",
                     &u) != 0)
        fail_msg("share.tex does not compile");
    TeProgram *p = u.prog;
    float w[96 * 40];
    rt_rng_fill(5, 1, w, 96 * 40);
    assert_int_equal(ir_te_bind_const(p, "W", w, sizeof w, NULL, err, sizeof err), 0);
    static const char *const mks[] = {
        "threads [2, 1] tile [6, 16] rchunk 8 unroll 1 vec 16 staged packed",
        "threads [2, 2] tile [4, 32] rchunk 8 unroll 1 vec 16 staged packed",
        "threads [1, 1] tile [6, 48] rchunk 8 unroll 1 vec 16 staged packed"};
    static const DispatchNode nodes[] = {
        {-1, 0, 10, 1, 2}, {0, 0, 0, 0, 0}, {-1, 0, 30, 3, 4}, {1, 0, 0, 0, 0}, {2, 0, 0, 0, 0}};
    static const Dispatch tree = {5, nodes};
    MicroKernel mk[3];
    for (int v = 0; v < 3; v++)
        assert_true(pass_parse_microkernel(mks[v], &mk[v], NULL));
    StageSchedule *sched = IR_NEWN(p->arena, StageSchedule, p->ntensors);
    sched[ir_te_find(p, "Y")->id] = (StageSchedule){3, mk, &tree};
    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lp = pass_run_pipeline_sched(p, sched, &ti, NULL, err, sizeof err);
    if (!lp)
        fail_msg("%s", err);
    int panels = 0;
    for (int i = p->ntensors; i < lp->nbuffers; i++)
        panels += lp->buffers[i]->panel;
    assert_int_equal(panels, 1);
    assert_int_equal(lp->nkernels, 3); /* no packing launch */
    ExCpu *cpu = ex_cpu_compile(lp, err, sizeof err);
    if (!cpu)
        fail_msg("%s", err);
    float *consts[1] = {w};
    check_dense(cpu, p, consts, 1, 40, 96, 5, 70, 15); /* every variant, and above the range */
    ex_cpu_destroy(cpu);
    fe_unload(&u);
}

/* ir_arena_release: only a request that got a chunk of its own, or a
 * block the arena adopted, goes back early, once. */
static void test_arena_release(void **state)
{
    (void)state;
    Arena *a = ir_arena_new();
    char *small = ir_arena_alloc(a, 64), *big = ir_arena_alloc(a, 1 << 20);
    char *big2 = ir_arena_alloc(a, 1 << 20), *after = ir_arena_alloc(a, 64);
    big2[(1 << 20) - 1] = 1;
    assert_false(ir_arena_release(a, small));
    assert_false(ir_arena_release(a, big + 16));
    assert_true(ir_arena_release(a, big));
    assert_false(ir_arena_release(a, big));
    assert_false(ir_arena_release(a, after));
    assert_false(ir_arena_release(NULL, big2));
    assert_int_equal(big2[(1 << 20) - 1], 1);
    /* an adopted block: its own pointer, given back once, or with the
     * arena (ASan tells a leak or a second free); the arena's current
     * chunk keeps serving small requests around it */
    size_t before = a->used_total;
    char *taken = malloc(1000), *kept = malloc(3000);
    assert_ptr_equal(ir_arena_adopt(a, taken, 1000), taken);
    assert_ptr_equal(ir_arena_adopt(a, kept, 3000), kept);
    char *next = ir_arena_alloc(a, 64);
    assert_ptr_equal(next, after + 64);
    assert_int_equal(a->used_total, before + 1000 + 3000 + 64);
    assert_false(ir_arena_release(a, taken + 1));
    assert_true(ir_arena_release(a, taken));
    assert_false(ir_arena_release(a, taken));
    assert_int_equal(a->used_total, before + 3000 + 64);
    ir_arena_destroy(a);
    Arena *empty = ir_arena_new(); /* adopted first, before any chunk */
    ir_arena_adopt(empty, malloc(16), 16);
    assert_non_null(ir_arena_alloc(empty, 8));
    ir_arena_destroy(empty);
}

/* ir_te_release_unread_consts: after the last lowering, the elements of a
 * constant that only its panels (packed when compiling) read go back; the
 * JIT compiled afterwards computes what the reference computed before; the
 * program is then refused for lowering and interpreting. A constant a
 * kernel reads (b) stays, and so does one the caller bound. during: the
 * same given back by the lowering itself (PipelineOpts.release_consts),
 * as soon as W's stage is lowered. */
static void release_consts(bool during)
{
    enum { N = 96, K = 200 };
    char err[512] = "";
    TeProgram *p = ir_te_new("release");
    ExprCtx *c = p->ctx;
    Var *T = ir_te_add_dim(p, "T", 1, 64);
    T->max = 1 << 20;
    float *w = malloc(sizeof(float) * N * K), bias[N];
    rt_rng_fill(5, 1, w, N * K);
    rt_rng_fill(5, 2, bias, N);
    Expr *xs[] = {ir_varref(c, T), ir_int(c, K)}, *ws[] = {ir_int(c, N), ir_int(c, K)};
    Expr *bs[] = {ir_int(c, N)};
    Tensor *X = ir_te_add_input(p, "X", DT_F32, 2, xs);
    Tensor *W = ir_te_add_const(p, "W", DT_F32, 2, ws, w, sizeof(float) * N * K, "w.npy");
    Tensor *b = ir_te_add_const(p, "b", DT_F32, 1, bs, bias, sizeof bias, "b.npy");
    Var *i = ir_var(c, "i", VK_AXIS, ir_varref(c, T)), *j = ir_var(c, "j", VK_AXIS, ir_int(c, N));
    Var *k = ir_var(c, "k", VK_AXIS, ir_int(c, K));
    Expr *xi[] = {ir_varref(c, i), ir_varref(c, k)}, *wi[] = {ir_varref(c, j), ir_varref(c, k)};
    Expr *bi[] = {ir_varref(c, j)};
    Expr *dot = ir_reduce(c, RD_SUM, 1, &k,
                          ir_binop(c, EX_MUL, ir_load(c, X, 2, xi, false), ir_load(c, W, 2, wi, false)));
    Var *axes[] = {i, j};
    ir_te_add_compute(p, "Y", TK_OUTPUT, 2, axes, ir_binop(c, EX_ADD, dot, ir_load(c, b, 1, bi, false)));
    if (!ir_verify_te(p, err, sizeof err))
        fail_msg("%s", err);

    static const int64_t sizes[] = {1, 40, 70};
    float *x[3], *ref[3];
    for (int s = 0; s < 3; s++) { /* the reference, while the constants are there */
        x[s] = malloc(sizeof(float) * (size_t)(sizes[s] * K));
        ref[s] = malloc(sizeof(float) * (size_t)(sizes[s] * N));
        rt_rng_fill(6, (uint64_t)s, x[s], (size_t)(sizes[s] * K));
        float *bufs[4] = {x[s], (float *)W->data, (float *)b->data, ref[s]};
        assert_int_equal(ir_interp(p, &sizes[s], bufs, err, sizeof err), 0);
    }
    const char *mk = "threads [3, 2] tile [6, 16] rchunk 40 unroll 1 vec 16 staged packed";
    LoopProgram *lp = lower_opts(p, 3, mk, &(PipelineOpts){.release_consts = during});
    assert_int_equal(p->consts_released, during);
    assert_int_equal(ir_te_release_unread_consts(p, lp), during ? 0 : (int64_t)sizeof(float) * N * K);
    assert_true(p->consts_released);
    assert_non_null(W->data); /* still a constant */
    assert_true(memcmp(b->data, bias, sizeof bias) == 0);
    assert_int_equal(ir_te_release_unread_consts(p, lp), 0); /* once */
    assert_int_equal(ir_te_release_const(p, W), 0);
    TargetInfo ti = pass_target_info(PT_CPU);
    assert_null(pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err));
    assert_non_null(strstr(err, "release: its unread constants were released"));
    float *none[4] = {x[0], (float *)W->data, (float *)b->data, ref[0]};
    assert_int_equal(ir_interp(p, &sizes[0], none, err, sizeof err), -1);
    assert_non_null(strstr(err, "were released after its last compile"));

    ExCpu *cpu = ex_cpu_compile(lp, err, sizeof err);
    if (!cpu)
        fail_msg("%s", err);
    for (int s = 0; s < 3; s++) {
        float *y = malloc(sizeof(float) * (size_t)(sizes[s] * N));
        float *bufs[4] = {x[s], NULL, NULL, y};
        assert_int_equal(ex_cpu_run(cpu, &sizes[s], bufs, NULL, err, sizeof err), 0);
        for (int64_t e = 0; e < sizes[s] * N; e++)
            assert_true(fabsf(y[e] - ref[s][e]) <= 1e-4f * (1 + fabsf(ref[s][e])));
        free(y);
        free(x[s]);
        free(ref[s]);
    }
    ex_cpu_destroy(cpu);
    ir_te_destroy(p);

    /* a constant the caller bound is the caller's */
    FeUnit u;
    if (fe_load_text("bound.tex", "bound",
                     "input X[4, 200] f32\n"
                     "input W[96, 200] f32\n"
                     "output Y[i: 4, j: 96] = sum[k: 200](X[i, k] * W[j, k])\n",
                     &u) != 0)
        fail_msg("bound.tex does not compile");
    assert_int_equal(ir_te_bind_const(u.prog, "W", w, sizeof(float) * N * K, NULL, err, sizeof err), 0);
    lp = lower_opts(u.prog, 2, mk, &(PipelineOpts){.release_consts = during});
    assert_int_equal(ir_te_release_unread_consts(u.prog, lp), 0);
    assert_false(u.prog->consts_released);
    fe_unload(&u);
    free(w);
}

static void test_release_consts(void **state)
{
    (void)state;
    release_consts(false);
    release_consts(true);
}

/* Both AOT objects build with the table compiled in. */
static void test_objects(void **state)
{
    (void)state;
    char err[512] = "";
    size_t len = 0;
    Case c = lower("dd", PT_CPU, false);
    const CgTarget *isas[2] = {cg_target_cpu_arch("x86-64-v3", err, sizeof err),
                               cg_target_cpu_arch("x86-64", err, sizeof err)};
    CgHostOpts o = {.nisas = 2, .isas = isas};
    CgModule *m = cg_host_module(c.lp, &o, err, sizeof err);
    if (!m)
        fail_msg("%s", err);
    char *obj = cg_module_emit(m, true, &len, err, sizeof err);
    assert_non_null(obj);
    assert_true(len > 0);
    free(obj);
    char *ll = cg_module_print(m, err, sizeof err);
    assert_non_null(strstr(ll, "define i32 @dd_run("));
    assert_non_null(strstr(ll, "define i32 @dd_run_packed("));
    assert_non_null(strstr(ll, "define i64 @dd_workspace_size("));
    assert_non_null(strstr(ll, "@dd__dd_Y_v1_part__x86_64_v3"));
    assert_non_null(strstr(ll, "@dd__dd_Y_v1_part__x86_64("));
    free(ll);
    cg_module_destroy(m);
    ir_te_destroy(c.p);

    c = lower("dd", PT_GPU, false);
    char *ptx = cg_emit_ptx(c.lp, NULL, true, err, sizeof err);
    if (!ptx)
        fail_msg("%s", err);
    assert_non_null(strstr(ptx, ".entry dd_Y_v2"));
    assert_non_null(strstr(ptx, ".entry dd_Y_v1_part"));
    o = (CgHostOpts){.ptx = ptx};
    m = cg_host_module(c.lp, &o, err, sizeof err);
    if (!m)
        fail_msg("%s", err);
    obj = cg_module_emit(m, true, &len, err, sizeof err);
    assert_non_null(obj);
    assert_true(len > 0);
    free(obj);
    cg_module_destroy(m);
    free(ptx);
    ir_te_destroy(c.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_table),         cmocka_unit_test(test_bad_trees),
        cmocka_unit_test(test_runners),             cmocka_unit_test(test_object_follows_plan),
        cmocka_unit_test(test_objects),             cmocka_unit_test(test_const_limit),
        cmocka_unit_test(test_bind_const),             cmocka_unit_test(test_const_panels_shared),
        cmocka_unit_test(test_arena_release),
        cmocka_unit_test(test_release_consts),             cmocka_unit_test(test_thread_counts),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cg_jit_shutdown();
    rt_simt_release();
    return rc;
}
