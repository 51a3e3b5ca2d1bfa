"""Zero-pad the channel dim of a packed channels-last 16-bit tensor, (pixels, C) -> (pixels, Cp), so a
convolution with C % 8 != 0 (the ResNet stem, C = 3) runs the tensor-core conv kernel, whose gather
moves 16-byte chunks of 8 channels. The padded channels are zero in x and w, so they add nothing.

``make_pad_channels()`` -> kernel ``pad_channels(src, dst, n, C, Cp)``: ``dst[i]`` for ``i < n`` (n =
pixels * Cp) is ``src[(i // Cp) * C + i % Cp]`` where ``i % Cp < C``, else 0; grid-stride loop, one
element a thread (consecutive threads write consecutive elements). ``pad_grid(n)`` its grid.
"""
from numba import cuda, int64

__all__ = ["make_pad_channels", "pad_grid", "PAD_THREADS"]

PAD_THREADS = 256
_KERNEL = []


def make_pad_channels():
    if not _KERNEL:
        def pad_channels(src, dst, n, C, Cp):
            i = int64(cuda.blockIdx.x) * PAD_THREADS + cuda.threadIdx.x
            step = int64(cuda.gridDim.x) * PAD_THREADS
            while i < n:
                p = i // Cp
                c = i - p * Cp
                if c < C:
                    dst[i] = src[p * C + c]
                else:
                    dst[i] = 0
                i += step
        _KERNEL.append(cuda.jit(pad_channels))
    return _KERNEL[0]


def pad_grid(n, max_blocks=132 * 8):
    return (max(1, min(-(-n // PAD_THREADS), max_blocks)), 1, 1)
