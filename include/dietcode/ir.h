/* dietcode/ir.h: the IR layer's table of contents.
 *
 * Expressions (Expr) are immutable and hash-consed in an ExprCtx: two
 * structurally equal expressions are the same pointer, so "did a rewrite
 * change anything?" is a pointer compare. They carry no source location
 * (one node may stand for many places); the frontend keeps locations on its
 * AST and reports errors before building IR.
 *
 * Variables (Var) are dims (run-time sizes with a declared range), axes
 * of a compute or a reduction, and loop variables; each knows its own range,
 * so interval analysis needs no separate environment.
 *
 * A TE program is the checked form of a .tex file: dims, tensors (inputs,
 * intermediates, outputs) in definition order, each computed tensor with its
 * axes and a body.
 */
#ifndef DIETCODE_IR_H
#define DIETCODE_IR_H

#include <math.h>

#include "dietcode/base.h"
#include "dietcode/ops.h"

typedef enum DType { DT_BOOL, DT_I32, DT_F32 } DType;

typedef enum ExprKind {
    EX_INT,    /* ival: integer or boolean constant */
    EX_FLOAT,  /* fval */
    EX_VAR,    /* var */
    EX_LOAD,   /* load: tensor element */
    EX_REDUCE, /* red: reduction over fresh axes */
#define X(name, text, arity, form, comm) EX_##name,
    IR_OPS(X)
#undef X
    EX_KIND_COUNT
} ExprKind;

typedef enum ReduceOp {
#define X(name, text, ident, comb) RD_##name,
    IR_REDUCE_OPS(X)
#undef X
} ReduceOp;

typedef enum VarKind { VK_DIM, VK_AXIS, VK_LOOP } VarKind;

typedef struct Expr Expr;
typedef struct Tensor Tensor;

typedef struct Var {
    const char *name;
    int id;          /* dense per ExprCtx */
    VarKind kind;
    int64_t lo, hi;  /* VK_DIM: declared range */
    int64_t max;     /* VK_DIM: largest value the program accepts (>= hi) */
    int pos;         /* VK_DIM: position in TeProgram.dims */
    Expr *extent;    /* VK_AXIS, VK_LOOP: range is 0 .. extent-1 */
    SrcLoc loc;
} Var;

struct Expr {
    ExprKind kind;
    DType type;
    uint32_t id;   /* creation order: a deterministic sort key */
    uint32_t hash;
    union {
        int64_t ival;
        double fval;
        Var *var;
        struct { Expr *a, *b, *c; } op; /* ops of arity 1-3; CAST: type */
        struct { Tensor *t; int n; bool padded; Expr **idx; } load;
        struct { ReduceOp op; int n; Var **axes; Expr *body; } red;
    };
};

typedef struct ExprCtx ExprCtx;

typedef enum TensorKind { TK_INPUT, TK_TEMP, TK_OUTPUT } TensorKind;

struct Tensor {
    const char *name;
    int id;            /* index in TeProgram.tensors */
    TensorKind kind;
    DType dtype;
    int rank;
    Expr **shape;      /* rank extents, integer exprs over dims */
    Var **axes;        /* computed tensors: rank axes, extents == shape */
    Expr *body;        /* computed tensors */
    SrcLoc loc;
};

typedef struct TeProgram {
    Arena *arena;
    ExprCtx *ctx;
    const char *name;  /* workload name: the file's stem */
    int ndims;
    Var **dims;
    int ntensors;
    Tensor **tensors;  /* definition order: a topological order */
} TeProgram;

/* Numeric interval; INT64_MIN / INT64_MAX stand for unbounded. */
typedef struct Interval { int64_t lo, hi; } Interval;
#define IR_NEG_INF INT64_MIN
#define IR_POS_INF INT64_MAX

/* How far dims may grow during an analysis. DECLARED: lo..hi as written.
 * OPEN: lo..max, for facts that must hold for every size the program
 * accepts (guards removed by passes must stay correct above hi). */
typedef enum RangeMode { RANGE_DECLARED, RANGE_OPEN } RangeMode;

/* ir/expr.c: construction (hash-consed), queries */
ExprCtx *ir_ctx_new(Arena *a);
void ir_ctx_destroy(ExprCtx *c); /* frees the table, not the arena */
Arena *ir_ctx_arena(ExprCtx *c);
Var *ir_var(ExprCtx *c, const char *name, VarKind kind, Expr *extent);
Var *ir_dim(ExprCtx *c, const char *name, int64_t lo, int64_t hi);
int ir_var_count(const ExprCtx *c);
Expr *ir_int(ExprCtx *c, int64_t v);
Expr *ir_bool(ExprCtx *c, bool v);
Expr *ir_float(ExprCtx *c, double v);
Expr *ir_varref(ExprCtx *c, Var *v);
Expr *ir_op(ExprCtx *c, ExprKind k, Expr *a, Expr *b, Expr *x);
Expr *ir_binop(ExprCtx *c, ExprKind k, Expr *a, Expr *b);
Expr *ir_unop(ExprCtx *c, ExprKind k, Expr *a);
Expr *ir_cast(ExprCtx *c, DType to, Expr *a);
Expr *ir_select(ExprCtx *c, Expr *cond, Expr *a, Expr *b);
Expr *ir_load(ExprCtx *c, Tensor *t, int n, Expr **idx, bool padded);
Expr *ir_reduce(ExprCtx *c, ReduceOp op, int n, Var **axes, Expr *body);
int ir_op_arity(ExprKind k);
const char *ir_op_name(ExprKind k);
bool ir_op_commutative(ExprKind k);
const char *ir_reduce_name(ReduceOp op);
double ir_reduce_identity(ReduceOp op);
ExprKind ir_reduce_combiner(ReduceOp op);
const char *ir_dtype_name(DType t);
bool ir_is_const(const Expr *e, int64_t *v);
/* Rebuilds e with every occurrence of variable v replaced by r. */
Expr *ir_subst(ExprCtx *c, Expr *e, Var *v, Expr *r);
/* Calls f on every sub-expression once, children first. */
void ir_expr_visit(Expr *e, void (*f)(Expr *e, void *ud), void *ud);
bool ir_expr_uses_var(Expr *e, const Var *v);

/* ir/simplify.c: canonical forms and constant folding */
Expr *ir_simplify(ExprCtx *c, Expr *e);
/* The f32 semantics of one float operator (arity 1 or 2), as kernels compute it. */
double ir_eval_float_op(ExprKind k, double a, double b);
int64_t ir_floordiv(int64_t a, int64_t b);
int64_t ir_floormod(int64_t a, int64_t b);

/* ir/bounds.c: interval analysis */
Interval ir_interval(ExprCtx *c, Expr *e, RangeMode m);
/* True when e >= 0 for every value of the dims (under m) and of the axis
 * and loop variables in their ranges. Uses symbolic bounds, so facts such
 * as T - 1 - i >= 0 for i in 0..T-1 are proven. */
bool ir_prove_nonneg(ExprCtx *c, Expr *e, RangeMode m);
/* Proves 0 <= idx < extent; sets *range to idx's numeric interval. */
bool ir_prove_in_bounds(ExprCtx *c, Expr *idx, Expr *extent, RangeMode m, Interval *range);

/* ir/print.c */
void ir_print_expr(FILE *out, const Expr *e);
char *ir_expr_str(Arena *a, const Expr *e);
void ir_print_te(FILE *out, const TeProgram *p);

/* ir/te.c: programs */
TeProgram *ir_te_new(const char *name);
void ir_te_destroy(TeProgram *p);
Tensor *ir_te_add_input(TeProgram *p, const char *name, DType t, int rank, Expr **shape);
/* axes are VK_AXIS vars whose extents give the shape. */
Tensor *ir_te_add_compute(TeProgram *p, const char *name, TensorKind kind, int rank,
                          Var **axes, Expr *body);
Var *ir_te_add_dim(TeProgram *p, const char *name, int64_t lo, int64_t hi);
Tensor *ir_te_find(const TeProgram *p, const char *name);
Var *ir_te_find_dim(const TeProgram *p, const char *name);
/* Evaluates an integer expression over dims only (extents). */
int64_t ir_eval_dims(const Expr *e, const int64_t *dim_values);
/* Checks structural invariants; returns false and a message on failure. */
bool ir_verify_te(const TeProgram *p, char *err, size_t errlen);

/* ir/interp.c: the reference interpreter, the ground truth of all tests.
 * dims: a value per dim (by Var.id order of p->dims). bufs: one buffer per
 * tensor (p->tensors order); inputs filled by the caller, computed tensors
 * allocated by the caller with ir_te_numel elements. */
int64_t ir_te_numel(const Tensor *t, const int64_t *dims);
/* Checks values of the dims (>= lo, <= max, sizes representable); fills err. */
bool ir_check_dims(const TeProgram *p, const int64_t *dims, char *err, size_t errlen);
int ir_interp(const TeProgram *p, const int64_t *dims, float **bufs, char *err, size_t errlen);

#endif
