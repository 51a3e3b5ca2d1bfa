"""The SIMT GEMM cost model: predicted seconds of a tile and kernel config on a problem, from the tile's
measured (or estimated) efficiency through ``heuristics.gemm_time``. :func:`cost` splits it into a
problem-independent part (:func:`tile_static`, remembered per tile, config and device) and the per-problem
arithmetic (:func:`tile_cost`); :func:`cost_plain` is the same through ``gemm_time`` itself.
"""
import math

from .. import heuristics as H
from .tiles import GENERIC_BK8_TFLOPS

__all__ = ["SWIZZLE_GAIN", "SINGLE_STAGE_EFF", "cost", "cost_plain", "tile_static", "tile_cost"]

#: SWIZZLE=8 over SWIZZLE=1: the ratio of the two measured 128x128x8 VEC=4 tile rates (H200; dev/perf_notes.md,
#: "SIMT GEMM")
SWIZZLE_GAIN = 25.2 / 23.1
#: STAGES=1 (load, sync, compute) against the register-prefetched double buffer: estimate
SINGLE_STAGE_EFF = 0.8


_STATIC = {}


def cost(device, tile, gcfg, m, n, k, batch=1, in_bytes=4, out_bytes=4, extra_bytes=0, fp64=False, factor=1.0):
    """Predicted seconds (heuristics.gemm_time with the tile's measured efficiency): ``tile_cost``
    over the (tile, config, device) constants, remembered per those objects."""
    key = (id(tile), id(gcfg), id(device), fp64)
    hit = _STATIC.get(key)
    if hit is None or hit[0] is not tile or hit[1] is not gcfg or hit[2] is not device:
        if len(_STATIC) > 4096:
            _STATIC.clear()
        hit = _STATIC[key] = (tile, gcfg, device, tile_static(tile, gcfg, device, fp64))
    return tile_cost(hit[3], device, m, n, k, batch, in_bytes, out_bytes, extra_bytes, fp64, factor)


def cost_plain(device, tile, gcfg, m, n, k, batch=1, in_bytes=4, out_bytes=4, extra_bytes=0, fp64=False,
               factor=1.0):
    """:func:`cost` through ``heuristics.gemm_time`` itself (what ``tile_cost`` writes out)."""
    c = gcfg
    threads, smem = c.num_threads, c.smem_bytes(8 if fp64 else 4)
    # the measured figures already include the tile's occupancy: divide it out, gemm_time applies it
    eff = tile.eff * factor / H.occupancy_factor(max(H.blocks_per_sm(device, threads, tile.regs, smem), 1), threads)
    if c.MAINLOOP == "fast" and (fp64 or in_bytes != 4):   # the fast mainloop is fp32-only
        eff *= GENERIC_BK8_TFLOPS / (tile.tflops or tile.estimate)
    if c.STAGES == 1:
        eff *= SINGLE_STAGE_EFF
    if c.SWIZZLE > 1 and -(-m // c.BLOCK_M) > c.SWIZZLE:
        eff *= SWIZZLE_GAIN
    return H.gemm_time(device, m, n, k, batch=batch, tile=(c.BLOCK_M, c.BLOCK_N), threads=threads,
                       regs=tile.regs, smem=smem, in_bytes=in_bytes, out_bytes=out_bytes,
                       peak="fp64" if fp64 else "fp32", split_k=c.SPLIT_K, extra_bytes=extra_bytes,
                       compute_eff=min(eff, 1.0))


def tile_static(tile, gcfg, device, fp64):
    """The problem-independent part of ``cost`` (and of the ``heuristics.gemm_time`` it
    writes out) for a tile and kernel config on ``device``, for :func:`tile_cost`."""
    c = gcfg
    threads, smem = c.num_threads, c.smem_bytes(8 if fp64 else 4)
    per_sm = H.blocks_per_sm(device, threads, tile.regs, smem)
    occ = H.occupancy_factor(max(per_sm, 1), threads)
    fast = GENERIC_BK8_TFLOPS / (tile.tflops or tile.estimate) if c.MAINLOOP == "fast" else None
    split = max(1, int(c.SPLIT_K))
    occ_eff = min(1.0, max(per_sm * -(-threads // 32), 1) / H.FULL_OCCUPANCY_WARPS)
    slots = max(device.sm_count * max(per_sm, 1), 1)
    return (tile.eff, occ, fast, c.STAGES == 1, c.SWIZZLE, c.BLOCK_M, c.BLOCK_N, split, per_sm,
            device.l2_bytes / 2, math.sqrt(max(device.sm_count * per_sm, 1)), occ_eff, slots,
            device.peak("fp64" if fp64 else "fp32"), device.mem_bandwidth,
            (1 + (split > 1)) * H.LAUNCH_OVERHEAD)


def tile_cost(st, device, m, n, k, batch, in_bytes, out_bytes, extra_bytes, fp64, factor):
    """``cost_plain`` (``heuristics.gemm_time`` with the tile's efficiency) from a
    :func:`tile_static` tuple: the same arithmetic in the same order, so the same float, without a
    function call (the heuristics cost every config of every engine; tests/engines/gemm/test_gemm_tile_cost.py
    holds the two equal)."""
    teff, occ, fast, single, sw, tm, tn, split, per_sm, half_l2, sqrt_wave, eff, slots, peak, bw, launch = st
    if per_sm == 0:
        return math.inf
    ce = teff * factor / occ
    if fast is not None and (fp64 or in_bytes != 4):
        ce *= fast
    if single:
        ce *= SINGLE_STAGE_EFF
    tiles_m, tiles_n = -(-m // tm), -(-n // tn)
    if sw > 1 and tiles_m > sw:
        ce *= SWIZZLE_GAIN
    if ce > 1.0:
        ce = 1.0
    blocks = tiles_m * tiles_n * batch * split
    flops = 2.0 * m * n * k * batch / (ce if ce >= 1e-6 else 1e-6)
    a_bytes, b_bytes = m * k * batch * in_bytes, k * n * batch * in_bytes
    unique = a_bytes + b_bytes
    if unique > half_l2:
        s = (tiles_n * a_bytes + tiles_m * b_bytes) / sqrt_wave
        if s > unique:
            unique = s
    dram = unique + m * n * batch * out_bytes + extra_bytes
    if split > 1:
        dram += 2 * split * m * n * batch * 4
    nb = blocks if blocks > 1 else 1
    waves = -(-nb // slots)
    if blocks < slots * waves:
        eff *= nb / (waves * slots)
    if m and n:
        eff *= (m * n) / (tiles_m * tm * tiles_n * tn)
    compute = flops / (peak * (eff if eff >= 1e-6 else 1e-6)) if flops else 0.0
    memory = dram / bw if dram else 0.0
    return launch + (memory if memory > compute else compute)
