"""The tensor-core GEMM timing script (experiments/tc_gemm_timing.py) runs end to end (simulator at a tiny shape: the check half, not the
numbers): plain and fused kernels match the float64 product."""
import sys
from pathlib import Path

import pytest

from ncudnn.kernels.tc_gemm import TcGemmConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "experiments"))  # as running a script there does
from tc_gemm_timing import time_config  # noqa: E402

_SMALL = TcGemmConfig(32, 32, 32, 2, 2, 2, 1)


@pytest.mark.parametrize("fused,dtype", [(False, "bf16"), (True, "fp16"), (False, "tf32")])
def test_time_config_checks(fused, dtype):
    tf, err = time_config(_SMALL, 32, 32, 32, True, True, iters=1, dtype=dtype, fused=fused)
    assert tf > 0 and err < 1e-2
