/* dcc: the command-line driver. It is the only place that prints to the
 * user and decides exit status: 0 success, 2 a command line wrong in itself
 * (see opt_table), 1 everything else. Everything it does is a call into
 * the libraries:
 *
 *   dcc FILE.tex [--emit=te] [-o OUT]      compile and dump
 *   dcc run FILE.tex --set T=5 ...         run with .npy or seeded inputs
 *
 * Output files are written whole or not at all (runtime/outfile.c), so a
 * failed command never leaves a partial file behind.
 */
#include "dietcode/codegen.h"
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/onnx.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXIT_BAD_INPUT = 1, EXIT_USAGE = 2, MAX_ARGS = 64 };

static const char *usage_text =
    "usage: dcc FILE.tex [-o OUT] [--emit=te|loops|plan|llvm|asm|ptx|obj|header|dispatch[,...]]\n"
    "               [--target=cpu|nvptx] [--arch=ARCH[,...]] [--no-libdevice] [--records=FILE]\n"
    "               [--set NAME=VALUE ...] [--mk NAME=MICROKERNEL ...]\n"
    "               [--fuse NAME=inline|materialize ...] [--fp-contract=on|off]\n"
    "               [--dump-after=PASS|all] [--stop-after=PASS]\n"
    "               [--verify-each] [--time-passes]\n"
    "       dcc run FILE.tex [--target=cpu|reference|loops|emu|cuda] --set NAME=VALUE ...\n"
    "               [--arch=sm_80] [--input NAME=PATH.npy ...] [--output NAME=PATH.npy ...]\n"
    "               [--seed N] [--check] [--bench N] [--profile] [--records=FILE]\n"
    "               [--mk NAME=MICROKERNEL ...] [--fuse NAME=inline|materialize ...]\n"
    "               [--fp-contract=on|off]\n"
    "       dcc tune FILE.tex [--target=cpu|cuda|model] [--arch=sm_80] [--trials N]\n"
    "               [--records=FILE] [--shapes NAME=LO..HI[:COUNT] ... | --shapes-file F.json]\n"
    "               [--per-shape] [--warm-start=OLD.jsonl] [--fuse NAME=inline|materialize ...]\n"
    "               [--atomic-split] [--fp-contract=on|off]\n"
    "               [--seed N]\n"
    "       dcc report --records=FILE [-o REPORT.svg]\n"
    "       dcc --help | --version\n"
    "  FILE may also be an ONNX model (MODEL.onnx) with --dims NAME=LO..HI[,...]\n"
    "  giving the range of each symbolic dim (dim_param) of its inputs\n"
    "\n"
    "  --emit=te           print the checked tensor-expression program\n"
    "  --emit=loops        print the loop IR after the last pass\n"
    "  --emit=plan         print the launch plan of one call (dims from --set):\n"
    "                      each stage's variant, its launches, the workspace\n"
    "  --emit=llvm|asm     print the optimised LLVM IR or host assembly\n"
    "  --emit=ptx          print the kernels as PTX (implies --target=nvptx)\n"
    "  --target=nvptx      lower for the GPU: --emit=loops|llvm show its forms\n"
    "  --arch=sm_XX        GPU architecture: sm_75, sm_80 (default), sm_86, sm_87,\n"
    "                      sm_89, sm_90, sm_90a (compile, tune; run on emu and\n"
    "                      cuda: the kernels' form, e.g. sm_75 has no cp.async)\n"
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
    "  -o OUT              write the emitted text to OUT instead of stdout (- is\n"
    "                      stdout; also --output=OUT); without\n"
    "                      --emit, the object and header of the target (as cc -c)\n"
    "  --dump-after=PASS   print the IR after PASS (or all passes) on stderr\n"
    "  --stop-after=PASS   stop the pipeline after PASS (with --emit=loops: print\n"
    "                      the loop IR there)\n"
    "  --verify-each       run the loop IR verifier after every pass\n"
    "  --time-passes       print the time each pass takes\n"
    "  --records=FILE      compile with the kernels and dispatch tree tuned into FILE\n"
    "  --emit=dispatch     print the dispatch trees (from --records) as JSON\n"
    "  --mk NAME=MK        compile stage NAME with this micro-kernel (the form\n"
    "                      --emit=loops prints, e.g. 'threads [1, 8] tile [1, 1]\n"
    "                      rchunk 128 unroll 1 vec 4 along reduction rthreads 32'),\n"
    "                      over records and defaults; an inlined stage has none\n"
    "  --fuse NAME=HOW     inline intermediate NAME (one without a reduction) into\n"
    "                      its readers, or materialise it, whatever the cost model\n"
    "                      or the records say; tune searches the close ones itself\n"
    "  --fp-contract=off   (compile, run, tune) round every float operation on its\n"
    "                      own: no fused multiply-add anywhere (default on: a * b + c\n"
    "                      and a * b - c in a statement are one fma, rounded once,\n"
    "                      on every target and in the reference; see LANGUAGE.md)\n"
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
    "  --profile           (cpu) time every launch over --bench N runs (default 20):\n"
    "                      per stage the median, GFLOP/s or GB/s, share of the total\n"
    "  tune                search micro-kernels for every shape of the range at once\n"
    "                      and fit the dispatch tree; measurements go to --records\n"
    "                      (default: FILE's base name + .records.jsonl), resumable\n"
    "  --target=model      (tune) no hardware: the cost model's estimates, for PTX\n"
    "  --trials N          (tune) measurements of the search (default 64); with\n"
    "                      --per-shape, of each shape's own search\n"
    "  --shapes D=LO..HI[:COUNT]  (tune) the range of dim D to tune for (default:\n"
    "                      as declared); every point when there are at most 256\n"
    "  --shapes-file F.json  (tune) exactly the shape points F lists: a JSON array\n"
    "                      of objects giving every dim, e.g. [{\"T\": 1}, {\"T\": 77}]\n"
    "  --per-shape         (tune) the baseline: tune each shape on its own\n"
    "  --warm-start=OLD.jsonl  (tune) train the cost model first on the search\n"
    "                      samples OLD holds (other workloads too; this target)\n"
    "  --atomic-split      (tune, GPU) split-K may add its parts into the output\n"
    "                      atomically where the epilogue is affine in the sum:\n"
    "                      faster, but the last bits vary from run to run (the\n"
    "                      trees record the opt-in; default: deterministic)\n"
    "  report              an SVG of the records: latency over the shapes (the\n"
    "                      dispatch, the best measured, per-shape), the tree's\n"
    "                      regions and kernels, the tuning history (default -o:\n"
    "                      FILE's stem + .svg in the current directory)\n"
    "\n"
    "Options may come in any order, as --opt VALUE or --opt=VALUE; -- ends them.\n"
    "Outputs (-o, --output) are written all or nothing: to temporaries renamed\n"
    "when every one is complete. Symlinks are written through; devices, FIFOs\n"
    "and /dev/stdout are written in place (outside that guarantee); an output\n"
    "that is also an input is refused.\n"
    "\n"
    "Exit status: 0 success; 2 the command line is wrong in itself (an unknown\n"
    "option, a malformed value, a single-valued option or a NAME given twice,\n"
    "options in conflict); 1 anything else (an unknown dim, a value out of its\n"
    "range, a bad or missing file, a failed check, a run-time error, a write\n"
    "error, also on stdout).\n";

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

/* ---- the command line ----
 *
 * Every option of every command is one row of opt_table, and parse_args
 * reads argv with it alone. Exit status 2 is for what is wrong with the
 * command line in itself, decidable before any file is read: an unknown
 * option or one of another command, a missing or malformed value, a
 * single-valued option given twice, NAME=VALUE options repeating a NAME,
 * options in conflict. Everything else (an unknown dim, a value out of its
 * declared range, a bad file, a failed check) is 1. */

typedef struct NamedArg {
    const char *name, *value;
} NamedArg;

typedef struct NamedArgs {
    NamedArg a[MAX_ARGS];
    int n;
} NamedArgs;

enum { CMD_COMPILE = 1, CMD_RUN = 2, CMD_TUNE = 4, CMD_REPORT = 8 };

typedef enum OptArg {
    ARG_FLAG,  /* no value; may repeat */
    ARG_TEXT,  /* one value: from choices, or one valid() accepts, when given */
    ARG_COUNT, /* one integer in lo..hi */
    ARG_NAMED, /* NAME=VALUE, repeatable with distinct names; valid() checks VALUE */
} OptArg;

typedef enum OptId {
    O_EMIT, O_OUT, O_DUMP, O_STOP, O_VERIFY, O_TIME, O_TARGET, O_ARCH, O_NOLIBDEV, O_RECORDS,
    O_SET, O_MK, O_INPUT, O_OUTPUT, O_SEED, O_CHECK, O_BENCH, O_PROFILE, O_TRIALS, O_SHAPES, O_SHAPES_FILE, O_PER_SHAPE,
    O_WARM, O_ATOMIC, O_FUSE, O_FPCONTRACT, O_DIMS, NOPTS
} OptId;

typedef struct OptSpec {
    OptId id;
    const char *name;  /* --name */
    char letter;       /* -x, or 0 */
    unsigned cmds;     /* the commands that take it */
    OptArg arg;
    const char *form;  /* the value as messages show it */
    const char *choices;             /* ARG_TEXT: the values allowed, space-separated */
    bool (*valid)(const char *value); /* ARG_TEXT, ARG_NAMED: NULL accepts any */
    int64_t lo, hi;                  /* ARG_COUNT */
} OptSpec;

/* Parses a non-negative decimal integer; false on anything else. */
static bool parse_int(const char *s, int64_t *out)
{
    if (!*s)
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < 0 || s[0] < '0' || s[0] > '9')
        return false;
    *out = v;
    return true;
}

static bool valid_count(const char *s)
{
    int64_t v;
    return parse_int(s, &v);
}

static bool valid_emit(const char *s)
{
    static const char *const kinds[] = {"te", "loops", "plan", "llvm", "asm", "ptx", "obj",
                                        "header", "obj,header", "header,obj", "dispatch", NULL};
    for (int i = 0; kinds[i]; i++)
        if (strcmp(s, kinds[i]) == 0)
            return true;
    return false;
}

static bool valid_pass(const char *s)
{
    for (const char *const *n = pass_names(); *n; n++)
        if (strcmp(*n, s) == 0)
            return true;
    return false;
}

static bool valid_dump(const char *s)
{
    return strcmp(s, "all") == 0 || valid_pass(s);
}

static bool valid_mk(const char *s)
{
    MicroKernel mk;
    int ns = 0;
    return pass_parse_microkernel(s, &mk, &ns);
}

static bool valid_fuse(const char *s)
{
    Fuse f;
    return pass_parse_fuse(s, &f);
}

/* LO..HI[:COUNT] (--shapes), into r when r is non-NULL. */
static bool parse_range(const char *s, int64_t *lo, int64_t *hi, int64_t *count)
{
    const char *dots = strstr(s, "..");
    if (!dots)
        return false;
    char buf[64];
    const char *colon = strchr(dots, ':');
    size_t n = (size_t)(dots - s);
    bool ok = n < sizeof buf;
    if (ok) {
        memcpy(buf, s, n);
        buf[n] = 0;
        ok = parse_int(buf, lo);
    }
    n = colon ? (size_t)(colon - dots - 2) : strlen(dots + 2);
    if (ok && n < sizeof buf) {
        memcpy(buf, dots + 2, n);
        buf[n] = 0;
        ok = parse_int(buf, hi);
    } else {
        ok = false;
    }
    *count = 0;
    if (ok && colon)
        ok = parse_int(colon + 1, count) && *count >= 1 && *count <= 4096;
    return ok;
}

static bool valid_range(const char *s)
{
    int64_t lo, hi, count;
    return parse_range(s, &lo, &hi, &count) && lo <= hi;
}

static bool valid_dim_range(const char *s)
{
    int64_t lo, hi, count;
    return parse_range(s, &lo, &hi, &count) && count == 0 && lo >= 1 && lo <= hi &&
           hi <= INT32_MAX;
}

enum { CMD_ALL = CMD_COMPILE | CMD_RUN | CMD_TUNE | CMD_REPORT };

static const OptSpec opt_table[] = {
    {O_EMIT, "emit", 0, CMD_COMPILE, ARG_TEXT, "KIND[,KIND]", NULL, valid_emit, 0, 0},
    {O_OUT, "output", 'o', CMD_COMPILE | CMD_REPORT, ARG_TEXT, "OUT", NULL, NULL, 0, 0},
    {O_DUMP, "dump-after", 0, CMD_COMPILE, ARG_TEXT, "PASS|all", NULL, valid_dump, 0, 0},
    {O_STOP, "stop-after", 0, CMD_COMPILE, ARG_TEXT, "PASS", NULL, valid_pass, 0, 0},
    {O_VERIFY, "verify-each", 0, CMD_COMPILE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_TIME, "time-passes", 0, CMD_COMPILE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_TARGET, "target", 0, CMD_COMPILE, ARG_TEXT, "TARGET", "cpu nvptx", NULL, 0, 0},
    {O_TARGET, "target", 0, CMD_RUN, ARG_TEXT, "TARGET", "cpu reference loops emu cuda", NULL, 0, 0},
    {O_TARGET, "target", 0, CMD_TUNE, ARG_TEXT, "TARGET", "cpu cuda model", NULL, 0, 0},
    {O_ARCH, "arch", 0, CMD_COMPILE, ARG_TEXT, "ARCH[,ARCH]", NULL, NULL, 0, 0},
    {O_ARCH, "arch", 0, CMD_TUNE, ARG_TEXT, "sm_XX", "sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a",
     NULL, 0, 0},
    {O_ARCH, "arch", 0, CMD_RUN, ARG_TEXT, "sm_XX", "sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a",
     NULL, 0, 0},
    {O_NOLIBDEV, "no-libdevice", 0, CMD_COMPILE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_RECORDS, "records", 0, CMD_ALL, ARG_TEXT, "FILE", NULL, NULL, 0, 0},
    {O_SET, "set", 0, CMD_COMPILE | CMD_RUN, ARG_NAMED, "NAME=INTEGER", NULL, valid_count, 0, 0},
    {O_MK, "mk", 0, CMD_COMPILE | CMD_RUN, ARG_NAMED, "NAME=MICROKERNEL", NULL, valid_mk, 0, 0},
    {O_INPUT, "input", 0, CMD_RUN, ARG_NAMED, "NAME=PATH.npy", NULL, NULL, 0, 0},
    {O_OUTPUT, "output", 0, CMD_RUN, ARG_NAMED, "NAME=PATH.npy", NULL, NULL, 0, 0},
    {O_SEED, "seed", 0, CMD_RUN | CMD_TUNE, ARG_COUNT, "N", NULL, NULL, 0, INT64_MAX},
    {O_CHECK, "check", 0, CMD_RUN, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_BENCH, "bench", 0, CMD_RUN, ARG_COUNT, "N", NULL, NULL, 1, 1000000},
    {O_PROFILE, "profile", 0, CMD_RUN, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_TRIALS, "trials", 0, CMD_TUNE, ARG_COUNT, "N", NULL, NULL, 1, 1000000},
    {O_SHAPES, "shapes", 0, CMD_TUNE, ARG_NAMED, "NAME=LO..HI[:COUNT], LO <= HI", NULL, valid_range, 0, 0},
    {O_SHAPES_FILE, "shapes-file", 0, CMD_TUNE, ARG_TEXT, "FILE.json", NULL, NULL, 0, 0},
    {O_PER_SHAPE, "per-shape", 0, CMD_TUNE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_WARM, "warm-start", 0, CMD_TUNE, ARG_TEXT, "FILE", NULL, NULL, 0, 0},
    {O_ATOMIC, "atomic-split", 0, CMD_TUNE, ARG_FLAG, NULL, NULL, NULL, 0, 0},
    {O_FUSE, "fuse", 0, CMD_COMPILE | CMD_RUN | CMD_TUNE, ARG_NAMED, "NAME=inline|materialize",
     NULL, valid_fuse, 0, 0},
    {O_FPCONTRACT, "fp-contract", 0, CMD_COMPILE | CMD_RUN | CMD_TUNE, ARG_TEXT, "on|off",
     "on off", NULL, 0, 0},
    {O_DIMS, "dims", 0, CMD_ALL, ARG_NAMED, "NAME=LO..HI[,NAME=LO..HI...], 1 <= LO <= HI", NULL,
     valid_dim_range, 0, 0},
};
enum { NSPECS = sizeof opt_table / sizeof opt_table[0] };

/* A command's options as parsed. */
typedef struct Args {
    unsigned cmd;
    const char *file;
    const char *val[NOPTS]; /* a single value; "" for a flag given; NULL when absent */
    int64_t num[NOPTS];     /* ARG_COUNT's value */
    NamedArgs named[NOPTS]; /* ARG_NAMED's */
} Args;

static const char *cmd_name(unsigned cmd)
{
    return cmd == CMD_RUN      ? "dcc run"
           : cmd == CMD_TUNE   ? "dcc tune"
           : cmd == CMD_REPORT ? "dcc report"
                               : "dcc FILE.tex";
}

/* "a, b or c" from "a b c". */
static void choices_str(char *buf, size_t n, const char *choices)
{
    size_t k = 0;
    int nwords = 0;
    for (const char *c = choices; *c; c++)
        nwords += *c != ' ' && (c == choices || c[-1] == ' ');
    int w = 0;
    for (const char *c = choices; *c && k + 8 < n;) {
        size_t len = strcspn(c, " ");
        if (w)
            k += (size_t)snprintf(buf + k, n - k, w == nwords - 1 ? " or " : ", ");
        k += (size_t)snprintf(buf + k, n - k, "%.*s", (int)len, c);
        w++;
        c += len;
        c += *c == ' ';
    }
    buf[k < n ? k : n - 1] = 0;
}

static bool in_choices(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, " ");
        if (len == n && strncmp(c, v, n) == 0)
            return true;
        c += len;
        c += *c == ' ';
    }
    return false;
}

/* The row for --name (letter 0) or -letter of cmd; NULL when cmd has none
 * and *other gets the commands that do. */
static const OptSpec *find_opt(unsigned cmd, const char *name, size_t len, char letter,
                               unsigned *other)
{
    *other = 0;
    for (int i = 0; i < NSPECS; i++) {
        const OptSpec *s = &opt_table[i];
        bool match = letter ? s->letter == letter
                            : strlen(s->name) == len && strncmp(s->name, name, len) == 0;
        if (match && (s->cmds & cmd))
            return s;
        if (match)
            *other |= s->cmds;
    }
    return NULL;
}

static void store_opt(Args *a, const OptSpec *s, const char *shown, const char *v)
{
    char expected[256];
    if (s->arg == ARG_FLAG) {
        a->val[s->id] = "";
        return;
    }
    if (!*v)
        usage_error("option '%s' needs a value (%s)", shown, s->form);
    const char *comma = s->id == O_DIMS ? strchr(v, ',') : NULL;
    if (comma) { /* --dims a=1..8,b=1..512: each in turn */
        char *first = strndup(v, (size_t)(comma - v));
        store_opt(a, s, shown, first);
        store_opt(a, s, shown, comma + 1);
        return;
    }
    if (s->arg == ARG_NAMED) {
        NamedArgs *arr = &a->named[s->id];
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1])
            usage_error("--%s expects %s, got '%s'", s->name, s->form, v);
        if (arr->n == MAX_ARGS)
            usage_error("too many --%s options (at most %d)", s->name, MAX_ARGS);
        for (int i = 0; i < arr->n; i++)
            if (strlen(arr->a[i].name) == (size_t)(eq - v) &&
                strncmp(arr->a[i].name, v, (size_t)(eq - v)) == 0)
                usage_error("--%s %.*s is given twice", s->name, (int)(eq - v), v);
        if (s->valid && !s->valid(eq + 1))
            usage_error("--%s expects %s, got '%s'%s", s->name, s->form, v,
                        s->id == O_MK ? " (a micro-kernel as --emit=loops prints it, e.g. "
                                        "'threads [16, 16] tile [4, 4] rchunk 16 unroll 1 vec 4')"
                                      : "");
        arr->a[arr->n].name = strndup(v, (size_t)(eq - v));
        arr->a[arr->n++].value = eq + 1;
        return;
    }
    if (a->val[s->id])
        usage_error("option '%s' is given twice ('%s' and '%s')", shown, a->val[s->id], v);
    if (s->arg == ARG_COUNT) {
        if (!parse_int(v, &a->num[s->id]) || a->num[s->id] < s->lo || a->num[s->id] > s->hi) {
            if (s->hi == INT64_MAX)
                usage_error("--%s expects a non-negative integer, got '%s'", s->name, v);
            usage_error("--%s expects a count from %lld to %lld, got '%s'", s->name,
                        (long long)s->lo, (long long)s->hi, v);
        }
    } else if (s->choices && !in_choices(s->choices, v)) {
        choices_str(expected, sizeof expected, s->choices);
        usage_error("unknown --%s '%s' for %s (expected %s)", s->name, v, cmd_name(a->cmd),
                    expected);
    } else if (s->valid && !s->valid(v)) {
        usage_error("--%s: '%s' is not a valid %s", s->name, v, s->form);
    }
    a->val[s->id] = v;
}

/* Reads argv[1..argc) of cmd: options anywhere, one input file; "--" ends
 * the options. Exits 2 on anything wrong. */
/* The ranges --dims gives (for an ONNX model's dim_params). */
static const NamedArgs *dim_ranges;

static Args parse_args(unsigned cmd, int argc, char **argv)
{
    Args a = {.cmd = cmd};
    bool only_files = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_files || arg[0] != '-' || !arg[1]) {
            if (a.file)
                usage_error("more than one input file ('%s' and '%s')", a.file, arg);
            a.file = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_files = true;
            continue;
        }
        bool is_long = arg[1] == '-';
        const char *name = arg + (is_long ? 2 : 1);
        const char *eq = is_long ? strchr(name, '=') : NULL;
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        char letter = is_long ? 0 : name[0];
        unsigned other;
        const OptSpec *s = find_opt(cmd, name, len, letter, &other);
        char shown[64];
        snprintf(shown, sizeof shown, "%s%.*s", is_long ? "--" : "-", is_long ? (int)len : 1,
                 name);
        if (!s && cmd == CMD_RUN && letter == 'o')
            usage_error("'-o' is not an option of dcc run: write outputs with --output "
                        "NAME=PATH.npy");
        if (!s && other) {
            char which[64] = "";
            for (unsigned c = 1; c <= CMD_REPORT; c <<= 1)
                if (other & c)
                    snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s",
                             which[0] ? " and " : "", cmd_name(c));
            usage_error("option '%s' is for %s, not %s", shown, which, cmd_name(cmd));
        }
        if (!s)
            usage_error("unknown option '%s'", shown);
        const char *v = NULL;
        if (s->arg == ARG_FLAG) {
            if (eq || (!is_long && name[1]))
                usage_error("option '%s' takes no value", shown);
        } else if (eq) {
            v = eq + 1;
        } else if (!is_long && name[1]) {
            v = name + 1; /* -oFILE */
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            usage_error("option '%s' needs a value (%s)", shown, s->form);
        }
        store_opt(&a, s, shown, v);
    }
    if (cmd == CMD_REPORT && a.file)
        usage_error("dcc report reads no program: give the records with --records FILE");
    if (!a.file && cmd != CMD_REPORT)
        usage_error("no input file");
    static NamedArgs dims; /* for load_program */
    dims = a.named[O_DIMS];
    dim_ranges = &dims;
    return a;
}

static void free_args(Args *a)
{
    for (int i = 0; i < NOPTS; i++)
        for (int j = 0; j < a->named[i].n; j++)
            free((char *)a->named[i].a[j].name);
}

/* ---- output files ----
 *
 * Every file a command writes goes through one RtOutFiles (the rule in
 * runtime/outfile.c): written to temporaries, renamed only when all are
 * complete; symlinks written through, devices and FIFOs in place; an
 * output that is one of the command's inputs refused. */

/* The outputs being written, for the signal handler to remove their
 * temporaries (one command writes one set at a time). */
static RtOutFiles *volatile live_outputs;

static void on_fatal_signal(int sig)
{
    rt_out_abandon(live_outputs);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Every file the command reads (the program, records but where tune
 * appends to them, --input, --shapes-file, --warm-start), as inputs no
 * output may be. */
static RtOutFiles *outputs_new(const Args *a, bool records_in)
{
    RtOutFiles *o = rt_out_new();
    if (!o)
        fail("out of memory");
    const char *read[] = {a->file, records_in ? a->val[O_RECORDS] : NULL, a->val[O_SHAPES_FILE],
                          a->val[O_WARM]};
    for (size_t i = 0; i < sizeof read / sizeof *read; i++)
        if (read[i])
            rt_out_input(o, read[i]);
    for (int i = 0; i < a->named[O_INPUT].n; i++)
        rt_out_input(o, a->named[O_INPUT].a[i].value);
    return o;
}

static RtOutFiles *outputs_begin(const Args *a)
{
    RtOutFiles *o = outputs_new(a, true);
    live_outputs = o;
    return o;
}

static void outputs_add(RtOutFiles *o, const char *path, const void *head, size_t hlen,
                        const void *data, size_t len)
{
    char err[1024];
    if (rt_out_add(o, path, head, hlen, data, len, err, sizeof err) != 0) {
        live_outputs = NULL;
        rt_out_free(o);
        fail("%s", err);
    }
}

static void outputs_commit(RtOutFiles *o)
{
    char err[1024];
    /* what was printed comes before an output to /dev/stdout, and a
     * command whose stdout fails changes no file */
    int rc = fflush(stdout) != 0 || ferror(stdout) ? -1 : 0;
    if (rc != 0)
        snprintf(err, sizeof err, "cannot write to standard output: %s", strerror(errno));
    else
        rc = rt_out_commit(o, err, sizeof err);
    live_outputs = NULL;
    rt_out_free(o);
    if (rc != 0)
        fail("%s", err);
}

/* Writes text to path (all or nothing), or to stdout when path is NULL. */
static void write_output(const Args *a, const char *path, const char *text, size_t len)
{
    if (!path) {
        fwrite(text, 1, len, stdout); /* errors: checked once, at exit */
        return;
    }
    RtOutFiles *o = outputs_begin(a);
    outputs_add(o, path, text, len, "", 0);
    outputs_commit(o);
}

/* ---- loading a program ---- */

/* Reads and checks FILE (a .tex program, or an ONNX model with the
 * ranges of --dims); prints diagnostics and exits 1 on errors. */
static FeUnit load_program(const char *path)
{
    FeUnit u;
    char err[512];
    int rc;
    if (fe_is_onnx(path)) {
        int n = dim_ranges ? dim_ranges->n : 0;
        FeDimRange r[MAX_ARGS + 1];
        for (int i = 0; i < n; i++) {
            int64_t count;
            parse_range(dim_ranges->a[i].value, &r[i].lo, &r[i].hi, &count);
            r[i].name = dim_ranges->a[i].name;
        }
        rc = fe_load_onnx(path, r, n, &u, err, sizeof err);
    } else {
        if (dim_ranges && dim_ranges->n)
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

/* Reads and checks FILE, then fixes the fusion of the intermediates
 * --fuse names and the float contraction (--fp-contract, NULL: on); exits
 * 1 when a --fuse is not an intermediate without a reduction. */
static FeUnit load_fused(const char *path, const NamedArgs *fuse, const char *fp_contract)
{
    FeUnit u = load_program(path);
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

/* ---- dcc FILE.tex ---- */

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

/* A damaged line of a records file, as tune reports it. */
static void records_warn(void *ud, const char *msg)
{
    fprintf(stderr, "dcc: warning: %s\n", msg);
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
                                            o->used_arch, sizeof o->used_arch, records_warn, NULL,
                                            err, sizeof err);
        if (rc == 1 && gpu) { /* no cuda records: tuned offline? */
            target = "model";
            rc = srch_schedule_from_records(p, o->records, target, arch, sched, o->trees,
                                            o->used_arch, sizeof o->used_arch, NULL, NULL, err,
                                            sizeof err);
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

/* Lowers the program; exits 1 with a message on an internal verifier error. */
static LoopProgram *lower_program(TeProgram *p, CompileOpts *o)
{
    TargetInfo ti = pass_target_info(o->target);
    if (o->target == PT_GPU)
        pass_target_gpu_arch(&ti, o->gpu_arch);
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
 * name in the current directory (prog.tex -> prog.o, prog.h). Both are
 * one set of outputs: a failure writes neither.
 */
static bool is_aot_emit(const char *emit)
{
    return strcmp(emit, "obj") == 0 || strcmp(emit, "header") == 0 ||
           strcmp(emit, "obj,header") == 0 || strcmp(emit, "header,obj") == 0;
}

/* Where the object or header goes: -o itself for one output or a stream
 * (-, a device: never a name derived from it), else the stem of -o or of
 * the program's file name with ext. */
static char *aot_path(const char *out, const char *file, const char *ext, bool both)
{
    if (out && (!both || rt_out_is_stream(out)))
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
static void emit_aot(const Args *a, const char *emit, const char *out, const LoopProgram *lp,
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
    FeUnit l = load_fused(a.file, &a.named[O_FUSE], a.val[O_FPCONTRACT]);
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
    bool lowering = (emit && strcmp(emit, "te") != 0) || co.pipe.dump_after ||
                    co.pipe.stop_after || co.pipe.time_passes || co.pipe.verify_each;
    LoopProgram *lp = lowering ? lower_program(l.prog, &co) : NULL;
    if (aot) {
        if (co.target == PT_CPU && !arch)
            nisas = default_isas(&co, isas);
        emit_aot(&a, emit, out, lp, co.target == PT_GPU ? arch : NULL, !no_libdevice, isas, nisas);
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

/* ---- dcc run ---- */

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
            if (t->kind == TK_INPUT)
                rt_rng_fill_elems(seed, rt_rng_hash(t->name), (int32_t)t->dtype, bufs[i], (size_t)n);
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

static int cmd_run(int argc, char **argv)
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
    FeUnit l = load_fused(o.file, &o.named[O_FUSE], o.val[O_FPCONTRACT]);
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
    if (strcmp(target, "reference") != 0) {
        CompileOpts co = {.target = gpu ? PT_GPU : PT_CPU, .gpu_arch = arch, .records = o.val[O_RECORDS],
                          .mks = &o.named[O_MK]};
        x.lp = lower_program(p, &co);
    }
    char err[8192];
    if (strcmp(target, "emu") == 0) {
        if (!(x.emu = ex_emu_compile(x.lp, err, sizeof err)))
            ir_panic(__FILE__, __LINE__, "JIT compilation failed: %s", err);
        if (!(x.pool = rt_pool_new(0)))
            fail("cannot start the thread pool");
    }
    if (strcmp(target, "cpu") == 0 && !(x.cpu = ex_cpu_compile(x.lp, err, sizeof err)))
        ir_panic(__FILE__, __LINE__, "JIT compilation failed: %s", err);
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

/* The whole program's estimated latency over the tuned shapes: the
 * geometric mean and up to 9 points spread over them. */
static void print_estimate(const TeProgram *p, const SrchTuneResult *r)
{
    double lg = 0;
    int known = 0;
    for (int j = 0; j < r->nshapes; j++) {
        double ms = srch_tune_estimate_ms(r, j);
        if (!isnan(ms) && ms > 0)
            lg += log(ms), known++;
    }
    if (!known)
        return;
    printf("program: estimated latency (its stages' dispatched kernels as measured, summed): "
           "geomean %.4f ms over %d shape point%s",
           exp(lg / known), known, known == 1 ? "" : "s");
    if (known < r->nshapes)
        printf(" (%d without a time for every stage)", r->nshapes - known);
    printf("\n");
    int show = r->nshapes < 9 ? r->nshapes : 9;
    for (int k = 0; k < show; k++) {
        int j = show == 1 ? 0 : (int)((int64_t)k * (r->nshapes - 1) / (show - 1));
        double ms = srch_tune_estimate_ms(r, j);
        printf("  ");
        for (int d = 0; d < p->ndims; d++)
            printf("%s%s=%lld", d ? ", " : "", p->dims[d]->name,
                   (long long)r->shapes[(size_t)j * (size_t)p->ndims + (size_t)p->dims[d]->pos]);
        if (isnan(ms))
            printf(": unknown\n");
        else
            printf(": %.4f ms\n", ms);
    }
}

static int cmd_tune(int argc, char **argv)
{
    Args a = parse_args(CMD_TUNE, argc, argv);
    SrchTuneOpts o = {.backend = a.val[O_TARGET] ? a.val[O_TARGET] : "cpu",
                      .arch = a.val[O_ARCH],
                      .trials = a.val[O_TRIALS] ? (int)a.num[O_TRIALS] : 64,
                      .seed = a.val[O_SEED] ? (uint64_t)a.num[O_SEED] : 1,
                      .per_shape = a.val[O_PER_SHAPE] != NULL,
                      .warm_start = a.val[O_WARM],
                      .atomic_split = a.val[O_ATOMIC] != NULL};
    SrchRange ranges[MAX_ARGS];
    const NamedArgs *shapes = &a.named[O_SHAPES];
    for (int i = 0; i < shapes->n; i++) {
        int64_t count;
        SrchRange *r = &ranges[o.nranges++];
        r->dim = shapes->a[i].name;
        bool ok = parse_range(shapes->a[i].value, &r->lo, &r->hi, &count);
        IR_ASSERT(ok); /* parse_args checked it */
        r->count = (int)count;
    }
    const char *records = a.val[O_RECORDS], *file = a.file;
    if (o.arch && strcmp(o.backend, "cpu") == 0)
        usage_error("--arch %s is a GPU architecture: tune with --target=cuda or --target=model",
                    o.arch);
    if (o.atomic_split && strcmp(o.backend, "cpu") == 0)
        usage_error("--atomic-split is for the GPU: tune with --target=cuda or --target=model");
    if (shapes->n && a.val[O_SHAPES_FILE])
        usage_error("--shapes and --shapes-file both say which shapes to tune: give one");
    char *defrec = records ? NULL : aot_path(NULL, file, ".records.jsonl", true);
    o.records = records ? records : defrec;
    char err[1024];
    RtOutFiles *in = outputs_new(&a, false); /* the records are appended to */
    bool clash = rt_out_check(in, o.records, err, sizeof err) != 0;
    rt_out_free(in);
    if (clash)
        fail("%s", err);
    o.ranges = ranges;
    TuneUi ui = {isatty(2) != 0, false};
    o.progress = tune_progress;
    o.warn = tune_warn;
    o.progress_ud = &ui;
    if (strcmp(o.backend, "cuda") == 0)
        cuda_require();
    FeUnit l = load_fused(file, &a.named[O_FUSE], a.val[O_FPCONTRACT]);
    int64_t *points = NULL;
    if (a.val[O_SHAPES_FILE] &&
        !(points = srch_shape_points_file(l.prog, a.val[O_SHAPES_FILE], &o.npoints, err,
                                          sizeof err)))
        fail("%s", err);
    o.points = points;
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
    if (o.warm_start)
        printf("warm start: %d search sample%s and %d chosen kernel%s of this target from %s\n",
               r->nwarm, r->nwarm == 1 ? "" : "s", r->nwarm_kernels,
               r->nwarm_kernels == 1 ? "" : "s", o.warm_start);
    for (int i = 0; i < r->nstages; i++) {
        const SrchStageResult *s = &r->stages[i];
        printf("stage %s: search %d measured + %d from records; selection %d measured (%d "
               "close ones again, in turns) + %d from records\n",
               s->stage, s->measured, s->reused, s->select_measured, s->select_turns,
               s->select_reused);
        if (s->checked)
            printf("  check: %d choice%s measured again against the next best, in turns; the "
                   "tree then picks another kernel at %d shape point%s\n", s->checked,
                   s->checked == 1 ? "" : "s", s->check_changed, s->check_changed == 1 ? "" : "s");
        if (s->runs > 0)
            printf("  noise: %lld of %lld timed runs (%.1f%%) dropped as disturbed by other "
                   "processes, slow or outliers%s\n", (long long)s->dropped, (long long)s->runs,
                   100.0 * (double)s->dropped / (double)s->runs,
                   s->dropped * 2 > s->runs ? " (a busy machine: the kept runs decided)" : "");
        const SrchTree *t = s->tree;
        int leaves = 0;
        for (int k = 0; k < t->nnodes; k++)
            leaves += srch_tree_node(t, k)->kind == TN_LEAF;
        printf("  dispatch: %d leaves, depth %d; accuracy %.1f%% (%d of %d shapes pick the "
               "best), misses cost %.3fx geomean, %.3fx worst\n",
               leaves, srch_tree_depth(t), 100 * s->score.accuracy, s->score.hits,
               s->score.n, s->score.miss_geomean, s->score.miss_worst);
        printf("  latency geomean over the shapes: %.4f ms dispatched, %.4f ms best\n",
               s->geomean_ms, s->oracle_geomean_ms);
        for (int k = 0; k < t->nnodes; k++) {
            const SrchTreeNode *n = srch_tree_node(t, k);
            if (n->kind == TN_LEAF && !srch_tree_uses(t, n->kernel, k)) {
                char *mk = srch_mk_str(&t->kernels[n->kernel], t->nspatial);
                int spill = s->spill ? s->spill[n->kernel] : 0;
                printf("  kernel: %s", mk);
                if (spill > 0)
                    printf(" (spills %d bytes: no kernel without spills within 5%% where it is "
                           "used)", spill);
                putchar('\n');
                free(mk);
            }
        }
    }
    for (int i = 0; i < r->nfusion; i++) {
        const SrchFusion *f = &r->fusion[i];
        printf("fusion: %s %s: its stages %.4f ms summed over the shapes", f->tensor,
               f->materialized ? "materialised" : "inlined", f->ms);
        if (f->same)
            printf(" (too large to inline)\n");
        else if (isnan(f->other_ms))
            printf("; %s, not timed at every shape point\n",
                   f->materialized ? "inlined" : "materialised");
        else
            printf(", %.4f ms %s\n", f->other_ms, f->materialized ? "inlined" : "materialised");
    }
    print_estimate(l.prog, r);
    if (r->ncorrupt)
        printf("records: %d damaged line%s skipped\n", r->ncorrupt, r->ncorrupt == 1 ? "" : "s");
    printf("records: %s\n", o.records);
    srch_tune_result_free(r);
    free(defrec);
    free(points);
    free_args(&a);
    fe_unload(&l);
    return 0;
}

/* ---- dcc report ---- */

static int cmd_report(int argc, char **argv)
{
    Args a = parse_args(CMD_REPORT, argc, argv);
    const char *records = a.val[O_RECORDS];
    if (!records)
        usage_error("dcc report needs --records FILE");
    char err[1024];
    SrchRecords *r = srch_records_read(records, 0, NULL, err, sizeof err);
    if (!r)
        fail("%s", err);
    for (int i = 0; i < srch_records_nwarnings(r); i++)
        records_warn(NULL, srch_records_warning(r, i)->msg);
    char *svg = srch_report_svg(r, records, err, sizeof err);
    srch_records_close(r);
    if (!svg)
        fail("%s", err);
    char *path = a.val[O_OUT] ? strdup(a.val[O_OUT]) : aot_path(NULL, records, ".svg", true);
    write_output(&a, path, svg, strlen(svg));
    if (!a.val[O_OUT]) /* where the default put it (-o may be /dev/stdout) */
        fprintf(stderr, "report: %s\n", path);
    free(path);
    free(svg);
    free_args(&a);
    return 0;
}

/* Everything written to stdout reached it, or exit 1: a full disk or a
 * closed pipe is an error (fflush reports what buffering deferred). */
static int finish(int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        fail("cannot write to standard output: %s", strerror(errno ? errno : EIO));
    return rc;
}

/* A first word that is neither a command, an option nor a file. */
static bool unknown_command(const char *w)
{
    if (access(w, F_OK) == 0 || strchr(w, '.') || strchr(w, '/'))
        return false;
    for (const char *c = w; *c; c++)
        if (!(*c >= 'a' && *c <= 'z') && *c != '-')
            return false;
    return true;
}

int main(int argc, char **argv)
{
    /* a closed 0, 1 or 2 would be the next file opened (records, an
     * output) and receive what is printed: something harmless takes its
     * place, and printing to a closed stdout is still a write error */
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0)
            continue;
        if (fd == 0) { /* reads find nothing */
            if (open("/dev/null", O_RDONLY) != 0)
                return EXIT_BAD_INPUT;
            continue;
        }
        int p[2]; /* writes fail (EPIPE): a pipe whose reading end is closed */
        if (pipe(p) != 0 || dup2(p[1], fd) != fd)
            return EXIT_BAD_INPUT;
        if (p[0] != fd)
            close(p[0]);
        close(p[1]);
    }
    /* a closed pipe (EPIPE) and a file-size limit, ulimit -f (EFBIG: "File
     * too large"), are write errors, not a silent death that leaves
     * temporaries; interrupted, the temporaries go */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGINT, on_fatal_signal);
    signal(SIGTERM, on_fatal_signal);
    signal(SIGHUP, on_fatal_signal);
    if (argc < 2)
        usage_error("no input file");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, stdout);
        return finish(0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("dcc (dietcode-c) %s, LLVM %s\n", DCC_VERSION, cg_llvm_version());
        return finish(0);
    }
    if (strcmp(argv[1], "run") == 0)
        return finish(cmd_run(argc - 1, argv + 1));
    if (strcmp(argv[1], "tune") == 0)
        return finish(cmd_tune(argc - 1, argv + 1));
    if (strcmp(argv[1], "report") == 0)
        return finish(cmd_report(argc - 1, argv + 1));
    if (argv[1][0] != '-' && unknown_command(argv[1]))
        usage_error("'%s' is not a dcc command, nor a file (commands: run, tune, report; or compile "
                    "FILE.tex)", argv[1]);
    return finish(cmd_compile(argc, argv));
}
