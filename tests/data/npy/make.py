# Regenerates the .npy fixtures in this folder; see README.
import os, numpy as np
from numpy.lib import format as npf

here = os.path.dirname(os.path.abspath(__file__))
def path(name): return os.path.join(here, name)

def save(name, a, version=None):
    with open(path(name), "wb") as f:
        npf.write_array(f, a, version=version, allow_pickle=False)

def raw(name):
    with open(path(name), "rb") as f: return f.read()

def put(name, data):
    with open(path(name), "wb") as f: f.write(data)

m23 = (np.arange(6, dtype="<f4") * 0.5 - 1.0).reshape(2, 3)  # -1.0 .. 1.5
save("f32_v1_2x3.npy", m23)
save("f32_v2_5.npy", np.array([1.0, -2.0, 0.125, 3e38, -0.0], dtype="<f4"), (2, 0))
save("f32_v3_2x3.npy", m23, (3, 0))
save("f32_0d.npy", np.array(3.5, dtype="<f4"))
save("f32_3d.npy", np.arange(24, dtype="<f4").reshape(2, 3, 4) - 12.0)
save("f32_0x3.npy", np.zeros((0, 3), dtype="<f4"))

save("bad_f64.npy", m23.astype("<f8"))
save("bad_bigendian.npy", m23.astype(">f4"))
save("i32_6.npy", np.arange(6, dtype="<i4") - 2)
save("i64_2x2.npy", np.array([[-1, 2**40], [0, -2**63]], dtype="<i8"))
save("bool_5.npy", np.array([True, False, False, True, True]))
save("bad_uint8.npy", np.arange(6, dtype="u1"))
save("bad_fortran.npy", np.asfortranarray(m23))
good = raw("f32_v1_2x3.npy")
put("bad_truncated.npy", good[:-8])
put("bad_trailing.npy", good + b"\0\0\0\0")
put("bad_magic.npy", b"\x93NUMPZ" + good[6:])
put("bad_version.npy", good[:6] + b"\x04\x00" + good[8:])
hlen = good[8] | good[9] << 8
put("bad_unterminated.npy", good[:10 + hlen - 1] + b" " + good[10 + hlen:])
put("bad_short_header.npy", good[:40])
