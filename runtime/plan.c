/* The launch plan of one call: the one place that decides, for a program's
 * table (dietcode/abi.h) and the dims of a call, which variant each stage
 * runs, the grid of every launch, where each intermediate and scratch
 * buffer lies in the workspace, and whether the call can run at all.
 *
 * Compiled objects call it through dcrt_run and dcrt_cuda_run; dcc's
 * executors through exec/plan.c, with a table built in memory for the
 * lowered program. The checks, in order, each failing with one message
 * that dcrt_last_error then returns:
 *   - every dim within LO .. its largest accepted value (DCRT_ERR_DIM_RANGE)
 *   - every extent of every tensor, and of every scratch buffer the chosen
 *     variants use, computed without overflow and at least 1, and no such
 *     buffer over DCRT_MAX_ELEMENTS elements (DCRT_ERR_TOO_LARGE: kernels
 *     may index with 32-bit arithmetic, codegen/index.c)
 *   - every grid 1 .. INT32_MAX blocks (DCRT_ERR_TOO_LARGE)
 * The workspace holds the intermediates, then the scratch buffers of the
 * chosen variants, in buffer order, each at a multiple of DCRT_ALIGN bytes.
 */
#include "dietcode/runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DcrtPlan *dcrt_plan_new(const DcrtProgram *p)
{
    size_t ns = (size_t)p->nstages + 1, nb = (size_t)p->nbuffers + 1, nk = (size_t)p->nkernels + 1;
    DcrtPlan *pl = calloc(1, sizeof *pl + nk * sizeof *pl->launches + ns * sizeof *pl->variant +
                                 2 * nb * sizeof(int64_t));
    if (!pl) {
        dcrt_fail(DCRT_ERR_OUT_OF_MEMORY, "out of memory for a launch plan");
        return NULL;
    }
    char *m = (char *)(pl + 1);
    pl->launches = (DcrtLaunch *)m;
    m += nk * sizeof *pl->launches;
    pl->numel = (int64_t *)m;
    m += nb * sizeof(int64_t);
    pl->offset = (int64_t *)m;
    m += nb * sizeof(int64_t);
    pl->variant = (int32_t *)m;
    return pl;
}

void dcrt_plan_free(DcrtPlan *pl) { free(pl); }

static int failf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int failf(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dcrt_fail(code, msg);
}

static int check_dims(const DcrtProgram *p, const int64_t *dims)
{
    for (int i = 0; i < p->ndims; i++) {
        const DcrtDim *d = &p->dims[i];
        if (dims[i] < d->lo)
            return failf(DCRT_ERR_DIM_RANGE, "%s: %s = %lld is below the declared range %lld..%lld",
                         p->name, d->name, (long long)dims[i], (long long)d->lo, (long long)d->hi);
        if (dims[i] > d->max) {
            if (d->max == d->hi)
                return failf(DCRT_ERR_DIM_RANGE,
                             "%s: %s = %lld is above the declared range %lld..%lld, and the "
                             "program's accesses are proven in bounds only within it",
                             p->name, d->name, (long long)dims[i], (long long)d->lo,
                             (long long)d->hi);
            return failf(DCRT_ERR_DIM_RANGE, "%s: %s = %lld is too large (at most %lld)", p->name,
                         d->name, (long long)dims[i], (long long)d->max);
        }
    }
    return DCRT_OK;
}

/* The variant stage s runs for dims. */
static int pick(const DcrtProgram *p, const DcrtStage *st, const int64_t *dims, int32_t *v)
{
    *v = 0;
    if (st->nnodes == 0)
        return DCRT_OK;
    const DcrtNode *nodes = p->nodes + st->nodes;
    int32_t i = 0;
    for (int steps = 0; steps < st->nnodes; steps++) {
        const DcrtNode *n = &nodes[i];
        if (n->variant >= 0) {
            if (n->variant >= st->nvariants)
                break;
            *v = n->variant;
            return DCRT_OK;
        }
        if (n->dim < 0 || n->dim >= p->ndims)
            break;
        i = dims[n->dim] <= n->le ? n->then_node : n->else_node;
        if (i <= 0 || i >= st->nnodes)
            break;
    }
    return failf(DCRT_ERR_MODULE, "%s: the dispatch tree of stage %s is damaged", p->name,
                 st->name);
}

/* Buffer b's element count, checked. */
static int buffer_size(const DcrtProgram *p, const DcrtBuffer *b, const int64_t *dims,
                       int64_t *numel)
{
    int64_t n = 1;
    for (int j = 0; j < b->rank; j++) {
        int32_t ovf = 0;
        int64_t e = p->size(p->size_ctx, b->extents + j, dims, &ovf);
        if (ovf || e < 1)
            return failf(DCRT_ERR_TOO_LARGE, "%s: extent %d of tensor %s is below 1 for these sizes",
                         p->name, j, b->name);
        if (__builtin_mul_overflow(n, e, &n))
            n = INT64_MAX;
    }
    if (n > DCRT_MAX_ELEMENTS)
        return failf(DCRT_ERR_TOO_LARGE,
                     "%s: sizes too large: tensor %s would have %s%lld elements, more than the "
                     "%d a tensor may have (32-bit indices)",
                     p->name, b->name, n == INT64_MAX ? "over " : "", (long long)n,
                     DCRT_MAX_ELEMENTS);
    *numel = n;
    return DCRT_OK;
}

int dcrt_plan(const DcrtProgram *p, const int64_t *dims, DcrtPlan *pl)
{
    if (p->abi != DCRT_ABI_VERSION)
        return failf(DCRT_ERR_MODULE, "%s: the object was built for libdcrt ABI %d, this is %d",
                     p->name ? p->name : "?", (int)p->abi, DCRT_ABI_VERSION);
    int rc = check_dims(p, dims);
    for (int s = 0; s < p->nstages && rc == DCRT_OK; s++)
        rc = pick(p, &p->stages[s], dims, &pl->variant[s]);
    pl->workspace_bytes = 0;
    for (int i = 0; i < p->nbuffers && rc == DCRT_OK; i++) {
        const DcrtBuffer *b = &p->buffers[i];
        pl->numel[i] = 0;
        pl->offset[i] = -1;
        if (b->kind == DCRT_BUF_SCRATCH && pl->variant[b->stage] != b->variant)
            continue;
        rc = buffer_size(p, b, dims, &pl->numel[i]);
        if (rc == DCRT_OK && (b->kind == DCRT_BUF_TEMP || b->kind == DCRT_BUF_SCRATCH)) {
            pl->offset[i] = pl->workspace_bytes;
            int64_t bytes = (pl->numel[i] * 4 + DCRT_ALIGN - 1) / DCRT_ALIGN * DCRT_ALIGN;
            pl->workspace_bytes += bytes;
        }
    }
    pl->nlaunches = 0;
    for (int s = 0; s < p->nstages && rc == DCRT_OK; s++) {
        const DcrtStage *st = &p->stages[s];
        const DcrtVariant *v = &p->variants[st->variants + pl->variant[s]];
        for (int k = v->first; k < v->first + v->count && rc == DCRT_OK; k++) {
            const DcrtKernel *kn = &p->kernels[k];
            int32_t ovf = 0;
            int64_t blocks = p->size(p->size_ctx, kn->blocks, dims, &ovf);
            if (ovf || blocks < 1 || blocks > INT32_MAX)
                rc = failf(DCRT_ERR_TOO_LARGE, "%s: kernel %s: %s%lld blocks cannot be launched",
                           p->name, kn->name, ovf ? "over " : "", (long long)blocks);
            pl->launches[pl->nlaunches++] =
                (DcrtLaunch){s, pl->variant[s], k, kn->threads, blocks};
        }
    }
    return rc;
}

size_t dcrt_workspace_size(const DcrtProgram *p, const int64_t *dims)
{
    DcrtPlan *pl = dcrt_plan_new(p);
    size_t n = pl && dcrt_plan(p, dims, pl) == DCRT_OK ? (size_t)pl->workspace_bytes : 0;
    dcrt_plan_free(pl);
    return n;
}
