"""Layer / RMS norm backward in one pass: a persistent row kernel writing dx and the per-block partial
column sums of dscale / dbias (then :func:`ncudnn.kernels.norm.bn_cols.combine_kernel` adds the
partials in block order: deterministic, no atomics).

Geometry (:func:`fused_config`): a grid of ``G`` blocks (about SMs x blocks per SM) of ``BLOCK``
threads; block ``b`` takes row groups ``b, b + G, b + 2G, ...`` of ``ROWS`` consecutive rows each.
Thread ``t`` owns the same columns in every row: vectors ``q = t + k * BLOCK`` (``k < VPT``) of
``VEC`` elements (one 16-byte access each; ``VEC`` 1 for rows that do not divide into vectors), so
its scale values stay in registers and its dscale / dbias partial sums are register accumulators.

Per row group: load x and dy of the ``ROWS`` rows (``2 * ROWS * VPT`` vector loads in flight),
``xhat = (x - mean) * inv`` (RMS: ``x * inv``), ``g = dy * scale``; per row the two block sums
``sum g`` and ``sum g * xhat`` (warp shuffles, one shared-memory exchange between warps, double
buffered: one barrier per group, the warps' values added in warp order); then
``dx = inv * (g - mean(g) - xhat * mean(g * xhat))`` (RMS: without the ``mean(g)`` term) and the
accumulators ``dbias += dy``, ``dscale += dy * xhat``. At the end each block writes its two partial
rows (``part0``: dbias, ``part1``: dscale; ``G * n`` compute-type values each).

All math in float32 registers (float64 when every tensor is float64). Moves x, dy once, dx once, plus
``2 * G * n`` partials written and read back by the combine.
"""
import functools
from dataclasses import astuple, dataclass

import numba
from numba import cuda

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, dtype_name, loader, storer
from ..primitives.warp import warp_sum

__all__ = ["fused_config", "fused_bwd_kernel", "fused_vec", "partial_rows", "reg_cap", "EPT_MAX", "FusedConfig"]

#: values a thread keeps per row at most (x and dy of each of them stay in registers)
EPT_MAX = 32


@dataclass(frozen=True, order=True)
class FusedConfig:
    """Geometry of the fused backward: ``block`` threads a block, ``vpt`` vectors of ``vec`` elements a
    thread, ``rows`` rows a group, ``grid`` blocks, ``stages`` row groups in registers, ``blocks_per_sm``
    blocks an SM the grid and the register cap are sized for. Iterates (and compares) as the tuple (block,
    vpt, rows, grid, vec, stages, blocks_per_sm)."""
    block: int
    vpt: int
    rows: int
    grid: int
    vec: int
    stages: int
    blocks_per_sm: int

    def __iter__(self):
        return iter(astuple(self))

    def check(self):
        """(ok, reason): whether the geometry can be built and launched."""
        if min(astuple(self)) < 1:
            return False, f"{self}: every field must be at least 1"
        if self.block > 1024:
            return False, f"{self.block} threads per block > 1024"
        if self.stages not in (1, 2):
            return False, f"STAGES {self.stages}: 1 or 2"
        if self.vpt * self.vec > EPT_MAX:
            return False, f"{self.vpt * self.vec} values a thread a row > {EPT_MAX}"
        return True, ""

    def keep(self, n, nrows):
        """Buildable, and covering ``nrows`` rows of ``n`` elements (``vec`` dividing ``n``)."""
        return (self.check()[0] and n % self.vec == 0 and self.block * self.vpt * self.vec >= n
                and self.grid <= -(-nrows // self.rows))


def fused_vec(n, itemsizes):
    """Elements per 16-byte access for rows of ``n`` elements of tensors of ``itemsizes`` bytes (1 when
    n does not divide into such vectors). Buffer alignment is the caller's check."""
    vec = 16 // max(itemsizes)
    return vec if vec > 1 and n % vec == 0 else 1


def _regs(block, vpt, vec, rows, stages=1):
    """Registers a thread is expected to take: x / dy of every row of each group in registers, scale and
    two accumulators per element, addressing; element accesses (``vec`` 1) add an address a value (sm_90
    ptxas: 118 for the estimate's 128 at 2 rows x 8 values with prefetch, 229 for 192 at 4 rows)."""
    e = vpt * vec
    data = 2 * stages * rows * e
    return min(255, data + 3 * e + 40 + (data if vec == 1 else 0))


#: values a thread keeps per row group at most when TILE_ROWS is chosen (x and dy of ROWS rows)
GROUP_VALUES = 32
REGS_PER_SM = 65536


def _round8(r):
    return -(-r // 8) * 8


def fused_config(n, nrows, sms, vec=1, block=0, rows=0, blocks_per_sm=0, stages=0):
    """:class:`FusedConfig` for rows of ``n`` elements, or None when no geometry keeps a row group in
    registers (rows too long: the two-pass path runs them).

    Knobs given (non-zero) are kept; the others are searched in this order: ``block`` the power of 2
    giving 8 elements a thread (32..1024), then half, a quarter of it; ``stages`` 2 (the next row
    group loaded while this one is reduced), then 1; ``rows`` 4, 2, 1 with at most ``GROUP_VALUES``
    elements a thread per group (half with element accesses); the first whose estimated registers (:func:`_regs`) fit a block in
    an SM's register file. ``blocks_per_sm`` 0: as many as threads and the estimate allow. The grid
    is ``sms * blocks_per_sm`` blocks, at most one per row group.

    On the H200 this search picks the fastest of experiments/probe_norm_rows.py's geometries (8192x1024:
    BLOCK 128, ROWS 4, STAGES 2, 2 blocks per SM; 8192x4096: BLOCK 512, ROWS 2, STAGES 2, 1 block per SM),
    both faster than cuDNN's graph API (figures: dev/perf_notes.md, "Layer / RMS norm rows")."""
    nv = -(-n // vec)
    if block:
        blocks = [block]
    else:
        b0 = min(1024, max(32, 1 << max(0, (-(-nv // max(1, 8 // vec)) - 1).bit_length())))
        blocks = [b for b in (b0, b0 // 2, b0 // 4) if b >= 32]
    chosen = None
    for b in blocks:
        vpt = -(-nv // b)
        e = vpt * vec
        if e > EPT_MAX:
            continue
        for st in ([stages] if stages else [2, 1]):
            cap = GROUP_VALUES if vec > 1 else GROUP_VALUES // 2
            rs = [rows] if rows else ([r for r in (4, 2, 1) if r * e <= cap] or [1])
            for r in rs:
                if b * _round8(_regs(b, vpt, vec, r, st)) <= REGS_PER_SM or (block and rows and stages):
                    chosen = (b, vpt, r, st)
                    break
            if chosen:
                break
        if chosen:
            break
    if chosen is None:
        return None
    b, vpt, r, st = chosen
    if not blocks_per_sm:                # 8 registers of margin: the cap below must not force spills
        blocks_per_sm = max(1, min(2048 // b, REGS_PER_SM // (b * _round8(_regs(b, vpt, vec, r, st) + 8)), 32))
    grid = max(1, min(-(-nrows // r), sms * blocks_per_sm))
    return FusedConfig(b, vpt, r, grid, vec, st, blocks_per_sm)


def reg_cap(cfg):
    """The register limit a thread is compiled with: ``cfg.blocks_per_sm`` blocks fit an SM (at most 255)."""
    return min(255, (REGS_PER_SM // (cfg.block * cfg.blocks_per_sm)) // 8 * 8)


def partial_rows(cfg):
    """Partial rows (combine chunks) the kernel writes for ``cfg``: one per block."""
    return cfg.grid


def _slot_guard(k, block, nv):
    return (k + 1) * block > nv


def _fused_source(n, block, vpt, vec, rows, center, ct, pvec, stages=1):
    """Kernel source. ``pvec``: elements per store of the compute-type partials (<= 16 bytes);
    ``stages`` 2: the next row group's loads are issued before this group's reductions (registers
    double-buffered)."""
    L = po.lit
    zero, inv_n = L(0.0, ct), L(1.0 / n, ct)
    nv = n // vec if vec > 1 else n
    nw = block // 32
    R = rows
    half = nw * 2 * R
    E = range(vec)
    s = ["def kernel(x, dy, scale, s_mean, s_inv, dx, part0, part1, nrows):",
         f"    sm = cuda.shared.array({2 * half}, SHARED_DTYPE)",
         "    t = cuda.threadIdx.x",
         "    lane = t % 32",
         f"    wo = (t // 32) * {2 * R}"]

    def guarded(k, ind, body, fill=None):
        """``body`` lines (list) under the slot-k in-row test when slot k can pass the row's end."""
        if not _slot_guard(k, block, nv):
            return [ind + b for b in body]
        out = [f"{ind}if q{k} < {nv}:"] + [ind + "    " + b for b in body]
        if fill:
            out += [f"{ind}else:"] + [ind + "    " + f for f in fill]
        return out

    for k in range(vpt):                       # scale in registers, accumulators zeroed
        s.append(f"    q{k} = t + {k * block}")
        if vec > 1:
            body = [f"{', '.join(f'rs{k}_{j}' for j in E)} = ldvp(scale, q{k} * {vec})"]
            body += [f"s{k}_{j} = cp(rs{k}_{j})" for j in E]
        else:
            body = [f"s{k}_0 = lds(scale, q{k})"]
        s += guarded(k, "    ", body, [f"s{k}_{j} = {zero}" for j in E])
        s += [f"    a{k}_{j} = {zero}" for j in E] + [f"    b{k}_{j} = {zero}" for j in E]
    I = "        "

    def loads(r0, p, ind):
        """Lines loading the group of rows from ``r0`` into registers named with prefix ``p``."""
        out = []
        for i in range(R):
            if i:
                out += [f"{ind}{p}ok{i} = {r0} + {i} < nrows", f"{ind}{p}rw{i} = {r0} + {i} if {p}ok{i} else {r0}"]
            else:
                out.append(f"{ind}{p}rw0 = {r0}")
            out.append(f"{ind}{p}o{i} = {p}rw{i} * {n}")
            out.append(f"{ind}{p}m{i} = ldst(s_mean, {p}rw{i})" if center else f"{ind}{p}m{i} = {zero}")
            out.append(f"{ind}{p}iv{i} = ldst(s_inv, {p}rw{i})")
            for k in range(vpt):
                if vec > 1:
                    body = [f"{', '.join(f'rx{i}_{k}_{j}' for j in E)} = ldvx(x, {p}o{i} + q{k} * {vec})",
                            f"{', '.join(f'rd{i}_{k}_{j}' for j in E)} = ldvd(dy, {p}o{i} + q{k} * {vec})"]
                    body += [f"{p}h{i}_{k}_{j} = cx(rx{i}_{k}_{j})" for j in E]
                    body += [f"{p}d{i}_{k}_{j} = cd(rd{i}_{k}_{j})" for j in E]
                else:
                    body = [f"{p}h{i}_{k}_0 = ldx(x, {p}o{i} + q{k})", f"{p}d{i}_{k}_0 = ldd(dy, {p}o{i} + q{k})"]
                fill = [f"{p}h{i}_{k}_{j} = {zero}" for j in E] + [f"{p}d{i}_{k}_{j} = {zero}" for j in E]
                out += guarded(k, ind, body, fill)
        return out

    names = [f"{v}{i}" for i in range(R) for v in (["ok"] if i else []) + ["o", "m", "iv"]]
    names += [f"{v}{i}_{k}_{j}" for i in range(R) for k in range(vpt) for j in E for v in ("h", "d")]
    s += [f"    ngrp = (nrows + {R - 1}) // {R}",
          "    grp = cuda.blockIdx.x",
          "    buf = 0"]
    if stages > 1:               # the first group's loads before the loop, the next group's at its top
        s += loads(f"min(grp, ngrp - 1) * {R}", "", "    ")
        s += ["    while grp < ngrp:",
              f"{I}nxt = grp + cuda.gridDim.x",
              f"{I}if nxt < ngrp:"]
        s += loads(f"nxt * {R}", "n", I + "    ")
        s.append(f"{I}else:")
        s += [f"{I}    n{v} = {'False' if v.startswith('ok') else '0' if v[0] == 'o' else zero}" for v in names]
    else:
        s += ["    while grp < ngrp:"]
        s += loads(f"grp * {R}", "", I)
    for i in range(R):                         # xhat, the row sums
        for k in range(vpt):
            for j in E:
                h = f"h{i}_{k}_{j}"
                s.append(f"{I}{h} = ({h} - m{i}) * iv{i}" if center else f"{I}{h} = {h} * iv{i}")
        gs = [f"d{i}_{k}_{j} * s{k}_{j}" for k in range(vpt) for j in E]
        ghs = [f"d{i}_{k}_{j} * s{k}_{j} * h{i}_{k}_{j}" for k in range(vpt) for j in E]
        s.append(f"{I}sa{i} = warp_sum({' + '.join(gs)})")
        s.append(f"{I}sb{i} = warp_sum({' + '.join(ghs)})")
    s.append(f"{I}if lane == 0:")
    for i in range(R):
        s += [f"{I}    sm[buf + wo + {2 * i}] = sa{i}", f"{I}    sm[buf + wo + {2 * i + 1}] = sb{i}"]
    s.append(f"{I}cuda.syncthreads()")
    for i in range(R):                         # the warps' values added in warp order
        ta = " + ".join(f"sm[buf + {w * 2 * R + 2 * i}]" for w in range(nw))
        tb = " + ".join(f"sm[buf + {w * 2 * R + 2 * i + 1}]" for w in range(nw))
        s.append(f"{I}ca{i} = ({ta}) * {inv_n}" if center else f"{I}ca{i} = {zero}")
        s.append(f"{I}cb{i} = ({tb}) * {inv_n}")
    for i in range(R):                         # dx, the accumulators
        J = I
        if i:
            s.append(f"{I}if ok{i}:")
            J = I + "    "
        for k in range(vpt):
            vals = [f"iv{i} * (d{i}_{k}_{j} * s{k}_{j} - ca{i} - h{i}_{k}_{j} * cb{i})" for j in E]
            if vec > 1:
                body = [f"stvdx(dx, o{i} + q{k} * {vec}, ({', '.join(f'cdx({v})' for v in vals)},))"]
            else:
                body = [f"stdx(dx, o{i} + q{k}, {vals[0]})"]
            body += [f"a{k}_{j} += d{i}_{k}_{j}" for j in E]
            body += [f"b{k}_{j} += d{i}_{k}_{j} * h{i}_{k}_{j}" for j in E]
            s += guarded(k, J, body)
    s.append(f"{I}buf = {half} - buf")
    if stages > 1:
        s += [f"{I}{v} = n{v}" for v in names] + [f"{I}grp = nxt"]
    else:
        s.append(f"{I}grp += cuda.gridDim.x")
    s.append(f"    po = cuda.blockIdx.x * {n}")
    for k in range(vpt):                       # the block's partial rows
        body = []
        for j0 in range(0, vec, pvec):
            idx = f"po + q{k} * {vec} + {j0}" if vec > 1 else f"po + q{k}"
            if pvec > 1:
                body.append(f"stvp(part0, {idx}, ({', '.join(f'a{k}_{j}' for j in range(j0, j0 + pvec))},))")
                body.append(f"stvp(part1, {idx}, ({', '.join(f'b{k}_{j}' for j in range(j0, j0 + pvec))},))")
            else:
                body += [f"part0[{idx}] = a{k}_{j0}", f"part1[{idx}] = b{k}_{j0}"]
        s += guarded(k, "    ", body)
    return "\n".join(s) + "\n"


@functools.lru_cache(maxsize=None)
def fused_bwd_kernel(n, block, vpt, vec, rows, center, x_dt, dy_dt, p_dt, dx_dt, s_dt, stages=1, max_regs=255):
    """The fused backward kernel for a :func:`fused_config` geometry (``vec`` > 1: n % vec == 0 and
    x, dy, scale, dx aligned to one vector). ``center`` False is RMS norm. Arguments
    ``(x, dy, scale, s_mean, s_inv, dx, part0, part1, nrows)`` (``s_mean`` unused for RMS; part0 /
    part1: ``grid * n`` compute-type values each); grid ``cfg.grid``, block ``cfg.block``; ``stages``
    2 prefetches the next row group; ``max_regs`` the compile's register limit (:func:`reg_cap`: the
    blocks the grid counts on stay resident). Returns (dispatcher, source)."""
    from ..pointwise.vector_io import to_compute, to_storage, vector_load, vector_store
    ct = compute_type([x_dt, dy_dt, p_dt, dx_dt, s_dt])
    csize = 8 if ct == "float64" else 4
    pvec = min(vec, 16 // csize) if vec > 1 else 1
    src = _fused_source(n, block, vpt, vec, rows, center, ct, pvec, stages)
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, warp_sum=warp_sum,
              SHARED_DTYPE=numba.float64 if ct == "float64" else numba.float32,
              ldx=loader(x_dt, ct), ldd=loader(dy_dt, ct), lds=loader(p_dt, ct), ldst=loader(s_dt, ct),
              stdx=storer(dx_dt), ldvx=vector_load(vec), ldvd=vector_load(vec), ldvp=vector_load(vec),
              stvdx=vector_store(vec), stvp=vector_store(pvec), cx=to_compute(dtype_name(x_dt), ct),
              cd=to_compute(dtype_name(dy_dt), ct), cp=to_compute(dtype_name(p_dt), ct),
              cdx=to_storage(dtype_name(dx_dt)))
    exec(compile(src, "<norm_row_bwd fused>", "exec"), ns)
    from ..primitives.warp import SIM
    return (cuda.jit(ns["kernel"]) if SIM else cuda.jit(ns["kernel"], max_registers=max_regs)), src
