/* tests/unit/test_emu.c: the emu target (codegen/emu.c) on loop IR written
 * by hand in the GPU form: a block loop, a thread loop, a shared buffer
 * and a barrier between writing it and reading a neighbour's slot.
 *
 * The kernel must give the right answer over ragged sizes, serially and
 * over a pool; without its barrier it must read unwritten (NaN) shared
 * memory; a barrier only some threads reach must be reported as barrier
 * divergence; shared buffers are laid out at 64-byte offsets. A lowered
 * kernel whose barrier the host backend duplicates into both arms of a
 * thread-dependent branch still runs (barriers are identified by id).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/passes.h"

enum { NT = 32, MAXN = 200 };

#define C(v) ir_int(c, (v))
#define V(x) ir_varref(c, (x))

typedef enum Shape { GOOD, NO_BARRIER, DIVERGENT } Shape;

/* Y[i] = X[i] + X[block * NT + (thread + 1) % NT] (0 past the end), the
 * neighbour read from shared memory. */
static LoopProgram *neighbour_program(TeProgram **tep, Shape var, Tensor **extra)
{
    TeProgram *te = ir_te_new("neighbour");
    ExprCtx *c = te->ctx;
    Arena *a = te->arena;
    Var *N = ir_te_add_dim(te, "N", 1, MAXN);
    Expr *shape = V(N);
    Tensor *X = ir_te_add_input(te, "X", DT_F32, 1, &shape);
    Var *ax = ir_var(c, "i", VK_AXIS, V(N));
    Expr *axv = V(ax);
    Tensor *Y = ir_te_add_compute(te, "Y", TK_OUTPUT, 1, &ax, ir_load(c, X, 1, &axv, false));
    int64_t nt = NT, five = 5;
    Tensor *S = ir_buffer(a, "S", MS_SHARED, c, 1, &nt);
    Tensor *S2 = ir_buffer(a, "S2", MS_SHARED, c, 1, &five);
    Expr *nb = ir_binop(c, EX_DIV, ir_binop(c, EX_ADD, V(N), C(NT - 1)), C(NT));
    Var *b = ir_var(c, "b", VK_LOOP, nb), *th = ir_var(c, "th", VK_LOOP, C(NT));
    Var *i = ir_var(c, "i", VK_LOOP, ir_binop(c, EX_MUL, nb, C(NT)));
    Expr *thv = V(th), *iv = V(i), *zero = C(0);
    Expr *next = ir_binop(c, EX_MOD, ir_binop(c, EX_ADD, thv, C(1)), C(NT));
    Stmt *bar = ir_barrier(a);
    if (var == DIVERGENT)
        bar = ir_if(a, ir_binop(c, EX_LT, thv, C(5)), bar, NULL);
    Expr *sum = ir_binop(c, EX_ADD, ir_load(c, S, 1, &thv, false), ir_load(c, S, 1, &next, false));
    Stmt *steps[4] = {
        ir_store(a, S, 1, &thv, ir_load(c, X, 1, &iv, true)),
        ir_store(a, S2, 1, &zero, ir_float(c, 1.0)),
        bar,
        ir_if(a, ir_binop(c, EX_LT, iv, V(N)), ir_store(a, Y, 1, &iv, sum), NULL),
    };
    Stmt *body = ir_let(a, i, ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, V(b), C(NT)), thv),
                        ir_seq(a, var == NO_BARRIER ? 2 : 4,
                               var == NO_BARRIER ? (Stmt *[]){steps[0], steps[3]} : steps));
    Stmt *kbody = ir_alloc(a, S, ir_alloc(a, S2, ir_for(a, th, FK_THREAD, body)));
    LoopProgram *lp = ir_loop_program_new(te);
    lp->materialized[X->id] = lp->materialized[Y->id] = true;
    Kernel *k = ir_kernel_new(a, "neighbour", Y, ir_for(a, b, FK_BLOCK, kbody));
    k->nthreads = NT;
    ir_loop_program_add_stage(lp, Y, NULL);
    ir_loop_program_add_variant(lp, &k->mk, 1, &k, 0, NULL);
    *tep = te;
    if (extra)
        *extra = S2;
    return lp;
}

static void fill(float *x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = (float)(j % 17) * 0.25f - 1.0f;
}

static void test_neighbour(void **state)
{
    (void)state;
    TeProgram *te;
    LoopProgram *lp = neighbour_program(&te, GOOD, NULL);
    char err[512] = "";
    ExEmu *p = ex_emu_compile(lp, err, sizeof err);
    assert_non_null(p);
    RtPool *pool = rt_pool_new(2);
    assert_non_null(pool);
    static const int64_t sizes[] = {1, 2, 31, 32, 33, 100, MAXN};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s], dims[1] = {n};
        float x[MAXN], y[MAXN];
        fill(x, n);
        for (int run = 0; run < 2; run++) {
            for (int j = 0; j < MAXN; j++)
                y[j] = NAN;
            float *bufs[2] = {x, y};
            assert_int_equal(ex_emu_run(p, run ? pool : NULL, dims, bufs, err, sizeof err),
                             0);
            for (int64_t j = 0; j < n; j++) {
                int64_t nb = j / NT * NT + (j % NT + 1) % NT;
                float want = x[j] + (nb < n ? x[nb] : 0.0f);
                assert_float_equal(y[j], want, 1e-6);
            }
        }
    }
    int64_t bad[1] = {0};
    float *bufs[2] = {NULL, NULL};
    assert_int_equal(ex_emu_run(p, NULL, bad, bufs, err, sizeof err), -1);
    rt_pool_destroy(pool);
    ex_emu_destroy(p);
    ir_te_destroy(te);
}

static void test_shared_layout(void **state)
{
    (void)state;
    TeProgram *te;
    LoopProgram *lp = neighbour_program(&te, GOOD, NULL);
    /* S: 32 floats at 0; S2: 5 floats at 128 */
    assert_int_equal(cg_shared_bytes(lp->kernels[0]), 128 + 20);
    ir_te_destroy(te);
}

/* Without the barrier, thread 0 reads slot 1 before thread 1 writes it. */
static void test_missing_barrier(void **state)
{
    (void)state;
    TeProgram *te;
    LoopProgram *lp = neighbour_program(&te, NO_BARRIER, NULL);
    char err[512] = "";
    ExEmu *p = ex_emu_compile(lp, err, sizeof err);
    assert_non_null(p);
    int64_t dims[1] = {64};
    float x[64], y[64];
    fill(x, 64);
    float *bufs[2] = {x, y};
    assert_int_equal(ex_emu_run(p, NULL, dims, bufs, err, sizeof err), 0);
    assert_true(isnan(y[0]));
    ex_emu_destroy(p);
    ir_te_destroy(te);
}

static void test_divergent_barrier(void **state)
{
    (void)state;
    TeProgram *te;
    LoopProgram *lp = neighbour_program(&te, DIVERGENT, NULL);
    char err[512] = "";
    ExEmu *p = ex_emu_compile(lp, err, sizeof err);
    assert_non_null(p);
    int64_t dims[1] = {40};
    float x[40], y[40];
    fill(x, 40);
    float *bufs[2] = {x, y};
    assert_int_equal(ex_emu_run(p, NULL, dims, bufs, err, sizeof err), -1);
    assert_non_null(strstr(err, "barrier divergence"));
    assert_non_null(strstr(err, "neighbour"));
    ex_emu_destroy(p);
    ir_te_destroy(te);
}

/* A max-reduction staged two elements a chunk: x86's tail duplication
 * copies the barrier after the thread-dependent padded copy into both of
 * its arms; the emulator must still see one barrier. */
static void test_duplicated_barrier(void **state)
{
    (void)state;
    const char *text = "dim T in 1..16\n"
                       "input S[4, T, T] f32\n"
                       "output M[h: 4, i: T] = max[j: T](S[h, i, j])\n";
    FeUnit u;
    assert_int_equal(fe_load_text("dup.tex", "dup", text, &u), 0);
    TeProgram *te = u.prog;
    MicroKernel mk[2];
    int ns;
    memset(mk, 0, sizeof mk);
    assert_true(pass_parse_microkernel("threads [4, 16] tile [1, 1] rchunk 2 unroll 1 vec 1 staged",
                                       &mk[1], &ns));
    TargetInfo ti = pass_target_info(PT_GPU);
    char err[512] = "";
    LoopProgram *lp = pass_run_pipeline(te, mk, &ti, NULL, err, sizeof err);
    assert_non_null(lp);
    ExEmu *p = ex_emu_compile(lp, err, sizeof err);
    assert_non_null(p);
    for (int64_t T = 1; T <= 19; T += 3) {
        int64_t dims[1] = {T};
        float *s = malloc(sizeof(float) * (size_t)(4 * T * T)), *m = malloc(sizeof(float) * (size_t)(4 * T));
        fill(s, 4 * T * T);
        float *bufs[2] = {s, m};
        if (ex_emu_run(p, NULL, dims, bufs, err, sizeof err) != 0)
            fail_msg("T=%lld: %s", (long long)T, err);
        for (int64_t h = 0; h < 4; h++)
            for (int64_t i = 0; i < T; i++) {
                float want = -INFINITY;
                for (int64_t j = 0; j < T; j++)
                    want = fmaxf(want, s[(h * T + i) * T + j]);
                assert_true(m[h * T + i] == want);
            }
        free(s);
        free(m);
    }
    ex_emu_destroy(p);
    fe_unload(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_neighbour),
        cmocka_unit_test(test_shared_layout),
        cmocka_unit_test(test_missing_barrier),
        cmocka_unit_test(test_divergent_barrier),
        cmocka_unit_test(test_duplicated_barrier),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cg_jit_shutdown();
    rt_simt_release();
    return rc;
}
