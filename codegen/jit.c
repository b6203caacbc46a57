/* Machine code in this process: one ORC LLJIT for the host CPU.
 *
 * A CgModule added here is compiled (lazily, at its first lookup) and
 * tracked by a resource tracker of its own, so releasing it frees its
 * machine code: the tuner compiles thousands of candidates and keeps
 * memory flat. All modules share the JIT's main library, so their symbols
 * must differ; cg_jit_prefix hands out fresh prefixes. Nothing here runs
 * the code: exec/ looks up entry points and calls them.
 *
 * What generated code calls resolves against the symbols defined with
 * cg_jit_define (exec/ defines libdcrt's entry points: libdcrt.a is linked
 * into the executable, whose symbols the JIT does not see) and then the
 * process's shared libraries (libm's expf, tanhf, ...).
 */
#include "dietcode/codegen_llvm.h"

#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/TargetMachine.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct Sym {
    char *name;
    const void *addr;
} Sym;

static struct {
    pthread_mutex_t mu;
    pthread_mutex_t link_mu; /* held while a lookup links */
    LLVMOrcLLJITRef jit;
    Sym *syms;
    int nsyms, capsyms;
    uint64_t next;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER, .link_mu = PTHREAD_MUTEX_INITIALIZER};

struct CgJitCode {
    LLVMOrcLLJITRef jit;
    LLVMOrcResourceTrackerRef rt;
};

static void error_msg(LLVMErrorRef e, const char *what, char *err, size_t errlen)
{
    char *m = LLVMGetErrorMessage(e);
    snprintf(err, errlen, "%s: %s", what, m);
    LLVMDisposeErrorMessage(m);
}

/* Defines syms[from..] in the JIT; call with G.mu held. */
static LLVMErrorRef define_syms(int from)
{
    int n = G.nsyms - from;
    if (n <= 0)
        return NULL;
    LLVMOrcCSymbolMapPair *map = calloc((size_t)n, sizeof *map);
    if (!map)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (int i = 0; i < n; i++)
        map[i] = (LLVMOrcCSymbolMapPair){
            LLVMOrcLLJITMangleAndIntern(G.jit, G.syms[from + i].name),
            {(LLVMOrcExecutorAddress)(uintptr_t)G.syms[from + i].addr,
             {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0}},
        };
    LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(G.jit),
                                           LLVMOrcAbsoluteSymbols(map, (size_t)n));
    free(map);
    return e;
}

void cg_jit_define(const char *name, const void *addr)
{
    pthread_mutex_lock(&G.mu);
    bool known = false;
    for (int i = 0; i < G.nsyms; i++)
        known |= strcmp(G.syms[i].name, name) == 0;
    if (!known) {
        if (G.nsyms == G.capsyms) {
            G.capsyms = G.capsyms ? 2 * G.capsyms : 32;
            G.syms = realloc(G.syms, sizeof *G.syms * (size_t)G.capsyms);
            if (!G.syms)
                ir_panic(__FILE__, __LINE__, "out of memory");
        }
        G.syms[G.nsyms++] = (Sym){strdup(name), addr};
        LLVMErrorRef e = G.jit ? define_syms(G.nsyms - 1) : NULL;
        if (e)
            LLVMConsumeError(e);
    }
    pthread_mutex_unlock(&G.mu);
}

char *cg_jit_prefix(void)
{
    pthread_mutex_lock(&G.mu);
    uint64_t id = G.next++;
    pthread_mutex_unlock(&G.mu);
    char *s = malloc(32);
    if (!s)
        ir_panic(__FILE__, __LINE__, "out of memory");
    snprintf(s, 32, "dc%llu_", (unsigned long long)id);
    return s;
}

/* The process-wide LLJIT, created on first use; call with G.mu held. */
static LLVMOrcLLJITRef jit_locked(char *err, size_t errlen)
{
    if (G.jit)
        return G.jit;
    LLVMTargetMachineRef tm = cg_target_machine(cg_target_cpu(), err, errlen);
    if (!tm)
        return NULL;
    LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        jb, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&G.jit, jb);
    if (e) {
        G.jit = NULL;
        error_msg(e, "cannot create the JIT", err, errlen);
        return NULL;
    }
    if ((e = define_syms(0))) {
        error_msg(e, "cannot define the JIT's runtime symbols", err, errlen);
        return NULL;
    }
    return G.jit;
}

CgJitCode *cg_jit_add(CgModule *m, char *err, size_t errlen)
{
    if (!IR_ARG_OK(m, err, errlen))
        return NULL;
    pthread_mutex_lock(&G.mu);
    LLVMOrcLLJITRef jit = jit_locked(err, errlen);
    pthread_mutex_unlock(&G.mu);
    CgJitCode *c = jit ? calloc(1, sizeof *c) : NULL;
    if (jit && !c)
        snprintf(err, errlen, "out of memory");
    if (!c) {
        cg_module_destroy(m);
        return NULL;
    }
    c->jit = jit;
    c->rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(jit));
    /* compiled here, with the module's own target machine (the JIT's one
     * compiles a module at a time): builds on several threads compile side
     * by side, and the JIT only links */
    char *msg = NULL;
    LLVMMemoryBufferRef obj = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(m->tm, m->mod, LLVMObjectFile, &msg, &obj)) {
        snprintf(err, errlen, "cannot compile for the JIT: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        cg_module_destroy(m);
        cg_jit_release(c);
        return NULL;
    }
    cg_module_destroy(m);
    LLVMErrorRef e = LLVMOrcLLJITAddObjectFileWithRT(jit, c->rt, obj);
    if (e) {
        error_msg(e, "cannot add an object to the JIT", err, errlen); /* obj is the JIT's */
        cg_jit_release(c);
        return NULL;
    }
    return c;
}

void *cg_jit_lookup(CgJitCode *c, const char *name, char *err, size_t errlen)
{
    if (!IR_ARG_OK(c, err, errlen) || !IR_ARG_OK(name, err, errlen))
        return NULL;
    LLVMOrcExecutorAddress addr = 0;
    /* the first lookup links the object: one at a time */
    pthread_mutex_lock(&G.link_mu);
    LLVMErrorRef e = LLVMOrcLLJITLookup(c->jit, &addr, name);
    pthread_mutex_unlock(&G.link_mu);
    if (e) {
        error_msg(e, "JIT compilation failed", err, errlen);
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

void cg_jit_release(CgJitCode *c)
{
    if (!c)
        return;
    LLVMErrorRef e = LLVMOrcResourceTrackerRemove(c->rt);
    if (e)
        LLVMConsumeError(e);
    LLVMOrcReleaseResourceTracker(c->rt);
    free(c);
}

void cg_jit_shutdown(void)
{
    pthread_mutex_lock(&G.mu);
    if (G.jit) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(G.jit);
        if (e)
            LLVMConsumeError(e);
        G.jit = NULL;
    }
    pthread_mutex_unlock(&G.mu);
}
