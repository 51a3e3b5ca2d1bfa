"""The pipelined row norm forward (ncudnn.kernels.norm.row_fwd_pipe) compiles for sm_90 with no spills within
65536 / (threads x blocks an SM) registers (slow: NVVM in a child process)."""
import pytest

from case_check import assert_cases_compile, cases_of
from ncudnn.kernels.norm import row_fwd_pipe as norm_row_fwd_pipe  # noqa: F401 (registers its cases)

_MODULE = "ncudnn.kernels.norm.row_fwd_pipe"


def _ours():
    return cases_of(_MODULE)


def test_nrp_registers_cases():
    assert len(_ours()) == len(norm_row_fwd_pipe.COMPILE_CASES)


@pytest.mark.slow
def test_nrp_kernels_compile_for_sm90():
    assert_cases_compile(_ours())
