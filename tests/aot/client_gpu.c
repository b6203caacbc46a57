/* The GPU AOT client test: softmax_launch from a dcc --target=nvptx object,
 * linked with libdcrt.a and -lpthread -lm -ldl only.
 *
 *     client_gpu T REF.npy
 *
 * Always: the dims and pointers are checked before the driver is touched
 * (T=0 gives DCRT_ERR_DIM_RANGE, a 0 pointer DCRT_ERR_NULL_POINTER). With
 * no driver or device, a valid call returns DCRT_ERR_NO_DRIVER or
 * DCRT_ERR_NO_DEVICE and the test prints "skipped" and passes. With a GPU,
 * it runs softmax for T and compares with REF.npy (the reference
 * interpreter's output for the seeded inputs of `dcc run`).
 */
#include "dietcode/runtime.h"
#include "softmax.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int64_t T = atoll(argv[1]), n = T * 1000;
    int rc0 = softmax_launch(0, 1, 1, NULL), rcn = softmax_launch(T, 0, 1, NULL);
    if (rc0 != DCRT_ERR_DIM_RANGE || rcn != DCRT_ERR_NULL_POINTER) {
        fprintf(stderr, "error codes: T=0 gave %d, a 0 pointer gave %d\n", rc0, rcn);
        return 1;
    }
    char err[512];
    int rc = rt_cuda_init(err, sizeof err);
    if (rt_cuda_is_no_gpu(rc)) {
        int rl = softmax_launch(T, 1, 1, NULL);
        if (rl != rc) {
            fprintf(stderr, "without a GPU softmax_launch gave %d (%s), expected %d\n", rl,
                    dcrt_error_string(rl), rc);
            return 1;
        }
        printf("skipped: %s (softmax_launch: %s)\n", err, dcrt_error_string(rl));
        return 0;
    }
    if (rc != DCRT_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    float *x = malloc((size_t)n * sizeof *x), *p = malloc((size_t)n * sizeof *p);
    rt_rng_fill(1, rt_rng_hash("X"), x, (size_t)n);
    uint64_t dx = 0, dp = 0;
    if (rt_cuda_alloc(&dx, (size_t)n * 4, err, sizeof err) || rt_cuda_alloc(&dp, (size_t)n * 4, err, sizeof err) ||
        rt_cuda_copy_to_device(dx, x, (size_t)n * 4, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if ((rc = softmax_launch(T, dx, dp, NULL)) != DCRT_OK) {
        fprintf(stderr, "softmax_launch: %s\n", dcrt_error_string(rc));
        return 1;
    }
    if (rt_cuda_sync(err, sizeof err) || rt_cuda_copy_to_host(p, dp, (size_t)n * 4, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    RtArray ref;
    if (rt_npy_read(argv[2], &ref, err, sizeof err) != 0 || rt_array_numel(&ref) != n) {
        fprintf(stderr, "bad reference %s\n", argv[2]);
        return 1;
    }
    int64_t nbad = 0;
    for (int64_t i = 0; i < n; i++)
        nbad += !(fabs((double)p[i] - ref.data[i]) <= 1e-5 + 1e-3 * fabs(ref.data[i]));
    printf("T=%lld on the GPU: %lld mismatches of %lld\n", (long long)T, (long long)nbad, (long long)n);
    return nbad != 0;
}
