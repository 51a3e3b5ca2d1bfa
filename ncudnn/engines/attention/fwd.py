"""Engine "attention_flash_fwd": an SDPA forward node (cudnn-frontend's ``sdpa``) as one
flash-attention kernel (:mod:`ncudnn.kernels.attention.fwd`): O and, for training, Stats.

Takes Q / K / V / O in FP16, BF16 or FP32 with any non-negative strides (BHSD, BSHD, interleaved QKV),
head dims multiples of 8 up to 256 (D_qk may differ from D_v), GQA / MQA, the scale by value, as a
pass-by-value tensor or in device memory, the diagonal band (causal top-left / bottom-right, sliding
window, left / right bounds), padding masks, an additive bias broadcast over any axis of extent 1 and
ALiBi, dropout (Philox; seed / offset pass-by-value). Refused with a reason: seed / offset in device
memory, ragged offsets. Knobs TILE_M / TILE_N / BLOCK_SIZE
(:class:`~ncudnn.kernels.attention.AttnConfig`); no workspace.
"""
import math

from ...kernels import attention as ka
from ...kernels.attention.fwd import fwd_grid, fwd_kernel
from ...types import cudnnStatus_t
from .. import heuristics as Hr
from ..base import OK, Engine
from ..membound.common import Arg, MemPlan, Step, src_key, written
from ..registry import register
from . import common as C

S = cudnnStatus_t
FWD_TENSORS = ("Q", "K", "V", "O", "STATS")


def _node(sub):
    return sub.nodes[0]


def flops(node):
    """4 B H Sq Skv D (the usual count; halved for a causal band), as the bench reports it."""
    B, H, _, SQ, SK, D, DV = C.dims(node)
    f = 2.0 * B * H * SQ * SK * (D + DV)
    _, _, right = node.band()
    return f / 2 if right == 0 else f


@register
class AttentionFlashFwd(Engine):
    name = "attention_flash_fwd"
    kinds = ("sdpa_fwd",)
    fallback = True

    def check_support(self, sub, ctx):
        st = C.check_engine(self, sub, ctx, FWD_TENSORS)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        node = _node(sub)
        _, _, _, _, _, d, dv = C.dims(node)
        if ka.default_config(d, dv) is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: no tile config fits head dims {d} / {dv}"
        return OK

    def knobs(self, sub):
        return C.KNOBS

    def default_config(self, sub):
        if sub is None:
            return super().default_config(sub)
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return C.config_of(self.name, ka.default_config(d, dv))

    def configs(self, sub, ctx):
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return [C.config_of(self.name, c) for c in ka.configs(d, dv)]

    def candidates(self, sub, ctx):
        """The default config and the kernel layer's shortlist (the autotuner searches :meth:`configs`)."""
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return tuple(C.config_of(self.name, c) for c in ka.shortlist(d, dv))

    def candidates_key(self, sub):
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return ("fwd", d, dv)

    def keep(self, sub, cfg, ctx):
        st = super().keep(sub, cfg, ctx)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        ok, why = ka.keep(C.cfg_of(cfg), d, dv)
        return OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}")

    def cost(self, sub, cfg, device):
        node = _node(sub)
        c = C.cfg_of(cfg)
        B, H, _, SQ, SK, D, DV = C.dims(node)
        nbytes = sum(math.prod(t.dims) * t.itemsize for t in node.tensors() if not t.is_by_value)
        grid = fwd_grid(c, B, H, SQ)
        return Hr.kernel_time(device, flops=flops(node), nbytes=nbytes, blocks=grid[0] * grid[1] * grid[2],
                              threads=c.THREADS, regs=64, smem=ka.smem_bytes(c, D, DV))

    @staticmethod
    def kernel_args(sub):
        """The launch arguments of a forward kernel (``FWD_ARGS`` order), shared by attention_tc_fwd."""
        node = _node(sub)
        ins, outs = node.inputs, node.outputs
        stats = written(sub, outs.get("STATS"))
        scale_arr, scale = C.scale_args(node)
        bias, bias_st = C.bias_args(node)
        args = [Arg.tensor(ins["Q"]), Arg.tensor(ins["K"]), Arg.tensor(ins["V"]), Arg.tensor(outs["O"]),
                C.opt_tensor(stats), bias, *C.seq_args(node), scale_arr, *C.sizes(node),
                *C.strides4(ins["Q"]), *C.strides4(ins["K"]), *C.strides4(ins["V"]), *C.strides4(outs["O"]),
                *(C.strides4(stats)[:3] if stats is not None else [Arg.const(0)] * 3), *bias_st, scale,
                *C.band_args(node), *C.dropout_args(node)]
        return args

    def step(self, sub, cfg):
        node = _node(sub)
        c = C.cfg_of(cfg)
        spec = C.spec_of(node, sub, backward=False)
        B, H, _, SQ, _, _, _ = C.dims(node)
        args = self.kernel_args(sub)
        return Step("attn_fwd:" + src_key(spec, c), lambda: fwd_kernel(spec, c), fwd_grid(c, B, H, SQ),
                    c.THREADS, args, name="attn_fwd")

    def build(self, sub, cfg, ctx):
        return MemPlan(self, sub, cfg, [self.step(sub, cfg)], 0)
