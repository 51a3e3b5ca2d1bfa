"""Reference for every cudnnPointwiseMode_t (the backend POINTWISE operation), in float64.

Operand roles (cuDNN backend / cudnn-frontend conventions):

* unary modes:   ``y = op(alpha1 * x)``
* binary modes:  ``y = op(alpha1 * x, alpha2 * b)``  (x = XDESC / IN_0, b = BDESC / IN_1)
* ``*_BWD`` modes: ``x`` is **dy** (DYDESC, frontend IN_0 "loss") and ``b`` is the **forward input**
  (XDESC, frontend IN_1 "input"); the result is ``dx = dy * f'(b)``. Derivatives are always taken
  with respect to the forward *input* (TANH_BWD and SIGMOID_BWD too, not the forward output).
  alpha1/alpha2 are not defined for these modes and raise if given.
* ``BINARY_SELECT``: ``y = c ? x : b`` where ``c`` is the predicate tensor (TDESC, frontend IN_2),
  true where nonzero.

Binary and ternary operands broadcast numpy-style (a size-1 dim against a size-n dim; cuDNN
requires equal rank, this reference also accepts numpy's rank extension). Outputs are float64
arrays, except comparisons and logical ops, which return bool arrays. IEEE semantics throughout
(x/0 -> +-inf, log(-1) -> nan); no warnings are raised.

Mode definitions (b = second operand, params lower-cased attribute names, defaults in brackets):

* ADD x+b; SUB x-b; MUL x*b; DIV x/b; ADD_SQUARE x + b*b; POW x**b; ATAN2 atan2(x, b)
* MOD C fmod(x, b) (sign of x); FLOOR_MOD x - floor(x/b)*b (sign of b, Python %)
* MAX / MIN: with nan_propagation NOT_PROPAGATE_NAN [default] a NaN operand is ignored
  (CUDA fmax/fmin: max(NaN, 3) = 3, NaN only when both are NaN); with PROPAGATE_NAN any NaN -> NaN.
* ABS CEIL COS EXP FLOOR LOG NEG SIN SQRT TAN ERF: the C math functions; RSQRT 1/sqrt(x);
  RECIPROCAL 1/x; IDENTITY x (only a type conversion in cuDNN).
* RELU_FWD, params relu_lower_clip L [0.0], relu_upper_clip U [+inf, "numeric limit max"],
  relu_lower_clip_slope S [0.0]:  t = x if x >= L else L + S*(x - L);  y = min(t, U).
  NaN input: NOT_PROPAGATE_NAN [default] gives L (as fmaxf(NaN, L) does); PROPAGATE_NAN gives NaN.
* RELU_BWD: dx = dy * (S if x <= L else (0 if x >= U else 1)): at the ties x == L and x == U the
  outer slope is taken (so the default relu passes no gradient at x == 0, as frameworks do).
* TANH_FWD tanh(x); SIGMOID_FWD 1/(1+exp(-x)); ELU_FWD x if x > 0 else elu_alpha*(exp(x)-1)
  [elu_alpha 1.0]; GELU_FWD x*Phi(x) = 0.5x(1+erf(x/sqrt2)) (exact);
  GELU_APPROX_TANH_FWD 0.5x(1+tanh(k(x + 0.044715 x^3))), k = sqrt(2/pi);
  SOFTPLUS_FWD log(1+exp(beta x))/beta [softplus_beta 1.0];
  SWISH_FWD x*sigmoid(beta x) [swish_beta 1.0].
* ``*_BWD``: dy times the exact derivative of the matching FWD function at the forward input
  (ELU_BWD: 1 for x > 0 else alpha*exp(x); GELU_BWD: Phi(x) + x*phi(x);
  GELU_APPROX_TANH_BWD: 0.5(1 + tanh u + k x sech^2(u)(1 + 3c x^2)), u = k(x + c x^3);
  SOFTPLUS_BWD: sigmoid(beta x); SWISH_BWD: s + beta x s (1 - s), s = sigmoid(beta x)).
* CMP_EQ/NEQ/GT/GE/LT/LE: x op b as bool (IEEE: any comparison with NaN is False except NEQ).
* LOGICAL_AND/OR: (x != 0) and/or (b != 0); LOGICAL_NOT: x == 0.
* GEN_INDEX: y[i_0..i_n] = i_axis as float64 (output has x's shape) [axis -1; numpy negatives ok].
"""
import math

import numpy as np

from ..types import cudnnNanPropagation_t, cudnnPointwiseMode_t as PM
from ._util import enum_member, f64

__all__ = ["pointwise", "POINTWISE_ARITY", "pointwise_mode"]

_UNARY = {
    PM.CUDNN_POINTWISE_ABS, PM.CUDNN_POINTWISE_CEIL, PM.CUDNN_POINTWISE_COS, PM.CUDNN_POINTWISE_EXP,
    PM.CUDNN_POINTWISE_FLOOR, PM.CUDNN_POINTWISE_LOG, PM.CUDNN_POINTWISE_NEG,
    PM.CUDNN_POINTWISE_RSQRT, PM.CUDNN_POINTWISE_SIN, PM.CUDNN_POINTWISE_SQRT,
    PM.CUDNN_POINTWISE_TAN, PM.CUDNN_POINTWISE_ERF, PM.CUDNN_POINTWISE_IDENTITY,
    PM.CUDNN_POINTWISE_RECIPROCAL, PM.CUDNN_POINTWISE_RELU_FWD, PM.CUDNN_POINTWISE_TANH_FWD,
    PM.CUDNN_POINTWISE_SIGMOID_FWD, PM.CUDNN_POINTWISE_ELU_FWD, PM.CUDNN_POINTWISE_GELU_FWD,
    PM.CUDNN_POINTWISE_SOFTPLUS_FWD, PM.CUDNN_POINTWISE_SWISH_FWD,
    PM.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, PM.CUDNN_POINTWISE_LOGICAL_NOT,
    PM.CUDNN_POINTWISE_GEN_INDEX,
}
_BWD = {
    PM.CUDNN_POINTWISE_RELU_BWD, PM.CUDNN_POINTWISE_TANH_BWD, PM.CUDNN_POINTWISE_SIGMOID_BWD,
    PM.CUDNN_POINTWISE_ELU_BWD, PM.CUDNN_POINTWISE_GELU_BWD, PM.CUDNN_POINTWISE_SOFTPLUS_BWD,
    PM.CUDNN_POINTWISE_SWISH_BWD, PM.CUDNN_POINTWISE_GELU_APPROX_TANH_BWD,
}
_BOOL = {
    PM.CUDNN_POINTWISE_CMP_EQ, PM.CUDNN_POINTWISE_CMP_NEQ, PM.CUDNN_POINTWISE_CMP_GT,
    PM.CUDNN_POINTWISE_CMP_GE, PM.CUDNN_POINTWISE_CMP_LT, PM.CUDNN_POINTWISE_CMP_LE,
    PM.CUDNN_POINTWISE_LOGICAL_AND, PM.CUDNN_POINTWISE_LOGICAL_OR, PM.CUDNN_POINTWISE_LOGICAL_NOT,
}

#: Number of tensor operands each mode takes (1, 2 or 3).
POINTWISE_ARITY = {m: (1 if m in _UNARY else 3 if m == PM.CUDNN_POINTWISE_BINARY_SELECT else 2)
                   for m in PM}

_PARAMS = {"relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "elu_alpha",
           "softplus_beta", "swish_beta", "axis", "nan_propagation", "alpha1", "alpha2"}

_K = math.sqrt(2.0 / math.pi)
_C = 0.044715


def pointwise_mode(mode):
    """``mode`` (member, int, 'CUDNN_POINTWISE_ADD' or 'ADD') as a cudnnPointwiseMode_t."""
    return enum_member(PM, mode, "CUDNN_POINTWISE_")


def _sigmoid(x):
    # exp of -|x| only: no overflow for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if np.size(x) else np.asarray(x, float)


def _phi_cdf(x):
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))


def _softplus(z):
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def _relu_fwd(x, lo, hi, slope, propagate):
    t = np.where(x >= lo, x, lo + slope * (x - lo))
    t = np.minimum(t, hi)
    if not propagate:
        t = np.where(np.isnan(x), lo, t)
    return t


def _fwd_deriv(mode, x, p):
    """f'(x) for the forward function matching a *_BWD mode."""
    if mode == PM.CUDNN_POINTWISE_RELU_BWD:
        lo, hi, slope = p["relu_lower_clip"], p["relu_upper_clip"], p["relu_lower_clip_slope"]
        return np.where(x <= lo, slope, np.where(x >= hi, 0.0, 1.0))
    if mode == PM.CUDNN_POINTWISE_TANH_BWD:
        return 1.0 - np.tanh(x) ** 2
    if mode == PM.CUDNN_POINTWISE_SIGMOID_BWD:
        s = _sigmoid(x)
        return s * (1.0 - s)
    if mode == PM.CUDNN_POINTWISE_ELU_BWD:
        return np.where(x > 0, 1.0, p["elu_alpha"] * np.exp(np.minimum(x, 0.0)))
    if mode == PM.CUDNN_POINTWISE_GELU_BWD:
        return _phi_cdf(x) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    if mode == PM.CUDNN_POINTWISE_GELU_APPROX_TANH_BWD:
        u = _K * (x + _C * x ** 3)
        t = np.tanh(u)
        return 0.5 * (1.0 + t + _K * x * (1.0 - t * t) * (1.0 + 3.0 * _C * x * x))
    if mode == PM.CUDNN_POINTWISE_SOFTPLUS_BWD:
        return _sigmoid(p["softplus_beta"] * x)
    if mode == PM.CUDNN_POINTWISE_SWISH_BWD:
        beta = p["swish_beta"]
        s = _sigmoid(beta * x)
        return s + beta * x * s * (1.0 - s)
    raise AssertionError(mode)


def _unary(mode, x, p):
    propagate = p["nan_propagation"] == cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN
    table = {
        PM.CUDNN_POINTWISE_ABS: np.abs, PM.CUDNN_POINTWISE_CEIL: np.ceil,
        PM.CUDNN_POINTWISE_COS: np.cos, PM.CUDNN_POINTWISE_EXP: np.exp,
        PM.CUDNN_POINTWISE_FLOOR: np.floor, PM.CUDNN_POINTWISE_LOG: np.log,
        PM.CUDNN_POINTWISE_NEG: np.negative, PM.CUDNN_POINTWISE_SIN: np.sin,
        PM.CUDNN_POINTWISE_SQRT: np.sqrt, PM.CUDNN_POINTWISE_TAN: np.tan,
        PM.CUDNN_POINTWISE_ERF: _erf, PM.CUDNN_POINTWISE_IDENTITY: lambda v: v.copy(),
        PM.CUDNN_POINTWISE_RSQRT: lambda v: 1.0 / np.sqrt(v),
        PM.CUDNN_POINTWISE_RECIPROCAL: lambda v: 1.0 / v,
        PM.CUDNN_POINTWISE_TANH_FWD: np.tanh, PM.CUDNN_POINTWISE_SIGMOID_FWD: _sigmoid,
        PM.CUDNN_POINTWISE_LOGICAL_NOT: lambda v: v == 0,
    }
    if mode in table:
        return table[mode](x)
    if mode == PM.CUDNN_POINTWISE_RELU_FWD:
        return _relu_fwd(x, p["relu_lower_clip"], p["relu_upper_clip"],
                         p["relu_lower_clip_slope"], propagate)
    if mode == PM.CUDNN_POINTWISE_ELU_FWD:
        return np.where(x > 0, x, p["elu_alpha"] * np.expm1(np.minimum(x, 0.0)))
    if mode == PM.CUDNN_POINTWISE_GELU_FWD:
        return x * _phi_cdf(x)
    if mode == PM.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD:
        return 0.5 * x * (1.0 + np.tanh(_K * (x + _C * x ** 3)))
    if mode == PM.CUDNN_POINTWISE_SOFTPLUS_FWD:
        beta = p["softplus_beta"]
        return _softplus(beta * x) / beta
    if mode == PM.CUDNN_POINTWISE_SWISH_FWD:
        return x * _sigmoid(p["swish_beta"] * x)
    if mode == PM.CUDNN_POINTWISE_GEN_INDEX:
        axis = p["axis"] % x.ndim
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        return np.broadcast_to(np.arange(x.shape[axis], dtype=np.float64).reshape(shape),
                               x.shape).copy()
    raise AssertionError(mode)


def _binary(mode, x, b, p):
    propagate = p["nan_propagation"] == cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN
    table = {
        PM.CUDNN_POINTWISE_ADD: np.add, PM.CUDNN_POINTWISE_SUB: np.subtract,
        PM.CUDNN_POINTWISE_MUL: np.multiply, PM.CUDNN_POINTWISE_DIV: np.divide,
        PM.CUDNN_POINTWISE_ADD_SQUARE: lambda u, v: u + v * v,
        PM.CUDNN_POINTWISE_POW: np.power, PM.CUDNN_POINTWISE_ATAN2: np.arctan2,
        PM.CUDNN_POINTWISE_MOD: np.fmod,
        PM.CUDNN_POINTWISE_FLOOR_MOD: lambda u, v: u - np.floor(u / v) * v,
        PM.CUDNN_POINTWISE_MAX: np.maximum if propagate else np.fmax,
        PM.CUDNN_POINTWISE_MIN: np.minimum if propagate else np.fmin,
        PM.CUDNN_POINTWISE_CMP_EQ: np.equal, PM.CUDNN_POINTWISE_CMP_NEQ: np.not_equal,
        PM.CUDNN_POINTWISE_CMP_GT: np.greater, PM.CUDNN_POINTWISE_CMP_GE: np.greater_equal,
        PM.CUDNN_POINTWISE_CMP_LT: np.less, PM.CUDNN_POINTWISE_CMP_LE: np.less_equal,
        PM.CUDNN_POINTWISE_LOGICAL_AND: lambda u, v: (u != 0) & (v != 0),
        PM.CUDNN_POINTWISE_LOGICAL_OR: lambda u, v: (u != 0) | (v != 0),
    }
    if mode in table:
        x, b = np.broadcast_arrays(x, b)
        return np.asarray(table[mode](x, b))
    if mode in _BWD:
        dy, xin = np.broadcast_arrays(x, b)
        return dy * _fwd_deriv(mode, xin, p)
    raise AssertionError(mode)


def pointwise(mode, x, b=None, c=None, **params):
    """Apply cudnnPointwiseMode_t ``mode`` (see the module docstring for every definition).

    ``x``, ``b``, ``c`` are array-likes of any float dtype (bfloat16 included); computed in float64.
    Params: relu_lower_clip, relu_upper_clip, relu_lower_clip_slope, elu_alpha, softplus_beta,
    swish_beta, axis (GEN_INDEX), nan_propagation (cudnnNanPropagation_t member, int or name),
    alpha1, alpha2 (the descriptor's operand scales, forward/math modes only).
    Returns float64 (bool for comparisons and logical modes), shape = broadcast of the operands.
    """
    mode = pointwise_mode(mode)
    unknown = set(params) - _PARAMS
    if unknown:
        raise TypeError(f"unknown pointwise params {sorted(unknown)}")
    p = dict(relu_lower_clip=0.0, relu_upper_clip=np.inf, relu_lower_clip_slope=0.0,
             elu_alpha=1.0, softplus_beta=1.0, swish_beta=1.0, axis=-1, alpha1=1.0, alpha2=1.0,
             nan_propagation=cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN)
    p.update(params)
    p["nan_propagation"] = enum_member(cudnnNanPropagation_t, p["nan_propagation"], "CUDNN_")
    arity = POINTWISE_ARITY[mode]
    given = [v is not None for v in (x, b, c)]
    if given != [True] * arity + [False] * (3 - arity):
        raise ValueError(f"{mode.name} takes {arity} operand(s)")
    if mode in _BWD and ("alpha1" in params or "alpha2" in params):
        raise ValueError(f"alpha1/alpha2 are not defined for {mode.name}")
    x = f64(x)
    with np.errstate(all="ignore"):
        if mode == PM.CUDNN_POINTWISE_BINARY_SELECT:
            x, b, c = np.broadcast_arrays(x, f64(b), f64(c))
            return np.where(c != 0, x, b)
        if mode not in _BWD:
            x = p["alpha1"] * x
        if arity == 1:
            return np.asarray(_unary(mode, x, p))
        b = f64(b)
        if mode not in _BWD:
            b = p["alpha2"] * b
        return _binary(mode, x, b, p)
