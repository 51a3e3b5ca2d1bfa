"""Sub-block row norm forward (TPR threads a row, RPB rows a block) vs the float64 oracle."""
import math

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.norm import row_fwd_sub as ks
from ncudnn.kernels.runtime.dtypes import from_storage, placeholder, to_storage
from ncudnn.testing import assert_close


def _dev(a, dtype="float32"):
    host = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    return cuda.to_device(to_storage(np.asarray(a).astype(host)))


def _poisoned(n, dtype="float32"):
    return _dev(np.full(n, np.nan, np.float32), dtype)


def _host(d, dtype="float32"):
    return from_storage(d.copy_to_host(), dtype)


def _run(rng, rows, n, tpr, rpb, vec, dt, rms, two_pass=True, preload=False, cs=False, bias_on=True, csx=False):
    x = (rng.standard_normal((rows, n)) * 2 + 3.0).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    xq = from_storage(to_storage(x.astype(getattr(ml_dtypes, dt, np.float32))), dt).astype(np.float64)
    eps = 1e-5
    kern, _ = ks.row_fwd_sub_kernel(n, tpr, rpb, vec, not rms, bias_on, True, dt, "float32", dt, "float32",
                                    None, two_pass, preload, cs, csx)
    y, mean, inv = _poisoned(rows * n, dt), _poisoned(rows), _poisoned(rows)
    threads, _ = ks.sub_config(n, vec, tpr, rpb)
    kern[math.ceil(rows / rpb), threads](_dev(x.reshape(-1), dt), _dev(scale), _dev(bias) if bias_on else placeholder("float32"),
                                         y, mean if not rms else placeholder("float32"), inv, eps, rows)
    b = bias if bias_on else None
    if rms:
        ey, einv = ref.rmsnorm_forward(xq, scale, eps, norm_axes=1, bias=b)
    else:
        ey, emean, einv = ref.layernorm_forward(xq, scale, b if b is not None else np.zeros(n), eps, norm_axes=1)
        assert_close(_host(mean).reshape(rows, 1), emean, "float32", name="mean")
    assert_close(_host(y, dt).astype(np.float64).reshape(rows, n), ey, dt, name="y")
    assert_close(_host(inv).reshape(rows, 1), einv, "float32", name="inv_std")


# (rows, n, tpr, rpb, vec, dtype, two_pass, preload, cs): 5 rows never a multiple of RPB > 1
CASES = [(5, 256, 32, 2, 4, "float32", True, False, False),     # warp per row, shuffles only
         (5, 256, 64, 2, 4, "float32", True, True, True),       # 2 warps a row, params early, .cs stores
         (5, 512, 128, 2, 4, "float32", False, False, False),   # 4 warps a row, shifted one-pass
         (3, 200, 64, 1, 4, "float32", False, True, False),     # guarded tail vectors
         (5, 256, 64, 2, 8, "bfloat16", True, False, False)]    # 16-bit I/O, 8 elements a vector


@pytest.mark.parametrize("rows,n,tpr,rpb,vec,dt,tp,pre,cs", CASES,
                         ids=["-".join(map(str, c)) for c in CASES])
@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
def test_nrh_sub_forward(rng, rows, n, tpr, rpb, vec, dt, tp, pre, cs, rms):
    _run(rng, rows, n, tpr, rpb, vec, dt, rms, tp, pre, cs)


def test_nrh_sub_streaming_loads(rng):
    _run(rng, 3, 128, 32, 2, 4, "float32", False, two_pass=False, cs=True, csx=True)


def test_nrh_sub_no_bias(rng):
    _run(rng, 3, 128, 32, 2, 4, "float32", False, bias_on=False)


def test_nrh_sub_config_limits():
    assert ks.sub_config(1024, 4, 32, 4) == (128, 8)       # 8 float4 a lane: the 1024-column warp row
    assert ks.sub_config(1024, 4, 64, 2) == (128, 4)
    assert ks.sub_config(4096, 4, 32, 1)[1] == 0           # 128 values a lane: too many registers
    assert ks.sub_config(1023, 4, 64, 1)[1] == 0           # odd n: no vectors
    assert ks.sub_config(1024, 4, 96, 1)[1] == 0
    with pytest.raises(ValueError):
        ks.row_fwd_sub_kernel(1023, 64, 1, 4, True, True, True, "float32", "float32", "float32", "float32")
    with pytest.raises(ValueError):
        ks.row_fwd_sub_kernel(256, 64, 1, 8, True, True, True, "bfloat16", "float32", "bfloat16", "float32",
                              cs=True)
    with pytest.raises(ValueError):
        ks.row_fwd_sub_kernel(256, 64, 1, 8, True, True, True, "bfloat16", "float32", "float32", "float32",
                              csx=True)
