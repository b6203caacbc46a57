/* The reference interpreter on small programs whose results were worked
 * out by hand: it is the ground truth of every other numerical test, so it
 * is checked against arithmetic, not against itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dietcode/frontend.h"
#include "dietcode/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Compiles src, runs it with the given dims and inputs (in input order) and
 * returns the buffer of the output named out (malloc'd). */
static float *run(const char *src, const int64_t *dims, const float *const *inputs,
                  const char *out)
{
    FeUnit u;
    if (fe_load_text("test.tex", "t", src, &u) != 0)
        ir_diags_print(&u.diags, stderr);
    TeProgram *p = u.prog;
    assert_non_null(p);
    float **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
    int in = 0, want = -1;
    for (int i = 0; i < p->ntensors; i++) {
        int64_t n = ir_te_numel(p->tensors[i], dims);
        bufs[i] = calloc((size_t)(n ? n : 1), sizeof(float));
        if (p->tensors[i]->kind == TK_INPUT)
            memcpy(bufs[i], inputs[in++], sizeof(float) * (size_t)n);
        if (strcmp(p->tensors[i]->name, out) == 0)
            want = i;
    }
    char err[256];
    assert_int_equal(ir_interp(p, dims, bufs, err, sizeof err), 0);
    assert_true(want >= 0);
    float *r = bufs[want];
    for (int i = 0; i < p->ntensors; i++)
        if (i != want)
            free(bufs[i]);
    free(bufs);
    fe_unload(&u);
    return r;
}

static void expect(const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        if (fabsf(got[i] - want[i]) > 1e-6f * (1 + fabsf(want[i])))
            fail_msg("element %d: got %.9g, expected %.9g", i, got[i], want[i]);
}

static void test_dense(void **state)
{
    (void)state;
    const char *src = "dim T in 1..4\ninput X[T, 3] f32\ninput W[2, 3] f32\ninput b[2] f32\n"
                      "output Y[i: T, j: 2] = sum[k: 3](X[i, k] * W[j, k]) + b[j]\n";
    float X[] = {1, 2, 3, 4, 5, 6}, W[] = {1, 0, 1, 0, 1, 0}, b[] = {10, 20};
    const float *in[] = {X, W, b};
    int64_t T = 2;
    float *y = run(src, &T, in, "Y");
    expect(y, (float[]){14, 22, 20, 25}, 4);
    free(y);
}

static void test_padded_window(void **state)
{
    (void)state;
    const char *src = "input I[3] f32\ninput F[3] f32\n"
                      "output O[x: 3] = sum[r: 3](I?[x + r - 1] * F[r])\n";
    float I[] = {1, 2, 3}, F[] = {1, 1, 1};
    const float *in[] = {I, F};
    float *o = run(src, NULL, in, "O");
    expect(o, (float[]){3, 6, 5}, 3);
    free(o);
}

static void test_softmax(void **state)
{
    (void)state;
    const char *src = "input X[1, 2] f32\nM[i: 1] = max[j: 2](X[i, j])\n"
                      "E[i: 1, j: 2] = exp(X[i, j] - M[i])\nZ[i: 1] = sum[j: 2](E[i, j])\n"
                      "output P[i: 1, j: 2] = E[i, j] / Z[i]\n";
    float X[] = {0, logf(3)};
    const float *in[] = {X};
    float *p = run(src, NULL, in, "P");
    expect(p, (float[]){0.25f, 0.75f}, 2);
    free(p);
}

static void test_integer_arithmetic(void **state)
{
    (void)state;
    const char *src = "output D[i: 5] = f32((i - 2) / 2)\noutput M[i: 5] = f32((i - 2) % 3)\n"
                      "output S[i: 5] = f32(i * 3 - 7)\n";
    float *d = run(src, NULL, NULL, "D"), *m = run(src, NULL, NULL, "M"), *s = run(src, NULL, NULL, "S");
    expect(d, (float[]){-1, -1, 0, 0, 1}, 5); /* floor division */
    expect(m, (float[]){1, 2, 0, 1, 2}, 5);   /* modulo takes the divisor's sign */
    expect(s, (float[]){-7, -4, -1, 2, 5}, 5);
    free(d);
    free(m);
    free(s);
}

static void test_reductions(void **state)
{
    (void)state;
    const char *src = "output P[] = prod[k: 4](f32(k + 1))\n"
                      "output A[] = max[k: 4](f32(k * k - 3 * k))\n"
                      "output B[] = min[k: 4](f32(k * k - 3 * k))\n"
                      "output G[] = sum[i: 3, j: 4](f32(i * 10 + j))\n"
                      "output N[] = sum[i: 3](max[j: 2](f32(i - j)))\n";
    float *p = run(src, NULL, NULL, "P"), *a = run(src, NULL, NULL, "A"),
          *b = run(src, NULL, NULL, "B"), *g = run(src, NULL, NULL, "G"),
          *n = run(src, NULL, NULL, "N");
    expect(p, (float[]){24}, 1);
    expect(a, (float[]){0}, 1);  /* 0, -2, -2, 0 */
    expect(b, (float[]){-2}, 1);
    expect(g, (float[]){138}, 1); /* 4 * (0 + 10 + 20) + 3 * (0 + 1 + 2 + 3) */
    expect(n, (float[]){3}, 1);   /* max(0,-1) + max(1,0) + max(2,1) */
    free(p);
    free(a);
    free(b);
    free(g);
    free(n);
}

static void test_conditions(void **state)
{
    (void)state;
    const char *src = "output S[i: 4] = select(i > 0 && i < 3 || i == 3, 1.0, 0.0)\n"
                      "output N[i: 4] = select(!(i == 1), 1.0, 0.0)\n"
                      "output C[i: 4] = f32(i >= 2) + f32(i != 0) * 10\n";
    float *s = run(src, NULL, NULL, "S"), *n = run(src, NULL, NULL, "N"), *c = run(src, NULL, NULL, "C");
    expect(s, (float[]){0, 1, 1, 1}, 4);
    expect(n, (float[]){1, 0, 1, 1}, 4);
    expect(c, (float[]){0, 10, 11, 11}, 4);
    free(s);
    free(n);
    free(c);
}

static void test_scalars_and_dims(void **state)
{
    (void)state;
    const char *src = "dim T in 1..8\ninput s[] f32\noutput Y[i: T] = s * f32(i) + f32(T)\n"
                      "output Z[] = s[] * 2\n";
    float s = 2.5f;
    const float *in[] = {&s};
    int64_t T = 3;
    float *y = run(src, &T, in, "Y"), *z = run(src, &T, in, "Z");
    expect(y, (float[]){3, 5.5f, 8}, 3);
    expect(z, (float[]){5}, 1);
    free(y);
    free(z);
}

static void test_math(void **state)
{
    (void)state;
    const char *src =
        "output M[i: 13] = select(i == 0, gelu(0.0), select(i == 1, gelu(1.0), select(i == 2, "
        "sigmoid(0.0), select(i == 3, relu(-1.0), select(i == 4, rsqrt(4.0), select(i == 5, "
        "pow(2.0, 10.0), select(i == 6, abs(-3.0), select(i == 7, tanh(0.0), select(i == 8, "
        "erf(0.0), select(i == 9, log(1.0), select(i == 10, exp(0.0), select(i == 11, sqrt(9.0), "
        "f32(i32(-2.7)) + f32(i32(2.7)) * 10))))))))))))\n";
    float *m = run(src, NULL, NULL, "M");
    expect(m, (float[]){0, 0.841344746f, 0.5f, 0, 0.5f, 1024, 3, 0, 0, 0, 1, 3, 18}, 13);
    free(m);
}

static void test_bad_sizes(void **state)
{
    (void)state;
    FeUnit u;
    assert_int_equal(
        fe_load_text("t.tex", "t", "dim T in 2..4\ninput X[T] f32\noutput Y[i: T] = X[i]\n", &u), 0);
    TeProgram *p = u.prog;
    int64_t T = 1;
    char err[256];
    float x[4], y[4], *bufs[] = {x, y};
    assert_int_equal(ir_interp(p, &T, bufs, err, sizeof err), -1);
    assert_non_null(strstr(err, "below the declared range"));
    fe_unload(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense),           cmocka_unit_test(test_padded_window),
        cmocka_unit_test(test_softmax),         cmocka_unit_test(test_integer_arithmetic),
        cmocka_unit_test(test_reductions),      cmocka_unit_test(test_conditions),
        cmocka_unit_test(test_scalars_and_dims), cmocka_unit_test(test_math),
        cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
