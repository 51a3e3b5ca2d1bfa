"""Reference for RESAMPLE_FWD / RESAMPLE_BWD (pooling, nearest, bilinear) over 1-3 spatial dims.

Layout x (N, C, *spatial). Per spatial dim, with window w, stride s, paddings pre / post (ints, or
``fractions.Fraction`` / floats for cuDNN's CUDNN_TYPE_FRACTION values, e.g. s = 1/2 upsamples 2x):

    out = floor((in + pre + post - w) / s) + 1          (cuDNN: y_i = 1 + (x_i + pre + post - w) / s)

Output position o's window starts at input coordinate a = o*s - pre (input index i sits at i).
Taps outside [0, in) read the padding (``padding_mode``, cudnnPaddingMode_t): ZERO_PAD 0,
NEG_INF_PAD -inf, EDGE_VAL_PAD the nearest edge element (index clamped).

* MAXPOOL: max over the w taps a .. a+w-1 (a, w must be integers). Also returns ``index``: the
  row-major flattened offset of the winner inside the window (0 .. prod(w)-1; first one on ties),
  int64, y's shape. NaN: NOT_PROPAGATE_NAN [default] ignores NaN taps (NaN only if all are NaN);
  PROPAGATE_NAN gives NaN (index of the first NaN) when any tap is NaN.
* AVGPOOL_INCLUDE_PADDING (== AVGPOOL): sum of the taps (padding values included) / prod(w).
* AVGPOOL_EXCLUDE_PADDING: sum of the in-range taps / their number (0 when there are none);
  padding values never enter, whatever padding_mode.
* NEAREST and BILINEAR evaluate at the window centre c = a + (w-1)/2 (ncudnn's definition; cuDNN
  does not document it): NEAREST takes the tap floor(c + 1/2); BILINEAR (cuDNN requires w = 2)
  mixes taps floor(c) and floor(c)+1 per dim with weights (1 - f, f), f = c - floor(c), the product
  over dims (bilinear / trilinear). With integer s and w = 1 NEAREST is plain subsampling
  x[o*s - pre]. Example: s = 1/2, w = 2, pre = post = 3/4, EDGE_VAL_PAD is 2x upsampling identical
  to PyTorch's bilinear interpolate(scale_factor=2, align_corners=False).

Legacy cudnnPoolingForward / Backward map onto this with pre = post = the descriptor's padding:
CUDNN_POOLING_MAX and MAX_DETERMINISTIC -> MAXPOOL with NEG_INF_PAD (padding never wins),
AVERAGE_COUNT_INCLUDE_PADDING -> AVGPOOL_INCLUDE_PADDING with ZERO_PAD, AVERAGE_COUNT_EXCLUDE_PADDING
-> AVGPOOL_EXCLUDE_PADDING; the output size formula 1 + (in + 2 pad - w) / s is the same.

Backward is the exact adjoint / gradient of the forward: each tap's weight times dy goes to the
tap's input element (for EDGE_VAL_PAD the clamped edge element); taps in ZERO / NEG_INF padding
drop their share. MAXPOOL routes dy to the window winner, taken from ``index`` when given, else
recomputed from ``x``.
"""
from fractions import Fraction
import math

import numpy as np

from ..types import cudnnNanPropagation_t, cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM
from ._util import as_tuple, enum_member, f64

__all__ = ["resample_forward", "resample_backward", "resample_output_shape", "resample_mode"]

_AVG_IN, _AVG_EX = RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING, RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING


def resample_mode(mode):
    """``mode`` (member, int, full or short name) as a cudnnResampleMode_t."""
    return enum_member(RM, mode, "CUDNN_RESAMPLE_")


def _frac(v):
    if isinstance(v, tuple):
        return Fraction(int(v[0]), int(v[1]))
    if isinstance(v, float):
        return Fraction(v).limit_denominator(1 << 16)
    return Fraction(v)


def _geom(nsp, window, stride, pre_pad, post_pad):
    return [tuple(_frac(v) for v in as_tuple(a, nsp, name)) for a, name in (
        (window, "window"), (stride, "stride"), (pre_pad, "pre_pad"), (post_pad, "post_pad"))]


def resample_output_shape(x_shape, window, stride, pre_pad, post_pad):
    """(N, C, *out) with out = floor((in + pre + post - w) / s) + 1 per spatial dim."""
    nsp = len(x_shape) - 2
    w, s, pre, post = _geom(nsp, window, stride, pre_pad, post_pad)
    out = [math.floor((x_shape[2 + i] + pre[i] + post[i] - w[i]) / s[i]) + 1 for i in range(nsp)]
    if min(out) < 1 or min(s) <= 0:
        raise ValueError(f"empty resample output {out}")
    return tuple(x_shape[:2]) + tuple(out)


def _dim_taps(mode, n_in, n_out, w, s, pre):
    """Per output position: tap input positions (O, T) int and weights (O, T)."""
    pos, wt = [], []
    for o in range(n_out):
        a = o * s - pre
        if mode in (RM.CUDNN_RESAMPLE_MAXPOOL, _AVG_IN, _AVG_EX):
            if a.denominator != 1 or w.denominator != 1:
                raise ValueError("pooling needs integer window starts and window sizes")
            pos.append([int(a) + t for t in range(int(w))])
            wt.append([1.0] * int(w))
        else:
            c = a + (w - 1) / 2
            if mode == RM.CUDNN_RESAMPLE_NEAREST:
                pos.append([math.floor(c + Fraction(1, 2))])
                wt.append([1.0])
            else:
                i0 = math.floor(c)
                f = float(c - i0)
                pos.append([i0, i0 + 1])
                wt.append([1.0 - f, f])
    return np.array(pos, dtype=np.int64), np.array(wt)


def _plan(mode, x_shape, window, stride, pre_pad, post_pad, y_shape=None):
    """Flat source index, in-range mask and weight, each (O1, .., OD, T) (taps row-major)."""
    if y_shape is None or mode not in (RM.CUDNN_RESAMPLE_NEAREST, RM.CUDNN_RESAMPLE_BILINEAR):
        y_shape = resample_output_shape(x_shape, window, stride, pre_pad, post_pad)
    y_shape = tuple(int(v) for v in y_shape)
    sp, out = x_shape[2:], y_shape[2:]
    D = len(sp)
    w, s, pre, _ = _geom(D, window, stride, pre_pad, post_pad)
    flat = np.zeros([1] * (2 * D), dtype=np.int64)
    valid = np.ones([1] * (2 * D), dtype=bool)
    weight = np.ones([1] * (2 * D))
    mul = 1
    for d in reversed(range(D)):
        pos, wt = _dim_taps(mode, sp[d], out[d], w[d], s[d], pre[d])
        shape = [1] * (2 * D)
        shape[d], shape[D + d] = pos.shape
        flat = flat + np.clip(pos, 0, sp[d] - 1).reshape(shape) * mul
        valid = valid & ((pos >= 0) & (pos < sp[d])).reshape(shape)
        weight = weight * wt.reshape(shape)
        mul *= sp[d]
    full = tuple(out) + tuple(np.broadcast_shapes(flat.shape, valid.shape, weight.shape)[D:])
    T = int(np.prod(full[D:]))
    return y_shape, [np.broadcast_to(a, full).reshape(tuple(out) + (T,))
                     for a in (flat, valid, weight)], int(np.prod([int(v) for v in w]))


def _tap_values(x, flat, valid, padding_mode):
    N, C = x.shape[:2]
    v = x.reshape(N, C, -1)[:, :, flat]
    if padding_mode == PAD.CUDNN_EDGE_VAL_PAD:
        return v
    return np.where(valid, v, 0.0 if padding_mode == PAD.CUDNN_ZERO_PAD else -np.inf)


def resample_forward(x, mode, window, stride, pre_pad, post_pad, padding_mode=PAD.CUDNN_ZERO_PAD,
                     nan_propagation=cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN, y_shape=None):
    """Resample ``x`` (see module docstring). Returns y, or (y, index) for MAXPOOL.

    ``y_shape`` (NEAREST / BILINEAR only) overrides the formula's output size; positions keep the
    same mapping a = o*s - pre (so a larger y simply continues the sampling grid).
    """
    x = f64(x)
    mode = resample_mode(mode)
    padding_mode = enum_member(PAD, padding_mode, "CUDNN_")
    propagate = enum_member(cudnnNanPropagation_t, nan_propagation, "CUDNN_") == \
        cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN
    y_shape, (flat, valid, weight), wsize = _plan(mode, x.shape, window, stride, pre_pad,
                                                  post_pad, y_shape)
    v = _tap_values(x, flat, valid, padding_mode)
    if mode == RM.CUDNN_RESAMPLE_MAXPOOL:
        nan = np.isnan(v)
        if propagate:
            idx = np.where(nan.any(-1), nan.argmax(-1), np.argmax(np.where(nan, -np.inf, v), -1))
        else:
            idx = np.argmax(np.where(nan, -np.inf, v), axis=-1)
            idx = np.where(nan.all(-1), 0, idx)
        y = np.take_along_axis(v, idx[..., None], axis=-1)[..., 0]
        return y, idx.astype(np.int64)
    if mode == _AVG_IN:
        return v.sum(-1) / wsize
    if mode == _AVG_EX:
        cnt = valid.sum(-1)
        return np.where(valid, v, 0.0).sum(-1) / np.maximum(cnt, 1)
    if mode in (RM.CUDNN_RESAMPLE_NEAREST, RM.CUDNN_RESAMPLE_BILINEAR):
        return np.where(weight != 0, v * weight, 0.0).sum(-1)
    raise ValueError(f"unsupported resample mode {mode!r}")


def resample_backward(dy, mode, window, stride, pre_pad, post_pad, x_shape,
                      padding_mode=PAD.CUDNN_ZERO_PAD, index=None, x=None,
                      nan_propagation=cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN):
    """dx (shape ``x_shape``) from dy; MAXPOOL needs ``index`` (from the forward) or ``x``."""
    dy = f64(dy)
    mode = resample_mode(mode)
    padding_mode = enum_member(PAD, padding_mode, "CUDNN_")
    x_shape = tuple(int(v) for v in x_shape)
    y_shape, (flat, valid, weight), wsize = _plan(mode, x_shape, window, stride, pre_pad,
                                                  post_pad, dy.shape)
    if dy.shape != y_shape:
        raise ValueError(f"dy shape {dy.shape} != resample output shape {y_shape}")
    N, C = x_shape[:2]
    routed = valid if padding_mode != PAD.CUDNN_EDGE_VAL_PAD else np.ones_like(valid)
    if mode == RM.CUDNN_RESAMPLE_MAXPOOL:
        if index is None:
            if x is None:
                raise ValueError("MAXPOOL backward needs index or x")
            index = resample_forward(x, mode, window, stride, pre_pad, post_pad, padding_mode,
                                     nan_propagation)[1]
        coef = (np.arange(flat.shape[-1]) == np.asarray(index)[..., None]).astype(np.float64)
    elif mode == _AVG_IN:
        coef = np.full(dy.shape + (flat.shape[-1],), 1.0 / wsize)
    elif mode == _AVG_EX:
        coef = np.broadcast_to(valid / np.maximum(valid.sum(-1, keepdims=True), 1),
                               dy.shape + valid.shape[-1:])
        routed = valid
    else:
        coef = np.broadcast_to(weight, dy.shape + weight.shape[-1:])
    contrib = np.where(routed, coef * dy[..., None], 0.0).reshape(N, C, -1)
    dx = np.zeros((N, C, int(np.prod(x_shape[2:]))))
    idx = np.broadcast_to(flat, dy.shape[:2] + flat.shape).reshape(N, C, -1)
    np.add.at(dx, (np.arange(N)[:, None, None], np.arange(C)[None, :, None], idx), contrib)
    return dx.reshape(x_shape)
