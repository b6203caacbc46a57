/* dcc FILE: compile, and print or write what --emit asks for. */
#include "dcc.h"

/* ---- AOT output: --emit=obj, --emit=header, --emit=obj,header ----
 *
 * File names: with one kind, -o OUT names the file. With both kinds, OUT
 * is a stem: its extension, if any, is dropped and STEM.o and STEM.h are
 * written (-o build/prog, build/prog.o and build/prog.h all give
 * build/prog.o + build/prog.h). Without -o the stem is the input's base
 * name in the current directory (prog.tex -> prog.o, prog.h). Both are
 * one set of outputs: a failure writes neither.
 */
static bool is_aot_emit(const char *emit)
{
    return strcmp(emit, "obj") == 0 || strcmp(emit, "header") == 0 ||
           strcmp(emit, "obj,header") == 0 || strcmp(emit, "header,obj") == 0;
}

/* gpu_arch NULL: the CPU object (NAME_run, kernels for each of isas);
 * else the PTX for gpu_arch embedded (NAME_launch). */
static void emit_aot(const Args *a, const char *emit, const char *out, const LoopProgram *lp,
                     const char *gpu_arch, bool libdevice, const CgTarget *const *isas, int nisas,
                     const LoopProgram *const *isa_lps)
{
    bool obj = strstr(emit, "obj") != NULL, hdr = strstr(emit, "header") != NULL;
    char err[8192];
    char *text[2] = {NULL, NULL}, *ptx = NULL;
    size_t len[2] = {0, 0};
    if (obj && gpu_arch && !(ptx = cg_emit_ptx(lp, gpu_arch, libdevice, err, sizeof err)))
        ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
    CgHostOpts o = {.nisas = nisas, .isas = isas, .isa_lps = isa_lps,
                    .ptx = ptx ? ptx : gpu_arch ? "" : NULL};
    if (obj) {
        CgModule *m = cg_host_module(lp, &o, err, sizeof err);
        if (!m || !(text[0] = cg_module_emit(m, true, &len[0], err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
        cg_module_destroy(m);
    }
    free(ptx);
    bool stream = out && rt_out_is_stream(out);
    if (hdr) { /* the include guard from the header's name, or the program's */
        char *hpath = aot_path(stream ? NULL : out, a->file, ".h", obj && hdr);
        const char *slash = strrchr(hpath, '/');
        char *stem = strdup(slash ? slash + 1 : hpath);
        char *dot = strrchr(stem, '.');
        if (dot && dot != stem)
            *dot = 0;
        o.guard = stem;
        if (!(text[1] = cg_emit_header(lp, &o, err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
        len[1] = strlen(text[1]);
        free(stem);
        free(hpath);
    }
    RtOutFiles *files = outputs_begin(a);
    char *path[2] = {NULL, NULL};
    const char *ext[2] = {".o", ".h"};
    if (stream && obj && hdr) /* one stream: the object, then the header */
        outputs_add(files, out, text[0], len[0], text[1], len[1]);
    else
        for (int i = 0; i < 2; i++)
            if (text[i]) {
                path[i] = aot_path(out, a->file, ext[i], obj && hdr);
                outputs_add(files, path[i], text[i], len[i], "", 0);
            }
    outputs_commit(files);
    for (int i = 0; i < 2; i++) {
        free(text[i]);
        free(path[i]);
    }
}

/* Writes what a module prints (LLVM text, or assembly / PTX). */
static void emit_module(const Args *a, CgModule *m, bool assembly, const char *out,
                        const char *err)
{
    char why[512];
    size_t len = 0;
    char *text = !m ? NULL : assembly ? cg_module_emit(m, false, &len, why, sizeof why)
                                      : cg_module_print(m, why, sizeof why);
    if (!text)
        ir_panic(__FILE__, __LINE__, "code generation failed: %s", m ? why : err);
    write_output(a, out, text, assembly ? len : strlen(text));
    free(text);
    cg_module_destroy(m);
}

/* --emit=tex: the program as .tex text at out, each constant's elements
 * in a .npy file beside it, STEM.NAME.npy (STEM: out less its .tex), which
 * the text names; all written or none. */
static void emit_tex(const Args *a, const char *out, const TeProgram *p)
{
    const char **paths = calloc((size_t)p->ntensors + 1, sizeof *paths);
    char **files = calloc((size_t)p->ntensors + 1, sizeof *files);
    if (!paths || !files)
        fail("out of memory");
    size_t n = out ? strlen(out) : 0;
    size_t stem = n > 4 && strcmp(out + n - 4, ".tex") == 0 ? n - 4 : n;
    const char *base = out ? strrchr(out, '/') : NULL;
    size_t dir = base ? (size_t)(base - out) + 1 : 0;
    int nconst = 0;
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind != TK_INPUT || t->body || !t->data)
            continue;
        if (!out)
            fail("--emit=tex writes the constants of %s beside the program: give -o FILE.tex",
                 p->name);
        size_t len = stem + strlen(t->name) + 8;
        files[i] = malloc(len);
        if (!files[i])
            fail("out of memory");
        snprintf(files[i], len, "%.*s.%s.npy", (int)stem, out, t->name);
        paths[i] = files[i] + dir; /* beside the .tex: its name alone */
        nconst++;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        fail("out of memory");
    ir_print_te_consts(m, p, paths);
    fclose(m);
    if (!out) {
        write_output(a, NULL, text, len);
    } else {
        RtOutFiles *o = outputs_begin(a);
        outputs_add(o, out, text, len, "", 0);
        char (*head)[RT_NPY_HEAD_MAX] = calloc((size_t)nconst + 1, sizeof *head);
        if (!head)
            fail("out of memory");
        for (int i = 0, k = 0; i < p->ntensors; i++) {
            const Tensor *t = p->tensors[i];
            if (!files[i])
                continue;
            RtArray arr = {.rank = t->rank, .dtype = (int32_t)t->dtype};
            for (int j = 0; j < t->rank; j++) {
                bool fixed = ir_is_const(t->shape[j], &arr.shape[j]);
                IR_ASSERT(fixed); /* a constant's extents are */
            }
            size_t hlen = rt_npy_header(&arr, head[k]);
            outputs_add(o, files[i], head[k++], hlen, t->data, (size_t)ir_te_bytes(t, NULL));
        }
        outputs_commit(o);
        free(head);
    }
    for (int i = 0; i < p->ntensors; i++)
        free(files[i]);
    free(files);
    free(paths);
    free(text);
}

enum { MAX_ISAS = 8 };

/* Which lowering each instruction set's kernels come from (isa_lps): lp
 * for those of the vectors lp was lowered for (the records' CPU's, or the
 * first set's), else one lowered here with the default schedule for that
 * set's level, one per vector width (in the program's arena, as lp). */
static void isa_lowerings(TeProgram *p, const CompileOpts *co, LoopProgram *lp,
                          const CgTarget *const *isas, int nisas, const LoopProgram **isa_lps)
{
    /* the vectors of each lowering's level (pass_target_info_cpu's rule) */
    int lanes = pass_target_info_cpu(lowering_level(co)).vec_width, w[MAX_ISAS];
    for (int i = 0; i < nisas; i++) {
        w[i] = pass_target_info_cpu(cg_target_level(isas[i])).vec_width;
        isa_lps[i] = lp;
        if (w[i] == lanes)
            continue;
        for (int j = 0; j < i && isa_lps[i] == lp; j++)
            if (isa_lps[j] != lp && w[j] == w[i])
                isa_lps[i] = isa_lps[j];
        if (isa_lps[i] == lp) {
            CompileOpts c = {.pipe = {.verify_each = co->pipe.verify_each},
                             .target = PT_CPU,
                             .cpu_level = cg_target_level(isas[i])};
            isa_lps[i] = lower_program(p, &c);
        }
    }
}

/* The instruction sets of a CPU object without --arch: the CPU the records
 * were tuned on (this one's exactly: native) and a portable fallback;
 * without records, each x86-64 level from 2 to 4. */
static int default_isas(const CompileOpts *co, const CgTarget **isas)
{
    char err[512], list[128];
    if (!co->records)
        snprintf(list, sizeof list, "x86-64-v2,x86-64-v3,x86-64-v4");
    else if (strcmp(co->used_arch, srch_host_arch()) == 0)
        snprintf(list, sizeof list, "native,x86-64-v2");
    else if (cg_target_cpu_arch(co->used_arch, err, sizeof err))
        snprintf(list, sizeof list, "%s,x86-64-v2", co->used_arch);
    else /* tuned on a CPU this dcc does not know */
        snprintf(list, sizeof list, "x86-64-v2,x86-64-v3,x86-64-v4");
    int n = cg_cpu_arch_list(list, isas, MAX_ISAS, err, sizeof err);
    IR_ASSERT(n > 0);
    return n;
}

int cmd_compile(int argc, char **argv)
{
    Args a = parse_args(CMD_COMPILE, argc, argv);
    const char *out = a.val[O_OUT], *emit = a.val[O_EMIT], *arch = a.val[O_ARCH];
    const char *target = a.val[O_TARGET];
    const NamedArgs *sets = &a.named[O_SET];
    CompileOpts co = {.target = target && strcmp(target, "nvptx") == 0 ? PT_GPU : PT_CPU,
                      .records = a.val[O_RECORDS],
                      .mks = &a.named[O_MK],
                      .pipe = {.dump_after = a.val[O_DUMP],
                               .stop_after = a.val[O_STOP],
                               .verify_each = a.val[O_VERIFY] != NULL,
                               .time_passes = a.val[O_TIME] != NULL}};
    bool no_libdevice = a.val[O_NOLIBDEV] != NULL;
    if (out && !emit) /* as cc -c: the object of the target and its header */
        emit = "obj,header";
    bool aot = emit && is_aot_emit(emit);
    if (out && strcmp(out, "-") == 0 && !aot) /* -o -: standard output */
        out = NULL;
    if (aot && out && strchr(emit, ',') && strcmp(out, "-") != 0) { /* a stem: STEM.o and STEM.h */
        const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
        if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
            usage_error("-o %s names a directory: give the stem of the object and header "
                        "(e.g. -o %s%sprog)", out, out, out[strlen(out) - 1] == '/' ? "" : "/");
    }
    bool ptx = emit && strcmp(emit, "ptx") == 0;
    bool dispatch = emit && strcmp(emit, "dispatch") == 0;
    bool plan = emit && strcmp(emit, "plan") == 0;
    if (ptx && target && strcmp(target, "cpu") == 0)
        usage_error("--emit=ptx needs --target=nvptx");
    if (ptx)
        co.target = PT_GPU;
    if (emit && co.target == PT_GPU && strcmp(emit, "asm") == 0)
        usage_error("--emit=asm is host assembly: use --emit=ptx for --target=nvptx");
    if (sets->n && !plan)
        usage_error("--set is for --emit=plan (and dcc run)");
    if (co.pipe.stop_after && strcmp(co.pipe.stop_after, pass_names()[0]) == 0 && emit &&
        strcmp(emit, "loops") == 0) /* the first pass works on the TE program */
        usage_error("--stop-after=%s stops before there is loop IR (lower makes it): "
                    "--emit=loops needs a later pass; --dump-after=%s shows the program as "
                    "%s leaves it", co.pipe.stop_after, co.pipe.stop_after, co.pipe.stop_after);
    if (co.pipe.stop_after && emit && strcmp(emit, "loops") != 0)
        usage_error("--stop-after=%s stops before code generation: it goes with --emit=loops "
                    "(the loop IR after that pass) or no --emit (the dumps only)%s",
                    co.pipe.stop_after,
                    a.val[O_EMIT] ? "" : "; -o without --emit writes an object and a header");
    /* --arch: the GPU's architecture, or the CPU instruction sets of an object */
    const CgTarget *isas[MAX_ISAS];
    int nisas = 0;
    char err[512];
    if (co.target == PT_GPU) {
        if (!arch)
            arch = "sm_80";
        else if (!cg_nvptx_arch_valid(arch))
            usage_error("unknown --arch '%s' (expected sm_75, sm_80, sm_86, sm_87, sm_89, "
                        "sm_90 or sm_90a)", arch);
        co.gpu_arch = arch;
    } else {
        if (arch && strncmp(arch, "sm_", 3) == 0)
            usage_error("--arch %s is a GPU architecture: add --target=nvptx", arch);
        if ((nisas = cg_cpu_arch_list(arch ? arch : "native", isas, MAX_ISAS, err, sizeof err)) < 0)
            usage_error("%s", err);
        if (arch && (!emit || (!aot && strcmp(emit, "asm") != 0 && strcmp(emit, "llvm") != 0)))
            usage_error("--arch with the cpu target is for --emit=obj, asm or llvm");
        if (arch && !aot && nisas != 1)
            usage_error("--emit=%s shows one instruction set: give --arch one name", emit);
    }
    FeUnit l = load_fused(&a);
    if (dispatch) {
        SrchTree **trees = calloc((size_t)l.prog->ntensors + 1, sizeof *trees);
        co.trees = trees;
        free(records_schedule(l.prog, &co));
        char *text = srch_schedule_to_json(l.prog, co.used_target, co.used_arch, trees);
        size_t n = strlen(text);
        text = realloc(text, n + 2);
        text[n++] = '\n';
        write_output(&a, out, text, n);
        free(text);
        for (int i = 0; i < l.prog->ntensors; i++)
            srch_tree_free(trees[i]);
        free(trees);
        free_args(&a);
        fe_unload(&l);
        return 0;
    }
    int64_t *dims = plan ? resolve_dims(l.prog, sets) : NULL;
    bool tex = emit && strcmp(emit, "tex") == 0;
    bool lowering = (emit && strcmp(emit, "te") != 0 && !tex) || co.pipe.dump_after ||
                    co.pipe.stop_after || co.pipe.time_passes || co.pipe.verify_each;
    /* a CPU program is lowered for the vectors of its first instruction set
     * (records: for those they were tuned with, the host's) */
    if (co.target == PT_CPU && !co.records) {
        if (aot && !arch)
            nisas = default_isas(&co, isas);
        co.cpu_level = arch || aot ? cg_target_level(isas[0]) : 0;
    }
    LoopProgram *lp = lowering ? lower_program(l.prog, &co) : NULL;
    if (lp && co.target == PT_GPU && (aot || ptx || (emit && strcmp(emit, "llvm") == 0)) &&
        cg_nvptx_check_params(lp, err, sizeof err) < 0)
        fail("%s", err);
    if (aot) {
        if (co.target == PT_CPU && !arch && co.records) /* the records' CPU first */
            nisas = default_isas(&co, isas);
        const LoopProgram *isa_lps[MAX_ISAS];
        if (co.target == PT_CPU)
            isa_lowerings(l.prog, &co, lp, isas, nisas, isa_lps);
        emit_aot(&a, emit, out, lp, co.target == PT_GPU ? arch : NULL, !no_libdevice, isas, nisas,
                 co.target == PT_CPU ? isa_lps : NULL);
    } else if (plan) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (ex_plan_print(m, lp, dims, err, sizeof err) != 0)
            fail("%s", err);
        fclose(m);
        write_output(&a, out, text, len);
        free(text);
    } else if (emit && co.target == PT_GPU && (ptx || strcmp(emit, "llvm") == 0)) {
        emit_module(&a, cg_nvptx_module(lp, arch, !no_libdevice, true, err, sizeof err), ptx, out,
                    err);
    } else if (emit && (strcmp(emit, "llvm") == 0 || strcmp(emit, "asm") == 0)) {
        emit_module(&a, cg_kernels_module(lp, isas[0], NULL, true, err, sizeof err),
                    strcmp(emit, "asm") == 0, out, err);
    } else if (tex) {
        emit_tex(&a, out, l.prog);
    } else if (emit) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (strcmp(emit, "te") == 0)
            ir_print_te(m, l.prog);
        else
            ir_print_loops(m, lp);
        fclose(m);
        write_output(&a, out, text, len);
        free(text);
    }
    free(dims);
    free_args(&a);
    fe_unload(&l);
    return 0;
}
