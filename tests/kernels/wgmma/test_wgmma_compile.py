"""The wgmma GEMM compiled for sm_90a without a GPU (NVVM + nvJitLink in a NUMBA_ENABLE_CUDASIM=0 process):
wgmma.mma_async in the PTX, no local memory, no spills, and no ptxas C7509 note (wgmma serialized: a called
subroutine such as 64-bit division, or accumulator registers written between wgmma and its wait)."""
import pytest

from ptx_stats import ptx_stats

_SCRIPT = r"""
import json, sys
from numba import cuda
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.runtime.kcache import link_ptx
from ncudnn.kernels.wgmma.config import WgmmaConfig
from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
bn, wgs, mi, st, ak, bk = (int(x) for x in sys.argv[1].split(","))
kern = make_wgmma_gemm(WgmmaConfig(bn, wgs, mi, st), bool(ak), bool(bk), "bfloat16",
                       ep.EpilogueSpec((ep.bias("col"), ep.relu()), "bfloat16"))
sig = ("void(uint16[:], uint16[:], uint16[:], float32[:], float32[:], int32, int32, int32, "
       + ", ".join(["int64"] * 17) + ", float32, float32)")
ptx = cuda.compile_ptx(kern.kernel.py_func, sig, cc=(9, 0, "a"))[0]
_, log = link_ptx(ptx, "sm_90a")
print("STATS " + json.dumps(dict(target=[l for l in ptx.splitlines() if l.startswith(".target")],
      wgmma=ptx.count("wgmma.mma_async"), local=ptx.count("ld.local") + ptx.count("st.local"),
      c7509=[l for l in log.splitlines() if "C7509" in l], log=log[-3000:])))
"""


def _stats(spec):
    return ptx_stats(_SCRIPT, spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["256,2,1,4,1,1", "128,2,1,5,1,0"])
def test_wgmma_gemm_sm90a_no_spills_no_serialization(spec):
    st = _stats(spec)
    assert st["target"] == [".target sm_90a"]
    assert st["wgmma"] >= 4                      # the four k16 steps of a k tile, each a wgmma
    assert st["local"] == 0
    assert "0 bytes spill stores, 0 bytes spill loads" in st["log"], st["log"]
    assert not st["c7509"], st["c7509"]
