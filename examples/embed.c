/* Embedding dietcode-c in another compiler: build a dense layer through
 * calls (no .tex text), choose its micro-kernel, run the pipeline with a
 * dump, get the LLVM module, JIT it for this CPU, run it for a few sizes
 * and check it against the reference interpreter.
 *
 *   Y[i: T, j: 96] = sum[k: 80](X[i, k] * W[j, k]) + b[j],  T in 1..64
 *
 * Built and run by the tests (test "embed"); exit status 0 when every
 * size matches.
 */
#include "dietcode/dietcode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static TeProgram *build_dense(int64_t N, int64_t K)
{
    TeProgram *p = ir_te_new("dense");
    ExprCtx *c = p->ctx;
    Var *T = ir_te_add_dim(p, "T", 1, 64);
    T->max = 1 << 20; /* accesses hold for any T: larger sizes are fine */
    Expr *xshape[] = {ir_varref(c, T), ir_int(c, K)};
    Expr *wshape[] = {ir_int(c, N), ir_int(c, K)};
    Expr *bshape[] = {ir_int(c, N)};
    Tensor *X = ir_te_add_input(p, "X", DT_F32, 2, xshape);
    Tensor *W = ir_te_add_input(p, "W", DT_F32, 2, wshape);
    Tensor *b = ir_te_add_input(p, "b", DT_F32, 1, bshape);

    Var *i = ir_var(c, "i", VK_AXIS, ir_varref(c, T));
    Var *j = ir_var(c, "j", VK_AXIS, ir_int(c, N));
    Var *k = ir_var(c, "k", VK_AXIS, ir_int(c, K));
    Expr *xi[] = {ir_varref(c, i), ir_varref(c, k)};
    Expr *wi[] = {ir_varref(c, j), ir_varref(c, k)};
    Expr *bi[] = {ir_varref(c, j)};
    Expr *dot = ir_reduce(c, RD_SUM, 1, &k,
                          ir_binop(c, EX_MUL, ir_load(c, X, 2, xi, false), ir_load(c, W, 2, wi, false)));
    Expr *body = ir_binop(c, EX_ADD, dot, ir_load(c, b, 1, bi, false));
    Var *axes[] = {i, j};
    ir_te_add_compute(p, "Y", TK_OUTPUT, 2, axes, body);

    char err[256];
    if (!ir_verify_te(p, err, sizeof err)) {
        fprintf(stderr, "embed: %s\n", err);
        exit(1);
    }
    return p;
}

int main(void)
{
    TeProgram *p = build_dense(96, 80);
    ir_print_te(stdout, p);

    /* a micro-kernel for Y (tensor id 3): 4 x 8 outputs a thread, vectors of
     * 8 along j, reduction chunks of 16 staged in packing buffers */
    MicroKernel mks[4];
    memset(mks, 0, sizeof mks);
    if (!pass_parse_microkernel("threads [2, 4] tile [4, 8] rchunk 16 unroll 1 vec 8 staged",
                                &mks[3], NULL)) {
        fprintf(stderr, "embed: bad micro-kernel\n");
        return 1;
    }
    TargetInfo ti = pass_target_info(PT_CPU);
    PipelineOpts opts = {.dump_after = "pad", .verify_each = true, .dump = stdout};
    char err[512];
    LoopProgram *lp = pass_run_pipeline(p, mks, &ti, &opts, err, sizeof err);
    if (!lp) {
        fprintf(stderr, "embed: %s\n", err);
        return 1;
    }
    CgModule *m = cg_kernels_module(lp, cg_target_cpu(), NULL, true, err, sizeof err);
    char *ll = m ? cg_module_print(m, err, sizeof err) : NULL;
    cg_module_destroy(m);
    if (!ll) {
        fprintf(stderr, "embed: %s\n", err);
        return 1;
    }
    printf("LLVM module: %zu bytes of IR, defines %s\n", strlen(ll),
           strstr(ll, "define") ? "the kernel" : "nothing");
    free(ll);

    ExCpu *cp = ex_cpu_compile(lp, err, sizeof err);
    if (!cp) {
        fprintf(stderr, "embed: %s\n", err);
        return 1;
    }
    int failures = 0;
    static const int64_t sizes[] = {1, 7, 33, 64, 100};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t dims[1] = {sizes[s]};
        float *bufs[4], *ref[4];
        for (int t = 0; t < 4; t++) {
            int64_t n = ir_te_numel(p->tensors[t], dims);
            bufs[t] = malloc(sizeof(float) * (size_t)n);
            ref[t] = malloc(sizeof(float) * (size_t)n);
            if (t < 3) {
                rt_rng_fill(42, (uint64_t)t, bufs[t], (size_t)n);
                memcpy(ref[t], bufs[t], sizeof(float) * (size_t)n);
            }
        }
        if (ex_cpu_run(cp, dims, bufs, NULL, err, sizeof err) != 0 ||
            ir_interp(p, dims, ref, err, sizeof err) != 0) {
            fprintf(stderr, "embed: %s\n", err);
            return 1;
        }
        int64_t n = ir_te_numel(p->tensors[3], dims);
        double worst = 0;
        for (int64_t e = 0; e < n; e++)
            worst = fmax(worst, fabs(bufs[3][e] - ref[3][e]));
        bool ok = worst < 1e-4;
        failures += !ok;
        printf("T = %3lld: max |dcc - reference| = %.2g  %s\n", (long long)sizes[s], worst,
               ok ? "ok" : "MISMATCH");
        for (int t = 0; t < 4; t++) {
            free(bufs[t]);
            free(ref[t]);
        }
    }
    ex_cpu_destroy(cp);
    ir_te_destroy(p);
    printf("%d passed, %d failed\n", 5 - failures, failures);
    return failures ? 1 : 0;
}
