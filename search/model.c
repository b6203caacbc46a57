/* The learned half of the cost model: gradient-boosted regression trees
 * (XGBoost's C API, the learner Ansor and DietCode use) from a
 * micro-kernel's features to the log of its measured throughput. Retrained
 * from scratch on every sample after each measured batch: the sample sets
 * are small (hundreds), training takes milliseconds, and a fresh fit keeps
 * results independent of the order batches arrived in. One thread and a
 * fixed seed make it deterministic.
 */
#include "dietcode/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

enum { ROUNDS = 40, MIN_SAMPLES = 4 };

struct SrchModel {
    uint64_t seed;
    int n, cap;
    float *x;       /* n x SRCH_NFEAT */
    float *y;       /* log GFLOP/s */
    BoosterHandle booster;
};

static bool xgb_ok(int rc, const char *what, char *err, size_t errlen)
{
    if (rc == 0)
        return true;
    srch_seterr(err, errlen, "XGBoost: %s: %s", what, XGBGetLastError());
    return false;
}

SrchModel *srch_model_new(uint64_t seed, char *err, size_t errlen)
{
    SrchModel *m = calloc(1, sizeof *m);
    if (!m)
        srch_seterr(err, errlen, "out of memory");
    else
        m->seed = seed;
    return m;
}

void srch_model_add(SrchModel *m, const float *f, double gflops)
{
    if (!(gflops > 0) || !isfinite(gflops))
        return;
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 64;
        float *x = realloc(m->x, sizeof(float) * SRCH_NFEAT * (size_t)cap);
        if (!x)
            return;
        m->x = x;
        float *y = realloc(m->y, sizeof(float) * (size_t)cap);
        if (!y)
            return;
        m->y = y;
        m->cap = cap;
    }
    memcpy(m->x + (size_t)m->n * SRCH_NFEAT, f, sizeof(float) * SRCH_NFEAT);
    m->y[m->n++] = (float)log(gflops);
}

int srch_model_nsamples(const SrchModel *m) { return m->n; }
bool srch_model_trained(const SrchModel *m) { return m->booster != NULL; }

bool srch_model_train(SrchModel *m, char *err, size_t errlen)
{
    if (m->n < MIN_SAMPLES)
        return true; /* the prior still serves */
    DMatrixHandle d = NULL;
    BoosterHandle b = NULL;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(m->seed % 2147483647u));
    bool ok = xgb_ok(XGDMatrixCreateFromMat(m->x, (bst_ulong)m->n, SRCH_NFEAT, NAN, &d),
                     "XGDMatrixCreateFromMat", err, errlen) &&
              xgb_ok(XGDMatrixSetFloatInfo(d, "label", m->y, (bst_ulong)m->n),
                     "XGDMatrixSetFloatInfo", err, errlen) &&
              xgb_ok(XGBoosterCreate(&d, 1, &b), "XGBoosterCreate", err, errlen);
    const char *params[][2] = {
        {"objective", "reg:squarederror"}, {"max_depth", "6"}, {"eta", "0.2"},
        {"min_child_weight", "1"}, {"subsample", "1"}, {"nthread", "1"},
        {"seed", seed}, {"verbosity", "0"}, {"tree_method", "exact"},
    };
    for (size_t i = 0; ok && i < sizeof params / sizeof params[0]; i++)
        ok = xgb_ok(XGBoosterSetParam(b, params[i][0], params[i][1]), "XGBoosterSetParam", err,
                    errlen);
    for (int it = 0; ok && it < ROUNDS; it++)
        ok = xgb_ok(XGBoosterUpdateOneIter(b, it, d), "XGBoosterUpdateOneIter", err, errlen);
    if (d)
        XGDMatrixFree(d);
    if (!ok) {
        if (b)
            XGBoosterFree(b);
        return false;
    }
    if (m->booster)
        XGBoosterFree(m->booster);
    m->booster = b;
    return true;
}

bool srch_model_predict(SrchModel *m, const float *f, int n, double *out, char *err,
                        size_t errlen)
{
    if (n <= 0)
        return true;
    if (!m->booster) {
        srch_seterr(err, errlen, "the cost model is not trained");
        return false;
    }
    DMatrixHandle d = NULL;
    bst_ulong len = 0;
    const float *res = NULL;
    bool ok = xgb_ok(XGDMatrixCreateFromMat(f, (bst_ulong)n, SRCH_NFEAT, NAN, &d),
                     "XGDMatrixCreateFromMat", err, errlen) &&
              xgb_ok(XGBoosterPredict(m->booster, d, 0, 0, 0, &len, &res), "XGBoosterPredict",
                     err, errlen);
    if (ok && len != (bst_ulong)n) {
        srch_seterr(err, errlen, "XGBoost: %llu predictions for %d rows", (unsigned long long)len, n);
        ok = false;
    }
    for (int i = 0; ok && i < n; i++)
        out[i] = exp((double)res[i]);
    if (d)
        XGDMatrixFree(d);
    return ok;
}

void srch_model_free(SrchModel *m)
{
    if (!m)
        return;
    if (m->booster)
        XGBoosterFree(m->booster);
    free(m->x);
    free(m->y);
    free(m);
}
