/* tests/unit/test_compare.c: rt_compare, the rule by which dcc run --check,
 * the e2e sweep and the AOT clients judge a result against the reference.
 * Infinities must match exactly (the relative tolerance of an infinite
 * reference would accept anything), NaN only NaN; finite values within the
 * tolerance on the tensor's scale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "dietcode/runtime.h"

static int64_t nbad1(float out, float ref)
{
    return rt_compare(&out, &ref, 1).nbad;
}

static void infinities_match_exactly(void **state)
{
    (void)state;
    assert_int_equal(nbad1(INFINITY, INFINITY), 0);
    assert_int_equal(nbad1(-INFINITY, -INFINITY), 0);
    assert_int_equal(nbad1(1e38f, INFINITY), 1); /* the contracted a*b+c of issue 31 */
    assert_int_equal(nbad1(0.0f, INFINITY), 1);
    assert_int_equal(nbad1(-INFINITY, INFINITY), 1);
    assert_int_equal(nbad1(INFINITY, 3e38f), 1);
    assert_int_equal(nbad1(-INFINITY, -1.0f), 1);
}

static void nan_only_where_the_reference_has_nan(void **state)
{
    (void)state;
    assert_int_equal(nbad1(NAN, NAN), 0);
    assert_int_equal(nbad1(0.0f, NAN), 1);
    assert_int_equal(nbad1(INFINITY, NAN), 1);
    assert_int_equal(nbad1(NAN, 1.0f), 1);
    assert_int_equal(nbad1(NAN, INFINITY), 1);
}

static void finite_values_within_the_tolerance(void **state)
{
    (void)state;
    assert_int_equal(nbad1(1000.5f, 1000.0f), 0);  /* 1e-3 relative */
    assert_int_equal(nbad1(1002.0f, 1000.0f), 1);
    assert_int_equal(nbad1(1e-6f, 0.0f), 0);       /* 1e-5 absolute */
    assert_int_equal(nbad1(1e-4f, 0.0f), 1);
    /* the scale is the tensor's largest finite value: zeros beside 1e4 */
    float out[3] = {0.05f, 1e4f, INFINITY}, ref[3] = {0.0f, 1e4f, INFINITY};
    RtCompare c = rt_compare(out, ref, 3);
    assert_int_equal(c.nbad, 0);
    assert_true(c.max_abs > 0.049 && c.max_abs < 0.051);
    out[0] = 0.5f;
    c = rt_compare(out, ref, 3);
    assert_int_equal(c.nbad, 1);
    assert_int_equal(c.first, 0);
}

static void first_and_count(void **state)
{
    (void)state;
    float out[5] = {1, 2, INFINITY, 4, NAN}, ref[5] = {1, 2, 3, 4, 5};
    RtCompare c = rt_compare(out, ref, 5);
    assert_int_equal(c.nbad, 2);
    assert_int_equal(c.first, 2);
    c = rt_compare(out, ref, 0);
    assert_int_equal(c.nbad, 0);
    assert_int_equal(c.first, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(infinities_match_exactly),
        cmocka_unit_test(nan_only_where_the_reference_has_nan),
        cmocka_unit_test(finite_values_within_the_tolerance),
        cmocka_unit_test(first_and_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
