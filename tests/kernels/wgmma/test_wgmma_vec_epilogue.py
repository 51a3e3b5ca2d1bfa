"""The wgmma GEMM's vector epilogue (16-byte stores of C, kernels/wgmma/epi_vec.py) against the float64
oracle: BF16 / FP16 / FP32 outputs, the fused chain (bias, relu, residual, alpha / beta), column groups
straddling N, padded C rows, and the element-walk fallback for C layouts the vector path refuses. In the
simulator at tiny shapes; on an H200 at real shapes (NCUDNN_SHAPES=gpu)."""
import ml_dtypes
import numpy as np
import pytest

from ncudnn import reference as ref
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.wgmma import epi_vec
from ncudnn.kernels.wgmma.config import WgmmaConfig
from ncudnn.kernels.wgmma.kernel import make_wgmma_gemm
from ncudnn.kernels.wgmma.launch import run_wgmma_gemm
from ncudnn.testing import SIM, assert_close, poison_value, size

_NP = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}
_STORE = {"bfloat16": np.uint16, "float16": np.float16, "float32": np.float32}
SMALL = WgmmaConfig(64, 1, 1, 2, 8, 1)        # 64 x 64 tile, 128 threads, 2-deep ring (small K)
BIG = WgmmaConfig(256, 2, 1, 3, 8, 1)         # the H200 shapes


def _device(x):
    if SIM:
        return x
    from numba import cuda
    return cuda.to_device(x)


def _host(x):
    return x if SIM else x.copy_to_host()


def _run(rng, cfg, M, N, K, out_dtype="bfloat16", in_dtype="bfloat16", steps=(), ldc=None, c_off=0,
         alpha=1.0, beta=0.0, b_kmajor=False, batch=1):
    """C (batch, M, ldc)[..., :N] = epi(alpha A @ B + beta C_old); returns (C buffer as out_dtype, want, N)."""
    ldc = ldc or N
    A = rng.uniform(-1, 1, (batch, M, K)).astype(_NP[in_dtype])
    B = rng.uniform(-1, 1, (batch, K, N)).astype(_NP[in_dtype])
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    has_res = any(s[0] == "residual" for s in steps)
    resid = rng.uniform(-1, 1, (batch, M, N) if has_res else (1, 1, 1)).astype(np.float32)
    old = rng.uniform(-1, 1, (batch, M, ldc) if beta else (1, 1, 1)).astype(_NP[out_dtype])
    b = np.ascontiguousarray(B.transpose(0, 2, 1)) if b_kmajor else B
    c = old.copy() if beta else np.full((batch, M, ldc), poison_value(np.float32), _NP[out_dtype])
    buf = np.zeros(c.size + c_off, _STORE[out_dtype])
    buf[c_off:] = c.view(_STORE[out_dtype]).reshape(-1)
    d_buf = _device(buf)
    d_c = d_buf[c_off:]
    kern = make_wgmma_gemm(cfg, True, b_kmajor, in_dtype, ep.EpilogueSpec(steps, out_dtype))
    run_wgmma_gemm(kern, _device(A.view(_STORE[in_dtype]).reshape(-1)),
                   _device(b.view(_STORE[in_dtype]).reshape(-1)), d_c, M, N, K, (M * K, M * K, K, 1),
                   (K * N, K * N) + ((1, K) if b_kmajor else (N, 1)), (M * ldc, M * ldc, ldc, 1), batch=(batch, 1),
                   bias=_device(bias), bias_strides=(0, 1), res=_device(resid.reshape(-1)),
                   res_strides=(M * N, M * N, N, 1) if has_res else (0, 0, 0, 0), alpha=alpha, beta=beta)
    got = _host(d_buf)[c_off:].view(_NP[out_dtype]).reshape(batch, M, ldc)
    want = alpha * ref.matmul(A, B)
    if beta:
        want = want + beta * old[..., :N].astype(np.float64)
    for s in steps:
        if s[0] == "bias":
            want = want + bias
        elif s[0] == "pointwise":
            want = np.maximum(want, 0.0)
        elif s[0] == "residual":
            want = want + resid
    return got, want, N


def _check(got, want, N, tol):
    assert_close(got[..., :N], want, tol, "C")
    if got.shape[-1] > N:     # padding columns of C keep their poison: no store past N
        assert np.isnan(got[..., N:].astype(np.float32)).all()


@pytest.mark.parametrize("out_dtype,in_dtype", [("bfloat16", "bfloat16"), ("float16", "float16"),
                                                ("float32", "bfloat16")])
def test_sk16_vec_epilogue_small_k(rng, out_dtype, in_dtype):
    # one k tile or two (K 64 / 128 at GPU size), edge tiles in M and N
    M, N, K = size((72, 80, 64), (8200, 8192, 128))
    got, want, N = _run(rng, SMALL if SIM else BIG, M, N, K, out_dtype, in_dtype)
    _check(got, want, N, 1e-2 if out_dtype != "float32" else 1e-5)


def test_sk16_vec_epilogue_groups_straddle_n(rng, monkeypatch):
    # N % 8 != 0 in rows padded to a multiple of 8: full column groups as 16-byte stores, the last group
    # element by element, nothing past N
    M, N, K = size((40, 76, 64), (1000, 1028, 256))
    calls = []
    real = epi_vec.stg4

    def spy(arr, i, w0, w1, w2, w3):
        calls.append(i)
        real(arr, i, w0, w1, w2, w3)
    if SIM:
        monkeypatch.setattr(epi_vec, "stg4", spy)
    cfg = SMALL.replace(GROUP_M=2) if SIM else BIG    # SIM: a fresh kernel (the factory caches by config)
    got, want, N = _run(rng, cfg, M, N, K, ldc=N + (-N) % 8 + 8, b_kmajor=True)
    _check(got, want, N, 1e-2)
    assert len(calls) == (M * (N // 8) if SIM else 0)


def test_sk16_vec_epilogue_fused_chain(rng):
    # alpha, beta * C_old, column bias, relu then residual add; FP16 output, batch of 2
    M, N, K = size((24, 64, 64), (512, 768, 128))
    steps = (ep.bias("col"), ep.relu(), ep.residual())
    got, want, N = _run(rng, SMALL if SIM else BIG, M, N, K, "float16", "float16", steps, alpha=0.5, beta=0.25,
                        batch=2, b_kmajor=True)
    _check(got, want, N, 1e-2)


def test_sk16_misaligned_c_takes_element_walk(rng):
    # C 2 bytes past a 16-byte boundary: the vector path refuses it, the element walk stores C
    M, N, K = size((40, 64, 64), (700, 1024, 64))
    got, want, N = _run(rng, SMALL if SIM else BIG, M, N, K, c_off=1)
    _check(got, want, N, 1e-2)


def test_sk16_vec_epilogue_evict_first(rng):
    # EPI = 2: the same vector path with .cs stores
    M, N, K = size((40, 64, 64), (1000, 1024, 128))
    cfg = SMALL.replace(EPI=2) if SIM else BIG.replace(EPI=2)
    got, want, N = _run(rng, cfg, M, N, K, "float16", "float16")
    _check(got, want, N, 1e-2)


def test_sk16_element_walk_epi0(rng):
    # EPI = 0: the element-walk epilogue stays a runnable config
    M, N, K = size((40, 64, 128), (1000, 1024, 256))
    cfg = SMALL.replace(EPI=0) if SIM else BIG.replace(EPI=0)
    got, want, N = _run(rng, cfg, M, N, K, "bfloat16", "bfloat16", (ep.bias("col"),))
    _check(got, want, N, 1e-2)


@pytest.mark.skipif(not SIM, reason="counts the simulator's 16-byte stores")
@pytest.mark.parametrize("c_off,ldc,vectors", [(0, 64, 64 * 64 // 8), (1, 64, 0), (0, 68, 0)])
def test_sk16_vector_stores_taken(rng, monkeypatch, c_off, ldc, vectors):
    # aligned C with rows of multiples of 8: every 8-column group is one 16-byte store; a misaligned C or
    # an ldc that is not a multiple of 8 takes none (the element walk)
    calls = []
    real = epi_vec.stg4

    def spy(arr, i, w0, w1, w2, w3):
        calls.append(i)
        real(arr, i, w0, w1, w2, w3)
    monkeypatch.setattr(epi_vec, "stg4", spy)
    cfg = SMALL.replace(GROUP_M=3 + c_off + (ldc - 64))   # a fresh kernel (the factory caches by config)
    got, want, N = _run(rng, cfg, 64, 64, 64, ldc=ldc, c_off=c_off)
    _check(got, want, N, 1e-2)
    assert len(calls) == vectors


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
def test_sk16_packed_fast_path(rng, monkeypatch, out_dtype):
    # EPI = 3, alpha-only epilogue, beta 0: the packed 16-bit staging and 16-byte copies (M / N edges)
    M, N, K = size((72, 80, 64), (8200, 8192, 128))
    calls = []
    real = epi_vec.stg4

    def spy(arr, i, w0, w1, w2, w3):
        calls.append(i)
        real(arr, i, w0, w1, w2, w3)
    if SIM:
        monkeypatch.setattr(epi_vec, "stg4", spy)
    cfg = SMALL.replace(EPI=3, GROUP_M=5) if SIM else BIG.replace(EPI=3)
    got, want, N = _run(rng, cfg, M, N, K, out_dtype, out_dtype, alpha=0.75)
    _check(got, want, N, 1e-2)
    assert len(calls) == (M * N // 8 if SIM else 0)


@pytest.mark.parametrize("beta,n", [(0.5, 64), (0.0, 76)])
def test_sk16_packed_falls_back(rng, beta, n):
    # EPI = 3 with beta != 0, or N % 8 != 0 (rows padded): the f32 staging path stores C
    M, N, K = size((40, n, 64), (1000, n * 16, 128))
    cfg = SMALL.replace(EPI=3) if SIM else BIG.replace(EPI=3)
    got, want, N = _run(rng, cfg, M, N, K, beta=beta, ldc=N + (-N) % 8 + 8 if N % 8 else None, b_kmajor=True)
    _check(got, want, N, 1e-2)
