"""Reference for the legacy (v7-style) tensor ops: blending, OpTensor, AddTensor, ScaleTensor,
activation forward / backward, ConvolutionBiasActivationForward and ConvolutionBackwardBias.

Every legacy call blends: ``out = alpha * result + beta * out_prior`` (``blend``); with beta == 0
the prior content is ignored entirely, so NaN there does not propagate (cuDNN's documented rule).

* op_tensor: C = op(alpha1 * A, alpha2 * B) + beta * C_prior; B broadcasts to A / C (size-1 dims).
  ADD, MUL, MIN, MAX binary; SQRT sqrt(alpha1 * A) and NOT 1 - alpha1 * A (only A is read; cuDNN
  calls NOT "negation", ncudnn takes the complement 1 - a, which is logical NOT on 0/1 data).
* add_tensor: C = alpha * A + beta * C_prior, A broadcast to C (the bias-add).
* activation (cudnnActivationMode_t, ``coef`` from the descriptor):
  SIGMOID, RELU (max(x, 0)), TANH, CLIPPED_RELU min(max(x, 0), coef), ELU (alpha = coef),
  IDENTITY, SWISH x * sigmoid(coef * x) (coef = swish beta, cudnnSetActivationDescriptorSwishBeta).
  Backward takes (y, dy, x) like cudnnActivationBackward and returns dy * f'(x) (equal to the
  y-based formulas when y = f(x)); at the kinks x == 0 / x == coef the slope is taken as 0.
  NaN input to RELU / CLIPPED_RELU: NOT_PROPAGATE_NAN [default] gives 0, PROPAGATE_NAN gives NaN.
* conv_bias_activation_forward: y = act(alpha1 * conv(x, w) + alpha2 * z + bias); the activation
  is RELU or IDENTITY (cuDNN's restriction; CLIPPED_RELU etc. also computed here).
* conv_backward_bias: db = sum of dy over every axis but 1 (shape [1, K, 1, ...]).
* dropout: y = x * keep / (1 - p), dx = dy * keep / (1 - p) with keep a 0/1 mask; ncudnn draws
  keep like the SDPA dropout, as rng_generate(x.shape, BERNOULLI, seed, offset,
  bernoulli_probability=1 - p) (cuDNN's own dropout states are opaque, so any mask is legal).
"""
import numpy as np

from ..types import cudnnActivationMode_t as AM, cudnnNanPropagation_t, cudnnOpTensorOp_t as OT
from . import pointwise as _pw
from .conv import conv_fprop
from ._util import enum_member, f64

__all__ = ["blend", "op_tensor", "add_tensor", "scale_tensor", "activation_forward",
           "activation_backward", "conv_bias_activation_forward", "conv_backward_bias",
           "dropout_forward", "dropout_backward"]


def blend(result, alpha=1.0, beta=0.0, prior=None):
    """alpha * result + beta * prior (prior ignored when beta == 0, even if NaN); float64."""
    r = alpha * f64(result)
    if beta == 0 or prior is None:
        return r
    return r + beta * f64(prior)


def op_tensor(op, a, b=None, alpha1=1.0, alpha2=1.0, beta=0.0, c_prior=None):
    """cudnnOpTensor; result has A's shape (B broadcast to it)."""
    op = enum_member(OT, op, "CUDNN_OP_TENSOR_")
    a = alpha1 * f64(a)
    with np.errstate(invalid="ignore"):
        if op == OT.CUDNN_OP_TENSOR_SQRT:
            r = np.sqrt(a)
        elif op == OT.CUDNN_OP_TENSOR_NOT:
            r = 1.0 - a
        else:
            bb = np.broadcast_to(alpha2 * f64(b), a.shape)
            r = {OT.CUDNN_OP_TENSOR_ADD: np.add, OT.CUDNN_OP_TENSOR_MUL: np.multiply,
                 OT.CUDNN_OP_TENSOR_MIN: np.minimum, OT.CUDNN_OP_TENSOR_MAX: np.maximum}[op](a, bb)
    return blend(r, 1.0, beta, c_prior)


def add_tensor(a, c_prior, alpha=1.0, beta=1.0):
    """cudnnAddTensor: C = alpha * A + beta * C_prior, A broadcast to C's shape."""
    c = f64(c_prior)
    return blend(np.broadcast_to(f64(a), c.shape), alpha, beta, c)


def scale_tensor(y, alpha):
    """cudnnScaleTensor: y * alpha."""
    return alpha * f64(y)


def _pw_params(mode, coef, nan_propagation):
    prop = enum_member(cudnnNanPropagation_t, nan_propagation, "CUDNN_")
    table = {
        AM.CUDNN_ACTIVATION_SIGMOID: ("SIGMOID", {}),
        AM.CUDNN_ACTIVATION_RELU: ("RELU", {"nan_propagation": prop}),
        AM.CUDNN_ACTIVATION_TANH: ("TANH", {}),
        AM.CUDNN_ACTIVATION_CLIPPED_RELU: ("RELU", {"nan_propagation": prop,
                                                    "relu_upper_clip": coef}),
        AM.CUDNN_ACTIVATION_ELU: ("ELU", {"elu_alpha": coef}),
        AM.CUDNN_ACTIVATION_SWISH: ("SWISH", {"swish_beta": coef}),
    }
    return table[mode]


def activation_forward(mode, x, coef=0.0, alpha=1.0, beta=0.0, y_prior=None,
                       nan_propagation=cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN):
    """cudnnActivationForward: y = alpha * act(x) + beta * y_prior."""
    mode = enum_member(AM, mode, "CUDNN_ACTIVATION_")
    x = f64(x)
    if mode == AM.CUDNN_ACTIVATION_IDENTITY:
        return blend(x, alpha, beta, y_prior)
    name, p = _pw_params(mode, coef, nan_propagation)
    return blend(_pw.pointwise(name + "_FWD", x, **p), alpha, beta, y_prior)


def activation_backward(mode, y, dy, x, coef=0.0, alpha=1.0, beta=0.0, dx_prior=None,
                        nan_propagation=cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN):
    """cudnnActivationBackward: dx = alpha * dy * act'(x) + beta * dx_prior (y is not needed)."""
    mode = enum_member(AM, mode, "CUDNN_ACTIVATION_")
    dy, x = f64(dy), f64(x)
    if mode == AM.CUDNN_ACTIVATION_IDENTITY:
        return blend(dy, alpha, beta, dx_prior)
    if mode in (AM.CUDNN_ACTIVATION_RELU, AM.CUDNN_ACTIVATION_CLIPPED_RELU):
        hi = np.inf if mode == AM.CUDNN_ACTIVATION_RELU else coef
        return blend(np.where((x > 0) & (x < hi), dy, 0.0), alpha, beta, dx_prior)
    name, p = _pw_params(mode, coef, nan_propagation)
    return blend(_pw.pointwise(name + "_BWD", dy, x, **p), alpha, beta, dx_prior)


def conv_bias_activation_forward(x, w, z, bias, act_mode, *, alpha1=1.0, alpha2=0.0, coef=0.0,
                                 **conv_kw):
    """y = act(alpha1 * conv(x, w) + alpha2 * z + bias); conv_kw as conv_fprop's keywords."""
    t = alpha1 * conv_fprop(x, w, **conv_kw)
    if alpha2 != 0:
        t = t + alpha2 * f64(z)
    b = f64(bias)
    t = t + b.reshape((1, -1) + (1,) * (t.ndim - 2))
    return activation_forward(act_mode, t, coef=coef)


def conv_backward_bias(dy):
    """cudnnConvolutionBackwardBias: db[1, K, 1, ...] = sum of dy over all axes but 1."""
    dy = f64(dy)
    return dy.sum(axis=tuple(i for i in range(dy.ndim) if i != 1), keepdims=True)


def dropout_forward(x, keep, p):
    """cudnnDropoutForward given the keep mask: y = x * keep / (1 - p)."""
    return f64(x) * f64(keep) / (1.0 - p)


def dropout_backward(dy, keep, p):
    """cudnnDropoutBackward given the same keep mask: dx = dy * keep / (1 - p)."""
    return f64(dy) * f64(keep) / (1.0 - p)
