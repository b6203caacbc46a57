/* Default micro-kernels and their legalisation.
 *
 * Without tuning records every stage gets a default that suits the target
 * and does not look at any concrete shape. On the CPU a reduction whose
 * operands are contiguous along the reduction (a dense layer X * W^T,
 * attention scores) gets the dot-product kernel of DESIGN.md: 4 x 4
 * outputs a thread, vectors along the reduction, no packing, which serves
 * small and large T alike; one whose operands are contiguous along the
 * output (a convolution) gets the outer-product kernel: 6 x (2 vectors)
 * tiles with operands packed per block. Elementwise stages get one vector
 * per thread along the innermost axis. A dense layer whose rows are a dim
 * gets a second default for more than DEFAULT_OUTER_ROWS rows, where
 * reading W is no longer the whole cost: the outer-product kernel of 6 x
 * (2 vectors) tiles, 22 row tiles a block sharing one packed panel of W;
 * and above PASS_PACK_MIN_ROW_BLOCKS - 1 row blocks, the same kernel with
 * W's panels packed by a launch of their own; picked by a tree on that
 * dim. Where W is a constant, its panels are packed when compiling and
 * the outer-product kernel reads them from the first row on. On the GPU a reduction to a scalar or a vector gets a warp along
 * the reduction per output (32 partial sums joined by shuffles: parallel,
 * and more precise than one long sum), a larger output 16 x 16 threads of
 * 4 x 4 points, staged.
 */
#include "dietcode/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

MicroKernel pass_unit_microkernel(void)
{
    MicroKernel mk;
    memset(&mk, 0, sizeof mk);
    for (int a = 0; a < MK_MAX_AXES; a++)
        mk.threads[a] = mk.tile[a] = 1;
    mk.unroll = mk.vec = mk.split = mk.rthreads = mk.raster = 1;
    return mk;
}

/* Counts, over the loads of a reduction stage that the reduction walks
 * (an index uses one of its axes; a load that does not is read once per
 * output), those whose innermost index moves with the innermost output
 * axis and those whose innermost index moves only with the reduction:
 * which way vectors read contiguously. */
typedef struct Contig {
    const Tensor *t;
    const Expr *red; /* the outermost reduction */
    int spatial, reduce;
    bool reuse;      /* a walked load misses an output axis: outputs share it */
} Contig;

static bool walks(const Contig *c, const Expr *load)
{
    for (int i = 0; c->red && i < load->load.n; i++)
        for (int a = 0; a < c->red->red.n; a++)
            if (ir_expr_uses_var(load->load.idx[i], c->red->red.axes[a]))
                return true;
    return false;
}

static void count_contig(Expr *e, void *ud)
{
    Contig *c = ud;
    if (e->kind != EX_LOAD || e->load.n == 0 || !walks(c, e))
        return;
    const Var *last = c->t->rank ? c->t->axes[c->t->rank - 1] : NULL;
    Expr *x = e->load.idx[e->load.n - 1];
    if (last && ir_expr_uses_var(x, last))
        c->spatial++;
    else if (x->kind != EX_INT)
        c->reduce++;
    for (int a = 0; a < c->t->rank; a++) {
        bool used = false;
        for (int i = 0; i < e->load.n && !used; i++)
            used = ir_expr_uses_var(e->load.idx[i], c->t->axes[a]);
        c->reuse |= !used;
    }
}

/* No more threads along an axis than its largest extent needs, and no
 * reduction chunk longer than the reduction (rounded up to vectors): past
 * them are idle threads, packing of padding and sums of zeros. The extents
 * are the declared range's; a variant that serves part of it (the
 * dot-product kernel of a dense layer's default schedule) is fitted to
 * the whole. */
static void fit_extents(const TeProgram *p, const Tensor *t, const Expr *red, int vec,
                        MicroKernel *mk)
{
    for (int a = 0; a < t->rank && a < MK_MAX_AXES; a++) {
        Interval r = ir_interval(p->ctx, t->axes[a]->extent, RANGE_DECLARED);
        while (mk->threads[a] > 1 && r.hi != IR_POS_INF &&
               (int64_t)(mk->threads[a] / 2) * mk->tile[a] >= r.hi)
            mk->threads[a] /= 2;
    }
    if (red && red->red.n == 1 && mk->rchunk > 0) {
        Interval r = ir_interval(p->ctx, red->red.axes[0]->extent, RANGE_DECLARED);
        int64_t fit = r.hi == IR_POS_INF ? mk->rchunk : (r.hi + vec - 1) / vec * vec;
        if (fit < vec)
            fit = vec;
        if (fit < mk->rchunk)
            mk->rchunk = (int)fit;
    }
}

MicroKernel pass_default_microkernel(const TeProgram *p, const Tensor *t, const Expr *body,
                                     const TargetInfo *ti)
{
    MicroKernel mk = pass_unit_microkernel();
    mk.vec = ti->vec_width;
    int n = t->rank;
    bool red = pass_stage_has_reduction(body);
    Contig cg = {t, red ? ir_outer_reduce((Expr *)body) : NULL, 0, 0, false};
    if (red)
        ir_expr_visit((Expr *)body, count_contig, &cg);
    if (ti->kind == PT_GPU && red && (n <= 1 || !cg.reuse)) {
        /* a reduction to a vector or a scalar, or one whose outputs share
         * no operand (a row reduction: nothing to stage): a warp along the
         * reduction of each of 8 outputs (one for a scalar), 128-bit loads
         * when the operands run along it, partial sums combined by
         * shuffles */
        if (n >= 1)
            mk.threads[n - 1] = 8;
        mk.rthreads = 32;
        bool along = cg.reduce > 0 || n == 0;
        mk.vec = along ? 4 : 1;
        mk.vaxis = along ? MK_VEC_REDUCE : MK_VEC_SPATIAL;
        mk.rchunk = 32 * mk.vec;
    } else if (ti->kind == PT_GPU) {
        if (n >= 1) { mk.threads[n - 1] = 16; mk.tile[n - 1] = 4; }
        if (n >= 2) { mk.threads[n - 2] = 16; mk.tile[n - 2] = 4; }
        mk.rchunk = red ? 16 : 0;
        mk.stage = red && n >= 2;
        mk.vec = 4;
    } else if (red && (n < 2 || cg.reduce > cg.spatial)) {
        /* dot products: vectors along the reduction, 4x4 outputs a thread
         * (4x2 with 16 registers) */
        if (n >= 1) { mk.threads[n - 1] = n >= 2 ? 16 : 4; mk.tile[n - 1] = ti->vregs >= 32 ? 4 : 2; }
        if (n >= 2) mk.tile[n - 2] = 4;
        mk.rchunk = 16 * ti->vec_width;
        mk.vaxis = MK_VEC_REDUCE;
    } else if (red) {
        /* outer products: 6 x (2 vectors) tiles, operands packed per block */
        mk.threads[n - 1] = 8;
        mk.tile[n - 1] = 2 * ti->vec_width;
        mk.threads[n - 2] = 4;
        mk.tile[n - 2] = 6;
        mk.rchunk = 256;
        mk.stage = true;
    } else if (n >= 1) {
        mk.threads[n - 1] = 8;
        mk.tile[n - 1] = ti->vec_width;
        if (n >= 2)
            mk.threads[n - 2] = 4;
    }
    if (ti->kind == PT_CPU)
        fit_extents(p, t, cg.red, ti->vec_width, &mk);
    pass_legalize_microkernel(&mk, t, ti);
    return mk;
}

void pass_legalize_microkernel(MicroKernel *mk, const Tensor *t, const TargetInfo *ti)
{
    int n = t->rank, nt = 1;
    /* threads along the reduction: a power of two within a warp, GPU only */
    int R = ti->kind == PT_GPU ? clampi(mk->rthreads, 1, MK_MAX_RTHREADS) : 1;
    while (R & (R - 1))
        R &= R - 1;
    for (int a = 0; a < MK_MAX_AXES; a++) {
        mk->threads[a] = a < n ? clampi(mk->threads[a], 1, 1024) : 1;
        mk->tile[a] = a < n ? clampi(mk->tile[a], 1, 64) : 1;
    }
    while (R > 1 && R > ti->max_threads)
        R /= 2;
    mk->rthreads = R;
    nt = R;
    for (int a = 0; a < n; a++) {
        while (nt * mk->threads[a] > ti->max_threads && mk->threads[a] > 1)
            mk->threads[a] /= 2;
        nt *= mk->threads[a];
    }
    mk->rchunk = clampi(mk->rchunk, 0, 4096);
    mk->unroll = clampi(mk->unroll, 1, 16);
    mk->split = n < MK_MAX_AXES ? clampi(mk->split, 1, MK_MAX_SPLIT) : 1;
    mk->atomic = mk->atomic && mk->split > 1 && ti->kind == PT_GPU;
    if (mk->vec < 1 || (mk->vec & (mk->vec - 1)) || mk->vec > MK_MAX_VEC)
        mk->vec = 1;
    if (mk->vaxis == MK_VEC_REDUCE && (mk->rchunk == 0 || mk->rchunk % mk->vec != 0))
        mk->vaxis = MK_VEC_SPATIAL;
    if (mk->vaxis == MK_VEC_SPATIAL && (n == 0 || mk->tile[n - 1] % mk->vec != 0))
        mk->vec = 1;
    /* a packing launch serves the CPU's outer-product kernel, which reads
     * its panel by chunks as staged (passes/lower.c) */
    mk->pack = mk->pack && ti->kind == PT_CPU && n >= 2 && mk->vaxis == MK_VEC_SPATIAL &&
               mk->vec > 1 && mk->rchunk > 0 && mk->split == 1;
    if (mk->pack)
        mk->stage = true;
    if (mk->rchunk == 0)
        mk->stage = false;
    if (!mk->stage || ti->kind != PT_GPU)
        mk->pipeline = false;
    mk->raster = ti->kind == PT_GPU && n >= 2 ? clampi(mk->raster, 1, 64) : 1;
}

/* bytes as "8 MiB", "1.5 KiB" or "12 bytes" */
static void fmt_bytes(char *buf, size_t n, int64_t b)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 3)
        v /= 1024, u++;
    snprintf(buf, n, v == (int64_t)v ? "%.0f %s" : "%.1f %s", v, units[u]);
}

bool pass_check_microkernel(const MicroKernel *in, const Tensor *t, const TargetInfo *ti,
                            char *err, size_t errlen)
{
    MicroKernel mk = *in;
    pass_legalize_microkernel(&mk, t, ti);
    bool cpu = ti->kind == PT_CPU;
    /* a thread's accumulators: a word per point of its tile, a vector of
     * them per point with vectors along the reduction; they are also the
     * unrolled update's statements, a vector each on the CPU */
    int64_t words = mk.vaxis == MK_VEC_REDUCE ? mk.vec : 1, nthreads = mk.rthreads;
    for (int a = 0; a < t->rank; a++) {
        words *= mk.tile[a];
        nthreads *= mk.threads[a];
    }
    int64_t stmts = (cpu ? words / mk.vec : words) * mk.unroll;
    /* CPU: a block's threads run one after another on one thread's stack;
     * a staged block splits at its barriers, so every thread's
     * accumulators live through the block, beside the staged operands
     * (passes/stage.c keeps them within ti->shared_bytes) */
    int64_t per = mk.stage ? nthreads : 1;
    int64_t bytes = words * 4 * per, limit = PASS_MAX_CPU_FRAME - (mk.stage ? ti->shared_bytes : 0);
    if (stmts <= PASS_MAX_UNROLLED && (cpu ? bytes <= limit : words <= PASS_MAX_GPU_ACCUMULATORS))
        return true;
    char tile[96] = "1", vec[32] = "";
    for (int a = 0, len = 0; a < t->rank && len < (int)sizeof tile; a++)
        len += snprintf(tile + len, sizeof tile - (size_t)len, "%s%d", a ? " x " : "", mk.tile[a]);
    if (mk.vec > 1)
        snprintf(vec, sizeof vec, " x vec %d", mk.vec);
    if (stmts > PASS_MAX_UNROLLED) {
        snprintf(err, errlen, "%s: micro-kernel unrolls its update into %lld statements (tile %s, "
                 "unroll %d%s); the limit is %d", t->name, (long long)stmts, tile, mk.unroll,
                 cpu && mk.vec > 1 ? ", a vector each" : "", PASS_MAX_UNROLLED);
        return false;
    }
    if (!cpu && words > PASS_MAX_GPU_ACCUMULATORS) {
        snprintf(err, errlen, "%s: micro-kernel needs %lld registers of accumulators a thread "
                 "(tile %s%s); the limit is %d", t->name, (long long)words, tile,
                 mk.vaxis == MK_VEC_REDUCE ? vec : "", PASS_MAX_GPU_ACCUMULATORS);
        return false;
    }
    char b[32], l[32], s[32];
    fmt_bytes(b, sizeof b, bytes);
    fmt_bytes(l, sizeof l, limit);
    fmt_bytes(s, sizeof s, ti->shared_bytes);
    snprintf(err, errlen, "%s: micro-kernel needs %s of accumulators on a CPU block's stack "
             "(%lld thread%s x tile %s%s x 4 bytes); the limit is %s%s%s%s", t->name, b,
             (long long)per, per == 1 ? "" : "s", tile, mk.vaxis == MK_VEC_REDUCE ? vec : "", l,
             mk.stage ? " (a staged block's " : "", mk.stage ? s : "",
             mk.stage ? " of staging aside)" : "");
    return false;
}

void pass_split_microkernels(const MicroKernel *mk, const Tensor *t, const TargetInfo *ti,
                             MicroKernel *partial, MicroKernel *combine)
{
    int n = t->rank;
    *partial = *mk;
    partial->split = 1;
    partial->atomic = false;
    partial->threads[0] = partial->tile[0] = 1;
    for (int a = 0; a < n && a + 1 < MK_MAX_AXES; a++) {
        partial->threads[a + 1] = mk->threads[a];
        partial->tile[a + 1] = mk->tile[a];
    }
    MicroKernel *c = combine;
    memset(c, 0, sizeof *c);
    for (int a = 0; a < MK_MAX_AXES; a++)
        c->threads[a] = c->tile[a] = 1;
    c->unroll = c->split = c->rthreads = c->raster = 1;
    c->vec = 1;
    if (n >= 1) {
        bool gpu = ti->kind == PT_GPU;
        c->threads[n - 1] = gpu ? 32 : 8;
        c->tile[n - 1] = gpu ? 4 : ti->vec_width;
        c->vec = gpu ? 4 : ti->vec_width;
        if (n >= 2)
            c->threads[n - 2] = 4;
    }
    /* rchunk 0: the parts in one chunk */
}

MicroKernel pass_pack_microkernel(const Tensor *P, const TargetInfo *ti)
{
    int n = P->rank, vw = ti->vec_width;
    int64_t nb = 1;
    ir_is_const(P->shape[n - 1], &nb);
    MicroKernel mk = pass_unit_microkernel();
    /* squares of vw x vw: vectors along the panel's rows, vw of its rows
     * (the source's contiguous axis, for W[N, K]) unrolled, so that codegen
     * transposes them in registers; a block copies 4 x vw rows of one
     * panel. A reduction axis shorter than a vector (a convolution's
     * window) is copied a row at a time. */
    mk.vec = vw;
    mk.tile[n - 1] = vw;
    mk.threads[n - 1] = nb % vw == 0 ? (int)(nb / vw) : 1;
    int64_t rows;
    if (n >= 3 && !(ir_is_const(P->shape[n - 2], &rows) && rows < vw)) {
        mk.tile[n - 2] = vw;
        mk.threads[n - 2] = 4;
    }
    pass_legalize_microkernel(&mk, P, ti);
    return mk;
}

/* Reads "[a, b, ...]" into v; returns the count or -1. */
static int parse_list(const char **s, int *v, int max)
{
    const char *p = *s;
    int n = 0;
    while (*p == ' ')
        p++;
    if (*p++ != '[')
        return -1;
    while (*p == ' ')
        p++;
    while (*p && *p != ']') {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || n == max || x < 1 || x > 4096)
            return -1;
        v[n++] = (int)x;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
        while (*p == ' ')
            p++;
    }
    if (*p != ']')
        return -1;
    *s = p + 1;
    return n;
}

/* The clauses of a micro-kernel's text, each at most once. */
enum { C_THREADS, C_TILE, C_RCHUNK, C_UNROLL, C_VEC, C_SPLIT, C_RTHREADS, C_RASTER, C_ALONG,
       C_STAGED, C_STRIDED, C_PIPELINED, C_ATOMIC, C_PACKED, NCLAUSES };
static const char *const clause_names[NCLAUSES] = {
    "threads", "tile", "rchunk", "unroll", "vec", "split", "rthreads", "raster",
    "along reduction", "staged", "strided", "pipelined", "atomic", "packed"};

bool pass_parse_microkernel(const char *s, MicroKernel *mk, int *nspatial)
{
    memset(mk, 0, sizeof *mk);
    for (int a = 0; a < MK_MAX_AXES; a++)
        mk->threads[a] = mk->tile[a] = 1;
    mk->unroll = mk->vec = mk->split = mk->rthreads = mk->raster = 1;
    int nt = -1, nl = -1;
    unsigned seen = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        int c = 0;
        size_t len = 0;
        for (; c < NCLAUSES; c++) {
            len = strlen(clause_names[c]);
            if (strncmp(p, clause_names[c], len) == 0 && (p[len] == ' ' || p[len] == '[' || !p[len]))
                break;
        }
        /* each clause once, so that a kernel has one text */
        if (c == NCLAUSES || (seen & 1u << c))
            return false;
        seen |= 1u << c;
        p += len;
        if (c == C_THREADS || c == C_TILE) {
            int n = parse_list(&p, c == C_THREADS ? mk->threads : mk->tile, MK_MAX_AXES);
            if (n < 0)
                return false;
            *(c == C_THREADS ? &nt : &nl) = n;
        } else if (c <= C_RASTER) {
            char *end;
            long x = strtol(p, &end, 10);
            /* rchunk 0: no reduction; every other count is at least 1, so
             * that a kernel has one text (it prints no split 1) */
            if (end == p || x < (c == C_RCHUNK ? 0 : 1) || x > 4096 || (*end && *end != ' '))
                return false;
            int *field[] = {[C_RCHUNK] = &mk->rchunk, [C_UNROLL] = &mk->unroll,
                            [C_VEC] = &mk->vec, [C_SPLIT] = &mk->split,
                            [C_RTHREADS] = &mk->rthreads, [C_RASTER] = &mk->raster};
            *field[c] = (int)x;
            p = end;
        } else if (c == C_ALONG) {
            mk->vaxis = MK_VEC_REDUCE;
        } else if (c == C_STAGED) {
            mk->stage = true;
        } else if (c == C_STRIDED) {
            mk->strided = true;
        } else if (c == C_PIPELINED) {
            mk->pipeline = true;
        } else if (c == C_PACKED) {
            mk->pack = true;
        } else {
            mk->atomic = true;
        }
    }
    /* atomic qualifies a split; without one it would be a second text */
    if (nt != nl || (mk->atomic && mk->split < 2))
        return false;
    if (nspatial)
        *nspatial = nt < 0 ? 0 : nt;
    return true;
}

MicroKernel pass_outer_microkernel(int rank, const TargetInfo *ti, int mr, int row_tiles,
                                   int64_t k)
{
    int vw = ti->vec_width;
    /* a target described by hand, without caches: the typical ones */
    int64_t typical[3];
    pass_typical_caches(typical);
    int64_t l1 = ti->cache[0] > 0 ? ti->cache[0] : typical[0];
    int64_t l2 = ti->cache[1] > 0 ? ti->cache[1] : typical[1];
    MicroKernel mk = pass_unit_microkernel();
    mk.vec = vw;
    mk.tile[rank - 2] = mr;
    mk.tile[rank - 1] = 2 * vw;
    /* K: the packed panel (KC x 2 vectors of floats) in L1 */
    mk.rchunk = 4 * vw;
    while (mk.rchunk < 64 * vw && (int64_t)mk.rchunk * 2 * 2 * vw * 4 <= l1)
        mk.rchunk *= 2;
    mk.rchunk = pass_even_chunk(k, mk.rchunk, vw);
    /* the rows: row_tiles x mr rows of the other operand, KC long, in half
     * of L2 */
    int64_t fit = l2 / 2 / ((int64_t)mr * mk.rchunk * 4);
    mk.threads[rank - 2] = fit < 1 ? 1 : fit < row_tiles ? (int)fit : row_tiles;
    mk.stage = true;
    return mk;
}

int pass_even_chunk(int64_t k, int rchunk, int v)
{
    if (k <= 0 || rchunk <= 0 || v < 1)
        return rchunk;
    int64_t c = ((int64_t)rchunk + v - 1) / v * v, chunks = (k + c - 1) / c;
    int64_t even = (k + chunks - 1) / chunks;
    return (int)((even + v - 1) / v * v);
}

int64_t pass_chunked_length(const Expr *red)
{
    int64_t k;
    return red && red->red.n == 1 && ir_is_const(red->red.axes[0]->extent, &k) ? k : 0;
}

/* The rows above which a dense layer's default is the outer-product
 * kernel (bench/dense: the dot-product kernel is ahead up to about 32
 * rows on every BERT layer, behind from 48). */
enum { DEFAULT_OUTER_ROWS = 32 };

static void find_reduce(Expr *e, void *ud)
{
    const Expr **r = ud;
    if (e->kind == EX_REDUCE && !*r)
        *r = e;
}

/* The outer-product kernel for the rows of a dense layer t (rank >= 2,
 * operands contiguous along the reduction), or false when t is not one:
 * its rows a dim, at least 64 outputs a row and a reduction of at least 64
 * of constant length. */
static bool dense_outer(const Tensor *t, const Expr *body, const TargetInfo *ti, MicroKernel *mk)
{
    int n = t->rank, vw = ti->vec_width;
    int64_t cols;
    const Expr *red = NULL;
    ir_expr_visit((Expr *)body, find_reduce, &red);
    if (ti->kind != PT_CPU || n < 2 || vw < 2 || !red ||
        !ir_is_const(t->shape[n - 1], &cols) || cols < 64 || t->shape[n - 2]->kind != EX_VAR ||
        t->shape[n - 2]->var->kind != VK_DIM)
        return false;
    int64_t K = 1;
    for (int j = 0; j < red->red.n; j++) {
        int64_t e;
        if (!ir_is_const(red->red.axes[j]->extent, &e))
            return false;
        K *= e;
    }
    if (K < 64)
        return false;
    *mk = pass_outer_microkernel(n, ti, 6, 22, pass_chunked_length(red));
    pass_legalize_microkernel(mk, t, ti);
    return true;
}

StageSchedule pass_default_schedule(TeProgram *p, const Tensor *t, const Expr *body,
                                    const TargetInfo *ti)
{
    MicroKernel dot = pass_default_microkernel(p, t, body, ti), outer;
    bool dense = dot.vaxis == MK_VEC_REDUCE && dense_outer(t, body, ti, &outer);
    PassPack pk = dense ? pass_pack_kind(p->ctx, t, (Expr *)body) : PASS_PACK_NONE;
    bool packed = pk == PASS_PACK_LAUNCH;
    int nv = packed ? 3 : dense ? 2 : 1;
    MicroKernel *mk = IR_NEWN(p->arena, MicroKernel, nv);
    mk[0] = dot;
    if (!dense)
        return (StageSchedule){1, mk, NULL};
    mk[1] = outer;
    if (pk == PASS_PACK_CONST) { /* over a constant's panels, packed when compiling */
        mk[1].pack = true;
        pass_legalize_microkernel(&mk[1], t, ti);
    }
    /* rows <= 32: dot products; then outer products; from a few row
     * blocks on, outer products over panels packed by a launch */
    int rows = t->shape[t->rank - 2]->var->pos;
    int64_t block_rows = (int64_t)outer.threads[t->rank - 2] * outer.tile[t->rank - 2];
    DispatchNode *nodes = IR_NEWN(p->arena, DispatchNode, 5);
    nodes[0] = (DispatchNode){-1, rows, DEFAULT_OUTER_ROWS, 1, 2};
    nodes[1] = (DispatchNode){0, 0, 0, 0, 0};
    nodes[2] = (DispatchNode){1, 0, 0, 0, 0};
    if (packed) {
        mk[2] = outer;
        mk[2].pack = true;
        pass_legalize_microkernel(&mk[2], t, ti);
        nodes[2] = (DispatchNode){-1, rows, (PASS_PACK_MIN_ROW_BLOCKS - 1) * block_rows, 3, 4};
        nodes[3] = (DispatchNode){1, 0, 0, 0, 0};
        nodes[4] = (DispatchNode){2, 0, 0, 0, 0};
    }
    Dispatch *d = IR_NEW(p->arena, Dispatch);
    d->nnodes = packed ? 5 : 3;
    d->nodes = nodes;
    return (StageSchedule){nv, mk, d};
}
