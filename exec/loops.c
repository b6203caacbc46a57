/* The loop-IR interpreter as an executor: the plan's launches, each
 * kernel's statements run by ir/interp_loops.c over buffers bound as a
 * compiled object binds them (the workspace from runtime/plan.c's layout).
 * Slow; for testing the passes apart from code generation. */
#include "dietcode/exec.h"

#include <stdlib.h>

int ex_loops_run(const LoopProgram *lp, const int64_t *dims, float *const *tensors, char *err,
                 size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen))
        return -1;
    ExProgram *x = ex_program_new(lp);
    ExCall c;
    int rc = ex_call_begin(x, dims, tensors, &c, err, errlen);
    for (int i = 0; rc == 0 && i < c.plan->nlaunches; i++)
        rc = ir_run_kernel_loops(lp, lp->kernels[c.plan->launches[i].kernel], dims, c.bufs, err, errlen);
    ex_call_end(&c);
    ex_program_free(x);
    return rc;
}
