/* The dispatch case shared by tests/unit/test_dispatch.c and the AOT
 * dispatch test (tests/aot/dispatch_gen.c, client_dispatch.c): a dense
 * layer with bias, Y[T, 20] = X[T, 24] * W[20, 24]^T + b, whose one stage
 * has three micro-kernel variants and the dispatch tree
 *
 *     T <= 5: variant 0;  T <= 40: variant 1;  else variant 2
 *
 * on T declared 1..48 (so T above 48 takes the last leaf). Variant 1
 * splits its reduction in three (two launches and a scratch buffer in the
 * workspace). A marked lowering adds DISPATCH_MARK * v to every value
 * variant v stores into Y, so a run shows which variant computed each
 * output. The top part is plain C
 * for the AOT client, which links no compiler library.
 */
#ifndef DC_TESTS_DISPATCH_CASE_H
#define DC_TESTS_DISPATCH_CASE_H

#include <stdint.h>

enum { DISPATCH_N = 20, DISPATCH_K = 24, DISPATCH_LE0 = 5, DISPATCH_LE1 = 40 };
#define DISPATCH_MARK 1000.0

/* The variant the tree picks for T. */
static inline int dispatch_expected(int64_t T)
{
    return T <= DISPATCH_LE0 ? 0 : T <= DISPATCH_LE1 ? 1 : 2;
}

#ifdef DIETCODE_PASSES_H
enum { DISPATCH_NVARIANTS = 3 };
/* The micro-kernels of the variants, in order. */
extern const char *const dispatch_variants[DISPATCH_NVARIANTS];
/* The program compiled from the case's .tex text under name (the AOT
 * symbols' prefix); NULL with the diagnostics on stderr. */
TeProgram *dispatch_program(const char *name);
/* The program lowered for kind with the case's schedule (verified after
 * every pass), marked when mark is set; NULL and err on failure. */
LoopProgram *dispatch_lower(TeProgram *p, PassTarget kind, bool mark, char *err, size_t errlen);
#endif

#endif
