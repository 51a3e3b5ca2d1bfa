"""Reference for tensor reduction (cudnnReduceTensorOp_t; backend REDUCTION operation), in float64.

``reduction(mode, x, out_shape)`` reduces every axis where ``out_shape`` is 1 and ``x``'s extent is
not; the result has exactly ``out_shape`` (keepdims). ``out_shape`` must have x's rank.

Grouped axes (cuDNN's GQA/MQA special case): where ``out_shape[d]`` is neither 1 nor ``x.shape[d]``
but divides it, axis d is split into ``(out_shape[d], x.shape[d] // out_shape[d])`` and the inner,
contiguous group is reduced, so out index j collects x indices ``j*g .. j*g + g-1`` (g the group).

Ops (over the reduced elements e):
ADD sum e; MUL prod e; MIN min e; MAX max e; AMAX max |e|; AVG sum e / count;
NORM1 sum |e|; NORM2 sqrt(sum e^2); MUL_NO_ZEROS product of the nonzero e (1 when all are zero).
NaN propagates (any NaN among the reduced elements gives NaN).

``reduction_indices`` (cudnnReduceTensor with CUDNN_REDUCE_TENSOR_FLATTENED_INDICES; MIN, MAX and
AMAX only): for each output element, the row-major flattened position of the first extremal
element within the reduced sub-tensor (reduced axes in axis order, a grouped axis contributing its
within-group offset); int64, shape out_shape.
"""
import numpy as np

from ..types import cudnnReduceTensorOp_t as RO
from ._util import enum_member, f64

__all__ = ["reduction", "reduction_mode", "reduction_indices"]


def reduction_mode(mode):
    """``mode`` (member, int, 'CUDNN_REDUCE_TENSOR_ADD' or 'ADD') as a cudnnReduceTensorOp_t."""
    return enum_member(RO, mode, "CUDNN_REDUCE_TENSOR_")


def _split(x, out_shape):
    """Reshape x so each reduced element set lies on its own axes; return (x', axes, final shape)."""
    if len(out_shape) != x.ndim:
        raise ValueError(f"out_shape {tuple(out_shape)} must have x's rank {x.ndim}")
    new_shape, axes = [], []
    for d, (n, m) in enumerate(zip(x.shape, out_shape)):
        if m == n:
            new_shape.append(n)
        elif m == 1:
            axes.append(len(new_shape))
            new_shape.append(n)
        elif m > 0 and n % m == 0:
            new_shape.extend([m, n // m])
            axes.append(len(new_shape) - 1)
        else:
            raise ValueError(f"axis {d}: cannot reduce extent {n} to {m}")
    return x.reshape(new_shape), tuple(axes)


def reduction(mode, x, out_shape):
    """Reduce ``x`` to ``out_shape`` with cudnnReduceTensorOp_t ``mode``; float64, shape out_shape."""
    mode = reduction_mode(mode)
    x = f64(x)
    out_shape = tuple(int(v) for v in out_shape)
    xs, axes = _split(x, out_shape)
    with np.errstate(all="ignore"):
        if mode == RO.CUDNN_REDUCE_TENSOR_ADD:
            r = xs.sum(axis=axes)
        elif mode == RO.CUDNN_REDUCE_TENSOR_MUL:
            r = xs.prod(axis=axes)
        elif mode == RO.CUDNN_REDUCE_TENSOR_MIN:
            r = xs.min(axis=axes) if xs.size else np.full(out_shape, np.inf)
        elif mode == RO.CUDNN_REDUCE_TENSOR_MAX:
            r = xs.max(axis=axes) if xs.size else np.full(out_shape, -np.inf)
        elif mode == RO.CUDNN_REDUCE_TENSOR_AMAX:
            r = np.abs(xs).max(axis=axes)
        elif mode == RO.CUDNN_REDUCE_TENSOR_AVG:
            r = xs.mean(axis=axes)
        elif mode == RO.CUDNN_REDUCE_TENSOR_NORM1:
            r = np.abs(xs).sum(axis=axes)
        elif mode == RO.CUDNN_REDUCE_TENSOR_NORM2:
            r = np.sqrt((xs * xs).sum(axis=axes))
        elif mode == RO.CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS:
            r = np.where(xs == 0, 1.0, xs).prod(axis=axes)
        else:
            raise ValueError(f"unsupported reduction {mode!r}")
    return np.asarray(r, dtype=np.float64).reshape(out_shape)


def reduction_indices(mode, x, out_shape):
    """Flattened index (within the reduced elements) of the MIN / MAX / AMAX winner; int64."""
    mode = reduction_mode(mode)
    x = f64(x)
    out_shape = tuple(int(v) for v in out_shape)
    xs, axes = _split(x, out_shape)
    if mode == RO.CUDNN_REDUCE_TENSOR_AMAX:
        xs = np.abs(xs)
    elif mode == RO.CUDNN_REDUCE_TENSOR_MIN:
        xs = -xs
    elif mode != RO.CUDNN_REDUCE_TENSOR_MAX:
        raise ValueError(f"indices exist only for MIN, MAX and AMAX, not {mode.name}")
    keep = [a for a in range(xs.ndim) if a not in axes]
    moved = np.transpose(xs, keep + list(axes))
    flat = moved.reshape(moved.shape[:len(keep)] + (-1,))
    return np.argmax(flat, axis=-1).astype(np.int64).reshape(out_shape)
