"""The fast FP32 mainloop (MAINLOOP="fast", ncudnn/kernels/gemm/fastloop.py) against the float64
oracle at simulator-sized shapes: 16-byte quad path and scalar path, every layout, edges, batches,
split-K and fused epilogues."""
import numpy as np
import pytest

from ncudnn import reference as R
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.gemm import CONFIGS, GemmConfig, check, make_gemm, run_gemm
from ncudnn.kernels.gemm.gemm import gemm_args
from ncudnn.kernels.gemm.fastloop import make_fast_kernel
from ncudnn.kernels.gemm.launch import fast_applies
from ncudnn.testing import assert_close, poison_value, random, size
from numba import cuda
from ncudnn.kernels.gemm.config import FAST_SMALL
from ncudnn.kernels.gemm.mainloop import make_tile_coords

FAST_SIM = GemmConfig(BLOCK_M=16, BLOCK_N=16, BLOCK_K=4, THREAD_M=4, THREAD_N=4, WARP_M=0, WARP_N=0,
                      VEC=4, MAINLOOP="fast")
FAST_GPU = next(c for c in CONFIGS if c.MAINLOOP == "fast")


def cfg():
    return size(FAST_SIM, FAST_GPU)


def store(mat, layout):
    r, c = mat.shape
    if layout in ("mk", "kn"):
        return np.ascontiguousarray(mat).ravel(), (c, 1)
    return np.ascontiguousarray(mat.T).ravel(), (1, r)


def poisoned(n):
    return np.full(n, poison_value(np.float32), np.float32)


def test_fast_kernel_is_selected():
    k = make_gemm(cfg(), "mk", "kn")
    assert fast_applies(k.cfg, k.A, k.B, k.ftype)
    assert k.kernel is make_fast_kernel(k.cfg, k.A, k.B, k.OUT, k.bk.EPI)
    assert k.bk.fallback is not None and k.bk.fallback is not k.kernel
    h = make_gemm(cfg(), "mk", "kn", ("float16", "float16", "float32"))
    assert not fast_applies(h.cfg, h.A, h.B, h.ftype)      # fp16 operands: generic mainloop
    assert not check(FAST_SIM.replace(VEC=1))[0]
    assert not check(FAST_SIM.replace(BLOCK_K=2, UNROLL_K=1))[0]


@pytest.mark.parametrize("layouts", [("mk", "kn"), ("km", "nk"), ("mk", "nk"), ("km", "kn")])
@pytest.mark.parametrize("dims", [(20, 24, 12), (20, 24, 13), (19, 21, 13)], ids=["quads", "k_tail", "odd"])
def test_layouts_and_edges(rng, layouts, dims):
    """Aligned quads with whole k-tiles run the fast kernel; a K tail or odd sizes run the generic
    mainloop of the same tile (host check). All shapes have edge tiles."""
    M, N, K = size(dims, (1000, 1096, 704))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    fa, sa = store(a, layouts[0])
    fb, sb = store(b, layouts[1])
    c = poisoned(M * N)
    k = make_gemm(cfg(), *layouts)
    packed = gemm_args(k, fa, fb, c, M=M, N=N, K=K, a_strides=sa, b_strides=sb, c_strides=(N, 1))
    generic = K % k.cfg.BLOCK_K != 0 or (layouts[0] == "km" and M % 4) or (layouts[1] == "kn" and N % 4)
    assert k.bk.uses_fallback(M, N, K, packed[4], packed[5]) == bool(generic)
    run_gemm(k, fa, fb, c, M=M, N=N, K=K, a_strides=sa, b_strides=sb, c_strides=(N, 1))
    assert_close(c.reshape(M, N), R.matmul(a, b), "float32")


def test_misaligned_base_falls_back(rng):
    """Operands one element into their buffers (not 16-byte aligned), sizes multiples of 4."""
    M, N, K = size((20, 16, 8), (512, 512, 256))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    fa = np.concatenate([random(rng, (1,)), a.ravel()])
    fb = np.concatenate([random(rng, (3,)), b.ravel()])
    c = poisoned(M * N)
    k = make_gemm(cfg(), "mk", "kn")
    packed = gemm_args(k, fa[1:], fb[3:], c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
                       c_strides=(N, 1))
    assert k.bk.uses_fallback(M, N, K, packed[4], packed[5])
    run_gemm(k, fa[1:], fb[3:], c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1), c_strides=(N, 1))
    assert_close(c.reshape(M, N), R.matmul(a, b), "float32")


def test_batched_broadcast_alpha_beta(rng):
    M, N, K = size((12, 20, 8), (300, 256, 128))
    B1 = 3
    a, b = random(rng, (B1, M, K)), random(rng, (K, N))
    c0 = random(rng, (B1, M, N))
    c = c0.ravel().copy()
    run_gemm(make_gemm(cfg(), "mk", "kn"), a.ravel(), b.ravel(), c, M=M, N=N, K=K, batch=B1,
             a_strides=(M * K, K, 1), b_strides=(0, N, 1), c_strides=(M * N, N, 1), alpha=0.5, beta=-1.5)
    assert_close(c.reshape(B1, M, N), 0.5 * R.matmul(a, b[None]) - 1.5 * c0, "float32")


@pytest.mark.parametrize("mode", ["workspace", "atomic"])
def test_split_k(rng, mode):
    M, N, K = size((12, 16, 36), (256, 256, 4096))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    c0 = random(rng, (M, N))
    c = c0.ravel().copy()
    k = make_gemm(cfg().replace(SPLIT_K=3, SPLIT_MODE=mode), "mk", "kn")
    ws_elems = k.workspace_size(M, N) // 4
    ws = np.full(ws_elems, np.nan, np.float32) if ws_elems else None
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(N, 1), alpha=0.5, beta=-2.0, workspace=ws)
    assert_close(c.reshape(M, N), 0.5 * R.matmul(a, b) - 2.0 * c0, "float32")


def test_bias_residual_relu_epilogue(rng):
    M, N, K = size((18, 20, 8), (512, 512, 256))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    bias, res = random(rng, (N,)), random(rng, (M, N))
    spec = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))
    c = poisoned(M * N)
    run_gemm(make_gemm(cfg(), "mk", "kn", epilogue=spec), a.ravel(), b.ravel(), c, M=M, N=N, K=K,
             a_strides=(K, 1), b_strides=(N, 1), c_strides=(N, 1), bias=bias, residual=res.ravel())
    want = np.maximum(R.matmul(a, b) + bias[None].astype(np.float64) + res, 0)
    assert_close(c.reshape(M, N), want, "float32")


# SWIZZLE > 1 on the fast mainloop (the block -> tile mapping it shares with the generic one, mainloop.make_tile_coords)
@pytest.mark.parametrize("swizzle", [2])
def test_swizzled_tile_order_writes_every_tile_once(rng, swizzle):
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
