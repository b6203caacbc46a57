/* search/tree.c: the dispatch tree, fit, evaluated and exported.
 *
 * CART with a cost criterion. What dispatch should minimise is the latency
 * of the kernel it picks, not the number of shapes where it picks the
 * exact winner: missing the winner by 1% at a large shape is cheap, missing
 * it by 3x at a small one is not. So a node's cost for kernel k is the sum
 * of the samples' measured latencies under k, the node takes the cheapest
 * k, and a split is chosen to minimise the children's summed cost. Where a
 * kernel was not measured on a sample it counts as that sample's slowest
 * measured kernel: lacking a measurement must never make a kernel look
 * good. Without a cost matrix the cost is 0/1 (plain misclassification).
 *
 * Each dim's samples are sorted once; a node owns one contiguous range of
 * every sorted array and a split stably partitions them, so a level of the
 * tree costs O(n * ndims * nkernels). Thresholds are sample values (the
 * largest on the "<=" side): a shape between two training points goes with
 * the larger one, and every shape, in range or not, reaches one leaf.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dietcode/passes.h"
#include "dietcode/search.h"


static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        ir_panic(__FILE__, __LINE__, "out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = xcalloc(n, 1);
    memcpy(p, s, n);
    return p;
}

void srch_tree_free(SrchTree *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->ndims; i++)
        free(t->dim_names[i]);
    free(t->dim_names);
    free(t->kernels);
    free(t->nodes);
    free(t);
}

/* A tree with names and kernels copied and no nodes yet. */
static SrchTree *tree_new(int ndims, const char *const *dims, int nkernels,
                          const MicroKernel *kernels, int nspatial)
{
    SrchTree *t = xcalloc(1, sizeof *t);
    t->ndims = ndims;
    t->dim_names = xcalloc((size_t)ndims, sizeof *t->dim_names);
    for (int i = 0; i < ndims; i++)
        t->dim_names[i] = xstrdup(dims[i]);
    t->nkernels = nkernels;
    t->kernels = xcalloc((size_t)nkernels, sizeof *t->kernels);
    memcpy(t->kernels, kernels, sizeof *kernels * (size_t)nkernels);
    t->nspatial = nspatial;
    return t;
}

/* t's dims and nodes over the kernel table given. */
static SrchTree *tree_over(const SrchTree *t, int nkernels, const MicroKernel *kernels)
{
    SrchTree *c = tree_new(t->ndims, (const char *const *)t->dim_names, nkernels, kernels,
                           t->nspatial);
    c->nnodes = t->nnodes;
    c->nodes = xcalloc((size_t)t->nnodes, sizeof *c->nodes);
    memcpy(c->nodes, t->nodes, sizeof *c->nodes * (size_t)t->nnodes);
    return c;
}

SrchTree *srch_tree_copy(const SrchTree *t) { return tree_over(t, t->nkernels, t->kernels); }

SrchTree *srch_tree_renumber(const SrchTree *t, int nkernels, const MicroKernel *kernels)
{
    int *to = xcalloc((size_t)t->nkernels + 1, sizeof *to);
    for (int i = 0; i < t->nkernels; i++) {
        to[i] = -1;
        for (int k = 0; k < nkernels && to[i] < 0; k++)
            if (ir_microkernel_cmp(&t->kernels[i], &kernels[k]) == 0)
                to[i] = k;
        if (to[i] < 0) {
            free(to);
            return NULL;
        }
    }
    SrchTree *c = tree_over(t, nkernels, kernels);
    for (int i = 0; i < c->nnodes; i++)
        if (c->nodes[i].kind == TN_LEAF)
            c->nodes[i].kernel = to[c->nodes[i].kernel];
    free(to);
    return c;
}

static int add_node(SrchTree *t, int *cap)
{
    if (t->nnodes == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        SrchTreeNode *n = realloc(t->nodes, sizeof *n * (size_t)*cap);
        if (!n)
            ir_panic(__FILE__, __LINE__, "out of memory");
        t->nodes = n;
    }
    memset(&t->nodes[t->nnodes], 0, sizeof t->nodes[0]);
    return t->nnodes++;
}

/* ---- fitting ---- */

typedef struct Fit {
    const SrchDataset *ds;
    const SrchTreeParams *p;
    double *cost;     /* n x K effective cost */
    int **order;      /* per dim: sample indexes sorted by (value, index) */
    int *all;         /* sample indexes, partitioned like order (used when ndims is 0) */
    int *tmp;
    char *left;       /* per sample: goes to the "then" side of the split being made */
    double *tot, *lsum;
    SrchTree *t;
    int cap;
} Fit;

static int64_t val(const Fit *f, int s, int d)
{
    return f->ds->dims[(size_t)s * (size_t)f->ds->ndims + (size_t)d];
}

typedef struct SortCtx {
    const Fit *f;
    int dim;
} SortCtx;

static int cmp_samples(const void *a, const void *b, void *ctx)
{
    const SortCtx *c = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int64_t vx = val(c->f, x, c->dim), vy = val(c->f, y, c->dim);
    if (vx != vy)
        return vx < vy ? -1 : 1;
    return (x > y) - (x < y);
}

/* The cheapest kernel for summed costs c; ties to the lower id. */
static int argmin(const double *c, int k, double *best)
{
    int b = 0;
    for (int i = 1; i < k; i++)
        if (c[i] < c[b])
            b = i;
    *best = c[b];
    return b;
}

static void partition(int *a, int cnt, const char *left, int *tmp)
{
    int nl = 0, nr = 0;
    for (int i = 0; i < cnt; i++)
        if (left[a[i]])
            a[nl++] = a[i];
        else
            tmp[nr++] = a[i];
    memcpy(a + nl, tmp, sizeof *a * (size_t)nr);
}

/* Builds the subtree of samples [lo, lo+cnt) of every order array. */
static int build(Fit *f, int lo, int cnt, int depth)
{
    const SrchDataset *ds = f->ds;
    int K = ds->nkernels, D = ds->ndims;
    const int *samples = D ? f->order[0] + lo : f->all + lo;
    double *tot = f->tot + (size_t)depth * (size_t)K;
    memset(tot, 0, sizeof *tot * (size_t)K);
    for (int i = 0; i < cnt; i++)
        for (int k = 0; k < K; k++)
            tot[k] += f->cost[(size_t)samples[i] * (size_t)K + (size_t)k];
    double here;
    int label = argmin(tot, K, &here);
    int node = add_node(f->t, &f->cap);
    f->t->nodes[node].kind = TN_LEAF;
    f->t->nodes[node].kernel = label;
    if (depth >= f->p->max_depth || cnt < 2 * f->p->min_leaf || here <= 0)
        return node;

    int bd = -1;
    int64_t bt = 0;
    double best = here - 1e-9 * here; /* a split must really help */
    for (int d = 0; d < D; d++) {
        const int *o = f->order[d] + lo;
        memset(f->lsum, 0, sizeof *f->lsum * (size_t)K);
        for (int i = 0; i + 1 < cnt; i++) {
            const double *c = f->cost + (size_t)o[i] * (size_t)K;
            for (int k = 0; k < K; k++)
                f->lsum[k] += c[k];
            int64_t v = val(f, o[i], d);
            if (v == val(f, o[i + 1], d) || i + 1 < f->p->min_leaf ||
                cnt - (i + 1) < f->p->min_leaf)
                continue;
            double l = f->lsum[0], r = tot[0] - f->lsum[0];
            for (int k = 1; k < K; k++) {
                if (f->lsum[k] < l)
                    l = f->lsum[k];
                if (tot[k] - f->lsum[k] < r)
                    r = tot[k] - f->lsum[k];
            }
            if (l + r < best) {
                best = l + r;
                bd = d;
                bt = v;
            }
        }
    }
    if (bd < 0)
        return node;

    int nl = 0;
    for (int i = 0; i < cnt; i++) {
        f->left[samples[i]] = val(f, samples[i], bd) <= bt;
        nl += f->left[samples[i]];
    }
    for (int d = 0; d < D; d++)
        partition(f->order[d] + lo, cnt, f->left, f->tmp);
    int then_node = build(f, lo, nl, depth + 1);
    int else_node = build(f, lo + nl, cnt - nl, depth + 1);
    SrchTreeNode *n = &f->t->nodes[node];
    n->kind = TN_SPLIT;
    n->kernel = 0;
    n->dim = bd;
    n->le = bt;
    n->then_node = then_node;
    n->else_node = else_node;
    return node;
}

static const char *check_dataset(const SrchDataset *ds, const SrchTreeParams *p)
{
    if (!ds || !p)
        return "no dataset or parameters";
    if (p->max_depth < 0 || p->max_depth > SRCH_TREE_MAX_DEPTH)
        return "depth limit out of range";
    if (p->min_leaf < 1)
        return "minimum leaf size below 1";
    if (ds->n < 0 || ds->ndims < 0 || ds->ndims > SRCH_MAX_DIMS || ds->nkernels < 1)
        return "bad sample, dim or kernel count";
    if ((ds->n && (!ds->label || (ds->ndims && !ds->dims))) ||
        (ds->ndims && !ds->dim_names) || !ds->kernels)
        return "missing arrays";
    for (int d = 0; d < ds->ndims; d++) {
        if (!ds->dim_names[d] || !*ds->dim_names[d])
            return "empty dim name";
        for (int e = 0; e < d; e++)
            if (strcmp(ds->dim_names[d], ds->dim_names[e]) == 0)
                return "dim named twice";
    }
    if (ds->nspatial < 0 || ds->nspatial > MK_MAX_AXES)
        return "kernels of too many axes";
    for (size_t i = 0; i < (size_t)ds->n * (size_t)ds->ndims; i++)
        if (fabs((double)ds->dims[i]) > SRCH_MAX_EXACT)
            return "a dim value beyond 2^53";
    for (int s = 0; s < ds->n; s++)
        if (ds->label[s] < 0 || ds->label[s] >= ds->nkernels)
            return "a label out of range";
    if (ds->cost)
        for (size_t i = 0; i < (size_t)ds->n * (size_t)ds->nkernels; i++)
            if (!isnan(ds->cost[i]) && !(isfinite(ds->cost[i]) && ds->cost[i] >= 0))
                return "a cost that is neither NAN nor finite and >= 0";
    return NULL;
}

SrchTree *srch_tree_fit(const SrchDataset *ds, const SrchTreeParams *p, char *err,
                        size_t errlen)
{
    const char *why = check_dataset(ds, p);
    if (why) {
        srch_seterr(err, errlen, "dispatch tree: %s", why);
        return NULL;
    }
    int n = ds->n, K = ds->nkernels, D = ds->ndims;
    Fit f = {.ds = ds, .p = p};
    f.t = tree_new(D, ds->dim_names, K, ds->kernels, ds->nspatial);
    f.cost = xcalloc((size_t)n * (size_t)K, sizeof *f.cost);
    for (int s = 0; s < n; s++) {
        double *c = f.cost + (size_t)s * (size_t)K;
        if (!ds->cost) {
            for (int k = 0; k < K; k++)
                c[k] = k != ds->label[s];
            continue;
        }
        const double *m = ds->cost + (size_t)s * (size_t)K;
        double worst = NAN;
        for (int k = 0; k < K; k++)
            if (!isnan(m[k]) && !(m[k] <= worst))
                worst = m[k];
        for (int k = 0; k < K; k++)
            c[k] = !isnan(m[k]) ? m[k] : isnan(worst) ? 0 : worst;
    }
    f.order = xcalloc((size_t)D, sizeof *f.order);
    for (int d = 0; d < D; d++) {
        f.order[d] = xcalloc((size_t)n, sizeof **f.order);
        for (int s = 0; s < n; s++)
            f.order[d][s] = s;
        SortCtx c = {&f, d};
        qsort_r(f.order[d], (size_t)n, sizeof **f.order, cmp_samples, &c);
    }
    f.all = xcalloc((size_t)n, sizeof *f.all);
    for (int s = 0; s < n; s++)
        f.all[s] = s;
    f.tmp = xcalloc((size_t)n, sizeof *f.tmp);
    f.left = xcalloc((size_t)n, 1);
    f.tot = xcalloc((size_t)(p->max_depth + 1) * (size_t)K, sizeof *f.tot);
    f.lsum = xcalloc((size_t)K, sizeof *f.lsum);
    build(&f, 0, n, 0);
    for (int d = 0; d < D; d++)
        free(f.order[d]);
    free(f.order);
    free(f.all);
    free(f.tmp);
    free(f.left);
    free(f.tot);
    free(f.lsum);
    free(f.cost);
    return f.t;
}

/* ---- evaluation and walking ---- */

int srch_tree_predict(const SrchTree *t, const int64_t *dims)
{
    int i = 0;
    while (t->nodes[i].kind == TN_SPLIT)
        i = dims[t->nodes[i].dim] <= t->nodes[i].le ? t->nodes[i].then_node
                                                    : t->nodes[i].else_node;
    return t->nodes[i].kernel;
}

SrchTreeScore srch_tree_score(const SrchTree *t, const SrchDataset *ds)
{
    SrchTreeScore sc = {.n = ds->n, .accuracy = 1, .miss_geomean = 1, .miss_worst = 1,
                        .geomean = 1};
    double logsum = 0, misslog = 0;
    int nall = 0, nmiss = 0;
    for (int s = 0; s < ds->n; s++) {
        int k = srch_tree_predict(t, ds->dims + (size_t)s * (size_t)ds->ndims);
        nall++;
        if (k == ds->label[s]) {
            sc.hits++;
            continue;
        }
        sc.misses++;
        const double *c = ds->cost ? ds->cost + (size_t)s * (size_t)ds->nkernels : NULL;
        if (!c || k < 0 || k >= ds->nkernels || isnan(c[k]) || isnan(c[ds->label[s]]) ||
            !(c[ds->label[s]] > 0)) {
            sc.unmeasured++;
            nall--;
            continue;
        }
        double r = c[k] / c[ds->label[s]];
        logsum += log(r);
        misslog += log(r);
        nmiss++;
        if (r > sc.miss_worst || nmiss == 1)
            sc.miss_worst = r;
    }
    if (ds->n)
        sc.accuracy = (double)sc.hits / ds->n;
    if (nmiss)
        sc.miss_geomean = exp(misslog / nmiss);
    if (nall)
        sc.geomean = exp(logsum / nall);
    return sc;
}

const SrchTreeNode *srch_tree_node(const SrchTree *t, int i)
{
    return i >= 0 && i < t->nnodes ? &t->nodes[i] : NULL;
}

bool srch_tree_uses(const SrchTree *t, int kernel, int before)
{
    for (int k = 0; k < before && k < t->nnodes; k++)
        if (t->nodes[k].kind == TN_LEAF && t->nodes[k].kernel == kernel)
            return true;
    return false;
}

int srch_tree_depth(const SrchTree *t)
{
    /* children come after their parent, so one forward pass suffices */
    int *depth = xcalloc((size_t)t->nnodes, sizeof *depth);
    int max = 0;
    for (int i = 0; i < t->nnodes; i++) {
        if (depth[i] > max)
            max = depth[i];
        if (t->nodes[i].kind == TN_SPLIT)
            depth[t->nodes[i].then_node] = depth[t->nodes[i].else_node] = depth[i] + 1;
    }
    free(depth);
    return max;
}

/* ---- JSON ---- */

static cJSON *node_json(const SrchTree *t, int i)
{
    const SrchTreeNode *n = &t->nodes[i];
    cJSON *o = cJSON_CreateObject();
    if (n->kind == TN_LEAF) {
        cJSON_AddNumberToObject(o, "kernel", n->kernel);
        return o;
    }
    cJSON_AddStringToObject(o, "dim", t->dim_names[n->dim]);
    cJSON_AddNumberToObject(o, "le", (double)n->le);
    cJSON_AddItemToObject(o, "then", node_json(t, n->then_node));
    cJSON_AddItemToObject(o, "else", node_json(t, n->else_node));
    return o;
}

cJSON *srch_tree_json(const SrchTree *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "v", 1);
    cJSON *d = cJSON_AddArrayToObject(o, "dims");
    for (int i = 0; i < t->ndims; i++)
        cJSON_AddItemToArray(d, cJSON_CreateString(t->dim_names[i]));
    cJSON *k = cJSON_AddArrayToObject(o, "kernels");
    bool atomic = false;
    for (int i = 0; i < t->nkernels; i++) {
        char *s = srch_mk_str(&t->kernels[i], t->nspatial);
        cJSON_AddItemToArray(k, cJSON_CreateString(s));
        free(s);
        atomic |= t->kernels[i].atomic;
    }
    /* the opt-in: only a tuning run with atomic_split chooses such kernels */
    if (atomic)
        cJSON_AddTrueToObject(o, "atomic_split");
    cJSON_AddItemToObject(o, "tree", node_json(t, 0));
    return o;
}

char *srch_tree_to_json(const SrchTree *t)
{
    cJSON *o = srch_tree_json(t);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static bool exact_int(const cJSON *x, double lo, double hi, double *out)
{
    if (!cJSON_IsNumber(x) || !srch_exact_int(x->valuedouble, lo, hi))
        return false;
    *out = x->valuedouble;
    return true;
}

/* Reads the node o into t (preorder); NULL or the reason it is malformed. */
static const char *read_node(SrchTree *t, int *cap, const cJSON *o, int depth, int *out)
{
    if (!cJSON_IsObject(o))
        return "a node is not an object";
    if (depth > SRCH_TREE_MAX_DEPTH)
        return "tree deeper than the limit";
    const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(o, "kernel");
    const cJSON *dim = cJSON_GetObjectItemCaseSensitive(o, "dim");
    double x;
    int i = add_node(t, cap);
    *out = i;
    if (kernel) {
        if (dim)
            return "a node has both \"kernel\" and \"dim\"";
        if (!exact_int(kernel, 0, t->nkernels - 1, &x))
            return "a leaf's \"kernel\" is not a kernel index";
        t->nodes[i].kind = TN_LEAF;
        t->nodes[i].kernel = (int)x;
        return NULL;
    }
    if (!cJSON_IsString(dim) || !dim->valuestring)
        return "a node has neither \"kernel\" nor a \"dim\" string";
    int d = 0;
    while (d < t->ndims && strcmp(t->dim_names[d], dim->valuestring) != 0)
        d++;
    if (d == t->ndims)
        return "a split names a dim not in \"dims\"";
    if (!exact_int(cJSON_GetObjectItemCaseSensitive(o, "le"), -SRCH_MAX_EXACT, SRCH_MAX_EXACT, &x))
        return "a split's \"le\" is not an integer";
    t->nodes[i].kind = TN_SPLIT;
    t->nodes[i].dim = d;
    t->nodes[i].le = (int64_t)x;
    int a, b;
    const char *why = read_node(t, cap, cJSON_GetObjectItemCaseSensitive(o, "then"), depth + 1, &a);
    if (!why)
        why = read_node(t, cap, cJSON_GetObjectItemCaseSensitive(o, "else"), depth + 1, &b);
    if (why)
        return why;
    t->nodes[i].then_node = a;  /* t->nodes may have moved: index again */
    t->nodes[i].else_node = b;
    return NULL;
}

static const char *read_strings(const cJSON *a, int max, bool mk, int *n, const char ***out)
{
    if (!cJSON_IsArray(a))
        return "is missing or not an array";
    int cnt = cJSON_GetArraySize(a);
    if (cnt > max)
        return "is too long";
    const char **s = xcalloc((size_t)cnt, sizeof *s);
    *out = s;
    *n = 0;
    for (const cJSON *x = a->child; x && *n < cnt; x = x->next) {
        MicroKernel k;
        int nsp;
        if (!cJSON_IsString(x) || !x->valuestring || !*x->valuestring)
            return "has an entry that is not a non-empty string";
        if (mk && !pass_parse_microkernel(x->valuestring, &k, &nsp))
            return "has an entry that is not a micro-kernel";
        for (int j = 0; j < *n; j++)
            if (!mk && strcmp(s[j], x->valuestring) == 0)
                return "names a dim twice";
        s[(*n)++] = x->valuestring;
    }
    return NULL;
}

/* The kernels (checked micro-kernels) parsed, all of one rank; NULL when not. */
static MicroKernel *parse_kernels(const char *const *s, int n, int *nspatial)
{
    MicroKernel *k = xcalloc((size_t)n, sizeof *k);
    for (int i = 0; i < n; i++) {
        int nsp;
        if (!pass_parse_microkernel(s[i], &k[i], &nsp) || (i && nsp != *nspatial)) {
            free(k);
            return NULL;
        }
        *nspatial = nsp;
    }
    return k;
}

static bool any_atomic(const MicroKernel *k, int n)
{
    for (int i = 0; i < n; i++)
        if (k[i].atomic)
            return true;
    return false;
}

SrchTree *srch_tree_from_json(const char *text, size_t len, char *err, size_t errlen)
{
    cJSON *o = text ? cJSON_ParseWithLength(text, len) : NULL;
    const char **dims = NULL, **kernels = NULL;
    MicroKernel *mks = NULL;
    int nd = 0, nk = 0, nsp = 0, root;
    const char *why = NULL, *field = NULL;
    SrchTree *t = NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "v");
    if (!o)
        why = "not valid JSON";
    else if (!cJSON_IsObject(o))
        why = "not a JSON object";
    else if (!cJSON_IsNumber(v) || v->valuedouble != 1)
        why = "missing or unsupported version \"v\" (this dcc reads 1)";
    else if ((why = read_strings(cJSON_GetObjectItemCaseSensitive(o, "dims"), SRCH_MAX_DIMS,
                                 false, &nd, &dims)))
        field = "dims";
    else if ((why = read_strings(cJSON_GetObjectItemCaseSensitive(o, "kernels"), 1 << 20, true,
                                 &nk, &kernels)))
        field = "kernels";
    else if (nk == 0)
        why = "\"kernels\" is empty";
    else if (!(mks = parse_kernels(kernels, nk, &nsp)))
        why = "\"kernels\" are micro-kernels of different ranks";
    else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "atomic_split")) &&
             any_atomic(mks, nk))
        why = "a kernel splits its reduction atomically, but \"atomic_split\" is not true "
              "(only tuning with --atomic-split chooses such kernels)";
    else {
        t = tree_new(nd, dims, nk, mks, nsp);
        int cap = 0;
        const cJSON *tree = cJSON_GetObjectItemCaseSensitive(o, "tree");
        why = tree ? read_node(t, &cap, tree, 0, &root) : "missing \"tree\"";
    }
    if (why) {
        if (field)
            srch_seterr(err, errlen, "dispatch tree: \"%s\" %s", field, why);
        else
            srch_seterr(err, errlen, "dispatch tree: %s", why);
        srch_tree_free(t);
        t = NULL;
    }
    free(dims);
    free(kernels);
    free(mks);
    cJSON_Delete(o);
    return t;
}
