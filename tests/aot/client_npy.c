/* The byte-for-byte client (tests/aot/bytewise.sh): runs two_dims_run
 * from a dcc-generated object for B and T, on the inputs `dcc run` makes
 * (seed 1, one stream per tensor name), with a workspace of its own, and
 * writes Y as .npy for cmp against `dcc run --output`.
 *
 *     client_npy B T OUT.npy
 */
#include "dietcode/runtime.h"

#include "two_dims.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int64_t B = atoll(argv[1]), T = atoll(argv[2]);
    size_t nx = (size_t)(B * T * 32), ny = (size_t)(B * T * 24);
    float *X = malloc(nx * sizeof *X), *W = malloc(24 * 32 * sizeof *W), *Y = malloc(ny * sizeof *Y);
    size_t bytes = two_dims_workspace_size(B, T);
    void *ws = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!X || !W || !Y || !ws)
        return 2;
    rt_rng_fill(1, rt_rng_hash("X"), X, nx);
    rt_rng_fill(1, rt_rng_hash("W"), W, 24 * 32);
    int rc = two_dims_run(B, T, X, W, Y, ws);
    if (rc != DCRT_OK) {
        fprintf(stderr, "two_dims_run(%lld, %lld): %s\n", (long long)B, (long long)T,
                dcrt_last_error());
        return 1;
    }
    RtArray a = {.rank = 3, .shape = {B, T, 24}, .data = Y};
    char err[512];
    if (rt_npy_write(argv[3], &a, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    free(X);
    free(W);
    free(Y);
    free(ws);
    return 0;
}
