"""Tensor and filter descriptors (cudnn_ops.h): create / set / get / destroy, sizes in bytes.

Dims and strides are in elements, outermost first (N, C, spatial...). NCHW is packed row-major; NHWC
is packed channels-last; NCHW_VECT_C packs C in vectors of 4 (INT8x4 / UINT8x4 / INT8 / UINT8) or
32 (INT8x32) innermost: its strides count vectors, as cuDNN reports them.

Checks (BAD_PARAM): an invalid format or data type enumerant, a dim < 1, a negative stride,
nbDims outside 3..CUDNN_DIM_MAX (NOT_SUPPORTED above the maximum), NCHW_VECT_C with C not a
multiple of the vector size or a data type that is not 8-bit.
"""
import math

from ..errors import BadParamError, CudnnError, c_api
from ..ir.tensor import ITEMSIZE, TensorDesc, nhwc_order, packed_strides
from ..types import MACROS, cudnnDataType_t, cudnnStatus_t, cudnnTensorFormat_t
from ._util import Descriptor, desc_arg, enum_arg, int_arg, int_array

S = cudnnStatus_t
DT = cudnnDataType_t
TF = cudnnTensorFormat_t
DIM_MAX = MACROS["CUDNN_DIM_MAX"]
_VECT = {DT.CUDNN_DATA_INT8x4: 4, DT.CUDNN_DATA_UINT8x4: 4, DT.CUDNN_DATA_INT8x32: 32,
         DT.CUDNN_DATA_INT8: 4, DT.CUDNN_DATA_UINT8: 4}


class TensorDescriptor(Descriptor):
    KIND = "Tensor"

    def __init__(self):
        super().__init__()
        self.dtype = None
        self.dims = ()
        self.strides = ()
        self.format = TF.CUDNN_TENSOR_NCHW
        self.vect = 1

    @property
    def nbDims(self):
        return len(self.dims)

    def set(self, dtype, dims, strides, fmt=TF.CUDNN_TENSOR_NCHW, vect=1):
        old = (self.dtype, self.dims, self.strides, self.format, self.vect)
        self.dtype, self.dims, self.strides, self.format, self.vect = dtype, tuple(dims), tuple(strides), fmt, vect
        try:
            _check_size(self, "tensor")
        except BadParamError:
            self.dtype, self.dims, self.strides, self.format, self.vect = old
            raise
        self.is_set = True

    def size_in_bytes(self):
        if self.vect > 1:
            return math.prod(self.dims) * (1 if self.dtype in (DT.CUDNN_DATA_INT8, DT.CUDNN_DATA_UINT8)
                                           else ITEMSIZE[self.dtype] // self.vect)
        span = 1 + sum((d - 1) * s for d, s in zip(self.dims, self.strides))
        return span * ITEMSIZE.get(self.dtype, 0)

    def ir(self, uid, name="", dims=None, strides=None):
        """This descriptor as an IR tensor (optionally re-shaped, e.g. a broadcast or a collapsed view)."""
        t = TensorDesc(uid, dims=dims or self.dims, strides=strides or self.strides, dtype=self.dtype, name=name)
        if self.vect > 1:
            t.vector_count, t.vectorized_dim = self.vect, 1
        if dims or strides:  # the caller's buffer is checked against the descriptor, not the graph's view
            t.meta["declared"] = (tuple(self.dims), tuple(self.strides))
        return t

    def signature(self):
        return (int(self.dtype), self.dims, self.strides, self.vect)


class FilterDescriptor(Descriptor):
    KIND = "Filter"

    def __init__(self):
        super().__init__()
        self.dtype = None
        self.format = TF.CUDNN_TENSOR_NCHW
        self.dims = ()
        self.vect = 1

    @property
    def nbDims(self):
        return len(self.dims)

    @property
    def strides(self):
        if self.format == TF.CUDNN_TENSOR_NHWC:
            return packed_strides(self.dims, nhwc_order(len(self.dims)))
        if self.vect > 1:
            return _vect_strides(self.dims, self.vect)
        return packed_strides(self.dims)

    def size_in_bytes(self):
        per = 1 if self.vect > 1 and self.dtype in (DT.CUDNN_DATA_INT8, DT.CUDNN_DATA_UINT8) else \
            (ITEMSIZE[self.dtype] // self.vect if self.vect > 1 else ITEMSIZE.get(self.dtype, 0))
        return math.prod(self.dims) * per

    def ir(self, uid, name="w"):
        t = TensorDesc(uid, dims=self.dims, strides=self.strides, dtype=self.dtype, name=name)
        if self.vect > 1:
            t.vector_count, t.vectorized_dim = self.vect, 1
        return t

    def signature(self):
        return (int(self.dtype), self.dims, self.strides, self.vect)


def _vect_strides(dims, v):
    """NCHW_VECT_C strides in vectors: [N, C/v, spatial...] packed, C's stride 1 vector per group."""
    inner = math.prod(dims[2:])
    groups = dims[1] // v
    return (groups * inner, inner) + packed_strides(dims[2:])


#: the largest tensor in bytes: sizes are int64_t in cuDNN's graph API (and size_t in this one)
MAX_BYTES = 2 ** 63 - 1


def _check_size(d, what):
    """BAD_PARAM when the descriptor spans more bytes than an int64_t holds (dims and strides are each
    C ints, their products are not)."""
    size = d.size_in_bytes()
    if size > MAX_BYTES:
        raise BadParamError(f"{what} dims {d.dims} span {size:.4g} bytes, more than 2^63 - 1")


def _check_dims(dims, what):
    for i, d in enumerate(dims):
        if d < 1:
            raise BadParamError(f"{what}[{i}] = {d}: every dimension must be >= 1")


def _check_nb(nb, what="nbDims"):
    if nb > DIM_MAX:
        raise CudnnError(f"{what} = {nb} exceeds CUDNN_DIM_MAX ({DIM_MAX})", S.CUDNN_STATUS_NOT_SUPPORTED)
    if nb < 3:
        raise BadParamError(f"{what} = {nb}: at least 3 dimensions (use size-1 dims for lower ranks)")


def _format_strides(fmt, dtype, dims):
    """(strides, vector size) of a packed tensor of ``dims`` in format ``fmt``."""
    if fmt == TF.CUDNN_TENSOR_NCHW:
        return packed_strides(dims), 1
    if fmt == TF.CUDNN_TENSOR_NHWC:
        return packed_strides(dims, nhwc_order(len(dims))), 1
    v = _VECT.get(dtype)
    if v is None:
        raise BadParamError(f"CUDNN_TENSOR_NCHW_VECT_C needs an 8-bit data type, not {dtype.name}")
    if dims[1] % v:
        raise BadParamError(f"CUDNN_TENSOR_NCHW_VECT_C with {dtype.name}: C = {dims[1]} is not a multiple of {v}")
    return _vect_strides(dims, v), v


# ----------------------------------------------------------------------------------- tensor

@c_api(1)
def cudnnCreateTensorDescriptor():
    return TensorDescriptor()


@c_api(0)
def cudnnDestroyTensorDescriptor(tensorDesc):
    if tensorDesc is None:
        return  # destroying NULL is a no-op, as in cuDNN
    desc_arg(tensorDesc, TensorDescriptor, "tensorDesc", need_set=False).destroyed = True


@c_api(0)
def cudnnSetTensor4dDescriptor(tensorDesc, format, dataType, n, c, h, w):
    d = desc_arg(tensorDesc, TensorDescriptor, "tensorDesc", need_set=False)
    fmt = enum_arg(TF, format, "format")
    dt = enum_arg(DT, dataType, "dataType")
    dims = tuple(int_arg(v, k) for v, k in ((n, "n"), (c, "c"), (h, "h"), (w, "w")))
    _check_dims(dims, "nchw")
    strides, v = _format_strides(fmt, dt, dims)
    d.set(dt, dims, strides, fmt, v)


@c_api(0)
def cudnnSetTensor4dDescriptorEx(tensorDesc, dataType, n, c, h, w, nStride, cStride, hStride, wStride):
    d = desc_arg(tensorDesc, TensorDescriptor, "tensorDesc", need_set=False)
    dt = enum_arg(DT, dataType, "dataType")
    dims = tuple(int_arg(v, k) for v, k in ((n, "n"), (c, "c"), (h, "h"), (w, "w")))
    strides = tuple(int_arg(v, k) for v, k in ((nStride, "nStride"), (cStride, "cStride"),
                                                (hStride, "hStride"), (wStride, "wStride")))
    _check_dims(dims, "nchw")
    if any(s < 0 for s in strides):
        raise BadParamError(f"strides {strides}: a stride is negative")
    d.set(dt, dims, strides)


@c_api(9)
def cudnnGetTensor4dDescriptor(tensorDesc):
    """(status, dataType, n, c, h, w, nStride, cStride, hStride, wStride)."""
    d = desc_arg(tensorDesc, TensorDescriptor, "tensorDesc")
    if d.nbDims != 4:
        raise BadParamError(f"tensorDesc has {d.nbDims} dims, not 4: use cudnnGetTensorNdDescriptor")
    return (d.dtype,) + d.dims + d.strides


@c_api(0)
def cudnnSetTensorNdDescriptor(tensorDesc, dataType, nbDims, dimA, strideA):
    d = desc_arg(tensorDesc, TensorDescriptor, "tensorDesc", need_set=False)
    dt = enum_arg(DT, dataType, "dataType")
    nb = int_arg(nbDims, "nbDims")
    _check_nb(nb)
    dims = int_array(dimA, nb, "dimA")
    strides = int_array(strideA, nb, "strideA")
    _check_dims(dims, "dimA")
    if any(s < 0 for s in strides):
        raise BadParamError(f"strideA {strides}: a stride is negative")
    d.set(dt, dims, strides)


@c_api(0)
def cudnnSetTensorNdDescriptorEx(tensorDesc, format, dataType, nbDims, dimA):
    d = desc_arg(tensorDesc, TensorDescriptor, "tensorDesc", need_set=False)
    fmt = enum_arg(TF, format, "format")
    dt = enum_arg(DT, dataType, "dataType")
    nb = int_arg(nbDims, "nbDims")
    _check_nb(nb)
    dims = int_array(dimA, nb, "dimA")
    _check_dims(dims, "dimA")
    strides, v = _format_strides(fmt, dt, dims)
    d.set(dt, dims, strides, fmt, v)


@c_api(4)
def cudnnGetTensorNdDescriptor(tensorDesc, nbDimsRequested):
    """(status, dataType, nbDims, dimA, strideA): dimA / strideA hold min(nbDimsRequested, nbDims) entries."""
    d = desc_arg(tensorDesc, TensorDescriptor, "tensorDesc")
    req = int_arg(nbDimsRequested, "nbDimsRequested")
    if req < 0:
        raise BadParamError(f"nbDimsRequested = {req} is negative")
    k = min(req, d.nbDims)
    return d.dtype, d.nbDims, list(d.dims[:k]), list(d.strides[:k])


@c_api(1)
def cudnnGetTensorSizeInBytes(tensorDesc):
    return desc_arg(tensorDesc, TensorDescriptor, "tensorDesc").size_in_bytes()


# ----------------------------------------------------------------------------------- filter

@c_api(1)
def cudnnCreateFilterDescriptor():
    return FilterDescriptor()


@c_api(0)
def cudnnDestroyFilterDescriptor(filterDesc):
    if filterDesc is None:
        return
    desc_arg(filterDesc, FilterDescriptor, "filterDesc", need_set=False).destroyed = True


def _set_filter(d, dataType, format, dims):
    dt = enum_arg(DT, dataType, "dataType")
    fmt = enum_arg(TF, format, "format")
    _check_dims(dims, "filter dims")
    v = 1
    if fmt == TF.CUDNN_TENSOR_NCHW_VECT_C:
        v = _format_strides(fmt, dt, dims)[1]
    old = (d.dtype, d.format, d.dims, d.vect)
    d.dtype, d.format, d.dims, d.vect = dt, fmt, tuple(dims), v
    try:
        _check_size(d, "filter")
    except BadParamError:
        d.dtype, d.format, d.dims, d.vect = old
        raise
    d.is_set = True


@c_api(0)
def cudnnSetFilter4dDescriptor(filterDesc, dataType, format, k, c, h, w):
    d = desc_arg(filterDesc, FilterDescriptor, "filterDesc", need_set=False)
    dims = tuple(int_arg(v, n) for v, n in ((k, "k"), (c, "c"), (h, "h"), (w, "w")))
    _set_filter(d, dataType, format, dims)


@c_api(6)
def cudnnGetFilter4dDescriptor(filterDesc):
    """(status, dataType, format, k, c, h, w)."""
    d = desc_arg(filterDesc, FilterDescriptor, "filterDesc")
    if d.nbDims != 4:
        raise BadParamError(f"filterDesc has {d.nbDims} dims, not 4: use cudnnGetFilterNdDescriptor")
    return (d.dtype, d.format) + d.dims


@c_api(0)
def cudnnSetFilterNdDescriptor(filterDesc, dataType, format, nbDims, filterDimA):
    d = desc_arg(filterDesc, FilterDescriptor, "filterDesc", need_set=False)
    nb = int_arg(nbDims, "nbDims")
    _check_nb(nb)
    _set_filter(d, dataType, format, int_array(filterDimA, nb, "filterDimA"))


@c_api(4)
def cudnnGetFilterNdDescriptor(filterDesc, nbDimsRequested):
    """(status, dataType, format, nbDims, filterDimA[:nbDimsRequested])."""
    d = desc_arg(filterDesc, FilterDescriptor, "filterDesc")
    req = int_arg(nbDimsRequested, "nbDimsRequested")
    if req < 0:
        raise BadParamError(f"nbDimsRequested = {req} is negative")
    return d.dtype, d.format, d.nbDims, list(d.dims[:min(req, d.nbDims)])


@c_api(1)
def cudnnGetFilterSizeInBytes(filterDesc):
    return desc_arg(filterDesc, FilterDescriptor, "filterDesc").size_in_bytes()
