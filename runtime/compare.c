/* The one rule by which a result matches the reference: `dcc run --check`,
 * the e2e sweep and the AOT clients all compare through rt_compare.
 *
 * A finite reference value r matches a finite a when
 *     |a - r| <= 1e-5 * (scale + 1) + 1e-3 * |r|,
 * scale being the largest finite |r| of the tensor (so values near zero in
 * a tensor of large ones are judged on the tensor's scale, as a float
 * sum's rounding is). Infinities match only themselves, with their sign:
 * a tolerance relative to an infinite r would accept anything. A NaN
 * matches only a NaN. Anything else is a mismatch. Integer and bool
 * elements match only when equal (rt_compare_elems).
 */
#include "dietcode/runtime.h"

#include <math.h>

static bool matches(double a, double r, double scale)
{
    if (isnan(r) || isnan(a))
        return isnan(r) && isnan(a);
    if (isinf(r) || isinf(a))
        return a == r;
    return fabs(a - r) <= 1e-5 * (scale + 1) + 1e-3 * fabs(r);
}

RtCompare rt_compare(const float *out, const float *ref, int64_t n)
{
    RtCompare c = {.first = -1};
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
    for (int64_t i = 0; i < n; i++) {
        double a = out[i], r = ref[i];
        if (!matches(a, r, scale)) {
            if (c.first < 0)
                c.first = i;
            c.nbad++;
        }
        if (isfinite(a) && isfinite(r) && fabs(a - r) > c.max_abs)
            c.max_abs = fabs(a - r);
    }
    return c;
}

double rt_elem(int32_t dtype, const void *p, int64_t i)
{
    switch (dtype) {
    case DCRT_F32: return ((const float *)p)[i];
    case DCRT_I32: return ((const int32_t *)p)[i];
    case DCRT_I64: return (double)((const int64_t *)p)[i];
    case DCRT_BOOL: return ((const uint8_t *)p)[i];
    default: return NAN;
    }
}

RtCompare rt_compare_elems(int32_t dtype, const void *out, const void *ref, int64_t n)
{
    if (dtype == DCRT_F32)
        return rt_compare(out, ref, n);
    RtCompare c = {.first = -1};
    for (int64_t i = 0; i < n; i++) {
        int64_t a = dtype == DCRT_I64 ? ((const int64_t *)out)[i] : (int64_t)rt_elem(dtype, out, i);
        int64_t r = dtype == DCRT_I64 ? ((const int64_t *)ref)[i] : (int64_t)rt_elem(dtype, ref, i);
        if (a != r) {
            if (c.first < 0)
                c.first = i;
            c.nbad++;
            double d = fabs((double)a - (double)r);
            if (d > c.max_abs)
                c.max_abs = d;
        }
    }
    return c;
}
