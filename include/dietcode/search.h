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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dietcode/ir.h"

/* search/records.c
 *
 * A records file is JSON lines: one measurement per line, appended with a
 * single write() and flushed to disk before srch_records_append returns.
 * Schema, version 1 (field order as written; readers do not rely on it):
 *
 *   {"v": 1,                          schema version; other versions are reported and skipped
 *    "workload": "9f3a...",           the caller's fingerprint of the workload
 *    "target": "cpu",                 "cpu", "cuda", "model", ...
 *    "stage": "C",                    the tensor the kernel computes
 *    "mk": "threads [4, 8] tile [6, 32] rchunk 256 unroll 1 vec 16",
 *                                     ir_print_microkernel's form
 *    "shape": {"M": 128, "N": 768},   dim name -> value (integers)
 *    "kind": "trial",                 "trial" | "select" | "baseline"
 *    "trial": 17,                     the search's trial index (integer >= 0)
 *    "times_ms": [0.51, 0.50, 0.52],  every repeat, at least one, finite, >= 0
 *    "median_ms": 0.51,               their median
 *    "ts": 1712345678}                seconds since the epoch
 *
 * Lines of another workload or target are skipped silently (counted).
 * A line that is not such a record (truncated, garbage, NUL bytes, longer
 * than SRCH_MAX_LINE, wrong types, missing fields, integers that are not
 * exact or out of range, a micro-kernel pass_parse_microkernel rejects)
 * is skipped with a warning that names its line; nothing else is lost.
 */
enum {
    SRCH_MAX_LINE = 1 << 20,    /* bytes; longer lines are reported and skipped */
    SRCH_MAX_DIMS = 64,         /* dims in one shape */
    SRCH_MAX_WARNINGS = 100,    /* warnings kept; srch_records_ncorrupt counts all */
};

typedef enum SrchRecordKind {
    RK_TRIAL,    /* measured during the search */
    RK_SELECT,   /* measured in the selection step, per shape point */
    RK_BASELINE, /* measured by the per-shape baseline (--per-shape) */
} SrchRecordKind;

typedef struct SrchRecord {
    const char *stage;
    const char *mk;          /* canonical: as ir_print_microkernel writes it */
    int ndims;
    const char **dim_names;  /* ndims, in the order given or read */
    int64_t *dim_values;
    int ntimes;
    double *times_ms;        /* ntimes >= 1 */
    double median_ms;        /* filled by srch_records_append */
    SrchRecordKind kind;
    int64_t trial;
    int64_t ts;              /* 0 in srch_records_append: the current time */
} SrchRecord;

/* One damaged line of a records file: "PATH:LINE: reason". */
typedef struct SrchWarning {
    int64_t line;
    const char *msg;
} SrchWarning;

typedef struct SrchRecords SrchRecords;

/* Loads the records of (fingerprint, target) from path, if it exists, then
 * opens it for appending (creating it). NULL with a one-line message in err
 * when the file cannot be read or opened; a damaged line is never an error. */
SrchRecords *srch_records_open(const char *path, const char *fingerprint, const char *target,
                               char *err, size_t errlen);
/* Appends one measurement (also visible to srch_records_find at once).
 * Returns false with a message when rec is invalid or the write fails. */
bool srch_records_append(SrchRecords *r, const SrchRecord *rec, char *err, size_t errlen);
/* The latest record of (stage, micro-kernel, shape), or NULL. mk is
 * compared in canonical form; the shape is a set of (name, value) pairs,
 * so the order of dims does not matter. Hash lookup. */
const SrchRecord *srch_records_find(const SrchRecords *r, const char *stage, const char *mk,
                                    int ndims, const char *const *dim_names,
                                    const int64_t *dim_values);
int srch_records_count(const SrchRecords *r);            /* of this workload and target */
const SrchRecord *srch_records_at(const SrchRecords *r, int i);  /* file order */
int srch_records_nforeign(const SrchRecords *r);         /* other workload or target */
int srch_records_ncorrupt(const SrchRecords *r);         /* damaged lines skipped */
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
    const char *const *kernels;     /* nkernels micro-kernel strings */
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
typedef struct SrchTree {
    int ndims;
    char **dim_names;
    int nkernels;
    char **kernels;
    int nnodes;
    SrchTreeNode *nodes;
} SrchTree;

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
const SrchTreeNode *srch_tree_node(const SrchTree *t, int i);
/* The JSON form above, malloc'd (free it), compact and on one line. */
char *srch_tree_to_json(const SrchTree *t);
/* Reads and checks the JSON form; NULL with a one-line message in err. */
SrchTree *srch_tree_from_json(const char *text, size_t len, char *err, size_t errlen);
void srch_tree_free(SrchTree *t);

/* search/util.c: what records and trees share */
/* Integers up to 2^53 are exact in JSON's doubles; larger ones are refused. */
#define SRCH_MAX_EXACT 9007199254740992.0
/* True when x is a finite integer in lo..hi. */
bool srch_exact_int(double x, double lo, double hi);
/* Writes a one-line message into err (which may be NULL). */
void srch_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
