/* dietcode/exec.h: the launch plan and the executors' table of contents.
 *
 * A lowered program (LoopProgram) runs as the launches of its plan: for the
 * dims of a call, which variant each stage runs, every kernel launch with
 * its grid, where the intermediates and scratch buffers lie in one
 * workspace, and every range and size check. The plan is made in one
 * place, runtime/plan.c, from the program's table (codegen/table.c), and
 * every executor consumes it:
 *
 *   loops.c  the loop-IR interpreter, kernel by kernel (tests, debugging)
 *   emu.c    the GPU form of the kernels on the SIMT emulator
 *   cpu.c    the object --emit=obj writes, JIT-compiled for this CPU and
 *            called through its NAME_run_packed: its plan is runtime/plan.c
 *            on the table compiled into it
 *   cuda.c   the same for the GPU: NAME_launch_packed through the driver
 *
 * and profile.c times a CPU call's launches (`dcc run --profile`).
 *
 * so what `dcc run`, the tests and the tuner's measurements execute is what
 * objects ship. Tensors are passed per tensor id of the TE program
 * (tensors[t->id]); inputs and outputs must be set, intermediates are the
 * workspace's.
 *
 * Functions return 0 or -1 (NULL) with a one-line message in err; none
 * prints or exits.
 */
#ifndef DIETCODE_EXEC_H
#define DIETCODE_EXEC_H

#include <stdio.h>

#include "dietcode/codegen.h"
#include "dietcode/ir.h"
#include "dietcode/runtime.h"

/* exec/plan.c */
typedef struct ExProgram ExProgram; /* a LoopProgram's table, ready to plan calls */
ExProgram *ex_program_new(const LoopProgram *lp);
void ex_program_free(ExProgram *x); /* NULL is fine */
const DcrtProgram *ex_program_table(const ExProgram *x);
/* The plan of a call (launches name kernels by index into lp->kernels);
 * NULL and the failed check's message. Free it with dcrt_plan_free. */
DcrtPlan *ex_plan(const ExProgram *x, const int64_t *dims, char *err, size_t errlen);
/* --emit=plan: the plan of lp for dims, or the check that refuses them. */
int ex_plan_print(FILE *out, const LoopProgram *lp, const int64_t *dims, char *err,
                  size_t errlen);
/* One call in this process: its plan, the entry's arguments (the table's
 * params order), a workspace of the plan's size, and every buffer bound
 * as a compiled object binds it (bufs[b] for buffer b of the table).
 * ex_call_begin checks the plan and the arguments; on -1 the call still
 * needs ex_call_end. */
typedef struct ExCall {
    DcrtPlan *plan;
    void **args;
    void *workspace;
    float **bufs;
} ExCall;
int ex_call_begin(const ExProgram *x, const int64_t *dims, float *const *tensors, ExCall *c,
                  char *err, size_t errlen);
void ex_call_end(ExCall *c);

/* exec/profile.c: where a call's time goes, launch by launch (CPU). */
typedef struct ExProfile ExProfile;
/* Records the time of every CPU launch of lp's calls from now until
 * ex_profile_stop (libdcrt's launch hook: one profile at a time). */
ExProfile *ex_profile_start(const LoopProgram *lp, char *err, size_t errlen);
void ex_profile_stop(ExProfile *pr);
/* A row per stage (and per launch of a stage with several): median time,
 * GFLOP/s (stages with a reduction) or GB/s, share of all launches. */
int ex_profile_print(FILE *out, ExProfile *pr, const int64_t *dims, char *err, size_t errlen);
void ex_profile_free(ExProfile *pr); /* stops it; NULL is fine */

/* exec/jit.c */
void ex_jit_runtime(void); /* defines libdcrt's entry points for JIT-compiled code */
/* The host object of lp (codegen/host.c with o; its symbol is made here,
 * unique in the process) JIT-compiled, and the addresses of its entries
 * NAME<suffixes[i]> in entries[i] (n of them); NULL and the message on
 * failure. */
CgJitCode *ex_jit_host(const LoopProgram *lp, CgHostOpts o, const char *const *suffixes,
                       void **entries, int n, char *err, size_t errlen);
/* The tensor ids of an entry's tensor arguments: inputs, then outputs
 * (malloc'd, *n of them). */
int *ex_entry_params(const TeProgram *te, int *n);

/* exec/loops.c */
int ex_loops_run(const LoopProgram *lp, const int64_t *dims, float *const *tensors, char *err,
                 size_t errlen);

/* exec/emu.c */
typedef struct ExEmu ExEmu;
ExEmu *ex_emu_compile(const LoopProgram *lp, char *err, size_t errlen); /* lowered for PT_GPU */
/* Each block as k->nthreads fibers, blocks spread over pool (NULL: one
 * after another on the calling thread); barrier divergence is an error. */
int ex_emu_run(ExEmu *x, RtPool *pool, const int64_t *dims, float *const *tensors, char *err,
               size_t errlen);
void ex_emu_destroy(ExEmu *x); /* NULL is fine */

/* exec/cpu.c */
typedef struct ExCpu ExCpu;
/* The object of lp for this CPU (codegen/host.c, kernels for the host's
 * instruction set), JIT-compiled. */
ExCpu *ex_cpu_compile(const LoopProgram *lp, char *err, size_t errlen);
/* The same with the kernels built for isa (one this CPU has). */
ExCpu *ex_cpu_compile_isa(const LoopProgram *lp, const CgTarget *isa, char *err, size_t errlen);
/* The entry NAME_run_packed of te's CPU object loaded by other means (a
 * shared object, dlopen'd), run as ex_cpu_run runs the JIT's; destroying it
 * leaves that code alone. */
typedef int (*ExRunPacked)(const int64_t *dims, void *const *tensors, void *workspace);
ExCpu *ex_cpu_entry(const TeProgram *te, ExRunPacked run);
/* One call of NAME_run_packed; workspace NULL: libdcrt's per thread. */
int ex_cpu_run(ExCpu *x, const int64_t *dims, float *const *tensors, void *workspace, char *err,
               size_t errlen);
void ex_cpu_destroy(ExCpu *x); /* NULL is fine */

/* exec/cuda.c */
typedef struct ExCuda ExCuda;
/* The GPU object of lp (lowered for PT_GPU: its PTX for arch, NULL sm_80),
 * JIT-compiled for the host. Needs no GPU until it runs. */
ExCuda *ex_cuda_compile(const LoopProgram *lp, const char *arch, bool libdevice, char *err,
                        size_t errlen);
/* One call of NAME_launch_packed on stream, tensors device pointers by TE
 * tensor id, workspace 0 for libdcrt's; with ms, the time between CUDA
 * events recorded around it (the call then waits for its kernels). */
int ex_cuda_run(ExCuda *x, const int64_t *dims, const uint64_t *tensors, uint64_t workspace,
                void *stream, float *ms, char *err, size_t errlen);
void ex_cuda_destroy(ExCuda *x); /* NULL is fine */

#endif
