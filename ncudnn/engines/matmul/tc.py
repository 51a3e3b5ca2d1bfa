"""Engine "matmul_tc": batched strided matmul on tensor cores (mma.sync m16n8k16, BF16 / FP16 in, FP32
accumulate, BF16 / FP16 / FP32 out) with the subgraph's pointwise chain in the fused epilogue.

Kernel: :mod:`ncudnn.kernels.tc_gemm` (cp.async ring, XOR-swizzled shared tiles, ldmatrix, fused
epilogue variant). Knobs (cudnnBackendKnobType_t): TILE_SIZE indexes :data:`TILES` (block tile and
warp grid), STAGES the cp.async ring depth (2-4), SWIZZLE the tile-row group of the rasterization
(GROUP_M: 1 or 8), EDGE fixed (predicated M / N edges, zero-filled K tail).

Support: A and B of one 16-bit type, each with a unit stride on one of its two matrix dims; K, the
leading dims, the contiguous extents and the batch strides of A and B multiples of 8 elements; 16-byte
aligned A / B. Math: refused unless the build context allows tensor cores (legacy FMA_MATH does not).
FP32 A and B run as TF32 (m16n8k8; the mma drops the low 13 mantissa bits; note DOWN_CONVERT_INPUTS)
when the context allows TF32, for k-contiguous A and B only (B stored (n, k)); other FP32 layouts are
refused with a reason. FP8 A and B (both e4m3 or both e5m2, k-contiguous, K % 16 == 0, sm_89+) run on
m16n8k32 with the descale / scale chain in alpha and an FP8, BF16, FP16 or FP32 output
(:mod:`ncudnn.engines.matmul.tc_fp8`); tiles in :data:`FP8_SPILLS` are not offered to them. The FP8 pattern with an
AMAX reduction of the descaled product (a composite problem: matmul + reduction + scale parts) runs
as one kernel with the amax in its epilogue (:func:`ncudnn.engines.matmul.tc_fp8.amax_pattern`), after a one-thread
launch that zeroes the amax tensor.
"""
import numpy as np

from ...kernels.runtime import kcache
from ...kernels.tc_gemm import check, fused_args, make_tc_gemm
from ...kernels.tc_gemm.launch import amax_zero_kernel
from ...types import cudnnBackendKnobType_t, cudnnBackendLayoutType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from ..gemm import common as gc
from ..base import OK
from ..registry import register
from ..gemm.tc_base import TcEngineBase
from ..gemm.tc_base import tile as _t
from ..gemm.tc_base import tile_config
from .tc_common import (SMALL_K_TILES, TcPlan, cost_terms, extra_notes, gemm_shape, halves, small_k_floor,  # noqa: F401
                        small_k_tiles, support_pre, tc_mapping)

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t

#: block tiles, best first for large problems. eff (a cost-model input): the fraction of the BF16 dense peak the
#: best config reached at 8192^3 on the H200 (dev/perf_notes.md, "Tensor cores"); the others are estimates
#: scaled from it (ranking only).
TILES = (
    _t(128, 256, 32, 2, 4, 0.28, 252, 3),
    _t(128, 128, 32, 2, 2, 0.27, 252, 4),
    _t(256, 128, 32, 4, 2, 0.27, 254, 3),
    _t(128, 128, 64, 2, 4, 0.26, 239, 3),
    _t(64, 128, 32, 2, 2, 0.22, 170, 4),
    _t(64, 64, 32, 2, 2, 0.18, 126, 4),
    _t(32, 32, 32, 2, 2, 0.08, 64, 2),
    _t(16, 16, 16, 1, 1, 0.03, 40, 2),
)
#: tiles whose FP8 kernels (fp8_config, FP8 output) spill on sm_90 (the nvJitLink compile check: 128x256 12
#: bytes, 128x128 w2x2 8, 256x128 36): not offered for FP8 operands
FP8_SPILLS = frozenset({0, 1, 2})


def fp8_config(c):
    """The FP8 kernel config (BLOCK_K in FP8 elements) of a 16-bit tile config: BLOCK_K FP8 elements (half
    the tile's shared bytes: fewer k16 steps and lane offsets live, the large tiles spill otherwise), at
    least one m16n8k32 step; twice that where the halves tile would not split among the threads."""
    c8 = c.replace(BLOCK_K=max(c.BLOCK_K, 32))
    return c8 if check(c8.replace(BLOCK_K=c8.BLOCK_K // 2))[0] else c.replace(BLOCK_K=2 * c.BLOCK_K)


def tc_config(cfg):
    """The kernel TcGemmConfig of an engine Config."""
    return tile_config(TILES, cfg)


@register
class MatmulTcEngine(TcEngineBase):
    name = "matmul_tc"
    kinds = ("matmul", "composite")
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW
    TILES = TILES
    PROBLEM_MEMO = "_gemm_mapping"
    EDGE_LABEL = "predicated M / N edges, zero-filled K tail"
    #: measured TB/s of C written per tile at small K with the element-walk epilogue (see SMALL_K_TILES; H200,
    #: experiments/probe_small_k16.py; dev/perf_notes.md, "Tensor-core matmul")
    SMALL_K_RATE = {0: (0.38, 0.36, 0.32)}
    SMALL_K_DEFAULT_RATE = 0.35

    # ---------------------------------------------------------------- problem
    def _problem(self, sub):
        """The GemmMapping of ``sub`` plus the tensor-core checks (raises gc.Reject). A composite ``sub``
        must be the FP8 matmul with an amax output (:func:`amax_pattern`)."""
        return tc_mapping(sub, self.name, amax_ok=type(self) is MatmulTcEngine)

    def gemm_shape(self, p):
        return gemm_shape(p)

    def cost_config(self, p, cfg):
        # FP8: BLOCK_K counts FP8 elements, smem_bytes counts 16-bit ones: the halves tile's shared bytes
        c = tc_config(cfg)
        return fp8_config(c).replace(BLOCK_K=fp8_config(c).BLOCK_K // 2) if p.tc_fp8 else c

    def cost_terms(self, p):
        return cost_terms(p)

    def _support_pre(self, sub, ctx):
        return support_pre(self, sub, ctx)

    def _arch_reason(self, dev):
        return f"{self.name}: mma.sync bf16 / f16 needs sm_80+, device is sm_{dev.cc[0]}{dev.cc[1]}"

    def extra_notes(self, p):
        return extra_notes(p)

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        t = cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)
        if t in FP8_SPILLS:
            try:
                fp8 = self.problem(sub).tc_fp8
            except gc.Reject:
                fp8 = False
            if fp8:
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: TILE_SIZE {t} ({TILES[t].label}) spills " \
                    "registers with FP8 operands on sm_90"
        return OK

    def _sim_pick(self, p, idx):
        """The tile of least simulated work (tiles x threads x k tiles)."""
        def work(i):
            c = TILES[i].cfg
            return gc.gc_tiles(p.M, p.N, c.BLOCK_M, c.BLOCK_N) * c.threads * gc.ceil_div(p.K, c.BLOCK_K)
        return sorted(idx, key=work)[:1]

    def small_k_tiles(self, p):
        return small_k_tiles(p)

    def _cost(self, sub, cfg, device):
        return small_k_floor(self, sub, cfg, super()._cost(sub, cfg, device))

    # ---------------------------------------------------------------- build
    def kernel(self, sub, cfg):
        """(TcGemmKernel, argument typing, kernel-cache key) the plan of ``cfg`` launches."""
        p = self.problem(sub)
        c = tc_config(cfg)
        if p.tc_tf32:   # BLOCK_K of the tile counts 16-bit halves: the kernel's k tile is half as many FP32
            c = c.replace(BLOCK_K=c.BLOCK_K // 2)
        elif p.tc_fp8:
            c = fp8_config(c)
        out_dt, bias_dt, res_dt = p.dtypes[2], p.dtypes[3], p.dtypes[4]
        ds = getattr(p, "dscales", ())
        amax = p.amax is not None
        ps = [t for t in p.post if not t.is_by_value]
        kern = make_tc_gemm(c, p.tc_a_kmajor, p.tc_b_kmajor, p.dtypes[0], out_dt, epi=p.epi.spec,
                            bias_dtype=bias_dt, res_dtype=res_dt, dscales=len(ds), amax=amax,
                            pscales=len(ps) if amax else None)
        tf = gc.typing_flat
        op_t = "bfloat16" if p.tc_tf32 or p.tc_fp8 else p.dtypes[0]   # TF32 / FP8 travel as 16-bit halves
        K_, a_st, b_st = halves(p)
        typing = (fused_args(kern, tf(op_t), tf(op_t), tf(out_dt), tf(bias_dt), tf(res_dt),
                             p.M, p.N, K_, p.batch, a_st, b_st, p.c_strides)
                  + ((tf("float32"), np.float32(1.0)) if amax else ())
                  + tuple(tf("float32") for _ in tuple(ds) + tuple(ps)))
        return kern, typing, gc.key_text("tc_gemm", c, p.tc_a_kmajor, p.tc_b_kmajor, p.dtypes, kern.epi,
                                      *((len(ds),) if ds else ()), *((f"amax{len(ps)}",) if amax else ()))

    def build(self, sub, cfg, ctx):
        kern, typing, key = self.kernel(sub, cfg)
        p = self.problem(sub)
        plan = self._plan(TcPlan, sub, cfg, ctx, p, kern, key, typing)
        plan.zero = None
        if p.amax is not None:   # the amax tensor starts at 0 before the kernel's atomic max
            plan.zero = kcache.get_or_compile("tc_amax_zero", amax_zero_kernel, gc.argtypes((gc.typing_flat("float32"),)))
        return plan
