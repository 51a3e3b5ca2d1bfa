"""Pixels-last copy of a (batch, channels, pixels) fp32 tensor: ``dst[n, p, c] = src[n, c, p]`` with
``dst`` packed [N, P, C] (an NCHW activation made NHWC, e.g. for a 1x1 wgrad GEMM whose image size is
not a multiple of the fast mainloop's k-tile, or the strided pixels of a stride-2 1x1 conv's x).
Source pixel ``p`` of a row of Q lives at ``(p // Q) * s_h + (p % Q) * s_w``.

A block of 32 x ROWS threads moves a 32-channel x 32-pixel tile through shared memory (rows padded to
33 words: conflict-free both ways): global reads coalesced along the pixels (``s_p`` = 1), writes
along the channels. Grid ``(ceil(P / 32), ceil(C / 32), N)``.
"""
from numba import cuda, float32

_CACHE = {}
TILE = 32
ROWS = 8
PADDED = TILE + 1


def make_pixels_last():
    """kernel(src, dst, C, P, Q, s_n, s_c, s_h, s_w) over :func:`grid` (fp32)."""
    if "k" in _CACHE:
        return _CACHE["k"]

    @cuda.jit
    def pixels_last(src, dst, C, P, Q, s_n, s_c, s_h, s_w):
        tile = cuda.shared.array((TILE, PADDED), float32)
        n = cuda.blockIdx.z
        p0 = cuda.blockIdx.x * TILE
        c0 = cuda.blockIdx.y * TILE
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        p = p0 + tx
        base = n * s_n + (p // Q) * s_h + (p % Q) * s_w
        for r in range(ty, TILE, ROWS):
            c = c0 + r
            if c < C and p < P:
                tile[r, tx] = src[base + c * s_c]
        cuda.syncthreads()
        out = n * P * C
        for r in range(ty, TILE, ROWS):
            p = p0 + r
            c = c0 + tx
            if p < P and c < C:
                dst[out + p * C + c] = tile[tx, r]

    _CACHE["k"] = pixels_last
    return pixels_last


def grid(N, C, P):
    """(grid, block) of :func:`make_pixels_last` for an (N, C, P) source."""
    return (-(-P // TILE), -(-C // TILE), N), (TILE, ROWS)
