"""kernels/gemm/transpose.py: dst[n, p, c] = src[n, c, p] (packed pixels-last), partial edge tiles and a
strided source; simulator, poisoned destination."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.gemm.transpose import grid, make_pixels_last
from ncudnn.testing import poison_value


@pytest.mark.parametrize("N,C,P,gap", [(2, 33, 49, 1), (1, 8, 36, 2)])
def test_w1k_pixels_last(rng, N, C, P, gap):
    src = rng.uniform(-1, 1, (N, C, P * gap)).astype(np.float32)      # gap > 1: every gap-th pixel
    dst = cuda.to_device(np.full(N * P * C, poison_value(np.float32), np.float32))
    g, b = grid(N, C, P)
    make_pixels_last()[g, b](cuda.to_device(src.reshape(-1)), dst, C, P, C * P * gap, P * gap, gap)
    want = np.transpose(src[:, :, ::gap], (0, 2, 1)).reshape(-1)
    np.testing.assert_array_equal(dst.copy_to_host(), want)
