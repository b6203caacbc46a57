/* The CPU executor: the object `dcc --emit=obj` would write for this
 * program (codegen/host.c: the table, the kernels, the entry points),
 * with the kernels built for this CPU's instruction set, JIT-compiled, and
 * each run one call of its NAME_run_packed. So `dcc run`, the e2e tests and
 * the tuner's measurements go through the dispatch, checks and launches
 * that users of the object get. */
#include "dietcode/exec.h"

#include <stdlib.h>
#include <string.h>

struct ExCpu {
    CgJitCode *code; /* NULL: an entry of code loaded elsewhere */
    ExRunPacked run;
    int nparams;
    int *params; /* tensor ids in the entry's order */
};

ExCpu *ex_cpu_entry(const TeProgram *te, ExRunPacked run)
{
    if (!te || !run)
        return NULL;
    ExCpu *x = calloc(1, sizeof *x);
    if (!x)
        ir_panic(__FILE__, __LINE__, "out of memory");
    x->run = run;
    x->params = ex_entry_params(te, &x->nparams);
    return x;
}

ExCpu *ex_cpu_compile(const LoopProgram *lp, char *err, size_t errlen)
{
    return ex_cpu_compile_isa(lp, cg_target_cpu(), err, errlen);
}

ExCpu *ex_cpu_compile_isa(const LoopProgram *lp, const CgTarget *isa, char *err, size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen) || !IR_ARG_OK(isa, err, errlen))
        return NULL;
    CgHostOpts o = {.nisas = 1, .isas = &isa, .jit = true};
    void *entry = NULL;
    CgJitCode *code = ex_jit_host(lp, o, (const char *[]){"_run_packed"}, &entry, 1, err, errlen);
    if (!code)
        return NULL;
    ExCpu *x = ex_cpu_entry(lp->te, (ExRunPacked)(uintptr_t)entry);
    x->code = code;
    return x;
}

int ex_cpu_run(ExCpu *x, const int64_t *dims, float *const *tensors, void *workspace, char *err,
               size_t errlen)
{
    if (!IR_ARG_OK(x, err, errlen) || !IR_ARG_OK(tensors, err, errlen))
        return -1;
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
