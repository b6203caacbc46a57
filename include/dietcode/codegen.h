/* dietcode/codegen.h: the code generator's table of contents.
 *
 * Loop IR -> LLVM IR is one code path (codegen/llvm.c). What differs per
 * target is a small table of hooks (CgTarget): the kernel's signature and
 * where dims and buffers come from, the index of a block or thread loop,
 * barriers, shared-memory allocation and math functions. codegen/cpu.c
 * fills it for x86-64 CPUs (the host's, or a named instruction set),
 * codegen/nvptx.c for NVIDIA GPUs, codegen/emu.c for the SIMT emulator.
 *
 *   module.c  LLVM's context, module and target machine, owned together
 *   llvm.c    loop IR -> LLVM IR, one kernel at a time
 *   cpu.c nvptx.c emu.c   the targets' hooks (and the PTX of a program)
 *   table.c   the program table of dietcode/abi.h for a LoopProgram
 *   host.c    the object --emit=obj writes: kernels (or PTX), the table,
 *             the exported entry points; and its C header
 *   jit.c     machine code in this process: adds modules, returns
 *             addresses, runs nothing (exec/ runs it)
 *
 * CPU kernel ABI, one C function per Kernel (DcrtKernelFn):
 *
 *     void NAME(const int64_t *dims, float *const *bufs,
 *               int64_t block_begin, int64_t block_end);
 *
 * runs blocks [block_begin, block_end) of the kernel's FK_BLOCK loop.
 * dims[d->pos] is the value of dim d; bufs[t->id] is global buffer t of
 * the LoopProgram (a tensor or a scratch buffer), row-major, its shape
 * t->shape evaluated over dims. Integers are i64 with the semantics of
 * ir/semantics.c, booleans i1, floats f32.
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
 * This header needs no LLVM headers: CgTarget and CgModule are opaque
 * here. What is typed with LLVM's C API (the hooks' structs, the module's
 * handles, cg_emit_kernel and the helpers hooks call) is in
 * dietcode/codegen_llvm.h, the one public header that needs LLVM's
 * include path.
 *
 * Library functions never print and never exit: they return NULL or -1 and
 * write a one-line message into the caller's err buffer.
 */
#ifndef DIETCODE_CODEGEN_H
#define DIETCODE_CODEGEN_H

#include "dietcode/abi.h"
#include "dietcode/ir.h"

typedef struct CgTarget CgTarget; /* a target's hooks (dietcode/codegen_llvm.h) */
typedef struct CgModule CgModule; /* an LLVM module and its target machine */

/* codegen/cpu.c */
/* The host CPU (triple, name and features detected once, AVX-512 where
 * present): what the JIT compiles for. Thread-safe; lives for the whole
 * process. */
const CgTarget *cg_target_cpu(void);
/* The CPU hooks for one --arch entry: "native" (the host's CPU), "x86-64",
 * "x86-64-v2", "x86-64-v3", "x86-64-v4", or the name of an x86-64 CPU that
 * LLVM knows (skylake-avx512, znver4, ...); NULL and err for anything else. */
const CgTarget *cg_target_cpu_arch(const char *arch, char *err, size_t errlen);
/* Parses a comma-separated --arch list for the CPU into at most max
 * targets, ordered for an object: highest level first, the given order
 * among equals, duplicates dropped. The count, or -1 and err. */
int cg_cpu_arch_list(const char *list, const CgTarget **out, int max, char *err, size_t errlen);
/* The x86-64 level (1..4) a CPU target's features need; 0 for another. */
int cg_target_level(const CgTarget *t);

/* ---- codegen/module.c: LLVM's objects, owned in one place ---- */

/* The version of the LLVM headers codegen was built with, e.g. "19.1.7". */
const char *cg_llvm_version(void);

/* An empty module named name for target t (its triple, its machine's data
 * layout). NULL and err when LLVM has no such target. */
CgModule *cg_module_create(const CgTarget *t, const char *name, char *err, size_t errlen);
void cg_module_destroy(CgModule *m); /* NULL is fine */
int cg_module_verify(CgModule *m, char *err, size_t errlen);
/* Verifies, then default<O3> with the target's machine (without LLVM's
 * loop unroller where the target says CgTarget.no_llvm_unroll). */
int cg_module_optimize(CgModule *m, char *err, size_t errlen);
/* A pass pipeline by LLVM's textual name. */
int cg_module_run_passes(CgModule *m, const char *passes, char *err, size_t errlen);
/* The module as LLVM assembly (malloc'd). */
char *cg_module_print(CgModule *m, char *err, size_t errlen);
/* The target's assembly (PTX on NVPTX) or, with object, an ELF relocatable
 * object; malloc'd, *len its size. */
char *cg_module_emit(CgModule *m, bool object, size_t *len, char *err, size_t errlen);
/* Every kernel of lp for t, as symbols prefix + kernel name, verified and
 * (optimize) optimised. */
CgModule *cg_kernels_module(const LoopProgram *lp, const CgTarget *t, const char *prefix,
                            bool optimize, char *err, size_t errlen);
/* prefix + name with every character that is not a letter or digit made
 * '_' (malloc'd): a symbol. */
char *cg_symbol(const char *prefix, const char *name);
/* 0 if an object's entry points may start with prog (PROG_run,
 * PROG_workspace_size, ...); -1 and a message when they could be one of
 * libdcrt's symbols (prog dcrt or rt, or starting dcrt_ or rt_), which
 * would call itself or clash at link time. */
int cg_symbol_prefix_check(const char *prog, char *err, size_t errlen);

/* ---- codegen/nvptx.c: kernels as PTX ----
 *
 * NVPTX kernel ABI, one PTX entry (.visible .entry NAME) per Kernel:
 *
 *     NAME(i64 dim..., ptr addrspace(1) buf...)
 *
 * every dim of the TE program in declaration order (d->pos), then one
 * global pointer per *materialised* buffer of the LoopProgram
 * (lp->materialized[id]: inputs, outputs, intermediates, scratch buffers)
 * that the kernel reads or writes, in id order (cg_kernel_params; the
 * program table lists them as DcrtKernel.args); inlined tensors get no
 * parameter. At most 4096 bytes of parameters (cg_nvptx_check_params: a
 * kernel that would need more is an error naming it). Buffers are row-major
 * f32, 16-byte aligned (cuMemAlloc's 256 and DCRT_ALIGN are enough), and
 * never overlap; a buffer the kernel does not write is read through the
 * non-coherent cache (ld.global.nc), so it must not change while the
 * kernel runs. Launch: grid (nblocks, 1, 1), nblocks = the FK_BLOCK loop's
 * extent evaluated over the dims (extra blocks exit at once); block
 * (k->nthreads, 1, 1), exactly (PTX .maxntid says so); static shared
 * memory only, no dynamic shared memory. Index arithmetic is i64.
 */

/* The accepted --arch values: sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a. */
bool cg_nvptx_arch_valid(const char *arch);
/* Whether libdevice (/usr/local/cuda/nvvm/libdevice/libdevice.10.bc) exists. */
bool cg_nvptx_have_libdevice(void);
/* The hooks for arch (NULL: sm_80); NULL for an unknown arch. With
 * libdevice (and the file present) math calls __nv_* functions that must be
 * linked in; otherwise it uses approximate ex2/lg2-based expansions. */
const CgTarget *cg_target_nvptx(const char *arch, bool libdevice);
/* The NVPTX module of lp's kernels for arch (NULL: sm_80), libdevice
 * linked when used (and wanted), optimised when optimize. */
CgModule *cg_nvptx_module(const LoopProgram *lp, const char *arch, bool libdevice, bool optimize,
                          char *err, size_t errlen);
/* -1 and a message naming the first kernel of lp whose parameters (8
 * bytes a dim or a buffer) exceed the 4096 bytes of a kernel's parameter
 * space, else 0; cg_nvptx_module checks it first. */
int cg_nvptx_check_params(const LoopProgram *lp, char *err, size_t errlen);
/* The PTX text of every kernel of lp (malloc'd). */
char *cg_emit_ptx(const LoopProgram *lp, const char *arch, bool libdevice, char *err,
                  size_t errlen);

/* ---- codegen/index.c ---- */

/* Whether every integer kernel k of lp computes provably fits in i32 for
 * every call the plan accepts (then kernels may compute in 32 bits). */
bool cg_index32(const LoopProgram *lp, const Kernel *k);

/* ---- codegen/emu.c: device-form kernels for the SIMT emulator ----
 *
 * Emu kernel ABI, one host function per Kernel of a LoopProgram lowered
 * for PT_GPU (barriers and shared buffers kept), run once per GPU thread:
 *
 *     void NAME(const int64_t *dims, float *const *bufs, int64_t block,
 *               int64_t thread, char *shared);
 *
 * dims and bufs as for the CPU; block and thread are the GPU indices;
 * shared is the block's shared buffer (cg_shared_bytes(k) bytes). A
 * barrier calls rt_simt_barrier_at (runtime/simt.c), which the JIT must
 * resolve (exec/ defines it). For tests: exec/emu.c runs the kernels as
 * structured for the GPU on a machine without one.
 */
typedef void (*CgEmuKernelFn)(const int64_t *dims, float *const *bufs, int64_t block,
                              int64_t thread, char *shared);
const CgTarget *cg_target_emu(void);
/* A fiber stack for one of k's threads: room for its per-thread buffers. */
size_t cg_emu_stack_bytes(const Kernel *k);

/* ---- codegen/shared.c: where a kernel's shared buffers lie ----
 * In one block-wide allocation, in the order the kernel allocates them,
 * each at a 64-byte aligned offset: the emulator's shared buffer and
 * NVPTX's dynamic shared memory. */
int64_t cg_shared_bytes(const Kernel *k);
/* Bytes of k's per-thread (local) buffers, vector lanes included. */
int64_t cg_local_bytes(const Kernel *k);
/* The offset of shared buffer buf in the kernel of lp that allocates it
 * (*owner, when not NULL); -1 when none does. */
int64_t cg_shared_offset(const LoopProgram *lp, const Tensor *buf, const Kernel **owner);
/* The dynamic shared memory a launch of k gives it: all its shared bytes
 * when they exceed the 48 KB a GPU kernel may declare statically, else 0
 * (its buffers then are static); 0 on the CPU. */
int64_t cg_dynamic_shared_bytes(const LoopProgram *lp, const Kernel *k);

/* ---- codegen/table.c: the program table (dietcode/abi.h) of a LoopProgram ----
 *
 * The one description of a lowered program that both the object of
 * --emit=obj (codegen/host.c serialises it) and dcc's executors (exec/plan.c
 * evaluates it, through runtime/plan.c) plan their launches from. Size
 * expression i is sizes[i]: first every buffer's extents, then the
 * kernels' grids (one expression once). prog.size,
 * size_ctx, the instruction sets, fns and ptx are left for the user to
 * fill. */
typedef struct CgTable {
    DcrtProgram prog;
    int nkernel_args; /* entries of prog.kernel_args */
    int nsizes;
    Expr **sizes;
    Arena *arena; /* everything the arrays hold */
} CgTable;

CgTable *cg_table_new(const LoopProgram *lp);
void cg_table_free(CgTable *t); /* NULL is fine */
/* Which of lp's buffers kernel k reads or writes: use (lp->nbuffers bytes,
 * zeroed) gets IR_READS / IR_WRITES per buffer id; every kernel may write
 * the gathers' error record. touched (NULL, or room for every buffer) gets
 * the ids set; returns how many (ir_kernel_uses with that rule). */
int cg_kernel_uses(const LoopProgram *lp, const Kernel *k, unsigned char *use, int *touched);
/* The buffers a GPU kernel takes as parameters, after the dims: the
 * materialised buffers it reads or writes, in id order, into ids
 * (lp->nbuffers entries); returns how many. */
int cg_kernel_params(const LoopProgram *lp, const Kernel *k, int32_t *ids);

/* ---- codegen/host.c: the object and header of --emit=obj,header ---- */

/* The most bytes of constants an object holds: 2 GB (the small code
 * model's reach) less 256 MB for its code and tables. */
#define CG_MAX_CONST_BYTES (((int64_t)1 << 31) - ((int64_t)1 << 28))

typedef struct CgHostOpts {
    const char *symbol;          /* exported names: SYMBOL_run ... (NULL: the program's name) */
    /* CPU: the instruction sets to hold kernels for, in the order an
     * object prefers them (cg_cpu_arch_list); at least one */
    int nisas;
    const CgTarget *const *isas;
    /* CPU: per instruction set, the lowering of the program its kernels
     * come from (NULL, or a NULL entry: lp). Each lowering gets a table of
     * its own, chained in the order of their first instruction set
     * (DcrtProgram.next); their TE program is lp's. */
    const LoopProgram *const *isa_lps;
    const char *ptx;             /* GPU: the PTX of lp (lowered for PT_GPU); NULL for a CPU object */
    /* header: the file's stem (dcc: the -o stem), which names the include
     * guard DCC_STEM_H; NULL: the program's name and the target */
    const char *guard;
    /* JIT-compiled in this process: a constant's elements are referenced
     * where the program holds them instead of copied into the module */
    bool jit;
} CgHostOpts;

/* The object's module for the portable x86-64 host, optimised: the table
 * and the exported functions
 *     int NAME_run(int64_t DIM..., const float *IN..., float *OUT..., void *workspace);
 *     int NAME_run_packed(const int64_t *dims, void *const *tensors, void *workspace);
 *     size_t NAME_workspace_size(int64_t DIM...);
 * with the kernels for every instruction set (CPU), or
 *     int NAME_launch(int64_t DIM..., uint64_t IN..., uint64_t OUT..., uint64_t workspace,
 *                     void *stream);
 *     int NAME_launch_packed(const int64_t *dims, const uint64_t *tensors,
 *                            uint64_t workspace, void *stream);
 *     size_t NAME_workspace_size(int64_t DIM...);
 * with the PTX embedded (GPU). Dims in declaration order, then inputs,
 * then outputs, each in declaration order; the packed forms take them as
 * arrays. They return what dcrt_run / dcrt_cuda_run return. */
CgModule *cg_host_module(const LoopProgram *lp, const CgHostOpts *o, char *err, size_t errlen);
/* The self-contained C header of that object (malloc'd text). */
char *cg_emit_header(const LoopProgram *lp, const CgHostOpts *o, char *err, size_t errlen);

/* ---- codegen/jit.c: machine code in this process (ORC LLJIT) ----
 *
 * One process-wide JIT for the host CPU. A module added to it becomes
 * machine code whose symbols can be looked up, until released. Symbols of
 * different modules must differ (cg_jit_prefix gives a fresh prefix). What
 * JIT-compiled code calls resolves against the symbols defined with
 * cg_jit_define (the runtime's functions: libdcrt is linked into the
 * executable, not loaded) and then the process's libraries (libm). */
typedef struct CgJitCode CgJitCode;
/* Makes name resolve to addr in JIT-compiled code (before or after the
 * first module; the same name twice keeps the first). */
void cg_jit_define(const char *name, const void *addr);
/* A prefix no other module of this process uses ("dcN_"), malloc'd. */
char *cg_jit_prefix(void);
/* Takes over m (destroyed, whatever the outcome) and compiles it. */
CgJitCode *cg_jit_add(CgModule *m, char *err, size_t errlen);
/* The address of a symbol of c, or NULL and err. */
void *cg_jit_lookup(CgJitCode *c, const char *name, char *err, size_t errlen);
/* Frees c's machine code; its addresses die with it. NULL is fine. */
void cg_jit_release(CgJitCode *c);
/* Releases the JIT itself (everything compiled so far dies with it), for
 * leak checkers; a later add starts a new one. */
void cg_jit_shutdown(void);

#endif
