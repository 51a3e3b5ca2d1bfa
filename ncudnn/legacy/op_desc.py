"""Pooling, activation, op-tensor, reduce-tensor and LRN descriptors (cudnn_ops.h).

Pooling output size per spatial dim: out = 1 + (in + 2 * pad - window) / stride (integer division).
Checks (BAD_PARAM): window / stride < 1, padding < 0, an invalid enumerant, nbDims < 1
(NOT_SUPPORTED above CUDNN_DIM_MAX - 2); LRN: n outside [CUDNN_LRN_MIN_N, CUDNN_LRN_MAX_N],
k < 1e-5, beta < 0.01.
"""
from ..errors import BadParamError, CudnnError, c_api
from ..types import (MACROS, cudnnActivationMode_t, cudnnDataType_t, cudnnIndicesType_t,
                     cudnnNanPropagation_t, cudnnOpTensorOp_t, cudnnPoolingMode_t, cudnnReduceTensorIndices_t,
                     cudnnReduceTensorOp_t, cudnnStatus_t)
from ._util import Descriptor, desc_arg, enum_arg, float_arg, int_arg, int_array
from .tensor_desc import TensorDescriptor

S = cudnnStatus_t
DIM_MAX = MACROS["CUDNN_DIM_MAX"]
NAN = cudnnNanPropagation_t


# ---------------------------------------------------------------------------------- pooling

class PoolingDescriptor(Descriptor):
    KIND = "Pooling"

    def __init__(self):
        super().__init__()
        self.mode = cudnnPoolingMode_t.CUDNN_POOLING_MAX
        self.nan_opt = NAN.CUDNN_NOT_PROPAGATE_NAN
        self.window = self.pad = self.stride = ()

    @property
    def nbDims(self):
        return len(self.window)

    def signature(self):
        return (int(self.mode), int(self.nan_opt), self.window, self.pad, self.stride)

    def output_dims(self, x):
        n = self.nbDims
        if x.nbDims != n + 2:
            raise BadParamError(f"pooling over {n} spatial dims needs a {n + 2}-d input, not {x.nbDims}-d")
        out = list(x.dims[:2])
        for i in range(n):
            o = (x.dims[2 + i] + 2 * self.pad[i] - self.window[i]) // self.stride[i] + 1
            if o < 1:
                raise BadParamError(f"spatial dim {i}: input {x.dims[2 + i]} + 2 x padding {self.pad[i]} is "
                                    f"smaller than the window {self.window[i]}")
            out.append(o)
        return tuple(out)


def _set_pool(d, mode, nan, window, pad, stride):
    mode = enum_arg(cudnnPoolingMode_t, mode, "mode")
    nan = enum_arg(NAN, nan, "maxpoolingNanOpt")
    if any(v < 1 for v in window):
        raise BadParamError(f"window {window} must be >= 1")
    if any(v < 1 for v in stride):
        raise BadParamError(f"stride {stride} must be >= 1")
    if any(v < 0 for v in pad):
        raise BadParamError(f"padding {pad} must be >= 0")
    d.mode, d.nan_opt, d.window, d.pad, d.stride = mode, nan, tuple(window), tuple(pad), tuple(stride)
    d.is_set = True


@c_api(1)
def cudnnCreatePoolingDescriptor():
    return PoolingDescriptor()


@c_api(0)
def cudnnDestroyPoolingDescriptor(poolingDesc):
    if poolingDesc is None:
        return
    desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetPooling2dDescriptor(poolingDesc, mode, maxpoolingNanOpt, windowHeight, windowWidth,
                                verticalPadding, horizontalPadding, verticalStride, horizontalStride):
    d = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc", need_set=False)
    v = [int_arg(a, n) for a, n in ((windowHeight, "windowHeight"), (windowWidth, "windowWidth"),
                                    (verticalPadding, "verticalPadding"), (horizontalPadding, "horizontalPadding"),
                                    (verticalStride, "verticalStride"), (horizontalStride, "horizontalStride"))]
    _set_pool(d, mode, maxpoolingNanOpt, v[0:2], v[2:4], v[4:6])


@c_api(8)
def cudnnGetPooling2dDescriptor(poolingDesc):
    """(status, mode, maxpoolingNanOpt, windowHeight, windowWidth, verticalPadding, horizontalPadding,
    verticalStride, horizontalStride)."""
    d = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc")
    if d.nbDims != 2:
        raise BadParamError(f"poolingDesc has {d.nbDims} spatial dims, not 2")
    return (d.mode, d.nan_opt) + d.window + d.pad + d.stride


@c_api(0)
def cudnnSetPoolingNdDescriptor(poolingDesc, mode, maxpoolingNanOpt, nbDims, windowDimA, paddingA, strideA):
    d = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc", need_set=False)
    n = int_arg(nbDims, "nbDims")
    if n < 1:
        raise BadParamError(f"nbDims = {n} must be >= 1")
    if n > DIM_MAX - 2:
        raise CudnnError(f"nbDims = {n} exceeds CUDNN_DIM_MAX - 2", S.CUDNN_STATUS_NOT_SUPPORTED)
    _set_pool(d, mode, maxpoolingNanOpt, int_array(windowDimA, n, "windowDimA"), int_array(paddingA, n, "paddingA"),
              int_array(strideA, n, "strideA"))


@c_api(6)
def cudnnGetPoolingNdDescriptor(poolingDesc, nbDimsRequested):
    """(status, mode, maxpoolingNanOpt, nbDims, windowDimA, paddingA, strideA)."""
    d = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc")
    k = min(int_arg(nbDimsRequested, "nbDimsRequested"), d.nbDims)
    if k < 0:
        raise BadParamError("nbDimsRequested is negative")
    return d.mode, d.nan_opt, d.nbDims, list(d.window[:k]), list(d.pad[:k]), list(d.stride[:k])


@c_api(4)
def cudnnGetPooling2dForwardOutputDim(poolingDesc, inputTensorDesc):
    """(status, n, c, h, w)."""
    d = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc")
    x = desc_arg(inputTensorDesc, TensorDescriptor, "inputTensorDesc")
    if d.nbDims != 2:
        raise BadParamError(f"poolingDesc has {d.nbDims} spatial dims, not 2")
    return d.output_dims(x)


@c_api(1)
def cudnnGetPoolingNdForwardOutputDim(poolingDesc, inputTensorDesc, nbDims):
    """(status, outputTensorDimA)."""
    d = desc_arg(poolingDesc, PoolingDescriptor, "poolingDesc")
    x = desc_arg(inputTensorDesc, TensorDescriptor, "inputTensorDesc")
    nb = int_arg(nbDims, "nbDims")
    if nb != d.nbDims + 2:
        raise BadParamError(f"nbDims = {nb}, the pooling gives {d.nbDims + 2} output dims")
    return list(d.output_dims(x))


# ------------------------------------------------------------------------------- activation

class ActivationDescriptor(Descriptor):
    KIND = "Activation"

    def __init__(self):
        super().__init__()
        self.mode = cudnnActivationMode_t.CUDNN_ACTIVATION_RELU
        self.nan_opt = NAN.CUDNN_NOT_PROPAGATE_NAN
        self.coef = 0.0
        self.swish_beta = 1.0

    def signature(self):
        return (int(self.mode), int(self.nan_opt), self.coef, self.swish_beta)


@c_api(1)
def cudnnCreateActivationDescriptor():
    return ActivationDescriptor()


@c_api(0)
def cudnnDestroyActivationDescriptor(activationDesc):
    if activationDesc is None:
        return
    desc_arg(activationDesc, ActivationDescriptor, "activationDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetActivationDescriptor(activationDesc, mode, reluNanOpt, coef):
    d = desc_arg(activationDesc, ActivationDescriptor, "activationDesc", need_set=False)
    d.mode = enum_arg(cudnnActivationMode_t, mode, "mode")
    d.nan_opt = enum_arg(NAN, reluNanOpt, "reluNanOpt")
    d.coef = float_arg(coef, "coef")
    d.is_set = True


@c_api(3)
def cudnnGetActivationDescriptor(activationDesc):
    """(status, mode, reluNanOpt, coef)."""
    d = desc_arg(activationDesc, ActivationDescriptor, "activationDesc")
    return d.mode, d.nan_opt, d.coef


@c_api(0)
def cudnnSetActivationDescriptorSwishBeta(activationDesc, swish_beta):
    d = desc_arg(activationDesc, ActivationDescriptor, "activationDesc", need_set=False)
    d.swish_beta = float_arg(swish_beta, "swish_beta")


@c_api(1)
def cudnnGetActivationDescriptorSwishBeta(activationDesc):
    return desc_arg(activationDesc, ActivationDescriptor, "activationDesc", need_set=False).swish_beta


# -------------------------------------------------------------------------------- op tensor

class OpTensorDescriptor(Descriptor):
    KIND = "OpTensor"

    def __init__(self):
        super().__init__()
        self.op = cudnnOpTensorOp_t.CUDNN_OP_TENSOR_ADD
        self.comp_type = cudnnDataType_t.CUDNN_DATA_FLOAT
        self.nan_opt = NAN.CUDNN_NOT_PROPAGATE_NAN


@c_api(1)
def cudnnCreateOpTensorDescriptor():
    return OpTensorDescriptor()


@c_api(0)
def cudnnDestroyOpTensorDescriptor(opTensorDesc):
    if opTensorDesc is None:
        return
    desc_arg(opTensorDesc, OpTensorDescriptor, "opTensorDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetOpTensorDescriptor(opTensorDesc, opTensorOp, opTensorCompType, opTensorNanOpt):
    d = desc_arg(opTensorDesc, OpTensorDescriptor, "opTensorDesc", need_set=False)
    d.op = enum_arg(cudnnOpTensorOp_t, opTensorOp, "opTensorOp")
    d.comp_type = enum_arg(cudnnDataType_t, opTensorCompType, "opTensorCompType")
    d.nan_opt = enum_arg(NAN, opTensorNanOpt, "opTensorNanOpt")
    d.is_set = True


@c_api(3)
def cudnnGetOpTensorDescriptor(opTensorDesc):
    """(status, opTensorOp, opTensorCompType, opTensorNanOpt)."""
    d = desc_arg(opTensorDesc, OpTensorDescriptor, "opTensorDesc")
    return d.op, d.comp_type, d.nan_opt


# ---------------------------------------------------------------------------- reduce tensor

class ReduceTensorDescriptor(Descriptor):
    KIND = "ReduceTensor"

    def __init__(self):
        super().__init__()
        self.op = cudnnReduceTensorOp_t.CUDNN_REDUCE_TENSOR_ADD
        self.comp_type = cudnnDataType_t.CUDNN_DATA_FLOAT
        self.nan_opt = NAN.CUDNN_NOT_PROPAGATE_NAN
        self.indices = cudnnReduceTensorIndices_t.CUDNN_REDUCE_TENSOR_NO_INDICES
        self.indices_type = cudnnIndicesType_t.CUDNN_32BIT_INDICES


@c_api(1)
def cudnnCreateReduceTensorDescriptor():
    return ReduceTensorDescriptor()


@c_api(0)
def cudnnDestroyReduceTensorDescriptor(reduceTensorDesc):
    if reduceTensorDesc is None:
        return
    desc_arg(reduceTensorDesc, ReduceTensorDescriptor, "reduceTensorDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetReduceTensorDescriptor(reduceTensorDesc, reduceTensorOp, reduceTensorCompType, reduceTensorNanOpt,
                                   reduceTensorIndices, reduceTensorIndicesType):
    d = desc_arg(reduceTensorDesc, ReduceTensorDescriptor, "reduceTensorDesc", need_set=False)
    d.op = enum_arg(cudnnReduceTensorOp_t, reduceTensorOp, "reduceTensorOp")
    d.comp_type = enum_arg(cudnnDataType_t, reduceTensorCompType, "reduceTensorCompType")
    d.nan_opt = enum_arg(NAN, reduceTensorNanOpt, "reduceTensorNanOpt")
    d.indices = enum_arg(cudnnReduceTensorIndices_t, reduceTensorIndices, "reduceTensorIndices")
    d.indices_type = enum_arg(cudnnIndicesType_t, reduceTensorIndicesType, "reduceTensorIndicesType")
    d.is_set = True


@c_api(5)
def cudnnGetReduceTensorDescriptor(reduceTensorDesc):
    """(status, reduceTensorOp, reduceTensorCompType, reduceTensorNanOpt, reduceTensorIndices,
    reduceTensorIndicesType)."""
    d = desc_arg(reduceTensorDesc, ReduceTensorDescriptor, "reduceTensorDesc")
    return d.op, d.comp_type, d.nan_opt, d.indices, d.indices_type


# -------------------------------------------------------------------------------------- LRN

LRN_MIN_N, LRN_MAX_N = MACROS["CUDNN_LRN_MIN_N"], MACROS["CUDNN_LRN_MAX_N"]
LRN_MIN_K, LRN_MIN_BETA = 1e-5, 0.01


class LRNDescriptor(Descriptor):
    KIND = "LRN"

    def __init__(self):
        super().__init__()
        self.n, self.alpha, self.beta, self.k = 5, 1e-4, 0.75, 2.0
        self.is_set = True  # created with cuDNN's defaults


@c_api(1)
def cudnnCreateLRNDescriptor():
    return LRNDescriptor()


@c_api(0)
def cudnnDestroyLRNDescriptor(lrnDesc):
    if lrnDesc is None:
        return
    desc_arg(lrnDesc, LRNDescriptor, "lrnDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetLRNDescriptor(normDesc, lrnN, lrnAlpha, lrnBeta, lrnK):
    d = desc_arg(normDesc, LRNDescriptor, "normDesc")
    n = int_arg(lrnN, "lrnN")
    a, b, k = float_arg(lrnAlpha, "lrnAlpha"), float_arg(lrnBeta, "lrnBeta"), float_arg(lrnK, "lrnK")
    if not LRN_MIN_N <= n <= LRN_MAX_N:
        raise BadParamError(f"lrnN = {n} outside [{LRN_MIN_N}, {LRN_MAX_N}]")
    if k < LRN_MIN_K:
        raise BadParamError(f"lrnK = {k} < {LRN_MIN_K}")
    if b < LRN_MIN_BETA:
        raise BadParamError(f"lrnBeta = {b} < {LRN_MIN_BETA}")
    d.n, d.alpha, d.beta, d.k = n, a, b, k


@c_api(4)
def cudnnGetLRNDescriptor(normDesc):
    """(status, lrnN, lrnAlpha, lrnBeta, lrnK)."""
    d = desc_arg(normDesc, LRNDescriptor, "normDesc")
    return d.n, d.alpha, d.beta, d.k
