/* frontend/ast.h: the syntax tree of a .tex program, and the lexer the
 * parser reads it with. Internal to the frontend: sema and lowering read
 * the tree; nothing outside frontend/ sees a token.
 *
 * The tree is what the user wrote, checked only for syntax. Names are not
 * resolved (an AX_NAME may be an index variable, a dim or a 0-d tensor),
 * extents and bounds are not checked, types are names. Two things the
 * parser does check, so later passes need not: every call names a builtin
 * function with the right number of arguments (so a call carries an AstFunc,
 * not a string), every expression nests at most FE_MAX_DEPTH deep, and
 * every expression tree is at most FE_MAX_HEIGHT nodes high (a chain
 * `a + b + ...` is as high as it is long), so passes may recurse over
 * expressions.
 *
 * Every node records the location of its first token. A parenthesised
 * expression has the location of its first token inside the parentheses.
 * All memory belongs to the arena given to fe_parse.
 */
#ifndef DIETCODE_FRONTEND_AST_H
#define DIETCODE_FRONTEND_AST_H

#include "dietcode/base.h"

/* FE_MAX_DEPTH: nesting of parentheses, unary operators, arguments,
 * indices and reduction bodies; FE_MAX_HEIGHT: tree height, chains
 * included. The passes and the
 * code generators recurse once per level of a tree, with frames of up to
 * about 2.5 KB under AddressSanitizer: 2048 levels fit in a 8 MB stack. */
enum { FE_MAX_DEPTH = 200, FE_MAX_HEIGHT = 2048 };

/* Operators: constant, spelling, binding power (0: unary), token.
 * Comparisons (power 3) do not chain: `a < b < c` is a syntax error.
 * The others associate to the left. */
#define AST_OPS(X)                                                           \
    X(AOP_OR, "||", 1, TOK_OROR)                                              \
    X(AOP_AND, "&&", 2, TOK_ANDAND)                                           \
    X(AOP_LT, "<", 3, TOK_LT)                                                 \
    X(AOP_LE, "<=", 3, TOK_LE)                                                \
    X(AOP_GT, ">", 3, TOK_GT)                                                 \
    X(AOP_GE, ">=", 3, TOK_GE)                                                \
    X(AOP_EQ, "==", 3, TOK_EQ)                                                \
    X(AOP_NE, "!=", 3, TOK_NE)                                                \
    X(AOP_ADD, "+", 4, TOK_PLUS)                                              \
    X(AOP_SUB, "-", 4, TOK_MINUS)                                             \
    X(AOP_MUL, "*", 5, TOK_STAR)                                              \
    X(AOP_DIV, "/", 5, TOK_SLASH)                                             \
    X(AOP_MOD, "%", 5, TOK_PERCENT)                                           \
    X(AOP_NEG, "-", 0, TOK_MINUS)                                             \
    X(AOP_NOT, "!", 0, TOK_BANG)

/* Builtin functions: constant, name, number of arguments. */
#define AST_FUNCS(X)                                                         \
    X(AF_SELECT, "select", 3)                                                \
    X(AF_EXP, "exp", 1)                                                      \
    X(AF_LOG, "log", 1)                                                      \
    X(AF_SQRT, "sqrt", 1)                                                    \
    X(AF_RSQRT, "rsqrt", 1)                                                  \
    X(AF_TANH, "tanh", 1)                                                    \
    X(AF_ERF, "erf", 1)                                                      \
    X(AF_ABS, "abs", 1)                                                      \
    X(AF_SIGMOID, "sigmoid", 1)                                              \
    X(AF_RELU, "relu", 1)                                                    \
    X(AF_GELU, "gelu", 1)                                                    \
    X(AF_MAX, "max", 2)                                                      \
    X(AF_MIN, "min", 2)                                                      \
    X(AF_POW, "pow", 2)                                                      \
    X(AF_F32, "f32", 1)                                                      \
    X(AF_I32, "i32", 1)                                                      \
    X(AF_I64, "i64", 1)                                                      \
    X(AF_BOOL, "bool", 1)

/* Reductions: constant, name. */
#define AST_REDUCES(X)                                                       \
    X(AR_SUM, "sum")                                                         \
    X(AR_MAX, "max")                                                         \
    X(AR_MIN, "min")                                                         \
    X(AR_PROD, "prod")

#define X(e, ...) e,
typedef enum AstOp { AST_OPS(X) AOP_COUNT } AstOp;
typedef enum AstFunc { AST_FUNCS(X) AF_COUNT } AstFunc;
typedef enum AstReduce { AST_REDUCES(X) AR_COUNT } AstReduce;
#undef X

typedef struct AstExpr AstExpr;

/* IDX ':' EXTENT, in a definition's shape or a reduction. */
typedef struct AstAxis {
    const char *name;
    SrcLoc loc; /* of the name; the extent's is extent->loc */
    AstExpr *extent;
} AstAxis;

typedef enum AstExprKind {
    AX_INT,    /* ival */
    AX_FLOAT,  /* flt */
    AX_NAME,   /* name: index variable, dim or 0-d tensor; sema decides */
    AX_ACCESS, /* access: X[idx...], X?[idx...] (padded), X[] (n == 0) */
    AX_CALL,   /* call: builtin function, arity already checked */
    AX_REDUCE, /* reduce: sum/max/min/prod over n >= 1 axes */
    AX_UNARY,  /* unary: AOP_NEG or AOP_NOT */
    AX_BINARY, /* binary: the other AstOps */
} AstExprKind;

struct AstExpr {
    AstExprKind kind;
    SrcLoc loc; /* first token: the name of an access, call or reduction,
                   the left operand's first token for a binary operator */
    union {
        int64_t ival;
        struct { double val; const char *text; } flt; /* text as written */
        const char *name;
        struct { const char *name; bool padded; int n; AstExpr **idx; } access;
        struct { AstFunc fn; int n; AstExpr **args; } call;
        struct { AstReduce op; int n; AstAxis *axes; AstExpr *body; } reduce;
        struct { AstOp op; AstExpr *a; } unary;
        struct { AstOp op; SrcLoc oploc; AstExpr *a, *b; } binary;
    };
};

typedef enum AstStmtKind {
    AST_DIM,    /* dim: `dim NAME in LO..HI` */
    AST_INPUT,  /* input: `input NAME[EXTENT, ...] TYPE`, or `const ... = "FILE"` (input.file) */
    AST_DEF,    /* def: `NAME[AXIS, ...] = EXPR`, an intermediate tensor */
    AST_OUTPUT, /* def: `output NAME[AXIS, ...] = EXPR` */
} AstStmtKind;

typedef struct AstStmt {
    AstStmtKind kind;
    SrcLoc loc;       /* first token: the keyword, or the name of an AST_DEF */
    const char *name; /* of the dim or tensor declared */
    SrcLoc name_loc;
    union {
        struct { int64_t lo, hi; SrcLoc lo_loc, hi_loc; } dim;
        struct {
            int n;
            AstExpr **extents;
            const char *type;
            SrcLoc type_loc;
            const char *file; /* a constant's: where its values are, as written (NULL: an input) */
            SrcLoc file_loc;
        } input;
        /* type: NULL (f32), or the element type written after the axes */
        struct { int n; AstAxis *axes; AstExpr *body; const char *type; SrcLoc type_loc; } def;
    };
} AstStmt;

typedef struct AstProgram {
    int n;
    AstStmt **stmts; /* in source order */
} AstProgram;

/* frontend/lex.c */
#define FE_TOKENS(X)                                                         \
    X(TOK_EOF, "end of file") X(TOK_NEWLINE, "newline")                        \
    X(TOK_IDENT, "identifier") X(TOK_INT, "integer") X(TOK_FLOAT, "float")      \
    X(TOK_ERROR, "bad token")                                                 \
    X(TOK_DIM, "dim") X(TOK_IN, "in") X(TOK_INPUT, "input")                     \
    X(TOK_OUTPUT, "output") X(TOK_CONST, "const") X(TOK_STRING, "string")        \
    X(TOK_LPAREN, "(") X(TOK_RPAREN, ")") X(TOK_LBRACK, "[") X(TOK_RBRACK, "]")  \
    X(TOK_COMMA, ",") X(TOK_COLON, ":") X(TOK_SEMI, ";") X(TOK_ASSIGN, "=")      \
    X(TOK_QUEST, "?") X(TOK_DOTDOT, "..")                                      \
    X(TOK_OROR, "||") X(TOK_ANDAND, "&&") X(TOK_LT, "<") X(TOK_LE, "<=")         \
    X(TOK_GT, ">") X(TOK_GE, ">=") X(TOK_EQ, "==") X(TOK_NE, "!=")               \
    X(TOK_PLUS, "+") X(TOK_MINUS, "-") X(TOK_STAR, "*") X(TOK_SLASH, "/")        \
    X(TOK_PERCENT, "%") X(TOK_BANG, "!")

#define X(e, s) e,
typedef enum TokKind { FE_TOKENS(X) TOK_COUNT } TokKind;
#undef X

/* Why a TOK_ERROR token is bad. */
typedef enum LexError {
    LEX_OK, LEX_BADCHAR, LEX_BADNUM, LEX_BIGINT, LEX_BIGFLOAT,
    LEX_BOM, /* a byte-order mark after the start */
    LEX_BADSTRING, /* a string not closed on its line */
} LexError;

typedef struct Token {
    TokKind kind;
    SrcLoc loc;
    const char *text; /* into the source, len bytes; a TOK_FLOAT's is a
                         NUL-terminated copy in the arena */
    int len;
    int64_t ival;     /* TOK_INT */
    double fval;      /* TOK_FLOAT */
    LexError err;     /* TOK_ERROR */
} Token;

/* The lexer's whole state: copy it to look ahead. */
typedef struct Lexer {
    const char *p, *end;
    int line, col;
    Arena *arena;
} Lexer;

void fe_lex_init(Lexer *lx, const Source *src, Arena *a);
/* The next token. A run of newlines, blank lines and comments is one
 * TOK_NEWLINE at the first newline. Never fails: bad input is a TOK_ERROR. */
Token fe_lex_next(Lexer *lx);
/* Whether s is a keyword (dim, in, input, output, const). */
bool fe_lex_is_keyword(const char *s);
/* Adds the diagnostic that a TOK_ERROR token stands for. */
void fe_lex_report(DiagList *d, const Token *t);
const char *fe_tok_str(TokKind k);

/* frontend/parse.c */
/* The program, without the statements that had syntax errors; one
 * diagnostic per bad statement goes to diags. Never NULL. */
AstProgram *fe_parse(Arena *a, const Source *src, DiagList *diags);

/* frontend/ast_print.c */
const char *fe_op_str(AstOp op);
const char *fe_func_name(AstFunc f);
int fe_func_arity(AstFunc f);
const char *fe_reduce_name(AstReduce r);
/* One statement a line, every operator parenthesised: `(a + (b * c))`. */
void fe_ast_print(const AstProgram *p, FILE *out);
void fe_expr_print(const AstExpr *e, FILE *out);

#endif
