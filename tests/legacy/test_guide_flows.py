"""The guide's call sequences (shared/seeds/004), replayed as written: descriptor setup, output dims,
Find / Get algorithm, forward convolution with its workspace, pooling, in-place activation, batch norm
training. Numeric results are checked against the oracle where the engines exist."""
import numpy as np
import pytest

import ncudnn
from ncudnn import reference as R
from ncudnn.testing import assert_close, size

from .conftest import dev, engines_for, poisoned

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
N, C, H, W = size((1, 2, 6, 6), (8, 16, 32, 32))
K, RS = size(3, 32), 3


def test_guide_convolution_flow(rng):
    st, handle = ncudnn.cudnnCreate()
    assert st == OK
    _, xDesc = ncudnn.cudnnCreateTensorDescriptor()
    _, yDesc = ncudnn.cudnnCreateTensorDescriptor()
    _, wDesc = ncudnn.cudnnCreateFilterDescriptor()
    _, convDesc = ncudnn.cudnnCreateConvolutionDescriptor()
    NCHW, FLOAT = ncudnn.CUDNN_TENSOR_NCHW, ncudnn.CUDNN_DATA_FLOAT
    assert ncudnn.cudnnSetTensor4dDescriptor(xDesc, NCHW, FLOAT, N, C, H, W) == (OK,)
    assert ncudnn.cudnnSetFilter4dDescriptor(wDesc, FLOAT, NCHW, K, C, RS, RS) == (OK,)
    assert ncudnn.cudnnSetConvolution2dDescriptor(convDesc, 1, 1, 1, 1, 1, 1, ncudnn.CUDNN_CROSS_CORRELATION,
                                                  ncudnn.CUDNN_DATA_FLOAT) == (OK,)
    assert ncudnn.cudnnSetConvolutionMathType(convDesc, ncudnn.CUDNN_FMA_MATH) == (OK,)
    st, n, c, h, w = ncudnn.cudnnGetConvolution2dForwardOutputDim(convDesc, xDesc, wDesc)
    assert (st, n, c, h, w) == (OK, N, K, H, W)
    assert ncudnn.cudnnSetTensor4dDescriptor(yDesc, NCHW, FLOAT, n, c, h, w) == (OK,)

    st, returnedAlgoCount, perfResults = ncudnn.cudnnFindConvolutionForwardAlgorithm(handle, xDesc, wDesc, convDesc,
                                                                                     yDesc, 5)
    assert st == OK and returnedAlgoCount == 5 == len(perfResults)
    bestAlgo = perfResults[0].algo
    if perfResults[0].status != OK:
        assert not engines_for("conv_fprop")
        st = ncudnn.cudnnGetConvolutionForwardWorkspaceSize(handle, xDesc, wDesc, convDesc, yDesc, bestAlgo)
        assert st == (S.CUDNN_STATUS_NOT_SUPPORTED, None)
        pytest.skip("no conv_fprop engine registered yet: Find reports every algorithm NOT_SUPPORTED")
    st, workspaceSize = ncudnn.cudnnGetConvolutionForwardWorkspaceSize(handle, xDesc, wDesc, convDesc, yDesc, bestAlgo)
    assert st == OK and workspaceSize == perfResults[0].memory
    workspace = dev(np.zeros(max(workspaceSize, 1), np.uint8)) if workspaceSize else None
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    wt = rng.standard_normal((K, C, RS, RS)).astype(np.float32)
    y = poisoned((n, c, h, w))
    assert ncudnn.cudnnConvolutionForward(handle, 1.0, xDesc, dev(x), wDesc, dev(wt), convDesc, bestAlgo, workspace,
                                          workspaceSize, 0.0, yDesc, y) == (OK,)
    assert_close(y.copy_to_host(), R.conv_fprop(x, wt, pre_pad=1, post_pad=1), 1e-5)
    assert ncudnn.cudnnDestroy(handle) == (OK,)


def test_guide_pooling_activation_batchnorm_flow(rng):
    st, handle = ncudnn.cudnnCreate()
    _, srcDesc = ncudnn.cudnnCreateTensorDescriptor()
    _, dstDesc = ncudnn.cudnnCreateTensorDescriptor()
    ncudnn.cudnnSetTensor4dDescriptor(srcDesc, ncudnn.CUDNN_TENSOR_NCHW, ncudnn.CUDNN_DATA_FLOAT, N, C, H, W)
    _, poolingDesc = ncudnn.cudnnCreatePoolingDescriptor()
    assert ncudnn.cudnnSetPooling2dDescriptor(poolingDesc, ncudnn.CUDNN_POOLING_MAX, ncudnn.CUDNN_NOT_PROPAGATE_NAN,
                                              2, 2, 0, 0, 2, 2) == (OK,)
    st, n, c, h, w = ncudnn.cudnnGetPooling2dForwardOutputDim(poolingDesc, srcDesc)
    assert (st, n, c, h, w) == (OK, N, C, H // 2, W // 2)
    ncudnn.cudnnSetTensor4dDescriptor(dstDesc, ncudnn.CUDNN_TENSOR_NCHW, ncudnn.CUDNN_DATA_FLOAT, n, c, h, w)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    dst = poisoned((n, c, h, w))
    st = ncudnn.cudnnPoolingForward(handle, poolingDesc, 1.0, srcDesc, dev(x), 0.0, dstDesc, dst)
    if engines_for("resample_fwd"):
        assert st == (OK,)
        assert_close(dst.copy_to_host(), R.resample_forward(x, "MAXPOOL", (2, 2), (2, 2), (0, 0), (0, 0))[0], 1e-6)
    else:
        assert st == (S.CUDNN_STATUS_NOT_SUPPORTED,)

    # activation in place on yData, as the guide writes it
    _, activationDesc = ncudnn.cudnnCreateActivationDescriptor()
    assert ncudnn.cudnnSetActivationDescriptor(activationDesc, ncudnn.CUDNN_ACTIVATION_RELU,
                                               ncudnn.CUDNN_NOT_PROPAGATE_NAN, 0.0) == (OK,)
    yData = dev(x)
    assert ncudnn.cudnnActivationForward(handle, activationDesc, 1.0, srcDesc, yData, 0.0, srcDesc, yData) == (OK,)
    assert_close(yData.copy_to_host(), np.maximum(x, 0), 1e-7)

    # batch norm training with running averages (factor 0.9) and saved statistics
    _, bnDesc = ncudnn.cudnnCreateTensorDescriptor()
    assert ncudnn.cudnnDeriveBNTensorDescriptor(bnDesc, srcDesc, ncudnn.CUDNN_BATCHNORM_SPATIAL) == (OK,)
    scale = rng.standard_normal((1, C, 1, 1)).astype(np.float32)
    bias = rng.standard_normal((1, C, 1, 1)).astype(np.float32)
    rm, rv = np.zeros((1, C, 1, 1), np.float32), np.ones((1, C, 1, 1), np.float32)
    y, sm, si, drm, drv = poisoned((N, C, H, W)), poisoned((1, C, 1, 1)), poisoned((1, C, 1, 1)), dev(rm), dev(rv)
    st = ncudnn.cudnnBatchNormalizationForwardTraining(handle, ncudnn.CUDNN_BATCHNORM_SPATIAL, 1.0, 0.0, srcDesc,
                                                       dev(x), srcDesc, y, bnDesc, dev(scale), dev(bias), 0.9, drm, drv,
                                                       1e-5, sm, si)
    if engines_for("norm_fwd"):
        assert st == (OK,)
        ry, mean, inv, nrm, nrv = R.batchnorm_forward_training(x, scale, bias, 1e-5, 0.9, rm, rv)
        for got, ref in ((y, ry), (sm, mean), (si, inv), (drm, nrm), (drv, nrv)):
            assert_close(got.copy_to_host(), ref, 1e-5)
    else:
        assert st == (S.CUDNN_STATUS_NOT_SUPPORTED,)
        assert "norm_fwd" in ncudnn.cudnnGetLastErrorString()
    assert ncudnn.cudnnDestroy(handle) == (OK,)
