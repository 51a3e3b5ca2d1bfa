"""The strided layer / RMS norm row kernels (ncudnn.kernels.norm.row_strided: forward, backward dx, the dscale /
dbias partials and their combine) register compile cases and compile for sm_90 with no spills within their
register budgets (slow: NVVM in child processes)."""
import pytest

from case_check import assert_cases_compile, cases_of
from ncudnn.kernels.norm import cases as norm_cases, row_strided  # noqa: F401 (registers the cases)

_MODULE = "ncudnn.kernels.norm.row_strided"


def test_row_strided_registers_cases():
    names = cases_of(_MODULE)
    ada = [n for n in names if "_ada_" in n]     # adaptive layer norm: fwd, bwd, dparams, combine per shape
    assert len(names) - len(ada) == 7 * len(norm_cases.STRIDED_CASES)
    assert len(ada) == 4 * len(norm_cases.ADA_CASES)
    assert {n.rsplit("_", 1)[-1] for n in names if "combine" not in n} == {"fwd", "bwd", "dparams"}


@pytest.mark.slow
def test_row_strided_kernels_compile_for_sm90():
    assert_cases_compile(cases_of(_MODULE))
