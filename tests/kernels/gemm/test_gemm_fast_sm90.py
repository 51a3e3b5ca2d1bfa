"""The fast FP32 mainloop compiled for sm_90 (NVVM + nvJitLink, no GPU): 16-byte global and shared
accesses, every k-step unrolled, accumulators in registers, no spills (slow: NVVM takes ~20-60 s)."""
import json
import os
import subprocess
import sys

import pytest

from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.gemm import cases

_STATS = r"""
import json, sys
import ncudnn
from numba import cuda
from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.gemm import cases
case = compile_check.registered_cases()[sys.argv[1]]
ptx = cuda.compile_ptx(case.func.py_func, case.signature, cc=(9, 0))[0]
res = compile_check.compile_case(case)
print("STATS " + json.dumps(dict({k: ptx.count(k) for k in ("fma.rn.f32", "ld.shared.v4.f32", "ld.shared.f32",
      "ld.global.v4.f32", "st.shared.v4.f32", "ld.local", "st.local")}, ok=res.ok, regs=res.registers,
      spills=res.spill_stores, problems=res.problems)))
"""


def test_fast_cases_registered():
    names = compile_check.registered_cases()
    fast = cases.FAST
    assert fast.MAINLOOP == "fast"
    for n in (cases.case_name(fast), "gemm_fast_128x128_km_nk", "gemm_fast_128x128_bias_relu_residual",
              "gemm_fast_128x128_splitk4"):
        assert n in names, n


@pytest.mark.slow
def test_fast_gemm_ptx_vectorised_unrolled_spill_free():
    cfg = cases.FAST
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", _STATS, cases.case_name(cfg)], env=env, capture_output=True,
                         text=True, timeout=1500)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("STATS ")]
    assert line, out.stderr[-2000:]
    st = json.loads(line[0][6:])
    per_step = cfg.THREAD_M * cfg.THREAD_N
    assert st["fma.rn.f32"] >= per_step * cfg.BLOCK_K                       # every k-step written out
    assert st["ld.shared.v4.f32"] >= (cfg.THREAD_M + cfg.THREAD_N) // 4 * cfg.BLOCK_K
    assert st["ld.shared.f32"] == 0                                        # fragments only as 16-byte loads
    assert st["ld.global.v4.f32"] >= 2 and st["st.shared.v4.f32"] >= 1     # 16-byte quads global -> shared
    assert st["ld.local"] == 0 and st["st.local"] == 0
    assert st["ok"] and st["spills"] == 0, st["problems"]
