/* Embedding dietcode-c's ONNX importer: import a model file with ranges
 * for its symbolic dims, compile it with the default schedule, JIT it
 * for this CPU and check a call at a few sizes against the reference
 * interpreter.
 *
 *   embed_onnx MODEL.onnx NAME=LO..HI[,NAME=LO..HI...]
 *
 * Each dim takes its range's low end, its high end and one past it (the
 * kernels hold for sizes above the range). Float inputs come from the
 * seeded generator; integer and bool inputs alternate 0 and 1, indices
 * any embedding table or mask accepts. Built and run by the tests
 * (test "embed.onnx", and the install test against the installed
 * library); exit status 0 when every size matches.
 */
#include "dietcode/dietcode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Zeroed buffers for every tensor of p at dims, inputs filled. */
static void **alloc_buffers(const TeProgram *p, const int64_t *dims)
{
    void **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
    for (int i = 0; bufs && i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->data) { /* a constant: the program's own */
            bufs[i] = (void *)(uintptr_t)t->data;
            continue;
        }
        int64_t n = ir_te_numel(t, dims), bytes = ir_te_bytes(t, dims);
        if (!(bufs[i] = calloc(1, bytes ? (size_t)bytes : 8)))
            exit(1);
        if (t->kind != TK_INPUT)
            continue;
        if (t->dtype == DT_F32)
            rt_rng_fill(42, rt_rng_hash(t->name), bufs[i], (size_t)n);
        else
            for (int64_t e = 0; e < n; e++)
                switch (t->dtype) {
                case DT_I64: ((int64_t *)bufs[i])[e] = e % 2; break;
                case DT_I32: ((int32_t *)bufs[i])[e] = (int32_t)(e % 2); break;
                default: ((uint8_t *)bufs[i])[e] = (uint8_t)(e % 2); break;
                }
    }
    return bufs;
}

static void free_buffers(const TeProgram *p, void **bufs)
{
    for (int i = 0; i < p->ntensors; i++)
        if (!p->tensors[i]->data)
            free(bufs[i]);
    free(bufs);
}

/* Element e of t's buffer b, of t's element type. */
static double elem(const Tensor *t, const void *b, int64_t e)
{
    switch (t->dtype) {
    case DT_F32: return ((const float *)b)[e];
    case DT_I64: return (double)((const int64_t *)b)[e];
    case DT_I32: return ((const int32_t *)b)[e];
    default: return ((const uint8_t *)b)[e];
    }
}

/* The largest difference between the outputs of a and b. */
static double worst_output(const TeProgram *p, const int64_t *dims, void **a, void **b)
{
    double worst = 0;
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind != TK_OUTPUT)
            continue;
        int64_t n = ir_te_numel(t, dims);
        for (int64_t e = 0; e < n; e++) {
            double x = elem(t, a[i], e), y = elem(t, b[i], e);
            worst = isnan(x) != isnan(y) ? INFINITY : fmax(worst, fabs(x - y));
        }
    }
    return worst;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: embed_onnx MODEL.onnx NAME=LO..HI[,NAME=LO..HI...]\n");
        return 2;
    }
    char err[1024];
    FeDimRange ranges[16];
    int nranges = fe_parse_dim_ranges(argv[2], ranges, 16, err, sizeof err);
    if (nranges < 0) {
        fprintf(stderr, "embed_onnx: %s\n", err);
        return 2;
    }
    FeUnit u;
    int rc = fe_load_onnx(argv[1], ranges, nranges, &u, err, sizeof err);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "embed_onnx: %s\n", err);
        else
            ir_diags_print(&u.diags, stderr);
        fe_unload(&u);
        return 1;
    }
    TeProgram *p = u.prog;
    if (p->ndims > 16) {
        fprintf(stderr, "embed_onnx: more than 16 dims\n");
        fe_unload(&u);
        return 1;
    }
    printf("%s: %d dims, %d tensors\n", p->name, p->ndims, p->ntensors);

    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lp = pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err);
    ExCpu *cp = lp ? ex_cpu_compile(lp, err, sizeof err) : NULL;
    if (!cp) {
        fprintf(stderr, "embed_onnx: %s\n", err);
        fe_unload(&u);
        return 1;
    }
    int failures = 0, checked = 0;
    for (int at = 0; at < 3; at++) {
        int64_t dims[16];
        for (int d = 0; d < p->ndims; d++) {
            const Var *v = p->dims[d];
            dims[d] = at == 0 ? v->lo : at == 1 ? v->hi : v->hi + 1;
        }
        void **got = alloc_buffers(p, dims), **ref = alloc_buffers(p, dims);
        if (!got || !ref || ex_cpu_run(cp, dims, (float *const *)got, NULL, err, sizeof err) != 0 ||
            ir_interp(p, dims, (float **)ref, err, sizeof err) != 0) {
            fprintf(stderr, "embed_onnx: %s\n", err);
            return 1;
        }
        double worst = worst_output(p, dims, got, ref);
        bool ok = worst < 1e-4;
        failures += !ok;
        checked++;
        printf("dims");
        for (int d = 0; d < p->ndims; d++)
            printf(" %s=%lld", p->dims[d]->name, (long long)dims[d]);
        printf(": max |dcc - reference| = %.2g  %s\n", worst, ok ? "ok" : "MISMATCH");
        free_buffers(p, got);
        free_buffers(p, ref);
    }
    ex_cpu_destroy(cp);
    fe_unload(&u);
    printf("%d passed, %d failed\n", checked - failures, failures);
    return failures ? 1 : 0;
}
