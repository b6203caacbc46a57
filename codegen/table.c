/* The program table of dietcode/abi.h for a lowered program: its dims,
 * buffers, kernels, each stage's variants and dispatch tree, and the size
 * expressions (extents and grids) by number.
 *
 * This is the only translation from a LoopProgram to what the plan of a
 * call is made from. codegen/host.c writes it into objects as constants
 * (the sizes as one compiled function); exec/plan.c hands it, with an
 * evaluator of the sizes, to the same runtime/plan.c those objects call.
 */
#include "dietcode/codegen.h"

#include <stdlib.h>
#include <string.h>

/* The index of e among the sizes, added when new (a grid; a buffer's
 * extents are added in a row of their own). */
static int32_t size_index(CgTable *t, Expr *e)
{
    for (int i = 0; i < t->nsizes; i++)
        if (t->sizes[i] == e)
            return i;
    t->sizes[t->nsizes] = e;
    return t->nsizes++;
}

static int32_t buffer_kind(const LoopProgram *lp, const Tensor *b)
{
    if (b == lp->index_error)
        return DCRT_BUF_CHECK;
    if (b->data) /* a constant, or a constant's panels packed when compiling */
        return DCRT_BUF_CONST;
    if (b->id >= lp->te->ntensors)
        return DCRT_BUF_SCRATCH;
    switch (b->kind) {
    case TK_INPUT: return DCRT_BUF_INPUT;
    case TK_OUTPUT: return DCRT_BUF_OUTPUT;
    case TK_TEMP: return lp->materialized[b->id] ? DCRT_BUF_TEMP : DCRT_BUF_INLINED;
    }
    IR_UNREACHABLE();
}

/* Each buffer's span: the first stage whose kernels (any variant's) write
 * it and the last whose kernels read it. */
static void spans(const LoopProgram *lp, DcrtBuffer *bufs)
{
    unsigned char *use = calloc((size_t)lp->nbuffers + 1, 1);
    int *touched = calloc((size_t)lp->nbuffers + 1, sizeof *touched);
    if (!use || !touched)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        int n = ir_kernel_uses(k, use, touched);
        for (int j = 0; j < n; j++) {
            int b = touched[j];
            DcrtBuffer *x = &bufs[b];
            if ((use[b] & IR_WRITES) && (x->first < 0 || k->stage < x->first))
                x->first = k->stage;
            if (k->stage > x->last)
                x->last = k->stage;
            use[b] = 0;
        }
    }
    free(use);
    free(touched);
}

int cg_kernel_uses(const LoopProgram *lp, const Kernel *k, unsigned char *use, int *touched)
{
    int n = ir_kernel_uses(k, use, touched);
    if (lp->index_error) {
        int id = lp->index_error->id;
        if (!use[id] && touched)
            touched[n++] = id;
        use[id] |= IR_WRITES;
    }
    return n;
}

static int by_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int cg_kernel_params(const LoopProgram *lp, const Kernel *k, int32_t *ids)
{
    unsigned char *use = calloc((size_t)lp->nbuffers + 1, 1);
    int *touched = malloc(sizeof *touched * ((size_t)lp->nbuffers + 1));
    if (!use || !touched)
        ir_panic(__FILE__, __LINE__, "out of memory");
    int nt = cg_kernel_uses(lp, k, use, touched), n = 0;
    for (int i = 0; i < nt; i++)
        if (lp->materialized[touched[i]])
            ids[n++] = touched[i];
    qsort(ids, (size_t)n, sizeof *ids, by_id);
    free(use);
    free(touched);
    return n;
}

CgTable *cg_table_new(const LoopProgram *lp)
{
    if (!lp)
        return NULL;
    const TeProgram *te = lp->te;
    int nvariants = 0, nnodes = 0, nextents = 0;
    for (int s = 0; s < lp->nstages; s++) {
        nvariants += lp->stages[s].nvariants;
        nnodes += lp->stages[s].dispatch ? lp->stages[s].dispatch->nnodes : 0;
    }
    for (int i = 0; i < lp->nbuffers; i++)
        nextents += lp->buffers[i]->rank;
    CgTable *t = calloc(1, sizeof *t);
    if (!t)
        ir_panic(__FILE__, __LINE__, "out of memory");
    t->arena = ir_arena_new();
#define TAKE(T, n) ((T *)ir_arena_alloc(t->arena, sizeof(T) * (size_t)((n) + 1)))
    DcrtDim *dims = TAKE(DcrtDim, te->ndims);
    DcrtBuffer *bufs = TAKE(DcrtBuffer, lp->nbuffers);
    int32_t *params = TAKE(int32_t, te->ntensors);
    DcrtKernel *kernels = TAKE(DcrtKernel, lp->nkernels);
    int32_t *ids = malloc(sizeof *ids * ((size_t)lp->nbuffers + 1));
    int64_t total = 0;
    if (!ids)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < lp->nkernels; i++)
        total += cg_kernel_params(lp, lp->kernels[i], ids);
    free(ids);
    int32_t *kargs = TAKE(int32_t, total);
    DcrtVariant *variants = TAKE(DcrtVariant, nvariants);
    DcrtNode *nodes = TAKE(DcrtNode, nnodes);
    DcrtStage *stages = TAKE(DcrtStage, lp->nstages);
    t->sizes = TAKE(Expr *, nextents + lp->nkernels);
#undef TAKE

    for (int i = 0; i < te->ndims; i++) {
        const Var *d = te->dims[i];
        dims[d->pos] = (DcrtDim){d->name, d->lo, d->hi, d->max};
    }
    for (int i = 0; i < lp->nbuffers; i++) {
        const Tensor *b = lp->buffers[i];
        bufs[i] = (DcrtBuffer){b->name, buffer_kind(lp, b), b->rank, t->nsizes, -1, -1, -1, -1,
                               (int32_t)b->dtype, b->data};
        for (int j = 0; j < b->rank; j++)
            t->sizes[t->nsizes++] = b->shape[j];
    }
    int np = ir_te_params(te, params);
    int nargs = 0;
    for (int i = 0; i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        int n = cg_kernel_params(lp, k, kargs + nargs);
        kernels[i] = (DcrtKernel){k->name, size_index(t, k->body->loop.var->extent), k->nthreads,
                                  (int32_t)cg_dynamic_shared_bytes(lp, k), nargs, n};
        nargs += n;
    }
    int nv = 0, nn = 0;
    for (int s = 0; s < lp->nstages; s++) {
        const Stage *st = &lp->stages[s];
        const Dispatch *d = st->dispatch;
        int dn = d ? d->nnodes : 0;
        stages[s] = (DcrtStage){st->out->name, nv, st->nvariants, nn, dn};
        for (int v = 0; v < st->nvariants; v++) {
            const Variant *va = &st->variants[v];
            variants[nv++] = (DcrtVariant){va->first, va->nkernels};
            for (int j = 0; j < va->nscratch; j++) {
                bufs[va->scratch[j]->id].stage = s;
                bufs[va->scratch[j]->id].variant = v;
            }
        }
        for (int i = 0; i < dn; i++) {
            const DispatchNode *x = &d->nodes[i];
            nodes[nn++] = (DcrtNode){x->variant, x->dim, x->then_node, x->else_node, x->le};
        }
    }
    spans(lp, bufs);
    for (int i = 0; i < lp->nbuffers; i++)
        if (bufs[i].kind == DCRT_BUF_CONST && bufs[i].last < 0)
            bufs[i].data = NULL; /* no kernel reads it (folded into another): not carried */
    if (lp->index_error) { /* written anywhere, read after the last launch */
        bufs[lp->index_error->id].first = 0;
        bufs[lp->index_error->id].last = lp->nstages > 0 ? lp->nstages - 1 : 0;
    }
    t->prog = (DcrtProgram){
        .abi = DCRT_ABI_VERSION,
        .name = te->name,
        .ndims = te->ndims,
        .nbuffers = lp->nbuffers,
        .nparams = np,
        .nkernels = lp->nkernels,
        .nvariants = nv,
        .nnodes = nn,
        .nstages = lp->nstages,
        .dims = dims,
        .buffers = bufs,
        .params = params,
        .kernels = kernels,
        .variants = variants,
        .nodes = nodes,
        .stages = stages,
        .kernel_args = kargs,
    };
    t->nkernel_args = nargs;
    return t;
}

void cg_table_free(CgTable *t)
{
    if (!t)
        return;
    ir_arena_destroy(t->arena);
    free(t);
}
