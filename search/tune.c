/* The DietCode search (DESIGN.md, "The search").
 *
 * For each stage: one evolutionary search over the micro-kernel space for
 * every shape point at once. A population is bred by mutation (half of it
 * aimed at the shape whose best latency so far is furthest from what the
 * population predicts possible), scored by the cost model — learned
 * throughput (XGBoost) times the analytic adaptation at each shape — and
 * measured in epsilon-greedy batches: most of a batch the best predicted,
 * the rest drawn at random. Each candidate is measured once, at the shape
 * where its adaptation is best (a long run there is preceded by a probe at
 * a smaller shape, which stands instead when it shows the candidate
 * hopeless), and its label is its throughput there divided by that
 * adaptation, so one model serves all shapes.
 *
 * Then the selection: at every shape point the top predicted candidates
 * are measured, the winner is the oracle, a CART tree is fit to it, and
 * whatever the tree picks that was not measured yet is measured too, so
 * the reported latency of the dispatch is measured, not predicted.
 *
 * --per-shape runs the same search once per shape point, each with the
 * full budget and only its own shape (the Ansor way), for comparison.
 *
 * Every measurement goes through the records: found there, it is reused;
 * otherwise it is taken and appended before the search goes on.
 */
#include "dietcode/hash.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { POP = 32, CHILDREN = 64, BATCH = 8 };
#define EPSILON 0.25
/* the CPU's measuring budget in the search and in the selection (ms) */
#define SEARCH_BUDGET_MS 20.0
#define SELECT_BUDGET_MS 8.0
/* the selection: candidates predicted within SELECT_NEAR of the best at a
 * shape are measured there; two measured within SELECT_CLOSE are measured
 * again, in SELECT_TURNS turns of two runs (kernels that run long: in
 * fewer runs, TURNS_BUDGET_MS each, but at least two turns of one run) */
#define SELECT_NEAR 1.10
/* a time measured at one shape serves the shapes within this factor of it
 * (every dim's ratio multiplied) */
#define SELECT_REACH 1.10
#define SELECT_CLOSE 1.03
enum { SELECT_TURNS = 4 };
#define TURNS_BUDGET_MS 40.0
/* At a shape where the best measured is slower than the next candidates'
 * estimates by more than the factor SELECT_SURPRISE, up to SELECT_SURPRISES
 * more are measured there. */
#define SELECT_SURPRISE 1.5
enum { SELECT_SURPRISES = 3 };
/* an intermediate whose inlining the cost model puts within this factor
 * of materialising it, either way, is tuned both ways; the other way wins
 * when its stages are faster by more than the factor SRCH_FUSE_MARGIN (a tie
 * stays with the model's choice, whatever the noise); of those, at most
 * srch_fuse_contests are, the ones whose other way changes the most time */
#define FUSE_CONTEST 4.0
/* before the tree is written, the kernel it picks at each shape point and
 * the next best known there, when within CHECK_CLOSE of it, are measured
 * again in turns (SELECT_TURNS of two runs) and the tree fitted again, up
 * to CHECK_ROUNDS times while the new tree picks unchecked kernels */
#define CHECK_CLOSE 1.15
#define CHECK_ROUNDS 3
/* GPU: a kernel that spills (ptxas) is chosen over one without spills only
 * where it is faster by more than this factor */
#define SPILL_MARGIN 1.05
/* A candidate's probe (SrchTuneOpts.probe_ms): a shape of at most
 * 1/PROBE_WORK of its home's work, and at least 1/PROBE_FLOOR of it (a
 * run mostly overheads would make a good kernel look hopeless), where it
 * adapts at least PROBE_ADAPT as well as there. A hopeless candidate is
 * HOPELESS times slower than the best time known at its home. */
#define PROBE_WORK 8.0
#define PROBE_FLOOR 64.0
#define PROBE_ADAPT 0.9
#define HOPELESS 3.0

typedef struct Cand {
    MicroKernel mk;
    double f;          /* throughput: measured label, else predicted (GFLOP/s) */
    bool measured;
    bool failed;
    double fitness;
    bool have_ptx;     /* GPU, with ptxas: its report (a feature of the model) */
    SrchPtxInfo ptx;
    int home;          /* measured: where (index into the search's shapes: where it adapts
                        * best, or its probe when hopeless there), and its time */
    double home_ms;
    int probe;         /* where it was run first (-1: nowhere), and its time there */
    double probe_ms;
} Cand;

typedef struct Tuner {
    TeProgram *p;
    const SrchTuneOpts *o;
    SrchTarget tg;
    const char *arch;       /* what the records say it ran on */
    SrchMeasurer *ms;       /* of the fusion being tuned */
    const char *ms_arch;    /* what it compiles for (NULL: sm_80) */
    SrchRecords *rec;       /* open with that fusion's workloads and the program's */
    char *pf;               /* the program's fingerprint (its fuse lines) */
    int nconfigs;           /* fusions tuned */
    bool contest;           /* tuning the other way of a fusion choice: its stages'
                             * trees are not checked unless it wins */
    bool refit;             /* fitting such a winner again: its stored trees do not stand */
    uint64_t *warned;       /* the records' warnings reported (each once), hashed */
    int nwarned;
    int ncorrupt;           /* the most damaged lines any open of the records saw */
    int nshapes;
    int64_t *shapes;
    const char **dim_names;
    double t0;
    char *err;
    size_t errlen;
    bool failed;
    /* --warm-start: other workloads' samples for every search's model */
    int nwarm;
    float *warm_feat;       /* nwarm x SRCH_NFEAT */
    double *warm_label;     /* GFLOP/s */
    /* and the kernels their dispatch trees chose */
    int nwarm_mk;
    struct WarmKernel *warm_mk;
    /* the runs timed, and of those dropped as disturbed, slow or outliers (noise) */
    int64_t runs, dropped;
    /* searches side by side (run_side_by_side): the one that holds it runs */
    pthread_mutex_t *lock;
} Tuner;

typedef struct WarmKernel {
    MicroKernel mk;
    int rank;               /* its stage's */
    int served;             /* how many of this run's shape points its tree gave it */
    int order;              /* in the file */
} WarmKernel;

typedef struct Search {
    Tuner *tu;
    const SrchStage *st;
    SrchRecordKind kind;
    const char *phase;
    int nsh;
    const int *sh;                    /* shape indices */
    int64_t (*ext)[MK_MAX_AXES + 1];  /* per shape in sh */
    double *flops;
    double *best;                     /* per shape: best latency predicted from measured labels */
    SrchModel *model;
    uint64_t rng;
    Cand *c;                          /* every candidate seen, measured or not */
    int nc, capc;
    int trials, done, reused, round;
    int probed, hopeless;             /* candidates run at a probe, and hopeless there */
    double best_meas, best_pred;
    double phase_t0;                  /* when the current phase started */
    int offset, grand_total;          /* per-shape: trials before this shape's, and in all */
    /* the selection: every candidate's measured time at every shape (nc x
     * nsh, NAN where not measured), and the shapes' log dims (nsh x ndims)
     * to tell how near two shapes are */
    double *lat;
    double *logdims;
    int **mpts, *nmpts;               /* per candidate: the shapes where lat has a time */
} Search;

static double now_s(void) { return rt_now_ms() * 1e-3; }

static const int64_t *shape_at(const Tuner *tu, int s)
{
    return tu->shapes + (size_t)s * (size_t)tu->p->ndims;
}

/* Shape s's values in the order of the program's dims (the records' and
 * tu->dim_names' order). */
static void shape_vals(const Tuner *tu, int s, int64_t *vals)
{
    for (int i = 0; i < tu->p->ndims; i++)
        vals[i] = shape_at(tu, s)[tu->p->dims[i]->pos];
}

/* ---- measurements, through the records ---- */

/* Which of the records of one key (st, mk, shape) a step of the tune
 * sees, so that a resumed run goes the way the first one went. */
typedef enum View {
    SEEN_FIRST,     /* the search and the selection's first look: the first
                     * measurement, none again in turns */
    SEEN_SELECTION, /* the selection after its turns: the latest but the check's */
    SEEN_LATEST,    /* the check and the fit: the latest */
} View;

/* The record of st with mk at shape s, of the joint search's class
 * (baseline false) or the baseline's, that view v sees; NULL when none. */
static const SrchRecord *seen(const Tuner *tu, const SrchStage *st, const MicroKernel *mk, int s,
                              bool baseline, View v)
{
    int64_t vals[SRCH_MAX_DIMS];
    shape_vals(tu, s, vals);
    const SrchRecord *r = srch_records_find_class(tu->rec, st->workload, mk, tu->p->ndims,
                                                  tu->dim_names, vals, baseline);
    if (!r || v == SEEN_LATEST || !srch_record_is_turns(r->kind) ||
        (v == SEEN_SELECTION && !srch_record_is_check(r->kind)))
        return r;
    /* rare (measured again since): the first, or the latest before the check */
    for (int k = 0, n = srch_records_count(tu->rec); k < n; k++) {
        const SrchRecord *x = srch_records_at(tu->rec, v == SEEN_FIRST ? k : n - 1 - k);
        bool hidden = v == SEEN_FIRST ? srch_record_is_turns(x->kind)
                                      : srch_record_is_check(x->kind);
        if (srch_record_is_baseline(x->kind) == baseline && !hidden && x->median_ms > 0 &&
            srch_record_has_key(x, st->workload, mk, tu->p->ndims, tu->dim_names, vals))
            return x;
    }
    return NULL;
}

/* One measurement asked for: st with mk at shape s, of kind as trial; on
 * the CPU a cutoff (INFINITY: none), and the search's features of mk and
 * the adapted work at s when feat is given. */
typedef struct Ask {
    const SrchStage *st;
    const MicroKernel *mk;
    int s;
    SrchRecordKind kind;
    int64_t trial;
    double cutoff;
    const float *feat;
    double work;
} Ask;

/* Whether a measurement is a run that takes its time: on every target but
 * the model, whose times are computed (no noise in them, nothing gained
 * by measuring again, no run a probe could save). */
static bool runs_take_time(const Tuner *tu) { return strcmp(tu->tg.name, "model") != 0; }

/* Appends what timing t took of a as a record of a's kind; false (tu
 * failed) when the records cannot be written. */
static bool record(Tuner *tu, const Ask *a, const SrchTimed *t)
{
    const TeProgram *p = tu->p;
    int64_t vals[SRCH_MAX_DIMS];
    double times[SRCH_MAX_REPEATS];
    shape_vals(tu, a->s, vals);
    memcpy(times, t->times_ms, sizeof times);
    SrchRecord rec = {
        .workload = a->st->workload, .target = tu->tg.name, .arch = tu->arch,
        .stage = a->st->t->name, .mk = *a->mk, .nspatial = a->st->rank, .ndims = p->ndims,
        .dim_names = tu->dim_names, .dim_values = vals, .ntimes = t->ntimes,
        .times_ms = times, .ndropped = t->ndropped, .kind = a->kind, .trial = a->trial,
        .nfeat = a->feat ? SRCH_NFEAT : 0, .features = a->feat, .work = a->work,
    };
    if (runs_take_time(tu)) {
        tu->runs += t->ntimes + t->ndropped;
        tu->dropped += t->ndropped;
    }
    if (!srch_records_append(tu->rec, &rec, tu->err, tu->errlen))
        tu->failed = true;
    return !tu->failed;
}

/* Whether the tune was asked to stop (Ctrl-C): then it fails with
 * "interrupted" before its next measurement. */
static bool stopped(Tuner *tu)
{
    if (!tu->o->stop || !*tu->o->stop)
        return false;
    if (!tu->failed)
        srch_seterr(tu->err, tu->errlen, "interrupted");
    tu->failed = true;
    return true;
}

/* What a search side by side with others keeps of the tuner while the
 * farm measures for it and another holds the tuner: the measurer's timing
 * (the selection's is not the search's) and the runs counted (its
 * stage's). */
typedef struct Held {
    SrchTiming timing;
    int64_t runs, dropped;
} Held;

/* The tuner let go while the farm measures (searches side by side), and
 * taken back as this search left it; without others, nothing. */
static void let_go(Tuner *tu, Held *h)
{
    if (!tu->lock)
        return;
    *h = (Held){srch_measurer_timing(tu->ms), tu->runs, tu->dropped};
    pthread_mutex_unlock(tu->lock);
}

static void take_back(Tuner *tu, const Held *h)
{
    if (!tu->lock)
        return;
    pthread_mutex_lock(tu->lock);
    srch_measurer_set_timing(tu->ms, &h->timing);
    tu->runs = h->runs;
    tu->dropped = h->dropped;
}

/* The farm's answer: false (tu failed, with the farm's err) when it cannot
 * go on. */
static bool farm_went_on(Tuner *tu, bool ok, const char *err)
{
    if (!ok && !tu->failed)
        srch_seterr(tu->err, tu->errlen, "%s", err);
    tu->failed |= !ok;
    return !tu->failed;
}

/* The n candidates measured by the farm, or here without one (as
 * srch_measure_batch); false (tu failed, its err set) when the farm cannot
 * go on. */
static bool measure_batch(Tuner *tu, int n, const SrchStage *const *st, const MicroKernel *mk,
                          const int64_t *const *dims, const double *cutoff_ms, SrchTimed *out)
{
    const SrchFarm *f = tu->o->farm;
    if (!f) {
        srch_measure_batch(tu->ms, n, st, mk, dims, cutoff_ms, out);
        return true;
    }
    SrchTiming tm = srch_measurer_timing(tu->ms);
    char err[256];
    Held h;
    let_go(tu, &h);
    bool ok = f->batch(f->self, &tm, n, st, mk, dims, cutoff_ms, out, err, sizeof err);
    take_back(tu, &h);
    return farm_went_on(tu, ok, err);
}

/* srch_measure_turns by the farm, or here without one: 0, or -1 and err
 * when they could not be measured (tu failed too when the farm cannot go
 * on). */
static int measure_turns(Tuner *tu, const SrchStage *st, const MicroKernel *a,
                         const MicroKernel *b, const int64_t *dims, int turns, int runs,
                         SrchTimed t[2], char *err, size_t errlen)
{
    const SrchFarm *f = tu->o->farm;
    if (!f)
        return srch_measure_turns(tu->ms, st, a, b, dims, turns, runs, t, err, errlen);
    char ferr[256];
    Held h;
    let_go(tu, &h);
    bool ok = f->turns(f->self, st, a, b, dims, turns, runs, t, ferr, sizeof ferr);
    take_back(tu, &h);
    if (!farm_went_on(tu, ok, ferr))
        return -1;
    if (t[0].failed)
        srch_seterr(err, errlen, "%s", t[0].err);
    return t[0].failed ? -1 : 0;
}

/* Whether ptxas's reports can be had: ptxas here, and at the farm's
 * devices where one measures. */
static bool ptxas_here(const Tuner *tu)
{
    return srch_ptxas_path() && (!tu->o->farm || tu->o->farm->ptxas);
}

/* ptxas's reports of the n candidates c of stage st that lack one (GPU
 * kernels, with ptxas; n at most a ranking's 2 * BATCH): by the farm,
 * which builds each where it measures it later, or here without one. */
static void ptx_reports(Tuner *tu, const SrchStage *st, int n, Cand *const *c)
{
    const SrchFarm *f = tu->o->farm;
    if (tu->tg.ti.kind != PT_GPU || !ptxas_here(tu))
        return;
    if (!f) {
        for (int i = 0; i < n; i++)
            if (!c[i]->have_ptx)
                c[i]->have_ptx = srch_measure_ptxinfo(tu->ms, st, &c[i]->mk, &c[i]->ptx);
        return;
    }
    IR_ASSERT(n <= 2 * BATCH);
    Cand *lack[2 * BATCH];
    MicroKernel mk[2 * BATCH];
    SrchPtxInfo ptx[2 * BATCH];
    bool have[2 * BATCH];
    int nl = 0;
    for (int i = 0; i < n; i++)
        if (!c[i]->have_ptx)
            lack[nl] = c[i], mk[nl++] = c[i]->mk;
    if (nl == 0)
        return;
    char err[256];
    Held h;
    let_go(tu, &h);
    bool ok = f->ptxinfo(f->self, nl, st, mk, ptx, have, err, sizeof err);
    take_back(tu, &h);
    for (int i = 0; farm_went_on(tu, ok, err) && i < nl; i++)
        lack[i]->have_ptx = have[i], lack[i]->ptx = ptx[i];
}

/* The median times of the n measurements asked for, into ms[k], from the
 * records or measured now (those together, interleaved: srch_measure_batch)
 * and appended; fresh[k] says which. NAN where one cannot be measured (the
 * failure is recorded nowhere; the search goes on without it). */
static void measure_all(Tuner *tu, int n, const Ask *ask, double *ms, bool *fresh)
{
    const TeProgram *p = tu->p;
    int todo[n + 1], ntodo = 0;
    for (int k = 0; k < n; k++) {
        const Ask *a = &ask[k];
        fresh[k] = false;
        ms[k] = NAN;
        /* the joint search and the baseline never share measurements, so
         * each one's records alone rebuild its result */
        const SrchRecord *r = seen(tu, a->st, a->mk, a->s, srch_record_is_baseline(a->kind),
                                   SEEN_FIRST);
        if (r && r->median_ms > 0) /* a time of 0 is no measurement: taken again */
            ms[k] = r->median_ms;
        else
            todo[ntodo++] = k;
    }
    if (ntodo == 0 || tu->failed || stopped(tu))
        return;
    const SrchStage *st[ntodo];
    MicroKernel mk[ntodo];
    const int64_t *dims[ntodo];
    double cut[ntodo];
    SrchTimed *t = malloc(sizeof *t * (size_t)ntodo);
    if (!t)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < ntodo; i++) {
        const Ask *a = &ask[todo[i]];
        st[i] = a->st;
        mk[i] = *a->mk;
        dims[i] = shape_at(tu, a->s);
        cut[i] = isfinite(a->cutoff) ? a->cutoff : 0;
    }
    measure_batch(tu, ntodo, st, mk, dims, cut, t);
    for (int i = 0; i < ntodo && !tu->failed; i++) {
        const Ask *a = &ask[todo[i]];
        if (t[i].failed || t[i].ntimes == 0) {
            if (tu->o->warn) {
                char msg[768], *mks = srch_mk_str(a->mk, a->st->rank);
                snprintf(msg, sizeof msg, "stage %s: %s: not measured: %s", a->st->t->name, mks,
                         t[i].err);
                free(mks);
                tu->o->warn(tu->o->progress_ud, msg);
            }
            continue;
        }
        if (!record(tu, a, &t[i]))
            break;
        int64_t vals[SRCH_MAX_DIMS];
        shape_vals(tu, a->s, vals);
        const SrchRecord *r = srch_records_find(tu->rec, a->st->workload, a->mk, p->ndims,
                                                tu->dim_names, vals);
        fresh[todo[i]] = true;
        ms[todo[i]] = r ? r->median_ms : NAN;
    }
    free(t);
}

/* measure_all of one (st, mk at shape s, ...): its median time or NAN. */
static double measure(Tuner *tu, const SrchStage *st, const MicroKernel *mk, int s,
                      SrchRecordKind kind, int64_t trial, double cutoff, const float *feat,
                      double work, bool *fresh)
{
    Ask a = {st, mk, s, kind, trial, cutoff, feat, work};
    double ms;
    measure_all(tu, 1, &a, &ms, fresh);
    return ms;
}

/* ---- one search ---- */

static double pred_latency(const Search *S, const Cand *c, int i)
{
    double a = srch_adapt(S->st, &c->mk, S->ext[i], NULL);
    return S->flops[i] / (c->f * 1e6 * a);
}

/* Room for n more candidates: pointers into S->c stay valid while no more
 * than that are added. */
static void reserve(Search *S, int n)
{
    if (S->nc + n <= S->capc)
        return;
    while (S->nc + n > S->capc)
        S->capc = S->capc ? 2 * S->capc : 256;
    Cand *c = realloc(S->c, sizeof *S->c * (size_t)S->capc);
    if (!c)
        ir_panic(__FILE__, __LINE__, "out of memory");
    S->c = c;
}

static Cand *add_cand(Search *S, const MicroKernel *mk)
{
    for (int i = 0; i < S->nc; i++)
        if (ir_microkernel_cmp(&S->c[i].mk, mk) == 0)
            return NULL;
    reserve(S, 1);
    Cand *c = &S->c[S->nc++];
    *c = (Cand){.mk = *mk, .probe = -1};
    return c;
}

/* Predicts every unmeasured candidate's throughput. */
static void predict(Search *S)
{
    int n = 0;
    for (int i = 0; i < S->nc; i++)
        n += !S->c[i].measured;
    float *f = malloc(sizeof(float) * SRCH_NFEAT * (size_t)(n + 1));
    double *out = malloc(sizeof(double) * (size_t)(n + 1));
    int k = 0;
    for (int i = 0; i < S->nc; i++)
        if (!S->c[i].measured)
            srch_features(S->st, &S->c[i].mk, S->c[i].have_ptx ? &S->c[i].ptx : NULL,
                          f + (size_t)k++ * SRCH_NFEAT);
    char err[256];
    bool learned = srch_model_trained(S->model) &&
                   srch_model_predict(S->model, f, n, out, err, sizeof err);
    k = 0;
    for (int i = 0; i < S->nc; i++)
        if (!S->c[i].measured) {
            double prior = srch_prior_gflops(S->st, &S->c[i].mk);
            S->c[i].f = learned ? out[k] : prior;
            k++;
        }
    free(f);
    free(out);
}

/* Fitness: the most a candidate would improve on the best so far at any
 * shape (> 1: better somewhere); before any measurement, its best
 * predicted throughput. */
static void score(Search *S)
{
    S->best_pred = 0;
    for (int i = 0; i < S->nc; i++) {
        Cand *c = &S->c[i];
        double fit = 0;
        for (int j = 0; j < S->nsh; j++) {
            double l = pred_latency(S, c, j);
            double v = isfinite(S->best[j]) ? S->best[j] / l : S->flops[j] / (l * 1e6);
            if (v > fit)
                fit = v;
        }
        c->fitness = c->failed ? 0 : fit;
        if (!c->measured && c->f > S->best_pred)
            S->best_pred = c->f;
    }
}

/* The shape whose best measured latency is furthest from the best the
 * candidates predict there; -1 before anything is measured. */
static int worst_shape(const Search *S)
{
    int w = -1;
    double wg = 0;
    for (int j = 0; j < S->nsh; j++) {
        if (!isfinite(S->best[j]))
            continue;
        double bp = INFINITY;
        for (int i = 0; i < S->nc; i++)
            if (!S->c[i].failed) {
                double l = pred_latency(S, &S->c[i], j);
                if (l < bp)
                    bp = l;
            }
        double g = S->best[j] / bp;
        if (g > wg)
            wg = g, w = j;
    }
    return w;
}

static int by_fitness(const void *a, const void *b)
{
    const Cand *x = *(Cand *const *)a, *y = *(Cand *const *)b;
    if (x->fitness != y->fitness)
        return x->fitness > y->fitness ? -1 : 1;
    return ir_microkernel_cmp(&x->mk, &y->mk);
}

/* The population: the POP fittest candidates (measured ones included). */
static int population(Search *S, Cand **pop)
{
    Cand **all = malloc(sizeof *all * (size_t)(S->nc + 1));
    int n = 0;
    for (int i = 0; i < S->nc; i++)
        if (!S->c[i].failed)
            all[n++] = &S->c[i];
    qsort(all, (size_t)n, sizeof *all, by_fitness);
    if (n > POP)
        n = POP;
    memcpy(pop, all, sizeof *pop * (size_t)n);
    free(all);
    return n;
}

/* Where candidate c, at home with adaptation ha there, is run first: -1
 * on the model target, when its run at home is expected to take less than
 * the tune's probe_ms (the best time known there, else the target's peak
 * at that work), or when no shape of 1/PROBE_FLOOR to 1/PROBE_WORK of the
 * home's work has it adapting at least PROBE_ADAPT as well; else the one
 * of the most work. */
static int probe_shape(const Search *S, const Cand *c, int home, double ha)
{
    const Tuner *tu = S->tu;
    if (!runs_take_time(tu))
        return -1;
    double lim = tu->o->probe_ms ? tu->o->probe_ms : SRCH_PROBE_MS, peak = tu->tg.peak_gflops;
    double expect = isfinite(S->best[home]) ? S->best[home]
                    : peak > 0              ? S->flops[home] / (peak * 1e6)
                                            : 0;
    if (lim < 0 || !(expect >= lim))
        return -1;
    int p = -1;
    for (int j = 0; j < S->nsh; j++)
        if (S->flops[j] * PROBE_WORK <= S->flops[home] &&
            S->flops[j] * PROBE_FLOOR >= S->flops[home] && (p < 0 || S->flops[j] > S->flops[p]) &&
            srch_adapt(S->st, &c->mk, S->ext[j], NULL) >= PROBE_ADAPT * ha)
            p = j;
    return p;
}

/* Best times at every shape (nsh), lowered to what c's label gives. */
static void lower(const Search *S, const Cand *c, double *best)
{
    for (int j = 0; j < S->nsh; j++) {
        double l = pred_latency(S, c, j);
        if (!(l >= best[j]))
            best[j] = l;
    }
}

/* The search's ask of candidate c (batch[i]) at shape s, adapting a there. */
static Ask trial_ask(const Search *S, const Cand *c, int i, int s, double a, const float *feat)
{
    return (Ask){S->st, &c->mk, S->sh[s], S->kind, S->done + i, HOPELESS * S->best[s], feat,
                 S->flops[s] / a};
}

/* c measured at shape s (adaptation a there) in ms: its label, the
 * throughput there over that adaptation, for the model and the best
 * times. */
static void take(Search *S, Cand *c, const float *feat, int s, double a, double ms)
{
    c->measured = true;
    c->home = s;
    c->home_ms = ms;
    c->f = S->flops[s] / (ms * 1e6 * a);
    srch_model_add(S->model, feat, c->f);
    double g = S->flops[s] / (ms * 1e6);
    if (g > S->best_meas)
        S->best_meas = g;
    lower(S, c, S->best);
}

/* The candidates of a batch measured together (interleaved), each at the
 * shape where its adaptation is best (its home; ties: the most work); each
 * label is its throughput there over that adaptation. A hopeless one
 * (HOPELESS times slower than the best time the measured candidates'
 * labels give there, which is at most the best measured there: homes
 * differ, so few are measured at the same one) costs one run. One whose
 * run at home is long is run first at a smaller shape (probe_shape), the
 * batch's probes together: where that time, scaled to its home by work,
 * is hopeless against the best times and the batch's probes (a small
 * shape's label is often higher than the home's: up to 2.5x in GPT-2's
 * GEMMs, so probes are the bar of probes, not of home runs), it is its
 * measurement, and its home run (up to seconds on the CPU for a GEMM's
 * worst kernels) is never taken. */
static void measure_cands(Search *S, Cand *const *batch, int n)
{
    Tuner *tu = S->tu;
    Ask ask[BATCH] = {{0}};
    float feat[BATCH][SRCH_NFEAT];
    double ha[BATCH], pa[BATCH], ms[BATCH];
    bool fresh[BATCH], pfresh[BATCH] = {0}; /* pfresh: its probe measured now */
    int at[BATCH], nask = 0;
    IR_ASSERT(n <= BATCH);
    ptx_reports(tu, S->st, n, batch);
    for (int i = 0; i < n; i++) {
        Cand *c = batch[i];
        int home = 0;
        ha[i] = -1;
        for (int j = 0; j < S->nsh; j++) {
            double a = srch_adapt(S->st, &c->mk, S->ext[j], NULL);
            if (a > ha[i] + 1e-12 || (fabs(a - ha[i]) <= 1e-12 && S->flops[j] > S->flops[home]))
                ha[i] = a, home = j;
        }
        srch_features(S->st, &c->mk, c->have_ptx ? &c->ptx : NULL, feat[i]);
        c->home = home;
        c->probe = probe_shape(S, c, home, ha[i]);
        if (c->probe >= 0) {
            int p = c->probe;
            pa[i] = srch_adapt(S->st, &c->mk, S->ext[p], NULL);
            ask[nask] = trial_ask(S, c, i, p, pa[i], feat[i]);
            at[nask++] = i;
        }
    }
    if (nask > 0) {
        measure_all(tu, nask, ask, ms, fresh);
        double *bar = malloc(sizeof *bar * (size_t)S->nsh);
        if (!bar)
            ir_panic(__FILE__, __LINE__, "out of memory");
        memcpy(bar, S->best, sizeof *bar * (size_t)S->nsh);
        for (int k = 0; k < nask; k++) {
            Cand *c = batch[at[k]];
            c->probe_ms = ms[k];
            pfresh[at[k]] = fresh[k];
            if (!(ms[k] > 0)) { /* its home measures it (or fails it) */
                c->probe = -1;
                continue;
            }
            S->probed++;
            c->f = S->flops[c->probe] / (ms[k] * 1e6 * pa[at[k]]);
            lower(S, c, bar);
        }
        for (int k = 0; k < nask; k++) {
            int i = at[k];
            Cand *c = batch[i];
            if (c->probe >= 0 && pred_latency(S, c, c->home) > HOPELESS * bar[c->home]) {
                S->reused += !fresh[k];
                S->hopeless++;
                take(S, c, feat[i], c->probe, pa[i], ms[k]);
            }
        }
        free(bar);
    }
    nask = 0;
    for (int i = 0; i < n; i++) {
        Cand *c = batch[i];
        if (!c->measured) {
            ask[nask] = trial_ask(S, c, i, c->home, ha[i], feat[i]);
            at[nask++] = i;
        }
    }
    if (nask > 0)
        measure_all(tu, nask, ask, ms, fresh);
    for (int k = 0; k < nask; k++) {
        Cand *c = batch[at[k]];
        S->reused += !fresh[k] && !pfresh[at[k]] && !isnan(ms[k]);
        if (ms[k] > 0) {
            take(S, c, feat[at[k]], c->home, ha[at[k]], ms[k]);
        } else {
            c->measured = true;
            c->failed = true;
            c->f = 0;
        }
    }
    S->done += n;
}

static void report(Search *S, int done, int total)
{
    const SrchTuneOpts *o = S->tu->o;
    if (!o->progress)
        return;
    double t = now_s(), el = t - S->tu->t0, ph = t - S->phase_t0;
    double eta = done > 0 ? ph / done * (total - done) : 0;
    SrchProgress pr = {S->st->t->name, S->phase, S->round, done, total, S->best_pred,
                       S->best_meas, el, eta};
    o->progress(o->progress_ud, &pr);
}

static void search_run(Search *S)
{
    Tuner *tu = S->tu;
    Cand **pop = malloc(sizeof *pop * POP);
    /* the target's default schedule's kernels are the first trials: the
     * search starts from known-good kernels and never ends worse than
     * untuned code */
    int nfirst = 0;
    for (int i = 0; i < S->st->ndefaults; i++)
        nfirst += add_cand(S, &S->st->defaults[i]) != NULL;
    /* then one template per regime, measured next */
    MicroKernel tmpl[8];
    int ntmpl = srch_space_templates(S->st, tmpl, 8);
    for (int i = 0; i < ntmpl; i++)
        nfirst += add_cand(S, &tmpl[i]) != NULL;
    /* then, after a warm start, the kernels other workloads' trees chose
     * (those legal here), up to half a batch: the search keeps most of its
     * trials for this workload */
    for (int i = 0, nw = 0; i < tu->nwarm_mk && nw < BATCH / 2; i++) {
        MicroKernel mk = tu->warm_mk[i].mk;
        bool fits = tu->warm_mk[i].rank == S->st->rank && (mk.rchunk > 0) == S->st->reduction;
        if (fits && srch_space_adopt(S->st, &mk) && add_cand(S, &mk))
            nfirst++, nw++;
    }
    for (int tries = 0; S->nc < POP && tries < 20 * POP; tries++) {
        MicroKernel mk = srch_space_sample(S->st, &S->rng);
        add_cand(S, &mk);
    }
    /* in batches (S->c is not reallocated before the search's loop) */
    for (int i = 0; i < nfirst && S->done < S->trials && !tu->failed;) {
        Cand *first[BATCH];
        int nb = 0;
        while (nb < BATCH && i < nfirst && S->done + nb < S->trials)
            first[nb++] = &S->c[i++];
        measure_cands(S, first, nb);
    }
    while (S->done < S->trials && !tu->failed) {
        char err[256];
        if (!srch_model_train(S->model, err, sizeof err) && tu->o->warn)
            tu->o->warn(tu->o->progress_ud, err);
        predict(S);
        score(S);
        /* pop (and later un and batch) point into S->c: no reallocation
         * while they are in use */
        reserve(S, CHILDREN + 4 * BATCH);
        int npop = population(S, pop);
        int w = worst_shape(S);
        /* children: tournament parents, half the mutations aimed at w */
        for (int i = 0; i < CHILDREN && npop > 0; i++) {
            Cand *a = pop[srch_rand(&S->rng) % (uint64_t)npop];
            Cand *b = pop[srch_rand(&S->rng) % (uint64_t)npop];
            Cand *par = a->fitness >= b->fitness ? a : b;
            int aim = w >= 0 && srch_rand(&S->rng) % 2 ? w : (int)(srch_rand(&S->rng) % (uint64_t)S->nsh);
            bool aimed = srch_rand(&S->rng) % 4 != 0;
            MicroKernel mk = srch_space_mutate(S->st, &par->mk, aimed ? S->ext[aim] : NULL, &S->rng);
            add_cand(S, &mk);
        }
        predict(S);
        score(S);
        /* the batch: the best predicted, and some at random */
        int want = S->trials - S->done < BATCH ? S->trials - S->done : BATCH;
        int nrand = (int)(EPSILON * want + 0.5);
        Cand **un = malloc(sizeof *un * (size_t)(S->nc + 1));
        int nun = 0;
        for (int i = 0; i < S->nc; i++)
            if (!S->c[i].measured)
                un[nun++] = &S->c[i];
        if (nun == 0) { /* the space near the population is exhausted */
            for (int t = 0; t < 4 * BATCH; t++) {
                MicroKernel mk = srch_space_sample(S->st, &S->rng);
                Cand *c = add_cand(S, &mk);
                if (c)
                    un[nun++] = c, un = realloc(un, sizeof *un * (size_t)(S->nc + 1));
            }
            if (nun == 0) {
                free(un);
                break;
            }
            predict(S);
            score(S);
        }
        qsort(un, (size_t)nun, sizeof *un, by_fitness);
        if (tu->tg.ti.kind == PT_GPU && ptxas_here(tu) && srch_model_trained(S->model)) {
            /* the leading candidates with ptxas's registers and spills
             * known, predicted and ranked again */
            ptx_reports(tu, S->st, nun < 2 * want ? nun : 2 * want, un);
            predict(S);
            score(S);
            qsort(un, (size_t)nun, sizeof *un, by_fitness);
        }
        int ntop = want - nrand < nun ? want - nrand : nun;
        Cand **batch = malloc(sizeof *batch * (size_t)(want + 1));
        int nb = 0;
        for (int i = 0; i < ntop; i++)
            batch[nb++] = un[i];
        for (int i = ntop; nb < want && i < nun; i++) {
            int j = i + (int)(srch_rand(&S->rng) % (uint64_t)(nun - i));
            Cand *t = un[i];
            un[i] = un[j];
            un[j] = t;
            batch[nb++] = un[i];
        }
        /* pointers into S->c stay valid: nothing is added while measuring */
        if (!tu->failed)
            measure_cands(S, batch, nb);
        free(batch);
        free(un);
        S->round++;
        report(S, S->offset + S->done, S->grand_total ? S->grand_total : S->trials);
    }
    free(pop);
}

static void search_init(Search *S, Tuner *tu, const SrchStage *st, const int *sh, int nsh,
                        SrchRecordKind kind, uint64_t seed)
{
    memset(S, 0, sizeof *S);
    S->tu = tu;
    S->st = st;
    S->kind = kind;
    S->phase = kind == RK_BASELINE ? "baseline" : "search";
    S->sh = sh;
    S->nsh = nsh;
    S->ext = calloc((size_t)nsh, sizeof *S->ext);
    S->flops = calloc((size_t)nsh, sizeof *S->flops);
    S->best = calloc((size_t)nsh, sizeof *S->best);
    for (int j = 0; j < nsh; j++) {
        srch_stage_extents(st, shape_at(tu, sh[j]), S->ext[j]);
        S->flops[j] = srch_stage_flops(st, S->ext[j]);
        S->best[j] = INFINITY;
    }
    S->model = srch_model_new(seed, NULL, 0);
    for (int i = 0; i < tu->nwarm; i++)
        srch_model_add(S->model, tu->warm_feat + (size_t)i * SRCH_NFEAT, tu->warm_label[i]);
    S->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    S->trials = tu->o->trials;
    S->phase_t0 = now_s();
}

static void search_free(Search *S)
{
    free(S->c);
    free(S->ext);
    free(S->flops);
    free(S->best);
    free(S->lat);
    free(S->logdims);
    for (int i = 0; S->mpts && i < S->nc; i++)
        free(S->mpts[i]);
    free(S->mpts);
    free(S->nmpts);
    srch_model_free(S->model);
}

/* ---- selection and the tree ---- */

typedef struct Pick {
    int idx;
    double lat;
} Pick;

static int by_lat(const void *a, const void *b)
{
    const Pick *x = a, *y = b;
    return x->lat < y->lat ? -1 : x->lat > y->lat ? 1 : x->idx - y->idx;
}

/* The measured median of mk at shape s in the joint search's records, as
 * the selection sees them after its turns, or NAN. */
static double known(Tuner *tu, const SrchStage *st, const MicroKernel *mk, int s)
{
    const SrchRecord *r = seen(tu, st, mk, s, false, SEEN_SELECTION);
    return r && r->median_ms > 0 ? r->median_ms : NAN;
}

/* Whether the selection measured mk at shape s in turns (here, or in the
 * run this one resumes). */
static bool select_turned(Tuner *tu, const SrchStage *st, const MicroKernel *mk, int s)
{
    const SrchRecord *r = seen(tu, st, mk, s, false, SEEN_SELECTION);
    return r && r->kind == RK_TURNS;
}

/* Close contenders a and b at shape s measured again in turns; each gets a
 * record of its runs of all turns (kind: RK_TURNS for the selection,
 * RK_CHECK or RK_BASELINE_CHECK for the check), which later lookups find.
 * False when they could not be measured (both keep their first
 * measurement). est_ms, the slower one's time there as known, sets the
 * turns: SELECT_TURNS of two runs, fewer where those would take more than
 * TURNS_BUDGET_MS a kernel (a long run is its own average; at least two
 * turns of one run). */
static bool remeasure(Tuner *tu, const SrchStage *st, const MicroKernel *a, const MicroKernel *b,
                      int s, double est_ms, SrchRecordKind kind, SrchStageResult *res)
{
    SrchTimed t[2];
    char err[512];
    int runs = 2, turns = SELECT_TURNS;
    if (est_ms * runs * turns > TURNS_BUDGET_MS) {
        double fit = TURNS_BUDGET_MS / est_ms; /* runs within the budget, NAN: none known */
        runs = 1;
        turns = fit >= 2 * SELECT_TURNS ? 2 * SELECT_TURNS : fit > 2 ? (int)fit : 2;
    }
    if (stopped(tu) ||
        measure_turns(tu, st, a, b, shape_at(tu, s), turns, runs, t, err, sizeof err) != 0)
        return false;
    const MicroKernel *mk[2] = {a, b};
    for (int k = 0; k < 2 && !tu->failed; k++) {
        Ask ask = {st, mk[k], s, kind, 0, INFINITY, NULL, 0};
        record(tu, &ask, &t[k]);
        /* the selection's count; the check's is res->checked */
        res->select_measured += kind == RK_TURNS;
        res->select_turns += kind == RK_TURNS;
    }
    return !tu->failed;
}

/* The shape nearest to j (in log dims) where candidate i was measured, and
 * that distance; -1 when none. */
static int nearest(const Search *S, int i, int j, double *dist)
{
    const double *row = S->lat + (size_t)i * (size_t)S->nsh;
    int nd = S->tu->p->ndims, near = -1;
    *dist = INFINITY;
    for (int m = 0; m < S->nmpts[i]; m++) {
        int k = S->mpts[i][m];
        if (isnan(row[k]))
            continue;
        double d = 0;
        for (int x = 0; x < nd; x++)
            d += fabs(S->logdims[(size_t)j * (size_t)nd + (size_t)x] -
                      S->logdims[(size_t)k * (size_t)nd + (size_t)x]);
        if (d < *dist || (d == *dist && k < near))
            *dist = d, near = k;
    }
    return near;
}

/* Candidate i's time at shape j is v (NAN: unknown). */
static void set_lat(Search *S, int i, int j, double v)
{
    double *at = &S->lat[(size_t)i * (size_t)S->nsh + (size_t)j];
    if (isnan(*at) && !isnan(v)) {
        int *l = realloc(S->mpts[i], sizeof *l * (size_t)(S->nmpts[i] + 1));
        if (!l)
            ir_panic(__FILE__, __LINE__, "out of memory");
        S->mpts[i] = l;
        l[S->nmpts[i]++] = j;
    }
    *at = v;
}

/* Candidate i's time at shape j: measured, else predicted from its
 * measurement at the nearest shape where it has one (scaled by the work
 * the shape adaptation says each takes), else from its label. */
static double lat_at(const Search *S, int i, int j)
{
    double d;
    int k = nearest(S, i, j, &d);
    if (k == j)
        return S->lat[(size_t)i * (size_t)S->nsh + (size_t)j];
    const Cand *c = &S->c[i];
    double pj = pred_latency(S, c, j);
    return k < 0 ? pj : S->lat[(size_t)i * (size_t)S->nsh + (size_t)k] * pj / pred_latency(S, c, k);
}

/* Whether candidate i's time at shape j is measured, or scaled from a
 * measurement at a shape within SELECT_REACH of j in every dim together. */
static bool calibrated(const Search *S, int i, int j)
{
    double d;
    return nearest(S, i, j, &d) >= 0 && d <= log(SELECT_REACH);
}

/* S->lat: each candidate's times where the search measured it (at its home
 * shape, and where it was probed: a resumed run sees the same, whatever the
 * selection recorded later); the selection adds its measurements as it
 * goes. */
static void select_init(Search *S)
{
    const TeProgram *p = S->tu->p;
    S->lat = malloc(sizeof *S->lat * ((size_t)S->nc * (size_t)S->nsh + 1));
    S->logdims = malloc(sizeof *S->logdims * ((size_t)S->nsh * (size_t)p->ndims + 1));
    for (int j = 0; j < S->nsh; j++)
        for (int x = 0; x < p->ndims; x++)
            S->logdims[(size_t)j * (size_t)p->ndims + (size_t)x] =
                log((double)shape_at(S->tu, S->sh[j])[p->dims[x]->pos]);
    for (size_t i = 0; i < (size_t)S->nc * (size_t)S->nsh; i++)
        S->lat[i] = NAN;
    S->mpts = calloc((size_t)S->nc + 1, sizeof *S->mpts);
    S->nmpts = calloc((size_t)S->nc + 1, sizeof *S->nmpts);
    for (int i = 0; i < S->nc; i++) {
        const Cand *c = &S->c[i];
        if (!c->measured || c->failed)
            continue;
        set_lat(S, i, c->home, c->home_ms);
        if (c->probe >= 0 && c->probe != c->home)
            set_lat(S, i, c->probe, c->probe_ms);
    }
}

/* The selection, from what the search measured: at every shape the
 * candidates ranked by their time there (lat_at). The next ones within
 * SELECT_NEAR of the best (at most topk in all) are near ties: then all are
 * measured there, and when the two fastest measured are within
 * SELECT_CLOSE of each other, they are measured again in turns. Each is
 * measured only when not calibrated there (measured there or close by):
 * a calibrated one's time stands. A resumed or repeated run goes the same
 * way: each step sees the records as the first run's step saw them (the
 * first measurement at a shape, then the turns after it). When what was measured
 * there is slower than the next candidates' estimates by more than
 * SELECT_SURPRISE (the estimate of a kernel far from where it was measured
 * can be far off), those are measured too, up to SELECT_SURPRISES of them. */
static void select_joint(Search *S, SrchStageResult *res)
{
    Tuner *tu = S->tu;
    int topk = tu->o->topk > 0 ? tu->o->topk : 2;
    Pick *pk = malloc(sizeof *pk * (size_t)(S->nc + 1));
    S->phase = "select";
    S->phase_t0 = now_s();
    select_init(S);
    /* many points, a few candidates each: shorter repeats */
    srch_measurer_set_timing(tu->ms, &(SrchTiming){.budget_ms = SELECT_BUDGET_MS});
    for (int j = 0; j < S->nsh && !tu->failed; j++) {
        int n = 0;
        for (int i = 0; i < S->nc; i++)
            if (S->c[i].measured && !S->c[i].failed)
                pk[n++] = (Pick){i, lat_at(S, i, j)};
        qsort(pk, (size_t)n, sizeof *pk, by_lat);
        int want = n < 1 ? n : 1;
        while (want < n && want < topk && pk[want].lat <= SELECT_NEAR * pk[0].lat)
            want++;
        Pick got[want + SELECT_SURPRISES + 1];
        int ngot = 0, nsel = 0; /* measured here by a selection, this one or the one resumed */
        double best = INFINITY;
        for (int k = 0; k < n && !tu->failed; k++) {
            /* past the near ties, up to SELECT_SURPRISES more while the best
             * measured here is clearly slower than the next one's estimate */
            bool surprise = isfinite(best) && pk[k].lat * SELECT_SURPRISE < best;
            if (k >= want && (k - want >= SELECT_SURPRISES || !surprise))
                break;
            Cand *c = &S->c[pk[k].idx];
            if (calibrated(S, pk[k].idx, j)) { /* measured here or close by: its time stands */
                got[ngot++] = pk[k];
                if (pk[k].lat < best)
                    best = pk[k].lat;
                continue;
            }
            bool fresh;
            double ms = measure(tu, S->st, &c->mk, S->sh[j], RK_SELECT, S->done, 3 * best, NULL, 0,
                                &fresh);
            res->select_measured += fresh;
            res->select_reused += !fresh && !isnan(ms);
            nsel += ms > 0;
            if (ms > 0) {
                got[ngot++] = (Pick){pk[k].idx, ms};
                set_lat(S, pk[k].idx, j, ms);
            }
            if (ms < best)
                best = ms;
        }
        qsort(got, (size_t)ngot, sizeof *got, by_lat);
        /* the model's times are exact: nothing to measure again. Turns the
         * records hold (of the run resumed) are taken as they are */
        const MicroKernel *a = ngot >= 2 ? &S->c[got[0].idx].mk : NULL,
                          *b = ngot >= 2 ? &S->c[got[1].idx].mk : NULL;
        if (ngot >= 2 && nsel > 0 && got[1].lat <= SELECT_CLOSE * got[0].lat &&
            runs_take_time(tu)) {
            if (select_turned(tu, S->st, a, S->sh[j]) && select_turned(tu, S->st, b, S->sh[j]))
                res->select_reused += 2;
            else
                remeasure(tu, S->st, a, b, S->sh[j], got[1].lat, RK_TURNS, res);
            for (int k = 0; k < 2; k++)
                set_lat(S, got[k].idx, j, known(tu, S->st, &S->c[got[k].idx].mk, S->sh[j]));
        }
        if ((j + 1) % 16 == 0 || j + 1 == S->nsh)
            report(S, j + 1, S->nsh);
    }
    srch_measurer_set_timing(tu->ms, &(SrchTiming){.budget_ms = SEARCH_BUDGET_MS});
    free(pk);
}

/* The oracle or (freed) completed with the search's shapes it lacks and
 * the calibrated times it lacks (lat_at where calibrated), so that a time
 * measured at one shape serves its neighbours; the rest stay unknown,
 * which the fit takes as the shape's worst. *known gets which costs are
 * known (malloc'd, n x nk). */
static SrchOracle *complete_oracle(const Search *S, SrchOracle *or, bool **known)
{
    int n = S->nsh, nk = or->nk, nd = or->ndims;
    SrchOracle *o = calloc(1, sizeof *o);
    *o = (SrchOracle){n, nd, nk, NULL, NULL, or->kernels, or->nspatial, NULL, NULL};
    o->dims = malloc(sizeof *o->dims * ((size_t)n * (size_t)nd + 1));
    o->shape_index = malloc(sizeof *o->shape_index * (size_t)(n + 1));
    o->cost = malloc(sizeof *o->cost * ((size_t)n * (size_t)nk + 1));
    o->best = malloc(sizeof *o->best * (size_t)(n + 1));
    *known = calloc((size_t)n * (size_t)nk + 1, 1);
    int *row = malloc(sizeof *row * (size_t)(n + 1)), *cand = malloc(sizeof *cand * (size_t)(nk + 1));
    for (int j = 0; j < n; j++)
        row[j] = -1;
    for (int r = 0; r < or->n; r++)
        if (or->shape_index[r] >= 0)
            row[or->shape_index[r]] = r; /* the joint search's shapes are all the tuner's */
    for (int k = 0; k < nk; k++) {
        cand[k] = -1;
        for (int i = 0; i < S->nc && cand[k] < 0; i++)
            if (S->c[i].measured && !S->c[i].failed &&
                ir_microkernel_cmp(&S->c[i].mk, &or->kernels[k]) == 0)
                cand[k] = i;
    }
    for (int j = 0; j < n; j++) {
        o->shape_index[j] = S->sh[j];
        for (int x = 0; x < nd; x++)
            o->dims[(size_t)j * (size_t)nd + (size_t)x] =
                shape_at(S->tu, S->sh[j])[S->tu->p->dims[x]->pos];
        double best = INFINITY;
        for (int k = 0; k < nk; k++) {
            size_t at = (size_t)j * (size_t)nk + (size_t)k;
            double c = row[j] >= 0 ? or->cost[(size_t)row[j] * (size_t)nk + (size_t)k] : NAN;
            if (isnan(c) && cand[k] >= 0 && calibrated(S, cand[k], j))
                c = lat_at(S, cand[k], j);
            (*known)[at] = !isnan(c);
            o->cost[at] = c;
            if (c < best)
                best = c;
        }
        o->best[j] = best;
    }
    free(row);
    free(cand);
    or->kernels = NULL;
    srch_oracle_free(or);
    return o;
}

/* The bytes of spill stores and loads ptxas reports over the kernels of
 * stage st with mk; 0 when unknown (the CPU, no ptxas). */
static int spill_bytes(Tuner *tu, const SrchStage *st, const MicroKernel *mk)
{
    Cand c = {.mk = *mk}, *cp = &c;
    ptx_reports(tu, st, 1, &cp);
    return c.have_ptx ? c.ptx.stage_spill_bytes : 0;
}

/* The index of mk among or's kernels (the tree fitted to or uses only
 * those). */
static int oracle_kernel(const SrchOracle *or, const MicroKernel *mk)
{
    int k = 0;
    while (k < or->nk && ir_microkernel_cmp(&or->kernels[k], mk) != 0)
        k++;
    IR_ASSERT(k < or->nk);
    return k;
}

/* The tree fitted to or; on the GPU with ptxas, each kernel that spills
 * and that a fit chose is counted SPILL_MARGIN slower at every shape and
 * the tree fitted again, until every kernel it uses is known (each pass
 * marks one more, so at most or->nk passes; only chosen kernels go
 * through ptxas), and res->spill gets each tree kernel's spills (NULL
 * elsewhere). or's costs are as they were on return. */
static SrchTree *fit_avoiding_spills(Tuner *tu, const SrchStage *st, SrchOracle *or, int depth,
                                     SrchStageResult *res)
{
    SrchTree *t = srch_fit_oracle(tu->p, or, depth, &res->score, tu->err, tu->errlen);
    free(res->spill);
    res->spill = NULL;
    if (!t || tu->tg.ti.kind != PT_GPU || !ptxas_here(tu))
        return t;
    size_t ncost = (size_t)or->n * (size_t)or->nk;
    int *spill = malloc(sizeof *spill * (size_t)(or->nk + 1));
    double *cost = malloc(sizeof *cost * (ncost + 1)), *best = malloc(sizeof *best * (size_t)(or->n + 1));
    memcpy(cost, or->cost, sizeof *cost * ncost);
    memcpy(best, or->best, sizeof *best * (size_t)or->n);
    for (int k = 0; k < or->nk; k++)
        spill[k] = -1; /* not asked */
    for (bool again = true; t && again;) {
        again = false;
        for (int i = 0; i < t->nkernels; i++) {
            int k = oracle_kernel(or, &t->kernels[i]);
            if (spill[k] >= 0)
                continue;
            if ((spill[k] = spill_bytes(tu, st, &or->kernels[k])) == 0)
                continue;
            again = true;
            for (int j = 0; j < or->n; j++) {
                double *c = &or->cost[(size_t)j * (size_t)or->nk + (size_t)k];
                *c *= SPILL_MARGIN;
                or->best[j] = INFINITY;
                for (int m = 0; m < or->nk; m++)
                    if (or->cost[(size_t)j * (size_t)or->nk + (size_t)m] < or->best[j])
                        or->best[j] = or->cost[(size_t)j * (size_t)or->nk + (size_t)m];
            }
        }
        if (again) {
            srch_tree_free(t);
            t = srch_fit_oracle(tu->p, or, depth, &res->score, tu->err, tu->errlen);
        }
    }
    memcpy(or->cost, cost, sizeof *cost * ncost);
    memcpy(or->best, best, sizeof *best * (size_t)or->n);
    res->spill = t ? malloc(sizeof *res->spill * (size_t)(t->nkernels + 1)) : NULL;
    for (int i = 0; t && i < t->nkernels; i++) /* every one asked: the loop ended */
        res->spill[i] = spill[oracle_kernel(or, &t->kernels[i])];
    free(spill);
    free(cost);
    free(best);
    return t;
}

/* Whether the latest record of st with mk at shape s, of the class of
 * kind, is of turns. */
static bool turned(Tuner *tu, const SrchStage *st, const MicroKernel *mk, int s,
                   SrchRecordKind kind)
{
    const SrchRecord *r = seen(tu, st, mk, s, srch_record_is_baseline(kind), SEEN_LATEST);
    return r && srch_record_is_turns(r->kind);
}

/* The final check of the choices: at each of or's shape points of this
 * tune, the kernel the tree picks (picks[j]) and the next best known
 * there, when within CHECK_CLOSE of it and not both already measured in
 * turns there (each against any other), measured again in turns (kind:
 * the check of the joint search's class or the baseline's), so a time
 * taken in a slow stretch cannot decide the choice. The number of pairs
 * measured. */
static int check_choices(Tuner *tu, const SrchStage *st, SrchRecordKind kind,
                         const SrchOracle *or, const bool *known, const int *picks,
                         SrchStageResult *res)
{
    SrchRecordKind turns = srch_record_is_baseline(kind) ? RK_BASELINE_CHECK : RK_CHECK;
    int n = 0;
    for (int j = 0; j < or->n && !tu->failed; j++) {
        int k = picks[j], s = or->shape_index[j], r = -1;
        const double *cost = or->cost + (size_t)j * (size_t)or->nk;
        const bool *kn = known + (size_t)j * (size_t)or->nk;
        if (s < 0 || !kn[k])
            continue;
        for (int m = 0; m < or->nk; m++)
            if (m != k && kn[m] && (r < 0 || cost[m] < cost[r]))
                r = m;
        if (r < 0 || cost[r] > CHECK_CLOSE * cost[k] ||
            (turned(tu, st, &or->kernels[k], s, kind) && turned(tu, st, &or->kernels[r], s, kind)))
            continue;
        n += remeasure(tu, st, &or->kernels[k], &or->kernels[r], s, fmax(cost[k], cost[r]), turns,
                       res);
    }
    return n;
}

/* The tree a finished tune of st stored, in or's kernel numbering, when
 * nothing was measured since and it picks a kernel measured at each of
 * or's points; NULL otherwise. A repeated tune that measured nothing new
 * keeps it (a fit and a check would see the check's records earlier than
 * the first run did, and could go another way). */
static SrchTree *tree_that_stands(Tuner *tu, const SrchStage *st, const SrchOracle *or,
                                  const bool *known, SrchStageResult *res)
{
    const SrchTree *s = srch_records_tree(tu->rec, st->workload);
    if (!s || !srch_records_tree_current(tu->rec, st->workload) || s->ndims != tu->p->ndims ||
        s->nspatial != or->nspatial)
        return NULL;
    for (int i = 0; i < s->ndims; i++)
        if (strcmp(s->dim_names[i], tu->p->dims[i]->name) != 0)
            return NULL;
    SrchTree *t = srch_tree_renumber(s, or->nk, or->kernels);
    for (int j = 0; t && j < or->n; j++)
        if (!known[(size_t)j * (size_t)or->nk +
                   (size_t)srch_tree_predict(t, or->dims + (size_t)j * (size_t)or->ndims)]) {
            srch_tree_free(t);
            t = NULL;
        }
    if (!t)
        return NULL;
    res->score = srch_oracle_score(tu->p, or, t);
    free(res->spill);
    res->spill = NULL;
    if (tu->tg.ti.kind == PT_GPU && ptxas_here(tu)) {
        res->spill = malloc(sizeof *res->spill * (size_t)(t->nkernels + 1));
        for (int k = 0; k < t->nkernels; k++)
            res->spill[k] = -1; /* not asked: no leaf picks it */
        for (int i = 0; i < t->nnodes; i++)
            if (t->nodes[i].kind == TN_LEAF && res->spill[t->nodes[i].kernel] < 0)
                res->spill[t->nodes[i].kernel] = spill_bytes(tu, st, &t->kernels[t->nodes[i].kernel]);
    }
    return t;
}

static void stage_fit(Tuner *tu, const SrchStage *st, SrchRecordKind kind, const Search *S,
                      SrchStageResult *res)
{
    int depth = tu->o->tree_depth > 0 ? tu->o->tree_depth : 4;
    enum { PASSES = 4 };
    /* a repeat of a finished tune: its tree stands */
    bool repeat = S && !tu->refit && res->measured == 0 && res->select_measured == 0, stood = false;
    /* the picks at the first check, by the tuner's shape index (zeroed: a
     * point the first check lacked counts as changed) */
    MicroKernel *before = calloc((size_t)tu->nshapes + 1, sizeof *before);
    int fills = 0, rounds = 0; /* passes that measured missing picks; checks */
    while (!tu->failed) {
        SrchOracle *or = srch_oracle_collect(tu->rec, st->workload, kind == RK_BASELINE,
                                             st->atomic_ok, tu->p,
                                             st->t, &tu->tg.ti, tu->shapes, tu->nshapes);
        if (!or || or->n == 0) {
            srch_seterr(tu->err, tu->errlen, "stage %s: nothing could be measured", st->t->name);
            tu->failed = true;
            srch_oracle_free(or);
            break;
        }
        bool *known = NULL;
        if (S) {
            or = complete_oracle(S, or, &known);
        } else {
            size_t ncost = (size_t)or->n * (size_t)or->nk;
            known = malloc(ncost + 1);
            for (size_t i = 0; i < ncost; i++)
                known[i] = !isnan(or->cost[i]);
        }
        srch_tree_free(res->tree);
        res->tree = repeat ? tree_that_stands(tu, st, or, known, res) : NULL;
        stood = res->tree != NULL;
        repeat = false;
        if (!stood)
            res->tree = fit_avoiding_spills(tu, st, or, depth, res);
        if (!res->tree) {
            tu->failed = true;
            srch_oracle_free(or);
            free(known);
            break;
        }
        /* measure what the tree picks where its time is not known, then
         * refit; the latencies reported are of known times */
        int missing = 0;
        double lg = 0, lo = 0;
        int *picks = malloc(sizeof *picks * (size_t)(or->n + 1));
        for (int j = 0; j < or->n; j++) {
            int k = picks[j] = srch_tree_predict(res->tree, or->dims + (size_t)j * (size_t)or->ndims);
            size_t at = (size_t)j * (size_t)or->nk + (size_t)k;
            /* the least known time (the known costs are the non-NAN ones) */
            double best = or->best[j];
            if (!known[at] && fills < PASSES - 1) {
                bool fresh;
                measure(tu, st, &or->kernels[k], or->shape_index[j], kind, 0, INFINITY, NULL, 0,
                        &fresh);
                res->select_measured += fresh;
                missing++;
            }
            lg += log(known[at] ? or->cost[at] : best);
            lo += log(best);
            if (or->shape_index[j] >= 0)
                res->shape_ms[or->shape_index[j]] = known[at] ? or->cost[at] : best;
        }
        res->nshapes = or->n;
        res->geomean_ms = exp(lg / or->n);
        res->oracle_geomean_ms = exp(lo / or->n);
        fills += missing > 0;
        /* all known: the choices checked (not the model's: its times are
         * exact), then fitted again, until a check finds every pick checked
         * (then a rerun fits the same tree and measures nothing; when the
         * CHECK_ROUNDS rounds run out first, a rerun may check again), at
         * most CHECK_ROUNDS times; how many picks differ from the first
         * check's */
        bool check = missing == 0 && rounds < CHECK_ROUNDS && runs_take_time(tu) && !stood &&
                     !tu->contest;
        if (rounds > 0)
            res->check_changed = 0;
        for (int j = 0; j < or->n && (check || rounds > 0); j++) {
            int s = or->shape_index[j];
            const MicroKernel *mk = &or->kernels[picks[j]];
            if (s >= 0 && rounds == 0)
                before[s] = *mk;
            else if (s >= 0)
                res->check_changed += ir_microkernel_cmp(&before[s], mk) != 0;
        }
        if (check) {
            rounds++;
            missing = check_choices(tu, st, kind, or, known, picks, res);
            res->checked += missing; /* fitted again when any was measured */
        }
        srch_oracle_free(or);
        free(known);
        free(picks);
        if (missing == 0)
            break;
    }
    free(before);
    /* the tree goes with the records: a compile reads it back, not refits */
    if (!tu->failed && res->tree && !stood &&
        !srch_records_append_tree(tu->rec, st->workload, tu->tg.name, tu->arch, st->t->name,
                                  res->tree, tu->err, tu->errlen))
        tu->failed = true;
}

static void tune_stage(Tuner *tu, const SrchStage *st, SrchStageResult *res)
{
    res->stage = st->t->name;
    /* NAN until a fit sets it; each pass of stage_fit rewrites every point
     * the last one set (its oracle only gains points) */
    res->shape_ms = malloc(sizeof *res->shape_ms * (size_t)(tu->nshapes + 1));
    if (!res->shape_ms)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int j = 0; j < tu->nshapes; j++)
        res->shape_ms[j] = NAN;
    int *all = malloc(sizeof *all * (size_t)tu->nshapes);
    for (int j = 0; j < tu->nshapes; j++)
        all[j] = j;
    int64_t runs0 = tu->runs, dropped0 = tu->dropped;
    /* by workload: stages that compute the same thing search alike, so the
     * second finds everything in the records */
    uint64_t seed = tu->o->seed ^ rt_rng_hash(st->workload);
    if (!tu->o->per_shape) {
        Search S;
        double t0 = now_s();
        search_init(&S, tu, st, all, tu->nshapes, RK_TRIAL, seed);
        search_run(&S);
        res->measured = S.done - S.reused;
        res->reused = S.reused;
        res->probed = S.probed;
        res->probe_hopeless = S.hopeless;
        double t1 = now_s();
        if (!tu->failed)
            select_joint(&S, res);
        double t2 = now_s();
        if (!tu->failed)
            stage_fit(tu, st, RK_SELECT, &S, res);
        search_free(&S);
        res->search_s = t1 - t0;
        res->select_s = t2 - t1;
        res->fit_s = now_s() - t2;
    } else {
        double t0 = now_s();
        for (int j = 0; j < tu->nshapes && !tu->failed; j++) {
            Search S;
            search_init(&S, tu, st, &all[j], 1, RK_BASELINE, seed + (uint64_t)j * 7919);
            S.phase_t0 = t0;
            int64_t off = (int64_t)j * tu->o->trials, tot = (int64_t)tu->nshapes * tu->o->trials;
            S.offset = off > INT32_MAX ? INT32_MAX : (int)off; /* progress counters only */
            S.grand_total = tot > INT32_MAX ? INT32_MAX : (int)tot;
            search_run(&S);
            res->measured += S.done - S.reused;
            res->reused += S.reused;
            search_free(&S);
        }
        double t1 = now_s();
        if (!tu->failed)
            stage_fit(tu, st, RK_BASELINE, NULL, res);
        res->search_s = t1 - t0;
        res->fit_s = now_s() - t1;
    }
    res->runs = tu->runs - runs0;
    res->dropped = tu->dropped - dropped0;
    free(all);
}

/* ---- the whole workload ---- */

/* The stages the search tunes: every computed, materialised tensor, with
 * its workload fingerprint. */
static int stages_of(Tuner *tu, SrchStage **out)
{
    TeProgram *p = tu->p;
    int nt = p->ntensors ? p->ntensors : 1;
    Expr **bodies = IR_NEWN(p->arena, Expr *, nt);
    bool *mat = IR_NEWN(p->arena, bool, nt);
    pass_inline(p, bodies, mat);
    SrchStage *st = calloc((size_t)nt, sizeof *st);
    int n = 0;
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT || !mat[i])
            continue;
        SrchStage *s = &st[n++];
        s->t = t;
        s->body = bodies[i];
        s->rank = t->rank;
        s->reduction = pass_stage_has_reduction(bodies[i]);
        s->tg = &tu->tg;
        StageSchedule ds = pass_default_schedule(p, t, bodies[i], &tu->tg.ti);
        s->defaults = ds.variants;
        s->ndefaults = ds.nvariants;
        s->vec_reduce = ds.variants[0].vaxis == MK_VEC_REDUCE;
        s->workload = srch_fingerprint(p, t, mat, tu->tg.name, tu->arch);
        s->atomic_ok = tu->o->atomic_split && tu->tg.ti.kind == PT_GPU &&
                       pass_atomic_split_ok(bodies[i]);
        s->pack = tu->tg.ti.kind == PT_CPU ? pass_pack_kind(p->ctx, t, bodies[i]) : PASS_PACK_NONE;
        for (int j = 0; j < tu->nshapes; j++) {
            int64_t ext[MK_MAX_AXES + 1];
            srch_stage_extents(s, shape_at(tu, j), ext);
            for (int a = 0; a <= s->rank; a++)
                if (ext[a] > s->ext_max[a])
                    s->ext_max[a] = ext[a];
        }
    }
    *out = st;
    return n;
}

/* Reports the warnings of the records as just opened (damaged lines,
 * and the file's lines not read), each once however often the records
 * are opened (once per fusion tuned). */
static void warn_records(Tuner *tu)
{
    int nc = srch_records_ncorrupt(tu->rec);
    tu->ncorrupt = nc > tu->ncorrupt ? nc : tu->ncorrupt;
    for (int i = 0; i < srch_records_nwarnings(tu->rec); i++) {
        const SrchWarning *w = srch_records_warning(tu->rec, i);
        /* by text: the file's warnings share line 0 */
        uint64_t h = dc_fnv1a_str(w->msg);
        bool seen = false;
        for (int j = 0; j < tu->nwarned && !seen; j++) /* at most SRCH_MAX_WARNINGS a file */
            seen = tu->warned[j] == h;
        if (seen)
            continue;
        uint64_t *n = realloc(tu->warned, sizeof *n * (size_t)(tu->nwarned + 1));
        if (!n)
            ir_panic(__FILE__, __LINE__, "out of memory");
        tu->warned = n;
        tu->warned[tu->nwarned++] = h;
        if (tu->o->warn)
            tu->o->warn(tu->o->progress_ud, w->msg);
    }
}

/* ---- fusion ---- */

/* The stages of one fusion of the program (its tensors' Fuse as set when
 * it was tuned), and their results. */
typedef struct Config {
    int nst;
    SrchStage *st;
    SrchStageResult *res;
} Config;

static void config_free(Config *c)
{
    for (int i = 0; i < c->nst; i++) {
        free(c->st[i].workload);
        if (c->res) {
            srch_tree_free(c->res[i].tree);
            free(c->res[i].shape_ms);
            free(c->res[i].spill);
        }
    }
    free(c->st);
    free(c->res);
    memset(c, 0, sizeof *c);
}

/* ---- side by side ---- */

/* A farm that measures several candidates at once (SrchFarm.width > 1)
 * gets the searches of a fusion's distinct workloads side by side: each
 * in a thread of its own, the threads taking turns at the tuner. A search
 * holds the tuner (tu->lock) but while the farm measures for it (let_go),
 * so only one ever touches the tuner, the records and the measurer, and
 * each goes as it goes alone: its own seed, trials and records, the same
 * kernels and trees as one after another. Only the order of the records'
 * lines differs, and of the progress lines. Twice as many searches as the
 * farm measures at once keep it busy: a selection asks for one candidate
 * at a time. */
typedef struct SideBySide {
    Tuner *tu;
    Config *c;
    const int *todo;       /* the stages to tune, by index into c */
    int n, next;           /* how many; the next one a thread takes */
    SrchTiming timing;     /* the measurer's, as a stage starts */
} SideBySide;

static void *side_thread(void *arg)
{
    SideBySide *sb = arg;
    Tuner *tu = sb->tu;
    if (tu->lock)
        pthread_mutex_lock(tu->lock);
    while (sb->next < sb->n && !tu->failed) {
        int i = sb->todo[sb->next++];
        srch_measurer_set_timing(tu->ms, &sb->timing);
        tune_stage(tu, &sb->c->st[i], &sb->c->res[i]);
    }
    if (tu->lock)
        pthread_mutex_unlock(tu->lock);
    return NULL;
}

/* Tunes the n stages todo of c side by side, as many at a time as
 * nthreads; one after another where no thread can be started. */
static void run_side_by_side(Tuner *tu, Config *c, const int *todo, int n, int nthreads)
{
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_attr_t attr;
    pthread_t th[nthreads];
    SideBySide sb = {tu, c, todo, n, 0, srch_measurer_timing(tu->ms)};
    int started = 0;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 20); /* LLVM's builds recurse deeply */
    tu->lock = &lock;
    while (started < nthreads && pthread_create(&th[started], &attr, side_thread, &sb) == 0)
        started++;
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    pthread_attr_destroy(&attr);
    tu->lock = NULL;
    pthread_mutex_destroy(&lock);
    if (!started)
        side_thread(&sb);
}

/* The result stage i of c takes from a stage that computes the same: an
 * earlier one of c, tuned, else one of prev (optional); NULL when none
 * (it is searched). */
static const SrchStageResult *result_of(const Config *prev, const Config *c, int i)
{
    const char *w = c->st[i].workload;
    for (int j = 0; j < i; j++)
        if (strcmp(c->st[j].workload, w) == 0 && c->res[j].tree)
            return &c->res[j];
    for (int j = 0; prev && j < prev->nst; j++)
        if (strcmp(prev->st[j].workload, w) == 0)
            return &prev->res[j];
    return NULL;
}

/* Tunes the stages of the program's fusion as its tensors' Fuse decides
 * now, into c (empty, or holding only those stages, stages_of's): a stage
 * whose workload prev (optional) has keeps prev's result; the others are
 * searched, with a measurer and records of this fusion. False when tuning
 * failed (tu->err says why). */
static bool tune_config(Tuner *tu, const Config *prev, Config *c)
{
    const SrchTuneOpts *o = tu->o;
    srch_measurer_free(tu->ms);
    srch_records_close(tu->rec);
    tu->rec = NULL;
    /* where a farm measures, it builds too (ptxas's reports included) and
     * this measurer only keeps the timing asked for: a GPU's needs no GPU
     * here (a login node) */
    const char *local = o->farm && strcmp(o->backend, "cuda") == 0 ? "model" : o->backend;
    tu->ms = srch_measurer_new(local, tu->ms_arch, tu->p, &tu->tg, tu->shapes, tu->nshapes,
                               tu->err, tu->errlen);
    if (!tu->ms || (o->farm && !o->farm->open(o->farm->self, tu->p, tu->shapes, tu->nshapes,
                                               tu->err, tu->errlen)))
        return !(tu->failed = true);
    if (!c->st) /* the stages of the fusion now set, unless the caller derived them */
        c->nst = stages_of(tu, &c->st);
    c->res = calloc((size_t)c->nst + 1, sizeof *c->res);
    const char **fps = calloc((size_t)c->nst + 1, sizeof *fps);
    for (int i = 0; i < c->nst; i++)
        fps[i] = c->st[i].workload;
    fps[c->nst] = tu->pf;
    tu->rec = srch_records_open(o->records, c->nst + 1, fps, tu->err, tu->errlen);
    free(fps);
    if (!tu->rec)
        return !(tu->failed = true);
    warn_records(tu);
    char why[320];
    if (tu->nconfigs++ == 0 && !srch_model_available(why, sizeof why) && o->warn) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s: the analytic cost model alone ranks candidates", why);
        o->warn(o->progress_ud, msg);
    }
    /* a workload is tuned once: a stage computing what an earlier stage
     * of this fusion or of the one before computes (a model's identical
     * layers) takes its result, tree and times. The first stage of each
     * workload the one before lacks is searched, side by side where the
     * farm measures several at once; then the rest in order */
    int *todo = malloc(sizeof *todo * (size_t)(c->nst + 1)), ntodo = 0;
    bool *done = calloc((size_t)c->nst + 1, sizeof *done);
    for (int i = 0; i < c->nst; i++) {
        bool first = !result_of(prev, c, i);
        for (int j = 0; j < i && first; j++)
            first = strcmp(c->st[j].workload, c->st[i].workload) != 0;
        if (first)
            todo[ntodo++] = i;
    }
    int width = o->farm ? o->farm->width : 1;
    if (width > 1 && ntodo > 1) {
        run_side_by_side(tu, c, todo, ntodo, 2 * width < ntodo ? 2 * width : ntodo);
        for (int k = 0; k < ntodo; k++)
            done[todo[k]] = true;
    }
    free(todo);
    for (int i = 0; i < c->nst && !tu->failed; i++) {
        if (done[i])
            continue;
        const SrchStageResult *had = result_of(prev, c, i);
        if (!had) {
            tune_stage(tu, &c->st[i], &c->res[i]);
            continue;
        }
        SrchStageResult *r = &c->res[i];
        *r = *had;
        /* nothing measured for it: all it has came from the earlier tune */
        r->reused += r->measured;
        r->select_reused += r->select_measured;
        r->measured = r->select_measured = r->select_turns = 0;
        r->checked = r->check_changed = 0;
        r->runs = r->dropped = 0;
        r->search_s = r->select_s = r->fit_s = 0;
        r->stage = c->st[i].t->name;
        r->tree = srch_tree_copy(had->tree);
        r->shape_ms = malloc(sizeof *r->shape_ms * (size_t)(tu->nshapes + 1));
        memcpy(r->shape_ms, had->shape_ms, sizeof *r->shape_ms * (size_t)tu->nshapes);
        if (had->spill && had->tree) {
            r->spill = malloc(sizeof *r->spill * (size_t)(had->tree->nkernels + 1));
            memcpy(r->spill, had->spill, sizeof *r->spill * (size_t)had->tree->nkernels);
        }
    }
    free(done);
    return !tu->failed;
}

/* The time of a fusion over the tuning shapes: every stage at every
 * point; NAN when one is not known. */
static double config_ms(const Tuner *tu, const Config *c)
{
    double ms = 0;
    for (int i = 0; i < c->nst; i++)
        for (int j = 0; j < tu->nshapes; j++)
            ms += c->res[i].shape_ms[j];
    return ms;
}

static bool materialised_in(const Config *c, const Tensor *t)
{
    for (int i = 0; i < c->nst; i++)
        if (c->st[i].t == t)
            return true;
    return false;
}

static bool same_stages(const Config *a, const Config *b)
{
    if (a->nst != b->nst)
        return false;
    for (int i = 0; i < a->nst; i++)
        if (a->st[i].t != b->st[i].t || strcmp(a->st[i].workload, b->st[i].workload) != 0)
            return false;
    return true;
}

/* Brings the records' fuse lines for the program in line with its
 * intermediates' Fuse now: a line wherever the latest one says otherwise
 * ("cost" for one the cost model decides), so a compile with the records
 * finds the stages tuned, and an earlier tune's choice does not outlive
 * this one's. */
static void write_fuse_lines(Tuner *tu)
{
    const TeProgram *p = tu->p;
    const char *want[1] = {tu->pf};
    SrchRecords *r = srch_records_open(tu->o->records, 1, want, tu->err, tu->errlen);
    for (int i = 0; r && i < p->ntensors && !tu->failed; i++) {
        const Tensor *t = p->tensors[i];
        if (pass_fuse_choosable(t) && srch_records_fuse(r, tu->pf, t->name) != t->fuse &&
            !srch_records_append_fuse(r, tu->pf, tu->tg.name, tu->arch, t->name, t->fuse,
                                      tu->err, tu->errlen))
            tu->failed = true;
    }
    if (!r)
        tu->failed = true;
    srch_records_close(r);
}

/* The most other (its stages, not tuned yet) can gain over best: the time
 * (summed over the shape points) of best's stages it changes; a stage it
 * keeps, same tensor and workload, keeps its time. */
static double changed_ms(const Tuner *tu, const Config *best, const Config *other)
{
    double ms = 0;
    for (int i = 0; i < best->nst; i++) {
        bool kept = false;
        for (int k = 0; k < other->nst && !kept; k++)
            kept = other->st[k].t == best->st[i].t &&
                   strcmp(other->st[k].workload, best->st[i].workload) == 0;
        for (int j = 0; j < tu->nshapes && !kept; j++)
            ms += best->res[i].shape_ms[j];
    }
    return ms;
}

/* Each tensor in[k] of p inlined, or materialised. */
static void set_fuse(TeProgram *p, const bool *in, bool materialise)
{
    for (int k = 0; k < p->ntensors; k++)
        if (in[k])
            p->tensors[k]->fuse = materialise ? FUSE_MATERIALIZE : FUSE_INLINE;
}

/* Tensors decided with p->tensors[i] (in[k]): its fusion class's
 * (srch_fusion_classes) other choosable tensors, not fixed or decided,
 * in the same state in best; how many. */
static int class_of(const TeProgram *p, char *const *cls, const bool *taken, const Config *best,
                    int i, bool *in)
{
    int n = 0;
    bool was = materialised_in(best, p->tensors[i]);
    for (int k = 0; k < p->ntensors; k++) {
        in[k] = k != i && !taken[k] && cls[k] && strcmp(cls[k], cls[i]) == 0 &&
                pass_fuse_choosable(p->tensors[k]) && materialised_in(best, p->tensors[k]) == was;
        n += in[k];
    }
    return n;
}

/* Whether the cost model's ratio for an intermediate (pass_fuse_ratios)
 * makes it a close call, one to tune both ways. */
static bool close_call(double ratio)
{
    return !(ratio < 1 / FUSE_CONTEST || ratio > FUSE_CONTEST);
}

/* Whether stages taking changed ms of a fusion's total cannot make the
 * other way win by SRCH_FUSE_MARGIN (it cannot be faster than the stages
 * it keeps). */
static bool too_small(double changed, double total)
{
    return changed * SRCH_FUSE_MARGIN <= total * (SRCH_FUSE_MARGIN - 1);
}

int srch_fuse_contests(const SrchTuneOpts *o)
{
    return !o || !o->contests ? SRCH_FUSE_CONTESTS : o->contests < 0 ? 0 : o->contests;
}

/* Which close choices search_fusion contests (want[i]): ranked by the
 * time of the stages the other way would change, the first `most` of
 * them, and none whose stages take too little of the time to win. Each
 * class is ranked once, by its first member (in search_fusion's order). */
static void pick_contests(Tuner *tu, const Config *best, char *const *cls, const bool *fixed,
                          int most, bool *want)
{
    TeProgram *p = tu->p;
    int nt = p->ntensors;
    double *ratio = malloc(sizeof *ratio * (size_t)(nt + 1)), *gain = calloc((size_t)nt + 1, sizeof *gain);
    bool *taken = malloc((size_t)nt + 1), *in = calloc((size_t)nt + 1, sizeof *in);
    Fuse *had = malloc(sizeof *had * (size_t)(nt + 1)); /* restored after each try */
    for (int k = 0; k < nt; k++)
        had[k] = p->tensors[k]->fuse;
    memcpy(taken, fixed, (size_t)nt);
    pass_fuse_ratios(p, ratio);
    double a = config_ms(tu, best);
    for (int i = nt - 1; i >= 0; i--) {
        want[i] = false;
        if (taken[i] || !pass_fuse_choosable(p->tensors[i]) || !close_call(ratio[i]))
            continue;
        class_of(p, cls, taken, best, i, in);
        in[i] = true;
        for (int k = 0; k < nt; k++)
            taken[k] = taken[k] || in[k];
        bool was = materialised_in(best, p->tensors[i]);
        set_fuse(p, in, !was);
        Config alt = {0};
        alt.nst = stages_of(tu, &alt.st);
        gain[i] = changed_ms(tu, best, &alt);
        for (int k = 0; k < nt; k++)
            p->tensors[k]->fuse = had[k];
        config_free(&alt);
        if (too_small(gain[i], a))
            gain[i] = 0;
    }
    for (int k = 0; k < most; k++) {
        int top = -1; /* an unknown time (NAN) is never picked */
        for (int i = nt - 1; i >= 0; i--)
            if (gain[i] > 0 && !want[i] && (top < 0 || gain[i] > gain[top]))
                top = i;
        if (top < 0)
            break;
        want[top] = true;
    }
    free(ratio);
    free(gain);
    free(taken);
    free(in);
    free(had);
}

/* The search's fusion choice. Each intermediate the cost model finds
 * close (inlining within FUSE_CONTEST of materialising, either way) and
 * no one fixed is tried the other way, readers first: the stages that
 * change are tuned, the other way is kept when its stages take less time
 * over all shape points (by SRCH_FUSE_MARGIN), and that intermediate's
 * Fuse is fixed to the choice. A class of tensors (the same intermediate
 * in each identical layer) is contested once, all of it flipped together;
 * a choice whose changed stages take too little of the time to win by
 * SRCH_FUSE_MARGIN is not tuned at all, nor are those beyond the
 * SrchTuneOpts.contests that change the most (pick_contests: a model's
 * dozen close calls would take as long as the rest of its tune, and in
 * BERT's and GPT-2's the other way never won). The other way's new stages are
 * tuned without the final check; only where they would win are they
 * fitted again with it (from the records) and the choice decided on the
 * checked times. A fusion that cannot be tuned (its buffers do not fit, a
 * stage cannot be measured) loses, with a warning; only an interruption
 * ends the tune. *best is the fusion tuned so far; the choices go to res
 * and, as fuse lines, to the records. */
static void search_fusion(Tuner *tu, Config *best, SrchTuneResult *res)
{
    TeProgram *p = tu->p;
    const SrchTuneOpts *o = tu->o;
    int nt = p->ntensors;
    double *ratio = malloc(sizeof *ratio * (size_t)(nt + 1));
    bool *taken = calloc((size_t)nt + 1, sizeof *taken), *in = calloc((size_t)nt + 1, sizeof *in);
    char **cls = srch_fusion_classes(p);
    res->fusion = calloc((size_t)nt + 1, sizeof *res->fusion);
    for (int i = 0; i < nt; i++)
        taken[i] = p->tensors[i]->fuse != FUSE_COST; /* fixed by the user */
    bool *want = calloc((size_t)nt + 1, sizeof *want);
    pick_contests(tu, best, cls, taken, srch_fuse_contests(o), want);
    for (int i = nt - 1; i >= 0 && !tu->failed; i--) {
        Tensor *t = p->tensors[i];
        if (taken[i] || !pass_fuse_choosable(t))
            continue;
        pass_fuse_ratios(p, ratio); /* each choice moves its producers' */
        if (!close_call(ratio[i]))
            continue;
        int nlike = class_of(p, cls, taken, best, i, in);
        in[i] = true;
        bool was = materialised_in(best, t);
        for (int k = 0; k < nt; k++)
            taken[k] = taken[k] || in[k];
        set_fuse(p, in, !was);
        double a = config_ms(tu, best);
        Config alt = {0};
        alt.nst = stages_of(tu, &alt.st); /* tune_config's stages */
        if (too_small(changed_ms(tu, best, &alt), a)) {
            res->nfusion_small += 1 + nlike;
            set_fuse(p, in, was);
            config_free(&alt);
            continue;
        }
        if (!want[i]) {
            res->nfusion_uncontested += 1 + nlike;
            set_fuse(p, in, was);
            config_free(&alt);
            continue;
        }
        tu->contest = true;
        bool ok = tune_config(tu, best, &alt);
        tu->contest = false;
        double b = ok ? config_ms(tu, &alt) : NAN;
        if (ok && b * SRCH_FUSE_MARGIN < a && !same_stages(best, &alt)) {
            /* it would win: its new stages fitted again, checked and
             * stored (from the records: nothing measured twice) */
            Config checked = {0};
            tu->refit = true;
            ok = tune_config(tu, best, &checked);
            tu->refit = false;
            config_free(&alt);
            alt = checked;
            b = ok ? config_ms(tu, &alt) : NAN;
        }
        if (!ok && !(o->stop && *o->stop)) {
            if (o->warn) {
                char msg[1200];
                snprintf(msg, sizeof msg, "%s %s could not be tuned (%s): it stays %s", t->name,
                         was ? "inlined" : "materialised", tu->err,
                         was ? "materialised" : "inlined");
                o->warn(o->progress_ud, msg);
            }
            tu->failed = false;
        }
        if (tu->failed) {
            config_free(&alt);
            break;
        }
        bool same = ok && same_stages(best, &alt);
        bool flip = ok && !same && b * SRCH_FUSE_MARGIN < a; /* NAN: keep */
        res->fusion[res->nfusion++] =
            (SrchFusion){t->name, flip ? !was : was, flip ? b : a, flip ? a : b, same, nlike};
        if (flip) {
            config_free(best);
            *best = alt;
        } else {
            set_fuse(p, in, was);
            config_free(&alt);
        }
    }
    if (!tu->failed)
        write_fuse_lines(tu);
    for (int i = 0; i < nt; i++)
        free(cls[i]);
    free(cls);
    free(ratio);
    free(taken);
    free(in);
    free(want);
}

/* How many of the tuner's shape points tree t sends to kernel k; 0 when
 * t's dims are not all the program's. */
static int served(const Tuner *tu, const SrchTree *t, int k)
{
    int pos[SRCH_MAX_DIMS];
    int64_t d[SRCH_MAX_DIMS];
    if (t->ndims > SRCH_MAX_DIMS)
        return 0;
    for (int i = 0; i < t->ndims; i++) {
        const Var *dim = ir_te_find_dim(tu->p, t->dim_names[i]);
        if (!dim)
            return 0;
        pos[i] = dim->pos;
    }
    int n = 0;
    for (int s = 0; s < tu->nshapes; s++) {
        for (int i = 0; i < t->ndims; i++)
            d[i] = shape_at(tu, s)[pos[i]];
        n += srch_tree_predict(t, d) == k;
    }
    return n;
}

static int by_served(const void *a, const void *b)
{
    const WarmKernel *x = a, *y = b;
    return x->served != y->served ? y->served - x->served : x->order - y->order;
}

typedef struct Sample {
    const SrchRecord *x;
    int i; /* in the file */
} Sample;

static bool same_kernel(const SrchRecord *x, const SrchRecord *y)
{
    return strcmp(x->workload, y->workload) == 0 && ir_microkernel_cmp(&x->mk, &y->mk) == 0;
}

/* by workload and kernel, the most work first, then in file order */
static int by_kernel_work(const void *a, const void *b)
{
    const Sample *s = a, *t = b;
    int c = strcmp(s->x->workload, t->x->workload);
    if (!c)
        c = ir_microkernel_cmp(&s->x->mk, &t->x->mk);
    if (!c && s->x->work != t->x->work)
        c = s->x->work > t->x->work ? -1 : 1;
    return c ? c : s->i - t->i;
}

/* --warm-start: the search's samples (features and label) in the file of
 * every workload measured on this target and arch, one per kernel of a
 * workload: where it ran on the most work (its home, not the probe before
 * it, whose label runs high). False and err when it cannot be read. */
static bool load_warm(Tuner *tu, char *err, size_t errlen)
{
    const SrchTuneOpts *o = tu->o;
    char why[1024]; /* an absent file is a mistake, not a cold start */
    SrchRecords *r = srch_records_read(o->warm_start, 0, NULL, why, sizeof why);
    if (!r) {
        srch_seterr(err, errlen, "--warm-start: %s", why);
        return false;
    }
    if (o->warn)
        for (int i = 0; i < srch_records_nwarnings(r); i++)
            o->warn(o->progress_ud, srch_records_warning(r, i)->msg);
    int n = srch_records_count(r), ns = 0;
    Sample *smp = malloc(sizeof *smp * (size_t)(n + 1));
    bool *keep = calloc((size_t)n + 1, sizeof *keep);
    if (!smp || !keep)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < n; i++) {
        const SrchRecord *x = srch_records_at(r, i);
        if (x->nfeat == SRCH_NFEAT && x->median_ms > 0 && strcmp(x->target, tu->tg.name) == 0 &&
            strcmp(x->arch, tu->arch) == 0)
            smp[ns++] = (Sample){x, i};
    }
    qsort(smp, (size_t)ns, sizeof *smp, by_kernel_work);
    for (int k = 0; k < ns; k++)
        keep[smp[k].i] = k == 0 || !same_kernel(smp[k - 1].x, smp[k].x);
    free(smp);
    tu->warm_feat = malloc(sizeof *tu->warm_feat * SRCH_NFEAT * (size_t)(n + 1));
    tu->warm_label = malloc(sizeof *tu->warm_label * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        const SrchRecord *x = srch_records_at(r, i);
        if (!keep[i])
            continue;
        memcpy(tu->warm_feat + (size_t)tu->nwarm * SRCH_NFEAT, x->features,
               sizeof(float) * SRCH_NFEAT);
        tu->warm_label[tu->nwarm++] = x->work / (x->median_ms * 1e6);
    }
    free(keep);
    /* the kernels the trees of those workloads dispatch to (each
     * fingerprint names its target and arch), in the order the file first
     * measured the workloads, each kernel once */
    const char **seen = malloc(sizeof *seen * (size_t)(n + 1));
    int nseen = 0;
    for (int i = 0; i < n; i++) {
        const SrchRecord *x = srch_records_at(r, i);
        bool skip = strcmp(x->target, tu->tg.name) != 0 || strcmp(x->arch, tu->arch) != 0;
        for (int j = 0; j < nseen && !skip; j++) /* few workloads: a list will do */
            skip = strcmp(seen[j], x->workload) == 0;
        if (skip)
            continue;
        seen[nseen++] = x->workload;
        const SrchTree *t = srch_records_tree(r, x->workload);
        for (int k = 0; t && k < t->nnodes; k++) {
            const SrchTreeNode *nd = &t->nodes[k];
            if (nd->kind != TN_LEAF || nd->kernel < 0 || nd->kernel >= t->nkernels)
                continue;
            bool dup = false;
            for (int j = 0; j < tu->nwarm_mk && !dup; j++)
                dup = tu->warm_mk[j].rank == t->nspatial &&
                      ir_microkernel_cmp(&tu->warm_mk[j].mk, &t->kernels[nd->kernel]) == 0;
            if (dup) /* a kernel at several leaves: served counts them all */
                continue;
            tu->warm_mk = realloc(tu->warm_mk, sizeof *tu->warm_mk * (size_t)(tu->nwarm_mk + 1));
            if (!tu->warm_mk)
                ir_panic(__FILE__, __LINE__, "out of memory");
            tu->warm_mk[tu->nwarm_mk] = (WarmKernel){t->kernels[nd->kernel], t->nspatial,
                                                     served(tu, t, nd->kernel), tu->nwarm_mk};
            tu->nwarm_mk++;
        }
    }
    free(seen);
    /* those serving the most of this run's points first */
    if (tu->nwarm_mk > 1)
        qsort(tu->warm_mk, (size_t)tu->nwarm_mk, sizeof *tu->warm_mk, by_served);
    srch_records_close(r);
    return true;
}

SrchTuneResult *srch_tune(TeProgram *p, const SrchTuneOpts *o, char *err, size_t errlen)
{
    if (!o->records) {
        srch_seterr(err, errlen, "tuning needs a records file");
        return NULL;
    }
    if (o->trials < 1) {
        srch_seterr(err, errlen, "--trials must be at least 1");
        return NULL;
    }
    Tuner tu = {.p = p, .o = o, .t0 = now_s(), .err = err, .errlen = errlen};
    if (strcmp(o->backend, "cpu") == 0)
        tu.tg = srch_target_cpu();
    else
        tu.tg = srch_target_gpu(strcmp(o->backend, "cuda") == 0 ? "cuda" : "model", o->arch, 0);
    if (o->points) {
        size_t bytes = sizeof *tu.shapes * (size_t)o->npoints * (size_t)(p->ndims ? p->ndims : 1);
        tu.nshapes = o->npoints;
        if (o->npoints < 1 || !(tu.shapes = malloc(bytes))) {
            srch_seterr(err, errlen, "no shape point to tune");
            return NULL;
        }
        memcpy(tu.shapes, o->points, bytes);
    } else {
        tu.shapes = srch_shape_points(p, o->ranges, o->nranges, &tu.nshapes, err, errlen);
    }
    if (!tu.shapes)
        return NULL;
    for (int s = 0; s < tu.nshapes; s++) {
        char why[256];
        if (!ir_check_dims(p, shape_at(&tu, s), why, sizeof why)) {
            srch_seterr(err, errlen, "a shape to tune cannot run: %s", why);
            free(tu.shapes);
            return NULL;
        }
    }
    tu.dim_names = calloc((size_t)p->ndims + 1, sizeof *tu.dim_names);
    for (int i = 0; i < p->ndims; i++)
        tu.dim_names[i] = p->dims[i]->name;
    SrchTuneResult *res = NULL;
    /* the cuda backend describes the GPU it runs on: its SMs, and its
     * architecture where --arch does not name one (PTX for sm_80 still
     * runs on anything newer) */
    const char *arch = o->arch;
    char devarch[16];
    tu.arch = arch ? arch : "sm_80";
    if (strcmp(o->backend, "cpu") == 0)
        tu.arch = srch_host_arch();
    if (o->farm) { /* the devices that measure describe the target */
        tu.tg = o->farm->tg;
        tu.arch = o->farm->arch;
    } else if (strcmp(o->backend, "cuda") == 0) {
        RtCudaDeviceInfo di;
        if (rt_cuda_init(err, errlen) == DCRT_OK && rt_cuda_device_info(&di, err, errlen) == DCRT_OK) {
            snprintf(devarch, sizeof devarch, "sm_%d%d", di.sm_major, di.sm_minor);
            tu.tg = srch_target_gpu("cuda", arch ? arch : devarch, di.nsm);
            tu.arch = arch ? arch : devarch;
        }
    }
    if (o->warm_start && !load_warm(&tu, err, errlen))
        goto out;
    tu.ms_arch = arch;
    tu.pf = srch_program_fingerprint(p, tu.tg.name, tu.arch);
    /* the search fixes p's intermediates' Fuse as it goes; p is left as given */
    Fuse *given = malloc(sizeof *given * (size_t)(p->ntensors + 1));
    for (int i = 0; i < p->ntensors; i++)
        given[i] = p->tensors[i]->fuse;
    Config cfg = {0};
    res = calloc(1, sizeof *res);
    res->nshapes = tu.nshapes;
    res->nwarm = tu.nwarm;
    res->nwarm_kernels = tu.nwarm_mk;
    if (tune_config(&tu, NULL, &cfg)) {
        res->nforeign = srch_records_nforeign(tu.rec);
        search_fusion(&tu, &cfg, res);
    }
    res->ncorrupt = tu.ncorrupt;
    for (int i = 0; i < p->ntensors; i++)
        p->tensors[i]->fuse = given[i];
    free(given);
    res->stages = cfg.res;
    res->nstages = cfg.nst;
    for (int i = 0; i < cfg.nst; i++) { /* a model's identical layers: one each */
        int j = 0;
        while (j < i && strcmp(cfg.st[j].workload, cfg.st[i].workload) != 0)
            j++;
        res->nworkloads += j == i;
    }
    cfg.res = NULL;
    config_free(&cfg);
    res->seconds = now_s() - tu.t0;
    res->shapes = tu.shapes; /* the result's now */
    tu.shapes = NULL;
    if (tu.failed) {
        srch_tune_result_free(res);
        res = NULL;
    }
out:
    srch_records_close(tu.rec);
    srch_measurer_free(tu.ms);
    free(tu.pf);
    free(tu.warned);
    free(tu.dim_names);
    free(tu.shapes);
    free(tu.warm_feat);
    free(tu.warm_label);
    free(tu.warm_mk);
    return res;
}

void srch_tune_result_free(SrchTuneResult *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nstages; i++) {
        srch_tree_free(r->stages[i].tree);
        free(r->stages[i].shape_ms);
        free(r->stages[i].spill);
    }
    free(r->stages);
    free(r->fusion);
    free(r->shapes);
    free(r);
}

double srch_tune_estimate_ms(const SrchTuneResult *r, int j)
{
    IR_ASSERT(j >= 0 && j < r->nshapes);
    double ms = 0;
    for (int i = 0; i < r->nstages; i++)
        ms += r->stages[i].shape_ms ? r->stages[i].shape_ms[j] : NAN;
    return ms;
}

/* ---- shape points ---- */

int64_t *srch_shape_points(const TeProgram *p, const SrchRange *ranges, int nranges, int *n,
                           char *err, size_t errlen)
{
    int nd = p->ndims;
    int64_t lo[SRCH_MAX_DIMS], hi[SRCH_MAX_DIMS];
    int count[SRCH_MAX_DIMS];
    if (nd > SRCH_MAX_DIMS) {
        srch_seterr(err, errlen, "too many dims to tune (%d, at most %d)", nd, SRCH_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < nd; i++) {
        lo[i] = p->dims[i]->lo;
        hi[i] = p->dims[i]->hi;
        count[i] = 0;
    }
    for (int r = 0; r < nranges; r++) {
        int i = 0;
        while (i < nd && strcmp(p->dims[i]->name, ranges[r].dim) != 0)
            i++;
        if (i == nd) {
            srch_seterr(err, errlen, "--shapes: the program has no dim '%s'", ranges[r].dim);
            return NULL;
        }
        const Var *d = p->dims[i];
        if (ranges[r].lo < d->lo || ranges[r].hi < ranges[r].lo || ranges[r].hi > d->max) {
            srch_seterr(err, errlen, "--shapes: %s=%lld..%lld is not within %lld..%lld", d->name,
                        (long long)ranges[r].lo, (long long)ranges[r].hi, (long long)d->lo,
                        (long long)d->max);
            return NULL;
        }
        lo[i] = ranges[r].lo;
        hi[i] = ranges[r].hi;
        count[i] = ranges[r].count;
    }
    /* all points when there are at most 256, else an even sample per dim */
    double total = 1;
    int nfree = 0;
    for (int i = 0; i < nd; i++) {
        total *= count[i] > 0 ? count[i] : (double)(hi[i] - lo[i] + 1);
        nfree += count[i] == 0 && hi[i] > lo[i];
    }
    int per = 2;
    while (nfree > 0 && pow(per + 1, nfree) <= 256)
        per++;
    int64_t npt = 1;
    for (int i = 0; i < nd; i++) {
        int64_t span = hi[i] - lo[i] + 1;
        if (count[i] == 0)
            count[i] = total <= 256 || span <= per ? (int)(span < 1 << 20 ? span : 1 << 20) : per;
        if (count[i] > span)
            count[i] = (int)span;
        npt *= count[i];
        if (npt > 1 << 20) {
            srch_seterr(err, errlen,
                        "%s more than %d shape points (%d dims%s); %s", nranges ?
                        "--shapes: the grid of the ranges given and the other dims' defaults has"
                        : "the default grid of the program's dims has", 1 << 20, nd,
                        nranges ? "" : ", at least 2 values each",
                        "give fewer values per dim (--shapes NAME=LO..HI:COUNT) or the points "
                        "themselves (--shapes-file)");
            return NULL;
        }
    }
    size_t width = nd > 0 ? (size_t)nd : 1;
    int64_t *pts = malloc(sizeof *pts * (size_t)npt * width);
    for (int64_t k = 0; k < npt; k++) {
        int64_t rest = k;
        int64_t *row = pts + k * nd;
        for (int i = nd - 1; i >= 0; i--) {
            int c = count[i];
            int64_t idx = rest % c;
            rest /= c;
            int64_t v = c == 1 ? lo[i] : lo[i] + (hi[i] - lo[i]) * idx / (c - 1);
            row[p->dims[i]->pos] = v;
        }
    }
    *n = (int)npt;
    return pts;
}

/* The whole of a small file, NUL-terminated; NULL with a message in err. */
static char *read_small_file(const char *path, long max, char *err, size_t errlen)
{
    FILE *f = rt_open_read(path, err, errlen); /* the rule for files read */
    if (!f)
        return NULL;
    char *buf = malloc((size_t)max + 1);
    size_t n = buf ? fread(buf, 1, (size_t)max + 1, f) : 0;
    int bad = !buf ? ENOMEM : ferror(f) ? EIO : 0;
    bool big = !bad && n > (size_t)max;
    fclose(f);
    if (bad || big) {
        free(buf);
        if (big)
            srch_seterr(err, errlen, "%s: cannot read: larger than %ld MiB", path, max >> 20);
        else
            srch_seterr(err, errlen, "%s: cannot read: %s", path, strerror(bad));
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

int64_t *srch_shape_points_file(const TeProgram *p, const char *path, int *n, char *err,
                                size_t errlen)
{
    enum { MAX_BYTES = 16 << 20, MAX_POINTS = 1 << 20 };
    int nd = p->ndims;
    if (nd > SRCH_MAX_DIMS) {
        srch_seterr(err, errlen, "too many dims to tune (%d, at most %d)", nd, SRCH_MAX_DIMS);
        return NULL;
    }
    char *text = read_small_file(path, MAX_BYTES, err, errlen);
    if (!text)
        return NULL;
    cJSON *root = cJSON_ParseWithOpts(text, NULL, 1); /* nothing after the array */
    free(text);
    int count = cJSON_IsArray(root) ? cJSON_GetArraySize(root) : 0;
    if (!cJSON_IsArray(root) || count < 1 || count > MAX_POINTS) {
        srch_seterr(err, errlen,
                    "%s: expected a JSON array of 1 to %d objects mapping each dim to a value "
                    "(e.g. [{\"%s\": %lld}])",
                    path, MAX_POINTS, nd ? p->dims[0]->name : "T", nd ? (long long)p->dims[0]->lo : 1LL);
        cJSON_Delete(root);
        return NULL;
    }
    int64_t *pts = malloc(sizeof *pts * (size_t)count * (size_t)(nd ? nd : 1));
    /* the points so far by hash (open addressing): a repeated one is kept once */
    size_t nslots = 2;
    while (nslots < 2 * (size_t)count)
        nslots *= 2;
    int *slot = malloc(sizeof *slot * nslots);
    if (!pts || !slot) {
        srch_seterr(err, errlen, "%s: out of memory for %d points", path, count);
        free(pts);
        free(slot);
        cJSON_Delete(root);
        return NULL;
    }
    for (size_t i = 0; i < nslots; i++)
        slot[i] = -1;
    int np = 0, k = 0;
    const char *why = NULL;
    char what[256] = "";
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        int64_t *row = pts + (size_t)np * (size_t)nd;
        uint64_t seen = 0; /* nd <= SRCH_MAX_DIMS = 64 */
        if (!cJSON_IsObject(e))
            why = "is not an object mapping dims to values";
        const cJSON *kv;
        for (kv = e->child; !why && kv; kv = kv->next) {
            int i = 0;
            while (i < nd && strcmp(p->dims[i]->name, kv->string) != 0)
                i++;
            double v = cJSON_IsNumber(kv) ? kv->valuedouble : -1;
            if (i == nd) {
                why = "names a dim the program does not have:";
                snprintf(what, sizeof what, " '%s'", kv->string);
            } else if (seen & (uint64_t)1 << i) {
                why = "gives a dim twice:";
                snprintf(what, sizeof what, " %s", kv->string);
            } else if (!cJSON_IsNumber(kv) || v != floor(v) || v < 0 || v > 9007199254740992.0) {
                why = "gives a dim a value that is not a non-negative integer:";
                snprintf(what, sizeof what, " %s", kv->string);
            } else if ((int64_t)v < p->dims[i]->lo) {
                why = "gives a dim a value below its declared range:";
                snprintf(what, sizeof what, " %s = %lld, range %lld..%lld", kv->string,
                         (long long)v, (long long)p->dims[i]->lo, (long long)p->dims[i]->hi);
            } else if ((int64_t)v > p->dims[i]->max) {
                why = "gives a dim a value above the largest it runs at:";
                snprintf(what, sizeof what, " %s = %lld, at most %lld", kv->string, (long long)v,
                         (long long)p->dims[i]->max);
            } else {
                seen |= (uint64_t)1 << i;
                row[p->dims[i]->pos] = (int64_t)v;
            }
        }
        for (int i = 0; !why && i < nd; i++)
            if (!(seen & (uint64_t)1 << i)) {
                why = "leaves out a dim:";
                snprintf(what, sizeof what, " %s", p->dims[i]->name);
            }
        if (why)
            break;
        size_t at = (size_t)dc_fnv1a(DC_FNV_OFFSET, row, sizeof *row * (size_t)nd) & (nslots - 1);
        bool dup = false;
        for (; slot[at] >= 0 && !dup; at = (at + 1) & (nslots - 1))
            dup = memcmp(pts + (size_t)slot[at] * (size_t)nd, row, sizeof *row * (size_t)nd) == 0;
        if (!dup)
            slot[at] = np++;
        k++;
    }
    cJSON_Delete(root);
    free(slot);
    if (why) {
        srch_seterr(err, errlen, "%s: entry %d %s%s", path, k, why, what);
        free(pts);
        return NULL;
    }
    *n = np;
    return pts;
}
