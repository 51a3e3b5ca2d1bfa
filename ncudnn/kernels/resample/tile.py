"""Register-tiled 2D pooling kernels (float32): each thread owns a TH x TW tile of outputs (forward) or
of dx (backward) and VEC channels, loads the input window the tile needs once into registers (16-byte
vectors: 4 channels per position in NHWC, 4 columns per chunk along W in NCHW) and computes every
element of its tile from registers. Neighbouring windows share their taps in registers instead of
re-reading them, and the number of load instructions per output drops 4-8x against one thread per
element. The kernels are generated Python source (:func:`fwd_tile_kernel`, :func:`bwd_tile_kernel`)
over the vector helpers of :mod:`ncudnn.kernels.primitives.vec`.

Layouts (:func:`tile_layouts`) and the conditions the caller checks (:func:`tile_supported`; 16-byte
aligned bases for the two vector layouts):
  nhwc: unit channel stride, C % 4 == 0, every other stride a multiple of 4; a thread does 4
        channels, every spatial position of its window is one ld4.
  nchw: unit W stride, W (in and out) % 4 == 0, other strides multiples of 4; a thread does one
        channel; window rows are loaded as aligned 4-column chunks (a chunk with one needed column is
        one scalar load); the tile's column base is a multiple of 4 by construction.
  nchw1: unit W stride, anything else; a thread does one channel, scalar loads and stores.
Forward: tile of outputs at (TH*tr, TW*tq); H_out % TH == W_out % TW == 0.
Backward (gather, deterministic, no atomics): tile of dx at (TH*tr, TW*tq), TH % s_h == TW % s_w == 0
  so the covering outputs of every tile element sit at compile-time offsets from the tile's output
  base (TH/s_h*tr, TW/s_w*tq); dy (and IDX) windows load once; MAXPOOL routes by IDX or recomputes the
  covering outputs' winners from an x window. Every out-of-range position is a clamped load and a
  select (checks pruned at compile time where the tile grid never reaches padding).
"""
import functools as _ft
import math as _math

from numba import cuda
from numba import float32 as _nb_float32

from ...types import cudnnPaddingMode_t as _PAD, cudnnResampleMode_t as _RM
from ..primitives.vec import ld4, sel, st4

__all__ = ["fwd_tile_kernel", "bwd_tile_kernel", "tile_layouts", "tile_layout", "tile_supported"]

_TMAX, _TAVG_IN, _TAVG_EX = (_RM.CUDNN_RESAMPLE_MAXPOOL, _RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING,
                             _RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING)
_NEG_INF, _NAN = "float32(-math.inf)", "float32(math.nan)"
_ZERO = "float32(0.0)"


def _nm(v):
    return f"m{-v}" if v < 0 else str(v)


def _t_order(shape, strides):
    return sorted(range(len(shape)), key=lambda d: (-strides[d], d))


def _t_decompose(shape, strides, names):
    order = _t_order(shape, strides)
    lines, r = ["r0 = e"], 0
    for d in reversed(order[1:]):
        lines += [f"{names[d]} = r{r} % {shape[d]}", f"r{r + 1} = r{r} // {shape[d]}"]
        r += 1
    lines.append(f"{names[order[0]]} = r{r}")
    return lines


def _mul(a, k):
    return a if k == 1 else f"{a} * {k}"


class _Axis:
    """One spatial axis of a tiled window: absolute position = step * t + rel, t in [0, count)."""

    def __init__(self, var, step, count, limit, stride):
        self.var, self.step, self.count, self.limit, self.stride = var, step, count, limit, stride

    def checks(self, lo_rel, hi_rel):
        """(needs a low check, needs a high check) for relative positions lo_rel .. hi_rel."""
        return lo_rel < 0, self.step * (self.count - 1) + hi_rel > self.limit - 1

    def base(self):
        return _mul(self.var, self.step)


def _clamped(ax, k):
    """(index clamped into the axis, in-range conditions) of position ``k`` relative to ``ax``'s tile base;
    a bound that cannot be crossed gets neither clamp nor condition."""
    lo, hi = ax.checks(k, k)
    p = f"{ax.base()} + {k}" if k else ax.base()
    q = p
    if lo:
        q = f"max({q}, 0)"
    if hi:
        q = f"min({q}, {ax.limit - 1})"
    return q, ([f"({p} >= 0)"] if lo else []) + ([f"({p} < {ax.limit})"] if hi else [])


def _window(arr, name, base, rows, cols, ra, ca, layout, padv):
    """Lines loading arr at every (row, col) of rows x cols (relative to the tile bases) into registers.

    Returns (lines, get) with get(r, c) -> list of VEC register names (4 for nhwc, 1 for nchw).
    ``padv``: value selected at out-of-range positions (None: leave the clamped load)."""
    lines = []
    rk = {}
    for r in rows:
        q, conds = _clamped(ra, r)
        lines.append(f"{name}r{_nm(r)} = {base} + ({q})" + (f" * {ra.stride}" if ra.stride != 1 else ""))
        if conds and padv is not None:
            lines.append(f"{name}okr{_nm(r)} = {' & '.join(conds)}")
            rk[r] = f"{name}okr{_nm(r)}"
    regs = {}
    if layout in ("nhwc", "nchw1"):
        ck = {}
        for c in cols:
            q, conds = _clamped(ca, c)
            lines.append(f"{name}c{_nm(c)} = ({q})" + (f" * {ca.stride}" if ca.stride != 1 else ""))
            if conds and padv is not None:
                lines.append(f"{name}okc{_nm(c)} = {' & '.join(conds)}")
                ck[c] = f"{name}okc{_nm(c)}"
        for r in rows:
            for c in cols:
                if layout == "nhwc":
                    v = [f"{name}_{_nm(r)}_{_nm(c)}_{j}" for j in range(4)]
                else:
                    v = [f"{name}_{_nm(r)}_{_nm(c)}"]
                fl = [f for f in (rk.get(r), ck.get(c)) if f]
                u = [x + "_u" for x in v] if fl else v
                if layout == "nhwc":
                    lines.append(f"{', '.join(u)} = ld4({arr}, {name}r{_nm(r)} + {name}c{_nm(c)})")
                else:
                    lines.append(f"{u[0]} = {arr}[{name}r{_nm(r)} + {name}c{_nm(c)}]")
                if fl:
                    okt = f"{name}okt_{_nm(r)}_{_nm(c)}"
                    lines.append(f"{okt} = {' & '.join(fl)}")
                    lines += [f"{x} = sel({okt}, {y}, {padv})" for x, y in zip(v, u)]
                regs[r, c] = v
        return lines, lambda r, c: regs[r, c]
    chunks = {}
    for c in cols:
        chunks.setdefault(c // 4, []).append(c)
    for k, need in sorted(chunks.items()):
        c0 = 4 * k
        lo, hi = ca.checks(c0, c0 + 3)
        p = f"{ca.base()} + {c0}" if c0 else ca.base()
        conds = ([f"({p} >= 0)"] if lo else []) + ([f"({p} < {ca.limit})"] if hi else [])
        if len(need) >= 2:
            q = p
            if lo:
                q = f"max({q}, 0)"
            if hi:
                q = f"min({q}, {ca.limit - 4})"
            lines.append(f"{name}k{_nm(k)} = {q}")
        else:
            q = f"{ca.base()} + {need[0]}" if need[0] else ca.base()
            if lo:
                q = f"max({q}, 0)"
            if hi:
                q = f"min({q}, {ca.limit - 1})"
            lines.append(f"{name}k{_nm(k)} = {q}")
        ok = None
        if conds and padv is not None:
            ok = f"{name}okk{_nm(k)}"
            lines.append(f"{ok} = {' & '.join(conds)}")
        for r in rows:
            if len(need) >= 2:
                v = [f"{name}_{_nm(r)}_{_nm(c0 + j)}" for j in range(4)]
            else:
                v = [f"{name}_{_nm(r)}_{_nm(need[0])}"]
            fl = [f for f in (rk.get(r), ok) if f]
            u = [x + "_u" for x in v] if fl else v
            if len(need) >= 2:
                lines.append(f"{', '.join(u)} = ld4({arr}, {name}r{_nm(r)} + {name}k{_nm(k)})")
            else:
                lines.append(f"{u[0]} = {arr}[{name}r{_nm(r)} + {name}k{_nm(k)}]")
            if fl:
                okt = f"{name}okt_{_nm(r)}_{_nm(k)}"
                lines.append(f"{okt} = {' & '.join(fl)}")
                lines += [f"{x} = sel({okt}, {y}, {padv})" for x, y in zip(v, u)]
            for c in need:
                regs[r, c] = [f"{name}_{_nm(r)}_{_nm(c)}"]
    return lines, lambda r, c: regs[r, c]


def _argmax(vals, o, propagate):
    """Lines folding tap values ``vals`` (in window order) into m{o} (max) and b{o} (first winner).

    Every name is assigned once (step names carry the tap): numba's SSA passes are quadratic in
    reassigned names, and these kernels have thousands of fold steps."""
    v0, T = vals[0], len(vals)
    out = [f"m{o}_0 = sel({v0} == {v0}, {v0}, {_NEG_INF})", f"b{o}_0 = 0"]
    if propagate:
        out.append(f"f{o}_0 = sel({v0} != {v0}, 0, -1)")
    for t, v in enumerate(vals[1:], 1):
        if propagate:
            out.append(f"f{o}_{t} = sel(({v} != {v}) & (f{o}_{t - 1} < 0), {t}, f{o}_{t - 1})")
        out += [f"gt{o}_{t} = {v} > m{o}_{t - 1}", f"m{o}_{t} = sel(gt{o}_{t}, {v}, m{o}_{t - 1})",
                f"b{o}_{t} = sel(gt{o}_{t}, {t}, b{o}_{t - 1})"]
    m, b = f"m{o}_{T - 1}", f"b{o}_{T - 1}"
    if propagate:
        f = f"f{o}_{T - 1}"
        out += [f"m{o} = sel({f} >= 0, {_NAN}, {m})", f"b{o} = sel({f} >= 0, {f}, {b})"]
    else:   # NaN taps lose; when tap 0 wins (nothing beat it) the value is tap 0 itself, NaN included
        out += [f"m{o} = sel({b} == 0, {v0}, {m})", f"b{o} = {b}"]
    return out


def _padv(mode, pad):
    if mode == _TMAX and pad == _PAD.CUDNN_NEG_INF_PAD:
        return _NEG_INF
    return _ZERO


def _store(arr, base, layout, TH, TW, ra, ca, vals):
    """Stores of a TH x TW tile of VEC-register lists vals[a][b] at rows ra.base()+a, cols ca.base()+b."""
    out = []
    for a in range(TH):
        ro = f"{base} + ({ra.base()} + {a}) * {ra.stride}"
        if layout == "nhwc":
            for b in range(TW):
                out.append(f"st4({arr}, {ro} + ({ca.base()} + {b}) * {ca.stride}, {', '.join(vals[a][b])})")
        elif layout == "nchw1":
            for b in range(TW):
                out.append(f"{arr}[{ro} + ({ca.base()} + {b})" + (f" * {ca.stride}" if ca.stride != 1 else "")
                           + f"] = {vals[a][b][0]}")
        else:
            for b in range(0, TW, 4):
                out.append(f"st4({arr}, {ro} + {ca.base()} + {b}, {', '.join(vals[a][b + j][0] for j in range(4))})")
    return out


def _head(shape, st, layout, TH, TW, block, args):
    N, C, H, W = shape
    vec = 4 if layout == "nhwc" else 1
    tshape = [N, C // vec, H // TH, W // TW]
    total = _math.prod(tshape)
    lines = _t_decompose(tshape, st, ["n", "cv" if vec == 4 else "c", "tr", "tq"])
    if vec == 4:
        lines.append("c = cv * 4")
    src = [f"def kernel({args}):", f"    e = cuda.blockIdx.x * {block} + cuda.threadIdx.x",
           f"    if e < {total}:"]
    return src, lines, total


def _fwd_tile_source(mode, layout, TH, TW, x_shape, x_st, y_shape, y_st, i_st, w, s, pre, pad, propagate,
                     index, block):
    vec = 4 if layout == "nhwc" else 1
    src, body, total = _head(y_shape, y_st, layout, TH, TW, block, "x, y, idx")
    body.append(f"xb = n * {x_st[0]} + c * {x_st[1]}")
    xr = _Axis("tr", TH * s[0], y_shape[2] // TH, x_shape[2], x_st[2])
    xc = _Axis("tq", TW * s[1], y_shape[3] // TW, x_shape[3], x_st[3])
    rows = sorted({a * s[0] - pre[0] + k for a in range(TH) for k in range(w[0])})
    cols = sorted({b * s[1] - pre[1] + k for b in range(TW) for k in range(w[1])})
    lines, get = _window("x", "x", "xb", rows, cols, xr, xc, layout, _padv(mode, pad))
    body += lines
    ys, bs = [], []
    for a in range(TH):
        ys.append([])
        bs.append([])
        if mode == _TAVG_EX:   # in-range taps per dim of this output row / col
            r0 = a * s[0] - pre[0]
            lo, hi = xr.checks(r0, r0 + w[0] - 1)
            body.append(f"cr{a} = " + (f"min({xr.base()} + {r0 + w[0]}, {x_shape[2]}) - max({xr.base()} + {r0}, 0)"
                                       if lo or hi else str(w[0])))
        for b in range(TW):
            if mode == _TAVG_EX and a == 0:
                c0 = b * s[1] - pre[1]
                lo, hi = xc.checks(c0, c0 + w[1] - 1)
                body.append(f"cc{b} = " + (f"min({xc.base()} + {c0 + w[1]}, {x_shape[3]}) - max({xc.base()} + {c0}, 0)"
                                           if lo or hi else str(w[1])))
            yo, bo = [], []
            for j in range(vec):
                o = f"_{a}_{b}_{j}"
                vals = [get(a * s[0] - pre[0] + ky, b * s[1] - pre[1] + kx)[j]
                        for ky in range(w[0]) for kx in range(w[1])]
                if mode == _TMAX:
                    body += _argmax(vals, o, propagate)
                    bo.append(f"b{o}")
                else:
                    if mode == _TAVG_IN:
                        body.append(f"m{o} = ({' + '.join(vals)}) * float32({1.0 / (w[0] * w[1])!r})")
                    else:
                        body.append(f"m{o} = ({' + '.join(vals)}) / float32(max(cr{a} * cc{b}, 1))")
                yo.append(f"m{o}")
            ys[a].append(yo)
            bs[a].append(bo)
    yr = _Axis("tr", TH, y_shape[2] // TH, y_shape[2], y_st[2])
    yc = _Axis("tq", TW, y_shape[3] // TW, y_shape[3], y_st[3])
    body += _store("y", f"n * {y_st[0]} + c * {y_st[1]}", layout, TH, TW, yr, yc, ys)
    if index and mode == _TMAX:
        ir = _Axis("tr", TH, y_shape[2] // TH, y_shape[2], i_st[2])
        ic = _Axis("tq", TW, y_shape[3] // TW, y_shape[3], i_st[3])
        body += _store("idx", f"n * {i_st[0]} + c * {i_st[1]}", layout, TH, TW, ir, ic, bs)
    return "\n".join(src + ["        " + ln for ln in body]) + "\n", total


def _covering(TH, s, w, p):
    """{tile element a: [output offsets o (relative to the tile's output base) whose window holds a]}."""
    return {a: [o for o in range((a + p - w + 1) // s - 1, (a + p) // s + 2) if 0 <= a + p - o * s < w]
            for a in range(TH)}


def _bwd_tile_source(mode, layout, TH, TW, x_shape, dx_st, y_shape, dy_st, i_st, x_st, w, s, pre, pad,
                     propagate, index, block):
    vec = 4 if layout == "nhwc" else 1
    src, body, total = _head(x_shape, dx_st, layout, TH, TW, block, "dy, idx, x, dx")
    covr, covc = _covering(TH, s[0], w[0], pre[0]), _covering(TW, s[1], w[1], pre[1])
    orows = sorted({o for v in covr.values() for o in v})
    ocols = sorted({o for v in covc.values() for o in v})
    Ho, Wo = y_shape[2:]
    yr = _Axis("tr", TH // s[0], x_shape[2] // TH, Ho, dy_st[2])
    yc = _Axis("tq", TW // s[1], x_shape[3] // TW, Wo, dy_st[3])
    body.append(f"db = n * {dy_st[0]} + c * {dy_st[1]}")
    lines, gy = _window("dy", "g", "db", orows, ocols, yr, yc, layout, _ZERO)
    body += lines
    tap = {}
    recompute = mode == _TMAX and not index
    if mode == _TMAX and index:
        ir = _Axis("tr", TH // s[0], x_shape[2] // TH, Ho, i_st[2])
        ic = _Axis("tq", TW // s[1], x_shape[3] // TW, Wo, i_st[3])
        body.append(f"ib = n * {i_st[0]} + c * {i_st[1]}")
        lines, gi = _window("idx", "k", "ib", orows, ocols, ir, ic, layout, None)
        body += lines
        tap = {(r, c): gi(r, c) for r in orows for c in ocols}
    if recompute:
        xr = _Axis("tr", TH, x_shape[2] // TH, x_shape[2], x_st[2])
        xc = _Axis("tq", TW, x_shape[3] // TW, x_shape[3], x_st[3])
        body.append(f"xb = n * {x_st[0]} + c * {x_st[1]}")
        rows = sorted({o * s[0] - pre[0] + k for o in orows for k in range(w[0])})
        cols = sorted({o * s[1] - pre[1] + k for o in ocols for k in range(w[1])})
        lines, gx = _window("x", "x", "xb", rows, cols, xr, xc, layout, _padv(mode, pad))
        body += lines
        for r in orows:
            for c in ocols:
                tap[r, c] = []
                for j in range(vec):
                    o = f"_{_nm(r)}_{_nm(c)}_{j}"
                    vals = [gx(r * s[0] - pre[0] + ky, c * s[1] - pre[1] + kx)[j]
                            for ky in range(w[0]) for kx in range(w[1])]
                    body += _argmax(vals, o, propagate)
                    tap[r, c].append(f"b{o}")
    rc = {}
    if mode == _TAVG_EX:
        for r in orows:
            a0 = f"({yr.base()} + {r}) * {s[0]} - {pre[0]}"
            body.append(f"er{_nm(r)} = min({a0} + {w[0]}, {x_shape[2]}) - max({a0}, 0)")
        for c in ocols:
            a0 = f"({yc.base()} + {c}) * {s[1]} - {pre[1]}"
            body.append(f"ec{_nm(c)} = min({a0} + {w[1]}, {x_shape[3]}) - max({a0}, 0)")
        for r in orows:
            for c in ocols:
                body.append(f"rc{_nm(r)}_{_nm(c)} = float32(1.0) / float32(max(er{_nm(r)} * ec{_nm(c)}, 1))")
                rc[r, c] = f"rc{_nm(r)}_{_nm(c)}"
    accs = []
    for a in range(TH):
        accs.append([])
        for b in range(TW):
            regs = []
            for j in range(vec):
                terms = []
                for r in covr[a]:
                    for c in covc[b]:
                        g = gy(r, c)[j]
                        if mode == _TMAX:
                            t = (a + pre[0] - r * s[0]) * w[1] + (b + pre[1] - c * s[1])
                            terms.append(f"sel({tap[r, c][j]} == {t}, {g}, {_ZERO})")
                        elif mode == _TAVG_EX:
                            terms.append(f"{g} * {rc[r, c]}")
                        else:
                            terms.append(g)
                acc = f"d_{a}_{b}_{j}"
                tot = " + ".join(terms) if terms else _ZERO
                if mode == _TAVG_IN:
                    tot = f"({tot}) * float32({1.0 / (w[0] * w[1])!r})"
                body.append(f"{acc} = {tot}")
                regs.append(acc)
            accs[a].append(regs)
    dr = _Axis("tr", TH, x_shape[2] // TH, x_shape[2], dx_st[2])
    dc = _Axis("tq", TW, x_shape[3] // TW, x_shape[3], dx_st[3])
    body += _store("dx", f"n * {dx_st[0]} + c * {dx_st[1]}", layout, TH, TW, dr, dc, accs)
    return "\n".join(src + ["        " + ln for ln in body]) + "\n", total


def tile_layouts(shape, strides):
    """The tiled kernels' layouts a 4-D float32 tensor of these dims / strides fits, best first: "nhwc"
    (4-channel vectors), "nchw" (4-column chunks), "nchw1" (unit W stride, scalar loads and stores)."""
    if len(shape) != 4:
        return ()
    N, C, H, W = shape
    if strides[1] == 1 and C % 4 == 0 and all(int(v) % 4 == 0 for v in (strides[0], strides[2], strides[3])):
        return ("nhwc",)
    if strides[3] == 1 and W % 4 == 0 and all(int(v) % 4 == 0 for v in strides[:3]):
        return ("nchw", "nchw1")
    return ("nchw1",) if strides[3] == 1 and W > 1 else ()


def tile_layout(shape, strides):
    """The best of :func:`tile_layouts`, or None."""
    lays = tile_layouts(shape, strides)
    return lays[0] if lays else None


def tile_supported(direction, mode, layout, TH, TW, x_shape, y_shape, w, s, pre, pad, index):
    """(ok, reason) for the tiled kernels on this problem and tile (layouts already checked per tensor)."""
    if len(w) != 2:
        return False, "not 2-D"
    if mode not in (_TMAX, _TAVG_IN, _TAVG_EX):
        return False, "not pooling"
    if pad == _PAD.CUDNN_EDGE_VAL_PAD and mode != _TAVG_EX:
        return False, "EDGE padding"
    if any(p < 0 or p >= k for p, k in zip(pre, w)):
        return False, "pre-padding outside [0, window)"
    if layout == "nchw" and (TW % 4 or y_shape[3] % 4 or x_shape[3] % 4):
        return False, "NCHW needs TW, W_in, W_out multiples of 4"
    if direction == "fwd":
        if y_shape[2] % TH or y_shape[3] % TW:
            return False, f"output {y_shape[2:]} not a multiple of the tile {TH}x{TW}"
        if layout == "nchw" and (TW * s[1]) % 4:
            return False, "NCHW forward needs TW * stride_w % 4 == 0"
        return True, ""
    if x_shape[2] % TH or x_shape[3] % TW or TH % s[0] or TW % s[1]:
        return False, (f"dx {x_shape[2:]} / tile {TH}x{TW} / stride {s}: the tile must divide dx and be a "
                       "multiple of the stride")
    if layout == "nchw" and (TW // s[1]) % 4:
        return False, "NCHW backward needs (TW / stride_w) % 4 == 0"
    if mode == _TMAX and not index and w[0] * w[1] > 16:
        return False, "MAXPOOL backward from X: window too large to recompute in registers"
    return True, ""


def _tjit(src, name):
    ns = dict(math=_math, float32=_nb_float32, __name__=__name__, cuda=cuda, ld4=ld4, st4=st4, sel=sel)
    exec(compile(src, f"<resample_tile {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


@_ft.lru_cache(maxsize=None)
def fwd_tile_kernel(mode, layout, TH, TW, x_shape, x_st, y_shape, y_st, i_st, w, s, pre, pad, propagate, index,
                    block):
    """(dispatcher, source, work items) of the tiled forward ``kernel(x, y, idx)`` (float32 x / y, int32 idx;
    ``index`` True writes the max-pool winners)."""
    src, total = _fwd_tile_source(_RM(mode), layout, TH, TW, x_shape, x_st, y_shape, y_st, i_st, w, s, pre,
                                  _PAD(pad), propagate, index, block)
    return _tjit(src, "fwd"), src, total


@_ft.lru_cache(maxsize=None)
def bwd_tile_kernel(mode, layout, TH, TW, x_shape, dx_st, y_shape, dy_st, i_st, x_st, w, s, pre, pad, propagate,
                    index, block):
    """(dispatcher, source, work items) of the tiled gather ``kernel(dy, idx, x, dx)``; MAXPOOL routes by idx
    (``index`` True) or recomputes the winners from x."""
    src, total = _bwd_tile_source(_RM(mode), layout, TH, TW, x_shape, dx_st, y_shape, dy_st, i_st, x_st, w, s,
                                  pre, _PAD(pad), propagate, index, block)
    return _tjit(src, "bwd"), src, total
