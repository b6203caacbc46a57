/* dcc tune: the joint search over the shapes, into the records file;
 * under mpirun, rank 0 searches and the other ranks measure (search/mpi.c). */
#include "dcc.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

/* SIGINT / SIGTERM: the search stops before its next measurement (a
 * second signal kills at once); what was measured is in the records.
 * Under MPI a second SIGTERM is Open MPI ending the job (it sends two when
 * a rank is lost, then SIGKILL a second later): rank 0 then still stops
 * and says so. */
static volatile sig_atomic_t tune_stop;
static bool tune_mpi;

static void on_stop_signal(int sig)
{
    tune_stop = 1;
    if (!(tune_mpi && sig == SIGTERM))
        signal(sig, SIG_DFL);
}

typedef struct TuneUi {
    bool tty;
    bool live;  /* a progress line is on the terminal */
    /* under mpirun the farm warns of a lost rank while a search beside
     * reports its progress */
    pthread_mutex_t lock;
} TuneUi;

static void tune_progress(void *ud, const SrchProgress *p)
{
    TuneUi *ui = ud;
    char line[256];
    snprintf(line, sizeof line,
             "tune: %s %s round %d: %d/%d measured, best predicted %.1f GFLOP/s, "
             "measured %.1f GFLOP/s, %.0f s elapsed, ~%.0f s left",
             p->stage, p->phase, p->round, p->done, p->total, p->best_pred_gflops,
             p->best_meas_gflops, p->elapsed_s, p->eta_s);
    pthread_mutex_lock(&ui->lock);
    if (ui->tty) {
        fprintf(stderr, "\r\033[K%s", line);
        ui->live = true;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    pthread_mutex_unlock(&ui->lock);
}

static void tune_warn(void *ud, const char *msg)
{
    TuneUi *ui = ud;
    pthread_mutex_lock(&ui->lock);
    if (ui->live)
        fputc('\n', stderr), ui->live = false;
    fprintf(stderr, "dcc: warning: %s\n", msg);
    pthread_mutex_unlock(&ui->lock);
}

/* The whole program's estimated latency over the tuned shapes: the
 * geometric mean and up to 9 points spread over them. */
static void print_estimate(const TeProgram *p, const SrchTuneResult *r)
{
    double lg = 0;
    int known = 0;
    for (int j = 0; j < r->nshapes; j++) {
        double ms = srch_tune_estimate_ms(r, j);
        if (!isnan(ms) && ms > 0)
            lg += log(ms), known++;
    }
    if (!known)
        return;
    printf("program: estimated latency (its stages' dispatched kernels as measured, summed): "
           "geomean %.4f ms over %d shape point%s",
           exp(lg / known), known, known == 1 ? "" : "s");
    if (known < r->nshapes)
        printf(" (%d without a time for every stage)", r->nshapes - known);
    printf("\n");
    int show = r->nshapes < 9 ? r->nshapes : 9;
    for (int k = 0; k < show; k++) {
        int j = show == 1 ? 0 : (int)((int64_t)k * (r->nshapes - 1) / (show - 1));
        double ms = srch_tune_estimate_ms(r, j);
        printf("  ");
        for (int d = 0; d < p->ndims; d++)
            printf("%s%s=%lld", d ? ", " : "", p->dims[d]->name,
                   (long long)r->shapes[(size_t)j * (size_t)p->ndims + (size_t)p->dims[d]->pos]);
        if (isnan(ms))
            printf(": unknown\n");
        else
            printf(": %.4f ms\n", ms);
    }
}

int cmd_tune(int argc, char **argv)
{
    Args a = parse_args(CMD_TUNE, argc, argv);
    SrchTuneOpts o = {.backend = a.val[O_TARGET] ? a.val[O_TARGET] : "cpu",
                      .arch = a.val[O_ARCH],
                      .trials = a.val[O_TRIALS] ? (int)a.num[O_TRIALS] : 64,
                      .seed = a.val[O_SEED] ? (uint64_t)a.num[O_SEED] : 1,
                      .per_shape = a.val[O_PER_SHAPE] != NULL,
                      .warm_start = a.val[O_WARM],
                      .atomic_split = a.val[O_ATOMIC] != NULL,
                      .contests = !a.val[O_CONTESTS] ? 0 : a.num[O_CONTESTS] ? (int)a.num[O_CONTESTS] : -1};
    if (a.val[O_PROBE]) { /* checked by parse_args: 0 is never */
        double ms = strtod(a.val[O_PROBE], NULL);
        o.probe_ms = ms > 0 ? ms : -1;
    }
    SrchRange ranges[MAX_ARGS];
    const NamedArgs *shapes = &a.named[O_SHAPES];
    for (int i = 0; i < shapes->n; i++) {
        int64_t count;
        SrchRange *r = &ranges[o.nranges++];
        r->dim = shapes->a[i].name;
        bool ok = parse_range(shapes->a[i].value, &r->lo, &r->hi, &count);
        IR_ASSERT(ok); /* parse_args checked it */
        r->count = (int)count;
    }
    const char *records = a.val[O_RECORDS], *file = a.file;
    if (o.arch && strcmp(o.backend, "cpu") == 0)
        usage_error("--arch %s is a GPU architecture: tune with --target=cuda or --target=model",
                    o.arch);
    if (o.atomic_split && strcmp(o.backend, "cpu") == 0)
        usage_error("--atomic-split is for the GPU: tune with --target=cuda or --target=model");
    if (shapes->n && a.val[O_SHAPES_FILE])
        usage_error("--shapes and --shapes-file both say which shapes to tune: give one");
    /* under an MPI launcher every rank runs this command: rank 0 tunes,
     * the others measure what it hands them (without MPI rank 0 alone) */
    int rank, nranks = srch_mpi_launched(&rank);
    SrchMpi *mpi = NULL;
    char err[1024];
    if (nranks > 1 && !srch_mpi_built()) {
        if (rank != 0)
            return free_args(&a), 0;
        fprintf(stderr, "dcc: warning: started as %d MPI ranks, but this dcc was built without "
                "MPI: rank 0 tunes alone and the others exit\n", nranks);
    } else if (nranks > 1 && !(mpi = srch_mpi_start(&argc, &argv, err, sizeof err))) {
        fail("%s", err);
    }
    tune_mpi = mpi != NULL;
    char *defrec = records ? NULL : aot_path(NULL, file, ".records.jsonl", true);
    o.records = records ? records : defrec;
    RtOutFiles *in = outputs_new(&a, false); /* the records are appended to */
    bool clash = rt_out_check(in, o.records, err, sizeof err) != 0;
    rt_out_free(in);
    if (clash)
        fail("%s", err);
    o.ranges = ranges;
    TuneUi ui = {isatty(2) != 0, false, PTHREAD_MUTEX_INITIALIZER};
    o.progress = tune_progress;
    o.warn = tune_warn;
    o.progress_ud = &ui;
    if (strcmp(o.backend, "cuda") == 0 && !mpi) /* under MPI the measuring ranks say */
        cuda_require();
    FeUnit l = load_fused(&a);
    int64_t *points = NULL;
    if (a.val[O_SHAPES_FILE] &&
        !(points = srch_shape_points_file(l.prog, a.val[O_SHAPES_FILE], &o.npoints, err,
                                          sizeof err)))
        fail("%s", err);
    o.points = points;
    o.stop = &tune_stop;
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    if (mpi) {
        if (!srch_mpi_join(mpi, l.prog, o.backend, o.arch, DCC_VERSION, &tune_stop, tune_warn,
                           &ui, err, sizeof err)) {
            srch_mpi_end(mpi);
            fail("%s", err);
        }
        if (srch_mpi_rank(mpi) != 0) { /* a measuring rank, until rank 0 is done */
            if (!srch_mpi_serve(mpi, err, sizeof err))
                fail("%s", err); /* stopped: MPI is ending the job */
            srch_mpi_end(mpi);
            free(defrec);
            free(points);
            free_args(&a);
            fe_unload(&l);
            return 0;
        }
        o.farm = srch_mpi_farm(mpi);
    }
    SrchTuneResult *r = srch_tune(l.prog, &o, err, sizeof err);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (ui.live)
        fputc('\n', stderr);
    /* stopped (Ctrl-C; under MPI also a lost rank: Open MPI then ends the
     * job) the ranks are not waited for; else they are told it is done */
    if (!r && tune_stop)
        fail("tuning interrupted%s: every measurement taken is in %s; the same command "
             "resumes it", mpi ? " (a signal, or a rank lost)" : "", o.records);
    if (!r) {
        srch_mpi_end(mpi);
        fail("%s", err);
    }
    printf("tune: %s, target %s, %d shape point%s, %s, %d trial%s per search, %d stage%s of %d "
           "distinct workload%s, %.1f s\n",
           l.prog->name, o.backend, r->nshapes, r->nshapes == 1 ? "" : "s",
           o.per_shape ? "per-shape baseline" : "joint search", o.trials,
           o.trials == 1 ? "" : "s", r->nstages, r->nstages == 1 ? "" : "s", r->nworkloads,
           r->nworkloads == 1 ? "" : "s", r->seconds);
    if (o.farm)
        printf("mpi: %d ranks, measured on %s by the %d other%s\n", nranks, o.farm->arch,
               nranks - 1, nranks == 2 ? "" : "s");
    if (o.warm_start)
        printf("warm start: %d search sample%s and %d chosen kernel%s of this target from %s\n",
               r->nwarm, r->nwarm == 1 ? "" : "s", r->nwarm_kernels,
               r->nwarm_kernels == 1 ? "" : "s", o.warm_start);
    for (int i = 0; i < r->nstages; i++) {
        const SrchStageResult *s = &r->stages[i];
        printf("stage %s: search %d measured + %d from records; selection %d measured (%d "
               "close ones again, in turns) + %d from records\n",
               s->stage, s->measured, s->reused, s->select_measured, s->select_turns,
               s->select_reused);
        printf("  time: search %.1f s, selection %.1f s, fit and check %.1f s\n", s->search_s,
               s->select_s, s->fit_s);
        if (s->probed)
            printf("  probes: %d candidate%s run first at a smaller shape, %d hopeless there (not "
                   "run where %s best)\n", s->probed, s->probed == 1 ? "" : "s",
                   s->probe_hopeless, s->probed == 1 ? "it adapts" : "they adapt");
        if (s->checked)
            printf("  check: %d choice%s measured again against the next best, in turns; the "
                   "tree then picks another kernel at %d shape point%s\n", s->checked,
                   s->checked == 1 ? "" : "s", s->check_changed, s->check_changed == 1 ? "" : "s");
        if (s->runs > 0)
            printf("  noise: %lld of %lld timed runs (%.1f%%) dropped as disturbed by other "
                   "processes, slow or outliers%s\n", (long long)s->dropped, (long long)s->runs,
                   100.0 * (double)s->dropped / (double)s->runs,
                   s->dropped * 2 > s->runs ? " (a busy machine: the kept runs decided)" : "");
        const SrchTree *t = s->tree;
        int leaves = 0;
        for (int k = 0; k < t->nnodes; k++)
            leaves += srch_tree_node(t, k)->kind == TN_LEAF;
        printf("  dispatch: %d leaves, depth %d; accuracy %.1f%% (%d of %d shapes pick the "
               "best), misses cost %.3fx geomean, %.3fx worst\n",
               leaves, srch_tree_depth(t), 100 * s->score.accuracy, s->score.hits,
               s->score.n, s->score.miss_geomean, s->score.miss_worst);
        printf("  latency geomean over the shapes: %.4f ms dispatched, %.4f ms best\n",
               s->geomean_ms, s->oracle_geomean_ms);
        for (int k = 0; k < t->nnodes; k++) {
            const SrchTreeNode *n = srch_tree_node(t, k);
            if (n->kind == TN_LEAF && !srch_tree_uses(t, n->kernel, k)) {
                char *mk = srch_mk_str(&t->kernels[n->kernel], t->nspatial);
                int spill = s->spill ? s->spill[n->kernel] : 0;
                printf("  kernel: %s", mk);
                if (spill > 0)
                    printf(" (spills %d bytes: no kernel without spills within 5%% where it is "
                           "used)", spill);
                putchar('\n');
                free(mk);
            }
        }
    }
    for (int i = 0; i < r->nfusion; i++) {
        const SrchFusion *f = &r->fusion[i];
        printf("fusion: %s", f->tensor);
        if (f->nlike)
            printf(" and %d like it", f->nlike);
        printf(" %s: %s stages %.4f ms summed over the shapes",
               f->materialized ? "materialised" : "inlined", f->nlike ? "their" : "its", f->ms);
        if (f->same)
            printf(" (too large to inline)\n");
        else if (isnan(f->other_ms))
            printf("; %s, not timed at every shape point\n",
                   f->materialized ? "inlined" : "materialised");
        else
            printf(", %.4f ms %s\n", f->other_ms, f->materialized ? "inlined" : "materialised");
    }
    if (r->nfusion_small)
        printf("fusion: %d more close choice%s left as the cost model made %s: the stages %s "
               "change take too little of the time to gain %.0f%%\n", r->nfusion_small,
               r->nfusion_small == 1 ? "" : "s", r->nfusion_small == 1 ? "it" : "them",
               r->nfusion_small == 1 ? "it would" : "they would", 100 * (SRCH_FUSE_MARGIN - 1));
    if (r->nfusion_uncontested)
        printf("fusion: %d more close choice%s left as the cost model made %s: beyond the %d "
               "contested (--contests)\n", r->nfusion_uncontested,
               r->nfusion_uncontested == 1 ? "" : "s", r->nfusion_uncontested == 1 ? "it" : "them",
               srch_fuse_contests(&o));
    print_estimate(l.prog, r);
    if (r->ncorrupt)
        printf("records: %d damaged line%s skipped\n", r->ncorrupt, r->ncorrupt == 1 ? "" : "s");
    printf("records: %s\n", o.records);
    fflush(stdout); /* before MPI ends: Open MPI's forwarding of it with it */
    srch_mpi_end(mpi);
    srch_tune_result_free(r);
    free(defrec);
    free(points);
    free_args(&a);
    fe_unload(&l);
    return 0;
}
