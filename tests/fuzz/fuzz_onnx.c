/* libFuzzer target for the ONNX importer: bytes -> protobuf-c's decoder
 * -> the importer -> TE program (with the ranges batch=1..4 and
 * sequence=1..64 for dims of those names). Any input must either import
 * or produce diagnostics; a crash, a sanitizer report, a leak or a hang is
 * a bug. A program that imports is checked by the verifier and printed.
 *
 * Build with -DDC_FUZZ=ON (clang); run through scripts/fuzz.sh onnx.
 */
#include "dietcode/onnx.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull && !(devnull = fopen("/dev/null", "w")))
        abort();
    static const FeDimRange ranges[] = {{"batch", 1, 4}, {"sequence", 1, 64}, {"T", 1, 8}};
    FeUnit u;
    char err[512];
    int rc = fe_load_onnx_bytes("fuzz.onnx", data, size, ranges, 3, &u, err, sizeof err);
    if (rc == 0) {
        if (u.diags.count != 0 || !ir_verify_te(u.prog, err, sizeof err))
            abort();
        ir_print_te(devnull, u.prog);
    } else if (rc != 1 || u.diags.count == 0) {
        abort(); /* refused without saying why */
    }
    ir_diags_print(&u.diags, devnull);
    fe_unload(&u);
    return 0;
}
