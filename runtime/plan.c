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
 * The workspace holds the intermediates and the scratch buffers of the
 * chosen variants, each at a multiple of DCRT_ALIGN bytes. Buffers share
 * memory by lifetime: in stage order, a buffer takes memory at the first
 * stage that writes it (the smallest free block that holds it, else the
 * end of the workspace) and gives it back after the last stage that reads
 * it, so a chain of intermediates needs two buffers' room, not one per
 * link, and the workspace is never larger than the buffers one after
 * another.
 */
#include "dietcode/runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for laying the workspace out: free blocks, and the buffers in the
 * workspace by the stage where their span starts and where it ends. */
typedef struct Layout {
    int nfree;
    int64_t *free_at, *free_bytes; /* nbuffers each */
    int32_t *first, *last;         /* nstages + 1 each: where a stage's buffers begin */
    int32_t *by_first, *by_last;   /* nbuffers each */
} Layout;

DcrtPlan *dcrt_plan_new(const DcrtProgram *p)
{
    size_t ns = (size_t)p->nstages + 1, nb = (size_t)p->nbuffers + 1, nk = (size_t)p->nkernels + 1;
    size_t bytes = sizeof(DcrtPlan) + sizeof(Layout) + nk * sizeof(DcrtLaunch) +
                   4 * nb * sizeof(int64_t) + (ns + 2 * (ns + 1) + 2 * nb) * sizeof(int32_t);
    DcrtPlan *pl = calloc(1, bytes);
    if (!pl) {
        dcrt_fail(DCRT_ERR_OUT_OF_MEMORY, "out of memory for a launch plan");
        return NULL;
    }
    Layout *lo = (Layout *)(pl + 1);
    pl->own = lo;
    char *m = (char *)(lo + 1);
#define TAKE(field, n) (field = (void *)m, m += (n) * sizeof *(field))
    TAKE(pl->launches, nk);
    TAKE(pl->numel, nb);
    TAKE(pl->offset, nb);
    TAKE(lo->free_at, nb);
    TAKE(lo->free_bytes, nb);
    TAKE(pl->variant, ns);
    TAKE(lo->first, ns + 1);
    TAKE(lo->last, ns + 1);
    TAKE(lo->by_first, nb);
    TAKE(lo->by_last, nb);
#undef TAKE
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

/* The buffers with offset[i] == 0 (those in the workspace) listed by key
 * (first or last stage, clamped to 0 .. nstages - 1): a counting sort into
 * list, start[s] .. start[s + 1] - 1 for stage s. */
static void by_stage(const DcrtProgram *p, const DcrtPlan *pl, bool first, int32_t *start,
                     int32_t *list)
{
    int ns = p->nstages;
    for (int s = 0; s <= ns; s++)
        start[s] = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->nbuffers; i++) {
            if (pl->offset[i] != 0)
                continue;
            const DcrtBuffer *b = &p->buffers[i];
            int f = b->first >= 0 && b->first < ns ? b->first : 0;
            int s = first ? f : b->last >= f && b->last < ns ? b->last : f;
            if (pass == 0)
                start[s + 1]++;
            else
                list[start[s]++] = i;
        }
        if (pass == 0)
            for (int s = 0; s < ns; s++)
                start[s + 1] += start[s];
    }
    for (int s = ns; s > 0; s--) /* the second pass moved each start to the next */
        start[s] = start[s - 1];
    start[0] = 0;
}

/* Memory for a buffer of the given bytes: the smallest free block that
 * holds it, else a free block at the end grown, else the end. */
static int64_t take(Layout *lo, DcrtPlan *pl, int64_t bytes)
{
    int best = -1;
    for (int f = 0; f < lo->nfree; f++)
        if (lo->free_bytes[f] >= bytes && (best < 0 || lo->free_bytes[f] < lo->free_bytes[best]))
            best = f;
    if (best < 0) {
        for (int f = 0; f < lo->nfree; f++)
            if (lo->free_at[f] + lo->free_bytes[f] == pl->workspace_bytes)
                best = f;
        if (best < 0) {
            pl->workspace_bytes += bytes;
            return pl->workspace_bytes - bytes;
        }
        pl->workspace_bytes = lo->free_at[best] + bytes;
        lo->free_bytes[best] = bytes;
    }
    int64_t at = lo->free_at[best];
    lo->free_at[best] += bytes;
    lo->free_bytes[best] -= bytes;
    if (lo->free_bytes[best] == 0) {
        lo->nfree--;
        lo->free_at[best] = lo->free_at[lo->nfree];
        lo->free_bytes[best] = lo->free_bytes[lo->nfree];
    }
    return at;
}

/* Gives [at, at + bytes) back, merged with the free blocks beside it. */
static void give(Layout *lo, int64_t at, int64_t bytes)
{
    for (int f = 0; f < lo->nfree;) {
        if (lo->free_at[f] + lo->free_bytes[f] == at || at + bytes == lo->free_at[f]) {
            if (lo->free_at[f] < at)
                at = lo->free_at[f];
            bytes += lo->free_bytes[f];
            lo->nfree--;
            lo->free_at[f] = lo->free_at[lo->nfree];
            lo->free_bytes[f] = lo->free_bytes[lo->nfree];
        } else {
            f++;
        }
    }
    lo->free_at[lo->nfree] = at;
    lo->free_bytes[lo->nfree++] = bytes;
}

static int64_t padded_bytes(const DcrtBuffer *b, int64_t numel)
{
    return (numel * rt_dtype_size(b->dtype) + DCRT_ALIGN - 1) / DCRT_ALIGN * DCRT_ALIGN;
}

/* Offsets for the buffers marked with offset 0, by lifetime. */
static void layout(const DcrtProgram *p, DcrtPlan *pl)
{
    Layout *lo = pl->own;
    by_stage(p, pl, true, lo->first, lo->by_first);
    by_stage(p, pl, false, lo->last, lo->by_last);
    lo->nfree = 0;
    pl->workspace_bytes = 0;
    for (int s = 0; s < p->nstages; s++) {
        for (int k = lo->first[s]; k < lo->first[s + 1]; k++) {
            int i = lo->by_first[k];
            pl->offset[i] = take(lo, pl, padded_bytes(&p->buffers[i], pl->numel[i]));
        }
        for (int k = lo->last[s]; k < lo->last[s + 1]; k++) {
            int i = lo->by_last[k];
            give(lo, pl->offset[i], padded_bytes(&p->buffers[i], pl->numel[i]));
        }
    }
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
        if (b->kind == DCRT_BUF_TEMP || b->kind == DCRT_BUF_SCRATCH || b->kind == DCRT_BUF_CHECK)
            pl->offset[i] = 0; /* in the workspace: laid out below */
    }
    if (rc == DCRT_OK && p->nstages > 0)
        layout(p, pl);
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
    if (!p || (!dims && p->ndims > 0) || !(p = dcrt_cpu_program(p, NULL)))
        return 0;
    DcrtPlan *pl = dcrt_plan_new(p);
    size_t n = pl && dcrt_plan(p, dims, pl) == DCRT_OK ? (size_t)pl->workspace_bytes : 0;
    dcrt_plan_free(pl);
    return n;
}
