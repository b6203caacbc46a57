/* dcc's table of contents: what the command files (compile.c, run.c,
 * tune.c, report.c) share. main.c dispatches to them; args.c reads the
 * command line; files.c writes output files all or nothing; program.c
 * loads, checks and lowers a program. Every function here that fails
 * prints one line and exits (dcc is the only place that does). */
#ifndef DCC_DCC_H
#define DCC_DCC_H

#include "dietcode/codegen.h"
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/onnx.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include <stdlib.h>
#include <string.h>

enum { EXIT_BAD_INPUT = 1, EXIT_USAGE = 2, MAX_ARGS = 64 };

/* ---- main.c: exit status ---- */

/* The command line is wrong in itself: the message, a pointer to --help,
 * exit 2. */
_Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Anything else: "dcc: error: " and the message, exit 1. */
_Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- args.c: the command line ----
 *
 * Exit status 2 is for what is wrong with the command line in itself,
 * decidable before any file is read: an unknown option or one of another
 * command, a missing or malformed value, a single-valued option given
 * twice, NAME=VALUE options repeating a NAME, options in conflict.
 * Everything else (an unknown dim, a value out of its declared range, a bad
 * file, a failed check) is 1. */

typedef struct NamedArg {
    const char *name, *value;
    char *owned; /* what value lies in, when a copy (a part of --dims a=..,b=..) */
} NamedArg;

typedef struct NamedArgs {
    NamedArg a[MAX_ARGS];
    int n;
} NamedArgs;

enum { CMD_COMPILE = 1, CMD_RUN = 2, CMD_TUNE = 4, CMD_REPORT = 8 };

typedef enum OptId {
    O_EMIT, O_OUT, O_DUMP, O_STOP, O_VERIFY, O_TIME, O_TARGET, O_ARCH, O_NOLIBDEV, O_RECORDS,
    O_SET, O_MK, O_INPUT, O_OUTPUT, O_SEED, O_CHECK, O_BENCH, O_PROFILE, O_TRIALS, O_SHAPES, O_SHAPES_FILE, O_PER_SHAPE,
    O_WARM, O_ATOMIC, O_CONTESTS, O_PROBE, O_FUSE, O_FPCONTRACT, O_DIMS, NOPTS
} OptId;

/* A command's options as parsed. */
typedef struct Args {
    unsigned cmd;
    const char *file;
    const char *val[NOPTS]; /* a single value; "" for a flag given; NULL when absent */
    int64_t num[NOPTS];     /* ARG_COUNT's value */
    NamedArgs named[NOPTS]; /* ARG_NAMED's */
} Args;

/* Reads argv[1..argc) of cmd: options anywhere, one input file; "--" ends
 * the options. Exits 2 on anything wrong. */
Args parse_args(unsigned cmd, int argc, char **argv);
void free_args(Args *a);
/* Parses a non-negative decimal integer; false on anything else. */
bool parse_int(const char *s, int64_t *out);
/* LO..HI[:COUNT] (count 0 when absent); false when malformed. */
bool parse_range(const char *s, int64_t *lo, int64_t *hi, int64_t *count);

/* ---- files.c: output files ---- */

/* Every file the command reads (the program, records when records_in,
 * --input, --shapes-file, --warm-start), as inputs no output may be. */
RtOutFiles *outputs_new(const Args *a, bool records_in);
/* outputs_new, with the records, as the set a fatal signal abandons. */
RtOutFiles *outputs_begin(const Args *a);
void outputs_add(RtOutFiles *o, const char *path, const void *head, size_t hlen, const void *data,
                 size_t len);
/* All renamed into place, or exit 1 with none. */
void outputs_commit(RtOutFiles *o);
/* Writes text to path (all or nothing), or to stdout when path is NULL. */
void write_output(const Args *a, const char *path, const char *text, size_t len);
/* SIGINT, SIGTERM, SIGHUP: the temporaries of the outputs being written go. */
void on_fatal_signal(int sig);
/* -o itself for one output or a stream, else the stem of -o or of the
 * input's file name with ext (malloc'd). */
char *aot_path(const char *out, const char *file, const char *ext, bool both);

/* ---- program.c: loading and lowering ---- */

/* Reads and checks a's program (a .tex file, or an ONNX model with the
 * ranges of --dims), then fixes the fusion --fuse names and the float
 * contraction of --fp-contract; prints diagnostics and exits 1 on errors. */
FeUnit load_fused(const Args *a);

typedef struct CompileOpts {
    PipelineOpts pipe;
    PassTarget target;
    const char *gpu_arch;  /* GPU: the sm_XX compiled for (records of it preferred) */
    const char *records;   /* tuned kernels and dispatch, or NULL */
    SrchTree **trees;      /* filled from records when non-NULL (per tensor id) */
    const NamedArgs *mks;  /* --mk NAME=TEXT: stages' micro-kernels given by hand */
    int cpu_level;         /* CPU: the x86-64 level to lower for (0: this host's) */
    /* what the records used (set by lower_program and records_schedule) */
    char used_target[16], used_arch[64];
} CompileOpts;

/* A damaged line of a records file, as a warning. */
void records_warn(void *ud, const char *msg);
/* The schedule tuned into o->records for p, then --mk's (NULL with neither). */
StageSchedule *records_schedule(TeProgram *p, CompileOpts *o);
/* The x86-64 level a CPU program is lowered for: o->cpu_level, else the
 * CPU the records were tuned on (after records_schedule), else this one. */
int lowering_level(const CompileOpts *o);
/* Lowers the program with records_schedule's kernels. */
LoopProgram *lower_program(TeProgram *p, CompileOpts *o);
/* The dims' values from --set, checked against the program (malloc'd). */
int64_t *resolve_dims(const TeProgram *p, const NamedArgs *sets);
/* Stops with the driver's one-line message when there is no GPU. */
void cuda_require(void);

/* ---- the commands: each returns the exit status ---- */

int cmd_compile(int argc, char **argv); /* compile.c */
int cmd_run(int argc, char **argv);     /* run.c */
int cmd_tune(int argc, char **argv);    /* tune.c */
int cmd_report(int argc, char **argv);  /* report.c */

#endif
