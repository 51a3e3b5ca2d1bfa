"""Engine "attention_flash_bwd": an SDPA backward node (cudnn-frontend's ``sdpa_backward``) as the
deterministic flash-attention backward of :mod:`ncudnn.kernels.attention.bwd`: Dr = rowsum(dO O), one
dK/dV pass over key tiles, one dQ pass over query tiles, and (with dBias) a fixed-order reduction of dS
over the bias's broadcast axes. No atomics: every config is deterministic, so
``use_deterministic_algorithm`` is always met.

Takes what the forward engine takes (see ``fwd.py``), P recomputed from the forward's Stats. Workspace:
Dr (B H Sq float32) and, for dBias, dS (B H Sq Skv float32).
"""
import math

from ...kernels import attention as ka
from ...kernels.attention.bwd import (DBIAS_THREADS, DOT_THREADS, dbias_kernel, dkdv_kernel, dot_kernel,
                                      dq_kernel)
from ...types import cudnnStatus_t
from .. import heuristics as Hr
from ..base import OK, Engine
from ..membound.common import Arg, MemPlan, Scratch, Step, src_key, written
from ..registry import register
from . import common as C
from .fwd import flops as fwd_flops

S = cudnnStatus_t
BWD_TENSORS = ("Q", "K", "V", "O", "DO", "STATS", "DQ", "DK", "DV")


def _node(sub):
    return sub.nodes[0]


@register
class AttentionFlashBwd(Engine):
    name = "attention_flash_bwd"
    kinds = ("sdpa_bwd",)
    fallback = True

    def check_support(self, sub, ctx):
        st = C.check_engine(self, sub, ctx, BWD_TENSORS)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        node = _node(sub)
        if node.inputs["STATS"].is_by_value or tuple(node.inputs["STATS"].dims[:3]) != tuple(node.inputs["Q"].dims[:3]):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: node '{node.name}': STATS: dims " \
                f"{tuple(node.inputs['STATS'].dims)} are not [B, H, S_q, 1]"
        db = node.outputs.get("DBIAS")
        if db is not None and db.dims[3] == 1 and node.inputs["K"].dims[2] > 1:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: node '{node.name}': DBIAS: a bias broadcast " \
                "over the keys (last dim 1) has no gradient kernel"
        _, _, _, _, _, d, dv = C.dims(node)
        if ka.default_config(d, dv, backward=True) is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: no tile config fits head dims {d} / {dv}"
        return OK

    def knobs(self, sub):
        return C.KNOBS

    def default_config(self, sub):
        if sub is None:
            return super().default_config(sub)
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return C.config_of(self.name, ka.default_config(d, dv, backward=True))

    def configs(self, sub, ctx):
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return [C.config_of(self.name, c) for c in ka.configs(d, dv, backward=True)]

    def candidates(self, sub, ctx):
        """The default config and the kernel layer's shortlist (the autotuner searches :meth:`configs`)."""
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return tuple(C.config_of(self.name, c) for c in ka.shortlist(d, dv, backward=True))

    def candidates_key(self, sub):
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        return ("bwd", d, dv)

    def keep(self, sub, cfg, ctx):
        st = super().keep(sub, cfg, ctx)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        _, _, _, _, _, d, dv = C.dims(_node(sub))
        ok, why = ka.keep(C.cfg_of(cfg), d, dv, backward=True)
        return OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}")

    def _layout(self, sub):
        """(Scratch, dr arg, ds arg or None) of the workspace."""
        node = _node(sub)
        B, H, _, SQ, SK, _, _ = C.dims(node)
        sc = Scratch()
        dr = sc.take(B * H * SQ, "float32")
        ds = sc.take(B * H * SQ * SK, "float32") if written(sub, node.outputs.get("DBIAS")) is not None else None
        return sc, dr, ds

    def workspace_size(self, sub, cfg):
        return self._layout(sub)[0].size

    def cost(self, sub, cfg, device):
        node = _node(sub)
        c = C.cfg_of(cfg)
        B, H, HK, SQ, SK, D, DV = C.dims(node)
        nbytes = sum(math.prod(t.dims) * t.itemsize for t in node.tensors() if not t.is_by_value)
        blocks = math.ceil(SK / c.BLOCK_N) * HK * B + math.ceil(SQ / c.BLOCK_M) * H * B
        return Hr.kernel_time(device, flops=2.5 * fwd_flops(node), nbytes=2 * nbytes, blocks=blocks,
                              threads=c.THREADS, regs=96, smem=ka.smem_bytes(c, D, DV, True), launches=3)

    @staticmethod
    def dot_step(node, spec, dr):
        """The Dr = rowsum(dO O) launch (shared by attention_tc_bwd)."""
        B, H, _, SQ, SK, _, _ = C.dims(node)
        ins = node.inputs
        return Step("attn_bwd_dot:" + src_key(spec), lambda: dot_kernel(spec), (math.ceil(SQ / DOT_THREADS), H, B),
                    DOT_THREADS, [Arg.tensor(ins["O"]), Arg.tensor(ins["DO"]), dr, *C.seq_args(node),
                                  *[Arg.const(int(x)) for x in (B, H, SQ, SK)], *C.strides4(ins["O"]),
                                  *C.strides4(ins["DO"])], name="attn_bwd_dot")

    @staticmethod
    def kernel_args(node, dr, ws, out1, out2):
        """The launch arguments of a dK/dV or dQ kernel (``BWD_ARGS`` order), shared by attention_tc_bwd."""
        ins = node.inputs
        scale_arr, scale = C.scale_args(node)
        bias, bias_st = C.bias_args(node)
        return [Arg.tensor(ins["Q"]), Arg.tensor(ins["K"]), Arg.tensor(ins["V"]), Arg.tensor(ins["DO"]),
                Arg.tensor(ins["STATS"]), dr, bias, *C.seq_args(node), scale_arr, Arg.tensor(out1),
                Arg.tensor(out2), ws, *C.sizes(node), *C.strides4(ins["Q"]), *C.strides4(ins["K"]),
                *C.strides4(ins["V"]), *C.strides4(ins["DO"]), *C.strides4(ins["STATS"])[:3], *bias_st,
                *C.strides4(out1), *C.strides4(out2), scale, *C.band_args(node), *C.dropout_args(node)]

    def steps(self, sub, cfg):
        node = _node(sub)
        c = C.cfg_of(cfg)
        spec = C.spec_of(node, sub, backward=True)
        B, H, HK, SQ, SK, _, _ = C.dims(node)
        ins, outs = node.inputs, node.outputs
        _, dr, ds = self._layout(sub)
        seq = C.seq_args(node)
        steps = [self.dot_step(node, spec, dr)]
        ws = ds if ds is not None else Arg.dummy("float32")

        def args(out1, out2):
            return self.kernel_args(node, dr, ws, out1, out2)

        steps.append(Step("attn_bwd_dkdv:" + src_key(spec, c), lambda: dkdv_kernel(spec, c),
                          (math.ceil(SK / c.BLOCK_N), HK, B), c.THREADS, args(outs["DK"], outs["DV"]),
                          name="attn_bwd_dkdv"))
        steps.append(Step("attn_bwd_dq:" + src_key(spec, c), lambda: dq_kernel(spec, c),
                          (math.ceil(SQ / c.BLOCK_M), H, B), c.THREADS, args(outs["DQ"], outs["DQ"]),
                          name="attn_bwd_dq"))
        db = written(sub, outs.get("DBIAS"))
        if db is not None:
            n = math.prod(db.dims)
            steps.append(Step("attn_bwd_dbias:" + src_key(spec), lambda: dbias_kernel(spec),
                              max(1, math.ceil(n / DBIAS_THREADS)), DBIAS_THREADS,
                              [ds, Arg.tensor(db), *seq, *[Arg.const(int(x)) for x in (B, H, SQ, SK)],
                               *[Arg.const(int(x)) for x in db.dims], *[Arg.const(int(s)) for s in db.strides],
                               *C.band_args(node)], name="attn_bwd_dbias"))
        return steps

    def build(self, sub, cfg, ctx):
        return MemPlan(self, sub, cfg, self.steps(sub, cfg), self.workspace_size(sub, cfg))
