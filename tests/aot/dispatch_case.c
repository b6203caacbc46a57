/* The dispatch case of tests/aot/dispatch_case.h: its program, schedule
 * and marking. */
#include "dietcode/frontend.h"
#include "dietcode/passes.h"

#include "tests/aot/dispatch_case.h"

#include <string.h>

static const char tex[] =
    "dim T in 1..48\n"
    "input X[T, 24] f32\n"
    "input W[20, 24] f32\n"
    "input b[20] f32\n"
    "output Y[i: T, j: 20] = sum[k: 24](X[i, k] * W[j, k]) + b[j]\n";

const char *const dispatch_variants[DISPATCH_NVARIANTS] = {
    "threads [1, 4] tile [1, 5] rchunk 8 unroll 1 vec 1",
    "threads [2, 4] tile [3, 5] rchunk 6 unroll 2 vec 1 staged split 3",
    "threads [4, 2] tile [2, 4] rchunk 8 unroll 1 vec 8 along reduction",
};

/* T <= LE0 ? v0 : T <= LE1 ? v1 : v2, nodes in preorder */
static const DispatchNode nodes[] = {
    {-1, 0, DISPATCH_LE0, 1, 2},
    {0, 0, 0, 0, 0},
    {-1, 0, DISPATCH_LE1, 3, 4},
    {1, 0, 0, 0, 0},
    {2, 0, 0, 0, 0},
};
static const Dispatch tree = {sizeof nodes / sizeof *nodes, nodes};

TeProgram *dispatch_program(const char *name)
{
    FeUnit u;
    if (fe_load_text("dispatch.tex", name, tex, &u) != 0)
        ir_diags_print(&u.diags, stderr);
    TeProgram *p = u.prog;
    u.prog = NULL; /* the caller's */
    fe_unload(&u);
    return p;
}

typedef struct Mark {
    ExprCtx *c;
    const Tensor *out;
    int variant;
} Mark;

static void mark_store(Stmt *s, void *ud)
{
    Mark *m = ud;
    if (s->kind == ST_STORE && s->store.buf == m->out)
        s->store.value = ir_binop(m->c, EX_ADD, s->store.value,
                                  ir_float(m->c, DISPATCH_MARK * m->variant));
}

LoopProgram *dispatch_lower(TeProgram *p, PassTarget kind, bool mark, char *err, size_t errlen)
{
    MicroKernel *mk = IR_NEWN(p->arena, MicroKernel, DISPATCH_NVARIANTS);
    for (int v = 0; v < DISPATCH_NVARIANTS; v++) {
        int nsp;
        if (!pass_parse_microkernel(dispatch_variants[v], &mk[v], &nsp) || nsp != 2) {
            snprintf(err, errlen, "bad micro-kernel %s", dispatch_variants[v]);
            return NULL;
        }
    }
    StageSchedule *sched = IR_NEWN(p->arena, StageSchedule, p->ntensors);
    sched[ir_te_find(p, "Y")->id] = (StageSchedule){DISPATCH_NVARIANTS, mk, &tree};
    TargetInfo ti = pass_target_info(kind);
    LoopProgram *lp = pass_run_pipeline_sched(p, sched, &ti, &(PipelineOpts){.verify_each = true},
                                              err, errlen);
    for (int i = 0; lp && mark && i < lp->nkernels; i++) {
        if (lp->kernels[i]->variant == 0)
            continue;
        Mark m = {p->ctx, lp->stages[0].out, lp->kernels[i]->variant};
        ir_stmt_visit(lp->kernels[i]->body, mark_store, &m);
    }
    return lp;
}
