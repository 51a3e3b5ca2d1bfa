"""Direct resample kernels: pooling (MAXPOOL, AVGPOOL including / excluding padding) forward and
backward, NEAREST / BILINEAR forward.

Geometry and semantics are those of :mod:`ncudnn.kernels.resample.generic` (and the float64 oracle
:mod:`ncudnn.reference.resample`); these kernels are the fast path for integer pooling windows of at
most ``MAX_TAPS`` taps.

Forward: one thread per ``VEC`` consecutive channels of one output element (VEC = 4 for float32
with unit channel stride, i.e. NHWC: one 16-byte load per tap, coalesced across the channels of a
warp; VEC = 1 otherwise, threads in y's memory order, so NCHW threads run along W and neighbouring
outputs share their taps through L1). No grid-stride loop: a thread per work item. The window is
unrolled at compile time; per dim and tap the clamped input offset and the in-range flag are computed
once (and only where padding can be reached: the checks are pruned at compile time), then every tap
is one unconditional load from a clamped (always valid) address and a select, so all loads of a
thread are in flight together. The max-pool index is written only when ``INDEX`` says so.

Backward (gather, deterministic, no atomics): one thread per VEC channels of one dx element. Per
spatial dim the outputs whose windows cover input position p are ``o = (p + pre) // s - j`` for
``j < ceil(w / s)`` (integer arithmetic, no float floors); each is checked (o in range, tap
``p + pre - o*s < w``) and dy is loaded from the clamped position and selected. MAXPOOL routes dy
by the forward's index (``INDEX_IN``) or, without one, recomputes each covering window's winner from
x. EDGE padding (clamped taps feeding the edge elements) is left to the generic gather of
:mod:`ncudnn.kernels.resample.generic`, except for AVGPOOL_EXCLUDE_PADDING, which never reads padding.

NEAREST / BILINEAR forward: the same thread mapping; per dim the sample centre, its 1 or 2 taps
(clamped offsets, range flags, weights) once, the 2^D tap products unrolled.
"""
import functools
import itertools
import math

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, loader, storer
from ..primitives.vec import ld4, sel, st4
from ...types import cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM

__all__ = ["MAX_TAPS", "fwd_kernel", "bwd_kernel", "bwd_supported", "grid"]

MAX_TAPS = 64
_MAX, _AVG_IN, _AVG_EX = (RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING,
                          RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING)
_NEAREST, _BILINEAR = RM.CUDNN_RESAMPLE_NEAREST, RM.CUDNN_RESAMPLE_BILINEAR


def grid(total_items, block):
    return max(1, -(-int(total_items) // int(block)))


def _order(shape, strides):
    return sorted(range(len(shape)), key=lambda d: (-strides[d], d))


def _decompose(shape, strides, names):
    """Lines giving each logical coordinate from the flat work index ``e`` (strides' memory order)."""
    order = _order(shape, strides)
    lines = ["r = e"]
    for d in reversed(order[1:]):
        lines += [f"{names[d]} = r % {shape[d]}", f"r = r // {shape[d]}"]
    lines.append(f"{names[order[0]]} = r")
    return lines


def _off(strides, names):
    t = [f"{c} * {s}" if s != 1 else c for c, s in zip(names, strides) if s]
    return " + ".join(t) if t else "0"


def _load(vec, arr, off, out, fn):
    if vec == 4:
        return [f"{', '.join(f'{out}{j}' for j in range(4))} = ld4({arr}, {off})"]
    return [f"{out}0 = {fn}({arr}, {off})"]


def _max_step(t, vec, propagate, L, u="u"):
    """Lines folding tap ``t`` (values ``u<j>``) into the running max m<j> / argmax b<j>.

    Branch-free (``sel`` is a select): numba's IR stays one straight block, which keeps the JIT fast."""
    out = []
    for j in range(vec):
        v = f"{u}{j}"
        if t == 0:
            out += [f"v0_{j} = {v}", f"m{j} = sel({v} == {v}, {v}, {L(-math.inf)})", f"b{j} = 0"]
            if propagate:
                out.append(f"f{j} = sel({v} != {v}, 0, -1)")
            continue
        if propagate:
            out.append(f"f{j} = sel(({v} != {v}) & (f{j} < 0), {t}, f{j})")
        out += [f"gt = {v} > m{j}", f"m{j} = sel(gt, {v}, m{j})", f"b{j} = sel(gt, {t}, b{j})"]
    return out


def _max_final(vec, propagate, L):
    out = []
    for j in range(vec):
        if propagate:
            out += [f"m{j} = sel(f{j} >= 0, {L(math.nan)}, m{j})", f"b{j} = sel(f{j} >= 0, f{j}, b{j})"]
        else:   # NaN taps lose; when tap 0 wins (nothing beat it) y is tap 0 itself, NaN included
            out.append(f"m{j} = sel(b{j} == 0, v0_{j}, m{j})")
    return out


def _fwd_taps(vec, x_shape, x_st, y_shape, w, s, pre, a, full_checks=False):
    """Per dim d: (lines, offset names per tap, flag names per tap or None) for window starts a[d]."""
    D = len(w)
    lines, offs, oks = [], [], []
    for d in range(D):
        n_in, o_n = x_shape[2 + d], y_shape[2 + d]
        od, kd = [], []
        for k in range(w[d]):
            lo = full_checks or k < pre[d]
            hi = full_checks or (o_n - 1) * s[d] - pre[d] + k > n_in - 1
            p = f"{a[d]} + {k}"
            q = p
            if lo:
                q = f"max({q}, 0)"
            if hi:
                q = f"min({q}, {n_in - 1})"
            tag = f"{a[d]}_{k}"
            lines.append(f"q{tag} = ({q})" + (f" * {x_st[2 + d]}" if x_st[2 + d] != 1 else ""))
            conds = ([f"({p} >= 0)"] if lo else []) + ([f"({p} < {n_in})"] if hi else [])
            if conds:
                lines.append(f"ok{tag} = {' & '.join(conds)}")
            od.append(f"q{tag}")
            kd.append(f"ok{tag}" if conds else None)
        offs.append(od)
        oks.append(kd)
    return lines, offs, oks


def _tap_values(vec, base, offs, oks, k, pad, mode, L, ldx):
    """Lines loading tap k (multi-index) into u<j>, padding selected in."""
    D = len(k)
    off = " + ".join([base] + [offs[d][k[d]] for d in range(D)])
    lines = _load(vec, "x", off, "u", "ldx")
    conds = [oks[d][k[d]] for d in range(D) if oks[d][k[d]] is not None]
    if conds and (pad != PAD.CUDNN_EDGE_VAL_PAD or mode == _AVG_EX):
        padv = L(0.0) if (pad == PAD.CUDNN_ZERO_PAD or mode == _AVG_EX) else L(-math.inf)
        lines.append(f"okt = {' & '.join(conds)}")
        lines += [f"u{j} = sel(okt, u{j}, {padv})" for j in range(vec)]
    return lines


def _fwd_source(mode, vec, x_shape, x_st, y_shape, y_st, i_st, w, s, pre, pad, propagate, index,
                ct, block):
    D = len(w)
    L = lambda v: po.lit(v, ct)  # noqa: E731
    shp = list(y_shape)
    shp[1] //= vec
    total = math.prod(shp)
    names = ["n", "cv" if vec > 1 else "c"] + [f"o{d}" for d in range(D)]
    body = _decompose(shp, y_st, names)
    if vec > 1:
        body.append(f"c = cv * {vec}")
    body.append(f"xb = {_off(x_st[:2], ['n', 'c'])}")
    if mode in (_NEAREST, _BILINEAR):
        body += _sample_body(mode, vec, x_shape, x_st, w, s, pre, pad, ct, L)
        index = None
    else:
        body += _pool_body(mode, vec, x_shape, x_st, y_shape, w, s, pre, pad, propagate, ct, L)
    ms = ", ".join(f"m{j}" for j in range(vec))
    yoff = _off(y_st, ["n", "c"] + [f"o{d}" for d in range(D)])
    body.append(f"st4(y, {yoff}, {ms})" if vec == 4 else f"sty(y, {yoff}, m0)")
    if index:
        ioff = _off(i_st, ["n", "c"] + [f"o{d}" for d in range(D)])
        if index == "vec":
            body.append(f"st4(idx, {ioff}, {', '.join(f'b{j}' for j in range(vec))})")
        else:
            body += [f"sti(idx, {ioff} + {j * i_st[1]}, b{j})" for j in range(vec)]
    src = ["def kernel(x, y, idx):", f"    e = cuda.blockIdx.x * {block} + cuda.threadIdx.x",
           f"    if e < {total}:"] + ["        " + ln for ln in body]
    return "\n".join(src) + "\n", total


def _sample_body(mode, vec, x_shape, x_st, w, s, pre, pad, ct, L):
    """NEAREST / BILINEAR: per dim the sample centre c = o*s - pre + (w-1)/2 (float64, once), then the
    1 or 2 taps per dim (clamped offset, range flag, weight), the 2^D products unrolled."""
    D = len(w)
    body, offs, oks, wts = [], [], [], []
    for d in range(D):
        n_in, st = x_shape[2 + d], x_st[2 + d]
        body.append(f"cc{d} = o{d} * {float(s[d])!r} - {float(pre[d])!r} + {float((w[d] - 1) / 2)!r}")
        if mode == _NEAREST:
            body.append(f"p{d}_0 = int(math.floor(cc{d} + 0.5))")
            taps, wd = [f"p{d}_0"], [None]
        else:
            body += [f"p{d}_0 = int(math.floor(cc{d}))", f"p{d}_1 = p{d}_0 + 1", f"f{d} = cc{d} - p{d}_0",
                     f"w{d}_0 = {ct}(1.0 - f{d})", f"w{d}_1 = {ct}(f{d})"]
            taps, wd = [f"p{d}_0", f"p{d}_1"], [f"w{d}_0", f"w{d}_1"]
        od, kd = [], []
        for k, p in enumerate(taps):
            body += [f"q{d}_{k} = min(max({p}, 0), {n_in - 1})" + (f" * {st}" if st != 1 else ""),
                     f"ok{d}_{k} = ({p} >= 0) & ({p} < {n_in})"]
            od.append(f"q{d}_{k}")
            kd.append(f"ok{d}_{k}")
        offs.append(od)
        oks.append(kd)
        wts.append(wd)
    body += [f"m{j} = {L(0.0)}" for j in range(vec)]
    padv = L(0.0) if pad == PAD.CUDNN_ZERO_PAD else L(-math.inf)
    for k in itertools.product(*[range(len(o)) for o in offs]):
        off = " + ".join(["xb"] + [offs[d][k[d]] for d in range(D)])
        body += _load(vec, "x", off, "u", "ldx")
        if pad != PAD.CUDNN_EDGE_VAL_PAD:
            body.append(f"okt = {' & '.join(oks[d][k[d]] for d in range(D))}")
            body += [f"u{j} = sel(okt, u{j}, {padv})" for j in range(vec)]
        ws = [wts[d][k[d]] for d in range(D) if wts[d][k[d]] is not None]
        if ws:   # a zero weight never multiplies a (possibly infinite) padding value
            body.append(f"wt = {' * '.join(ws)}")
            body += [f"m{j} += sel(wt != {L(0.0)}, wt * u{j}, {L(0.0)})" for j in range(vec)]
        else:
            body += [f"m{j} += u{j}" for j in range(vec)]
    return body


def _pool_body(mode, vec, x_shape, x_st, y_shape, w, s, pre, pad, propagate, ct, L):
    D = len(w)
    body = [f"a{d} = o{d} * {s[d]} - {pre[d]}" for d in range(D)]
    lines, offs, oks = _fwd_taps(vec, x_shape, x_st, y_shape, w, s, pre, [f"a{d}" for d in range(D)])
    body += lines
    if mode == _AVG_EX:
        cn = []
        for d in range(D):
            terms = [f"sel({f}, 1, 0)" for f in oks[d] if f is not None]
            body.append(f"cn{d} = {w[d] - len(terms)}" + "".join(f" + {t}" for t in terms))
            cn.append(f"cn{d}")
        body.append(f"cnt = max({' * '.join(cn)}, 1)")
    for t, k in enumerate(itertools.product(*[range(v) for v in w])):
        body += _tap_values(vec, "xb", offs, oks, k, pad, mode, L, "ldx")
        if mode == _MAX:
            body += _max_step(t, vec, propagate, L)
        else:
            body += [f"m{j} = u{j}" if t == 0 else f"m{j} += u{j}" for j in range(vec)]
    if mode == _MAX:
        body += _max_final(vec, propagate, L)
    elif mode == _AVG_IN:
        body += [f"m{j} = m{j} * {L(1.0 / math.prod(w))}" for j in range(vec)]
    else:
        body += [f"m{j} = m{j} / {ct}(cnt)" for j in range(vec)]
    return body


def bwd_supported(mode, pad, pre, w, s, has_index, has_x):
    """(ok, reason): whether the direct gather handles this backward problem."""
    if any(p < 0 for p in pre):
        return False, "negative pre-padding"
    if any(p >= k for p, k in zip(pre, w)):
        return False, "pre-padding >= window"
    if pad == PAD.CUDNN_EDGE_VAL_PAD and mode != _AVG_EX:
        return False, "EDGE padding (clamped taps feed the edge elements)"
    if math.prod(-(-k // t) for k, t in zip(w, s)) > MAX_TAPS:
        return False, f"more than {MAX_TAPS} covering outputs"
    if mode == _MAX and not has_index and not has_x:
        return False, "MAXPOOL backward needs IDX or X"
    if mode == _MAX and not has_index and math.prod(w) * math.prod(-(-k // t) for k, t in zip(w, s)) > 256:
        return False, "MAXPOOL backward from X: window too large to recompute"
    return True, ""


def _bwd_source(mode, vec, x_shape, dx_st, y_shape, dy_st, i_st, x_st, w, s, pre, pad, propagate,
                index, ct, block):
    D = len(w)
    L = lambda v: po.lit(v, ct)  # noqa: E731
    shp = list(x_shape)
    shp[1] //= vec
    total = math.prod(shp)
    names = ["n", "cv" if vec > 1 else "c"] + [f"i{d}" for d in range(D)]
    body = _decompose(shp, dx_st, names)
    if vec > 1:
        body.append(f"c = cv * {vec}")
    body.append(f"db = {_off(dy_st[:2], ['n', 'c'])}")
    if index:
        body.append(f"ib = {_off(i_st[:2], ['n', 'c'])}")
    recompute = mode == _MAX and not index
    if recompute:
        body.append(f"xb = {_off(x_st[:2], ['n', 'c'])}")
    J = [-(-w[d] // s[d]) for d in range(D)]
    wst = [math.prod(w[d + 1:]) for d in range(D)]
    for d in range(D):
        n_in, o_n = x_shape[2 + d], y_shape[2 + d]
        body += [f"h{d} = i{d} + {pre[d]}", f"oh{d} = h{d} // {s[d]}", f"rr{d} = h{d} - oh{d} * {s[d]}"]
        for j in (range(J[d]) if not recompute else ()):
            conds, oc = [], f"oh{d} - {j}" if j else f"oh{d}"
            if j:
                conds.append(f"(oh{d} >= {j})")
                oc = f"max({oc}, 0)"
            if (n_in - 1 + pre[d]) // s[d] - j >= o_n:
                conds.append(f"(oh{d} - {j} < {o_n})")
                oc = f"min({oc}, {o_n - 1})"
            if s[d] - 1 + j * s[d] >= w[d]:
                conds.append(f"(rr{d} + {j * s[d]} < {w[d]})")
            body.append(f"oc{d}_{j} = {oc}")
            body.append(f"ok{d}_{j} = {' & '.join(conds) if conds else 'True'}")
            body.append(f"tt{d}_{j} = rr{d} + {j * s[d]}")
            if mode == _AVG_EX:
                a = f"(oc{d}_{j} * {s[d]} - {pre[d]})"
                body.append(f"cn{d}_{j} = min({a} + {w[d]}, {n_in}) - max({a}, 0)")
    body += [f"acc{j} = {L(0.0)}" for j in range(vec)]
    if recompute:
        body += _recompute_loop(vec, x_shape, x_st, y_shape, dy_st, w, s, pre, pad, propagate, J, wst, L)
    for jj in (() if recompute else itertools.product(*[range(v) for v in J])):
        ocs = [f"oc{d}_{jj[d]}" for d in range(D)]
        body.append(f"ok = {' & '.join(f'ok{d}_{jj[d]}' for d in range(D))}")
        body += _load(vec, "dy", f"db + {_off(dy_st[2:], ocs)}", "g", "ldd")
        if mode == _MAX:
            tflat = " + ".join(f"tt{d}_{jj[d]}" + (f" * {wst[d]}" if wst[d] != 1 else "") for d in range(D))
            body.append(f"tf = {tflat}")
            if index == "vec":
                body.append(f"k0, k1, k2, k3 = ld4(idx, ib + {_off(i_st[2:], ocs)})")
            else:
                body += [f"k{j} = idx[ib + {_off(i_st[2:], ocs)} + {j * i_st[1]}]" for j in range(vec)]
            body += [f"acc{j} += sel(ok & (k{j} == tf), g{j}, {L(0.0)})" for j in range(vec)]
        elif mode == _AVG_EX:
            body.append(f"rc = {L(1.0)} / {ct}(max({' * '.join(f'cn{d}_{jj[d]}' for d in range(D))}, 1))")
            body += [f"acc{j} += sel(ok, g{j} * rc, {L(0.0)})" for j in range(vec)]
        else:
            body += [f"acc{j} += sel(ok, g{j}, {L(0.0)})" for j in range(vec)]
    if mode == _AVG_IN:
        body += [f"acc{j} = acc{j} * {L(1.0 / math.prod(w))}" for j in range(vec)]
    xoff = _off(dx_st, ["n", "c"] + [f"i{d}" for d in range(D)])
    accs = ", ".join(f"acc{j}" for j in range(vec))
    body.append(f"st4(dx, {xoff}, {accs})" if vec == 4 else f"stx(dx, {xoff}, acc0)")
    src = ["def kernel(dy, idx, x, dx):", f"    e = cuda.blockIdx.x * {block} + cuda.threadIdx.x",
           f"    if e < {total}:"] + ["        " + ln for ln in body]
    return "\n".join(src) + "\n", total


def _recompute_loop(vec, x_shape, x_st, y_shape, dy_st, w, s, pre, pad, propagate, J, wst, L):
    """MAXPOOL backward without an index: a loop over the covering outputs (one straight body, so
    the JIT stays fast), each recomputing its window's winner from x (taps unrolled)."""
    D = len(w)
    out = [f"for jj in range({math.prod(J)}):"]
    body = []
    for d in range(D):
        n_in, o_n = x_shape[2 + d], y_shape[2 + d]
        body += [f"j{d} = (jj // {math.prod(J[d + 1:])}) % {J[d]}", f"o{d} = oh{d} - j{d}"]
        conds, oc = [], f"o{d}"
        if J[d] > 1:
            conds.append(f"(o{d} >= 0)")
            oc = f"max({oc}, 0)"
        if (n_in - 1 + pre[d]) // s[d] >= o_n:
            conds.append(f"(o{d} < {o_n})")
            oc = f"min({oc}, {o_n - 1})"
        if s[d] - 1 + (J[d] - 1) * s[d] >= w[d]:
            conds.append(f"(rr{d} + j{d} * {s[d]} < {w[d]})")
        body += [f"oc{d} = {oc}", f"okc{d} = {' & '.join(conds) if conds else 'True'}",
                 f"ws{d} = oc{d} * {s[d]} - {pre[d]}"]
    body.append(f"ok = {' & '.join(f'okc{d}' for d in range(D))}")
    body.append("tf = " + " + ".join(f"(rr{d} + j{d} * {s[d]})" + (f" * {wst[d]}" if wst[d] != 1 else "")
                                     for d in range(D)))
    body += _load(vec, "dy", f"db + {_off(dy_st[2:], [f'oc{d}' for d in range(D)])}", "g", "ldd")
    lines, offs, oks = _fwd_taps(vec, x_shape, x_st, y_shape, w, s, pre, [f"ws{d}" for d in range(D)],
                                 full_checks=True)
    body += lines
    for t, k in enumerate(itertools.product(*[range(v) for v in w])):
        body += _tap_values(vec, "xb", offs, oks, k, pad, _MAX, L, "ldx")
        body += _max_step(t, vec, propagate, L)
    body += _max_final(vec, propagate, L)
    body += [f"acc{j} += sel(ok & (b{j} == tf), g{j}, {L(0.0)})" for j in range(vec)]
    return out + ["    " + ln for ln in body]


def _jit(src, name, **names):
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, ld4=ld4, st4=st4, sel=sel, **names)
    exec(compile(src, f"<resample_direct {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


@functools.lru_cache(maxsize=None)
def fwd_kernel(mode, vec, x_shape, x_st, y_shape, y_st, i_st, w, s, pre, pad, propagate, index,
               x_dt, y_dt, i_dt, block):
    """(dispatcher, source, work items) of the direct pooling forward ``kernel(x, y, idx)``.

    ``vec`` 4 (float32, unit channel stride, C % 4 == 0, 16-byte aligned) or 1; ``index``: None (no
    index written), "vec" (int32, unit channel stride, 16-byte stores) or "scalar"."""
    ct = compute_type([x_dt, y_dt])
    src, total = _fwd_source(RM(mode), vec, x_shape, x_st, y_shape, y_st, i_st, w, s, pre,
                             PAD(pad), propagate, index, ct, block)
    return _jit(src, "fwd", ldx=loader(x_dt, ct), sty=storer(y_dt), sti=storer(i_dt)), src, total


@functools.lru_cache(maxsize=None)
def bwd_kernel(mode, vec, x_shape, dx_st, y_shape, dy_st, i_st, x_st, w, s, pre, pad, propagate,
               index, dy_dt, dx_dt, x_dt, block):
    """(dispatcher, source, work items) of the direct pooling gather ``kernel(dy, idx, x, dx)``.

    ``index``: "vec" / "scalar" route MAXPOOL by idx; None recomputes the winners from x."""
    ct = compute_type([dy_dt, dx_dt])
    src, total = _bwd_source(RM(mode), vec, x_shape, dx_st, y_shape, dy_st, i_st, x_st, w, s, pre,
                             PAD(pad), propagate, index, ct, block)
    return _jit(src, "bwd", ldd=loader(dy_dt, ct), ldx=loader(x_dt, ct), stx=storer(dx_dt)), src, total
