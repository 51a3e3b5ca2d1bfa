"""Engine "conv_tc": implicit-GEMM 2-D convolution fprop on tensor cores (BF16 / FP16 / FP32 in, FP32
accumulate, BF16 / FP16 / FP32 out), NHWC activations, KRSC filters, with the subgraph's pointwise
chain (bias per channel, activation, residual) in the fused epilogue.

FP32 x and w run as TF32 (m16n8k8 tf32: the mma ignores the low 13 mantissa bits of each operand; notes
TENSOR_CORE + DOWN_CONVERT_INPUTS, as matmul_tc) only when the build context allows TF32 (pygraph: the
graph selects one of those notes; legacy: CUDNN_TENSOR_OP_MATH / _ALLOW_CONVERSION), refused with a reason
otherwise. The kernel reads their storage as 16-bit halves: C, the strides and the GEMM K count halves, a
16-byte chunk is 4 channels (C % 4 == 0, or packed and padded to a multiple of 4), and the tile's BLOCK_K
halves are BLOCK_K / 2 channels (v4 where C % (BLOCK_K / 2) == 0).

Kernel: :mod:`ncudnn.kernels.tc_conv` (the tc_gemm mainloop with a cp.async gather from the image; mainloop
v3 by default, v4 (one filter tap per k tile) where C % BLOCK_K == 0, v1 through the KERNEL_CFG knob).
Knobs (cudnnBackendKnobType_t): TILE_SIZE indexes :data:`TILES`, STAGES (2-4), SWIZZLE (GROUP_M 1 or
8), EDGE fixed (predicated edges, zero-filled padding), SPLIT_K (1-6: the k tiles split over grid y, fp32
partials in the workspace, then the ordered reduce of :mod:`ncudnn.kernels.tc_conv.splitk` applies the
epilogue once; deterministic; ranked while the unsplit grid is under one wave, e.g. batch-1 7x7 / 14x14
layers). The cost (``_cost``) counts the busiest SM's CTAs at per-SM rates measured on the H200, so small
grids take the small tiles (ResNet c5 / c4 at N = 32: 64x64). Refused with a reason: dgrad / wgrad, groups,
3-D, CONVOLUTION mode (flipped filter), NCHW activations, C % 8 != 0 (FP32: C % 4) unless x and w are packed
(then they are zero-padded to a multiple of 8 (4) channels in the workspace first: the stem), non-KRSC filters,
output or residual rows that are not ``m * stride`` over the (n, p, q) pixels, math types without tensor cores,
FP32 x / w where TF32 is not allowed.
"""
import math

import numpy as np

from ...kernels.runtime import kcache
from ...kernels.tc_conv import check_conv, conv_args, conv_grid, make_tc_conv_fprop
from ...kernels.tc_conv.fprop import halves_per_element, kernel_dtype
from ...kernels.tc_conv.pad import PAD_THREADS, make_pad_channels, pad_grid
from ...kernels.tc_conv.splitk import (make_split_reduce, make_split_reduce_vec, partial_args, reduce_args,
                                      reduce_launch, vec_args, vec_launch, workspace_bytes)
from ...types import cudnnBackendKnobType_t, cudnnBackendLayoutType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from ...kernels.tc_gemm import smem_bytes
from ..gemm import common as gc
from .. import heuristics as H
from .common import conv_problem
from ..base import OK
from ..registry import register
from ..gemm.tc_base import HALF, TcEngineBase, check_aligned, epilogue_flats, tile_config
from ..gemm.tc_base import tile as _t

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t

#: block tiles, best first for large problems (256x128 spilled in the sm_90 compile check: left out); the
#: last is the simulator's. rate1 / rate: TFLOP/s of one SM with one / several resident CTAs, fitted to
#: experiments/probe_tc_splitk.py on an H200 (BF16 NHWC 3x3 conv + bias + relu, N = 32, mainloop v4; the
#: figures: dev/perf_notes.md); the 32x32 rates are a guess. eff: the generic estimate (unused by conv_tc's cost)
TILES = (
    _t(128, 128, 32, 2, 4, 0.24, 168, 4, rate1=1.5, rate=1.5),
    _t(128, 256, 32, 2, 4, 0.22, 255, 3, rate1=1.4, rate=1.4),
    _t(128, 64, 32, 2, 2, 0.20, 170, 4, rate1=1.09, rate=1.38),
    _t(64, 64, 32, 2, 2, 0.16, 126, 4, rate1=1.1, rate=1.3),
    _t(64, 128, 32, 2, 2, 0.20, 164, 4, rate1=1.14, rate=1.47),
    _t(32, 32, 32, 2, 2, 0.07, 64, 2, rate1=0.3, rate=0.3),
)
#: outputs a second the split-K reduce (kernels/gemm/splitk.make_reduce, one thread an output) finishes on
#: an H200 (experiments/probe_tc_splitk.py)
REDUCE_OUTPUTS_PER_S = 50e9
#: the same for the vector reduce (K % 4 == 0), within its rates at 2-6 slices on an H200 (dev/perf_notes.md)
VEC_REDUCE_OUTPUTS_PER_S = 150e9
#: seconds each round of resident CTAs a split adds on an SM (prologue / epilogue of short CTAs), below the fit
#: of c5 at 128x128, split 1-6 on an H200 (dev/perf_notes.md, "Conv on tensor cores")
ROUND_OVERHEAD = 10e-6


#: split-K reduces through kernels/tc_conv/splitk.make_split_reduce_vec where K % 4 == 0 (else the generic one)
VECTOR_REDUCE = True
#: convolutions with C % 8 != 0 (FP32: C % 4; packed NHWC x, KRSC w): zero-pad their channels in the workspace,
#: then convolve
PAD_CHANNELS = True
#: run the v4 mainloop (one filter tap per k tile, kernels/tc_gemm/__init__.py) where C % BLOCK_K == 0
ONE_TAP_GATHER = True


def tc_config(cfg):
    return tile_config(TILES, cfg)


def _rows(dims, strides, what):
    """The row stride ``ld`` such that pixel (n, p, q) sits at ``m * ld`` (m = (n * P + p) * Q + q), or
    raise Reject. ``dims`` / ``strides``: (N, P, Q) sizes and element strides."""
    (n, p, q), (sn, sp, sq) = dims, strides
    ld = sq if q > 1 else (sp // max(q, 1) if p > 1 else (sn // max(p * q, 1)))
    ok = (q == 1 or sq == ld) and (p == 1 or sp == q * ld) and (n == 1 or sn == p * q * ld)
    if not ok:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{what}: strides (n, p, q) = {strides} are not "
                        "one row stride over the output pixels (NHWC-like)")
    return ld


class _TcConv:
    """The conv subgraph as one tc_conv launch: ConvProblem (the subgraph's shared one, which the
    implicit-GEMM engines read too) plus the kernel's layout facts."""

    def __init__(self, sub):
        cp = conv_problem(sub)
        self.pad = False
        self.cp, self.epi = cp, cp.epi
        node, g = cp.node, cp.g
        where = f"node '{node.name}'"
        if cp.kind != "fprop":
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: conv_tc runs fprop only, not {cp.kind}")
        x_dt, w_dt, out_dt = cp.dtypes[:3]
        #: FP32 x and w run as TF32 (the kernel reads their storage as 16-bit halves, ``hw`` an element)
        self.tf32 = x_dt == w_dt == "float32"
        if (x_dt not in HALF and not self.tf32) or w_dt != x_dt:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{where}: x {x_dt} / w {w_dt}: tensor "
                            "cores need both bfloat16, both float16 or both float32 (TF32)")
        if out_dt not in HALF + ("float32",):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{where}: output {out_dt}")
        if g.G != 1:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: groups = {g.G} (conv_tc: 1 group)")
        if g.DHW[0] != 1 or g.TRS[0] != 1:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: 3-D convolution (conv_tc: 1-D / 2-D)")
        if g.flip:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: CONVOLUTION mode (flipped filter); "
                            "conv_tc runs CROSS_CORRELATION")
        hw = self.hw = halves_per_element(x_dt)
        chunk = 8 // hw     # channels a 16-byte cp.async chunk holds: 8 halves, 4 FP32
        xs, ws = g.x_strides, g.w_strides
        R, S_ = g.TRS[1], g.TRS[2]
        C, H, W = g.C, g.DHW[1], g.DHW[2]
        self.Cp = C
        if PAD_CHANNELS and C % chunk and sub.tail is None and xs[1] == 1 \
                and (xs[4], xs[3], xs[0]) == (C, W * C, H * W * C) \
                and (ws[1], ws[4], ws[3], ws[0]) == (1, C, S_ * C, R * S_ * C):
            # packed NHWC x and KRSC w with C % chunk != 0 (the stem): zero-padded to Cp channels in the workspace
            self.pad, self.Cp = True, -(-C // chunk) * chunk
            Cp = self.Cp
            xs, ws = (H * W * Cp, 1, 0, W * Cp, Cp), (R * S_ * Cp, 1, 0, S_ * Cp, Cp)
        ok, why = check_conv(self.Cp, g.K, (xs[0], xs[1], xs[3], xs[4]), (ws[0], ws[1], ws[3], ws[4]), chunk=chunk)
        if ok and R > 1 and ws[3] != S_ * self.Cp:
            ok, why = False, f"w r stride {ws[3]} != S * C = {S_ * self.Cp} (KRSC)"
        if not ok:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: {why}")
        # what the kernel is passed, in its elements (16-bit halves for FP32): channels, the (n, h, w) strides
        # of the image it reads and the filter's k stride
        self.Ck = self.Cp * hw
        self.x_strides = (xs[0] * hw, xs[3] * hw, xs[4] * hw)
        self.w_k = ws[0] * hw
        for port, t in (("x", cp.x), ("w", cp.w)):
            if t.alignment < 16 and not self.pad:
                raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{where}: {port}: byte alignment "
                                f"{t.alignment} < 16")
        P, Q = g.OPQ[1], g.OPQ[2]
        ys = g.y_strides
        self.ldc_m = _rows((g.N, P, Q), (ys[0], ys[3], ys[4]), f"{where}: output {cp.y.label}")
        self.ldc_n = ys[1]
        self.res_m = self.res_n = 0
        if cp.res_strides is not None:
            rs = cp.res_strides
            self.res_m = _rows((g.N, P, Q), (rs[0], rs[3], rs[4]), f"{where}: residual")
            self.res_n = rs[1]
        self.M, self.N = cp.gemm[:2]
        #: the kernel's GEMM K (R * S * Ck: halves for TF32, so k tiles and split-K slices count what it runs)
        self.K = R * S_ * self.Ck
        self.P, self.Q, self.R, self.S = P, Q, R, S_
        self.pad_bytes = (0, 0)
        if self.pad:
            esz = gc.bytes_of(x_dt)
            self.pad_bytes = (_round256(g.N * H * W * self.Cp * esz), _round256(g.K * R * S_ * self.Cp * esz))


def _round256(n):
    return -(-n // 256) * 256


@register
class ConvTcEngine(TcEngineBase):
    name = "conv_tc"
    kinds = ("conv_fprop", "conv_dgrad", "conv_wgrad")
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NHWC
    TILES = TILES
    PROBLEM_MEMO = "_conv_problem"
    EDGE_LABEL = "predicated edges, zero-filled padding"
    #: (8 and more slices would take the wide reduce, several times slower for c5: not offered)
    SPLITS = (1, 2, 3, 4, 5, 6)

    def _problem(self, sub):
        return _TcConv(sub)

    def gemm_shape(self, p):
        return p.M, p.N, p.K, 1

    def cost_terms(self, p):
        """Input bytes per element of the kernel's K (a 16-bit half for TF32: gemm_shape's K counts halves),
        output bytes, epilogue and padding bytes; the peak is the BF16 one either way (a TF32 k tile of
        BLOCK_K halves is BLOCK_K / 2 channels at half the BF16 rate: the same time per k tile)."""
        cp = p.cp
        extra = cp.extra_bytes
        if p.pad:   # the padding pass: read x and w, write their padded copies
            g = cp.g
            extra += sum(p.pad_bytes) + (g.N * g.DHW[1] * g.DHW[2] + g.K * p.R * p.S) * g.C * cp.in_bytes
        return cp.in_bytes // p.hw, cp.out_bytes, extra, "bf16"

    def _support_pre(self, sub, ctx):
        try:
            tf32 = self.problem(sub).tf32
        except gc.Reject:
            tf32 = False
        if tf32 and ctx is not None and not ctx.allow_tf32:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: FP32 x / w need TF32, and the math type " \
                "does not allow down-converting inputs"
        return OK

    def extra_notes(self, p):
        return (NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,) if p.tf32 else ()

    def _cost(self, sub, cfg, device):
        """Seconds: the busiest SM's CTAs (ceil(CTAs / SMs)) times a CTA's FLOPs over the tile's measured
        per-SM rate (rate1 with one CTA an SM, rate with more), or the DRAM bytes (operands, output,
        epilogue, split partials) over the bandwidth when more; plus the split-K reduce (its launch, outputs
        at REDUCE_OUTPUTS_PER_S) and the tail."""
        try:
            p = self.problem(sub)
        except gc.Reject:
            return math.inf
        t = self.TILES[cfg.get(K.CUDNN_KNOB_TYPE_TILE_SIZE, 0)]
        c = self.cost_config(p, cfg)
        if smem_bytes(c) > device.smem_per_block:
            return math.inf
        M, N, K_, B = self.gemm_shape(p)
        s = c.SPLIT_K
        tm = gc.ceil_div(M, c.BLOCK_M)
        ctas = tm * gc.ceil_div(N, c.BLOCK_N) * B * s
        per = gc.ceil_div(ctas, device.sm_count)
        ktiles = gc.ceil_div(gc.ceil_div(K_, c.BLOCK_K), s)
        rate = (t.rate1 if per == 1 else t.rate) * 1e12 * device.peak("bf16") / 989e12
        compute = per * 2.0 * c.BLOCK_M * c.BLOCK_N * ktiles * c.BLOCK_K / rate
        if s > 1:   # the rates hold the rounds of the unsplit grid; a split adds rounds of short CTAs
            per_sm = max(H.blocks_per_sm(device, c.threads, t.regs, smem_bytes(c)), 1)
            compute += (gc.ceil_div(per, per_sm) - gc.ceil_div(gc.ceil_div(ctas // s, device.sm_count), per_sm)) \
                * ROUND_OVERHEAD
        if c.GROUP_M == 1 and tm > 8:
            compute *= gc.SWIZZLE_GAIN
        if c.STAGES == 2:
            compute /= 0.8
        in_b, out_b, extra, _ = self.cost_terms(p)
        dram = (M * K_ + N * K_) * B * in_b + M * N * B * out_b + extra + (2 * s * M * N * B * 4 if s > 1 else 0)
        sec = H.LAUNCH_OVERHEAD + max(compute, dram / device.mem_bandwidth)
        if s > 1:
            vec = VECTOR_REDUCE and N % 4 == 0
            sec += H.LAUNCH_OVERHEAD + M * N * B / (VEC_REDUCE_OUTPUTS_PER_S if vec else REDUCE_OUTPUTS_PER_S)
        return sec + gc.tail_time(sub, p.epi.out)

    def workspace_size(self, sub, cfg):
        try:
            p = self.problem(sub)
        except gc.Reject:
            return 0
        split = cfg.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1)
        return super().workspace_size(sub, cfg) + sum(p.pad_bytes) + _round256(workspace_bytes(p.M, p.N, split))

    def kernel_config(self, sub, cfg):
        """The kernel TcGemmConfig of ``cfg``: mainloop v3 becomes v4 (the one-tap gather) when the kernel's
        channels (halves for TF32: FP32 C a multiple of BLOCK_K / 2) are a multiple of BLOCK_K and
        :data:`ONE_TAP_GATHER` is on."""
        c = tc_config(cfg)
        if ONE_TAP_GATHER and c.VERSION == 3 and self.problem(sub).Ck % c.BLOCK_K == 0:
            c = c.replace(VERSION=4)
        return c

    def build(self, sub, cfg, ctx):
        p = self.problem(sub)
        c = self.kernel_config(sub, cfg)
        dts = p.cp.dtypes
        kern = make_tc_conv_fprop(c, dts[0], p.epi.spec, dts[3], dts[4])
        tf = gc.typing_flat
        split = c.SPLIT_K
        op_t = kernel_dtype(dts[0])     # TF32: FP32 x / w travel as uint16 halves
        if split > 1:   # the kernel writes fp32 partials (kern.cfg: SPLIT_K 2, shared by every split)
            typing = self._partial_args(p, kern, tf(op_t), tf(op_t), tf("float32"))
        else:
            typing = self._args(p, kern, tf(op_t), tf(op_t), tf(dts[2]), tf(dts[3]), tf(dts[4]), 1.0)
        key = gc.key_text("tc_conv_fprop", kern.cfg, dts, kern.epi)
        plan = self._plan(TcConvPlan, sub, cfg, ctx, p, kern, key, typing)
        plan.split, plan.reduce, plan.vec = split, None, VECTOR_REDUCE and p.N % 4 == 0
        if split > 1 and plan.vec:   # 16-byte partial loads, no index division
            red = make_split_reduce_vec(p.epi.spec, dts[3], dts[4])
            rt = vec_args(tf("float32"), split, tf(dts[2]), tf(dts[3]), tf(dts[4]), 1, 1, 1, 1)
            plan.reduce = kcache.get_or_compile(gc.key_text("tc_conv_split_reduce_vec", kern.epi, dts), lambda: red,
                                                gc.argtypes(rt))
        elif split > 1:
            red = make_split_reduce(p.epi.spec, dts[3], dts[4], split)
            rt = reduce_args(tf("float32"), split, tf(dts[2]), tf(dts[3]), tf(dts[4]), 1, 1, 1, 1)
            plan.reduce = kcache.get_or_compile(gc.key_text("tc_conv_split_reduce", red.py_func.__name__, kern.epi,
                                                            dts), lambda: red, gc.argtypes(rt))
        plan.padk = None
        if p.pad:
            st = gc.typing_flat(dts[0])
            plan.padk = kcache.get_or_compile(gc.key_text("tc_conv_pad_channels", dts[0]), make_pad_channels,
                                              gc.argtypes((st, st, np.int64(0), np.int64(0), np.int64(0))))
        return plan

    @staticmethod
    def _partial_args(p, kern, x, w, ws):
        g = p.cp.g
        return partial_args(kern, x, w, ws, g.N, p.Ck, g.DHW[1], g.DHW[2], g.K, p.P, p.Q, p.R, p.S, g.stride[1:],
                            g.pad[1:], g.dil[1:], p.x_strides, p.w_k)

    @staticmethod
    def _args(p, kern, x, w, y, bias, res, alpha):
        g, cp = p.cp.g, p.cp
        return conv_args(kern, x, w, y, bias, res, g.N, p.Ck, g.DHW[1], g.DHW[2], g.K, p.P, p.Q, p.R, p.S,
                         g.stride[1:], g.pad[1:], g.dil[1:], p.x_strides, p.w_k, p.ldc_m,
                         p.ldc_n, cp.bias_stride, p.res_m, p.res_n, alpha, cp.beta)


class TcConvPlan(gc.BlockPlan):
    """One cuLaunchKernel of the tensor-core conv kernel (plus the tail's plan, if any)."""

    def _own(self, views, scratch):
        p, kern = self.p, self.kern
        cp = p.cp
        x, w = gc.flat(views[cp.x.uid], cp.x), gc.flat(views[cp.w.uid], cp.w)
        g = cp.g
        pre = []
        if p.pad:   # zero-pad the channels of x and w into the workspace, then convolve the padded copies
            xp = gc.Flat(scratch.ptr, p.pad_bytes[0] // x.itemsize, x.dtype)
            wp = gc.Flat(scratch.ptr + p.pad_bytes[0], p.pad_bytes[1] // w.itemsize, w.dtype)
            for src, dst, pixels in ((x, xp, g.N * g.DHW[1] * g.DHW[2]), (w, wp, g.K * p.R * p.S)):
                n = pixels * p.Cp
                pre.append(self.padk.prepare(pad_grid(n), PAD_THREADS, (src, dst, np.int64(n), np.int64(g.C),
                                                                         np.int64(p.Cp)), 0))
            x, w = xp, wp
        if p.tf32:   # FP32 storage as 16-bit halves (the TF32 kernel's view)
            x, w = (gc.Flat(f.ptr, 2 * f.shape[0], np.uint16) for f in (x, w))
        check_aligned("conv_tc", (("x", x), ("w", w)))
        out, bias, res = epilogue_flats(p.epi, views)
        alpha = gc.alpha_of(p.epi, views, cp.alpha, self.sub)
        if self.split > 1:   # fp32 partials after the padded copies, then the reduce with the epilogue
            ws = gc.Flat(scratch.ptr + sum(p.pad_bytes), workspace_bytes(p.M, p.N, self.split) // 4, np.float32)
            args = ConvTcEngine._partial_args(p, kern, x, w, ws)
            grid = conv_grid(kern, g.N, p.P, p.Q, g.K, self.split)
            geo = (ws, self.split, out, bias, res, p.M, p.N, p.ldc_m, p.ldc_n, cp.bias_stride, p.res_m, p.res_n,
                   alpha, cp.beta)
            if self.vec:
                check_aligned("conv_tc", (("workspace", ws),), " (the split-K reduce's 16-byte loads need it)")
                rg, rt = vec_launch(p.M, p.N)
                red = self.reduce.prepare(rg, rt, vec_args(*geo), 0)
            else:
                rg, rt = reduce_launch(self.split, p.M, p.N)
                red = self.reduce.prepare((rg, 1, 1), (rt, 1, 1), reduce_args(*geo), 0)
            return pre + [self.bl.prepare(grid, kern.cfg.threads, args, kern.smem), red]
        args = ConvTcEngine._args(p, kern, x, w, out, bias, res, alpha)
        return pre + [self.bl.prepare(conv_grid(kern, g.N, p.P, p.Q, g.K), kern.cfg.threads, args, kern.smem)]
