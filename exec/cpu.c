/* The CPU executor: the object `dcc --emit=obj` would write for this
 * program (codegen/host.c: the table, the kernels, the entry points),
 * with the kernels built for this CPU's instruction set, JIT-compiled, and
 * each run one call of its NAME_run_packed. So `dcc run`, the e2e tests and
 * the tuner's measurements go through the dispatch, checks and launches
 * that users of the object get. */
#include "dietcode/exec.h"

#include <stdlib.h>
#include <string.h>

typedef int (*RunPacked)(const int64_t *dims, void *const *tensors, void *workspace);

struct ExCpu {
    CgJitCode *code;
    RunPacked run;
    int nparams;
    int *params; /* tensor ids in the entry's order */
};

/* The entry's tensor arguments: inputs, then outputs (tensor ids). */
static int *entry_params(const TeProgram *te, int *n)
{
    int *p = calloc((size_t)te->ntensors + 1, sizeof *p);
    if (!p)
        ir_panic(__FILE__, __LINE__, "out of memory");
    *n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < te->ntensors; i++)
            if (te->tensors[i]->kind == (pass ? TK_OUTPUT : TK_INPUT))
                p[(*n)++] = i;
    return p;
}

ExCpu *ex_cpu_compile(const LoopProgram *lp, char *err, size_t errlen)
{
    ex_jit_runtime();
    char *prefix = cg_jit_prefix();
    char *sym = cg_symbol(prefix, lp->te->name);
    const CgTarget *isa = cg_target_cpu();
    CgHostOpts o = {.symbol = sym, .nisas = 1, .isas = &isa};
    CgModule *m = cg_host_module(lp, &o, err, errlen);
    ExCpu *x = calloc(1, sizeof *x);
    if (!x)
        ir_panic(__FILE__, __LINE__, "out of memory");
    x->code = m ? cg_jit_add(m, err, errlen) : NULL;
    char *entry = cg_symbol(sym, "_run_packed");
    if (x->code)
        x->run = (RunPacked)(uintptr_t)cg_jit_lookup(x->code, entry, err, errlen);
    free(entry);
    free(sym);
    free(prefix);
    if (!x->run) {
        ex_cpu_destroy(x);
        return NULL;
    }
    x->params = entry_params(lp->te, &x->nparams);
    return x;
}

int ex_cpu_run(ExCpu *x, const int64_t *dims, float *const *tensors, void *workspace, char *err,
               size_t errlen)
{
    void *args[x->nparams + 1];
    for (int i = 0; i < x->nparams; i++)
        args[i] = tensors[x->params[i]];
    if (x->run(dims, args, workspace) != DCRT_OK) {
        snprintf(err, errlen, "%s", dcrt_last_error());
        return -1;
    }
    return 0;
}

void ex_cpu_destroy(ExCpu *x)
{
    if (!x)
        return;
    cg_jit_release(x->code);
    free(x->params);
    free(x);
}
