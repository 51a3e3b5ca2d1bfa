"""Engine "matmul_wgmma": batched strided BF16 / FP16 / TF32 matmul on Hopper warpgroup MMA
(``wgmma.mma_async``, sm_90a), FP32 accumulation, BF16 / FP16 / FP32 output, the subgraph's pointwise
chain in the epilogue.

Kernel: :mod:`ncudnn.kernels.wgmma` (cp.async ring into 128-byte-swizzled stages, wgmma m64nNk16, or
m64nNk8 for TF32, with shared-memory descriptors, two consumer warpgroups, asynchronous issue with one
group in flight, epilogue staged through shared memory and stored in 16-byte vectors). Knobs
(cudnnBackendKnobType_t): TILE_SIZE indexes :data:`TILES`, STAGES the ring depth (2-6), SWIZZLE the
tile-row group of the rasterization (GROUP_M 1 or 8), EDGE fixed.

Small K (16-bit, at most 4 k tiles: writing C bounds the time): each tile is ranked at its
:data:`SMALL_K_STAGES` ring (no deeper than k tiles + 1, leaving shared memory for resident blocks) and
costed no faster than C's bytes at its measured C-write rate (:data:`SMALL_K_RATE`); no split-K.

Support: what engine matmul_tc supports for 16-bit A and B (each with a unit stride on one of its two
matrix dims: k-contiguous operands are read K-major, the others MN-major through wgmma's transpose
flag; K, the leading dims, the contiguous extents and the batch strides multiples of 8 elements; 16-byte
aligned A / B), on compute capability 9.0 only (wgmma is an sm_90a instruction: refused elsewhere with
ARCH_MISMATCH). FP32 A and B run as TF32 (``m64nNk8 .tf32``: the tensor core ignores the low 13 mantissa
bits; notes TENSOR_CORE + DOWN_CONVERT_INPUTS) only when the context allows TF32 and both are
k-contiguous (B stored (n, k): tf32 wgmma has no transpose; other FP32 layouts are refused with a
reason, as by matmul_tc); the FP32 storage travels as uint16 halves (matmul_tc's TcPlan). FP8 operands
are refused (matmul_tc runs them).
"""
from ...kernels.wgmma.config import WgmmaConfig
from ...kernels.wgmma.config import check as wg_check
from ...kernels.wgmma.kernel import make_wgmma_gemm
from ...kernels.wgmma.launch import fused_args
from ...types import cudnnBackendKnobType_t, cudnnBackendLayoutType_t, cudnnStatus_t
from ..gemm import common as gc
from ..base import OK, Engine, KnobSpec
from ..registry import register
from ..gemm.tc_base import TcEngineBase, TcTile
from .tc_common import (TcPlan, cost_terms, extra_notes, gemm_shape, halves, small_k_floor, small_k_tiles,
                        support_pre, tc_mapping)

S = cudnnStatus_t
K = cudnnBackendKnobType_t


def _t(bn, wgs, mi, stages, eff, regs):
    c = WgmmaConfig(bn, wgs, mi, stages, 8, 1)      # EARLY: loads STAGES - 1 k tiles ahead
    return TcTile(f"{c.BLOCK_M}x{bn}x64 wg{wgs}x{mi}", c, eff, regs, stages)


#: block tiles, best first for large problems, all loading STAGES - 1 k tiles ahead (EARLY: faster in every
#: measured case). eff (a cost-model input): fraction of the dense peak of the operand type (BF16 / FP16 989,
#: TF32 495 TFLOP/s) the tile reached at 8192^3 on the H200 (experiments/wgmma_timing.py; the first four tiles
#: measured, the others estimates; figures: dev/perf_notes.md, "Tensor-core matmul"). regs: sm_90a ptxas
#: (nvJitLink), bias + relu epilogue.
TILES = (
    _t(256, 2, 1, 4, 0.51, 231),
    _t(192, 2, 1, 4, 0.49, 160),
    _t(128, 2, 2, 4, 0.48, 230),
    _t(128, 2, 1, 5, 0.42, 123),
    _t(128, 1, 1, 6, 0.30, 128),
    _t(64, 1, 1, 6, 0.15, 94),
)
#: small-K problems (matmul_tc.SMALL_K_TILES): TB/s of C written per TILE_SIZE at 1, 2 and 4 k tiles, measured
#: on the H200 with EPI 3 (the packed epilogue, SMALL_K_EPI) at the rings of SMALL_K_STAGES
#: (experiments/probe_small_k16.py; dev/perf_notes.md, "Tensor-core matmul"). Unlisted tiles: SMALL_K_DEFAULT_RATE.
SMALL_K_RATE = {0: (1.63, 1.45, 1.11), 3: (1.95, 1.57, 1.21), 4: (1.89, 1.55, 1.01)}
#: ring depth of each tile at small K (at most k tiles + 1: the prologue then loads every k tile; smaller
#: rings leave shared memory for more resident blocks)
SMALL_K_STAGES = {0: 3, 1: 3, 2: 3, 3: 3, 4: 3, 5: 3}     # 128x128 / 64x128: 3 >= 2 stages at every K (probe)
#: epilogue variant (WgmmaConfig.EPI) of small-K plans: 3 the packed 16-bit fast path (alpha-only chains,
#: beta 0; otherwise EPI 1 in the same kernel). EPI 2 (.cs stores) ran no faster than EPI 1.
SMALL_K_EPI = 3
#: STAGES ranked for FP32 (TF32) operands where they differ from the tile's: 3 stages on the 128x256 tile, the
#: faster at 8192^3 on the H200 (dev/perf_notes.md, "Tensor-core matmul")
TF32_STAGES = {0: 3}
SIM_TILE = len(TILES) - 1


@register
class MatmulWgmmaEngine(TcEngineBase):
    name = "matmul_wgmma"
    kinds = ("matmul", "composite")
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW
    TILES = TILES
    PROBLEM_MEMO = "_gemm_mapping"
    EDGE_LABEL = "predicated M / N edges, zero-filled K tail"
    SMALL_K_RATE = SMALL_K_RATE
    SMALL_K_DEFAULT_RATE = 0.7

    # ---------------------------------------------------------------- problem (matmul_tc's, FP8 refused)
    def _problem(self, sub):
        p = tc_mapping(sub, self.name, amax_ok=False)   # FP32 (TF32) A / B are k-contiguous here (refused otherwise)
        if p.tc_fp8:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"node '{sub.anchor.name}': A / B "
                            f"{p.dtypes[0]}: wgmma kernel takes bfloat16, float16 or float32 (TF32) operands "
                            "(matmul_tc runs FP8)")
        return p

    def gemm_shape(self, p):
        return gemm_shape(p)

    def cost_terms(self, p):
        return cost_terms(p)

    def extra_notes(self, p):
        return extra_notes(p)

    def small_k_tiles(self, p):
        return small_k_tiles(p)

    # ---------------------------------------------------------------- support, knobs
    def _support_pre(self, sub, ctx):
        dev = ctx.device if ctx is not None else None
        if dev is not None and tuple(dev.cc)[:2] != (9, 0):
            return S.CUDNN_STATUS_ARCH_MISMATCH, f"{self.name}: wgmma.mma_async is an sm_90a instruction, " \
                f"device is sm_{dev.cc[0]}{dev.cc[1]}"
        return support_pre(self, sub, ctx)      # FP32 operands: only when the math type allows TF32

    def _arch_reason(self, dev):
        return f"{self.name}: wgmma needs sm_90a, device is sm_{dev.cc[0]}{dev.cc[1]}"

    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0, len(TILES) - 1, 1, 0, tuple(t.label for t in TILES)),
                KnobSpec(K.CUDNN_KNOB_TYPE_STAGES, 2, 6, 1, TILES[0].stages),
                KnobSpec(K.CUDNN_KNOB_TYPE_SWIZZLE, 1, 8, 1, 8),
                KnobSpec(K.CUDNN_KNOB_TYPE_EDGE, 1, 1, 1, 1, (self.EDGE_LABEL,)))

    def keep(self, sub, cfg, ctx):
        st, why = Engine.keep(self, sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        sw = cfg.get(K.CUDNN_KNOB_TYPE_SWIZZLE)
        if sw & (sw - 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: SWIZZLE = {sw} is not a power of 2"
        ok, why = wg_check(self.tc_config(cfg))
        return OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}")

    def cost_config(self, p, cfg):
        return self.tc_config(cfg)

    def candidates(self, sub, ctx):
        """matmul_tc's candidates (one per useful tile, cheapest first); TF32 problems rank the tiles of
        :data:`TF32_STAGES` at those STAGES; small-K problems each tile at its :data:`SMALL_K_STAGES`
        (at most k tiles + 1), cheapest first."""
        out = super().candidates(sub, ctx)
        try:
            p = self.problem(sub)
        except gc.Reject:
            return out
        kt = self.small_k_tiles(p)
        if not p.tc_tf32 and kt is None:
            return out
        swap = []
        for c in out:
            t = c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)
            st = TF32_STAGES.get(t) if p.tc_tf32 else max(2, min(SMALL_K_STAGES.get(t, 3), kt + 1))
            c2 = c.with_knob(K.CUDNN_KNOB_TYPE_STAGES, st) if st else c
            swap.append(c2 if self.keep(sub, c2, ctx)[0] == S.CUDNN_STATUS_SUCCESS else c)
        dev = ctx.device if ctx is not None else None
        if kt is not None and dev is not None:
            swap.sort(key=lambda c: self.cost(sub, c, dev))
        return tuple(swap)

    def _cost(self, sub, cfg, device):
        """matmul_tc's cost (TcEngineBase's, floored at small K by C's write rate); at small K a ring that holds every k tile (STAGES > k tiles: the prologue loads
        them all) costs no more than the tile's own deeper ring (the model's latency terms grow with STAGES)."""
        st = cfg.get(K.CUDNN_KNOB_TYPE_STAGES)
        t = self.TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
        cost = small_k_floor(self, sub, cfg, super()._cost(sub, cfg, device))
        if st is None or st >= t.stages:
            return cost
        try:
            kt = self.small_k_tiles(self.problem(sub))
        except gc.Reject:
            return cost
        if kt is not None and st > kt:
            deep = cfg.with_knob(K.CUDNN_KNOB_TYPE_STAGES, t.stages)
            cost = min(cost, small_k_floor(self, sub, deep, super()._cost(sub, deep, device)))
        return cost

    def _sim_pick(self, p, idx):
        return [SIM_TILE]

    def kernel(self, sub, cfg):
        """(WgmmaKernel, argument typing, kernel-cache key) the plan of ``cfg`` launches."""
        p = self.problem(sub)
        c = self.tc_config(cfg)
        if self.small_k_tiles(p) is not None:
            c = c.replace(EPI=SMALL_K_EPI)
        bias_dt, res_dt = p.dtypes[3], p.dtypes[4]
        kern = make_wgmma_gemm(c, p.tc_a_kmajor, p.tc_b_kmajor, p.dtypes[0], epi=p.epi.spec, bias_dtype=bias_dt,
                               res_dtype=res_dt)
        tf = gc.typing_flat
        op_t = "bfloat16" if p.tc_tf32 else p.dtypes[0]     # TF32: FP32 storage as uint16 halves
        K_, a_st, b_st = halves(p)
        typing = fused_args(kern, tf(op_t), tf(op_t), tf(p.dtypes[2]), tf(bias_dt), tf(res_dt),
                            p.M, p.N, K_, p.batch, a_st, b_st, p.c_strides)
        return kern, typing, gc.key_text("wgmma_gemm", c, p.tc_a_kmajor, p.tc_b_kmajor, p.dtypes, kern.epi)

    def build(self, sub, cfg, ctx):
        kern, typing, key = self.kernel(sub, cfg)
        return self._plan(TcPlan, sub, cfg, ctx, self.problem(sub), kern, key, typing)
