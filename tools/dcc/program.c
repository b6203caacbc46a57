/* dcc: loading, checking and lowering a program, for every command. */
#include "dcc.h"

/* Reads and checks FILE (a .tex program, or an ONNX model with the
 * ranges of dims, --dims); prints diagnostics and exits 1 on errors. */
static FeUnit load_program(const char *path, const NamedArgs *dims)
{
    FeUnit u;
    char err[512];
    int rc;
    if (fe_is_onnx(path)) {
        FeDimRange r[MAX_ARGS + 1];
        for (int i = 0; i < dims->n; i++) {
            int64_t count;
            parse_range(dims->a[i].value, &r[i].lo, &r[i].hi, &count);
            r[i].name = dims->a[i].name;
        }
        rc = fe_load_onnx(path, r, dims->n, &u, err, sizeof err);
    } else {
        if (dims->n)
            usage_error("--dims is for ONNX models (a .tex program declares its dims)");
        rc = fe_load(path, &u, err, sizeof err);
    }
    if (rc < 0)
        fail("%s", err);
    if (rc == 0 && cg_symbol_prefix_check(u.prog->name, err, sizeof err) != 0)
        fail("%s: %s", path, err);
    if (rc > 0) {
        ir_diags_print(&u.diags, stderr);
        fprintf(stderr, "%d error%s\n", u.diags.count, u.diags.count == 1 ? "" : "s");
        exit(EXIT_BAD_INPUT);
    }
    return u;
}

/* Exits 1 when a --fuse is not an intermediate without a reduction. */
FeUnit load_fused(const Args *a)
{
    const NamedArgs *fuse = &a->named[O_FUSE];
    const char *fp_contract = a->val[O_FPCONTRACT]; /* NULL: on */
    FeUnit u = load_program(a->file, &a->named[O_DIMS]);
    u.prog->fp_contract_off = fp_contract && strcmp(fp_contract, "off") == 0;
    for (int i = 0; i < fuse->n; i++) {
        const NamedArg *f = &fuse->a[i];
        Tensor *t = ir_te_find_tensor(u.prog, f->name);
        if (!t || !pass_fuse_choosable(t))
            fail("--fuse %s: %s", f->name,
                 !t                      ? "the program has no tensor of that name"
                 : t->kind != TK_TEMP    ? "inputs and outputs are always materialised"
                                         : "a tensor with a reduction is always materialised");
        bool ok = pass_parse_fuse(f->value, &t->fuse);
        IR_ASSERT(ok); /* parse_args checked it */
    }
    return u;
}

/* A damaged line of a records file, as tune reports it. */
void records_warn(void *ud, const char *msg)
{
    fprintf(stderr, "dcc: warning: %s\n", msg);
}

/* The schedule's own warnings (SRCH_SCHEDULE_WARNING), not the damaged
 * lines a first reading of the same file reported already. */
static void schedule_warn(void *ud, const char *msg)
{
    if (strncmp(msg, SRCH_SCHEDULE_WARNING, strlen(SRCH_SCHEDULE_WARNING)) == 0)
        records_warn(ud, msg);
}

/* The schedule tuned into o->records for p, then the micro-kernels given
 * with --mk (NULL with neither); exits 1 when the file cannot be used or a
 * --mk names no stage or does not parse. A CPU build takes the cpu records
 * of this CPU (else of the CPU the file has records of); a GPU build the
 * cuda records of its arch (else of another GPU), else the model
 * backend's. o->used_target and o->used_arch say which. */
StageSchedule *records_schedule(TeProgram *p, CompileOpts *o)
{
    bool gpu = o->target == PT_GPU;
    const char *target = gpu ? "cuda" : "cpu", *arch = gpu ? o->gpu_arch : srch_host_arch();
    snprintf(o->used_target, sizeof o->used_target, "%s", target);
    snprintf(o->used_arch, sizeof o->used_arch, "%s", arch);
    bool hand = o->mks && o->mks->n > 0;
    if (!o->records && !hand)
        return NULL;
    StageSchedule *sched = calloc((size_t)p->ntensors + 1, sizeof *sched);
    char err[1024];
    if (o->records) {
        int rc = srch_schedule_from_records(p, o->records, target, arch, sched, o->trees,
                                            o->used_arch, sizeof o->used_arch, records_warn, NULL,
                                            err, sizeof err);
        if (rc == 1 && gpu) { /* no cuda records: tuned offline? */
            target = "model";
            rc = srch_schedule_from_records(p, o->records, target, arch, sched, o->trees,
                                            o->used_arch, sizeof o->used_arch, schedule_warn,
                                            NULL, err, sizeof err);
        }
        if (rc != 0)
            fail("%s", err);
        snprintf(o->used_target, sizeof o->used_target, "%s", target);
    }
    for (int i = 0; hand && i < o->mks->n; i++) {
        const NamedArg *m = &o->mks->a[i];
        const Tensor *t = ir_te_find_tensor(p, m->name);
        if (!t || t->kind == TK_INPUT)
            fail("--mk %s: the program computes no tensor named '%s'", m->name, m->name);
        MicroKernel *mk = IR_NEW(p->arena, MicroKernel);
        int ns = 0;
        if (!pass_parse_microkernel(m->value, mk, &ns) || (ns != 0 && ns != t->rank))
            fail("--mk %s: not a micro-kernel of a rank-%d stage: '%s' (expected e.g. "
                 "'threads [16, 16] tile [4, 4] rchunk 16 unroll 1 vec 4 staged')",
                 m->name, t->rank, m->value);
        TargetInfo ti = pass_target_info(o->target);
        pass_target_gpu_arch(&ti, o->gpu_arch);
        char why[512];
        if (!pass_check_microkernel(mk, t, &ti, why, sizeof why))
            fail("--mk %s", why);
        sched[t->id] = (StageSchedule){1, mk, NULL};
    }
    return sched;
}

int lowering_level(const CompileOpts *o)
{
    char err[256];
    const CgTarget *t = o->records ? cg_target_cpu_arch(o->used_arch, err, sizeof err) : NULL;
    return o->cpu_level ? o->cpu_level : t ? cg_target_level(t) : dcrt_cpu_level();
}

/* Lowers the program; exits 1 with a message on an internal verifier error. */
LoopProgram *lower_program(TeProgram *p, CompileOpts *o)
{
    char err[512];
    StageSchedule *sched = records_schedule(p, o);
    TargetInfo ti = o->target == PT_CPU ? pass_target_info_cpu(lowering_level(o))
                                        : pass_target_info(o->target);
    if (o->target == PT_GPU)
        pass_target_gpu_arch(&ti, o->gpu_arch);
    LoopProgram *lp = pass_run_pipeline_sched(p, sched, &ti, &o->pipe, err, sizeof err);
    free(sched);
    if (!lp)
        ir_panic(__FILE__, __LINE__, "loop IR verifier: %s", err);
    return lp;
}

/* ---- dims given with --set (dcc run; dcc --emit=plan) ---- */

/* The dims' values from --set, checked against the program. */
int64_t *resolve_dims(const TeProgram *p, const NamedArgs *sets)
{
    int64_t *dims = calloc((size_t)p->ndims + 1, sizeof *dims);
    for (int i = 0; i < sets->n; i++)
        if (!ir_te_find_dim(p, sets->a[i].name))
            fail("--set %s: the program has no dim named '%s'", sets->a[i].name, sets->a[i].name);
    for (int i = 0; i < p->ndims; i++) {
        const Var *d = p->dims[i];
        const NamedArg *a = NULL;
        for (int j = 0; j < sets->n; j++)
            if (strcmp(sets->a[j].name, d->name) == 0)
                a = &sets->a[j];
        if (!a)
            fail("missing --set %s=VALUE (dim %s is declared in %lld..%lld)", d->name, d->name,
                 (long long)d->lo, (long long)d->hi);
        if (!parse_int(a->value, &dims[i]))
            fail("--set %s=%s: not a non-negative integer", d->name, a->value);
    }
    char err[512];
    if (!ir_check_dims(p, dims, err, sizeof err))
        fail("%s", err);
    return dims;
}

/* Stops with the driver's one-line message when there is no GPU. */
void cuda_require(void)
{
    char err[512];
    if (rt_cuda_init(err, sizeof err) != DCRT_OK)
        fail("%s", err);
}
