"""The strided reduction's description and launch shape: :class:`Term` and :class:`ReduceSpec`, the layout
(kept and reduced dims, contiguous neighbours merged) and the automatic choices of kernel (row, column or
vector row), block, split and unroll the launcher makes for a spec (knobs given in the spec win).
"""
import math
from dataclasses import dataclass

import numpy as np

from ..runtime.dtypes import storage_dtype
from ..primitives.warp import SIM, sm_count

__all__ = ["COMBINE", "INIT", "Term", "ReduceSpec", "layout", "numel", "ROW_MIN_REDUCED", "is_row", "choose",
           "two_level", "vec_width", "choose_vec", "BLOCK_COMBINE_MAX_OUT", "bcombine_threads"]

COMBINE = {
    "sum": "({a} + {b})",
    "prod": "({a} * {b})",
    "max": "({a} if ({a} != {a} or {a} >= {b}) else {b})",   # NaN propagates
    "min": "({a} if ({a} != {a} or {a} <= {b}) else {b})",
}
INIT = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}


@dataclass(frozen=True)
class Term:
    """``acc = combine over elements of pre(v0, v1, ...)``; output = ``final(acc, cnt)``."""
    pre: str
    combine: str
    final: str = "acc"
    init: float = None

    def init_value(self):
        return INIT[self.combine] if self.init is None else self.init


@dataclass(frozen=True)
class ReduceSpec:
    shape: tuple            # common shape of the inputs
    inputs: tuple           # ((dtype, strides), ...)
    out_shape: tuple        # keepdims
    terms: tuple            # (Term, ...), one output per term
    outputs: tuple          # ((dtype, strides over out_shape), ...), one per term
    block: int = 0          # 0: chosen by the launcher
    split: int = 0          # 0: chosen by the launcher
    vec: int = 1            # row kernel loads: 1 one element; 0 auto (16-byte vectors if the layout allows)
    rows: int = 0           # vector row kernel: rows per block (1: a block per row; block // 32: a warp per row)
    unroll: int = 0         # vector row kernel: vectors in flight per thread per trip (0: auto)
    ctas: int = 0           # vector row kernel, split grids: blocks per SM the split targets (0: auto)
    acc: str = ""           # accumulation type ("float64": loads widened before the terms); "": by the I/O types

    def __post_init__(self):
        if len(self.out_shape) != len(self.shape):
            raise ValueError("out_shape must have the input rank")
        if len(self.terms) != len(self.outputs) or not self.terms:
            raise ValueError("one output per term, at least one term")
        for t in self.terms:
            if t.combine not in COMBINE:
                raise ValueError(f"unknown combine {t.combine!r}")
        for n, m in zip(self.shape, self.out_shape):
            if not (m == n or m == 1 or (m > 0 and n % m == 0)):
                raise ValueError(f"cannot reduce extent {n} to {m}")


# --------------------------------------------------------------------------------------------
# layout

def layout(spec):
    """Kept dims and reduced dims as lists of (extent, [input strides], [output strides])."""
    kept, red = [], []
    for d, (n, m) in enumerate(zip(spec.shape, spec.out_shape)):
        xs = [t[1][d] for t in spec.inputs]
        os_ = [o[1][d] for o in spec.outputs]
        if m == n:
            if n > 1:
                kept.append((n, xs, os_))
        elif m == 1:
            red.append((n, xs, [0] * len(os_)))
        else:   # grouped: split into (m kept, g reduced), the group innermost
            g = n // m
            kept.append((m, [s * g for s in xs], os_))
            if g > 1:
                red.append((g, xs, [0] * len(os_)))
    return _merge(kept), _merge(red)


def _merge(dims):
    """Order dims by decreasing memory stride of input 0, merge the contiguous neighbours."""
    dims = sorted(dims, key=lambda t: -abs(t[1][0]) if t[1] else 0)
    out = []
    for n, xs, os_ in dims:
        if out:
            pn, pxs, pos = out[-1]
            if all(a == b * n for a, b in zip(pxs, xs)) and all(a == b * n for a, b in zip(pos, os_)):
                out[-1] = (pn * n, xs, os_)
                continue
        out.append((n, list(xs), list(os_)))
    return out


def numel(dims):
    return int(np.prod([d[0] for d in dims], dtype=np.int64)) if dims else 1


def _innermost_stride(dims):
    return min((abs(d[1][0]) for d in dims), default=None)


ROW_MIN_REDUCED = 64   # below this many reduced elements per output, a thread per output wins


def is_row(kept, red):
    if not kept:
        return True
    if numel(red) < ROW_MIN_REDUCED:
        return False
    return _innermost_stride(red) < _innermost_stride(kept)


def choose(spec):
    """(row?, block, split) for a spec (knobs given in the spec win)."""
    kept, red = layout(spec)
    n_out, n_red = numel(kept), numel(red)
    row = is_row(kept, red)
    if row:
        block = spec.block or (32 if SIM else min(512, max(32, _pow2(n_red // 8))))
        blocks = n_out
        per_block_min = block * 4
    else:
        block = spec.block or (4 if SIM else 8)     # BY: rows of the 32 x BY block
        blocks = math.ceil(n_out / 32)
        per_block_min = block * 16
    cap = 1024
    if row and two_level(red, block):
        cap = n_red // red[-1][0]     # the split is over the outer reduced rows
    if spec.split:
        return row, block, min(spec.split, cap)
    # enough blocks for ~8 waves: a block's time is set by its loop trips (latency), so a last
    # partial wave costs a whole block time; with many waves that tail is a small fraction
    # partials per output stay at most max(128, one-wave split): the combine pass walks them in order
    target = 8 if SIM else _sm_count() * 64
    one_wave = 8 if SIM else _sm_count() * 8
    cap = min(cap, max(128, math.ceil(one_wave / max(blocks, 1))))
    if blocks >= one_wave:   # enough outputs to fill the GPU: no partials, no combine pass
        return row, block, 1
    split = max(1, min(math.ceil(target / max(blocks, 1)), math.ceil(n_red / per_block_min), cap))
    return row, block, split


def _pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


def _sm_count():
    return sm_count()


def two_level(red, block):
    """True when the row kernel walks the outer reduced dims in a loop (several reduced dims, the
    innermost at least one block long)."""
    return len(red) >= 2 and red[-1][0] >= block


# --------------------------------------------------------------------------------------------
# vector row kernel: layout and launch shape (source: codegen.py)

def vec_width(spec, kept=None, red=None):
    """Elements per 16-byte access the vector row kernel can use for ``spec`` (1: not applicable:
    not a row reduction over one contiguous run, odd extents or strides, 1-byte or bool inputs)."""
    if kept is None:
        kept, red = layout(spec)
    if not red or len(red) != 1 or not is_row(kept, red) or any(s != 1 for s in red[0][1]):
        return 1
    sizes = [storage_dtype(dt).itemsize for dt, _ in spec.inputs]
    if min(sizes) < 2 or any(storage_dtype(dt) == np.bool_ for dt, _ in spec.inputs):
        return 1
    v = 16 // max(sizes)
    while v > 1 and (red[0][0] % v or any(x % v for d in kept for x in d[1])):
        v //= 2
    return v


def choose_vec(spec, kept, red, v):
    """(block, rows per block, split, unroll) of the vector row kernel (knobs in the spec win).

    Automatic choices, the fastest of experiments/probe_reduce.py's variants on an H200 (FP32
    8192 x 32768): enough rows to fill the GPU: a block of up to 512 threads per row, 4 vectors in
    flight (a warp per row is slower); few outputs: 256-thread blocks, 8 a SM over contiguous chunks
    (at copy bandwidth; fewer blocks a SM are slower)."""
    n_out, nv = numel(kept), numel(red) // v
    unroll = spec.unroll or (2 if SIM else 4)
    rows = spec.rows or 1
    if SIM:
        block = spec.block or 32
    elif spec.block:
        block = spec.block
    else:
        block = min(512, max(32, _pow2(nv // (unroll * 4))))
        if math.ceil(n_out / rows) < (2 if SIM else _sm_count()) * (2048 // block) and not spec.split:
            block = min(block, 256)     # too few rows: a split grid of 256-thread blocks
    if rows > 1 and block // rows != 32:
        raise ValueError(f"rows={rows}: a warp per row needs block = 32 * rows (block {block})")
    gs = block // rows
    blocks = math.ceil(n_out / rows)
    cap = max(1, min(1024, math.ceil(nv / (gs * unroll))))
    if spec.split:
        return block, rows, min(spec.split, cap), unroll
    ctas = spec.ctas or (1 if SIM else max(1, 2048 // block))
    target = (2 if SIM else _sm_count()) * ctas   # the device is asked only here (compile cases give splits)
    split = 1 if blocks >= target else max(1, min(math.ceil(target / blocks), cap))
    return block, rows, split, unroll


#: the block combine (one block per output, its threads over the partials) below this many outputs
BLOCK_COMBINE_MAX_OUT = 64


def bcombine_threads(split):
    return 32 if SIM else min(1024, max(32, _pow2(split)))
