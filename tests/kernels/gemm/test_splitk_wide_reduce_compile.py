"""The wide split-K reduce compiled for sm_90 (NVVM + nvJitLink, no GPU): no spills, no local memory,
16-byte global loads present, registers within budget (fp32 with a bias / residual / relu epilogue,
fp64)."""
import json
import os
import subprocess
import sys

import pytest

_STATS = r"""
import json, sys
import ncudnn
from numba import cuda
from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.gemm import splitk
from ncudnn.kernels.gemm.operands import strided_output
OUT = strided_output()
def sig(t):
    o = f"Tuple(({t}[::1], int64, int64, int64, int64, int64))"
    return f"void({t}[::1], int64, {o}, Tuple(({t}[::1], int64, int64)), {o}, int64, int64, int64, {t}, {t})"
f32 = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))
f64 = ep.EpilogueSpec((ep.bias("col"),), out_dtype="float64", ftype="float64")
todo = {"f32": (splitk.make_reduce_wide(OUT, ep.build(f32)), sig("float32")),
        "f64": (splitk.make_reduce_wide(OUT, ep.build(f64, "float64", "float64"), "float64"), sig("float64"))}
out = {}
for name in sys.argv[1:]:
    k, s = todo[name]
    res = compile_check.compile_case(compile_check.CompileCase(name, k, s, max_registers=128))
    ptx = [v for key, v in compile_check._PTX_CACHE.items() if key[0] is k.py_func][0]
    out[name] = dict({x: ptx.count(x) for x in ("ld.global.v4.f32", "ld.local", "st.local")}, ok=res.ok,
                     regs=res.registers, spills=res.spill_stores, problems=res.problems)
print("STATS " + json.dumps(out))
"""


@pytest.mark.parametrize("case", ["f32", "f64"])
def test_skw_wide_reduce_compiles_for_sm90(case):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", _STATS, case], env=env, capture_output=True, text=True, timeout=600)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("STATS ")]
    assert line, out.stderr[-2000:]
    stats = json.loads(line[0][6:])
    assert set(stats) == {case}
    for name, st in stats.items():
        assert st["ok"] and st["spills"] == 0 and st["ld.local"] == 0 and st["st.local"] == 0, (name, st)
        assert st["regs"] <= 128, (name, st)
        if name.startswith("f32"):
            assert st["ld.global.v4.f32"] >= 13, (name, st)      # 8 + 4 + 1 sequential, 4 + 1 a group
