"""The register-tiled pooling kernels the resample engine picks by default (ncudnn.kernels.resample.tile,
issue 4's shape) compile for sm_90 with no spills and at most 128 registers (slow: NVVM)."""
import pytest

from ncudnn.kernels.runtime import compile_check

from case_check import assert_cases_compile, cases_of
from ncudnn.kernels.resample import tile as resample_tile



def _ours():
    return cases_of(resample_tile.__name__)


def test_tile_kernels_register_cases():
    names = _ours()
    assert "rstile_max3x3s2_nchw_bwd2x8" in names and "rstile_max3x3s2_nchw_fwd1x4" in names
    assert "rstile_max3x3s2_nhwc_bwd2x2" in names and len(names) == 13


@pytest.mark.slow
def test_tile_kernels_compile_for_sm90():
    assert_cases_compile(_ours())


def test_tile_nchw_avg_backward_compiles_for_sm90():
    """One default tile (NCHW average backward 2x8, the quickest to compile) on every CI run."""
    (r,) = compile_check.run_compile_check(["rstile_avg3x3s2_nchw_bwd2x8"], timeout=600, jobs=1)
    assert r.ok, r.summary()
    assert r.registers <= 64 and not r.spill_stores and not r.spill_loads, r.summary()
