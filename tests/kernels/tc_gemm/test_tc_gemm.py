"""Tensor-core GEMM against the float64 oracle: tiny single- and few-block problems in the simulator
(the ptx fallbacks), real shapes on a GPU; the GPU-size configs compile for sm_90 without spills."""
import ml_dtypes
import numpy as np
import pytest

from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.tc_gemm import (CONFIGS, TcGemmConfig, check, check_problem, make_tc_gemm,
                                    run_tc_gemm)
from ncudnn.kernels.tc_gemm import cases as tc_cases  # noqa: F401 (registers compile cases)
from ncudnn.testing import SIM, TOL, assert_close, poison_value, size

_NP = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}
_STORE = {"bfloat16": np.uint16, "float16": np.float16, "float32": np.float32}


def _to_device(x):
    if SIM:
        return x
    from numba import cuda
    return cuda.to_device(x)


def _run(rng, cfg, M, N, K, a_kmajor, b_kmajor, in_dtype, out_dtype, batch=1, alpha=1.0):
    A = rng.standard_normal((batch, M, K)).astype(_NP[in_dtype])
    B = rng.standard_normal((batch, K, N)).astype(_NP[in_dtype])
    a = A if a_kmajor else np.ascontiguousarray(A.transpose(0, 2, 1))
    b = np.ascontiguousarray(B.transpose(0, 2, 1)) if b_kmajor else B
    a_flat = a.view(_STORE[in_dtype]).reshape(-1)
    b_flat = b.view(_STORE[in_dtype]).reshape(-1)
    c = np.full(batch * M * N, poison_value(np.dtype(_NP[out_dtype])), _NP[out_dtype])
    c_flat = c.view(_STORE[out_dtype])
    kern = make_tc_gemm(cfg, a_kmajor, b_kmajor, in_dtype, out_dtype)
    a_dev, b_dev, c_dev = _to_device(a_flat), _to_device(b_flat), _to_device(c_flat)
    run_tc_gemm(kern, a_dev, b_dev, c_dev, M, N, K,
                (K, 1) if a_kmajor else (1, M), (1, K) if b_kmajor else (N, 1), (N, 1),
                batch=batch, batch_strides=(M * K, K * N, M * N), alpha=alpha)
    out = c_flat if SIM else c_dev.copy_to_host()
    got = out.view(_NP[out_dtype]).reshape(batch, M, N)
    ref = alpha * np.einsum("zmk,zkn->zmn", A.astype(np.float64), B.astype(np.float64))
    return got, ref


_SMALL = TcGemmConfig(32, 32, 32, 2, 2, 2, 1)      # four warps, one 16x16 warp tile each


@pytest.mark.parametrize("a_kmajor,b_kmajor", [(True, False), (True, True), (False, False),
                                               (False, True)])
def test_layouts_bf16(rng, a_kmajor, b_kmajor):
    M, N, K = size((40, 24, 64), (1000, 776, 1032))
    cfg = _SMALL if SIM else CONFIGS[0]
    got, ref = _run(rng, cfg, M, N, K, a_kmajor, b_kmajor, "bfloat16", "float32", alpha=0.5)
    assert_close(got, ref, "bfloat16")


def test_single_warp_f16_out_f16(rng):
    cfg = TcGemmConfig(16, 16, 16, 1, 1, 2, 1)       # the smallest tile: one warp, one mma k step
    M, N, K = size((16, 16, 48), (200, 136, 328))
    got, ref = _run(rng, cfg, M, N, K, True, False, "float16", "float16")
    assert_close(got, ref, "float16")


def test_batched_bf16_out_bf16(rng):
    cfg = TcGemmConfig(16, 32, 32, 1, 2, 3, 2)
    M, N, K = size((24, 32, 40), (264, 520, 200))
    got, ref = _run(rng, cfg, M, N, K, True, True, "bfloat16", "bfloat16", batch=2)
    assert_close(got, ref, "bfloat16")


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_gpu_configs(rng, cfg):
    got, ref = _run(rng, cfg, 1536, 1280, 1024, True, False, "bfloat16", "float32")
    assert_close(got, ref, "bfloat16")


def test_check_rejects_with_reasons():
    assert check(TcGemmConfig(128, 128, 8))[1].startswith("BLOCK_K=8")
    assert "warp tile N" in check(TcGemmConfig(128, 16, 32, 2, 2))[1]
    assert "shared memory" in check(TcGemmConfig(256, 256, 64, 2, 4, 4))[1]
    assert all(check(c)[0] for c in CONFIGS)
    kern = make_tc_gemm(_SMALL, True, False)
    assert check_problem(kern, 16, 16, 16, (16, 1), (16, 1))[0]
    assert "unit k stride" in check_problem(kern, 16, 16, 16, (1, 16), (16, 1))[1]
    assert "K=12" in check_problem(kern, 16, 16, 12, (16, 1), (16, 1))[1]
    assert "aligned" in check_problem(kern, 16, 16, 16, (16, 1), (16, 1), ptrs=(0x1008, 0))[1]
    with pytest.raises(ValueError, match="BLOCK_K"):
        make_tc_gemm(TcGemmConfig(128, 128, 8))


def _ours():
    return [n for n, c in compile_check.registered_cases().items()
            if c.module == "ncudnn.kernels.tc_gemm.cases"]


def test_cases_registered():
    assert len(_ours()) == (len(tc_cases.TC_GEMM_CASES) + len(tc_cases.TC_FUSED_CASES)
                            + len(tc_cases.TC_FP8_CASES)) >= len(CONFIGS)


@pytest.mark.slow
def test_configs_compile_for_sm90_without_spills():
    results = compile_check.run_compile_check(_ours(), timeout=3000, jobs=4)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert all(r.cubin_info and r.spill_stores == 0 for r in results)


def test_tf32_nt_f32_out_batched(rng):
    """FP32 operands through TF32 (k-contiguous A and B, viewed as 16-bit halves): K, leading dims and
    batch strides are passed in halves."""
    cfg = _SMALL.replace(BLOCK_K=16) if SIM else CONFIGS[0].replace(BLOCK_K=16)   # 32 halves of k per tile
    batch, (M, N, K) = 2, size((24, 40, 36), (600, 392, 520))
    A = rng.standard_normal((batch, M, K)).astype(np.float32)
    Bt = rng.standard_normal((batch, N, K)).astype(np.float32)     # B stored (n, k)
    c = np.full(batch * M * N, poison_value(np.dtype(np.float32)), np.float32)
    kern = make_tc_gemm(cfg, True, True, "float32", "float32")
    assert kern.in_dtype == "tf32" and kern.cfg.BLOCK_K == 2 * cfg.BLOCK_K
    a_dev, b_dev, c_dev = (_to_device(x) for x in (A.view(np.uint16).reshape(-1), Bt.view(np.uint16).reshape(-1), c))
    run_tc_gemm(kern, a_dev, b_dev, c_dev, M, N, 2 * K, (2 * K, 1), (1, 2 * K), (N, 1), batch=batch,
                batch_strides=(2 * M * K, 2 * N * K, M * N))
    got = (c if SIM else c_dev.copy_to_host()).reshape(batch, M, N)
    ref = np.einsum("zmk,znk->zmn", A.astype(np.float64), Bt.astype(np.float64))
    assert_close(got, ref, "tf32")
    with pytest.raises(ValueError, match="k-contiguous"):
        make_tc_gemm(cfg, True, False, "float32", "float32")


@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_descale_scale_amax(rng, fp8):
    """FP8 A (m, k) and B stored (n, k) on m16n8k32 (16-bit halves view: K and strides in halves):
    alpha = descale_a * descale_b, the epilogue scales by scale_d and stores FP8; amax of |alpha * acc|."""
    from ncudnn.kernels.pointwise import epilogue as ep
    from ncudnn.kernels.tc_gemm import fused_args, fused_grid
    from ncudnn.kernels.tc_gemm.launch import _compiled

    # BLOCK_K in FP8 elements (32 / 64 halves); on the GPU 8 warps (2x2 with amax spilled 8 bytes)
    cfg = TcGemmConfig(32, 32, 64, 2, 2, 2, 1) if SIM else TcGemmConfig(128, 128, 64, 2, 4, 4)
    M, N, K = size((24, 40, 96), (520, 392, 1024))
    npdt = getattr(ml_dtypes, fp8)
    sa, sb, scale_d = 4.0, 0.5, 2.0
    A = (rng.standard_normal((M, K)) * sa).astype(npdt)
    Bt = (rng.standard_normal((N, K)) * sb).astype(npdt)
    spec = ep.EpilogueSpec((ep.scale(scale_d),), fp8)
    kern = make_tc_gemm(cfg, True, True, fp8, epi=spec, bias_dtype="float32", res_dtype="float32", amax=True)
    c = np.full(M * N, 0x7F, np.uint8)                          # e4m3 NaN / e5m2 NaN bits
    amax = np.full(1, 0.0, np.float32)
    dev = [_to_device(x) for x in (A.view(np.uint16).reshape(-1), Bt.view(np.uint16).reshape(-1), c, amax)]
    alpha = 1.0 / (sa * sb)
    args = fused_args(kern, dev[0], dev[1], dev[2], dev[2], dev[2], M, N, K // 2, (1, 1), (0, 0, K // 2, 1),
                      (0, 0, 1, K // 2), (0, 0, N, 1), alpha=alpha) + (dev[3],)
    _compiled(kern).launch(fused_grid(kern, M, N, (1, 1)), (kern.cfg.threads, 1, 1), args, 0, kern.smem)
    got_c = (c if SIM else dev[2].copy_to_host()).view(npdt).reshape(M, N).astype(np.float64)
    got_amax = float((amax if SIM else dev[3].copy_to_host())[0])
    D = alpha * (A.astype(np.float64) @ Bt.astype(np.float64).T)
    ref_c = (scale_d * D).astype(npdt).astype(np.float64)       # the FP8 cast of the exact result
    assert got_amax == pytest.approx(np.abs(D).max(), rel=1e-5)
    tol = 0.13 if fp8 == "float8_e4m3fn" else 0.26             # one FP8 rounding step of the result
    assert np.all(np.abs(got_c - ref_c) <= tol * np.abs(ref_c) + 1e-2)
