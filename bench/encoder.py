"""bench/encoder.py: the BERT-base encoder layer of examples/bert_encoder.tex
in PyTorch, and its weights: what bench/model.py (CPU) and
bench/gpu/encoder_torch.py (GPU) time dcc against.
"""
import math

import numpy as np
import torch.nn.functional as F

HID, HEADS, HD, FFN, TMAX = 768, 12, 64, 3072, 128
NAMES = ["Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo", "g1", "be1",
         "W1", "b1", "W2", "b2", "g2", "be2"]


def make_weights(rng):
    w = {}
    for n, (o, i) in {"q": (HID, HID), "k": (HID, HID), "v": (HID, HID), "o": (HID, HID),
                      "1": (FFN, HID), "2": (HID, FFN)}.items():
        bound = 1.0 / math.sqrt(i)
        w["W" + n] = rng.uniform(-bound, bound, (o, i)).astype(np.float32)
        w["b" + n] = rng.uniform(-bound, bound, (o,)).astype(np.float32)
    for n in ("1", "2"):
        w["g" + n] = (1.0 + 0.1 * rng.standard_normal(HID)).astype(np.float32)
        w["be" + n] = (0.1 * rng.standard_normal(HID)).astype(np.float32)
    return w


def encoder_torch(x, p):
    t = x.shape[0]

    def heads(w, b):
        return F.linear(x, w, b).view(t, HEADS, HD).transpose(0, 1)

    q, k, v = heads(p["Wq"], p["bq"]), heads(p["Wk"], p["bk"]), heads(p["Wv"], p["bv"])
    c = F.scaled_dot_product_attention(q, k, v)  # softmax(q k^T / 8) v
    a = F.linear(c.transpose(0, 1).reshape(t, HID), p["Wo"], p["bo"]) + x
    h1 = F.layer_norm(a, (HID,), p["g1"], p["be1"], eps=1e-12)
    f = F.gelu(F.linear(h1, p["W1"], p["b1"]))
    g = F.linear(f, p["W2"], p["b2"]) + h1
    return F.layer_norm(g, (HID,), p["g2"], p["be2"], eps=1e-12)
