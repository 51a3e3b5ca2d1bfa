"""Batch-norm backward on packed NHWC float32 (``rows`` x ``C``, C % 4 == 0) in ONE cooperative kernel
that keeps part of (x, dy) on chip between the statistics and the dx pass.

The three-launch path (:mod:`ncudnn.kernels.norm.bn_colsv` + :mod:`ncudnn.kernels.norm.bn_fin`) reads
(x, dy) twice from DRAM except what the L2 still holds. Here a persistent grid of one block per SM
(co-resident: a cooperative launch) walks its chunk of rows once for the sums, keeping

* the first ``NR`` rows of each thread in registers (named variables of the generated source) and
* the next ``NS`` rows in dynamic shared memory (structure-of-arrays: word ``((i * 8 + j) * TY + ty) *
  TXV + tx`` for cached row i, component j of x0..x3, dy0..dy3: conflict-free),

streams the rest (``U`` rows' 16-byte loads in flight), then

1. writes the block's per-channel partial sums (the ``TY`` row groups added in shared memory in a fixed
   order) to ``part0`` / ``part1`` [chunk, C]; **grid barrier**;
2. block ``f`` (flat) adds the chunks' partials of channels ``f * CPB .. f * CPB + CPB - 1`` (``LANES``
   lanes a channel; CPB < 32: warp shuffles, then the warps' sums in order; else a shared-memory tree:
   deterministic either way) and writes dscale = inv * sum dy(x -
   mean), dbias = sum dy and the dx coefficients ``eq_dy = scale * inv``, ``eq_x = -scale * inv^2 *
   dscale / count``, ``eq_b = scale * inv * (inv * mean * dscale - dbias) / count`` to ``coef``
   [3, C]; **grid barrier**;
3. writes ``dx = dy * eq_dy + x * eq_x + eq_b``: first the streamed rows from the last back (the rows
   read last are still in the L2; streaming hints on these loads and the stores), then the shared-memory
   rows, then the register rows (no DRAM reads for those).

Geometry (:func:`persist_config`): ``TXV`` threads across 4-channel groups (a power of 2 <= 64), ``TY =
THREADS / TXV`` row groups; grid (tiles, chunks) with tiles * chunks <= SMs (one block an SM:
``max_registers`` = 65536 / THREADS, the shared cache sized to fit). The simulator runs blocks one after
another, so there the grid must be one block (the barrier is then the block's).
"""
import functools
from dataclasses import astuple, dataclass
import math

from numba import cuda

from ...platform import simulator_enabled
from ..pointwise import ops as po
from ..runtime.dtypes import loader, storer
from ..primitives.grid_sync import grid_barrier
from ..primitives.cshint import ld4cs, st4cs
from ..primitives.warp import shfl_xor
from ..primitives.ptx import cp_async_cg_16_zfill, cp_async_commit, cp_async_wait_all
from ..primitives.vec import ld4, st4, sel

__all__ = ["PersistConfig", "persist_config", "persist_bwd_kernel", "phase2_geometry", "shared_bytes",
           "SMEM_LIMIT"]

#: dynamic + static shared memory a block may use on sm_90 (227 KB)
SMEM_LIMIT = 232448
#: dynamic shared memory a block of the inline-barrier kernel asks for at least: over half an SM's 228 KB
#: (static arrays included), so no SM ever holds two blocks of it (see grid_sync.device_counter)
ONE_BLOCK_SHARED = 120 * 1024
#: per-channel arrays of the kernel, in argument order (descriptors as :data:`BWD_ARRAYS`)
CHANNEL_ARRAYS = ("mean", "inv", "scale", "dscale", "dbias")


@dataclass(frozen=True, order=True)
class PersistConfig:
    """Geometry of the persistent kernel: ``tiles`` x ``chunks`` co-resident blocks of (txv, ty) threads, a
    thread 4 consecutive channels, each chunk ``chunk_rows`` rows (with ``fill`` the last chunks may be short
    or empty). Iterates (and compares) as the tuple (txv, ty, tiles, chunks, chunk_rows)."""
    txv: int
    ty: int
    tiles: int
    chunks: int
    chunk_rows: int

    def __iter__(self):
        return iter(astuple(self))

    def check(self):
        """(ok, reason): whether the geometry can launch."""
        if min(astuple(self)) < 1:
            return False, f"{self}: every field must be at least 1"
        if self.txv * self.ty > 1024:
            return False, f"{self.txv} x {self.ty} threads per block > 1024"
        return True, ""

    def keep(self, rows, channels, blocks):
        """Launchable, covering ``rows`` x ``channels`` (C % 4 == 0), on at most ``blocks`` co-resident blocks."""
        return (self.check()[0] and channels % 4 == 0 and self.chunks * self.chunk_rows >= rows
                and self.tiles * self.txv * 4 >= channels and self.tiles * self.chunks <= blocks)


def persist_config(rows, channels, blocks, threads=512, fill=False):
    """Geometry for ``rows`` x ``channels`` on at most ``blocks`` co-resident blocks of ``threads``
    threads, or None when the channel tiles alone exceed ``blocks`` (or C % 4 != 0). ``fill``: keep
    ``blocks // tiles`` chunks even where fewer would hold the rows (the last chunks short or empty), so the grid
    fills every block slot whenever the tiles divide ``blocks`` (the inline barrier's condition)."""
    if channels % 4 or rows < 1:
        return None
    lanes = channels // 4
    txv = min(64, threads, 1 << (lanes - 1).bit_length())
    ty = threads // txv
    tiles = math.ceil(lanes / txv)
    if tiles > blocks:
        return None
    chunks = max(1, min(blocks // tiles, rows))
    if fill:
        chunks = blocks // tiles
    chunk_rows = math.ceil(rows / chunks)
    if not fill:
        chunks = math.ceil(rows / chunk_rows)
    return PersistConfig(txv, ty, tiles, chunks, chunk_rows)


def phase2_geometry(channels, nblocks, threads):
    """(CPB channels a block, LANES lanes a channel) of the combine: CPB the power of 2 covering
    ceil(C / nblocks) (at most ``threads``), LANES = threads / CPB."""
    need = max(1, -(-channels // max(1, nblocks)))
    cpb = min(threads, 1 << (need - 1).bit_length())
    return cpb, threads // cpb


def shared_bytes(threads, ns, pf=0):
    """Dynamic shared memory of ``ns`` cached and ``pf`` prefetched rows a thread (x and dy, 4 channels: 32 bytes)."""
    return (ns + pf) * threads * 32


def static_bytes(threads):
    """Static shared memory: one (TY, 4 TXV) float32 reduction array + two THREADS-long combine arrays."""
    return threads * 4 * 4 + 2 * threads * 4


def _ind(lines, n):
    return "\n".join(" " * n + ln for line in lines for ln in line.split("\n"))


def _off(desc):
    return f"{{c}} * {desc[2]}" if desc[2] != 1 else "{c}"


@functools.lru_cache(maxsize=None)
def persist_bwd_kernel(channels, arrays, txv, ty, tiles, nr=4, ns=8, unroll=4, cpb=2, hint=True, acache=False,
                       stop=0, tail_hint=True, pf=0, gbar=False):
    """The kernel (module docstring). ``arrays``: (dtype, sN, sC) of mean, inv, scale, dscale, dbias.
    ``acache``: the shared-memory rows are fetched with ``cp.async`` (16 bytes a copy, all of them issued
    before the streamed rows, so they are in flight without registers; row-major 16-byte slots) and added
    once the streamed rows are done. ``tail_hint`` (default): the on-chip rows' dx (the kernel's last stores)
    with the streaming hint too; False: plain stores (the dx written last stays in the L2; slightly slower
    on the H200).
    ``pf`` (with ``acache``): the first ``pf`` streamed rows of each thread (phase 3 reaches them last, from
    DRAM) are fetched again by ``cp.async`` into shared memory right after the sums, so those loads run during
    the two barriers and the combine instead of after them.
    ``gbar``: the two barriers are :func:`ncudnn.kernels.primitives.grid_sync.grid_barrier` on a uint32 counter passed as
    one more argument ``bar`` (zeroed once; one a stream), not ``this_grid().sync()`` (a device-runtime call,
    cooperative launch); the launch should still be cooperative (co-residency is checked, not assumed).
    ``stop`` (timing probes only): 1 ends after the partial sums, 2 after
    the coefficients (dx not written).
    Arguments ``(x, dy, dx, part0, part1, coef, mean, inv, scale, dscale, dbias, rows, chunk_rows, chunks,
    count)``; grid (tiles, chunks), block (txv, ty), dynamic shared memory :func:`shared_bytes` (threads,
    ns). Returns (dispatcher, source)."""
    C, U, T = channels, unroll, txv * ty
    lanes2 = T // cpb
    J = range(4)
    Z = "float32(0.0)"
    ldv, stv = ("ld4cs", "st4cs") if hint else ("ld4", "st4")
    stt = stv if tail_hint else "st4"
    d = dict(zip(CHANNEL_ARRAYS, arrays))

    def acc(x, g, ok=None):
        if ok is None:
            return [f"a{j} += {g}{j}\nb{j} += {g}{j} * ({x}{j} - m{j})" for j in J]
        return [f"a{j} += sel({ok}, {g}{j}, {Z})\nb{j} += sel({ok}, {g}{j} * ({x}{j} - m{j}), {Z})" for j in J]

    def load(fn, p, x, g):
        return [f"{x}0, {x}1, {x}2, {x}3 = {fn}(x, {p})", f"{g}0, {g}1, {g}2, {g}3 = {fn}(dy, {p})"]

    def dx(x, g):
        return ", ".join(f"{g}{j} * e0_{j} + {x}{j} * e1_{j} + e2_{j}" for j in J)

    def cidx(i, j):
        return f"(({i * 8 + j} * {ty} + ty) * {txv} + tx)"

    def aidx(i, which):     # cp.async layout: 16-byte slot of thread t, row i, x (0) / dy (1)
        return f"(({2 * i + which} * {T} + t) * 4)"

    # phase 1: register rows, shared rows, streamed rows
    p1 = []
    for i in range(nr):
        p1.append(f"k{i} = {i} < nk and cok\nq = pb + {i} * step if k{i} else cc")
        p1 += load("ld4", "q", f"xr{i}_", f"gr{i}_")
    for i in range(nr):
        p1 += acc(f"xr{i}_", f"gr{i}_", f"k{i}")
    if acache:
        for i in range(ns):
            p1.append(f"s{i} = {nr + i} < nk and cok\nq = pb + {nr + i} * step if s{i} else cc\nnb = 16 if s{i} else 0")
            p1.append(f"cp_async_cg_16_zfill(cache, {aidx(i, 0)}, x, q, nb)")
            p1.append(f"cp_async_cg_16_zfill(cache, {aidx(i, 1)}, dy, q, nb)")
        p1.append("cp_async_commit()")
    for i0 in range(0, 0 if acache else ns, U):
        grp = range(i0, min(ns, i0 + U))
        for i in grp:
            p1.append(f"s{i} = {nr + i} < nk and cok\nq = pb + {nr + i} * step if s{i} else cc")
            p1 += load("ld4", "q", f"xs{i}_", f"gs{i}_")
        for i in grp:
            p1 += acc(f"xs{i}_", f"gs{i}_", f"s{i}")
            p1 += [f"cache[{cidx(i, j)}] = xs{i}_{j}" for j in J]
            p1 += [f"cache[{cidx(i, 4 + j)}] = gs{i}_{j}" for j in J]
    body1 = [ln for u in range(U) for ln in load("ld4", f"p + {u} * step", f"v{u}_", f"g{u}_")]
    body1 += [ln for u in range(U) for ln in acc(f"v{u}_", f"g{u}_")]
    tail1 = load("ld4", "p", "v_", "g_") + acc("v_", "g_")

    # phase 3: streamed rows backwards, shared rows, register rows
    body3 = [ln for u in range(U) for ln in load(ldv, "p" if u == 0 else f"p - {u} * step", f"v{u}_", f"g{u}_")]
    body3 += [f"{stv}(dx, {'p' if u == 0 else f'p - {u} * step'}, {dx(f'v{u}_', f'g{u}_')})" for u in range(U)]
    tail3 = load(ldv, "p", "v_", "g_") + [f"{stv}(dx, p, {dx('v_', 'g_')})"]
    if pf and not acache:
        raise ValueError("norm_bn_persist: prefetched rows (pf) need the cp.async layout (acache)")
    p3 = []
    if pf:
        p3.append("cp_async_wait_all()")
    for i in range(ns, ns + pf):        # the prefetched rows: shared slots after the cached ones
        p3.append(f"if {nr + i} < nk:")
        rd = [f"y0, y1, y2, y3 = ld4(cache, {aidx(i, 0)})", f"h0, h1, h2, h3 = ld4(cache, {aidx(i, 1)})"]
        p3.append(_ind(rd + [f"{stv}(dx, pb + {nr + i} * step, {dx('y', 'h')})"], 4))
    for i in range(ns):     # row flags recomputed, not kept live through the barriers
        p3.append(f"if {nr + i} < nk:")
        if acache:
            rd = [f"y0, y1, y2, y3 = ld4(cache, {aidx(i, 0)})", f"h0, h1, h2, h3 = ld4(cache, {aidx(i, 1)})"]
        else:
            rd = [f"y{j} = cache[{cidx(i, j)}]" for j in J] + [f"h{j} = cache[{cidx(i, 4 + j)}]" for j in J]
        p3.append(_ind(rd + [f"{stt}(dx, pb + {nr + i} * step, {dx('y', 'h')})"], 4))
    after = []      # the cp.async rows, added once the streamed rows are done
    if acache:
        after.append("cp_async_wait_all()")
        for i in range(ns):
            after += [f"xa0, xa1, xa2, xa3 = ld4(cache, {aidx(i, 0)})", f"ga0, ga1, ga2, ga3 = ld4(cache, {aidx(i, 1)})"]
            after += acc("xa", "ga", f"s{i}")
    for i in range(ns, ns + pf):        # phase 3's last DRAM rows, in flight during the barriers
        after.append(f"q = pb + {nr + i} * step if {nr + i} < nk and cok else cc\nnb = 16 if {nr + i} < nk and cok else 0")
        after.append(f"cp_async_cg_16_zfill(cache, {aidx(i, 0)}, x, q, nb)")
        after.append(f"cp_async_cg_16_zfill(cache, {aidx(i, 1)}, dy, q, nb)")
    if pf:
        after.append("cp_async_commit()")
    for i in range(nr):
        p3.append(f"if {i} < nk:\n    {stt}(dx, pb + {i} * step, {dx(f'xr{i}_', f'gr{i}_')})")

    o = {n: _off(d[n]).format(c="c2") for n in CHANNEL_ARRAYS}
    tree = []
    s = lanes2 // 2
    if cpb < 32 and T % 32 == 0:     # a warp's lanes by shuffles (channel bits kept), then the warps in order
        offs = []
        o2 = 16
        while o2 >= cpb:
            offs.append(o2)
            o2 //= 2
        tree = [f"a += shfl_xor(a, {o2})\nb += shfl_xor(b, {o2})" for o2 in offs]
        tree.append(f"""if t % 32 < {cpb}:
    s2a[(t // 32) * {cpb} + t % 32] = a
    s2b[(t // 32) * {cpb} + t % 32] = b
cuda.syncthreads()
if lane == 0:
    a = s2a[t]
    b = s2b[t]
    for w in range(1, {T // 32}):
        a += s2a[w * {cpb} + t]
        b += s2b[w * {cpb} + t]""")
        s = 0
    while s >= 1:
        tree.append(f"""cuda.syncthreads()
if lane < {s}:
    a += s2a[t + {s * cpb}]
    b += s2b[t + {s * cpb}]
    s2a[t] = a
    s2b[t] = b""")
        s //= 2
    fold = "\n".join(f"            VV{j} += red[i, tx * 4 + {j}]" for j in J)
    src = f"""def kernel(x, dy, dx, part0, part1, coef, mean, inv, scale, dscale, dbias, rows, chunk_rows, chunks, count_in{", bar" if gbar else ""}):
    cache = cuda.shared.array(0, float32)
    red = cuda.shared.array(({ty}, {txv * 4}), float32)
    s2a = cuda.shared.array({T}, float32)
    s2b = cuda.shared.array({T}, float32)
    {"nblk = cuda.gridDim.x * cuda.gridDim.y" if gbar else "grid = cuda.cg.this_grid()"}
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = (cuda.blockIdx.x * {txv} + tx) * 4
    cok = c < {C}
    cc = c if cok else 0
    t = ty * {txv} + tx
    r0 = cuda.blockIdx.y * chunk_rows
    r1 = min(r0 + chunk_rows, rows)
    span = r1 - r0 - ty
    nk = (span + {ty - 1}) // {ty} if span > 0 else 0
    step = {ty * C}
    pb = (r0 + ty) * {C} + cc
{_ind([f"m{j} = ldm(mean, {_off(d['mean']).format(c=f'(cc + {j})')})" for j in J], 4)}
{_ind([f"a{j} = {Z}" for j in J] + [f"b{j} = {Z}" for j in J], 4)}
{_ind(p1, 4)}
    if cok:
        p = pb + {nr + ns} * step
        pend = pb + nk * step
        while p + {(U - 1)} * step < pend:
{_ind(body1, 12)}
            p += {U} * step
        while p < pend:
{_ind(tail1, 12)}
            p += step
{_ind(after, 4)}
    # the block's partial sums: row groups added in a fixed order
{_ind([f"red[ty, tx * 4 + {j}] = a{j}" for j in J], 4)}
    cuda.syncthreads()
    if ty == 0:
        for i in range(1, {ty}):
{fold.replace('VV', 'a')}
    cuda.syncthreads()
{_ind([f"red[ty, tx * 4 + {j}] = b{j}" for j in J], 4)}
    cuda.syncthreads()
    if ty == 0:
        for i in range(1, {ty}):
{fold.replace('VV', 'b')}
        if cok:
            o = cuda.blockIdx.y * {C} + c
{_ind([f"part0[o + {j}] = a{j}" for j in J] + [f"part1[o + {j}] = b{j}" for j in J], 12)}
{"    return" if stop == 1 else ""}
    {{SYNC}}
    # the chunk combine and the coefficients of channels f * {cpb} ..
    lane = t // {cpb}
    c2 = (cuda.blockIdx.y * {tiles} + cuda.blockIdx.x) * {cpb} + t % {cpb}
    a = {Z}
    b = {Z}
    if c2 < {C}:
        jj = lane
        while jj < chunks:
            a += part0[jj * {C} + c2]
            b += part1[jj * {C} + c2]
            jj += {lanes2}
{"" if cpb < 32 and T % 32 == 0 else "    s2a[t] = a" + chr(10) + "    s2b[t] = b"}
{_ind(tree, 4)}
    if lane == 0 and c2 < {C}:
        m_inv = float32(1.0) / float32(count_in)
        mu = ldm(mean, {o['mean']})
        iv = ldi(inv, {o['inv']})
        ds = iv * b
        sc = lds(scale, {o['scale']})
        st_dscale(dscale, {o['dscale']}, ds)
        st_dbias(dbias, {o['dbias']}, a)
        coef[c2] = sc * iv
        coef[{C} + c2] = -sc * iv * iv * ds * m_inv
        coef[{2 * C} + c2] = sc * iv * (iv * mu * ds - a) * m_inv
    {{SYNC}}
    if not cok or {stop == 2}:
        return
{_ind([f"e0_{j} = coef[c + {j}]" for j in J] + [f"e1_{j} = coef[{C} + c + {j}]" for j in J]
      + [f"e2_{j} = coef[{2 * C} + c + {j}]" for j in J], 4)}
    pstop = pb + {nr + ns + pf} * step
    p = pb + (nk - 1) * step
    while p - {U - 1} * step >= pstop:
{_ind(body3, 8)}
        p -= {U} * step
    while p >= pstop:
{_ind(tail3, 8)}
        p -= step
{_ind(p3, 4)}
"""
    src = src.replace("{SYNC}", "grid_barrier(bar, nblk)" if gbar else "grid.sync()")
    import numba
    ns_ = dict(po.expr_globals(), __name__=__name__, cuda=cuda, float32=numba.float32, ld4=ld4, st4=st4,
               ld4cs=ld4cs, st4cs=st4cs, sel=sel, min=min, shfl_xor=shfl_xor, cp_async_cg_16_zfill=cp_async_cg_16_zfill,
               cp_async_commit=cp_async_commit, cp_async_wait_all=cp_async_wait_all, grid_barrier=grid_barrier,
               ldm=loader(d["mean"][0]), ldi=loader(d["inv"][0]), lds=loader(d["scale"][0]),
               st_dscale=storer(d["dscale"][0]), st_dbias=storer(d["dbias"][0]))
    exec(compile(src, "<norm_bn_persist bwd>", "exec"), ns_)
    opts = {} if simulator_enabled() else {"max_registers": 65536 // T}   # one block an SM, co-resident
    return cuda.jit(ns_["kernel"], **opts), src


def signature(arrays, gbar=False):
    from ..runtime.dtypes import array_sig as a
    f = a("float32")
    chan = ", ".join(a(desc[0]) for desc in arrays)
    return f"void({f}, {f}, {f}, {f}, {f}, {f}, {chan}, int64, int64, int64, float64{', ' + a('uint32') if gbar else ''})"


#: (threads, register rows, shared rows, unroll, cp.async shared rows, prefetched rows) the engine offers
#: (:data:`ncudnn.engines.norm.bn_steps.PERSIST_VARIANTS`); the first is the engine's default, the fastest on the
#: H200 (10 shared rows stored by the threads; faster than cudnn-frontend).
#: The inline grid barrier is used: this_grid().sync() made the same kernels slower. Prefetched rows were slower
#: too: one such variant is kept for the autotuner. Figures: dev/perf_notes.md, "Batch norm".
PERSIST_CASES = ((512, 4, 10, 4, False, 0), (512, 4, 8, 4, False, 0), (512, 4, 8, 4, True, 0), (512, 4, 6, 4, False, 0),
                 (512, 2, 8, 4, False, 0), (512, 4, 10, 4, True, 3), (512, 4, 10, 4, True, 0))
#: the cases the sm_90 compile check holds to 65536 / threads registers (indices into PERSIST_CASES;
#: registered by cases.py)
COMPILE_CASES = (0, 1, 2, 5)
