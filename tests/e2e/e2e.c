/* e2e: compiled kernels against the reference interpreter, over shapes.
 *
 *   e2e [--quick] [--targets=cpu,loops,emu] PROGRAM.tex (DC_E2E_QUICK=1: --quick)
 *
 * For every shape of the sweep (every value of a dim whose range has at
 * most 64 values, else a sample that includes both ends, values that are
 * multiples of no tile, and values above the range when the program
 * accepts them), the program is lowered with several micro-kernels (the
 * defaults, and ragged ones such as 7x5 register tiles with a reduction
 * chunk of 3, staged and not, vectors along the reduction, the reduction
 * split in three launches, on the emulator also with the parts added
 * atomically where the epilogue allows, on the CPU the outer-product kernel
 * whose panels a launch of their own packs; and the defaults with every elementwise
 * intermediate fused the other way from the cost model's choice, as the
 * tuner's search or --fuse may ask), run on each target through its executor
 * (exec/: the CPU object JIT-compiled, the loop interpreter, the emulator)
 * with seeded inputs and compared element by element with the reference
 * interpreter. Ends with "N passed, N failed"; exit 1 on any
 * failure. The emu target (the GPU lowering on the SIMT emulator) is slow:
 * when it is the only target, each dim takes only lo, lo + 1, a value that
 * is a multiple of no tile, and hi + 1 when accepted; with --quick, shapes
 * whose tensors exceed those at lo by over 2^19 elements are skipped (the
 * reference interpreter takes longest).
 */
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_SHAPES = 256, MAX_VALUES = 96, NVARIANTS = 8, FLIPPED = 5, ATOMIC = 6, PACKED = 7 };

typedef struct Shapes {
    int n, ndims;
    int64_t v[MAX_SHAPES][8];
} Shapes;

static int npassed, nfailed;
/* The reference's message when a gather's index is out of range for the
 * seeded inputs of the shape at hand ("" when it ran), from " of ": every
 * target must then fail naming the same tensor, axis, range and tensor
 * being computed (which index and element it meets first depends on the
 * schedule when several are out). */
static char gather_error[512];
static bool quick, small;
static RtPool *emu_pool;

/* The values a sweep tries for one dim. */
static int dim_values(const Var *d, int64_t *out)
{
    int n = 0;
    int64_t span = d->hi - d->lo + 1;
    if (small) {
        static const int64_t ragged[] = {37, 13, 7, 3};
        out[n++] = d->lo;
        if (d->lo + 1 <= d->hi)
            out[n++] = d->lo + 1;
        for (size_t i = 0; i < sizeof ragged / sizeof *ragged; i++)
            if (ragged[i] >= d->lo + 2 && ragged[i] <= d->hi) {
                out[n++] = ragged[i];
                break;
            }
        if (d->max > d->hi)
            out[n++] = d->hi + 1;
        return n;
    }
    if (span <= 64 && !quick) {
        for (int64_t v = d->lo; v <= d->hi; v++)
            out[n++] = v;
    } else {
        static const int64_t probes[] = {0, 1, 2, 3, 5, 7, 13, 16, 17, 31, 33, 47, 64, 65, 77, 100, 127};
        for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
            int64_t v = d->lo + probes[i];
            if (v <= d->hi && (!quick || i % 3 == 0))
                out[n++] = v;
        }
        if (out[n - 1] != d->hi - 1 && d->hi - 1 > d->lo)
            out[n++] = d->hi - 1;
        if (out[n - 1] != d->hi)
            out[n++] = d->hi;
    }
    if (d->max > d->hi) { /* sizes above the declared range must work too */
        out[n++] = d->hi + 1;
        if (!quick)
            out[n++] = d->hi + 13;
    }
    return n;
}

/* One dim swept at a time, the others at a small value; then corners. */
static void make_shapes(const TeProgram *p, Shapes *s)
{
    int64_t base[8], vals[MAX_VALUES];
    s->n = 0;
    s->ndims = p->ndims;
    for (int i = 0; i < p->ndims; i++)
        base[i] = p->dims[i]->lo + 2 <= p->dims[i]->hi ? p->dims[i]->lo + 2 : p->dims[i]->lo;
    if (p->ndims == 0) {
        s->n = 1;
        return;
    }
    for (int d = 0; d < p->ndims; d++) {
        int nv = dim_values(p->dims[d], vals);
        for (int j = 0; j < nv && s->n < MAX_SHAPES; j++) {
            memcpy(s->v[s->n], base, sizeof base);
            s->v[s->n++][d] = vals[j];
        }
    }
    if (p->ndims > 1 && s->n < MAX_SHAPES - 2) { /* all at lo, all at hi */
        for (int i = 0; i < p->ndims; i++) {
            s->v[s->n][i] = p->dims[i]->lo;
            s->v[s->n + 1][i] = p->dims[i]->hi;
        }
        s->n += small ? 1 : 2;
    }
}

/* Sets (flip) or clears the Fuse of every elementwise intermediate of p:
 * the opposite of what the cost model decides. Returns how many it set. */
static int flip_fusion(TeProgram *p, bool flip)
{
    int n = 0;
    Expr **bodies = calloc((size_t)p->ntensors + 1, sizeof *bodies);
    bool *mat = calloc((size_t)p->ntensors + 1, sizeof *mat);
    for (int i = 0; i < p->ntensors; i++)
        p->tensors[i]->fuse = FUSE_COST;
    pass_inline(p, bodies, mat);
    for (int i = 0; flip && i < p->ntensors; i++)
        if (pass_fuse_choosable(p->tensors[i])) {
            p->tensors[i]->fuse = mat[i] ? FUSE_INLINE : FUSE_MATERIALIZE;
            n++;
        }
    free(bodies);
    free(mat);
    return n;
}

/* Micro-kernel variant v for every stage: 0 and FLIPPED = defaults (NULL). */
static MicroKernel *variant(const TeProgram *p, int v, bool gpu)
{
    if (v == 0 || v == FLIPPED)
        return NULL;
    MicroKernel *mks = calloc((size_t)p->ntensors + 1, sizeof *mks);
    for (int i = 0; i < p->ntensors; i++) {
        MicroKernel *m = &mks[i];
        int n = p->tensors[i]->rank;
        for (int a = 0; a < MK_MAX_AXES; a++)
            m->threads[a] = m->tile[a] = 1;
        m->unroll = m->raster = 1;
        m->vec = 1;
        if (v == 1) { /* 7x5 tiles, 3 threads x 2, a chunk of 3 unrolled, staged;
                         * on the GPU double-buffered, 2 threads along the
                         * reduction */
            if (n >= 1) { m->tile[n - 1] = 5; m->threads[n - 1] = 2; }
            if (n >= 2) { m->tile[n - 2] = 7; m->threads[n - 2] = 3; }
            m->rchunk = 3;
            m->unroll = 3;
            m->stage = true;
            m->rthreads = 2;
            m->pipeline = true;
        } else if (v == 2) { /* vectors of 4 along the innermost axis in runs
                                * threads x 4 apart, not staged, chunks of 6
                                * unrolled by 2; on the GPU the blocks in
                                * groups of 2 rows */
            if (n >= 1) { m->tile[n - 1] = 8; m->threads[n - 1] = 3; }
            if (n >= 2) { m->tile[n - 2] = 3; }
            m->rchunk = 6;
            m->unroll = 2;
            m->strided = true;
            m->vec = 4;
            m->raster = gpu ? 2 : 1;
        } else if (v == 3) { /* vectors of 8 along the reduction, chunk 24; on the
                                * GPU 4 threads along it (chunks of 32) */
            if (n >= 1) { m->tile[n - 1] = 3; m->threads[n - 1] = 5; }
            m->rchunk = 24;
            m->vec = 8;
            m->vaxis = MK_VEC_REDUCE;
            m->rthreads = 4;
        } else if (v == PACKED) { /* CPU only: the outer-product kernel whose panels
                                     * (3 x 8 wide) a launch of their own packs, 5 x 8
                                     * tiles in vectors of 4, chunks of 12 */
            if (n >= 1) { m->tile[n - 1] = 8; m->threads[n - 1] = 3; }
            if (n >= 2) { m->tile[n - 2] = 5; m->threads[n - 2] = 3; }
            m->rchunk = 12;
            m->vec = 4;
            m->pack = true;
        } else { /* the reduction split three ways, 2x3 tiles, chunks of 5;
                  * on the GPU staged and double-buffered through registers
                  * (lowered as for sm_75, without cp.async); ATOMIC (GPU
                  * only): the parts added into the output atomically */
            if (n >= 1) { m->tile[n - 1] = 3; m->threads[n - 1] = 2; }
            if (n >= 2) m->tile[n - 2] = 2;
            m->rchunk = 5;
            m->split = 3;
            m->stage = m->pipeline = gpu;
            m->atomic = v == ATOMIC;
        }
    }
    return mks;
}

static void report(bool ok, const char *file, const char *target, int v, const TeProgram *p,
                   const int64_t *dims, const char *what)
{
    if (ok) {
        npassed++;
        return;
    }
    nfailed++;
    fprintf(stderr, "FAIL %s target=%s variant=%d", file, target, v);
    for (int i = 0; i < p->ndims; i++)
        fprintf(stderr, " %s=%lld", p->dims[i]->name, (long long)dims[i]);
    fprintf(stderr, ": %s\n", what);
}

/* Runs one shape on one target and compares with ref. */
static void check_shape(const char *file, const char *target, int v, const TeProgram *p,
                        const LoopProgram *lp, void *compiled, const int64_t *dims,
                        float **ref)
{
    float **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
    char err[512] = "";
    for (int i = 0; i < p->ntensors; i++) {
        int64_t n = ir_te_numel(p->tensors[i], dims);
        if (p->tensors[i]->kind == TK_INPUT) {
            bufs[i] = ref[i];
            continue;
        }
        int64_t bytes = ir_te_bytes(p->tensors[i], dims);
        bufs[i] = malloc(bytes ? (size_t)bytes : 8);
        if (p->tensors[i]->dtype == DT_F32)
            for (int64_t j = 0; j < n; j++)
                bufs[i][j] = NAN; /* unwritten outputs must not pass */
        else
            memset(bufs[i], 0x5a, (size_t)bytes); /* nor integers, nor bools (0x5a is not one) */
    }
    int rc;
    if (strcmp(target, "loops") == 0)
        rc = ex_loops_run(lp, dims, bufs, err, sizeof err);
    else if (strcmp(target, "emu") == 0)
        rc = ex_emu_run(compiled, emu_pool, dims, bufs, err, sizeof err);
    else
        rc = ex_cpu_run(compiled, dims, bufs, NULL, err, sizeof err);
    if (gather_error[0]) {
        bool ok = rc != 0 && strstr(err, gather_error);
        char what[1200];
        snprintf(what, sizeof what, "the reference failed with \"%s\", the target %s%s", gather_error,
                 rc ? "with " : "ran", rc ? err : "");
        report(ok, file, target, v, p, dims, what);
    } else if (rc != 0) {
        report(false, file, target, v, p, dims, err);
    } else {
        for (int i = 0; i < p->ntensors; i++) {
            const Tensor *t = p->tensors[i];
            if (t->kind != TK_OUTPUT)
                continue;
            int32_t dt = (int32_t)t->dtype;
            RtCompare c = rt_compare_elems(dt, bufs[i], ref[i], ir_te_numel(t, dims));
            bool ok = c.nbad == 0;
            int64_t bad = ok ? 0 : c.first;
            char what[256];
            snprintf(what, sizeof what, "%s[%lld] = %.9g, reference %.9g", t->name,
                     (long long)bad, rt_elem(dt, bufs[i], bad), rt_elem(dt, ref[i], bad));
            report(ok, file, target, v, p, dims, what);
        }
    }
    for (int i = 0; i < p->ntensors; i++)
        if (p->tensors[i]->kind != TK_INPUT)
            free(bufs[i]);
    free(bufs);
}

/* The reference results for one shape: inputs seeded, the rest computed. */
static float **reference(const TeProgram *p, const int64_t *dims)
{
    float **ref = calloc((size_t)p->ntensors, sizeof *ref);
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        int64_t n = ir_te_numel(t, dims), bytes = ir_te_bytes(t, dims);
        ref[i] = malloc(bytes ? (size_t)bytes : 8);
        if (t->data)
            memcpy(ref[i], t->data, (size_t)bytes);
        else if (t->kind == TK_INPUT)
            rt_rng_fill_elems(7, rt_rng_hash(t->name), (int32_t)t->dtype, ref[i], (size_t)n);
    }
    char err[512];
    gather_error[0] = 0;
    if (ir_interp(p, dims, ref, err, sizeof err) != 0) {
        const char *of = strstr(err, " of "), *at = of ? strchr(of, '[') : NULL;
        if (strncmp(err, "index ", 6) == 0 && at) {
            snprintf(gather_error, sizeof gather_error, "%.*s", (int)(at - of + 1), of);
            return ref;
        }
        fprintf(stderr, "reference failed: %s\n", err);
        exit(1);
    }
    return ref;
}

static int64_t work(const TeProgram *p, const int64_t *dims)
{
    int64_t w = 0;
    for (int i = 0; i < p->ntensors; i++)
        w += ir_te_numel(p->tensors[i], dims);
    return w;
}

int main(int argc, char **argv)
{
    const char *file = NULL, *targets = "cpu,loops";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strncmp(argv[i], "--targets=", 10) == 0)
            targets = argv[i] + 10;
        else
            file = argv[i];
    }
    if (!file) {
        fprintf(stderr, "usage: e2e [--quick] [--targets=cpu,loops,emu] PROGRAM.tex\n");
        return 2;
    }
    if (getenv("DC_E2E_QUICK") && strcmp(getenv("DC_E2E_QUICK"), "0") != 0)
        quick = true; /* the sanitizer build runs the short sweep */
    FeUnit u;
    char err[512];
    int lrc = fe_load(file, &u, err, sizeof err);
    if (lrc != 0) {
        if (lrc < 0)
            fprintf(stderr, "%s\n", err);
        else
            ir_diags_print(&u.diags, stderr);
        return 1;
    }
    TeProgram *p = u.prog;
    bool want_cpu = strstr(targets, "cpu") != NULL, want_loops = strstr(targets, "loops") != NULL;
    bool want_emu = strstr(targets, "emu") != NULL;
    small = want_emu && !want_cpu && !want_loops;
    Shapes shapes;
    make_shapes(p, &shapes);
    TargetInfo gpu = pass_target_info(PT_GPU), gpu_regs = gpu;
    gpu_regs.async_copy = false;
    LoopProgram *glps[NVARIANTS] = {0};
    ExEmu *eps[NVARIANTS] = {0};
    if (want_emu && !(emu_pool = rt_pool_new(0))) {
        fprintf(stderr, "cannot start the thread pool\n");
        return 1;
    }
    TargetInfo ti = pass_target_info(PT_CPU);
    LoopProgram *lps[NVARIANTS] = {0};
    ExCpu *cps[NVARIANTS] = {0};
    bool skip[NVARIANTS] = {[ATOMIC] = !want_emu}; /* atomic split-K: GPU only */
    for (int v = 0; v < NVARIANTS; v++) {
        if (flip_fusion(p, v == FLIPPED) == 0 && v == FLIPPED)
            skip[v] = true; /* nothing to flip: variant 0 again */
        if (skip[v])
            continue;
        MicroKernel *mks;
        if (v != ATOMIC) { /* its CPU form is variant 4's */
            mks = variant(p, v, false);
            lps[v] = pass_run_pipeline(p, mks, &ti, &(PipelineOpts){.verify_each = true}, err,
                                       sizeof err);
            free(mks);
            if (!lps[v] || (want_cpu && !(cps[v] = ex_cpu_compile(lps[v], err, sizeof err)))) {
                fprintf(stderr, "FAIL %s variant=%d: %s\n", file, v, err);
                return 1;
            }
        }
        if (!want_emu || v == PACKED)
            continue;
        mks = variant(p, v, true);
        glps[v] = pass_run_pipeline(p, mks, v == 4 || v == ATOMIC ? &gpu_regs : &gpu,
                                    &(PipelineOpts){.verify_each = true}, err, sizeof err);
        free(mks);
        if (!glps[v] || !(eps[v] = ex_emu_compile(glps[v], err, sizeof err))) {
            fprintf(stderr, "FAIL %s target=emu variant=%d: %s\n", file, v, err);
            return 1;
        }
    }
    flip_fusion(p, false);
    int64_t lo[8];
    for (int i = 0; i < p->ndims; i++)
        lo[i] = p->dims[i]->lo;
    for (int s = 0; s < shapes.n; s++) {
        const int64_t *dims = shapes.v[s];
        if (!ir_check_dims(p, dims, err, sizeof err))
            continue;
        /* the short sweep skips shapes far larger than the smallest: the
         * reference interpreter is the slow part (the full sweep runs them) */
        if (quick && work(p, dims) - work(p, lo) > (small ? 1 << 19 : 1 << 21))
            continue;
        float **ref = reference(p, dims);
        for (int v = 0; v < NVARIANTS; v++) {
            if (skip[v])
                continue;
            /* the CPU form of ATOMIC is variant 4's */
            if (want_cpu && v != ATOMIC)
                check_shape(file, "cpu", v, p, lps[v], cps[v], dims, ref);
            /* the loop interpreter is slow: small shapes only */
            if (want_loops && v != ATOMIC &&
                (!want_cpu || (work(p, dims) < 200000 && s % 4 == 0)))
                check_shape(file, "loops", v, p, lps[v], NULL, dims, ref);
            if (want_emu && v != PACKED)
                check_shape(file, "emu", v, p, glps[v], eps[v], dims, ref);
        }
        for (int i = 0; i < p->ntensors; i++)
            free(ref[i]);
        free(ref);
    }
    for (int v = 0; v < NVARIANTS; v++) {
        ex_cpu_destroy(cps[v]);
        ex_emu_destroy(eps[v]);
    }
    rt_pool_destroy(emu_pool);
    fe_unload(&u);
    printf("%s: %d passed, %d failed\n", file, npassed, nfailed);
    return nfailed ? 1 : 0;
}
