"""bench/gpu/encoder_torch.py: PyTorch's time for the BERT-base encoder layer
(bench/encoder.py, the layer of examples/bert_encoder.tex) on the GPU, FP32
with TF32 off, for scripts/gpu-check.sh to set beside dcc's:

    python3 bench/gpu/encoder_torch.py [--reps 50] [--compile] T [T ...]

prints one line per T, "T <t> eager <ms>" (and "compile <ms>" with
--compile: torch.compile(dynamic=True), its cold compile not timed): the
median of reps calls, each timed with CUDA events, after a warm-up. Exits
1 with one line when PyTorch or a CUDA device is missing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("T", type=int, nargs="+")
    args = ap.parse_args()
    try:
        import numpy as np
        import torch
    except ImportError as e:
        sys.exit(f"encoder_torch: no PyTorch here ({e})")
    if not torch.cuda.is_available():
        sys.exit("encoder_torch: PyTorch finds no CUDA device")
    from encoder import HID, encoder_torch, make_weights

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rng = np.random.default_rng(0)
    p = {n: torch.from_numpy(v).cuda() for n, v in make_weights(rng).items()}
    sides = [("eager", encoder_torch)]
    if args.compile:
        sides.append(("compile", torch.compile(encoder_torch, dynamic=True)))
    for t in args.T:
        x = torch.from_numpy(rng.standard_normal((t, HID)).astype(np.float32)).cuda()
        line = f"T {t}"
        with torch.no_grad():
            for name, fn in sides:
                for _ in range(5):
                    fn(x, p)
                ms = []
                for _ in range(args.reps):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    fn(x, p)
                    b.record()
                    b.synchronize()
                    ms.append(a.elapsed_time(b))
                line += f" {name} {sorted(ms)[len(ms) // 2]:.4f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
