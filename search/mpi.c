/* Tuning across MPI ranks (DESIGN.md, "Tuning on several machines").
 *
 * Under mpirun or srun every rank runs the same `dcc tune` command. Rank 0
 * runs the search exactly as a tune on one machine does and alone reads
 * and writes the records; it only hands its measurements to the other
 * ranks, through the farm the tuner takes (SrchFarm, search.h), so the
 * search itself knows nothing of MPI. Every other rank loads the same
 * program and, in srch_mpi_serve, builds and times what it is handed with
 * a measurer of its own, on its own device: the cores MPI bound it to (the
 * CPU pool sized to them) or the GPU of its local rank modulo the node's
 * GPUs.
 *
 * Work goes out one task (a candidate at one shape point, or its ptxas
 * report) at a time to each idle rank, so a slow rank holds up a few
 * tasks, never a batch: rank 0 keeps, per rank, the task it has out and
 * since when. A candidate's tasks go to the rank that built it, unless
 * that rank has STEAL of them waiting or has been busy for STALL_MS
 * (next_job). A pair measured in turns is one task (the turns only mean
 * something on one device). The first
 * message a rank gets after the tuner opens a fusion is that fusion (its
 * tensors' Fuse and the shape points), from which it makes its measurer.
 *
 * The tuner searches several workloads side by side when the farm has
 * more than one measuring rank (SrchFarm.width), each in a thread of its
 * own: their batches wait at the farm together, in one queue, and are
 * handed out in the order they came. Whichever caller holds the farm's
 * lock hands out and takes in for all of them (MPI_THREAD_SERIALIZED: one
 * thread in MPI at a time), then waits for its own answers on a condition
 * the others signal.
 *
 * The messages are raw bytes of fixed-layout structs: every rank must run
 * the same dcc build (the handshake checks the version string and the
 * structs' sizes) on the same byte order.
 *
 * A lost rank. By default Open MPI ends the whole job when one rank dies:
 * the others get SIGTERM, which the tune takes as Ctrl-C (it stops before
 * its next measurement), and rank 0's records, appended and flushed line
 * by line, hold every measurement taken: running the same command again
 * resumes. With `mpirun --enable-recovery` the job goes on; a rank that
 * gives no answer within DC_MPI_TIMEOUT seconds (default 600: a build can
 * take a minute) is then taken as lost, its candidate handed to another
 * rank, and the tune finishes with the rest (it stops, records intact,
 * when no rank is left). MPI errors return rather than abort
 * (MPI_ERRORS_RETURN), so a send to a lost rank marks it lost too.
 *
 * Waiting is polled with sleeps, not MPI's blocking calls, which spin: a
 * waiting rank 0 beside a measuring rank on one machine would otherwise
 * take a core from its kernels' timing.
 */
#include "dietcode/hash.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef DC_HAVE_MPI
#include <mpi.h>
#endif

/* The first of the launchers' variables that is set, as a count. */
static int env_int(const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

int srch_mpi_launched(int *rank)
{
    /* SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: a batch script that runs
     * dcc without srun has SLURM_NTASKS of its allocation */
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                        "SLURM_STEP_NUM_TASKS"};
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "SLURM_PROCID"};
    int n = env_int(sizes, 4), r = env_int(ranks, 4);
    *rank = n > 1 && r >= 0 ? r : 0;
    return n > 1 ? n : 1;
}

#ifndef DC_HAVE_MPI

bool srch_mpi_built(void) { return false; }

SrchMpi *srch_mpi_start(int *argc, char ***argv, char *err, size_t errlen)
{
    (void)argc, (void)argv;
    srch_seterr(err, errlen, "this dcc was built without MPI (libopenmpi-dev)");
    return NULL;
}

int srch_mpi_rank(const SrchMpi *m) { return m ? -1 : 0; }

bool srch_mpi_join(SrchMpi *m, TeProgram *p, const char *backend, const char *arch,
                   const char *build, const volatile sig_atomic_t *stop,
                   void (*warn)(void *ud, const char *msg), void *warn_ud, char *err,
                   size_t errlen)
{
    (void)m, (void)p, (void)backend, (void)arch, (void)build, (void)stop, (void)warn,
        (void)warn_ud;
    srch_seterr(err, errlen, "this dcc was built without MPI (libopenmpi-dev)");
    return false;
}

const SrchFarm *srch_mpi_farm(SrchMpi *m) { return m ? NULL : NULL; }

bool srch_mpi_serve(SrchMpi *m, char *err, size_t errlen)
{
    (void)m;
    srch_seterr(err, errlen, "this dcc was built without MPI (libopenmpi-dev)");
    return false;
}

void srch_mpi_end(SrchMpi *m) { (void)m; }

#else /* DC_HAVE_MPI */

enum { TAG_HELLO = 1, TAG_CONFIG, TAG_TASK, TAG_RESULT, TAG_DONE };
enum { TASK_ONE = 1, TASK_TURNS, TASK_PTX };
/* the candidates a rank built last that rank 0 remembers: fewer than its
 * measurer keeps built (search/measure.c, MAX_BUILT) */
enum { NSEEN = 96 };
/* an idle rank builds another's candidate when that rank has this many of
 * its tasks queued (a build costs more than a model target's measurement
 * or ptxas report of a built candidate) */
enum { STEAL = 4 };
/* ... or has been on one task this long (ms): a hung rank holds up no
 * more than its own task until DC_MPI_TIMEOUT */
#define STALL_MS 10000.0
#define DEFAULT_TIMEOUT_S 600.0

/* What each rank tells rank 0 when it joins. */
typedef struct Hello {
    int32_t measures;      /* its device started */
    int32_t ncores;        /* CPU: the cores it is bound to */
    int32_t ptxas;         /* ptxas found (GPU targets: its reports are features) */
    uint64_t program;      /* the program's fingerprint, as loaded */
    SrchTarget tg;         /* name not meaningful across processes */
    char arch[64];
    char host[64];
    char build[96];
    char why[256];         /* why it cannot measure */
} Hello;

/* One task: a candidate measured once (as srch_measure_batch), a pair in
 * turns (as srch_measure_turns), or a candidate's ptxas report (as
 * srch_measure_ptxinfo). */
typedef struct Task {
    int64_t seq;           /* answered with it; a late answer of a lost rank has an old one */
    int32_t kind, tensor;
    int32_t turns, runs;
    int32_t ndims;
    double cutoff;
    SrchTiming timing;
    MicroKernel mk[2];
    int64_t dims[SRCH_MAX_DIMS];
} Task;

typedef struct Result {
    int64_t seq;
    SrchTimed out[2];
    int32_t have_ptx;
    SrchPtxInfo ptx;
} Result;

/* A candidate a rank built (in config generation config). */
typedef struct Seen {
    int32_t config, tensor;
    MicroKernel mk;
} Seen;

/* A task of a caller's batch at rank 0, and its answer. */
typedef struct Job {
    Task t;
    Result res;
    int owner;             /* 0 pending, r > 0 out at rank r, -1 answered */
    int home;              /* the rank that has its candidate built, or 0 */
    struct Batch *batch;
} Job;

/* One caller's tasks, queued at the farm until every one is answered. */
typedef struct Batch {
    Job *job;
    int n, left;
    struct Batch *next;
} Batch;

struct SrchMpi {
    int rank, size;
    char host[64];
    const volatile sig_atomic_t *stop;
    void (*warn)(void *ud, const char *msg);
    void *warn_ud;
    TeProgram *p;
    const char *backend, *arch;
    SrchTarget tg;
    char march[64];        /* the measuring ranks' arch */
    bool ptxas;            /* they and rank 0 have ptxas */
    /* rank 0 */
    Hello *hello;          /* size */
    bool *lost;            /* size: not measuring (never could, or lost) */
    Job **out;             /* size: the task a rank has out, or NULL */
    Seen *seen;            /* size x NSEEN: the candidates each rank built last */
    int *nseen;            /* size: how many each built (its next slot, mod NSEEN) */
    int *queued;           /* size: next_job's count of each rank's queued tasks */
    double *since;         /* size: when it got it (ms) */
    int *sent_config;      /* size: the config generation it has */
    int config;            /* the current one's */
    unsigned char *cfg;    /* the current config's message */
    int cfglen;
    int64_t seq;
    double timeout_ms;
    SrchFarm farm;
    bool serialized;       /* MPI lets one thread at a time call it: callers side by side */
    pthread_mutex_t lock;  /* the queue and MPI, for the callers side by side */
    pthread_cond_t answered;
    Batch *queue;          /* the callers' batches, oldest first */
    /* the other ranks */
    SrchMeasurer *ms;
    char ms_err[256];      /* why there is no measurer */
    int64_t *shapes;
    bool joined;           /* the handshake passed: the others serve until told done */
    int32_t nlost;         /* measuring ranks lost (rank 0's count, sent with done) */
};

static void pause_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L};
    nanosleep(&ts, NULL);
}

/* A send that waits as the rest does (polled) and gives up when the tune
 * is stopped or after m->timeout_ms: a send to a rank that died blocks
 * for ever (Open MPI's shared-memory path waits for room in its queue).
 * The message is copied first: one given up on stays MPI's (leaked). */
static bool send_to(const SrchMpi *m, const void *buf, int len, int rank, int tag)
{
    void *copy = malloc((size_t)len + 1);
    MPI_Request req;
    if (!copy)
        return false;
    memcpy(copy, buf, (size_t)len);
    if (MPI_Isend(copy, len, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
        free(copy);
        return false;
    }
    double t0 = rt_now_ms(), wait = 0.01;
    for (;;) {
        int done = 0;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return false;
        if (done) {
            free(copy);
            return true;
        }
        if ((m->stop && *m->stop) || rt_now_ms() - t0 > m->timeout_ms)
            return false;
        pause_ms(wait);
        wait = wait < 2 ? wait * 2 : 2;
    }
}

bool srch_mpi_built(void) { return true; }

SrchMpi *srch_mpi_start(int *argc, char ***argv, char *err, size_t errlen)
{
    int provided, rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
        srch_seterr(err, errlen, "MPI_Init_thread failed (error %d)", rc);
        return NULL;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    SrchMpi *m = calloc(1, sizeof *m);
    if (!m) {
        srch_seterr(err, errlen, "out of memory");
        return NULL;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    m->serialized = provided >= MPI_THREAD_SERIALIZED;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->answered, NULL);
    if (gethostname(m->host, sizeof m->host - 1) != 0)
        snprintf(m->host, sizeof m->host, "?");
    const char *t = getenv("DC_MPI_TIMEOUT");
    m->timeout_ms = 1000 * (t && atof(t) > 0 ? atof(t) : DEFAULT_TIMEOUT_S);
    return m;
}

int srch_mpi_rank(const SrchMpi *m) { return m->rank; }

/* The cores this process may run on (the ones MPI bound it to). */
static int bound_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    return CPU_COUNT(&set);
}

/* This rank's local rank on its node: the GPU it takes, modulo their count. */
static int local_rank(void)
{
    MPI_Comm node;
    int r = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &r);
        MPI_Comm_free(&node);
    }
    return r;
}

/* A measuring rank's device started, described in h (or why not). */
static void start_device(SrchMpi *m, Hello *h)
{
    h->measures = 1;
    if (strcmp(m->backend, "cpu") == 0) {
        /* the pool's threads: the cores this rank is bound to, unless the
         * user said how many (before any kernel starts the pool) */
        int n = bound_cores();
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        if (n > 0 && n < online && !getenv("DCRT_NUM_THREADS")) {
            char v[16];
            snprintf(v, sizeof v, "%d", n);
            setenv("DCRT_NUM_THREADS", v, 1);
        }
        h->ncores = n > 0 && n < online ? n : (int)online;
        h->tg = srch_target_cpu_cores(h->ncores);
        snprintf(h->arch, sizeof h->arch, "%s", srch_host_arch());
        return;
    }
    if (strcmp(m->backend, "cuda") == 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", local_rank());
        if (!getenv("DCRT_CUDA_DEVICE"))
            setenv("DCRT_CUDA_DEVICE", v, 1);
        RtCudaDeviceInfo di;
        if (rt_cuda_device_info(&di, h->why, sizeof h->why) != DCRT_OK) {
            h->measures = 0;
            return;
        }
        char dev[16];
        snprintf(dev, sizeof dev, "sm_%d%d", di.sm_major, di.sm_minor);
        snprintf(h->arch, sizeof h->arch, "%s", m->arch ? m->arch : dev);
        h->tg = srch_target_gpu("cuda", h->arch, di.nsm);
        return;
    }
    snprintf(h->arch, sizeof h->arch, "%s", m->arch ? m->arch : "sm_80");
    h->tg = srch_target_gpu("model", h->arch, 0);
}

static void warnf(SrchMpi *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(SrchMpi *m, const char *fmt, ...)
{
    if (!m->warn)
        return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    m->warn(m->warn_ud, msg);
}

/* Rank 0's verdict on the hellos: NULL when the run can go on (m->march,
 * m->tg set), else why not (in err). */
static bool judge(SrchMpi *m, char *err, size_t errlen)
{
    const Hello *h = m->hello, *first = NULL;
    int nmeasure = 0;
    for (int r = 1; r < m->size; r++) {
        if (h[r].program != h[0].program) {
            srch_seterr(err, errlen, "rank %d (%s) loaded another program than rank 0: every "
                        "rank needs the same program file (and --fuse options)", r, h[r].host);
            return false;
        }
        if (strcmp(h[r].build, h[0].build) != 0) {
            srch_seterr(err, errlen, "rank %d (%s) runs dcc %s, rank 0 dcc %s: every rank "
                        "needs the same dcc build", r, h[r].host, h[r].build, h[0].build);
            return false;
        }
        m->lost[r] = !h[r].measures;
        if (!h[r].measures) {
            warnf(m, "rank %d (%s) cannot measure, it sits out: %s", r, h[r].host, h[r].why);
            continue;
        }
        nmeasure++;
        if (!first) {
            first = &h[r];
            continue;
        }
        if (strcmp(h[r].arch, first->arch) != 0) {
            srch_seterr(err, errlen, "the ranks measure on different archs (rank %d (%s): %s, "
                        "rank %d (%s): %s): a dispatch tree is tuned for one; start a run per "
                        "arch, with ranks of that arch", (int)(first - h), first->host,
                        first->arch, r, h[r].host, h[r].arch);
            return false;
        }
        if (h[r].ncores != first->ncores)
            warnf(m, "rank %d (%s) measures on %d cores, rank %d (%s) on %d: their times mix "
                  "in one tree", r, h[r].host, h[r].ncores, (int)(first - h), first->host,
                  first->ncores);
    }
    /* ptxas's reports come from the measuring ranks: asked only where
     * each of them, and rank 0, finds ptxas (as one machine would) */
    bool ptxas = h[0].ptxas;
    for (int r = 1; r < m->size; r++)
        if (!m->lost[r] && h[r].ptxas != h[0].ptxas && strcmp(m->backend, "cpu") != 0) {
            warnf(m, "rank %d (%s) %s ptxas, rank 0 (%s) %s: the search goes without its "
                  "reports (registers and spills)", r, h[r].host, h[r].ptxas ? "has" : "lacks",
                  h[0].host, h[0].ptxas ? "has" : "lacks");
            ptxas = false;
            break;
        }
    m->ptxas = ptxas;
    if (!nmeasure) {
        srch_seterr(err, errlen, "no rank can measure (rank 1 (%s): %s)", h[1].host, h[1].why);
        return false;
    }
    snprintf(m->march, sizeof m->march, "%s", first->arch);
    m->tg = first->tg; /* its name pointed into another process */
    m->tg.name = strcmp(m->backend, "cpu") == 0    ? "cpu"
                 : strcmp(m->backend, "cuda") == 0 ? "cuda"
                                                   : "model";
    return true;
}

static bool farm_open(void *self, const TeProgram *p, const int64_t *shapes, int nshapes,
                      char *err, size_t errlen);
static bool farm_batch(void *self, const SrchTiming *tm, int n, const SrchStage *const *st,
                       const MicroKernel *mk, const int64_t *const *dims, const double *cutoff_ms,
                       SrchTimed *out, char *err, size_t errlen);
static bool farm_turns(void *self, const SrchStage *st, const MicroKernel *a, const MicroKernel *b,
                       const int64_t *dims, int turns, int runs, SrchTimed out[2], char *err,
                       size_t errlen);
static bool farm_ptxinfo(void *self, int n, const SrchStage *st, const MicroKernel *mk,
                         SrchPtxInfo *out, bool *have, char *err, size_t errlen);

bool srch_mpi_join(SrchMpi *m, TeProgram *p, const char *backend, const char *arch,
                   const char *build, const volatile sig_atomic_t *stop,
                   void (*warn)(void *ud, const char *msg), void *warn_ud, char *err,
                   size_t errlen)
{
    m->p = p;
    m->backend = backend;
    m->arch = arch;
    m->stop = stop;
    m->warn = warn;
    m->warn_ud = warn_ud;
    Hello me = {0};
    char *fp = srch_program_fingerprint(p, backend, "mpi");
    me.program = dc_fnv1a_str(fp);
    free(fp);
    snprintf(me.host, sizeof me.host, "%s", m->host);
    me.ptxas = srch_ptxas_path() != NULL;
    snprintf(me.build, sizeof me.build, "%s/%zu/%zu/%zu", build, sizeof(Task), sizeof(Result),
             sizeof(Hello));
    if (m->rank != 0)
        start_device(m, &me);
    if (m->rank == 0) {
        m->hello = calloc((size_t)m->size, sizeof *m->hello);
        m->lost = calloc((size_t)m->size, sizeof *m->lost);
        m->out = calloc((size_t)m->size, sizeof *m->out);
        m->seen = calloc((size_t)m->size * NSEEN, sizeof *m->seen);
        m->nseen = calloc((size_t)m->size, sizeof *m->nseen);
        m->queued = calloc((size_t)m->size, sizeof *m->queued);
        m->since = calloc((size_t)m->size, sizeof *m->since);
        m->sent_config = calloc((size_t)m->size, sizeof *m->sent_config);
    }
    int ok = 1;
    if (MPI_Gather(&me, (int)sizeof me, MPI_BYTE, m->hello, (int)sizeof me, MPI_BYTE, 0,
                   MPI_COMM_WORLD) != MPI_SUCCESS) {
        srch_seterr(err, errlen, "the ranks could not say who they are (MPI_Gather failed)");
        return false;
    }
    if (m->rank == 0)
        ok = judge(m, err, errlen);
    if (MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        srch_seterr(err, errlen, "MPI_Bcast failed");
        return false;
    }
    if (!ok && m->rank != 0)
        srch_seterr(err, errlen, "rank %d (%s): rank 0 stopped the run (its message says why)",
                    m->rank, m->host);
    if (ok && m->rank != 0)
        m->tg = me.tg, snprintf(m->march, sizeof m->march, "%s", me.arch);
    m->joined = ok;
    int width = 0;
    for (int r = 1; m->rank == 0 && ok && r < m->size; r++)
        width += !m->lost[r];
    m->farm = (SrchFarm){.self = m,
                         .arch = m->march,
                         .tg = m->tg,
                         .width = m->serialized ? width : 1,
                         .ptxas = m->ptxas,
                         .open = farm_open,
                         .batch = farm_batch,
                         .turns = farm_turns,
                         .ptxinfo = farm_ptxinfo};
    return ok;
}

const SrchFarm *srch_mpi_farm(SrchMpi *m) { return m->rank == 0 ? &m->farm : NULL; }

/* ---- rank 0: handing out ---- */

/* The fusion measured from now on, as one message: ntensors, nshapes,
 * ndims, each tensor's Fuse (a byte each, padded to 8), the shapes. */
static bool farm_open(void *self, const TeProgram *p, const int64_t *shapes, int nshapes,
                      char *err, size_t errlen)
{
    SrchMpi *m = self;
    int nt = p->ntensors, pad = (nt + 7) / 8 * 8;
    size_t len = 3 * sizeof(int32_t) + 4 + (size_t)pad +
                 sizeof(int64_t) * (size_t)nshapes * (size_t)p->ndims;
    unsigned char *b = calloc(len, 1);
    if (!b) {
        srch_seterr(err, errlen, "out of memory");
        return false;
    }
    int32_t head[4] = {nt, nshapes, p->ndims, 0};
    memcpy(b, head, sizeof head);
    for (int i = 0; i < nt; i++)
        b[sizeof head + (size_t)i] = (unsigned char)p->tensors[i]->fuse;
    memcpy(b + sizeof head + pad, shapes, sizeof(int64_t) * (size_t)nshapes * (size_t)p->ndims);
    free(m->cfg);
    m->cfg = b;
    m->cfglen = (int)len;
    m->config++;
    return true;
}

/* Rank r is lost: it gives no more answers, its task goes to another. */
static void lose(SrchMpi *m, int r, const char *why)
{
    m->lost[r] = true;
    if (m->out[r])
        m->out[r]->owner = 0;
    m->out[r] = NULL;
    warnf(m, "rank %d (%s) is lost (%s): its candidate goes to another rank", r,
          m->hello[r].host, why);
}

/* Hands task t to rank r (the fusion first, when r lacks it); false when
 * the send fails (r is then lost). */
static bool hand(SrchMpi *m, int r, Task *t)
{
    if (m->sent_config[r] != m->config) {
        if (!send_to(m, m->cfg, m->cfglen, r, TAG_CONFIG))
            return false;
        m->sent_config[r] = m->config;
    }
    t->seq = ++m->seq;
    return send_to(m, t, (int)sizeof *t, r, TAG_TASK);
}

/* Whether task t measures the candidate mk of tensor (the first of a pair). */
static bool is_candidate(const Task *t, int32_t tensor, const MicroKernel *mk)
{
    return t->tensor == tensor && ir_microkernel_cmp(&t->mk[0], mk) == 0;
}

/* The live rank that has t's candidate built in the current fusion, or 0. */
static int home_of(const SrchMpi *m, const Task *t)
{
    for (int r = 1; r < m->size; r++) {
        const Seen *s = &m->seen[(size_t)r * NSEEN];
        for (int i = 0; !m->lost[r] && i < NSEEN && i < m->nseen[r]; i++)
            if (s[i].config == m->config && is_candidate(t, s[i].tensor, &s[i].mk))
                return r;
    }
    return 0;
}

/* The task for idle rank r, or NULL: the oldest queued one whose
 * candidate r has built, else the oldest one no live rank has built,
 * else the oldest of a rank with STEAL queued or STALL_MS on its task. A
 * candidate's shape points (and its ptxas report) go to the rank that
 * builds it: handed to any idle rank, every rank built every candidate,
 * and two ranks on a machine whose compiles dominate gained nothing over
 * one. */
static Job *next_job(SrchMpi *m, int r)
{
    Job *fresh = NULL;
    double now = rt_now_ms();
    memset(m->queued, 0, sizeof *m->queued * (size_t)m->size);
    for (Batch *b = m->queue; b; b = b->next)
        for (int k = 0; k < b->n; k++) {
            Job *j = &b->job[k];
            if (j->owner != 0)
                continue;
            if (j->home == r)
                return j;
            if (j->home == 0 || m->lost[j->home])
                fresh = fresh ? fresh : j;
            else
                m->queued[j->home]++;
        }
    if (fresh)
        return fresh;
    for (Batch *b = m->queue; b; b = b->next)
        for (int k = 0; k < b->n; k++)
            if (b->job[k].owner == 0 &&
                (m->queued[b->job[k].home] >= STEAL ||
                 (m->out[b->job[k].home] && now - m->since[b->job[k].home] > STALL_MS)))
                return &b->job[k];
    return NULL;
}

/* Job j handed to rank r, which builds its candidate there: remembered,
 * and the queued jobs of that candidate go to r from now on. */
static void built_by(SrchMpi *m, int r, const Job *j)
{
    if (j->home == r)
        return;
    m->seen[(size_t)r * NSEEN + (size_t)(m->nseen[r]++ % NSEEN)] =
        (Seen){m->config, j->t.tensor, j->t.mk[0]};
    for (Batch *b = m->queue; b; b = b->next)
        for (int k = 0; k < b->n; k++)
            if (b->job[k].owner == 0 && is_candidate(&b->job[k].t, j->t.tensor, &j->t.mk[0]))
                b->job[k].home = r;
}

/* One round for every queued batch (the lock held): the idle ranks handed
 * the oldest tasks, one answer taken in (1), or, with none there, the
 * ranks that took too long taken as lost (0); -1 when no rank is left. */
static int pump(SrchMpi *m)
{
    int live = 0;
    for (int r = 1; r < m->size; r++) {
        if (m->lost[r])
            continue;
        live++;
        Job *j = m->out[r] ? NULL : next_job(m, r);
        if (!j)
            continue;
        if (!hand(m, r, &j->t)) {
            if (m->stop && *m->stop)
                return 0; /* the caller says so */
            lose(m, r, "a send to it failed or found no room");
            live--;
            continue;
        }
        j->owner = r;
        m->out[r] = j;
        built_by(m, r, j);
        m->since[r] = rt_now_ms();
    }
    if (!live)
        return -1;
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS)
        flag = 0;
    if (flag) {
        Result got;
        int r = st.MPI_SOURCE;
        if (MPI_Recv(&got, (int)sizeof got, MPI_BYTE, r, TAG_RESULT, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return 1;
        Job *j = m->out[r];
        /* an answer of a rank taken as lost, or to a task re-handed or
         * given up on, is late: dropped */
        if (j && !m->lost[r] && got.seq == j->t.seq) {
            j->res = got;
            j->owner = -1;
            j->batch->left--;
            m->out[r] = NULL;
            pthread_cond_broadcast(&m->answered);
        }
        return 1;
    }
    double now = rt_now_ms();
    for (int r = 1; r < m->size; r++)
        if (!m->lost[r] && m->out[r] && now - m->since[r] > m->timeout_ms) {
            char why[96];
            snprintf(why, sizeof why, "no answer in %.0f s, DC_MPI_TIMEOUT", m->timeout_ms / 1000);
            lose(m, r, why);
        }
    return 0;
}

/* Runs the n jobs on the measuring ranks, one at a time each, beside the
 * other callers' batches; false and err when stopped or no rank is left. */
static bool run_tasks(SrchMpi *m, int n, Job *job, char *err, size_t errlen)
{
    Batch me = {job, n, n, NULL}, **tail = &m->queue;
    pthread_mutex_lock(&m->lock);
    for (int k = 0; k < n; k++)
        job[k].owner = 0, job[k].batch = &me, job[k].home = home_of(m, &job[k].t);
    while (*tail)
        tail = &(*tail)->next;
    *tail = &me;
    double wait = 0.05; /* ms, as the serving ranks' polls */
    bool ok = true;
    while (me.left > 0) {
        if (m->stop && *m->stop) {
            srch_seterr(err, errlen, "interrupted");
            ok = false;
            break;
        }
        int got = pump(m);
        if (got < 0) {
            srch_seterr(err, errlen, "no rank is left to measure");
            ok = false;
            break;
        }
        if (got > 0) {
            wait = 0.05;
            continue;
        }
        /* a sleep that an answer to another caller ends */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(wait * 1e6);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        if (pthread_cond_timedwait(&m->answered, &m->lock, &until) == 0)
            wait = 0.05; /* answers come: more may follow */
        else
            wait = wait < 2 ? wait * 2 : 2;
    }
    /* out of the queue; a task still out (stopped) is given up on */
    for (Batch **b = &m->queue; *b; b = &(*b)->next)
        if (*b == &me) {
            *b = me.next;
            break;
        }
    for (int r = 1; r < m->size; r++)
        if (m->out[r] && m->out[r]->batch == &me)
            m->out[r] = NULL;
    pthread_mutex_unlock(&m->lock);
    return ok;
}

/* A task of stage st at dims (the program's dims, by Var.pos). */
static Task task_of(const SrchMpi *m, int kind, const SrchStage *st, const int64_t *dims)
{
    Task t = {.kind = kind, .tensor = st->t->id, .ndims = m->p->ndims};
    memcpy(t.dims, dims, sizeof *dims * (size_t)m->p->ndims);
    return t;
}

/* n jobs, zeroed; NULL and err when out of memory. */
static Job *new_jobs(int n, char *err, size_t errlen)
{
    Job *j = calloc((size_t)n + 1, sizeof *j);
    if (!j)
        srch_seterr(err, errlen, "out of memory");
    return j;
}

static bool farm_batch(void *self, const SrchTiming *tm, int n, const SrchStage *const *st,
                       const MicroKernel *mk, const int64_t *const *dims, const double *cutoff_ms,
                       SrchTimed *out, char *err, size_t errlen)
{
    SrchMpi *m = self;
    Job *j = new_jobs(n, err, errlen);
    if (!j)
        return false;
    for (int k = 0; k < n; k++) {
        j[k].t = task_of(m, TASK_ONE, st[k], dims[k]);
        j[k].t.mk[0] = mk[k];
        j[k].t.cutoff = cutoff_ms ? cutoff_ms[k] : 0;
        j[k].t.timing = *tm;
    }
    bool ok = run_tasks(m, n, j, err, errlen);
    for (int k = 0; ok && k < n; k++)
        out[k] = j[k].res.out[0];
    free(j);
    return ok;
}

static bool farm_ptxinfo(void *self, int n, const SrchStage *st, const MicroKernel *mk,
                         SrchPtxInfo *out, bool *have, char *err, size_t errlen)
{
    SrchMpi *m = self;
    Job *j = new_jobs(n, err, errlen);
    if (!j)
        return false;
    for (int k = 0; k < n; k++) {
        j[k].t = (Task){.kind = TASK_PTX, .tensor = st->t->id, .ndims = m->p->ndims};
        j[k].t.mk[0] = mk[k];
    }
    bool ok = run_tasks(m, n, j, err, errlen);
    for (int k = 0; ok && k < n; k++)
        out[k] = j[k].res.ptx, have[k] = j[k].res.have_ptx;
    free(j);
    return ok;
}

static bool farm_turns(void *self, const SrchStage *st, const MicroKernel *a, const MicroKernel *b,
                       const int64_t *dims, int turns, int runs, SrchTimed out[2], char *err,
                       size_t errlen)
{
    SrchMpi *m = self;
    Job j = {.t = task_of(m, TASK_TURNS, st, dims)};
    j.t.mk[0] = *a;
    j.t.mk[1] = *b;
    j.t.turns = turns;
    j.t.runs = runs;
    if (!run_tasks(m, 1, &j, err, errlen))
        return false;
    out[0] = j.res.out[0];
    out[1] = j.res.out[1];
    return true;
}

/* ---- the other ranks: measuring ---- */

/* The fusion rank 0 opened: p's Fuse set as it says, a measurer made for
 * it (or why not, in m->ms_err, which every task then answers). */
static void take_config(SrchMpi *m, const unsigned char *b, int len)
{
    TeProgram *p = m->p;
    int32_t head[4];
    srch_measurer_free(m->ms);
    m->ms = NULL;
    free(m->shapes);
    m->shapes = NULL;
    memcpy(head, b, sizeof head);
    int nt = head[0], nshapes = head[1], ndims = head[2], pad = (nt + 7) / 8 * 8;
    if (nt != p->ntensors || ndims != p->ndims || nshapes < 1 ||
        (size_t)len != sizeof head + (size_t)pad + sizeof(int64_t) * (size_t)nshapes * (size_t)ndims) {
        srch_seterr(m->ms_err, sizeof m->ms_err, "rank %d (%s): the fusion rank 0 sent does not "
                    "fit the program loaded here", m->rank, m->host);
        return;
    }
    for (int i = 0; i < nt; i++)
        p->tensors[i]->fuse = (Fuse)b[sizeof head + (size_t)i];
    size_t bytes = sizeof(int64_t) * (size_t)nshapes * (size_t)ndims;
    m->shapes = malloc(bytes + 1);
    memcpy(m->shapes, b + sizeof head + pad, bytes);
    char why[256];
    m->ms = srch_measurer_new(m->backend, m->arch, p, &m->tg, m->shapes, nshapes, why, sizeof why);
    if (!m->ms)
        srch_seterr(m->ms_err, sizeof m->ms_err, "rank %d (%s): %s", m->rank, m->host, why);
}

/* Task t measured here into r. */
static void do_task(SrchMpi *m, const Task *t, Result *r)
{
    memset(r, 0, sizeof *r);
    r->seq = t->seq;
    const char *bad = !m->ms ? m->ms_err
                      : t->tensor < 0 || t->tensor >= m->p->ntensors || t->ndims != m->p->ndims ||
                              (t->kind != TASK_ONE && t->kind != TASK_TURNS && t->kind != TASK_PTX)
                          ? "a task that does not fit the program loaded here"
                          : NULL;
    if (bad) {
        r->out[0].failed = r->out[1].failed = true;
        snprintf(r->out[0].err, sizeof r->out[0].err, "%s", bad);
        return;
    }
    SrchStage st = {.t = m->p->tensors[t->tensor]};
    const SrchStage *stp = &st;
    const int64_t *dims = t->dims;
    if (t->kind == TASK_PTX) {
        r->have_ptx = srch_measure_ptxinfo(m->ms, &st, &t->mk[0], &r->ptx);
        return;
    }
    if (t->kind == TASK_ONE) {
        srch_measurer_set_timing(m->ms, &t->timing);
        srch_measure_batch(m->ms, 1, &stp, &t->mk[0], &dims, &t->cutoff, &r->out[0]);
        return;
    }
    char err[256];
    if (srch_measure_turns(m->ms, &st, &t->mk[0], &t->mk[1], dims, t->turns, t->runs, r->out,
                           err, sizeof err) != 0) {
        r->out[0].failed = true;
        snprintf(r->out[0].err, sizeof r->out[0].err, "%s", err);
    }
}

bool srch_mpi_serve(SrchMpi *m, char *err, size_t errlen)
{
    double wait = 0.05;
    snprintf(m->ms_err, sizeof m->ms_err, "rank %d (%s): no fusion opened", m->rank, m->host);
    for (;;) {
        if (m->stop && *m->stop) {
            srch_seterr(err, errlen, "rank %d (%s): interrupted", m->rank, m->host);
            return false;
        }
        int flag = 0, len = 0;
        MPI_Status st;
        if (MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS) {
            srch_seterr(err, errlen, "rank %d (%s): MPI_Iprobe failed", m->rank, m->host);
            return false;
        }
        if (!flag) {
            pause_ms(wait);
            wait = wait < 2 ? wait * 2 : 2;
            continue;
        }
        wait = 0.05;
        MPI_Get_count(&st, MPI_BYTE, &len);
        unsigned char *b = malloc((size_t)len + 1);
        if (!b || MPI_Recv(b, len, MPI_BYTE, 0, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                      MPI_SUCCESS) {
            free(b);
            srch_seterr(err, errlen, "rank %d (%s): a message from rank 0 was lost", m->rank,
                        m->host);
            return false;
        }
        if (st.MPI_TAG == TAG_DONE) {
            if (len == (int)sizeof m->nlost)
                memcpy(&m->nlost, b, sizeof m->nlost);
            free(b);
            return true;
        }
        if (st.MPI_TAG == TAG_CONFIG) {
            take_config(m, b, len);
        } else if (st.MPI_TAG == TAG_TASK && len == (int)sizeof(Task)) {
            Task t;
            Result r;
            memcpy(&t, b, sizeof t);
            do_task(m, &t, &r);
            if (!send_to(m, &r, (int)sizeof r, 0, TAG_RESULT)) {
                free(b);
                srch_seterr(err, errlen, "rank %d (%s): cannot answer rank 0", m->rank, m->host);
                return false;
            }
        }
        free(b);
    }
}

void srch_mpi_end(SrchMpi *m)
{
    if (!m)
        return;
    if (m->rank == 0 && m->joined) {
        for (int r = 1; r < m->size; r++)
            m->nlost += m->hello[r].measures && m->lost[r];
        for (int r = 1; r < m->size; r++) {
            /* a rank taken as lost for its silence may live on (slow,
             * not dead): told too, or it waits for rank 0 for ever; a
             * dead one's send is given up on after a second (and from
             * then on every rank's: 4 bytes go to a live one at once) */
            if (m->lost[r] && m->hello[r].measures)
                m->timeout_ms = m->timeout_ms < 1000 ? m->timeout_ms : 1000;
            send_to(m, &m->nlost, (int)sizeof m->nlost, r, TAG_DONE);
        }
    }
    /* MPI_Finalize waits for every rank, a lost one too (Open MPI 4.1
     * under --enable-recovery hangs there): after a loss the ranks leave
     * without it, which mpirun then takes as a normal end */
    if (!m->nlost)
        MPI_Finalize();
    srch_measurer_free(m->ms);
    free(m->shapes);
    free(m->hello);
    free(m->lost);
    free(m->out);
    free(m->seen);
    free(m->nseen);
    free(m->queued);
    free(m->since);
    free(m->sent_config);
    free(m->cfg);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->answered);
    free(m);
}

#endif /* DC_HAVE_MPI */
