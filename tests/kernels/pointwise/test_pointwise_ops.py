"""Every pointwise mode's expression text, run in a tiny kernel, against the float64 oracle."""
import math

import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.pointwise import ops as po
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnPointwiseMode_t as PM

N = 16

# Operand domains where every mode is finite and well away from its singularities / ties.
_POSITIVE_X = {PM.CUDNN_POINTWISE_LOG, PM.CUDNN_POINTWISE_SQRT, PM.CUDNN_POINTWISE_RSQRT,
               PM.CUDNN_POINTWISE_POW}
_NONZERO_B = {PM.CUDNN_POINTWISE_DIV, PM.CUDNN_POINTWISE_MOD, PM.CUDNN_POINTWISE_FLOOR_MOD}


def _build(mode, params, ftype="float32"):
    n = po.arity(mode)
    names = ["r0", "r1", "r2"][:n]
    if mode == PM.CUDNN_POINTWISE_GEN_INDEX:
        names = ["i"]
    body = po.expr(mode, names, params, ftype)
    kind = po.result_kind(mode)
    store = f"{ftype}({body})" if kind != "bool" else f"{body}"
    src = (
        "def kernel(x, b, c, out):\n"
        "    i = cuda.grid(1)\n"
        "    if i < out.size:\n"
        f"        r0 = {ftype}(x[i])\n"
        f"        r1 = {ftype}(b[i])\n"
        "        r2 = c[i]\n"
        f"        out[i] = {store}\n")
    ns = dict(po.expr_globals(), cuda=cuda)
    exec(compile(src, f"<pointwise test {mode.name}>", "exec"), ns)
    return cuda.jit(ns["kernel"]), src


def _inputs(rng, mode, dtype):
    x = rng.uniform(-2.0, 2.0, N)
    b = rng.uniform(-2.0, 2.0, N)
    if mode in _POSITIVE_X:
        x = rng.uniform(0.2, 2.0, N)
    if mode in _NONZERO_B:
        b = rng.choice([-1.0, 1.0], N) * rng.uniform(0.3, 2.0, N)
    if mode in (PM.CUDNN_POINTWISE_CEIL, PM.CUDNN_POINTWISE_FLOOR):
        x = np.round(x * 4) / 4 + 0.1   # away from integers
    if mode in (PM.CUDNN_POINTWISE_CMP_EQ, PM.CUDNN_POINTWISE_CMP_NEQ, PM.CUDNN_POINTWISE_CMP_GE,
                PM.CUDNN_POINTWISE_CMP_LE, PM.CUDNN_POINTWISE_LOGICAL_AND,
                PM.CUDNN_POINTWISE_LOGICAL_OR, PM.CUDNN_POINTWISE_LOGICAL_NOT):
        x = rng.integers(-1, 2, N).astype(float)   # equal values and zeros occur
        b = rng.integers(-1, 2, N).astype(float)
    if mode == PM.CUDNN_POINTWISE_TAN:
        x = rng.uniform(-1.2, 1.2, N)
    c = rng.random(N) < 0.5
    return x.astype(dtype), b.astype(dtype), c


_PARAMS = {
    PM.CUDNN_POINTWISE_RELU_FWD: [{}, dict(relu_lower_clip=-0.5, relu_upper_clip=1.0,
                                           relu_lower_clip_slope=0.1)],
    PM.CUDNN_POINTWISE_RELU_BWD: [{}, dict(relu_lower_clip=-0.5, relu_upper_clip=1.0,
                                           relu_lower_clip_slope=0.1)],
    PM.CUDNN_POINTWISE_ELU_FWD: [dict(elu_alpha=0.7)],
    PM.CUDNN_POINTWISE_ELU_BWD: [dict(elu_alpha=0.7)],
    PM.CUDNN_POINTWISE_SOFTPLUS_FWD: [{}, dict(softplus_beta=2.5)],
    PM.CUDNN_POINTWISE_SOFTPLUS_BWD: [dict(softplus_beta=2.5)],
    PM.CUDNN_POINTWISE_SWISH_FWD: [{}, dict(swish_beta=1.7)],
    PM.CUDNN_POINTWISE_SWISH_BWD: [dict(swish_beta=1.7)],
    PM.CUDNN_POINTWISE_ADD: [dict(alpha1=0.5, alpha2=-2.0)],
    PM.CUDNN_POINTWISE_GEN_INDEX: [dict(axis=0)],
}

CASES = [(m, p) for m in sorted(po.SUPPORTED_MODES) for p in _PARAMS.get(m, [{}])]


@pytest.mark.parametrize("mode,params", CASES,
                         ids=[f"{m.name[16:]}-{i}" for i, (m, _) in enumerate(CASES)])
def test_mode_matches_reference(rng, mode, params):
    kernel, src = _build(mode, params)
    x, b, c = _inputs(rng, mode, np.float32)
    kind = po.result_kind(mode)
    out = np.full(N, poison_value(np.bool_ if kind == "bool" else np.float32),
                  dtype=np.bool_ if kind == "bool" else np.float32)
    if kind == "bool":
        out[:] = ~np.zeros(N, bool)   # poison: every element True, flipped where the op is False
    kernel[1, N](x, b, c, out)
    operands = [x, b, c.astype(np.float64)][:po.arity(mode)]
    expected = ref.pointwise(mode, *operands, **params)
    if kind == "bool":
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out, expected, err_msg=src)
    else:
        assert_close(out, expected, "float32", name=mode.name)


def test_bool_results_are_not_constant(rng):
    """CMP_LT on values of both signs gives both True and False (the bool path is really exercised)."""
    kernel, _ = _build(PM.CUDNN_POINTWISE_CMP_LT, {})
    x = np.array([-1, 1] * (N // 2), np.float32)
    b = np.zeros(N, np.float32)
    out = np.zeros(N, np.bool_)
    kernel[1, N](x, b, np.zeros(N, np.bool_), out)
    np.testing.assert_array_equal(out, x < 0)


@pytest.mark.parametrize("propagate", [0, 1])
@pytest.mark.parametrize("mode", [PM.CUDNN_POINTWISE_MAX, PM.CUDNN_POINTWISE_MIN,
                                  PM.CUDNN_POINTWISE_RELU_FWD])
def test_nan_propagation(rng, mode, propagate):
    params = dict(nan_propagation=propagate)
    kernel, _ = _build(mode, params)
    x, b, c = _inputs(rng, mode, np.float32)
    x[::3] = np.nan
    b[1::4] = np.nan
    out = np.full(N, np.nan, np.float32)
    kernel[1, N](x, b, c, out)
    operands = [x, b][:po.arity(mode)]
    expected = ref.pointwise(mode, *operands, **params)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    assert_close(out, expected, "float32", name=mode.name)


def test_float32_literals_only():
    """No bare float literal (would be float64) in any expression: every one is wrapped."""
    import re
    for mode in po.SUPPORTED_MODES:
        names = ["r0", "r1", "r2"][:po.arity(mode)]
        text = po.expr(mode, names, dict(relu_upper_clip=3.0, elu_alpha=0.3, softplus_beta=2.0,
                                         swish_beta=2.0, alpha1=2.0, alpha2=0.5))
        stripped = re.sub(r"float32\([^()]*\)", "", text)
        assert not re.search(r"(?<![\w.])\d+\.\d*", stripped), (mode.name, text)


def test_float64_expressions(rng):
    kernel, _ = _build(PM.CUDNN_POINTWISE_GELU_FWD, {}, ftype="float64")
    x, b, c = _inputs(rng, PM.CUDNN_POINTWISE_GELU_FWD, np.float64)
    out = np.full(N, np.nan)
    kernel[1, N](x, b, c, out)
    assert_close(out, ref.pointwise(PM.CUDNN_POINTWISE_GELU_FWD, x), 1e-12)


def test_operand_count_and_params_checked():
    with pytest.raises(ValueError):
        po.expr(PM.CUDNN_POINTWISE_ADD, ["a"])
    with pytest.raises(TypeError):
        po.expr(PM.CUDNN_POINTWISE_ELU_FWD, ["a"], dict(alpha=1.0))
    assert po.lit(math.inf) == "float32(math.inf)"
    assert po.gen_index_axis(dict(axis=-1), 4) == 3


@pytest.mark.parametrize("params", [{}, dict(relu_lower_clip=-0.5, relu_upper_clip=1.0,
                                             relu_lower_clip_slope=0.1)])
def test_relu_bwd_at_the_clips(rng, params):
    """x exactly at the lower / upper clip takes the outer slope (cuDNN: dx = 0 at x == 0)."""
    kernel, src = _build(PM.CUDNN_POINTWISE_RELU_BWD, params)
    lo, hi = params.get("relu_lower_clip", 0.0), params.get("relu_upper_clip", 1.0)
    dy = rng.uniform(0.5, 2.0, N).astype(np.float32)
    x = np.array([lo, hi, lo - 0.25, hi + 0.25] * (N // 4), np.float32)
    out = np.full(N, poison_value(np.float32), np.float32)
    kernel[1, N](dy, x, np.zeros(N, np.bool_), out)
    expected = ref.pointwise(PM.CUDNN_POINTWISE_RELU_BWD, dy, x, **params)
    assert expected[0] == pytest.approx(params.get("relu_lower_clip_slope", 0.0) * dy[0])
    assert_close(out, expected, "float32", name="RELU_BWD")
    if "relu_upper_clip" in params:
        np.testing.assert_array_equal(out[1::4], 0.0, err_msg=src)
    else:
        np.testing.assert_array_equal(out[0::4], 0.0, err_msg=src)
