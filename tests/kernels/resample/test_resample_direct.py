"""Direct pooling kernels (ncudnn.kernels.resample.direct): forward (with / without index) and the
integer gather backward (index-routed and recomputed from x), NCHW / NHWC (VEC 1 / 4), 2D / 3D, all
padding modes, against the float64 oracle."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.resample import generic as rs
from ncudnn.kernels.resample import direct as rd
from ncudnn.kernels.primitives.warp import launch
from ncudnn.testing import assert_close
from ncudnn.types import cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM

MAX, AIN, AEX = (RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING,
                 RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING)
BLOCK = 32


def cs(shape):
    strides, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def _nhwc(shape):
    order = (0,) + tuple(range(2, len(shape))) + (1,)
    strides, acc = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def _flat_index(shape, strides):
    idx = np.zeros(shape, np.int64)
    for d, s in enumerate(strides):
        sh = [1] * len(shape)
        sh[d] = shape[d]
        idx = idx + np.arange(shape[d]).reshape(sh) * s
    return idx


def _buf(a, strides, dtype=np.float32):
    out = np.empty(a.size, dtype)
    out[_flat_index(a.shape, strides).reshape(-1)] = a.reshape(-1)
    return cuda.to_device(out)


def _poisoned(n, dtype=np.float32):
    return cuda.to_device(np.full(n, np.nan if np.dtype(dtype).kind == "f" else -7, dtype))


def _forward(x, mode, w, s, p, pad, lay, index, propagate=False):
    x_shape = x.shape
    y_shape = rs.output_shape(x_shape, w, s, p, p)
    xs, ys = lay(x_shape), lay(y_shape)
    vec = 4 if lay is _nhwc and x_shape[1] % 4 == 0 else 1
    kind = None if not index else ("vec" if vec == 4 else "scalar")
    k, src, total = rd.fwd_kernel(mode, vec, x_shape, xs, y_shape, ys, ys, w, s, p, pad, propagate, kind,
                                  "float32", "float32", "int32", BLOCK)
    n = int(np.prod(y_shape))
    y, idx = _poisoned(n), _poisoned(n, np.int32)
    launch(k, rd.grid(total, BLOCK), BLOCK, 0, _buf(x, xs), y, idx)
    yi = _flat_index(y_shape, ys)
    return y.copy_to_host()[yi], idx.copy_to_host()[yi], src, idx


FWD = [(MAX, PAD.CUDNN_NEG_INF_PAD, (3, 3), (2, 2), (1, 1)),
       (MAX, PAD.CUDNN_ZERO_PAD, (2, 3), (1, 2), (0, 1)),
       (MAX, PAD.CUDNN_EDGE_VAL_PAD, (3, 3), (2, 2), (1, 1)),
       (AIN, PAD.CUDNN_ZERO_PAD, (3, 3), (2, 2), (1, 1)),
       (AIN, PAD.CUDNN_EDGE_VAL_PAD, (3, 2), (1, 2), (1, 1)),
       (AEX, PAD.CUDNN_ZERO_PAD, (3, 3), (2, 1), (1, 1)),
       (AEX, PAD.CUDNN_NEG_INF_PAD, (2, 2), (2, 2), (1, 0))]


@pytest.mark.parametrize("lay", [cs, _nhwc], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("mode,pad,w,s,p", FWD,
                         ids=[f"{c[0].name[15:]}-{c[1].name[6:]}-{i}" for i, c in enumerate(FWD)])
def test_direct_pool_forward_backward(rng, lay, mode, pad, w, s, p):
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    y, idx, _, idx_dev = _forward(x, mode, w, s, p, pad, lay, index=mode == MAX)
    exp = ref.resample_forward(x, mode, w, s, p, p, pad)
    if mode == MAX:
        exp, eidx = exp
        np.testing.assert_array_equal(idx, eidx)
    assert_close(y, exp, "float32", name="y")
    ok, why = rd.bwd_supported(mode, pad, p, w, s, mode == MAX, True)
    if not ok:
        assert pad == PAD.CUDNN_EDGE_VAL_PAD and "EDGE" in why
        return
    y_shape = y.shape
    dy = rng.standard_normal(y_shape).astype(np.float32)
    xs, ys = lay(x.shape), lay(y_shape)
    vec = 4 if lay is _nhwc else 1
    edx = ref.resample_backward(dy, mode, w, s, p, p, x.shape, pad, index=eidx if mode == MAX else None)
    for kind in ([None, "vec" if vec == 4 else "scalar"] if mode == MAX else [None]):
        k, _, total = rd.bwd_kernel(mode, vec, x.shape, xs, y_shape, ys, ys, xs, w, s, p, pad, False, kind,
                                    "float32", "float32", "float32", BLOCK)
        dx = _poisoned(x.size)
        launch(k, rd.grid(total, BLOCK), BLOCK, 0, _buf(dy, ys), idx_dev if kind else _poisoned(1, np.int32),
               _buf(x, xs), dx)
        assert_close(dx.copy_to_host()[_flat_index(x.shape, xs)], edx, "float32", name=f"dx ({kind})")


def test_direct_forward_without_index_has_no_index_store(rng):
    x = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    y, idx, src, _ = _forward(x, MAX, (2, 2), (2, 2), (0, 0), PAD.CUDNN_ZERO_PAD, _nhwc, index=False)
    assert "idx" not in src.split("\n", 1)[1] and (idx == -7).all()
    assert_close(y, ref.resample_forward(x, MAX, (2, 2), (2, 2), (0, 0), (0, 0))[0], "float32")
    assert "ld4(x" in src and "st4(y" in src   # NHWC float32: 16-byte accesses
    # no padding reachable: no range checks or clamps at all
    assert "ok" not in src and "max(" not in src


@pytest.mark.parametrize("propagate", [False, True])
def test_direct_maxpool_nan(rng, propagate):
    x = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    x[0, 0, 0, 1] = np.nan
    x[0, 1, 2:, 2:] = np.nan            # an all-NaN window
    x[0, 2, 0, 0] = np.nan              # NaN first tap, rest -inf
    x[0, 2, 0, 1] = x[0, 2, 1, 0] = x[0, 2, 1, 1] = -np.inf
    for lay in (cs, _nhwc):
        y, idx, _, _ = _forward(x, MAX, (2, 2), (2, 2), (0, 0), PAD.CUDNN_ZERO_PAD, lay, True, propagate)
        ey, ei = ref.resample_forward(x, MAX, (2, 2), (2, 2), (0, 0), (0, 0), nan_propagation=int(propagate))
        np.testing.assert_array_equal(idx, ei)
        np.testing.assert_array_equal(y, ey.astype(np.float32))


@pytest.mark.parametrize("lay", [cs, _nhwc], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("mode", [MAX, AEX, AIN])
def test_direct_pool_3d(rng, lay, mode):
    x = rng.standard_normal((1, 4, 3, 4, 5)).astype(np.float32)
    w, s, p, pad = (2, 3, 2), (1, 2, 2), (0, 1, 1), PAD.CUDNN_NEG_INF_PAD if mode == MAX else PAD.CUDNN_ZERO_PAD
    y, idx, _, idx_dev = _forward(x, mode, w, s, p, pad, lay, index=mode == MAX)
    exp = ref.resample_forward(x, mode, w, s, p, p, pad)
    if mode == MAX:
        exp, eidx = exp
        np.testing.assert_array_equal(idx, eidx)
    assert_close(y, exp, "float32", name="y")
    dy = rng.standard_normal(y.shape).astype(np.float32)
    xs, ys = lay(x.shape), lay(y.shape)
    vec = 4 if lay is _nhwc else 1
    kind = ("vec" if vec == 4 else "scalar") if mode == MAX else None
    k, _, total = rd.bwd_kernel(mode, vec, x.shape, xs, y.shape, ys, ys, xs, w, s, p, pad, False, kind,
                                "float32", "float32", "float32", BLOCK)
    dx = _poisoned(x.size)
    launch(k, rd.grid(total, BLOCK), BLOCK, 0, _buf(dy, ys), idx_dev, _buf(x, xs), dx)
    edx = ref.resample_backward(dy, mode, w, s, p, p, x.shape, pad, index=eidx if mode == MAX else None)
    assert_close(dx.copy_to_host()[_flat_index(x.shape, xs)], edx, "float32", name="dx")


@pytest.mark.parametrize("mode,pad", [(MAX, PAD.CUDNN_NEG_INF_PAD), (MAX, PAD.CUDNN_ZERO_PAD),
                                      (AEX, PAD.CUDNN_ZERO_PAD),
                                      (AIN, PAD.CUDNN_ZERO_PAD)])
def test_direct_asymmetric_padding(rng, mode, pad):
    """pre != post, post >= window (outputs whose window is all padding), NHWC vector path."""
    x = rng.standard_normal((1, 4, 5, 4)).astype(np.float32)
    w, s, pre, post = (2, 3), (2, 1), (1, 0), (3, 4)
    y_shape = rs.output_shape(x.shape, w, s, pre, post)
    xs, ys = _nhwc(x.shape), _nhwc(y_shape)
    kind = "vec" if mode == MAX else None
    k, _, total = rd.fwd_kernel(mode, 4, x.shape, xs, y_shape, ys, ys, w, s, pre, pad, False, kind,
                                "float32", "float32", "int32", BLOCK)
    n = int(np.prod(y_shape))
    y, idx = _poisoned(n), _poisoned(n, np.int32)
    launch(k, rd.grid(total, BLOCK), BLOCK, 0, _buf(x, xs), y, idx)
    yi = _flat_index(y_shape, ys)
    exp = ref.resample_forward(x, mode, w, s, pre, post, pad)
    if mode == MAX:
        exp, eidx = exp
        np.testing.assert_array_equal(idx.copy_to_host()[yi], eidx)
    assert_close(y.copy_to_host()[yi], exp, "float32", name="y")
    dy = rng.standard_normal(y_shape).astype(np.float32)
    k, _, total = rd.bwd_kernel(mode, 4, x.shape, xs, y_shape, ys, ys, xs, w, s, pre, pad, False, kind,
                                "float32", "float32", "float32", BLOCK)
    dx = _poisoned(x.size)
    launch(k, rd.grid(total, BLOCK), BLOCK, 0, _buf(dy, ys), idx, _buf(x, xs), dx)
    edx = ref.resample_backward(dy, mode, w, s, pre, post, x.shape, pad, index=eidx if mode == MAX else None)
    assert_close(dx.copy_to_host()[_flat_index(x.shape, xs)], edx, "float32", name="dx")


UPS = [(RM.CUDNN_RESAMPLE_BILINEAR, PAD.CUDNN_EDGE_VAL_PAD, (2, 2), (0.5, 0.5), (0.75, 0.75)),
       (RM.CUDNN_RESAMPLE_NEAREST, PAD.CUDNN_EDGE_VAL_PAD, (2, 2), (0.5, 0.5), (0.75, 0.75)),
       (RM.CUDNN_RESAMPLE_NEAREST, PAD.CUDNN_ZERO_PAD, (1, 1), (2, 2), (0, 0)),
       (RM.CUDNN_RESAMPLE_BILINEAR, PAD.CUDNN_ZERO_PAD, (2, 2), (1, 1), (1, 0)),
       (RM.CUDNN_RESAMPLE_BILINEAR, PAD.CUDNN_NEG_INF_PAD, (2, 2, 2), (0.5, 1, 2), (0.75, 0, 0.5))]


@pytest.mark.parametrize("lay", [cs, _nhwc], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("mode,pad,w,s,p", UPS,
                         ids=[f"{c[0].name[15:]}-{c[1].name[6:]}-{i}" for i, c in enumerate(UPS)])
def test_direct_nearest_bilinear_forward(rng, lay, mode, pad, w, s, p):
    x = rng.standard_normal((1, 4, 3, 4, 3)[:2 + len(w)]).astype(np.float32)
    y_shape = rs.output_shape(x.shape, w, s, p, p)
    xs, ys = lay(x.shape), lay(y_shape)
    vec = 4 if lay is _nhwc else 1
    k, src, total = rd.fwd_kernel(mode, vec, x.shape, xs, y_shape, ys, ys, w, s, p, pad, False, None,
                                  "float32", "float32", "int32", BLOCK)
    y = _poisoned(int(np.prod(y_shape)))
    launch(k, rd.grid(total, BLOCK), BLOCK, 0, _buf(x, xs), y, _poisoned(1, np.int32))
    exp = ref.resample_forward(x, mode, w, s, p, p, pad)
    assert_close(y.copy_to_host()[_flat_index(y_shape, ys)], exp, "float32", name="y")
    assert ("ld4(x" in src) == (vec == 4)


@pytest.mark.parametrize("lay", [cs, _nhwc], ids=["ncl", "nlc"])
@pytest.mark.parametrize("mode", [MAX, AIN])
def test_direct_pool_1d(rng, lay, mode):
    x = rng.standard_normal((2, 4, 9)).astype(np.float32)
    w, s, p, pad = (4,), (3,), (2,), PAD.CUDNN_NEG_INF_PAD if mode == MAX else PAD.CUDNN_ZERO_PAD
    y, idx, _, idx_dev = _forward(x, mode, w, s, p, pad, lay, index=mode == MAX)
    exp = ref.resample_forward(x, mode, w, s, p, p, pad)
    if mode == MAX:
        exp, eidx = exp
        np.testing.assert_array_equal(idx, eidx)
    assert_close(y, exp, "float32", name="y")
    dy = rng.standard_normal(y.shape).astype(np.float32)
    xs, ys = lay(x.shape), lay(y.shape)
    vec = 4 if lay is _nhwc else 1
    kind = ("vec" if vec == 4 else "scalar") if mode == MAX else None
    k, _, total = rd.bwd_kernel(mode, vec, x.shape, xs, y.shape, ys, ys, xs, w, s, p, pad, False, kind,
                                "float32", "float32", "float32", BLOCK)
    dx = _poisoned(x.size)
    launch(k, rd.grid(total, BLOCK), BLOCK, 0, _buf(dy, ys), idx_dev, _buf(x, xs), dx)
    edx = ref.resample_backward(dy, mode, w, s, p, p, x.shape, pad, index=eidx if mode == MAX else None)
    assert_close(dx.copy_to_host()[_flat_index(x.shape, xs)], edx, "float32", name="dx")
