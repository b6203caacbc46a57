/* libFuzzer target for the records reader: bytes -> a records file ->
 * srch_records_read, then what dcc does with one: srch_schedule_from_records
 * (workload fingerprints, the stored dispatch trees or a tree fit to the
 * measurements, the trees in the IR's dispatch form) and --emit=dispatch's
 * srch_schedule_to_json, for two fixed programs (softmax's one dim and four
 * stages, and a two-dim matmul with a row max) on the cpu and model
 * targets. Damaged lines must be skipped with a warning; a crash, a
 * sanitizer report, a leak or a hang is a bug. What is read is also checked
 * against the reader's promises: every record is found again by its key,
 * its micro-kernel prints as text that parses back to it, its features
 * (when it has them) are SRCH_NFEAT numbers or missing with a positive
 * work, and every tree survives a round trip through its JSON form.
 *
 * The bytes live in a memfd opened by its /proc path, so nothing touches
 * the disk, and srch_records_read opens nothing for writing. Build with
 * -DDC_FUZZ=ON (clang); run through scripts/fuzz.sh records.
 */
#include "dietcode/frontend.h"
#include "dietcode/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* tests/fuzz/records_corpus was tuned from these (softmax is
 * examples/softmax.tex): a records file names programs only by their
 * stages' fingerprints, so change them and the seeds reach no stage. */
static const char *const programs[] = {
    "# row softmax: several stages, each reduction its own kernel or fused\n"
    "dim T in 1..128\n"
    "input X[T, 1000] f32\n"
    "M[i: T] = max[j: 1000](X[i, j])\n"
    "E[i: T, j: 1000] = exp(X[i, j] - M[i])\n"
    "Z[i: T] = sum[j: 1000](E[i, j])\n"
    "output P[i: T, j: 1000] = E[i, j] / Z[i]\n",
    "dim M in 1..64\n"
    "dim N in 1..64\n"
    "input A[M, 32] f32\n"
    "input B[N, 32] f32\n"
    "C[i: M, j: N] = sum[k: 32](A[i, k] * B[j, k])\n"
    "R[i: M] = max[j: N](C[i, j])\n"
    "output P[i: M, j: N] = exp(C[i, j] - R[i])\n",
};
enum { NPROGRAMS = sizeof programs / sizeof programs[0] };

/* The targets and archs dcc asks for (cpu: the host's; fixed here so a
 * run does the same on any machine), and the archs of the seeds' records
 * (sm_80 ones are read through srch_schedule_from_records's fallback to
 * another arch of the target). */
static const struct {
    const char *target, *ask;
    const char *archs[2];
} targets[] = {
    {"cpu", "sapphirerapids", {"sapphirerapids", NULL}},
    {"model", "sm_90", {"sm_90", "sm_80"}},
};
enum { NTARGETS = sizeof targets / sizeof targets[0], MAX_FPS = 8 };

/* A program compiled once: an input's schedule runs on a copy (the
 * schedule allocates in the program's arena), its stages' fingerprints
 * per target and arch. */
typedef struct Program {
    FeUnit unit;
    Tensor *output;
    bool *inputs_only;  /* materialized: the inputs only, so a copy keeps every stage */
    char *fps[NTARGETS][MAX_FPS];
    int nfps[NTARGETS];
} Program;

static Program progs[NPROGRAMS];
static int memfd = -1;
static char path[64];

static TeProgram *copy_program(const Program *pg)
{
    return ir_te_extract(pg->unit.prog, pg->output, pg->inputs_only, false, NULL);
}

static char *print_te(const TeProgram *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        abort();
    ir_print_te(f, p);
    fclose(f);
    return buf;
}

static void load_program(Program *pg, const char *text)
{
    if (fe_load_text("fuzz.tex", "fuzz", text, &pg->unit) != 0)
        abort();
    TeProgram *p = pg->unit.prog;
    Expr **bodies = IR_NEWN(p->arena, Expr *, p->ntensors);
    bool *mat = IR_NEWN(p->arena, bool, p->ntensors);
    pass_inline(p, bodies, mat);
    pg->inputs_only = IR_NEWN(p->arena, bool, p->ntensors);
    for (int i = 0; i < p->ntensors; i++) {
        pg->inputs_only[i] = p->tensors[i]->kind == TK_INPUT;
        if (p->tensors[i]->kind == TK_OUTPUT)
            pg->output = p->tensors[i];
    }
    /* the copy must be the program: the same text but for its name
     * (fingerprints do not hash it), so the same stages */
    TeProgram *c = copy_program(pg);
    char *a = print_te(p), *b = print_te(c);
    if (strcmp(strchr(a, '\n'), strchr(b, '\n')) != 0)
        abort();
    free(a);
    free(b);
    ir_te_destroy(c);
    for (int t = 0; t < NTARGETS; t++)
        for (int k = 0; k < 2 && targets[t].archs[k]; k++)
            for (int i = 0; i < p->ntensors; i++)
                if (p->tensors[i]->kind != TK_INPUT && mat[i]) {
                    if (pg->nfps[t] == MAX_FPS)
                        abort();
                    pg->fps[t][pg->nfps[t]++] =
                        srch_fingerprint(p, p->tensors[i], mat, targets[t].target,
                                         targets[t].archs[k]);
                }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    memfd = memfd_create("records.jsonl", MFD_CLOEXEC);
    if (memfd < 0)
        abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    for (int i = 0; i < NPROGRAMS; i++)
        load_program(&progs[i], programs[i]);
    return 0;
}

/* The file holds data and nothing else. */
static void put_file(const uint8_t *data, size_t size)
{
    if (ftruncate(memfd, 0) != 0)
        abort();
    for (size_t off = 0; off < size;) {
        ssize_t w = pwrite(memfd, data + off, size - off, (off_t)off);
        if (w <= 0)
            abort();
        off += (size_t)w;
    }
}

/* Checks t and its JSON round trip; predicts a few shapes. */
static void check_tree(const SrchTree *t)
{
    if (t->nnodes < 1 || t->nkernels < 1 || srch_tree_depth(t) > SRCH_TREE_MAX_DEPTH)
        abort();
    char *json = srch_tree_to_json(t), err[256];
    SrchTree *back = json ? srch_tree_from_json(json, strlen(json), err, sizeof err) : NULL;
    char *json2 = back ? srch_tree_to_json(back) : NULL;
    if (!json2 || strcmp(json, json2) != 0)
        abort();
    free(json);
    free(json2);
    srch_tree_free(back);
    static const int64_t probes[] = {INT64_MIN, -1, 0, 1, 7, 64, 1000, INT64_MAX};
    int64_t dims[SRCH_MAX_DIMS];
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        for (int d = 0; d < t->ndims; d++)
            dims[d] = probes[(p + (size_t)d) % (sizeof probes / sizeof probes[0])];
        int k = srch_tree_predict(t, dims);
        if (k < 0 || k >= t->nkernels)
            abort();
    }
}

/* Whether workload names a stage of pg on target t. */
static bool is_stage_of(const Program *pg, int t, const char *workload)
{
    for (int i = 0; i < pg->nfps[t]; i++)
        if (strcmp(pg->fps[t][i], workload) == 0)
            return true;
    return false;
}

/* What the reader promises of every record and tree it kept; relevant[p][t]
 * gets whether the file has a record or a tree of program p's stages on
 * target t. */
static void check_records(const SrchRecords *r, bool relevant[NPROGRAMS][NTARGETS])
{
    int n = srch_records_count(r);
    for (int i = 0; i < n; i++) {
        const SrchRecord *rec = srch_records_at(r, i);
        if (!srch_records_find_class(r, rec->workload, &rec->mk, rec->ndims, rec->dim_names,
                                     rec->dim_values, srch_record_is_baseline(rec->kind)))
            abort();
        if (rec->nfeat && (rec->nfeat != SRCH_NFEAT || !rec->features || !(rec->work > 0) ||
                           !isfinite(rec->work)))
            abort();
        for (int f = 0; f < rec->nfeat; f++)
            if (isinf(rec->features[f]))
                abort();
        char *mk = srch_mk_str(&rec->mk, rec->nspatial);
        MicroKernel back;
        int nsp;
        if (!pass_parse_microkernel(mk, &back, &nsp) || nsp != rec->nspatial ||
            ir_microkernel_cmp(&back, &rec->mk) != 0)
            abort();
        free(mk);
        const SrchTree *tree = srch_records_tree(r, rec->workload);
        if (tree && (i == 0 || strcmp(rec->workload, srch_records_at(r, i - 1)->workload) != 0))
            check_tree(tree);
        for (int p = 0; p < NPROGRAMS; p++)
            for (int t = 0; t < NTARGETS; t++)
                relevant[p][t] |= is_stage_of(&progs[p], t, rec->workload);
    }
    for (int p = 0; p < NPROGRAMS; p++)
        for (int t = 0; t < NTARGETS; t++)
            for (int i = 0; i < progs[p].nfps[t]; i++) {
                const SrchTree *tree = srch_records_tree(r, progs[p].fps[t][i]);
                if (tree) {
                    check_tree(tree);
                    relevant[p][t] = true;
                }
            }
    for (int i = 0; i < srch_records_nwarnings(r); i++)
        if (strlen(srch_records_warning(r, i)->msg) == 0)
            abort();
    /* a warning per damaged line, and one each for the lines of version 1
     * and those of another lowering */
    if (srch_records_nwarnings(r) > srch_records_ncorrupt(r) + 2)
        abort();
}

/* Counts the reader's warnings; the schedule's own (a stored tree it
 * cannot use: of another rank, on dims the program lacks, over the
 * budgets; stages with no usable record) start SRCH_SCHEDULE_WARNING and
 * are not counted. */
static void warned(void *ud, const char *msg)
{
    if (!*msg)
        abort();
    if (strncmp(msg, SRCH_SCHEDULE_WARNING, strlen(SRCH_SCHEDULE_WARNING)) != 0)
        ++*(int *)ud;
}

/* What dcc --records=FILE --emit=dispatch does with the file for program
 * pg on target t; the reader gave nwarnings warnings. */
static void schedule(const Program *pg, int t, int nwarnings)
{
    TeProgram *p = copy_program(pg);
    StageSchedule *sched = calloc((size_t)p->ntensors, sizeof *sched);
    SrchTree **trees = calloc((size_t)p->ntensors, sizeof *trees);
    char used[64], err[1024] = "";
    int nwarned = 0;
    int rc = srch_schedule_from_records(p, path, targets[t].target, targets[t].ask, sched, trees,
                                        used, sizeof used, warned, &nwarned, err, sizeof err);
    if (rc < -1 || rc > 1 || (rc != 0 && !err[0]) || nwarned != nwarnings)
        abort();
    if (rc == 0) {
        for (int i = 0; i < p->ntensors; i++)
            if (trees[i]) {
                check_tree(trees[i]);
                if (sched[i].nvariants < 1 || sched[i].nvariants > trees[i]->nkernels ||
                    !sched[i].dispatch || sched[i].dispatch->nnodes != trees[i]->nnodes)
                    abort();
            }
        char *json = srch_schedule_to_json(p, targets[t].target, used, trees);
        if (!json)
            abort();
        free(json);
    }
    for (int i = 0; i < p->ntensors; i++)
        srch_tree_free(trees[i]);
    free(trees);
    free(sched);
    ir_te_destroy(p);
}

/* Only files with records or trees of our stages are scheduled: with
 * none, srch_schedule_from_records stops after the fingerprints, which
 * would cost far more than the rest of an input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put_file(data, size);
    char err[1024];
    SrchRecords *r = srch_records_read(path, 0, NULL, err, sizeof err);
    if (!r)
        abort(); /* a readable regular file: damage is never an error */
    bool relevant[NPROGRAMS][NTARGETS] = {{false}};
    check_records(r, relevant);
    int nwarnings = srch_records_nwarnings(r);
    srch_records_close(r);
    for (int p = 0; p < NPROGRAMS; p++)
        for (int t = 0; t < NTARGETS; t++)
            if (relevant[p][t])
                schedule(&progs[p], t, nwarnings);
    return 0;
}
