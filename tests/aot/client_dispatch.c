/* The AOT dispatch client (tests/aot/run_dispatch.sh): links the plain and
 * the marked objects of tests/aot/dispatch_gen.c with libdcrt.a only and,
 * for each T given, checks that dense_dispatch_run matches a plain C dense
 * layer and that dense_dispatch_marked_run's outputs carry the mark of the
 * variant the tree picks for T (so the compiled tree, not only the
 * kernels, is tested).
 *
 *     client_dispatch T...   exit 1 on a mismatch
 */
#include "dietcode/runtime.h"
#include "dense_dispatch.h"
#include "dense_dispatch_marked.h"
#include "dispatch_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = DISPATCH_N, K = DISPATCH_K };

static float *input(uint64_t seed, uint64_t stream, int64_t n)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p)
        exit(2);
    rt_rng_fill(seed, stream, p, (size_t)n);
    return p;
}

/* The outputs of run (with mark added to the reference) against the dense
 * layer computed here; the number of mismatches. */
static int64_t check(int64_t T, const float *y, const float *X, const float *W, const float *b,
                     double mark)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < T; i++)
        for (int j = 0; j < N; j++) {
            double s = b[j];
            for (int k = 0; k < K; k++)
                s += (double)X[i * K + k] * W[j * K + k];
            double want = s + mark;
            if (!(fabs(y[i * N + j] - want) <= 1e-4 * (1 + fabs(want))))
                bad++;
        }
    return bad;
}

int main(int argc, char **argv)
{
    int failed = 0;
    for (int a = 1; a < argc; a++) {
        int64_t T = atoll(argv[a]);
        float *X = input((uint64_t)T, 0, T * K), *W = input((uint64_t)T, 1, N * K),
              *b = input((uint64_t)T, 2, N);
        float *y = calloc((size_t)(T * N), sizeof *y), *ym = calloc((size_t)(T * N), sizeof *ym);
        int rc = dense_dispatch_run(T, X, W, b, y, NULL), rcm = dense_dispatch_marked_run(T, X, W, b, ym, NULL);
        if (rc != DCRT_OK || rcm != DCRT_OK) {
            fprintf(stderr, "T=%lld: %s / %s\n", (long long)T, dcrt_error_string(rc),
                    dcrt_error_string(rcm));
            return 1;
        }
        int v = dispatch_expected(T);
        int64_t bad = check(T, y, X, W, b, 0), badm = check(T, ym, X, W, b, DISPATCH_MARK * v);
        printf("T=%lld: variant %d, %lld mismatches, %lld with the mark (first: %g)\n",
               (long long)T, v, (long long)bad, (long long)badm, ym[0] - y[0]);
        failed |= bad || badm;
        free(X);
        free(W);
        free(b);
        free(y);
        free(ym);
    }
    return failed;
}
