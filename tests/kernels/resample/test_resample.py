"""Resample (pooling / nearest / bilinear) forward and backward kernels against the oracle."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.resample import generic as rs
from ncudnn.kernels.runtime.dtypes import from_storage, to_storage
from ncudnn.kernels.pointwise.fused import contiguous_strides as cs
from ncudnn.testing import assert_close
from ncudnn.types import cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM


def _dev(a, dtype="float32"):
    t = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    return cuda.to_device(to_storage(np.asarray(a).astype(t)))


def _poisoned(n, dtype="float32"):
    return _dev(np.full(n, np.nan, np.float32), dtype)


def _nhwc(shape):
    order = (0,) + tuple(range(2, len(shape))) + (1,)
    strides, acc = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def _scatter(x, strides):
    buf, idx = np.empty(x.size, x.dtype), np.zeros(x.shape, np.int64)
    for d, s in enumerate(strides):
        sh = [1] * x.ndim
        sh[d] = x.shape[d]
        idx = idx + np.arange(x.shape[d]).reshape(sh) * s
    buf[idx.reshape(-1)] = x.reshape(-1)
    return buf, idx


POOL_CASES = [
    (RM.CUDNN_RESAMPLE_MAXPOOL, PAD.CUDNN_NEG_INF_PAD, (3, 3), (2, 2), (1, 1)),
    (RM.CUDNN_RESAMPLE_MAXPOOL, PAD.CUDNN_ZERO_PAD, (2, 3), (1, 2), (0, 1)),
    (RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING, PAD.CUDNN_ZERO_PAD, (3, 3), (2, 2), (1, 1)),
    (RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING, PAD.CUDNN_ZERO_PAD, (3, 2), (2, 1), (1, 1)),
    (RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING, PAD.CUDNN_EDGE_VAL_PAD, (3, 3), (1, 2), (1, 1)),
    (RM.CUDNN_RESAMPLE_MAXPOOL, PAD.CUDNN_EDGE_VAL_PAD, (3, 3), (2, 2), (1, 1)),
]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("mode,pad,w,s,p", POOL_CASES,
                         ids=[f"{c[0].name[16:]}-{c[1].name[6:]}" for c in POOL_CASES])
def test_pool_2d_forward_backward(rng, layout, mode, pad, w, s, p):
    x_shape = (2, 3, 5, 6)
    y_shape = rs.output_shape(x_shape, w, s, p, p)
    xs = cs(x_shape) if layout == "nchw" else _nhwc(x_shape)
    ys = cs(y_shape) if layout == "nchw" else _nhwc(y_shape)
    x = rng.standard_normal(x_shape).astype(np.float32)
    dy = rng.standard_normal(y_shape).astype(np.float32)
    xbuf, _ = _scatter(x, xs)
    _, yidx = _scatter(np.zeros(y_shape, np.float32), ys)
    y = _poisoned(int(np.prod(y_shape)))
    index = cuda.to_device(np.full(int(np.prod(y_shape)), -7, np.int32))
    maxpool = mode == RM.CUDNN_RESAMPLE_MAXPOOL
    rs.resample_forward(_dev(xbuf), y, index if maxpool else None, mode, x_shape, xs, y_shape, ys,
                        w, s, p, pad)
    expected = ref.resample_forward(x, mode, w, s, p, p, pad)
    if maxpool:
        expected, eidx = expected
        np.testing.assert_array_equal(index.copy_to_host()[yidx], eidx)
    assert_close(y.copy_to_host()[yidx], expected, "float32", name="y")
    dybuf, _ = _scatter(dy, ys)
    dx = _poisoned(x.size)
    rs.resample_backward(_dev(dybuf), index if maxpool else None, dx, mode, x_shape, xs, y_shape,
                         ys, w, s, p, pad)
    _, xidx = _scatter(x, xs)
    edx = ref.resample_backward(dy, mode, w, s, p, p, x_shape, pad,
                                index=eidx if maxpool else None)
    assert_close(dx.copy_to_host()[xidx], edx, "float32", name="dx")


@pytest.mark.parametrize("propagate", [0, 1])
def test_maxpool_nan(rng, propagate):
    x_shape, w, s, p = (1, 2, 4, 4), (2, 2), (2, 2), (0, 0)
    y_shape = rs.output_shape(x_shape, w, s, p, p)
    x = rng.standard_normal(x_shape).astype(np.float32)
    x[0, 0, 0, 1] = np.nan
    x[0, 1, 2:, 2:] = np.nan   # an all-NaN window
    y, index = _poisoned(8), cuda.to_device(np.full(8, -7, np.int32))
    rs.resample_forward(_dev(x), y, index, RM.CUDNN_RESAMPLE_MAXPOOL, x_shape, cs(x_shape),
                        y_shape, cs(y_shape), w, s, p, nan_propagation=propagate)
    ey, ei = ref.resample_forward(x, RM.CUDNN_RESAMPLE_MAXPOOL, w, s, p, p,
                                  nan_propagation=propagate)
    np.testing.assert_array_equal(index.copy_to_host().reshape(y_shape), ei)
    assert_close(y.copy_to_host().reshape(y_shape), ey, "float32")


UPS = [(RM.CUDNN_RESAMPLE_BILINEAR, PAD.CUDNN_EDGE_VAL_PAD, (2, 2), (0.5, 0.5), (0.75, 0.75)),
       (RM.CUDNN_RESAMPLE_NEAREST, PAD.CUDNN_EDGE_VAL_PAD, (2, 2), (0.5, 0.5), (0.75, 0.75)),
       (RM.CUDNN_RESAMPLE_NEAREST, PAD.CUDNN_ZERO_PAD, (1, 1), (2, 2), (0, 0)),
       (RM.CUDNN_RESAMPLE_BILINEAR, PAD.CUDNN_ZERO_PAD, (2, 2), (1, 1), (1, 0))]


@pytest.mark.parametrize("mode,pad,w,s,p", UPS, ids=[f"{c[0].name[16:]}-{i}" for i, c in enumerate(UPS)])
def test_nearest_bilinear_forward_backward(rng, mode, pad, w, s, p):
    x_shape = (1, 2, 3, 4)
    y_shape = rs.output_shape(x_shape, w, s, p, p)
    x = rng.standard_normal(x_shape).astype(np.float32)
    dy = rng.standard_normal(y_shape).astype(np.float32)
    y = _poisoned(int(np.prod(y_shape)))
    rs.resample_forward(_dev(x), y, None, mode, x_shape, cs(x_shape), y_shape, cs(y_shape), w, s,
                        p, pad)
    ey = ref.resample_forward(x, mode, w, s, p, p, pad)
    assert_close(y.copy_to_host().reshape(y_shape), ey, "float32", name="y")
    dx = _poisoned(x.size)
    rs.resample_backward(_dev(dy), None, dx, mode, x_shape, cs(x_shape), y_shape, cs(y_shape), w,
                         s, p, pad)
    edx = ref.resample_backward(dy, mode, w, s, p, p, x_shape, pad)
    assert_close(dx.copy_to_host().reshape(x_shape), edx, "float32", name="dx")


def test_maxpool_3d_bf16(rng):
    x_shape, w, s, p = (1, 2, 3, 4, 4), (2, 2, 2), (1, 2, 2), (0, 1, 0)
    y_shape = rs.output_shape(x_shape, w, s, p, p)
    x = rng.standard_normal(x_shape).astype(ml_dtypes.bfloat16)
    n = int(np.prod(y_shape))
    y, index = _poisoned(n, "bfloat16"), cuda.to_device(np.full(n, -7, np.int8))
    rs.resample_forward(_dev(x, "bfloat16"), y, index, RM.CUDNN_RESAMPLE_MAXPOOL, x_shape,
                        cs(x_shape), y_shape, cs(y_shape), w, s, p, PAD.CUDNN_NEG_INF_PAD,
                        x_dtype="bfloat16", y_dtype="bfloat16", index_dtype="int8")
    ey, ei = ref.resample_forward(x, RM.CUDNN_RESAMPLE_MAXPOOL, w, s, p, p, PAD.CUDNN_NEG_INF_PAD)
    got = from_storage(y.copy_to_host(), "bfloat16").reshape(y_shape)
    np.testing.assert_array_equal(got.astype(np.float64), ey)   # max is exact
    np.testing.assert_array_equal(index.copy_to_host().reshape(y_shape), ei)
