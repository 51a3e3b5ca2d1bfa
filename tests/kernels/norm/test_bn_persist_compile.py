"""The one-kernel batch-norm backward (ncudnn.kernels.norm.bn_persist) compiles for sm_90 with no spills within
65536 / THREADS registers and no local memory (one co-resident block an SM, the inline grid barrier; slow: NVVM)."""
import pytest

from case_check import assert_cases_compile, cases_of
from ncudnn.kernels.norm import bn_persist as norm_bn_persist  # noqa: F401 (registers its cases)

_MODULE = "ncudnn.kernels.norm.bn_persist"


def _ours():
    return cases_of(_MODULE)


def test_bnp_registers_cases():
    names = _ours()
    # the engine's kernels: the inline barrier (full grids only)
    assert len(names) == len(norm_bn_persist.COMPILE_CASES) and any("_pf" in n and "_pf0" not in n for n in names)
    assert all(n.endswith("_gbar") for n in names)


@pytest.mark.slow
def test_bnp_kernels_compile_for_sm90():
    assert_cases_compile(_ours())
