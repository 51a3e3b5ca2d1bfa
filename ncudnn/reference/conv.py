"""Reference for convolution forward, data-gradient and weight-gradient (1-3 spatial dims), float64.

Layouts are logical NC[D]HW: x (N, C, *spatial), w (K, C // groups, *filter), y (N, K, *out).
cuDNN semantics (CROSS_CORRELATION mode, the default in every framework):

    y[n, k, o] = sum_{c in group(k), f} w[k, c', f] * xpad[n, c, o*stride + f*dilation]

with xpad x padded by ``pre_pad`` zeros in front and ``post_pad`` zeros behind on every spatial dim,
``c' = c - g*C/G`` the channel inside k's group g = k // (K/G), and per spatial dim

    out = floor((in + pre + post - ((filter - 1) * dilation + 1)) / stride) + 1.

CONVOLUTION mode (``cross_correlation=False``) is the same with the filter flipped on every spatial
dim (w[k, c, F-1-f]). ``conv_dgrad`` and ``conv_wgrad`` are the exact adjoints of ``conv_fprop``:
<fprop(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x, dy)>; input positions that no output window
touches (trailing rows dropped by the floor) get zero gradient.

stride / pre_pad / post_pad / dilation: an int (all dims) or one value per spatial dim; paddings
>= 0, strides and dilations >= 1.
"""
import numpy as np

from ._util import as_tuple, f64

__all__ = ["conv_fprop", "conv_dgrad", "conv_wgrad", "conv_output_shape"]


def _params(nsp, stride, pre_pad, post_pad, dilation):
    p = [tuple(int(v) for v in as_tuple(a, nsp, name)) for a, name in (
        (stride, "stride"), (pre_pad, "pre_pad"), (post_pad, "post_pad"), (dilation, "dilation"))]
    if min(p[0]) < 1 or min(p[3]) < 1 or min(p[1]) < 0 or min(p[2]) < 0:
        raise ValueError("strides/dilations must be >= 1 and paddings >= 0")
    return p


def conv_output_shape(x_shape, w_shape, *, stride=1, pre_pad=0, post_pad=0, dilation=1, groups=1):
    """(N, K, *out) for conv_fprop with these shapes; raises ValueError on inconsistent shapes."""
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    nsp = len(x_shape) - 2
    if nsp not in (1, 2, 3) or len(w_shape) != len(x_shape):
        raise ValueError(f"x {x_shape} / w {w_shape}: need 1-3 spatial dims and equal rank")
    N, C = x_shape[:2]
    K, Cg = w_shape[:2]
    if C % groups or K % groups or Cg != C // groups:
        raise ValueError(f"channels: x C={C}, w {w_shape}, groups={groups}")
    s, pre, post, d = _params(nsp, stride, pre_pad, post_pad, dilation)
    out = []
    for i in range(nsp):
        span = (w_shape[2 + i] - 1) * d[i] + 1
        o = (x_shape[2 + i] + pre[i] + post[i] - span) // s[i] + 1
        if o < 1:
            raise ValueError(f"spatial dim {i}: empty output")
        out.append(o)
    return (N, K) + tuple(out)


def _setup(x_shape, w_shape, stride, pre_pad, post_pad, dilation, groups):
    y_shape = conv_output_shape(x_shape, w_shape, stride=stride, pre_pad=pre_pad,
                                post_pad=post_pad, dilation=dilation, groups=groups)
    nsp = len(x_shape) - 2
    s, pre, post, d = _params(nsp, stride, pre_pad, post_pad, dilation)
    out = y_shape[2:]

    def tap_slice(tap):
        return tuple(slice(t * d[i], t * d[i] + s[i] * (out[i] - 1) + 1, s[i])
                     for i, t in enumerate(tap))
    return y_shape, pre, post, tap_slice


def _grouped_w(w, groups, cross_correlation):
    nsp = w.ndim - 2
    if not cross_correlation:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nsp]
    K = w.shape[0]
    return w.reshape((groups, K // groups) + w.shape[1:])


def conv_fprop(x, w, *, stride=1, pre_pad=0, post_pad=0, dilation=1, groups=1,
               cross_correlation=True):
    """y = conv(x, w) as in the module docstring; float64 (N, K, *out)."""
    x, w = f64(x), f64(w)
    y_shape, pre, post, tap_slice = _setup(x.shape, w.shape, stride, pre_pad, post_pad,
                                           dilation, groups)
    N, C = x.shape[:2]
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pre, post)))
    xg = xp.reshape((N, groups, C // groups) + xp.shape[2:])
    wg = _grouped_w(w, groups, cross_correlation)
    y = np.zeros((N, groups, w.shape[0] // groups) + y_shape[2:])
    for tap in np.ndindex(*w.shape[2:]):
        xs = xg[(Ellipsis,) + tap_slice(tap)]
        y += np.einsum("ngc...,gkc->ngk...", xs, wg[(Ellipsis,) + tap])
    return y.reshape(y_shape)


def conv_dgrad(dy, w, x_shape, *, stride=1, pre_pad=0, post_pad=0, dilation=1, groups=1,
               cross_correlation=True):
    """dx = adjoint of conv_fprop in x, for an x of shape ``x_shape``; float64."""
    dy, w = f64(dy), f64(w)
    x_shape = tuple(int(v) for v in x_shape)
    y_shape, pre, post, tap_slice = _setup(x_shape, w.shape, stride, pre_pad, post_pad,
                                           dilation, groups)
    if dy.shape != y_shape:
        raise ValueError(f"dy shape {dy.shape} != conv output shape {y_shape}")
    N, C = x_shape[:2]
    padded = tuple(n + a + b for n, a, b in zip(x_shape[2:], pre, post))
    dxp = np.zeros((N, groups, C // groups) + padded)
    dyg = dy.reshape((N, groups, w.shape[0] // groups) + y_shape[2:])
    wg = _grouped_w(w, groups, cross_correlation)
    for tap in np.ndindex(*w.shape[2:]):
        dxp[(Ellipsis,) + tap_slice(tap)] += np.einsum("ngk...,gkc->ngc...", dyg,
                                                       wg[(Ellipsis,) + tap])
    crop = tuple(slice(a, a + n) for a, n in zip(pre, x_shape[2:]))
    return dxp.reshape((N, C) + padded)[(slice(None), slice(None)) + crop].copy()


def conv_wgrad(x, dy, w_shape, *, stride=1, pre_pad=0, post_pad=0, dilation=1, groups=1,
               cross_correlation=True):
    """dw = adjoint of conv_fprop in w, for a w of shape ``w_shape``; float64."""
    x, dy = f64(x), f64(dy)
    w_shape = tuple(int(v) for v in w_shape)
    y_shape, pre, post, tap_slice = _setup(x.shape, w_shape, stride, pre_pad, post_pad,
                                           dilation, groups)
    if dy.shape != y_shape:
        raise ValueError(f"dy shape {dy.shape} != conv output shape {y_shape}")
    N, C = x.shape[:2]
    K = w_shape[0]
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pre, post)))
    xg = xp.reshape((N, groups, C // groups) + xp.shape[2:])
    dyg = dy.reshape((N, groups, K // groups) + y_shape[2:])
    dwg = np.zeros((groups, K // groups, C // groups) + w_shape[2:])
    for tap in np.ndindex(*w_shape[2:]):
        xs = xg[(Ellipsis,) + tap_slice(tap)]
        dwg[(Ellipsis,) + tap] = np.einsum("ngcp,ngkp->gkc", xs.reshape(xs.shape[:3] + (-1,)),
                                           dyg.reshape(dyg.shape[:3] + (-1,)))
    dw = dwg.reshape(w_shape)
    if not cross_correlation:
        dw = dw[(slice(None), slice(None)) + (slice(None, None, -1),) * (len(w_shape) - 2)].copy()
    return dw
