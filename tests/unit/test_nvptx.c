/* Unit tests of the NVPTX target (codegen/nvptx.c). None needs a GPU or
 * the CUDA toolkit:
 *
 * - the math expansions used without libdevice (exp, log, tanh, erf, pow)
 *   are built by the NVPTX math hook on the host CPU target (where exact
 *   exp2/log2 stand in for ex2.approx/lg2.approx), run through the JIT and
 *   compared with the C library over dense ranges;
 * - every example compiles to PTX for sm_80 and sm_90a, one entry per
 *   kernel with its .maxntid, no calls left with approximate math;
 * - unknown architectures are rejected with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/codegen_llvm.h"
#include "dietcode/frontend.h"
#include "dietcode/passes.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Compiled {
    FeUnit u;
    TeProgram *p;
    LoopProgram *lp;
} Compiled;

static Compiled compile_text(const char *path, const char *text, PassTarget kind)
{
    Compiled c;
    if (fe_load_text(path, NULL, text, &c.u) != 0)
        ir_diags_print(&c.u.diags, stderr);
    c.p = c.u.prog;
    assert_non_null(c.p);
    TargetInfo ti = pass_target_info(kind);
    char err[512];
    c.lp = pass_run_pipeline(c.p, NULL, &ti, &(PipelineOpts){.verify_each = true}, err, sizeof err);
    if (!c.lp)
        fprintf(stderr, "%s\n", err);
    assert_non_null(c.lp);
    return c;
}

static void compiled_free(Compiled *c) { fe_unload(&c->u); }

/* ---- the approximations, on the host ---- */

static const char *math_prog =
    "dim N in 1..100000\n"
    "input X[N] f32\n"
    "input Q[N] f32\n"
    "output E[i: N] = exp(X[i])\n"
    "output L[i: N] = log(Q[i])\n"
    "output H[i: N] = tanh(X[i])\n"
    "output R[i: N] = erf(X[i])\n"
    "output P[i: N] = pow(X[i], Q[i])\n";

static double rel_err(double got, double want)
{
    if (isnan(want))
        return isnan(got) ? 0 : INFINITY;
    if (isinf(want))
        return got == want ? 0 : INFINITY;
    return fabs(got - want) / (fabs(want) + 1e-6);
}

static void test_approx_math_on_host(void **state)
{
    (void)state;
    Compiled c = compile_text("approx.tex", math_prog, PT_CPU);
    CgTarget t = *cg_target_cpu();
    t.name = "nvptx-math-on-host";
    t.math = cg_nvptx_approx_math;
    char err[512];
    char *prefix = cg_jit_prefix();
    CgModule *m = cg_kernels_module(c.lp, &t, prefix, true, err, sizeof err);
    if (!m)
        fprintf(stderr, "%s\n", err);
    assert_non_null(m);
    CgJitCode *code = cg_jit_add(m, err, sizeof err);
    assert_non_null(code);

    enum { N = 40000 };
    int64_t dims[1] = {N};
    TeProgram *p = c.p;
    float **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
    for (int i = 0; i < p->ntensors; i++)
        bufs[i] = calloc(N, sizeof(float));
    float *x = bufs[ir_te_find(p, "X")->id], *q = bufs[ir_te_find(p, "Q")->id];
    for (int i = 0; i < N; i++) {
        /* x sweeps [-12, 12] densely, with exact integers every 100th
         * point; q sweeps (0, 50] for log, and pow's exponents include
         * integers (odd and even) and fractions */
        x[i] = i % 100 == 0 ? (float)(i / 100 % 9) - 4.0f : -12.0f + 24.0f * (float)i / N;
        q[i] = i % 3 == 0 ? (float)(i % 7) - 3.0f : 50.0f * (float)(i + 1) / N;
    }
    for (int k = 0; k < c.lp->nkernels; k++) {
        const Kernel *kn = c.lp->kernels[k];
        char *sym = cg_symbol(prefix, kn->name);
        DcrtKernelFn fn = (DcrtKernelFn)(uintptr_t)cg_jit_lookup(code, sym, err, sizeof err);
        free(sym);
        assert_non_null(fn);
        int64_t nb = ir_eval_dims(kn->body->loop.var->extent, dims);
        fn(dims, bufs, 0, nb);
    }
    struct {
        const char *name;
        double tol;
    } outs[] = {{"E", 3e-6}, {"L", 3e-6}, {"H", 3e-6}, {"R", 5e-7}, {"P", 3e-5}};
    for (size_t o2 = 0; o2 < sizeof outs / sizeof *outs; o2++) {
        const float *y = bufs[ir_te_find(p, outs[o2].name)->id];
        double worst = 0;
        int at = 0;
        for (int i = 0; i < N; i++) {
            double want = 0;
            switch (outs[o2].name[0]) {
            case 'E': want = expf(x[i]); break;
            case 'L': want = logf(q[i]); break;
            case 'H': want = tanhf(x[i]); break;
            case 'R': want = erff(x[i]); break;
            case 'P': want = powf(x[i], q[i]); break;
            }
            /* erf's expansion has an absolute error bound */
            double e = outs[o2].name[0] == 'R' ? fabs(y[i] - want) : rel_err(y[i], want);
            if (!(e <= worst)) {
                worst = e;
                at = i;
            }
        }
        printf("%s: worst error %.3g (bound %.3g) at x=%g q=%g\n", outs[o2].name, worst,
               outs[o2].tol, x[at], q[at]);
        assert_true(worst <= outs[o2].tol);
    }
    for (int i = 0; i < p->ntensors; i++)
        free(bufs[i]);
    free(bufs);
    cg_jit_release(code);
    free(prefix);
    compiled_free(&c);
}

/* ---- PTX for every example ---- */

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* Each kernel's parameters are what the program table says the runtime
 * passes it (the NVPTX kernel ABI): every dim, then DcrtKernel.args'
 * buffers in order, by name; each one the kernel uses and has memory. */
static void kernel_params_agree(CgModule *m, const LoopProgram *lp)
{
    CgTable *tb = cg_table_new(lp);
    const DcrtProgram *p = &tb->prog;
    unsigned char *use = calloc((size_t)lp->nbuffers + 1, 1);
    assert_non_null(use);
    for (int i = 0; i < p->nkernels; i++) {
        const DcrtKernel *k = &p->kernels[i];
        LLVMValueRef fn = LLVMGetNamedFunction(m->mod, k->name);
        assert_non_null(fn);
        assert_int_equal(LLVMCountParams(fn), p->ndims + k->nargs);
        memset(use, 0, (size_t)lp->nbuffers + 1);
        cg_kernel_uses(lp, lp->kernels[i], use, NULL);
        for (int j = 0; j < p->ndims + k->nargs; j++) {
            size_t len;
            const char *name = LLVMGetValueName2(LLVMGetParam(fn, (unsigned)j), &len);
            int b = j < p->ndims ? -1 : p->kernel_args[k->args + j - p->ndims];
            assert_string_equal(name, b < 0 ? p->dims[j].name : p->buffers[b].name);
            if (b >= 0) {
                assert_true(use[b] != 0);
                assert_int_not_equal(p->buffers[b].kind, DCRT_BUF_INLINED);
            }
        }
    }
    free(use);
    cg_table_free(tb);
}

static void test_examples_to_ptx(void **state)
{
    (void)state;
    const char *srcdir = getenv("DC_SOURCE_DIR");
    assert_non_null(srcdir);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/examples", srcdir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int nprogs = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".tex") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = read_file(path);
        Compiled c = compile_text(path, text, PT_GPU);
        const char *archs[] = {"sm_80", "sm_90a"};
        for (int a = 0; a < 2; a++) {
            for (int lib = 0; lib < 2; lib++) {
                char err[512];
                char *ptx = cg_emit_ptx(c.lp, archs[a], lib, err, sizeof err);
                if (!ptx)
                    fprintf(stderr, "%s: %s\n", path, err);
                assert_non_null(ptx);
                assert_int_equal(count(ptx, ".visible .entry"), c.lp->nkernels);
                assert_int_equal(count(ptx, ".maxntid"), c.lp->nkernels);
                assert_non_null(strstr(ptx, archs[a]));
                /* math is inlined: no function left to call */
                assert_int_equal(count(ptx, "call.uni"), 0);
                assert_int_equal(count(ptx, ".extern"), 0);
                free(ptx);
            }
        }
        char err[512];
        CgModule *m = cg_nvptx_module(c.lp, "sm_80", true, false, err, sizeof err);
        assert_non_null(m);
        kernel_params_agree(m, c.lp);
        char *ll = cg_module_print(m, err, sizeof err);
        cg_module_destroy(m);
        assert_non_null(ll);
        assert_int_equal(count(ll, "define ptx_kernel void @"), c.lp->nkernels);
        free(ll);
        compiled_free(&c);
        free(text);
        nprogs++;
    }
    closedir(d);
    assert_true(nprogs >= 5);
}

static void test_arch_checks(void **state)
{
    (void)state;
    assert_true(cg_nvptx_arch_valid("sm_80"));
    assert_true(cg_nvptx_arch_valid("sm_90a"));
    assert_false(cg_nvptx_arch_valid("sm_70"));
    assert_false(cg_nvptx_arch_valid("sm_100"));
    assert_null(cg_target_nvptx("sm_72", false));
    const CgTarget *t = cg_target_nvptx(NULL, false);
    assert_non_null(t);
    assert_string_equal(t->cpu, "sm_80");
    assert_non_null(t->barrier);
    Compiled c = compile_text("a.tex", "dim N in 1..8\ninput X[N] f32\noutput Y[i: N] = X[i] * 2.0\n",
                              PT_GPU);
    char err[512] = "";
    assert_null(cg_emit_ptx(c.lp, "sm_70", true, err, sizeof err));
    assert_non_null(strstr(err, "sm_70"));
    compiled_free(&c);
    /* one reading of an arch's name; cp.async where the arch has it, on
     * both sides (the schedule's and the target's) */
    assert_int_equal(pass_sm_version("sm_75"), 75);
    assert_int_equal(pass_sm_version("sm_90a"), 90);
    assert_int_equal(pass_sm_version(NULL), 80);
    assert_int_equal(pass_sm_version("sm_x"), 80);
    assert_int_equal(pass_sm_version("compute_90"), 80);
    const char *archs[] = {"sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"};
    for (int i = 0; i < 7; i++) {
        TargetInfo ti = pass_target_info(PT_GPU);
        pass_target_gpu_arch(&ti, archs[i]);
        const CgTarget *g = cg_target_nvptx(archs[i], false);
        assert_non_null(g);
        assert_int_equal(ti.async_copy, g->async_copy != NULL);
        assert_int_equal(ti.async_copy, pass_sm_version(archs[i]) >= 80);
    }
}

/* Kernels compute in 32 bits exactly when every integer provably fits for
 * every call the plan accepts (codegen/index.c). */
static bool all_index32(const char *text)
{
    Compiled c = compile_text("i.tex", text, PT_GPU);
    bool all = true;
    for (int i = 0; i < c.lp->nkernels; i++)
        all &= cg_index32(c.lp, c.lp->kernels[i]);
    compiled_free(&c);
    return all;
}

static void test_index32(void **state)
{
    (void)state;
    /* the dense layer: T <= INT32_MAX / 2304 bounds every index */
    assert_true(all_index32("dim T in 1..128\ninput X[T, 768] f32\ninput W[2304, 768] f32\n"
                            "output Y[i: T, j: 2304] = sum[k: 768](X[i, k] * W[j, k])\n"));
    /* integer values in an expression that stay within T's cap... */
    assert_true(all_index32("dim T in 1..128\ninput X[T] f32\noutput Y[i: T] = X[i] * f32(i - T / 2)\n"));
    /* ...and 3 * i, which does not (T may approach 2^31) */
    assert_false(all_index32("dim T in 1..128\ninput X[T] f32\noutput Y[i: T] = X[i] * f32(3 * i)\n"));
    /* T * T * i reaches 2^60: 64 bits */
    assert_false(all_index32("dim T in 1..100000\ninput X[T] f32\n"
                             "output Y[i: T] = X[i] + f32(T * T * i)\n"));
    /* a dim no tensor's size bounds: N * N may not fit */
    assert_false(all_index32("dim N in 1..10\ninput X[4] f32\noutput Y[i: 4] = X[i] * f32(N * N)\n"));
    /* a rank-3 tensor of two dims: each is bounded by the other's lowest */
    assert_true(all_index32("dim B in 1..8\ndim T in 1..64\ninput X[B, T, 64] f32\n"
                            "output Y[b: B, t: T] = sum[k: 64](X[b, t, k])\n"));
}

/* Which epilogues an atomic split-K may serve: a sum, and the body affine
 * in it (factors and divisors finite nonzero constants, so that no
 * infinity or NaN comes out otherwise than from one sum); anything else
 * keeps the deterministic form. */
static void test_atomic_split_bodies(void **state)
{
    (void)state;
#define S "sum[k: 16](X[i, k] * b[k])"
    static const struct { const char *body; bool ok; } cases[] = {
        {S, true},
        {S " + b[j]", true},
        {"b[j] - 2 * (" S ")", true},
        {"-(" S ") / 4", true},
        {"(" S " + b[j]) * 0.5 - c[i]", true},
        {S " + sum[k: 16](b[k])", true},   /* the other sum goes to the first launch */
        {"(" S ") * c[i]", false},          /* a tensor as a factor: it may be infinite */
        {"(" S ") / 0", false},
        {"(" S ") * 1e39", false},          /* infinite in f32 */
        {"(" S ") / 1e-50", false},         /* zero in f32 */
        {"c[i] / " S, false},               /* a divisor */
        {"relu(" S ")", false},
        {"(" S ") * (" S ")", false},
        {S " * sum[k: 16](b[k])", false},   /* a factor with a reduction */
        {"max[k: 16](X[i, k])", false},
        {"select(c[i] < 0, " S ", 0)", false},
        {"X[i, j]", false},
    };
#undef S
    for (size_t n = 0; n < sizeof cases / sizeof *cases; n++) {
        char text[512];
        snprintf(text, sizeof text,
                 "dim T in 1..8\ninput X[T, 16] f32\ninput b[16] f32\ninput c[T] f32\n"
                 "output Y[i: T, j: 16] = %s\n",
                 cases[n].body);
        FeUnit u;
        if (fe_load_text("a.tex", "a", text, &u) != 0) {
            ir_diags_print(&u.diags, stderr);
            fail_msg("%s does not load", cases[n].body);
        }
        if (pass_atomic_split_ok(ir_te_find(u.prog, "Y")->body) != cases[n].ok)
            fail_msg("%s: want %d", cases[n].body, cases[n].ok);
        fe_unload(&u);
    }
}

/* The dense layer lowered for the GPU with micro-kernel mk, for arch
 * (NULL: no arch, the 48 KB of static shared memory). */
static LoopProgram *dense_lp(Compiled *c, const char *mk, const char *arch)
{
    assert_int_equal(fe_load_text("d.tex", "d",
                                  "dim T in 1..128\ninput X[T, 768] f32\ninput W[2304, 768] f32\n"
                                  "output Y[i: T, j: 2304] = sum[k: 768](X[i, k] * W[j, k])\n",
                                  &c->u),
                     0);
    MicroKernel *mks = calloc((size_t)c->u.prog->ntensors, sizeof *mks);
    int ns;
    for (int i = 0; i < c->u.prog->ntensors; i++)
        assert_true(pass_parse_microkernel(mk, &mks[i], &ns));
    TargetInfo ti = pass_target_info(PT_GPU);
    if (arch)
        pass_target_gpu_arch(&ti, arch);
    char err[512];
    LoopProgram *lp = pass_run_pipeline(c->u.prog, mks, &ti, NULL, err, sizeof err);
    assert_non_null(lp);
    free(mks);
    return lp;
}

/* The PTX of the dense layer with micro-kernel mk. */
static char *dense_ptx(const char *mk)
{
    Compiled c;
    LoopProgram *lp = dense_lp(&c, mk, NULL);
    char err[512];
    char *ptx = cg_emit_ptx(lp, "sm_80", true, err, sizeof err);
    assert_non_null(ptx);
    fe_unload(&c.u);
    return ptx;
}

/* Staging over 48 KB (two buffers of 32 x 129 words, double-buffered: 66
 * KB) takes dynamic shared memory, which the table gives the launch; 48
 * KB and below stays static. Without an arch the 48 KB limit leaves the
 * second operand unstaged. */
static void test_dynamic_shared(void **state)
{
    (void)state;
    static const char *big = "threads [16, 16] tile [8, 8] rchunk 32 unroll 1 vec 4 staged strided pipelined";
    static const char *small = "threads [16, 16] tile [8, 8] rchunk 8 unroll 1 vec 4 staged strided pipelined";
    const char *archs[] = {"sm_80", "sm_90", "sm_86"};
    for (int a = 0; a < 3; a++) {
        Compiled c;
        LoopProgram *lp = dense_lp(&c, big, archs[a]);
        CgTable *t = cg_table_new(lp);
        int64_t bytes = cg_shared_bytes(lp->kernels[0]);
        assert_true(bytes > 48 << 10);
        assert_int_equal(t->prog.kernels[0].shared_bytes, bytes);
        char err[512];
        char *ptx = cg_emit_ptx(lp, archs[a], true, err, sizeof err);
        assert_non_null(ptx);
        assert_non_null(strstr(ptx, ".extern .shared .align 16 .b8 dc_dynamic_shared[]"));
        assert_null(strstr(ptx, "X_s["));
        free(ptx);
        cg_table_free(t);
        fe_unload(&c.u);
    }
    Compiled c;
    LoopProgram *lp = dense_lp(&c, small, "sm_80");
    CgTable *t = cg_table_new(lp);
    assert_true(cg_shared_bytes(lp->kernels[0]) > 0);
    assert_int_equal(t->prog.kernels[0].shared_bytes, 0);
    char err[512];
    char *ptx = cg_emit_ptx(lp, "sm_80", true, err, sizeof err);
    assert_null(strstr(ptx, "dc_dynamic_shared"));
    free(ptx);
    cg_table_free(t);
    fe_unload(&c.u);
    lp = dense_lp(&c, big, NULL);
    assert_true(cg_shared_bytes(lp->kernels[0]) <= 48 << 10);
    fe_unload(&c.u);
}

/* Every dimension of the GPU space changes the code it generates (issue
 * 10: a dimension that does not leaves the space). */
static void test_space_dimensions(void **state)
{
    (void)state;
    static const char *base = "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged";
    static const char *changed[] = {
        "threads [16, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged",          /* threads */
        "threads [8, 16] tile [4, 8] rchunk 16 unroll 1 vec 4 staged",           /* tile */
        "threads [8, 16] tile [4, 4] rchunk 32 unroll 1 vec 4 staged",           /* rchunk */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 4 vec 4 staged",           /* unroll */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 2 staged",           /* vec */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 along reduction staged", /* vaxis */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4",                  /* stage */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged split 2",   /* split */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged rthreads 2", /* rthreads */
        "threads [8, 16] tile [4, 8] rchunk 16 unroll 1 vec 4 staged strided",   /* strided (vs tile) */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged pipelined", /* pipeline */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged raster 4",  /* raster */
        "threads [8, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged split 2 atomic", /* atomic (vs split) */
        "threads [1, 2] tile [4, 4] rchunk 16 unroll 1 vec 4 staged rthreads 32",
        "threads [1, 2] tile [4, 4] rchunk 16 unroll 1 vec 4 staged rthreads 64", /* past a warp */
    };
    enum { N = sizeof changed / sizeof *changed };
    /* what each is compared with: base, or the form it qualifies */
    static const int against[N] = {[9] = 1, [12] = 7, [14] = 13};
    for (size_t i = 0; i < N; i++) {
        char *p = dense_ptx(changed[i]);
        const char *other = against[i] ? changed[against[i]] : base;
        char *q = dense_ptx(other);
        if (strcmp(p, q) == 0)
            fail_msg("'%s' gives the same PTX as '%s'", changed[i], other);
        free(q);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arch_checks),
        cmocka_unit_test(test_approx_math_on_host),
        cmocka_unit_test(test_examples_to_ptx),
        cmocka_unit_test(test_index32),
        cmocka_unit_test(test_space_dimensions),
        cmocka_unit_test(test_dynamic_shared),
        cmocka_unit_test(test_atomic_split_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
