/* The constants client (tests/aot/consts.sh): constants_run from a
 * dcc-generated object, which carries E, P and bias itself, on the ids
 * `dcc run` generates (seed 1), writing H and Y as .npy for cmp against
 * `dcc run --output`.
 *
 *     client_consts B S H.npy Y.npy
 */
#include "dietcode/runtime.h"

#include "constants.h"

#include <stdio.h>
#include <stdlib.h>

static int save(const char *path, float *data, int64_t B, int64_t S)
{
    RtArray a = {.rank = 3, .shape = {B, S, 24}, .data = data};
    char err[512];
    if (rt_npy_write(path, &a, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "%s\n", err);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    int64_t B = atoll(argv[1]), S = atoll(argv[2]);
    int64_t *ids = malloc((size_t)(B * S) * sizeof *ids);
    float *H = malloc((size_t)(B * S * 24) * sizeof *H), *Y = malloc((size_t)(B * S * 24) * sizeof *Y);
    if (!ids || !H || !Y)
        return 2;
    rt_rng_fill_elems(1, rt_rng_hash("ids"), DCRT_I64, ids, (size_t)(B * S));
    int rc = constants_run(B, S, ids, H, Y, NULL);
    if (rc != DCRT_OK) {
        fprintf(stderr, "constants_run: %s\n", dcrt_last_error());
        return 1;
    }
    rc = save(argv[3], H, B, S) || save(argv[4], Y, B, S);
    free(ids);
    free(H);
    free(Y);
    return rc;
}
