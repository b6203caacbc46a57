/* dietcode/dietcode.h: everything an embedding compiler needs, one include.
 *
 *   dietcode/ir.h        build TE programs (dims, tensors, expressions)
 *   dietcode/frontend.h  or parse and check .tex text
 *   dietcode/onnx.h      or import an ONNX model (needs libprotobuf-c)
 *   dietcode/passes.h    micro-kernels and the lowering pipeline
 *   dietcode/codegen.h   LLVM modules, objects, the JIT for the host CPU
 *   dietcode/exec.h      the launch plan and the executors (CPU, emulator, CUDA)
 *   dietcode/runtime.h   thread pool, .npy files, input generation, libdcrt
 *
 * None of them needs LLVM's headers: modules and targets are opaque here.
 * dietcode/codegen_llvm.h (not included) has them in LLVM's C API types.
 * dietcode/search.h (not included) is the tuner.
 *
 * Installed (make install): link with libdietcode.a, libdcrt.a and LLVM 19,
 * as pkg-config dietcode or CMake's find_package(dietcode) give them; in
 * the tree, with the per-layer libraries of build/. examples/embed.c and
 * examples/embed_onnx.c show the calls.
 */
#ifndef DIETCODE_H
#define DIETCODE_H

#include "dietcode/codegen.h"
#include "dietcode/exec.h"
#include "dietcode/frontend.h"
#include "dietcode/ir.h"
#include "dietcode/onnx.h"
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#endif
