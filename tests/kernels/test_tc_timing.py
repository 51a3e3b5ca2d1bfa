"""The tensor-core timing helpers run end to end (simulator at a tiny shape: the check half, not the
numbers): plain and fused kernels match the float64 product."""
import pytest

from ncudnn.kernels.tc_gemm import TcGemmConfig
from ncudnn.kernels.tc_gemm.timing import time_config

_SMALL = TcGemmConfig(32, 32, 32, 2, 2, 2, 1)


@pytest.mark.parametrize("fused,dtype", [(False, "bf16"), (True, "fp16"), (False, "tf32")])
def test_time_config_checks(fused, dtype):
    tf, err = time_config(_SMALL, 32, 32, 32, True, True, iters=1, dtype=dtype, fused=fused)
    assert tf > 0 and err < 1e-2
