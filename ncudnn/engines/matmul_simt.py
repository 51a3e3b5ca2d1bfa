"""Engine "matmul_simt": batched strided matmul on the large register-blocked SIMT tiles, with the
subgraph's pointwise chain fused into the epilogue.

TILE_SIZE indexes :data:`~ncudnn.engines.gemm_common.MATMUL_TILES` (the fast-mainloop 128x128x8 tile
first: 16-byte global and shared accesses, fp32 only; then the generic tiles, best measured first); SWIZZLE groups tile rows for L2 reuse; SPLIT_K
(deterministic workspace partials by default, SPLIT_K_BUF = 0: atomics, NONDETERMINISTIC) for
deep-K problems. FP32 / FP16 / BF16 I/O accumulate in FP32; all-FP64 problems in FP64.
"""
from ..types import cudnnBackendLayoutType_t
from . import gemm_common as gc
from .matmul_common import GemmEngineBase, matmul_mapping
from .registry import register


@register
class MatmulSimtEngine(GemmEngineBase):
    name = "matmul_simt"
    kinds = ("matmul",)
    TILES = gc.MATMUL_TILES
    SPLITS = (1, 2, 4)
    SWIZZLES = (1, 8)
    MAX_SPLIT = 4
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW

    def mapping(self, sub):
        return matmul_mapping(sub)
