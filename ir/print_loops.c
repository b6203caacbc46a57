/* Printing loop IR (`--emit=loops`, `--dump-after`): one statement a line,
 * nesting by indentation, expressions in the .tex syntax. */
#include "dietcode/ir.h"

static void pad(FILE *out, int n)
{
    for (int i = 0; i < n; i++)
        fputs("  ", out);
}

static void print_shape(FILE *out, const Tensor *t)
{
    fputc('[', out);
    for (int i = 0; i < t->rank; i++) {
        if (i)
            fputs(", ", out);
        ir_print_expr(out, t->shape[i]);
    }
    fputc(']', out);
}

void ir_print_stmt(FILE *out, const Stmt *s, int ind)
{
    switch (s->kind) {
    case ST_FOR:
        pad(out, ind);
        fprintf(out, "for %s in 0..", s->loop.var->name);
        ir_print_expr(out, s->loop.var->extent);
        fprintf(out, " %s:\n", ir_for_kind_name(s->loop.fk));
        ir_print_stmt(out, s->loop.body, ind + 1);
        break;
    case ST_LET:
        pad(out, ind);
        fprintf(out, "let %s = ", s->let.var->name);
        ir_print_expr(out, s->let.value);
        fputs("  # < ", out);
        ir_print_expr(out, s->let.var->extent);
        fputc('\n', out);
        ir_print_stmt(out, s->let.body, ind);
        break;
    case ST_IF:
        pad(out, ind);
        fputs("if ", out);
        ir_print_expr(out, s->ifs.cond);
        fputs(":\n", out);
        ir_print_stmt(out, s->ifs.then, ind + 1);
        if (s->ifs.els) {
            pad(out, ind);
            fputs("else:\n", out);
            ir_print_stmt(out, s->ifs.els, ind + 1);
        }
        break;
    case ST_STORE:
        pad(out, ind);
        fprintf(out, "%s[", s->store.buf->name);
        for (int i = 0; i < s->store.n; i++) {
            if (i)
                fputs(", ", out);
            ir_print_expr(out, s->store.idx[i]);
        }
        fputs(s->store.async ? "] = async " : s->store.atomic ? "] += atomic " : "] = ", out);
        ir_print_expr(out, s->store.value);
        fputc('\n', out);
        break;
    case ST_ALLOC:
        pad(out, ind);
        fprintf(out, "alloc %s %s", s->alloc.buf->scope == MS_SHARED ? "shared" : "local",
                s->alloc.buf->name);
        print_shape(out, s->alloc.buf);
        fputc('\n', out);
        ir_print_stmt(out, s->alloc.body, ind);
        break;
    case ST_BARRIER:
        pad(out, ind);
        fputs(s->barrier.wait_async ? "barrier after async copies\n" : "barrier\n", out);
        break;
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            ir_print_stmt(out, s->seq.s[i], ind);
        break;
    }
}

void ir_print_microkernel(FILE *out, const MicroKernel *mk, int nspatial)
{
    fputs("threads [", out);
    for (int i = 0; i < nspatial; i++)
        fprintf(out, "%s%d", i ? ", " : "", mk->threads[i]);
    fputs("] tile [", out);
    for (int i = 0; i < nspatial; i++)
        fprintf(out, "%s%d", i ? ", " : "", mk->tile[i]);
    fprintf(out, "] rchunk %d unroll %d vec %d%s%s", mk->rchunk, mk->unroll, mk->vec,
            mk->vaxis == MK_VEC_REDUCE ? " along reduction" : "", mk->stage ? " staged" : "");
    if (mk->split > 1)
        fprintf(out, " split %d%s", mk->split, mk->atomic ? " atomic" : "");
    if (mk->rthreads > 1)
        fprintf(out, " rthreads %d", mk->rthreads);
    if (mk->strided)
        fputs(" strided", out);
    if (mk->pipeline)
        fputs(" pipelined", out);
    if (mk->raster > 1)
        fprintf(out, " raster %d", mk->raster);
    if (mk->pack)
        fputs(" packed", out);
}

void ir_print_kernel(FILE *out, const Kernel *k)
{
    if (k->domain != k->out) {
        fprintf(out, "kernel %s  # adds into %s atomically over %s", k->name, k->out->name,
                k->domain->name);
        print_shape(out, k->domain);
    } else {
        fprintf(out, "kernel %s  # computes %s", k->name, k->out->name);
    }
    fprintf(out, ", %d thread%s per block\n", k->nthreads, k->nthreads == 1 ? "" : "s");
    fputs("  # micro-kernel: ", out);
    ir_print_microkernel(out, &k->mk, k->domain->rank);
    fputc('\n', out);
    ir_print_stmt(out, k->body, 1);
}

/* The subtree of node i as nested if/else comments. */
static void print_dispatch(FILE *out, const TeProgram *te, const Dispatch *d, int i, int ind)
{
    const DispatchNode *n = &d->nodes[i];
    fputs("#", out);
    pad(out, ind);
    if (n->variant >= 0) {
        fprintf(out, "variant %d\n", n->variant);
        return;
    }
    fprintf(out, "if %s <= %lld:\n", te->dims[n->dim]->name, (long long)n->le);
    print_dispatch(out, te, d, n->then_node, ind + 1);
    fputs("#", out);
    pad(out, ind);
    fputs("else:\n", out);
    print_dispatch(out, te, d, n->else_node, ind + 1);
}

/* A stage with several variants or a dispatch tree says so before its
 * kernels, and each of them which variant it is; a variant of several
 * kernels names its scratch buffers; a plain stage prints nothing, so
 * dumps without tuning read as they always did. */
void ir_print_loops(FILE *out, const LoopProgram *lp)
{
    for (int i = 0; i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        const Stage *st = k->stage < lp->nstages ? &lp->stages[k->stage] : NULL;
        const Variant *va = st ? &st->variants[k->variant] : NULL;
        bool many = st && (st->nvariants > 1 || (st->dispatch && st->dispatch->nnodes > 0));
        if (i)
            fputc('\n', out);
        if (many && k->variant == 0 && va->first == i) {
            fprintf(out, "# stage %d computes %s: %d variants, dispatch:\n", k->stage,
                     st->out->name, st->nvariants);
            if (st->dispatch && st->dispatch->nnodes > 0)
                print_dispatch(out, lp->te, st->dispatch, 0, 1);
            else
                fputs("#  variant 0\n", out);
        }
        if (many)
            fprintf(out, "# stage %d variant %d\n", k->stage, k->variant);
        if (va && va->nkernels > 1) {
            fprintf(out, "# launch %d of %d of stage %s", i - va->first + 1, va->nkernels,
                    st->out->name);
            if (va->first == i && va->nscratch > 0) {
                fputs("; scratch", out);
                for (int j = 0; j < va->nscratch; j++) {
                    fprintf(out, " %s", va->scratch[j]->name);
                    print_shape(out, va->scratch[j]);
                }
            }
            fputc('\n', out);
        }
        ir_print_kernel(out, k);
    }
}
