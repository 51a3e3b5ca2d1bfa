"""Both GEMM mainloops (generic and fast) take their block -> tile mapping from one device function
(mainloop.make_tile_coords): with SWIZZLE > 1 every output tile is still written exactly once
(simulator, fast 64x64 tile on a 3 x 3 tile grid, float64 oracle, poisoned output)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.gemm import make_gemm, run_gemm
from ncudnn.kernels.gemm.config import FAST_SMALL
from ncudnn.kernels.gemm.mainloop import make_tile_coords
from ncudnn.testing import assert_close, poison_value


@pytest.mark.parametrize("swizzle", [2])
def test_dup_fast_mainloop_swizzle(rng, swizzle):
    M, N, K = 136, 132, 8
    kern = make_gemm(FAST_SMALL[3].replace(SWIZZLE=swizzle), "mk", "kn")
    assert kern.bk.fallback is not None                       # the fast mainloop
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    c = cuda.to_device(np.full(M * N, poison_value(np.float32), np.float32))
    run_gemm(kern, cuda.to_device(a.ravel()), cuda.to_device(b.ravel()), c, M=M, N=N, K=K, a_strides=(K, 1),
             b_strides=(N, 1), c_strides=(N, 1))
    assert_close(c.copy_to_host().reshape(M, N), a.astype(np.float64) @ b, "float32")
    assert make_tile_coords(swizzle) is make_tile_coords(swizzle)
