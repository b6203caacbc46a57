/* dietcode/codegen_llvm.h: the code generator's LLVM-typed half.
 *
 * What a caller sees of codegen in LLVM's C API types, and so the one
 * public header that needs LLVM's include path (llvm-config --includedir):
 * the targets' hooks (CgTarget) and the state they work on (CgFn), the
 * LLVM handles a CgModule owns, and the lowering of one kernel with the
 * helpers hooks call. Everything else, with CgTarget and CgModule opaque,
 * is dietcode/codegen.h, which this header includes.
 */
#ifndef DIETCODE_CODEGEN_LLVM_H
#define DIETCODE_CODEGEN_LLVM_H

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>

#include "dietcode/codegen.h"

/* ---- Targets: the hooks one lowering calls ---- */

typedef struct CgFn CgFn;

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
    const char *name;        /* "cpu", "nvptx", "emu" */
    const char *triple, *cpu, *features;
    const char *arch;        /* CPU: the --arch entry it stands for ("native", "x86-64-v3", ...) */
    int level;               /* CPU, emu: the x86-64 level (1..4) its features need; 0 otherwise */
    /* Creates the kernel's function(s) named sym, leaves the builder in the
     * body's entry block and fills g->dimv and g->bufv (the buffers the
     * kernel uses, g->use, at least). */
    void (*kernel_begin)(CgFn *g, const Kernel *k, const char *sym);
    /* Closes the body (after the block loop), e.g. with ret void. */
    void (*kernel_end)(CgFn *g);
    /* FK_BLOCK and FK_THREAD loops of the given extent. */
    CgRange (*loop_range)(CgFn *g, ForKind fk, LLVMValueRef extent);
    void (*barrier)(CgFn *g); /* NULL: the target has no barriers */
    /* Storage for an MS_SHARED buffer of array type ty (per block). */
    LLVMValueRef (*shared_alloc)(CgFn *g, const Tensor *buf, LLVMTypeRef ty);
    LLVMValueRef (*math)(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b);
    /* shfl_xor of an f32 scalar across the block's threads (GPU forms);
     * NULL: the target has no warps. */
    LLVMValueRef (*shuffle_xor)(CgFn *g, LLVMValueRef v, int mask);
    /* An async store (cp.async): `bytes` (4, 8 or 16, the pointers aligned
     * to it) to shared dst, landing by the thread's next async_wait: the
     * first src_bytes (i32: bytes or 0) from global src, zeros after them.
     * NULL: the target stores async stores at once. */
    void (*async_copy)(CgFn *g, LLVMValueRef dst, LLVMValueRef src, int bytes,
                       LLVMValueRef src_bytes);
    /* Waits for the thread's async copies (before a barrier that asks). */
    void (*async_wait)(CgFn *g);
    /* integers of a kernel in 32 bits where cg_index32 proves it safe */
    bool index32;
    /* LLVM's loop unroller stays off: the schedule's unroll and register
     * tiles are the unrolling (on the CPU, LLVM unrolling a tiled chunk
     * loop again made tall tiles spill; bench/README.md) */
    bool no_llvm_unroll;
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
    const unsigned char *use; /* per tensor id: IR_READS | IR_WRITES by this kernel;
                               * entry points take or load only those */
    LLVMValueRef block_lo, block_hi; /* set by CPU-like targets for FK_BLOCK */
    LLVMTypeRef i1, i32, i64, f32, ptr, voidt;
    void *priv;               /* codegen/llvm.c's own state */
};

/* ---- codegen/module.c ---- */

struct CgModule {
    const CgTarget *t;
    LLVMOrcThreadSafeContextRef tsc; /* owns cx */
    LLVMContextRef cx;
    LLVMModuleRef mod;               /* NULL once the JIT has taken it */
    LLVMTargetMachineRef tm;
    bool diag_failed;                /* an LLVM error diagnostic was caught: diag */
    char diag[512];
};

LLVMTargetMachineRef cg_target_machine(const CgTarget *t, char *err, size_t errlen);

/* ---- codegen/nvptx.c ---- */

/* The math hook used without libdevice. On a target not named "nvptx" it
 * builds the same expansions over exact llvm.exp2/log2, so tests can run
 * them on the host (tests/unit/test_nvptx.c). */
LLVMValueRef cg_nvptx_approx_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b);

/* ---- codegen/dedupe.c: kernel bodies that are one function ---- */

typedef struct CgBodies CgBodies;
CgBodies *cg_bodies_new(void);
/* The body kept that is the same function as fn (a kernel's body, NAME.body,
 * best built in a module of its own) but for the names it defines; NULL
 * when none is, *key then fn's comparison key (malloc'd; NULL: fn cannot
 * be compared) for cg_bodies_keep. */
LLVMValueRef cg_bodies_find(CgBodies *b, LLVMValueRef fn, char **key);
/* Keeps body (the one cg_bodies_find gave key for, as built where it is
 * called) under key, which it takes. */
void cg_bodies_keep(CgBodies *b, char *key, LLVMValueRef body);
void cg_bodies_free(CgBodies *b);

/* ---- codegen/llvm.c: loop IR -> LLVM IR ---- */

/* Adds kernel k of lp to module mod as function sym, for target t. Expects
 * no EX_REDUCE and, on targets without barriers, no ST_BARRIER. */
void cg_emit_kernel(LLVMModuleRef mod, const CgTarget *t, const LoopProgram *lp,
                    const Kernel *k, const char *sym);

/* codegen/cpu.c: the C ABI entry sym of kernel k of lp alone, calling body,
 * a body built for a kernel that uses the same number of buffers (its
 * twin in another layer: codegen/dedupe.c). */
void cg_cpu_entry(LLVMModuleRef mod, const CgTarget *t, const LoopProgram *lp, const Kernel *k,
                  const char *sym, LLVMValueRef body);

/* Helpers for hooks. */
LLVMValueRef cg_intrinsic(CgFn *g, const char *name, LLVMTypeRef *overloads, int nover,
                          LLVMValueRef *args, int nargs);
/* The declaration of a math library function of type fty in g's module:
 * nounwind, willreturn, nosync, memory(none). */
LLVMValueRef cg_math_fn(CgFn *g, const char *name, LLVMTypeRef fty);
/* Calls float NAME(float) from the C library on each lane of x. */
LLVMValueRef cg_libm_call(CgFn *g, const char *name, LLVMValueRef x);
LLVMValueRef cg_entry_alloca(CgFn *g, LLVMTypeRef ty, const char *name);
/* Scalar v in every lane of an n-lane vector (a constant vector when v is
 * constant); a vector v as it is. n <= 64. */
LLVMValueRef cg_splat(CgFn *g, LLVMValueRef v, unsigned n);
/* Integer floor division (mod false) or modulo of i64 scalars or vectors,
 * with ir/semantics.c's rules for 0 and -1 divisors. */
LLVMValueRef cg_floordivmod(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y, bool mod);

#endif
