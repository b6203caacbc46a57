/* stage: copy each block's operand tiles into a buffer shared by the
 * block's threads once per reduction chunk (GPU shared memory; on the CPU
 * the same copy is the packing step of a BLAS micro-kernel).
 *
 * requires: tile's structure (ko loop, thread and register-tile vars).
 * ensures:  for every global load in the reduction update whose indices
 *           are each block-uniform plus at most one of "a thread's tile
 *           position along spatial axis a" or "the position in the chunk",
 *           a shared buffer L_s[chunk, tile...] (chunk first, so a row of
 *           one chunk step is contiguous along the tile) filled at the top
 *           of each chunk by all threads together, between two barriers,
 *           reading the source in its own row-major order; the update
 *           reads L_s instead. Other loads (a convolution's halo) stay
 *           global, and so do, in a packed CPU variant (mk.pack), its
 *           panels (Tensor.panel: laid out for it by its packing launch or
 *           when compiling): read in place, one barrier a chunk keeping
 *           the chunk loop outside the threads. A pipelined micro-kernel
 *           (GPU) has two buffers and one barrier a chunk: the next chunk
 *           goes through registers, or with ti->async_copy as async
 *           stores (cp.async) that the barrier at the top of the next
 *           chunk waits for.
 * breaks:   nothing; the copy's global loads are guarded later by pad.
 */
#include "dietcode/passes.h"

#include <string.h>

enum { MAX_STAGED = 8 };

typedef struct Staged {
    const Expr *orig;       /* the global load replaced */
    char name[64];
    int nd;                 /* its shared copy: shape and the indices */
    int64_t shape[MK_MAX_AXES + 1];
    Expr *dst[MK_MAX_AXES + 1];  /* of the copy's element (e, v) */
    Expr *ridx[MK_MAX_AXES + 1]; /* of the update's read */
    Expr *value;            /* the element (e, v) of chunk ko, from global memory */
    Var *e, *v;             /* the copy's steps and vector lanes */
    Var *u;                 /* CPU, transposing: Vc source-contiguous elements a lane (NULL: none) */
    int64_t steps;
    int Vc;
    Expr *guard;            /* the copy's step holds an element (NULL: always) */
    Expr *owner;            /* CPU: the one thread that copies (NULL: all) */
    Tensor *buf;            /* made by stage_kernel */
    Expr *repl;             /* the load of the copy in the update */
} Staged;

typedef struct Stager {
    ExprCtx *c;
    Arena *a;
    Kernel *k;
    const TargetInfo *ti;
    Var *zero_vars[MK_MAX_AXES * 2 + 3];
    Expr *zeros[MK_MAX_AXES * 2 + 3];
    int nzero;
    Var *unit_vars[MK_MAX_AXES * 2]; /* thread and tile positions of extent 1 */
    int nunit;
    Expr *tpos[MK_MAX_AXES]; /* the tile pass's positions in the block tile */
    Expr *kpos;              /* position in the chunk */
    Staged st[MAX_STAGED];
    int nst;
    bool inplace;            /* CPU: a load left unstaged, already laid out as its copy */
    int bytes;
    Var *thread;
    /* the lets inside the thread loop (t_a, rl: positions from Th) */
    int nlets;
    Var *letv[MK_MAX_AXES + 1];
    Expr *letval[MK_MAX_AXES + 1];
} Stager;

/* Which part of a tile an index moves along: -1 none, 0..n-1 spatial
 * axis, n the chunk; -2 when it is not stageable. */
static int classify(Stager *s, Expr *idx, Expr **base)
{
    ExprCtx *c = s->c;
    /* positions along axes of one thread and one point are always 0 */
    idx = ir_simplify(c, ir_subst_many(c, idx, s->nunit, s->unit_vars, s->zeros));
    *base = ir_simplify(c, ir_subst_many(c, idx, s->nzero, s->zero_vars, s->zeros));
    Expr *delta = ir_simplify(c, ir_binop(c, EX_SUB, idx, *base));
    int64_t v;
    if (ir_is_const(delta, &v))
        return v == 0 ? -1 : -2;
    for (int a = 0; a < s->k->nspatial; a++)
        if (delta == s->tpos[a])
            return a;
    if (delta == s->kpos)
        return s->k->nspatial;
    return -2;
}

static Expr *C(Stager *s, int64_t v) { return ir_int(s->c, v); }

/* Double-buffered (GPU, a micro-kernel that asks for it). */
static bool pipelined(const Stager *s) { return s->ti->kind == PT_GPU && s->k->mk.pipeline; }

/* Double-buffered through asynchronous copies (cp.async) rather than
 * registers. */
static bool async_copies(const Stager *s) { return pipelined(s) && s->ti->async_copy; }

/* Row-major word offset of idx in a buffer of nd dims of extents dims. */
static Expr *row_major(ExprCtx *c, int nd, Expr *const *dims, Expr *const *idx)
{
    Expr *f = idx[0];
    for (int d = 1; d < nd; d++)
        f = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, f, dims[d]), idx[d]);
    return ir_simplify(c, f);
}

/* The same in a buffer of constant shape. */
static Expr *offset_of(ExprCtx *c, int nd, const int64_t *shape, Expr *const *idx)
{
    Expr *dims[MK_MAX_AXES + 2];
    IR_ASSERT(nd <= MK_MAX_AXES + 2);
    for (int d = 0; d < nd; d++)
        dims[d] = ir_int(c, shape[d]);
    return row_major(c, nd, dims, idx);
}

/* Wavefronts a warp spends on one staged buffer per chunk, laid out with
 * the given shape: the copy's stores (its lane var v, Vc words each) and
 * the update's reads (ki steps; the register tile's points it depends on;
 * vectors along the vectorised tile axis). */
static int64_t layout_cost(Stager *s, int nd, const int64_t *shape, Expr *const *dst, Var *v,
                           int Vc, int64_t steps, Expr *const *ridx, const bool *used)
{
    ExprCtx *c = s->c;
    Kernel *k = s->k;
    int n = k->nspatial;
    int64_t cost = 0;
    /* the copy's stores: one of Vc words when v runs along the row, else
     * Vc scalar ones */
    Expr *st = offset_of(c, nd, shape, dst);
    Expr *next = ir_simplify(c, ir_subst(c, st, v, ir_binop(c, EX_ADD, ir_varref(c, v), ir_int(c, 1))));
    int64_t stride = 0;
    ir_is_const(ir_simplify(c, ir_binop(c, EX_SUB, next, st)), &stride);
    if (Vc > 1 && stride == 1) {
        cost += steps * ir_access_wavefronts(c, st, s->thread, k->nthreads, s->nlets, s->letv,
                                             s->letval, v, Vc);
    } else {
        for (int l = 0; l < Vc; l++)
            cost += steps * ir_access_wavefronts(c, ir_subst(c, st, v, ir_int(c, l)), s->thread,
                                                 k->nthreads, s->nlets, s->letv, s->letval, NULL, 1);
    }
    /* the update's reads: vectors along the last spatial axis when the
     * vectorize pass will make them (its tile var runs along the row) */
    Expr *rd = offset_of(c, nd, shape, ridx);
    int last = n - 1;
    int V = k->mk.vaxis == MK_VEC_SPATIAL && k->mk.vec > 1 && n > 0 &&
                    k->mk.tile[last] % k->mk.vec == 0 ? k->mk.vec : 1;
    int64_t reads = k->kc / (k->mk.vaxis == MK_VEC_REDUCE && k->lane ? k->mk.vec : 1) /
                    (k->rlane ? k->mk.rthreads : 1);
    Var *lane = NULL;
    for (int a = 0; a < n; a++) {
        if (!used[a])
            continue;
        if (a == last && V > 1) {
            Expr *nx = ir_simplify(c, ir_subst(c, rd, k->rvar[a],
                                               ir_binop(c, EX_ADD, ir_varref(c, k->rvar[a]), ir_int(c, 1))));
            int64_t d = 0;
            if (ir_is_const(ir_simplify(c, ir_binop(c, EX_SUB, nx, rd)), &d) && d == 1) {
                lane = k->rvar[a];
                reads *= k->mk.tile[a] / V;
                continue;
            }
        }
        reads *= k->mk.tile[a];
    }
    int w = lane ? (V > 4 ? 4 : V) : 1;
    int64_t per = ir_access_wavefronts(c, rd, s->thread, k->nthreads, s->nlets, s->letv, s->letval,
                                       lane, w);
    return cost + reads * per * (lane ? V / w : 1);
}

/* Builds the shared copy of one load, or returns false.
 *
 * On the GPU the copy moves 128-bit vectors (4 floats along the source's
 * contiguous axis) when that axis is a tile part of a multiple of 4 and
 * both the tensor's row length and the tile's start along it are proven
 * multiples of 4, so each vector is 16-byte aligned and wholly in or out
 * of bounds; the buffer's rows are padded by the number of words (0, 1,
 * 2, 4 or 8) that costs the fewest wavefronts per chunk over the copy's
 * stores and the update's reads (ir/banks.c), the least padding among
 * equals. */
static bool stage_load(Stager *s, Expr *ld)
{
    ExprCtx *c = s->c;
    Kernel *k = s->k;
    int n = k->nspatial, rank = ld->load.n;
    int which[MK_MAX_AXES + 8];
    Expr *base[MK_MAX_AXES + 8];
    bool used[MK_MAX_AXES + 1] = {0};
    bool gpu = s->ti->kind == PT_GPU;
    if (rank > MK_MAX_AXES + 8)
        return false;
    /* CPU, a packed variant (mk.pack): its panels, laid out for it (each
     * thread's tile one contiguous run a chunk), are read in place */
    if (!gpu && k->mk.pack && ld->load.t->panel) {
        s->inplace = true;
        return false;
    }
    for (int d = 0; d < rank; d++) {
        which[d] = classify(s, ld->load.idx[d], &base[d]);
        if (which[d] == -2 || (which[d] >= 0 && used[which[d]]))
            return false;
        if (which[d] >= 0)
            used[which[d]] = true;
    }
    /* shared layout: chunk first, then spatial axes in axis order; with
     * vectors along the reduction, the chunk last, so the update's vectors
     * and the copy's (the operands run along the reduction) are contiguous
     * rows: on the CPU not gathers, on the GPU 128-bit shared loads and
     * stores instead of scalar ones */
    int64_t shape[MK_MAX_AXES + 1], ext[MK_MAX_AXES + 1];
    int layout_of[MK_MAX_AXES + 1], ns = 0;
    int order[MK_MAX_AXES + 1];
    bool chunk_last = k->mk.vaxis == MK_VEC_REDUCE;
    if (!chunk_last)
        order[ns++] = n;
    for (int a = 0; a < n; a++)
        order[ns++] = a;
    if (chunk_last)
        order[ns++] = n;
    int nd = 0;
    int64_t elems = 1;
    for (int i = 0; i < ns; i++) {
        int part = order[i];
        if (!used[part])
            continue;
        ext[part] = part == n ? k->kc : (int64_t)k->mk.threads[part] * k->mk.tile[part];
        layout_of[part] = nd;
        shape[nd++] = ext[part];
        elems *= ext[part];
    }
    int nbuf = pipelined(s) ? 2 : 1;
    /* a tile read in place (below) needs no room */
    bool fits = s->bytes + elems * 4 * nbuf <= s->ti->shared_bytes;
    if (nd == 0 || (gpu && !fits))
        return false;

    /* The order the copy walks the tile in, fastest part first, and its
     * vectors (Vc elements along the fastest part). GPU: the source's
     * order, 128-bit vectors along its last axis when they are aligned and
     * wholly in or out of bounds, so a warp's loads are coalesced. CPU:
     * the buffer's order, vectors of the target's width along its rows, so
     * the stores are contiguous (a copy that transposes, as packing a
     * panel of W[N, K] as [K][N] does, goes by squares: below). */
    const Tensor *src_t = ld->load.t;
    int dl = rank - 1, Vc = 1;
    int walk[MK_MAX_AXES + 1], nw = 0;
    if (gpu) {
        for (int d = rank - 1; d >= 0; d--)
            if (which[d] >= 0)
                walk[nw++] = which[d];
        if (which[dl] >= 0 && ext[which[dl]] % 4 == 0 && ir_prove_multiple(c, src_t->shape[dl], 4) &&
            ir_prove_multiple(c, base[dl], 4))
            Vc = 4;
    } else {
        for (int i = ns - 1; i >= 0; i--)
            if (used[order[i]])
                walk[nw++] = order[i];
        int vw = s->ti->vec_width;
        if (vw > 1 && ext[walk[0]] % vw == 0)
            Vc = vw;
    }
    /* CPU, a copy that transposes (the source's contiguous axis is not the
     * buffer rows' one, as packing a panel of W[N, K] as [K][N]): each
     * step copies a Vc x Vc square, Vc unrolled lanes along the source's
     * rows (tp), so codegen reads Vc contiguous rows and transposes them
     * in registers instead of gathering element by element */
    int tp = which[dl];
    bool square = !gpu && Vc > 1 && tp >= 0 && tp != walk[0] && ext[tp] % Vc == 0;

    /* the copy: GPU thread Th takes units Th, Th + NT, ... (Vc elements
     * each); on the CPU, where a block's threads run one after another,
     * thread 0 takes them all, in order: a plain nest whose indices are
     * shifts and masks of one counter, its gathers' offsets one constant
     * vector */
    int64_t NT = gpu ? k->nthreads : 1, units = elems / Vc / (square ? Vc : 1);
    int64_t steps = (units + NT - 1) / NT;
    Var *e = ir_var(c, "e", VK_LOOP, C(s, steps));
    Var *v = ir_var(c, "v", VK_LOOP, C(s, Vc));
    Var *u = square ? ir_var(c, "u", VK_LOOP, C(s, Vc)) : NULL;
    Expr *flat = gpu ? ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, ir_varref(c, e), C(s, NT)),
                                ir_varref(c, s->thread))
                     : ir_varref(c, e);
    Expr *coord[MK_MAX_AXES + 1];
    int64_t below = 1;
    for (int i = 0; i < nw; i++) {
        int part = walk[i];
        Var *lanes = i == 0 && Vc > 1 ? v : square && part == tp ? u : NULL;
        int64_t eu = lanes ? ext[part] / Vc : ext[part];
        Expr *q = below == 1 ? flat : ir_binop(c, EX_DIV, flat, C(s, below));
        coord[part] = ir_simplify(c, ir_binop(c, EX_MOD, q, C(s, eu)));
        if (lanes)
            coord[part] = ir_simplify(c, ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, coord[part], C(s, Vc)),
                                                  ir_varref(c, lanes)));
        below *= eu;
    }
    Expr *src[MK_MAX_AXES + 8], *dst[MK_MAX_AXES + 1];
    for (int d = 0; d < rank; d++)
        src[d] = which[d] < 0 ? base[d] : ir_simplify(c, ir_binop(c, EX_ADD, base[d], coord[which[d]]));
    for (int i = 0; i < nw; i++)
        dst[layout_of[walk[i]]] = coord[walk[i]];
    Expr *ridx[MK_MAX_AXES + 1];
    for (int part = 0; part <= n; part++)
        if (used[part])
            ridx[layout_of[part]] = part == n ? s->kpos : s->tpos[part];

    /* the row padding with the fewest wavefronts (GPU); rows the update
     * reads in vectors keep their length a multiple of the vector, so
     * every vector stays aligned */
    int64_t row = shape[nd - 1];
    if (gpu) {
        static const int pads[] = {0, 1, 2, 4, 8};
        int64_t best = -1;
        int pick = 0, rv = chunk_last ? (k->mk.vec < 4 ? k->mk.vec : 4) : 1;
        /* an asynchronous copy of a vector along the row needs it 16-byte
         * aligned in shared memory too */
        if (async_copies(s) && Vc == 4 && layout_of[walk[0]] == nd - 1)
            rv = 4;
        for (size_t i = 0; i < sizeof pads / sizeof *pads; i++) {
            if ((row + pads[i]) % rv != 0)
                continue;
            shape[nd - 1] = row + pads[i];
            if (s->bytes + elems / row * shape[nd - 1] * 4 * nbuf > s->ti->shared_bytes)
                break;
            int64_t cost = layout_cost(s, nd, shape, dst, v, Vc, steps, ridx, used);
            if (cost >= 0 && (best < 0 || cost < best)) {
                best = cost;
                pick = pads[i];
            }
        }
        shape[nd - 1] = row + pick;
    }
    int64_t words = elems / row * shape[nd - 1];

    if (!fits)
        return false;
    Staged *st = &s->st[s->nst++];
    *st = (Staged){.orig = ld, .nd = nd, .e = e, .v = v, .u = u, .steps = steps, .Vc = Vc};
    snprintf(st->name, sizeof st->name, "%s_s", src_t->name);
    memcpy(st->shape, shape, sizeof(int64_t) * (size_t)nd);
    memcpy(st->dst, dst, sizeof(Expr *) * (size_t)nd);
    memcpy(st->ridx, ridx, sizeof(Expr *) * (size_t)nd);
    st->value = ir_load(c, ld->load.t, rank, src, ld->load.padded);
    if (steps * NT != units)
        st->guard = ir_binop(c, EX_LT, flat, C(s, units));
    if (!gpu && k->nthreads > 1)
        st->owner = ir_binop(c, EX_EQ, ir_varref(c, s->thread), C(s, 0));
    s->bytes += (int)(words * 4 * (pipelined(s) ? 2 : 1));
    return true;
}

/* On the CPU with vectors along the last spatial axis (the outer-product
 * kernel) only the operands read along that axis are packed (W's panel):
 * the others are broadcast one element at a time, straight from their
 * rows. */
static bool worth_packing(Stager *s, const Expr *ld)
{
    const Kernel *k = s->k;
    int last = k->nspatial - 1;
    if (s->ti->kind == PT_GPU || last < 0 || k->mk.vaxis != MK_VEC_SPATIAL || k->mk.vec < 2)
        return true;
    for (int i = 0; i < ld->load.n; i++)
        if (ir_expr_uses_var(ld->load.idx[i], k->tvar[last]) ||
            ir_expr_uses_var(ld->load.idx[i], k->rvar[last]))
            return true;
    return false;
}

static void collect_loads(Expr *e, void *ud)
{
    Stager *s = ud;
    /* staging buffers hold f32: integer and bool tensors (gathers' indices,
     * masks) are read where they are */
    if (e->kind != EX_LOAD || e->load.t->scope != MS_GLOBAL || e->load.t->dtype != DT_F32 ||
        s->nst == MAX_STAGED)
        return;
    for (int i = 0; i < s->nst; i++)
        if (s->st[i].orig == e)
            return;
    if (worth_packing(s, e))
        stage_load(s, e);
}

static void scan_store(Stmt *st, void *ud)
{
    if (st->kind == ST_STORE)
        ir_expr_visit(st->store.value, collect_loads, ud);
}

static void replace_in_store(Stmt *st, void *ud)
{
    Stager *s = ud;
    if (st->kind != ST_STORE)
        return;
    for (int i = 0; i < s->nst; i++)
        st->store.value = ir_replace(s->c, st->store.value, s->st[i].orig, s->st[i].repl);
}

/* The copy of staged load st, element by element ([if owner:] for e:
 * [if guard:] [for u unrolled:] for v:): from global memory at chunk `chunk` (NULL: from the registers
 * regs) into the shared buffer (its first index `which` when double
 * buffered; NULL: not double buffered), asynchronously when async_copies,
 * or, with chunk and regs both given, into the registers. */
static Stmt *copy(Stager *s, const Staged *st, Expr *chunk, Tensor *regs, Expr *which)
{
    ExprCtx *c = s->c;
    Expr *ev[2] = {ir_varref(c, st->e), st->Vc > 1 ? ir_varref(c, st->v) : ir_int(c, 0)};
    Expr *value = chunk ? ir_simplify(c, ir_subst(c, st->value, s->k->ko, chunk))
                        : ir_load(c, regs, 2, ev, false);
    Stmt *body;
    if (chunk && regs) {
        body = ir_store(s->a, regs, 2, ev, value);
    } else {
        Expr *dst[MK_MAX_AXES + 2];
        int nb = 0;
        if (which)
            dst[nb++] = which;
        memcpy(dst + nb, st->dst, sizeof(Expr *) * (size_t)st->nd);
        body = ir_store(s->a, st->buf, st->nd + nb, dst, value);
        body->store.async = chunk && which && async_copies(s);
    }
    if (st->Vc > 1)
        body = ir_for(s->a, st->v, FK_VECTORIZED, body);
    if (st->u) {
        IR_ASSERT(!regs); /* squares are the CPU's; registers carry the GPU's pipeline */
        body = ir_for(s->a, st->u, FK_UNROLLED, body);
    }
    if (st->guard)
        body = ir_if(s->a, st->guard, body, NULL);
    /* in registers across the compute: unrolled, so they stay registers */
    body = ir_for(s->a, st->e, regs ? FK_UNROLLED : FK_SERIAL, body);
    return st->owner ? ir_if(s->a, st->owner, body, NULL) : body;
}

static Stmt *find_loop_of(Stmt *s, const Var *v)
{
    Stmt *r = NULL;
    switch (s->kind) {
    case ST_FOR: return s->loop.var == v ? s : find_loop_of(s->loop.body, v);
    case ST_ALLOC: return find_loop_of(s->alloc.body, v);
    case ST_LET: return find_loop_of(s->let.body, v);
    case ST_SEQ:
        for (int i = 0; i < s->seq.n && !r; i++)
            r = find_loop_of(s->seq.s[i], v);
        return r;
    default: return NULL;
    }
}

/* The FK_THREAD loop of a kernel (under the block loop and its lets). */
static Stmt *find_thread_loop(Stmt *s)
{
    while (s->kind == ST_FOR || s->kind == ST_LET) {
        if (s->kind == ST_FOR && s->loop.fk == FK_THREAD)
            return s;
        s = s->kind == ST_FOR ? s->loop.body : s->let.body;
    }
    return NULL;
}

/* Adds the bytes of a shared buffer the kernel already allocates (the
 * tile pass's sums across warps) to *ud. */
static void count_shared(Stmt *s, void *ud)
{
    if (s->kind == ST_ALLOC && s->alloc.buf->scope == MS_SHARED)
        *(int64_t *)ud += 4 * ir_buffer_words(s->alloc.buf);
}

static void stage_kernel(Kernel *k, ExprCtx *c, Arena *a, const TargetInfo *ti)
{
    if (!k->mk.stage || !k->ko_loop || k->kc <= 0)
        return;
    Stmt *th = find_thread_loop(k->body);
    if (!th)
        return;
    Stager s = {.c = c, .a = a, .k = k, .ti = ti, .thread = th->loop.var};
    /* the budget is what the block has left */
    int64_t used = 0;
    ir_stmt_visit(k->body, count_shared, &used);
    s.bytes = (int)used;
    for (Stmt *l = th->loop.body; l->kind == ST_LET && s.nlets < MK_MAX_AXES + 1; l = l->let.body) {
        s.letv[s.nlets] = l->let.var;
        s.letval[s.nlets++] = l->let.value;
    }
    int n = k->nspatial;
    for (int i = 0; i < n; i++) {
        if (k->mk.threads[i] == 1)
            s.unit_vars[s.nunit++] = k->tvar[i];
        if (k->mk.tile[i] == 1)
            s.unit_vars[s.nunit++] = k->rvar[i];
        s.zero_vars[s.nzero] = k->tvar[i];
        s.zeros[s.nzero++] = ir_int(c, 0);
        s.zero_vars[s.nzero] = k->rvar[i];
        s.zeros[s.nzero++] = ir_int(c, 0);
    }
    for (int i = 0; i < n; i++) /* as classify sees indices: unit positions at 0 */
        s.tpos[i] = ir_simplify(c, ir_subst_many(c, k->tpos[i], s.nunit, s.unit_vars, s.zeros));
    /* the update loop over the chunk */
    Stmt *ki_loop = k->ko_loop->loop.body;
    IR_ASSERT(ki_loop->kind == ST_FOR && ki_loop->loop.var == k->ki);
    s.zero_vars[s.nzero] = k->ki;
    s.zeros[s.nzero++] = ir_int(c, 0);
    /* the chunk position as tile wrote it: zero at ki = rlane = lane = 0 */
    if (k->rlane) {
        s.zero_vars[s.nzero] = k->rlane;
        s.zeros[s.nzero++] = ir_int(c, 0);
    }
    if (k->lane) {
        s.zero_vars[s.nzero] = k->lane;
        s.zeros[s.nzero++] = ir_int(c, 0);
    }
    s.kpos = k->kpos;

    ir_stmt_visit(ki_loop, scan_store, &s);
    if (s.nst == 0 && !s.inplace)
        return;
    bool pipe = pipelined(&s);
    Var *ko = k->ko;
    for (int i = 0; i < s.nst; i++) {
        Staged *st = &s.st[i];
        int64_t shape[MK_MAX_AXES + 2];
        Expr *ridx[MK_MAX_AXES + 2];
        int nb = 0;
        if (pipe) { /* [ko % 2, ...] */
            shape[nb] = 2;
            ridx[nb++] = ir_simplify(c, ir_binop(c, EX_MOD, ir_varref(c, ko), ir_int(c, 2)));
        }
        memcpy(shape + nb, st->shape, sizeof(int64_t) * (size_t)st->nd);
        memcpy(ridx + nb, st->ridx, sizeof(Expr *) * (size_t)st->nd);
        st->buf = ir_buffer(a, st->name, MS_SHARED, c, st->nd + nb, shape);
        st->repl = ir_load(c, st->buf, st->nd + nb, ridx, false);
    }
    ir_stmt_visit(ki_loop, replace_in_store, &s);

    Stmt *items[2 * MAX_STAGED + 3];
    int ni = 0;
    if (!pipe) {
        /* barrier, copy chunk ko, barrier, compute */
        items[ni++] = ir_barrier(a);
        for (int i = 0; i < s.nst; i++)
            items[ni++] = copy(&s, &s.st[i], ir_varref(c, ko), NULL, NULL);
        if (s.nst) /* else one barrier: the block's threads take each chunk in turn */
            items[ni++] = ir_barrier(a);
        items[ni++] = ki_loop;
        k->ko_loop->loop.body = ir_seq(a, ni, items);
    } else if (async_copies(&s)) {
        /* chunk 0 into buffer 0 before the loop; in the loop a barrier
         * after this thread's copies have landed (chunk ko is in buffer
         * ko % 2 and every thread is done with buffer (ko + 1) % 2), the
         * next chunk's copies into that buffer, then the compute on
         * buffer ko % 2 while they fly */
        Expr *nko = ko->extent;
        Expr *succ = ir_binop(c, EX_ADD, ir_varref(c, ko), ir_int(c, 1));
        Expr *more = ir_binop(c, EX_LT, succ, nko);
        /* ko + 1 under the guard, but as the last chunk at most, so that pad
         * sees the copy's indices in bounds */
        Expr *next = ir_simplify(c, ir_binop(c, EX_MIN, succ, ir_binop(c, EX_SUB, nko, ir_int(c, 1))));
        Expr *other = ir_simplify(c, ir_binop(c, EX_MOD, succ, ir_int(c, 2)));
        Stmt *copies[MAX_STAGED];
        for (int i = 0; i < s.nst; i++)
            copies[i] = copy(&s, &s.st[i], next, NULL, other);
        items[ni++] = ir_barrier_async(a);
        items[ni++] = ir_if(a, more, ir_seq(a, s.nst, copies), NULL);
        items[ni++] = ki_loop;
        Stmt *pre[MAX_STAGED + 1];
        int np = 0;
        for (int i = 0; i < s.nst; i++)
            pre[np++] = copy(&s, &s.st[i], ir_int(c, 0), NULL, ir_int(c, 0));
        pre[np++] = ir_for(a, ko, FK_SERIAL, ir_seq(a, ni, items));
        *k->ko_loop = *ir_seq(a, np, pre);
        k->ko_loop = find_loop_of(k->ko_loop, ko);
    } else {
        /* chunk 0 into buffer 0 before the loop; in the loop, the next
         * chunk's elements into registers (the last one loads its own chunk
         * again, so no load leaves the tensor), the compute on buffer
         * ko % 2, the registers into buffer (ko + 1) % 2, one barrier */
        Expr *nko = ko->extent;
        Expr *next = ir_simplify(c, ir_binop(c, EX_MIN, ir_binop(c, EX_ADD, ir_varref(c, ko), ir_int(c, 1)),
                                             ir_binop(c, EX_SUB, nko, ir_int(c, 1))));
        Expr *other = ir_simplify(c, ir_binop(c, EX_MOD, ir_binop(c, EX_ADD, ir_varref(c, ko), ir_int(c, 1)),
                                              ir_int(c, 2)));
        Tensor *regs[MAX_STAGED];
        for (int i = 0; i < s.nst; i++) {
            char name[80];
            snprintf(name, sizeof name, "%s_next", s.st[i].name);
            int64_t rs[2] = {s.st[i].steps, s.st[i].Vc};
            regs[i] = ir_buffer(a, name, MS_LOCAL, c, 2, rs);
            items[ni++] = copy(&s, &s.st[i], next, regs[i], NULL);
        }
        items[ni++] = ki_loop;
        for (int i = 0; i < s.nst; i++)
            items[ni++] = copy(&s, &s.st[i], NULL, regs[i], other);
        items[ni++] = ir_barrier(a);
        Stmt *loop = ir_for(a, ko, FK_SERIAL, ir_seq(a, ni, items));
        for (int i = s.nst - 1; i >= 0; i--)
            loop = ir_alloc(a, regs[i], loop);
        Stmt *pre[MAX_STAGED + 2];
        int np = 0;
        for (int i = 0; i < s.nst; i++)
            pre[np++] = copy(&s, &s.st[i], ir_int(c, 0), NULL, ir_int(c, 0));
        pre[np++] = ir_barrier(a);
        pre[np++] = loop;
        *k->ko_loop = *ir_seq(a, np, pre);
        k->ko_loop = find_loop_of(k->ko_loop, ko);
    }

    /* the shared buffers live around the thread loop */
    Stmt *inner = IR_NEW(a, Stmt);
    *inner = *th;
    Stmt *wrapped = inner;
    for (int i = s.nst - 1; i >= 0; i--)
        wrapped = ir_alloc(a, s.st[i].buf, wrapped);
    *th = *wrapped;
}

void pass_stage(LoopProgram *lp, const TargetInfo *ti)
{
    for (int i = 0; i < lp->nkernels; i++)
        stage_kernel(lp->kernels[i], lp->te->ctx, lp->te->arena, ti);
}
