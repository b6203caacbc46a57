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

/* A string's hash as 16 hex digits (malloc'd). */
static char *hex_hash(const char *s)
{
    char *out = malloc(17);
    if (!out)
        ir_panic(__FILE__, __LINE__, "out of memory");
    snprintf(out, 17, "%016llx", (unsigned long long)rt_rng_hash(s));
    return out;
}

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
    char *out = hex_hash(!named && nl ? nl + 1 : buf);
    free(buf);
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

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **srch_fusion_classes(const TeProgram *p)
{
    int n = p->ntensors;
    bool *all = malloc((size_t)n + 1);
    char **op = calloc((size_t)n + 1, sizeof *op), **key = calloc((size_t)n + 1, sizeof *key);
    Tensor **map = malloc(sizeof *map * (size_t)(n + 1));
    int **cons = calloc((size_t)n + 1, sizeof *cons), *ncons = calloc((size_t)n + 1, sizeof *ncons);
    if (!all || !op || !key || !map || !cons || !ncons)
        ir_panic(__FILE__, __LINE__, "out of memory");
    memset(all, 1, (size_t)n);
    /* each op alone (every other tensor an input), and who reads whom */
    for (int u = 0; u < n; u++) {
        if (p->tensors[u]->kind == TK_INPUT)
            continue;
        TeProgram *c = ir_te_extract(p, p->tensors[u], all, true, map);
        op[u] = hash_of(c, "", "", true);
        ir_te_destroy(c);
        for (int t = 0; t < n; t++)
            if (t != u && map[t]) {
                int *l = realloc(cons[t], sizeof *l * (size_t)(ncons[t] + 1));
                if (!l)
                    ir_panic(__FILE__, __LINE__, "out of memory");
                cons[t] = l;
                l[ncons[t]++] = u;
            }
    }
    for (int t = 0; t < n; t++) {
        if (!op[t])
            continue;
        char **ops = malloc(sizeof *ops * (size_t)(ncons[t] + 1));
        for (int k = 0; k < ncons[t]; k++)
            ops[k] = op[cons[t][k]];
        qsort(ops, (size_t)ncons[t], sizeof *ops, by_str);
        char *text = malloc(17 * (size_t)(ncons[t] + 1) + 1);
        strcpy(text, op[t]);
        for (int k = 0; k < ncons[t]; k++)
            strcat(strcat(text, " "), ops[k]);
        key[t] = hex_hash(text);
        free(text);
        free(ops);
    }
    for (int t = 0; t < n; t++) {
        free(op[t]);
        free(cons[t]);
    }
    free(op);
    free(cons);
    free(ncons);
    free(map);
    free(all);
    return key;
}

char *srch_program_fingerprint(const TeProgram *p, const char *target, const char *arch)
{
    return hash_of(p, target, arch, false);
}

const char *srch_host_arch(void) { return cg_target_cpu()->cpu; }
