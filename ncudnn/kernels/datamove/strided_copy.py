"""Strided copy kernels of the data-movement engine: ``y[p] = x[p]`` over a shape, each side at its own
element strides and element offset (concat pieces, logical reshapes, transposes, slices), with an
optional dtype cast.

A :class:`CopySpec` is first *normalized* (:func:`normalize`): dims of extent 1 dropped, dims ordered
by the output's strides (outermost first) and neighbours merged where both sides are contiguous
across them. Then one of two kernels:

* **strided** — a thread handles ``UNROLL`` elements ``BLOCK`` apart in the output's memory order
  (every warp access to y is coalesced), all loads issued before the stores (bytes in flight). The
  linear index is split into coordinates by compile-time extents (div / mod by constants). Same-dtype
  copies whose innermost run is contiguous on both sides move whole 8-byte words (the arrays are
  re-typed as int64 by the launcher: :attr:`CopyKernel.word`), so a pure memcpy is 8 bytes a lane;
  with ``vec=True`` and everything a multiple of 16 bytes, 16 bytes a lane (``ld/st.global.v2.u64``,
  :attr:`CopyKernel.vec16`): the caller then guarantees both base addresses (plus the offsets) are
  16-byte aligned, and runs the ``vec=False`` kernel when they are not.
* **tiled transpose** — when the output's innermost dim is not the input's: TILE x TILE (64 x 64)
  tiles through shared memory (rows padded by one element: no bank conflicts for 4-byte types), a
  64 x 8 block, 8 elements a thread in flight, read along the input's contiguous dim, written along
  the output's; other dims are the tile batch.

Values travel as raw storage when the dtypes match (bit-exact, NaN payloads kept), else through
float32 (float64 when both sides are float64).
"""
import functools
import math
from dataclasses import dataclass
from typing import Tuple

import numba
import numpy as np
from numba import cuda
from numba.cuda.np import numpy_support

from ...platform import simulator_enabled
from ..runtime.dtypes import compute_type, dtype_name, loader, storage_dtype, storer

__all__ = ["CopySpec", "normalize", "build_copy", "CopyKernel", "copy_strided", "ld16", "st16"]

TILE = 64
TILE_ROWS = 8
BLOCK = 256
UNROLL = 4
WORD = 8   # bytes a lane moves per access on the word path
VEC = 16   # bytes a lane moves per access on the 16-byte path

if simulator_enabled():
    def ld16(arr, i):
        """``(arr[i], arr[i + 1])`` of an int64 array, i even, as one 16-byte load."""
        return arr[i], arr[i + 1]

    def st16(arr, i, a, b):
        """``arr[i], arr[i + 1] = a, b`` of an int64 array, i even, as one 16-byte store."""
        arr[i] = a
        arr[i + 1] = b
else:
    from llvmlite import ir
    from numba.cuda import cgutils, types as nbtypes
    from numba.cuda.extending import intrinsic

    _V2 = ir.VectorType(ir.IntType(64), 2)

    def _global_v2(context, builder, aryty, ary_val, idx, idxty):
        ary = context.make_array(aryty)(context, builder, value=ary_val)
        i = context.cast(builder, idx, idxty, nbtypes.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [i], wraparound=False)
        return builder.bitcast(builder.addrspacecast(ptr, ir.PointerType(ir.IntType(64), 1)), _V2.as_pointer(1))

    @intrinsic
    def _ld16(typingctx, arr, i):
        if not isinstance(arr, nbtypes.Array) or arr.dtype != nbtypes.int64 or arr.ndim != 1:
            return None
        sig = nbtypes.UniTuple(nbtypes.int64, 2)(arr, i)

        def codegen(context, builder, sig, args):
            vec = builder.load(_global_v2(context, builder, sig.args[0], args[0], args[1], sig.args[1]), align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(2)]
            return context.make_tuple(builder, sig.return_type, vals)
        return sig, codegen

    @intrinsic
    def _st16(typingctx, arr, i, a, b):
        if not isinstance(arr, nbtypes.Array) or arr.dtype != nbtypes.int64 or arr.ndim != 1:
            return None
        sig = nbtypes.none(arr, i, nbtypes.int64, nbtypes.int64)

        def codegen(context, builder, sig, args):
            vec = ir.Constant(_V2, ir.Undefined)
            for j in range(2):
                vec = builder.insert_element(vec, args[2 + j], ir.Constant(ir.IntType(32), j))
            builder.store(vec, _global_v2(context, builder, sig.args[0], args[0], args[1], sig.args[1]), align=16)
            return context.get_dummy_value()
        return sig, codegen

    @cuda.jit(device=True, inline=True)
    def ld16(arr, i):
        return _ld16(arr, i)

    @cuda.jit(device=True, inline=True)
    def st16(arr, i, a, b):
        _st16(arr, i, a, b)


@dataclass(frozen=True)
class CopySpec:
    """``y[p] = x[p]`` for p over ``dims``; strides / offsets in elements of each side's dtype."""

    dims: Tuple[int, ...]
    x_strides: Tuple[int, ...]
    y_strides: Tuple[int, ...]
    x_dtype: str = "float32"
    y_dtype: str = "float32"
    x_offset: int = 0
    y_offset: int = 0


def normalize(spec):
    """The same copy over merged dims ordered by y's strides (outermost first); at least one dim."""
    ax = [(d, xs, ys) for d, xs, ys in zip(spec.dims, spec.x_strides, spec.y_strides) if d != 1]
    ax.sort(key=lambda a: (-a[2], -a[1]))
    merged = []
    for d, xs, ys in ax:
        if merged:
            pd, pxs, pys = merged[-1]
            if pxs == xs * d and pys == ys * d:
                merged[-1] = (pd * d, xs, ys)
                continue
        merged.append((d, xs, ys))
    if not merged:
        merged = [(1, 1, 1)]
    d, xs, ys = zip(*merged)
    return CopySpec(tuple(d), tuple(xs), tuple(ys), dtype_name(spec.x_dtype), dtype_name(spec.y_dtype),
                    spec.x_offset, spec.y_offset)


def _word_ratio(n, word=WORD):
    """Elements per ``word``-byte word when the copy can move words (same dtype, innermost run
    contiguous and whole words on both sides, all strides and offsets word-aligned), else 1."""
    if n.x_dtype != n.y_dtype:
        return 1
    isz = storage_dtype(n.x_dtype).itemsize
    r = word // isz
    if r <= 1 or n.x_strides[-1] != 1 or n.y_strides[-1] != 1 or n.dims[-1] % r:
        return 1
    vals = list(n.x_strides[:-1]) + list(n.y_strides[:-1]) + [n.x_offset, n.y_offset]
    return r if all(v % r == 0 for v in vals) else 1


def _transpose_axes(n):
    """(a, b): y's innermost dim a and x's contiguous dim b when they differ (tiled path), else None."""
    if len(n.dims) < 2 or n.y_strides[-1] != 1:
        return None
    b = [k for k, s in enumerate(n.x_strides) if s == 1]
    if not b or b[0] == len(n.dims) - 1 or n.dims[-1] < 8 or n.dims[b[0]] < 8:
        return None
    return len(n.dims) - 1, b[0]


class CopyKernel:
    """A compiled-on-demand copy: ``kernel(x, y, x_offset, y_offset)`` on ``grid`` x ``block``.
    ``word`` (elements per 8 bytes, nonzero): the arrays must be passed re-typed as int64 (offsets
    then in int64 words). ``vec16``: 16-byte accesses; both arrays' base addresses plus offsets must
    be 16-byte aligned."""

    def __init__(self, spec, source, namespace, grid, block, word, kind, vec16=False):
        self.spec, self.source, self._ns = spec, source, namespace
        self.grid, self.block, self.word, self.kind, self.vec16 = grid, block, word, kind, vec16

    @functools.cached_property
    def kernel(self):
        ns = dict(self._ns)
        exec(compile(self.source, f"<copy {self.kind}>", "exec"), ns)
        return cuda.jit(ns["kernel"])

    def offsets(self):
        r = self.word or 1
        return self.spec.x_offset // r, self.spec.y_offset // r


def _split(dims, var="i"):
    """Source lines: coordinates c0..c{k} of linear index ``var`` over ``dims`` (row-major)."""
    out, r = [], var
    for k in range(len(dims) - 1, 0, -1):
        out += [f"c{k} = {r} % {dims[k]}", f"q{k} = {r} // {dims[k]}"]
        r = f"q{k}"
    out.append(f"c0 = {r}")
    return out


def _strided_source(dims, xs, ys, total, raw, vec16=False):
    """``vec16``: dims / strides count 16-byte pairs of int64 words, offsets count int64 words."""
    s = ["def kernel(x, y, xoff, yoff):",
         f"    base = cuda.blockIdx.x * {BLOCK * UNROLL} + cuda.threadIdx.x"]
    for u in range(UNROLL):
        s.append(f"    i{u} = base + {u * BLOCK}")
        s.append(f"    if i{u} < {total}:")
        s += ["        " + ln for ln in _split(dims, f"i{u}")]
        xo = " + ".join(f"c{k} * {xs[k]}" for k in range(len(dims)))
        yo = " + ".join(f"c{k} * {ys[k]}" for k in range(len(dims)))
        if vec16:
            s.append(f"        o{u} = yoff + 2 * ({yo})")
            s.append(f"        a{u}, b{u} = ld16(x, u64(xoff + 2 * ({xo})))")
            continue
        s.append(f"        o{u} = yoff + {yo}")
        s.append(f"        v{u} = " + (f"x[u64(xoff + {xo})]" if raw else f"ldx(x, u64(xoff + {xo}))"))
    for u in range(UNROLL):
        s.append(f"    if i{u} < {total}:")
        if vec16:
            s.append(f"        st16(y, u64(o{u}), a{u}, b{u})")
        else:
            s.append(f"        y[u64(o{u})] = v{u}" if raw else f"        sty(y, u64(o{u}), v{u})")
    return "\n".join(s) + "\n"


def _tiled_source(dims, xs, ys, a, b, raw):
    A, B = dims[a], dims[b]
    na, nb = -(-A // TILE), -(-B // TILE)
    batch = [k for k in range(len(dims)) if k not in (a, b)]
    s = ["def kernel(x, y, xoff, yoff):",
         f"    tile = cuda.shared.array(({TILE}, {TILE + 1}), tdt)",
         "    tx = cuda.threadIdx.x", "    ty = cuda.threadIdx.y",
         "    blk = cuda.blockIdx.x",
         f"    ta = blk % {na}", f"    r = blk // {na}", f"    tb = r % {nb}", f"    r = r // {nb}"]
    xb, yb = ["xoff"], ["yoff"]
    for k in reversed(batch):
        s += [f"    c{k} = r % {dims[k]}", f"    r = r // {dims[k]}"]
        xb.append(f"c{k} * {xs[k]}")
        yb.append(f"c{k} * {ys[k]}")
    s += [f"    xb = {' + '.join(xb)}", f"    yb = {' + '.join(yb)}",
          f"    a0 = ta * {TILE}", f"    b0 = tb * {TILE}",
          "    ib = b0 + tx",
          f"    for k in range(0, {TILE}, {TILE_ROWS}):",
          "        ia = a0 + ty + k",
          f"        if ia < {A} and ib < {B}:",
          "            tile[ty + k, tx] = " + (f"x[u64(xb + ia * {xs[a]} + ib)]" if raw else
                                               f"ldx(x, u64(xb + ia * {xs[a]} + ib))"),
          "    cuda.syncthreads()",
          "    ia = a0 + tx",
          f"    for k in range(0, {TILE}, {TILE_ROWS}):",
          "        ib = b0 + ty + k",
          f"        if ia < {A} and ib < {B}:",
          "            " + (f"y[u64(yb + ib * {ys[b]} + ia)] = tile[tx, ty + k]" if raw else
                             f"sty(y, u64(yb + ib * {ys[b]} + ia), tile[tx, ty + k])")]
    grid = na * nb * math.prod(dims[k] for k in batch)
    return "\n".join(s) + "\n", grid


@functools.lru_cache(maxsize=None)
def build_copy(spec, vec=False, word=True):
    """The :class:`CopyKernel` for ``spec`` (normalized here); source generated, compiled lazily.
    ``vec``: use 16-byte accesses where the spec allows (see :class:`CopyKernel`); ``word=False``:
    element by element even where 8-byte words would do (for base addresses not 8-byte aligned)."""
    n = normalize(spec)
    raw = n.x_dtype == n.y_dtype
    ct = compute_type([n.x_dtype, n.y_dtype])
    ns = dict(cuda=cuda, __name__=__name__, u64=numba.uint64,   # unsigned indices: no wraparound select
              ld16=ld16, st16=st16)
    if raw:
        ns["tdt"] = numpy_support.from_dtype(storage_dtype(n.x_dtype))
    else:
        ns.update(ldx=loader(n.x_dtype, ct), sty=storer(n.y_dtype),
                  tdt=numpy_support.from_dtype(np.dtype(ct)))
    ab = _transpose_axes(n)
    if ab is not None:
        src, grid = _tiled_source(n.dims, n.x_strides, n.y_strides, ab[0], ab[1], raw)
        return CopyKernel(n, src, ns, grid, (TILE, TILE_ROWS), 0, "tiled")
    dims, xs, ys = list(n.dims), list(n.x_strides), list(n.y_strides)
    r16 = _word_ratio(n, VEC) if vec else 1
    if r16 > 1:
        dims[-1] //= r16
        xs = [v // r16 for v in xs[:-1]] + [1]
        ys = [v // r16 for v in ys[:-1]] + [1]
        total = math.prod(dims)
        src = _strided_source(dims, xs, ys, total, raw, vec16=True)
        return CopyKernel(n, src, ns, max(1, -(-total // (BLOCK * UNROLL))), BLOCK, max(1, r16 // 2), "strided16",
                          vec16=True)
    r = _word_ratio(n) if word else 1
    if r > 1:
        dims[-1] //= r
        xs = [v // r for v in xs[:-1]] + [1]
        ys = [v // r for v in ys[:-1]] + [1]
    total = math.prod(dims)
    src = _strided_source(dims, xs, ys, total, raw)
    return CopyKernel(n, src, ns, max(1, -(-total // (BLOCK * UNROLL))), BLOCK, r if r > 1 else 0, "strided")


def copy_strided(x, y, spec, stream=0, vec=False):
    """Run ``spec`` on flat device arrays ``x`` / ``y`` (storage dtypes, offsets from their start;
    ``vec``: 16-byte path where allowed, the arrays' start 16-byte aligned)."""
    ck = build_copy(spec, vec)
    if ck.word:
        x, y = x.view(np.int64), y.view(np.int64)
    xo, yo = ck.offsets()
    from ..primitives.warp import launch
    launch(ck.kernel, ck.grid, ck.block, stream, x, y, xo, yo)
