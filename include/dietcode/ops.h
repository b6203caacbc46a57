/* dietcode/ops.h: the one catalog of expression operators.
 *
 * Each row: enum suffix, printed name, arity, printing form, commutative.
 * Forms: INFIX prints "a OP b", PREFIX "OPa", CALL "name(a, ...)".
 * The enum, the printer, the folder and the code generators all switch
 * over this list, so adding an operator starts here.
 *
 * shfl_xor(v, m) is not in the language: the tile pass makes it for GPU
 * kernels. It is v as evaluated by the thread whose index in the block is
 * this thread's xor m (a warp shuffle, shfl.sync.bfly), and every thread
 * of the block must evaluate it together, as at a barrier.
 *
 * i32(a) is the language's i32(): an integer whose value an i32 holds
 * (of an integer: its low 32 bits, sign-extended; of a float: truncated,
 * saturated, NaN 0; of a condition: 1 or 0). cast(a) converts to the
 * node's own type: f32, or the 64-bit integer (i64()).
 *
 * checked(i, n, pos) is an index read from a tensor that no proof can
 * bound (a gather, E[ids[t], d]), the whole index of its access's axis:
 * i, or i + n where i < 0 (ONNX Gather's rule), when that lies in 0..n-1;
 * else 0, and the run fails (DCRT_ERR_INDEX) naming the access's tensor
 * and axis, i, and the output element pos (a flat offset into the tensor
 * being computed). It prints as i: the text the program was written in.
 *
 * fma(a, b, c) is not in the language either: it is a * b + c rounded
 * once, what ir_contract makes of a float + or - of a product (the
 * contraction rule of docs/LANGUAGE.md) and ir_accumulate of a sum's step.
 */
#ifndef DIETCODE_OPS_H
#define DIETCODE_OPS_H

/*      name     text       arity form    comm */
#define IR_OPS(X)                                   \
    X(ADD,     "+",       2, INFIX,  1)             \
    X(SUB,     "-",       2, INFIX,  0)             \
    X(MUL,     "*",       2, INFIX,  1)             \
    X(DIV,     "/",       2, INFIX,  0)             \
    X(MOD,     "%",       2, INFIX,  0)             \
    X(MIN,     "min",     2, CALL,   1)             \
    X(MAX,     "max",     2, CALL,   1)             \
    X(POW,     "pow",     2, CALL,   0)             \
    X(LT,      "<",       2, INFIX,  0)             \
    X(LE,      "<=",      2, INFIX,  0)             \
    X(EQ,      "==",      2, INFIX,  1)             \
    X(NE,      "!=",      2, INFIX,  1)             \
    X(AND,     "&&",      2, INFIX,  1)             \
    X(OR,      "||",      2, INFIX,  1)             \
    X(NEG,     "-",       1, PREFIX, 0)             \
    X(NOT,     "!",       1, PREFIX, 0)             \
    X(EXP,     "exp",     1, CALL,   0)             \
    X(LOG,     "log",     1, CALL,   0)             \
    X(SQRT,    "sqrt",    1, CALL,   0)             \
    X(RSQRT,   "rsqrt",   1, CALL,   0)             \
    X(TANH,    "tanh",    1, CALL,   0)             \
    X(ERF,     "erf",     1, CALL,   0)             \
    X(ABS,     "abs",     1, CALL,   0)             \
    X(SIGMOID, "sigmoid", 1, CALL,   0)             \
    X(RELU,    "relu",    1, CALL,   0)             \
    X(GELU,    "gelu",    1, CALL,   0)             \
    X(CAST,    "cast",    1, CALL,   0)             \
    X(I32,     "i32",     1, CALL,   0)             \
    X(CHECK,   "checked", 3, CALL,   0)             \
    X(SELECT,  "select",  3, CALL,   0)             \
    X(FMA,     "fma",     3, CALL,   0)             \
    X(SHFL_XOR, "shfl_xor", 2, CALL, 0)

/* Reductions: name, identity as a float, combining binary operator. */
#define IR_REDUCE_OPS(X)          \
    X(SUM,  "sum",  0.0,       ADD) \
    X(PROD, "prod", 1.0,       MUL) \
    X(MAX,  "max",  -INFINITY, MAX) \
    X(MIN,  "min",  INFINITY,  MIN)

#endif
