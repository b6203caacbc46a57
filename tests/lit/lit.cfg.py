# lit configuration: FileCheck tests of dcc's dumps (loop IR, LLVM IR).
# Each test is a .tex program whose comments hold RUN and CHECK lines.
import os
import lit.formats

config.name = "dietcode"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".tex"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(lit_config.params.get("build", "."), "lit")
config.substitutions.append(("%dcc", lit_config.params["dcc"]))
config.substitutions.append(("%FileCheck", lit_config.params["filecheck"]))

# glibc's libmvec with erff and tanhf (glibc 2.35): dcc's CPU vector math
# calls it; without it, lanes call libm and llvm-mvec.tex does not apply.
import ctypes
try:
    _mvec = ctypes.CDLL("libmvec.so.1")
    if hasattr(_mvec, "_ZGVbN4v_erff") and hasattr(_mvec, "_ZGVbN4v_tanhf"):
        config.available_features.add("libmvec")
except OSError:
    pass
