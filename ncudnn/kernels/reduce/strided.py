"""Deterministic strided reductions: cudnnReduceTensorOp_t over any set of axes, and GENSTATS.

The core is :class:`ReduceSpec`: one or more input tensors of a common ``shape`` (any strides,
0 for broadcast), an ``out_shape`` (keepdims: extent 1 on reduced axes, or a divisor for cuDNN's
grouped axes), and *terms*: each term is an elementwise pre-expression over the input registers
``v0, v1, ...`` (numba source text, f32 or f64) plus a combine (``sum``, ``prod``, ``max``, ``min``)
and a finalize expression over ``acc`` and the element count ``cnt``. Several terms share one read
of the inputs (GENSTATS = sum x and sum x*x in one pass; batch-norm backward = sum dy, sum dy*x).

Generated kernels (one per spec, cached; compile-time shapes and strides):

* **row** (the innermost memory axis is reduced, at least ``ROW_MIN_REDUCED`` elements per output,
  or a full reduction): one block per output element (grid.x), threads
  stride over the reduced elements with ``UNROLL`` loads in flight, then warp-shuffle + shared
  memory block combine in a fixed order;
* **column** (otherwise: the innermost memory axis is kept, or few elements per output): a
  32 x ``BY`` block, x over 32 consecutive outputs (coalesced when the innermost axis is kept),
  y over slices of the reduced elements, then a fixed-order combine over y.

* **vector row** (``vec`` != 1 and the reduced elements of each output are one contiguous run, e.g.
  the rows of a row-major tensor or a whole tensor): 16-byte vector loads, a warp per row (``rows``
  rows a block) or a block per row, ``unroll`` vectors in flight per thread; a split grid has
  ``ctas`` blocks per SM (one wave), each over a contiguous chunk.

When there are too few outputs to fill the GPU, the reduced range is split over ``grid.y`` blocks:
each writes its partial accumulators to a float32/float64 workspace, and a second kernel combines
the partials in split order (few outputs: a block per output, its threads over the partials, then
a fixed butterfly). No atomics anywhere: results are bitwise reproducible run to run.

Entry points: :func:`reduce_tensor` (cuDNN ops), :func:`genstats`, and the generic
:func:`build_reduce` / :func:`run_reduce`.
"""
import hashlib
import math
from dataclasses import dataclass

import numpy as np
from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, dtype_name, loader, placeholder, storage_dtype, storer
from ..pointwise.vector_io import to_compute, vector_load
from ..primitives.warp import SIM, launch, shfl_xor, sm_count
from ...types import cudnnReduceTensorOp_t as RO

__all__ = ["ReduceSpec", "Term", "build_reduce", "run_reduce", "reduce_spec", "reduce_tensor",
           "genstats_spec", "genstats", "workspace_elems"]

_COMBINE = {
    "sum": "({a} + {b})",
    "prod": "({a} * {b})",
    "max": "({a} if ({a} != {a} or {a} >= {b}) else {b})",   # NaN propagates
    "min": "({a} if ({a} != {a} or {a} <= {b}) else {b})",
}
_INIT = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}


@dataclass(frozen=True)
class Term:
    """``acc = combine over elements of pre(v0, v1, ...)``; output = ``final(acc, cnt)``."""
    pre: str
    combine: str
    final: str = "acc"
    init: float = None

    def init_value(self):
        return _INIT[self.combine] if self.init is None else self.init


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
            if t.combine not in _COMBINE:
                raise ValueError(f"unknown combine {t.combine!r}")
        for n, m in zip(self.shape, self.out_shape):
            if not (m == n or m == 1 or (m > 0 and n % m == 0)):
                raise ValueError(f"cannot reduce extent {n} to {m}")


# --------------------------------------------------------------------------------------------
# layout

def _layout(spec):
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


def _numel(dims):
    return int(np.prod([d[0] for d in dims], dtype=np.int64)) if dims else 1


def _innermost_stride(dims):
    return min((abs(d[1][0]) for d in dims), default=None)


ROW_MIN_REDUCED = 64   # below this many reduced elements per output, a thread per output wins


def _is_row(kept, red):
    if not kept:
        return True
    if _numel(red) < ROW_MIN_REDUCED:
        return False
    return _innermost_stride(red) < _innermost_stride(kept)


def _choose(spec):
    """(row?, block, split) for a spec (knobs given in the spec win)."""
    kept, red = _layout(spec)
    n_out, n_red = _numel(kept), _numel(red)
    row = _is_row(kept, red)
    if row:
        block = spec.block or (32 if SIM else min(512, max(32, _pow2(n_red // 8))))
        blocks = n_out
        per_block_min = block * 4
    else:
        block = spec.block or (4 if SIM else 8)     # BY: rows of the 32 x BY block
        blocks = math.ceil(n_out / 32)
        per_block_min = block * 16
    cap = 1024
    if row and _two_level(red, block):
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


# --------------------------------------------------------------------------------------------
# source generation

def _decompose(dims, flat, prefix, which):
    """Lines: coordinates of flat index over ``dims`` and the offset of each tensor."""
    lines = [f"{prefix}r = {flat}"]
    coords = []
    for k in range(len(dims) - 1, 0, -1):
        lines.append(f"{prefix}c{k} = {prefix}r % {dims[k][0]}")
        lines.append(f"{prefix}r = {prefix}r // {dims[k][0]}")
        coords.append((k, f"{prefix}c{k}"))
    if dims:
        coords.append((0, f"{prefix}r"))
    offs = []
    for t in range(len(dims[0][which]) if dims else 0):
        terms = [f"{c} * {dims[k][which][t]}" for k, c in coords if dims[k][which][t] != 0]
        offs.append(" + ".join(terms) if terms else "0")
    return lines, offs


def _load_block(spec, kx, rdims, ridx, u, ctype):
    """Lines loading element ``ridx`` of every input and applying every term's pre-expression."""
    dec, roffs = _decompose(rdims, ridx, f"q{u}_", 1) if rdims else ([], ["0"] * len(spec.inputs))
    lines = list(dec)
    for i in range(len(spec.inputs)):
        lines.append(f"v{i}_{u} = ld{i}(x{i}, {kx[i]} + {roffs[i]})")
    pres = []
    for j, t in enumerate(spec.terms):
        pre = t.pre
        for i in reversed(range(len(spec.inputs))):
            pre = pre.replace(f"v{i}", f"v{i}_{u}")
        pres.append(f"p{j}_{u} = {ctype}({pre})")
    return lines, pres


def _combine(t, a, b):
    return _COMBINE[t.combine].format(a=a, b=b)


def _final_lines(spec, ctype, n_red, store_to, indent):
    lines = []
    for j, t in enumerate(spec.terms):
        f = t.final.replace("cnt", po.lit(n_red, ctype)).replace("acc", f"a{j}")
        lines.append(store_to(j, f"{ctype}({f})"))
    return [" " * indent + ln for ln in lines]


def _row_source(spec, kept, red, block, split, ctype, unroll=4):
    n_out, n_red = _numel(kept), _numel(red)
    nt, ni = len(spec.terms), len(spec.inputs)
    chunk = math.ceil(n_red / split)
    L = [f"def kernel({', '.join(f'x{i}' for i in range(ni))}, "
         f"{', '.join(f'y{j}' for j in range(nt))}, ws):",
         f"    sm = cuda.shared.array(({nt}, 32), {ctype})",
         "    o = cuda.blockIdx.x",
         "    s = cuda.blockIdx.y",
         "    tid = cuda.threadIdx.x"]
    dec, koffs = _decompose(kept, "o", "k_", 1) if kept else ([], ["0"] * ni)
    _, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
    L += ["    " + ln for ln in dec]
    L += [f"    kx{i} = {koffs[i]}" for i in range(ni)]
    L += [f"    a{j} = {po.lit(t.init_value(), ctype)}" for j, t in enumerate(spec.terms)]
    if _two_level(red, block):
        # outer reduced dims walked one by one (their index math once per inner row), threads
        # over the innermost reduced dim: no per-element division (e.g. GENSTATS over N and HW)
        inner, outer = red[-1:], red[:-1]
        n_q = n_red // inner[0][0]
        chunk_q = math.ceil(n_q / split)
        L += [f"    qi = s * {chunk_q}", f"    qhi = min(qi + {chunk_q}, {n_q})", "    while qi < qhi:"]
        dec, qoffs = _decompose(outer, "qi", "qq_", 1)
        L += ["        " + ln for ln in dec]
        L += [f"        bx{i} = kx{i} + {qoffs[i]}" for i in range(ni)]
        L += ["        r = tid"]
        L += ["    " + ln for ln in _row_loops(spec, [f"bx{i}" for i in range(ni)], inner, block,
                                                 str(inner[0][0]), ctype, unroll)]
        L.append("        qi += 1")
    else:
        L += [f"    lo = s * {chunk}", f"    hi = min(lo + {chunk}, {n_red})", "    r = lo + tid"]
        L += _row_loops(spec, [f"kx{i}" for i in range(ni)], red, block, "hi", ctype, unroll)
    # warp butterfly then warps through shared memory, fixed order
    for j, t in enumerate(spec.terms):
        for m in (16, 8, 4, 2, 1):   # the shuffle once per lane, outside any short circuit
            L.append(f"    h{j} = shfl_xor(a{j}, {m})")
            L.append(f"    a{j} = {_combine(t, f'a{j}', f'h{j}')}")
    L.append("    if tid % 32 == 0:")
    L += [f"        sm[{j}, tid // 32] = a{j}" for j in range(nt)]
    L.append("    cuda.syncthreads()")
    L.append("    if tid == 0:")
    L += [f"        a{j} = sm[{j}, 0]" for j in range(nt)]
    if block > 32:
        L.append(f"        for w in range(1, {block // 32}):")
        L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w]')}"
              for j, t in enumerate(spec.terms)]
    if split == 1:
        L += ["        " + ln for ln in _decompose(kept, "o", "ko_", 2)[0]] if kept else []
        L += _final_lines(spec, ctype, n_red, lambda j, v: f"st{j}(y{j}, {ooffs[j]}, {v})", 8)
    else:
        L += [f"        ws[({j} * {split} + s) * {n_out} + o] = a{j}" for j in range(nt)]
    return "\n".join(L) + "\n"


def _row_loops(spec, kx, red, block, hi, ctype, unroll):
    """Lines (indent 4) of the row kernel's strided loop over ``r`` up to ``hi``: UNROLL loads in
    flight, then the combines in a fixed order, then a plain tail loop."""
    L = [f"    while r + {(unroll - 1) * block} < {hi}:"]
    loads, pres = [], []
    for u in range(unroll):
        ld, pr = _load_block(spec, kx, red, f"r + {u * block}" if u else "r", u, ctype)
        loads += ld
        pres += pr
    L += ["        " + ln for ln in loads + pres]
    for u in range(unroll):
        L += [f"        a{j} = {_combine(t, f'a{j}', f'p{j}_{u}')}" for j, t in enumerate(spec.terms)]
    L.append(f"        r += {unroll * block}")
    L.append(f"    while r < {hi}:")
    ld, pr = _load_block(spec, kx, red, "r", 0, ctype)
    L += ["        " + ln for ln in ld + pr]
    L += [f"        a{j} = {_combine(t, f'a{j}', f'p{j}_0')}" for j, t in enumerate(spec.terms)]
    L.append(f"        r += {block}")
    return L


def _two_level(red, block):
    """True when the row kernel walks the outer reduced dims in a loop (several reduced dims, the
    innermost at least one block long)."""
    return len(red) >= 2 and red[-1][0] >= block


def _col_source(spec, kept, red, by, split, ctype, unroll=4):
    n_out, n_red = _numel(kept), _numel(red)
    nt, ni = len(spec.terms), len(spec.inputs)
    chunk = math.ceil(n_red / split)
    L = [f"def kernel({', '.join(f'x{i}' for i in range(ni))}, "
         f"{', '.join(f'y{j}' for j in range(nt))}, ws):",
         f"    sm = cuda.shared.array(({nt}, {by}, 33), {ctype})",
         "    tx = cuda.threadIdx.x",
         "    ty = cuda.threadIdx.y",
         "    o = cuda.blockIdx.x * 32 + tx",
         "    s = cuda.blockIdx.y"]
    L += [f"    a{j} = {po.lit(t.init_value(), ctype)}" for j, t in enumerate(spec.terms)]
    L.append(f"    if o < {n_out}:")
    dec, koffs = _decompose(kept, "o", "k_", 1)
    L += ["        " + ln for ln in dec]
    L += [f"        kx{i} = {koffs[i]}" for i in range(ni)]
    L += [f"        r = s * {chunk} + ty", f"        hi = min(s * {chunk} + {chunk}, {n_red})"]
    # UNROLL loads in flight per thread, combined in the order of the plain loop (same bits)
    kx = [f"kx{i}" for i in range(ni)]
    L.append(f"        while r + {(unroll - 1) * by} < hi:")
    loads, pres = [], []
    for u in range(unroll):
        ld, pr = _load_block(spec, kx, red, f"r + {u * by}" if u else "r", u, ctype)
        loads += ld
        pres += pr
    L += ["            " + ln for ln in loads + pres]
    for u in range(unroll):
        L += [f"            a{j} = {_combine(t, f'a{j}', f'p{j}_{u}')}" for j, t in enumerate(spec.terms)]
    L.append(f"            r += {unroll * by}")
    L.append("        while r < hi:")
    ld, pr = _load_block(spec, kx, red, "r", 0, ctype)
    L += ["            " + ln for ln in ld + pr]
    L += [f"            a{j} = {_combine(t, f'a{j}', f'p{j}_0')}" for j, t in enumerate(spec.terms)]
    L.append(f"            r += {by}")
    L += [f"    sm[{j}, ty, tx] = a{j}" for j in range(nt)]
    L.append("    cuda.syncthreads()")
    L.append(f"    if ty == 0 and o < {n_out}:")
    L.append(f"        for w in range(1, {by}):")
    L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w, tx]')}" for j, t in enumerate(spec.terms)]
    if split == 1:
        d2, ooffs = _decompose(kept, "o", "ko_", 2)
        L += ["        " + ln for ln in d2]
        L += _final_lines(spec, ctype, n_red, lambda j, v: f"st{j}(y{j}, {ooffs[j]}, {v})", 8)
    else:
        L += [f"        ws[({j} * {split} + s) * {n_out} + o] = a{j}" for j in range(nt)]
    return "\n".join(L) + "\n"


def _combine_source(spec, kept, split, ctype):
    """Second pass: combine the split partials of each output in split order, finalize, store."""
    n_out, n_red = _numel(kept), _numel(_layout(spec)[1])
    nt = len(spec.terms)
    L = [f"def combine(ws, {', '.join(f'y{j}' for j in range(nt))}):",
         "    o = cuda.grid(1)",
         f"    if o < {n_out}:"]
    for j, t in enumerate(spec.terms):
        L.append(f"        a{j} = ws[{j * split} * {n_out} + o]")
        L.append(f"        for s in range(1, {split}):")
        L.append(f"            a{j} = {_combine(t, f'a{j}', f'ws[({j * split} + s) * {n_out} + o]')}")
    d2, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
    L += ["        " + ln for ln in d2]
    L += _final_lines(spec, ctype, n_red, lambda j, v: f"st{j}(y{j}, {ooffs[j]}, {v})", 8)
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------------------------
# vector row kernel: the reduced elements of an output are one contiguous run (stride 1), read as
# 16-byte vectors (V elements); GS threads per output (GS = 32: a warp per row, ``rows`` rows a
# block; GS = block: a block per row), UNROLL vectors in flight per thread per trip; the range of
# an output may be split over grid.y (contiguous chunks, partials combined in split order)

def vec_width(spec, kept=None, red=None):
    """Elements per 16-byte access the vector row kernel can use for ``spec`` (1: not applicable:
    not a row reduction over one contiguous run, odd extents or strides, 1-byte or bool inputs)."""
    if kept is None:
        kept, red = _layout(spec)
    if not red or len(red) != 1 or not _is_row(kept, red) or any(s != 1 for s in red[0][1]):
        return 1
    sizes = [storage_dtype(dt).itemsize for dt, _ in spec.inputs]
    if min(sizes) < 2 or any(storage_dtype(dt) == np.bool_ for dt, _ in spec.inputs):
        return 1
    v = 16 // max(sizes)
    while v > 1 and (red[0][0] % v or any(x % v for d in kept for x in d[1])):
        v //= 2
    return v


def _choose_vec(spec, kept, red, v):
    """(block, rows per block, split, unroll) of the vector row kernel (knobs in the spec win).

    Automatic choices, the fastest of experiments/probe_reduce.py's variants on an H200 (FP32
    8192 x 32768): enough rows to fill the GPU: a block of up to 512 threads per row, 4 vectors in
    flight (a warp per row is slower); few outputs: 256-thread blocks, 8 a SM over contiguous chunks
    (at copy bandwidth; fewer blocks a SM are slower)."""
    n_out, nv = _numel(kept), _numel(red) // v
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


def _vrow_source(spec, kept, red, v, block, rows, split, unroll, ctype):
    n_out, nv = _numel(kept), _numel(red) // v
    nt, ni = len(spec.terms), len(spec.inputs)
    gs = block // rows
    chunk = math.ceil(nv / split)
    L = [f"def kernel({', '.join(f'x{i}' for i in range(ni))}, "
         f"{', '.join(f'y{j}' for j in range(nt))}, ws):"]
    if gs > 32:
        L.append(f"    sm = cuda.shared.array(({nt}, {gs // 32}), {ctype})")
    L += ["    tid = cuda.threadIdx.x", "    s = cuda.blockIdx.y"]
    if gs == 32:
        L += ["    lane = tid & 31", f"    o = cuda.blockIdx.x * {rows} + (tid >> 5)"]
    else:
        L += ["    lane = tid", "    o = cuda.blockIdx.x"]
    L += [f"    a{j} = {po.lit(t.init_value(), ctype)}" for j, t in enumerate(spec.terms)]
    L.append(f"    if o < {n_out}:")
    dec, koffs = _decompose(kept, "o", "k_", 1) if kept else ([], ["0"] * ni)
    L += ["        " + ln for ln in dec]
    L += [f"        kx{i} = {koffs[i]}" for i in range(ni)]
    if split == 1:
        L += ["        r = lane", f"        hi = {nv}"]
    else:
        L += [f"        r = s * {chunk} + lane", f"        hi = min(s * {chunk} + {chunk}, {nv})"]

    def trip(n_u, indent):
        lines, pres = [], []
        for u in range(n_u):
            for i in range(ni):
                raw = ", ".join(f"w{i}_{u}_{e}" for e in range(v))
                idx = f"(r + {u * gs}) * {v}" if u else f"r * {v}"
                lines.append(f"{raw} = ldv{i}(x{i}, kx{i} + {idx})" if v > 1
                             else f"w{i}_{u}_0 = x{i}[kx{i} + {idx}]")
            for e in range(v):
                for j, t in enumerate(spec.terms):
                    pre = t.pre
                    for i in reversed(range(ni)):
                        pre = pre.replace(f"v{i}", f"cin{i}(w{i}_{u}_{e})")
                    pres.append(f"p{j}_{u}_{e} = {ctype}({pre})")
        combs = [f"a{j} = {_combine(t, f'a{j}', f'p{j}_{u}_{e}')}"
                 for u in range(n_u) for e in range(v) for j, t in enumerate(spec.terms)]
        return [" " * indent + ln for ln in lines + pres + combs]

    L.append(f"        while r + {(unroll - 1) * gs} < hi:")
    L += trip(unroll, 12)
    L.append(f"            r += {unroll * gs}")
    L.append("        while r < hi:")
    L += trip(1, 12)
    L.append(f"            r += {gs}")
    for j, t in enumerate(spec.terms):
        for m in (16, 8, 4, 2, 1):
            L.append(f"    h{j} = shfl_xor(a{j}, {m})")
            L.append(f"    a{j} = {_combine(t, f'a{j}', f'h{j}')}")
    if gs > 32:
        L.append("    if lane % 32 == 0:")
        L += [f"        sm[{j}, lane // 32] = a{j}" for j in range(nt)]
        L.append("    cuda.syncthreads()")
        L.append("    if lane == 0:")
        L += [f"        a{j} = sm[{j}, 0]" for j in range(nt)]
        L.append(f"        for w in range(1, {gs // 32}):")
        L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w]')}"
              for j, t in enumerate(spec.terms)]
    L.append(f"    if lane == 0 and o < {n_out}:")
    if split == 1:
        d2, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
        L += ["        " + ln for ln in d2]
        L += _final_lines(spec, ctype, _numel(red), lambda j, x: f"st{j}(y{j}, {ooffs[j]}, {x})", 8)
    else:
        L += [f"        ws[({j} * {split} + s) * {n_out} + o] = a{j}" for j in range(nt)]
    return "\n".join(L) + "\n"


#: the block combine (one block per output, its threads over the partials) below this many outputs
BLOCK_COMBINE_MAX_OUT = 64


def _bcombine_threads(split):
    return 32 if SIM else min(1024, max(32, _pow2(split)))


def _bcombine_source(spec, kept, split, ctype):
    """Combine for few outputs: a block per output, thread t takes partials t, t + T, ... in order,
    then a fixed butterfly and warp order (deterministic)."""
    n_out, n_red = _numel(kept), _numel(_layout(spec)[1])
    nt, th = len(spec.terms), _bcombine_threads(split)
    L = [f"def combine(ws, {', '.join(f'y{j}' for j in range(nt))}):",
         f"    sm = cuda.shared.array(({nt}, 32), {ctype})",
         "    o = cuda.blockIdx.x",
         "    tid = cuda.threadIdx.x"]
    L += [f"    a{j} = {po.lit(_INIT[t.combine], ctype)}" for j, t in enumerate(spec.terms)]
    L += ["    s = tid", f"    while s < {split}:"]
    L += [f"        a{j} = {_combine(t, f'a{j}', f'ws[({j * split} + s) * {n_out} + o]')}"
          for j, t in enumerate(spec.terms)]
    L.append(f"        s += {th}")
    for j, t in enumerate(spec.terms):
        for m in (16, 8, 4, 2, 1):
            L.append(f"    h{j} = shfl_xor(a{j}, {m})")
            L.append(f"    a{j} = {_combine(t, f'a{j}', f'h{j}')}")
    if th > 32:
        L.append("    if tid % 32 == 0:")
        L += [f"        sm[{j}, tid // 32] = a{j}" for j in range(nt)]
        L.append("    cuda.syncthreads()")
    L.append("    if tid == 0:")
    if th > 32:
        L += [f"        a{j} = sm[{j}, 0]" for j in range(nt)]
        L.append(f"        for w in range(1, {th // 32}):")
        L += [f"            a{j} = {_combine(t, f'a{j}', f'sm[{j}, w]')}"
              for j, t in enumerate(spec.terms)]
    d2, ooffs = _decompose(kept, "o", "ko_", 2) if kept else ([], ["0"] * nt)
    L += ["        " + ln for ln in d2]
    L += _final_lines(spec, ctype, n_red, lambda j, x: f"st{j}(y{j}, {ooffs[j]}, {x})", 8)
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------------------------
# build / launch

class ReduceKernel:
    """Compiled reduction: ``main`` (+ ``combine`` when split > 1), sources and launch shape.

    ``vec`` > 1: the vector row kernel (16-byte loads); its buffers must be aligned to one vector
    (:meth:`aligned`), else :meth:`launch` runs the ``vec=1`` twin."""

    def __init__(self, spec):
        self.spec = spec
        kept, red = _layout(spec)
        self.n_out, self.n_red = _numel(kept), _numel(red)
        self.ctype = spec.acc or compute_type([d for d, _ in spec.inputs] + [d for d, _ in spec.outputs])
        self.vec = vec_width(spec, kept, red) if spec.vec != 1 else 1
        if spec.vec > 1:
            self.vec = min(self.vec, spec.vec)
        self.rows = 1
        if self.vec > 1:
            self.row = True
            self.block, self.rows, self.split, self.unroll = _choose_vec(spec, kept, red, self.vec)
            self.source = _vrow_source(spec, kept, red, self.vec, self.block, self.rows, self.split,
                                       self.unroll, self.ctype)
            self.grid, self.threads = (math.ceil(self.n_out / self.rows), self.split), self.block
        else:
            self.row, self.block, self.split = _choose(spec)
            self.unroll = 4 if SIM or not self.row else 8
            if self.row:
                self.source = _row_source(spec, kept, red, self.block, self.split, self.ctype,
                                          unroll=self.unroll)
                self.grid, self.threads = (self.n_out, self.split), self.block
            else:
                self.source = _col_source(spec, kept, red, self.block, self.split, self.ctype)
                self.grid, self.threads = (math.ceil(self.n_out / 32), self.split), (32, self.block)
        ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, shfl_xor=shfl_xor, min=min)
        for i, (dt, _) in enumerate(spec.inputs):
            ns[f"ld{i}"] = loader(dt, self.ctype)
            if self.vec > 1:
                ns[f"ldv{i}"] = vector_load(self.vec)
                ns[f"cin{i}"] = to_compute(dtype_name(dt), self.ctype)
        for j, (dt, _) in enumerate(spec.outputs):
            ns[f"st{j}"] = storer(dt)
        key = hashlib.sha1(repr(spec).encode()).hexdigest()[:12]
        exec(compile(self.source, f"<reduce {key}>", "exec"), ns)
        self.main = cuda.jit(ns["kernel"])
        self.combine = None
        if self.split > 1:
            if self.n_out <= BLOCK_COMBINE_MAX_OUT:
                self.combine_source = _bcombine_source(spec, kept, self.split, self.ctype)
                self.combine_grid, self.combine_threads = self.n_out, _bcombine_threads(self.split)
            else:
                self.combine_source = _combine_source(spec, kept, self.split, self.ctype)
                self.combine_grid, self.combine_threads = math.ceil(self.n_out / 128), 128
            exec(compile(self.combine_source, f"<reduce-combine {key}>", "exec"), ns)
            self.combine = cuda.jit(ns["combine"])

    def workspace_elems(self):
        return len(self.spec.terms) * self.split * self.n_out if self.split > 1 else 0

    def aligned(self, pointers):
        """True when input buffers at ``pointers`` (None: unknown) suit this kernel's vectors."""
        if self.vec == 1:
            return True
        return all(p is None or p % (self.vec * storage_dtype(dt).itemsize) == 0
                   for p, (dt, _) in zip(pointers, self.spec.inputs))

    def scalar_twin(self):
        """The same reduction with element loads (for misaligned buffers); same split."""
        from dataclasses import replace
        return build_reduce(replace(self.spec, vec=1, split=self.split))

    def launch(self, inputs, outputs, workspace=None, stream=0):
        flat_in = [a.reshape(a.size) for a in inputs]
        flat_out = [a.reshape(a.size) for a in outputs]
        if not self.aligned([getattr(getattr(a, "device_ctypes_pointer", None), "value", None)
                             for a in flat_in]):
            return self.scalar_twin().launch(inputs, outputs, workspace, stream)
        need = self.workspace_elems()
        if need:
            if workspace is None:
                workspace = cuda.device_array(need, dtype=np.dtype(self.ctype), stream=stream)
            elif workspace.size < need or workspace.dtype != np.dtype(self.ctype):
                raise ValueError(f"workspace needs {need} {self.ctype} elements")
            ws = workspace.reshape(workspace.size)
        else:
            ws = placeholder(self.ctype) if workspace is None else workspace.reshape(workspace.size)
        launch(self.main, self.grid, self.threads, stream, *flat_in, *flat_out, ws)
        if self.combine is not None:
            launch(self.combine, self.combine_grid, self.combine_threads, stream, ws, *flat_out)


_CACHE = {}


def build_reduce(spec):
    """The cached :class:`ReduceKernel` for ``spec``."""
    k = _CACHE.get(spec)
    if k is None:
        k = _CACHE[spec] = ReduceKernel(spec)
    return k


def workspace_elems(spec):
    """Workspace (elements of the compute type) :func:`run_reduce` needs for ``spec``."""
    return build_reduce(spec).workspace_elems()


def run_reduce(spec, inputs, outputs, workspace=None, stream=0):
    """Run ``spec`` on numba device arrays (storage dtypes, flat layout given by the spec strides).

    ``workspace`` (optional): a device array of at least :func:`workspace_elems` compute-type
    elements; allocated when omitted. Asynchronous on ``stream``.
    """
    build_reduce(spec).launch(inputs, outputs, workspace, stream)


# --------------------------------------------------------------------------------------------
# cuDNN ops

_OP_TERMS = {
    RO.CUDNN_REDUCE_TENSOR_ADD: Term("v0", "sum"),
    RO.CUDNN_REDUCE_TENSOR_MUL: Term("v0", "prod"),
    RO.CUDNN_REDUCE_TENSOR_MIN: Term("v0", "min"),
    RO.CUDNN_REDUCE_TENSOR_MAX: Term("v0", "max"),
    RO.CUDNN_REDUCE_TENSOR_AMAX: Term("abs(v0)", "max", init=0.0),
    RO.CUDNN_REDUCE_TENSOR_AVG: Term("v0", "sum", "acc / cnt"),
    RO.CUDNN_REDUCE_TENSOR_NORM1: Term("abs(v0)", "sum"),
    RO.CUDNN_REDUCE_TENSOR_NORM2: Term("v0 * v0", "sum", "math.sqrt(acc)"),
    RO.CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS: Term("(v0 if v0 != 0 else ONE)", "prod"),
}


def reduce_spec(mode, shape, x_dtype, x_strides, out_shape, out_dtype, out_strides, block=0,
                split=0, vec=1, rows=0, unroll=0, ctas=0):
    """The :class:`ReduceSpec` of cuDNN reduction ``mode`` (cudnnReduceTensorOp_t); ``vec`` ...
    ``ctas``: the vector row kernel's knobs (see :class:`ReduceSpec`)."""
    term = _OP_TERMS[RO(mode)]
    ctype = compute_type([x_dtype, out_dtype])
    if "ONE" in term.pre:
        term = Term(term.pre.replace("ONE", po.lit(1.0, ctype)), term.combine, term.final,
                    term.init)
    return ReduceSpec(tuple(shape), ((x_dtype, tuple(x_strides)),), tuple(out_shape), (term,),
                      ((out_dtype, tuple(out_strides)),), block, split, vec, rows, unroll, ctas)


def reduce_tensor(mode, x, y, shape, x_dtype, x_strides, out_shape, out_dtype, out_strides,
                  workspace=None, stream=0, block=0, split=0, **knobs):
    """y = reduction ``mode`` of x over the axes where ``out_shape`` is 1 (or a group divisor).

    x, y: numba device arrays in storage dtype, flat layout by their strides (elements).
    Accumulates in float32 (float64 for all-fp64 I/O); NaN propagates; deterministic.
    """
    spec = reduce_spec(mode, shape, x_dtype, x_strides, out_shape, out_dtype, out_strides,
                       block, split, **knobs)
    run_reduce(spec, [x], [y], workspace, stream)


def genstats_spec(shape, x_dtype, x_strides, channel_axis=1, out_dtype="float32", block=0,
                  split=0):
    """GENSTATS (SUM_SQSUM): per-channel sum and sum of squares, outputs [1, C, 1, ...] dense."""
    ca = channel_axis % len(shape)
    out_shape = tuple(n if d == ca else 1 for d, n in enumerate(shape))
    out_strides = tuple(1 if d == ca else 0 for d in range(len(shape)))
    return ReduceSpec(tuple(shape), ((x_dtype, tuple(x_strides)),), out_shape,
                      (Term("v0", "sum"), Term("v0 * v0", "sum")),
                      ((out_dtype, out_strides), (out_dtype, out_strides)), block, split)


def genstats(x, sum_out, sqsum_out, shape, x_dtype, x_strides, channel_axis=1,
             out_dtype="float32", workspace=None, stream=0, block=0, split=0):
    """One pass over x (NCHW, NHWC, any strides): per-channel sum x and sum x*x (C values each)."""
    spec = genstats_spec(shape, x_dtype, x_strides, channel_axis, out_dtype, block, split)
    run_reduce(spec, [x], [sum_out, sqsum_out], workspace, stream)


def _signatures(k):
    from ..runtime.dtypes import array_sig
    spec = k.spec
    ins = [array_sig(d) for d, _ in spec.inputs]
    outs = [array_sig(d) for d, _ in spec.outputs]
    ws = f"{k.ctype}[::1]"
    return ("void(" + ", ".join(ins + outs + [ws]) + ")",
            "void(" + ", ".join([ws] + outs) + ")")


def _register_compile_cases():
    try:
        from ..runtime.compile_check import register_compile_case
    except ImportError:
        return
    from ..pointwise.fused import contiguous_strides as cs
    rows = (64, 4096)
    specs = {
        "reduce_row_add_f32": reduce_spec(RO.CUDNN_REDUCE_TENSOR_ADD, rows, "float32", cs(rows),
                                          (64, 1), "float32", (1, 0), block=512, split=2),
        "reduce_row_norm2_bf16": reduce_spec(RO.CUDNN_REDUCE_TENSOR_NORM2, rows, "bfloat16",
                                             cs(rows), (64, 1), "float32", (1, 0), block=256,
                                             split=1),
        "reduce_col_max_fp16": reduce_spec(RO.CUDNN_REDUCE_TENSOR_MAX, (4096, 64), "float16",
                                           cs((4096, 64)), (1, 64), "float16", (0, 1), block=8,
                                           split=32),
        "genstats_nchw_fp16": genstats_spec((32, 64, 56, 56), "float16", cs((32, 64, 56, 56)),
                                            block=512, split=16),
        "genstats_nhwc_bf16": genstats_spec((32, 56, 56, 64), "bfloat16", cs((32, 56, 56, 64)),
                                            channel_axis=3, block=8, split=256),
    }
    big = (8192, 32768)
    for name, (mode, out, kw) in {
        "reduce_vrow_add_f32_block": (RO.CUDNN_REDUCE_TENSOR_ADD, (8192, 1), dict(block=256, unroll=4, split=1)),
        "reduce_vrow_add_f32_warp": (RO.CUDNN_REDUCE_TENSOR_ADD, (8192, 1), dict(block=128, rows=4, unroll=4, split=1)),
        "reduce_vrow_add_f32_warp_u8": (RO.CUDNN_REDUCE_TENSOR_ADD, (8192, 1), dict(block=128, rows=4, unroll=8, split=1)),
        "reduce_vfull_amax_f32": (RO.CUDNN_REDUCE_TENSOR_AMAX, (1, 1), dict(block=256, unroll=4, split=528)),
        "reduce_vfull_amax_f32_u8": (RO.CUDNN_REDUCE_TENSOR_AMAX, (1, 1), dict(block=512, unroll=8, split=528)),
    }.items():
        specs[name] = reduce_spec(mode, big, "float32", cs(big), out, "float32", cs(out), vec=4, **kw)
    specs["reduce_vrow_norm2_bf16"] = reduce_spec(RO.CUDNN_REDUCE_TENSOR_NORM2, rows, "bfloat16", cs(rows),
                                                  (64, 1), "float32", (1, 0), vec=0, block=256, split=1)
    for name, spec in specs.items():
        k = build_reduce(spec)
        main_sig, comb_sig = _signatures(k)
        threads = k.threads if isinstance(k.threads, int) else k.threads[0] * k.threads[1]
        register_compile_case(name, k.main, main_sig, max_registers=min(255, 65536 // threads))
        if k.combine is not None:
            register_compile_case(name + "_combine", k.combine, comb_sig,
                                  max_registers=min(64, 65536 // k.combine_threads))


_register_compile_cases()
