"""Tensor descriptors of the op-graph IR (what CUDNN_BACKEND_TENSOR_DESCRIPTOR holds)."""
import numbers
from dataclasses import dataclass, field, replace
from typing import Optional, Tuple

import numpy as np

from ..errors import CudnnError
from ..types import MACROS, cudnnBackendTensorReordering_t, cudnnDataType_t, cudnnStatus_t

S = cudnnStatus_t
DT = cudnnDataType_t
DIM_MAX = MACROS["CUDNN_DIM_MAX"]

#: bytes per element of each data type (packed sub-byte types count as 1 here; engines reject them)
ITEMSIZE = {
    DT.CUDNN_DATA_FLOAT: 4, DT.CUDNN_DATA_DOUBLE: 8, DT.CUDNN_DATA_HALF: 2, DT.CUDNN_DATA_BFLOAT16: 2,
    DT.CUDNN_DATA_INT8: 1, DT.CUDNN_DATA_UINT8: 1, DT.CUDNN_DATA_INT32: 4, DT.CUDNN_DATA_INT64: 8,
    DT.CUDNN_DATA_BOOLEAN: 1, DT.CUDNN_DATA_FP8_E4M3: 1, DT.CUDNN_DATA_FP8_E5M2: 1,
    DT.CUDNN_DATA_INT8x4: 4, DT.CUDNN_DATA_UINT8x4: 4, DT.CUDNN_DATA_INT8x32: 32,
    DT.CUDNN_DATA_FAST_FLOAT_FOR_FP8: 4, DT.CUDNN_DATA_FP8_E8M0: 1, DT.CUDNN_DATA_FP4_E2M1: 1,
    DT.CUDNN_DATA_INT4: 1, DT.CUDNN_DATA_UINT4: 1,
}

FLOAT_TYPES = frozenset({DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_DOUBLE, DT.CUDNN_DATA_HALF,
                         DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FP8_E5M2})


def numpy_dtype(dt):
    """The NumPy (ml_dtypes for bf16/fp8) dtype of a cudnnDataType_t; None where there is none."""
    import ml_dtypes

    table = {
        DT.CUDNN_DATA_FLOAT: np.float32, DT.CUDNN_DATA_DOUBLE: np.float64, DT.CUDNN_DATA_HALF: np.float16,
        DT.CUDNN_DATA_BFLOAT16: ml_dtypes.bfloat16, DT.CUDNN_DATA_INT8: np.int8,
        DT.CUDNN_DATA_UINT8: np.uint8, DT.CUDNN_DATA_INT32: np.int32, DT.CUDNN_DATA_INT64: np.int64,
        DT.CUDNN_DATA_BOOLEAN: np.bool_, DT.CUDNN_DATA_FP8_E4M3: ml_dtypes.float8_e4m3fn,
        DT.CUDNN_DATA_FP8_E5M2: ml_dtypes.float8_e5m2,
    }
    t = table.get(DT(dt))
    return np.dtype(t) if t is not None else None


def int_tuple(values, what, label="tensor"):
    """``values`` (dims or strides) as a tuple of ints; BAD_PARAM naming ``label`` and ``what`` when an
    entry is not an integer (a float, even 2.0, a bool, a string): dims are never truncated."""
    out = []
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
            raise CudnnError(f"{label}: {what}[{i}] = {v!r} is not an integer ({what} {list(values)!r})",
                             S.CUDNN_STATUS_BAD_PARAM)
        out.append(int(v))
    return tuple(out)


def overlap(dims, strides, limit=1 << 22):
    """Why a layout maps two elements to one address (None when it does not, or when it is too large
    to enumerate and not provably overlapping): a stride 0 on a dim of size > 1, or any collision."""
    for i, (d, s) in enumerate(zip(dims, strides)):
        if d > 1 and s == 0:
            return f"stride 0 on dim {i} of size {d}"
    pairs = sorted((s, d) for d, s in zip(dims, strides) if d > 1)
    reach = 0
    for s, d in pairs:
        if s <= reach:
            break
        reach += (d - 1) * s
    else:
        return None
    n = 1
    for d in dims:
        n *= d
    if n > limit:
        return None
    idx = np.zeros(1, np.int64)
    for d, s in zip(dims, strides):
        idx = (idx[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).reshape(-1)
    if np.unique(idx).size < idx.size:
        return "two elements at one address"
    return None


def packed_strides(dims, order=None):
    """Fully packed strides for ``dims``. ``order`` lists dims from outermost to innermost
    (default row-major: NCHW for 4-d)."""
    n = len(dims)
    order = list(range(n)) if order is None else list(order)
    strides = [0] * n
    s = 1
    for d in reversed(order):
        strides[d] = s
        s *= max(int(dims[d]), 1)
    return tuple(strides)


def nhwc_order(n):
    """Outer-to-inner dim order of channels-last for an n-d tensor: N, spatial..., C."""
    return [0] + list(range(2, n)) + [1]


@dataclass(eq=False)
class TensorDesc:
    """One tensor of a graph. ``dims``/``strides`` may be None on a virtual tensor until inference."""

    uid: int
    dims: Optional[Tuple[int, ...]] = None
    strides: Optional[Tuple[int, ...]] = None
    dtype: Optional[DT] = None
    alignment: int = 16
    is_virtual: bool = False
    is_by_value: bool = False
    value: object = None  # the scalar of a by-value tensor
    vector_count: int = 1
    vectorized_dim: int = -1
    reordering: cudnnBackendTensorReordering_t = cudnnBackendTensorReordering_t.CUDNN_TENSOR_REORDERING_NONE
    ragged_offset: Optional["TensorDesc"] = None
    name: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.dims is not None:
            self.dims = int_tuple(self.dims, "dims", self.label)
        if self.strides is not None:
            self.strides = int_tuple(self.strides, "strides", self.label)
        if self.dtype is not None:
            self.dtype = DT(int(self.dtype))

    # ---------------------------------------------------------------- queries
    @property
    def label(self):
        return f"tensor '{self.name}' (uid {self.uid})" if self.name else f"tensor uid {self.uid}"

    @property
    def ndim(self):
        return len(self.dims) if self.dims is not None else 0

    @property
    def itemsize(self):
        return ITEMSIZE.get(self.dtype, 0)

    @property
    def numel(self):
        return int(np.prod(self.dims)) if self.dims else 0

    def span_elements(self):
        """Elements from the first to one past the last addressed element (the buffer size needed)."""
        if not self.dims:
            return 0
        return 1 + sum((d - 1) * s for d, s in zip(self.dims, self.strides) if d > 0)

    def nbytes_needed(self):
        return self.span_elements() * self.itemsize

    def stride_order(self):
        """Dims sorted outermost -> innermost by stride (ties keep the dim order)."""
        return sorted(range(self.ndim), key=lambda i: (-self.strides[i], i))

    def is_packed(self):
        return self.strides == packed_strides(self.dims, self.stride_order())

    def is_channels_last(self):
        return self.ndim >= 3 and self.strides == packed_strides(self.dims, nhwc_order(self.ndim))

    def is_contiguous(self):
        return self.strides == packed_strides(self.dims)

    def copy(self, **changes):
        return replace(self, **changes)

    def signature(self, dynamic=False):
        """What a cache key needs of this tensor (dims/strides left out when shapes are dynamic)."""
        shape = (self.ndim, tuple(self.stride_order()) if self.strides else None) if dynamic \
            else (self.dims, self.strides)
        return (int(self.dtype) if self.dtype is not None else None, shape, self.is_virtual,
                self.is_by_value, self.alignment, self.vector_count, self.vectorized_dim,
                int(self.reordering), self.ragged_offset is not None)

    # ------------------------------------------------------------- validation
    def validate(self):
        """Descriptor-local checks (what cudnnBackendFinalize of a tensor descriptor checks)."""
        if self.is_virtual and self.is_by_value:
            raise CudnnError(f"{self.label}: a tensor cannot be both virtual and by-value",
                             S.CUDNN_STATUS_BAD_PARAM)
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise CudnnError(f"{self.label}: byte alignment {self.alignment} is not a power of two",
                             S.CUDNN_STATUS_BAD_PARAM)
        if self.dims is None:
            return  # an output to be inferred; nodes check their inputs have dims
        if self.dtype is None and not self.is_virtual:
            raise CudnnError(f"{self.label}: data type not set", S.CUDNN_STATUS_BAD_PARAM)
        if not 1 <= len(self.dims) <= DIM_MAX:
            raise CudnnError(f"{self.label}: {len(self.dims)} dims, must be 1..{DIM_MAX}",
                             S.CUDNN_STATUS_BAD_PARAM)
        if any(d <= 0 for d in self.dims):
            raise CudnnError(f"{self.label}: dims {self.dims} must all be positive", S.CUDNN_STATUS_BAD_PARAM)
        if self.strides is None:
            raise CudnnError(f"{self.label}: strides not set", S.CUDNN_STATUS_BAD_PARAM)
        if len(self.strides) != len(self.dims):
            raise CudnnError(f"{self.label}: {len(self.strides)} strides for {len(self.dims)} dims",
                             S.CUDNN_STATUS_BAD_PARAM)
        if any(s < 0 for s in self.strides):
            raise CudnnError(f"{self.label}: negative stride in {self.strides}", S.CUDNN_STATUS_BAD_PARAM)
        if self.vector_count not in (1, 4, 32):
            raise CudnnError(f"{self.label}: vector count {self.vector_count} is not 1, 4 or 32",
                             S.CUDNN_STATUS_BAD_PARAM)
        if self.vector_count > 1 and not 0 <= self.vectorized_dim < len(self.dims):
            raise CudnnError(f"{self.label}: vectorized dim {self.vectorized_dim} out of range",
                             S.CUDNN_STATUS_BAD_PARAM)
