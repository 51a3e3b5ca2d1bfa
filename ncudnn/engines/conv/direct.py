"""Engine "conv_direct": convolution forward as a direct convolution (:mod:`ncudnn.kernels.conv.direct`),
one thread per output element, for depthwise convolutions (groups == C, any channel multiplier) and
tiny channel counts: problems whose per-output reduction C/G*T*R*S is at most ``MAX_REDUCTION``.
1-3 spatial dims, any stride / padding / dilation, both modes, any element strides (NHWC: channels
innermost, coalesced). Fuses the conv epilogue of the implicit-GEMM engines (alpha / beta, bias
per channel, pointwise chain, one residual). Knob: BLOCK_SIZE. No workspace.

Refused with a reason: dgrad / wgrad, a reduction longer than ``MAX_REDUCTION``, alpha taken from
a by-value tensor, a trailing reduction (genstats) after the epilogue.
"""
import math

from numba import types

from ...kernels.conv.direct import make_direct_fprop
from ...types import cudnnBackendKnobType_t, cudnnBackendLayoutType_t, cudnnStatus_t
from ..gemm import common as gc
from .. import heuristics as H
from ..base import OK, Engine, KnobSpec
from .common import conv_problem
from ..membound.common import Arg, MemPlan, Step, src_key
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t

#: longest per-output reduction (C/G * taps) offered: past it an implicit GEMM reuses operands better
MAX_REDUCTION = 512
#: fraction of the FP32 FMA peak a thread-per-output direct conv reaches (two L1 loads per FMA):
#: estimates, not measured yet; with more than one channel per group the implicit GEMM reuses its
#: operands from shared memory, so the direct kernel is ranked after it there unless measured faster
DIRECT_EFF = 0.1
DIRECT_EFF_GROUPED = 0.02
BLOCKS = (256, 128)


@register
class ConvDirectEngine(Engine):
    name = "conv_direct"
    kinds = ("conv_fprop",)
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NHWC

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        try:
            p = conv_problem(sub)
        except gc.Reject as e:
            return e.status, e.reason
        node = p.node
        red = p.g.Cg * p.g.taps
        if red > MAX_REDUCTION:
            return S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"node '{node.name}': W: C/groups*T*R*S = {red} > " \
                f"{MAX_REDUCTION} (conv_direct is for depthwise and tiny channel counts)"
        if p.epi.alpha_scalars:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': alpha from a by-value tensor is not " \
                "supported by conv_direct"
        if sub.tail is not None:
            return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"node '{sub.tail.name}': conv_direct does not " \
                "run a trailing reduction"
        return OK

    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 64, 512, 64, BLOCKS[0]),)

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE)
        if st == S.CUDNN_STATUS_SUCCESS and b & (b - 1):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: BLOCK_SIZE {b} is not a power of 2"
        return st, why

    def candidates(self, sub, ctx):
        """One config per block size in BLOCKS (the same for every problem: made once)."""
        hit = self.__dict__.get("_candidates_all")
        if hit is None:
            base = self.default_config(sub)
            hit = self.__dict__["_candidates_all"] = tuple(base.with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b)
                                                           for b in BLOCKS)
        return hit

    def workspace_size(self, sub, cfg):
        try:
            return gc.vector_workspace(conv_problem(sub).epi, 0)
        except gc.Reject:
            return 0

    def cost(self, sub, cfg, device):
        try:
            p = conv_problem(sub)
        except gc.Reject:
            return math.inf
        g = p.g
        outs = g.N * g.K * math.prod(g.OPQ)
        flops = 2.0 * outs * g.Cg * g.taps / (DIRECT_EFF if g.Cg == 1 else DIRECT_EFF_GROUPED)
        nbytes = (g.N * g.C * math.prod(g.DHW) + g.K * g.Cg * g.taps) * p.in_bytes + outs * p.out_bytes \
            + p.extra_bytes
        b = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, BLOCKS[0])
        return H.kernel_time(device, flops=flops, nbytes=nbytes, threads=b, regs=40, blocks=-(-outs // b)) \
            * (1.0 + abs(b - 256) / 1e4)

    def build(self, sub, cfg, ctx):
        p = conv_problem(sub)
        e = p.epi
        kern = make_direct_fprop(p.g, p.dtypes, e.spec, p.bias_stride, p.res_strides)
        block = cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, BLOCKS[0])
        out_dt = kern.dtypes[2]
        ws = self.workspace_size(sub, cfg)
        bias = Arg.tensor(e.bias) if e.bias is not None else Arg.dummy(out_dt)
        if isinstance(e.bias, gc.PackedVectors):        # filled by the plan's pack launches
            bias = Arg.scratch(gc.pack_offset(e, ws), e.bias.span_elements(), gc.kdtype(e.bias))
        args = [Arg.tensor(p.x), Arg.tensor(p.w), Arg.tensor(p.y),
                bias,
                Arg.tensor(e.residual) if e.residual is not None else Arg.dummy(out_dt),
                Arg.const(float(p.alpha), types.float64), Arg.const(float(p.beta), types.float64)]
        step = Step("conv_direct:" + src_key(kern.src, kern.spec, kern.dtypes), lambda: kern.kernel,
                    kern.grid(block), block, args, name="conv_direct")
        return _DirectPlan(self, sub, cfg, [step], ws)


class _DirectPlan(MemPlan):
    """The direct conv's launch, after the pack launches of two or more broadcast operands (if any)."""

    def launches(self, views, scratch):
        epi = conv_problem(self.sub).epi
        views, pre = gc.pack_launches(epi, views, scratch, self.workspace_size)
        return pre + super().launches(views, scratch)
