/* frontend/parse.c: tokens to the AST, by recursive descent.
 *
 * Statements. A statement ends at a newline or ';'. A newline does not end
 * it inside ( ) or [ ], nor where an operand is expected (after '=', an
 * operator, ',' or ':'), so a long expression may be broken after an
 * operator but not before one. One exception keeps errors local: a newline
 * followed by `dim`, `input`, `output` or the end of the file always ends
 * the statement, since none of those can go on an expression. An unclosed
 * bracket is then reported on its own line and the next statement parses.
 *
 * Errors. fail() adds one diagnostic and longjmps back to the statement
 * loop, which skips the rest of the bad statement (to a newline, or a ';'
 * outside brackets) and goes on with the next: one message per bad
 * statement and no cascade. The nodes built for it stay in the arena,
 * unused. Recursion is bounded: more than FE_MAX_DEPTH nested operands
 * (parentheses, unary operators, arguments, indices, reduction bodies) is
 * an error, "nested too deeply". Without parentheses, right operands nest
 * only as deep as there are precedence levels. A left-leaning chain
 * `a + b + c + ...` is a loop here, not nesting, but it makes a tree as
 * high as it is long, and later passes recurse over trees, so a tree
 * higher than FE_MAX_HEIGHT is an error of its own, "too long".
 *
 * Expressions go by precedence climbing over the AST_OPS table.
 * Comparisons do not chain, so `0 <= i < N` is an error rather than the
 * surprising `(0 <= i) < N`.
 */
#include "frontend/ast.h"

#include <setjmp.h>
#include <string.h>

typedef struct Parser {
    Arena *arena;
    DiagList *diags;
    Lexer lx;   /* just after tok */
    Token tok;  /* the current token */
    TokKind prev; /* the kind of the token before tok */
    int depth;  /* ( and [ open before tok */
    int nest;   /* unary() calls in progress: the nesting */
    int height; /* of the expression parsed last */
    jmp_buf fail;
} Parser;

static const int op_prec[] = {
#define X(e, s, prec, tok) prec,
    AST_OPS(X)
#undef X
};
static const TokKind op_tok[] = {
#define X(e, s, prec, tok) tok,
    AST_OPS(X)
#undef X
};
enum { PREC_CMP = 3 };

static AstExpr *expr(Parser *p);

/* Room for element n of an arena array that holds n: the capacity is the
 * next power of two, so growing copies O(n) in all. */
static void *grow(Arena *a, void *v, int n, size_t size)
{
    if (n & (n - 1))
        return v;
    void *w = ir_arena_alloc(a, size * (size_t)(n ? 2 * n : 1));
    if (n)
        memcpy(w, v, size * (size_t)n);
    return w;
}

static char *vfmt(Arena *a, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = ir_arena_alloc(a, (size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

__attribute__((format(printf, 3, 4))) _Noreturn static void
fail(Parser *p, SrcLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_vdiag(p->diags, loc, fmt, ap);
    va_end(ap);
    longjmp(p->fail, 1);
}

/* Fails with "expected WHAT, found TOKEN", or with the lexer's message if
 * the current token is a bad one. */
__attribute__((format(printf, 2, 3))) _Noreturn static void
expected(Parser *p, const char *fmt, ...)
{
    const Token *t = &p->tok;
    if (t->kind == TOK_ERROR) {
        fe_lex_report(p->diags, t);
        longjmp(p->fail, 1);
    }
    va_list ap;
    va_start(ap, fmt);
    const char *what = vfmt(p->arena, fmt, ap);
    va_end(ap);
    if (t->kind == TOK_EOF)
        fail(p, t->loc, "expected %s, found end of file", what);
    if (t->kind == TOK_NEWLINE)
        fail(p, t->loc, "expected %s, found 'newline'", what);
    int n = t->len > 40 ? 40 : t->len;
    fail(p, t->loc, "expected %s, found '%.*s%s'", what, n, t->text, t->len > n ? "..." : "");
}

/* Tokens that, after a newline, end the statement whatever is open. */
static bool starts_statement(TokKind k)
{
    return k == TOK_DIM || k == TOK_INPUT || k == TOK_OUTPUT || k == TOK_CONST || k == TOK_EOF;
}

/* Drops the current newline if the statement goes on past it. */
static void skip_newline(Parser *p)
{
    if (p->tok.kind != TOK_NEWLINE)
        return;
    Lexer ahead = p->lx;
    Token t = fe_lex_next(&ahead);
    if (starts_statement(t.kind))
        return;
    p->lx = ahead;
    p->tok = t;
}

static void advance(Parser *p)
{
    TokKind k = p->tok.kind;
    if (k == TOK_LPAREN || k == TOK_LBRACK)
        p->depth++;
    else if ((k == TOK_RPAREN || k == TOK_RBRACK) && p->depth > 0)
        p->depth--;
    p->prev = k;
    p->tok = fe_lex_next(&p->lx);
    if (p->depth > 0)
        skip_newline(p);
}

/* Consumes a k token, or fails with "expected 'K' CONTEXT, found ...". */
__attribute__((format(printf, 3, 4))) static void
expect(Parser *p, TokKind k, const char *context, ...)
{
    if (p->tok.kind == k) {
        advance(p);
        return;
    }
    va_list ap;
    va_start(ap, context);
    const char *ctx = vfmt(p->arena, context, ap);
    va_end(ap);
    expected(p, "'%s' %s", fe_tok_str(k), ctx);
}

/* Consumes an identifier and returns a copy; loc may be NULL. */
static const char *ident(Parser *p, SrcLoc *loc, const char *what)
{
    if (p->tok.kind != TOK_IDENT)
        expected(p, "%s", what);
    if (loc)
        *loc = p->tok.loc;
    const char *s = ir_arena_strndup(p->arena, p->tok.text, (size_t)p->tok.len);
    advance(p);
    return s;
}

/* An integer literal, optionally negated (so sema can say why a negative
 * dim bound is wrong rather than the parser saying it is not a number). */
static int64_t integer(Parser *p, SrcLoc *loc, const char *what)
{
    bool neg = p->tok.kind == TOK_MINUS;
    *loc = p->tok.loc;
    if (neg)
        advance(p);
    if (p->tok.kind != TOK_INT)
        expected(p, "%s", what);
    int64_t v = p->tok.ival;
    advance(p);
    return neg ? -v : v;
}

/* ---- expressions ---- */

static AstExpr *node(Parser *p, AstExprKind k, SrcLoc loc)
{
    AstExpr *e = IR_NEW(p->arena, AstExpr);
    e->kind = k;
    e->loc = loc;
    return e;
}

/* Completes e, h nodes high; loc is where "too long" is reported. */
static AstExpr *done(Parser *p, AstExpr *e, int h, SrcLoc loc)
{
    if (h > FE_MAX_HEIGHT)
        fail(p, loc, "expression too long: its tree is more than %d levels high; "
                     "split a long chain with an intermediate tensor", FE_MAX_HEIGHT);
    p->height = h;
    return e;
}

/* The AstOp of a token, as a unary or as a binary operator; -1 if none. */
static int find_op(TokKind k, bool unary)
{
    for (int op = 0; op < AOP_COUNT; op++)
        if (op_tok[op] == k && (op_prec[op] == 0) == unary)
            return op;
    return -1;
}

static int find_func(const char *name)
{
    for (int f = 0; f < AF_COUNT; f++)
        if (!strcmp(fe_func_name(f), name))
            return f;
    return -1;
}

static int find_reduce(const char *name, size_t len)
{
    for (int r = 0; r < AR_COUNT; r++) {
        const char *s = fe_reduce_name(r);
        if (strlen(s) == len && !memcmp(s, name, len))
            return r;
    }
    return -1;
}

/* Expressions separated by ',' (no trailing one) up to `close`, which is
 * left current; p->height is the highest of them. */
static AstExpr **list(Parser *p, TokKind close, int *n)
{
    AstExpr **v = NULL;
    int h = 0;
    *n = 0;
    for (bool more = p->tok.kind != close; more;) {
        AstExpr *e = expr(p);
        h = p->height > h ? p->height : h;
        v = grow(p->arena, v, *n, sizeof *v);
        v[(*n)++] = e;
        if ((more = p->tok.kind == TOK_COMMA))
            advance(p);
    }
    p->height = h;
    return v;
}

/* IDX ':' EXTENT separated by ',' up to ']', which is left current. */
static AstAxis *axes(Parser *p, int *n)
{
    AstAxis *v = NULL;
    int h = 0;
    *n = 0;
    for (bool more = p->tok.kind != TOK_RBRACK; more;) {
        v = grow(p->arena, v, *n, sizeof *v);
        AstAxis *ax = &v[(*n)++];
        ax->name = ident(p, &ax->loc, "axis name");
        expect(p, TOK_COLON, "after axis name '%s'", ax->name);
        ax->extent = expr(p);
        h = p->height > h ? p->height : h;
        if ((more = p->tok.kind == TOK_COMMA))
            advance(p);
    }
    p->height = h;
    return v;
}

/* sum/max/min/prod followed by '[' IDX ':' starts a reduction, and so does
 * one followed by '[' ']' (no tensor can have these names, so `sum[](...)`
 * is an empty reduction, which reduction() refuses); anything else with
 * these names is a call (`max(a, b)`) or a tensor. */
static bool at_reduction(Parser *p)
{
    if (p->tok.kind != TOK_IDENT || find_reduce(p->tok.text, (size_t)p->tok.len) < 0)
        return false;
    Lexer ahead = p->lx;
    Token t = fe_lex_next(&ahead);
    if (t.kind != TOK_LBRACK)
        return false;
    do
        t = fe_lex_next(&ahead);
    while (t.kind == TOK_NEWLINE);
    if (t.kind == TOK_RBRACK)
        return true;
    if (t.kind != TOK_IDENT)
        return false;
    do
        t = fe_lex_next(&ahead);
    while (t.kind == TOK_NEWLINE);
    return t.kind == TOK_COLON;
}

static AstExpr *reduction(Parser *p)
{
    AstExpr *e = node(p, AX_REDUCE, p->tok.loc);
    e->reduce.op = find_reduce(p->tok.text, (size_t)p->tok.len);
    advance(p);
    advance(p); /* '[' */
    if (p->tok.kind == TOK_RBRACK) {
        const char *name = fe_reduce_name(e->reduce.op);
        fail(p, p->tok.loc, "a reduction needs at least one axis: %s[k: N](...)", name);
    }
    e->reduce.axes = axes(p, &e->reduce.n);
    int h = p->height;
    expect(p, TOK_RBRACK, "after reduction axes");
    expect(p, TOK_LPAREN, "after reduction axes");
    e->reduce.body = expr(p);
    h = p->height > h ? p->height : h;
    expect(p, TOK_RPAREN, "after reduction body");
    return done(p, e, h + 1, e->loc);
}

static AstExpr *call(Parser *p, const char *name, SrcLoc loc)
{
    int f = find_func(name);
    if (f < 0) {
        if (find_reduce(name, strlen(name)) >= 0)
            fail(p, loc, "'%s' is a reduction: write %s[k: N](...)", name, name);
        fail(p, loc, "unknown function '%s'", name);
    }
    AstExpr *e = node(p, AX_CALL, loc);
    e->call.fn = f;
    advance(p); /* '(' */
    e->call.args = list(p, TOK_RPAREN, &e->call.n);
    int h = p->height;
    expect(p, TOK_RPAREN, "after arguments of '%s'", name);
    int want = fe_func_arity(f);
    if (e->call.n != want)
        fail(p, loc, "'%s' takes %d argument%s, got %d", name, want, want == 1 ? "" : "s",
             e->call.n);
    return done(p, e, h + 1, loc);
}

/* A primary that starts with a name: reduction, call, access or name. */
static AstExpr *named(Parser *p)
{
    if (at_reduction(p))
        return reduction(p);
    SrcLoc loc = p->tok.loc;
    const char *name = ident(p, NULL, "a name");
    if (p->tok.kind == TOK_LPAREN)
        return call(p, name, loc);
    bool padded = p->tok.kind == TOK_QUEST;
    if (padded) {
        advance(p);
        if (p->tok.kind != TOK_LBRACK)
            expected(p, "'[' after '%s?'", name);
    }
    if (p->tok.kind != TOK_LBRACK) {
        AstExpr *e = node(p, AX_NAME, loc);
        e->name = name;
        return done(p, e, 1, loc);
    }
    AstExpr *e = node(p, AX_ACCESS, loc);
    e->access.name = name;
    e->access.padded = padded;
    advance(p); /* '[' */
    e->access.idx = list(p, TOK_RBRACK, &e->access.n);
    int h = p->height;
    expect(p, TOK_RBRACK, "after indices");
    return done(p, e, h + 1, loc);
}

static AstExpr *primary(Parser *p)
{
    Token t = p->tok;
    AstExpr *e;
    switch (t.kind) {
    case TOK_INT:
        e = node(p, AX_INT, t.loc);
        e->ival = t.ival;
        advance(p);
        return done(p, e, 1, t.loc);
    case TOK_FLOAT:
        e = node(p, AX_FLOAT, t.loc);
        e->flt.val = t.fval;
        e->flt.text = t.text;
        advance(p);
        return done(p, e, 1, t.loc);
    case TOK_LPAREN:
        advance(p);
        e = expr(p);
        expect(p, TOK_RPAREN, "after expression");
        return e;
    case TOK_IDENT:
        return named(p);
    default:
        expected(p, "an expression");
    }
}

static AstExpr *unary(Parser *p)
{
    skip_newline(p); /* an operand is expected: the statement goes on */
    if (++p->nest > FE_MAX_DEPTH)
        fail(p, p->tok.loc, "expression nested too deeply");
    AstExpr *e;
    int op = find_op(p->tok.kind, true);
    if (op >= 0) {
        e = node(p, AX_UNARY, p->tok.loc);
        e->unary.op = op;
        advance(p);
        e->unary.a = unary(p);
        done(p, e, p->height + 1, e->loc);
    } else {
        e = primary(p);
    }
    p->nest--;
    return e;
}

/* Operators binding at least min, by precedence climbing. */
static AstExpr *binary(Parser *p, int min)
{
    AstExpr *lhs = unary(p);
    bool compared = false; /* lhs is a comparison made in this loop */
    for (;;) {
        int op = find_op(p->tok.kind, false);
        if (op < 0 || op_prec[op] < min)
            return lhs;
        SrcLoc oploc = p->tok.loc;
        if (compared && op_prec[op] == PREC_CMP)
            fail(p, oploc, "comparisons do not chain; join them with '&&'");
        int h = p->height;
        advance(p);
        AstExpr *e = node(p, AX_BINARY, lhs->loc);
        e->binary.op = op;
        e->binary.oploc = oploc;
        e->binary.a = lhs;
        e->binary.b = binary(p, op_prec[op] + 1);
        lhs = done(p, e, (h > p->height ? h : p->height) + 1, oploc);
        compared = op_prec[op] == PREC_CMP;
    }
}

static AstExpr *expr(Parser *p)
{
    return binary(p, 1);
}

/* ---- statements ---- */

static void dim_stmt(Parser *p, AstStmt *s)
{
    s->kind = AST_DIM;
    s->name = ident(p, &s->name_loc, "dim name after 'dim'");
    expect(p, TOK_IN, "after dim name '%s'", s->name);
    s->dim.lo = integer(p, &s->dim.lo_loc, "integer lower bound after 'in'");
    expect(p, TOK_DOTDOT, "after lower bound");
    s->dim.hi = integer(p, &s->dim.hi_loc, "integer upper bound after '..'");
}

/* `NAME[EXTENT, ...] TYPE` after input or const; what: the name's role */
static void input_stmt(Parser *p, AstStmt *s, const char *what)
{
    s->kind = AST_INPUT;
    s->name = ident(p, &s->name_loc, what);
    expect(p, TOK_LBRACK, "after tensor name '%s'", s->name);
    s->input.extents = list(p, TOK_RBRACK, &s->input.n);
    expect(p, TOK_RBRACK, "after extents");
    s->input.type = ident(p, &s->input.type_loc, "element type after ']'");
}

/* `const NAME[EXTENT, ...] TYPE = "FILE"` */
static void const_stmt(Parser *p, AstStmt *s)
{
    input_stmt(p, s, "tensor name after 'const'");
    expect(p, TOK_ASSIGN, "after the element type of constant '%s'", s->name);
    if (p->tok.kind != TOK_STRING)
        expected(p, "the file of its values, in quotes (\"w.npy\")");
    s->input.file = p->tok.text;
    s->input.file_loc = p->tok.loc;
    advance(p);
}

static void def_stmt(Parser *p, AstStmt *s, AstStmtKind kind)
{
    s->kind = kind;
    /* only an AST_OUTPUT can lack the name: an AST_DEF starts with it */
    s->name = ident(p, &s->name_loc, "tensor name after 'output'");
    expect(p, TOK_LBRACK, "after tensor name '%s'", s->name);
    s->def.axes = axes(p, &s->def.n);
    expect(p, TOK_RBRACK, "after axes");
    /* an element type: a name followed by '=' */
    Lexer ahead = p->lx;
    if (p->tok.kind == TOK_IDENT && fe_lex_next(&ahead).kind == TOK_ASSIGN)
        s->def.type = ident(p, &s->def.type_loc, "element type after ']'");
    expect(p, TOK_ASSIGN, s->def.type ? "after the element type" : "after ']'");
    s->def.body = expr(p);
}

static AstStmt *statement(Parser *p)
{
    AstStmt *s = IR_NEW(p->arena, AstStmt);
    s->loc = p->tok.loc;
    switch (p->tok.kind) {
    case TOK_DIM: advance(p); dim_stmt(p, s); break;
    case TOK_INPUT: advance(p); input_stmt(p, s, "tensor name after 'input'"); break;
    case TOK_CONST: advance(p); const_stmt(p, s); break;
    case TOK_OUTPUT: advance(p); def_stmt(p, s, AST_OUTPUT); break;
    case TOK_IDENT: def_stmt(p, s, AST_DEF); break;
    default: expected(p, "a statement");
    }
    TokKind k = p->tok.kind;
    if (k != TOK_NEWLINE && k != TOK_SEMI && k != TOK_EOF)
        expected(p, "end of statement");
    return s;
}

/* Parses one statement into prog; false after a syntax error. The only
 * caller of setjmp, and it changes no local variable after it. */
static bool try_statement(Parser *p, AstProgram *prog)
{
    if (setjmp(p->fail))
        return false;
    AstStmt *s = statement(p);
    prog->stmts = grow(p->arena, prog->stmts, prog->n, sizeof *prog->stmts);
    prog->stmts[prog->n++] = s;
    return true;
}

/* Whether a statement goes on past a newline after a k token: an operand
 * must follow it. */
static bool wants_operand(TokKind k)
{
    return find_op(k, false) >= 0 || find_op(k, true) >= 0 || k == TOK_ASSIGN ||
           k == TOK_COMMA || k == TOK_COLON;
}

/* Skips the rest of a bad statement: to a newline that ends it, or to a
 * ';' outside brackets. Brackets opened before the error count, so the ';'
 * in `X[i; j]` is skipped with the rest, and so does a line that ends with
 * an operator, so a long expression broken over lines is one statement. */
static void recover(Parser *p)
{
    for (TokKind k; (k = p->tok.kind) != TOK_EOF;) {
        if (k == TOK_SEMI && p->depth == 0)
            break;
        if (k == TOK_NEWLINE) {
            if (!wants_operand(p->prev))
                break;
            skip_newline(p);
            if (p->tok.kind == TOK_NEWLINE)
                break;
            continue;
        }
        advance(p);
    }
}

AstProgram *fe_parse(Arena *a, const Source *src, DiagList *diags)
{
    Parser p = {.arena = a, .diags = diags};
    AstProgram *prog = IR_NEW(a, AstProgram);
    fe_lex_init(&p.lx, src, a);
    p.tok = fe_lex_next(&p.lx);
    for (;;) {
        p.depth = p.nest = 0;
        while (p.tok.kind == TOK_NEWLINE || p.tok.kind == TOK_SEMI)
            advance(&p);
        if (p.tok.kind == TOK_EOF)
            return prog;
        if (!try_statement(&p, prog))
            recover(&p);
    }
}
