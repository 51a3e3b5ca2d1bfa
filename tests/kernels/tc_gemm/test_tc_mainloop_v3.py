"""Mainloop v3 of the tensor-core kernels (32-bit shared addresses, rolled stage addresses, k bounds
per load slot) against the float64 oracle: GEMM layouts, multi-stage rings with K past several rings,
TF32 halves, the conv gather; every GPU config of v3 on a GPU; sm_90 compile (slow)."""
import numpy as np
import pytest

from ncudnn.kernels.runtime import compile_check
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.tc_gemm import CONFIGS, TcGemmConfig, check, make_tc_gemm, run_tc_gemm
from ncudnn.testing import SIM, assert_close, poison_value, size
from test_tc_conv import _run as conv_run
from test_tc_gemm import _run as gemm_run

V3 = TcGemmConfig(32, 32, 32, 2, 2, 3, 1, VERSION=3)


def test_version_knob():
    assert V3.name.endswith("_v3") and check(V3)[0]
    ok, why = check(V3.replace(VERSION=2))
    assert not ok and "VERSION" in why
    src = make_tc_gemm(V3, True, False, "bfloat16", "float32").source
    assert "ldmatrix_x4_trans_a" in src and "cp_async_cg_16_zfill_a" in src and "% 3" not in src


@pytest.mark.parametrize("a_kmajor,b_kmajor", [(True, False), (False, True)])
def test_v3_gemm_layouts(rng, a_kmajor, b_kmajor):
    # K = 136: five k tiles through a 3-deep ring (the stage addresses wrap twice), a partial last tile
    M, N, K = size((40, 24, 136), (1000, 776, 1032))
    cfg = V3 if SIM else CONFIGS[0].replace(VERSION=3)
    got, ref = gemm_run(rng, cfg, M, N, K, a_kmajor, b_kmajor, "bfloat16", "float32", alpha=0.5)
    assert_close(got, ref, "bfloat16")


def test_v3_tf32_halves(rng):
    M, N, K = size((24, 40, 40), (520, 264, 1000))
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((N, K)).astype(np.float32)        # stored (n, k)
    c = np.full(M * N, poison_value(np.dtype(np.float32)), np.float32)
    cfg = V3.replace(BLOCK_K=16) if SIM else CONFIGS[0].replace(BLOCK_K=16, VERSION=3)
    kern = make_tc_gemm(cfg, True, True, "float32", "float32")
    if SIM:
        a, b, cd = A.view(np.uint16).reshape(-1), B.view(np.uint16).reshape(-1), c
    else:
        from numba import cuda
        a, b, cd = (cuda.to_device(v) for v in (A.view(np.uint16).reshape(-1), B.view(np.uint16).reshape(-1), c))
    run_tc_gemm(kern, a, b, cd, M, N, 2 * K, (2 * K, 1), (1, 2 * K), (N, 1))
    got = (c if SIM else cd.copy_to_host()).reshape(M, N)
    assert_close(got, A.astype(np.float64) @ B.astype(np.float64).T, "tf32")


def test_v3_conv_gather(rng):
    cfg = V3
    got, ref = conv_run(rng, cfg, 1, 16, 5, 4, 16, 3, 3, (1, 1), (1, 1), (1, 1), "bfloat16", "bfloat16")
    assert_close(got, ref, "bfloat16")


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CONFIGS[:2], ids=lambda c: c.name)   # the engines' fused tiles: engine tests
def test_gpu_v3_configs(rng, cfg):
    got, ref = gemm_run(rng, cfg.replace(VERSION=3), 1536, 1280, 1024, True, False, "bfloat16", "float32")
    assert_close(got, ref, "bfloat16")


@pytest.mark.slow
def test_v3_v4_cases_compile_for_sm90_without_spills():
    """Every registered v3 / v4 compile case (plain, fused, TF32, conv) links for sm_90: no spills, no stack."""
    from ncudnn.kernels.tc_conv import cases as conv_cases  # noqa: F401 (registers)
    from ncudnn.kernels.tc_gemm import cases as gemm_cases  # noqa: F401 (registers)
    names = [n for n in compile_check.registered_cases() if "_v3" in n or n.endswith("_v4")]
    assert len(names) >= 19
    results = compile_check.run_compile_check(names, timeout=3000, jobs=2)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert all(r.cubin_info and r.spill_stores == 0 and r.stack_frame == 0 for r in results)


@pytest.mark.parametrize("shape", [
    # N, C, H, W, K, R, S, stride, pad, dil (C % BLOCK_K == 0: one tap per k tile)
    (1, 32, 5, 4, 16, 3, 3, (1, 1), (1, 1), (1, 1)),     # one channel block per tap, padding on every side
    (2, 64, 6, 5, 24, 3, 2, (2, 1), (1, 0), (1, 2)),     # two channel blocks per tap, stride, dilation, batch
], ids=["3x3_c32", "strided_dilated_c64"])
def test_v4_conv_one_tap_gather(rng, shape):
    N, C, H, W, K, R, S, st, pad, dil = shape
    got, ref = conv_run(rng, V3.replace(VERSION=4), N, C, H, W, K, R, S, st, pad, dil, "bfloat16", "bfloat16")
    assert_close(got, ref, "bfloat16")


@pytest.mark.parametrize("cfg", [V3, TcGemmConfig(32, 64, 32, 2, 2, 2, 1, VERSION=3)], ids=["wtn16", "wtn32"])
def test_v3_fused_row_epilogue_row_bias_residual(rng, cfg):
    """The v3 epilogue's row loop (rows of the staged strip, 16 or 32 lanes a row): row bias, residual,
    alpha, batch, M / N edges, F32 output vs the float64 oracle."""
    from ncudnn.kernels.tc_gemm import fused_args, fused_grid
    from ncudnn.kernels.tc_gemm.launch import _compiled

    bsz, M, N, K = 2, 24, 40, 40
    if not SIM:
        bsz, M, N, K = 3, 1000, 776, 520
        cfg = CONFIGS[0].replace(VERSION=3)
    A = rng.standard_normal((bsz, M, K)).astype(np.float32).astype(np.float16)
    B = rng.standard_normal((bsz, K, N)).astype(np.float32).astype(np.float16)
    bias = rng.standard_normal(M).astype(np.float32)
    res = rng.standard_normal((bsz, M, N)).astype(np.float32)
    c = np.full(bsz * M * N, poison_value(np.dtype(np.float32)), np.float32)
    spec = ep.EpilogueSpec((ep.bias("row"), ep.residual()), "float32")
    kern = make_tc_gemm(cfg, True, False, "float16", epi=spec, bias_dtype="float32", res_dtype="float32")
    if SIM:
        a_d, b_d, c_d, bias_d, res_d = A.reshape(-1), B.reshape(-1), c, bias, res.reshape(-1)
    else:
        from numba import cuda
        a_d, b_d, c_d, bias_d, res_d = (cuda.to_device(v) for v in (A.reshape(-1), B.reshape(-1), c, bias,
                                                                       res.reshape(-1)))
    args = fused_args(kern, a_d, b_d, c_d, bias_d, res_d, M, N, K, (bsz, 1), (M * K, 0, K, 1), (K * N, 0, N, 1),
                      (M * N, 0, N, 1), (0, 1), (M * N, 0, N, 1), alpha=0.5)
    _compiled(kern).launch(fused_grid(kern, M, N, (bsz, 1)), (cfg.threads, 1, 1), args, 0, kern.smem)
    got = (c if SIM else c_d.copy_to_host()).reshape(bsz, M, N)
    want = 0.5 * np.einsum("zmk,zkn->zmn", A.astype(np.float64), B.astype(np.float64)) + bias[None, :, None] + res
    assert_close(got, want, "float16")
