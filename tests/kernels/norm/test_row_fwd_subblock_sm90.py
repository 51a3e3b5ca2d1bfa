"""The sub-block row norm forward compiles for sm_90 without spills (slow: NVVM in a child process)."""
import pytest

from ncudnn.kernels.runtime.cubin import resource_usage_subprocess
from ncudnn.kernels.runtime.dtypes import array_sig as a

F = "float32"
# (n, tpr, rpb, vec, center, bias, stats, x, p, y, s, eps_dt, two_pass, preload, cs, csx[, rpt, xhint, yhint])
CASES = [(1024, 32, 4, 4, True, True, True, F, F, F, F, None, True, False, True, True),
         (1024, 64, 2, 4, True, True, True, F, F, F, F, None, False, True, False),
         (1024, 64, 2, 8, True, True, True, "bfloat16", F, "bfloat16", F, None, True, False, False),
         # KERNEL_CFG 16 (L2 evict-first x and y), layer and RMS norm
         (1024, 128, 1, 4, True, True, True, F, F, F, F, None, False, True, False, False, 1, "evict_first", "evict_first"),
         (1024, 128, 1, 4, False, False, True, F, F, F, F, None, False, True, False, False, 1, "evict_first",
          "evict_first"),
         # the 512-1024-column defaults below the pipelined kernel's rows (KERNEL_CFG 13: x evict-first, y plain)
         (1024, 128, 1, 4, True, True, True, F, F, F, F, None, False, True, False, False, 1, "evict_first", None),
         (512, 128, 1, 4, False, False, True, F, F, F, F, None, False, True, False, False, 1, "evict_first", None)]


@pytest.mark.slow
@pytest.mark.parametrize("args", CASES, ids=lambda c: f"{c[0]}-t{c[1]}-r{c[2]}-{c[7]}{'-l2' if len(c) > 16 else ''}{'' if c[4] else '-rms'}")
def test_nrh_sub_compiles_sm90(args):
    dt = args[7]
    sig = f"void({a(dt)}, {a(F)}, {a(F)}, {a(dt)}, {a(F)}, {a(F)}, float64, int64)"
    r = resource_usage_subprocess("ncudnn.kernels.norm.row_fwd_sub:sub_dispatcher", sig, args)
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
    assert r["registers"] <= 96, r      # at most 96: >= 5 blocks of 128 threads an SM
