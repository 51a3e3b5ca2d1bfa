"""Resample (pooling / nearest / bilinear) forward and backward over 1-3 spatial dims, any layout.

Geometry per spatial dim (as :mod:`ncudnn.reference.resample`): window ``w``, stride ``s``, pre
padding ``p``; output o's window starts at ``a = o*s - p``. Pooling (MAX, AVG include / exclude
padding) needs integer a and w; NEAREST / BILINEAR accept rational s and p (floats; e.g.
s = 0.5 upsamples 2x) and sample at the window centre ``c = a + (w-1)/2``. Taps outside the input
read the padding (ZERO 0, NEG_INF -inf, EDGE the clamped edge element). MAXPOOL writes the
row-major window offset of the winner to ``index`` (first on ties; NaN per cudnnNanPropagation_t).

Forward: one thread per output element, threads ordered by y's memory order (NHWC: channels
innermost, so neighbouring threads read neighbouring channels), compile-time window loops.

Backward is a **gather** (deterministic, no atomics): one thread per dx element walks the outputs
whose taps reach it (for EDGE padding the edge element also collects the taps clamped onto it),
recomputes each tap and accumulates its weight times dy. MAXPOOL backward routes by ``index``.

Shapes are (N, C, *spatial) with arbitrary element strides per tensor (NCHW, NHWC, ...).
"""
import functools
import math

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, loader, placeholder, storer
from ..primitives.warp import SIM, launch, sm_count
from ...types import cudnnNanPropagation_t, cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM

__all__ = ["resample_forward", "resample_backward", "output_shape"]

_POOL = {RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING,
         RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING}


def output_shape(x_shape, window, stride, pre_pad, post_pad):
    """(N, C, *out), out = floor((in + pre + post - w) / s) + 1 per spatial dim."""
    out = [math.floor((n + a + b - w) / s) + 1
           for n, w, s, a, b in zip(x_shape[2:], window, stride, pre_pad, post_pad)]
    return tuple(x_shape[:2]) + tuple(out)


def _order(shape, strides):
    """Dims sorted outermost-first by memory stride (ties keep logical order)."""
    return sorted(range(len(shape)), key=lambda d: (-strides[d], d))


def _decompose(shape, strides, names, flat="e"):
    """Lines giving each logical coordinate name[d] from a flat index in memory order."""
    order = _order(shape, strides)
    lines = [f"r = {flat}"]
    for d in reversed(order[1:]):
        lines += [f"{names[d]} = r % {shape[d]}", f"r = r // {shape[d]}"]
    lines.append(f"{names[order[0]]} = r")
    return lines


def _off(strides, names):
    t = [f"{c} * {s}" for c, s in zip(names, strides) if s]
    return " + ".join(t) if t else "0"


def _num(v):
    return repr(float(v))


def _coord_lines(mode, d, o, w, s, pre):
    """Lines defining the sample position(s) of output coord ``o`` in dim d (nearest / bilinear)."""
    c = f"{o} * {_num(s)} - {_num(pre)} + {_num((w - 1) / 2)}"
    if mode == RM.CUDNN_RESAMPLE_NEAREST:
        return [f"n{d} = int(math.floor({c} + 0.5))"]
    return [f"cc{d} = {c}", f"i{d} = int(math.floor(cc{d}))", f"f{d} = cc{d} - i{d}"]


# --------------------------------------------------------------------------------------------
# forward

def _fwd_source(mode, x_shape, x_st, y_shape, y_st, i_st, w, s, pre, pad, propagate, ct):
    D = len(x_shape) - 2
    L = lambda v: po.lit(v, ct)  # noqa: E731
    total = math.prod(y_shape)
    names = ["n", "c"] + [f"o{d}" for d in range(D)]
    src = ["def kernel(x, y, idx):", "    e = cuda.grid(1)", "    step = cuda.gridsize(1)",
           f"    while e < {total}:"]
    body = _decompose(y_shape, y_st, names)
    body.append(f"xb = n * {x_st[0]} + c * {x_st[1]}")
    edge = pad == PAD.CUDNN_EDGE_VAL_PAD
    padval = L(0.0) if pad == PAD.CUDNN_ZERO_PAD else L(-math.inf)
    inner, ind = [], ""
    if mode in _POOL:
        for d in range(D):
            body.append(f"a{d} = o{d} * {int(s[d])} - {int(pre[d])}")
        if mode == RM.CUDNN_RESAMPLE_MAXPOOL:
            body += [f"best = {L(-math.inf)}", "bi = 0", "v0 = " + L(0.0), "nan_i = -1"]
        else:
            body += [f"acc = {L(0.0)}", "cnt = 0"]
        body.append("t = 0")
        for d in range(D):
            inner += [f"{ind}for k{d} in range({int(w[d])}):",
                      f"{ind}    p{d} = a{d} + k{d}",
                      f"{ind}    q{d} = min(max(p{d}, 0), {x_shape[2 + d] - 1})"]
            ind += "    "
        inb = " and ".join(f"p{d} >= 0 and p{d} < {x_shape[2 + d]}" for d in range(D))
        inner.append(f"{ind}inb = {inb}")
        off = "xb + " + _off(x_st[2:], [f"q{d}" for d in range(D)])
        if edge:
            inner.append(f"{ind}v = ldx(x, {off})")
        else:
            inner.append(f"{ind}v = ldx(x, {off}) if inb else {padval}")
        if mode == RM.CUDNN_RESAMPLE_MAXPOOL:
            inner += [f"{ind}if t == 0:", f"{ind}    v0 = v",
                      f"{ind}if v != v:", f"{ind}    if nan_i < 0:", f"{ind}        nan_i = t",
                      f"{ind}elif v > best or (t == 0):", f"{ind}    best = v", f"{ind}    bi = t"]
        elif mode == RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING:
            inner += [f"{ind}if inb:", f"{ind}    acc += v", f"{ind}    cnt += 1"]
        else:
            inner += [f"{ind}acc += v"]
        inner.append(f"{ind}t += 1")
        tail = []
        if mode == RM.CUDNN_RESAMPLE_MAXPOOL:
            if propagate:
                tail += ["if nan_i >= 0:", "    bi = nan_i", f"    best = {L(math.nan)}"]
            else:   # NaN taps count as -inf; when tap 0 wins (all -inf / NaN) y is tap 0 itself
                tail += ["if bi == 0:", "    best = v0"]
            tail += [f"sty(y, {_off(y_st, names)}, best)"]
            if i_st is not None:    # compile-time switch: no index output, no index store
                tail += [f"sti(idx, {_off(i_st, names)}, bi)"]
        elif mode == RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING:
            tail += [f"sty(y, {_off(y_st, names)}, acc / {ct}(cnt if cnt > 0 else 1))"]
        else:
            tail += [f"sty(y, {_off(y_st, names)}, acc * {L(1.0 / math.prod(int(v) for v in w))})"]
    else:
        for d in range(D):
            body += _coord_lines(mode, d, f"o{d}", w[d], s[d], pre[d])
        body.append(f"acc = {L(0.0)}")
        bil = mode == RM.CUDNN_RESAMPLE_BILINEAR
        for d in range(D):
            if bil:
                inner += [f"{ind}for b{d} in range(2):",
                          f"{ind}    p{d} = i{d} + b{d}",
                          f"{ind}    w{d} = {ct}(f{d}) if b{d} == 1 else {ct}(1.0 - f{d})"]
            else:
                inner += [f"{ind}for b{d} in range(1):", f"{ind}    p{d} = n{d}",
                          f"{ind}    w{d} = {L(1.0)}"]
            inner.append(f"{ind}    q{d} = min(max(p{d}, 0), {x_shape[2 + d] - 1})")
            ind += "    "
        wt = " * ".join(f"w{d}" for d in range(D))
        inb = " and ".join(f"p{d} >= 0 and p{d} < {x_shape[2 + d]}" for d in range(D))
        off = "xb + " + _off(x_st[2:], [f"q{d}" for d in range(D)])
        inner += [f"{ind}wt = {wt}", f"{ind}if wt != {L(0.0)}:"]
        if edge:
            inner.append(f"{ind}    acc += wt * ldx(x, {off})")
        else:
            inner.append(f"{ind}    acc += wt * (ldx(x, {off}) if ({inb}) else {padval})")
        tail = [f"sty(y, {_off(y_st, names)}, acc)"]
    body += inner + tail + ["e += step"]
    src += ["        " + ln for ln in body]
    return "\n".join(src) + "\n"


# --------------------------------------------------------------------------------------------
# backward (gather)

def _tap_span(mode, w):
    """(lo, hi) offsets of an output's taps around a = o*s - pre."""
    if mode in _POOL:
        return 0.0, float(w - 1)
    c = (w - 1) / 2
    return (c - 0.5, c + 0.5) if mode == RM.CUDNN_RESAMPLE_NEAREST else (c - 1.0, c + 1.0)


def _virtual_range(mode, d, n_in, n_out, w, s, pre, edge):
    """Lines setting vlo{d} / vhi{d}: tap positions that land on input i{d} (edge: clamped ones)."""
    if not edge:
        return [f"vlo{d} = i{d}", f"vhi{d} = i{d}"]
    lo, hi = _tap_span(mode, w)
    pmin = math.floor(-pre + lo) - 1
    pmax = math.ceil((n_out - 1) * s - pre + hi) + 1
    return [f"vlo{d} = i{d} if i{d} > 0 else {min(pmin, 0)}",
            f"vhi{d} = i{d} if i{d} < {n_in - 1} else {max(pmax, n_in - 1)}"]


def _bwd_source(mode, x_shape, dx_st, y_shape, dy_st, i_st, w, s, pre, pad, ct):
    D = len(x_shape) - 2
    L = lambda v: po.lit(v, ct)  # noqa: E731
    total = math.prod(x_shape)
    names = ["n", "c"] + [f"i{d}" for d in range(D)]
    edge = pad == PAD.CUDNN_EDGE_VAL_PAD and mode != RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING
    src = ["def kernel(dy, idx, dx):", "    e = cuda.grid(1)", "    step = cuda.gridsize(1)",
           f"    while e < {total}:"]
    body = _decompose(x_shape, dx_st, names) + [f"acc = {L(0.0)}"]
    inner, ind = [], ""
    for d in range(D):
        lo, hi = _tap_span(mode, w[d])
        body += _virtual_range(mode, d, x_shape[2 + d], y_shape[2 + d], w[d], s[d], pre[d], edge)
        inner += [f"{ind}for p{d} in range(vlo{d}, vhi{d} + 1):",
                  f"{ind}    olo{d} = max(int(math.floor((p{d} + {_num(pre[d])} - {_num(hi)}) / "
                  f"{_num(s[d])})) - 1, 0)",
                  f"{ind}    ohi{d} = min(int(math.floor((p{d} + {_num(pre[d])} - {_num(lo)}) / "
                  f"{_num(s[d])})) + 1, {y_shape[2 + d] - 1})",
                  f"{ind}    for o{d} in range(olo{d}, ohi{d} + 1):"]
        ind += "        "
        if mode in _POOL:
            inner += [f"{ind}t{d} = p{d} - (o{d} * {int(s[d])} - {int(pre[d])})",
                      f"{ind}if t{d} >= 0 and t{d} < {int(w[d])}:"]
            if mode == RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING:
                a = f"(o{d} * {int(s[d])} - {int(pre[d])})"
                inner.append(f"{ind}    n{d} = min({a} + {int(w[d])}, {x_shape[2 + d]}) - max({a}, 0)")
        else:
            inner += [ind + ln for ln in _coord_lines(mode, d, f"o{d}", w[d], s[d], pre[d])]
            if mode == RM.CUDNN_RESAMPLE_NEAREST:
                inner += [f"{ind}w{d} = {L(1.0)}", f"{ind}if n{d} == p{d}:"]
            else:
                inner += [f"{ind}w{d} = {ct}(1.0 - f{d}) if p{d} == i{d}_ else {ct}(f{d})",
                          f"{ind}if p{d} == i{d}_ or p{d} == i{d}_ + 1:"]
        ind += "    "
    yoff = _off(dy_st, ["n", "c"] + [f"o{d}" for d in range(D)])
    if mode == RM.CUDNN_RESAMPLE_MAXPOOL:
        strides, acc_w = [], 1
        for d in reversed(range(D)):
            strides.insert(0, acc_w)
            acc_w *= int(w[d])
        tflat = " + ".join(f"t{d} * {strides[d]}" for d in range(D))
        iof = _off(i_st, ["n", "c"] + [f"o{d}" for d in range(D)])
        inner += [f"{ind}if idx[{iof}] == {tflat}:", f"{ind}    acc += ldd(dy, {yoff})"]
    elif mode == RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING:
        inner += [f"{ind}acc += ldd(dy, {yoff})"]
    elif mode == RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING:
        cnt = " * ".join(f"n{d}" for d in range(D))
        inner += [f"{ind}acc += ldd(dy, {yoff}) / {ct}({cnt})"]
    else:
        inner += [f"{ind}acc += {' * '.join(f'w{d}' for d in range(D))} * ldd(dy, {yoff})"]
    scale = 1.0 / math.prod(int(v) for v in w) if mode == RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING \
        else 1.0
    tail = [f"stx(dx, {_off(dx_st, names)}, acc * {L(scale)})", "e += step"]
    body += inner + tail
    text = "\n".join(src + ["        " + ln for ln in body]) + "\n"
    if mode == RM.CUDNN_RESAMPLE_BILINEAR:   # output o's tap floor is i{d}_ (i{d} is dx's coord)
        for d in range(D):
            text = text.replace(f"i{d} = int(math.floor(cc{d}))", f"i{d}_ = int(math.floor(cc{d}))")
            text = text.replace(f"f{d} = cc{d} - i{d}\n", f"f{d} = cc{d} - i{d}_\n")
    return text


# --------------------------------------------------------------------------------------------
# launchers

def _geom(x_shape, window, stride, pre_pad):
    D = len(x_shape) - 2
    return tuple(window)[:D], tuple(stride)[:D], tuple(pre_pad)[:D]


def _check(mode, w, s, pre):
    if mode in _POOL and any(float(v) != int(v) for v in tuple(w) + tuple(s) + tuple(pre)):
        raise ValueError("pooling needs integer window, stride and padding")
    if mode == RM.CUDNN_RESAMPLE_BILINEAR and any(int(v) != 2 for v in w):
        raise ValueError("BILINEAR needs window 2 in every dim")


def _grid(total, block):
    blocks = math.ceil(total / block)
    return max(1, min(blocks, 8 if SIM else sm_count() * 16))


def _jit(src, name, **names):
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, **names)
    exec(compile(src, f"<resample {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


@functools.lru_cache(maxsize=None)
def _fwd_kernel(mode, x_shape, x_st, y_shape, y_st, i_st, w, s, pre, pad, propagate, x_dt, y_dt,
                i_dt):
    ct = compute_type([x_dt, y_dt])
    src = _fwd_source(mode, x_shape, x_st, y_shape, y_st, i_st, w, s, pre, pad, propagate, ct)
    return _jit(src, "fwd", ldx=loader(x_dt, ct), sty=storer(y_dt), sti=storer(i_dt)), src


@functools.lru_cache(maxsize=None)
def _bwd_kernel(mode, x_shape, dx_st, y_shape, dy_st, i_st, w, s, pre, pad, dy_dt, dx_dt):
    ct = compute_type([dy_dt, dx_dt])
    src = _bwd_source(mode, x_shape, dx_st, y_shape, dy_st, i_st, w, s, pre, pad, ct)
    return _jit(src, "bwd", ldd=loader(dy_dt, ct), stx=storer(dx_dt)), src


def resample_forward(x, y, index, mode, x_shape, x_strides, y_shape, y_strides, window, stride,
                     pre_pad, padding_mode=PAD.CUDNN_ZERO_PAD,
                     nan_propagation=cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN,
                     index_strides=None, x_dtype="float32", y_dtype="float32",
                     index_dtype="int32", block=128, stream=0):
    """y (and, for MAXPOOL, ``index``) = resample of x; shapes (N, C, *spatial), strides in elements.

    ``index``: device array for MAXPOOL window offsets (None otherwise); ``index_strides``
    default to y's. Window / stride / pre_pad: one value per spatial dim (floats allowed for
    NEAREST / BILINEAR). ``y_shape`` normally :func:`output_shape`.
    """
    mode, pad = RM(mode), PAD(padding_mode)
    w, s, pre = _geom(x_shape, window, stride, pre_pad)
    _check(mode, w, s, pre)
    propagate = int(nan_propagation) == int(cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN)
    i_st = tuple(index_strides or y_strides) if index is not None else None
    kern, _ = _fwd_kernel(mode, tuple(x_shape), tuple(x_strides), tuple(y_shape), tuple(y_strides),
                          i_st, w, s, pre, pad, propagate, x_dtype, y_dtype, index_dtype)
    total = math.prod(y_shape)
    idx = index.reshape(index.size) if index is not None else placeholder("int32")
    launch(kern, _grid(total, block), block, stream, x.reshape(x.size), y.reshape(y.size), idx)


def resample_backward(dy, index, dx, mode, x_shape, dx_strides, y_shape, dy_strides, window,
                      stride, pre_pad, padding_mode=PAD.CUDNN_ZERO_PAD, index_strides=None,
                      dy_dtype="float32", dx_dtype="float32", block=128, stream=0):
    """dx = adjoint of the forward (gather, deterministic); MAXPOOL routes dy by ``index``."""
    mode, pad = RM(mode), PAD(padding_mode)
    w, s, pre = _geom(x_shape, window, stride, pre_pad)
    _check(mode, w, s, pre)
    if mode == RM.CUDNN_RESAMPLE_MAXPOOL and index is None:
        raise ValueError("MAXPOOL backward needs the forward's index tensor")
    i_st = tuple(index_strides or dy_strides)
    kern, _ = _bwd_kernel(mode, tuple(x_shape), tuple(dx_strides), tuple(y_shape),
                          tuple(dy_strides), i_st, w, s, pre, pad, dy_dtype, dx_dtype)
    idx = index.reshape(index.size) if index is not None else placeholder("int32")
    launch(kern, _grid(math.prod(x_shape), block), block, stream,
           dy.reshape(dy.size), idx,
                                                          dx.reshape(dx.size))
