/* The workload fingerprint: what records are filed under.
 *
 * A stage's workload is what it computes, how and where: its canonical TE
 * (ir_te_extract in canonical form: the stage alone, dims, tensors and
 * axes renamed by first use, ranges, constant extents and dtypes kept),
 * the target ("cpu", "cuda", "model") and the arch it runs on (the CPU's
 * LLVM name, the GPU's sm_XX). Two stages with the same fingerprint, in one
 * program (BERT's Q, K and V projections) or in two, share measurements and
 * dispatch trees; a renamed or reordered program keeps its records. The
 * hash is 64-bit FNV-1a, written as 16 hex digits.
 *
 * A program's fingerprint files what belongs to the whole program (the
 * fusion choices): its TE as printed, names kept but not the file's, the
 * target and the arch. Editing the program drops those choices (its
 * stages' records still match where the stages are unchanged).
 */
#include "dietcode/codegen_llvm.h" /* CgTarget's cpu */
#include "dietcode/runtime.h"
#include "dietcode/search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The hash of p's printed TE, target and arch, as 16 hex digits; from the
 * TE's second line when !named (the first names the program). */
static char *hash_of(const TeProgram *p, const char *target, const char *arch, bool named)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        ir_panic(__FILE__, __LINE__, "out of memory");
    ir_print_te(f, p);
    fprintf(f, "target %s\narch %s\n", target, arch);
    fclose(f);
    const char *nl = strchr(buf, '\n');
    uint64_t h = rt_rng_hash(!named && nl ? nl + 1 : buf);
    free(buf);
    char *out = malloc(17);
    if (!out)
        ir_panic(__FILE__, __LINE__, "out of memory");
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return out;
}

char *srch_fingerprint(const TeProgram *p, const Tensor *t, const bool *materialized,
                       const char *target, const char *arch)
{
    TeProgram *c = ir_te_extract(p, t, materialized, true, NULL);
    char *fp = hash_of(c, target, arch, true);
    ir_te_destroy(c);
    return fp;
}

char *srch_program_fingerprint(const TeProgram *p, const char *target, const char *arch)
{
    return hash_of(p, target, arch, false);
}

const char *srch_host_arch(void) { return cg_target_cpu()->cpu; }
