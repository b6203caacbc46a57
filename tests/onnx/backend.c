/* backend: ONNX's own backend tests (Debian's libonnx-testdata) through
 * the importer: each test's model.onnx imported, compiled and run on each
 * target with every test_data_set_N's input_K.pb, its outputs compared
 * with output_K.pb at the backend tests' tolerances (|got - want| <= 1e-7
 * + 1e-3 |want|; integers and bools exactly; NaN where NaN).
 *
 *   backend [--targets=cpu,emu] [--list] [--dims NAME=LO..HI,...] [--atol=X]
 *           [--must-import] [--tex] DIR...   (each DIR holds test_* folders)
 *
 * With --tex, each imported program is written as `dcc --emit=tex` writes
 * it (ir_print_te_consts, its constants as .npy files beside it), read
 * back through the .tex frontend, and that program is what runs.
 *
 * A model the importer refuses is skipped, grouped by reason ("unsupported
 * operator Resize: 23"), or with --must-import a failure; one that imports
 * and then fails to compile, run or match is a failure. Ends with the
 * tests passed by operator (a test counts for each op_type its graph
 * holds: a node test, for its one) and "N passed, N failed, N skipped". A model with symbolic dims (the exports of
 * scripts/make-onnx-tests.py) takes their ranges from --dims and, in each
 * data set, their sizes from the inputs' shapes.
 */
#include "dietcode/exec.h"
#include "dietcode/onnx.h"
#include "dietcode/passes.h"
#include "onnx.pb-c.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_REASONS = 512, MAX_IO = 32, MAX_DIMS = 16 };

static FeDimRange ranges[MAX_DIMS];
static int nranges;
static bool must_import, via_tex;
static double abs_tol = 1e-7;

typedef struct Reason {
    char text[200];
    int count;
} Reason;

/* Skipped tests by reason; passed tests by operator. */
static Reason reasons[MAX_REASONS], ops[MAX_REASONS];
static int nreasons, nops;

/* One more of text in the table tab of *n entries. */
static void tally(Reason *tab, int *n, const char *text)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(tab[i].text, text) == 0) {
            tab[i].count++;
            return;
        }
    if (*n < MAX_REASONS) {
        snprintf(tab[*n].text, sizeof tab[*n].text, "%s", text);
        tab[(*n)++].count = 1;
    }
}

static void skip(const char *why) { tally(reasons, &nreasons, why); }

/* Each op_type of the graph of path's model once. */
static void count_ops(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long len = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len)) &&
        fread(buf, 1, (size_t)len, f) == (size_t)len) {
        Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, (size_t)len, buf);
        for (size_t i = 0; m && m->graph && i < m->graph->n_node; i++) {
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++)
                seen = strcmp(m->graph->node[j]->op_type, m->graph->node[i]->op_type) == 0;
            if (!seen && m->graph->node[i]->op_type)
                tally(ops, &nops, m->graph->node[i]->op_type);
        }
        onnx__model_proto__free_unpacked(m, NULL);
    }
    free(buf);
    if (f)
        fclose(f);
}

/* A diagnostic as a reason: the node's prefix dropped, an unsupported
 * operator's count dropped, digits of extents kept. */
static void skip_diag(const char *msg)
{
    const char *p = strstr(msg, "): ");
    p = p && strncmp(msg, "node ", 5) == 0 ? p + 3 : msg;
    char why[200];
    snprintf(why, sizeof why, "%s", p);
    if (strncmp(why, "unsupported operator", 20) == 0) {
        char *sp = strrchr(why, ' ');
        if (sp && !strchr(why, ','))
            *sp = '\0';
    }
    skip(why);
}

static bool close_enough(const RtArray *want, const void *got, int64_t n, char *why, size_t len)
{
    for (int64_t i = 0; i < n; i++) {
        double w, g;
        switch (want->dtype) {
        case DCRT_F32:
            w = ((const float *)want->data)[i];
            g = ((const float *)got)[i];
            if (isnan(w) ? !isnan(g) : !(fabs(g - w) <= abs_tol + 1e-3 * fabs(w))) {
                snprintf(why, len, "element %lld: got %.9g, expected %.9g", (long long)i, g, w);
                return false;
            }
            continue;
        case DCRT_I32: w = ((const int32_t *)want->data)[i]; g = ((const int32_t *)got)[i]; break;
        case DCRT_I64: w = (double)((const int64_t *)want->data)[i]; g = (double)((const int64_t *)got)[i]; break;
        default: w = ((const uint8_t *)want->data)[i]; g = ((const uint8_t *)got)[i]; break;
        }
        if (w != g) {
            snprintf(why, len, "element %lld: got %.17g, expected %.17g", (long long)i, g, w);
            return false;
        }
    }
    return true;
}

/* Runs lp on target with the data set in dir; 0, or -1 with why. */
static int run_set(const TeProgram *p, const LoopProgram *lp, void *exe, bool emu,
                   const char *dir, char *why, size_t len)
{
    int nt = p->ntensors, nin = 0, nout = 0, rc = -1;
    float **bufs = calloc((size_t)nt + 1, sizeof *bufs);
    RtArray ins[MAX_IO], outs[MAX_IO];
    char outname[MAX_IO][160];
    memset(ins, 0, sizeof ins);
    memset(outs, 0, sizeof outs);
    char path[1400];
    for (;; nin++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", dir, nin);
        struct stat sb;
        if (nin == MAX_IO || stat(path, &sb) != 0)
            break;
        if (fe_onnx_read_tensor(path, &ins[nin], NULL, 0, why, len) != 0)
            goto done;
    }
    for (;; nout++) {
        snprintf(path, sizeof path, "%s/output_%d.pb", dir, nout);
        struct stat sb;
        if (nout == MAX_IO || stat(path, &sb) != 0)
            break;
        if (fe_onnx_read_tensor(path, &outs[nout], outname[nout], sizeof outname[nout], why, len) != 0)
            goto done;
    }
    /* inputs in the order the graph lists them; outputs by name; the
     * dims' sizes from the inputs' shapes */
    int64_t dims[MAX_DIMS + 1] = {0};
    for (int i = 0, k = 0; i < nt; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind != TK_INPUT || t->data || k >= nin)
            continue;
        for (int d = 0; d < t->rank && d < ins[k].rank; d++)
            if (t->shape[d]->kind == EX_VAR && t->shape[d]->var->pos < MAX_DIMS)
                dims[t->shape[d]->var->pos] = ins[k].shape[d];
        k++;
    }
    if (p->ndims && !ir_check_dims(p, dims, why, len))
        goto done;
    int k = 0;
    for (int i = 0; i < nt; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind != TK_INPUT || t->data)
            continue;
        if (k >= nin) {
            snprintf(why, len, "the data set has %d inputs, the model more", nin);
            goto done;
        }
        bool same = ins[k].dtype == (int32_t)t->dtype && ins[k].rank == t->rank;
        for (int d = 0; same && d < t->rank; d++)
            same = ins[k].shape[d] == ir_eval_dims(t->shape[d], dims);
        if (!same) {
            snprintf(why, len, "input %d does not match the model's", k);
            goto done;
        }
        bufs[i] = ins[k++].data;
    }
    for (int i = 0; i < nt; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind == TK_OUTPUT) {
            int64_t b = ir_te_bytes(t, dims);
            bufs[i] = calloc((size_t)(b > 0 ? b : 1), 1);
        }
    }
    if (emu ? ex_emu_run(exe, NULL, dims, bufs, why, len) != 0
            : ex_cpu_run(exe, dims, bufs, NULL, why, len) != 0)
        goto done;
    for (int o = 0; o < nout; o++) {
        const Tensor *t = NULL;
        for (int i = 0; i < nt && !t; i++)
            if (p->tensors[i]->kind == TK_OUTPUT && p->tensors[i]->source &&
                strcmp(p->tensors[i]->source, outname[o]) == 0)
                t = p->tensors[i];
        for (int i = 0, seen = 0; i < nt && !t; i++) /* unnamed: by order */
            if (p->tensors[i]->kind == TK_OUTPUT && seen++ == o)
                t = p->tensors[i];
        if (!t || outs[o].dtype != (int32_t)t->dtype) {
            snprintf(why, len, "output %d ('%s') has no output of its type", o, outname[o]);
            goto done;
        }
        int64_t n = ir_te_numel(t, dims), m = 1;
        for (int d = 0; d < outs[o].rank; d++)
            m *= outs[o].shape[d];
        if (n != m) {
            snprintf(why, len, "output '%s' has %lld elements, expected %lld", outname[o],
                     (long long)n, (long long)m);
            goto done;
        }
        char w[200];
        if (!close_enough(&outs[o], bufs[t->id], n, w, sizeof w)) {
            snprintf(why, len, "output '%s' %s", outname[o], w);
            goto done;
        }
    }
    (void)lp;
    rc = 0;
done:
    for (int i = 0; i < nt; i++)
        if (p->tensors[i]->kind == TK_OUTPUT)
            free(bufs[i]);
    for (int i = 0; i < MAX_IO; i++) {
        rt_array_free(&ins[i]);
        rt_array_free(&outs[i]);
    }
    free(bufs);
    return rc;
}

/* p written as a .tex program (constants as NAME.npy beside it) in a
 * scratch folder and read back into *out: 0, or -1 and err. */
static int tex_roundtrip(const TeProgram *p, FeUnit *out, char *err, size_t errlen)
{
    char dir[] = "/tmp/dc_tex_XXXXXX", path[1200];
    if (!mkdtemp(dir)) {
        snprintf(err, errlen, "cannot make a scratch folder");
        return -1;
    }
    const char **paths = calloc((size_t)p->ntensors + 1, sizeof *paths);
    char (*names)[160] = calloc((size_t)p->ntensors + 1, sizeof *names);
    int rc = paths && names ? 0 : -1;
    for (int i = 0; i < p->ntensors && rc == 0; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind != TK_INPUT || t->body || !t->data)
            continue;
        snprintf(names[i], sizeof names[i], "%s.npy", t->name);
        paths[i] = names[i];
        RtArray a = {.rank = t->rank, .dtype = (int32_t)t->dtype, .data = (void *)t->data};
        for (int j = 0; j < t->rank; j++)
            ir_is_const(t->shape[j], &a.shape[j]);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = rt_npy_write(path, &a, err, errlen);
    }
    snprintf(path, sizeof path, "%s/%s.tex", dir, p->name);
    FILE *f = rc == 0 ? fopen(path, "w") : NULL;
    if (f) {
        ir_print_te_consts(f, p, paths);
        fclose(f);
        if (fe_load(path, out, err, errlen) != 0) {
            char msg[400];
            snprintf(msg, sizeof msg, "%.300s", out->diags.head ? out->diags.head->msg : err);
            snprintf(err, errlen, "the .tex does not read back: %s", msg);
            fe_unload(out);
            rc = -1;
        }
    } else if (rc == 0) {
        snprintf(err, errlen, "cannot write %.400s", path);
        rc = -1;
    }
    for (int i = 0; i < p->ntensors; i++)
        if (paths && paths[i]) {
            snprintf(path, sizeof path, "%s/%s", dir, paths[i]);
            remove(path);
        }
    snprintf(path, sizeof path, "%s/%s.tex", dir, p->name);
    remove(path);
    rmdir(dir);
    free(paths);
    free(names);
    return rc;
}

/* One test folder on one target: 1 passed, 0 skipped, -1 failed. */
static int run_test(const char *dir, const char *name, bool emu, bool verbose)
{
    char path[1100], err[512];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    FeUnit u;
    int rc = fe_load_onnx(path, ranges, nranges, &u, err, sizeof err);
    if (rc != 0) {
        const char *msg = rc > 0 && u.diags.head ? u.diags.head->msg
                          : rc < 0               ? err
                                                 : "no diagnostic";
        if (must_import)
            printf("FAIL %s (%s): not imported: %s\n", name, emu ? "emu" : "cpu", msg);
        else if (rc > 0 && u.diags.head)
            skip_diag(msg);
        else
            skip(rc < 0 ? "unreadable" : msg);
        fe_unload(&u);
        return must_import ? -1 : 0;
    }
    if (u.prog->ndims > MAX_DIMS || (u.prog->ndims && !nranges)) {
        skip("symbolic dims without --dims");
        fe_unload(&u);
        return 0;
    }
    FeUnit tex = {0};
    TeProgram *p = u.prog;
    if (via_tex) {
        if (tex_roundtrip(u.prog, &tex, err, sizeof err) != 0) {
            /* the language refuses what ONNX leaves undefined */
            bool refused = strstr(err, "which may be zero") != NULL;
            if (refused)
                skip(".tex: an integer division or modulo by a tensor's value (may be zero)");
            else
                printf("FAIL %s (%s, .tex): %s\n", name, emu ? "emu" : "cpu", err);
            fe_unload(&u);
            return refused ? 0 : -1;
        }
        p = tex.prog;
    }
    TargetInfo ti = pass_target_info(emu ? PT_GPU : PT_CPU);
    int result = -1;
    LoopProgram *lp = pass_run_pipeline(p, NULL, &ti, NULL, err, sizeof err);
    void *exe = !lp ? NULL : emu ? (void *)ex_emu_compile(lp, err, sizeof err)
                                 : (void *)ex_cpu_compile(lp, err, sizeof err);
    if (exe) {
        result = 1;
        for (int s = 0; result == 1; s++) {
            char set[1200];
            struct stat sb;
            snprintf(set, sizeof set, "%s/test_data_set_%d", dir, s);
            if (stat(set, &sb) != 0)
                break;
            if (run_set(p, lp, exe, emu, set, err, sizeof err) != 0)
                result = -1;
        }
    }
    if (result < 0)
        printf("FAIL %s (%s): %s\n", name, emu ? "emu" : "cpu", err);
    else if (verbose)
        printf("ok %s (%s)\n", name, emu ? "emu" : "cpu");
    if (result > 0)
        count_ops(path);
    if (emu)
        ex_emu_destroy(exe);
    else
        ex_cpu_destroy(exe);
    if (via_tex)
        fe_unload(&tex);
    fe_unload(&u);
    return result;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_reason(const void *a, const void *b)
{
    const Reason *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : strcmp(x->text, y->text);
}

static int cmp_op(const void *a, const void *b)
{
    return strcmp(((const Reason *)a)->text, ((const Reason *)b)->text);
}

int main(int argc, char **argv)
{
    bool cpu = true, emu = true, verbose = false;
    int passed = 0, failed = 0, skipped = 0;
    for (int a = 1; a < argc; a++) {
        if (strncmp(argv[a], "--targets=", 10) == 0) {
            cpu = strstr(argv[a] + 10, "cpu") != NULL;
            emu = strstr(argv[a] + 10, "emu") != NULL;
            continue;
        }
        if (strcmp(argv[a], "--list") == 0) {
            verbose = true;
            continue;
        }
        if (strcmp(argv[a], "--must-import") == 0) {
            must_import = true;
            continue;
        }
        if (strcmp(argv[a], "--tex") == 0) {
            via_tex = true;
            continue;
        }
        if (strncmp(argv[a], "--atol=", 7) == 0) {
            abs_tol = atof(argv[a] + 7);
            continue;
        }
        if (strcmp(argv[a], "--dims") == 0 && a + 1 < argc) {
            char err[256];
            if ((nranges = fe_parse_dim_ranges(argv[++a], ranges, MAX_DIMS, err, sizeof err)) < 0) {
                fprintf(stderr, "backend: --dims: %s\n", err);
                return 2;
            }
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "backend: cannot open %s\n", argv[a]);
            return 2;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (strncmp(e->d_name, "test_", 5) != 0)
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                names = realloc(names, cap * sizeof *names);
            }
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n; i++) {
            char dir[1024];
            snprintf(dir, sizeof dir, "%s/%s", argv[a], names[i]);
            for (int t = 0; t < 2; t++) {
                if (!(t ? emu : cpu))
                    continue;
                int r = run_test(dir, names[i], t == 1, verbose);
                passed += r > 0;
                failed += r < 0;
                skipped += r == 0;
            }
            free(names[i]);
        }
        free(names);
    }
    qsort(reasons, (size_t)nreasons, sizeof *reasons, cmp_reason);
    printf("skipped, by reason:\n");
    for (int i = 0; i < nreasons; i++)
        printf("  %s: %d\n", reasons[i].text, reasons[i].count);
    qsort(ops, (size_t)nops, sizeof *ops, cmp_op);
    printf("passed, by operator (each test for every op in its graph):\n");
    for (int i = 0; i < nops; i++)
        printf("%s%s %d", i % 8 ? ", " : i ? "\n  " : "  ", ops[i].text, ops[i].count);
    printf("\n%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
