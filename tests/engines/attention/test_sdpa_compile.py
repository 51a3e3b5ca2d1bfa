"""The attention kernels compile for sm_90 with no spills and no local memory beyond their accumulator
arrays, the tensor-core forward with none (ncudnn.kernels.attention.cases; slow: NVVM in child processes, about a minute a kernel)."""
import os
import sys

import pytest

from ncudnn.kernels.attention import cases  # noqa: F401 (registers its cases)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels"))
from case_check import assert_cases_compile, cases_of  # noqa: E402

_MODULES = ("ncudnn.kernels.attention.fwd", "ncudnn.kernels.attention.bwd", "ncudnn.kernels.attention.tc_fwd",
            "ncudnn.kernels.attention.tc_bwd")


def test_attention_registers_cases():
    names = cases_of(*_MODULES)
    assert {"attn_fwd_d128_bf16", "attn_bwd_dkdv_d128_bf16", "attn_bwd_dq_d128_bf16",
            "attn_fwd_d64_bf16_all_options", "attn_bwd_dbias_bf16_band", "attn_tc_fwd_d128_bf16",
            "attn_tc_fwd_d64_f16_wide", "attn_tc_fwd_d64_bf16_all_options",
            "attn_tc_fwd_d64_f16_element_copy", "attn_tc_bwd_dk_d128_bf16", "attn_tc_bwd_dv_d128_bf16",
            "attn_tc_bwd_dq_d128_bf16",
            "attn_tc_bwd_dkdv_d64_f16_options", "attn_tc_bwd_dq_d64_f16_options"} <= set(names), names


@pytest.mark.slow
def test_attention_kernels_compile_for_sm90():
    assert_cases_compile(cases_of(*_MODULES))
