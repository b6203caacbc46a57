/* The emu target: the device form of a kernel, compiled for the host and
 * run on the SIMT emulator (runtime/simt.c).
 *
 * The point is to test what the GPU would run without a GPU: the loop IR
 * lowered for PT_GPU (one block loop, one thread loop, barriers inside it,
 * shared buffers around it) goes through the same lowering as every other
 * target, with hooks that make one call of the function one GPU thread of
 * one block:
 *
 *     void NAME(const int64_t *dims, float *const *bufs, int64_t block,
 *               int64_t thread, char *shared);
 *
 * FK_BLOCK is the block argument and FK_THREAD the thread argument (each
 * one iteration, guarded by index < extent, as on the GPU); a barrier is a
 * call to rt_simt_barrier_at, which parks the fiber until the whole block has
 * arrived (the call is `convergent`, so LLVM does not duplicate it into
 * divergent paths), after rt_simt_cp_wait where it waits for async copies
 * (rt_simt_cp_async, written to shared memory only then); shared buffers
 * are offsets into the block's shared buffer (codegen/shared.c); math is
 * the CPU target's. exec/emu.c compiles a program's kernels with these
 * hooks (cg_kernels_module) and runs its plan, each block as k->nthreads
 * fibers.
 */
#include "dietcode/codegen_llvm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { BASE_STACK = 128 << 10 };

static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static CgTarget emu;

/* Fiber stack for k: room for its per-thread buffers, twice over. */
size_t cg_emu_stack_bytes(const Kernel *k)
{
    return (size_t)(BASE_STACK + 2 * cg_local_bytes(k) + 4095) / 4096 * 4096;
}

static void emu_kernel_begin(CgFn *g, const Kernel *k, const char *sym)
{
    const TeProgram *te = g->lp->te;
    LLVMTypeRef pt[5] = {g->ptr, g->ptr, g->i64, g->i64, g->ptr};
    LLVMValueRef fn = LLVMAddFunction(g->mod, sym, LLVMFunctionType(g->voidt, pt, 5, 0));
    const char *names[5] = {"dims", "bufs", "block", "thread", "shared"};
    for (unsigned i = 0; i < 5; i++)
        LLVMSetValueName2(LLVMGetParam(fn, i), names[i], strlen(names[i]));
    LLVMAddAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMCreateEnumAttribute(g->cx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    g->fn = fn;
    g->entry = LLVMAppendBasicBlockInContext(g->cx, fn, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    for (int i = 0; i < te->ndims + g->lp->nbuffers; i++) {
        bool isdim = i < te->ndims;
        if (!isdim && !g->use[i - te->ndims])
            continue;
        LLVMTypeRef ty = isdim ? g->i64 : g->ptr;
        LLVMValueRef idx = LLVMConstInt(g->i64, (unsigned long long)(isdim ? i : i - te->ndims), 0);
        LLVMValueRef p = LLVMBuildGEP2(g->b, ty, LLVMGetParam(fn, isdim ? 0 : 1), &idx, 1, "");
        LLVMValueRef v = LLVMBuildLoad2(g->b, ty, p, "");
        LLVMSetAlignment(v, 8);
        if (isdim)
            g->dimv[i] = v;
        else
            g->bufv[i - te->ndims] = v;
    }
    (void)k;
}

static void emu_kernel_end(CgFn *g) { LLVMBuildRetVoid(g->b); }

static CgRange emu_loop_range(CgFn *g, ForKind fk, LLVMValueRef extent)
{
    (void)extent;
    return (CgRange){.index = LLVMGetParam(g->fn, fk == FK_BLOCK ? 2 : 3), .guard = true};
}

/* A runtime function of the emulator, declared convergent like a barrier. */
static LLVMValueRef convergent_fn(CgFn *g, const char *name, LLVMTypeRef fty)
{
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (fn)
        return fn;
    fn = LLVMAddFunction(g->mod, name, fty);
    const char *attrs[] = {"convergent", "nounwind"};
    for (int i = 0; i < 2; i++)
        LLVMAddAttributeAtIndex(
            fn, LLVMAttributeFunctionIndex,
            LLVMCreateEnumAttribute(g->cx,
                                    LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
    return fn;
}

/* The number of calls to fn in the kernel so far: ids for its barriers. */
static int64_t calls_in_kernel(CgFn *g, LLVMValueRef fn)
{
    int64_t n = 0;
    for (LLVMUseRef u = LLVMGetFirstUse(fn); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef call = LLVMGetUser(u);
        n += LLVMGetBasicBlockParent(LLVMGetInstructionParent(call)) == g->fn;
    }
    return n;
}

/* A barrier is rt_simt_barrier_at(id), id numbering the kernel's barriers:
 * the host backend may tail-duplicate the call into several places (it
 * does not treat it as convergent), and the id keeps it one barrier. */
static void emu_barrier(CgFn *g)
{
    LLVMTypeRef fty = LLVMFunctionType(g->voidt, &g->i64, 1, 0);
    LLVMValueRef fn = convergent_fn(g, "rt_simt_barrier_at", fty);
    int64_t id = calls_in_kernel(g, fn);
    LLVMValueRef arg = LLVMConstInt(g->i64, (unsigned long long)id, 0);
    LLVMBuildCall2(g->b, fty, fn, &arg, 1, "");
}

/* A shuffle is rt_simt_shfl_xor(v, mask, id), its barriers numbered apart
 * from the kernel's own (ids from 2^40). */
static LLVMValueRef emu_shuffle_xor(CgFn *g, LLVMValueRef v, int mask)
{
    LLVMTypeRef pt[3] = {g->f32, g->i32, g->i64};
    LLVMTypeRef fty = LLVMFunctionType(g->f32, pt, 3, 0);
    LLVMValueRef fn = convergent_fn(g, "rt_simt_shfl_xor", fty);
    int64_t id = ((int64_t)1 << 40) + calls_in_kernel(g, fn);
    LLVMValueRef args[3] = {v, LLVMConstInt(g->i32, (unsigned)mask, 0),
                            LLVMConstInt(g->i64, (unsigned long long)id, 0)};
    return LLVMBuildCall2(g->b, fty, fn, args, 3, "");
}

/* An async copy is rt_simt_cp_async(dst, src, bytes, src_bytes): the
 * emulator writes it at the thread's next rt_simt_cp_wait, so a read
 * before that sees the old contents, as it may on a GPU. */
static void emu_async_copy(CgFn *g, LLVMValueRef dst, LLVMValueRef src, int bytes,
                           LLVMValueRef src_bytes)
{
    LLVMTypeRef pt[4] = {g->ptr, g->ptr, g->i32, g->i32};
    LLVMTypeRef fty = LLVMFunctionType(g->voidt, pt, 4, 0);
    LLVMValueRef fn = convergent_fn(g, "rt_simt_cp_async", fty);
    LLVMValueRef args[4] = {dst, src, LLVMConstInt(g->i32, (unsigned)bytes, 0), src_bytes};
    LLVMBuildCall2(g->b, fty, fn, args, 4, "");
}

static void emu_async_wait(CgFn *g)
{
    LLVMTypeRef fty = LLVMFunctionType(g->voidt, NULL, 0, 0);
    LLVMBuildCall2(g->b, fty, convergent_fn(g, "rt_simt_cp_wait", fty), NULL, 0, "");
}

static LLVMValueRef emu_shared_alloc(CgFn *g, const Tensor *buf, LLVMTypeRef ty)
{
    int64_t at = cg_shared_offset(g->lp, buf, NULL);
    IR_ASSERT(at >= 0);
    (void)ty;
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->cx);
    LLVMValueRef off = LLVMConstInt(g->i64, (unsigned long long)at, 0);
    return LLVMBuildInBoundsGEP2(g->b, i8, LLVMGetParam(g->fn, 4), &off, 1, buf->name);
}

static LLVMValueRef emu_math(CgFn *g, CgMath f, LLVMValueRef a, LLVMValueRef b)
{
    return cg_target_cpu()->math(g, f, a, b);
}

static void emu_init(void)
{
    const CgTarget *cpu = cg_target_cpu();
    emu = (CgTarget){
        .name = "emu",
        .triple = cpu->triple,
        .cpu = cpu->cpu,
        .features = cpu->features,
        .level = cpu->level, /* runs on this CPU: vector math as wide */
        .kernel_begin = emu_kernel_begin,
        .kernel_end = emu_kernel_end,
        .loop_range = emu_loop_range,
        .barrier = emu_barrier,
        .shared_alloc = emu_shared_alloc,
        .shuffle_xor = emu_shuffle_xor,
        .async_copy = emu_async_copy,
        .async_wait = emu_async_wait,
        .index32 = true,
        .math = emu_math,
    };
}

const CgTarget *cg_target_emu(void)
{
    pthread_once(&emu_once, emu_init);
    return &emu;
}
