/* The CUDA executor: the GPU object of a program (codegen/host.c with the
 * program's PTX embedded), JIT-compiled for the host and each run one call
 * of its NAME_launch_packed, which plans the call and launches through
 * libdcrt and the driver (runtime/cuda.c). Only running needs a GPU. */
#include "dietcode/exec.h"

#include <stdlib.h>
#include <string.h>

typedef int (*LaunchPacked)(const int64_t *dims, const uint64_t *tensors, uint64_t workspace,
                            void *stream);

struct ExCuda {
    CgJitCode *code;
    LaunchPacked launch;
    void (*release)(void); /* NAME_release: the module, its constants and graphs */
    int nparams;
    int *params; /* tensor ids in the entry's order */
};

ExCuda *ex_cuda_compile(const LoopProgram *lp, const char *arch, bool libdevice, char *err,
                        size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen))
        return NULL;
    char *ptx = cg_emit_ptx(lp, arch, libdevice, err, errlen);
    if (!ptx)
        return NULL;
    CgHostOpts o = {.ptx = ptx, .jit = true};
    void *entry[2] = {NULL, NULL};
    CgJitCode *code =
        ex_jit_host(lp, o, (const char *[]){"_launch_packed", "_release"}, entry, 2, err, errlen);
    free(ptx);
    if (!code)
        return NULL;
    ExCuda *x = calloc(1, sizeof *x);
    if (!x)
        ir_panic(__FILE__, __LINE__, "out of memory");
    x->code = code;
    x->launch = (LaunchPacked)(uintptr_t)entry[0];
    x->release = (void (*)(void))(uintptr_t)entry[1];
    x->params = ex_entry_params(lp->te, &x->nparams);
    return x;
}

int ex_cuda_run(ExCuda *x, const int64_t *dims, const uint64_t *tensors, uint64_t workspace,
                void *stream, float *ms, char *err, size_t errlen)
{
    if (!IR_ARG_OK(x, err, errlen) || !IR_ARG_OK(tensors, err, errlen))
        return -1;
    uint64_t args[x->nparams + 1];
    for (int i = 0; i < x->nparams; i++)
        args[i] = tensors[x->params[i]];
    RtCuTimer *t = NULL;
    if (ms && (rt_cuda_timer_new(&t, err, errlen) != DCRT_OK ||
               rt_cuda_timer_start(t, stream, err, errlen) != DCRT_OK)) {
        rt_cuda_timer_destroy(t);
        return -1;
    }
    int rc = 0;
    if (x->launch(dims, args, workspace, stream) != DCRT_OK) {
        snprintf(err, errlen, "%s", dcrt_last_error());
        rc = -1;
    }
    if (ms && rc == 0 && rt_cuda_timer_stop(t, stream, ms, err, errlen) != DCRT_OK)
        rc = -1;
    rt_cuda_timer_destroy(t);
    return rc;
}

void ex_cuda_destroy(ExCuda *x)
{
    if (!x)
        return;
    x->release();
    cg_jit_release(x->code);
    free(x->params);
    free(x);
}
