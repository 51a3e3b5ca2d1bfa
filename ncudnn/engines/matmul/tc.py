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
import math

import numpy as np

from ...kernels.runtime import kcache
from ...kernels.tc_gemm import check, check_fused, fused_args, fused_grid, make_tc_gemm
from ...kernels.tc_gemm.launch import amax_zero_kernel
from ...types import cudnnBackendKnobType_t, cudnnBackendLayoutType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from ..gemm import common as gc
from ..base import OK
from .common import matmul_mapping
from .tc_fp8 import FP8, amax_pattern, fp8_halves, fp8_mapping
from ..registry import register
from ..gemm.tc_base import HALF, TcEngineBase, check_aligned, epilogue_flats
from ..gemm.tc_base import tile as _t
from ..gemm.tc_base import tile_config

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


class _Layout:
    """What check_fused needs of a kernel before one is built."""

    def __init__(self, a_kmajor, b_kmajor):
        self.a_kmajor, self.b_kmajor = a_kmajor, b_kmajor


def _halves(p):
    """(K, A strides, B strides) as the kernel counts them: in 16-bit halves for TF32 (every A / B
    stride except the unit k stride doubles) and FP8 (halved), in elements otherwise."""
    if getattr(p, "tc_fp8", False):
        return p.tc_fp8_halves
    if not getattr(p, "tc_tf32", False):
        return p.K, p.a_strides, p.b_strides
    a, b = p.a_strides, p.b_strides
    return 2 * p.K, (2 * a[0], 2 * a[1], 2 * a[2], 1), (2 * b[0], 2 * b[1], 1, 2 * b[3])


def fp8_config(c):
    """The FP8 kernel config (BLOCK_K in FP8 elements) of a 16-bit tile config: BLOCK_K FP8 elements (half
    the tile's shared bytes: fewer k16 steps and lane offsets live, the large tiles spill otherwise), at
    least one m16n8k32 step; twice that where the halves tile would not split among the threads."""
    c8 = c.replace(BLOCK_K=max(c.BLOCK_K, 32))
    return c8 if check(c8.replace(BLOCK_K=c8.BLOCK_K // 2))[0] else c.replace(BLOCK_K=2 * c.BLOCK_K)


def tc_config(cfg):
    """The kernel TcGemmConfig of an engine Config."""
    return tile_config(TILES, cfg)


#: 16-bit problems of at most SMALL_K_TILES 64-wide k tiles are bound by writing C, which the analytic model
#: overlaps with everything else: their cost is at least C's bytes at the tile's measured rate of writing C
#: (``SMALL_K_RATE``: tile -> TB/s at 1, 2 and 4 k tiles; SMALL_K_DEFAULT_RATE for the tiles not measured)
SMALL_K_TILES = 4


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
        amax, post = None, ()
        if sub.kind == "composite":
            if type(self) is not MatmulTcEngine:    # subclasses (other kernels) have no amax epilogue
                raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{self.name}: the FP8 matmul + amax "
                                "pattern runs on matmul_tc's kernel only")
            sub, amax, post = amax_pattern(sub)
        p = fp8_mapping(sub) or matmul_mapping(sub)
        p.amax, p.post = amax, post
        node = sub.anchor
        a_dt, b_dt, out_dt = p.dtypes[:3]
        where = f"node '{node.name}'"
        p.tc_tf32 = a_dt == b_dt == "float32"
        p.tc_fp8 = a_dt in FP8
        if (a_dt not in HALF + FP8 and not p.tc_tf32) or b_dt != a_dt:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{where}: A {a_dt} / B {b_dt}: tensor "
                            "cores need A and B both bfloat16, both float16, both float32 (TF32), both "
                            "float8_e4m3fn or both float8_e5m2")
        if out_dt not in HALF + ("float32",) + (FP8 if p.tc_fp8 else ()):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{where}: output {out_dt} is not "
                            "bfloat16, float16 or float32" + (" or FP8" if p.tc_fp8 else " (FP8 outputs need "
                                                              "FP8 A and B)"))
        a_st, b_st = p.a_strides, p.b_strides
        if a_st[3] != 1 and a_st[2] != 1:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: A strides {a_st[2:]}: "
                            "neither the k nor the m stride is 1")
        if b_st[2] != 1 and b_st[3] != 1:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: B strides {b_st[2:]}: "
                            "neither the k nor the n stride is 1")
        p.tc_a_kmajor = a_st[3] == 1
        p.tc_b_kmajor = b_st[2] == 1 and not (b_st[3] == 1 and p.N > 1)
        if (p.tc_tf32 or p.tc_fp8) and not (p.tc_a_kmajor and p.tc_b_kmajor):
            kind, bits = ("TF32", 32) if p.tc_tf32 else ("FP8", 8)
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: {kind} needs k-contiguous A and B "
                            f"(B stored (n, k)); A strides {a_st[2:]}, B strides {b_st[2:]}: transposing "
                            f"{bits}-bit fragment loads are not implemented")
        if p.tc_fp8:
            p.tc_fp8_halves = fp8_halves(p, where)
        if amax is not None and not p.tc_fp8:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{where}: the fused amax output needs FP8 A "
                            "and B")
        if amax is not None and (p.epi.spec.steps or p.beta):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{where}: before the amax tap the chain "
                            "must be MULs by scalars (they fold into alpha)")
        ok, why = check_fused(_Layout(p.tc_a_kmajor, p.tc_b_kmajor), p.M, p.N, *_halves(p))
        if not ok:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: {why}")
        for port, t in (("A", p.A), ("B", p.B)):
            if t.alignment < 16:
                raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: {port}: byte alignment "
                                f"{t.alignment} < 16 (16-byte cp.async chunks)")
        if p.batch[0] * p.batch[1] > gc.MAX_GRID_YZ:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{where}: batch {p.batch} > "
                            f"{gc.MAX_GRID_YZ} (grid y)")
        return p

    def gemm_shape(self, p):
        # FP8: the kernel's GEMM is the 16-bit one over K / 2 halves (the same mma count and bytes)
        return p.M, p.N, p.tc_fp8_halves[0] if p.tc_fp8 else p.K, p.nb

    def cost_config(self, p, cfg):
        # FP8: BLOCK_K counts FP8 elements, smem_bytes counts 16-bit ones: the halves tile's shared bytes
        c = tc_config(cfg)
        return fp8_config(c).replace(BLOCK_K=fp8_config(c).BLOCK_K // 2) if p.tc_fp8 else c

    def cost_terms(self, p):
        # TF32: the same shared bytes as the 16-bit tile (half the k extent in 4-byte elements)
        if p.tc_fp8:
            return 2, p.out_bytes, p.extra_bytes, "bf16"
        return p.in_bytes, p.out_bytes, p.extra_bytes, "tf32" if p.tc_tf32 else "bf16"

    def _support_pre(self, sub, ctx):
        try:
            p = self.problem(sub)
            tf32, fp8 = p.tc_tf32, p.tc_fp8
        except gc.Reject:
            tf32 = fp8 = False
        dev = ctx.device if ctx is not None else None
        if fp8 and dev is not None and tuple(dev.cc) < (8, 9):
            return S.CUDNN_STATUS_ARCH_MISMATCH, f"{self.name}: FP8 mma.sync (m16n8k32 e4m3 / e5m2) needs " \
                f"sm_89+, device is sm_{dev.cc[0]}{dev.cc[1]}"
        if tf32 and ctx is not None and not ctx.allow_tf32:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: FP32 operands need TF32, and the math type " \
                "does not allow down-converting inputs"
        return OK

    def _arch_reason(self, dev):
        return f"{self.name}: mma.sync bf16 / f16 needs sm_80+, device is sm_{dev.cc[0]}{dev.cc[1]}"

    def extra_notes(self, p):
        return (NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,) if p.tc_tf32 else ()

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
        """The k tiles (64 wide) of a 16-bit problem with at most SMALL_K_TILES of them, else None."""
        if p.tc_tf32 or p.tc_fp8:
            return None
        kt = gc.ceil_div(p.K, 64)
        return kt if kt <= SMALL_K_TILES else None

    def small_k_rate(self, tile, kt):
        """TB/s of C written by TILE_SIZE ``tile`` at ``kt`` k tiles (SMALL_K_RATE; 3 k tiles as 4)."""
        rates = self.SMALL_K_RATE.get(tile)
        if rates is None:
            return self.SMALL_K_DEFAULT_RATE
        return rates[{1: 0, 2: 1}.get(kt, 2)]

    def _cost(self, sub, cfg, device):
        t = super()._cost(sub, cfg, device)
        try:
            p = self.problem(sub)
        except gc.Reject:
            return t
        kt = self.small_k_tiles(p)
        if kt is None or t == math.inf:
            return t
        rate = self.small_k_rate(cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0), kt)
        return max(t, p.M * p.N * p.nb * p.out_bytes / (rate * 1e12))

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
        K_, a_st, b_st = _halves(p)
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


class TcPlan(gc.BlockPlan):
    """One cuLaunchKernel of the fused tensor-core kernel (plus the tail's plan, if any)."""

    def _own(self, views, scratch):
        p, kern = self.p, self.kern
        a, b = gc.flat(views[p.A.uid], p.A), gc.flat(views[p.B.uid], p.B)
        if p.tc_tf32:   # FP32 storage as 16-bit halves
            a, b = (gc.Flat(f.ptr, 2 * f.shape[0], np.uint16) for f in (a, b))
        elif p.tc_fp8:  # FP8 pairs as 16-bit halves
            a, b = (gc.Flat(f.ptr, (f.shape[0] + 1) // 2, np.uint16) for f in (a, b))
        K_, a_st, b_st = _halves(p)
        check_aligned("matmul_tc", (("A", a), ("B", b)), " (the plan's cp.async loads need it)")
        out, bias, res = epilogue_flats(p.epi, views)
        alpha = gc.alpha_of(p.epi, views, p.alpha, self.sub)
        args = fused_args(kern, a, b, out, bias, res, p.M, p.N, K_, p.batch, a_st, b_st, p.c_strides,
                          p.bias_strides, p.res_strides or (0, 0, 0, 0), alpha, p.beta)
        pre = []
        if p.amax is not None:      # amax output, then the by-value scales after the tap (palpha)
            am = gc.flat(views[p.amax.uid], p.amax)
            palpha = np.float32(np.prod([np.float32(views[t.uid]) for t in p.post if t.is_by_value] or [1.0]))
            args += (am, palpha)
            pre = [self.zero.prepare((1, 1, 1), 32, (am,), 0)]
        args += tuple(gc.flat(views[t.uid], t) for t in getattr(p, "dscales", ()))    # FP8 device scales
        args += tuple(gc.flat(views[t.uid], t) for t in p.post if not t.is_by_value)   # device scales after the tap
        return pre + [self.bl.prepare(fused_grid(kern, p.M, p.N, p.batch), kern.cfg.threads, args, kern.smem)]
