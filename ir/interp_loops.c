/* A direct interpreter of CPU-form loop IR (no barriers), for testing the
 * passes apart from code generation and for debugging schedules: every
 * loop kind runs as a plain loop, buffers are malloc'd per alloc. It runs
 * one kernel; exec/loops.c runs a program's plan with it. It shares
 * the reference's scalar semantics (ir/semantics.c). */
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Buf {
    const Tensor *t;
    void *data;        /* elements of t->dtype */
    int64_t ext[16];
} Buf;

typedef struct LI {
    const LoopProgram *lp;
    const int64_t *dims;
    int64_t *env;
    Buf bufs[96];
    int nbufs;
    const char *fault;
    const Tensor *at;   /* the access whose indices are being evaluated */
    int axis;
    IrCheckSite *sites; /* the kernel's checked indices' accesses */
    int nsites;
    IrGatherFault gf;   /* the first gather's index out of range */
} LI;

static double ev_f(LI *li, const Expr *e);
static int64_t offset(LI *li, Buf *b, int n, Expr *const *idx);
static Buf *find_buf(LI *li, const Tensor *t);

/* A load's element, as a double (f32) or an integer (int64, a bool 0 or 1),
 * 0 where the access is padded and outside; a fault where it is not. */
static double load_f(LI *li, const Expr *e, int64_t *ival)
{
    Buf *b = find_buf(li, e->load.t);
    int64_t off = offset(li, b, e->load.n, e->load.idx);
    *ival = 0;
    if (off < 0) {
        if (!e->load.padded)
            li->fault = e->load.t->name;
        return 0.0;
    }
    switch (e->load.t->dtype) {
    case DT_F32: return ((const float *)b->data)[off];
    case DT_I32: *ival = ((const int32_t *)b->data)[off]; break;
    case DT_I64: *ival = ((const int64_t *)b->data)[off]; break;
    case DT_BOOL: *ival = ((const uint8_t *)b->data)[off] != 0; break;
    }
    return 0.0;
}

static Buf *find_buf(LI *li, const Tensor *t)
{
    for (int i = li->nbufs - 1; i >= 0; i--)
        if (li->bufs[i].t == t)
            return &li->bufs[i];
    ir_panic(__FILE__, __LINE__, "buffer %s not allocated", t->name);
}

static int64_t ev_i(LI *li, const Expr *e)
{
    int64_t a, b;
    switch (e->kind) {
    case EX_INT: return e->ival;
    case EX_VAR: return e->var->kind == VK_DIM ? li->dims[e->var->pos] : li->env[e->var->id];
    case EX_LOAD: {
        int64_t v;
        load_f(li, e, &v);
        return v;
    }
    case EX_CAST: /* to an integer: of a float, or of a boolean */
        if (e->op.a->type == DT_F32)
            return ir_sem_f32_to_i64(ev_f(li, e->op.a));
        return ev_i(li, e->op.a);
    case EX_CHECK: {
        const Tensor *t = li->at;
        int axis = li->axis;
        for (int i = 0; i < li->nsites; i++)
            if (li->sites[i].check == e) {
                t = li->sites[i].t;
                axis = li->sites[i].axis;
            }
        int64_t i = ev_i(li, e->op.a), n = ev_i(li, e->op.b), v = ir_sem_gather_index(i, n);
        if (v < 0 && !li->fault) {
            li->gf = (IrGatherFault){t->name, axis, i, n, ev_i(li, e->op.c)};
            li->fault = t->name;
        }
        return v < 0 ? 0 : v;
    }
    case EX_I32:
        if (e->op.a->type == DT_F32)
            return ir_sem_f32_to_i32(ev_f(li, e->op.a));
        return ir_sem_wrap32(ev_i(li, e->op.a));
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE:
        if (e->op.a->type == DT_F32)
            return ir_sem_compare(e->kind, ev_f(li, e->op.a), ev_f(li, e->op.b));
        return ir_sem_compare_int(e->kind, ev_i(li, e->op.a), ev_i(li, e->op.b));
    case EX_AND: return ev_i(li, e->op.a) && ev_i(li, e->op.b);
    case EX_OR: return ev_i(li, e->op.a) || ev_i(li, e->op.b);
    case EX_NOT: return !ev_i(li, e->op.a);
    case EX_SELECT: return ev_i(li, e->op.a) ? ev_i(li, e->op.b) : ev_i(li, e->op.c);
    default: break;
    }
    a = ev_i(li, e->op.a);
    b = ir_op_arity(e->kind) == 2 ? ev_i(li, e->op.b) : 0;
    return ir_sem_int(e->kind, a, b);
}

/* Flat offset of an access, or -1 when out of bounds. */
static int64_t offset(LI *li, Buf *b, int n, Expr *const *idx)
{
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        li->at = b->t;
        li->axis = i;
        int64_t x = ev_i(li, idx[i]);
        if (x < 0 || x >= b->ext[i])
            return -1;
        off = off * b->ext[i] + x;
    }
    return off;
}

static double ev_f(LI *li, const Expr *e)
{
    switch (e->kind) {
    case EX_FLOAT: return e->fval;
    case EX_LOAD:
        if (e->type == DT_F32) {
            int64_t unused;
            return load_f(li, e, &unused);
        }
        break;
    case EX_CAST: return ir_sem_i2f(ev_i(li, e->op.a));
    case EX_SELECT: return ev_i(li, e->op.a) ? ev_f(li, e->op.b) : ev_f(li, e->op.c);
    case EX_FMA: {
        double a = ev_f(li, e->op.a), b = ev_f(li, e->op.b);
        return ir_sem_fma(a, b, ev_f(li, e->op.c));
    }
    case EX_REDUCE: ir_panic(__FILE__, __LINE__, "reduction in loop IR");
    default: break;
    }
    if (e->type != DT_F32)
        return (double)ev_i(li, e);
    double a = ev_f(li, e->op.a);
    double b = ir_op_arity(e->kind) == 2 ? ev_f(li, e->op.b) : 0.0;
    return ir_sem_float(e->kind, a, b);
}

static void run(LI *li, const Stmt *s)
{
    if (li->fault)
        return;
    switch (s->kind) {
    case ST_FOR: {
        int64_t n = ev_i(li, s->loop.var->extent);
        for (int64_t i = 0; i < n && !li->fault; i++) {
            li->env[s->loop.var->id] = i;
            run(li, s->loop.body);
        }
        return;
    }
    case ST_LET:
        li->env[s->let.var->id] = ev_i(li, s->let.value);
        run(li, s->let.body);
        return;
    case ST_IF:
        if (ev_i(li, s->ifs.cond))
            run(li, s->ifs.then);
        else if (s->ifs.els)
            run(li, s->ifs.els);
        return;
    case ST_STORE: {
        Buf *b = find_buf(li, s->store.buf);
        int64_t off = offset(li, b, s->store.n, s->store.idx);
        if (off < 0) {
            li->fault = s->store.buf->name;
            return;
        }
        switch (s->store.buf->dtype) {
        case DT_F32: {
            float *d = b->data, v = (float)ev_f(li, s->store.value);
            d[off] = s->store.atomic ? d[off] + v : v;
            break;
        }
        case DT_I32: ((int32_t *)b->data)[off] = (int32_t)ir_sem_wrap32(ev_i(li, s->store.value)); break;
        case DT_I64: ((int64_t *)b->data)[off] = ev_i(li, s->store.value); break;
        case DT_BOOL: ((uint8_t *)b->data)[off] = ev_i(li, s->store.value) != 0; break;
        }
        return;
    }
    case ST_ALLOC: {
        IR_ASSERT(li->nbufs < 96);
        Buf *b = &li->bufs[li->nbufs++];
        b->t = s->alloc.buf;
        int64_t n = 1;
        for (int i = 0; i < b->t->rank; i++) {
            b->ext[i] = ev_i(li, b->t->shape[i]);
            n *= b->ext[i];
        }
        /* fresh memory holds garbage on real targets: make reads of unset
         * elements visible as NaN (an integer's as a large odd value) */
        size_t size = (size_t)ir_dtype_size(b->t->dtype);
        void *d = malloc((size_t)n * size);
        if (!d)
            ir_panic(__FILE__, __LINE__, "out of memory");
        if (b->t->dtype == DT_F32)
            for (int64_t i = 0; i < n; i++)
                ((float *)d)[i] = NAN;
        else
            memset(d, 0x5b, (size_t)n * size);
        b->data = d;
        run(li, s->alloc.body);
        free(b->data);
        li->nbufs--;
        return;
    }
    case ST_BARRIER:
        ir_panic(__FILE__, __LINE__, "barrier in CPU-form loop IR");
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            run(li, s->seq.s[i]);
        return;
    }
}

int ir_run_kernel_loops(const LoopProgram *lp, const Kernel *k, const int64_t *dims,
                        float *const *bufs, char *err, size_t errlen)
{
    const TeProgram *p = lp->te;
    IR_ASSERT(lp->nbuffers <= 96);
    LI li = {.lp = lp, .dims = dims, .env = calloc((size_t)ir_var_count(p->ctx) + 1, sizeof(int64_t))};
    for (int i = 0; i < lp->nbuffers; i++) {
        if (!lp->materialized[i])
            continue;
        Buf *b = &li.bufs[li.nbufs++];
        b->t = lp->buffers[i];
        b->data = bufs[i];
        for (int j = 0; j < b->t->rank; j++)
            b->ext[j] = ir_eval_dims(b->t->shape[j], dims);
    }
    li.sites = ir_check_sites(k, ir_var_count(p->ctx), &li.nsites);
    run(&li, k->body);
    free(li.env);
    free(li.sites);
    if (li.gf.tensor) {
        ir_gather_error(err, errlen, &li.gf, lp->stages[k->stage].out, dims);
        return -1;
    }
    if (li.fault) {
        snprintf(err, errlen, "loop IR: access to %s out of bounds in kernel %s", li.fault, k->name);
        return -1;
    }
    return 0;
}
