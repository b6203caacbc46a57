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

#include "dietcode/abi.h"
#include "dietcode/base.h"
#include "dietcode/ops.h"

/* Element types of tensors and types of expressions. An expression is a
 * condition (DT_BOOL), an integer (DT_I64: every integer is computed in 64
 * bits) or an f32. DT_I32 is an element type only: an i32 tensor's elements
 * read as integers, and the i32() conversion is the operator EX_I32. A
 * bool tensor's elements are bytes, 0 or 1, and read as conditions. */
typedef enum DType { DT_F32 = DCRT_F32, DT_I32 = DCRT_I32, DT_I64 = DCRT_I64, DT_BOOL = DCRT_BOOL } DType;

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

/* Where a buffer lives. TE tensors are global; passes add shared (staged
 * per block: GPU shared memory, CPU packing buffers) and local (per thread:
 * registers) buffers, whose shapes are constants. */
typedef enum MemScope { MS_GLOBAL, MS_SHARED, MS_LOCAL } MemScope;
/* How passes/inline.c treats an elementwise intermediate: by its cost
 * model (the default), or as a schedule decided elsewhere (dcc --fuse, the
 * tuner's search, a records file's fuse line). Not part of the program's
 * text: printing and fingerprints ignore it. */
typedef enum Fuse { FUSE_COST, FUSE_INLINE, FUSE_MATERIALIZE } Fuse;

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
    MemScope scope;    /* loop IR: MS_GLOBAL for program tensors */
    /* TK_INPUT: a constant's elements, row-major, known when compiling
     * (NULL: an input the caller passes), and where they came from as the
     * program wrote it (NULL: an intermediate computed from constants alone
     * when compiling, which keeps its axes and body). Every pass treats a constant as the input it is;
     * calls do not pass it (the table binds data, DCRT_BUF_CONST). */
    const void *data;
    const char *source; /* also, for an imported model's inputs and outputs, their names there */
    Fuse fuse;         /* elementwise intermediates: FUSE_COST unless decided */
    bool panel;        /* loop IR: a packed variant's panels (passes/lower.c), laid
                        * out for its kernel to read in place */
};

typedef struct TeProgram {
    Arena *arena;
    ExprCtx *ctx;
    const char *name;  /* workload name: the file's stem */
    int ndims;
    Var **dims;
    int ntensors;
    Tensor **tensors;  /* definition order: a topological order */
    /* dcc --fp-contract=off: every float operation rounded on its own, no
     * fused multiply-adds (ir_contract, ir_accumulate); printed, so a
     * stage's workload fingerprint tells the two apart */
    bool fp_contract_off;
    /* ir_te_release_unread_consts gave some constants' elements back: the
     * program is not lowered or interpreted again (ir_te_consts_whole) */
    bool consts_released;
    /* ir/te.c's own: allocated lengths, and every name hashed */
    int cap_dims, cap_tensors;
    struct TeNames *names;
} TeProgram;

/* ---- Loop IR ----
 *
 * Mutable statement trees over immutable Exprs. A loop's variable carries
 * its extent (Var.extent), so a loop is its variable, kind and body. Loads
 * are EX_LOAD expressions on buffers (Tensor), stores are statements.
 * Kernels have one flat block loop (FK_BLOCK) outermost and at most one
 * flat thread loop (FK_THREAD) inside it; per-axis block and thread
 * indices are ST_LET bindings decomposed from the flat index, so interval
 * analysis sees each with its own range.
 */
typedef enum ForKind {
    FK_SERIAL,
    FK_UNROLLED,   /* constant extent; codegen emits the body per value */
    FK_VECTORIZED, /* constant extent; codegen runs the body as vector lanes */
    FK_BLOCK,      /* GPU blockIdx.x; CPU: parallel over the thread pool */
    FK_THREAD,     /* GPU threadIdx.x; CPU: serial, split at barriers */
} ForKind;

typedef enum StmtKind { ST_FOR, ST_LET, ST_IF, ST_STORE, ST_ALLOC, ST_BARRIER, ST_SEQ } StmtKind;

typedef struct Stmt Stmt;
struct Stmt {
    StmtKind kind;
    union {
        struct { Var *var; ForKind fk; Stmt *body; } loop;  /* var in 0 .. extent-1 */
        struct { Var *var; Expr *value; Stmt *body; } let;  /* value in 0 .. var->extent-1 */
        struct { Expr *cond; Stmt *then, *els; } ifs;       /* els may be NULL */
        /* async: a copy of a global load into shared memory that may land
         * later, by the thread's next barrier that waits for copies
         * (cp.async); every other target may store it at once. atomic:
         * buf[idx] += value as one atomic read-modify-write (split-K by
         * atomics, global f32 buffers only) */
        struct { Tensor *buf; int n; Expr **idx; Expr *value; bool async, atomic; } store;
        struct { bool wait_async; } barrier; /* first wait for the thread's async copies */
        struct { Tensor *buf; Stmt *body; } alloc;          /* shared or local buffer */
        struct { int n; Stmt **s; } seq;
    };
};

/* A micro-kernel: a schedule that does not depend on any concrete shape.
 * Spatial axis a (in the output's axis order) gets threads[a] threads per
 * block, each computing a register tile of tile[a] points, so the block
 * tile is threads[a] * tile[a]. The reduction (its axes fused when their
 * extents are constants) advances rchunk elements per step, staged through
 * shared memory / packing buffers when stage is set, and unrolls by unroll.
 * vec is the vector width along the innermost spatial axis (vaxis
 * MK_VEC_SPATIAL, broadcast FMAs) or along the reduction (MK_VEC_REDUCE,
 * a horizontal sum at the end). split > 1 divides the reduction's
 * outermost axis into that many parts, each a grid of its own writing
 * partial results to a scratch buffer, and a second launch combines them
 * in a fixed order (split-K: more parallelism for a long reduction over
 * few outputs, deterministic results). rthreads > 1 (GPU) gives every
 * output point that many threads along the reduction: each sums every
 * rthreads-th element (vec-wide runs), and a butterfly of warp shuffles
 * combines them in a fixed order, then (rthreads > 32, several warps) a
 * tree in shared memory the warps' sums (the GEMV-like kernels that win
 * at small T). strided lays a thread's register tile out in runs of vec
 * consecutive points, consecutive threads' runs side by side (the CUTLASS
 * SIMT layout): shared reads and global stores of a warp are then
 * contiguous. pipeline (GPU, staged) double-buffers the shared copies:
 * the next chunk is copied while this one is computed, with one barrier a
 * chunk (cp.async from sm_80 on; before, through registers). raster G > 1
 * (GPU, two or more axes) orders the blocks in groups of G rows of blocks,
 * each group column by column, so the blocks running at once share a few
 * column tiles of the operand read along the columns (W) in L2 instead of
 * sweeping all of it row after row. */
/* MK_MAX_FOLDS: the halving steps of a vector of MK_MAX_VEC lanes along the
 * reduction (16 -> 8, 4, 2; the last pair is added by the final store) */
/* MK_MAX_EDGE_TILE: the longest register tile along an axis whose edge
 * tiles get copies of their own (passes/edge.c: one per shorter length) */
enum { MK_MAX_AXES = 8, MK_MAX_SPLIT = 64, MK_MAX_RTHREADS = 1024, MK_MAX_VEC = 16, MK_MAX_FOLDS = 3,
       MK_MAX_EDGE_TILE = 8 };
typedef enum VecAxis { MK_VEC_SPATIAL, MK_VEC_REDUCE } VecAxis;
typedef struct MicroKernel {
    int threads[MK_MAX_AXES];
    int tile[MK_MAX_AXES];
    int rchunk;
    int unroll;
    int vec;
    VecAxis vaxis;
    bool stage;
    int split;      /* 1: the reduction in one launch */
    int rthreads;   /* threads along the reduction per output (0 or 1: none) */
    bool strided;   /* a thread's tile in runs of vec points, runs threads*vec apart */
    bool pipeline;  /* staged through two buffers: the next chunk loads during this one */
    int raster;     /* GPU: rows of blocks per group of the block order (1: none) */
    bool atomic;    /* GPU, split > 1, opt-in: the parts add into the output atomically */
    bool pack;      /* CPU, staged, vectors along the output: the panels of the operand read
                     * along them packed into the workspace by a launch of their own */
} MicroKernel;

/* One kernel: a block loop over a grid of independent blocks. Its grid is
 * the block loop's extent, its block k->nthreads threads. */
typedef struct Kernel {
    const char *name;
    const Tensor *out;  /* the buffer it computes: its stage's tensor, or a scratch buffer */
    /* the tensor whose axes and shape its loops run over: out, except for
     * the parts of an atomic split-K, which run over P[s, out's shape]
     * (no such buffer exists) and add into out */
    const Tensor *domain;
    MicroKernel mk;     /* the micro-kernel this kernel was tiled with */
    int stage;          /* index into LoopProgram.stages */
    int variant;        /* which of the stage's variants (0 .. nvariants-1) */
    Stmt *body;         /* an FK_BLOCK loop */
    int nthreads;       /* threads per block (extent of the FK_THREAD loop), 1 if none */
    /* Handles the tile pass leaves for the passes after it (NULL if absent). */
    Stmt *ko_loop;      /* the loop over reduction chunks */
    Var *ko, *ki;       /* chunk index; position in the chunk (or its vector part; after
                         * vectorize unrolls the chunk by u, the outer loop kio) */
    Var *lane;          /* vector lane along the reduction (MK_VEC_REDUCE) */
    Var *fold[MK_MAX_FOLDS]; /* lanes of the steps folding lane's vector by halves */
    int kc;             /* chunk length; 0 when the reduction is not tiled */
    Expr *kpos;         /* position in the chunk (of ki, rlane, lane), when kc > 0 */
    Var *rlane;         /* the thread's place along the reduction (rthreads > 1) */
    int nspatial;
    Var *tvar[MK_MAX_AXES];  /* per spatial axis: thread index (let) */
    Var *rvar[MK_MAX_AXES];  /* per spatial axis: register-tile loop */
    Expr *tpos[MK_MAX_AXES]; /* per spatial axis: the point's place in the block tile */
    Expr *live;              /* the thread's tile has a point inside the output (NULL: always) */
} Kernel;

/* A dispatch decision tree over the dims' values (from tuning): nodes in
 * preorder, node 0 the root. A leaf (variant >= 0) names a variant of its
 * stage; a split (variant < 0) goes to then_node when dims[dim] <= le and
 * to else_node otherwise, dim being a dim's position (Var.pos). Any dim
 * values work: those beyond the tuned range fall into the outer leaves. */
typedef struct DispatchNode {
    int variant;
    int dim;
    int64_t le;
    int then_node, else_node;
} DispatchNode;
typedef struct Dispatch {
    int nnodes;
    const DispatchNode *nodes;
} Dispatch;

/* One way of computing a stage: the micro-kernel it was lowered from and
 * its kernels, launched in order: one, or with mk.split > 1 the partial
 * results into a scratch buffer and then their combination. Scratch
 * buffers are global buffers of the LoopProgram (ids from te->ntensors on)
 * that only this variant's kernels use. */
typedef struct Variant {
    MicroKernel mk;
    int first, nkernels;   /* lp->kernels[first .. first + nkernels - 1] */
    int nscratch;
    Tensor **scratch;
} Variant;

/* One computed, materialised tensor: each variant computes it in full and
 * exactly one runs, the one dispatch picks for the dims (variant 0 when
 * dispatch is NULL). */
typedef struct Stage {
    const Tensor *out;
    int nvariants;
    Variant *variants;
    const Dispatch *dispatch;
} Stage;

/* The lowered program: stages in execution order over global buffers. The
 * buffers are the TE program's tensors (buffer id = tensor id; inlined
 * intermediates get no memory) followed by the variants' scratch buffers.
 * Its kernels are every variant's, stage by stage and variant by variant;
 * a run launches the kernels of one variant per stage (exec/plan.c).
 * Without tuning each stage has one variant of one kernel. */
typedef struct LoopProgram {
    TeProgram *te;
    int nkernels;
    Kernel **kernels;
    int nstages;
    Stage *stages;
    int nbuffers;
    Tensor **buffers;    /* by id */
    bool *materialized;  /* per buffer id: needs global memory */
    bool gpu;            /* lowered for the GPU (PT_GPU): kernels keep their
                          * thread loop, barriers and shared buffers */
    /* The record a checked gather's index out of range writes (EX_CHECK),
     * int64[4], in the workspace: its code (DCRT_INDEX_CODE of the access's
     * tensor and axis and the stage's tensor), the index, the extent, the
     * element's flat offset; zeroed before a call, read after it (DCRT_BUF_CHECK).
     * NULL when no kernel checks an index. */
    Tensor *index_error;
} LoopProgram;

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
/* Expression ids so far (Expr.id < ir_expr_count). */
uint32_t ir_expr_count(const ExprCtx *c);
Expr *ir_int(ExprCtx *c, int64_t v);
Expr *ir_bool(ExprCtx *c, bool v);
Expr *ir_float(ExprCtx *c, double v);
/* 0 of type t (false for bool): what a zero-padded read gives outside. */
Expr *ir_zero(ExprCtx *c, DType t);
/* The row-major position of the point vars in an array of that shape,
 * simplified: the element a checked gather names (EX_CHECK's third
 * operand). */
Expr *ir_flat_index(ExprCtx *c, int rank, Expr *const *shape, Var *const *vars);
Expr *ir_varref(ExprCtx *c, Var *v);
Expr *ir_op(ExprCtx *c, ExprKind k, Expr *a, Expr *b, Expr *x);
Expr *ir_binop(ExprCtx *c, ExprKind k, Expr *a, Expr *b);
Expr *ir_unop(ExprCtx *c, ExprKind k, Expr *a);
/* The conversion f32(a), i32(a), i64(a) or bool(a) (which is a != 0). */
Expr *ir_cast(ExprCtx *c, DType to, Expr *a);
Expr *ir_select(ExprCtx *c, Expr *cond, Expr *a, Expr *b);
Expr *ir_load(ExprCtx *c, Tensor *t, int n, Expr **idx, bool padded);
Expr *ir_reduce(ExprCtx *c, ReduceOp op, int n, Var **axes, Expr *body);
int ir_op_arity(ExprKind k);
const char *ir_op_name(ExprKind k);
bool ir_op_commutative(ExprKind k);
/* A special-function sequence (exp, log, tanh, erf, pow, sigmoid, gelu,
 * sqrt, rsqrt, division): IR_SPECIAL_COST instructions where an add is
 * one. The cost model and fusion both weigh operators by it. */
enum { IR_SPECIAL_COST = 12 };
bool ir_op_special(ExprKind k);
const char *ir_reduce_name(ReduceOp op);
double ir_reduce_identity(ReduceOp op);
/* An integer reduction's (DT_I64, exact, wrapping as ir_sem_int): 0, 1,
 * or the least or greatest int64 for max and min. */
int64_t ir_reduce_int_identity(ReduceOp op);
/* The identity as a constant of the reduction's type t. */
Expr *ir_reduce_init(ExprCtx *c, ReduceOp op, DType t);
ExprKind ir_reduce_combiner(ReduceOp op);
const char *ir_dtype_name(DType t);
/* Bytes of one element of a tensor of type t. */
int ir_dtype_size(DType t);
/* The type of an expression reading an element of type t. */
DType ir_dtype_value(DType t);
/* A type name ("f32", "i64"...) as a DType; false if it is none. */
bool ir_dtype_parse(const char *name, DType *t);
bool ir_is_const(const Expr *e, int64_t *v);
/* Rebuilds e with every occurrence of variable v replaced by r. */
Expr *ir_subst(ExprCtx *c, Expr *e, Var *v, Expr *r);
/* Replaces vars[i] by by[i] for each i, in order (the replacements must not
 * mention later vars). */
Expr *ir_subst_many(ExprCtx *c, Expr *e, int n, Var *const *vars, Expr *const *by);
/* Rebuilds e with every occurrence of the sub-expression `from` replaced by `to`. */
Expr *ir_replace(ExprCtx *c, Expr *e, const Expr *from, Expr *to);
/* Rebuilds e bottom-up, applying f to every rebuilt node. */
Expr *ir_rewrite(ExprCtx *c, Expr *e, Expr *(*f)(ExprCtx *c, Expr *e, void *ud), void *ud);
/* Makes every load in e a padded (zero outside) load. */
Expr *ir_pad_loads(ExprCtx *c, Expr *e);
/* Calls f on every sub-expression once, children first. */
void ir_expr_visit(Expr *e, void (*f)(Expr *e, void *ud), void *ud);
bool ir_expr_uses_var(Expr *e, const Var *v);
/* The outermost reduction in e (the first in operand order that is not
 * nested in another), or NULL. */
Expr *ir_outer_reduce(Expr *e);

/* ir/simplify.c: canonical forms and constant folding */
Expr *ir_simplify(ExprCtx *c, Expr *e);

/* ir/semantics.c: the one table of scalar semantics (integer division by
 * 0 and by -1, floor rounding, saturating i32(), NaN-propagating max and
 * min...), which every C evaluator calls and codegen emits; the file's
 * opening comment is the table. */
/* An integer operator of arity 1 (b ignored) or 2. */
int64_t ir_sem_int(ExprKind k, int64_t a, int64_t b);
/* A float operator of arity 1 (b ignored) or 2 on f32 values, rounded to f32. */
double ir_sem_float(ExprKind k, double a, double b);
bool ir_sem_compare(ExprKind k, double a, double b);        /* < <= == != */
bool ir_sem_compare_int(ExprKind k, int64_t a, int64_t b);
int64_t ir_sem_f32_to_i32(double f);     /* i32() of a float: truncating, saturating, NaN 0 */
int64_t ir_sem_f32_to_i64(double f);     /* i64() of a float: the same in the i64 range */
int64_t ir_sem_wrap32(int64_t a);        /* i32() of an integer: its low 32 bits, signed */
double ir_sem_i2f(int64_t a);            /* f32() of an integer */
/* A gather's index i into an axis of extent n (EX_CHECK): i, or i + n
 * when i < 0; -1 when that is outside 0..n-1. */
int64_t ir_sem_gather_index(int64_t i, int64_t n);
int64_t ir_floordiv(int64_t a, int64_t b);
int64_t ir_floormod(int64_t a, int64_t b);
/* fma(a, b, c) on f32 values: a * b + c rounded once. */
double ir_sem_fma(double a, double b, double c);
/* The contraction rule: e with every f32 + or - one of whose operands is
 * an f32 product (the left one when both are) made one fma: x*y + z and
 * z + x*y are fma(x, y, z), x*y - z is fma(x, y, -z), z - x*y is
 * fma(-x, y, z). Applied to one tensor's body at a time, before inlining,
 * so a product never fuses with an add of another tensor. */
Expr *ir_contract(ExprCtx *c, Expr *e);
/* One step of a reduction, acc combined with v: fma(x, y, acc) when
 * contract holds, comb is + and v an f32 product x * y; else comb(acc, v). */
Expr *ir_accumulate(ExprCtx *c, ExprKind comb, Expr *acc, Expr *v, bool contract);

/* ir/bounds.c: interval analysis. Bounds of e; past the first 4096 nodes
 * of e a subexpression counts as unbounded (loose, never wrong), so asking
 * at every node of a long chain stays linear. */
Interval ir_interval(ExprCtx *c, Expr *e, RangeMode m);
/* True when e >= 0 for every value of the dims (under m) and of the axis
 * and loop variables in their ranges. Uses symbolic bounds, so facts such
 * as T - 1 - i >= 0 for i in 0..T-1 are proven. */
bool ir_prove_nonneg(ExprCtx *c, Expr *e, RangeMode m);
/* Proves 0 <= idx < extent; sets *range to idx's numeric interval. */
bool ir_prove_in_bounds(ExprCtx *c, Expr *idx, Expr *extent, RangeMode m, Interval *range);
/* True when e is a multiple of m for every value of its variables (the
 * simplifier folds e mod m to 0). */
bool ir_prove_multiple(ExprCtx *c, Expr *e, int64_t m);

/* ir/banks.c: shared-memory bank conflicts (the model is the file's
 * opening comment) */
/* Wavefronts of a warp's access: nthreads (<= 32) threads each reading
 * `width` (1, 2, 4) consecutive 4-byte words from words[t]; `width` when
 * conflict-free. */
int ir_bank_wavefronts(const int64_t *words, int nthreads, int width);
/* The same for an access at word offset `offset` (an index expression)
 * by the first warp of a block of nthreads threads: `thread` is the thread
 * loop's variable, letv/letval the lets between it and the access
 * (outermost first), lane the vector lane variable of a width-word access
 * (NULL for width 1). -1 when the offset is not a function of the thread. */
int ir_access_wavefronts(ExprCtx *c, Expr *offset, const Var *thread, int64_t nthreads,
                         int nlets, Var *const *letv, Expr *const *letval, const Var *lane,
                         int width);

/* ir/print.c */
void ir_print_expr(FILE *out, const Expr *e);
char *ir_expr_str(Arena *a, const Expr *e);
void ir_print_te(FILE *out, const TeProgram *p);
/* The same with constant tensor id's file named paths[id] (a path the
 * reader takes relative to the program's file) where paths[id] is set. */
void ir_print_te_consts(FILE *out, const TeProgram *p, const char *const *paths);
/* The program as inlining leaves it: materialised tensors with bodies[id],
 * the others named as inlined. */
void ir_print_te_inlined(FILE *out, const TeProgram *p, Expr *const *bodies,
                         const bool *materialized);

/* ir/te.c: programs. The constructors and finders return NULL when a
 * pointer argument (the program, a name, shape, axes, body) is NULL. */
TeProgram *ir_te_new(const char *name);
void ir_te_destroy(TeProgram *p);
Tensor *ir_te_add_input(TeProgram *p, const char *name, DType t, int rank, Expr **shape);
/* A constant: an input whose elements (copied into the program's arena)
 * are known; source says where they came from (printed). ir_te_bind_const
 * below makes one of memory the caller owns instead. */
Tensor *ir_te_add_const(TeProgram *p, const char *name, DType t, int rank, Expr **shape,
                        const void *data, size_t bytes, const char *source);
/* As ir_te_add_const, but data (bytes > 0 of them, from malloc) is taken,
 * not copied: p's arena owns it from then on. NULL (data still the
 * caller's) where ir_te_add_const would fail. */
Tensor *ir_te_adopt_const(TeProgram *p, const char *name, DType t, int rank, Expr **shape,
                          void *data, size_t bytes, const char *source);
/* Binds input NAME of p (of fixed extents) to bytes of elements at data,
 * which the caller owns: NAME is a constant from then on, its values read
 * where they are, not copied. They must stay unchanged and alive as long
 * as p, any program lowered from it and any JIT code compiled from those
 * (an object copies them into its read-only data). Bind before lowering;
 * intermediates computed from bound constants alone are not folded (the
 * frontend folds those of `const` declarations). source, if not NULL,
 * names them in printed programs. 0, or -1 and err: no such input, already
 * a constant, extents that use dims, or bytes other than its size. */
int ir_te_bind_const(TeProgram *p, const char *name, const void *data, size_t bytes,
                     const char *source, char *err, size_t errlen);
/* After p's last compile to lp: gives back the elements of p's constants
 * that no kernel of lp reads (weights read only through the panels packed
 * from them when compiling; a compiled lp no longer needs them) where p's
 * arena holds them alone; the bytes given back. From then on p is not
 * lowered or interpreted again (pass_run_pipeline and ir_interp refuse,
 * through ir_te_consts_whole); code compiled from lp runs as before. */
int64_t ir_te_release_unread_consts(TeProgram *p, const LoopProgram *lp);
/* The same for one constant t of p, whose elements the caller knows no
 * kernel will read (pass_lower's early release); the bytes given back (0:
 * not a constant, already given back, or not held alone). */
int64_t ir_te_release_const(TeProgram *p, Tensor *t);
/* Whether p still holds every constant's elements; false and err (naming
 * p) after ir_te_release_unread_consts gave some back, or for a NULL p. */
bool ir_te_consts_whole(const TeProgram *p, char *err, size_t errlen);
/* axes are VK_AXIS vars whose extents give the shape. An f32 tensor: the
 * body converted to f32 if it is an integer (a condition is converted
 * too, to 1 or 0). */
Tensor *ir_te_add_compute(TeProgram *p, const char *name, TensorKind kind, int rank,
                          Var **axes, Expr *body);
/* The same with elements of type dt: the body converted to it as f32(),
 * i32(), i64() or bool() convert (an i32 tensor's body is i32(body)). */
Tensor *ir_te_add_compute_as(TeProgram *p, const char *name, TensorKind kind, DType dt,
                             int rank, Var **axes, Expr *body);
Var *ir_te_add_dim(TeProgram *p, const char *name, int64_t lo, int64_t hi);
Tensor *ir_te_find(const TeProgram *p, const char *name);
/* The tensors a call passes, as ids: the inputs that are not constants,
 * then the outputs, each in declaration order (ids: room for every
 * tensor). Returns how many. */
int ir_te_params(const TeProgram *p, int *ids);
/* The hash names are found by (64-bit FNV-1a). */
uint64_t ir_name_hash(const char *s);
Var *ir_te_find_dim(const TeProgram *p, const char *name);
Tensor *ir_te_find_tensor(const TeProgram *p, const char *name);
/* Evaluates an integer expression over dims only (extents). */
int64_t ir_eval_dims(const Expr *e, const int64_t *dim_values);
/* Evaluates an integer expression over the n variables vars (axes or
 * loop variables, each at vals[i]) and integers: an index at one point. */
int64_t ir_eval_at(const Expr *e, int n, Var *const *vars, const int64_t *vals);
/* The same in exact arithmetic: false when a step overflows int64. */
bool ir_eval_dims_checked(const Expr *e, const int64_t *dim_values, int64_t *out);
/* Checks structural invariants; returns false and a message on failure. */
bool ir_verify_te(const TeProgram *p, char *err, size_t errlen);
/* The same for the program as inlining leaves it: bodies[id] for every
 * materialised computed tensor, reading only materialised tensors. */
bool ir_verify_te_inlined(const TeProgram *p, Expr *const *bodies, const bool *materialized,
                          char *err, size_t errlen);

/* ir/extract.c: a stage as a program of its own */
/* Computed tensor t of p as the output of a new program (own arena and
 * context): the materialised tensors it reads, directly or through inlined
 * intermediates (materialized[id] false), as inputs (a constant stays one,
 * sharing p's values; canonical, without its file); those intermediates
 * as they are, marked FUSE_INLINE (the stage inlines them again whatever
 * its own cost model would say). Plain: every dim of p at its position, names kept.
 * canonical: only the dims used, everything renamed by first use (d0 a0
 * t0 ...), program "stage": its printed text identifies the workload.
 * map (optional, p->ntensors entries): each of p's tensors' copy or NULL. */
TeProgram *ir_te_extract(const TeProgram *p, const Tensor *t, const bool *materialized,
                         bool canonical, Tensor **map);

/* ir/interp.c: the reference interpreter, the ground truth of all tests.
 * dims: a value per dim (by Var.id order of p->dims). bufs: one buffer per
 * tensor (p->tensors order); inputs filled by the caller, computed tensors
 * allocated by the caller with ir_te_numel elements. */
int64_t ir_te_numel(const Tensor *t, const int64_t *dims);
/* The least extent a checked gather of p indexes at any of the nshapes
 * points (p->ndims dim values each), 0 when p has none: integers below it
 * index every table of p in range (generated inputs: the measurer's, dcc
 * run's). */
int64_t ir_te_index_bound(const TeProgram *p, const int64_t *shapes, int nshapes);
/* Brings the first n elements of buf, integers of type dt (other types:
 * nothing), into 0..bound - 1 (bound 0: nothing). */
void ir_bound_indices(DType dt, void *buf, int64_t n, int64_t bound);
/* Its size in bytes: numel times its element's. */
int64_t ir_te_bytes(const Tensor *t, const int64_t *dims);
/* Checks values of the dims (>= lo, <= max, sizes representable); fills err. */
bool ir_check_dims(const TeProgram *p, const int64_t *dims, char *err, size_t errlen);
int ir_interp(const TeProgram *p, const int64_t *dims, float **bufs, char *err, size_t errlen);
/* A gather's index out of range (EX_CHECK), as every evaluator reports it:
 * the tensor read and its axis, the index as computed, the axis's extent,
 * and the flat offset of the element being computed. */
typedef struct IrGatherFault {
    const char *tensor;
    int axis;
    int64_t value, extent, pos;
} IrGatherFault;
/* "index V of E on axis A is out of range -N..N-1 (computing Y[i, j])":
 * f->pos as coordinates of out at these dims. */
void ir_gather_error(char *err, size_t errlen, const IrGatherFault *f, const Tensor *out,
                     const int64_t *dims);

/* ir/loop.c: statement constructors and walks */
Stmt *ir_for(Arena *a, Var *v, ForKind fk, Stmt *body);
Stmt *ir_let(Arena *a, Var *v, Expr *value, Stmt *body);
Stmt *ir_if(Arena *a, Expr *cond, Stmt *then, Stmt *els);
Stmt *ir_store(Arena *a, Tensor *buf, int n, Expr **idx, Expr *value);
Stmt *ir_alloc(Arena *a, Tensor *buf, Stmt *body);
Stmt *ir_barrier(Arena *a);
/* A barrier after which every async store the block issued before it has
 * landed (cp.async.wait_all, then bar.sync). */
Stmt *ir_barrier_async(Arena *a);
Stmt *ir_seq(Arena *a, int n, Stmt **s);
Stmt *ir_seq2(Arena *a, Stmt *x, Stmt *y);
/* A local or shared buffer of constant shape. */
Tensor *ir_buffer(Arena *a, const char *name, MemScope scope, ExprCtx *c, int rank,
                  const int64_t *shape);
/* Its size in 32-bit words, an int64 element two (an extent that is not
 * constant counts as 1). */
int64_t ir_buffer_words(const Tensor *t);
const char *ir_for_kind_name(ForKind fk);
/* Calls f on every statement of s, children before their parent; f may
 * rewrite the statement it is given in place. */
void ir_stmt_visit(Stmt *s, void (*f)(Stmt *s, void *ud), void *ud);
/* How kernel k uses each global buffer: use[id] |= IR_READS, IR_WRITES
 * (use: one entry per buffer of its LoopProgram, zeroed by the caller).
 * touched (NULL, or room for every buffer) gets the ids whose entry was 0;
 * returns how many. */
enum { IR_READS = 1, IR_WRITES = 2 };
int ir_kernel_uses(const Kernel *k, unsigned char *use, int *touched);
/* The checked indices (EX_CHECK) kernel k evaluates and the access each
 * is an index of: a load's index, or the value of a let whose variable is
 * one (passes/hoist.c). malloc'd, *n entries. */
typedef struct IrCheckSite {
    const Expr *check;
    const Tensor *t;
    int axis;
} IrCheckSite;
IrCheckSite *ir_check_sites(const Kernel *k, int nvars, int *n);
/* Rewrites every expression of s in place with f. */
void ir_stmt_map_exprs(Stmt *s, Expr *(*f)(Expr *e, void *ud), void *ud);
Stmt *ir_stmt_clone(Arena *a, const Stmt *s);
/* Whether pred holds for s or a statement inside it (preorder, stops at
 * the first). */
bool ir_stmt_any(const Stmt *s, bool (*pred)(const Stmt *s, void *ud), void *ud);
bool ir_stmt_has_barrier(const Stmt *s);
Kernel *ir_kernel_new(Arena *a, const char *name, const Tensor *out, Stmt *body);
LoopProgram *ir_loop_program_new(TeProgram *te);
/* A global f32 tensor of that shape that is no program's buffer (id -1):
 * an atomic split-K's domain (Kernel.domain), or a scratch buffer's
 * before it is added. */
Tensor *ir_global_tensor(Arena *a, const char *name, int rank, Expr *const *shape);
/* A new global f32 buffer of lp (id lp->nbuffers), materialised. */
Tensor *ir_loop_program_add_scratch(LoopProgram *lp, const char *name, int rank, Expr **shape);
/* Appends a stage computing out, its variants picked by d (NULL: variant
 * 0); returns its index. Its variants follow, before the next stage. */
int ir_loop_program_add_stage(LoopProgram *lp, const Tensor *out, const Dispatch *d);
/* Appends a variant to the last stage: micro-kernel mk, its n kernels ks
 * in launch order (their stage and variant set here) and the scratch
 * buffers they share. */
void ir_loop_program_add_variant(LoopProgram *lp, const MicroKernel *mk, int n, Kernel *const *ks,
                                 int nscratch, Tensor *const *scratch);
/* A total order on micro-kernels, field by field (0: the same schedule). */
int ir_microkernel_cmp(const MicroKernel *a, const MicroKernel *b);


/* ir/print_loops.c */
void ir_print_stmt(FILE *out, const Stmt *s, int indent);
void ir_print_kernel(FILE *out, const Kernel *k);
void ir_print_loops(FILE *out, const LoopProgram *lp);
void ir_print_microkernel(FILE *out, const MicroKernel *mk, int nspatial);

/* ir/interp_loops.c: runs one kernel of CPU-form loop IR directly, all its
 * blocks (tests, debugging; exec/loops.c runs a program's plan with it).
 * bufs[id]: every materialised buffer of lp. -1 and err when an access
 * falls outside its buffer. */
int ir_run_kernel_loops(const LoopProgram *lp, const Kernel *k, const int64_t *dims,
                        float *const *bufs, char *err, size_t errlen);

/* ir/verify_loops.c */
bool ir_verify_loops(const LoopProgram *lp, char *err, size_t errlen);
/* Checks a dispatch tree for a stage of nvariants variants over ndims dims:
 * leaves name a variant, splits a dim and children after their parent
 * (so every walk ends). NULL is valid. */
bool ir_verify_dispatch(const Dispatch *d, int nvariants, int ndims, char *err, size_t errlen);

#endif
