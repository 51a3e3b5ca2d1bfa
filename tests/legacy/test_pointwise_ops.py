"""Activation, AddTensor, OpTensor, ScaleTensor, SetTensor, TransformTensor against the oracle, and the
blending rule y = alpha * op(x) + beta * y (beta = 0 never reads y: y is poisoned with NaN)."""
import ctypes

import numpy as np
import pytest

import ncudnn
import ncudnn.legacy as L
from ncudnn import reference as R
from ncudnn.testing import size

from .conftest import check_or_skip, dev, poisoned, tdesc

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
AM = ncudnn.cudnnActivationMode_t
SHAPE = size((2, 3, 4, 5), (8, 32, 28, 28))
MODES = [(AM.CUDNN_ACTIVATION_SIGMOID, 0.0), (AM.CUDNN_ACTIVATION_RELU, 0.0), (AM.CUDNN_ACTIVATION_TANH, 0.0),
         (AM.CUDNN_ACTIVATION_CLIPPED_RELU, 0.6), (AM.CUDNN_ACTIVATION_ELU, 0.7), (AM.CUDNN_ACTIVATION_SWISH, 1.3)]
#: (alpha, beta) given as a Python float, a NumPy scalar, a one-element host array, ctypes numbers
BLENDS = [(1.0, 0.0), (np.float32(0.5), 0.0), (np.array([2.0]), np.float64(0.75)),
          (ctypes.c_float(-1.0), ctypes.c_double(2.0))]


def act_desc(mode, coef):
    _, a = L.cudnnCreateActivationDescriptor()
    assert L.cudnnSetActivationDescriptor(a, mode, 0, coef if mode != AM.CUDNN_ACTIVATION_SWISH else 0.0) == (OK,)
    if mode == AM.CUDNN_ACTIVATION_SWISH:
        assert L.cudnnSetActivationDescriptorSwishBeta(a, coef) == (OK,)
    return a


def _f(v):
    if isinstance(v, ctypes._SimpleCData):
        return float(v.value)
    return float(np.asarray(v).reshape(-1)[0])


@pytest.mark.parametrize("mode, coef", MODES, ids=[m.name for m, _ in MODES])
@pytest.mark.parametrize("alpha, beta", BLENDS, ids=["plain", "alpha", "alpha_beta", "ctypes"])
def test_activation_forward(handle, rng, mode, coef, alpha, beta):
    x = rng.uniform(-2, 2, SHAPE).astype(np.float32)
    prior = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    y = dev(prior) if _f(beta) else poisoned(SHAPE)
    d = tdesc(SHAPE)
    ret = L.cudnnActivationForward(handle, act_desc(mode, coef), alpha, d, dev(x), beta, d, y)
    ref = R.activation_forward(mode, x, coef=coef, alpha=_f(alpha), beta=_f(beta), y_prior=prior)
    check_or_skip(handle, ret, ["pointwise"], {"y": y}, {"y": ref}, {"x": x, "y": prior},
                  {"alpha": _f(alpha)}, tol=3e-6)


@pytest.mark.parametrize("mode, coef", MODES, ids=[m.name for m, _ in MODES])
def test_activation_backward(handle, rng, mode, coef):
    x = rng.uniform(-2, 2, SHAPE).astype(np.float32)
    dy = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    prior = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    y = R.activation_forward(mode, x, coef=coef).astype(np.float32)
    dx = dev(prior)
    d = tdesc(SHAPE)
    ret = L.cudnnActivationBackward(handle, act_desc(mode, coef), 1.5, d, dev(y), d, dev(dy), d, dev(x), 0.5, d, dx)
    ref = R.activation_backward(mode, y, dy, x, coef=coef, alpha=1.5, beta=0.5, dx_prior=prior)
    check_or_skip(handle, ret, ["pointwise"], {"dx": dx}, {"dx": ref}, {"x": x, "dy": dy, "dx": prior},
                  {"alpha": 1.5}, tol=3e-6)


def test_activation_in_place_and_nan_option(handle, rng):
    x = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    x.flat[::7] = np.nan
    buf = dev(x)
    d = tdesc(SHAPE)
    _, a = L.cudnnCreateActivationDescriptor()
    assert L.cudnnSetActivationDescriptor(a, AM.CUDNN_ACTIVATION_RELU, ncudnn.CUDNN_PROPAGATE_NAN, 0.0) == (OK,)
    assert L.cudnnActivationForward(handle, a, 1.0, d, buf, 0.0, d, buf) == (OK,)
    got = buf.copy_to_host()
    assert np.isnan(got.flat[::7]).all()
    np.testing.assert_array_equal(got, R.activation_forward("RELU", x, nan_propagation=1).astype(np.float32))
    buf = dev(x)
    assert L.cudnnSetActivationDescriptor(a, AM.CUDNN_ACTIVATION_RELU, ncudnn.CUDNN_NOT_PROPAGATE_NAN, 0.0) == (OK,)
    assert L.cudnnActivationForward(handle, a, 1.0, d, buf, 0.0, d, buf) == (OK,)
    assert not np.isnan(buf.copy_to_host()).any()


def test_activation_bad_params(handle):
    d, e = tdesc(SHAPE), tdesc((1, 1, 1, 1))
    x, y = dev(np.ones(SHAPE, np.float32)), dev(np.ones(SHAPE, np.float32))
    a = act_desc(AM.CUDNN_ACTIVATION_RELU, 0.0)
    _, ident = L.cudnnCreateActivationDescriptor()
    L.cudnnSetActivationDescriptor(ident, AM.CUDNN_ACTIVATION_IDENTITY, 0, 0.0)
    cases = [((handle, ident, 1.0, d, x, 0.0, d, y), S.CUDNN_STATUS_BAD_PARAM, "IDENTITY"),
             ((handle, a, 1.0, d, x, 0.0, e, y), S.CUDNN_STATUS_BAD_PARAM, "differ"),
             ((handle, a, 1.0, d, None, 0.0, d, y), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "x is NULL"),
             ((handle, a, None, d, x, 0.0, d, y), S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "alpha is NULL"),
             ((handle, a, np.array([1.0, 2.0]), d, x, 0.0, d, y), S.CUDNN_STATUS_BAD_PARAM, "one is needed"),
             ((handle, a, "2", d, x, 0.0, d, y), S.CUDNN_STATUS_BAD_PARAM, "host scalar"),
             ((None, a, 1.0, d, x, 0.0, d, y), S.CUDNN_STATUS_BAD_PARAM, "handle is NULL"),
             ((handle, None, 1.0, d, x, 0.0, d, y), S.CUDNN_STATUS_BAD_PARAM, "activationDesc is NULL")]
    for args, status, word in cases:
        assert L.cudnnActivationForward(*args) == (status,)
        assert word in ncudnn.cudnnGetLastErrorString()


@pytest.mark.parametrize("a_shape", [(1, SHAPE[1], 1, 1), (1, 1, 1, 1), SHAPE, (SHAPE[0], 1, SHAPE[2], 1)])
def test_add_tensor_broadcast(handle, rng, a_shape):
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    prior = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    c = dev(prior)
    ret = L.cudnnAddTensor(handle, 0.5, tdesc(a_shape), dev(a), 1.0, tdesc(SHAPE), c)
    check_or_skip(handle, ret, ["pointwise"], {"c": c}, {"c": R.add_tensor(a, prior, 0.5, 1.0)},
                  {"a": a, "c": prior}, {"alpha": 0.5})
    c = poisoned(SHAPE)
    assert L.cudnnAddTensor(handle, 2.0, tdesc(a_shape), dev(a), 0.0, tdesc(SHAPE), c) == (OK,)
    np.testing.assert_allclose(c.copy_to_host(), np.broadcast_to(2.0 * a, SHAPE), rtol=1e-6)
    assert L.cudnnAddTensor(handle, 1.0, tdesc((1, SHAPE[1] + 1, 1, 1)), dev(np.ones((1, SHAPE[1] + 1, 1, 1),
                                                                                  np.float32)), 1.0,
                            tdesc(SHAPE), c)[0] == S.CUDNN_STATUS_BAD_PARAM


@pytest.mark.parametrize("op", list(ncudnn.cudnnOpTensorOp_t), ids=lambda o: o.name)
def test_op_tensor(handle, rng, op):
    a = rng.uniform(0.1, 2, SHAPE).astype(np.float32)
    b_shape = (1, SHAPE[1], 1, 1)
    b = rng.uniform(-2, 2, b_shape).astype(np.float32)
    prior = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    _, od = L.cudnnCreateOpTensorDescriptor()
    assert L.cudnnSetOpTensorDescriptor(od, op, ncudnn.CUDNN_DATA_FLOAT, 0) == (OK,)
    c = dev(prior)
    ret = L.cudnnOpTensor(handle, od, 0.75, tdesc(SHAPE), dev(a), np.float32(-1.5), tdesc(b_shape), dev(b), 0.25,
                          tdesc(SHAPE), c)
    ref = R.op_tensor(op, a, b, alpha1=0.75, alpha2=-1.5, beta=0.25, c_prior=prior)
    check_or_skip(handle, ret, ["pointwise"], {"c": c}, {"c": ref}, {"a": a, "b": b, "c": prior},
                  {"alpha1": 0.75, "alpha2": -1.5, "one": 1.0}, tol=3e-6)


def test_scale_set_transform(handle, rng):
    y0 = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    y = dev(y0)
    assert L.cudnnScaleTensor(handle, tdesc(SHAPE), y, np.array([-2.5], np.float32)) == (OK,)
    np.testing.assert_allclose(y.copy_to_host(), R.scale_tensor(y0, -2.5), rtol=1e-6)
    z = poisoned(SHAPE)
    assert L.cudnnSetTensor(handle, tdesc(SHAPE), z, 3.25) == (OK,)
    assert (z.copy_to_host() == np.float32(3.25)).all()
    # NCHW -> NHWC with blending
    n, c, h, w = SHAPE
    prior_nhwc = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    out = dev(prior_nhwc)
    ret = L.cudnnTransformTensor(handle, 2.0, tdesc(SHAPE), dev(y0), 0.5, tdesc(SHAPE, fmt=ncudnn.CUDNN_TENSOR_NHWC),
                                 out)
    assert ret == (OK,), ncudnn.cudnnGetLastErrorString()
    want = 2.0 * y0.astype(np.float64) + 0.5 * prior_nhwc.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(out.copy_to_host().transpose(0, 3, 1, 2), want, rtol=1e-6, atol=1e-6)
    assert L.cudnnTransformTensor(handle, 1.0, tdesc(SHAPE), dev(y0), 0.0, tdesc((1, 1, 1, 1)), out)[0] == \
        S.CUDNN_STATUS_BAD_PARAM


def test_transform_to_half(handle, rng):
    x = rng.uniform(-4, 4, SHAPE).astype(np.float32)
    out = dev(np.full(SHAPE, np.nan, np.float16))
    ret = L.cudnnTransformTensor(handle, 1.0, tdesc(SHAPE), dev(x), 0.0, tdesc(SHAPE, ncudnn.CUDNN_DATA_HALF), out)
    assert ret == (OK,), ncudnn.cudnnGetLastErrorString()
    np.testing.assert_array_equal(out.copy_to_host(), x.astype(np.float16))


def test_relu_backward_at_the_kink(handle, rng):
    x = np.array([-1.0, 0.0, 0.0, 2.0] * 6, np.float32).reshape(2, 3, 2, 2)
    dy = rng.uniform(0.5, 1.0, x.shape).astype(np.float32)
    dx = poisoned(x.shape)
    d = tdesc(x.shape)
    a = act_desc(AM.CUDNN_ACTIVATION_RELU, 0.0)
    assert L.cudnnActivationBackward(handle, a, 1.0, d, dev(np.maximum(x, 0)), d, dev(dy), d, dev(x), 0.0, d,
                                     dx) == (OK,)
    np.testing.assert_array_equal(dx.copy_to_host(), R.activation_backward("RELU", x, dy, x).astype(np.float32))
