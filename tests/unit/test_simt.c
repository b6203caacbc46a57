/* tests/unit/test_simt.c: the SIMT emulator (runtime/simt.c).
 *
 * Barriers must order shared-memory writes before reads of neighbours'
 * values, over many phases and up to 1024 threads; divergent barriers (a
 * thread that returns early, threads at different barriers) must be
 * reported, not hang, and the next block must still run; shared memory
 * starts as NaN in every block; a thread may use most of its stack; blocks
 * run in parallel on several OS threads. A butterfly of warp shuffles
 * sums each warp's values in every lane; a partner outside the warp is
 * reported. An async copy lands only at its thread's wait, zero-filled
 * past its source size; one never waited for, of a bad size, outside
 * shared memory or misaligned is an error of the block.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dietcode/runtime.h"

typedef struct Ring {
    int n, phases;
    int64_t *out; /* per thread: the sum it saw */
    int bad;      /* a thread saw a value not yet written */
} Ring;

/* Each phase, every thread writes its slot, waits, reads its right
 * neighbour's, waits again (so the slot is not overwritten early). */
static void ring(void *args, int64_t block, int64_t thread, void *shared)
{
    Ring *r = args;
    int64_t *s = shared;
    int64_t sum = 0;
    for (int p = 0; p < r->phases; p++) {
        s[thread] = thread * 1000 + p + block;
        rt_simt_barrier();
        int64_t v = s[(thread + 1) % r->n];
        if (v != ((thread + 1) % r->n) * 1000 + p + block)
            __atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
        sum += v;
        rt_simt_barrier();
    }
    r->out[thread] = sum;
}

static void run_ring(int n, int phases)
{
    int64_t out[RT_SIMT_MAX_THREADS];
    Ring r = {n, phases, out, 0};
    RtSimtKernel k = {ring, 64 << 10};
    char err[256] = "";
    for (int64_t b = 0; b < 3; b++) {
        memset(out, 0, sizeof out);
        assert_int_equal(rt_simt_run_block(&k, b, n, (size_t)n * 8, &r, err, sizeof err), 0);
        assert_int_equal(r.bad, 0);
        for (int t = 0; t < n; t++) {
            int64_t nb = (t + 1) % n, want = 0;
            for (int p = 0; p < phases; p++)
                want += nb * 1000 + p + b;
            assert_int_equal(out[t], want);
        }
    }
}

static void test_barrier_order(void **state)
{
    (void)state;
    run_ring(1, 3);
    run_ring(2, 5);
    run_ring(37, 9);
    run_ring(256, 4);
}

static void test_many_threads(void **state)
{
    (void)state;
    run_ring(RT_SIMT_MAX_THREADS, 3);
}

static void early_return(void *args, int64_t block, int64_t thread, void *shared)
{
    (void)args; (void)block; (void)shared;
    if (thread == 3)
        return;
    rt_simt_barrier();
}

static volatile int sink;
__attribute__((noinline)) static void barrier_here(void)
{
    sink = 1;
    rt_simt_barrier();
}
__attribute__((noinline)) static void barrier_there(void)
{
    sink = 2;
    rt_simt_barrier();
    sink = 3;
}

static void two_sites(void *args, int64_t block, int64_t thread, void *shared)
{
    (void)args; (void)block; (void)shared;
    if (thread % 2)
        barrier_here();
    else
        barrier_there();
}

/* Thread 0 goes round one more time than the others. */
static void extra_round(void *args, int64_t block, int64_t thread, void *shared)
{
    (void)args; (void)block; (void)shared;
    for (int i = 0; i < 3 + (thread == 0); i++)
        rt_simt_barrier();
}

static void test_divergence(void **state)
{
    (void)state;
    char err[256] = "";
    RtSimtKernel k = {early_return, 0};
    assert_int_equal(rt_simt_run_block(&k, 0, 8, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "barrier divergence"));
    k.fn = two_sites;
    err[0] = 0;
    assert_int_equal(rt_simt_run_block(&k, 1, 4, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "barrier divergence"));
    k.fn = extra_round;
    err[0] = 0;
    assert_int_equal(rt_simt_run_block(&k, 2, 16, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "barrier divergence"));
    /* the emulator is still usable afterwards */
    run_ring(16, 2);
    /* one thread alone never diverges */
    k.fn = early_return;
    assert_int_equal(rt_simt_run_block(&k, 0, 1, 0, NULL, err, sizeof err), 0);
}

static void test_bad_args(void **state)
{
    (void)state;
    char err[256] = "";
    RtSimtKernel k = {early_return, 0};
    assert_int_equal(rt_simt_run_block(&k, 0, 0, 0, NULL, err, sizeof err), -1);
    assert_int_equal(rt_simt_run_block(&k, 0, RT_SIMT_MAX_THREADS + 1, 0, NULL, err, sizeof err),
                     -1);
}

typedef struct NanCheck {
    size_t nfloats;
    int non_nan;
} NanCheck;

/* Every thread checks the shared buffer is NaN, then dirties it. */
static void nan_fill(void *args, int64_t block, int64_t thread, void *shared)
{
    NanCheck *c = args;
    float *s = shared;
    (void)block;
    if (((uintptr_t)shared & 63) != 0)
        c->non_nan++;
    for (size_t i = (size_t)thread; i < c->nfloats; i += 4)
        if (!isnan(s[i]))
            c->non_nan++;
    rt_simt_barrier();
    for (size_t i = (size_t)thread; i < c->nfloats; i += 4)
        s[i] = 1.0f;
}

static void test_shared_nan(void **state)
{
    (void)state;
    char err[256] = "";
    NanCheck c = {1000, 0};
    RtSimtKernel k = {nan_fill, 0};
    for (int b = 0; b < 3; b++)
        assert_int_equal(rt_simt_run_block(&k, b, 4, c.nfloats * 4, &c, err, sizeof err), 0);
    assert_int_equal(c.non_nan, 0);
}

/* Uses ~200 KB of a 256 KB stack, across a barrier. */
static void deep(void *args, int64_t block, int64_t thread, void *shared)
{
    volatile char big[200 << 10];
    (void)block; (void)shared;
    for (size_t i = 0; i < sizeof big; i += 512)
        big[i] = (char)(thread + (int64_t)i);
    rt_simt_barrier();
    int ok = 1;
    for (size_t i = 0; i < sizeof big; i += 512)
        ok &= big[i] == (char)(thread + (int64_t)i);
    if (!ok)
        __atomic_fetch_add((int *)args, 1, __ATOMIC_RELAXED);
}

static void test_stack(void **state)
{
    (void)state;
    char err[256] = "";
    int bad = 0;
    RtSimtKernel k = {deep, 256 << 10};
    assert_int_equal(rt_simt_run_block(&k, 0, 64, 0, &bad, err, sizeof err), 0);
    assert_int_equal(bad, 0);
}

static void *par_worker(void *arg)
{
    int *fails = arg;
    int64_t out[128];
    Ring r = {128, 6, out, 0};
    RtSimtKernel k = {ring, 64 << 10};
    char err[256];
    for (int b = 0; b < 20; b++)
        if (rt_simt_run_block(&k, b, 128, 128 * 8, &r, err, sizeof err) != 0 || r.bad)
            (*fails)++;
    rt_simt_release();
    return NULL;
}

static void test_parallel(void **state)
{
    (void)state;
    pthread_t th[3];
    int fails[3] = {0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, par_worker, &fails[i]), 0);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(fails[i], 0);
    }
}

typedef struct CpAsync {
    int mode;     /* 0: wait; 1: never wait; 2: a bad size; 3: outside shared
                   * memory; 4: misaligned */
    _Alignas(16) float src[RT_SIMT_MAX_THREADS * 4];
    float before[RT_SIMT_MAX_THREADS * 4], after[RT_SIMT_MAX_THREADS * 4];
} CpAsync;

/* Thread t copies 16 bytes of src to its shared slot asynchronously (the
 * last thread only 8 of them: the rest zero-filled), changes src, reads
 * the slot before and after waiting, and after a barrier its neighbour's. */
static void cp_async(void *args, int64_t block, int64_t thread, void *shared)
{
    (void)block;
    CpAsync *c = args;
    float *sh = shared;
    int last = thread == 63;
    float *dst = c->mode == 3 ? c->before : c->mode == 4 ? sh + 4 * thread + 1 : sh + 4 * thread;
    rt_simt_cp_async(dst, c->src + 4 * thread, c->mode == 2 ? 12 : 16, last ? 8 : 16);
    for (int i = 0; i < 4; i++) {
        c->before[4 * thread + i] = sh[4 * thread + i];
        c->src[4 * thread + i] = -1; /* the source was read at the copy */
    }
    if (c->mode == 1)
        return;
    rt_simt_cp_wait();
    rt_simt_barrier();
    for (int i = 0; i < 4; i++)
        c->after[4 * thread + i] = sh[(4 * thread + 4 + i) % 256];
}

static void test_cp_async(void **state)
{
    (void)state;
    RtSimtKernel k = {cp_async, 64 << 10};
    char err[256] = "";
    CpAsync *c = aligned_alloc(16, sizeof(CpAsync));
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 256; i++)
        c->src[i] = (float)i;
    assert_int_equal(rt_simt_run_block(&k, 0, 64, 1024, c, err, sizeof err), 0);
    for (int i = 0; i < 256; i++) {
        assert_true(isnan(c->before[i])); /* not landed before the wait */
        int j = (i + 4) % 256;
        assert_true(c->after[i] == (j >= 254 ? 0.0f : (float)j));
    }
    c->mode = 1;
    assert_int_equal(rt_simt_run_block(&k, 1, 64, 1024, c, err, sizeof err), -1);
    assert_non_null(strstr(err, "never waited for"));
    c->mode = 2;
    assert_int_equal(rt_simt_run_block(&k, 2, 64, 1024, c, err, sizeof err), -1);
    assert_non_null(strstr(err, "size"));
    c->mode = 3;
    assert_int_equal(rt_simt_run_block(&k, 3, 64, 1024, c, err, sizeof err), -1);
    assert_non_null(strstr(err, "outside the block's shared memory"));
    c->mode = 4;
    assert_int_equal(rt_simt_run_block(&k, 4, 64, 1024, c, err, sizeof err), -1);
    assert_non_null(strstr(err, "not aligned"));
    /* a kernel with another stack size between blocks: the fibers are
     * remade (their copy queues freed: LeakSanitizer in the ASan build) */
    c->mode = 0;
    RtSimtKernel k2 = {cp_async, 96 << 10};
    assert_int_equal(rt_simt_run_block(&k2, 5, 64, 1024, c, err, sizeof err), 0);
    assert_int_equal(rt_simt_run_block(&k, 6, 64, 1024, c, err, sizeof err), 0);
    free(c);
}

typedef struct Butterfly {
    int masks;        /* shuffle with 1 << masks-1, ..., 2, 1 */
    int first;        /* the first mask (R/2); 0: the full warp's 16 */
    float out[RT_SIMT_MAX_THREADS];
} Butterfly;

static void butterfly(void *args, int64_t block, int64_t thread, void *shared)
{
    (void)block;
    (void)shared;
    Butterfly *b = args;
    float v = (float)thread;
    for (int m = b->first ? b->first : 16; m >= 1; m /= 2)
        v += rt_simt_shfl_xor(v, m, 7);
    b->out[thread] = v;
}

static void test_shuffle(void **state)
{
    (void)state;
    RtSimtKernel k = {butterfly, 64 << 10};
    char err[256] = "";
    Butterfly *b = calloc(1, sizeof *b);
    /* 96 threads, three warps: each lane ends with its warp's sum */
    assert_int_equal(rt_simt_run_block(&k, 0, 96, 0, b, err, sizeof err), 0);
    for (int t = 0; t < 96; t++) {
        int w = t / 32;
        assert_true(b->out[t] == (float)(32 * 32 * w + 31 * 32 / 2));
    }
    /* groups of 4 (masks 2, 1) inside a block of 12 threads */
    b->first = 2;
    assert_int_equal(rt_simt_run_block(&k, 1, 12, 0, b, err, sizeof err), 0);
    for (int t = 0; t < 12; t++)
        assert_true(b->out[t] == (float)(4 * (t / 4) * 4 + 6));
    /* mask 16 in a block of 20 threads: lanes 4..15 have no partner */
    b->first = 16;
    assert_int_equal(rt_simt_run_block(&k, 2, 20, 0, b, err, sizeof err), -1);
    assert_non_null(strstr(err, "outside the thread's warp"));
    /* the next block runs */
    b->first = 1;
    assert_int_equal(rt_simt_run_block(&k, 3, 2, 0, b, err, sizeof err), 0);
    assert_true(b->out[0] == 1.0f && b->out[1] == 1.0f);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_order),
        cmocka_unit_test(test_many_threads),
        cmocka_unit_test(test_divergence),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_shared_nan),
        cmocka_unit_test(test_stack),
        cmocka_unit_test(test_parallel),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_cp_async),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rt_simt_release();
    return rc;
}
