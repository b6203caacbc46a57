/* The pipeline: the passes in order, as straight-line code. Each call goes
 * through step(), which times the pass, verifies the IR afterwards
 * (--verify-each: the TE program as inlining leaves it, then the loop IR),
 * dumps it (--dump-after; a pass that changed nothing says "unchanged"
 * instead) and stops (--stop-after). */
#include "dietcode/passes.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const names[] = {"inline", "lower", "tile", "stage", "pad", "bind",
                                    "simplify", "vectorize", "edge", "hoist", NULL};

const char *const *pass_names(void) { return names; }

typedef struct Run {
    const PipelineOpts *o;
    FILE *out;
    LoopProgram *lp;
    TeProgram *te;
    Expr **bodies;        /* after inline: the bodies as inlined */
    bool *materialized;
    char *last;           /* with --dump-after: the IR as the previous pass left it */
    double t0;
    bool stopped;
    char *err;
    size_t errlen;
    bool failed;
} Run;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The IR as text: the loop IR, or before lowering the TE program (as
 * inlined once it is). */
static char *render(const Run *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        ir_panic(__FILE__, __LINE__, "out of memory");
    if (r->lp)
        ir_print_loops(f, r->lp);
    else if (r->bodies)
        ir_print_te_inlined(f, r->te, r->bodies, r->materialized);
    else
        ir_print_te(f, r->te);
    fclose(f);
    return text;
}

/* After a pass: time, verify, dump, and say whether to stop. */
static bool step(Run *r, const char *name)
{
    double t = now() - r->t0;
    if (r->o->time_passes)
        fprintf(r->out, "time: %-10s %8.3f ms\n", name, t * 1e3);
    if (r->o->verify_each &&
        (r->lp ? !ir_verify_loops(r->lp, r->err, r->errlen)
               : !ir_verify_te_inlined(r->te, r->bodies, r->materialized, r->err, r->errlen))) {
        r->failed = true;
        return false;
    }
    if (r->o->dump_after) {
        char *now_text = render(r);
        if (strcmp(r->o->dump_after, "all") == 0 || strcmp(r->o->dump_after, name) == 0) {
            if (strcmp(now_text, r->last) == 0)
                fprintf(r->out, "# after %s: unchanged\n\n", name);
            else
                fprintf(r->out, "# after %s\n%s\n", name, now_text);
        }
        free(r->last);
        r->last = now_text;
    }
    if (r->o->stop_after && strcmp(r->o->stop_after, name) == 0) {
        r->stopped = true;
        return false;
    }
    r->t0 = now();
    return true;
}

/* The schedule the pipeline lowers: per computed, materialised tensor
 * sched's variants legalised for ti, or the default schedule.
 * NULL with a message when a dispatch tree does not fit its stage or a
 * variant is past pass_check_microkernel's budgets. */
static StageSchedule *resolve_schedule(TeProgram *p, const StageSchedule *sched, Expr **bodies,
                                       const bool *materialized, const TargetInfo *ti,
                                       char *err, size_t errlen)
{
    StageSchedule *out = IR_NEWN(p->arena, StageSchedule, p->ntensors ? p->ntensors : 1);
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT || !materialized[i])
            continue;
        const StageSchedule *s = sched && sched[i].nvariants > 0 ? &sched[i] : NULL;
        if (!s) {
            out[i] = pass_default_schedule(p, t, bodies[i], ti);
            continue;
        }
        int n = s->nvariants;
        MicroKernel *mk = IR_NEWN(p->arena, MicroKernel, n);
        for (int v = 0; v < n; v++) {
            mk[v] = s->variants[v];
            pass_legalize_microkernel(&mk[v], t, ti);
            if (!pass_check_microkernel(&mk[v], t, ti, err, errlen))
                return NULL;
        }
        char why[200];
        if (!ir_verify_dispatch(s->dispatch, n, p->ndims, why, sizeof why)) {
            snprintf(err, errlen, "schedule of %s: %s", t->name, why);
            return NULL;
        }
        out[i] = (StageSchedule){n, mk, s->dispatch};
    }
    return out;
}

LoopProgram *pass_run_pipeline_sched(TeProgram *p, const StageSchedule *sched,
                                     const TargetInfo *ti, const PipelineOpts *opts, char *err,
                                     size_t errlen)
{
    if (!IR_ARG_OK(p, err, errlen) || !IR_ARG_OK(ti, err, errlen))
        return NULL;
    if (!ir_te_consts_whole(p, err, errlen))
        return NULL;
    static const PipelineOpts none = {0};
    Run r = {.o = opts ? opts : &none, .te = p, .t0 = now(), .err = err, .errlen = errlen};
    r.out = r.o->dump ? r.o->dump : stderr;
    int n = p->ntensors ? p->ntensors : 1;
    Expr **bodies = IR_NEWN(p->arena, Expr *, n);
    bool *materialized = IR_NEWN(p->arena, bool, n);
    if (r.o->dump_after)
        r.last = render(&r);

    pass_inline(p, bodies, materialized);
    r.bodies = bodies;
    r.materialized = materialized;
    StageSchedule *chosen = resolve_schedule(p, sched, bodies, materialized, ti, err, errlen);
    if (!chosen)
        return NULL;
    if (!step(&r, "inline"))
        goto done;
    r.lp = pass_lower(p, bodies, materialized, chosen, ti, r.o->release_consts);
    r.lp->gpu = ti->kind == PT_GPU;
    if (!step(&r, "lower"))
        goto done;
    pass_tile(r.lp, ti);
    if (!step(&r, "tile"))
        goto done;
    pass_stage(r.lp, ti);
    if (!step(&r, "stage"))
        goto done;
    pass_pad(r.lp);
    if (!step(&r, "pad"))
        goto done;
    pass_bind(r.lp, ti);
    if (!step(&r, "bind"))
        goto done;
    pass_simplify(r.lp);
    if (!step(&r, "simplify"))
        goto done;
    pass_vectorize(r.lp, ti);
    if (!step(&r, "vectorize"))
        goto done;
    pass_edge(r.lp, ti);
    if (!step(&r, "edge"))
        goto done;
    pass_hoist(r.lp);
    step(&r, "hoist");
done:
    free(r.last);
    if (r.failed)
        return NULL;
    if (!r.lp) { /* stopped after inline: nothing lowered yet */
        r.lp = ir_loop_program_new(p);
        for (int i = 0; i < p->ntensors; i++)
            r.lp->materialized[i] = materialized[i];
    }
    return r.lp;
}

LoopProgram *pass_run_pipeline(TeProgram *p, const MicroKernel *mks, const TargetInfo *ti,
                               const PipelineOpts *opts, char *err, size_t errlen)
{
    if (!IR_ARG_OK(p, err, errlen))
        return NULL;
    StageSchedule *sched = NULL;
    if (mks) {
        sched = IR_NEWN(p->arena, StageSchedule, p->ntensors ? p->ntensors : 1);
        for (int i = 0; i < p->ntensors; i++)
            sched[i] = (StageSchedule){1, &mks[i], NULL};
    }
    return pass_run_pipeline_sched(p, sched, ti, opts, err, errlen);
}
