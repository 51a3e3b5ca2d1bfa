"""MN-major (transposed) operand loads of the wgmma GEMM: the affine slot addressing (MNLD 1: per-slot k-row
and panel steps fixed at compile time) and the per-slot index math (MNLD 0) against the float64 oracle, with
two warpgroups (256 threads: slots alternate k rows 0-31 / 32-63, a new 64-wide panel every second slot) and
with one (128 threads: four slots per panel), edges in M / N and a K tail."""
import pytest

from ncudnn.kernels.wgmma.config import WgmmaConfig
from ncudnn.kernels.wgmma.kernel import _mn_affine
from ncudnn.testing import SIM, assert_close, size
from test_wgmma_gemm import _run


@pytest.mark.parametrize("mnld", [1, 0])
def test_wgmma_mn_major_loads_two_warpgroups(rng, mnld):
    M, N, K = size((104, 72, 72), (1000, 1032, 1096))
    cfg = WgmmaConfig(128, 2, 1, 3, 8, 0, 0, mnld) if SIM else WgmmaConfig(256, 2, 1, 4, 8, 0, 0, mnld)
    assert _mn_affine(cfg) == bool(mnld)
    got, want = _run(rng, cfg, M, N, K, False, False, "float16", "float32")
    assert_close(got, want, 1e-5, "C")


def test_wgmma_mn_major_b_one_warpgroup_early(rng):
    M, N, K = size((24, 120, 136), (520, 1000, 1032))
    cfg = WgmmaConfig(128, 1, 1, 3, 8, 1) if SIM else WgmmaConfig(128, 1, 1, 6, 8, 1)
    got, want = _run(rng, cfg, M, N, K, True, False)
    assert_close(got, want, 1e-5, "C")
