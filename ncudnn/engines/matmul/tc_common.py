"""What the tensor-core matmul engines (matmul_tc, matmul_wgmma) share beside their family base
(``gemm.tc_base.TcEngineBase``, which conv_tc shares too): the GemmMapping of a matmul subgraph with the
tensor-core checks, the operands' 16-bit-halves view, the cost terms, the support checks before the
math type's, the small-K cost floor and the built plan.
"""
import math

import numpy as np

from ...kernels.tc_gemm import check_fused, fused_args, fused_grid
from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from ..gemm import common as gc
from ..base import OK
from ..gemm.tc_base import HALF, check_aligned, epilogue_flats
from .common import matmul_mapping
from .tc_fp8 import FP8, amax_pattern, fp8_halves, fp8_mapping

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t

#: 16-bit problems of at most SMALL_K_TILES 64-wide k tiles are bound by writing C, which the analytic model
#: overlaps with everything else: their cost is at least C's bytes at the tile's measured rate of writing C
#: (``SMALL_K_RATE``: tile -> TB/s at 1, 2 and 4 k tiles; SMALL_K_DEFAULT_RATE for the tiles not measured)
SMALL_K_TILES = 4


class _Layout:
    """What check_fused needs of a kernel before one is built."""

    def __init__(self, a_kmajor, b_kmajor):
        self.a_kmajor, self.b_kmajor = a_kmajor, b_kmajor


def halves(p):
    """(K, A strides, B strides) as the kernel counts them: in 16-bit halves for TF32 (every A / B
    stride except the unit k stride doubles) and FP8 (halved), in elements otherwise."""
    if getattr(p, "tc_fp8", False):
        return p.tc_fp8_halves
    if not getattr(p, "tc_tf32", False):
        return p.K, p.a_strides, p.b_strides
    a, b = p.a_strides, p.b_strides
    return 2 * p.K, (2 * a[0], 2 * a[1], 2 * a[2], 1), (2 * b[0], 2 * b[1], 1, 2 * b[3])


def tc_mapping(sub, name, amax_ok):
    """The GemmMapping of ``sub`` plus the tensor-core checks (raises gc.Reject naming engine ``name``). A
    composite ``sub`` must be the FP8 matmul with an amax output (:func:`amax_pattern`), which only an
    engine with ``amax_ok`` runs."""
    amax, post = None, ()
    if sub.kind == "composite":
        if not amax_ok:     # other kernels have no amax epilogue
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{name}: the FP8 matmul + amax "
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
    ok, why = check_fused(_Layout(p.tc_a_kmajor, p.tc_b_kmajor), p.M, p.N, *halves(p))
    if not ok:
        if p.tc_tf32 or p.tc_fp8:   # the kernel's counts are 16-bit halves: say it in the user's elements too
            kind, mult = ("FP32", 4) if p.tc_tf32 else ("FP8", 16)
            why += (f" (counted in 16-bit halves; in {kind} elements K={p.K}, A strides {p.a_strides[2:]} and "
                    f"B strides {p.b_strides[2:]} must be multiples of {mult})")
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: {why}")
    for port, t in (("A", p.A), ("B", p.B)):
        if t.alignment < 16:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: {port}: byte alignment "
                            f"{t.alignment} < 16 (16-byte cp.async chunks)")
    if p.batch[0] * p.batch[1] > gc.MAX_GRID_YZ:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{where}: batch {p.batch} > "
                        f"{gc.MAX_GRID_YZ} (grid y)")
    return p


def gemm_shape(p):
    """(M, N, K, batch) of the kernel's GEMM. FP8: the 16-bit one over K / 2 halves (the same mma count
    and bytes)."""
    return p.M, p.N, p.tc_fp8_halves[0] if p.tc_fp8 else p.K, p.nb


def cost_terms(p):
    """(input bytes per element, output bytes per element, epilogue bytes, peak name). TF32: the same
    shared bytes as the 16-bit tile (half the k extent in 4-byte elements)."""
    if p.tc_fp8:
        return 2, p.out_bytes, p.extra_bytes, "bf16"
    return p.in_bytes, p.out_bytes, p.extra_bytes, "tf32" if p.tc_tf32 else "bf16"


def support_pre(eng, sub, ctx):
    """Refusals before the math type's: FP8 below sm_89, FP32 operands where TF32 is not allowed."""
    try:
        p = eng.problem(sub)
        tf32, fp8 = p.tc_tf32, p.tc_fp8
    except gc.Reject:
        tf32 = fp8 = False
    dev = ctx.device if ctx is not None else None
    if fp8 and dev is not None and tuple(dev.cc) < (8, 9):
        return S.CUDNN_STATUS_ARCH_MISMATCH, f"{eng.name}: FP8 mma.sync (m16n8k32 e4m3 / e5m2) needs " \
            f"sm_89+, device is sm_{dev.cc[0]}{dev.cc[1]}"
    if tf32 and ctx is not None and not ctx.allow_tf32:
        return S.CUDNN_STATUS_NOT_SUPPORTED, f"{eng.name}: FP32 operands need TF32, and the math type " \
            "does not allow down-converting inputs"
    return OK


def extra_notes(p):
    return (NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,) if p.tc_tf32 else ()


def small_k_tiles(p):
    """The k tiles (64 wide) of a 16-bit problem with at most SMALL_K_TILES of them, else None."""
    if p.tc_tf32 or p.tc_fp8:
        return None
    kt = gc.ceil_div(p.K, 64)
    return kt if kt <= SMALL_K_TILES else None


def small_k_rate(eng, tile, kt):
    """TB/s of C written by TILE_SIZE ``tile`` at ``kt`` k tiles (the engine's SMALL_K_RATE; 3 k tiles as 4)."""
    rates = eng.SMALL_K_RATE.get(tile)
    if rates is None:
        return eng.SMALL_K_DEFAULT_RATE
    return rates[{1: 0, 2: 1}.get(kt, 2)]


def small_k_floor(eng, sub, cfg, t):
    """The cost ``t`` of ``cfg`` no less than C's bytes at the tile's C-write rate (small-K problems)."""
    try:
        p = eng.problem(sub)
    except gc.Reject:
        return t
    kt = small_k_tiles(p)
    if kt is None or t == math.inf:
        return t
    rate = small_k_rate(eng, cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0), kt)
    return max(t, p.M * p.N * p.nb * p.out_bytes / (rate * 1e12))


class TcPlan(gc.BlockPlan):
    """One cuLaunchKernel of the fused tensor-core kernel (plus the tail's plan, if any)."""

    def _own(self, views, scratch):
        p, kern = self.p, self.kern
        a, b = gc.flat(views[p.A.uid], p.A), gc.flat(views[p.B.uid], p.B)
        if p.tc_tf32:   # FP32 storage as 16-bit halves
            a, b = (gc.Flat(f.ptr, 2 * f.shape[0], np.uint16) for f in (a, b))
        elif p.tc_fp8:  # FP8 pairs as 16-bit halves
            a, b = (gc.Flat(f.ptr, (f.shape[0] + 1) // 2, np.uint16) for f in (a, b))
        K_, a_st, b_st = halves(p)
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
