"""Batch-norm passes over a plane-contiguous ("planes": NCHW) tensor: ``N`` x ``C`` planes of ``HW``
contiguous elements at element offset ``n * SN + c * HW``.

Statistics: a 2-D grid of (channel) x (chunks of samples); a block of ``T`` threads walks each
plane of its chunk with stride ``T`` (coalesced), ``UNROLL`` independent loads issued before the
adds, then one block reduction of both sums (fixed order) written per (chunk, channel) to
workspace; :func:`ncudnn.kernels.norm.bn_cols.combine_kernel` adds the chunks in order.
Forward sums ``x - K`` and ``(x - K)^2`` with K = x[0, c, 0] (shifted data); backward sums ``dy``
and ``dy * (x - mean)``.

Apply: one block per (plane, HW chunk); the plane's coefficients are loaded once into registers:
forward ``y = x * e0 + e1``, backward ``dx = dy * e0 + x * e1 + e2``.
"""
import functools
import math

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, loader, storer
from ..primitives.warp import block_sum2

__all__ = ["planes_config", "partial_kernel", "apply_kernel", "apply_grid", "threads_for", "reverse_grid"]


def threads_for(hw):
    """Threads per block for planes of ``hw`` elements: about 8 elements per thread, 32..256."""
    return min(256, max(32, 1 << max(0, (math.ceil(hw / 8) - 1).bit_length())))


def planes_config(n, channels, sms, blocks_per_sm=8):
    """(chunks, samples per chunk) of the statistics grid (channels x chunks): at most one wave of
    ``sms * blocks_per_sm`` blocks when there are at least as many slots as channels."""
    want = max(1, (sms * blocks_per_sm) // channels)
    chunks = max(1, min(want, n))
    per = math.ceil(n / chunks)
    return math.ceil(n / per), per


def _jit(src, name, names):
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, block_sum2=block_sum2, **names)
    exec(compile(src, f"<norm_bn_planes {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


def _ind(lines, n):
    return "\n".join(" " * n + ln for line in lines for ln in line.split("\n"))


@functools.lru_cache(maxsize=None)
def partial_kernel(channels, hw, sn, threads, x_dt, dy_dt=None, mean_dt="float32", mean_stride=1, unroll=4):
    """Per-(chunk, channel) partial sums (see the module docstring). Arguments
    ``(x, dy, mean, part0, part1, n, per_chunk)``; grid (C, chunks), block ``threads``."""
    bwd = dy_dt is not None
    ct = compute_type([x_dt] + ([dy_dt, mean_dt] if bwd else []))
    at = ct if bwd else "float64"   # forward sums in float64: (x - K)^2 of 1e20 overflows float32
    C, U, T = channels, unroll, threads
    zero = po.lit(0.0, at)
    if bwd:
        body = [f"v{u} = ldx(x, p + {u * T})\ng{u} = ldd(dy, p + {u * T})" for u in range(U)]
        body += [f"a += g{u}\nb += g{u} * (v{u} - k)" for u in range(U)]
        tail = ["g = ldd(dy, p)", "a += g", "b += g * (ldx(x, p) - k)"]
    else:
        body = [f"v{u} = float64(ldx(x, p + {u * T})) - k" for u in range(U)]
        body += [f"a += v{u}\nb += v{u} * v{u}" for u in range(U)]
        tail = ["v = float64(ldx(x, p)) - k", "a += v", "b += v * v"]
    src = f"""def kernel(x, dy, mean, part0, part1, n, per_chunk):
    sm = cuda.shared.array(32, SHARED_DTYPE)
    sm2 = cuda.shared.array(32, SHARED_DTYPE)
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n0 = cuda.blockIdx.y * per_chunk
    n1 = min(n0 + per_chunk, n)
    k = {"ldm(mean, c * " + str(mean_stride) + ")" if bwd else "float64(ldx(x, c * " + str(hw) + "))"}
    a = {zero}
    b = {zero}
    for i in range(n0, n1):
        base = i * {sn} + c * {hw}
        p = base + t
        pend = base + {hw}
        while p + {(U - 1) * T} < pend:
{_ind(body, 12)}
            p += {U * T}
        while p < pend:
{_ind(tail, 12)}
            p += {T}
    a, b = block_sum2(a, b, sm, sm2)
    if t == 0:
        o = cuda.blockIdx.y * {C} + c
        stw(part0, o, a)
        stw(part1, o, b)
"""
    import numba
    names = dict(SHARED_DTYPE=numba.float64 if at == "float64" else numba.float32, ldx=loader(x_dt, ct),
                 ldd=loader(dy_dt or x_dt, ct), ldm=loader(mean_dt, ct), stw=storer(at))
    return _jit(src, "partial", names), src


def apply_grid(hw, threads, unroll=4, max_elems=4096):
    """Blocks per plane: each block covers at most ``max_elems`` of a plane (at least one unrolled pass)."""
    return max(1, math.ceil(hw / max(max_elems, threads * unroll)))


def reverse_grid(n, channels, sms):
    """Grid x of the ``order`` apply kernel: (chunks * per) * C blocks for the statistics pass's
    (chunks, per) of :func:`planes_config` (blocks past the last sample return at once)."""
    chunks, per = planes_config(n, channels, sms)
    return chunks * per * channels, (chunks, per)


@functools.lru_cache(maxsize=None)
def apply_kernel(channels, hw, sn, threads, x_dt, out_dt, dy_dt=None, coef_dt="float32", unroll=4,
                 shifted=False, order=None):
    """``y = x * e0[c] + e1[c]`` (``shifted``: ``(x - K) * e0[c] + e1[c]``, K = x[0, c, 0]) or
    ``dx = dy * e0[c] + x * e1[c] + e2[c]``. Arguments
    ``(x, dy, e0, e1, e2, out, per_block)``; grid (N * C planes, blocks per plane), block ``threads``;
    ``per_block``: plane elements per block. ``order`` ``(n, chunks, per)``: the planes in the reverse
    of the statistics pass's order (the statistics block of chunk k walks samples k * per ... k * per + per - 1;
    here the first blocks take the last sample of every chunk, still in the L2, then the one before, ...);
    grid x ``chunks * per * C`` (:func:`reverse_grid`)."""
    bwd = dy_dt is not None
    ct = compute_type([x_dt, out_dt, coef_dt] + ([dy_dt] if bwd else []))
    C, U, T = channels, unroll, threads
    if bwd:
        loads = [f"v{u} = ldx(x, p + {u * T})\ng{u} = ldd(dy, p + {u * T})" for u in range(U)]
        stores = [f"sto(out, p + {u * T}, g{u} * e0 + v{u} * e1 + e2)" for u in range(U)]
        tail = ["sto(out, p, ldd(dy, p) * e0 + ldx(x, p) * e1 + e2)"]
    else:
        loads = [f"v{u} = ldx(x, p + {u * T})" + (" - k" if shifted else "") for u in range(U)]
        stores = [f"sto(out, p + {u * T}, v{u} * e0 + e1)" for u in range(U)]
        tail = ["sto(out, p, (ldx(x, p) - k) * e0 + e1)" if shifted else "sto(out, p, ldx(x, p) * e0 + e1)"]
    if order is None:
        locate = f"""    plane = cuda.blockIdx.x
    i = plane // {C}
    c = plane - i * {C}
"""
    else:
        n_, chunks, per = order
        locate = f"""    q = cuda.blockIdx.x // {C}
    c = cuda.blockIdx.x - q * {C}
    r = q // {chunks}
    i = (q - r * {chunks}) * {per} + {per - 1} - r
    if i >= {n_}:
        return
"""
    src = f"""def kernel(x, dy, e0a, e1a, e2a, out, per_block):
{locate}    e0 = lde(e0a, c)
    e1 = lde(e1a, c)
    e2 = {"lde(e2a, c)" if bwd else "e1"}
    k = {"ldx(x, c * " + str(hw) + ")" if shifted else "e1"}
    start = cuda.blockIdx.y * per_block
    base = i * {sn} + c * {hw}
    p = base + start + cuda.threadIdx.x
    pend = base + min(start + per_block, {hw})
    while p + {(U - 1) * T} < pend:
{_ind(loads, 8)}
{_ind(stores, 8)}
        p += {U * T}
    while p < pend:
{_ind(tail, 8)}
        p += {T}
"""
    names = dict(ldx=loader(x_dt, ct), ldd=loader(dy_dt or x_dt, ct), lde=loader(coef_dt, ct), sto=storer(out_dt))
    return _jit(src, "apply", names), src
