"""Engine "attention_tc_bwd": an SDPA backward node on tensor cores (:mod:`ncudnn.kernels.attention.tc_bwd`:
mma.sync m16n8k16, P and dS rounded to the input type between the products, FP32 accumulation), deterministic:
Dr = rowsum(dO O), then one dK/dV kernel over key tiles (a dK and a dV kernel at head dim 128) and one dQ
kernel over query tiles, no atomics.

Takes what ``attention_flash_bwd`` takes when Q, K and V are all FP16 or all BF16, both head dims are
multiples of 16 up to 128 and there is no dropout and no bias gradient (those run on ``attention_flash_bwd``).
Knobs TILE_N (query rows / keys a streamed tile: 16 / 32 / 64) and BLOCK_SIZE (64, 128 or 256 threads, 16
keys or query rows a warp). Workspace: Dr (B H S_q float32). Notes: TENSOR_CORE.
"""
import math

from ...kernels.attention.tc_bwd import (TcBwdConfig, split_dkdv, tc_bwd_check, tc_bwd_configs, tc_bwd_default,
                                         tc_bwd_smem_bytes, tc_dkdv_grid, tc_dkdv_kernel, tc_dq_grid, tc_dq_kernel)
from ...kernels.attention.tc_fwd import tc_dtypes_check
from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from .. import heuristics as Hr
from ..base import OK, KnobSpec
from ..membound.common import Arg, MemPlan, Scratch, Step, kdtype, src_key, written
from ..registry import register
from . import common as C
from .bwd import BWD_TENSORS, AttentionFlashBwd
from .fwd import flops as fwd_flops
from .tc_fwd import TileConfigs, problem, rows_aligned

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
KNOBS = (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_N, 16, 64, 16, 32),
         KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 64, 256, 64, 128))


def _node(sub):
    return sub.nodes[0]


def cfg_of(config):
    return TcBwdConfig(config.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128) // 32, config.get(K.CUDNN_KNOB_TYPE_TILE_N, 32))


@register
class AttentionTcBwd(TileConfigs):
    name = "attention_tc_bwd"
    kinds = ("sdpa_bwd",)
    numerical_notes = (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,)
    KNOBS, TAG = KNOBS, "tc_bwd"
    tile_default, tile_configs = staticmethod(tc_bwd_default), staticmethod(tc_bwd_configs)
    tile_check, tile_cfg_of = staticmethod(tc_bwd_check), staticmethod(cfg_of)

    def check_support(self, sub, ctx):
        st = AttentionFlashBwd.check_support(self, sub, ctx)   # the node checks, named after this engine
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        node = _node(sub)
        dtypes, d, dv = problem(sub)
        ok, why = tc_dtypes_check(dtypes)
        if not ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{self.name}: node '{node.name}': {why}"
        for p in ("DO", "DQ", "DK", "DV"):
            t = node.inputs.get(p, node.outputs.get(p))
            if kdtype(t) != dtypes[0]:
                return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{self.name}: node '{node.name}': {p}: " \
                    f"{kdtype(t)}, not the {dtypes[0]} of Q / K / V"
        ok, why = tc_bwd_check(dtypes, d, dv)
        if not ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: node '{node.name}': {why}"
        if float(node.dropout_probability or 0.0) > 0.0:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: node '{node.name}': dropout (it runs on " \
                "attention_flash_bwd)"
        if written(sub, node.outputs.get("DBIAS")) is not None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: node '{node.name}': DBIAS: no bias gradient (it " \
                "runs on attention_flash_bwd)"
        if tc_bwd_default(dtypes, d, dv) is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: no tile config fits head dims {d} / {dv}"
        return OK

    def _scratch(self, sub):
        node = _node(sub)
        B, H, _, SQ, _, _, _ = C.dims(node)
        sc = Scratch()
        return sc, sc.take(B * H * SQ, "float32")

    def workspace_size(self, sub, cfg):
        return self._scratch(sub)[0].size

    def cost(self, sub, cfg, device):
        node = _node(sub)
        c = cfg_of(cfg)
        B, H, HK, SQ, SK, D, DV = C.dims(node)
        nbytes = sum(math.prod(t.dims) * t.itemsize for t in node.tensors() if not t.is_by_value)
        blocks = math.ceil(SK / c.ROWS) * HK * B + math.ceil(SQ / c.ROWS) * H * B
        # the two passes recompute S and dP: 3.5x the forward's products against the 2.5x of one fused pass
        return Hr.kernel_time(device, flops=3.5 * fwd_flops(node), nbytes=2 * nbytes, peak="bf16", blocks=blocks,
                              threads=c.THREADS, regs=min(255, 40 + 2 * (D // 2 + DV // 2 + c.BLOCK_N)),
                              smem=tc_bwd_smem_bytes(c, D, DV), launches=4 if split_dkdv(c, D, DV) else 3)

    def build(self, sub, cfg, ctx):
        node = _node(sub)
        c = cfg_of(cfg)
        spec = C.spec_of(node, sub, backward=True)
        B, H, HK, SQ, SK, D, DV = C.dims(node)
        _, dr = self._scratch(sub)
        outs = node.outputs
        smem = tc_bwd_smem_bytes(c, D, DV)

        def pair(c):
            wants = ("dk", "dv") if split_dkdv(c, D, DV) else ("dkdv",)
            kv = [Step(f"attn_tc_bwd_{w}:" + src_key(spec, c), lambda w=w: tc_dkdv_kernel(spec, c, w),
                       tc_dkdv_grid(c, B, HK, SK), c.THREADS,
                       AttentionFlashBwd.kernel_args(node, dr, Arg.dummy("float32"), outs["DK"], outs["DV"]),
                       shared=smem, name=f"attn_tc_bwd_{w}") for w in wants]
            dq = Step("attn_tc_bwd_dq:" + src_key(spec, c), lambda: tc_dq_kernel(spec, c), tc_dq_grid(c, B, H, SQ),
                      c.THREADS, AttentionFlashBwd.kernel_args(node, dr, Arg.dummy("float32"), outs["DQ"], outs["DQ"]),
                      shared=smem, name="attn_tc_bwd_dq")
            return (*kv, dq)
        steps = [AttentionFlashBwd.dot_step(node, spec, dr)]
        if not rows_aligned(node, ("Q", "K", "V", "DO")):
            steps += pair(c.replace(ASYNC=False))
        else:
            for main, twin in zip(pair(c), pair(c.replace(ASYNC=False))):
                main.fallback = twin                      # compiled on first need
                main.align = {0: 16, 1: 16, 2: 16, 3: 16}  # Q, K, V, dO pointers
                steps.append(main)
        return MemPlan(self, sub, cfg, steps, self.workspace_size(sub, cfg))
