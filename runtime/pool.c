/* A small pthread pool for data-parallel loops: the CPU target runs the
 * blocks of a kernel over it.
 *
 * One loop runs at a time. rt_pool_run publishes the job (function, context,
 * range, chunk size) under the mutex, bumps a generation counter and wakes
 * the workers; then everyone, the caller included, takes chunks until the
 * range is exhausted. The range is cut into one slice a thread, each with
 * an atomic counter: a thread takes the chunks of its own slice first, in
 * order, then those left in the others' (the same counters, so every chunk
 * is taken once). Without disturbance each thread runs the same
 * contiguous run of blocks every call: blocks next to each other share
 * operands (a dense layer's row blocks share a panel of W), so a thread's
 * part of W stays in its own L2 from call to call instead of being read by
 * both threads in turn. Taking the others' chunks keeps the threads busy
 * when blocks cost different amounts (edge tiles, ragged shapes) or a core
 * is slow. A worker joins a job under the mutex, and only while chunks are
 * left; the caller returns once every chunk is taken and no worker is in
 * the job. So a worker that wakes late (the machine is busy) costs the
 * caller nothing, and can never run a chunk of a job that has returned.
 * A worker that finishes a job watches for the next one for a while
 * (SPIN_MS) before it sleeps on the condition variable: a kernel of a few
 * tens of microseconds (a small T), or the compute launch right after a
 * packing launch, would otherwise be over before a sleeping worker has
 * woken, and run on the caller's core alone. The caller, its chunks done,
 * watches the workers still in the job the same way before it sleeps: a
 * sleeping caller is woken a condition variable's latency late, tens of
 * microseconds on a busy VM, as long as such a kernel.
 * Workers get 16 MB stacks: kernels keep staging buffers on the stack.
 */
#include "dietcode/runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

enum { STACK_BYTES = 16 << 20, CHUNKS_PER_THREAD = 8 };
static const double SPIN_MS = 0.2;

/* One thread's part of the range: chunks taken from next up to end. A
 * cache line each, so that the threads' counters do not share one. */
typedef struct Slice {
    _Alignas(64) _Atomic int64_t next;
    int64_t end;
} Slice;

typedef struct Worker {
    RtPool *p;
    int slice; /* its own: 1..nworkers (the caller's is 0) */
} Worker;

struct RtPool {
    int nthreads; /* caller included */
    int nworkers;
    pthread_t *th;
    Worker *who;
    Slice *slices; /* nthreads */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_mutex_t run_mu; /* one rt_pool_run at a time */
    _Atomic uint64_t gen; /* written under mu; read without it by spinning workers */
    _Atomic bool stop;
    _Atomic int active; /* workers inside the current job (changed under mu) */
    void (*fn)(void *ctx, int64_t begin, int64_t end);
    void *ctx;
    int64_t chunk;
};

/* Where slice s of nt over 0..n-1 starts: n * s / nt, without overflow. */
static int64_t slice_start(int64_t n, int s, int nt)
{
    return n / nt * s + n % nt * s / nt;
}

/* Takes the chunks of slice `own`, then those left in the others'. */
static void work(RtPool *p, int own)
{
    for (int k = 0; k < p->nthreads; k++) {
        Slice *sl = &p->slices[(own + k) % p->nthreads];
        for (;;) {
            int64_t b = atomic_fetch_add_explicit(&sl->next, p->chunk, memory_order_relaxed);
            if (b >= sl->end)
                break;
            p->fn(p->ctx, b, sl->end - b < p->chunk ? sl->end : b + p->chunk);
        }
    }
}

/* Whether a chunk of the job is left. */
static bool chunks_left(RtPool *p)
{
    for (int s = 0; s < p->nthreads; s++)
        if (atomic_load_explicit(&p->slices[s].next, memory_order_relaxed) < p->slices[s].end)
            return true;
    return false;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Watches p->gen for a job after seen, for SPIN_MS at most. */
static void spin_for_work(RtPool *p, uint64_t seen)
{
    double until = rt_now_ms() + SPIN_MS;
    for (int i = 1;; i++) {
        if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen ||
            atomic_load_explicit(&p->stop, memory_order_relaxed))
            return;
        cpu_relax();
        if (i % 64 == 0 && rt_now_ms() > until)
            return;
    }
}

static void *worker(void *arg)
{
    Worker *me = arg;
    RtPool *p = me->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (!p->stop && p->gen == seen) {
            pthread_mutex_unlock(&p->mu);
            spin_for_work(p, seen);
            pthread_mutex_lock(&p->mu);
        }
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        if (!chunks_left(p))
            continue; /* nothing left: the job may already have returned */
        p->active++;
        pthread_mutex_unlock(&p->mu);
        work(p, me->slice);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

RtPool *rt_pool_new(int nthreads)
{
    if (nthreads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = n > 0 ? (int)n : 1;
    }
    RtPool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nthreads = nthreads;
    p->th = calloc((size_t)nthreads, sizeof *p->th);
    p->who = calloc((size_t)nthreads, sizeof *p->who);
    p->slices = aligned_alloc(_Alignof(Slice), sizeof *p->slices * (size_t)nthreads);
    if (!p->th || !p->who || !p->slices) {
        free(p->th);
        free(p->who);
        free(p->slices);
        free(p);
        return NULL;
    }
    for (int s = 0; s < nthreads; s++) {
        atomic_init(&p->slices[s].next, 0);
        p->slices[s].end = 0;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->run_mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_BYTES);
    for (int i = 0; i < nthreads - 1; i++) {
        p->who[i] = (Worker){p, i + 1};
        if (pthread_create(&p->th[i], &attr, worker, &p->who[i]) != 0)
            break;
        p->nworkers++;
    }
    pthread_attr_destroy(&attr);
    if (p->nworkers != nthreads - 1) {
        rt_pool_destroy(p);
        return NULL;
    }
    return p;
}

int rt_pool_nthreads(const RtPool *p) { return p->nthreads; }

void rt_pool_run(RtPool *p, int64_t n, void (*fn)(void *ctx, int64_t begin, int64_t end),
                 void *ctx)
{
    if (n <= 0)
        return;
    if (p->nworkers == 0 || n == 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->run_mu);
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->chunk = n / ((int64_t)p->nthreads * CHUNKS_PER_THREAD);
    if (p->chunk < 1)
        p->chunk = 1;
    for (int s = 0; s < p->nthreads; s++) {
        atomic_store_explicit(&p->slices[s].next, slice_start(n, s, p->nthreads),
                              memory_order_relaxed);
        p->slices[s].end = slice_start(n, s + 1, p->nthreads);
    }
    p->gen++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    double until = rt_now_ms() + SPIN_MS;
    for (int i = 1; atomic_load_explicit(&p->active, memory_order_acquire) > 0; i++) {
        cpu_relax();
        if (i % 64 == 0 && rt_now_ms() > until)
            break;
    }
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->run_mu);
}

void rt_pool_destroy(RtPool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_mu);
    free(p->th);
    free(p->who);
    free(p->slices);
    free(p);
}
