/* Unit tests for search/cost.c: the analytic GPU cost of lowered kernels.
 *
 * The walk's counts on the dense layer's kernels are checked against
 * arithmetic done by hand (FMAs per block, global bytes, wavefronts of the
 * staged reads, barriers, shuffles); the time model must rank the kernel
 * forms as a GPU does in the cases that do not depend on calibration: a
 * warp per output beats 64 x 64 tiles at T = 1, where 36 blocks leave most
 * SMs idle, and loses to them at T = 128; a split reduction adds a launch;
 * a block too large for an SM's shared memory is never picked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dietcode/frontend.h"
#include "dietcode/passes.h"
#include "dietcode/search.h"

#include <math.h>
#include <stdlib.h>

static const char *dense = "dim T in 1..128\n"
                           "input X[T, 768] f32\n"
                           "input W[2304, 768] f32\n"
                           "output Y[i: T, j: 2304] = sum[k: 768](X[i, k] * W[j, k])\n";

typedef struct Built {
    FeUnit u;
    LoopProgram *lp;
} Built;

static Built lower(const char *mk)
{
    Built b;
    assert_int_equal(fe_load_text("dense.tex", "dense", dense, &b.u), 0);
    MicroKernel *mks = calloc((size_t)b.u.prog->ntensors, sizeof *mks);
    int ns;
    for (int i = 0; i < b.u.prog->ntensors; i++)
        assert_true(pass_parse_microkernel(mk, &mks[i], &ns));
    TargetInfo ti = pass_target_info(PT_GPU);
    char err[256];
    b.lp = pass_run_pipeline(b.u.prog, mks, &ti, NULL, err, sizeof err);
    free(mks);
    assert_non_null(b.lp);
    return b;
}

static double model_ms(const char *mk, int64_t T)
{
    Built b = lower(mk);
    char err[256];
    double ms = srch_model_ms(b.lp, "sm_90", &T, 0, err, sizeof err);
    fe_unload(&b.u);
    assert_true(ms > 0);
    return ms;
}

static const char *tiles64 = "threads [16, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged";
static const char *gemv = "threads [1, 8] tile [1, 1] rchunk 128 unroll 1 vec 4 along reduction rthreads 32";

static void test_counts(void **state)
{
    (void)state;
    Built b = lower(tiles64);
    SrchKernelCost k;
    int64_t T = 128;
    srch_kernel_cost(b.lp, b.lp->kernels[0], &T, &k);
    assert_int_equal(k.threads, 256);
    /* a 64 x 64 block over K = 768: one FMA per output and k */
    assert_true(fabs(k.fma - 64.0 * 64 * 768) < 1e-6);
    /* two 64 x 16 tiles a chunk, 48 chunks, 4 bytes: loads; the outputs: stores */
    assert_true(fabs(k.load_bytes - 2.0 * 64 * 16 * 48 * 4) < 1e-6);
    assert_true(fabs(k.store_bytes - 64.0 * 64 * 4) < 1e-6);
    /* two barriers a chunk */
    assert_true(fabs(k.barriers - 96) < 1e-6);
    /* per warp and k: X_s's 4 broadcast reads (1 wavefront each) and
     * W_s's 128-bit read (4); 8 warps, 768 k; and the staging stores */
    assert_true(k.wavefronts >= 8.0 * 8 * 768 && k.wavefronts < 8.0 * 8 * 768 * 1.2);
    assert_true(k.shared_bytes == (16 * 66 + 16 * 68) * 4);
    fe_unload(&b.u);

    b = lower(gemv);
    srch_kernel_cost(b.lp, b.lp->kernels[0], &T, &k);
    assert_int_equal(k.threads, 256);
    /* 8 outputs a block, 768 k each; then every thread adds its 4 lanes
     * (3) and 5 shuffled partners: 256 x 8 more */
    assert_true(fabs(k.fma - (8.0 * 768 + 256 * 8)) < 1e-6);
    /* 5 shuffles for each of the 8 outputs, by all 32 threads */
    assert_true(fabs(k.shuffles - 5.0 * 256) < 1e-6);
    assert_true(k.wavefronts == 0 && k.barriers == 0);
    fe_unload(&b.u);
}

static void test_ranking(void **state)
{
    (void)state;
    /* T = 1: 36 blocks of 64 x 64 leave most of 132 SMs idle */
    assert_true(model_ms(gemv, 1) < model_ms(tiles64, 1));
    /* T = 128: the warp per output reads W once per row */
    assert_true(model_ms(gemv, 128) > model_ms(tiles64, 128));
    /* a split adds the second launch's floor at least */
    double one = model_ms("threads [8, 32] tile [4, 4] rchunk 16 unroll 1 vec 4 staged", 1);
    double split = model_ms("threads [8, 32] tile [4, 4] rchunk 16 unroll 1 vec 4 staged split 4", 1);
    assert_true(split > 0 && one > 0 && split != one);
    /* more shared memory than an SM has: never */
    SrchKernelCost k = {.threads = 256, .fma = 1, .instrs = 1, .shared_bytes = 300 * 1024};
    assert_true(srch_launch_ms(srch_gpu("sm_90"), &k, 1, 32, 0) >= 1e9);
    /* the table: unknown archs read as sm_80 */
    assert_string_equal(srch_gpu("sm_99")->arch, "sm_80");
    assert_int_equal(srch_gpu("sm_90")->nsm, 132);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_ranking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
