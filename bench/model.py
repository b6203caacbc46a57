"""bench/model.py: a whole BERT-base encoder layer (examples/bert_encoder.tex)
compiled by dcc against PyTorch on the CPU, eager and torch.compile(dynamic=True),
and numpy float32 with OpenBLAS, T by T in one run, same threads, same weights.

    make bench-model                 # installs the venv, builds, runs this
    .venv-model/bin/python bench/model.py [--build build] [--trials 32]
        [--step 1] [--reps 20] [--threads 2] [--no-compile]

dcc's side is build/bench/bench_model (bench/model.c): it tunes the program
once over T = 1..128 (--trials 0: the default schedule) and then times calls
on request (in C: its times hold no Python call overhead, the others' do), so
the four implementations are timed in turns at each T, each first in turn. Before
timing, the four outputs are checked against each other at several T.
Weights are drawn as PyTorch initialises nn.Linear (uniform in +-1/sqrt(in)),
X from a normal distribution; FP32 everywhere.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--program", default=os.path.join(ROOT, "examples", "bert_encoder.tex"))
    ap.add_argument("--trials", type=int, default=32, help="dcc tune trials (0: untuned)")
    ap.add_argument("--step", type=int, default=1, help="time T = 1, 1 + step, ..., and 128")
    ap.add_argument("--reps", type=int, default=20, choices=range(1, 65), metavar="1..64",
                    help="timed calls per T (median)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    return ap.parse_args()


ARGS = parse_args()
# thread counts before numpy and torch load their runtimes
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)
# torch.compile from cold: no kernels from an earlier run's on-disk cache
INDUCTOR_CACHE = tempfile.TemporaryDirectory(prefix="bench-model-inductor-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = INDUCTOR_CACHE.name

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from encoder import HD, HEADS, HID, NAMES, TMAX, encoder_torch, make_weights  # noqa: E402


def erf_np(x):
    """erf to 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none."""
    a = np.abs(x)
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * a)
    y = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    return np.copysign(np.float32(1.0) - y * np.exp(-a * a), x)


def layer_norm_np(a, g, b):
    mu = a.mean(axis=1, keepdims=True)
    d = a - mu
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + np.float32(1e-12)) * g + b


def encoder_numpy(x, p):
    t = x.shape[0]

    def heads(w, b):
        return (x @ w.T + b).reshape(t, HEADS, HD).transpose(1, 0, 2)

    q, k, v = heads(p["Wq"], p["bq"]), heads(p["Wk"], p["bk"]), heads(p["Wv"], p["bv"])
    s = (q @ k.transpose(0, 2, 1)) * np.float32(0.125)
    e = np.exp(s - s.max(axis=2, keepdims=True))
    c = (e / e.sum(axis=2, keepdims=True)) @ v
    a = c.transpose(1, 0, 2).reshape(t, HID) @ p["Wo"].T + p["bo"] + x
    h1 = layer_norm_np(a, p["g1"], p["be1"])
    z = h1 @ p["W1"].T + p["b1"]
    f = np.float32(0.5) * z * (np.float32(1.0) + erf_np(z * np.float32(0.70710678118654752)))
    g = f @ p["W2"].T + p["b2"] + h1
    return layer_norm_np(g, p["g2"], p["be2"])


class Dcc:
    """bench_model as a subprocess: one command line in, one line out."""

    def __init__(self, args, records):
        exe = os.path.join(args.build, "bench", "bench_model")
        if not os.path.exists(exe):
            sys.exit(f"bench/model.py: {exe} is missing: build it (make bench-model)")
        cmd = [exe, "--threads", str(args.threads)]
        if args.trials > 0:
            cmd += ["--trials", str(args.trials), "--records", records]
        self.p = subprocess.Popen(cmd + [args.program], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        ready = self.p.stdout.readline().split()
        if len(ready) != 4 or ready[0] != "ready":
            sys.exit("bench/model.py: bench_model failed (see above)")
        self.tune_s = float(ready[1])

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline().strip()
        if not answer or answer.startswith("error"):
            sys.exit(f"bench/model.py: bench_model: {line}: {answer or 'exited'}")
        return answer

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def median_ms(fn, reps):
    """The median of reps timed calls after a warm-up of one call and 20 ms."""
    until = time.perf_counter() + 0.02
    fn()
    while time.perf_counter() < until:
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return sorted(ts)[reps // 2]


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


def main():
    args = ARGS
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(1)
    w = make_weights(rng)
    xs = rng.standard_normal((TMAX, HID)).astype(np.float32)
    tw = {k: torch.from_numpy(v) for k, v in w.items()}
    compiled = None if args.no_compile else torch.compile(encoder_torch, dynamic=True)

    with tempfile.TemporaryDirectory() as tmp:
        for n in NAMES:
            np.save(os.path.join(tmp, n + ".npy"), w[n])
        print(f"tuning {os.path.relpath(args.program, ROOT)}"
              + (f" with {args.trials} trials" if args.trials else " (no: default schedule)"),
              file=sys.stderr, flush=True)
        dcc = Dcc(args, os.path.join(tmp, "records.jsonl"))

        def load(t):
            dcc.ask(f"dims T={t}")
            for n in NAMES:
                dcc.ask(f"load {n} {os.path.join(tmp, n + '.npy')}")
            np.save(os.path.join(tmp, "X.npy"), xs[:t])
            dcc.ask(f"load X {os.path.join(tmp, 'X.npy')}")

        # the four agree (layer-norm outputs are about 1 in size)
        compile_s = 0.0
        worst = {"dcc": 0.0, "numpy": 0.0, "compile": 0.0}
        with torch.inference_mode():
            for t in (1, 2, 37, 64, 128):
                load(t)
                dcc.ask(f"save Y {os.path.join(tmp, 'Y.npy')}")
                x = torch.from_numpy(xs[:t].copy())
                ref = encoder_torch(x, tw).numpy()
                got = {"dcc": np.load(os.path.join(tmp, "Y.npy")),
                       "numpy": encoder_numpy(xs[:t], w)}
                if compiled is not None:
                    t0 = time.perf_counter()
                    got["compile"] = compiled(x, tw).numpy()
                    compile_s += time.perf_counter() - t0
                for k, y in got.items():
                    d = float(np.max(np.abs(y - ref)))
                    worst[k] = max(worst[k], d)
                    if not d <= 1e-3:
                        sys.exit(f"bench/model.py: {k} differs from PyTorch eager at T = {t}: "
                                 f"max abs difference {d:.3g}")

            ts = sorted(set(list(range(1, TMAX + 1, args.step)) + [TMAX]))
            rows = []
            for t in ts:
                load(t)
                x = torch.from_numpy(xs[:t].copy())
                xn = xs[:t].copy()
                r = {"T": t}
                timers = [("dcc", lambda: float(dcc.ask(f"time {args.reps}"))),
                          ("eager", lambda: median_ms(lambda: encoder_torch(x, tw), args.reps)),
                          ("numpy", lambda: median_ms(lambda: encoder_numpy(xn, w), args.reps))]
                if compiled is not None:
                    timers.insert(2, ("compile",
                                      lambda: median_ms(lambda: compiled(x, tw), args.reps)))
                k = len(rows) % len(timers)  # each goes first in turn
                for name, timer in timers[k:] + timers[:k]:
                    time.sleep(0.1)  # OpenBLAS's and OpenMP's threads stop spinning
                    r[name] = timer()
                rows.append(r)
                print(f"  T = {t}: dcc {r['dcc']:.3f} ms, eager {r['eager']:.3f} ms",
                      file=sys.stderr, flush=True)
        dcc.close()

    cols = ["dcc", "eager"] + (["compile"] if compiled is not None else []) + ["numpy"]
    print(f"BERT-base encoder layer on the CPU ({os.path.relpath(args.program, ROOT)}), FP32, "
          f"{args.threads} threads each, {len(ts)} values of T in 1..{TMAX}")
    print("dcc: " + (f"tuned once for T = 1..{TMAX} with {args.trials} trials in {dcc.tune_s:.1f} s"
                     if args.trials else "the default schedule (untuned)"))
    print(f"PyTorch {torch.__version__} eager (scaled_dot_product_attention)"
          + (f"; torch.compile(dynamic=True), cold first calls {compile_s:.1f} s" if compiled else "")
          + f"; numpy {np.__version__}")
    print("outputs against PyTorch eager at T = 1, 2, 37, 64, 128, max abs difference: "
          + ", ".join(f"{k} {v:.2g}" for k, v in worst.items() if k in cols))
    head = "    T" + "".join(f"{c + ' ms':>12}" for c in cols) + "".join(
        f"{c + '/dcc':>13}" for c in cols[1:])
    print(head)
    for r in rows:
        print(f"{r['T']:5d}" + "".join(f"{r[c]:12.4f}" for c in cols)
              + "".join(f"{r[c] / r['dcc']:13.2f}" for c in cols[1:]))
    g = {c: geomean([r[c] for r in rows]) for c in cols}
    print("geometric-mean latency: " + ", ".join(f"{c} {g[c]:.4f} ms" for c in cols))
    for lo, hi in ((1, 16), (17, 64), (65, 128)):
        band = [r for r in rows if lo <= r["T"] <= hi]
        if band:
            print(f"  T = {lo}..{hi}: " + ", ".join(
                f"{c}/dcc {geomean([r[c] / r['dcc'] for r in band]):.2f}x" for c in cols[1:]))
    names = {"eager": "PyTorch eager", "compile": "torch.compile", "numpy": "numpy"}
    for c in cols[1:]:
        target = "  (target >= 1.0x)" if c == "eager" else ""
        print(f"speed against {names[c]} ({c} / dcc): {g[c] / g['dcc']:.2f}x{target}")
    if args.trials:
        print(f"tuning time: {dcc.tune_s:.1f} s (target <= 60 s)")


if __name__ == "__main__":
    main()
