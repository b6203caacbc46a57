/* dietcode/passes.h: the passes layer's table of contents.
 *
 * A TE program and a schedule per stage (one micro-kernel, or several
 * variants and the dispatch tree that picks one per shape) go in; a
 * LoopProgram comes out, a kernel per variant. passes/pipeline.c runs the
 * passes in a fixed, visible order:
 *
 *   inline   TE: elementwise intermediates fused into consumers or
 *            materialised, by the recomputation fusing causes
 *   lower    TE + micro-kernels -> one canonical loop nest per kernel
 *   tile     block / thread / register-tile loops, reduction chunks
 *   stage    operands staged per block (GPU shared memory, CPU packing)
 *   pad      local padding: guarded loads, unguarded compute, guarded stores
 *   bind     map blocks and threads to the target (CPU: split at barriers)
 *   simplify fold and drop guards that interval analysis proves redundant
 *   vectorize  unroll register tiles, vectorise the innermost one
 *
 * Passes never print except through the pipeline's dump hook, keep no
 * global state, and report user-facing problems as return values.
 */
#ifndef DIETCODE_PASSES_H
#define DIETCODE_PASSES_H

#include "dietcode/ir.h"

/* The lowering's version: which kernel a schedule's text means. Every
 * records line carries it (search/records.c), and a line of another
 * lowering is not read: its times were measured on other kernels. Bump it
 * whenever a change to passes/, codegen/ or ir/ (the simplifier, the
 * index arithmetic) makes the same schedule or micro-kernel text produce
 * a different kernel (other loops, staging, packing, index arithmetic,
 * instructions), so that times measured before no longer describe it. A
 * change that leaves every existing text's kernel as it was (a new
 * clause, a refactoring, a fix of a kernel that failed to compile) needs
 * none. 2: a division by a product of dims and a constant divides by the
 * constant first (a reshape's row no longer divided per element). 3: a
 * packed variant's panels are a thread's tile wide, not a block's. 4: a
 * constant's panels are at most 16 wide (passes/lower.c). */
enum { PASS_LOWERING_VERSION = 4 };

typedef enum PassTarget { PT_CPU, PT_GPU } PassTarget;

/* Limits of the target the schedule must respect. */
typedef struct TargetInfo {
    PassTarget kind;
    int vec_width;        /* floats per vector register (CPU) / 4 on GPU */
    int max_threads;      /* per block */
    int shared_bytes;     /* per block */
    int64_t cache[3];     /* CPU: L1 data, L2, L3 bytes (the default blockings) */
    bool async_copy;      /* GPU: copies into shared memory without registers
                           * (cp.async, sm_80 and later; pass_target_gpu_arch) */
    int vregs;            /* CPU: vector registers (32 with AVX-512, else 16) */
} TargetInfo;

/* The schedule of one stage: its micro-kernel variants (each legalised)
 * and the tree that picks one per shape (NULL: variant 0). */
typedef struct StageSchedule {
    int nvariants;
    const MicroKernel *variants;
    const Dispatch *dispatch;
} StageSchedule;

/* passes/inline.c */
/* Marks which tensors need a global buffer (materialized[id]) and
 * substitutes the other elementwise intermediates into their consumers.
 * Returns the rewritten body of each computed tensor in bodies[t->id]. */
void pass_inline(TeProgram *p, Expr **bodies, bool *materialized);
/* Whether t's fusion is a choice: an intermediate without a reduction. */
bool pass_fuse_choosable(const Tensor *t);
/* Per tensor id, inlining's cost over materialising's as the cost model
 * weighs them (> 1: the model materialises), with the other tensors'
 * Fuse as set; NAN where pass_fuse_choosable is false. */
void pass_fuse_ratios(const TeProgram *p, double *ratio);
/* "inline", "materialize" (FUSE_COST: "cost"), and back; false when
 * text names neither of the first two. */
const char *pass_fuse_name(Fuse f);
bool pass_parse_fuse(const char *text, Fuse *out);

/* passes/microkernel.c */
/* One thread of one point, no chunks, no vectors: what every micro-kernel
 * starts from. */
MicroKernel pass_unit_microkernel(void);
/* The number of spatial axes and the fused reduction extent of a stage. */
bool pass_stage_has_reduction(const Expr *body);
/* Whether e holds a checked index (EX_CHECK: a gather's). */
bool pass_has_check(const Expr *e);
MicroKernel pass_default_microkernel(const TeProgram *p, const Tensor *t, const Expr *body,
                                     const TargetInfo *ti);
/* The schedule of a stage without tuning records: the default
 * micro-kernel, or for a CPU dense layer whose rows are a dim that one
 * for few rows, the outer-product kernel for many, and that kernel packed
 * by a launch of its own for very many, with the tree that picks by the
 * rows' dim. In p's arena. */
StageSchedule pass_default_schedule(TeProgram *p, const Tensor *t, const Expr *body,
                                    const TargetInfo *ti);
/* The outer-product kernel of a rank >= 2 reduction (BLIS): mr rows x 2
 * vectors of accumulators a thread, up to row_tiles row tiles a block
 * sharing a packed panel of the operand read along the vectors. Blocked
 * for ti's caches: the chunk (KC) the longest of 4 to 64 vectors, in
 * powers of two, whose panel (KC x 2 vectors) fits the L1 data cache;
 * the rows a block reads of the other operand (row tiles x mr x KC) in
 * half of L2. k > 0: the length of a one-axis reduction, cut into the
 * fewest chunks of at most KC, evened out and rounded up to whole vectors
 * (a packed panel runs to whole chunks: K = 300 in chunks of 256 would
 * pack and multiply 212 zeros a row, in two of 160 it is 20). Not
 * legalised. */
MicroKernel pass_outer_microkernel(int rank, const TargetInfo *ti, int mr, int row_tiles,
                                   int64_t k);
/* The k of pass_outer_microkernel for the reduction red: its length when
 * it has one axis of constant extent (the reductions passes/lower.c cuts
 * into chunks), else 0; NULL: 0. */
int64_t pass_chunked_length(const Expr *red);
/* The chunk of a one-axis reduction of length k cut into chunks of about
 * rchunk: rchunk rounded up to whole runs of v, then the fewest chunks of
 * that length evened out and rounded up to whole runs of v (K = 300 in
 * chunks of 256 with v = 16: two of 160), so that no chunk is mostly
 * zeros past k. rchunk where k or rchunk is not positive; applied to its
 * own result, the same. The templates' and the search's rule. */
int pass_even_chunk(int64_t k, int rchunk, int v);
/* Clamps a micro-kernel to what the target and the stage allow. */
void pass_legalize_microkernel(MicroKernel *mk, const Tensor *t, const TargetInfo *ti);
/* The budgets pass_check_microkernel holds every micro-kernel to (DESIGN.md,
 * "Core data structures"): a CPU block's frame on its thread's stack (its
 * accumulators, with a staged block every thread's, plus ti->shared_bytes
 * of staging: half of the 8 MiB stack a caller's thread has by default),
 * a GPU thread's accumulators in registers (the most a thread may have),
 * and the statements of the unrolled update (twice the search's largest). */
enum { PASS_MAX_CPU_FRAME = 4 << 20, PASS_MAX_GPU_ACCUMULATORS = 255, PASS_MAX_UNROLLED = 512 };
/* Whether mk, as pass_legalize_microkernel leaves it for t and ti, runs
 * within those budgets; else false with one line naming the stage, the
 * size and the limit. The one check of --mk, of records' kernels and of
 * the search's draws, and the pipeline's of every variant it lowers. */
bool pass_check_microkernel(const MicroKernel *mk, const Tensor *t, const TargetInfo *ti,
                            char *err, size_t errlen);
/* The micro-kernels of a variant of t that splits its reduction (mk.split
 * > 1): the partial results' (mk over the parts as a new outermost axis,
 * one part per block) and their combination's (elementwise shaped). */
void pass_split_microkernels(const MicroKernel *mk, const Tensor *t, const TargetInfo *ti,
                             MicroKernel *partial, MicroKernel *combine);
/* A packing launch of its own (mk.pack) pays where a call has at least
 * this many row blocks, each of which would otherwise pack every panel
 * again (bench/README.md: behind at one row block, even at three, ahead
 * from four): the default schedule's threshold and the search's. */
enum { PASS_PACK_MIN_ROW_BLOCKS = 4 };
/* What a packed variant of t (mk.pack) is (passes/lower.c): the staged
 * one-launch kernel where its body's outer reduction reads no panel
 * operand (NONE); a packing launch and the compute (LAUNCH); or where the
 * panel operand is a constant whose panels are known when compiling (its
 * indices free of dims, their extents fixed), the compute alone, reading
 * panels packed now, which the object carries as a constant (CONST). */
typedef enum PassPack { PASS_PACK_NONE, PASS_PACK_LAUNCH, PASS_PACK_CONST } PassPack;
PassPack pass_pack_kind(ExprCtx *c, const Tensor *t, Expr *body);
/* The micro-kernel of a packed variant's packing launch (mk.pack, passes/
 * lower.c), elementwise over its panels P[jb, k..., l]. */
MicroKernel pass_pack_microkernel(const Tensor *P, const TargetInfo *ti);
/* Whether a split-K of body may add its parts into the output atomically
 * (mk.atomic): its outer reduction is a sum and body is affine in it
 * (passes/lower.c). */
bool pass_atomic_split_ok(Expr *body);
/* Reads the form ir_print_microkernel writes: "threads [4, 8] tile [6, 32]
 * rchunk 256 unroll 1 vec 16 [along reduction] [staged] [split 4 [atomic]] ... [packed]". The
 * lists give the spatial axes in order; *nspatial gets their number. */
bool pass_parse_microkernel(const char *s, MicroKernel *mk, int *nspatial);

/* passes/lower.c */
/* sched[t->id] for every computed, materialised tensor: at least one
 * variant, each one kernel, or two and a scratch buffer when it splits its
 * reduction or packs a panel operand. release: p's last compile; each
 * constant that only packed panels read is given back
 * (ir_te_release_const) once the last stage reading it is lowered, so
 * the weights and their panels are not all held at once. */
LoopProgram *pass_lower(TeProgram *p, Expr **bodies, const bool *materialized,
                        const StageSchedule *sched, const TargetInfo *ti, bool release);

/* passes/tile.c */
void pass_tile(LoopProgram *lp, const TargetInfo *ti);
/* passes/stage.c */
void pass_stage(LoopProgram *lp, const TargetInfo *ti);
/* passes/pad.c */
void pass_pad(LoopProgram *lp);
/* passes/bind.c */
void pass_bind(LoopProgram *lp, const TargetInfo *ti);
/* passes/simplify.c */
void pass_simplify(LoopProgram *lp);
/* passes/vectorize.c */
void pass_vectorize(LoopProgram *lp, const TargetInfo *ti);
/* passes/edge.c */
void pass_edge(LoopProgram *lp, const TargetInfo *ti);
/* passes/hoist.c */
void pass_hoist(LoopProgram *lp);

/* passes/target.c */
/* The target's limits; the CPU's caches are this host's (sysfs), its
 * vectors those of this host's x86-64 level (pass_target_info_cpu). */
TargetInfo pass_target_info(PassTarget kind);
/* A CPU of x86-64 level 1..4: vectors of 16 floats and 32 registers at
 * level 4 (AVX-512), of 8 floats and 16 registers at level 3 (AVX2), of 4
 * and 16 below (SSE); the caches this host's. */
TargetInfo pass_target_info_cpu(int level);
/* Narrows a GPU target's ti to the architecture arch ("sm_75", ...; NULL:
 * the default sm_80): no cp.async before sm_80; the shared memory a block
 * may opt into (64 KB on sm_75 up to 227 KB on sm_90; pass_target_info's
 * 48 KB is what any kernel may declare statically). */
void pass_target_gpu_arch(TargetInfo *ti, const char *arch);
/* The compute capability arch names, as a number: 75 for "sm_75", 90 for
 * "sm_90a"; 80 (the default arch) for NULL or a name of another form. The
 * one reading of an arch's name (which archs exist: cg_target_nvptx). */
int pass_sm_version(const char *arch);
/* The typical L1 data, L2 and L3 cache sizes: 32 KiB, 1 MiB, 32 MiB. */
void pass_typical_caches(int64_t cache[3]);
/* This host's L1 data, L2 and L3 cache sizes in bytes, as sysfs reports
 * cpu0's; the typical ones where it says nothing. */
void pass_host_caches(int64_t cache[3]);

/* passes/pipeline.c */
typedef struct PipelineOpts {
    const char *dump_after;  /* pass name, "all", or NULL */
    const char *stop_after;  /* pass name or NULL */
    bool verify_each;
    bool time_passes;
    FILE *dump;              /* where dumps and timings go (stderr if NULL) */
    /* p's last compile: the constants only packed panels read are given
     * back while lowering (pass_lower's release); p is not lowered or
     * interpreted again (ir_te_consts_whole) */
    bool release_consts;
} PipelineOpts;

/* The names of the passes in order, NULL-terminated (for option checking). */
const char *const *pass_names(void);
/* Lowers p with the given micro-kernels (NULL: the defaults; mks is indexed
 * by tensor id). Returns NULL with a message on a verifier failure or a
 * micro-kernel past pass_check_microkernel's budgets. */
LoopProgram *pass_run_pipeline(TeProgram *p, const MicroKernel *mks, const TargetInfo *ti,
                               const PipelineOpts *opts, char *err, size_t errlen);
/* The same with any number of variants per stage (sched indexed by tensor
 * id; NULL, or an entry with nvariants 0: the default micro-kernel alone).
 * Variant 0 of tensor Y is named PROG_Y as without variants, variant v > 0
 * PROG_Y_vV. */
LoopProgram *pass_run_pipeline_sched(TeProgram *p, const StageSchedule *sched,
                                     const TargetInfo *ti, const PipelineOpts *opts, char *err,
                                     size_t errlen);

#endif
