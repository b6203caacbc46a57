/* dcc: the command-line driver. It is the only place that prints to the
 * user and decides exit status: 0 success, 1 bad input or a failed check,
 * 2 bad usage. Everything it does is a call into the libraries:
 *
 *   dcc FILE.tex [--emit=te] [-o OUT]      compile and dump
 *   dcc run FILE.tex --set T=5 ...         run with .npy or seeded inputs
 *
 * Output files are written whole or not at all (temporary file + rename),
 * so a failed command never leaves a partial file behind.
 */
#include "dietcode/codegen.h"
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DCC_VERSION "0.1.0"

enum { EXIT_BAD_INPUT = 1, EXIT_USAGE = 2, MAX_ARGS = 64 };

static const char *usage_text =
    "usage: dcc FILE.tex [-o OUT] [--emit=te|loops|plan|llvm|asm|ptx|obj|header|dispatch[,...]]\n"
    "               [--target=cpu|nvptx] [--arch=ARCH[,...]] [--no-libdevice] [--records=FILE]\n"
    "               [--set NAME=VALUE ...] [--mk NAME=MICROKERNEL ...]\n"
    "               [--dump-after=PASS|all] [--stop-after=PASS]\n"
    "               [--verify-each] [--time-passes]\n"
    "       dcc run FILE.tex [--target=cpu|reference|loops|emu|cuda] --set NAME=VALUE ...\n"
    "               [--input NAME=PATH.npy ...] [--output NAME=PATH.npy ...]\n"
    "               [--seed N] [--check] [--bench N] [--records=FILE]\n"
    "               [--mk NAME=MICROKERNEL ...]\n"
    "       dcc tune FILE.tex [--target=cpu|cuda|model] [--arch=sm_80] [--trials N]\n"
    "               [--records=FILE] [--shapes NAME=LO..HI[:COUNT] ...] [--per-shape]\n"
    "               [--seed N]\n"
    "       dcc --help | --version\n"
    "\n"
    "  --emit=te           print the checked tensor-expression program\n"
    "  --emit=loops        print the loop IR after the last pass\n"
    "  --emit=plan         print the launch plan of one call (dims from --set):\n"
    "                      each stage's variant, its launches, the workspace\n"
    "  --emit=llvm|asm     print the optimised LLVM IR or host assembly\n"
    "  --emit=ptx          print the kernels as PTX (implies --target=nvptx)\n"
    "  --target=nvptx      lower for the GPU: --emit=loops|llvm show its forms\n"
    "  --arch=sm_XX        GPU architecture: sm_75, sm_80 (default), sm_86, sm_87,\n"
    "                      sm_89, sm_90, sm_90a\n"
    "  --arch=LIST         CPU instruction sets of an object (comma-separated; the\n"
    "                      best one the CPU has runs): native, a CPU name such as\n"
    "                      skylake-avx512 or znver4, x86-64, x86-64-v2, -v3, -v4.\n"
    "                      Default: the CPU the records were tuned on and x86-64-v2;\n"
    "                      without records x86-64-v2,x86-64-v3,x86-64-v4\n"
    "  --no-libdevice      GPU math without CUDA's libdevice (approximations)\n"
    "  --emit=obj,header   write an x86-64 object and its C header: NAME_run (cpu,\n"
    "                      the kernels inside) or NAME_launch (nvptx, PTX inside),\n"
    "                      and NAME_workspace_size\n"
    "                      (-o STEM: STEM.o, STEM.h; one kind: -o names the file;\n"
    "                      no -o: FILE's base name in the current directory)\n"
    "  -o OUT              write the emitted text to OUT instead of stdout\n"
    "  --dump-after=PASS   print the IR after PASS (or all passes) on stderr\n"
    "  --stop-after=PASS   stop the pipeline after PASS\n"
    "  --verify-each       run the loop IR verifier after every pass\n"
    "  --time-passes       print the time each pass takes\n"
    "  --records=FILE      compile with the kernels and dispatch tree tuned into FILE\n"
    "  --emit=dispatch     print the dispatch trees (from --records) as JSON\n"
    "  --mk NAME=MK        compile stage NAME with this micro-kernel (the form\n"
    "                      --emit=loops prints, e.g. 'threads [1, 8] tile [1, 1]\n"
    "                      rchunk 128 unroll 1 vec 4 along reduction rthreads 32'),\n"
    "                      over records and defaults; an inlined stage has none\n"
    "  --target=cpu        (run) the object --emit=obj writes, JIT-compiled for this\n"
    "                      CPU (default)\n"
    "  --target=reference  (run) run with the reference interpreter\n"
    "  --target=loops      (run) interpret the lowered loop IR (for debugging)\n"
    "  --target=cuda       (run) the GPU object (PTX) through the CUDA driver\n"
    "  --target=emu        (run) the GPU form of the kernels on a SIMT emulator on\n"
    "                      this CPU (barriers, shared memory; slow, for testing)\n"
    "  --set NAME=VALUE    the run-time value of a dim (every dim needs one; run and\n"
    "                      --emit=plan)\n"
    "  --input NAME=PATH   read input NAME from a .npy file (float32, C order);\n"
    "                      inputs not given are filled from a seeded generator\n"
    "  --output NAME=PATH  write output NAME to a .npy file\n"
    "  --seed N            seed of the generated inputs (default 1)\n"
    "  --check             compare every output with the reference interpreter\n"
    "  --bench N           time N runs after a warm-up and print the median\n"
    "  tune                search micro-kernels for every shape of the range at once\n"
    "                      and fit the dispatch tree; measurements go to --records\n"
    "                      (default: FILE's base name + .records.jsonl), resumable\n"
    "  --target=model      (tune) no hardware: the cost model's estimates, for PTX\n"
    "  --trials N          (tune) measurements of the search (default 64); with\n"
    "                      --per-shape, of each shape's own search\n"
    "  --shapes D=LO..HI[:COUNT]  (tune) the range of dim D to tune for (default:\n"
    "                      as declared); every point when there are at most 256\n"
    "  --per-shape         (tune) the baseline: tune each shape on its own\n";

static _Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("dcc: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n(see 'dcc --help')\n", stderr);
    va_end(ap);
    exit(EXIT_USAGE);
}

/* The option getopt_long just refused (after it returned '?' or ':'). */
static _Noreturn void bad_option(char **argv)
{
    const char *opt = argv[optind - 1];
    if (strncmp(opt, "--", 2) == 0)
        usage_error("option '%s' is unknown or needs a value", opt);
    if (optopt == 'o')
        usage_error("option '-o' needs a value");
    usage_error("option '-%c' is unknown", optopt ? optopt : '?');
}

static _Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("dcc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_BAD_INPUT);
}

/* Writes text to path atomically, or to stdout when path is NULL. */
static void write_output(const char *path, const char *text, size_t len)
{
    if (!path) {
        fwrite(text, 1, len, stdout);
        return;
    }
    char *tmp = malloc(strlen(path) + 32);
    sprintf(tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        fail("%s: cannot write: %s", path, strerror(errno));
    bool ok = fwrite(text, 1, len, f) == len;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        fail("%s: cannot write: %s", path, strerror(e));
    }
    free(tmp);
}

/* Parses a non-negative decimal integer; false on anything else. */
static bool parse_int(const char *s, int64_t *out)
{
    if (!*s)
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < 0 || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return false;
    *out = v;
    return true;
}

/* ---- loading a program ---- */

/* Reads and checks FILE; prints diagnostics and exits 1 on errors. */
static FeUnit load_program(const char *path)
{
    FeUnit u;
    char err[512];
    int rc = fe_load(path, &u, err, sizeof err);
    if (rc < 0)
        fail("%s", err);
    if (rc > 0) {
        ir_diags_print(&u.diags, stderr);
        fprintf(stderr, "%d error%s\n", u.diags.count, u.diags.count == 1 ? "" : "s");
        exit(EXIT_BAD_INPUT);
    }
    return u;
}

/* ---- dcc FILE.tex ---- */

/* Options shared by compiling and running: the pipeline's. */
typedef struct NamedArg {
    const char *name, *value;
} NamedArg;

typedef struct NamedArgs {
    NamedArg a[MAX_ARGS];
    int n;
} NamedArgs;

static void add_named(NamedArgs *arr, const char *arg, const char *flag)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        usage_error("%s expects NAME=VALUE, got '%s'", flag, arg);
    if (arr->n == MAX_ARGS)
        usage_error("too many %s options", flag);
    NamedArg *x = &arr->a[arr->n];
    x->name = strndup(arg, (size_t)(eq - arg));
    x->value = eq + 1;
    for (int i = 0; i < arr->n; i++)
        if (strcmp(arr->a[i].name, x->name) == 0)
            usage_error("%s %s given twice", flag, x->name);
    arr->n++;
}

static void free_named(NamedArgs *arr)
{
    for (int i = 0; i < arr->n; i++)
        free((char *)arr->a[i].name);
    arr->n = 0;
}

typedef struct CompileOpts {
    PipelineOpts pipe;
    PassTarget target;
    const char *gpu_arch;  /* GPU: the sm_XX compiled for (records of it preferred) */
    const char *records;   /* tuned kernels and dispatch, or NULL */
    SrchTree **trees;      /* filled from records when non-NULL (per tensor id) */
    const NamedArgs *mks;  /* --mk NAME=TEXT: stages' micro-kernels given by hand */
    /* what the records used (set by lower_program and records_schedule) */
    char used_target[16], used_arch[64];
} CompileOpts;

static bool is_pass_name(const char *s)
{
    for (const char *const *n = pass_names(); *n; n++)
        if (strcmp(*n, s) == 0)
            return true;
    return false;
}

static void set_dump_after(CompileOpts *o, const char *v)
{
    if (strcmp(v, "all") != 0 && !is_pass_name(v))
        usage_error("unknown pass '%s' for --dump-after", v);
    o->pipe.dump_after = v;
}

static void set_stop_after(CompileOpts *o, const char *v)
{
    if (!is_pass_name(v))
        usage_error("unknown pass '%s' for --stop-after", v);
    o->pipe.stop_after = v;
}

/* The schedule tuned into o->records for p, then the micro-kernels given
 * with --mk (NULL with neither); exits 1 when the file cannot be used or a
 * --mk names no stage or does not parse. A CPU build takes the cpu records
 * of this CPU (else of the CPU the file has records of); a GPU build the
 * cuda records of its arch (else of another GPU), else the model
 * backend's. o->used_target and o->used_arch say which. */
static StageSchedule *records_schedule(TeProgram *p, CompileOpts *o)
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
                                            o->used_arch, sizeof o->used_arch, err, sizeof err);
        if (rc == 1 && gpu) { /* no cuda records: tuned offline? */
            target = "model";
            rc = srch_schedule_from_records(p, o->records, target, arch, sched, o->trees,
                                            o->used_arch, sizeof o->used_arch, err, sizeof err);
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
        sched[t->id] = (StageSchedule){1, mk, NULL};
    }
    return sched;
}

/* Lowers the program; exits 1 with a message on an internal verifier error. */
static LoopProgram *lower_program(TeProgram *p, CompileOpts *o)
{
    TargetInfo ti = pass_target_info(o->target);
    char err[512];
    StageSchedule *sched = records_schedule(p, o);
    LoopProgram *lp = pass_run_pipeline_sched(p, sched, &ti, &o->pipe, err, sizeof err);
    free(sched);
    if (!lp)
        ir_panic(__FILE__, __LINE__, "loop IR verifier: %s", err);
    return lp;
}

/* ---- dims given with --set (dcc run; dcc --emit=plan) ---- */

/* The dims' values from --set, checked against the program. */
static int64_t *resolve_dims(const TeProgram *p, const NamedArgs *sets)
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

/* ---- AOT output: --emit=obj, --emit=header, --emit=obj,header ----
 *
 * File names: with one kind, -o OUT names the file. With both kinds, OUT
 * is a stem: its extension, if any, is dropped and STEM.o and STEM.h are
 * written (-o build/prog, build/prog.o and build/prog.h all give
 * build/prog.o + build/prog.h). Without -o the stem is the input's base
 * name in the current directory (prog.tex -> prog.o, prog.h). Every file is
 * written to a temporary beside it first and renamed only when all are
 * complete, so a failure leaves none of them.
 */
static bool is_aot_emit(const char *emit)
{
    return strcmp(emit, "obj") == 0 || strcmp(emit, "header") == 0 ||
           strcmp(emit, "obj,header") == 0 || strcmp(emit, "header,obj") == 0;
}

static char *aot_path(const char *out, const char *file, const char *ext, bool both)
{
    if (out && !both)
        return strdup(out);
    const char *src = out ? out : file;
    const char *base = out ? src : (strrchr(src, '/') ? strrchr(src, '/') + 1 : src);
    const char *slash = strrchr(base, '/');
    const char *dot = strrchr(slash ? slash + 1 : base, '.');
    size_t n = dot && dot != (slash ? slash + 1 : base) ? (size_t)(dot - base) : strlen(base);
    char *p = malloc(n + strlen(ext) + 1);
    memcpy(p, base, n);
    strcpy(p + n, ext);
    return p;
}

/* gpu_arch NULL: the CPU object (NAME_run, kernels for each of isas);
 * else the PTX for gpu_arch embedded (NAME_launch). */
static void emit_aot(const char *emit, const char *out, const char *file, const LoopProgram *lp,
                     const char *gpu_arch, bool libdevice, const CgTarget *const *isas, int nisas)
{
    bool obj = strstr(emit, "obj") != NULL, hdr = strstr(emit, "header") != NULL;
    char err[8192];
    char *text[2] = {NULL, NULL}, *ptx = NULL;
    size_t len[2] = {0, 0};
    if (obj && gpu_arch && !(ptx = cg_emit_ptx(lp, gpu_arch, libdevice, err, sizeof err)))
        ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
    CgHostOpts o = {.nisas = nisas, .isas = isas, .ptx = ptx ? ptx : gpu_arch ? "" : NULL};
    if (obj) {
        CgModule *m = cg_host_module(lp, &o, err, sizeof err);
        if (!m || !(text[0] = cg_module_emit(m, true, &len[0], err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
        cg_module_destroy(m);
    }
    free(ptx);
    if (hdr) {
        if (!(text[1] = cg_emit_header(lp, &o, err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
        len[1] = strlen(text[1]);
    }
    char *path[2] = {NULL, NULL}, *tmp[2] = {NULL, NULL};
    const char *ext[2] = {".o", ".h"};
    for (int i = 0; i < 2; i++) {
        if (!text[i])
            continue;
        path[i] = aot_path(out, file, ext[i], obj && hdr);
        tmp[i] = malloc(strlen(path[i]) + 32);
        sprintf(tmp[i], "%s.tmp.%ld", path[i], (long)getpid());
        FILE *f = fopen(tmp[i], "wb");
        bool ok = f && fwrite(text[i], 1, len[i], f) == len[i];
        ok &= f && fclose(f) == 0;
        if (!ok) {
            int e = errno;
            for (int j = 0; j <= i; j++)
                if (tmp[j])
                    remove(tmp[j]);
            fail("%s: cannot write: %s", path[i], strerror(e));
        }
    }
    for (int i = 0; i < 2; i++)
        if (tmp[i] && rename(tmp[i], path[i]) != 0) {
            int e = errno;
            for (int j = 0; j < 2; j++) {
                if (tmp[j])
                    remove(tmp[j]);
                if (j < i && path[j])
                    remove(path[j]);
            }
            fail("%s: cannot write: %s", path[i], strerror(e));
        }
    for (int i = 0; i < 2; i++) {
        free(text[i]);
        free(path[i]);
        free(tmp[i]);
    }
}

/* Writes what a module prints (LLVM text, or assembly / PTX). */
static void emit_module(CgModule *m, bool assembly, const char *out, const char *err)
{
    char why[512];
    size_t len = 0;
    char *text = !m ? NULL : assembly ? cg_module_emit(m, false, &len, why, sizeof why)
                                      : cg_module_print(m, why, sizeof why);
    if (!text)
        ir_panic(__FILE__, __LINE__, "code generation failed: %s", m ? why : err);
    write_output(out, text, assembly ? len : strlen(text));
    free(text);
    cg_module_destroy(m);
}

enum { MAX_ISAS = 8 };

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

static int cmd_compile(int argc, char **argv)
{
    const char *out = NULL, *emit = NULL, *file = NULL, *arch = NULL;
    CompileOpts co = {.target = PT_CPU};
    NamedArgs sets = {.n = 0}, mks = {.n = 0};
    bool target_cpu = false, no_libdevice = false;
    enum { O_DUMP = 256, O_STOP, O_VERIFY, O_TIME, O_TARGET, O_ARCH, O_NOLIBDEV, O_RECORDS, O_SET,
           O_MK };
    static const struct option opts[] = {
        {"emit", required_argument, 0, 'e'},
        {"output", required_argument, 0, 'o'},
        {"dump-after", required_argument, 0, O_DUMP},
        {"stop-after", required_argument, 0, O_STOP},
        {"verify-each", no_argument, 0, O_VERIFY},
        {"time-passes", no_argument, 0, O_TIME},
        {"target", required_argument, 0, O_TARGET},
        {"arch", required_argument, 0, O_ARCH},
        {"no-libdevice", no_argument, 0, O_NOLIBDEV},
        {"records", required_argument, 0, O_RECORDS},
        {"set", required_argument, 0, O_SET},
        {"mk", required_argument, 0, O_MK},
        {0, 0, 0, 0},
    };
    co.mks = &mks;
    int c;
    optind = 1;
    opterr = 0; /* bad_option() reports, naming dcc rather than argv[0] */
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (c) {
        case 'e': emit = optarg; break;
        case 'o': out = optarg; break;
        case O_DUMP: set_dump_after(&co, optarg); break;
        case O_STOP: set_stop_after(&co, optarg); break;
        case O_VERIFY: co.pipe.verify_each = true; break;
        case O_TIME: co.pipe.time_passes = true; break;
        case O_TARGET:
            if (strcmp(optarg, "cpu") == 0)
                co.target = PT_CPU, target_cpu = true;
            else if (strcmp(optarg, "nvptx") == 0)
                co.target = PT_GPU;
            else
                usage_error("unknown --target '%s' (expected cpu or nvptx)", optarg);
            break;
        case O_ARCH: arch = optarg; break;
        case O_NOLIBDEV: no_libdevice = true; break;
        case O_RECORDS: co.records = optarg; break;
        case O_SET: add_named(&sets, optarg, "--set"); break;
        case O_MK: add_named(&mks, optarg, "--mk"); break;
        default: bad_option(argv);
        }
    }
    if (optind != argc - 1)
        usage_error(optind == argc ? "no input file" : "more than one input file");
    file = argv[optind];
    bool aot = emit && is_aot_emit(emit);
    bool ptx = emit && strcmp(emit, "ptx") == 0;
    bool dispatch = emit && strcmp(emit, "dispatch") == 0;
    bool plan = emit && strcmp(emit, "plan") == 0;
    if (ptx && target_cpu)
        usage_error("--emit=ptx needs --target=nvptx");
    if (ptx)
        co.target = PT_GPU;
    if (emit && co.target == PT_GPU && strcmp(emit, "asm") == 0)
        usage_error("--emit=asm is host assembly: use --emit=ptx for --target=nvptx");
    if (emit && !aot && !ptx && !dispatch && !plan && strcmp(emit, "te") != 0 &&
        strcmp(emit, "loops") != 0 && strcmp(emit, "llvm") != 0 && strcmp(emit, "asm") != 0)
        usage_error("unknown --emit kind '%s' (expected te, loops, plan, llvm, asm, ptx, obj, "
                    "header, obj,header or dispatch)", emit);
    if (out && !emit)
        usage_error("-o needs --emit");
    if (sets.n && !plan)
        usage_error("--set is for --emit=plan (and dcc run)");
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
    FeUnit l = load_program(file);
    if (dispatch) {
        SrchTree **trees = calloc((size_t)l.prog->ntensors + 1, sizeof *trees);
        co.trees = trees;
        free(records_schedule(l.prog, &co));
        char *text = srch_schedule_to_json(l.prog, co.used_target, co.used_arch, trees);
        size_t n = strlen(text);
        text = realloc(text, n + 2);
        text[n++] = '\n';
        write_output(out, text, n);
        free(text);
        for (int i = 0; i < l.prog->ntensors; i++)
            srch_tree_free(trees[i]);
        free(trees);
        free_named(&sets);
        free_named(&mks);
        fe_unload(&l);
        return 0;
    }
    int64_t *dims = plan ? resolve_dims(l.prog, &sets) : NULL;
    bool lowering = (emit && strcmp(emit, "te") != 0) || co.pipe.dump_after ||
                    co.pipe.stop_after || co.pipe.time_passes || co.pipe.verify_each;
    LoopProgram *lp = lowering ? lower_program(l.prog, &co) : NULL;
    if (emit && lp && co.pipe.stop_after) {
        free(dims);
        free_named(&sets);
        free_named(&mks);
        fe_unload(&l);
        return 0; /* --stop-after: the dumps were the output */
    }
    if (aot) {
        if (co.target == PT_CPU && !arch)
            nisas = default_isas(&co, isas);
        emit_aot(emit, out, file, lp, co.target == PT_GPU ? arch : NULL, !no_libdevice, isas, nisas);
    } else if (plan) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (ex_plan_print(m, lp, dims, err, sizeof err) != 0)
            fail("%s", err);
        fclose(m);
        write_output(out, text, len);
        free(text);
    } else if (emit && co.target == PT_GPU && (ptx || strcmp(emit, "llvm") == 0)) {
        emit_module(cg_nvptx_module(lp, arch, !no_libdevice, true, err, sizeof err), ptx, out, err);
    } else if (emit && (strcmp(emit, "llvm") == 0 || strcmp(emit, "asm") == 0)) {
        emit_module(cg_kernels_module(lp, isas[0], NULL, true, err, sizeof err),
                    strcmp(emit, "asm") == 0, out, err);
    } else if (emit) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (strcmp(emit, "te") == 0)
            ir_print_te(m, l.prog);
        else
            ir_print_loops(m, lp);
        fclose(m);
        write_output(out, text, len);
        free(text);
    }
    free(dims);
    free_named(&sets);
    free_named(&mks);
    fe_unload(&l);
    return 0;
}

/* ---- dcc run ---- */

typedef struct RunOpts {
    const char *file, *target;
    NamedArgs sets, inputs, outputs, mks;
    uint64_t seed;
    bool check;
    int64_t bench;
    const char *records;
} RunOpts;

static void free_run_opts(RunOpts *o)
{
    free_named(&o->sets);
    free_named(&o->inputs);
    free_named(&o->outputs);
    free_named(&o->mks);
}

static RunOpts parse_run_opts(int argc, char **argv)
{
    RunOpts o = {.target = "cpu", .seed = 1};
    static const struct option opts[] = {
        {"target", required_argument, 0, 't'}, {"set", required_argument, 0, 's'},
        {"input", required_argument, 0, 'i'},  {"output", required_argument, 0, 'o'},
        {"seed", required_argument, 0, 'S'},   {"check", no_argument, 0, 'c'},
        {"bench", required_argument, 0, 'b'},  {"records", required_argument, 0, 'r'},
        {"mk", required_argument, 0, 'm'},
        {0, 0, 0, 0},
    };
    int c;
    int64_t v;
    optind = 1;
    opterr = 0; /* bad_option() reports, naming dcc rather than argv[0] */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': o.target = optarg; break;
        case 's': add_named(&o.sets, optarg, "--set"); break;
        case 'i': add_named(&o.inputs, optarg, "--input"); break;
        case 'o': add_named(&o.outputs, optarg, "--output"); break;
        case 'S':
            if (!parse_int(optarg, &v))
                usage_error("--seed expects a non-negative integer, got '%s'", optarg);
            o.seed = (uint64_t)v;
            break;
        case 'c': o.check = true; break;
        case 'r': o.records = optarg; break;
        case 'm': add_named(&o.mks, optarg, "--mk"); break;
        case 'b':
            if (!parse_int(optarg, &v) || v < 1 || v > 1000000)
                usage_error("--bench expects a run count from 1 to 1000000, got '%s'", optarg);
            o.bench = v;
            break;
        default: bad_option(argv);
        }
    }
    if (optind != argc - 1)
        usage_error(optind == argc ? "no input file" : "more than one input file");
    o.file = argv[optind];
    if (strcmp(o.target, "reference") != 0 && strcmp(o.target, "cpu") != 0 &&
        strcmp(o.target, "loops") != 0 && strcmp(o.target, "emu") != 0 &&
        strcmp(o.target, "cuda") != 0)
        usage_error("unknown --target '%s' (expected reference, cpu, loops, emu or cuda)",
                    o.target);
    return o;
}

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
static float **make_buffers(const TeProgram *p, const int64_t *dims, const RunOpts *o)
{
    float **bufs = calloc((size_t)p->ntensors, sizeof *bufs);
    for (int i = 0; i < o->inputs.n; i++) {
        const Tensor *t = ir_te_find(p, o->inputs.a[i].name);
        if (!t || t->kind != TK_INPUT)
            fail("--input %s: the program has no input named '%s'", o->inputs.a[i].name,
                 o->inputs.a[i].name);
    }
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        int64_t n = ir_te_numel(t, dims);
        const char *path = NULL;
        for (int j = 0; j < o->inputs.n; j++)
            if (strcmp(o->inputs.a[j].name, t->name) == 0)
                path = o->inputs.a[j].value;
        if (!path) {
            bufs[i] = malloc((size_t)(n ? n : 1) * sizeof(float));
            if (!bufs[i])
                fail("cannot allocate %lld bytes for tensor %s", (long long)n * 4, t->name);
            if (t->kind == TK_INPUT)
                rt_rng_fill(o->seed, rt_rng_hash(t->name), bufs[i], (size_t)n);
            continue;
        }
        RtArray a;
        char err[512];
        if (rt_npy_read(path, &a, err, sizeof err) != 0)
            fail("%s", err);
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

/* Stops with the driver's one-line message when there is no GPU. */
static void cuda_require(void)
{
    char err[512];
    if (rt_cuda_init(err, sizeof err) != DCRT_OK)
        fail("%s", err);
}

/* Inputs are copied to the device once, outputs back once after the runs. */
static void cuda_buffers(Exec *x, const int64_t *dims, float **bufs, bool to_device)
{
    char err[512];
    const TeProgram *te = x->p;
    if (to_device)
        x->dbuf = calloc((size_t)te->ntensors + 1, sizeof *x->dbuf);
    for (int i = 0; i < te->ntensors; i++) {
        const Tensor *t = te->tensors[i];
        if (t->kind == TK_TEMP)
            continue;
        size_t bytes = (size_t)ir_te_numel(t, dims) * sizeof(float);
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

/* Compares out with ref: |a - r| <= atol + rtol |r|, scaled by the tensor's magnitude. */
static bool compare(const char *name, const float *out, const float *ref, int64_t n)
{
    double scale = 0, max_abs = 0, max_rel = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(ref[i]) > scale && isfinite(ref[i]))
            scale = fabs(ref[i]);
    int64_t bad = -1, nbad = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = out[i], r = ref[i];
        if (isnan(a) && isnan(r))
            continue;
        if (isinf(r) && a == r)
            continue;
        double d = fabs(a - r);
        if (!(d <= 1e-5 * (scale + 1) + 1e-3 * fabs(r))) {
            if (bad < 0)
                bad = i;
            nbad++;
        }
        if (d > max_abs || isnan(d))
            max_abs = d;
        if (fabs(r) > 1e-6 && d / fabs(r) > max_rel)
            max_rel = d / fabs(r);
    }
    if (nbad) {
        fprintf(stderr, "check: %s differs from the reference at %lld of %lld elements; first at "
                        "flat index %lld: got %.9g, expected %.9g\n",
                name, (long long)nbad, (long long)n, (long long)bad, out[bad], ref[bad]);
        return false;
    }
    printf("check: %s matches the reference (%lld elements, max abs error %.3g)\n", name,
           (long long)n, max_abs);
    return true;
}

static void print_summary(const Tensor *t, const int64_t *dims, const float *v, int64_t n)
{
    int64_t shape[16];
    char sh[256];
    tensor_shape(t, dims, shape);
    shape_str(sh, sizeof sh, t->rank, shape);
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
        sum += v[i];
    }
    printf("%s %s: min %.6g, max %.6g, mean %.6g\n  [", t->name, sh, lo, hi, n ? sum / (double)n : 0);
    for (int64_t i = 0; i < n && i < 6; i++)
        printf("%s%.6g", i ? ", " : "", v[i]);
    printf("%s]\n", n > 6 ? ", ..." : "");
}

static int cmd_run(int argc, char **argv)
{
    RunOpts o = parse_run_opts(argc, argv);
    if (strcmp(o.target, "cuda") == 0)
        cuda_require();
    FeUnit l = load_program(o.file);
    TeProgram *p = l.prog;
    for (int i = 0; i < o.outputs.n; i++) {
        const Tensor *t = ir_te_find(p, o.outputs.a[i].name);
        if (!t || t->kind != TK_OUTPUT)
            fail("--output %s: the program has no output named '%s'", o.outputs.a[i].name,
                 o.outputs.a[i].name);
    }
    int64_t *dims = resolve_dims(p, &o.sets);
    float **bufs = make_buffers(p, dims, &o);

    Exec x = {.p = p};
    bool gpu = strcmp(o.target, "emu") == 0 || strcmp(o.target, "cuda") == 0;
    if (strcmp(o.target, "reference") != 0) {
        CompileOpts co = {.target = gpu ? PT_GPU : PT_CPU, .gpu_arch = "sm_80", .records = o.records,
                          .mks = &o.mks};
        x.lp = lower_program(p, &co);
    }
    char err[8192];
    if (strcmp(o.target, "emu") == 0) {
        if (!(x.emu = ex_emu_compile(x.lp, err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "JIT compilation failed: %s", err);
        if (!(x.pool = rt_pool_new(0)))
            fail("cannot start the thread pool");
    }
    if (strcmp(o.target, "cpu") == 0 && !(x.cpu = ex_cpu_compile(x.lp, err, sizeof err)))
        ir_panic(__FILE__, __LINE__, "JIT compilation failed: %s", err);
    if (strcmp(o.target, "cuda") == 0) {
        if (!(x.cuda = ex_cuda_compile(x.lp, NULL, true, err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "code generation failed: %s", err);
        cuda_buffers(&x, dims, bufs, true);
    }
    run_once(&x, dims, bufs);
    if (o.bench) {
        double *t = malloc((size_t)o.bench * sizeof *t);
        for (int64_t i = 0; i < o.bench; i++) {
            double t0 = rt_now_ms();
            run_once(&x, dims, bufs);
            t[i] = x.cuda ? x.ms : rt_now_ms() - t0; /* cuda: CUDA events around the launches */
        }
        qsort(t, (size_t)o.bench, sizeof *t, cmp_double);
        printf("bench: median %.3f ms, min %.3f ms, %lld runs\n", t[o.bench / 2], t[0],
               (long long)o.bench);
        free(t);
    }
    if (x.cuda)
        cuda_buffers(&x, dims, bufs, false);
    bool ok = true;
    if (o.check) {
        float **ref = calloc((size_t)p->ntensors, sizeof *ref);
        for (int i = 0; i < p->ntensors; i++) {
            int64_t n = ir_te_numel(p->tensors[i], dims);
            ref[i] = p->tensors[i]->kind == TK_INPUT ? bufs[i] : malloc((size_t)(n ? n : 1) * 4);
        }
        if (ir_interp(p, dims, ref, err, sizeof err) != 0)
            fail("%s", err);
        for (int i = 0; i < p->ntensors; i++) {
            const Tensor *t = p->tensors[i];
            if (t->kind == TK_OUTPUT)
                ok &= compare(t->name, bufs[i], ref[i], ir_te_numel(t, dims));
            if (t->kind != TK_INPUT)
                free(ref[i]);
        }
        free(ref);
    }
    if (!ok)
        fail("check failed");
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->tensors[i];
        if (t->kind != TK_OUTPUT)
            continue;
        const char *path = NULL;
        for (int j = 0; j < o.outputs.n; j++)
            if (strcmp(o.outputs.a[j].name, t->name) == 0)
                path = o.outputs.a[j].value;
        int64_t n = ir_te_numel(t, dims);
        if (!path) {
            if (!o.check && !o.bench)
                print_summary(t, dims, bufs[i], n);
            continue;
        }
        RtArray a = {.rank = t->rank, .data = bufs[i]};
        tensor_shape(t, dims, a.shape);
        if (rt_npy_write(path, &a, err, sizeof err) != 0)
            fail("%s", err);
    }
    for (int i = 0; i < p->ntensors; i++)
        free(bufs[i]);
    free(bufs);
    free(dims);
    ex_cpu_destroy(x.cpu);
    ex_emu_destroy(x.emu);
    ex_cuda_destroy(x.cuda);
    rt_pool_destroy(x.pool);
    fe_unload(&l);
    free_run_opts(&o);
    return 0;
}

/* ---- dcc tune ---- */

/* SIGINT / SIGTERM: the search stops before its next measurement (a
 * second signal kills at once); what was measured is in the records. */
static volatile sig_atomic_t tune_stop;

static void on_stop_signal(int sig)
{
    tune_stop = 1;
    signal(sig, SIG_DFL);
}

typedef struct TuneUi {
    bool tty;
    bool live;  /* a progress line is on the terminal */
} TuneUi;

static void tune_progress(void *ud, const SrchProgress *p)
{
    TuneUi *ui = ud;
    char line[256];
    snprintf(line, sizeof line,
             "tune: %s %s round %d: %d/%d measured, best predicted %.1f GFLOP/s, "
             "measured %.1f GFLOP/s, %.0f s elapsed, ~%.0f s left",
             p->stage, p->phase, p->round, p->done, p->total, p->best_pred_gflops,
             p->best_meas_gflops, p->elapsed_s, p->eta_s);
    if (ui->tty) {
        fprintf(stderr, "\r\033[K%s", line);
        ui->live = true;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

static void tune_warn(void *ud, const char *msg)
{
    TuneUi *ui = ud;
    if (ui->live)
        fputc('\n', stderr), ui->live = false;
    fprintf(stderr, "dcc: warning: %s\n", msg);
}

/* NAME=LO..HI[:COUNT] */
static void parse_range(const char *arg, SrchRange *r)
{
    const char *eq = strchr(arg, '=');
    const char *dots = eq ? strstr(eq, "..") : NULL;
    if (!eq || eq == arg || !dots)
        usage_error("--shapes expects NAME=LO..HI[:COUNT], got '%s'", arg);
    char buf[64];
    const char *colon = strchr(dots, ':');
    int64_t lo, hi, count = 0;
    size_t n = (size_t)(dots - eq - 1);
    bool ok = n < sizeof buf;
    if (ok) {
        memcpy(buf, eq + 1, n);
        buf[n] = 0;
        ok = parse_int(buf, &lo);
    }
    n = colon ? (size_t)(colon - dots - 2) : strlen(dots + 2);
    if (ok && n < sizeof buf) {
        memcpy(buf, dots + 2, n);
        buf[n] = 0;
        ok = parse_int(buf, &hi);
    } else {
        ok = false;
    }
    if (ok && colon)
        ok = parse_int(colon + 1, &count) && count >= 1 && count <= 4096;
    if (!ok)
        usage_error("--shapes expects NAME=LO..HI[:COUNT], got '%s'", arg);
    r->dim = strndup(arg, (size_t)(eq - arg));
    r->lo = lo;
    r->hi = hi;
    r->count = (int)count;
}

static int cmd_tune(int argc, char **argv)
{
    SrchTuneOpts o = {.backend = "cpu", .trials = 64, .seed = 1};
    SrchRange ranges[MAX_ARGS];
    const char *records = NULL;
    static const struct option opts[] = {
        {"target", required_argument, 0, 't'},  {"arch", required_argument, 0, 'a'},
        {"trials", required_argument, 0, 'n'},  {"records", required_argument, 0, 'r'},
        {"shapes", required_argument, 0, 's'},  {"per-shape", no_argument, 0, 'p'},
        {"seed", required_argument, 0, 'S'},    {0, 0, 0, 0},
    };
    int c;
    int64_t v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0 &&
                strcmp(optarg, "model") != 0)
                usage_error("unknown --target '%s' for tune (expected cpu, cuda or model)", optarg);
            o.backend = optarg;
            break;
        case 'a':
            if (!cg_nvptx_arch_valid(optarg))
                usage_error("unknown --arch '%s'", optarg);
            o.arch = optarg;
            break;
        case 'n':
            if (!parse_int(optarg, &v) || v < 1 || v > 1000000)
                usage_error("--trials expects a count from 1 to 1000000, got '%s'", optarg);
            o.trials = (int)v;
            break;
        case 'r': records = optarg; break;
        case 's':
            if (o.nranges == MAX_ARGS)
                usage_error("too many --shapes");
            parse_range(optarg, &ranges[o.nranges++]);
            break;
        case 'p': o.per_shape = true; break;
        case 'S':
            if (!parse_int(optarg, &v))
                usage_error("--seed expects a non-negative integer, got '%s'", optarg);
            o.seed = (uint64_t)v;
            break;
        default: bad_option(argv);
        }
    }
    if (optind != argc - 1)
        usage_error(optind == argc ? "no input file" : "more than one input file");
    const char *file = argv[optind];
    char *defrec = records ? NULL : aot_path(NULL, file, ".records.jsonl", true);
    o.records = records ? records : defrec;
    o.ranges = ranges;
    TuneUi ui = {isatty(2) != 0, false};
    o.progress = tune_progress;
    o.warn = tune_warn;
    o.progress_ud = &ui;
    if (strcmp(o.backend, "cuda") == 0)
        cuda_require();
    FeUnit l = load_program(file);
    char err[1024];
    o.stop = &tune_stop;
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    SrchTuneResult *r = srch_tune(l.prog, &o, err, sizeof err);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (ui.live)
        fputc('\n', stderr);
    if (!r && tune_stop)
        fail("tuning interrupted: every measurement taken is in %s; the same command "
             "resumes it", o.records);
    if (!r)
        fail("%s", err);
    printf("tune: %s, target %s, %d shape point%s, %s, %d trial%s per search, %.1f s\n",
           l.prog->name, o.backend, r->nshapes, r->nshapes == 1 ? "" : "s",
           o.per_shape ? "per-shape baseline" : "joint search", o.trials,
           o.trials == 1 ? "" : "s", r->seconds);
    for (int i = 0; i < r->nstages; i++) {
        const SrchStageResult *s = &r->stages[i];
        printf("stage %s: search %d measured + %d from records; selection %d measured + %d "
               "from records\n",
               s->stage, s->measured, s->reused, s->select_measured, s->select_reused);
        const SrchTree *t = s->tree;
        int leaves = 0;
        for (int k = 0; k < t->nnodes; k++)
            leaves += srch_tree_node(t, k)->kind == TN_LEAF;
        printf("  dispatch: %d leaves, depth %d; accuracy %.1f%% (%d of %d shapes pick the "
               "measured best), misses cost %.3fx geomean, %.3fx worst\n",
               leaves, srch_tree_depth(t), 100 * s->score.accuracy, s->score.hits,
               s->score.n, s->score.miss_geomean, s->score.miss_worst);
        printf("  latency geomean over the shapes: %.4f ms dispatched, %.4f ms best measured\n",
               s->geomean_ms, s->oracle_geomean_ms);
        for (int k = 0; k < t->nnodes; k++) {
            const SrchTreeNode *n = srch_tree_node(t, k);
            if (n->kind == TN_LEAF) {
                bool seen = false;
                for (int q = 0; q < k; q++)
                    seen |= srch_tree_node(t, q)->kind == TN_LEAF &&
                            srch_tree_node(t, q)->kernel == n->kernel;
                if (!seen) {
                    char *mk = srch_mk_str(&t->kernels[n->kernel], t->nspatial);
                    printf("  kernel: %s\n", mk);
                    free(mk);
                }
            }
        }
    }
    if (r->ncorrupt)
        printf("records: %d damaged line%s skipped\n", r->ncorrupt, r->ncorrupt == 1 ? "" : "s");
    printf("records: %s\n", o.records);
    srch_tune_result_free(r);
    for (int i = 0; i < o.nranges; i++)
        free((char *)ranges[i].dim);
    free(defrec);
    fe_unload(&l);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage_error("no input file");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("dcc (dietcode-c) %s\n", DCC_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(argv[1], "tune") == 0)
        return cmd_tune(argc - 1, argv + 1);
    return cmd_compile(argc, argv);
}
