/* bench/load.h: a benchmark's program, loaded or the benchmark ends.
 * Header-only: bench_aot links none of the other benchmarks' files. */
#ifndef DC_BENCH_LOAD_H
#define DC_BENCH_LOAD_H

#include "dietcode/frontend.h"

#include <stdio.h>
#include <stdlib.h>

/* The program at path into u; on failure its message (who: the
 * benchmark's name) or its diagnostics on stderr, and exit status 1. */
static inline TeProgram *bench_load(const char *who, const char *path, FeUnit *u)
{
    char err[1024];
    int rc = fe_load(path, u, err, sizeof err);
    if (rc == 0)
        return u->prog;
    if (rc < 0)
        fprintf(stderr, "%s: %s\n", who, err);
    else
        ir_diags_print(&u->diags, stderr);
    exit(1);
}

#endif
