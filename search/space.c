/* The micro-kernel space of one stage and the analytic half of the cost
 * model (DESIGN.md, "The search").
 *
 * Candidates come from the target's limits, never from one shape's
 * factors: threads per block are powers of two whose product stays within
 * the target's maximum, register tiles come from a short list of small
 * sizes bounded by the registers a thread has, reduction chunks are
 * multiples of the vector width. The only thing a shape range contributes
 * is a cap: no block tile is larger than the next power of two above the
 * largest extent of its axis in the range.
 *
 * The analytic part says how well a micro-kernel fits a shape: padding
 * efficiency (useful points over computed points, the reduction included)
 * times occupancy (blocks spread over cores, in whole waves). Multiplied
 * by a micro-kernel's throughput (learned, or the prior below) it predicts
 * the time at any shape.
 */
#include "dietcode/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t srch_rand(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static int pick(uint64_t *rng, int n) { return (int)(srch_rand(rng) % (uint64_t)n); }

SrchTarget srch_target_cpu(void) { return srch_target_cpu_cores(0); }

SrchTarget srch_target_cpu_cores(int ncores)
{
    long n = ncores > 0 ? ncores : sysconf(_SC_NPROCESSORS_ONLN);
    SrchTarget t = {"cpu", pass_target_info(PT_CPU), n > 0 ? (int)n : 1, 1, 0, 0};
    /* two FMA ports of vec_width lanes at about 2.5 GHz */
    t.peak_gflops = t.ncores * 2.0 * 2.0 * t.ti.vec_width * 2.5;
    return t;
}

SrchTarget srch_target_gpu(const char *name, const char *arch, int nsm)
{
    int sm = pass_sm_version(arch);
    SrchTarget t = {name, pass_target_info(PT_GPU), nsm, 2048, 164 * 1024, 0};
    pass_target_gpu_arch(&t.ti, arch);
    if (nsm <= 0)
        t.ncores = sm >= 90 ? 132 : sm == 80 ? 108 : sm >= 86 ? 84 : 72;
    if (sm >= 90)
        t.shared_per_core = 228 * 1024;
    else if (sm >= 86)
        t.shared_per_core = 100 * 1024, t.threads_per_core = 1536;
    else if (sm < 80)
        t.shared_per_core = 64 * 1024, t.threads_per_core = 1024;
    /* 128 FP32 lanes per SM (64 before sm_86), an FMA each, at about 1.7 GHz */
    t.peak_gflops = t.ncores * (sm >= 86 ? 128.0 : 64.0) * 2.0 * 1.7;
    return t;
}

/* ---- extents ---- */

void srch_stage_extents(const SrchStage *st, const int64_t *dims, int64_t *ext)
{
    for (int a = 0; a < st->rank; a++)
        ext[a] = ir_eval_dims(st->t->shape[a], dims);
    int64_t k = 1;
    const Expr *r = st->reduction ? ir_outer_reduce((Expr *)st->body) : NULL;
    for (int i = 0; r && i < r->red.n; i++)
        k *= ir_eval_dims(r->red.axes[i]->extent, dims);
    ext[st->rank] = k;
}

double srch_stage_flops(const SrchStage *st, const int64_t *ext)
{
    double f = 2.0;
    for (int a = 0; a <= st->rank; a++)
        f *= (double)ext[a];
    return f;
}

/* ---- the space ---- */

static const int cpu_tiles[] = {1, 2, 3, 4, 5, 6, 8};
/* rows of an outer-product register tile (MR) */
static const int cpu_mr[] = {4, 6, 8, 12, 14};
static const int gpu_tiles[] = {1, 2, 4, 8};
static int64_t pow2_ceil(int64_t v)
{
    int64_t p = 1;
    while (p < v)
        p *= 2;
    return p;
}

/* Vector accumulators a thread keeps (CPU) or scalar ones (GPU). */
static int accumulators(const SrchStage *st, const MicroKernel *mk)
{
    int n = 1;
    for (int a = 0; a < st->rank; a++)
        n *= mk->tile[a];
    if (st->tg->ti.kind == PT_CPU && mk->vaxis == MK_VEC_SPATIAL && mk->vec > 1)
        n /= mk->vec;
    if (st->tg->ti.kind == PT_GPU && mk->vaxis == MK_VEC_REDUCE && mk->vec > 1)
        n *= mk->vec; /* a lane each */
    return n < 1 ? 1 : n;
}

static int total_threads(const SrchStage *st, const MicroKernel *mk)
{
    int n = mk->rthreads > 1 ? mk->rthreads : 1;
    for (int a = 0; a < st->rank; a++)
        n *= mk->threads[a];
    return n;
}

/* Within the budgets every kernel is held to (pass_check_microkernel). */
static bool valid(const SrchStage *st, const MicroKernel *mk)
{
    char why[256];
    return pass_check_microkernel(mk, st->t, &st->tg->ti, why, sizeof why);
}

/* Within the target's limits and the range's caps. */
static bool legal(const SrchStage *st, const MicroKernel *mk)
{
    bool gpu = st->tg->ti.kind == PT_GPU;
    int nt = total_threads(st, mk);
    if (!valid(st, mk))
        return false;
    if (nt > st->tg->ti.max_threads || (gpu && st->reduction && nt < 32))
        return false;
    if (accumulators(st, mk) > (gpu ? 64 : st->tg->ti.vregs * 3 / 4))
        return false;
    for (int a = 0; a < st->rank; a++) {
        if (mk->threads[a] > 1 &&
            (int64_t)mk->threads[a] * mk->tile[a] > pow2_ceil(st->ext_max[a]))
            return false;
        /* the CPU runs a block's threads one after another: a wide block
         * only adds to the per-block working set, unless it shares a packed
         * panel (staged), which many row tiles amortise */
        if (!gpu && mk->threads[a] > (a == st->rank - 1 || mk->stage ? 32 : 8))
            return false;
    }
    if (st->reduction && mk->rchunk > pow2_ceil(st->ext_max[st->rank]) * 2)
        return false;
    /* a split needs parts of some length, rthreads runs of work each */
    if (mk->split > 1 && st->ext_max[st->rank] / mk->split < 16)
        return false;
    if (mk->rthreads > 1 && mk->rthreads * (mk->vaxis == MK_VEC_REDUCE ? mk->vec : 1) >
                                pow2_ceil(st->ext_max[st->rank]))
        return false;
    return true;
}

static void normalise(const SrchStage *st, MicroKernel *mk)
{
    /* a one-axis reduction of constant length (a split's part's) in
     * chunks evened out in whole vectors of the target, as the templates'
     * (pass_even_chunk): K = 768 drawn in chunks of 512 would multiply
     * 256 zeros a row, and a constant's panels, which run to whole chunks,
     * would be 1024 rows, a copy beside the 768 the stage's other kernels
     * share (dcc run's memory on BERT-base). Before the legalisation, so
     * that a chunk is whole vectors when it decides the vectors' axis. */
    if (st->reduction && mk->rchunk > 0) {
        int64_t k = pass_chunked_length(ir_outer_reduce((Expr *)st->body));
        int split = mk->split > 1 ? mk->split : 1, v = st->tg->ti.vec_width;
        if (mk->vec > v && (mk->vec & (mk->vec - 1)) == 0)
            v = mk->vec;
        mk->rchunk = pass_even_chunk((k + split - 1) / split, mk->rchunk, v);
    }
    pass_legalize_microkernel(mk, st->t, &st->tg->ti);
    bool runs = false; /* strided changes nothing without a tile of several runs */
    for (int a = 0; a < st->rank; a++)
        runs |= mk->vec > 1 && mk->tile[a] > mk->vec && mk->tile[a] % mk->vec == 0;
    if (!runs || st->tg->ti.kind != PT_GPU)
        mk->strided = false;
    if (!st->atomic_ok)
        mk->atomic = false;
    /* a packing launch exists only for a panel operand, and pays only
     * where a call has several row blocks, each of which would pack every
     * panel again; elsewhere the same kernel packs per block. A constant's
     * panels, packed when compiling, cost nothing a call. */
    int64_t row_blocks = 1;
    for (int a = 0; mk->pack && a < st->rank - 1; a++) {
        int64_t b = (int64_t)mk->threads[a] * mk->tile[a];
        row_blocks *= (st->ext_max[a] + b - 1) / b;
    }
    bool pays = st->pack == PASS_PACK_CONST || row_blocks >= PASS_PACK_MIN_ROW_BLOCKS;
    if (st->pack == PASS_PACK_NONE || !st->reduction || !pays)
        mk->pack = false;
    if (!st->reduction) {
        mk->rchunk = 0;
        mk->stage = false;
        mk->unroll = 1;
        mk->split = 1;
        mk->rthreads = 1;
        mk->raster = 1; /* no operand shared along a row of blocks */
        if (mk->vaxis == MK_VEC_REDUCE)
            mk->vaxis = MK_VEC_SPATIAL;
    }
}

/* One draw from the space, maybe illegal. */
static MicroKernel draw(const SrchStage *st, uint64_t *rng)
{
    MicroKernel mk;
    memset(&mk, 0, sizeof mk);
    bool gpu = st->tg->ti.kind == PT_GPU;
    int n = st->rank, vw = st->tg->ti.vec_width;
    for (int a = 0; a < MK_MAX_AXES; a++)
        mk.threads[a] = mk.tile[a] = 1;
    mk.unroll = 1 << pick(rng, 3);
    mk.split = mk.rthreads = mk.raster = 1;
    if (gpu) {
        /* 32..1024 threads spread over the reduction (sometimes) and the
         * axes, innermost first */
        int budget = 5 + pick(rng, 4); /* log2: 32..256 */
        if (st->reduction && pick(rng, 3) == 0) {
            int l = 1 + pick(rng, 5); /* 2..32 threads along the reduction */
            mk.rthreads = 1 << l;
            budget -= l;
        }
        for (int a = n - 1; a >= 0 && budget > 0; a--) {
            int l = a == 0 ? budget : pick(rng, budget + 1);
            mk.threads[a] = 1 << l;
            budget -= l;
        }
        for (int a = 0; a < n; a++)
            mk.tile[a] = gpu_tiles[pick(rng, 4)];
        mk.vec = 1 << pick(rng, 3);
        mk.rchunk = st->reduction ? 4 << pick(rng, 4) : 0;
        mk.stage = st->reduction && n >= 2 && pick(rng, 4) != 0;
        mk.vaxis = st->reduction && st->vec_reduce && pick(rng, 4) == 0 ? MK_VEC_REDUCE
                                                                         : MK_VEC_SPATIAL;
        if (st->reduction && pick(rng, 3) == 0)
            mk.split = 2 << pick(rng, 4); /* 2..16 parts */
        if (st->atomic_ok && mk.split > 1) /* the rng's sequence is unchanged without */
            mk.atomic = pick(rng, 2) == 0;
        mk.strided = pick(rng, 2) == 0;
        mk.pipeline = mk.stage && pick(rng, 2) == 0;
        if (st->reduction && n >= 2 && pick(rng, 4) == 0)
            mk.raster = 2 << pick(rng, 3); /* groups of 2..8 rows of blocks */
        return mk;
    }
    if (st->reduction && n >= 2 && pick(rng, 2) == 0) {
        /* the outer-product family (BLIS): MR x (1..3 vectors) of
         * accumulators, a broadcast of X against a packed panel of W, many
         * row tiles a block sharing the panel */
        mk.vec = vw;
        mk.vaxis = MK_VEC_SPATIAL;
        mk.tile[n - 2] = cpu_mr[pick(rng, 5)];
        mk.tile[n - 1] = vw * (1 + pick(rng, 3));
        mk.threads[n - 2] = 4 << pick(rng, 4);   /* 4..32 row tiles */
        mk.threads[n - 1] = 1 << pick(rng, 2);
        mk.rchunk = vw << (2 + pick(rng, 4));    /* 4..32 vectors: 64..512 with AVX-512 */
        mk.stage = true;
        mk.pack = pick(rng, 4) == 0;             /* the panels by a launch of their own */
        return mk;
    }
    mk.vec = pick(rng, 4) == 0 ? vw / 2 : vw;
    mk.vaxis = st->reduction && pick(rng, 2) == 0 ? MK_VEC_REDUCE : MK_VEC_SPATIAL;
    for (int a = 0; a < n; a++) {
        mk.threads[a] = 1 << pick(rng, a == n - 1 ? 6 : 4);
        mk.tile[a] = cpu_tiles[pick(rng, 7)];
    }
    if (n >= 1 && mk.vaxis == MK_VEC_SPATIAL)
        mk.tile[n - 1] = mk.vec * (1 + pick(rng, 3));
    if (st->reduction) {
        mk.rchunk = mk.vec << (2 + pick(rng, 5)); /* 4..64 vectors */
        mk.stage = pick(rng, 2) == 0;
    }
    return mk;
}

bool srch_space_adopt(const SrchStage *st, MicroKernel *mk)
{
    normalise(st, mk);
    return legal(st, mk);
}

MicroKernel srch_space_sample(const SrchStage *st, uint64_t *rng)
{
    MicroKernel mk;
    for (int tries = 0;; tries++) {
        mk = draw(st, rng);
        normalise(st, &mk);
        if (legal(st, &mk) || tries > 200)
            break;
    }
    /* a space whose caps no draw met: the last draw, within the budgets */
    if (!valid(st, &mk)) {
        mk = pass_unit_microkernel();
        normalise(st, &mk);
    }
    return mk;
}

/* The CPU's templates: the outer-product kernel of 6 x 2 vectors and of
 * 8 x 2 vectors over a packed panel of W, the block's rows (126, 128)
 * within the space's cap, for the large T the dot-product default does
 * not serve well; and the first with its panels packed by a launch of
 * their own, where the range spans several row blocks (both, over a
 * constant's panels packed when compiling). */
static int cpu_templates(const SrchStage *st, MicroKernel *out, int max)
{
    int n = st->rank, nt = 0, vw = st->tg->ti.vec_width;
    if (!st->reduction || n < 2 || vw < 2)
        return 0;
    int64_t k = pass_chunked_length(ir_outer_reduce((Expr *)st->body));
    int ntemplates = st->pack == PASS_PACK_CONST ? 4 : 3;
    for (int t = 0; t < ntemplates && nt < max; t++) {
        bool eight = t == 1 || t == 3;
        MicroKernel mk = pass_outer_microkernel(n, &st->tg->ti, eight ? 8 : 6, eight ? 16 : 21, k);
        mk.pack = t >= 2;
        normalise(st, &mk);
        if (t >= 2 && !mk.pack)
            break; /* too few row blocks: the first again */
        if (legal(st, &mk))
            out[nt++] = mk;
    }
    return nt;
}

int srch_space_templates(const SrchStage *st, MicroKernel *out, int max)
{
    int n = st->rank, nt = 0;
    if (st->tg->ti.kind == PT_CPU)
        return cpu_templates(st, out, max);
    if (st->tg->ti.kind != PT_GPU || !st->reduction || n < 1)
        return 0;
    /* with atomic split-K opted into, the middle one also atomic */
    for (int t = 0; t < 6 && nt < max; t++) {
        if (t == 3 && !st->atomic_ok)
            continue;
        MicroKernel mk = pass_unit_microkernel();
        mk.vec = 4;
        if (t == 5) {
            /* small T, long reduction: split-K GEMV, a warp per output
             * over each of four parts */
            mk.threads[n - 1] = 8;
            mk.rthreads = 32;
            mk.rchunk = 128;
            mk.split = 4;
            mk.vaxis = st->vec_reduce ? MK_VEC_REDUCE : MK_VEC_SPATIAL;
            if (!st->vec_reduce)
                mk.vec = 1;
        } else if (t == 4) {
            /* small T, long reduction: a block of 256 threads per output,
             * eight warps combined through shared memory */
            mk.rthreads = 256;
            mk.rchunk = 1024;
            mk.vaxis = st->vec_reduce ? MK_VEC_REDUCE : MK_VEC_SPATIAL;
            if (!st->vec_reduce) {
                mk.vec = 1;
                mk.rchunk = 256;
            }
        } else if (t == 0) {
            /* small T: a warp per output along the reduction (GEMV) */
            mk.threads[n - 1] = 8;
            mk.rthreads = 32;
            mk.rchunk = 128;
            mk.vaxis = st->vec_reduce ? MK_VEC_REDUCE : MK_VEC_SPATIAL;
            if (!st->vec_reduce)
                mk.vec = 1;
        } else if (t == 1 || t == 3) {
            /* middle: 32 x 128 blocks, the reduction split four ways */
            mk.threads[n - 1] = 32;
            mk.tile[n - 1] = 4;
            if (n >= 2) { mk.threads[n - 2] = 8; mk.tile[n - 2] = 4; }
            mk.rchunk = 16;
            mk.stage = mk.pipeline = n >= 2;
            mk.split = 4;
            mk.atomic = t == 3;
        } else {
            /* large T: 128 x 128 blocks of 8 x 8 tiles in runs of 4 */
            mk.threads[n - 1] = 16;
            mk.tile[n - 1] = 8;
            if (n >= 2) { mk.threads[n - 2] = 16; mk.tile[n - 2] = 8; }
            mk.rchunk = 8;
            mk.stage = mk.pipeline = n >= 2;
            mk.strided = true;
        }
        normalise(st, &mk);
        if (legal(st, &mk))
            out[nt++] = mk;
    }
    return nt;
}

/* Padding efficiency of block tile b over extent e. */
static double fit(int64_t e, int64_t b)
{
    return b <= 0 || e <= 0 ? 1.0 : (double)e / (double)(((e + b - 1) / b) * b);
}

/* Padding efficiency of mk along spatial axis a of extent e. A GPU block
 * computes its whole tile, so the waste is the block tile's (threads x
 * tile); a CPU thread whose tile lies wholly past the edge skips its work
 * (passes/bind.c), so there only the thread tile's counts. */
static double axis_fit(const SrchStage *st, const MicroKernel *mk, int a, int64_t e)
{
    int64_t t = mk->tile[a];
    /* a CPU kernel with vectors along the reduction that stages packs its
     * block's whole tile of both operands, past the edge too */
    bool whole = st->tg->ti.kind == PT_GPU || (mk->stage && mk->vaxis == MK_VEC_REDUCE);
    return fit(e, whole ? (int64_t)mk->threads[a] * t : t);
}

/* A CPU block of the outer-product family (staged, vectors along the
 * output) first packs a panel of the operand read along the vectors, the
 * whole panel however few of its rows (points along every axis but the
 * last) it computes: the packing costs about as much as computing
 * PACK_ROWS rows against the panel (measured on BERT's dense layers, one
 * thread, 6 against 132 rows of 6 x 32 tiles: 6 to 7 rows with K = 768,
 * 18 with K = 3072, where reading W from memory is most of it; 23 to 99
 * before the copy transposed in registers instead of gathering). The
 * efficiency that leaves at ext: computed rows per block over those plus
 * the packing. An approximation where a leading axis is a batch (a panel
 * per batch element). A packed kernel (mk.pack) packs each panel once a
 * call, in a launch of its own that also writes it out and the compute
 * reads it back: about PACK_LAUNCH_ROWS rows for the whole call, however
 * many row blocks (BERT's QKV, two threads: the launch 0.24 ms, a row
 * about 0.01 ms). */
static double pack_fit(const SrchStage *st, const MicroKernel *mk, const int64_t *ext)
{
    enum { PACK_ROWS = 8, PACK_LAUNCH_ROWS = 24 };
    if (st->tg->ti.kind == PT_GPU || !mk->stage || mk->vaxis != MK_VEC_SPATIAL || st->rank < 2 ||
        (mk->pack && st->pack == PASS_PACK_CONST))
        return 1;
    double rows = 1;
    for (int a = 0; a < st->rank - 1; a++) {
        int64_t t = mk->tile[a], b = (int64_t)mk->threads[a] * t;
        if (t < 1 || b < 1 || ext[a] < 1)
            continue;
        rows *= (double)((ext[a] + t - 1) / t * t) / (double)(mk->pack ? 1 : (ext[a] + b - 1) / b);
    }
    return rows / (rows + (mk->pack ? PACK_LAUNCH_ROWS : PACK_ROWS));
}

/* Retiles axis a (threads x tile) to waste the least of extent e. */
static void aim_axis(const SrchStage *st, MicroKernel *mk, int a, int64_t e, uint64_t *rng)
{
    bool gpu = st->tg->ti.kind == PT_GPU;
    const int *tiles = gpu ? gpu_tiles : cpu_tiles;
    int ntiles = gpu ? 4 : 7;
    bool vecaxis = !gpu && a == st->rank - 1 && mk->vaxis == MK_VEC_SPATIAL && mk->vec > 1;
    double best = -1;
    MicroKernel keep = *mk;
    for (int l = 0; l <= 6; l++) {
        for (int i = 0; i < (vecaxis ? 3 : ntiles); i++) {
            MicroKernel c = keep;
            c.threads[a] = 1 << l;
            c.tile[a] = vecaxis ? c.vec * (i + 1) : tiles[i];
            if (!legal(st, &c))
                continue;
            /* least padding; then a block tile that covers e with the
             * least overshoot (on the CPU, where threads past the edge cost
             * nothing, no larger block than needed); then the largest tile
             * (more reuse); then chance */
            int64_t b = (int64_t)c.threads[a] * c.tile[a];
            double s = axis_fit(st, &c, a, e) * 1000.0 + (gpu ? 0 : fit(e, b) * 10.0) +
                       (double)(gpu || b < e ? b : e) / (double)(e + 1) +
                       (double)(srch_rand(rng) % 100) * 1e-6;
            if (s > best) {
                best = s;
                *mk = c;
            }
        }
    }
}

MicroKernel srch_space_mutate(const SrchStage *st, const MicroKernel *in, const int64_t *ext,
                              uint64_t *rng)
{
    bool gpu = st->tg->ti.kind == PT_GPU;
    int n = st->rank;
    for (int tries = 0; tries < 32; tries++) {
        MicroKernel mk = *in;
        if (ext && n > 0 && pick(rng, 3) != 0) {
            /* aimed: the axis wasting the most at this shape, or fewer
             * blocks than cores: shrink the largest block tile */
            int64_t nblocks = 1;
            int worst = 0, widest = 0;
            double wf = 2;
            for (int a = 0; a < n; a++) {
                int64_t b = (int64_t)mk.threads[a] * mk.tile[a];
                nblocks *= (ext[a] + b - 1) / b;
                double f = axis_fit(st, &mk, a, ext[a]);
                if (f < wf)
                    wf = f, worst = a;
                if (b > (int64_t)mk.threads[widest] * mk.tile[widest])
                    widest = a;
            }
            if (nblocks < st->tg->ncores && pick(rng, 2) == 0) {
                if (mk.threads[widest] > 1)
                    mk.threads[widest] /= 2;
                else if (mk.tile[widest] > 1 && !(n - 1 == widest && mk.vaxis == MK_VEC_SPATIAL))
                    mk.tile[widest] = mk.tile[widest] / 2 ? mk.tile[widest] / 2 : 1;
            } else {
                int a = pick(rng, 2) ? worst : pick(rng, n);
                aim_axis(st, &mk, a, ext[a], rng);
                if (pick(rng, 2)) {
                    a = pick(rng, n);
                    aim_axis(st, &mk, a, ext[a], rng);
                }
            }
        } else {
            int gene = pick(rng, gpu && st->reduction ? 9 : 6);
            int a = n > 0 ? pick(rng, n) : 0;
            switch (gene) {
            case 0: /* threads */
                mk.threads[a] = pick(rng, 2) ? mk.threads[a] * 2 : mk.threads[a] / 2;
                if (mk.threads[a] < 1)
                    mk.threads[a] = 1;
                break;
            case 1: { /* register tile */
                const int *tiles = gpu ? gpu_tiles : cpu_tiles;
                int nt = gpu ? 4 : 7;
                if (!gpu && a == n - 1 && mk.vaxis == MK_VEC_SPATIAL)
                    mk.tile[a] = mk.vec * (1 + pick(rng, 3));
                else
                    mk.tile[a] = tiles[pick(rng, nt)];
                break;
            }
            case 2: /* reduction chunk */
                if (st->reduction)
                    mk.rchunk = pick(rng, 2) ? mk.rchunk * 2 : mk.rchunk / 2;
                break;
            case 3:
                mk.unroll = 1 << pick(rng, 3);
                break;
            case 4: /* staging / packing (CPU: per block or by a launch of its own);
                     * on the GPU, double buffering */
                if (gpu && mk.stage && pick(rng, 2) == 0)
                    mk.pipeline = !mk.pipeline;
                else if (!gpu && mk.stage && mk.vaxis == MK_VEC_SPATIAL && pick(rng, 2) == 0)
                    mk.pack = !mk.pack;
                else
                    mk.stage = st->reduction && !mk.stage;
                mk.pack = mk.pack && mk.stage;
                break;
            case 6: /* GPU: threads along the reduction */
                mk.rthreads = pick(rng, 2) ? mk.rthreads * 2 : mk.rthreads / 2;
                if (mk.rthreads < 1)
                    mk.rthreads = 1;
                break;
            case 7: /* GPU: split-K, its parts added atomically or not */
                if (st->atomic_ok && mk.split > 1 && pick(rng, 3) == 0) {
                    mk.atomic = !mk.atomic;
                    break;
                }
                mk.split = pick(rng, 2) ? mk.split * 2 : mk.split / 2;
                if (mk.split < 1)
                    mk.split = 1;
                break;
            case 8: /* GPU: the block order */
                mk.raster = mk.raster > 1 && pick(rng, 2) ? mk.raster / 2 : mk.raster * 2;
                if (mk.raster > 16)
                    mk.raster = 1;
                break;
            case 5: /* vectors */
                if (gpu) {
                    mk.vec = 1 << pick(rng, 3);
                    if (st->reduction && st->vec_reduce && pick(rng, 3) == 0)
                        mk.vaxis = mk.vaxis == MK_VEC_REDUCE ? MK_VEC_SPATIAL : MK_VEC_REDUCE;
                    if (pick(rng, 2) == 0)
                        mk.strided = !mk.strided;
                } else if (st->reduction && pick(rng, 2)) {
                    mk.vaxis = mk.vaxis == MK_VEC_REDUCE ? MK_VEC_SPATIAL : MK_VEC_REDUCE;
                    if (mk.vaxis == MK_VEC_SPATIAL && n > 0) {
                        mk.tile[n - 1] = mk.vec;
                        if (mk.threads[n - 1] > 4)
                            mk.threads[n - 1] /= 4;
                    } else if (n > 0) {
                        mk.tile[n - 1] = cpu_tiles[pick(rng, 7)];
                    }
                } else {
                    int vw = st->tg->ti.vec_width;
                    int v = mk.vec == vw ? vw / 2 : vw;
                    if (n > 0 && mk.vaxis == MK_VEC_SPATIAL)
                        mk.tile[n - 1] = mk.tile[n - 1] / mk.vec * v;
                    mk.vec = v;
                }
                break;
            }
            if (st->reduction && mk.rchunk < 1)
                mk.rchunk = gpu ? 4 : mk.vec;
        }
        normalise(st, &mk);
        if (legal(st, &mk) && memcmp(&mk, in, sizeof mk) != 0)
            return mk;
    }
    return srch_space_sample(st, rng);
}

char *srch_mk_str(const MicroKernel *mk, int nspatial)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    ir_print_microkernel(f, mk, nspatial);
    fclose(f);
    return buf;
}

/* ---- the analytic model ---- */

double srch_adapt(const SrchStage *st, const MicroKernel *mk, const int64_t *ext, int64_t *nblocks)
{
    double pad = 1;
    int64_t nb = 1;
    for (int a = 0; a < st->rank; a++) {
        int64_t b = (int64_t)mk->threads[a] * mk->tile[a];
        pad *= axis_fit(st, mk, a, ext[a]);
        nb *= (ext[a] + b - 1) / b;
    }
    pad *= pack_fit(st, mk, ext);
    if (st->reduction && mk->rchunk > 0) {
        /* each of split parts runs whole chunks of rthreads x vec runs */
        int64_t run = (int64_t)(mk->rthreads > 1 ? mk->rthreads : 1) *
                      (mk->vaxis == MK_VEC_REDUCE && mk->vec > 1 ? mk->vec : 1);
        int64_t chunk = mk->rchunk < run ? run : (mk->rchunk + run - 1) / run * run;
        pad *= fit(ext[st->rank], chunk * (mk->split > 1 ? mk->split : 1));
    }
    nb *= mk->split > 1 ? mk->split : 1;
    if (nblocks)
        *nblocks = nb;
    const SrchTarget *tg = st->tg;
    if (tg->ti.kind == PT_GPU) {
        /* waves of resident blocks; in the last, the SMs left idle; and
         * latency hiding from the threads resident on an SM (full from 512) */
        int nt = total_threads(st, mk);
        int64_t per = tg->threads_per_core / (nt > 0 ? nt : 1);
        per = per < 1 ? 1 : per > 32 ? 32 : per;
        int64_t waves = (nb + tg->ncores * per - 1) / (tg->ncores * per);
        int64_t bpsm = (nb + waves * tg->ncores - 1) / (waves * tg->ncores);
        double tail = (double)nb / (double)(waves * tg->ncores * bpsm);
        double hide = sqrt((double)(bpsm * nt) / 512.0);
        return pad * tail * (hide < 1 ? hide : 1);
    }
    int64_t waves = (nb + tg->ncores - 1) / tg->ncores;
    double occ = (double)nb / (double)(waves * tg->ncores);
    return pad * occ;
}

/* Loads per FMA of the register tile (lower is better). */
static double loads_per_fma(const SrchStage *st, const MicroKernel *mk)
{
    int n = st->rank;
    if (n == 0)
        return 1;
    double ti = n >= 2 ? mk->tile[n - 2] : 1, tj = mk->tile[n - 1];
    if (st->tg->ti.kind == PT_CPU && mk->vaxis == MK_VEC_SPATIAL && mk->vec > 1)
        tj /= mk->vec; /* vectors */
    return (ti + tj) / (ti * tj);
}

double srch_prior_gflops(const SrchStage *st, const MicroKernel *mk)
{
    const SrchTarget *tg = st->tg;
    double f = tg->peak_gflops;
    if (!st->reduction)
        return f * 0.05; /* memory bound */
    double lpf = loads_per_fma(st, mk);
    f *= lpf <= 0.5 ? 1.0 : 0.5 / lpf;
    if (tg->ti.kind == PT_CPU) {
        f *= (double)mk->vec / tg->ti.vec_width;
        if (mk->vaxis == MK_VEC_REDUCE && mk->rchunk < 4 * mk->vec)
            f *= 0.7; /* horizontal sums each short chunk */
    } else {
        int nt = total_threads(st, mk);
        if (nt < 128)
            f *= nt / 128.0;
        if (!mk->stage)
            f *= 0.6;
    }
    if (accumulators(st, mk) > (tg->ti.kind == PT_GPU ? 48 : tg->ti.vregs * 5 / 8))
        f *= 0.5;
    return f;
}

void srch_features(const SrchStage *st, const MicroKernel *mk, const SrchPtxInfo *ptx, float *f)
{
    memset(f, 0, sizeof(float) * SRCH_NFEAT);
    int n = st->rank, i = 0;
    for (int k = 0; k < 3; k++) {
        int a = n - 3 + k;
        int th = a >= 0 ? mk->threads[a] : 1, ti = a >= 0 ? mk->tile[a] : 1;
        f[i++] = (float)log2(th);
        f[i++] = (float)log2(ti);
        f[i++] = (float)log2((double)th * ti);
    }
    int64_t staged = 0;
    for (int a = 0; a < n; a++)
        staged += (int64_t)mk->threads[a] * mk->tile[a];
    staged *= mk->rchunk > 0 ? mk->rchunk : 1;
    f[i++] = (float)log2(total_threads(st, mk));
    f[i++] = (float)log2(accumulators(st, mk));
    f[i++] = (float)log2(mk->rchunk + 1.0);
    f[i++] = (float)mk->unroll;
    f[i++] = (float)mk->vec;
    f[i++] = (float)mk->vaxis;
    f[i++] = (float)(mk->stage + mk->pack); /* 2: by a launch of its own */
    f[i++] = (float)loads_per_fma(st, mk);
    f[i++] = (float)log(srch_prior_gflops(st, mk));
    f[i++] = (float)log2(staged * 4.0 + 1.0);
    f[i++] = (float)n;
    f[i++] = (float)log2((double)st->ext_max[n] + 1.0);
    f[i++] = (float)(mk->rchunk > 0 ? (double)mk->rchunk / (double)st->ext_max[n] : 0);
    f[i++] = (float)st->vec_reduce;
    f[i++] = (float)(n > 0 ? log2((double)mk->tile[n - 1] / mk->vec + 1.0) : 0);
    f[i++] = ptx ? (float)ptx->regs : NAN;
    f[i++] = ptx ? (float)log2(ptx->spill_bytes + 1.0) : NAN;
    f[i++] = (float)log2(mk->rthreads > 1 ? mk->rthreads : 1);
    f[i++] = (float)log2(mk->split > 1 ? mk->split : 1);
    f[i++] = (float)mk->strided;
    f[i++] = (float)mk->pipeline;
}
