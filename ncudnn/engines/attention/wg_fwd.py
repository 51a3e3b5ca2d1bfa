"""Engine "attention_wgmma_fwd": an SDPA forward node as one flash-attention kernel on Hopper's warpgroup
tensor cores (:mod:`ncudnn.kernels.attention.wg_fwd`: wgmma.mma_async, S = Q K^T with both operands in shared
memory, O += P V with P from registers, the softmax of one tile under the product of the previous one; FP32
accumulation and softmax statistics).

Takes what ``attention_tc_fwd`` takes except dropout, on compute capability 9.0 only (wgmma is an sm_90a
instruction), for head dims 64 and 128 and Q, K, V rows that 16-byte ``cp.async`` chunks can copy (unit
head-dim stride, every other stride a multiple of 8 elements); the rest is refused with the reason and runs on
``attention_tc_fwd``. A pointer that is not 16-byte aligned at execute takes attention_tc_fwd's element-copy
kernel. Knobs TILE_N (keys per streamed tile: 64 / 128) and BLOCK_SIZE (128, 256 or 384 threads: 64 query rows
a warpgroup); no workspace. Notes: TENSOR_CORE.
"""
import math

from ...kernels.attention.tc_fwd import TcAttnConfig, tc_fwd_kernel, tc_smem_bytes, tc_fwd_grid
from ...kernels.attention.wg_fwd import (WgAttnConfig, wg_check, wg_configs, wg_default, wg_fwd_grid, wg_fwd_kernel,
                                         wg_smem_bytes, acc_regs)
from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from .. import heuristics as Hr
from ..base import OK, KnobSpec
from ..membound.common import MemPlan, Step, src_key
from ..registry import register
from . import common as C
from .fwd import FWD_TENSORS, AttentionFlashFwd, flops
from .tc_fwd import TileConfigs, problem, rows_aligned

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
KNOBS = (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_N, 64, 128, 64, 128),
         KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128, 384, 128, 256))


def cfg_of(config):
    return WgAttnConfig(config.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 256) // 128, config.get(K.CUDNN_KNOB_TYPE_TILE_N, 128))


@register
class AttentionWgmmaFwd(TileConfigs):
    name = "attention_wgmma_fwd"
    kinds = ("sdpa_fwd",)
    numerical_notes = (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,)
    KNOBS, TAG = KNOBS, "wg_fwd"
    tile_default, tile_configs, tile_check = staticmethod(wg_default), staticmethod(wg_configs), staticmethod(wg_check)
    tile_cfg_of = staticmethod(cfg_of)

    def check_support(self, sub, ctx):
        st = C.check_engine(self, sub, ctx, FWD_TENSORS)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        node = sub.nodes[0]
        dev = ctx.device if ctx is not None else None
        if dev is not None and tuple(dev.cc)[:2] != (9, 0):
            return S.CUDNN_STATUS_ARCH_MISMATCH, (f"{self.name}: wgmma.mma_async is an sm_90a instruction, device "
                                                  f"is sm_{dev.cc[0]}{dev.cc[1]}")
        dtypes, d, dv = problem(sub)
        ok, why = wg_check(dtypes, d, dv)
        if not ok:
            status = S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE if "FP16" in why else S.CUDNN_STATUS_NOT_SUPPORTED
            return status, f"{self.name}: node '{node.name}': {why}"
        if float(node.dropout_probability or 0.0) > 0.0:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: node '{node.name}': dropout (attention_tc_fwd runs it)"
        if not rows_aligned(node):
            return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, (
                f"{self.name}: node '{node.name}': Q / K / V rows are not 16-byte chunks (unit head-dim stride, "
                "every other stride a multiple of 8 elements): attention_tc_fwd copies them element by element")
        if wg_default(dtypes, d, dv) is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: no tile config fits head dims {d} / {dv}"
        return OK

    def cost(self, sub, cfg, device):
        node = sub.nodes[0]
        c = cfg_of(cfg)
        B, H, _, SQ, SK, D, DV = C.dims(node)
        nbytes = sum(math.prod(t.dims) * t.itemsize for t in node.tensors() if not t.is_by_value)
        grid = wg_fwd_grid(c, B, H, SQ)
        # wgmma keeps the products off the issue path: the same FLOPs at a higher rate than mma.sync
        return Hr.kernel_time(device, flops=flops(node) / 1.6, nbytes=nbytes, peak="bf16",
                              blocks=grid[0] * grid[1] * grid[2], threads=c.THREADS,
                              regs=min(255, 64 + acc_regs(c, DV)), smem=wg_smem_bytes(c, D, DV),
                              tile=(c.BLOCK_M, c.BLOCK_N), problem=(SQ, SK))

    def build(self, sub, cfg, ctx):
        node = sub.nodes[0]
        c = cfg_of(cfg)
        spec = C.spec_of(node, sub, backward=False)
        B, H, _, SQ, _, D, DV = C.dims(node)
        args = AttentionFlashFwd.kernel_args(sub)
        main = Step("attn_wg_fwd:" + src_key(spec, c), lambda: wg_fwd_kernel(spec, c), wg_fwd_grid(c, B, H, SQ),
                    c.THREADS, args, shared=wg_smem_bytes(c, D, DV), name="attn_wg_fwd")
        tc = TcAttnConfig(4, 64, False)      # attention_tc_fwd's element-copy kernel: any pointer
        main.fallback = Step("attn_tc_fwd:" + src_key(spec, tc), lambda: tc_fwd_kernel(spec, tc),
                             tc_fwd_grid(tc, B, H, SQ), tc.THREADS, args, shared=tc_smem_bytes(tc, D, DV),
                             name="attn_tc_fwd")
        main.align = {0: 16, 1: 16, 2: 16}             # Q, K, V pointers
        return MemPlan(self, sub, cfg, [main], 0)
