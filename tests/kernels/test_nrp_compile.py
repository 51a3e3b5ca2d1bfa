"""The pipelined row norm forward (ncudnn.kernels.norm_row_fwd_pipe) compiles for sm_90 with no spills within
65536 / (threads x blocks an SM) registers (slow: NVVM in a child process)."""
import pytest

from ncudnn.kernels import compile_check
from ncudnn.kernels import norm_row_fwd_pipe  # noqa: F401 (registers its cases)

_MODULE = "ncudnn.kernels.norm_row_fwd_pipe"


def _ours():
    return [name for name, case in compile_check.registered_cases().items() if case.module == _MODULE]


def test_nrp_registers_cases():
    assert len(_ours()) == len(norm_row_fwd_pipe.COMPILE_CASES)


@pytest.mark.slow
def test_nrp_kernels_compile_for_sm90():
    results = compile_check.run_compile_check(_ours(), timeout=1800, jobs=2)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert len(results) == len(_ours())
