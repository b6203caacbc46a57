/* inline: fusion by cost. Elementwise intermediates are substituted into
 * their consumers, or materialised, whichever costs less.
 *
 * requires: a checked TE program.
 * ensures:  materialized[] holds for inputs, outputs, intermediates whose
 *           bodies contain a reduction (each becomes its own kernel), and
 *           the elementwise intermediates that fusing would make costly,
 *           large or recompute within a recomputation; bodies[t->id] of every computed tensor mentions only
 *           materialised tensors and is at most its own statement's size
 *           plus INLINE_MAX_NODES per load it inlined; the products
 *           the language fuses are fma nodes; every checked gather in the
 *           body of a materialised t reports t's element (an inlined
 *           producer's named the producer's).
 *
 * Cost. Whether an elementwise intermediate U is inlined (its body
 * evaluated wherever a consumer reads it) or materialised (a stage of its
 * own, each element computed once, stored and loaded back) is decided per
 * tensor from the recomputation inlining causes. In operator units (a load
 * or an add 1, a special function IR_SPECIAL_COST, index arithmetic 0) and
 * with every dim at the top of its declared range:
 *   inlined       R evaluations of U's body:   R * w
 *   materialised  |U| evaluations and stores, R loads:   |U| * (w + 1) + R
 * where w is the work of U's own body (inlined producers pay for
 * themselves) and R is how often its readers evaluate it: each reader's own
 * evaluation count times the extents of the reductions around the load.
 * U is materialised when inlining costs more than FUSE_SLACK units per
 * element of U beyond materialising, a margin that keeps stages few where
 * the two are close. So a producer read once, a cheap one read a few
 * times, and one that only moves data (w = 1) are fused; a layer norm read
 * 3072 times inside the next dense layer's reduction, or a softmax read 64
 * times inside attention x V, is written once. Tensors are decided readers
 * first (reverse definition order), so a reader's evaluation count is known
 * when its producers are decided.
 *
 * Recomputation does not nest. A tensor that computes (not a move) and has
 * several readers, one of them an inlined tensor that is itself evaluated
 * more than once per element, is materialised. Without this a residual
 * stream through pre-norm layers (GPT-2: each sum read by a layer norm's
 * three stages and by the next sum) was inlined sum after sum until the
 * rereads outweighed a stage, every third layer or so: layer norms re-read
 * up to 9 tensors, and the layers, each cut at a different depth, were 21
 * workloads more to tune than identical layers. Now every other sum is
 * written, at the same place in every layer.
 *
 * Decided. A tensor whose Fuse is set (dcc --fuse, the tuner's search, a
 * records file's fuse line) is inlined or materialised as it says, and its
 * producers are weighed by what that makes them read; the size bound
 * below still materialises a body too large to inline. The tuner measures
 * both ways for the tensors whose ratio (pass_fuse_ratios) is close to 1.
 *
 * Size. Substitution copies bodies: a chain of intermediates would make
 * expressions as large as the program, and later passes walk expression
 * trees. A tensor whose inlined body has more than INLINE_MAX_NODES nodes
 * is materialised instead. So inlining takes time linear in the program
 * and no expression's depth grows with the program's length.
 *
 * Contraction. Each body is contracted (ir_contract: a float + or - of
 * a product becomes one fma) before anything is inlined into it, unless
 * the program has fp-contract off, so a product U computes is never fused
 * with an add of U's reader: inlining does not change a result.
 *
 * A load U[e0, e1] of an inlined U becomes U's body with U's axes replaced
 * by e0, e1. A padded load U?[...] becomes select(in bounds, body, 0), and
 * every load inside the substituted body is made padded too, because the
 * select's arms are both evaluated and the indices may be out of range.
 */
#include "dietcode/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { INLINE_MAX_NODES = 256, FUSE_SLACK = 32 };

/* ---- cost ---- */

static double work(const Expr *e);

/* The work of one evaluation of index expression e: affine arithmetic and
 * division by a constant (a multiply and a shift) fold into the address;
 * a division or remainder by anything else (a flattened [B*S] split back
 * by S) is a real integer division each time, and a gather's index a
 * load. */
static double index_work(const Expr *e)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return 0;
    case EX_LOAD: case EX_REDUCE: return work(e);
    default: break;
    }
    double w = (e->kind == EX_DIV || e->kind == EX_MOD) && e->op.b->kind != EX_INT
                   ? IR_SPECIAL_COST
                   : 0;
    if (e->op.a) w += index_work(e->op.a);
    if (e->op.b) w += index_work(e->op.b);
    if (e->op.c) w += index_work(e->op.c);
    return w;
}

/* The work of one evaluation of e, in operator units. */
static double work(const Expr *e)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return 0;
    case EX_LOAD: {
        double w = 1;
        for (int i = 0; i < e->load.n; i++)
            w += index_work(e->load.idx[i]);
        return w;
    }
    case EX_REDUCE: return work(e->red.body);
    default: break;
    }
    double w = e->type == DT_F32 ? (ir_op_special(e->kind) ? IR_SPECIAL_COST : 1) : 0;
    if (e->op.a) w += work(e->op.a);
    if (e->op.b) w += work(e->op.b);
    if (e->op.c) w += work(e->op.c);
    return w;
}

static double extent_at(const Expr *e, const int64_t *dims)
{
    int64_t v;
    return ir_eval_dims_checked(e, dims, &v) && v > 0 ? (double)v : 0;
}

static double numel_at(const Tensor *t, const int64_t *dims)
{
    double n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= extent_at(t->shape[i], dims);
    return n;
}

/* The reads of the tensors decided so far, and the reader being counted:
 * tensor id reader, recomputed when it is inlined and evaluated more than
 * once per element. */
typedef struct Reads {
    double *reads;  /* per computed tensor: how often readers evaluate it */
    bool *nested;   /* per tensor: read by a recomputed reader */
    int *readers;   /* per tensor: how many tensors read it */
    int *last;      /* per tensor: the last reader counted in readers */
    const int64_t *dims;
    int reader;
    bool recomputed;
} Reads;

/* Adds to reads[u] how often e, evaluated evals times, reads each computed
 * tensor u. */
static void count_reads(const Expr *e, double evals, Reads *r)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return;
    case EX_LOAD:
        if (e->load.t->kind != TK_INPUT) {
            int u = e->load.t->id;
            r->reads[u] += evals;
            r->nested[u] |= r->recomputed;
            r->readers[u] += r->last[u] != r->reader;
            r->last[u] = r->reader;
        }
        for (int i = 0; i < e->load.n; i++)
            count_reads(e->load.idx[i], evals, r);
        return;
    case EX_REDUCE:
        for (int i = 0; i < e->red.n; i++)
            evals *= extent_at(e->red.axes[i]->extent, r->dims);
        count_reads(e->red.body, evals, r);
        return;
    default:
        if (e->op.a) count_reads(e->op.a, evals, r);
        if (e->op.b) count_reads(e->op.b, evals, r);
        if (e->op.c) count_reads(e->op.c, evals, r);
        return;
    }
}

/* Whether e computes anything in floats beyond loading (a move, a
 * broadcast or a transpose does not). */
static bool computes(const Expr *e)
{
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: case EX_LOAD: return false;
    case EX_REDUCE: return true;
    default: break;
    }
    return e->type == DT_F32 || (e->op.a && computes(e->op.a)) ||
           (e->op.b && computes(e->op.b)) || (e->op.c && computes(e->op.c));
}

bool pass_fuse_choosable(const Tensor *t)
{
    return t->kind == TK_TEMP && !pass_stage_has_reduction(t->body);
}

/* gathered[u]: some load reads u at an index read from a tensor (one
 * holding a checked index, EX_CHECK). */
static void mark_gathered(Expr *e, void *ud)
{
    bool *gathered = ud;
    for (int i = 0; e->kind == EX_LOAD && i < e->load.n && !gathered[e->load.t->id]; i++)
        gathered[e->load.t->id] = pass_has_check(e->load.idx[i]);
}

/* materialized[] by cost, or by a tensor's Fuse where it is decided,
 * readers first; ratio (optional) as pass_fuse_ratios. A tensor a gather
 * reads is materialised whatever its Fuse: inlined, its checked index
 * would become an operand of its body, no access's any more, and an index
 * error could not name the table (codegen's error record). */
static void decide(const TeProgram *p, bool *materialized, double *ratio)
{
    int n = p->ntensors;
    double *reads = calloc((size_t)n + 1, sizeof *reads);
    int64_t *dims = calloc((size_t)p->ndims + 1, sizeof *dims);
    bool *gathered = calloc((size_t)n + 1, sizeof *gathered);
    bool *nested = calloc((size_t)n + 1, sizeof *nested);
    int *readers = calloc((size_t)n + 1, sizeof *readers);
    int *last = malloc(((size_t)n + 1) * sizeof *last);
    if (!reads || !dims || !gathered || !nested || !readers || !last)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < n; i++)
        last[i] = -1;
    Reads rd = {reads, nested, readers, last, dims, -1, false};
    for (int i = 0; i < n; i++)
        if (p->tensors[i]->body)
            ir_expr_visit(p->tensors[i]->body, mark_gathered, gathered);
    for (int i = 0; i < p->ndims; i++)
        dims[i] = p->dims[i]->hi;
    for (int i = n - 1; i >= 0; i--) {
        const Tensor *t = p->tensors[i];
        if (ratio)
            ratio[i] = NAN;
        if (t->kind == TK_INPUT) {
            materialized[i] = true;
            continue;
        }
        double size = numel_at(t, dims);
        bool nests = t->fuse == FUSE_COST && nested[i] && readers[i] > 1 && computes(t->body);
        if (!pass_fuse_choosable(t) || gathered[i] || nests) {
            materialized[i] = true;
            if (ratio && (gathered[i] || nests))
                ratio[i] = INFINITY; /* not a close call */
        } else {
            double w = work(t->body), r = reads[i];
            double inlined = r * w, mat = size * (w + 1 + FUSE_SLACK) + r;
            if (ratio)
                ratio[i] = mat > 0 ? inlined / mat : inlined > 0 ? INFINITY : 0;
            materialized[i] = t->fuse == FUSE_COST ? inlined > mat : t->fuse == FUSE_MATERIALIZE;
        }
        rd.reader = i;
        rd.recomputed = !materialized[i] && reads[i] > size;
        count_reads(t->body, materialized[i] ? size : reads[i], &rd);
    }
    free(reads);
    free(dims);
    free(gathered);
    free(nested);
    free(readers);
    free(last);
}

void pass_fuse_ratios(const TeProgram *p, double *ratio)
{
    bool *mat = calloc((size_t)p->ntensors + 1, sizeof *mat);
    if (!mat)
        ir_panic(__FILE__, __LINE__, "out of memory");
    decide(p, mat, ratio);
    free(mat);
}

static const char *const fuse_names[] = {"cost", "inline", "materialize"};

const char *pass_fuse_name(Fuse f) { return fuse_names[f]; }

bool pass_parse_fuse(const char *text, Fuse *out)
{
    for (int f = FUSE_INLINE; f <= FUSE_MATERIALIZE; f++)
        if (strcmp(text, fuse_names[f]) == 0) {
            *out = (Fuse)f;
            return true;
        }
    return false;
}

/* ---- substitution ---- */

typedef struct Inliner {
    TeProgram *p;
    Expr **bodies;
    const bool *materialized;
    double *nodes; /* per tensor: nodes of bodies[id] as a tree */
} Inliner;

static Expr *inline_expr(Inliner *in, Expr *e, double *nodes);

static Expr *inline_load(Inliner *in, Expr *e, double *nodes)
{
    ExprCtx *c = in->p->ctx;
    Tensor *u = e->load.t;
    Expr *idx[MK_MAX_AXES];
    double widest = 1;
    for (int i = 0; i < e->load.n; i++) {
        double k = 0;
        idx[i] = inline_expr(in, e->load.idx[i], &k);
        *nodes += k;
        widest = k > widest ? k : widest;
    }
    if (in->materialized[u->id]) {
        *nodes += 1;
        return ir_load(c, u, e->load.n, idx, e->load.padded);
    }
    /* each axis of u's body becomes an index: at most widest nodes */
    *nodes += in->nodes[u->id] * widest;
    Expr *body = ir_subst_many(c, in->bodies[u->id], u->rank, u->axes, idx);
    if (!e->load.padded)
        return body;
    Expr *ok = ir_bool(c, true);
    for (int i = 0; i < u->rank; i++) {
        Expr *lo = ir_binop(c, EX_LE, ir_int(c, 0), idx[i]);
        Expr *hi = ir_binop(c, EX_LT, idx[i], u->shape[i]);
        ok = ir_binop(c, EX_AND, ok, ir_binop(c, EX_AND, lo, hi));
    }
    *nodes += 3 + 7.0 * u->rank;
    return ir_select(c, ok, ir_pad_loads(c, body), ir_zero(c, u->dtype));
}

/* e with inlined loads substituted; adds the result's tree size to *nodes. */
static Expr *inline_expr(Inliner *in, Expr *e, double *nodes)
{
    ExprCtx *c = in->p->ctx;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: *nodes += 1; return e;
    case EX_LOAD: return inline_load(in, e, nodes);
    default: break;
    }
    *nodes += 1;
    if (e->kind == EX_REDUCE)
        return ir_reduce(c, e->red.op, e->red.n, e->red.axes,
                         inline_expr(in, e->red.body, nodes));
    if (e->kind == EX_CAST)
        return ir_cast(c, e->type, inline_expr(in, e->op.a, nodes));
    return ir_op(c, e->kind, inline_expr(in, e->op.a, nodes),
                 e->op.b ? inline_expr(in, e->op.b, nodes) : NULL,
                 e->op.c ? inline_expr(in, e->op.c, nodes) : NULL);
}

static void find_reduce(Expr *e, void *ud)
{
    if (e->kind == EX_REDUCE)
        *(bool *)ud = true;
}

bool pass_stage_has_reduction(const Expr *body)
{
    bool found = false;
    ir_expr_visit((Expr *)body, find_reduce, &found);
    return found;
}

static void find_check(Expr *e, void *ud)
{
    if (e->kind == EX_CHECK)
        *(bool *)ud = true;
}

bool pass_has_check(const Expr *e)
{
    bool found = false;
    ir_expr_visit((Expr *)e, find_check, &found);
    return found;
}

/* A checked gather names the element its stage computes (the flat
 * position ud): an inlined producer's checks named the producer's. */
static Expr *aim_check(ExprCtx *c, Expr *e, void *ud)
{
    if (e->kind != EX_CHECK || e->op.c == ud)
        return e;
    return ir_op(c, EX_CHECK, e->op.a, e->op.b, ud);
}

void pass_inline(TeProgram *p, Expr **bodies, bool *materialized)
{
    decide(p, materialized, NULL);
    Inliner in = {p, bodies, materialized, calloc((size_t)p->ntensors + 1, sizeof(double))};
    if (!in.nodes)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT)
            continue;
        Expr *body = p->fp_contract_off ? t->body : ir_contract(p->ctx, t->body);
        bodies[i] = inline_expr(&in, body, &in.nodes[i]);
        if (in.nodes[i] > INLINE_MAX_NODES)
            materialized[i] = true;
    }
    for (int i = 0; i < p->ntensors; i++)
        if (materialized[i] && p->tensors[i]->kind != TK_INPUT)
            bodies[i] = ir_rewrite(p->ctx, bodies[i], aim_check,
                                   ir_flat_index(p->ctx, p->tensors[i]->rank, p->tensors[i]->shape,
                                                 p->tensors[i]->axes));
    free(in.nodes);
}
