"""Convolution descriptors (cudnn_cnn.h): padding, strides, dilation, mode, compute type, math type,
group count, reorder type; the forward output dims.

Output size per spatial dim (cuDNN's formula):
    out = 1 + (in + 2 * pad - ((filter - 1) * dilation + 1)) / stride        (integer division)
Checks (BAD_PARAM): stride or dilation < 1, padding < 0, an invalid mode / data type / math type /
reorder enumerant, group count < 1, arrayLength < 1 (NOT_SUPPORTED above CUDNN_DIM_MAX - 2); for the
output dims: tensor / filter ranks not arrayLength + 2, input channels != filter channels * groups,
an output size < 1.
"""
from ..errors import BadParamError, CudnnError, c_api
from ..types import (MACROS, cudnnConvolutionMode_t, cudnnDataType_t, cudnnMathType_t, cudnnReorderType_t,
                     cudnnStatus_t)
from ._util import Descriptor, desc_arg, enum_arg, int_arg, int_array
from .tensor_desc import FilterDescriptor, TensorDescriptor

S = cudnnStatus_t
DIM_MAX = MACROS["CUDNN_DIM_MAX"]


class ConvolutionDescriptor(Descriptor):
    KIND = "Convolution"

    def __init__(self):
        super().__init__()
        self.pad = self.stride = self.dilation = ()
        self.mode = cudnnConvolutionMode_t.CUDNN_CROSS_CORRELATION
        self.compute_type = cudnnDataType_t.CUDNN_DATA_FLOAT
        self.math_type = cudnnMathType_t.CUDNN_DEFAULT_MATH
        self.group_count = 1
        self.reorder_type = cudnnReorderType_t.CUDNN_DEFAULT_REORDER

    @property
    def spatial_dims(self):
        return len(self.pad)

    def signature(self):
        return (self.pad, self.stride, self.dilation, int(self.mode), int(self.compute_type), self.group_count)

    def output_dims(self, x, w):
        """Forward output dims for input descriptor ``x`` and filter ``w`` (BAD_PARAM on a mismatch)."""
        n = self.spatial_dims
        if x.nbDims != n + 2 or w.nbDims != n + 2:
            raise BadParamError(f"the convolution has {n} spatial dims: input and filter need {n + 2} dims "
                                f"(they have {x.nbDims} and {w.nbDims})")
        if x.dims[1] != w.dims[1] * self.group_count:
            raise BadParamError(f"input channels {x.dims[1]} != filter channels {w.dims[1]} x group count "
                                f"{self.group_count}")
        if w.dims[0] % self.group_count:
            raise BadParamError(f"filter count {w.dims[0]} is not a multiple of group count {self.group_count}")
        out = [x.dims[0], w.dims[0]]
        for i in range(n):
            span = (w.dims[2 + i] - 1) * self.dilation[i] + 1
            o = (x.dims[2 + i] + 2 * self.pad[i] - span) // self.stride[i] + 1
            if o < 1:
                raise BadParamError(f"spatial dim {i}: input {x.dims[2 + i]} with padding {self.pad[i]} is "
                                    f"smaller than the dilated filter ({span})")
            out.append(o)
        return tuple(out)


def _set(d, pads, strides, dils, mode, computeType):
    if any(s < 1 for s in strides):
        raise BadParamError(f"filter strides {strides} must be >= 1")
    if any(v < 1 for v in dils):
        raise BadParamError(f"dilations {dils} must be >= 1")
    if any(p < 0 for p in pads):
        raise BadParamError(f"paddings {pads} must be >= 0")
    d.mode = enum_arg(cudnnConvolutionMode_t, mode, "mode")
    d.compute_type = enum_arg(cudnnDataType_t, computeType, "computeType")
    d.pad, d.stride, d.dilation = tuple(pads), tuple(strides), tuple(dils)
    d.is_set = True


@c_api(1)
def cudnnCreateConvolutionDescriptor():
    return ConvolutionDescriptor()


@c_api(0)
def cudnnDestroyConvolutionDescriptor(convDesc):
    if convDesc is None:
        return
    desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetConvolution2dDescriptor(convDesc, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType):
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False)
    vals = [int_arg(x, n) for x, n in ((pad_h, "pad_h"), (pad_w, "pad_w"), (u, "u"), (v, "v"),
                                       (dilation_h, "dilation_h"), (dilation_w, "dilation_w"))]
    _set(d, vals[0:2], vals[2:4], vals[4:6], mode, computeType)


@c_api(8)
def cudnnGetConvolution2dDescriptor(convDesc):
    """(status, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType)."""
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc")
    if d.spatial_dims != 2:
        raise BadParamError(f"convDesc has {d.spatial_dims} spatial dims, not 2: use cudnnGetConvolutionNdDescriptor")
    return d.pad + d.stride + d.dilation + (d.mode, d.compute_type)


@c_api(0)
def cudnnSetConvolutionNdDescriptor(convDesc, arrayLength, padA, filterStrideA, dilationA, mode, computeType):
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False)
    n = int_arg(arrayLength, "arrayLength")
    if n < 1:
        raise BadParamError(f"arrayLength = {n} must be >= 1")
    if n > DIM_MAX - 2:
        raise CudnnError(f"arrayLength = {n} exceeds CUDNN_DIM_MAX - 2 ({DIM_MAX - 2})", S.CUDNN_STATUS_NOT_SUPPORTED)
    _set(d, int_array(padA, n, "padA"), int_array(filterStrideA, n, "filterStrideA"),
         int_array(dilationA, n, "dilationA"), mode, computeType)


@c_api(6)
def cudnnGetConvolutionNdDescriptor(convDesc, arrayLengthRequested):
    """(status, arrayLength, padA, strideA, dilationA, mode, computeType); arrays cut to the request."""
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc")
    req = int_arg(arrayLengthRequested, "arrayLengthRequested")
    if req < 0:
        raise BadParamError(f"arrayLengthRequested = {req} is negative")
    k = min(req, d.spatial_dims)
    return d.spatial_dims, list(d.pad[:k]), list(d.stride[:k]), list(d.dilation[:k]), d.mode, d.compute_type


@c_api(0)
def cudnnSetConvolutionMathType(convDesc, mathType):
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False)
    d.math_type = enum_arg(cudnnMathType_t, mathType, "mathType")


@c_api(1)
def cudnnGetConvolutionMathType(convDesc):
    return desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False).math_type


@c_api(0)
def cudnnSetConvolutionGroupCount(convDesc, groupCount):
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False)
    g = int_arg(groupCount, "groupCount")
    if g < 1:
        raise BadParamError(f"groupCount = {g} must be >= 1")
    d.group_count = g


@c_api(1)
def cudnnGetConvolutionGroupCount(convDesc):
    return desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False).group_count


@c_api(0)
def cudnnSetConvolutionReorderType(convDesc, reorderType):
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False)
    d.reorder_type = enum_arg(cudnnReorderType_t, reorderType, "reorderType")


@c_api(1)
def cudnnGetConvolutionReorderType(convDesc):
    return desc_arg(convDesc, ConvolutionDescriptor, "convDesc", need_set=False).reorder_type


@c_api(4)
def cudnnGetConvolution2dForwardOutputDim(convDesc, inputTensorDesc, filterDesc):
    """(status, n, c, h, w) of the forward output."""
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc")
    x = desc_arg(inputTensorDesc, TensorDescriptor, "inputTensorDesc")
    w = desc_arg(filterDesc, FilterDescriptor, "filterDesc")
    if d.spatial_dims != 2:
        raise BadParamError(f"convDesc has {d.spatial_dims} spatial dims, not 2")
    return d.output_dims(x, w)


@c_api(1)
def cudnnGetConvolutionNdForwardOutputDim(convDesc, inputTensorDesc, filterDesc, nbDims):
    """(status, tensorOuputDimA): the nbDims output dims (nbDims must be the input's rank)."""
    d = desc_arg(convDesc, ConvolutionDescriptor, "convDesc")
    x = desc_arg(inputTensorDesc, TensorDescriptor, "inputTensorDesc")
    w = desc_arg(filterDesc, FilterDescriptor, "filterDesc")
    nb = int_arg(nbDims, "nbDims")
    if nb != d.spatial_dims + 2:
        raise BadParamError(f"nbDims = {nb}, the convolution gives {d.spatial_dims + 2} output dims")
    return list(d.output_dims(x, w))
