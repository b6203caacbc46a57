# Writes a 1-d float32 .npy file (format 1.0, little-endian) without numpy:
#   python3 npy.py OUT.npy VALUE ...
import struct
import sys

values = [float(v) for v in sys.argv[2:]]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<%df" % len(values), *values))
