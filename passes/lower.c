/* lower: canonical loop nests for every materialized computed tensor.
 *
 * requires: pass_inline's bodies.
 * ensures:  a stage per computed, materialized tensor, in definition
 *           order, with a kernel per variant of its schedule, each of the
 *           canonical form the tile pass recognises:
 *
 *   for i in 0..T serial:  for j in 0..N serial:        (spatial loops)
 *     alloc local acc_Y[1]                              (one per reduction)
 *       acc_Y[0] = identity
 *       for k in 0..K serial:
 *         acc_Y[0] = combine(acc_Y[0], body)
 *       Y[i, j] = epilogue(acc_Y[0])
 *
 * where a sum of a product x * y combines as fma(x, y, acc_Y[0]) unless
 * the program has fp-contract off (ir_accumulate).
 *
 * Every reduction in an expression, nested ones included, becomes such an
 * accumulator computed right before the statement that uses it, so any
 * valid program lowers, however its reductions are placed. The outer
 * loops are plain serial loops here; tile gives them their roles.
 *
 * A variant whose micro-kernel splits the reduction (mk.split = S > 1)
 * lowers to two kernels and a scratch buffer P[S, Y's shape]: the first
 * computes, for each part s, the reduction over the s-th slice of the
 * outermost reduction axis (of length C = ceil(K / S); the last slice's
 * excess contributes the identity), the second computes Y's body with the
 * reduction replaced by the same reduction over s of P, in order:
 *
 *   P[s, i, j] = sum[kk: C](select(s*C + kk < K, body[k := s*C + kk], 0))
 *   Y[i, j]    = epilogue(sum[s: S](P[s, i, j]))
 *
 * so each is an ordinary stage body for the passes after this one, and the
 * result does not depend on how the parts are scheduled.
 *
 * An atomic split (mk.atomic, GPU, opt-in) needs no scratch buffer when
 * the reduction is a sum and Y's body is affine in it, Y = A(r) + E(0)
 * with A linear (sums and differences with anything free of r, negation,
 * products and quotients by finite nonzero constants, fma(x, y, z) as
 * x * y + z: nothing that
 * turns an infinite or NaN part into another result than the one-launch
 * sum gives): the first kernel sets Y to E(0), the
 * second runs over the parts and adds each part's A into Y atomically,
 *
 *   Y[i, j]  = E(0)
 *   Y[i, j] += atomic A(sum[kk: C](select(s*C + kk < K, body[k := ...], 0)))
 *
 * in whatever order the parts run, so the last bits may differ from run to
 * run. Any other body lowers as above, deterministically.
 *
 * A packed variant (mk.pack, CPU) lowers to a packing launch and the
 * compute launch, with a scratch buffer of W's panels between them
 * (lower_packed, below). Names of kernels and buffers made here never
 * repeat a tensor's (unique_name).
 */
#include "dietcode/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lower {
    TeProgram *p;
    ExprCtx *c;
    Arena *a;
    int nacc;
} Lower;

typedef Stmt *(*Consume)(Lower *l, Expr *value, void *ud);

typedef struct Accum {
    Tensor *acc;
    ExprKind comb;
} Accum;

static Stmt *consume_accumulate(Lower *l, Expr *v, void *ud)
{
    Accum *ac = ud;
    Expr *zero = ir_int(l->c, 0);
    Expr *cur = ir_load(l->c, ac->acc, 1, &zero, false);
    return ir_store(l->a, ac->acc, 1, &zero,
                    ir_accumulate(l->c, ac->comb, cur, v, !l->p->fp_contract_off));
}

/* Emits the statements computing e's reductions, then consume(e'). */
static Stmt *emit_value(Lower *l, Expr *e, Consume consume, void *ud)
{
    Expr *r = ir_outer_reduce(e);
    if (!r)
        return consume(l, e, ud);
    ExprCtx *c = l->c;
    char name[32];
    snprintf(name, sizeof name, "acc%d", l->nacc++);
    int64_t one = 1;
    Tensor *acc = ir_buffer(l->a, name, MS_LOCAL, c, 1, &one);
    acc->dtype = r->type; /* f32, or an integer reduction's exact int64 */
    Expr *zero = ir_int(c, 0);
    Stmt *init = ir_store(l->a, acc, 1, &zero, ir_reduce_init(c, r->red.op, r->type));

    /* the reduction's own loops, over fresh loop variables */
    Var *lv[MK_MAX_AXES + 8];
    Expr *lr[MK_MAX_AXES + 8];
    IR_ASSERT(r->red.n <= MK_MAX_AXES + 8);
    for (int i = 0; i < r->red.n; i++) {
        lv[i] = ir_var(c, r->red.axes[i]->name, VK_LOOP, r->red.axes[i]->extent);
        lr[i] = ir_varref(c, lv[i]);
    }
    Expr *body = ir_subst_many(c, r->red.body, r->red.n, r->red.axes, lr);
    if (body->type != r->type) /* a bool's count */
        body = ir_cast(c, r->type, body);
    Accum ac = {acc, ir_reduce_combiner(r->red.op)};
    Stmt *loop = emit_value(l, body, consume_accumulate, &ac);
    for (int i = r->red.n - 1; i >= 0; i--)
        loop = ir_for(l->a, lv[i], FK_SERIAL, loop);

    Expr *result = ir_load(c, acc, 1, &zero, false);
    Stmt *rest = emit_value(l, ir_replace(c, e, r, result), consume, ud);
    Stmt *items[3] = {init, loop, rest};
    return ir_alloc(l->a, acc, ir_seq(l->a, 3, items));
}

typedef struct Out {
    Tensor *t;
    Expr **idx;
    bool atomic;
} Out;

static Stmt *consume_store(Lower *l, Expr *v, void *ud)
{
    Out *o = ud;
    v = ir_cast(l->c, o->t->dtype, v); /* i32: already i32(), so unchanged */
    Stmt *s = ir_store(l->a, o->t, o->t->rank, o->idx, v);
    s->store.atomic = o->atomic;
    return s;
}

/* A kernel computing buffer t (its axes and shape) from body, named
 * PROG_NAME with NAME the stage's tensor name and suffix. With into (an
 * atomic split's parts), t is P[s, into's shape], a domain only: each
 * point adds its value into into[the point without s] atomically. */
static Kernel *lower_tensor(Lower *l, Tensor *t, Expr *body, const MicroKernel *mk,
                            const char *name, Tensor *into)
{
    ExprCtx *c = l->c;
    Var *lv[MK_MAX_AXES];
    Expr *idx[MK_MAX_AXES];
    for (int a = 0; a < t->rank; a++) {
        lv[a] = ir_var(c, t->axes[a]->name, VK_LOOP, t->shape[a]);
        idx[a] = ir_varref(c, lv[a]);
    }
    Out o = {into ? into : t, into ? idx + 1 : idx, into != NULL};
    l->nacc = 0;
    Stmt *s = emit_value(l, ir_subst_many(c, body, t->rank, t->axes, idx), consume_store, &o);
    for (int a = t->rank - 1; a >= 0; a--)
        s = ir_for(l->a, lv[a], FK_SERIAL, s);
    char kname[160];
    snprintf(kname, sizeof kname, "%s_%s", l->p->name, name);
    Kernel *k = ir_kernel_new(l->a, kname, into ? into : t, s);
    k->domain = t;
    k->mk = *mk;
    return k;
}

/* base + suffix, or with _2, _3, ... after it, so that no tensor of the
 * program, no buffer of lp and no kernel made so far has the name: the
 * kernels of a variant and the buffers they pass between them are named
 * after the stage, and a program may have a tensor Y_pack of its own. */
static void unique_name(Lower *l, const LoopProgram *lp, const char *base, const char *suffix,
                        char *out, size_t n)
{
    size_t plen = strlen(l->p->name);
    for (int k = 1;; k++) {
        if (k == 1)
            snprintf(out, n, "%s%s", base, suffix);
        else
            snprintf(out, n, "%s%s_%d", base, suffix, k);
        bool taken = false;
        for (int i = 0; i < l->p->ntensors && !taken; i++)
            taken = strcmp(l->p->tensors[i]->name, out) == 0;
        for (int i = 0; i < lp->nbuffers && !taken; i++)
            taken = lp->buffers[i] && strcmp(lp->buffers[i]->name, out) == 0;
        for (int i = 0; i < lp->nkernels && !taken; i++) {
            const char *kn = lp->kernels[i]->name;
            taken = strncmp(kn, l->p->name, plen) == 0 && kn[plen] == '_' &&
                    strcmp(kn + plen + 1, out) == 0;
        }
        if (!taken)
            return;
    }
}

/* ceil(e / m) * m, or with whole false ceil(e / m), simplified. */
static Expr *round_up(ExprCtx *c, Expr *e, int64_t m, bool whole)
{
    Expr *q = ir_binop(c, EX_DIV, ir_binop(c, EX_ADD, e, ir_int(c, m - 1)), ir_int(c, m));
    return ir_simplify(c, whole ? ir_binop(c, EX_MUL, q, ir_int(c, m)) : q);
}

typedef struct Find {
    const Expr *x;
    bool found;
} Find;

static void find_expr(Expr *e, void *ud)
{
    Find *f = ud;
    f->found |= e == f->x;
}

/* Whether e contains x. */
static bool contains(Expr *e, const Expr *x)
{
    Find f = {x, false};
    ir_expr_visit(e, find_expr, &f);
    return f.found;
}

/* A constant factor or divisor that keeps the decomposition exact. */
static bool finite_nonzero(const Expr *e)
{
    if (e->kind == EX_CAST && e->type == DT_F32) /* f32(2) */
        e = e->op.a;
    /* as the kernel computes it: in f32 (1e39 is infinite there, 1e-50 zero) */
    float f = e->kind == EX_FLOAT ? (float)e->fval : e->kind == EX_INT ? (float)e->ival : 0;
    return (e->kind == EX_FLOAT || e->kind == EX_INT) && isfinite(f) && f != 0;
}

/* A of body = A(r) + body[r := 0] (see the top of the file), with p in r's
 * place; NULL when r is not a sum or body is not affine in it. Iterative:
 * down the path from body to r, then back up building A. */
static Expr *affine_part(ExprCtx *c, Expr *body, Expr *r, Expr *p)
{
    if (r->kind != EX_REDUCE || r->red.op != RD_SUM || r->type != DT_F32 ||
        body->type != DT_F32)
        return NULL;
    /* the path's nodes, each with the side r is on */
    typedef struct Step {
        Expr *e;
        int side; /* r is in operand a (0), b (1) or c (2) */
    } Step;
    int n = 0, cap = 16;
    Step *path = malloc(sizeof *path * (size_t)cap);
    Expr *e = body, *a = NULL;
    if (!path)
        return NULL;
    while (e != r) {
        int arity = ir_op_arity(e->kind);
        bool in0 = arity >= 1 && contains(e->op.a, r), in1 = arity >= 2 && contains(e->op.b, r);
        bool in2 = arity == 3 && contains(e->op.c, r);
        int side = in0 ? 0 : in1 ? 1 : 2;
        /* the other factor of a product (fma(x, y, z) is x * y + z) */
        Expr *other = arity < 2 ? NULL : in0 ? e->op.b : e->op.a;
        bool ok = in0 + in1 + in2 == 1 &&
                  (e->kind == EX_ADD || e->kind == EX_SUB || e->kind == EX_NEG ||
                   (e->kind == EX_FMA && side == 2) ||
                   ((e->kind == EX_MUL || (e->kind == EX_DIV && in0) ||
                     (e->kind == EX_FMA && side < 2)) &&
                    finite_nonzero(other)));
        if (!ok)
            goto done;
        if (n == cap) {
            Step *more = realloc(path, sizeof *path * (size_t)(cap *= 2));
            if (!more)
                goto done;
            path = more;
        }
        path[n++] = (Step){e, side};
        e = side == 0 ? e->op.a : side == 1 ? e->op.b : e->op.c;
    }
    a = p;
    for (int i = n - 1; c && i >= 0; i--) {
        Expr *x = path[i].e;
        int side = path[i].side;
        ExprKind k = x->kind == EX_FMA ? EX_MUL : x->kind;
        if (x->kind == EX_NEG || (x->kind == EX_SUB && side == 1))
            a = ir_unop(c, EX_NEG, a);
        else if ((k == EX_MUL || k == EX_DIV) && side < 2)
            a = side == 0 ? ir_binop(c, k, a, x->op.b) : ir_binop(c, k, x->op.a, a);
    }
done:
    free(path);
    return a;
}

bool pass_atomic_split_ok(Expr *body)
{
    Expr *r = ir_outer_reduce(body);
    /* no context: the check alone */
    return r && affine_part(NULL, body, r, r) != NULL;
}

/* Variant v of stage t split S ways: partial results, then their
 * combination (see the top of the file). r is body's outer reduction. */
static void lower_split(Lower *l, LoopProgram *lp, Tensor *t, Expr *body, Expr *r,
                        const MicroKernel *mk, const char *name, const TargetInfo *ti)
{
    ExprCtx *c = l->c;
    int n = t->rank, S = mk->split;
    Var *k1 = r->red.axes[0];
    Expr *K = k1->extent;
    Expr *C = ir_simplify(c, ir_binop(c, EX_DIV, ir_binop(c, EX_ADD, K, ir_int(c, S - 1)),
                                      ir_int(c, S)));
    Expr *shape[MK_MAX_AXES];
    Var **pax = IR_NEWN(l->a, Var *, n + 1);
    Expr *pidx[MK_MAX_AXES];
    shape[0] = ir_int(c, S);
    pax[0] = ir_var(c, "s", VK_AXIS, shape[0]);
    for (int a = 0; a < n; a++) {
        shape[a + 1] = t->shape[a];
        pax[a + 1] = ir_var(c, t->axes[a]->name, VK_AXIS, t->shape[a]);
        pidx[a] = ir_varref(c, pax[a + 1]);
    }
    char pname[160];
    unique_name(l, lp, name, "_part", pname, sizeof pname);

    /* P[s, ...] = red[kk: C, k2...](select(s*C + kk < K, body[k1 := s*C + kk], identity)) */
    Var *raxes[MK_MAX_AXES + 8];
    IR_ASSERT(r->red.n <= MK_MAX_AXES + 8);
    memcpy(raxes, r->red.axes, sizeof *raxes * (size_t)r->red.n);
    raxes[0] = ir_var(c, k1->name, VK_AXIS, C);
    Expr *k = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, ir_varref(c, pax[0]), C),
                       ir_varref(c, raxes[0]));
    Expr *part = ir_select(c, ir_binop(c, EX_LT, k, K), ir_subst(c, r->red.body, k1, k),
                           ir_reduce_init(c, r->red.op, r->type));
    part = ir_reduce(c, r->red.op, r->red.n, raxes, part);
    MicroKernel mkp, mkc, mkv = *mk;
    pass_split_microkernels(mk, t, ti, &mkp, &mkc);
    Expr *add = mk->atomic ? affine_part(c, body, r, part) : NULL;
    if (add) {
        /* Y = E(0), then Y += A(part) atomically: P is the parts' domain only */
        Tensor *P = ir_global_tensor(l->a, pname, n + 1, shape);
        P->axes = pax;
        char iname[160];
        unique_name(l, lp, name, "_init", iname, sizeof iname);
        Kernel *ks[2] = {lower_tensor(l, t, ir_replace(c, body, r, ir_float(c, 0)), &mkc, iname,
                                      NULL),
                         lower_tensor(l, P, ir_subst_many(c, add, n, t->axes, pidx), &mkp, pname,
                                      t)};
        ir_loop_program_add_variant(lp, mk, 2, ks, 0, NULL);
        return;
    }
    mkv.atomic = false; /* not affine in a sum: deterministic, through P */
    Tensor *P = ir_loop_program_add_scratch(lp, pname, n + 1, shape);
    P->axes = pax;
    P->dtype = r->type;
    part = ir_subst_many(c, part, n, t->axes, pidx);
    P->body = part;

    /* Y = body with the reduction over the parts in its place */
    Var *s2 = ir_var(c, "s", VK_AXIS, shape[0]);
    Expr *yidx[MK_MAX_AXES + 1];
    yidx[0] = ir_varref(c, s2);
    for (int a = 0; a < n; a++)
        yidx[a + 1] = ir_varref(c, t->axes[a]);
    Expr *sum = ir_reduce(c, r->red.op, 1, &s2, ir_load(c, P, n + 1, yidx, false));

    Kernel *ks[2] = {lower_tensor(l, P, part, &mkp, pname, NULL),
                     lower_tensor(l, t, ir_replace(c, body, r, sum), &mkc, name, NULL)};
    ir_loop_program_add_variant(lp, &mkv, 2, ks, 1, &P);
}

/* The panel operand of a packed variant: the first load in r's body one
 * of whose indices is the last output axis j plus something free of j, no
 * other index using j, the rest only r's axes and dims (a panel of W[N, K]
 * for Y = X W^T: the same for every row). Packing it is a relayout of W;
 * an index such as j / 2 would blow a small W up to N rows. */
typedef struct Panel {
    ExprCtx *c;
    const Var *j;
    const Expr *r;
    Expr *load;
    bool ok; /* scratch of the check of one load */
} Panel;

static void panel_vars(Expr *e, void *ud)
{
    Panel *pn = ud;
    if (e->kind == EX_LOAD) {
        pn->ok = false; /* an index read from memory: no fixed panel */
        return;
    }
    if (e->kind != EX_VAR || e->var->kind == VK_DIM || e->var == pn->j)
        return;
    bool red = false;
    for (int i = 0; i < pn->r->red.n; i++)
        red |= e->var == pn->r->red.axes[i];
    pn->ok &= red;
}

static void find_panel(Expr *e, void *ud)
{
    Panel *pn = ud;
    if (pn->load || e->kind != EX_LOAD || e->load.t->scope != MS_GLOBAL ||
        e->load.t->dtype != DT_F32)
        return;
    int uses_j = 0;
    bool uses_k = false;
    pn->ok = true;
    for (int i = 0; i < e->load.n; i++) {
        Expr *x = e->load.idx[i];
        if (ir_expr_uses_var(x, pn->j)) {
            uses_j++;
            Expr *jr = ir_varref(pn->c, (Var *)pn->j);
            Expr *rest = ir_simplify(pn->c, ir_binop(pn->c, EX_SUB, x, jr));
            pn->ok &= !ir_expr_uses_var(rest, pn->j);
        }
        for (int a = 0; a < pn->r->red.n; a++)
            uses_k |= ir_expr_uses_var(x, pn->r->red.axes[a]);
        ir_expr_visit(x, panel_vars, pn);
    }
    if (uses_j == 1 && uses_k && pn->ok)
        pn->load = e;
}

/* The panel operand of t's body, whose outer reduction is r, and the
 * reduction axes it uses (kax, at most MK_MAX_AXES - 2), or NULL. */
static Expr *panel_operand(ExprCtx *c, const Tensor *t, const Expr *r, Var **kax, int *nk)
{
    if (t->rank < 2 || !r)
        return NULL;
    Panel pn = {c, t->axes[t->rank - 1], r, NULL, false};
    ir_expr_visit(r->red.body, find_panel, &pn);
    *nk = 0;
    for (int i = 0; pn.load && i < r->red.n; i++) {
        bool used = false;
        for (int d = 0; d < pn.load->load.n; d++)
            used |= ir_expr_uses_var(pn.load->load.idx[d], r->red.axes[i]);
        if (used && *nk == MK_MAX_AXES - 2)
            return NULL; /* more axes than a kernel has */
        if (used)
            kax[(*nk)++] = r->red.axes[i];
    }
    return pn.load;
}

static void uses_dim(Expr *e, void *ud)
{
    if (e->kind == EX_VAR && e->var->kind == VK_DIM)
        *(bool *)ud = true;
}

/* Whether the panels of L, t's panel operand reading along kax, are known
 * when compiling: L a constant, t's last extent and kax's fixed, and L's
 * indices free of dims. */
static bool panel_known(ExprCtx *c, const Tensor *t, Expr *L, Var *const *kax, int nk)
{
    int64_t e;
    bool dims = !L->load.t->data || !ir_is_const(ir_simplify(c, t->shape[t->rank - 1]), &e);
    for (int i = 0; i < nk; i++)
        dims |= !ir_is_const(ir_simplify(c, kax[i]->extent), &e);
    for (int d = 0; d < L->load.n; d++)
        ir_expr_visit(L->load.idx[d], uses_dim, &dims);
    return !dims;
}

PassPack pass_pack_kind(ExprCtx *c, const Tensor *t, Expr *body)
{
    Var *kax[MK_MAX_AXES];
    int nk;
    Expr *L = panel_operand(c, t, ir_outer_reduce(body), kax, &nk);
    return !L ? PASS_PACK_NONE : panel_known(c, t, L, kax, nk) ? PASS_PACK_CONST : PASS_PACK_LAUNCH;
}

/* Whether constant panels b hold the n elements at out, panels of
 * `inner` elements each, up to zero panels past the shorter's end (two
 * variants whose blocks round W's rows up differently). */
static bool same_panels(const Tensor *b, int64_t nb, const float *out, int64_t n, int64_t inner)
{
    const float *d = b->data;
    int64_t m = nb * inner, common = m < n ? m : n;
    if (memcmp(d, out, (size_t)common * sizeof *out) != 0)
        return false;
    const float *tail = m < n ? out : d;
    for (int64_t e = common; e < (m < n ? n : m); e++)
        if (tail[e] != 0.0f)
            return false;
    return true;
}

/* The elements of panels P[pax...] = W?[pidx] of the given shape (every
 * extent fixed), computed now from the constant W, in the program's
 * arena. An earlier constant with the same elements (another variant's
 * same panels, perhaps with fewer or more zero panels past W's end) is
 * returned through same instead (and NULL), grown to this one's panels
 * where it had fewer. */
static void *pack_now(Lower *l, LoopProgram *lp, int rank, Expr *const *shape, Var **pax,
                      Expr *const *pidx, const Tensor *W, Tensor **same)
{
    int64_t ext[MK_MAX_AXES], at[MK_MAX_AXES], wext[MK_MAX_AXES + 8], n = 1;
    for (int i = 0; i < rank; i++) {
        bool fixed = ir_is_const(ir_simplify(l->c, shape[i]), &ext[i]);
        IR_ASSERT(fixed);
        at[i] = 0;
        n *= ext[i];
    }
    IR_ASSERT(W->dtype == DT_F32 && W->rank <= MK_MAX_AXES + 8);
    for (int d = 0; d < W->rank; d++) {
        bool fixed = ir_is_const(ir_simplify(l->c, W->shape[d]), &wext[d]);
        IR_ASSERT(fixed); /* a constant's extents are */
    }
    float *out = malloc((size_t)n * sizeof *out);
    if (!out)
        ir_panic(__FILE__, __LINE__, "out of memory");
    const float *w = W->data;
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        bool in = true;
        for (int d = 0; d < W->rank; d++) {
            int64_t x = ir_eval_at(pidx[d], rank, pax, at);
            in &= x >= 0 && x < wext[d];
            off = off * wext[d] + x;
        }
        out[e] = in ? w[off] : 0.0f;
        for (int i = rank - 1; i >= 0 && ++at[i] == ext[i]; i--)
            at[i] = 0;
    }
    *same = NULL;
    for (int i = 0; i < lp->nbuffers && !*same; i++) {
        Tensor *b = lp->buffers[i];
        bool eq = b->data && b->panel && b->rank == rank && ir_is_const(ir_simplify(l->c, b->shape[0]), &at[0]);
        for (int j = 1; eq && j < rank; j++)
            eq = ir_is_const(ir_simplify(l->c, b->shape[j]), &at[j]) && at[j] == ext[j];
        if (eq && same_panels(b, at[0], out, n, n / ext[0]))
            *same = b;
    }
    void *kept = NULL;
    if (!*same || at[0] < ext[0]) {
        kept = ir_arena_alloc(l->a, (size_t)n * sizeof *out);
        memcpy(kept, out, (size_t)n * sizeof *out);
    }
    if (*same && kept) { /* the kernels lowered so far read within their panels */
        ir_arena_release(l->a, (*same)->data);
        (*same)->data = kept;
        (*same)->shape[0] = ir_int(l->c, ext[0]);
        kept = NULL;
    }
    free(out);
    return kept;
}

/* The width of a variant's panels, whose thread tile along j is nb wide:
 * a launch packs panels a thread's tile wide, so each thread reads one
 * contiguous run of P; a constant's panels, packed once and carried by the
 * object, are the largest power of two dividing nb up to
 * CONST_PANEL_WIDTH, so that variants of every tile width that is a
 * multiple of it (16, 32, 48, 64 with AVX-512's vectors) share one copy
 * of W and a thread's tile reads nb / width runs side by side. */
enum { CONST_PANEL_WIDTH = 16 };

static int64_t panel_width(int64_t nb, bool constant)
{
    int64_t low = nb & -nb;
    return !constant ? nb : low < CONST_PANEL_WIDTH ? low : CONST_PANEL_WIDTH;
}

/* Variant v of stage t packed (mk.pack), or false when its body has no
 * panel operand (the caller lowers it as the one-launch kernel, staged): a
 * launch that copies the panels
 * of the operand read along the vectors, L, into a scratch buffer of
 * panels NB wide along the last output axis j (panel_width; zeros past
 * j's end, which is rounded up to whole blocks of threads x tile), the
 * reduction's axes in between (a one-axis reduction rounded up to whole
 * chunks, zeros past its end),
 *
 *   P[jb, k..., jl] = L?[j := jb * NB + jl]
 *
 * and the compute launch, which reads P[j / NB, k..., j % NB] instead of L,
 * in place chunk by chunk (passes/stage.c copies nothing). A constant's
 * panels are packed now, and variants whose panels come out equal (the
 * same width and chunks) share them. */
static bool lower_packed(Lower *l, LoopProgram *lp, Tensor *t, Expr *body, Expr *r,
                         const MicroKernel *mk, const char *name, const TargetInfo *ti)
{
    ExprCtx *c = l->c;
    int n = t->rank, nk = 0;
    Var *kax[MK_MAX_AXES];
    Expr *L = panel_operand(c, t, r, kax, &nk);
    if (!L)
        return false;
    /* the panels of a constant are a constant, packed now */
    bool now = panel_known(c, t, L, kax, nk);
    int64_t nb = mk->tile[n - 1], pw = panel_width(nb, now);
    Expr *NB = ir_int(c, pw);
    int rank = nk + 2;
    Expr *shape[MK_MAX_AXES];
    Var **pax = IR_NEWN(l->a, Var *, rank);
    Expr *pref[MK_MAX_AXES];
    shape[0] = ir_simplify(c, ir_binop(c, EX_MUL, round_up(c, t->shape[n - 1], nb * mk->threads[n - 1], false),
                                       ir_int(c, mk->threads[n - 1] * (nb / pw))));
    /* a one-axis reduction in whole chunks, so that the compute's reads in
     * the last chunk need no guard */
    bool chunked = r->red.n == 1 && mk->rchunk > 1;
    for (int i = 0; i < nk; i++) {
        shape[i + 1] = chunked ? round_up(c, kax[i]->extent, mk->rchunk, true) : kax[i]->extent;
        pax[i + 1] = ir_var(c, kax[i]->name, VK_AXIS, shape[i + 1]);
    }
    shape[rank - 1] = NB;
    char an[2][80];
    snprintf(an[0], sizeof an[0], "%sb", t->axes[n - 1]->name);
    snprintf(an[1], sizeof an[1], "%sl", t->axes[n - 1]->name);
    pax[0] = ir_var(c, an[0], VK_AXIS, shape[0]);
    pax[rank - 1] = ir_var(c, an[1], VK_AXIS, NB);
    for (int i = 0; i < rank; i++)
        pref[i] = ir_varref(c, pax[i]);

    /* P = L at j = jb * NB + jl, the reduction's axes P's, zero past the ends */
    Var *from[MK_MAX_AXES];
    Expr *to[MK_MAX_AXES];
    from[0] = t->axes[n - 1];
    to[0] = ir_binop(c, EX_ADD, ir_binop(c, EX_MUL, pref[0], NB), pref[rank - 1]);
    for (int i = 0; i < nk; i++) {
        from[i + 1] = kax[i];
        to[i + 1] = pref[i + 1];
    }
    Expr *pidx[MK_MAX_AXES + 8];
    IR_ASSERT(L->load.n <= MK_MAX_AXES + 8);
    for (int d = 0; d < L->load.n; d++)
        pidx[d] = ir_simplify(c, ir_subst_many(c, L->load.idx[d], nk + 1, from, to));
    Tensor *P = NULL;
    void *data = now ? pack_now(l, lp, rank, shape, pax, pidx, L->load.t, &P) : NULL;
    char pname[160];
    if (!P) {
        unique_name(l, lp, name, "_pack", pname, sizeof pname);
        P = ir_loop_program_add_scratch(lp, pname, rank, shape);
        P->axes = pax;
        P->body = ir_load(c, L->load.t, L->load.n, pidx, true);
        P->data = data;
        P->source = data ? L->load.t->source : NULL;
        P->panel = true;
    }

    /* the compute reads P at [j / NB, k..., j % NB] */
    Expr *jr = ir_varref(c, t->axes[n - 1]), *ridx[MK_MAX_AXES];
    ridx[0] = ir_binop(c, EX_DIV, jr, NB);
    for (int i = 0; i < nk; i++)
        ridx[i + 1] = ir_varref(c, kax[i]);
    ridx[rank - 1] = ir_binop(c, EX_MOD, jr, NB);
    Expr *compute = ir_replace(c, body, L, ir_load(c, P, rank, ridx, false));

    if (now) {
        Kernel *k = lower_tensor(l, t, compute, mk, name, NULL);
        ir_loop_program_add_variant(lp, mk, 1, &k, 0, NULL);
        return true;
    }
    MicroKernel mkp = pass_pack_microkernel(P, ti);
    Kernel *ks[2] = {lower_tensor(l, P, P->body, &mkp, pname, NULL),
                     lower_tensor(l, t, compute, mk, name, NULL)};
    ir_loop_program_add_variant(lp, mk, 2, ks, 1, &P);
    return true;
}

/* pass_lower's early release: for each constant, the last stage whose
 * body reads it (by tensor id), and how the kernels lowered so far use
 * each buffer. */
typedef struct Release {
    int *last;
    int ntensors, stage;        /* the program's; the stage being scanned */
    unsigned char *use;
    int nuse, nkernels;         /* use's room; kernels scanned into it */
} Release;

static void last_reader(Expr *e, void *ud)
{
    Release *r = ud;
    const Tensor *t = e->kind == EX_LOAD ? e->load.t : NULL;
    if (t && t->kind == TK_INPUT && t->data && t->id < r->ntensors)
        r->last[t->id] = r->stage;
}

/* After stage i: the constants no later stage reads and no kernel lowered
 * reads (only their panels) are given back. */
static void release_read(TeProgram *p, const LoopProgram *lp, Release *r, int i)
{
    if (lp->nbuffers + 1 > r->nuse) {
        int n = 2 * (lp->nbuffers + 1);
        unsigned char *u = realloc(r->use, (size_t)n);
        if (!u)
            return; /* they go after the lowering, as without release */
        memset(u + r->nuse, 0, (size_t)(n - r->nuse));
        r->use = u;
        r->nuse = n;
    }
    for (; r->nkernels < lp->nkernels; r->nkernels++)
        ir_kernel_uses(lp->kernels[r->nkernels], r->use, NULL);
    for (int k = 0; k < p->ntensors; k++)
        if (r->last[k] == i && !r->use[k])
            ir_te_release_const(p, p->tensors[k]);
}

LoopProgram *pass_lower(TeProgram *p, Expr **bodies, const bool *materialized,
                        const StageSchedule *sched, const TargetInfo *ti, bool release)
{
    Lower l = {p, p->ctx, p->arena, 0};
    LoopProgram *lp = ir_loop_program_new(p);
    memcpy(lp->materialized, materialized, sizeof(bool) * (size_t)p->ntensors);
    bool checks = false;
    for (int i = 0; i < p->ntensors; i++)
        if (p->tensors[i]->kind != TK_INPUT && materialized[i])
            checks = checks || pass_has_check(bodies[i]);
    if (checks) { /* the gathers' error record */
        Expr *four = ir_int(p->ctx, 4);
        lp->index_error = ir_loop_program_add_scratch(lp, "index_error", 1, &four);
        lp->index_error->dtype = DT_I64;
    }
    Release rel = {.ntensors = p->ntensors};
    if (release && (rel.last = malloc(sizeof *rel.last * (size_t)(p->ntensors + 1)))) {
        for (int i = 0; i < p->ntensors; i++)
            rel.last[i] = -1;
        for (rel.stage = 0; rel.stage < p->ntensors; rel.stage++)
            if (p->tensors[rel.stage]->kind != TK_INPUT && materialized[rel.stage])
                ir_expr_visit(bodies[rel.stage], last_reader, &rel);
    }
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT || !materialized[i])
            continue;
        const StageSchedule *st = &sched[i];
        IR_ASSERT(st->nvariants >= 1);
        ir_loop_program_add_stage(lp, t, st->dispatch);
        for (int v = 0; v < st->nvariants; v++) {
            const MicroKernel *mk = &st->variants[v];
            char name[128], suffix[16];
            snprintf(suffix, sizeof suffix, "_v%d", v);
            if (v)
                unique_name(&l, lp, t->name, suffix, name, sizeof name);
            else
                snprintf(name, sizeof name, "%s", t->name);
            Expr *r = mk->split > 1 ? ir_outer_reduce(bodies[i]) : NULL;
            if (r && t->rank < MK_MAX_AXES) {
                lower_split(&l, lp, t, bodies[i], r, mk, name, ti);
                continue;
            }
            r = mk->pack ? ir_outer_reduce(bodies[i]) : NULL;
            if (r && lower_packed(&l, lp, t, bodies[i], r, mk, name, ti))
                continue;
            MicroKernel one = *mk;
            one.pack = false; /* no packing launch */
            Kernel *k = lower_tensor(&l, t, bodies[i], &one, name, NULL);
            ir_loop_program_add_variant(lp, &one, 1, &k, 0, NULL);
        }
        if (rel.last)
            release_read(p, lp, &rel, i);
    }
    free(rel.last);
    free(rel.use);
    return lp;
}
