/* dcc run: one call of the program on a target, with .npy or seeded
 * inputs; --check against the reference, --bench, --profile. */
#include "dcc.h"

#include <math.h>

static void shape_str(char *buf, size_t n, int rank, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
}

static void tensor_shape(const Tensor *t, const int64_t *dims, int64_t *shape)
{
    for (int i = 0; i < t->rank; i++)
        shape[i] = ir_eval_dims(t->shape[i], dims);
}

/* One buffer per tensor; inputs read from .npy or generated. */
static float **make_buffers(const TeProgram *p, const int64_t *dims, const Args *o)
{
    const NamedArgs *inputs = &o->named[O_INPUT];
    uint64_t seed = o->val[O_SEED] ? (uint64_t)o->num[O_SEED] : 1;
    float **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
    /* generated integers index every table in range (a model's token ids) */
    int64_t bound = ir_te_index_bound(p, dims, 1);
    for (int i = 0; i < inputs->n; i++) {
        const Tensor *t = ir_te_find(p, inputs->a[i].name);
        if (!t || t->kind != TK_INPUT)
            fail("--input %s: the program has no input named '%s'", inputs->a[i].name,
                 inputs->a[i].name);
        if (t->data)
            fail("--input %s: '%s' is a constant (its values come from %s)", inputs->a[i].name,
                 t->name, t->source);
    }
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        int64_t n = ir_te_numel(t, dims);
        const char *path = NULL;
        for (int j = 0; j < inputs->n; j++)
            if (strcmp(inputs->a[j].name, t->name) == 0)
                path = inputs->a[j].value;
        if (t->data) { /* the program's own; never freed here */
            bufs[i] = (void *)(uintptr_t)t->data;
            continue;
        }
        if (!path) {
            int64_t bytes = ir_te_bytes(t, dims);
            bufs[i] = malloc(bytes ? (size_t)bytes : 8);
            if (!bufs[i])
                fail("cannot allocate %lld bytes for tensor %s", (long long)bytes, t->name);
            if (t->kind == TK_INPUT) {
                rt_rng_fill_elems(seed, rt_rng_hash(t->name), (int32_t)t->dtype, bufs[i], (size_t)n);
                ir_bound_indices(t->dtype, bufs[i], n, bound);
            }
            continue;
        }
        RtArray a;
        char err[512];
        if (rt_npy_read(path, &a, err, sizeof err) != 0)
            fail("%s", err);
        if (a.dtype != (int32_t)t->dtype)
            fail("%s: the file holds %s, but input %s is %s", path, rt_dtype_name(a.dtype),
                 t->name, ir_dtype_name(t->dtype));
        int64_t want[16];
        tensor_shape(t, dims, want);
        bool same = a.rank == t->rank;
        for (int k = 0; same && k < t->rank; k++)
            same = a.shape[k] == want[k];
        if (!same) {
            char got[128], exp[128];
            shape_str(got, sizeof got, a.rank, a.shape);
            shape_str(exp, sizeof exp, t->rank, want);
            fail("%s: shape %s does not match input %s, which is %s for these sizes", path, got,
                 t->name, exp);
        }
        bufs[i] = a.data;
    }
    return bufs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What a run executes: the program and, for compiled targets, its lowering
 * and executor (exec/). */
typedef struct Exec {
    TeProgram *p;
    LoopProgram *lp;  /* cpu, loops, emu, cuda */
    ExCpu *cpu;
    ExEmu *emu;
    RtPool *pool;     /* emu: blocks over it */
    ExCuda *cuda;
    uint64_t *dbuf;   /* cuda: per tensor id, inputs and outputs */
    float ms;         /* cuda: the last run's time between CUDA events */
} Exec;


/* Inputs are copied to the device once, outputs back once after the runs. */
static void cuda_buffers(Exec *x, const int64_t *dims, float **bufs, bool to_device)
{
    char err[512];
    const TeProgram *te = x->p;
    if (to_device)
        x->dbuf = calloc((size_t)te->ntensors + 1, sizeof *x->dbuf);
    for (int i = 0; i < te->ntensors; i++) {
        const Tensor *t = te->tensors[i];
        if (t->kind == TK_TEMP || t->data) /* constants: the runtime's, once per context */
            continue;
        size_t bytes = (size_t)ir_te_bytes(t, dims);
        if (to_device && (rt_cuda_alloc(&x->dbuf[i], bytes, err, sizeof err) != DCRT_OK ||
                          (t->kind == TK_INPUT &&
                           rt_cuda_copy_to_device(x->dbuf[i], bufs[i], bytes, err, sizeof err) != DCRT_OK)))
            fail("%s", err);
        if (!to_device && t->kind == TK_OUTPUT &&
            rt_cuda_copy_to_host(bufs[i], x->dbuf[i], bytes, err, sizeof err) != DCRT_OK)
            fail("%s", err);
    }
    if (!to_device) {
        for (int i = 0; i < te->ntensors; i++)
            rt_cuda_free(x->dbuf[i]);
        free(x->dbuf);
        x->dbuf = NULL;
    }
}

/* Runs the program once on the chosen target. */
static void run_once(Exec *x, const int64_t *dims, float **bufs)
{
    char err[8192];
    int rc = x->cuda  ? ex_cuda_run(x->cuda, dims, x->dbuf, 0, NULL, &x->ms, err, sizeof err)
             : x->cpu ? ex_cpu_run(x->cpu, dims, bufs, NULL, err, sizeof err)
             : x->emu ? ex_emu_run(x->emu, x->pool, dims, bufs, err, sizeof err)
             : x->lp  ? ex_loops_run(x->lp, dims, bufs, err, sizeof err)
                      : ir_interp(x->p, dims, bufs, err, sizeof err);
    if (rc != 0)
        fail("%s", err);
}

/* --check: out against the reference by rt_compare's rule; the first
 * element that differs named by its index. */
static bool compare(const Tensor *t, const int64_t *dims, const void *out, const void *ref)
{
    int64_t shape[RT_NPY_MAX_RANK], n = ir_te_numel(t, dims);
    RtCompare c = rt_compare_elems((int32_t)t->dtype, out, ref, n);
    if (c.nbad) {
        tensor_shape(t, dims, shape);
        int64_t idx[RT_NPY_MAX_RANK], rest = c.first;
        for (int d = t->rank - 1; d >= 0; d--) {
            idx[d] = shape[d] ? rest % shape[d] : 0;
            rest = shape[d] ? rest / shape[d] : 0;
        }
        char at[512];
        size_t k = (size_t)snprintf(at, sizeof at, "%s[", t->name);
        for (int d = 0; d < t->rank && k < sizeof at; d++)
            k += (size_t)snprintf(at + k, sizeof at - k, "%s%lld", d ? ", " : "", (long long)idx[d]);
        if (k < sizeof at)
            snprintf(at + k, sizeof at - k, "]");
        fprintf(stderr, "check: %s differs from the reference at %lld of %lld elements; first at "
                        "%s (flat index %lld): got %.9g, expected %.9g\n",
                t->name, (long long)c.nbad, (long long)n, at, (long long)c.first,
                rt_elem((int32_t)t->dtype, out, c.first), rt_elem((int32_t)t->dtype, ref, c.first));
        return false;
    }
    printf("check: %s matches the reference (%lld elements, max abs error %.3g)\n", t->name,
           (long long)n, c.max_abs);
    return true;
}

static void print_summary(const Tensor *t, const int64_t *dims, const void *data, int64_t n)
{
    int32_t dt = (int32_t)t->dtype;
    int64_t shape[16], nnan = 0;
    char sh[256];
    tensor_shape(t, dims, shape);
    shape_str(sh, sizeof sh, t->rank, shape);
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = rt_elem(dt, data, i);
        if (isnan(v)) {
            nnan++;
            continue;
        }
        lo = fmin(lo, v);
        hi = fmax(hi, v);
        sum += v;
    }
    if (n > 0 && nnan == n)
        printf("%s %s: every element is NaN", t->name, sh);
    else if (n == 0)
        printf("%s %s: empty", t->name, sh);
    else
        printf("%s %s: min %.6g, max %.6g, mean %.6g", t->name, sh, lo, hi,
               sum / (double)(n - nnan));
    if (nnan && nnan < n)
        printf(" (over the elements not NaN; %lld NaN)", (long long)nnan);
    printf("\n  [");
    for (int64_t i = 0; i < n && i < 6; i++)
        printf(dt == DCRT_F32 ? "%s%.6g" : "%s%.0f", i ? ", " : "", rt_elem(dt, data, i));
    printf("%s]\n", n > 6 ? ", ..." : "");
}

int cmd_run(int argc, char **argv)
{
    Args o = parse_args(CMD_RUN, argc, argv);
    const char *target = o.val[O_TARGET] ? o.val[O_TARGET] : "cpu";
    const NamedArgs *outputs = &o.named[O_OUTPUT];
    bool check = o.val[O_CHECK] != NULL;
    int64_t bench = o.val[O_BENCH] ? o.num[O_BENCH] : 0;
    bool profile = o.val[O_PROFILE] != NULL;
    if (profile && strcmp(target, "cpu") != 0)
        usage_error("--profile times the launches of the cpu target, not %s", target);
    if (profile && !bench)
        bench = 20;
    bool gpu = strcmp(target, "emu") == 0 || strcmp(target, "cuda") == 0;
    if (o.val[O_ARCH] && !gpu)
        usage_error("--arch is for --target=emu and --target=cuda, not %s", target);
    const char *arch = o.val[O_ARCH] ? o.val[O_ARCH] : "sm_80";
    if (strcmp(target, "cuda") == 0)
        cuda_require();
    FeUnit l = load_fused(&o);
    TeProgram *p = l.prog;
    for (int i = 0; i < outputs->n; i++) {
        const Tensor *t = ir_te_find(p, outputs->a[i].name);
        if (!t || t->kind != TK_OUTPUT)
            fail("--output %s: the program has no output named '%s'", outputs->a[i].name,
                 outputs->a[i].name);
    }
    int64_t *dims = resolve_dims(p, &o.named[O_SET]);
    float **bufs = make_buffers(p, dims, &o);

    Exec x = {.p = p};
    /* the CPU without --check compiles p for the last time: the weights
     * that only their panels, packed when compiling, read go as their
     * stages are lowered, and any other unread ones before the JIT (the
     * calls need the compiled code alone; --check interprets p) */
    bool last = strcmp(target, "cpu") == 0 && !check;
    if (strcmp(target, "reference") != 0) {
        CompileOpts co = {.target = gpu ? PT_GPU : PT_CPU, .gpu_arch = arch, .records = o.val[O_RECORDS],
                          .mks = &o.named[O_MK], .pipe = {.release_consts = last}};
        x.lp = lower_program(p, &co);
    }
    char err[8192];
    if (strcmp(target, "emu") == 0) {
        if (!(x.emu = ex_emu_compile(x.lp, err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "JIT compilation failed: %s", err);
        if (!(x.pool = rt_pool_new(0)))
            fail("cannot start the thread pool");
    }
    if (last)
        ir_te_release_unread_consts(p, x.lp);
    if (strcmp(target, "cpu") == 0 && !(x.cpu = ex_cpu_compile(x.lp, err, sizeof err)))
        ir_panic(__FILE__, __LINE__, "JIT compilation failed: %s", err);
    rt_heap_trim(); /* LLVM's transient memory */
    if (strcmp(target, "cuda") == 0) {
        if (!(x.cuda = ex_cuda_compile(x.lp, arch, true, err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
        cuda_buffers(&x, dims, bufs, true);
    }
    run_once(&x, dims, bufs);
    ExProfile *prof = profile ? ex_profile_start(x.lp, err, sizeof err) : NULL;
    if (profile && !prof)
        fail("%s", err);
    if (bench) {
        double *t = malloc((size_t)bench * sizeof *t);
        for (int64_t i = 0; i < bench; i++) {
            double t0 = rt_now_ms();
            run_once(&x, dims, bufs);
            t[i] = x.cuda ? x.ms : rt_now_ms() - t0; /* cuda: CUDA events around the launches */
        }
        qsort(t, (size_t)bench, sizeof *t, cmp_double);
        printf("bench: median %.3f ms, min %.3f ms, %lld runs\n", t[bench / 2], t[0],
               (long long)bench);
        free(t);
    }
    if (prof) {
        ex_profile_stop(prof);
        if (ex_profile_print(stdout, prof, dims, err, sizeof err) != 0)
            fail("%s", err);
        ex_profile_free(prof);
    }
    if (x.cuda)
        cuda_buffers(&x, dims, bufs, false);
    bool ok = true;
    if (check) {
        float **ref = calloc((size_t)p->ntensors, sizeof *ref);
        for (int i = 0; i < p->ntensors; i++) {
            int64_t bytes = ir_te_bytes(p->tensors[i], dims);
            ref[i] = p->tensors[i]->kind == TK_INPUT ? bufs[i] : malloc(bytes ? (size_t)bytes : 8);
        }
        if (ir_interp(p, dims, ref, err, sizeof err) != 0)
            fail("%s", err);
        for (int i = 0; i < p->ntensors; i++) {
            const Tensor *t = p->tensors[i];
            if (t->kind == TK_OUTPUT)
                ok &= compare(t, dims, bufs[i], ref[i]);
            if (t->kind != TK_INPUT)
                free(ref[i]);
        }
        free(ref);
    }
    if (!ok)
        fail("check failed");
    /* the .npy files: all written, or none */
    RtOutFiles *files = outputs_begin(&o);
    char (*heads)[RT_NPY_HEAD_MAX] = calloc((size_t)p->ntensors, sizeof *heads);
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind != TK_OUTPUT)
            continue;
        const char *path = NULL;
        for (int j = 0; j < outputs->n; j++)
            if (strcmp(outputs->a[j].name, t->name) == 0)
                path = outputs->a[j].value;
        int64_t n = ir_te_numel(t, dims);
        if (!path) {
            if (!check && !bench)
                print_summary(t, dims, bufs[i], n);
            continue;
        }
        RtArray arr = {.rank = t->rank, .data = bufs[i], .dtype = (int32_t)t->dtype};
        tensor_shape(t, dims, arr.shape);
        size_t hlen = rt_npy_header(&arr, heads[i]);
        IR_ASSERT(hlen > 0);
        outputs_add(files, path, heads[i], hlen, bufs[i], (size_t)ir_te_bytes(t, dims));
    }
    outputs_commit(files);
    free(heads);
    for (int i = 0; i < p->ntensors; i++)
        if (!p->tensors[i]->data)
            free(bufs[i]);
    free(bufs);
    free(dims);
    ex_cpu_destroy(x.cpu);
    ex_emu_destroy(x.emu);
    ex_cuda_destroy(x.cuda);
    rt_pool_destroy(x.pool);
    fe_unload(&l);
    free_args(&o);
    return 0;
}
