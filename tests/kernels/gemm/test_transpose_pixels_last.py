"""kernels/gemm/transpose.py: dst[n, p, c] = src[n, c, p] (packed pixels-last), partial edge tiles and a
strided source; simulator, poisoned destination."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.gemm.transpose import grid, make_pixels_last
from ncudnn.testing import poison_value


@pytest.mark.parametrize("N,C,H,st,nhwc", [(2, 33, 7, 1, False), (1, 8, 6, 2, False), (2, 12, 6, 2, True)])
def test_w1k_pixels_last(rng, N, C, H, st, nhwc):
    # src (N, C, H, H) NCHW or NHWC; copied pixels: every st-th row and column (a stride-st 1x1 conv's x)
    src = rng.uniform(-1, 1, (N, C, H, H)).astype(np.float32)
    store = np.ascontiguousarray(np.transpose(src, (0, 2, 3, 1)) if nhwc else src)
    s = [v // 4 for v in (np.transpose(store, (0, 3, 1, 2)) if nhwc else store).strides]
    P = (H - 1) // st + 1
    dst = cuda.to_device(np.full(N * P * P * C, poison_value(np.float32), np.float32))
    g, b = grid(N, C, P * P)
    make_pixels_last()[g, b](cuda.to_device(store.reshape(-1)), dst, C, P * P, P, s[0], s[1], s[2] * st, s[3] * st)
    want = np.transpose(src[:, :, ::st, ::st], (0, 2, 3, 1)).reshape(-1)
    np.testing.assert_array_equal(dst.copy_to_host(), want)
