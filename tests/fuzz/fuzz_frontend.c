/* libFuzzer target for the whole frontend: bytes -> lexer -> parser ->
 * sema -> TE program, and the diagnostic printer. Any input must either
 * compile or produce diagnostics; a crash, a sanitizer report, a leak or a
 * hang is a bug. A program that compiles is also printed, and checked
 * once more by the verifier, so the printer sees every form sema builds.
 *
 * Build with -DDC_FUZZ=ON (clang); run through scripts/fuzz.sh.
 */
#include "dietcode/frontend.h"
#include "dietcode/ir.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull && !(devnull = fopen("/dev/null", "w")))
        abort();
    Arena *a = ir_arena_new();
    char *text = ir_arena_alloc(a, size + 1); /* zeroed: NUL-terminated */
    memcpy(text, data, size);
    Source src = {.path = "fuzz.tex", .text = text, .len = size};
    DiagList diags;
    ir_diags_init(&diags, a, &src);

    TeProgram *p = fe_compile(&src, "fuzz", &diags);
    if (p) {
        char err[256];
        if (diags.count != 0 || !ir_verify_te(p, err, sizeof err))
            abort();
        ir_print_te(devnull, p);
        ir_te_destroy(p);
    } else if (diags.count == 0) {
        abort(); /* rejected without saying why */
    }
    ir_diags_print(&diags, devnull);
    ir_arena_destroy(a);
    return 0;
}
