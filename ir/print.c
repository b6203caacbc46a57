/* Printing expressions and TE programs in the .tex syntax, so a dump can be
 * read back by the frontend. Parentheses are printed only where precedence
 * needs them. */
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

static int prec(ExprKind k)
{
    switch (k) {
    case EX_OR: return 1;
    case EX_AND: return 2;
    case EX_LT: case EX_LE: case EX_EQ: case EX_NE: return 3;
    case EX_ADD: case EX_SUB: return 4;
    case EX_MUL: case EX_DIV: case EX_MOD: return 5;
    case EX_NEG: case EX_NOT: return 6;
    default: return 7; /* calls, loads, literals */
    }
}

static void print_float(FILE *out, double v)
{
    /* the language has no literal for them: IEEE division spells them
     * (parenthesised as a division, so that they print as they read back) */
    if (isinf(v)) {
        fputs(v < 0 ? "-1.0 / 0.0" : "1.0 / 0.0", out);
        return;
    }
    if (isnan(v)) {
        fputs("0.0 / 0.0", out);
        return;
    }
    char buf[64];
    for (int digits = 6; digits <= 9; digits++) { /* shortest that reads back as the same f32 */
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if ((float)strtod(buf, NULL) == (float)v)
            break;
    }
    if (!strpbrk(buf, ".eE"))
        strcat(buf, ".0");
    fputs(buf, out);
}

static void print_prec(FILE *out, const Expr *e, int min_prec);

static void print_args(FILE *out, Expr *const *args, int n)
{
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", out);
        print_prec(out, args[i], 0);
    }
}

static void print_prec(FILE *out, const Expr *e, int min_prec)
{
    bool division = e->kind == EX_FLOAT && !isfinite(e->fval); /* inf, NaN: 1.0 / 0.0 */
    int p = division ? prec(EX_DIV) : prec(e->kind);
    bool paren = p < min_prec || (e->kind == EX_INT && e->ival < 0 && min_prec > 4) ||
                 (e->kind == EX_FLOAT && e->fval < 0 && !division && min_prec > 4);
    if (paren)
        fputc('(', out);
    switch (e->kind) {
    case EX_INT:
        if (e->type == DT_BOOL)
            fputs(e->ival ? "(0 == 0)" : "(0 != 0)", out);
        else
            fprintf(out, "%lld", (long long)e->ival);
        break;
    case EX_FLOAT: print_float(out, e->fval); break;
    case EX_VAR: fputs(e->var->name, out); break;
    case EX_LOAD:
        fprintf(out, "%s%s[", e->load.t->name, e->load.padded ? "?" : "");
        print_args(out, e->load.idx, e->load.n);
        fputc(']', out);
        break;
    case EX_REDUCE:
        fprintf(out, "%s[", ir_reduce_name(e->red.op));
        for (int i = 0; i < e->red.n; i++) {
            fprintf(out, "%s%s: ", i ? ", " : "", e->red.axes[i]->name);
            print_prec(out, e->red.axes[i]->extent, 0);
        }
        fputs("](", out);
        print_prec(out, e->red.body, 0);
        fputc(')', out);
        break;
    case EX_CHECK: /* the index as written */
        print_prec(out, e->op.a, p);
        break;
    case EX_CAST:
        fprintf(out, "%s(", ir_dtype_name(e->type));
        print_prec(out, e->op.a, 0);
        fputc(')', out);
        break;
    case EX_NEG: case EX_NOT:
        fputs(ir_op_name(e->kind), out);
        print_prec(out, e->op.a, p + 1);
        break;
    case EX_EQ: case EX_NE:
        if (e->op.a->type == DT_BOOL) { /* the language compares numbers: a xor b, spelled out */
            bool ne = e->kind == EX_NE;
            fputc('(', out);
            print_prec(out, e->op.a, 3);
            fputs(ne ? " && !" : " && ", out);
            print_prec(out, e->op.b, ne ? 7 : 3);
            fputs(" || !", out);
            print_prec(out, e->op.a, 7);
            fputs(ne ? " && " : " && !", out);
            print_prec(out, e->op.b, ne ? 3 : 7);
            fputc(')', out);
            break;
        }
        /* numbers: as any infix operator */
        /* fall through */
    default:
        if (p < 7) { /* infix; left-associative, so the right side binds tighter */
            print_prec(out, e->op.a, p == 3 ? p + 1 : p);
            fprintf(out, " %s ", ir_op_name(e->kind));
            print_prec(out, e->op.b, p + 1);
        } else {
            Expr *args[3] = {e->op.a, e->op.b, e->op.c};
            fprintf(out, "%s(", ir_op_name(e->kind));
            print_args(out, args, ir_op_arity(e->kind));
            fputc(')', out);
        }
        break;
    }
    if (paren)
        fputc(')', out);
}

void ir_print_expr(FILE *out, const Expr *e) { print_prec(out, e, 0); }

char *ir_expr_str(Arena *a, const Expr *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        ir_panic(__FILE__, __LINE__, "out of memory");
    ir_print_expr(f, e);
    fclose(f);
    char *r = ir_arena_strdup(a, buf);
    free(buf);
    return r;
}

static void print_te(FILE *out, const TeProgram *p, Expr *const *bodies, const bool *materialized,
                     const char *const *paths)
{
    fprintf(out, "# program %s\n", p->name);
    if (p->fp_contract_off)
        fputs("# fp-contract off\n", out);
    for (int i = 0; i < p->ndims; i++) {
        const Var *d = p->dims[i];
        fprintf(out, "dim %s in %lld..%lld", d->name, (long long)d->lo, (long long)d->hi);
        if (d->max == d->hi)
            fputs("  # accepts no value above the range", out);
        fputc('\n', out);
    }
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind == TK_INPUT && !t->body) {
            fprintf(out, "%s %s[", t->data ? "const" : "input", t->name);
            print_args(out, t->shape, t->rank);
            fprintf(out, "] %s", ir_dtype_name(t->dtype));
            const char *file = paths && paths[i] ? paths[i] : t->source;
            if (t->data && file)
                fprintf(out, " = \"%s\"", file);
            fputc('\n', out);
            continue;
        }
        if (materialized && !materialized[i] && t->kind != TK_INPUT) {
            fprintf(out, "# %s: inlined into its consumers\n", t->name);
            continue;
        }
        fprintf(out, "%s%s[", t->kind == TK_OUTPUT ? "output " : "", t->name);
        for (int j = 0; j < t->rank; j++) {
            fprintf(out, "%s%s: ", j ? ", " : "", t->axes[j]->name);
            print_prec(out, t->shape[j], 0);
        }
        fputs("]", out);
        if (t->dtype != DT_F32)
            fprintf(out, " %s", ir_dtype_name(t->dtype));
        fputs(" = ", out);
        print_prec(out, bodies && t->kind != TK_INPUT ? bodies[i] : t->body, 0);
        if (t->kind == TK_INPUT) /* computed from constants alone */
            fputs("  # a constant: computed when compiling", out);
        fputc('\n', out);
    }
}

void ir_print_te(FILE *out, const TeProgram *p) { print_te(out, p, NULL, NULL, NULL); }

void ir_print_te_consts(FILE *out, const TeProgram *p, const char *const *paths)
{
    print_te(out, p, NULL, NULL, paths);
}

void ir_print_te_inlined(FILE *out, const TeProgram *p, Expr *const *bodies,
                         const bool *materialized)
{
    print_te(out, p, bodies, materialized, NULL);
}
