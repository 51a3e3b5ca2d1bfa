"""Reference for softmax / log-softmax forward and backward, in float64.

``axis`` is an int or a tuple of axes (negatives allowed); the softmax runs jointly over them.
Legacy cudnnSoftmaxForward maps as: CUDNN_SOFTMAX_MODE_INSTANCE -> axis=(1, 2, 3) of NCHW (all but
N), CUDNN_SOFTMAX_MODE_CHANNEL -> axis=1; CUDNN_SOFTMAX_ACCURATE / FAST -> ``softmax`` (the max is
subtracted first, which does not change the exact result), CUDNN_SOFTMAX_LOG -> ``log_softmax``.

    softmax(x)_i     = exp(x_i - m) / sum_j exp(x_j - m),  m = max_j x_j
    log_softmax(x)_i = x_i - m - log(sum_j exp(x_j - m))

Backward from the forward *output* y (as cudnnSoftmaxBackward):
    log=False:  dx = y * (dy - sum_j dy_j y_j)
    log=True (y = log_softmax):  dx = dy - exp(y) * sum_j dy_j
A row that is all -inf gives NaN (0/0), as an unguarded kernel would.
"""
import numpy as np

from ._util import f64

__all__ = ["softmax", "log_softmax", "softmax_backward"]


def _axes(ndim, axis):
    return tuple(sorted({int(a) % ndim for a in np.atleast_1d(axis)}))


def softmax(x, axis):
    """Softmax of ``x`` over ``axis`` (int or tuple); float64, x's shape."""
    x = f64(x)
    ax = _axes(x.ndim, axis)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=ax, keepdims=True))
        return e / e.sum(axis=ax, keepdims=True)


def log_softmax(x, axis):
    """Log-softmax of ``x`` over ``axis`` (int or tuple); float64, x's shape."""
    x = f64(x)
    ax = _axes(x.ndim, axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = x - x.max(axis=ax, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=ax, keepdims=True))


def softmax_backward(y, dy, axis, log=False):
    """dx from the forward output ``y`` and ``dy`` (see module docstring); float64."""
    y, dy = f64(y), f64(dy)
    ax = _axes(y.ndim, axis)
    if log:
        return dy - np.exp(y) * dy.sum(axis=ax, keepdims=True)
    return y * (dy - (dy * y).sum(axis=ax, keepdims=True))
