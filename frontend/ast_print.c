/* frontend/ast_print.c: the names in the AST catalogs, and a printer.
 *
 * The printer is for tests and --dump: one statement a line, in the
 * source's own syntax, with every unary and binary operator in parentheses
 * so the tree's shape is visible (`a + b * c` prints `(a + (b * c))`).
 * Floats print as written, so the output is the same on every machine.
 */
#include "frontend/ast.h"

#include <inttypes.h>

static const char *const op_str[] = {
#define X(e, s, prec, tok) s,
    AST_OPS(X)
#undef X
};
static const char *const func_name[] = {
#define X(e, s, n) s,
    AST_FUNCS(X)
#undef X
};
static const int func_arity[] = {
#define X(e, s, n) n,
    AST_FUNCS(X)
#undef X
};
static const char *const reduce_name[] = {
#define X(e, s) s,
    AST_REDUCES(X)
#undef X
};

const char *fe_op_str(AstOp op)
{
    IR_ASSERT(op >= 0 && op < AOP_COUNT);
    return op_str[op];
}

const char *fe_func_name(AstFunc f)
{
    IR_ASSERT(f >= 0 && f < AF_COUNT);
    return func_name[f];
}

int fe_func_arity(AstFunc f)
{
    IR_ASSERT(f >= 0 && f < AF_COUNT);
    return func_arity[f];
}

const char *fe_reduce_name(AstReduce r)
{
    IR_ASSERT(r >= 0 && r < AR_COUNT);
    return reduce_name[r];
}

static void print_list(AstExpr *const *v, int n, FILE *out)
{
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", out);
        fe_expr_print(v[i], out);
    }
}

static void print_axes(const AstAxis *v, int n, FILE *out)
{
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s%s: ", i ? ", " : "", v[i].name);
        fe_expr_print(v[i].extent, out);
    }
    fputc(']', out);
}

void fe_expr_print(const AstExpr *e, FILE *out)
{
    switch (e->kind) {
    case AX_INT: fprintf(out, "%" PRId64, e->ival); break;
    case AX_FLOAT: fputs(e->flt.text, out); break;
    case AX_NAME: fputs(e->name, out); break;
    case AX_ACCESS:
        fprintf(out, "%s%s[", e->access.name, e->access.padded ? "?" : "");
        print_list(e->access.idx, e->access.n, out);
        fputc(']', out);
        break;
    case AX_CALL:
        fprintf(out, "%s(", fe_func_name(e->call.fn));
        print_list(e->call.args, e->call.n, out);
        fputc(')', out);
        break;
    case AX_REDUCE:
        fputs(fe_reduce_name(e->reduce.op), out);
        print_axes(e->reduce.axes, e->reduce.n, out);
        fputc('(', out);
        fe_expr_print(e->reduce.body, out);
        fputc(')', out);
        break;
    case AX_UNARY:
        fprintf(out, "(%s", fe_op_str(e->unary.op));
        fe_expr_print(e->unary.a, out);
        fputc(')', out);
        break;
    case AX_BINARY:
        fputc('(', out);
        fe_expr_print(e->binary.a, out);
        fprintf(out, " %s ", fe_op_str(e->binary.op));
        fe_expr_print(e->binary.b, out);
        fputc(')', out);
        break;
    }
}

void fe_ast_print(const AstProgram *p, FILE *out)
{
    for (int i = 0; i < p->n; i++) {
        const AstStmt *s = p->stmts[i];
        switch (s->kind) {
        case AST_DIM:
            fprintf(out, "dim %s in %" PRId64 "..%" PRId64 "\n", s->name, s->dim.lo, s->dim.hi);
            break;
        case AST_INPUT:
            fprintf(out, "%s %s[", s->input.file ? "const" : "input", s->name);
            print_list(s->input.extents, s->input.n, out);
            fprintf(out, "] %s", s->input.type);
            if (s->input.file)
                fprintf(out, " = \"%s\"", s->input.file);
            fputc('\n', out);
            break;
        case AST_DEF:
        case AST_OUTPUT:
            fprintf(out, "%s%s", s->kind == AST_OUTPUT ? "output " : "", s->name);
            print_axes(s->def.axes, s->def.n, out);
            if (s->def.type)
                fprintf(out, " %s", s->def.type);
            fputs(" = ", out);
            fe_expr_print(s->def.body, out);
            fputc('\n', out);
            break;
        }
    }
}
