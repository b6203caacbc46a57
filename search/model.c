/* The learned half of the cost model: gradient-boosted regression trees
 * (XGBoost's C API, the learner Ansor and DietCode use) from a
 * micro-kernel's features to the log of its measured throughput. Retrained
 * from scratch on every sample after each measured batch: the sample sets
 * are small (hundreds), training takes milliseconds, and a fresh fit keeps
 * results independent of the order batches arrived in. One thread and a
 * fixed seed make it deterministic.
 *
 * libxgboost is loaded with dlopen ($DC_XGBOOST, else libxgboost.so.0), so
 * dcc itself links no C++ library and runs where XGBoost is not
 * installed; there the analytic prior alone ranks candidates
 * (srch_model_available says why).
 */
#include "dietcode/search.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

enum { ROUNDS = 40, MIN_SAMPLES = 4 };

/* The entry points used, resolved once. */
static struct {
    bool ok;
    char why[256];
    const char *(*last_error)(void);
    int (*dmat_from_mat)(const float *, bst_ulong, bst_ulong, float, DMatrixHandle *);
    int (*dmat_set_float)(DMatrixHandle, const char *, const float *, bst_ulong);
    int (*dmat_free)(DMatrixHandle);
    int (*create)(const DMatrixHandle *, bst_ulong, BoosterHandle *);
    int (*set_param)(BoosterHandle, const char *, const char *);
    int (*update)(BoosterHandle, int, DMatrixHandle);
    int (*predict)(BoosterHandle, DMatrixHandle, int, unsigned, int, bst_ulong *, const float **);
    int (*free_booster)(BoosterHandle);
} X;
static pthread_once_t x_once = PTHREAD_ONCE_INIT;

static void x_load(void)
{
    const char *lib = getenv("DC_XGBOOST");
    if (!lib || !*lib)
        lib = "libxgboost.so.0";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(X.why, sizeof X.why, "cannot load %s: %s", lib, dlerror());
        return;
    }
#define SYM(field, name)                                                                   \
    if (!(*(void **)&X.field = dlsym(h, name))) {                                          \
        snprintf(X.why, sizeof X.why, "%s has no %s", lib, name);                          \
        return;                                                                            \
    }
    SYM(last_error, "XGBGetLastError");
    SYM(dmat_from_mat, "XGDMatrixCreateFromMat");
    SYM(dmat_set_float, "XGDMatrixSetFloatInfo");
    SYM(dmat_free, "XGDMatrixFree");
    SYM(create, "XGBoosterCreate");
    SYM(set_param, "XGBoosterSetParam");
    SYM(update, "XGBoosterUpdateOneIter");
    SYM(predict, "XGBoosterPredict");
    SYM(free_booster, "XGBoosterFree");
#undef SYM
    X.ok = true;
}

bool srch_model_available(char *why, size_t whylen)
{
    pthread_once(&x_once, x_load);
    if (!X.ok)
        srch_seterr(why, whylen, "XGBoost is not available (%s)", X.why);
    return X.ok;
}

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
    srch_seterr(err, errlen, "XGBoost: %s: %s", what, X.last_error());
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
    if (m->n < MIN_SAMPLES || !srch_model_available(NULL, 0))
        return true; /* the prior still serves */
    DMatrixHandle d = NULL;
    BoosterHandle b = NULL;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(m->seed % 2147483647u));
    bool ok = xgb_ok(X.dmat_from_mat(m->x, (bst_ulong)m->n, SRCH_NFEAT, NAN, &d),
                     "XGDMatrixCreateFromMat", err, errlen) &&
              xgb_ok(X.dmat_set_float(d, "label", m->y, (bst_ulong)m->n),
                     "XGDMatrixSetFloatInfo", err, errlen) &&
              xgb_ok(X.create(&d, 1, &b), "XGBoosterCreate", err, errlen);
    const char *params[][2] = {
        {"objective", "reg:squarederror"}, {"max_depth", "6"}, {"eta", "0.2"},
        {"min_child_weight", "1"}, {"subsample", "1"}, {"nthread", "1"},
        {"seed", seed}, {"verbosity", "0"}, {"tree_method", "exact"},
    };
    for (size_t i = 0; ok && i < sizeof params / sizeof params[0]; i++)
        ok = xgb_ok(X.set_param(b, params[i][0], params[i][1]), "XGBoosterSetParam", err,
                    errlen);
    for (int it = 0; ok && it < ROUNDS; it++)
        ok = xgb_ok(X.update(b, it, d), "XGBoosterUpdateOneIter", err, errlen);
    if (d)
        X.dmat_free(d);
    if (!ok) {
        if (b)
            X.free_booster(b);
        return false;
    }
    if (m->booster)
        X.free_booster(m->booster);
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
    bool ok = xgb_ok(X.dmat_from_mat(f, (bst_ulong)n, SRCH_NFEAT, NAN, &d),
                     "XGDMatrixCreateFromMat", err, errlen) &&
              xgb_ok(X.predict(m->booster, d, 0, 0, 0, &len, &res), "XGBoosterPredict",
                     err, errlen);
    if (ok && len != (bst_ulong)n) {
        srch_seterr(err, errlen, "XGBoost: %llu predictions for %d rows", (unsigned long long)len, n);
        ok = false;
    }
    for (int i = 0; ok && i < n; i++)
        out[i] = exp((double)res[i]);
    if (d)
        X.dmat_free(d);
    return ok;
}

void srch_model_free(SrchModel *m)
{
    if (!m)
        return;
    if (m->booster)
        X.free_booster(m->booster);
    free(m->x);
    free(m->y);
    free(m);
}
