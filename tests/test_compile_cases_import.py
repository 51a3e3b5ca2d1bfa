"""Importing a kernel module builds no kernel and registers no compile case (issue #22): the cases live in each
family's ``ncudnn/kernels/<family>/cases.py``, which only the compile check imports."""
import json
import os
import subprocess
import sys

from ncudnn.kernels.runtime import compile_check

#: a fresh interpreter: every module under ncudnn/kernels/ but the cases modules imported, with numba's cuda.jit
#: watched for kernels a factory builds (a closure's function or generated source: not a module-level @cuda.jit)
_PROBE = r"""
import importlib, json, os, pathlib, pkgutil, sys
from numba import cuda
real, built = cuda.jit, []

def note(f):
    code = getattr(f, "__code__", None)
    if code is not None and ("<locals>" in f.__qualname__ or not os.path.isfile(code.co_filename)):
        built.append(f"{f.__module__}.{f.__qualname__} ({code.co_filename})")

def jit(*args, **kw):
    if args and callable(args[0]):
        note(args[0])
        return real(*args, **kw)
    dec = real(*args, **kw)
    def wrap(f):
        note(f)
        return dec(f)
    return wrap

cuda.jit = jit
import ncudnn.kernels
from ncudnn.kernels.runtime import compile_check
pkg = pathlib.Path(ncudnn.kernels.__file__).parent
names = [i.name for i in pkgutil.walk_packages([str(pkg)], prefix="ncudnn.kernels.")
         if not i.name.rsplit(".", 1)[-1].endswith("cases") and not i.name.endswith(".__main__")]
for name in names:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.startswith("ncudnn.kernels.") and m.endswith("cases"))
print(json.dumps({"modules": len(names), "cases": sorted(compile_check._CASES), "built": built, "loaded": loaded}))
"""


def _probe():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_kernel_modules_registers_and_builds_nothing():
    r = _probe()
    assert r["modules"] > 50
    assert r["cases"] == [], "registered at import: " + ", ".join(r["cases"][:20])
    assert r["built"] == [], "built at import:\n" + "\n".join(r["built"][:20])
    assert r["loaded"] == [], f"a kernel module imported a cases module: {r['loaded']}"


def test_every_family_cases_module_registers():
    names = compile_check.family_cases_modules()
    for family in ("norm", "pointwise", "reduce", "softmax", "resample", "datamove", "rng", "gemm"):
        assert f"ncudnn.kernels.{family}.cases" in names
    cases = compile_check.registered_cases()   # loads every family's cases
    assert {m for m in names if m in sys.modules} == set(names)
    families = {c.module.split(".")[2] for c in cases.values() if c.module.startswith("ncudnn.kernels.")}
    assert {"norm", "pointwise", "reduce", "softmax", "resample", "datamove", "rng"} <= families


def test_a_kernel_module_names_its_family_cases():
    assert compile_check.family_cases_of("ncudnn.kernels.norm.bn_cols") == "ncudnn.kernels.norm.cases"
    assert compile_check.family_cases_of("ncudnn.kernels.softmax.axis") == "ncudnn.kernels.softmax.cases"
    assert compile_check.family_cases_of("ncudnn.kernels.primitives.warp") is None   # no cases of its own
    assert compile_check.family_cases_of("tests.kernels.toy") is None
