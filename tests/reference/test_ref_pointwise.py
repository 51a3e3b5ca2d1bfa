"""reference.pointwise against scalar Python math, hand values and finite differences."""
import math

import ml_dtypes
import numpy as np
import pytest

from ncudnn.reference import POINTWISE_ARITY, pointwise
from ncudnn.types import cudnnPointwiseMode_t as PM


def _sig(v):
    return 1.0 / (1.0 + math.exp(-v))


K = math.sqrt(2 / math.pi)

# Independent scalar definitions straight from the cuDNN documentation text.
UNARY = {
    "ABS": abs, "CEIL": math.ceil, "COS": math.cos, "EXP": math.exp, "FLOOR": math.floor,
    "LOG": math.log, "NEG": lambda v: -v, "RSQRT": lambda v: 1 / math.sqrt(v),
    "SIN": math.sin, "SQRT": math.sqrt, "TAN": math.tan, "ERF": math.erf,
    "IDENTITY": lambda v: v, "RECIPROCAL": lambda v: 1 / v,
    "RELU_FWD": lambda v: max(v, 0.0), "TANH_FWD": math.tanh, "SIGMOID_FWD": _sig,
    "ELU_FWD": lambda v: v if v > 0 else math.exp(v) - 1,
    "GELU_FWD": lambda v: v * 0.5 * (1 + math.erf(v / math.sqrt(2))),
    "GELU_APPROX_TANH_FWD": lambda v: 0.5 * v * (1 + math.tanh(K * (v + 0.044715 * v ** 3))),
    "SOFTPLUS_FWD": lambda v: math.log(1 + math.exp(v)),
    "SWISH_FWD": lambda v: v / (1 + math.exp(-v)),
}
BINARY = {
    "ADD": lambda u, v: u + v, "SUB": lambda u, v: u - v, "MUL": lambda u, v: u * v,
    "DIV": lambda u, v: u / v, "ADD_SQUARE": lambda u, v: u + v ** 2,
    "MAX": max, "MIN": min, "POW": lambda u, v: abs(u) ** v, "ATAN2": math.atan2,
    "MOD": math.fmod, "FLOOR_MOD": lambda u, v: u % v,
    "CMP_EQ": lambda u, v: u == v, "CMP_NEQ": lambda u, v: u != v, "CMP_GT": lambda u, v: u > v,
    "CMP_GE": lambda u, v: u >= v, "CMP_LT": lambda u, v: u < v, "CMP_LE": lambda u, v: u <= v,
}
POSITIVE_ONLY = {"LOG", "RSQRT", "SQRT"}


def test_every_mode_has_an_arity():
    assert set(POINTWISE_ARITY) == set(PM)
    assert POINTWISE_ARITY[PM.CUDNN_POINTWISE_BINARY_SELECT] == 3
    assert POINTWISE_ARITY[PM.CUDNN_POINTWISE_RELU_BWD] == 2
    assert POINTWISE_ARITY[PM.CUDNN_POINTWISE_GEN_INDEX] == 1
    covered = set(UNARY) | set(BINARY) | {
        "RELU_BWD", "TANH_BWD", "SIGMOID_BWD", "ELU_BWD", "GELU_BWD", "SOFTPLUS_BWD",
        "SWISH_BWD", "GELU_APPROX_TANH_BWD", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT",
        "GEN_INDEX", "BINARY_SELECT"}
    assert {m.name[len("CUDNN_POINTWISE_"):] for m in PM} == covered


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_scalar_math(name, rng):
    x = rng.uniform(-3, 3, size=(3, 5))
    if name in POSITIVE_ONLY:
        x = np.abs(x) + 0.1
    got = pointwise(name, x)
    want = np.array([[UNARY[name](float(v)) for v in row] for row in x])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    assert got.dtype == np.float64


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_scalar_math_with_broadcast(name, rng):
    x = rng.uniform(-3, 3, size=(4, 1, 3))
    b = rng.uniform(-3, 3, size=(1, 2, 3))
    b[np.abs(b) < 0.1] = 0.5
    if name == "POW":
        x = np.abs(x)
    got = pointwise("CUDNN_POINTWISE_" + name, x, b)
    assert got.shape == (4, 2, 3)
    for i, j, k in np.ndindex(4, 2, 3):
        want = BINARY[name](float(x[i, 0, k]), float(b[0, j, k]))
        assert got[i, j, k] == pytest.approx(want, rel=1e-13, abs=1e-15)
    if name.startswith("CMP"):
        assert got.dtype == bool


def test_hand_values():
    assert pointwise("MOD", [-7.0], [3.0])[0] == -1.0
    assert pointwise("FLOOR_MOD", [-7.0], [3.0])[0] == 2.0
    assert pointwise("ADD_SQUARE", [1.0], [3.0])[0] == 10.0
    assert pointwise("GELU_FWD", [1.0])[0] == pytest.approx(0.8413447460685429, rel=1e-15)
    assert pointwise("SIGMOID_FWD", [0.0])[0] == 0.5
    assert pointwise(PM.CUDNN_POINTWISE_RECIPROCAL, [4.0])[0] == 0.25
    assert pointwise(303, [2.0], [2.0])[0]  # CMP_GE by value
    np.testing.assert_array_equal(pointwise("LOGICAL_AND", [0, 1, 2, 0], [1, 1, 0, 0]),
                                  [False, True, False, False])
    np.testing.assert_array_equal(pointwise("LOGICAL_OR", [0, 1, 2, 0], [1, 1, 0, 0]),
                                  [True, True, True, False])
    np.testing.assert_array_equal(pointwise("LOGICAL_NOT", [0.0, 3.0]), [True, False])


def test_params_and_alpha():
    x = np.array([-2.0, -0.5, 0.5, 3.0, 10.0])
    y = pointwise("RELU_FWD", x, relu_lower_clip=-1.0, relu_upper_clip=4.0,
                  relu_lower_clip_slope=0.1)
    np.testing.assert_allclose(y, [-1.1, -0.5, 0.5, 3.0, 4.0], rtol=1e-15)
    np.testing.assert_allclose(pointwise("ELU_FWD", [-1.0], elu_alpha=2.0),
                               [2 * (math.exp(-1) - 1)], rtol=1e-15)
    np.testing.assert_allclose(pointwise("SOFTPLUS_FWD", [0.5], softplus_beta=3.0),
                               [math.log(1 + math.exp(1.5)) / 3], rtol=1e-15)
    np.testing.assert_allclose(pointwise("SWISH_FWD", [0.5], swish_beta=2.0),
                               [0.5 / (1 + math.exp(-1.0))], rtol=1e-15)
    np.testing.assert_allclose(pointwise("SUB", [1.0], [3.0], alpha1=2.0, alpha2=0.5), [0.5])
    np.testing.assert_allclose(pointwise("EXP", [1.0], alpha1=2.0), [math.exp(2)])
    with pytest.raises(ValueError):
        pointwise("RELU_BWD", [1.0], [1.0], alpha1=2.0)
    with pytest.raises(ValueError):
        pointwise("ADD", [1.0])
    with pytest.raises(TypeError):
        pointwise("RELU_FWD", [1.0], lower_clip=1.0)


BWD_PARAMS = [
    ("RELU_BWD", {"relu_lower_clip": -0.5, "relu_upper_clip": 1.5, "relu_lower_clip_slope": 0.2}),
    ("RELU_BWD", {}), ("TANH_BWD", {}), ("SIGMOID_BWD", {}), ("ELU_BWD", {"elu_alpha": 1.7}),
    ("GELU_BWD", {}), ("GELU_APPROX_TANH_BWD", {}), ("SOFTPLUS_BWD", {"softplus_beta": 2.5}),
    ("SWISH_BWD", {"swish_beta": 0.7}),
]


@pytest.mark.parametrize("name,params", BWD_PARAMS)
def test_bwd_is_dy_times_finite_difference_of_fwd(name, params, rng):
    fwd = name.replace("_BWD", "_FWD")
    x = rng.uniform(-3, 3, size=(40,))
    # keep away from the kinks of relu / elu
    kinks = [0.0, params.get("relu_lower_clip", 0.0), params.get("relu_upper_clip", 0.0)]
    for k in kinks:
        x[np.abs(x - k) < 1e-3] += 0.01
    dy = rng.uniform(-2, 2, size=(40,))
    h = 1e-6
    fd = (pointwise(fwd, x + h, **params) - pointwise(fwd, x - h, **params)) / (2 * h)
    got = pointwise(name, dy, x, **params)
    np.testing.assert_allclose(got, dy * fd, rtol=1e-7, atol=1e-8)


def test_nan_propagation():
    nan = np.nan
    np.testing.assert_array_equal(pointwise("MAX", [nan, 1.0, nan], [2.0, nan, nan]),
                                  [2.0, 1.0, nan])
    np.testing.assert_array_equal(pointwise("MIN", [nan, 1.0], [2.0, nan]), [2.0, 1.0])
    got = pointwise("MAX", [nan, 1.0], [2.0, 0.0], nan_propagation="CUDNN_PROPAGATE_NAN")
    assert np.isnan(got[0]) and got[1] == 1.0
    assert pointwise("RELU_FWD", [nan])[0] == 0.0
    assert np.isnan(pointwise("RELU_FWD", [nan], nan_propagation=1)[0])


def test_gen_index_and_select(rng):
    x = rng.uniform(size=(2, 3, 4))
    g = pointwise("GEN_INDEX", x, axis=1)
    for i, j, k in np.ndindex(2, 3, 4):
        assert g[i, j, k] == j
    np.testing.assert_array_equal(pointwise("GEN_INDEX", x)[1, 2], [0, 1, 2, 3])
    a, b = rng.uniform(size=(3, 4)), rng.uniform(size=(3, 4))
    t = rng.integers(0, 2, size=(3, 4)).astype(np.float32)
    y = pointwise("BINARY_SELECT", a, b, t)
    for i, j in np.ndindex(3, 4):
        assert y[i, j] == (a[i, j] if t[i, j] else b[i, j])


def test_low_precision_inputs_are_upcast(rng):
    x = rng.uniform(-2, 2, size=(8,)).astype(ml_dtypes.bfloat16)
    got = pointwise("EXP", x)
    want = [math.exp(float(v)) for v in x.astype(np.float32)]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert got.dtype == np.float64


def test_relu_bwd_ties_take_the_outer_slope():
    dy = np.array([2.0, 2.0, 2.0, 2.0])
    x = np.array([0.0, -1.0, 1.0, 3.0])
    np.testing.assert_array_equal(pointwise("RELU_BWD", dy, x), [0.0, 0.0, 2.0, 2.0])
    got = pointwise("RELU_BWD", dy, x, relu_lower_clip=-1.0, relu_upper_clip=3.0,
                    relu_lower_clip_slope=0.5)
    np.testing.assert_array_equal(got, [2.0, 1.0, 2.0, 0.0])
