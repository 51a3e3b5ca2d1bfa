"""Engine "attention_tc_fwd": an SDPA forward node as one flash-attention kernel on tensor cores
(:mod:`ncudnn.kernels.attention.tc_fwd`: mma.sync m16n8k16, P rounded to the input type between the two
products, FP32 accumulation and softmax statistics).

Takes what ``attention_flash_fwd`` takes (any strides, GQA / MQA, the scale in any form, the diagonal band,
padding masks, bias, ALiBi, dropout) when Q, K and V are all FP16 or all BF16 and both head dims are
multiples of 16 up to 128; other problems are refused with the reason, and run on ``attention_flash_fwd``.
Knobs TILE_N (keys per streamed tile: 16 / 32 / 64 / 128) and BLOCK_SIZE (64, 128 or 256 threads, 16 query
rows a warp); no workspace. Notes: TENSOR_CORE.

Q, K and V with a unit head-dim stride and every other stride a multiple of 8 elements are copied with 16-byte
``cp.async`` chunks; a pointer that is not 16-byte aligned at execute takes the element-copy twin of the kernel
(as do other strides, from the plan on).
"""
import math

from ...kernels.attention.tc_fwd import (TcAttnConfig, tc_check, tc_configs, tc_default, tc_dtypes_check, tc_fwd_grid,
                                         tc_fwd_kernel, tc_smem_bytes)
from ...types import cudnnBackendKnobType_t, cudnnBackendNumericalNote_t, cudnnStatus_t
from .. import heuristics as Hr
from ..base import OK, Config, Engine, KnobSpec
from ..membound.common import MemPlan, Step, kdtype, src_key
from ..registry import register
from . import common as C
from .fwd import FWD_TENSORS, AttentionFlashFwd, flops

S = cudnnStatus_t
K = cudnnBackendKnobType_t
NN = cudnnBackendNumericalNote_t
KNOBS = (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_N, 16, 128, 16, 64),
         KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 64, 256, 64, 128))


def _node(sub):
    return sub.nodes[0]


def problem(sub):
    """((Q, K, V dtype names), D_qk, D_v) of the node (shared by attention_tc_bwd)."""
    node = _node(sub)
    _, _, _, _, _, d, dv = C.dims(node)
    return tuple(kdtype(node.inputs[p]) for p in ("Q", "K", "V")), d, dv


def cfg_of(config):
    return TcAttnConfig(config.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128) // 32, config.get(K.CUDNN_KNOB_TYPE_TILE_N, 64))


def regs_estimate(c, d, dv):
    """Registers a thread takes: the accumulators and Q fragments (DV / 2 + TILE_N / 2 + D / 4) and as much
    again, less for the small tiles (sm_90 builds: 246 at D 128 / TILE_N 64, 134 at D 64 / TILE_N 64)."""
    return min(255, int(40 + 1.6 * (dv // 2 + c.BLOCK_N // 2 + d // 4)))


def rows_aligned(node, ports=("Q", "K", "V")):
    """Whether the rows of the tensors at ``ports`` are contiguous and start on 16-byte boundaries at an aligned
    base (unit head-dim stride, every other stride a multiple of 8 elements): the kernels' cp.async copies."""
    for p in ports:
        t = node.inputs[p]
        st = [0 if int(n) == 1 else int(x) for n, x in zip(t.dims, t.strides)]
        if st[3] != 1 or any(x % 8 for x in st[:3]):
            return False
    return True


def config_of(name, cfg):
    return Config(name, tuple(sorted(((int(K.CUDNN_KNOB_TYPE_TILE_N), cfg.BLOCK_N),
                                      (int(K.CUDNN_KNOB_TYPE_BLOCK_SIZE), cfg.THREADS)))))


class TileConfigs(Engine):
    """The config methods the tensor-core attention engines share, from their kernel family's functions of
    ``(dtypes, D_qk, D_v)``: ``tile_default`` (the default tile, None when none fits), ``tile_configs`` (every
    tile that builds), ``tile_check`` (with a tile: ``(ok, reason)``) and ``tile_cfg_of`` (a Config's tile).
    Knobs TILE_N / BLOCK_SIZE (``KNOBS``); ``TAG`` keys the cached candidates."""
    KNOBS = ()
    TAG = ""
    tile_default = tile_configs = tile_check = tile_cfg_of = None

    def knobs(self, sub):
        return self.KNOBS

    def default_config(self, sub):
        if sub is None:
            return super().default_config(sub)
        return config_of(self.name, self.tile_default(*problem(sub)))

    def configs(self, sub, ctx):
        return [config_of(self.name, c) for c in self.tile_configs(*problem(sub))]

    def candidates(self, sub, ctx):
        """The default, then the largest and the smallest tiles that build (the autotuner searches :meth:`configs`)."""
        cs = self.configs(sub, ctx)
        return tuple(dict.fromkeys([self.default_config(sub), *cs[:1], *cs[-1:]]))

    def candidates_key(self, sub):
        return (self.TAG, *problem(sub))

    def keep(self, sub, cfg, ctx):
        st = super().keep(sub, cfg, ctx)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        ok, why = self.tile_check(*problem(sub), self.tile_cfg_of(cfg))
        return OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: {why}")


@register
class AttentionTcFwd(TileConfigs):
    name = "attention_tc_fwd"
    kinds = ("sdpa_fwd",)
    numerical_notes = (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,)
    KNOBS, TAG = KNOBS, "tc_fwd"
    tile_default, tile_configs, tile_check = staticmethod(tc_default), staticmethod(tc_configs), staticmethod(tc_check)
    tile_cfg_of = staticmethod(cfg_of)

    def check_support(self, sub, ctx):
        st = C.check_engine(self, sub, ctx, FWD_TENSORS)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        node = _node(sub)
        dtypes, d, dv = problem(sub)
        ok, why = tc_dtypes_check(dtypes)
        if not ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{self.name}: node '{node.name}': {why}"
        ok, why = tc_check(dtypes, d, dv)
        if not ok:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: node '{node.name}': {why}"
        if tc_default(dtypes, d, dv) is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{self.name}: no tile config fits head dims {d} / {dv}"
        return OK

    def cost(self, sub, cfg, device):
        node = _node(sub)
        c = cfg_of(cfg)
        B, H, _, SQ, SK, D, DV = C.dims(node)
        nbytes = sum(math.prod(t.dims) * t.itemsize for t in node.tensors() if not t.is_by_value)
        grid = tc_fwd_grid(c, B, H, SQ)
        # the tile quantization of the (query rows x keys) score matrix: short sequences take small tiles
        return Hr.kernel_time(device, flops=flops(node), nbytes=nbytes, peak="bf16",
                              blocks=grid[0] * grid[1] * grid[2], threads=c.THREADS, regs=regs_estimate(c, D, DV),
                              smem=tc_smem_bytes(c, D, DV), tile=(c.BLOCK_M, c.BLOCK_N), problem=(SQ, SK))

    def build(self, sub, cfg, ctx):
        node = _node(sub)
        c = cfg_of(cfg)
        spec = C.spec_of(node, sub, backward=False)
        B, H, _, SQ, _, D, DV = C.dims(node)
        args = AttentionFlashFwd.kernel_args(sub)

        def step(c):
            return Step("attn_tc_fwd:" + src_key(spec, c), lambda: tc_fwd_kernel(spec, c), tc_fwd_grid(c, B, H, SQ),
                        c.THREADS, args, shared=tc_smem_bytes(c, D, DV), name="attn_tc_fwd")
        if not rows_aligned(node):
            return MemPlan(self, sub, cfg, [step(c.replace(ASYNC=False))], 0)
        main = step(c)
        main.fallback = step(c.replace(ASYNC=False))   # compiled on first need
        main.align = {0: 16, 1: 16, 2: 16}             # Q, K, V pointers
        return MemPlan(self, sub, cfg, [main], 0)
