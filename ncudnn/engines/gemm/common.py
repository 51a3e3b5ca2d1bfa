"""What the GEMM-family engines (matmul_*, conv_*) share.

* the tile tables (TILE_SIZE knob values) with the H200 figures that rank them;
* the fused epilogue: the subgraph's pointwise chain as a :class:`~ncudnn.kernels.pointwise.epilogue.EpilogueSpec`
  (bias, unary pointwise, scale, one residual / backward-activation operand), or a reason why not;
* knob specs and the cost-model glue (``heuristics.gemm_time``);
* compile through the kernel cache and prepare ``cuLaunchKernel`` launches of a
  :class:`~ncudnn.kernels.gemm.launch.BlockKernels` (main kernel, split-K reduce or prescale).

Tile figures: docs/perf_notes.md, H200, FP32 SGEMM 4096^3 (2026-11-30): measured TFLOP/s per tile;
``None`` marks a tile not measured there (its efficiency is an estimate, used for ranking only).
"""
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support

from ... import memory
from ...kernels.runtime import dtypes as kdt
from ...kernels.pointwise import epilogue as ep
from ...kernels.runtime import kcache
from ...kernels.pointwise import ops as po
from ...kernels.gemm import splitk
from ...kernels.gemm.config import FAST_SKINNY, GemmConfig, check
from ...kernels.gemm.launch import kernel_args
from ...platform import simulator_enabled
from ...types import cudnnBackendKnobType_t, cudnnPointwiseMode_t, cudnnStatus_t
from .. import heuristics as H
from ..base import KnobSpec, SubPlan

S = cudnnStatus_t
K = cudnnBackendKnobType_t
PM = cudnnPointwiseMode_t

#: FP32 FMA peak of the H200 the figures were measured on (FLOP/s)
MEASURED_PEAK = 67e12
#: SWIZZLE=8 over SWIZZLE=1 at 128x128x8 VEC=4 on the H200 (25.2 / 23.1 TFLOP/s, measured)
SWIZZLE_GAIN = 25.2 / 23.1
#: STAGES=1 (load, sync, compute) against the register-prefetched double buffer: estimate
SINGLE_STAGE_EFF = 0.8
MAX_GRID_YZ = 65535
KERNEL_DTYPES = ("float32", "float16", "bfloat16", "float64")


class Reject(Exception):
    """Raised by problem translation: ``status`` and ``reason`` for check_support."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status, self.reason = status, reason


# ------------------------------------------------------------------------------- tiles

@dataclass(frozen=True)
class Tile:
    label: str
    cfg: GemmConfig
    tflops: Optional[float]   # measured FP32 TFLOP/s on the H200 (None: not measured)
    estimate: float           # TFLOP/s used when not measured
    regs: int                 # registers per thread (sm_90 compile check where known, else estimate)

    @property
    def eff(self):
        """Fraction of the FP32 FMA peak the mainloop reaches at full occupancy."""
        return (self.tflops or self.estimate) * 1e12 / MEASURED_PEAK


def _g(bm, bn, bk, tm, tn, wm=0, wn=0, vec=1, mainloop="generic"):
    return GemmConfig(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, THREAD_M=tm, THREAD_N=tn, WARP_M=wm, WARP_N=wn,
                      VEC=vec, UNROLL_K=2 if bk % 2 == 0 else 1, MAINLOOP=mainloop)


#: large tiles, best measured first (matmul_simt; the conv engines start with these)
BIG_TILES = (
    Tile("128x128x16 t8x8 vec4", _g(128, 128, 16, 8, 8, 32, 64, 4), 27.2, 27.2, 167),
    Tile("128x128x8 t8x8 vec4", _g(128, 128, 8, 8, 8, 32, 64, 4), 23.1, 23.1, 167),
    Tile("128x128x8 t8x8", _g(128, 128, 8, 8, 8, 32, 64), 23.8, 23.8, 167),
    Tile("64x128x8 t8x8 vec4", _g(64, 128, 8, 8, 8, 32, 64, 4), 23.0, 23.0, 224),
    Tile("128x64x8 t8x8 vec4", _g(128, 64, 8, 8, 8, 32, 64, 4), 22.8, 22.8, 224),
    Tile("64x64x8 t4x8 vec4", _g(64, 64, 8, 4, 8, 16, 64, 4), 19.4, 19.4, 96),
    Tile("64x64x16 t4x4", _g(64, 64, 16, 4, 4, 16, 32), 16.7, 16.7, 64),
    Tile("32x32x8 t2x2", _g(32, 32, 8, 2, 2, 8, 16), 10.1, 10.1, 40),
)

#: fast-mainloop tiles (kernels/gemm/fastloop.py: 16-byte global quads, unrolled k-steps) for fp32
#: matmul, 128 registers (2 blocks per SM); not yet measured on the H200 (estimate: 0.7x cuBLAS); other dtypes run these tiles on the
#: generic mainloop (ranked with GENERIC_BK8_TFLOPS there)
FAST_TILES = (
    Tile("128x128x8 t8x8 vec4 fast", _g(128, 128, 8, 8, 8, 32, 64, 4, "fast").replace(MAX_REGS=128), None, 36.0,
         128),
)
GENERIC_BK8_TFLOPS = 23.1

#: matmul_simt's table: the fast tiles, then the generic large tiles
MATMUL_TILES = FAST_TILES + BIG_TILES

#: smaller fast-mainloop blocks (kernels/gemm/config.FAST_SKINNY) for skinny fp32 matmuls: with split-K
#: they fill every SM where few 128x128 tiles exist (N or M of 64..128 over a deep K); the 16-row block for
#: M <= 16 (GEMV-like). (FAST_SMALL's 128x64 under a cap of 128 registers measured fastest on 16384x64x4096 but
#: spills 16 B with this A: not shipped; the 168-register 128x64 ran within 2 % of it.)
#: Registers: sm_90 compile check. TFLOP/s: on the scale of FAST_TILES' 36.0 estimate, from the H200
#: probe of 2026-11-30 21:27 UTC (`python3 tools/probe_skinny.py --budget 75 --jobs 12`, driver 580,
#: numba-cuda 0.30.4): at full waves the 64-128 row blocks ran within -6 / +8 % of the 128x128 fast tile
#: (8192x8192x256, 65536x1024x64 unsplit), so they sit just under its figure (it stays the pick wherever
#: it fills the SMs, 4096^3 / 8192^3); 16x128x32 at SPLIT_K 4 on 16x8192x8192: 0.103 ms (1.46x cuBLAS),
#: 45.7 on that scale.
FAST_SKINNY_TILES = (
    Tile("128x64x8 t8x8 vec4 fast", FAST_SKINNY[0], None, 35.0, 154),
    Tile("64x128x8 t8x8 vec4 fast", FAST_SKINNY[1], None, 35.3, 154),
    Tile("64x64x8 t8x8 vec4 fast", FAST_SKINNY[2], None, 35.0, 154),
    Tile("64x64x8 t8x4 vec4 fast", FAST_SKINNY[3], None, 33.0, 107),
    Tile("16x128x32 t4x4 vec4 fast", FAST_SKINNY[4], None, 45.0, 128),
)

#: matmul_simt's TILE_SIZE values: MATMUL_TILES, then FAST_SKINNY_TILES (appended: knob values of the
#: first tables keep their meaning)
SIMT_TILES = MATMUL_TILES + FAST_SKINNY_TILES

#: small tiles for small / skinny problems (matmul_small; the conv engines end with these)
SMALL_TILES = (
    Tile("32x32x8 t2x2", _g(32, 32, 8, 2, 2, 8, 16), 10.1, 10.1, 40),
    Tile("32x32x8 t4x4", _g(32, 32, 8, 4, 4, 16, 32), None, 9.0, 64),
    Tile("16x16x8 t2x2", _g(16, 16, 8, 2, 2, 8, 16), None, 4.0, 40),
    Tile("8x8x4 t2x2", _g(8, 8, 4, 2, 2), None, 1.5, 32),
)

#: the conv engines' table: large tiles then the small ones (no duplicate)
CONV_TILES = BIG_TILES + SMALL_TILES[1:]


def tile_knob(tiles, default=0):
    return KnobSpec(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0, len(tiles) - 1, 1, default, tuple(t.label for t in tiles))


def is_pow2(v):
    return v >= 1 and not v & (v - 1)


_GCFG = {}
_MISS = object()


def gemm_config(tiles, cfg):
    """The kernel GemmConfig of an engine Config (TILE_SIZE into ``tiles``, SPLIT_K, SPLIT_K_BUF,
    STAGES, SWIZZLE); cached."""
    key = (tiles, cfg.knobs)
    hit = _GCFG.get(key)
    if hit is None:
        tile = tiles[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
        split = cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1)
        atomic = split > 1 and cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1) == 0
        hit = _GCFG[key] = tile.cfg.replace(SPLIT_K=split, SPLIT_MODE="atomic" if atomic else "workspace",
                                            STAGES=cfg.get(K.CUDNN_KNOB_TYPE_STAGES, 2),
                                            SWIZZLE=cfg.get(K.CUDNN_KNOB_TYPE_SWIZZLE, 1))
    return hit


def memo(sub, key, fn):
    """``fn()`` remembered on the subgraph under ``key`` (keep / cost results per config)."""
    d = sub.__dict__.setdefault("_gemm_memo", {})
    v = d.get(key, _MISS)
    if v is _MISS:
        v = d[key] = fn()
    return v


def simulated_small(M, N, batch):
    """Under the CUDA simulator every thread is a host thread: tiny problems (the CI shapes) are
    offered only few-thread tiles without split-K (correctness runs; ranking of real sizes unchanged)."""
    return simulator_enabled() and M * N * batch <= SIM_SMALL_OUTPUT


#: output elements up to which the simulator restriction above applies
SIM_SMALL_OUTPUT = 64 * 64 * 4


def useful_tiles(tiles, M, N, K_, batch, device_sms=132):
    """Indices of the tiles worth ranking for an M x N (x batch) output: no tile more than twice the
    problem along M or N, and no small tile (< 64x64) once 64x64 tiles fill four waves. Never empty.
    Under the simulator, tiny problems get the one tile of least simulated work (threads x k-steps)."""
    big = gc_tiles(M, N, 64, 64) * batch >= 4 * device_sms
    lim_m, lim_n = 2 * max(M, 16), 2 * max(N, 16)
    out = [i for i, t in enumerate(tiles)
           if t.cfg.BLOCK_M <= lim_m and t.cfg.BLOCK_N <= lim_n
           and not (big and t.cfg.BLOCK_M * t.cfg.BLOCK_N < 64 * 64)]
    out = out or [min(range(len(tiles)), key=lambda i: tiles[i].cfg.BLOCK_M * tiles[i].cfg.BLOCK_N)]
    if simulated_small(M, N, batch):
        def work(i):
            c = tiles[i].cfg
            return gc_tiles(M, N, c.BLOCK_M, c.BLOCK_N) * batch * ceil_div(K_, c.BLOCK_K) * c.num_threads
        out = sorted(out, key=work)[:1]
    return out


def gc_tiles(M, N, bm, bn):
    return ceil_div(M, bm) * ceil_div(N, bn)


def swizzle_for(M, gcfg, allowed):
    """The one SWIZZLE ranked per tile: the largest allowed group that still spans several tile rows."""
    rows = -(-M // gcfg.BLOCK_M)      # ceil_div
    return max([w for w in allowed if w == 1 or rows > w] or [1])


def rank_candidates(configs, cost_fn, best_tiles=4, limit=24):
    """Valid ``configs`` cheapest first, costing few: every tile unsplit first, then every split /
    swizzle variant of the ``best_tiles`` best tiles only."""
    tile_of = lambda c: c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)  # noqa: E731
    plain = {}
    for c in configs:
        if c.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1) == 1:
            t = tile_of(c)
            if t not in plain or cost_fn(c) < cost_fn(plain[t]):
                plain[t] = c
    top = set(sorted(plain, key=lambda t: cost_fn(plain[t]))[:best_tiles]) if plain else {tile_of(c) for c in configs}
    out = [c for c in configs if tile_of(c) in top]
    out.sort(key=cost_fn)
    return tuple(out[:limit])


def split_worthwhile(M, N, tiles_mn, batch, device_sms=132):
    """Offer split-K only when the unsplit grid leaves SMs idle (under two waves of one block)."""
    return tiles_mn * batch < 2 * device_sms and not simulated_small(M, N, batch)


_CHECKED = {}


def checked(gcfg, itemsize):
    """``kernels.gemm.config.check(gcfg, itemsize)``, remembered per config object (the heuristics
    ask for every config of every problem; the answer depends on the GemmConfig alone)."""
    key = (id(gcfg), itemsize)
    hit = _CHECKED.get(key)
    if hit is None or hit[0] is not gcfg:
        if len(_CHECKED) > 4096:
            _CHECKED.clear()
        hit = _CHECKED[key] = (gcfg, check(gcfg, itemsize))
    return hit[1]


def keep_config(name, gcfg, fp64, M, N, K_, batch, linear_epilogue, out_dtype):
    """(ok, reason) of a kernel config on a (batch, M, N, K) problem."""
    hit = _CHECKED.get((id(gcfg), 8 if fp64 else 4))       # checked(), its hit written out
    ok, why = hit[1] if hit is not None and hit[0] is gcfg else checked(gcfg, 8 if fp64 else 4)
    if not ok:
        return False, f"{name}: {why}"
    if -(-M // gcfg.BLOCK_M) > MAX_GRID_YZ:
        return False, f"{name}: M = {M} needs more than {MAX_GRID_YZ} tile rows at BLOCK_M {gcfg.BLOCK_M}"
    if batch * gcfg.SPLIT_K > MAX_GRID_YZ:
        return False, f"{name}: batch {batch} x SPLIT_K {gcfg.SPLIT_K} > {MAX_GRID_YZ} (grid z)"
    if gcfg.SPLIT_K > 1:
        if K_ < gcfg.SPLIT_K * gcfg.BLOCK_K:
            return False, f"{name}: SPLIT_K {gcfg.SPLIT_K} leaves empty slices of K = {K_} (BLOCK_K {gcfg.BLOCK_K})"
        if gcfg.SPLIT_MODE == "atomic" and (not linear_epilogue or out_dtype not in ("float32", "float64")):
            return False, f"{name}: atomic split-K needs an alpha/beta-only epilogue and an fp32/fp64 output"
    return True, ""


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
    function call (the heuristics cost every config of every engine; tests/engines/test_crank_cost.py
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


def split_workspace(gcfg, M, N, batch, fp64):
    """Exact bytes of the deterministic split-K partials (0 otherwise)."""
    if gcfg.SPLIT_K <= 1 or gcfg.SPLIT_MODE == "atomic":
        return 0
    return splitk.workspace_elems(batch, M, N, gcfg.SPLIT_K) * (8 if fp64 else 4)


# ------------------------------------------------------------------------------- dtypes

_NAMES = {}


def kdtype(t):
    """Kernel dtype name of a tensor descriptor ("float32", "bfloat16", ...), or None."""
    dt = t.dtype
    if dt not in _NAMES:
        try:
            _NAMES[dt] = kdt.dtype_name(memory.numpy_dtype(dt))
        except Exception:
            _NAMES[dt] = None
    return _NAMES[dt]


def check_tensor(node, port, t, kinds=KERNEL_DTYPES):
    """Raise Reject unless ``t`` is a plain strided tensor of a kernel dtype."""
    if t.is_virtual:
        return
    name = kdtype(t)
    if name not in kinds:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                     f"node '{node.name}': {port}: data type {t.dtype.name if t.dtype is not None else None} "
                     f"is not one of {kinds}")
    if t.vector_count != 1 or int(t.reordering) != 0:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"node '{node.name}': {port}: vectorized / reordered "
                     "tensors are not supported")
    if t.ragged_offset is not None:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
                     f"node '{node.name}': {port}: ragged offsets are not supported")


def check_precision(node, names):
    """fp64 only as an all-fp64 problem (fp64 accumulation); else fp32 accumulation."""
    if "float64" in names and any(n != "float64" for n in names):
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{node.name}': float64 mixed with "
                     f"{sorted(set(names) - {'float64'})}: fp64 needs every operand and the output in fp64")
    return names[0] == "float64"


# ------------------------------------------------------------------------------- epilogue

_PARAMS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "elu_alpha", "softplus_beta",
           "swish_beta", "nan_propagation", "alpha1", "alpha2")
_COMMUTATIVE = {PM.CUDNN_POINTWISE_ADD, PM.CUDNN_POINTWISE_MUL, PM.CUDNN_POINTWISE_MAX, PM.CUDNN_POINTWISE_MIN}


def _params(n, swap=False):
    p = {}
    for k in _PARAMS:
        v = getattr(n, k, None)
        if v is not None:
            p[k] = int(v) if k == "nan_propagation" else float(v)
    if swap:
        p["alpha1"], p["alpha2"] = p.get("alpha2", 1.0), p.get("alpha1", 1.0)
    return p


@dataclass
class Epilogue:
    """The fused chain: kernel steps and the tensors they read."""

    spec: ep.EpilogueSpec
    out: object                       # the TensorDesc finally written
    bias: object = None               # TensorDesc read by the bias step
    bias_axis: Optional[str] = None
    residual: object = None           # TensorDesc read by the residual step
    alpha_scalars: Tuple[int, ...] = ()   # by-value uids folded into alpha (leading scales)
    const_scalars: Tuple[Tuple[int, float], ...] = ()  # by-value uids compiled in as constants

    @property
    def linear(self):
        return self.spec.linear


#: epilogue_of ``rule`` of a conv output's bias: same rank, dims 1 except the output's channel count at
#: dim 1 (ConvProblem and WinoProblem share the Epilogue of a subgraph)
CHANNEL_BIAS = "conv_channel_bias"


def epilogue_of(sub, out_dims, classify_bias, allow_bias=True, allow_residual=True, rule=None):
    """Translate ``sub.epilogue`` (pointwise nodes after the anchor) into an :class:`Epilogue`.

    ``classify_bias(t) -> axis | None``: whether a broadcast tensor is a bias ("col" / "row") of the
    anchor's output of dims ``out_dims``. Raises :class:`Reject` naming the node that cannot fuse.
    ``rule``: a name for what ``classify_bias`` decides; callers passing the same rule, dims and flags
    for one subgraph share one Epilogue (remembered on the subgraph; a Reject is not remembered).
    """
    if rule is None:
        return _epilogue_of(sub, out_dims, classify_bias, allow_bias, allow_residual)
    memo = sub.__dict__.get("_epilogue_of")
    if memo is None:
        memo = sub.__dict__["_epilogue_of"] = {}
    key = (rule, tuple(out_dims), allow_bias, allow_residual)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _epilogue_of(sub, out_dims, classify_bias, allow_bias, allow_residual)
    return hit


#: pointwise modes by value (an IntEnum member hashes and compares as its int)
_MODE_OF = {m: m for m in PM}
_FACTS = {}


def _mode_facts(n, mode):
    """(``n.operand_ports()``, whether the mode is a supported float-valued one), remembered per
    (node class, mode): both depend on nothing else."""
    key = (n.__class__, mode)
    hit = _FACTS.get(key)
    if hit is None:
        hit = _FACTS[key] = (n.operand_ports(),
                             int(mode) in po.SUPPORTED_MODES and po.result_kind(mode) == "float")
    return hit


def _epilogue_of(sub, out_dims, classify_bias, allow_bias, allow_residual):
    anchor_out = next(iter(sub.anchor.outputs.values()))
    cur, out = anchor_out.uid, anchor_out
    steps, bias, axis, residual = [], None, None, None
    alpha_uids, consts = [], []
    for n in sub.epilogue:
        mode = _MODE_OF.get(n.mode)
        if mode is None:
            mode = PM(int(n.mode))
        mk = _mode_facts(n, mode)
        ports, oport = mk[0]
        ins = [n.inputs[p] for p in ports]
        pos = [i for i, t in enumerate(ins) if t.uid == cur]
        where = f"node '{n.name}' ({mode.name})"
        if len(pos) != 1:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{where}: reads the chain value "
                         f"{len(pos)} times")
        if not mk[1]:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: not a float-valued pointwise mode")
        if len(ins) == 1:
            try:
                steps.append(ep.pointwise(mode, **_params(n)))
            except (ValueError, TypeError) as e:
                raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {e}") from None
        elif len(ins) == 2:
            other = ins[1 - pos[0]]
            swap = pos[0] == 1
            if swap and mode not in _COMMUTATIVE:
                raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: the chain value is operand "
                             f"{ports[1]}, and {mode.name} is not commutative (the epilogue computes "
                             "mode(chain, other))")
            p = _params(n, swap)
            unit = p.get("alpha1", 1.0) == 1.0 and p.get("alpha2", 1.0) == 1.0
            if other.is_by_value:
                if mode != PM.CUDNN_POINTWISE_MUL or not unit:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: a by-value operand fuses only as "
                                 "a MUL scale (alpha1 = alpha2 = 1)")
                if not steps:
                    alpha_uids.append(other.uid)
                else:
                    v = float(np.asarray(other.value, dtype=np.float64).reshape(-1)[0])
                    consts.append((other.uid, v))
                    steps.append(ep.scale(v))
            elif tuple(other.dims) == tuple(out_dims):
                if not allow_residual:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: this anchor's epilogue takes no "
                                 "second full tensor")
                if residual is not None:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: a second full-size operand "
                                 f"(the epilogue has one residual slot, taken by {residual.label})")
                try:
                    steps.append(ep.residual(mode, **p))
                except (ValueError, TypeError) as e:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {e}") from None
                residual = other
            else:
                ax = classify_bias(other) if allow_bias else None
                if ax is None or mode != PM.CUDNN_POINTWISE_ADD or not unit:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: operand {other.label} of dims "
                                 f"{other.dims} broadcast onto {tuple(out_dims)}: only an ADD of a per-"
                                 "channel / per-column (or per-row) bias fuses")
                if bias is not None:
                    raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: a second bias (one bias slot)")
                steps.append(ep.bias(ax))
                bias, axis = other, ax
            check_tensor(n, "operand", other)
        else:
            raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: three-operand modes do not fuse")
        out = n.outputs[oport]
        cur = out.uid
    name = kdtype(out)
    if out.is_virtual and name is None:
        name = "float32"
    spec = ep.EpilogueSpec(tuple(steps), out_dtype=name or "float32")
    return Epilogue(spec, out, bias, axis, residual, tuple(alpha_uids), tuple(consts))


def scalar_value(views, uid, default):
    v = views.get(uid, default)
    return float(np.asarray(v, dtype=np.float64).reshape(-1)[0])


def alpha_of(epi, views, alpha, sub=None):
    """alpha times the leading by-value scales; checks the compiled-in ones are unchanged."""
    from ...errors import BadParamError

    tensors = {t.uid: t for n in (sub.nodes if sub is not None else ()) for t in n.tensors()}
    for uid in epi.alpha_scalars:
        alpha *= scalar_value(views, uid, tensors[uid].value if uid in tensors else 1.0)
    for uid, v in epi.const_scalars:
        got = scalar_value(views, uid, v)
        if got != v:
            raise BadParamError(f"by-value scale uid {uid} = {got}: this plan compiled {v} into its epilogue "
                                "(build a plan for the new value)", S.CUDNN_STATUS_BAD_PARAM)
    return alpha


# ------------------------------------------------------------------------------- launches

class Flat:
    """A flat 1-D buffer as a kernel argument (what kernels/runtime/launch.as_arg_view reads)."""

    __slots__ = ("ptr", "shape", "strides_bytes", "itemsize", "dtype", "ndim")

    def __init__(self, ptr, n, dtype):
        self.dtype = np.dtype(dtype)
        self.ptr, self.shape, self.ndim = int(ptr), (max(int(n), 1),), 1
        self.itemsize = self.dtype.itemsize
        self.strides_bytes = (self.itemsize,)


def flat(view, t):
    """The DeviceView ``view`` of tensor ``t`` as a Flat of its storage dtype, spanning its elements."""
    return Flat(view.ptr, t.span_elements(), kdt.storage_dtype(kdtype(t)))


def typing_flat(t_or_name, n=1):
    """A Flat with no memory behind it: only its type matters (signatures at build time)."""
    name = t_or_name if isinstance(t_or_name, str) else kdtype(t_or_name)
    return Flat(0, n, kdt.storage_dtype(name))


def argtypes(args):
    """numba types of kernel arguments (arrays are 1-D C-contiguous storage arrays)."""
    def ty(a):
        if isinstance(a, tuple):
            return types.Tuple([ty(x) for x in a])
        if isinstance(a, (bool, np.bool_)):
            return types.boolean
        if isinstance(a, (int, np.integer)) and not isinstance(a, np.generic):
            return types.int64
        if isinstance(a, np.generic):
            return numpy_support.from_dtype(a.dtype)
        if isinstance(a, float):
            return types.float64
        return types.Array(numpy_support.from_dtype(np.dtype(a.dtype)), 1, "C")
    return tuple(ty(a) for a in args)


class BlockLaunch:
    """A BlockKernels compiled through the kernel cache; :meth:`launches` prepares its launch sequence.
    The split-K reduce sums ``bk.reduce_shape(nb)`` slices (the batch's too with ``bk.sum_batch``):
    from ``splitk.WIDE_FROM`` slices, or with N % 4 == 0, through the wide reduce (``splitk.make_reduce_wide``:
    4 outputs a thread, 16-byte loads, 8 slices' loads in flight, stores transposed through shared memory;
    ``splitk.wide_grid`` picks its layout); otherwise one thread per output (same sums: slices in order).
    H200, 65536 x 1024 outputs: 4 slices 0.53 ms wide vs 0.95 ms narrow, 8 slices 0.60 ms (v1: 10.6 ms)."""

    def __init__(self, key, bk, typing_packed):
        self.bk, self.cfg = bk, bk.cfg
        self.f = splitk.f(bk.ftype)
        ws = Flat(0, 1, bk.ftype) if bk.split and not bk.atomic else None
        args = kernel_args(bk, *typing_packed, 1.0, 0.0, ws)
        self.main = kcache.get_or_compile(key + "|main", lambda: bk.kernel, argtypes(args))
        self._key, self._types, self._fallback = key, argtypes(args), None
        M, N, K_, nb, a_args, b_args, o_args, bias_args, r_args = typing_packed
        self.reduce = self.prescale = self.wide = None
        f = self.f
        if bk.split and not bk.atomic:
            self._reduce_types = argtypes((ws, 1, o_args, bias_args, r_args, 1, 1, 1, f(1), f(0)))
            self.reduce = kcache.get_or_compile(key + "|reduce", lambda: bk.reduce, self._reduce_types)
            if bk.reduce_shape(nb)[0] >= splitk.WIDE_FROM:
                self._wide()
        elif bk.atomic:
            self.prescale = kcache.get_or_compile(key + "|prescale", lambda: bk.prescale,
                                                  argtypes((o_args, 1, 1, 1, f(0))))

    def _wide(self):
        if self.wide is None:
            bk = self.bk
            self.wide = kcache.get_or_compile(self._key + "|reduce_wide", lambda: bk.reduce_wide, self._reduce_types)
        return self.wide

    def launches(self, packed, alpha, beta, scratch):
        """PreparedLaunches of one run over ``packed`` (the kernels' pack output) with ``scratch``
        (a uint8 DeviceView holding the split-K partials, or None)."""
        bk, cfg, f = self.bk, self.cfg, self.f
        M, N, K_, nb, a_args, b_args, o_args, bias_args, r_args = packed
        ws = None
        if bk.split and not bk.atomic:
            item = np.dtype(bk.ftype).itemsize
            ws = Flat(scratch.ptr, scratch.nbytes // item, bk.ftype)
        args = kernel_args(bk, *packed, alpha, beta, ws)
        main = self.main
        if bk.uses_fallback(M, N, K_, a_args, b_args):     # fast mainloop's alignment not met
            if self._fallback is None:
                self._fallback = kcache.get_or_compile(self._key + "|main_generic", lambda: bk.fallback, self._types)
            main = self._fallback
        grid = (-(-N // cfg.BLOCK_N), -(-M // cfg.BLOCK_M), nb * cfg.SPLIT_K)
        out = []
        if self.prescale is not None:
            total = nb * M * N
            blocks = max(1, -(-total // splitk.REDUCE_THREADS))
            out.append(self.prescale.prepare(blocks, splitk.REDUCE_THREADS, (o_args, nb, M, N, f(beta))))
        out.append(main.prepare(grid, cfg.num_threads, args))
        if self.reduce is not None:
            slices, out_nb = bk.reduce_shape(nb)
            total = out_nb * M * N
            r_args_ = (ws, slices, o_args, bias_args, r_args, out_nb, M, N, f(alpha), f(beta))
            if slices >= splitk.WIDE_FROM or N % 4 == 0:   # the wide reduce's 16-byte path: faster from 2 slices
                out.append(self._wide().prepare(*splitk.wide_grid(total, splits=slices), r_args_))
            else:
                out.append(self.reduce.prepare(max(1, -(-total // splitk.REDUCE_THREADS)), splitk.REDUCE_THREADS,
                                               r_args_))
        return out


def runner(launches):
    """``run(stream)`` over prepared launches (one cuLaunchKernel each)."""
    if len(launches) == 1:
        one = launches[0].run
        return lambda stream: one(None, stream)

    def run(stream):
        for p in launches:
            p.run(None, stream)
    return run


def key_text(*parts):
    """A stable kernel-cache spec key from frozen dataclasses / tuples / strings."""
    return "|".join(str(p) for p in parts)


def bytes_of(name):
    return np.dtype(kdt.storage_dtype(name)).itemsize


def ceil_div(a, b):
    return -(-a // b)


def prod(xs):
    return math.prod(xs)


# ------------------------------------------------------------------------------- tail

class Tail:
    """A trailing reduction / genstats (``sub.tail``) run right after the GEMM by the best engine for
    it as a subgraph of its own, reading the written output from memory (same stream, scratch
    shared: the workspace is the larger of the two)."""

    def __init__(self, sub, ec):
        self.sub, self.ec = sub, ec
        self.engine, self.config = ec.engine, ec.config
        self.workspace = self.engine.workspace_size(sub, ec.config)


def tail_of(sub, out, ctx=None):
    """The memoized :class:`Tail` of ``sub`` (None without a tail); raises Reject when the tail reads a
    tensor with no memory or no engine runs it."""
    if sub.tail is None:
        return None
    hit = sub.__dict__.get("_gemm_tail")
    if hit is None:
        try:
            hit = _make_tail(sub, out, ctx)
        except Reject as e:
            hit = e
        sub.__dict__["_gemm_tail"] = hit
    if isinstance(hit, Reject):
        raise hit
    return hit


def _make_tail(sub, out, ctx):
    from ...ir.partition import Subgraph
    from ...types import cudnnBackendHeurMode_t
    from ..api import context
    from ..ranking import rank_subgraph

    t = sub.tail
    if out.uid not in {x.uid for x in t.inputs.values()}:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{t.name}': does not read the output "
                     f"{out.label} of the fused chain")
    materialized = getattr(sub, "materialize", frozenset())
    if out.is_virtual and out.uid not in materialized:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{t.name}': its input {out.label} is "
                     "virtual: the GEMM epilogue cannot fuse the " + t.OP)
    tsub = Subgraph(kind=t.OP, nodes=[t])
    tsub.materialize = frozenset(u for u in materialized if u in {x.uid for x in t.tensors()})
    ranked = rank_subgraph(tsub, cudnnBackendHeurMode_t.CUDNN_HEUR_MODE_A, context(ctx))
    if not ranked:
        raise Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{t.name}': no engine runs the trailing "
                     f"{t.OP}")
    return Tail(tsub, ranked[0])


def compose(runs):
    """One ``run(stream)`` calling each of ``runs`` in order."""
    if len(runs) == 1:
        return runs[0]

    def run(stream):
        for r in runs:
            r(stream)
    return run


# ------------------------------------------------------------------------------- plans

class LaunchPlan(SubPlan):
    """A SubPlan whose run is its :meth:`launches` (one cuLaunchKernel each): ``prepare`` runs them in
    order, ``execute`` (numba arrays) goes through ``prepare``."""

    def prepare(self, views, scratch):
        return runner(self.launches(views, scratch))

    def execute(self, buffers, workspace, stream):
        views = {u: (memory.as_view(a) if not isinstance(a, (int, float)) else a) for u, a in buffers.items()}
        ws = memory.as_view(workspace) if workspace is not None else None
        self.prepare(views, ws)(stream)


class BlockPlan(LaunchPlan):
    """A built GEMM / implicit-GEMM conv (plus split-K companion, plus the tail's own plan): ``prepare``
    packs the launches once per buffer set; ``run`` is one cuLaunchKernel per kernel. ``table``: the
    plan-owned IMPLICIT_PRECOMP_GEMM offsets (device array) or None."""

    def __init__(self, engine, sub, cfg, p, kern, bl, ws, table=None, tail=None):
        super().__init__(engine, sub, cfg, ws)
        self.p, self.kern, self.bl, self.table, self.tail = p, kern, bl, table, tail
        self._tail_uids = sorted({t.uid for t in tail.sub.nodes[0].tensors()}) if tail is not None else ()

    def _own(self, views, scratch):
        p = self.p
        packed = p.pack(self.kern, lambda t: flat(views[t.uid], t), self.table)
        return self.bl.launches(packed, alpha_of(p.epi, views, p.alpha, self.sub), p.beta, scratch)

    def _tail_args(self, views, scratch):
        tv = {u: views[u] for u in self._tail_uids if u in views}
        return tv, (scratch if self.tail.workspace_size else None)

    def launches(self, views, scratch):
        out = list(self._own(views, scratch))
        if self.tail is not None:
            more = self.tail.launches(*self._tail_args(views, scratch))
            if more is None:
                return None
            out += list(more)
        return out

    def prepare(self, views, scratch):
        run = runner(self._own(views, scratch))
        if self.tail is None:
            return run
        return compose([run, self.tail.prepare(*self._tail_args(views, scratch))])


def tail_build(sub, out, ctx):
    """The tail's built SubPlan (None without a tail)."""
    t = tail_of(sub, out, ctx)
    return None if t is None else t.engine.build(t.sub, t.config, ctx)


def tail_workspace(sub, out):
    try:
        t = tail_of(sub, out)
    except Reject:
        return 0
    return 0 if t is None else t.workspace


def tail_time(sub, out):
    try:
        t = tail_of(sub, out)
    except Reject:
        return math.inf
    return 0.0 if t is None else t.ec.predicted_time


def tail_notes(sub, out):
    try:
        t = tail_of(sub, out)
    except Reject:
        return ()
    return () if t is None else tuple(t.ec.numerical_notes)
