/* dietcode/dietcode.h: everything an embedding compiler needs, one include.
 *
 *   dietcode/ir.h        build TE programs (dims, tensors, expressions)
 *   dietcode/frontend.h  or parse and check .tex text
 *   dietcode/passes.h    micro-kernels and the lowering pipeline
 *   dietcode/codegen.h   LLVM modules, objects, the JIT for the host CPU
 *   dietcode/exec.h      the launch plan and the executors (CPU, emulator, CUDA)
 *   dietcode/runtime.h   thread pool, .npy files, input generation, libdcrt
 *
 * Link with the static libraries of build/ (dc_exec, dc_codegen, dc_passes,
 * dc_frontend, dc_ir, dcrt) and LLVM 19; examples/embed.c shows the calls.
 */
#ifndef DIETCODE_H
#define DIETCODE_H

#include "dietcode/codegen.h"
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#endif
