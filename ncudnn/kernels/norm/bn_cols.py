"""Batch-norm passes over a channel-innermost ("cols": NHWC) tensor: ``rows`` x ``C`` row-major.

The statistics are a column reduction: a 2-D grid of (channel tiles of ``TX`` channels) x (row chunks);
a block of ``TX`` x ``TY`` threads, each thread owning one channel and striding over the chunk's
rows by ``TY`` (a warp reads 32 consecutive channels of one row: 128 coalesced bytes per load),
``UNROLL`` independent loads issued before the adds. The ``TY`` partial sums of a block are combined
in shared memory in a fixed order and written per (chunk, channel) to workspace; :func:`combine_kernel`
adds the chunks (a column per thread column, up to 32 threads down the chunks, then a fixed-order
shared-memory sum: deterministic, no atomics).

* forward sums: ``sum (x - K)`` and ``sum (x - K)^2`` with K = x[row 0, c] (shifted data: no
  cancellation when |mean| >> std; the finalize kernel adds K back);
* backward sums: ``sum dy`` and ``sum dy * (x - mean)``.

The apply pass (:func:`apply_kernel`) uses the same thread geometry with the per-channel coefficients
held in registers: forward ``y = x * e0 + e1``, backward ``dx = dy * e0 + x * e1 + e2``; no index
division anywhere. All math in float32 registers (float64 when every tensor is float64).
"""
import functools
from dataclasses import astuple, dataclass
import math

import numpy as np
from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, loader, storer

__all__ = ["ColsConfig", "cols_config", "partial_kernel", "combine_kernel", "combine_ty", "apply_kernel",
           "apply_grid"]

TX, TY = 32, 8


@dataclass(frozen=True, order=True)
class ColsConfig:
    """Launch geometry of the cols kernels for ``rows`` x ``C``: a (tiles, chunks) grid of (tx, ty) blocks, a
    block's channel tile ``tx`` wide, each chunk ``chunk_rows`` rows, the row loop unrolled ``unroll`` times.
    Iterates (and compares) as the tuple (tx, ty, unroll, tiles, chunks, chunk_rows)."""
    tx: int
    ty: int
    unroll: int
    tiles: int
    chunks: int
    chunk_rows: int

    def __iter__(self):
        return iter(astuple(self))

    def check(self):
        """(ok, reason): whether the geometry can launch."""
        if min(astuple(self)) < 1:
            return False, f"{self}: every field must be at least 1"
        if self.tx * self.ty > 1024:
            return False, f"{self.tx} x {self.ty} threads per block > 1024"
        return True, ""

    def keep(self, rows, channels):
        """Launchable, and covering ``rows`` x ``channels``: every row in a chunk, every channel in a tile."""
        return self.check()[0] and self.chunks * self.chunk_rows >= rows and self.tiles * self.tx >= channels


def cols_config(rows, channels, sms, blocks_per_sm=6, unroll=8):
    """Launch geometry: (tile, chunk) blocks filling ``sms`` x ``blocks_per_sm`` slots in one wave (the
    partial kernels take up to 40 registers: 6 blocks of 256 threads per SM), each chunk at least
    ``TY * unroll`` rows so the unrolled loop runs."""
    tiles = math.ceil(channels / TX)
    want = max(1, (sms * blocks_per_sm) // tiles)
    chunks = max(1, min(want, math.ceil(rows / (TY * unroll))))
    chunk_rows = math.ceil(rows / chunks)
    chunks = math.ceil(rows / chunk_rows)
    return ColsConfig(TX, TY, unroll, tiles, chunks, chunk_rows)


def _jit(src, name, names):
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, **names)
    exec(compile(src, f"<norm_bn_cols {name}>", "exec"), ns)
    return cuda.jit(ns["kernel"])


@functools.lru_cache(maxsize=None)
def partial_kernel(channels, x_dt, dy_dt=None, mean_dt="float32", mean_stride=1, tx=TX, ty=TY, unroll=8):
    """Per-(chunk, channel) partial sums. ``dy_dt`` None: forward (shifted sum, sum of squares);
    else backward (sum dy, sum dy * (x - mean); ``mean[c * mean_stride]``).
    Arguments ``(x, dy, mean, part0, part1, rows, chunk_rows)``; part0 / part1 hold chunks * C
    compute-type values; grid (tiles, chunks), block (tx, ty). Returns (dispatcher, source)."""
    bwd = dy_dt is not None
    ct = compute_type([x_dt] + ([dy_dt, mean_dt] if bwd else []))
    at = ct if bwd else "float64"   # forward sums in float64: (x - K)^2 of 1e20 overflows float32
    C, U = channels, unroll
    zero = po.lit(0.0, at)
    body = []
    if bwd:
        body += [f"v{u} = ldx(x, p + {u} * step)" for u in range(U)]
        body += [f"g{u} = ldd(dy, p + {u} * step)" for u in range(U)]
        body += [f"a += g{u}\nb += g{u} * (v{u} - k)" for u in range(U)]
        tail = ["g = ldd(dy, p)", "a += g", "b += g * (ldx(x, p) - k)"]
    else:
        body += [f"v{u} = float64(ldx(x, p + {u} * step)) - k" for u in range(U)]
        body += [f"a += v{u}\nb += v{u} * v{u}" for u in range(U)]
        tail = ["v = float64(ldx(x, p)) - k", "a += v", "b += v * v"]

    def ind(lines, n):
        return "\n".join(" " * n + ln for line in lines for ln in line.split("\n"))

    src = f"""def kernel(x, dy, mean, part0, part1, rows, chunk_rows):
    sa = cuda.shared.array(({ty}, {tx}), SHARED_DTYPE)
    sb = cuda.shared.array(({ty}, {tx}), SHARED_DTYPE)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = cuda.blockIdx.x * {tx} + tx
    r0 = cuda.blockIdx.y * chunk_rows
    r1 = min(r0 + chunk_rows, rows)
    a = {zero}
    b = {zero}
    if c < {C}:
        k = {"ldm(mean, c * " + str(mean_stride) + ")" if bwd else "float64(ldx(x, c))"}
        step = {ty * C}
        p = (r0 + ty) * {C} + c
        pend = r1 * {C}
        while p + {(U - 1) * ty * C} < pend:
{ind(body, 12)}
            p += {U * ty * C}
        while p < pend:
{ind(tail, 12)}
            p += step
    sa[ty, tx] = a
    sb[ty, tx] = b
    cuda.syncthreads()
    if ty == 0 and c < {C}:
        for j in range(1, {ty}):
            a += sa[j, tx]
            b += sb[j, tx]
        o = cuda.blockIdx.y * {C} + c
        stw(part0, o, a)
        stw(part1, o, b)
"""
    import numba
    names = dict(SHARED_DTYPE=numba.float64 if at == "float64" else numba.float32, ldx=loader(x_dt, ct),
                 ldd=loader(dy_dt or x_dt, ct), ldm=loader(mean_dt, ct), stw=storer(at))
    return _jit(src, "partial", names), src


def combine_ty(chunks):
    """Rows of the :func:`combine_kernel` block for ``chunks`` partials: a power of 2 up to 32."""
    return min(32, 1 << max(0, (int(chunks) - 1).bit_length()))


@functools.lru_cache(maxsize=None)
def combine_kernel(ct="float32", out0_dt=None, out1_dt=None, write0=True, write1=True, ty=32):
    """``out[c] = sum_j part[j * C + c]`` over the chunks for both partial arrays (``ct``; outputs
    in ``out*_dt``, default ``ct``; ``write*`` False skips one). Block (TX, ``ty``): thread (x, y)
    adds chunks y, y + ty, ... of column x (independent loads), then the ``ty`` partials are added
    in shared memory in a fixed order (deterministic). Grid ceil(C / TX). Arguments
    ``(part0, part1, out0, out1, chunks, channels)``."""
    import numba
    conv = np.float64 if ct == "float64" else np.float32
    sdt = numba.float64 if ct == "float64" else numba.float32
    st0, st1 = storer(out0_dt or ct), storer(out1_dt or ct)
    TXc, TYc = TX, ty

    @cuda.jit
    def kernel(part0, part1, out0, out1, chunks, channels):
        sa = cuda.shared.array((TYc, TXc), sdt)
        sb = cuda.shared.array((TYc, TXc), sdt)
        tx = cuda.threadIdx.x
        ty_ = cuda.threadIdx.y
        c = cuda.blockIdx.x * TXc + tx
        a = conv(0.0)
        b = conv(0.0)
        if c < channels:
            p = ty_ * channels + c
            step = TYc * channels
            end = chunks * channels
            while p < end:
                a += part0[p]
                b += part1[p]
                p += step
        sa[ty_, tx] = a
        sb[ty_, tx] = b
        cuda.syncthreads()
        if ty_ == 0 and c < channels:
            for j in range(1, TYc):
                a += sa[j, tx]
                b += sb[j, tx]
            if write0:
                st0(out0, c, a)
            if write1:
                st1(out1, c, b)
    return kernel


@functools.lru_cache(maxsize=None)
def apply_kernel(channels, x_dt, out_dt, dy_dt=None, coef_dt="float32", tx=TX, ty=TY, unroll=4, shifted=False):
    """``y = x * e0[c] + e1[c]`` (``dy_dt`` None; ``shifted``: ``(x - K) * e0[c] + e1[c]`` with
    K = x[row 0, c]) or ``dx = dy * e0[c] + x * e1[c] + e2[c]`` over rows x C. Arguments
    ``(x, dy, e0, e1, e2, out, rows)``; grid (tiles, any), block (tx, ty); the y blocks stride over
    rows. Returns (dispatcher, source)."""
    bwd = dy_dt is not None
    ct = compute_type([x_dt, out_dt, coef_dt] + ([dy_dt] if bwd else []))
    C, U = channels, unroll
    if bwd:
        loads = [f"v{u} = ldx(x, p + {u} * step)\ng{u} = ldd(dy, p + {u} * step)" for u in range(U)]
        stores = [f"sto(out, p + {u} * step, g{u} * e0 + v{u} * e1 + e2)" for u in range(U)]
        tail = ["sto(out, p, ldd(dy, p) * e0 + ldx(x, p) * e1 + e2)"]
    else:
        loads = [f"v{u} = ldx(x, p + {u} * step)" + (" - k" if shifted else "") for u in range(U)]
        stores = [f"sto(out, p + {u} * step, v{u} * e0 + e1)" for u in range(U)]
        tail = ["sto(out, p, (ldx(x, p) - k) * e0 + e1)" if shifted else "sto(out, p, ldx(x, p) * e0 + e1)"]

    def ind(lines, n):
        return "\n".join(" " * n + ln for line in lines for ln in line.split("\n"))

    src = f"""def kernel(x, dy, e0a, e1a, e2a, out, rows):
    c = cuda.blockIdx.x * {tx} + cuda.threadIdx.x
    if c >= {C}:
        return
    e0 = lde(e0a, c)
    e1 = lde(e1a, c)
    e2 = {"lde(e2a, c)" if bwd else "e1"}
    k = {"ldx(x, c)" if shifted else "e1"}
    step = cuda.gridDim.y * {ty * C}
    p = (cuda.blockIdx.y * {ty} + cuda.threadIdx.y) * {C} + c
    pend = rows * {C}
    while p + {U - 1} * step < pend:
{ind(loads, 8)}
{ind(stores, 8)}
        p += {U} * step
    while p < pend:
{ind(tail, 8)}
        p += step
"""
    names = dict(ldx=loader(x_dt, ct), ldd=loader(dy_dt or x_dt, ct), lde=loader(coef_dt, ct), sto=storer(out_dt))
    return _jit(src, "apply", names), src


def apply_grid(rows, channels, sms, blocks_per_sm=8, unroll=4):
    """(tiles, row blocks) for :func:`apply_kernel`: about ``sms * blocks_per_sm`` blocks."""
    tiles = math.ceil(channels / TX)
    ry = max(1, min(math.ceil(sms * blocks_per_sm / tiles), math.ceil(rows / (TY * unroll))))
    return tiles, ry
