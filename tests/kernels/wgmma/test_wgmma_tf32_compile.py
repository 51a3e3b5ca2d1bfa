"""The TF32 wgmma GEMM compiled for sm_90a without a GPU (NVVM + nvJitLink in a NUMBA_ENABLE_CUDASIM=0
process): ``wgmma.mma_async ... m64nNk8.f32.tf32.tf32`` in the PTX (4 per m64 slice of a k tile), no
local memory, no spills, no ptxas C7509 note (wgmma serialized)."""
import pytest

from ptx_stats import ptx_stats

_SCRIPT = r"""
import json, sys
from numba import cuda
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.runtime.kcache import link_ptx
from ncudnn.kernels.wgmma.config import WgmmaConfig
from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
cfg = WgmmaConfig(*(int(x) for x in sys.argv[1].split(",")))
bn = cfg.BLOCK_N
kern = make_wgmma_gemm(cfg, True, True, "float32",
                       ep.EpilogueSpec((ep.bias("col"), ep.relu()), "float32"))
sig = ("void(uint16[:], uint16[:], float32[:], float32[:], float32[:], int32, int32, int32, "
       + ", ".join(["int64"] * 17) + ", float32, float32)")
ptx = cuda.compile_ptx(kern.kernel.py_func, sig, cc=(9, 0, "a"))[0]
_, log = link_ptx(ptx, "sm_90a")
print("STATS " + json.dumps(dict(target=[l for l in ptx.splitlines() if l.startswith(".target")],
      tf32=ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k8.f32.tf32.tf32"), wgmma=ptx.count("wgmma.mma_async"),
      local=ptx.count("ld.local") + ptx.count("st.local"),
      c7509=[l for l in log.splitlines() if "C7509" in l], log=log[-3000:])))
"""


def _stats(spec):
    return ptx_stats(_SCRIPT, spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["256,2,1,3,8,1", "128,2,2,4,8,1"])
def test_wgmma_tf32_sm90a_no_spills_no_serialization(spec):
    st = _stats(spec)
    mi = int(spec.split(",")[2])
    assert st["target"] == [".target sm_90a"]
    assert st["tf32"] == st["wgmma"] >= 4 * mi     # the four k8 steps of a k tile per m64 slice, all tf32
    assert st["local"] == 0
    assert "0 bytes spill stores, 0 bytes spill loads" in st["log"], st["log"]
    assert not st["c7509"], st["c7509"]
