/* What JIT-compiled code may call: libdcrt's entry points (objects call
 * them; `dcc run` JIT-compiles objects) and the emulator's barrier. They
 * are linked into the executable, whose own symbols the JIT does not look
 * up, so they are defined for it by address, once. And the host object of
 * a program, JIT-compiled, with the entry the CPU and CUDA executors call. */
#include "dietcode/exec.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void define(void)
{
    cg_jit_define("dcrt_run", (const void *)dcrt_run);
    cg_jit_define("dcrt_cuda_run", (const void *)dcrt_cuda_run);
    cg_jit_define("dcrt_cuda_release", (const void *)dcrt_cuda_release);
    cg_jit_define("dcrt_workspace_size", (const void *)dcrt_workspace_size);
    cg_jit_define("rt_simt_barrier_at", (const void *)rt_simt_barrier_at);
    cg_jit_define("rt_simt_shfl_xor", (const void *)rt_simt_shfl_xor);
    cg_jit_define("rt_simt_cp_async", (const void *)rt_simt_cp_async);
    cg_jit_define("rt_simt_cp_wait", (const void *)rt_simt_cp_wait);
}

void ex_jit_runtime(void) { pthread_once(&once, define); }

CgJitCode *ex_jit_host(const LoopProgram *lp, CgHostOpts o, const char *const *suffixes,
                       void **entries, int n, char *err, size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen) || !IR_ARG_OK(suffixes, err, errlen) ||
        !IR_ARG_OK(entries, err, errlen))
        return NULL;
    ex_jit_runtime();
    char *prefix = cg_jit_prefix();
    char *sym = cg_symbol(prefix, lp->te->name);
    o.symbol = sym;
    CgModule *m = cg_host_module(lp, &o, err, errlen);
    CgJitCode *code = m ? cg_jit_add(m, err, errlen) : NULL;
    for (int i = 0; i < n && code; i++) {
        char *name = cg_symbol(sym, suffixes[i]);
        if (!(entries[i] = cg_jit_lookup(code, name, err, errlen))) {
            cg_jit_release(code);
            code = NULL;
        }
        free(name);
    }
    free(sym);
    free(prefix);
    return code;
}

int *ex_entry_params(const TeProgram *te, int *n)
{
    int *p = calloc((size_t)te->ntensors + 1, sizeof *p);
    if (!p)
        ir_panic(__FILE__, __LINE__, "out of memory");
    *n = ir_te_params(te, p);
    return p;
}
