"""reference.legacy: hand cases, scalar formulas and finite differences for the v7-style ops."""
import math

import numpy as np
import pytest

from ncudnn import reference as R


def test_blend_ignores_nan_prior_when_beta_zero():
    np.testing.assert_array_equal(R.blend([1.0, 2.0], 2.0, 0.0, [np.nan, np.nan]), [2.0, 4.0])
    np.testing.assert_array_equal(R.blend([1.0], 2.0, 0.5, [4.0]), [4.0])


def test_op_tensor_cases(rng):
    a = rng.uniform(0.1, 2, size=(2, 3, 4))
    b = rng.uniform(-2, 2, size=(1, 3, 1))
    c = rng.uniform(-1, 1, size=a.shape)
    for op, f in (("ADD", lambda u, v: u + v), ("MUL", lambda u, v: u * v), ("MIN", min),
                  ("MAX", max)):
        got = R.op_tensor(op, a, b, alpha1=0.5, alpha2=3.0, beta=0.25, c_prior=c)
        for i in np.ndindex(*a.shape):
            want = f(0.5 * a[i], 3.0 * b[0, i[1], 0]) + 0.25 * c[i]
            assert got[i] == pytest.approx(want, rel=1e-14, abs=1e-15)
    np.testing.assert_allclose(R.op_tensor("SQRT", a, alpha1=4.0), 2 * np.sqrt(a), rtol=1e-15)
    np.testing.assert_array_equal(R.op_tensor("CUDNN_OP_TENSOR_NOT", [0.0, 1.0]), [1.0, 0.0])
    np.testing.assert_allclose(R.add_tensor(b, c, alpha=2.0, beta=1.0), 2 * b + c, rtol=1e-15)
    np.testing.assert_array_equal(R.scale_tensor([1.0, -2.0], 3.0), [3.0, -6.0])


def _sig(v):
    return 1 / (1 + math.exp(-v))


ACT = {
    "SIGMOID": lambda v, c: _sig(v), "RELU": lambda v, c: max(v, 0.0), "TANH": lambda v, c: math.tanh(v),
    "CLIPPED_RELU": lambda v, c: min(max(v, 0.0), c),
    "ELU": lambda v, c: v if v > 0 else c * (math.exp(v) - 1),
    "IDENTITY": lambda v, c: v, "SWISH": lambda v, c: v * _sig(c * v),
}


@pytest.mark.parametrize("mode", sorted(ACT))
def test_activation_forward_and_backward(mode, rng):
    x = rng.uniform(-3, 3, size=(30,))
    x[np.abs(x) < 1e-3] = 0.5
    x[np.abs(x - 1.5) < 1e-3] = 0.7
    coef = 1.5
    y = R.activation_forward("CUDNN_ACTIVATION_" + mode, x, coef=coef)
    np.testing.assert_allclose(y, [ACT[mode](float(v), coef) for v in x], rtol=1e-14, atol=1e-15)
    dy = rng.uniform(-1, 1, size=x.shape)
    prior = rng.uniform(-1, 1, size=x.shape)
    dx = R.activation_backward(mode, y, dy, x, coef=coef, alpha=2.0, beta=0.5, dx_prior=prior)
    h = 1e-6
    fd = np.array([(ACT[mode](float(v) + h, coef) - ACT[mode](float(v) - h, coef)) / (2 * h)
                   for v in x])
    np.testing.assert_allclose(dx, 2.0 * dy * fd + 0.5 * prior, rtol=1e-6, atol=1e-8)


def test_relu_nan():
    assert R.activation_forward("RELU", [np.nan])[0] == 0.0
    assert np.isnan(R.activation_forward("RELU", [np.nan], nan_propagation=1)[0])


def test_conv_bias_activation_and_backward_bias(rng):
    x = rng.uniform(-1, 1, size=(2, 3, 5, 5))
    w = rng.uniform(-1, 1, size=(4, 3, 3, 3))
    z = rng.uniform(-1, 1, size=(2, 4, 5, 5))
    bias = rng.uniform(-1, 1, size=(1, 4, 1, 1))
    y = R.conv_bias_activation_forward(x, w, z, bias, "RELU", alpha1=0.5, alpha2=2.0, pre_pad=1,
                                       post_pad=1)
    t = 0.5 * R.conv_fprop(x, w, pre_pad=1, post_pad=1) + 2.0 * z + bias
    np.testing.assert_allclose(y, np.where(t > 0, t, 0.0), rtol=1e-14)
    db = R.conv_backward_bias(z)
    assert db.shape == (1, 4, 1, 1)
    for k in range(4):
        assert db[0, k, 0, 0] == pytest.approx(sum(float(v) for v in z[:, k].ravel()), rel=1e-12)


def test_dropout(rng):
    x = rng.uniform(-1, 1, size=(3, 4))
    keep = R.rng_generate((3, 4), "BERNOULLI", 7, 0, bernoulli_probability=0.75)
    y = R.dropout_forward(x, keep, 0.25)
    for i in np.ndindex(3, 4):
        assert y[i] == (x[i] / 0.75 if keep[i] else 0.0)
    np.testing.assert_array_equal(R.dropout_backward(x, keep, 0.25), y)
