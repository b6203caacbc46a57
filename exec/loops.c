/* The loop-IR interpreter as an executor: the plan's launches, each
 * kernel's statements run by ir/interp_loops.c over buffers bound as a
 * compiled object binds them (the workspace from runtime/plan.c's layout).
 * Slow; for testing the passes apart from code generation. */
#include "dietcode/exec.h"

#include <stdlib.h>

int ex_loops_run(const LoopProgram *lp, const int64_t *dims, float *const *tensors, char *err,
                 size_t errlen)
{
    ExProgram *x = ex_program_new(lp);
    const DcrtProgram *p = ex_program_table(x);
    DcrtPlan *pl = ex_plan(x, dims, err, errlen);
    void **args = ex_params(p, (void *const *)tensors);
    char *ws = pl ? aligned_alloc(DCRT_ALIGN, (size_t)pl->workspace_bytes + DCRT_ALIGN) : NULL;
    float **bufs = ws ? dcrt_bind_buffers(p, pl, args, ws) : NULL;
    int rc = bufs ? 0 : -1;
    if (pl && !bufs)
        snprintf(err, errlen, "out of memory for the workspace");
    if (rc == 0 && dcrt_check_params(p, (const void *const *)args) != DCRT_OK) {
        snprintf(err, errlen, "%s", dcrt_last_error());
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < pl->nlaunches; i++)
        rc = ir_run_kernel_loops(lp, lp->kernels[pl->launches[i].kernel], dims, bufs, err, errlen);
    free(bufs);
    free(ws);
    free(args);
    dcrt_plan_free(pl);
    ex_program_free(x);
    return rc;
}
