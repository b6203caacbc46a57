/* From records to dispatch: the oracle of a stage, the tree fit to it, the
 * tree in the IR's form, the schedule a compile takes from the records
 * (the trees srch_tune stored with them, found by workload fingerprint),
 * and the JSON that --emit=dispatch prints.
 */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dietcode/search.h"

void srch_oracle_free(SrchOracle *o)
{
    if (!o)
        return;
    free(o->kernels);
    free(o->dims);
    free(o->shape_index);
    free(o->cost);
    free(o->best);
    free(o);
}

static int cmp_mk(const void *a, const void *b) { return ir_microkernel_cmp(a, b); }

/* The values of a record's shape in declaration order; false if its dims
 * are not exactly the program's. */
static bool record_dims(const SrchRecord *r, const TeProgram *p, int64_t *out)
{
    if (r->ndims != p->ndims)
        return false;
    for (int i = 0; i < p->ndims; i++) {
        int j = 0;
        while (j < r->ndims && strcmp(r->dim_names[j], p->dims[i]->name) != 0)
            j++;
        if (j == r->ndims)
            return false;
        out[i] = r->dim_values[j];
    }
    return true;
}

/* A record the oracle can use: a positive time, and a micro-kernel for the
 * stage's rank that the target's limits leave as it is (a record written
 * by hand or by another version may hold one the pipeline would change)
 * and that is within pass_check_microkernel's budgets. */
static bool usable(const SrchRecord *rec, const Tensor *t, const TargetInfo *ti)
{
    if (!(rec->median_ms > 0) || !isfinite(rec->median_ms) || rec->nspatial != t->rank)
        return false;
    if (!ti)
        return true;
    MicroKernel legal = rec->mk;
    pass_legalize_microkernel(&legal, t, ti);
    char why[256];
    return ir_microkernel_cmp(&legal, &rec->mk) == 0 &&
           pass_check_microkernel(&legal, t, ti, why, sizeof why);
}

static int cmp_row(const int64_t *a, const int64_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* Index of row v among n sorted rows, or -1. */
static int find_row(const int64_t *rows, int n, int nd, const int64_t *v)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = cmp_row(rows + (size_t)mid * (size_t)nd, v, nd);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int cmp_row_q(const void *a, const void *b, void *nd) { return cmp_row(a, b, *(int *)nd); }

/* Shape points in declaration order, and their indexes sorted by value. */
typedef struct Points {
    int n, nd;
    int64_t *rows;
    int *order;
} Points;

static int cmp_point(const void *a, const void *b, void *ctx)
{
    const Points *pt = ctx;
    return cmp_row(pt->rows + (size_t)*(const int *)a * (size_t)pt->nd,
                   pt->rows + (size_t)*(const int *)b * (size_t)pt->nd, pt->nd);
}

/* The index of point v among pt, or -1. */
static int point_index(const Points *pt, const int64_t *v)
{
    int lo = 0, hi = pt->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = cmp_row(pt->rows + (size_t)pt->order[mid] * (size_t)pt->nd, v, pt->nd);
        if (c == 0)
            return pt->order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Whether rec belongs in the oracle; v gets its shape. */
static bool take(const SrchRecord *rec, const char *workload, bool baseline, bool atomic_ok,
                 const TeProgram *p, const Tensor *t, const TargetInfo *ti, int64_t *v)
{
    return srch_record_is_baseline(rec->kind) == baseline && (atomic_ok || !rec->mk.atomic) &&
           strcmp(rec->workload, workload) == 0 && record_dims(rec, p, v) && usable(rec, t, ti);
}

SrchOracle *srch_oracle_collect(const SrchRecords *r, const char *workload, bool baseline,
                                bool atomic_ok, const TeProgram *p, const Tensor *t,
                                const TargetInfo *ti, const int64_t *shapes, int nshapes)
{
    int nd = p->ndims, nr = srch_records_count(r);
    size_t rowb = sizeof(int64_t) * (size_t)(nd ? nd : 1);
    int64_t *rows = malloc(rowb * (size_t)(nr + 1));
    MicroKernel *ks = malloc(sizeof *ks * (size_t)(nr + 1));
    int nrows = 0, nks = 0;
    /* the allowed points, with their index in shapes */
    Points allow = {shapes ? nshapes : 0, nd, NULL, NULL};
    if (shapes) {
        allow.rows = malloc(rowb * (size_t)(nshapes + 1));
        allow.order = malloc(sizeof *allow.order * (size_t)(nshapes + 1));
        for (int s = 0; s < nshapes; s++) {
            allow.order[s] = s;
            for (int i = 0; i < nd; i++)
                allow.rows[(size_t)s * (size_t)nd + (size_t)i] =
                    shapes[(size_t)s * (size_t)nd + (size_t)p->dims[i]->pos];
        }
        qsort_r(allow.order, (size_t)nshapes, sizeof *allow.order, cmp_point, &allow);
    }
    int64_t v[SRCH_MAX_DIMS];
    for (int i = 0; i < nr; i++) {
        const SrchRecord *rec = srch_records_at(r, i);
        if (!take(rec, workload, baseline, atomic_ok, p, t, ti, v) || (shapes && point_index(&allow, v) < 0))
            continue;
        memcpy(rows + (size_t)nrows++ * (size_t)nd, v, rowb);
        ks[nks++] = rec->mk;
    }
    qsort_r(rows, (size_t)nrows, rowb, cmp_row_q, &nd);
    qsort(ks, (size_t)nks, sizeof *ks, cmp_mk);
    int n = 0, nk = 0;
    for (int i = 0; i < nrows; i++)
        if (n == 0 || cmp_row(rows + (size_t)(n - 1) * (size_t)nd, rows + (size_t)i * (size_t)nd, nd) != 0)
            memmove(rows + (size_t)n++ * (size_t)nd, rows + (size_t)i * (size_t)nd, rowb);
    for (int i = 0; i < nks; i++)
        if (nk == 0 || ir_microkernel_cmp(&ks[nk - 1], &ks[i]) != 0)
            ks[nk++] = ks[i];
    SrchOracle *o = calloc(1, sizeof *o);
    o->n = n;
    o->ndims = nd;
    o->nk = nk;
    o->dims = rows;
    o->kernels = ks;
    o->nspatial = t->rank;
    o->cost = malloc(sizeof *o->cost * ((size_t)n * (size_t)nk + 1));
    for (size_t i = 0; i < (size_t)n * (size_t)nk; i++)
        o->cost[i] = NAN;
    for (int i = 0; i < nr; i++) { /* later records win */
        const SrchRecord *rec = srch_records_at(r, i);
        if (!take(rec, workload, baseline, atomic_ok, p, t, ti, v))
            continue;
        int j = find_row(rows, n, nd, v);
        if (j < 0)
            continue;
        const MicroKernel *kp = bsearch(&rec->mk, o->kernels, (size_t)nk, sizeof *o->kernels, cmp_mk);
        if (kp)
            o->cost[(size_t)j * (size_t)nk + (size_t)(kp - o->kernels)] = rec->median_ms;
    }
    o->best = malloc(sizeof *o->best * (size_t)(n + 1));
    o->shape_index = malloc(sizeof *o->shape_index * (size_t)(n + 1));
    for (int j = 0; j < n; j++) {
        double b = INFINITY;
        for (int k = 0; k < nk; k++) {
            double c = o->cost[(size_t)j * (size_t)nk + (size_t)k];
            if (!isnan(c) && c < b)
                b = c;
        }
        o->best[j] = b;
        o->shape_index[j] = shapes ? point_index(&allow, rows + (size_t)j * (size_t)nd) : -1;
    }
    free(allow.rows);
    free(allow.order);
    return o;
}

/* The dataset a tree is fit to and scored against: an oracle's costs as
 * slowdowns against each shape's best (what the tree minimises is then
 * the summed slowdown, every shape weighing alike), each shape labelled
 * with its fastest kernel. Freed by dataset_free. */
static SrchDataset oracle_dataset(const TeProgram *p, const SrchOracle *o)
{
    size_t nc = (size_t)o->n * (size_t)o->nk;
    double *rel = malloc(sizeof *rel * (nc + 1));
    int *label = malloc(sizeof *label * (size_t)(o->n + 1));
    for (int j = 0; j < o->n; j++) {
        label[j] = 0;
        for (int k = 0; k < o->nk; k++) {
            double c = o->cost[(size_t)j * (size_t)o->nk + (size_t)k];
            rel[(size_t)j * (size_t)o->nk + (size_t)k] = c / o->best[j];
        }
        for (int k = o->nk - 1; k >= 0; k--)
            if (o->cost[(size_t)j * (size_t)o->nk + (size_t)k] == o->best[j])
                label[j] = k;
    }
    const char **names = malloc(sizeof *names * (size_t)(p->ndims + 1));
    for (int i = 0; i < p->ndims; i++)
        names[i] = p->dims[i]->name;
    return (SrchDataset){o->n, o->ndims, o->nk, o->dims, label, rel, names, o->kernels, o->nspatial};
}

static void dataset_free(SrchDataset *ds)
{
    free((void *)ds->dim_names);
    free((void *)ds->label);
    free((void *)ds->cost);
}

/* t's score against ds, where a pick as fast as the best is a hit,
 * whichever kernel was labelled (ds's labels change to say so). */
static SrchTreeScore score_against(const SrchTree *t, SrchDataset *ds)
{
    int *label = (int *)ds->label;
    for (int j = 0; j < ds->n; j++) {
        int k = srch_tree_predict(t, ds->dims + (size_t)j * (size_t)ds->ndims);
        if (ds->cost[(size_t)j * (size_t)ds->nkernels + (size_t)k] <= 1.0 + 1e-9)
            label[j] = k;
    }
    return srch_tree_score(t, ds);
}

SrchTree *srch_fit_oracle(const TeProgram *p, const SrchOracle *o, int depth,
                          SrchTreeScore *score, char *err, size_t errlen)
{
    SrchDataset ds = oracle_dataset(p, o);
    SrchTreeParams tp = {depth, 1};
    SrchTree *t = srch_tree_fit(&ds, &tp, err, errlen);
    if (t && score)
        *score = score_against(t, &ds);
    dataset_free(&ds);
    return t;
}

SrchTreeScore srch_oracle_score(const TeProgram *p, const SrchOracle *o, const SrchTree *t)
{
    SrchDataset ds = oracle_dataset(p, o);
    SrchTreeScore s = score_against(t, &ds);
    dataset_free(&ds);
    return s;
}

/* The kernels t's leaves use, numbered in the order the leaves name them
 * (preorder): remap[k] is kernel k's new number, -1 when no leaf uses it;
 * *nused gets how many are used. malloc'd. */
static int *used_kernels(const SrchTree *t, int *nused)
{
    int *remap = malloc(sizeof *remap * (size_t)(t->nkernels + 1));
    if (!remap)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int k = 0; k < t->nkernels; k++)
        remap[k] = -1;
    int n = 0;
    for (int i = 0; i < t->nnodes; i++) {
        const SrchTreeNode *nd = srch_tree_node(t, i);
        if (nd->kind == TN_LEAF && remap[nd->kernel] < 0)
            remap[nd->kernel] = n++;
    }
    *nused = n;
    return remap;
}

Dispatch *srch_tree_to_dispatch(TeProgram *p, const SrchTree *t, MicroKernel **variants,
                                int *nvariants)
{
    int nv;
    int *remap = used_kernels(t, &nv);
    Dispatch *d = IR_NEW(p->arena, Dispatch);
    DispatchNode *nodes = IR_NEWN(p->arena, DispatchNode, t->nnodes);
    for (int i = 0; i < t->nnodes; i++) {
        const SrchTreeNode *n = srch_tree_node(t, i);
        if (n->kind == TN_LEAF) {
            nodes[i] = (DispatchNode){remap[n->kernel], 0, 0, 0, 0};
        } else {
            const Var *dim = ir_te_find_dim(p, t->dim_names[n->dim]);
            IR_ASSERT(dim);
            nodes[i] = (DispatchNode){-1, dim->pos, n->le, n->then_node, n->else_node};
        }
    }
    MicroKernel *v = IR_NEWN(p->arena, MicroKernel, nv);
    for (int k = 0; k < t->nkernels; k++)
        if (remap[k] >= 0)
            v[remap[k]] = t->kernels[k];
    free(remap);
    d->nnodes = t->nnodes;
    d->nodes = nodes;
    *variants = v;
    *nvariants = nv;
    return d;
}

/* Per computed stage of p (by tensor id): its workload fingerprint on
 * (target, arch), NULL for the others. */
static char **fingerprints(TeProgram *p, const char *target, const char *arch, Expr ***bodies)
{
    int nt = p->ntensors ? p->ntensors : 1;
    *bodies = IR_NEWN(p->arena, Expr *, nt);
    bool *mat = IR_NEWN(p->arena, bool, nt);
    pass_inline(p, *bodies, mat);
    char **fp = calloc((size_t)nt, sizeof *fp);
    for (int i = 0; i < p->ntensors; i++)
        if (p->tensors[i]->kind != TK_INPUT && mat[i])
            fp[i] = srch_fingerprint(p, p->tensors[i], mat, target, arch);
    return fp;
}

static void free_fingerprints(const TeProgram *p, char **fp)
{
    for (int i = 0; i < p->ntensors; i++)
        free(fp[i]);
    free(fp);
}

/* Whether a stored tree can dispatch stage t of p: kernels of its rank,
 * and splits only on dims p has; else a warning saying which (a
 * workload's tree may come from another program, as the fingerprint does
 * not hash dim names, or from a damaged file). */
static bool tree_fits(const SrchTree *tree, const TeProgram *p, const Tensor *t,
                      void (*warn)(void *ud, const char *msg), void *warn_ud)
{
    char msg[400] = "";
    if (tree->nspatial != t->rank)
        snprintf(msg, sizeof msg,
                 SRCH_SCHEDULE_WARNING "the stored tree of %s is not used: its kernels are of "
                                       "rank %d, the stage's is %d",
                 t->name, tree->nspatial, t->rank);
    for (int i = 0; !*msg && i < tree->nnodes; i++)
        if (tree->nodes[i].kind == TN_SPLIT &&
            !ir_te_find_dim(p, tree->dim_names[tree->nodes[i].dim]))
            snprintf(msg, sizeof msg,
                     SRCH_SCHEDULE_WARNING "the stored tree of %s is not used: it splits on dim "
                                           "%s, which the program does not have",
                     t->name, tree->dim_names[tree->nodes[i].dim]);
    if (*msg && warn)
        warn(warn_ud, msg);
    return !*msg;
}

/* Whether every kernel of a fitting stored tree is within
 * pass_check_microkernel's budgets; else a warning naming the first that
 * is not (a file written by hand or by a dcc without them). */
static bool tree_within_budgets(const SrchTree *tree, const Tensor *t, const TargetInfo *ti,
                                void (*warn)(void *ud, const char *msg), void *warn_ud)
{
    char why[300], msg[400];
    for (int k = 0; k < tree->nkernels; k++)
        if (!pass_check_microkernel(&tree->kernels[k], t, ti, why, sizeof why)) {
            snprintf(msg, sizeof msg, SRCH_SCHEDULE_WARNING "the stored tree of %s is not used: %s",
                     t->name, why);
            if (warn)
                warn(warn_ud, msg);
            return false;
        }
    return true;
}

/* Stage t's tree from the records of workload fp: the stored one when it
 * fits, else one fit to the selection's (or the baseline's) measurements;
 * NULL without either. */
static SrchTree *stage_tree(const SrchRecords *r, const char *fp, TeProgram *p, const Tensor *t,
                            const TargetInfo *ti, void (*warn)(void *ud, const char *msg),
                            void *warn_ud, char *err, size_t errlen)
{
    const SrchTree *stored = srch_records_tree(r, fp);
    if (stored && tree_fits(stored, p, t, warn, warn_ud) && tree_within_budgets(stored, t, ti, warn, warn_ud))
        return srch_tree_copy(stored);
    SrchOracle *o = srch_oracle_collect(r, fp, false, false, p, t, ti, NULL, 0);
    if (o->n == 0) {
        srch_oracle_free(o);
        o = srch_oracle_collect(r, fp, true, false, p, t, ti, NULL, 0);
    }
    SrchTree *tree = o->n > 0 ? srch_fit_oracle(p, o, 4, NULL, err, errlen) : NULL;
    srch_oracle_free(o);
    return tree;
}

/* Sets the Fuse of p's undecided intermediates as r's fuse lines for p on
 * (target, arch) say; set[id] marks the ones it set. */
static void apply_fuse_lines(const SrchRecords *r, TeProgram *p, const char *target,
                             const char *arch, bool *set)
{
    char *pf = srch_program_fingerprint(p, target, arch);
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        Fuse f = pass_fuse_choosable(t) && t->fuse == FUSE_COST
                     ? srch_records_fuse(r, pf, t->name) : FUSE_COST;
        set[i] = f != FUSE_COST;
        if (set[i])
            t->fuse = f;
    }
    free(pf);
}

static void undo_fuse_lines(TeProgram *p, const bool *set)
{
    for (int i = 0; i < p->ntensors; i++)
        if (set[i])
            p->tensors[i]->fuse = FUSE_COST;
}

/* How many stages have a stored tree or measurements under fps. */
static int covered(const SrchRecords *r, const TeProgram *p, char **fps)
{
    int n = 0;
    for (int i = 0; i < p->ntensors; i++) {
        bool any = fps[i] && srch_records_tree(r, fps[i]);
        for (int k = 0; fps[i] && !any && k < srch_records_count(r); k++)
            any = strcmp(srch_records_at(r, k)->workload, fps[i]) == 0;
        n += any;
    }
    return n;
}

int srch_schedule_from_records(TeProgram *p, const char *path, const char *target,
                               const char *arch, StageSchedule *sched, SrchTree **trees,
                               char *used_arch, size_t usedlen,
                               void (*warn)(void *ud, const char *msg), void *warn_ud, char *err,
                               size_t errlen)
{
    SrchRecords *r = srch_records_read(path, 0, NULL, err, errlen);
    if (!r)
        return -1;
    for (int i = 0; warn && i < srch_records_nwarnings(r); i++)
        warn(warn_ud, srch_records_warning(r, i)->msg);
    /* this arch's records first, else another arch's of the same target */
    enum { MAX_ARCHS = 32 };
    const char *archs[MAX_ARCHS + 1] = {arch};
    int na = 1 + srch_records_archs(r, target, archs + 1, MAX_ARCHS);
    Expr **bodies;
    char **fp = NULL;
    bool *set = calloc((size_t)p->ntensors + 1, sizeof *set);
    for (int a = 0; a < na; a++) {
        if (a > 0 && strcmp(archs[a], arch) == 0)
            continue;
        apply_fuse_lines(r, p, target, archs[a], set);
        fp = fingerprints(p, target, archs[a], &bodies);
        if (covered(r, p, fp) > 0) {
            if (used_arch)
                snprintf(used_arch, usedlen, "%s", archs[a]);
            break;
        }
        undo_fuse_lines(p, set);
        free_fingerprints(p, fp);
        fp = NULL;
    }
    free(set);
    if (!fp) { /* say which targets the file does have records of */
        char have[256] = "";
        size_t k = 0;
        for (int i = 0; i < srch_records_count(r) && k < sizeof have; i++) {
            const char *t = srch_records_at(r, i)->target;
            char quoted[64];
            snprintf(quoted, sizeof quoted, " %s,", t);
            if (!strstr(have, quoted))
                k += (size_t)snprintf(have + k, sizeof have - k, "%s", quoted);
        }
        if (k)
            have[strlen(have) - 1] = 0; /* the last comma */
        srch_seterr(err, errlen, "%s: no record of this program for target %s; %s%s (tune it "
                    "first: dcc tune --target=%s)", path, target,
                    k ? "the file has records of target" : "the file has no records",
                    have, target);
        srch_records_close(r);
        return 1;
    }
    TargetInfo ti = pass_target_info(strcmp(target, "cpu") == 0 ? PT_CPU : PT_GPU);
    int rc = 0, nstages = 0, missing = 0;
    for (int i = 0; i < p->ntensors && rc == 0; i++) {
        sched[i] = (StageSchedule){0, NULL, NULL};
        if (trees)
            trees[i] = NULL;
        if (!fp[i])
            continue;
        char why[512] = "";
        SrchTree *tree = stage_tree(r, fp[i], p, p->tensors[i], &ti, warn, warn_ud, why,
                                    sizeof why);
        nstages++;
        if (!tree) {
            if (why[0]) {
                srch_seterr(err, errlen, "%s", why);
                rc = -1;
            }
            missing++;
            continue;
        }
        MicroKernel *v;
        int nv;
        const Dispatch *d = srch_tree_to_dispatch(p, tree, &v, &nv);
        sched[i] = (StageSchedule){nv, v, d};
        if (trees)
            trees[i] = tree;
        else
            srch_tree_free(tree);
    }
    if (rc == 0 && missing > 0 && warn) {
        char msg[PATH_MAX + 256];
        snprintf(msg, sizeof msg,
                 SRCH_SCHEDULE_WARNING "%d of the program's %d stages have no usable record in "
                                       "%s for target %s and run the default kernels (records "
                                       "of another version of dcc or of another program do "
                                       "not serve)",
                 missing, nstages, path, target);
        warn(warn_ud, msg);
    }
    free_fingerprints(p, fp);
    srch_records_close(r);
    return rc;
}

/* The default schedule of t as a tree (malloc'd): its dispatch's nodes,
 * dims by their index in p->dims. */
static SrchTree *default_tree(TeProgram *p, const Tensor *t, const Expr *body,
                              const TargetInfo *ti)
{
    StageSchedule s = pass_default_schedule(p, t, body, ti);
    DispatchNode leaf = {0, 0, 0, 0, 0};
    int nn = s.dispatch ? s.dispatch->nnodes : 1;
    const DispatchNode *dn = s.dispatch ? s.dispatch->nodes : &leaf;
    SrchTreeNode *nodes = calloc((size_t)nn, sizeof *nodes);
    char **names = calloc((size_t)p->ndims + 1, sizeof *names);
    for (int d = 0; d < p->ndims; d++)
        names[d] = (char *)p->dims[d]->name;
    for (int i = 0; i < nn; i++) {
        int dim = 0;
        for (int d = 0; d < p->ndims; d++)
            if (dn[i].variant < 0 && p->dims[d]->pos == dn[i].dim)
                dim = d;
        nodes[i] = dn[i].variant >= 0
                       ? (SrchTreeNode){TN_LEAF, dn[i].variant, 0, 0, 0, 0}
                       : (SrchTreeNode){TN_SPLIT, 0, dim, dn[i].le, dn[i].then_node,
                                        dn[i].else_node};
    }
    SrchTree view = {p->ndims, names, s.nvariants, (MicroKernel *)s.variants, t->rank, nn, nodes};
    SrchTree *tree = srch_tree_copy(&view);
    free(names);
    free(nodes);
    return tree;
}

char *srch_schedule_to_json(TeProgram *p, const char *target, const char *arch,
                            SrchTree *const *trees)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "v", SRCH_RECORDS_VERSION);
    cJSON_AddStringToObject(root, "target", target);
    cJSON_AddStringToObject(root, "arch", arch);
    cJSON *stages = cJSON_AddObjectToObject(root, "stages");
    Expr **bodies;
    char **fp = fingerprints(p, target, arch, &bodies);
    TargetInfo ti = pass_target_info(strcmp(target, "cpu") == 0 ? PT_CPU : PT_GPU);
    for (int i = 0; i < p->ntensors; i++) {
        Tensor *t = p->tensors[i];
        if (!fp[i])
            continue;
        cJSON *stage = cJSON_AddObjectToObject(stages, t->name);
        cJSON_AddStringToObject(stage, "workload", fp[i]);
        SrchTree *tree;
        if (trees && trees[i]) {
            /* only the kernels its leaves use, in the order they appear */
            const SrchTree *t0 = trees[i];
            int nk;
            int *remap = used_kernels(t0, &nk);
            tree = srch_tree_copy(t0);
            tree->nkernels = nk;
            for (int k = 0; k < t0->nkernels; k++)
                if (remap[k] >= 0)
                    tree->kernels[remap[k]] = t0->kernels[k];
            for (int n = 0; n < tree->nnodes; n++)
                if (tree->nodes[n].kind == TN_LEAF)
                    tree->nodes[n].kernel = remap[tree->nodes[n].kernel];
            free(remap);
        } else {
            tree = default_tree(p, t, bodies[i], &ti);
        }
        cJSON_AddItemToObject(stage, "tree", srch_tree_json(tree));
        srch_tree_free(tree);
    }
    free_fingerprints(p, fp);
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}
