"""The GEMM / implicit-GEMM conv kernels compile for sm_90 (NVVM + ptxas via nvJitLink, no GPU):
no spills, no local memory beyond the documented accumulator staging, unrolled inner products,
16-byte shared loads for VEC=4. Compiling a 128x128 kernel takes NVVM ~20-60 s (slow marker)."""
import json
import os
import subprocess
import sys

import pytest

from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.conv import cases as conv_cases  # noqa: F401  (registers)
from ncudnn.kernels.gemm import CONFIGS
from ncudnn.kernels.gemm import cases as gemm_cases  # noqa: F401  (registers)

_MODULES = ("ncudnn.kernels.gemm.cases", "ncudnn.kernels.conv.cases")

_PTX_STATS = r"""
import json, os, sys
import ncudnn
from numba import cuda
from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.gemm import cases
case = compile_check.registered_cases()[sys.argv[1]]
ptx = cuda.compile_ptx(case.func.py_func, case.signature, cc=(9, 0))[0]
print("STATS " + json.dumps({k: ptx.count(k) for k in
      ("fma.rn.f32", "ld.shared.v4.f32", "ld.shared.f32", "ld.local", "st.local")}))
"""


def _ours():
    return [n for n, c in compile_check.registered_cases().items() if c.module in _MODULES]


def test_cases_registered():
    names = _ours()
    assert any(n.startswith("gemm_f32_128x128") for n in names)
    for kind in ("conv_fprop", "conv_dgrad", "conv_wgrad"):
        assert any(n.startswith(kind) for n in names), kind
    assert len([n for n in names if n.startswith("gemm_f32_") and n.endswith(("_v1", "_v4"))]) == len(CONFIGS)


@pytest.mark.slow
def test_big_gemm_ptx_is_unrolled_vectorised_and_local_free():
    cfg = CONFIGS[0]
    name = f"gemm_f32_{cfg.BLOCK_M}x{cfg.BLOCK_N}x{cfg.BLOCK_K}_t{cfg.THREAD_M}x{cfg.THREAD_N}_v{cfg.VEC}"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", _PTX_STATS, name], env=env, capture_output=True,
                         text=True, timeout=900)
    line = [l for l in out.stdout.splitlines() if l.startswith("STATS ")]
    assert line, out.stderr[-2000:]
    stats = json.loads(line[0][6:])
    per_step = cfg.THREAD_M * cfg.THREAD_N
    assert stats["fma.rn.f32"] >= per_step * cfg.UNROLL_K          # literal i/j loops unrolled
    assert stats["fma.rn.f32"] % per_step == 0
    assert stats["ld.shared.v4.f32"] >= (cfg.THREAD_M + cfg.THREAD_N) // 4 * cfg.UNROLL_K
    assert stats["ld.local"] == 0 and stats["st.local"] == 0       # accumulators in registers


@pytest.mark.slow
def test_registered_kernels_compile_for_sm90():
    results = compile_check.run_compile_check(_ours(), timeout=3000)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert len(results) == len(_ours())
