/* The reference interpreter: the ground truth every compiled kernel is
 * checked against, so it must be obviously right first and fast second.
 *
 * Compiling. Each computed tensor's body is compiled once per run into a
 * tree of Nodes that mirrors the Expr tree one for one, with what depends
 * only on the dims resolved up front: tensor extents and strides, reduction
 * extents, variable slots. An Expr is evaluated as an integer or as a float
 * (its type says which); the conversions the language defines between the
 * two are nodes of their own (N_F2I, N_I2F, N_WIDEN).
 *
 * Batches. The tree is evaluated for a batch of up to LANES consecutive
 * output points at a time: each node computes its value for every lane in
 * one loop, so walking the tree costs once per batch rather than once per
 * point. A value that is the same in every lane (a constant, a dim, a
 * reduction axis, an axis all lanes agree on, and what is computed from
 * those only) is computed and stored once: a Vals with step 0. Lanes never
 * mix: each point's value comes from exactly the operations, in exactly the
 * order, of a point-by-point walk. Every float operator rounds to f32 as
 * ir_sem_float does (+ - * / are written out inline, one f32 operation
 * each); a body is first contracted (ir_contract: the fused multiply-adds
 * the language defines) unless the program has fp-contract off. A
 * reduction keeps one accumulator per lane, runs its axes as nested loops,
 * first axis outermost; an f32 one accumulates in double and rounds to f32
 * at the end, an integer one (N_IREDUCE) in int64, exactly, wrapping as
 * the semantics table's integer operations do.
 *
 * Laziness. select evaluates each branch only for the lanes that take it,
 * && and || their right operand only where it decides the result, and an
 * access whose indices contain accesses evaluates each index only where the
 * ones before it are in bounds. These evaluate a child on a gathered
 * sub-batch of lanes (eval_some), so no point evaluates what a
 * point-by-point walk would skip. A plain access out of bounds cannot happen
 * in a checked program; it is still caught, never read, and fails the run
 * naming the tensor. A padded access reads 0 there.
 *
 * Threads. A large tensor is split into ranges of whole batches, one per
 * thread; each thread has its own scratch and writes only its own points,
 * so neither the values nor the batches depend on the number of threads.
 * All memory of a tensor's run lives in one arena.
 */
#include "dietcode/ir.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = 64, MAX_RANK = 16, MAX_THREADS = 8 };
/* Node evaluations (cost() times points) worth one more thread. */
#define PARALLEL_WORK 3e5

typedef union Val {
    int64_t i; /* integer and boolean nodes */
    double f;  /* float nodes: always a value an f32 holds, or an accumulator */
} Val;

typedef enum NodeKind {
    /* integer and boolean values */
    N_ICONST, /* ival */
    N_AXIS,   /* slot: the lane's value of the tensor's axis number slot */
    N_DIM,    /* slot: dims[slot] */
    N_RAXIS,  /* slot: env[slot], a reduction axis, the same in every lane */
    N_IBIN,   /* op(a, b): + - * / % min max, wrapping; x / 0 = x % 0 = 0 */
    N_IUN,    /* op(a): - abs relu */
    N_ICMP,   /* op(a, b): < <= == != of integers */
    N_FCMP,   /* op(a, b): < <= == != of floats */
    N_AND,    /* a && b: b only where a holds */
    N_OR,     /* a || b: b only where a does not */
    N_NOT,    /* !a */
    N_ISEL,   /* a ? b : c, integer branches */
    N_F2I,    /* i32(a) (op EX_I32) or i64(a) of a float: NaN is 0, saturated, truncated */
    N_IREDUCE, /* red: integer body a accumulated exactly in int64 (wrapping) */
    N_CHECK,  /* checked(a, b, c): a gather's index into chk's tensor and axis */
    /* float values */
    N_FCONST, /* fval */
    N_LOAD,   /* load: element of a tensor (an integer or boolean node if its type is) */
    N_I2F,    /* f32(a), a an integer: rounded to f32 */
    N_WIDEN,  /* (double)a: an integer value where a float is expected */
    N_FSEL,   /* a ? b : c, float branches */
    N_REDUCE, /* red: body a accumulated in double over the axes */
    N_FOP,    /* op(a), op(a, b) or fma(a, b, c) in f32 */
} NodeKind;

typedef struct Node {
    NodeKind kind;
    ExprKind op;  /* N_IBIN N_IUN N_ICMP N_FCMP N_FOP */
    int a, b, c;  /* children, by index in Prog.nodes; -1 if absent */
    int lazy;     /* N_AND N_OR N_ISEL N_FSEL, N_LOAD if not eager: its Lazy scratch */
    union {
        int64_t ival;
        double fval;
        int slot;
        struct {
            const void *buf;
            DType dtype;
            const char *name;
            bool padded;
            bool eager; /* no index can fault: evaluate all for every lane */
            int n;
            int *idx; /* n index nodes */
            const int64_t *ext, *stride;
        } load;
        struct {
            ReduceOp op;
            int n;
            int *var;      /* n Var ids: slots in env */
            int64_t *ext;  /* n extents */
        } red;
        struct { const char *tensor; int axis; } chk;
    };
} Node;

typedef struct Shape {
    int64_t ext[MAX_RANK], stride[MAX_RANK];
} Shape;

/* One computed tensor, compiled for the dims of this run. */
typedef struct Prog {
    Arena *arena;  /* everything of this tensor's run */
    const Tensor *t;
    const Shape *shapes; /* per tensor */
    float **bufs;
    const int64_t *dims;
    Node *nodes;
    int n, cap;
    int nlazy;
    int root;
} Prog;

/* A node's values in a batch: lane l's is AT(x, l). Step 0 means one value
 * shared by every lane (stored once): a constant, a dim, a reduction axis,
 * an axis that all lanes agree on, or anything computed from those only. */
typedef struct Vals {
    const Val *v;
    int step;
} Vals;
#define AT(x, l) ((x).v[(l) * (x).step])

/* Points evaluated together: lane l has the value AT(ax[i], l) of axis i. */
typedef struct Batch {
    int n; /* lanes: 1 .. LANES */
    Vals ax[MAX_RANK];
} Batch;

/* Scratch of a node that evaluates a child on some of the lanes only. */
typedef struct Lazy {
    bool keep[LANES];           /* lanes the child is evaluated for */
    int lane[LANES];            /* the kept lanes: sub-batch lane j is lane[j] */
    Val ax[MAX_RANK][LANES];    /* the sub-batch's axis values */
    Val tmp[LANES];             /* the child's values, by lane of the batch */
    int64_t off[LANES];         /* N_LOAD: element offset so far */
} Lazy;

/* A thread's share of a tensor: points lo..hi-1, with its own scratch. */
typedef struct Worker {
    const Prog *g;
    int64_t lo, hi;
    int64_t *env;       /* per Var id: the reduction axes' current values */
    Val *res;           /* LANES values per node */
    Lazy *lazy;         /* per lazy node */
    Val *ax;            /* rank * LANES: the batch's axis values */
    const char *fault;  /* the first tensor accessed out of bounds */
    IrGatherFault gf;   /* the first gather's index out of range (gf.tensor NULL: none) */
} Worker;

/* ---- compiling a body ---- */

static int add(Prog *g, Node x)
{
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        Node *nodes = IR_NEWN(g->arena, Node, cap);
        if (g->n)
            memcpy(nodes, g->nodes, sizeof(Node) * (size_t)g->n);
        g->nodes = nodes;
        g->cap = cap;
    }
    g->nodes[g->n] = x;
    return g->n++;
}

static int mk(Prog *g, NodeKind k, ExprKind op, int a, int b, int c)
{
    return add(g, (Node){.kind = k, .op = op, .a = a, .b = b, .c = c, .lazy = -1});
}

static int mk_lazy(Prog *g, NodeKind k, int a, int b, int c)
{
    return add(g, (Node){.kind = k, .a = a, .b = b, .c = c, .lazy = g->nlazy++});
}

static int compile_f(Prog *g, const Expr *e);
static int compile_load(Prog *g, const Expr *e);
static int compile_reduce(Prog *g, const Expr *e);

/* e's value as an integer or boolean. */
static int compile_i(Prog *g, const Expr *e)
{
    Node x = {.a = -1, .b = -1, .c = -1, .lazy = -1};
    switch (e->kind) {
    case EX_INT:
        x.kind = N_ICONST;
        x.ival = e->ival;
        return add(g, x);
    case EX_VAR:
        if (e->var->kind == VK_DIM) {
            x.kind = N_DIM;
            x.slot = e->var->pos;
            return add(g, x);
        }
        x.kind = N_RAXIS;
        x.slot = e->var->id;
        for (int i = 0; i < g->t->rank; i++)
            if (g->t->axes[i] == e->var) {
                x.kind = N_AXIS;
                x.slot = i;
            }
        return add(g, x);
    case EX_LOAD: return compile_load(g, e);
    case EX_CAST: case EX_I32: /* to an integer: of a float, an integer or a condition */
        if (e->op.a->type == DT_F32)
            return mk(g, N_F2I, e->kind, compile_f(g, e->op.a), -1, -1);
        if (e->kind == EX_I32)
            return mk(g, N_IUN, EX_I32, compile_i(g, e->op.a), -1, -1);
        return compile_i(g, e->op.a);
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE:
        if (e->op.a->type == DT_F32) {
            int a = compile_f(g, e->op.a);
            return mk(g, N_FCMP, e->kind, a, compile_f(g, e->op.b), -1);
        } else {
            int a = compile_i(g, e->op.a);
            return mk(g, N_ICMP, e->kind, a, compile_i(g, e->op.b), -1);
        }
    case EX_AND: case EX_OR: {
        int a = compile_i(g, e->op.a);
        return mk_lazy(g, e->kind == EX_AND ? N_AND : N_OR, a, compile_i(g, e->op.b), -1);
    }
    case EX_NOT: return mk(g, N_NOT, EX_NOT, compile_i(g, e->op.a), -1, -1);
    case EX_SELECT: {
        int a = compile_i(g, e->op.a), b = compile_i(g, e->op.b);
        return mk_lazy(g, N_ISEL, a, b, compile_i(g, e->op.c));
    }
    case EX_NEG: case EX_ABS: case EX_RELU:
        return mk(g, N_IUN, e->kind, compile_i(g, e->op.a), -1, -1);
    case EX_REDUCE: return compile_reduce(g, e);
    case EX_CHECK: {
        int a = compile_i(g, e->op.a), b = compile_i(g, e->op.b);
        return mk(g, N_CHECK, EX_CHECK, a, b, compile_i(g, e->op.c));
    }
    case EX_ADD: case EX_SUB: case EX_MUL: case EX_DIV: case EX_MOD: case EX_MIN: case EX_MAX: {
        int a = compile_i(g, e->op.a);
        return mk(g, N_IBIN, e->kind, a, compile_i(g, e->op.b), -1);
    }
    default: ir_panic(__FILE__, __LINE__, "bad integer operator %s", ir_op_name(e->kind));
    }
}

/* Whether evaluating node id may fail: access a tensor out of bounds, or
 * truncate an integer reduction out of range. */
static bool can_fault(const Prog *g, int id)
{
    if (id < 0)
        return false;
    const Node *x = &g->nodes[id];
    if (x->kind == N_LOAD || x->kind == N_CHECK)
        return true;
    return can_fault(g, x->a) || can_fault(g, x->b) || can_fault(g, x->c);
}

static int compile_load(Prog *g, const Expr *e)
{
    const Tensor *t = e->load.t;
    IR_ASSERT(e->load.n == t->rank);
    int *idx = IR_NEWN(g->arena, int, t->rank ? t->rank : 1);
    for (int i = 0; i < t->rank; i++) {
        idx[i] = compile_i(g, e->load.idx[i]);
        if (g->nodes[idx[i]].kind == N_CHECK) {
            g->nodes[idx[i]].chk.tensor = t->name;
            g->nodes[idx[i]].chk.axis = i;
        }
    }
    Node x = {.kind = N_LOAD, .a = -1, .b = -1, .c = -1, .lazy = -1};
    x.load.buf = g->bufs[t->id];
    x.load.dtype = t->dtype;
    x.load.name = t->name;
    x.load.padded = e->load.padded;
    x.load.eager = true;
    for (int i = 0; i < t->rank; i++)
        x.load.eager &= !can_fault(g, idx[i]);
    if (!x.load.eager)
        x.lazy = g->nlazy++;
    x.load.n = t->rank;
    x.load.idx = idx;
    x.load.ext = g->shapes[t->id].ext;
    x.load.stride = g->shapes[t->id].stride;
    return add(g, x);
}

static int compile_reduce(Prog *g, const Expr *e)
{
    bool f = e->type == DT_F32;
    Node x = {.kind = f ? N_REDUCE : N_IREDUCE,
              .a = f ? compile_f(g, e->red.body) : compile_i(g, e->red.body), .b = -1, .c = -1,
              .lazy = -1};
    x.red.op = e->red.op;
    x.red.n = e->red.n;
    x.red.var = IR_NEWN(g->arena, int, e->red.n ? e->red.n : 1);
    x.red.ext = IR_NEWN(g->arena, int64_t, e->red.n ? e->red.n : 1);
    for (int i = 0; i < e->red.n; i++) {
        x.red.var[i] = e->red.axes[i]->id;
        x.red.ext[i] = ir_eval_dims(e->red.axes[i]->extent, g->dims);
    }
    return add(g, x);
}

/* e's value as a float. */
static int compile_f(Prog *g, const Expr *e)
{
    switch (e->kind) {
    case EX_FLOAT:
        return add(g, (Node){.kind = N_FCONST, .a = -1, .b = -1, .c = -1, .lazy = -1,
                             .fval = e->fval});
    case EX_LOAD:
        if (e->type == DT_F32)
            return compile_load(g, e);
        break;
    case EX_CAST:
        if (e->type == DT_F32)
            return mk(g, N_I2F, EX_CAST, compile_i(g, e->op.a), -1, -1);
        break;
    case EX_SELECT: {
        int a = compile_i(g, e->op.a), b = compile_f(g, e->op.b);
        return mk_lazy(g, N_FSEL, a, b, compile_f(g, e->op.c));
    }
    case EX_REDUCE:
        if (e->type == DT_F32)
            return compile_reduce(g, e);
        break;
    default: break;
    }
    if (e->type != DT_F32)
        return mk(g, N_WIDEN, EX_CAST, compile_i(g, e), -1, -1);
    int a = compile_f(g, e->op.a);
    int b = ir_op_arity(e->kind) >= 2 ? compile_f(g, e->op.b) : -1;
    return mk(g, N_FOP, e->kind, a, b, ir_op_arity(e->kind) == 3 ? compile_f(g, e->op.c) : -1);
}

/* Node evaluations per point, a reduction's body counted once per step:
 * decides whether a tensor is worth splitting between threads. */
static double cost(const Prog *g, int id)
{
    if (id < 0)
        return 0;
    const Node *x = &g->nodes[id];
    if (x->kind == N_REDUCE || x->kind == N_IREDUCE) {
        double steps = 1;
        for (int i = 0; i < x->red.n; i++)
            steps *= (double)x->red.ext[i];
        return 1 + steps * cost(g, x->a);
    }
    double c = 1 + cost(g, x->a) + cost(g, x->b) + cost(g, x->c);
    if (x->kind == N_LOAD)
        for (int i = 0; i < x->load.n; i++)
            c += cost(g, x->load.idx[i]);
    return c;
}

/* ---- evaluating a batch ---- */

static Vals lanes(const Val *r, int m) { return (Vals){r, m > 1}; }

static Vals eval(Worker *w, int id, const Batch *b);

/* Evaluates node id for the lanes of b where lz->keep holds, on a gathered
 * sub-batch unless that is all of them. Returns its values by lane of b;
 * those of the other lanes are meaningless. */
static Vals eval_some(Worker *w, int id, const Batch *b, Lazy *lz)
{
    int m = 0;
    for (int l = 0; l < b->n; l++)
        if (lz->keep[l])
            lz->lane[m++] = l;
    if (m == b->n)
        return eval(w, id, b);
    if (m == 0)
        return lanes(lz->tmp, b->n);
    Batch sub = {.n = m};
    for (int i = 0; i < w->g->t->rank; i++) {
        sub.ax[i] = b->ax[i];
        if (b->ax[i].step == 0)
            continue;
        for (int j = 0; j < m; j++)
            lz->ax[i][j] = AT(b->ax[i], lz->lane[j]);
        sub.ax[i] = lanes(lz->ax[i], m);
    }
    Vals v = eval(w, id, &sub);
    for (int j = 0; j < m; j++)
        lz->tmp[lz->lane[j]] = AT(v, j);
    return lanes(lz->tmp, b->n);
}

static int64_t wrap(uint64_t v) { return (int64_t)v; }

/* Adds an index's part to the element offset of lanes 0..m-1; -1 marks a
 * lane with an index out of bounds. */
static void add_index(int64_t *off, Vals v, int64_t ext, int64_t stride, int m)
{
    for (int l = 0; l < m; l++) {
        int64_t i = AT(v, l).i;
        if (off[l] >= 0)
            off[l] = i >= 0 && i < ext ? off[l] + i * stride : -1;
    }
}

static Vals load(Worker *w, const Node *x, const Batch *b, Val *r)
{
    const int64_t *ext = x->load.ext, *stride = x->load.stride;
    int nidx = x->load.n, m = b->n;
    int64_t lane_off[LANES], *off = lane_off;
    if (x->load.eager) {
        /* the indices shared by all lanes give a base offset, checked once */
        Vals v[MAX_RANK];
        int64_t base = 0;
        m = 1;
        for (int d = 0; d < nidx; d++) {
            v[d] = eval(w, x->load.idx[d], b);
            if (v[d].step)
                m = b->n;
            else
                add_index(&base, v[d], ext[d], stride[d], 1);
        }
        for (int l = 0; l < m; l++)
            off[l] = base;
        for (int d = 0; d < nidx; d++)
            if (v[d].step)
                add_index(off, v[d], ext[d], stride[d], m);
    } else {
        /* an index may fault: evaluate it only where the ones before are in bounds */
        Lazy *lz = &w->lazy[x->lazy];
        off = lz->off;
        for (int l = 0; l < m; l++)
            off[l] = 0;
        for (int d = 0; d < nidx; d++) {
            for (int l = 0; l < m; l++)
                lz->keep[l] = off[l] >= 0;
            add_index(off, eval_some(w, x->load.idx[d], b, lz), ext[d], stride[d], m);
        }
    }
    for (int l = 0; l < m; l++) {
        int64_t o = off[l];
        if (o < 0) {
            r[l].i = 0; /* 0 and 0.0 alike */
            if (!x->load.padded && !w->fault)
                w->fault = x->load.name;
            continue;
        }
        switch (x->load.dtype) {
        case DT_F32: r[l].f = ((const float *)x->load.buf)[o]; break;
        case DT_I32: r[l].i = ((const int32_t *)x->load.buf)[o]; break;
        case DT_I64: r[l].i = ((const int64_t *)x->load.buf)[o]; break;
        case DT_BOOL: r[l].i = ((const uint8_t *)x->load.buf)[o] != 0; break;
        }
    }
    return lanes(r, m);
}

/* acc[l] = acc[l] op v[l] for every lane: one step of a reduction. */
static void combine(ReduceOp op, Val *acc, Vals v, int n)
{
    switch (op) {
    case RD_SUM:
        for (int l = 0; l < n; l++)
            acc[l].f += AT(v, l).f;
        break;
    case RD_PROD:
        for (int l = 0; l < n; l++)
            acc[l].f *= AT(v, l).f;
        break;
    case RD_MAX:
    case RD_MIN: {
        ExprKind k = ir_reduce_combiner(op);
        for (int l = 0; l < n; l++)
            acc[l].f = ir_sem_float(k, acc[l].f, AT(v, l).f);
        break;
    }
    }
}

/* The same for an integer reduction, in the integer semantics' own
 * operations (wrapping). */
static void combine_int(ReduceOp op, Val *acc, Vals v, int n)
{
    ExprKind k = ir_reduce_combiner(op);
    for (int l = 0; l < n; l++)
        acc[l].i = ir_sem_int(k, acc[l].i, AT(v, l).i);
}

/* Runs the reduction's axes k.. as nested loops, combining the body's value
 * into each lane's accumulator at every step. */
static void reduce_loop(Worker *w, const Node *x, int k, const Batch *b, Val *acc)
{
    if (k == x->red.n) {
        if (x->kind == N_IREDUCE)
            combine_int(x->red.op, acc, eval(w, x->a, b), b->n);
        else
            combine(x->red.op, acc, eval(w, x->a, b), b->n);
        return;
    }
    for (int64_t i = 0; i < x->red.ext[k] && !w->fault; i++) {
        w->env[x->red.var[k]] = i;
        reduce_loop(w, x, k + 1, b, acc);
    }
}

/* Evaluates node id for every lane of b. An operator computes m lanes: n,
 * or 1 when each of its operands has one value for all lanes. */
static Vals eval(Worker *w, int id, const Batch *b)
{
    const Node *x = &w->g->nodes[id];
    Val *r = w->res + (size_t)id * LANES;
    Lazy *lz = x->lazy >= 0 ? &w->lazy[x->lazy] : NULL;
    int n = b->n, m;
    Vals u, v;
    switch (x->kind) {
    case N_ICONST:
        r[0].i = x->ival;
        return lanes(r, 1);
    case N_AXIS: return b->ax[x->slot];
    case N_DIM:
        r[0].i = w->g->dims[x->slot];
        return lanes(r, 1);
    case N_RAXIS:
        r[0].i = w->env[x->slot];
        return lanes(r, 1);
    case N_IBIN:
        u = eval(w, x->a, b);
        v = eval(w, x->b, b);
        m = u.step || v.step ? n : 1;
        /* + - * inline, as in ir_sem_int */
        switch (x->op) {
        case EX_ADD:
            for (int l = 0; l < m; l++)
                r[l].i = wrap((uint64_t)AT(u, l).i + (uint64_t)AT(v, l).i);
            break;
        case EX_SUB:
            for (int l = 0; l < m; l++)
                r[l].i = wrap((uint64_t)AT(u, l).i - (uint64_t)AT(v, l).i);
            break;
        case EX_MUL:
            for (int l = 0; l < m; l++)
                r[l].i = wrap((uint64_t)AT(u, l).i * (uint64_t)AT(v, l).i);
            break;
        default:
            for (int l = 0; l < m; l++)
                r[l].i = ir_sem_int(x->op, AT(u, l).i, AT(v, l).i);
            break;
        }
        return lanes(r, m);
    case N_IUN:
        u = eval(w, x->a, b);
        m = u.step ? n : 1;
        for (int l = 0; l < m; l++)
            r[l].i = ir_sem_int(x->op, AT(u, l).i, 0);
        return lanes(r, m);
    case N_ICMP:
        u = eval(w, x->a, b);
        v = eval(w, x->b, b);
        m = u.step || v.step ? n : 1;
        for (int l = 0; l < m; l++)
            r[l].i = ir_sem_compare_int(x->op, AT(u, l).i, AT(v, l).i);
        return lanes(r, m);
    case N_FCMP:
        u = eval(w, x->a, b);
        v = eval(w, x->b, b);
        m = u.step || v.step ? n : 1;
        for (int l = 0; l < m; l++)
            r[l].i = ir_sem_compare(x->op, AT(u, l).f, AT(v, l).f);
        return lanes(r, m);
    case N_AND:
        u = eval(w, x->a, b);
        for (int l = 0; l < n; l++)
            lz->keep[l] = AT(u, l).i != 0;
        v = eval_some(w, x->b, b, lz);
        for (int l = 0; l < n; l++)
            r[l].i = lz->keep[l] ? AT(v, l).i != 0 : 0;
        return lanes(r, n);
    case N_OR:
        u = eval(w, x->a, b);
        for (int l = 0; l < n; l++)
            lz->keep[l] = AT(u, l).i == 0;
        v = eval_some(w, x->b, b, lz);
        for (int l = 0; l < n; l++)
            r[l].i = lz->keep[l] ? AT(v, l).i != 0 : 1;
        return lanes(r, n);
    case N_NOT:
        u = eval(w, x->a, b);
        m = u.step ? n : 1;
        for (int l = 0; l < m; l++)
            r[l].i = !AT(u, l).i;
        return lanes(r, m);
    case N_ISEL: case N_FSEL:
        u = eval(w, x->a, b);
        for (int l = 0; l < n; l++)
            lz->keep[l] = AT(u, l).i != 0;
        v = eval_some(w, x->b, b, lz);
        for (int l = 0; l < n; l++)
            if (lz->keep[l])
                r[l] = AT(v, l);
        for (int l = 0; l < n; l++)
            lz->keep[l] = !lz->keep[l];
        v = eval_some(w, x->c, b, lz);
        for (int l = 0; l < n; l++)
            if (lz->keep[l])
                r[l] = AT(v, l);
        return lanes(r, n);
    case N_F2I:
        u = eval(w, x->a, b);
        m = u.step ? n : 1;
        for (int l = 0; l < m; l++)
            r[l].i = x->op == EX_I32 ? ir_sem_f32_to_i32(AT(u, l).f) : ir_sem_f32_to_i64(AT(u, l).f);
        return lanes(r, m);
    case N_CHECK: {
        u = eval(w, x->a, b);
        v = eval(w, x->b, b);
        Vals pos = eval(w, x->c, b);
        m = u.step || v.step ? n : 1;
        for (int l = 0; l < m; l++) {
            int64_t i = ir_sem_gather_index(AT(u, l).i, AT(v, l).i);
            if (i < 0 && !w->gf.tensor)
                w->gf = (IrGatherFault){x->chk.tensor, x->chk.axis, AT(u, l).i, AT(v, l).i,
                                        AT(pos, l).i};
            r[l].i = i < 0 ? 0 : i;
        }
        if (w->gf.tensor && !w->fault)
            w->fault = w->gf.tensor;
        return lanes(r, m);
    }
    case N_IREDUCE:
        r[0].i = ir_reduce_int_identity(x->red.op);
        for (int l = 1; l < n; l++)
            r[l].i = r[0].i;
        reduce_loop(w, x, 0, b, r);
        return lanes(r, n);
    case N_FCONST:
        r[0].f = x->fval;
        return lanes(r, 1);
    case N_LOAD: return load(w, x, b, r);
    case N_I2F:
        u = eval(w, x->a, b);
        m = u.step ? n : 1;
        for (int l = 0; l < m; l++)
            r[l].f = ir_sem_i2f(AT(u, l).i);
        return lanes(r, m);
    case N_WIDEN:
        u = eval(w, x->a, b);
        m = u.step ? n : 1;
        for (int l = 0; l < m; l++)
            r[l].f = (double)AT(u, l).i;
        return lanes(r, m);
    case N_REDUCE:
        r[0].f = ir_reduce_identity(x->red.op);
        for (int l = 1; l < n; l++)
            r[l].f = r[0].f;
        reduce_loop(w, x, 0, b, r);
        for (int l = 0; l < n; l++)
            r[l].f = (double)(float)r[l].f;
        return lanes(r, n);
    case N_FOP:
        u = eval(w, x->a, b);
        if (x->b < 0) {
            m = u.step ? n : 1;
            for (int l = 0; l < m; l++)
                r[l].f = ir_sem_float(x->op, AT(u, l).f, 0.0);
            return lanes(r, m);
        }
        v = eval(w, x->b, b);
        if (x->c >= 0) { /* fma */
            Vals z = eval(w, x->c, b);
            m = u.step || v.step || z.step ? n : 1;
            for (int l = 0; l < m; l++)
                r[l].f = ir_sem_fma(AT(u, l).f, AT(v, l).f, AT(z, l).f);
            return lanes(r, m);
        }
        m = u.step || v.step ? n : 1;
        /* + - * / inline: one f32 operation each, as in ir_sem_float */
        switch (x->op) {
        case EX_ADD:
            for (int l = 0; l < m; l++)
                r[l].f = (float)((float)AT(u, l).f + (float)AT(v, l).f);
            break;
        case EX_SUB:
            for (int l = 0; l < m; l++)
                r[l].f = (float)((float)AT(u, l).f - (float)AT(v, l).f);
            break;
        case EX_MUL:
            for (int l = 0; l < m; l++)
                r[l].f = (float)((float)AT(u, l).f * (float)AT(v, l).f);
            break;
        case EX_DIV:
            for (int l = 0; l < m; l++)
                r[l].f = (float)((float)AT(u, l).f / (float)AT(v, l).f);
            break;
        default:
            for (int l = 0; l < m; l++)
                r[l].f = ir_sem_float(x->op, AT(u, l).f, AT(v, l).f);
            break;
        }
        return lanes(r, m);
    }
    IR_UNREACHABLE();
}

/* ---- running a tensor ---- */

/* Evaluates the worker's points, a batch of consecutive points at a time. */
static void *run_range(void *arg)
{
    Worker *w = arg;
    const Prog *g = w->g;
    const Tensor *t = g->t;
    const Shape *s = &g->shapes[t->id];
    void *out = g->bufs[t->id];
    for (int64_t first = w->lo; first < w->hi && !w->fault; first += LANES) {
        Batch b;
        b.n = (int)(w->hi - first < LANES ? w->hi - first : LANES);
        /* lane l is point first + l: axis i advances every `inner` points */
        int64_t inner = 1;
        for (int i = t->rank - 1; i >= 0; i--) {
            Val *a = w->ax + i * LANES;
            int64_t x = first / inner % s->ext[i];
            int64_t left = inner - first % inner; /* points before axis i advances */
            int m = left < b.n ? b.n : 1;
            b.ax[i] = lanes(a, m);
            for (int l = 0; l < m; l++) {
                a[l].i = x;
                if (--left == 0) {
                    left = inner;
                    x = x + 1 < s->ext[i] ? x + 1 : 0;
                }
            }
            inner *= s->ext[i];
        }
        Vals v = eval(w, g->root, &b);
        for (int l = 0; l < b.n; l++) {
            int64_t at = first + l;
            switch (t->dtype) {
            case DT_F32: ((float *)out)[at] = (float)AT(v, l).f; break;
            case DT_I32: ((int32_t *)out)[at] = (int32_t)ir_sem_wrap32(AT(v, l).i); break;
            case DT_I64: ((int64_t *)out)[at] = AT(v, l).i; break;
            case DT_BOOL: ((uint8_t *)out)[at] = AT(v, l).i != 0; break;
            }
        }
    }
    return NULL;
}

/* Threads for a tensor: one per PARALLEL_WORK node evaluations, at most
 * one per processor and one per batch. */
static int thread_count(double work, int64_t numel)
{
    cpu_set_t set;
    double n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    if (n > (double)((numel + LANES - 1) / LANES))
        n = (double)((numel + LANES - 1) / LANES);
    if (n > work / PARALLEL_WORK)
        n = work / PARALLEL_WORK;
    return n < 1 ? 1 : (int)n;
}

/* Evaluates computed tensor t at every point of its index space. Returns
 * the name of a tensor accessed out of bounds, or NULL. */
static const char *run_tensor(const TeProgram *p, const Tensor *t, const int64_t *dims,
                              float **bufs, const Shape *shapes, IrGatherFault *gf)
{
    Prog g = {.arena = ir_arena_new(), .t = t, .shapes = shapes, .bufs = bufs, .dims = dims};
    /* the body as the language defines it: products fused into the adds
     * that take them (ir/semantics.c), unless the program says not to */
    Expr *body = p->fp_contract_off ? t->body : ir_contract(p->ctx, t->body);
    g.root = t->dtype == DT_F32 ? compile_f(&g, body) : compile_i(&g, body);
    int64_t numel = ir_te_numel(t, dims);
    int nthreads = thread_count((double)numel * cost(&g, g.root), numel);
    int64_t chunk = (numel + nthreads - 1) / nthreads;
    chunk = (chunk + LANES - 1) / LANES * LANES;
    Worker w[MAX_THREADS];
    for (int k = 0; k < nthreads; k++) {
        int64_t lo = chunk * k < numel ? chunk * k : numel;
        w[k] = (Worker){
            .g = &g,
            .lo = lo,
            .hi = lo + chunk < numel ? lo + chunk : numel,
            .env = IR_NEWN(g.arena, int64_t, ir_var_count(p->ctx) + 1),
            .res = IR_NEWN(g.arena, Val, (size_t)g.n * LANES),
            .lazy = IR_NEWN(g.arena, Lazy, g.nlazy ? g.nlazy : 1),
            .ax = IR_NEWN(g.arena, Val, (size_t)(t->rank ? t->rank : 1) * LANES),
        };
    }
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int k = 1; k < nthreads; k++)
        started[k] = pthread_create(&th[k], NULL, run_range, &w[k]) == 0;
    run_range(&w[0]);
    for (int k = 1; k < nthreads; k++) {
        if (started[k])
            pthread_join(th[k], NULL);
        else
            run_range(&w[k]);
    }
    const char *fault = NULL;
    for (int k = 0; k < nthreads && !fault; k++) {
        fault = w[k].fault;
        *gf = w[k].gf;
    }
    ir_arena_destroy(g.arena);
    return fault;
}

int ir_interp(const TeProgram *p, const int64_t *dims, float **bufs, char *err, size_t errlen)
{
    if (!IR_ARG_OK(p, err, errlen) || (p->ndims > 0 && !IR_ARG_OK(dims, err, errlen)) ||
        !IR_ARG_OK(bufs, err, errlen) || !ir_check_dims(p, dims, err, errlen))
        return -1;
    if (!ir_te_consts_whole(p, err, errlen))
        return -1;
    for (int i = 0; i < p->ntensors; i++)
        if (!bufs[i]) {
            snprintf(err, errlen, "ir_interp: the buffer of tensor %d (%s) is NULL", i,
                     p->tensors[i]->name);
            return -1;
        }
    Shape *shapes = calloc((size_t)p->ntensors + 1, sizeof(Shape));
    if (!shapes) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        IR_ASSERT(t->rank <= MAX_RANK);
        int64_t stride = 1;
        for (int j = t->rank - 1; j >= 0; j--) {
            shapes[i].ext[j] = ir_eval_dims(t->shape[j], dims);
            shapes[i].stride[j] = stride;
            stride *= shapes[i].ext[j];
        }
    }
    const char *fault = NULL;
    IrGatherFault gf = {0};
    const Tensor *at = NULL;
    for (int i = 0; i < p->ntensors && !fault; i++)
        if (p->tensors[i]->kind != TK_INPUT)
            fault = run_tensor(p, at = p->tensors[i], dims, bufs, shapes, &gf);
    if (gf.tensor) {
        ir_gather_error(err, errlen, &gf, at, dims);
        free(shapes);
        return -1;
    }
    free(shapes);
    if (fault) {
        snprintf(err, errlen, "access to %s out of bounds for these sizes", fault);
        return -1;
    }
    return 0;
}
