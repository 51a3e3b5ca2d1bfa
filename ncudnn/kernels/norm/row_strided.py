"""Layer and RMS norm row kernels on tensors of any strides: each tensor's elements are addressed through its own
strides (compiled in), so X, Y, DY, DX, SCALE, BIAS, DSCALE, DBIAS and the statistics may each have a layout of
their own (permuted, padded, broadcast inputs).

A row is one sample (batch index ``row``); element ``c`` of it (0 <= c < n, n = prod(dims[1:])) is decomposed
into the indices of the normalized dims in row-major order, ``c = ((i1 * d2 + i2) * d3 + i3) ...``, and tensor T
reads ``row * T.stride[0] + sum_k i_k * T.stride[k]`` (dims of size 1 contribute nothing). Geometry: rows of up
to :data:`WARP_ROW_MAX` elements a warp per row (``RPB`` rows a block, warp shuffles only), longer rows a block
per row; threads stride over the row (element ``t + k * block``).

Forward statistics are two-pass from memory (the mean, then the centred sum of squares: no cancellation when
|mean| >> std), y a third pass; RMS norm one pass of squares. Backward dx: one pass for the two row sums
(mean(g), mean(g * xhat), g = dy * scale), one to write dx. dscale / dbias: per-(row chunk, column) partial sums
(:func:`dparams_partial_kernel`), then the chunks added in order per column and stored at DSCALE's / DBIAS's
strides (:func:`dparams_combine_kernel`; deterministic, no atomics). All math in float32 registers (float64
when every tensor is float64); eps a run-time value (by value or a one-element device tensor).
"""
import functools
import math

from numba import cuda

from ..pointwise import ops as po
from ..primitives.warp import block_sum, block_sum2, warp_sum
from ..runtime.dtypes import compute_type, loader, storer
from .row import _frame

__all__ = ["strided_config", "strided_fwd_kernel", "strided_bwd_kernel", "dparams_partial_kernel",
           "dparams_combine_kernel", "dparams_chunks", "WARP_ROW_MAX", "RPB", "BLOCK", "TX"]

#: rows of up to this many elements run a warp per row
WARP_ROW_MAX = 1024
#: rows a block in warp-per-row mode
RPB = 4
#: threads a row (one row a block) for longer rows
BLOCK = 256
#: threads a block of the dscale / dbias kernels (one column a thread)
TX = 128


def strided_config(n):
    """(threads per block, threads a row, rows per block) for rows of n elements."""
    return (32 * RPB, 32, RPB) if n <= WARP_ROW_MAX else (BLOCK, BLOCK, 1)


def dparams_chunks(rows, n, sms):
    """(chunks, rows a chunk) of the dscale / dbias partial sums: about 4 blocks an SM, at most 256 chunks."""
    want = max(1, math.ceil(4 * sms * TX / max(n, 1)))
    chunks = max(1, min(rows, 256, want))
    cr = math.ceil(rows / chunks)
    return math.ceil(rows / cr), cr


def _jit_source(source, name, **names):
    """The generated kernel, compiled as this module's (its compile cases are credited here)."""
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, block_sum=block_sum, block_sum2=block_sum2,
              warp_sum=warp_sum, **names)
    exec(compile(source, f"<norm {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


def _digits(inner, var="c", ind="        "):
    """Lines decomposing flat index ``var`` of the normalized dims ``inner`` (dims[1:]) into ``i1, i2, ...``
    (dims of size 1 get none)."""
    kept = [(k + 1, d) for k, d in enumerate(inner) if d > 1]
    if not kept:
        return []
    lines = [f"{ind}q = {var}"]
    for k, d in reversed(kept[1:]):
        lines += [f"{ind}i{k} = q % {d}", f"{ind}q = q // {d}"]
    lines.append(f"{ind}i{kept[0][0]} = q")
    return lines


def _offset(inner, strides, m=1):
    """Source of the element offset within a row of a tensor of these strides (strides[:m] are the row axes')."""
    terms = [f"i{k + 1} * {strides[k + m]}" for k, d in enumerate(inner) if d > 1 and strides[k + m]]
    return " + ".join(terms) or "0"


def _offsets(inner, named, ind="        ", m=1):
    """Lines defining ``o_<name> = <offset>`` for each (name, strides) of ``named`` (equal strides share one)."""
    out, seen = [], {}
    for name, st in named:
        expr = _offset(inner, st, m)
        if expr in seen:
            out.append(f"{ind}o_{name} = o_{seen[expr]}")
        else:
            seen[expr] = name
            out.append(f"{ind}o_{name} = {expr}")
    return out


def _row_digits(outer, var="row", ind="    "):
    """Lines decomposing row index ``var`` into the indices ``j0, j1, ...`` of the row axes ``outer`` (only
    with several row axes; one row axis is the row index itself)."""
    if outer is None or len(outer) == 1:
        return []
    kept = [(k, d) for k, d in enumerate(outer) if d > 1]
    if not kept:
        return []
    lines = [f"{ind}q = {var}"]
    for k, d in reversed(kept[1:]):
        lines += [f"{ind}j{k} = q % {d}", f"{ind}q = q // {d}"]
    lines.append(f"{ind}j{kept[0][0]} = q")
    return lines


def _base(outer, strides, var="row"):
    """Source of a tensor's row offset: ``row * strides[0]`` with one row axis, else the row axes' indices
    (:func:`_row_digits`) times their strides (a stride 0 broadcasts the tensor over that axis)."""
    if outer is None or len(outer) == 1:
        return f"{var} * {strides[0]}"
    terms = [f"j{k} * {strides[k]}" for k, d in enumerate(outer) if d > 1 and strides[k]]
    return " + ".join(terms) or "0"


def _loop(n, block, body, ind="    "):
    return [f"{ind}c = t", f"{ind}while c < {n}:"] + body + [f"{ind}    c += {block}"]


def _fwd_source(n, inner, layout, center, has_bias, write_stats, ct, eps_array, outer=None):
    L = po.lit
    zero, one, inv_n = L(0.0, ct), L(1.0, ct), L(1.0 / n, ct)
    xs, ss, bs, ys, ms, vs = layout
    m = 1 if outer is None else len(outer)
    threads, block, rpb = strided_config(n)
    s, RS, _ = _frame("x, scale, bias, y, s_mean, s_inv, eps_in", block, rpb, ct)
    s += ["    eps = ld_eps(eps_in, 0)" if eps_array else f"    eps = {ct}(eps_in)"] + _row_digits(outer)
    s += [f"    bx = {_base(outer, xs)}", f"    by = {_base(outer, ys)}"]
    if outer is not None:       # parameters per row group (adaptive layer norm: SCALE / BIAS [B, 1, C])
        s += [f"    bs = {_base(outer, ss)}"] + ([f"    bb = {_base(outer, bs)}"] if has_bias else [])
    dx = _digits(inner) + _offsets(inner, [("x", xs)], m=m)
    if center:
        s += [f"    a = {zero}"] + _loop(n, block, dx + ["        a += ldx(x, bx + o_x)"])
        s += [f"    mean = {RS('a')} * {inv_n}"]
        s += [f"    b = {zero}"] + _loop(n, block, dx + ["        v = ldx(x, bx + o_x) - mean", "        b += v * v"])
    else:
        s += [f"    mean = {zero}", f"    b = {zero}"]
        s += _loop(n, block, dx + ["        v = ldx(x, bx + o_x)", "        b += v * v"])
    s += [f"    var = {RS('b')} * {inv_n}", f"    inv = {one} / math.sqrt(var + eps)"]
    if write_stats:
        s.append("    if t == 0:")
        if center:
            s.append(f"        sts(s_mean, {_base(outer, ms)}, mean)")
        s.append(f"        sts(s_inv, {_base(outer, vs)}, inv)")
    named = [("x", xs), ("y", ys), ("s", ss)] + ([("b", bs)] if has_bias else [])
    ps, pb = ("bs + o_s", "bb + o_b") if outer is not None else ("o_s", "o_b")
    val = f"(ldx(x, bx + o_x) - mean) * inv * lds(scale, {ps})" + (f" + lds(bias, {pb})" if has_bias else "")
    s += _loop(n, block, _digits(inner) + _offsets(inner, named, m=m) + [f"        sty(y, by + o_y, {val})"])
    return "\n".join(s) + "\n"


@functools.lru_cache(maxsize=None)
def strided_fwd_kernel(n, inner, layout, center, has_bias, write_stats, x_dt, p_dt, y_dt, s_dt, eps_dt=None,
                       outer=None):
    """Forward on strided tensors. ``inner``: dims[1:] of X; ``layout``: the strides of (X, SCALE, BIAS, Y,
    MEAN, INV_VARIANCE), full tuples (an absent tensor's: X's); ``center`` False is RMS norm. Arguments
    ``(x, scale, bias, y, s_mean, s_inv, eps, nrows)`` as :func:`ncudnn.kernels.norm.row.row_fwd_kernel`'s;
    grid ceil(rows / rows-a-block) of :func:`strided_config`. Returns (dispatcher, source).

    ``outer`` (adaptive layer norm): the dims of several row axes (rows = their product, row-major); the
    tuples of ``layout`` then hold ``len(outer)`` row-axis strides before those of ``inner``, and SCALE / BIAS
    are read at a row offset too (stride 0 on the axes they are broadcast over, e.g. [B, 1, C] on [B, S, C])."""
    ct = compute_type([x_dt, p_dt, y_dt])
    src = _fwd_source(n, inner, layout, center, has_bias, write_stats, ct, eps_dt is not None, outer)
    return _jit_source(src, "row-fwd-strided", ldx=loader(x_dt, ct), lds=loader(p_dt, ct), sty=storer(y_dt),
                       sts=storer(s_dt), ld_eps=loader(eps_dt or "float32", ct)), src


def _bwd_source(n, inner, layout, center, ct, outer=None):
    L = po.lit
    zero, inv_n = L(0.0, ct), L(1.0 / n, ct)
    xs, dys, ss, ms, vs, dxs = layout
    m = 1 if outer is None else len(outer)
    threads, block, rpb = strided_config(n)
    s, _, RS2 = _frame("x, dy, scale, s_mean, s_inv, dx", block, rpb, ct)
    s += _row_digits(outer)
    s += [f"    bx = {_base(outer, xs)}", f"    bd = {_base(outer, dys)}", f"    bo = {_base(outer, dxs)}",
          f"    mean = lds_stat(s_mean, {_base(outer, ms)})" if center else f"    mean = {zero}",
          f"    inv = lds_stat(s_inv, {_base(outer, vs)})"]
    if outer is not None:
        s.append(f"    bs = {_base(outer, ss)}")
    named = [("x", xs), ("d", dys), ("s", ss)]
    ps = "bs + o_s" if outer is not None else "o_s"
    hg = ["        h = (ldx(x, bx + o_x) - mean) * inv", f"        g = ldd(dy, bd + o_d) * lds(scale, {ps})"]
    s += [f"    a = {zero}", f"    b = {zero}"]
    s += _loop(n, block, _digits(inner) + _offsets(inner, named, m=m) + hg + ["        a += g", "        b += g * h"])
    s += [f"    a, b = {RS2('a', 'b')}", f"    a = a * {inv_n}" if center else f"    a = {zero}",
          f"    b = b * {inv_n}"]
    s += _loop(n, block, _digits(inner) + _offsets(inner, named + [("o", dxs)], m=m) + hg
               + ["        stx(dx, bo + o_o, inv * (g - a - h * b))"])
    return "\n".join(s) + "\n"


@functools.lru_cache(maxsize=None)
def strided_bwd_kernel(n, inner, layout, center, x_dt, dy_dt, p_dt, dx_dt, s_dt, outer=None):
    """Backward dx on strided tensors; ``layout``: the strides of (X, DY, SCALE, MEAN, INV_VARIANCE, DX) (an
    absent MEAN's: INV_VARIANCE's). Arguments ``(x, dy, scale, s_mean, s_inv, dx, nrows)``. Returns
    (dispatcher, source). ``outer``: several row axes, as :func:`strided_fwd_kernel`'s."""
    ct = compute_type([x_dt, dy_dt, p_dt, dx_dt])
    src = _bwd_source(n, inner, layout, center, ct, outer)
    return _jit_source(src, "row-bwd-strided", ldx=loader(x_dt, ct), ldd=loader(dy_dt, ct), lds=loader(p_dt, ct),
                       lds_stat=loader(s_dt, ct), stx=storer(dx_dt)), src


def _partial_source(n, inner, layout, center, ct, outer=None, groups=None):
    zero = po.lit(0.0, ct)
    xs, dys, ms, vs = layout
    m = 1 if outer is None else len(outer)
    B = (lambda st: _base(outer, st, "r"))
    h = f"(ldx(x, {B(xs)} + o_x) - lds(s_mean, {B(ms)}))" if center else f"ldx(x, {B(xs)} + o_x)"
    s = ["def kernel(x, dy, s_mean, s_inv, part0, part1, nrows, chunk_rows):",
         f"    c = cuda.blockIdx.x * {TX} + cuda.threadIdx.x",
         f"    if c >= {n}:", "        return",
         "    k = cuda.blockIdx.y"]
    s += _digits(inner, ind="    ") + _offsets(inner, [("x", xs), ("d", dys)], ind="    ", m=m)
    if groups is None:
        s += ["    r0 = k * chunk_rows", "    r1 = min(r0 + chunk_rows, nrows)"]
    else:                       # chunks of one row group (rows of one batch entry) each
        cpg, grows = groups
        s += [f"    grp = k // {cpg}", f"    r0 = grp * {grows} + (k - grp * {cpg}) * chunk_rows",
              f"    r1 = min(r0 + chunk_rows, grp * {grows} + {grows})"]
    s += [f"    a = {zero}", f"    b = {zero}", "    for r in range(r0, r1):"] + _row_digits(outer, "r", "        ")
    s += [f"        g = ldd(dy, {B(dys)} + o_d)",
          "        a += g",
          f"        b += g * {h} * lds(s_inv, {B(vs)})",
          f"    stp(part0, k * {n} + c, a)", f"    stp(part1, k * {n} + c, b)"]
    return "\n".join(s) + "\n"


@functools.lru_cache(maxsize=None)
def dparams_partial_kernel(n, inner, layout, center, x_dt, dy_dt, s_dt, outer=None, groups=None):
    """Per-(row chunk, column) partial sums on strided tensors: part0 = sum dy, part1 = sum dy * xhat, at
    ``chunk * n + c`` (float32; float64 when every tensor is). ``layout``: the strides of (X, DY, MEAN,
    INV_VARIANCE). Arguments ``(x, dy, s_mean, s_inv, part0, part1, rows, chunk_rows)``; grid (ceil(n / TX),
    chunks), block TX. Returns (dispatcher, source). ``outer``: several row axes, as
    :func:`strided_fwd_kernel`'s; ``groups`` = (chunks a group, rows a group): the rows split into groups of
    consecutive rows (adaptive layer norm: one batch entry's), chunk k covering rows of group k // chunks a group only."""
    ct = compute_type([x_dt, dy_dt, s_dt])
    src = _partial_source(n, inner, layout, center, ct, outer, groups)
    return _jit_source(src, "row-dparams-strided", ldx=loader(x_dt, ct), ldd=loader(dy_dt, ct),
                       lds=loader(s_dt, ct), stp=storer(ct)), src


def _combine_source(n, inner, layout, write0, write1, ct, m=None):
    zero = po.lit(0.0, ct)
    s0, s1 = layout
    grouped, m = m is not None, m or 1
    loop = "    for k in range(chunks):" if not grouped else "    for k in range(grp * chunks, grp * chunks + chunks):"
    s = ["def kernel(part0, part1, out0, out1, chunks):",
         f"    c = cuda.blockIdx.x * {TX} + cuda.threadIdx.x",
         f"    if c >= {n}:", "        return"] + (["    grp = cuda.blockIdx.y"] if grouped else []) + [
         f"    a = {zero}", f"    b = {zero}", loop,
         f"        a += ldp(part0, k * {n} + c)", f"        b += ldp(part1, k * {n} + c)"]
    s += _digits(inner, ind="    ") + _offsets(inner, [("a", s0), ("b", s1)], ind="    ", m=m)
    ga, gb = (f"grp * {s0[0]} + o_a", f"grp * {s1[0]} + o_b") if grouped else ("o_a", "o_b")
    if write0:
        s.append(f"    st0(out0, {ga}, a)")
    if write1:
        s.append(f"    st1(out1, {gb}, b)")
    return "\n".join(s) + "\n"


@functools.lru_cache(maxsize=None)
def dparams_combine_kernel(n, inner, layout, ct, out0_dt, out1_dt, write0, write1, m=None):
    """``out0 = sum_k part0[k, c]`` (dbias), ``out1 = sum_k part1[k, c]`` (dscale), the chunks added in order,
    stored at the strides ``layout`` = (out0's, out1's) (``write*`` False skips one). Arguments
    ``(part0, part1, out0, out1, chunks)``; grid ceil(n / TX), block TX. Returns (dispatcher, source).
    ``m`` (adaptive layer norm, the layout tuples holding ``m`` row-axis strides first): one output row per
    group, grid (ceil(n / TX), groups): group g adds its ``chunks`` chunks g * chunks .. and stores at
    ``g * strides[0]`` (the batch axis)."""
    src = _combine_source(n, inner, layout, write0, write1, ct, m)
    return _jit_source(src, "row-dparams-combine-strided", ldp=loader(ct, ct), st0=storer(out0_dt or ct),
                       st1=storer(out1_dt or ct)), src
