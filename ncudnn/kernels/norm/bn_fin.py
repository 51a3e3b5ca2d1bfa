"""Batch norm: the chunk combine and the per-channel coefficients in one kernel (one launch instead of
the combine of :mod:`ncudnn.kernels.norm.bn_colsv` followed by :mod:`ncudnn.kernels.norm.bn_finalize`).

Block (32, ``TY``) per 32 channels: thread (x, y) adds chunks y, y + TY, ... of the two partial-sum
arrays (``part[j * C + c]``, ``UNROLL`` independent loads in flight), the ``TY`` partials are added in
shared memory in a fixed order (deterministic), then thread (x, 0) computes channel c's coefficients
with the same formulas as :mod:`ncudnn.kernels.norm.bn_finalize`. ``cpb`` < 32: the many-block tree combine
instead, ceil(C / cpb) blocks of (cpb channels, lanes) threads, every chunk of a lane loaded at once and
the lanes added by a fixed-order shared-memory tree (:func:`tree_geometry`; deterministic):

* forward (training; the sums are of x - K and (x - K)^2, K = ``shift[c]``): ``m1 = sum / count``,
  ``var = max(sqsum / count - m1^2, 0)``, ``mean = m1 + K``, ``inv = 1 / sqrt(var + eps)``,
  ``eq_scale = scale * inv``, ``eq_bias = bias - m1 * eq_scale`` (relative to K, for the apply pass
  ``(x - K) * eq_scale + eq_bias``); optional saved mean / inverse std and running statistics
  ``(1 - momentum) * prev + momentum * stat`` (unbiased variance ``var * count / (count - 1)``);
* backward (the sums are of dy and dy * (x - mean)): ``dscale = inv * dyx_sum``, ``dbias = dy_sum``,
  ``eq_dy = scale * inv``, ``eq_x = -scale * inv^2 * dscale / count``,
  ``eq_b = scale * inv * (inv * mean * dscale - dy_sum) / count``.

Per-channel arrays are addressed ``c * sC`` (compile-time strides; the descriptors are those of
:data:`ncudnn.kernels.norm.bn_finalize.FINALIZE_ARRAYS` / ``BWD_ARRAYS``: (dtype, sN, sC), sN unused).
"""
import functools

from numba import cuda

from ..pointwise import ops as po
from .bn_finalize import BWD_ARRAYS, FINALIZE_ARRAYS
from ..runtime.dtypes import compute_type, loader, storer
from .bn_colsv import combine_src

__all__ = ["fin_kernel", "bwd_kernel", "tree_geometry"]


def _ind(lines, n):
    return "\n".join(" " * n + ln for line in lines for ln in line.split("\n"))


def _tree_src(head, ct, cpb, lanes, nper):
    """Combine over a block of (``cpb`` channels, ``lanes`` chunk lanes): thread (x, y) loads chunks
    y, y + lanes, ... (``nper`` loads of each partial array in flight per pass, addresses past the last chunk
    clamped to chunk 0 and their values dropped), the lanes are then added by a fixed-order tree in shared
    memory (deterministic); thread (x, 0) ends with the channel's sums ``a``, ``b``."""
    zero = po.lit(0.0, ct)
    loads = []
    for u in range(nper):
        loads.append(f"j{u} = j + {u * lanes}\nok{u} = j{u} < chunks and cok\n"
                     f"q{u} = j{u} * channels + c if ok{u} else 0\n"
                     f"v{u} = part0[q{u}]\nw{u} = part1[q{u}]")
    adds = [f"a += v{u} if ok{u} else {zero}\nb += w{u} if ok{u} else {zero}" for u in range(nper)]
    tree = []
    s = lanes // 2
    while s >= 1:
        tree.append(f"""cuda.syncthreads()
if ty < {s}:
    a += sa[ty + {s}, tx]
    b += sb[ty + {s}, tx]
    sa[ty, tx] = a
    sb[ty, tx] = b""")
        s //= 2
    return f"""{head}
    sa = cuda.shared.array(({lanes}, {cpb}), SHARED_DTYPE)
    sb = cuda.shared.array(({lanes}, {cpb}), SHARED_DTYPE)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = cuda.blockIdx.x * {cpb} + tx
    cok = c < channels
    a = {zero}
    b = {zero}
    j = ty
    while j < chunks:
{_ind(loads, 8)}
{_ind(adds, 8)}
        j += {nper * lanes}
    sa[ty, tx] = a
    sb[ty, tx] = b
{_ind(tree, 4)}
    if ty != 0 or not cok:
        return
"""


def tree_geometry(chunks, cpb):
    """(lanes, nper) of the tree combine: lanes a power of 2 with cpb * lanes <= 256 and about one
    pass over the chunks, nper = ceil(chunks / lanes) (at most 16)."""
    lanes = max(1, min(256 // cpb, 1 << max(0, (int(chunks) - 1).bit_length())))
    return lanes, max(1, min(16, -(-int(chunks) // lanes)))


def _combine(head, ct, ty, unroll, cpb, nper):
    if cpb == 32:
        return combine_src(head, ct, ty, unroll)
    return _tree_src(head, ct, cpb, ty, nper)


def _off(desc):
    return f"c * {desc[2]}" if desc[2] != 1 else "c"


def _jit(src, name, names):
    import numba
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, **names)
    ns.setdefault("SHARED_DTYPE", numba.float32)
    exec(compile(src, f"<norm_bn_fin {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


@functools.lru_cache(maxsize=None)
def fin_kernel(arrays, writes=frozenset(), scalars=(), ty=32, unroll=4, cpb=32, nper=4):
    """Forward combine + finalize. ``arrays``: one (dtype, sN, sC) per FINALIZE_ARRAYS entry ("sum" /
    "sqsum" unused: the partials replace them); ``writes``: which of saved_mean, saved_inv, next_mean,
    next_var are written; ``scalars``: ((name, dtype), ...) of "eps" / "mom" given as one-element device
    arrays. Arguments: ``part0, part1``, the 13 FINALIZE_ARRAYS arrays, ``kout`` (K per channel,
    dense, compute type: the apply pass reads K there, not from x, so y may alias x), ``chunks, channels`` (int64),
    ``count, eps, momentum`` (float64). Grid ceil(C / 32), block (32, ty); ``cpb`` < 32: the tree
    combine (:func:`tree_geometry`), grid ceil(C / cpb), block (cpb, ty). Returns (dispatcher, source)."""
    import numba
    ct = compute_type([a[0] for a in arrays])
    at = "float64" if arrays[0][0] == "float64" else ct   # the partials' type ("sum"): the statistics' math
    L = po.lit
    one, zero = L(1.0, at), L(0.0, at)
    d = dict(zip((n for n, _ in FINALIZE_ARRAYS), arrays))
    head = ("def kernel(part0, part1, " + ", ".join(n for n, _ in FINALIZE_ARRAYS)
            + ", kout, chunks, channels, count_in, eps_in, mom_in):")
    sc = dict(scalars)
    s = [_combine(head, at, ty, unroll, cpb, nper),
         f"    cnt = {at}(count_in)",
         f"    eps = ld_scalar_eps(eps_in, 0)" if "eps" in sc else f"    eps = {at}(eps_in)",
         "    m1 = a / cnt",
         "    var = b / cnt - m1 * m1",
         f"    var = var if var > {zero} else {zero}",
         f"    mean = m1 + {at}(ld_shift(shift, {_off(d['shift'])}))",
         # the apply pass's K: the mean rounded to the compute type, eq_bias relative to it (x - K is exact
         # for x near the mean, also when x[row 0] was an outlier)
         f"    k = {ct}(mean)",
         "    st_k(kout, c, k)",
         f"    inv = {one} / math.sqrt(var + {at}(eps))",
         f"    es = {at}(ld_scale(scale, {_off(d['scale'])})) * inv",
         f"    st_eq_scale(eq_scale, {_off(d['eq_scale'])}, es)",
         f"    st_eq_bias(eq_bias, {_off(d['eq_bias'])}, ld_bias(bias, {_off(d['bias'])}) - (mean - {at}(k)) * es)"]
    if "saved_mean" in writes:
        s.append(f"    st_saved_mean(saved_mean, {_off(d['saved_mean'])}, mean)")
    if "saved_inv" in writes:
        s.append(f"    st_saved_inv(saved_inv, {_off(d['saved_inv'])}, inv)")
    if "next_mean" in writes or "next_var" in writes:
        s.append(f"    mom = ld_scalar_mom(mom_in, 0)" if "mom" in sc else f"    mom = {ct}(mom_in)")
    if "next_mean" in writes:
        s.append(f"    st_next_mean(next_mean, {_off(d['next_mean'])}, "
                 f"({one} - mom) * ld_prev_mean(prev_mean, {_off(d['prev_mean'])}) + mom * mean)")
    if "next_var" in writes:
        s.append(f"    unb = var * cnt / (cnt - {one}) if cnt > {one} else var")
        s.append(f"    st_next_var(next_var, {_off(d['next_var'])}, "
                 f"({one} - mom) * ld_prev_var(prev_var, {_off(d['prev_var'])}) + mom * unb)")
    src = "\n".join(s) + "\n"
    names = {f"ld_scalar_{n}": loader(dt, ct) for n, dt in scalars}
    for (name, _), a in zip(FINALIZE_ARRAYS, arrays):
        names["ld_" + name] = loader(a[0], ct)
        names["st_" + name] = storer(a[0])
    names["SHARED_DTYPE"] = numba.float64 if at == "float64" else numba.float32
    names["st_k"] = storer(ct)
    return _jit(src, "fwd", names), src


@functools.lru_cache(maxsize=None)
def bwd_kernel(arrays, ty=32, unroll=4, cpb=32, nper=4):
    """Backward combine + weights. ``arrays``: one (dtype, sN, sC) per BWD_ARRAYS entry ("dy_sum" /
    "dyx_sum" unused: the partials, of dy and dy * (x - mean), replace them). Arguments: ``part0, part1``,
    the 10 BWD_ARRAYS arrays, ``chunks, channels`` (int64), ``count`` (float64). Grid ceil(C / 32),
    block (32, ty); ``cpb`` < 32: the tree combine, grid ceil(C / cpb), block (cpb, ty). Returns
    (dispatcher, source)."""
    import numba
    ct = compute_type([a[0] for a in arrays])
    d = dict(zip((n for n, _ in BWD_ARRAYS), arrays))
    head = "def kernel(part0, part1, " + ", ".join(n for n, _ in BWD_ARRAYS) + ", chunks, channels, count_in):"
    s = [_combine(head, ct, ty, unroll, cpb, nper),
         f"    m_inv = {po.lit(1.0, ct)} / {ct}(count_in)",
         f"    mu = ld_mean(mean, {_off(d['mean'])})",
         f"    iv = ld_inv(inv, {_off(d['inv'])})",
         "    ds = iv * b",
         f"    sc = ld_scale(scale, {_off(d['scale'])})",
         f"    st_dscale(dscale, {_off(d['dscale'])}, ds)",
         f"    st_dbias(dbias, {_off(d['dbias'])}, a)",
         f"    st_eq_dy(eq_dy, {_off(d['eq_dy'])}, sc * iv)",
         f"    st_eq_x(eq_x, {_off(d['eq_x'])}, -sc * iv * iv * ds * m_inv)",
         f"    st_eq_b(eq_b, {_off(d['eq_b'])}, sc * iv * (iv * mu * ds - a) * m_inv)"]
    src = "\n".join(s) + "\n"
    names = {}
    for (name, _), a in zip(BWD_ARRAYS, arrays):
        names["ld_" + name] = loader(a[0], ct)
        names["st_" + name] = storer(a[0])
    names["SHARED_DTYPE"] = numba.float64 if ct == "float64" else numba.float32
    return _jit(src, "bwd", names), src
