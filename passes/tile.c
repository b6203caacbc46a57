/* tile: give the canonical loop nest its block, thread and register-tile
 * structure from the kernel's micro-kernel.
 *
 * requires: lower's canonical nests; legal micro-kernels.
 * ensures:  each kernel is
 *
 *   for B in 0..prod(nb) block.x:           nb[a] = ceil(S[a] / (threads[a] * tile[a]))
 *     let b_a = B decomposed                 (block index per spatial axis)
 *     for Th in 0..prod(threads) thread.x:
 *       let t_a = Th decomposed              (thread index per spatial axis)
 *       alloc local acc[tile...]:
 *         acc[r...] = identity                      for each r in the register tile
 *         for ko in 0..ceil(K / kc):
 *           for ki in 0..kc:  for r...:  acc[r...] = combine(acc[r...], body)
 *         for r...:  Y[x...] = epilogue(acc[r...])  x[a] = b_a*bt[a] + t_a*tile[a] + r_a
 *
 *   with vectors of V lanes along the reduction, acc[r..., lane] and, before
 *   the final store, the lanes folded by halves:
 *
 *         for r...:  for h in V/2, V/4, .., 2:  for half in 0..h:
 *                       acc[r..., half] = combine(acc[r..., half], acc[r..., half + h])
 *         (the final store reads combine(acc[r..., 0], acc[r..., 1]))
 *
 *           where the reduction axes, when their extents are constants, are
 *           fused into one index k = ko*kc + ki and recovered by / and %.
 *
 * With rthreads R > 1 (GPU) the thread loop runs R times as many
 * threads, R consecutive ones per point of the thread tile (rl = Th % R,
 * the spatial thread index Th / R); thread rl sums the elements
 * k = ko*kc + (ki*R + rl)*V + lane (kc a multiple of R*V), so a warp reads
 * runs of consecutive elements, and after the chunks
 *
 *         for r...:  acc[r...] = lanes of acc[r...] combined
 *         for s in R/2, R/4, .., 1:  for r...:  acc[r...] = combine(acc[r...], shfl_xor(acc[r...], s))
 *         for r...:  if (flat(r) % R == rl)  Y[x...] = epilogue(acc[r...])
 *
 * a butterfly of warp shuffles gives every thread the same sum (each step
 * adds the same two values, in either order), and the R threads share
 * the final stores. With R > 32 (R / 32 warps along the reduction) the
 * butterfly runs within each warp (s from 16), and a tree in shared
 * memory combines the warps:
 *
 *         alloc shared tree[threads, R / 32, points]:
 *           if (rl % 32 == 0)  for r...:  tree[Th / R, rl / 32, flat(r)] = acc[r...]
 *           barrier
 *           for r...:  if (flat(r) % R == rl)
 *             Y[x...] = epilogue(tree[Th / R, 0, flat(r)] + .. + tree[Th / R, R/32 - 1, flat(r)])
 *
 * the warps' sums added in order, so every run gives the same bits.
 *
 * k->live says whether a thread's tile has a point inside the output (its
 * first point is); bind lets a CPU thread whose tile has none skip its
 * compute.
 *
 * Points past the tensor's edge are computed like the others (local
 * padding); pad then guards their loads and stores. A reduction update
 * past the reduction's end is guarded with a select, unless a zero-filled
 * operand makes the contribution the sum's identity anyway (X?*W: 0).
 * A body that is not a single reduction (several or nested reductions)
 * keeps its statements per point, inside the same block and thread loops.
 * breaks:   nothing; no guards yet, so indices may run past the edges.
 */
#include "dietcode/passes.h"

#include <string.h>

typedef struct Canon {
    int rank;
    Var *sv[MK_MAX_AXES]; /* spatial loop variables of the lowered nest */
    Stmt *point;          /* body per spatial point */
    /* the single-reduction form */
    bool red;
    Tensor *acc;
    ExprKind comb;
    Expr *ident;          /* the accumulator's first value, of its type */
    int nr;
    Var *rv[MK_MAX_AXES + 8];
    Expr *value;          /* v in acc[0] = combine(acc[0], v) */
    bool fma;             /* v a product x * y, the step fma(x, y, acc[0]) */
    Stmt *final;          /* Y[...] = epilogue(acc[0]) */
} Canon;

static bool is_acc_load(const Expr *e, const Tensor *acc)
{
    return e->kind == EX_LOAD && e->load.t == acc;
}

static bool uses_buffer(Expr *e, const Tensor *buf);

static void find_buf(Expr *e, void *ud)
{
    const Tensor **b = ud;
    if (e->kind == EX_LOAD && e->load.t == *b)
        *b = NULL;
}

static bool uses_buffer(Expr *e, const Tensor *buf)
{
    const Tensor *b = buf;
    ir_expr_visit(e, find_buf, &b);
    return b == NULL;
}

static Canon parse_canon(const Kernel *k, ExprCtx *cx)
{
    Canon c = {0};
    Stmt *s = k->body;
    c.rank = k->domain->rank;
    for (int a = 0; a < c.rank; a++) {
        IR_ASSERT(s->kind == ST_FOR);
        c.sv[a] = s->loop.var;
        s = s->loop.body;
    }
    c.point = s;
    if (s->kind != ST_ALLOC || s->alloc.body->kind != ST_SEQ || s->alloc.body->seq.n != 3)
        return c;
    Tensor *acc = s->alloc.buf;
    Stmt **items = s->alloc.body->seq.s;
    if (items[0]->kind != ST_STORE || items[0]->store.buf != acc ||
        (items[0]->store.value->kind != EX_FLOAT && items[0]->store.value->kind != EX_INT) ||
        items[2]->kind != ST_STORE ||
        items[2]->store.buf == acc)
        return c;
    Stmt *l = items[1];
    int nr = 0;
    while (l->kind == ST_FOR && nr < MK_MAX_AXES + 8) {
        c.rv[nr++] = l->loop.var;
        l = l->loop.body;
    }
    if (nr == 0 || l->kind != ST_STORE || l->store.buf != acc)
        return c;
    Expr *v = l->store.value;
    if (v->kind == EX_FMA) { /* fma(x, y, acc[0]): the sum's step contracted */
        if (!is_acc_load(v->op.c, acc) || uses_buffer(v->op.a, acc) || uses_buffer(v->op.b, acc))
            return c;
        c.fma = true;
        c.comb = EX_ADD;
        c.value = ir_binop(cx, EX_MUL, v->op.a, v->op.b);
    } else {
        if (ir_op_arity(v->kind) != 2 || !is_acc_load(v->op.a, acc) || uses_buffer(v->op.b, acc))
            return c;
        c.comb = v->kind;
        c.value = v->op.b;
    }
    c.red = true;
    c.acc = acc;
    c.ident = items[0]->store.value;
    c.nr = nr;
    c.final = items[2];
    return c;
}

/* True when a zero-filled out-of-range operand already makes the update
 * the identity: a sum of products with a factor indexed by the outermost
 * reduction variable over exactly that variable's extent. */
static bool zero_fill_covers(const Expr *v, const Var *r0)
{
    if (v->kind == EX_MUL)
        return zero_fill_covers(v->op.a, r0) || zero_fill_covers(v->op.b, r0);
    if (v->kind != EX_LOAD || v->load.t->scope != MS_GLOBAL)
        return false;
    for (int i = 0; i < v->load.n; i++) {
        const Expr *x = v->load.idx[i];
        if (x->kind == EX_VAR && x->var == r0 && v->load.t->shape[i] == r0->extent)
            return true;
    }
    return false;
}

typedef struct Tiler {
    Arena *a;
    ExprCtx *c;
    Kernel *k;
    const MicroKernel *mk;
    Canon cn;
    Expr *x[MK_MAX_AXES]; /* spatial index per axis */
    Var *r[MK_MAX_AXES];  /* register-tile loops */
    int R;                /* threads along the reduction (1: none) */
    Var *rl;              /* this thread's place among them (R > 1) */
    Var *th;              /* the thread index */
    int64_t nt;           /* threads of the spatial axes (the block has nt * R) */
} Tiler;

static Expr *C(Tiler *t, int64_t v) { return ir_int(t->c, v); }
static Expr *VR(Tiler *t, Var *v) { return ir_varref(t->c, v); }

/* Wraps s in the register-tile loops (innermost axis innermost). */
static Stmt *tile_loops(Tiler *t, Stmt *s, Var *lane)
{
    if (lane)
        s = ir_for(t->a, lane, FK_SERIAL, s);
    for (int a = t->cn.rank - 1; a >= 0; a--)
        s = ir_for(t->a, t->r[a], FK_SERIAL, s);
    return s;
}

typedef struct SubstCtx {
    Tiler *t;
    int n;
    Var **vars;
    Expr **by;
} SubstCtx;

static Expr *subst_cb(Expr *e, void *ud)
{
    SubstCtx *s = ud;
    return ir_subst_many(s->t->c, e, s->n, s->vars, s->by);
}

/* Clones a statement with the spatial loop variables replaced by x. */
static Stmt *at_point(Tiler *t, const Stmt *s)
{
    Stmt *n = ir_stmt_clone(t->a, s);
    SubstCtx sc = {t, t->cn.rank, t->cn.sv, t->x};
    ir_stmt_map_exprs(n, subst_cb, &sc);
    return n;
}

/* The reduction part: init, the chunked update loops and the final store. */
static Stmt *tile_reduction(Tiler *t, Expr *K, int64_t Kc)
{
    ExprCtx *c = t->c;
    const MicroKernel *mk = t->mk;
    Canon *cn = &t->cn;
    bool vred = mk->vaxis == MK_VEC_REDUCE && mk->vec > 1;
    int R = t->R;
    int kc = mk->rchunk > 0 ? mk->rchunk : (Kc > 0 ? (int)Kc : 0);
    if (Kc > 0 && kc > Kc)
        kc = (int)Kc;
    if (vred && (kc == 0 || kc % mk->vec != 0) && R == 1)
        vred = false;
    int V = vred ? mk->vec : 1;
    if (R > 1) /* whole runs of R*V elements a step (the excess is guarded) */
        kc = kc < R * V ? R * V : (kc + R * V - 1) / (R * V) * (R * V);

    /* acc[tile..., lanes] */
    int64_t shape[MK_MAX_AXES + 1];
    int n = 0;
    for (int a = 0; a < cn->rank; a++)
        shape[n++] = mk->tile[a];
    if (vred)
        shape[n++] = V;
    if (n == 0)
        shape[n++] = 1;
    char name[64];
    snprintf(name, sizeof name, "acc_%s", t->k->out->name);
    Tensor *acc = ir_buffer(t->a, name, MS_LOCAL, c, n, shape);
    acc->dtype = cn->acc->dtype;
    Var *lane = vred ? ir_var(c, "lane", VK_LOOP, C(t, V)) : NULL;
    Expr *aidx[MK_MAX_AXES + 1];
    int na = 0;
    for (int a = 0; a < cn->rank; a++)
        aidx[na++] = VR(t, t->r[a]);
    if (vred)
        aidx[na++] = VR(t, lane);
    if (na == 0)
        aidx[na++] = C(t, 0);
    Expr *cur = ir_load(c, acc, na, aidx, false);

    Stmt *init = tile_loops(t, ir_store(t->a, acc, na, aidx, cn->ident), lane);

    /* k = ko*kc + kpos, the position in the chunk kpos = (ki (*R + rl))*V (+ lane) */
    Var *ko = NULL, *ki;
    Expr *k, *kpos = NULL;
    if (kc > 0) {
        Expr *nko = ir_simplify(c, ir_binop(c, EX_DIV, ir_binop(c, EX_ADD, K, C(t, kc - 1)), C(t, kc)));
        ko = ir_var(c, "ko", VK_LOOP, nko);
        ki = ir_var(c, "ki", VK_LOOP, C(t, kc / (V * R)));
        Expr *run = VR(t, ki);
        if (R > 1)
            run = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, run, C(t, R)), VR(t, t->rl));
        kpos = ir_binop(c, EX_MUL, run, C(t, V));
        if (vred)
            kpos = ir_binop(c, EX_ADD, kpos, VR(t, lane));
        kpos = ir_simplify(c, kpos);
        k = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, VR(t, ko), C(t, kc)), kpos);
    } else {
        ki = ir_var(c, "k", VK_LOOP, K);
        k = VR(t, ki);
    }
    k = ir_simplify(c, k);
    /* the original reduction variables from k */
    Expr *rk[MK_MAX_AXES + 8];
    int64_t inner = 1;
    for (int j = cn->nr - 1; j >= 0; j--) {
        Expr *q = inner == 1 ? k : ir_binop(c, EX_DIV, k, C(t, inner));
        rk[j] = j == 0 ? q : ir_binop(c, EX_MOD, q, cn->rv[j]->extent);
        if (j > 0) {
            int64_t e;
            IR_ASSERT(ir_is_const(cn->rv[j]->extent, &e));
            inner *= e;
        }
    }
    Expr *v = ir_subst_many(c, cn->value, cn->rank, cn->sv, t->x);
    bool covered = cn->comb == EX_ADD && zero_fill_covers(cn->value, cn->rv[0]);
    v = ir_subst_many(c, v, cn->nr, cn->rv, rk);
    Expr *upd = ir_accumulate(c, cn->comb, cur, v, cn->fma);
    if (!covered)
        upd = ir_select(c, ir_binop(c, EX_LT, k, K), upd, cur);
    Stmt *update = tile_loops(t, ir_store(t->a, acc, na, aidx, upd), lane);
    update = ir_for(t->a, ki, FK_SERIAL, update);
    Stmt *ko_loop = NULL;
    if (ko)
        update = ko_loop = ir_for(t->a, ko, FK_SERIAL, update);

    /* the lanes fold by halves (lane l += lane l + h, h = V/2 .. 2, each a
     * vector step), then the final store reads acc[r..., 0] + acc[r..., 1]:
     * a few whole-vector adds a point, where a chain in lane order is a
     * scalar add per lane and became horizontal adds, instructions that
     * only reach the first 16 vector registers (a tile of more than 16
     * accumulators then spilled) */
    Expr *res;
    Expr *li[MK_MAX_AXES + 1];
    memcpy(li, aidx, sizeof(Expr *) * (size_t)na);
    Stmt *fold = NULL;
    if (vred) {
        Stmt *steps[MK_MAX_FOLDS];
        int ns = 0;
        for (int h = V / 2; h >= 2; h /= 2) {
            IR_ASSERT(ns < MK_MAX_FOLDS);
            Var *hl = ir_var(c, "half", VK_LOOP, C(t, h));
            Expr *hi[MK_MAX_AXES + 1];
            memcpy(hi, aidx, sizeof(Expr *) * (size_t)na);
            li[na - 1] = VR(t, hl);
            hi[na - 1] = ir_binop(c, EX_ADD, VR(t, hl), C(t, h));
            Expr *sum = ir_binop(c, cn->comb, ir_load(c, acc, na, li, false), ir_load(c, acc, na, hi, false));
            t->k->fold[ns] = hl;
            steps[ns++] = ir_for(t->a, hl, FK_SERIAL, ir_store(t->a, acc, na, li, sum));
        }
        if (ns)
            fold = tile_loops(t, ns == 1 ? steps[0] : ir_seq(t->a, ns, steps), NULL);
        li[na - 1] = C(t, 1);
        Expr *l1 = ir_load(c, acc, na, li, false);
        li[na - 1] = C(t, 0);
        res = ir_binop(c, cn->comb, ir_load(c, acc, na, li, false), l1);
    } else {
        res = cur;
    }
    Stmt *shfl = NULL;
    if (R > 1) {
        /* lanes into acc[r..., 0], then the butterfly over the R threads */
        Stmt *steps[8];
        int ns = 0;
        Expr *a0 = ir_load(c, acc, na, li, false);
        steps[ns++] = tile_loops(t, ir_store(t->a, acc, na, li, res), NULL);
        for (int s = (R < 32 ? R : 32) / 2; s >= 1; s /= 2)
            steps[ns++] = tile_loops(
                t, ir_store(t->a, acc, na, li,
                            ir_binop(c, cn->comb, a0, ir_binop(c, EX_SHFL_XOR, a0, C(t, s)))),
                NULL);
        shfl = ir_seq(t->a, ns, steps);
        res = a0;
    }
    /* the point's place in the register tile */
    Expr *flat = C(t, 0);
    int64_t npoints = 1;
    for (int a = 0; a < cn->rank; a++) {
        flat = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, flat, C(t, mk->tile[a])), VR(t, t->r[a]));
        npoints *= mk->tile[a];
    }
    flat = ir_simplify(c, flat);
    Tensor *tree = NULL;
    Stmt *gather = NULL;
    if (R > 32) {
        /* each warp's sum into tree[ts, w, point] (its lane 0 writes), a
         * barrier, then the sum over the warps in order */
        int W = R / 32;
        int64_t tshape[3] = {t->nt, W, npoints};
        snprintf(name, sizeof name, "tree_%s", t->k->out->name);
        tree = ir_buffer(t->a, name, MS_SHARED, c, 3, tshape);
        tree->dtype = acc->dtype;
        Expr *ti[3] = {ir_simplify(c, ir_binop(c, EX_DIV, VR(t, t->th), C(t, R))),
                       ir_simplify(c, ir_binop(c, EX_DIV, VR(t, t->rl), C(t, 32))), flat};
        Stmt *put = tile_loops(t, ir_store(t->a, tree, 3, ti, res), NULL);
        Expr *lead = ir_binop(c, EX_EQ, ir_simplify(c, ir_binop(c, EX_MOD, VR(t, t->rl), C(t, 32))),
                              C(t, 0));
        Stmt *both[2] = {ir_if(t->a, lead, put, NULL), ir_barrier(t->a)};
        gather = ir_seq(t->a, 2, both);
        ti[1] = C(t, 0);
        res = ir_load(c, tree, 3, ti, false);
        for (int w = 1; w < W; w++) {
            ti[1] = C(t, w);
            res = ir_binop(c, cn->comb, res, ir_load(c, tree, 3, ti, false));
        }
    }
    Stmt *fin = at_point(t, cn->final);
    Expr *zero = C(t, 0);
    Expr *old = ir_load(c, cn->acc, 1, &zero, false);
    fin->store.value = ir_replace(c, fin->store.value, old, res);
    if (R > 1) {
        /* the R threads take turns at the register tile's points */
        Expr *mine = ir_binop(c, EX_EQ, ir_simplify(c, ir_binop(c, EX_MOD, flat, C(t, R))),
                              VR(t, t->rl));
        fin = ir_if(t->a, mine, fin, NULL);
    }
    Stmt *final = tile_loops(t, fin, NULL);
    if (tree) {
        Stmt *both[2] = {gather, final};
        final = ir_alloc(t->a, tree, ir_seq(t->a, 2, both));
    }

    t->k->ko_loop = ko_loop;
    t->k->ko = ko;
    t->k->ki = ki;
    t->k->kc = kc;
    t->k->lane = lane;
    t->k->kpos = kpos;
    t->k->rlane = t->rl;
    Stmt *items[5];
    int nitems = 0;
    items[nitems++] = init;
    items[nitems++] = update;
    if (fold)
        items[nitems++] = fold;
    if (shfl)
        items[nitems++] = shfl;
    items[nitems++] = final;
    return ir_alloc(t->a, acc, ir_seq(t->a, nitems, items));
}

/* ---- the order of the blocks ---- */

/* Per spatial axis, the bytes (at the dims' largest values) of the global
 * tensors read with no index on that axis: those a run of consecutive
 * blocks along it shares. */
typedef struct Reuse {
    const Canon *cn;
    ExprCtx *c;
    int ntensors;
    const Tensor *seen[16];
    double bytes[MK_MAX_AXES];
} Reuse;

static void reuse_of_load(Expr *e, void *ud)
{
    Reuse *r = ud;
    if (e->kind != EX_LOAD || e->load.t->scope != MS_GLOBAL)
        return;
    for (int i = 0; i < r->ntensors; i++)
        if (r->seen[i] == e->load.t)
            return;
    if (r->ntensors == 16)
        return;
    r->seen[r->ntensors++] = e->load.t;
    double size = 4;
    for (int d = 0; d < e->load.t->rank; d++) {
        Interval iv = ir_interval(r->c, e->load.t->shape[d], RANGE_DECLARED);
        size *= iv.hi == IR_POS_INF ? 1e9 : (double)iv.hi;
    }
    for (int a = 0; a < r->cn->rank; a++) {
        bool uses = false;
        for (int i = 0; i < e->load.n && !uses; i++)
            uses = ir_expr_uses_var(e->load.idx[i], r->cn->sv[a]);
        if (!uses)
            r->bytes[a] += size;
    }
}

static Expr *reuse_of_expr(Expr *e, void *ud)
{
    ir_expr_visit(e, reuse_of_load, ud);
    return e;
}

/* The block loop's decomposition, outermost axis first: the axes in
 * order, except that on the CPU the one along which consecutive blocks
 * share the most bytes varies fastest. For a dense layer X * W^T that is
 * the rows: the pool hands runs of consecutive blocks to one core, which
 * reuse one panel of W from cache instead of sweeping all of W for every
 * few rows. The GPU keeps the order: the blocks of a wave run side by side
 * whatever their order, and a dim's block count as the fastest divisor
 * would cost every thread a 64-bit division (and ptxas registers). */
static void block_order(Tiler *t, const TargetInfo *ti, int *order)
{
    const Canon *cn = &t->cn;
    Reuse r = {cn, t->c, 0, {0}, {0}};
    int n = cn->rank, fast = n - 1;
    if (ti->kind == PT_CPU)
        ir_stmt_map_exprs(cn->point, reuse_of_expr, &r);
    for (int a = n - 2; a >= 0; a--)
        if (r.bytes[a] > r.bytes[fast])
            fast = a;
    int i = 0;
    for (int a = 0; a < n; a++)
        if (a != fast)
            order[i++] = a;
    if (n > 0)
        order[i] = fast;
}

/* The GPU keeps the axes in order; with raster G the last two (rows and
 * columns of blocks) are taken from B's low part in groups of G rows, each
 * group column by column, the last group with the rows that remain:
 *
 *   Q = B % (nb_r * nb_c)          (B itself with two axes)
 *   g_first = Q / (G * nb_c) * G   the group's first row of blocks
 *   g_rows  = min(G, nb_r - g_first)
 *   b_r = g_first + Q % (G * nb_c) % g_rows
 *   b_c = Q % (G * nb_c) / g_rows
 *
 * so the blocks that run at once read a few column tiles of the operand
 * shared along the columns, again and again, from L2. Returns body under
 * those lets. */
static Stmt *raster_order(Tiler *t, Stmt *body, Var *B, Var *const *bv, Expr *const *nb, int n,
                          int G)
{
    ExprCtx *c = t->c;
    Expr *nr = nb[n - 2], *nc = nb[n - 1];
    Expr *Q = VR(t, B);
    if (n > 2)
        Q = ir_binop(c, EX_MOD, Q, ir_binop(c, EX_MUL, nr, nc));
    Expr *per = ir_binop(c, EX_MUL, C(t, G), nc);
    Var *first = ir_var(c, "g_first", VK_LOOP, nr);
    Var *rows = ir_var(c, "g_rows", VK_LOOP, C(t, G + 1));
    Expr *in = ir_binop(c, EX_MOD, Q, per);
    body = ir_let(t->a, bv[n - 1], ir_simplify(c, ir_binop(c, EX_DIV, in, VR(t, rows))), body);
    body = ir_let(t->a, bv[n - 2],
                  ir_simplify(c, ir_binop(c, EX_ADD, VR(t, first), ir_binop(c, EX_MOD, in, VR(t, rows)))),
                  body);
    body = ir_let(t->a, rows,
                  ir_simplify(c, ir_binop(c, EX_MIN, C(t, G), ir_binop(c, EX_SUB, nr, VR(t, first)))),
                  body);
    return ir_let(t->a, first,
                  ir_simplify(c, ir_binop(c, EX_MUL, ir_binop(c, EX_DIV, Q, per), C(t, G))), body);
}

static void tile_kernel(Kernel *k, const TargetInfo *ti, ExprCtx *c, Arena *arena)
{
    Tiler t = {arena, c, k, &k->mk, parse_canon(k, c), {0}, {0}, 1, NULL, NULL, 1};
    Canon *cn = &t.cn;
    const MicroKernel *mk = &k->mk;
    int n = cn->rank;

    /* the fused reduction extent, when the body is a single reduction */
    Expr *K = NULL;
    int64_t Kc = 0;
    if (cn->red) {
        bool all_const = true;
        int64_t prod = 1;
        for (int j = 0; j < cn->nr; j++) {
            int64_t e;
            if (ir_is_const(cn->rv[j]->extent, &e) && !__builtin_mul_overflow(prod, e, &prod))
                continue;
            all_const = false;
        }
        if (all_const) {
            K = C(&t, prod);
            Kc = prod;
        } else if (cn->nr == 1) {
            K = cn->rv[0]->extent;
        } else {
            cn->red = false; /* several dynamic reduction axes: per point */
        }
    }

    Expr *nb[MK_MAX_AXES];
    Var *bv[MK_MAX_AXES], *tv[MK_MAX_AXES];
    Expr *NB = C(&t, 1);
    int64_t NT = 1;
    for (int a = 0; a < n; a++) {
        int64_t bt = (int64_t)mk->threads[a] * mk->tile[a];
        nb[a] = ir_simplify(c, ir_binop(c, EX_DIV, ir_binop(c, EX_ADD, cn->sv[a]->extent, C(&t, bt - 1)),
                                        C(&t, bt)));
        NB = ir_binop(c, EX_MUL, NB, nb[a]);
        NT *= mk->threads[a];
        char name[64];
        snprintf(name, sizeof name, "b_%s", cn->sv[a]->name);
        bv[a] = ir_var(c, name, VK_LOOP, nb[a]);
        snprintf(name, sizeof name, "t_%s", cn->sv[a]->name);
        tv[a] = ir_var(c, name, VK_LOOP, C(&t, mk->threads[a]));
        snprintf(name, sizeof name, "r_%s", cn->sv[a]->name);
        t.r[a] = ir_var(c, name, VK_LOOP, C(&t, mk->tile[a]));
        /* the point's place in the block tile: contiguous per thread, or
         * in runs of g, consecutive threads' runs side by side */
        int g = mk->strided && mk->vec > 1 && mk->tile[a] % mk->vec == 0 ? mk->vec : mk->tile[a];
        Expr *pos = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, VR(&t, tv[a]), C(&t, g)),
                             g == mk->tile[a] ? VR(&t, t.r[a])
                                              : ir_binop(c, EX_MOD, VR(&t, t.r[a]), C(&t, g)));
        if (g != mk->tile[a])
            pos = ir_binop(c, EX_ADD, pos,
                           ir_binop(c, EX_MUL, ir_binop(c, EX_DIV, VR(&t, t.r[a]), C(&t, g)),
                                    C(&t, (int64_t)mk->threads[a] * g)));
        k->tpos[a] = ir_simplify(c, pos);
        t.x[a] = ir_simplify(c, ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, VR(&t, bv[a]), C(&t, bt)),
                                         k->tpos[a]));
        /* the thread's first point along a, inside the output? */
        Expr *first = ir_simplify(c, ir_subst(c, t.x[a], t.r[a], C(&t, 0)));
        if (!ir_prove_in_bounds(c, first, cn->sv[a]->extent, RANGE_OPEN, NULL)) {
            Expr *in = ir_binop(c, EX_LT, first, cn->sv[a]->extent);
            k->live = k->live ? ir_binop(c, EX_AND, k->live, in) : in;
        }
    }
    NB = ir_simplify(c, NB);
    if (cn->red && ti->kind == PT_GPU && mk->rthreads > 1) {
        t.R = mk->rthreads;
        t.rl = ir_var(c, "rl", VK_LOOP, C(&t, t.R));
    }
    Var *B = ir_var(c, "B", VK_LOOP, NB);
    Var *Th = ir_var(c, "Th", VK_LOOP, C(&t, NT * t.R));
    t.th = Th;
    t.nt = NT;

    Stmt *inner = cn->red ? tile_reduction(&t, K, Kc) : tile_loops(&t, at_point(&t, cn->point), NULL);

    /* thread lets, the reduction's threads varying fastest, then the
     * innermost axis */
    Expr *below = C(&t, 1);
    int64_t tbelow = t.R;
    for (int a = n - 1; a >= 0; a--) {
        Expr *q = ir_binop(c, EX_DIV, VR(&t, Th), C(&t, tbelow));
        inner = ir_let(arena, tv[a], ir_simplify(c, a == 0 ? q : ir_binop(c, EX_MOD, q, C(&t, mk->threads[a]))), inner);
        tbelow *= mk->threads[a];
    }
    if (t.R > 1)
        inner = ir_let(arena, t.rl, ir_simplify(c, ir_binop(c, EX_MOD, VR(&t, Th), C(&t, t.R))),
                       inner);
    Stmt *body = ir_for(arena, Th, FK_THREAD, inner);
    int order[MK_MAX_AXES];
    block_order(&t, ti, order);
    int last = n;
    if (ti->kind == PT_GPU && mk->raster > 1 && n >= 2) {
        body = raster_order(&t, body, B, bv, nb, n, mk->raster);
        last = n - 2;
        below = ir_binop(c, EX_MUL, nb[n - 2], nb[n - 1]);
    }
    for (int i = last - 1; i >= 0; i--) {
        int a = order[i];
        Expr *q = ir_binop(c, EX_DIV, VR(&t, B), below);
        body = ir_let(arena, bv[a], ir_simplify(c, i == 0 ? q : ir_binop(c, EX_MOD, q, nb[a])), body);
        below = ir_binop(c, EX_MUL, below, nb[a]);
    }
    k->body = ir_for(arena, B, FK_BLOCK, body);
    k->nthreads = (int)(NT * t.R);
    k->nspatial = n;
    for (int a = 0; a < n; a++) {
        k->tvar[a] = tv[a];
        k->rvar[a] = t.r[a];
    }
}

void pass_tile(LoopProgram *lp, const TargetInfo *ti)
{
    for (int i = 0; i < lp->nkernels; i++)
        tile_kernel(lp->kernels[i], ti, lp->te->ctx, lp->te->arena);
}
