"""dscale / dbias of layer and RMS norm: column sums over the rows of a (rows, n) row-major view.

``dbias[c] = sum_r dy[r, c]`` and ``dscale[c] = sum_r dy[r, c] * (x[r, c] - mean[r]) * inv[r]`` (RMS:
``dy * x * inv``). The geometry of :mod:`ncudnn.kernels.norm.bn_cols`: a 2-D grid of (column tiles of ``TX``) x
(row chunks), blocks of ``TX`` x ``TY`` threads, each thread one column striding over its chunk's rows
by ``TY`` (a warp reads 32 consecutive columns of a row: coalesced), ``UNROLL`` rows of loads issued
before the math; the row statistics are per-row scalars (a warp-uniform load). The ``TY`` partials of
a block are added in shared memory in a fixed order and written per (chunk, column);
:func:`ncudnn.kernels.norm.bn_cols.combine_kernel` adds the chunks in order into dscale / dbias
(deterministic, no atomics).
"""
import functools

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, loader, storer
from .bn_cols import TX, TY

__all__ = ["dparams_partial_kernel", "UNROLL", "BLOCKS_PER_SM"]

UNROLL = 4
#: resident blocks per SM the grid is sized for (up to 64 registers a thread)
BLOCKS_PER_SM = 4


def _ind(lines, n):
    return "\n".join(" " * n + ln for line in lines for ln in line.split("\n"))


@functools.lru_cache(maxsize=None)
def dparams_partial_kernel(n, x_dt, dy_dt, s_dt, center=True, tx=TX, ty=TY, unroll=UNROLL):
    """Per-(chunk, column) partial sums: part0 = sum dy, part1 = sum dy * xhat. Arguments
    ``(x, dy, s_mean, s_inv, part0, part1, rows, chunk_rows)`` (``s_mean`` unused when not
    ``center``); grid (ceil(n / tx), chunks), block (tx, ty). Returns (dispatcher, source)."""
    ct = compute_type([x_dt, dy_dt, s_dt])
    U = unroll
    zero = po.lit(0.0, ct)
    xh = "(v{u} - lds(s_mean, r + {o})) * lds(s_inv, r + {o})" if center else "v{u} * lds(s_inv, r + {o})"
    body = [f"v{u} = ldx(x, p + {u * ty * n})\ng{u} = ldd(dy, p + {u * ty * n})" for u in range(U)]
    body += [f"h{u} = " + xh.format(u=u, o=u * ty) for u in range(U)]
    body += [f"a += g{u}\nb += g{u} * h{u}" for u in range(U)]
    tail = ["v0 = ldx(x, p)", "g0 = ldd(dy, p)", "h0 = " + xh.format(u=0, o=0), "a += g0", "b += g0 * h0"]
    src = f"""def kernel(x, dy, s_mean, s_inv, part0, part1, rows, chunk_rows):
    sa = cuda.shared.array(({ty}, {tx}), SHARED_DTYPE)
    sb = cuda.shared.array(({ty}, {tx}), SHARED_DTYPE)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = cuda.blockIdx.x * {tx} + tx
    r0 = cuda.blockIdx.y * chunk_rows
    r1 = min(r0 + chunk_rows, rows)
    a = {zero}
    b = {zero}
    if c < {n}:
        r = r0 + ty
        p = r * {n} + c
        while r + {(U - 1) * ty} < r1:
{_ind(body, 12)}
            r += {U * ty}
            p += {U * ty * n}
        while r < r1:
{_ind(tail, 12)}
            r += {ty}
            p += {ty * n}
    sa[ty, tx] = a
    sb[ty, tx] = b
    cuda.syncthreads()
    if ty == 0 and c < {n}:
        for j in range(1, {ty}):
            a += sa[j, tx]
            b += sb[j, tx]
        o = cuda.blockIdx.y * {n} + c
        stw(part0, o, a)
        stw(part1, o, b)
"""
    import numba
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda,
              SHARED_DTYPE=numba.float64 if ct == "float64" else numba.float32, ldx=loader(x_dt, ct),
              ldd=loader(dy_dt, ct), lds=loader(s_dt, ct), stw=storer(ct))
    exec(compile(src, "<norm_row_dparams>", "exec"), ns)
    return cuda.jit(ns["kernel"]), src
