/* The launch plan of a lowered program, for dcc's executors.
 *
 * The table of the program (codegen/table.c: the same one codegen/host.c
 * compiles into objects) goes to runtime/plan.c with an evaluator of its
 * size expressions over Exprs here, so the loop interpreter, the emulator
 * and --emit=plan plan every call exactly as a shipped object plans it.
 */
#include "dietcode/exec.h"

#include <stdlib.h>
#include <string.h>

struct ExProgram {
    CgTable *table;
    const LoopProgram *lp;
};

static int64_t eval_size(const void *ctx, int32_t which, const int64_t *dims, int32_t *overflow)
{
    const CgTable *t = ctx;
    int64_t v = 0;
    if (which < 0 || which >= t->nsizes || !ir_eval_dims_checked(t->sizes[which], dims, &v))
        *overflow = 1;
    return v;
}

ExProgram *ex_program_new(const LoopProgram *lp)
{
    if (!lp)
        return NULL;
    ExProgram *x = calloc(1, sizeof *x);
    if (!x)
        ir_panic(__FILE__, __LINE__, "out of memory");
    x->lp = lp;
    x->table = cg_table_new(lp);
    x->table->prog.size = eval_size;
    x->table->prog.size_ctx = x->table;
    return x;
}

void ex_program_free(ExProgram *x)
{
    if (!x)
        return;
    cg_table_free(x->table);
    free(x);
}

const DcrtProgram *ex_program_table(const ExProgram *x) { return &x->table->prog; }

DcrtPlan *ex_plan(const ExProgram *x, const int64_t *dims, char *err, size_t errlen)
{
    if (!IR_ARG_OK(x, err, errlen) || (x->lp->te->ndims > 0 && !IR_ARG_OK(dims, err, errlen)))
        return NULL;
    const DcrtProgram *p = &x->table->prog;
    DcrtPlan *pl = dcrt_plan_new(p);
    if (!pl || dcrt_plan(p, dims, pl) != DCRT_OK) {
        snprintf(err, errlen, "%s", dcrt_last_error());
        dcrt_plan_free(pl);
        return NULL;
    }
    return pl;
}

int ex_call_begin(const ExProgram *x, const int64_t *dims, float *const *tensors, ExCall *c,
                  char *err, size_t errlen)
{
    if (!IR_ARG_OK(c, err, errlen))
        return -1;
    memset(c, 0, sizeof *c);
    if (!IR_ARG_OK(x, err, errlen) || !IR_ARG_OK(tensors, err, errlen))
        return -1;
    const DcrtProgram *p = &x->table->prog;
    c->plan = ex_plan(x, dims, err, errlen);
    if (!c->plan)
        return -1;
    c->args = calloc((size_t)p->nparams + 1, sizeof *c->args);
    if (!c->args)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < p->nparams; i++)
        c->args[i] = tensors[p->params[i]];
    if (dcrt_check_params(p, (const void *const *)c->args) != DCRT_OK) {
        snprintf(err, errlen, "%s", dcrt_last_error());
        return -1;
    }
    c->workspace = aligned_alloc(DCRT_ALIGN, (size_t)c->plan->workspace_bytes + DCRT_ALIGN);
    c->bufs = c->workspace ? dcrt_bind_buffers(p, c->plan, c->args, c->workspace) : NULL;
    if (!c->bufs) {
        snprintf(err, errlen, "out of memory for the workspace");
        return -1;
    }
    return 0;
}

void ex_call_end(ExCall *c)
{
    free(c->bufs);
    free(c->workspace);
    free(c->args);
    dcrt_plan_free(c->plan);
    memset(c, 0, sizeof *c);
}

static void print_shape(FILE *out, const DcrtProgram *p, int b, const int64_t *dims)
{
    fputc('[', out);
    for (int j = 0; j < p->buffers[b].rank; j++) {
        int32_t ovf = 0;
        fprintf(out, "%s%lld", j ? ", " : "",
                (long long)p->size(p->size_ctx, p->buffers[b].extents + j, dims, &ovf));
    }
    fputc(']', out);
}

int ex_plan_print(FILE *out, const LoopProgram *lp, const int64_t *dims, char *err,
                  size_t errlen)
{
    if (!IR_ARG_OK(out, err, errlen) || !IR_ARG_OK(lp, err, errlen))
        return -1;
    ExProgram *x = ex_program_new(lp);
    const DcrtProgram *p = ex_program_table(x);
    DcrtPlan *pl = ex_plan(x, dims, err, errlen);
    if (!pl) {
        ex_program_free(x);
        return -1;
    }
    fprintf(out, "# plan of %s for", lp->te->name);
    for (int i = 0; i < p->ndims; i++)
        fprintf(out, "%s %s = %lld", i ? "," : "", p->dims[i].name, (long long)dims[i]);
    fprintf(out, "\n# %d launch%s, workspace %lld bytes\n", pl->nlaunches,
            pl->nlaunches == 1 ? "" : "es", (long long)pl->workspace_bytes);
    for (int s = 0; s < lp->nstages; s++) {
        const Stage *st = &lp->stages[s];
        const Variant *va = &st->variants[pl->variant[s]];
        fprintf(out, "stage %s: variant %d of %d: ", st->out->name, pl->variant[s], st->nvariants);
        ir_print_microkernel(out, &va->mk, st->out->rank);
        fputc('\n', out);
        for (int i = 0; i < pl->nlaunches; i++) {
            const DcrtLaunch *l = &pl->launches[i];
            if (l->stage != s)
                continue;
            const Kernel *k = lp->kernels[l->kernel];
            int32_t dyn = p->kernels[l->kernel].shared_bytes;
            fprintf(out, "  launch %s: grid %lld, block %d", k->name, (long long)l->blocks,
                    l->threads);
            if (dyn > 0)
                fprintf(out, ", %d bytes of dynamic shared memory", (int)dyn);
            fprintf(out, k->domain != k->out ? ", adds into %s atomically\n" : ", computes %s\n",
                    k->out->name);
        }
    }
    for (int i = 0; i < p->nbuffers; i++) {
        const DcrtBuffer *b = &p->buffers[i];
        if (b->kind == DCRT_BUF_INLINED || (b->kind == DCRT_BUF_SCRATCH && pl->offset[i] < 0))
            continue;
        static const char *const kinds[] = {
            [DCRT_BUF_INPUT] = "input", [DCRT_BUF_OUTPUT] = "output",
            [DCRT_BUF_TEMP] = "intermediate", [DCRT_BUF_SCRATCH] = "scratch",
            [DCRT_BUF_INLINED] = "inlined", [DCRT_BUF_CHECK] = "the gathers' error record",
            [DCRT_BUF_CONST] = "constant, in the object"};
        fprintf(out, "buffer %s ", b->name);
        print_shape(out, p, i, dims);
        fprintf(out, ": %s", b->kind == DCRT_BUF_CONST && !b->data ? "constant, read by no kernel"
                                                                     : kinds[b->kind]);
        if (b->dtype != DCRT_F32 && b->kind != DCRT_BUF_CHECK)
            fprintf(out, " (%s)", rt_dtype_name(b->dtype));
        fprintf(out, ", %lld bytes", (long long)pl->numel[i] * rt_dtype_size(b->dtype));
        if (pl->offset[i] >= 0)
            fprintf(out, " at workspace offset %lld", (long long)pl->offset[i]);
        fputc('\n', out);
    }
    dcrt_plan_free(pl);
    ex_program_free(x);
    return 0;
}
