"""Per-group batch-norm coefficient kernels (one thread per group; a group is a channel, or a
(sample, channel) pair for instance norm): BN_FINALIZE forward and the BN backward weights.

Every per-group array is addressed as ``(g // C) * sN + (g % C) * sC`` and every per-channel array
as ``(g % C) * sC`` with compile-time element strides, so the statistics tensors may have any
layout ([1, C, 1, 1] or [N, C, 1, 1], packed or not). All math in float32 (float64 when every
tensor is float64); epsilon, momentum and the element count per group are launch parameters.

**finalize** (training): ``mean = sum / count``, ``var = sqsum / count - mean^2`` (clamped at 0),
``inv = 1 / sqrt(var + eps)``, ``eq_scale = scale * inv``, ``eq_bias = bias - mean * eq_scale``;
optional saved mean / inverse std; optional running statistics read from one array and written
to another: ``next = (1 - momentum) * prev + momentum * stat`` with the unbiased
``var * count / (count - 1)``. (inference): ``eq_scale = scale / sqrt(prev_var + eps)``,
``eq_bias = bias - prev_mean * eq_scale``.

**bwd_weights**: from ``dy_sum``, ``dyx_sum`` (sums of dy and dy*x per group), the saved mean / inverse
std and the scale: ``dscale = inv * (dyx_sum - mean * dy_sum)``, ``dbias = dy_sum`` and the dx
coefficients ``eq_dy = scale * inv``, ``eq_x = -scale * inv^2 * dscale / count``,
``eq_b = scale * inv * (inv * mean * dscale - dy_sum) / count`` (dx = eq_dy*dy + eq_x*x + eq_b).
"""
import functools

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, loader, storer

__all__ = ["finalize_kernel", "bwd_weights_kernel", "FINALIZE_ARRAYS", "BWD_ARRAYS"]

#: argument arrays of the finalize kernel, in order ("g": per group, "c": per channel)
FINALIZE_ARRAYS = (("sum", "g"), ("sqsum", "g"), ("scale", "c"), ("bias", "c"), ("prev_mean", "c"),
                   ("prev_var", "c"), ("eq_scale", "g"), ("eq_bias", "g"), ("saved_mean", "g"),
                   ("saved_inv", "g"), ("next_mean", "c"), ("next_var", "c"), ("shift", "g"))
BWD_ARRAYS = (("dy_sum", "g"), ("dyx_sum", "g"), ("mean", "g"), ("inv", "g"), ("scale", "c"),
              ("dscale", "g"), ("dbias", "g"), ("eq_dy", "g"), ("eq_x", "g"), ("eq_b", "g"))


def _offset(kind, sn, sc):
    if kind == "c":
        return f"c * {sc}" if sc != 1 else "c"
    terms = [t for t in (f"n * {sn}" if sn else "", f"c * {sc}" if sc else "") if t]
    return " + ".join(terms) or "0"


def _scalar(var, scalars, ct, name=None):
    """``var = <value>`` from launch parameter ``<name>_in``: by value, or element 0 of a device array."""
    name = name or var
    if name in dict(scalars):
        return f"    {var} = ld_scalar_{name}({name}_in, 0)"
    return f"    {var} = {ct}({name}_in)"


def _jit(src, name, names):
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, **names)
    exec(compile(src, f"<bn_finalize {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


@functools.lru_cache(maxsize=None)
def finalize_kernel(arrays, training=True, writes=frozenset({"saved_mean", "saved_inv"}), shifted=False,
                    bias_shifted=False, scalars=()):
    """The finalize kernel for ``arrays``: one (dtype, sN, sC) per entry of :data:`FINALIZE_ARRAYS`
    (unused entries may be anything). ``writes``: which of the optional outputs saved_mean,
    saved_inv, next_mean, next_var are written (the others may be placeholders). ``shifted``: the
    sums are of (x - K) and (x - K)^2 with K the group's element read from ``shift`` (shifted-data
    variance: no cancellation when |mean| >> std). ``bias_shifted`` (with ``shifted``): eq_bias is
    relative to K, ``bias - (mean - K) * eq_scale``, for an apply pass ``(x - K) * eq_scale + eq_bias``
    (no cancellation either). ``scalars``: ((name, dtype), ...) of the run-time scalars "count",
    "eps", "mom" passed as one-element device arrays (read in the kernel) instead of by value.
    Returns (dispatcher, source). Arguments: the 13
    arrays, then ``groups, channels`` (int64), ``count, eps, momentum`` (float64)."""
    ct = compute_type([a[0] for a in arrays])
    at = "float64" if training and arrays[0][0] == "float64" else ct   # float64 sums: the statistics in float64
    L = po.lit
    one, zero = L(1.0, at), L(0.0, at)
    off = {name: _offset(kind, a[1], a[2]) for (name, kind), a in zip(FINALIZE_ARRAYS, arrays)}
    s = ["def kernel(" + ", ".join(n for n, _ in FINALIZE_ARRAYS) + ", groups, channels, count_in, eps_in, mom_in):",
         "    g = cuda.grid(1)",
         "    if g >= groups:",
         "        return",
         "    n = g // channels",
         "    c = g - n * channels",
         _scalar("eps", scalars, at),
         _scalar("cnt", scalars, at, "count")]
    if training:
        s += [f"    m1 = ld_sum(sum, {off['sum']}) / cnt",
              f"    var = ld_sqsum(sqsum, {off['sqsum']}) / cnt - m1 * m1",
              f"    mean = m1 + {at}(ld_shift(shift, {off['shift']}))" if shifted else "    mean = m1",
              f"    var = var if var > {zero} else {zero}",
              f"    inv = {one} / math.sqrt(var + eps)",
              f"    es = {at}(ld_scale(scale, {off['scale']})) * inv"]
    else:
        s += [f"    mean = ld_prev_mean(prev_mean, {off['prev_mean']})",
              f"    es = ld_scale(scale, {off['scale']}) / math.sqrt(ld_prev_var(prev_var, {off['prev_var']}) + eps)"]
    rel = "m1" if training and shifted and bias_shifted else "mean"
    s += [f"    st_eq_scale(eq_scale, {off['eq_scale']}, es)",
          f"    st_eq_bias(eq_bias, {off['eq_bias']}, ld_bias(bias, {off['bias']}) - {rel} * es)"]
    if training and "saved_mean" in writes:
        s.append(f"    st_saved_mean(saved_mean, {off['saved_mean']}, mean)")
    if training and "saved_inv" in writes:
        s.append(f"    st_saved_inv(saved_inv, {off['saved_inv']}, inv)")
    if training and ("next_mean" in writes or "next_var" in writes):
        s.append(_scalar("mom", scalars, at))
    if "next_mean" in writes:
        s.append(f"    st_next_mean(next_mean, {off['next_mean']}, " + (
            f"({one} - mom) * ld_prev_mean(prev_mean, {off['prev_mean']}) + mom * mean)" if training else "mean)"))
    if "next_var" in writes:
        pv = f"ld_prev_var(prev_var, {off['prev_var']})"
        if training:
            s.append(f"    unb = var * cnt / (cnt - {one}) if cnt > {one} else var")
            s.append(f"    st_next_var(next_var, {off['next_var']}, ({one} - mom) * {pv} + mom * unb)")
        else:  # inference passes the running statistics through
            s.append(f"    st_next_var(next_var, {off['next_var']}, {pv})")
    src = "\n".join(s) + "\n"
    names = {f"ld_scalar_{n}": loader(dt, at) for n, dt in scalars}
    for (name, _), a in zip(FINALIZE_ARRAYS, arrays):
        names["ld_" + name] = loader(a[0], at if name in ("sum", "sqsum") else ct)
        names["st_" + name] = storer(a[0])
    return _jit(src, "fwd", names), src


@functools.lru_cache(maxsize=None)
def bwd_weights_kernel(arrays, centered=False):
    """The backward-weights kernel for ``arrays`` (one (dtype, sN, sC) per :data:`BWD_ARRAYS` entry).
    ``centered``: ``dyx_sum`` already holds sum dy * (x - mean) (then dscale = inv * dyx_sum).
    Arguments: the 10 arrays, then ``groups, channels`` (int64), ``count`` (float64)."""
    ct = compute_type([a[0] for a in arrays])
    off = {name: _offset(kind, a[1], a[2]) for (name, kind), a in zip(BWD_ARRAYS, arrays)}
    s = ["def kernel(" + ", ".join(n for n, _ in BWD_ARRAYS) + ", groups, channels, count_in):",
         "    g = cuda.grid(1)",
         "    if g >= groups:",
         "        return",
         "    n = g // channels",
         "    c = g - n * channels",
         f"    m_inv = {po.lit(1.0, ct)} / {ct}(count_in)",
         f"    mu = ld_mean(mean, {off['mean']})",
         f"    iv = ld_inv(inv, {off['inv']})",
         f"    dys = ld_dy_sum(dy_sum, {off['dy_sum']})",
         f"    ds = iv * ld_dyx_sum(dyx_sum, {off['dyx_sum']})" if centered else
         f"    ds = iv * (ld_dyx_sum(dyx_sum, {off['dyx_sum']}) - mu * dys)",
         f"    sc = ld_scale(scale, {off['scale']})",
         f"    st_dscale(dscale, {off['dscale']}, ds)",
         f"    st_dbias(dbias, {off['dbias']}, dys)",
         f"    st_eq_dy(eq_dy, {off['eq_dy']}, sc * iv)",
         f"    st_eq_x(eq_x, {off['eq_x']}, -sc * iv * iv * ds * m_inv)",
         f"    st_eq_b(eq_b, {off['eq_b']}, sc * iv * (iv * mu * ds - dys) * m_inv)"]
    src = "\n".join(s) + "\n"
    names = {}
    for (name, _), a in zip(BWD_ARRAYS, arrays):
        names["ld_" + name] = loader(a[0], ct)
        names["st_" + name] = storer(a[0])
    return _jit(src, "bwd", names), src
