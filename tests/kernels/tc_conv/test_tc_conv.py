"""Tensor-core implicit-GEMM conv fprop kernel against the float64 oracle (ncudnn.reference.conv):
tiny NHWC problems in the simulator (padding, stride, dilation, C below and above BLOCK_K, M / K edges; FP32 as
TF32 over uint16 halves),
ResNet-like shapes on a GPU; the GPU configs compile for sm_90 without spills (slow)."""
import ml_dtypes
import numpy as np
import pytest

from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.tc_conv import CONV_CONFIGS, check_conv, conv_args, conv_grid, make_tc_conv_fprop
from ncudnn.kernels.tc_conv.fprop import halves_per_element
from ncudnn.kernels.tc_gemm import TcGemmConfig
from ncudnn.kernels.tc_gemm.launch import _compiled
from ncudnn.reference.conv import conv_fprop
from ncudnn.testing import SIM, assert_close, poison_value

_NP = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}
_SMALL = TcGemmConfig(32, 32, 32, 2, 2, 2, 1)


def _dev(x):
    if SIM:
        return x
    from numba import cuda
    return cuda.to_device(x)


def _store(x):
    return x.view(np.uint16) if x.dtype == ml_dtypes.bfloat16 else x


def _run(rng, cfg, N, C, H, W, K, R, S, stride, pad, dil, dtype, out_dtype, relu=True):
    """One launch; FP32 ``dtype`` runs the TF32 kernel over uint16 halves (C and the strides in halves)."""
    x = rng.standard_normal((N, C, H, W)).astype(_NP[dtype])
    w = (rng.standard_normal((K, C, R, S)) / np.sqrt(C * R * S)).astype(_NP[dtype])
    bias = rng.standard_normal(K).astype(_NP[out_dtype])
    P = (H + 2 * pad[0] - dil[0] * (R - 1) - 1) // stride[0] + 1
    Q = (W + 2 * pad[1] - dil[1] * (S - 1) - 1) // stride[1] + 1
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    w_krsc = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
    y = np.full(N * P * Q * K, poison_value(np.dtype(_NP[out_dtype])), _NP[out_dtype])
    steps = (ep.bias("col"), ep.relu()) if relu else (ep.bias("col"),)
    kern = make_tc_conv_fprop(cfg, dtype, ep.EpilogueSpec(steps, out_dtype), out_dtype, out_dtype)
    hw = halves_per_element(dtype)
    halves = (lambda v: v.view(np.uint16)) if hw == 2 else _store
    xd, wd = (_dev(halves(v).reshape(-1)) for v in (x_nhwc, w_krsc))
    yd, bd = (_dev(_store(v).reshape(-1)) for v in (y, bias))
    Ck = C * hw
    args = conv_args(kern, xd, wd, yd, bd, yd, N, Ck, H, W, K, P, Q, R, S, stride, pad, dil,
                     (H * W * Ck, W * Ck, Ck), R * S * Ck, K, 1)
    _compiled(kern).launch(conv_grid(kern, N, P, Q, K), (cfg.threads, 1, 1), args, 0, kern.smem)
    out = _store(y) if SIM else yd.copy_to_host()
    got = out.view(_NP[out_dtype]).reshape(N, P, Q, K).transpose(0, 3, 1, 2).astype(np.float64)
    if hw == 2:   # the tensor core reads TF32: the low 13 mantissa bits dropped
        x, w = ((v.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32) for v in (x, w))
    ref = conv_fprop(x.astype(np.float64), w.astype(np.float64), stride=stride, pre_pad=pad, post_pad=pad,
                     dilation=dil) + bias.astype(np.float64)[None, :, None, None]
    return got, np.maximum(ref, 0) if relu else ref


@pytest.mark.parametrize("shape", [
    # N, C, H, W, K, R, S, stride, pad, dil
    (1, 8, 5, 5, 24, 3, 3, (1, 1), (1, 1), (1, 1)),      # C < BLOCK_K: several taps per k tile
    (1, 40, 4, 3, 16, 1, 1, (1, 1), (0, 0), (1, 1)),     # 1x1, C not a multiple of BLOCK_K
    (2, 16, 6, 5, 8, 3, 2, (2, 1), (1, 0), (1, 2)),      # stride, asymmetric filter, dilation, batch
], ids=["3x3_c8", "1x1_c40", "strided_dilated"])
def test_conv_fprop_bf16_bias_relu(rng, shape):
    N, C, H, W, K, R, S, st, pad, dil = shape
    got, ref = _run(rng, _SMALL, N, C, H, W, K, R, S, st, pad, dil, "bfloat16", "bfloat16")
    assert_close(got, ref, "bfloat16")


def test_conv_fprop_f16_f32_out_no_relu(rng):
    got, ref = _run(rng, _SMALL, 1, 16, 4, 4, 16, 3, 3, (1, 1), (1, 1), (1, 1), "float16", "float32",
                    relu=False)
    assert_close(got, ref, "float16")


@pytest.mark.parametrize("version", [1, 3, 4])
def test_conv_fprop_tf32_halves(rng, version):
    """FP32 x / w as TF32: BLOCK_K 32 halves = 16 channels a k tile (C = 16: v4's one tap per k tile; v1 / v3
    the carrying gather), against the oracle of TF32-truncated inputs at the FP32 tolerance."""
    got, ref = _run(rng, _SMALL.replace(VERSION=version), 1, 16, 4, 3, 8, 3, 3, (1, 1), (1, 1), (1, 2), "float32",
                    "float32")
    assert_close(got, ref, "float32")


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CONV_CONFIGS, ids=lambda c: c.name)
def test_gpu_resnet_3x3(rng, cfg):
    got, ref = _run(rng, cfg, 4, 64, 28, 28, 128, 3, 3, (1, 1), (1, 1), (1, 1), "bfloat16", "float32")
    assert_close(got, ref, "bfloat16")


def test_check_conv_reasons():
    assert check_conv(64, 64, (64 * 9, 1, 64 * 3, 64), (64 * 9, 1, 64 * 3, 64))[0]
    assert "channels-last" in check_conv(64, 64, (64 * 9, 9, 3, 1), (64 * 9, 1, 64 * 3, 64))[1]
    assert "C = 12" in check_conv(12, 64, (12 * 9, 1, 36, 12), (108, 1, 36, 12))[1]
    assert "KRSC" in check_conv(64, 64, (64 * 9, 1, 64 * 3, 64), (64 * 9, 9, 3, 1))[1]
    assert check_conv(12, 64, (12 * 9, 1, 36, 12), (108, 1, 36, 12), chunk=4)[0]      # FP32: 4 channels a chunk
    assert "multiple of 4" in check_conv(6, 64, (6 * 9, 1, 18, 6), (54, 1, 18, 6), chunk=4)[1]


def _conv_cases():
    from ncudnn.kernels.runtime import compile_check
    from ncudnn.kernels.tc_conv import cases  # noqa: F401 (registers)
    return [n for n, c in compile_check.registered_cases().items() if c.module == "ncudnn.kernels.tc_conv.cases"]


def test_conv_cases_registered():
    from ncudnn.kernels.tc_conv.cases import TC_CONV_CASES, TC_CONV_TF32_CASES
    assert len(TC_CONV_CASES) == 3 * len(CONV_CONFIGS)                    # v1, v3, v4
    assert len(TC_CONV_TF32_CASES) == len(CONV_CONFIGS) + 1               # v4, and the first at v3
    assert len(_conv_cases()) - 1 == len(TC_CONV_CASES) + len(TC_CONV_TF32_CASES)   # and the pad kernel


@pytest.mark.slow
def test_conv_configs_compile_for_sm90_without_spills():
    from ncudnn.kernels.runtime import compile_check
    results = compile_check.run_compile_check(_conv_cases(), timeout=3000, jobs=4)
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert all(r.cubin_info and r.spill_stores == 0 for r in results)
