/* dietcode/abi.h: what the code dcc generates and libdcrt.a agree on.
 *
 * Every object `dcc --emit=obj` writes holds one DcrtProgram: a table of
 * the program's dims, buffers, kernels, the variants of each stage and the
 * dispatch trees that pick one, and a function that evaluates its size
 * expressions (extents, grids) for given dims. Its exported functions hand
 * that table to libdcrt (dcrt_run on the CPU, dcrt_cuda_run on the GPU),
 * where runtime/plan.c turns it and the dims into the launches of one call,
 * with every range and size check: the one place that picks variants,
 * computes grids and lays out the workspace. `dcc run` JIT-compiles the
 * same object code, and dcc's other executors build the same table for a
 * lowered program (exec/plan.c), so what dcc runs and tests is what an
 * object ships.
 *
 * This header depends on nothing; the generated headers repeat its error
 * codes token for token.
 */
#ifndef DIETCODE_ABI_H
#define DIETCODE_ABI_H

#include <stdint.h>

#define DCRT_ABI_VERSION 5

/* The most elements a tensor (or scratch buffer) may have: 2^31 - 2^20 - 1,
 * so that GPU kernels may index in 32 bits, every position of a tile that
 * runs up to 2^20 elements past a tensor's end included. */
#define DCRT_MAX_ELEMENTS 2146435071

/* Error codes of generated prog_run / prog_launch and of libdcrt. */
#define DCRT_OK 0
#define DCRT_ERR_DIM_RANGE 1     /* a dim < LO or > the largest accepted value */
#define DCRT_ERR_TOO_LARGE 2     /* a tensor over DCRT_MAX_ELEMENTS elements, or a grid over INT32_MAX */
#define DCRT_ERR_NULL_POINTER 3  /* a tensor pointer, or the program, dims or tensors array, is NULL */
#define DCRT_ERR_OUT_OF_MEMORY 4 /* the workspace could not be allocated */
#define DCRT_ERR_THREADS 5       /* the thread pool could not start */
#define DCRT_ERR_NO_DRIVER 6     /* no libcuda.so.1 */
#define DCRT_ERR_NO_DEVICE 7     /* a driver, but no usable device */
#define DCRT_ERR_CUDA 8          /* another CUDA driver error */
#define DCRT_ERR_MODULE 9        /* the driver rejected the PTX */
#define DCRT_ERR_CPU 10          /* the CPU lacks every instruction set the kernels were built for */
#define DCRT_ERR_INDEX 11        /* an index read from a tensor (a gather) is out of range */

/* The code word of the gathers' error record (DCRT_BUF_CHECK): which
 * access (tensor, axis) was out, and the tensor being computed; 0 is none. */
#define DCRT_INDEX_CODE(axis, tensor, out) \
    (1 + (int64_t)(axis) + 16 * ((int64_t)(tensor) + 65536 * (int64_t)(out)))
#define DCRT_INDEX_AXIS(code) (((code) - 1) % 16)
#define DCRT_INDEX_TENSOR(code) (((code) - 1) / 16 % 65536)
#define DCRT_INDEX_OUT(code) (((code) - 1) / 16 / 65536)

/* Element types of tensors (the compiler's DType has the same values). A
 * bool element is one byte, 0 or 1. */
#define DCRT_F32 0
#define DCRT_I32 1
#define DCRT_I64 2
#define DCRT_BOOL 3

/* Workspace buffers start at multiples of this many bytes. */
#define DCRT_ALIGN 256

/* The CPU kernel ABI: runs blocks [block_begin, block_end) of a kernel.
 * dims[pos] is dim pos's value, bufs[id] buffer id's first element. */
typedef void (*DcrtKernelFn)(const int64_t *dims, float *const *bufs, int64_t block_begin,
                             int64_t block_end);

/* Size expression `which` of a program (an extent or a grid) over dims by
 * position, in exact int64 arithmetic; *overflow is set to 1 when a step
 * overflows (and left alone otherwise). */
typedef int64_t (*DcrtSizeFn)(const void *ctx, int32_t which, const int64_t *dims,
                              int32_t *overflow);

enum {
    DCRT_BUF_INPUT,   /* a parameter the caller fills */
    DCRT_BUF_OUTPUT,  /* a parameter the program fills */
    DCRT_BUF_TEMP,    /* an intermediate tensor: in the workspace */
    DCRT_BUF_SCRATCH, /* what one variant's kernels pass between them: in the workspace when it runs */
    DCRT_BUF_INLINED, /* an intermediate computed inside its consumers: no memory */
    DCRT_BUF_CHECK,   /* the gathers' error record: int64[4] in the workspace, zeroed before a
                       * call's launches and read after them (dcrt_index_check) */
    DCRT_BUF_CONST,   /* a constant: its elements at data, in the object (not a parameter) */
};

typedef struct DcrtDim {
    const char *name;
    int64_t lo, hi; /* the declared range */
    int64_t max;    /* the largest value the program accepts (>= hi) */
} DcrtDim;

typedef struct DcrtBuffer {
    const char *name;
    int32_t kind;          /* DCRT_BUF_* */
    int32_t rank;
    int32_t extents;       /* its extents are size expressions extents .. extents + rank - 1 */
    int32_t stage;         /* DCRT_BUF_SCRATCH: the stage and variant that use it; else -1 */
    int32_t variant;
    /* DCRT_BUF_TEMP and _SCRATCH: the stages that write it first and read it
     * last; the plan lets buffers whose spans do not meet share memory */
    int32_t first, last;
    int32_t dtype;         /* DCRT_F32 ... */
    const void *data;      /* DCRT_BUF_CONST: its elements (on the GPU, copied to each context
                            * once); NULL for one no kernel reads */
} DcrtBuffer;

typedef struct DcrtKernel {
    const char *name;
    int32_t blocks;        /* the size expression of its grid */
    int32_t threads;       /* threads per block (GPU) */
    int32_t shared_bytes;  /* GPU: dynamic shared memory per block (0: none) */
    int32_t args, nargs;   /* GPU: the buffers it takes after the dims, as buffer ids:
                            * DcrtProgram.kernel_args[args .. args + nargs - 1] */
} DcrtKernel;

/* A way of computing a stage: kernels first .. first + count - 1, in order. */
typedef struct DcrtVariant {
    int32_t first, count;
} DcrtVariant;

/* A dispatch tree node: a leaf names a variant of its stage (variant >= 0);
 * a split goes to then_node when dims[dim] <= le, else to else_node (node
 * indices within the stage's tree, children after their parent). */
typedef struct DcrtNode {
    int32_t variant, dim, then_node, else_node;
    int64_t le;
} DcrtNode;

typedef struct DcrtStage {
    const char *name;
    int32_t variants, nvariants; /* its variants in DcrtProgram.variants */
    int32_t nodes, nnodes;       /* its tree in DcrtProgram.nodes; none: variant 0 */
} DcrtStage;

typedef struct DcrtProgram {
    int32_t abi;                 /* DCRT_ABI_VERSION */
    const char *name;
    int32_t ndims, nbuffers, nparams, nkernels, nvariants, nnodes, nstages, nisas;
    const DcrtDim *dims;         /* by position */
    const DcrtBuffer *buffers;   /* by id: the program's tensors, then scratch buffers */
    const int32_t *params;       /* the entry's tensor arguments as buffer ids: inputs, then outputs */
    const DcrtKernel *kernels;
    const DcrtVariant *variants;
    const DcrtNode *nodes;
    const DcrtStage *stages;     /* in execution order */
    DcrtSizeFn size;
    const void *size_ctx;
    /* CPU objects: the kernels for each instruction set, preferred first */
    const int32_t *isa_levels;   /* nisas: the x86-64 level (1..4) each needs */
    const char *const *isa_names;
    const DcrtKernelFn *fns;     /* nisas x nkernels */
    /* GPU objects */
    const char *ptx;
    void **module_cache;         /* NULL-initialised: where libdcrt keeps the loaded module */
    const int32_t *kernel_args;  /* the kernels' buffer parameters (DcrtKernel.args) */
    /* CPU objects: the program lowered for other instruction sets (its own
     * kernels, plan and workspace), run when the CPU has none of this
     * one's; NULL: none */
    const struct DcrtProgram *next;
} DcrtProgram;

/* One call's launches and memory, from runtime/plan.c. */
typedef struct DcrtLaunch {
    int32_t stage, variant, kernel, threads;
    int64_t blocks;
} DcrtLaunch;

typedef struct DcrtPlan {
    int32_t nlaunches;
    DcrtLaunch *launches;    /* at most nkernels */
    int32_t *variant;        /* per stage */
    int64_t *numel;          /* per buffer; 0 for a scratch buffer this call does not use */
    int64_t *offset;         /* per buffer: byte offset in the workspace, or -1 */
    int64_t workspace_bytes;
    void *own;               /* runtime/plan.c's room for laying the workspace out */
} DcrtPlan;

#endif
