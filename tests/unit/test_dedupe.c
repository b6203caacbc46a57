/* codegen/dedupe.c: two layers alike (the same dense layer on other
 * buffers) have one kernel body; a kernel that computes something else,
 * or the same with another constant, does not share it; the JIT, whose
 * second layer's entry calls the first layer's body, computes what the
 * reference interpreter does, in the declared range and above it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/codegen_llvm.h"
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *src = "dim T in 1..64\n"
                         "input X[T, 64] f32\n"
                         "input V[T, 64] f32\n"
                         "input W1[32, 64] f32\n"
                         "input W2[32, 64] f32\n"
                         "Y1[i: T, n: 32] = sum[k: 64](X[i, k] * W1[n, k])\n"
                         "Y2[i: T, n: 32] = sum[k: 64](V[i, k] * W2[n, k])\n"
                         "Y3[i: T, n: 32] = sum[k: 64](V[i, k] * W2[n, k]) * 2.0\n"
                         "output Z[i: T, n: 32] = Y1[i, n] * Y2[i, n] + Y3[i, n]\n";

/* The kernel computing tensor name. */
static const Kernel *kernel_of(const LoopProgram *lp, const char *name)
{
    for (int i = 0; i < lp->nkernels; i++)
        if (strcmp(lp->kernels[i]->out->name, name) == 0)
            return lp->kernels[i];
    fail_msg("no kernel computes %s", name);
    return NULL;
}

static void test_twins(void **state)
{
    (void)state;
    char err[512] = "";
    FeUnit u;
    if (fe_load_text("twins.tex", "twins", src, &u) != 0)
        fail_msg("twins.tex does not compile");
    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lp = pass_run_pipeline(u.prog, NULL, &ti, NULL, err, sizeof err);
    if (!lp)
        fail_msg("%s", err);

    /* each kernel built in a module of its own, as codegen/host.c does */
    LLVMContextRef cx = LLVMContextCreate();
    const char *names[] = {"Y1", "Y2", "Y3", "Z"};
    LLVMModuleRef mods[4];
    LLVMValueRef body[4], twin[4];
    CgBodies *b = cg_bodies_new();
    for (int i = 0; i < 4; i++) {
        mods[i] = LLVMModuleCreateWithNameInContext(names[i], cx);
        char sym[32], bname[40];
        snprintf(sym, sizeof sym, "k_%s", names[i]);
        snprintf(bname, sizeof bname, "%s.body", sym);
        cg_emit_kernel(mods[i], cg_target_cpu(), lp, kernel_of(lp, names[i]), sym);
        body[i] = LLVMGetNamedFunction(mods[i], bname);
        assert_non_null(body[i]);
        char *key = NULL;
        twin[i] = cg_bodies_find(b, body[i], &key);
        if (!twin[i]) {
            assert_non_null(key); /* nothing quoted: comparable */
            cg_bodies_keep(b, key, body[i]);
        }
    }
    assert_null(twin[0]);
    assert_ptr_equal(twin[1], body[0]); /* Y2 is Y1 on other buffers */
    assert_null(twin[2]);               /* * 2.0 */
    assert_null(twin[3]);
    cg_bodies_free(b);
    for (int i = 0; i < 4; i++)
        LLVMDisposeModule(mods[i]);
    LLVMContextDispose(cx);

    /* the JIT: Y2's entry calls Y1's body */
    ExCpu *cpu = ex_cpu_compile(lp, err, sizeof err);
    if (!cpu)
        fail_msg("%s", err);
    static const int64_t sizes[] = {1, 37, 64, 100};
    for (int s = 0; s < 4; s++) {
        int64_t T = sizes[s];
        size_t nx = (size_t)(T * 64), nz = (size_t)(T * 32);
        float *x = malloc(sizeof(float) * nx), *v = malloc(sizeof(float) * nx);
        float *w1 = malloc(sizeof(float) * 32 * 64), *w2 = malloc(sizeof(float) * 32 * 64);
        float *ref[3], *got[3];
        for (int t = 0; t < 3; t++) {
            ref[t] = calloc(nz, sizeof(float));
            got[t] = calloc(nz, sizeof(float));
        }
        float *zr = calloc(nz, sizeof(float)), *zg = calloc(nz, sizeof(float));
        rt_rng_fill(7, (uint64_t)s, x, nx);
        rt_rng_fill(8, (uint64_t)s, v, nx);
        rt_rng_fill(9, 1, w1, 32 * 64);
        rt_rng_fill(9, 2, w2, 32 * 64);
        float *rb[8] = {x, v, w1, w2, ref[0], ref[1], ref[2], zr};
        float *gb[8] = {x, v, w1, w2, got[0], got[1], got[2], zg};
        assert_int_equal(ir_interp(u.prog, &T, rb, err, sizeof err), 0);
        assert_int_equal(ex_cpu_run(cpu, &T, gb, NULL, err, sizeof err), 0);
        for (size_t e = 0; e < nz; e++)
            assert_true(fabsf(zg[e] - zr[e]) <= 1e-4f * (1 + fabsf(zr[e])));
        for (int t = 0; t < 3; t++) {
            free(ref[t]);
            free(got[t]);
        }
        free(x);
        free(v);
        free(w1);
        free(w2);
        free(zr);
        free(zg);
    }
    ex_cpu_destroy(cpu);
    fe_unload(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_twins)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
