"""The SIMT GEMM tile tables (TILE_SIZE knob values) and the config choices made over them: which tiles
are worth ranking for a problem, which SWIZZLE and SPLIT_K to offer, whether a kernel config fits the
problem (grid limits, split-K slices), and the deterministic split-K workspace.

Tile figures are cost-model inputs: the FP32 TFLOP/s each tile reached in an SGEMM 4096^3 on the H200
(dev/perf_notes.md, "SIMT GEMM"); ``None`` marks a tile not measured there (its efficiency is an estimate,
used for ranking only).
"""
import math
from dataclasses import dataclass
from typing import Optional

from ...kernels.gemm import splitk
from ...kernels.gemm.config import FAST_SKINNY, GemmConfig, check
from ...platform import simulator_enabled
from ...types import cudnnBackendKnobType_t
from ..base import KnobSpec

__all__ = ["MEASURED_PEAK", "MAX_GRID_YZ", "Tile", "BIG_TILES", "FAST_TILES", "GENERIC_BK8_TFLOPS", "MATMUL_TILES",
           "FAST_SKINNY_TILES", "SIMT_TILES", "SMALL_TILES", "CONV_TILES", "tile_knob", "is_pow2", "gemm_config",
           "memo", "simulated_small", "SIM_SMALL_OUTPUT", "useful_tiles", "gc_tiles", "swizzle_for",
           "rank_candidates", "split_worthwhile", "checked", "keep_config", "split_workspace", "ceil_div", "prod"]

K = cudnnBackendKnobType_t

#: FP32 FMA peak of the H200 the figures were measured on (FLOP/s)
MEASURED_PEAK = 67e12
MAX_GRID_YZ = 65535

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
#: matmul, 128 registers (2 blocks per SM); the TFLOP/s is an estimate (about 0.7x cuBLAS), not a
#: measured figure; other dtypes run these tiles on the generic mainloop (ranked with GENERIC_BK8_TFLOPS there)
FAST_TILES = (
    Tile("128x128x8 t8x8 vec4 fast", _g(128, 128, 8, 8, 8, 32, 64, 4, "fast").replace(MAX_REGS=128), None, 36.0,
         128),
)
GENERIC_BK8_TFLOPS = 23.1

#: matmul_simt's table: the fast tiles, then the generic large tiles
MATMUL_TILES = FAST_TILES + BIG_TILES

#: smaller fast-mainloop blocks (kernels/gemm/config.FAST_SKINNY) for skinny fp32 matmuls: with split-K
#: they fill every SM where few 128x128 tiles exist (N or M of 64..128 over a deep K); the 16-row block for
#: M <= 16 (GEMV-like). (FAST_SMALL's 128x64 under a cap of 128 registers was the fastest on 16384x64x4096 but
#: spills with this A, so it is not shipped; the 168-register 128x64 ran about as fast.)
#: Registers: sm_90 compile check. TFLOP/s: on the scale of FAST_TILES' 36.0 estimate, from an H200 run of
#: experiments/probe_skinny.py (dev/perf_notes.md, "SIMT GEMM"): at full waves the 64-128 row blocks ran
#: about as fast as the 128x128 fast tile, so they sit just under its figure (it stays the pick wherever it
#: fills the SMs); the 16-row block, split, beat cuBLAS on GEMV-like shapes and sits above it.
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


def split_workspace(gcfg, M, N, batch, fp64):
    """Exact bytes of the deterministic split-K partials (0 otherwise)."""
    if gcfg.SPLIT_K <= 1 or gcfg.SPLIT_MODE == "atomic":
        return 0
    return splitk.workspace_elems(batch, M, N, gcfg.SPLIT_K) * (8 if fp64 else 4)


def ceil_div(a, b):
    return -(-a // b)


def prod(xs):
    return math.prod(xs)
