"""Warp and block primitives (shuffles, reductions, bit casts) on both paths (GPU / simulator)."""
import numpy as np
import pytest
from numba import cuda, float32

from ncudnn.kernels.primitives import warp as pr
from ncudnn.testing import poison_value


@cuda.jit
def _warp_kernel(x, out_sum, out_max, out_min, out_down, out_idx):
    i = cuda.grid(1)
    v = x[i]
    out_sum[i] = pr.warp_sum(v)
    out_max[i] = pr.warp_max(v)
    out_min[i] = pr.warp_min(v)
    out_down[i] = pr.shfl_down(v, 3)
    out_idx[i] = pr.shfl_idx(v, 5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_warp_reductions_and_shuffles(rng, dtype):
    n = 64
    x = rng.standard_normal(n).astype(dtype)
    outs = [np.full(n, poison_value(dtype), dtype) for _ in range(5)]
    _warp_kernel[1, n](x, *outs)
    s, mx, mn, down, idx = outs
    w = x.reshape(2, 32)
    # a tree sum differs from NumPy's order by a few ulps of sum(|w|), not of the (possibly tiny) sum
    exact = w.astype(np.float64).sum(1, keepdims=True)
    bound = 32 * np.finfo(dtype).eps * np.abs(w.astype(np.float64)).sum(1, keepdims=True)
    assert (np.abs(s.reshape(2, 32).astype(np.float64) - exact) <= bound).all(), (s.reshape(2, 32)[:, 0], exact)
    np.testing.assert_array_equal(mx.reshape(2, 32), np.repeat(w.max(1, keepdims=True), 32, 1))
    np.testing.assert_array_equal(mn.reshape(2, 32), np.repeat(w.min(1, keepdims=True), 32, 1))
    lanes = np.arange(32)
    exp_down = np.where(lanes + 3 < 32, w[:, np.minimum(lanes + 3, 31)], w)
    np.testing.assert_array_equal(down.reshape(2, 32), exp_down)
    np.testing.assert_array_equal(idx.reshape(2, 32), np.repeat(w[:, 5:6], 32, 1))


@cuda.jit
def _block_kernel(x, out):
    sm_a = cuda.shared.array(32, float32)
    sm_b = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    v = x[i]
    s = pr.block_sum(v, sm_a)
    m = pr.block_max(v, sm_a)
    lo = pr.block_min(v, sm_b)
    a, b = pr.block_sum2(v, v * v, sm_a, sm_b)
    if t == 0:
        out[cuda.blockIdx.x, 0] = s
        out[cuda.blockIdx.x, 1] = m
        out[cuda.blockIdx.x, 2] = lo
        out[cuda.blockIdx.x, 3] = a
        out[cuda.blockIdx.x, 4] = b


def test_block_reductions(rng):
    blocks, threads = 2, 96
    x = rng.standard_normal(blocks * threads).astype(np.float32)
    out = np.full((blocks, 5), np.nan, np.float32)
    _block_kernel[blocks, threads](x, out)
    w = x.reshape(blocks, threads).astype(np.float64)
    expected = np.stack([w.sum(1), w.max(1), w.min(1), w.sum(1), (w * w).sum(1)], 1)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@cuda.jit
def _bits_kernel(x, bits, back):
    i = cuda.grid(1)
    if i < x.size:
        u = pr.f32_as_u32(x[i])
        bits[i] = u
        back[i] = pr.u32_as_f32(u ^ 0x80000000)   # flip the sign bit


def test_bit_casts(rng):
    x = np.concatenate([rng.standard_normal(6), [np.inf, -0.0]]).astype(np.float32)
    bits = np.full(x.size, poison_value(np.uint32), np.uint32)
    back = np.full(x.size, np.nan, np.float32)
    _bits_kernel[1, x.size](x, bits, back)
    np.testing.assert_array_equal(bits, x.view(np.uint32))
    np.testing.assert_array_equal(back.view(np.uint32), x.view(np.uint32) ^ np.uint32(0x80000000))


def test_launcher_hook_routes_every_launch(rng):
    """set_launcher() sees (kernel, grid, block, stream, args) and may launch it itself."""
    seen = []

    def hook(kernel, grid, block, stream, args):
        seen.append((grid, block, len(args)))
        kernel[grid, block, stream](*args)

    x = rng.standard_normal(8).astype(np.float32)
    bits = np.zeros(8, np.uint32)
    back = np.full(8, np.nan, np.float32)
    old = pr.set_launcher(hook)
    try:
        pr.launch(_bits_kernel, 1, 8, 0, x, bits, back)
    finally:
        pr.set_launcher(old)
    assert seen == [(1, 8, 3)]
    np.testing.assert_array_equal(bits, x.view(np.uint32))
