"""The wgmma attention forward compiled for sm_90a without a GPU (NVVM + nvJitLink in a NUMBA_ENABLE_CUDASIM=0
process): wgmma.mma_async with A from shared memory (S = Q K^T) and from registers (O += P V) in the PTX, no
local memory, no spills, and no ptxas C7509 note (wgmma serialized: a called subroutine such as 64-bit
division): one warpgroup at head dim 64 with a causal band, and the default tiles at head dim 128."""
from ptx_stats import ptx_stats

_SCRIPT = r"""
import json, sys
from numba import cuda
from ncudnn.kernels.attention.cases import _sig
from ncudnn.kernels.attention.spec import AttnSpec
from ncudnn.kernels.attention.wg_fwd import WgAttnConfig, wg_fwd_kernel
from ncudnn.kernels.runtime.dtypes import array_sig
from ncudnn.kernels.runtime.kcache import link_ptx
d, wg, bn, causal = (int(x) for x in sys.argv[1].split(","))
spec = AttnSpec(d, d, "bfloat16", "bfloat16", "bfloat16", "bfloat16", HAS_RIGHT=bool(causal))
kern = wg_fwd_kernel(spec, WgAttnConfig(wg, bn))
bf, f32, i32 = array_sig("bfloat16"), array_sig("float32"), array_sig("int32")
from ncudnn.kernels.runtime.compile_check import _target_device
with _target_device((9, 0)):     # the forceinline device functions ask the current device without a GPU
    ptx = cuda.compile_ptx(kern.py_func, _sig([bf, bf, bf, bf, f32, f32, i32, i32, f32], 28), cc=(9, 0, "a"))[0]
maxreg = kern.targetoptions.get("max_registers")
_, log = link_ptx(ptx, "sm_90a", max_registers=maxreg)
print("STATS " + json.dumps(dict(maxreg=maxreg, target=[l for l in ptx.splitlines() if l.startswith(".target")],
      wgmma=ptx.count("wgmma.mma_async"), rs=ptx.count("}, {%r"), local=ptx.count("ld.local") + ptx.count("st.local"),
      c7509=[l for l in log.splitlines() if "C7509" in l], log=log[-3000:])))
"""


def _check(spec, want_wgmma):
    st = ptx_stats(_SCRIPT, spec)
    assert st["target"] == [".target sm_90a"]
    assert st["wgmma"] == want_wgmma, st["wgmma"]
    assert st["local"] == 0
    assert "0 bytes spill stores, 0 bytes spill loads" in st["log"], st["log"]
    assert not st["c7509"], st["c7509"]


def test_one_warpgroup_d64_sm90a_no_spills_no_serialization():
    # S: 4 k16 steps; P V: 4 k16 steps, in the loop and once after it
    _check("64,1,64,1", 4 + 4 + 4 + 4)


def test_default_d128_sm90a_no_spills_no_serialization():
    # S: 8 k16 steps (in the prologue and the loop); P V: 8 (in the loop and after it)
    _check("128,2,128,0", 8 + 8 + 8 + 8)



def test_three_warpgroups_keep_to_168_registers():
    """384 threads a block: the kernel is built with max_registers 168 (65536 / 384, else it could not launch), and
    fits them without spills."""
    st = ptx_stats(_SCRIPT, "64,3,64,0")
    assert st["maxreg"] == 168, st["maxreg"]
    assert "0 bytes spill stores, 0 bytes spill loads" in st["log"], st["log"]
    assert not st["c7509"], st["c7509"]
