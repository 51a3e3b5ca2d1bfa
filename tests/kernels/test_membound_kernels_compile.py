"""Every kernel configuration the memory-bound kernel modules register compiles for sm_90 with no
spills, no local memory and within its register budget (slow: ~5 minutes of NVVM)."""
import pytest

from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.norm import bn_generic as norm
from ncudnn.kernels.pointwise import fused as pointwise
from ncudnn.kernels.reduce import strided as reduce
from ncudnn.kernels.resample import generic as resample
from ncudnn.kernels.rng import philox as rng
from ncudnn.kernels.softmax import axis as softmax  # noqa: F401 (register)

_MODULES = ("ncudnn.kernels.pointwise.fused", "ncudnn.kernels.reduce.strided", "ncudnn.kernels.norm.bn_generic",
            "ncudnn.kernels.softmax.axis", "ncudnn.kernels.resample.generic", "ncudnn.kernels.rng.philox")


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
