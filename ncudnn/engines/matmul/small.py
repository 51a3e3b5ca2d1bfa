"""Engine "matmul_small": batched strided matmul for small or skinny problems: small tiles (few
threads per block, many blocks for a small M x N) and split-K over deep K (deterministic workspace
partials, or atomics with SPLIT_K_BUF = 0: NONDETERMINISTIC). Same fused epilogue as matmul_simt.

The FALLBACK engine for matmul subgraphs: every problem the GEMM kernel can express runs here.
"""
from ...types import cudnnBackendLayoutType_t
from ..gemm import common as gc
from ..gemm.mapping import GemmEngineBase
from .common import matmul_mapping
from ..registry import register


@register
class MatmulSmallEngine(GemmEngineBase):
    name = "matmul_small"
    kinds = ("matmul",)
    TILES = gc.SMALL_TILES
    SPLITS = (1, 2, 4, 8, 16)
    SWIZZLES = (1,)
    ATOMIC = True
    MAX_SPLIT = 16
    RANK_BY_BEST = True
    fallback = True
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW

    def mapping(self, sub):
        return matmul_mapping(sub)
