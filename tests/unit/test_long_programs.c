/* Fusion by cost (passes/inline.c) and programs far longer than anyone
 * writes by hand: which intermediates are materialised, the workspace
 * shared by lifetime (runtime/plan.c), and long chains compiled and run
 * against the reference interpreter on an 8 MB stack, so no recursion in
 * the compiler may grow with a program's length.
 *
 * DC_LONG_STATEMENTS sets the length of the longest chain (default
 * 100,000; the sanitizer build runs 10,000).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STACK_BYTES = 8 << 20 };

static TeProgram *load(FeUnit *u, const char *src)
{
    if (fe_load_text("test.tex", "t", src, u) != 0)
        ir_diags_print(&u->diags, stderr);
    assert_non_null(u->prog);
    return u->prog;
}

/* materialized[] as pass_inline decides it for src, by tensor name. */
static bool *decide(FeUnit *u, const char *src)
{
    TeProgram *p = load(u, src);
    Expr **bodies = calloc((size_t)p->ntensors, sizeof *bodies);
    bool *m = calloc((size_t)p->ntensors, sizeof *m);
    pass_inline(p, bodies, m);
    free(bodies);
    return m;
}

static bool is_materialized(const FeUnit *u, const bool *m, const char *name)
{
    const Tensor *t = ir_te_find(u->prog, name);
    if (!t)
        fail_msg("no tensor %s", name);
    return m[t->id];
}

static void test_fusion_by_cost(void **state)
{
    (void)state;
    const char *src =
        "dim T in 1..128\n"
        "input X[T, 768] f32\ninput g[768] f32\ninput W[3072, 768] f32\ninput V[T, 1000] f32\n"
        /* a layer norm read 3072 times per element inside the next layer's sum */
        "Mean[i: T] = sum[j: 768](X[i, j]) / 768.0\n"
        "Var[i: T] = sum[j: 768]((X[i, j] - Mean[i]) * (X[i, j] - Mean[i])) / 768.0\n"
        "Norm[i: T, j: 768] = (X[i, j] - Mean[i]) * rsqrt(Var[i] + 1e-5) * g[j]\n"
        "output Y[i: T, n: 3072] = sum[k: 768](Norm[i, k] * W[n, k])\n"
        /* a transpose only moves data: fused however often it is read */
        "Xt[j: 768, i: T] = X[i, j]\n"
        "output Z[i: T, n: 3072] = sum[k: 768](Xt[k, i] * W[n, k])\n"
        /* softmax: exp read twice, fused; the probabilities, read 64 times
         * per element by a product, written once */
        "M[i: T] = max[j: 1000](V[i, j])\n"
        "E[i: T, j: 1000] = exp(V[i, j] - M[i])\n"
        "S[i: T] = sum[j: 1000](E[i, j])\n"
        "P[i: T, j: 1000] = E[i, j] / S[i]\n"
        "output O[i: T, d: 64] = sum[j: 1000](P[i, j] * V[i, d])\n"
        /* a cheap producer read once, through a cheap one read once */
        "A[i: T, j: 1000] = V[i, j] * 2.0\n"
        "B[i: T, j: 1000] = A[i, j] + 1.0\n"
        "output C[i: T, j: 1000] = B[i, j] * B[i, j]\n";
    FeUnit u;
    bool *m = decide(&u, src);
    assert_true(is_materialized(&u, m, "Mean"));
    assert_true(is_materialized(&u, m, "Var"));
    assert_true(is_materialized(&u, m, "Norm"));
    assert_false(is_materialized(&u, m, "Xt"));
    assert_false(is_materialized(&u, m, "E"));
    assert_true(is_materialized(&u, m, "P"));
    assert_false(is_materialized(&u, m, "A"));
    assert_false(is_materialized(&u, m, "B"));
    free(m);
    fe_unload(&u);
}

/* ---- long chains ---- */

typedef struct Text {
    char *s;
    size_t n, cap;
} Text;

static void add(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(Text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < t->cap - t->n) {
            t->n += (size_t)k;
            return;
        }
        t->cap = t->cap * 2 + (size_t)k + 64;
        t->s = realloc(t->s, t->cap);
        if (!t->s)
            abort();
    }
}

/* n statements, each an elementwise step from the one before; every
 * reduce_every-th (0: never) a row sum broadcast back; with square, each
 * step reads its predecessor twice (inlined as a tree it would double). */
static char *chain(int n, int reduce_every, bool square)
{
    Text t = {calloc(1, 256), 0, 256};
    add(&t, "dim T in 1..64\ninput X[T, 8] f32\nA0[i: T, j: 8] = X[i, j] * 0.5\n");
    for (int k = 1; k < n - 1; k++) {
        if (reduce_every && k % reduce_every == 0)
            add(&t, "A%d[i: T, j: 8] = A%d[i, j] - sum[c: 8](A%d[i, c]) * 0.125\n", k, k - 1,
                k - 1);
        else if (square)
            add(&t, "A%d[i: T, j: 8] = A%d[i, j] * A%d[i, j] - 0.25\n", k, k - 1, k - 1);
        else
            add(&t, "A%d[i: T, j: 8] = A%d[i, j] * 0.75 + %s\n", k, k - 1,
                k % 3 == 0 ? "X[i, j] * 0.25" : k % 3 == 1 ? "0.125" : "abs(X[i, j]) * 0.25");
    }
    add(&t, "output Y[i: T, j: 8] = A%d[i, j] + X[i, j]\n", n - 2);
    return t.s;
}

typedef struct Job {
    const char *src;
    bool emu;
    char msg[1024]; /* empty: passed */
} Job;

/* Compiles job->src once for the target and runs it at T = 1, 37 and 64
 * against the reference; runs on a thread with an 8 MB stack. */
static void *compile_and_run(void *arg)
{
    Job *job = arg;
    FeUnit u;
    if (fe_load_text("chain.tex", "chain", job->src, &u) != 0) {
        snprintf(job->msg, sizeof job->msg, "rejected");
        return NULL;
    }
    TeProgram *p = u.prog;
    TargetInfo ti = pass_target_info(job->emu ? PT_GPU : PT_CPU);
    char err[512] = "";
    LoopProgram *lp = pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err);
    ExCpu *cpu = NULL;
    ExEmu *emu = NULL;
    if (!lp || !(job->emu ? (void *)(emu = ex_emu_compile(lp, err, sizeof err))
                          : (void *)(cpu = ex_cpu_compile(lp, err, sizeof err)))) {
        snprintf(job->msg, sizeof job->msg, "compile: %s", err);
        fe_unload(&u);
        return NULL;
    }
    static const int64_t Ts[] = {1, 37, 64};
    float **got = calloc((size_t)p->ntensors, sizeof *got);
    float **ref = calloc((size_t)p->ntensors, sizeof *ref);
    for (size_t s = 0; s < sizeof Ts / sizeof *Ts && !job->msg[0]; s++) {
        const int64_t dims[1] = {Ts[s]};
        for (int i = 0; i < p->ntensors; i++) {
            size_t n = (size_t)ir_te_numel(p->tensors[i], dims);
            ref[i] = malloc(sizeof(float) * n);
            got[i] = malloc(sizeof(float) * n);
            if (p->tensors[i]->kind == TK_INPUT)
                rt_rng_fill(11, (uint64_t)i, ref[i], n);
            for (size_t e = 0; e < n; e++)
                got[i][e] = p->tensors[i]->kind == TK_INPUT ? ref[i][e] : NAN;
        }
        int rc = ir_interp(p, dims, ref, err, sizeof err);
        if (rc == 0)
            rc = job->emu ? ex_emu_run(emu, NULL, dims, got, err, sizeof err)
                          : ex_cpu_run(cpu, dims, got, NULL, err, sizeof err);
        if (rc != 0)
            snprintf(job->msg, sizeof job->msg, "T = %lld: %s", (long long)Ts[s], err);
        const Tensor *y = p->tensors[p->ntensors - 1];
        for (int64_t e = 0; !job->msg[0] && e < ir_te_numel(y, dims); e++) {
            float a = got[y->id][e], b = ref[y->id][e];
            if (!(fabsf(a - b) <= 1e-4f * (1 + fabsf(b))))
                snprintf(job->msg, sizeof job->msg, "T = %lld: Y[%lld] = %.9g, reference %.9g",
                         (long long)Ts[s], (long long)e, a, b);
        }
        for (int i = 0; i < p->ntensors; i++) {
            free(ref[i]);
            free(got[i]);
        }
    }
    free(got);
    free(ref);
    ex_cpu_destroy(cpu);
    ex_emu_destroy(emu);
    fe_unload(&u);
    return NULL;
}

static void run_on_small_stack(const char *src, bool emu)
{
    Job job = {.src = src, .emu = emu};
    pthread_attr_t a;
    pthread_t th;
    assert_int_equal(pthread_attr_init(&a), 0);
    assert_int_equal(pthread_attr_setstacksize(&a, STACK_BYTES), 0);
    assert_int_equal(pthread_create(&th, &a, compile_and_run, &job), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    pthread_attr_destroy(&a);
    if (job.msg[0])
        fail_msg("%s", job.msg);
}

static int long_statements(void)
{
    const char *e = getenv("DC_LONG_STATEMENTS");
    int n = e && *e ? atoi(e) : 100000;
    return n >= 3 ? n : 3;
}

static void test_long_chain(void **state)
{
    (void)state;
    char *src = chain(long_statements(), 0, false);
    run_on_small_stack(src, false);
    free(src);
}

static void test_chain_with_reductions(void **state)
{
    (void)state;
    char *src = chain(3000, 97, false);
    run_on_small_stack(src, false);
    free(src);
}

static void test_squaring_chain(void **state)
{
    (void)state;
    char *src = chain(2000, 0, true);
    run_on_small_stack(src, false);
    free(src);
}

static void test_chain_on_emu(void **state)
{
    (void)state;
    char *src = chain(1000, 89, false);
    run_on_small_stack(src, true);
    free(src);
}

/* Every inlined body stays small: a chain of 2,000 cheap steps is cut into
 * stages, and no stage's body is deeper than the bound allows. */
static int depth(const Expr *e)
{
    int d = 0;
    switch (e->kind) {
    case EX_INT: case EX_FLOAT: case EX_VAR: return 1;
    case EX_LOAD:
        for (int i = 0; i < e->load.n; i++) {
            int k = depth(e->load.idx[i]);
            d = k > d ? k : d;
        }
        return d + 1;
    case EX_REDUCE: return depth(e->red.body) + 1;
    default:
        if (e->op.a) d = depth(e->op.a);
        if (e->op.b && depth(e->op.b) > d) d = depth(e->op.b);
        if (e->op.c && depth(e->op.c) > d) d = depth(e->op.c);
        return d + 1;
    }
}

static void test_inlined_size_bound(void **state)
{
    (void)state;
    char *src = chain(2000, 0, false);
    FeUnit u;
    TeProgram *p = load(&u, src);
    Expr **bodies = calloc((size_t)p->ntensors, sizeof *bodies);
    bool *m = calloc((size_t)p->ntensors, sizeof *m);
    pass_inline(p, bodies, m);
    int stages = 0, deepest = 0;
    for (int i = 0; i < p->ntensors; i++) {
        if (p->tensors[i]->kind == TK_INPUT || !m[i])
            continue;
        stages++;
        int d = depth(bodies[i]);
        deepest = d > deepest ? d : deepest;
    }
    assert_true(stages >= 2000 / 256);
    assert_true(stages < 2000 / 8);
    assert_true(deepest <= 300);
    free(bodies);
    free(m);
    fe_unload(&u);
    free(src);
}

/* A residual stream through pre-norm layers (GPT-2's): each layer adds
 * two sublayers' outputs to it, and each sum is read by a layer norm (its
 * mean, its variance and the normalisation) and by the next sum. Fused by
 * cost alone, a sum would be recomputed through every later sum until the
 * rereads outweigh a stage (every third layer or so), so the layers would
 * differ. Inlining does not nest recomputation: no two sums in a row are
 * both inlined, and every layer between the first and the last is decided
 * alike (one workload per kind of stage, not one per depth). */
static void test_residual_stream(void **state)
{
    (void)state;
    enum { LAYERS = 12 };
    Text t = {calloc(1, 256), 0, 256};
    add(&t, "dim T in 1..512\ninput X[T, 768] f32\ninput g[768] f32\n"
            "input W[768, 768] f32\nR0[i: T, j: 768] = X[i, j] * 2.0\n");
    for (int s = 1; s <= 2 * LAYERS; s++) {
        add(&t, "M%d[i: T] = sum[j: 768](R%d[i, j]) / 768.0\n", s, s - 1);
        add(&t, "V%d[i: T] = sum[j: 768]((R%d[i, j] - M%d[i]) * (R%d[i, j] - M%d[i])) / 768.0\n",
            s, s - 1, s, s - 1, s);
        add(&t, "N%d[i: T, j: 768] = (R%d[i, j] - M%d[i]) * rsqrt(V%d[i] + 1e-5) * g[j]\n", s,
            s - 1, s, s);
        add(&t, "D%d[i: T, n: 768] = sum[k: 768](N%d[i, k] * W[n, k])\n", s, s);
        add(&t, "R%d[i: T, j: 768] = R%d[i, j] + D%d[i, j]\n", s, s - 1, s);
    }
    add(&t, "output Y[i: T, j: 768] = R%d[i, j] * 0.5\n", 2 * LAYERS);
    FeUnit u;
    bool *m = decide(&u, t.s);
    bool mat[2 * LAYERS + 1];
    for (int s = 0; s <= 2 * LAYERS; s++) {
        char name[16];
        snprintf(name, sizeof name, "R%d", s);
        mat[s] = is_materialized(&u, m, name);
        if (s > 0 && s < 2 * LAYERS && !mat[s] && !mat[s - 1]) /* the last is read once */
            fail_msg("R%d and R%d are both inlined", s - 1, s);
    }
    for (int s = 3; s + 2 < 2 * LAYERS; s++)
        if (mat[s] != mat[s - 2])
            fail_msg("layers decided apart: R%d %s, R%d %s", s - 2, mat[s - 2] ? "written" : "inlined",
                     s, mat[s] ? "written" : "inlined");
    free(m);
    fe_unload(&u);
    free(t.s);
}

/* ---- intermediates share the workspace by lifetime ---- */

static char *read_example(const char *name)
{
    const char *dir = getenv("DC_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/%s", dir ? dir : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    Text t = {calloc(1, 256), 0, 256};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf - 1, f)) > 0) {
        buf[n] = 0;
        add(&t, "%s", buf);
    }
    fclose(f);
    return t.s;
}

/* Plans src at each T: buffers whose spans meet never share bytes, the
 * workspace is no larger than the buffers one after another; returns the
 * workspace at the last T. */
static int64_t check_workspace(const char *src, const int64_t *Ts, int nT, int64_t *sum_bytes)
{
    FeUnit u;
    TeProgram *p = load(&u, src);
    TargetInfo ti = pass_target_info(PT_CPU);
    char err[512];
    LoopProgram *lp = pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err);
    assert_non_null(lp);
    ExProgram *x = ex_program_new(lp);
    const DcrtProgram *tb = ex_program_table(x);
    int64_t ws = 0;
    for (int t = 0; t < nT; t++) {
        DcrtPlan *pl = ex_plan(x, &Ts[t], err, sizeof err);
        assert_non_null(pl);
        int64_t sum = 0;
        for (int i = 0; i < tb->nbuffers; i++) {
            if (pl->offset[i] < 0)
                continue;
            const DcrtBuffer *a = &tb->buffers[i];
            int64_t abytes = pl->numel[i] * 4;
            sum += (abytes + DCRT_ALIGN - 1) / DCRT_ALIGN * DCRT_ALIGN;
            assert_true(a->first >= 0 && a->last >= a->first);
            assert_true(pl->offset[i] % DCRT_ALIGN == 0);
            assert_true(pl->offset[i] + abytes <= pl->workspace_bytes);
            for (int j = 0; j < i; j++) {
                const DcrtBuffer *b = &tb->buffers[j];
                if (pl->offset[j] < 0 || a->last < b->first || b->last < a->first)
                    continue;
                int64_t bbytes = pl->numel[j] * 4;
                if (pl->offset[i] < pl->offset[j] + bbytes && pl->offset[j] < pl->offset[i] + abytes)
                    fail_msg("T = %lld: %s and %s are live together and share bytes",
                             (long long)Ts[t], a->name, b->name);
            }
        }
        assert_true(pl->workspace_bytes <= sum);
        ws = pl->workspace_bytes;
        *sum_bytes = sum;
        dcrt_plan_free(pl);
    }
    ex_program_free(x);
    fe_unload(&u);
    return ws;
}

static void test_workspace_by_lifetime(void **state)
{
    (void)state;
    static const int64_t Ts[] = {1, 16, 37, 128};
    int64_t sum;
    /* a chain of 3,000: its stages' buffers take turns in two slots */
    char *src = chain(3000, 0, false);
    int64_t ws = check_workspace(src, &Ts[2], 1, &sum);
    assert_true(ws <= 2 * ((37 * 8 * 4 + DCRT_ALIGN - 1) / DCRT_ALIGN * DCRT_ALIGN));
    assert_true(sum >= 20 * ws);
    free(src);
    /* the encoder layer: Q and K die at the scores, H1 outlives the FFN */
    src = read_example("bert_encoder.tex");
    ws = check_workspace(src, Ts, 4, &sum);
    assert_true(ws < sum);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fusion_by_cost),
        cmocka_unit_test(test_inlined_size_bound),
        cmocka_unit_test(test_residual_stream),
        cmocka_unit_test(test_workspace_by_lifetime),
        cmocka_unit_test(test_squaring_chain),
        cmocka_unit_test(test_chain_with_reductions),
        cmocka_unit_test(test_chain_on_emu),
        cmocka_unit_test(test_long_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
