"""The wgmma GEMM kernel against the float64 oracle: in the simulator (wgmma modelled per thread from the
descriptors) at tiny shapes, on an H200 at real shapes (NCUDNN_SHAPES=gpu)."""
import ml_dtypes
import numpy as np
import pytest

from ncudnn import reference as ref
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.wgmma.config import CONFIGS, WgmmaConfig
from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
from ncudnn.kernels.wgmma.launch import run_wgmma_gemm
from ncudnn.testing import SIM, assert_close, poison_value, size

_NP = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}
_STORE = {"bfloat16": np.uint16, "float16": np.float16, "float32": np.float32}
SMALL = WgmmaConfig(64, 1, 1, 3)


def _device(x):
    if SIM:
        return x
    from numba import cuda
    return cuda.to_device(x)


def _host(x):
    return x if SIM else x.copy_to_host()


def _run(rng, cfg, M, N, K, a_kmajor, b_kmajor, in_dtype="bfloat16", out_dtype="float32", steps=(),
         batch=(1, 1), beta=0.0, alpha=1.0):
    nb = batch[0] * batch[1]
    A = rng.uniform(-1, 1, (nb, M, K)).astype(_NP[in_dtype])
    B = rng.uniform(-1, 1, (nb, K, N)).astype(_NP[in_dtype])
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    old = rng.uniform(-1, 1, (nb, M, N)).astype(_NP[out_dtype])
    a = A if a_kmajor else np.ascontiguousarray(A.transpose(0, 2, 1))
    b = np.ascontiguousarray(B.transpose(0, 2, 1)) if b_kmajor else B
    a_str = ((batch[1] * M * K, M * K) + ((K, 1) if a_kmajor else (1, M)))
    b_str = ((batch[1] * K * N, K * N) + ((1, K) if b_kmajor else (N, 1)))
    c = old.copy() if beta else np.full((nb, M, N), poison_value(np.float32), _NP[out_dtype])
    kern = make_wgmma_gemm(cfg, a_kmajor, b_kmajor, in_dtype, ep.EpilogueSpec(steps, out_dtype))
    d_c = _device(c.view(_STORE[out_dtype]).reshape(-1))
    run_wgmma_gemm(kern, _device(a.view(_STORE[in_dtype]).reshape(-1)), _device(b.view(_STORE[in_dtype]).reshape(-1)),
                   d_c, M, N, K, a_str, b_str, (batch[1] * M * N, M * N, N, 1), batch=batch,
                   bias=_device(bias), bias_strides=(0, 1), alpha=alpha, beta=beta)
    got = _host(d_c).view(_NP[out_dtype]).reshape(nb, M, N)
    want = alpha * ref.matmul(A, B)
    if beta:
        want = want + beta * old.astype(np.float64)
    if steps:
        want = np.maximum(want + bias, 0.0)
    return got, want


@pytest.mark.parametrize("a_kmajor,b_kmajor", [(True, True), (True, False), (False, True), (False, False)])
def test_wgmma_gemm_layouts(rng, a_kmajor, b_kmajor):
    M, N, K = size((72, 80, 80), (1000, 1032, 1088))
    cfg = SMALL if SIM else CONFIGS[0]
    got, want = _run(rng, cfg, M, N, K, a_kmajor, b_kmajor)
    assert_close(got, want, 1e-5, "C")


def test_wgmma_gemm_fp16_bf16_out_bias_relu(rng):
    M, N, K = size((64, 64, 48), (512, 768, 1024))
    cfg = SMALL if SIM else CONFIGS[1]
    got, want = _run(rng, cfg, M, N, K, True, False, "float16", "bfloat16", (ep.bias("col"), ep.relu()))
    assert_close(got, want, 1e-2, "C")


def test_wgmma_gemm_batched_alpha_beta(rng):
    M, N, K = size((24, 64, 32), (256, 256, 512))
    cfg = SMALL if SIM else CONFIGS[0]
    got, want = _run(rng, cfg, M, N, K, True, True, "bfloat16", "float32", batch=(2, 1), alpha=0.5, beta=0.25)
    assert_close(got, want, 1e-5, "C")


@pytest.mark.skipif(not SIM, reason="two warpgroups x two m64 slices at simulator size")
def test_wgmma_gemm_two_warpgroups_two_slices(rng):
    cfg = WgmmaConfig(64, 2, 2, 3)       # 256 x 64 tile: slices at 8192-byte steps, both warpgroups
    got, want = _run(rng, cfg, 200, 40, 64, True, True)
    assert_close(got, want, 1e-5, "C")


@pytest.mark.parametrize("b_kmajor", [True, False])
def test_wgmma_gemm_early_loads_ring_wraps(rng, b_kmajor):
    # loads STAGES - 1 tiles ahead (with the L2 prefetch hint); 5 k tiles through a 3-deep ring (the slots wrap)
    M, N, K = size((40, 64, 320), (768, 1024, 4096))
    cfg = WgmmaConfig(64, 1, 1, 3, 8, 1, 256) if SIM else WgmmaConfig(256, 2, 1, 4, 8, 1, 256)
    got, want = _run(rng, cfg, M, N, K, True, b_kmajor)
    assert_close(got, want, 1e-5, "C")
