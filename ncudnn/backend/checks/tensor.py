"""Finalize checks of CUDNN_BACKEND_TENSOR_DESCRIPTOR, and :class:`TensorInfo`, what it derives."""
from dataclasses import dataclass

from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnDataType_t as DT
from ..report import bad, unsupported

#: Bytes per element (sub-byte types count as one byte for alignment purposes).
DTYPE_SIZE = {
    DT.CUDNN_DATA_FLOAT: 4, DT.CUDNN_DATA_DOUBLE: 8, DT.CUDNN_DATA_HALF: 2, DT.CUDNN_DATA_INT8: 1,
    DT.CUDNN_DATA_INT32: 4, DT.CUDNN_DATA_INT8x4: 4, DT.CUDNN_DATA_UINT8: 1, DT.CUDNN_DATA_UINT8x4: 4,
    DT.CUDNN_DATA_INT8x32: 32, DT.CUDNN_DATA_BFLOAT16: 2, DT.CUDNN_DATA_INT64: 8,
    DT.CUDNN_DATA_BOOLEAN: 1, DT.CUDNN_DATA_FP8_E4M3: 1, DT.CUDNN_DATA_FP8_E5M2: 1,
    DT.CUDNN_DATA_FAST_FLOAT_FOR_FP8: 1, DT.CUDNN_DATA_FP8_E8M0: 1, DT.CUDNN_DATA_FP4_E2M1: 1,
    DT.CUDNN_DATA_INT4: 1, DT.CUDNN_DATA_UINT4: 1, DT.CUDNN_DATA_UINT32: 4,
    DT.CUDNN_DATA_COMPLEX_FP32: 8, DT.CUDNN_DATA_COMPLEX_FP64: 16, DT.CUDNN_DATA_BYTE_BOOLEAN: 1,
    DT.CUDNN_DATA_FP8_E5M3: 1,
}

VECTOR_TYPES = (DT.CUDNN_DATA_INT8x4, DT.CUDNN_DATA_UINT8x4, DT.CUDNN_DATA_INT8x32)
INT8_VECTOR_COUNTS = (1, 4, 32)


@dataclass(frozen=True)
class TensorInfo:
    """What a finalized tensor descriptor describes."""

    uid: int
    dtype: DT
    dims: tuple
    strides: tuple
    alignment: int
    is_virtual: bool = False
    is_by_value: bool = False
    vector_count: int = 1
    vectorized_dim: int = -1
    reordering: int = 0
    ragged_offset: object = None  # the TensorInfo of CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC

    @property
    def rank(self):
        return len(self.dims)

    @property
    def numel(self):
        n = 1
        for x in self.dims:
            n *= x
        return n


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


def finalize_tensor(d):
    dims = d.values(A.CUDNN_ATTR_TENSOR_DIMENSIONS)
    strides = d.values(A.CUDNN_ATTR_TENSOR_STRIDES)
    dtype = d.value(A.CUDNN_ATTR_TENSOR_DATA_TYPE)
    align = d.value(A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT)
    if len(dims) != len(strides):
        bad(d, A.CUDNN_ATTR_TENSOR_STRIDES,
            f"{len(strides)} strides for {len(dims)} dimensions {dims}")
    for i, x in enumerate(dims):
        if x <= 0:
            bad(d, A.CUDNN_ATTR_TENSOR_DIMENSIONS, f"dimension {i} is {x}: dimensions must be positive")
    for i, s in enumerate(strides):
        if s <= 0:
            bad(d, A.CUDNN_ATTR_TENSOR_STRIDES, f"stride {i} is {s}: strides must be positive")
    elements = 1 + sum((x - 1) * s for x, s in zip(dims, strides))
    if elements * DTYPE_SIZE.get(dtype, 1) > 2 ** 63 - 1 or len(dims) and _prod(dims) > 2 ** 63 - 1:
        bad(d, A.CUDNN_ATTR_TENSOR_DIMENSIONS, f"dims {dims} strides {strides} span {elements:.4g} elements: "
            "more bytes than an int64_t (or a size_t workspace) holds")
    if dtype in VECTOR_TYPES:
        unsupported(d, A.CUDNN_ATTR_TENSOR_DATA_TYPE, f"{dtype.name} is not supported: use CUDNN_DATA_INT8 "
                    "with CUDNN_ATTR_TENSOR_VECTOR_COUNT instead")
    if align <= 0 or align % DTYPE_SIZE[dtype]:
        bad(d, A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
            f"{align} is not a positive multiple of the {DTYPE_SIZE[dtype]}-byte size of {dtype.name}")
    vcount = d.value(A.CUDNN_ATTR_TENSOR_VECTOR_COUNT)
    if vcount < 1:
        bad(d, A.CUDNN_ATTR_TENSOR_VECTOR_COUNT, f"{vcount} is not a positive vector count")
    if dtype == DT.CUDNN_DATA_INT8 and vcount not in INT8_VECTOR_COUNTS:
        unsupported(d, A.CUDNN_ATTR_TENSOR_VECTOR_COUNT,
                    f"{vcount} with CUDNN_DATA_INT8: only 1, 4 or 32 are supported")
    vdim = d.value(A.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, -1)
    if vcount != 1:
        if not d.is_set(A.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION):
            bad(d, A.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION,
                f"must be set when CUDNN_ATTR_TENSOR_VECTOR_COUNT is {vcount}")
        if not 0 <= vdim < len(dims):
            bad(d, A.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, f"{vdim} is not a dimension of a rank-{len(dims)} tensor")
    is_virtual = d.value(A.CUDNN_ATTR_TENSOR_IS_VIRTUAL)
    by_value = d.value(A.CUDNN_ATTR_TENSOR_IS_BY_VALUE)
    if is_virtual and by_value:
        bad(d, A.CUDNN_ATTR_TENSOR_IS_BY_VALUE, "a tensor cannot be both virtual and passed by value")
    ragged_desc = d.value(A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC)
    ragged = ragged_desc.state["tensor"] if ragged_desc is not None else None
    if ragged is not None and ragged.dtype not in (DT.CUDNN_DATA_INT32, DT.CUDNN_DATA_INT64):
        bad(d, A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, f"{ragged.dtype.name}: ragged offsets are INT32 or INT64")
    d.state["tensor"] = TensorInfo(
        uid=d.value(A.CUDNN_ATTR_TENSOR_UNIQUE_ID), dtype=dtype, dims=tuple(dims), strides=tuple(strides),
        alignment=align, is_virtual=is_virtual, is_by_value=by_value, vector_count=vcount,
        vectorized_dim=vdim, reordering=int(d.value(A.CUDNN_ATTR_TENSOR_REORDERING_MODE)), ragged_offset=ragged)


def tensor_of(d, name, required=True):
    """TensorInfo of the tensor descriptor set as attribute ``name`` of ``d`` (None if unset)."""
    t = d.value(name)
    if t is None:
        if required:
            bad(d, name, "required tensor not set")
        return None
    return t.state["tensor"]


FINALIZERS = {D.CUDNN_BACKEND_TENSOR_DESCRIPTOR: finalize_tensor}
