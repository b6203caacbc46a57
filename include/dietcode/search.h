/* dietcode/search.h: the search layer's table of contents.
 *
 * The search finds, for one workload (a TE program over dynamic dims) and
 * one target, a small set of micro-kernels and a dispatch tree that picks
 * one of them for any shape. It measures a great deal, so every
 * measurement goes to a records file the moment it is taken: a killed or
 * interrupted run loses nothing already written and a rerun with the same
 * file measures nothing twice. After the search, the winner at every shape
 * point is known from measurements (the oracle); a depth-limited CART tree
 * fit to (shape -> winner) is what the host code dispatches on, and its
 * accuracy against the oracle and the slowdown of its misses are reported.
 *
 * Library code here never prints and never exits: problems come back as
 * values with one-line messages (err, errlen as in the runtime: err may be
 * NULL) and damaged input is reported and skipped, never fatal.
 */
#ifndef DIETCODE_SEARCH_H
#define DIETCODE_SEARCH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dietcode/ir.h"
#include "dietcode/passes.h"

/* search/records.c
 *
 * A records file is JSON lines: one measurement (or one fitted dispatch
 * tree) per line, appended with a single write() and flushed to disk
 * before srch_records_append returns. Schema, version 2 (field order as
 * written; readers do not rely on it):
 *
 *   {"v": 2,                          schema version
 *    "lowering": 1,                   PASS_LOWERING_VERSION: the kernels
 *                                     the micro-kernel meant when measured
 *    "workload": "9f3a...",           the stage's workload fingerprint
 *                                     (srch_fingerprint: its canonical TE,
 *                                     target and arch)
 *    "target": "cpu",                 "cpu", "cuda" or "model"
 *    "arch": "sapphirerapids",        what it ran on: the CPU's LLVM name,
 *                                     or the GPU's sm_XX
 *    "stage": "C",                    the tensor it computes (informative)
 *    "mk": "threads [4, 8] tile [6, 32] rchunk 256 unroll 1 vec 16",
 *                                     ir_print_microkernel's form
 *    "shape": {"M": 128, "N": 768},   dim name -> value (integers)
 *    "kind": "trial",                 "trial" | "select" | "turns" | "check"
 *                                     | "baseline" | "baseline-check"
 *                                     (SrchRecordKind)
 *    "trial": 17,                     the search's trial index (integer >= 0)
 *    "times_ms": [0.51, 0.50, 0.52],  every repeat, at least one, finite, >= 0
 *    "median_ms": 0.51,               their median
 *    "dropped": 2,                    optional: runs dropped as disturbed,
 *                                     slow or outliers (integer >= 0), not
 *                                     in times_ms
 *    "ts": 1712345678}                seconds since the epoch
 *
 * and, after a stage is tuned, its dispatch tree:
 *
 *   {"v": 2, "kind": "tree", "workload": ..., "target": ..., "arch": ...,
 *    "stage": "C", "tree": TREE (srch_tree_to_json), "ts": ...}
 *
 * and, for a program whose fusion the tuner searched (or --fuse fixed), one
 * line per decided intermediate, filed under the program's fingerprint
 * (srch_program_fingerprint):
 *
 *   {"v": 2, "kind": "fuse", "workload": ..., "target": ..., "arch": ...,
 *    "stage": "E", "fuse": "materialize" | "inline" | "cost", "ts": ...}
 *
 * ("cost": the cost model decides; a tune writes a line only where the
 * latest one says otherwise). An older dcc reports fuse lines as damaged.
 *
 * Every line, tree and fuse lines too, carries "lowering". Lines of
 * workloads not asked for are skipped (counted as foreign). Version 1
 * lines (an older dcc: one fingerprint per program) are not read, nor are
 * lines of another lowering (without the field: lowering 0, written before
 * it was versioned): their times are of kernels the same text no longer
 * builds, and the trees and fusions chosen by them. Each kind's count gets
 * one warning; the lines stay in the file (it is only ever appended to).
 * The field is optional to the schema, so its version stays 2: an older
 * dcc reads lines of any lowering as its own. A line that is not such a
 * record (truncated, garbage, NUL bytes, longer than SRCH_MAX_LINE, wrong
 * types, missing fields, integers that are not exact or out of range, a
 * micro-kernel pass_parse_microkernel rejects, another version) is
 * skipped with a warning that names its line; nothing else is lost. Micro-kernels
 * are text only in the file: records hold them parsed.
 */
enum {
    SRCH_RECORDS_VERSION = 2,
    SRCH_MAX_LINE = 1 << 20,    /* bytes; longer lines are reported and skipped */
    SRCH_MAX_DIMS = 64,         /* dims in one shape */
    SRCH_MAX_WARNINGS = 100,    /* warnings kept; srch_records_ncorrupt counts all */
};

typedef enum SrchRecordKind {
    RK_TRIAL,    /* measured during the search */
    RK_SELECT,   /* measured in the selection step, per shape point */
    RK_BASELINE, /* measured by the per-shape baseline (--per-shape) */
    RK_TURNS,    /* the selection's close contenders measured again in turns:
                  * the latest record of its key, a second measurement */
    RK_CHECK,    /* before the tree is written, the choice at a shape point
                  * and the next best there, measured again in turns: what
                  * the tree is fitted on, but not what the search or the
                  * selection saw (a rerun's search and selection go as the
                  * first run's did) */
    RK_BASELINE_CHECK, /* the same, of the per-shape baseline's choices */
} SrchRecordKind;
/* Whether a record of kind k is the per-shape baseline's (the joint
 * search and the baseline never share measurements), whether it is a
 * measurement again in turns (the selection's or the check's), and
 * whether it is the check's. */
bool srch_record_is_baseline(SrchRecordKind k);
bool srch_record_is_turns(SrchRecordKind k);
bool srch_record_is_check(SrchRecordKind k);

typedef struct SrchRecord {
    const char *workload, *target, *arch;
    const char *stage;
    MicroKernel mk;
    int nspatial;            /* mk's spatial axes: the stage's rank */
    int ndims;
    const char **dim_names;  /* ndims, in the order given or read */
    int64_t *dim_values;
    int ntimes;
    double *times_ms;        /* ntimes >= 1 */
    int ndropped;            /* runs timed but dropped: disturbed, slow (the machine busy), outliers */
    double median_ms;        /* filled by srch_records_append */
    SrchRecordKind kind;
    int64_t trial;
    int64_t ts;              /* 0 in srch_records_append: the current time */
    /* the search's trials: the model's features of mk (nfeat ==
     * SRCH_NFEAT, else 0 and none) and the work the shape adaptation gives
     * the shape (FLOP, > 0), so work / median is the model's label: what a
     * warm start learns from (search/tune.c) */
    int nfeat;
    const float *features;
    double work;
} SrchRecord;

/* One damaged line of a records file: "PATH:LINE: reason"; line 0: the
 * count of the file's lines not read (of version 1, of another lowering),
 * one warning for each reason. */
typedef struct SrchWarning {
    int64_t line;
    const char *msg;
} SrchWarning;

typedef struct SrchRecords SrchRecords;
typedef struct SrchTree SrchTree;

/* Loads the records of the n workloads asked for (workloads NULL: of
 * every workload) from path, if it exists, then opens it for appending
 * (creating it). NULL with a one-line message in err when the file cannot
 * be read or opened; a damaged line is never an error. */
SrchRecords *srch_records_open(const char *path, int n, const char *const *workloads, char *err,
                               size_t errlen);
/* The same, read only: the file is not created or opened for writing (a
 * records file another user owns can be compiled with); appending fails.
 * A file that does not exist is an error (saying so), as is one that is
 * not a regular file. */
SrchRecords *srch_records_read(const char *path, int n, const char *const *workloads, char *err,
                               size_t errlen);
/* Appends one measurement (also visible to srch_records_find at once).
 * Returns false with a message when rec is invalid or the write fails. */
bool srch_records_append(SrchRecords *r, const SrchRecord *rec, char *err, size_t errlen);
/* Appends the fitted tree of a workload (srch_records_tree's answer from
 * now on). */
bool srch_records_append_tree(SrchRecords *r, const char *workload, const char *target,
                              const char *arch, const char *stage, const SrchTree *t, char *err,
                              size_t errlen);
/* The latest record of (workload, micro-kernel, shape), or NULL. The shape
 * is a set of (name, value) pairs, so the order of dims does not matter.
 * Hash lookup. */
const SrchRecord *srch_records_find(const SrchRecords *r, const char *workload,
                                    const MicroKernel *mk, int ndims,
                                    const char *const *dim_names, const int64_t *dim_values);
/* The same among the baseline's records (baseline) or the joint search's
 * (trials and selection): the two never share measurements. */
const SrchRecord *srch_records_find_class(const SrchRecords *r, const char *workload,
                                          const MicroKernel *mk, int ndims,
                                          const char *const *dim_names,
                                          const int64_t *dim_values, bool baseline);
/* Whether record x is of (workload, micro-kernel, shape), the shape as
 * above: the one rule of a record's key, which the lookups use. */
bool srch_record_has_key(const SrchRecord *x, const char *workload, const MicroKernel *mk,
                         int ndims, const char *const *dim_names, const int64_t *dim_values);
/* Appends a fuse line: intermediate stage of the program whose fingerprint
 * is workload is inlined, materialised, or (FUSE_COST) left to the cost
 * model. */
bool srch_records_append_fuse(SrchRecords *r, const char *workload, const char *target,
                              const char *arch, const char *stage, Fuse f, char *err,
                              size_t errlen);
/* The latest fuse line's choice for stage of program workload; FUSE_COST
 * when there is none. */
Fuse srch_records_fuse(const SrchRecords *r, const char *workload, const char *stage);
/* The latest tree stored for workload, or NULL (owned by r). */
const SrchTree *srch_records_tree(const SrchRecords *r, const char *workload);
/* Whether workload has a stored tree and no measurement of it came after
 * the tree (a finished tune's result, which a repeated tune keeps). */
bool srch_records_tree_current(const SrchRecords *r, const char *workload);
int srch_records_count(const SrchRecords *r);            /* measurements loaded and appended */
const SrchRecord *srch_records_at(const SrchRecords *r, int i);  /* file order */
/* The distinct archs of target's records, in order of first appearance. */
int srch_records_archs(const SrchRecords *r, const char *target, const char **out, int max);
int srch_records_nforeign(const SrchRecords *r);         /* other workloads */
int srch_records_ncorrupt(const SrchRecords *r);         /* damaged lines skipped */
int srch_records_nold(const SrchRecords *r);             /* version 1 lines skipped */
int srch_records_nstale(const SrchRecords *r);           /* another lowering's skipped */
int srch_records_nwarnings(const SrchRecords *r);        /* <= SRCH_MAX_WARNINGS */
const SrchWarning *srch_records_warning(const SrchRecords *r, int i);
const char *srch_record_kind_name(SrchRecordKind k);
/* Closes the file and frees everything, records included. NULL is fine. */
void srch_records_close(SrchRecords *r);

/* search/tree.c
 *
 * The dispatch tree: a CART classification tree over the dims' values
 * whose leaves name micro-kernels. Splits are "dims[dim] <= le". It is fit
 * to minimise the total measured latency of the kernels its leaves choose
 * (misclassification cost, not Gini): a leaf takes the kernel with the
 * least summed cost over its samples, and a split is taken only when it
 * lowers that sum. Ties go to the lower dim index, then the lower
 * threshold, then the lower kernel id, so a fit is deterministic.
 *
 * JSON form, version 1:
 *   {"v": 1, "dims": ["M", "N"], "kernels": ["threads [..] ...", ...],
 *    "tree": {"dim": "M", "le": 16, "then": {"kernel": 0},
 *                                   "else": {"dim": "N", "le": 512,
 *                                            "then": {"kernel": 1}, "else": {"kernel": 0}}}}
 * "then" is taken when the dim's value is <= le; a leaf is {"kernel": id},
 * an index into "kernels".
 */
enum { SRCH_TREE_MAX_DEPTH = 32 };

/* Training data: n samples over ndims dims, nkernels candidates. */
typedef struct SrchDataset {
    int n, ndims, nkernels;
    const int64_t *dims;            /* n x ndims, row-major */
    const int *label;               /* n: the measured winner (oracle), 0..nkernels-1 */
    /* n x nkernels measured latency, NAN where not measured; an unmeasured
     * kernel counts as the sample's slowest measured one. NULL: 0/1 cost
     * (plain misclassification count, no slowdown figures). */
    const double *cost;
    const char *const *dim_names;   /* ndims */
    const MicroKernel *kernels;     /* nkernels */
    int nspatial;                   /* the kernels' spatial axes */
} SrchDataset;

typedef struct SrchTreeParams {
    int max_depth;  /* splits on any path, 0..SRCH_TREE_MAX_DEPTH */
    int min_leaf;   /* samples in each child of a split, >= 1 */
} SrchTreeParams;

typedef enum SrchNodeKind {
    TN_LEAF,   /* kernel */
    TN_SPLIT,  /* dim, le, then_node, else_node */
} SrchNodeKind;

typedef struct SrchTreeNode {
    SrchNodeKind kind;
    int kernel;
    int dim;
    int64_t le;
    int then_node, else_node;  /* indexes into nodes, always > this node's */
} SrchTreeNode;

/* nodes[0] is the root; nodes are in preorder. */
struct SrchTree {
    int ndims;
    char **dim_names;
    int nkernels;
    MicroKernel *kernels;
    int nspatial;
    int nnodes;
    SrchTreeNode *nodes;
};

/* How well a tree dispatches a dataset, against its oracle labels. */
typedef struct SrchTreeScore {
    int n, hits;
    double accuracy;        /* hits / n (1 when n is 0) */
    int misses;             /* n - hits */
    int unmeasured;         /* misses whose slowdown is unknown (no cost, or NAN there) */
    double miss_geomean;    /* geometric mean of cost[chosen] / cost[oracle] over the
                               other misses, 1 if none */
    double miss_worst;      /* max of the same, 1 if none */
    double geomean;         /* the same over every sample but the unmeasured (hits count 1) */
} SrchTreeScore;

SrchTree *srch_tree_fit(const SrchDataset *ds, const SrchTreeParams *p, char *err,
                        size_t errlen);
/* The kernel id for a shape (dims in the tree's order). Any values work:
 * those beyond the training range fall into the outermost leaves. */
int srch_tree_predict(const SrchTree *t, const int64_t *dims);
SrchTreeScore srch_tree_score(const SrchTree *t, const SrchDataset *ds);
int srch_tree_depth(const SrchTree *t);
/* Whether a leaf among nodes 0..before-1 dispatches to kernel (before =
 * nnodes: whether the tree uses it at all). */
bool srch_tree_uses(const SrchTree *t, int kernel, int before);
const SrchTreeNode *srch_tree_node(const SrchTree *t, int i);
/* The JSON form above, malloc'd (free it), compact and on one line. */
char *srch_tree_to_json(const SrchTree *t);
/* The same as a cJSON object (the caller's to delete or attach). */
struct cJSON *srch_tree_json(const SrchTree *t);
/* Reads and checks the JSON form; NULL with a one-line message in err. */
SrchTree *srch_tree_from_json(const char *text, size_t len, char *err, size_t errlen);
SrchTree *srch_tree_copy(const SrchTree *t);
/* t over another kernel table (its leaves naming them there); NULL when a
 * kernel of t is not among them. */
SrchTree *srch_tree_renumber(const SrchTree *t, int nkernels, const MicroKernel *kernels);
void srch_tree_free(SrchTree *t);

/* ---- The tuner ----
 *
 * search/space.c: one stage's micro-kernel space and the analytic half of
 * the cost model. A stage is a computed, materialised tensor; a shape is a
 * value for every dim of the program (indexed by Var.pos). What the search
 * knows of a stage at a shape is its extents: the output's per axis, and
 * the reduction's (1 without one).
 */
typedef struct SrchTarget {
    const char *name;       /* the records' target: "cpu", "cuda" or "model" */
    TargetInfo ti;          /* the schedule's limits (threads, shared bytes, vectors) */
    int ncores;             /* CPU: threads running blocks; GPU: SMs */
    int threads_per_core;   /* GPU: resident threads per SM (CPU: 1) */
    int shared_per_core;    /* GPU: shared bytes per SM (CPU: 0) */
    double peak_gflops;     /* FP32 peak, for the analytic prior */
} SrchTarget;

/* The CPU of this machine (pool threads, AVX-512 or not). */
SrchTarget srch_target_cpu(void);
/* The same with ncores threads running blocks (<= 0: every online core):
 * an MPI rank's, the cores it is bound to. */
SrchTarget srch_target_cpu_cores(int ncores);
/* An NVIDIA GPU of the given arch (NULL: sm_80); nsm 0: the arch's usual
 * SM count (sm_80 108, sm_90 132, ...). name is "cuda" or "model". */
SrchTarget srch_target_gpu(const char *name, const char *arch, int nsm);

enum { SRCH_NFEAT = 30 };

/* What ptxas -v says of one kernel (0 where it says nothing). */
typedef struct SrchPtxInfo {
    int regs;          /* registers per thread */
    int spill_bytes;   /* spill stores + loads */
    int stage_spill_bytes; /* spill stores + loads of every kernel in the PTX */
    int smem_bytes;    /* static shared memory */
} SrchPtxInfo;

typedef struct SrchStage {
    const Tensor *t;
    const Expr *body;       /* after inlining */
    int rank;
    bool reduction;
    bool vec_reduce;        /* operands contiguous along the reduction */
    /* the target's default schedule's variants ([0]: its default micro-kernel) */
    const MicroKernel *defaults;
    int ndefaults;
    int64_t ext_max[MK_MAX_AXES + 1]; /* largest extents over the tuning shapes */
    const SrchTarget *tg;
    char *workload;         /* its fingerprint on the target and arch tuned for */
    /* split-K may add its parts atomically (mk.atomic): tuning opted in
     * (SrchTuneOpts.atomic_split), a GPU, and pass_atomic_split_ok(body) */
    bool atomic_ok;
    /* what a packed variant (mk.pack) is: pass_pack_kind(body) */
    PassPack pack;
} SrchStage;

/* The extents of stage st at shape dims: ext[0..rank-1] spatial, ext[rank]
 * the reduction's (1 without one). */
void srch_stage_extents(const SrchStage *st, const int64_t *dims, int64_t *ext);
/* 2 x outputs x reduction (the work a shape needs). */
double srch_stage_flops(const SrchStage *st, const int64_t *ext);
/* A random legal micro-kernel from the target's limits (never from a shape). */
MicroKernel srch_space_sample(const SrchStage *st, uint64_t *rng);
/* Micro-kernels to start a reduction's search from, one per regime. GPU:
 * a warp per output along the reduction (small T), split-K tiles
 * (middle; also atomic with the opt-in), 128 x 128 blocks of 8 x 8 tiles
 * (large T), a block of 8 warps per output and split-K GEMV (small T,
 * long reductions).
 * CPU: outer-product
 * kernels over a packed panel (large T; the default serves small T).
 * Those legal for the stage, at most max. */
int srch_space_templates(const SrchStage *st, MicroKernel *out, int max);
/* A kernel from elsewhere (another workload's records) made canonical
 * for stage st; false when it is not legal there. */
bool srch_space_adopt(const SrchStage *st, MicroKernel *mk);
/* A neighbour of mk; with ext non-NULL, a change aimed at that shape's
 * extents (less padding, enough blocks for every core). Always legal. */
MicroKernel srch_space_mutate(const SrchStage *st, const MicroKernel *mk, const int64_t *ext,
                              uint64_t *rng);
/* The canonical text of mk for a stage of nspatial axes
 * (ir_print_microkernel's), malloc'd. */
char *srch_mk_str(const MicroKernel *mk, int nspatial);
/* The shape adaptation factor in (0, 1]: padding efficiency (useful over
 * computed points, reduction included; GPU: of the block tile, CPU: of the
 * thread tile, with a packing kernel's per-block packing counted as
 * computed rows) times occupancy (blocks over cores and waves). *nblocks
 * gets the grid size when nblocks is non-NULL. */
double srch_adapt(const SrchStage *st, const MicroKernel *mk, const int64_t *ext,
                  int64_t *nblocks);
/* The analytic micro-kernel throughput (GFLOP/s at full adaptation): the
 * prior before any measurement, and the model backend's answer. */
double srch_prior_gflops(const SrchStage *st, const MicroKernel *mk);
/* The learned model's features of mk (SRCH_NFEAT floats); ptx (NULL when
 * unknown: those features are missing values, NAN) is ptxas's report. */
void srch_features(const SrchStage *st, const MicroKernel *mk, const SrchPtxInfo *ptx, float *f);

/* search/ptxas.c: `ptxas -v` on PTX, for the GPU cost model. */
/* $DC_PTXAS or /usr/local/cuda/bin/ptxas when executable, else NULL. */
const char *srch_ptxas_path(void);
/* The report for entry `kernel` of ptx compiled for arch (NULL: sm_80);
 * false and err without ptxas or when it fails. */
bool srch_ptxas_info(const char *ptx, const char *arch, const char *kernel, SrchPtxInfo *out,
                     char *err, size_t errlen);
/* xorshift64* */
uint64_t srch_rand(uint64_t *state);

/* search/model.c: the learned half, gradient-boosted trees (XGBoost's C
 * API, loaded with dlopen) from features to log throughput, retrained on
 * all samples. Without XGBoost a model never becomes trained and the
 * analytic prior alone ranks candidates. */
typedef struct SrchModel SrchModel;
/* Whether libxgboost could be loaded ($DC_XGBOOST, else libxgboost.so.0);
 * false and why when not. */
bool srch_model_available(char *why, size_t whylen);
SrchModel *srch_model_new(uint64_t seed, char *err, size_t errlen);
/* Adds one sample (SRCH_NFEAT features, throughput in GFLOP/s > 0). */
void srch_model_add(SrchModel *m, const float *f, double gflops);
int srch_model_nsamples(const SrchModel *m);
/* Retrains on every sample; false and err when XGBoost fails. */
bool srch_model_train(SrchModel *m, char *err, size_t errlen);
bool srch_model_trained(const SrchModel *m);
/* Predicted throughput (GFLOP/s) of n feature rows; false on failure. */
bool srch_model_predict(SrchModel *m, const float *f, int n, double *out, char *err,
                        size_t errlen);
void srch_model_free(SrchModel *m);

/* search/measure.c: timing one stage's kernel with a micro-kernel at a
 * shape. Backends: "cpu" (JIT, warm-up then repeats), "cuda" (driver API,
 * events) and "model" (no hardware: the analytic time, deterministic). */
typedef struct SrchMeasurer SrchMeasurer;
/* p: the program; a tensor's buffer, for the largest of the shapes
 * (nshapes rows of p->ndims values, by Var.pos), is made when a stage
 * that reads or writes it is first timed: a model's identical layers
 * cost one layer's buffers. */
SrchMeasurer *srch_measurer_new(const char *backend, const char *arch, TeProgram *p,
                                const SrchTarget *tg, const int64_t *shapes, int nshapes,
                                char *err, size_t errlen);
/* How long a measurement repeats a run on the CPU: after a warm-up, until
 * at least min_runs (0: 3, or 2 where the warm-up alone took budget_ms: a
 * long run is an average of its own) runs are quiet (undisturbed: no other process
 * took a core from it, and within SRCH_QUIET_BAND of the fastest) and
 * the interquartile range of those is within spread (0: SRCH_SPREAD) of
 * their median or budget_ms has run; on a machine that stays busy, until
 * SRCH_BUSY_BUDGETS budgets have run; max_runs (0 or more than
 * SRCH_MAX_REPEATS: SRCH_MAX_REPEATS) at most. Then the disturbed runs,
 * the slow ones and the outliers are dropped (srch_drop_outliers). */
enum { SRCH_MAX_REPEATS = 25 };
#define SRCH_SPREAD 0.02
#define SRCH_OUTLIER_SIGMAS 3.0
/* A run slower than the fastest of its candidate's runs by more than this
 * fraction was timed in a slow stretch: another process had a core the
 * kernel needed (the fastest is the machine undisturbed, a kernel never
 * runs faster than it can). */
#define SRCH_QUIET_BAND 0.10
#define SRCH_BUSY_BUDGETS 4
typedef struct SrchTiming {
    int min_runs, max_runs;
    double budget_ms;
    double spread;
    int warmups; /* untimed runs first (0: one) */
} SrchTiming;
/* One run: its time in *ms, and how many times another process took a
 * core from one of its threads while it ran (0: undisturbed; else its
 * time is partly the machine's, not the kernel's); -1 and err on
 * failure. */
typedef int (*SrchRunOnce)(void *ud, double *ms, char *err, size_t errlen);
/* What timing one runner gave: the runs kept, how many were dropped as
 * disturbed, slow or outliers (the machine's noise), or that a run failed
 * and why. */
typedef struct SrchTimed {
    double times_ms[SRCH_MAX_REPEATS];
    int ntimes;             /* >= 1 unless failed */
    int ndropped;
    bool failed;
    char err[256];
} SrchTimed;
/* Times n runners as tm says, interleaved: each warmed up, then turns of
 * one run each, the order reversed every turn (0..n-1, n-1..0, ...), so
 * that what slows the machine for a while slows all alike, until each is
 * timed enough: its undisturbed runs count (when every run was
 * disturbed, the least disturbed ones: the best there is). A runner whose warm-up takes longer
 * than cutoff_ms[k] (> 0; cutoff_ms may be NULL; a disturbed warm-up is
 * taken again once) has that one time: hopeless candidates cost one run,
 * not ten. A runner whose run fails is out (failed, err), the
 * others go on. The clock is run's: a test injects a noisy one. */
void srch_time_batch(int n, SrchRunOnce run, void *const *ud, const SrchTiming *tm,
                     const double *cutoff_ms, SrchTimed *out);
/* srch_time_batch of one runner: its times_ms (SRCH_MAX_REPEATS entries)
 * and their number *ntimes; -1 and err when a run fails. */
int srch_time_runs(SrchRunOnce run, void *ud, const SrchTiming *tm, double cutoff_ms,
                   double *times_ms, int *ntimes, char *err, size_t errlen);
/* n runners, each warmed up, then timed in turns of runs runs each, in
 * the order 0..n-1, then n-1..0, and so on, turns times; out[k] gets
 * runner k's runs of every turn (up to SRCH_MAX_REPEATS), the disturbed
 * ones (all but the least disturbed, when all were), the slow ones and
 * outliers dropped. -1 and err when a run fails. */
int srch_time_turns(int n, SrchRunOnce run, void *const *ud, int turns, int runs,
                    SrchTimed *out, char *err, size_t errlen);
/* The interquartile range of n times over their median (INFINITY for
 * fewer than 2). */
double srch_spread(const double *t, int n);
/* Drops from t in place the slow runs (slower than the fastest by more
 * than SRCH_QUIET_BAND), then the outliers of the rest (further than
 * SRCH_OUTLIER_SIGMAS robust deviations from their median; none of fewer
 * than 4); the number kept. */
int srch_drop_outliers(double *t, int n);
/* Times stage st with mk at dims into times_ms (SRCH_MAX_REPEATS entries),
 * their number in *ntimes (>= 1): on the CPU as srch_time_runs does with
 * the measurer's timing, on CUDA five runs after two warm-ups, on the
 * model its one analytic time. -1 and err on failure. */
int srch_measure(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk, const int64_t *dims,
                 double cutoff_ms, double *times_ms, int *ntimes, char *err, size_t errlen);
/* n candidates (stage st[k] with mk[k] at dims[k]; n <= 64) built, then
 * timed together as srch_time_batch does (cutoff_ms as there), into
 * out[k]; a candidate that cannot be built is failed with why. */
void srch_measure_batch(SrchMeasurer *m, int n, const SrchStage *const *st,
                        const MicroKernel *mk, const int64_t *const *dims,
                        const double *cutoff_ms, SrchTimed *out);
/* Close contenders a and b of stage st at dims timed again in turns of
 * runs runs each (srch_time_turns) into out[0] and out[1]. */
int srch_measure_turns(SrchMeasurer *m, const SrchStage *st, const MicroKernel *a,
                       const MicroKernel *b, const int64_t *dims, int turns, int runs,
                       SrchTimed out[2], char *err, size_t errlen);
/* The CPU backend's timing (default: a budget of 20 ms). */
void srch_measurer_set_timing(SrchMeasurer *m, const SrchTiming *tm);
SrchTiming srch_measurer_timing(const SrchMeasurer *m);
/* GPU backends with ptxas installed: ptxas's report on stage st built
 * from mk (cached); false otherwise. */
bool srch_measure_ptxinfo(SrchMeasurer *m, const SrchStage *st, const MicroKernel *mk,
                          SrchPtxInfo *out);
void srch_measurer_free(SrchMeasurer *m);

/* search/tune.c: the joint search (or the per-shape baseline), the
 * measured selection at every shape point and the dispatch tree fit. */
typedef struct SrchRange {
    const char *dim;
    int64_t lo, hi;
    int count;              /* points; 0: all when the product is <= 256, else a sample */
} SrchRange;

typedef struct SrchProgress {
    const char *stage;
    const char *phase;      /* "search", "select", "baseline" */
    int round, done, total; /* measurements of this phase and stage */
    double best_pred_gflops, best_meas_gflops;
    double elapsed_s;       /* since srch_tune started */
    double eta_s;           /* estimated time left in this phase of this stage */
} SrchProgress;

/* Measurements taken elsewhere (search/tune.c asks, a farm answers): the
 * candidates the tuner asks for built and timed on devices of the farm's
 * own, as this process's measurer would (search/mpi.c: the other MPI
 * ranks, one candidate at a time, each candidate's at the rank that built
 * it). Without one (SrchTuneOpts.farm NULL) the tuner's own measurer
 * measures. ptxas's reports come from the farm too (a candidate built
 * once, where it is measured), but only where this process finds ptxas
 * as well. */
typedef struct SrchFarm {
    void *self;
    /* what measures: the records' arch and the search's target (its name
     * as the backend's) */
    const char *arch;
    SrchTarget tg;
    /* how many candidates it measures at once; above 1, the tuner searches
     * a fusion's distinct workloads side by side, calling batch and turns
     * from that many threads (search/tune.c, "side by side") */
    int width;
    /* whether ptxas's reports may be asked (ptxinfo): the farm's devices
     * and this process have ptxas */
    bool ptxas;
    /* the fusion measured from now on (p's Fuse as set, as
     * srch_measurer_new takes it) and the tuning's shape points */
    bool (*open)(void *self, const TeProgram *p, const int64_t *shapes, int nshapes, char *err,
                 size_t errlen);
    /* as srch_measure_batch, timed as tm says; false and err when the farm
     * cannot go on (stopped, no device left): the tune fails */
    bool (*batch)(void *self, const SrchTiming *tm, int n, const SrchStage *const *st,
                  const MicroKernel *mk, const int64_t *const *dims, const double *cutoff_ms,
                  SrchTimed *out, char *err, size_t errlen);
    /* as srch_measure_turns into out[0], out[1] (out[0].failed and its err
     * when they could not be measured); false as batch */
    bool (*turns)(void *self, const SrchStage *st, const MicroKernel *a, const MicroKernel *b,
                  const int64_t *dims, int turns, int runs, SrchTimed out[2], char *err,
                  size_t errlen);
    /* as srch_measure_ptxinfo for n candidates of st into out[k], have[k]
     * (built where they are measured later); false as batch */
    bool (*ptxinfo)(void *self, int n, const SrchStage *st, const MicroKernel *mk,
                    SrchPtxInfo *out, bool *have, char *err, size_t errlen);
} SrchFarm;

typedef struct SrchTuneOpts {
    const char *backend;    /* "cpu", "cuda", "model" */
    const char *arch;       /* GPU backends: sm_XX (NULL: sm_80) */
    int trials;             /* measurements of one search (each stage's; each shape's with per_shape) */
    uint64_t seed;
    bool per_shape;
    const char *records;    /* path, or NULL: measurements are kept in memory only */
    int nranges;
    const SrchRange *ranges;
    /* exactly these shape points instead of ranges when non-NULL: npoints
     * rows of p->ndims values by Var.pos (srch_shape_points_file's) */
    const int64_t *points;
    int npoints;
    int topk;               /* candidates measured per shape point in the selection (0: 2) */
    /* Records of other tuning runs (any workload, this target and arch):
     * the search's samples in them train every search's model before its
     * first trial, as Ansor transfers logs; NULL: none. */
    const char *warm_start;
    int tree_depth;         /* 0: 4 */
    void (*progress)(void *ud, const SrchProgress *p);
    void *progress_ud;
    /* Record warnings (damaged lines) are passed here, one line each. */
    void (*warn)(void *ud, const char *msg);
    /* When non-NULL and set (e.g. by a signal handler), the search stops
     * before its next measurement and srch_tune fails with "interrupted";
     * every measurement taken is in the records. */
    const volatile sig_atomic_t *stop;
    /* Split-K kernels may add their parts into the output atomically
     * (faster, not bit-reproducible: the parts' order varies from run to
     * run), where the epilogue is affine in the sum; the trees say so
     * ("atomic_split"), and a tree with such kernels is read only so. */
    bool atomic_split;
    /* where the candidates are measured (NULL: here); its arch and target
     * are the records' and the search's */
    const SrchFarm *farm;
    /* fusion choices tuned both ways at most (0: SRCH_FUSE_CONTESTS;
     * negative: none) */
    int contests;
    /* a candidate whose run at its home shape is expected to take at least
     * this long (ms) is first run at a shape of a fraction of the work, and
     * not at its home when it is hopeless there (0: SRCH_PROBE_MS;
     * negative: never; search/tune.c, probe_shape) */
    double probe_ms;
} SrchTuneOpts;

typedef struct SrchStageResult {
    const char *stage;
    int measured, reused;       /* search trials: new, and found in the records */
    int probed, probe_hopeless; /* of those, run first at a smaller shape (probe_ms), and
                                 * hopeless there: not run at their home */
    int select_measured, select_reused;
    int select_turns;           /* of select_measured: close contenders measured again in turns */
    int checked;                /* pairs the check measured again in turns (a point in two rounds twice) */
    int check_changed;          /* shape points where the final tree picks another kernel than the
                                 * tree the first check checked */
    int64_t runs, dropped;      /* runs timed for the stage, and dropped (disturbed, slow, outliers) */
    double search_s, select_s;  /* seconds in the search and the selection */
    double fit_s;               /* in the fit and the check, with what they measured */
    int nshapes;
    /* over the shapes, of what the dispatch picks and of the best kernel:
     * times measured at the shape (the joint search's also scaled from a
     * measurement within 5% of it, see DESIGN.md) */
    double geomean_ms;
    double oracle_geomean_ms;
    /* nshapes (the result's): at each shape point, the time of the kernel
     * the dispatch picks there, measured or scaled as above (the best
     * known time where that kernel's is not known); NAN where nothing is */
    double *shape_ms;
    SrchTree *tree;
    SrchTreeScore score;
    /* the GPU: tree->nkernels, the bytes each kernel spills (ptxas; 0 when
     * unknown). A kernel that spills is used only where it is faster than
     * every kernel without spills by more than 5% (search/tune.c). */
    int *spill;
} SrchStageResult;

/* A fusion choice the search tunes the other way is flipped when the
 * stages of the other way are faster by more than this factor. */
#define SRCH_FUSE_MARGIN 1.02
/* how many close fusion choices a tune contests by default: the ones whose
 * other way changes the most time */
#define SRCH_FUSE_CONTESTS 4
/* SrchTuneOpts.probe_ms's default */
#define SRCH_PROBE_MS 10.0

/* The search's choice for one intermediate the cost model found close:
 * what it chose, and the summed time over the shape points of the stages
 * with that choice and with the other (NAN where a stage's time at a
 * point is not known, or the other could not be tuned); same: the other
 * way gave the same stages (a body too large to inline); nlike: the
 * tensors of its class decided with it (the same intermediate in the
 * other identical layers), the times covering them all. */
typedef struct SrchFusion {
    const char *tensor;
    bool materialized;
    double ms, other_ms;
    bool same;
    int nlike;
} SrchFusion;

typedef struct SrchTuneResult {
    int nstages;
    SrchStageResult *stages;    /* of the fusion chosen */
    int nworkloads;             /* distinct among them (stages alike share a search) */
    int nfusion;
    SrchFusion *fusion;         /* readers first */
    int nfusion_small;          /* close choices not contested: their stages take too
                                 * little of the time for the other way to win */
    int nfusion_uncontested;    /* and those beyond SrchTuneOpts.contests */
    int nshapes;
    int64_t *shapes;            /* nshapes rows of the program's dims, by Var.pos */
    double seconds;
    int nforeign, ncorrupt;     /* records of other workloads; damaged lines */
    int nwarm;                  /* samples the warm start gave each search's model */
    int nwarm_kernels;          /* and kernels its trees chose (first trials where legal) */
} SrchTuneResult;

/* search/report.c: the report of a records file (dcc report) as a
 * self-contained SVG, malloc'd: per stage workload, one panel per dim with
 * the latency over the shape points (what the stored dispatch tree picks,
 * the best measured, the per-shape baseline's where present) and one band
 * per tree leaf, the kernels' legend, the tuning history. title names it.
 * NULL and err when the records hold no measurement. */
char *srch_report_svg(const SrchRecords *r, const char *title, char *err, size_t errlen);

/* search/cost.c: the GPUs' numbers and the analytic cost of a lowered
 * GPU program (the model backend's time; the file's opening comment is
 * the model) */
typedef struct SrchGpu {
    const char *arch;
    int nsm, lanes;          /* SMs; FP32 lanes per SM */
    double ghz;
    double dram_gbs;
    double l2_mb, l2_gbs;
    int64_t smem_kb;         /* shared memory per SM */
    int64_t regs_per_sm, threads_per_sm, blocks_per_sm;
    double launch_us;        /* the floor of one launch */
} SrchGpu;
/* The table's row for arch (sm_80's for an unknown one). */
const SrchGpu *srch_gpu(const char *arch);
/* What one block of a kernel does at a shape. */
typedef struct SrchKernelCost {
    int threads;
    double fma;              /* FP32 lane-ops (an FMA is one) */
    double instrs;           /* lane instructions issued, estimated */
    double load_bytes, store_bytes; /* global */
    double wavefronts;       /* shared-memory wavefronts */
    double barriers, shuffles;
    double exposed;          /* barriers that wait for global loads copied to shared memory */
    int64_t shared_bytes;    /* static shared memory */
    int64_t local_words;     /* per-thread registers for its buffers */
} SrchKernelCost;
void srch_kernel_cost(const LoopProgram *lp, const Kernel *k, const int64_t *dims,
                      SrchKernelCost *out);
/* One launch of a kernel of that cost on g: grid blocks, regs per thread
 * (0: estimated), dram_bytes from memory. */
double srch_launch_ms(const SrchGpu *g, const SrchKernelCost *k, int64_t grid, int regs,
                      double dram_bytes);
/* lp (lowered for PT_GPU) run once at dims on arch: the sum over the
 * plan's launches; regs of the first kernel from ptxas, 0 if unknown. -1
 * and err when the plan refuses the dims. */
double srch_model_ms(const LoopProgram *lp, const char *arch, const int64_t *dims, int regs,
                     char *err, size_t errlen);

/* search/workload.c */
/* The workload fingerprint of computed tensor t of p (materialized as
 * pass_inline decides): a hash of the stage's canonical TE, target and
 * arch, as 16 hex digits (malloc'd). Stages with the same fingerprint
 * share records and dispatch trees. */
char *srch_fingerprint(const TeProgram *p, const Tensor *t, const bool *materialized,
                       const char *target, const char *arch);
/* The fingerprint of the whole program p on (target, arch), as 16 hex
 * digits (malloc'd): its printed TE, without its name, and the target and
 * arch. What fuse lines are filed under. */
char *srch_program_fingerprint(const TeProgram *p, const char *target, const char *arch);
/* Each tensor's fusion class (NULL for inputs; malloc'd, as is each
 * string): the hash of its op's canonical TE (every other tensor an input)
 * and of its consumers' ops. The tensors of one class (the same
 * intermediate in each of a model's identical layers) are inlined or
 * materialised together: the search contests the class once. */
char **srch_fusion_classes(const TeProgram *p);
/* The arch CPU records carry: this CPU's LLVM name (what the JIT compiles for). */
const char *srch_host_arch(void);
/* The shape points of the tuning range: *n rows of p->ndims values. */
int64_t *srch_shape_points(const TeProgram *p, const SrchRange *ranges, int nranges, int *n,
                           char *err, size_t errlen);
/* The shape points a JSON file lists (dcc tune --shapes-file): an array
 * of objects, each mapping every dim of p by name to an integer, e.g.
 * [{"Cin": 64, "Cout": 256, "P": 3136}, ...]. Rows as srch_shape_points
 * gives them, in the file's order; a point listed twice is kept once. NULL
 * and a message naming the entry (its index from 0) when the file cannot
 * be read or is not such an array, or when an entry names a dim p lacks,
 * leaves one out, or gives one a value below its declared LO or above the
 * largest it runs at. */
int64_t *srch_shape_points_file(const TeProgram *p, const char *path, int *n, char *err,
                                size_t errlen);
/* Tunes every stage of p over the shape points, and the fusion of the
 * intermediates the cost model finds close (search/tune.c). p's Fuse
 * fields are left as given (a fixed one is not searched); the choices are
 * in the result and in the records' fuse lines, which a compile applies. */
SrchTuneResult *srch_tune(TeProgram *p, const SrchTuneOpts *o, char *err, size_t errlen);
/* How many close fusion choices srch_tune tunes both ways at most, as o
 * (NULL: the defaults) asks: SrchTuneOpts.contests resolved. */
int srch_fuse_contests(const SrchTuneOpts *o);
void srch_tune_result_free(SrchTuneResult *r);
/* The whole program's estimated time at shape point j of r: the sum of its
 * stages' shape_ms (each stage measured alone); NAN if a stage's is unknown. */
double srch_tune_estimate_ms(const SrchTuneResult *r, int j);

/* search/schedule.c: from records to dispatch.
 *
 * The oracle of a stage: for each shape point, the measured median of each
 * micro-kernel there (records of one kind: the selection's, or the
 * baseline's). Kernels are sorted (ir_microkernel_cmp) and shapes by their
 * values, so the same records always give the same tree. */
typedef struct SrchOracle {
    int n, ndims, nk;
    int64_t *dims;        /* n x ndims, the program's dims in declaration order */
    int *shape_index;     /* n: index into the shapes given to srch_oracle_collect, or -1 */
    MicroKernel *kernels; /* nk, sorted */
    int nspatial;
    double *cost;         /* n x nk median ms, NAN where not measured */
    double *best;         /* n: the least measured cost */
} SrchOracle;
/* From workload's records of stage t: the baseline's when baseline is set,
 * else the joint search's (trials and selection). Records with a time
 * <= 0, or a micro-kernel of another rank or (ti non-NULL) outside ti's
 * limits, are left out; so are atomic split-K kernels unless atomic_ok
 * (tuning with the opt-in: a run without it, or a compile fitting a tree
 * to bare measurements, never picks one from an earlier run's records).
 * shapes (nshapes rows by Var.pos) restricts it to those points; NULL:
 * all. */
SrchOracle *srch_oracle_collect(const SrchRecords *r, const char *workload, bool baseline,
                                bool atomic_ok, const TeProgram *p, const Tensor *t,
                                const TargetInfo *ti, const int64_t *shapes, int nshapes);
void srch_oracle_free(SrchOracle *o);
/* The dispatch tree of an oracle (depth-limited, latency-weighted CART)
 * and its score against it. */
SrchTree *srch_fit_oracle(const TeProgram *p, const SrchOracle *o, int depth,
                          SrchTreeScore *score, char *err, size_t errlen);
/* A tree's score against an oracle (the tree's kernels numbered as o's). */
SrchTreeScore srch_oracle_score(const TeProgram *p, const SrchOracle *o, const SrchTree *t);
/* The schedule the records in path hold for p on target ("cpu", "cuda" or
 * "model"): per computed stage, the dispatch tree stored for its workload
 * (without one, the tree fit to its measurements, as srch_tune fits it)
 * and the tree's kernels as variants. Records of arch are used when the
 * file has any for p, else those of the first other arch of target it
 * has; *used_arch (optional, usedlen bytes) gets which. sched and trees
 * (optional) are indexed by tensor id, p->ntensors entries; a stage
 * without records gets nvariants 0 and no tree (the default). Variants and
 * dispatch live in p's arena; trees are the caller's to free. 0 on
 * success; 1 and err when the file holds no record of p for target; -1
 * and err when it cannot be read. warn (optional) gets each damaged line's
 * "PATH:LINE: reason", as srch_tune reports them, and the schedule's own
 * warnings, which start SRCH_SCHEDULE_WARNING: a stored tree not used (of
 * another rank, on a dim p lacks, over the budgets) and, once, how many
 * stages have no usable record (they run the default). The file's fuse lines
 * for p set the Fuse of the intermediates p leaves undecided (FUSE_COST)
 * for the arch whose records are used (they stay set, also on -1): lower
 * p with sched afterwards. */
#define SRCH_SCHEDULE_WARNING "records: "
int srch_schedule_from_records(TeProgram *p, const char *path, const char *target,
                               const char *arch, StageSchedule *sched, SrchTree **trees,
                               char *used_arch, size_t usedlen,
                               void (*warn)(void *ud, const char *msg), void *warn_ud, char *err,
                               size_t errlen);
/* {"v": 2, "target": T, "arch": A, "stages": {"Y": {"workload": FP,
 * "tree": TREE}, ...}}, TREE as srch_tree_to_json writes it; a stage
 * without a tree gets a single leaf naming its default micro-kernel.
 * malloc'd. */
char *srch_schedule_to_json(TeProgram *p, const char *target, const char *arch,
                            SrchTree *const *trees);
/* A fitted tree in the IR's dispatch form (dims mapped to Var.pos by name,
 * leaves renumbered to the kernels they use, in preorder), in p's arena;
 * *variants gets those kernels. */
Dispatch *srch_tree_to_dispatch(TeProgram *p, const SrchTree *t, MicroKernel **variants,
                                int *nvariants);

/* search/mpi.c: tuning across MPI ranks (linked into dcc only; with MPI
 * where the build found it, DC_HAVE_MPI, else these say it is missing).
 * Rank 0 searches and writes the records; every other rank builds and
 * times the candidates it is handed on its own device (DESIGN.md,
 * "Tuning on several machines"). */
typedef struct SrchMpi SrchMpi;
/* The ranks an MPI launcher (mpirun, srun) started, from its environment
 * (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE, SLURM_STEP_NUM_TASKS), and
 * this one's in *rank; 1 and 0 when none did. */
int srch_mpi_launched(int *rank);
/* Whether this dcc was built with MPI. */
bool srch_mpi_built(void);
/* MPI started (errors returned, not fatal); NULL and err when it fails
 * or this dcc has no MPI. */
SrchMpi *srch_mpi_start(int *argc, char ***argv, char *err, size_t errlen);
int srch_mpi_rank(const SrchMpi *m);
/* Every rank, with the program it loaded (its Fuse as given) and the
 * tune's backend and arch: each starts its device (a rank bound to some
 * cores sizes the CPU pool to them, a CUDA rank takes the GPU its local
 * rank gives, modulo their count), and rank 0 checks that every rank
 * read the same program with the same dcc and that the ranks that can
 * measure measure on one arch. false and err on every rank when the run
 * cannot go on (rank 0's err says why). warn (rank 0) gets the ranks
 * that cannot measure. stop: the tune's (a signal's) flag. */
bool srch_mpi_join(SrchMpi *m, TeProgram *p, const char *backend, const char *arch,
                   const char *build, const volatile sig_atomic_t *stop,
                   void (*warn)(void *ud, const char *msg), void *warn_ud, char *err,
                   size_t errlen);
/* Rank 0, after srch_mpi_join: the farm of the other ranks (owned by m);
 * its width is the ranks that measure (1 where MPI cannot be called from
 * several threads in turn, MPI_THREAD_SERIALIZED). */
const SrchFarm *srch_mpi_farm(SrchMpi *m);
/* The other ranks, after srch_mpi_join: measure what rank 0 hands out
 * until it says it is done; false and err when stopped. */
bool srch_mpi_serve(SrchMpi *m, char *err, size_t errlen);
/* Rank 0 tells the others it is done; every rank then leaves MPI and
 * frees m. NULL is fine. */
void srch_mpi_end(SrchMpi *m);

/* search/util.c: what records and trees share */
/* Integers up to 2^53 are exact in JSON's doubles; larger ones are refused. */
#define SRCH_MAX_EXACT 9007199254740992.0
/* True when x is a finite integer in lo..hi. */
bool srch_exact_int(double x, double lo, double hi);
/* Writes a one-line message into err (which may be NULL). */
void srch_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
