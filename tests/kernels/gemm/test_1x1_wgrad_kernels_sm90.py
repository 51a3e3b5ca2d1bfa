"""The 1x1-wgrad GEMM kernels (smaller fast-mainloop blocks, sum_batch, the wide split-K reduce) compiled
for sm_90 (NVVM + nvJitLink, no GPU): within budget, no spills, no local memory (slow: ~20-60 s each)."""
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
out = {}
for name in sys.argv[1:]:
    case = compile_check.registered_cases()[name]
    ptx = cuda.compile_ptx(case.func.py_func, case.signature, cc=(9, 0))[0]
    res = compile_check.compile_case(case)
    out[name] = dict({k: ptx.count(k) for k in ("fma.rn.f32", "ld.global.v4.f32", "st.shared.v4.f32", "ld.local",
                     "st.local")}, ok=res.ok, regs=res.registers, spills=res.spill_stores, problems=res.problems)
print("STATS " + json.dumps(out))
"""

NAMES = [c[0] for c in cases.WGRAD_CASES]
CAP = {c[0]: c[1].MAX_REGS for c in cases.WGRAD_CASES}


def test_w1k_cases_registered():
    names = compile_check.registered_cases()
    for n in NAMES:
        assert n in names, n
    assert "gemm_fast_64x64_mk_nk_sumbatch_reduce_wide" in names
    assert "gemm_fast_128x128_km_kn_splitk_reduce_wide" in names
    assert "pixels_last_f32" in names


@pytest.mark.slow
def test_w1k_wgrad_kernels_spill_free_on_sm90():
    todo = NAMES + ["gemm_fast_64x64_mk_nk_sumbatch_reduce_wide", "pixels_last_f32"]
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", _STATS, *todo], env=env, capture_output=True, text=True, timeout=3000)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("STATS ")]
    assert line, out.stderr[-2000:]
    stats = json.loads(line[0][6:])
    for name, st in stats.items():
        assert st["ok"] and st["spills"] == 0 and st["ld.local"] == 0 and st["st.local"] == 0, (name, st)
        if not name.endswith("_reduce_wide") and name != "pixels_last_f32":
            assert st["fma.rn.f32"] >= 32 * 8, (name, st)            # every k-step written out
            assert st["ld.global.v4.f32"] >= 2, (name, st)           # 16-byte global quads
            assert st["regs"] <= CAP[name], (name, st)
    assert stats["gemm_fast_64x64_t8x8_km_kn"]["st.shared.v4.f32"] >= 1  # outer-fast quads: one 16-byte store
