/* The analytic cost of a lowered GPU program at a shape: what the model
 * backend "measures" when there is no GPU, and the GPUs' numbers.
 *
 * One table holds each architecture's SMs, FP32 lanes, clock, DRAM and L2
 * bandwidth, L2 size, shared memory, registers and resident threads and
 * blocks per SM, and the launch floor; srch_target_gpu and this file read
 * it.
 *
 * A kernel is costed from its loop IR as lowered, not from its
 * micro-kernel's parameters: a walk counts, per block, the FP32 operations
 * (a multiply feeding an add is one FMA), the global bytes loaded and
 * stored, the shared-memory wavefronts of every shared access (ir/banks.c,
 * per warp), the barriers, the shuffles and an estimate of the warp
 * instructions issued, each statement weighted by the trip counts of the
 * loops around it at this shape (a guarded statement counts as executed).
 * The plan of the call (runtime/plan.c) gives the launches and grids. Per
 * launch:
 *
 *   resident blocks per SM  r = the least the threads, registers, shared
 *                           memory and block slots allow
 *   blocks per SM           n = ceil(grid / SMs)  (the last wave's tail)
 *   compute                 n x max(FMA lane-ops / lanes, wavefronts,
 *                           warp instructions / 4 schedulers,
 *                           (barriers x 24 + exposed loads x 500) / min(r, n))
 *                           cycles, an exposed load being a barrier that
 *                           waits for global loads stored straight into
 *                           shared memory (a copy that is not double
 *                           buffered),
 *                           slowed by sqrt(warps resident / 16) below 16
 *   memory                  L2 bytes (every block's loads and stores, an
 *                           atomic add a load and a store) over
 *                           L2 bandwidth, and DRAM bytes (each buffer's
 *                           bytes once, plus the re-reads that do not fit
 *                           in L2) over DRAM bandwidth
 *   time                    max(compute, memory) + the launch floor
 *
 * and a program's time is the sum over its launches (a split-K variant
 * pays for its partial sums twice, written then read, and for a second
 * launch; an atomic one for its adds into the output, and for a first
 * launch that sets it). Contention between the parts' adds to one
 * address is not modelled.
 */
#include "dietcode/exec.h"
#include "dietcode/search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const SrchGpu gpus[] = {
    /* arch     SMs lanes  GHz   DRAM GB/s  L2 MB  L2 GB/s  smem KB regs   threads blocks launch us */
    {"sm_75",   40,  64, 1.59,   320,        4,    1300,    64,  65536, 1024, 16, 4.0}, /* T4 */
    {"sm_80",  108,  64, 1.41,  2039,       40,    5000,   164,  65536, 2048, 32, 4.0}, /* A100 80 GB */
    {"sm_86",   72, 128, 1.69,   600,        6,    2000,   100,  65536, 1536, 16, 4.0}, /* A10 */
    {"sm_87",   16, 128, 1.30,   204,        4,     600,   164,  65536, 1536, 16, 5.0}, /* Orin */
    {"sm_89",   58, 128, 2.04,   300,       48,    2500,   100,  65536, 1536, 24, 4.0}, /* L4 */
    {"sm_90",  132, 128, 1.98,  4800,       50,   10000,   228,  65536, 2048, 32, 3.0}, /* H200 */
    {"sm_90a", 132, 128, 1.98,  4800,       50,   10000,   228,  65536, 2048, 32, 3.0},
};

const SrchGpu *srch_gpu(const char *arch)
{
    for (size_t i = 0; i < sizeof gpus / sizeof *gpus; i++)
        if (arch && strcmp(gpus[i].arch, arch) == 0)
            return &gpus[i];
    return &gpus[1]; /* sm_80 */
}

/* ---- counting a kernel ---- */

enum { MAX_LETS = 32, MAX_SEEN = 256 };

typedef struct Walk {
    ExprCtx *c;
    const int64_t *dims;
    const Var *thread;
    int64_t nthreads;
    int nlets;
    Var *letv[MAX_LETS];
    Expr *letval[MAX_LETS];
    const Var *lane; /* the innermost vectorised loop's variable */
    int width;
    double mult;     /* executions per thread of the statement at hand */
    /* the unrolled loops around it: what does not depend on one is
     * computed once for all its copies (LLVM's CSE) */
    int nunrolled;
    const Var *uvar[32];
    double utrips[32];
    SrchKernelCost *k;
    const Expr *seen[MAX_SEEN]; /* nodes of the statement counted so far */
    int nseen;
    bool copied;     /* a global load went straight to shared memory since the last barrier */
    double async;    /* the multiplicity of the last async copy since then (0: none) */
} Walk;

/* Executions per thread of e: the statement's, less the copies of the
 * unrolled loops e does not depend on. */
static double mult_of(Walk *w, Expr *e)
{
    double m = w->mult;
    for (int i = 0; i < w->nunrolled; i++)
        if (!ir_expr_uses_var(e, w->uvar[i]))
            m /= w->utrips[i];
    return m;
}

static int64_t trips(Walk *w, Expr *extent)
{
    int64_t n;
    return ir_eval_dims_checked(extent, w->dims, &n) && n > 0 ? n : 1;
}

static Expr *offset_of(ExprCtx *c, const Tensor *t, int n, Expr *const *idx)
{
    Expr *f = n ? idx[0] : ir_int(c, 0);
    for (int d = 1; d < n; d++)
        f = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, f, t->shape[d]), idx[d]);
    return ir_simplify(c, f);
}

/* The stride of offset along the vector lane: 0, 1 or another (-1). */
static int lane_stride(Walk *w, Expr *off)
{
    if (!w->lane || !ir_expr_uses_var(off, w->lane))
        return 0;
    Expr *next = ir_subst(w->c, off, (Var *)w->lane,
                          ir_binop(w->c, EX_ADD, ir_varref(w->c, (Var *)w->lane), ir_int(w->c, 1)));
    int64_t d;
    return ir_is_const(ir_simplify(w->c, ir_binop(w->c, EX_SUB, next, off)), &d) && d == 1 ? 1 : -1;
}

/* One access of buffer t at idx by every lane: its cost per thread. */
static void mem_access(Walk *w, const Tensor *t, int n, Expr *const *idx, bool store, bool padded)
{
    SrchKernelCost *k = w->k;
    int lanes = w->lane ? w->width : 1;
    if (t->scope == MS_LOCAL)
        return; /* registers */
    Expr *off = offset_of(w->c, t, n, idx);
    double mult = store ? w->mult : mult_of(w, off);
    int stride = lane_stride(w, off);
    /* instructions: one per 128-bit vector, one per lane otherwise */
    int in128 = 16 / ir_dtype_size(t->dtype); /* elements in 128 bits */
    int ninstr = stride == 1 ? (lanes + in128 - 1) / in128 : stride == 0 ? 1 : lanes;
    k->instrs += mult * (ninstr + (padded ? 2 : 0));
    if (t->scope == MS_GLOBAL) {
        double bytes = (double)ir_dtype_size(t->dtype) * (stride == 0 ? 1 : lanes);
        if (store)
            k->store_bytes += mult * bytes;
        else
            k->load_bytes += mult * bytes;
        return;
    }
    /* shared: wavefronts per warp, counted per thread as 1/32 of a warp's */
    int wf;
    if (stride == 1) {
        int vw = lanes >= 4 ? 4 : lanes == 2 ? 2 : 1;
        int per = ir_access_wavefronts(w->c, off, w->thread, w->nthreads, w->nlets, w->letv,
                                       w->letval, vw > 1 ? w->lane : NULL, vw);
        wf = per < 0 ? lanes : per * (lanes / vw);
    } else if (stride == 0) {
        wf = ir_access_wavefronts(w->c, off, w->thread, w->nthreads, w->nlets, w->letv, w->letval,
                                  NULL, 1);
        if (wf < 0)
            wf = 1;
    } else {
        wf = 0;
        for (int l = 0; l < lanes; l++) {
            Expr *at = ir_subst(w->c, off, (Var *)w->lane, ir_int(w->c, l));
            int x = ir_access_wavefronts(w->c, at, w->thread, w->nthreads, w->nlets, w->letv,
                                         w->letval, NULL, 1);
            wf += x < 0 ? 1 : x;
        }
    }
    k->wavefronts += mult * wf / 32.0;
}

static bool seen(Walk *w, const Expr *e)
{
    for (int i = 0; i < w->nseen; i++)
        if (w->seen[i] == e)
            return true;
    if (w->nseen < MAX_SEEN)
        w->seen[w->nseen++] = e;
    return false;
}

static bool is_fmul(const Expr *e) { return e->kind == EX_MUL && e->type == DT_F32; }

static void expr_cost(Walk *w, Expr *e)
{
    if (seen(w, e))
        return;
    SrchKernelCost *k = w->k;
    double lanes = w->lane ? w->width : 1, mult = mult_of(w, e);
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return;
    case EX_LOAD:
        for (int i = 0; i < e->load.n; i++)
            expr_cost(w, e->load.idx[i]);
        mem_access(w, e->load.t, e->load.n, e->load.idx, false, e->load.padded);
        return;
    case EX_REDUCE: return;
    default: break;
    }
    if ((e->kind == EX_ADD || e->kind == EX_SUB) && e->type == DT_F32 &&
        (is_fmul(e->op.a) || is_fmul(e->op.b))) {
        /* a multiply feeding an add: one FMA (unless the product is used
         * elsewhere too, when it was counted on its own) */
        Expr *m = is_fmul(e->op.a) ? e->op.a : e->op.b, *o = m == e->op.a ? e->op.b : e->op.a;
        if (!seen(w, m)) {
            expr_cost(w, m->op.a);
            expr_cost(w, m->op.b);
        }
        expr_cost(w, o);
        k->fma += mult * lanes;
        k->instrs += mult * lanes;
        return;
    }
    int ar = ir_op_arity(e->kind);
    if (ar >= 1)
        expr_cost(w, e->op.a);
    if (ar >= 2)
        expr_cost(w, e->op.b);
    if (ar >= 3)
        expr_cost(w, e->op.c);
    if (e->type != DT_F32) {
        /* index arithmetic: much of it is hoisted or folded into addresses */
        k->instrs += mult * 0.25;
        return;
    }
    if (e->kind == EX_SHFL_XOR) {
        k->shuffles += mult * lanes;
        k->instrs += mult * lanes;
        return;
    }
    if (ir_op_special(e->kind)) {
        k->instrs += mult * lanes * IR_SPECIAL_COST;
        return;
    }
    k->fma += mult * lanes;
    k->instrs += mult * lanes;
}

static void find_global(Expr *e, void *ud)
{
    if (e->kind == EX_LOAD && e->load.t->scope == MS_GLOBAL)
        *(bool *)ud = true;
}

static bool has_global_load(Expr *e)
{
    bool g = false;
    ir_expr_visit(e, find_global, &g);
    return g;
}

static bool uses_buffer(const Stmt *s, const Tensor *t);

static void find_load(Expr *e, void *ud)
{
    const Tensor **t = ud;
    if (*t && e->kind == EX_LOAD && e->load.t == *t)
        *t = NULL;
}

static bool expr_uses(Expr *e, const Tensor *t)
{
    const Tensor *x = t;
    ir_expr_visit(e, find_load, &x);
    return x == NULL;
}

/* Whether s loads or stores t. */
static bool uses_buffer(const Stmt *s, const Tensor *t)
{
    switch (s->kind) {
    case ST_FOR: return uses_buffer(s->loop.body, t);
    case ST_LET: return expr_uses(s->let.value, t) || uses_buffer(s->let.body, t);
    case ST_IF:
        return expr_uses(s->ifs.cond, t) || uses_buffer(s->ifs.then, t) ||
               (s->ifs.els && uses_buffer(s->ifs.els, t));
    case ST_ALLOC: return uses_buffer(s->alloc.body, t);
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            if (uses_buffer(s->seq.s[i], t))
                return true;
        return false;
    case ST_BARRIER: return false;
    case ST_STORE: return s->store.buf == t || expr_uses(s->store.value, t);
    }
    return false;
}

static void walk(Walk *w, Stmt *s)
{
    SrchKernelCost *k = w->k;
    switch (s->kind) {
    case ST_FOR: {
        Var *v = s->loop.var;
        double keep = w->mult;
        const Var *klane = w->lane;
        int kwidth = w->width, nu = w->nunrolled;
        switch (s->loop.fk) {
        case FK_BLOCK: break;
        case FK_THREAD:
            w->thread = v;
            w->nthreads = trips(w, v->extent);
            break;
        case FK_VECTORIZED:
            if (!w->lane) {
                w->lane = v;
                w->width = (int)trips(w, v->extent);
                break;
            }
            /* nested lanes run one after another */
            /* fall through */
        default: {
            double n = (double)trips(w, v->extent);
            w->mult *= n;
            if (s->loop.fk == FK_SERIAL)
                k->instrs += keep * 2.0; /* the loop's own */
            else if (w->nunrolled < 32) {
                w->uvar[w->nunrolled] = v;
                w->utrips[w->nunrolled++] = n;
            }
            break;
        }
        }
        walk(w, s->loop.body);
        w->nunrolled = nu;
        w->mult = keep;
        w->lane = klane;
        w->width = kwidth;
        return;
    }
    case ST_LET: {
        bool push = w->thread && w->nlets < MAX_LETS;
        if (push) {
            w->letv[w->nlets] = s->let.var;
            w->letval[w->nlets++] = s->let.value;
        }
        walk(w, s->let.body);
        if (push)
            w->nlets--;
        return;
    }
    case ST_IF:
        w->nseen = 0;
        expr_cost(w, s->ifs.cond);
        walk(w, s->ifs.then);
        if (s->ifs.els)
            walk(w, s->ifs.els);
        return;
    case ST_ALLOC:
        if (s->alloc.buf->scope == MS_SHARED)
            k->shared_bytes += 4 * ir_buffer_words(s->alloc.buf);
        else if (s->alloc.buf->scope == MS_LOCAL)
            k->local_words += ir_buffer_words(s->alloc.buf) * (w->lane ? w->width : 1);
        walk(w, s->alloc.body);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            walk(w, s->seq.s[i]);
        return;
    case ST_BARRIER:
        k->barriers += w->mult;
        if (w->copied) /* the block waits out those loads' latency here */
            k->exposed += w->mult;
        /* async copies issued before the loop whose barrier waits for them
         * (the first chunk's) are waited out once; those of the loop a
         * chunk's compute later */
        else if (s->barrier.wait_async && w->async > 0 && w->async < w->mult)
            k->exposed += w->async;
        w->copied = false;
        w->async = 0;
        return;
    case ST_STORE:
        w->nseen = 0;
        for (int i = 0; i < s->store.n; i++)
            expr_cost(w, s->store.idx[i]);
        expr_cost(w, s->store.value);
        if (s->store.buf->scope == MS_SHARED && has_global_load(s->store.value)) {
            if (s->store.async)
                w->async = w->mult;
            else
                w->copied = true;
        }
        mem_access(w, s->store.buf, s->store.n, s->store.idx, true, false);
        if (s->store.atomic) /* a read-modify-write in L2, a lane at a time */
            mem_access(w, s->store.buf, s->store.n, s->store.idx, false, false);
        return;
    }
}

void srch_kernel_cost(const LoopProgram *lp, const Kernel *k, const int64_t *dims,
                      SrchKernelCost *out)
{
    memset(out, 0, sizeof *out);
    Walk w = {.c = lp->te->ctx, .dims = dims, .mult = 1, .k = out, .nthreads = 1};
    walk(&w, k->body);
    out->threads = k->nthreads;
    /* per thread -> per block */
    out->fma *= k->nthreads;
    out->instrs *= k->nthreads;
    out->load_bytes *= k->nthreads;
    out->store_bytes *= k->nthreads;
    out->wavefronts *= k->nthreads;
    out->shuffles *= k->nthreads;
}

/* ---- time ---- */

double srch_launch_ms(const SrchGpu *g, const SrchKernelCost *k, int64_t grid, int regs,
                      double dram_bytes)
{
    int warps = (k->threads + 31) / 32;
    if (regs <= 0) /* no ptxas: the accumulators and some addressing */
        regs = (int)(k->local_words + 32 < 255 ? k->local_words + 32 : 255);
    int64_t r = g->threads_per_sm / (warps * 32);
    int64_t by_regs = g->regs_per_sm / ((int64_t)regs * warps * 32);
    if (by_regs < r)
        r = by_regs;
    if (k->shared_bytes > 0 && g->smem_kb * 1024 / k->shared_bytes < r)
        r = g->smem_kb * 1024 / k->shared_bytes;
    if (g->blocks_per_sm < r)
        r = g->blocks_per_sm;
    if (r < 1)
        return 1e9; /* does not fit on an SM: never pick it */
    double n = (double)((grid + g->nsm - 1) / g->nsm); /* blocks per SM, the tail included */
    double conc = n < (double)r ? n : (double)r;
    double fma = k->fma / g->lanes, issue = k->instrs / 32.0 / 4.0;
    double cyc = fma;
    if (k->wavefronts > cyc)
        cyc = k->wavefronts;
    if (issue > cyc)
        cyc = issue;
    cyc += (k->barriers * 24.0 + k->exposed * 500.0) / conc;
    double resident_warps = conc * warps;
    if (resident_warps < 16)
        cyc /= sqrt(resident_warps / 16.0);
    double compute_s = n * cyc / (g->ghz * 1e9);
    double l2_s = (double)grid * (k->load_bytes + k->store_bytes) / (g->l2_gbs * 1e9);
    double dram_s = dram_bytes / (g->dram_gbs * 1e9);
    double mem_s = l2_s > dram_s ? l2_s : dram_s;
    return (compute_s > mem_s ? compute_s : mem_s) * 1e3 + g->launch_us * 1e-3;
}

/* DRAM bytes of a launch: the buffers it touches once, and the share of
 * the rest of its L2 traffic that the L2 cannot hold. */
static double dram_bytes(const SrchGpu *g, const LoopProgram *lp, const Kernel *k,
                         const DcrtPlan *pl, double l2_bytes)
{
    double unique = 0;
    for (int b = 0; b < lp->nbuffers; b++)
        if (uses_buffer(k->body, lp->buffers[b]))
            unique += (double)ir_dtype_size(lp->buffers[b]->dtype) * (double)pl->numel[b];
    double l2 = g->l2_mb * 1048576.0;
    double extra = l2_bytes > unique ? l2_bytes - unique : 0;
    double miss = unique > l2 ? 1.0 - l2 / unique : 0.0;
    return unique + extra * miss;
}

double srch_model_ms(const LoopProgram *lp, const char *arch, const int64_t *dims, int regs,
                     char *err, size_t errlen)
{
    const SrchGpu *g = srch_gpu(arch);
    ExProgram *x = ex_program_new(lp);
    DcrtPlan *pl = ex_plan(x, dims, err, errlen);
    double ms = -1;
    if (pl) {
        ms = 0;
        for (int i = 0; i < pl->nlaunches; i++) {
            const Kernel *k = lp->kernels[pl->launches[i].kernel];
            SrchKernelCost kc;
            srch_kernel_cost(lp, k, dims, &kc);
            int64_t grid = pl->launches[i].blocks;
            double l2 = (double)grid * (kc.load_bytes + kc.store_bytes);
            ms += srch_launch_ms(g, &kc, grid, i == 0 ? regs : 0, dram_bytes(g, lp, k, pl, l2));
        }
    }
    dcrt_plan_free(pl);
    ex_program_free(x);
    return ms;
}
