"""The convolution descriptor's math type decides TF32 for FP32 convolutions (cuDNN's cudnnMathType_t):
CUDNN_TENSOR_OP_MATH and CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION permit it (an NHWC FP32 conv runs on conv_tc as
TF32), CUDNN_FMA_MATH forbids it, CUDNN_DEFAULT_MATH keeps FP32 exact for now (cuDNN's permits TF32 on A100 and
newer: a default switch not made yet), NVIDIA_TF32_OVERRIDE=0 bars it under every math type. Get_v7 / Find report
each result's mathType: the descriptor's for a tensor-core config, CUDNN_FMA_MATH otherwise."""
import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
from ncudnn import reference as ref
from ncudnn.legacy import algos as A
from ncudnn.legacy.conv import ranked
from ncudnn.legacy.conv_algo import _problem
from ncudnn.testing import TOL, assert_close, poison_value, size

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
NHWC, F32 = ncudnn.CUDNN_TENSOR_NHWC, ncudnn.CUDNN_DATA_FLOAT
TF32_MATH = (ncudnn.CUDNN_TENSOR_OP_MATH, ncudnn.CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
N, C, H, W, K = size((2, 8, 5, 4), (8, 64, 28, 28)) + size((16,), (128,))


def _setup(math, n=N, c_=C, h=H, w_=W, k=K):
    """NHWC FP32 x / y, NHWC (KRSC) filter, 3x3 pad 1 cross-correlation under ``math``."""
    _, x = L.cudnnCreateTensorDescriptor()
    assert L.cudnnSetTensor4dDescriptor(x, NHWC, F32, n, c_, h, w_) == (OK,)
    _, y = L.cudnnCreateTensorDescriptor()
    assert L.cudnnSetTensor4dDescriptor(y, NHWC, F32, n, k, h, w_) == (OK,)
    _, w = L.cudnnCreateFilterDescriptor()
    assert L.cudnnSetFilter4dDescriptor(w, F32, NHWC, k, c_, 3, 3) == (OK,)
    _, c = L.cudnnCreateConvolutionDescriptor()
    assert L.cudnnSetConvolution2dDescriptor(c, 1, 1, 1, 1, 1, 1, ncudnn.CUDNN_CROSS_CORRELATION, F32) == (OK,)
    assert L.cudnnSetConvolutionMathType(c, math) == (OK,)
    return x, w, c, y


def _engines(handle, x, w, c, y):
    return [ec.name for ec in ranked(_problem("fwd", x, w, c, y).lowered(handle))]


def _forward(handle, rng, x, w, c, y, algo):
    """cudnnConvolutionForward with ``algo`` on random data: (relative error vs float64, vs the float64 result
    of TF32-truncated inputs)."""
    xv = rng.uniform(-1, 1, (N, C, H, W)).astype(np.float32)
    wv = (rng.uniform(-1, 1, (K, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
    nhwc = lambda a: cuda.to_device(np.ascontiguousarray(a.transpose(0, 2, 3, 1)))  # noqa: E731
    out = cuda.to_device(np.full((N, H, W, K), poison_value(np.float32), np.float32))
    st, ws = L.cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, c, y, algo)
    assert st == OK
    buf = cuda.device_array(max(ws, 1), np.uint8)
    assert L.cudnnConvolutionForward(handle, 1.0, x, nhwc(xv), w, nhwc(wv), c, algo, buf, ws, 0.0, y, out) == (OK,), \
        ncudnn.cudnnGetLastErrorString()
    got = out.copy_to_host().transpose(0, 3, 1, 2).astype(np.float64)
    trunc = lambda a: (a.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)  # noqa: E731
    f64 = lambda a, b: ref.conv_fprop(a, b, stride=(1, 1), pre_pad=(1, 1), post_pad=(1, 1),  # noqa: E731
                                      dilation=(1, 1))
    return (assert_close(got, f64(xv.astype(np.float64), wv.astype(np.float64)), "tf32"),
            assert_close(got, f64(trunc(xv), trunc(wv)), "tf32", name="truncated"))


@pytest.mark.parametrize("math", TF32_MATH, ids=lambda m: m.name)
def test_tensor_op_math_runs_fp32_conv_as_tf32(handle, rng, math):
    x, w, c, y = _setup(math)
    assert "conv_tc" in _engines(handle, x, w, c, y)
    st, n, rows = L.cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, c, y, 8)
    assert st == OK
    done = [r for r in rows if r.status == OK]
    assert {r.mathType for r in done} <= {math, ncudnn.CUDNN_FMA_MATH}
    tc = [r for r in done if r.mathType == math]
    assert tc, rows
    algo = tc[0].algo
    assert A.configs_for(ranked(_problem("fwd", x, w, c, y).lowered(handle)), algo, "fwd")[0].name == "conv_tc"
    err, err_trunc = _forward(handle, rng, x, w, c, y, algo)
    assert err > TOL["float32"] and err_trunc <= TOL["float32"], (err, err_trunc)   # TF32 ran, and nothing else


def test_find_reports_math_type_per_result(handle):
    x, w, c, y = _setup(ncudnn.CUDNN_TENSOR_OP_MATH, *size((1, 8, 3, 3, 8), (N, C, H, W, K)))
    st, n, found = L.cudnnFindConvolutionForwardAlgorithm(handle, x, w, c, y, 8)
    assert st == OK
    done = [r for r in found if r.status == OK]
    assert {r.mathType for r in done} == {ncudnn.CUDNN_TENSOR_OP_MATH, ncudnn.CUDNN_FMA_MATH}, found
    low = _problem("fwd", x, w, c, y).lowered(handle)
    for r in done:      # tensor-core configs carry the descriptor's math type, the others FMA_MATH
        tc = A.configs_for(ranked(low), r.algo, "fwd")[0].name == "conv_tc"
        assert r.mathType == (ncudnn.CUDNN_TENSOR_OP_MATH if tc else ncudnn.CUDNN_FMA_MATH), r


@pytest.mark.parametrize("math", (ncudnn.CUDNN_FMA_MATH, ncudnn.CUDNN_DEFAULT_MATH), ids=lambda m: m.name)
def test_fma_and_default_math_keep_fp32_exact(handle, rng, math):
    x, w, c, y = _setup(math)
    assert "conv_tc" not in _engines(handle, x, w, c, y)
    st, n, rows = L.cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, c, y, 8)
    assert st == OK and all(r.mathType == ncudnn.CUDNN_FMA_MATH for r in rows if r.status == OK), rows
    err, _ = _forward(handle, rng, x, w, c, y, A.FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM)   # conv_tc's family
    assert err <= TOL["float32"], err


def test_tf32_override_bars_tensor_op_math(handle, monkeypatch):
    x, w, c, y = _setup(ncudnn.CUDNN_TENSOR_OP_MATH)
    assert "conv_tc" in _engines(handle, x, w, c, y)
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")     # the same handle and descriptors: not the cached lowering
    assert "conv_tc" not in _engines(handle, x, w, c, y)
    st, n, rows = L.cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, c, y, 8)
    assert st == OK and all(r.mathType == ncudnn.CUDNN_FMA_MATH for r in rows if r.status == OK), rows
