"""Softmax / log-softmax forward and backward over one axis of an (outer, n, inner) view.

The tensor is a packed buffer viewed as ``(outer, n, inner)`` and the softmax runs over ``n``:
the last axis is ``inner == 1``; the legacy CHANNEL mode of NCHW is ``(N, C, H*W)``; INSTANCE mode
is ``(N, C*H*W, 1)``.

* ``inner == 1`` — **row kernel**, one block per row. Rows of up to ``BLOCK * VPT_MAX`` elements
  stay in registers (one read, one write: block max, exp, block sum, scale). Longer rows take the
  **online** path: one pass keeps a running (max, sum) per thread, combined across the block as
  pairs (m, s) -> (max, s_a e^(m_a - m) + s_b e^(m_b - m)), then a second pass writes.
* ``inner == 1``, 16-byte vectors — **vector row kernel** (:func:`fwd_vec_kernel`: registers or
  online) and the **persistent row kernel** (:func:`persist_kernel`): one block per SM loops over
  rows; a row (up to 32768 elements) lives in registers while the next one streams into shared
  memory with cp.async, so DRAM sees each byte once and the loads overlap the block reductions and
  the stores of the current row (:mod:`ncudnn.kernels.softmax.persist`, re-exported here).
* ``inner > 1`` — **column kernel**: a thread per (outer, inner) position walks ``n`` with stride
  ``inner`` (coalesced across threads), online max/sum, then writes.

Backward from the forward output y (cudnnSoftmaxBackward): softmax ``dx = y * (dy - sum dy*y)``,
log-softmax ``dx = dy - exp(y) * sum dy``. Math in float32 (float64 for all-fp64 I/O).
"""
import functools
import math
import re

import numba

from numba import cuda
from numba.cuda.np import numpy_support

from ..pointwise import ops as po
from ..runtime.dtypes import compute_type, dtype_name, loader, storage_dtype, storer
from ..primitives.warp import SIM, block_max, block_sum, launch, shfl_xor, warp_max, warp_sum
from ..pointwise.vector_rows import load_row_vectors, vec_ok, vector_names
from .persist import (PERSIST_SMEM_MAX, persist_config, persist_grid, persist_kernel,  # noqa: F401
                              persist_ok, softmax_forward_persist)  # (re-exported: the persistent row kernel)
from .persist import _reg_budget

__all__ = ["softmax_forward", "softmax_backward", "softmax_config", "softmax_vec_config", "fwd_vec_kernel",
           "vec_ok", "persist_config", "persist_kernel", "persist_ok", "persist_grid", "softmax_forward_persist"]

#: most row elements a thread keeps in registers (32 spills at the 64-register cap of 1024 threads)
VPT_MAX = 16
#: rows up to this length run warp-per-row (shuffle reductions only, no block barrier), up to
#: WARP_VPT_MAX elements a lane in registers (n = 1024, fp32: 56 registers with unsigned indices)
WARP_ROW_MAX = 1024
WARP_VPT_MAX = 32


if SIM:
    def flog(v):
        """math.log with the GPU's IEEE results where Python's raises: log(0) = -inf, log(< 0) = NaN."""
        return math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)
else:
    flog = math.log


#: rows whose storage fits here (and not in registers) stay in shared memory: x is read from DRAM once
SMEM_ROW_BYTES = 160 * 1024
#: loads a thread issues per trip of the shared-memory row path (bytes in flight: 64 KB an SM)
SMEM_UNROLL = 16
#: elements a thread handles per trip of the passes over shared memory (short latency: less unrolling)
SMEM_UNROLL_COMPUTE = 4


def smem_row_bytes(n, block, x_dtype, log=False):
    """Dynamic shared memory of the forward row kernel: the row in x's storage type when it takes the
    shared-memory path (one row per block, too long for registers, small enough), else 0."""
    if block == 32 or math.ceil(n / block) <= VPT_MAX:
        return 0
    nbytes = n * storage_dtype(x_dtype).itemsize
    return nbytes if nbytes <= SMEM_ROW_BYTES else 0


def softmax_config(n, block=0, rows_per_block=0, vpt_max=VPT_MAX):
    """(threads per block, element stride, VPT, rows per block) of the row kernel.

    ``block`` 32 is warp-per-row mode (shuffles only, ``rows_per_block`` rows per block, default
    4; chosen for n <= WARP_ROW_MAX, up to WARP_VPT_MAX elements a lane); larger blocks give one row
    per block (8 elements a thread, up to 1024 threads). VPT 0: the online path (rows longer than
    ``block * vpt_max``), or the shared-memory row path (:func:`smem_row_bytes`) in the forward.
    """
    if not block:
        block = 32 if n <= WARP_ROW_MAX else \
            min(1024, max(64, 1 << max(0, (math.ceil(n / 8) - 1).bit_length())))
        if math.ceil(n / block) > vpt_max and block != 32:
            block = min(block, 512)   # online path: 128 registers a thread, 2 blocks an SM at <= 64
    if block == 32:
        vpt_max = WARP_VPT_MAX
    rpb = (rows_per_block or 4) if block == 32 else 1
    vpt = math.ceil(n / block)
    return block * rpb, block, (vpt if vpt <= vpt_max else 0), rpb


def _head(args, ct, block, rpb):
    """Kernel head (row, lane t) and the max / sum reduction spellings for the mode."""
    s = [f"def kernel({args}, nrows):",
         f"    sm = cuda.shared.array(32, {ct})",
         f"    sm2 = cuda.shared.array(32, {ct})"]
    if block == 32:
        s += [f"    row = cuda.blockIdx.x * {rpb} + cuda.threadIdx.x // 32",
              "    t = cuda.threadIdx.x % 32", "    if row >= nrows:", "        return"]
        return s, (lambda e: f"warp_max({e})"), (lambda e: f"warp_sum({e})")
    s += ["    row = cuda.blockIdx.x", "    t = cuda.threadIdx.x"]
    return s, (lambda e: f"block_max({e}, sm)"), (lambda e: f"block_sum({e}, sm)")


def _pair_combine(ma, sa, mb, sb, ninf, zero):
    """Lines merging running (max, sum) pair b into a. A side whose max is -inf has seen only -inf
    (sum 0) or a NaN (sum NaN): its sum is added unscaled, so a NaN survives the combine."""
    return [f"mn = {ma} if {ma} >= {mb} else {mb}",
            f"{sa} = ({sa} * math.exp({ma} - mn) if {ma} != {ninf} else {sa})"
            f" + ({sb} * math.exp({mb} - mn) if {mb} != {ninf} else {sb})",
            f"{ma} = mn"]


def _online_step(m, s, v, ninf, ind=""):
    """Lines folding one element ``v`` into the running pair (m, s) with IEEE semantics: a NaN or a
    +inf (whose exp(v - m) is exp(inf - inf)) makes s NaN, so the whole row comes out NaN as the
    straightforward max-subtracted formula gives; -inf entries add nothing."""
    return [f"{ind}if {v} > {m}:",
            f"{ind}    {s} = ({s} * math.exp({m} - {v}) if {m} != {ninf} else {s}) + ({v} - {v} + one_)",
            f"{ind}    {m} = {v}",
            f"{ind}elif {v} != {ninf}:",
            f"{ind}    {s} += math.exp({v} - {m})"]


def _online_chunk(m, s, vals, ninf, zero, ind=""):
    """Lines folding a chunk of elements into (m, s): one rescale for the chunk's max, then the sum
    of exp(v - m) over all of them, NaN and +inf included (exp(NaN) / exp(inf - inf) make s NaN;
    while m is still -inf every non-NaN element is -inf, shifted by 0 they add exp(-inf) = 0)."""
    b = [f"{ind}mx = {vals[0]}"]
    b += [f"{ind}mx = mx if mx >= {e} else {e}" for e in vals[1:]]
    b += [f"{ind}if mx > {m}:", f"{ind}    {s} = {s} * math.exp({m} - mx) if {m} != {ninf} else {s}",
          f"{ind}    {m} = mx", f"{ind}ms = {m} if {m} != {ninf} else {zero}",
          f"{ind}{s} += " + " + ".join(f"math.exp({e} - ms)" for e in vals)]
    return b


#: elements a thread loads per trip of the online loops (all loads issued before any use)
UNROLL = 8


def _chunks(n, block, body, tail, ind="    "):
    """Source lines: ``body(k, "c")`` for ``UNROLL`` elements ``block`` apart per full trip (trip count
    compile-time), then ``tail`` lines (one element ``c``) for the rest of the row."""
    step = UNROLL * block
    full = n // step
    s = []
    if full:
        s += [f"for j in range({full}):", f"    c = t + j * {step}"]
        s += ["    " + ln for ln in body()]
    s += [f"c = t + {full * step}", f"while c < {n}:"] + ["    " + ln for ln in tail] + [f"    c += {block}"]
    return [ind + ln for ln in s]


def _online_block(n, block, ct, ind="    "):
    """Source lines: per-thread online max/sum over the row (UNROLL loads in flight, one rescale per
    trip), then the warp / block pair combine."""
    ninf, zero, one = po.lit(-math.inf, ct), po.lit(0.0, ct), po.lit(1.0, ct)
    U = UNROLL

    def body():
        b = [f"v{k} = ldx(x, base + c + {k * block})" for k in range(U)]
        return b + _online_chunk("m", "s", [f"v{k}" for k in range(U)], ninf, zero)

    tail = ["v = ldx(x, base + c)"] + _online_step("m", "s", "v", ninf)
    s = [f"m = {ninf}", f"s = {zero}", f"one_ = {one}"] + _chunks(n, block, body, tail, ind="")
    for msk in (16, 8, 4, 2, 1):
        s += [f"mo = shfl_xor(m, {msk})", f"so = shfl_xor(s, {msk})"]
        s += _pair_combine("m", "s", "mo", "so", ninf, zero)
    if block == 32:   # warp per row: the butterfly already gave every lane the row's pair
        return [ind + ln for ln in s]
    s += ["if t % 32 == 0:", "    sm[t // 32] = m", "    sm2[t // 32] = s", "cuda.syncthreads()",
          "m = sm[0]", "s = sm2[0]"]
    if block > 32:
        s += [f"for w in range(1, {block // 32}):", "    mo = sm[w]", "    so = sm2[w]"]
        s += ["    " + ln for ln in _pair_combine("m", "s", "mo", "so", ninf, zero)]
    return [ind + ln for ln in s]


def _row_fwd_source(n, block, vpt, log, ct, rpb=1):
    ninf, zero, one = po.lit(-math.inf, ct), po.lit(0.0, ct), po.lit(1.0, ct)
    s, RMAX, RSUM = _head("x, y", ct, block, rpb)
    s.append(f"    base = row * {n}")
    if vpt:
        guards = [(k + 1) * block > n for k in range(vpt)]
        for k in range(vpt):
            s.append(f"    c{k} = t + {k * block}")
            s.append(f"    v{k} = ldx(x, base + c{k})" + (f" if c{k} < {n} else {ninf}" if guards[k] else ""))
        s.append("    m = v0")
        s += [f"    m = m if (m != m or m >= v{k}) else v{k}" for k in range(1, vpt)]
        s.append(f"    m = {RMAX('m')}")
        for k in range(vpt):
            s.append(f"    e{k} = math.exp(v{k} - m)" + (f" if c{k} < {n} else {zero}" if guards[k] else ""))
        s.append(f"    ssum = {RSUM(' + '.join(f'e{k}' for k in range(vpt)))}")
        s.append("    r = math.log(ssum)" if log else f"    r = {one} / ssum")
        for k in range(vpt):
            ind = "    "
            if guards[k]:
                s.append(f"    if c{k} < {n}:")
                ind = "        "
            s.append(f"{ind}sty(y, base + c{k}, " + (f"v{k} - m - r)" if log else f"e{k} * r)"))
    else:
        s += _online_block(n, block, ct)
        s.append("    r = flog(s)" if log else f"    r = {one} / s")
        val = (lambda v: f"{v} - m - r") if log else (lambda v: f"math.exp({v} - m) * r")
        s += _chunks(n, block, lambda: [f"v{k} = ldx(x, base + c + {k * block})" for k in range(UNROLL)] +
                     [f"sty(y, base + c + {k * block}, {val(f'v{k}')})" for k in range(UNROLL)],
                     ["v = ldx(x, base + c)", f"sty(y, base + c, {val('v')})"])
    return "\n".join(s) + "\n"


def _row_fwd_vec_source(n, block, vpt, vec, log, ct, rpb=1, unroll=4):
    """Row kernel with ``vec`` elements per access (n % vec == 0, buffers aligned to one vector):
    thread t owns vectors ``t + k * block``. ``vpt`` > 0: ``vpt`` vectors a thread in registers (one
    read, one write); ``vpt`` 0: the online path, ``unroll`` vectors in flight per thread per trip,
    then a second read (of a row just read: mostly L2 hits) that writes y."""
    ninf, zero, one = po.lit(-math.inf, ct), po.lit(0.0, ct), po.lit(1.0, ct)
    s, RMAX, RSUM = _head("x, y", ct, block, rpb)
    nv = n // vec
    s.append(f"    base = row * {n}")
    out = (lambda v: f"{v} - m - r") if log else (lambda v: f"math.exp({v} - m) * r")
    if vpt:
        lines, els, guard = load_row_vectors(vpt, block, nv, vec, ninf, addr=lambda k: f"u64(base + q{k} * {vec})")
        s += lines
        flat = [e for g in els for e in g]
        s.append("    m = v0_0")
        s += [f"    m = m if (m != m or m >= {e}) else {e}" for e in flat[1:]]
        s.append(f"    m = {RMAX('m')}")
        for k in range(vpt):
            for e in els[k]:
                s.append(f"    e{e} = math.exp({e} - m)" + (f" if q{k} < {nv} else {zero}" if guard[k] else ""))
        s.append(f"    ssum = {RSUM(' + '.join('e' + e for e in flat))}")
        s.append("    r = math.log(ssum)" if log else f"    r = {one} / ssum")
        for k in range(vpt):
            ind = "    "
            if guard[k]:
                s.append(f"    if q{k} < {nv}:")
                ind = "        "
            vals = [f"cy({e} - m - r)" if log else f"cy(e{e} * r)" for e in els[k]]
            s.append(f"{ind}stvy(y, u64(base + q{k} * {vec}), ({', '.join(vals)}))")
        return "\n".join(s) + "\n"
    U = unroll
    step = U * block
    full = nv // step

    def loads(ind, count, q="q"):
        b = []
        for k in range(count):
            names = [f"v{k}_{j}" for j in range(vec)]
            b.append(f"{ind}{', '.join('r' + e for e in names)} = ldvx(x, u64(base + ({q} + {k * block}) * {vec}))")
            b += [f"{ind}{e} = cx(r{e})" for e in names]
        return b

    flat = [f"v{k}_{j}" for k in range(U) for j in range(vec)]
    one_vec = [f"v0_{j}" for j in range(vec)]
    s += [f"    m = {ninf}", f"    s = {zero}"]
    if full:
        s += [f"    for jj in range({full}):", f"        q = t + jj * {step}"]
        s += loads("        ", U)
        s += _online_chunk("m", "s", flat, ninf, zero, "        ")
    s += [f"    q = t + {full * step}", f"    while q < {nv}:"]
    s += loads("        ", 1)
    s += _online_chunk("m", "s", one_vec, ninf, zero, "        ") + [f"        q += {block}"]
    for msk in (16, 8, 4, 2, 1):
        s += [f"    mo = shfl_xor(m, {msk})", f"    so = shfl_xor(s, {msk})"]
        s += ["    " + ln for ln in _pair_combine("m", "s", "mo", "so", ninf, zero)]
    if block > 32:
        s += ["    if t % 32 == 0:", "        sm[t // 32] = m", "        sm2[t // 32] = s", "    cuda.syncthreads()",
              "    m = sm[0]", "    s = sm2[0]", f"    for w in range(1, {block // 32}):", "        mo = sm[w]",
              "        so = sm2[w]"]
        s += ["        " + ln for ln in _pair_combine("m", "s", "mo", "so", ninf, zero)]
    s.append("    r = flog(s)" if log else f"    r = {one} / s")

    def writes(ind, count, q="q"):
        b = loads(ind, count, q)
        for k in range(count):
            vals = [f"cy({out(f'v{k}_{j}')})" for j in range(vec)]
            b.append(f"{ind}stvy(y, u64(base + ({q} + {k * block}) * {vec}), ({', '.join(vals)}))")
        return b
    if full:
        s += [f"    for jj in range({full}):", f"        q = t + jj * {step}"] + writes("        ", U)
    s += [f"    q = t + {full * step}", f"    while q < {nv}:"] + writes("        ", 1) + [f"        q += {block}"]
    return "\n".join(s) + "\n"


def softmax_vec_config(n, vec, block=0, rows_per_block=0, online=False):
    """(threads, element stride in vectors, VPT in vectors (0: online path), rows per block) of the
    vector row kernel: warp per row up to WARP_ROW_MAX elements (WARP_VPT_MAX a lane), else a block
    per row (``block`` or 512 threads) with VPT_MAX elements a thread in registers, else (or with
    ``online``) the online path."""
    if not block:
        block = 32 if n <= WARP_ROW_MAX else 512
    rpb = (rows_per_block or 4) if block == 32 else 1
    cap = WARP_VPT_MAX if block == 32 else VPT_MAX
    nvt = math.ceil(n / (vec * block))
    return block * rpb, block, (nvt if nvt * vec <= cap and not online else 0), rpb


@functools.lru_cache(maxsize=None)
def fwd_vec_kernel(outer, n, log, vec, block, rows_per_block, unroll, x_dt, y_dt, online=False):
    """Forward row kernel (inner == 1) with ``vec``-element accesses; returns (dispatcher, (grid,
    threads, 0), source). Arguments ``(x, y, nrows)`` like the scalar kernel."""
    ct = compute_type([x_dt, y_dt])
    threads, blk, vpt, rpb = softmax_vec_config(n, vec, block, rows_per_block, online)
    src = _row_fwd_vec_source(n, blk, vpt, vec, log, ct, rpb, unroll)
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, block_sum=block_sum, block_max=block_max,
              shfl_xor=shfl_xor, warp_sum=warp_sum, warp_max=warp_max, u64=numba.uint64, flog=flog,
              **vector_names(vec, x_dt, y_dt, ct))
    exec(compile(src, "<softmax fwd-vec>", "exec"), ns)
    kern = cuda.jit(ns["kernel"]) if SIM else cuda.jit(ns["kernel"], max_registers=_reg_budget(threads))
    return kern, (math.ceil(outer / rpb), threads, 0), src


def _row_smem_fwd_source(n, block, log, ct, keep_exp=False):
    """One block per row, the row kept in dynamic shared memory (x's storage type): one DRAM read of
    x (SMEM_UNROLL loads in flight per thread), max, sum of exp and the write all from shared memory
    (``keep_exp``, float32 x: the sum pass stores exp(x - m) back, so each element takes one exp).
    A thread only reads back the elements it stored itself, so no barrier guards the buffer."""
    ninf, zero, one = po.lit(-math.inf, ct), po.lit(0.0, ct), po.lit(1.0, ct)
    s, RMAX, RSUM = _head("x, y", ct, block, 1)
    s += ["    buf = cuda.shared.array(0, sdt)", f"    base = row * {n}", f"    m = {ninf}"]
    def chunks(body, tail, U=SMEM_UNROLL):
        step = U * block
        full = n // step
        out = []
        if full:
            out += [f"    for j in range({full}):", f"        c = t + j * {step}"]
            out += ["        " + ln for ln in body(U)]
        out += [f"    c = t + {full * step}", f"    while c < {n}:"] + ["        " + ln for ln in tail]
        return out + [f"        c += {block}"]

    s += chunks(lambda U: [f"r{k} = x[base + c + {k * block}]" for k in range(U)] +
                [f"buf[c + {k * block}] = r{k}" for k in range(U)] +
                [f"v{k} = ldx(buf, c + {k * block})" for k in range(U)] +
                [f"m = m if (m != m or m >= v{k}) else v{k}" for k in range(U)],
                ["buf[c] = x[base + c]", "v = ldx(buf, c)", "m = m if (m != m or m >= v) else v"])
    s += [f"    m = {RMAX('m')}", f"    a = {zero}"]
    if keep_exp:   # the buffer holds float32: exp(x - m) replaces x, the write pass only scales
        s += chunks(lambda U: sum(([f"e{k} = math.exp(buf[c + {k * block}] - m)", f"buf[c + {k * block}] = e{k}"]
                                   for k in range(U)), []) + ["a += " + " + ".join(f"e{k}" for k in range(U))],
                    ["e = math.exp(buf[c] - m)", "buf[c] = e", "a += e"], SMEM_UNROLL_COMPUTE)
    else:
        s += chunks(lambda U: ["a += " + " + ".join(f"math.exp(ldx(buf, c + {k * block}) - m)" for k in range(U))],
                    ["a += math.exp(ldx(buf, c) - m)"], SMEM_UNROLL_COMPUTE)
    s.append(f"    ssum = {RSUM('a')}")
    s.append("    r = math.log(ssum)" if log else f"    r = {one} / ssum")
    val = (lambda v: f"{v} - m - r") if log else \
        (lambda v: f"{v.replace('ldx(buf, ', 'buf[').replace(')', ']')} * r") if keep_exp else \
        (lambda v: f"math.exp({v} - m) * r")
    s += chunks(lambda U: [f"sty(y, base + c + {k * block}, {val(f'ldx(buf, c + {k * block})')})"
                           for k in range(U)],
                [f"sty(y, base + c, {val('ldx(buf, c)')})"], SMEM_UNROLL_COMPUTE)
    return "\n".join(s) + "\n"


def _row_bwd_source(n, block, vpt, log, ct, rpb=1):
    zero = po.lit(0.0, ct)
    s, RMAX, RSUM = _head("y, dy, dx", ct, block, rpb)
    s.append(f"    base = row * {n}")
    if vpt:
        guards = [(k + 1) * block > n for k in range(vpt)]
        for k in range(vpt):
            g = f" if c{k} < {n} else {zero}" if guards[k] else ""
            s.append(f"    c{k} = t + {k * block}")
            s.append(f"    y{k} = ldy(y, base + c{k})" + g)
            s.append(f"    g{k} = ldd(dy, base + c{k})" + g)
        acc = " + ".join(f"g{k}" for k in range(vpt)) if log else \
            " + ".join(f"g{k} * y{k}" for k in range(vpt))
        s.append(f"    dot = {RSUM(acc)}")
        for k in range(vpt):
            ind = "    "
            if guards[k]:
                s.append(f"    if c{k} < {n}:")
                ind = "        "
            val = f"g{k} - math.exp(y{k}) * dot" if log else f"y{k} * (g{k} - dot)"
            s.append(f"{ind}stx(dx, base + c{k}, {val})")
    else:
        U = UNROLL

        def ld(k):
            o = f"base + c + {k * block}"
            return [f"g{k} = ldd(dy, {o})"] + ([] if log else [f"y{k} = ldy(y, {o})"])

        s.append(f"    a = {zero}")
        s += _chunks(n, block, lambda: sum((ld(k) for k in range(U)), []) +
                     ["a += " + " + ".join(f"g{k}" if log else f"g{k} * y{k}" for k in range(U))],
                     ["a += ldd(dy, base + c)" if log else "a += ldd(dy, base + c) * ldy(y, base + c)"])
        s.append(f"    dot = {RSUM('a')}")
        val = (lambda yv, gv: f"{gv} - math.exp({yv}) * dot") if log else (lambda yv, gv: f"{yv} * ({gv} - dot)")

        def wr():
            b = []
            for k in range(U):
                o = f"base + c + {k * block}"
                b += [f"y{k} = ldy(y, {o})", f"g{k} = ldd(dy, {o})"]
            return b + [f"stx(dx, base + c + {k * block}, {val(f'y{k}', f'g{k}')})" for k in range(U)]

        s += _chunks(n, block, wr, ["yv = ldy(y, base + c)", "gv = ldd(dy, base + c)",
                                    f"stx(dx, base + c, {val('yv', 'gv')})"])
    return "\n".join(s) + "\n"


def _col_fwd_source(n, inner, total, log, ct):
    ninf, zero, one = po.lit(-math.inf, ct), po.lit(0.0, ct), po.lit(1.0, ct)
    s = ["def kernel(x, y, nrows):", "    p = cuda.grid(1)", f"    if p < {total}:",
         f"        base = (p // {inner}) * {n * inner} + p % {inner}",
         f"        m = {ninf}", f"        s = {zero}",
         f"        one_ = {one}",
         f"        for c in range({n}):",
         f"            v = ldx(x, base + c * {inner})"] + _online_step("m", "s", "v", ninf, "            ") + [
         "        r = flog(s)" if log else f"        r = {one} / s",
         f"        for c in range({n}):",
         f"            v = ldx(x, base + c * {inner})",
         f"            sty(y, base + c * {inner}, " + ("v - m - r)" if log else "math.exp(v - m) * r)")]
    return "\n".join(s) + "\n"


def _col_bwd_source(n, inner, total, log, ct):
    zero = po.lit(0.0, ct)
    s = ["def kernel(y, dy, dx, nrows):", "    p = cuda.grid(1)", f"    if p < {total}:",
         f"        base = (p // {inner}) * {n * inner} + p % {inner}",
         f"        dot = {zero}", f"        for c in range({n}):",
         f"            o = base + c * {inner}",
         "            dot += ldd(dy, o)" if log else "            dot += ldd(dy, o) * ldy(y, o)",
         f"        for c in range({n}):", f"            o = base + c * {inner}",
         "            stx(dx, o, " + ("ldd(dy, o) - math.exp(ldy(y, o)) * dot)" if log else
                                    "ldy(y, o) * (ldd(dy, o) - dot))")]
    return "\n".join(s) + "\n"


_LOAD_IDX = re.compile(r"\b(ldx|ldy|ldd)\((\w+), ([^()]+?)\)")
_STORE_IDX = re.compile(r"\b(sty|stx)\((\w+), ([^,()]+?),")
_RAW_IDX = re.compile(r"\b(x|buf)\[([^\[\]]+)\]")


def unsigned_indices(source):
    """``source`` with every array index wrapped in ``u64(...)``: numba then emits no negative-index
    wraparound select, so addresses fold into base + immediate offsets (n = 1024 warp rows on sm_90:
    56 registers instead of 128)."""
    source = _LOAD_IDX.sub(r"\1(\2, u64(\3))", source)
    source = _STORE_IDX.sub(r"\1(\2, u64(\3),", source)
    return _RAW_IDX.sub(r"\1[u64(\2)]", source)


def _jit(source, name, threads, **names):
    source = unsigned_indices(source)
    ns = dict(po.expr_globals(), __name__=__name__, cuda=cuda, block_sum=block_sum, block_max=block_max,
              shfl_xor=shfl_xor, warp_sum=warp_sum, warp_max=warp_max, u64=numba.uint64, flog=flog, **names)
    exec(compile(source, f"<softmax {name}>", "exec"), ns)
    # the register cap makes a 1024-thread block always launchable (the simulator has no such option)
    return cuda.jit(ns["kernel"]) if SIM else cuda.jit(ns["kernel"], max_registers=_reg_budget(threads))


@functools.lru_cache(maxsize=None)
def _fwd_kernel(outer, n, inner, log, block, x_dt, y_dt):
    ct = compute_type([x_dt, y_dt])
    shared = 0
    if inner == 1:
        if not block and smem_row_bytes(n, 1024, x_dt):
            block = 1024
        threads, blk, vpt, rpb = softmax_config(n, block)
        shared = smem_row_bytes(n, blk, x_dt) if blk != 32 else 0
        keep = not log and dtype_name(x_dt) == "float32"
        src = _row_smem_fwd_source(n, blk, log, ct, keep) if shared else _row_fwd_source(n, blk, vpt, log, ct, rpb)
        launch = (math.ceil(outer / rpb), threads)
    else:
        total = outer * inner
        blk = block or 128
        src = _col_fwd_source(n, inner, total, log, ct)
        launch = (math.ceil(total / blk), blk)
    kern = _jit(src, "fwd", launch[1], ldx=loader(x_dt, ct), sty=storer(y_dt),
                sdt=numpy_support.from_dtype(storage_dtype(x_dt)))
    return kern, launch + (shared,), src


@functools.lru_cache(maxsize=None)
def _bwd_kernel(outer, n, inner, log, block, y_dt, dy_dt, dx_dt):
    ct = compute_type([y_dt, dy_dt, dx_dt])
    if inner == 1:
        threads, blk, vpt, rpb = softmax_config(n, block)
        src = _row_bwd_source(n, blk, vpt, log, ct, rpb)
        launch = (math.ceil(outer / rpb), threads)
    else:
        total = outer * inner
        blk = block or 128
        src = _col_bwd_source(n, inner, total, log, ct)
        launch = (math.ceil(total / blk), blk)
    return _jit(src, "bwd", launch[1], ldy=loader(y_dt, ct), ldd=loader(dy_dt, ct), stx=storer(dx_dt)), \
        launch + (0,), src


def softmax_forward(x, y, outer, n, inner=1, *, log=False, x_dtype="float32", y_dtype="float32",
                    block=0, vec=1, rows_per_block=0, unroll=4, online=False, stream=0):
    """y = softmax (or log-softmax) of x over n, both packed (outer, n, inner) device arrays.
    ``vec`` > 1 (inner == 1, :func:`vec_ok`, buffers aligned to one vector): the vector row kernel
    (:func:`fwd_vec_kernel`: registers, or online with ``unroll`` vectors in flight)."""
    if vec > 1 and inner == 1:
        kern, (grid, blk, _), _ = fwd_vec_kernel(outer, n, log, vec, block, rows_per_block, unroll, x_dtype, y_dtype,
                                                 online)
        launch(kern, grid, blk, stream, x.reshape(x.size), y.reshape(y.size), outer)
        return
    kern, (grid, blk, shared), _ = _fwd_kernel(outer, n, inner, log, block, x_dtype, y_dtype)
    args = (x.reshape(x.size), y.reshape(y.size), outer)
    if not shared:
        launch(kern, grid, blk, stream, *args)
        return
    from ..runtime import kcache   # opts in to > 48 KB of dynamic shared memory
    from ..runtime.dtypes import array_sig
    sig = f"void({array_sig(x_dtype)}, {array_sig(y_dtype)}, int64)"
    ck = kcache.get_or_compile(f"softmax_fwd_smem:{outer}:{n}:{log}:{blk}:{x_dtype}:{y_dtype}", lambda: kern, sig)
    ck.launch(grid, blk, args, stream, shared)


def softmax_backward(y, dy, dx, outer, n, inner=1, *, log=False, y_dtype="float32",
                     dy_dtype="float32", dx_dtype="float32", block=0, stream=0):
    """dx from the forward output y and dy (packed (outer, n, inner) device arrays)."""
    kern, (grid, blk, _), _ = _bwd_kernel(outer, n, inner, log, block, y_dtype, dy_dtype, dx_dtype)
    launch(kern, grid, blk, stream, y.reshape(y.size), dy.reshape(dy.size), dx.reshape(dx.size), outer)
