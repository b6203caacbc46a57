/* An AOT client test: calls a dcc-generated PROG_run (linked from the
 * object, with libdcrt.a only) and compares its output with the reference
 * interpreter's, which run.sh wrote with `dcc run --target=reference`.
 *
 *     client T REF.npy   inputs from the seeded generator dcc run uses
 *                        (seed 1, one stream per tensor name); exit 1 on a
 *                        mismatch
 *     client --errors    checks the error codes (a dim below LO, NULL, a size
 *                        over INT32_MAX elements) and that dcrt_last_error
 *                        names the failure
 *
 * Built once per program: -DPROG_SOFTMAX (examples/softmax.tex, whose M
 * and Z are intermediates in the workspace: the client's own for odd T,
 * libdcrt's for even T) or -DPROG_LINEAR (tests/golden/accept/linear_bias.tex,
 * a dense layer with bias).
 */
#include "dietcode/runtime.h"

#if defined(PROG_SOFTMAX)
#include "softmax.h"
#elif defined(PROG_LINEAR)
#include "linear_bias.h"
#else
#error "define PROG_SOFTMAX or PROG_LINEAR"
#endif
#include "last_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *input(const char *name, int64_t n)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p)
        exit(2);
    rt_rng_fill(1, rt_rng_hash(name), p, (size_t)n);
    return p;
}

static int run(int64_t T, float **out, int64_t *n)
{
#if defined(PROG_SOFTMAX)
    *n = T * 1000;
    float *X = input("X", T * 1000);
    *out = calloc((size_t)*n, sizeof **out);
    size_t bytes = softmax_workspace_size(T);
    void *ws = T % 2 ? aligned_alloc(256, (bytes + 255) / 256 * 256) : NULL;
    if (bytes < (size_t)T * 2 * sizeof(float)) {
        fprintf(stderr, "T=%lld: a workspace of %zu bytes cannot hold M and Z\n", (long long)T, bytes);
        exit(1);
    }
    int rc = softmax_run(T, X, *out, ws);
    free(ws);
    free(X);
#else
    *n = T * 192;
    float *X = input("X", T * 64), *W = input("W", 192 * 64), *b = input("b", 192);
    *out = calloc((size_t)*n, sizeof **out);
    int rc = linear_bias_run(T, X, W, b, *out, NULL);
    free(X);
    free(W);
    free(b);
#endif
    return rc;
}

static int check_errors(void)
{
    int bad = 0;
    if (strcmp(dcrt_last_error(), "") != 0) {
        fprintf(stderr, "dcrt_last_error() before any failure: \"%s\"\n", dcrt_last_error());
        bad = 1;
    }
#if defined(PROG_SOFTMAX)
    float x[1000] = {0}, p[1000];
    int rc0 = softmax_run(0, x, p, NULL);
    bad |= !last_error_has("T=0", "softmax: T = 0 is below the declared range 1..128");
    int rcn = softmax_run(1, x, NULL, NULL);
    bad |= !last_error_has("a NULL pointer", "softmax: the pointer to tensor P is NULL");
    int rc1 = softmax_run(1, x, p, NULL);
    int rcbig = softmax_run(5000000, x, p, NULL); /* 5e9 elements: over INT32_MAX */
    bad |= !last_error_has("a huge T", "sizes too large: tensor X would have 5000000000 elements");
    if (softmax_workspace_size(0) != 0 || softmax_workspace_size(1) != 512) {
        fprintf(stderr, "softmax_workspace_size: %zu at T=0, %zu at T=1 (M and Z: 256 bytes each)\n",
                softmax_workspace_size(0), softmax_workspace_size(1));
        bad = 1;
    }
#else
    static float x[64], w[192 * 64], b[192], y[192];
    int rc0 = linear_bias_run(0, x, w, b, y, NULL);
    bad |= !last_error_has("T=0", "linear_bias: T = 0 is below the declared range 1..");
    int rcn = linear_bias_run(1, NULL, w, b, y, NULL);
    bad |= !last_error_has("a NULL pointer", "linear_bias: the pointer to tensor X is NULL");
    int rc1 = linear_bias_run(1, x, w, b, y, NULL);
    int rcbig = linear_bias_run(20000000, x, w, b, y, NULL); /* 3.84e9 elements of Y */
    bad |= !last_error_has("a huge T", "sizes too large: tensor");
#endif
    if (rc0 != DCRT_ERR_DIM_RANGE || rcn != DCRT_ERR_NULL_POINTER || rc1 != DCRT_OK ||
        rcbig != DCRT_ERR_TOO_LARGE) {
        fprintf(stderr, "error codes: T=0 gave %d, NULL gave %d, T=1 gave %d, huge T gave %d\n",
                rc0, rcn, rc1, rcbig);
        bad = 1;
    }
    if (strcmp(dcrt_error_string(DCRT_OK), "success") != 0 || !dcrt_error_string(12345)) {
        fprintf(stderr, "dcrt_error_string is wrong\n");
        bad = 1;
    }
    printf("T=0: %s\n", dcrt_error_string(rc0));
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--errors") == 0)
        return check_errors();
    if (argc != 3) {
        fprintf(stderr, "usage: client T REF.npy | client --errors\n");
        return 2;
    }
    int64_t T = atoll(argv[1]), n;
    float *out;
    int rc = run(T, &out, &n);
    if (rc != DCRT_OK) {
        fprintf(stderr, "T=%lld: run failed: %s\n", (long long)T, dcrt_error_string(rc));
        return 1;
    }
    RtArray ref;
    char err[512];
    if (rt_npy_read(argv[2], &ref, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (rt_array_numel(&ref) != n) {
        fprintf(stderr, "T=%lld: reference has %lld elements, expected %lld\n", (long long)T,
                (long long)rt_array_numel(&ref), (long long)n);
        return 1;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += out[i];
    RtCompare c = rt_compare(out, ref.data, n);
    int64_t nbad = c.nbad;
    printf("T=%lld: %lld elements, checksum %.6f, max abs error %.3g, %lld mismatches\n",
           (long long)T, (long long)n, sum, c.max_abs, (long long)nbad);
    rt_array_free(&ref);
    free(out);
    return nbad ? 1 : 0;
}
