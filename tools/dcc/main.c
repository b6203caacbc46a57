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
#include "dcc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

static const char *usage_text =
    "usage: dcc FILE.tex [-o OUT] [--emit=te|tex|loops|plan|llvm|asm|ptx|obj|header|dispatch[,...]]\n"
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
    "               [--atomic-split] [--contests N] [--probe-ms MS] [--fp-contract=on|off]\n"
    "               [--seed N]\n"
    "       dcc report --records=FILE [-o REPORT.svg]\n"
    "       dcc --help | --version\n"
    "  FILE may also be an ONNX model (MODEL.onnx) with --dims NAME=LO..HI[,...]\n"
    "  giving the range of each symbolic dim (dim_param) of its inputs\n"
    "\n"
    "  --emit=te           print the checked tensor-expression program\n"
    "  --emit=tex          write the program as a .tex file (-o FILE.tex) and its\n"
    "                      constants as .npy files beside it (FILE.NAME.npy): an\n"
    "                      ONNX model as a program to read, change and compile\n"
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
    "                      (integers below the least extent a gather indexes)\n"
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
    "  --contests N        (tune) close fusion choices tuned both ways, at most (the\n"
    "                      N whose other way changes the most time; default 4)\n"
    "  --probe-ms MS       (tune) where the best time known (else the peak's) at the\n"
    "                      shape a candidate adapts best to is MS or more, it is\n"
    "                      first run at a smaller shape, and not there when\n"
    "                      hopeless (default 10; 0: never; not on --target=model)\n"
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

/* The one line dcc ends with: prefix, the message, then tail. */
static _Noreturn void quit(int status, const char *prefix, const char *tail, const char *fmt,
                           va_list ap)
{
    fputs(prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputs(tail, stderr);
    exit(status);
}

_Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    quit(EXIT_USAGE, "dcc: ", "\n(see 'dcc --help')\n", fmt, ap);
}

_Noreturn void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    quit(EXIT_BAD_INPUT, "dcc: error: ", "\n", fmt, ap);
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
