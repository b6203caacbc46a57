/* tests/unit/test_cuda_runtime.c: the CUDA driver runtime (runtime/cuda.c)
 * and the AOT error strings (runtime/dcrt.c).
 *
 * Needs: nothing. Without a driver or device (this project's build
 * machines) every entry point must return DCRT_ERR_NO_DRIVER or
 * DCRT_ERR_NO_DEVICE with a one-line message and no crash; the GPU tests
 * then report themselves skipped, and the calls generated objects make
 * leave that message for dcrt_last_error. With a GPU it loads a
 * hand-written PTX kernel, runs it, times it with events, and checks that
 * bad PTX is rejected with the JIT's log in the message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dietcode/runtime.h"

/* Under AddressSanitizer, an allocation that cannot be satisfied returns
 * NULL (as malloc does without it) instead of aborting: last_error checks
 * that libdcrt reports one. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* y[i] += 1 for i < n, one thread per element. */
static const char add_one_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry add_one(.param .u64 p, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %p<2>;\n  .reg .b32 %r<6>;\n  .reg .f32 %f<3>;\n  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %p1, %r5, %r1;\n  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n  mul.wide.u32 %rd3, %r5, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n  ld.global.f32 %f1, [%rd4];\n"
    "  add.f32 %f2, %f1, 0f3F800000;\n  st.global.f32 [%rd4], %f2;\n"
    "DONE:\n  ret;\n}\n"
    /* the same with the NVPTX kernel ABI of generated code: every dim as an
     * i64, then the buffers */
    ".visible .entry add_one_abi(.param .u64 n, .param .u64 p)\n"
    "{\n"
    "  .reg .pred %p<2>;\n  .reg .b32 %r<6>;\n  .reg .f32 %f<3>;\n  .reg .b64 %rd<7>;\n"
    "  ld.param.u64 %rd5, [n];\n  ld.param.u64 %rd1, [p];\n"
    "  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n  cvt.u64.u32 %rd6, %r5;\n"
    "  setp.ge.u64 %p1, %rd6, %rd5;\n  @%p1 bra DONE2;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n  mul.wide.u32 %rd3, %r5, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n  ld.global.f32 %f1, [%rd4];\n"
    "  add.f32 %f2, %f1, 0f3F800000;\n  st.global.f32 [%rd4], %f2;\n"
    "DONE2:\n  ret;\n}\n";

static void error_strings(void **state)
{
    (void)state;
    assert_string_equal(dcrt_error_string(DCRT_OK), "success");
    for (int c = 1; c <= DCRT_ERR_CPU; c++) {
        const char *s = dcrt_error_string(c);
        assert_non_null(s);
        assert_string_not_equal(s, "unknown error code");
        assert_null(strchr(s, '\n'));
    }
    assert_string_equal(dcrt_error_string(-1), "unknown error code");
    assert_string_equal(dcrt_error_string(DCRT_ERR_NO_DRIVER), "no CUDA driver found (libcuda.so.1)");
}

/* dcrt_fail records a message per thread; a success leaves it be. */
static void last_error(void **state)
{
    (void)state;
    assert_string_equal(dcrt_last_error(), "");
    assert_int_equal(dcrt_fail(DCRT_ERR_THREADS, NULL), DCRT_ERR_THREADS);
    assert_string_equal(dcrt_last_error(), dcrt_error_string(DCRT_ERR_THREADS));
    assert_int_equal(dcrt_fail(DCRT_ERR_DIM_RANGE, "p_run: dim T is out of its range 1..9"),
                     DCRT_ERR_DIM_RANGE);
    assert_string_equal(dcrt_last_error(), "p_run: dim T is out of its range 1..9");
    void *p = dcrt_thread_workspace(64);
    assert_non_null(p);
    assert_ptr_equal(dcrt_thread_workspace(32), p); /* kept, and big enough */
    assert_string_equal(dcrt_last_error(), "p_run: dim T is out of its range 1..9");
    assert_null(dcrt_thread_workspace(SIZE_MAX / 2));
    assert_non_null(strstr(dcrt_last_error(), "cannot allocate a workspace"));
}

/* A one-kernel program around add_one_abi (y[i] += 1), as a GPU object's table:
 * dim N, output y[N], grid (N + 127) / 128 of 128 threads. */
static int64_t add_one_size(const void *ctx, int32_t which, const int64_t *dims, int32_t *ovf)
{
    (void)ctx;
    (void)ovf;
    return which == 0 ? dims[0] : (dims[0] + 127) / 128;
}

static void *add_one_cache;
static const DcrtDim add_one_dims[] = {{"N", 1, 1024, 4096}};
static const DcrtBuffer add_one_bufs[] = {{"y", DCRT_BUF_OUTPUT, 1, 0, -1, -1, -1, -1, DCRT_F32, NULL}};
static const int32_t add_one_params[] = {0};
static const int32_t add_one_kargs[] = {0}; /* each kernel takes y */
static const DcrtKernel add_one_kernels[] = {{"add_one_abi", 1, 128, 0, 0, 1}};
static const DcrtVariant add_one_variants[] = {{0, 1}};
static const DcrtStage add_one_stages[] = {{"y", 0, 1, 0, 0}};
static const DcrtProgram add_one_prog = {
    .abi = DCRT_ABI_VERSION, .name = "add_one", .ndims = 1, .nbuffers = 1, .nparams = 1,
    .nkernels = 1, .nvariants = 1, .nstages = 1, .dims = add_one_dims, .buffers = add_one_bufs,
    .params = add_one_params, .kernels = add_one_kernels, .variants = add_one_variants,
    .stages = add_one_stages, .size = add_one_size, .ptx = add_one_ptx,
    .module_cache = &add_one_cache, .kernel_args = add_one_kargs,
};

/* y += 2 in two launches of add_one_abi: a call dcrt_cuda_run may replay
 * as a graph */
static void *add_two_cache;
static const DcrtKernel add_two_kernels[] = {{"add_one_abi", 1, 128, 0, 0, 1},
                                             {"add_one_abi", 1, 128, 0, 0, 1}};
static const DcrtVariant add_two_variants[] = {{0, 2}};
static const DcrtProgram add_two_prog = {
    .abi = DCRT_ABI_VERSION, .name = "add_two", .ndims = 1, .nbuffers = 1, .nparams = 1,
    .nkernels = 2, .nvariants = 1, .nstages = 1, .dims = add_one_dims, .buffers = add_one_bufs,
    .params = add_one_params, .kernels = add_two_kernels, .variants = add_two_variants,
    .stages = add_one_stages, .size = add_one_size, .ptx = add_one_ptx,
    .module_cache = &add_two_cache, .kernel_args = add_one_kargs,
};

/* Whether a GPU is usable; without one, checks the "no GPU" contract. */
static bool have_gpu(void)
{
    char err[512] = "";
    int rc = rt_cuda_init(err, sizeof err);
    if (rc == DCRT_OK)
        return true;
    assert_true(rt_cuda_is_no_gpu(rc));
    assert_true(strncmp(err, "no CUDA", 7) == 0);
    assert_null(strchr(err, '\n'));
    /* every entry point gives the same answer, again and again */
    char err2[512] = "";
    RtCuModule *m = (RtCuModule *)1;
    assert_int_equal(rt_cuda_load_module(add_one_ptx, &m, err2, sizeof err2), rc);
    assert_null(m);
    assert_string_equal(err2, err);
    uint64_t p = 1;
    assert_int_equal(rt_cuda_alloc(&p, 16, NULL, 0), rc);
    RtCuTimer *t = NULL;
    assert_int_equal(rt_cuda_timer_new(&t, NULL, 0), rc);
    RtCudaDeviceInfo info;
    assert_int_equal(rt_cuda_device_info(&info, NULL, 0), rc);
    /* what generated objects call: the same code, the message in dcrt_last_error */
    int64_t dims[1] = {1000};
    uint64_t y = 4096;
    dcrt_fail(DCRT_OK, "");
    assert_int_equal(dcrt_cuda_run(&add_one_prog, dims, &y, 0, NULL), rc);
    assert_null(add_one_cache);
    assert_string_equal(dcrt_last_error(), err);
    /* the checks come first */
    dims[0] = 5000;
    assert_int_equal(dcrt_cuda_run(&add_one_prog, dims, &y, 0, NULL), DCRT_ERR_DIM_RANGE);
    assert_string_equal(dcrt_last_error(), "add_one: N = 5000 is too large (at most 4096)");
    dims[0] = 10;
    y = 0;
    assert_int_equal(dcrt_cuda_run(&add_one_prog, dims, &y, 0, NULL), DCRT_ERR_NULL_POINTER);
    assert_false(rt_cuda_graphs_available());
    return false;
}

static void no_gpu_is_clean(void **state)
{
    (void)state;
    if (have_gpu())
        skip(); /* a GPU is present: the no-driver path cannot be reached */
}

static void run_ptx(void **state)
{
    (void)state;
    if (!have_gpu()) {
        printf("skipped: no CUDA driver or device\n");
        skip();
    }
    char err[8192];
    RtCudaDeviceInfo info;
    assert_int_equal(rt_cuda_device_info(&info, err, sizeof err), DCRT_OK);
    assert_true(info.sm_major >= 7 && info.nsm > 0);
    RtCuModule *m = NULL;
    RtCuFunction *fn = NULL;
    assert_int_equal(rt_cuda_load_module(add_one_ptx, &m, err, sizeof err), DCRT_OK);
    assert_int_equal(rt_cuda_get_function(m, "add_one", &fn, err, sizeof err), DCRT_OK);
    enum { N = 1000 };
    float h[N];
    for (int i = 0; i < N; i++)
        h[i] = (float)i;
    uint64_t d = 0;
    assert_int_equal(rt_cuda_alloc(&d, sizeof h, err, sizeof err), DCRT_OK);
    assert_int_equal(rt_cuda_copy_to_device(d, h, sizeof h, err, sizeof err), DCRT_OK);
    unsigned n = N, grid[3] = {(N + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
    void *args[2] = {&d, &n};
    RtCuTimer *t = NULL;
    float ms = -1;
    assert_int_equal(rt_cuda_timer_new(&t, err, sizeof err), DCRT_OK);
    assert_int_equal(rt_cuda_timer_start(t, NULL, err, sizeof err), DCRT_OK);
    assert_int_equal(rt_cuda_launch(fn, grid, block, 0, NULL, args, err, sizeof err), DCRT_OK);
    assert_int_equal(rt_cuda_timer_stop(t, NULL, &ms, err, sizeof err), DCRT_OK);
    assert_true(ms >= 0);
    assert_int_equal(rt_cuda_sync(err, sizeof err), DCRT_OK);
    assert_int_equal(rt_cuda_copy_to_host(h, d, sizeof h, err, sizeof err), DCRT_OK);
    for (int i = 0; i < N; i++)
        assert_true(h[i] == (float)i + 1);
    rt_cuda_timer_destroy(t);
    rt_cuda_unload_module(m);

    /* the same kernel as a generated object runs it: dcrt_cuda_run */
    int64_t dims[1] = {N};
    assert_int_equal(dcrt_cuda_run(&add_one_prog, dims, &d, 0, NULL), DCRT_OK);
    assert_int_equal(rt_cuda_copy_to_host(h, d, sizeof h, err, sizeof err), DCRT_OK);
    for (int i = 0; i < N; i++)
        assert_true(h[i] == (float)i + 2);

    /* two launches a call: the second call with the same dims and buffer
     * captures a graph, later ones replay it; other dims are another key */
    long made0, launched0, made, launched;
    rt_cuda_graph_counts(&made0, &launched0);
    for (int r = 0; r < 5; r++)
        assert_int_equal(dcrt_cuda_run(&add_two_prog, dims, &d, 0, NULL), DCRT_OK);
    int64_t half[1] = {N / 2};
    for (int r = 0; r < 3; r++)
        assert_int_equal(dcrt_cuda_run(&add_two_prog, half, &d, 0, NULL), DCRT_OK);
    assert_int_equal(dcrt_cuda_run(&add_two_prog, dims, &d, 0, NULL), DCRT_OK);
    assert_int_equal(rt_cuda_copy_to_host(h, d, sizeof h, err, sizeof err), DCRT_OK);
    for (int i = 0; i < N; i++)
        assert_true(h[i] == (float)i + 2 + 12 + (i < N / 2 ? 6 : 0));
    /* one graph per key, captured on its second call and launched from
     * then on: N's calls 2..6, N / 2's 2..3 */
    rt_cuda_graph_counts(&made, &launched);
    if (rt_cuda_graphs_available()) {
        assert_int_equal(made - made0, 2);
        assert_int_equal(launched - launched0, 7);
    } else {
        assert_int_equal(made - made0, 0);
        printf("graphs: not available\n");
    }
    rt_cuda_free(d);

    /* bad PTX: rejected, with the JIT's log in the message */
    RtCuModule *bad = (RtCuModule *)1;
    int rc = rt_cuda_load_module(".version 7.0\n.target sm_75\n.address_size 64\n"
                                 ".visible .entry k() { bogus.instr; ret; }\n",
                                 &bad, err, sizeof err);
    assert_int_equal(rc, DCRT_ERR_MODULE);
    assert_null(bad);
    assert_non_null(strstr(err, "JIT log"));
    printf("bad PTX: %s\n", err);
}

/* The graph cache's policy (runtime/graphs.c), with stand-in graphs. */
static int destroyed;
static void count_destroy(void *g)
{
    (void)g;
    destroyed++;
}

static void graph_cache(void **state)
{
    (void)state;
    RtGraphCache *c = rt_graph_cache_new(2, count_destroy);
    assert_non_null(c);
    int g1, g2, g3;
    uint64_t a[3] = {1, 100, 200}, b[3] = {2, 100, 200}, b2[2] = {2, 100}, k3[3] = {3, 0, 0};
    bool seen = true;
    /* first call: recorded, nothing to replay */
    assert_null(rt_graph_cache_lookup(c, a, 3, &seen));
    assert_false(seen);
    /* second: seen, still no graph until one is stored */
    assert_null(rt_graph_cache_lookup(c, a, 3, &seen));
    assert_true(seen);
    rt_graph_cache_store(c, a, 3, &g1);
    assert_ptr_equal(rt_graph_cache_lookup(c, a, 3, &seen), &g1);
    assert_true(seen);
    /* another key, and a prefix of it, are different calls; with two
     * slots the prefix evicts the least recently used key, a, and a's
     * graph is destroyed */
    assert_null(rt_graph_cache_lookup(c, b, 3, &seen));
    assert_false(seen);
    assert_int_equal(destroyed, 0);
    assert_null(rt_graph_cache_lookup(c, b2, 2, &seen));
    assert_false(seen);
    assert_int_equal(destroyed, 1);
    /* a again: a first call once more (it evicts b, which had no graph) */
    assert_null(rt_graph_cache_lookup(c, a, 3, &seen));
    assert_false(seen);
    assert_null(rt_graph_cache_lookup(c, a, 3, &seen));
    assert_true(seen);
    rt_graph_cache_store(c, a, 3, &g2);
    assert_null(rt_graph_cache_lookup(c, k3, 3, &seen)); /* evicts b2 */
    assert_int_equal(destroyed, 1);
    assert_ptr_equal(rt_graph_cache_lookup(c, a, 3, &seen), &g2);
    assert_true(seen);
    /* storing over a graph destroys the old one */
    assert_null(rt_graph_cache_lookup(c, k3, 3, &seen));
    assert_true(seen);
    rt_graph_cache_store(c, k3, 3, &g3);
    rt_graph_cache_store(c, k3, 3, &g1);
    assert_int_equal(destroyed, 2);
    assert_ptr_equal(rt_graph_cache_lookup(c, k3, 3, &seen), &g1);
    /* freeing destroys the graphs left: a's and k3's */
    rt_graph_cache_free(c);
    assert_int_equal(destroyed, 4);
    rt_graph_cache_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_strings),
        cmocka_unit_test(last_error),
        cmocka_unit_test(no_gpu_is_clean),
        cmocka_unit_test(run_ptx),
        cmocka_unit_test(graph_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
