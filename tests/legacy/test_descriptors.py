"""Descriptor create / set / get / destroy round trips and every documented BAD_PARAM path."""
import pytest

import ncudnn
import ncudnn.legacy as L
from ncudnn.types import cudnnDataType_t as DT

from .conftest import tdesc

S = ncudnn.cudnnStatus_t
OK, BAD, NS = S.CUDNN_STATUS_SUCCESS, S.CUDNN_STATUS_BAD_PARAM, S.CUDNN_STATUS_NOT_SUPPORTED


def _bad(ret, status=BAD, word=""):
    assert ret[0] == status, ret
    assert all(v is None for v in ret[1:])
    msg = ncudnn.cudnnGetLastErrorString()
    assert msg.startswith(status.name) and word in msg, msg


# ------------------------------------------------------------------------------------- tensor

def test_tensor_4d_nchw_nhwc_roundtrip():
    _, d = L.cudnnCreateTensorDescriptor()
    assert L.cudnnSetTensor4dDescriptor(d, ncudnn.CUDNN_TENSOR_NCHW, DT.CUDNN_DATA_HALF, 2, 3, 5, 7) == (OK,)
    assert L.cudnnGetTensor4dDescriptor(d) == (OK, DT.CUDNN_DATA_HALF, 2, 3, 5, 7, 105, 35, 7, 1)
    assert L.cudnnGetTensorSizeInBytes(d) == (OK, 2 * 3 * 5 * 7 * 2)
    assert L.cudnnSetTensor4dDescriptor(d, ncudnn.CUDNN_TENSOR_NHWC, DT.CUDNN_DATA_FLOAT, 2, 3, 5, 7) == (OK,)
    assert L.cudnnGetTensor4dDescriptor(d)[1:] == (DT.CUDNN_DATA_FLOAT, 2, 3, 5, 7, 105, 1, 21, 3)
    assert L.cudnnDestroyTensorDescriptor(d) == (OK,)
    _bad(L.cudnnGetTensor4dDescriptor(d), word="destroyed")


def test_tensor_4d_ex_strides_and_size():
    _, d = L.cudnnCreateTensorDescriptor()
    assert L.cudnnSetTensor4dDescriptorEx(d, DT.CUDNN_DATA_FLOAT, 2, 3, 4, 5, 100, 30, 6, 1) == (OK,)
    assert L.cudnnGetTensor4dDescriptor(d)[6:] == (100, 30, 6, 1)
    # bytes from the first to one past the last addressed element
    assert L.cudnnGetTensorSizeInBytes(d) == (OK, 4 * (1 + 100 + 2 * 30 + 3 * 6 + 4))


def test_tensor_nd_and_nd_ex():
    _, d = L.cudnnCreateTensorDescriptor()
    assert L.cudnnSetTensorNdDescriptor(d, DT.CUDNN_DATA_DOUBLE, 5, [1, 2, 3, 4, 5], [120, 60, 20, 5, 1]) == (OK,)
    st, dt, nb, dims, strides = L.cudnnGetTensorNdDescriptor(d, 8)
    assert (st, dt, nb, dims, strides) == (OK, DT.CUDNN_DATA_DOUBLE, 5, [1, 2, 3, 4, 5], [120, 60, 20, 5, 1])
    assert L.cudnnGetTensorNdDescriptor(d, 2)[3:] == ([1, 2], [120, 60])  # cut to the request
    assert L.cudnnSetTensorNdDescriptorEx(d, ncudnn.CUDNN_TENSOR_NHWC, DT.CUDNN_DATA_FLOAT, 5, [2, 3, 4, 5, 6]) == (OK,)
    assert L.cudnnGetTensorNdDescriptor(d, 5)[4] == [360, 1, 90, 18, 3]
    _bad(L.cudnnGetTensor4dDescriptor(d), word="not 4")


def test_tensor_nchw_vect_c():
    _, d = L.cudnnCreateTensorDescriptor()
    assert L.cudnnSetTensor4dDescriptor(d, ncudnn.CUDNN_TENSOR_NCHW_VECT_C, DT.CUDNN_DATA_INT8x4, 1, 8, 2, 3) == (OK,)
    assert L.cudnnGetTensorSizeInBytes(d) == (OK, 8 * 2 * 3)
    _bad(L.cudnnSetTensor4dDescriptor(d, ncudnn.CUDNN_TENSOR_NCHW_VECT_C, DT.CUDNN_DATA_INT8x4, 1, 6, 2, 3),
         word="multiple of 4")
    _bad(L.cudnnSetTensor4dDescriptor(d, ncudnn.CUDNN_TENSOR_NCHW_VECT_C, DT.CUDNN_DATA_FLOAT, 1, 8, 2, 3),
         word="8-bit")


@pytest.mark.parametrize("args, word", [
    ((0, 0, 0, 3, 4, 5), "must be >= 1"),
    ((0, 0, 2, -3, 4, 5), "must be >= 1"),
    ((7, 0, 2, 3, 4, 5), "format"),
    ((0, 99, 2, 3, 4, 5), "dataType"),
    ((0, 0, 2.5, 3, 4, 5), "integer"),
])
def test_tensor_4d_bad_param(args, word):
    _, d = L.cudnnCreateTensorDescriptor()
    _bad(L.cudnnSetTensor4dDescriptor(d, *args), word=word)


def test_tensor_bad_param_paths():
    _, d = L.cudnnCreateTensorDescriptor()
    _bad(L.cudnnGetTensor4dDescriptor(d), word="not been set")
    _bad(L.cudnnSetTensor4dDescriptor(None, 0, 0, 1, 1, 1, 1), word="NULL")
    _bad(L.cudnnSetTensor4dDescriptor(object(), 0, 0, 1, 1, 1, 1), word="not a cudnnTensorDescriptor_t")
    _bad(L.cudnnSetTensor4dDescriptorEx(d, 0, 1, 2, 3, 4, 24, -12, 4, 1), word="negative")
    _bad(L.cudnnSetTensorNdDescriptor(d, 0, 2, [3, 4], [4, 1]), word="at least 3")
    _bad(L.cudnnSetTensorNdDescriptor(d, 0, 9, [1] * 9, [1] * 9), status=NS, word="CUDNN_DIM_MAX")
    _bad(L.cudnnSetTensorNdDescriptor(d, 0, 4, [1, 2, 3], [6, 3, 1]), word="dimA")
    _bad(L.cudnnSetTensorNdDescriptor(d, 0, 3, [1, 0, 3], [3, 3, 1]), word="must be >= 1")
    _bad(L.cudnnSetTensorNdDescriptor(d, 0, 3, [1, 2, 3], None), word="NULL")
    tdesc((1, 2, 3, 4))
    assert L.cudnnDestroyTensorDescriptor(None) == (OK,)


# ------------------------------------------------------------------------------------- filter

def test_filter_roundtrip_and_size():
    _, f = L.cudnnCreateFilterDescriptor()
    assert L.cudnnSetFilter4dDescriptor(f, DT.CUDNN_DATA_HALF, ncudnn.CUDNN_TENSOR_NHWC, 8, 3, 5, 5) == (OK,)
    assert L.cudnnGetFilter4dDescriptor(f) == (OK, DT.CUDNN_DATA_HALF, ncudnn.CUDNN_TENSOR_NHWC, 8, 3, 5, 5)
    assert L.cudnnGetFilterSizeInBytes(f) == (OK, 8 * 3 * 5 * 5 * 2)
    assert f.strides == (75, 1, 15, 3)
    assert L.cudnnSetFilterNdDescriptor(f, DT.CUDNN_DATA_FLOAT, 0, 5, [4, 2, 3, 3, 3]) == (OK,)
    assert L.cudnnGetFilterNdDescriptor(f, 5) == (OK, DT.CUDNN_DATA_FLOAT, 0, 5, [4, 2, 3, 3, 3])
    _bad(L.cudnnGetFilter4dDescriptor(f), word="not 4")
    _bad(L.cudnnSetFilter4dDescriptor(f, 0, 0, 0, 3, 3, 3), word=">= 1")
    _bad(L.cudnnSetFilter4dDescriptor(f, 0, 5, 1, 3, 3, 3), word="format")
    _bad(L.cudnnSetFilterNdDescriptor(f, 0, 0, 2, [1, 1]), word="at least 3")
    assert L.cudnnDestroyFilterDescriptor(f) == (OK,)
    _bad(L.cudnnGetFilterSizeInBytes(f), word="destroyed")


# -------------------------------------------------------------------------------- convolution

def test_convolution_roundtrip():
    _, c = L.cudnnCreateConvolutionDescriptor()
    assert L.cudnnGetConvolutionMathType(c) == (OK, ncudnn.CUDNN_DEFAULT_MATH)
    assert L.cudnnGetConvolutionGroupCount(c) == (OK, 1)
    assert L.cudnnGetConvolutionReorderType(c) == (OK, ncudnn.CUDNN_DEFAULT_REORDER)
    assert L.cudnnSetConvolution2dDescriptor(c, 1, 2, 3, 4, 1, 2, ncudnn.CUDNN_CONVOLUTION,
                                             DT.CUDNN_DATA_FLOAT) == (OK,)
    assert L.cudnnGetConvolution2dDescriptor(c) == (OK, 1, 2, 3, 4, 1, 2, ncudnn.CUDNN_CONVOLUTION,
                                                    DT.CUDNN_DATA_FLOAT)
    assert L.cudnnSetConvolutionNdDescriptor(c, 3, [0, 1, 2], [1, 1, 2], [1, 2, 1], ncudnn.CUDNN_CROSS_CORRELATION,
                                             DT.CUDNN_DATA_DOUBLE) == (OK,)
    assert L.cudnnGetConvolutionNdDescriptor(c, 3) == (OK, 3, [0, 1, 2], [1, 1, 2], [1, 2, 1],
                                                       ncudnn.CUDNN_CROSS_CORRELATION, DT.CUDNN_DATA_DOUBLE)
    assert L.cudnnGetConvolutionNdDescriptor(c, 1)[2:5] == ([0], [1], [1])
    _bad(L.cudnnGetConvolution2dDescriptor(c), word="not 2")
    for setter, getter, value in ((L.cudnnSetConvolutionMathType, L.cudnnGetConvolutionMathType, ncudnn.CUDNN_FMA_MATH),
                                  (L.cudnnSetConvolutionGroupCount, L.cudnnGetConvolutionGroupCount, 4),
                                  (L.cudnnSetConvolutionReorderType, L.cudnnGetConvolutionReorderType,
                                   ncudnn.CUDNN_NO_REORDER)):
        assert setter(c, value) == (OK,)
        assert getter(c) == (OK, value)


@pytest.mark.parametrize("args, word", [
    ((-1, 0, 1, 1, 1, 1, 1, 0), "paddings"),
    ((0, 0, 0, 1, 1, 1, 1, 0), "strides"),
    ((0, 0, 1, 1, 0, 1, 1, 0), "dilations"),
    ((0, 0, 1, 1, 1, 1, 2, 0), "mode"),
    ((0, 0, 1, 1, 1, 1, 1, 77), "computeType"),
])
def test_convolution_bad_param(args, word):
    _, c = L.cudnnCreateConvolutionDescriptor()
    _bad(L.cudnnSetConvolution2dDescriptor(c, *args), word=word)


def test_convolution_bad_param_more():
    _, c = L.cudnnCreateConvolutionDescriptor()
    _bad(L.cudnnSetConvolutionNdDescriptor(c, 0, [], [], [], 1, 0), word="arrayLength")
    _bad(L.cudnnSetConvolutionNdDescriptor(c, 7, [0] * 7, [1] * 7, [1] * 7, 1, 0), status=NS, word="CUDNN_DIM_MAX")
    _bad(L.cudnnSetConvolutionNdDescriptor(c, 2, [0], [1, 1], [1, 1], 1, 0), word="padA")
    _bad(L.cudnnSetConvolutionGroupCount(c, 0), word="groupCount")
    _bad(L.cudnnSetConvolutionMathType(c, 9), word="mathType")
    _bad(L.cudnnSetConvolutionReorderType(c, 5), word="reorderType")
    _bad(L.cudnnGetConvolution2dDescriptor(c), word="not been set")


# ------------------------------------------------------------------------------ pooling etc.

def test_pooling_roundtrip_every_mode():
    _, p = L.cudnnCreatePoolingDescriptor()
    for mode in ncudnn.cudnnPoolingMode_t:
        for nan in ncudnn.cudnnNanPropagation_t:
            assert L.cudnnSetPooling2dDescriptor(p, mode, nan, 3, 2, 1, 0, 2, 1) == (OK,)
            assert L.cudnnGetPooling2dDescriptor(p) == (OK, mode, nan, 3, 2, 1, 0, 2, 1)
    assert L.cudnnSetPoolingNdDescriptor(p, 0, 1, 3, [2, 2, 2], [0, 1, 0], [2, 1, 2]) == (OK,)
    assert L.cudnnGetPoolingNdDescriptor(p, 3) == (OK, 0, 1, 3, [2, 2, 2], [0, 1, 0], [2, 1, 2])
    _bad(L.cudnnGetPooling2dDescriptor(p), word="not 2")
    _bad(L.cudnnSetPooling2dDescriptor(p, 4, 0, 2, 2, 0, 0, 2, 2), word="mode")
    _bad(L.cudnnSetPooling2dDescriptor(p, 0, 2, 2, 2, 0, 0, 2, 2), word="maxpoolingNanOpt")
    _bad(L.cudnnSetPooling2dDescriptor(p, 0, 0, 0, 2, 0, 0, 2, 2), word="window")
    _bad(L.cudnnSetPooling2dDescriptor(p, 0, 0, 2, 2, -1, 0, 2, 2), word="padding")
    _bad(L.cudnnSetPooling2dDescriptor(p, 0, 0, 2, 2, 0, 0, 2, 0), word="stride")
    _bad(L.cudnnSetPoolingNdDescriptor(p, 0, 0, 0, [], [], []), word="nbDims")


def test_activation_roundtrip_every_mode():
    _, a = L.cudnnCreateActivationDescriptor()
    for mode in ncudnn.cudnnActivationMode_t:
        assert L.cudnnSetActivationDescriptor(a, mode, ncudnn.CUDNN_PROPAGATE_NAN, 0.25) == (OK,)
        assert L.cudnnGetActivationDescriptor(a) == (OK, mode, ncudnn.CUDNN_PROPAGATE_NAN, 0.25)
    assert L.cudnnGetActivationDescriptorSwishBeta(a) == (OK, 1.0)
    assert L.cudnnSetActivationDescriptorSwishBeta(a, 1.5) == (OK,)
    assert L.cudnnGetActivationDescriptorSwishBeta(a) == (OK, 1.5)
    _bad(L.cudnnSetActivationDescriptor(a, 7, 0, 0.0), word="mode")
    _bad(L.cudnnSetActivationDescriptor(a, 1, 3, 0.0), word="reluNanOpt")
    _bad(L.cudnnSetActivationDescriptor(a, 1, 0, "x"), word="coef")


def test_op_and_reduce_tensor_roundtrip():
    _, o = L.cudnnCreateOpTensorDescriptor()
    _bad(L.cudnnGetOpTensorDescriptor(o), word="not been set")
    for op in ncudnn.cudnnOpTensorOp_t:
        assert L.cudnnSetOpTensorDescriptor(o, op, DT.CUDNN_DATA_DOUBLE, 1) == (OK,)
        assert L.cudnnGetOpTensorDescriptor(o) == (OK, op, DT.CUDNN_DATA_DOUBLE, 1)
    _bad(L.cudnnSetOpTensorDescriptor(o, 6, 0, 0), word="opTensorOp")
    _, r = L.cudnnCreateReduceTensorDescriptor()
    for op in ncudnn.cudnnReduceTensorOp_t:
        assert L.cudnnSetReduceTensorDescriptor(r, op, 0, 1, 1, 0) == (OK,)
        assert L.cudnnGetReduceTensorDescriptor(r) == (OK, op, 0, 1, 1, 0)
    _bad(L.cudnnSetReduceTensorDescriptor(r, 9, 0, 0, 0, 0), word="reduceTensorOp")
    _bad(L.cudnnSetReduceTensorDescriptor(r, 0, 0, 0, 2, 0), word="reduceTensorIndices")
    _bad(L.cudnnSetReduceTensorDescriptor(r, 0, 0, 0, 0, 4), word="reduceTensorIndicesType")
    assert L.cudnnDestroyOpTensorDescriptor(o) == (OK,) and L.cudnnDestroyReduceTensorDescriptor(r) == (OK,)


def test_lrn_defaults_and_limits():
    _, n = L.cudnnCreateLRNDescriptor()
    assert L.cudnnGetLRNDescriptor(n) == (OK, 5, 1e-4, 0.75, 2.0)
    assert L.cudnnSetLRNDescriptor(n, 3, 2e-4, 0.5, 1.0) == (OK,)
    assert L.cudnnGetLRNDescriptor(n) == (OK, 3, 2e-4, 0.5, 1.0)
    _bad(L.cudnnSetLRNDescriptor(n, 0, 1e-4, 0.75, 2.0), word="lrnN")
    _bad(L.cudnnSetLRNDescriptor(n, 17, 1e-4, 0.75, 2.0), word="lrnN")
    _bad(L.cudnnSetLRNDescriptor(n, 5, 1e-4, 0.001, 2.0), word="lrnBeta")
    _bad(L.cudnnSetLRNDescriptor(n, 5, 1e-4, 0.75, 1e-6), word="lrnK")


def test_dropout_descriptor(handle):
    from numba import cuda
    import numpy as np

    _, d = L.cudnnCreateDropoutDescriptor()
    st, size = L.cudnnDropoutGetStatesSize(handle)
    assert st == OK and size > 0
    states = cuda.to_device(np.zeros(size, np.uint8))
    assert L.cudnnSetDropoutDescriptor(d, handle, 0.25, states, size, 42) == (OK,)
    st, p, s, seed = L.cudnnGetDropoutDescriptor(d, handle)
    assert (st, p, s, seed) == (OK, 0.25, states, 42)
    assert L.cudnnDropoutGetReserveSpaceSize(tdesc((2, 3, 4, 5))) == (OK, 2 * 3 * 4 * 5 * 4)
    _bad(L.cudnnSetDropoutDescriptor(d, handle, 1.0, states, size, 1), word="dropout")
    _bad(L.cudnnSetDropoutDescriptor(d, handle, -0.1, states, size, 1), word="dropout")
    _bad(L.cudnnSetDropoutDescriptor(d, handle, 0.5, states, size - 1, 1), word="stateSizeInBytes")
    _bad(L.cudnnSetDropoutDescriptor(d, handle, 0.5, None, 0, 1), word="states is NULL")
    _bad(L.cudnnSetDropoutDescriptor(d, None, 0.5, states, size, 1), word="handle")
    assert L.cudnnRestoreDropoutDescriptor(d, handle, 0.5, states, size, 7) == (OK,)
    assert L.cudnnGetDropoutDescriptor(d, handle)[1] == 0.5
