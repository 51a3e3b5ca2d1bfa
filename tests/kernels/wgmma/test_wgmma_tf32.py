"""The wgmma GEMM with FP32 operands on TF32 (m64nNk8 .tf32) against the float64 oracle: in the simulator
(the fragment model reads 32-bit words and drops their low 13 mantissa bits, as the tensor core does) at
tiny shapes, on an H200 at real shapes (NCUDNN_SHAPES=gpu)."""
import numpy as np
import pytest

from ncudnn import reference as ref
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.wgmma.config import CONFIGS, WgmmaConfig
from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
from ncudnn.kernels.wgmma.launch import run_wgmma_gemm
from ncudnn.testing import SIM, assert_close, poison_value, size

SMALL = WgmmaConfig(64, 1, 1, 3)
#: relative-norm tolerance of a TF32 product: truncated 10-bit mantissas shrink every product by ~7e-4 on
#: average (ncudnn.testing.TOL["tf32"] = 3e-3)
TF32_TOL = "tf32"


def _device(x):
    if SIM:
        return x
    from numba import cuda
    return cuda.to_device(x)


def _host(x):
    return x if SIM else x.copy_to_host()


def _tf32(x):
    """x with the low 13 mantissa bits cleared (what the tensor core multiplies)."""
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _run(rng, cfg, M, N, K, batch=1, steps=(), out="float32", alpha=1.0, beta=0.0):
    A = rng.uniform(-1, 1, (batch, M, K)).astype(np.float32)
    Bt = rng.uniform(-1, 1, (batch, N, K)).astype(np.float32)      # B stored (n, k): k-contiguous
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    old = rng.uniform(-1, 1, (batch, M, N)).astype(np.float32)
    c = old.copy() if beta else np.full((batch, M, N), poison_value(np.float32), np.float32)
    kern = make_wgmma_gemm(cfg, True, True, "float32", ep.EpilogueSpec(steps, out))
    d_c = _device(c.reshape(-1))
    run_wgmma_gemm(kern, _device(A.reshape(-1)), _device(Bt.reshape(-1)), d_c, M, N, K, (M * K, M * K, K, 1),
                   (N * K, N * K, 1, K), (M * N, M * N, N, 1), batch=(batch, 1), bias=_device(bias),
                   alpha=alpha, beta=beta)
    got = _host(d_c).reshape(batch, M, N)
    B = Bt.transpose(0, 2, 1)
    want = alpha * ref.matmul(A, B)
    if beta:
        want = want + beta * old.astype(np.float64)
    if steps:
        want = np.maximum(want + bias, 0.0)
    return got, want, A, B


def test_wgmma_tf32_gemm_edges_and_k_tail(rng):
    # M, N off the tile; K = 2 full 32-wide k tiles + a 12-element tail (zero-filled 16-byte chunks)
    M, N, K = size((40, 56, 76), (1000, 1032, 1100))
    cfg = SMALL if SIM else CONFIGS[0]
    got, want, A, B = _run(rng, cfg, M, N, K)
    assert_close(got, want, TF32_TOL, "C")
    if SIM:   # the model multiplies truncated inputs exactly: within FP32 summation of the TF32 product
        assert_close(got, ref.matmul(_tf32(A), _tf32(B)), 1e-6, "C (tf32 inputs)")
        assert np.linalg.norm(got - want) > 1e-6 * np.linalg.norm(want)   # the inputs were truncated


def test_wgmma_tf32_gemm_batched_bias_relu_alpha_beta(rng):
    M, N, K = size((24, 64, 40), (512, 768, 1024))
    cfg = SMALL if SIM else CONFIGS[1]
    got, want, _, _ = _run(rng, cfg, M, N, K, batch=2, steps=(ep.bias("col"), ep.relu()), alpha=0.5, beta=0.25)
    assert_close(got, want, TF32_TOL, "C")


def test_wgmma_tf32_refuses_mn_major():
    with pytest.raises(ValueError, match="k-contiguous"):
        make_wgmma_gemm(SMALL, True, False, "float32")
    with pytest.raises(ValueError, match="k-contiguous"):
        make_wgmma_gemm(SMALL, False, True, "float32")
