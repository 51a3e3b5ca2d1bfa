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
refused with a reason.
"""
import math
from dataclasses import dataclass

import numpy as np

from ..errors import BadParamError
from ..kernels import kcache
from ..kernels.tc_gemm import (TcGemmConfig, check, check_fused, fused_args, fused_grid, make_tc_gemm,
                               smem_bytes)
from ..platform import simulator_enabled
from ..types import cudnnBackendKnobType_t, cudnnBackendLayoutType_t, cudnnBackendNumericalNote_t
from ..types import cudnnStatus_t
from . import gemm_common as gc
from . import heuristics as H
from .base import OK, Engine, KnobSpec
from .matmul_common import matmul_mapping
from .registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
HALF = ("bfloat16", "float16")


@dataclass(frozen=True)
class TcTile:
    label: str
    cfg: TcGemmConfig        # STAGES / GROUP_M come from the knobs
    eff: float               # fraction of the BF16 tensor-core peak the mainloop reaches (ranking)
    regs: int                # registers per thread (sm_90 compile check, docs/tensor_cores.md)
    stages: int              # the STAGES candidate ranked for this tile


def _t(bm, bn, bk, wm, wn, eff, regs, stages):
    return TcTile(f"{bm}x{bn}x{bk} w{wm}x{wn}", TcGemmConfig(bm, bn, bk, wm, wn, stages, 8), eff, regs, stages)


#: block tiles, best first for large problems. eff: 274.4 TFLOP/s of 989 measured for the best config
#: at 8192^3 BF16 on the H200 (2026-11-30); the others are estimates scaled from it (ranking only).
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
#: output elements up to which the simulator ranks only the tile of least simulated work
SIM_SMALL_OUTPUT = 64 * 64 * 4


class _Layout:
    """What check_fused needs of a kernel before one is built."""

    def __init__(self, a_kmajor, b_kmajor):
        self.a_kmajor, self.b_kmajor = a_kmajor, b_kmajor


def _halves(p):
    """(K, A strides, B strides) as the kernel counts them: in 16-bit halves for TF32 (every A / B
    stride except the unit k stride doubles), in elements otherwise."""
    if not getattr(p, "tc_tf32", False):
        return p.K, p.a_strides, p.b_strides
    a, b = p.a_strides, p.b_strides
    return 2 * p.K, (2 * a[0], 2 * a[1], 2 * a[2], 1), (2 * b[0], 2 * b[1], 1, 2 * b[3])


def tc_config(cfg):
    """The kernel TcGemmConfig of an engine Config."""
    tile = TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
    return tile.cfg.replace(STAGES=cfg.get(K.CUDNN_KNOB_TYPE_STAGES, tile.stages),
                            GROUP_M=cfg.get(K.CUDNN_KNOB_TYPE_SWIZZLE, 8))


@register
class MatmulTcEngine(Engine):
    name = "matmul_tc"
    kinds = ("matmul",)
    numerical_notes = (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,)
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW

    # ---------------------------------------------------------------- problem
    def problem(self, sub):
        """The memoized GemmMapping of ``sub`` plus the tensor-core checks (raises gc.Reject)."""
        memo = sub.__dict__.setdefault("_gemm_mapping", {})
        hit = memo.get(self.name)
        if hit is None:
            try:
                hit = self._problem(sub)
            except gc.Reject as e:
                hit = e
            memo[self.name] = hit
        if isinstance(hit, gc.Reject):
            raise hit
        return hit

    def _problem(self, sub):
        p = matmul_mapping(sub)
        node = sub.anchor
        a_dt, b_dt, out_dt = p.dtypes[:3]
        where = f"node '{node.name}'"
        p.tc_tf32 = a_dt == b_dt == "float32"
        if (a_dt not in HALF and not p.tc_tf32) or b_dt != a_dt:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{where}: A {a_dt} / B {b_dt}: tensor "
                            "cores need A and B both bfloat16, both float16 or both float32 (TF32)")
        if out_dt not in HALF + ("float32",):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{where}: output {out_dt} is not "
                            "bfloat16, float16 or float32")
        a_st, b_st = p.a_strides, p.b_strides
        if a_st[3] != 1 and a_st[2] != 1:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: A strides {a_st[2:]}: "
                            "neither the k nor the m stride is 1")
        if b_st[2] != 1 and b_st[3] != 1:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: B strides {b_st[2:]}: "
                            "neither the k nor the n stride is 1")
        p.tc_a_kmajor = a_st[3] == 1
        p.tc_b_kmajor = b_st[2] == 1 and not (b_st[3] == 1 and p.N > 1)
        if p.tc_tf32 and not (p.tc_a_kmajor and p.tc_b_kmajor):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: TF32 needs k-contiguous A and B "
                            f"(B stored (n, k)); A strides {a_st[2:]}, B strides {b_st[2:]}: transposing "
                            "32-bit fragment loads are not implemented")
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

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            tf32 = self.problem(sub).tc_tf32
        except gc.Reject:
            tf32 = False
        if tf32 and ctx is not None and not ctx.allow_tf32:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: FP32 operands need TF32, and the math type " \
                "does not allow down-converting inputs"
        if ctx is not None and not ctx.allow_tensor_cores:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: the math type does not allow tensor cores " \
                "(FMA_MATH)"
        dev = ctx.device if ctx is not None else None
        if dev is not None and tuple(dev.cc) < (8, 0):
            return S.CUDNN_STATUS_ARCH_MISMATCH, f"{self.name}: mma.sync bf16 / f16 needs sm_80+, " \
                f"device is sm_{dev.cc[0]}{dev.cc[1]}"
        try:
            p = self.problem(sub)
            gc.tail_of(sub, p.epi.out, ctx)
        except gc.Reject as e:
            return e.status, e.reason
        return OK

    # ---------------------------------------------------------------- knobs
    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0, len(TILES) - 1, 1, 0, tuple(t.label for t in TILES)),
                KnobSpec(K.CUDNN_KNOB_TYPE_STAGES, 2, 4, 1, TILES[0].stages),
                KnobSpec(K.CUDNN_KNOB_TYPE_SWIZZLE, 1, 8, 1, 8),
                KnobSpec(K.CUDNN_KNOB_TYPE_EDGE, 1, 1, 1, 1, ("predicated M / N edges, zero-filled K tail",)))

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        sw = cfg.get(K.CUDNN_KNOB_TYPE_SWIZZLE)
        if sw & (sw - 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: SWIZZLE = {sw} is not a power of 2"
        ok, why = check(tc_config(cfg))
        if not ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}"
        return OK

    def config_notes(self, sub, cfg):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return self.numerical_notes
        notes = self.numerical_notes + ((NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,) if p.tc_tf32 else ())
        return tuple(dict.fromkeys(notes + gc.tail_notes(sub, p.epi.out)))

    def candidates(self, sub, ctx):
        """One config per useful tile (its STAGES, SWIZZLE 8 when several tile rows), cheapest first."""
        try:
            p = self.problem(sub)
        except gc.Reject:
            return ()
        base = self.default_config(sub)
        idx = [i for i, t in enumerate(TILES)
               if t.cfg.BLOCK_M <= 2 * max(p.M, 16) and t.cfg.BLOCK_N <= 2 * max(p.N, 16)] or [len(TILES) - 1]
        if simulator_enabled() and p.M * p.N * p.nb <= SIM_SMALL_OUTPUT:
            def work(i):
                c = TILES[i].cfg
                return gc.gc_tiles(p.M, p.N, c.BLOCK_M, c.BLOCK_N) * c.threads * gc.ceil_div(p.K, c.BLOCK_K)
            idx = sorted(idx, key=work)[:1]
        out = []
        for i in idx:
            t = TILES[i]
            sw = 8 if gc.ceil_div(p.M, t.cfg.BLOCK_M) > 8 else 1
            out.append(base.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, i).with_knob(K.CUDNN_KNOB_TYPE_STAGES, t.stages)
                       .with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, sw))
        out = [c for c in out if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
        dev = ctx.device if ctx is not None else None
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
        return gc.memo(sub, ("cost", self.name, cfg, device), lambda: self._cost(sub, cfg, device))

    def _cost(self, sub, cfg, device):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return math.inf
        tile = TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
        c = tc_config(cfg)
        smem = smem_bytes(c)     # TF32: the same bytes (half the k extent in 4-byte elements)
        if smem > device.smem_per_block:
            return math.inf
        per_sm = max(H.blocks_per_sm(device, c.threads, tile.regs, smem), 1)
        eff = tile.eff / H.occupancy_factor(per_sm, c.threads)   # gemm_time applies the occupancy
        if c.GROUP_M == 1 and gc.ceil_div(p.M, c.BLOCK_M) > 8:
            eff /= gc.SWIZZLE_GAIN
        if c.STAGES == 2:
            eff *= 0.8
        return H.gemm_time(device, p.M, p.N, p.K, batch=p.nb, tile=(c.BLOCK_M, c.BLOCK_N), threads=c.threads,
                           regs=tile.regs, smem=smem, in_bytes=p.in_bytes, out_bytes=p.out_bytes,
                           peak="tf32" if p.tc_tf32 else "bf16",
                           extra_bytes=p.extra_bytes, compute_eff=min(eff, 1.0)) + gc.tail_time(sub, p.epi.out)

    # ---------------------------------------------------------------- build
    def build(self, sub, cfg, ctx):
        p = self.problem(sub)
        c = tc_config(cfg)
        if p.tc_tf32:   # BLOCK_K of the tile counts 16-bit halves: the kernel's k tile is half as many FP32
            c = c.replace(BLOCK_K=c.BLOCK_K // 2)
        out_dt, bias_dt, res_dt = p.dtypes[2], p.dtypes[3], p.dtypes[4]
        kern = make_tc_gemm(c, p.tc_a_kmajor, p.tc_b_kmajor, p.dtypes[0], out_dt, epi=p.epi.spec,
                            bias_dtype=bias_dt, res_dtype=res_dt)
        tf = gc.typing_flat
        op_t = "bfloat16" if p.tc_tf32 else p.dtypes[0]      # TF32 operands travel as 16-bit halves
        K_, a_st, b_st = _halves(p)
        typing = fused_args(kern, tf(op_t), tf(op_t), tf(out_dt), tf(bias_dt), tf(res_dt),
                            p.M, p.N, K_, p.batch, a_st, b_st, p.c_strides)
        key = gc.key_text("tc_gemm", c, p.tc_a_kmajor, p.tc_b_kmajor, p.dtypes, kern.epi)
        ck = kcache.get_or_compile(key, lambda: kern.kernel, gc.argtypes(typing))
        return TcPlan(self, sub, cfg, p, kern, ck, self.workspace_size(sub, cfg),
                      tail=gc.tail_build(sub, p.epi.out, ctx))


class TcPlan(gc.BlockPlan):
    """One cuLaunchKernel of the fused tensor-core kernel (plus the tail's plan, if any)."""

    def _own(self, views, scratch):
        p, kern = self.p, self.kern
        e = p.epi
        a, b = gc.flat(views[p.A.uid], p.A), gc.flat(views[p.B.uid], p.B)
        if p.tc_tf32:   # FP32 storage as 16-bit halves
            a, b = (gc.Flat(f.ptr, 2 * f.shape[0], np.uint16) for f in (a, b))
        K_, a_st, b_st = _halves(p)
        for port, f in (("A", a), ("B", b)):
            if f.ptr % 16:
                raise BadParamError(f"matmul_tc: {port} at {f.ptr:#x} is not 16-byte aligned (the plan's "
                                    "cp.async loads need it)", S.CUDNN_STATUS_BAD_PARAM)
        out = gc.flat(views[e.out.uid], e.out)
        bias = gc.flat(views[e.bias.uid], e.bias) if e.bias is not None else out
        res = gc.flat(views[e.residual.uid], e.residual) if e.residual is not None else out
        alpha = gc.alpha_of(e, views, p.alpha, self.sub)
        args = fused_args(kern, a, b, out, bias, res, p.M, p.N, K_, p.batch, a_st, b_st, p.c_strides, p.bias_strides, p.res_strides or (0, 0, 0, 0), alpha, p.beta)
        return [self.bl.prepare(fused_grid(kern, p.M, p.N, p.batch), kern.cfg.threads, args, kern.smem)]
