/* tests/unit/test_search_tree.c: the dispatch decision tree.
 *
 * An obvious split is recovered exactly; the cost criterion picks the split
 * that minimises latency where accuracy would pick another; an unmeasured
 * kernel never wins by lacking measurements; depth and leaf-size limits
 * hold; shapes beyond the training range dispatch; fits are deterministic
 * (ties to the lower dim, then threshold) and independent of sample order;
 * the JSON form round-trips and the reader rejects malformed trees with a
 * one-line message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dietcode/passes.h"
#include "dietcode/search.h"

static const char *const KERNELS[] = {
    "threads [4] tile [8] rchunk 16 unroll 1 vec 8",
    "threads [16] tile [2] rchunk 64 unroll 2 vec 16",
    "threads [32] tile [1] rchunk 32 unroll 1 vec 4 along reduction",
};
static MicroKernel MKS[3];
static const char *const DIMS1[] = {"T"};
static const char *const DIMS2[] = {"M", "N"};

/* A dataset with room for n samples of d dims and k kernels. */
typedef struct Data {
    SrchDataset ds;
    int64_t dims[4096];
    int label[1024];
    double cost[4096];
} Data;

static Data *data_new(int n, int d, int k)
{
    for (int i = 0; i < 3; i++)
        assert_true(pass_parse_microkernel(KERNELS[i], &MKS[i], NULL));
    Data *x = calloc(1, sizeof *x);
    x->ds = (SrchDataset){.n = n, .ndims = d, .nkernels = k, .dims = x->dims, .label = x->label,
                          .cost = x->cost, .dim_names = d == 1 ? DIMS1 : DIMS2,
                          .kernels = MKS, .nspatial = 1};
    return x;
}

/* Labels from costs: the measured winner, ties to the lower id. */
static void set_labels(Data *x)
{
    int K = x->ds.nkernels;
    for (int s = 0; s < x->ds.n; s++) {
        int b = -1;
        for (int k = 0; k < K; k++)
            if (!isnan(x->cost[s * K + k]) && (b < 0 || x->cost[s * K + k] < x->cost[s * K + b]))
                b = k;
        x->label[s] = b;
    }
}

static SrchTree *fit(const Data *x, int depth, int min_leaf)
{
    SrchTreeParams p = {depth, min_leaf};
    char err[256] = "";
    SrchTree *t = srch_tree_fit(&x->ds, &p, err, sizeof err);
    if (!t)
        fail_msg("fit: %s", err);
    return t;
}

/* T in 1..64: kernel 0 is twice as fast up to 16, kernel 1 above. */
static Data *obvious(void)
{
    Data *x = data_new(64, 1, 2);
    for (int s = 0; s < 64; s++) {
        int64_t T = s + 1;
        x->dims[s] = T;
        x->cost[s * 2 + 0] = (double)T * (T <= 16 ? 1 : 2);
        x->cost[s * 2 + 1] = (double)T * (T <= 16 ? 2 : 1);
    }
    set_labels(x);
    return x;
}

static void test_obvious_split(void **state)
{
    Data *x = obvious();
    SrchTree *t = fit(x, 4, 1);
    assert_int_equal(t->nnodes, 3);
    const SrchTreeNode *r = srch_tree_node(t, 0);
    assert_int_equal(r->kind, TN_SPLIT);
    assert_int_equal(r->dim, 0);
    assert_int_equal(r->le, 16);
    assert_int_equal(srch_tree_node(t, r->then_node)->kind, TN_LEAF);
    assert_int_equal(srch_tree_node(t, r->then_node)->kernel, 0);
    assert_int_equal(srch_tree_node(t, r->else_node)->kernel, 1);
    assert_true(r->then_node > 0 && r->else_node > 0);
    assert_null(srch_tree_node(t, 3));
    assert_int_equal(srch_tree_depth(t), 1);
    SrchTreeScore sc = srch_tree_score(t, &x->ds);
    assert_int_equal(sc.hits, 64);
    assert_true(sc.accuracy == 1.0);
    assert_int_equal(sc.misses, 0);
    assert_true(sc.miss_geomean == 1.0 && sc.miss_worst == 1.0 && sc.geomean == 1.0);
    srch_tree_free(t);
    free(x);
}

/* A tree over another kernel table picks the same kernels, numbered there;
 * one whose kernel is missing from the table is refused. */
static void test_renumber(void **state)
{
    Data *x = obvious();
    SrchTree *t = fit(x, 4, 1);
    MicroKernel table[3] = {MKS[2], MKS[1], MKS[0]};
    SrchTree *r = srch_tree_renumber(t, 3, table);
    assert_non_null(r);
    assert_int_equal(r->nkernels, 3);
    for (int64_t T = 1; T <= 80; T++) {
        int a = srch_tree_predict(t, &T), b = srch_tree_predict(r, &T);
        assert_int_equal(ir_microkernel_cmp(&t->kernels[a], &r->kernels[b]), 0);
        assert_int_equal(b, T <= 16 ? 2 : 1);
    }
    assert_null(srch_tree_renumber(t, 2, table)); /* kernel 0 is not among them */
    srch_tree_free(r);
    srch_tree_free(t);
    free(x);
}

static void test_beyond_range(void **state)
{
    Data *x = obvious();
    SrchTree *t = fit(x, 4, 1);
    int64_t v[] = {100000};
    assert_int_equal(srch_tree_predict(t, v), 1);
    v[0] = INT64_MAX;
    assert_int_equal(srch_tree_predict(t, v), 1);
    v[0] = 0;
    assert_int_equal(srch_tree_predict(t, v), 0);
    v[0] = -7;
    assert_int_equal(srch_tree_predict(t, v), 0);
    v[0] = 16;
    assert_int_equal(srch_tree_predict(t, v), 0);
    v[0] = 17;
    assert_int_equal(srch_tree_predict(t, v), 1);
    srch_tree_free(t);
    free(x);
}

/* Segment T=1..2: kernel 1 wins by 100x. T=3..12: kernel 0 by 1.2x.
 * T=13..20: kernel 1 by 1.05x. With one split, accuracy is best at T<=12
 * (18/20 right) but that sends T=1..2 to kernel 0 or T=3..12 to kernel 1;
 * latency is best at T<=2 (12/20 right, 20.4 ms against 22). */
static Data *crafted(void)
{
    Data *x = data_new(20, 1, 2);
    for (int s = 0; s < 20; s++) {
        int T = s + 1;
        x->dims[s] = T;
        double a = T <= 2 ? 100 : T <= 12 ? 1 : 1.05;
        double b = T <= 2 ? 1 : T <= 12 ? 1.2 : 1;
        x->cost[s * 2] = a;
        x->cost[s * 2 + 1] = b;
    }
    set_labels(x);
    return x;
}

static double total_latency(const SrchTree *t, const Data *x)
{
    double sum = 0;
    for (int s = 0; s < x->ds.n; s++)
        sum += x->cost[s * x->ds.nkernels + srch_tree_predict(t, &x->dims[s * x->ds.ndims])];
    return sum;
}

static void test_cost_beats_accuracy(void **state)
{
    Data *x = crafted();
    SrchTree *tc = fit(x, 1, 1);
    assert_int_equal(tc->nodes[0].kind, TN_SPLIT);
    assert_int_equal(tc->nodes[0].le, 2);
    SrchTreeScore sc = srch_tree_score(tc, &x->ds);
    assert_int_equal(sc.hits, 12);
    assert_int_equal(sc.misses, 8);
    assert_int_equal(sc.unmeasured, 0);
    assert_true(fabs(sc.miss_worst - 1.05) < 1e-12);
    assert_true(fabs(sc.miss_geomean - 1.05) < 1e-12);
    assert_true(fabs(sc.geomean - pow(1.05, 8.0 / 20)) < 1e-12);

    /* without costs the criterion is accuracy, and it splits elsewhere */
    x->ds.cost = NULL;
    SrchTree *ta = fit(x, 1, 1);
    assert_int_equal(ta->nodes[0].le, 12);
    SrchTreeScore sa = srch_tree_score(ta, &x->ds);
    assert_int_equal(sa.hits, 18);
    assert_int_equal(sa.unmeasured, 2); /* no costs: slowdowns unknown */
    x->ds.cost = x->cost;
    assert_true(total_latency(tc, x) < total_latency(ta, x) - 1);
    sa = srch_tree_score(ta, &x->ds);
    assert_true(sa.miss_worst > 50); /* the accuracy tree's misses are expensive */
    srch_tree_free(tc);
    srch_tree_free(ta);
    free(x);
}

static void test_unmeasured_never_wins(void **state)
{
    /* kernel 2 is measured once, where it is fastest; elsewhere it is
     * unknown and must count as the slowest measured kernel there */
    Data *x = data_new(10, 1, 3);
    for (int s = 0; s < 10; s++) {
        x->dims[s] = s;
        x->cost[s * 3] = 1;
        x->cost[s * 3 + 1] = 2;
        x->cost[s * 3 + 2] = s == 0 ? 0.9 : NAN;
    }
    set_labels(x);
    SrchTree *t = fit(x, 0, 1);
    assert_int_equal(t->nnodes, 1);
    assert_int_equal(t->nodes[0].kernel, 0);
    srch_tree_free(t);
    /* given a split, it takes kernel 2 only where it was measured */
    t = fit(x, 3, 1);
    int64_t v[] = {0};
    assert_int_equal(srch_tree_predict(t, v), 2);
    for (v[0] = 1; v[0] < 10; v[0]++)
        assert_int_equal(srch_tree_predict(t, v), 0);
    srch_tree_free(t);
    free(x);
}

/* Runs of halving length (0..31, 32..47, 48..55, ..., 62, 63) won by
 * kernels 0, 1, 2, 0, ...: six nested splits, each of which helps on its own. */
static void test_depth_and_leaf_limits(void **state)
{
    Data *x = data_new(64, 1, 3);
    for (int s = 0; s < 64; s++) {
        x->dims[s] = s;
        int run = 0;
        while (run < 6 && s >= 64 - (64 >> (run + 1)))
            run++;
        for (int k = 0; k < 3; k++)
            x->cost[s * 3 + k] = k == run % 3 ? 1 : 3;
    }
    set_labels(x);
    for (int depth = 0; depth <= 6; depth++) {
        SrchTree *t = fit(x, depth, 1);
        assert_int_equal(srch_tree_depth(t), depth);
        srch_tree_free(t);
    }
    SrchTree *t = fit(x, 32, 1);
    assert_true(srch_tree_score(t, &x->ds).accuracy == 1.0);
    assert_true(srch_tree_depth(t) <= 32);
    srch_tree_free(t);

    /* every leaf gets at least min_leaf samples */
    for (int min_leaf = 1; min_leaf <= 20; min_leaf += 3) {
        t = fit(x, 10, min_leaf);
        int per_leaf[4096] = {0};
        for (int s = 0; s < 64; s++) {
            int i = 0;
            while (t->nodes[i].kind == TN_SPLIT)
                i = x->dims[s] <= t->nodes[i].le ? t->nodes[i].then_node : t->nodes[i].else_node;
            per_leaf[i]++;
        }
        for (int i = 0; i < t->nnodes; i++)
            if (t->nodes[i].kind == TN_LEAF)
                assert_true(per_leaf[i] >= min_leaf);
        srch_tree_free(t);
    }
    free(x);
}

/* Two dims; kernel 0 wins where M <= 8, kernel 1 where N <= 100, else 2. */
static Data *two_dims(int order_seed)
{
    Data *x = data_new(0, 2, 3);
    int n = 0;
    for (int m = 1; m <= 16; m++)
        for (int nn = 50; nn <= 200; nn += 25) {
            x->dims[n * 2] = m;
            x->dims[n * 2 + 1] = nn;
            int w = m <= 8 ? 0 : nn <= 100 ? 1 : 2;
            for (int k = 0; k < 3; k++)
                x->cost[n * 3 + k] = k == w ? 0.5 * m : 0.75 * m + k; /* exact in binary */
            n++;
        }
    x->ds.n = n;
    srand((unsigned)order_seed);
    for (int i = n - 1; order_seed && i > 0; i--) { /* shuffle the samples */
        int j = rand() % (i + 1);
        for (int c = 0; c < 2; c++) {
            int64_t tmp = x->dims[i * 2 + c];
            x->dims[i * 2 + c] = x->dims[j * 2 + c];
            x->dims[j * 2 + c] = tmp;
        }
        for (int c = 0; c < 3; c++) {
            double tmp = x->cost[i * 3 + c];
            x->cost[i * 3 + c] = x->cost[j * 3 + c];
            x->cost[j * 3 + c] = tmp;
        }
    }
    set_labels(x);
    return x;
}

static void test_deterministic(void **state)
{
    Data *x = two_dims(0);
    SrchTree *t = fit(x, 5, 1);
    char *a = srch_tree_to_json(t);
    assert_true(srch_tree_score(t, &x->ds).accuracy == 1.0);
    srch_tree_free(t);
    t = fit(x, 5, 1);
    char *b = srch_tree_to_json(t);
    assert_string_equal(a, b);
    srch_tree_free(t);
    free(b);
    free(x);
    for (int seed = 1; seed <= 5; seed++) {
        x = two_dims(seed);
        t = fit(x, 5, 1);
        b = srch_tree_to_json(t);
        assert_string_equal(a, b);
        free(b);
        srch_tree_free(t);
        free(x);
    }
    free(a);

    /* ties: two identical dims split on the first */
    x = data_new(16, 2, 2);
    for (int s = 0; s < 16; s++) {
        x->dims[s * 2] = x->dims[s * 2 + 1] = s;
        x->cost[s * 2] = s < 5 ? 1 : 2;
        x->cost[s * 2 + 1] = s < 5 ? 2 : 1;
    }
    set_labels(x);
    t = fit(x, 3, 1);
    assert_int_equal(t->nodes[0].dim, 0);
    assert_int_equal(t->nodes[0].le, 4);
    srch_tree_free(t);
    free(x);
}

static void test_json_round_trip(void **state)
{
    Data *x = two_dims(0);
    SrchTree *t = fit(x, 5, 1);
    char *s = srch_tree_to_json(t);
    assert_non_null(strstr(s, "\"v\":1"));
    assert_non_null(strstr(s, "\"dims\":[\"M\",\"N\"]"));
    assert_non_null(strstr(s, KERNELS[2]));
    assert_null(strchr(s, '\n'));
    char err[256] = "";
    SrchTree *u = srch_tree_from_json(s, strlen(s), err, sizeof err);
    if (!u)
        fail_msg("read back: %s", err);
    assert_int_equal(u->nnodes, t->nnodes);
    assert_int_equal(u->ndims, 2);
    assert_int_equal(u->nkernels, 3);
    assert_int_equal(ir_microkernel_cmp(&u->kernels[1], &MKS[1]), 0);
    assert_int_equal(u->nspatial, 1);
    for (int i = 0; i < t->nnodes; i++) {
        const SrchTreeNode *p = srch_tree_node(t, i), *q = srch_tree_node(u, i);
        assert_int_equal(p->kind, q->kind);
        if (p->kind == TN_LEAF) {
            assert_int_equal(p->kernel, q->kernel);
        } else {
            assert_int_equal(p->dim, q->dim);
            assert_int_equal(p->le, q->le);
            assert_int_equal(p->then_node, q->then_node);
            assert_int_equal(p->else_node, q->else_node);
        }
    }
    char *s2 = srch_tree_to_json(u);
    assert_string_equal(s, s2);
    for (int sidx = 0; sidx < x->ds.n; sidx++)
        assert_int_equal(srch_tree_predict(t, &x->dims[sidx * 2]),
                         srch_tree_predict(u, &x->dims[sidx * 2]));
    free(s2);
    srch_tree_free(u);
    srch_tree_free(t);
    free(s);
    free(x);

    /* a single-leaf tree over no dims */
    Data *y = data_new(3, 0, 2);
    y->ds.dim_names = NULL;
    y->cost[0] = y->cost[2] = y->cost[4] = 1;
    y->cost[1] = y->cost[3] = y->cost[5] = 2;
    set_labels(y);
    t = fit(y, 4, 1);
    assert_int_equal(t->nnodes, 1);
    s = srch_tree_to_json(t);
    u = srch_tree_from_json(s, strlen(s), err, sizeof err);
    assert_non_null(u);
    assert_int_equal(srch_tree_predict(u, NULL), 0);
    srch_tree_free(u);
    srch_tree_free(t);
    free(s);
    free(y);
}

static void reject(const char *json, const char *needle)
{
    char err[256] = "";
    SrchTree *t = srch_tree_from_json(json, strlen(json), err, sizeof err);
    if (t || !strstr(err, needle) || strchr(err, '\n') || strncmp(err, "dispatch tree: ", 15))
        fail_msg("%s: want error with '%s', got '%s'", json, needle, err);
}

#define K0 "\"threads [4] tile [8] rchunk 16 unroll 1 vec 8\""

static void test_json_rejects(void **state)
{
    reject("", "not valid JSON");
    reject("{\"v\":1,", "not valid JSON");
    reject("[1]", "not a JSON object");
    reject("{\"v\":2,\"dims\":[],\"kernels\":[" K0 "],\"tree\":{\"kernel\":0}}", "version");
    reject("{\"v\":1,\"kernels\":[" K0 "],\"tree\":{\"kernel\":0}}", "\"dims\"");
    reject("{\"v\":1,\"dims\":[\"T\",\"T\"],\"kernels\":[" K0 "],\"tree\":{\"kernel\":0}}",
           "twice");
    reject("{\"v\":1,\"dims\":[3],\"kernels\":[" K0 "],\"tree\":{\"kernel\":0}}", "\"dims\"");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[\"nonsense\"],\"tree\":{\"kernel\":0}}",
           "micro-kernel");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[],\"tree\":{\"kernel\":0}}", "empty");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[" K0 "]}", "missing \"tree\"");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[" K0 "],\"tree\":{\"kernel\":1}}", "kernel index");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[" K0 "],\"tree\":{\"kernel\":0.5}}", "kernel index");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[" K0 "],\"tree\":{\"kernel\":\"0\"}}", "kernel index");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[" K0 "],\"tree\":[]}", "not an object");
    reject("{\"v\":1,\"dims\":[\"T\"],\"kernels\":[" K0 "],\"tree\":{\"dim\":\"U\",\"le\":1,"
           "\"then\":{\"kernel\":0},\"else\":{\"kernel\":0}}}",
           "not in \"dims\"");
    reject("{\"v\":1,\"dims\":[\"T\"],\"kernels\":[" K0 "],\"tree\":{\"dim\":\"T\","
           "\"then\":{\"kernel\":0},\"else\":{\"kernel\":0}}}",
           "\"le\"");
    reject("{\"v\":1,\"dims\":[\"T\"],\"kernels\":[" K0 "],\"tree\":{\"dim\":\"T\",\"le\":1e300,"
           "\"then\":{\"kernel\":0},\"else\":{\"kernel\":0}}}",
           "\"le\"");
    reject("{\"v\":1,\"dims\":[\"T\"],\"kernels\":[" K0 "],\"tree\":{\"dim\":\"T\",\"le\":1,"
           "\"then\":{\"kernel\":0}}}",
           "not an object");
    reject("{\"v\":1,\"dims\":[\"T\"],\"kernels\":[" K0 "],\"tree\":{\"dim\":\"T\",\"le\":1,"
           "\"kernel\":0}}",
           "both");
    reject("{\"v\":1,\"dims\":[\"T\"],\"kernels\":[" K0 "],\"tree\":{}}", "neither");
    /* an atomic split-K kernel only with the opt-in recorded */
#define KA "\"threads [4] tile [8] rchunk 16 unroll 1 vec 8 split 4 atomic\""
    reject("{\"v\":1,\"dims\":[],\"kernels\":[" K0 "," KA "],\"tree\":{\"kernel\":0}}",
           "\"atomic_split\" is not true");
    reject("{\"v\":1,\"dims\":[],\"atomic_split\":1,\"kernels\":[" KA "],\"tree\":{\"kernel\":0}}",
           "\"atomic_split\" is not true");
    reject("{\"v\":1,\"dims\":[],\"kernels\":[\"threads [4] tile [8] rchunk 16 unroll 1 vec 8 "
           "atomic\"],\"tree\":{\"kernel\":0}}",
           "micro-kernel"); /* atomic without a split */
    const char *ok = "{\"v\":1,\"dims\":[],\"atomic_split\":true,\"kernels\":[" K0 "," KA
                     "],\"tree\":{\"kernel\":1}}";
    char aerr[256] = "";
    SrchTree *at = srch_tree_from_json(ok, strlen(ok), aerr, sizeof aerr);
    if (!at)
        fail_msg("%s", aerr);
    assert_true(at->kernels[1].atomic && at->kernels[1].split == 4 && !at->kernels[0].atomic);
    char *back = srch_tree_to_json(at);
    assert_non_null(strstr(back, "\"atomic_split\":true"));
    assert_non_null(strstr(back, "split 4 atomic"));
    free(back);
    srch_tree_free(at);
    /* without such a kernel, no opt-in written */
    at = srch_tree_from_json(ok, strlen(ok), aerr, sizeof aerr);
    at->kernels[1].atomic = false;
    back = srch_tree_to_json(at);
    assert_null(strstr(back, "atomic"));
    free(back);
    srch_tree_free(at);

    /* deeper than the limit */
    char *deep = malloc(100000);
    size_t n = (size_t)sprintf(deep, "{\"v\":1,\"dims\":[\"T\"],\"kernels\":[" K0 "],\"tree\":");
    for (int i = 0; i < 40; i++)
        n += (size_t)sprintf(deep + n, "{\"dim\":\"T\",\"le\":%d,\"then\":{\"kernel\":0},\"else\":", i);
    n += (size_t)sprintf(deep + n, "{\"kernel\":0}");
    for (int i = 0; i < 41; i++)
        deep[n++] = '}';
    deep[n] = 0;
    reject(deep, "deeper");
    /* nested far beyond cJSON's limit */
    n = 0;
    for (int i = 0; i < 20000; i++)
        deep[n++] = '[';
    deep[n] = 0;
    reject(deep, "not valid JSON");
    free(deep);

    char err[256];
    assert_null(srch_tree_from_json(NULL, 0, err, sizeof err));
}

static void test_fit_rejects(void **state)
{
    Data *x = obvious();
    char err[256] = "";
    SrchTreeParams p = {SRCH_TREE_MAX_DEPTH + 1, 1};
    assert_null(srch_tree_fit(&x->ds, &p, err, sizeof err));
    assert_non_null(strstr(err, "depth"));
    p = (SrchTreeParams){3, 0};
    assert_null(srch_tree_fit(&x->ds, &p, err, sizeof err));
    p = (SrchTreeParams){3, 1};
    x->label[5] = 2;
    assert_null(srch_tree_fit(&x->ds, &p, err, sizeof err));
    assert_non_null(strstr(err, "label"));
    x->label[5] = 0;
    x->cost[3] = -1;
    assert_null(srch_tree_fit(&x->ds, &p, err, sizeof err));
    x->cost[3] = INFINITY;
    assert_null(srch_tree_fit(&x->ds, &p, err, sizeof err));
    assert_null(strchr(err, '\n'));
    free(x);

    /* no samples: one leaf, kernel 0 */
    x = data_new(0, 1, 2);
    SrchTree *t = srch_tree_fit(&x->ds, &p, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(t->nnodes, 1);
    assert_true(srch_tree_score(t, &x->ds).accuracy == 1.0);
    srch_tree_free(t);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_obvious_split),
        cmocka_unit_test(test_renumber),
        cmocka_unit_test(test_beyond_range),
        cmocka_unit_test(test_cost_beats_accuracy),
        cmocka_unit_test(test_unmeasured_never_wins),
        cmocka_unit_test(test_depth_and_leaf_limits),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_rejects),
        cmocka_unit_test(test_fit_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
