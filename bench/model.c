/* bench/model.c: dcc's side of bench/model.py, which times a whole model
 * (examples/bert_encoder.tex) against PyTorch and numpy in one process
 * tree, T by T in turns.
 *
 *   bench_model [--trials N --records R] [--threads N] [--dims NAME=LO..HI,...] PROGRAM
 *
 * PROGRAM is a .tex file or an ONNX model (its dims' ranges from --dims).
 * Compiles PROGRAM once, JIT for this CPU: tuned with N trials over its
 * dims' ranges (measurements in R; N = 0, the default: the default
 * schedule), prints "ready SECONDS STAGES WORKLOADS" (the tuning time,
 * the stages tuned and how many distinct workloads they are) and then answers
 * commands from stdin, one per line, each with one line on stdout:
 *
 *   dims NAME=V ...   sets every dim; inputs are refilled with random
 *                     values, outputs zeroed                     -> ok
 *   load NAME PATH    input NAME from a .npy of its shape now    -> ok
 *   time REPS         the median of REPS calls after a warm-up   -> MS
 *   save NAME PATH    one call, then output NAME to a .npy       -> ok
 *
 * A failed command answers "error: MESSAGE" and the next one is read.
 */
#include "common.h"

#include "dietcode/frontend.h"
#include "dietcode/onnx.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#include "load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Model {
    TeProgram *p;
    ExCpu *cp;
    int64_t dims[64];
    float **t; /* by tensor id: inputs and outputs, NULL for intermediates */
    bool set;  /* dims given */
} Model;

static void usage(void)
{
    fprintf(stderr, "usage: bench_model [--trials N --records R] [--threads N] "
                    "[--dims NAME=LO..HI,...] PROGRAM\n");
    exit(2);
}

/* An ONNX model with the ranges of spec (NAME=LO..HI,...), or a .tex
 * program; exits 1 with the diagnostics on failure. */
static TeProgram *load_model(const char *path, char *spec, FeUnit *u)
{
    if (!fe_is_onnx(path))
        return bench_load("bench_model", path, u);
    FeDimRange r[16];
    char err[1024];
    int n = spec ? fe_parse_dim_ranges(spec, r, 16, err, sizeof err) : 0;
    if (n < 0) {
        fprintf(stderr, "bench_model: --dims: %s\n", err);
        exit(2);
    }
    int rc = fe_load_onnx(path, r, n, u, err, sizeof err);
    if (rc == 0)
        return u->prog;
    if (rc < 0)
        fprintf(stderr, "bench_model: %s\n", err);
    else
        ir_diags_print(&u->diags, stderr);
    exit(1);
}

static ExCpu *compile_default(TeProgram *p)
{
    char err[1024];
    TargetInfo ti = pass_target_info(PT_CPU);
    PipelineOpts last = {.release_consts = true}; /* as dcc run: the weights only their
                                                   * packed panels read go */
    LoopProgram *lp = pass_run_pipeline_sched(p, NULL, &ti, &last, err, sizeof err);
    if (lp)
        ir_te_release_unread_consts(p, lp);
    ExCpu *cp = lp ? ex_cpu_compile(lp, err, sizeof err) : NULL;
    if (!cp) {
        fprintf(stderr, "bench_model: %s\n", err);
        exit(1);
    }
    return cp;
}

/* One call; NULL, or its error in err. */
static const char *call(Model *m, char *err, size_t errlen)
{
    return ex_cpu_run(m->cp, m->dims, m->t, NULL, err, errlen) == 0 ? NULL : err;
}

/* A timed call: the same dims as a call() that succeeded. */
static void run_once(void *ctx)
{
    char err[1024];
    if (call(ctx, err, sizeof err)) {
        fprintf(stderr, "bench_model: %s\n", err);
        exit(1);
    }
}

static const char *cmd_dims(Model *m, char *args, char *err, size_t errlen)
{
    TeProgram *p = m->p;
    bool given[64] = {0};
    int64_t dims[64];
    for (char *tok = strtok(args, " \t"); tok; tok = strtok(NULL, " \t")) {
        char *eq = strchr(tok, '=');
        const Var *d = NULL;
        if (eq) {
            *eq = 0;
            for (int i = 0; i < p->ndims; i++)
                if (strcmp(p->dims[i]->name, tok) == 0)
                    d = p->dims[i];
        }
        char *end = NULL;
        long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
        if (!d || !end || *end || end == eq + 1 || v < d->lo || v > d->max) {
            snprintf(err, errlen, "dims: expected NAME=V with a dim of the program, V in its range");
            return err;
        }
        dims[d->pos] = v;
        given[d->pos] = true;
    }
    for (int i = 0; i < p->ndims; i++)
        if (!given[i]) {
            snprintf(err, errlen, "dims: no value for %s", p->dims[i]->name);
            return err;
        }
    double total = 0;
    for (int i = 0; i < p->ntensors; i++)
        if (p->tensors[i]->kind != TK_TEMP && !p->tensors[i]->data)
            total += (double)ir_te_bytes(p->tensors[i], dims);
    if (total > 4.0 * (1 << 30)) {
        snprintf(err, errlen, "dims: inputs and outputs of %.1f GiB (a benchmark takes 4)",
                 total / (1 << 30));
        return err;
    }
    memcpy(m->dims, dims, sizeof(int64_t) * (size_t)p->ndims);
    m->set = false; /* until every buffer has its new size */
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->data) { /* a constant: the program's own */
            m->t[i] = (void *)(uintptr_t)t->data;
            continue;
        }
        free(m->t[i]);
        m->t[i] = NULL;
        if (t->kind != TK_INPUT && t->kind != TK_OUTPUT)
            continue;
        int64_t n = ir_te_numel(t, m->dims);
        size_t bytes = ((size_t)ir_te_bytes(t, m->dims) + 63) / 64 * 64;
        if (!(m->t[i] = aligned_alloc(64, bytes ? bytes : 64))) {
            snprintf(err, errlen, "dims: out of memory");
            return err;
        }
        if (t->kind == TK_INPUT)
            rt_rng_fill_elems(7, (uint64_t)i, (int32_t)t->dtype, m->t[i], (size_t)n);
        else
            memset(m->t[i], 0, bytes);
    }
    m->set = true;
    return NULL;
}

/* The tensor named by the next token, of the kind wanted. */
static const Tensor *tensor_arg(Model *m, TensorKind kind, char *err, size_t errlen)
{
    char *name = strtok(NULL, " \t");
    const Tensor *t = name ? ir_te_find_tensor(m->p, name) : NULL;
    if (!t || t->kind != kind) {
        snprintf(err, errlen, "no %s named '%s'", kind == TK_INPUT ? "input" : "output",
                 name ? name : "");
        return NULL;
    }
    if (!m->set) {
        snprintf(err, errlen, "no dims yet");
        return NULL;
    }
    return t;
}

static const char *cmd_load(Model *m, char *err, size_t errlen)
{
    const Tensor *t = tensor_arg(m, TK_INPUT, err, errlen);
    char *path = strtok(NULL, " \t");
    if (!t)
        return err;
    if (t->data)
        return "load: a constant of the program";
    RtArray a;
    if (!path || rt_npy_read(path, &a, err, errlen) != 0)
        return path ? err : "load: no path";
    if (a.dtype != (int32_t)t->dtype) {
        snprintf(err, errlen, "load: %s holds %s, %s is %s", path, rt_dtype_name(a.dtype), t->name,
                 ir_dtype_name(t->dtype));
        rt_array_free(&a);
        return err;
    }
    int64_t n = ir_te_numel(t, m->dims), have = 1;
    for (int i = 0; i < a.rank; i++)
        have *= a.shape[i];
    if (have != n) {
        rt_array_free(&a);
        snprintf(err, errlen, "load: %s holds %lld values, %s has %lld", path, (long long)have,
                 t->name, (long long)n);
        return err;
    }
    memcpy(m->t[t->id], a.data, (size_t)ir_te_bytes(t, m->dims));
    rt_array_free(&a);
    return NULL;
}

static const char *cmd_save(Model *m, char *err, size_t errlen)
{
    const Tensor *t = tensor_arg(m, TK_OUTPUT, err, errlen);
    char *path = strtok(NULL, " \t");
    if (!t)
        return err;
    if (!path)
        return "save: no path";
    if (call(m, err, errlen))
        return err;
    RtArray a = {.rank = t->rank, .data = m->t[t->id], .dtype = (int32_t)t->dtype};
    for (int i = 0; i < t->rank; i++)
        a.shape[i] = ir_eval_dims(t->shape[i], m->dims);
    return rt_npy_write(path, &a, err, errlen) == 0 ? NULL : err;
}

int main(int argc, char **argv)
{
    int trials = 0, threads = 2;
    const char *records = NULL, *file = NULL;
    char *dims = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (strcmp(argv[i], "--records") == 0 && i + 1 < argc)
            records = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dims") == 0 && i + 1 < argc)
            dims = argv[++i];
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else
            usage();
    }
    if (!file || trials < 0 || threads < 1 || (trials > 0 && !records))
        usage();
    bench_dcrt_threads(threads);

    char err[1024];
    FeUnit u;
    Model m = {.p = load_model(file, dims, &u)};
    if (m.p->ndims > 64) {
        fprintf(stderr, "bench_model: more than 64 dims\n");
        return 1;
    }
    double seconds = 0;
    int stages = 0, workloads = 0;
    if (trials > 0) {
        SrchTuneOpts o = {.trials = trials, .seed = 1, .records = records};
        BenchTuned t = bench_tune(m.p, &o, true);
        seconds = t.seconds;
        stages = t.stages;
        workloads = t.workloads;
        m.cp = t.cp;
    } else {
        m.cp = compile_default(m.p);
    }
    rt_heap_trim(); /* as dcc run: LLVM's transient memory goes */
    m.t = calloc((size_t)m.p->ntensors, sizeof *m.t);
    if (!m.t)
        return 1;
    printf("ready %.3f %d %d\n", seconds, stages, workloads);
    fflush(stdout);

    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        size_t len = strcspn(line, "\r\n");
        if (!line[len] && !feof(stdin)) { /* longer than the buffer: skip the rest */
            int c;
            while ((c = getchar()) != EOF && c != '\n')
                ;
            printf("error: a command of more than %zu bytes\n", sizeof line - 2);
            fflush(stdout);
            continue;
        }
        line[len] = 0;
        char *cmd = strtok(line, " \t");
        const char *fail = NULL;
        if (!cmd) {
            continue;
        } else if (strcmp(cmd, "dims") == 0) {
            char *args = strtok(NULL, "");
            fail = cmd_dims(&m, args ? args : (char[]){""}, err, sizeof err);
            if (!fail)
                printf("ok\n");
        } else if (strcmp(cmd, "load") == 0) {
            if (!(fail = cmd_load(&m, err, sizeof err)))
                printf("ok\n");
        } else if (strcmp(cmd, "save") == 0) {
            if (!(fail = cmd_save(&m, err, sizeof err)))
                printf("ok\n");
        } else if (strcmp(cmd, "time") == 0) {
            char *n = strtok(NULL, " \t");
            int reps = n ? atoi(n) : 0;
            if (!m.set)
                fail = "time: no dims yet";
            else if (reps < 1 || reps > 64)
                fail = "time: expected a number of calls, 1 to 64";
            else if (!(fail = call(&m, err, sizeof err)))
                printf("%.6f\n", bench_median_ms(reps, run_once, &m));
        } else {
            fail = "unknown command (dims, load, time, save)";
        }
        if (fail)
            printf("error: %s\n", fail);
        fflush(stdout);
    }
    for (int i = 0; i < m.p->ntensors; i++)
        if (!m.p->tensors[i]->data)
            free(m.t[i]);
    free(m.t);
    ex_cpu_destroy(m.cp);
    fe_unload(&u);
    return 0;
}
