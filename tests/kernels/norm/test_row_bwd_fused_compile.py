"""The fused layer / RMS norm backward kernels (ncudnn.kernels.norm.row_bwd) and the norm_row forward's
registered cases compile for sm_90 with no spills, within their register budgets (slow: NVVM)."""
import pytest

from case_check import assert_cases_compile, cases_of
from ncudnn.kernels.norm import row_bwd as norm_row_bwd  # noqa: F401 (registers its cases)

_MODULE = "ncudnn.kernels.norm.row_bwd"


def _ours():
    return cases_of(_MODULE)


def test_fused_bwd_registers_cases():
    names = _ours()
    assert any("_s2" in n for n in names) and any("bfloat16" in n for n in names) and len(names) == 14


@pytest.mark.slow
def test_fused_bwd_kernels_compile_for_sm90():
    assert_cases_compile(_ours())
