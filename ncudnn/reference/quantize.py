"""Reference for BLOCK_SCALE_QUANTIZE / BLOCK_SCALE_DEQUANTIZE (MX and NVFP4-style block scaling).

``x`` is split along ``axis`` into blocks of ``block_size`` consecutive elements (the extent must
be a multiple). ``elem_dtype`` names the element format: 'float8_e4m3fn', 'float8_e5m2',
'float4_e2m1fn', 'float6_e2m3fn', 'float6_e3m2fn' (ml_dtypes names). Per block, amax = max |x|:

* scale_format 'e8m0' (OCP Microscaling v1.0, MXFP8 / MXFP6 / MXFP4, block 32):
  scale = 2^clamp(floor(log2(amax)) - emax_elem, -127, 127), emax_elem = floor(log2(max finite))
  of the element format (e4m3 8, e5m2 15, e2m1 2, e2m3 2, e3m2 4); an all-zero block has scale 2^-127.
* scale_format 'e4m3' (NVFP4-style, block 16): scale = float8_e4m3fn(amax / max finite of the
  element format) (round-to-nearest-even); a zero scale (all-zero block) stays 0.

Elements: q = elem_dtype(clamp(x / scale, -max, max)) with round-to-nearest-even (saturating;
a zero scale gives q = 0). Dequantize: y = q * scale (scale repeated over its block).
Returns float64 arrays holding exactly representable values: q (x's shape) and scale (x's shape
with ``axis`` divided by block_size).
"""
import ml_dtypes
import numpy as np

from ._util import f64

__all__ = ["block_scale_quantize", "block_scale_dequantize"]


def _fmt(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    return dt, float(ml_dtypes.finfo(dt).max)


def _blocks(a, axis, block_size):
    axis = axis % a.ndim
    n = a.shape[axis]
    if n % block_size:
        raise ValueError(f"extent {n} of axis {axis} is not a multiple of block_size {block_size}")
    return a.reshape(a.shape[:axis] + (n // block_size, block_size) + a.shape[axis + 1:]), axis


def block_scale_quantize(x, block_size, elem_dtype="float8_e4m3fn", axis=-1, scale_format="e8m0"):
    """-> (q, scale) as float64; see module docstring."""
    x = f64(x)
    dt, vmax = _fmt(elem_dtype)
    xb, axis = _blocks(x, axis, int(block_size))
    amax = np.abs(xb).max(axis=axis + 1, keepdims=True)
    if scale_format == "e8m0":
        emax = np.floor(np.log2(vmax))
        with np.errstate(divide="ignore"):
            e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - emax, -127)
        scale = np.exp2(np.clip(e, -127, 127))
    elif scale_format == "e4m3":
        scale = (amax / vmax).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    else:
        raise ValueError(f"scale_format {scale_format!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(scale > 0, xb / np.where(scale > 0, scale, 1.0), 0.0)
    q = np.clip(r, -vmax, vmax).astype(dt).astype(np.float64)
    return q.reshape(x.shape), np.squeeze(scale, axis=axis + 1)


def block_scale_dequantize(q, scale, block_size, axis=-1):
    """y = q * scale, each scale entry covering block_size consecutive elements along ``axis``."""
    q, scale = f64(q), f64(scale)
    axis = axis % q.ndim
    return q * np.repeat(scale, int(block_size), axis=axis)
