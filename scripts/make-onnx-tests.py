#!/usr/bin/env python3
"""Exports small BERT and GPT-2 models to ONNX, as users do, with ONNX
Runtime's outputs at several shapes: the model tests of the importer
(ctest onnx.exports, tests/onnx/backend.c).

Each model: 2 layers, hidden 64, 4 heads, FFN 128, vocabulary 100, 64
positions, random weights from a fixed seed (transformers' default configs
otherwise; no network). Dynamic batch and sequence, exported by PyTorch's
exporters: the default (dynamo=True, opset 18) and the TorchScript one
(dynamo=False, opset 17) where it works: an export whose outputs under
ONNX Runtime differ from PyTorch's by more than 1e-4 is not kept (with
transformers 5 the TorchScript exporter bakes the example's attention
mask into the graph). The output folder holds one
folder per model and exporter in the layout of ONNX's backend tests:

    test_bert_dynamo/model.onnx
    test_bert_dynamo/test_data_set_N/input_K.pb, output_K.pb

with data sets at (batch, sequence) in the range the test declares
(batch=1..4, sequence=1..32), at its ends and above it. Outputs are ONNX
Runtime's (CPU provider) on the same file.

    .venv-model/bin/python scripts/make-onnx-tests.py [OUT]   (default tests/onnx/exports)

Needs torch, transformers, onnx, onnxscript and onnxruntime: the venv
`scripts/install-deps.sh --bench-model` makes.
"""
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers
from onnx import numpy_helper

SHAPES = [(1, 1), (2, 7), (1, 32), (4, 32), (3, 17), (4, 1), (2, 40), (5, 9)]
HIDDEN, LAYERS, HEADS, FFN, VOCAB, POSITIONS = 64, 2, 4, 128, 100, 64


def bert():
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                  num_attention_heads=HEADS, intermediate_size=FFN,
                                  max_position_embeddings=POSITIONS, type_vocab_size=2)
    return transformers.BertModel(cfg), ["input_ids", "attention_mask", "token_type_ids"], \
        ["last_hidden_state", "pooler_output"]


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                                  n_inner=FFN, n_positions=POSITIONS, use_cache=False)
    return transformers.GPT2Model(cfg), ["input_ids", "attention_mask"], ["last_hidden_state"]


class Wrapped(torch.nn.Module):
    """The model with positional inputs and a tuple of tensors out."""

    def __init__(self, model, inputs, outputs):
        super().__init__()
        self.model, self.inputs, self.outputs = model, inputs, outputs

    def forward(self, *args):
        out = self.model(**dict(zip(self.inputs, args)))
        return tuple(out[k] for k in self.outputs)


def feeds(names, batch, seq, rng):
    f = {}
    for n in names:
        if n == "input_ids":
            f[n] = rng.integers(0, VOCAB, (batch, seq), dtype=np.int64)
        elif n == "token_type_ids":
            f[n] = rng.integers(0, 2, (batch, seq), dtype=np.int64)
        else:  # attention_mask: row b masks its last b positions (padding)
            m = np.ones((batch, seq), dtype=np.int64)
            for b in range(batch):
                if b and seq > b:
                    m[b, seq - b:] = 0
            f[n] = m
    return f


def export(name, make, dynamo, out):
    torch.manual_seed(0)
    model, inputs, outputs = make()
    model.eval()
    w = Wrapped(model, inputs, outputs)
    rng = np.random.default_rng(0)
    example = tuple(torch.from_numpy(v) for v in feeds(inputs, 2, 8, rng).values())
    folder = os.path.join(out, "test_%s_%s" % (name, "dynamo" if dynamo else "torchscript"))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            batch = torch.export.Dim("batch", min=1, max=64)
            seq = torch.export.Dim("sequence", min=1, max=POSITIONS)
            prog = torch.onnx.export(w, example, dynamo=True, opset_version=18, input_names=inputs,
                                     output_names=outputs,
                                     dynamic_shapes=(tuple({0: batch, 1: seq} for _ in inputs),))
            prog.save(path)
        else:
            axes = {n: {0: "batch", 1: "sequence"} for n in inputs}
            axes.update({n: {0: "batch", 1: "sequence"} for n in outputs if n != "pooler_output"})
            axes.update({n: {0: "batch"} for n in outputs if n == "pooler_output"})
            torch.onnx.export(w, example, path, dynamo=False, opset_version=17, input_names=inputs,
                              output_names=outputs, dynamic_axes=axes)
    m = onnx.load(path)
    ops = sorted({n.op_type for n in m.graph.node})
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for k, (b, s) in enumerate(SHAPES):
        f = feeds(inputs, b, s, rng)
        got = sess.run(outputs, f)
        with torch.no_grad():
            ref = w(*(torch.from_numpy(v) for v in f.values()))
        diff = max(float(np.abs(g - r.numpy()).max()) for g, r in zip(got, ref))
        if not diff <= 1e-4:  # an export that changed the model is no test of the importer
            raise ValueError("ONNX Runtime's outputs differ from PyTorch's by %.2g at batch %d, "
                             "sequence %d" % (diff, b, s))
        d = os.path.join(folder, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        for i, n in enumerate(inputs):
            onnx.save_tensor(numpy_helper.from_array(f[n], n), os.path.join(d, "input_%d.pb" % i))
        for i, (n, v) in enumerate(zip(outputs, got)):
            onnx.save_tensor(numpy_helper.from_array(v, n), os.path.join(d, "output_%d.pb" % i))
        print("%s: batch %d, sequence %d: ONNX Runtime vs PyTorch max abs difference %.2g"
              % (os.path.basename(folder), b, s, diff))
    print("%s: %d nodes, operators %s" % (os.path.basename(folder), len(m.graph.node), " ".join(ops)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx", "exports")
    print("torch %s, transformers %s, onnx %s, onnxruntime %s" % (
        torch.__version__, transformers.__version__, onnx.__version__, ort.__version__))
    for name, make in (("bert", bert), ("gpt2", gpt2)):
        for dynamo in (True, False):
            try:
                export(name, make, dynamo, out)
            except Exception as e:  # the TorchScript exporter may not handle a model
                folder = os.path.join(out, "test_%s_%s" % (name, "dynamo" if dynamo else "torchscript"))
                shutil.rmtree(folder, ignore_errors=True)
                if dynamo:
                    raise
                print("%s by the TorchScript exporter: not exported (%s: %s)"
                      % (name, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))


if __name__ == "__main__":
    main()
