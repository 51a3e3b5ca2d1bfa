"""Batch-norm passes over a channel-innermost ("cols": NHWC) tensor, ``rows`` x ``C`` row-major, with
``VEC`` channels per thread (16-byte loads / stores when VEC is 4: float32 tensors, C % 4 == 0, 16-byte
aligned buffers) and one launch geometry shared by the statistics and the apply pass.

Geometry (:func:`colsv_config`): a block of ``TXV`` x ``TY`` threads (256) covers a tile of
``TXV * VEC`` channels; a warp reads ``32 * VEC`` consecutive channels of one row (``128 * VEC``
coalesced bytes); the grid is (tiles, chunks) with ``chunk_rows`` rows per chunk, about
``sms * blocks_per_sm`` blocks: one wave.

* :func:`partial_kernel`: per-(chunk, channel) partial sums, the ``TY`` rows of a block combined in
  shared memory in a fixed order; forward ``sum (x - K)``, ``sum (x - K)^2`` (K = x[row 0, c]);
  backward ``sum dy``, ``sum dy * (x - mean)``. The chunks are added by
  :func:`ncudnn.kernels.norm.bn_cols.combine_kernel` (fixed order: deterministic).
* :func:`apply_kernel`: forward ``y = (x - K) * e0 + e1``, backward ``dx = dy * e0 + x * e1 + e2``,
  the per-channel coefficients in registers. ``REVERSE``: each block walks its chunk from the last
  row back to the first, so it starts on the rows the statistics pass read last, still in the L2;
  ``HINT`` (VEC 4): the apply pass's loads and stores carry the streaming hint (evict-first), so what
  it moves leaves the L2 before the statistics pass's last rows that it has not re-read yet.

All math in float32 registers (float64 when every tensor is float64).
"""
import functools
from dataclasses import astuple, dataclass
import math

from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, loader, storer
from ..primitives.cshint import ld4cs, st4cs
from ..primitives.warp import SIM
from ..primitives.vec import ld4, st4

__all__ = ["ColsVConfig", "colsv_config", "vec_ok", "partial_kernel", "apply_kernel", "combine_kernel"]

THREADS = 256
#: register cap of the forward partial kernel (float64 accumulators): 65536 / (5 blocks x 256 threads)
FWD_PARTIAL_REGS = 48


@dataclass(frozen=True, order=True)
class ColsVConfig:
    """Launch geometry of the colsv kernels: a (tiles, chunks) grid of (txv, ty) blocks, a thread ``vec``
    consecutive channels, a block's tile ``txv * vec`` channels, each chunk ``chunk_rows`` rows, the row loop
    unrolled ``unroll`` times. Iterates (and compares) as the tuple (txv, ty, vec, unroll, tiles, chunks,
    chunk_rows)."""
    txv: int
    ty: int
    vec: int
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
        if self.vec not in (1, 4):
            return False, f"VEC {self.vec}: 1 or 4"
        if self.txv * self.ty > 1024:
            return False, f"{self.txv} x {self.ty} threads per block > 1024"
        return True, ""

    def keep(self, rows, channels):
        """Launchable, and covering ``rows`` x ``channels``: every row in a chunk, every channel in a tile (VEC 4
        needs C % 4 == 0)."""
        return (self.check()[0] and self.chunks * self.chunk_rows >= rows
                and self.tiles * self.txv * self.vec >= channels and channels % self.vec == 0)


def vec_ok(channels, dtypes):
    """VEC 4 needs C % 4 == 0 and float32 tensors."""
    return channels % 4 == 0 and all(d in (None, "float32") for d in dtypes)


def colsv_config(rows, channels, sms, vec=4, blocks_per_sm=4, unroll=4, align=False):
    """Launch geometry for ``rows`` x ``channels``: TXV the power of 2 (<= 32) covering C / VEC,
    TY = 256 / TXV, chunks filling ``sms * blocks_per_sm`` block slots (at least TY * unroll rows each).
    ``align``: chunk_rows a multiple of TY * unroll (every chunk but the last runs no tail rows)."""
    lanes = max(1, math.ceil(channels / vec))
    txv = min(32, 1 << (lanes - 1).bit_length())
    ty = THREADS // txv
    tiles = math.ceil(channels / (txv * vec))
    want = max(1, (sms * blocks_per_sm) // tiles)
    chunks = max(1, min(want, math.ceil(rows / (ty * unroll))))
    chunk_rows = math.ceil(rows / chunks)
    if align:
        chunk_rows = math.ceil(chunk_rows / (ty * unroll)) * ty * unroll
    chunks = math.ceil(rows / chunk_rows)
    return ColsVConfig(txv, ty, vec, unroll, tiles, chunks, chunk_rows)


def _jit(src, name, names, max_registers=0):
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, ld4=ld4, st4=st4, ld4cs=ld4cs, st4cs=st4cs,
              **names)
    exec(compile(src, f"<norm_bn_colsv {name}>", "exec"), ns)
    if max_registers and not SIM:
        return cuda.jit(ns["kernel"], max_registers=max_registers)
    return cuda.jit(ns["kernel"])


def _ind(lines, n):
    return "\n".join(" " * n + ln for line in lines for ln in line.split("\n"))


def _load(vec, fn4, fn1, arr, p, name):
    """Source of one VEC-wide load into ``name0..name{VEC-1}``."""
    if vec == 4:
        return f"{name}0, {name}1, {name}2, {name}3 = {fn4}({arr}, {p})"
    return f"{name}0 = {fn1}({arr}, {p})"


def _store(vec, fn4, arr, p, vals):
    if vec == 4:
        return f"{fn4}({arr}, {p}, {', '.join(vals)})"
    return f"sto({arr}, {p}, {vals[0]})"


@functools.lru_cache(maxsize=None)
def partial_kernel(channels, x_dt, dy_dt=None, mean_dt="float32", mean_stride=1, txv=32, ty=8, vec=4, unroll=4,
                   gtail=False):
    """Per-(chunk, channel) partial sums (module docstring). Arguments
    ``(x, dy, mean, part0, part1, rows, chunk_rows)``; grid (tiles, chunks), block (txv, ty).
    ``gtail``: the last (< unroll) rows of a thread are loaded at once (addresses past the chunk
    clamped to a valid row, their terms dropped), not one row per loop trip.
    Returns (dispatcher, source)."""
    bwd = dy_dt is not None
    ct = compute_type([x_dt] + ([dy_dt, mean_dt] if bwd else []))
    at = ct if bwd else "float64"   # forward sums in float64: (x - K)^2 of 1e20 overflows float32
    C, U, V = channels, unroll, vec
    zero = po.lit(0.0, at)
    J = range(V)
    body = []
    for u in range(U):
        body.append(_load(V, "ld4", "ldx", "x", f"p + {u} * step", f"v{u}_"))
        if bwd:
            body.append(_load(V, "ld4", "ldd", "dy", f"p + {u} * step", f"g{u}_"))
    for u in range(U):
        for j in J:
            if bwd:
                body.append(f"a{j} += g{u}_{j}\nb{j} += g{u}_{j} * (v{u}_{j} - k{j})")
            else:
                body.append(f"d = float64(v{u}_{j}) - k{j}\na{j} += d\nb{j} += d * d")
    tail = [_load(V, "ld4", "ldx", "x", "p", "v_")]
    if bwd:
        tail.append(_load(V, "ld4", "ldd", "dy", "p", "g_"))
        tail += [f"a{j} += g_{j}\nb{j} += g_{j} * (v_{j} - k{j})" for j in J]
    else:
        tail += [f"d = float64(v_{j}) - k{j}\na{j} += d\nb{j} += d * d" for j in J]
    if gtail and U > 1:
        tail = []
        for u in range(U - 1):
            tail.append(f"q{u} = p + {u} * step\nok{u} = q{u} < pend\nq{u} = q{u} if ok{u} else p")
            tail.append(_load(V, "ld4", "ldx", "x", f"q{u}", f"v{u}_"))
            if bwd:
                tail.append(_load(V, "ld4", "ldd", "dy", f"q{u}", f"g{u}_"))
        for u in range(U - 1):
            for j in J:
                if bwd:
                    tail.append(f"t = g{u}_{j} if ok{u} else {zero}\na{j} += t\nb{j} += t * (v{u}_{j} - k{j})")
                else:
                    tail.append(f"d = float64(v{u}_{j}) - k{j} if ok{u} else {zero}\na{j} += d\nb{j} += d * d")
    if bwd:
        kinit = [f"k{j} = ldm(mean, (c + {j}) * {mean_stride})" for j in J]
    else:
        kinit = [f"k{j} = float64(ldx(x, c + {j}))" for j in J]
    src = f"""def kernel(x, dy, mean, part0, part1, rows, chunk_rows):
    sa = cuda.shared.array(({ty}, {txv * V}), SHARED_DTYPE)
    sb = cuda.shared.array(({ty}, {txv * V}), SHARED_DTYPE)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = (cuda.blockIdx.x * {txv} + tx) * {V}
    r0 = cuda.blockIdx.y * chunk_rows
    r1 = min(r0 + chunk_rows, rows)
{_ind([f"a{j} = {zero}" for j in J] + [f"b{j} = {zero}" for j in J], 4)}
    if c < {C}:
{_ind(kinit, 8)}
        step = {ty * C}
        p = (r0 + ty) * {C} + c
        pend = r1 * {C}
        while p + {(U - 1) * ty * C} < pend:
{_ind(body, 12)}
            p += {U * ty * C}
        while p < pend:
{_ind(tail, 12)}
            p += {f"{(U - 1) * ty * C}" if gtail and U > 1 else "step"}
{_ind([f"sa[ty, tx * {V} + {j}] = a{j}" for j in J] + [f"sb[ty, tx * {V} + {j}] = b{j}" for j in J], 4)}
    cuda.syncthreads()
    if ty == 0 and c < {C}:
        for i in range(1, {ty}):
{_ind([f"a{j} += sa[i, tx * {V} + {j}]" for j in J] + [f"b{j} += sb[i, tx * {V} + {j}]" for j in J], 12)}
        o = cuda.blockIdx.y * {C} + c
{_ind([f"stw(part0, o + {j}, a{j})" for j in J] + [f"stw(part1, o + {j}, b{j})" for j in J], 8)}
"""
    import numba
    names = dict(SHARED_DTYPE=numba.float64 if at == "float64" else numba.float32, ldx=loader(x_dt, ct),
                 ldd=loader(dy_dt or x_dt, ct), ldm=loader(mean_dt, ct), stw=storer(at))
    # the float64 forward sums: capped so 5 blocks of 256 threads (the forward geometry) stay resident an SM
    return _jit(src, "partial", names, 0 if bwd else FWD_PARTIAL_REGS), src


@functools.lru_cache(maxsize=None)
def apply_kernel(channels, x_dt, out_dt, dy_dt=None, coef_dt="float32", txv=32, ty=8, vec=4, unroll=4,
                 shifted=False, reverse=True, hint=True, k_in_e2=False, gtail=False):
    """Forward ``y = x * e0[c] + e1[c]`` (``shifted``: ``(x - K) * e0[c] + e1[c]``, K = x[row 0, c])
    or backward ``dx = dy * e0[c] + x * e1[c] + e2[c]`` over the chunk rows of the block (reverse
    order when ``reverse``; streaming hints when ``hint`` and VEC 4; ``k_in_e2``: K read from ``e2[c]``,
    not from x, so ``out`` may alias x; ``gtail``: a thread's last (< unroll) rows loaded at once, addresses
    past the chunk clamped to a valid row and not stored). Arguments
    ``(x, dy, e0, e1, e2, out, rows, chunk_rows)``; grid (tiles, chunks), block (txv, ty)."""
    bwd = dy_dt is not None
    ct = compute_type([x_dt, out_dt, coef_dt] + ([dy_dt] if bwd else []))
    C, U, V = channels, unroll, vec
    J = range(V)
    hint = hint and V == 4
    ldv, stv = ("ld4cs", "st4cs") if hint else ("ld4", "st4")
    sgn = "-" if reverse else "+"

    def at(u):
        return "p" if u == 0 else f"p {sgn} {u} * step"

    def one(u, pexpr):
        lines = [_load(V, ldv, "ldx", "x", pexpr, f"v{u}_")]
        if bwd:
            lines.append(_load(V, ldv, "ldd", "dy", pexpr, f"g{u}_"))
        return lines

    def res(u):
        if bwd:
            return [f"g{u}_{j} * e0_{j} + v{u}_{j} * e1_{j} + e2_{j}" for j in J]
        return [f"(v{u}_{j} - k{j}) * e0_{j} + e1_{j}" if shifted else f"v{u}_{j} * e0_{j} + e1_{j}" for j in J]

    body = [ln for u in range(U) for ln in one(u, at(u))]
    body += [_store(V, stv, "out", at(u), res(u)) for u in range(U)]
    tail = one("t", "p") + [_store(V, stv, "out", "p", res("t"))]
    tstep = "step"
    if gtail and U > 1:
        tail = []
        for u in range(U - 1):
            ok = f"q{u} >= pstop" if reverse else f"q{u} < pend"
            tail.append(f"q{u} = p {sgn} {u} * step\nok{u} = {ok}\nq{u} = q{u} if ok{u} else p")
            tail += one(u, f"q{u}")
        for u in range(U - 1):
            tail.append(f"if ok{u}:\n    " + _store(V, stv, "out", f"q{u}", res(u)))
        tstep = f"{(U - 1) * ty * C}"
    coefs = [f"e0_{j} = lde(e0a, c + {j})\ne1_{j} = lde(e1a, c + {j})" for j in J]
    if bwd:
        coefs += [f"e2_{j} = lde(e2a, c + {j})" for j in J]
    if shifted and not bwd:
        coefs += [f"k{j} = lde(e2a, c + {j})" if k_in_e2 else f"k{j} = ldx(x, c + {j})" for j in J]
    if reverse:
        walk = f"""    p = (r1 - 1 - cuda.threadIdx.y) * {C} + c
    pstop = r0 * {C}
    while p - {(U - 1) * ty * C} >= pstop:
{_ind(body, 8)}
        p -= {U * ty * C}
    while p >= pstop:
{_ind(tail, 8)}
        p -= {tstep}
"""
    else:
        walk = f"""    p = (r0 + cuda.threadIdx.y) * {C} + c
    pend = r1 * {C}
    while p + {(U - 1) * ty * C} < pend:
{_ind(body, 8)}
        p += {U * ty * C}
    while p < pend:
{_ind(tail, 8)}
        p += {tstep}
"""
    src = f"""def kernel(x, dy, e0a, e1a, e2a, out, rows, chunk_rows):
    c = (cuda.blockIdx.x * {txv} + cuda.threadIdx.x) * {V}
    if c >= {C}:
        return
{_ind(coefs, 4)}
    r0 = cuda.blockIdx.y * chunk_rows
    r1 = min(r0 + chunk_rows, rows)
    step = {ty * C}
{walk}"""
    names = dict(ldx=loader(x_dt, ct), ldd=loader(dy_dt or x_dt, ct), lde=loader(coef_dt, ct), sto=storer(out_dt))
    return _jit(src, "apply", names), src


def combine_src(head, ct, ty, unroll):
    """Kernel source: ``head`` (the ``def`` line), then the chunk sums of both partial arrays for channel
    ``c = blockIdx.x * 32 + threadIdx.x``: block (32, ``ty``), thread (x, y) adds chunks y, y + ty, ... with
    ``unroll`` independent loads in flight (``unroll`` running sums), the ``ty`` partials added in shared memory
    in a fixed order (deterministic); every thread but (x, 0) of a channel < ``channels`` returns, which ends
    with the sums in ``a``, ``b``. The arguments must include ``part0, part1, chunks, channels``."""
    zero = po.lit(0.0, ct)
    U = unroll
    loads = [f"a{u} += part0[p + {u} * step]\nb{u} += part1[p + {u} * step]" for u in range(U)]
    return f"""{head}
    sa = cuda.shared.array(({ty}, 32), SHARED_DTYPE)
    sb = cuda.shared.array(({ty}, 32), SHARED_DTYPE)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = cuda.blockIdx.x * 32 + tx
{_ind([f"a{u} = {zero}" for u in range(U)] + [f"b{u} = {zero}" for u in range(U)], 4)}
    if c < channels:
        step = {ty} * channels
        p = ty * channels + c
        end = chunks * channels
        while p + {U - 1} * step < end:
{_ind(loads, 12)}
            p += {U} * step
        while p < end:
            a0 += part0[p]
            b0 += part1[p]
            p += step
    a = {" + ".join(f"a{u}" for u in range(U))}
    b = {" + ".join(f"b{u}" for u in range(U))}
    sa[ty, tx] = a
    sb[ty, tx] = b
    cuda.syncthreads()
    if ty != 0 or c >= channels:
        return
    for j in range(1, {ty}):
        a += sa[j, tx]
        b += sb[j, tx]
"""


@functools.lru_cache(maxsize=None)
def combine_kernel(ct="float32", ty=32, unroll=4):
    """``out[c] = sum_j part[j * C + c]`` over the chunks for both partial arrays (:func:`combine_src`).
    Grid ceil(C / 32), block (32, ``ty``). Arguments ``(part0, part1, out0, out1, chunks, channels)``."""
    src = combine_src("def kernel(part0, part1, out0, out1, chunks, channels):", ct, ty, unroll) + \
        "    out0[c] = a\n    out1[c] = b\n"
    import numba
    return _jit(src, "combine", dict(SHARED_DTYPE=numba.float64 if ct == "float64" else numba.float32)), src
