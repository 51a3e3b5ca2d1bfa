"""Engine "matmul_simt": batched strided matmul on the large register-blocked SIMT tiles, with the
subgraph's pointwise chain fused into the epilogue.

TILE_SIZE indexes :data:`~ncudnn.engines.gemm.common.SIMT_TILES`: MATMUL_TILES (the fast-mainloop
128x128x8 tile first: 16-byte global and shared accesses, fp32 only; then the generic tiles, best
measured first), then the smaller fast tiles for skinny problems (128x64, 64x128, 64x64: with split-K
they fill every SM when few 128x128 tiles exist; 16x128x32 for M <= 16, GEMV-like). Ranking orders tiles
by their best config, split-K included (experiments/probe_skinny.py measures them beside cuBLAS). SWIZZLE groups
tile rows for L2 reuse; SPLIT_K (deterministic workspace partials by default, SPLIT_K_BUF = 0: atomics,
NONDETERMINISTIC) for deep-K problems. FP32 / FP16 / BF16 I/O accumulate in FP32; all-FP64 problems in FP64.
"""
from ...types import cudnnBackendLayoutType_t
from ..gemm import common as gc
from ..gemm.mapping import GemmEngineBase
from .common import matmul_mapping
from ..registry import register


@register
class MatmulSimtEngine(GemmEngineBase):
    name = "matmul_simt"
    kinds = ("matmul",)
    TILES = gc.SIMT_TILES
    #: SPLIT_K offered (the knob takes up to 8): on the H200 8 ran slower than 4 on every probed shape
    #: (the 8-slice reduce takes the wide-reduce kernel, built for wgrad's hundreds of slices)
    SPLITS = (1, 2, 4)
    SWIZZLES = (1, 8)
    MAX_SPLIT = 8
    RANK_BY_BEST = True
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NCHW

    def mapping(self, sub):
        return matmul_mapping(sub)

    def useful_tiles(self, p):
        """The skinny fast tiles (FAST_SKINNY_TILES) join the ranking only where the simulator's
        one-small-tile rule does not apply (tiny CI problems keep the MATMUL_TILES choice); a fast tile
        of fewer than 64 rows only where one tile row covers M (GEMV-like: B streamed once; with more
        tile rows every row re-reads B)."""
        if gc.simulated_small(p.M, p.N, p.nb):
            return gc.useful_tiles(gc.MATMUL_TILES, p.M, p.N, p.K, p.nb)
        return [t for t in gc.useful_tiles(self.TILES, p.M, p.N, p.K, p.nb)
                if self.TILES[t].cfg.BLOCK_M >= 64 or p.M <= self.TILES[t].cfg.BLOCK_M]
