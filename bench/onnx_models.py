"""bench/onnx_models.py: whole models from their ONNX files, dcc against ONNX Runtime
(and PyTorch eager) on the CPU, cell by cell in turns, one run.

    make bench-onnx                    # installs the venv, builds, runs this
    .venv-model/bin/python bench/onnx_models.py [--build build] [--models bert,gpt2]
        [--trials 32] [--reps 20] [--rounds 3] [--threads 2] [--no-torch]

Models: BERT-base and GPT-2 small from transformers' default configs with
random weights (seed 0, no hub), exported once by PyTorch's default
exporter (dynamo=True, opset 18) with dynamic batch and sequence into
BUILD/bench-onnx/. The same file goes to ONNX Runtime (CPU provider,
ORT_ENABLE_ALL, intra-op threads = --threads, inter-op 1) and to dcc
(bench_model, bench/model.c: tuned once with --trials over batch=1..4,
sequence=1..512, or the default schedule with --trials 0; JIT for this
CPU). Outputs are compared with ONNX Runtime's at every cell before it is
timed (max abs difference printed). Cells: batch 1 at sequence 1, 8, 32,
64, 128, 256, 384, 512 and batch 4 at 32 and 128; per cell, --rounds
rounds, each timing every side (median of --reps calls after a warm-up),
the order rotating from round to round; a side's time is the lowest of
its round medians. Prints each cell's times and ratio ORT / dcc (above 1:
dcc is faster), the geomean per model, the lowest cell, dcc's tuning and
compile time, the stages tuned and how many distinct workloads they are,
and the peak RSS of each side (dcc: bench_model's process; ONNX Runtime:
a process of its own holding only its session). Then the model cut to
one layer is exported and tuned alike (--no-one-layer: not), and the
whole model's tuning time is given as a multiple of that one's. Records
are kept in BUILD/bench-onnx/ (NAME.records.jsonl, NAME_1layer.records.jsonl):
a run that finds them replays what they hold, so tuning times count only
from a run that started without them.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = [(1, 1), (1, 8), (1, 32), (1, 64), (1, 128), (1, 256), (1, 384), (1, 512), (4, 32), (4, 128)]
DIMS = "batch=1..4,sequence=1..512"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="bert,gpt2")
    ap.add_argument("--trials", type=int, default=32, help="dcc tune trials (0: untuned)")
    ap.add_argument("--reps", type=int, default=20, choices=range(1, 65), metavar="1..64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cells", default="", help="BxS,... (default: the ten cells above)")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch eager out")
    ap.add_argument("--no-one-layer", action="store_true",
                    help="do not tune the one-layer model the whole one's tuning time is held to")
    return ap.parse_args()


ARGS = parse_args()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

torch.set_num_threads(ARGS.threads)


def make(name, layers=12):
    torch.manual_seed(0)
    if name == "bert":
        m = transformers.BertModel(transformers.BertConfig(num_hidden_layers=layers))
        return m.eval(), ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state"]
    m = transformers.GPT2Model(transformers.GPT2Config(use_cache=False, n_layer=layers))
    return m.eval(), ["input_ids", "attention_mask"], ["last_hidden_state"]


def _make_onnx_tests():
    """scripts/make-onnx-tests.py as a module: its export wrapper is ours."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "make_onnx_tests", os.path.join(ROOT, "scripts", "make-onnx-tests.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


Wrapped = _make_onnx_tests().Wrapped


def export(name, path, layers=12):
    model, inputs, outputs = make(name, layers)
    w = Wrapped(model, inputs, outputs)
    if not os.path.exists(path):
        ids = torch.zeros(2, 8, dtype=torch.int64)
        example = (ids, torch.ones_like(ids), torch.zeros_like(ids))[:len(inputs)]
        batch = torch.export.Dim("batch", min=1, max=64)
        seq = torch.export.Dim("sequence", min=1, max=512)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = torch.onnx.export(w, example, dynamo=True, opset_version=18, input_names=inputs,
                                     output_names=outputs,
                                     dynamic_shapes=(tuple({0: batch, 1: seq} for _ in inputs),))
        prog.save(path + ".tmp")
        os.replace(path + ".tmp", path)
    return w, inputs, outputs


def feeds(inputs, b, s, rng):
    f = {}
    for n in inputs:
        if n == "input_ids":
            f[n] = rng.integers(0, 30000, (b, s), dtype=np.int64)
        elif n == "token_type_ids":
            f[n] = np.zeros((b, s), dtype=np.int64)
        else:
            f[n] = np.ones((b, s), dtype=np.int64)
    return f


class Dcc:
    """bench_model on the model: tuned once, then timed on request."""

    def __init__(self, path, records):
        cmd = [os.path.join(ARGS.build, "bench", "bench_model"), "--threads", str(ARGS.threads),
               "--dims", DIMS, path]
        if ARGS.trials:
            cmd[1:1] = ["--trials", str(ARGS.trials), "--records", records]
        t0 = time.time()
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.p.stdout.readline().split()
        if not ready or ready[0] != "ready":
            sys.exit("bench_model did not start")
        self.wall = time.time() - t0
        self.tune_s = float(ready[1])
        self.stages, self.workloads = int(ready[2]), int(ready[3])

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        a = self.p.stdout.readline().strip()
        if a.startswith("error"):
            sys.exit("bench_model: %s (after '%s')" % (a, line))
        return a

    def peak_rss_mb(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")


def ort_session(path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = ARGS.threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_peak_rss_mb(path, cells):
    """ONNX Runtime's peak RSS, in a process holding only its session."""
    code = ("import onnxruntime as ort, numpy as np, resource, sys\n"
            "so = ort.SessionOptions(); so.intra_op_num_threads = %d; so.inter_op_num_threads = 1\n"
            "s = ort.InferenceSession(%r, so, providers=['CPUExecutionProvider'])\n"
            "for b, q in %r:\n"
            "    s.run(None, {i.name: np.ones((b, q), np.int64) for i in s.get_inputs()})\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
            % (ARGS.threads, path, cells))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return float(out.stdout.strip() or "nan")


def median_ms(f, reps):
    f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t0) * 1e3)
    return sorted(ts)[len(ts) // 2]


def bench_model(name, tmp):
    path = os.path.join(ARGS.build, "bench-onnx", name + ".onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t0 = time.time()
    w, inputs, outputs = export(name, path)
    print("%s: %s (%.0f MB), exported or found in %.0f s" % (name, path, os.path.getsize(path) / 1e6,
                                                           time.time() - t0), flush=True)
    sess = ort_session(path)
    records = os.path.join(ARGS.build, "bench-onnx", name + ".records.jsonl")
    dcc = Dcc(path, records)
    print("%s: dcc %s in %.1f s (tuning %.1f s), then compiled" % (
        name, "tuned with %d trials" % ARGS.trials if ARGS.trials else "default schedule",
        dcc.wall, dcc.tune_s), flush=True)
    cells = CELLS
    if ARGS.cells:
        cells = [tuple(int(x) for x in c.split("x")) for c in ARGS.cells.split(",")]
    rng = np.random.default_rng(0)
    rows = []
    for b, s in cells:
        f = feeds(inputs, b, s, rng)
        dcc.ask("dims batch=%d sequence=%d" % (b, s))
        for n, v in f.items():
            p = os.path.join(tmp, n + ".npy")
            np.save(p, v)
            dcc.ask("load %s %s" % (n, p))
        out = os.path.join(tmp, "out.npy")
        dcc.ask("save %s %s" % (outputs[0], out))
        want = sess.run(outputs[:1], f)[0]
        diff = float(np.abs(np.load(out) - want).max())
        sides = {"ort": lambda: sess.run(outputs[:1], f),
                 "dcc": lambda: float(dcc.ask("time %d" % ARGS.reps))}
        targs = tuple(torch.from_numpy(v) for v in f.values())
        if not ARGS.no_torch:
            sides["torch"] = lambda: w(*targs)
        best = {k: float("inf") for k in sides}
        order = list(sides)
        with torch.no_grad():
            for r in range(ARGS.rounds):
                for k in order[r % len(order):] + order[:r % len(order)]:
                    ms = sides[k]() if k == "dcc" else median_ms(sides[k], ARGS.reps)
                    best[k] = min(best[k], ms)
        rows.append((b, s, best, diff))
        print("%s batch %d seq %3d: ORT %8.3f ms  dcc %8.3f ms  %s ratio ORT/dcc %.2fx  "
              "(max |dcc - ORT| %.2g)" % (
                  name, b, s, best["ort"], best["dcc"],
                  "" if ARGS.no_torch else "torch %8.3f ms " % best["torch"],
                  best["ort"] / best["dcc"], diff), flush=True)
    ratios = [r[2]["ort"] / r[2]["dcc"] for r in rows]
    low = min(range(len(rows)), key=lambda i: ratios[i])
    dcc_rss = dcc.peak_rss_mb()
    dcc.p.stdin.close()
    dcc.p.wait()
    ort_rss = ort_peak_rss_mb(path, [(r[0], r[1]) for r in rows])
    print("%s: geomean ORT/dcc %.2fx over %d cells, lowest %.2fx at batch %d seq %d" % (
        name, math.exp(sum(math.log(x) for x in ratios) / len(ratios)), len(ratios), ratios[low],
        rows[low][0], rows[low][1]))
    if not ARGS.no_torch:
        tr = [r[2]["torch"] / r[2]["dcc"] for r in rows]
        print("%s: geomean PyTorch eager/dcc %.2fx" % (name, math.exp(sum(map(math.log, tr)) / len(tr))))
    print("%s: dcc tuning %.1f s (%d stages of %d distinct workloads), start (tune + compile) "
          "%.1f s; peak RSS dcc %.0f MB, ORT %.0f MB, weights %.0f MB" % (
              name, dcc.tune_s, dcc.stages, dcc.workloads, dcc.wall, dcc_rss, ort_rss,
              os.path.getsize(path) / 2**20), flush=True)
    if ARGS.trials and not ARGS.no_one_layer:
        one = one_layer(name)
        print("%s: one layer alone tuned in %.1f s (%d stages of %d distinct workloads): the 12 "
              "layers took %.2fx its time" % (name, one.tune_s, one.stages, one.workloads,
                                             dcc.tune_s / one.tune_s), flush=True)


def one_layer(name):
    """The model cut to one layer, exported and tuned alike (its own records),
    for the target: tuning 12 identical layers <= 2x tuning one."""
    path = os.path.join(ARGS.build, "bench-onnx", name + "_1layer.onnx")
    export(name, path, layers=1)
    dcc = Dcc(path, os.path.join(ARGS.build, "bench-onnx", name + "_1layer.records.jsonl"))
    dcc.p.stdin.close()
    dcc.p.wait()
    return dcc


def main():
    print("torch %s, transformers %s, onnxruntime %s; %d threads; trials %d" % (
        torch.__version__, transformers.__version__, ort.__version__, ARGS.threads, ARGS.trials))
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as tmp:
        for name in ARGS.models.split(","):
            bench_model(name, tmp)


if __name__ == "__main__":
    main()
