/* The GPU AOT client test: softmax_launch from a dcc --target=nvptx object,
 * linked with libdcrt.a and -lpthread -lm -ldl only.
 *
 *     client_gpu T REF.npy
 *
 * Always: the dims and pointers are checked before the driver is touched
 * (T=0 gives DCRT_ERR_DIM_RANGE, a 0 pointer DCRT_ERR_NULL_POINTER), and
 * dcrt_last_error() names each failure. With no driver or device, a valid
 * call returns DCRT_ERR_NO_DRIVER or DCRT_ERR_NO_DEVICE, dcrt_last_error()
 * is the driver's own one-line reason, and the test prints "skipped: " and
 * that reason, and passes. With a GPU, it runs softmax for T and compares
 * with REF.npy (the reference interpreter's output for the seeded inputs
 * of `dcc run`).
 */
#include "dietcode/runtime.h"
#include "softmax.h"
#include "last_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int64_t T = atoll(argv[1]), n = T * 1000;
    if (dcrt_last_error()[0] != '\0') {
        fprintf(stderr, "dcrt_last_error() before any failure: \"%s\"\n", dcrt_last_error());
        return 1;
    }
    int rc0 = softmax_launch(0, 1, 1, 0, NULL);
    if (!last_error_has("T=0", "softmax: T = 0 is below the declared range 1..128"))
        return 1;
    int rcn = softmax_launch(T, 0, 1, 0, NULL);
    if (!last_error_has("a 0 pointer", "softmax: the pointer to tensor X is 0"))
        return 1;
    if (rc0 != DCRT_ERR_DIM_RANGE || rcn != DCRT_ERR_NULL_POINTER) {
        fprintf(stderr, "error codes: T=0 gave %d, a 0 pointer gave %d\n", rc0, rcn);
        return 1;
    }
    char err[512];
    int rc = rt_cuda_init(err, sizeof err);
    if (rt_cuda_is_no_gpu(rc)) {
        int rl = softmax_launch(T, 1, 1, 0, NULL);
        if (rl != rc) {
            fprintf(stderr, "without a GPU softmax_launch gave %d (%s), expected %d\n", rl,
                    dcrt_error_string(rl), rc);
            return 1;
        }
        if (strcmp(dcrt_last_error(), err) != 0 || strncmp(err, "no CUDA", 7) != 0) {
            fprintf(stderr, "without a GPU: rt_cuda_init said \"%s\", dcrt_last_error() \"%s\"\n",
                    err, dcrt_last_error());
            return 1;
        }
        printf("skipped: softmax_launch: %s\n", dcrt_last_error());
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
    if ((rc = softmax_launch(T, dx, dp, 0, NULL)) != DCRT_OK) {
        fprintf(stderr, "softmax_launch: %s: %s\n", dcrt_error_string(rc), dcrt_last_error());
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
    int64_t nbad = rt_compare(p, ref.data, n).nbad;
    printf("T=%lld on the GPU: %lld mismatches of %lld\n", (long long)T, (long long)nbad, (long long)n);

    /* PTX the driver rejects: DCRT_ERR_MODULE, and the JIT's log in dcrt_last_error */
    static void *cache;
    static const DcrtProgram bad = {
        .abi = DCRT_ABI_VERSION, .name = "bad",
        .ptx = ".version 7.0\n.target sm_75\n.address_size 64\n"
               ".visible .entry k() { bogus.instr; ret; }\n",
        .module_cache = &cache,
    };
    rc = dcrt_cuda_run(&bad, NULL, NULL, 0, NULL);
    if (rc != DCRT_ERR_MODULE || !last_error_has("bad PTX", "JIT log")) {
        fprintf(stderr, "bad PTX gave %d, expected DCRT_ERR_MODULE\n", rc);
        return 1;
    }
    printf("bad PTX: %s\n", dcrt_last_error());
    return nbad != 0;
}
