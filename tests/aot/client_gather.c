/* The gather client (tests/aot/gather.sh): gather_out_of_range_run from a
 * dcc-generated object, for T, with indices in range (negative ones count
 * from the end) checked against C, then with one out of range: the call
 * must return DCRT_ERR_INDEX and dcrt_last_error() name the tensor, the
 * axis, the index and the element; then in range again, which must work.
 *
 *     client_gather T
 */
#include "gather_out_of_range.h"

#include "last_error.h"

#include <stdio.h>
#include <stdlib.h>

enum { ROWS = 10, D = 8 };

static int run_and_check(int64_t T, const int32_t *ids, const float *E, float *Y, float *Z)
{
    int rc = gather_out_of_range_run(T, ids, E, Y, Z, NULL);
    if (rc != DCRT_OK) {
        fprintf(stderr, "T=%lld: %s\n", (long long)T, dcrt_last_error());
        return 1;
    }
    for (int64_t t = 0; t < T; t++) {
        int row = ids[t] < 0 ? ids[t] + ROWS : ids[t];
        float z = 0;
        for (int d = 0; d < D; d++) {
            z += E[row * D + d];
            if (Y[t * D + d] != E[row * D + d] * 2.0f) {
                fprintf(stderr, "T=%lld: Y[%lld, %d] = %g, expected %g\n", (long long)T,
                        (long long)t, d, Y[t * D + d], E[row * D + d] * 2.0f);
                return 1;
            }
        }
        if (Z[t] < z - 1e-4f || Z[t] > z + 1e-4f) {
            fprintf(stderr, "T=%lld: Z[%lld] = %g, expected %g\n", (long long)T, (long long)t,
                    Z[t], z);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int64_t T = atoll(argv[1]);
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    float E[ROWS * D], *Y = malloc((size_t)(T * D) * sizeof *Y), *Z = malloc((size_t)T * sizeof *Z);
    if (!ids || !Y || !Z)
        return 2;
    for (int i = 0; i < ROWS * D; i++)
        E[i] = (float)(i % 17) * 0.25f - 1.0f;
    for (int64_t t = 0; t < T; t++)
        ids[t] = (int32_t)((t * 7) % (2 * ROWS)) - ROWS; /* -10 .. 9 */
    if (run_and_check(T, ids, E, Y, Z))
        return 1;
    ids[T - 1] = ROWS;
    int rc = gather_out_of_range_run(T, ids, E, Y, Z, NULL);
    char want[128];
    snprintf(want, sizeof want, "index %d of E on axis 0 is out of range -%d..%d (computing Y[%lld, ",
             ROWS, ROWS, ROWS - 1, (long long)T - 1);
    if (rc != DCRT_ERR_INDEX) {
        fprintf(stderr, "T=%lld: an index out of range returned %d, not DCRT_ERR_INDEX\n",
                (long long)T, rc);
        return 1;
    }
    if (!last_error_has("an index out of range", want))
        return 1;
    ids[T - 1] = -ROWS;
    if (run_and_check(T, ids, E, Y, Z))
        return 1;
    free(ids);
    free(Y);
    free(Z);
    printf("T=%lld: gathers checked\n", (long long)T);
    return 0;
}
