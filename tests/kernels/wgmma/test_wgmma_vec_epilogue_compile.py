"""The wgmma GEMM with the vector epilogue compiled for sm_90a without a GPU (NVVM + nvJitLink in a
NUMBA_ENABLE_CUDASIM=0 process): the 16-byte C stores (st.global.v4) and staged-tile loads (ld.shared.v4)
are in the PTX, no local memory, no spills, no ptxas C7509 (wgmma serialized), registers that leave the
small-K tiles their resident blocks."""
import pytest

from ptx_stats import ptx_stats

_SCRIPT = r"""
import json, re, sys
from numba import cuda
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.runtime.kcache import link_ptx
from ncudnn.kernels.wgmma.config import WgmmaConfig
from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
bn, wgs, mi, st, fused = (int(x) for x in sys.argv[1].split(",")[:5])
out, epi = sys.argv[1].split(",")[5:7]
steps = (ep.bias("col"), ep.relu()) if fused else ()
kern = make_wgmma_gemm(WgmmaConfig(bn, wgs, mi, st, 8, 1, EPI=int(epi)), True, False, "bfloat16",
                       ep.EpilogueSpec(steps, out))
ot = {"bfloat16": "uint16", "float16": "float16", "float32": "float32"}[out]
sig = (f"void(uint16[:], uint16[:], {ot}[:], float32[:], float32[:], int32, int32, int32, "
       + ", ".join(["int64"] * 17) + ", float32, float32)")
ptx = cuda.compile_ptx(kern.kernel.py_func, sig, cc=(9, 0, "a"))[0]
_, log = link_ptx(ptx, "sm_90a")
regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
print("STATS " + json.dumps(dict(stg=ptx.count("st.global.v4") + ptx.count("st.global.cs.v4"),
      cs=ptx.count("st.global.cs.v4"), lds=ptx.count("ld.shared.v4"),
      local=ptx.count("ld.local") + ptx.count("st.local"), regs=regs,
      c7509=[l for l in log.splitlines() if "C7509" in l], log=log[-3000:])))
"""


def _stats(spec):
    return ptx_stats(_SCRIPT, spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec,max_regs", [("256,2,1,4,1,bfloat16,1", 255), ("128,2,1,3,0,bfloat16,2", 128),
                                           ("128,1,1,2,0,float32,1", 168), ("128,2,1,3,0,bfloat16,3", 128)])
def test_sk16_vector_epilogue_sm90a(spec, max_regs):
    st = _stats(spec)
    assert st["stg"] >= 1 and st["lds"] >= 1
    assert (st["cs"] >= 1) == spec.endswith(",2")     # EPI 2: the .cs (evict-first) stores
    assert st["local"] == 0
    assert "0 bytes spill stores, 0 bytes spill loads" in st["log"], st["log"]
    assert not st["c7509"], st["c7509"]
    assert st["regs"] and max(st["regs"]) <= max_regs, st["regs"]
