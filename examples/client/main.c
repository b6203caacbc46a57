/* An ahead-of-time client: calls the BERT QKV projection that dcc compiled
 * into bert_qkv.o (declared in the generated bert_qkv.h), for a few token
 * counts T, and checks it against a naive loop.
 *
 * Build (CMake does this as target bert_client, or see the Makefile):
 *     dcc examples/bert_qkv.tex --emit=obj,header -o bert_qkv
 *     cc -I. main.c bert_qkv.o libdcrt.a -lpthread -lm -ldl -o bert_client
 */
#include "bert_qkv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { K = 768, N = 2304 };

static void fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

int main(void)
{
    static const int64_t ts[] = {1, 7, 64, 77, 128, 300};
    float *W = malloc(sizeof(float) * N * K), *b = malloc(sizeof(float) * N);
    if (!W || !b)
        return 1;
    fill(W, (size_t)N * K, 1);
    fill(b, N, 2);
    int bad = 0;
    for (size_t t = 0; t < sizeof ts / sizeof ts[0]; t++) {
        int64_t T = ts[t];
        float *X = malloc(sizeof(float) * (size_t)(T * K)), *Y = malloc(sizeof(float) * (size_t)(T * N));
        if (!X || !Y)
            return 1;
        fill(X, (size_t)(T * K), 3);
        /* the workspace for these sizes (this program has no intermediates:
         * 0 bytes); NULL would let libdcrt keep one per thread */
        size_t wsize = bert_qkv_workspace_size(T);
        void *ws = wsize ? aligned_alloc(256, (wsize + 255) / 256 * 256) : NULL;
        int rc = bert_qkv_run(T, X, W, b, Y, ws);
        free(ws);
        if (rc != DCRT_OK) {
            fprintf(stderr, "bert_qkv_run(T=%lld): %s\n", (long long)T, dcrt_last_error());
            return 1;
        }
        double sum = 0, maxerr = 0;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = b[j];
                for (int64_t k = 0; k < K; k++)
                    acc += (double)X[i * K + k] * W[j * K + k];
                maxerr = fmax(maxerr, fabs(acc - Y[i * N + j]));
                sum += Y[i * N + j];
            }
        printf("T=%-4lld checksum %.4f  max abs error %.2g\n", (long long)T, sum, maxerr);
        bad |= !(maxerr < 1e-3);
        free(X);
        free(Y);
    }
    int rc = bert_qkv_run(0, W, W, b, b, NULL);
    printf("T=0: %s (%s)\n", dcrt_error_string(rc), dcrt_last_error());
    free(W);
    free(b);
    return bad || rc != DCRT_ERR_DIM_RANGE;
}
