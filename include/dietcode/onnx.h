/* dietcode/onnx.h: the ONNX importer's table of contents (frontend/onnx/).
 *
 * An ONNX model file -> protobuf-c (onnx.proto of ONNX 1.12, generated at
 * build time) -> the same TE program a .tex file gives. Problems with the
 * model are diagnostics in the unit, as the .tex frontend's are. A graph
 * input's or output's Tensor.source is its name in the model. Part of
 * libdietcode.a, whose users link libprotobuf-c too (pkg-config dietcode
 * and find_package(dietcode) name it); examples/embed_onnx.c shows the
 * calls.
 */
#ifndef DIETCODE_ONNX_H
#define DIETCODE_ONNX_H

#include "dietcode/frontend.h"
#include "dietcode/runtime.h"

/* The range of a symbolic dim (an input's dim_param), from --dims. */
typedef struct FeDimRange {
    const char *name;
    int64_t lo, hi;
} FeDimRange;

/* Reads and imports the model at path: 0 with u->prog set; 1 when the
 * model has errors (u->diags, one line each naming the node); -1 when the
 * file cannot be read (err). Every dim_param of a graph input needs a
 * range in ranges. Release with fe_unload in every case. */
int fe_load_onnx(const char *path, const FeDimRange *ranges, int nranges, FeUnit *u, char *err,
                 size_t errlen);
/* The same for a model's bytes in memory, path naming it in messages. */
int fe_load_onnx_bytes(const char *path, const uint8_t *data, size_t len, const FeDimRange *ranges,
                       int nranges, FeUnit *u, char *err, size_t errlen);
/* Reads a serialized TensorProto (a backend test's input_N.pb) of f32,
 * i32, i64 or bool into out (release with rt_array_free) and its name
 * into name (may be NULL); -1 and err. */
int fe_onnx_read_tensor(const char *path, RtArray *out, char *name, size_t namelen, char *err,
                        size_t errlen);
/* Parses "NAME=LO..HI[,NAME=LO..HI...]" (1 <= LO <= HI) in place, spec's
 * text becoming the names, into at most max ranges: their count, or -1
 * and err. */
int fe_parse_dim_ranges(char *spec, FeDimRange *out, int max, char *err, size_t errlen);
/* Whether path names an ONNX model (ends in .onnx). */
bool fe_is_onnx(const char *path);

#endif
