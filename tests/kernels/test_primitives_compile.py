"""Every kernel configuration the memory-bound kernel modules register compiles for sm_90 with no
spills, no local memory and within its register budget (slow: ~5 minutes of NVVM)."""
import pytest

from ncudnn.kernels import compile_check
from ncudnn.kernels import norm, pointwise, reduce, resample, rng, softmax  # noqa: F401 (register)

_MODULES = ("ncudnn.kernels.pointwise", "ncudnn.kernels.reduce", "ncudnn.kernels.norm",
            "ncudnn.kernels.softmax", "ncudnn.kernels.resample", "ncudnn.kernels.rng")


def _ours():
    return [name for name, case in compile_check.registered_cases().items()
            if case.module in _MODULES]


def test_every_family_registers_cases():
    modules = {compile_check.registered_cases()[n].module for n in _ours()}
    assert modules == set(_MODULES)


@pytest.mark.slow
def test_registered_kernels_compile_for_sm90():
    results = compile_check.run_compile_check(_ours(), timeout=1800)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert len(results) == len(_ours())
