/* What JIT-compiled code may call: libdcrt's entry points (objects call
 * them; `dcc run` JIT-compiles objects) and the emulator's barrier. They
 * are linked into the executable, whose own symbols the JIT does not look
 * up, so they are defined for it by address, once. */
#include "dietcode/exec.h"

#include <pthread.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void define(void)
{
    cg_jit_define("dcrt_run", (const void *)dcrt_run);
    cg_jit_define("dcrt_cuda_run", (const void *)dcrt_cuda_run);
    cg_jit_define("dcrt_workspace_size", (const void *)dcrt_workspace_size);
    cg_jit_define("rt_simt_barrier_at", (const void *)rt_simt_barrier_at);
}

void ex_jit_runtime(void) { pthread_once(&once, define); }
