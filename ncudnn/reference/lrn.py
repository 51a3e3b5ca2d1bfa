"""Reference for cudnnLRNCrossChannelForward / Backward (CUDNN_LRN_CROSS_CHANNEL_DIM1).

x (N, C, *spatial); window of n channels around c: j in [c - lb, c + la] with lb = floor((n-1)/2),
la = n - 1 - lb (for n = 4: [c-1, c+2]); channels outside [0, C) contribute 0. With
D_c = k + (alpha / n) * sum_{j in window(c)} x_j^2  (cuDNN divides lrnAlpha by the window width):

    y_c = x_c * D_c^(-beta)
    dx_i = dy_i * D_i^(-beta) - (2 * alpha * beta / n) * x_i * sum_{c : i in window(c)} dy_c x_c D_c^(-beta-1)
"""
import numpy as np

from ._util import f64

__all__ = ["lrn_forward", "lrn_backward"]


def _window_sum(v, n):
    """sum over the channel window of v (axis 1), zero outside."""
    lb = (n - 1) // 2
    la = n - 1 - lb
    C = v.shape[1]
    pad = np.zeros_like(v[:, :1])
    vp = np.concatenate([pad.repeat(lb, 1), v, pad.repeat(la, 1)], axis=1)
    c = np.concatenate([pad, np.cumsum(vp, axis=1)], axis=1)
    return c[:, n:n + C] - c[:, :C]


def _window_sum_adjoint(v, n):
    """out_i = sum over the channels c whose window contains i of v_c (transpose of _window_sum)."""
    lb = (n - 1) // 2
    la = n - 1 - lb
    C = v.shape[1]
    out = np.zeros_like(v)
    for c in range(C):
        lo, hi = max(0, c - lb), min(C - 1, c + la)
        out[:, lo:hi + 1] += v[:, c:c + 1]
    return out


def lrn_forward(x, n, alpha, beta, k):
    """y = x * (k + alpha/n * window-sum of x^2)^-beta over channels; float64."""
    x = f64(x)
    d = k + (alpha / n) * _window_sum(x * x, int(n))
    return x * d ** (-beta)


def lrn_backward(x, dy, n, alpha, beta, k):
    """dx of lrn_forward (from x and dy; y is recomputed); float64."""
    x, dy = f64(x), f64(dy)
    n = int(n)
    d = k + (alpha / n) * _window_sum(x * x, n)
    t = _window_sum_adjoint(dy * x * d ** (-beta - 1.0), n)
    return dy * d ** (-beta) - (2.0 * alpha * beta / n) * x * t
