/* A tiny SIMT emulator: one block of GPU threads on one OS thread.
 *
 * Each GPU thread is a fiber (ucontext) with its own stack; the OS thread
 * that calls rt_simt_run_block is the scheduler. It resumes every runnable
 * fiber in turn; a fiber runs until it calls rt_simt_barrier (it parks at
 * the barrier and switches back) or returns. When a sweep leaves every
 * live fiber parked, the barrier is complete and all are released. A
 * fiber that returns while others wait at a barrier, or fibers parked at
 * different barriers (told apart by the barrier call's return address),
 * is barrier divergence: the block stops with an error where a GPU would
 * hang or misbehave. So the emulator cannot deadlock.
 *
 * The shared buffer is filled with 0xff bytes (a float NaN) before every
 * block, so a read of shared memory no thread wrote shows up as NaN in
 * the output. Fiber stacks are mmap'd with a guard page below them and
 * kept per OS thread (thread-local, released at thread exit or by
 * rt_simt_release), so blocks reuse them; blocks may run in parallel on
 * several OS threads, each with its own fibers.
 *
 * A warp shuffle (rt_simt_shfl_xor) is two barriers around an exchange
 * through a per-block array of one float per thread.
 *
 * An async copy (rt_simt_cp_async, cp.async) reads its source at once and
 * is written to shared memory only when its thread calls rt_simt_cp_wait,
 * so a kernel that reads the copy too early reads the old contents (NaN
 * at first); one that never waits, or copies outside the block's shared
 * memory or to or from an address not aligned to the copy's size (a fault
 * on a GPU), is an error of the block.
 *
 * Under AddressSanitizer every switch is announced with
 * __sanitizer_start/finish_switch_fiber, and a reused stack is unpoisoned.
 */
#include "dietcode/runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMT_ASAN 1
#endif
#endif
#ifdef SIMT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

enum { DEFAULT_STACK = 256 << 10, MIN_STACK = 32 << 10 };

typedef enum FiberState { F_READY, F_BARRIER, F_DONE } FiberState;

/* An async copy not yet written to shared memory. */
typedef struct Copy {
    unsigned char *dst;
    int bytes;
    unsigned char data[16];
} Copy;

typedef struct Fiber {
    ucontext_t ctx;
    Copy *q;          /* its async copies, in issue order */
    int nq, capq;
    char *mem;        /* mapping: guard page, then the stack */
    size_t memlen;
    FiberState state;
    const void *site; /* barrier it waits at: its call site, */
    int64_t site_id;  /* or the id rt_simt_barrier_at was given (else -1) */
    int64_t thread;
    void *fake_stack; /* ASan */
} Fiber;

/* Per OS thread: the fibers (and their stacks) and the shared buffer. */
typedef struct Simt {
    Fiber *f;
    int nf, capf;
    size_t stack; /* stack bytes of every fiber in f */
    char *shared;
    size_t shared_cap;
    size_t shared_bytes; /* of the running block */
    ucontext_t sched;
    Fiber *cur; /* the running fiber, NULL in the scheduler */
    const RtSimtKernel *k;
    int64_t block;
    void *args;
    const void *sched_bottom; /* ASan: the scheduler's stack */
    size_t sched_size;
    int nthreads;
    const char *fault; /* a shuffle's error, reported when the block ends */
    float xch[RT_SIMT_MAX_THREADS]; /* shuffle exchange, per thread */
} Simt;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local Simt *tls;

/* Unmaps a fiber's stack and frees its copy queue. */
static void fiber_drop(Fiber *f)
{
    munmap(f->mem, f->memlen);
    free(f->q);
    f->q = NULL;
    f->nq = f->capq = 0;
}

static void simt_free(Simt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nf; i++)
        fiber_drop(&s->f[i]);
    free(s->f);
    free(s->shared);
    free(s);
}

static void key_destroy(void *p) { simt_free(p); }
static void key_init(void) { pthread_key_create(&key, key_destroy); }

static Simt *simt_get(void)
{
    if (tls)
        return tls;
    pthread_once(&key_once, key_init);
    tls = calloc(1, sizeof *tls);
    if (tls)
        pthread_setspecific(key, tls);
    return tls;
}

void rt_simt_release(void)
{
    if (!tls)
        return;
    pthread_setspecific(key, NULL);
    simt_free(tls);
    tls = NULL;
}

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* At least n fibers with stacks of `stack` bytes; false when out of memory. */
static bool ensure_fibers(Simt *s, int n, size_t stack)
{
    if (s->stack != stack) { /* another size: drop the old fibers */
        for (int i = 0; i < s->nf; i++)
            fiber_drop(&s->f[i]);
        s->nf = 0;
        s->stack = stack;
    }
    if (n > s->capf) {
        Fiber *f = realloc(s->f, sizeof *f * (size_t)n);
        if (!f)
            return false;
        s->f = f;
        s->capf = n;
    }
    size_t pg = page_size();
    while (s->nf < n) {
        Fiber *f = &s->f[s->nf];
        memset(f, 0, sizeof *f);
        f->memlen = pg + stack;
        f->mem = mmap(NULL, f->memlen, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (f->mem == MAP_FAILED)
            return false;
        mprotect(f->mem, pg, PROT_NONE); /* overflow faults instead of corrupting */
        s->nf++;
    }
    return true;
}

static void switch_to_fiber(Simt *s, Fiber *f)
{
    s->cur = f;
#ifdef SIMT_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->mem + page_size(), s->stack);
    swapcontext(&s->sched, &f->ctx);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    swapcontext(&s->sched, &f->ctx);
#endif
    s->cur = NULL;
}

/* From a fiber back to the scheduler; done: the fiber will not resume. */
static void switch_to_sched(Simt *s, Fiber *f, bool done)
{
#ifdef SIMT_ASAN
    __sanitizer_start_switch_fiber(done ? NULL : &f->fake_stack, s->sched_bottom, s->sched_size);
    swapcontext(&f->ctx, &s->sched);
    __sanitizer_finish_switch_fiber(f->fake_stack, NULL, NULL);
#else
    (void)done;
    swapcontext(&f->ctx, &s->sched);
#endif
}

static void fiber_main(void)
{
    Simt *s = tls;
    Fiber *f = s->cur;
#ifdef SIMT_ASAN
    __sanitizer_finish_switch_fiber(NULL, &s->sched_bottom, &s->sched_size);
#endif
    s->k->fn(s->args, s->block, f->thread, s->shared);
    f->state = F_DONE;
    switch_to_sched(s, f, true);
    abort(); /* a finished fiber is never resumed */
}

void rt_simt_barrier(void)
{
    Simt *s = tls;
    if (!s || !s->cur)
        abort(); /* called outside rt_simt_run_block: a broken kernel */
    Fiber *f = s->cur;
    f->state = F_BARRIER;
    f->site = __builtin_return_address(0);
    f->site_id = -1;
    switch_to_sched(s, f, false);
}

void rt_simt_barrier_at(int64_t id)
{
    Simt *s = tls;
    if (!s || !s->cur)
        abort();
    Fiber *f = s->cur;
    f->state = F_BARRIER;
    f->site = NULL;
    f->site_id = id;
    switch_to_sched(s, f, false);
}

/* The block's first error (reported when it ends). */
static void fault(Simt *s, const char *why)
{
    if (!s->fault)
        s->fault = why;
}

float rt_simt_shfl_xor(float v, int32_t mask, int64_t id)
{
    Simt *s = tls;
    if (!s || !s->cur)
        abort();
    int64_t self = s->cur->thread, partner = self ^ (int64_t)mask;
    s->xch[self] = v;
    rt_simt_barrier_at(id);
    float r = v;
    if (partner < 0 || partner >= s->nthreads || partner / 32 != self / 32)
        fault(s, "a warp shuffle reads a lane outside the thread's warp");
    else
        r = s->xch[partner];
    rt_simt_barrier_at(id);
    return r;
}

void rt_simt_cp_async(void *dst, const void *src, int32_t bytes, int32_t src_bytes)
{
    Simt *s = tls;
    if (!s || !s->cur)
        abort();
    Fiber *f = s->cur;
    if ((bytes != 4 && bytes != 8 && bytes != 16) || src_bytes < 0 || src_bytes > bytes) {
        fault(s, "an async copy of a size cp.async does not have");
        return;
    }
    unsigned char *d = dst;
    if (d < (unsigned char *)s->shared || d + bytes > (unsigned char *)s->shared + s->shared_bytes) {
        fault(s, "an async copy to an address outside the block's shared memory");
        return;
    }
    if ((uintptr_t)dst % (uintptr_t)bytes || (uintptr_t)src % (uintptr_t)bytes) {
        fault(s, "an async copy whose addresses are not aligned to its size");
        return;
    }
    if (f->nq == f->capq) {
        int cap = f->capq ? 2 * f->capq : 64;
        Copy *q = realloc(f->q, sizeof *q * (size_t)cap);
        if (!q) {
            fault(s, "out of memory for async copies");
            return;
        }
        f->q = q;
        f->capq = cap;
    }
    Copy *c = &f->q[f->nq++];
    c->dst = d;
    c->bytes = bytes;
    memcpy(c->data, src, (size_t)src_bytes);
    memset(c->data + src_bytes, 0, (size_t)(bytes - src_bytes));
}

void rt_simt_cp_wait(void)
{
    Simt *s = tls;
    if (!s || !s->cur)
        abort();
    Fiber *f = s->cur;
    for (int i = 0; i < f->nq; i++)
        memcpy(f->q[i].dst, f->q[i].data, (size_t)f->q[i].bytes);
    f->nq = 0;
}

int rt_simt_run_block(const RtSimtKernel *k, int64_t block, int nthreads, size_t shared_bytes,
                      void *args, char *err, size_t errlen)
{
    if (nthreads < 1 || nthreads > RT_SIMT_MAX_THREADS) {
        snprintf(err, errlen, "simt: %d threads per block (expected 1..%d)", nthreads,
                 RT_SIMT_MAX_THREADS);
        return -1;
    }
    Simt *s = simt_get();
    if (!s) {
        snprintf(err, errlen, "simt: out of memory");
        return -1;
    }
    if (s->cur) {
        snprintf(err, errlen, "simt: rt_simt_run_block called from inside a kernel");
        return -1;
    }
    size_t pg = page_size();
    size_t stack = k->stack_bytes ? k->stack_bytes : DEFAULT_STACK;
    stack = (stack < MIN_STACK ? MIN_STACK : stack + pg - 1) / pg * pg;
    if (!ensure_fibers(s, nthreads, stack)) {
        snprintf(err, errlen, "simt: cannot allocate %d fiber stacks of %zu bytes", nthreads,
                 stack);
        return -1;
    }
    size_t sb = (shared_bytes + 63) / 64 * 64;
    if (sb > s->shared_cap) {
        free(s->shared);
        s->shared = aligned_alloc(64, sb);
        s->shared_cap = s->shared ? sb : 0;
        if (!s->shared) {
            snprintf(err, errlen, "simt: cannot allocate %zu bytes of shared memory",
                     shared_bytes);
            return -1;
        }
    }
    if (shared_bytes)
        memset(s->shared, 0xff, shared_bytes); /* NaN: unwritten reads show */
    s->k = k;
    s->shared_bytes = shared_bytes;
    s->block = block;
    s->args = args;
    s->nthreads = nthreads;
    s->fault = NULL;
    for (int i = 0; i < nthreads; i++) {
        Fiber *f = &s->f[i];
        char *bottom = f->mem + pg;
#ifdef SIMT_ASAN
        __asan_unpoison_memory_region(bottom, stack);
#endif
        getcontext(&f->ctx);
        f->ctx.uc_stack.ss_sp = bottom;
        f->ctx.uc_stack.ss_size = stack;
        f->ctx.uc_link = NULL;
        makecontext(&f->ctx, fiber_main, 0);
        f->state = F_READY;
        f->thread = i;
        f->site = NULL;
        f->site_id = -1;
        f->fake_stack = NULL;
        f->nq = 0;
    }
    int rc = 0;
    for (int64_t phase = 0;; phase++) {
        for (int i = 0; i < nthreads; i++)
            if (s->f[i].state == F_READY)
                switch_to_fiber(s, &s->f[i]);
        int waiting = 0, done = 0, first = -1, other = -1;
        for (int i = 0; i < nthreads; i++) {
            Fiber *f = &s->f[i];
            if (f->state == F_DONE) {
                done++;
                continue;
            }
            waiting++;
            if (first < 0)
                first = i;
            else if (other < 0 && (f->site != s->f[first].site || f->site_id != s->f[first].site_id))
                other = i;
        }
        if (!waiting)
            break;
        if (done || other >= 0) {
            if (done)
                snprintf(err, errlen,
                         "simt: barrier divergence in block %lld: %d of %d threads returned "
                         "while thread %d waits at barrier %lld",
                         (long long)block, done, nthreads, first, (long long)phase + 1);
            else
                snprintf(err, errlen,
                         "simt: barrier divergence in block %lld: threads %d and %d wait at "
                         "different barriers",
                         (long long)block, first, other);
            rc = -1;
            break;
        }
        for (int i = 0; i < nthreads; i++)
            s->f[i].state = F_READY;
    }
    for (int i = 0; i < nthreads && rc == 0 && !s->fault; i++)
        if (s->f[i].nq)
            s->fault = "a thread returned with async copies it never waited for";
    if (rc == 0 && s->fault) {
        snprintf(err, errlen, "simt: block %lld: %s", (long long)block, s->fault);
        rc = -1;
    }
    s->k = NULL;
    s->args = NULL;
    return rc;
}
