"""Fused GEMM epilogues (ncudnn.kernels.pointwise.epilogue) against the oracle: bias, activation chains,
scale, residual, output casts."""
import numpy as np
import pytest

from ncudnn import reference as R
from ncudnn.kernels.runtime import dtypes as dt
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.gemm import GemmConfig, make_gemm, run_gemm
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.types import cudnnPointwiseMode_t as PM

CFG = size(GemmConfig(BLOCK_M=16, BLOCK_N=16, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0),
           GemmConfig())


def _run(rng, spec, out="float32", alpha=1.0, beta=0.0):
    M, N, K = size((13, 17, 9), (600, 500, 300))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    c0 = random(rng, (M, N))
    bias_axis = spec.bias_axis
    bias = random(rng, (M if bias_axis == "row" else N,))
    res = random(rng, (N, M)).T          # residual in column-major strides
    import ml_dtypes
    host = c0 if beta else np.full((M, N), poison_value(np.float32), np.float32)
    host = host.astype({"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[out])
    c = dt.to_storage(host).ravel().copy()
    k = make_gemm(CFG, "mk", "kn", ("float32", "float32", out, "float32", "float32"), spec)
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(N, 1), alpha=alpha, beta=beta, bias=bias if bias_axis else None,
             residual=np.ascontiguousarray(res.T).ravel() if spec.has_residual else None,
             residual_strides=(1, M))
    ref = alpha * R.matmul(a, b) + (beta * host.astype(np.float64) if beta else 0)
    return dt.from_storage(c, out).reshape(M, N), ref, bias, res


def test_bias_relu_chain(rng):
    spec = ep.EpilogueSpec((ep.bias("col"), ep.relu()))
    got, ref, bias, _ = _run(rng, spec, alpha=0.5)
    assert_close(got, np.maximum(ref + bias[None, :], 0), "float32")


def test_row_bias_clipped_leaky_relu_scale(rng):
    params = dict(relu_lower_clip=-0.2, relu_upper_clip=0.6, relu_lower_clip_slope=0.1)
    spec = ep.EpilogueSpec((ep.bias("row"), ep.relu(**params), ep.scale(3.0)))
    got, ref, bias, _ = _run(rng, spec, beta=0.5)
    want = 3.0 * R.pointwise(PM.CUDNN_POINTWISE_RELU_FWD, ref + bias[:, None], **params)
    assert_close(got, want, "float32")


@pytest.mark.parametrize("mode", [PM.CUDNN_POINTWISE_GELU_FWD, PM.CUDNN_POINTWISE_SWISH_FWD,
                                  PM.CUDNN_POINTWISE_TANH_FWD, PM.CUDNN_POINTWISE_SIGMOID_FWD,
                                  PM.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD])
def test_activation_then_residual(rng, mode):
    spec = ep.EpilogueSpec((ep.pointwise(mode), ep.residual()))
    got, ref, _, res = _run(rng, spec)
    assert_close(got, R.pointwise(mode, ref) + res, "float32")


def test_residual_mul_and_bf16_output(rng):
    import ml_dtypes  # noqa: F401
    spec = ep.EpilogueSpec((ep.bias("col"), ep.residual(PM.CUDNN_POINTWISE_MUL), ep.relu()))
    got, ref, bias, res = _run(rng, spec, out="bfloat16")
    assert_close(got, np.maximum((ref + bias) * res, 0), "bfloat16")


def test_spec_is_hashable_and_cached():
    s1 = ep.EpilogueSpec((ep.bias("col"), ep.relu(relu_upper_clip=6.0)))
    s2 = ep.EpilogueSpec((ep.bias("col"), ep.relu(relu_upper_clip=6.0)))
    assert s1 == s2 and hash(s1) == hash(s2)
    assert ep.build(s1) is ep.build(s2)
    assert "math" not in ep.source(ep.EpilogueSpec((ep.relu(),)))
    with pytest.raises(ValueError):
        ep.pointwise(PM.CUDNN_POINTWISE_ADD)
    with pytest.raises(ValueError):
        ep.residual(PM.CUDNN_POINTWISE_RELU_FWD)
    with pytest.raises(ValueError):
        make_gemm(CFG.replace(SPLIT_K=2, SPLIT_MODE="atomic"), "mk", "kn", ("float32",) * 3,
                  ep.EpilogueSpec((ep.relu(),)))
