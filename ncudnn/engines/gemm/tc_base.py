"""The family base of the tensor-core engines (matmul_tc, matmul_wgmma, conv_tc; what the two matmul ones
share beyond it is in matmul/tc_common.py), as gemm.tiled.TiledGemm serves the SIMT ones: the tile table type, the memoized problem, the support prelude (math type, sm_80+,
the problem's checks, the tail), knobs (TILE_SIZE / STAGES / SWIZZLE / EDGE / KERNEL_CFG = mainloop version), the keep prune, notes,
the candidate tail (one config per useful tile, swizzle choice, keep filter, cost sort), the
workspace (the tail's only), the memoized cost over ``heuristics.gemm_time``, the kernel compile and
the plan's operand checks.

A subclass supplies ``TILES``, ``PROBLEM_MEMO`` / ``_problem(sub)`` (raises gc.Reject),
``gemm_shape(p) -> (M, N, K, batch)``, ``cost_terms(p)``, the EDGE knob's label and ``build``; it may
override ``_support_pre`` (refusals before the math-type check), ``_arch_reason``, ``extra_notes``,
``_sim_pick`` (the simulator's tile for tiny problems) and ``cost_config`` (the kernel config the cost
counts shared bytes of).
"""
import math
from dataclasses import dataclass

from ...errors import BadParamError
from ...kernels.runtime import kcache
from ...kernels.tc_gemm import TcGemmConfig, check, smem_bytes
from ...platform import simulator_enabled
from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from . import common as gc
from .. import heuristics as H
from ..base import OK, Engine, KnobSpec

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
HALF = ("bfloat16", "float16")
#: output elements up to which the simulator ranks only one (small) tile
SIM_SMALL_OUTPUT = 64 * 64 * 4


@dataclass(frozen=True)
class TcTile:
    label: str
    cfg: TcGemmConfig        # STAGES / GROUP_M come from the knobs
    eff: float               # fraction of the BF16 tensor-core peak the mainloop reaches (ranking)
    regs: int                # registers per thread (sm_90 compile check, docs/tensor_cores.md)
    stages: int              # the STAGES candidate ranked for this tile
    rate1: float = 0.0       # measured TFLOP/s of one SM running one CTA of the tile (0: not measured)
    rate: float = 0.0        # ... running two or more resident CTAs


#: the mainloop version (TcGemmConfig.VERSION, knob KERNEL_CFG) the engines run unless told otherwise:
#: v3 (32-bit shared addresses; sm_90 SASS: mainloop 433 -> 214 instructions a k tile at 128x128 w2x2,
#: conv 128x128 w2x4 362 -> 259, registers 252 -> 244); v1 stays selectable
DEFAULT_VERSION = 3


def tile(bm, bn, bk, wm, wn, eff, regs, stages, rate1=0.0, rate=0.0):
    """A :class:`TcTile` (label "BMxBNxBK wWMxWN"), GROUP_M 8, mainloop :data:`DEFAULT_VERSION`."""
    return TcTile(f"{bm}x{bn}x{bk} w{wm}x{wn}", TcGemmConfig(bm, bn, bk, wm, wn, stages, 8, DEFAULT_VERSION), eff,
                  regs, stages, rate1, rate)


def tile_config(tiles, cfg):
    """The kernel TcGemmConfig of an engine Config over the tile table ``tiles``."""
    t = tiles[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
    c = t.cfg.replace(STAGES=cfg.get(K.CUDNN_KNOB_TYPE_STAGES, t.stages),
                      GROUP_M=cfg.get(K.CUDNN_KNOB_TYPE_SWIZZLE, 8))
    if isinstance(c, TcGemmConfig):
        c = c.replace(VERSION=cfg.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG, DEFAULT_VERSION),
                      SPLIT_K=cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1))
    return c


def check_aligned(engine, flats, why=""):
    """Raise BadParamError unless every ``(port, Flat)`` of ``flats`` starts 16-byte aligned."""
    for port, f in flats:
        if f.ptr % 16:
            raise BadParamError(f"{engine}: {port} at {f.ptr:#x} is not 16-byte aligned{why}",
                                S.CUDNN_STATUS_BAD_PARAM)


def epilogue_flats(epi, views):
    """(out, bias, residual) Flats of an Epilogue (absent bias / residual: the output, never read)."""
    out = gc.flat(views[epi.out.uid], epi.out)
    bias = gc.flat(views[epi.bias.uid], epi.bias) if epi.bias is not None else out
    res = gc.flat(views[epi.residual.uid], epi.residual) if epi.residual is not None else out
    return out, bias, res


class TcEngineBase(Engine):
    TILES = ()
    numerical_notes = (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,)
    #: the subgraph attribute holding the problem memo (engine name -> problem or Reject)
    PROBLEM_MEMO = "_tc_problem"
    #: what the one EDGE knob value means
    EDGE_LABEL = "predicated edges"
    #: SPLIT_K values the candidates offer (the k tiles over grid y, fp32 partials in the workspace, an
    #: ordered reduce with the epilogue); (1,): no split, and no SPLIT_K knob
    SPLITS = (1,)
    #: a split is offered while the unsplit grid has fewer CTAs than this many waves (SMs x resident CTAs)
    SPLIT_BELOW_WAVES = 1.0
    #: and while every slice keeps at least this many k tiles
    SPLIT_MIN_KTILES = 8

    # ---------------------------------------------------------------- problem
    def _problem(self, sub):
        raise NotImplementedError

    def problem(self, sub):
        """The memoized problem of ``sub`` (raises its gc.Reject again on every call)."""
        memo = sub.__dict__.setdefault(self.PROBLEM_MEMO, {})
        hit = memo.get(self.name)
        if hit is None:
            try:
                hit = self._problem(sub)
                refused = gc.refuse_packed(getattr(hit, "epi", None), self.name)   # verified on the SIMT
                if refused is not None:                                            # kernels only
                    raise gc.Reject(*refused)
            except gc.Reject as e:
                hit = e
            memo[self.name] = hit
        if isinstance(hit, gc.Reject):
            raise hit
        return hit

    def gemm_shape(self, p):
        """(M, N, K, batch) of the GEMM the kernel runs."""
        raise NotImplementedError

    def cost_terms(self, p):
        """(input bytes per element, output bytes per element, epilogue bytes, peak name) of the cost."""
        raise NotImplementedError

    # ---------------------------------------------------------------- support
    def _support_pre(self, sub, ctx):
        """Refusals checked before the math type's (default: none)."""
        return OK

    def _arch_reason(self, dev):
        return f"{self.name}: mma.sync needs sm_80+"

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        st, why = self._support_pre(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        if ctx is not None and not ctx.allow_tensor_cores:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: the math type does not allow tensor cores " \
                "(FMA_MATH)"
        dev = ctx.device if ctx is not None else None
        if dev is not None and tuple(dev.cc) < (8, 0):
            return S.CUDNN_STATUS_ARCH_MISMATCH, self._arch_reason(dev)
        try:
            p = self.problem(sub)
            gc.tail_of(sub, p.epi.out, ctx)
        except gc.Reject as e:
            return e.status, e.reason
        return OK

    # ---------------------------------------------------------------- knobs
    def tc_config(self, cfg):
        return tile_config(self.TILES, cfg)

    def cost_config(self, p, cfg):
        """The TcGemmConfig whose shared bytes and threads the cost counts (default: the tile's)."""
        return self.tc_config(cfg)

    def knobs(self, sub):
        tiles = self.TILES
        return (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0, len(tiles) - 1, 1, 0, tuple(t.label for t in tiles)),
                KnobSpec(K.CUDNN_KNOB_TYPE_STAGES, 2, 4, 1, tiles[0].stages),
                KnobSpec(K.CUDNN_KNOB_TYPE_SWIZZLE, 1, 8, 1, 8),
                KnobSpec(K.CUDNN_KNOB_TYPE_EDGE, 1, 1, 1, 1, (self.EDGE_LABEL,)),
                KnobSpec(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 1, 3, 2, DEFAULT_VERSION)) + (   # mainloop version 1 or 3
            (KnobSpec(K.CUDNN_KNOB_TYPE_SPLIT_K, 1, max(self.SPLITS), 1, 1),) if len(self.SPLITS) > 1 else ())

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        sw = cfg.get(K.CUDNN_KNOB_TYPE_SWIZZLE)
        if sw & (sw - 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: SWIZZLE = {sw} is not a power of 2"
        c = self.tc_config(cfg)
        ok, why = check(c)
        if not ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}"
        if c.SPLIT_K > 1:
            try:
                kt = gc.ceil_div(self.gemm_shape(self.problem(sub))[2], c.BLOCK_K)
            except gc.Reject as e:
                return e.status, e.reason
            if c.SPLIT_K > kt:
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: SPLIT_K {c.SPLIT_K} > {kt} k tiles " \
                    f"(BLOCK_K {c.BLOCK_K})"
        return OK

    def extra_notes(self, p):
        """Numerical notes of the problem beyond TENSOR_CORE (e.g. DOWN_CONVERT_INPUTS)."""
        return ()

    def config_notes(self, sub, cfg):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return self.numerical_notes
        return tuple(dict.fromkeys(self.numerical_notes + self.extra_notes(p) + gc.tail_notes(sub, p.epi.out)))

    # ---------------------------------------------------------------- candidates
    def _sim_pick(self, p, idx):
        """The simulator's tile index list for a tiny problem (default: the last tile)."""
        return [len(self.TILES) - 1]

    def _splits(self, M, N, K_, B, t, dev):
        """The SPLIT_K values of :data:`SPLITS` worth ranking for tile ``t`` (a TcTile) on ``dev``: 1, and
        the splits while the unsplit grid is under SPLIT_BELOW_WAVES waves (SMs x resident CTAs) and each
        slice keeps SPLIT_MIN_KTILES k tiles."""
        c = t.cfg
        ctas = gc.ceil_div(M, c.BLOCK_M) * gc.ceil_div(N, c.BLOCK_N) * B
        slots = dev.sm_count * max(H.blocks_per_sm(dev, c.threads, t.regs, smem_bytes(c)), 1)
        kt = gc.ceil_div(K_, c.BLOCK_K)
        return [s for s in self.SPLITS
                if s == 1 or (ctas < self.SPLIT_BELOW_WAVES * slots and kt >= s * self.SPLIT_MIN_KTILES)]

    def candidates(self, sub, ctx):
        """One config per useful tile (its STAGES, SWIZZLE 8 when more than 8 tile rows, with a device its
        cheapest SPLIT_K of :meth:`_splits`), cheapest first."""
        try:
            p = self.problem(sub)
        except gc.Reject:
            return ()
        tiles = self.TILES
        M, N, K_, B = self.gemm_shape(p)
        dev = ctx.device if ctx is not None else None
        base = self.default_config(sub)
        idx = [i for i, t in enumerate(tiles)
               if t.cfg.BLOCK_M <= 2 * max(M, 16) and t.cfg.BLOCK_N <= 2 * max(N, 16)] or [len(tiles) - 1]
        if simulator_enabled() and M * N * B <= SIM_SMALL_OUTPUT:
            idx = self._sim_pick(p, idx)
        out = []
        for i in idx:
            t = tiles[i]
            sw = 8 if gc.ceil_div(M, t.cfg.BLOCK_M) > 8 else 1
            c = base.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, i).with_knob(K.CUDNN_KNOB_TYPE_STAGES, t.stages) \
                .with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, sw)
            if dev is not None and len(self.SPLITS) > 1:   # the tile's cheapest SPLIT_K
                alts = [c.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, x) for x in self._splits(M, N, K_, B, t, dev)]
                alts = [a for a in alts if self.keep(sub, a, ctx)[0] == S.CUDNN_STATUS_SUCCESS] or [c]
                c = min(alts, key=lambda a: self.cost(sub, a, dev))
            out.append(c)
        out = [c for c in out if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
        if dev is not None:
            out.sort(key=lambda c: self.cost(sub, c, dev))
        return tuple(out)

    # ---------------------------------------------------------------- model
    def workspace_size(self, sub, cfg):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return 0
        return gc.tail_workspace(sub, p.epi.out)

    def cost(self, sub, cfg, device):
        return gc.memo(sub, ("cost", self.name, cfg, device), lambda: self._cost(sub, cfg, device)
                       if Engine.keep(self, sub, cfg, None)[0] == S.CUDNN_STATUS_SUCCESS else math.inf)

    def _cost(self, sub, cfg, device):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return math.inf
        t = self.TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
        c = self.cost_config(p, cfg)
        smem = smem_bytes(c)
        if smem > device.smem_per_block:
            return math.inf
        M, N, K_, B = self.gemm_shape(p)
        per_sm = max(H.blocks_per_sm(device, c.threads, t.regs, smem), 1)
        eff = t.eff / H.occupancy_factor(per_sm, c.threads)   # gemm_time applies the occupancy
        if c.GROUP_M == 1 and gc.ceil_div(M, c.BLOCK_M) > 8:
            eff /= gc.SWIZZLE_GAIN
        if c.STAGES == 2:
            eff *= 0.8
        in_b, out_b, extra, peak = self.cost_terms(p)
        return H.gemm_time(device, M, N, K_, batch=B, tile=(c.BLOCK_M, c.BLOCK_N), threads=c.threads, regs=t.regs,
                           smem=smem, in_bytes=in_b, out_bytes=out_b, peak=peak, extra_bytes=extra,
                           compute_eff=min(eff, 1.0), split_k=c.SPLIT_K) + gc.tail_time(sub, p.epi.out)

    # ---------------------------------------------------------------- build
    def _plan(self, plan_cls, sub, cfg, ctx, p, kern, key, typing):
        """Compile ``kern`` through the kernel cache (``key``, argument ``typing``) and wrap it in
        ``plan_cls`` with the workspace and the tail's plan."""
        ck = kcache.get_or_compile(key, lambda: kern.kernel, gc.argtypes(typing))
        return plan_cls(self, sub, cfg, p, kern, ck, self.workspace_size(sub, cfg),
                        tail=gc.tail_build(sub, p.epi.out, ctx))
