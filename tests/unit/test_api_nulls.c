/* NULL pointers to the public entry points (issue 31 item 6): each returns
 * its own error (NULL, -1 with a message, false, a DCRT_ERR_* code), never
 * crashes. The CPU object's NAME_run_packed is reached through the JIT
 * (ex_cpu_run calls it); libdcrt's own entries on a hand-made table are in
 * test_dcrt.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"

#include <string.h>

static const char *const text = "dim T in 1..16\n"
                                "input X[T, 8] f32\n"
                                "output Y[i: T, j: 8] = X[i, j] * 2\n";

/* err holds "... NAME is NULL" (or names what was NULL). */
static void expect_err(const char *err, const char *name)
{
    if (!strstr(err, name) || !strstr(err, "NULL"))
        fail_msg("\"%s\" does not say that %s is NULL", err, name);
}

static void test_ir(void **state)
{
    (void)state;
    char err[256] = "";
    assert_null(ir_te_new(NULL));
    TeProgram *p = ir_te_new("p");
    assert_non_null(p);
    assert_null(ir_te_add_dim(NULL, "T", 1, 4));
    assert_null(ir_te_add_dim(p, NULL, 1, 4));
    Var *T = ir_te_add_dim(p, "T", 1, 4);
    Expr *shape[1] = {ir_varref(p->ctx, T)}, *none[1] = {NULL};
    assert_null(ir_te_add_input(NULL, "X", DT_F32, 1, shape));
    assert_null(ir_te_add_input(p, NULL, DT_F32, 1, shape));
    assert_null(ir_te_add_input(p, "X", DT_F32, 1, NULL));
    assert_null(ir_te_add_input(p, "X", DT_F32, 1, none));
    Tensor *X = ir_te_add_input(p, "X", DT_F32, 1, shape);
    Var *i = ir_var(p->ctx, "i", VK_AXIS, ir_varref(p->ctx, T));
    Expr *idx = ir_varref(p->ctx, i), *body = ir_load(p->ctx, X, 1, &idx, false);
    Var *no_axis[1] = {NULL};
    assert_null(ir_te_add_compute(NULL, "Y", TK_OUTPUT, 1, &i, body));
    assert_null(ir_te_add_compute(p, NULL, TK_OUTPUT, 1, &i, body));
    assert_null(ir_te_add_compute(p, "Y", TK_OUTPUT, 1, NULL, body));
    assert_null(ir_te_add_compute(p, "Y", TK_OUTPUT, 1, no_axis, body));
    assert_null(ir_te_add_compute(p, "Y", TK_OUTPUT, 1, &i, NULL));
    assert_non_null(ir_te_add_compute(p, "Y", TK_OUTPUT, 1, &i, body));
    assert_null(ir_te_find(NULL, "X"));
    assert_null(ir_te_find(p, NULL));
    assert_null(ir_te_find_dim(NULL, "T"));
    assert_int_equal(ir_te_numel(NULL, NULL), -1);
    assert_int_equal(ir_te_numel(X, NULL), -1);
    float one = 1;
    assert_int_equal(ir_te_bind_const(NULL, "X", &one, 4, NULL, err, sizeof err), -1);
    expect_err(err, "p");
    assert_false(ir_te_consts_whole(NULL, err, sizeof err));
    expect_err(err, "p");
    assert_true(ir_te_consts_whole(p, err, sizeof err));
    assert_int_equal(ir_te_release_unread_consts(NULL, NULL), 0);
    assert_int_equal(ir_te_bind_const(p, NULL, &one, 4, NULL, err, sizeof err), -1);
    expect_err(err, "name");
    assert_int_equal(ir_te_bind_const(p, "X", NULL, 4, NULL, err, sizeof err), -1);
    expect_err(err, "data");

    assert_false(ir_verify_te(NULL, err, sizeof err));
    expect_err(err, "p");
    assert_true(ir_verify_te(p, err, sizeof err));
    assert_false(ir_check_dims(p, NULL, err, sizeof err));
    expect_err(err, "dims");

    /* ir_interp: the program, the dims, the buffer array, each buffer */
    int64_t dims[1] = {4};
    float x[4] = {1, 2, 3, 4}, y[4] = {0};
    float *bufs[2] = {x, y}, *no_x[2] = {NULL, y}, *no_y[2] = {x, NULL};
    assert_int_equal(ir_interp(NULL, dims, bufs, err, sizeof err), -1);
    expect_err(err, "p");
    assert_int_equal(ir_interp(p, NULL, bufs, err, sizeof err), -1);
    expect_err(err, "dims");
    assert_int_equal(ir_interp(p, dims, NULL, err, sizeof err), -1);
    expect_err(err, "bufs");
    assert_int_equal(ir_interp(p, dims, no_x, err, sizeof err), -1);
    expect_err(err, "tensor 0 (X)");
    assert_int_equal(ir_interp(p, dims, no_y, err, sizeof err), -1);
    expect_err(err, "tensor 1 (Y)");
    assert_int_equal(ir_interp(p, dims, bufs, err, sizeof err), 0);
    assert_true(y[3] == 4);
    ir_te_destroy(p);
}

static void test_frontend(void **state)
{
    (void)state;
    Arena *a = ir_arena_new();
    Source src = {"t.tex", text, strlen(text)}, empty = {"t.tex", NULL, 0};
    DiagList d;
    ir_diags_init(&d, a, &src);
    assert_null(fe_compile(NULL, "t", &d));
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.head->msg, "src is NULL"));
    assert_null(fe_compile(&empty, "t", &d));
    assert_null(fe_compile(&src, NULL, &d));
    assert_int_equal(d.count, 3);
    assert_null(fe_compile(&src, "t", NULL));
    TeProgram *p = fe_compile(&src, "t", &d);
    assert_non_null(p);
    assert_int_equal(d.count, 3);
    ir_te_destroy(p);
    ir_arena_destroy(a);
    /* fe_load and fe_load_text */
    FeUnit u;
    char err[256] = "";
    assert_int_equal(fe_load(NULL, &u, err, sizeof err), -1);
    assert_non_null(strstr(err, "path is NULL"));
    assert_int_equal(fe_load("t.tex", NULL, err, sizeof err), -1);
    assert_int_equal(fe_load_text("t.tex", "t", NULL, &u), 1);
    assert_int_equal(u.diags.count, 1);
    assert_non_null(strstr(u.diags.head->msg, "text is NULL"));
    fe_unload(&u);
    assert_int_equal(fe_load_text(NULL, "t", text, &u), 0);
    fe_unload(&u);
    assert_int_equal(fe_load_text("t.tex", "t", text, NULL), -1);
}

static void test_passes_codegen(void **state)
{
    (void)state;
    char err[256] = "";
    TargetInfo ti = pass_target_info(PT_CPU);
    assert_null(pass_run_pipeline(NULL, NULL, &ti, NULL, err, sizeof err));
    expect_err(err, "p");
    FeUnit u;
    assert_int_equal(fe_load_text("t.tex", "t", text, &u), 0);
    assert_null(pass_run_pipeline_sched(u.prog, NULL, NULL, NULL, err, sizeof err));
    expect_err(err, "ti");

    assert_null(cg_target_cpu_arch(NULL, err, sizeof err));
    expect_err(err, "arch");
    const CgTarget *ts[2];
    assert_int_equal(cg_cpu_arch_list(NULL, ts, 2, err, sizeof err), -1);
    expect_err(err, "list");
    assert_null(cg_module_create(NULL, "m", err, sizeof err));
    expect_err(err, "t");
    assert_null(cg_module_create(cg_target_cpu(), NULL, err, sizeof err));
    expect_err(err, "name");
    assert_int_equal(cg_module_verify(NULL, err, sizeof err), -1);
    assert_int_equal(cg_module_optimize(NULL, err, sizeof err), -1);
    assert_int_equal(cg_module_run_passes(NULL, "default<O1>", err, sizeof err), -1);
    assert_null(cg_module_print(NULL, err, sizeof err));
    size_t len;
    assert_null(cg_module_emit(NULL, true, &len, err, sizeof err));
    expect_err(err, "m");
    assert_null(cg_kernels_module(NULL, cg_target_cpu(), NULL, false, err, sizeof err));
    expect_err(err, "lp");
    assert_null(cg_emit_ptx(NULL, NULL, false, err, sizeof err));
    expect_err(err, "lp");
    assert_false(cg_nvptx_arch_valid(NULL));
    assert_int_equal(cg_nvptx_check_params(NULL, err, sizeof err), -1);
    expect_err(err, "lp");
    assert_null(cg_jit_add(NULL, err, sizeof err));
    expect_err(err, "m");
    assert_null(cg_jit_lookup(NULL, "f", err, sizeof err));
    expect_err(err, "c");
    assert_null(cg_table_new(NULL));
    fe_unload(&u);
}

static void test_exec(void **state)
{
    (void)state;
    char err[256] = "";
    int64_t dims[1] = {4};
    float x[32], y[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)i;
    float *bufs[2] = {x, y}, *no_x[2] = {NULL, y};

    assert_null(ex_program_new(NULL));
    assert_null(ex_plan(NULL, dims, err, sizeof err));
    expect_err(err, "x");
    assert_int_equal(ex_plan_print(stdout, NULL, dims, err, sizeof err), -1);
    expect_err(err, "lp");
    assert_int_equal(ex_call_begin(NULL, dims, bufs, NULL, err, sizeof err), -1);
    expect_err(err, "c");
    assert_int_equal(ex_loops_run(NULL, dims, bufs, err, sizeof err), -1);
    expect_err(err, "lp");
    assert_null(ex_cpu_compile(NULL, err, sizeof err));
    assert_null(ex_cpu_compile_isa(NULL, cg_target_cpu(), err, sizeof err));
    expect_err(err, "lp");
    assert_int_equal(cg_target_level(NULL), 0);
    assert_null(ex_cpu_entry(NULL, NULL));
    assert_int_equal(ex_cpu_run(NULL, dims, bufs, NULL, err, sizeof err), -1);
    expect_err(err, "x");
    assert_null(ex_emu_compile(NULL, err, sizeof err));
    assert_int_equal(ex_emu_run(NULL, NULL, dims, bufs, err, sizeof err), -1);
    assert_null(ex_cuda_compile(NULL, NULL, false, err, sizeof err));
    uint64_t d[2] = {0};
    assert_int_equal(ex_cuda_run(NULL, dims, d, 0, NULL, NULL, err, sizeof err), -1);
    expect_err(err, "x");
    assert_null(ex_profile_start(NULL, err, sizeof err));
    assert_int_equal(ex_profile_print(stdout, NULL, dims, err, sizeof err), -1);
    expect_err(err, "pr");

    /* a real program: NULL dims, tensor array and tensor, down to
     * NAME_run_packed (libdcrt's dcrt_run checks them) */
    FeUnit u;
    assert_int_equal(fe_load_text("t.tex", "t", text, &u), 0);
    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lp = pass_run_pipeline(u.prog, NULL, &ti, NULL, err, sizeof err);
    assert_non_null(lp);
    ExProgram *xp = ex_program_new(lp);
    assert_null(ex_plan(xp, NULL, err, sizeof err));
    expect_err(err, "dims");
    ExCall c;
    assert_int_equal(ex_call_begin(xp, dims, NULL, &c, err, sizeof err), -1);
    expect_err(err, "tensors");
    ex_call_end(&c);
    ex_program_free(xp);
    assert_int_equal(ex_loops_run(lp, NULL, bufs, err, sizeof err), -1);
    expect_err(err, "dims");
    assert_int_equal(ex_loops_run(lp, dims, no_x, err, sizeof err), -1);
    expect_err(err, "tensor X");

    ExCpu *cpu = ex_cpu_compile(lp, err, sizeof err);
    assert_non_null(cpu);
    assert_int_equal(ex_cpu_run(cpu, NULL, bufs, NULL, err, sizeof err), -1);
    expect_err(err, "dims array");
    assert_int_equal(ex_cpu_run(cpu, dims, NULL, NULL, err, sizeof err), -1);
    expect_err(err, "tensors");
    assert_int_equal(ex_cpu_run(cpu, dims, no_x, NULL, err, sizeof err), -1);
    expect_err(err, "tensor X");
    assert_int_equal(ex_cpu_run(cpu, dims, bufs, NULL, err, sizeof err), 0);
    assert_true(y[31] == 62);
    ex_cpu_destroy(cpu);
    fe_unload(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ir),
        cmocka_unit_test(test_frontend),
        cmocka_unit_test(test_passes_codegen),
        cmocka_unit_test(test_exec),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cg_jit_shutdown();
    return rc;
}
