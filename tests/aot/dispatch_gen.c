/* The generator of the AOT dispatch test (tests/aot/run_dispatch.sh): the
 * case of dispatch_case.h lowered for the CPU with its three variants
 * (one of two launches) and dispatch tree, written as objects and headers
 * the way dcc --emit=obj,header writes them, for two instruction sets:
 *
 *     dispatch_gen DIR   DIR/dense_dispatch.{o,h}: the plain program;
 *                        DIR/dense_dispatch_marked.{o,h}: the marked one
 *                        (variant v adds MARK * v to its outputs)
 */
#include "dietcode/codegen.h"
#include "dietcode/passes.h"

#include "tests/aot/dispatch_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "dispatch_gen: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

static int emit(const char *dir, const char *name, bool mark)
{
    TeProgram *p = dispatch_program(name);
    if (!p)
        return -1;
    char err[512] = "", path[4096];
    char *obj = NULL, *hdr = NULL;
    size_t len = 0;
    LoopProgram *lp = dispatch_lower(p, PT_CPU, mark, err, sizeof err);
    const CgTarget *isas[2];
    int nisas = cg_cpu_arch_list("x86-64-v3,x86-64", isas, 2, err, sizeof err);
    CgHostOpts o = {.nisas = nisas, .isas = isas};
    CgModule *m = lp && nisas == 2 ? cg_host_module(lp, &o, err, sizeof err) : NULL;
    int rc = -1;
    if (m && (obj = cg_module_emit(m, true, &len, err, sizeof err)) &&
        (hdr = cg_emit_header(lp, &o, err, sizeof err))) {
        snprintf(path, sizeof path, "%s/%s.o", dir, name);
        rc = write_file(path, obj, len);
        snprintf(path, sizeof path, "%s/%s.h", dir, name);
        rc = rc ? rc : write_file(path, hdr, strlen(hdr));
    } else {
        fprintf(stderr, "dispatch_gen: %s\n", err);
    }
    free(obj);
    free(hdr);
    cg_module_destroy(m);
    ir_te_destroy(p);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: dispatch_gen DIR\n");
        return 2;
    }
    int rc = emit(argv[1], "dense_dispatch", false) || emit(argv[1], "dense_dispatch_marked", true);
    cg_jit_shutdown();
    return rc ? 1 : 0;
}
