/* bench/gpu/cublas_bert.c: dcc's GPU kernels against cuBLAS on the four
 * dense layers of BERT-base, for every token count T from 1 to 128.
 *
 *     cublas_bert [--tmax T] [--reps N] [--batch B] [--budget SECONDS]
 *
 * Each layer is Y[T, N] = X[T, K] W[N, K]^T + b[N] in FP32: QKV (N 2304,
 * K 768), the attention output (768, 768), FFN1 (3072, 768) and FFN2 (768,
 * 3072). The dcc side is NAME_launch from the objects `dcc --target=nvptx
 * --emit=obj,header` writes for examples/bert_qkv.tex and the .tex files
 * in bench/layers/ (bias fused in the kernel). The cuBLAS side is one cublasSgemm (TN,
 * default math mode: no TF32) with beta = 1 into a Y that holds the
 * broadcast bias, so it, too, adds the bias inside the GEMM; the refill of
 * Y is done once, untimed, for the numerical check (the timed calls go on
 * accumulating into Y, which changes the values but not the work).
 *
 * Both run on one stream, on device buffers allocated once for T = 128,
 * and are timed the same way with CUDA events: a few warm-up calls, then
 * --reps timed runs of --batch back-to-back calls each; a run's time over
 * --batch is one call's, and the median over runs is reported. The ratio
 * is cublas_time / dcc_time (above 1: dcc is faster); the summary gives
 * its geometric mean per layer, per band of T (1-16, 17-64, 65-128) and
 * overall.
 *
 * Each is timed twice: warm, the same W and b every call (they stay in
 * L2, as in a benchmark loop), and cold, each call on the next of several
 * copies of W and b that together hold more than twice the L2 cache, so
 * a call finds its weights in memory, as one layer of a model does after
 * the others ran.
 *
 * Check, for every (layer, T): dcc's Y against cuBLAS's (a fresh GEMM on
 * the bias), max |dcc - cublas| <= 1e-4 max |cublas|; and, for T = 1 and
 * T = tmax, cuBLAS's first and last rows against a double-precision sum
 * on the host, so a layout slip on the cuBLAS side cannot pass unseen.
 * Exit status 0 when every check passed and every (layer, T) was timed;
 * 1 otherwise (a failed check, an error, or the --budget wall-clock limit
 * reached, after which the rest is skipped and the summary says so).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "bert_attn_out.h"
#include "bert_ffn1.h"
#include "bert_ffn2.h"
#include "bert_qkv.h"
#include "dietcode/runtime.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*LaunchFn)(int64_t T, uint64_t X, uint64_t W, uint64_t b, uint64_t Y,
                        uint64_t workspace, void *stream);

typedef struct Layer {
    const char *name;
    int n, k;
    LaunchFn launch;
} Layer;

static const Layer layers[] = {
    {"qkv", 2304, 768, bert_qkv_launch},
    {"attn_out", 768, 768, bert_attn_out_launch},
    {"ffn1", 3072, 768, bert_ffn1_launch},
    {"ffn2", 768, 3072, bert_ffn2_launch},
};
enum { NLAYERS = sizeof layers / sizeof layers[0], TMAX = 128, WARMUP = 3 };

static const double RTOL = 1e-4;

/* Device buffers of one layer, sized for TMAX; the host copies of X, W, b. */
enum { MAX_COPIES = 64 };

typedef struct Bufs {
    float *x, *w, *b, *y, *yref; /* device */
    float *hx, *hw, *hb, *hbias; /* host; hbias: b broadcast to TMAX rows */
    float *hy, *hyref;
    int ncopies;                 /* cold: copies of W and b rotated through */
    float *wc[MAX_COPIES], *bc[MAX_COPIES];
} Bufs;

static cudaStream_t stream;
static cublasHandle_t blas;
static cudaEvent_t ev0, ev1;

static void die(const char *what, const char *msg)
{
    printf("error: %s: %s\n", what, msg);
    exit(1);
}

static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        die(what, cudaGetErrorString(e));
}

static void blas_ok(cublasStatus_t s, const char *what)
{
    if (s != CUBLAS_STATUS_SUCCESS)
        die(what, cublasGetStatusString(s));
}

static void dcc_ok(int rc, const char *what)
{
    if (rc != DCRT_OK)
        die(what, dcrt_last_error());
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *host(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p)
        die("malloc", "out of memory");
    return p;
}

static float *device(size_t n)
{
    void *p = NULL;
    cuda_ok(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc");
    return p;
}

static Bufs bufs_new(const Layer *l, int tmax, size_t l2_bytes)
{
    size_t n = (size_t)l->n, k = (size_t)l->k, t = (size_t)tmax;
    Bufs B = {.x = device(t * k), .w = device(n * k), .b = device(n), .y = device(t * n),
              .yref = device(t * n), .hx = host(t * k), .hw = host(n * k), .hb = host(n),
              .hbias = host(t * n), .hy = host(t * n), .hyref = host(t * n)};
    /* the seeded generator of `dcc run` (seed 1, a stream per tensor name) */
    rt_rng_fill(1, rt_rng_hash("X"), B.hx, t * k);
    rt_rng_fill(1, rt_rng_hash("W"), B.hw, n * k);
    rt_rng_fill(1, rt_rng_hash("b"), B.hb, n);
    for (size_t i = 0; i < t; i++)
        memcpy(B.hbias + i * n, B.hb, n * sizeof(float));
    cuda_ok(cudaMemcpy(B.x, B.hx, t * k * sizeof(float), cudaMemcpyHostToDevice), "copy X");
    cuda_ok(cudaMemcpy(B.w, B.hw, n * k * sizeof(float), cudaMemcpyHostToDevice), "copy W");
    cuda_ok(cudaMemcpy(B.b, B.hb, n * sizeof(float), cudaMemcpyHostToDevice), "copy b");
    /* copies of the weights: more than twice L2 in all */
    size_t each = (n * k + n) * sizeof(float);
    B.ncopies = (int)(2 * l2_bytes / each) + 2;
    if (B.ncopies > MAX_COPIES)
        B.ncopies = MAX_COPIES;
    for (int i = 0; i < B.ncopies; i++) {
        B.wc[i] = device(n * k);
        B.bc[i] = device(n);
        cuda_ok(cudaMemcpy(B.wc[i], B.w, n * k * sizeof(float), cudaMemcpyDeviceToDevice), "copy W");
        cuda_ok(cudaMemcpy(B.bc[i], B.b, n * sizeof(float), cudaMemcpyDeviceToDevice), "copy b");
    }
    return B;
}

static void bufs_free(Bufs *B)
{
    float *d[] = {B->x, B->w, B->b, B->y, B->yref}, *h[] = {B->hx, B->hw, B->hb, B->hbias, B->hy, B->hyref};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        cudaFree(d[i]);
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        free(h[i]);
    for (int i = 0; i < B->ncopies; i++) {
        cudaFree(B->wc[i]);
        cudaFree(B->bc[i]);
    }
}

/* The two sides of one call, on copy c of the weights (-1: the originals). */
static void call_dcc(const Layer *l, const Bufs *B, int T, int c)
{
    const float *w = c < 0 ? B->w : B->wc[c], *b = c < 0 ? B->b : B->bc[c];
    /* these layers have no intermediates: no workspace (0 would be libdcrt's) */
    dcc_ok(l->launch(T, (uint64_t)(uintptr_t)B->x, (uint64_t)(uintptr_t)w, (uint64_t)(uintptr_t)b,
                     (uint64_t)(uintptr_t)B->y, 0, stream),
           l->name);
}

/* Row-major Y[T, N] is column-major N x T; so Y^T = W X^T is op(A) = W
 * (column-major K x N, transposed) times B = X^T (column-major K x T).
 * (cuBLAS reads the bias from Y: the copies of b are dcc's only.) */
static void call_cublas(const Layer *l, const Bufs *B, int T, int c)
{
    const float one = 1.0f;
    const float *w = c < 0 ? B->w : B->wc[c];
    blas_ok(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, l->n, T, l->k, &one, w, l->k, B->x, l->k,
                        &one, B->yref, l->n),
            "cublasSgemm");
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median time of one call in microseconds: WARMUP calls, then reps runs of
 * batch calls between two events on the stream; cold, each call on the
 * next copy of the weights. */
static double time_us(void (*call)(const Layer *, const Bufs *, int, int), const Layer *l,
                      const Bufs *B, int T, int reps, int batch, bool cold)
{
    float t[64];
    int c = 0;
    for (int i = 0; i < WARMUP; i++)
        call(l, B, T, cold ? c++ % B->ncopies : -1);
    for (int r = 0; r < reps; r++) {
        cuda_ok(cudaEventRecord(ev0, stream), "cudaEventRecord");
        for (int i = 0; i < batch; i++)
            call(l, B, T, cold ? c++ % B->ncopies : -1);
        cuda_ok(cudaEventRecord(ev1, stream), "cudaEventRecord");
        cuda_ok(cudaEventSynchronize(ev1), "a timed run");
        cuda_ok(cudaEventElapsedTime(&t[r], ev0, ev1), "cudaEventElapsedTime");
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_float);
    return 1000.0 * t[reps / 2] / batch;
}

/* max |got - want| / max |want| over n elements (NaN counts as infinite). */
static double rel_err(const float *got, const float *want, size_t n)
{
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(want[i]));
        double d = fabs((double)got[i] - want[i]);
        err = isnan(d) ? INFINITY : fmax(err, d);
    }
    return err / (scale > 0 ? scale : 1);
}

/* Both sides' Y for T, fresh: dcc's, and cuBLAS's on the broadcast bias. */
static double check(const Layer *l, Bufs *B, int T)
{
    size_t n = (size_t)T * (size_t)l->n;
    cuda_ok(cudaMemcpyAsync(B->yref, B->hbias, n * sizeof(float), cudaMemcpyHostToDevice, stream),
            "copy the bias");
    call_cublas(l, B, T, -1);
    call_dcc(l, B, T, -1);
    cuda_ok(cudaStreamSynchronize(stream), "the checked calls");
    cuda_ok(cudaMemcpy(B->hy, B->y, n * sizeof(float), cudaMemcpyDeviceToHost), "copy Y");
    cuda_ok(cudaMemcpy(B->hyref, B->yref, n * sizeof(float), cudaMemcpyDeviceToHost), "copy Y");
    return rel_err(B->hy, B->hyref, n);
}

/* cuBLAS's rows 0 and T-1 (in hyref, from check) against double sums. */
static double check_host(const Layer *l, const Bufs *B, int T)
{
    int n = l->n, k = l->k, rows[2] = {0, T - 1};
    float *want = host(2 * (size_t)n), *got = host(2 * (size_t)n);
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < n; j++) {
            double s = B->hb[j];
            for (int q = 0; q < k; q++)
                s += (double)B->hx[(size_t)rows[r] * k + q] * B->hw[(size_t)j * k + q];
            want[(size_t)r * n + j] = (float)s;
            got[(size_t)r * n + j] = B->hyref[(size_t)rows[r] * n + j];
        }
    double e = rel_err(got, want, 2 * (size_t)n);
    free(want);
    free(got);
    return e;
}

static int arg(int argc, char **argv, const char *name, int def, int lo, int hi)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            int v = atoi(argv[i + 1]);
            if (v < lo || v > hi) {
                printf("error: %s expects %d..%d, got %s\n", name, lo, hi, argv[i + 1]);
                exit(2);
            }
            return v;
        }
    return def;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i += 2)
        if (i + 1 == argc || (strcmp(argv[i], "--tmax") != 0 && strcmp(argv[i], "--reps") != 0 &&
                              strcmp(argv[i], "--batch") != 0 && strcmp(argv[i], "--budget") != 0)) {
            printf("usage: cublas_bert [--tmax T] [--reps N] [--batch B] [--budget SECONDS]\n");
            return 2;
        }
    int tmax = arg(argc, argv, "--tmax", TMAX, 1, TMAX), reps = arg(argc, argv, "--reps", 11, 1, 64);
    int batch = arg(argc, argv, "--batch", 5, 1, 1000), budget = arg(argc, argv, "--budget", 60, 1, 3600);
    double start = now_s();

    char err[512];
    if (rt_cuda_init(err, sizeof err) != DCRT_OK) /* libdcrt's one-line reason */
        die("no usable GPU", err);
    cuda_ok(cudaSetDevice(0), "no usable GPU: cudaSetDevice");
    cuda_ok(cudaFree(0), "no usable GPU: creating the primary context");
    struct cudaDeviceProp prop;
    int rtv = 0, blasv = 0;
    cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    cuda_ok(cudaRuntimeGetVersion(&rtv), "cudaRuntimeGetVersion");
    cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
    cuda_ok(cudaEventCreate(&ev0), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&ev1), "cudaEventCreate");
    blas_ok(cublasCreate(&blas), "cublasCreate");
    blas_ok(cublasGetVersion(blas, &blasv), "cublasGetVersion");
    blas_ok(cublasSetStream(blas, stream), "cublasSetStream");
    blas_ok(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");

    printf("# dcc NAME_launch against cublasSgemm: %s (sm_%d%d, %d SMs), CUDA runtime %d, cuBLAS %d\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, rtv, blasv);
    printf("# Y[T,N] = X[T,K] W[N,K]^T + b, FP32. dcc: one NAME_launch (bias in the kernel);\n"
           "# cuBLAS: cublasSgemm (TN, default math mode) with beta = 1 into Y holding the bias.\n"
           "# Time: median of %d runs of %d back-to-back calls (CUDA events, one stream, %d\n"
           "# warm-up calls), in us per call; ratio = cublas / dcc (above 1: dcc faster).\n"
           "# Check: max|dcc - cublas| / max|cublas| <= %g (rel_err) for every T.\n",
           reps, batch, WARMUP, RTOL);
    printf("# cold: W and b rotated among copies holding more than twice the L2 (%d MB).\n",
           prop.l2CacheSize >> 20);
    printf("%-9s %4s %5s %5s %10s %10s %7s %10s %10s %7s %9s\n", "layer", "T", "N", "K", "dcc_us",
           "cublas_us", "ratio", "cold_dcc", "cold_cubl", "cold_r", "rel_err");

    /* geometric means: [warm, cold][layer + overall][band + all] */
    enum { NBANDS = 3 };
    static const int band_hi[NBANDS] = {16, 64, TMAX};
    double logs[2][NLAYERS + 1][NBANDS + 1] = {{{0}}};
    int counts[NLAYERS + 1][NBANDS + 1] = {{0}};
    int nfail = 0, nskip = 0;
    for (int li = 0; li < NLAYERS; li++) {
        const Layer *l = &layers[li];
        Bufs B = bufs_new(l, tmax, (size_t)prop.l2CacheSize);
        for (int T = 1; T <= tmax; T++) {
            if (now_s() - start > budget) {
                nskip += tmax - T + 1;
                break;
            }
            double e = check(l, &B, T);
            bool bad = !(e <= RTOL);
            if (T == 1 || T == tmax) {
                double eh = check_host(l, &B, T);
                if (!(eh <= RTOL)) {
                    printf("FAIL %s T=%d: cuBLAS differs from the host's double sums: %.3g\n",
                           l->name, T, eh);
                    bad = true;
                }
            }
            double td = time_us(call_dcc, l, &B, T, reps, batch, false);
            double tc = time_us(call_cublas, l, &B, T, reps, batch, false);
            double cd = time_us(call_dcc, l, &B, T, reps, batch, true);
            double cc = time_us(call_cublas, l, &B, T, reps, batch, true);
            printf("%-9s %4d %5d %5d %10.2f %10.2f %7.3f %10.2f %10.2f %7.3f %9.2e%s\n", l->name, T,
                   l->n, l->k, td, tc, tc / td, cd, cc, cc / cd, e, bad ? "  FAIL" : "");
            nfail += bad;
            int band = 0;
            while (T > band_hi[band])
                band++;
            int rows[2] = {li, NLAYERS}, cols[2] = {band, NBANDS};
            for (int r = 0; r < 2; r++)
                for (int q = 0; q < 2; q++) {
                    logs[0][rows[r]][cols[q]] += log(tc / td);
                    logs[1][rows[r]][cols[q]] += log(cc / cd);
                    counts[rows[r]][cols[q]]++;
                }
        }
        bufs_free(&B);
    }
    printf("# geometric mean of cublas/dcc, warm (cold), by band of T\n");
    printf("%-9s %17s %17s %17s %17s\n", "layer", "T 1-16", "T 17-64", "T 65-128", "all");
    for (int r = 0; r <= NLAYERS; r++) {
        printf("%-9s", r < NLAYERS ? layers[r].name : "overall");
        for (int q = 0; q <= NBANDS; q++) {
            int n = counts[r][q];
            if (n)
                printf(" %7.3f (%7.3f)", exp(logs[0][r][q] / n), exp(logs[1][r][q] / n));
            else
                printf(" %17s", "-");
        }
        printf("\n");
    }
    printf("summary:");
    for (int li = 0; li < NLAYERS; li++)
        printf(" %s %.3f%s", layers[li].name,
               counts[li][NBANDS] ? exp(logs[0][li][NBANDS] / counts[li][NBANDS]) : NAN,
               li + 1 < NLAYERS ? "," : "");
    int all = counts[NLAYERS][NBANDS];
    printf("; overall geomean cublas/dcc %.3f warm, %.3f cold, over %d (layer, T)\n",
           all ? exp(logs[0][NLAYERS][NBANDS] / all) : NAN,
           all ? exp(logs[1][NLAYERS][NBANDS] / all) : NAN, all);
    if (nskip)
        printf("INCOMPLETE: the %d s budget ran out; %d (layer, T) not measured\n", budget, nskip);
    printf("check: %s\n", nfail ? "FAILED" : "every (layer, T) within tolerance");
    if (nfail)
        printf("%d (layer, T) failed the check\n", nfail);
    cublasDestroy(blas);
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    cudaStreamDestroy(stream);
    return nfail || nskip ? 1 : 0;
}
