/* libdcrt's entry points on a program table written by hand (no compiler in
 * the loop: one dim N, Y = 2 X + 1 in blocks of 64 elements):
 *
 * - dcrt_set_num_threads while other threads are inside dcrt_run: three
 *   threads call it over and over for a second while a fourth changes the
 *   thread count between 0 and 5; every result is exact, and a watchdog
 *   (alarm) fails the test instead of letting a deadlock hang it;
 * - NULL arguments to dcrt_run, dcrt_cuda_run and dcrt_workspace_size (the
 *   program, the dims array, the tensors array, one tensor) are refused with
 *   DCRT_ERR_NULL_POINTER and a message naming the argument.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BLOCK = 64, NMAX = 4096, CALLERS = 3 };

static void scale(const int64_t *dims, float *const *bufs, int64_t begin, int64_t end)
{
    int64_t n = dims[0];
    for (int64_t b = begin; b < end; b++)
        for (int64_t i = b * BLOCK; i < (b + 1) * BLOCK && i < n; i++)
            bufs[1][i] = 2 * bufs[0][i] + 1;
}

/* Size expression 0: N (the tensors' extent); 1: the grid, ceil(N / 64). */
static int64_t size(const void *ctx, int32_t which, const int64_t *dims, int32_t *overflow)
{
    (void)ctx;
    (void)overflow;
    return which == 0 ? dims[0] : (dims[0] + BLOCK - 1) / BLOCK;
}

static const DcrtDim dims_tab[] = {{"N", 1, NMAX, NMAX}};
static const DcrtBuffer bufs_tab[] = {
    {"X", DCRT_BUF_INPUT, 1, 0, -1, -1, -1, -1, DCRT_F32, NULL},
    {"Y", DCRT_BUF_OUTPUT, 1, 0, -1, -1, -1, -1, DCRT_F32, NULL},
};
static const int32_t params_tab[] = {0, 1};
static const DcrtKernel kernels_tab[] = {{"scale", 1, 1, 0, 0, 0}}; /* a CPU kernel: no GPU arguments */
static const DcrtVariant variants_tab[] = {{0, 1}};
static const DcrtStage stages_tab[] = {{"Y", 0, 1, 0, 0}};
static const int32_t levels_tab[] = {1};
static const char *const isa_names_tab[] = {"x86-64"};
static const DcrtKernelFn fns_tab[] = {scale};

static const DcrtProgram prog = {
    .abi = DCRT_ABI_VERSION,
    .name = "scale",
    .ndims = 1,
    .nbuffers = 2,
    .nparams = 2,
    .nkernels = 1,
    .nvariants = 1,
    .nstages = 1,
    .nisas = 1,
    .dims = dims_tab,
    .buffers = bufs_tab,
    .params = params_tab,
    .kernels = kernels_tab,
    .variants = variants_tab,
    .stages = stages_tab,
    .size = size,
    .isa_levels = levels_tab,
    .isa_names = isa_names_tab,
    .fns = fns_tab,
};

static atomic_bool stop;
static atomic_long wrong, failed, calls, changes;

static void *caller(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    float *x = malloc(NMAX * sizeof *x), *y = malloc(NMAX * sizeof *y);
    for (int i = 0; i < NMAX; i++)
        x[i] = (float)(i % 1000);
    while (!atomic_load(&stop)) {
        int64_t n = 1 + (int64_t)(rand_r(&seed) % NMAX);
        for (int64_t i = 0; i < n; i++)
            y[i] = -1;
        void *t[2] = {x, y};
        if (dcrt_run(&prog, &n, t, NULL) != DCRT_OK) {
            atomic_fetch_add(&failed, 1);
            continue;
        }
        for (int64_t i = 0; i < n; i++)
            if (y[i] != 2 * x[i] + 1) {
                atomic_fetch_add(&wrong, 1);
                break;
            }
        atomic_fetch_add(&calls, 1);
    }
    free(x);
    free(y);
    return NULL;
}

static void *setter(void *arg)
{
    (void)arg;
    static const int counts[] = {2, 1, 4, 0, 3, 5, 1};
    for (int k = 0; !atomic_load(&stop); k++) {
        if (dcrt_set_num_threads(counts[k % 7]) != DCRT_OK)
            atomic_fetch_add(&failed, 1);
        atomic_fetch_add(&changes, 1);
    }
    return NULL;
}

/* Calls from several threads while another changes the thread count: the
 * change applies to later calls, calls in progress finish on the old pool. */
static void test_set_threads_during_calls(void **state)
{
    (void)state;
    alarm(60); /* a deadlock kills the test (SIGALRM) instead of hanging it */
    pthread_t th[CALLERS + 1];
    for (int i = 0; i < CALLERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, caller, (void *)(uintptr_t)(i + 1)), 0);
    assert_int_equal(pthread_create(&th[CALLERS], NULL, setter, NULL), 0);
    double until = rt_now_ms() + 1500;
    while (rt_now_ms() < until)
        usleep(10000);
    atomic_store(&stop, true);
    for (int i = 0; i <= CALLERS; i++)
        pthread_join(th[i], NULL);
    alarm(0);
    print_message("%ld calls, %ld thread-count changes\n", atomic_load(&calls),
                  atomic_load(&changes));
    assert_int_equal(atomic_load(&wrong), 0);
    assert_int_equal(atomic_load(&failed), 0);
    assert_true(atomic_load(&calls) > 0);
    assert_true(atomic_load(&changes) > 0);
    assert_int_equal(dcrt_set_num_threads(0), DCRT_OK);
}

static void expect_null(int rc, const char *what)
{
    assert_int_equal(rc, DCRT_ERR_NULL_POINTER);
    if (!strstr(dcrt_last_error(), what))
        fail_msg("\"%s\" does not name %s", dcrt_last_error(), what);
}

/* NULL arguments: the code, and a message that names the argument. */
static void test_null_arguments(void **state)
{
    (void)state;
    float x[8] = {0}, y[8];
    int64_t n = 8;
    void *t[2] = {x, y}, *t_no_y[2] = {x, NULL};
    expect_null(dcrt_run(NULL, &n, t, NULL), "program");
    expect_null(dcrt_run(&prog, NULL, t, NULL), "dims");
    expect_null(dcrt_run(&prog, &n, NULL, NULL), "tensors");
    expect_null(dcrt_run(&prog, &n, t_no_y, NULL), "tensor Y");
    assert_int_equal(dcrt_run(&prog, &n, t, NULL), DCRT_OK);
    assert_true(y[7] == 1);

    assert_int_equal(dcrt_workspace_size(NULL, &n), 0);
    assert_int_equal(dcrt_workspace_size(&prog, NULL), 0);
    assert_int_equal(dcrt_check_params(&prog, NULL), DCRT_ERR_NULL_POINTER);

    /* the GPU path checks its arguments before it looks for a driver */
    uint64_t d[2] = {1, 2};
    expect_null(dcrt_cuda_run(NULL, &n, d, 0, NULL), "program");
    expect_null(dcrt_cuda_run(&prog, NULL, d, 0, NULL), "dims");
    expect_null(dcrt_cuda_run(&prog, &n, NULL, 0, NULL), "tensors");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_threads_during_calls),
        cmocka_unit_test(test_null_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
