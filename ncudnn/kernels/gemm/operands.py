"""Strided-matrix loaders and output addressing for plain (batched) GEMM.

Element ``(z, outer, k)`` of an operand lives at ``(z // B2) * s_z1 + (z % B2) * s_z2 +
outer * s_outer + k * s_k`` of a flat 1-D array: transposes are stride swaps, a broadcast batch has
stride 0, two batch dims cover numpy-style broadcasting of (B1, B2) batches.

``args`` tuples: operand ``(array, s_z1, s_z2, B2, s_outer, s_k)``; output
``(array, s_z1, s_z2, B2, s_m, s_n)``.
"""
from numba import cuda, int64, uint64

from ..runtime import dtypes

_CACHE = {}


class Operand:
    """A GEMM operand loader: FAST, setup, load and a cache key (see mainloop.py)."""

    def __init__(self, key, fast, setup, load):
        self.key, self.FAST, self.setup, self.load = key, fast, setup, load


class Output:
    def __init__(self, key, row, col):
        self.key, self.row, self.col = key, row, col


def strided_operand(layout, dtype, ftype="float32"):
    """Operand over a strided matrix. layout "k": k is contiguous (s_k must be 1; loads coalesce
    along k); "outer": any strides (coalesced when s_outer == 1)."""
    key = ("strided", layout, str(dtype), ftype)
    if key in _CACHE:
        return _CACHE[key]
    if layout not in ("k", "outer"):
        raise ValueError(f"layout must be 'k' or 'outer', not {layout!r}")
    ld = dtypes.loader(dtype, ftype)
    UNIT_K = layout == "k"

    @cuda.jit(device=True, inline=True)
    def setup(args, z, outer):
        base = (z // args[3]) * args[1] + (z % args[3]) * args[2] + outer * args[4]
        return (int64(base), int64(0), int64(0), int64(0))

    @cuda.jit(device=True, inline=True)
    def load(args, s0, s1, s2, s3, k):
        # unsigned element index: numba then emits no negative-index fix-up
        if UNIT_K:
            return ld(args[0], uint64(s0 + k))
        return ld(args[0], uint64(s0 + k * args[5]))

    op = Operand(key, "k" if UNIT_K else "outer", setup, load)
    _CACHE[key] = op
    return op


def strided_output():
    key = ("strided_out",)
    if key in _CACHE:
        return _CACHE[key]

    @cuda.jit(device=True, inline=True)
    def row(args, z, m):
        return (z // args[3]) * args[1] + (z % args[3]) * args[2] + m * args[4]

    @cuda.jit(device=True, inline=True)
    def col(args, z, n):
        return n * args[5]

    out = Output(key, row, col)
    _CACHE[key] = out
    return out
