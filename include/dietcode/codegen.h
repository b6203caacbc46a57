/* dietcode/codegen.h: the code generator's table of contents.
 *
 * Loop IR -> LLVM IR is one code path (codegen/llvm.c). What differs per
 * target is a small table of hooks (CgTarget): the kernel's signature and
 * where dims and buffers come from, the index of a block or thread loop,
 * barriers, shared-memory allocation and math functions. codegen/cpu.c
 * fills it for the host CPU; NVPTX and the SIMT emulator add their own.
 *
 * CPU kernel ABI, one C function per Kernel:
 *
 *     void NAME(const int64_t *dims, float *const *bufs,
 *               int64_t block_begin, int64_t block_end);
 *
 * runs blocks [block_begin, block_end) of the kernel's FK_BLOCK loop.
 * dims[d->pos] is the value of dim d; bufs[t->id] is global tensor t,
 * row-major, its shape t->shape evaluated over dims. Integers are i64 with
 * the reference interpreter's semantics (floor division and modulo, x/0 = 0),
 * booleans i1, floats f32.
 *
 * What the loop kinds become: FK_SERIAL a loop 0..extent-1; FK_UNROLLED
 * (constant extent) the body once per value, the variable a constant;
 * FK_VECTORIZED (constant extent 2..64) no loop at all: the body once, over
 * <V x T> vectors whose lanes are the iterations (see codegen/llvm.c), so
 * its iterations must be independent (a store to one address from every
 * lane keeps the last lane's value; buffers allocated inside get a copy per
 * lane);
 * FK_BLOCK the target's block index (CPU: a loop over [block_begin,
 * block_end)); FK_THREAD the target's thread index (CPU: a serial loop).
 *
 * The JIT (codegen/jit.c) compiles every kernel of a LoopProgram with ORC
 * LLJIT for the host CPU and caches the machine code per kernel for the
 * life of the process, so compiling the same kernel again is free; running
 * a program runs one kernel per stage, the variant its dispatch tree picks
 * for the dims, splitting its blocks over a thread pool (runtime/pool.c).
 *
 * Library functions never print and never exit: they return NULL or -1 and
 * write a one-line message into the caller's err buffer.
 */
#ifndef DIETCODE_CODEGEN_H
#define DIETCODE_CODEGEN_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "dietcode/ir.h"
#include "dietcode/runtime.h"

/* ---- Targets: the hooks one lowering calls ---- */

typedef struct CgFn CgFn;
typedef struct CgTarget CgTarget;

/* Float math functions a target provides (everything else is built from
 * them in codegen/llvm.c). Arguments may be scalars or vectors of f32. */
typedef enum CgMath {
    CG_EXP, CG_LOG, CG_SQRT, CG_POW, CG_TANH, CG_ERF, CG_FABS, CG_FLOOR, CG_FMIN, CG_FMAX
} CgMath;

/* How a block or thread loop runs: either a loop over [lo, hi) on this
 * processor (index NULL), or one iteration at a hardware index (lo, hi
 * NULL) guarded by index < extent when guard is set. */
typedef struct CgRange {
    LLVMValueRef lo, hi;
    LLVMValueRef index;
    bool guard;
} CgRange;

struct CgTarget {
    const char *name;        /* "cpu" */
    const char *triple, *cpu, *features;
    /* Creates the kernel's function(s) named sym, leaves the builder in the
     * body's entry block and fills g->dimv and g->bufv. */
    void (*kernel_begin)(CgFn *g, const Kernel *k, const char *sym);
    /* Closes the body (after the block loop), e.g. with ret void. */
    void (*kernel_end)(CgFn *g);
    /* FK_BLOCK and FK_THREAD loops of the given extent. */
    CgRange (*loop_range)(CgFn *g, ForKind fk, LLVMValueRef extent);
    void (*barrier)(CgFn *g); /* NULL: the target has no barriers */
    /* Storage for an MS_SHARED buffer of array type ty (per block). */
    LLVMValueRef (*shared_alloc)(CgFn *g, const Tensor *buf, LLVMTypeRef ty);
    LLVMValueRef (*math)(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b);
};

/* The state of lowering one kernel: what hooks read and fill. */
struct CgFn {
    const CgTarget *target;
    const LoopProgram *lp;
    ExprCtx *ec;
    LLVMContextRef cx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn;          /* the function holding the body */
    LLVMBasicBlockRef entry;  /* its entry block: allocas go here */
    LLVMValueRef *dimv;       /* per dim position: i64 value */
    LLVMValueRef *bufv;       /* per tensor id: ptr to its first element */
    LLVMValueRef block_lo, block_hi; /* set by CPU-like targets for FK_BLOCK */
    LLVMTypeRef i1, i32, i64, f32, ptr, voidt;
    void *priv;               /* codegen/llvm.c's own state */
};

/* codegen/cpu.c */
/* The host CPU (triple, name and features detected once, AVX-512 where
 * present). Thread-safe; the result lives for the whole process. */
const CgTarget *cg_target_cpu(void);

/* ---- codegen/nvptx.c: kernels as PTX ----
 *
 * NVPTX kernel ABI, one PTX entry (.visible .entry NAME) per Kernel:
 *
 *     NAME(i64 dim..., ptr addrspace(1) buf...)
 *
 * every dim of the TE program in declaration order (d->pos), then one
 * global pointer per *materialised* tensor (lp->materialized[id]) in
 * tensor id order; inlined tensors get no parameter. Buffers are row-major
 * f32, 16-byte aligned (cuMemAlloc's 256 is enough), and never overlap;
 * a buffer the kernel does not write is read through the non-coherent
 * cache (ld.global.nc), so it must not change while the kernel runs.
 * Launch: grid (nblocks, 1, 1), nblocks = the FK_BLOCK loop's extent
 * evaluated over the dims (extra blocks exit at once); block
 * (k->nthreads, 1, 1), exactly (PTX .maxntid says so); static shared
 * memory only, no dynamic shared memory. Index arithmetic is i64.
 */

/* The argument array cuLaunchKernel takes for any kernel of lp under this
 * ABI: pointers to the dims' values (dims by Var.pos) and to the device
 * buffers (dbufs per tensor id, read for materialised tensors). One
 * malloc'd block that holds the dim values too: free() it; NULL when out
 * of memory. */
void **cg_nvptx_launch_args(const LoopProgram *lp, const int64_t *dims, const uint64_t *dbufs);

/* The accepted --arch values: sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a. */
bool cg_nvptx_arch_valid(const char *arch);
/* Whether libdevice (/usr/local/cuda/nvvm/libdevice/libdevice.10.bc) exists. */
bool cg_nvptx_have_libdevice(void);
/* The hooks for arch (NULL: sm_80); NULL for an unknown arch. With
 * libdevice (and the file present) math calls __nv_* functions that must be
 * linked in; otherwise it uses approximate ex2/lg2-based expansions. */
const CgTarget *cg_target_nvptx(const char *arch, bool libdevice);
/* The NVPTX module of lp (libdevice linked when used) as LLVM assembly. */
char *cg_emit_nvptx_llvm_text(const LoopProgram *lp, const char *arch, bool optimize, char *err,
                              size_t errlen);
/* The PTX text of every kernel of lp for arch (NULL: sm_80), malloc'd. */
char *cg_emit_ptx_text(const LoopProgram *lp, const char *arch, char *err, size_t errlen);
/* The same with libdevice off (approximate math) when libdevice is false. */
char *cg_emit_ptx_text_ex(const LoopProgram *lp, const char *arch, bool libdevice, char *err,
                          size_t errlen);
/* The math hook used without libdevice. On a target not named "nvptx" it
 * builds the same expansions over exact llvm.exp2/log2, so tests can run
 * them on the host (tests/unit/test_nvptx.c). */
LLVMValueRef cg_nvptx_approx_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b);

/* ---- codegen/llvm.c: loop IR -> LLVM IR ---- */

/* Adds kernel k of lp to module mod as function sym, for target t. Expects
 * no EX_REDUCE and, on targets without barriers, no ST_BARRIER. */
void cg_emit_kernel(LLVMModuleRef mod, const CgTarget *t, const LoopProgram *lp,
                    const Kernel *k, const char *sym);
/* A module of every kernel of lp (named as the kernels are), verified and,
 * if optimize, run through default<O3> for t. NULL and err on failure. */
LLVMModuleRef cg_build_module(LLVMContextRef cx, const CgTarget *t, const LoopProgram *lp,
                              bool optimize, char *err, size_t errlen);
LLVMTargetMachineRef cg_target_machine(const CgTarget *t, char *err, size_t errlen);
/* An empty module with t's triple and tm's data layout. */
LLVMModuleRef cg_module_new(LLVMContextRef cx, const char *name, const CgTarget *t,
                            LLVMTargetMachineRef tm);
/* LLVMVerifyModule, then LLVMRunPasses("default<O3>") with t's machine. */
int cg_verify_module(LLVMModuleRef mod, char *err, size_t errlen);
int cg_optimize_module(LLVMModuleRef mod, LLVMTargetMachineRef tm, char *err, size_t errlen);
/* The host CPU module of lp as LLVM assembly text (malloc'd). */
char *cg_emit_llvm_text(const LoopProgram *lp, bool optimize, char *err, size_t errlen);
/* The optimised host CPU module of lp as host assembly (malloc'd). */
char *cg_emit_asm_text(const LoopProgram *lp, char *err, size_t errlen);

/* Helpers for hooks. */
LLVMValueRef cg_intrinsic(CgFn *g, const char *name, LLVMTypeRef *overloads, int nover,
                          LLVMValueRef *args, int nargs);
/* Calls float NAME(float) from the C library on each lane of x. */
LLVMValueRef cg_libm_call(CgFn *g, const char *name, LLVMValueRef x);
LLVMValueRef cg_entry_alloca(CgFn *g, LLVMTypeRef ty, const char *name);
/* Integer floor division (mod false) or modulo of i64 scalars or vectors,
 * with ir/semantics.c's rules for 0 and -1 divisors. */
LLVMValueRef cg_floordivmod(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y, bool mod);

/* ---- codegen/jit.c: compiling and running on the host ---- */

typedef void (*CgKernelFn)(const int64_t *dims, float *const *bufs, int64_t block_begin,
                           int64_t block_end);
typedef struct CgProgram CgProgram; /* the compiled kernels of one LoopProgram */

/* JIT-compiles every kernel of lp for the host CPU. A kernel compiled before
 * in this process (same printed loop IR, tensors and dims) is reused. The
 * result refers to lp (block counts are lp's expressions): destroy it
 * first. */
CgProgram *cg_jit_compile(const LoopProgram *lp, char *err, size_t errlen);
/* Runs the stages in order over dims (checked against the declared
 * ranges) and bufs (bufs[t->id]: every materialised tensor), for each the
 * kernel its dispatch picks (ir_stage_kernel), splitting the kernel's
 * blocks over the process-wide pool. */
int cg_program_run(CgProgram *p, const int64_t *dims, float *const *bufs, char *err,
                   size_t errlen);
/* The same on a given pool (NULL: the process-wide one). */
int cg_program_run_on(CgProgram *p, RtPool *pool, const int64_t *dims, float *const *bufs,
                      char *err, size_t errlen);
/* Runs kernel i alone (all its blocks, over pool; NULL: the process-wide
 * one) with the same checks: to time one variant. */
int cg_program_run_kernel(CgProgram *p, RtPool *pool, int i, const int64_t *dims,
                          float *const *bufs, char *err, size_t errlen);
int cg_program_nkernels(const CgProgram *p);
/* Kernel i's entry point and its number of blocks for dims. */
CgKernelFn cg_program_kernel(const CgProgram *p, int i);
int64_t cg_program_nblocks(const CgProgram *p, int i, const int64_t *dims);
void cg_program_destroy(CgProgram *p);
/* Number of kernels compiled (cache misses) so far in this process. */
int64_t cg_jit_compile_count(void);
/* Releases the JIT, its cache and the default pool (all code compiled so
 * far dies with them). For tests and leak checkers; later compiles start
 * a new JIT. No CgProgram may be used across this call. */
void cg_jit_shutdown(void);
/* The cached host entry point of kernel k compiled for a host target t
 * (cg_target_cpu: a CgKernelFn; cg_target_emu: a CgEmuKernelFn), compiling
 * it on a miss; NULL and err on failure (also for a kernel that does not
 * start with its block loop). */
void *cg_jit_kernel(const CgTarget *t, const LoopProgram *lp, const Kernel *k, char *err,
                    size_t errlen);

/* ---- codegen/host.c: ahead-of-time output for the CPU ---- */

/* The CPU hooks for a portable object: triple x86_64-pc-linux-gnu, cpu
 * x86-64, no extra features (the JIT's cg_target_cpu uses the build host's). */
const CgTarget *cg_target_cpu_portable(void);
/* An x86-64 ELF relocatable object (PIC), *out malloc'd. ptx NULL: every
 * kernel of lp (CPU-lowered; internal) and the exported
 *     int NAME_run(int64_t DIM..., float *PTR...);
 * otherwise ptx (the PTX of the GPU-lowered lp) embedded and
 *     int NAME_launch(int64_t DIM..., uint64_t PTR..., void *stream);
 * dims in declaration order, then inputs, then outputs, each in
 * declaration order; returns DCRT_OK or a DCRT_ERR_* code (runtime.h).
 * Both run one kernel per stage, picked by its dispatch tree (compiled to
 * compares on the dims) as ir_stage_kernel picks it. */
int cg_emit_object(const LoopProgram *lp, const char *ptx, char **out, size_t *len, char *err,
                   size_t errlen);
/* The self-contained C header of that object (malloc'd text). */
char *cg_emit_header(const LoopProgram *lp, bool gpu, char *err, size_t errlen);

/* ---- codegen/emu.c: device-form kernels on the SIMT emulator ----
 *
 * Emu kernel ABI, one host function per Kernel of a LoopProgram lowered
 * for PT_GPU (barriers and shared buffers kept), run once per GPU thread:
 *
 *     void NAME(const int64_t *dims, float *const *bufs, int64_t block,
 *               int64_t thread, char *shared);
 *
 * dims and bufs as for the CPU; block and thread are the GPU indices;
 * shared is the block's shared buffer (cg_emu_shared_bytes(k) bytes). A
 * barrier calls rt_simt_barrier_at (runtime/simt.c). For tests: it runs the
 * kernels as structured for the GPU on a machine without one.
 */
typedef void (*CgEmuKernelFn)(const int64_t *dims, float *const *bufs, int64_t block,
                              int64_t thread, char *shared);
typedef struct CgEmuProgram CgEmuProgram;
const CgTarget *cg_target_emu(void);
/* Bytes of k's shared buffers, each at a 64-byte aligned offset in the
 * order the kernel allocates them. */
int64_t cg_emu_shared_bytes(const Kernel *k);
/* JIT-compiles every kernel of lp (lowered for PT_GPU) for the emulator;
 * the result refers to lp: destroy it first. */
CgEmuProgram *cg_emu_compile(const LoopProgram *lp, char *err, size_t errlen);
/* Runs the stages in order, each the kernel its dispatch picks for dims
 * (ir_stage_kernel), each block as k->nthreads fibers, blocks
 * spread over pool (NULL: one after another on the calling thread). -1 and
 * err on bad dims or buffers, or barrier divergence. */
int cg_emu_program_run(CgEmuProgram *p, RtPool *pool, const int64_t *dims, float *const *bufs,
                       char *err, size_t errlen);
void cg_emu_program_destroy(CgEmuProgram *p); /* NULL is fine */

#endif
