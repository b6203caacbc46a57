/* bench/dense: dcc's CPU kernels against OpenBLAS cblas_sgemm on the
 * BERT-base dense layers, Y[T, N] = X[T, K] * W[N, K]^T, for T = 1..128.
 *
 *   dense [--mk "threads [...] tile [...] ..."] [--step S] [--reps R] [--threads N]
 *
 * Both run with the same number of threads, on the same buffers, timed side
 * by side in one run (median of R after a warm-up). OpenBLAS is made to use
 * the best kernel set this CPU supports (Debian's build misdetects recent
 * CPUs as an old SSE3 core): SkylakeX with AVX-512, else Haswell. Prints
 * GFLOP/s of both per shape and the geometric mean of dcc / OpenBLAS. Not a
 * test: timing decides nothing here.
 */
#include "dietcode/exec.h"
#include "dietcode/ir.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#include "common.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* Builds Y[i: T, j: N] = sum[k: K](X[i, k] * W[j, k]) through the IR API. */
static TeProgram *dense(int64_t N, int64_t K)
{
    TeProgram *p = ir_te_new("dense");
    ExprCtx *c = p->ctx;
    Var *T = ir_te_add_dim(p, "T", 1, 128);
    T->max = 2147483647;
    Expr *xs[2] = {ir_varref(c, T), ir_int(c, K)}, *ws[2] = {ir_int(c, N), ir_int(c, K)};
    Tensor *X = ir_te_add_input(p, "X", DT_F32, 2, xs);
    Tensor *W = ir_te_add_input(p, "W", DT_F32, 2, ws);
    Var *ax[2] = {ir_var(c, "i", VK_AXIS, ir_varref(c, T)), ir_var(c, "j", VK_AXIS, ir_int(c, N))};
    Var *k = ir_var(c, "k", VK_AXIS, ir_int(c, K));
    Expr *xi[2] = {ir_varref(c, ax[0]), ir_varref(c, k)}, *wi[2] = {ir_varref(c, ax[1]), ir_varref(c, k)};
    Expr *prod = ir_binop(c, EX_MUL, ir_load(c, X, 2, xi, false), ir_load(c, W, 2, wi, false));
    ir_te_add_compute(p, "Y", TK_OUTPUT, 2, ax, ir_reduce(c, RD_SUM, 1, &k, prod));
    return p;
}

/* T = 1, then every step-th value, always ending at 128. */
static int64_t next_T(int64_t T, int step)
{
    int64_t n = T == 1 && step > 1 ? step : T + step;
    return T < 128 && n > 128 ? 128 : n;
}

typedef struct Case {
    ExCpu *cp;
    int64_t T, N, K;
    float *bufs[3];
} Case;

static void run_dcc(void *ctx)
{
    Case *c = ctx;
    int64_t dims[1] = {c->T};
    char err[256];
    if (ex_cpu_run(c->cp, dims, c->bufs, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "dense: %s\n", err);
        exit(1);
    }
}

static void run_blas(void *ctx)
{
    Case *c = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->T, (int)c->N, (int)c->K, 1.0f,
                c->bufs[0], (int)c->K, c->bufs[1], (int)c->K, 0.0f, c->bufs[2], (int)c->N);
}

int main(int argc, char **argv)
{
    bench_openblas_coretype(argv);
    const char *mkspec = NULL;
    int step = 8, reps = 15, threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mk") == 0) mkspec = argv[i + 1];
        else if (strcmp(argv[i], "--step") == 0) step = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: dense [--mk SPEC] [--step S] [--reps R] [--threads N]\n");
            return 2;
        }
    }
    if (step < 1 || reps < 1 || reps > 64 || threads < 1) {
        fprintf(stderr, "dense: bad --step, --reps (1..64) or --threads\n");
        return 2;
    }
    bench_openblas_threads(threads);
    bench_dcrt_threads(threads);
    printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), %d threads for both\n",
           bench_openblas_core(), getenv("OPENBLAS_CORETYPE"), threads);
    static const int64_t shapes[4][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};
    double logsum = 0;
    int count = 0;
    for (int s = 0; s < 4; s++) {
        int64_t N = shapes[s][0], K = shapes[s][1];
        TeProgram *p = dense(N, K);
        MicroKernel mks[3], *use = NULL;
        TargetInfo ti = pass_target_info(PT_CPU);
        if (mkspec) {
            if (!pass_parse_microkernel(mkspec, &mks[2], NULL)) {
                fprintf(stderr, "dense: bad --mk '%s'\n", mkspec);
                return 2;
            }
            use = mks;
        }
        char err[512];
        LoopProgram *lp = pass_run_pipeline(p, use, &ti, NULL, err, sizeof err);
        ExCpu *cp = lp ? ex_cpu_compile(lp, err, sizeof err) : NULL;
        if (!cp) {
            fprintf(stderr, "dense: %s\n", err);
            return 1;
        }
        if (s == 0) {
            printf("micro-kernel: ");
            ir_print_microkernel(stdout, &lp->kernels[0]->mk, 2);
            printf("\n");
        }
        printf("\nT x %lld by %lld x %lld\n%5s %12s %12s %7s\n", (long long)K, (long long)K,
               (long long)N, "T", "dcc GFLOP/s", "BLAS GFLOP/s", "ratio");
        float *X = malloc(sizeof(float) * 128 * (size_t)K), *W = malloc(sizeof(float) * (size_t)(N * K));
        float *Y = malloc(sizeof(float) * 128 * (size_t)N);
        rt_rng_fill(1, 1, X, (size_t)(128 * K));
        rt_rng_fill(1, 2, W, (size_t)(N * K));
        /* all of dcc first, then all of OpenBLAS: OpenBLAS's idle threads
         * spin for a while after each call and would steal a core from
         * whatever runs next */
        int64_t Ts[160];
        double td[160], tb[160];
        int nt = 0;
        for (int64_t T = 1; T <= 128; T = next_T(T, step))
            Ts[nt++] = T;
        for (int i = 0; i < nt; i++) {
            Case c = {cp, Ts[i], N, K, {X, W, Y}};
            td[i] = bench_median_ms(reps, run_dcc, &c);
        }
        for (int i = 0; i < nt; i++) {
            Case c = {cp, Ts[i], N, K, {X, W, Y}};
            tb[i] = bench_median_ms(reps, run_blas, &c);
        }
        for (int i = 0; i < nt; i++) {
            double flop = 2.0 * (double)(Ts[i] * N * K);
            double gd = flop / td[i] / 1e6, gb = flop / tb[i] / 1e6;
            printf("%5lld %12.1f %12.1f %7.2f\n", (long long)Ts[i], gd, gb, gd / gb);
            logsum += log(gd / gb);
            count++;
        }
        free(X);
        free(W);
        free(Y);
        ex_cpu_destroy(cp);
        ir_te_destroy(p);
    }
    printf("\ngeometric mean of dcc / OpenBLAS over %d shapes: %.2fx\n", count, exp(logsum / count));
    return 0;
}
