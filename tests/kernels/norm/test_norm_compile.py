"""The normalization kernels' registered configurations (row kernels, NHWC / NCHW batch norm) compile
for sm_90 with no spills and within their register budgets (slow: NVVM)."""
import pytest

from ncudnn.kernels.runtime import compile_check

from case_check import assert_cases_compile, cases_of
from ncudnn.kernels.norm import bn_cols as norm_bn_cols, bn_planes as norm_bn_planes, row as norm_row  # noqa: F401 (register)

_MODULES = ("ncudnn.kernels.norm.row", "ncudnn.kernels.norm.bn_cols", "ncudnn.kernels.norm.bn_planes")


def _ours():
    return cases_of(*_MODULES)


def test_norm_modules_register_cases():
    assert {compile_check.registered_cases()[n].module for n in _ours()} == set(_MODULES)


@pytest.mark.slow
def test_norm_kernels_compile_for_sm90():
    assert_cases_compile(_ours())
