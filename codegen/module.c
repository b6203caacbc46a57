/* LLVM's objects, owned in one place: every module codegen builds (the
 * kernels for --emit=llvm|asm, the PTX, the object of --emit=obj, what
 * the JIT runs) is a CgModule holding its context, the module and the
 * target machine of its target, created by cg_module_create and disposed
 * by cg_module_destroy, whatever happened in between. The context is an
 * ORC thread-safe context so the JIT can take the module over
 * (codegen/jit.c); LLVM's error diagnostics during optimisation and code
 * generation are caught here and become the caller's error message
 * instead of going to stderr.
 *
 * Here too: verifying and optimising a module (default<O3> with the
 * target's machine, so target-specific passes see the real processor;
 * on the CPU after mergefunc, so that identical kernel bodies are one) and
 * emitting it as LLVM text, assembly (PTX on NVPTX) or an object, and
 * naming the LLVM it was built with (cg_llvm_version).
 */
#include "dietcode/codegen_llvm.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h> /* LLVM_VERSION_STRING; C, as llvm-c/Target.h uses it */

#include <stdlib.h>
#include <string.h>

static void on_diag(LLVMDiagnosticInfoRef di, void *ud)
{
    CgModule *m = ud;
    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || m->diag_failed)
        return;
    char *msg = LLVMGetDiagInfoDescription(di);
    snprintf(m->diag, sizeof m->diag, "%s", msg ? msg : "LLVM error");
    LLVMDisposeMessage(msg);
    m->diag_failed = true;
}

const char *cg_llvm_version(void) { return LLVM_VERSION_STRING; }

LLVMTargetMachineRef cg_target_machine(const CgTarget *t, char *err, size_t errlen)
{
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(t->triple, &target, &msg)) {
        snprintf(err, errlen, "no LLVM target for %s: %s", t->triple, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return NULL;
    }
    LLVMDisposeMessage(msg);
    LLVMTargetMachineRef tm =
        LLVMCreateTargetMachine(target, t->triple, t->cpu, t->features,
                                LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelJITDefault);
    if (!tm)
        snprintf(err, errlen, "cannot create a target machine for %s (%s)", t->triple, t->cpu);
    return tm;
}

CgModule *cg_module_create(const CgTarget *t, const char *name, char *err, size_t errlen)
{
    if (!IR_ARG_OK(t, err, errlen) || !IR_ARG_OK(name, err, errlen))
        return NULL;
    CgModule *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    m->t = t;
    if (!(m->tm = cg_target_machine(t, err, errlen))) {
        free(m);
        return NULL;
    }
    m->tsc = LLVMOrcCreateNewThreadSafeContext();
    m->cx = LLVMOrcThreadSafeContextGetContext(m->tsc);
    LLVMContextSetDiagnosticHandler(m->cx, on_diag, m);
    m->mod = LLVMModuleCreateWithNameInContext(name, m->cx);
    LLVMSetTarget(m->mod, t->triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(m->tm);
    LLVMSetModuleDataLayout(m->mod, dl);
    LLVMDisposeTargetData(dl);
    return m;
}

void cg_module_destroy(CgModule *m)
{
    if (!m)
        return;
    if (m->mod)
        LLVMDisposeModule(m->mod);
    if (m->tsc) {
        LLVMContextSetDiagnosticHandler(m->cx, NULL, NULL);
        LLVMOrcDisposeThreadSafeContext(m->tsc);
    }
    if (m->tm)
        LLVMDisposeTargetMachine(m->tm);
    free(m);
}

/* An LLVM diagnostic caught since the module was created, as err. */
static int diag_failed(CgModule *m, char *err, size_t errlen)
{
    if (!m->diag_failed)
        return 0;
    snprintf(err, errlen, "%s", m->diag);
    return -1;
}

int cg_module_verify(CgModule *m, char *err, size_t errlen)
{
    if (!IR_ARG_OK(m, err, errlen))
        return -1;
    char *msg = NULL;
    int bad = LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &msg);
    if (bad) {
        const char *s = msg ? msg : ""; /* the rule, then the instruction breaking it */
        size_t n = strcspn(s, "\n"), k = s[n] ? strcspn(s + n + 1, "\n") : 0;
        snprintf(err, errlen, "internal error: invalid LLVM module: %.*s%s%.*s", (int)n, s,
                 k ? ": " : "", (int)k, s[n] ? s + n + 1 : "");
    }
    LLVMDisposeMessage(msg);
    return bad ? -1 : diag_failed(m, err, errlen);
}

static int run_passes(CgModule *m, const char *passes, bool unroll, char *err, size_t errlen)
{
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(opts, unroll);
    LLVMErrorRef e = LLVMRunPasses(m->mod, passes, m->tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (e) {
        char *msg = LLVMGetErrorMessage(e);
        snprintf(err, errlen, "LLVM optimisation failed: %s", msg);
        LLVMDisposeErrorMessage(msg);
        return -1;
    }
    return diag_failed(m, err, errlen);
}

int cg_module_run_passes(CgModule *m, const char *passes, char *err, size_t errlen)
{
    if (!IR_ARG_OK(m, err, errlen) || !IR_ARG_OK(passes, err, errlen))
        return -1;
    return run_passes(m, passes, true, err, errlen);
}

int cg_module_optimize(CgModule *m, char *err, size_t errlen)
{
    if (cg_module_verify(m, err, errlen) < 0)
        return -1;
    /* on the CPU, kernels whose bodies are the same (a model's layers: the
     * buffers are the bodies' arguments) first become one body
     * (codegen/cpu.c), optimised and compiled once */
    bool cpu = strcmp(m->t->name, "nvptx") != 0;
    return run_passes(m, cpu ? "mergefunc,default<O3>" : "default<O3>", !m->t->no_llvm_unroll,
                      err, errlen);
}

static char *dup_text(const char *p, size_t n, char *err, size_t errlen)
{
    char *s = malloc(n + 1);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

char *cg_module_print(CgModule *m, char *err, size_t errlen)
{
    if (!IR_ARG_OK(m, err, errlen))
        return NULL;
    char *txt = LLVMPrintModuleToString(m->mod);
    char *out = dup_text(txt, strlen(txt), err, errlen);
    LLVMDisposeMessage(txt);
    return out;
}

char *cg_module_emit(CgModule *m, bool object, size_t *len, char *err, size_t errlen)
{
    if (!IR_ARG_OK(m, err, errlen) || !IR_ARG_OK(len, err, errlen))
        return NULL;
    char *msg = NULL, *out = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(m->tm, m->mod, object ? LLVMObjectFile : LLVMAssemblyFile,
                                            &msg, &buf)) {
        snprintf(err, errlen, "LLVM code generation failed: %s", msg ? msg : "?");
    } else if (diag_failed(m, err, errlen) == 0) {
        *len = LLVMGetBufferSize(buf);
        out = dup_text(LLVMGetBufferStart(buf), *len, err, errlen);
    }
    if (buf)
        LLVMDisposeMemoryBuffer(buf);
    LLVMDisposeMessage(msg);
    return out;
}

CgModule *cg_kernels_module(const LoopProgram *lp, const CgTarget *t, const char *prefix,
                            bool optimize, char *err, size_t errlen)
{
    if (!IR_ARG_OK(lp, err, errlen))
        return NULL;
    CgModule *m = cg_module_create(t, lp->te->name, err, errlen);
    if (!m)
        return NULL;
    for (int i = 0; i < lp->nkernels; i++) {
        const Kernel *k = lp->kernels[i];
        char *sym = cg_symbol(prefix, k->name);
        cg_emit_kernel(m->mod, t, lp, k, sym);
        free(sym);
    }
    if ((optimize ? cg_module_optimize(m, err, errlen) : cg_module_verify(m, err, errlen)) < 0) {
        cg_module_destroy(m);
        return NULL;
    }
    return m;
}

int cg_symbol_prefix_check(const char *prog, char *err, size_t errlen)
{
    static const char *const runtime[] = {"dcrt", "rt"}; /* libdcrt's prefixes */
    for (size_t i = 0; i < sizeof runtime / sizeof *runtime; i++) {
        size_t n = strlen(runtime[i]);
        if (strncmp(prog, runtime[i], n) == 0 && (prog[n] == 0 || prog[n] == '_')) {
            snprintf(err, errlen,
                     "the program name '%s' is reserved: its entry points (%s_run, ...) could be "
                     "libdcrt's own symbols (dcrt_*, rt_*); rename the file", prog, prog);
            return -1;
        }
    }
    return 0;
}

char *cg_symbol(const char *prefix, const char *name)
{
    size_t n = (prefix ? strlen(prefix) : 0) + strlen(name) + 1;
    char *s = malloc(n);
    if (!s)
        ir_panic(__FILE__, __LINE__, "out of memory");
    snprintf(s, n, "%s%s", prefix ? prefix : "", name);
    for (char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            *c = '_';
    return s;
}
