"""Every main oracle accepts low-precision inputs and computes on their exact float64 values."""
import ml_dtypes
import numpy as np
import pytest

from ncudnn import reference as R

LOW = [np.float16, ml_dtypes.bfloat16, np.float32]


def _cases(rng):
    x4 = rng.uniform(-1, 1, size=(2, 3, 4, 4))
    w4 = rng.uniform(-1, 1, size=(2, 3, 3, 3))
    q = rng.uniform(-1, 1, size=(1, 2, 3, 4))
    return [
        (lambda a, b: R.conv_fprop(a, b, pre_pad=1, post_pad=1), (x4, w4)),
        (lambda a, b: R.matmul(a, b), (x4[0, 0], x4[0, 1])),
        (lambda a: R.softmax(a, -1), (x4,)),
        (lambda a: R.reduction("NORM2", a, (2, 1, 1, 1)), (x4,)),
        (lambda a: R.layernorm_forward(a, 1.0, 0.0, 1e-5, (1, 2, 3))[0], (x4,)),
        (lambda a: R.resample_forward(a, "AVGPOOL", 2, 2, 0, 0), (x4,)),
        (lambda a, b, c: R.sdpa_forward(a, b, c, 0.5)[0], (q, q[:, :1], q[:, 1:])),
        (lambda a, b: R.pointwise("GELU_BWD", a, b), (x4, x4[::-1])),
    ]


@pytest.mark.parametrize("dtype", LOW, ids=lambda d: np.dtype(d).name)
def test_low_precision_equals_upcast_float64(dtype, rng):
    for fn, args in _cases(rng):
        low = [a.astype(dtype) for a in args]
        exact = [a.astype(np.float32).astype(np.float64) for a in low]
        got, want = fn(*low), fn(*exact)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
